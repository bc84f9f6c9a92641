/* loader_kernel.h: `loader_bench kernel` (loader_kernel.c), the loader's
 * uint8 kernel alone against memcpy, for the ceiling in doc/PERFORMANCE.md.
 */
#ifndef CDP_LOADER_KERNEL_H
#define CDP_LOADER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* Times, over steps batches of b payloads of isz bytes (img[s*b + i]),
 * memcpy, a write-only kernel run, the kernel, and CRC+kernel as the loader
 * runs them, `rounds` times after a warm-up; prints the medians. 0, or 1
 * when out of memory. */
int loader_kernel_bench(const uint8_t *const *img, size_t isz, size_t b, uint64_t steps, int rounds);

#endif
