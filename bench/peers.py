#!/usr/bin/env python3
"""peers.py -- times the peers of the development suite (BENCH.md) on this GPU.

Usage: peers.py OUT.json WORKLOAD_ID...
Each peer is timed with triton.testing.do_bench(warmup=25, rep=200,
return_mode="median") on seeded random (never zero) inputs, in the same run
as ktune's sweeps. Workloads whose shape this script does not know are
skipped with a message, never faked.
"""
import json
import sys

import torch
import triton.testing


def bench(fn):
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3


def linear_shape(wid):
    shapes = {
        "dense:4096x4096:N1024": dict(tokens=1024, n=4096, m=4096, rank=0),
        "lowrank:llama7b_qkvo:N1024": dict(tokens=1024, n=4096, m=4096, rank=1024),
    }
    return shapes.get(wid)


def main():
    out_path, wids = sys.argv[1], sys.argv[2:]
    g = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for wid in wids:
        s = linear_shape(wid)
        if s is None:
            print(f"peers: {wid}: no peer recipe, skipped", file=sys.stderr)
            continue
        N, n, m, r = s["tokens"], s["n"], s["m"], s["rank"]
        x = (torch.rand(N, n, device="cuda", generator=g, dtype=torch.float32) * 2 - 1).bfloat16()
        W = ((torch.rand(m, n, device="cuda", generator=g) * 2 - 1) / n ** 0.5).bfloat16()
        rows.append({"workload": wid, "impl": "cublas_dense", "us": bench(lambda: x @ W.t())})
        if r:
            V = ((torch.rand(r, n, device="cuda", generator=g) * 2 - 1) / n ** 0.5).bfloat16()
            U = ((torch.rand(m, r, device="cuda", generator=g) * 2 - 1) / r ** 0.5).bfloat16()
            rows.append({"workload": wid, "impl": "torch_naive",
                         "us": bench(lambda: (x @ V.t()) @ U.t())})
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
    for r_ in rows:
        print(f"{r_['workload']:32s} {r_['impl']:14s} {r_['us']:9.2f} us")


if __name__ == "__main__":
    main()
