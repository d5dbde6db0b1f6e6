"""CPU tests of the ktune package (CI, no GPU): it imports, its ops trace
under torch.compile on meta and fake tensors with the right shapes, bad
arguments are clear Python errors, libktune and the table are found where
documented, and the ctypes signatures match include/ktune.h."""
import ctypes
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
    if os.environ.get("KTUNE_TEST_REQUIRE_LIB") == "1" and not os.environ.get("KTUNE_LIB"):
        # installed after a build: the build's libktune.so went in with it
        assert _find.library_path() == (os.path.join(pkg, "lib", "libktune.so"), "the bundled copy")


# ---- fake implementations under torch.compile -------------------------------

def attn_inputs(device, T=777, H=4, d=128, B=9, grad=True):
    q, k, v = (torch.empty(T, H, d, dtype=BF16, device=device, requires_grad=grad)
               for _ in range(3))
    cu = torch.empty(B + 1, dtype=torch.int32, device=device)
    return q, k, v, cu


@pytest.mark.parametrize("rope,rope_v", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("d,block", [(128, 64), (64, 128), (128, 32), (128, 256)])
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



@pytest.mark.parametrize("make", [
    lambda: ktune.nn.MonarchLinear(256, 256, blocks=4, rank=64, device="meta"),
    lambda: ktune.nn.BlastLinear(256, 512, blocks=4, rank=64, device="meta"),
], ids=["monarch", "blast"])
def test_module_made_under_inference_mode(make):
    """Weights made under torch.inference_mode have no version counter: the
    module still prepares and runs (a 2-D and a 3-D input)."""
    with torch.inference_mode():
        layer = make()
        layer.prepare()
        n, m = layer.in_features, layer.out_features
        assert layer(torch.empty(8, n, dtype=BF16, device="meta")).shape == (8, m)
        assert layer(torch.empty(2, 3, n, dtype=BF16, device="meta")).shape == (2, 3, m)



def test_eager_calls_take_the_dispatcher_unless_plain_cuda():
    """The modules skip the dispatcher only for plain CUDA tensors that want
    no autograd, outside compile, profiler and modes: on meta, CPU and fake
    tensors the registered op runs (its fake implementation here)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from ktune import _ops
    assert not _ops._direct((torch.empty(4, 256, dtype=BF16, device="meta"),))
    assert not _ops._direct((torch.empty(4, 256, dtype=BF16),))
    with FakeTensorMode():
        assert not _ops._direct((torch.empty(4, 256, dtype=BF16, device="cuda"),))
    w = ktune.nn.Linear(256, 512, device="meta").weight
    assert not _ops._direct((w,))                  # a Parameter, but on meta
    x = torch.empty(4, 256, dtype=BF16, device="meta")
    y = _ops.dense(x, torch.empty(512, 256, dtype=BF16, device="meta"))
    assert y.shape == (4, 512) and y.device.type == "meta"


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
    (dict(block=16), ValueError, r"block must be one of \(32, 64, 128, 256\)"),
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
    f = torch.compile(lambda q, k, v, cu: ktune.block_attention(q, k, v, cu, block=16),
                      backend="aot_eager")
    with pytest.raises(Exception, match=r"block must be one of \(32, 64, 128, 256\)"):
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


# ---- the README's example -----------------------------------------------------

def readme_example():
    """The python block of the README's "Use it from PyTorch" section."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    sec = text.split("## Use it from PyTorch", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", sec, re.S)
    assert len(blocks) == 1, "the section has one python example"
    return blocks[0]


def test_readme_example_traces_on_meta():
    """The README's code, on meta tensors (device "cuda" -> "meta") and
    torch.compile with backend aot_eager: every call and shape in it is
    right; tests/test_gpu.py runs it as written."""
    torch._dynamo.reset()
    code = readme_example()
    assert code.count('device="cuda"') >= 3
    code = code.replace('device="cuda"', 'device="meta"')
    compile_ = torch.compile
    scope = {}
    try:
        torch.compile = lambda m, **kw: compile_(m, backend="aot_eager", **kw)
        exec(compile(code, "README.md", "exec"), scope)
    finally:
        torch.compile = compile_
    assert scope["y"].shape == (8, 128, 4096) and scope["o"].shape == (381, 4, 128)
    assert scope["q"].grad.shape == (381, 4, 128)


# ---- the ctypes binding against include/ktune.h -----------------------------

def header_text():
    path = os.environ.get("KTUNE_HEADER") or os.path.join(REPO, "include", "ktune.h")
    assert os.path.isfile(path), f"{path} is missing: the binding is checked against it"
    with open(path) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def ctype_of(decl):
    """The ctypes type the binding must use for a C parameter or return type."""
    from ctypes import (POINTER, c_char_p, c_double, c_int, c_int32, c_int64, c_void_p)
    t = re.sub(r"\s+", " ", decl.replace("*", " * ")).strip()
    t = re.sub(r"\b(const|struct|enum)\b ?", "", t).strip()
    words = t.split()
    # drop the parameter name: the last word when it is not a type or '*'
    types = {"void", "char", "int", "int32_t", "int64_t", "double", "ktune_table", "ktune_stream",
             "ktune_choice", "ktune_builtin"}
    if len(words) > 1 and words[-1] not in types and words[-1] != "*":
        words = words[:-1]
    base, stars = words[0], words.count("*")
    if base == "ktune_stream" and stars == 0:
        return c_void_p
    if base == "void":
        return None if stars == 0 else c_void_p
    if base == "char" and stars == 1:
        return c_char_p
    if base == "ktune_table":
        return {1: c_void_p, 2: POINTER(c_void_p)}[stars]
    if base == "ktune_choice" and stars == 1:
        return POINTER(_lib.Choice)
    scalar = {"int": c_int, "int32_t": c_int32, "int64_t": c_int64, "double": c_double}[base]
    if stars == 0:
        return scalar
    if stars == 1 and base == "int64_t" and "const" not in decl:
        return POINTER(c_int64)          # out parameters
    return c_void_p                      # device pointers (const int32_t *cu_seqlens)


def header_prototypes():
    protos = {}
    for m in re.finditer(r"([A-Za-z_][\w \*]*?)\b(ktune_\w+)\s*\(([^;{]*?)\)\s*;", header_text()):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        args = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
        protos[name] = (ret.strip(), args)
    return protos


def test_signatures_match_the_header():
    protos = header_prototypes()
    assert "ktune_dense" in protos and "ktune_blockattn_bwd" in protos
    for name, (res, args) in _lib.SIGNATURES.items():
        assert name in protos, f"{name} is bound but include/ktune.h does not declare it"
        ret, params = protos[name]
        want_args = [ctype_of(p) for p in params]
        assert ctype_of(ret) == res, f"{name}: returns {ret}, bound as {res}"
        assert len(args) == len(want_args), \
            f"{name}: {len(params)} parameters in the header, {len(args)} bound: {params}"
        for i, (got, want) in enumerate(zip(args, want_args)):
            assert got == want, f"{name}: parameter {i} ({params[i]}) is {want}, bound as {got}"


def test_choice_struct_and_status_match_the_header():
    text = header_text()
    body = re.search(r"typedef struct ktune_choice\s*\{(.*?)\}\s*ktune_choice;", text, re.S).group(1)
    fields = []
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        m = re.match(r"(\w+)\s+(\w+)(?:\[(\d+)\])?$", re.sub(r"\s+", " ", decl))
        assert m, f"unparsed ktune_choice field: {decl}"
        fields.append((m.group(2), m.group(1), int(m.group(3)) if m.group(3) else None))
    bound = _lib.Choice._fields_
    assert [f[0] for f in fields] == [b[0] for b in bound]
    scalars = {"char": ctypes.c_char, "double": ctypes.c_double, "int64_t": ctypes.c_int64,
               "int32_t": ctypes.c_int32}
    for (name, ctype, n), (_, t) in zip(fields, bound):
        if n is None:
            assert t is scalars[ctype], f"ktune_choice.{name} is {ctype}, bound as {t}"
        else:
            assert t._type_ is scalars[ctype] and t._length_ == n, f"ktune_choice.{name}[{n}]"
    enum = re.search(r"typedef enum ktune_status\s*\{(.*?)\}", text, re.S).group(1)
    status = {k: int(v) for k, v in re.findall(r"(KTUNE_\w+)\s*=\s*(\d+)", enum)}
    assert status == _lib.STATUS
    ver = re.search(r"#define KTUNE_API_VERSION (\d+)", text).group(1)
    assert int(ver) == _lib.API_VERSION


# ---- the real library, without a GPU ----------------------------------------

def _real_runtime():
    try:
        return _lib.Runtime()   # not ktune.load(): the ops' runtime keeps its options
    except ktune.NotFound:
        if os.environ.get("KTUNE_TEST_REQUIRE_LIB") == "1":
            raise
        pytest.skip("no libktune.so built (KTUNE_TEST_REQUIRE_LIB=1 makes this a failure)")


def test_real_library_answers_without_a_gpu():
    """libktune opens the shipped table and plans for the H200 with no GPU
    here: the binding's calls (strings, a struct, int64 out parameters)
    reach it intact."""
    rt = _real_runtime()
    rt.set_option("arch", "sm_90a")
    rt.set_option("device", "NVIDIA H200")
    c = rt.choose("dense", "tokens=1024,in=4096,out=4096")
    assert c["match"] == "exact" and c["family"] == "dense"
    assert c["config"].startswith("variant=wgmma_ws") and c["tuned_us"] > 0
    c = rt.choose("dense", "tokens=777,in=4096,out=4096")
    assert c["match"] == "nearest" and c["tuned_shape"] == "tokens=1024,in=4096,out=4096"
    c = rt.choose("blockattn_bwd", "seqs=1152,tokens=245000,heads=4,head_dim=128,block=64,rope=0,lmax=256")
    assert c["match"] in ("exact", "nearest") and c["config"].startswith("variant=ws")
    out = ctypes.c_int64(-1)
    assert rt._fn["ktune_monarch_prepared_size"](rt._h, 4096, 4096, 16, 1024, ctypes.byref(out)) == 0
    assert out.value > 0
    with pytest.raises(ktune.KtuneError) as e:
        rt.choose("no_such_family", "tokens=1")
    assert e.value.status.startswith("KTUNE_ERROR") and e.value.message
    with pytest.raises(ValueError):   # KTUNE_ERROR_INVALID is a ValueError too
        rt.choose("dense", "tokens=1024,in=4096")
