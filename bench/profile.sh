#!/usr/bin/env bash
# profile.sh -- where one config's time goes: `ktune sweep --config` times and
# verifies it, then Nsight Compute profiles its kernels one by one, on the GPU
# machine (ncu ships with its CUDA toolkit and reads the counters there). Run
# from the repo root with ktune built by
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/profile.sh BUILD_DIR OUT_DIR WORKLOAD CONFIG [KERNELS [PER_RUN]]
#
# KERNELS: an ncu name regex (default: the ws GEMM, BLAST's mixer and the
# fused Monarch kernel); PER_RUN: how many of those one run of the config
# launches (default 3; 1 for fused_monarch_ws). The first two runs (the
# verification and a warm-up) are skipped, the next two profiled. Each kernel
# is replayed alone (no overlap with its neighbours, so PDL's gain is not in
# these durations) without cache flushes or clock locking. The profiled
# sweep has no drift sentinel (--sentinel-every 0): with --no-baseline the
# sentinel is the family's default config, timed before CONFIG under the
# same kernel names, so the skipped and profiled launches would be its. Writes
# OUT_DIR/profile_<n>.csv (ncu --csv --page details) and prints one line per
# kernel: name, grid, registers, duration, busy% (SM active / elapsed cycles),
# SM and memory throughput, DRAM throughput, L2 hit rate.
set -uo pipefail
if [ $# -lt 4 ]; then
	sed -n '2,21p' "$0" >&2
	exit 2
fi
B=$1 OUT=$2 W=$3 C=$4
KN=${5:-gemm_tn_ws|blast_mix_tcp|fused_monarch_ws}
PER=${6:-3}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
n=$(ls "$OUT"/profile_*.csv 2>/dev/null | wc -l)
csv=$OUT/profile_$n.csv
db=$(mktemp -d)/p.db
echo "== $W $C" >&2
"$B/ktune" sweep --workload "$W" --config "$C" --no-baseline --no-retime --db "$db" \
	>"$OUT/profile_$n.sweep.txt" 2>&1 || { echo "sweep FAILED" >&2; tail -n 5 "$OUT/profile_$n.sweep.txt" >&2; exit 1; }
grep -E "best|verified|rel" "$OUT/profile_$n.sweep.txt" | head -n 3 >&2
rm -f "$db"
"$NCU" --target-processes all --clock-control none --cache-control none \
	-k "regex:^($KN)\$" --launch-skip $((2 * PER)) --launch-count $((2 * PER)) \
	--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
	--csv --page details --log-file "$csv" \
	"$B/ktune" sweep --workload "$W" --config "$C" --no-baseline --no-retime --timeout 300 \
	--sentinel-every 0 \
	--db "$db" >"$OUT/profile_$n.ncu.txt" 2>&1 || { echo "ncu FAILED" >&2; tail -n 5 "$OUT/profile_$n.ncu.txt" >&2; exit 1; }
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
want = {"Duration": "dur", "Compute (SM) Throughput": "sm%", "Memory Throughput": "mem%",
        "L2 Hit Rate": "l2hit%", "DRAM Throughput": "dram%", "Registers Per Thread": "regs",
        "SM Active Cycles": "active", "Elapsed Cycles": "elapsed"}
k = {}
for r in rows:
    key = (r["ID"], r["Kernel Name"].split("(")[0])
    k.setdefault(key, {})["grid"] = r.get("Grid Size", "?").replace(" ", "")
    if r["Metric Name"] in want and not (r["Metric Name"] == "Memory Throughput" and
                                         r["Metric Unit"] != "%"):
        k.setdefault(key, {})[want[r["Metric Name"]]] = r["Metric Value"] + \
            ("" if r["Metric Unit"] in ("%", "", "register/thread") else " " + r["Metric Unit"])
num = lambda v: float(v.split()[0].replace(",", ""))
for (i, name), m in sorted(k.items(), key=lambda x: int(x[0][0])):
    if "active" in m and "elapsed" in m:  # how much of the kernel the SMs run a CTA at all
        m["busy%"] = "%.0f" % (100 * num(m["active"]) / num(m["elapsed"]))
    print(f"  {i:>3} {name:<18} " + "  ".join(f"{f}={m.get(f, '?')}" for f in
          ("grid", "regs", "dur", "busy%", "sm%", "mem%", "dram%", "l2hit%")))
PY
