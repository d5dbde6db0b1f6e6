#!/usr/bin/env bash
# deps.sh -- makes sure the Debian packages ktune builds and tests with are
# installed. As root it installs what is missing with apt-get; otherwise it
# prints the exact apt-get line and fails, so nothing half-works.
#   tools/deps.sh          build + test dependencies
#   tools/deps.sh --bench  also wrk (the server benchmark)
#   tools/deps.sh --ci     also the lint tools, clang (fuzzing), python3-venv
set -u
# util-linux: setpriv, which test_reliab uses to read a database as another user
pkgs=(gcc g++ make libc6-dev pkg-config libsqlite3-dev libjansson-dev libmicrohttpd-dev
      libgnutls28-dev libcunit1-dev libjs-chart.js chromium util-linux)
# python3-venv: python/ci.sh tests the Python package in a fresh venv
pkgs+=(python3 python3-venv)
case "${1:-}" in
--bench) pkgs+=(wrk) ;;
--lint) pkgs+=(shellcheck python3-yaml) ;;
# CI: the lint tools, and what the reliability steps need (tools/fuzz.sh:
# clang and its libFuzzer and sanitizer runtimes; tools/schemathesis.sh: a
# Python venv for the pinned schemathesis)
--ci) pkgs+=(shellcheck python3-yaml clang libclang-rt-14-dev python3-venv) ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "deps: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
			echo "deps: apt-get install failed" >&2
			exit 1
		fi
	else
		echo "deps: missing Debian packages; run as root:" >&2
		echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
fi
cuda=${CUDA:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ] || [ ! -e "$cuda/lib64/libnvrtc.so" ]; then
	echo "deps: the CUDA toolkit (NVRTC) was not found under $cuda; install CUDA 12.4+ there" >&2
	echo "      or pass CUDA=/path/to/cuda to make" >&2
	exit 1
fi
exit 0
