#!/bin/sh
# scripts/demo.sh: README command 1. From a fresh clone: installs the Debian
# packages, builds, then runs cdpool's main job on generated data:
#   1. generates two training scenes and one held-out scene (GeoTIFF + road mask)
#   2. tiles them and packs the tiles into one LMDB pool (cdp-tile | cdp-lmdbpack)
#   3. shuffles the keys into a pointer file, holding out the third scene
#      for validation (cdp-keyshuffle --val-by)
#   4. trains the road U-Net on 2 processes (mpirun -np 2 cdp-train; one
#      process without MPI), validating on the held-out scene
#   5. predicts the whole held-out scene (cdp-predict): a GeoTIFF of road
#      ids, the roads as polygons (GeoPackage) and a PNG preview
#   6. scores the prediction against the held-out mask (cdp-evaluate)
# Outputs go to demo-out/ (or $CDP_DEMO_OUT). Re-running starts afresh: the
# folder is removed first, but only one that an earlier demo made (it holds
# .cdpool-demo, or logs/deps.log from before that mark); any other existing
# non-empty folder is refused, so a mistyped CDP_DEMO_OUT destroys nothing.
# The set-up prints one line a step; its output goes to $out/logs/ (the
# last lines of a failed step's log are shown).
set -eu
start=$(date +%s)
cd "$(dirname "$0")/.."
out=${CDP_DEMO_OUT:-demo-out}
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ] &&
	[ ! -f "$out/.cdpool-demo" ] && [ ! -f "$out/logs/deps.log" ]; then
	echo "demo.sh: '$out' exists and is not an earlier demo's output: set CDP_DEMO_OUT to a new folder" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p "$out/scenes" "$out/logs"
: >"$out/.cdpool-demo"

echo "== 0. setting up: packages and build (logs in $out/logs)"
CDP_DEPS_LOG="$out/logs/deps.log" sh scripts/deps.sh
# quietly NAME CMD...: runs CMD with its output in $out/logs/NAME.log
quietly() {
	ql=$out/logs/$1.log
	shift
	echo "demo.sh: $* (log: $ql)"
	"$@" >"$ql" 2>&1 </dev/null || {
		echo "demo.sh: $* failed (exit status $?); the last lines of '$ql':" >&2
		tail -n 15 "$ql" >&2
		exit 1
	}
}
if [ ! -x ./configure ]; then quietly bootstrap ./bootstrap; fi
if [ ! -f Makefile ]; then quietly configure ./configure -q; fi
quietly make make -j2
PY=/usr/bin/python3
size=${CDP_DEMO_SIZE:-2048}

echo "== 1. generating scenes (${size}x${size}, 3-band uint8, 0.5 m, UTM 33N)"
for s in 1 2 3; do
	"$PY" share/cdpool/examples/genscene.py "$out/scenes/scene$s.tif" --size "$size" --seed "$s" \
		--mask "$out/scenes/scene${s}_mask.tif" --origin "$((500000 + s * 2000)),5800000"
done

echo "== 2. tiling and packing into $out/pool (256x256 tiles, 32 px overlap)"
./cdp-tile --size 256 --overlap 32 --label-suffix _mask \
	"$out/scenes/scene1.tif" "$out/scenes/scene2.tif" "$out/scenes/scene3.tif" |
	./cdp-lmdbpack "$out/pool"
mdb_stat -a "$out/pool" | sed -n '/^Status of tiles/,/Entries/p'

echo "== 3. shuffling keys; scene3 is held out for validation"
./cdp-keyshuffle --seed 7 --val-by scene3 --val-out "$out/val.keys" -o "$out/train.keys" "$out/pool"
echo "train keys: $(sed -n '1p' "$out/train.keys")"
echo "first keys: $(sed -n '2,4p' "$out/train.keys" | tr '\n' ' ')"

echo "== the pool's statistics (meta 'stats'), as the trainer will read them"
"$PY" - "$out/pool" <<'PYEOF'
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=2, readonly=True, lock=False)
meta = env.open_db(b"meta")
with env.begin(db=meta) as txn:
    for name in (b"shape", b"count", b"classes"):
        v = txn.get(name)
        print(name.decode() + ":", " ".join(l for l in v.decode().splitlines() if not l.startswith("crc32")))
    st = txn.get(b"stats").decode().splitlines()
    print("stats:", " ".join(l for l in st if ".mean=" in l or ".std=" in l))
PYEOF
echo "== pool $out/pool, pointer files $out/train.keys and $out/val.keys"

# 300 steps of 2 x 4 tiles (about 15 epochs of the two training scenes) at
# width 8 take a few minutes of 2 cores and reach a road IoU of about 0.7.
steps=${CDP_DEMO_STEPS:-300}
echo "== 4. training the road U-Net (width 8, depth 4) for $steps steps on 2 processes"
mp=
if command -v mpirun >/dev/null 2>&1; then
	mp="mpirun --oversubscribe -np 2"
	[ "$(id -u)" -ne 0 ] || mp="mpirun --allow-run-as-root --oversubscribe -np 2"
fi
$mp ./cdp-train --db "$out/pool" --keys "$out/train.keys" --val-keys "$out/val.keys" \
	--model share/cdpool/models/unet.cfg:width=8,depth=4 --out "$out/run" --steps "$steps" \
	--batch 4 --threads 1 --lr 0.003 --warmup 20 --log-every 10 --val-every 100

echo "== 5. predicting the held-out scene3"
$mp ./cdp-predict -q --threads 1 --colors share/cdpool/examples/roads.colors \
	"$out/run" "$out/scenes/scene3.tif" -o "$out/scene3_roads.tif" \
	--vector "$out/scene3_roads.gpkg" --preview "$out/scene3_roads.png"

echo "== 6. scoring against scene3_mask.tif"
./cdp-evaluate --png "$out/scene3_confusion.png" "$out/scene3_roads.tif" "$out/scenes/scene3_mask.tif"
./cdp-evaluate --json "$out/scene3_roads.tif" "$out/scenes/scene3_mask.tif" >"$out/scene3_eval.json"
"$PY" - "$out/scene3_eval.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))["per_class"][1]
print("road IoU %.3f  F1 %.3f  (precision %.3f, recall %.3f)" %
      (c["iou"], c["f1"], c["precision"], c["recall"]))
PYEOF
echo "== done in $(($(date +%s) - start)) s"
echo "prediction: $out/scene3_roads.tif (road ids, GeoTIFF in UTM 33N)"
echo "polygons:   $out/scene3_roads.gpkg"
echo "preview:    $out/scene3_roads.png"
