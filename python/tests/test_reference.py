"""ktune.reference (what the GPU tests and bench/torch_rows.py compare ktune
against) checked on the CPU against the math written out element by element
(docs/kernels.md, kernels/monarch.c, kernels/blast.c, kernels/blockattn.h), and
the generated attention lengths against the shipped table."""
import json
import math
import os
import sys

import pytest
import torch

from ktune import reference as ref

from conftest import REPO

D = torch.float64


def rnd(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=D)


def test_dense_and_lowrank():
    x, W, V, U = rnd(5, 8), rnd(6, 8, seed=1), rnd(3, 8, seed=2), rnd(6, 3, seed=3)
    y = ref.dense(x, W)
    assert torch.allclose(y[2, 4], sum(x[2, k] * W[4, k] for k in range(8)))
    assert torch.allclose(ref.lowrank(x, V, U), x @ (U @ V).t())


def test_monarch_is_kernels_monarch_c():
    """kernels/monarch.c: z[j] = x_j w1[j]^T; g[i][t][j*rp + q] = z[j][t][q*b + i];
    y2[i] = g[i] w2[i]^T; y[t][s*b + i] = y2[i][t][s]."""
    N, b, r, n, m = 3, 2, 4, 6, 10
    rp, nb, mb = r // b, n // b, m // b
    x, w1, w2 = rnd(N, n), rnd(b, r, nb, seed=1), rnd(b, mb, r, seed=2)
    z = [x[:, j * nb:(j + 1) * nb] @ w1[j].t() for j in range(b)]
    g = torch.zeros(b, N, r, dtype=D)
    for i in range(b):
        for j in range(b):
            for q in range(rp):
                g[i, :, j * rp + q] = z[j][:, q * b + i]
    y = torch.zeros(N, m, dtype=D)
    for i in range(b):
        y2 = g[i] @ w2[i].t()
        for s in range(mb):
            y[:, s * b + i] = y2[:, s]
    assert torch.allclose(ref.monarch(x, w1, w2), y)


def test_blast_is_its_dense_weight():
    """Block (i, j) of W is U_i diag(S[i, j]) V_j."""
    N, b, r, n, m = 4, 3, 5, 9, 12
    nb, mb = n // b, m // b
    x, U, V, S = rnd(N, n), rnd(b, mb, r, seed=1), rnd(b, r, nb, seed=2), rnd(b, b, r, seed=3)
    W = torch.zeros(m, n, dtype=D)
    for i in range(b):
        for j in range(b):
            W[i * mb:(i + 1) * mb, j * nb:(j + 1) * nb] = U[i] @ torch.diag(S[i, j]) @ V[j]
    assert torch.allclose(ref.blast(x, U, V, S), x @ W.t())


def test_rope_table_and_rotation():
    cu = torch.tensor([0, 3, 4, 9], dtype=torch.int32)
    d = 8
    tab = ref.rope_table(cu, d)
    assert tab.shape == (9, d) and tab.dtype == torch.bfloat16
    pos = [0, 1, 2, 0, 0, 1, 2, 3, 4]
    for t, p in enumerate(pos):
        for i in range(d // 2):
            th = p * 10000.0 ** (-2.0 * i / d)
            assert float(tab[t, 2 * i]) == float(torch.tensor(math.cos(th)).float().bfloat16())
            assert float(tab[t, 2 * i + 1]) == float(torch.tensor(math.sin(th)).float().bfloat16())
    assert torch.equal(ref.rope_table(cu, d, tokens=9), tab)
    x = rnd(9, 2, d)
    c, s = tab[:, 0::2].double(), tab[:, 1::2].double()
    y = ref.rotate(x, tab)
    assert torch.allclose(y[..., 0::2], x[..., 0::2] * c[:, None] - x[..., 1::2] * s[:, None])
    assert torch.allclose(y[..., 1::2], x[..., 0::2] * s[:, None] + x[..., 1::2] * c[:, None])
    back = ref.rotate(y, tab, conj=True)        # the transpose: (c^2 + s^2) x, c, s rounded
    assert torch.allclose(back, x * (c * c + s * s).repeat_interleave(2, dim=1)[:, None, :])


@pytest.mark.parametrize("rope,rope_v", [(False, False), (True, False), (True, True)])
def test_block_attention_is_the_loop(rope, rope_v):
    """Per sequence, per block of `block` tokens (the last one short), per
    head: softmax(q k^T / sqrt(d)) v, on the rotated q, k (and v)."""
    lens, H, d, blk = [1, 5, 4, 9], 2, 4, 4
    cu = torch.tensor([0, 1, 6, 10, 19], dtype=torch.int32)
    T = 19
    q, k, v = rnd(T, H, d), rnd(T, H, d, seed=1), rnd(T, H, d, seed=2)
    tab = ref.rope_table(cu, d) if rope else None
    qr, kr, vr = q, k, v
    if rope:
        qr, kr = ref.rotate(q, tab), ref.rotate(k, tab)
        vr = ref.rotate(v, tab) if rope_v else v
    want = torch.zeros(T, H, d, dtype=D)
    for s in range(len(lens)):
        for b0 in range(int(cu[s]), int(cu[s + 1]), blk):
            b1 = min(b0 + blk, int(cu[s + 1]))
            for h in range(H):
                p = torch.softmax(qr[b0:b1, h] @ kr[b0:b1, h].t() / math.sqrt(d), dim=-1)
                want[b0:b1, h] = p @ vr[b0:b1, h]
    got = ref.block_attention(q, k, v, cu, blk, tab, rope_v)
    assert torch.allclose(got, want)
    assert torch.allclose(got[0], vr[0])     # a sequence of one token sees itself only


def test_generated_lengths_match_the_tuned_problem():
    """The lengths test_gpu and bench/torch_rows.py build (kernels/blockattn.h's
    generator, bench/peers_attn.py's copy) give the shipped table's T."""
    sys.path.insert(0, os.path.join(REPO, "python", "tests"))
    from test_gpu import splitmix_lengths
    with open(os.path.join(REPO, "data", "h200-results.json")) as f:
        table = json.load(f)
    seen = 0
    for e in table["entries"]:
        if not e["family"].startswith("blockattn"):
            continue
        s = e["shape"]
        q = next(b for b in e["launch"]["buffers"] if b["name"] == "q")
        lens = splitmix_lengths(s["seqs"], s["lmax"])
        assert sum(lens) * s["heads"] * s["head_dim"] == q["elems"], e["shape_key"]
        assert max(lens) <= s["lmax"] and min(lens) >= max(1, 2 * s["lmax"] // 5)
        seen += 1
    assert seen >= 2
    sys.path.append(os.path.join(REPO, "bench"))
    import peers_attn   # numpy and triton: torch's wheel brings triton, ci.sh numpy
    assert peers_attn.lengths(1152, 256) == splitmix_lengths(1152, 256)
