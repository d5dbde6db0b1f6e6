#!/usr/bin/env python3
"""peaks.py -- measures the two ceilings kt_peaks_of (kernels/family.c) holds per device.

Usage: peaks.py [OUT.json]
- flops: the best bf16 rate cuBLAS (torch.mm) reaches over a few large square
  and skinny GEMMs, dense multiply-adds counted as 2 FLOPs;
- bytes: the best device-to-device copy rate (torch's copy_ of 1 and 2 GiB
  buffers), read plus written bytes.
Each figure is the median of triton.testing.do_bench(warmup=25, rep=200) per
case, best case kept; the SM clock is sampled before and after so a throttled
card is visible. Inputs are seeded random, never zero.
"""
import json
import subprocess
import sys

import torch
import triton.testing


def med_ms(fn):
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def clocks():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError as e:
        return f"nvidia-smi: {e}"


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    name = torch.cuda.get_device_name()
    out = {"device": name, "clocks_before": clocks(), "gemm": [], "copy": []}
    for m, n, k in [(8192, 8192, 8192), (16384, 8192, 8192), (4096, 4096, 4096),
                    (8192, 8192, 16384), (1024, 4096, 4096)]:
        a = (torch.rand(m, k, device="cuda", generator=g) - 0.5).bfloat16()
        b = (torch.rand(k, n, device="cuda", generator=g) - 0.5).bfloat16()
        ms = med_ms(lambda: torch.mm(a, b))
        out["gemm"].append({"m": m, "n": n, "k": k, "us": ms * 1e3, "tflops": 2 * m * n * k / ms / 1e9})
        del a, b
    for gib in (1, 2):
        x = torch.rand(gib << 28, device="cuda", generator=g)   # fp32: gib GiB
        y = torch.empty_like(x)
        ms = med_ms(lambda: y.copy_(x))
        out["copy"].append({"gib": gib, "us": ms * 1e3, "tbps": 2 * x.numel() * 4 / ms / 1e9})
        del x, y
    out["clocks_after"] = clocks()
    out["flops"] = max(r["tflops"] for r in out["gemm"]) * 1e12
    out["bytes"] = max(r["tbps"] for r in out["copy"]) * 1e12
    print(json.dumps(out, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1)
    print(f"{name}: {out['flops'] / 1e12:.0f} TFLOP/s bf16, {out['bytes'] / 1e12:.2f} TB/s copy")


if __name__ == "__main__":
    main()
