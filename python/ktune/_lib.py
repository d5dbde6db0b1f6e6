"""libktune through ctypes: finding and opening it and the tuned table, and
the calls the ops make -- device pointers from the tensors, the current CUDA
stream, workspaces and prepared buffers from torch's caching allocator.

SIGNATURES is include/ktune.h as this package calls it; tests/test_cpu.py
parses the header and checks every entry, the ktune_choice struct, the
status codes and KTUNE_API_VERSION against it, so a change of the header
that is not made here fails CI.
"""
import ctypes
import threading
from ctypes import POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_void_p

import torch

from . import _find

API_VERSION = 1  # KTUNE_API_VERSION this binding is written for

# ktune_status
STATUS = {
    "KTUNE_OK": 0, "KTUNE_ERROR_INVALID": 1, "KTUNE_ERROR_NOT_FOUND": 2,
    "KTUNE_ERROR_BAD_TABLE": 3, "KTUNE_ERROR_UNSUPPORTED": 4, "KTUNE_ERROR_NO_GPU": 5,
    "KTUNE_ERROR_CUDA": 6, "KTUNE_ERROR_COMPILE": 7, "KTUNE_ERROR_CAPTURE": 8,
    "KTUNE_ERROR_WORKSPACE": 9, "KTUNE_ERROR_INTERNAL": 10,
}


class Choice(ctypes.Structure):
    """struct ktune_choice."""
    _fields_ = [("match", c_char * 16), ("family", c_char * 32), ("shape", c_char * 256),
                ("tuned_shape", c_char * 256), ("config", c_char * 256), ("arch", c_char * 16),
                ("distance", c_double), ("tuned_us", c_double), ("workspace_bytes", c_int64),
                ("prepared_bytes", c_int64), ("nkernels", c_int32), ("warm", c_int32),
                ("shipped", c_int32)]


Tab = c_void_p          # ktune_table *
P = c_void_p            # device pointers (const or not), ktune_stream
I64 = c_int64
OUT64 = POINTER(c_int64)

SIGNATURES = {
    "ktune_api_version": (c_int, []),
    "ktune_status_name": (c_char_p, [c_int]),
    "ktune_last_error": (c_char_p, []),
    "ktune_open_json": (c_int, [c_char_p, POINTER(Tab)]),
    "ktune_close": (None, [Tab]),
    "ktune_set_option": (c_int, [Tab, c_char_p, c_char_p]),
    "ktune_choose": (c_int, [Tab, c_char_p, c_char_p, P, POINTER(Choice)]),
    "ktune_dense_workspace_size": (c_int, [Tab, I64, I64, I64, P, OUT64]),
    "ktune_dense": (c_int, [Tab, P, P, P, I64, I64, I64, P, I64, P]),
    "ktune_lowrank_workspace_size": (c_int, [Tab, I64, I64, I64, I64, P, OUT64]),
    "ktune_lowrank": (c_int, [Tab, P, P, P, P, I64, I64, I64, I64, P, I64, P]),
    "ktune_monarch_prepared_size": (c_int, [Tab, I64, I64, I64, I64, OUT64]),
    "ktune_monarch_prepare": (c_int, [Tab, P, P, P, I64, I64, I64, I64, I64, P]),
    "ktune_monarch_workspace_size": (c_int, [Tab, I64, I64, I64, I64, I64, P, OUT64]),
    "ktune_monarch": (c_int, [Tab, P, P, P, P, I64, P, I64, I64, I64, I64, I64, P, I64, P]),
    "ktune_blast_prepared_size": (c_int, [Tab, I64, I64, I64, I64, OUT64]),
    "ktune_blast_prepare": (c_int, [Tab, P, P, P, P, I64, I64, I64, I64, I64, P]),
    "ktune_blast_workspace_size": (c_int, [Tab, I64, I64, I64, I64, I64, P, OUT64]),
    "ktune_blast": (c_int, [Tab, P, P, P, P, P, I64, P, I64, I64, I64, I64, I64, P, I64, P]),
    "ktune_blockattn_workspace_size": (c_int, [Tab, c_int32, I64, I64, I64, I64, I64, c_int32,
                                               I64, P, OUT64]),
    "ktune_blockattn_fwd": (c_int, [Tab, P, P, P, P, P, P, I64, I64, I64, I64, I64, c_int32,
                                    I64, P, I64, P]),
    "ktune_blockattn_bwd": (c_int, [Tab, P, P, P, P, P, P, P, P, P, I64, I64, I64, I64, I64,
                                    c_int32, I64, P, I64, P]),
}


class KtuneError(RuntimeError):
    """libktune returned an error: .call, .status (its name), .code, .message."""

    def __init__(self, call, code, message, status=None):
        self.call, self.code, self.message = call, code, message
        self.status = status or str(code)
        super().__init__(f"ktune: {call}: {message} ({self.status})")


class KtuneInvalid(KtuneError, ValueError):
    """KTUNE_ERROR_INVALID: libktune refused an argument, shape or option."""


_lock = threading.Lock()
_default = None


def load(lib=None, table=None):
    """Opens libktune and a tuned table (ktune._find says where each is
    looked for) and makes it the runtime the ops use; returns it."""
    global _default
    rt = Runtime(lib, table)
    with _lock:
        _default = rt  # the previous one closes when the last call holding it is done
    return rt


def runtime():
    """The runtime the ops use, opened with the defaults on first use."""
    rt = _default
    if rt is None:
        with _lock:
            if _default is None:
                globals()["_default"] = Runtime()
            rt = _default
    return rt


def _ptr(t):
    return None if t is None else t.data_ptr()


class Runtime:
    """One libktune table. Safe to share between threads (libktune's tables
    are); the workspace-size cache is a dict written under the GIL."""

    def __init__(self, lib=None, table=None):
        self.lib_path, self.lib_found_by = _find.library_path(lib)
        self.table_path, self.table_found_by = _find.table_path(table)
        try:
            dll = ctypes.CDLL(self.lib_path)
        except OSError as e:
            raise KtuneError("dlopen", -1, f"{self.lib_path} ({self.lib_found_by}): {e}") from None
        missing = [name for name in SIGNATURES if not hasattr(dll, name)]
        if missing:
            raise KtuneError("dlopen", -1, f"{self.lib_path} lacks {', '.join(missing)}: "
                             f"not a libktune this package was written for")
        self._fn = {}
        for name, (res, args) in SIGNATURES.items():
            f = getattr(dll, name)
            f.restype, f.argtypes = res, args
            self._fn[name] = f
        self._dll = dll
        ver = self._fn["ktune_api_version"]()
        if ver != API_VERSION:
            raise KtuneError("ktune_api_version", -1, f"{self.lib_path} has API version {ver}, "
                             f"this package binds version {API_VERSION}")
        h = Tab()
        self._check("ktune_open_json", self._fn["ktune_open_json"](self.table_path.encode(),
                                                                    ctypes.byref(h)))
        self._h = h
        self._ws = {}

    def close(self):
        """Frees the table and unloads its kernels, after the device has
        finished what was queued (libktune's rule: nothing in flight). The
        ops must not use this runtime afterwards."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            try:
                if torch.cuda.is_initialized():
                    for i in range(torch.cuda.device_count()):
                        torch.cuda.synchronize(i)
            finally:
                self._fn["ktune_close"](h)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: torch may be gone already
            pass

    def __repr__(self):
        return (f"ktune.Runtime(lib={self.lib_path!r} ({self.lib_found_by}), "
                f"table={self.table_path!r} ({self.table_found_by}))")

    def _check(self, call, rc):
        if rc == 0:
            return
        msg = (self._fn["ktune_last_error"]() or b"").decode(errors="replace")
        name = (self._fn["ktune_status_name"](rc) or b"").decode()
        cls = KtuneInvalid if rc == STATUS["KTUNE_ERROR_INVALID"] else KtuneError
        raise cls(call, rc, msg or "(no message)", name)

    def set_option(self, name, value):
        self._check("ktune_set_option", self._fn["ktune_set_option"](
            self._h, name.encode(), str(value).encode()))

    def choose(self, family, shape, device=None):
        """What a call of `family` at `shape` (a runtime shape key, see
        include/ktune.h's ktune_choose) would run on `device` (default: the
        current one): a dict of ktune_choice's fields."""
        c = Choice()
        with _on(device):
            stream = torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else 0
            self._check("ktune_choose", self._fn["ktune_choose"](
                self._h, family.encode(), shape.encode(), stream, ctypes.byref(c)))
        out = {}
        for name, _ in Choice._fields_:
            v = getattr(c, name)
            out[name] = v.decode() if isinstance(v, bytes) else v
        return out

    # ---- calls: tensors in, checked by the ops before they get here ----

    def _workspace(self, key, dev, stream, query_args):
        """A workspace (uint8 tensor or None) from torch's caching allocator;
        its size is asked of libktune once per (call, shape, device)."""
        k = (key, dev.index) + tuple(query_args)
        n = self._ws.get(k)
        if n is None:
            if len(self._ws) > 4096:  # jagged batches bring new shapes all the time
                self._ws.clear()
            out = c_int64()
            self._check(key, self._fn[key](self._h, *query_args, stream, ctypes.byref(out)))
            n = self._ws[k] = out.value
        if n == 0:
            return None, 0
        return torch.empty(n, dtype=torch.uint8, device=dev), n

    def _launch(self, name, ws_name, dev, ws_args, call_args):
        prev = _enter(dev)
        try:
            stream = _stream(dev)
            ws, n = self._workspace(ws_name, dev, stream, ws_args)
            self._check(name, self._fn[name](self._h, *call_args, _ptr(ws), n, stream))
        finally:
            if prev is not None:
                torch.cuda.set_device(prev)
        # ws goes back to the caching allocator before the kernels ran: a
        # freed block serves later allocations on the same stream only, which
        # are queued behind them
        del ws

    def dense(self, x, W, y):
        (t, n), m = x.shape, W.shape[0]
        self._launch("ktune_dense", "ktune_dense_workspace_size", x.device, (t, n, m),
                     (x.data_ptr(), W.data_ptr(), y.data_ptr(), t, n, m))

    def lowrank(self, x, V, U, y):
        (t, n), r, m = x.shape, V.shape[0], U.shape[0]
        self._launch("ktune_lowrank", "ktune_lowrank_workspace_size", x.device, (t, n, m, r),
                     (x.data_ptr(), V.data_ptr(), U.data_ptr(), y.data_ptr(), t, n, m, r))

    def monarch(self, x, w1, w2, prepared, y):
        (t, n), (b, r, _), m = x.shape, w1.shape, y.shape[1]
        self._launch("ktune_monarch", "ktune_monarch_workspace_size", x.device,
                     (t, n, m, b, r),
                     (x.data_ptr(), w1.data_ptr(), w2.data_ptr(), _ptr(prepared),
                      prepared.numel(), y.data_ptr(), t, n, m, b, r))

    def blast(self, x, U, V, S, prepared, y):
        (t, n), (b, r, _), m = x.shape, V.shape, y.shape[1]
        self._launch("ktune_blast", "ktune_blast_workspace_size", x.device, (t, n, m, b, r),
                     (x.data_ptr(), U.data_ptr(), V.data_ptr(), S.data_ptr(), _ptr(prepared),
                      prepared.numel(), y.data_ptr(), t, n, m, b, r))

    def _prepare(self, family, weights, n, m, b, r):
        dev = weights[0].device
        size = c_int64()
        self._check(f"ktune_{family}_prepared_size", self._fn[f"ktune_{family}_prepared_size"](
            self._h, n, m, b, r, ctypes.byref(size)))
        out = torch.empty(size.value, dtype=torch.uint8, device=dev)
        with _on(dev):
            stream = _stream(dev)
            self._check(f"ktune_{family}_prepare", self._fn[f"ktune_{family}_prepare"](
                self._h, *(w.data_ptr() for w in weights), _ptr(out) if size.value else None,
                size.value, n, m, b, r, stream))
        return out

    def monarch_prepare(self, w1, w2):
        b, r, nb = w1.shape
        return self._prepare("monarch", (w1, w2), b * nb, b * w2.shape[1], b, r)

    def blast_prepare(self, U, V, S):
        b, r, nb = V.shape
        return self._prepare("blast", (U, V, S), b * nb, b * U.shape[1], b, r)

    def _attn(self, backward, q, cu, block, rope, rope_v, max_seqlen):
        T, H, d = q.shape
        return (backward, cu.shape[0] - 1, T, H, d, block,
                0 if rope is None else (2 if rope_v else 1), max_seqlen)

    def attn_fwd(self, q, k, v, cu, block, rope, rope_v, max_seqlen, o):
        a = self._attn(0, q, cu, block, rope, rope_v, max_seqlen)
        self._launch("ktune_blockattn_fwd", "ktune_blockattn_workspace_size", q.device, a,
                     (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), cu.data_ptr(),
                      _ptr(rope)) + a[1:])

    def attn_bwd(self, do, q, k, v, cu, block, rope, rope_v, max_seqlen, dq, dk, dv):
        a = self._attn(1, q, cu, block, rope, rope_v, max_seqlen)
        self._launch("ktune_blockattn_bwd", "ktune_blockattn_workspace_size", q.device, a,
                     (q.data_ptr(), k.data_ptr(), v.data_ptr(), do.data_ptr(), dq.data_ptr(),
                      dk.data_ptr(), dv.data_ptr(), cu.data_ptr(), _ptr(rope)) + a[1:])


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(dev):
    """torch's current stream on dev, as libktune takes it (NULL: the legacy
    default stream). The ops pass CUDA tensors only; a CPU device (the
    binding's tests against a recording stand-in library) gets NULL. The raw
    handle where torch has the call (no Stream object a launch)."""
    if dev.type != "cuda":
        return None
    if _raw_stream is not None and dev.index is not None:
        return _raw_stream(dev.index) or None
    return torch.cuda.current_stream(dev).cuda_stream


def _enter(dev):
    """Makes dev torch's current CUDA device if it is not; returns the one
    to restore, or None."""
    if dev.type == "cuda" and dev.index is not None:
        cur = torch.cuda.current_device()
        if cur != dev.index:
            torch.cuda.set_device(dev.index)
            return cur
    return None


class _on:
    """Makes `device` torch's current CUDA device for the call, when it is
    not already (libktune uses the stream's context, and for the legacy
    default stream, NULL, the current one)."""

    def __init__(self, device):
        self.dev = None if device is None else torch.device(device)
        self.prev = None

    def __enter__(self):
        if self.dev is not None:
            self.prev = _enter(self.dev)
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            torch.cuda.set_device(self.prev)
        return False
