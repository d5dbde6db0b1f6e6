"""keep.py -- what bench/shapes.py and bench/shapes_attn.py share for
KTUNE_SHAPES_KEEP: reading a results file, and carrying an earlier run's rows
of the entries a new run did not measure, each row marked with the run that
measured it."""
import json


def load(path):
    """The JSON document at path, or None when it cannot be read or parsed."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def carry_rows(rows, old_rows, key, this_run, old_run):
    """Marks rows (this run's) with this_run and appends to them, in place,
    the old rows whose key(row) this run did not measure, each keeping the run
    it already carries, else old_run; returns rows. The old rows are copied,
    not changed."""
    mine = {key(r) for r in rows}
    carried = [dict(r, run=r.get("run", old_run)) for r in old_rows if key(r) not in mine]
    for r in rows:
        r["run"] = this_run
    rows.extend(carried)
    return rows
