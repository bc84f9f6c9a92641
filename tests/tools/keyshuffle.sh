#!/bin/sh
# cdp-keyshuffle on pools packed by cdp-tile | cdp-lmdbpack, checked from
# outside with Python lmdb and zlib:
#  - the list is exactly the pool's keys, in the order a Python model of the
#    documented shuffle (xoshiro256** + SplitMix64, Lemire, Fisher-Yates over
#    the byte-sorted keys) gives; the header's uuid, seed, count and crc32;
#  - same seed -> same bytes, other seed -> other order; over 240 seeds all
#    24 orders of a 4-key pool appear;
#  - --val, --val-by, --match, --no-shuffle; -o/--val-out atomic, and one
#    set: a SIGTERM at either rename (strace's injection) ends the run
#    after both, never leaving an old file beside a new one; two runs at
#    once do not interleave their renames (the -o file's folder locked);
#  - --val 0 writes no (empty) validation file and says so; --stratify
#    keeps a training key of every class (a one-key class's only key once
#    went to validation) and names the classes left without validation;
#  - failures: exit codes, one-line messages, no output file left behind.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
MK="$CDP_SRCDIR/tests/tools/mkraster.py"

# Three scenes of 20x20 tiles: alpha 4x5 = 20, beta 3x3 = 9, gam_2 2x2 = 4
# (33 keys; gam_2 has '_' in its name, which keys parse from the right).
"$PYTHON" "$MK" "$T/alpha.tif" --width 100 --height 80 --bands 2 --dtype u8 --seed 1
"$PYTHON" "$MK" "$T/beta.tif" --width 60 --height 60 --bands 2 --dtype u8 --seed 2
"$PYTHON" "$MK" "$T/gam_2.tif" --width 40 --height 40 --bands 2 --dtype u8 --seed 3
cdp-tile -q --size 20 "$T/alpha.tif" "$T/beta.tif" "$T/gam_2.tif" | cdp-lmdbpack -q "$T/pool"
P="$T/pool"

# pool.py DB KEYS UUID: the pool's keys in byte order, and its meta uuid.
cat >"$T/pool.py" <<'EOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=4)
with env.begin() as tx:
    tiles = env.open_db(b"tiles", txn=tx, create=False)
    meta = env.open_db(b"meta", txn=tx, create=False)
    keys = [k for k, _ in tx.cursor(db=tiles)]
    uuid = [l for l in tx.get(b"uuid", db=meta).decode().split("\n") if l.startswith("uuid=")]
open(sys.argv[2], "wb").write(b"".join(k + b"\n" for k in sorted(keys)))
open(sys.argv[3], "w").write(uuid[0][5:] + "\n")
EOF
# check.py FILE UUID SEED [EXPECTED-KEYS]: header syntax and fields, crc32
# over the key lines, count; with EXPECTED-KEYS the lines must equal it.
cat >"$T/check.py" <<'EOF'
import sys, re, zlib
d = open(sys.argv[1], "rb").read()
nl = d.index(b"\n")
m = re.fullmatch(rb"#cdpool-keys 1 uuid=([0-9a-f]{32}) seed=(\d+) count=(\d+) crc32=([0-9a-f]{8})", d[:nl])
if not m:
    sys.exit("%s: bad header %r" % (sys.argv[1], d[:nl]))
body = d[nl + 1:]
if m.group(1).decode() != sys.argv[2]:
    sys.exit("%s: uuid %s, pool has %s" % (sys.argv[1], m.group(1).decode(), sys.argv[2]))
if m.group(2).decode() != sys.argv[3]:
    sys.exit("%s: seed %s, want %s" % (sys.argv[1], m.group(2).decode(), sys.argv[3]))
if int(m.group(4), 16) != zlib.crc32(body):
    sys.exit("%s: crc32 %s, body has %08x" % (sys.argv[1], m.group(4).decode(), zlib.crc32(body)))
if body and not body.endswith(b"\n"):
    sys.exit("%s: no final newline" % sys.argv[1])
lines = body.split(b"\n")[:-1]
if int(m.group(3)) != len(lines):
    sys.exit("%s: count %s, %d lines" % (sys.argv[1], m.group(3).decode(), len(lines)))
if len(sys.argv) > 4 and open(sys.argv[4], "rb").read() != body:
    sys.exit("%s: keys differ from %s" % (sys.argv[1], sys.argv[4]))
EOF
# model.py SORTED-KEYS SEED: the documented shuffle, written from cdp_rng.h
# and cdp-keyshuffle(1) rather than from the C code.
cat >"$T/model.py" <<'EOF'
import sys
M = (1 << 64) - 1
def rotl(x, k): return ((x << k) | (x >> (64 - k))) & M
x = int(sys.argv[2]); s = []
for _ in range(4):
    x = (x + 0x9e3779b97f4a7c15) & M
    z = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
    s.append(z ^ (z >> 31))
def nxt():
    r = (rotl((s[1] * 5) & M, 7) * 9) & M
    t = (s[1] << 17) & M
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)
    return r
def below(n):
    m = nxt() * n
    if (m & M) < n:
        t = (1 << 64) % n
        while (m & M) < t:
            m = nxt() * n
    return m >> 64
keys = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
for i in range(len(keys) - 1, 0, -1):
    j = below(i + 1)
    keys[i], keys[j] = keys[j], keys[i]
sys.stdout.buffer.write(b"".join(k + b"\n" for k in keys))
EOF

"$PYTHON" "$T/pool.py" "$P" "$T/keys" "$T/uuid"
uuid=$(cat "$T/uuid")
[ "$(wc -l <"$T/keys")" -eq 33 ] || fail "pool has $(wc -l <"$T/keys") keys, want 33"
body() { tail -n +2 "$1"; }

# --- the default run: a permutation of exactly the pool's keys -------------
cdp-keyshuffle "$P" >"$T/s1" 2>"$T/err"
[ "$(cat "$T/err")" = "cdp-keyshuffle: seed 1, 33 keys (33 train, 0 validation)" ] \
	|| fail "summary line: $(cat "$T/err")"
"$PYTHON" "$T/check.py" "$T/s1" "$uuid" 1 || fail "default run header"
body "$T/s1" | LC_ALL=C sort >"$T/sorted"
cmp -s "$T/sorted" "$T/keys" || fail "default list is not a permutation of the pool's keys"
body "$T/s1" | cmp -s - "$T/keys" && fail "default list is in pool order"
"$PYTHON" "$T/model.py" "$T/keys" 1 >"$T/model1"
"$PYTHON" "$T/check.py" "$T/s1" "$uuid" 1 "$T/model1" || fail "seed 1 order differs from the model"

# Same seed: same bytes (also through -o); another seed: another order.
# -q silences stderr; --progress draws there even when it is not a terminal.
cdp-keyshuffle -q "$P" >"$T/s1b" 2>"$T/err"
cmp "$T/s1" "$T/s1b" || fail "same seed gave different output"
[ ! -s "$T/err" ] || fail "-q printed: $(cat "$T/err")"
cdp-keyshuffle --progress "$P" 2>"$T/err" | cmp -s - "$T/s1" || fail "--progress changed the list"
grep -q '^cdp-keyshuffle: reading keys 33/33 (100%)' "$T/err" || fail "--progress: $(cat "$T/err")"
# a scan that fails (--stratify on records without a class) ends the
# line without ", done": the error is the only line
expect_fail 1 "^cdp-keyshuffle: '$P': --stratify needs one class .*; key '[^']*' has no label\$" \
	cdp-keyshuffle --progress --stratify --val 0.2 --val-out "$T/sv0" "$P"
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a failed scan with --progress: $(cat "$T/err")"
mkdir "$T/o"
cdp-keyshuffle -q -o "$T/o/train.keys" --seed 1 "$P"
cmp "$T/s1" "$T/o/train.keys" || fail "-o differs from stdout"
[ "$(ls -A "$T/o")" = "train.keys" ] || fail "-o left files: $(ls -A "$T/o")"
cdp-keyshuffle -q -s 2 "$P" >"$T/s2"
cmp -s "$T/s1" "$T/s2" && fail "seeds 1 and 2 gave the same list"
"$PYTHON" "$T/model.py" "$T/keys" 2 >"$T/model2"
"$PYTHON" "$T/check.py" "$T/s2" "$uuid" 2 "$T/model2" || fail "seed 2"
cdp-keyshuffle -q --seed 18446744073709551615 "$P" >"$T/smax"
"$PYTHON" "$T/model.py" "$T/keys" 18446744073709551615 >"$T/modelmax"
"$PYTHON" "$T/check.py" "$T/smax" "$uuid" 18446744073709551615 "$T/modelmax" || fail "seed 2^64-1"

# --- --no-shuffle: pool order; seed 0 unless given -------------------------
cdp-keyshuffle -q --no-shuffle "$P" >"$T/ns"
"$PYTHON" "$T/check.py" "$T/ns" "$uuid" 0 "$T/keys" || fail "--no-shuffle"
cdp-keyshuffle -q --no-shuffle -s 9 "$P" >"$T/ns9"
"$PYTHON" "$T/check.py" "$T/ns9" "$uuid" 9 "$T/keys" || fail "--no-shuffle -s 9"

# --- --val: round(F*N) keys, the head of the permutation -------------------
cdp-keyshuffle -s 1 --val 0.25 --val-out "$T/o/val.keys" -o "$T/o/train.keys" "$P" 2>"$T/err"
[ "$(cat "$T/err")" = "cdp-keyshuffle: seed 1, 33 keys (25 train, 8 validation)" ] \
	|| fail "--val 0.25 summary: $(cat "$T/err")"
head -n 8 "$T/model1" >"$T/want_val"
tail -n +9 "$T/model1" >"$T/want_train"
"$PYTHON" "$T/check.py" "$T/o/val.keys" "$uuid" 1 "$T/want_val" || fail "--val 0.25 val list"
"$PYTHON" "$T/check.py" "$T/o/train.keys" "$uuid" 1 "$T/want_train" || fail "--val 0.25 train list"
{ body "$T/o/val.keys"; body "$T/o/train.keys"; } | LC_ALL=C sort -u >"$T/union"
cmp -s "$T/union" "$T/keys" || fail "--val: train and val are not disjoint with union = all"
[ "$(ls -A "$T/o" | tr '\n' ' ')" = "train.keys val.keys " ] || fail "--val left files: $(ls -A "$T/o")"
for fv in 0.5:17 0.1:3 0.96:32; do
	cdp-keyshuffle -q --val "${fv%:*}" --val-out "$T/v" "$P" >"$T/t"
	[ "$(body "$T/v" | wc -l)" -eq "${fv#*:}" ] || fail "--val ${fv%:*}: $(body "$T/v" | wc -l) keys, want ${fv#*:}"
	[ "$(body "$T/t" | wc -l)" -eq $((33 - ${fv#*:})) ] || fail "--val ${fv%:*}: train count"
	"$PYTHON" "$T/check.py" "$T/v" "$uuid" 1 || fail "--val ${fv%:*} val header"
done
# --val 0 (or a fraction that rounds to no key): no validation file, which
# cdp-train would refuse as empty, and one line saying so
rm -f "$T/v"
cdp-keyshuffle -q --val 0 --val-out "$T/v" "$P" >"$T/t" 2>"$T/err" || fail "--val 0 failed"
[ ! -e "$T/v" ] || fail "--val 0 wrote '$T/v'"
[ "$(cat "$T/err")" = "cdp-keyshuffle: --val 0 holds out no key of the 33 selected: no validation file, '$T/v' not written" ] ||
	fail "--val 0 said: $(cat "$T/err")"
[ "$(body "$T/t" | wc -l)" -eq 33 ] || fail "--val 0: train count"
echo old >"$T/v"
cdp-keyshuffle -q --val 0.01 --val-out "$T/v" "$P" >"$T/t" 2>"$T/err" || fail "--val 0.01 failed"
[ "$(cat "$T/v")" = old ] || fail "--val 0.01 replaced '$T/v'"
grep -q "'$T/v' not written, the file of that name left as it was\$" "$T/err" ||
	fail "--val 0.01 said: $(cat "$T/err")"

# --- --stratify: every class keeps a training key -------------------------
# 30 chips: classes 0..19 one each, class 20 ten; at --val 0.2 the largest
# remainders once gave 4 one-chip classes' only key to validation
"$PYTHON" "$CDP_SRCDIR/share/cdpool/examples/genscene.py" --scene-tiles "$T/sc" --count 30 \
	--size 8 --seed 4
awk '{ print $1, NR <= 20 ? NR - 1 : 20 }' "$T/sc/list.txt" >"$T/sc/one.txt"
cdp-lmdbpack -q --list "$T/sc/one.txt" "$T/spool"
cdp-keyshuffle -s 1 --val 0.2 --stratify --val-out "$T/sv" "$T/spool" >"$T/st" 2>"$T/err" ||
	fail "--stratify failed: $(cat "$T/err")"
for c in $(seq 0 19); do
	grep -q "^cdp-keyshuffle: class $c: 1 train, 0 validation\$" "$T/err" ||
		fail "one-chip class $c: $(grep "class $c:" "$T/err")"
done
grep -q "^cdp-keyshuffle: class 20: 8 train, 2 validation\$" "$T/err" || fail "class 20: $(cat "$T/err")"
grep -q "^cdp-keyshuffle: warning: 20 classes without a validation key: 20 of one key, which stay in training: 0, 1, 2, .*, 18, 19\$" "$T/err" ||
	fail "--stratify warning: $(cat "$T/err")"
[ "$(body "$T/st" | wc -l)" -eq 28 ] && [ "$(body "$T/sv" | wc -l)" -eq 2 ] ||
	fail "--stratify: $(body "$T/st" | wc -l) train, $(body "$T/sv" | wc -l) validation keys"

# --- --val rounds the fraction as written, exactly -------------------------
# 1500 chips k0000..k1499 (links to one), classes of 751, 372, 175, 123, 44,
# 22, 9, 3 and 1 keys. The double of 0.145 is 0.14499999999999999: x 100 it
# gave 14 keys where round(14.5) is 15; so 0.285, 0.575 of 100, 0.071
# (106.5) and 0.009 (13.5) of 1500.
"$PYTHON" - "$T/sc" "$T/r" <<'EOF'
import os, sys
src, d = os.path.abspath(sys.argv[1]), sys.argv[2]
os.makedirs(d)
one = os.path.join(src, sorted(f for f in os.listdir(src) if f.endswith(".tif"))[0])
sizes, i = [751, 372, 175, 123, 44, 22, 9, 3, 1], 0
with open(os.path.join(d, "list.txt"), "w") as f:
    for c, n in enumerate(sizes):
        for _ in range(n):
            os.symlink(one, os.path.join(d, "k%04d.tif" % i))
            f.write("k%04d.tif %d\n" % (i, c))
            i += 1
EOF
cdp-lmdbpack -q --list "$T/r/list.txt" "$T/rpool"
for fv in 'k00*:0.145:15' 'k00*:0.285:29' 'k00*:0.575:58' '*:0.071:107' '*:0.009:14' \
	'*:5e-2:75' '*:.0005:1' '*:0.1234567890123456789:185'; do
	m=${fv%%:*} f=${fv#*:} want=${fv##*:}
	f=${f%:*}
	cdp-keyshuffle -m "$m" --val "$f" --val-out "$T/v" "$T/rpool" >"$T/t" 2>"$T/err" ||
		fail "--val $f -m '$m': $(cat "$T/err")"
	[ "$(body "$T/v" | wc -l)" -eq "$want" ] ||
		fail "--val $f -m '$m': $(body "$T/v" | wc -l) validation keys, want $want"
done
# --stratify's remainders are exact too: at 0.15 class 3 (18.45) and class 7
# (0.45) tie, and the lower class takes the last key (the doubles' noise
# gave it to class 7)
cdp-keyshuffle -s 1 --val 0.15 --stratify --val-out "$T/v" "$T/rpool" >"$T/t" 2>"$T/err" ||
	fail "--stratify 0.15: $(cat "$T/err")"
grep -q '^cdp-keyshuffle: seed 1, 1500 keys (1275 train, 225 validation)$' "$T/err" &&
	grep -q '^cdp-keyshuffle: class 3: 104 train, 19 validation$' "$T/err" &&
	grep -q '^cdp-keyshuffle: class 7: 3 train, 0 validation$' "$T/err" ||
	fail "--stratify 0.15 tie: $(cat "$T/err")"
# the warning names each class's cause: a class of one key keeps it, a share
# under one key (class 4: 0.44 of a key) got no remainder key
cdp-keyshuffle -q -s 1 --val 0.01 --stratify --val-out "$T/v" "$T/rpool" >"$T/t" 2>"$T/err" ||
	fail "--stratify 0.01: $(cat "$T/err")"
[ "$(cat "$T/err")" = "cdp-keyshuffle: warning: 5 classes without a validation key: 1 of one key, which stays in training: 8; 4 whose share (--val x their keys) is under one key: 4, 5, 6, 7" ] ||
	fail "--stratify 0.01 warning: $(cat "$T/err")"
# a class at n - 1 hands its remainder key on: the total stays round(0.9 x
# 1500) = 1350 (class 7: 2.7 of 3 keys, capped at 2; class 8: none of 1)
cdp-keyshuffle -s 1 --val 0.9 --stratify --val-out "$T/v" "$T/rpool" >"$T/t" 2>"$T/err" ||
	fail "--stratify 0.9: $(cat "$T/err")"
grep -q '^cdp-keyshuffle: seed 1, 1500 keys (150 train, 1350 validation)$' "$T/err" &&
	grep -q '^cdp-keyshuffle: class 7: 1 train, 2 validation$' "$T/err" &&
	grep -q '^cdp-keyshuffle: class 8: 1 train, 0 validation$' "$T/err" ||
	fail "--stratify 0.9 total: $(cat "$T/err")"

# --- --val-by: exactly the scene's keys, in permutation order --------------
cdp-keyshuffle -s 1 --val-by beta --val-out "$T/vb" "$P" >"$T/tb" 2>"$T/err"
[ "$(cat "$T/err")" = "cdp-keyshuffle: seed 1, 33 keys (24 train, 9 validation)" ] \
	|| fail "--val-by beta summary: $(cat "$T/err")"
grep '^beta_[0-9]*_[0-9]*$' "$T/model1" >"$T/want_val"
grep -v '^beta_[0-9]*_[0-9]*$' "$T/model1" >"$T/want_train"
"$PYTHON" "$T/check.py" "$T/vb" "$uuid" 1 "$T/want_val" || fail "--val-by beta val list"
"$PYTHON" "$T/check.py" "$T/tb" "$uuid" 1 "$T/want_train" || fail "--val-by beta train list"
cdp-keyshuffle -q --val-by gam_2,beta --val-out "$T/vb2" "$P" >"$T/tb2"
cdp-keyshuffle -q --val-by beta --val-by gam_2 --val-out "$T/vb3" "$P" >"$T/tb3"
cmp "$T/vb2" "$T/vb3" && cmp "$T/tb2" "$T/tb3" || fail "--val-by a,b differs from --val-by a --val-by b"
grep -E '^(beta|gam_2)_[0-9]+_[0-9]+$' "$T/model1" >"$T/want_val"
"$PYTHON" "$T/check.py" "$T/vb2" "$uuid" 1 "$T/want_val" || fail "--val-by gam_2,beta"
expect_fail 1 "^cdp-keyshuffle: '$P': --val-by 'gam': no keys of that scene$" \
	cdp-keyshuffle --val-by gam --val-out "$T/o/v2" -o "$T/o/t2" "$P"
# a file name for a scene: the stem is the scene
expect_fail 1 "^cdp-keyshuffle: '$P': --val-by 'beta.tif': no keys of that scene; a scene is named without its file's extension: --val-by 'beta'$" \
	cdp-keyshuffle --val-by beta.tif --val-out "$T/o/v2" -o "$T/o/t2" "$P"
expect_fail 1 "no training keys left" \
	cdp-keyshuffle --val-by alpha,beta,gam_2 --val-out "$T/o/v2" -o "$T/o/t2" "$P"
expect_fail 2 "^cdp-keyshuffle: --val-by: 'a b' is not a scene name$" cdp-keyshuffle --val-by 'a b' --val-out "$T/uv" "$P"
expect_fail 2 "^cdp-keyshuffle: --val-by: '' is not a scene name$" cdp-keyshuffle --val-by 'beta,,gam_2' --val-out "$T/uv" "$P"

# --- --match: selection before the shuffle -------------------------------
cdp-keyshuffle -q -m 'alpha_*' "$P" >"$T/ma"
grep '^alpha_' "$T/keys" >"$T/sel"
"$PYTHON" "$T/model.py" "$T/sel" 1 >"$T/want"
"$PYTHON" "$T/check.py" "$T/ma" "$uuid" 1 "$T/want" || fail "--match 'alpha_*'"
cdp-keyshuffle -q --match 'gam*' -m '*_0_0' "$P" >"$T/mb"
grep -E '^gam|_0_0$' "$T/keys" >"$T/sel"
"$PYTHON" "$T/model.py" "$T/sel" 1 >"$T/want"
"$PYTHON" "$T/check.py" "$T/mb" "$uuid" 1 "$T/want" || fail "two --match patterns"
expect_fail 1 "^cdp-keyshuffle: '$P': no key matches --match$" cdp-keyshuffle -m 'zeta*' "$P"
expect_fail 1 "--val-by 'beta': no selected keys of that scene" \
	cdp-keyshuffle -m 'alpha_*' --val-by beta --val-out "$T/o/v2" -o "$T/o/t2" "$P"
[ "$(ls -A "$T/o" | tr '\n' ' ')" = "train.keys val.keys " ] || fail "failed runs left files: $(ls -A "$T/o")"

# --- shuffle bias: all 24 orders of 4 keys over 240 seeds ---------------------
"$PYTHON" "$MK" "$T/four.tif" --width 40 --height 40 --bands 1 --dtype u8 --seed 4
cdp-tile -q --size 20 "$T/four.tif" | cdp-lmdbpack -q "$T/pool4"
seed=0
while [ $seed -lt 240 ]; do
	cdp-keyshuffle -q -s $seed "$T/pool4" | tail -n +2 | tr '\n' ' '
	echo
	seed=$((seed + 1))
done >"$T/orders"
[ "$(sort -u "$T/orders" | wc -l)" -eq 24 ] || fail "$(sort -u "$T/orders" | wc -l) of 24 orders of 4 keys in 240 seeds"
# No order may dominate (expected 10 each; binomial p(> 26) ~ 1e-5).
[ "$(sort "$T/orders" | uniq -c | sort -rn | awk 'NR == 1 {print $1}')" -le 26 ] || fail "one order of 4 keys is far too common"

# --- atomic outputs and write failures --------------------------------------
cp "$T/o/train.keys" "$T/before"
expect_fail 1 "^cdp-keyshuffle: cannot open '$T/nope': No such file or directory$" \
	cdp-keyshuffle -o "$T/o/train.keys" --val 0.1 --val-out "$T/o/new.keys" "$T/nope"
cmp -s "$T/before" "$T/o/train.keys" || fail "a failed run changed the -o file"
[ ! -e "$T/o/new.keys" ] || fail "a failed run created the --val-out file"
expect_fail 1 "cannot create '$T/missing/v.keys': No such file or directory" \
	cdp-keyshuffle --val 0.1 --val-out "$T/missing/v.keys" -o "$T/o/fresh.keys" "$P"
[ ! -e "$T/o/fresh.keys" ] || fail "-o file created although --val-out failed"
[ "$(ls -A "$T/o" | tr '\n' ' ')" = "train.keys val.keys " ] || fail "temporary files left: $(ls -A "$T/o")"
if [ -w /dev/full ]; then
	expect_fail 1 "cannot write standard output: No space left on device" sh -c 'cdp-keyshuffle "$1" >/dev/full' sh "$P"
	expect_fail 1 "cannot write standard output" \
		sh -c 'cdp-keyshuffle --val 0.5 --val-out "$2" "$1" >/dev/full' sh "$P" "$T/o/v3"
	[ ! -e "$T/o/v3" ] || fail "--val-out file created although stdout failed"
fi
# a closed standard output (reopened read-only at start) is a write error
# naming it: it said "cannot write '-': Invalid argument" (fdopen's word)
expect_fail 1 "^cdp-keyshuffle: cannot write standard output: Bad file descriptor\$" \
	sh -c 'cdp-keyshuffle -q -o - "$1" >&-' sh "$P"
expect_fail 1 "^cdp-keyshuffle: cannot write standard output: Bad file descriptor\$" \
	sh -c 'cdp-keyshuffle -q --val 0.5 --val-out "$2" -o - "$1" >&-' sh "$P" "$T/o/v4"
[ ! -e "$T/o/v4" ] || fail "--val-out file created although stdout was closed"

# Two runs writing one pair at once leave one run's pair: each renames its
# two under a flock(2) of the -o file's folder (they renamed them apart,
# and train.keys of one beside val.keys of the other shared keys). Here
# flock(1) holds the folder; the run waits for it (a blocked flock on the
# folder's inode in /proc/locks) with neither file renamed, then ends.
if command -v flock >/dev/null && [ -r /proc/locks ]; then
	mkdir "$T/pair"
	ino=$(stat -c %i "$T/pair")
	flock "$T/pair" sh -c 'touch "$1.held"; until [ -e "$1.go" ]; do sleep 0.05; done' sh "$T/pair" &
	fl=$!
	i=0
	until [ -e "$T/pair.held" ]; do
		i=$((i + 1)); [ "$i" -lt 200 ] || fail "flock(1) did not lock the folder"; sleep 0.05
	done
	cdp-keyshuffle -q -s 2 --val 0.2 --val-out "$T/pair/val.keys" -o "$T/pair/train.keys" "$P" &
	ks=$!
	i=0
	until grep -q -- "-> FLOCK .*:$ino " /proc/locks; do
		i=$((i + 1))
		[ "$i" -lt 200 ] || { touch "$T/pair.go"; wait "$fl"; wait "$ks" || :; fail "the pair was renamed without the folder's lock: $(ls "$T/pair")"; }
		sleep 0.05
	done
	[ -z "$(ls "$T/pair")" ] || fail "a file of the pair was renamed while another process held the folder: $(ls "$T/pair")"
	touch "$T/pair.go"
	wait "$fl"
	wait "$ks" || fail "the run waiting for the folder failed"
	[ "$(head -1 "$T/pair/train.keys" | grep -o 'seed=[0-9]*')" = seed=2 ] &&
	[ "$(head -1 "$T/pair/val.keys" | grep -o 'seed=[0-9]*')" = seed=2 ] || fail "the pair after the wait"
else
	echo "SKIP (this case): no flock(1) or /proc/locks"
fi

# --- not a pool ------------------------------------------------------------------
mkdir "$T/empty"
expect_fail 1 "^cdp-keyshuffle: '$T/empty': not a cdpool pool: " cdp-keyshuffle "$T/empty"
expect_fail 1 "^cdp-keyshuffle: '$T/uuid': not a cdpool pool: " cdp-keyshuffle "$T/uuid"
mkdir "$T/junk"
echo 'not lmdb' >"$T/junk/data.mdb"
expect_fail 1 "^cdp-keyshuffle: '$T/junk': not a cdpool pool: " cdp-keyshuffle "$T/junk"
# An LMDB environment that is not a pool; a pool whose tiles db is empty.
"$PYTHON" - "$T/plain" "$T/nopool" <<'EOF'
import sys, lmdb, zlib
env = lmdb.open(sys.argv[1], max_dbs=4)
t = env.open_db(b"tiles"); m = env.open_db(b"meta")
with env.begin(write=True) as tx:
    tx.put(b"a_0_0", b"x", db=t)
env = lmdb.open(sys.argv[2], max_dbs=4)
t = env.open_db(b"tiles"); m = env.open_db(b"meta")
def meta(s):
    return s.encode() + b"crc32=%08x\n" % zlib.crc32(s.encode())
with env.begin(write=True) as tx:
    tx.put(b"format", meta("format=cdpool-pool\nversion=1\n"), db=m)
    tx.put(b"uuid", meta("uuid=" + "ab" * 16 + "\n"), db=m)
EOF
expect_fail 1 "^cdp-keyshuffle: '$T/plain': not a cdpool pool: " cdp-keyshuffle "$T/plain"
expect_fail 1 "^cdp-keyshuffle: '$T/nopool': pool has no tiles$" cdp-keyshuffle -o "$T/o/e.keys" "$T/nopool"
[ ! -e "$T/o/e.keys" ] || fail "-o file created for an empty pool"
# A count of 0, or none, beside records: refused as cdp-train and Python
# refuse it (an absent count counts 0; only a pool never filled has none).
for c in zero none twice; do
	rm -rf "$T/count_$c"
	cp -R "$P" "$T/count_$c"
	"$PYTHON" - "$T/count_$c" "$c" <<'EOF'
import sys, lmdb, zlib
env = lmdb.open(sys.argv[1], max_dbs=4)
m = env.open_db(b"meta")
with env.begin(write=True) as tx:
    n = tx.stat(env.open_db(b"tiles", txn=tx))["entries"]
    if sys.argv[2] == "none":
        tx.delete(b"count", db=m)
    else:
        s = ("tiles=0\n" if sys.argv[2] == "zero" else "tiles=%d\ntiles=%d\n" % (n, n)).encode()
        tx.put(b"count", s + b"crc32=%08x\n" % zlib.crc32(s), db=m)
EOF
done
cdp-keyshuffle "$P" >"$T/all.keys"
n=$(body "$T/all.keys" | wc -l)
expect_fail 1 "^cdp-keyshuffle: '$T/count_zero': count record says 0 tiles but the pool holds $n$" \
	cdp-keyshuffle "$T/count_zero"
expect_fail 1 "^cdp-keyshuffle: '$T/count_none': no count record but the pool holds $n tiles$" \
	cdp-keyshuffle "$T/count_none"
expect_fail 1 "^cdp-keyshuffle: '$T/count_twice': count record: repeated key 'tiles'$" \
	cdp-keyshuffle "$T/count_twice"
# Damaged shape or stats: refused in cdp-train's words (cdp_pool_info_load),
# with and without --oversample; stale stats too, as cdp-pool(5) promises
# of every reader. It made a pointer file (exit 0) that cdp-train refused.
for c in stats-crc stats-none stats-stale shape-dup shape-w0; do
	rm -rf "$T/m_$c"
	cp -R "$P" "$T/m_$c"
	"$PYTHON" - "$T/m_$c" "$c" <<'EOF'
import sys, lmdb, re, zlib
env = lmdb.open(sys.argv[1], max_dbs=4)
m = env.open_db(b"meta")
name, how = sys.argv[2].split("-")
with env.begin(write=True) as tx:
    v = bytes(tx.get(name.encode(), db=m))
    body, crc = v[:-15], v[-15:]
    if how == "none":
        tx.delete(name.encode(), db=m)
    elif how == "crc":
        tx.put(name.encode(), body.replace(b".sum=", b".sum=9", 1) + crc, db=m)
    else:
        if how == "stale":
            body = body.replace(b"\nband.1.", b"\nstale=1\nband.1.", 1)
        elif how == "dup":
            body += re.search(rb"width=[0-9]+\n", body).group(0)
        else:
            body = re.sub(rb"width=[0-9]+", b"width=0", body)
        tx.put(name.encode(), body + b"crc32=%08x\n" % zlib.crc32(body), db=m)
EOF
done
for o in "" "--oversample auto"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: '$T/m_stats-crc': stats record: checksum mismatch\$" \
		cdp-keyshuffle $o -o "$T/o/m.keys" "$T/m_stats-crc"
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: '$T/m_stats-none': no stats record but the pool holds $n tiles\$" \
		cdp-keyshuffle $o -o "$T/o/m.keys" "$T/m_stats-none"
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: '$T/m_stats-stale': stats record: stale (a cdp-lmdbpack --replace into the pool has not finished: it recomputes them when it ends, and an interrupted one when re-run with --replace)\$" \
		cdp-keyshuffle $o -o "$T/o/m.keys" "$T/m_stats-stale"
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: '$T/m_shape-dup': shape record: repeated key 'width'\$" \
		cdp-keyshuffle $o -o "$T/o/m.keys" "$T/m_shape-dup"
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: '$T/m_shape-w0': shape record: width=0 is not a number in 1\.\.65536\$" \
		cdp-keyshuffle $o -o "$T/o/m.keys" "$T/m_shape-w0"
	[ ! -e "$T/o/m.keys" ] || fail "a pointer file from a pool with damaged meta"
done

# --- usage errors ----------------------------------------------------------------
for v in 1 1.0 -0.1 abc 0.5x nan ''; do
	expect_fail 2 "^cdp-keyshuffle: --val: '$v' is not a number in 0\.\.1, less than 1$" \
		cdp-keyshuffle --val "$v" --val-out "$T/uv" "$P"
done
expect_fail 2 "--val and --val-by need --val-out" cdp-keyshuffle --val 0.1 "$P"
expect_fail 2 "--val-out needs --val or --val-by" cdp-keyshuffle --val-out "$T/uv" "$P"
expect_fail 2 "mutually exclusive" cdp-keyshuffle --val 0.1 --val-by beta --val-out "$T/uv" "$P"
# the same spelling is the same failure as ./ or a link (not a usage error)
expect_fail 1 "^cdp-keyshuffle: -o '$T/uv' and --val-out '$T/uv' are the same file\$" \
	cdp-keyshuffle --val 0.1 --val-out "$T/uv" -o "$T/uv" "$P"
[ ! -e "$T/uv" ] || fail "a refused clash wrote '$T/uv'"
# both lists on standard output (no -o is -o -): one stream, refused too
for o in "" "-o -"; do
	# shellcheck disable=SC2086
	expect_fail 1 "^cdp-keyshuffle: -o '-' and --val-out '-' are the same file, standard output\$" \
		cdp-keyshuffle $o --val 0.3 --val-out - "$P"
	[ ! -s "$T/out" ] || fail "refused --val-out - printed $(wc -l <"$T/out") lines"
done
expect_fail 2 "--seed: '-1' is not an integer" cdp-keyshuffle --seed -1 "$P"
expect_fail 2 "--seed: '18446744073709551616' is not an integer" cdp-keyshuffle -s 18446744073709551616 "$P"
expect_fail 2 "missing DB" cdp-keyshuffle
expect_fail 2 "^cdp-keyshuffle: extra operand '$P'\$" cdp-keyshuffle "$P" "$P"
expect_fail 2 "^cdp-keyshuffle: unknown option '--bogus'" cdp-keyshuffle --bogus "$P"
[ ! -e "$T/uv" ] || fail "a usage error created '$T/uv'"
cdp-keyshuffle -h | grep -q '^usage: cdp-keyshuffle \[-hqV\]' || fail "-h usage"

# usage() is the man page's SYNOPSIS with the roff removed.
syn=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/p' "$CDP_SRCDIR/man/cdp-keyshuffle.1" | sed '1d;$d' \
	| awk '$1 ~ /^\.(RB|IR|BR|IB|BI|RI)$/ { s = ""; for (i = 2; i <= NF; i++) s = s $i; print s; next }
	       $1 ~ /^\.[BI]$/ { $1 = ""; sub(/^ /, ""); print; next } { print }' \
	| tr '\n' ' ' | sed 's/\\-/-/g; s/  */ /g; s/ $//')
use=$(cdp-keyshuffle -h | sed 's/^usage: //' | tr '\n' ' ' | sed 's/  */ /g; s/ $//')
[ "$syn" = "$use" ] || fail "man SYNOPSIS '$syn' differs from usage '$use'"
echo "== a SIGTERM between the two renames"
# -o and --val-out are one split: a signal at the first rename is held to
# after the second, so both files are the new run's (it once could leave a
# new validation list beside an old training list that overlaps it)
R='rename,renameat,renameat2'
if command -v strace >/dev/null 2>&1 &&
	strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=1 true 2>/dev/null; then
	mkdir "$T/sig"
	cdp-keyshuffle -q --seed 5 --val 0.3 --val-out "$T/sig/want.val" -o "$T/sig/want.train" "$P"
	for n in 1 2; do
		cdp-keyshuffle -q --seed 6 --val 0.3 --val-out "$T/sig/v.keys" -o "$T/sig/t.keys" "$P"
		set +e
		strace -f -o /dev/null -e trace=$R -e inject=$R:signal=TERM:when=$n \
			cdp-keyshuffle -q --seed 5 --val 0.3 --val-out "$T/sig/v.keys" -o "$T/sig/t.keys" \
			"$P" 2>"$T/err"
		rc=$?
		set -e
		[ "$rc" -eq 143 ] || fail "a SIGTERM at rename $n: exit $rc, want 143: $(cat "$T/err")"
		cmp -s "$T/sig/v.keys" "$T/sig/want.val" && cmp -s "$T/sig/t.keys" "$T/sig/want.train" ||
			fail "a SIGTERM at rename $n left an old file beside a new one"
		[ -z "$(ls -A "$T/sig" | grep cdp-tmp)" ] || fail "a temporary after SIGTERM: $(ls -A "$T/sig")"
	done
	echo "a SIGTERM at either rename: both files new, exit 143"
else
	echo "SKIP (this case): no strace that can inject a signal at a rename"
fi
exit 0
