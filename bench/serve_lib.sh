#!/usr/bin/env bash
# serve_lib.sh -- sourced by bench/server.sh and bench/server_sweep.sh: runs
# `ktune serve` on 127.0.0.1 port 0 in the background and waits for the port
# it prints. A caller sets `tmp` (a scratch folder) and traps serve_cleanup
# on EXIT; serve_start sets `pid` and `port`.

pid=
port=

# serve_cleanup: stops the server and removes $tmp.
# shellcheck disable=SC2154  # tmp is the caller's, set before it sources this
serve_cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}

# serve_start KTUNE ARGS...: KTUNE serve ARGS --listen 127.0.0.1:0, its log
# in $tmp/serve.log; exits the script when the server does not come up.
serve_start() {
	local k=$1
	shift
	"$k" serve "$@" --listen 127.0.0.1:0 2>"$tmp/serve.log" &
	pid=$!
	port=
	for _ in $(seq 100); do
		port=$(sed -n 's|^ktune serve: http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/serve.log")
		[ -n "$port" ] && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "${0##*/}: the server did not start" >&2
	cat "$tmp/serve.log" >&2
	exit 1
}
