#!/usr/bin/env bash
# Runs every test program given, even after a failure, and sums up.
# Each program prints its own CUnit summary; this exits non-zero if any failed.
failed=()
for t in "$@"; do
	echo "==== $(basename "$t")"
	if ! "$t"; then
		failed+=("$(basename "$t")")
	fi
done
echo "==== $(( $# - ${#failed[@]} )) of $# test programs passed"
if [ ${#failed[@]} -ne 0 ]; then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
