#!/usr/bin/env bash
# ci.sh -- the Python package's CI (no GPU), from the repository root:
#     python/ci.sh [VENV_DIR]      (default build-py/venv)
# A fresh venv with the pinned torch and pytest from PyPI (the CUDA wheel: it
# imports without a GPU), then the CPU tests three ways: from the checkout
# (PYTHONPATH=python), installed as the GPU machine installs it (pip install
# --no-build-isolation --no-deps ./python) and installed plainly (pip install
# ./python). GPU tests skip here. Run it after `make all`: the tests load the
# build's libktune.so (build/libktune.so, which pip install bundles) and check
# the binding against include/ktune.h.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-build-py/venv}
TORCH=torch==2.11.0
PYTEST=pytest==9.2.0
rm -rf "$VENV"
python3 -m venv "$VENV"
py=$(cd "$VENV" && pwd)/bin/python
"$py" -m pip install -q "$TORCH" "$PYTEST" setuptools==80.9.0 numpy==2.4.6
"$py" -c 'import torch, sys; print(f"python {sys.version.split()[0]}, torch {torch.__version__}")'
# run from outside the checkout so that only the intended ktune is importable
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tests=$PWD/python/tests

echo "-- from the checkout (PYTHONPATH=python)"
(cd "$work" && PYTHONPATH=$OLDPWD/python KTUNE_TEST_REQUIRE_LIB=1 "$py" -m pytest -q -p no:cacheprovider "$tests")

echo "-- pip install --no-build-isolation --no-deps ./python"
"$py" -m pip install -q --no-build-isolation --no-deps ./python
(cd "$work" && KTUNE_TEST_INSTALLED=1 KTUNE_TEST_REQUIRE_LIB=1 "$py" -m pytest -q -p no:cacheprovider "$tests")
"$py" -m pip uninstall -q -y ktune

echo "-- pip install ./python"
"$py" -m pip install -q ./python
(cd "$work" && KTUNE_TEST_INSTALLED=1 KTUNE_TEST_REQUIRE_LIB=1 "$py" -m pytest -q -p no:cacheprovider "$tests")
