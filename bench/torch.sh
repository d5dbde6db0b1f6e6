#!/usr/bin/env bash
# torch.sh -- the PyTorch package (python/) on the GPU machine, in one call,
# from the repository root, with ktune built on the build machine by
#     make BUILD=build-dev STATIC_DEPS=1 -j2 all
# and pytest's and setuptools' wheels downloaded there into .whl/ (the GPU
# machine has no network; it may have no pytest, or a setuptools too old to
# build a wheel by itself):
#     pip download pytest==9.2.0 -d .whl --only-binary=:all: --python-version 3.12
#     pip download setuptools==80.9.0 -d .whl --only-binary=:all: --python-version 3.12 --no-deps
#
#   bench/torch.sh BUILD_DIR OUT_DIR [COMMIT]
#
# KTUNE_TORCH_STEPS (default "tests rows"):
#   tests  the package installed as such a machine installs it (pip install
#          --no-build-isolation --no-deps, into a folder of its own, with
#          BUILD_DIR/libktune.so bundled), then python/tests with
#          KTUNE_REQUIRE_GPU=1 against that install (the bundled library and
#          the shipped table found by themselves) -> OUT_DIR/pytest.log;
#          KTUNE_PYTEST_ARGS adds pytest arguments (e.g. -k attention)
#   rows   bench/torch_rows.py run (the ktune_torch rows of h200.json and the
#          via=torch rows of runtime.json, each beside ktune's own re-time in
#          this call) -> OUT_DIR/torch_rows.json, torch_rows.log;
#          KTUNE_C_ROWS=FILE: bench/runtime.sh's OUT/runtime.json of this call
#          (the shapes and their sweep_us); KTUNE_ROWS_ARGS adds arguments
#          ("--no-runtime": the h200.json rows only; "--workloads": none of them)
set -uo pipefail
B=${1:-build-dev}
OUT=${2:-bench/out-torch}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# shellcheck source=bench/commit.sh
. "$(dirname "$0")/commit.sh"
COMMIT=$(bench_commit "$PWD/$B/ktune" "${3:-}") || exit 2
steps=" ${KTUNE_TORCH_STEPS:-tests rows} "
status=0
t0=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ "$steps" == *" tests "* ]]; then
	echo "== python/tests on the GPU (KTUNE_REQUIRE_GPU=1)" >&2
	pyt=
	if ! python3 -c 'import pytest' 2>/dev/null; then
		ls .whl/pytest-*.whl >/dev/null 2>&1 ||
			{ echo "no pytest here and no .whl/pytest-*.whl: see the top of $0" >&2; exit 2; }
		for w in .whl/*.whl; do
			[[ "$w" == */setuptools-* ]] || python3 -m zipfile -e "$w" "$tmp/pytest"
		done
		pyt=$tmp/pytest
	fi
	pipi() {
		KTUNE_LIB=$PWD/$B/libktune.so python3 -m pip install -q --no-build-isolation --no-deps \
			--target "$tmp/pkg" ./python >>"$OUT/pip.log" 2>&1
	}
	# the machine's own setuptools first; if it cannot build a wheel, the
	# shipped one (said in the log, and the step is not a failure then)
	if ! pipi; then
		echo "pip install with this machine's setuptools failed; again with .whl's" >&2
		python3 -m zipfile -e .whl/setuptools-*.whl "$tmp/st"
		PYTHONPATH=$tmp/st pipi
	fi
	if [ -f "$tmp/pkg/ktune/lib/libktune.so" ]; then
		pkg=$tmp/pkg
		export KTUNE_TEST_INSTALLED=1
		echo "installed with pip --no-build-isolation --no-deps (libktune.so bundled)" >&2
	else
		pkg=$PWD/python
		export KTUNE_LIB=$PWD/$B/libktune.so
		echo "pip install FAILED (see pip.log): the tests run from the checkout" >&2
		status=1
	fi
	(cd "$tmp" && PYTHONPATH=$pkg${pyt:+:$pyt} KTUNE_REQUIRE_GPU=1 KTUNE_TEST_REQUIRE_LIB=1 \
		python3 -m pytest -q -p no:cacheprovider -rfE ${KTUNE_PYTEST_ARGS:-} "$OLDPWD/python/tests") \
		>"$OUT/pytest.log" 2>&1 ||
		{ echo "python/tests FAILED" >&2; status=1; }
	unset KTUNE_LIB
	tail -n 15 "$OUT/pytest.log" >&2
	echo "== tests: $(( $(date +%s) - t0 )) s" >&2
fi

if [[ "$steps" == *" rows "* ]]; then
	echo "== bench/torch_rows.py" >&2
	read -r -a rows_args <<<"${KTUNE_ROWS_ARGS:-}"
	python3 bench/torch_rows.py run "$OUT" --build "$B" --commit "$COMMIT" \
		${KTUNE_C_ROWS:+--c-rows "$KTUNE_C_ROWS"} "${rows_args[@]}"
	rc=$?
	[ $rc -ne 0 ] && status=$rc
fi
echo "== $(( $(date +%s) - t0 )) s" >&2
exit $status
