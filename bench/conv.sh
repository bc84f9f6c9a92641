#!/bin/sh
# bench/conv.sh: one convolution layer's forward, data and filter
# gradients on the CPU backend (bench/conv_bench), Winograd F(2x2, 3x3)
# against the direct convolution (CDP_CPU_WINOGRAD=0) in the same run:
# the two alternate within each round, and each speed-up is the median over
# the rounds of direct / Winograd time (forward + data, filter, and all
# three), so a minute in which the machine is slower sways both sides alike.
#   usage: bench/conv.sh [BUILDDIR]
# BENCH_LAYERS: N,C,H,F a layer, space-separated (default: ResNet-34's
# stages and a U-Net decoder's concat, batch 8); BENCH_ROUNDS (3);
# BENCH_THREADS (1); BENCH_PRECISION (fp32, or bf16: conv_bench -b, both
# sides in bf16 with the kernels CDP_CPU_BF16 chooses; exit 77 where the
# CPU has none, as without AVX512_BF16 and CDP_CPU_BF16_EMU=1).
set -eu
build=${1:-.}
. "$(dirname "$0")/train_lib.sh"     # machine, bf16_or_skip, median
bench=$build/bench/conv_bench
[ -x "$bench" ] || { echo "bench/conv.sh: no $bench (make it first)" >&2; exit 1; }
layers=${BENCH_LAYERS:-"8,32,128,32 8,64,64,64 8,128,32,128 8,256,16,256 8,512,8,512 8,768,16,256"}
rounds=${BENCH_ROUNDS:-3}
threads=${BENCH_THREADS:-1}
case ${BENCH_PRECISION:-fp32} in
fp32) popt= ;;
bf16) popt=-b ;;
*) echo "bench/conv.sh: BENCH_PRECISION '$BENCH_PRECISION' is not fp32 or bf16" >&2; exit 1 ;;
esac
[ -z "$popt" ] || bf16_or_skip conv.sh "$bench" -b -t 1 8,8,8,8
machine
echo "threads: $threads; rounds: $rounds; best of 5 runs of each op a round;" \
	"precision ${BENCH_PRECISION:-fp32}"
printf '%-16s %9s %9s %9s %9s %9s %9s   %s\n' layer "wino fwd" "wino data" "wino filt" \
	"dir fwd" "dir data" "dir filt" "speed-up fwd+data, filter, step (rounds of step)"
# field NAME: NAME's number in the JSON line on standard input
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
ms() { echo "$1" | field fwd_ms; echo "$1" | field data_ms; echo "$1" | field filter_ms; }
for l in $layers; do
	r=0 rows="" runs=""
	while [ "$r" -lt "$rounds" ]; do
		on=$(CDP_CPU_WINOGRAD=1 "$bench" $popt -t "$threads" "$l")
		off=$(CDP_CPU_WINOGRAD=0 "$bench" $popt -t "$threads" "$l")
		row=$(echo $(ms "$on") $(ms "$off") | awk '{ printf "%s %.2f %.2f %.2f", $0,
			($4 + $5) / ($1 + $2), $6 / $3, ($4 + $5 + $6) / ($1 + $2 + $3) }')
		rows="$rows$row
"
		runs="$runs $(echo "$row" | awk '{ print $NF }')"
		r=$((r + 1))
	done
	col() { printf '%s' "$rows" | awk -v k="$1" '{ print $k }' | median; }
	printf '%-16s %9s %9s %9s %9s %9s %9s   %sx %sx %sx (%s)\n' "$l" "$(col 1)" "$(col 2)" \
		"$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)" "$(col 7)" "$(col 8)" "$(col 9)" "${runs# }"
done
