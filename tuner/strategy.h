/*
 * strategy.h -- which candidates a sweep evaluates, in which order.
 *
 * A strategy turns the valid space into an ordered plan of indices before
 * the sweep starts, so a resumed sweep (same strategy, budget and seed)
 * rebuilds exactly the same plan and skips what is already recorded.
 * Planted candidates (faults and hangs on purpose) are always kept.
 * NEEDSWORK: adaptive strategies (successive halving, guided) need the plan
 * to grow from results; the interface would then take a callback per trial.
 */
#ifndef KT_STRATEGY_H
#define KT_STRATEGY_H

#include <stdint.h>

#include "../kernels/family.h"
#include "space.h"

enum strategy_kind {
	STRATEGY_EXHAUSTIVE = 0,	/* every valid config */
	STRATEGY_RANDOM,		/* a seeded sample of `budget` configs, dealt
					 * round-robin over the variants */
};

/* "exhaustive", "random"; -1 for an unknown name. */
int strategy_parse(const char *name);
const char *strategy_name(enum strategy_kind k);

/* Writes the plan (indices into sp->cfg) to *order (malloc'ed) and its
 * length to *n. budget <= 0 means the whole space. */
int strategy_plan(enum strategy_kind k, const struct kt_family *f, const struct space *sp,
		  long budget, uint64_t seed, long **order, long *n, struct kt_err *err);

#endif
