#!/usr/bin/env python3
"""shapes.py -- bench/shapes.sh's results file and table.

Usage: shapes.py OUT_DIR COMMIT BUDGET "VARIANTS"

Reads OUT_DIR/shapes_*.json (ktune sweep --json over several problems, one
per family), writes OUT_DIR/shapes.json:
  {"date", "commit", "budget_per_problem", ["variants"],
   "rows": [{"family", "shape", "device", "space", "evaluated", "statuses",
             "verified", "best_us", "config", "rel_err", "cublas_us",
             "floor_us"} or {"family", "shape", "skipped"} or an error row]}
and prints one line per problem. "cells" and "cells_ahead" hold issue 31's
measure: per layer (in, out) and N >= 1024, the best verified BLAST or
Monarch time beside the fastest cuBLAS time of that problem's rows (low-rank
does not count), and how many cells it is at or under cuBLAS; a cell with
no verified structured row counts as behind. Exit 1 if a problem of this run did not
verify or had a wrong candidate (a problem that no config of the VARIANTS
asked for can run is skipped, not failed).

With KTUNE_SHAPES_KEEP=OLD.json (a run of only some families,
KTUNE_SHAPES_FAMILIES), the rows of every (family, shape) this run did not
measure are carried over from OLD.json unchanged, each marked with "run":
the run that measured it (commit, date, budget); "runs" at the top lists the
runs and how many problems each holds. Refused (exit 2, nothing written)
when OLD is not a shapes.json or was measured on another GPU.
"""
import datetime
import glob
import json
import os
import sys

from keep import carry_rows, load


def problem(r):
    return (r["family"], r["shape"])


def sweep_rows(out, variants):
    rows = []
    for p in sorted(glob.glob(os.path.join(out, "shapes_*.json"))):
        d = load(p)
        if not isinstance(d, dict):
            print(f"shapes: {p}: no summary (the sweep was stopped)", file=sys.stderr)
            continue
        for s in d.get("sweeps", [d]):
            if "family" not in s:
                continue
            if "error" in s:
                err = s["error"]["message"] if isinstance(s["error"], dict) else str(s["error"])
                if s["family"] in variants and "no config of" in err:
                    rows.append({"family": s["family"], "shape": s["shape"], "skipped": err,
                                 "statuses": {}, "best_us": None, "cublas_us": None})
                    continue
                rows.append({"family": s["family"], "shape": s["shape"], "verified": False,
                             "statuses": {}, "error": s["error"], "best_us": None,
                             "cublas_us": None})
                continue
            ok = bool(s.get("verified"))
            rows.append({"family": s["family"], "shape": s["shape"], "device": s.get("device"),
                         "space": s["counts"]["space"], "evaluated": s["counts"]["evaluated"],
                         "statuses": s["statuses"], "verified": ok,
                         "best_us": round(s["us"], 3) if ok else None,
                         "config": s["config"] if ok else None,
                         "rel_err": s["rel_err"] if ok else None,
                         "cublas_us": round(s["cublas_us"], 3) if s.get("cublas_us") else None,
                         "floor_us": round(s["floor_us"], 3) if s.get("floor_us") else None})
    return rows


def cells(rows):
    """Issue 31's cells: (in, out, tokens) for tokens >= 1024, each with the
    best verified blast or monarch row and the fastest cuBLAS time any of
    the cell's rows measured. Returns (cells, how many are ahead)."""
    by = {}
    for r in rows:
        if r["family"] not in ("blast", "monarch"):
            continue
        try:
            k = dict(kv.split("=", 1) for kv in r["shape"].split(","))
            key = (int(k["in"]), int(k["out"]), int(k["tokens"]))
        except (KeyError, ValueError):
            continue
        if key[2] < 1024:
            continue
        c = by.setdefault(key, {"in": key[0], "out": key[1], "tokens": key[2], "family": None,
                                "best_us": None, "cublas_us": None})
        if r.get("cublas_us") and (c["cublas_us"] is None or r["cublas_us"] < c["cublas_us"]):
            c["cublas_us"] = r["cublas_us"]
        if r.get("verified") and r.get("best_us") and (c["best_us"] is None or r["best_us"] < c["best_us"]):
            c["family"], c["best_us"] = r["family"], r["best_us"]
    out = [by[k] for k in sorted(by)]
    for c in out:
        c["ahead"] = bool(c["best_us"] and c["cublas_us"] and c["best_us"] <= c["cublas_us"])
    return out, sum(c["ahead"] for c in out)


def carry(doc, path):
    """Adds OLD's rows of the problems doc did not measure, marked with OLD's
    run (or the run a row already carries), and lists the runs. Returns an
    error string for an unreadable or foreign OLD, else None; doc is left
    unchanged on error."""
    old = load(path)
    if not isinstance(old, dict) or not isinstance(old.get("rows"), list) or "commit" not in old:
        return "not a shapes.json (no rows or commit)"
    devs = {r.get("device") for r in doc["rows"] if r.get("device")}
    old_devs = {r.get("device") for r in old["rows"] if r.get("device")}
    if old.get("device"):
        old_devs.add(old["device"])
    if devs and old_devs and devs != old_devs:
        return f"measured on {', '.join(sorted(old_devs))}, this run on {', '.join(sorted(devs))}"
    old_run = {"commit": old["commit"], "date": old.get("date"),
               "budget": old.get("budget_per_problem")}
    this_run = {"commit": doc["commit"], "date": doc["date"], "budget": doc["budget_per_problem"]}
    doc["rows"] = carry_rows(doc["rows"], old["rows"], problem, this_run, old_run)
    runs = {}
    for r in doc["rows"]:
        key = (r["run"]["commit"], r["run"]["date"])
        runs.setdefault(key, dict(r["run"], problems=0))["problems"] += 1
    doc["runs"] = sorted(runs.values(), key=lambda x: x["date"] or "", reverse=True)
    return None


def main():
    if len(sys.argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out, commit, budget, vtext = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    variants = dict(fv.split("=", 1) for fv in vtext.split())
    rows = sweep_rows(out, variants)
    doc = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": commit, "budget_per_problem": budget, "rows": rows}
    if variants:
        doc["variants"] = variants
    now = {problem(r) for r in rows}
    bad = [r for r in rows if "skipped" not in r and (not r["verified"] or r["statuses"].get("wrong"))]
    skipped = [r for r in rows if "skipped" in r]
    measured = len(rows)
    keep = os.environ.get("KTUNE_SHAPES_KEEP")
    if keep:
        err = carry(doc, keep)
        if err:
            print(f"shapes.py: KTUNE_SHAPES_KEEP={keep}: {err}", file=sys.stderr)
            return 2
    doc["cells"], ahead = cells(doc["rows"])
    doc["cells_ahead"] = f"{ahead} of {len(doc['cells'])}"
    with open(os.path.join(out, "shapes.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{'family':8s} {'shape':58s} {'ok':>3s} {'bad':>3s} {'best us':>9s} {'cuBLAS':>8s}")
    for r in doc["rows"]:
        st = r.get("statuses", {})
        nbad = sum(v for k, v in st.items() if k != "ok")
        line = (f"{r['family']:8s} {r['shape']:58s} {st.get('ok', 0):3d} {nbad:3d} "
                f"{r['best_us'] if r.get('best_us') else '-':>9} {r.get('cublas_us') or '-':>8}")
        if problem(r) not in now:
            line += f"  (carried: run {r['run']['commit']})"
        print(line)
    print(f"{measured} problems, {measured - len(bad) - len(skipped)} verified with no wrong "
          f"candidate, {len(skipped)} skipped (no config of the variants asked for fits)"
          + (f"; {len(doc['rows']) - measured} carried over" if len(doc["rows"]) > measured else ""))
    if doc["cells"]:
        print(f"blast or monarch at or under cuBLAS in {doc['cells_ahead']} (in, out, N >= 1024) "
              f"cells:")
        for c in doc["cells"]:
            best = f"{c['best_us']:.1f} {c['family']}" if c["best_us"] else "none verified"
            print(f"  in {c['in']:5d} out {c['out']:5d} N {c['tokens']:5d}: {best:>18s} "
                  f"cuBLAS {c['cublas_us'] or '-'}{'  ahead' if c['ahead'] else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
