"""GPU tests of the ktune package: every family through its torch op against
a float64 PyTorch reference (ktune.reference), at the H200 table's tuned
shapes and at shapes never tuned; attention on 1,000 random lengths
(length 1 and lengths that are no multiple of the block among them), its
backward against float64 autograd; the current stream, CUDA-graph capture,
torch.compile, weights changed in place, and the README's example.

Skips without CUDA; KTUNE_REQUIRE_GPU=1 makes that a failure (conftest.py).
Run on the GPU machine from the repository root, e.g.
    KTUNE_LIB=build-dev/libktune.so KTUNE_REQUIRE_GPU=1 PYTHONPATH=python \\
        python3 -m pytest -q python/tests/test_gpu.py
"""
import math

import pytest
import torch

import ktune
from ktune import reference as ref
from ktune.reference import rel_err

pytestmark = pytest.mark.gpu
BF16 = torch.bfloat16
TOL_FWD = 1e-2     # the families' tolerance (kernels/*.c .tol)
TOL_BWD = 2e-2     # blockattn_bwd's


def uniform(g, *shape, scale=1.0):
    return ((torch.rand(*shape, device="cuda", generator=g) * 2 - 1) * scale).to(BF16)


def poison(nbytes):
    """Leaves a NaN-filled block in torch's cache, so that an output the op
    allocates next is likely to start as NaN: an element the kernel does
    not write then fails the comparison."""
    torch.empty(nbytes // 4 + 1, device="cuda").fill_(float("nan"))


@pytest.fixture(scope="module")
def g():
    return torch.Generator(device="cuda").manual_seed(1234)


# ---- linear families -----------------------------------------------------

TUNED = dict(tokens=1024, n=4096, m=4096, b=16, r=1024)   # data/h200-results.json


def linear_cases():
    out = []
    for fam in ("dense", "lowrank", "monarch", "blast"):
        out += [(fam, TUNED, "tuned"),
                (fam, dict(TUNED, tokens=777), "tokens=777"),
                (fam, dict(tokens=3000, n=2048, m=4096, b=16, r=512), "3000x2048->4096"),
                (fam, dict(tokens=1, n=4096, m=4096, b=16, r=1024), "tokens=1")]
    return out


def make_layer(fam, s):
    n, m, b, r = s["n"], s["m"], s["b"], s["r"]
    if fam == "dense":
        return ktune.nn.Linear(n, m, device="cuda")
    if fam == "lowrank":
        return ktune.nn.LowRankLinear(n, m, rank=r, device="cuda")
    if fam == "monarch":
        return ktune.nn.MonarchLinear(n, m, blocks=b, rank=r, device="cuda")
    return ktune.nn.BlastLinear(n, m, blocks=b, rank=r, device="cuda")


def layer_ref(fam, layer, x):
    if fam == "dense":
        return ref.dense(x, layer.weight)
    if fam == "lowrank":
        return ref.lowrank(x, layer.V, layer.U)
    if fam == "monarch":
        return ref.monarch(x, layer.w1, layer.w2)
    return ref.blast(x, layer.U, layer.V, layer.S)


@pytest.mark.parametrize("fam,s,label", linear_cases(),
                         ids=[f"{f}-{lbl}" for f, _, lbl in linear_cases()])
def test_linear_matches_reference(fam, s, label, g):
    torch.manual_seed(0)
    layer = make_layer(fam, s)
    x = uniform(g, s["tokens"], s["n"])
    with torch.inference_mode():
        poison(s["tokens"] * s["m"] * 2)
        y = layer(x)
        torch.cuda.synchronize()
    assert y.shape == (s["tokens"], s["m"]) and y.dtype == BF16
    err = rel_err(y, layer_ref(fam, layer, x))
    assert err < TOL_FWD, f"{fam} {label}: rel err {err:.3e}"


@pytest.mark.parametrize("fam", ["dense", "lowrank", "monarch", "blast"])
def test_module_eager_call_is_the_op(fam, g):
    """A module's eager call (the op's implementation without the
    dispatcher) gives what the registered op gives, and the
    dispatcher is taken where autograd or the profiler needs it."""
    from ktune import _ops
    s = dict(TUNED, tokens=256)
    layer = make_layer(fam, s)
    x = uniform(g, s["tokens"], s["n"])
    with torch.inference_mode():
        y = layer(x)
        weights = [p for p in layer.parameters()]
        extra = [layer.prepared] if hasattr(layer, "prepared") else []
        assert _ops._direct((x, *weights, *extra))
        want = getattr(torch.ops.ktune, fam)(x, *weights, *extra)
    assert rel_err(y, want) < 1e-3
    xg = x.clone().requires_grad_()
    assert not _ops._direct((xg,))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        assert not _ops._direct((x,))


@pytest.mark.parametrize("fam", ["monarch", "blast"])
def test_prepared_layout_follows_weight_changes(fam, g):
    s = dict(TUNED, tokens=256)
    layer = make_layer(fam, s)
    x = uniform(g, s["tokens"], s["n"])
    with torch.inference_mode():
        y0 = layer(x)
        p0 = layer.prepared
        first = next(iter(layer.parameters()))
        first.mul_(-0.5)                     # in place: the prepared form is stale
        y1 = layer(x)
    assert layer.prepared is not p0
    assert rel_err(y1, layer_ref(fam, layer, x)) < TOL_FWD
    assert rel_err(y1, y0) > 0.1


def warm_on_side_stream(fn):
    """torch's rule before capturing a graph: run it once on a side stream."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_ops_run_on_the_current_stream(g):
    """The input is written on a side stream only after a long sleep there;
    an op that ran on any other stream would read it before (NaN)."""
    layer = make_layer("blast", TUNED)
    x = uniform(g, 1024, 4096)
    lens = random_lengths(200, 300, 11)
    q, k, v, cu, T = attn_inputs(g, lens, 4, 128, grad=False)
    s = torch.cuda.Stream()
    with torch.inference_mode():
        layer(x)                             # warm: compiled and loaded
        ktune.block_attention(q, k, v, cu)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            x2 = torch.full_like(x, float("nan"))
            q2 = torch.full_like(q, float("nan"))
            torch.cuda._sleep(100_000_000)   # ~50 ms
            x2.copy_(x)
            q2.copy_(q)
            y = layer(x2)
            o = ktune.block_attention(q2, k, v, cu)
        s.synchronize()
    assert rel_err(y, layer_ref("blast", layer, x)) < TOL_FWD
    assert rel_err(o, ref.block_attention(q, k, v, cu, 64)) < TOL_FWD


@pytest.mark.parametrize("fam", ["dense", "lowrank", "monarch", "blast"])
def test_linear_cuda_graph_capture(fam, g):
    s = dict(TUNED, tokens=777)
    layer = make_layer(fam, s)
    x = uniform(g, s["tokens"], s["n"])
    with torch.inference_mode():
        warm_on_side_stream(lambda: layer(x))   # libktune warm: loaded before capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = layer(x)
        x.copy_(uniform(g, s["tokens"], s["n"]))
        graph.replay()
        torch.cuda.synchronize()
    assert rel_err(y, layer_ref(fam, layer, x)) < TOL_FWD


def test_linear_under_torch_compile(g):
    torch._dynamo.reset()
    layer = make_layer("monarch", dict(TUNED, tokens=512))
    x = uniform(g, 4, 128, 4096)
    with torch.inference_mode():
        layer.prepare()
        y = torch.compile(layer, fullgraph=True)(x)
    assert y.shape == (4, 128, 4096)
    assert rel_err(y.view(-1, 4096), layer_ref("monarch", layer, x.view(-1, 4096))) < TOL_FWD


# ---- attention -------------------------------------------------------------

M64 = (1 << 64) - 1


def splitmix_lengths(seqs, lmax):
    """kernels/blockattn.h's generator (SplitMix64 seeded 0)."""
    out, lo = [], max(1, 2 * lmax // 5)
    for i in range(seqs):
        x = ((i + 1) * 0x9E3779B97F4A7C15) & M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        out.append(lo + (x ^ (x >> 31)) % (lmax - lo + 1))
    return out


def random_lengths(n, lmax, seed):
    """n lengths in [1, lmax], with 1, block +- 1 and 2 * block + 1 among them."""
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, lmax + 1, (n,), generator=g).tolist()
    lens[:8] = [1, 1, 63, 65, 127, 129, 64, 2]
    return lens


def cu_of(lens):
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device="cuda")


def attn_inputs(g, lens, H, d, grad=True):
    T = sum(lens)
    q, k = uniform(g, T, H, d, scale=2.0), uniform(g, T, H, d, scale=2.0)
    v = uniform(g, T, H, d)
    if grad:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    return q, k, v, cu_of(lens), T


ATTN = [  # (label, lengths, heads, head_dim, block, rope)
    ("tuned-ads_d128_L256", lambda: splitmix_lengths(1152, 256), 4, 128, 64, 0),
    ("random1000-d128-b64", lambda: random_lengths(1000, 300, 1), 4, 128, 64, 0),
    ("random1000-d128-b64-rope1", lambda: random_lengths(1000, 300, 2), 4, 128, 64, 1),
    ("random1000-d128-b64-rope2", lambda: random_lengths(1000, 300, 3), 2, 128, 64, 2),
    ("random1000-d64-b64", lambda: random_lengths(1000, 200, 4), 4, 64, 64, 0),
    ("random1000-d128-b128", lambda: random_lengths(1000, 400, 5), 2, 128, 128, 0),
    ("random1000-d64-b128-rope1", lambda: random_lengths(1000, 400, 6), 2, 64, 128, 1),
    ("random1000-d128-b32-rope1", lambda: random_lengths(1000, 200, 7), 2, 128, 32, 1),
    ("random1000-d64-b32", lambda: random_lengths(1000, 200, 8), 4, 64, 32, 0),
    ("random300-d128-b256-rope1", lambda: random_lengths(300, 700, 9), 2, 128, 256, 1),
    ("random300-d64-b256", lambda: random_lengths(300, 700, 10), 2, 64, 256, 0),
]


@pytest.mark.parametrize("label,lens,H,d,block,rope", ATTN, ids=[a[0] for a in ATTN])
def test_attention_forward_and_backward(label, lens, H, d, block, rope, g):
    lens = lens()
    q, k, v, cu, T = attn_inputs(g, lens, H, d)
    tab = ktune.rope_table(cu, d, tokens=T) if rope else None
    poison(T * H * d * 2)
    o = ktune.block_attention(q, k, v, cu, block=block, rope=tab, rope_v=rope == 2,
                              max_seqlen=max(lens))
    do = uniform(g, T, H, d)
    poison(T * H * d * 2)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    torch.cuda.synchronize()

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o64 = ref.block_attention(q64, k64, v64, cu, block, tab, rope == 2)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    errs = {"o": rel_err(o, o64)}
    errs.update({n: rel_err(x, r) for n, x, r in zip(("dq", "dk", "dv"), (dq, dk, dv), g64)})
    assert errs["o"] < TOL_FWD, f"{label}: {errs}"
    assert max(errs["dq"], errs["dk"], errs["dv"]) < TOL_BWD, f"{label}: {errs}"
    # a length-1 sequence (the first of the random ones) attends to itself only
    if lens[0] == 1 and rope != 2:
        assert rel_err(o[0].detach(), v[0].detach()) < TOL_FWD


def test_attention_without_max_seqlen(g):
    lens = random_lengths(1000, 300, 7)
    q, k, v, cu, T = attn_inputs(g, lens, 4, 128, grad=False)
    o = ktune.block_attention(q, k, v, cu)
    assert rel_err(o, ref.block_attention(q, k, v, cu, 64)) < TOL_FWD


def test_attention_cuda_graph_capture(g):
    lens = random_lengths(500, 300, 8)
    q, k, v, cu, T = attn_inputs(g, lens, 4, 128)
    do = uniform(g, T, 4, 128)

    def step():
        o = ktune.block_attention(q, k, v, cu, max_seqlen=300)
        return (o,) + torch.autograd.grad(o, (q, k, v), do)
    warm_on_side_stream(step)                # forward and backward loaded before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = step()
    with torch.no_grad():
        q.copy_(uniform(g, T, 4, 128, scale=2.0))
    graph.replay()
    torch.cuda.synchronize()
    want = step()
    for a, b in zip(outs, want):
        assert torch.equal(a, b)


def test_attention_under_torch_compile(g):
    torch._dynamo.reset()
    lens = random_lengths(300, 300, 9)
    q, k, v, cu, T = attn_inputs(g, lens, 4, 128)

    def f(q, k, v):
        return ktune.block_attention(q, k, v, cu, max_seqlen=300).float().square().sum()
    loss = torch.compile(f, fullgraph=True)(q, k, v)
    loss.backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref.block_attention(q64, k64, v64, cu, 64).square().sum().backward()
    assert rel_err(q.grad, q64.grad) < TOL_BWD


def test_readme_example_runs():
    from test_cpu import readme_example
    scope = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)
    torch.cuda.synchronize()
    assert scope["y"].shape == (8, 128, 4096) and math.isfinite(float(scope["y"].float().sum()))
    assert scope["q"].grad is not None and torch.isfinite(scope["q"].grad.float()).all()


def test_opcheck(g):
    """torch.library.opcheck: schema, autograd registration, the fake
    implementations against the real ones, AOT dispatch with dynamic shapes."""
    lens = random_lengths(50, 200, 12)
    q, k, v, cu, T = attn_inputs(g, lens, 2, 128)
    torch.library.opcheck(torch.ops.ktune.block_attention.default, (q, k, v, cu, 64, None, False, 200))
    do = uniform(g, T, 2, 128)
    torch.library.opcheck(torch.ops.ktune.block_attention_bwd.default,
                          (do, q.detach(), k.detach(), v.detach(), cu, 64, None, False, 200))
    x = uniform(g, 100, 1024)
    lin = ktune.nn.Linear(1024, 512, device="cuda")
    torch.library.opcheck(torch.ops.ktune.dense.default, (x, lin.weight))
    lr = ktune.nn.LowRankLinear(1024, 512, rank=128, device="cuda")
    torch.library.opcheck(torch.ops.ktune.lowrank.default, (x, lr.V, lr.U))
    mo = ktune.nn.MonarchLinear(1024, 512, blocks=4, rank=128, device="cuda").prepare()
    torch.library.opcheck(torch.ops.ktune.monarch.default, (x, mo.w1, mo.w2, mo.prepared))
    bl = ktune.nn.BlastLinear(1024, 512, blocks=4, rank=128, device="cuda").prepare()
    torch.library.opcheck(torch.ops.ktune.blast.default, (x, bl.U, bl.V, bl.S, bl.prepared))
