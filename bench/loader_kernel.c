/* loader_kernel.c: `loader_bench kernel`, the ceiling of the loader's
 * uint8 path on this machine (loader_kernel.h).
 *
 * Over the same stored image payloads as `loader_bench speed`, timed by the
 * calling thread's CPU time, medians over rounds, each against memcpy of
 * the stored bytes in the same round:
 *   write only   the uint8 kernel over an 8 KiB source that stays in L1,
 *                streaming the float batch to memory: the bound set by the
 *                4 bytes written per stored byte;
 *   convert      the kernel straight over the payloads (no CRC);
 *   CRC+convert  the loader's loop (loader_sample.c): cdp_crc32 of 8 KiB,
 *                then its conversion while the next 8 KiB are prefetched.
 * The loader itself adds headers, labels, threads and MADV_WILLNEED.
 */
#include "loader_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cdp_crc32.h"
#include "loader_int.h"

#define STEP 8192       /* bytes per CRC+convert step, as in loader_sample.c */
#define MAXR 99

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static double med(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint32_t crc_convert(cdp_loader_u8_fn f, const uint8_t *s, float *d, size_t len)
{
	uint32_t crc = 0;

	for (size_t o = 0; o < len; o += STEP) {
		size_t n = len - o < STEP ? len - o : STEP;
		crc = cdp_crc32(crc, s + o, n);
		f(s + o, d + o, n, 0.0f, 1.0f, 1, len - o >= 2 * n ? s + o + n : NULL);
	}
	cdp_loader_conv_fence();
	return crc;
}

int loader_kernel_bench(const uint8_t *const *img, size_t isz, size_t b, uint64_t steps, int rounds)
{
	const char *isa = NULL;
	cdp_loader_u8_fn f = cdp_loader_u8_kernel(CDP_CONV_AUTO, &isa);
	static uint8_t l1[STEP];
	uint8_t *dst = malloc(b * isz);
	float *out = NULL;
	double t[4][MAXR], r[3][MAXR];
	volatile uint32_t sink = 0;
	int R = rounds < MAXR ? rounds : MAXR;

	if (!dst || posix_memalign((void **)&out, (size_t)2 << 20, b * isz * sizeof(float))) {
		free(dst);
		fprintf(stderr, "loader_bench: kernel: out of memory\n");
		return 1;
	}
	madvise(out, b * isz * sizeof(float), MADV_HUGEPAGE);
	memset(l1, 3, sizeof l1);
	for (int k = -1; k < R; k++) {
		int q = k < 0 ? 0 : k;
		double c0 = cpu_s();
		for (size_t s = 0; s < steps; s++)
			for (size_t i = 0; i < b; i++)
				memcpy(dst + i * isz, img[s * b + i], isz);
		__asm__ volatile("" : : "r"(dst) : "memory");
		t[0][q] = cpu_s() - c0;
		c0 = cpu_s();
		for (size_t s = 0; s < steps; s++)
			for (size_t i = 0; i < b; i++)
				for (size_t o = 0; o < isz; o += STEP)
					f(l1, out + i * isz + o, isz - o < STEP ? isz - o : STEP, 0.0f, 1.0f, 1, NULL);
		cdp_loader_conv_fence();
		t[1][q] = cpu_s() - c0;
		c0 = cpu_s();
		for (size_t s = 0; s < steps; s++)
			for (size_t i = 0; i < b; i++)
				f(img[s * b + i], out + i * isz, isz, 0.0f, 1.0f, 1, NULL);
		cdp_loader_conv_fence();
		t[2][q] = cpu_s() - c0;
		c0 = cpu_s();
		for (size_t s = 0; s < steps; s++)
			for (size_t i = 0; i < b; i++)
				sink ^= crc_convert(f, img[s * b + i], out + i * isz, isz);
		t[3][q] = cpu_s() - c0;
		for (int m = 0; m < 3; m++)
			r[m][q] = t[0][q] / t[m + 1][q];
	}
	printf("kernel %s, CRC %s, %zu-byte payloads, batch %zu, %llu steps x %d rounds (CPU time)\n",
	       isa, cdp_crc32_name(CDP_CRC32_AUTO), isz, b, (unsigned long long)steps, R);
	printf("memcpy stored      %8.1f MB/s\n", steps * b * isz / med(t[0], R) / 1e6);
	printf("ratio to memcpy(stored bytes): write only %.2f, convert %.2f, CRC+convert %.2f (medians)\n",
	       med(r[0], R), med(r[1], R), med(r[2], R));
	free(dst);
	free(out);
	return 0;
}
