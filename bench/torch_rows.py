#!/usr/bin/env python3
"""torch_rows.py -- ktune through its PyTorch ops (the `ktune` package,
python/), timed in the same call as ktune's own winners.

  bench/torch_rows.py run OUT_DIR [--build build-dev] [--commit SHA] [--c-rows FILE]
  bench/torch_rows.py merge OUT_DIR/torch_rows.json [--h200 bench/results/h200.json]
                      [--runtime bench/results/runtime.json]

run (on the GPU machine, from the repository root; libktune from
BUILD/libktune.so unless $KTUNE_LIB says otherwise, the table
data/h200-results.json unless $KTUNE_TABLE does):
 1. docs/benchmarks.md rows, impl "ktune_torch", for WORKLOADS: for each, first the
    stored winner (the table's entry for that shape) re-timed by
    `BUILD/ktune sweep --workload W --config KEY --no-baseline --json` (its
    worker verifies it first), then the same layer through the torch op:
    verified against a float64 PyTorch reference (ktune.reference) on the
    bench's inputs, then timed with triton.testing.do_bench(fn, warmup=25,
    rep=200, return_mode="median") (CUDA events, L2 flushed). Each row keeps
    the sweep's time as ktune_us and vs_ktune = us / ktune_us, the config
    libktune picked and whether it is the re-timed one; the bar is
    vs_ktune <= 1.05.
 2. bench/results/runtime.json rows, "via": "torch", for RUNTIME_SHAPES
    (every family at its tuned shape and two it was never tuned at; with
    --c-rows FILE, bench/runtime.sh's OUT/runtime.json of the same call,
    the shapes of its "c" rows): verified, then timed the same way; "tuned"
    is libktune's own answer (match "exact"); sweep_us and sweep_config are
    the C side's (its budgeted sweep at that shape, this call), else null;
    ratio = us / sweep_us, whose bar for an untuned shape is 1.2.
Attention inputs use kernels/blockattn.h's lengths (bench/peers_attn.py's
generator) and peers_attn's scales (q, k in (-2, 2), v, do in (-1, 1)).
Writes OUT_DIR/torch_rows.json and prints a table last. Exit 1 when a row
could not be verified, 3 when a row misses its bar (1.05 x ktune; 1.2 x
the sweep for an untuned shape).

merge (on the build machine): puts the rows into the results files, one row
per (workload, impl) in h200.json and per (family, shape, via, GPU) in
runtime.json, replacing only rows of this script's own kind; every other row
(the "ktune" rows, the C side's "via": "c" rows) is left as it was. Rows of
another GPU than the results file's "device" are refused: --h200 names that
GPU's own file (begun by the merge when it does not exist yet).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

WORKLOADS = {  # workload id -> (family, shape key of the tuned entry)
    "blockattn_fwd:ads_d128_L256": ("blockattn_fwd", "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0"),
    "blockattn_bwd:ads_d128_L256": ("blockattn_bwd", "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0"),
    "dense:4096x4096:N1024": ("dense", "tokens=1024,in=4096,out=4096"),
    "monarch:llama7b_qkvo:N1024": ("monarch", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024"),
    "blast:llama7b_qkvo:N1024": ("blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024"),
}

# (family, shape): bench/runtime_shapes.txt, the C side's list too, so that
# both vias time the same shapes; with --c-rows the shapes are taken from
# that file instead.
with open(os.path.join(HERE, "runtime_shapes.txt")) as _f:
    RUNTIME_SHAPES = [tuple(line.split("|")) for line in _f.read().splitlines()
                      if line and not line.startswith("#")]

TOL = {"blockattn_bwd": 2e-2}  # others 1e-2, the families' tolerances (kernels/*.c)


def parse_shape(key):
    return {k: int(v) for k, v in (kv.split("=") for kv in key.split(","))}


# ---- run -----------------------------------------------------------------

def bench(fn):
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3


class Problem:
    """One (family, shape): its inputs, the torch-op call, the check."""

    def __init__(self, fam, shape, g):
        import torch
        import ktune
        from ktune import reference as ref
        self.fam, self.shape, s = fam, shape, parse_shape(shape)
        dev = "cuda"

        def uni(*dims, scale=1.0):
            return ((torch.rand(*dims, device=dev, generator=g) * 2 - 1) * scale).bfloat16()

        if fam.startswith("blockattn"):
            sys.path.insert(0, HERE)
            from peers_attn import lengths
            lens = lengths(s["seqs"], s["lmax"])
            cu = [0]
            for n in lens:
                cu.append(cu[-1] + n)
            T, H, d, blk, rope = cu[-1], s["heads"], s["head_dim"], s["block"], s["rope"]
            self.cu = torch.tensor(cu, dtype=torch.int32, device=dev)
            self.q, self.k = uni(T, H, d, scale=2.0), uni(T, H, d, scale=2.0)
            self.v, self.do = uni(T, H, d), uni(T, H, d)
            self.tab = ktune.rope_table(self.cu, d, tokens=T) if rope else None
            self.blk, self.rope_v, self.lmax = blk, rope == 2, s["lmax"]
            self.choose_key = (f"seqs={s['seqs']},tokens={T},heads={H},head_dim={d},block={blk},"
                               f"rope={rope},lmax={s['lmax']}")
            if fam == "blockattn_fwd":
                self.fn = lambda: ktune.block_attention(self.q, self.k, self.v, self.cu, blk,
                                                        self.tab, self.rope_v, self.lmax)
            else:
                qg, kg, vg = (t.detach().clone().requires_grad_() for t in (self.q, self.k, self.v))
                o = ktune.block_attention(qg, kg, vg, self.cu, blk, self.tab, self.rope_v, self.lmax)
                # the production path: autograd into ktune's backward op
                self.fn = lambda: torch.autograd.grad(o, (qg, kg, vg), self.do, retain_graph=True)
            return
        N, n, m = s["tokens"], s["in"], s["out"]
        self.x = uni(N, n)
        self.choose_key = shape
        if fam == "dense":
            self.layer = ktune.nn.Linear(n, m, device=dev)
            self.ref = lambda: ref.dense(self.x, self.layer.weight)
        elif fam == "lowrank":
            self.layer = ktune.nn.LowRankLinear(n, m, rank=s["rank"], device=dev)
            self.ref = lambda: ref.lowrank(self.x, self.layer.V, self.layer.U)
        elif fam == "monarch":
            self.layer = ktune.nn.MonarchLinear(n, m, blocks=s["blocks"], rank=s["rank"], device=dev)
            self.ref = lambda: ref.monarch(self.x, self.layer.w1, self.layer.w2)
        else:
            self.layer = ktune.nn.BlastLinear(n, m, blocks=s["blocks"], rank=s["rank"], device=dev)
            self.ref = lambda: ref.blast(self.x, self.layer.U, self.layer.V, self.layer.S)
        with torch.no_grad():                  # seeded weights, as the peers' are
            for p in self.layer.parameters():
                p.copy_(uni(*p.shape, scale=float(p.abs().max())))
            if hasattr(self.layer, "prepare"):
                self.layer.prepare()              # untimed, as the sweep's prep launches
        self.fn = lambda: self.layer(self.x)

    def verify(self):
        """{"verified", errors...}: the op's output (on poisoned memory)
        against the float64 reference."""
        import torch
        from ktune import reference as ref
        tol = TOL.get(self.fam, 1e-2)
        if self.fam.startswith("blockattn"):
            q64, k64, v64 = (t.double().requires_grad_() for t in (self.q, self.k, self.v))
            o64 = ref.block_attention(q64, k64, v64, self.cu, self.blk, self.tab, self.rope_v)
            torch.empty(self.q.numel() // 2 + 1, device="cuda").fill_(float("nan"))
            if self.fam == "blockattn_fwd":
                with torch.no_grad():
                    errs = {"rel_err": ref.rel_err(self.fn(), o64)}
            else:
                got = self.fn()
                want = torch.autograd.grad(o64, (q64, k64, v64), self.do.double())
                errs = {f"d{n}_rel_err": ref.rel_err(a, b) for n, a, b in zip("qkv", got, want)}
            del o64, q64, k64, v64
        else:
            with torch.inference_mode():
                torch.empty(self.x.shape[0] * self.layer.out_features // 2 + 1,
                            device="cuda").fill_(float("nan"))
                errs = {"rel_err": ref.rel_err(self.fn(), self.ref())}
        torch.cuda.synchronize()
        ok = all(e == e and e < tol for e in errs.values())  # NaN fails
        return dict(errs, verified=ok)

    def time(self):
        import torch
        if self.fam.startswith("blockattn"):
            return bench(self.fn)
        with torch.inference_mode():
            return bench(self.fn)


def stored_config(table, fam, shape):
    for e in table["entries"]:
        if e["family"] == fam and e["shape_key"] == shape:
            return e["config_key"]
    raise SystemExit(f"torch_rows: no entry for {fam} {shape} in the table")


def ktune_retime(kbin, wl, config, db, log):
    """The stored winner re-timed by ktune's own worker: its JSON summary."""
    cmd = [kbin, "sweep", "--workload", wl, "--config", config, "--no-baseline", "--json", "--db", db]
    p = subprocess.run(cmd, capture_output=True, text=True)
    log.write(f"$ {' '.join(cmd)}\n{p.stderr}\n")
    if p.returncode != 0:
        raise RuntimeError(f"{wl}: ktune sweep exit {p.returncode}: {p.stderr.strip()[-300:]}")
    s = json.loads(p.stdout)
    return s.get("sweeps", [s])[0]


def build_commit(kbin, given):
    out = subprocess.run([kbin, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"\(commit ([^ )]+)\)", out)
    built = m.group(1) if m else None
    if given and built and not (built.startswith(given) or given.startswith(built.replace("-dirty", ""))):
        raise SystemExit(f"torch_rows: --commit {given} is not {kbin}'s commit ({built})")
    return built or given or "unknown"


def run(a):
    import torch
    build = os.path.join(REPO, a.build)
    kbin = os.path.join(build, "ktune")
    os.environ.setdefault("KTUNE_LIB", os.path.join(build, "libktune.so"))
    sys.path.insert(0, os.path.join(REPO, "python"))
    import ktune
    commit = build_commit(kbin, a.commit)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rt = ktune.runtime()
    with open(rt.table_path) as f:
        table = json.load(f)
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "torch_rows.log"), "w")
    log.write(f"{rt!r}\ntorch {torch.__version__}, {torch.cuda.get_device_name()}\n")
    db = os.path.join("/tmp", f"ktune-torch-rows-{os.getpid()}.db")
    g = torch.Generator(device="cuda").manual_seed(0)
    run_tag = {"commit": commit, "date": date}
    device = torch.cuda.get_device_name()
    rows, rrows, status, t0 = [], [], 0, time.time()

    for wl in a.workloads:
        fam, shape = WORKLOADS[wl]
        cfg = stored_config(table, fam, shape)
        row = {"workload": wl, "impl": "ktune_torch", "run": run_tag,
               "timing": "triton.testing.do_bench(warmup=25, rep=200, median), L2 flushed"}
        try:
            k = ktune_retime(kbin, wl, cfg, db, log)
            p = Problem(fam, shape, g)
            ch = rt.choose(fam, p.choose_key)
            row.update(p.verify())
            row["us"] = p.time()
            row.update({"config": ch["config"], "match": ch["match"], "same_config": ch["config"] == cfg,
                        "ktune_us": k["us"], "ktune_verified": bool(k.get("verified")),
                        "ktune_config": cfg})
            row["vs_ktune"] = round(row["us"] / k["us"], 4) if k.get("us") else None
            row["bar_1_05"] = bool(row["vs_ktune"] and row["vs_ktune"] <= 1.05)
            del p
        except Exception as e:  # reported, never faked
            row.update({"verified": False, "error": re.sub(r"\s+", " ", str(e))[:300]})
        if not row.get("verified") or not row.get("ktune_verified"):
            status = 1
        elif not row["bar_1_05"] and status == 0:
            status = 3
        rows.append(row)
        torch.cuda.empty_cache()
        log.write(json.dumps(row) + "\n")
        log.flush()

    c_rows, shapes = {}, RUNTIME_SHAPES
    if a.c_rows:
        # bench/runtime.sh's OUT/runtime.json of this call: its "c" rows'
        # shapes are the ones to time, their sweep_us the budgeted sweeps'
        with open(a.c_rows) as f:
            d = json.load(f)
        c_rows = {(r["family"], r["shape"]): r for r in d["rows"] if r.get("via") == "c"}
        shapes = list(c_rows)
        print(f"torch_rows: {len(shapes)} shapes and their sweep_us from {a.c_rows}", file=sys.stderr)
    for fam, shape in (shapes if not a.no_runtime else []):
        row = {"family": fam, "shape": shape, "via": "torch", "run": run_tag, "device": device}
        try:
            p = Problem(fam, shape, g)
            ch = rt.choose(fam, p.choose_key)
            # tuned: a shape of the table (on any GPU of the arch), as the C rows count it
            row.update({"tuned": any(e["family"] == fam and e["shape_key"] == shape
                                     for e in table["entries"]),
                        "match": ch["match"], "config": ch["config"]})
            row.update(p.verify())
            row["us"] = p.time()
            del p
        except Exception as e:
            row.update({"tuned": None, "verified": False, "error": re.sub(r"\s+", " ", str(e))[:300]})
            status = 1
        cr = c_rows.get((fam, shape), {})
        row["sweep_us"] = cr.get("sweep_us")
        if cr.get("sweep_config"):
            row["sweep_config"] = cr["sweep_config"]
        row["ratio"] = row["us"] / row["sweep_us"] if row.get("sweep_us") and row.get("us") else None
        # the bar for a shape never tuned: within 1.2 x the sweep's winner
        if row.get("tuned") is False and row["ratio"] is not None and row["ratio"] > 1.2:
            status = status or 3
        if not row["verified"]:
            status = 1
        rrows.append(row)
        torch.cuda.empty_cache()
        log.write(json.dumps(row) + "\n")
        log.flush()

    doc = {"commit": commit, "date": date, "device": device,
           "wall_s": round(time.time() - t0, 1), "rows": rows, "runtime_rows": rrows}
    with open(os.path.join(a.out, "torch_rows.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{'workload':30s} {'torch us':>9s} {'ktune us':>9s} {'ratio':>6s} {'bar':>4s} "
          f"{'verified':>8s} {'same cfg':>8s}")
    for r in rows:
        print(f"{r['workload']:30s} {r.get('us', 0):9.2f} {r.get('ktune_us', 0):9.2f} "
              f"{r.get('vs_ktune') or 0:6.3f} {'ok' if r.get('bar_1_05') else 'MISS':>4s} "
              f"{str(r.get('verified')):>8s} {str(r.get('same_config')):>8s} {r.get('error', '')}")
    print(f"\n{'family':14s} {'shape':52s} {'tuned':>5s} {'us':>9s} {'sweep_us':>9s} {'ratio':>6s} "
          f"verified match")
    for r in rrows:
        sw = f"{r['sweep_us']:9.2f}" if r.get("sweep_us") else f"{'-':>9s}"
        ra = f"{r['ratio']:6.3f}" if r.get("ratio") else f"{'-':>6s}"
        print(f"{r['family']:14s} {r['shape']:52s} {str(r.get('tuned')):>5s} "
              f"{r.get('us', 0):9.2f} {sw} {ra} {str(r.get('verified')):>8s} {r.get('match', '')} "
              f"{r.get('error', '')}")
    print(f"torch_rows: {doc['wall_s']} s, exit {status}")
    return status


# ---- merge -----------------------------------------------------------------

def merge(a):
    with open(a.rows) as f:
        doc = json.load(f)
    if os.path.exists(a.h200):
        with open(a.h200) as f:
            h = json.load(f)
    else:  # a results file of another GPU, begun by these rows
        h = {"device": doc["device"], "date": doc["date"], "commit": doc["commit"], "rows": [],
             "runs": []}
    if h.get("device") and h["device"] != doc["device"]:
        raise SystemExit(f"torch_rows: rows timed on {doc['device']} do not go into {a.h200} "
                         f"({h['device']}): give --h200 a results file of that GPU")
    mine = {(r["workload"], r["impl"]) for r in doc["rows"]}
    h["rows"] = [r for r in h["rows"] if (r["workload"], r["impl"]) not in mine] + doc["rows"]
    if "runs" in h and mine:
        h["runs"] = [r for r in h["runs"] if not (r["commit"] == doc["commit"] and r["date"] == doc["date"])]
        h["runs"].insert(0, {"commit": doc["commit"], "date": doc["date"],
                             "workloads": sorted(w for w, _ in mine), "impls": ["ktune_torch"]})
    if mine:
        with open(a.h200, "w") as f:
            json.dump(h, f, indent=1)
    if os.path.exists(a.runtime):
        with open(a.runtime) as f:
            rt = json.load(f)
    else:
        rt = {"rows": []}
    key = lambda r: (r["family"], r["shape"], r["via"], r.get("device"))  # noqa: E731
    new = {key(r) for r in doc["runtime_rows"]}
    rt["rows"] = [r for r in rt["rows"] if key(r) not in new] + doc["runtime_rows"]
    with open(a.runtime, "w") as f:
        json.dump(rt, f, indent=1)
    print(f"torch_rows: {len(mine)} rows into {a.h200}, {len(new)} into {a.runtime}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--build", default="build-dev")
    r.add_argument("--commit")
    r.add_argument("--c-rows", help="the C side's runtime rows of the same call (sweep_us)")
    r.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    r.add_argument("--no-runtime", action="store_true", help="skip the runtime.json rows")
    m = sub.add_parser("merge")
    m.add_argument("rows")
    m.add_argument("--h200", default=os.path.join(REPO, "bench", "results", "h200.json"))
    m.add_argument("--runtime", default=os.path.join(REPO, "bench", "results", "runtime.json"))
    a = ap.parse_args()
    return run(a) if a.cmd == "run" else merge(a)


if __name__ == "__main__":
    sys.exit(main())
