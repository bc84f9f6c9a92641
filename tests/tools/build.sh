#!/bin/sh
# What `make install` delivers and what every program promises on its
# command line: installed programs, man pages that render without warnings,
# share/cdpool; --help exits 0 and prints the man page's synopsis options,
# an unknown option is a usage error (exit 2).
. "$CDP_SRCDIR/tests/tools/common.sh"
make -s -C "$CDP_BUILDDIR" install DESTDIR="$T/dest" prefix=/usr/local >/dev/null
for p in cdp-tile cdp-lmdbpack cdp-keyshuffle cdp-train cdp-predict cdp-evaluate; do
	[ -x "$T/dest/usr/local/bin/$p" ] || fail "$p not installed"
	[ -f "$T/dest/usr/local/share/man/man1/$p.1" ] || fail "$p.1 not installed"
	"$p" --help >"$T/help" 2>&1 || fail "$p --help exited non-zero"
	# usage() mirrors the man page's SYNOPSIS: the same long options.
	# (Under OPTIONS, a line that cites mpirun's or srun's options, as
	# "mpirun \-\-bind\-to none", holds none of this program's.)
	sect() { awk -v s="$1" '$0 ~ "^\\.SH " s {o=1; next} /^\.SH/ {o=0}
		o && !(s == "OPTIONS" && /(^|[ "])(mpirun|srun) \\-/)' "$CDP_SRCDIR/man/$p.1" \
		| sed 's/\\-/-/g' | grep -o -- '--[a-z][a-z0-9-]*' | sort -u; }
	sect SYNOPSIS >"$T/synopsis"
	grep -o -- '--[a-z][a-z0-9-]*' "$T/help" | sort -u >"$T/helpopts"
	[ -s "$T/helpopts" ] || fail "$p --help lists no long options"
	d=$(comm -3 "$T/synopsis" "$T/helpopts" | tr -d '\t' | tr '\n' ' ')
	[ -z "$d" ] || fail "$p: long options in only one of usage() and the SYNOPSIS of $p.1: $d"
	# Every option documented under OPTIONS is one the program knows.
	sect OPTIONS >"$T/manopts"
	for o in $(cat "$T/manopts"); do
		set +e; timeout 20 "$p" "$o" </dev/null >/dev/null 2>"$T/opterr"; set -e
		! grep -q "unknown option" "$T/opterr" || fail "$p does not know $o, documented in $p.1"
	done
	expect_fail 2 "$p" "$p" --no-such-option
done
for m in cdp-record.5 cdp-pool.5 cdp-keys.5 cdp-model.5 cdp-labelmap.5; do
	[ -f "$T/dest/usr/local/share/man/man5/$m" ] || fail "$m not installed"
done
[ -f "$T/dest/usr/local/share/man/man7/cdpool.7" ] || fail "cdpool.7 not installed"
[ -f "$T/dest/usr/local/share/cdpool/examples/Makefile" ] || fail "examples not installed"
# README.md's set-up for its pipeline and recipes, as printed, in an empty
# folder, the default prefix's /usr/local the test's DESTDIR: every
# share/cdpool/ path that README.md names is there in the folder it made
sed -n '/^<!-- setup: recipes -->$/,/^```$/p' "$CDP_SRCDIR/README.md" | sed '1,2d;$d' >"$T/setup.sh"
[ "$(grep -c -F 'ln -s /usr/local/share share' "$T/setup.sh")" -eq 1 ] ||
	fail "README.md's set-up links no /usr/local/share as share once: $(cat "$T/setup.sh")"
sed -i "s|ln -s /usr/local/share share|ln -s $T/dest/usr/local/share share|" "$T/setup.sh"
echo 'pwd >"$0.pwd"' >>"$T/setup.sh"
mkdir "$T/setup"
(cd "$T/setup" && sh -eu "$T/setup.sh") || fail "README.md's set-up failed"
grep -o 'share/cdpool/[A-Za-z0-9_./-]*' "$CDP_SRCDIR/README.md" | sed 's/\.$//' | sort -u >"$T/named"
[ "$(wc -l <"$T/named")" -gt 5 ] || fail "README.md names no share/cdpool/ files: $(cat "$T/named")"
while read -r f; do
	[ -e "$(cat "$T/setup.sh.pwd")/$f" ] || fail "README.md names $f, not in its set-up's folder"
done <"$T/named"
# Under another prefix the man pages and the examples name where the shared
# files went (a distribution installs under /usr).
make -s -C "$CDP_BUILDDIR" install DESTDIR="$T/usr" prefix=/usr >/dev/null
[ -f "$T/usr/usr/share/cdpool/models/unet.cfg" ] || fail "prefix=/usr: no share/cdpool/models/unet.cfg"
for f in man/man1/cdp-train.1 man/man5/cdp-model.5 man/man7/cdpool.7 cdpool/examples/Makefile \
	cdpool/examples/README; do
	grep -q '/usr/share/cdpool/' "$T/usr/usr/share/$f" || fail "prefix=/usr: $f does not name /usr/share/cdpool"
	! grep -q '/usr/local/share/cdpool' "$T/usr/usr/share/$f" || fail "prefix=/usr: $f names /usr/local"
done
grep -q '/usr/local/share/cdpool/models' "$T/dest/usr/local/share/man/man1/cdp-train.1" ||
	fail "prefix=/usr/local: cdp-train.1 lost /usr/local/share/cdpool"
# the examples' README runs each generator as python3 and its installed
# path (no gen*.py is on PATH: a bare one exits 127)
f=$T/usr/usr/share/cdpool/examples/README
w=$(grep -n '\(^[[:space:]]*\|"\)gen[a-z]*\.py ' "$f" || true)
[ -z "$w" ] || fail "prefix=/usr: examples/README runs a generator as a command on no PATH: $w"
for g in $(grep -o 'python3 /[^ ]*' "$f" | sed 's/^python3 //' | sort -u); do
	[ -f "$T/usr$g" ] || fail "prefix=/usr: examples/README runs python3 $g, which is not installed"
done
# no installed page or example names a file by its path in the source
# tree, share/cdpool/...: the hook rewrites only /usr/local/share/cdpool
for f in "$T/usr/usr/share/man"/man[157]/* "$T/usr/usr/share/cdpool/examples/README" \
	"$T/usr/usr/share/cdpool/examples/Makefile"; do
	w=$(grep -n '\(^\|[^/]\)share/cdpool' "$f" || true)
	[ -z "$w" ] || fail "prefix=/usr: ${f#"$T/usr"} names the source tree's share/cdpool: $w"
done
for m in "$CDP_SRCDIR"/man/*.[157]; do
	w=$(groff -man -ww -z "$m" 2>&1)
	[ -z "$w" ] || fail "$(basename "$m"): groff warnings: $w"
	# an alternating-font macro (.BR, .IR, ...) joins its arguments with no
	# space: two plain words side by side outside quotes print as one
	# (".BR Synchronization ). 0 turns it off" printed "turnsitoff")
	w=$(awk '/^\.(BR|RB|IR|RI|BI|IB)[ \t]/ {
		s = $0; gsub(/"[^"]*"/, " 0 ", s); n = split(s, a, /[ \t]+/)
		for (i = 2; i < n; i++)
			if (a[i] ~ /^[A-Za-z][A-Za-z]+$/ && a[i + 1] ~ /^[A-Za-z][A-Za-z]+[.,;:]?$/) {
				print FNR ": " $0; break
			}
	}' "$m")
	[ -z "$w" ] || fail "$(basename "$m"): words that render run together: $w"
done
# cdpool(7)'s hostfile command, pasted as it renders, writes both hosts (the
# roff "\enode2" rendered "\node2", a newline and a host "ode2")
cmd=$(groff -man -Tascii -rLL=300n -P-cbou "$CDP_SRCDIR/man/cdpool.7" 2>/dev/null |
	sed -n "s/^ *\\$ \\(printf '[^']*'\\) >hosts\$/\\1/p")
[ -n "$cmd" ] || fail "cdpool.7: no hostfile printf command"
(cd "$T" && sh -c "$cmd" >"$T/hosts")
[ "$(cat "$T/hosts")" = "$(printf 'node1 slots=2\nnode2 slots=2')" ] ||
	fail "cdpool.7: the hostfile command writes: $(cat "$T/hosts")"
exit 0
