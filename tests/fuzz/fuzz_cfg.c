/* fuzz_cfg.c: libFuzzer entry point; the target is fuzz_cfg_body.h,
 * shared with its corpus replay. How to run it: doc/FUZZING.md. */
#include "fuzz_cfg_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cdp_fuzz_cfg_one(data, size);
	return 0;
}
