"""mix_ref.py: engine/augment.h's MixUp and CutMix (mix_dump's output)
against NumPy, for tests/engine/mix.sh.

    mix_ref.py DUMP DIR

DUMP: the mix_dump program; DIR: a folder for its files. Checks:
  - lam of MixUp (mixup_alpha 0.4, and 2.5 for the branch above 1) over
    3000 batches: mean and variance those of Beta(a, a) within 5 standard
    errors, and the two-sample Kolmogorov-Smirnov distance to a sample of
    50 times as many of NumPy's Beta(a, a) below its 0.1% critical value;
  - CutMix (cutmix_alpha 1 on 13x10 images): every box inside the image, its
    area 1 - lam of it, and the same two-sample test of the box's area
    fraction against 10 times as many boxes NumPy makes from its own
    Beta(1, 1) lam by
    timm's rand_bbox (int(h sqrt(1 - lam)), centre uniform, halves
    clipped);
  - mix_prob 0.7 and mix_switch_prob 0.5 with both on: the shares of
    mixed batches and of CutMix among them within 5 standard errors;
  - python/cdpool's Mix draws every line bit for bit (its reproduction);
  - the mixed batch (5 samples: an odd one in the middle, 3 bands, 13x10)
    is NumPy's bit for bit: lam x + (1 - lam) x[::-1] in float64 for MixUp,
    the partner's box for CutMix.
"""
import os
import subprocess
import sys

import numpy as np

import cdpool

DUMP, D = sys.argv[1], sys.argv[2]
H, W, COUNT = 13, 10, 3000


def fail(msg):
    sys.exit("mix_ref.py: " + msg)


def draws(name, keys, count=COUNT, batch=None):
    cfg = os.path.join(D, name + ".cfg")
    with open(cfg, "w") as f:
        f.write("[net]\n" + "".join("%s=%s\n" % kv for kv in keys.items()))
    extra = []
    if batch is not None:
        batch.astype("<f4").tofile(os.path.join(D, name + ".in"))
        extra = [str(batch.shape[0]), str(batch.shape[1]), os.path.join(D, name + ".in"),
                 os.path.join(D, name + ".out")]
    r = subprocess.run([DUMP, cfg, str(H), str(W), "1000", str(count)] + extra,
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("mix_dump %s: %s" % (name, r.stderr.strip()))
    rows = [l.split() for l in r.stdout.splitlines()]
    out = [(int(a), int(b), float(c), tuple(int(v) for v in rest)) for a, b, c, *rest in rows]
    mix = cdpool.Mix(**{k: float(v) for k, v in keys.items()})
    for i, (on, cut, lam, box) in enumerate(out):
        p = mix.draw_seed(1000 + i, H, W)
        if (bool(on), bool(cut), lam, box) != (p[0], p[1], p[2], p[3] if p[1] else (0, 0, 0, 0)):
            fail("%s seed %d: C %r, cdpool.Mix %r" % (name, 1000 + i, out[i], p))
    if batch is not None:
        return out, np.fromfile(os.path.join(D, name + ".out"), "<f4").reshape(batch.shape)
    return out


def within(what, got, want, se):
    if abs(got - want) > 5 * se:
        fail("%s %.5g, want %.5g (5 standard errors: %.3g)" % (what, got, want, 5 * se))


def ks(what, a, b):
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    d = np.max(np.abs(np.searchsorted(a, grid, "right") / a.size -
                      np.searchsorted(b, grid, "right") / b.size))
    crit = 1.95 * np.sqrt((a.size + b.size) / (a.size * b.size))
    if d > crit:
        fail("%s: Kolmogorov-Smirnov distance %.4f to NumPy's, over %.4f" % (what, d, crit))
    return d


gen = np.random.default_rng(5)
for a in (0.4, 2.5):
    lam = np.array([l for _, _, l, _ in draws("mixup%g" % a, {"mixup_alpha": a})])
    var = 1.0 / (4 * (2 * a + 1))
    within("MixUp alpha %g: mean lam" % a, lam.mean(), 0.5, np.sqrt(var / COUNT))
    # the variance of a sample variance: (mu4 - var^2) / n, mu4 of Beta(a, a)
    mu4 = 3.0 / (16 * (2 * a + 1) * (2 * a + 3))
    within("MixUp alpha %g: variance of lam" % a, lam.var(), var, np.sqrt((mu4 - var * var) / COUNT))
    d = ks("MixUp alpha %g" % a, lam, gen.beta(a, a, 50 * COUNT))
    print("ok   MixUp alpha %g: lam mean %.4f var %.4f (Beta: 0.5, %.4f), KS %.4f" %
          (a, lam.mean(), lam.var(), var, d))

cut = draws("cutmix", {"cutmix_alpha": 1})
frac = []
for on, c, lam, (y0, y1, x0, x1) in cut:
    if not (on and c and 0 <= y0 <= y1 <= H and 0 <= x0 <= x1 <= W):
        fail("CutMix: draw %r" % ((on, c, lam, (y0, y1, x0, x1)),))
    if lam != 1.0 - (y1 - y0) * (x1 - x0) / float(H * W):
        fail("CutMix: lam %r for the box %r" % (lam, (y0, y1, x0, x1)))
    frac.append((y1 - y0) * (x1 - x0) / float(H * W))   # as NumPy's below, no rounding apart
ref = []
for l in gen.beta(1.0, 1.0, 10 * COUNT):
    ch, cw = int(H * np.sqrt(1.0 - l)), int(W * np.sqrt(1.0 - l))
    cy, cx = gen.integers(0, H), gen.integers(0, W)
    yl, yh = np.clip(cy - ch // 2, 0, H), np.clip(cy + ch // 2, 0, H)
    xl, xh = np.clip(cx - cw // 2, 0, W), np.clip(cx + cw // 2, 0, W)
    ref.append((yh - yl) * (xh - xl) / float(H * W))
d = ks("CutMix box area", np.array(frac), np.array(ref))
print("ok   CutMix: boxes inside %dx%d, lam = 1 - area, area fraction mean %.4f (NumPy's %.4f), "
      "KS %.4f" % (H, W, np.mean(frac), np.mean(ref), d))

both = draws("both", {"mixup_alpha": 0.4, "cutmix_alpha": 1, "mix_prob": 0.7})
on = np.array([o for o, _, _, _ in both])
cutn = np.array([c for o, c, _, _ in both if o])
within("mix_prob 0.7: mixed share", on.mean(), 0.7, np.sqrt(0.21 / COUNT))
within("mix_switch_prob 0.5: CutMix share", cutn.mean(), 0.5, np.sqrt(0.25 / cutn.size))
if any(l != 1.0 for o, _, l, _ in both if not o):
    fail("an unmixed batch with lam != 1")
print("ok   mix_prob 0.7: %.3f mixed, CutMix in %.3f of them; cdpool.Mix drew each cfg's %d "
      "bit for bit" % (on.mean(), cutn.mean(), COUNT))

x = gen.normal(size=(5, 3, H, W)).astype(np.float32)
for name, keys in (("apply_mixup", {"mixup_alpha": 0.4}), ("apply_cutmix", {"cutmix_alpha": 1})):
    (d0,), got = draws(name, keys, 1, x)
    _, c, lam, (y0, y1, x0, x1) = d0
    if c:
        want = x.copy()
        want[:, :, y0:y1, x0:x1] = x[::-1, :, y0:y1, x0:x1]
    else:
        want = (lam * x.astype(np.float64) + (1.0 - lam) * x[::-1].astype(np.float64)).astype(np.float32)
    if got.tobytes() != want.tobytes():
        fail("%s: the mixed batch differs from NumPy's (largest %g)" % (name, np.abs(got - want).max()))
    print("ok   %s: lam %.4f%s, the batch NumPy's bit for bit" %
          (name, lam, " box %r" % ((y0, y1, x0, x1),) if c else ""))
