"""ktune for PyTorch: ktune's tuned kernels as torch custom ops.

    import ktune
    o = ktune.block_attention(q, k, v, cu_seqlens, block=64)   # autograd: ktune's backward
    layer = ktune.nn.BlastLinear(4096, 4096, blocks=16, rank=1024, device="cuda")

The ops run libktune (the C runtime) on the current CUDA stream, with
workspaces from torch's caching allocator; each has a fake implementation,
so torch.compile traces them. libktune and the tuned table are found as
ktune._find says (ktune.load(lib=..., table=...), $KTUNE_LIB / $KTUNE_TABLE,
the copies installed with the package, a ktune checkout's own).
"""
import torch

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"ktune needs torch >= 2.4 (torch.library.custom_op); this is {torch.__version__}")

from . import _check, _ops, nn, reference  # noqa: E402  (registers the ktune:: ops)
from ._find import NotFound  # noqa: E402
from ._lib import KtuneError, load, runtime  # noqa: E402

__version__ = "0.1.0"
__all__ = ["block_attention", "rope_table", "load", "runtime", "KtuneError", "NotFound", "nn",
           "reference"]

rope_table = reference.rope_table


def block_attention(q, k, v, cu_seqlens, block=64, rope=None, rope_v=False, max_seqlen=None):
    """Jagged block-diagonal attention (docs/kernels.md): q, k, v (T, H, d) bf16
    contiguous on one CUDA device, d 64 or 128; cu_seqlens (B+1,) int32 on
    that device, the sequence offsets (0, ..., T), non-decreasing, as FA2's
    varlen takes them (their values are the caller's to get right: reading
    them here would synchronize). Each sequence is cut into
    blocks of `block` (32, 64, 128 or 256) tokens, the last one possibly short; a
    token attends to the keys of its own block, same head, scale 1/sqrt(d).

    rope: None, or the (T, d) bf16 cos/sin table of kernels/blockattn.h
    (ktune.rope_table(cu_seqlens, d) builds it): q and k are then raw and
    rotated inside the kernel; rope_v=True rotates v as well. The table
    gets no gradient.
    max_seqlen: the longest sequence if known (a host int, as FA2's varlen
    takes): it picks the tuned config; None lets libktune estimate it.

    Returns o (T, H, d) bf16. Differentiable in q, k, v: the backward is
    ktune's backward kernel (it recomputes the attention; nothing but the
    inputs is saved).
    """
    # the op's schema refuses these before its checks would run: say it plainly
    _check.integer("block", block, allowed=_check.BLOCKS)
    if max_seqlen is not None:
        _check.integer("max_seqlen", max_seqlen, lo=1)
    return _ops.block_attention_op(q, k, v, cu_seqlens, block, rope, rope_v, max_seqlen or 0)
