#!/usr/bin/env bash
# The bench scripts' Python tests (standard library unittest; no GPU, no torch).
exec python3 -m unittest discover -s "$(dirname "$0")" -p 'test_*.py' -v
