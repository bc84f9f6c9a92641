/* test_devsel.c: the GPU a process takes before MPI_Init (engine/device.h),
 * on any machine: the launcher's local rank from its environment variable
 * (each launcher's, in the documented order of preference, malformed
 * values passed over), the device picked from it as cdp_device_open picks
 * (local rank mod GPUs; cuda:N fixed; none for cpu or without a GPU), and
 * cdp_device_preselect doing nothing where there is nothing to select. */
#include <stdio.h>
#include <stdlib.h>
#include "device.h"
#include "tap.h"

static const char *const vars[] = { "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK",
                                    "MPI_LOCALRANKID" };
#define NV ((int)(sizeof vars / sizeof vars[0]))

static void clear(void)
{
	for (int i = 0; i < NV; i++)
		unsetenv(vars[i]);
}

int main(void)
{
	clear();
	CHECK_RC(cdp_device_env_local_rank(), -1);
	/* each launcher's variable alone */
	for (int i = 0; i < NV; i++) {
		clear();
		setenv(vars[i], "3", 1);
		CHECK(cdp_device_env_local_rank() == 3, "%s=3 gives %d", vars[i],
		      cdp_device_env_local_rank());
	}
	/* the first set one wins; malformed or negative ones are passed over */
	clear();
	setenv("MPI_LOCALRANKID", "1", 1);
	setenv("LOCAL_RANK", "2", 1);
	CHECK_RC(cdp_device_env_local_rank(), 2);
	setenv("SLURM_LOCALID", "x7", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "-1", 1);
	CHECK_RC(cdp_device_env_local_rank(), 2);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	CHECK_RC(cdp_device_env_local_rank(), 0);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "", 1);
	CHECK_RC(cdp_device_env_local_rank(), 2);
	/* torchrun under srun: its children inherit the srun task's
	 * SLURM_LOCALID (and a mpirun's local rank), the same for all */
	clear();
	setenv("SLURM_LOCALID", "0", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	setenv("LOCAL_RANK", "3", 1);
	setenv("TORCHELASTIC_RUN_ID", "abc", 1);
	CHECK_RC(cdp_device_env_local_rank(), 3);
	unsetenv("LOCAL_RANK");
	CHECK_RC(cdp_device_env_local_rank(), 0);
	unsetenv("TORCHELASTIC_RUN_ID");

	/* the pick: what cdp_device_open binds */
	CHECK_RC(cdp_device_pick("cuda", 4, 5), 1);
	CHECK_RC(cdp_device_pick("cuda", 1, 3), 0);      /* ranks share one GPU */
	CHECK_RC(cdp_device_pick("auto", 2, 1), 1);
	CHECK_RC(cdp_device_pick("cuda", 2, -1), 0);     /* no local rank: GPU 0 */
	CHECK_RC(cdp_device_pick("cuda:1", 2, 0), 1);    /* fixed, whatever the rank */
	CHECK_RC(cdp_device_pick("cuda:2", 2, 0), -1);
	CHECK_RC(cdp_device_pick("cpu", 2, 0), -1);
	CHECK_RC(cdp_device_pick("auto", 0, 0), -1);
	CHECK_RC(cdp_device_pick("gpu", 2, 0), -1);

	/* nothing to select: cpu, no local rank, no GPU (a machine without one) */
	clear();
	CHECK_RC(cdp_device_preselect("cuda"), -1);
	setenv("LOCAL_RANK", "1", 1);
	CHECK_RC(cdp_device_preselect("cpu"), -1);
	CHECK_RC(cdp_device_preselect("nonsense"), -1);
	if (cdp_cuda_device_count() == 0)
		CHECK_RC(cdp_device_preselect("cuda"), -1);
	else
		CHECK(cdp_device_preselect("cuda") == 1 % cdp_cuda_device_count(),
		      "LOCAL_RANK=1 with %d GPUs", cdp_cuda_device_count());
	return tap_done();
}
