# tests/train/train_common.sh: sourced by train.sh and train_fail.sh. Builds
# a small road pool (two generated 256x256 scenes cut into 32 tiles of 64x64
# with road masks; 24 training and 8 validation keys), a tiny batchnorm-free
# segmentation cfg, and the mpirun command line ($MP, empty without MPI).
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
UNET="$CDP_SRCDIR/share/cdpool/models/unet.cfg:width=4,depth=2"
for s in 3 4; do
	"$PYTHON" "$GEN" "$T/c$s.tif" --size 256 --seed "$s" --mask "$T/c${s}_mask.tif"
done
cdp-tile -q --size 64 --label-suffix _mask "$T/c3.tif" "$T/c4.tif" | cdp-lmdbpack -q "$T/pool"
cdp-keyshuffle -q --seed 1 --val 0.25 --val-out "$T/val.keys" -o "$T/train.keys" "$T/pool"
# Batchnorm normalises with each rank's own batch statistics, so only a net
# without it computes the same function of the global batch at any j.
cat >"$T/plain.cfg" <<'CFG'
[net]
channels=3
in_h=64
in_w=64
width=4
classes=2
loss=ce
optimizer=sgd
lr=0.05
momentum=0.9
[conv]
filters=${width}
activation=relu
[conv]
filters=${width}
activation=relu
[conv]
filters=${classes}
size=1
CFG
export CDP_DIST_TIMEOUT=60
MP=
mpirun=${MPIRUN:-}
if [ -n "$mpirun" ] && command -v "$mpirun" >/dev/null 2>&1; then
	MP="$mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
fi
# losses FILE: "step loss" of every step line of a metrics.jsonl
losses() { sed -n 's/^{"type":"step","step":\([0-9]*\),.*"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
# lastval FILE: the headline metric of the last validation line
lastval() { sed -n 's/^{"type":"val",.*"metric":\([^,]*\),.*/\1/p' "$1" | tail -1; }
