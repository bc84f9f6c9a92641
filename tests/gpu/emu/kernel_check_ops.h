/* kernel_check_ops.h: the comparisons of kernel_check.cpp, one function per
 * group of launchers: cdk_X(...) on the emulator against be->X(...) of the
 * CPU backend on copies of the same inputs. Shapes are random within
 * ranges that reach every branch of the kernels (tile and non-tile
 * staging, one- and multi-part reductions, windows with padding, every
 * pool data type); odd values (NaN, +-0, inf, ties) are planted where an
 * op has a rule for them. beta 0 outputs start as garbage (NaN) that must
 * not leak through. */

static void t_elem(void)
{
	for (int rep = 0; rep < 3; rep++) {
		size_t n = rint_(1, 70000);
		auto x = rvec(n), y = rvec(n), a = x, b = y;
		float s = rf(-2, 2);
		std::string sz = fmt(" n=%zu", n);
		cdk_fill(0, a.data(), s, n);
		be->fill(be, b.data(), s, n);
		cmp("fill" + sz, a.data(), b.data(), n);
		a = x, b = x;
		cdk_scale(0, a.data(), s, n);
		be->scale(be, b.data(), s, n);
		cmp("scale" + sz, a.data(), b.data(), n);
		a = y, b = y;
		cdk_axpy(0, s, x.data(), a.data(), n);
		be->axpy(be, s, x.data(), b.data(), n);
		cmp("axpy" + sz, a.data(), b.data(), n);
		cdk_add(0, x.data(), y.data(), a.data(), n);
		be->add(be, x.data(), y.data(), b.data(), n);
		cmp("add" + sz, a.data(), b.data(), n);
		{                                    /* a == b at two elements */
			auto u = y;
			u[0] = x[0], u[n - 1] = x[n - 1] = -0.0f;
			for (int absval = 0; absval <= 1; absval++) {
				std::string nm = fmt(" abs=%d", absval) + sz;
				cdk_diff_fwd(0, absval, x.data(), u.data(), a.data(), n);
				be->diff_fwd(be, absval, x.data(), u.data(), b.data(), n);
				cmp("diff_fwd" + nm, a.data(), b.data(), n);
				for (int beta = 0; beta <= 1; beta++) {
					auto g = rvec(n), da = y, db = y;
					if (!beta)
						da[n / 2] = db[n / 2] = NAN;
					float sign = beta ? -1.0f : 1.0f;
					cdk_diff_bwd(0, absval, x.data(), u.data(), g.data(), sign, da.data(),
					             (float)beta, n);
					be->diff_bwd(be, absval, x.data(), u.data(), g.data(), sign, db.data(),
					             (float)beta, n);
					cmp(fmt("diff_bwd beta %d", beta) + nm, da.data(), db.data(), n);
				}
			}
		}
		double out[2] = { -1, -1 };
		cdk_sumsq(0, x.data(), n, scratch(n), out);
		cmp_d("sumsq" + sz, out[0], be->sumsq(be, x.data(), n), sum_tol(n));
		x[n / 2] = NAN, x[0] = 0.0f, x[n - 1] = -0.0f;
		for (int kind : { CDP_ACT_RELU, CDP_ACT_LEAKY }) {
			std::string nm = fmt(" kind %d", kind) + sz;
			a = y, b = y;
			cdk_act_fwd(0, kind, 0.1f, x.data(), a.data(), n);
			be->act_fwd(be, kind, 0.1f, x.data(), b.data(), n);
			cmp("act_fwd" + nm, a.data(), b.data(), n);
			for (int beta = 0; beta <= 1; beta++) {
				auto g = rvec(n), da = y, db = y;
				if (!beta)
					da[0] = db[0] = NAN;
				cdk_act_bwd(0, kind, 0.1f, b.data(), g.data(), da.data(), (float)beta, n);
				be->act_bwd(be, kind, 0.1f, b.data(), g.data(), db.data(), (float)beta, n);
				cmp(fmt("act_bwd beta %d", beta) + nm, da.data(), db.data(), n);
			}
			auto da = y, db = y;                 /* in place: dx == dy */
			cdk_act_bwd(0, kind, 0.1f, b.data(), da.data(), da.data(), 0.0f, n);
			be->act_bwd(be, kind, 0.1f, b.data(), db.data(), db.data(), 0.0f, n);
			cmp("act_bwd in place" + nm, da.data(), db.data(), n);
		}
	}
	double out[1] = { -1 };
	cdk_sumsq(0, NULL, 0, scratch(0), out);
	cmp_d("sumsq n=0", out[0], 0.0, 0);
}

/* upsampling, channel slices, global average pooling, bias_add */
static void t_layers(void)
{
	for (int rep = 0; rep < 12; rep++) {
		int n = rint_(1, 3), c = rint_(1, 4), h = rep ? rint_(1, 9) : 1, w = rep ? rint_(1, 9) : 1;
		/* x2 in every third, else any size up (a factor 1..4, or not) */
		int oh = rep % 3 ? h * rint_(1, 4) + rint_(0, 2) : 2 * h;
		int ow = rep % 3 ? w * rint_(1, 4) + rint_(0, 2) : 2 * w;
		size_t in = (size_t)n * c * h * w, out = (size_t)n * c * oh * ow;
		std::string sh = fmt(" (%d,%d,%d,%d) -> (%d,%d)", n, c, h, w, oh, ow);
		auto x = rvec(in), dy = rvec(out);
		if (rep % 3 == 1)
			dy[cdp_rng_below(&rng, 2 * ow)] = INFINITY;  /* rows 0-1: weight-0 terms count */
		if (rep % 3 == 2)
			dy[cdp_rng_below(&rng, out)] = -0.0f;
		for (int mode : { CDP_UP_NEAREST, CDP_UP_BILINEAR }) {
			std::vector<float> a(out, NAN), b(out, NAN);
			cdk_upsample_fwd(0, mode, n, c, h, w, oh, ow, x.data(), a.data());
			be->upsample_fwd(be, mode, n, c, h, w, oh, ow, x.data(), b.data());
			cmp(fmt("upsample_fwd mode %d", mode) + sh, a.data(), b.data(), out);
			for (int beta = 0; beta <= 1; beta++) {
				auto init = rvec(in);
				if (!beta)
					init[0] = NAN;
				auto da = init, db = init;
				cdk_upsample_bwd(0, mode, n, c, h, w, oh, ow, dy.data(), da.data(), (float)beta);
				be->upsample_bwd(be, mode, n, c, h, w, oh, ow, dy.data(), db.data(), (float)beta);
				cmp(fmt("upsample_bwd mode %d beta %d", mode, beta) + sh, da.data(), db.data(), in);
			}
		}
		int hw = h * w, big = c + rint_(0, 5), off = rint_(0, big - c);
		auto src = rvec((size_t)n * c * hw), bigt = rvec((size_t)n * big * hw);
		for (int beta = 0; beta <= 1; beta++) {
			std::string nm = fmt(" beta %d into %d channels at %d", beta, big, off) + sh;
			auto a = bigt, b = bigt;
			cdk_chan_copy(0, n, c, hw, src.data(), a.data(), big, off, (float)beta);
			be->chan_copy(be, n, c, hw, src.data(), b.data(), big, off, (float)beta);
			cmp("chan_copy" + nm, a.data(), b.data(), bigt.size());
			auto sa = src, sb = src;
			cdk_chan_slice(0, n, c, hw, bigt.data(), big, off, sa.data(), (float)beta);
			be->chan_slice(be, n, c, hw, bigt.data(), big, off, sb.data(), (float)beta);
			cmp("chan_slice" + nm, sa.data(), sb.data(), src.size());
		}
		std::vector<float> ga((size_t)n * c, NAN), gb((size_t)n * c, NAN);
		cdk_gap_fwd(0, n, c, hw, x.data(), ga.data());
		be->gap_fwd(be, n, c, hw, x.data(), gb.data());
		cmp("gap_fwd" + sh, ga.data(), gb.data(), ga.size(), 2e-7);
		for (int beta = 0; beta <= 1; beta++) {
			auto da = x, db = x;
			cdk_gap_bwd(0, n, c, hw, ga.data(), da.data(), (float)beta);
			be->gap_bwd(be, n, c, hw, ga.data(), db.data(), (float)beta);
			cmp(fmt("gap_bwd beta %d", beta) + sh, da.data(), db.data(), in);
		}
		auto bias = rvec(c), ya = x, yb = x;
		cdk_bias_add(0, n, c, hw, bias.data(), ya.data());
		be->bias_add(be, n, c, hw, bias.data(), yb.data());
		cmp("bias_add" + sh, ya.data(), yb.data(), in);
	}
	int n = 2, c = 3, hw = 5000;         /* planes longer than a block */
	auto x = rvec((size_t)n * c * hw);
	std::vector<float> ga(n * c), gb(n * c);
	cdk_gap_fwd(0, n, c, hw, x.data(), ga.data());
	be->gap_fwd(be, n, c, hw, x.data(), gb.data());
	cmp("gap_fwd (2,3,5000)", ga.data(), gb.data(), ga.size(), 2e-7);
}

/* every path of cdk_bias_grad: one part per channel, several parts, one
 * channel over many, parts cut to fit 1024 blocks (to 2 parts for f = 400,
 * to 1 for f > 1024) */
static void t_bias_grad(void)
{
	static const int shapes[][3] = { { 2, 3, 10 }, { 3, 5, 9000 }, { 2, 64, 3000 }, { 4, 1, 70000 },
	                                 { 1, 400, 8200 }, { 1, 1030, 4200 } };
	for (const auto &sh : shapes) {
		int n = sh[0], f = sh[1], hw = sh[2];
		auto dy = rvec((size_t)n * f * hw), da = rvec(f), db = da;
		cdk_bias_grad(0, n, f, hw, dy.data(), da.data(), scratch((size_t)n * f * hw));
		be->bias_grad(be, n, f, hw, dy.data(), db.data());
		cmp(fmt("bias_grad (%d,%d,%d)", n, f, hw), da.data(), db.data(), f, 1e-6);
	}
}

static void t_dropout(void)
{
	for (int rep = 0; rep < 3; rep++) {
		size_t n = rint_(1, 100000);
		float p = rep ? rf(0.05f, 0.9f) : 0.0f;
		uint64_t seed = cdp_rng_next(&rng);
		std::string nm = fmt(" p %.3f n=%zu", p, n);
		auto x = rvec(n), ya = x, yb = x;
		std::vector<uint8_t> ma(n, 7), mb(n, 9);
		cdk_dropout_fwd(0, p, seed, x.data(), ya.data(), ma.data(), n);
		be->dropout_fwd(be, p, seed, x.data(), yb.data(), mb.data(), n);
		cmp("dropout_fwd" + nm, ya.data(), yb.data(), n);
		cmp_mem("dropout mask" + nm, ma.data(), mb.data(), n);
		for (int beta = 0; beta <= 1; beta++) {
			auto da = x, db = x;
			cdk_dropout_bwd(0, p, ma.data(), yb.data(), da.data(), (float)beta, n);
			be->dropout_bwd(be, p, mb.data(), yb.data(), db.data(), (float)beta, n);
			cmp(fmt("dropout_bwd beta %d", beta) + nm, da.data(), db.data(), n);
		}
	}
}

static void t_pool(void)
{
	static const int cfgs[][3] = { { 2, 2, 0 }, { 3, 1, 1 }, { 3, 2, 1 }, { 2, 1, 0 }, { 3, 3, 0 },
	                               { 5, 2, 2 }, { 1, 1, 0 } };
	for (const auto &k : cfgs)
		for (int rep = 0; rep < 4; rep++) {
			cdp_pool_desc d = {};
			d.n = rint_(1, 2), d.c = rint_(1, 3), d.h = rint_(k[0], 11), d.w = rint_(k[0], 11);
			d.k = k[0], d.stride = k[1], d.pad = k[2];
			if (cdp_pool_desc_init(&d) < 0)
				continue;
			size_t in = (size_t)d.n * d.c * d.h * d.w, out = (size_t)d.n * d.c * d.oh * d.ow;
			std::vector<float> x(in);
			for (auto &v : x)
				v = (float)rint_(-2, 2);             /* many ties */
			if (rep == 1)
				x[cdp_rng_below(&rng, in)] = NAN;
			if (rep == 2)
				for (auto &v : x)
					v = -INFINITY;
			std::vector<float> ya(out, NAN), yb(out, NAN);
			std::vector<int32_t> ia(out, -5), ib(out, -7);
			cdk_maxpool_fwd(0, &d, x.data(), ya.data(), ia.data());
			be->maxpool_fwd(be, &d, x.data(), yb.data(), ib.data());
			std::string nm = fmt("maxpool k%d s%d p%d (%d,%d,%d,%d)", d.k, d.stride, d.pad, d.n,
			                     d.c, d.h, d.w);
			cmp(nm + " fwd", ya.data(), yb.data(), out);
			cmp_mem(nm + " argmax", ia.data(), ib.data(), out);
			auto dy = rvec(out);
			for (int beta = 0; beta <= 1; beta++) {
				auto da = rvec(in), db = da;
				cdk_maxpool_bwd(0, &d, dy.data(), ib.data(), da.data(), (float)beta);
				be->maxpool_bwd(be, &d, x.data(), yb.data(), dy.data(), ib.data(), db.data(),
				                (float)beta);
				cmp(nm + fmt(" bwd beta %d", beta), da.data(), db.data(), in);
			}
		}
}

static void t_loss(void)
{
	for (int rep = 0; rep < 8; rep++) {
		int n = rint_(1, 3), k = rint_(2, 6), hw = rep == 7 ? 1 : rint_(1, 3000);
		int ignore = rep % 2 ? 255 : -1;
		size_t np = (size_t)n * hw, ne = np * k;
		std::string sh = fmt(" (%d,%d,%d) ignore %d", n, k, hw, ignore);
		auto x = rvec(ne, -8, 8);
		std::vector<int32_t> lab(np);
		for (auto &l : lab) {                       /* some ignored, some out of [0, k) */
			int r = rint_(0, 20);
			l = r < 2 ? ignore : r == 2 ? k + 1 : r % k;
		}
		auto cw = rvec(k, 0.1f, 2.0f);
		for (int wt = 0; wt <= 1; wt++) {
			std::string nm = (wt ? " weighted" : "") + sh;
			auto da = rvec(ne), db = rvec(ne);
			double out[2] = { -1, -1 }, cnt = -2;
			float gs = 1.0f / (float)np;
			cdk_softmax_ce(0, n, k, hw, x.data(), lab.data(), ignore, wt ? cw.data() : NULL,
			               da.data(), gs, scratch(ne), out);
			double l = be->softmax_ce(be, n, k, hw, x.data(), lab.data(), ignore,
			                          wt ? cw.data() : NULL, db.data(), gs, &cnt);
			cmp_d("softmax_ce loss" + nm, out[0], l, sum_tol(np));
			cmp_d("softmax_ce count" + nm, out[1], cnt, sum_tol(np));
			cmp("softmax_ce dlogits" + nm, da.data(), db.data(), ne);
		}
		auto xb = rvec(np, -8, 8);
		std::vector<int32_t> lb(np);
		for (auto &l : lb) {
			int r = rint_(0, 9);
			l = r == 0 ? ignore : r < 5 ? 0 : r;
		}
		auto da = rvec(np), db = rvec(np);
		double out[2] = { -1, -1 }, cnt = -2;
		cdk_bce_logits(0, n, hw, xb.data(), lb.data(), ignore, da.data(), 0.5f, scratch(np), out);
		double l = be->bce_logits(be, n, hw, xb.data(), lb.data(), ignore, db.data(), 0.5f, &cnt);
		cmp_d("bce loss" + sh, out[0], l, sum_tol(np));
		cmp_d("bce count" + sh, out[1], cnt, sum_tol(np));
		cmp("bce dlogits" + sh, da.data(), db.data(), np);
		/* regression: (n, k, hw) predictions against targets, some NaN */
		auto tg = rvec(ne, -8, 8);
		for (size_t i = 0; i < ne; i += (size_t)rint_(1, 9))
			tg[i] = NAN;
		for (int kind : { CDP_REG_MSE, CDP_REG_L1, CDP_REG_HUBER }) {
			std::string nm = fmt(" kind %d", kind) + sh;
			auto ra = rvec(ne), rb = rvec(ne);
			double ro[2] = { -1, -1 }, rc = -2;
			cdk_reg_loss(0, kind, ne, x.data(), tg.data(), 1.5f, ra.data(), 0.25f, scratch(ne),
			             ro);
			double rl = be->reg_loss(be, kind, n, k, hw, x.data(), tg.data(), 1.5f, rb.data(),
			                         0.25f, &rc);
			cmp_d("reg_loss" + nm, ro[0], rl, sum_tol(ne));
			cmp_d("reg_loss count" + nm, ro[1], rc, sum_tol(ne));
			cmp("reg_loss dpred" + nm, ra.data(), rb.data(), ne);
		}
		for (int all_ignored = 0; all_ignored <= 1; all_ignored++)
			for (float sm : { 1.0f, 0.0f }) {
				std::string nm = fmt(" smooth %g%s", sm, all_ignored ? " all ignored" : "") + sh;
				auto l2 = lb;
				if (all_ignored)
					for (auto &v : l2)
						v = ignore;
				auto ga = rvec(np), gb = ga;
				double o[1] = { -1 };
				cdk_dice_logits(0, n, hw, xb.data(), l2.data(), ignore, sm, NULL, ga.data(),
				                0.7f, scratch(np), o);
				double dl = be->dice_logits(be, n, hw, xb.data(), l2.data(), ignore, sm, NULL,
				                            gb.data(), 0.7f);
				cmp_d("dice loss" + nm, o[0], dl, 4 * sum_tol(np));
				cmp("dice dlogits" + nm, ga.data(), gb.data(), np, 1e-6);
				/* the sums, and the gradient from totals given (a
				 * larger batch's: here twice these) */
				double ts[3] = { -1, -1, -1 }, tb[3];
				cdk_dice_sums(0, n, hw, xb.data(), l2.data(), ignore, scratch(np), ts);
				be->dice_sums(be, n, hw, xb.data(), l2.data(), ignore, tb);
				for (int j = 0; j < 3; j++) {
					cmp_d(fmt("dice sum %d", j) + nm, ts[j], tb[j], sum_tol(np));
					tb[j] *= 2;
				}
				cdk_dice_logits(0, n, hw, xb.data(), l2.data(), ignore, sm, tb, ga.data(),
				                0.7f, scratch(np), o);
				be->dice_logits(be, n, hw, xb.data(), l2.data(), ignore, sm, tb, gb.data(),
				                0.7f);
				cmp("dice dlogits, totals given" + nm, ga.data(), gb.data(), np, 1e-6);
			}
		for (int kk : { 1, k }) {
			std::vector<int32_t> pa(np, -3), pb(np, -4);
			auto xx = x;
			xx[0] = NAN;
			cdk_argmax(0, n, kk, hw, xx.data(), pa.data());
			be->argmax(be, n, kk, hw, xx.data(), pb.data());
			cmp_mem(fmt("argmax k=%d", kk) + sh, pa.data(), pb.data(), np);
		}
	}
	for (int k : { 3, 32, 40 }) {                       /* shared and global histograms */
		int ne = rint_(1, 200000), ignore = 255;
		std::vector<int32_t> lab(ne), pred(ne);
		for (int i = 0; i < ne; i++) {
			lab[i] = rint_(0, 30) == 0 ? ignore : rint_(-1, k);
			pred[i] = rint_(-1, k);
		}
		std::vector<unsigned long long> ca((size_t)k * k, 5);
		std::vector<uint64_t> cb((size_t)k * k, 5);
		cdk_confusion(0, ne, k, lab.data(), pred.data(), ignore, ca.data());
		be->confusion(be, ne, k, lab.data(), pred.data(), ignore, cb.data());
		static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "counts");
		cmp_mem(fmt("confusion k=%d n=%d", k, ne), (const uint64_t *)ca.data(), cb.data(), cb.size());
	}
}

static void t_optim(void)
{
	size_t n = 50000;
	for (float mu : { 0.0f, 0.9f })
		for (int nest = 0; nest <= 1; nest++) {
			std::string nm = fmt(" mu %g nesterov %d, 3 steps", mu, nest);
			auto wa = rvec(n), wb = wa, va = rvec(n), vb = va;
			for (int step = 0; step < 3; step++) {
				auto g = rvec(n);
				cdk_sgd_step(0, wa.data(), g.data(), mu ? va.data() : NULL, n, 0.1f, mu, 1e-4f, nest,
				             step == 0);
				be->sgd_step(be, wb.data(), g.data(), mu ? vb.data() : NULL, n, 0.1f, mu, 1e-4f, nest,
				             step == 0);
			}
			cmp("sgd w" + nm, wa.data(), wb.data(), n);
			cmp("sgd v" + nm, va.data(), vb.data(), n);
		}
	for (float b1 : { 0.9f, 0.3f }) {
		std::string nm = fmt(" b1 %g, 4 steps", b1);
		auto wa = rvec(n), wb = wa;
		std::vector<float> ma(n, 0), mb(n, 0), va(n, 0), vb(n, 0);
		for (long t = 1; t <= 4; t++) {
			auto g = rvec(n);
			cdk_adamw_step(0, wa.data(), g.data(), ma.data(), va.data(), n, 1e-3f, b1, 0.999f, 1e-8f,
			               1e-2f, t);
			be->adamw_step(be, wb.data(), g.data(), mb.data(), vb.data(), n, 1e-3f, b1, 0.999f, 1e-8f,
			               1e-2f, t);
		}
		cmp("adamw w" + nm, wa.data(), wb.data(), n);
		cmp("adamw m" + nm, ma.data(), mb.data(), n);
		cmp("adamw v" + nm, va.data(), vb.data(), n);
	}
}

/* the 16-bit value of x in prec, by cuda_fp16.h / cuda_bf16.h on the host */
static uint16_t half_bits(int prec, float x)
{
	uint16_t r;
	if (prec == CDP_PREC_BF16) {
		__nv_bfloat16 b = __float2bfloat16_rn(x);
		memcpy(&r, &b, 2);
	} else {
		__half h = __float2half_rn(x);
		memcpy(&r, &h, 2);
	}
	return r;
}

static float half_value(int prec, uint16_t bits)
{
	__nv_bfloat16_raw br;
	__half_raw hr;
	br.x = hr.x = bits;
	return prec == CDP_PREC_BF16 ? __bfloat162float(__nv_bfloat16(br)) : __half2float(__half(hr));
}

/* to_nhwc / from_nhwc below and from 16 channels (tiles), to/from_half;
 * tf32's float staging: the transpose alone, bit for bit */
static void t_prec(void)
{
	for (int c : { 1, 3, 16, 40 }) {
		int n = rint_(1, 3), h = rint_(1, 9), w = rint_(1, 40), hw = h * w;
		size_t len = (size_t)n * c * hw;
		std::string sh = fmt(" tf32 (%d,%d,%d,%d)", n, c, h, w);
		auto x = rvec(len, -100, 100), want = x, back = rvec(len), ref = back;
		std::vector<float> y(len, NAN);
		for (int s = 0; s < n; s++)
			for (int ch = 0; ch < c; ch++)
				for (int p = 0; p < hw; p++) {
					want[((size_t)s * hw + p) * c + ch] = x[((size_t)s * c + ch) * hw + p];
					ref[((size_t)s * c + ch) * hw + p] += x[((size_t)s * c + ch) * hw + p];
				}
		cdk_to_nhwc_half(0, CDP_PREC_TF32, n, c, h, w, x.data(), y.data());
		cmp("to_nhwc float" + sh, y.data(), want.data(), len);
		cdk_from_nhwc_half(0, CDP_PREC_TF32, n, c, h, w, want.data(), back.data(), 1.0f);
		cmp("from_nhwc float beta 1" + sh, back.data(), ref.data(), len);
	}
	for (int prec : { CDP_PREC_BF16, CDP_PREC_FP16 })
		for (int c : { 1, 3, 15, 16, 40, 70 }) {
			int n = rint_(1, 3), h = rint_(1, 9), w = rint_(1, 40), hw = h * w;
			size_t len = (size_t)n * c * hw;
			std::string sh = fmt(" prec %d (%d,%d,%d,%d)", prec, n, c, h, w);
			auto x = rvec(len, -100, 100);
			std::vector<uint16_t> y(len, 0xdead), want(len);
			for (int s = 0; s < n; s++)
				for (int ch = 0; ch < c; ch++)
					for (int p = 0; p < hw; p++)
						want[((size_t)s * hw + p) * c + ch] = half_bits(prec, x[((size_t)s * c + ch) * hw + p]);
			cdk_to_nhwc_half(0, prec, n, c, h, w, x.data(), y.data());
			cmp_mem("to_nhwc_half" + sh, y.data(), want.data(), len);
			for (int beta = 0; beta <= 1; beta++) {
				auto ya = rvec(len), yb = ya;
				if (!beta)
					ya[0] = yb[0] = NAN;
				cdk_from_nhwc_half(0, prec, n, c, h, w, want.data(), ya.data(), (float)beta);
				for (int s = 0; s < n; s++)
					for (int ch = 0; ch < c; ch++)
						for (int p = 0; p < hw; p++) {
							float f = half_value(prec, want[((size_t)s * hw + p) * c + ch]);
							float &o = yb[((size_t)s * c + ch) * hw + p];
							o = beta ? o + f : f;
						}
				cmp(fmt("from_nhwc_half beta %d", beta) + sh, ya.data(), yb.data(), len);
			}
			std::vector<uint16_t> z(len, 0xdead), zw(len);
			for (size_t i = 0; i < len; i++)
				zw[i] = half_bits(prec, x[i]);
			cdk_to_half(0, prec, x.data(), z.data(), len);
			cmp_mem("to_half" + sh, z.data(), zw.data(), len);
			std::vector<float> back(len, 1.0f), ref(len);
			for (size_t i = 0; i < len; i++)
				ref[i] = 1.0f + half_value(prec, zw[i]);
			cdk_from_half(0, prec, zw.data(), back.data(), 1.0f, len);
			cmp("from_half beta 1" + sh, back.data(), ref.data(), len);
			if (prec != CDP_PREC_BF16)
				continue;
			/* the CUDA backend's to_bf16 / from_bf16 (the bf16 stash of
			 * net_plan.c) are these launches: the CPU's ops' bits */
			std::vector<uint16_t> zc(len);
			std::vector<float> bc(len), bd(len, 7.0f);
			be->to_bf16(be, x.data(), zc.data(), len);
			cmp_mem("to_bf16 = cpu" + sh, z.data(), zc.data(), len);
			be->from_bf16(be, zc.data(), bc.data(), len);
			cdk_from_half(0, prec, zc.data(), bd.data(), 0.0f, len);
			cmp_mem("from_bf16 = cpu" + sh, bd.data(), bc.data(), len);
		}
}

/* every pool data type, crops, flips, quarter turns (square outputs) */
static void t_data(void)
{
	for (int dt : { CDP_DT_U8, CDP_DT_U16, CDP_DT_I16, CDP_DT_U32, CDP_DT_I32, CDP_DT_F32, CDP_DT_F64 })
		for (int rep = 0; rep < 4; rep++) {
			int n = rint_(1, 4), c = rint_(1, 4), h = rint_(2, 12), w = rint_(2, 12);
			int sq = rep & 1, oh = rint_(1, h), ow = sq ? oh : rint_(1, w);
			if (sq && oh > w)
				oh = ow = w < h ? w : h;
			size_t len = (size_t)n * c * h * w, es = cdp_dtype_size(dt);
			std::vector<unsigned char> raw(len * es);
			for (auto &b : raw)
				b = (unsigned char)cdp_rng_next(&rng);
			for (size_t i = 0; i < len; i++)       /* finite floats: NaN bits would compare unequal */
				if (dt == CDP_DT_F32) {
					float v = rf(-1e4, 1e4);
					memcpy(&raw[i * 4], &v, 4);
				} else if (dt == CDP_DT_F64) {
					double v = rf(-1e4, 1e4) * 1.000000123;
					memcpy(&raw[i * 8], &v, 8);
				}
			std::vector<cdp_prep_aug> aug(n);
			for (auto &a : aug) {
				a.y0 = rint_(0, h - oh), a.x0 = rint_(0, w - ow);
				a.hflip = rint_(0, 1), a.vflip = rint_(0, 1);
				a.rot = sq ? rint_(0, 3) : 2 * rint_(0, 1);
			}
			auto mean = rvec(c, -100, 100), inv = rvec(c, 0.001f, 2.0f);
			std::vector<int32_t> lraw((size_t)n * h * w);
			for (auto &l : lraw)
				l = (int32_t)cdp_rng_next(&rng);
			size_t olen = (size_t)n * c * oh * ow, ol = (size_t)n * oh * ow;
			std::vector<float> ia(olen, NAN), ib(olen, NAN);
			std::vector<int32_t> la(ol, 1), lb(ol, 2);
			std::string nm = fmt(" dt %s (%d,%d,%d,%d) -> %dx%d", cdp_dtype_name(dt), n, c, h, w, oh, ow);
			cdk_prep_batch(0, dt, n, c, h, w, raw.data(), mean.data(), inv.data(), aug.data(), oh, ow,
			               ia.data(), lraw.data(), la.data());
			be->prep_batch(be, dt, n, c, h, w, raw.data(), mean.data(), inv.data(), aug.data(), oh, ow,
			               ib.data(), lraw.data(), lb.data());
			cmp("prep_batch img" + nm, ia.data(), ib.data(), olen);
			cmp_mem("prep_batch labels" + nm, la.data(), lb.data(), ol);
		}
}

/* cdp-predict's windows: origins on its grid and scattered (before the
 * strip, past it, wider than it), sigmoid and softmax (more classes than
 * cpu_window.c keeps on its stack too) and values blended linearly (k <
 * 0, a regression head); sums that already hold values.
 * Bitwise: the emulated blend calls the host's expf, as the CPU does. */
static void t_window(void)
{
	for (int rep = 0; rep < 12; rep++) {
		int c = rint_(1, 4), r = rint_(1, 12), w = rint_(1, 60), s = rint_(1, 20);
		int nb = rint_(1, 6), kk = rep == 11 ? 40 : rint_(1, 5), grid = rep & 1;
		int k = rep % 3 == 2 ? -kk : kk;     /* k < 0: values blended linearly */
		std::vector<int32_t> srow(s), x0(nb);
		for (auto &y : srow)
			y = rint_(0, r - 1);
		for (int b = 0; b < nb; b++)
			x0[b] = grid ? -(s / 8) + b * (s - s / 4) : rint_(-2 * s, w + s);
		auto strip = rvec((size_t)c * r * w), logits = rvec((size_t)nb * kk * s * s, -12, 12);
		auto w1 = rvec(s, 0, 1), sa = rvec((size_t)kk * s * w, 0, 2), sb = sa;
		size_t nx = (size_t)nb * c * s * s;
		std::vector<float> xa(nx, NAN), xb(nx, 1);
		std::string nm = fmt(" c %d k %d (r %d, w %d) s %d nb %d%s", c, k, r, w, s, nb,
		                     grid ? " grid" : "");
		cdk_win_gather(0, c, r, w, s, strip.data(), srow.data(), nb, x0.data(), xa.data());
		be->win_gather(be, c, r, w, s, strip.data(), srow.data(), nb, x0.data(), xb.data());
		cmp("win_gather" + nm, xa.data(), xb.data(), nx);
		cdk_win_blend(0, k, s, w, nb, logits.data(), x0.data(), w1.data(), sa.data());
		be->win_blend(be, k, s, w, nb, logits.data(), x0.data(), w1.data(), sb.data());
		cmp("win_blend" + nm, sa.data(), sb.data(), sa.size());
	}
}

/* batchnorm's training forward over one value per channel (cdk_bn_train1)
 * against the CPU's with n = hw = 1: y, the saved and the running
 * statistics bit for bit, for every activation, with +-0, an infinity and
 * a NaN among the inputs (their statistics are NaN on both sides) */
static void t_bn1(void)
{
	for (int rep = 0; rep < 4; rep++) {
		int c = rep ? rint_(1, 600) : 1;
		float mom = rep == 3 ? 1.0f : rf(0, 1), eps = rep == 2 ? 1e-3f : 1e-5f;
		auto x = rvec(c), g = rvec(c, 0.5f, 1.5f), bt = rvec(c), rm = rvec(c), rv = rvec(c, 0, 2);
		if (c > 4)
			x[0] = -0.0f, x[1] = 0.0f, x[2] = INFINITY, x[3] = NAN, bt[4] = -0.0f;
		for (int act : { 0, (int)CDP_ACT_RELU, (int)CDP_ACT_LEAKY }) {
			std::string sh = fmt(" act %d (1,%d,1) momentum %g eps %g", act, c, mom, eps);
			std::vector<float> ya(c, NAN), yb(c, NAN), sma(c, NAN), smb(c, NAN), sia(c, NAN),
				sib(c, NAN);
			auto rma = rm, rmb = rm, rva = rv, rvb = rv;
			cdk_bn_train1(0, c, x.data(), g.data(), bt.data(), ya.data(), rma.data(), rva.data(),
			              mom, eps, sma.data(), sia.data(), act, 0.1f);
			be->bn_fwd_train(be, 1, c, 1, x.data(), g.data(), bt.data(), yb.data(), rmb.data(),
			                 rvb.data(), mom, eps, smb.data(), sib.data(), act, 0.1f);
			cmp("bn_train1 y" + sh, ya.data(), yb.data(), c);
			cmp("bn_train1 save_mean" + sh, sma.data(), smb.data(), c);
			cmp("bn_train1 save_invstd" + sh, sia.data(), sib.data(), c);
			cmp("bn_train1 running mean" + sh, rma.data(), rmb.data(), c);
			cmp("bn_train1 running var" + sh, rva.data(), rvb.data(), c);
			/* without running statistics (both NULL) the rest is the same */
			std::vector<float> yc(c, NAN);
			cdk_bn_train1(0, c, x.data(), g.data(), bt.data(), yc.data(), NULL, NULL, mom, eps,
			              NULL, NULL, act, 0.1f);
			cmp("bn_train1 y without statistics" + sh, yc.data(), yb.data(), c);
		}
	}
}

/* the 2x2 stride-2 data gradient (cdk_deconv2) against the CPU's
 * conv_bwd_data of the same descriptor: several blocks along (i, j), a
 * partial last block, one filter and many, beta 0 (garbage in dx) and 1.
 * Float sums of f products in another order: within 1e-5 of the sums'
 * scale (the terms are below 9: 9 sqrt(f)). */
static void t_deconv2(void)
{
	static const int shapes[][5] = { { 2, 3, 4, 5, 7 }, { 1, 16, 1, 9, 40 }, { 3, 2, 33, 12, 20 },
	                                 { 1, 5, 64, 3, 3 } };
	report("deconv2 takes 1 to 1024 filters", !(cdk_deconv2_fits(1) && cdk_deconv2_fits(1024) &&
	                                             !cdk_deconv2_fits(0) && !cdk_deconv2_fits(1025)));
	for (const auto &sh : shapes) {
		int n = sh[0], c = sh[1], f = sh[2], oh = sh[3], ow = sh[4];
		cdp_conv_desc d = { n, c, 2 * oh, 2 * ow, f, 2, 2, 2, 0, 1, 0, 0, 0, 0 };
		cdp_conv_desc_init(&d);
		size_t nx = (size_t)n * c * d.h * d.w, ny = (size_t)n * f * oh * ow;
		auto dy = rvec(ny), w = rvec((size_t)f * c * 4);
		std::vector<unsigned char> ws(be->conv_workspace(be, &d) + 64);
		for (float beta : { 0.0f, 1.0f }) {
			auto a = rvec(nx), b = a;
			if (beta == 0.0f)
				a[nx / 2] = NAN;
			cdk_deconv2(0, n, c, f, oh, ow, dy.data(), w.data(), a.data(), beta);
			be->conv_bwd_data(be, &d, dy.data(), w.data(), b.data(), beta, ws.data());
			cmp(fmt("deconv2 (%d,%d,%d,%d,%d) beta %g", n, c, f, oh, ow, beta), a.data(),
			    b.data(), nx, 1e-5, 9 * sqrt((double)f));
		}
	}
}

/* bf16 bit patterns equal, or both NaN (backend.h: "a NaN stays a NaN";
 * CUDA's rounding gives 0x7fff, the CPU's keeps the payload) */
static void cmp_bf16(const std::string &name, const uint16_t *got, const uint16_t *want, size_t n)
{
	size_t i = 0;
	auto nan = [](uint16_t h) { return (h & 0x7fff) > 0x7f80; };

	while (i < n && (got[i] == want[i] || (nan(got[i]) && nan(want[i]))))
		i++;
	report(name, i < n, i < n ? fmt("first difference at [%zu] of %zu: emulated 0x%04x, cpu 0x%04x",
	                                 i, n, got[i], want[i]) : "");
}

/* batchnorm in training (cdk_bn_train, cdk_bn_bwd) against the CPU's
 * bn_fwd_train and bn_bwd: one part per channel, several (3, 20), one for
 * c > 1024 (the per-channel floats after c blocks of partials), every
 * activation, beta 0 and 1, a NaN in a channel. The statistics are double
 * sums in another order than the CPU's float lanes, so the saved mean and
 * invstd may differ in their last bit: values within 1e-5 of their scale
 * (the inputs' 3; dgamma and dbeta, sums of m terms, 3 sqrt(m)). The bf16
 * copies equal to_bf16 of x and of the kernel's own y bit for bit (a NaN
 * as a NaN); without running or saved statistics y is the same bits. */
static void t_bn_train(void)
{
	static const int shapes[][3] = { { 2, 3, 10 }, { 3, 5, 3000 }, { 1, 600, 300 },
	                                 { 1, 1030, 5 }, { 4, 1, 20000 }, { 5, 2, 1 } };
	int rep = 0;
	for (const auto &sh : shapes) {
		int n = sh[0], c = sh[1], hw = sh[2], act = rep % 3 == 1 ? CDP_ACT_RELU
		                                           : rep % 3 == 2 ? CDP_ACT_LEAKY : 0;
		size_t len = (size_t)n * c * hw, m = (size_t)n * hw;
		float mom = rf(0, 1), eps = rep == 3 ? 1e-3f : 1e-5f, beta = (float)(rep & 1);
		auto x = rvec(len), g = rvec(c, 0.5f, 1.5f), bt = rvec(c), rm = rvec(c), rv = rvec(c, 0, 2);
		auto dy = rvec(len, -1, 1);
		std::string nm = fmt(" act %d (%d,%d,%d)", act, n, c, hw);
		rep++;
		if (rep == 2)
			x[hw / 2] = NAN;               /* channel 0 of sample 0: NaN statistics */
		std::vector<float> ya(len, NAN), yb(len, NAN), sma(c, NAN), smb(c, NAN), sia(c, NAN),
			sib(c, NAN);
		std::vector<uint16_t> xha(len, 0xffff), yha(len, 0xffff), xhb(len), yhb(len);
		auto rma = rm, rmb = rm, rva = rv, rvb = rv;
		cdk_bn_train(0, n, c, hw, x.data(), g.data(), bt.data(), ya.data(), xha.data(),
		             yha.data(), rma.data(), rva.data(), mom, eps, sma.data(), sia.data(), act,
		             0.1f, scratch_bytes(cdk_bn_scratch_bytes(c)));
		be->bn_fwd_train(be, n, c, hw, x.data(), g.data(), bt.data(), yb.data(), rmb.data(),
		                 rvb.data(), mom, eps, smb.data(), sib.data(), act, 0.1f);
		cmp("bn_train y" + nm, ya.data(), yb.data(), len, 1e-5, 3);
		cmp("bn_train save_mean" + nm, sma.data(), smb.data(), c, 1e-5, 3);
		cmp("bn_train save_invstd" + nm, sia.data(), sib.data(), c, 1e-5, 3);
		cmp("bn_train running mean" + nm, rma.data(), rmb.data(), c, 1e-5, 3);
		cmp("bn_train running var" + nm, rva.data(), rvb.data(), c, 1e-5, 3);
		be->to_bf16(be, x.data(), xhb.data(), len);
		be->to_bf16(be, ya.data(), yhb.data(), len);
		cmp_bf16("bn_train x copy" + nm, xha.data(), xhb.data(), len);
		cmp_bf16("bn_train y copy" + nm, yha.data(), yhb.data(), len);
		std::vector<float> yc(len, NAN);
		cdk_bn_train(0, n, c, hw, x.data(), g.data(), bt.data(), yc.data(), NULL, NULL, NULL, NULL,
		             mom, eps, NULL, NULL, act, 0.1f, scratch_bytes(cdk_bn_scratch_bytes(c)));
		cmp("bn_train y without statistics" + nm, yc.data(), ya.data(), len);

		/* the backward from the CPU's saved statistics on both sides */
		auto dxa = rvec(len, -1, 1), dxb = dxa, dga = rvec(c), dgb = dga, dba = rvec(c), dbb = dba;
		if (beta == 0.0f)
			dxa[0] = NAN, dxb[0] = NAN;    /* garbage that beta 0 must not read */
		auto dyb = dy, dy0 = dy;
		cdk_bn_bwd(0, n, c, hw, x.data(), dy.data(), g.data(), bt.data(), smb.data(), sib.data(),
		           act, 0.1f, dxa.data(), beta, dga.data(), dba.data(),
		           scratch_bytes(cdk_bn_scratch_bytes(c)));
		be->bn_bwd(be, n, c, hw, x.data(), 0, yb.data(), dyb.data(), g.data(), bt.data(),
		           smb.data(), sib.data(), eps, act, 0.1f, dxb.data(), beta, dgb.data(),
		           dbb.data());
		std::string bn = nm + fmt(" beta %g", beta);
		cmp("bn_bwd dx" + bn, dxa.data(), dxb.data(), len, 1e-5, 3);
		cmp("bn_bwd dgamma" + bn, dga.data(), dgb.data(), c, 1e-5, 3 * sqrt((double)m));
		cmp("bn_bwd dbeta" + bn, dba.data(), dbb.data(), c, 1e-5, 3 * sqrt((double)m));
		cmp_mem("bn_bwd leaves dy" + bn, dy.data(), dy0.data(), len);
	}
}

/* synchronized batchnorm's parts (cdk_bn_sums, cdk_bn_grad_sums,
 * cdk_bn_bwd_dx) against the CPU's: the double sums of terms that each side
 * rounds to float on its own path, added in another order, within
 * (4 * 2^-23 + n * 2^-51) of the sum of the terms' magnitudes (the terms of
 * the first sums have either sign); dx, elementwise from the same floats,
 * within 1e-6 relative, with beta 0 and 1 */
static void t_bn_sync(void)
{
	for (int rep = 0; rep < 6; rep++) {
		int n = rint_(1, 4), c = rint_(1, 9), hw = rint_(1, 300);
		size_t len = (size_t)n * c * hw, m = (size_t)n * hw;
		auto x = rvec(len, -3, 3), dy = rvec(len, -1, 1), shift = rvec(c, -1, 1);
		auto mean = rvec(c, -1, 1), inv = rvec(c, 0.5f, 2), g = rvec(c, 0.5f, 1.5f);
		auto mm = rvec(2 * (size_t)c, -0.5f, 0.5f);
		std::vector<double> sa(2 * (size_t)c, NAN), sb(2 * (size_t)c, NAN);
		std::vector<double> ga(2 * (size_t)c, NAN), gb(2 * (size_t)c, NAN);
		std::string sh = fmt(" (%d,%d,%d)", n, c, hw);

		cdk_bn_sums(0, n, c, hw, x.data(), shift.data(), sa.data());
		be->bn_sums(be, n, c, hw, x.data(), shift.data(), sb.data());
		cdk_bn_grad_sums(0, n, c, hw, x.data(), dy.data(), mean.data(), inv.data(), ga.data());
		be->bn_grad_sums(be, n, c, hw, x.data(), dy.data(), mean.data(), inv.data(), gb.data());
		for (int ch = 0; ch < c; ch++) {
			double a[4] = { 0, 0, 0, 0 };   /* sums of |terms| of the four sums */
			for (int i = 0; i < n; i++)
				for (int p = 0; p < hw; p++) {
					size_t o = ((size_t)i * c + ch) * hw + p;
					double u = (double)x[o] - shift[ch], xh = ((double)x[o] - mean[ch]) * inv[ch];
					a[0] += fabs(u);
					a[1] += u * u;
					a[2] += fabs((double)dy[o]);
					a[3] += fabs(dy[o] * xh);
				}
			const double *got[4] = { &sa[ch], &sa[ch + c], &ga[ch], &ga[ch + c] };
			const double *want[4] = { &sb[ch], &sb[ch + c], &gb[ch], &gb[ch + c] };
			const char *what[4] = { "bn_sums sum", "bn_sums sumsq", "bn_grad_sums dy",
			                        "bn_grad_sums dy*xhat" };
			for (int k = 0; k < 4; k++) {
				double d = fabs(*got[k] - *want[k]);
				double tol = (4 * FLT_EPSILON + 2 * sum_tol(m)) * a[k] + 1e-300;
				report(fmt("%s channel %d", what[k], ch) + sh, !(d <= tol),
				       fmt("emulated %.17g, cpu %.17g (off %.3g > %.3g)", *got[k], *want[k], d, tol));
			}
		}
		for (float beta : { 0.0f, 1.0f }) {
			auto da = rvec(len, -1, 1), db = da;
			cdk_bn_bwd_dx(0, n, c, hw, x.data(), dy.data(), g.data(), mean.data(), inv.data(),
			              mm.data(), da.data(), beta);
			be->bn_bwd_dx(be, n, c, hw, x.data(), dy.data(), g.data(), mean.data(), inv.data(),
			              mm.data(), db.data(), beta);
			cmp(fmt("bn_bwd_dx beta %g", beta) + sh, da.data(), db.data(), len, 1e-6);
		}
	}
}
