#!/usr/bin/env bash
# ws128_ab.sh -- the ws kernels at block 128 (templates/blockattn_ws.cu),
# forward and backward, of an old binary against a new one on an sm_90 GPU,
# in one device call of at most ~7 minutes:
#   1. verify: NEW's tests/test_blockattn GPU suite at block 128, ws only
#      (small ragged shapes, lengths 40-100: blocks whose second half is
#      empty and blocks with both; every ws config of both directions,
#      head_dim 64 and 128, rope 0-2, against the CPU and GPU references);
#   2. compute-sanitizer racecheck, then synccheck, on NEW's `ktune sweep
#      --config` at seqs=40,lmax=256,heads=4 (about 290 items: two or three
#      a CTA, short blocks among them, so buffers are refilled across items
#      and a CTA's last item ends the walk): RACE_CFGS below, the forward
#      at head_dim 128 (CONS 2, RING 2) and 64 (CONS 1, RING 3), the
#      backward at 128 (CONS 2 and 1, RING 1), rope 0; WS128_RACE (space-
#      separated FAMILY|SHAPE|CONFIG) replaces them;
#   3. time OLD against NEW: each entry (ENTRIES below: the forward at
#      head_dim 128 and 64, the backward at 128 with CONS 2 and 1; seqs
#      1152, lmax 256, heads 4, block 128, rope 0) by `ktune sweep --config`
#      on a fresh database, the entries rotated each round and the binaries
#      alternating which goes first (bench/retime.sh's order), rounds until
#      ROUNDS or the time budget; every run is verified against the GPU
#      reference. WS128_ENTRIES (space-separated FAMILY|SHAPE|CONFIG)
#      replaces them.
# Every step runs under `timeout`; the logs, databases and the table go into
# OUT_DIR/ws128_ab.tgz, and the table is printed last. Build both first,
# e.g. `make BUILD=build-new STATIC_DEPS=1 -j2 all` (and the old commit into
# build-old from its own worktree).
#
#   bench/ws128_ab.sh OLD_BUILD NEW_BUILD OUT_DIR
#
# BUDGET (default 420) seconds in all: timing starts no run that could end
# past it. VERIFY_LIMIT (120), RACE_LIMIT (40), SYNC_LIMIT (25) seconds per
# sanitizer run (SYNC=0 leaves synccheck out); ROUNDS (default 3) timing
# rounds at most. Exit 0 when the verification passed, the sanitizers found
# nothing and every timed run verified; 1 otherwise; 2 when a binary is
# missing.
set -uo pipefail
# shellcheck source=bench/ws_verify.sh
. "$(dirname "$0")/ws_verify.sh"
if [ $# -ne 3 ]; then
	sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
OLD=$PWD/$1/ktune NEW=$PWD/$2/ktune T=$PWD/$2/tests/test_blockattn
case $1 in /*) OLD=$1/ktune ;; esac
case $2 in /*) NEW=$2/ktune T=$2/tests/test_blockattn ;; esac
for x in "$OLD" "$NEW" "$T"; do
	[ -x "$x" ] || { echo "ws128_ab: no $x (make BUILD=... all)" >&2; exit 2; }
done
mkdir -p "$3" || exit 2
OUT=$(cd "$3" && pwd)/ws128_ab
rm -rf "$OUT" && mkdir -p "$OUT/runs" || exit 2
BUDGET=${BUDGET:-420}
ROUNDS=${ROUNDS:-3}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t0=$(date +%s)
el() { echo $(($(date +%s) - t0)); }
say() { echo "== $(el) s: $*" >&2; }
status=0

{
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
		--format=csv 2>&1
	echo "old: $("$OLD" --version 2>&1)"
	echo "new: $("$NEW" --version 2>&1)"
} >"$OUT/env.txt"

# 1. every ws config at block 128 against both references (small shapes)
say "verify: test_blockattn, ws at block 128 (NEW)"
ws_verify 128 "$NEW" "$T" "${VERIFY_LIMIT:-120}" "$OUT/verify.log"
vrc=$?
if [ $vrc -eq 0 ]; then verify=passed; else verify="FAILED (exit $vrc, verify.log)"; status=1; fi

# 2. racecheck and synccheck over RACE_CFGS, multi-item CTAs
RACE_CFGS=("blockattn_fwd|seqs=40,lmax=256,heads=4,head_dim=128,block=128,rope=0|variant=ws,CONS=2,RING=2,RPROD=0"
	   "blockattn_fwd|seqs=40,lmax=256,heads=4,head_dim=64,block=128,rope=0|variant=ws,CONS=1,RING=3,RPROD=0"
	   "blockattn_bwd|seqs=40,lmax=256,heads=4,head_dim=128,block=128,rope=0|variant=ws,CONS=2,RING=1,RPROD=0"
	   "blockattn_bwd|seqs=40,lmax=256,heads=4,head_dim=128,block=128,rope=0|variant=ws,CONS=1,RING=1,RPROD=0")
[ -n "${WS128_RACE:-}" ] && read -r -a RACE_CFGS <<<"$WS128_RACE"
san() {
	local tool=$1 limit=$2 res=clean fam cfg shape rc
	: >"$OUT/$tool.log"
	if [ ! -x "$SAN" ]; then
		echo "skipped (no compute-sanitizer)"
		return
	fi
	for c in "${RACE_CFGS[@]}"; do
		IFS='|' read -r fam shape cfg <<<"$c"
		say "$tool: $fam $cfg at $shape"
		echo "== $cfg at $shape" >>"$OUT/$tool.log"
		local extra=()
		[ "$tool" = racecheck ] && extra=(--racecheck-report hazard)
		timeout "$limit" "$SAN" --tool "$tool" --target-processes all "${extra[@]}" \
			"$NEW" sweep --family "$fam" --shape "$shape" --config "$cfg" \
			--db "$OUT/$tool.db" --no-baseline --no-retime --sentinel-every 0 --tournament 0 \
			--timeout 60 --json >>"$OUT/$tool.log" 2>&1
		rc=$?
		if grep -Eq "ERROR SUMMARY: [1-9]|SUMMARY: [1-9][0-9]* hazard" "$OUT/$tool.log"; then
			res="errors (see $tool.log)"
		elif [ $rc -eq 124 ] && [ "$res" = clean ]; then
			res="timed out (see $tool.log)"
		elif [ $rc -ne 0 ] && [ "$res" = clean ]; then
			res="exit $rc (see $tool.log)"
		fi
	done
	echo "$res"
}
race=$(san racecheck "${RACE_LIMIT:-40}")
if [ "${SYNC:-1}" = 0 ]; then
	sync="skipped (SYNC=0)"
else
	sync=$(san synccheck "${SYNC_LIMIT:-25}")
fi
case $race in clean | skipped*) ;; *) status=1 ;; esac
case $sync in clean | skipped*) ;; *) status=1 ;; esac

# 3. OLD against NEW, rotated rounds within the budget
ENTRIES=("blockattn_fwd|seqs=1152,lmax=256,heads=4,block=128,rope=0,head_dim=128|variant=ws,CONS=2,RING=2,RPROD=0"
	 "blockattn_fwd|seqs=1152,lmax=256,heads=4,block=128,rope=0,head_dim=64|variant=ws,CONS=2,RING=2,RPROD=0"
	 "blockattn_bwd|seqs=1152,lmax=256,heads=4,block=128,rope=0,head_dim=128|variant=ws,CONS=2,RING=1,RPROD=0"
	 "blockattn_bwd|seqs=1152,lmax=256,heads=4,block=128,rope=0,head_dim=128|variant=ws,CONS=1,RING=1,RPROD=0")
[ -n "${WS128_ENTRIES:-}" ] && read -r -a ENTRIES <<<"$WS128_ENTRIES"
n=${#ENTRIES[@]}
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < n; i++)); do
		k=$(((r + i) % n))
		IFS='|' read -r fam shape cfg <<<"${ENTRIES[$k]}"
		if (((r + i) % 2 == 0)); then order=(old new); else order=(new old); fi
		for which in "${order[@]}"; do
			left=$((BUDGET - $(el)))
			[ $left -ge 15 ] || break 3
			bin=$OLD
			[ "$which" = new ] && bin=$NEW
			say "time: round $((r + 1)) entry $((k + 1))/$n $which: $shape $cfg"
			f=$OUT/runs/r${r}e${k}$which
			lim=$((left < 45 ? left : 45))
			timeout "$lim" "$bin" sweep --family "$fam" --shape "$shape" --config "$cfg" \
				--no-baseline --no-retime --sentinel-every 0 --tournament 0 --db "$f.db" \
				--json </dev/null >"$f.json" 2>"$f.log" || tail -n 2 "$f.log" >&2
		done
	done
done

python3 - "$OUT" "$verify" "$race" "$sync" "${ENTRIES[@]}" >"$OUT/table.txt" <<'PY' || status=1
import json, statistics, sys
sys.path.insert(0, "bench")
import ws_verify
out, verify, race, sync, entries = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
print(open(f"{out}/env.txt").read().strip())
print(f"verify (test_blockattn, ws, block 128, NEW): {verify}")
for r in ws_verify.read(f"{out}/verify.log"):
    print(ws_verify.line(*r))
print(f"racecheck (NEW, seqs 40): {race}")
print(f"synccheck (NEW, seqs 40): {sync}")
print("\n    old us     new us  new/old  runs  shape | config  (median over rounds; each run verified)")
bad = cut = 0
for k, e in enumerate(entries):
    fam, shape, cfg = e.split("|")
    t = {"old": [], "new": []}
    for which in t:
        for r in range(64):
            try:
                s = json.load(open(f"{out}/runs/r{r}e{k}{which}.json"))
            except OSError:
                continue
            except ValueError:  # cut short (timeout) or failed before its summary
                cut += 1
                continue
            s = s.get("sweeps", [s])[0]
            if s.get("verified"):
                t[which].append(s["us"])
            else:
                bad += 1
    o = statistics.median(t["old"]) if t["old"] else None
    nw = statistics.median(t["new"]) if t["new"] else None
    f = lambda x: f"{x:10.2f}" if x else f"{'-':>10}"
    ratio = f"{nw / o:7.3f}" if o and nw else f"{'-':>7}"
    print(f"{f(o)} {f(nw)}  {ratio}  {len(t['old'])}/{len(t['new'])}   {fam[10:]} {shape} | {cfg}")
print(f"runs that did not verify: {bad}; cut short or without a summary: {cut}")
sys.exit(1 if bad or cut else 0)
PY
tar -C "$(dirname "$OUT")" -czf "$(dirname "$OUT")/ws128_ab.tgz" ws128_ab 2>/dev/null ||
	echo "ws128_ab: tar failed" >&2
say "done; $(dirname "$OUT")/ws128_ab.tgz"
cat "$OUT/table.txt"
exit $status
