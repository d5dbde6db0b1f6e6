#!/usr/bin/env bash
# ws256_check.sh -- the `ws` variant at block 256 on an sm_90 GPU (the
# forward, DIRS=fwd, the default; the backward's two wgmma kernels,
# DIRS=bwd; or DIRS="fwd bwd"), in one device call (no network, a few
# minutes):
#   1. verify: tests/test_blockattn's GPU suite at block 256, ws only
#      (KTUNE_REQUIRE_GPU=1: no GPU is a failure), every ws config of both
#      directions (head_dim 64 and 128, rope 0-2) against the CPU and GPU
#      references on ragged lengths 240-600 (seqs 11, heads 2: tails over
#      every chunk and pass);
#   2. racecheck: compute-sanitizer --tool racecheck over two ws configs of
#      each direction in DIRS on a tiny shape through `ktune sweep --config`
#      (best effort, its own time limit; skipped without compute-sanitizer);
#   3. time: one `ktune sweep` per direction and head_dim at seqs=1152,
#      lmax=1024,heads=4,block=256,rope=0 -- the forward over every ws config
#      and the best mma.sync configs of the H100 sweeps
#      (bench/results/shapes_attn_b256_h100.json and two neighbours), the
#      backward over every ws config and the chunked default -- all verified
#      against the GPU reference and meeting in one tournament;
#      FlashAttention-2 varlen (forward and backward) on the same lengths
#      (bench/peers_attn.py) where torch has it;
#   then a short table. Build on the build machine first:
#       make BUILD=build-dev STATIC_DEPS=1 -j2 all
#
#   bench/ws256_check.sh BUILD_DIR OUT_DIR      (defaults: build-dev, bench/out/ws256)
#
# DIRS (default fwd) the directions raced and timed; HDS (default "128 64")
# the timed head_dims; RACE=0 skips step 2, FA2=0 the FA2 timing;
# VERIFY_LIMIT (240) and RACE_LIMIT (150) seconds for step 1 and each
# racecheck. Exit 0 when the verification passed and every timed trial
# verified; 1 otherwise; 2 when ktune or the test cannot run.
set -uo pipefail
# shellcheck source=bench/ws_verify.sh
. "$(dirname "$0")/ws_verify.sh"
B=${1:-build-dev}
OUT=${2:-bench/out/ws256}
HDS=${HDS:-128 64}
DIRS=${DIRS:-fwd}
for dir in $DIRS; do
	case $dir in
	fwd | bwd) ;;
	*) echo "ws256_check: DIRS: fwd and/or bwd, not '$dir'" >&2; exit 2 ;;
	esac
done
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
T=$PWD/$B/tests/test_blockattn
[ -x "$K" ] || { echo "ws256_check: no ktune at $K (make BUILD=$B all)" >&2; exit 2; }
[ -x "$T" ] || { echo "ws256_check: no test at $T (make BUILD=$B all)" >&2; exit 2; }
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
t0=$(date +%s)
say() { echo "== $(($(date +%s) - t0)) s: $*" >&2; }

# 1. every ws config at block 256 (both directions) against both
#    references (small shapes)
say "verify: test_blockattn, ws at block 256"
ws_verify 256 "$K" "$T" "${VERIFY_LIMIT:-240}" "$OUT/verify.log"
vrc=$?
[ $vrc -eq 0 ] || { status=1; echo "ws256_check: verification exited $vrc (see $OUT/verify.log)" >&2; }

# 2. racecheck on a tiny shape (2 sequences of 240-600 tokens, heads 1: a
#    few items; the forward one a CTA, within an item the q slots wrap over
#    the rounds and the k/v slots over the chunks; the backward a CTA a
#    pass, its q/do ring wrapping over the block's 4-10 chunks)
RACE_FAMS=()
RACE_SHAPES=()
RACE_CFGS=()
for dir in $DIRS; do
	if [ "$dir" = fwd ]; then
		RACE_FAMS+=(blockattn_fwd blockattn_fwd)
		RACE_SHAPES+=("seqs=2,lmax=600,heads=1,head_dim=64,block=256,rope=1"
			      "seqs=2,lmax=600,heads=1,head_dim=128,block=256,rope=0")
		RACE_CFGS+=("variant=ws,CONS=2,RING=2,RPROD=1" "variant=ws,CONS=1,RING=3,RPROD=0")
	else
		RACE_FAMS+=(blockattn_bwd blockattn_bwd)
		RACE_SHAPES+=("seqs=2,lmax=600,heads=1,head_dim=128,block=256,rope=0"
			      "seqs=2,lmax=600,heads=1,head_dim=64,block=256,rope=2")
		RACE_CFGS+=("variant=ws,CONS=2,RING=2,RPROD=0" "variant=ws,CONS=1,RING=3,RPROD=0")
	fi
done
: >"$OUT/racecheck.log"
race="skipped"
if [ "${RACE:-1}" != 0 ] && [ -x "$SAN" ]; then
	race="clean"
	for i in "${!RACE_CFGS[@]}"; do
		say "racecheck: ${RACE_FAMS[$i]} ${RACE_CFGS[$i]} at ${RACE_SHAPES[$i]}"
		timeout "${RACE_LIMIT:-150}" "$SAN" --tool racecheck --target-processes all \
			--racecheck-report hazard \
			"$K" sweep --family "${RACE_FAMS[$i]}" --shape "${RACE_SHAPES[$i]}" \
			--config "${RACE_CFGS[$i]}" --db "$OUT/race.db" --no-baseline --no-retime \
			--sentinel-every 0 \
			--tournament 0 --timeout 120 --json >>"$OUT/racecheck.log" 2>&1
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

# 3. the timed shape: the forward's ws configs beside the best mma.sync
#    ones, the backward's beside the chunked default; FA2 once a head_dim
#    (peers_attn.py times both directions)
for hd in $HDS; do
	shape=seqs=1152,lmax=1024,heads=4,head_dim=$hd,block=256,rope=0
	for dir in $DIRS; do
		cfgs=()
		if [ "$dir" = fwd ]; then
			fam=blockattn_fwd
			tag=d$hd
			for cons in 1 2; do
				for ring in 2 3 4; do
					cfgs+=(--config "variant=ws,CONS=$cons,RING=$ring,RPROD=0")
				done
			done
			for c in "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=2,RPF=0,MINB=1,KCH=64,QP=2,KST=0" \
				 "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,KCH=64,QP=2,KST=0" \
				 "variant=persistent,ROWS_W=16,DSPLIT=1,STAGES=1,CTAS_SM=1,RPF=0,MINB=1,KCH=64,QP=2,KST=0"; do
				cfgs+=(--config "$c")
			done
		else
			fam=blockattn_bwd
			tag=bwd_d$hd
			for cons in 1 2; do
				for ring in 2 3; do
					cfgs+=(--config "variant=ws,CONS=$cons,RING=$ring,RPROD=0")
				done
			done
			cfgs+=(--config "variant=chunked,RING=2,KCH=32,QP=4")
		fi
		say "sweep: $fam $shape (ws and the mma.sync baseline)"
		"$K" sweep --family $fam --shape "$shape" "${cfgs[@]}" --db "$OUT/ws256.db" \
			--no-baseline --threads 16 --json </dev/null >"$OUT/sweep_$tag.json" \
			2>"$OUT/sweep_$tag.log"
		rc=$?
		if grep -q '"no_gpu"\|no NVIDIA\|no CUDA device' "$OUT/sweep_$tag.json" \
			"$OUT/sweep_$tag.log" 2>/dev/null; then
			echo "ws256_check: ktune cannot run here:" >&2
			tail -n 3 "$OUT/sweep_$tag.log" >&2
			exit 2
		fi
		[ $rc -eq 0 ] || echo "ws256_check: the sweep exited $rc (see $OUT/sweep_$tag.log)" >&2
		id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sweep_id",""))' \
			"$OUT/sweep_$tag.json" 2>/dev/null)
		if [ -n "$id" ]; then
			"$K" trials "$id" --db "$OUT/ws256.db" --json >"$OUT/trials_$tag.json" \
				2>>"$OUT/sweep_$tag.log"
		else
			echo '[]' >"$OUT/trials_$tag.json"
		fi
	done
	if [ "${FA2:-1}" != 0 ]; then
		say "fa2_varlen: head_dim $hd"
		timeout 180 python3 bench/peers_attn.py "$OUT/fa2_d$hd.json" --seqs 1152 --lmax 1024 \
			--heads 4 --head-dim "$hd" --block 256 >"$OUT/fa2_d$hd.log" 2>&1 ||
			echo "ws256_check: peers_attn.py failed (see $OUT/fa2_d$hd.log)" >&2
	fi
done

say "table"
python3 - "$OUT" "$HDS" "$vrc" "$race" "$DIRS" <<'PY' || status=1
import json, sys
sys.path.insert(0, "bench")
import ws_verify
out, hds, vrc, race = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4]
dirs = sys.argv[5].split()

def load(path, empty):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return empty

bad = 0
lines = ws_verify.read(f"{out}/verify.log")
print(f"\nverification (test_blockattn, ws, block 256): {'passed' if vrc == 0 else f'FAILED (exit {vrc})'}")
for fam, key, n, g, c in lines:
    if n != "0":
        print(ws_verify.line(fam, key, n, g, c))
if "bwd" in dirs and not any(fam == "blockattn_bwd" and n != "0" for fam, _, n, _, _ in lines):
    bad += 1
    print("  no backward ws config was verified")
print(f"racecheck: {race}")
for hd, d in [(hd, d) for hd in hds for d in dirs]:
    fam = "blockattn_fwd" if d == "fwd" else "blockattn_bwd"
    tag = f"d{hd}" if d == "fwd" else f"bwd_d{hd}"
    print(f"\n{fam} seqs=1152 lmax=1024 heads=4 head_dim={hd} block=256 rope=0")
    trials = [t for t in load(f"{out}/trials_{tag}.json", []) if "config" in t]
    fa2 = None
    for r in load(f"{out}/fa2_d{hd}.json", []):
        if r.get("impl") == "fa2_varlen" and r.get("workload", "").startswith(fam + ":"):
            fa2 = r.get("us")
    best = {}
    for t in sorted(trials, key=lambda t: (t["status"] != "ok", t.get("median_us") or 1e30)):
        ok = t["status"] == "ok"
        bad += not ok
        us = f'{t["median_us"]:9.1f} us' if ok else f'{"":12}'
        print(f'  {us}  {t["status"]:<8} rel_err {t.get("rel_err", 0):.2e}  {t["config"]}'
              + ("" if ok else f'  {t.get("message", "")[:100]}'))
        side = "ws" if t["config"].startswith("variant=ws") else "mma.sync"
        if ok and side not in best:
            best[side] = t["median_us"]
    summ = load(f"{out}/sweep_{tag}.json", {})
    if summ.get("verified"):
        print(f'  tournament winner: {summ.get("us", 0):.1f} us  {summ.get("config")}')
    row = "  best ws {} | best mma.sync {} | FA2 {}".format(
        f'{best["ws"]:.1f}' if "ws" in best else "-",
        f'{best["mma.sync"]:.1f}' if "mma.sync" in best else "-",
        f"{fa2:.1f}" if fa2 else "-")
    if "ws" in best and "mma.sync" in best:
        row += f' | ws / mma.sync {best["ws"] / best["mma.sync"]:.3f}'
    if "ws" in best and fa2:
        row += f' | FA2 / ws {fa2 / best["ws"]:.3f}'
    print(row + "  (µs; medians of the sweep's trials)")
sys.exit(1 if bad or vrc else 0)
PY
exit $status
