#!/usr/bin/env bash
# ws256_persist_check.sh -- the ws block-256 backward in persistent CTAs
# (templates/blockattn_ws.cu, BWD && BLK == 256), NEW against OLD (a build
# before it), on one sm_90 GPU in one device call (about 9 minutes at most):
#   1. verify: NEW's test_blockattn GPU suite at block 256, ws only -- every
#      ws config of both directions (head_dim 64 and 128, rope 0-2) against
#      the CPU and GPU references at seqs=11,lmax=600,heads=2; each backward
#      config a second time planned for 3 SMs, so that every CTA walks many
#      units (both pass sets, the ring across units);
#   2. racecheck: compute-sanitizer --tool racecheck over NEW's two kernels
#      through `ktune sweep --config`: CONS 2 RING 2 (head_dim 128, rope 0)
#      and CONS 1 RING 3 (head_dim 64, rope 1) at seqs=2,lmax=600,heads=1
#      (a unit a CTA, the ring wrapping), then CONS 2 RING 2 (head_dim 64,
#      rope 0) at seqs=40,lmax=600,heads=2, where the 132 CTAs walk 2-3 units
#      each and a pass set is refilled (best effort: its own time limit);
#   3. time: OLD and NEW at seqs=1152,lmax=1024,heads=4,block=256,rope=0,
#      head_dim 128 and 64, the four ws configs (CONS 1, 2 x RING 2, 3) in
#      one `ktune sweep --config ...` per binary and head_dim, up to ROUNDS
#      rounds (no new round once the deadline is near): the head_dims in a
#      rotated order, the binaries alternating which goes first, the configs
#      rotated, every sweep on a fresh database (bench/retime.sh's way);
#      each config's median over the rounds of its trials' medians;
#   then a short table (last), and OUT_DIR tarred into TAR.
#
#   bench/ws256_persist_check.sh OLD_BUILD NEW_BUILD OUT_DIR
#
# OLD_BUILD holds ktune, NEW_BUILD ktune and tests/test_blockattn (make
# BUILD=DIR STATIC_DEPS=1 all). TAR (default OUT_DIR.tar.gz) the archive;
# ROUNDS (3); DEADLINE (500) seconds from the start after which no step
# starts (a timed sweep is cut at it); VERIFY_LIMIT (170), RACE_LIMIT (50)
# and WALK_LIMIT (80) seconds for step 1, each small racecheck and the
# walking one; KEEP_T (150) seconds kept for the timing (a racecheck that
# would eat into them is skipped). Exit 0 when the verification passed, racecheck found no
# hazard and every timed trial verified; 1 otherwise; 2 when a binary is
# missing or ktune has no GPU.
set -uo pipefail
# shellcheck source=bench/ws_verify.sh
. "$(dirname "$0")/ws_verify.sh"
if [ $# -ne 3 ]; then
	sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
OLDB=$1 NEWB=$2 OUT=$3
ROUNDS=${ROUNDS:-3}
DEADLINE=${DEADLINE:-500}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
TAR=${TAR:-$OUT.tar.gz}
KO=$(cd "$OLDB" 2>/dev/null && pwd)/ktune
KN=$(cd "$NEWB" 2>/dev/null && pwd)/ktune
TN=$(cd "$NEWB" 2>/dev/null && pwd)/tests/test_blockattn
for x in "$KO" "$KN" "$TN"; do
	[ -x "$x" ] || { echo "ws256_persist_check: no executable $x" >&2; exit 2; }
done
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DB=$(mktemp -d) || exit 2
trap 'rm -rf "$DB"' EXIT
t0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - t0))); }
say() { echo "== $(($(date +%s) - t0)) s: $*" >&2; }
status=0
{
	echo "old: $("$KO" --version 2>&1 | head -n 1)"
	echo "new: $("$KN" --version 2>&1 | head -n 1)"
	nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader 2>&1
} >"$OUT/binaries.txt"

# 1. every ws config at block 256 (the backward's also on 3 SMs)
say "verify: NEW test_blockattn, ws at block 256"
ws_verify 256 "$KN" "$TN" "${VERIFY_LIMIT:-170}" "$OUT/verify.log"
vrc=$?
[ $vrc -eq 0 ] || { status=1; echo "ws256_persist_check: verification exited $vrc (see verify.log)" >&2; }

# 2. racecheck: a unit a CTA (the brief's two shapes), then CTAs that walk
RACE_SHAPES=("seqs=2,lmax=600,heads=1,head_dim=128,block=256,rope=0"
	     "seqs=2,lmax=600,heads=1,head_dim=64,block=256,rope=1"
	     "seqs=40,lmax=600,heads=2,head_dim=64,block=256,rope=0")
RACE_CFGS=("variant=ws,CONS=2,RING=2,RPROD=0" "variant=ws,CONS=1,RING=3,RPROD=0"
	   "variant=ws,CONS=2,RING=2,RPROD=0")
RACE_LIMITS=("${RACE_LIMIT:-50}" "${RACE_LIMIT:-50}" "${WALK_LIMIT:-80}")
race="skipped (no compute-sanitizer)"
if [ -x "$SAN" ]; then
	res=()
	for i in "${!RACE_CFGS[@]}"; do
		log=$OUT/racecheck_$i.log
		# keep about 150 s for the timing
		if [ "$(left)" -lt $((RACE_LIMITS[i] + ${KEEP_T:-150})) ]; then
			echo "skipped: the deadline" >"$log"
			res+=("case $i skipped")
			continue
		fi
		say "racecheck: ${RACE_CFGS[$i]} at ${RACE_SHAPES[$i]}"
		timeout "${RACE_LIMITS[$i]}" "$SAN" --tool racecheck --target-processes all \
			--racecheck-report hazard \
			"$KN" sweep --family blockattn_bwd --shape "${RACE_SHAPES[$i]}" \
			--config "${RACE_CFGS[$i]}" --db "$DB/race$i.db" --no-baseline --no-retime \
			--tournament 0 --sentinel-every 0 --timeout 120 --json >"$log" 2>&1
		rc=$?
		if grep -Eq "ERROR SUMMARY: [1-9]|SUMMARY: [1-9][0-9]* hazard" "$log"; then
			res+=("case $i HAZARDS")
			status=1
		elif [ $rc -eq 124 ]; then
			res+=("case $i timed out")
		elif [ $rc -ne 0 ]; then
			res+=("case $i exit $rc")
			status=1
		elif grep -q '"verified": *true' "$log"; then
			res+=("case $i clean")
		else
			# racecheck slows it past the sweep's own timeout
			res+=("case $i clean, not verified under racecheck")
		fi
	done
	race=$(printf '%s; ' "${res[@]}")
	race=${race%; }
fi
echo "$race" >"$OUT/racecheck.txt"

# 3. OLD and NEW, rotated rounds
CFGS=("variant=ws,CONS=1,RING=2,RPROD=0" "variant=ws,CONS=1,RING=3,RPROD=0"
      "variant=ws,CONS=2,RING=2,RPROD=0" "variant=ws,CONS=2,RING=3,RPROD=0")
HDS=(128 64)
mkdir -p "$OUT/time"
last=0
for ((r = 0; r < ROUNDS; r++)); do
	# a round costs about what the last did
	if [ "$(left)" -lt $((last > 60 ? last : 60)) ]; then
		say "time: no round $((r + 1)) (deadline)"
		break
	fi
	rs=$(date +%s)
	for ((i = 0; i < ${#HDS[@]}; i++)); do
		hd=${HDS[$(((r + i) % ${#HDS[@]}))]}
		if (((r + i) % 2 == 0)); then order=(old new); else order=(new old); fi
		cfgs=()
		for ((k = 0; k < ${#CFGS[@]}; k++)); do
			cfgs+=(--config "${CFGS[$(((k + r) % ${#CFGS[@]}))]}")
		done
		for which in "${order[@]}"; do
			bin=$KO
			[ "$which" = new ] && bin=$KN
			tag=r$((r + 1))_d${hd}_$which
			lim=$(left)
			if [ "$lim" -lt 40 ]; then
				say "time: no more sweeps (deadline)"
				break 3
			fi
			[ "$lim" -gt 150 ] && lim=150
			say "time: round $((r + 1)) head_dim $hd $which"
			timeout "$lim" "$bin" sweep --family blockattn_bwd \
				--shape "seqs=1152,lmax=1024,heads=4,head_dim=$hd,block=256,rope=0" \
				"${cfgs[@]}" --db "$DB/$tag.db" --no-baseline --no-retime \
				--tournament 0 --sentinel-every 0 --threads 16 --json </dev/null \
				>"$OUT/time/$tag.json" 2>"$OUT/time/$tag.log"
			rc=$?
			if grep -q '"no_gpu"\|no NVIDIA\|no CUDA device' "$OUT/time/$tag.json" \
				"$OUT/time/$tag.log" 2>/dev/null; then
				echo "ws256_persist_check: ktune cannot run here:" >&2
				tail -n 3 "$OUT/time/$tag.log" >&2
				status=2
				break 3
			fi
			[ $rc -eq 0 ] || echo "ws256_persist_check: $tag exited $rc" >&2
			id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("sweep_id",""))' \
				"$OUT/time/$tag.json" 2>/dev/null)
			if [ -n "$id" ]; then
				timeout 30 "$bin" trials "$id" --db "$DB/$tag.db" --json \
					>"$OUT/time/trials_$tag.json" 2>>"$OUT/time/$tag.log"
			else
				echo '[]' >"$OUT/time/trials_$tag.json"
			fi
		done
	done
	last=$(($(date +%s) - rs))
done

say "table"
timeout 30 python3 - "$OUT" "$vrc" "$race" >"$OUT/table.txt" <<'PY'
import glob, json, os, re, statistics, sys
sys.path.insert(0, "bench")
import ws_verify
out, vrc, race = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bad = 0
print(f"verification (NEW test_blockattn, ws, block 256): "
      f"{'passed' if vrc == 0 else f'FAILED (exit {vrc})'}")
for fam, key, n, g, c in ws_verify.read(f"{out}/verify.log"):
    if fam == "blockattn_bwd":
        print(ws_verify.line(fam, key, n, g, c, "runs (3 SMs too)"))
print(f"racecheck (NEW): {race}")
times = {}
for path in sorted(glob.glob(f"{out}/time/trials_*.json")):
    m = re.match(r"trials_r(\d+)_d(\d+)_(old|new)\.json", os.path.basename(path))
    try:
        trials = json.load(open(path))
    except (OSError, ValueError):
        trials = []
    for t in trials:
        if "config" not in t:
            continue
        if t.get("status") != "ok":
            bad += 1
            print(f"  round {m[1]} head_dim {m[2]} {m[3]}: {t['config']} {t.get('status')} "
                  f"{t.get('message', '')[:100]}")
            continue
        times.setdefault((int(m[2]), t["config"]), {}).setdefault(m[3], []).append(
            t["median_us"])
print("\nseqs=1152,lmax=1024,heads=4,block=256,rope=0: median over rounds (us), new / old")
print(f"  {'head_dim':>8}  {'config':<34} {'old':>10} {'new':>10} {'new/old':>8}  rounds")
for (hd, cfg) in sorted(times, key=lambda x: (-x[0], x[1])):
    o, n = times[(hd, cfg)].get("old", []), times[(hd, cfg)].get("new", [])
    mo = statistics.median(o) if o else None
    mn = statistics.median(n) if n else None
    ratio = f"{mn / mo:8.3f}" if mo and mn else f"{'-':>8}"
    f = lambda x: f"{x:10.1f}" if x else f"{'-':>10}"
    print(f"  {hd:>8}  {cfg:<34} {f(mo)} {f(mn)} {ratio}  {len(o)}/{len(n)}")
if not times:
    bad += 1
    print("  no timed trial")
sys.exit(1 if bad else 0)
PY
trc=$?
[ $trc -eq 0 ] || status=$((status > 1 ? status : 1))
cat "$OUT/table.txt"
tar -czf "$TAR" -C "$(dirname "$OUT")" "$(basename "$OUT")" ||
	echo "ws256_persist_check: cannot write $TAR" >&2
say "done (exit $status); archive $TAR"
exit $status
