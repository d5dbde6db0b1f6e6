#!/usr/bin/env bash
# ws256_check.sh -- blockattn_fwd's `ws` variant at block 256 on an sm_90 GPU,
# in one device call (no network; DEADLINE seconds at most, default 520):
#   1. verify: tests/test_blockattn's GPU suite at block 256, ws only
#      (KTUNE_REQUIRE_GPU=1: no GPU is a failure), every ws config of head_dim
#      64 and 128, rope 0-2 (KC 0, 64, 128 and OVL 0, 1 among them), against
#      the CPU and GPU references on ragged lengths 240-600 (seqs 11, heads 2);
#   2. racecheck: compute-sanitizer --tool racecheck over two ws configs on a
#      tiny shape through `ktune sweep --config` (best effort, its own
#      time limit; skipped without compute-sanitizer);
#   3. time: one `ktune sweep` per head_dim at seqs=1152,lmax=1024,heads=4,
#      block=256,rope=0 over every ws config check() admits there (the
#      default, KC 0 with CONS 2 and RING 4, among them) and the best mma.sync
#      configs of the H100 sweeps (bench/results/shapes_attn_b256_h100.json
#      and two neighbours), all verified against the GPU reference and
#      meeting in one tournament; FlashAttention-2 varlen on the same lengths
#      (bench/peers_attn.py) where torch has it;
#   then a short table (also OUT/table.txt). Build on the build machine first:
#       make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/ws256_check.sh BUILD_DIR OUT_DIR      (defaults: build-dev, bench/out/ws256)
#
# HDS (default "128") the timed head_dims ("128 64" for both); VERIFY=0 skips
# step 1, RACE=0 step 2, FA2=0 the FA2 timing. Each step's time limit is cut
# to what is left of DEADLINE; a step with too little left is skipped and
# says so. OUT gets at most 8 files (verify.log, racecheck.log, run.log,
# table.txt, trials_dHD.json and fa2_dHD.json per head_dim); the databases
# and the sweeps' own logs stay in a temporary folder (run.log holds their
# tails). Exit 0 when the verification passed and every timed trial
# verified; 1 otherwise; 2 when ktune or the test cannot run.
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out/ws256}
HDS=${HDS:-128}
DEADLINE=${DEADLINE:-520}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d) || exit 2
trap 'rm -rf "$WORK"' EXIT
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
T=$PWD/$B/tests/test_blockattn
[ -x "$K" ] || { echo "ws256_check: no ktune at $K (make BUILD=$B all)" >&2; exit 2; }
[ -x "$T" ] || { echo "ws256_check: no test at $T (make BUILD=$B all)" >&2; exit 2; }
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
t0=$(date +%s)
say() { echo "== $(($(date +%s) - t0)) s: $*" | tee -a "$OUT/run.log" >&2; }
# left CAP: seconds for the next step, at most CAP, what DEADLINE leaves
left() {
	local l=$((DEADLINE - ($(date +%s) - t0)))
	[ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}
: >"$OUT/run.log"

# 1. every ws config at block 256 against both references (small shapes)
vrc=0
if [ "${VERIFY:-1}" != 0 ]; then
	say "verify: test_blockattn, ws at block 256"
	KTUNE_REQUIRE_GPU=1 KTUNE_BLOCKATTN_GPU_ONLY=1 KTUNE_BLOCKATTN_SMALL_ONLY=1 \
		KTUNE_BLOCKATTN_VARIANT=ws KTUNE_BLOCKATTN_BLOCK=256 KTUNE_BIN=$K \
		timeout "$(left 300)" "$T" >"$OUT/verify.log" 2>&1
	vrc=$?
	[ $vrc -eq 0 ] || { status=1; echo "ws256_check: verification exited $vrc (see $OUT/verify.log)" >&2; }
else
	echo "skipped (VERIFY=0)" >"$OUT/verify.log"
fi

# 2. racecheck on a tiny shape (2 sequences of 240-600 tokens, heads 1: a
#    few items, one a CTA; within an item the q slots wrap over the rounds
#    and the k/v slots over the chunks): the overlap with its two k/v slots
#    held over a ring of two, and the rebalanced producer's batched rotation
RACE_SHAPES=("seqs=2,lmax=600,heads=1,head_dim=128,block=256,rope=0"
	     "seqs=2,lmax=600,heads=1,head_dim=64,block=256,rope=1")
RACE_CFGS=("variant=ws,CONS=2,RING=2,RPROD=0,KC=128,OVL=1"
	   "variant=ws,CONS=2,RING=2,RPROD=1,KC=64,OVL=0")
: >"$OUT/racecheck.log"
race="skipped"
if [ "${RACE:-1}" != 0 ] && [ -x "$SAN" ]; then
	race="clean"
	for i in 0 1; do
		lim=$(left 120)
		if [ "$lim" -lt 60 ]; then
			race="$race, ${RACE_CFGS[$i]} skipped (time)"
			continue
		fi
		say "racecheck: ${RACE_CFGS[$i]} at ${RACE_SHAPES[$i]}"
		timeout "$lim" "$SAN" --tool racecheck --target-processes all --racecheck-report hazard \
			"$K" sweep --family blockattn_fwd --shape "${RACE_SHAPES[$i]}" \
			--config "${RACE_CFGS[$i]}" --db "$WORK/race.db" --no-baseline --no-retime \
			--tournament 0 --timeout $((lim - 10)) --json >>"$OUT/racecheck.log" 2>&1
		rc=$?
		if [ $rc -eq 124 ]; then
			race="timed out"
		elif grep -Eq "ERROR SUMMARY: [1-9]|SUMMARY: [1-9][0-9]* hazard" "$OUT/racecheck.log"; then
			race="hazards (see racecheck.log)"
		elif [ $rc -ne 0 ] && [ "$race" = clean ]; then
			race="exit $rc (see racecheck.log)"
		fi
	done
fi

# The ws configs check() admits at block 256, rope 0, head_dim $1 (RPROD 0):
# KC 0 (the kernel from before KC) with OVL 0; OVL 1 only with KC; KC with
# CONS 1 and the head_dim's own chunk only with OVL 1; two q slots and RING
# k/v slots within 227 KiB.
ws_configs() {
	local hd=$1 cons ring kc ovl chunk def
	def=$([ "$hd" = 64 ] && echo 128 || echo 64)
	for cons in 1 2; do
		for ring in 2 3 4; do
			for kc in 0 64 128; do
				for ovl in 0 1; do
					chunk=$([ $kc = 0 ] && echo "$def" || echo $kc)
					[ $ovl = 1 ] && [ $kc = 0 ] && continue
					[ $kc != 0 ] && [ $cons = 1 ] && [ "$chunk" = "$def" ] && [ $ovl = 0 ] &&
						continue
					[ $(((2 * 64 * cons + ring * 2 * chunk) * hd * 2 + 1024)) -gt 232448 ] &&
						continue
					echo "variant=ws,CONS=$cons,RING=$ring,RPROD=0,KC=$kc,OVL=$ovl"
				done
			done
		done
	done
}

# 3. the timed shape: every ws config beside the best mma.sync ones
for hd in $HDS; do
	shape=seqs=1152,lmax=1024,heads=4,head_dim=$hd,block=256,rope=0
	cfgs=()
	while read -r c; do
		cfgs+=(--config "$c")
	done < <(ws_configs "$hd")
	for c in "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=2,RPF=0,MINB=1,KCH=64,QP=2,KST=0" \
		 "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,KCH=64,QP=2,KST=0" \
		 "variant=persistent,ROWS_W=16,DSPLIT=1,STAGES=1,CTAS_SM=1,RPF=0,MINB=1,KCH=64,QP=2,KST=0"; do
		cfgs+=(--config "$c")
	done
	lim=$(left 300)
	if [ "$lim" -lt 60 ]; then
		say "sweep: head_dim $hd skipped ($lim s left of DEADLINE $DEADLINE)"
		status=1
		echo '[]' >"$OUT/trials_d$hd.json"
		continue
	fi
	say "sweep: blockattn_fwd $shape ($((${#cfgs[@]} / 2)) configs, ws and mma.sync; ${lim} s at most)"
	timeout "$lim" "$K" sweep --family blockattn_fwd --shape "$shape" "${cfgs[@]}" \
		--db "$WORK/ws256.db" --no-baseline --threads 16 --json </dev/null \
		>"$WORK/sweep_d$hd.json" 2>"$WORK/sweep_d$hd.log"
	rc=$?
	if grep -q '"no_gpu"\|no NVIDIA\|no CUDA device' "$WORK/sweep_d$hd.json" "$WORK/sweep_d$hd.log" 2>/dev/null; then
		echo "ws256_check: ktune cannot run here:" >&2
		tail -n 3 "$WORK/sweep_d$hd.log" >&2
		exit 2
	fi
	[ $rc -eq 0 ] || echo "ws256_check: the sweep exited $rc (see $OUT/run.log)" >&2
	{ echo "-- sweep_d$hd.log (tail)"; tail -n 20 "$WORK/sweep_d$hd.log"; } >>"$OUT/run.log"
	id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sweep_id",""))' \
		"$WORK/sweep_d$hd.json" 2>/dev/null)
	if [ -n "$id" ]; then
		"$K" trials "$id" --db "$WORK/ws256.db" --json >"$OUT/trials_d$hd.json" 2>>"$OUT/run.log"
	else
		echo '[]' >"$OUT/trials_d$hd.json"
	fi
	if [ "${FA2:-1}" != 0 ]; then
		lim=$(left 150)
		if [ "$lim" -lt 40 ]; then
			say "fa2_varlen: head_dim $hd skipped ($lim s left)"
		else
			say "fa2_varlen: head_dim $hd"
			timeout "$lim" python3 bench/peers_attn.py "$OUT/fa2_d$hd.json" --seqs 1152 \
				--lmax 1024 --heads 4 --head-dim "$hd" --block 256 >"$WORK/fa2_d$hd.log" 2>&1 ||
				echo "ws256_check: peers_attn.py failed (see $OUT/run.log)" >&2
			{ echo "-- fa2_d$hd.log (tail)"; tail -n 8 "$WORK/fa2_d$hd.log"; } >>"$OUT/run.log"
		fi
	fi
done

say "table"
python3 - "$OUT" "$WORK" "$HDS" "$vrc" "$race" <<'PY' | tee "$OUT/table.txt" || status=1
import json, re, sys
out, work, hds, vrc, race = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]
DEFAULT = "variant=ws,CONS=2,RING=4,RPROD=0,KC=0,OVL=0"

def load(path, empty):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return empty

bad = 0
try:
    log = open(f"{out}/verify.log").read()
except OSError:
    log = ""
lines = re.findall(r"blockattn_fwd (\S+): (\d+) configs of ws, worst rel (\S+) \(GPU ref\) (\S+)", log)
print(f"\nverification (test_blockattn, ws, block 256): "
      f"{'passed' if vrc == 0 else f'FAILED (exit {vrc})'}")
for key, n, g, c in lines:
    print(f"  {key}: {n} configs, worst rel {g} (GPU ref) {c} (CPU ref)")
print(f"racecheck: {race}")
for hd in hds:
    print(f"\nblockattn_fwd seqs=1152 lmax=1024 heads=4 head_dim={hd} block=256 rope=0")
    trials = [t for t in load(f"{out}/trials_d{hd}.json", []) if "config" in t]
    fa2 = None
    for r in load(f"{out}/fa2_d{hd}.json", []):
        if r.get("impl") == "fa2_varlen" and r.get("workload", "").startswith("blockattn_fwd"):
            fa2 = r.get("us")
    best, default = {}, None
    for t in sorted(trials, key=lambda t: (t["status"] != "ok", t.get("median_us") or 1e30)):
        ok = t["status"] == "ok"
        bad += not ok
        us = f'{t["median_us"]:9.1f} us' if ok else f'{"":12}'
        print(f'  {us}  {t["status"]:<8} rel_err {t.get("rel_err", 0):.2e}  {t["config"]}'
              + ("" if ok else f'  {t.get("message", "")[:100]}'))
        cfg = t["config"]
        side = ("ws, KC 0" if ",KC=0," in cfg or cfg.endswith(",KC=0") else "ws, KC set") \
            if cfg.startswith("variant=ws") else "mma.sync"
        if ok and side not in best:
            best[side] = t["median_us"]
        if ok and cfg == DEFAULT:
            default = t["median_us"]
    summ = load(f"{work}/sweep_d{hd}.json", {})
    if summ.get("verified"):
        print(f'  tournament winner: {summ.get("us", 0):.1f} us  {summ.get("config")}')
    fmt = lambda v: f"{v:.1f}" if v else "-"
    row = "  default {} | best ws KC 0 {} | best ws KC set {} | best mma.sync {} | FA2 {}".format(
        fmt(default), fmt(best.get("ws, KC 0")), fmt(best.get("ws, KC set")),
        fmt(best.get("mma.sync")), fmt(fa2))
    if default and best.get("ws, KC set"):
        row += f' | KC set / default {best["ws, KC set"] / default:.3f}'
    if fa2 and best.get("ws, KC set"):
        row += f' | FA2 / best KC set {fa2 / best["ws, KC set"]:.3f}'
    print(row + "  (µs; medians of the sweep's trials)")
sys.exit(1 if bad or vrc else 0)
PY
say "done"
exit $status
