#!/usr/bin/env bash
# shapes_attn.sh -- jagged block attention at every block size (issue 32):
# seqs 1152, lmax 1024, heads 4, rope 0, block in {32, 64, 128, 256} x
# head_dim in {64, 128}, forward and backward (16 cells). Per cell a budgeted
# `ktune sweep` (random strategy: the sample dealt round-robin over the
# variants, every candidate verified against the family's GPU reference,
# the best meeting in the tournament), and FlashAttention-2 varlen on the same
# lengths (bench/peers_attn.py: torch's varlen_attn with every block boundary
# in cu_seqlens, do_bench medians, the backward's dq, dk, dv errors against a
# float64 reference). A cell no ktune kernel takes is reported with ktune's
# reason, not dropped. Build on the build machine first:
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/shapes_attn.sh BUILD_DIR OUT_DIR [COMMIT]   (COMMIT: the build's, bench/commit.sh)
#
# KTUNE_ATTN_BUDGET (default 16) configs per cell; KTUNE_ATTN_LIMIT (default
# 40) the sweep's --time-limit in seconds; KTUNE_ATTN_BLOCKS (default
# "32 64 128 256") and KTUNE_ATTN_HDS (default "64 128") the cells;
# KTUNE_ATTN_STEPS (default "ktune fa2") which sides run; KTUNE_SHAPES_KEEP=
# OLD.json carries the cells not run over from OLD.json (bench/shapes_attn.py). The sweeps share
# OUT_DIR/attn.db, so a call cut short resumes. Writes OUT_DIR/shapes_attn.json
# (bench/results/shapes_attn.json from an H200) and prints a table; exits 1
# unless every cell has a verified ktune winner and an FA2 time.
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out/shapes_attn}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
budget=${KTUNE_ATTN_BUDGET:-16}
limit=${KTUNE_ATTN_LIMIT:-40}
steps=" ${KTUNE_ATTN_STEPS:-ktune fa2} "
SEQS=1152 LMAX=1024 HEADS=4
t0=$(date +%s)
for blk in ${KTUNE_ATTN_BLOCKS:-32 64 128 256}; do
	for hd in ${KTUNE_ATTN_HDS:-64 128}; do
		if [[ "$steps" == *" ktune "* ]]; then
			for dir in fwd bwd; do
				shape=seqs=$SEQS,lmax=$LMAX,heads=$HEADS,head_dim=$hd,block=$blk,rope=0
				echo "== $(( $(date +%s) - t0 )) s: blockattn_$dir $shape" >&2
				"$K" sweep --family "blockattn_$dir" --shape "$shape" --strategy random \
					--budget "$budget" --time-limit "$limit" --no-baseline --threads 16 \
					--db "$OUT/attn.db" --json </dev/null \
					>"$OUT/ktune_${dir}_b${blk}_d${hd}.json" 2>"$OUT/ktune_${dir}_b${blk}_d${hd}.log" ||
					echo "   ktune sweep exited $? (see ktune_${dir}_b${blk}_d${hd}.log)" >&2
			done
		fi
		if [[ "$steps" == *" fa2 "* ]]; then
			echo "== $(( $(date +%s) - t0 )) s: fa2_varlen block=$blk head_dim=$hd" >&2
			python3 bench/peers_attn.py "$OUT/fa2_b${blk}_d${hd}.json" --seqs $SEQS --lmax $LMAX \
				--heads $HEADS --head-dim "$hd" --block "$blk" >"$OUT/fa2_b${blk}_d${hd}.log" 2>&1 ||
				{ echo "   peers_attn.py FAILED:" >&2; tail -n 3 "$OUT/fa2_b${blk}_d${hd}.log" >&2; }
		fi
	done
done
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
python3 bench/shapes_attn.py "$OUT" "$COMMIT" "$budget" "$limit" "${DEVICE:-unknown}" \
	"${KTUNE_ATTN_BLOCKS:-32 64 128 256}" "${KTUNE_ATTN_HDS:-64 128}"
