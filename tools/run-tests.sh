#!/usr/bin/env bash
# Runs every test program given, even after a failure, and sums up with each
# program's wall time (CI has a time limit; this says where it goes).
# Each program prints its own CUnit summary; this exits non-zero if any failed.
failed=()
times=""
for t in "$@"; do
	echo "==== $(basename "$t")"
	start=$SECONDS
	if ! "$t"; then
		failed+=("$(basename "$t")")
	fi
	times+=$(printf '%6d s  %s' $((SECONDS - start)) "$(basename "$t")")$'\n'
done
printf '==== wall time per program\n%s' "$times"
echo "==== $(( $# - ${#failed[@]} )) of $# test programs passed"
if [ ${#failed[@]} -ne 0 ]; then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
