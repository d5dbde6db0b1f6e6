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
# reported as skipped, not as a failure). Writes OUT_DIR/shapes.json and
# prints a table.
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
python3 - "$OUT" "$COMMIT" "$budget" "${KTUNE_SHAPES_VARIANTS:-}" <<'PY' || status=1
import datetime, glob, json, sys
out, commit, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
variants = dict(fv.split("=", 1) for fv in sys.argv[4].split())
rows = []
for p in sorted(glob.glob(out + "/shapes_*.json")):
    try:
        d = json.load(open(p))
    except ValueError:
        print(f"shapes: {p}: no summary (the sweep was stopped)", file=sys.stderr)
        continue
    for s in d.get("sweeps", [d]):
        if "family" not in s:
            continue
        if "error" in s:
            err = s["error"]["message"] if isinstance(s["error"], dict) else str(s["error"])
            if s["family"] in variants and "no config of" in err:
                rows.append({"family": s["family"], "shape": s["shape"], "skipped": err,
                             "statuses": {}, "best_us": None, "cublas_us": None})
                continue
            rows.append({"family": s["family"], "shape": s["shape"], "verified": False,
                         "statuses": {}, "error": s["error"], "best_us": None, "cublas_us": None})
            continue
        rows.append({"family": s["family"], "shape": s["shape"], "gpu": s.get("gpu"),
                     "space": s["counts"]["space"], "evaluated": s["counts"]["evaluated"],
                     "statuses": s["statuses"], "verified": s["verified"],
                     "best_us": round(s["us"], 3) if s["verified"] else None,
                     "config": s["config"] if s["verified"] else None,
                     "rel_err": s["rel_err"] if s["verified"] else None,
                     "cublas_us": round(s["cublas_us"], 3) if s.get("cublas_us") else None,
                     "floor_us": round(s["floor_us"], 3) if s.get("floor_us") else None})
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": commit, "budget_per_problem": budget, "rows": rows}
if variants:
    doc["variants"] = variants
json.dump(doc, open(out + "/shapes.json", "w"), indent=1)
bad = [r for r in rows if "skipped" not in r and (not r["verified"] or r["statuses"].get("wrong"))]
skipped = [r for r in rows if "skipped" in r]
print(f"{'family':8s} {'shape':58s} {'ok':>3s} {'bad':>3s} {'best us':>9s} {'cuBLAS':>8s}")
for r in rows:
    st = r["statuses"]
    nbad = sum(v for k, v in st.items() if k != "ok")
    print(f"{r['family']:8s} {r['shape']:58s} {st.get('ok', 0):3d} {nbad:3d} "
          f"{r['best_us'] if r['best_us'] else '-':>9} {r['cublas_us'] or '-':>8}")
print(f"{len(rows)} problems, {len(rows) - len(bad) - len(skipped)} verified with no wrong "
      f"candidate, {len(skipped)} skipped (no config of the variants asked for fits)")
sys.exit(1 if bad else 0)
PY
exit $status
