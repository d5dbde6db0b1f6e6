/*
 * replay.h -- run a strategy against a recorded exhaustive sweep, without a
 * GPU: each proposed config gets the time (or failure) the recording has
 * for it. Strategies are compared this way in CI, on H200 sweeps committed
 * as small text files (tests/data/replay/), and `ktune replay` does it from
 * such a file or straight from a sweep in a database.
 *
 * The file format (version 1) is plain text, one config per line:
 *
 *     # ktune replay 1
 *     family dense
 *     shape tokens=8192,in=8192,out=8192
 *     device NVIDIA H200 GPU-...
 *     source exhaustive sweep (seed 1) of bench/search.sh
 *     params BLOCK_M BLOCK_N BLOCK_K WARPS_M WARPS_N STAGES GROUP_M SPLIT_K CONSUMERS
 *     wgmma_ws 128 256 - - - 4 8 - 2 ok 309.42
 *     wgmma_ws 256 256 - - - 5 1 - 2 launch_error -
 *
 * A config line is the variant, one value per listed parameter ("-" where
 * the variant does not use it), the status and the median in microseconds
 * ("-" unless ok). Lines starting with '#' are comments. A struct
 * replay_rec owns what it holds; replay_rec_release() frees it.
 */
#ifndef KT_REPLAY_H
#define KT_REPLAY_H

#include <stdint.h>

#include "../kernels/family.h"
#include "../util/err.h"
#include "space.h"
#include "strategy.h"

struct replay_rec {
	const struct kt_family *f;
	struct kt_shape shape;
	char device[192];	/* "NVIDIA H200 GPU-..." ("" unknown) */
	char source[256];	/* where it came from */
	struct space sp;	/* the recorded configs */
	char (*status)[16];	/* per config */
	double *us;		/* per config; 0 unless "ok" */
};

/* KT_EINVAL (with the line number) for a malformed file, KT_ENOTFOUND for
 * a family this ktune does not have or a missing file. */
int replay_load_file(const char *path, struct replay_rec *r, struct kt_err *err);
/* The trials of sweep sweep_id of the database at db (read-only). */
int replay_load_db(const char *db, int64_t sweep_id, struct replay_rec *r, struct kt_err *err);
/* Writes r in the file format (source replaced by source when not NULL). */
int replay_write_file(const struct replay_rec *r, const char *path, const char *source,
		      struct kt_err *err);
void replay_rec_release(struct replay_rec *r);

/* The recording's best ok config: its index, or -1 when none is ok. */
long replay_best(const struct replay_rec *r);

/* The prior a guided strategy gets from other recordings of r's family:
 * every ok row of recs[i] for i != except (one group per recording; same
 * device when the device strings agree). *rows malloc'ed (free()). */
int replay_prior(const struct replay_rec *recs, int nrecs, int except,
		 struct strategy_prior_row **rows, long *nrows, struct kt_err *err);

struct replay_result {
	long trials;		/* real configs proposed (planted ones not counted) */
	long space;		/* real configs in the recording */
	long winner;		/* index of the best config it found; -1 none */
	double winner_us;	/* its recorded time */
	long best;		/* the recording's best */
	double best_us;
	double speed;		/* best_us / winner_us: 1 found the best */
	const char *stop;	/* strategy_stop_reason() */
};

/* Runs the strategy of spec over r's configs. */
int replay_run(const struct replay_rec *r, const struct strategy_spec *spec,
	       struct replay_result *res, struct kt_err *err);

#endif
