/* fuzz_ckpt.c: libFuzzer entry point; the target is fuzz_ckpt_body.h,
 * shared with its corpus replay. How to run it: doc/FUZZING.md. */
#include "fuzz_ckpt_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cdp_fuzz_ckpt_one(data, size);
	return 0;
}
