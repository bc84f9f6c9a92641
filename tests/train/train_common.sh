# tests/train/train_common.sh: sourced by the cdp-train drivers
# (tests/train/*.sh). Builds a small road pool (two generated 256x256
# scenes cut into 32 tiles of 64x64 with road masks; 24 training and 8
# validation keys), names the models ($UNET; $SMALL, the batchnorm-free
# small.cfg) and the mpirun command line ($MP, empty without MPI);
# metrics.sh reads the runs' metrics.jsonl.
. "$CDP_SRCDIR/tests/tools/common.sh"
. "$CDP_SRCDIR/tests/train/metrics.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
UNET="$CDP_SRCDIR/share/cdpool/models/unet.cfg:width=4,depth=2"
SMALL="$CDP_SRCDIR/tests/train/small.cfg"
for s in 3 4; do
	"$PYTHON" "$GEN" "$T/c$s.tif" --size 256 --seed "$s" --mask "$T/c${s}_mask.tif"
done
cdp-tile -q --size 64 --label-suffix _mask "$T/c3.tif" "$T/c4.tif" | cdp-lmdbpack -q "$T/pool"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$T/val.keys" -o "$T/train.keys" "$T/pool"
export CDP_DIST_TIMEOUT=60
MP=
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	MP="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
fi
# wait_step PID FILE N SECONDS: wait until the run PID has logged step N in
# FILE (its metrics.jsonl); after SECONDS without it, kill -9 PID and fail
wait_step() {
	ws_i=0
	while ! grep -q "\"step\":$3," "$2" 2>/dev/null; do
		ws_i=$((ws_i + 1))
		[ "$ws_i" -lt $(($4 * 10)) ] || { kill -9 "$1"; fail "no step $3 logged after $4 s"; }
		sleep 0.1
	done
}

# val_invariant MODEL WHAT: the validation loss of MODEL (WHAT names its
# loss) does not depend on the batch or the ranks: the same model (--lr 0)
# at batch 8, 3 and 2 ranks x 3 (8 keys: batches of 8; 3, 3, 2; 3 + 1 and
# 3), equal to 1e-9; uses $C, $MP and $T/val.keys of the caller
val_invariant() {
	vi_l="$C --model $1 --val-keys $T/val.keys --steps 1 --lr 0"
	cdp-train $vi_l --batch 8 --out "$T/v8" || fail "validation at batch 8"
	cdp-train $vi_l --batch 3 --out "$T/v3" || fail "validation at batch 3"
	$MP cdp-train $vi_l --batch 3 --out "$T/v2x3" || fail "validation at 2 ranks"
	for vi_r in v3 v2x3; do
		awk -v a="$(val_loss_of "$T/v8/metrics.jsonl")" -v b="$(val_loss_of "$T/$vi_r/metrics.jsonl")" \
			'BEGIN { d = a - b; exit !(a > 0 && (d < 0 ? -d : d) <= 1e-9 * a) }' ||
			fail "$vi_r: validation loss $(val_loss_of "$T/$vi_r/metrics.jsonl"), at batch 8 $(val_loss_of "$T/v8/metrics.jsonl")"
	done
	echo "validation loss ($2) $(val_loss_of "$T/v8/metrics.jsonl") at batch 8, 3 and 2 ranks x 3"
	rm -rf "$T/v8" "$T/v3" "$T/v2x3"
}
# resumed_same OPTIONS WITH WITHOUT WHAT: cdp-train OPTIONS (with
# --checkpoint-every 2) on model WITH to step 10, and cut at step 4 and
# resumed to 10, and on model WITHOUT (WHAT names what WITH adds) to 10:
# the resumed run's 10 losses are the uninterrupted run's bit for bit, and
# not WITHOUT's
resumed_same() {
	cdp-train $1 --model "$2" --steps 10 --out "$T/rs_a" || fail "run with $4"
	cdp-train $1 --model "$3" --steps 10 --out "$T/rs_p" || fail "run without $4"
	cdp-train $1 --model "$2" --steps 4 --out "$T/rs_b" || fail "$4: run to step 4"
	cdp-train $1 --model "$2" --steps 10 --out "$T/rs_b" --resume || fail "$4: resume to 10"
	for rs_r in a b p; do losses "$T/rs_$rs_r/metrics.jsonl" >"$T/rs_$rs_r.l"; done
	[ "$(wc -l <"$T/rs_a.l")" -eq 10 ] || fail "$(wc -l <"$T/rs_a.l") step lines, want 10"
	cmp -s "$T/rs_a.l" "$T/rs_b.l" ||
		fail "$4: resumed losses differ: $(diff "$T/rs_a.l" "$T/rs_b.l" | head -4)"
	cmp -s "$T/rs_a.l" "$T/rs_p.l" && fail "$4 changed no loss"
	echo "10 losses bit for bit after resuming at step 4, and not those without $4"
}
val_loss_of() { sed -n 's/^{"type":"val",.*"loss":\([^,]*\),.*/\1/p' "$1"; }
