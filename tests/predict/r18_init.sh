# tests/predict/r18_init.sh, sourced by init.sh and finetune.sh after
# common.sh: skips without torchvision, builds chips.sh's pool ($T/pool)
# and run, saves torchvision's resnet18 seeded with 5 as $T/r18.pth and
# imports it for resnet18.cfg with classes=5 into $T/init.cdpt (the
# importer's notes in $T/imp.err). R18 is resnet18.cfg's path.
# run alone it has no $T (common.sh's temporary folder) and would write
# into the current directory or /: refuse
[ -n "${T:-}" ] && [ -d "$T" ] ||
	{ echo "tests/predict/r18_init.sh: a fragment sourced by init.sh and finetune.sh, not a test" >&2; exit 99; }
need_python
. "$CDP_SRCDIR/tests/predict/chips.sh"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
R18="$CDP_SRCDIR/share/cdpool/models/resnet18.cfg"
import_r18 "$R18:classes=5" "$T/init.cdpt"
