#!/usr/bin/env bash
# check_layers.sh -- the tree keeps DESIGN's data flow: no two source files
# call each other, and no call runs up against the direction of the folders.
#
#   tools/check_layers.sh [BUILD]     (BUILD: the build directory, default build)
#
# Reads the objects of a finished build (BUILD/obj/<folder>/<file>.o), not the
# includes: file A uses file B when A's object needs a global symbol (a
# function or a variable) that B's object defines (nm), i.e. a real call or
# reference the linker resolves. tests/ and tools/ are outside the rule.
#
# Fails on
#  - a circle: two files that use each other, or a longer loop of files
#    (every strongly connected group of files is printed, with its arrows);
#  - an arrow against the folders' order, highest first:
#        cli -> server -> tuner -> {db, kernels, runtime} -> {templates, util}
#    plus: runtime/ (libktune) uses no db/ -- but runtime/table_db.c, which
#    is libktune_db (include/ktune_db.h): the one file that reads a table
#    from the store, built into its own archive so that libktune itself
#    needs no SQLite -- and folders of one rank use each other at most one
#    way (no circle between folders either).
# Prints every finding and exits 1; 0 when clean; 2 when the build is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ ! -d "$build/obj" ]; then
	echo "check_layers: no $build/obj: build first (make all)" >&2
	exit 2
fi

# One line per object: "<source> <D|U> <symbol>". Objects whose source is
# gone (a stale build) are skipped; the generated tables belong to the folder
# whose data they embed.
list=$(mktemp)
trap 'rm -f "$list"' EXIT INT TERM
n=0
while IFS= read -r o; do
	rel=${o#"$build"/obj/}
	case "$rel" in
	tests/* | tools/*) continue ;;
	templates_gen.o) src=templates/templates_gen.c ;;
	runtime_src_gen.o) src=runtime/runtime_src_gen.c ;;
	*)
		src=${rel%.o}.c
		[ -f "$src" ] || continue
		;;
	esac
	n=$((n + 1))
	nm -g "$o" | awk -v src="$src" '
		$1 == "U" { print src, "U", $2; next }
		NF == 3 && $2 ~ /^[BCDGRSTVW]$/ { print src, "D", $3 }'
done < <(find "$build/obj" -name '*.o' | sort) >"$list"
if [ "$n" -eq 0 ]; then
	echo "check_layers: no objects under $build/obj: build first (make all)" >&2
	exit 2
fi

py=python3
exec "$py" - "$list" "$n" <<'PY'
import sys
from collections import defaultdict

path, nobj = sys.argv[1], int(sys.argv[2])
defs, uses = defaultdict(set), defaultdict(set)
files = set()
for line in open(path):
    src, kind, sym = line.split()
    files.add(src)
    if kind == "D":
        defs[sym].add(src)
    else:
        uses[src].add(sym)

# edges[a][b]: the symbols a uses that b defines
edges = defaultdict(lambda: defaultdict(set))
for a, syms in uses.items():
    for s in syms:
        for b in defs.get(s, ()):
            if b != a:
                edges[a][b].add(s)

def folder(f):
    return f.split("/", 1)[0]

bad = 0

# Circles between files: strongly connected components (Tarjan, iterative).
index, low, onstack, stack, sccs = {}, {}, set(), [], []
counter = [0]
for root in sorted(files):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]; counter[0] += 1
    stack.append(root); onstack.add(root)
    while work:
        v, it = work[-1]
        nxt = next(it, None)
        if nxt is not None:
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                stack.append(nxt); onstack.add(nxt)
                work.append((nxt, iter(sorted(edges[nxt]))))
            elif nxt in onstack:
                low[v] = min(low[v], index[nxt])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); onstack.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

def show(syms, k=4):
    s = sorted(syms)
    return ", ".join(s[:k]) + (", ..." if len(s) > k else "")

for comp in sccs:
    bad += 1
    members = set(comp)
    pairs = [(a, b) for a in comp for b in comp if a < b and b in edges[a] and a in edges[b]]
    kind = "call each other" if len(comp) == 2 else "form a circle"
    print("circle: %s %s" % (" ".join(comp), kind))
    for a in comp:
        for b in sorted(edges[a]):
            if b in members:
                print("    %s -> %s: %s" % (a, b, show(edges[a][b])))

# Folders: each arrow must run down the order; same-rank folders are
# checked by the explicit rules and by circles between folders.
rank = {"cli": 0, "server": 1, "tuner": 2, "db": 3, "kernels": 3, "runtime": 3,
        "templates": 4, "util": 4}
forbidden = {("runtime", "db"): "libktune (runtime/) does not use the store (db/)"}
bridges = {"runtime/table_db.c"}	# libktune_db: see the header
fedges = defaultdict(lambda: defaultdict(list))
for a in sorted(edges):
    for b in sorted(edges[a]):
        fa, fb = folder(a), folder(b)
        if fa == fb:
            continue
        if fa not in rank or fb not in rank:
            print("layers: %s -> %s: folder %s has no place in the order" %
                  (a, b, fa if fa not in rank else fb))
            bad += 1
            continue
        fedges[fa][fb].append((a, b))
        why = None
        if rank[fb] < rank[fa]:
            why = "%s/ is above %s/" % (fb, fa)
        elif (fa, fb) in forbidden and a not in bridges:
            why = forbidden[(fa, fb)]
        if why:
            bad += 1
            print("against the layers: %s -> %s (%s): %s" % (a, b, why, show(edges[a][b])))
for fa in sorted(fedges):
    for fb in sorted(fedges[fa]):
        if fa < fb and rank.get(fa) == rank.get(fb) and fa in fedges[fb]:
            bad += 1
            print("folders %s/ and %s/ use each other:" % (fa, fb))
            for a, b in fedges[fa][fb] + fedges[fb][fa]:
                print("    %s -> %s: %s" % (a, b, show(edges[a][b])))

nedges = sum(len(v) for v in edges.values())
if bad:
    print("check_layers: %d finding(s) in %d files, %d arrows" % (bad, len(files), nedges),
          file=sys.stderr)
    sys.exit(1)
print("check_layers: %d files, %d arrows: no circles, every arrow runs down the layers"
      % (len(files), nedges))
PY
