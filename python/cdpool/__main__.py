"""python -m cdpool info PATH...: what a pool, a checkpoint or a pointer
file holds, one "name: value" line per item (stdout). The kind is told from
the path: a directory is a pool, a file starting with "CDPCKPT" a
checkpoint, one starting with "#cdpool-keys" a pointer file. Each is
checked fully as it is read.
python -m cdpool trace [--skip N] [--against BASE] TRACE: what a
cdp-train --trace file says about the run's steps, per rank, and its
gradient buckets (trace.py); with BASE (a 1-rank run's trace) the
efficiency at equal core speed.
python -m cdpool import-torch STATE_DICT --model CFG[:K=V,...] -o INIT.cdpt
[--in-channels N] [--input-norm imagenet|none|MEAN,..:STD,..]
[--input-scale dtype|S] [--bands B,..]: an initial-weights checkpoint for
cdp-train --init from a PyTorch state dict, with the input normalization
the weights expect (import_torch.py).
python -m cdpool --version: "cdpool (python) VERSION", the C tools'
version. The installed console script `cdpool` is the same command
(`cdpool-info`, its name before, stays as an alias).
Exit 0, 1 when a file is refused (message on stderr), 2 on a usage error.
A closed pipe on stdout (python -m cdpool info POOL | head -1) ends the
process quietly by SIGPIPE, as it ends the C tools, not in a traceback
(main() restores SIGPIPE's default, so the console script does too); a
write error on stdout (a full disk, /dev/full) is one line, "cdpool:
write error: No space left on device", exit 1.
"""
import argparse
import io
import os
import re
import signal
import sys

from . import __version__
from .checkpoint import load_checkpoint, run_checkpoint, sync_name
from .errors import CdpError
from .keys import read_keys
from .model import CfgError, fit_checkpoint, model_of
from .pool import Pool
from .trace import report as trace_report

PROG = "cdpool"


def _pool(path, out):
    p = Pool(path)
    out("kind: pool")
    out("uuid: %s" % p.uuid)
    out("tiles: %d" % p.tiles)
    if p.bands:
        out("shape: %dx%dx%d" % p.shape)
        out("dtype: %s" % p.dtype_name)
        out("label: %s" % p.label_kind)
        out("ignore: %d" % p.label_ignore)
    for b, st in enumerate(p.stats, 1):
        out("band %d: count %d mean %.17g std %.17g min %.17g max %.17g"
            % (b, st["count"], st["mean"], st["std"], st["min"], st["max"]))
    for k in sorted(p.classes):
        out("class %d: %d" % (k, p.classes[k]))
    for s in p.sources:
        out("source %s: %s %s %dx%dx%d %s" % (s["index"], s["name"], s["path"], s["bands"],
                                              s["height"], s["width"], s["dtype"]))
    p.close()


def _ckpt(path, out):
    c = load_checkpoint(path)
    o = c.optim
    out("kind: checkpoint")
    out("version: %d" % c.version)
    out("input: %dx%dx%d" % c.in_shape)
    out("step: %d" % c.step)
    out("epoch: %d" % c.epoch)
    out("data position: %d" % c.data_pos)
    out("seed: %d" % c.seed)
    out("pool uuid: %s" % (c.pool_uuid or "none"))
    out("dtype: %s" % (c.dtype or "unknown"))
    out("class names: %s" % (", ".join(c.class_names) or "none"))
    out("bands: %s" % ",".join(map(str, c.bands)))
    if c.mean is not None:
        out("standardization: %s" % {"init": "the initial weights' input normalization "
                                     "(--init-norm)", "pool": "the pool's statistics",
                                     "sources": "the training sources' sums"}.get(
                                         c.std_from, c.std_from))
        for i in range(len(c.bands)):
            out("band %d: mean %.17g std %.17g" % (c.bands[i], c.mean[i], c.std[i]))
    if c.norm is not None:
        n = c.norm
        out("input norm: %s, scale %s%s" % (
            n["kind"], "%.17g" % n["scale"] if n["scale"] else "dtype (the pool's largest value)",
            ", bands %s" % ",".join(n["bands"]) if n["bands"] else ""))
        for i in range(len(n["mean"])):
            out("input norm channel %d: mean %.17g std %.17g" % (i + 1, n["mean"][i], n["std"][i]))
    if getattr(c, "task", None) is not None:
        t = c.task
        out("task: %s, %d targets" % (t["task"], len(t["target_mean"])))
        for i in range(len(t["target_mean"])):
            out("target %d: mean %.17g std %.17g" % (i + 1, t["target_mean"][i],
                                                     t["target_std"][i]))
    if c.best is not None:
        # the validation that kept a --keep-best best.cdpt
        out("best: %s %.17g at step %d" % (c.best["metric"], c.best["value"], c.best["step"]))
    if c.run is not None:
        # what a --resume keeps or compares (the RUN chunk)
        u = c.run
        out("run: --pad-last %s, --nan-policy %s, %d non-finite steps in a row, %d skipped"
            % ("given" if u["pad_last"] else "not given", u["nan_policy"], u["nan_row"],
               u["nan_skipped"]))
        out("run compute: %d threads, %s kernels" % (u["threads"], u["kernels"]))
        out("run validation list: %s" % ("none" if not u["val_count"] else
                                         "%d keys, uuid %s, seed %d, crc32 %08x" % (
                                             u["val_count"], u["val_uuid"], u["val_seed"],
                                             u["val_crc32"])))
    for i, f in enumerate(c.sources):
        # the file the weights were read from, then where its own came from
        out("%s: %s '%s' sha256 %s" % ("initial weights from" if i == 0 else "which came from",
                                       f["kind"], f["name"], f["sha256"]))
    out("overrides: %s" % " ".join(c.overrides))
    out("parameters: %d tensors, %d values" % (len(c.params),
                                                sum(t.size for t in c.params.values())))
    for name, t in list(c.params.items()) + list(c.buffers.items()):
        out("tensor %s: %s" % (name, "x".join(map(str, t.shape))))
    out("buffers: %d tensors, %d values" % (len(c.buffers),
                                             sum(t.size for t in c.buffers.values())))
    out("optimizer: %s lr %.9g policy %s step %d" % (o["type"], o["lr"], o["policy"], o["step"]))
    out("loss scale: %.17g" % c.loss_scale)
    out("initial weights: %s" % ("yes" if c.initial else "no"))
    for name in c.rng:
        out("rng: %s" % name)
    if c.ranks:
        out("ranks: %d (--sync %s)" % (c.ranks["nranks"], sync_name(
            c.ranks["sync"], c.ranks["k"], c.ranks["rho"])))
    if c.live is not None:
        # what LIVE holds tells which run wrote it: admm's z beside the
        # consensus estimate in PARM, else (ema=) the weights the
        # optimizer trains beside their moving average in PARM
        out("live: %d values, %s" % (c.live.size, "ADMM's z (PARM: the consensus estimate "
                                     "mean(w + u))" if c.ranks and c.ranks["sync"] == "admm"
                                     else "the trained weights (PARM: their moving average, "
                                     "ema=)"))
    out("cfg: %d bytes" % len(c.cfg_text.encode()))
    try:
        m = model_of(c)
    except CfgError as e:
        out("model: the cfg is refused: %s" % e)
        return
    # the checkpoint is refused as cdp-predict refuses it
    why = None if c.initial else fit_checkpoint(c, m)
    if why:
        raise CdpError("EMISMATCH", path, message=why)
    out("model: %d layers, %s loss, %d classes" % (len(m["layers"]), m["loss"], m["classes"]))
    for L in m["layers"]:
        out("layer %d %s %s: %s -> %s" % (L["index"], L["type"], L["name"], " ".join(
            "x".join(map(str, s)) for s in L["in"]), "x".join(map(str, L["out"]))))


def _keys(path, out):
    k = read_keys(path)
    out("kind: keys")
    out("uuid: %s" % k.uuid)
    out("seed: %d" % k.seed)
    out("count: %d" % len(k))
    if len(k):
        out("first: %s" % k[0])
        out("last: %s" % k[-1])


def kind_of(path):
    if os.path.isdir(path):
        return "pool"
    with open(path, "rb") as f:
        head = f.read(12)
    if head.startswith(b"CDPCKPT"):
        return "checkpoint"
    if head.startswith(b"#cdpool-keys"):
        return "keys"
    return None


def _int_in(lo, hi):
    """An argparse type: a decimal integer in [lo, hi], digits only as the
    C parsers take it (' 3', '+3' and '1_0', which int() takes, refused)."""
    def parse(text):
        n = int(text, 10) if re.fullmatch(r"[0-9]{1,20}", text) else lo - 1
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError("'%s' is not a number in [%d, %d]" % (text, lo, hi))
        return n
    return parse


_count = _int_in(0, 1000000)
_channels = _int_in(1, 65535)


def _lines(path, show, *args):
    """show(path, out, *args)'s lines, or None when it refused a file (the
    message printed on stderr)."""
    lines = []
    try:
        show(path, lines.append, *args)
    except CdpError as e:
        print("%s: cannot read %s" % (PROG, e), file=sys.stderr)
        return None
    except OSError as e:
        print("%s: cannot read '%s': %s" % (PROG, e.filename or path, e.strerror or e),
              file=sys.stderr)
        return None
    return lines


def _info(path, out):
    path = run_checkpoint(path)
    kind = kind_of(path)
    if kind is None:
        raise CdpError("EMAGIC", path)
    {"pool": _pool, "checkpoint": _ckpt, "keys": _keys}[kind](path, out)


def _closed_stdout():
    """A stdout for a process started without one (Python then has None,
    and the first print or flush raised AttributeError): /dev/null opened
    read-only, on descriptor 1 as it is the lowest free, as the C tools'
    cdp_cli_std_fds does, so that a write fails with EBADF and is the one
    line "write error: Bad file descriptor"."""
    fd = os.open(os.devnull, os.O_RDONLY)
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w")), write_through=False)


def main(argv=None):
    """The command line: its exit status. SIGPIPE ends the process quietly
    (Python ignores it and raises BrokenPipeError instead, even from the
    final flush: a command line tool is done when its reader is gone); any
    other error writing stdout is one line and 1."""
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except (AttributeError, ValueError):    # no SIGPIPE, or not the main thread
        pass
    if sys.stdout is None:                  # started with stdout closed (>&-)
        sys.stdout = _closed_stdout()
    try:
        try:
            rc = _main(argv)
        except SystemExit as e:             # argparse: --help, --version, usage errors
            rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        sys.stdout.flush()
    except OSError as e:
        print("%s: write error: %s" % (PROG, e.strerror or e), file=sys.stderr)
        # the interpreter's own last flush of what is still buffered would
        # fail again ("Exception ignored ..."): stdout goes nowhere now
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, sys.stdout.fileno())
            os.close(fd)
        except (OSError, ValueError):
            pass
        return 1
    return rc


def _main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description="Show what a cdpool file holds.")
    ap.add_argument("--version", action="version", version="%s (python) %s" % (PROG, __version__))
    sub = ap.add_subparsers(dest="cmd", required=True)
    info = sub.add_parser("info", help="print what a pool, checkpoint or pointer file holds")
    info.add_argument("path", nargs="+", metavar="POOL|CHECKPOINT|RUN|KEYS")
    tr = sub.add_parser("trace", help="what a cdp-train --trace file says about the steps")
    tr.add_argument("--skip", type=_count, default=0, metavar="N",
                    help="leave out the trace's first N steps (the warm-up)")
    tr.add_argument("--against", metavar="BASE",
                    help="a 1-rank run's trace: print the efficiency at equal core speed")
    tr.add_argument("path", metavar="TRACE")
    it = sub.add_parser("import-torch",
                        help="an initial-weights checkpoint from a PyTorch state dict")
    it.add_argument("state_dict", metavar="STATE_DICT")
    it.add_argument("--model", required=True, metavar="CFG[:K=V,...]")
    it.add_argument("-o", "--output", required=True, metavar="INIT.cdpt")
    it.add_argument("--in-channels", type=_channels, metavar="N",
                    help="input bands of the net; the first convolution adapted as timm does")
    it.add_argument("--input-norm", metavar="imagenet|none|MEAN,..:STD,..",
                    help="the input normalization the weights expect")
    it.add_argument("--input-scale", metavar="dtype|S",
                    help="band values are divided by S before --input-norm (default dtype: "
                    "the largest value of the pool's data type)")
    it.add_argument("--bands", metavar="B,..",
                    help="the bands the weights expect, in order (names or 1-based indices)")
    args = ap.parse_args(argv)
    if args.cmd == "import-torch":
        from .import_torch import run
        return run(args, PROG)
    if args.cmd == "trace":
        lines = _lines(args.path, trace_report, args.skip, args.against)
        if lines is None:
            return 1
        print("\n".join(lines))
        return 0
    rc = 0
    for path in args.path:
        lines = _lines(path, _info)
        if lines is None:
            rc = 1
            continue
        if len(args.path) > 1:
            print("%s:" % path)
        print("\n".join(lines))
    return rc


if __name__ == "__main__":
    sys.exit(main())
