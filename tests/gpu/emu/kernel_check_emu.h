/* kernel_check_emu.h: checks of the emulator itself (emu.h), part of
 * kernel_check.cpp. Each makes the emulator do what the kernels rely on
 * and compares with what a GPU does; the launches are written as mkemu.py
 * rewrites them. */

/* out[t] = the shuffles' results of thread t: delta 3 over the warp, delta
 * 3 in segments of 8 */
static void shfl_k(double *out)
{
	int t = emu_linear_tid();
	double v = 1.5 * t;

	out[2 * t] = __shfl_down_sync(0xffffffffu, v, 3);
	out[2 * t + 1] = __shfl_down_sync(0xffffffffu, v, 3, 8);
}

/* each thread writes s[t], then reads its neighbour's: with the barrier
 * always right; without it the neighbour has not written yet in one of the
 * two orders the emulator alternates between */
static void neighbour_k(int sync, float *out)
{
	static float s[64];
	int t = threadIdx.x;

	emu_shared_poison(s, sizeof s);
	s[t] = (float)t;
	if (sync)
		__syncthreads();
	out[blockIdx.x * 64 + t] = s[(t + 1) % 64];
}

/* out[global linear id] += 1 + global linear id, over a 3-d grid of 3-d blocks */
static void ids_k(int *out)
{
	int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	int nt = blockDim.x * blockDim.y * blockDim.z, g = b * nt + t;

	out[g] += 1 + g;
}

/* a __syncthreads that thread 0 skips while the others shuffle */
static void deadlock_k(void)
{
	if (threadIdx.x == 0)
		__syncthreads();
	else
		(void)__shfl_down_sync(0xffffffffu, 1, 1);
}

static int launch_ok(dim3 g, dim3 b, size_t shmem)
{
	int ran = 0;

	emu_launch("empty_k", __FILE__, __LINE__, g, b, shmem, [&]() { ran = 1; });
	return cudaGetLastError() == cudaSuccess && ran;
}

/* A failed launch aborts (cuda_kern_int.cuh's cdk_check_launch) after
 * flushing stdout: in a child whose stdout is a file (block-buffered, as
 * under run-device.sh), a line printed before a launch that the GPU would
 * refuse must be in the file once the next launcher's check has aborted. */
static void abort_flushes(void)
{
	char path[] = "/tmp/kernel_check.XXXXXX";
	int fd = mkstemp(path), st = 0;
	pid_t pid;

	if (fd < 0) {
		fprintf(stderr, "kernel_check: cannot make a temporary file: %s\n", strerror(errno));
		exit(99);
	}
	close(fd);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		float v = 0.0f;
		if (!freopen(path, "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(2);
		printf("printed before the failed launch\n");
		emu_launch("empty_k", __FILE__, __LINE__, dim3(1), dim3(1025), 0, [&]() {});
		cdk_fill(0, &v, 1.0f, 1);      /* its launch check sees the error */
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid) {
		fprintf(stderr, "kernel_check: cannot fork for the abort check: %s\n", strerror(errno));
		exit(99);
	}
	char line[64] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(line, sizeof line, f))
			line[0] = '\0';
		fclose(f);
	}
	unlink(path);
	report("a failed launch aborts", !(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT),
	       fmt("child status %#x, want SIGABRT", st));
	report("a failed launch flushes stdout before abort()",
	       strcmp(line, "printed before the failed launch\n") != 0,
	       fmt("the child's stdout file holds '%s'", line));
}

static void t_emu(void)
{
	/* shuffles: lanes past the warp or segment keep their value; lanes
	 * 36..39 of a 40-thread block read lanes that do not exist: NaN */
	for (int nt : { 64, 40 }) {
		std::vector<double> out(2 * nt, -1);
		double *o = out.data();
		emu_launch("shfl_k", __FILE__, __LINE__, dim3(1), dim3(nt), 0, [&]() { shfl_k(o); });
		long bad = 0;
		for (int t = 0; t < nt; t++) {
			int lane = t % 32, src = t + 3, in_block = src < nt;
			double w32 = lane + 3 < 32 ? (in_block ? 1.5 * src : NAN) : 1.5 * t;
			double w8 = lane % 8 + 3 < 8 ? (in_block ? 1.5 * src : NAN) : 1.5 * t;
			bad += !(out[2 * t] == w32 || (w32 != w32 && out[2 * t] != out[2 * t]));
			bad += !(out[2 * t + 1] == w8 || (w8 != w8 && out[2 * t + 1] != out[2 * t + 1]));
		}
		report(fmt("emu __shfl_down_sync, %d threads", nt), bad, fmt("%ld wrong lanes", bad));
	}
	/* barriers, and a missing one caught by poison and alternating order */
	for (int sync = 1; sync >= 0; sync--) {
		std::vector<float> out(128, -1);
		float *o = out.data();
		emu_launch("neighbour_k", __FILE__, __LINE__, dim3(2), dim3(64), 0,
		           [&]() { neighbour_k(sync, o); });
		long stale = 0;
		for (int i = 0; i < 128; i++)
			stale += out[i] != (float)((i % 64 + 1) % 64);
		if (sync)
			report("emu __syncthreads", stale, fmt("%ld stale reads", stale));
		else
			report("emu missing __syncthreads gives stale reads", stale == 0,
			       "every read was right without the barrier");
	}
	{
		std::vector<int> out(2 * 3 * 2 * 4 * 2 * 2, 0);
		int *o = out.data();
		emu_launch("ids_k", __FILE__, __LINE__, dim3(2, 3, 2), dim3(4, 2, 2), 0, [&]() { ids_k(o); });
		long bad = 0;
		for (size_t g = 0; g < out.size(); g++)
			bad += out[g] != (int)(1 + g);
		report("emu blockIdx, threadIdx, gridDim, blockDim (3-d)", bad,
		       fmt("%ld threads missing or repeated", bad));
	}
	/* launch limits of sm_80 / sm_90, and cudaGetLastError clearing */
	report("emu launch limits",
	       !launch_ok(dim3(1), dim3(1024), 48 * 1024) || launch_ok(dim3(1), dim3(1025), 0) ||
	       !launch_ok(dim3(1), dim3(1), 0) || launch_ok(dim3(1), dim3(1, 1, 65), 0) ||
	       launch_ok(dim3(1, 65536), dim3(1), 0) || launch_ok(dim3(0), dim3(1), 0) ||
	       launch_ok(dim3(1), dim3(32), 48 * 1024 + 1),
	       "a launch the GPU refuses ran, or one it accepts did not");
	/* a deadlock aborts with a message instead of hanging (in a child) */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(2);
		emu_launch("deadlock_k", __FILE__, __LINE__, dim3(1), dim3(64), 0, [&]() { deadlock_k(); });
		_exit(0);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid) {
		fprintf(stderr, "kernel_check: cannot fork for the deadlock check: %s\n", strerror(errno));
		exit(99);
	}
	report("emu deadlock detection", !(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT),
	       fmt("child status %#x, want SIGABRT", st));
	abort_flushes();
}
