#!/usr/bin/env python3
"""search.py -- bench/search.sh's bookkeeping (no GPU here).

  search.py configs WORK NAME       the configs of problem NAME's fresh
                                    tournament, one key a line: the winners
                                    of its exhaustive sweeps and of every
                                    replayed strategy, then the top 20 of
                                    each exhaustive sweep (by its median)
  search.py h200-rows H200.json     "workload|config key" of every ktune row
  search.py h200-update H200.json WORK COMMIT OUT.json
                                    the ktune rows re-measured (us: the
                                    tournament median, retime_us: the fresh
                                    re-time), the rest as it was
  search.py assemble WORK COMMIT OUT.json
                                    bench/results/search.json: one row per
                                    exhaustive sweep and per replayed
                                    strategy and seed, with exactly the keys
                                    issue 29 lists; the checks it asks for in
                                    "checks"; a short table on stdout
"""
import datetime
import functools
import glob
import json
import os
import statistics
import sys

ROW_KEYS = ("problem", "dev_suite", "strategy", "seed", "repeat", "trials", "space", "winner",
            "best_us", "winner_fresh_us", "top20_fresh_best_us", "wall_s", "clock_min_mhz")


def load(path):
    with open(path) as f:
        return json.load(f)


def problems(work):
    out = []
    with open(os.path.join(work, "problems.txt")) as f:
        for line in f:
            if line.strip():
                name, fam, shape, var, dev, rep = line.rstrip("\n").split("|")
                out.append({"name": name, "family": fam, "shape": shape, "variants": var,
                            "dev": dev == "1", "repeat": rep == "1"})
    return out


@functools.lru_cache(maxsize=None)
def gpu(work):
    """(tag, card name) of the sweeps' GPU, as search.sh wrote them: the
    recordings are TAG_NAME.txt."""
    with open(os.path.join(work, "gpu.txt")) as f:
        tag, name = f.read().strip().split("|", 1)
    return tag, name


def rec_file(work, sub, name):
    return os.path.join(work, sub, f"{gpu(work)[0]}_{name}.txt")


def recording(path):
    """(config keys in file order, {key: (status, us)}) of a replay file."""
    keys, rec, params = [], {}, []
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#") or w[0] in ("family", "shape", "device", "source"):
                continue
            if w[0] == "params":
                params = w[1:]
                continue
            variant, vals, status, us = w[0], w[1:1 + len(params)], w[-2], w[-1]
            key = ",".join(["variant=" + variant] +
                           [f"{p}={v}" for p, v in zip(params, vals) if v != "-"])
            keys.append(key)
            rec[key] = (status, float(us) if status == "ok" else None)
    return keys, rec


def top20(rec):
    ok = sorted((us, k) for k, (st, us) in rec.items() if st == "ok")
    return [k for _, k in ok[:20]]


def sweep_json(work, name, seed):
    p = os.path.join(work, "logs", f"sweep_{name}_s{seed}.json")
    return load(p) if os.path.exists(p) else None


def replay_runs(work, name):
    r = load(os.path.join(work, "replay.json"))
    return [x for x in r["runs"] if os.path.basename(x["recording"]) ==
            os.path.basename(rec_file(work, "replay", name))]


def fresh_table(work, name):
    """{config: fresh tournament median or None} of problem NAME."""
    p = os.path.join(work, "logs", f"fresh_{name}.json")
    if not os.path.exists(p):
        return {}
    s = load(p)
    return {c["config"]: c["median_us"] for c in s["tournament"]["table"]}


def cmd_configs(work, name):
    out = []

    def add(k):
        if k and k not in out and len(out) < 64:
            out.append(k)

    for seed in (1, 2):
        s = sweep_json(work, name, seed)
        if s:
            add(s.get("config"))
    for r in replay_runs(work, name):
        add(r["winner"])
    for sub in ("replay", "repeat"):
        p = rec_file(work, sub, name)
        if os.path.exists(p):
            for k in top20(recording(p)[1]):
                add(k)
    print("\n".join(out))


def cmd_h200_rows(path):
    for r in load(path)["rows"]:
        if r.get("impl") != "ktune":
            continue
        cfg = r["config"]
        key = ",".join(["variant=" + cfg["variant"]] +
                       [f"{k}={v}" for k, v in cfg.items() if k != "variant"])
        print(f"{r['workload']}|{key}")


def cmd_h200_update(path, work, commit, out):
    doc = load(path)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{'workload':36s} {'before us':>10s} {'us':>10s} {'retime':>10s} {'diff':>7s}")
    bad = 0
    for r in doc["rows"]:
        if r.get("impl") != "ktune":
            continue
        p = os.path.join(work, "logs", "h200_" + r["workload"].replace(":", "_") + ".json")
        if not os.path.exists(p):
            print(f"{r['workload']:36s} not re-measured", file=sys.stderr)
            bad += 1
            continue
        try:
            s = load(p)
        except ValueError:
            print(f"{r['workload']:36s} no summary (see its log)", file=sys.stderr)
            bad += 1
            continue
        if not s.get("verified") or not s.get("us"):
            print(f"{r['workload']:36s} not verified in the re-measure", file=sys.stderr)
            bad += 1
            continue
        prev = {"us": r["us"], "retime_us": r.get("retime_us"), "run": r.get("run")}
        r.update({"us": round(s["us"], 3), "retime_us": round(s["retime_us"], 3),
                  "retime_method": "tournament", "tournament_rounds": s["tournament"]["rounds"],
                  "verified": True, "rel_err": s["rel_err"], "run": {"commit": commit, "date": now},
                  "previous": prev})
        if s.get("cublas_us"):
            r["cublas_us_in_worker"] = round(s["cublas_us"], 3)
        diff = s["retime_us"] / s["us"] - 1
        bad += abs(diff) > 0.02
        print(f"{r['workload']:36s} {prev['us']:10.3f} {s['us']:10.3f} {s['retime_us']:10.3f} "
              f"{100 * diff:+6.2f}%{'  OVER 2%' if abs(diff) > 0.02 else ''}")
    doc["remeasured"] = {"date": now, "commit": commit,
                         "how": "bench/search.sh: each ktune row's config alone, `ktune sweep "
                                "--config KEY --tournament 1 --rounds 5`: us the median of 5 "
                                "rounds, retime_us one more run in a fresh worker process"}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    return 1 if bad else 0


def cmd_assemble(work, commit, out):
    rows, checks = [], []
    for p in problems(work):
        name = p["name"]
        fresh = fresh_table(work, name)
        base = {"problem": f"{p['family']}:{p['shape']}" + (f"@{p['variants']}" if p["variants"] else ""),
                "dev_suite": p["dev"]}
        ex = {}
        for seed, repeat in ((1, 0), (2, 1)):
            s = sweep_json(work, name, seed)
            if not s:
                continue
            path = rec_file(work, "repeat" if repeat else "replay", name)
            t20 = top20(recording(path)[1]) if os.path.exists(path) else []
            f20 = [fresh.get(k) for k in t20 if fresh.get(k)]
            row = dict(base, strategy="exhaustive", seed=seed, repeat=repeat,
                       trials=s["counts"]["evaluated"] + s["counts"]["skipped"],
                       space=s["counts"]["space"], winner=s["config"], best_us=s["us"],
                       winner_fresh_us=fresh.get(s["config"]),
                       top20_fresh_best_us=min(f20) if f20 else None,
                       wall_s=round(s["wall_s"], 1),
                       clock_min_mhz=s["drift"]["clock_min_mhz"])
            rows.append(row)
            ex[repeat] = row
        if 0 in ex:
            e = ex[0]
            ok = bool(e["winner_fresh_us"] and e["top20_fresh_best_us"] and
                      e["winner_fresh_us"] <= 1.02 * e["top20_fresh_best_us"])
            checks.append({"problem": name, "check": "exhaustive winner within 2% of the top "
                           "20's best, fresh", "ok": ok,
                           "value": e["winner_fresh_us"] / e["top20_fresh_best_us"]
                           if e["winner_fresh_us"] and e["top20_fresh_best_us"] else None})
        if 0 in ex and 1 in ex:
            a, b = ex[0], ex[1]
            ok = a["winner"] == b["winner"] or bool(
                a["winner_fresh_us"] and b["winner_fresh_us"] and
                abs(b["winner_fresh_us"] / a["winner_fresh_us"] - 1) <= 0.01)
            checks.append({"problem": name, "check": "repeated sweep: same winner or within 1%",
                           "ok": ok, "value": b["winner_fresh_us"] / a["winner_fresh_us"]
                           if a["winner_fresh_us"] and b["winner_fresh_us"] else None})
        ref = ex.get(0, {}).get("winner_fresh_us")
        by = {}
        for r in replay_runs(work, name):
            row = dict(base, strategy=r["strategy"], seed=r["seed"], repeat=0, trials=r["trials"],
                       space=r["space"], winner=r["winner"], best_us=r["winner_us"],
                       winner_fresh_us=fresh.get(r["winner"]), top20_fresh_best_us=None,
                       wall_s=None, clock_min_mhz=None)
            rows.append(row)
            sp = ref / row["winner_fresh_us"] if ref and row["winner_fresh_us"] else None
            by.setdefault(r["strategy"], []).append((sp, r["trials"] / r["space"]))
        for strat, (need, most) in (("guided", (0.97, 0.20)), ("halving", (0.97, 0.35))):
            v = by.get(strat, [])
            sp = [x for x, _ in v if x is not None]
            fr = [f for _, f in v]
            ok = len(sp) == len(v) and len(v) > 0 and statistics.mean(sp) >= need and \
                statistics.mean(fr) <= most
            checks.append({"problem": name, "check": f"{strat}: >= {need} of the exhaustive "
                           f"winner's speed (fresh) with <= {int(most * 100)}% of the trials, "
                           "mean of 3 seeds", "ok": ok,
                           "value": {"speed": statistics.mean(sp) if sp else None,
                                     "fraction": statistics.mean(fr) if fr else None}})
    ex_rows = [r for r in rows if r["strategy"] == "exhaustive" and r["repeat"] == 0]
    hot = sum(1 for r in ex_rows if r["clock_min_mhz"] and r["clock_min_mhz"] < 1900)
    outside = sum(1 for r in ex_rows if not r["dev_suite"])
    checks.append({"check": "six problems, >= 3 outside the development suite, >= 2 hot enough "
                   "to throttle (clock_min_mhz < 1900)",
                   "ok": len(ex_rows) == 6 and outside >= 3 and hot >= 2,
                   "value": {"problems": len(ex_rows), "outside": outside, "throttled": hot}})
    for r in rows:
        assert tuple(r) == ROW_KEYS, r
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(out, "w") as f:
        json.dump({"date": now, "commit": commit, "device": gpu(work)[1],
                   "how": "bench/search.sh: exhaustive sweeps (each with its tournament), "
                          "replayed strategies, and one fresh tournament of 4 rotated rounds per "
                          "problem over every winner and each exhaustive sweep's top 20",
                   "rows": rows, "checks": checks}, f, indent=1)
    print(f"{'problem':30s} {'strategy':10s} {'seed':>4s} {'trials':>11s} {'best_us':>9s} "
          f"{'fresh':>9s} {'top20':>9s} {'clock':>5s}")
    for r in rows:
        if r["strategy"] != "exhaustive" and r["seed"] != 1:
            continue
        print(f"{r['problem'][:30]:30s} {r['strategy']:10s} {r['seed']:4d} "
              f"{r['trials']:5d}/{r['space']:<5d} {r['best_us'] or 0:9.2f} "
              f"{r['winner_fresh_us'] or 0:9.2f} {r['top20_fresh_best_us'] or 0:9.2f} "
              f"{r['clock_min_mhz'] or 0:5d}")
    for c in checks:
        print(f"{'ok  ' if c['ok'] else 'FAIL'} {c.get('problem', '')} {c['check']}: {c['value']}")
    return 0 if all(c["ok"] for c in checks) else 1


def main():
    a = sys.argv[1:]
    if a[:1] == ["configs"] and len(a) == 3:
        return cmd_configs(a[1], a[2]) or 0
    if a[:1] == ["h200-rows"] and len(a) == 2:
        return cmd_h200_rows(a[1]) or 0
    if a[:1] == ["h200-update"] and len(a) == 5:
        return cmd_h200_update(*a[1:])
    if a[:1] == ["assemble"] and len(a) == 4:
        return cmd_assemble(*a[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
