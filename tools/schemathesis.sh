#!/usr/bin/env bash
# schemathesis.sh -- the OpenAPI document a `ktune serve` serves, checked
# against that server by schemathesis (property-based: valid and invalid
# requests generated from the document; every check: no 5xx, documented
# status codes, content types, headers and schemas, invalid data refused).
#
#   tools/schemathesis.sh [SECONDS]     (default 180)
#
# Generates for SECONDS (schemathesis --max-time; seed $ST_SEED, default 1).
# The database is a copy of the shipped H200 results; the token is given,
# so imports and sweeps are exercised too (without a GPU a sweep job fails
# with no_gpu). Prints "schemathesis: CASES cases, FAILURES failures" last;
# exits 1 on any failure. Needs build/ktune; installs the
# pinned schemathesis (tools/schemathesis-requirements.txt) into
# build/st-venv on first use (python3-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-180}
venv=${ST_VENV:-build/st-venv}
case $venv in /*) ;; *) venv=$PWD/$venv ;; esac
ktune=${KTUNE_BIN:-build/ktune}

if [ ! -x "$venv/bin/st" ] || ! cmp -s tools/schemathesis-requirements.txt "$venv/.requirements"; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check -r tools/schemathesis-requirements.txt
	cp tools/schemathesis-requirements.txt "$venv/.requirements"
fi

tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

"$ktune" import --db "$tmp/st.db" data/h200-results.json >/dev/null
"$ktune" serve --db "$tmp/st.db" --listen 127.0.0.1:0 --threads 2 2>"$tmp/serve.log" &
pid=$!
port=
for _ in $(seq 50); do
	port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/serve.log" | head -1)
	[ -n "$port" ] && break
	sleep 0.1
done
if [ -z "$port" ]; then
	echo "schemathesis: ktune serve did not start:" >&2
	cat "$tmp/serve.log" >&2
	exit 1
fi
token=$(cat "$tmp/st.db.token")

log="$tmp/st.log"
status=0
# positive_data_acceptance is left out: it wants every request the
# document allows to succeed, and a shape, a config key or an export entry
# has a grammar per family that JSON Schema does not hold (a shape string
# the schema allows is a 400 when the family has no such dims). Every
# other check runs, on valid and invalid data (--mode all).
# (from the scratch directory: schemathesis leaves .hypothesis/ and
# .schemathesis/ where it runs)
(cd "$tmp" && "$venv/bin/st" run "http://127.0.0.1:$port/v1/openapi.json" --checks all \
	--exclude-checks positive_data_acceptance --mode all --max-time "$budget" \
	--seed "${ST_SEED:-1}" --workers 1 --generation-database none \
	--suppress-health-check all -H "Authorization: Bearer $token" --no-color) >"$log" 2>&1 ||
	status=1
if [ "$status" != 0 ]; then
	sed -n '/FAILURES\|ERRORS/,$p' "$log"
fi
if ! kill -0 "$pid" 2>/dev/null; then
	echo "schemathesis: ktune serve died" >&2
	cat "$tmp/serve.log" >&2
	status=1
fi
# "  17138 generated, 7 found 7 unique failures" / "  9000 generated, 9000 passed"
cases=$(sed -n 's/^ *\([0-9][0-9]*\) generated.*/\1/p' "$log" | tail -1)
failures=$(sed -n 's/.* found \([0-9][0-9]*\) unique failures*.*/\1/p' "$log" | tail -1)
cases=${cases:-0}
failures=${failures:-0}
if [ "$cases" = 0 ]; then
	echo "schemathesis: no case ran:" >&2
	cat "$log" >&2
	status=1
fi
if [ "$status" != 0 ] && [ "$failures" = 0 ]; then
	failures=1
fi
echo "schemathesis: $cases cases, $failures failures in $budget s"
[ "$status" = 0 ]
