/* emu.h: runs our CUDA kernels (engine/cuda/cuda_kern_*.cu) on the
 * host, so that make check compares every one of them with the CPU
 * backend on machines without a GPU (tests/gpu/emu/kernel_check.cpp).
 * mkemu.py rewrites each launch k<<<grid, block, shmem, stream>>>(args)
 * into emu_launch() and each __shared__ array into a poisoned static; the
 * host C++ compiler then builds the kernels with this header in front.
 *
 * What it emulates:
 *  - Launches: grid and block shapes, checked against the limits of our
 *    targets (sm_80, sm_90): at most 1024 threads and block z <= 64, grid
 *    y and z <= 65535, at most 48 KiB of shared memory (static + dynamic,
 *    the default without an opt-in). A bad launch runs nothing and leaves
 *    cudaErrorInvalidConfiguration for cudaGetLastError(), as on a GPU.
 *  - Threads: every thread of a block is a fiber (ucontext) with its own
 *    128 KiB stack (a guard page below it turns an overflow into SIGSEGV),
 *    so locals live across barriers. A fiber runs until it reaches a
 *    barrier or returns. Fibers run in thread order in one block and in
 *    reverse order in the next (counting across launches), so that a
 *    missing __syncthreads between one thread's write and another's read
 *    gives a stale read in one of the two orders.
 *  - __syncthreads(): releases when every thread of the block has reached
 *    it or returned (as the hardware counts exited threads).
 *  - Warps: 32 consecutive linear thread ids. __shfl_down_sync(mask, v,
 *    delta, width) waits until every lane named in mask has called it,
 *    then exchanges; a lane reading from a lane that is not taking part
 *    (outside the block, say) gets NaN bits (undefined on a GPU).
 *  - Shared memory: __shared__ arrays and the dynamic extern __shared__
 *    buffer are filled with 0xff bytes (NaN as float or double, -1 as an
 *    integer) when a block starts, so a read of anything this block did
 *    not write shows up as a wrong result.
 *  - atomicAdd(unsigned long long *, unsigned long long): atomic because
 *    fibers never run at the same time.
 *  - cudaGetLastError, cudaGetErrorName, cudaGetErrorString.
 *  - A block in which every unfinished thread waits at a barrier that can
 *    never complete (a __syncthreads or a shuffle some threads skip) is
 *    reported with each thread's state, and the program aborts.
 *
 * What it does not emulate:
 *  - Concurrency: blocks run one after another and a block's threads
 *    switch only at barriers. A data race (two threads writing one
 *    address, one block reading another's output) is not detected, and a
 *    kernel that waits for another block (spin lock, grid sync) hangs.
 *  - The memory model: every store is visible at once; __threadfence,
 *    volatile and memory ordering are neither needed nor checked.
 *  - Device memory and streams: pointers are host pointers, the stream is
 *    ignored and a launch has finished when emu_launch returns.
 *  - Device arithmetic: __CUDA_ARCH__ is not defined, so the host branches
 *    of the kernels' __host__ __device__ helpers run (cdk_mul is a * b
 *    here, __fmul_rn on a GPU), with the host's libm (exp, log) and no
 *    fused multiply-add. Rounding on the device is tests/gpu/test_ops's
 *    business; this checks indexing, synchronisation, reduction order and
 *    the arithmetic as written.
 *  - Other intrinsics (__shfl_sync, __ballot_sync, float atomics, ...): a
 *    kernel that uses one fails to compile here; add it to this file.
 *
 * One translation unit, one host thread: the state below is static.
 */
#ifndef CDP_EMU_H
#define CDP_EMU_H

#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <functional>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

/* CUDA's qualifiers mean nothing on the host: kernels are plain functions.
 * (CUDA's headers are included above, so the kernels' own #includes of
 * them are no-ops and never see these definitions.) */
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

#define EMU_MAX_THREADS 1024
#define EMU_MAX_SHARED  (48 * 1024)
#define EMU_STACK       (128 * 1024)
#define EMU_MAX_ARRAYS  64             /* distinct __shared__ arrays per kernel */

static dim3 blockIdx, threadIdx, blockDim, gridDim;
static unsigned char emu_dyn_shared[EMU_MAX_SHARED];

enum emu_state { EMU_RUN, EMU_AT_SYNC, EMU_AT_SHFL, EMU_EXITED };

struct emu_thread {
	ucontext_t ctx;
	char *stack;                     /* EMU_STACK bytes above a guard page */
	enum emu_state st;
	dim3 tid;
	unsigned mask, delta, width;     /* the pending shuffle */
	uint64_t in, out;                /* its value and its result (bits) */
};

static struct {
	emu_thread t[EMU_MAX_THREADS];
	ucontext_t sched;                /* the scheduler's context */
	int nt, cur;                     /* threads of the block, the running one */
	std::function<void()> *body;
	const char *kname, *file;        /* the launch running, for messages */
	int line;
	size_t dyn_bytes, static_bytes;
	void *arrays[EMU_MAX_ARRAYS];    /* __shared__ arrays poisoned in this block */
	int narrays;
	cudaError_t err;                 /* for cudaGetLastError */
	long launches, blocks, switches;
} emu;

/* ---- the CUDA runtime calls the launchers make ---- */

extern "C" cudaError_t cudaGetLastError(void)
{
	cudaError_t e = emu.err;

	emu.err = cudaSuccess;
	return e;
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
	default: return "cudaError (not produced by the emulator)";
	}
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	default: return "unknown error";
	}
}

/* ---- errors in a kernel that a GPU would hang or misbehave on ---- */

static void emu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void emu_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "emu: kernel %s launched at %s:%d, block (%u,%u,%u): ", emu.kname, emu.file,
	        emu.line, blockIdx.x, blockIdx.y, blockIdx.z);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* ---- what kernels call ---- */

/* back to the scheduler, waiting in state st */
static void emu_wait(enum emu_state st)
{
	emu_thread *t = &emu.t[emu.cur];

	t->st = st;
	swapcontext(&t->ctx, &emu.sched);
	threadIdx = t->tid;
}

static inline void __syncthreads(void)
{
	emu_wait(EMU_AT_SYNC);
}

static inline int emu_linear_tid(void)
{
	return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

template <typename T>
static T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of more than 8 bytes");
	emu_thread *t = &emu.t[emu.cur];
	T r;

	if (width < 1 || width > 32 || (width & (width - 1)))
		emu_die("__shfl_down_sync width %d is not a power of 2 in [1, 32]", width);
	t->mask = mask;
	t->delta = delta;
	t->width = (unsigned)width;
	t->in = 0;
	memcpy(&t->in, &v, sizeof v);
	emu_wait(EMU_AT_SHFL);
	memcpy(&r, &emu.t[emu.cur].out, sizeof r);
	return r;
}

static inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v)
{
	unsigned long long old = *a;

	*a = old + v;
	return old;
}

/* Called (by mkemu.py's rewrite) where a kernel declares a __shared__
 * array: the first thread of a block to get there fills it with 0xff. */
static void emu_shared_poison(void *p, size_t bytes)
{
	for (int i = 0; i < emu.narrays; i++)
		if (emu.arrays[i] == p)
			return;
	if (emu.narrays == EMU_MAX_ARRAYS)
		emu_die("more than %d __shared__ arrays", EMU_MAX_ARRAYS);
	emu.arrays[emu.narrays++] = p;
	emu.static_bytes += bytes;
	if (emu.static_bytes + emu.dyn_bytes > EMU_MAX_SHARED)
		emu_die("%zu bytes of __shared__ arrays and %zu dynamic: more than %d", emu.static_bytes,
		        emu.dyn_bytes, EMU_MAX_SHARED);
	memset(p, 0xff, bytes);
}

/* ---- the scheduler ---- */

static void emu_entry(void)
{
	(*emu.body)();
	emu.t[emu.cur].st = EMU_EXITED;
	/* returning resumes uc_link, the scheduler */
}

static char *emu_stack(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = (char *)mmap(NULL, EMU_STACK + page, PROT_READ | PROT_WRITE,
	                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p, page, PROT_NONE) != 0) {
		fprintf(stderr, "emu: cannot map a thread stack: %s\n", strerror(errno));
		exit(99);
	}
	return p + page;
}

/* Lets every lane of a warp whose shuffle is complete go on, with its
 * result; 1 if any did. */
static int emu_release_shuffles(void)
{
	int released = 0;

	for (int w = 0; w * 32 < emu.nt; w++) {
		int lo = w * 32, hi = lo + 32 < emu.nt ? lo + 32 : emu.nt, waiting = 0, ready = 1;
		for (int l = lo; l < hi; l++) {
			emu_thread *t = &emu.t[l];
			if (t->st != EMU_AT_SHFL)
				continue;
			waiting = 1;
			for (int m = lo; m < hi; m++)
				if ((t->mask >> (m - lo) & 1) && emu.t[m].st != EMU_AT_SHFL)
					ready = 0;
		}
		if (!waiting || !ready)
			continue;
		for (int l = lo; l < hi; l++) {
			emu_thread *t = &emu.t[l];
			if (t->st != EMU_AT_SHFL)
				continue;
			unsigned lane = (unsigned)(l - lo), seg = lane % t->width;
			int src = l + (int)t->delta;
			if (seg + t->delta >= t->width)
				t->out = t->in;            /* past the segment: own value */
			else if (src < hi && emu.t[src].st == EMU_AT_SHFL)
				t->out = emu.t[src].in;
			else
				t->out = ~(uint64_t)0;     /* a lane not taking part */
		}
		for (int l = lo; l < hi; l++)
			if (emu.t[l].st == EMU_AT_SHFL)
				emu.t[l].st = EMU_RUN;
		released = 1;
	}
	return released;
}

static void emu_deadlock(void)
{
	fprintf(stderr, "emu: deadlock: no thread can go on; states (S __syncthreads, W shuffle, "
	        "x returned), one line per warp:\n");
	for (int l = 0; l < emu.nt; l++) {
		static const char code[] = { 'R', 'S', 'W', 'x' };
		fputc(code[emu.t[l].st], stderr);
		if (l % 32 == 31 || l == emu.nt - 1)
			fputc('\n', stderr);
	}
	emu_die("deadlock");
}

static void emu_run_block(int reverse)
{
	emu.narrays = 0;
	emu.static_bytes = 0;
	memset(emu_dyn_shared, 0xff, emu.dyn_bytes);
	for (int l = 0; l < emu.nt; l++) {
		emu_thread *t = &emu.t[l];
		if (!t->stack)
			t->stack = emu_stack();
		getcontext(&t->ctx);
		t->ctx.uc_stack.ss_sp = t->stack;
		t->ctx.uc_stack.ss_size = EMU_STACK;
		t->ctx.uc_link = &emu.sched;
		makecontext(&t->ctx, emu_entry, 0);
		t->st = EMU_RUN;
		t->tid = dim3(l % blockDim.x, l / blockDim.x % blockDim.y, l / (blockDim.x * blockDim.y));
	}
	for (;;) {
		int ran = 0, exited = 0, at_sync = 0;
		for (int k = 0; k < emu.nt; k++) {
			int l = reverse ? emu.nt - 1 - k : k;
			if (emu.t[l].st != EMU_RUN)
				continue;
			emu.cur = l;
			threadIdx = emu.t[l].tid;
			emu.switches++;
			swapcontext(&emu.sched, &emu.t[l].ctx);
			ran = 1;
		}
		if (ran)
			continue;
		for (int l = 0; l < emu.nt; l++) {
			exited += emu.t[l].st == EMU_EXITED;
			at_sync += emu.t[l].st == EMU_AT_SYNC;
		}
		if (exited == emu.nt)
			return;
		if (at_sync + exited == emu.nt) {
			for (int l = 0; l < emu.nt; l++)
				if (emu.t[l].st == EMU_AT_SYNC)
					emu.t[l].st = EMU_RUN;
			continue;
		}
		if (!emu_release_shuffles())
			emu_deadlock();
	}
}

/* kernel<<<g, b, shmem>>>(...) as mkemu.py rewrites it: body calls the
 * kernel; it runs once per thread of the grid. */
static void emu_launch(const char *kname, const char *file, int line, dim3 g, dim3 b, size_t shmem,
                       std::function<void()> body)
{
	unsigned long long nt = (unsigned long long)b.x * b.y * b.z;

	if (nt < 1 || nt > EMU_MAX_THREADS || b.z > 64 || g.x < 1 || g.y < 1 || g.z < 1 ||
	    g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535 || shmem > EMU_MAX_SHARED) {
		emu.err = cudaErrorInvalidConfiguration;
		return;
	}
	emu.launches++;
	emu.kname = kname;
	emu.file = file;
	emu.line = line;
	emu.body = &body;
	emu.nt = (int)nt;
	emu.dyn_bytes = shmem;
	gridDim = g;
	blockDim = b;
	for (unsigned z = 0; z < g.z; z++)
		for (unsigned y = 0; y < g.y; y++)
			for (unsigned x = 0; x < g.x; x++) {
				blockIdx = dim3(x, y, z);
				emu_run_block((int)(emu.blocks & 1));
				emu.blocks++;
			}
}

#endif
