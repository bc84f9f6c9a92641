#!/bin/sh
# A [net] key no part of the engine reads is refused (cdp-model(5)): a
# user's aug_hue=1, as an override or in the file, and a misspelt
# key with the nearest known one; cdp-train exits 1 with one line and
# writes no checkpoint. A checkpoint written before [vars] (its cfg keeps
# its variables in [net], the old rule: tests/engine/ckpt_edit puts such
# a cfg in a checkpoint trained from small.cfg) still loads in
# cdp-predict, with one warning line, and maps the scene exactly as the
# checkpoint with the [vars] cfg does (same weights, same net); cdp-train
# --resume continues it, with the same warning.
. "$CDP_SRCDIR/tests/train/train_common.sh"
EDIT="$CDP_BUILDDIR/tests/engine/ckpt_edit"
grep -q '^\[vars\]$' "$SMALL" || fail "small.cfg has no [vars]"
train() { cdp-train --db "$T/pool" --keys "$T/train.keys" --steps 1 --threads 1 -q "$@"; }

# refused NAME PATTERN MODEL: cdp-train --model MODEL exits 1 with one line
# matching PATTERN and writes no checkpoint
refused() {
	expect_fail 1 "^cdp-train: $2" train --model "$3" --out "$T/run_$1"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$1: more than one line: $(cat "$T/err")"
	[ ! -e "$T/run_$1/checkpoint.cdpt" ] || fail "$1: a checkpoint was written"
	cat "$T/err"
}

echo "== cdp-train refuses unknown [net] keys"
refused ov ".*small.cfg: unknown \[net\] key 'aug_hue' (override) " \
	"$SMALL:aug_hue=1"
sed 's/^\[net\]$/[net]\naug_hue=1/' "$SMALL" >"$T/bright.cfg"
line=$(grep -n '^aug_hue=' "$T/bright.cfg" | cut -d: -f1)
refused file ".*bright.cfg:$line: unknown \[net\] key 'aug_hue' " "$T/bright.cfg"
sed 's/^loss=/lsos=/' "$SMALL" >"$T/typo.cfg"
grep -q '^lsos=' "$T/typo.cfg" || fail "small.cfg has no loss="
refused typo ".*typo.cfg:[0-9]*: unknown \[net\] key 'lsos' (did you mean 'loss'?)\$" \
	"$T/typo.cfg"
# the [vars] variables still take overrides
train --model "$SMALL:width=6" --out "$T/run6" || fail "override of a [vars] key refused"

echo "== cdp-predict: a checkpoint written under the old rule"
train --model "$SMALL" --out "$T/run" || fail "cdp-train small.cfg"
grep -v '^\[vars\]$' "$SMALL" >"$T/old.cfg"
"$EDIT" -c "$T/old.cfg" "$T/run/checkpoint.cdpt" "$T/old.cdpt" || fail "ckpt_edit"
cdp-predict -q "$T/run/checkpoint.cdpt" "$T/c3.tif" -o "$T/new.tif" 2>"$T/err_new" ||
	fail "cdp-predict on the [vars] checkpoint: $(cat "$T/err_new")"
[ ! -s "$T/err_new" ] || fail "the [vars] checkpoint warns: $(cat "$T/err_new")"
cdp-predict -q "$T/old.cdpt" "$T/c3.tif" -o "$T/old.tif" 2>"$T/err_old" ||
	fail "cdp-predict on the old checkpoint: $(cat "$T/err_old")"
cat "$T/err_old"
[ "$(wc -l <"$T/err_old")" -eq 1 ] || fail "old checkpoint: not one line: $(cat "$T/err_old")"
grep -q "^cdp-predict: warning: .*unknown \[net\] key 'width' .*old rule" "$T/err_old" ||
	fail "old checkpoint: no warning: $(cat "$T/err_old")"
"$PYTHON" - "$T/new.tif" "$T/old.tif" <<'PYEOF' || fail "the two maps differ"
import sys
from osgeo import gdal
a, b = (gdal.Open(p).ReadAsArray() for p in sys.argv[1:])
assert a.shape == b.shape and (a == b).all(), "maps differ"
PYEOF

echo "== cdp-train --resume from it"
cp "$T/old.cdpt" "$T/run/checkpoint.cdpt"
cdp-train --db "$T/pool" --keys "$T/train.keys" --steps 2 --threads 1 -q --resume \
	--out "$T/run" 2>"$T/err_res" || fail "--resume of the old checkpoint: $(cat "$T/err_res")"
cat "$T/err_res"
grep -q "^cdp-train: warning: .*unknown \[net\] key 'width' .*old rule" "$T/err_res" ||
	fail "--resume: no warning: $(cat "$T/err_res")"
grep -q '"step":2,' "$T/run/metrics.jsonl" || fail "--resume did not reach step 2"

# A [net] key the engine came to read after the old rule ended (ema) was a
# variable in such a cfg, read by nothing: it stays one on --resume and in
# cdp-predict (no moving average starts mid-run), and the warning says so.
echo "== the old rule keeps later keys (ema=) variables"
sed 's/^\[net\]$/[net]\nema=0.9/' "$T/old.cfg" >"$T/oldema.cfg"
grep -q '^ema=0.9$' "$T/oldema.cfg" || fail "no ema= in the old cfg"
mkdir "$T/re" "$T/reema"
"$EDIT" -c "$T/oldema.cfg" "$T/old.cdpt" "$T/reema/checkpoint.cdpt" || fail "ckpt_edit ema"
cp "$T/old.cdpt" "$T/re/checkpoint.cdpt"
for r in re reema; do
	cdp-train --db "$T/pool" --keys "$T/train.keys" --steps 3 --threads 1 -q --resume \
		--out "$T/$r" 2>"$T/err_$r" || fail "--resume of $r: $(cat "$T/err_$r")"
done
grep -q "^cdp-train: warning: .*old rule.*; \[net\] ema was a variable when the checkpoint was written and stays one" "$T/err_reema" ||
	fail "--resume: the warning does not name ema: $(cat "$T/err_reema")"
# the same run (its cfg text apart): the same weights, and no LIVE chunk
PYTHONPATH=$CDP_SRCDIR/python "$PYTHON" - "$T/re/checkpoint.cdpt" "$T/reema/checkpoint.cdpt" <<'PYEOF' ||
import sys, warnings
import numpy as np
import cdpool
warnings.simplefilter("ignore")
a, b = (cdpool.load_checkpoint(p) for p in sys.argv[1:])
assert a.step == b.step == 3, (a.step, b.step)
assert b.live is None, "the ema run keeps a moving average (LIVE)"
assert list(a.params) == list(b.params), "other tensors"
for k in a.params:
    assert np.array_equal(a.params[k], b.params[k]), "tensor %s differs" % k
PYEOF
	fail "ema=0.9 of an old-rule cfg changed the resumed run"
cdp-predict -q "$T/reema/checkpoint.cdpt" "$T/c3.tif" -o "$T/ema.tif" 2>"$T/err_pe" ||
	fail "cdp-predict on the ema checkpoint: $(cat "$T/err_pe")"
grep -q "^cdp-predict: warning: .*\[net\] ema was a variable" "$T/err_pe" ||
	fail "cdp-predict: the warning does not name ema: $(cat "$T/err_pe")"
