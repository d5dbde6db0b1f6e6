#!/usr/bin/env bash
# export_build.sh -- the whole shipped export (every entry of
# data/h200-results.json) as a lib bundle: one make builds libktune with the
# table and every program's cubin (nvcc, -gencode per program's target,
# -Werror all-warnings), make check links every program's objects into one
# binary and answers every entry from the bundle's own cubins. No GPU.
# CI runs it; it writes bench/results/export_build.json:
#   {"entries", "linked", "targets", "programs", "nvcc", "commit", "date"}
#
#   bench/export_build.sh [KTUNE_BIN] [OUT_JSON]
set -euo pipefail
K=${1:-build/ktune}
OUTJ=${2:-bench/results/export_build.json}
CUDA=${CUDA:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$K" import data/h200-results.json --db "$tmp/h.db" >/dev/null
"$K" export --format lib --db "$tmp/h.db" --out "$tmp/b"
make -s -C "$tmp/b" -j2 CUDA="$CUDA" >"$tmp/make.log" 2>&1 || { tail -n 40 "$tmp/make.log"; exit 1; }
make -s -C "$tmp/b" -j2 CUDA="$CUDA" check >"$tmp/check.log" 2>&1 || { tail -n 40 "$tmp/check.log"; exit 1; }
grep -E '^entry |entries answered' "$tmp/check.log"
python3 - "$tmp" "$OUTJ" "$("$K" --version)" "$("$CUDA/bin/nvcc" --version | tail -n 2 | head -n 1)" <<'PY'
import datetime, json, re, sys
tmp, out, version, nvcc = sys.argv[1:5]
entries = len(json.load(open("data/h200-results.json"))["entries"])
m = re.search(r"^(\d+) of (\d+) entries answered from the bundle's cubins$",
              open(tmp + "/check.log").read(), re.M)
linked = int(m.group(1)) if m and int(m.group(2)) == entries else 0
mk = open(tmp + "/b/programs.mk").read()
targets = sorted(set(re.findall(r"code=(sm_\w+)", mk)))
programs = len(re.findall(r"^GENCODE_p\d+", mk, re.M))
commit = re.search(r"commit ([^ )]+)", version)
doc = {"entries": entries, "linked": linked, "targets": targets, "programs": programs,
       "nvcc": nvcc.strip(), "commit": commit.group(1) if commit else "unknown",
       "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "command": "bench/export_build.sh"}
json.dump(doc, open(out, "w"), indent=1)
open(out, "a").write("\n")
print(json.dumps(doc))
sys.exit(0 if linked == entries else 1)
PY
