#!/usr/bin/env python3
"""peers.py -- times the peers of the development suite (docs/benchmarks.md) on this GPU.

Usage: peers.py OUT.json WORKLOAD_ID...
Each peer is timed with triton.testing.do_bench(warmup=25, rep=200,
return_mode="median") on seeded random (never zero) inputs, in the same run
as ktune's sweeps. Workloads whose shape this script does not know are
skipped with a message, never faked.

Peers (docs/benchmarks.md): cublas_dense (x @ W.t(), the dense layer of the same in/out
features), torch_naive (the textbook structured layer in PyTorch eager, on
the canonical weight layouts of docs/kernels.md) and torch_compile (the same
function under torch.compile(); its compile time is not timed, a failing
compile is reported and the row left out; KTUNE_PEERS_COMPILE=0 leaves
torch_compile out, said on stderr, for a time-limited call).
"""
import json
import os
import re
import sys

import torch
import triton.testing


def bench(fn):
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3


# Workload ids of the suite (tuner/suite.c) -> family and shape.
SHAPES = {
    "dense:4096x4096:N1024": ("dense", dict(tokens=1024, n=4096, m=4096)),
    "lowrank:llama7b_qkvo:N1024": ("lowrank", dict(tokens=1024, n=4096, m=4096, r=1024)),
    "monarch:llama7b_qkvo:N1024": ("monarch", dict(tokens=1024, n=4096, m=4096, b=16, r=1024)),
    "blast:llama7b_qkvo:N1024": ("blast", dict(tokens=1024, n=4096, m=4096, b=16, r=1024)),
    "blast:llama7b_qkvo:N16384": ("blast", dict(tokens=16384, n=4096, m=4096, b=16, r=1024)),
    "blast:llama1b_qo:N1024": ("blast", dict(tokens=1024, n=2048, m=2048, b=16, r=256)),
}


def uniform(g, *shape, scale=1.0):
    return ((torch.rand(*shape, device="cuda", generator=g) * 2 - 1) * scale).bfloat16()


def monarch_naive(x, w1, w2):
    """docs/kernels.md's Monarch: w1 (b, r, n/b), w2 (b, m/b, r); explicit permutations."""
    N, n = x.shape
    b, r, _ = w1.shape
    m = w2.shape[0] * w2.shape[1]
    z = torch.bmm(x.view(N, b, n // b).transpose(0, 1), w1.transpose(1, 2))   # (b_j, N, r)
    # stage-2 block i gathers, from every z[j] in order of j, the columns c
    # with c mod b = i in order of c div b
    zg = z.view(b, N, r // b, b).permute(3, 1, 0, 2).reshape(b, N, r)         # (b_i, N, r)
    y = torch.bmm(zg, w2.transpose(1, 2))                                     # (b_i, N, m/b)
    return y.permute(1, 2, 0).reshape(N, m)          # column s of y[i] -> s*b + i


def blast_naive(x, U, V, S):
    """docs/kernels.md's BLAST: U (b, m/b, r), V (b, r, n/b), S (b, b, r)."""
    N, n = x.shape
    b = V.shape[0]
    m = U.shape[0] * U.shape[1]
    z = torch.bmm(x.view(N, b, n // b).transpose(0, 1), V.transpose(1, 2))    # (b_j, N, r)
    w = torch.einsum("ijr,jnr->inr", S, z)                                    # (b_i, N, r)
    y = torch.bmm(w, U.transpose(1, 2))                                       # (b_i, N, m/b)
    return y.transpose(0, 1).reshape(N, m)


def structured(fam, s, g):
    """(name, fn) of the torch_naive layer and its weights' inputs."""
    N, n, m = s["tokens"], s["n"], s["m"]
    x = uniform(g, N, n)
    if fam == "lowrank":
        r = s["r"]
        V, U = uniform(g, r, n, scale=n ** -0.5), uniform(g, m, r, scale=r ** -0.5)
        return lambda x_: (x_ @ V.t()) @ U.t(), x
    b, r = s["b"], s["r"]
    if fam == "monarch":
        w1 = uniform(g, b, r, n // b, scale=(n // b) ** -0.5)
        w2 = uniform(g, b, m // b, r, scale=r ** -0.5)
        return lambda x_: monarch_naive(x_, w1, w2), x
    U = uniform(g, b, m // b, r, scale=r ** -0.5)
    V = uniform(g, b, r, n // b, scale=(n // b) ** -0.5)
    S = uniform(g, b, b, r, scale=b ** -0.5)
    return lambda x_: blast_naive(x_, U, V, S), x


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    out_path, wids = sys.argv[1], sys.argv[2:]
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for wid in wids:
        if wid not in SHAPES:
            print(f"peers: {wid}: no peer recipe, skipped", file=sys.stderr)
            continue
        fam, s = SHAPES[wid]
        N, n, m = s["tokens"], s["n"], s["m"]
        x = uniform(g, N, n)
        W = uniform(g, m, n, scale=n ** -0.5)
        rows.append({"workload": wid, "impl": "cublas_dense", "us": bench(lambda: x @ W.t())})
        if fam == "dense":
            continue
        fn, xs = structured(fam, s, g)
        y = fn(xs)
        if not torch.isfinite(y).all() or float(y.float().abs().mean()) == 0.0:
            print(f"peers: {wid}: torch_naive gave a degenerate output, rows left out", file=sys.stderr)
            continue
        rows.append({"workload": wid, "impl": "torch_naive", "us": bench(lambda: fn(xs))})
        if fam == "lowrank":
            continue
        if os.environ.get("KTUNE_PEERS_COMPILE") == "0":
            print(f"peers: {wid}: torch_compile left out (KTUNE_PEERS_COMPILE=0)", file=sys.stderr)
            continue
        try:
            cf = torch.compile(fn)
            yc = cf(xs)
            err = float((yc.float() - y.float()).norm() / y.float().norm())
            if err > 2e-2:
                raise RuntimeError(f"compiled output differs from eager by {err:.3g}")
            rows.append({"workload": wid, "impl": "torch_compile", "us": bench(lambda: cf(xs))})
        except Exception as e:  # a peer that cannot run is reported, not faked
            msg = re.sub(r"\s+", " ", str(e))[:200]
            print(f"peers: {wid}: torch_compile failed: {msg}", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
    for r_ in rows:
        print(f"{r_['workload']:32s} {r_['impl']:14s} {r_['us']:9.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
