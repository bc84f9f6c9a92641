/* fuzz_meta.c: libFuzzer entry point; the target is fuzz_meta_body.h,
 * shared with its corpus replay. How to run it: doc/FUZZING.md. */
#include "fuzz_meta_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cdp_fuzz_meta_one(data, size);
	return 0;
}
