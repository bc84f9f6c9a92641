"""test_model.py: cdpool.model, the Python reader of the model cfg language
(cdp-model(5)), against the C parser and net builder (tests/engine/model_dump),
and the ONNX export of every layer type. Run by tests/python/python.sh:

    test_model.py DIR

with DIR a scratch directory; each check prints "ok  NAME", the first failure
"FAIL NAME: why" (exit 1). The ONNX part says SKIP without torch or onnx.
"""
import os
import subprocess
import sys
import warnings

import numpy as np

from test_cdpool import SMALL, Fail, check, ok, run_tests

T = sys.argv[1]


def man_examples(page):
    """{name: cfg text} of cdp-model(5)'s `.\" example NAME` blocks and
    [(name, [overrides])] of its `.\" build NAME K=V,...` lines."""
    ex, builds, name, text = {}, [], None, None
    for line in open(page).read().split("\n"):
        if line.startswith('.\\" example '):
            name = line.split()[2]
        elif line.startswith('.\\" build '):
            w = line.split()
            builds.append((w[2], w[3].split(",")))
        elif line == ".EX" and name:
            text = []
        elif line == ".EE" and text is not None:
            ex[name], name, text = "\n".join(text) + "\n", None, None
        elif text is not None:
            text.append(line.replace("\\-", "-").replace("\\e", "\\").replace("\\&", ""))
    return ex, builds


def f32(x):
    """model_dump prints floats with %.9g: equal as float32; the loss's
    options (build()'s "loss_opts", for loss_fn) it does not print."""
    if isinstance(x, float):
        return float(np.float32(x))
    if isinstance(x, dict):
        return {k: f32(v) for k, v in x.items() if k not in ("cfg", "loss_opts")}
    if isinstance(x, list):
        return [f32(v) for v in x]
    return x


# layer options no shipped cfg or example of cdp-model(5) uses
MISC_CFG = """[net]
channels=3
in_h=32
in_w=32
classes=2
lr_mult=conv*:0.1;leaky?:0
[conv]
filters=4
lr_mult=2
dilation=2
activation=leaky
slope=0.2
[leaky]
slope=0.1
[maxpool]
size=3
stride=2
pad=1
[avgpool]
size=3
stride=1
pad=1
[upsample]
[deconv]
filters=4
size=4
stride=2
pad=1
activation=relu
[bn]
name=b
momentum=0.3
eps=0.001
activation=leaky
[conv]
name=q
filters=4
stride=3
pad=0
[upsample]
name=r1
from=q,b
mode=bilinear
[upsample]
name=r2
from=q,b
[upsample]
from=q
factor=3
mode=bilinear
[upsample]
from=-1,b
[add]
from=b,r1,r2,-1
[conv]
filters=2
size=1
"""


def test_model_cfg():
    """cdpool.model.build() against the C parser and builder (model_dump) on
    every shipped cfg, cdp-model(5)'s examples and builds, and refusals."""
    import json
    from cdpool import model as cm
    src = os.environ["CDP_SRCDIR"]
    dump = os.path.join(os.environ["CDP_BUILDDIR"], "tests", "engine", "model_dump")
    d = os.path.join(T, "cfgs")
    os.makedirs(d, exist_ok=True)
    cases = []
    for f in sorted(os.listdir(os.path.join(src, "share", "cdpool", "models"))):
        text = open(os.path.join(src, "share", "cdpool", "models", f)).read()
        # siamese-unet.cfg splits its input into two dates: an even count
        cases += [(f, text, [], None), (f, text, [], (6 if "siamese" in f else 5, 64, 64))]
    cases += [("unet.cfg", open(os.path.join(src, "share", "cdpool", "models", "unet.cfg")).read(),
               ["width=4", "depth=2", "loss=bce+dice", "outputs=1"], (3, 32, 32))]
    # the siamese U-Net's [diff] fusions
    siam = open(os.path.join(src, "share", "cdpool", "models", "siamese-unet.cfg")).read()
    cases += [("siamese-unet.cfg", siam, ["width=4", "depth=2", "fusion=%d" % f], (6, 32, 32))
              for f in (1, 2)]
    ex, builds = man_examples(os.path.join(src, "man", "cdp-model.5"))
    check(len(ex) >= 4 and builds, "cdp-model(5): %d examples, %d builds" % (len(ex), len(builds)))
    cases += [(n, t, [], (0, 32, 32)) for n, t in ex.items()]
    cases += [(n, ex[n], ov, (0, 32, 32)) for n, ov in builds]
    cases.append(("small.cfg", open(SMALL).read(), ["in_h=24", "in_w=24"], None))
    cases.append(("misc.cfg", MISC_CFG, [], None))
    # a float option at its float32 bound written as a longer decimal (0.99900002
    # is the float 0.999f, dropout's p bound) is accepted by both
    cases.append(("bound.cfg", "[net]\nchannels=3\nin_h=16\nin_w=16\n[conv]\nfilters=2\n"
                  "[dropout]\np=0.99900002\n", [], None))
    nlayers = 0
    for name, text, ov, shape in cases:
        path = os.path.join(d, name)
        open(path, "w").write(text)
        cmd = [dump, "-b", "1"] + sum((["-D", o] for o in ov), [])
        if shape:
            cmd += ["-i", ",".join(str(v or 0) for v in shape)] if all(shape) else \
                ["-D", "in_h=%d" % shape[1], "-D", "in_w=%d" % shape[2]]
            if not all(shape):
                ov = ov + ["in_h=%d" % shape[1], "in_w=%d" % shape[2]]
        r = subprocess.run(cmd + [path], capture_output=True, text=True)
        check(r.returncode == 0, "model_dump %s: %s" % (name, r.stderr))
        want = json.loads(r.stdout)
        got = cm.build(text, path, ov, shape if shape and all(shape) else None, batch=1)
        if f32(got) != f32(want):
            for a, b in zip(got["layers"], want["layers"]):
                check(f32(a) == f32(b), "%s %s: layer %d: Python %s, C %s" % (name, ov, a["index"],
                                                                             f32(a), f32(b)))
            check(False, "%s %s: Python %s, C %s" % (name, ov,
                  {k: v for k, v in got.items() if k != "layers"},
                  {k: v for k, v in want.items() if k != "layers"}))
        nlayers += len(got["layers"])
    print("ok   cfg reader: %d models (%d layers), every layer, shape and tensor as model_dump's"
          % (len(cases), nlayers))

    base = "[net]\nchannels=3\nin_h=16\nin_w=16\n[vars]\nwidth=4\n"
    bad = [
        ("[conv]\nfilters=${width*}\nsize=1\n", []),
        ("[conv]\nfilters=${wdth}\n", []),
        ("[conv]\nfilters=${(width}\n", []),
        ("[conv]\nfilters=${2**-1}\n", []),
        ("[conv]\nfilters=${9223372036854775807+1}\n", []),
        ("[conv]\nfilters=${7/0}\n", []),
        ("@for i 0 2\n[conv]\nfilters=2\n", []),
        ("@end\n", []),
        ("@fore i 0 1\n@end\n", []),
        ("@for width 0 1\n@end\n", []),
        ("@for i 0 1 0\n@end\n", []),
        ("[conv]\nfilters=2\nfilters=3\n", []),
        ("[conv]\nfilter=2\n", []),
        ("[conv]\nfilters=2\nsize=0\n", []),
        ("[bn]\neps=2\n", []),
        ("[bn]\nmomentum=x\n", []),
        ("[conv]\nfilters=2\nfrom=nothere\n", []),
        ("[conv]\nfilters=2\nfrom=-3\n", []),
        ("[conv]\nname=input\nfilters=2\n", []),
        ("[conv]\nname=a\nfilters=2\n[conv]\nname=a\nfilters=2\n", []),
        ("[add]\n", []),
        ("[conv]\nfilters=2\nactivation=tanh\n", []),
        ("[conv]\nfilters=2\nslope=0.1\n", []),
        ("[maxpool]\nsize=32\n", []),
        ("[upsample]\nmode=cubic\n", []),
        ("[upsample]\nfactor=65\n", []),
        ("[upsample]\nfrom=input,input,input\n", []),
        ("[maxpool]\n[upsample]\nfrom=input,-1\n", []),
        ("[gap]\n[upsample]\nfrom=-1,input\nfactor=2\n", []),
        ("[conv]\nfilters=3\n", ["classes=2"]),
        ("[conv]\nfilters=1\n", ["loss=bce", "classes=3"]),
        ("[conv]\nfilters=2\n", ["loss=hinge"]),
        ("[conv]\nfilters=2\n", ["loss=mse", "classes=3"]),
        ("[conv]\nfilters=2\n", ["loss=mse+dice"]),
        ("[conv]\nfilters=${width}\n", ["width=x"]),
        ("[conv]\nfilters=2\nlr_mult=-1\n", []),
        ("[conv]\nfilters=2\nlr_mult=1e39\n", []),
        ("[bn]\neps=1e-13\n", []),
        ("[conv]\nfilters=2\n", ["lr_mult=conv0=0.1"]),
        ("[conv]\nfilters=2\n", ["lr_mult=conv*:x"]),
        ("[conv]\nfilters=2\n", ["channels=0"]),
        ("[conv]\nfilters=2\n", ["a=1", "a=2"]),
        ("[frob]\n", []),
        ("[conv\n", []),
        ("[net]\n", []),
        ("key\n", []),
        ("[conv]\nfilters=\n", []),
        ("@if width-4\n[bad]\n@end\n[gap]\n[dense]\noutput=2\n[dropout]\np=1\n", []),
        ("[slice]\nstart=2\nend=1\n", []),
        ("[slice]\nend=4\n", []),
        ("[diff]\n", []),
        ("[conv]\nname=a\nfilters=2\n[diff]\nfrom=a,input\n", []),
        ("[diff]\nfrom=input,input,input\n", []),
        ("[diff]\nfrom=input,input\nabs=2\n", []),
        ("[conv]\nfilters=2\nweights=nothere\n", []),
        ("[conv]\nname=a\nfilters=2\n[conv]\nfilters=2\nweights=a\n", []),
        ("[conv]\nname=a\nfilters=3\n[relu]\nweights=a\n", []),
        ("[relu]\nname=r\n[relu]\nweights=r\n", []),
        ("[conv]\nfilters=2\n#\0 the rest\n[conv]\nfilters=2\n", []),
        ("@for i 1 10001\n[relu]\n@end\n", []),
    ]
    for k, (tail, ov) in enumerate(bad):
        path = os.path.join(d, "bad%d.cfg" % k)
        open(path, "w").write(base + tail)
        r = subprocess.run([dump] + sum((["-D", o] for o in ov), []) + [path],
                           capture_output=True, text=True)
        check(r.returncode == 1 and r.stderr.startswith("model_dump: "),
              "model_dump accepted bad%d.cfg: %s" % (k, r.stderr))
        try:
            cm.build(base + tail, path, ov)
        except cm.CfgError as e:
            check("model_dump: %s\n" % e == r.stderr, "bad%d.cfg: Python %r, C %r" % (k, str(e),
                                                                                    r.stderr))
        else:
            raise Fail("bad%d.cfg accepted, C says %s" % (k, r.stderr.strip()))
    ok("cfg reader: %d refused cfgs, each with the C builder's message" % len(bad))


def test_onnx_layers():
    """Every layer type exports: the torch twin of each shipped cfg and cdp-model(5)
    example (random weights, eval mode, 32x32 inputs) written by torch.onnx.export as
    export_onnx() does, accepted by onnx's checker, and its graph run by onnx_eval
    gives torch's output."""
    try:
        import onnx
        import torch
        from cdpool.torch_model import EngineNet
    except ImportError as e:
        print("SKIP ONNX export of every layer type (%s)" % e)
        return
    from cdpool import model as cm
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import onnx_eval
    src = os.environ["CDP_SRCDIR"]
    ex, _ = man_examples(os.path.join(src, "man", "cdp-model.5"))
    mdir = os.path.join(src, "share", "cdpool", "models")
    for f in sorted(os.listdir(mdir)):
        ex[f] = open(os.path.join(mdir, f)).read()
    ex["misc.cfg"] = MISC_CFG
    types = set()
    torch.manual_seed(3)
    for name, text in sorted(ex.items()):
        model = cm.build(text, name, ["width=8"] if "${width" in text else [], (0, 32, 32))
        net = EngineNet(model).eval()
        with torch.no_grad():
            for m in net.modules():           # running statistics other than 0 and 1
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2)
        x = torch.randn(2, *model["input"])
        path = os.path.join(T, "layers_%s.onnx" % name)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)    # torch 1.13's shape inference
            want = net(x).numpy()
            torch.onnx.export(net, x, path, opset_version=13, input_names=["x"],
                              output_names=["y"])
        m = onnx.load(path)
        onnx.checker.check_model(m, full_check=True)
        got = onnx_eval.run(m, {"x": x.numpy()})["y"]
        err = float(np.max(np.abs(got - want)))
        check(got.shape == want.shape and err <= 1e-4 * max(1.0, float(np.max(np.abs(want)))),
              "%s: the ONNX graph differs from torch by %g" % (name, err))
        types |= {L["type"] for L in model["layers"]}
    missing = set(cm.LAYER_TYPES) - types
    check(not missing, "no example exports %s" % sorted(missing))
    # with dynamic axes (as export_onnx() writes), the broadcast of DeepLabv3+'s
    # image pooling follows the input's size
    model = cm.build(ex["deeplabv3plus-resnet18.cfg"], "d.cfg", [], (0, 32, 32))
    net = EngineNet(model).eval()
    path = os.path.join(T, "dyn.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.onnx.export(net, torch.randn(1, 3, 32, 32), path, opset_version=13,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "n", 2: "h", 3: "w"},
                                        "y": {0: "n", 2: "h", 3: "w"}})
        x = torch.randn(2, 3, 64, 48)
        want = net(x).numpy()
    got = onnx_eval.run(onnx.load(path), {"x": x.numpy()})["y"]
    check(got.shape == want.shape and float(np.max(np.abs(got - want))) <= 1e-4 * max(
        1.0, float(np.max(np.abs(want)))), "deeplabv3plus-resnet18 exported at 32x32 with dynamic "
          "axes: onnx_eval at 64x48 gives %s, torch %s" % (got.shape, want.shape))
    ok("ONNX export of %d models, every layer type: onnx's checker, onnx_eval equals torch "
       "(and at another size with dynamic axes)" % len(ex))


def main():
    return run_tests([test_model_cfg, test_onnx_layers])


if __name__ == "__main__":
    sys.exit(main())
