"""ws_verify.py -- the per-family lines of a ws verification log
(bench/ws_verify.sh: tests/test_blockattn's GPU suite, ws only).

    python3 bench/ws_verify.py LOG     prints one line per (family, shape)

rows(text) gives (family, shape key, configs, worst rel. error against the
GPU reference, against the CPU reference) as strings, in the log's order;
the check scripts' summaries import it (sys.path holds bench/)."""
import re
import sys

LINE = re.compile(r"(blockattn_\w+) (\S+): (\d+) configs of ws, worst rel (\S+) \(GPU ref\) (\S+)")


def rows(text):
    return LINE.findall(text)


def read(path):
    """rows() of the log at path; none when it is missing."""
    try:
        with open(path) as f:
            return rows(f.read())
    except OSError:
        return []


def line(fam, key, n, g, c, what="configs"):
    return f"  {fam} {key}: {n} {what}, worst rel {g} (GPU ref) {c} (CPU ref)"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for r in read(sys.argv[1]):
        print(line(*r))
