#!/usr/bin/env python3
"""peers_attn.py -- the peers of the jagged block-attention workloads (docs/benchmarks.md).

Usage: peers_attn.py OUT.json [--seqs 1152] [--lmax 256] [--heads 4] [--head-dim 128]
                     [--block 64] [--inputs DIR] [--ktune KTUNE.json]

Lengths: the generator of kernels/blockattn.h (SplitMix64 seeded 0, lengths
uniform in [max(1, 2*lmax//5), lmax]), so FA2 and ktune run on identical
lengths: a torch.Generator would give T ~ 2e5 at lmax 256 too, but only a
generator written in C and Python alike can be shared.

Peers, each timed with triton.testing.do_bench(warmup=25, rep=200,
return_mode="median"):
  fa2_varlen    torch.nn.attention.varlen.varlen_attn(q, k, v, cu, cu, BLK, BLK)
                with cu holding every block boundary (FlashAttention-2 on exactly
                the block-diagonal problem); backward through torch.autograd.grad.
                Its backward row carries dq_rel_err = |dq - dq64| / |dq64| (and
                dk_rel_err, dv_rel_err alike) against a float64 reference on the
                same inputs, and "inputs": "ktune_dump" (--inputs) or "generated".
  unfused_rope  ktune's plain backward (from --ktune, measured in the same run)
                plus the conjugate rotation of dq and dk as ONE fused Triton
                kernel (both tensors, the bf16 cos/sin table of
                kernels/blockattn.h, fp32 math): the pipeline a user gets
                without a fused backward. Its row says "rotation": "triton".
  unfused_rope_eager  the same with the rotation as eager PyTorch ops, kept
                as a second row to show what the fused rotation saves.
With --inputs DIR (written by tests/test_blockattn with KTUNE_BLOCKATTN_DUMP)
the inputs are ktune's own q, k, v, do, and DIR/dq_ktune.bf16, if present,
gets its dq_rel_err against the same float64 reference (a ktune_dq_check
row; its "config" is DIR/dq_config.txt, the config key of that dq, when
present: KTUNE_BLOCKATTN_DUMP_CONFIG=KEY dumps the gradients of one given
config), and DIR/dk_ktune.bf16, dv_ktune.bf16 their dk_rel_err, dv_rel_err.
DIR/shape.txt, when present, is the shape key of the dump and must be this
run's (seqs, lmax, heads, head_dim, block; rope 0): the offsets do not tell
the block, so a block-64 dump given to --block 128 would be compared with the
wrong reference. KTUNE_BLOCKATTN_DUMP_BLOCK=128 dumps at block 128
(ads_d128_L256_b128, the workload this script names at --block 128).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import triton
import triton.language as tl
import triton.testing

M64 = (1 << 64) - 1


def splitmix64_at(i):
    """Output i (from 0) of SplitMix64 seeded 0: kernels/blockattn.c's generator."""
    x = ((i + 1) * 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def lengths(seqs, lmax):
    lo = max(1, 2 * lmax // 5)
    return [lo + splitmix64_at(i) % (lmax - lo + 1) for i in range(seqs)]


@triton.jit
def _bf16_pair(w):
    """The two bf16 halves of int32 words w (low, high) as fp32."""
    lo = (w & 0xFFFF).to(tl.uint16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    hi = ((w >> 16) & 0xFFFF).to(tl.uint16).to(tl.bfloat16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pack_pair(lo, hi):
    """fp32 (lo, hi) rounded to bf16 and packed into int32 words."""
    a = lo.to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.int32)
    b = hi.to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.int32)
    return a | (b << 16)


@triton.jit
def _rope_conj_kernel(dq, dk, tab, oq, ok, npairs, HP, DP: tl.constexpr, BLOCK: tl.constexpr):
    """Pair p = (t * H + h) * DP + i of (T, H, D) dq and dk, each column pair
    (2i, 2i + 1) read as one int32 word (y0 low, y1 high), becomes
    (y0 c + y1 s, y1 c - y0 s), with (c, s) = tab's word t * DP + i; fp32
    math, bf16 out. One word per pair keeps every load and store coalesced."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = p < npairs
    c, s = _bf16_pair(tl.load(tab + (p // HP) * DP + p % DP, mask=m, other=0))
    y0, y1 = _bf16_pair(tl.load(dq + p, mask=m, other=0))
    tl.store(oq + p, _pack_pair(y0 * c + y1 * s, y1 * c - y0 * s), mask=m)
    y0, y1 = _bf16_pair(tl.load(dk + p, mask=m, other=0))
    tl.store(ok + p, _pack_pair(y0 * c + y1 * s, y1 * c - y0 * s), mask=m)


def rope_conj_triton(dq, dk, tab, oq, ok, block=1024):
    """The conjugate rotation of dq and dk (T, H, d) in one launch."""
    T, H, d = dq.shape
    n = T * H * d // 2

    def words(x):
        return x.view(torch.int32).reshape(-1)
    _rope_conj_kernel[(triton.cdiv(n, block),)](
        words(dq), words(dk), words(tab), words(oq), words(ok), n, H * (d // 2),
        DP=d // 2, BLOCK=block, num_warps=4)


def bench(fn):
    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")) * 1e3


def block_index(offsets, blk, device):
    """(starts, lens) of every BLK-block, sequences in order."""
    starts, lens = [], []
    for s in range(len(offsets) - 1):
        for t in range(offsets[s], offsets[s + 1], blk):
            starts.append(t)
            lens.append(min(blk, offsets[s + 1] - t))
    return (torch.tensor(starts, device=device, dtype=torch.int64),
            torch.tensor(lens, device=device, dtype=torch.int64))


def reference64(q, k, v, do, starts, lens, blk, chunk_bytes=1 << 30):
    """dq, dk, dv of block-diagonal attention in float64 (autograd through a
    padded per-block formulation; padded keys masked, padded rows dropped),
    a chunk of blocks at a time (each chunk's S in float64 about chunk_bytes:
    at lmax 1024 and block 256 the whole problem's would not fit an H100).
    Every token lies in exactly one block, so each chunk's rows are its own."""
    T, H, d = q.shape
    ar = torch.arange(blk, device=q.device)
    grads = [torch.zeros(T, H, d, dtype=torch.float64, device=q.device) for _ in range(3)]
    step = max(1, chunk_bytes // (H * blk * blk * 8))
    for b0 in range(0, starts.numel(), step):
        st, ln = starts[b0:b0 + step], lens[b0:b0 + step]
        idx = st[:, None] + ar[None, :]                     # (nb, blk)
        valid = ar[None, :] < ln[:, None]                   # (nb, blk)
        idx = torch.where(valid, idx, torch.zeros_like(idx))
        qb, kb, vb = (x[idx].double().requires_grad_() for x in (q, k, v))   # (nb, blk, H, d)
        s = torch.einsum("bihd,bjhd->bhij", qb, kb) / math.sqrt(d)
        s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
        o = torch.einsum("bhij,bjhd->bihd", torch.softmax(s, dim=-1), vb)
        dob = do[idx].double() * valid[:, :, None, None]
        for g, gb in zip(grads, torch.autograd.grad(o, (qb, kb, vb), dob)):
            g[idx[valid]] = gb[valid]
    return grads


def rel_err(x, ref):
    return float(torch.linalg.vector_norm(x.double() - ref) / torch.linalg.vector_norm(ref))


def load_bf16(path, shape, device):
    a = np.fromfile(path, dtype=np.int16)
    return torch.from_numpy(a).view(torch.bfloat16).reshape(shape).to(device)


def dump_shape_mismatch(text, want):
    """The first difference between a dump's shape key (DIR/shape.txt, e.g.
    "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0") and want
    (name -> int), as a sentence; None when they agree."""
    got = {}
    for kv in text.strip().split(","):
        n, _, v = kv.partition("=")
        got[n.strip()] = v.strip()
    for n, v in want.items():
        if got.get(n) != str(v):
            return f"{n}={got.get(n, '(none)')} in the dump, {n}={v} here"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seqs", type=int, default=1152)
    ap.add_argument("--lmax", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--inputs")
    ap.add_argument("--ktune")
    a = ap.parse_args()
    dev = "cuda"
    B, H, d, blk = a.seqs, a.heads, a.head_dim, a.block
    lens_ = lengths(B, a.lmax)
    offsets = [0]
    for n in lens_:
        offsets.append(offsets[-1] + n)
    T = offsets[-1]
    wl = f"ads_d{d}_L{a.lmax}" + (f"_b{blk}" if blk != 64 else "")
    print(f"peers_attn: B={B} H={H} d={d} BLK={blk} lmax={a.lmax}: T={T}", file=sys.stderr)

    if a.inputs:
        shape_path = os.path.join(a.inputs, "shape.txt")
        if os.path.exists(shape_path):
            with open(shape_path) as f:
                why = dump_shape_mismatch(f.read(), {"seqs": B, "lmax": a.lmax, "heads": H,
                                                     "head_dim": d, "block": blk, "rope": 0})
            if why:
                sys.exit(f"peers_attn: {shape_path} is not this run's shape ({why})")
        off_file = np.fromfile(os.path.join(a.inputs, "offsets.i32"), dtype=np.int32)
        if off_file.tolist() != offsets:
            sys.exit("peers_attn: the dumped offsets differ from the generator's")
        q, k, v, do = (load_bf16(os.path.join(a.inputs, n + ".bf16"), (T, H, d), dev)
                       for n in ("q", "k", "v", "do"))
    else:
        g = torch.Generator(device=dev).manual_seed(0)

        def uni(scale):
            return ((torch.rand(T, H, d, device=dev, generator=g) * 2 - 1) * scale).bfloat16()
        q, k, v, do = uni(2.0), uni(2.0), uni(1.0), uni(1.0)

    rows = []
    starts, blens = block_index(offsets, blk, dev)
    cu = torch.cat([starts, torch.tensor([T], device=dev)]).to(torch.int32)
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as e:
        varlen_attn = None
        print(f"peers_attn: fa2_varlen skipped: {e}", file=sys.stderr)

    g64 = reference64(q, k, v, do, starts, blens, blk)
    if varlen_attn is not None:
        rows.append({"workload": f"blockattn_fwd:{wl}", "impl": "fa2_varlen",
                     "us": bench(lambda: varlen_attn(q, k, v, cu, cu, blk, blk))})
        qg, kg, vg = (x.detach().clone().requires_grad_() for x in (q, k, v))
        o = varlen_attn(qg, kg, vg, cu, cu, blk, blk)
        grads = torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
        rows.append({"workload": f"blockattn_bwd:{wl}", "impl": "fa2_varlen",
                     "us": bench(lambda: torch.autograd.grad(o, (qg, kg, vg), do,
                                                             retain_graph=True)),
                     **{f"d{n}_rel_err": rel_err(grads[i], g64[i]) for i, n in enumerate("qkv")},
                     # whose q, k, v, do the errors were measured on: ktune's
                     # dump (comparable with ktune's own errors) or this script's
                     "inputs": "ktune_dump" if a.inputs else "generated"})
    if a.inputs and os.path.exists(os.path.join(a.inputs, "dq_ktune.bf16")):
        dqk = load_bf16(os.path.join(a.inputs, "dq_ktune.bf16"), (T, H, d), dev)
        row = {"workload": f"blockattn_bwd:{wl}", "impl": "ktune_dq_check",
               "dq_rel_err": rel_err(dqk, g64[0])}
        for i, n in ((1, "dk"), (2, "dv")):
            path = os.path.join(a.inputs, f"{n}_ktune.bf16")
            if os.path.exists(path):
                row[f"{n}_rel_err"] = rel_err(load_bf16(path, (T, H, d), dev), g64[i])
        cfg_path = os.path.join(a.inputs, "dq_config.txt")
        if os.path.exists(cfg_path):
            with open(cfg_path) as f:
                row["config"] = f.read().strip()
        rows.append(row)

    # unfused_rope: ktune's plain backward, then the conjugate rotation of dq
    # and dk. The table is kernels/blockattn.h's: bf16 (T, d), cos and sin of
    # pair i at 2i, 2i + 1, by position within the sequence.
    pos = torch.cat([torch.arange(n, device=dev) for n in lens_]).double()
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=dev).double() / d)
    ang = pos[:, None] * theta[None, :]
    tab = torch.stack((torch.cos(ang), torch.sin(ang)), dim=-1).reshape(T, d).bfloat16()
    cos = tab[:, 0::2][:, None, :]
    sin = tab[:, 1::2][:, None, :]
    dq, dk = q.clone(), k.clone()

    def conj(dy):
        y = dy.view(T, H, d // 2, 2)
        y0, y1 = y[..., 0], y[..., 1]
        return torch.stack((y0 * cos + y1 * sin, y1 * cos - y0 * sin), dim=-1).view(T, H, d)
    oq, ok = torch.empty_like(dq), torch.empty_like(dk)
    rope_conj_triton(dq, dk, tab, oq, ok)
    # the fused rotation must compute what the eager one does (fp32 vs bf16
    # products: a few bf16 ulps apart)
    tri_err = max(rel_err(oq, conj(dq).double()), rel_err(ok, conj(dk).double()))
    if not tri_err < 1e-2:
        sys.exit(f"peers_attn: the Triton rotation disagrees with the eager one ({tri_err:.2e})")
    rope_us = bench(lambda: rope_conj_triton(dq, dk, tab, oq, ok))
    eager_us = bench(lambda: (conj(dq), conj(dk)))
    ktune_bwd = None
    if a.ktune and os.path.exists(a.ktune):
        with open(a.ktune) as f:
            for r in json.load(f):
                if r.get("workload") == f"blockattn_bwd:{wl}" and r.get("impl") == "ktune":
                    ktune_bwd = r["us"]
    if ktune_bwd is not None:
        rows.append({"workload": f"blockattn_bwd_rope:{wl}", "impl": "unfused_rope",
                     "us": ktune_bwd + rope_us, "bwd_us": ktune_bwd, "rope_us": rope_us,
                     "rotation": "triton", "rotation_rel_err_vs_eager": tri_err})
        rows.append({"workload": f"blockattn_bwd_rope:{wl}", "impl": "unfused_rope_eager",
                     "us": ktune_bwd + eager_us, "bwd_us": ktune_bwd, "rope_us": eager_us,
                     "rotation": "eager"})
    else:
        rows.append({"workload": f"blockattn_bwd_rope:{wl}", "impl": "rope_conj_only",
                     "us": rope_us, "rotation": "triton"})

    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
    for r in rows:
        us = f"{r['us']:9.1f} us" if "us" in r else " " * 12
        extra = "".join(f"  {n}_rel_err {r[n + '_rel_err']:.2e}" for n in ("dq", "dk", "dv")
                        if n + "_rel_err" in r)
        extra += f"  {r['config']}" if "config" in r else ""
        print(f"{r['workload']:36s} {r['impl']:16s} {us}{extra}")


if __name__ == "__main__":
    main()
