#!/bin/sh
# tests/tools/scene_recipe.sh: the scene-classification recipe of README.md,
# its commands as written there, run in an empty folder on a smaller set:
# the block after "<!-- recipe: scene-classification -->" with 1,000 chips
# made 60, 20 epochs 3, batches of 32 8 and the 1024-pixel scene 192 (each
# substitution must match, so the recipe cannot drift from this test
# unnoticed). Then what a user relies on at each step: the pool's classes
# from the folders, a stratified validation list, the class weights in
# train.log, a CSV row per held-out chip, a report of that many chips with
# a confusion matrix and kappa, and a class map of one pixel per 64x64 cell
# with the scene's CRS.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
run_recipe scene-classification "--count 1000 " "--count 60 " "--epochs 20 " "--epochs 3 " \
	"--batch 32 " "--batch 8 " "city.tif --size 1024 " "city.tif --size 192 "
W="$T/work"
grep -q "^cdp-keyshuffle: seed 1, 60 keys (48 train, 12 validation)\$" "$T/err" ||
	fail "split: $(grep keyshuffle "$T/err")"
for c in 0 1 2 3 4; do
	grep -q "^cdp-keyshuffle: class $c: [0-9]* train, [0-9]* validation\$" "$T/err" ||
		fail "no count of class $c: $(grep keyshuffle "$T/err")"
done
grep -q "class weights (auto, inverse frequency over the training keys): " "$W/run/train.log" ||
	fail "train.log states no class weights"
[ "$(sed 1d "$W/val.csv" | wc -l)" -eq 12 ] || fail "$(sed 1d "$W/val.csv" | wc -l) CSV rows, want 12"
grep -q "^path,class,p_green,p_lake,p_land,p_residential,p_road\$" "$W/val.csv" || fail "CSV header: $(head -1 "$W/val.csv")"
grep -q "^chips: 12 scored, 48 in the reference not predicted\$" "$T/out" ||
	fail "report: $(head -3 "$T/out")"
grep -q "^ *green *lake *land *residential *road\$" "$T/out" || fail "no confusion matrix: $(cat "$T/out")"
grep -q "^kappa " "$T/out" && grep -q "^macro f1 " "$T/out" || fail "no kappa: $(cat "$T/out")"
"$PYTHON" - "$W/city.tif" "$W/city_classes.tif" <<'PYEOF' || fail "class map"
import sys
from osgeo import gdal
a, m = gdal.Open(sys.argv[1]), gdal.Open(sys.argv[2])
assert (m.RasterXSize, m.RasterYSize) == (3, 3), (m.RasterXSize, m.RasterYSize)
assert m.GetGeoTransform()[1] == 64 * a.GetGeoTransform()[1], m.GetGeoTransform()
assert m.GetProjection() == a.GetProjection()
assert (m.ReadAsArray() < 5).all()
PYEOF
echo "ok: $(tail -3 "$T/out" | tr '\n' ' ')"
