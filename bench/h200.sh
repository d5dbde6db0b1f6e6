#!/usr/bin/env bash
# h200.sh -- the whole H200 benchmark in ONE call of a two-GPU machine
# (nvidia-h200-x2): two lanes of bench/device.sh side by side, each on its own
# GPU, each lane's peers timed on that lane's GPU in the same call, then one
# results file. Build on the build machine first:
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/h200.sh BUILD_DIR OUT_DIR [COMMIT]   (COMMIT: the build's, bench/commit.sh)
#
# lane "linear" (GPU 0): the GPU test suite, the structured-linear workloads
#   (KTUNE_LINEAR_WORKLOADS), bench/peers.py;
# lane "attn" (GPU 1): the attention workloads (KTUNE_ATTN_WORKLOADS), then the
#   attention step (bench inputs and the swept backward's dq dumped, FA2 varlen
#   and unfused_rope timed by bench/peers_attn.py).
# Then bench/collect.py writes OUT_DIR/h200.json from both lanes, and every log
# is packed into OUT_DIR/bench.tar.gz (a device call brings back 8 files).
# With one GPU both lanes run one after the other on it.
# KTUNE_SWEEP_LIMIT (seconds per sweep, default 150) keeps the call inside a
# time-limited machine's limit; a sweep stopped by it is marked unfinished.
# KTUNE_LANES (default "linear attn") runs only the lanes named; with
# KTUNE_COLLECT_KEEP=OLD.json the other workloads' rows are carried over from
# that earlier run, marked with its commit and date (bench/collect.py).
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$PWD/$B/ktune" "${3:-}") || exit 2
mkdir -p "$OUT/linear" "$OUT/attn"
export KTUNE_SWEEP_LIMIT=${KTUNE_SWEEP_LIMIT:-150}
lin=${KTUNE_LINEAR_WORKLOADS:-dense:4096x4096:N1024 lowrank:llama7b_qkvo:N1024 monarch:llama7b_qkvo:N1024}
att=${KTUNE_ATTN_WORKLOADS:-blockattn_fwd:ads_d128_L256 blockattn_bwd:ads_d128_L256 blockattn_bwd_rope:ads_d128_L256 blockattn_fwd:ads_d128_L1024 blockattn_bwd:ads_d128_L1024 blockattn_fwd:ads_d128_L256_b128 blockattn_bwd:ads_d128_L256_b128}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
t0=$(date +%s)
lane() { # name gpu steps workloads
	CUDA_VISIBLE_DEVICES=$2 KTUNE_STEPS="$3" KTUNE_WORKLOADS="$4" KTUNE_BENCH_DB=/tmp/ktune-$1.db \
		bench/device.sh "$B" "$OUT/$1" "$COMMIT" >"$OUT/$1/lane.log" 2>&1
	echo "lane $1 (GPU $2) exit $? after $(( $(date +%s) - t0 )) s" >&2
}
lanes=${KTUNE_LANES:-linear attn}
has() { case " $lanes " in *" $1 "*) return 0 ;; esac; return 1; }
if [ "$ngpu" -ge 2 ] && has linear && has attn; then
	lane linear 0 "tests sweeps peers export" "$lin" &
	lane attn 1 "sweeps attn export" "$att" &
	wait
else
	if has linear; then lane linear 0 "tests sweeps peers export" "$lin"; fi
	if has attn; then lane attn 0 "sweeps attn export" "$att"; fi
fi
status=0
grep -h "FAILED" "$OUT"/*/lane.log >&2 && status=1
shopt -s nullglob
peers=("$OUT"/*/peers_*.json)
sweeps=("$OUT"/*/sweep_*.json)
python3 bench/collect.py "$OUT/h200.json" "$COMMIT" "${peers[*]}" "${sweeps[@]}" >"$OUT/table.txt" 2>&1 || status=1
tar czf "$OUT/bench.tar.gz" -C "$OUT" linear attn 2>/dev/null
rm -rf "$OUT/linear" "$OUT/attn"
echo "== $(( $(date +%s) - t0 )) s" >&2
cat "$OUT/table.txt"
exit $status
