/*
 * guided.h -- the guided strategy's search (tuner/strategy.h says how it is
 * used; tuner/strategy.c is the only caller).
 *
 * A config is a feature vector: its variant (one-hot), log2(1 + value) of
 * each parameter its variant uses (-1 for the others), log2 of each shape
 * dimension, and whether the row comes from this device. The target is
 * log(time / best time of its problem), so times of other problems and
 * devices (the transfer prior) teach the shape of the space without their
 * scale; a failed config gets log 4. A random forest (tuner/forest.h) is
 * refitted after every batch; the next batch is the configs of largest
 * expected improvement over the best so far (the forest's mean and spread
 * as a normal), one the incumbent's best predicted neighbour (one parameter
 * away, else two), one drawn at random on budgets of 40 or more. The search
 * stops when the incumbent is a local best and the largest expected
 * improvement stayed below the noise for two batches in a row, or at the
 * budget.
 */
#ifndef KT_GUIDED_H
#define KT_GUIDED_H

#include <stdint.h>

#include "../kernels/family.h"
#include "../util/err.h"
#include "space.h"
#include "strategy.h"

struct guided;

/* Over the candidates cand[0..ncand) (indices into sp, which must outlive
 * it). budget > 0; noise > 0. */
int guided_new(const struct kt_family *f, const struct kt_shape *s, const struct space *sp,
	       const long *cand, long ncand, long budget, uint64_t seed, double noise,
	       const struct strategy_prior *prior, struct guided **out, struct kt_err *err);
void guided_free(struct guided *g);
/* As strategy_next() and strategy_report(). */
long guided_next(struct guided *g, long *idx, long max);
void guided_report(struct guided *g, long idx, double us);
/* "budget", "space" or "converged" once done, else "". */
const char *guided_stop_reason(const struct guided *g);

#endif
