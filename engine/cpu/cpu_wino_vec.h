/* cpu_wino_vec.h: what the Winograd transforms (cpu_conv_wino.c,
 * cpu_conv_winof.c) compute with, private to them: GCC's vector
 * extensions, 16, 8 and 4 tiles at a time, with the shuffles that split a
 * row into its even and odd columns and zip two back (each transform
 * compiled in CPU_CLONES, cpu.h). WINO_VEC is 0 where the extensions are
 * missing (scalar code only).
 */
#ifndef CDP_CPU_WINO_VEC_H
#define CDP_CPU_WINO_VEC_H

#include "cpu.h"       /* CPU_CLONES */

#if defined(__GNUC__) && !defined(__clang__)
#define WINO_VEC 16
/* Whether the 16-wide loops run: only with the AVX-512 kernels
 * (cpu_kgemm_wide, cpu.h). For AVX2 GCC lowers a shuffle of 64-byte
 * vectors through the stack (scalar moves and store-forwarding stalls: the
 * transforms took 3 to 4 times the time of 8-wide loops on a Zen 3,
 * doc/PERFORMANCE.md), and the clones are one source, so the choice is
 * made at run time, once per row. */
#define WINO_WIDE (cpu_kgemm_wide())
/* Whether tile rows r and r + 1 (r + 1 < end) of the problem c, geometry
 * g (cpu_wgeo), go through the 16-wide transforms as one row: a plane 16
 * wide (8 tiles a row), both rows of one sample, all four output rows
 * inside the plane */
#define WINO_TWO_ROWS(c, g, r, end) \
	(WINO_WIDE && (c)->ow == 16 && (r) + 1 < (end) && (r) % (g)->tph + 1 < (g)->tph && \
	 2 * ((r) % (g)->tph) + 3 < (c)->oh)
/* 16 at a time, */
typedef float wvec __attribute__((vector_size(64), aligned(4), may_alias));
typedef int wveci __attribute__((vector_size(64)));
static const wveci EVEN = { 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30 };
static const wveci ODD = { 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 };
static const wveci ZIP_LO = { 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23 };
static const wveci ZIP_HI = { 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31 };
typedef unsigned wvecu __attribute__((vector_size(64)));
/* v (of type VT, UT its unsigned lanes) rounded to bf16 in place, lane by
 * lane, bit for bit as cpu_bf16_round: to nearest, ties to even, a NaN
 * kept a quiet NaN (a macro: a function returning a vector of 64 bytes
 * changes the ABI without AVX-512) */
#define WINO_BF16_AS(VT, UT, v) do { \
	UT u_ = (UT)(v), nan_ = (UT)((u_ & 0x7fffffffu) > 0x7f800000u); \
	UT r_ = (u_ + 0x7fffu + ((u_ >> 16) & 1u)) & 0xffff0000u; \
	(v) = (VT)((nan_ & ((u_ | 0x400000u) & 0xffff0000u)) | (~nan_ & r_)); \
} while (0)
#define WINO_BF16(v) WINO_BF16_AS(wvec, wvecu, v)
/* v (already rounded: WINO_BF16_AS) stored as its bf16 bits at hp (HT:
 * the lanes as uint16_t) */
#define WINO_BF16_PUT(UT, HT, v, hp) \
	(*(HT *)(hp) = __builtin_convertvector((UT)(v) >> 16, HT))
typedef uint16_t wvech __attribute__((vector_size(32), aligned(2), may_alias));
/* and 8 at a time, for the rows of 8 to 15 tiles (16x16 to 30x30 planes), */
typedef float wvec8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int wveci8 __attribute__((vector_size(32)));
static const wveci8 EVEN8 = { 0, 2, 4, 6, 8, 10, 12, 14 };
static const wveci8 ODD8 = { 1, 3, 5, 7, 9, 11, 13, 15 };
static const wveci8 ZIP_LO8 = { 0, 8, 1, 9, 2, 10, 3, 11 };
static const wveci8 ZIP_HI8 = { 4, 12, 5, 13, 6, 14, 7, 15 };
typedef unsigned wvecu8 __attribute__((vector_size(32)));
#define WINO_BF16_8(v) WINO_BF16_AS(wvec8, wvecu8, v)
typedef uint16_t wvech8 __attribute__((vector_size(16), aligned(2), may_alias));
/* and 4, for 8x8 and 7x7 planes and the rest of a row */
typedef float wvec4 __attribute__((vector_size(16), aligned(4), may_alias));
typedef int wveci4 __attribute__((vector_size(16)));
static const wveci4 EVEN4 = { 0, 2, 4, 6 };
static const wveci4 ODD4 = { 1, 3, 5, 7 };
static const wveci4 ZIP_LO4 = { 0, 4, 1, 5 };
static const wveci4 ZIP_HI4 = { 2, 6, 3, 7 };
typedef unsigned wvecu4 __attribute__((vector_size(16)));
#define WINO_BF16_4(v) WINO_BF16_AS(wvec4, wvecu4, v)
typedef uint16_t wvech4 __attribute__((vector_size(8), aligned(2), may_alias));

#else
#define WINO_VEC 0
#endif

#endif
