/* fuzz_record.c: libFuzzer entry point for records and record streams.
 *
 * The checks live in fuzz_record_body.h, shared with the corpus replay in
 * tests/unit/test_fuzz_regress.c. How to build and run: tests/fuzz/corpus/README.
 */
#include "fuzz_record_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cdp_fuzz_record_one(data, size);
	return 0;
}
