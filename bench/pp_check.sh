#!/usr/bin/env bash
# pp_check.sh -- the ping-pong GEMM kernel (templates/gemm_pingpong.cuh,
# -DWS=1 -DPINGPONG=1) on an sm_90 GPU, in one call: builds the dev harness
# tools/gemm_probe.cu with nvcc, runs its edge shapes (`pingpong small`:
# M, N, K off the tile, padded C strides, a shared B, 1 / 5 / 7 / SM-count
# CTAs) under compute-sanitizer racecheck and memcheck, then times the
# kernel beside cuBLAS, the one-tile and the persistent ws kernels on the
# stage GEMMs (`pingpong`, every output checked against cuBLAS). The
# probe's closing table and the sanitizers' summaries come last; every log
# is copied to OUT.
#
#   bench/pp_check.sh [OUT]     (default: $OUT, else bench/out/pp)
#
# Needs nvcc, cuBLAS and compute-sanitizer under $CUDA (/usr/local/cuda);
# no network, no ktune build. REPS (default 30) repetitions per timing.
# About 2-4 minutes on an H100 / H200 (the nvcc build is the first minute).
# Exit 0 when everything verified and the sanitizers found nothing, 1 when
# not, 2 when the probe could not be built.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:-${OUT:-bench/out/pp}}
CUDA=${CUDA:-/usr/local/cuda}
REPS=${REPS:-30}
BIN=build-dev/gemm_probe
export LD_LIBRARY_PATH=$CUDA/lib64:${LD_LIBRARY_PATH:-}
export PATH=$CUDA/bin:$PATH
mkdir -p "$OUT" build-dev || exit 2
status=0

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
	--format=csv >"$OUT/gpu.txt" 2>&1
echo "pp_check: building $BIN" >&2
if ! nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Itemplates --resource-usage \
	-o "$BIN" tools/gemm_probe.cu -lcublas >"$OUT/build.log" 2>&1; then
	tail -n 30 "$OUT/build.log" >&2
	echo "pp_check: the build failed (log in $OUT/build.log)" >&2
	exit 2
fi
# what was built: the sources' hashes, which `sha256sum -c` checks against
# a checkout (a device copy's git metadata can lag its files, so HEAD there
# is no label)
sha256sum tools/gemm_probe.cu tools/*.h templates/*.cuh >"$OUT/sources.sha256" 2>/dev/null

# $1 tool: the edge shapes under compute-sanitizer, at most 150 s
sanitize() {
	local tool=$1 rc
	echo "pp_check: compute-sanitizer --tool $tool $BIN 1 pingpong small" >&2
	timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 "$BIN" 1 pingpong small >"$OUT/$tool.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "pp_check: $tool exited $rc (9: the sanitizer reported errors, 124: time out)" >&2
		status=1
	fi
}
sanitize racecheck
sanitize memcheck

echo "pp_check: timing ($REPS repetitions)" >&2
timeout 240 "$BIN" "$REPS" pingpong >"$OUT/pingpong.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	echo "pp_check: gemm_probe $REPS pingpong exited $rc (3: a wrong result, 4: a hang)" >&2
	status=1
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >>"$OUT/gpu.txt" 2>&1

echo
echo "== edge shapes under compute-sanitizer =="
for tool in racecheck memcheck; do
	printf '%-10s ' "$tool"
	grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|HANG|WRONG' "$OUT/$tool.log" | tr '\n' ' '
	grep -c 'WRONG' "$OUT/$tool.log" | sed 's/^/wrong lines: /'
done
echo "== wrong lines in the timing run: $(grep -c WRONG "$OUT/pingpong.log") =="
sed -n '/^ping-pong vs persistent/,$p' "$OUT/pingpong.log"
echo "logs: $OUT"
exit $status
