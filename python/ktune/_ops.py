"""The torch custom ops (namespace `ktune`) over libktune.

Each op has a real implementation (libktune on the current CUDA stream, its
workspace from torch's caching allocator) and a fake one (shapes and dtypes
only), so torch.compile and FakeTensorMode trace them without a GPU or the
library. Both run the same argument checks (ktune._check).

  ktune::block_attention      (q, k, v, cu_seqlens, block, rope?, rope_v, max_seqlen) -> o
  ktune::block_attention_bwd  (grad_o, q, k, v, cu_seqlens, block, rope?, rope_v, max_seqlen)
                              -> (dq, dk, dv)   ktune's backward kernel
  ktune::dense    (x, W) -> y
  ktune::lowrank  (x, V, U) -> y
  ktune::monarch  (x, w1, w2, prepared) -> y
  ktune::blast    (x, U, V, S, prepared) -> y
x is (tokens, in); `prepared` is the module's weight re-layout (libktune's
prepare call, made once). block_attention's autograd is ktune's backward
kernel; the linear ops have none (inference only): their backward raises.
max_seqlen 0 means unknown. The modules (ktune.nn) call the linear ops
through dense/lowrank/monarch/blast below, which skip the dispatcher where
nothing would see the difference (_direct).
"""
from typing import Optional, Tuple

import torch

from . import _check, _lib

Tensor = torch.Tensor


def _attn_check(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen, dout=None):
    _check.attention(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen or None, dout)


@torch.library.custom_op("ktune::block_attention", mutates_args=())
def block_attention_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, block: int,
                       rope: Optional[Tensor], rope_v: bool, max_seqlen: int) -> Tensor:
    _attn_check(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen)
    o = torch.empty_like(q)
    if q.numel():
        _lib.runtime().attn_fwd(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen, o)
    return o


@block_attention_op.register_fake
def _(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen):
    _attn_check(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen)
    return torch.empty_like(q)


@torch.library.custom_op("ktune::block_attention_bwd", mutates_args=())
def block_attention_bwd_op(grad_o: Tensor, q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor,
                           block: int, rope: Optional[Tensor], rope_v: bool,
                           max_seqlen: int) -> Tuple[Tensor, Tensor, Tensor]:
    _attn_check(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen, grad_o)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if q.numel():
        _lib.runtime().attn_bwd(grad_o, q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen,
                                dq, dk, dv)
    return dq, dk, dv


@block_attention_bwd_op.register_fake
def _(grad_o, q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen):
    _attn_check(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen, grad_o)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _attn_setup(ctx, inputs, output):
    q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen = inputs
    ctx.save_for_backward(q, k, v, cu_seqlens, rope)
    ctx.block, ctx.rope_v, ctx.max_seqlen = block, rope_v, max_seqlen


def _attn_backward(ctx, grad_o):
    q, k, v, cu_seqlens, rope = ctx.saved_tensors
    dq, dk, dv = block_attention_bwd_op(grad_o.contiguous(), q, k, v, cu_seqlens, ctx.block,
                                        rope, ctx.rope_v, ctx.max_seqlen)
    # no gradient for cu_seqlens, block, the rope table (a constant of the
    # positions), rope_v, max_seqlen
    return dq, dk, dv, None, None, None, None, None


block_attention_op.register_autograd(_attn_backward, setup_context=_attn_setup)


# ---- linear layers -------------------------------------------------------

def _out_like(x, m):
    return x.new_empty((x.shape[0], m))


def _dense(x: Tensor, W: Tensor) -> Tensor:
    n, m = _check.dense_weights(W)
    _check.linear_input(x, [("W", W)], n)
    y = _out_like(x, m)
    if y.numel():
        _lib.runtime().dense(x, W, y)
    return y


dense_op = torch.library.custom_op("ktune::dense", mutates_args=())(_dense)


@dense_op.register_fake
def _(x, W):
    n, m = _check.dense_weights(W)
    _check.linear_input(x, [("W", W)], n)
    return _out_like(x, m)


def _lowrank(x: Tensor, V: Tensor, U: Tensor) -> Tensor:
    n, m, _ = _check.lowrank_weights(V, U)
    _check.linear_input(x, [("V", V), ("U", U)], n)
    y = _out_like(x, m)
    if y.numel():
        _lib.runtime().lowrank(x, V, U, y)
    return y


lowrank_op = torch.library.custom_op("ktune::lowrank", mutates_args=())(_lowrank)


@lowrank_op.register_fake
def _(x, V, U):
    n, m, _ = _check.lowrank_weights(V, U)
    _check.linear_input(x, [("V", V), ("U", U)], n)
    return _out_like(x, m)


def _monarch(x: Tensor, w1: Tensor, w2: Tensor, prepared: Tensor) -> Tensor:
    n, m, _, _ = _check.monarch_weights(w1, w2)
    _check.prepared(prepared)
    _check.linear_input(x, [("w1", w1), ("w2", w2), ("prepared", prepared)], n)
    y = _out_like(x, m)
    if y.numel():
        _lib.runtime().monarch(x, w1, w2, prepared, y)
    return y


monarch_op = torch.library.custom_op("ktune::monarch", mutates_args=())(_monarch)


@monarch_op.register_fake
def _(x, w1, w2, prepared):
    n, m, _, _ = _check.monarch_weights(w1, w2)
    _check.prepared(prepared)
    _check.linear_input(x, [("w1", w1), ("w2", w2), ("prepared", prepared)], n)
    return _out_like(x, m)


def _blast(x: Tensor, U: Tensor, V: Tensor, S: Tensor, prepared: Tensor) -> Tensor:
    n, m, _, _ = _check.blast_weights(U, V, S)
    _check.prepared(prepared)
    _check.linear_input(x, [("U", U), ("V", V), ("S", S), ("prepared", prepared)], n)
    y = _out_like(x, m)
    if y.numel():
        _lib.runtime().blast(x, U, V, S, prepared, y)
    return y


blast_op = torch.library.custom_op("ktune::blast", mutates_args=())(_blast)


@blast_op.register_fake
def _(x, U, V, S, prepared):
    n, m, _, _ = _check.blast_weights(U, V, S)
    _check.prepared(prepared)
    _check.linear_input(x, [("U", U), ("V", V), ("S", S), ("prepared", prepared)], n)
    return _out_like(x, m)


def _inference_only(name):
    def setup(ctx, inputs, output):
        pass

    def backward(ctx, grad):
        raise RuntimeError(
            f"ktune::{name} has no backward: ktune's linear layers are inference-only "
            f"(run them under torch.no_grad() or torch.inference_mode(), and keep their "
            f"weights at requires_grad=False; train with the PyTorch layer of "
            f"ktune.reference and load the weights into the ktune module)")
    return backward, setup


for _op, _name in ((dense_op, "dense"), (lowrank_op, "lowrank"), (monarch_op, "monarch"),
                   (blast_op, "blast")):
    _bw, _setup = _inference_only(_name)
    _op.register_autograd(_bw, setup_context=_setup)


# ---- the modules' eager calls ----------------------------------------------

def _direct(args):
    """Whether a module's call may run the op's implementation without the
    dispatcher: nothing traces, profiles or intercepts it (no compile, no
    profiler, no torch function or dispatch mode, plain CUDA tensors) and no
    autograd graph is wanted. What runs is the same checks and launch; the
    dispatcher's own cost (tens of microseconds of CPU a call) is what a
    small layer would otherwise wait on."""
    if (torch.compiler.is_compiling() or torch._C._autograd._profiler_enabled() or
            torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack()):
        return False
    grad = torch.is_grad_enabled()
    for t in args:
        if type(t) not in _PLAIN or not t.is_cuda or (grad and t.requires_grad):
            return False
    return True


# a module's weights are Parameters: a Tensor that adds no torch function
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _eager(op, impl):
    def call(*args):
        return impl(*args) if _direct(args) else op(*args)
    call.__name__ = impl.__name__.lstrip("_")
    call.__doc__ = f"ktune::{call.__name__} as the modules call it (see _direct)."
    return call


dense = _eager(dense_op, _dense)
lowrank = _eager(lowrank_op, _lowrank)
monarch = _eager(monarch_op, _monarch)
blast = _eager(blast_op, _blast)
