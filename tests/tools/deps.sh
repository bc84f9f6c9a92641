#!/bin/sh
# scripts/deps.sh is quiet: one line a step, apt-get's output in a log file
# it names. Run against fake dpkg-query, apt-get and sudo on PATH (nothing
# is installed):
#  - every package installed: one line, no apt-get, no log;
#  - two packages missing, apt-get printing 400 lines: apt-get update, then
#    install of exactly those two; at most 3 lines, each naming the log,
#    which holds apt-get's 400 lines; nothing on stderr;
#  - apt-get install failing: exit 1, stderr names the log and shows its
#    last lines (apt-get's error), in at most 20 lines;
#  - without CDP_DEPS_LOG the log is a new file in $TMPDIR;
# and scripts/demo.sh, which starts by removing its output folder, refuses
# an existing folder that no earlier demo made (before running deps.sh).
. "$CDP_SRCDIR/tests/tools/common.sh"
DEPS="$CDP_SRCDIR/scripts/deps.sh"
mkdir "$T/bin"
cat >"$T/bin/dpkg-query" <<'EOF'
#!/bin/sh
# the last argument is the package; those in $FAKE_MISSING are not installed
for p; do :; done
case " $FAKE_MISSING " in
*" $p "*) echo "dpkg-query: no packages found matching $p" >&2; exit 1 ;;
esac
printf 'install ok installed'
EOF
cat >"$T/bin/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >>"$FAKE_CALLS"
i=0
while [ $i -lt 200 ]; do i=$((i + 1)); echo "Get:$i http://deb.example/ bookworm/main pkg$i"; echo "Unpacking pkg$i ..."; done
case " $* " in
*" install "*) if [ -n "${FAKE_FAIL:-}" ]; then echo "E: Unable to locate package $FAKE_FAIL" >&2; exit 100; fi ;;
esac
exit 0
EOF
printf '#!/bin/sh\nexec "$@"\n' >"$T/bin/sudo"
chmod +x "$T/bin/dpkg-query" "$T/bin/apt-get" "$T/bin/sudo"
export PATH="$T/bin:$PATH" FAKE_CALLS="$T/calls" FAKE_MISSING= CDP_DEPS_LOG="$T/deps.log"

echo "== everything installed"
sh "$DEPS" >"$T/out" 2>"$T/err" || fail "deps.sh exited $? with everything installed: $(cat "$T/err")"
cat "$T/out"
[ "$(wc -l <"$T/out")" -eq 1 ] && [ ! -s "$T/err" ] || fail "want one line: $(cat "$T/out" "$T/err")"
[ ! -e "$T/calls" ] || fail "apt-get ran: $(cat "$T/calls")"
[ ! -e "$T/deps.log" ] || fail "a log was made with nothing to install"

echo "== two packages missing"
FAKE_MISSING="munge slurmd" sh "$DEPS" >"$T/out" 2>"$T/err" || fail "deps.sh exited $?: $(cat "$T/err")"
cat "$T/out"
[ "$(wc -l <"$T/out")" -le 3 ] || fail "$(wc -l <"$T/out") lines: $(head -5 "$T/out")"
[ ! -s "$T/err" ] || fail "stderr: $(head -5 "$T/err")"
[ "$(grep -c "(log: $T/deps.log)" "$T/out")" -ge 2 ] || fail "the steps do not name the log"
grep -q '^apt-get .*update$' "$T/calls" && [ "$(sed -n 1p "$T/calls" | grep -c update)" -eq 1 ] ||
	fail "no apt-get update first: $(cat "$T/calls")"
grep -q '^apt-get .*install -y --no-install-recommends slurmd munge$' "$T/calls" ||
	fail "not an install of the two: $(cat "$T/calls")"
[ "$(grep -c '^Unpacking' "$T/deps.log")" -eq 400 ] || fail "the log lacks apt-get's output"

echo "== apt-get install fails"
rm -f "$T/calls" "$T/deps.log"
rc=0
FAKE_MISSING=munge FAKE_FAIL=munge sh "$DEPS" >"$T/out" 2>"$T/err" || rc=$?
cat "$T/err"
[ "$rc" -eq 1 ] || fail "deps.sh exited $rc, want 1"
grep -q "$T/deps.log" "$T/err" || fail "stderr does not name the log"
grep -q '^E: Unable to locate package munge$' "$T/err" || fail "stderr does not show apt-get's error"
[ "$(cat "$T/out" "$T/err" | wc -l)" -le 20 ] || fail "$(cat "$T/out" "$T/err" | wc -l) lines"

echo "== a log of its own"
unset CDP_DEPS_LOG
mkdir "$T/tmp"
FAKE_MISSING=munge TMPDIR="$T/tmp" sh "$DEPS" >"$T/out" 2>"$T/err" || fail "deps.sh exited $?"
log=$(sed -n '1s/.*(log: \(.*\))$/\1/p' "$T/out")
case $log in "$T/tmp/"?*) ;; *) fail "log '$log' is not a new file in \$TMPDIR" ;; esac
[ "$(grep -c '^Unpacking' "$log")" -eq 400 ] || fail "'$log' lacks apt-get's output"
echo "log: $log"

echo "== demo.sh refuses a folder it did not make"
rm -f "$T/calls"
mkdir "$T/data"
echo keep >"$T/data/scene.tif"
rc=0
CDP_DEMO_OUT="$T/data" sh "$CDP_SRCDIR/scripts/demo.sh" >"$T/out" 2>"$T/err" || rc=$?
cat "$T/err"
[ "$rc" -eq 1 ] || fail "demo.sh exited $rc on a folder it did not make, want 1"
[ "$(cat "$T/data/scene.tif")" = keep ] || fail "demo.sh removed '$T/data'"
grep -q "'$T/data' exists and is not an earlier demo's output" "$T/err" || fail "no refusal naming the folder"
[ ! -e "$T/calls" ] || fail "demo.sh ran apt-get before refusing: $(cat "$T/calls")"
exit 0
