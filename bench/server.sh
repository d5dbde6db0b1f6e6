#!/usr/bin/env bash
# bench/server.sh -- `ktune serve` under wrk on loopback (docs/benchmarks.md, server.json).
#
# Builds ktune, loads the shipped H200 results (data/h200-results.json, or
# the JSON export given as $1) into a temporary database, serves it, runs
#   wrk -t2 -c16 -d10s --latency URL
# against a GET /v1/best query that has an exact answer there, and writes
# bench/results/server.json with the commit it measured. Exits non-zero when
# the targets (>= 20000 requests/s, p99 <= 2 ms, no socket errors, no
# non-2xx answers) are missed; the file is written either way.
#
# Needs: wrk, python3 (to read the export and wrk's report), make, a C compiler.
set -euo pipefail

cd "$(dirname "$0")/.."
JSON=${1:-data/h200-results.json}
OUT=${KTUNE_BENCH_OUT:-bench/results/server.json}
DURATION=${KTUNE_BENCH_DURATION:-10}

if [ ! -f "$JSON" ]; then
	echo "bench/server.sh: $JSON not found (ktune export --format json of the H200 database)" >&2
	exit 1
fi
command -v wrk >/dev/null || { echo "bench/server.sh: wrk not installed (apt-get install wrk)" >&2; exit 1; }

make -s build/ktune

tmp=$(mktemp -d)
# shellcheck source=bench/serve_lib.sh
. bench/serve_lib.sh
trap serve_cleanup EXIT

# Port 0: the server picks a free port and prints it.
serve_start build/ktune --db "$tmp/bench.db" --seed "$JSON"

# A query with an exact answer: the first entry of the export.
route=$(python3 - "$JSON" <<'EOF'
import json, sys, urllib.parse
doc = json.load(open(sys.argv[1]))
e = doc["entries"][0]
q = {"family": e["family"], "device": e["device"]}
q.update({k: v for k, v in e["shape"].items()})
print("/v1/best?" + urllib.parse.urlencode(q))
EOF
)
url="http://127.0.0.1:$port$route"
match=$(python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))["match"])' "$url")
if [ "$match" != exact ]; then
	echo "bench/server.sh: $route answered match=$match, not exact" >&2
	exit 1
fi

cmd="wrk -t2 -c16 -d${DURATION}s --latency $url"
echo "$cmd" >&2
$cmd >"$tmp/wrk.txt"
cat "$tmp/wrk.txt" >&2

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- server cli db kernels 2>/dev/null)" ]; then
	commit="$commit-dirty"
fi
python3 - "$tmp/wrk.txt" "$OUT" "$commit" "$cmd" "$route" "$DURATION" <<'EOF'
import datetime, json, re, sys
text = open(sys.argv[1]).read()
out, commit, cmd, route, duration = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6])

def ms(tok):
    m = re.match(r"([0-9.]+)(us|ms|s)$", tok)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v

lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", text, re.M))
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
errors = sum(int(x) for x in sock.groups()) if sock else 0
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
res = {
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "commit": commit, "command": cmd, "route": route,
    "requests_per_s": round(rps, 1), "p50_ms": round(ms(lat["50"]), 3),
    "p99_ms": round(ms(lat["99"]), 3), "errors": errors,
    "non_2xx": int(non2xx.group(1)) if non2xx else 0,
    "connections": 16, "threads": 2, "duration_s": duration,
}
json.dump(res, open(out, "w"), indent=2)
open(out, "a").write("\n")
ok = res["requests_per_s"] >= 20000 and res["p99_ms"] <= 2 and not res["errors"] and not res["non_2xx"]
print(json.dumps(res))
print("targets (>= 20000 req/s, p99 <= 2 ms, 0 errors, 0 non-2xx):", "met" if ok else "MISSED")
sys.exit(0 if ok else 3)
EOF
