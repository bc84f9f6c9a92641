/* test_fuzz_rdv.c: replays tests/fuzz/rdv/ through the fuzz target of
 * tests/fuzz/fuzz_rdv_body.h (the checks the fuzzer runs; it aborts on a
 * broken invariant): ok-* inputs must be accepted, bad-* and crash-* (an
 * input that once crashed the decoder) refused. See tests/fuzz/fuzz_replay.h
 * and doc/FUZZING.md.
 */
#include "../fuzz/fuzz_rdv_body.h"
#include "../fuzz/fuzz_replay.h"

int main(void)
{
	return cdp_fuzz_replay_main("rdv", cdp_fuzz_rdv_one);
}
