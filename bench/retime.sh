#!/usr/bin/env bash
# retime.sh -- the stored winners of an export, re-verified and timed by two
# ktune binaries (e.g. before and after a restructuring) in one GPU call: each
# entry's config with `ktune sweep --family F --shape KEY --config KEY
# --no-baseline --no-retime`, ROUNDS rounds, the entries in a rotated order
# each round and the two binaries alternating which goes first, every run on
# a fresh database so that no compile, verdict or time is reused.
#
#   bench/retime.sh OLD_KTUNE NEW_KTUNE EXPORT_JSON OUT_DIR ROUNDS [TOLERANCE]
#
# Writes OUT_DIR/retime.json ({"old", "new" (the binaries' commits),
# "tolerance", "rows": [{"family", "shape_key", "config_key", "which",
# "commit", "round", "us", "verified"}], "entries": [{..., "old_us", "new_us"
# (medians over the rounds), "ratio" (new/old), "ok"}]}) and prints one line
# per entry. Exit 1 if any run did not verify or a ratio is further from 1
# than TOLERANCE (default 0.02).
set -uo pipefail
if [ $# -lt 5 ]; then
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
OLD=$1 NEW=$2 DOC=$3 OUT=$4 ROUNDS=$5 TOL=${6:-0.02}
case $ROUNDS in
'' | *[!0-9]* | 0)
	echo "retime: ROUNDS must be a positive integer, got '$ROUNDS'" >&2
	exit 2
	;;
esac
for k in "$OLD" "$NEW"; do
	[ -x "$k" ] || { echo "retime: $k is not an executable ktune" >&2; exit 2; }
done
[ -r "$DOC" ] || { echo "retime: cannot read $DOC" >&2; exit 2; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
C_OLD=$(bench_commit "$OLD" "") || exit 2
C_NEW=$(bench_commit "$NEW" "") || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
# one line per entry: family, shape key, config key (tab-separated)
python3 - "$DOC" >"$tmp/entries.tsv" <<'PY' || exit 2
import json, sys
for e in json.load(open(sys.argv[1]))["entries"]:
    print(e["family"], e["shape_key"], e["config_key"], sep="\t")
PY
mapfile -t entries <"$tmp/entries.tsv"
n=${#entries[@]}
[ "$n" -gt 0 ] || { echo "retime: $DOC has no entries" >&2; exit 2; }
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < n; i++)); do
		k=$(((r + i) % n))
		IFS=$'\t' read -r fam shape cfg <<<"${entries[$k]}"
		if (((r + i) % 2 == 0)); then order=(old new); else order=(new old); fi
		for which in "${order[@]}"; do
			bin=$OLD
			[ "$which" = new ] && bin=$NEW
			echo "retime: round $((r + 1))/$ROUNDS entry $((k + 1))/$n $which: $fam $shape" >&2
			f="$tmp/r${r}e${k}$which"
			"$bin" sweep --family "$fam" --shape "$shape" --config "$cfg" --no-baseline \
				--no-retime --db "$f.db" --json >"$f.json" 2>"$f.log" || tail -n 3 "$f.log" >&2
		done
	done
done
python3 - "$tmp" "$OUT/retime.json" "$C_OLD" "$C_NEW" "$ROUNDS" "$TOL" <<'PY'
import json, statistics, sys
tmp, path, c_old, c_new, rounds, tol = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
entries = [l.rstrip("\n").split("\t") for l in open(f"{tmp}/entries.tsv")]
doc = {"old": c_old, "new": c_new, "tolerance": tol, "rows": [], "entries": []}
bad = 0
for k, (fam, shape, cfg) in enumerate(entries):
    times = {"old": [], "new": []}
    for r in range(rounds):
        for which, commit in (("old", c_old), ("new", c_new)):
            row = {"family": fam, "shape_key": shape, "config_key": cfg, "which": which,
                   "commit": commit, "round": r + 1, "us": None, "verified": False}
            try:
                s = json.load(open(f"{tmp}/r{r}e{k}{which}.json"))
                s = s.get("sweeps", [s])[0]
                row["verified"] = bool(s.get("verified"))
                if row["verified"]:
                    row["us"] = round(s["us"], 3)
                    times[which].append(s["us"])
            except (OSError, ValueError, IndexError, KeyError):
                pass
            bad += not row["verified"]
            doc["rows"].append(row)
    e = {"family": fam, "shape_key": shape, "config_key": cfg, "old_us": None, "new_us": None,
         "ratio": None, "ok": False}
    if times["old"] and times["new"]:
        e["old_us"] = round(statistics.median(times["old"]), 3)
        e["new_us"] = round(statistics.median(times["new"]), 3)
        e["ratio"] = round(e["new_us"] / e["old_us"], 4)
        e["ok"] = abs(e["ratio"] - 1) <= tol
    bad += not e["ok"]
    doc["entries"].append(e)
    fmt = lambda x: f"{x:10.2f}" if x is not None else f"{'failed':>10s}"
    print(f"{fmt(e['old_us'])} {fmt(e['new_us'])}  {e['ratio'] if e['ratio'] else '-':>7}  "
          f"{'ok' if e['ok'] else 'OFF'}  {fam} {shape}")
json.dump(doc, open(path, "w"), indent=1)
print(f"old {c_old}, new {c_new}: {sum(e['ok'] for e in doc['entries'])} of {len(entries)} "
      f"within {tol:.0%} (median us over {rounds} rounds, old, new, new/old)")
sys.exit(1 if bad else 0)
PY
