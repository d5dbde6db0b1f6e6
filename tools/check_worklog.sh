#!/bin/sh
# check_worklog.sh -- code comments state contracts and reasons, not history.
#
# Scans the comments of every tracked C, CUDA and header file (or the files
# named on the command line) for work-log wording: numbered work periods
# ("14th session"), dates, measured times and speed ratios, "tried, not
# kept" notes, commit ids offered as provenance, and pointers to documents
# that are not in the repository (KERNELS.md and kin: the repository's own
# pages are docs/). Measurements and history belong in docs/ and
# bench/NOTES-*.md, and in commit messages.
#
# Prints FILE:LINE: RULE: the comment (LINE is where the comment starts;
# consecutive // lines count as one comment) and exits 1 on any hit, 0 when
# clean, 2 on a usage error. Run from anywhere inside the repository.
set -eu

cd "$(git rev-parse --show-toplevel)"
if [ $# -gt 0 ]; then
	files="$*"
else
	files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
fi
for f in $files; do
	[ -f "$f" ] || { echo "check_worklog: no such file: $f" >&2; exit 2; }
done

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM

# One record per comment: FILE <tab> LINE <tab> its text on one line. Strings
# and character literals are skipped, so "/*" inside them opens nothing.
# shellcheck disable=SC2086
awk '
FNR == 1 { flush(); state = 0 }
function flush() {
	if (text != "") {
		gsub(/[ \t]+/, " ", text)
		printf "%s\t%d\t%s\n", file, start, text
	}
	text = ""
}
{
	line = $0; n = length(line); i = 1
	if (state == 0 && text != "" && !match(line, /^[ \t]*\/\//))
		flush()		# a run of // lines ended
	while (i <= n) {
		c = substr(line, i, 1); c2 = substr(line, i, 2)
		if (state == 1) {			# inside /* */
			if (c2 == "*/") { state = 0; flush(); i += 2; continue }
			text = text c; i++; continue
		}
		if (state == 2 || state == 3) {		# inside "..." or '\''...'\''
			if (c == "\\") { i += 2; continue }
			if ((state == 2 && c == "\"") || (state == 3 && c == "'\''")) state = 0
			i++; continue
		}
		if (c2 == "/*") { flush(); state = 1; file = FILENAME; start = FNR; i += 2; continue }
		if (c2 == "//") {
			if (text == "") { file = FILENAME; start = FNR }
			text = text " " substr(line, i + 2); break
		}
		if (c == "\"") state = 2
		else if (c == "'\''") state = 3
		i++
	}
	if (state == 1) text = text " "
	if (state == 2 || state == 3) state = 0	# an unterminated literal ends with its line
}
END { flush() }
' $files > "$tmp"

hits=0
# rule name, then an extended regular expression matched without case
rule() {
	out=$(awk -F '\t' -v re="$2" -v name="$1" '
		tolower($3) ~ re {
			t = $3; if (length(t) > 160) t = substr(t, 1, 157) "..."
			printf "%s:%s: %s:%s\n", $1, $2, name, t
		}' "$tmp")
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		hits=$((hits + $(printf '%s\n' "$out" | wc -l)))
	fi
}

rule "work period" '[0-9]+(st|nd|rd|th)[^a-z0-9]+session|(this|last|next|earlier|previous|same|that) session'
rule "date" '(^|[^0-9])20[0-9][0-9]-[01][0-9]-[0-3][0-9]([^0-9]|$)|(^|[^a-z])(jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? [0-9][0-9]?(st|nd|rd|th)?([^0-9a-z]|$)|[0-9](st|nd|rd|th) of (january|february|march|april|may|june|july|august|september|october|november|december)'
rule "measured time" '[0-9](\.[0-9]+)?[ ]*(us|µs)([^a-z0-9]|$)|[0-9][.0-9]*[ ]*(-|->|→)[ ]*[0-9][.0-9]* ?(us|µs|ms)|(measured|took)[^.;]* [0-9][.0-9]* ?ms([^a-z]|$)'
rule "speed ratio" '[0-9](\.[0-9]+)? ?x (of )?cublas|cublas ?= ?1([^0-9]|$)|[0-9]\.[0-9]+x (faster|slower)'
rule "history" '(^|[.;:(*] |and |was |were |but |measured )not kept|measured (dead|slow|slower|and not kept|and dropped)|tried and (slower|dropped|not kept)|(was|were|ran|measured) slower|reverted (in|at|since)|was reverted|were reverted|measured (on|in) the h200|\(h200[,;:)]|on the h200 \('
# a git object id: 7 to 12 hex digits with a letter and a digit, not 0x...
out=$(awk -F '\t' '
	{
		t = tolower($3); rest = t
		while (match(rest, /[0-9a-z]+/)) {
			w = substr(rest, RSTART, RLENGTH); before = substr(rest, 1, RSTART - 1)
			rest = substr(rest, RSTART + RLENGTH)
			if (length(w) >= 7 && length(w) <= 12 && w !~ /[^0-9a-f]/ && w ~ /[0-9]/ &&
			    w ~ /[a-f]/ && before !~ /0x$/) {
				s = $3; if (length(s) > 160) s = substr(s, 1, 157) "..."
				printf "%s:%s: commit id:%s\n", $1, $2, s
				break
			}
		}
	}' "$tmp")
if [ -n "$out" ]; then
	printf '%s\n' "$out"
	hits=$((hits + $(printf '%s\n' "$out" | wc -l)))
fi
rule "outside pointer" '(^|[^a-z/])(kernels|bench|design|device|style|kinds)\.md|\.\./shared/'

if [ "$hits" -gt 0 ]; then
	echo "check_worklog: $hits comment(s) with work-log wording or pointers outside the repository;" >&2
	echo "  measurements and history go to docs/ and bench/NOTES-*.md, the docs pointed at to docs/" >&2
	exit 1
fi
exit 0
