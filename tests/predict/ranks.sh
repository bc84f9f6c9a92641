#!/bin/sh
# cdp-predict on 2 ranks of one host (mpirun): byte-identical output to 1
# process, also for a raster without a CRS; refused before the first
# strip, leaving nothing, when rank 1 reads another raster (narrower,
# shorter, other pixels: named with its host), and before anything when
# rank 1 was given other options (--tta, --size, --overlap); nothing left
# when the watchdog aborts. Skipped without $MPIRUN. Short (a net of 3
# steps: the ranks are compared with 1 process, not with the labels), so
# that CI also runs it under ASan and UBSan (check-unit): rank 0's CRS
# once reached rank 1 without its terminating NUL, which only a
# sanitizer sees every time where the raster has one.
. "$CDP_SRCDIR/tests/tools/common.sh"
need_python
# Under LeakSanitizer, Open MPI's plugins leave allocations it cannot
# name (their modules are unloaded at MPI_Finalize): not what this test
# looks for, so leaks are not checked here; memory errors and undefined
# behaviour are
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
mpirun=${MPIRUN:-}
if [ -z "$mpirun" ] || ! command -v "$mpirun" >/dev/null 2>&1; then
	echo "SKIP: no MPIRUN" >&2
	exit 77
fi
. "$CDP_SRCDIR/tests/predict/threshold_common.sh"
threshold_run 128 3
MP="$mpirun --oversubscribe -np 2"
[ "$(id -u)" -ne 0 ] || MP="$mpirun --allow-run-as-root --oversubscribe -np 2"
cdp-predict -q --threads 1 --prob "$T/run" "$T/b.tif" -o "$T/one.tif"
$MP cdp-predict -q --threads 1 --prob "$T/run" "$T/b.tif" -o "$T/two.tif" ||
	fail "2 ranks failed"
py "a, b = gdal.Open('$T/one.tif').ReadAsArray(), gdal.Open('$T/two.tif').ReadAsArray()
assert np.array_equal(a, b, equal_nan=True)" || fail "2 ranks differ from 1 process"
echo "2 ranks: the same probabilities as 1 process"
# a raster without a CRS: rank 0's empty CRS reached rank 1 as no bytes,
# whose first, never written, rank 1 read as the CRS's first character
# and refused the run ("has no CRS, rank 0's has one") wherever the heap
# left it non-zero; MALLOC_PERTURB_ makes glibc fill every allocation so
py "ds = gdal.Translate('$T/nocrs.tif', '$T/b.tif'); ds.SetProjection(''); ds = None"
py "assert gdal.Open('$T/nocrs.tif').GetProjection() == ''" || fail "nocrs.tif has a CRS"
cdp-predict -q --threads 1 "$T/run" "$T/nocrs.tif" -o "$T/one_nocrs.tif"
MALLOC_PERTURB_=165 $MP cdp-predict -q --threads 1 "$T/run" "$T/nocrs.tif" \
	-o "$T/two_nocrs.tif" || fail "2 ranks failed on a raster without a CRS"
cmp "$T/one_nocrs.tif" "$T/two_nocrs.tif" || fail "2 ranks differ from 1 process without a CRS"
echo "2 ranks: a raster without a CRS"
# node-local copies that differ: rank 1 reads another raster (rk.sh)
# narrower (rank 0 read its strips with the wrong row width), shorter
# (rank 0 waited for a round rank 1 never started), the same size with
# other pixels (a map of two scenes); each refused before the first
# strip, naming rank 1 and its host, and nothing left
cat >"$T/rk.sh" <<'RK'
# rk.sh ARG0 ARG1 CMD...: CMD with rank r's ARGr appended
a=$1 b=$2; shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" -eq 0 ]; then exec "$@" "$a"; else exec "$@" "$b"; fi
RK
mk "$T/narrow.tif" 180 170 2 --nodata-rect 10,20,30,15
mk "$T/short.tif" 200 100 2 --nodata-rect 10,20,30,15
mk "$T/other.tif" 200 170 3 --nodata-rect 10,20,30,15
mkdir "$T/ranks"
# refused_ranks RANK1 RANK0 ARG0 ARG1 ARGS...: exit 1 with rank 1's
# message RANK1 and rank 0's RANK0, nothing written
refused_ranks() {
	rr_1=$1 rr_0=$2
	shift 2
	CDP_DIST_TIMEOUT=60 expect_fail 1 "^cdp-predict: rank 1: $rr_1" \
		$MP sh "$T/rk.sh" "$@" -o "$T/ranks/x.tif"
	grep -q "^cdp-predict: rank 0: $rr_0" "$T/err" ||
		fail "rank 0 does not say why it stops: $(cat "$T/err")"
	[ -z "$(ls -A "$T/ranks")" ] || fail "a refused run left $(ls -A "$T/ranks")"
}
for r in narrow:"is 180x170 pixels, rank 0's is 200x170" \
         short:"is 200x100 pixels, rank 0's is 200x170" other:"holds other pixels"; do
	refused_ranks "'$T/${r%%:*}.tif' on host '.*' ${r#*:}" \
		"another rank's raster is not rank 0's '$T/b.tif'" \
		"$T/b.tif" "$T/${r%%:*}.tif" cdp-predict -q --threads 1 "$T/run"
done
echo "2 ranks: another raster on rank 1 refused"
# ranks given other options (mpirun's MPMD form): a map half of one
# --tta and half of the other, or MPI_ERR_TRUNCATE for another
# --size; refused before anything is read, naming the option
for r in "--tta=flips:--tta is not rank 0's: flips here, none there" \
         "--size=32:--size is not rank 0's: 32 here, not given there" \
         "--overlap=4:--overlap is not rank 0's: 4 here, not given there"; do
	refused_ranks "${r#*:} (host '.*'; every rank must be given the same options)\$" \
		"another rank's options are not rank 0's (see its message)\$" \
		-q "${r%%:*}" cdp-predict -q --threads 1 --prob "$T/run" "$T/b.tif"
done
echo "2 ranks: other options on rank 1 refused"
# the watchdog's abort on rank 0 (rank 1 stuck opening a FIFO, rank 0
# waiting in the first collective with its output open) removes the
# temporary: nothing unwinds after MPI_Abort
mkfifo "$T/fifo.tif"
CDP_DIST_TIMEOUT=2 expect_fail 1 \
	"^cdp-predict: rank 0: MPI_Allreduce did not finish within 2 s: rank 1 on host" \
	$MP sh "$T/rk.sh" "$T/b.tif" "$T/fifo.tif" cdp-predict -q --threads 1 "$T/run" \
	-o "$T/ranks/x.tif"
[ -z "$(ls -A "$T/ranks")" ] || fail "the watchdog's abort left $(ls -A "$T/ranks")"
echo "2 ranks: the watchdog's abort leaves nothing"
