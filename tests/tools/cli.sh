#!/bin/sh
# The command line all six programs share (lib/cdp_cli.h): -V and --version
# print "PROG (cdpool) VERSION" and exit 0; a number out of range, a
# non-number, an unknown option and a missing argument each give exactly one
# line on stderr, "PROG: ..." with the program's name (not the path it was
# run by), and exit 2, before any work is done; so does an option whose
# argument is another of the program's options, an empty output name, and
# an operand missing or extra (that line, then the usage). --help and
# --version onto a full disk exit 1 with "PROG: write error: REASON".
. "$CDP_SRCDIR/tests/tools/common.sh"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$CDP_BUILDDIR/config.h")
[ -n "$version" ] || fail "no PACKAGE_VERSION in config.h"

# one_line CODE PATTERN CMD...: CMD exits CODE with exactly one stderr line,
# which matches PATTERN (an extended regular expression), and no stdout.
one_line() {
	code=$1 pat=$2; shift 2
	set +e; "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; set -e
	[ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code (stderr: $(cat "$T/err"))"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "'$*' printed $(wc -l <"$T/err") lines: $(cat "$T/err")"
	grep -Eq -- "$pat" "$T/err" || fail "'$*' stderr is not '$pat': $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "'$*' wrote to stdout: $(cat "$T/out")"
}

# program, a numeric option, a value out of its range, what it must be,
# and the operands the program needs
while read -r p opt big want args; do
	# run through a path, as ./cdp-train: messages still say cdp-train
	exe="$CDP_BUILDDIR/$p"
	want=$(echo "$want" | tr _ ' ' | sed 's/\./\\./g')
	for v in -V --version; do
		"$exe" "$v" >"$T/ver" 2>"$T/err" || fail "$p $v exited non-zero"
		[ ! -s "$T/err" ] || fail "$p $v wrote to stderr: $(cat "$T/err")"
		[ "$(head -n1 "$T/ver")" = "$p (cdpool) $version" ] ||
			fail "$p $v: first line '$(head -n1 "$T/ver")', want '$p (cdpool) $version'"
		# then one "Name: value" line per library
		[ "$(sed 1d "$T/ver" | grep -cv '^[A-Za-z][A-Za-z ]*: [^ ]')" -eq 0 ] ||
			fail "$p $v: a feature line is not 'Name: value': $(cat "$T/ver")"
		[ "$(wc -l <"$T/ver")" -ge 2 ] || fail "$p $v names no library"
	done
	# shellcheck disable=SC2086
	one_line 2 "^$p: $opt: '$big' is not $want\$" "$exe" "$opt" "$big" $args
	# shellcheck disable=SC2086
	one_line 2 "^$p: $opt: 'abc' is not $want\$" "$exe" "$opt" abc $args
	# shellcheck disable=SC2086
	one_line 2 "^$p: unknown option '--no-such-option' \\($p --help lists the options\\)\$" \
		"$exe" --no-such-option $args
	one_line 2 "^$p: option '$opt' needs an argument\$" "$exe" "$opt"
done <<EOF2
cdp-tile --size 65537 an_integer_in_1..65536 x.tif
cdp-lmdbpack --txn-records 0 an_integer_in_1..100000000 db
cdp-keyshuffle --seed 18446744073709551616 an_integer_in_0..18446744073709551615 db
cdp-train --batch 0 an_integer_in_1..2147483647 --db=d
cdp-predict --batch 4097 an_integer_in_1..4096 run x.tif -o y.tif
cdp-evaluate --ignore 65536 an_integer_in_0..65535 a.tif b.tif
EOF2
# --classes takes a count or names (what names are for depends on the
# reference, which is opened first): a count out of range is a usage error
one_line 2 "^cdp-evaluate: --classes: '1' is not an integer in 2\.\.1024\$" \
	"$CDP_BUILDDIR/cdp-evaluate" --classes 1 a.tif b.tif
# a number that parses but is out of a half-open range: still one line
one_line 2 "^cdp-train: --momentum: 'abc' is not a number in 0\.\.1, less than 1\$" \
	"$CDP_BUILDDIR/cdp-train" --momentum abc
one_line 2 "^cdp-train: --momentum: '1' is not a number in 0\.\.1, less than 1\$" \
	"$CDP_BUILDDIR/cdp-train" --momentum 1
# 0.99999999 is below 1 as a double, 1 as the float the momentum is kept in
one_line 2 "^cdp-train: --momentum: '0\.99999999' is not a number in 0\.\.1, less than 1\$" \
	"$CDP_BUILDDIR/cdp-train" --momentum 0.99999999
# the model cfg's ranges of lr= and weight_decay= (cdp-model(5)), bounds
# written as the man pages write them
one_line 2 "^cdp-train: --lr: '2e6' is not a number in 0\.\.1e6\$" \
	"$CDP_BUILDDIR/cdp-train" --lr 2e6
one_line 2 "^cdp-train: --weight-decay: '2e6' is not a number in 0\.\.1e6\$" \
	"$CDP_BUILDDIR/cdp-train" --weight-decay 2e6
one_line 2 "^cdp-tile: unknown option '-x' \\(cdp-tile --help lists the options\\)\$" \
	"$CDP_BUILDDIR/cdp-tile" -qx x.tif
# an option's file argument that is another option: refused, not written
# as a file named after it (getopt_long would take --pad-last as the file)
mkdir "$T/cwd"
(cd "$T/cwd" && one_line 2 "^cdp-train: option '--trace' needs an argument, and '--pad-last' is an option \\(write '\\./--pad-last' for a file of that name\\)\$" \
	"$CDP_BUILDDIR/cdp-train" --db=d --trace --pad-last)
[ -z "$(ls -A "$T/cwd")" ] || fail "cdp-train --trace --pad-last left $(ls -A "$T/cwd")"
one_line 2 "^cdp-predict: option '-o' needs an argument, and '-q' is an option" \
	"$CDP_BUILDDIR/cdp-predict" run x.tif -o -q

# --help and --version onto a full disk: a failure that says so, in all six
# (--help exited 0, --version 1 in silence)
if [ -w /dev/full ]; then
	for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
		for v in --help --version; do
			set +e; "$CDP_BUILDDIR/$p" "$v" >/dev/full 2>"$T/err"; rc=$?; set -e
			[ "$rc" -eq 1 ] || fail "$p $v >/dev/full exited $rc, want 1"
			[ "$(cat "$T/err")" = "$p: write error: No space left on device" ] ||
				fail "$p $v >/dev/full: stderr '$(cat "$T/err")'"
		done
	done
fi

# an empty output name: a usage error at parse time, naming the option
# (once uninitialised bytes, an empty message or a silent exit 1)
while read -r p opt args; do
	# shellcheck disable=SC2086
	one_line 2 "^$p: $opt: an empty file name\$" "$CDP_BUILDDIR/$p" $args "$opt" ''
done <<EOF2
cdp-tile --outdir x.tif
cdp-tile --stats x.tif
cdp-keyshuffle -o db
cdp-keyshuffle --val-out --val=0.3 db
cdp-train --log --db=d
cdp-train --trace --db=d
cdp-train --out --db=d
cdp-predict -o run x.tif
cdp-predict --preview run x.tif -o y.tif
cdp-predict --vector run x.tif -o y.tif
cdp-evaluate --png a.tif b.tif
EOF2

# what is wrong with the operands, then the usage (lmdbpack and tile
# printed the usage alone, predict "want MODEL and RASTER")
reason() {
	code=$1 pat=$2; shift 2
	set +e; "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?; set -e
	[ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code (stderr: $(cat "$T/err"))"
	head -n1 "$T/err" | grep -Eq -- "$pat" || fail "'$*' first line is not '$pat': $(cat "$T/err")"
	sed -n 2p "$T/err" | grep -q '^usage: ' || fail "'$*': no usage after the reason"
}
B=$CDP_BUILDDIR
reason 2 "^cdp-predict: extra operand 'extra'\$" "$B/cdp-predict" run x.tif extra -o y.tif
reason 2 "^cdp-predict: missing RASTER\$" "$B/cdp-predict" run -o y.tif
reason 2 "^cdp-predict: extra operand 'x.tif'\$" "$B/cdp-predict" --time a.tif,b.tif run x.tif -o y.tif
reason 2 "^cdp-lmdbpack: extra operand 'p2'\$" "$B/cdp-lmdbpack" p1 p2
reason 2 "^cdp-lmdbpack: missing DB\$" "$B/cdp-lmdbpack"
reason 2 "^cdp-tile: missing raster \(or --time date,date\)\$" "$B/cdp-tile"
reason 2 "^cdp-keyshuffle: extra operand 'p2'\$" "$B/cdp-keyshuffle" p1 p2
reason 2 "^cdp-train: extra operand 'x'\$" "$B/cdp-train" --db=d x
reason 2 "^cdp-evaluate: missing PREDICTION and REFERENCE\$" "$B/cdp-evaluate"

# one line each, at parse time: the real range of a size; an empty date;
# an empty --freeze list (",," was refused, "" froze nothing); the
# --threads limit both programs share (cdp-train cut 257 to 256 silently);
# --class-weights (a line, then the usage); --overlap against a --size
one_line 2 "^cdp-lmdbpack: --map-size: '9000000T' is not a size like 64K, 512M or 2G in 64K\.\.8388607T\$" \
	"$B/cdp-lmdbpack" --map-size 9000000T db
for t in a.tif, ,a.tif a.tif,,b.tif; do
	one_line 2 "^cdp-tile: --time: '$t' is not two or more rasters separated by commas\$" \
		"$B/cdp-tile" --time "$t"
	one_line 2 "^cdp-predict: --time: '$t' is not two or more rasters separated by commas\$" \
		"$B/cdp-predict" --time "$t" run -o y.tif
done
for f in '' ,, a,; do
	one_line 2 "^cdp-train: --freeze: '$f' is not a list of name patterns like conv0\*,enc1\.\*\$" \
		"$B/cdp-train" --freeze "$f" --db=d
done
for p in cdp-train cdp-predict; do
	one_line 2 "^$p: --threads: '257' is not an integer in 1\.\.256\$" "$B/$p" --threads 257
done
one_line 2 "^cdp-train: --class-weights: '1,,2' is not auto or numbers >= 0 separated by commas, one per class\$" \
	"$B/cdp-train" --class-weights 1,,2
one_line 2 "^cdp-predict: --overlap 32 must be smaller than --size 32\$" \
	"$B/cdp-predict" --size 32 --overlap 32 run x.tif -o y.tif
# cdp-train's options that exclude or need each other: one line each, as
# its other usage errors (they printed the 17-line usage after it); a
# missing --db, --keys, --out or --model is a missing operand's reason and
# usage (above)
R="$B/cdp-train --db=d --keys=k --out=o"
while IFS='|' read -r args pat; do
	# shellcheck disable=SC2086
	one_line 2 "^cdp-train: $pat" $R $args
done <<'EOF2'
--model=m --nesterov --momentum 0|--nesterov needs a momentum above 0 \(--momentum 0 given\)$
--model=m --optimizer adamw --momentum 0.5|--momentum applies to --optimizer sgd, not adamw$
--resume --overwrite|--resume and --overwrite exclude each other
--resume --init x|--resume and --init exclude each other
--model=m --patience 2|--patience needs --keep-best
--model=m --min-delta 0.1|--min-delta needs --patience$
--model=m --overlap on --no-overlap|--overlap and --no-overlap exclude each other
EOF2
set +e; "$B/cdp-train" --db=d --keys=k --model=m >/dev/null 2>"$T/err"; rc=$?; set -e
[ "$rc" -eq 2 ] && [ "$(head -1 "$T/err")" = "cdp-train: missing --out" ] &&
	sed -n 2p "$T/err" | grep -q '^usage: ' || fail "missing --out: exit $rc, $(cat "$T/err")"

# -0 is 0 for an unsigned option too, as for a signed one
"$B/cdp-keyshuffle" --seed -0 "$T/nonesuch" 2>"$T/err" && fail "keyshuffle of no pool passed"
grep -q "cannot open" "$T/err" || fail "--seed -0 refused: $(cat "$T/err")"

# an environment value is quoted on one line, its control characters as '?'
set +e; env "$(printf 'CDP_DIST_TIMEOUT=a\nb')" "$B/cdp-predict" -q run x.tif -o "$T/y.tif" \
	>/dev/null 2>"$T/err"; rc=$?; set -e
[ "$rc" -eq 1 ] && [ "$(cat "$T/err")" = "cdp-predict: CDP_DIST_TIMEOUT: 'a?b': want seconds, 0 (never) to 1e9" ] ||
	fail "a newline in CDP_DIST_TIMEOUT: exit $rc, '$(cat "$T/err")'"
exit 0
