"""The binding's calls against a stand-in libktune generated from
include/ktune.h (CPU, CI): every function of the header records the
arguments it got, by the header's parameter names, so each Runtime method
is checked to pass the right tensor pointer, size and flag to the right
parameter -- what the type check of test_cpu cannot see among parameters of
one type (in and out, x and y)."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest
import torch

from ktune import _lib

from test_cpu import header_prototypes

BF16 = torch.bfloat16
WS = 4096          # what the stand-in's size queries answer
HANDLE = 0x7ab1e   # the table pointer it hands out


def c_param(p):
    """(C type text, name) of one parameter declaration."""
    m = re.match(r"(.*?)(\w+)\s*$", p.strip())
    return m.group(1).strip(), m.group(2)


def stand_in_source(protos, header):
    """C for a library with every prototype of the header: it records the
    last call of each function (its arguments as int64, by position) and
    answers 0, WS for an int64_t * out parameter, HANDLE for a table."""
    out = ['#include <stdint.h>', '#include <string.h>', f'#include "{header}"',
           'struct rec { const char *name; int n; int64_t a[32]; };',
           f'static struct rec recs[{len(protos)}];', 'static int nrecs;',
           'static struct rec *rec_of(const char *name) {',
           '\tfor (int i = 0; i < nrecs; i++) if (!strcmp(recs[i].name, name)) return &recs[i];',
           '\trecs[nrecs].name = name; return &recs[nrecs++]; }',
           'int stand_in_last(const char *name, int64_t *out) {',
           '\tfor (int i = 0; i < nrecs; i++) if (!strcmp(recs[i].name, name)) {',
           '\t\tmemcpy(out, recs[i].a, sizeof(recs[i].a)); return recs[i].n; }',
           '\treturn -1; }']
    for name, (ret, params) in protos.items():
        decls = [c_param(p) for p in params]
        body = [f'\tstruct rec *r = rec_of("{name}"); r->n = {len(decls)};']
        for i, (t, n) in enumerate(decls):
            val = f"(int64_t)(intptr_t){n}" if "*" in t or t in ("ktune_stream",) else f"(int64_t){n}"
            body.append(f"\tr->a[{i}] = {val};")
            if t.replace(" ", "") == "int64_t*":
                body.append(f"\tif ({n}) *{n} = {WS};")
            if t.replace(" ", "") == "ktune_table**":
                body.append(f"\t*{n} = (ktune_table *)(intptr_t){HANDLE};")
        if ret == "void":
            body.append("\treturn;")
        elif ret.endswith("*"):
            body.append('\treturn "";')
        elif name == "ktune_api_version":
            body.append("\treturn KTUNE_API_VERSION;")
        else:
            body.append("\treturn 0;")
        out.append(f"{ret} {name}({', '.join(params) or 'void'}) {{\n" + "\n".join(body) + "\n}")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    from conftest import REPO
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("stand_in")
    header = os.environ.get("KTUNE_HEADER") or os.path.join(REPO, "include", "ktune.h")
    protos = header_prototypes()
    (d / "stand_in.c").write_text(stand_in_source(protos, os.path.abspath(header)))
    so = d / "libktune.so"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(so),
                    str(d / "stand_in.c")], check=True)
    table = d / "t.json"
    table.write_text("{}")
    rt = _lib.Runtime(lib=str(so), table=str(table))
    dll = rt._dll
    dll.stand_in_last.restype = ctypes.c_int
    dll.stand_in_last.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64)]

    def last(name):
        buf = (ctypes.c_int64 * 32)()
        n = dll.stand_in_last(name.encode(), buf)
        assert n >= 0, f"{name} was not called"
        names = [c_param(p)[1] for p in protos[name][1]]
        assert len(names) == n
        return dict(zip(names, buf[:n]))
    return rt, last


def expect(got, want, call):
    for k, v in want.items():
        assert k in got, f"{call}: the header has no parameter {k!r} (it has {list(got)})"
        assert got[k] == v, f"{call}: {k} = {got[k]}, expected {v}"
    assert set(got) == set(want), f"{call}: unchecked parameters {set(got) - set(want)}"


def bf(*shape):
    return torch.zeros(*shape, dtype=BF16)


def ws_of(got):
    """The workspace the binding passed: WS bytes at a non-NULL pointer."""
    assert got["workspace"] != 0 and got["workspace_bytes"] == WS
    return {"workspace": got["workspace"], "workspace_bytes": WS}


def test_open(stand_in):
    rt, last = stand_in
    got = last("ktune_open_json")
    assert got["path"] != 0 and rt._h.value == HANDLE


def test_dense(stand_in):
    rt, last = stand_in
    x, W, y = bf(30, 64), bf(48, 64), bf(30, 48)
    rt.dense(x, W, y)
    got = last("ktune_dense")
    expect(got, dict(t=HANDLE, x=x.data_ptr(), w=W.data_ptr(), y=y.data_ptr(), tokens=30, **{"in": 64},
                     out=48, stream=0, **ws_of(got)), "ktune_dense")
    expect(last("ktune_dense_workspace_size"), dict(t=HANDLE, tokens=30, **{"in": 64}, out=48,
                                                    stream=0, bytes=last("ktune_dense_workspace_size")["bytes"]),
           "ktune_dense_workspace_size")


def test_lowrank(stand_in):
    rt, last = stand_in
    x, V, U, y = bf(31, 64), bf(16, 64), bf(40, 16), bf(31, 40)
    rt.lowrank(x, V, U, y)
    got = last("ktune_lowrank")
    expect(got, dict(t=HANDLE, x=x.data_ptr(), v=V.data_ptr(), u=U.data_ptr(), y=y.data_ptr(),
                     tokens=31, **{"in": 64}, out=40, rank=16, stream=0, **ws_of(got)), "ktune_lowrank")
    q = last("ktune_lowrank_workspace_size")
    expect(q, dict(t=HANDLE, tokens=31, **{"in": 64}, out=40, rank=16, stream=0, bytes=q["bytes"]),
           "ktune_lowrank_workspace_size")


def test_monarch(stand_in):
    rt, last = stand_in
    b, r, n, m = 4, 32, 64, 96
    w1, w2 = bf(b, r, n // b), bf(b, m // b, r)
    p = rt.monarch_prepare(w1, w2)
    assert p.numel() == WS and p.dtype == torch.uint8
    got = last("ktune_monarch_prepare")
    expect(got, dict(t=HANDLE, w1=w1.data_ptr(), w2=w2.data_ptr(), prepared=p.data_ptr(),
                     prepared_bytes=WS, **{"in": n}, out=m, blocks=b, rank=r, stream=0),
           "ktune_monarch_prepare")
    q = last("ktune_monarch_prepared_size")
    expect(q, dict(t=HANDLE, **{"in": n}, out=m, blocks=b, rank=r, bytes=q["bytes"]),
           "ktune_monarch_prepared_size")
    x, y = bf(33, n), bf(33, m)
    rt.monarch(x, w1, w2, p, y)
    got = last("ktune_monarch")
    expect(got, dict(t=HANDLE, x=x.data_ptr(), w1=w1.data_ptr(), w2=w2.data_ptr(),
                     prepared=p.data_ptr(), prepared_bytes=WS, y=y.data_ptr(), tokens=33,
                     **{"in": n}, out=m, blocks=b, rank=r, stream=0, **ws_of(got)), "ktune_monarch")
    q = last("ktune_monarch_workspace_size")
    expect(q, dict(t=HANDLE, tokens=33, **{"in": n}, out=m, blocks=b, rank=r, stream=0,
                   bytes=q["bytes"]), "ktune_monarch_workspace_size")


def test_blast(stand_in):
    rt, last = stand_in
    b, r, n, m = 4, 24, 64, 96
    U, V, S = bf(b, m // b, r), bf(b, r, n // b), bf(b, b, r)
    p = rt.blast_prepare(U, V, S)
    got = last("ktune_blast_prepare")
    expect(got, dict(t=HANDLE, u=U.data_ptr(), v=V.data_ptr(), s=S.data_ptr(), prepared=p.data_ptr(),
                     prepared_bytes=WS, **{"in": n}, out=m, blocks=b, rank=r, stream=0),
           "ktune_blast_prepare")
    x, y = bf(35, n), bf(35, m)
    rt.blast(x, U, V, S, p, y)
    got = last("ktune_blast")
    expect(got, dict(t=HANDLE, x=x.data_ptr(), u=U.data_ptr(), v=V.data_ptr(), s=S.data_ptr(),
                     prepared=p.data_ptr(), prepared_bytes=WS, y=y.data_ptr(), tokens=35,
                     **{"in": n}, out=m, blocks=b, rank=r, stream=0, **ws_of(got)), "ktune_blast")
    q = last("ktune_blast_workspace_size")
    expect(q, dict(t=HANDLE, tokens=35, **{"in": n}, out=m, blocks=b, rank=r, stream=0,
                   bytes=q["bytes"]), "ktune_blast_workspace_size")


@pytest.mark.parametrize("rope,rope_v", [(False, False), (True, False), (True, True)])
def test_block_attention(stand_in, rope, rope_v):
    rt, last = stand_in
    T, H, d, B = 100, 3, 64, 7
    q, k, v, o, do, dq, dk, dv = (bf(T, H, d) for _ in range(8))
    cu = torch.zeros(B + 1, dtype=torch.int32)
    tab = bf(T, d) if rope else None
    flag = 2 if rope_v else int(rope)
    rt.attn_fwd(q, k, v, cu, 128, tab, rope_v, 77, o)
    shape = dict(batch=B, tokens=T, heads=H, head_dim=d, block=128, rope=flag, max_seqlen=77)
    got = last("ktune_blockattn_fwd")
    expect(got, dict(t=HANDLE, q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(),
                     cu_seqlens=cu.data_ptr(), rope_table=tab.data_ptr() if rope else 0,
                     stream=0, **shape, **ws_of(got)), "ktune_blockattn_fwd")
    q_ = last("ktune_blockattn_workspace_size")
    expect(q_, dict(t=HANDLE, backward=0, stream=0, bytes=q_["bytes"], **shape),
           "ktune_blockattn_workspace_size")
    rt.attn_bwd(do, q, k, v, cu, 128, tab, rope_v, 77, dq, dk, dv)
    got = last("ktune_blockattn_bwd")
    expect(got, dict(t=HANDLE, q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), dout=do.data_ptr(),
                     dq=dq.data_ptr(), dk=dk.data_ptr(), dv=dv.data_ptr(), cu_seqlens=cu.data_ptr(),
                     rope_table=tab.data_ptr() if rope else 0, stream=0, **shape, **ws_of(got)),
           "ktune_blockattn_bwd")
    assert last("ktune_blockattn_workspace_size")["backward"] == 1


def test_choose_and_options(stand_in):
    rt, last = stand_in
    rt.set_option("arch", "sm_90a")
    got = last("ktune_set_option")
    assert got["t"] == HANDLE and got["name"] != 0 and got["value"] != 0
    c = rt.choose("dense", "tokens=1,in=16,out=16")
    assert c["match"] == "" and last("ktune_choose")["t"] == HANDLE
