"""tests/train/emastop.py: the Python side of emastop.sh.

same A B: checkpoints A and B hold the same model, EMA, optimizer state
and progress, bit for bit (their loss sums may differ).
ema_equal A: A holds an average (LIVE) equal to its trained weights.
ema_step A B D: B's average is A's moved by 1 - D toward B's trained
weights, ema += (1 - d) (w - ema) in float32 (within one rounding: the
engine's axpy may fuse the multiply and add).
predict FILE PATIENCE DELTA: the step of the validation after which a run
with --keep-best loss --patience PATIENCE --min-delta DELTA stops (Keras's
EarlyStopping rule: an improvement is a loss below the reference by more
than DELTA, which then becomes the reference), "none" if it never does.
"""
import json
import sys

import numpy as np

from cdpool.checkpoint import load_checkpoint


def same(a, b):
    a, b = load_checkpoint(a), load_checkpoint(b)
    bad = [k for k in ("step", "epoch", "data_pos", "seed", "rng")
           if getattr(a, k) != getattr(b, k)]
    if (a.live is None) != (b.live is None) or (
            a.live is not None and not np.array_equal(a.live, b.live)):
        bad.append("live")
    for k in ("params", "buffers"):
        x, y = getattr(a, k), getattr(b, k)
        if (x is None) != (y is None) or (x is not None and (
                list(x) != list(y) or
                not all(np.array_equal(x[n], y[n]) for n in x))):
            bad.append(k)
    for k in ("m", "v"):
        x, y = a.optim[k], b.optim[k]
        if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
            bad.append("optim " + k)
    if bad:
        sys.exit("differ in " + ", ".join(bad))


def flat(ck):
    return np.concatenate([t.ravel() for t in ck.params.values()])


def ema_equal(a):
    a = load_checkpoint(a)
    if a.live is None or not np.array_equal(flat(a), a.live):
        sys.exit("the average differs from the weights")


def ema_step(a, b, d):
    a, b = load_checkpoint(a), load_checkpoint(b)
    d = np.float32(d)
    e0, e1, w1 = flat(a), flat(b), b.live
    if np.array_equal(e1, w1):
        sys.exit("the average is the weights: the test wants them apart")
    want = e0 + (np.float32(1) - d) * (w1 - e0)
    err = np.abs(e1 - want)
    tol = 2 * np.spacing(np.abs(want).astype(np.float32))
    if not (err <= tol).all():
        i = int(np.argmax(err - tol))
        sys.exit("element %d: %r, NumPy %r" % (i, float(e1[i]), float(want[i])))


def predict(path, patience, delta):
    patience, delta = int(patience), float(delta)
    ref, wait = None, 0
    for line in open(path):
        r = json.loads(line)
        if r["type"] != "val":
            continue
        x = r["loss"]
        if x is not None and (ref is None or x < ref - delta):
            ref, wait = x, 0
        else:
            wait += 1
        if wait >= patience:
            print(r["step"])
            return
    print("none")


if __name__ == "__main__":
    {"same": same, "predict": predict, "ema_equal": ema_equal, "ema_step": ema_step}[sys.argv[1]](*sys.argv[2:])
