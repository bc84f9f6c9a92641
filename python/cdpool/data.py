"""data.py: cdp-train's training order and samples for torch.utils.data.

BlockSampler gives rank r of j the key indices cdp-train's loader reads
(tools/train/loader.h, "Order (training)"): epoch e permutes the N keys of
the pointer file by rng.epoch_order(N, seed, e); global step s is positions
[s*B, (s+1)*B) of that order, B = j*b, and rank r takes block r + j*s of b
keys. An epoch has floor(N / B) steps, or ceil(N / B) with pad_last, a
position p >= N then taking order[p mod N]. With accumulate A > 1 (the
model's accumulate=), a cdp-train step is A of these batches, so the epoch
is whole steps: A * floor(N / (A*B)) batches, A * ceil(N / (A*B)) with
pad_last. The global batches depend on the keys, the seed and B only,
never on j.

PoolDataset gives sample i of a pointer file as cdp-train's host path
prepares it without augmentation ("A sample" in loader.h): the record is
checked (CRC, shape against the pool's), converted to float32, standardized
per band as y = (x - mean) * (1 / std) in float32, by the statistics
cdp-train would use for these keys (the exact sums of the pool sources the
keys come from, or the pool's statistics for an older pool; a checkpoint's
on resume: see PoolDataset's standardize=)
(mean and 1 / std rounded to float32, a band with std 0 only centred),
float values that are not finite become 0, invalid pixels (mask 0, or every
band equal to the nodata value) become 0 in every band and get the ignore
label; labels are int64: (H, W) class ids or one scalar class (where no
label is ignored: class 0 is a class, as in the loader); a multi-label
pool's (kind 5) are the multi-hot vector (K,) as float32 0/1, the target of
PyTorch's BCEWithLogitsLoss; a value pool's (kind 4, regression) the
targets (T, H, W) float32 standardized as (y - tmean) * (1 / tstd) in
float32 by the targets' statistics cdp-train uses, NaN where there is no
target (a non-finite value) and at invalid pixels. A pool without labels
gives the image alone.

Augment (engine/augment.h) crops, flips and turns a sample after that and
changes its values (the photometric aug_* keys), as cdp-train does, with the
transform drawn from the seed, the epoch and the
key index. Mix mixes a classifier's batch (MixUp, CutMix) as cdp-train
mixes each rank's, drawn from the seed, the epoch and the step. Not reproduced: the loader's --skip-bad replacement of damaged
records (a damaged record raises CdpError here).

With DataLoader(num_workers > 0) every worker opens the pool's LMDB
environment itself on first use (pool.py), never one inherited across the
fork (py-lmdb 1.4 to 3.x). Integer arguments (epochs, indices, sizes)
are taken from any integer type, NumPy's included (operator.index), and
checked when given: TypeError or ValueError naming the argument. Neither
class needs torch: DataLoader takes any sampler that iterates
and any dataset with __len__ and __getitem__, and collates NumPy arrays.
"""
import math
import operator
import os
import re

import numpy as np

from .errors import CdpError
from .keys import KeyList, read_keys, split_key
from .pool import Pool, _Why, meta_field
from .record import LABEL_CLASS, LABEL_F32, LABEL_MULTI, LABEL_U8, LABEL_U16, REC_NODATA, peek
from .rng import M64, Rng, check_seed, derive, epoch_order


def _int_arg(name, v, lo, hi=None):
    """v as an int (a Python or NumPy integer, operator.index) in [lo, hi]:
    TypeError or ValueError naming the argument otherwise."""
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError("%s: %r is not an integer" % (name, v)) from None
    if i < lo or (hi is not None and i > hi):
        raise ValueError("%s: %d is outside [%d, %s]" % (name, i, lo, "inf" if hi is None else hi))
    return i


def steps_per_epoch(n, global_batch, pad_last=False, accumulate=1):
    """Batches of an epoch of n keys at global batch B (cdp-train's
    loader's): whole steps of accumulate batches each."""
    step = global_batch * accumulate
    return accumulate * (-(-n // step) if pad_last else n // step)


def block(order, step, rank, nranks, batch):
    """Key indices of rank r at global step s: block r + j*s of b (with
    the pad_last wrap-around)."""
    start = step * nranks * batch + rank * batch
    n = len(order)
    return [order[p % n] for p in range(start, start + batch)]


class BlockSampler:
    """Key indices of one rank in cdp-train's order.

    n         keys in the pointer file (an int, or a list / KeyList)
    batch     b, samples per rank per step (global batch j*b)
    rank, num_replicas
              r of j; by default torch.distributed's when it is initialised,
              else 0 of 1
    seed      the run seed (cdp-train --seed, default 1), in [0, 2**64-1]:
              ValueError otherwise
    pad_last  cdp-train --pad-last
    accumulate
              the model's accumulate= (batches per optimizer step, >= 1):
              the epoch is whole steps of that many batches (the
              sampler still yields batches, A to a cdp-train step)
    epoch, start_step
              where iteration starts: set_epoch(e) as for
              DistributedSampler; resume(ckpt) takes both from a
              checkpoint (its epoch and data position)

    with_epoch yields (epoch, index) pairs, which PoolDataset takes, so
    that augmentation draws from the sampler's epoch in every worker.
    Use with DataLoader(dataset, batch_size=batch, sampler=sampler): its
    batches are then the loader's, step by step. len() is the samples this
    rank yields in the current epoch from start_step on.
    """

    def __init__(self, n, batch, rank=None, num_replicas=None, seed=1, pad_last=False,
                 epoch=0, start_step=0, with_epoch=False, accumulate=1):
        self.n = _int_arg("n", n if not hasattr(n, "__len__") else len(n), 0)
        batch = _int_arg("batch", batch, 1)
        if rank is None or num_replicas is None:
            r, j = _dist_rank()
            rank = r if rank is None else rank
            num_replicas = j if num_replicas is None else num_replicas
        num_replicas = _int_arg("num_replicas", num_replicas, 1)
        rank = _int_arg("rank", rank, 0, num_replicas - 1)
        self.batch, self.rank, self.num_replicas = batch, rank, num_replicas
        self.seed, self.pad_last = check_seed(seed), bool(pad_last)
        self.accumulate = _int_arg("accumulate", accumulate, 1)
        self.steps = steps_per_epoch(self.n, batch * num_replicas, pad_last, self.accumulate)
        if self.steps == 0:
            raise ValueError("%d keys make no step of global batch %d"
                             % (self.n, batch * num_replicas * self.accumulate))
        self.epoch = _int_arg("epoch", epoch, 0, M64)
        self.start_step = _int_arg("start_step", start_step, 0, self.steps)
        self.with_epoch = with_epoch

    def set_epoch(self, epoch):
        """The epoch to iterate next (an integer in [0, 2**64-1]); a later
        epoch starts at its step 0."""
        epoch = _int_arg("epoch", epoch, 0, M64)
        if epoch != self.epoch:
            self.start_step = 0
        self.epoch = epoch

    def resume(self, ckpt):
        """Continue where a checkpoint (Checkpoint) left off: its epoch, and
        the step its data position means at this global batch."""
        gb = self.batch * self.num_replicas
        if ckpt.data_pos % gb or ckpt.data_pos // gb > self.steps:
            raise ValueError("checkpoint position %d is not a step of global batch %d"
                             % (ckpt.data_pos, gb))
        self.epoch, self.start_step = ckpt.epoch, ckpt.data_pos // gb

    def order(self, epoch=None):
        return epoch_order(self.n, self.seed, self.epoch if epoch is None else epoch)

    def step_indices(self, step, epoch=None, order=None):
        """This rank's b key indices at (epoch, step)."""
        o = order if order is not None else self.order(epoch)
        return block(o, step, self.rank, self.num_replicas, self.batch)

    def __iter__(self):
        o = self.order()
        start = self.start_step
        for s in range(start, self.steps):
            for k in self.step_indices(s, order=o):
                yield (self.epoch, k) if self.with_epoch else k

    def __len__(self):
        return (self.steps - self.start_step) * self.batch


def _dist_rank():
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return 0, 1


_REAL = r"[0-9]*\.?[0-9]*([eE][-+]?[0-9]+)?"
_SHAPE_SAMPLE = 64          # the records whose header cdp-train's loader reads at open


def _net_numbers(text, overrides):
    """num(key, pattern, conv, default): the literal value of a [net] key of
    cfg text after the overrides ("key=value", as cdp-train applies them);
    ValueError for a value that is no literal number (a ${...} expression)."""
    net, section = {}, None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("["):
            section = line
        elif section == "[net]" and "=" in line:
            k, v = line.split("=", 1)
            net[k.strip()] = v.strip()
    for o in overrides:
        k, v = o.split("=", 1)
        net[k.strip()] = v.strip()

    def num(key, pattern=r"[0-9]+", conv=int, default="0"):
        v = net.get(key, default)
        if not re.fullmatch(pattern, v):
            raise ValueError("[net] %s=%s: not a number this reader evaluates" % (key, v))
        return conv(v)
    return num


class Augment:
    """engine/augment.h: a crop, flips and quarter turns, drawn per sample
    as cdp-train draws them, from cdp_rng_derive(cdp_rng_derive(seed,
    epoch, 1), k, 0) for key index k: y0, x0 (with a crop), hflip, vflip,
    rot (each only when enabled; odd turns only for square outputs), then
    photo_seed when a photometric change is on. The options are the cfg's
    [net] aug_hflip, aug_vflip, aug_rot90, crop_h and crop_w, and as keyword
    arguments the photometric aug_* keys without "aug_" (brightness=,
    brightness_p=, contrast=, gamma=, band_jitter=, noise= and their _p),
    and scale=, rotate= (and _p), drawn after photo_seed: zoom, degrees.
    val=True gives the validation transform, the centred crop."""

    # photometric [net] keys: (name, largest range); each has a _p probability
    PHOTO = (("brightness", 10), ("contrast", 1), ("gamma", 2), ("band_jitter", 10),
             ("noise", 10))
    WARP = (("scale", 4), ("rotate", 180))

    def __init__(self, hflip=False, vflip=False, rot90=False, crop_h=0, crop_w=0, seed=1,
                 val=False, **photo):
        crop_h, crop_w = _int_arg("crop_h", crop_h, 0, 65536), _int_arg("crop_w", crop_w, 0, 65536)
        if bool(crop_h) != bool(crop_w):
            raise ValueError("crop_h and crop_w: both or neither (crop_h=%d, crop_w=%d)"
                             % (crop_h, crop_w))
        self.hflip, self.vflip, self.rot90 = bool(hflip), bool(vflip), bool(rot90)
        self.crop_h, self.crop_w, self.seed, self.val = crop_h, crop_w, check_seed(seed), val
        for name, top in self.PHOTO + self.WARP:   # float32, as cdp_cfg_float stores them
            r = float(np.float32(photo.pop(name, 0)))
            p = float(np.float32(photo.pop(name + "_p", 1)))
            if not (0 <= r <= top and 0 <= p <= 1):
                raise ValueError("%s=%r, %s_p=%r: outside [0, %g] and [0, 1]"
                                 % (name, r, name, p, top))
            setattr(self, name, r)
            setattr(self, name + "_p", p)
        if photo:
            raise TypeError("unknown options %s" % ", ".join(sorted(photo)))

    @classmethod
    def from_cfg(cls, text, overrides=(), seed=1):
        """The augmentation a model cfg asks for: its [net] section's
        aug_hflip, aug_vflip, aug_rot90, crop_h and crop_w, after the
        overrides ("key=value", as cdp-train applies them to [net]). Only
        literal values are read (a ${...} expression raises ValueError)."""
        num = _net_numbers(text, overrides)
        photo = {}
        for name, _ in cls.PHOTO + cls.WARP:
            photo[name] = num("aug_" + name, _REAL, float)
            photo[name + "_p"] = num("aug_%s_p" % name, _REAL, float, "1")
        return cls(num("aug_hflip"), num("aug_vflip"), num("aug_rot90"), num("crop_h"),
                   num("crop_w"), seed=seed, **photo)

    @classmethod
    def from_checkpoint(cls, ckpt):
        """from_cfg() of a checkpoint's cfg and overrides, with its run seed."""
        return cls.from_cfg(ckpt.cfg_text, ckpt.overrides, seed=ckpt.seed)

    def __eq__(self, other):
        return isinstance(other, Augment) and vars(self) == vars(other)

    def __repr__(self):
        return "Augment(%s)" % ", ".join("%s=%r" % kv for kv in vars(self).items())

    @property
    def photo_on(self):
        return any(getattr(self, name) > 0 for name, _ in self.PHOTO)

    @property
    def active(self):
        return (self.hflip or self.vflip or self.rot90 or bool(self.crop_h) or self.photo_on
                or self.scale > 0 or self.rotate > 0)

    def draw(self, h, w, epoch, k):
        """(y0, x0, oh, ow, hflip, vflip, rot, photo_seed, zoom, degrees) of
        key index k in epoch; photo_seed None: no photometric change."""
        epoch, k = operator.index(epoch), operator.index(k)
        oh, ow = self.crop_h or h, self.crop_w or w
        if oh > h or ow > w:
            raise ValueError("crop %dx%d does not fit %dx%d tiles" % (oh, ow, h, w))
        if self.val:
            return ((h - oh) // 2, (w - ow) // 2, oh, ow, 0, 0, 0, None, 1.0, 0.0)
        r = Rng(derive(derive(self.seed, epoch, 1), k, 0))
        y0 = x0 = hf = vf = rot = 0
        if self.crop_h:
            y0, x0 = r.below(h - oh + 1), r.below(w - ow + 1)
        if self.hflip:
            hf = r.below(2)
        if self.vflip:
            vf = r.below(2)
        if self.rot90:
            rot = r.below(4) if oh == ow else 2 * r.below(2)
        ps = r.next() if self.photo_on else None
        zoom, deg = 1.0, 0.0
        if self.scale > 0 and r.double() < self.scale_p:
            zoom = math.pow(1.0 + self.scale, 2.0 * r.double() - 1.0)
        if self.rotate > 0 and r.double() < self.rotate_p:
            deg = self.rotate * (2.0 * r.double() - 1.0)
        return (y0, x0, oh, ow, hf, vf, rot, ps, zoom, deg)

    @staticmethod
    def warp(t, image, label, ignore, fill=0.0):
        """cdp_aug_warp: image (C, oh, ow) zoomed and turned by t about its
        centre, bilinear (a NaN among the four pixels read gives NaN);
        label (oh, ow) (or None, or a scalar) by the nearest pixel; points
        outside give fill (0; a value pool's targets NaN) and the ignore
        label."""
        zoom, deg = t[8], t[9]
        if zoom == 1.0 and deg == 0.0:
            return image, label
        oh, ow = image.shape[-2:]
        cy, cx = (oh - 1) / 2.0, (ow - 1) / 2.0
        rad = deg * math.pi / 180.0
        co, si = math.cos(rad), math.sin(rad)
        dy, dx = np.meshgrid(np.arange(oh, dtype=np.float64) - cy,
                             np.arange(ow, dtype=np.float64) - cx, indexing="ij")
        sy = cy + (co * dy - si * dx) / zoom
        sx = cx + (si * dy + co * dx) / zoom
        inside = (sy >= -0.5) & (sy < oh - 0.5) & (sx >= -0.5) & (sx < ow - 0.5)
        fy0, fx0 = np.floor(sy), np.floor(sx)
        fy, fx = sy - fy0, sx - fx0
        y0 = np.clip(fy0, 0, oh - 1).astype(np.intp)
        y1 = np.clip(fy0 + 1, 0, oh - 1).astype(np.intp)
        x0 = np.clip(fx0, 0, ow - 1).astype(np.intp)
        x1 = np.clip(fx0 + 1, 0, ow - 1).astype(np.intp)
        p = image.astype(np.float64)
        v = ((1.0 - fy) * ((1.0 - fx) * p[:, y0, x0] + fx * p[:, y0, x1]) +
             fy * ((1.0 - fx) * p[:, y1, x0] + fx * p[:, y1, x1]))
        out = np.where(inside, v, fill).astype(np.float32)
        if label is not None and label.ndim == 2:
            ny = np.clip(np.floor(sy + 0.5), 0, oh - 1).astype(np.intp)
            nx = np.clip(np.floor(sx + 0.5), 0, ow - 1).astype(np.intp)
            label = np.where(inside, label[ny, nx], ignore).astype(label.dtype)
        return out, label

    def photo(self, t, image):
        """cdp_aug_photo: the photometric changes drawn from t's photo_seed
        on image (C, H, W) float32 (after apply), as a new array. Noise is
        drawn one value at a time in Python (slow for large tiles)."""
        x = np.array(image, dtype=np.float32)
        if t[7] is None:
            return x
        r = Rng(t[7])
        f64 = np.float64

        def due(name):
            return getattr(self, name) > 0 and r.double() < getattr(self, name + "_p")

        def sym(name):
            return getattr(self, name) * (2.0 * r.double() - 1.0)

        if due("brightness"):
            x = (x.astype(f64) + sym("brightness")).astype(np.float32)
        if due("contrast"):
            x = (x.astype(f64) * (1.0 + sym("contrast"))).astype(np.float32)
        if due("gamma"):
            g = math.exp(sym("gamma"))
            for c in range(x.shape[0]):
                lo, hi = f64(x[c].min()), f64(x[c].max())
                if hi > lo:
                    x[c] = (lo + (hi - lo) * np.power((x[c].astype(f64) - lo) / (hi - lo), g)
                            ).astype(np.float32)
        if due("band_jitter"):
            for c in range(x.shape[0]):
                x[c] = (x[c].astype(f64) + sym("band_jitter")).astype(np.float32)
        if due("noise"):
            flat = x.reshape(-1)
            n = np.empty(flat.size, dtype=f64)
            for i in range(flat.size):
                u1 = 1.0 - r.double()
                u2 = r.double()
                n[i] = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
            x = (flat.astype(f64) + self.noise * n).astype(np.float32).reshape(x.shape)
        return x

    @staticmethod
    def apply(t, image, label=None):
        """image (C, H, W) and label (H, W) (or None) under transform t
        (the geometry; photo() does the rest)."""
        y0, x0, oh, ow, hf, vf, rot = t[:7]

        def one(a):          # (..., H, W)
            a = a[..., y0:y0 + oh, x0:x0 + ow]
            if hf:
                a = a[..., :, ::-1]
            if vf:
                a = a[..., ::-1, :]
            return np.ascontiguousarray(np.rot90(a, rot, axes=(-2, -1)))

        return one(image), (one(label) if label is not None and label.ndim == 2 else label)


def _normal(r):
    """cdp_rng_normal: Box-Muller from two doubles."""
    u1 = 1.0 - r.double()
    u2 = r.double()
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def _gamma(r, alpha):
    """engine/augment.c's gamma_draw: Marsaglia and Tsang, boosted below 1."""
    a = alpha + 1.0 if alpha < 1.0 else alpha
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        z = _normal(r)
        v = 1.0 + c * z
        if v <= 0.0:
            continue
        v = v * v * v
        u = r.double()
        if u < 1.0 - 0.0331 * z * z * z * z or math.log(u) < 0.5 * z * z + d * (1.0 - v + math.log(v)):
            if alpha < 1.0:
                return d * v * math.pow(1.0 - r.double(), 1.0 / alpha)
            return d * v


class Mix:
    """engine/augment.h's MixUp and CutMix of a classifier's batch (one
    class a sample, or a multi-label head's (n, K) multi-hot labels), as
    cdp-train mixes each rank's batch of step `step` in epoch `epoch`: one
    draw per batch from derive(derive(seed, epoch, 2), step, 0); sample i of
    n mixed with sample n-1-i; the loss lam L(y) + (1 - lam) L(y[::-1]).
    The options are the [net] keys mixup_alpha, cutmix_alpha, mix_prob and
    mix_switch_prob (float32, as the C reads them)."""

    def __init__(self, mixup_alpha=0.0, cutmix_alpha=0.0, mix_prob=1.0, mix_switch_prob=0.5,
                 seed=1):
        f32 = lambda v: float(np.float32(v))
        self.mixup_alpha, self.cutmix_alpha = f32(mixup_alpha), f32(cutmix_alpha)
        self.mix_prob, self.mix_switch_prob = f32(mix_prob), f32(mix_switch_prob)
        if not (0 <= self.mixup_alpha <= 100 and 0 <= self.cutmix_alpha <= 100 and
                0 <= self.mix_prob <= 1 and 0 <= self.mix_switch_prob <= 1):
            raise ValueError("alphas outside [0, 100] or probabilities outside [0, 1]")
        self.seed = check_seed(seed)

    @classmethod
    def from_cfg(cls, text, overrides=(), seed=1):
        """The mixing a model cfg's [net] section asks for (literal values)."""
        num = _net_numbers(text, overrides)
        return cls(num("mixup_alpha", _REAL, float), num("cutmix_alpha", _REAL, float),
                   num("mix_prob", _REAL, float, "1"), num("mix_switch_prob", _REAL, float, "0.5"),
                   seed=seed)

    @property
    def active(self):
        return self.mixup_alpha > 0 or self.cutmix_alpha > 0

    def draw_seed(self, seed, h, w):
        """cdp_mix_draw: (on, cut, lam, (y0, y1, x0, x1)) for (h, w) images."""
        if not self.active:
            return False, False, 1.0, (0, 0, 0, 0)
        r = Rng(seed)
        if not r.double() < self.mix_prob:
            return False, False, 1.0, (0, 0, 0, 0)
        if self.mixup_alpha > 0 and self.cutmix_alpha > 0:
            cut = r.double() < self.mix_switch_prob
        else:
            cut = self.cutmix_alpha > 0
        alpha = self.cutmix_alpha if cut else self.mixup_alpha
        x, y = _gamma(r, alpha), _gamma(r, alpha)
        lam = x / (x + y) if x + y > 0.0 else 0.5
        box = (0, 0, 0, 0)
        if cut:
            ratio = math.sqrt(1.0 - lam)
            ch, cw = int(h * ratio), int(w * ratio)
            cy, cx = r.below(h), r.below(w)
            box = (min(max(cy - ch // 2, 0), h), min(max(cy + ch // 2, 0), h),
                   min(max(cx - cw // 2, 0), w), min(max(cx + cw // 2, 0), w))
            lam = 1.0 - (box[1] - box[0]) * (box[3] - box[2]) / float(h * w)
        return True, cut, lam, box

    def draw(self, epoch, step, h, w):
        epoch, step = operator.index(epoch), operator.index(step)
        return self.draw_seed(derive(derive(self.seed, epoch, 2), step, 0), h, w)

    def __call__(self, images, labels, epoch, step):
        """A rank's batch images (n, C, H, W) float32 and labels (n) (or (n, K)) of
        (epoch, step) mixed: (images, labels, labels[::-1], lam), new
        arrays (lam 1: not mixed). NumPy arrays or torch tensors (a
        DataLoader's batch), each returned as the type it came as, a
        tensor on its device; torch has no negative strides, so a tensor
        is reversed with flip(0)."""
        on, cut, lam, box = self.draw(epoch, step, *images.shape[-2:])
        x = (_mix_tensor if _is_tensor(images) else _mix_array)(images, on, cut, lam, box)
        if _is_tensor(labels):
            return x, labels.clone(), labels.flip(0), lam
        return x, np.array(labels), np.array(labels)[::-1].copy(), lam


def _mix_array(images, on, cut, lam, box):
    y0, y1, x0, x1 = box
    x = np.array(images, dtype=np.float32)
    if on and cut:
        x[:, :, y0:y1, x0:x1] = images[::-1, :, y0:y1, x0:x1]
    elif on:
        a = np.asarray(images, dtype=np.float64)
        x = (lam * a + (1.0 - lam) * a[::-1]).astype(np.float32)
    return x


def _mix_tensor(images, on, cut, lam, box):
    """_mix_array on a torch tensor, on its device: the same arithmetic
    (the blend in float64, rounded to float32), so the same bits."""
    import torch
    y0, y1, x0, x1 = box
    x = images.to(torch.float32, copy=True)
    if on and cut:
        x[:, :, y0:y1, x0:x1] = images.flip(0)[:, :, y0:y1, x0:x1]
    elif on:
        a = images.to(torch.float64)
        x = (lam * a + (1.0 - lam) * a.flip(0)).to(torch.float32)
    return x


def _is_tensor(a):
    """A torch.Tensor, without importing torch where none is given."""
    return type(a).__module__.split(".", 1)[0] == "torch" and hasattr(a, "flip")


_STANDARDIZE = "True, False, 'pool', a PoolDataset, a Checkpoint or (mean, std)"


def _listed_keys(keys, pool):
    """A list of keys given to PoolDataset (a slice of a KeyList, say) as
    a KeyList of pool's uuid (with no path: its keys are checked against
    the pool's there, not against a pointer file), repeats allowed;
    TypeError or ValueError naming the argument for what is no list of
    keys."""
    try:
        items = list(keys)
    except TypeError:
        raise TypeError("keys: %s is not a KeyList, a pointer file's path or a list of keys"
                        % type(keys).__name__) from None
    out = []
    for i, k in enumerate(items):
        if isinstance(k, (bytes, bytearray)):
            k = bytes(k).decode("utf-8", "surrogateescape")
        if not isinstance(k, str):
            raise TypeError("keys[%d]: a key is str or bytes, not %s" % (i, type(k).__name__))
        out.append(str(k))
    if not out:
        raise ValueError("keys: no keys")
    return KeyList(out, pool.uuid, 0, None, repeats=True)


class PoolDataset:
    """Samples of a pool in the order of a pointer file, as cdp-train makes
    them (see the top of this file).

    pool      a Pool or a pool directory
    keys      a KeyList (read_keys()) or a pointer file's path; its uuid
              must be the pool's, and every key must be in the pool; or a
              list of keys (str, a slice of a KeyList), each in the pool
              (ValueError naming keys[i] otherwise), repeats allowed
    standardize
              True: cdp-train's rule for a new run, the statistics of
              the sources of these keys (Pool.source_stats), or the
              pool's where a source has no sums; "pool": the pool's
              statistics over every tile; a Checkpoint: the mean and std
              it stored (what a resumed cdp-train uses, and what a
              validation set must use to match training); another
              PoolDataset: its mean and std (and a value pool's target
              statistics), THE way to make a validation dataset, since
              cdp-train validates with its training keys' statistics:
              PoolDataset(pool, val_keys, standardize=train_ds) (True
              would take the held-out scenes' own); a (mean, std) pair of
              per-band sequences; False: float32 values as stored
              (invalid pixels still 0). stats_from says which ("sources",
              "pool", "checkpoint", "dataset", "given"; None for False).
              The dataset's .mean and .std (float32, per band) are what it
              used, .inv 1 / std (1 where std is 0).
              A value pool's targets (regression) follow: True and (mean,
              std) take the training sources' target statistics
              (Pool.source_target_stats) as cdp-train does, "pool" the
              pool's (Pool.target_stats), a Checkpoint of a regression run
              its own (ck.task, what a resumed cdp-train keeps; one without
              them the sources'), False none; a target of std 0 is only
              centred. target_stats_from says which.
    ignore    the model cfg's [net] ignore=: ignored labels (the stored
              ignore value and invalid pixels) become this value; None
              keeps the pool's, as cdp-train does without it. A scalar-class
              pool ignores no label (its stored ignore 0 means "not in
              use"), so there it changes nothing
    augment   an Augment, or None

    The dataset reads one snapshot of the pool, as cdp-train reads one read
    transaction: the one it was made in, held until close(). A DataLoader
    worker begins its own and refuses (CdpError EMISMATCH, "written to
    since the dataset was made") a pool that cdp-lmdbpack wrote to since
    (see _view).

    dataset[i] is (image float32 (C, H, W), label int64 (H, W) or (),
    float32 (K,) multi-hot for a multi-label pool, float32 targets (T, H, W)
    for a value pool); for a pool without labels the image alone, so that
    a DataLoader collates its batches (it cannot collate None).
    """

    def __init__(self, pool, keys, standardize=True, ignore=None, augment=None):
        self._own = not isinstance(pool, Pool)
        self._box = self._box_pid = None
        self.pool = pool if isinstance(pool, Pool) else Pool(pool)
        try:
            self._init(keys, standardize, ignore, augment)
        except BaseException:
            self.close()
            raise

    def _init(self, keys, standardize, ignore, augment):
        p = self.pool
        # the loader's order: the pool, then the pointer file
        if p.bands == 0:
            raise CdpError("EFORMAT", p.path, message="pool holds no tiles")
        listed = False
        if isinstance(keys, KeyList):
            self.keys = keys
        elif isinstance(keys, (str, bytes, os.PathLike)):
            self.keys = read_keys(keys, pool=p)
        else:
            self.keys, listed = _listed_keys(keys, p), True
        if self.keys.uuid != p.uuid:
            raise CdpError("EMISMATCH", self.keys.path, message="made for pool %s, '%s' is %s"
                           % (self.keys.uuid, p.path, p.uuid))
        if len(self.keys) == 0:
            raise CdpError("EFORMAT", self.keys.path, message="no keys")
        self._src = None
        # The dataset reads one snapshot of the pool, as cdp-train reads one
        # read transaction from start to end: begun here, held until
        # close(), and the meta the statistics come from and the keys are
        # checked in it. A Pool opened before cdp-lmdbpack appended takes
        # the pool's new meta (its sources, sums and count) here, never
        # standardizing the new keys by statistics without them; one that
        # packs during or after the dataset's life never mixes its records
        # with the old ones or its statistics with the old records.
        v = self._view()
        if p._sync(v._txn) and self.keys.uuid != p.uuid:
            raise CdpError("EMISMATCH", self.keys.path, message="made for pool %s, '%s' "
                           "is %s" % (self.keys.uuid, p.path, p.uuid))
        self._snap = (v._txn.id(), dict(p.meta), p.tiles)
        for i, k in enumerate(self.keys):
            try:
                v.raw(k)
            except KeyError:
                if listed:
                    raise ValueError("keys[%d]: key '%s' is not in '%s'" % (i, k, p.path)) \
                        from None
                raise CdpError("EKEY", self.keys.path, line=i + 2, message="key '%s' is not "
                               "in '%s'" % (k, p.path)) from None
        if isinstance(standardize, np.bool_):       # as True or False, not a pair
            standardize = bool(standardize)
        mean, std, self.stats_from = self._statistics(standardize)
        for c in range(p.bands):
            m, sd = mean[c], std[c]
            if not (math.isfinite(m) and math.isfinite(sd)) or abs(m) > 3.4028234663852886e38 \
                    or sd < 0:
                raise CdpError("ERANGE", p.path, message="band %d statistics are out of float32 "
                               "range (mean %g, std %g)" % (c + 1, m, sd))
        self.standardize = standardize is not False
        self.mean = np.asarray(mean, dtype=np.float64).astype(np.float32)
        self._stats = (np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64))
        self.std = self._stats[1].astype(np.float32)
        self.inv = np.array([np.float32(1.0 / s) if s > 0 else np.float32(1) for s in std],
                            dtype=np.float32)
        self.targets = p.label_len if p.label_kind == "f32" else 0
        self.target_mean = self.target_inv = None
        self.target_stats_from = None
        if self.targets:
            tmean, tstd, self.target_stats_from = self._target_statistics(standardize)
            if not (np.all(np.isfinite(tmean)) and np.all(np.isfinite(tstd))
                    and np.all(np.abs(tmean) <= 3.4028234663852886e38) and np.all(tstd >= 0)):
                raise CdpError("ERANGE", p.path, message="the targets' standardization is out "
                               "of float32 range")
            self._tstats = (np.asarray(tmean, dtype=np.float64), np.asarray(tstd, dtype=np.float64))
            self.target_mean = np.asarray(tmean, dtype=np.float64).astype(np.float32)
            self.target_inv = np.array([np.float32(1.0 / s) if s > 0 else np.float32(1)
                                        for s in tstd], dtype=np.float32)
        self.labelled = p.label_kind != "none"
        self.label_px = p.label_kind in ("u8", "u16")
        # a class pool stores ignore 0 as "not in use" (cdp_record.h): class
        # 0 is a class there, and the loader ignores no label (-1)
        self.stored_ignore = p.label_ignore if self.label_px else -1
        self.ignore = self.stored_ignore if ignore is None else ignore
        self.augment = augment if augment is not None and augment.active else None
        self.epoch = 0

    def close(self):
        """Ends the dataset's read transaction and closes the Pool the
        dataset opened itself (one given is the caller's); both also end
        when the dataset is collected. A read after close() begins a new
        transaction, checked as a worker's (_view)."""
        self._release()
        if self._own:
            self.pool.close()

    def __del__(self):
        try:
            self._release()
        except Exception:       # interpreter shutdown: os or lmdb already gone
            pass

    def __getstate__(self):
        # a spawned worker begins its own transaction (_view)
        d = dict(self.__dict__)
        d["_box"] = d["_box_pid"] = None
        return d

    def _release(self):
        box, self._box = getattr(self, "_box", None), None
        if box is not None and self._box_pid == os.getpid():
            self.pool._let_go(box)

    def _view(self):
        """The view of this process's read transaction of the dataset's
        snapshot. The one begun in __init__ is the parent's: a DataLoader
        worker (forked or spawned) begins its own at its first sample, and
        LMDB has no way to begin one at an older snapshot, so the worker
        checks that nothing was written since (the same transaction id, or
        the same meta and count: every commit of cdp-lmdbpack changes the
        count or the statistics, a --replace marks them stale) and refuses
        a pool written to meanwhile rather than mix its records with the
        snapshot's statistics and keys."""
        from .pool import _View, _alive
        pid = os.getpid()
        box = self._box
        if box is not None and self._box_pid == pid:
            if box.txn is not None and _alive(box.txn):
                return _View(self.pool, box)
            # closing the environment (the last Pool of it closed, a given
            # pool.close()) ended the transaction: begin one as a worker does
            box.boxes.discard(box)
            self._box = None
        p = self.pool
        box = p._hold()
        self._box, self._box_pid = box, pid
        snap = getattr(self, "_snap", None)
        if snap is not None and box.txn.id() != snap[0]:
            try:
                meta, entries = p._read_meta(box.txn)
            except Exception:
                self._release()
                raise
            if (meta, entries) != snap[1:]:
                self._release()
                raise CdpError("EMISMATCH", p.path, message="written to since the dataset was "
                               "made (a cdp-lmdbpack %s): this process would read other "
                               "records than its snapshot; make the dataset again" % (
                                   "--replace into it has not finished"
                                   if "stale=1" in meta.get("stats", "")
                                   else "added or replaced records"))
        return _View(p, box)

    def _sources(self):
        """The pool sources the keys' records come from, found as
        tools/train/loader_sources.c finds them (cdp_loader_sources), with
        the same result: a key whose scene, or (a tile-form key) whole key,
        is the name of exactly one source (the pool's source.NNNNNN meta)
        comes from it; the records of the others have their header read.
        The headers of the loader's open sample (SHAPE_SAMPLE, 64 records
        spread over the list) are read and check the names: one that
        disagrees has every header read. A pool of one source reads only
        the sample."""
        if self._src is None:
            p, keys = self.pool, self.keys
            n = len(keys)
            ns = n if n < _SHAPE_SAMPLE else _SHAPE_SAMPLE
            named = {}
            if ns < n:
                for k, text in p.meta.items():
                    m = re.fullmatch(r"source\.([0-9]+)", k)
                    if not m or int(m.group(1)) > 0xFFFFFFFF:
                        continue
                    try:
                        name = meta_field(text, "name")
                    except _Why:
                        continue
                    if name is not None and len(name.encode("utf-8", "surrogateescape")) < 256:
                        named.setdefault(name, []).append(int(m.group(1)))
            only = [i for v in named.values() for i in v]

            def by_name(key):
                if len(only) == 1:      # every record is of the one source
                    return only[0]
                try:
                    scene, row, _ = split_key(key)
                except CdpError:
                    return None
                got = named.get(scene, []) + (named.get(key, []) if row is not None else [])
                return got[0] if len(got) == 1 else None

            v = self._view()
            def head(key):
                return peek(v.raw(key), (p.path, key))[0].source
            sample = {t * n // ns: None for t in range(ns)}
            for i in sample:
                sample[i] = head(keys[i])
            use = bool(named) and all(by_name(keys[i]) in (None, s)
                                      for i, s in sample.items())
            src = set(sample.values())
            for i, k in enumerate(keys):
                if i not in sample:
                    s = by_name(k) if use else None
                    src.add(head(k) if s is None else s)
            self._src = src
        return self._src

    def _target_statistics(self, standardize):
        """(mean, std, where from) of a value pool's targets as
        tools/train/train_std.c's target_stats() chooses them: std 0 taken
        as 1 (only centred)."""
        p = self.pool
        if standardize is False:
            return np.zeros(self.targets), np.ones(self.targets), None
        if isinstance(standardize, PoolDataset):
            if standardize.targets != self.targets:
                raise CdpError("EMISMATCH", p.path, message="the dataset given to standardize "
                               "has %d targets, the pool %d" % (standardize.targets, self.targets))
            return standardize._tstats[0], standardize._tstats[1], "dataset"
        task = getattr(standardize, "task", None) if hasattr(standardize, "std_from") else None
        if task and task["task"] == "regression" and len(task["target_mean"]) == self.targets:
            return task["target_mean"], task["target_std"], "checkpoint"
        if isinstance(standardize, str) and standardize == "pool":
            if len(p.target_stats) != self.targets:
                raise CdpError("EFORMAT", p.path, message="the pool holds no target statistics")
            mean = np.array([t["mean"] for t in p.target_stats])
            std = np.array([t["std"] for t in p.target_stats])
            return mean, np.where(std > 0, std, 1.0), "pool"
        mean, std, counts = p.source_target_stats(self._sources())
        for t, n in enumerate(counts):
            if n == 0:
                raise CdpError("EFORMAT", p.path, message="target %d has no value in the "
                               "training sources of %s" % (t + 1, "'%s'" % self.keys.path
                                                           if self.keys.path else "the keys"))
        return mean, np.where(std > 0, std, 1.0), "sources"

    def _statistics(self, standardize):
        """(mean, std, where from) as cdp-train's tools/train/train_std.c
        chooses them."""
        p = self.pool
        if standardize is True:
            got = p.source_stats(self._sources())
            if got is not None:
                return got[0], got[1], "sources"
            return p.mean, p.std, "pool"
        if standardize is False:            # float32 as stored: mean 0, std 1
            return np.zeros(p.bands), np.ones(p.bands), None
        if isinstance(standardize, str) and standardize == "pool":
            return p.mean, p.std, "pool"
        if isinstance(standardize, PoolDataset):   # the training set's, for validation
            if len(standardize.mean) != p.bands:
                raise CdpError("EMISMATCH", p.path, message="the dataset given to standardize "
                               "has %d bands, the pool %d" % (len(standardize.mean), p.bands))
            return standardize._stats[0], standardize._stats[1], "dataset"
        if isinstance(standardize, str):
            raise ValueError("standardize: '%s' is not %s" % (standardize, _STANDARDIZE))
        if hasattr(standardize, "std_from"):       # a Checkpoint
            if standardize.mean is None or len(standardize.mean) != p.bands:
                raise CdpError("EMISMATCH", p.path, message="the checkpoint holds %s band "
                               "statistics, the pool has %d bands" % (
                                   "no" if standardize.mean is None else len(standardize.mean),
                                   p.bands))
            return standardize.mean, standardize.std, "checkpoint"
        try:
            mean, std = standardize
        except TypeError:       # None, 1: no pair
            raise TypeError("standardize: %r is not %s" % (standardize, _STANDARDIZE)) from None
        except ValueError:      # a sequence of another length
            raise ValueError("standardize: %r is not a (mean, std) pair" % (standardize,)) \
                from None
        try:
            mean, std = (np.asarray(a, dtype=np.float64) for a in (mean, std))
        except (TypeError, ValueError):
            raise ValueError("standardize: mean and std need %d numbers each" % p.bands) from None
        if mean.shape != (p.bands,) or std.shape != (p.bands,):
            raise ValueError("standardize: mean and std need %d values each" % p.bands)
        return mean, std, "given"

    def __len__(self):
        return len(self.keys)

    def key(self, i):
        return self.keys[i]

    def set_epoch(self, epoch):
        """The epoch whose augmentation an int index draws (a sampler made
        with with_epoch=True passes it with each index instead, which also
        reaches DataLoader workers)."""
        self.epoch = _int_arg("epoch", epoch, 0, M64)

    def __getitem__(self, i):
        """Sample i, or (epoch, i) as BlockSampler(with_epoch=True) gives;
        i < 0 counts from the end, as a list's index."""
        epoch = self.epoch
        if isinstance(i, tuple):
            epoch, i = i
        epoch, i = operator.index(epoch), operator.index(i)
        n = len(self.keys)
        if not -n <= i < n:
            raise IndexError("dataset index %d is out of range (%d keys)" % (i, n))
        # ds[-1] is ds[n - 1]: the augmentation too is drawn for key n - 1
        i = i + n if i < 0 else i
        p = self.pool
        r = self._view().record(self.keys[i])      # checked against the pool's shape there
        x, lab = self.prepare(r)
        if self.augment is not None:
            t = self.augment.draw(p.height, p.width, epoch, i)
            if self.targets:
                # the targets take the image's geometry and warp (bilinear,
                # no target where the warp reads outside the tile), never
                # its photometric changes (loader_sample.c, augment_targets)
                lab = Augment.warp(t, Augment.apply(t, lab)[0], None, None, fill=np.nan)[0]
                x = Augment.warp(t, Augment.apply(t, x)[0], None, None)[0]
            else:
                x, lab = Augment.apply(t, x, lab)
                x, lab = Augment.warp(t, x, lab, self.ignore)
            x = self.augment.photo(t, x)
        if not self.labelled:
            return x
        return x, lab

    def prepare(self, r):
        """A decoded Record as the trainer's (image, label)."""
        x = r.image.astype(np.float32)        # (C, H, W)
        if r.image.dtype.kind == "f":
            bad = ~np.isfinite(x)
            if bad.any():     # the band's mean: 0 once standardized
                fill = self.mean if self.standardize else np.zeros_like(self.mean)
                x[bad] = np.broadcast_to(fill[:, None, None], x.shape)[bad]
        if self.standardize:
            x = (x - self.mean[:, None, None]) * self.inv[:, None, None]
        lab = None
        if r.label_kind == LABEL_CLASS:
            lab = np.array(self._remap(r.class_id), dtype=np.int64)
        elif r.label_kind in (LABEL_U8, LABEL_U16):
            lab = r.label.astype(np.int64)
            if self.ignore != self.stored_ignore:
                lab[lab == self.stored_ignore] = self.ignore
        elif r.label_kind == LABEL_MULTI:
            lab = r.label.astype(np.float32)       # (K,) multi-hot
        elif r.label_kind == LABEL_F32:
            # loader_sample.c's record_targets: (y - tmean) * tinv in float32,
            # a target that is not finite (no target) NaN
            y = r.label.astype(np.float32)         # (T, H, W)
            with np.errstate(invalid="ignore", over="ignore"):
                z = (y - self.target_mean[:, None, None]) * self.target_inv[:, None, None]
            lab = np.where(np.isfinite(y), z, np.float32(np.nan)).astype(np.float32)
        invalid = None
        if r.mask is not None:
            invalid = r.mask == 0
        elif r.flags & REC_NODATA:
            img = r.image.astype(np.float64)
            if math.isnan(r.nodata):
                invalid = np.all(np.isnan(img), axis=0)
            else:
                invalid = np.all(img == r.nodata, axis=0)
        if invalid is not None and invalid.any():
            x[:, invalid] = 0
            if self.label_px:
                lab[invalid] = self.ignore
            elif self.targets:
                lab[:, invalid] = np.nan          # an invalid pixel has no target
        return x, lab

    def _remap(self, v):
        return self.ignore if v == self.stored_ignore and self.ignore != self.stored_ignore else v


