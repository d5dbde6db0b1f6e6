#!/usr/bin/env bash
# shapes.sh -- every structured-layer reference shape of docs/kernels.md at every
# token count N in {16, 1024, 4096, 16384}: a budgeted random sweep of each
# (the search's sample dealt round-robin over the variants), every candidate
# verified against the family's GPU reference, cuBLAS dense timed beside it.
# This answers "does every shape run and verify", not "how fast at its best"
# (the development suite's full sweeps do that).
#
#   bench/shapes.sh BUILD_DIR OUT_DIR [COMMIT]   (COMMIT: the build's, bench/commit.sh)
#
# KTUNE_SHAPES_BUDGET (default 5) configs per problem; KTUNE_DEVICES (default
# all) GPUs, problems shared between them; KTUNE_SHAPES_FAMILIES (default
# "blast monarch lowrank"); KTUNE_SHAPES_VARIANTS, e.g. "blast=tcmix,tcmix_ws
# monarch=fused_ws", sweeps only those variants of those families (to
# re-verify changed kernels at every shape; a shape none of them can run is
# reported as skipped, not as a failure). KTUNE_SHAPES_KEEP=OLD.json carries
# the problems this run did not measure (other families) over from an earlier
# shapes.json, each row marked with its run (bench/shapes.py). Writes
# OUT_DIR/shapes.json and prints a table.
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
budget=${KTUNE_SHAPES_BUDGET:-5}
# layer in out blast-blocks blast-rank monarch-blocks monarch-rank (docs/kernels.md;
# "-": the shape is not a valid layer of that family, e.g. monarch needs
# blocks | rank, and dit_xl's b9 r384 is BLAST's parameterization)
layers="llama7b_qkvo 4096 4096 16 1024 16 1024
llama7b_gateup 4096 11008 16 1488 16 1536
llama7b_down 11008 4096 16 1488 16 1536
llama1b_qo 2048 2048 16 256 16 256
gpt2s_cfc 768 3072 6 192 4 192
ditxl_qkv 1152 3456 9 384 - -"
status=0
for fam in ${KTUNE_SHAPES_FAMILIES:-blast monarch lowrank}; do
	args=()
	while read -r _ n m bb br mb mr; do
		for N in 16 1024 4096 16384; do
			case $fam in
			blast) args+=(--shape "tokens=$N,in=$n,out=$m,blocks=$bb,rank=$br") ;;
			monarch) [ "$mb" = - ] || args+=(--shape "tokens=$N,in=$n,out=$m,blocks=$mb,rank=$mr") ;;
			lowrank) args+=(--shape "tokens=$N,in=$n,out=$m,rank=$br") ;;
			esac
		done
	done <<<"$layers"
	vargs=()
	for fv in ${KTUNE_SHAPES_VARIANTS:-}; do
		[ "${fv%%=*}" = "$fam" ] && vargs=(--variants "${fv#*=}")
	done
	echo "== $fam: ${#args[@]} problems, random budget $budget ${vargs[*]}" >&2
	"$K" sweep --family "$fam" "${args[@]}" "${vargs[@]}" --devices "${KTUNE_DEVICES:-all}" --strategy random \
		--budget "$budget" --no-retime --db "$OUT/shapes.db" --json \
		>"$OUT/shapes_$fam.json" 2>"$OUT/shapes_$fam.log" ||
		if [ ${#vargs[@]} -gt 0 ]; then
			# some shapes may have no config of those variants: the
			# summary below tells those from failures
			echo "shapes: $fam: some problems did not sweep (see below)" >&2
		else
			echo "shapes: $fam sweep FAILED (see shapes_$fam.log)" >&2
			tail -n 5 "$OUT/shapes_$fam.log" >&2
			status=1
		fi
done
python3 "$(dirname "$0")/shapes.py" "$OUT" "$COMMIT" "$budget" "${KTUNE_SHAPES_VARIANTS:-}" || status=1
exit $status
