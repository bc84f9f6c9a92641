#!/bin/sh
# A model cfg nested deeper than the language allows (64 levels, cdp-model(5))
# is one error line, never a stack overflow: 60,000 '(', 1,000,000 unary
# minuses or 300,000 '2**' in a ${} expression, given to cdp-train as a
# file and to cdp-predict inside a checkpoint whose CFG chunk has a valid
# CRC (tests/engine/ckpt_edit writes it through the checkpoint API). Both
# exit 1 with one line naming the cfg, its line and the limit, and
# cdp-predict writes nothing.
. "$CDP_SRCDIR/tests/train/train_common.sh"
EDIT="$CDP_BUILDDIR/tests/engine/ckpt_edit"
line=$(grep -n '^outputs=' "$SMALL" | cut -d: -f1)
[ -n "$line" ] || fail "small.cfg has no outputs= line"

# deep NAME OPEN N MIDDLE CLOSE: small.cfg with outputs=${OPEN^N MIDDLE CLOSE^N}
deep() {
	"$PYTHON" - "$SMALL" "$T/$1.cfg" "$2" "$3" "$4" "$5" <<'PYEOF'
import sys
src, dst, op, n, mid, cl = sys.argv[1:]
n = int(n)
text = open(src).read().replace("outputs=${classes}",
                                "outputs=${" + op * n + mid + cl * n + "}")
open(dst, "w").write(text)
PYEOF
}
deep parens "(" 60000 classes ")"
deep minus "-" 1000000 classes ""
deep power "1**" 300000 classes ""
deep ok "(" 64 classes ")"

echo "== cdp-train"
for f in parens minus power; do
	expect_fail 1 "^cdp-train: .*$f.cfg:$line: expression '.*': nested deeper than 64\$" \
		cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$T/$f.cfg" \
		--out "$T/run_$f" --steps 1 --threads 1 -q
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$f: more than one line: $(cat "$T/err")"
	[ ! -e "$T/run_$f/checkpoint.cdpt" ] || fail "$f: a checkpoint was written"
	echo "$f: $(cut -c1-60 "$T/err")...$(tail -c 30 "$T/err")"
done
# 64 levels are the language's own
cdp-train --db "$T/pool" --keys "$T/train.keys" --model "$T/ok.cfg" --out "$T/run" \
	--steps 1 --threads 1 -q || fail "a cfg nested 64 deep was refused"

echo "== cdp-predict: the cfg inside a checkpoint"
cdp-predict -q "$T/run/checkpoint.cdpt" "$T/c3.tif" -o "$T/good.tif" ||
	fail "cdp-predict on the unedited checkpoint"
for f in parens minus power; do
	"$EDIT" -c "$T/$f.cfg" "$T/run/checkpoint.cdpt" "$T/$f.cdpt" || fail "ckpt_edit $f"
	# cdp-predict adds the window it built the net for
	expect_fail 1 "^cdp-predict: '*$T/$f.cdpt'*:$line: expression '.*': nested deeper than 64" \
		cdp-predict -q "$T/$f.cdpt" "$T/c3.tif" -o "$T/pred_$f.tif"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$f: more than one line: $(cat "$T/err")"
	[ ! -e "$T/pred_$f.tif" ] || fail "$f: cdp-predict wrote an output"
	echo "$f: $(cut -c1-60 "$T/err")...$(tail -c 30 "$T/err")"
done
