"""checkpoint.py: cdp-train's checkpoints (engine/ckpt/checkpoint.h,
cdp-checkpoint(5)) read from Python.

load_checkpoint() makes the C reader's checks in its order: the magic, the
version (1 to 8; a later one is named as a newer cdpool's), the file size field
against the real size, the CRC-32 (zlib's) before any field is trusted, the chunk
tags, flags (version 8: a chunk this reader does not know is skipped when it is
marked skippable, else refused as a newer cdpool's), lengths and counts against
the bytes left in each chunk, then the values (ranges, tensor
totals, optimizer settings finite, steps taken 0 to META's step and blocks of the
parameter count, bands matching the input
channels, finite deviations >= 0 (0: a constant band, centred only), the
global batch (version 4), the kind (version 7), the standardization's origin, sources and the
training data's CRS and pixel size (version 5), the class names (version 6: 1 to 255 bytes
of UTF-8 without control characters each), unique RNG stream names, the RANK chunk's own
version, CRC and sizes, the SUMS chunk's sums finite and counts no more than
the step (version 7), the LIVE chunk's one float per parameter (version 7), the NORM chunk's
channels (META's) and deviations > 0, the FROM chunk's kinds and names (version 7), the BEST
chunk's known metric, finite value and step no later than META's (version 8), the RUN
chunk's settings, non-finite step counts, threads, kernels' name and validation list
(version 8)),
and every float finite: parameters, buffers,
optimizer moments, the per-rank state and LIVE (cdp_ckpt_validate). Error codes are the C reader's.
Tensors are float32 NumPy arrays that share one writable copy of the file.
"""
import math
import os
import re
import struct
import zlib
from collections import OrderedDict

import numpy as np

from .errors import PHRASES, CdpError
from .record import DTYPE_NAMES

MAGIC = b"CDPCKPT\n"
VERSION, VERSION_MIN = 8, 1
MAX_RANKS = 1 << 20        # CDP_CKPT_MAX_RANKS
CRS_MAX = 65536            # CDP_CKPT_CRS_MAX
MAX_SOURCES = 1 << 24      # CDP_CKPT_MAX_SOURCES
MAX_CLASSES = 65536        # CDP_CKPT_MAX_CLASSES
CLASS_NAME_MAX = 255       # CDP_CKPT_CLASS_NAME_MAX
STD_FROM = {0: "unknown", 1: "pool", 2: "sources", 3: "init"}   # CDP_CKPT_STD_*
NORMS = {1: "none", 2: "imagenet", 3: "given"}    # CDP_CKPT_NORM_* (NORM, version 7)
NORM_BAND_MAX = 255        # CDP_CKPT_NORM_BAND_MAX
FROM_KINDS = {1: "checkpoint", 2: "state dict"}   # CDP_CKPT_FROM_* (FROM, version 7)
FROM_MAX, FROM_NAME_MAX = 16, 4096                # CDP_CKPT_FROM_MAX, _NAME_MAX
TASKS = {1: "regression"}                         # CDP_CKPT_TASK_* (TASK, version 7)
MAX_TARGETS = 65536                               # CDP_CKPT_MAX_TARGETS
BAND_NAME = re.compile(rb"[\x21-\x2b\x2d-\x7e]{1,255}")   # printable, no space or comma
HDR = 24
TAGS = (b"META", b"CFG ", b"PARM", b"BUFS", b"OPTM", b"RNG ", b"DATA", b"RANK", b"SUMS",
        b"LIVE", b"NORM", b"FROM", b"TASK", b"PLAN", b"BEST",
        b"RUN ")
FIXED = 7                  # every version's chunks; then the optional ones,
SINCE = (1, 1, 1, 1, 1, 1, 1, 3, 7, 7, 7, 7, 7, 7, 8, 8)  # each at most once, in TAGS's order
CHUNK_SKIP = 1             # CDP_CKPT_CHUNK_SKIP: a chunk header's flags (version 8)
FLAGS = (0,) * 14 + (CHUNK_SKIP,) * 2   # each known chunk's flags: BEST and RUN skip
BEST_METRICS = {1: "miou", 2: "loss", 3: "acc", 4: "f1", 5: "map", 6: "rmse", 7: "r2"}
# CDP_CKPT_BEST_* (BEST, version 8): cdp-train's --keep-best words
RUN_LAYOUT, RUN_BYTES = 1, 104   # CDP_CKPT_RUN_LAYOUT, RUN's payload in it
RUN_PAD_LAST = 1                 # CDP_CKPT_RUN_PAD_LAST: RUN's flags
RUN_THREADS_MAX = 65536          # CDP_CKPT_RUN_THREADS_MAX
NAN_POLICIES = {1: "stop", 2: "skip"}   # CDP_CKPT_NAN_* (RUN, version 8)
OPTIMIZERS = {0: "none", 1: "sgd", 2: "adamw"}
POLICIES = {0: "constant", 1: "step", 2: "cosine"}
SYNCS = {0: "allreduce", 1: "average", 2: "admm"}


def sync_name(sync, k, rho):
    """--sync as cdp-train names it (train_sync.c tr_sync_name): "allreduce",
    "average:K" or "admm:K:RHO", RHO as cdp_double_str (lib/cdp_num.c)
    prints it: the fewest digits (6 to 17, %g) that read back as it, so
    that two RHOs are never shown alike, the exponent without '+' or
    leading zeros (1e-9)."""
    if sync == "average":
        return "average:%d" % k
    if sync != "admm":
        return "allreduce"
    for prec in range(6, 18):
        r = "%.*g" % (prec, rho)
        if float(r) == rho:
            break
    return "admm:%d:%s" % (k, re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", r))
KIND_INITIAL = 1           # CDP_CKPT_KIND_INITIAL: META's kind (version 7)
CFG_MAX = 16 << 20
NAME_MAX = 95
_NAME = re.compile(rb"[\x21-\x7e]{1,95}")


class _Bad(Exception):
    def __init__(self, code, message=None):
        self.code = code
        self.message = message      # where cdp_ckpt_validate says more


class _Rd:
    """A cursor over one chunk; running past its end is EFORMAT."""

    def __init__(self, buf, start, end, version):
        self.b, self.p, self.end, self.version = buf, start, end, version

    def need(self, n):
        if self.end - self.p < n:
            raise _Bad("EFORMAT")

    def tuple(self, fmt):
        n = struct.calcsize(fmt)
        self.need(n)
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += n
        return v

    def take(self, fmt):
        v = self.tuple(fmt)
        return v if len(v) > 1 else v[0]

    def string(self, maxlen):
        n = self.take("<I")
        if n == 0 or n > maxlen:
            raise _Bad("EFORMAT")
        self.need(n)
        s = bytes(self.b[self.p:self.p + n])
        if b"\0" in s:
            raise _Bad("EFORMAT")
        self.p += n
        return s

    def floats(self, n, shape=None):
        self.need(4 * n)
        a = np.frombuffer(self.b, dtype="<f4", count=n, offset=self.p)
        self.p += 4 * n
        return a.reshape(shape) if shape is not None else a


class Checkpoint:
    """A checkpoint's contents.

    version; subject (the path it was read from); in_shape (C, H, W);
    cfg_text and overrides (list of "key=value"): the model; params and
    buffers: OrderedDict name -> float32 array of the tensor's shape, in block order (PyTorch's parameter order);
    optim: dict (type "none"|"sgd"|"adamw", policy, nesterov, accumulate, lr,
    momentum, weight_decay, beta1, beta2, eps, gamma, min_lr, warmup_factor,
    clip_norm, step_size, total_steps, warmup, step, blocks, m, v: the
    moment blocks (float32 (P)) or None); step, epoch, data_pos (samples of
    the epoch consumed), seed; rng: OrderedDict name -> 4 u64 words; bands
    (1-based), mean and std (float64 (C) or None), dtype ("u8".. or None);
    pool_uuid ("" for none); loss_scale, scale_good, scale_skipped;
    std_from ("unknown" before version 5, "pool": the pool's statistics over
    every tile, "sources": the sums of std_sources, the pool source indices
    of the training keys); crs (WKT, "" unknown) and res (pixel width and
    height, 0 unknown) of the training data; class_names: class k's name
    for k = 0.. (version 6: the training pool's class_names; [] when older
    or not named); ranks:
    None, or a dict of the RANK chunk (nranks, sync, k, rho, what,
    optim_steps, data (nranks, stride) float32); sums: None, or a dict of
    the SUMS chunk (version 7: epoch_loss, epoch_steps, log_loss,
    log_steps, the loss sums metrics.jsonl's open epoch and step lines
    still owe); live: None, or the LIVE chunk (version 7: a run with
    [net] ema= checkpoints the moving average of its weights in params and
    the trained weights, float32 (P) in params' order, here; one with
    --sync admm the consensus estimate mean(w + u) in params and ADMM's z
    here); initial: True for an initial-weights checkpoint (version
    7, META's kind 1: python3 -m cdpool import-torch's), whose PARM and
    BUFS may hold only part of the net's tensors; norm: None, or the NORM
    chunk (version 7: the input normalization initial weights expect, a
    dict of kind "none"|"imagenet"|"given", scale (band values are divided
    by it, 0: by the largest value of the pool's data type), mean and std
    (float64 (C)), bands (names or indices as text, [] or C of them));
    sources: the FROM chunk (version 7: where the initial weights came from,
    [] for none), a list of dicts kind "checkpoint"|"state dict", name,
    sha256 (64 hex digits), the file the weights were read from first.
    std_from "init" (version 7): mean and std are the initial weights' own
    normalization in band values (cdp-train --init-norm).
    task: None, or the TASK chunk (version 7: a net trained on value labels),
    a dict of task "regression", target_mean and target_std (float64 (T),
    the standardization of its T outputs: a prediction is output * std +
    mean).
    plan: None, or the PLAN chunk (version 7: what a resume checks), a dict
    of total (the run's last step), keys_uuid, keys_seed, keys_count and
    keys_crc32 (the training pointer file's header).
    best: None, or the BEST chunk (version 8: the validation that kept a
    cdp-train --keep-best best.cdpt), a dict of metric ("miou", "loss",
    "acc", "f1", "map", "rmse" or "r2", the --keep-best word), value (the
    metric's value there) and step (that validation's step).
    run: None, or the RUN chunk (version 8: what a resume takes or checks
    that no other chunk holds; None in older files, which resume as they
    did), a dict of pad_last (bool: the run had --pad-last), nan_policy
    ("stop" or "skip"), nan_row (the non-finite steps in a row up to
    step, which --nan-policy skip ends the job at 100 of), nan_skipped
    (non-finite steps skipped in the run so far), threads (its CPU
    compute threads, 0 on a GPU), kernels (their name, "avx2", "cuda",
    ...), and val_uuid, val_seed, val_count and val_crc32 (the --val-keys
    pointer file's header; "", 0, 0, 0 without one).
    """

    def param_block(self):
        """Every parameter in one float32 vector (the engine's block)."""
        return np.concatenate([t.ravel() for t in self.params.values()]) if self.params \
            else np.zeros(0, np.float32)

    def standardize(self, x):
        """(x - mean) * (1 / std) per channel of x (..., C, H, W) in float32,
        as cdp-predict's pr_standardize computes it: a constant band (std 0)
        only centred (1 / std taken as 1), a value that is not finite as a
        float32 (NaN, inf) 0. Without stats in the checkpoint only the
        non-finite values change (mean 0, std 1). x of another number of
        channels than the checkpoint's bands is a ValueError. Initial weights without a
        standardization are refused as cdp-predict refuses them
        (check_standardization)."""
        self.check_standardization()
        x = np.array(x, dtype=np.float32)
        want = len(self.mean) if self.mean is not None else len(self.bands or ()) or None
        if x.ndim < 3 or (want is not None and x.shape[-3] != want):
            raise ValueError("standardize: x is %s, (..., C, H, W) with C = %s (the "
                             "checkpoint's bands) expected" % (
                                 "x".join(map(str, x.shape)) or "a scalar", want or "C"))
        if self.mean is not None:
            m = self.mean.astype(np.float32)[:, None, None]
            inv = np.array([np.float32(1.0 / s) if s > 0 else np.float32(1) for s in self.std],
                           dtype=np.float32)[:, None, None]
            with np.errstate(invalid="ignore", over="ignore"):
                y = (x - m) * inv
        else:
            y = x.copy()
        y[~np.isfinite(x)] = 0
        return y

    def check_standardization(self):
        """ValueError with cdp-predict's message for initial weights without a
        standardization (predict_setup.c): their NORM alone does not say what
        the band values are divided by (--input-scale dtype is the training
        pool's type), and cdp-predict applies no NORM, so neither does Python."""
        if self.initial and self.mean is None:
            raise ValueError("'%s' holds initial weights (python3 -m cdpool import-torch) "
                             "without a standardization: train from them with cdp-train "
                             "--init" % getattr(self, "subject", "checkpoint"))

    def __repr__(self):
        return "<cdpool.Checkpoint v%d step %d epoch %d, %d params, input %s>" % (
            self.version, self.step, self.epoch, len(self.params), "x".join(map(str, self.in_shape)))


def _meta(r, ck):
    c, h, w, z = r.take("<4I")
    if z != 0 or c > 1 << 20 or h > 1 << 20 or w > 1 << 20:
        raise _Bad("EFORMAT")
    ck.in_shape = (c, h, w)
    ck.step, ck.epoch, ck.data_pos, ck.seed = r.take("<4Q")
    r.need(32)
    u = bytes(r.b[r.p:r.p + 32])
    r.p += 32
    if u[0] == 0:
        if u != bytes(32):
            raise _Bad("EFORMAT")
        ck.pool_uuid = ""
    else:
        ck.pool_uuid = u.decode("latin-1")
    ck.loss_scale, ck.scale_good, ck.scale_skipped = 0.0, 0, 0
    if r.version >= 3:
        ck.loss_scale, ck.scale_good, ck.scale_skipped = r.take("<dQQ")
        if not 0 <= ck.loss_scale <= 1e300:
            raise _Bad("EFORMAT")
    # the global batch (version 4): per rank, ranks, accumulated; 0 0 0 unknown
    ck.batch, ck.batch_ranks, ck.batch_accumulate = 0, 0, 0
    ck.initial = False
    if r.version >= 4:
        b, j, a, kind = r.take("<IIII")
        # the kind (version 7): 0 a run's checkpoint, 1 initial weights
        if kind > (KIND_INITIAL if r.version >= 7 else 0) or max(b, j, a) > 0x7FFFFFFF:
            raise _Bad("EFORMAT")
        ck.batch, ck.batch_ranks, ck.batch_accumulate = b, j, a
        ck.initial = kind == KIND_INITIAL


def _cfg(r, ck):
    ck.cfg_text = r.string(CFG_MAX).decode("utf-8", "surrogateescape")
    n = r.take("<I")
    if n > 256 or n > (r.end - r.p) // 5:
        raise _Bad("EFORMAT")
    ck.overrides = [r.string(4096).decode("utf-8", "surrogateescape") for _ in range(n)]


def _tensors(r):
    n, z, total = r.take("<IIQ")
    if z != 0 or n > (r.end - r.p) // 13:
        raise _Bad("EFORMAT")
    out, s = OrderedDict(), 0
    for _ in range(n):
        name = r.string(NAME_MAX)
        nd = r.take("<I")
        if not 1 <= nd <= 4:
            raise _Bad("EFORMAT")
        dims = [r.take("<I") for _ in range(nd)]
        if min(dims) < 1 or max(dims) > 0x7FFFFFFF:
            raise _Bad("EFORMAT")
        numel = math.prod(dims)
        if not _NAME.fullmatch(name):
            raise _Bad("EFORMAT")        # cdp_ckpt_check: printable, no space
        out[name.decode()] = r.floats(numel, dims)
        s += numel
    if s != total:
        raise _Bad("EFORMAT")
    return out, s


# OPTM's ten floats in the file's order, with the C reader's names
_OPTIM_FLOATS = (("lr", "lr"), ("momentum", "momentum"), ("weight_decay", "weight decay"),
                 ("beta1", "beta1"), ("beta2", "beta2"), ("eps", "eps"), ("gamma", "gamma"),
                 ("min_lr", "minimum lr"), ("warmup_factor", "warm-up factor"),
                 ("clip_norm", "clipping norm"))


def _optim(r, ck):
    typ, policy, nesterov, accumulate = r.take("<4I")
    f = r.take("<10f")
    step_size, total_steps, warmup, ostep = r.take("<4q")
    nb, z, n = r.take("<IIQ")
    if z != 0:
        raise _Bad("EFORMAT")
    if typ > 2 or policy > 2 or nesterov > 1 or accumulate > 0x7FFFFFFF:
        raise _Bad("EFORMAT")
    o = dict(zip(("lr", "momentum", "weight_decay", "beta1", "beta2", "eps", "gamma", "min_lr",
                  "warmup_factor", "clip_norm"), f))
    o.update(type=OPTIMIZERS[typ], policy=POLICIES[policy], nesterov=nesterov,
             accumulate=accumulate, step_size=step_size, total_steps=total_steps,
             warmup=warmup, step=ostep, m=None, v=None)
    want = 0 if typ == 0 else 2 if typ == 2 else (1 if o["momentum"] != 0 else 0)
    if nb != want or (nb == 0 and n != 0):
        raise _Bad("EFORMAT")
    o["blocks"], o["n"] = nb, n
    if nb:
        r.need(4 * n * nb)
        if nb == 2:
            o["m"] = r.floats(n)
        o["v"] = r.floats(n)
    ck.optim = o


def _rng(r, ck):
    n = r.take("<I")
    if n > 1024 or n > (r.end - r.p) // 37:
        raise _Bad("EFORMAT")
    ck.rng = OrderedDict()
    for _ in range(n):
        name = r.string(NAME_MAX)
        s = r.take("<4Q")
        if not _NAME.fullmatch(name) or not any(s) or name.decode() in ck.rng:
            raise _Bad("EFORMAT")
        ck.rng[name.decode()] = s


def _data(r, ck):
    n, ns = r.take("<II")
    if n > 65535 or (ns != 0 and ns != n):
        raise _Bad("EFORMAT")
    r.need(4 * n + 16 * ns)
    ck.bands = list(r.tuple("<%dI" % n))
    ck.mean = np.array(r.tuple("<%dd" % ns), dtype=np.float64) if ns else None
    ck.std = np.array(r.tuple("<%dd" % ns), dtype=np.float64) if ns else None
    ck.dtype = None
    if r.version >= 2:
        dt = r.take("<I")
        if dt != 0 and dt not in DTYPE_NAMES:
            raise _Bad("EFORMAT")
        ck.dtype = DTYPE_NAMES.get(dt)
    ck.std_from, ck.std_sources, ck.crs, ck.res = "unknown", [], "", (0.0, 0.0)
    if r.version >= 5:
        frm, ns = r.take("<II")
        if frm not in STD_FROM or ns > MAX_SOURCES:
            raise _Bad("EFORMAT")
        r.need(4 * ns)
        ck.std_from, ck.std_sources = STD_FROM[frm], list(r.tuple("<%dI" % ns))
        n = r.take("<I")
        if n > CRS_MAX:
            raise _Bad("EFORMAT")
        r.need(n)
        crs = bytes(r.b[r.p:r.p + n])
        if b"\0" in crs:
            raise _Bad("EFORMAT")
        r.p += n
        ck.crs = crs.decode("utf-8", "replace")
        ck.res = r.take("<2d")
    ck.class_names = []
    if r.version >= 6:
        n = r.take("<I")
        # a name takes at least 5 bytes
        if n > MAX_CLASSES or n > (r.end - r.p) // 5:
            raise _Bad("EFORMAT")
        ck.class_names = [r.string(CLASS_NAME_MAX) for _ in range(n)]   # _check decodes


def _class_name(k, raw):
    """cdp_ckpt_class_name_ok: UTF-8 without C0, DEL or C1 controls."""
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Bad("EFORMAT", "class %d's name is not UTF-8 at byte %d" % (k, e.start + 1))
    for i, ch in enumerate(s):
        if ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0:
            raise _Bad("EFORMAT", "class %d's name has a control character at byte %d"
                       % (k, len(s[:i].encode()) + 1))
    return s


def _sums(r, ck):
    """SUMS (version 7): the running sums of metrics.jsonl's means."""
    el, es, ll, ls = r.tuple("<dQdQ")
    if not (math.isfinite(el) and math.isfinite(ll)):
        raise _Bad("EFORMAT")
    ck.sums = {"epoch_loss": el, "epoch_steps": es, "log_loss": ll, "log_steps": ls}


def _plan(r, ck):
    """PLAN (version 7): the run's last step and its training key list."""
    total, = r.tuple("<Q")
    r.need(32)
    raw = bytes(r.b[r.p:r.p + 32])
    r.p += 32
    uuid = "" if raw == bytes(32) else raw.decode("ascii", "replace")
    seed, count, crc, z = r.tuple("<QQII")
    if z != 0 or count < 1 or total < 1 or not re.fullmatch(r"([0-9a-f]{32})?", uuid):
        raise _Bad("EFORMAT")
    ck.plan = {"total": total, "keys_uuid": uuid, "keys_seed": seed, "keys_count": count,
               "keys_crc32": crc}


def _live(r, ck):
    """LIVE (version 7): the trained weights when PARM holds their average
    (ema=), or ADMM's z when PARM holds the consensus estimate."""
    n, = r.tuple("<Q")
    if n == 0 or n > (r.end - r.p) // 4:
        raise _Bad("EFORMAT")
    ck.live = r.floats(n)


def _norm(r, ck):
    """NORM (version 7): the input normalization initial weights expect."""
    kind, n, scale = r.take("<IId")
    if kind not in NORMS or n != ck.in_shape[0] or n < 1:
        raise _Bad("EFORMAT")
    r.need(16 * n)
    mean = np.array(r.tuple("<%dd" % n), dtype=np.float64)
    std = np.array(r.tuple("<%dd" % n), dtype=np.float64)
    nb = r.take("<I")
    if nb not in (0, n) or nb > (r.end - r.p) // 5:
        raise _Bad("EFORMAT")
    bands = [r.string(NORM_BAND_MAX) for _ in range(nb)]
    ck.norm = dict(kind=NORMS[kind], scale=scale, mean=mean, std=std, bands=bands)


def _task(r, ck):
    """TASK (version 7): the task and a regression's target standardization."""
    task, n = r.take("<II")
    if task not in TASKS or not 1 <= n <= MAX_TARGETS:
        raise _Bad("EFORMAT")
    r.need(16 * n)
    mean = np.array(r.tuple("<%dd" % n), dtype=np.float64)
    std = np.array(r.tuple("<%dd" % n), dtype=np.float64)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
        raise _Bad("EFORMAT")
    ck.task = dict(task=TASKS[task], target_mean=mean, target_std=std)


def _from(r, ck):
    """FROM (version 7): where the initial weights came from."""
    n = r.take("<I")
    if not 1 <= n <= FROM_MAX or n > (r.end - r.p) // 45:
        raise _Bad("EFORMAT")
    out = []
    for _ in range(n):
        kind, z = r.take("<II")
        if kind not in FROM_KINDS or z != 0:
            raise _Bad("EFORMAT")
        name = r.string(FROM_NAME_MAX).decode("utf-8", "surrogateescape")
        r.need(32)
        sha = bytes(r.b[r.p:r.p + 32]).hex()
        r.p += 32
        out.append(dict(kind=FROM_KINDS[kind], name=name, sha256=sha))
    ck.sources = out


def _best(r, ck):
    """BEST (version 8): the validation that kept a --keep-best best.cdpt;
    the values are judged by _check, as cdp_ckpt_check judges them."""
    metric, z, value, step = r.take("<IIdQ")
    if z != 0 or metric > 0x7FFFFFFF:
        raise _Bad("EFORMAT")
    ck.best = dict(metric=metric, value=value, step=step)


def _run(r, ck):
    """RUN (version 8): layout 1's fields, the values judged by _check; a
    later layout's additions after them are skipped."""
    layout, flags, policy, threads, row, skipped = r.tuple("<IIIIQQ")
    r.need(48)
    kern, uuid = bytes(r.b[r.p:r.p + 16]), bytes(r.b[r.p + 16:r.p + 48])
    r.p += 48
    seed, count, crc, z = r.tuple("<QQII")
    name = kern[:15].split(b"\0")[0]
    if layout < 1 or (layout == RUN_LAYOUT and flags & ~RUN_PAD_LAST) or z != 0 \
            or any(kern[len(name):]) or policy > 0x7FFFFFFF or threads > 0x7FFFFFFF \
            or (uuid[0] == 0 and any(uuid)):
        raise _Bad("EFORMAT")
    if layout > RUN_LAYOUT:
        r.p = r.end
    ck.run = dict(pad_last=bool(flags & RUN_PAD_LAST), nan_policy=policy, nan_row=row,
                  nan_skipped=skipped, threads=threads, kernels=name,
                  val_uuid=uuid.decode("ascii", "replace") if uuid[0] else "",
                  val_seed=seed, val_count=count, val_crc32=crc)


def _tag_text(t):
    """A chunk's tag for a message, as checkpoint_read.c's tag_text writes it."""
    return "".join(chr(c) if 0x20 <= c <= 0x7e and c not in (0x5c, 0x27) else "\\x%02x" % c
                   for c in t)


def _chunk_flags(tag, flags, k, v):
    """checkpoint_read.c's chunk_flags: the flags of a chunk of known index
    k (-1: unknown) in a file of version v; an unknown chunk that passes is
    skippable."""
    t = _tag_text(tag)
    if v < 8 and flags:
        raise _Bad("EFORMAT", "chunk '%s' has flags 0x%x (0 in format version %d)" % (t, flags, v))
    if v < 8 and k < 0:
        raise _Bad("EFORMAT", "chunk '%s' is not one of format version %d" % (t, v))
    if flags & ~CHUNK_SKIP:
        raise _Bad("EVERSION", "chunk '%s' has flags 0x%x that this build does not know: written "
                   "by a newer cdpool (format version %d)" % (t, flags, v))
    if k < 0 and not flags & CHUNK_SKIP:
        raise _Bad("EVERSION", "chunk '%s' is not known to this build: written by a newer cdpool "
                   "(format version %d)" % (t, v))
    if 0 <= k < FIXED and flags:
        raise _Bad("EFORMAT", "chunk '%s' is marked skippable, which none of the seven fixed "
                   "chunks may be" % t)
    if v >= 8 and k >= 0 and flags != FLAGS[k]:
        raise _Bad("EFORMAT", ("chunk '%s' is marked skippable, which it never is" if flags else
                               "chunk '%s' is not marked skippable, which it always is") % t)


def _rank(r, ck):
    """RANK (version 3): its own version first, then its own CRC."""
    b, p, n = r.b, r.p, r.end - r.p
    if n < 48 + 4:
        raise _Bad("EFORMAT")
    v = struct.unpack_from("<I", b, p)[0]
    if v != 1:
        raise _Bad("EFORMAT" if v == 0 else "EVERSION")
    if zlib.crc32(memoryview(b)[p:p + n - 4]) != struct.unpack_from("<I", b, p + n - 4)[0]:
        raise _Bad("ECRC")
    j, sync, k, rho, what, nm, P, B = struct.unpack_from("<IIIdIIQQ", b, p + 4)
    ptotal = sum(t.size for t in ck.params.values())
    btotal = sum(t.size for t in ck.buffers.values())
    moments = ck.optim["blocks"] if ck.optim["type"] != "none" else 0
    if (not 1 <= j <= 1 << 20 or sync > 2 or not 1 <= k <= 0x7FFFFFFF or not math.isfinite(rho)
            or rho < 0 or not 1 <= what <= 15 or (what & 4 and sync != 2)
            or (what & 2 and moments == 0) or (what & 8 and btotal == 0)
            or (what & 5 and ptotal == 0)
            or nm != (moments if what & 2 else 0) or P != ptotal or B != btotal):
        raise _Bad("EFORMAT")
    stride = ((1 if what & 1 else 0) + (nm if what & 2 else 0) + (1 if what & 4 else 0)) * P \
        + (B if what & 8 else 0)
    size = 48 + j * (16 + 4 * stride) + 4
    if size != n:
        raise _Bad("ETRUNC" if size > n else "EFORMAT")
    steps, data = [], np.empty((j, stride), np.float32)
    q = p + 48
    for i in range(j):
        idx, z, st = struct.unpack_from("<IIq", b, q)
        if idx != i or z != 0 or st < 0:
            raise _Bad("EFORMAT")
        steps.append(st)
        data[i] = np.frombuffer(b, "<f4", stride, q + 16)
        q += 16 + 4 * stride
    r.p = r.end
    ck.ranks = dict(nranks=j, sync=SYNCS[sync], k=k, rho=rho, what=what, moments=nm,
                    optim_steps=steps, data=data)


def _check(ck):
    """cdp_ckpt_check's value rules that the parsers above leave, each with
    the reason the C reader gives (checkpoint.c's check_why)."""
    c, h, w = ck.in_shape
    if min(ck.in_shape) < 1:
        raise _Bad("EFORMAT", "META's input shape %dx%dx%d (channels, height, width: each 1 "
                   "to 2^20)" % (c, h, w))
    if not ck.cfg_text:
        raise _Bad("EFORMAT", "the model cfg text (CFG) is empty")
    o = ck.optim
    ptotal = sum(t.size for t in ck.params.values())
    if o["type"] != "none":
        # every float finite, named before the ranges (cdp_ckpt_validate)
        for key, name in _OPTIM_FLOATS:
            if not math.isfinite(o[key]):
                raise _Bad("EFORMAT", "the optimizer's settings (OPTM): %s is %g (every setting "
                           "finite)" % (name, o[key]))
        ok = o["lr"] >= 0 and o["weight_decay"] >= 0
        if o["type"] == "sgd":
            ok = ok and 0 <= o["momentum"] < 1 and not (o["nesterov"] and o["momentum"] == 0)
        else:
            ok = ok and 0 <= o["beta1"] < 1 and 0 <= o["beta2"] < 1 and o["eps"] > 0
        if o["policy"] == "step":
            ok = ok and o["step_size"] >= 1 and o["gamma"] >= 0
        if o["policy"] == "cosine":
            ok = ok and o["total_steps"] > o["warmup"] and o["min_lr"] >= 0
        ok = ok and o["warmup"] >= 0 and 0 <= o["warmup_factor"] <= 1
        ok = ok and o["clip_norm"] >= 0 and o["accumulate"] >= 1
        if not ok:
            raise _Bad("EFORMAT")
        # at most one update a step: more would resume AdamW's bias
        # correction elsewhere
        if not 0 <= o["step"] <= ck.step:
            raise _Bad("EFORMAT", "the optimizer's steps taken (OPTM) are %d, 0 to META's step "
                       "%d expected" % (o["step"], ck.step))
        if o["blocks"] >= 1 and o["n"] != ptotal:
            raise _Bad("EFORMAT", "the optimizer's state (OPTM) holds %d values a block for %d "
                       "parameters" % (o["n"], ptotal))
    if ck.bands and len(ck.bands) != c:
        raise _Bad("EFORMAT", "DATA names %d bands for %d input channels" % (len(ck.bands), c))
    if ck.mean is not None and not ck.bands:
        raise _Bad("EFORMAT", "DATA's standardization has means and deviations of other bands "
                   "than it names")
    for i, b in enumerate(ck.bands):
        if b < 1 or b > 0x7FFFFFFF:
            raise _Bad("EFORMAT", "DATA's band %d is numbered %d (from 1)" % (i + 1, b))
    if ck.mean is not None:
        for b, m, sd in zip(ck.bands, ck.mean, ck.std):
            if not (math.isfinite(m) and math.isfinite(sd) and sd >= 0):
                raise _Bad("EFORMAT", "band %d's standardization is mean %g, standard deviation "
                           "%g (finite, and a deviation not negative, expected)" % (b, m, sd))
    src = ck.std_sources
    if (ck.std_from == "sources") != bool(src) or (ck.std_from != "unknown" and ck.mean is None):
        code = {v: k for k, v in STD_FROM.items()}.get(ck.std_from, -1)
        raise _Bad("EFORMAT", "DATA's origin of the standardization (%d, with %d sources) does "
                   "not fit it" % (code, len(src)))
    if any(b <= a for a, b in zip(src, src[1:])):
        raise _Bad("EFORMAT", "DATA's standardization sources are not in increasing order")
    if not all(math.isfinite(x) and x >= 0 for x in ck.res):
        raise _Bad("EFORMAT", "DATA's pixel size %g x %g (finite, not negative)" % tuple(ck.res))
    if ck.sums and max(ck.sums["epoch_steps"], ck.sums["log_steps"]) > ck.step:
        raise _Bad("EFORMAT", "the running sums (SUMS) are not finite, or count more steps than "
                   "the %d taken" % ck.step)
    if ck.plan and ck.plan["total"] < ck.step:
        raise _Bad("EFORMAT", "the run's plan (PLAN): last step %d (at least the %d taken), %d "
                   "keys, uuid '%s'" % (ck.plan["total"], ck.step, ck.plan["keys_count"],
                                        ck.plan["keys_uuid"]))
    b = ck.best
    if b is not None and not (b["metric"] in BEST_METRICS and math.isfinite(b["value"])
                              and b["step"] <= ck.step):
        raise _Bad("EFORMAT", "the best validation (BEST): metric %d, value %g at step %d (a "
                   "known metric, a finite value, at most the %d steps taken)"
                   % (b["metric"], b["value"], b["step"], ck.step))
    if b is not None:
        b["metric"] = BEST_METRICS[b["metric"]]
    u = ck.run
    if u is not None:
        if u["nan_policy"] not in NAN_POLICIES:
            raise _Bad("EFORMAT", "the run's settings (RUN): --pad-last %d, --nan-policy %d (0 or "
                       "1, and 1 stop or 2 skip)" % (u["pad_last"], u["nan_policy"]))
        if not (u["nan_row"] <= u["nan_skipped"] <= ck.step
                and (u["nan_row"] == 0 or u["nan_policy"] == 2)):
            raise _Bad("EFORMAT", "the run's non-finite steps (RUN): %d in a row, %d skipped (in "
                       "a row at most those skipped, at most the %d steps taken, none in a row "
                       "under --nan-policy stop)" % (u["nan_row"], u["nan_skipped"], ck.step))
        if not (u["threads"] <= RUN_THREADS_MAX and re.fullmatch(rb"[\x21-\x7e]{1,15}",
                                                                 u["kernels"])):
            raise _Bad("EFORMAT", "the run's compute (RUN): %d threads (0 to %d), kernels '%s' (1 "
                       "to 15 printable characters)" % (u["threads"], RUN_THREADS_MAX,
                                                        u["kernels"].decode("latin-1")))
        if not (not u["val_uuid"] and not u["val_seed"] and not u["val_crc32"]
                if u["val_count"] == 0 else re.fullmatch(r"[0-9a-f]{32}", u["val_uuid"])):
            raise _Bad("EFORMAT", "the run's validation list (RUN): %d keys, uuid '%s' (none: 0 "
                       "keys, no uuid, seed and crc32 0; else a uuid of 32 lowercase hex digits)"
                       % (u["val_count"], u["val_uuid"]))
        u["nan_policy"] = NAN_POLICIES[u["nan_policy"]]
        u["kernels"] = u["kernels"].decode("ascii")
    if ck.live is not None and ck.live.size != ptotal:
        raise _Bad("EFORMAT", "the live parameters (LIVE) hold %d values for %d parameters"
                   % (ck.live.size, ptotal))
    if ck.norm is not None:
        nm = ck.norm
        if not (math.isfinite(nm["scale"]) and nm["scale"] >= 0
                and np.all(np.isfinite(nm["mean"])) and np.all(np.isfinite(nm["std"]))
                and np.all(nm["std"] > 0)) or not all(BAND_NAME.fullmatch(b) for b in nm["bands"]):
            raise _Bad("EFORMAT", "the input normalization (NORM), the initial weights' origin "
                       "(FROM) or the task (TASK) is not valid")
        nm["bands"] = [b.decode() for b in nm["bands"]]
    # initial weights: no optimizer, progress, RNG state, per-rank state or sums
    if ck.initial and (o["type"] != "none" or ck.step or ck.epoch or ck.data_pos or ck.rng
                       or ck.ranks or ck.sums or ck.plan or ck.live is not None
                       or ck.best is not None or ck.run is not None):
        raise _Bad("EFORMAT", "initial weights (META's kind) with the state of a run")
    if (ck.batch | ck.batch_ranks | ck.batch_accumulate) != 0 and not (
            ck.batch >= 1 and 1 <= ck.batch_ranks <= MAX_RANKS and ck.batch_accumulate >= 1):
        raise _Bad("EFORMAT", "META's global batch %d x %d ranks x %d accumulated"
                   % (ck.batch, ck.batch_ranks, ck.batch_accumulate))
    if ck.pool_uuid and not re.fullmatch(r"[0-9a-f]{32}", ck.pool_uuid):
        raise _Bad("EFORMAT", "META's pool uuid is not 32 lowercase hex digits")
    ck.class_names = [_class_name(k, raw) for k, raw in enumerate(ck.class_names)]


def decode_checkpoint(buf, subject="checkpoint", finite=True):
    """A checkpoint from its bytes; see load_checkpoint()."""
    b = bytearray(buf)
    n = len(b)
    try:
        if b[:min(n, 8)] != MAGIC[:min(n, 8)]:
            raise _Bad("EMAGIC")
        if n < 12:
            raise _Bad("ETRUNC")
        version = struct.unpack_from("<I", b, 8)[0]
        if not VERSION_MIN <= version <= VERSION:
            raise _Bad("EVERSION", "format version %d; this build reads %d to %d%s" % (
                version, VERSION_MIN, VERSION,
                ": written by a newer cdpool" if version > VERSION else ""))
        if n < HDR:
            raise _Bad("ETRUNC")
        fs = struct.unpack_from("<Q", b, 16)[0]
        # by how much the file and its size field differ (cdp_ckpt_load_why)
        if fs < HDR + 4:
            raise _Bad("EFORMAT", "its size field says %d bytes, fewer than a header and a CRC"
                       % fs)
        if fs > n:
            raise _Bad("ETRUNC", "truncated: %d bytes of the %d its size field gives" % (n, fs))
        if fs < n:
            raise _Bad("EFORMAT", "%d extra bytes after the %d its size field gives" % (n - fs, fs))
        if zlib.crc32(memoryview(b)[:n - 4]) != struct.unpack_from("<I", b, n - 4)[0]:
            raise _Bad("ECRC")
        # the fixed chunks, then the optional ones in TAGS's order, and
        # from version 8 unknown skippable ones anywhere among those (a
        # chunk header takes 16 bytes)
        nchunks = struct.unpack_from("<I", b, 12)[0]
        if nchunks < FIXED or (version < 8 and nchunks > len(TAGS)) \
                or nchunks > (n - HDR - 4) // 16:
            raise _Bad("EFORMAT")
        ck = Checkpoint()
        ck.subject = subject
        ck.version, ck.ranks, ck.sums, ck.live = version, None, None, None
        ck.norm, ck.sources, ck.task, ck.plan, ck.best = None, [], None, None, None
        ck.run = None
        top = _Rd(b, HDR, n - 4, version)
        i = 0                      # the next known chunk's least index
        for c in range(nchunks):
            top.need(16)
            tag, flags, plen = struct.unpack_from("<4sIQ", b, top.p)
            k = TAGS.index(tag) if tag in TAGS else -1
            if c < FIXED and k != c:
                raise _Bad("EFORMAT")
            _chunk_flags(tag, flags, k, version)
            top.p += 16
            if plen > top.end - top.p:
                raise _Bad("EFORMAT")
            if k < 0:              # unknown and skippable
                top.p += plen
                continue
            if k < i or version < SINCE[k]:
                raise _Bad("EFORMAT")
            i = k + 1
            sub = _Rd(b, top.p, top.p + plen, version)
            try:
                if k == 2:
                    ck.params, _ = _tensors(sub)
                elif k == 3:
                    ck.buffers, _ = _tensors(sub)
                else:
                    (_meta, _cfg, None, None, _optim, _rng, _data, _rank, _sums, _live, _norm,
                     _from, _task, _plan, _best, _run)[k](sub, ck)
                if sub.p != sub.end:
                    raise _Bad("EFORMAT")
            except _Bad as e:
                # a fault without a reason of its own names its chunk, as
                # cdp_ckpt_read_why does
                if e.message is None:
                    e.message = "chunk '%s': %s" % (tag.decode("latin-1"), PHRASES[e.code])
                raise
            top.p += plen
        if top.p != top.end:
            raise _Bad("EFORMAT")
        _check(ck)
    except _Bad as e:
        raise CdpError(e.code, subject, message=e.message) from None
    if finite:
        # as cdp_ckpt_validate: a NaN weight under a valid CRC is refused
        named = [("parameter tensor '%s'" % n, t) for n, t in ck.params.items()]
        named += [("buffer tensor '%s'" % n, t) for n, t in ck.buffers.items()]
        m, v = ck.optim.get("m"), ck.optim.get("v")
        if m is not None:
            named.append(("the optimizer's first moment", m))
        if v is not None:
            named.append(("the optimizer's second moment" if m is not None else
                          "the optimizer's momentum", v))
        if ck.ranks is not None:
            named += [("rank %d's state" % r, row) for r, row in enumerate(ck.ranks["data"])]
        if ck.live is not None:
            named.append(("the chunk of live parameters (LIVE)", ck.live))
        for name, t in named:
            t = np.asarray(t, dtype=np.float32).ravel()
            bad = np.flatnonzero(~np.isfinite(t))
            if bad.size:
                x = float(t[bad[0]])
                raise CdpError("EFORMAT", subject, message="%s holds %s at element %d"
                               % (name, "NaN" if x != x else "+Inf" if x > 0 else "-Inf", bad[0]))
    return ck


def run_checkpoint(path):
    """RUN/checkpoint.cdpt for a cdp-train run folder RUN, as cdp-predict
    takes one (a pool's folder holds data.mdb); any other path as it is."""
    ck = os.path.join(path, "checkpoint.cdpt")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "data.mdb")) and \
            os.path.isfile(ck):
        return ck
    return path


def load_checkpoint(path, finite=True):
    """Reads and checks a checkpoint file (cdp_ckpt_read), or raises
    CdpError (EMAGIC, EVERSION, ETRUNC, ECRC, EFORMAT) naming the file.
    Like the C reader it refuses a NaN or infinite value (a run that
    diverged); finite=False reads such a file for inspection. A cdp-train
    run folder is its checkpoint.cdpt, as cdp-predict takes it."""
    path = run_checkpoint(os.fspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    with open(path, "rb") as f:
        data = f.read()
    return decode_checkpoint(data, path, finite)


# ---- the writer (version 8, every chunk's flags 0), for initial-weights checkpoints ----------
def _str(b):
    return struct.pack("<I", len(b)) + b


def _table(tensors):
    out = [b""]
    total = 0
    for name, t in tensors.items():
        t = np.ascontiguousarray(t, dtype="<f4")
        if not _NAME.fullmatch(name.encode()) or not 1 <= t.ndim <= 4 or t.size == 0:
            raise ValueError("tensor %r: a name of 1 to 95 printable characters and 1 to 4 "
                             "dimensions expected" % name)
        out.append(_str(name.encode()) + struct.pack("<I", t.ndim)
                   + struct.pack("<%dI" % t.ndim, *t.shape) + t.tobytes())
        total += t.size
    out[0] = struct.pack("<IIQ", len(tensors), 0, total)
    return b"".join(out)


def encode_norm(kind, scale, mean, std, bands):
    """NORM's payload: kind "none"|"imagenet"|"given", scale (>= 0), mean and
    std (C each, std > 0), bands ([] or C names or indices as text)."""
    code = {v: k for k, v in NORMS.items()}[kind]
    n = len(mean)
    if (len(std) != n or n < 1 or len(bands) not in (0, n) or not math.isfinite(scale)
            or scale < 0 or not all(math.isfinite(x) for x in list(mean) + list(std))
            or not all(x > 0 for x in std)
            or not all(BAND_NAME.fullmatch(b.encode()) for b in bands)):
        raise ValueError("an input normalization of C finite means, C positive deviations "
                         "and no or C band names of printable characters without space or "
                         "comma expected")
    return struct.pack("<IId", code, n, scale) + struct.pack("<%dd" % n, *mean) \
        + struct.pack("<%dd" % n, *std) + struct.pack("<I", len(bands)) \
        + b"".join(_str(b.encode()) for b in bands)


def encode_from(sources):
    """FROM's payload: sources, a list of (kind "checkpoint"|"state dict",
    file name, SHA-256 as 64 hex digits), the file read first."""
    code = {v: k for k, v in FROM_KINDS.items()}
    if not 1 <= len(sources) <= FROM_MAX:
        raise ValueError("1 to %d sources expected" % FROM_MAX)
    out = [struct.pack("<I", len(sources))]
    for kind, name, sha in sources:
        raw = name.encode("utf-8", "surrogateescape")
        if not 1 <= len(raw) <= FROM_NAME_MAX or b"\0" in raw or len(bytes.fromhex(sha)) != 32:
            raise ValueError("source %r: a name of 1 to %d bytes and a SHA-256 expected"
                             % (name, FROM_NAME_MAX))
        out.append(struct.pack("<II", code[kind], 0) + _str(raw) + bytes.fromhex(sha))
    return b"".join(out)


def encode_initial(cfg_text, overrides, in_shape, params, buffers, norm=None, sources=()):
    """The bytes of an initial-weights checkpoint (cdp-checkpoint(5), version
    8, META's kind 1): the model (cfg text, overrides "key=value", input
    shape (C, H, W)), the tensors params and buffers (name -> array, in the
    net's block order; a subset of the net's), no optimizer (type none), no
    progress, RNG streams, bands or standardization; norm: None, or a dict
    of encode_norm's arguments (the NORM chunk: the input normalization the
    weights expect, C means and deviations); sources: encode_from's list
    (the FROM chunk: the state dict imported), or empty."""
    c, h, w = in_shape
    meta = struct.pack("<4I4Q", c, h, w, 0, 0, 0, 0, 0) + bytes(32) \
        + struct.pack("<dQQ", 0.0, 0, 0) + struct.pack("<4I", 0, 0, 0, KIND_INITIAL)
    cfg = _str(cfg_text.encode("utf-8", "surrogateescape")) + struct.pack("<I", len(overrides)) \
        + b"".join(_str(o.encode("utf-8", "surrogateescape")) for o in overrides)
    optm = struct.pack("<4I", 0, 0, 0, 1) + struct.pack("<10f", *([0.0] * 10)) \
        + struct.pack("<4q", 0, 0, 0, 0) + struct.pack("<IIQ", 0, 0, 0)
    rng = struct.pack("<I", 0)
    # no bands or statistics, data type unknown, origin unknown, no sources,
    # no CRS, pixel size unknown, no class names
    data = struct.pack("<III", 0, 0, 0) + struct.pack("<III", 0, 0, 0) \
        + struct.pack("<2d", 0.0, 0.0) + struct.pack("<I", 0)
    chunks = [(b"META", meta), (b"CFG ", cfg), (b"PARM", _table(params)),
              (b"BUFS", _table(buffers)), (b"OPTM", optm), (b"RNG ", rng), (b"DATA", data)]
    if norm is not None:
        if len(norm["mean"]) != c:
            raise ValueError("the input normalization has %d channels, the net %d"
                             % (len(norm["mean"]), c))
        chunks.append((b"NORM", encode_norm(**norm)))
    if sources:
        chunks.append((b"FROM", encode_from(sources)))
    body = b"".join(tag + struct.pack("<IQ", 0, len(p)) + p for tag, p in chunks)
    size = HDR + len(body) + 4
    head = MAGIC + struct.pack("<IIQ", VERSION, len(chunks), size)
    b = head + body
    return b + struct.pack("<I", zlib.crc32(b))
