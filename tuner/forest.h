/*
 * forest.h -- a small random forest for regression, the guided strategy's
 * surrogate model: bagged regression trees (bootstrap rows, a random third
 * of the features tried at each split, least squares), whose spread across
 * trees stands in for the prediction's uncertainty.
 *
 * Rows are dense feature vectors (double) with one target each. A struct
 * forest owns its trees; forest_free() releases them. Deterministic for a
 * given seed.
 */
#ifndef KT_FOREST_H
#define KT_FOREST_H

#include <stddef.h>
#include <stdint.h>

struct forest;

struct forest_opts {
	int trees;		/* 0: 32 */
	int max_depth;		/* 0: 12 */
	int min_leaf;		/* rows a leaf keeps at least; 0: 2 */
	uint64_t seed;
};

/* Fits on n rows of nfeat features (x[i * nfeat + j]) with targets y and
 * weights w (NULL: all 1; a weight is how often a row is drawn, relative).
 * NULL when out of memory or n == 0. */
struct forest *forest_fit(const double *x, const double *y, const double *w, long n, int nfeat,
			  const struct forest_opts *o);
/* Mean and standard deviation over the trees' predictions for one row. */
void forest_predict(const struct forest *f, const double *x, double *mean, double *sd);
void forest_free(struct forest *f);

#endif
