# tests/predict/chips.sh, sourced by classify.sh and classify_csv.sh: 20
# scene chips of 16x16 (genscene.py) in $T/chips with their list.txt,
# copied into the class folders $T/F/NAME, packed by --folders into
# $T/pool (class names: the folders') and a small classifier trained on
# them into $T/run; classifier POOL RUN trains another the same way.
# run alone it has no $T (common.sh's temporary folder) and would write
# into the current directory or /: refuse
[ -n "${T:-}" ] && [ -d "$T" ] ||
	{ echo "tests/predict/chips.sh: a fragment sourced by classify.sh, classify_csv.sh and r18_init.sh, not a test" >&2; exit 99; }
GEN="$CDP_SRCDIR/share/cdpool/examples/genscene.py"
NAMES="residential road green lake land"
classifier() {
	cdp-keyshuffle -q -o "$T/$2.keys" "$T/$1"
	cdp-train -q --db "$T/$1" --keys "$T/$2.keys" --out "$T/$2" --batch 4 --steps 6 \
		--threads 1 --model "$CDP_SRCDIR/share/cdpool/models/classifier.cfg:width=4,blocks=1" ||
		fail "cdp-train $2"
}
"$PYTHON" "$GEN" --scene-tiles "$T/chips" --count 20 --size 16 --seed 2
for n in $NAMES; do mkdir -p "$T/F/$n"; done
while read -r f c; do
	cp "$T/chips/$f" "$T/F/$(echo $NAMES | cut -d' ' -f$((c + 1)))/"
done <"$T/chips/list.txt"
cdp-lmdbpack -q --folders "$T/F" "$T/pool"
classifier pool run
