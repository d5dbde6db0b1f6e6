#!/usr/bin/env python3
"""shapes_attn.py -- bench/shapes_attn.sh's results file and table.

Usage: shapes_attn.py OUT_DIR COMMIT BUDGET LIMIT DEVICE "BLOCKS" "HDS"

Reads OUT_DIR/ktune_{fwd,bwd}_b{BLK}_d{HD}.json (ktune sweep --json) and
OUT_DIR/fa2_b{BLK}_d{HD}.json (bench/peers_attn.py), writes
OUT_DIR/shapes_attn.json:
  {"device", "run": {"commit", "date"}, "shape": {...}, "budget", "time_limit_s",
   "rows": [{"direction", "block", "head_dim", "ktune_us", "config",
             "verified", "rel_err", "evaluated", "space", "fa2_us",
             "fa2_dq_rel_err"..., "speedup", "ktune_error"}]}
and prints one line per cell. Exit 1 unless every cell of this run has a
verified ktune winner and an FA2 time.

With KTUNE_SHAPES_KEEP=OLD.json (a run of only some cells, KTUNE_ATTN_BLOCKS
or KTUNE_ATTN_HDS), the rows of every cell this run did not measure are
carried over from OLD.json unchanged, each marked with "run": the run that
measured it (its commit, date and notes); "runs" at the top lists the runs
and their cells. A ktune row and its FA2 time always come from one run.
"""
import datetime
import json
import os
import sys

from keep import carry_rows, load


def cell(r):
    return (r["direction"], r["block"], r["head_dim"])


def carry(doc, path):
    """Adds OLD's rows of the cells doc did not measure, marked with OLD's
    run (or the run a row already carries), and lists the runs. Returns an
    error string for an unreadable or foreign OLD, else None; doc is left
    unchanged on error."""
    old = load(path)
    if not isinstance(old, dict) or not isinstance(old.get("rows"), list) or "run" not in old:
        return "not a shapes_attn.json (no rows or run)"
    if old.get("shape") != doc["shape"] or old.get("device") != doc["device"]:
        return (f"measured on {old.get('device')} at {old.get('shape')}, "
                f"this run on {doc['device']} at {doc['shape']}")
    settings = {"budget": doc["budget"], "time_limit_s": doc["time_limit_s"]}
    measured = len(doc["rows"])
    doc["rows"] = carry_rows(doc["rows"], old["rows"], cell, dict(doc["run"], **settings),
                             old["run"])
    for r in doc["rows"][measured:]:
        r["run"].setdefault("budget", old.get("budget"))
        r["run"].setdefault("time_limit_s", old.get("time_limit_s"))
    doc["rows"].sort(key=lambda r: (r["block"], r["head_dim"], r["direction"] != "fwd"))
    runs = {}
    for r in doc["rows"]:
        key = (r["run"]["commit"], r["run"]["date"])
        runs.setdefault(key, dict(r["run"], cells=[]))["cells"].append(
            f"{r['direction']} b{r['block']} d{r['head_dim']}")
    doc["runs"] = sorted(runs.values(), key=lambda x: x["date"], reverse=True)
    return None


def main():
    out, commit, budget, limit, device, blocks, hds = sys.argv[1:8]
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows, bad = [], 0
    for blk in (int(b) for b in blocks.split()):
        for hd in (int(h) for h in hds.split()):
            fa2 = load(os.path.join(out, f"fa2_b{blk}_d{hd}.json")) or []
            for direction in ("fwd", "bwd"):
                row = {"direction": direction, "block": blk, "head_dim": hd}
                k = load(os.path.join(out, f"ktune_{direction}_b{blk}_d{hd}.json"))
                if k is None:
                    row["ktune_error"] = "no sweep summary (not run, or stopped)"
                elif "error" in k:
                    e = k["error"]
                    row["ktune_error"] = e.get("message", str(e)) if isinstance(e, dict) else str(e)
                else:
                    row.update({"verified": bool(k.get("verified")),
                                "ktune_us": round(k["us"], 2) if k.get("verified") else None,
                                "config": k.get("config"), "rel_err": k.get("rel_err"),
                                "evaluated": k.get("counts", {}).get("evaluated"),
                                "space": k.get("counts", {}).get("space"),
                                "statuses": k.get("statuses"), "stop": k.get("stop")})
                for r in fa2:
                    if r.get("impl") == "fa2_varlen" and r["workload"].startswith(f"blockattn_{direction}:"):
                        row["fa2_us"] = round(r["us"], 2)
                        for n in ("dq", "dk", "dv"):
                            if f"{n}_rel_err" in r:
                                row[f"fa2_{n}_rel_err"] = r[f"{n}_rel_err"]
                if row.get("ktune_us") and row.get("fa2_us"):
                    row["speedup"] = round(row["fa2_us"] / row["ktune_us"], 3)
                if not row.get("verified") or "fa2_us" not in row:
                    bad += 1
                rows.append(row)
    doc = {"device": device, "run": {"commit": commit, "date": date},
           "shape": {"seqs": 1152, "lmax": 1024, "heads": 4, "rope": 0},
           "strategy": "random", "budget": int(budget), "time_limit_s": int(limit), "rows": rows}
    measured = len(rows)
    now = {cell(r) for r in rows}
    keep = os.environ.get("KTUNE_SHAPES_KEEP")
    if keep:
        err = carry(doc, keep)
        if err:
            print(f"shapes_attn.py: KTUNE_SHAPES_KEEP={keep}: {err}", file=sys.stderr)
            return 2
    with open(os.path.join(out, "shapes_attn.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{device}, commit {commit}: seqs 1152, lmax 1024, heads 4; ktune random budget {budget}")
    print(f"{'dir':4s} {'block':>5s} {'d':>4s} {'ktune us':>10s} {'FA2 us':>10s} {'FA2/ktune':>9s}  config or reason")
    for r in rows:
        kt = f"{r['ktune_us']:10.1f}" if r.get("ktune_us") else f"{'-':>10s}"
        fa = f"{r['fa2_us']:10.1f}" if r.get("fa2_us") else f"{'-':>10s}"
        sp = f"{r['speedup']:9.2f}" if r.get("speedup") else f"{'-':>9s}"
        what = r.get("config") or r.get("ktune_error", "")
        if cell(r) not in now:
            what += f"  (carried: run {r['run']['commit']} {r['run']['date']})"
        print(f"{r['direction']:4s} {r['block']:5d} {r['head_dim']:4d} {kt} {fa} {sp}  {what}")
    print(f"{measured - bad} of {measured} cells of this run with a verified ktune winner and an FA2 time"
          + (f"; {len(rows) - measured} carried over" if len(rows) > measured else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
