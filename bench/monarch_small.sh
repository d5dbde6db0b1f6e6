#!/usr/bin/env bash
# monarch_small.sh -- fused_ws at the small layers (rank/blocks 16 and 32:
# llama1b q/o; 48 with column tiles: gpt2s c_fc), on one sm_90a GPU:
#   1. verify: every fused_ws config of monarch and monarch_bm at the small
#      shapes of VERIFY (several token tiles, the last partial), each against
#      the family's GPU reference (`ktune sweep --variants fused_ws`,
#      exhaustive, no timing beyond the sweep's own);
#   2. time: at each layer of LAYERS (llama1b: in 2048, out 2048, blocks 16,
#      rank 256; gpt2s: in 768, out 3072, blocks 4, rank 192) for each N in
#      NS, the exhaustive fused_ws sweep of monarch, then its winner beside
#      the family's default (`ktune best`, nothing tuned: relayout_ws) in one
#      `ktune sweep --config A --config B` whose tournament runs ROUNDS
#      rotated, interleaved rounds, cuBLAS dense timed in the same sweep.
# A table last: per layer and N the default's and fused_ws's tournament
# medians and cuBLAS's. Everything under OUT_DIR, tarred into
# OUT_DIR.tar.gz.
#
#   bench/monarch_small.sh BUILD_DIR OUT_DIR
#
# VERIFY (default "r16 r32 r48": which small shapes; "" none), LAYERS
# (default "llama1b gpt2s"), NS (default "1024 4096 16384"), ROUNDS (5),
# LIMIT (150) seconds a sweep: split them over device calls of 10 minutes.
# Run from the repository root. Exit 1 if a config failed verification.
set -uo pipefail
if [ $# -lt 2 ]; then
	sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
B=$1 OUT=$2
NS=${NS:-1024 4096 16384} ROUNDS=${ROUNDS:-5} LIMIT=${LIMIT:-150}
VERIFY=${VERIFY-r16 r32 r48} LAYERS=${LAYERS:-llama1b gpt2s}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "") || exit 2
t0=$(date +%s)
step() { echo "== $(($(date +%s) - t0)) s: $*" >&2; }
status=0
declare -A VSHAPE=([r16]="tokens=200,in=1024,out=2048,blocks=16,rank=256"
	[r32]="tokens=130,in=384,out=256,blocks=4,rank=128"
	[r48]="tokens=200,in=768,out=3072,blocks=4,rank=192")
declare -A LSHAPE=([llama1b]="in=2048,out=2048,blocks=16,rank=256"
	[gpt2s]="in=768,out=3072,blocks=4,rank=192")
for v in $VERIFY; do
	[ -n "${VSHAPE[$v]:-}" ] || { echo "monarch_small: VERIFY: unknown '$v'" >&2; exit 2; }
done
for L in $LAYERS; do
	[ -n "${LSHAPE[$L]:-}" ] || { echo "monarch_small: LAYERS: unknown '$L'" >&2; exit 2; }
done
for f in monarch monarch_bm; do
	for v in $VERIFY; do
		S=${VSHAPE[$v]}
		n=${f}_$v
		step "verify $f $S"
		"$K" sweep --family "$f" --shape "$S" --variants fused_ws --no-retime --tournament 0 \
			--sentinel-every 0 --time-limit "$LIMIT" --db "$OUT/verify.db" --json \
			>"$OUT/v_$n.json" 2>"$OUT/v_$n.log" || status=1
	done
done
"$K" import data/h200-results.json --db "$OUT/best.db" >/dev/null 2>&1 || status=1
for L in $LAYERS; do
	for N in $NS; do
		S="tokens=$N,${LSHAPE[$L]}" t=${L}_$N
		step "sweep fused_ws $S"
		"$K" sweep --family monarch --shape "$S" --variants fused_ws --no-retime --tournament 4 \
			--rounds 3 --sentinel-every 0 --time-limit "$LIMIT" --db "$OUT/t_$t.db" --json \
			>"$OUT/f_$t.json" 2>"$OUT/f_$t.log" || status=1
		fk=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('config') or '')" \
			"$OUT/f_$t.json" 2>/dev/null)
		dk=$("$K" best --family monarch --shape "$S" --device "NVIDIA H200" --max-distance 0 \
			--db "$OUT/best.db" --json |
			python3 -c "import json,sys; print(json.load(sys.stdin)['config_key'])")
		if [ -z "$fk" ] || [ -z "$dk" ]; then
			echo "monarch_small: $L N$N: no fused winner or no default" >&2
			status=1
			continue
		fi
		step "fused winner beside the default at $L N$N"
		"$K" sweep --family monarch --shape "$S" --config "$dk" --config "$fk" --tournament 2 \
			--ties 0 --rounds "$ROUNDS" --sentinel-every 0 --no-retime --db "$OUT/ab_$t.db" \
			--json >"$OUT/ab_$t.json" 2>"$OUT/ab_$t.log" || status=1
	done
done
python3 - "$OUT" "$COMMIT" "$NS" "$LAYERS" <<'PY' || status=1
import glob, json, sys
out, commit, ns, layers = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
bad = 0
for p in sorted(glob.glob(out + "/v_*.json")):
    try:
        s = json.load(open(p))
    except ValueError:
        print(f"{p}: no summary"); bad += 1; continue
    st = s.get("statuses", {})
    nbad = sum(v for k, v in st.items() if k != "ok")
    bad += nbad > 0 or not st.get("ok")
    print(f"verify {s.get('family', '?'):10s} {s.get('shape', p):48s} ok {st.get('ok', 0):3d} not ok {nbad}")
rows = []
print(f"\n{commit}: monarch fused_ws beside the default, tournament medians (us)")
print(f"{'layer':8s} {'N':>6s} {'default':>9s} {'fused_ws':>9s} {'cuBLAS':>9s}  fused config")
for layer in layers:
    for n in ns:
        try:
            s = json.load(open(f"{out}/ab_{layer}_{n}.json"))
        except (OSError, ValueError):
            print(f"{layer:8s} {n:>6s} (no comparison)"); bad += 1; continue
        t = {c["config"]: c["median_us"] for c in s["tournament"]["table"]}
        keys = list(t)
        d = next((k for k in keys if "fused_ws" not in k), None)
        f = next((k for k in keys if "fused_ws" in k), None)
        cb = s.get("cublas_us")
        rows.append({"layer": layer, "shape": s.get("shape"), "tokens": int(n), "default": d,
                     "default_us": t.get(d), "fused": f, "fused_us": t.get(f), "cublas_us": cb,
                     "device": s.get("device"), "drift": s.get("drift")})
        print(f"{layer:8s} {n:>6s} {t.get(d) or 0:9.2f} {t.get(f) or 0:9.2f} {cb or 0:9.2f}  {f}")
json.dump({"commit": commit, "rows": rows}, open(out + "/monarch_small.json", "w"), indent=1)
sys.exit(1 if bad else 0)
PY
tar czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
step "done (exit $status)"
exit $status
