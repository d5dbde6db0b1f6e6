/*
 * forest.c -- bagged regression trees (see forest.h).
 *
 * Each tree sees a bootstrap sample, held as a count per row (a weight), so
 * no row is copied. A node tries a random third of the features; for each
 * it sorts its rows by that feature and scans the cuts between distinct
 * values with running sums, keeping the cut of least weighted squared error.
 */
#include "forest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/hash.h"

struct fnode {
	int feat;		/* -1: a leaf */
	double cut;		/* go left when x[feat] <= cut */
	int left, right;
	double value;		/* the leaf's mean */
};

struct ftree {
	struct fnode *nodes;
	int n, cap;
};

struct forest {
	int ntrees, nfeat;
	struct ftree *trees;
};

struct fit {
	const double *x, *y;
	int nfeat, max_depth, min_leaf, mtry;
	double *cnt;		/* bootstrap weight of each row */
	uint64_t rng;
	struct ftree *t;
	/* scratch for one node's sort */
	struct pair {
		double v;
		long row;
	} *pairs;
	int *feats;
	int failed;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *p = a, *q = b;

	if (p->v != q->v)
		return p->v < q->v ? -1 : 1;
	return p->row < q->row ? -1 : p->row > q->row;
}

static int node_new(struct ftree *t)
{
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 64;
		struct fnode *nn = realloc(t->nodes, (size_t)cap * sizeof(*nn));

		if (!nn)
			return -1;
		t->nodes = nn;
		t->cap = cap;
	}
	memset(&t->nodes[t->n], 0, sizeof(t->nodes[0]));
	t->nodes[t->n].feat = -1;
	return t->n++;
}

/* Grows the subtree over rows[0..m) and returns its node index (-1: out of
 * memory). */
static int grow(struct fit *f, long *rows, long m, int depth)
{
	double sw = 0, sy = 0, syy = 0, best_gain = 0, best_cut = 0;
	int node, best_feat = -1, k;
	long i, nleft = 0;

	for (i = 0; i < m; i++) {
		double w = f->cnt[rows[i]], y = f->y[rows[i]];

		sw += w;
		sy += w * y;
		syy += w * y * y;
	}
	if ((node = node_new(f->t)) < 0)
		return -1;
	f->t->nodes[node].value = sw > 0 ? sy / sw : 0;
	if (depth >= f->max_depth || m < 2 * f->min_leaf || sw <= 0)
		return node;
	/* A random subset of mtry features (partial Fisher-Yates). */
	for (k = 0; k < f->nfeat; k++)
		f->feats[k] = k;
	for (k = 0; k < f->mtry; k++) {
		int r = k + (int)(kt_splitmix64(&f->rng) % (uint64_t)(f->nfeat - k)), t = f->feats[k];

		f->feats[k] = f->feats[r];
		f->feats[r] = t;
	}
	for (k = 0; k < f->mtry; k++) {
		int ft = f->feats[k];
		double lw = 0, ly = 0, lyy = 0;

		for (i = 0; i < m; i++) {
			f->pairs[i].v = f->x[rows[i] * f->nfeat + ft];
			f->pairs[i].row = rows[i];
		}
		qsort(f->pairs, (size_t)m, sizeof(f->pairs[0]), pair_cmp);
		if (f->pairs[0].v == f->pairs[m - 1].v)
			continue;
		for (i = 0; i < m - 1; i++) {
			double w = f->cnt[f->pairs[i].row], y = f->y[f->pairs[i].row];
			double rw, ry, ryy, sse, gain;

			lw += w;
			ly += w * y;
			lyy += w * y * y;
			if (f->pairs[i].v == f->pairs[i + 1].v || i + 1 < f->min_leaf ||
			    m - i - 1 < f->min_leaf || lw <= 0 || lw >= sw)
				continue;
			rw = sw - lw;
			ry = sy - ly;
			ryy = syy - lyy;
			sse = (lyy - ly * ly / lw) + (ryy - ry * ry / rw);
			gain = (syy - sy * sy / sw) - sse;
			if (gain > best_gain + 1e-12) {
				best_gain = gain;
				best_feat = ft;
				best_cut = 0.5 * (f->pairs[i].v + f->pairs[i + 1].v);
			}
		}
	}
	if (best_feat < 0)
		return node;
	/* Partition rows in place: left first. */
	for (i = 0; i < m; i++)
		if (f->x[rows[i] * f->nfeat + best_feat] <= best_cut) {
			long t = rows[nleft];

			rows[nleft++] = rows[i];
			rows[i] = t;
		}
	{
		int l = grow(f, rows, nleft, depth + 1), r;

		if (l < 0)
			return -1;
		if ((r = grow(f, rows + nleft, m - nleft, depth + 1)) < 0)
			return -1;
		/* the nodes array may have moved: index, never hold pointers */
		f->t->nodes[node].feat = best_feat;
		f->t->nodes[node].cut = best_cut;
		f->t->nodes[node].left = l;
		f->t->nodes[node].right = r;
	}
	return node;
}

struct forest *forest_fit(const double *x, const double *y, const double *w, long n, int nfeat,
			  const struct forest_opts *o)
{
	struct forest *fo = NULL;
	struct fit f;
	long *rows = NULL, i, m;
	double *cdf = NULL, total = 0;
	int t;

	if (n <= 0 || nfeat <= 0)
		return NULL;
	memset(&f, 0, sizeof(f));
	f.x = x;
	f.y = y;
	f.nfeat = nfeat;
	f.max_depth = o && o->max_depth > 0 ? o->max_depth : 12;
	f.min_leaf = o && o->min_leaf > 0 ? o->min_leaf : 2;
	f.mtry = nfeat / 3 > 0 ? nfeat / 3 : 1;
	f.rng = (o ? o->seed : 0) ^ 0x5eed5eedULL;
	if (!(fo = calloc(1, sizeof(*fo))))
		return NULL;
	fo->ntrees = o && o->trees > 0 ? o->trees : 32;
	fo->nfeat = nfeat;
	if (!(fo->trees = calloc((size_t)fo->ntrees, sizeof(*fo->trees))) ||
	    !(f.cnt = malloc((size_t)n * sizeof(double))) ||
	    !(rows = malloc((size_t)n * sizeof(long))) ||
	    !(f.pairs = malloc((size_t)n * sizeof(*f.pairs))) ||
	    !(f.feats = malloc((size_t)nfeat * sizeof(int))) ||
	    !(cdf = malloc((size_t)n * sizeof(double))))
		goto fail;
	for (i = 0; i < n; i++) {
		total += w ? (w[i] > 0 ? w[i] : 0) : 1.0;
		cdf[i] = total;
	}
	if (total <= 0)
		goto fail;
	for (t = 0; t < fo->ntrees; t++) {
		/* Bootstrap: n draws, by weight. */
		memset(f.cnt, 0, (size_t)n * sizeof(double));
		for (i = 0; i < n; i++) {
			double u = (double)(kt_splitmix64(&f.rng) >> 11) * 0x1.0p-53 * total;
			long lo = 0, hi = n - 1;

			while (lo < hi) {
				long mid = (lo + hi) / 2;

				if (cdf[mid] > u)
					hi = mid;
				else
					lo = mid + 1;
			}
			f.cnt[lo] += 1;
		}
		for (i = 0, m = 0; i < n; i++)
			if (f.cnt[i] > 0)
				rows[m++] = i;
		f.t = &fo->trees[t];
		if (grow(&f, rows, m, 0) < 0)
			goto fail;
	}
	free(f.cnt);
	free(rows);
	free(f.pairs);
	free(f.feats);
	free(cdf);
	return fo;
fail:
	free(f.cnt);
	free(rows);
	free(f.pairs);
	free(f.feats);
	free(cdf);
	forest_free(fo);
	return NULL;
}

void forest_predict(const struct forest *fo, const double *x, double *mean, double *sd)
{
	double s = 0, ss = 0;
	int t;

	for (t = 0; t < fo->ntrees; t++) {
		const struct ftree *tr = &fo->trees[t];
		int k = 0;
		double v;

		while (tr->nodes[k].feat >= 0)
			k = x[tr->nodes[k].feat] <= tr->nodes[k].cut ? tr->nodes[k].left :
								       tr->nodes[k].right;
		v = tr->nodes[k].value;
		s += v;
		ss += v * v;
	}
	*mean = s / fo->ntrees;
	*sd = sqrt(fmax(0.0, ss / fo->ntrees - *mean * *mean));
}

void forest_free(struct forest *fo)
{
	int t;

	if (!fo)
		return;
	for (t = 0; fo->trees && t < fo->ntrees; t++)
		free(fo->trees[t].nodes);
	free(fo->trees);
	free(fo);
}
