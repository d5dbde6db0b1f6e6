#!/usr/bin/env bash
# persist_ab.sh -- what the persistent walk is worth to a family's ws default:
# at each SHAPE, the family's default config (`ktune best`, nothing tuned)
# beside the same key with PERSISTENT 1, 2 and 3, in one sweep: every key
# compiled and verified against the family's reference, the verified ones
# timed again in a tournament of rotated, interleaved rounds (--rounds), cuBLAS
# dense timed in the same sweep. A default that has no PERSISTENT parameter
# (another variant) is reported and skipped.
#
#   bench/persist_ab.sh BUILD_DIR OUT_DIR FAMILY SHAPE [SHAPE ...]
#
# ROUNDS (default 5) tournament rounds. Writes OUT_DIR/persist_ab.json
# ({"commit", "family", "rows": [{"shape", "key", "median_us", "rounds_us",
# "verified", "cublas_us", "clock_min_mhz", "clock_max_mhz"}]}) and prints a
# table: each key's median and its ratio to PERSISTENT 0. Exit 1 if a key
# did not verify. Run from the repository root.
set -uo pipefail
if [ $# -lt 4 ]; then
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
B=$1 OUT=$2 FAM=$3
shift 3
ROUNDS=${ROUNDS:-5}
case $ROUNDS in
'' | *[!0-9]* | 0)
	echo "persist_ab: ROUNDS must be a positive integer, got '$ROUNDS'" >&2
	exit 2
	;;
esac
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "") || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
# a database that knows the H200 (data/h200-results.json) but none of these
# shapes answers `ktune best --max-distance 0` with the family's default for
# an sm_90a GPU of 132 SMs (the H100's default too)
"$K" import data/h200-results.json --db "$tmp/best.db" >"$tmp/import.log" 2>&1 || {
	tail -n 3 "$tmp/import.log" >&2
	exit 2
}
i=0
for S in "$@"; do
	i=$((i + 1))
	if ! "$K" best --family "$FAM" --shape "$S" --device "NVIDIA H200" --max-distance 0 --db "$tmp/best.db" --json \
		>"$tmp/best$i.json" 2>"$tmp/best$i.log"; then
		echo "persist_ab: $S: no default ($(tail -n 1 "$tmp/best$i.log"))" >&2
		continue
	fi
	mapfile -t keys < <(python3 - "$tmp/best$i.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["config"]
if "PERSISTENT" in c:
    for p in range(4):
        c["PERSISTENT"] = p
        print(",".join(f"{k}={v}" for k, v in c.items()))
PY
	)
	if [ ${#keys[@]} -ne 4 ]; then
		echo "persist_ab: $S: the default has no PERSISTENT parameter: skipped" >&2
		continue
	fi
	args=()
	for k in "${keys[@]}"; do args+=(--config "$k"); done
	echo "persist_ab: $S" >&2
	"$K" sweep --family "$FAM" --shape "$S" "${args[@]}" --tournament 4 --ties 0 \
		--rounds "$ROUNDS" --sentinel-every 0 --no-retime --db "$tmp/s$i.db" --json \
		>"$tmp/s$i.json" 2>"$tmp/s$i.log" || tail -n 3 "$tmp/s$i.log" >&2
	printf '%s\n' "${keys[@]}" >"$tmp/s$i.keys"
	printf '%s\n' "$S" >"$tmp/s$i.shape"
done
python3 - "$tmp" "$OUT/persist_ab.json" "$COMMIT" "$FAM" "$i" <<'PY'
import json, os, sys
tmp, path, commit, fam, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rows, bad = [], 0
for i in range(1, n + 1):
    if not os.path.exists(f"{tmp}/s{i}.keys"):
        continue
    keys = open(f"{tmp}/s{i}.keys").read().split("\n")[:4]
    try:
        s = json.load(open(f"{tmp}/s{i}.json"))
    except ValueError:
        s = {}
    table = {c["config"]: c for c in (s.get("tournament") or {}).get("table", [])}
    d = s.get("drift") or {}
    for k in keys:
        c = table.get(k)
        ok = bool(c and c.get("median_us"))
        bad += not ok
        rows.append({"shape": open(f"{tmp}/s{i}.shape").read().strip(), "key": k, "verified": ok,
                     "median_us": c["median_us"] if ok else None,
                     "rounds_us": c["rounds_us"] if ok else None,
                     "cublas_us": s.get("cublas_us"), "device": s.get("device"),
                     "clock_min_mhz": d.get("clock_min_mhz"),
                     "clock_max_mhz": d.get("clock_max_mhz")})
doc = {"commit": commit, "family": fam,
       "what": "the default beside PERSISTENT 1-3, one sweep a shape, tournament medians",
       "rows": rows}
json.dump(doc, open(path, "w"), indent=1)
print(f"{'shape':52s} {'P0':>9s} {'P1':>7s} {'P2':>7s} {'P3':>7s} {'cuBLAS':>9s}  (ratios to P0)")
for j in range(0, len(rows), 4):
    g = rows[j:j + 4]
    base = g[0]["median_us"]
    cells = [f"{base:9.2f}" if base else f"{'failed':>9s}"]
    for r in g[1:]:
        u = r["median_us"]
        cells.append(f"{u / base:7.3f}" if u and base else f"{'failed' if not u else '-':>7s}")
    cb = g[0]["cublas_us"]
    print(f"{str(g[0]['shape']):52s} {' '.join(cells)} {cb if cb else '-':>9}")
sys.exit(1 if bad else 0)
PY
