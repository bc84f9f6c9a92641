/* cuda_kern_loss.cu: the losses, argmax and confusion counts of
 * cuda_kern.h, the CUDA twins of cpu_loss.c (backend.h gives the
 * semantics, PyTorch's).
 *
 * logits (N, K, HW) float, labels (N, HW) int32; one thread per pixel i =
 * s*HW + p, reading its K logits at stride HW (coalesced across threads).
 * Per pixel everything is computed in double with cpu_loss.c's formulas
 * (log-sum-exp with the maximum subtracted, log1p for the BCE tail), and
 * the per-pixel gradients are written, not accumulated, except by Dice,
 * which adds (so BCE + Dice sum). The sums (loss, count; Dice's three
 * totals) are two-pass block reductions in double (cuda_kern_int.cuh):
 * cdk_red_grid(N*HW) blocks, then one block writes out[] on the device, so
 * no host sync happens here. Only the summation order differs from the
 * CPU's, which moves the double sums in their last bits.
 *
 * Ignored pixels (label == ignore), and in softmax_ce labels outside
 * [0, K), get a zero gradient and no count; class_w (K, device) or NULL
 * weights the loss and the count. BCE and Dice: any label != 0 is positive.
 * reg_loss: one thread per element of (N, T, HW), cdp_reg_elem (backend.h)
 * as on the CPU; a NaN target is not counted.
 * confusion: conf (K*K, device) += counts with integer atomics, which are
 * exact in any order; a label or prediction outside [0, K) is not counted.
 */
#include <math.h>
#include "cuda_kern_int.cuh"

/* ---- per pixel (host and device, so they can be checked against the CPU) ---- */

/* x, dx: class 0's logit and gradient of one pixel; class kk is at kk*hw. */
static __host__ __device__ inline void ce_pixel(int k, size_t hw, const float *x, float *dx,
                                                int32_t y, int ignore, const float *cw,
                                                float gscale, double *loss, double *cnt)
{
	if (y == ignore || y < 0 || y >= k) {
		for (int kk = 0; kk < k; kk++)
			dx[kk * hw] = 0.0f;
		return;
	}
	double mx = x[0], se = 0.0;
	for (int kk = 1; kk < k; kk++)
		if (x[kk * hw] > mx)
			mx = x[kk * hw];
	for (int kk = 0; kk < k; kk++)
		se += exp(x[kk * hw] - mx);
	double w = cw ? cw[y] : 1.0, g = gscale * w;
	*loss += w * (mx + log(se) - x[(size_t)y * hw]);
	*cnt += w;
	for (int kk = 0; kk < k; kk++) {
		double p = exp(x[kk * hw] - mx) / se;
		dx[kk * hw] = (float)(g * (p - (kk == y)));
	}
}

/* sigmoid without overflow for either sign of x */
static __host__ __device__ inline double sigmoid(double x)
{
	if (x >= 0)
		return 1.0 / (1.0 + exp(-x));
	double e = exp(x);
	return e / (1.0 + e);
}

static __host__ __device__ inline void bce_pixel(float x, int32_t lab, int ignore, float *dx,
                                                 float gscale, double *loss, double *cnt)
{
	double v = x, t;

	if (lab == ignore) {
		*dx = 0.0f;
		return;
	}
	t = lab != 0;
	/* max(x,0) - x t + log(1 + e^-|x|): never exp of a large positive */
	*loss += (v > 0 ? v : 0) - v * t + log1p(exp(-fabs(v)));
	*cnt += 1;
	*dx = (float)(gscale * (sigmoid(v) - t));
}

/* Dice's gradient at one counted pixel: with Nu = 2 I + smooth and
 * D = P + T + smooth, loss = 1 - Nu/D, dloss/dp = -(2 t D - Nu) / D^2 and
 * dp/dx = p (1 - p). */
static __host__ __device__ inline float dice_grad1(float x, int32_t lab, double nu, double d,
                                                   float gscale)
{
	double pr = sigmoid(x), t = lab != 0;
	double g = -(2 * t * d - nu) / (d * d) * pr * (1 - pr);
	return (float)(gscale * g);
}

/* strict '>' keeps the first maximum, as torch.argmax does */
static __host__ __device__ inline int32_t argmax1(int k, size_t hw, const float *x)
{
	if (k == 1)
		return x[0] > 0;
	float best = x[0];
	int32_t bi = 0;
	for (int kk = 1; kk < k; kk++)
		if (x[kk * hw] > best) {
			best = x[kk * hw];
			bi = kk;
		}
	return bi;
}

/* ---- kernels: first passes leave M partials per block in part ---- */

template <int M>
static __device__ void put_parts(double v[M], double *part)
{
	cdk_block_sum<M>(v);
	if (threadIdx.x == 0)
		for (int j = 0; j < M; j++)
			part[(size_t)blockIdx.x * M + j] = v[j];
}

static __global__ void ce_k(int k, int hw, size_t npix, const float *x, const int32_t *lab,
                            int ignore, const float *cw, float *dx, float gscale, double *part)
{
	double v[2] = { 0.0, 0.0 };

	CDK_FOR_EACH(i, npix) {
		size_t p, s = cdk_divmod(i, (unsigned)hw, &p), at = s * k * hw + p;
		ce_pixel(k, hw, x + at, dx + at, lab[i], ignore, cw, gscale, &v[0], &v[1]);
	}
	put_parts<2>(v, part);
}

/* K = 1: pixel i's logit is x[i] */
static __global__ void bce_k(size_t npix, const float *x, const int32_t *lab, int ignore,
                             float *dx, float gscale, double *part)
{
	double v[2] = { 0.0, 0.0 };

	CDK_FOR_EACH(i, npix)
		bce_pixel(x[i], lab[i], ignore, &dx[i], gscale, &v[0], &v[1]);
	put_parts<2>(v, part);
}

/* regression: element i's prediction and target; NaN targets not counted */
static __global__ void reg_k(int kind, size_t n, const float *x, const float *t, float delta,
                             float *dx, float gscale, double *part)
{
	double v[2] = { 0.0, 0.0 }, g;

	CDK_FOR_EACH(i, n) {
		if (isnan(t[i])) {
			dx[i] = 0.0f;
			continue;
		}
		v[0] += cdp_reg_elem(kind, (double)x[i] - t[i], delta, &g);
		v[1] += 1.0;
		dx[i] = (float)(gscale * g);
	}
	put_parts<2>(v, part);
}

/* sum p t, sum p, sum t over the counted pixels */
static __global__ void dice_sums_k(size_t npix, const float *x, const int32_t *lab, int ignore,
                                   double *part)
{
	double v[3] = { 0.0, 0.0, 0.0 };

	CDK_FOR_EACH(i, npix) {
		if (lab[i] == ignore)
			continue;
		double pr = sigmoid(x[i]), t = lab[i] != 0;
		v[0] += pr * t;
		v[1] += pr;
		v[2] += t;
	}
	put_parts<3>(v, part);
}

/* One block: the totals into tot[0..3) for dice_grad_k, the loss into
 * out[0]. D <= 0 only with smooth == 0 and every pixel ignored: no loss
 * and no gradient then, rather than 0/0. */
static __global__ void dice_final_k(const double *part, unsigned g, float smooth, double *tot,
                                    double *out)
{
	double v[3] = { 0.0, 0.0, 0.0 };

	for (unsigned b = threadIdx.x; b < g; b += CDK_THREADS)
		for (int j = 0; j < 3; j++)
			v[j] += part[(size_t)b * 3 + j];
	cdk_block_sum<3>(v);
	if (threadIdx.x != 0)
		return;
	double d = v[1] + v[2] + smooth;
	for (int j = 0; j < 3; j++)
		tot[j] = v[j];
	out[0] = d <= 0 ? 0.0 : 1.0 - (2 * v[0] + smooth) / d;
}

static __global__ void dice_grad_k(size_t npix, const float *x, const int32_t *lab, int ignore,
                                   float smooth, const double *tot, float *dx, float gscale)
{
	double nu = 2 * tot[0] + smooth, d = tot[1] + tot[2] + smooth;

	if (d <= 0)
		return;
	CDK_FOR_EACH(i, npix)
		if (lab[i] != ignore)
			dx[i] = cdk_add(dx[i], dice_grad1(x[i], lab[i], nu, d, gscale));
}

/* dice_grad_k with the totals given by the host (a batch split over ranks) */
static __global__ void dice_grad_val_k(size_t npix, const float *x, const int32_t *lab,
                                       int ignore, double nu, double d, float *dx, float gscale)
{
	CDK_FOR_EACH(i, npix)
		if (lab[i] != ignore)
			dx[i] = cdk_add(dx[i], dice_grad1(x[i], lab[i], nu, d, gscale));
}

static __global__ void argmax_k(int k, int hw, size_t npix, const float *x, int32_t *pred)
{
	CDK_FOR_EACH(i, npix) {
		size_t p, s = cdk_divmod(i, (unsigned)hw, &p);
		pred[i] = argmax1(k, hw, x + s * k * hw + p);
	}
}

/* K*K <= CONF_SHARED: counts per block in shared memory, then one global
 * atomic per non-zero cell; otherwise global atomics per pixel */
#define CONF_SHARED 1024

static __global__ void conf_shared_k(size_t n, int k, const int32_t *lab, const int32_t *pred,
                                     int ignore, unsigned long long *conf)
{
	extern __shared__ unsigned long long hist[];
	int kk = k * k;

	for (int j = threadIdx.x; j < kk; j += CDK_THREADS)
		hist[j] = 0;
	__syncthreads();
	CDK_FOR_EACH(i, n) {
		int32_t y = lab[i], p = pred[i];
		if (y != ignore && y >= 0 && y < k && p >= 0 && p < k)
			atomicAdd(&hist[y * k + p], 1ULL);
	}
	__syncthreads();
	for (int j = threadIdx.x; j < kk; j += CDK_THREADS)
		if (hist[j])
			atomicAdd(&conf[j], hist[j]);
}

static __global__ void conf_global_k(size_t n, int k, const int32_t *lab, const int32_t *pred,
                                     int ignore, unsigned long long *conf)
{
	CDK_FOR_EACH(i, n) {
		int32_t y = lab[i], p = pred[i];
		if (y != ignore && y >= 0 && y < k && p >= 0 && p < k)
			atomicAdd(&conf[(size_t)y * k + p], 1ULL);
	}
}

/* ---- launchers ---- */

void cdk_softmax_ce(cudaStream_t s, int n, int k, int hw, const float *logits,
                    const int32_t *labels, int ignore, const float *class_w, float *dlogits,
                    float gscale, void *scratch, double *out)
{
	size_t npix = (size_t)n * hw;
	unsigned g = cdk_red_grid(npix);
	double *part = cdk_parts(scratch);

	ce_k<<<g, CDK_THREADS, 0, s>>>(k, hw, npix, logits, labels, ignore, class_w, dlogits,
	                               gscale, part);
	CDK_CHECK_LAUNCH();
	cdk_sum_parts<2><<<1, CDK_THREADS, 0, s>>>(part, g, out);
	CDK_CHECK_LAUNCH();
}

void cdk_bce_logits(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                    int ignore, float *dlogits, float gscale, void *scratch, double *out)
{
	size_t npix = (size_t)n * hw;
	unsigned g = cdk_red_grid(npix);
	double *part = cdk_parts(scratch);

	bce_k<<<g, CDK_THREADS, 0, s>>>(npix, logits, labels, ignore, dlogits, gscale, part);
	CDK_CHECK_LAUNCH();
	cdk_sum_parts<2><<<1, CDK_THREADS, 0, s>>>(part, g, out);
	CDK_CHECK_LAUNCH();
}

void cdk_reg_loss(cudaStream_t s, int kind, size_t n, const float *pred, const float *target,
                  float delta, float *dpred, float gscale, void *scratch, double *out)
{
	unsigned g = cdk_red_grid(n);
	double *part = cdk_parts(scratch);

	reg_k<<<g, CDK_THREADS, 0, s>>>(kind, n, pred, target, delta, dpred, gscale, part);
	CDK_CHECK_LAUNCH();
	cdk_sum_parts<2><<<1, CDK_THREADS, 0, s>>>(part, g, out);
	CDK_CHECK_LAUNCH();
}

void cdk_dice_sums(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                   int ignore, void *scratch, double *out)
{
	size_t npix = (size_t)n * hw;
	unsigned g = cdk_red_grid(npix);
	double *part = cdk_parts(scratch);

	dice_sums_k<<<g, CDK_THREADS, 0, s>>>(npix, logits, labels, ignore, part);
	CDK_CHECK_LAUNCH();
	cdk_sum_parts<3><<<1, CDK_THREADS, 0, s>>>(part, g, out);
	CDK_CHECK_LAUNCH();
}

void cdk_dice_logits(cudaStream_t s, int n, int hw, const float *logits, const int32_t *labels,
                     int ignore, float smooth, const double *given, float *dlogits, float gscale,
                     void *scratch, double *out)
{
	size_t npix = (size_t)n * hw;
	unsigned g = cdk_red_grid(npix);
	double *tot = (double *)scratch, *part = cdk_parts(scratch);

	if (given) {    /* the loss is the caller's, from the same totals */
		double nu = 2 * given[0] + smooth, d = given[1] + given[2] + smooth;
		if (npix == 0 || d <= 0)
			return;
		dice_grad_val_k<<<cdk_grid(npix), CDK_THREADS, 0, s>>>(npix, logits, labels, ignore,
		                                                      nu, d, dlogits, gscale);
		CDK_CHECK_LAUNCH();
		return;
	}
	dice_sums_k<<<g, CDK_THREADS, 0, s>>>(npix, logits, labels, ignore, part);
	CDK_CHECK_LAUNCH();
	dice_final_k<<<1, CDK_THREADS, 0, s>>>(part, g, smooth, tot, out);
	CDK_CHECK_LAUNCH();
	if (npix == 0)
		return;
	dice_grad_k<<<cdk_grid(npix), CDK_THREADS, 0, s>>>(npix, logits, labels, ignore, smooth,
	                                                  tot, dlogits, gscale);
	CDK_CHECK_LAUNCH();
}

void cdk_argmax(cudaStream_t s, int n, int k, int hw, const float *logits, int32_t *pred)
{
	size_t npix = (size_t)n * hw;

	if (npix == 0)
		return;
	argmax_k<<<cdk_grid(npix), CDK_THREADS, 0, s>>>(k, hw, npix, logits, pred);
	CDK_CHECK_LAUNCH();
}

void cdk_confusion(cudaStream_t s, int n_elems, int k, const int32_t *labels, const int32_t *pred,
                   int ignore, unsigned long long *conf)
{
	size_t n = n_elems > 0 ? (size_t)n_elems : 0, kk = (size_t)k * k;

	if (n == 0 || k <= 0)
		return;
	if (kk <= CONF_SHARED)
		conf_shared_k<<<cdk_red_grid(n), CDK_THREADS, kk * sizeof(unsigned long long), s>>>(
			n, k, labels, pred, ignore, conf);
	else
		conf_global_k<<<cdk_grid(n), CDK_THREADS, 0, s>>>(n, k, labels, pred, ignore, conf);
	CDK_CHECK_LAUNCH();
}
