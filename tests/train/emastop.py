"""tests/train/emastop.py: the Python side of emastop.sh.

same A B: checkpoints A and B hold the same model, EMA, optimizer state
and progress, bit for bit (their loss sums may differ).
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
    for k in ("params", "buffers") + (("ema",) if hasattr(a, "ema") else ()):
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
    {"same": same, "predict": predict}[sys.argv[1]](*sys.argv[2:])
