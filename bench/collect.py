#!/usr/bin/env python3
"""collect.py -- assembles bench/results/h200.json (BENCH.md's format) from
the JSON summaries `ktune sweep --json` printed and the peers' timings of the
same run.

Usage: collect.py OUT.json COMMIT "PEERS.json [PEERS.json...]" SWEEP.json...
A ktune row is written only for a sweep whose winner verified in this run.
"""
import datetime
import json
import sys


def main():
    out_path, commit, peers_path, sweeps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    rows, device = [], None
    for path in sweeps:
        with open(path) as f:
            s = json.load(f)
        device = device or s.get("device")
        if not s.get("verified"):
            print(f"collect: {path}: no verified winner, no ktune row", file=sys.stderr)
            continue
        row = {"workload": s["workload"], "impl": "ktune", "us": round(s["us"], 3),
               "retime_us": round(s["retime_us"], 3), "floor_us": round(s["floor_us"], 3),
               "verified": True, "template": s.get("template", ""),
               "config": s["params"], "rel_err": s["rel_err"],
               "sweep": {"space": s["counts"]["space"], "evaluated": s["counts"]["evaluated"],
                         "statuses": s["statuses"], "worker_restarts": s["worker_restarts"]}}
        if s.get("cublas_us"):
            row["cublas_us_in_worker"] = round(s["cublas_us"], 3)
        if row["us"] < 0.95 * row["floor_us"]:
            raise SystemExit(f"collect: {s['workload']}: {row['us']} us is below 0.95 x the floor "
                             f"{row['floor_us']} us: a measurement bug, not a result")
        rows.append(row)
    for p in peers_path.split():
        with open(p) as f:
            rows += json.load(f)
    doc = {"device": device or "unknown",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": commit, "rows": rows}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    # The short table, last.
    by = {}
    for r in rows:
        by.setdefault(r["workload"], {})[r["impl"]] = r
    print(f"{'workload':32s} {'ktune us':>9s} {'retime':>8s} {'floor':>7s} {'cublas':>8s} {'ratio':>6s}")
    for w, impls in by.items():
        k, c = impls.get("ktune"), impls.get("cublas_dense")
        ratio = f"{k['us'] / c['us']:.2f}" if k and c else "-"
        print(f"{w:32s} {k['us'] if k else '-':>9} {k['retime_us'] if k else '-':>8} "
              f"{k['floor_us'] if k else '-':>7} {c['us'] if c else '-':>8} {ratio:>6s}")


if __name__ == "__main__":
    main()
