/* test_ops.h: the parts of tests/gpu/test_ops (one file per group of ops,
 * each test body run on both sides by gpu_harness.h). */
#ifndef CDP_TEST_OPS_H
#define CDP_TEST_OPS_H

#include "gpu_harness.h"

/* Reduced precision, stated relative to the largest reference value
 * (floor 1): inputs rounded to a p-bit significand have a unit roundoff
 * u = 2^-p (bf16 p = 8, fp16 and tf32 p = 11); each product then carries a
 * relative error below 2u with a random sign, so a dot product's error is
 * ~u times its size, the worst element a few times that, plus u once more
 * where the output is staged in half precision. 8u covers that with room:
 * bf16 3.1e-2, fp16 and tf32 3.9e-3. A wrong layout or a missed term is off
 * by order 1. */
double tol_for(int prec);

void test_blas(void);          /* test_ops.c */
void test_conv(void);
void test_bn(void);            /* test_ops_layers.c */
void test_act(void);
void test_pool(void);
void test_upsample(void);
void test_chan(void);
void test_dropout(void);
void test_gap_bias_add(void);
void test_edges(void);         /* NaN, misaligned bn arrays, bn of one value: run last */
void test_losses(void);        /* test_ops_loss.c */
void test_metrics(void);
void test_optim(void);
void test_prep(void);          /* test_ops_data.c */
void test_win_gather(void);    /* cdp-predict's window ops */
void test_win_blend(void);
void test_datapath(void);

#endif
