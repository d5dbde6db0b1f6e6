"""Argument checks shared by the public functions, the ops' real and fake
implementations and the modules: wrong dtype is a TypeError; wrong device,
layout, shape or value is a ValueError. They read only metadata (never a
tensor's values), so they cost no device synchronization and run the same on
meta and fake tensors."""
import torch

BF16 = torch.bfloat16
HEAD_DIMS = (64, 128)
BLOCKS = (32, 64, 128, 256)
MAX_HEADS = 64


def tensor(name, t, dtype, ndim):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} must be {dtype}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (call .contiguous()), got strides {t.stride()}")


def devices(named):
    """All tensors on one CUDA device (meta too, for tracing)."""
    first_name, first = named[0]
    if first.device.type not in ("cuda", "meta"):
        raise ValueError(f"{first_name} must be on a CUDA device, got {first.device}")
    for name, t in named[1:]:
        if t.device != first.device:
            raise ValueError(f"{name} is on {t.device} but {first_name} is on {first.device}: "
                             f"every tensor must be on one device")


def shape(name, t, want):
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{name} must have shape {tuple(want)}, got {tuple(t.shape)}")


def integer(name, v, lo=None, allowed=None):
    if isinstance(v, torch.SymInt):
        return  # traced with a symbolic value: the real call checks it
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    if allowed is not None and v not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {v}")
    if lo is not None and v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")


def attention(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen, dout=None):
    named = [("q", q), ("k", k), ("v", v)] + ([("grad", dout)] if dout is not None else [])
    for name, t in named:
        tensor(name, t, BF16, 3)
    for name, t in named[1:]:
        shape(name, t, q.shape)
    tokens, heads, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim (q.shape[2]) must be one of {HEAD_DIMS}, got {d}")
    if not 1 <= heads <= MAX_HEADS:
        raise ValueError(f"heads (q.shape[1]) must be in 1..{MAX_HEADS}, got {heads}")
    tensor("cu_seqlens", cu_seqlens, torch.int32, 1)
    if cu_seqlens.numel() < 2:
        raise ValueError("cu_seqlens must hold B+1 >= 2 offsets (0, ..., T), "
                         f"got {cu_seqlens.numel()}")
    integer("block", block, allowed=BLOCKS)
    if not isinstance(rope_v, bool):
        raise TypeError(f"rope_v must be a bool, got {type(rope_v).__name__}")
    if rope is None:
        if rope_v:
            raise ValueError("rope_v=True needs a rope table")
    else:
        tensor("rope", rope, BF16, 2)
        shape("rope", rope, (tokens, d))
        named.append(("rope", rope))
    if max_seqlen is not None:
        integer("max_seqlen", max_seqlen, lo=1)
    devices(named + [("cu_seqlens", cu_seqlens)])


def features(name, n, blocks=None):
    integer(name, n, lo=16)
    if n % 8:
        raise ValueError(f"{name} must be a multiple of 8, got {n}")
    if blocks is not None and (n % blocks or (n // blocks) % 8):
        raise ValueError(f"{name} must be a multiple of 8 * blocks ({8 * blocks}), got {n}")


def linear_input(x, weights, n, flat=True):
    """x (tokens, n) (flat=False: (..., n)) bf16 contiguous, on the weights' device."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != BF16:
        raise TypeError(f"x must be {BF16}, got {x.dtype}")
    if (x.dim() != 2 if flat else x.dim() < 1) or x.shape[-1] != n:
        want = f"(tokens, {n})" if flat else f"(..., {n})"
        raise ValueError(f"x must have shape {want}, got {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"x must be contiguous (call .contiguous()), got strides {x.stride()}")
    devices([("x", x)] + list(weights))


def _rank(r, blocks=None):
    integer("rank", r, lo=8)
    if r % 8:
        raise ValueError(f"rank must be a multiple of 8, got {r}")
    if blocks is not None and r % blocks:
        raise ValueError(f"rank ({r}) must be a multiple of blocks ({blocks})")


def _blocks(b):
    integer("blocks", b, lo=1)
    if b > 256:
        raise ValueError(f"blocks must be <= 256, got {b}")


def dense_weights(W):
    """(in, out) of W (out, in)."""
    tensor("W", W, BF16, 2)
    m, n = W.shape
    features("in (W.shape[1])", n)
    features("out (W.shape[0])", m)
    return n, m


def lowrank_weights(V, U):
    """(in, out, rank) of V (rank, in), U (out, rank)."""
    tensor("V", V, BF16, 2)
    tensor("U", U, BF16, 2)
    r, n = V.shape
    m = U.shape[0]
    shape("U", U, (m, r))
    features("in (V.shape[1])", n)
    features("out (U.shape[0])", m)
    _rank(r)
    return n, m, r


def monarch_weights(w1, w2):
    """(in, out, blocks, rank) of w1 (b, r, in/b), w2 (b, out/b, r)."""
    tensor("w1", w1, BF16, 3)
    tensor("w2", w2, BF16, 3)
    b, r, nb = w1.shape
    _blocks(b)
    shape("w2", w2, (b, w2.shape[1], r))
    n, m = b * nb, b * w2.shape[1]
    features("in (w1.shape[0] * w1.shape[2])", n, b)
    features("out (w2.shape[0] * w2.shape[1])", m, b)
    _rank(r, b)
    return n, m, b, r


def blast_weights(U, V, S):
    """(in, out, blocks, rank) of U (b, out/b, r), V (b, r, in/b), S (b, b, r)."""
    for name, t in (("U", U), ("V", V), ("S", S)):
        tensor(name, t, BF16, 3)
    b, r, nb = V.shape
    _blocks(b)
    shape("U", U, (b, U.shape[1], r))
    shape("S", S, (b, b, r))
    n, m = b * nb, b * U.shape[1]
    features("in (V.shape[0] * V.shape[2])", n, b)
    features("out (U.shape[0] * U.shape[1])", m, b)
    _rank(r)
    return n, m, b, r


def prepared(p):
    if not isinstance(p, torch.Tensor) or p.dtype != torch.uint8 or p.dim() != 1:
        raise TypeError("prepared must be the 1-D uint8 tensor that the module's prepare() made")
