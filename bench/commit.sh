# shellcheck shell=bash
# commit.sh -- sourced by the bench scripts: the commit their results are
# labelled with is the one the binary was built from (`ktune --version`).
#
#   COMMIT=$(bench_commit "$K" "${3:-}") || exit 2
#
# With no COMMIT argument, the binary's. With one, it must name the same
# commit (either a prefix of the other): a results file labelled with a
# commit its binary was not built from is refused, not written. A binary
# built from a modified tree says so ("-dirty"), and the label keeps that. A
# binary that does not know its commit (built outside git, or before it was
# stamped) takes the argument, else "unknown".
bench_commit() {
	local k=$1 given=${2:-} built clean
	built=$("$k" --version 2>/dev/null | sed -n 's/^ktune .*(commit \([^ )]*\))$/\1/p')
	[ -n "$built" ] || built=unknown
	if [ "$built" = unknown ]; then
		echo "${given:-unknown}"
		return 0
	fi
	clean=${built%-dirty}
	if [ -n "$given" ] && [ "${clean#"$given"}" = "$clean" ] && [ "${given#"$clean"}" = "$given" ]; then
		echo "bench: COMMIT '$given' is not the commit $k was built from ($built)" >&2
		return 1
	fi
	[ "$built" = "$clean" ] || echo "bench: $k was built from a modified tree ($built)" >&2
	echo "$built"
}
