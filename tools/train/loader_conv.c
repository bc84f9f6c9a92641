/* loader_conv.c: the loader's conversion kernels (loader_int.h): stored
 * samples of one band to standardized float32, y = (x - m) * k.
 *
 * uint8 tiles are the common case and the loader's hot loop (bench/
 * loader.sh), so they get explicit AVX-512 and AVX2 kernels, one chosen per
 * loader at open from what the CPU runs (cdp_loader_u8_kernel), besides the
 * SSE2 baseline and a plain loop elsewhere. Every kernel computes exactly the
 * scalar expression (an exact int->float conversion, then a float32
 * subtraction and a float32 multiplication, never fused), so results do not
 * depend on the CPU. With `stream` (the batch buffer, which is larger than
 * the caches and not read back by the loader) the kernels use non-temporal
 * stores, which skip the read-for-ownership of each output line: the float
 * output is 4x the input, so write bandwidth bounds this loop. The caller
 * issues cdp_loader_conv_fence() once after a sample's streamed stores.
 *
 * Other dtypes go through cdp_dtype_to_f32 and a plain loop that gcc
 * vectorizes (cdp_loader_std_f32); they are not the benchmark's case.
 */
#include "loader_int.h"

#include <math.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CDP_CONV_X86 1
#include <immintrin.h>
#endif

static void u8_tail(const uint8_t *restrict s, float *restrict d, size_t i, size_t n, float m,
                    float k)
{
	for (; i < n; i++)
		d[i] = ((float)s[i] - m) * k;
}

/* The portable kernel: fixed-length inner loops gcc vectorizes. */
static void u8_plain(const uint8_t *restrict s, float *restrict d, size_t n, float m, float k,
                     int stream, const uint8_t *next)
{
	size_t i = 0;

	(void)stream;
	(void)next;
	for (; i + 32 <= n; i += 32)
		for (int j = 0; j < 32; j++)
			d[i + j] = ((float)s[i + j] - m) * k;
	u8_tail(s, d, i, n, m, k);
}

#ifdef CDP_CONV_X86
/* one line of the next step per line of this one: its reads overlap this
 * step's stores instead of stalling the CRC that reads it next */
#define PREFETCH(next, i) do { if (next) __builtin_prefetch((next) + (i), 0, 3); } while (0)

#define T_AVX512 __attribute__((target("avx512f")))
#define T_AVX2   __attribute__((target("avx2")))

/* 16 samples at s as floats, standardized */
T_AVX512 static inline __m512 std16(const uint8_t *s, __m512 vm, __m512 vk)
{
	__m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)s));
	return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(x), vm), vk);
}

T_AVX512 static void u8_avx512(const uint8_t *restrict s, float *restrict d, size_t n, float m,
                               float k, int stream, const uint8_t *next)
{
	const __m512 vm = _mm512_set1_ps(m), vk = _mm512_set1_ps(k);
	size_t i = 0;

	if (stream) {
		for (; i < n && ((uintptr_t)(d + i) & 63); i++)
			d[i] = ((float)s[i] - m) * k;
		for (; i + 64 <= n; i += 64) {
			PREFETCH(next, i);
			for (int j = 0; j < 64; j += 16)
				_mm512_stream_ps(d + i + j, std16(s + i + j, vm, vk));
		}
	} else {
		for (; i + 64 <= n; i += 64)
			for (int j = 0; j < 64; j += 16)
				_mm512_storeu_ps(d + i + j, std16(s + i + j, vm, vk));
	}
	u8_tail(s, d, i, n, m, k);
}

/* 8 samples at s as floats, standardized */
T_AVX2 static inline __m256 std8(const uint8_t *s, __m256 vm, __m256 vk)
{
	__m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)s));
	return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(x), vm), vk);
}

T_AVX2 static void u8_avx2(const uint8_t *restrict s, float *restrict d, size_t n, float m,
                           float k, int stream, const uint8_t *next)
{
	const __m256 vm = _mm256_set1_ps(m), vk = _mm256_set1_ps(k);
	size_t i = 0;

	if (stream) {
		for (; i < n && ((uintptr_t)(d + i) & 31); i++)
			d[i] = ((float)s[i] - m) * k;
		for (; i + 32 <= n; i += 32) {
			if (!(i & 63))
				PREFETCH(next, i);
			for (int j = 0; j < 32; j += 8)
				_mm256_stream_ps(d + i + j, std8(s + i + j, vm, vk));
		}
	} else {
		for (; i + 32 <= n; i += 32)
			for (int j = 0; j < 32; j += 8)
				_mm256_storeu_ps(d + i + j, std8(s + i + j, vm, vk));
	}
	u8_tail(s, d, i, n, m, k);
}

/* The x86-64 baseline: SSE2 is always there. */
static void u8_sse2(const uint8_t *restrict s, float *restrict d, size_t n, float m, float k,
                    int stream, const uint8_t *next)
{
	const __m128 vm = _mm_set1_ps(m), vk = _mm_set1_ps(k);
	const __m128i z = _mm_setzero_si128();
	size_t i = 0;

	if (!stream) {
		u8_plain(s, d, n, m, k, 0, NULL);
		return;
	}
	for (; i < n && ((uintptr_t)(d + i) & 15); i++)
		d[i] = ((float)s[i] - m) * k;
	for (; i + 16 <= n; i += 16) {
		if (!(i & 63))
			PREFETCH(next, i);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i lo = _mm_unpacklo_epi8(b, z), hi = _mm_unpackhi_epi8(b, z);
		__m128i q[4] = { _mm_unpacklo_epi16(lo, z), _mm_unpackhi_epi16(lo, z),
		                 _mm_unpacklo_epi16(hi, z), _mm_unpackhi_epi16(hi, z) };
		for (int j = 0; j < 4; j++)
			_mm_stream_ps(d + i + 4 * j, _mm_mul_ps(_mm_sub_ps(_mm_cvtepi32_ps(q[j]), vm), vk));
	}
	u8_tail(s, d, i, n, m, k);
}
#endif /* CDP_CONV_X86 */

static int has_any(void) { return 1; }

#ifdef CDP_CONV_X86
static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* indexed by CDP_CONV_*; best last */
static const struct { const char *name; cdp_loader_u8_fn fn; int (*usable)(void); } kernels[] = {
	[CDP_CONV_PLAIN] = { "plain", u8_plain, has_any },
#ifdef CDP_CONV_X86
	[CDP_CONV_SSE2] = { "sse2", u8_sse2, has_any },
	[CDP_CONV_AVX2] = { "avx2", u8_avx2, has_avx2 },
	[CDP_CONV_AVX512] = { "avx512", u8_avx512, has_avx512 },
#endif
};
#define NKERNELS ((int)(sizeof kernels / sizeof kernels[0]))

cdp_loader_u8_fn cdp_loader_u8_kernel(int which, const char **name)
{
	if (which == CDP_CONV_AUTO)
		for (which = NKERNELS - 1; which > CDP_CONV_PLAIN && !kernels[which].usable(); which--)
			;
	if (which <= CDP_CONV_AUTO || which >= NKERNELS || !kernels[which].usable())
		return NULL;
	if (name)
		*name = kernels[which].name;
	return kernels[which].fn;
}

void cdp_loader_conv_fence(void)
{
#ifdef CDP_CONV_X86
	_mm_sfence();
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

void cdp_loader_std_f32(float *d, size_t n, float m, float k, int check)
{
	size_t i = 0;

	if (check)
		for (i = 0; i < n; i++)
			if (!isfinite(d[i]))
				d[i] = m;   /* becomes 0 below */
	for (i = 0; i + 32 <= n; i += 32)
		for (int j = 0; j < 32; j++)
			d[i + j] = (d[i + j] - m) * k;
	for (; i < n; i++)
		d[i] = (d[i] - m) * k;
}
