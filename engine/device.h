/* device.h: choosing the backend a program runs on (--device).
 *
 *   cpu       the CPU backend with `threads` threads (<= 0: OpenBLAS's default)
 *   cuda      GPU local_rank % count, so that `mpirun -np J` on a node with J
 *             GPUs gives each rank its own; more ranks than GPUs share them
 *             round-robin (useful for testing the multi-rank path on one GPU)
 *   cuda:N    GPU N, whatever the rank
 *   auto      cuda when a GPU is present (cdp_cuda_device_count() > 0), else cpu
 */
#ifndef CDP_DEVICE_H
#define CDP_DEVICE_H

#include <stddef.h>
#include "backend.h"

/* Checks the spelling only (for option parsing): 0 or -1. */
int cdp_device_parse(const char *spec);
/* Opens the backend; NULL with a one-line reason in err. */
cdp_backend *cdp_device_open(const char *spec, int threads, int local_rank, char *err, size_t cap);

#endif
