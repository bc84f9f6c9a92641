/* cdp_crc32.h: CRC-32 exactly as zlib's crc32() computes it, faster.
 *
 * The CRC is zlib's (ISO-HDLC, IEEE 802.3): polynomial 0x04C11DB7 bit-
 * reflected, initial value and final XOR 0xFFFFFFFF, so cdp_crc32(0, b, n)
 * equals crc32(0, b, n) for every input, and it chains the same way:
 * cdp_crc32(cdp_crc32(0, a, n), b, m) is the CRC of a followed by b. Every
 * format CRC in cdpool (records, stream frames, pool meta, pointer files)
 * is this value, so which implementation computed it never shows.
 *
 * Implementations, chosen once per process from what the CPU supports:
 *   vpclmulqdq  x86-64 with AVX-512F and VPCLMULQDQ: 256 bytes per step
 *               folded with carry-less multiplies on 512-bit vectors;
 *   pclmulqdq   x86-64 with PCLMULQDQ and SSE4.1: 64 bytes per step;
 *   zlib        zlib's own crc32_z, everywhere else and for short inputs.
 * The folding method is Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" (Gopal et al., 2009), bit-reflected form.
 */
#ifndef CDP_CRC32_H
#define CDP_CRC32_H

#include <stddef.h>
#include <stdint.h>

enum { CDP_CRC32_AUTO = 0, CDP_CRC32_ZLIB = 1, CDP_CRC32_PCLMUL = 2,
       CDP_CRC32_VPCLMUL = 3 };

typedef uint32_t (*cdp_crc32_fn)(uint32_t crc, const void *buf, size_t len);

/* The CRC of len bytes at buf continuing crc (0 to start). buf may have any
 * alignment; len 0 returns crc. Never fails. Thread-safe. */
uint32_t cdp_crc32(uint32_t crc, const void *buf, size_t len);

/* Implementation `which` (CDP_CRC32_*; AUTO: the one cdp_crc32 uses), or
 * NULL when this CPU or build lacks it. For tests and benchmarks. */
cdp_crc32_fn cdp_crc32_impl(int which);

/* The name of implementation `which` ("vpclmulqdq", "pclmulqdq", "zlib"),
 * or NULL for an unknown one; AUTO names the one cdp_crc32 uses. */
const char *cdp_crc32_name(int which);

#endif
