/* cpu_amx.h: what the AMX kernels share (cpu_gemm_amx.c, cpu_conv_pairs.c,
 * cpu_conv_grid_filter.c), and with them the VDPBF16PS kernels of the last
 * two, private to them; only where the compiler has the AMX and AVX-512
 * intrinsics (CPU_BF16_KERNELS, cpu.h). */
#ifndef CDP_CPU_AMX_H
#define CDP_CPU_AMX_H

#include "cpu.h"

#ifdef CPU_BF16_KERNELS
#include <immintrin.h>
#include <stdint.h>

#define AMX_TARGET \
	__attribute__((target("amx-tile,amx-bf16,avx512bf16,avx512f,avx512bw,avx512vl")))
/* the VDPBF16PS kernels' (the avx512bf16 set), a subset of AMX_TARGET */
#define DP_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))

/* dst[16c + r] = r[r][c]: a 16 x 16 transpose of 32-bit elements (of bf16
 * pairs: row r's pairs become column r) */
DP_TARGET static inline void cpu_amx_transpose16(const __m512i *r, uint32_t *dst)
{
	__m512i t[16], u[16];

	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	/* u[4g + e], 128-bit lane L: elements 4L + e of rows 4g .. 4g+3 */
	for (int i = 0; i < 16; i += 4) {
		u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
		u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
		u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
		u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	for (int e = 0; e < 4; e++) {
		__m512i wl = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x44);
		__m512i wh = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xee);
		__m512i xl = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x44);
		__m512i xh = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xee);
		_mm512_storeu_si512(dst + 16 * e, _mm512_shuffle_i32x4(wl, xl, 0x88));
		_mm512_storeu_si512(dst + 16 * (4 + e), _mm512_shuffle_i32x4(wl, xl, 0xdd));
		_mm512_storeu_si512(dst + 16 * (8 + e), _mm512_shuffle_i32x4(wh, xh, 0x88));
		_mm512_storeu_si512(dst + 16 * (12 + e), _mm512_shuffle_i32x4(wh, xh, 0xdd));
	}
}

/* C tiles 0 .. n-1 (n of 1..3) zeroed, then summed over `steps` steps of
 * TDPBF16PS, each tile its own chain: step i multiplies the tile at
 * a[u] + 64 i bytes (16 rows sa bytes apart: natural bf16, 32 along K) by
 * the shared one at b + 1024 i bytes (16 rows of 64 bytes: VNNI pairs),
 * loaded once for the n products. Tiles 4-7 hold the operands. */
AMX_TARGET static inline void cpu_amx_chains(int n, long steps, const void *b,
                                             const void *const a[3], long sa)
{
	const char *bp = b, *a0 = a[0], *a1 = a[1], *a2 = a[2];

	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	for (long i = 0; i < steps; i++) {
		_tile_loadd(4, bp + 1024 * i, 64);
		_tile_loadd(5, a0 + 64 * i, sa);
		_tile_dpbf16ps(0, 5, 4);
		if (n > 1) {
			_tile_loadd(6, a1 + 64 * i, sa);
			_tile_dpbf16ps(1, 6, 4);
		}
		if (n > 2) {
			_tile_loadd(7, a2 + 64 * i, sa);
			_tile_dpbf16ps(2, 7, 4);
		}
	}
}
#endif

#endif
