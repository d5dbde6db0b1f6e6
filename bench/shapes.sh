#!/usr/bin/env bash
# shapes.sh -- every structured-layer reference shape of KERNELS.md at every
# token count N in {16, 1024, 4096, 16384}: a budgeted random sweep of each
# (the search's sample dealt round-robin over the variants), every candidate
# verified against the family's GPU reference, cuBLAS dense timed beside it.
# This answers "does every shape run and verify", not "how fast at its best"
# (the development suite's full sweeps do that).
#
#   bench/shapes.sh BUILD_DIR OUT_DIR COMMIT
#
# KTUNE_SHAPES_BUDGET (default 5) configs per problem; KTUNE_DEVICES (default
# all) GPUs, problems shared between them; KTUNE_SHAPES_FAMILIES (default
# "blast monarch lowrank"). Writes OUT_DIR/shapes.json and prints a table.
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
COMMIT=${3:-unknown}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
budget=${KTUNE_SHAPES_BUDGET:-5}
# layer in out blast-blocks blast-rank monarch-blocks monarch-rank (KERNELS.md;
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
	echo "== $fam: ${#args[@]} problems, random budget $budget" >&2
	"$K" sweep --family "$fam" "${args[@]}" --devices "${KTUNE_DEVICES:-all}" --strategy random \
		--budget "$budget" --no-retime --db "$OUT/shapes.db" --json \
		>"$OUT/shapes_$fam.json" 2>"$OUT/shapes_$fam.log" ||
		{ echo "shapes: $fam sweep FAILED (see shapes_$fam.log)" >&2; tail -n 5 "$OUT/shapes_$fam.log" >&2; status=1; }
done
python3 - "$OUT" "$COMMIT" "$budget" <<'PY' || status=1
import datetime, glob, json, sys
out, commit, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
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
                     "floor_us": round(s["floor_us"], 3)})
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": commit, "budget_per_problem": budget, "rows": rows}
json.dump(doc, open(out + "/shapes.json", "w"), indent=1)
bad = [r for r in rows if not r["verified"] or r["statuses"].get("wrong")]
print(f"{'family':8s} {'shape':58s} {'ok':>3s} {'bad':>3s} {'best us':>9s} {'cuBLAS':>8s}")
for r in rows:
    st = r["statuses"]
    nbad = sum(v for k, v in st.items() if k != "ok")
    print(f"{r['family']:8s} {r['shape']:58s} {st.get('ok', 0):3d} {nbad:3d} "
          f"{r['best_us'] if r['best_us'] else '-':>9} {r['cublas_us'] or '-':>8}")
print(f"{len(rows)} problems, {len(rows) - len(bad)} verified with no wrong candidate")
sys.exit(1 if bad else 0)
PY
exit $status
