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
/* The CUDA device cdp_device_open(spec, .., local_rank) binds when ngpu
 * GPUs are visible: -1 for cpu, a bad spec, no GPU or cuda:N past them. */
int cdp_device_pick(const char *spec, int ngpu, int local_rank);
/* The launcher's local rank, before MPI is up: the first of
 * OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), SLURM_LOCALID (srun), LOCAL_RANK
 * (torchrun and the like), MPI_LOCALRANKID (MPICH, Intel MPI) that holds a
 * number >= 0, LOCAL_RANK first where torchrun started the process
 * (TORCHELASTIC_RUN_ID); else -1. */
int cdp_device_env_local_rank(void);
/* The engine's settings of the environment (CDP_CPU_ISA, CDP_CPU_BF16,
 * CDP_CPU_BF16_EMU, CDP_CPU_WINOGRAD, CDP_BF16_STASH, CDP_BF16_GRADS, CDP_INFER_PASS,
 * CDP_CUDNN_*), checked
 * before the engine reads them, which would take a value it does not know
 * for the default: NULL when each is unset, empty or allowed, else the
 * first variable that is not, with what it allows in want[cap]. */
const char *cdp_device_env_check(char *want, size_t cap);
/* Call before cdp_dist_init (MPI_Init): makes the GPU that cdp_device_open
 * will bind (from the launcher's local rank, which is MPI's local rank on
 * one node) the process's current device, so that a CUDA-aware MPI, which
 * sets up its CUDA context in MPI_Init on the current device, does not put
 * one on GPU 0 for every rank. Does nothing for cpu, without a local-rank
 * variable (a single process: GPU 0 either way) or without a GPU. Returns
 * the device made current, or -1. */
int cdp_device_preselect(const char *spec);
/* Why be refused set_precision(prec), for the programs' message: a
 * parenthesized clause ("" on CUDA, whose refusals need no comment). */
const char *cdp_device_precision_why(const cdp_backend *be, int prec);
/* The kernels be's products run on in its precision, for logs and
 * benchmarks: the CPU's set ("avx512", "avx512bf16-fma", ...) or "cuda". */
const char *cdp_device_kernels(const cdp_backend *be);
/* Opens the backend; NULL with a one-line reason in err. */
cdp_backend *cdp_device_open(const char *spec, int threads, int local_rank, char *err, size_t cap);

#endif
