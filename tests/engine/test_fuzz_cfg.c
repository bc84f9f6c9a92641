/* test_fuzz_cfg.c: replays tests/fuzz/cfg/ through the fuzz target of
 * tests/fuzz/fuzz_cfg_body.h (the checks the fuzzer runs; it aborts on a
 * broken invariant): ok-* inputs must be accepted, bad-* and crash-* (an
 * input that once crashed the decoder) refused. See tests/fuzz/fuzz_replay.h
 * and doc/FUZZING.md.
 */
#include "../fuzz/fuzz_cfg_body.h"
#include "../fuzz/fuzz_replay.h"

int main(void)
{
	return cdp_fuzz_replay_main("cfg", cdp_fuzz_cfg_one);
}
