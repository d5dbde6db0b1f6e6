#!/usr/bin/env bash
# same_kernels.sh -- does the working tree compile any kernel differently
# from commit REV? Builds tools/kdigest against REV's library (in a temporary
# worktree) and against this tree's, runs both with the same arguments and
# compares their lists: every line is one kernel binary's content hash
# (tools/kdigest.c says which configs). No GPU needed: identical CUBINs run
# identically, so a restructuring of templates/ or kernels/ that keeps the
# lists equal changed no kernel and no stored time.
#
#   tools/same_kernels.sh [REV] [KDIGEST_ARGS...]
#
# REV defaults to HEAD; KDIGEST_ARGS to "--winners data/h200-results.json".
# Exit 0: the same; 1: the lists differ (the differing lines are printed);
# 2: a build or run failed.
set -uo pipefail
REV=${1:-HEAD}
[ $# -gt 0 ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--winners data/h200-results.json)
CUDA=${CUDA:-/usr/local/cuda}
ROOT=$(git rev-parse --show-toplevel) || exit 2
cd "$ROOT" || exit 2
OLD=$(git rev-parse --verify -q "$REV^{commit}") || { echo "same_kernels: no commit '$REV'" >&2; exit 2; }
TMP=$(mktemp -d) || exit 2
WT=$TMP/wt
cleanup() { git worktree remove --force "$WT" >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT

echo "same_kernels: building $(git rev-parse --short "$OLD") and the working tree" >&2
git worktree add -q --detach "$WT" "$OLD" || exit 2
make -s -C "$WT" -j"$(nproc)" BUILD=build-kd build-kd/libktune_core.a >"$TMP/old-build.log" 2>&1 ||
	{ tail -n 20 "$TMP/old-build.log" >&2; exit 2; }
# kdigest.c of this tree against REV's headers and library (REV may predate it)
cc -std=c11 -O2 -D_GNU_SOURCE -pthread -I"$WT" -I"$WT/build-kd" -I"$CUDA/include" \
	-o "$TMP/kdigest-old" tools/kdigest.c "$WT/build-kd/libktune_core.a" -L"$CUDA/lib64" \
	-Wl,-rpath,"$CUDA/lib64" -lsqlite3 -ljansson -lmicrohttpd -lnvrtc -ldl -lm ||
	exit 2
make -s -j"$(nproc)" build/kdigest >"$TMP/new-build.log" 2>&1 ||
	{ tail -n 20 "$TMP/new-build.log" >&2; exit 2; }
"$TMP/kdigest-old" "${ARGS[@]}" >"$TMP/old.txt" || exit 2
build/kdigest "${ARGS[@]}" >"$TMP/new.txt" || exit 2
n=$(wc -l <"$TMP/new.txt")
if cmp -s "$TMP/old.txt" "$TMP/new.txt"; then
	echo "same_kernels: the same $n kernel binaries as $(git rev-parse --short "$OLD")"
	exit 0
fi
echo "same_kernels: kernels differ from $(git rev-parse --short "$OLD") (- old, + new):"
diff "$TMP/old.txt" "$TMP/new.txt" | grep '^[<>]' | sed 's/^</-/; s/^>/+/' | cut -c1-300
exit 1
