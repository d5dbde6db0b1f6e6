"""CPU tests of the ktune package (CI, no GPU): it imports, its ops trace
under torch.compile on meta and fake tensors with the right shapes, bad
arguments are clear Python errors, libktune and the table are found where
documented, and the ctypes signatures match include/ktune.h."""
import os
import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ktune
from ktune import _find, _lib

from conftest import REPO

BF16 = torch.bfloat16


# ---- import and install ---------------------------------------------------

def test_ops_registered():
    for name in ("block_attention", "block_attention_bwd", "dense", "lowrank", "monarch", "blast"):
        assert hasattr(torch.ops.ktune, name), name
    assert ktune.nn.BlastLinear and ktune.nn.MonarchLinear and ktune.nn.LowRankLinear
    assert ktune.nn.Linear


@pytest.mark.skipif(os.environ.get("KTUNE_TEST_INSTALLED") != "1",
                    reason="KTUNE_TEST_INSTALLED=1 (.ci/run) checks the installed package")
def test_installed_package_ships_the_table():
    pkg = os.path.dirname(ktune.__file__)
    assert not pkg.startswith(os.path.join(REPO, "python")), f"imported from the checkout: {pkg}"
    path, how = _find.table_path()
    assert how == "the shipped H200 table" and path == os.path.join(pkg, "data", "h200-results.json")
    with open(path) as f, open(os.path.join(REPO, "data", "h200-results.json")) as g:
        assert f.read() == g.read()


# ---- fake implementations under torch.compile -------------------------------

def attn_inputs(device, T=777, H=4, d=128, B=9, grad=True):
    q, k, v = (torch.empty(T, H, d, dtype=BF16, device=device, requires_grad=grad)
               for _ in range(3))
    cu = torch.empty(B + 1, dtype=torch.int32, device=device)
    return q, k, v, cu


@pytest.mark.parametrize("rope,rope_v", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("d,block", [(128, 64), (64, 128)])
def test_attention_compiles_on_meta(rope, rope_v, d, block):
    torch._dynamo.reset()
    q, k, v, cu = attn_inputs("meta", d=d)
    tab = torch.empty(q.shape[0], d, dtype=BF16, device="meta") if rope else None

    def f(q, k, v, cu, tab):
        o = ktune.block_attention(q, k, v, cu, block=block, rope=tab, rope_v=rope_v,
                                  max_seqlen=300)
        return o, o.float().square().sum()

    o, loss = torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v, cu, tab)
    assert o.shape == q.shape and o.dtype == BF16 and o.device.type == "meta"
    loss.backward()
    for t in (q, k, v):
        assert t.grad.shape == t.shape and t.grad.dtype == BF16


def test_attention_backward_op_fake_shapes():
    with FakeTensorMode():
        q, k, v, cu = attn_inputs("cuda", grad=False)
        dq, dk, dv = torch.ops.ktune.block_attention_bwd(q, q, k, v, cu, 64, None, False, 0)
        assert all(t.shape == q.shape and t.dtype == BF16 and t.device.type == "cuda"
                   for t in (dq, dk, dv))


def test_attention_dynamic_max_seqlen_traces():
    """max_seqlen changing between calls becomes symbolic; the fake still runs."""
    torch._dynamo.reset()
    q, k, v, cu = attn_inputs("meta", grad=False)
    f = torch.compile(lambda q, k, v, cu, n: ktune.block_attention(q, k, v, cu, max_seqlen=n),
                      backend="aot_eager")
    for n in (100, 200, 300):
        assert f(q, k, v, cu, n).shape == q.shape


LAYERS = [
    (lambda dev: ktune.nn.Linear(256, 512, device=dev), 256, 512),
    (lambda dev: ktune.nn.LowRankLinear(256, 512, rank=64, device=dev), 256, 512),
    (lambda dev: ktune.nn.MonarchLinear(256, 512, blocks=4, rank=64, device=dev), 256, 512),
    (lambda dev: ktune.nn.BlastLinear(256, 512, blocks=4, rank=64, device=dev), 256, 512),
]


@pytest.mark.parametrize("make,n,m", LAYERS)
def test_layers_compile_on_meta(make, n, m):
    torch._dynamo.reset()
    layer = make("meta")
    assert all(not p.requires_grad for p in layer.parameters())
    x = torch.empty(3, 259, n, dtype=BF16, device="meta")
    y = layer(x)                       # eager on meta: the fake implementation
    assert y.shape == (3, 259, m) and y.dtype == BF16
    y = torch.compile(layer, backend="aot_eager", fullgraph=True)(x)
    assert y.shape == (3, 259, m) and y.dtype == BF16 and y.device.type == "meta"


@pytest.mark.parametrize("make,n,m", LAYERS)
def test_layers_under_fake_cuda(make, n, m):
    with FakeTensorMode():
        layer = make("cuda")
        y = layer(torch.empty(777, n, dtype=BF16, device="cuda"))
        assert y.shape == (777, m) and y.dtype == BF16 and y.device.type == "cuda"


def test_layer_backward_is_refused_clearly():
    layer = ktune.nn.Linear(256, 512, device="meta")
    x = torch.empty(4, 256, dtype=BF16, device="meta", requires_grad=True)
    y = layer(x)
    with pytest.raises(RuntimeError, match="inference-only"):
        y.float().sum().backward()


def test_compiled_module_needs_prepare_once():
    """Under torch.compile the prepared layout is what prepare() made; a
    whole-graph compile of an unprepared module says so."""
    torch._dynamo.reset()
    layer = ktune.nn.MonarchLinear(256, 256, blocks=4, rank=64, device="meta")
    x = torch.empty(8, 256, dtype=BF16, device="meta")
    with pytest.raises(Exception, match=r"call \.prepare\(\) before torch.compile"):
        torch.compile(layer, backend="aot_eager", fullgraph=True)(x)
    layer.prepare()
    assert layer.prepared is not None
    assert torch.compile(layer, backend="aot_eager", fullgraph=True)(x).shape == (8, 256)


# ---- argument checks ------------------------------------------------------

def _attn(**kw):
    q, k, v, cu = attn_inputs("meta", grad=False)
    args = dict(q=q, k=k, v=v, cu_seqlens=cu)
    args.update(kw)
    return lambda: ktune.block_attention(**args)


T, H, D = 777, 4, 128
BAD_ATTENTION = [
    (dict(q=torch.empty(T, H, D, dtype=torch.float16, device="meta")), TypeError, "q must be torch.bfloat16"),
    (dict(v=torch.empty(T, H, D, dtype=torch.float32, device="meta")), TypeError, "v must be torch.bfloat16"),
    (dict(q=torch.empty(H, T, D, dtype=BF16, device="meta").transpose(0, 1)), ValueError, "q must be contiguous"),
    (dict(k=torch.empty(T, H, 2 * D, dtype=BF16, device="meta")[..., :D]), ValueError, "k must be contiguous"),
    (dict(k=torch.empty(T + 1, H, D, dtype=BF16, device="meta")), ValueError, r"k must have shape \(777, 4, 128\)"),
    (dict(q=torch.empty(T, H * D, dtype=BF16, device="meta")), ValueError, "q must have 3 dimensions"),
    (dict(q=torch.empty(T, H, 96, dtype=BF16, device="meta"), k=torch.empty(T, H, 96, dtype=BF16, device="meta"),
          v=torch.empty(T, H, 96, dtype=BF16, device="meta")), ValueError, "head_dim"),
    (dict(cu_seqlens=torch.empty(10, dtype=torch.int64, device="meta")), TypeError, "cu_seqlens must be torch.int32"),
    (dict(cu_seqlens=torch.empty(1, dtype=torch.int32, device="meta")), ValueError, "B\\+1 >= 2"),
    (dict(cu_seqlens=torch.empty(2, 5, dtype=torch.int32, device="meta")), ValueError, "cu_seqlens must have 1 dim"),
    (dict(cu_seqlens=torch.zeros(10, dtype=torch.int32)), ValueError, "cu_seqlens is on cpu"),
    (dict(block=32), ValueError, r"block must be one of \(64, 128\)"),
    (dict(block=64.0), TypeError, "block must be an int"),
    (dict(rope=torch.empty(T, D // 2, dtype=BF16, device="meta")), ValueError, r"rope must have shape \(777, 128\)"),
    (dict(rope=torch.empty(T, D, dtype=torch.float32, device="meta")), TypeError, "rope must be torch.bfloat16"),
    (dict(rope_v=True), ValueError, "rope_v=True needs a rope table"),
    (dict(max_seqlen=-3), ValueError, "max_seqlen must be >= 1"),
]


@pytest.mark.parametrize("kw,exc,msg", BAD_ATTENTION, ids=[m for _, _, m in BAD_ATTENTION])
def test_attention_rejects(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        _attn(**kw)()


def test_attention_rejects_cpu_tensors():
    q = torch.zeros(T, H, D, dtype=BF16)
    cu = torch.tensor([0, T], dtype=torch.int32)
    with pytest.raises(ValueError, match="must be on a CUDA device"):
        ktune.block_attention(q, q, q, cu)


def test_attention_rejects_under_compile():
    torch._dynamo.reset()
    q, k, v, cu = attn_inputs("meta", grad=False)
    f = torch.compile(lambda q, k, v, cu: ktune.block_attention(q, k, v, cu, block=32),
                      backend="aot_eager")
    with pytest.raises(Exception, match=r"block must be one of \(64, 128\)"):
        f(q, k, v, cu)


def test_attention_backward_rejects_bad_grad():
    q, k, v, cu = attn_inputs("meta", grad=False)
    with pytest.raises(TypeError, match="grad must be torch.bfloat16"):
        torch.ops.ktune.block_attention_bwd(q.float(), q, k, v, cu, 64, None, False, 0)


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


BAD_LAYERS = [
    (lambda: ktune.nn.Linear(250, 512), ValueError, "in_features must be a multiple of 8"),
    (lambda: ktune.nn.Linear(256, 8), ValueError, "out_features must be >= 16"),
    (lambda: ktune.nn.LowRankLinear(256, 512, rank=60), ValueError, "rank must be a multiple of 8"),
    (lambda: ktune.nn.MonarchLinear(256, 512, blocks=3, rank=48), ValueError, "multiple of 8 \\* blocks"),
    (lambda: ktune.nn.MonarchLinear(256, 512, blocks=4, rank=36), ValueError, "rank must be a multiple of 8"),
    (lambda: ktune.nn.MonarchLinear(256, 512, blocks=16, rank=24), ValueError, r"rank \(24\) must be a multiple of blocks"),
    (lambda: ktune.nn.BlastLinear(256, 512, blocks=512, rank=64), ValueError, "blocks must be <= 256"),
    (lambda: ktune.nn.BlastLinear(256, 512, blocks=4.0, rank=64), TypeError, "blocks must be an int"),
    (lambda: ktune.nn.Linear(256, 512, device="meta")(meta(4, 128)), ValueError, r"x must have shape \(\.\.\., 256\)"),
    (lambda: ktune.nn.Linear(256, 512, device="meta")(meta(4, 256, dtype=torch.float32)), TypeError, "x must be torch.bfloat16"),
    (lambda: ktune.nn.Linear(256, 512, device="meta")(meta(256, 4).t()), ValueError, "x must be contiguous"),
    (lambda: ktune.nn.Linear(256, 512, device="meta")(torch.zeros(4, 256, dtype=BF16)), ValueError, "x must be on a CUDA device"),
    (lambda: ktune.nn.BlastLinear(256, 512, blocks=4, rank=64, device="meta").half()(meta(4, 256)), TypeError, "U must be torch.bfloat16"),
    (lambda: torch.ops.ktune.dense(meta(4, 256), meta(512, 256, dtype=torch.float16)), TypeError, "W must be torch.bfloat16"),
    (lambda: torch.ops.ktune.dense(meta(4, 256), meta(512, 128)), ValueError, r"x must have shape \(tokens, 128\)"),
    (lambda: torch.ops.ktune.dense(meta(2, 4, 256), meta(512, 256)), ValueError, r"x must have shape \(tokens, 256\)"),
    (lambda: torch.ops.ktune.lowrank(meta(4, 256), meta(64, 256), meta(512, 32)), ValueError, r"U must have shape \(512, 64\)"),
    (lambda: torch.ops.ktune.monarch(meta(4, 256), meta(4, 64, 64), meta(4, 128, 32), meta(0, dtype=torch.uint8)),
     ValueError, r"w2 must have shape \(4, 128, 64\)"),
    (lambda: torch.ops.ktune.blast(meta(4, 256), meta(4, 128, 64), meta(4, 64, 64), meta(4, 4, 64), meta(0)),
     TypeError, "prepared must be the 1-D uint8 tensor"),
    (lambda: torch.ops.ktune.blast(meta(4, 256), meta(4, 128, 64), meta(4, 64, 64), meta(4, 3, 64), meta(0, dtype=torch.uint8)),
     ValueError, r"S must have shape \(4, 4, 64\)"),
]


@pytest.mark.parametrize("call,exc,msg", BAD_LAYERS, ids=[m for _, _, m in BAD_LAYERS])
def test_layers_reject(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ---- where libktune and the table are found --------------------------------

def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    return str(path)


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """A package folder with nothing bundled, outside any checkout."""
    pkg = tmp_path / "site" / "ktune"
    pkg.mkdir(parents=True)
    monkeypatch.setattr(_find, "PKG", str(pkg))
    monkeypatch.setattr(_find, "_CHECKOUT", str(tmp_path / "site"))
    monkeypatch.delenv("KTUNE_LIB", raising=False)
    monkeypatch.delenv("KTUNE_TABLE", raising=False)
    return pkg


def test_find_nothing_says_where_it_looked(nowhere):
    with pytest.raises(_find.NotFound, match=r"no lib found.*KTUNE_LIB.*bundled copy"):
        _find.library_path()
    with pytest.raises(_find.NotFound, match=r"no table found.*KTUNE_TABLE.*shipped H200 table"):
        _find.table_path()
    with pytest.raises(ktune.NotFound):
        ktune.load()


def test_find_order(nowhere, tmp_path, monkeypatch):
    bundled = _touch(nowhere / "lib" / "libktune.so")
    shipped = _touch(nowhere / "data" / "h200-results.json")
    assert _find.library_path() == (bundled, "the bundled copy")
    assert _find.table_path() == (shipped, "the shipped H200 table")
    env_lib, env_tab = _touch(tmp_path / "e" / "libktune.so"), _touch(tmp_path / "e" / "t.json")
    monkeypatch.setenv("KTUNE_LIB", env_lib)
    monkeypatch.setenv("KTUNE_TABLE", env_tab)
    assert _find.library_path() == (env_lib, "$KTUNE_LIB")
    assert _find.table_path() == (env_tab, "$KTUNE_TABLE")
    arg_lib, arg_tab = _touch(tmp_path / "a" / "libktune.so"), _touch(tmp_path / "a" / "t.json")
    assert _find.library_path(arg_lib) == (arg_lib, "the lib argument")
    assert _find.table_path(arg_tab) == (arg_tab, "the table argument")


def test_find_given_path_must_exist(nowhere, tmp_path, monkeypatch):
    _touch(nowhere / "lib" / "libktune.so")
    monkeypatch.setenv("KTUNE_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(_find.NotFound, match=r"\$KTUNE_LIB names .*missing.so.*not a file"):
        _find.library_path()
    with pytest.raises(_find.NotFound, match="the table argument names"):
        _find.table_path(str(tmp_path / "missing.json"))


def test_find_in_checkout(monkeypatch):
    """Run from a checkout (PYTHONPATH=python), the checkout's table and build."""
    monkeypatch.setattr(_find, "PKG", os.path.join(REPO, "python", "ktune"))
    monkeypatch.setattr(_find, "_CHECKOUT", REPO)
    monkeypatch.delenv("KTUNE_TABLE", raising=False)
    monkeypatch.delenv("KTUNE_LIB", raising=False)
    path, how = _find.table_path()
    assert path == os.path.join(REPO, "data", "h200-results.json") and how == "the checkout's data"
    try:
        path, how = _find.library_path()
        assert path == os.path.join(REPO, "build", "libktune.so")
    except _find.NotFound as e:
        assert os.path.join(REPO, "build", "libktune.so") in str(e)


def test_load_rejects_a_file_that_is_not_a_library(tmp_path, monkeypatch):
    bogus = _touch(tmp_path / "libktune.so")
    with pytest.raises(ktune.KtuneError, match="dlopen"):
        ktune.load(lib=bogus, table=os.path.join(REPO, "data", "h200-results.json"))
