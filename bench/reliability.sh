#!/usr/bin/env bash
# reliability.sh -- the CPU reliability checks of issue 30, one row each in
# bench/results/reliability.json:
#
#   second_writer         `ktune import` beside `ktune serve` on one file
#   readonly_db           a 0444 database in a 0555 directory, read as nobody
#   unauthenticated_body  8 x 60 MiB writes without the token: server RSS
#   slow_connections      1,100 unfinished / trickling connections
#   many_arguments        700 query arguments, repeated keys, NULs, odd tokens
#   merge_conflicts       one rule whatever the input order; imports merged once
#   schemathesis          the served OpenAPI document against the server
#   fuzz                  libFuzzer on HTTP requests, shapes, imports (ASan+UBSan)
#
#   bench/reliability.sh [OUT.json]        (default bench/results/reliability.json)
#   ST_SECONDS=180 FUZZ_SECONDS=100        the two timed checks' budgets
#
# The first six are test_reliab's suites of the same names (cases: the
# CUnit assertions each ran; failures: those that failed, or 1 when the
# program failed without one failing); schemathesis counts its generated
# cases and failures, the fuzzer its executions and crashes. Rows are
# merged into OUT by name, so the GPU rows another script writes there
# (gpu_fault_injection, gpu_kill_resume) stay. Each row says the command
# that produced it, the date and the commit the binary was built from.
# Needs `make all` first. Exits 1 when any check failed (OUT is written
# all the same).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=bench/commit.sh
. bench/commit.sh
out=${1:-bench/results/reliability.json}
st_secs=${ST_SECONDS:-180}
fuzz_secs=${FUZZ_SECONDS:-100}
K=build/ktune
T=build/tests/test_reliab
[ -x "$K" ] && [ -x "$T" ] || { echo "reliability: build first (make all)" >&2; exit 2; }
COMMIT=$(bench_commit "$K" "") || exit 2
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
KTUNE_BIN=$(pwd)/$K
export KTUNE_BIN

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
status=0

row() {	# NAME CASES FAILURES COMMAND
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$rows"
	echo "reliability: $1: $2 cases, $3 failures"
	[ "$3" = 0 ] || status=1
}

for s in second_writer readonly_db unauthenticated_body slow_connections many_arguments \
	merge_conflicts; do
	cmd="KTUNE_TEST_SUITE=$s $T"
	log=$(KTUNE_TEST_SUITE=$s $T 2>&1)
	rc=$?
	# CUnit's "asserts  RUN  RUN  PASSED  FAILED  n/a"
	read -r cases failed < <(echo "$log" | awk '$1 == "asserts" { print $3, $5 }')
	cases=${cases:-0}
	failed=${failed:-0}
	if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
		failed=1
	fi
	[ "$failed" = 0 ] || echo "$log" | tail -30 >&2
	row "$s" "$cases" "$failed" "$cmd"
done

cmd="tools/schemathesis.sh $st_secs"
log=$(tools/schemathesis.sh "$st_secs" 2>&1)
rc=$?
read -r cases failed < <(echo "$log" | sed -n 's/^schemathesis: \([0-9]*\) cases, \([0-9]*\) failures.*/\1 \2/p' | tail -1)
cases=${cases:-0}
failed=${failed:-0}
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
	failed=1
fi
[ "$failed" = 0 ] || echo "$log" | tail -40 >&2
row schemathesis "$cases" "$failed" "$cmd"

cmd="tools/fuzz.sh $fuzz_secs"
log=$(tools/fuzz.sh "$fuzz_secs" 2>&1)
rc=$?
read -r cases failed < <(echo "$log" | awk '/^fuzz: [a-z]+: [0-9]+ runs, [0-9]+ crashes/ {
	r += $3; c += $5 } END { print r + 0, c + 0 }')
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
	failed=1
fi
[ "$failed" = 0 ] || echo "$log" | tail -40 >&2
row fuzz "$cases" "$failed" "$cmd"

python3 - "$out" "$rows" "$DATE" "$COMMIT" <<'PY'
import json, os, sys
out, rows, date, commit = sys.argv[1:5]
doc = {"checks": []}
if os.path.exists(out):
    with open(out) as f:
        doc = json.load(f)
checks = {c["name"]: c for c in doc.get("checks", [])}
order = [c["name"] for c in doc.get("checks", [])]
with open(rows) as f:
    for line in f:
        name, cases, failures, command = line.rstrip("\n").split("\t")
        checks[name] = {"name": name, "cases": int(cases), "failures": int(failures),
                        "command": command, "date": date, "commit": commit}
        if name not in order:
            order.append(name)
doc["date"] = date
doc["commit"] = commit
doc["checks"] = [checks[n] for n in order]
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out + ".tmp", "w") as f:
    json.dump({"date": doc["date"], "commit": doc["commit"], "checks": doc["checks"]}, f, indent=1)
    f.write("\n")
os.replace(out + ".tmp", out)
print("reliability: wrote %s (%d checks)" % (out, len(order)))
PY
exit $status
