#!/usr/bin/env bash
# search.sh -- winners you can trust, measured on the GPU (issue 29):
# search.json (bench/results/search.json from an H200, search_h100.json from
# an H100), the replay files CI replays, and on an H200 every ktune row of
# bench/results/h200.json re-measured with the tournament.
# Build on the build machine first (bench/device.sh's convention):
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/search.sh BUILD_DIR OUT_DIR [PHASE] [COMMIT]
#
# PHASE "sweeps" (about 6 minutes of GPU time):
#   1. an exhaustive sweep of each of six (family, shape) problems (three
#      outside the development suite, two dense ones large enough to heat the
#      GPU), each ending in its tournament and fresh re-time as any sweep;
#   2. the exhaustive sweep repeated (a new sweep: --seed 2) on two of them;
#   3. each recorded sweep dumped as a replay file (tests/data/replay/ in the
#      repository: OUT_DIR/replay/h200_*.txt come back to be committed);
#   4. guided, halving and random (3 seeds, random at guided's budget; guided
#      with the other recordings of its family as its prior) replayed on them,
#      on the CPU.
# PHASE "sweeps=NAME,NAME..." runs steps 1 to 4 for those problems only and
#   keeps the work folder's database and recordings, so the sweeps can be
#   spread over several calls; a sweep cut off by the call's limit resumes
#   when the same phase runs again on that machine. Step 4 replays every
#   recording the folder holds.
# PHASE "fresh" (about 4 minutes of GPU time): what phase "sweeps" left in
#   the work folder ($KTUNE_SEARCH_WORK, default BUILD_DIR/search: kept on a
#   warm machine; on a fresh one KTUNE_SEARCH_RESTORE=FILE names an earlier
#   call's OUT_DIR/search-work.tar.gz, put in the checkout, unpacked there
#   before any phase runs):
#   5. per problem one `ktune sweep --config ...` on a fresh database: the
#      exhaustive sweeps' top 20 and winners and every replayed winner, all in
#      one tournament of 4 rotated rounds, each run afresh;
#   6. every ktune row of bench/results/h200.json re-measured the same way
#      (its stored config alone, 5 rounds, then a re-time in a fresh worker
#      process): OUT_DIR/h200.json;
#   7. OUT_DIR/search.json from all of it, and a short table last.
# PHASE "fresh=NAME,..." re-times those problems only in step 5 (the others'
#   fresh logs, from an earlier call, stay) and goes on with steps 6 and 7.
# PHASE "all" runs both (over ten minutes: two calls are the plan).
# Logs and JSON summaries are in OUT_DIR/search-logs.tar.gz.
# For trying the script without a GPU: KTUNE_SEARCH_PROBLEMS names a file of
# problem lines (the format of PROBLEMS below), KTUNE_SEARCH_ARGS adds sweep
# flags (e.g. "--worker-backend cpu" with the selftest family), and
# KTUNE_SEARCH_H200=0 skips step 6.
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out/search}
PHASE=${3:-all}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${4:-}") || exit 2
W=${KTUNE_SEARCH_WORK:-$PWD/$B/search}
mkdir -p "$W/logs" "$W/replay" "$W/repeat"
status=0
step() { echo "== $(date +%H:%M:%S) $*" >&2; }

# name | family | shape | variants ("" all) | in the development suite | repeated
PROBLEMS="dense_8192x8192_N8192|dense|tokens=8192,in=8192,out=8192|wgmma_ws|0|1
dense_8192x8192_N16384|dense|tokens=16384,in=8192,out=8192|wgmma_ws|0|0
lowrank_llama7b_qkvo_N1024|lowrank|tokens=1024,in=4096,out=4096,rank=1024|unfused_ws|1|0
blockattn_fwd_d64_L512_h8|blockattn_fwd|seqs=1152,lmax=512,heads=8,head_dim=64,block=64,rope=0||0|0
blockattn_bwd_ads_d128_L256|blockattn_bwd|seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0||1|1
blast_llama1b_qo_N1024|blast|tokens=1024,in=2048,out=2048,blocks=16,rank=256|tcmix_fused|1|0"
[ -n "${KTUNE_SEARCH_PROBLEMS:-}" ] && PROBLEMS=$(cat "$KTUNE_SEARCH_PROBLEMS")
read -r -a xargs_ <<<"${KTUNE_SEARCH_ARGS:-}"
echo "$PROBLEMS" >"$W/problems.txt"
# The card names the recordings (h200_NAME.txt, h100_NAME.txt; "cpu" without
# one) and search.json's device; h200.json's rows are re-measured on an H200 only.
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
TAG=$(grep -o 'H[0-9][0-9]*' <<<"$GPU" | head -n 1 | tr 'H' 'h')
TAG=${TAG:-cpu}
echo "$TAG|${GPU:-no GPU}" >"$W/gpu.txt"
[ "$TAG" = h200 ] || export KTUNE_SEARCH_H200=0

sweep() { # name family shape variants seed -> $W/logs/sweep_NAME_sSEED.json
	local name=$1 fam=$2 shape=$3 var=$4 seed=$5 args=()
	[ -n "$var" ] && args+=(--variants "$var")
	step "exhaustive sweep $name (seed $seed)"
	"$K" sweep --family "$fam" --shape "$shape" "${args[@]}" --seed "$seed" --db "$W/search.db" \
		--threads 16 --json "${xargs_[@]}" </dev/null >"$W/logs/sweep_${name}_s$seed.json" \
		2>"$W/logs/sweep_${name}_s$seed.log" ||
		{ echo "sweep $name FAILED" >&2; tail -n 5 "$W/logs/sweep_${name}_s$seed.log" >&2; status=1; }
	tail -n 1 "$W/logs/sweep_${name}_s$seed.log" >&2
}

dump() { # name seed file: the sweep recorded as a replay file
	local id
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sweep_id"])' \
		"$W/logs/sweep_${1}_s$2.json" 2>/dev/null) || { status=1; return; }
	"$K" replay --db "$W/search.db" --sweep "$id" --dump "$3" </dev/null 2>>"$W/logs/replay_dump.log" ||
		status=1
	sed -i "s|^source .*|source exhaustive sweep (seed $2) of bench/search.sh at $COMMIT, $(date -u +%Y-%m-%d)|" "$3"
}

only=
case $PHASE in
sweeps=*) only=,${PHASE#sweeps=}, PHASE=sweeps ;;
fresh=*) only=,${PHASE#fresh=}, PHASE=fresh ;;
sweeps | fresh | all) ;;
*) echo "search.sh: PHASE is sweeps, sweeps=NAME,..., fresh, fresh=NAME,... or all, not '$PHASE'" >&2; exit 2 ;;
esac
chosen() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }
if [ -n "${KTUNE_SEARCH_RESTORE:-}" ] && [ ! -f "$W/replay.json" ]; then
	tar xzf "$KTUNE_SEARCH_RESTORE" -C "$W" || exit 2
	[ "$(cut -d'|' -f1 "$W/gpu.txt")" = "$TAG" ] ||
		{ echo "search.sh: $KTUNE_SEARCH_RESTORE was recorded on another card ($(cat "$W/gpu.txt"))" >&2; exit 2; }
fi

if [ "$PHASE" = sweeps ] || [ "$PHASE" = all ]; then
	[ -n "$only" ] || rm -f "$W"/search.db*
	while IFS='|' read -r name fam shape var _ rep; do
		chosen "$name" || continue
		sweep "$name" "$fam" "$shape" "$var" 1
		dump "$name" 1 "$W/replay/${TAG}_$name.txt"
	done <<<"$PROBLEMS"
	while IFS='|' read -r name fam shape var _ rep; do
		[ "$rep" = 1 ] && chosen "$name" || continue
		sweep "$name" "$fam" "$shape" "$var" 2
		dump "$name" 2 "$W/repeat/${TAG}_$name.txt"
	done <<<"$PROBLEMS"
	step "replay: guided, halving, random x 3 seeds on the recorded sweeps (CPU)"
	"$K" replay "$W"/replay/"$TAG"_*.txt --strategy guided --strategy halving --strategy random \
		--seeds 1,2,3 --transfer --json </dev/null >"$W/replay.json" 2>"$W/logs/replay.log" ||
		status=1
	"$K" replay "$W"/replay/"$TAG"_*.txt --strategy guided --strategy halving --strategy random \
		--seeds 1,2,3 --transfer </dev/null 2>&1 | tail -n 4 >&2
	mkdir -p "$OUT/replay"
	cp "$W"/replay/"$TAG"_*.txt "$OUT/replay/"
	tar czf "$OUT/search-work.tar.gz" -C "$W" problems.txt gpu.txt replay repeat replay.json logs
fi

if [ "$PHASE" = fresh ] || [ "$PHASE" = all ]; then
	if [ ! -f "$W/replay.json" ]; then
		echo "search.sh: no $W/replay.json: run PHASE sweeps first (or unpack its" \
			"search-work.tar.gz into $W)" >&2
		exit 2
	fi
	rm -f "$W"/fresh.db* "$W"/h200.db*
	while IFS='|' read -r name fam shape var _ rep; do
		chosen "$name" || continue
		mapfile -t cfgs < <(python3 bench/search.py configs "$W" "$name")
		[ "${#cfgs[@]}" -gt 0 ] || { echo "no configs for $name" >&2; status=1; continue; }
		args=()
		for c in "${cfgs[@]}"; do args+=(--config "$c"); done
		step "fresh tournament $name: ${#cfgs[@]} configs x 4 rounds"
		"$K" sweep --family "$fam" --shape "$shape" "${args[@]}" --tournament "${#cfgs[@]}" \
			--rounds 4 --sentinel-every 0 --no-baseline --db "$W/fresh.db" --threads 16 --json \
			"${xargs_[@]}" </dev/null >"$W/logs/fresh_$name.json" 2>"$W/logs/fresh_$name.log" ||
			{ echo "fresh $name FAILED" >&2; tail -n 5 "$W/logs/fresh_$name.log" >&2; status=1; }
	done <"$W/problems.txt"
	step "h200.json: every ktune row re-measured with the tournament"
	: >"$W/h200_rows.txt"
	[ "${KTUNE_SEARCH_H200:-1}" = 1 ] &&
		{ python3 bench/search.py h200-rows bench/results/h200.json >"$W/h200_rows.txt" || status=1; }
	while IFS='|' read -r wl cfg; do
		n=${wl//:/_}
		"$K" sweep --workload "$wl" --config "$cfg" --tournament 1 --rounds 5 --sentinel-every 0 \
			--db "$W/h200.db" --threads 16 --json </dev/null >"$W/logs/h200_$n.json" \
			2>"$W/logs/h200_$n.log" ||
			{ echo "h200 row $wl FAILED" >&2; tail -n 3 "$W/logs/h200_$n.log" >&2; status=1; }
	done <"$W/h200_rows.txt"
	[ "${KTUNE_SEARCH_H200:-1}" = 1 ] &&
		{ python3 bench/search.py h200-update bench/results/h200.json "$W" "$COMMIT" "$OUT/h200.json" ||
			status=1; }
	step "search.json"
	python3 bench/search.py assemble "$W" "$COMMIT" "$OUT/search.json" || status=1
	tar czf "$OUT/search-logs.tar.gz" -C "$W" logs replay.json problems.txt gpu.txt repeat 2>/dev/null
fi
exit $status
