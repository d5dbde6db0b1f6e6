#!/usr/bin/env bash
# ws128_check.sh -- blockattn's `ws` variant at block 128 on an sm_90 GPU:
# every valid ws config of each shape is verified against the GPU reference
# and timed (`ktune sweep --variants ws`, exhaustive), beside the best of the
# mma.sync variants (grid, persistent, prefetch) found by a time-limited
# exhaustive sweep, then a short table: each ws config's median, its
# verdict and relative error, the best non-ws config and the ratio.
#
#   bench/ws128_check.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, bench/out/ws128)
#
# Shapes: seqs=1152, lmax=256, heads=4, block=128, head_dim in $HDS (64 128),
# rope in $ROPES (0 1), directions in $DIRS (fwd bwd). SYNC_LIMIT (default 90)
# is the mma.sync sweeps' --time-limit in seconds. The databases live in
# OUT_DIR (ws.db, sync.db): a call cut short resumes where it stopped, so the
# whole run (~15-25 minutes) may be split, e.g. DIRS=fwd HDS=64 first.
# The backward's ws at block 128: 27 configs at head_dim 64 (ROPES="0 1 2"),
# 6 at 128 (one slot: CONS 1 and 2 without rope, CONS 1 with RPROD 0 and 3
# with it).
# Before the sweeps, optionally (each needs BUILD_DIR/tests/test_blockattn
# or compute-sanitizer, and is skipped without):
#   VERIFY=1  tests/test_blockattn's GPU suite at block 128, ws only
#             (KTUNE_REQUIRE_GPU=1), every ws config of both directions
#             against the CPU and GPU references on ragged lengths 40-100
#             (seqs 29, heads 3: one item a CTA, both short and two-half
#             blocks); its log is OUT/verify.log;
#   RACE=1    compute-sanitizer --tool racecheck over the configs in
#             RACE_CFGS (default: the backward's head_dim-128 ws with CONS
#             2, rope 0, and CONS 1, RPROD 3, rope 1) through `ktune sweep
#             --config` at seqs=40, lmax=256, heads=4 (over 132 items: the
#             ring and the scratch wrap), each within RACE_LIMIT seconds
#             (default 100); OUT/racecheck.log.
# Exit 0 when every ws trial that ran verified and VERIFY passed and RACE
# found no hazard; 1 otherwise; 2 when ktune cannot run (no GPU: the
# sweep's own error is printed).
set -uo pipefail
# shellcheck source=bench/ws_verify.sh
. "$(dirname "$0")/ws_verify.sh"
B=${1:-build}
OUT=${2:-bench/out/ws128}
DIRS=${DIRS:-fwd bwd}
HDS=${HDS:-64 128}
ROPES=${ROPES:-0 1}
SYNC_LIMIT=${SYNC_LIMIT:-90}
K=$PWD/$B/ktune
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
[ -x "$K" ] || { echo "ws128_check: no ktune at $K (make BUILD=$B all)" >&2; exit 2; }
mkdir -p "$OUT" || exit 2

# A sweep: $1 family, $2 shape, $3 variants, $4 database, $5 tag, then
# extra ktune sweep options. Its JSON summary goes to OUT/$5.json, its
# trials to OUT/$5.trials.json; returns ktune's status.
sweep() {
	local fam=$1 shape=$2 vars=$3 db=$4 tag=$5 id
	shift 5
	"$K" sweep --family "$fam" --shape "$shape" --variants "$vars" --db "$db" --no-baseline \
		--json "$@" >"$OUT/$tag.json" 2>"$OUT/$tag.log"
	local rc=$?
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sweep_id",""))' \
		"$OUT/$tag.json" 2>/dev/null)
	if [ -n "$id" ]; then
		"$K" trials "$id" --db "$db" --json >"$OUT/$tag.trials.json" 2>>"$OUT/$tag.log"
	else
		echo '[]' >"$OUT/$tag.trials.json"
	fi
	return $rc
}

status=0
t0=$(date +%s)
say() { echo "== $(($(date +%s) - t0)) s: $*" >&2; }
T=$PWD/$B/tests/test_blockattn
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
verify="not run"
if [ "${VERIFY:-0}" = 1 ]; then
	if [ -x "$T" ]; then
		say "verify: test_blockattn, ws at block 128"
		ws_verify 128 "$K" "$T" "${VERIFY_LIMIT:-300}" "$OUT/verify.log"
		vrc=$?
		if [ $vrc -eq 0 ]; then
			verify=passed
		else
			verify="FAILED (exit $vrc, see $OUT/verify.log)"
			status=1
		fi
	else
		verify="skipped (no $T)"
	fi
fi
race="not run"
if [ "${RACE:-0}" = 1 ]; then
	if [ -x "$SAN" ]; then
		RACE_FAM=${RACE_FAM:-blockattn_bwd}
		RACE_HD=${RACE_HD:-128}
		if [ -n "${RACE_CFGS:-}" ]; then
			read -r -a cfgs <<<"$RACE_CFGS"
		else
			cfgs=("0:variant=ws,CONS=2,RING=1,RPROD=0" "1:variant=ws,CONS=1,RING=1,RPROD=3")
		fi
		race=clean
		: >"$OUT/racecheck.log"
		for rc_cfg in "${cfgs[@]}"; do
			rope=${rc_cfg%%:*}
			cfg=${rc_cfg#*:}
			shape=seqs=40,lmax=256,heads=4,head_dim=$RACE_HD,block=128,rope=$rope
			say "racecheck: $RACE_FAM $cfg at $shape"
			echo "== $RACE_FAM $cfg at $shape" >>"$OUT/racecheck.log"
			timeout "${RACE_LIMIT:-100}" "$SAN" --tool racecheck --target-processes all \
				--racecheck-report hazard "$K" sweep --family "$RACE_FAM" --shape "$shape" \
				--config "$cfg" --db "$OUT/race.db" --no-baseline --no-retime \
				--sentinel-every 0 \
				--tournament 0 --timeout 90 --json >>"$OUT/racecheck.log" 2>&1
			rc=$?
			if [ $rc -eq 124 ]; then
				race="timed out (see $OUT/racecheck.log)"
			elif grep -Eq "ERROR SUMMARY: [1-9]|SUMMARY: [1-9][0-9]* hazard" "$OUT/racecheck.log"; then
				race="hazards (see $OUT/racecheck.log)"
				status=1
			elif [ $rc -ne 0 ] && [ "$race" = clean ]; then
				race="exit $rc (see $OUT/racecheck.log)"
			fi
		done
	else
		race="skipped (no compute-sanitizer)"
	fi
fi

for dir in $DIRS; do
	for hd in $HDS; do
		for rope in $ROPES; do
			fam=blockattn_$dir
			shape=seqs=1152,lmax=256,heads=4,head_dim=$hd,block=128,rope=$rope
			sync=grid,persistent
			[ "$dir" = fwd ] && sync=grid,persistent,prefetch
			tag=${dir}_d${hd}_r${rope}
			say "$fam $shape: ws"
			sweep "$fam" "$shape" ws "$OUT/ws.db" "ws_$tag"
			rc=$?
			if grep -q '"no_gpu"\|no NVIDIA\|no CUDA device' "$OUT/ws_$tag.json" "$OUT/ws_$tag.log" 2>/dev/null; then
				echo "ws128_check: ktune cannot run here:" >&2
				tail -n 3 "$OUT/ws_$tag.log" >&2
				exit 2
			fi
			[ $rc -ne 0 ] && echo "ws128_check: the ws sweep exited $rc (see $OUT/ws_$tag.log)" >&2
			say "$fam $shape: mma.sync variants (--time-limit $SYNC_LIMIT)"
			sweep "$fam" "$shape" "$sync" "$OUT/sync.db" "sync_$tag" --time-limit "$SYNC_LIMIT" ||
				echo "ws128_check: the mma.sync sweep failed (see $OUT/sync_$tag.log)" >&2
		done
	done
done

python3 - "$OUT" "$DIRS" "$HDS" "$ROPES" "$verify" "$race" <<'PY' || status=1
import json, os, sys
sys.path.insert(0, "bench")
import ws_verify
out, dirs, hds, ropes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
verify, race = sys.argv[5], sys.argv[6]
print(f"verification (test_blockattn, ws, block 128): {verify}")
for r in ws_verify.read(f"{out}/verify.log") if verify != "not run" else []:
    print(ws_verify.line(*r))
print(f"racecheck: {race}")

def load(path, empty):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return empty

bad = 0
for d in dirs:
    for hd in hds:
        for r in ropes:
            tag = f"{d}_d{hd}_r{r}"
            print(f"\nblockattn_{d}  head_dim={hd} rope={r} block=128")
            ws = [t for t in load(f"{out}/ws_{tag}.trials.json", []) if "config" in t]
            summ = load(f"{out}/ws_{tag}.json", {})
            if not ws:
                why = summ.get("error", {}).get("message") if isinstance(summ.get("error"), dict) else None
                if not why:
                    try:
                        why = open(f"{out}/ws_{tag}.log").read().strip().splitlines()[-1]
                    except (OSError, IndexError):
                        why = "no trials"
                print(f"  ws: none ran ({why})")
            best_ws = None
            for t in sorted(ws, key=lambda t: (t["status"] != "ok", t.get("median_us") or 1e30)):
                ok = t["status"] == "ok"
                bad += not ok
                us = f'{t["median_us"]:10.2f} us' if ok else f'{"":13}'
                print(f'  {us}  {t["status"]:<13} rel_err {t.get("rel_err", 0):.2e}  {t["config"]}'
                      + ("" if ok else f'  {t.get("message", "")[:120]}'))
                if ok and (best_ws is None or t["median_us"] < best_ws):
                    best_ws = t["median_us"]
            sy = load(f"{out}/sync_{tag}.json", {})
            if sy.get("verified"):
                line = f'  best non-ws: {sy["us"]:10.2f} us  {sy["config"]}'
                if best_ws:
                    line += f'   (best ws / best non-ws: {best_ws / sy["us"]:.3f}x time)'
                if sy.get("time_limited"):
                    line += "  [non-ws sweep time-limited]"
                print(line)
            else:
                print("  best non-ws: none verified (see the sync_*.log files)")
sys.exit(1 if bad else 0)
PY
exit $status
