/* test_backend_table.c: every op of both backend tables is set, so a
 * missing op fails here instead of as a NULL call inside a training run.
 *
 *  - CDP_BACKEND_OPS (backend.h) names every op of struct cdp_backend: the
 *    static assert below fails to compile when an op is added to the
 *    struct but not to the list;
 *  - the CPU backend, as cdp_backend_cpu builds it, sets every op;
 *  - in a build with CUDA, the CUDA backend's table (cu_table, which
 *    cdp_backend_cuda fills its table with) sets every op. cu_table
 *    touches no device, so this runs without a GPU.
 */
#include <config.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#ifdef HAVE_CUDA
#include "cuda/cuda.h"
#endif
#include "tap.h"

/* The ops are the members from alloc to the end, all pointers (to
 * functions). Counting the list makes its length a constant expression. */
#define COUNT_OP(op) + 1
_Static_assert(offsetof(cdp_backend, alloc) + (0 CDP_BACKEND_OPS(COUNT_OP)) * sizeof(void (*)(void))
               == sizeof(cdp_backend),
               "struct cdp_backend has an op that CDP_BACKEND_OPS (backend.h) does not list");

/* The ops of be left NULL, as a count; each is named on stderr. */
static int missing_ops(const cdp_backend *be, const char *what)
{
	int missing = 0;

#define CHECK_OP(op) \
	if (be->op == NULL) { \
		fprintf(stderr, "%s: op '%s' is not set\n", what, #op); \
		missing++; \
	}
	CDP_BACKEND_OPS(CHECK_OP)
#undef CHECK_OP
	return missing;
}

/* The check itself must see a hole: a table with every op set but one. */
static void test_detects_hole(void)
{
	cdp_backend *be = cdp_backend_cpu(1);

	CHECK(be != NULL, "cdp_backend_cpu");
	if (!be)
		return;
	{
		cdp_backend copy = *be;
		copy.conv_bwd_filter = NULL;
		CHECK_RC(missing_ops(&copy, "cpu with conv_bwd_filter cleared (expected)"), 1);
	}
	be->destroy(be);
}

static void test_cpu(void)
{
	cdp_backend *be = cdp_backend_cpu(2);

	CHECK(be != NULL, "cdp_backend_cpu");
	if (!be)
		return;
	CHECK_RC(missing_ops(be, "cpu"), 0);
	be->destroy(be);
}

static void test_cuda(void)
{
#ifdef HAVE_CUDA
	cdp_backend be;

	memset(&be, 0, sizeof be);
	cu_table(&be);
	CHECK_RC(missing_ops(&be, "cuda"), 0);
#else
	printf("# no CUDA in this build: the CUDA table is not checked\n");
#endif
}

int main(void)
{
	test_detects_hole();
	test_cpu();
	test_cuda();
	return tap_done();
}
