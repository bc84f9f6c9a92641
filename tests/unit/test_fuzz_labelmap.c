/* test_fuzz_labelmap.c: replays tests/fuzz/labelmap/ through the fuzz target
 * of tests/fuzz/fuzz_labelmap_body.h (the checks the fuzzer runs; it aborts
 * on a broken invariant): ok-* inputs must be accepted, bad-* and crash-*
 * refused. See tests/fuzz/fuzz_replay.h and doc/FUZZING.md.
 */
#include "../fuzz/fuzz_labelmap_body.h"
#include "../fuzz/fuzz_replay.h"

int main(void)
{
	return cdp_fuzz_replay_main("labelmap", cdp_fuzz_labelmap_one);
}
