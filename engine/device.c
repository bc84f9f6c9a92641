/* device.c: --device cpu|cuda|cuda:N|auto (device.h). In a build without
 * CUDA the two CUDA entry points of backend.h are defined here: no device,
 * and a reason that says how to get one. */
#include <config.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "device.h"
#include "cdp_num.h"
#include "cpu/cpu.h"

#ifndef HAVE_CUDA
int cdp_cuda_device_count(void) { return 0; }

int cdp_cuda_device_uuid(int device, unsigned char uuid[16])
{
	(void)device;
	(void)uuid;
	return -1;
}

cdp_backend *cdp_backend_cuda(int device, char *err, size_t cap)
{
	(void)device;
	snprintf(err, cap, "this build has no CUDA backend (configure --with-cuda)");
	return NULL;
}
#endif

#ifdef HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* "cuda:N" -> N, or -1 */
static int cuda_index(const char *spec)
{
	int v;
	if (strncmp(spec, "cuda:", 5) != 0 || cdp_parse_int(spec + 5, 0, 1023, &v) != 0)
		return -1;
	return v;
}

int cdp_device_parse(const char *spec)
{
	if (!strcmp(spec, "cpu") || !strcmp(spec, "cuda") || !strcmp(spec, "auto") ||
	    cuda_index(spec) >= 0)
		return 0;
	return -1;
}

int cdp_device_pick(const char *spec, int ngpu, int local_rank)
{
	int dev;

	if (cdp_device_parse(spec) != 0 || !strcmp(spec, "cpu") || ngpu <= 0)
		return -1;
	if ((dev = cuda_index(spec)) >= 0)
		return dev < ngpu ? dev : -1;
	return (local_rank < 0 ? 0 : local_rank) % ngpu;
}

int cdp_device_env_local_rank(void)
{
	static const char *const vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
	                                    "LOCAL_RANK", "MPI_LOCALRANKID" };
	/* torchrun's children inherit the SLURM_LOCALID of the srun task that
	 * started torchrun, the same for all of them: its LOCAL_RANK is theirs */
	static const char *const torch[] = { "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
	                                     "SLURM_LOCALID", "MPI_LOCALRANKID" };
	const char *const *order = getenv("TORCHELASTIC_RUN_ID") ? torch : vars;
	int v;

	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *s = getenv(order[i]);
		if (s && *s && cdp_parse_int(s, 0, 1 << 20, &v) == 0)
			return v;
	}
	return -1;
}

const char *cdp_device_env_check(char *want, size_t cap)
{
	static const char *const flags[] = { "CDP_BF16_STASH", "CDP_BF16_GRADS", "CDP_CPU_BF16_EMU",
	                                     "CDP_CPU_WINOGRAD",
	                                     "CDP_CUDNN_BENCHMARK", "CDP_CUDNN_BN",
	                                     "CDP_CUDNN_NHWC", "CDP_CUDNN_VERBOSE" };
	const char *v = getenv("CDP_CPU_ISA");
	int us;

	if (v && *v && !cpu_kgemm_isa_known(v, want, cap))
		return "CDP_CPU_ISA";
	if ((v = getenv("CDP_CPU_BF16")) && *v && strcmp(v, "dp") != 0 && strcmp(v, "fma") != 0) {
		snprintf(want, cap, "dp or fma");
		return "CDP_CPU_BF16";
	}
	if ((v = getenv("CDP_CPU_SPIN_US")) && *v && cpu_spin_us_parse(v, &us) != 0) {
		snprintf(want, cap, "microseconds from 0 to 1000000");
		return "CDP_CPU_SPIN_US";
	}
	if ((v = getenv("CDP_INFER_PASS")) && *v && cdp_parse_int(v, 1, INT_MAX, &us) != 0) {
		snprintf(want, cap, "a whole number of samples from 1");
		return "CDP_INFER_PASS";
	}
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if ((v = getenv(flags[i])) && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
			snprintf(want, cap, "0 or 1");
			return flags[i];
		}
	return NULL;
}

const char *cdp_device_kernels(const cdp_backend *be)
{
	const char *k;

	if (be->device >= 0)
		return "cuda";
	k = be->precision == CDP_PREC_BF16 ? cpu_kgemm_bf16() : cpu_kgemm_isa();
	return k ? k : "?";
}

const char *cdp_device_precision_why(const cdp_backend *be, int prec)
{
	if (be->device >= 0)
		return "";
	if (prec == CDP_PREC_BF16)
		return " (bf16 on the cpu needs the AVX512_BF16 instructions, which this CPU does not have"
		       " or CDP_CPU_ISA leaves out)";
	return " (the cpu computes in fp32, and in bf16 with AVX512_BF16)";
}

int cdp_device_preselect(const char *spec)
{
	int lr = cdp_device_env_local_rank(), dev;

	if (lr < 0 || !spec || cdp_device_parse(spec) != 0 || !strcmp(spec, "cpu"))
		return -1;
	dev = cdp_device_pick(spec, cdp_cuda_device_count(), lr);
#ifdef HAVE_CUDA
	if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess) {
		cudaGetLastError();   /* cdp_device_open reports the device's trouble */
		dev = -1;
	}
#endif
	return dev;
}

cdp_backend *cdp_device_open(const char *spec, int threads, int local_rank, char *err, size_t cap)
{
	int n, dev;
	cdp_backend *be;

	if (cdp_device_parse(spec) != 0) {
		snprintf(err, cap, "unknown device '%s' (cpu, cuda, cuda:N or auto)", spec);
		return NULL;
	}
	n = strcmp(spec, "cpu") ? cdp_cuda_device_count() : 0;
	if (!strcmp(spec, "cpu") || (!strcmp(spec, "auto") && n == 0)) {
		if (!(be = cdp_backend_cpu(threads)))
			snprintf(err, cap, "cannot create the CPU backend: out of memory");
		return be;
	}
	if ((dev = cuda_index(spec)) < 0) {
		if (n == 0)   /* the backend says why: no CUDA build, driver or GPU */
			return cdp_backend_cuda(0, err, cap);
		dev = cdp_device_pick(spec, n, local_rank);
	} else if (dev >= n) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		char why[400];
		/* none at all: the backend says why (no CUDA build, driver or GPU) */
		if (n == 0 && !cdp_backend_cuda(dev, why, sizeof why))
			snprintf(err, cap, "device cuda:%d does not exist: %s", dev, why);
		else
			snprintf(err, cap, "device cuda:%d does not exist (%d GPU%s visible%s%s%s)", dev, n,
			         n == 1 ? "" : "s", vis ? ": CUDA_VISIBLE_DEVICES='" : "", vis ? vis : "",
			         vis ? "'" : "");
		return NULL;
	}
	return cdp_backend_cuda(dev, err, cap);
}
