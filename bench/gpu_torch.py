"""gpu_torch.py: the PyTorch side of bench/gpu.sh: training steps of a cdpool
model (the JSON of tests/engine/model_dump, built by torch_model.EngineNet)
on the GPU, timed as bench/engine_bench times ours, one JSON line out.

    python3 gpu_torch.py MODEL.json --precision fp32|tf32|bf16 [--batch N]
                         [--steps S] [--warmup W] [--nchw] [--cudnn-benchmark]
                         [--profile FILE]

A step: forward, the model's loss (torch_model.loss_fn, in float32), backward,
torch.optim.SGD (lr 1e-3, momentum 0.9, weight decay 1e-4, as engine_bench).
Input N(0,1) and labels uniform over the classes, fixed for all steps, on
the GPU. Memory format channels_last unless --nchw. Precision:
  fp32  float32 with TF32 off for cuDNN convolutions and matmuls (the
        counterpart of our fp32)
  tf32  PyTorch's defaults: torch.backends.cudnn.allow_tf32 True (TF32
        convolutions), torch.backends.cuda.matmul.allow_tf32 False (ours
        uses TF32 for both)
  bf16  torch.autocast("cuda", torch.bfloat16) around the forward, with the
        defaults above
cudnn.benchmark stays False (PyTorch's default) unless --cudnn-benchmark.
Warm-up steps run first; the timed steps end with torch.cuda.synchronize().
--profile FILE: after the timed steps, STEPS more under torch.profiler, and
its table of GPU time per operator in FILE (the counterpart of
engine_bench -P: where PyTorch's step spends its time).
"""
import argparse
import json
import sys
import time

import torch

from cdpool.torch_model import EngineNet, loss_fn  # PYTHONPATH=python (gpu.sh)


def write_profile(path, step, steps, title):
    """STEPS steps under torch.profiler; the operator table, by GPU time."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    avg = prof.key_averages()
    table = None
    # the column's name changed from cuda to device in torch 2.4
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            table = avg.table(sort_by=key, row_limit=40)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    with open(path, "w") as f:
        f.write("# torch %s, %s, %d profiled steps (totals over all of them)\n" % (
            torch.__version__, title, steps))
        f.write(table if table is not None else avg.table(row_limit=40))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32")
    ap.add_argument("--batch", type=int, default=0, help="default: the JSON's batch")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--nchw", action="store_true")
    ap.add_argument("--cudnn-benchmark", action="store_true")
    ap.add_argument("--profile", metavar="FILE")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_torch.py: torch %s sees no CUDA device" % torch.__version__)
    with open(args.model) as f:
        model = json.load(f)
    prec = args.precision
    torch.backends.cudnn.allow_tf32 = prec != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    dev = torch.device("cuda")
    fmt = torch.contiguous_format if args.nchw else torch.channels_last
    n = args.batch or model["batch"]
    c, h, w = model["input"]
    out = model["layers"][model["out_layer"]]["out"]
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(n, c, h, w, generator=g).to(dev).contiguous(memory_format=fmt)
    k = model["classes"] if model["loss"] == "ce" else 2
    labels = torch.randint(0, k, (n, out[1] * out[2]), generator=g).to(dev)
    net = EngineNet(model).to(dev).to(memory_format=fmt)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-4)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=prec == "bf16"):
            logits = net(x)
        loss = loss_fn(model, logits.float(), labels, ignore=-1)   # no check's sync
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak_mib = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps({
        "impl": "torch " + torch.__version__, "precision": prec,
        "layout": "nchw" if args.nchw else "channels_last",
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark, "batch": n, "steps": args.steps,
        "seconds": dt, "samples_per_s": args.steps * n / dt, "loss": loss.item(),
        "gpu": torch.cuda.get_device_name(0),
        "max_memory_mib": peak_mib}), flush=True)
    if args.profile:
        # after the result line, and never fatal: a PyTorch without CUPTI
        # still gives its timing
        title = "%s %s batch %d" % (torch.cuda.get_device_name(0), prec, n)
        try:
            write_profile(args.profile, step, args.steps, title)
        except Exception as e:  # noqa: BLE001 (any profiler failure)
            with open(args.profile, "w") as f:
                f.write("# torch.profiler failed: %s: %s\n" % (type(e).__name__, e))


if __name__ == "__main__":
    main()
