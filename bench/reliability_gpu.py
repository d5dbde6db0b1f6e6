#!/usr/bin/env python3
"""reliability_gpu.py -- the two checks of the sweep's reliability on a GPU
(issue 30), each a row of bench/results/reliability.json (merged by name:
other rows of that file are left as they are).

  gpu_fault_injection: sweeps over planted configs -- the selftest family's
    (a fault, a hang, a wrong kernel, one wrong in 88 of 2^20 elements, one
    that writes past its output, one that does not compile, one that asks
    for more shared memory than the GPU has) and dense's planted fault and
    hang beside two good configs -- complete; each planted config gets its
    status, the winner is a good config; a second sweep of the same problem
    skips what faulted or hung, and --retry-faulty runs it again.
  gpu_kill_resume: `ktune sweep` killed with SIGKILL twenty times at random
    moments, each time started again: every restart resumes, the last
    completes; after every kill PRAGMA integrity_check is ok, no trial
    recorded before the kill is gone and none is there twice; at the end
    every planned config has exactly one trial.

Usage (from the repository root):
  bench/reliability_gpu.py KTUNE_BIN OUT_DIR [--backend cuda|cpu] [--kills N]
      [--checks faults,kill] [--results bench/results/reliability.json] [--seed S]
With --backend cpu the same checks run on the CPU test device (selftest
only), as CI does in tests/test_measure.c. Prints one line per case and a
short table last; exits 1 when any case failed.
"""
import argparse
import datetime
import json
import os
import random
import sqlite3
import subprocess
import sys
import time


def run(cmd, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def summary(out):
    """The JSON summary `ktune sweep --json` printed (None when it did not)."""
    try:
        return json.loads(out[out.index("{"):])
    except ValueError:
        return None


class Checks:
    def __init__(self, name):
        self.name, self.cases, self.failures, self.lines = name, 0, 0, []

    def check(self, ok, what):
        self.cases += 1
        self.failures += 0 if ok else 1
        line = f"{'ok  ' if ok else 'FAIL'} {self.name}: {what}"
        self.lines.append(line)
        print(line, flush=True)
        return ok


def trials(db, sweep):
    """{config_key: status} of a sweep's trials, and the duplicate count."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT c.config_key, t.status FROM trials t JOIN configs c"
                           " ON c.id = t.config_id WHERE t.sweep_id = ?", (sweep,)).fetchall()
        dup = con.execute("SELECT count(*) - count(DISTINCT config_id) FROM trials"
                          " WHERE sweep_id = ?", (sweep,)).fetchone()[0]
    finally:
        con.close()
    return {k: s for k, s in rows}, dup


def integrity(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def faults(k, out, backend):
    c = Checks("gpu_fault_injection")
    db = os.path.join(out, "faults.db")
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    base = [k, "sweep", "--family", "selftest", "--shape", "n=1048593", "--plant", "--db", db,
            "--timeout", "3", "--json", "--rounds", "3"]
    if backend == "cpu":
        base += ["--worker-backend", "cpu"]
    rc, so, se = run(base)
    s = summary(so)
    if not c.check(rc == 0 and s is not None, f"selftest sweep over the planted configs completes "
                   f"(exit {rc})"):
        print(se[-2000:], file=sys.stderr)
        return c
    got, dup = trials(db, s["sweep_id"])
    want = {"fault": "fault", "hang": "timeout", "wrong": "wrong", "sparse_wrong": "wrong",
            "oob_write": "wrong", "compile_error": "compile_error",
            "smem_excess": "launch_error", "launch_error": "launch_error", "ok": "ok"}
    for key, status in sorted(got.items()):
        variant = key.split(",")[0].split("=")[1]
        c.check(want.get(variant) == status, f"{key}: {status} (want {want.get(variant)})")
    c.check(dup == 0, "no config twice")
    c.check(s["config"].startswith("variant=ok,"), f"the winner is a good config ({s['config']})")
    c.check(s["verified"], "the winner was verified in this run")
    # what made the planted ones wrong: the local check, the guard regions
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    msgs = dict(con.execute("SELECT c.config_key, t.message FROM trials t JOIN configs c"
                            " ON c.id = t.config_id WHERE t.sweep_id = ?", (s["sweep_id"],)))
    con.close()
    sparse = [m for kk, m in msgs.items() if "sparse_wrong" in kk]
    oob = [m for kk, m in msgs.items() if "oob_write" in kk]
    c.check(sparse and all("local bound" in (m or "") for m in sparse),
            f"sparse_wrong caught by the local check: {sparse[:1]}")
    c.check(oob and all("guard" in (m or "") for m in oob), f"oob_write caught by the guards: {oob[:1]}")
    # a later sweep of the same problem (another seed) skips what faulted or hung
    nfaulty = sum(1 for st in got.values() if st in ("fault", "timeout"))
    rc, so, se = run(base + ["--seed", "2"])
    s2 = summary(so)
    c.check(rc == 0 and s2 and s2["counts"]["skipped_faulty"] == nfaulty and
            s2["statuses"]["fault"] + s2["statuses"]["timeout"] == 0 and
            s2["worker_restarts"] == 0,
            f"a later sweep skips the {nfaulty} configs that faulted or hung "
            f"(skipped {s2 and s2['counts']['skipped_faulty']}, restarts "
            f"{s2 and s2['worker_restarts']})")
    rc, so, se = run(base + ["--seed", "3", "--retry-faulty"])
    s3 = summary(so)
    c.check(rc == 0 and s3 and s3["counts"]["skipped_faulty"] == 0 and
            s3["statuses"]["fault"] + s3["statuses"]["timeout"] == nfaulty,
            "--retry-faulty runs them again")
    if backend == "cuda":
        # a real family: dense's planted fault and hang beside two good configs
        good = ["variant=wgmma_ws,BLOCK_M=128,BLOCK_N=256,STAGES=4,GROUP_M=1,CONSUMERS=2",
                "variant=wgmma_ws,BLOCK_M=256,BLOCK_N=128,STAGES=4,GROUP_M=1,CONSUMERS=2"]
        cmd = [k, "sweep", "--workload", "dense:4096x4096:N1024", "--plant", "--db", db,
               "--timeout", "5", "--json", "--rounds", "3", "--no-baseline"]
        for g in good:
            cmd += ["--config", g]
        rc, so, se = run(cmd)
        s4 = summary(so)
        if c.check(rc == 0 and s4 is not None, f"dense sweep with planted fault and hang "
                   f"completes (exit {rc})"):
            got4, _ = trials(db, s4["sweep_id"])
            c.check(got4.get("variant=planted_fault") == "fault", "dense planted_fault: fault")
            c.check(got4.get("variant=planted_hang") == "timeout", "dense planted_hang: timeout")
            c.check(s4["config"] in good and s4["verified"],
                    f"dense winner is a good config, verified ({s4['config']})")
        else:
            print(se[-2000:], file=sys.stderr)
    c.check(integrity(db) == "ok", "integrity_check ok")
    return c


def kill_resume(k, out, backend, kills, rng):
    c = Checks("gpu_kill_resume")
    db = os.path.join(out, "kill.db")
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    if backend == "cpu":
        cmd = [k, "sweep", "--family", "selftest", "--shape", "n=4194304", "--plant",
               "--worker-backend", "cpu", "--timeout", "2", "--db", db, "--json"]
        lo, hi = 0.3, 4.0
    else:
        # 84 configs of one variant, compiled in batches: a minute or so
        # of work, with compiles, evaluations, the sentinel, the tournament
        # and the fresh re-time all there to be killed in.
        cmd = [k, "sweep", "--family", "dense", "--shape", "tokens=4096,in=4096,out=4096",
               "--variants", "wgmma_ws", "--plant", "--timeout", "5", "--db", db, "--json",
               "--threads", "16"]
        lo, hi = 1.0, 12.0
    seen = {}
    sweep = None
    completed_early = 0
    for i in range(kills):
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        delay = rng.uniform(lo, hi)
        try:
            so, se = p.communicate(timeout=delay)
            # finished before the kill: it must have completed
            s = summary(so)
            c.check(p.returncode == 0 and s is not None,
                    f"run {i + 1} finished on its own before its kill at {delay:.1f} s "
                    f"(exit {p.returncode})")
            completed_early += 1
            if s:
                sweep = s["sweep_id"]
        except subprocess.TimeoutExpired:
            p.kill()  # SIGKILL
            so, se = p.communicate()
            c.check(p.returncode == -9, f"run {i + 1} killed with SIGKILL at {delay:.1f} s")
        if sweep is None and os.path.exists(db):
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            row = con.execute("SELECT min(id) FROM sweeps").fetchone()
            con.close()
            sweep = row[0] if row else None
        if sweep is None:
            c.check(i == 0, f"run {i + 1}: no sweep yet (killed before it began)")
            continue
        now, dup = trials(db, sweep)
        lost = [kk for kk in seen if kk not in now]
        changed = [kk for kk in seen if kk in now and now[kk] != seen[kk]]
        c.check(integrity(db) == "ok" and not lost and not changed and dup == 0,
                f"after run {i + 1}: integrity ok, {len(now)} trials, {len(lost)} lost, "
                f"{len(changed)} changed, {dup} twice")
        seen = now
    # the last run, left alone, completes
    rc, so, se = run(cmd, timeout=900)
    s = summary(so)
    ok = rc == 0 and s is not None
    if ok:
        now, dup = trials(db, s["sweep_id"])
        lost = [kk for kk in seen if kk not in now]
        ok = c.check(s["resumed"] and not lost and dup == 0 and
                     len(now) == s["counts"]["planned"] and integrity(db) == "ok" and
                     s["sweep_id"] == (sweep or s["sweep_id"]),
                     f"the last run resumes sweep {s['sweep_id']} and completes: {len(now)} "
                     f"trials of {s['counts']['planned']} planned, {len(lost)} lost, "
                     f"{dup} twice, evaluated {s['counts']['evaluated']} now, "
                     f"winner {s['config']}")
    else:
        c.check(False, f"the last run completes (exit {rc}): {se[-500:]}")
    c.check(completed_early < kills, f"{kills - completed_early} of {kills} runs killed mid-sweep")
    # no sweep of that problem but the one: each restart resumed it
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    nsweeps = con.execute("SELECT count(*) FROM sweeps").fetchone()[0]
    con.close()
    c.check(nsweeps == 1, f"every restart resumed the one sweep ({nsweeps} in the database)")
    return c


def merge(path, rows, commit):
    doc = {"date": None, "commit": None, "checks": []}
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    names = {r["name"] for r in rows}
    doc["checks"] = [r for r in doc.get("checks", []) if r["name"] not in names] + rows
    doc["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc["commit"] = commit
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ktune")
    ap.add_argument("out")
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--checks", default="faults,kill")
    ap.add_argument("--results", default=None)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    k = os.path.abspath(a.ktune)
    ver = run([k, "--version"])[1].strip()
    commit = ver.split("commit ")[-1].rstrip(")") if "commit" in ver else "unknown"
    rng = random.Random(a.seed)
    print(f"reliability_gpu: {ver}, backend {a.backend}, seed {a.seed}", flush=True)
    done = []
    t0 = time.time()
    if "faults" in a.checks:
        done.append(faults(k, a.out, a.backend))
    if "kill" in a.checks:
        done.append(kill_resume(k, a.out, a.backend, a.kills, rng))
    suffix = "" if a.backend == "cuda" else "_cpu"
    gpu = None
    if a.backend == "cuda":  # the card the rows were taken on
        try:
            rc, out, _ = run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], 30)
        except (OSError, subprocess.SubprocessError):
            rc, out = 1, ""
        gpu = out.strip().splitlines()[0] if rc == 0 and out.strip() else None
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    arg = {"gpu_fault_injection": "faults", "gpu_kill_resume": "kill"}
    rows = [{"name": c.name + suffix, "cases": c.cases, "failures": c.failures,
             "command": f"bench/reliability_gpu.py build-dev/ktune OUT --backend {a.backend} "
                        f"--checks {arg[c.name]} --kills {a.kills} --seed {a.seed}",
             "device": a.backend, "gpu": gpu, "commit": commit, "date": date} for c in done]
    with open(os.path.join(a.out, "reliability_gpu.log"), "w") as f:
        for c in done:
            f.write("\n".join(c.lines) + "\n")
    if a.results:
        merge(a.results, rows, commit)
    print(f"\n{'check':24s} {'cases':>6s} {'failures':>9s}  ({time.time() - t0:.0f} s)")
    for r in rows:
        print(f"{r['name']:24s} {r['cases']:6d} {r['failures']:9d}")
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
