"""Where the package finds libktune.so and the tuned table.

Library, first found wins:
  1. the path given to ktune.load(lib=...);
  2. $KTUNE_LIB;
  3. the copy bundled in the package (ktune/lib/libktune.so, put there by
     `pip install` from $KTUNE_LIB or the repository's build/libktune.so);
  4. run from a ktune checkout (PYTHONPATH=python): the checkout's
     build/libktune.so.
Table, first found wins:
  1. the path given to ktune.load(table=...);
  2. $KTUNE_TABLE;
  3. the H200 table shipped in the package (ktune/data/h200-results.json);
  4. run from a checkout: its data/h200-results.json.
A path that is given (argument or variable) but is not a file is an error,
never silently skipped for the next candidate.
"""
import os

PKG = os.path.dirname(os.path.abspath(__file__))
# set when the package runs from python/ktune inside a ktune checkout
_CHECKOUT = os.path.dirname(os.path.dirname(PKG))


class NotFound(RuntimeError):
    """No library or table where the package looks; the message lists where it looked."""


def _in_checkout():
    return (os.path.isfile(os.path.join(_CHECKOUT, "kernels", "family.h"))
            and os.path.basename(os.path.dirname(PKG)) == "python")


def _pick(what, given, env, candidates):
    for how, path in ((f"the {what} argument", given), (f"${env}", os.environ.get(env) or None)):
        if path is None:
            continue
        if not os.path.isfile(path):
            raise NotFound(f"ktune: {how} names {path!r}, which is not a file")
        return os.path.abspath(path), how
    for how, path in candidates:
        if os.path.isfile(path):
            return path, how
    looked = ", ".join(f"{how} ({path})" for how, path in candidates)
    raise NotFound(f"ktune: no {what} found: pass {what}= to ktune.load(), set ${env}, "
                   f"or install the package with one bundled; looked at {looked}")


def library_path(lib=None):
    """(path, how it was found) of libktune.so."""
    cands = [("the bundled copy", os.path.join(PKG, "lib", "libktune.so"))]
    if _in_checkout():
        cands.append(("the checkout's build", os.path.join(_CHECKOUT, "build", "libktune.so")))
    return _pick("lib", lib, "KTUNE_LIB", cands)


def table_path(table=None):
    """(path, how it was found) of the tuned table (an exported JSON)."""
    cands = [("the shipped H200 table", os.path.join(PKG, "data", "h200-results.json"))]
    if _in_checkout():
        cands.append(("the checkout's data", os.path.join(_CHECKOUT, "data", "h200-results.json")))
    return _pick("table", table, "KTUNE_TABLE", cands)
