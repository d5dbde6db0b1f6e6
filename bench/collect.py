#!/usr/bin/env python3
"""collect.py -- assembles bench/results/h200.json (docs/benchmarks.md's format) from
the JSON summaries `ktune sweep --json` printed and the peers' timings of the
same run.

Usage: collect.py OUT.json COMMIT "PEERS.json [PEERS.json...]" SWEEP.json...
A ktune row is written only for a sweep whose winner verified in this run.

With KTUNE_COLLECT_KEEP=OLD.json (a run of only some lanes, bench/h200.sh
KTUNE_LANES), the rows of every workload this run did not measure are
carried over from OLD.json unchanged, each marked with "run": the commit and
date of the run that measured it; "runs" at the top lists the runs. A row
and its peers always come from one run: workloads are carried whole.
"""
import os
import datetime
import json
import sys


def ratios(rows):
    """The fused-rope backward against ktune's plain backward and against
    unfused_rope, both of the same run, on the rope row (docs/benchmarks.md)."""
    k = {(r["workload"], r["impl"]): r for r in rows}
    for wl, impl in list(k):
        if not wl.startswith("blockattn_bwd_rope:") or impl != "ktune":
            continue
        rope = k[(wl, impl)]
        plain = k.get((wl.replace("_rope:", ":"), "ktune"))
        unf = k.get((wl, "unfused_rope"))
        if plain:
            rope["vs_plain_bwd"] = round(rope["us"] / plain["us"], 4)
        if unf:
            rope["vs_unfused_rope"] = round(rope["us"] / unf["us"], 4)


def cellv(row, key):
    """A table cell: row[key], or "-" where the row or the value is missing
    (no floor on a card whose peaks were never measured)."""
    v = (row or {}).get(key)
    return "-" if v is None else str(v)


def main():
    out_path, commit, peers_path, sweeps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    rows, device, summaries = [], None, []
    for path in sweeps:
        with open(path) as f:
            d = json.load(f)
        # `ktune sweep --json` prints one summary; with --devices, {"sweeps": [...]}.
        summaries += [(path, s) for s in d.get("sweeps", [d])]
    for path, s in summaries:
        if "workload" not in s:
            continue
        device = device or s.get("device")
        if not s.get("verified"):
            print(f"collect: {path}: no verified winner, no ktune row", file=sys.stderr)
            continue
        row = {"workload": s["workload"], "impl": "ktune", "us": round(s["us"], 3),
               "retime_us": round(s["retime_us"], 3),
               # "tournament": us is the final tournament's median (sweeps since
               # schema 2); "trial": the sweep's own median (older summaries)
               "retime_method": s.get("retime_method", "trial"),
               # null where the card's peaks were never measured (kt_peaks_of)
               "floor_us": round(s["floor_us"], 3) if s.get("floor_us") else None,
               "verified": True, "template": s.get("template", ""),
               "config": s["params"], "rel_err": s["rel_err"],
               "sweep": {"space": s["counts"]["space"], "planned": s["counts"]["planned"],
                         "evaluated": s["counts"]["evaluated"],
                         "complete": not s.get("time_limited") and not s.get("interrupted"),
                         "wall_s": round(s.get("wall_s", 0), 1),
                         "statuses": s["statuses"], "worker_restarts": s["worker_restarts"]}}
        if s.get("cublas_us"):
            row["cublas_us_in_worker"] = round(s["cublas_us"], 3)
        if "gpu" in s:
            row["gpu"] = s["gpu"]
        if row["floor_us"] and row["us"] < 0.95 * row["floor_us"]:
            raise SystemExit(f"collect: {s['workload']}: {row['us']} us is below 0.95 x the floor "
                             f"{row['floor_us']} us: a measurement bug, not a result")
        rows.append(row)
    for p in peers_path.split():
        with open(p) as f:
            for r in json.load(f):
                if r.get("impl") == "ktune_dq_check":
                    # dq error of ktune's backward on the bench inputs, folded
                    # into the swept ktune row of that workload; `config`
                    # names the kernel that produced that dq.
                    for k in rows:
                        if k["workload"] == r["workload"] and k["impl"] == "ktune":
                            for n in ("dq", "dk", "dv"):
                                if n + "_rel_err" in r:
                                    k[n + "_rel_err"] = r[n + "_rel_err"]
                            k["dq_rel_err_config"] = r.get("config", "unknown")
                    continue
                if r.get("impl") == "ktune":
                    continue  # the sweep's row is the ktune row
                if r.get("impl") == "rope_conj_only":
                    continue  # peers_attn.py's rotation-only timing: not a suite peer
                rows.append(r)
    ratios(rows)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {"device": device or "unknown", "date": now, "commit": commit, "rows": rows}
    keep = os.environ.get("KTUNE_COLLECT_KEEP")
    if keep:
        with open(keep) as f:
            old = json.load(f)
        mine = {r["workload"] for r in rows}
        carried = [dict(r, run=r.get("run", {"commit": old["commit"], "date": old["date"]}))
                   for r in old["rows"] if r["workload"] not in mine]
        for r in rows:
            r["run"] = {"commit": commit, "date": now}
        rows += carried
        # which workloads each run measured, from the rows themselves (a
        # carried row may itself have been carried into OLD.json)
        runs = {}
        for r in rows:
            runs.setdefault((r["run"]["commit"], r["run"]["date"]), set()).add(r["workload"])
        doc["runs"] = [{"commit": c, "date": d, "workloads": sorted(w)}
                       for (c, d), w in sorted(runs.items(), key=lambda kv: kv[0][1], reverse=True)]
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    # The short table, last.
    by = {}
    for r in rows:
        by.setdefault(r["workload"], {})[r["impl"]] = r
    print(f"{'workload':34s} {'ktune us':>9s} {'retime':>8s} {'floor':>7s} {'done':>4s} "
          f"{'peer':>13s} {'peer us':>8s} {'ktune/peer':>10s}")
    for w, impls in by.items():
        k = impls.get("ktune")
        names = [p for p in ("cublas_dense", "torch_naive", "torch_compile", "fa2_varlen",
                             "unfused_rope") if p in impls] or [None]
        for pname in names:
            c = impls.get(pname)
            ratio = f"{k['us'] / c['us']:.3f}" if k and c and c.get("us") else "-"
            sweep = (k or {}).get("sweep")
            done = ("yes" if sweep["complete"] else "part") if sweep else "-"
            print(f"{w:34s} {cellv(k, 'us'):>9} {cellv(k, 'retime_us'):>8} "
                  f"{cellv(k, 'floor_us'):>7} {done:>4s} {pname if c else '-':>13s} "
                  f"{cellv(c, 'us'):>8} {ratio:>10s}")
        if k and "vs_plain_bwd" in k:
            print(f"{w:34s} rope / plain bwd {k['vs_plain_bwd']:.3f}")
        for n in ("dq", "dk", "dv"):
            if k and n + "_rel_err" in k:
                fa = impls.get("fa2_varlen", {}).get(n + "_rel_err")
                print(f"{w:34s} {n}_rel_err ktune {k[n + '_rel_err']:.3e} "
                      f"fa2 {fa if fa is None else f'{fa:.3e}'}")


if __name__ == "__main__":
    main()
