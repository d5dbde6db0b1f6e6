#!/usr/bin/env bash
# ab.sh -- an A/B of known configs on the GPU machine: each KEY (`ktune best`'s
# form, e.g. variant=tcmix_ws,BLOCK_M=128,...) is re-verified and timed at
# WORKLOAD with `ktune sweep --config KEY --no-baseline`, ROUNDS rounds, the
# keys in a rotated order each round (round k starts at key k), every
# (round, key) on a fresh database so that no compile, verdict or time is
# reused. What a parameter or a code path is worth, measured side by side.
#
#   bench/ab.sh BUILD_DIR OUT_DIR WORKLOAD ROUNDS KEY [KEY ...]
#
# Appends its rows, each labelled with its binary's commit, to
# OUT_DIR/ab.json ({"commit", "rows": [{"workload", "key", "round",
# "commit", "us", "verified", "rel_err"}]}; calls with one OUT_DIR share the
# file) and prints a table of the medians in µs, one column per round,
# "failed" where a key did not verify. Exit 1 if any did.
set -uo pipefail
if [ $# -lt 5 ]; then
	sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
B=$1 OUT=$2 W=$3 ROUNDS=$4
shift 4
case $ROUNDS in
'' | *[!0-9]* | 0)
	echo "ab: ROUNDS must be a positive integer, got '$ROUNDS'" >&2
	exit 2
	;;
esac
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=$PWD/$B/ktune
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$K" "") || exit 2
keys=("$@")
n=${#keys[@]}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < n; i++)); do
		k=$(((r + i) % n))
		echo "ab: round $((r + 1))/$ROUNDS key $((k + 1))/$n: ${keys[$k]}" >&2
		"$K" sweep --workload "$W" --config "${keys[$k]}" --no-baseline --no-retime \
			--db "$tmp/r${r}k${k}.db" --json >"$tmp/r${r}k${k}.json" 2>"$tmp/r${r}k${k}.log" ||
			tail -n 3 "$tmp/r${r}k${k}.log" >&2
	done
done
python3 - "$tmp" "$OUT/ab.json" "$COMMIT" "$W" "$ROUNDS" "${keys[@]}" <<'PY'
import json, os, sys
tmp, path, commit, w, rounds, keys = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:]
doc = {"rows": []}
if os.path.exists(path):
    doc = json.load(open(path))
doc["commit"] = commit  # the latest call's; each row names its own
bad = 0
table = []
for k, key in enumerate(keys):
    cells = []
    for r in range(rounds):
        row = {"workload": w, "key": key, "round": r + 1, "commit": commit, "us": None,
               "verified": False}
        try:
            s = json.load(open(f"{tmp}/r{r}k{k}.json"))
            s = s.get("sweeps", [s])[0]
            row["verified"] = bool(s.get("verified"))
            if row["verified"]:
                row["us"] = round(s["us"], 3)
                row["rel_err"] = s.get("rel_err")
        except (OSError, ValueError, IndexError, KeyError):
            pass
        bad += not row["verified"]
        doc["rows"].append(row)
        cells.append(f"{row['us']:9.2f}" if row["verified"] else f"{'failed':>9s}")
    table.append((key, cells))
json.dump(doc, open(path, "w"), indent=1)
print(f"{w} ({commit}), us per round:")
for key, cells in table:
    print(" ".join(cells), " ", key)
sys.exit(1 if bad else 0)
PY
