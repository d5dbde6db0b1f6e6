#!/usr/bin/env bash
# device.sh -- the H200 benchmark: run on the GPU machine from the repo root,
# with ktune built on the build machine by
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
# (SQLite, jansson, libmicrohttpd and CUnit linked statically; NVRTC and the
# driver found at run time) and the build folder taken along.
#
#   bench/device.sh BUILD_DIR OUT_DIR [COMMIT]   (COMMIT: the build's, bench/commit.sh)
#
# 1. the GPU test suite with a missing GPU made a failure (KTUNE_REQUIRE_GPU=1);
# 2. NVRTC compiles the whole space of every family (KTUNE_COMPILE_ALL=1, the
#    four compile suites side by side; ~34,000 programs, over one 10-minute
#    call on 16 cores: KTUNE_COMPILE_SHARD=K/N compiles the part K of N, so
#    N calls with K = 0 .. N-1 cover it, test_blockattn's small space and
#    the CPU and GPU suites of the other three in part 0);
# 3. full sweeps of the development suite's dense and low-rank workloads
#    (dense with a planted faulting and a planted hanging kernel);
# 4. the peers (docs/benchmarks.md) timed in the same run;
# 5. OUT_DIR/h200.json in docs/benchmarks.md's format, the database and its JSON export.
# The short table comes last; logs are in OUT_DIR.
#
# KTUNE_WORKLOADS lists workload ids; `ID` sweeps ID in full, `ID@random:N`
# with a random budget of N configs, `ID@limit:S` with --time-limit S (both
# may be given: `ID@random:24@limit:60`), `ID@variants:A+B` only variants A
# and B (ktune sweep --variants). KTUNE_SWEEP_LIMIT=S is the default
# --time-limit of every sweep (a time-limited machine: the best so far is
# still retimed and reported, and its row marked unfinished).
# KTUNE_STEPS picks steps (default: "tests compile sweeps peers export collect";
# "attn" adds the attention GPU suite and FA2 peers),
# so the run can be split over calls of a time-limited machine; collect reads
# every OUT_DIR/sweep_*.json plus those of KTUNE_MORE_RESULTS (a folder from an
# earlier call of the same run).
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KTUNE_REQUIRE_GPU=1 KTUNE_BIN=$PWD/$B/ktune
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
db=${KTUNE_BENCH_DB:-$OUT/h200.db}   # outside OUT_DIR to keep it across calls
status=0
step() { echo "== $*" >&2; }
steps=" ${KTUNE_STEPS:-tests compile sweeps peers export collect} "
want() { [[ "$steps" == *" $1 "* ]]; }

if want tests; then
	step "GPU test suite"
	"$B/tests/test_gpu" >"$OUT/test_gpu.log" 2>&1 || { echo "test_gpu FAILED" >&2; status=1; }
	tail -n 8 "$OUT/test_gpu.log" >&2
fi

if want compile; then
	# Every config of every family's space, for every target its tests name
	# (CI compiles extremes plus a sample: the whole spaces need these cores).
	# test_blockattn also verifies every attention config on small ragged
	# shapes on the GPU. The four run side by side.
	# Parts 1 .. N-1 run the compile suites alone (KTUNE_TEST_SUITE=nvrtc):
	# the CPU and GPU suites ran in part 0 and need not run N times.
	suites="test_compile test_blast test_monarch test_blockattn"
	only=
	case ${KTUNE_COMPILE_SHARD:-} in
	"" | 0/*) ;;
	*) suites="test_compile test_blast test_monarch" only=nvrtc ;;
	esac
	step "NVRTC compiles every config of every family ${KTUNE_COMPILE_SHARD:+(part $KTUNE_COMPILE_SHARD)}"
	pids=()
	for t in $suites; do
		KTUNE_COMPILE_ALL=1 KTUNE_TEST_SUITE=$only "$B/tests/$t" >"$OUT/compile_all_$t.log" 2>&1 &
		pids+=($!)
	done
	i=0
	for t in $suites; do
		wait "${pids[$i]}" || { echo "compile-all $t FAILED" >&2; status=1; }
		echo "$t: $(grep -hE '^ *(compiling|asserts)' "$OUT/compile_all_$t.log" | tr -s ' ' | tr '\n' ' ')" >&2
		i=$((i + 1))
	done
fi

read -r -a workloads <<<"${KTUNE_WORKLOADS:-dense:4096x4096:N1024 lowrank:llama7b_qkvo:N1024}"
# KTUNE_DEVICES=0,1: the workloads run as one multi-GPU sweep (one worker per
# GPU, problems shared); KTUNE_SWEEP_ARGS adds flags (e.g. a random budget).
read -r -a extra_args <<<"${KTUNE_SWEEP_ARGS:-}"
if want sweeps && [ -n "${KTUNE_DEVICES:-}" ]; then
	wargs=()
	for w in "${workloads[@]}"; do wargs+=(--workload "$w"); done
	name=fleet_$(date +%s)
	step "sweep ${workloads[*]} on GPUs $KTUNE_DEVICES ${extra_args[*]}"
	"$K" sweep "${wargs[@]}" --devices "$KTUNE_DEVICES" --db "$db" --json "${extra_args[@]}" \
		>"$OUT/sweep_$name.json" 2>"$OUT/sweep_$name.log" ||
		{ echo "sweep FAILED (see $OUT/sweep_$name.log)" >&2; tail -n 5 "$OUT/sweep_$name.log" >&2; status=1; }
	tail -n "$(( ${#workloads[@]} + 1 ))" "$OUT/sweep_$name.log" >&2
elif want sweeps; then
	for entry in "${workloads[@]}"; do
		w=${entry%%@*}
		name=${w//:/_}
		plant=() how=() limit=${KTUNE_SWEEP_LIMIT:-}
		[ "${w%%:*}" = dense ] && plant=(--plant)
		IFS=@ read -r -a opts <<<"${entry#"$w"}"
		for o in "${opts[@]}"; do
			case "$o" in
			random:*) how+=(--strategy random --budget "${o#random:}") ;;
			limit:*) limit=${o#limit:} ;;
			variants:*) v=${o#variants:}; how+=(--variants "${v//+/,}") ;;
			"") ;;
			*) echo "device.sh: $entry: unknown option '$o'" >&2; status=1 ;;
			esac
		done
		[ -n "$limit" ] && how+=(--time-limit "$limit")
		step "sweep $w ${plant[*]} ${how[*]} ${extra_args[*]}"
		"$K" sweep --workload "$w" --db "$db" --json "${plant[@]}" "${how[@]}" "${extra_args[@]}" \
			>"$OUT/sweep_$name.json" 2>"$OUT/sweep_$name.log" ||
			{ echo "sweep $w FAILED (see $OUT/sweep_$name.log)" >&2; tail -n 5 "$OUT/sweep_$name.log" >&2; status=1; }
		tail -n 1 "$OUT/sweep_$name.log" >&2
	done
fi
want sweeps && "$K" trials --db "$db" >"$OUT/trials.txt" 2>&1

if want attn; then
	# The swept ktune rows of this lane (winner config keys included); the
	# bench inputs and the swept plain backward winner's dq, dk, dv on them
	# dumped by tests/test_blockattn (that one config, verified against the
	# GPU reference first), at block 64 and, where swept, at block 128; then
	# FA2 on the same lengths and inputs, the float64 dq, dk, dv errors of
	# both, and unfused_rope from the swept plain backward.
	step "attention: winner's dq, FA2 peers"
	python3 - "$OUT" >"$OUT/ktune_attn_rows.json" <<'PY'
import glob, json, sys
rows = []
for p in glob.glob(sys.argv[1] + "/sweep_*.json"):
    try:
        d = json.load(open(p))
    except ValueError:
        continue  # a sweep that was killed printed nothing
    for s in d.get("sweeps", [d]):
        if s.get("workload", "").startswith("blockattn") and s.get("verified"):
            rows.append({"workload": s["workload"], "impl": "ktune", "us": s["us"],
                         "config": s["config"]})
json.dump(rows, sys.stdout)
PY
	# winner WORKLOAD: the config key of its swept, verified winner, or ""
	winner() {
		python3 -c 'import json,sys; print(next((r["config"] for r in json.load(open(sys.argv[1]))
			if r["workload"] == sys.argv[2]), ""))' "$OUT/ktune_attn_rows.json" "$1"
	}
	# dump BLOCK DIR KEY LOG: that config's inputs and gradients at the
	# bench shape at BLOCK into DIR (KTUNE_BLOCKATTN_DUMP_BLOCK)
	dump() {
		rm -rf "$2" && mkdir -p "$2"
		KTUNE_BLOCKATTN_DUMP="$2" KTUNE_BLOCKATTN_DUMP_CONFIG="$3" KTUNE_BLOCKATTN_DUMP_BLOCK="$1" \
			"$B/tests/test_blockattn" >"$4" 2>&1
		local rc=$?
		grep -E "asserts|FAIL|dumped" "$4" >&2
		return $rc
	}
	# swept SUFFIX: whether this lane swept a blockattn workload of that
	# shape; only those shapes' peers are timed, so a lane that re-runs
	# some workloads (KTUNE_COLLECT_KEEP keeping the rest) pairs no fresh
	# FA2 time with a kept ktune row
	swept() {
		local w
		for w in "${workloads[@]%%@*}"; do
			case $w in blockattn*:"$1") return 0 ;; esac
		done
		return 1
	}
	: >"$OUT/peers_attn.log"
	if swept ads_d128_L256; then
		cfg=$(winner blockattn_bwd:ads_d128_L256)
		rm -rf /tmp/ktune-attn && mkdir -p /tmp/ktune-attn
		if [ -n "$cfg" ]; then
			dump 64 /tmp/ktune-attn "$cfg" "$OUT/test_blockattn_dump.log" ||
				{ echo "test_blockattn dump FAILED" >&2; status=1; }
		else
			echo "no verified blockattn_bwd:ads_d128_L256 winner: no dq dump" >&2
			status=1
		fi
		python3 bench/peers_attn.py "$OUT/peers_attn_$(date +%s).json" --inputs /tmp/ktune-attn \
			--ktune "$OUT/ktune_attn_rows.json" >>"$OUT/peers_attn.log" 2>&1 ||
			{ echo "peers_attn FAILED" >&2; status=1; }
	fi
	if swept ads_d128_L1024; then
		python3 bench/peers_attn.py "$OUT/peers_attn_L1024_$(date +%s).json" --lmax 1024 \
			>>"$OUT/peers_attn.log" 2>&1 || { echo "peers_attn L1024 FAILED" >&2; status=1; }
	fi
	# Block 128 alike, where this run swept and verified it: FA2 on the
	# dumped inputs and the float64 errors of both sides' dq, dk, dv. Its
	# absence (a call that did not sweep it) leaves FA2 on its own inputs.
	if swept ads_d128_L256_b128; then
		cfg=$(winner blockattn_bwd:ads_d128_L256_b128)
		b128=()
		if [ -z "$cfg" ]; then
			echo "no verified blockattn_bwd:ads_d128_L256_b128 winner: no block-128 dump, FA2 alone on its own inputs" >&2
		elif dump 128 /tmp/ktune-attn-b128 "$cfg" "$OUT/test_blockattn_dump_b128.log"; then
			b128=(--inputs /tmp/ktune-attn-b128)
		else
			echo "test_blockattn dump at block 128 FAILED: FA2 alone on its own inputs" >&2
			status=1
		fi
		python3 bench/peers_attn.py "$OUT/peers_attn_b128_$(date +%s).json" --block 128 \
			"${b128[@]}" >>"$OUT/peers_attn.log" 2>&1 ||
			{ echo "peers_attn block 128 FAILED" >&2; status=1; }
	fi
	tail -n 12 "$OUT/peers_attn.log" >&2
fi

if want peers; then
	step "peers"
	python3 bench/peers.py "$OUT/peers_$(date +%s).json" "${workloads[@]%%@*}" >"$OUT/peers.log" 2>&1 ||
		{ echo "peers FAILED" >&2; cat "$OUT/peers.log" >&2; status=1; }
	cat "$OUT/peers.log" >&2
fi

if want export; then
	"$K" export --format json --db "$db" --out "$OUT/h200-results.json" 2>"$OUT/export.log" || status=1
fi

if want collect; then
	step "results"
	more=${KTUNE_MORE_RESULTS:-}
	shopt -s nullglob
	all_sweeps=("$OUT"/sweep_*.json)
	all_peers=("$OUT"/peers_*.json ${more:+"$more"/peers_*.json})
	all_sweeps+=(${more:+"$more"/sweep_*.json})
	python3 bench/collect.py "$OUT/h200.json" "$COMMIT" "${all_peers[*]}" "${all_sweeps[@]}" || status=1
fi
exit $status
