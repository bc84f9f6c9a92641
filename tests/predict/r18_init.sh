# tests/predict/r18_init.sh, sourced by init.sh and finetune.sh after
# common.sh: skips without torchvision, builds chips.sh's pool ($T/pool)
# and run, saves torchvision's resnet18 seeded with 5 as $T/r18.pth and
# imports it for resnet18.cfg with classes=5 into $T/init.cdpt (the
# importer's notes in $T/imp.err). R18 is resnet18.cfg's path.
need_python
"$PYTHON" -c "import torch, torchvision" 2>/dev/null || { echo "SKIP: no torchvision" >&2; exit 77; }
. "$CDP_SRCDIR/tests/predict/chips.sh"
export PYTHONPATH="$CDP_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
R18="$CDP_SRCDIR/share/cdpool/models/resnet18.cfg"
"$PYTHON" -c '
import sys, torch, torchvision
torch.manual_seed(5)
torch.save(torchvision.models.resnet18().state_dict(), sys.argv[1])' "$T/r18.pth"
"$PYTHON" -m cdpool import-torch "$T/r18.pth" --model "$R18:classes=5" -o "$T/init.cdpt" \
	2>"$T/imp.err" || fail "import-torch: $(cat "$T/imp.err")"
