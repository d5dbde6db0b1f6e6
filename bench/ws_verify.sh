# shellcheck shell=bash
# ws_verify.sh -- sourced by the ws check scripts (ws128_check, ws128_ab,
# ws256_check, ws256_persist_check): their shared verification step.
#
# ws_verify BLOCK KTUNE TEST LIMIT LOG
#   TEST (a tests/test_blockattn) runs its GPU suite on the small ragged
#   shapes at block BLOCK, ws configs only, with a missing GPU a failure,
#   KTUNE_BIN=KTUNE, within LIMIT seconds, its output into LOG; returns its
#   exit status. `python3 bench/ws_verify.py LOG` summarizes the log.
ws_verify() {
	KTUNE_REQUIRE_GPU=1 KTUNE_BLOCKATTN_GPU_ONLY=1 KTUNE_BLOCKATTN_SMALL_ONLY=1 \
		KTUNE_BLOCKATTN_VARIANT=ws KTUNE_BLOCKATTN_BLOCK="$1" KTUNE_BIN="$2" \
		timeout "$4" "$3" >"$5" 2>&1
}
