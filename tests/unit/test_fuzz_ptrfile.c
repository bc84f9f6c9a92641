/* test_fuzz_ptrfile.c: replays tests/fuzz/ptrfile/ through the fuzz target of
 * tests/fuzz/fuzz_ptrfile_body.h (the checks the fuzzer runs; it aborts on a
 * broken invariant): ok-* inputs must be accepted, bad-* and crash-* (an
 * input that once crashed the decoder) refused. See tests/fuzz/fuzz_replay.h
 * and doc/FUZZING.md.
 */
#include "../fuzz/fuzz_ptrfile_body.h"
#include "../fuzz/fuzz_replay.h"

int main(void)
{
	return cdp_fuzz_replay_main("ptrfile", cdp_fuzz_ptrfile_one);
}
