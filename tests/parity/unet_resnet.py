"""unet_resnet.py DUMP MODELS TMP: share/cdpool/models/unet-resnet{18,34,50}.cfg
take torchvision's ResNet weights for their encoder through python3 -m
cdpool import-torch, and the engine runs them as cdpool.torch_model's twin
does (see unet_resnet.sh)."""
import json
import os
import subprocess
import sys

import numpy as np
import torch

dump, models, tmp = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
from tvhelp import check, failed, imp, seeded, twin  # noqa: E402


def decoder_params(stages, classes):
    """smp.Unet's decoder and head parameter count, from its definition:
    blocks of in+skip -> c -> c (3x3 convs without bias, bn gamma/beta),
    decoder_channels (256,128,64,32,16), a 3x3 head conv with bias."""
    dec = (256, 128, 64, 32, 16)
    ins = (stages[3],) + dec[:-1]
    skips = (stages[2], stages[1], stages[0], 64, 0)
    n = 0
    for i, s, c in zip(ins, skips, dec):
        n += 9 * (i + s) * c + 2 * c + 9 * c * c + 2 * c
    return n + 9 * dec[-1] * classes + classes


for depth in (18, 34, 50):
    m = seeded(depth, 1000)
    sd = m.state_dict()
    sd_path = os.path.join(tmp, "r%d.pth" % depth)
    torch.save(sd, sd_path)
    cfg = os.path.join(models, "unet-resnet%d.cfg" % depth)
    init = os.path.join(tmp, "u%d.cdpt" % depth)
    r = imp(sd_path, cfg, init)
    notes = [n.replace("cdpool: import-torch: ", "", 1) for n in r.stderr.strip().split("\n")]
    check(r.returncode == 0 and os.path.exists(init),
          "unet-resnet%d: import-torch of torchvision's resnet%d exits 0 (%s)"
          % (depth, depth, notes[-1]))
    check(not any(n.startswith("encoder tensor") for n in notes)
          and any(n.startswith("decoder tensor decoder.blocks.0.conv1.0.weight: missing")
                  for n in notes)
          and any(n.startswith("head tensor segmentation_head.0.weight: missing") for n in notes)
          and sorted(n for n in notes if n.startswith("unused"))
          == ["unused tensor fc.bias (1000)", "unused tensor fc.weight (1000,%d)"
              % (512 if depth < 50 else 2048)],
          "unet-resnet%d: every encoder tensor matched, the decoder and head left out, "
          "only fc unused" % depth)
    # the encoder's tensors are torchvision's, bit for bit
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))
    from cdpool import load_checkpoint  # noqa: E402
    ck = load_checkpoint(init)
    suffix = {"weight": "w", "bias": "b", "running_mean": "mean", "running_var": "var"}
    enc = [k for k in sd if not k.startswith("fc.") and not k.endswith("num_batches_tracked")]
    same = all(np.array_equal({**ck.params, **ck.buffers}.get(
        k.rsplit(".", 1)[0] + "." + suffix[k.rsplit(".", 1)[1]]), sd[k].numpy()) for k in enc)
    check(same and len(ck.params) + len(ck.buffers) == len(enc),
          "unet-resnet%d: the checkpoint holds torchvision's %d encoder tensors, nothing else"
          % (depth, len(enc)))
    # the engine on the imported weights (decoder initialized as usual),
    # replayed by parity.py in cdpool.torch_model's twin
    d = os.path.join(tmp, "d%d" % depth)
    os.mkdir(d)
    out = subprocess.run([dump, "-s", "7", "-i", "3,64,64", "-b", "2", "--steps", "1",
                          "--adam-eps", "0.1",
                          "--init", init, "-p", d, cfg], capture_output=True, text=True)
    missing = sorted(l.split(":")[1].strip() for l in out.stderr.strip().split("\n") if l)
    want = sorted(k for k in ("%s.%s" % (L, t) for L in
                              ["decoder.blocks.%d.conv%d.%d" % (i, c, j)
                               for i in range(5) for c in (1, 2) for j in (0, 1)]
                              for t in ("w", "b", "mean", "var"))
                  if not (k.split(".")[4] == "0" and k.rsplit(".", 1)[1] != "w"))
    want = sorted(want + ["segmentation_head.0.w", "segmentation_head.0.b"])
    check(out.returncode == 0 and missing == want,
          "unet-resnet%d: model_dump --init takes every encoder tensor (%d others: %s)"
          % (depth, len(missing), out.stderr.strip()[:200]))
    if out.returncode != 0:
        continue
    model = json.loads(out.stdout)
    nenc = sum(v.numel() for k, v in m.named_parameters() if not k.startswith("fc."))
    stages = (64, 128, 256, 512) if depth < 50 else (256, 512, 1024, 2048)
    check(model["nparams"] == nenc + decoder_params(stages, 2),
          "unet-resnet%d: %d parameters, torchvision's encoder and smp.Unet's decoder"
          % (depth, model["nparams"]))
    head = model["layers"][model["out_layer"]]
    check(head["name"] == "segmentation_head.0" and head["out"] == [2, 64, 64]
          and head["size"] == 3 and head["in"] == [[16, 64, 64]],
          "unet-resnet%d: a 3x3 head from 16 channels, logits at the input size" % depth)
    # the skips: each concat joins the upsampled map with the encoder's output of that size
    cats = [(L["name"], [model["layers"][i]["name"] for i in L["from"]], L["out"])
            for L in model["layers"] if L["type"] == "concat"]
    last = {18: (1, 1, 1), 34: (2, 3, 5), 50: (2, 3, 5)}[depth]
    want = [("decoder.blocks.%d.cat" % i, ["decoder.blocks.%d.up" % i, s], None)
            for i, s in enumerate(["layer3.%d" % last[2], "layer2.%d" % last[1],
                                   "layer1.%d" % last[0], "bn1"])]
    check([c[:2] for c in cats] == [w[:2] for w in want]
          and [c[2][1] for c in cats] == [4, 8, 16, 32],
          "unet-resnet%d: skips from layer3, layer2, layer1 and the stem (%s)" % (depth, cats))
    # the comparison catches logits off by 0.1%
    twin("unet-resnet%d" % depth, d, out.stdout, control=depth == 18)
sys.exit(1 if failed else 0)
