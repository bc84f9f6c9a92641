"""consensus.py: --sync average:K and admm:K:RHO replayed in NumPy.

    consensus.py POOL INIT.cdpt RUN.cdpt KEYLOG LR [--drop-dual]

An independent reimplementation of cdp-train's block training for the
tiny model of consensus.sh: a dense layer on the flattened (C,H,W) input,
y (N,OUT) = x W^T + b, softmax cross-entropy (mean over the rank's batch),
plain SGD (no momentum, no weight decay, constant LR). Every rank r starts
from INIT's parameters w0; per step, with g_r the gradient of rank r's
own loss on the batch KEYLOG.r says it saw at that step:
  average:K  w_r -= lr g_r; after every K-th step w_r = mean_r(w_r)
  admm:K:RHO w_r -= lr g_r, then the penalty's proximal step
             w_r = (w_r + lr rho (z - u_r)) / (1 + lr rho) (none at one
             rank); after every K-th step z = mean_r(w_r + u_r),
             u_r += w_r - z   (z = w0, u_r = 0 first)
RUN.cdpt is cdp-train's checkpoint after the same steps: its model is
the consensus (mean_r w_r for average, the estimate mean_r(w_r + u_r) for
admm, z then in its LIVE chunk) and its per-rank state holds each rank's
w_r (and u_r). All are compared with this replay in float64:
max |a - b| / max |b| <= 1e-5 for each rank's blocks, the model and z
(for u over the larger of max |u| and max |w|: u sums differences of
parameters, rounded in float32 at their scale).
--drop-dual replays ADMM without the dual update (u stays 0), a wrong
algorithm that must not match (the driver's negative control).
Exit 0 when everything matches, 1 otherwise.
"""
import argparse
import sys

import numpy as np

sys.dont_write_bytecode = True
from cdpool.checkpoint import load_checkpoint  # noqa: E402  (PYTHONPATH=python)
from cdpool.pool import Pool  # noqa: E402

TOL = 1e-5


def rel(a, b, scale=None):
    """max |a - b| over max |b|, or over scale"""
    s = float(np.max(np.abs(b))) if scale is None else scale
    return float(np.max(np.abs(a - b)) / max(s, 1e-30))


def batches(path):
    """per step, the keys of one rank's batch: the key log's lines in
    order, grouped by (epoch, step)"""
    out, last = [], None
    for line in open(path):
        e, s, k = line.split()
        if (e, s) != last:
            out.append([])
            last = (e, s)
        out[-1].append(k)
    return out


def grad(W, b, x, y):
    """mean softmax cross-entropy of (N,IN) x against labels y: dW, db"""
    logits = x @ W.T + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return p.T @ x, p.sum(axis=0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("init")
    ap.add_argument("run")
    ap.add_argument("keylog")
    ap.add_argument("lr", type=float)
    ap.add_argument("--drop-dual", action="store_true")
    a = ap.parse_args()

    init, run = load_checkpoint(a.init), load_checkpoint(a.run)
    names = list(init.params)
    shapes = [init.params[n].shape for n in names]
    assert len(names) == 2 and len(shapes[0]) == 2, "the model is one dense layer"
    rk = run.ranks
    j, K, sync, rho = rk["nranks"], rk["k"], rk["sync"], rk["rho"]
    steps = run.step
    P = init.param_block().size
    data = {}
    with Pool(a.pool) as pool:
        def sample(key):
            if key not in data:
                img, lab = pool[key]
                x = init.standardize(img.astype(np.float32)).astype(np.float64)
                data[key] = (x.reshape(-1), int(lab))
            return data[key]
        seen = [batches("%s.%d" % (a.keylog, r)) for r in range(j)]
        for r in range(j):
            assert len(seen[r]) == steps, "rank %d logged %d steps, the run has %d" % (
                r, len(seen[r]), steps)
        w0 = init.param_block().astype(np.float64)
        w = [w0.copy() for _ in range(j)]
        z, u = w0.copy(), [np.zeros(P) for _ in range(j)]
        nW = int(np.prod(shapes[0]))
        for s in range(steps):
            for r in range(j):
                xs, ys = zip(*(sample(k) for k in seen[r][s]))
                W, b = w[r][:nW].reshape(shapes[0]), w[r][nW:]
                dW, db = grad(W, b, np.stack(xs), np.array(ys))
                g = np.concatenate([dW.ravel(), db])
                w[r] = w[r] - a.lr * g
                if sync == "admm" and j > 1:
                    w[r] = (w[r] + a.lr * rho * (z - u[r])) / (1 + a.lr * rho)
            if (s + 1) % K:
                continue
            if sync == "average":
                m = sum(w) / j
                w = [m.copy() for _ in range(j)]
            else:
                z = sum(w[r] + u[r] for r in range(j)) / j
                if not a.drop_dual:
                    u = [u[r] + w[r] - z for r in range(j)]
    if sync == "average":
        checks = [("model", run.param_block(), sum(w) / j)]
    else:
        checks = [("model", run.param_block(), sum(w[r] + u[r] for r in range(j)) / j),
                  ("z", run.live, z)]
    for r in range(j):
        checks.append(("rank %d w" % r, rk["data"][r][:P], w[r]))
        if sync == "admm":
            # u sums differences w - z, which float32 rounds at w's scale:
            # a large rho keeps u far below it
            checks.append(("rank %d u" % r, rk["data"][r][P:2 * P], u[r],
                           max(float(np.max(np.abs(u[r]))), float(np.max(np.abs(w[r]))))))
    bad = 0
    print("%s:%d%s, %d ranks, %d steps" % (sync, K, ":%g" % rho if sync == "admm" else "", j,
                                         steps))
    for name, got, want, *scale in checks:
        if got is None:
            bad += 1
            print("  %-10s missing (no LIVE chunk) FAIL" % name)
            continue
        e = rel(got.astype(np.float64), want, *scale)
        ok = e <= TOL
        bad += not ok
        print("  %-10s rel err %.3g %s" % (name, e, "ok" if ok else "FAIL"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
