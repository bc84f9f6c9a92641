#!/bin/sh
# The command line all six programs share (lib/cdp_cli.h): -V and --version
# print "PROG (cdpool) VERSION" and exit 0; a number out of range, a
# non-number, an unknown option and a missing argument each give exactly one
# line on stderr, "PROG: ..." with the program's name (not the path it was
# run by), and exit 2, before any work is done; so does an option whose
# argument is another of the program's options.
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
cdp-evaluate --classes 1 an_integer_in_2..1024 a.tif b.tif
EOF2
# a number that parses but is out of a half-open range: still one line
one_line 2 "^cdp-train: --momentum: 'abc' is not a number in 0\.\.1, less than 1\$" \
	"$CDP_BUILDDIR/cdp-train" --momentum abc
one_line 2 "^cdp-train: --momentum: '1' is not a number in 0\.\.1, less than 1\$" \
	"$CDP_BUILDDIR/cdp-train" --momentum 1
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
exit 0
