"""Plain PyTorch forms of what ktune's kernels compute, in the canonical
layouts (docs/kernels.md, kernels/*.c): what the tests and bench/torch_rows.py
check ktune's ops against, and what a user can read to see the math. They
compute in `dtype` (float64 by default) and are slow on purpose: obvious
code, no fusion."""
import math

import torch


def rope_table(cu_seqlens, head_dim, tokens=None):
    """The (T, head_dim) bf16 rotary table of kernels/blockattn.h for the
    sequences of cu_seqlens: row t holds (cos, sin) of p * theta_i at
    columns 2i, 2i + 1, p the position of token t within its sequence and
    theta_i = 10000^(-2i / head_dim); rounded as the C generator rounds
    (double -> float -> bf16). Built on cu_seqlens' device; `tokens` (T)
    saves reading cu_seqlens[-1] back to the host."""
    if tokens is None:
        tokens = int(cu_seqlens[-1])
    dev = cu_seqlens.device
    t = torch.arange(tokens, device=dev, dtype=torch.int64)
    cu = cu_seqlens.to(torch.int64)
    seq = torch.searchsorted(cu[1:], t, right=True)
    pos = (t - cu[seq]).double()
    theta = 10000.0 ** (-2.0 * torch.arange(head_dim // 2, device=dev, dtype=torch.float64) / head_dim)
    ang = pos[:, None] * theta[None, :]
    tab = torch.stack((torch.cos(ang), torch.sin(ang)), dim=-1).reshape(tokens, head_dim)
    return tab.float().bfloat16()


def rotate(x, table, conj=False):
    """x (T, H, d) rotated by table (T, d) pairwise (kernels/blockattn.c's
    ba_rotate); conj: the inverse rotation."""
    T, H, d = x.shape
    c = table[:, 0::2].to(x.dtype)[:, None, :]
    s = table[:, 1::2].to(x.dtype)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    if conj:
        y0, y1 = x0 * c + x1 * s, x1 * c - x0 * s
    else:
        y0, y1 = x0 * c - x1 * s, x0 * s + x1 * c
    return torch.stack((y0, y1), dim=-1).reshape(T, H, d)


def _blocks(cu_seqlens, block, device):
    cu = [int(c) for c in cu_seqlens.tolist()]
    starts, lens = [], []
    for s in range(len(cu) - 1):
        for t in range(cu[s], cu[s + 1], block):
            starts.append(t)
            lens.append(min(block, cu[s + 1] - t))
    return (torch.tensor(starts, dtype=torch.int64, device=device),
            torch.tensor(lens, dtype=torch.int64, device=device))


def block_attention(q, k, v, cu_seqlens, block=64, rope=None, rope_v=False, dtype=torch.float64):
    """o (T, H, d) in `dtype`: each token attends, per head, to the keys of
    its own block of `block` tokens within its sequence (the last block of
    a sequence may be short), scale 1/sqrt(d), no mask inside a block. With
    rope, q and k (and v with rope_v) are rotated first. Differentiable
    (autograd in `dtype`)."""
    T, H, d = q.shape
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    if rope is not None:
        q, k = rotate(q, rope), rotate(k, rope)
        if rope_v:
            v = rotate(v, rope)
    starts, lens = _blocks(cu_seqlens, block, q.device)
    if starts.numel() == 0:
        return torch.zeros_like(q)
    ar = torch.arange(block, device=q.device)
    valid = ar[None, :] < lens[:, None]                                   # (nb, blk)
    idx = torch.where(valid, starts[:, None] + ar[None, :], torch.zeros_like(starts)[:, None])
    qb, kb, vb = q[idx], k[idx], v[idx]                                   # (nb, blk, H, d)
    s = torch.einsum("bihd,bjhd->bhij", qb, kb) / math.sqrt(d)
    s = s.masked_fill(~valid[:, None, None, :], float("-inf"))
    ob = torch.einsum("bhij,bjhd->bihd", torch.softmax(s, dim=-1), vb)  # (nb, blk, H, d)
    o = torch.zeros_like(q)
    return o.index_put((idx[valid],), ob[valid])


def dense(x, W, dtype=torch.float64):
    """y = x W^T, W (out, in)."""
    return x.to(dtype) @ W.to(dtype).t()


def lowrank(x, V, U, dtype=torch.float64):
    """y = (x V^T) U^T, V (rank, in), U (out, rank)."""
    return (x.to(dtype) @ V.to(dtype).t()) @ U.to(dtype).t()


def monarch(x, w1, w2, dtype=torch.float64):
    """docs/kernels.md's Monarch, w1 (b, r, in/b), w2 (b, out/b, r): stage 1 per
    input block, the middle permutation (block i gathers the columns c of
    every z[j] with c mod b = i), stage 2, the interleaving output
    permutation (column s of block i -> s*b + i)."""
    N, n = x.shape
    b, r, _ = w1.shape
    m = w2.shape[0] * w2.shape[1]
    x, w1, w2 = x.to(dtype), w1.to(dtype), w2.to(dtype)
    z = torch.bmm(x.view(N, b, n // b).transpose(0, 1), w1.transpose(1, 2))   # (b_j, N, r)
    g = z.view(b, N, r // b, b).permute(3, 1, 0, 2).reshape(b, N, r)         # (b_i, N, r)
    y = torch.bmm(g, w2.transpose(1, 2))                                      # (b_i, N, m/b)
    return y.permute(1, 2, 0).reshape(N, m)


def blast(x, U, V, S, dtype=torch.float64):
    """docs/kernels.md's BLAST, U (b, out/b, r), V (b, r, in/b), S (b, b, r):
    block (i, j) of W is U_i diag(S[i, j]) V_j."""
    N, n = x.shape
    b = V.shape[0]
    m = U.shape[0] * U.shape[1]
    x, U, V, S = x.to(dtype), U.to(dtype), V.to(dtype), S.to(dtype)
    z = torch.bmm(x.view(N, b, n // b).transpose(0, 1), V.transpose(1, 2))    # (b_j, N, r)
    w = torch.einsum("ijr,jnr->inr", S, z)                                    # (b_i, N, r)
    y = torch.bmm(w, U.transpose(1, 2))                                       # (b_i, N, m/b)
    return y.transpose(0, 1).reshape(N, m)


def rel_err(x, ref):
    """|x - ref| / |ref| (L2 over all elements), in float64."""
    ref = ref.double()
    return float(torch.linalg.vector_norm(x.double() - ref) / torch.linalg.vector_norm(ref))
