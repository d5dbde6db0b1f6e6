#!/usr/bin/env bash
# bench/server_sweep.sh -- GET /v1/best while a sweep commits, on a large
# database (server.json's row is an idle one; this is the busy case).
#
#   bench/server_sweep.sh [KTUNE_BINARY] [OUT_JSON]
#
# Builds a database of the shipped H200 results (data/h200-results.json)
# plus KTUNE_BENCH_PROBLEMS (default 5000) dense problems of
# KTUNE_BENCH_TRIALS (default 100) trials each, serves it with two threads,
# and for KTUNE_BENCH_DURATION seconds (default 10) asks one exact query
# over and over on a keep-alive connection, first with no writer, then while
# another process appends one ok trial every KTUNE_BENCH_EVERY seconds
# (default 0.25; a sweep commits each trial as it lands) to a running sweep
# of a new problem. Prints both latency summaries and writes them to
# OUT_JSON (default bench/results/server_sweep.json) with the commit.
#
# Needs: python3 (with its sqlite3 module), a built ktune (default
# build/ktune: make build/ktune). No GPU.
set -euo pipefail

cd "$(dirname "$0")/.."
K=${1:-build/ktune}
OUT=${2:-bench/results/server_sweep.json}
P=${KTUNE_BENCH_PROBLEMS:-5000}
T=${KTUNE_BENCH_TRIALS:-100}
D=${KTUNE_BENCH_DURATION:-10}
EVERY=${KTUNE_BENCH_EVERY:-0.25}
[ -x "$K" ] || { echo "bench/server_sweep.sh: $K is not an executable (make build/ktune)" >&2; exit 1; }

tmp=$(mktemp -d)
# shellcheck source=bench/serve_lib.sh
. bench/serve_lib.sh
trap serve_cleanup EXIT

echo "== building $tmp/bench.db: the shipped results + $P problems x $T trials" >&2
"$K" import data/h200-results.json --db "$tmp/bench.db" >/dev/null
python3 - "$tmp/bench.db" "$P" "$T" <<'EOF'
import random, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
P, T = int(sys.argv[2]), int(sys.argv[3])
c = db.cursor()
dev = c.execute("SELECT id FROM devices ORDER BY id LIMIT 1").fetchone()[0]
rnd, now = random.Random(1), time.time()
for k in range(max(T, 1)):
    c.execute("INSERT OR IGNORE INTO configs (family, config_key, params_json) VALUES ('dense', ?, '{}')",
              ("variant=bench,BLOCK_M=%d" % k,))
cfgs = [r[0] for r in c.execute("SELECT id FROM configs WHERE family = 'dense' AND config_key LIKE 'variant=bench,%'")]
for p in range(P):
    key = "tokens=%d,in=4096,out=4096" % (100000 + p)
    c.execute("INSERT INTO problems (family, shape_key, shape_json) VALUES ('dense', ?, '{}')", (key,))
    c.execute("INSERT INTO sweeps (device_id, problem_id, strategy, options_key, status, planned, started,"
              " finished) VALUES (?, ?, 'random', 'bench', 'done', ?, ?, ?)", (dev, c.lastrowid, T, now + p * 1e-3, now))
    sw = c.lastrowid
    for cid in rnd.sample(cfgs, min(T, len(cfgs))):
        m = rnd.uniform(10, 100)
        ok = rnd.random() < 0.9
        c.execute("INSERT INTO trials (sweep_id, config_id, status, median_us, min_us, p90_us, reps, created)"
                  " VALUES (?, ?, ?, ?, ?, ?, 50, ?)", (sw, cid, "ok" if ok else "wrong",
                  m if ok else None, m * 0.98 if ok else None, m * 1.02 if ok else None, now))
db.commit()
print("trials:", c.execute("SELECT count(*) FROM trials").fetchone()[0], file=sys.stderr)
EOF

serve_start "$K" --db "$tmp/bench.db" --threads 2

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain -- server cli db kernels 2>/dev/null)" ]; then
	commit="$commit-dirty"
fi
python3 - "$tmp/bench.db" "$port" "$D" "$EVERY" "$OUT" "$commit" "$K" "$P" "$T" <<'EOF'
import datetime, http.client, json, multiprocessing, sqlite3, sys, time, urllib.parse
dbp, port, dur, every, out, commit, binary = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
P, T = int(sys.argv[8]), int(sys.argv[9])
doc = json.load(open("data/h200-results.json"))
e = doc["entries"][0]
q = {"family": e["family"], "device": e["device"]}
q.update(e["shape"])
route = "/v1/best?" + urllib.parse.urlencode(q)

def ask(seconds):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    lat, end = [], time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        conn.request("GET", route)
        r = conn.getresponse()
        body = r.read()
        lat.append((time.perf_counter() - t0) * 1e3)
        if r.status != 200 or json.loads(body)["match"] != "exact":
            sys.exit("bench/server_sweep.sh: %s answered %d %s" % (route, r.status, body[:200]))
    lat.sort()
    pick = lambda f: round(lat[min(len(lat) - 1, int(f * len(lat)))], 3)
    return {"requests": len(lat), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(lat[-1], 3)}

def writer(stop):
    db = sqlite3.connect(dbp, timeout=30)
    c = db.cursor()
    dev = c.execute("SELECT id FROM devices ORDER BY id LIMIT 1").fetchone()[0]
    c.execute("INSERT INTO problems (family, shape_key, shape_json) VALUES ('dense', 'tokens=99999,in=4096,out=4096', '{}')")
    c.execute("INSERT INTO sweeps (device_id, problem_id, strategy, options_key, status, started) VALUES (?, ?, 'random', 'w', 'running', ?)",
              (dev, c.lastrowid, time.time()))
    sw = c.lastrowid
    db.commit()
    cfgs = [r[0] for r in c.execute("SELECT id FROM configs WHERE config_key LIKE 'variant=bench,%'")]
    k = 0
    while not stop.is_set() and k < len(cfgs):
        c.execute("INSERT INTO trials (sweep_id, config_id, status, median_us, min_us, p90_us, reps, created)"
                  " VALUES (?, ?, 'ok', ?, ?, ?, 50, ?)", (sw, cfgs[k], 50 - k * 0.1, 49 - k * 0.1, 51, time.time()))
        db.commit()
        k += 1
        stop.wait(every)

idle = ask(dur)
stop = multiprocessing.Event()
w = multiprocessing.Process(target=writer, args=(stop,))
w.start()
time.sleep(0.5)
busy = ask(dur)
stop.set()
w.join()
res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": commit, "binary": binary, "route": route, "problems": P, "trials_per_problem": T,
       "commit_every_s": every, "duration_s": dur, "idle": idle, "while_committing": busy}
json.dump(res, open(out, "w"), indent=2)
open(out, "a").write("\n")
print(json.dumps(res))
EOF
