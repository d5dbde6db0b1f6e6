/*
 * strategy.h -- which candidates a sweep evaluates, in which order, and when
 * it has seen enough.
 *
 * A strategy is a conversation: strategy_next() proposes candidates
 * (indices into the space), the caller evaluates them and tells each outcome
 * with strategy_report(), and the next proposal may depend on what was
 * reported. The same loop drives a sweep on a GPU (tuner/sweep.c) and a
 * replay of a recorded sweep (tuner/replay.c), so a strategy is compared
 * exactly as it runs.
 *
 *   exhaustive  every valid config, in the family's order;
 *   random      a seeded sample of `budget` configs, dealt round-robin over
 *               the variants so that a small budget still sees every one;
 *   halving     successive halving over arms (a variant with its first two
 *               varying parameters, e.g. wgmma_ws 128x256): every arm gets a
 *               few configs, the better half of the arms (by their best
 *               time) gets twice as many more, and so on, until one arm is
 *               left and takes what remains of the budget;
 *   guided      a random forest fitted on the trials as they land (and on
 *               the family's trials at other shapes and devices: transfer)
 *               proposes the configs of largest expected improvement, and
 *               stops once no config is expected to gain more than the
 *               timing noise (tuner/guided.h).
 * docs/search.md says how they are compared, and what was measured.
 *
 * Planted candidates (faults and hangs on purpose) always come first and
 * never count against the budget. A strategy proposes no candidate twice.
 * It is deterministic for a given seed and sequence of reports, so a
 * resumed sweep that reports its recorded outcomes again, as they are
 * proposed, follows the same path; and since the sweep never evaluates a
 * config it has a trial of, nothing is evaluated twice whatever the path.
 */
#ifndef KT_STRATEGY_H
#define KT_STRATEGY_H

#include <stdint.h>

#include "../kernels/family.h"
#include "../util/err.h"
#include "space.h"

enum strategy_kind {
	STRATEGY_EXHAUSTIVE = 0,
	STRATEGY_RANDOM,
	STRATEGY_HALVING,
	STRATEGY_GUIDED,
};

/* The one place strategy names are known (the CLI, the server's job
 * runner and the sweep all ask here). -1 for an unknown name; NULL is
 * exhaustive. */
int strategy_parse(const char *name);
const char *strategy_name(enum strategy_kind k);
/* 0 when name is a strategy (or NULL), else -1 with KT_EINVAL and a message
 * listing them. */
int strategy_check(const char *name, struct kt_err *err);

/* What the family's trials at other shapes and devices say (guided only):
 * each row's time is comparable only within its group (one problem on one
 * device). */
struct strategy_prior_row {
	struct kt_shape shape;
	struct kt_config cfg;
	double us;
	int group;
	int same_device;	/* 1: the device of this sweep */
};
struct strategy_prior {
	const struct strategy_prior_row *rows;
	long n;
};

struct strategy_spec {
	enum strategy_kind kind;
	/* Real (not planted) candidates to evaluate at most. 0: all for
	 * exhaustive and random; 30% of the space for halving; 20% for
	 * guided (which usually stops earlier, on its own). */
	long budget;
	uint64_t seed;
	/* guided: the relative gain below which searching on is not worth it
	 * (0: 0.005, the median-of-repetitions noise seen on the H200) */
	double noise;
	const struct strategy_prior *prior;	/* may be NULL */
};

struct strategy;

/* A strategy over the configs of sp (which must outlive it) for family f
 * at shape s. KT_EINVAL for a bad spec. */
int strategy_new(const struct strategy_spec *spec, const struct kt_family *f,
		 const struct kt_shape *s, const struct space *sp, struct strategy **out,
		 struct kt_err *err);
void strategy_free(struct strategy *st);	/* NULL ok */

/* Writes up to max candidate indices into idx and returns how many; 0 when
 * the strategy is done. Call it again only after every candidate it gave
 * was reported. */
long strategy_next(struct strategy *st, long *idx, long max);
/* The outcome of candidate idx: its time in microseconds, or <= 0 when it
 * did not run correctly (wrong, fault, compile error, ...). */
void strategy_report(struct strategy *st, long idx, double us);

/* How many real candidates the strategy expects to propose (its budget, or
 * the space): a progress total, not a promise. */
long strategy_planned(const struct strategy *st);
/* Why it stopped: "space" (all proposed), "budget", or "converged" (guided:
 * no expected gain above the noise); "" while it goes on. */
const char *strategy_stop_reason(const struct strategy *st);

#endif
