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
