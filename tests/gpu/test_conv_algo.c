/* test_conv_algo.c: the rules by which a CUDA convolution plan picks and
 * falls back among cuDNN's algorithms (engine/cuda/cuda_algo.h), on any
 * machine: which candidates are usable per precision, their order, the
 * choice of the first that runs when the plan is made, and the run-time
 * fallback to the next one whose workspace fits. */
#include <stdint.h>
#include <string.h>
#include "cuda/cuda_algo.h"
#include "tap.h"

/* cuDNN-like candidates, best first: algo, ok, det, math, ws, transform */
static const cu_cand cands[] = {
	{ 6, 1, 0, CU_MATH_TENSOR, 1000, 0 },     /* fastest, not deterministic, tensor op */
	{ 1, 1, 1, CU_MATH_TENSOR_CONV, 200, 0 }, /* converts float down to fp16 */
	{ 4, 0, 1, CU_MATH_DEFAULT, 0, 0 },       /* cuDNN rated it not supported */
	{ 0, 1, 1, CU_MATH_DEFAULT, 0, 0 },
	{ 5, 1, 1, CU_MATH_FMA, 1 << 20, 0 },     /* wants a large workspace */
	{ 2, 1, 0, CU_MATH_DEFAULT, 64, 0 },
	{ 3, 1, 1, CU_MATH_DEFAULT, SIZE_MAX, 0 }, /* cuDNN could not size it */
	{ 7, 1, 1, CU_MATH_FMA, 0, 1 },           /* FFT or non-fused Winograd */
};
#define NC ((int)(sizeof cands / sizeof cands[0]))

/* the algorithms of order[0..k) as a string, to compare */
static const char *algos(const int *order, int k)
{
	static char buf[64];
	int n = 0;

	buf[0] = '\0';
	for (int i = 0; i < k; i++)
		n += snprintf(buf + n, sizeof buf - n, "%s%d", i ? " " : "", cands[order[i]].algo);
	return buf;
}

/* a trial that fails for the algorithms set in ctx (a bit mask) */
static int tries;
static int run_fails(void *ctx, const cu_cand *c)
{
	tries++;
	return (*(unsigned *)ctx >> c->algo) & 1 ? -1 : 0;
}

int main(void)
{
	int order[CU_MAXC], k;
	cu_cand list[CU_MAXC];
	unsigned fail;

	/* fp32: no tensor-op math of either kind, no transform; cuDNN's order kept */
	k = cu_algo_order(cands, NC, CDP_PREC_FP32, 0, 1 << 20, order);
	CHECK(!strcmp(algos(order, k), "0 5 2"), "fp32 usable: %s", algos(order, k));
	/* tf32: tensor op yes, down-conversion to fp16 no, transforms yes */
	k = cu_algo_order(cands, NC, CDP_PREC_TF32, 0, 1 << 20, order);
	CHECK(!strcmp(algos(order, k), "6 0 5 2 7"), "tf32 usable: %s", algos(order, k));
	/* bf16: every math type */
	k = cu_algo_order(cands, NC, CDP_PREC_BF16, 0, 1 << 20, order);
	CHECK(!strcmp(algos(order, k), "6 1 0 5 2 7"), "bf16 usable: %s", algos(order, k));
	/* the workspace limit, and one cuDNN cannot size is never usable */
	k = cu_algo_order(cands, NC, CDP_PREC_BF16, 0, 1000, order);
	CHECK(!strcmp(algos(order, k), "6 1 0 2 7"), "bf16 within 1000 bytes: %s", algos(order, k));
	k = cu_algo_order(cands, NC, CDP_PREC_BF16, 0, SIZE_MAX, order);
	CHECK(!strcmp(algos(order, k), "6 1 0 5 2 7"), "bf16 unlimited: %s", algos(order, k));
	/* deterministic first, then the rest, each in cuDNN's order, none twice */
	k = cu_algo_order(cands, NC, CDP_PREC_BF16, 1, 1 << 20, order);
	CHECK(!strcmp(algos(order, k), "1 0 5 7 6 2"), "bf16 deterministic first: %s",
	      algos(order, k));
	/* which of cuDNN's algorithms are transforms, per direction */
	CHECK(cu_algo_transform(0, 4) && cu_algo_transform(0, 5) && cu_algo_transform(0, 7) &&
	      !cu_algo_transform(0, 6) && !cu_algo_transform(0, 1), "forward transforms");
	CHECK(cu_algo_transform(1, 2) && cu_algo_transform(1, 3) && cu_algo_transform(1, 5) &&
	      !cu_algo_transform(1, 4) && !cu_algo_transform(1, 1), "backward data transforms");
	CHECK(cu_algo_transform(2, 2) && cu_algo_transform(2, 5) && cu_algo_transform(2, 6) &&
	      !cu_algo_transform(2, 3) && !cu_algo_transform(2, 0), "backward filter transforms");
	k = cu_algo_order(cands, NC, CDP_PREC_FP32, 1, 0, order);
	CHECK(!strcmp(algos(order, k), "0"), "fp32 without workspace: %s", algos(order, k));
	CHECK_RC(cu_algo_order(cands, 0, CDP_PREC_FP32, 1, 0, order), 0);

	/* the plan's trial: the first that runs, each tried once, in order */
	k = cu_algo_order(cands, NC, CDP_PREC_BF16, 0, 1 << 20, order);
	for (int i = 0; i < k; i++)
		list[i] = cands[order[i]];
	fail = 0;
	tries = 0;
	CHECK_RC(cu_algo_first(list, k, run_fails, &fail), 0);
	CHECK(tries == 1, "%d trials when the first runs", tries);
	fail = 1u << 6 | 1u << 1;          /* the two tensor-op ones fail (NHWC, 3 channels) */
	tries = 0;
	CHECK_RC(cu_algo_first(list, k, run_fails, &fail), 2);
	CHECK(tries == 3 && list[2].algo == 0, "%d trials, algorithm %d", tries, list[2].algo);
	fail = ~0u;
	tries = 0;
	CHECK_RC(cu_algo_first(list, k, run_fails, &fail), -1);
	CHECK(tries == k, "%d trials of %d when none runs", tries, k);

	/* run-time fallback: the next whose workspace fits the plan's */
	CHECK_RC(cu_algo_next(list, k, 1, 1000), 1);
	CHECK_RC(cu_algo_next(list, k, 3, 1000), 4);     /* 5 wants 1 MiB: 2 instead */
	CHECK_RC(cu_algo_next(list, k, 3, 1 << 20), 3);
	CHECK_RC(cu_algo_next(list, k, 5, 1 << 20), 5);  /* the transform, ws 0 */
	CHECK_RC(cu_algo_next(list, k, k, 1 << 20), -1);
	CHECK_RC(cu_algo_next(list, k, 1, 100), 2);      /* 1 wants 200 */
	return tap_done();
}
