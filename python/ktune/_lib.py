"""libktune through ctypes: finding and opening it, the tuned table, and the
calls the ops make (pointers from the tensors, the current CUDA stream, a
workspace from torch's caching allocator).

SIGNATURES is the C API as this package calls it; tests/test_cpu.py parses
include/ktune.h and checks every entry against it, so a change of the header
that is not made here fails CI.
"""
import ctypes
import threading

import torch

from . import _find

SIGNATURES = {}  # filled in below, from include/ktune.h


class KtuneError(RuntimeError):
    """libktune returned an error (its code and message)."""

    def __init__(self, call, code, message):
        super().__init__(f"ktune: {call}: {message} (code {code})")
        self.call, self.code, self.message = call, code, message


_lock = threading.Lock()
_default = None


def load(lib=None, table=None):
    """Opens libktune and the tuned table (see ktune._find for where each is
    looked for) and makes it the runtime the ops use; returns it."""
    global _default
    rt = Runtime(lib, table)
    with _lock:
        old, _default = _default, rt
    if old is not None:
        old.close()
    return rt


def runtime():
    """The runtime the ops use, opened with the defaults on first use."""
    global _default
    rt = _default
    if rt is None:
        with _lock:
            if _default is None:
                _default = Runtime()
            rt = _default
    return rt


class Runtime:
    def __init__(self, lib=None, table=None):
        self.lib_path, self.lib_found_by = _find.library_path(lib)
        self.table_path, self.table_found_by = _find.table_path(table)
        try:
            self._dll = ctypes.CDLL(self.lib_path)
        except OSError as e:
            raise KtuneError("dlopen", -1, f"{self.lib_path} ({self.lib_found_by}): {e}") from None
        raise NotImplementedError("libktune binding: waiting for include/ktune.h")

    def close(self):
        pass
