"""ddp_grad.py: a PyTorch DDP run over the pool against cdp-train, one rank
of J (torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    ddp_grad.py DIR EPOCHS

DIR holds python.sh's fixtures: the road pool and train.keys, first_plain/
(cdp-train --batch 4 --steps 1 of tests/train/small.cfg at 32x32, seed 7,
SGD) and init_plain/params0.f32 (model_dump's initial weights for seed 7,
cdp-train's). The torch twin of the checkpoint's model, read from the cfg
it holds, starts from those weights, reads the pool with BlockSampler at
a per-rank batch of 4 / J (the same global batch) and takes SGD steps with
the checkpoint's settings under DistributedDataParallel (gloo). Rank 0
checks that
  - the first step's loss, averaged over the ranks, is cdp-train's step-1
    loss (metrics.jsonl);
  - its gradient, DDP's average over the ranks, is cdp-train's: the SGD
    momentum buffer the checkpoint holds after one step from an empty one
    (v = g + weight_decay w0);
  - the weights after that step are the checkpoint's;
then trains EPOCHS epochs and prints "epoch E loss L" for each; exit 1 with
"FAIL ..." on a mismatch. Small.cfg has no batchnorm and no ignored labels,
so the mean of the ranks' losses is the loss of the global batch.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import cdpool
from cdpool.model import model_of
from cdpool.torch_model import EngineNet, loss_fn


def fail(why):
    print("FAIL", why, flush=True)
    sys.exit(1)


def main():
    T, epochs = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, J = dist.get_rank(), dist.get_world_size()
    ck = cdpool.load_checkpoint(os.path.join(T, "first_plain", "checkpoint.cdpt"))
    o = ck.optim
    if ck.step != 1 or o["type"] != "sgd" or o["policy"] != "constant" or o["warmup"] != 0 \
            or o["clip_norm"] != 0 or o["accumulate"] != 1:
        fail("the fixture is not one unclipped constant-lr SGD step: %r" % {k: o[k] for k in (
            "type", "policy", "warmup", "clip_norm", "accumulate")})
    model = model_of(ck)
    net = EngineNet(model)
    w0 = np.fromfile(os.path.join(T, "init_plain", "params0.f32"), "<f4")
    net.load_blocks(w0)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=float(o["lr"]), momentum=float(o["momentum"]),
                          weight_decay=float(o["weight_decay"]), nesterov=bool(o["nesterov"]))
    pool = cdpool.Pool(os.path.join(T, "pool"))
    data = cdpool.PoolDataset(pool, cdpool.read_keys(os.path.join(T, "train.keys"), pool=pool))
    b = ck.batch // J
    sampler = cdpool.BlockSampler(len(data), b, seed=ck.seed)
    loader = DataLoader(data, batch_size=b, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = loss_fn(model, ddp(x), y.reshape(b, -1))
            loss.backward()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean = float(mean) / J
            if epoch == 0 and step == 0 and rank == 0:
                first_step(ck, net, w0, mean, T)
            opt.step()
            if epoch == 0 and step == 0 and rank == 0:
                got = net.param_block()
                want = ck.param_block().astype(np.float64)
                err = np.max(np.abs(got - want))
                if not err <= 1e-6 * max(1.0, np.max(np.abs(want))):
                    fail("the weights after one step differ from cdp-train's by %g" % err)
                print("ok   the weights after one step are cdp-train's within %.1e" % err)
            total += mean
        if rank == 0:
            print("epoch", epoch, "loss", total / len(loader), flush=True)
    dist.destroy_process_group()


def first_step(ck, net, w0, loss, T):
    want_loss = next(json.loads(line)["loss"] for line in
                     open(os.path.join(T, "first_plain", "metrics.jsonl"))
                     if '"type":"step"' in line and '"step":1,' in line)
    if not abs(loss - want_loss) <= 1e-5 * abs(want_loss):
        fail("the first step's loss %r, cdp-train's %r" % (loss, want_loss))
    g = np.concatenate([p.grad.detach().reshape(-1).numpy() for p in net.parameters()])
    o = ck.optim
    want = o["v"].astype(np.float64) - float(o["weight_decay"]) * w0
    err = np.max(np.abs(g - want))
    scale = np.max(np.abs(want))
    if not (scale > 0 and err <= 1e-4 * scale):
        fail("the first step's gradient differs from cdp-train's by %g (largest %g)" % (err, scale))
    print("ok   rank 0 of %d: the first step's loss %.9g is cdp-train's %.9g; its gradient "
          "(%d values, largest %.3g) is cdp-train's within %.1e" % (
              dist.get_world_size(), loss, want_loss, g.size, scale, err), flush=True)


if __name__ == "__main__":
    main()
