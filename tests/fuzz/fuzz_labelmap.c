/* fuzz_labelmap.c: libFuzzer entry point; the target is fuzz_labelmap_body.h,
 * shared with its corpus replay. How to run it: doc/FUZZING.md. */
#include "fuzz_labelmap_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cdp_fuzz_labelmap_one(data, size);
	return 0;
}
