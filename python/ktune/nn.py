"""Inference modules over ktune's tuned linear layers.

Each keeps its weights as parameters in the canonical layout of docs/kernels.md
(the buffer order of kernels/<family>.c), so state dicts are the plain
factors; Monarch and BLAST also hold the variant's prepared layout (made by
libktune's prepare call on the first forward and again only when a weight
changes, or by an explicit prepare()).

Backward: none. These modules are inference-only: their parameters are
created with requires_grad=False, and a backward through them raises a
RuntimeError that says so (ktune has forward kernels only for these
families). Train with ktune.reference's PyTorch forms, then load the
weights.

Inputs: x (..., in) bf16, contiguous, on the weights' CUDA device; output
(..., out) bf16. No bias (the families have none).
"""
import math

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, is_fake

from . import _check, _lib, _ops

__all__ = ["Linear", "LowRankLinear", "MonarchLinear", "BlastLinear"]


def _param(shape, bound, device):
    w = torch.empty(shape, dtype=torch.bfloat16, device=device)
    if w.device.type != "meta":
        with torch.no_grad():
            w.uniform_(-bound, bound)
    return nn.Parameter(w, requires_grad=False)


def _traced(t):
    return t.device.type == "meta" or is_fake(t)


def _flat(x, n, weights):
    """x as (tokens, n). A 2-D x goes to the op as it is (the op checks it
    and the weights: one check per call, the hot path of a forward); other
    shapes are checked here, before the view that needs it."""
    if type(x) is torch.Tensor and x.dim() == 2 and x.shape[1] == n:
        return x
    _check.linear_input(x, weights, n, flat=False)
    return x.view(-1, n)


class _Prepared(nn.Module):
    """A layer whose variant reads a re-laid-out weight: `prepared` (uint8,
    not saved in state dicts) is made from the canonical weights by
    libktune's prepare call, once, and again only when a weight is changed
    in place, replaced, or moved to another device."""

    def __init__(self):
        super().__init__()
        self.register_buffer("prepared", None, persistent=False)
        self._made_from = None

    def _weights(self):
        raise NotImplementedError

    def _stamp(self):
        """What prepared was made from: each weight's identity, version,
        device and storage. A weight made under torch.inference_mode has no
        version counter: changing one in place goes unseen (call prepare())."""
        out = []
        for w in self._weights():
            try:
                ver = w._version
            except RuntimeError:
                ver = -1
            # meta and fake tensors (tracing) have no storage
            ptr = 0 if w.device.type == "meta" or isinstance(w, FakeTensor) else w.data_ptr()
            out.append((id(w), ver, w.device, ptr))
        return tuple(out)

    def prepare(self):
        """Makes the prepared layout now (on the weights' device, on the
        current stream). On meta or fake weights (tracing) it makes an empty
        placeholder: nothing runs there."""
        ws = self._weights()
        with torch.no_grad():
            if _traced(ws[0]):
                self.prepared = torch.empty(0, dtype=torch.uint8, device=ws[0].device)
            else:
                self.prepared = self._prepare_real(*ws)
        self._made_from = self._stamp()
        return self

    def _ready(self):
        if torch.compiler.is_compiling():
            # weight versions are not traced: a compiled module uses what
            # prepare() made before compiling (or on the first eager call)
            if self.prepared is None:
                raise RuntimeError(f"{type(self).__name__}: call .prepare() before torch.compile")
            return self.prepared
        if self.prepared is None or self._made_from != self._stamp():
            self.prepare()
        return self.prepared


class Linear(nn.Module):
    """y = x W^T with ktune's tuned dense GEMM; W (out, in)."""

    def __init__(self, in_features, out_features, device=None):
        super().__init__()
        _check.features("in_features", in_features)
        _check.features("out_features", out_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _param((out_features, in_features), 1 / math.sqrt(in_features), device)

    def forward(self, x):
        y = _ops.dense(_flat(x, self.in_features, [("weight", self.weight)]), self.weight)
        return y if x.dim() == 2 else y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class LowRankLinear(nn.Module):
    """y = (x V^T) U^T; V (rank, in), U (out, rank)."""

    def __init__(self, in_features, out_features, rank, device=None):
        super().__init__()
        _check.features("in_features", in_features)
        _check.features("out_features", out_features)
        _check._rank(rank)
        self.in_features, self.out_features, self.rank = in_features, out_features, rank
        self.V = _param((rank, in_features), 1 / math.sqrt(in_features), device)
        self.U = _param((out_features, rank), 1 / math.sqrt(rank), device)

    def forward(self, x):
        x2 = _flat(x, self.in_features, [("V", self.V), ("U", self.U)])
        y = _ops.lowrank(x2, self.V, self.U)
        return y if x.dim() == 2 else y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}"


class MonarchLinear(_Prepared):
    """Monarch layer (docs/kernels.md): w1 (blocks, rank, in/blocks), w2 (blocks,
    out/blocks, rank); per-block rank rank/blocks; output interleaved
    (column s of block i at s*blocks + i)."""

    def __init__(self, in_features, out_features, blocks, rank, device=None):
        super().__init__()
        _check._blocks(blocks)
        _check.features("in_features", in_features, blocks)
        _check.features("out_features", out_features, blocks)
        _check._rank(rank, blocks)
        self.in_features, self.out_features = in_features, out_features
        self.blocks, self.rank = blocks, rank
        nb, mb = in_features // blocks, out_features // blocks
        self.w1 = _param((blocks, rank, nb), 1 / math.sqrt(nb), device)
        self.w2 = _param((blocks, mb, rank), 1 / math.sqrt(rank), device)

    def _weights(self):
        return (self.w1, self.w2)

    def _prepare_real(self, w1, w2):
        _check.monarch_weights(w1, w2)
        return _lib.runtime().monarch_prepare(w1, w2)

    def forward(self, x):
        x2 = _flat(x, self.in_features, [("w1", self.w1), ("w2", self.w2)])
        y = _ops.monarch(x2, self.w1, self.w2, self._ready())
        return y if x.dim() == 2 else y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"blocks={self.blocks}, rank={self.rank}")


class BlastLinear(_Prepared):
    """BLAST layer (docs/kernels.md): U (blocks, out/blocks, rank), V (blocks,
    rank, in/blocks), S (blocks, blocks, rank); block (i, j) of the weight is
    U_i diag(S[i, j]) V_j."""

    def __init__(self, in_features, out_features, blocks, rank, device=None):
        super().__init__()
        _check._blocks(blocks)
        _check.features("in_features", in_features, blocks)
        _check.features("out_features", out_features, blocks)
        _check._rank(rank)
        self.in_features, self.out_features = in_features, out_features
        self.blocks, self.rank = blocks, rank
        nb, mb = in_features // blocks, out_features // blocks
        # the kernels' test scales: uniform with unit variance of each factor's sum
        self.U = _param((blocks, mb, rank), math.sqrt(3 / rank), device)
        self.V = _param((blocks, rank, nb), math.sqrt(3 / nb), device)
        self.S = _param((blocks, blocks, rank), math.sqrt(3 / blocks), device)

    def _weights(self):
        return (self.U, self.V, self.S)

    def _prepare_real(self, U, V, S):
        _check.blast_weights(U, V, S)
        return _lib.runtime().blast_prepare(U, V, S)

    def forward(self, x):
        x2 = _flat(x, self.in_features, [("U", self.U), ("V", self.V), ("S", self.S)])
        y = _ops.blast(x2, self.U, self.V, self.S, self._ready())
        return y if x.dim() == 2 else y.view(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"blocks={self.blocks}, rank={self.rank}")
