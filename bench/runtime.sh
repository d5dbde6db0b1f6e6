#!/usr/bin/env bash
# runtime.sh -- libktune on the GPU: every family through the C runtime at
# one tuned and two untuned shapes, beside a budgeted `ktune sweep` at the
# same shapes in the same call. Run on the GPU machine from the repo root,
# with ktune built on the build machine by
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/runtime.sh BUILD_DIR OUT_DIR [COMMIT]
#
# 1. for each untuned shape, a random sweep (budget $KTUNE_RT_BUDGET configs,
#    default 6, at most $KTUNE_RT_LIMIT s, default 12) into a scratch
#    database: its winner's median is the row's sweep_us; for a tuned shape
#    sweep_us is the shipped config re-timed by `ktune sweep --config`;
# 2. build/tests/test_runtime's timing mode: each shape through libktune
#    (the shipped table, data/h200-results.json), verified against the
#    family's GPU reference, timed as the tuner times (L2 flushed before
#    each call, events, the median of 40);
# 3. OUT_DIR/runtime.json: bench/results/runtime.json's rows with these
#    merged in by (family, shape, via, GPU name) -- rows of other vias (the
#    torch ops') and other GPUs kept -- each with us / sweep_us and the 1.2 limit for untuned
#    shapes. Logs in OUT_DIR/runtime_logs.tar.gz.
# About 5 minutes on the H200 (the 18 sweeps and re-times ~4, the rest ~1).
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out}
mkdir -p "$OUT/rt_logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
BUDGET=${KTUNE_RT_BUDGET:-6}
LIMIT=${KTUNE_RT_LIMIT:-12}
DB=$OUT/rt_logs/sweeps.db
rm -f "$DB"
status=0

# family|shape (the tuner's key)|tuned|config to re-time (tuned only)
SHAPES=$OUT/rt_logs/shapes.txt
python3 - "$SHAPES" <<'EOF'
import json, sys
d = json.load(open("data/h200-results.json"))
tuned = {}
for e in d["entries"]:
    tuned.setdefault((e["family"], e["shape_key"]), e["config_key"])
rows = [tuple(l.split("|")) for l in open("bench/runtime_shapes.txt").read().splitlines()
        if l and not l.startswith("#")]
with open(sys.argv[1], "w") as f:
    for fam, shape in rows:
        cfg = tuned.get((fam, shape), "")
        f.write("%s|%s|%d|%s\n" % (fam, shape, 1 if cfg else 0, cfg))
EOF

echo "== sweeps at the same shapes (budget $BUDGET, at most ${LIMIT}s each)" >&2
while IFS='|' read -r fam shape tuned cfg; do
	tag=$(echo "$fam.$shape" | tr ',=' '_-')
	if [ "$tuned" = 1 ]; then
		"$K" sweep --db "$DB" --family "$fam" --shape "$shape" --config "$cfg" --no-baseline \
			--json >"$OUT/rt_logs/sweep.$tag.json" 2>"$OUT/rt_logs/sweep.$tag.log" ||
			{ echo "re-time $fam $shape FAILED" >&2; status=1; }
	else
		"$K" sweep --db "$DB" --family "$fam" --shape "$shape" --strategy random \
			--budget "$BUDGET" --time-limit "$LIMIT" --no-baseline --no-retime \
			--json >"$OUT/rt_logs/sweep.$tag.json" 2>"$OUT/rt_logs/sweep.$tag.log" ||
			{ echo "sweep $fam $shape FAILED" >&2; status=1; }
	fi
	echo "  $fam $shape: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j=j["sweeps"][0] if "sweeps" in j else j; print(j.get("us"), j.get("config"))' "$OUT/rt_logs/sweep.$tag.json" 2>/dev/null)" >&2
done <"$SHAPES"

echo "== libktune: every shape verified and timed" >&2
cut -d'|' -f1-3 "$SHAPES" >"$OUT/rt_logs/bench_shapes.txt"
KTUNE_REQUIRE_GPU=1 KTUNE_TEST_SUITE=GPU KTUNE_RUNTIME_BENCH="$OUT/rt_logs/c_rows.json" \
	KTUNE_RUNTIME_BENCH_SHAPES="$OUT/rt_logs/bench_shapes.txt" KTUNE_CACHE_DIR="$OUT/rt_logs/cache" \
	"$B/tests/test_runtime" >"$OUT/rt_logs/test_runtime_bench.log" 2>&1 ||
	{ echo "test_runtime (timing) FAILED" >&2; status=1; }
tail -n 25 "$OUT/rt_logs/test_runtime_bench.log" >&2

DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
python3 - "$OUT" "$SHAPES" "$COMMIT" "${DEVICE:-unknown}" <<'EOF' || status=1
import datetime, json, os, sys
out, shapes, commit, device = sys.argv[1:5]
logs = os.path.join(out, "rt_logs")
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
try:
    c_rows = json.load(open(os.path.join(logs, "c_rows.json")))
except Exception as e:
    print("no libktune rows: %s" % e, file=sys.stderr)
    c_rows = []
sweep = {}
for line in open(shapes):
    fam, shape, tuned, cfg = line.rstrip("\n").split("|")
    tag = (fam + "." + shape).replace(",", "_").replace("=", "-")
    try:
        j = json.load(open(os.path.join(logs, "sweep.%s.json" % tag)))
        j = j["sweeps"][0] if "sweeps" in j else j
        sweep[(fam, shape)] = (j.get("us") or None, j.get("config"))
    except Exception:
        sweep[(fam, shape)] = (None, None)
path = "bench/results/runtime.json"
doc = json.load(open(path)) if os.path.exists(path) else {"rows": []}
# one row per (family, shape, via, GPU): a run on another card adds its own
rows = {(r["family"], r["shape"], r["via"], r.get("device")): r for r in doc.get("rows", [])}
bad = 0
for r in c_rows:
    s_us, s_cfg = sweep.get((r["family"], r["shape"]), (None, None))
    r["sweep_us"] = s_us
    r["sweep_config"] = s_cfg
    r["ratio"] = r["us"] / s_us if s_us else None
    r["run"] = {"commit": commit, "date": date}
    r["device"] = device
    if not r["verified"] or (not r["tuned"] and (not s_us or r["us"] > 1.2 * s_us)):
        bad += 1
    rows[(r["family"], r["shape"], "c", device)] = r
doc["rows"] = sorted(rows.values(), key=lambda r: (r.get("device") or "", r["family"], r["via"],
                                                   not r["tuned"], r["shape"]))
json.dump(doc, open(os.path.join(out, "runtime.json"), "w"), indent=1)
print("%-14s %-48s %5s %9s %9s %6s  %s" % ("family", "shape", "tuned", "us", "sweep_us", "ratio", "match"))
for r in c_rows:
    print("%-14s %-48s %5s %9.2f %9s %6s  %s" % (r["family"], r["shape"], r["tuned"], r["us"],
          "%.2f" % r["sweep_us"] if r["sweep_us"] else "-",
          "%.3f" % r["ratio"] if r["ratio"] else "-", r["match"]))
print("%d rows; %d unverified or over 1.2 x the sweep (untuned)" % (len(c_rows), bad))
sys.exit(1 if bad or not c_rows else 0)
EOF
tar -czf "$OUT/runtime_logs.tar.gz" --exclude rt_logs/cache -C "$OUT" rt_logs && rm -rf "$OUT/rt_logs"
exit $status
