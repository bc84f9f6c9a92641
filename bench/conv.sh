#!/bin/sh
# bench/conv.sh: one convolution layer's forward, data and filter
# gradients on the CPU backend (bench/conv_bench), Winograd F(2x2, 3x3)
# against the direct convolution (CDP_CPU_WINOGRAD=0) in the same run:
# the two alternate within each round, and the speed-up is the median over
# the rounds of (direct forward + data) / (Winograd forward + data), so a
# minute in which the machine is slower sways both sides alike.
#   usage: bench/conv.sh [BUILDDIR]
# BENCH_LAYERS: N,C,H,F a layer, space-separated (default: ResNet-34's
# stages and a U-Net decoder's concat, batch 8); BENCH_ROUNDS (3);
# BENCH_THREADS (1).
set -eu
build=${1:-.}
bench=$build/bench/conv_bench
[ -x "$bench" ] || { echo "bench/conv.sh: no $bench (make it first)" >&2; exit 1; }
layers=${BENCH_LAYERS:-"8,32,128,32 8,64,64,64 8,128,32,128 8,256,16,256 8,512,8,512 8,768,16,256"}
rounds=${BENCH_ROUNDS:-3}
threads=${BENCH_THREADS:-1}
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "threads: $threads; rounds: $rounds; best of 5 runs of each op a round"
printf '%-16s %10s %10s %10s %10s %10s   %s\n' layer "wino fwd" "wino data" "dir fwd" \
	"dir data" filter "speed-up (rounds)"
for l in $layers; do
	r=0 out=""
	while [ "$r" -lt "$rounds" ]; do
		on=$(CDP_CPU_WINOGRAD=1 "$bench" -t "$threads" "$l")
		off=$(CDP_CPU_WINOGRAD=0 "$bench" -t "$threads" "$l")
		out="$out$on $off
"
		r=$((r + 1))
	done
	printf '%s' "$out" | awk -v layer="$l" '
	function num(s, key,   i) { i = index(s, "\"" key "\":"); return substr(s, i + length(key) + 3) + 0 }
	function med(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	NF {
		split($0, h, " "); n++
		wf[n] = num(h[1], "fwd_ms"); wd[n] = num(h[1], "data_ms")
		df[n] = num(h[2], "fwd_ms"); dd[n] = num(h[2], "data_ms"); fl[n] = num(h[2], "filter_ms")
		s[n] = (df[n] + dd[n]) / (wf[n] + wd[n]); runs = runs sprintf(" %.2f", s[n])
	}
	END {
		for (i = 1; i <= n; i++) t[i] = s[i]
		printf "%-16s %10.2f %10.2f %10.2f %10.2f %10.2f   %.2fx (%s)\n", layer, med(wf, n),
		       med(wd, n), med(df, n), med(dd, n), med(fl, n), med(t, n), substr(runs, 2)
	}'
done
