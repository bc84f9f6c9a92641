/* bf16_sets.h: the CPU backend's sets of bf16 kernels (cpu_gemm.c) as the
 * engine tests go through them, each where the CPU has it. */
#ifndef CDP_TEST_BF16_SETS_H
#define CDP_TEST_BF16_SETS_H

#include <stdio.h>
#include <string.h>
#include "cpu/cpu.h"
#include "tap.h"

#define BF16_NSETS 4
static const char *const bf16_sets[BF16_NSETS] = { "emulated", "avx512bf16", "avx512bf16-fma",
                                                   "amx" };

/* Set i forced, be in bf16: 0; -1 (said on stdout) where the CPU lacks it */
static inline int bf16_set_enter(cdp_backend *be, int i)
{
	if (cpu_kgemm_bf16_force(bf16_sets[i]) < 0) {
		printf("# %s: not on this CPU\n", bf16_sets[i]);
		return -1;
	}
	CHECK(strcmp(cpu_kgemm_bf16(), bf16_sets[i]) == 0, "forced %s, in use %s", bf16_sets[i],
	      cpu_kgemm_bf16());
	CHECK(be->set_precision(be, CDP_PREC_BF16) == 0, "[%s] bf16 accepted", bf16_sets[i]);
	return 0;
}

#endif
