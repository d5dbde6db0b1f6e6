#!/usr/bin/env bash
# multigpu.sh -- the same multi-problem sweep on 1 GPU, then on 2 GPUs of one
# host, into separate databases; writes OUT_DIR/multigpu.json (docs/benchmarks.md) with
# both wall times and whether the winners agree (same config, or times within
# 3% of each other: two H200s differ by noise).
#
#   bench/multigpu.sh BUILD_DIR OUT_DIR [COMMIT]   (COMMIT: the build's, bench/commit.sh)
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
args=(--family dense --strategy random --budget "${KTUNE_MG_BUDGET:-48}" --seed 3 --no-retime --json)
for s in tokens=1024,in=4096,out=4096 tokens=2048,in=4096,out=4096 tokens=4096,in=4096,out=4096 \
	tokens=1024,in=4096,out=11008 tokens=1024,in=11008,out=4096 tokens=512,in=4096,out=4096; do
	args+=(--shape "$s")
done
rm -f "$OUT/mg1.db" "$OUT/mg2.db"
echo "== 1 GPU" >&2
"$K" sweep "${args[@]}" --devices 0 --db "$OUT/mg1.db" >"$OUT/mg1.json" 2>"$OUT/mg1.log" || { tail "$OUT/mg1.log" >&2; exit 1; }
echo "== 2 GPUs" >&2
"$K" sweep "${args[@]}" --devices 0,1 --db "$OUT/mg2.db" >"$OUT/mg2.json" 2>"$OUT/mg2.log" || { tail "$OUT/mg2.log" >&2; exit 1; }
python3 - "$OUT" "$COMMIT" <<'PY'
import datetime, json, sys
out, commit = sys.argv[1], sys.argv[2]
one, two = (json.load(open(f"{out}/mg{i}.json")) for i in (1, 2))
w1 = {s["shape"]: s for s in one["sweeps"]}
w2 = {s["shape"]: s for s in two["sweeps"]}
same, detail = True, []
for shape, a in w1.items():
    b = w2.get(shape)
    ok = bool(b) and a.get("verified") and b.get("verified") and (
        a["config"] == b["config"] or abs(a["us"] - b["us"]) <= 0.03 * min(a["us"], b["us"]))
    same &= bool(ok)
    detail.append({"shape": shape, "config_1gpu": a.get("config"), "us_1gpu": a.get("us"),
                   "config_2gpu": b and b.get("config"), "us_2gpu": b and b.get("us"),
                   "gpu_2gpu": b and b.get("gpu"), "agree": bool(ok)})
doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": commit, "gpus": 2, "wall_s_1gpu": round(one["wall_s"], 2),
       "wall_s_2gpu": round(two["wall_s"], 2),
       "wall_ratio_2gpu_vs_1gpu": round(two["wall_s"] / one["wall_s"], 3),
       "same_winners": same, "problems": detail,
       "command": "bench/multigpu.sh (ktune sweep --devices 0 vs --devices 0,1, 6 dense shapes, random budget)"}
json.dump(doc, open(f"{out}/multigpu.json", "w"), indent=1)
print(f"multigpu: 1 GPU {doc['wall_s_1gpu']} s, 2 GPUs {doc['wall_s_2gpu']} s, "
      f"ratio {doc['wall_ratio_2gpu_vs_1gpu']}, same winners {same}")
PY
