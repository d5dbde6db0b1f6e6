#!/usr/bin/env bash
# fuzz.sh -- coverage-guided fuzzing (libFuzzer, clang) of what ktune parses
# from outside, under AddressSanitizer and UndefinedBehaviorSanitizer:
#   http    raw HTTP requests to the real server, in process (fuzz_http.c)
#   shape   shape, config and max_distance text of every family (fuzz_shape.c)
#   import  JSON export documents, imported into a store (fuzz_import.c)
#
#   tools/fuzz.sh [SECONDS_EACH] [TARGET...]     (default 100 s, all three)
#
# Each target starts from its seed corpus, tests/fuzz/corpus/TARGET/ (kept
# small, in the repository); what it finds stays in a scratch directory. A
# crash, a sanitizer report, a leak or a timeout fails the run and its input
# is printed. Prints one line per target, "fuzz: TARGET: N runs, C crashes",
# last. Needs clang and libclang-rt (Debian: clang, libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-100}
shift || true
targets=("$@")
[ ${#targets[@]} -ne 0 ] || targets=(http shape import)
cuda=${CUDA:-/usr/local/cuda}
build="build-fuzz"
san=address,undefined
flags=(-O1 -g -fno-sanitize-recover=all -fno-omit-frame-pointer)

# the library under the fuzzer's flags: a build made with others is made again
stamp="clang ${flags[*]} $san"
if [ "$(cat "$build/.flags" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$build"
	mkdir -p "$build"
	echo "$stamp" >"$build/.flags"
fi
make --no-print-directory BUILD=$build CC=clang SANITIZE=$san,fuzzer-no-link CFLAGS="${flags[*]}" \
	-j2 $build/libktune_core.a
for t in "${targets[@]}"; do
	echo "  FUZZ    $build/fuzz_$t"
	clang -std=c11 -D_GNU_SOURCE -I. -I$build -I"$cuda/include" "${flags[@]}" \
		-fsanitize=$san,fuzzer -pthread -o $build/fuzz_"$t" tests/fuzz/fuzz_"$t".c \
		$build/libktune_core.a -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" \
		-lsqlite3 -ljansson -lmicrohttpd -lnvrtc -ldl -lm
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
summary=()
for t in "${targets[@]}"; do
	mkdir -p "$tmp/$t"
	log="$tmp/$t.log"
	if ! $build/fuzz_"$t" -max_total_time="$secs" -timeout=25 -rss_limit_mb=4096 \
		-max_len=16384 -print_final_stats=1 -artifact_prefix="$tmp/$t-" \
		"$tmp/$t" tests/fuzz/corpus/"$t" >"$log" 2>&1; then
		status=1
		echo "fuzz: $t FAILED:" >&2
		tail -60 "$log" >&2
		for a in "$tmp/$t"-crash-* "$tmp/$t"-leak-* "$tmp/$t"-timeout-* "$tmp/$t"-oom-*; do
			[ -e "$a" ] || continue
			echo "fuzz: $t: input $a (base64):" >&2
			base64 "$a" | head -20 >&2
		done
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	crashes=$(find "$tmp" -maxdepth 1 \( -name "$t-crash-*" -o -name "$t-leak-*" -o \
		-name "$t-timeout-*" -o -name "$t-oom-*" \) | wc -l)
	summary+=("fuzz: $t: ${runs:-0} runs, $crashes crashes")
done
printf '%s\n' "${summary[@]}"
exit $status
