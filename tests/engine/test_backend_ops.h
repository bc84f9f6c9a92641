/* test_backend_ops.h: the second half of test_backend.c (included once
 * from it; it uses that file's helpers): activations, channel slices, global
 * average pool, bias, add, diff, pooling, upsampling, dropout and the
 * thread-count checks.
 */

static void test_elementwise(void)
{
	size_t n = 1000;
	float *x = rnd(n), *y = rnd(n), *dy = rnd(n), *dx = rnd(n);
	double *ry = dzero(n), *rdx = dcopy(dx, n);

	for (int kind = CDP_ACT_RELU; kind <= CDP_ACT_LEAKY; kind++) {
		float slope = kind == CDP_ACT_LEAKY ? 0.1f : 0.0f;
		for (size_t i = 0; i < n; i++) {
			ry[i] = x[i] > 0 ? x[i] : slope * (double)x[i];
			rdx[i] += x[i] > 0 ? dy[i] : slope * (double)dy[i];
		}
		cpu_act_fwd(be, kind, slope, x, y, n);
		near(y, ry, n, 1e-6, kind == CDP_ACT_RELU ? "relu fwd" : "leaky fwd");
		cpu_act_bwd(be, kind, slope, y, dy, dx, 1.0f, n);
		near(dx, rdx, n, 1e-6, kind == CDP_ACT_RELU ? "relu bwd beta 1" : "leaky bwd beta 1");
	}
	cpu_act_bwd(be, CDP_ACT_RELU, 0.0f, x, dy, dx, 0.0f, n);
	for (size_t i = 0; i < n; i++)
		rdx[i] = x[i] > 0 ? dy[i] : 0.0;
	near(dx, rdx, n, 1e-6, "relu bwd beta 0");

	/* concat of (2,3,HW) into channels 4..6 of (2,9,HW), and back */
	int N = 2, c = 3, hw = 5, big = 9, off = 4;
	size_t nb = (size_t)N * big * hw, ns = (size_t)N * c * hw;
	float *dst = rnd(nb), *src = rnd(ns), *back = rnd(ns);
	double *rdst = dcopy(dst, nb), *rback = dcopy(back, ns);
	for (int s = 0; s < N; s++)
		for (int k = 0; k < c; k++)
			for (int i = 0; i < hw; i++) {
				size_t si = ((size_t)s * c + k) * hw + i, bi = ((size_t)s * big + off + k) * hw + i;
				rdst[bi] = src[si];
			}
	cpu_chan_copy(be, N, c, hw, src, dst, big, off, 0.0f);
	near(dst, rdst, nb, 0, "chan_copy");
	for (int s = 0; s < N; s++)
		for (int k = 0; k < c; k++)
			for (int i = 0; i < hw; i++) {
				size_t si = ((size_t)s * c + k) * hw + i, bi = ((size_t)s * big + off + k) * hw + i;
				rback[si] += dst[bi];
			}
	cpu_chan_slice(be, N, c, hw, dst, big, off, back, 1.0f);
	near(back, rback, ns, 1e-6, "chan_slice beta 1");
	cpu_chan_copy(be, N, c, hw, src, dst, big, off, 1.0f);
	for (int s = 0; s < N; s++)
		for (int k = 0; k < c; k++)
			for (int i = 0; i < hw; i++)
				rdst[((size_t)s * big + off + k) * hw + i] += src[((size_t)s * c + k) * hw + i];
	near(dst, rdst, nb, 1e-6, "chan_copy beta 1");

	/* gap, bias, add over (N=2, C=3, HW=5) */
	float *g = rnd((size_t)N * c), *b = rnd((size_t)c), *gx = rnd(ns), *db = rnd((size_t)c);
	double *rg = dzero((size_t)N * c), *rgx = dcopy(gx, ns), *rb = dcopy(src, ns), *rdb = dcopy(db, (size_t)c);
	for (int s = 0; s < N * c; s++) {
		for (int i = 0; i < hw; i++) {
			rg[s] += src[(size_t)s * hw + i] / (double)hw;
			rgx[(size_t)s * hw + i] += g[s] / (double)hw;
			rb[(size_t)s * hw + i] += b[s % c];
			rdb[s % c] += src[(size_t)s * hw + i];
		}
	}
	float *gy = rnd((size_t)N * c);
	cpu_gap_fwd(be, N, c, hw, src, gy);
	near(gy, rg, (size_t)N * c, 1e-6, "gap fwd");
	cpu_gap_bwd(be, N, c, hw, g, gx, 1.0f);
	near(gx, rgx, ns, 1e-6, "gap bwd beta 1");
	/* the forward's 16 lanes over planes of whole vectors and a tail
	 * (cpu_elem.c): 64 and 203 values, six planes each */
	for (int ph = 64; ph <= 203; ph += 139) {
		size_t np = (size_t)N * c * ph;
		float *px = rnd(np), *py = rnd((size_t)N * c);
		double *rpy = dzero((size_t)N * c);
		for (size_t i = 0; i < np; i++)
			rpy[i / ph] += px[i] / (double)ph;
		cpu_gap_fwd(be, N, c, ph, px, py);
		near(py, rpy, (size_t)N * c, 1e-6, ph == 64 ? "gap fwd, 64 a plane" :
		                                               "gap fwd, 203 a plane");
		be->free(be, px);
		be->free(be, py);
		free(rpy);
	}
	cpu_bias_grad(be, N, c, hw, src, db);
	near(db, rdb, (size_t)c, 1e-6, "bias_grad");
	cpu_bias_add(be, N, c, hw, b, src);
	near(src, rb, ns, 1e-6, "bias_add");
	cpu_add(be, x, dy, y, n);
	for (size_t i = 0; i < n; i++)
		ry[i] = (double)x[i] + dy[i];
	near(y, ry, n, 1e-6, "add");
	/* diff, plain and absolute, backward with sign 1 and -1, beta 0 and 1;
	 * a == b at two elements: the gradient of |a - b| is 0 there */
	x[7] = dy[7];
	x[8] = dy[8] = -0.0f;
	for (int absval = 0; absval <= 1; absval++) {
		cpu_diff_fwd(be, absval, x, dy, y, n);
		for (size_t i = 0; i < n; i++)
			ry[i] = absval ? fabs((double)x[i] - dy[i]) : (double)x[i] - dy[i];
		near(y, ry, n, 1e-6, absval ? "diff fwd abs=1" : "diff fwd abs=0");
		for (int beta = 0; beta <= 1; beta++)
			for (float sign = 1.0f; sign >= -1.0f; sign -= 2.0f) {
				float *gd = rnd(n);
				for (size_t i = 0; i < n; i++) {
					double d = (double)x[i] - dy[i];
					double sg = !absval ? 1 : d > 0 ? 1 : d < 0 ? -1 : 0;
					rdx[i] = (beta ? dx[i] : 0.0) + sign * sg * gd[i];
				}
				cpu_diff_bwd(be, absval, x, dy, gd, sign, dx, (float)beta, n);
				near(dx, rdx, n, 1e-6, "diff bwd");
				CHECK(!absval || (dx[7] == (beta ? rdx[7] : 0.0f) && dx[8] == (beta ? rdx[8] : 0.0f)),
				      "diff bwd abs=1: a gradient where a == b");
				be->free(be, gd);
			}
	}

	be->free(be, x); be->free(be, y); be->free(be, dy); be->free(be, dx);
	be->free(be, dst); be->free(be, src); be->free(be, back); be->free(be, g);
	be->free(be, b); be->free(be, gx); be->free(be, db); be->free(be, gy);
	free(ry); free(rdx); free(rdst); free(rback); free(rg); free(rgx); free(rb); free(rdb);
}

/* ---- pooling ---- */

typedef struct pool_case { int n, c, h, w, k, s, p; } pool_case;

static void test_pool(void)
{
	static const pool_case cases[] = {
		{ 2, 3, 8, 8, 2, 2, 0 }, { 2, 2, 9, 7, 3, 2, 1 }, { 1, 3, 5, 6, 3, 1, 1 },
		{ 2, 2, 7, 7, 2, 2, 1 }, { 1, 1, 11, 9, 5, 3, 2 }, { 2, 3, 22, 25, 3, 2, 1 },
		/* the last ones: values from a small set, so windows hold ties (the
		 * first maximum in row-major order wins, as in the reference) -
		 * exercise the vectorized stride-2 path (2x2; 3x3 pad 1, ResNet's;
		 * 5x5 pad 2) at its edges and tails */
		{ 2, 3, 8, 8, 2, 2, 0 }, { 1, 2, 12, 10, 2, 2, 0 }, { 1, 2, 13, 27, 2, 2, 1 },
		{ 2, 2, 21, 23, 3, 2, 1 }, { 1, 2, 20, 30, 3, 2, 1 }, { 1, 2, 9, 33, 5, 2, 2 },
		/* wide rows: the stride-2 path's groups of 8, then of 4, then single */
		{ 1, 2, 10, 80, 2, 2, 0 }, { 2, 1, 9, 75, 3, 2, 1 },
		/* 2x2 pools that tile the plane: the backward's groups of 8, then
		 * single windows (cpu_ops.c maxpool_bwd_tiled) */
		{ 2, 2, 6, 44, 2, 2, 0 }, { 1, 3, 4, 32, 2, 2, 0 },
	};
	const size_t ntie = 8;
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const pool_case *pc = &cases[ci];
		cdp_pool_desc d = { pc->n, pc->c, pc->h, pc->w, pc->k, pc->s, pc->p, 0, 0 };
		char what[64];
		CHECK(cdp_pool_desc_init(&d) == 0, "pool case %zu: desc", ci);
		size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
		float *x = rnd(nx), *y = rnd(ny), *dy = rnd(ny), *dx = rnd(nx);
		int32_t *idx = be->alloc(be, ny * sizeof(int32_t));
		if (ci + ntie >= sizeof cases / sizeof cases[0])
			for (size_t i = 0; i < nx; i++)
				x[i] = roundf(x[i] * 2);
		double *ry = dzero(ny), *rdx = dcopy(dx, nx), *ay = dzero(ny), *a0 = dzero(nx);
		double *m0 = dzero(nx);
		int idx_ok = 1;
		for (size_t t = 0; t < (size_t)d.n * d.c; t++)
			for (int oh = 0; oh < d.oh; oh++)
				for (int ow = 0; ow < d.ow; ow++) {
					double best = -INFINITY, sum = 0;
					int bi = -1;
					size_t yi = (t * d.oh + oh) * d.ow + ow;
					for (int i = 0; i < d.k; i++)
						for (int j = 0; j < d.k; j++) {
							int h = oh * d.stride - d.pad + i, w = ow * d.stride - d.pad + j;
							if (h < 0 || h >= d.h || w < 0 || w >= d.w)
								continue;   /* -inf for max, 0 for avg */
							double v = x[(t * d.h + h) * d.w + w];
							sum += v;
							if (v > best) {
								best = v;
								bi = h * d.w + w;
							}
						}
					ry[yi] = best;
					rdx[t * d.h * d.w + bi] += dy[yi];
					m0[t * d.h * d.w + bi] += dy[yi];
					ay[yi] = sum / (d.k * d.k);    /* count_include_pad */
					for (int i = 0; i < d.k; i++)
						for (int j = 0; j < d.k; j++) {
							int h = oh * d.stride - d.pad + i, w = ow * d.stride - d.pad + j;
							if (h >= 0 && h < d.h && w >= 0 && w < d.w)
								a0[(t * d.h + h) * d.w + w] += dy[yi] / (d.k * d.k);
						}
				}
		cpu_maxpool_fwd(be, &d, x, y, idx);
		snprintf(what, sizeof what, "maxpool case %zu fwd", ci);
		near(y, ry, ny, 0, what);
		for (size_t i = 0; i < ny; i++)
			if (x[(i / ((size_t)d.oh * d.ow)) * d.h * d.w + idx[i]] != y[i])
				idx_ok = 0;
		CHECK(idx_ok, "maxpool case %zu: idx points at the maximum", ci);
		float *dx0 = rnd(nx);     /* beta 0: whatever dx held is gone */
		cpu_maxpool_bwd(be, &d, x, y, dy, idx, dx0, 0.0f);
		snprintf(what, sizeof what, "maxpool case %zu bwd beta 0", ci);
		near(dx0, m0, nx, 1e-6, what);
		be->free(be, dx0);
		cpu_maxpool_bwd(be, &d, x, y, dy, idx, dx, 1.0f);
		snprintf(what, sizeof what, "maxpool case %zu bwd beta 1", ci);
		near(dx, rdx, nx, 1e-6, what);
		cpu_avgpool_fwd(be, &d, x, y);
		snprintf(what, sizeof what, "avgpool case %zu fwd", ci);
		near(y, ay, ny, 1e-6, what);
		cpu_avgpool_bwd(be, &d, dy, dx, 0.0f);
		snprintf(what, sizeof what, "avgpool case %zu bwd beta 0", ci);
		near(dx, a0, nx, 1e-6, what);
		for (size_t i = 0; i < nx; i++)
			a0[i] *= 2.0;
		cpu_avgpool_bwd(be, &d, dy, dx, 1.0f);
		snprintf(what, sizeof what, "avgpool case %zu bwd beta 1", ci);
		near(dx, a0, nx, 1e-6, what);
		be->free(be, x); be->free(be, y); be->free(be, dy); be->free(be, dx); be->free(be, idx);
		free(ry); free(rdx); free(ay); free(a0); free(m0);
	}
	/* NaN propagates and the first NaN in row-major window order wins, on
	 * every path (scalar, and the stride-2 vectors' lanes) */
	static const pool_case nan_cases[] = {
		{ 1, 2, 14, 29, 2, 2, 0 }, { 1, 2, 15, 31, 3, 2, 1 }, { 1, 1, 12, 17, 3, 1, 1 },
		{ 1, 2, 8, 77, 2, 2, 0 }, { 1, 2, 9, 75, 3, 2, 1 },
		/* 2x2 rows of even width, vectors to their end (8 + 4, 8) */
		{ 1, 2, 7, 24, 2, 2, 0 }, { 2, 3, 4, 16, 2, 2, 0 },
	};
	for (size_t ci = 0; ci < sizeof nan_cases / sizeof nan_cases[0]; ci++) {
		const pool_case *pc = &nan_cases[ci];
		cdp_pool_desc d = { pc->n, pc->c, pc->h, pc->w, pc->k, pc->s, pc->p, 0, 0 };
		CHECK(cdp_pool_desc_init(&d) == 0, "NaN pool case %zu: desc", ci);
		size_t nx = (size_t)d.n * d.c * d.h * d.w, ny = (size_t)d.n * d.c * d.oh * d.ow;
		float *x = rnd(nx), *y = be->alloc(be, ny * sizeof(float));
		int32_t *idx = be->alloc(be, ny * sizeof(int32_t));
		int ok = 1;
		for (size_t i = 0; i < nx; i++)
			x[i] = i % 7 == 3 || i % 11 == 5 ? NAN : roundf(x[i] * 2);
		cpu_maxpool_fwd(be, &d, x, y, idx);
		for (size_t t = 0; t < (size_t)d.n * d.c; t++)
			for (int oh = 0; oh < d.oh; oh++)
				for (int ow = 0; ow < d.ow; ow++) {
					float best = -INFINITY;
					int bi = -1;
					size_t yi = (t * d.oh + oh) * d.ow + ow;
					for (int i = 0; i < d.k && !isnan(best); i++)
						for (int j = 0; j < d.k && !isnan(best); j++) {
							int h = oh * d.stride - d.pad + i, w = ow * d.stride - d.pad + j;
							if (h < 0 || h >= d.h || w < 0 || w >= d.w)
								continue;
							float v = x[(t * d.h + h) * d.w + w];
							if (bi < 0 || v > best || isnan(v)) {
								best = v;
								bi = h * d.w + w;
							}
						}
					if (idx[yi] != bi || !(y[yi] == best || (isnan(y[yi]) && isnan(best))))
						ok = 0;
				}
		CHECK(ok, "maxpool NaN case %zu (k%d s%d p%d): the first NaN or maximum wins", ci,
		      d.k, d.stride, d.pad);
		/* without an argmax (an inference net's): the same bits */
		float *y2 = be->alloc(be, ny * sizeof(float));
		cpu_maxpool_fwd(be, &d, x, y2, NULL);
		CHECK(memcmp(y, y2, ny * sizeof *y) == 0, "maxpool NaN case %zu (k%d s%d p%d): "
		      "the forward without idx differs", ci, d.k, d.stride, d.pad);
		be->free(be, y2);
		be->free(be, x); be->free(be, y); be->free(be, idx);
	}
	cdp_pool_desc bad = { 1, 1, 4, 4, 2, 2, 2, 0, 0 };
	CHECK(cdp_pool_desc_init(&bad) == -1, "pad > k/2 is refused as in PyTorch");
}

/* ---- upsampling: the reference builds the interpolation matrix ---- */

/* PyTorch's pixels along an axis of `in` -> `out`, in double: nearest
 * floor(dst * in / out), bilinear src = (dst + 0.5) * in / out - 0.5
 * clamped at 0 (align_corners=False) */
static void up_weights(int mode, int dst, int in, int out, int *i0, int *i1, double *l0,
                       double *l1)
{
	if (mode == CDP_UP_NEAREST) {
		*i0 = *i1 = (int)floor((double)dst * in / out);
		*l0 = 1;
		*l1 = 0;
		return;
	}
	double src = (dst + 0.5) * in / out - 0.5;
	if (src < 0)
		src = 0;
	*i0 = (int)floor(src);
	*i1 = *i0 < in - 1 ? *i0 + 1 : *i0;
	*l1 = src - *i0;
	*l0 = 1 - *l1;
}

static void test_upsample(void)
{
	/* x2, x3, x4 by 3, ratios 7/5 and 9/4, and a (1,1) map broadcast */
	static const int cases[][4] = { { 5, 4, 10, 8 }, { 5, 4, 15, 12 }, { 5, 4, 7, 9 },
	                                { 1, 1, 6, 5 } };
	int n = 2, c = 3;

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		int h = cases[k][0], w = cases[k][1], oh = cases[k][2], ow = cases[k][3];
		size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * oh * ow;
		float *x = rnd(nx), *y = rnd(ny), *dy = rnd(ny), *dx = rnd(nx);
		for (int mode = CDP_UP_NEAREST; mode <= CDP_UP_BILINEAR; mode++) {
			double *ry = dzero(ny), *rdx = dcopy(dx, nx);
			char what[96];
			for (int t = 0; t < n * c; t++)
				for (int oy = 0; oy < oh; oy++)
					for (int ox = 0; ox < ow; ox++) {
						int y0, y1, x0, x1;
						double a0, a1, b0, b1;
						up_weights(mode, oy, h, oh, &y0, &y1, &a0, &a1);
						up_weights(mode, ox, w, ow, &x0, &x1, &b0, &b1);
						const float *p = x + (size_t)t * h * w;
						size_t yi = ((size_t)t * oh + oy) * ow + ox;
						double *q = rdx + (size_t)t * h * w;
						ry[yi] = a0 * (b0 * p[y0 * w + x0] + b1 * p[y0 * w + x1]) +
						         a1 * (b0 * p[y1 * w + x0] + b1 * p[y1 * w + x1]);
						q[y0 * w + x0] += a0 * b0 * dy[yi];
						q[y0 * w + x1] += a0 * b1 * dy[yi];
						q[y1 * w + x0] += a1 * b0 * dy[yi];
						q[y1 * w + x1] += a1 * b1 * dy[yi];
					}
			snprintf(what, sizeof what, "upsample %s (%d,%d) -> (%d,%d)",
			         mode == CDP_UP_NEAREST ? "nearest" : "bilinear", h, w, oh, ow);
			cpu_upsample_fwd(be, mode, n, c, h, w, oh, ow, x, y);
			near(y, ry, ny, 1e-6, what);
			cpu_upsample_bwd(be, mode, n, c, h, w, oh, ow, dy, dx, 1.0f);
			near(dx, rdx, nx, 1e-5, what);
			free(ry); free(rdx);
		}
		be->free(be, x); be->free(be, y); be->free(be, dy); be->free(be, dx);
	}
	/* a known value: bilinear x2 of the 1x2 image [0 1] is two rows of
	 * [0 .25 .75 1] (PyTorch) */
	float two[2] = { 0, 1 }, four[8];
	cpu_upsample_fwd(be, CDP_UP_BILINEAR, 1, 1, 1, 2, 2, 4, two, four);
	CHECK(four[0] == 0.0f && four[1] == 0.25f && four[2] == 0.75f && four[3] == 1.0f &&
	      memcmp(four, four + 4, 4 * sizeof(float)) == 0,
	      "bilinear [0 1] -> %g %g %g %g", four[0], four[1], four[2], four[3]);
}

/* ---- dropout: the documented hash, written out independently ---- */

static int ref_keep(uint64_t seed, uint64_t i, float p)
{
	uint64_t z = (seed ^ (i * 0x9E3779B97F4A7C15ULL)) + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return (double)(z >> 40) / 16777216.0 >= p;
}

static void test_dropout(void)
{
	size_t n = 100000;
	float p = 0.3f, *x = rnd(n), *y = rnd(n), *dy = rnd(n), *dx = rnd(n);
	uint8_t *mask = be->alloc(be, n), *mask2 = be->alloc(be, n);
	double *ry = dzero(n), *rdx = dcopy(dx, n);
	size_t kept = 0;

	for (size_t i = 0; i < n; i++) {
		int k = ref_keep(77, i, p);
		kept += k;
		ry[i] = k ? x[i] / (1.0 - p) : 0.0;
		rdx[i] += k ? dy[i] / (1.0 - p) : 0.0;
	}
	cpu_dropout_fwd(be, p, 77, x, y, mask, n);
	near(y, ry, n, 1e-6, "dropout fwd");
	cpu_dropout_bwd(be, p, mask, dy, dx, 1.0f, n);
	near(dx, rdx, n, 1e-6, "dropout bwd beta 1");
	/* kept ~ Binomial(n, 0.7): sd = 145; 6 sd */
	CHECK(fabs((double)kept - 0.7 * n) < 900, "dropout keeps %zu of %zu at p=0.3", kept, n);
	cpu_dropout_fwd(be, p, 78, x, y, mask2, n);
	CHECK(memcmp(mask, mask2, n) != 0, "another seed draws another mask");
	be->free(be, x); be->free(be, y); be->free(be, dy); be->free(be, dx);
	be->free(be, mask); be->free(be, mask2);
	free(ry); free(rdx);
}

/* ---- the same bits at 1 and 3 threads for the ops we split ourselves ---- */

static void test_threads(void)
{
	cdp_backend *b1 = cdp_backend_cpu(1);
	int n = 4, c = 6, h = 34, w = 30, hw = h * w;
	size_t nx = (size_t)n * c * hw;
	float *x = rnd(nx), *g = rnd((size_t)c), *bt = rnd((size_t)c), *dy = rnd(4 * nx);
	float *cw = rnd(5 * (size_t)c * 9);
	float *o1 = rnd(4 * nx), *o3 = rnd(4 * nx), *s1 = rnd(4 * (size_t)c), *s3 = rnd(4 * (size_t)c);
	int32_t *i1 = be->alloc(be, nx * 4), *i3 = be->alloc(be, nx * 4);
	cdp_pool_desc pd = { n, c, h, w, 3, 2, 1, 0, 0 };
	cdp_conv_desc cd = { .n = n, .c = c, .h = h, .w = w, .f = 5, .kh = 3, .kw = 3, .stride = 1,
	                     .pad = 1, .dil = 1 };

	if (!b1) {
		CHECK(0, "cannot create a 1-thread backend");
		return;
	}
	CHECK(b1->threads == 1, "threads 1");
	memset(s1, 0, 4 * c * sizeof(float));
	memset(s3, 0, 4 * c * sizeof(float));
	cpu_bn_fwd_train(b1, n, c, hw, x, g, bt, o1, s1, s1 + c, 0.1f, 1e-5f, s1 + 2 * c, s1 + 3 * c,
	                 CDP_ACT_RELU, 0.0f);
	cpu_bn_fwd_train(be, n, c, hw, x, g, bt, o3, s3, s3 + c, 0.1f, 1e-5f, s3 + 2 * c, s3 + 3 * c,
	                 CDP_ACT_RELU, 0.0f);
	CHECK(memcmp(o1, o3, nx * 4) == 0 && memcmp(s1, s3, 4 * c * 4) == 0, "bn fwd bitwise");
	/* y for the activation's mask: the forward's output, o1 == o3 */
	memcpy(o3 + nx, o1, nx * 4);
	cpu_bn_bwd(b1, n, c, hw, x, 0, o3 + nx, dy, g, bt, s1 + 2 * c, s1 + 3 * c, 1e-5f, CDP_ACT_RELU, 0.0f, o1,
	           0.0f, s1, s1 + c);
	cpu_bn_bwd(be, n, c, hw, x, 0, o3 + nx, dy, g, bt, s3 + 2 * c, s3 + 3 * c, 1e-5f, CDP_ACT_RELU, 0.0f, o3,
	           0.0f, s3, s3 + c);
	CHECK(memcmp(o1, o3, nx * 4) == 0 && memcmp(s1, s3, 2 * c * 4) == 0, "bn bwd bitwise");
	cdp_pool_desc_init(&pd);
	cpu_maxpool_fwd(b1, &pd, x, o1, i1);
	cpu_maxpool_fwd(be, &pd, x, o3, i3);
	CHECK(memcmp(o1, o3, (size_t)n * c * pd.oh * pd.ow * 4) == 0, "maxpool bitwise");
	cpu_avgpool_bwd(b1, &pd, dy, o1, 0.0f);
	cpu_avgpool_bwd(be, &pd, dy, o3, 0.0f);
	CHECK(memcmp(o1, o3, nx * 4) == 0, "avgpool bwd bitwise");
	cpu_upsample_fwd(b1, CDP_UP_BILINEAR, n, c, h, w, 2 * h, 2 * w, x, o1);
	cpu_upsample_fwd(be, CDP_UP_BILINEAR, n, c, h, w, 2 * h, 2 * w, x, o3);
	CHECK(memcmp(o1, o3, 4 * nx * 4) == 0, "upsample fwd bitwise");
	cpu_upsample_bwd(b1, CDP_UP_BILINEAR, n, c, h, w, 2 * h, 2 * w, dy, o1, 0.0f);
	cpu_upsample_bwd(be, CDP_UP_BILINEAR, n, c, h, w, 2 * h, 2 * w, dy, o3, 0.0f);
	CHECK(memcmp(o1, o3, nx * 4) == 0, "upsample bwd bitwise");
	/* convolutions go through OpenBLAS, whose sums may be split differently
	 * at another thread count: at the same count they must repeat bitwise */
	cdp_conv_desc_init(&cd);
	void *ws = be->alloc(be, cpu_conv_workspace(be, &cd));
	cpu_conv_bwd_data(be, &cd, dy, cw, o1, 0.0f, ws);
	cpu_conv_bwd_data(be, &cd, dy, cw, o3, 0.0f, ws);
	CHECK(memcmp(o1, o3, nx * 4) == 0, "conv bwd_data repeats bitwise");
	be->free(be, ws);
	be->free(be, cw);
	be->free(be, x); be->free(be, g); be->free(be, bt); be->free(be, dy);
	be->free(be, o1); be->free(be, o3); be->free(be, s1); be->free(be, s3);
	be->free(be, i1); be->free(be, i3);
	b1->destroy(b1);
}
