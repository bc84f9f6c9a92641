# tests/train/metrics.sh: reading cdp-train's metrics.jsonl in the shell
# tests. Sourced by train_common.sh, tests/gpu/two_ranks.sh and
# tests/gpu/dryrun.sh (which runs outside make check, so this file uses
# nothing but sed, wc, paste and awk).

# losses FILE: "step loss" of every step line of a metrics.jsonl
losses() { sed -n 's/^{"type":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
# lastval FILE: the headline metric of the last validation line
lastval() { sed -n 's/^{"type":"val",.*"metric":\([^,]*\),.*/\1/p' "$1" | tail -1; }
# losses_close A B TOL: files of "step loss" lines (as losses writes them)
# hold the same steps, line by line, with losses within relative TOL;
# prints the steps that differ
losses_close() {
	lc_a=$(wc -l <"$1") lc_b=$(wc -l <"$2")
	[ "$lc_a" -eq "$lc_b" ] || { echo "$lc_a steps against $lc_b"; return 1; }
	paste "$1" "$2" | awk -v tol="$3" '{ d = $2 - $4; if (d < 0) d = -d; s = $2 < 0 ? -$2 : $2;
		if ($1 != $3 || d > tol * s) { print "step " $1 ": " $2 " vs " $4; bad = 1 } }
		END { exit bad }'
}
