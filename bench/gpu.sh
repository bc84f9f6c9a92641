#!/bin/sh
# bench/gpu.sh: training-step throughput of the CUDA backend against PyTorch
# on the same GPU, the same model definition and the same batch. One step =
# forward, loss (ce), backward, SGD step (momentum 0.9, weight decay 1e-4):
#   unet        unet.cfg width=32 depth=4, 3x512x512, batch 32
#   classifier  classifier.cfg (width 32, 3 blocks), 3x64x64, batch 256
# in three precisions:
#   fp32  ours: IEEE float32 (no TF32); PyTorch: cudnn.allow_tf32 and
#         matmul.allow_tf32 off
#   tf32  ours: TF32 tensor cores for convolutions and GEMMs; PyTorch: its
#         defaults (cudnn.allow_tf32 on, matmul.allow_tf32 off)
#   bf16  ours: bf16 convolution/GEMM inputs, channels-last, float32
#         accumulation and master weights; PyTorch: torch.autocast bf16
# Ours: bench/engine_bench -d cuda -p PREC. PyTorch: bench/gpu_torch.py
# (channels_last; the model from tests/engine/model_dump's JSON), cudnn
# algorithm search off on both sides (PyTorch's default) unless
# BENCH_CUDNN_BENCHMARK=1 turns it on for both (CDP_CUDNN_BENCHMARK=1 and
# cudnn.benchmark). Warm-up steps are not timed; each side synchronises the
# device before reading the clock. Each configuration runs BENCH_REPEAT
# times, interleaved, and the fastest run counts. Prints one table: samples/s
# of both and the ratio ours / PyTorch per model and precision, and each
# side's TFLOP/s (3 x the forward's conv/dense FLOPs) with its share of the
# GPU's dense peak where the GPU is one the script knows (H100/H200, A100).
#   usage: bench/gpu.sh [BUILDDIR]
#   env: BENCH_STEPS (10), BENCH_WARMUP (3), BENCH_REPEAT (2),
#        BENCH_MODELS ("unet classifier"), BENCH_PRECISIONS ("fp32 tf32 bf16"),
#        BENCH_CUDNN_BENCHMARK (0), TORCH_PYTHON (python3),
#        BENCH_PROFILE_DIR (unset): in the first repeat, per model and
#        precision, also write where each side's step spends its time:
#        MODEL-PREC-cdpool.txt (engine_bench -P: per layer and layer type)
#        and MODEL-PREC-torch.txt (torch.profiler, per operator); profiled
#        steps run after the timed ones and do not change the numbers
# Exit 77 (with a message) when the machine has no NVIDIA GPU (checked
# before anything is built) or this build sees none (configured without
# CUDA). Makes tests/engine/model_dump and tests/gpu/test_ops, check
# programs that plain `make` leaves unbuilt, in BUILDDIR first.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src}" && pwd)
steps=${BENCH_STEPS:-10}
warmup=${BENCH_WARMUP:-3}
repeat=${BENCH_REPEAT:-2}
models_run=${BENCH_MODELS:-unet classifier}
precs=${BENCH_PRECISIONS:-fp32 tf32 bf16}
PY=${TORCH_PYTHON:-python3}
dump=$build/tests/engine/model_dump
bench=$build/bench/engine_bench
probe=$build/tests/gpu/test_ops
models=$src/share/cdpool/models
# gpu_torch.py imports the torch twin from python/cdpool
PYTHONPATH=$src/python${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH PYTHONDONTWRITEBYTECODE

# no NVIDIA device node and no nvidia-smi that lists a GPU: nothing to
# measure, and nothing to build for it
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu.sh: no NVIDIA GPU here (no /dev/nvidia0, no nvidia-smi): nothing to measure"
	exit 77
fi
# model_dump and test_ops are check programs, which plain `make` leaves
# unbuilt (or stale): build them here, in the tree where make ran
if ! make -s -C "$build" tests/engine/model_dump tests/gpu/test_ops bench/engine_bench >&2; then
	echo "gpu.sh: cannot make tests/engine/model_dump, tests/gpu/test_ops and" \
		"bench/engine_bench in '$build' (BUILDDIR: where configure and make ran)" >&2
	exit 1
fi
n=$("$probe" --count-devices)
if [ "$n" -eq 0 ]; then
	echo "gpu.sh: no CUDA device visible to this build (cdp_cuda_device_count() == 0): nothing to measure"
	exit 77
fi
if ! tv=$("$PY" -c 'import torch; assert torch.cuda.is_available(); print(torch.__version__)' 2>/dev/null); then
	echo "gpu.sh: $PY has no torch that sees a GPU" >&2
	exit 1
fi
tor_flags= our_env=
if [ "${BENCH_CUDNN_BENCHMARK:-0}" = 1 ]; then
	tor_flags=--cudnn-benchmark
	our_env=CDP_CUDNN_BENCHMARK=1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "${BENCH_PROFILE_DIR:-}" ] || mkdir -p "$BENCH_PROFILE_DIR"

echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
echo "steps: $warmup warm-up + $steps timed, best of $repeat; torch $tv ($PY);" \
	"cudnn benchmark: ${BENCH_CUDNN_BENCHMARK:-0}"

# model NAME CFG BATCH ARGS...: the JSON (at batch 1: it only describes the
# model), then both sides per precision
model() {
	name=$1 cfg=$2 batch=$3
	shift 3
	"$dump" -b 1 "$@" "$cfg" >"$tmp/$name.json"
	i=0
	while [ "$i" -lt "$repeat" ]; do
		for p in $precs; do
			our_prof= tor_prof=
			if [ "$i" -eq 0 ] && [ -n "${BENCH_PROFILE_DIR:-}" ]; then
				our_prof="-P $BENCH_PROFILE_DIR/$name-$p-cdpool.txt"
				tor_prof="--profile $BENCH_PROFILE_DIR/$name-$p-torch.txt"
			fi
			# shellcheck disable=SC2086
			env $our_env "$bench" -d cuda -p "$p" -n "$steps" -w "$warmup" -b "$batch" $our_prof "$@" "$cfg" \
				>>"$tmp/$name.runs" || echo "{\"impl\": \"cdpool (failed)\", \"precision\": \"$p\"}" >>"$tmp/$name.runs"
			# shellcheck disable=SC2086
			"$PY" "$src/bench/gpu_torch.py" "$tmp/$name.json" --precision "$p" --batch "$batch" \
				--steps "$steps" --warmup "$warmup" $tor_flags $tor_prof >>"$tmp/$name.runs" ||
				echo "{\"impl\": \"torch (failed)\", \"precision\": \"$p\"}" >>"$tmp/$name.runs"
		done
		i=$((i + 1))
	done
}

for m in $models_run; do
	case $m in
	unet) model unet "$models/unet.cfg" 32 -D width=32 -D depth=4 -i 3,512,512 ;;
	classifier) model classifier "$models/classifier.cfg" 256 -i 3,64,64 ;;
	*) echo "gpu.sh: unknown model '$m'" >&2; exit 1 ;;
	esac
done

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
"$PY" - "$tmp" "$gpu_name" $models_run <<'PYEOF'
import json, math, os, sys
tmp, gpu, names = sys.argv[1], sys.argv[2], sys.argv[3:]

# Dense peaks in TFLOP/s by the vendors' datasheets (fp32 without tensor
# cores, tf32 and bf16 tensor cores, no sparsity), longest name first
PEAKS = [("H200 NVL", (60, 418, 835)), ("H100 NVL", (60, 418, 835)),
         ("H100 PCIe", (51, 378, 756)), ("H200", (67, 495, 989)), ("H100", (67, 495, 989)),
         ("A100", (19.5, 156, 312))]
peak = next((p for k, p in PEAKS if k in gpu), None)

def step_flops(path):
    """3 x the forward's multiply-adds x 2 (forward, data and filter
    gradients) of the conv, deconv and dense layers, per sample"""
    with open(path) as f:
        m = json.load(f)
    fl = 0
    for l in m["layers"]:
        if l["type"] in ("conv", "deconv", "dense"):
            w = math.prod(l["params"][0]["shape"])
            o, i = l["out"], l["in"][0]
            fl += 2 * w * (i[1] * i[2] if l["type"] == "deconv" else o[1] * o[2])
    return 3 * fl

print("\n%-11s %-6s %14s %14s %8s  %-14s %-14s %s" % (
    "model", "prec", "cdpool smp/s", "torch smp/s", "ratio", "cdpool TF/s", "torch TF/s",
    "torch peak MiB"))
bad = False
for name in names:
    best = {}
    fl = step_flops(os.path.join(tmp, name + ".json"))
    with open(os.path.join(tmp, name + ".runs")) as f:
        for line in f:
            r = json.loads(line)
            side = "ours" if r["impl"].startswith("cdpool") else "torch"
            key = (side, r["precision"])
            s = r.get("samples_per_s", 0.0)
            if key not in best or s > best[key].get("samples_per_s", 0.0):
                best[key] = r
    for prec in dict.fromkeys(k[1] for k in best):
        o, t = best.get(("ours", prec), {}), best.get(("torch", prec), {})
        so, st = o.get("samples_per_s", 0.0), t.get("samples_per_s", 0.0)
        bad |= not so or not st
        kinds = ("fp32", "tf32", "bf16")
        pk = peak[kinds.index(prec)] if peak and prec in kinds else None
        def tf(sps):
            v = fl * sps / 1e12
            return "%.1f (%.1f%%)" % (v, 100 * v / pk) if pk else "%.1f" % v
        print("%-11s %-6s %14.2f %14.2f %8s  %-14s %-14s %s" % (
            name, prec, so, st, "%.2fx" % (so / st) if so and st else "-", tf(so), tf(st),
            "%.0f" % t["max_memory_mib"] if "max_memory_mib" in t else "-"))
print("(ratio: cdpool / PyTorch samples per second; a 0 is a run that failed; TF/s: 3 x the")
print(" forward's conv/dense FLOPs a sample, %s)" % (
    "with its share of the %s's dense peak, %s TFLOP/s fp32/tf32/bf16"
    % (gpu, "/".join(str(x) for x in peak)) if peak else "no share: no known peak for '%s'" % gpu))
sys.exit(1 if bad else 0)
PYEOF
