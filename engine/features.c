/* features.c: the versions the engine was compiled against (backend.h,
 * cdp_engine_features), from the headers' macros: CUDART_VERSION (major *
 * 1000 + minor * 10), CUDNN_MAJOR/MINOR/PATCHLEVEL and OpenBLAS's
 * OPENBLAS_VERSION (" OpenBLAS 0.3.21 "). Only this file and cuda/ see the
 * CUDA headers; programs and lib/ get a string. */
#include <config.h>
#include <stdio.h>
#include <string.h>
#include <cblas.h>     /* and through it openblas_config.h */
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cudnn.h>
#endif
#include "backend.h"

const char *cdp_engine_features(void)
{
	static char buf[160];
	const char *blas = "unknown";
	char cuda[64];
	size_t n;

#ifdef HAVE_CUDA
	snprintf(cuda, sizeof cuda, "runtime %d.%d, cuDNN %d.%d.%d", CUDART_VERSION / 1000,
	         CUDART_VERSION % 1000 / 10, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
#else
	snprintf(cuda, sizeof cuda, "not built");
#endif
#ifdef OPENBLAS_VERSION
	/* " OpenBLAS 0.3.21 " -> "0.3.21" */
	blas = OPENBLAS_VERSION;
	blas += strspn(blas, " ");
	if (strncmp(blas, "OpenBLAS ", 9) == 0)
		blas += 9;
#endif
	n = strcspn(blas, " ");
	snprintf(buf, sizeof buf, "CUDA: %s\nOpenBLAS: %.*s", cuda, (int)n, blas);
	return buf;
}
