/*
 * guided.c -- model-guided search (see guided.h for the method).
 */
#include "guided.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forest.h"
#include "../util/hash.h"

#define GUIDED_BATCH 4
#define GUIDED_FAIL_TARGET 1.3862943611198906	/* log 4 */
#define GUIDED_SD_FLOOR 0.005
#define GUIDED_PRIOR_MAX 4000	/* prior rows kept (the newest come first) */

struct guided {
	const struct kt_family *f;
	const struct space *sp;
	struct kt_shape shape;
	int nfeat;
	long ncand;
	long *cand;		/* indices into sp */
	double *cx;		/* features of each candidate (ncand x nfeat) */
	signed char *state;	/* 0 unproposed, 1 proposed, 2 reported */
	double *us;		/* reported time, <= 0 failed */
	long *order;		/* candidate positions in report order */
	long nrep, nprop;
	long budget;
	uint64_t rng;
	double noise;
	int quiet;		/* batches in a row with EI under the noise */
	const char *reason;
	/* the prior, as features and targets */
	long nprior;
	double *px, *py;
	/* the initial design without a prior: variants dealt round-robin */
	long ninit;
};

static void features(const struct kt_family *f, const struct kt_config *c,
		     const struct kt_shape *s, int same_device, double *x)
{
	int k = 0, i;

	for (i = 0; i < f->nvariants; i++)
		x[k++] = c->variant == i;
	for (i = 0; i < f->nparams; i++)
		x[k++] = (f->params[i].variants & (1u << c->variant)) ?
			 log2(1.0 + fabs((double)c->p[i])) * (c->p[i] < 0 ? -1 : 1) : -1.0;
	for (i = 0; i < f->ndims; i++)
		x[k++] = log2(1.0 + fabs((double)s->v[i]));
	x[k] = same_device;
}

int guided_new(const struct kt_family *f, const struct kt_shape *s, const struct space *sp,
	       const long *cand, long ncand, long budget, uint64_t seed, double noise,
	       const struct strategy_prior *prior, struct guided **out, struct kt_err *err)
{
	struct guided *g;
	double *best = NULL;
	int ngroups = 0;
	long i;

	*out = NULL;
	if (!(g = calloc(1, sizeof(*g))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	g->f = f;
	g->sp = sp;
	g->shape = *s;
	g->nfeat = f->nvariants + f->nparams + f->ndims + 1;
	g->ncand = ncand;
	g->budget = budget;
	g->rng = seed ^ 0x6775696465ULL;
	g->noise = noise;
	g->reason = "";
	if (!(g->cand = malloc((size_t)(ncand ? ncand : 1) * sizeof(long))) ||
	    !(g->cx = malloc((size_t)(ncand ? ncand : 1) * g->nfeat * sizeof(double))) ||
	    !(g->state = calloc((size_t)(ncand ? ncand : 1), 1)) ||
	    !(g->us = calloc((size_t)(ncand ? ncand : 1), sizeof(double))) ||
	    !(g->order = malloc((size_t)(ncand ? ncand : 1) * sizeof(long))))
		goto oom;
	memcpy(g->cand, cand, (size_t)ncand * sizeof(long));
	for (i = 0; i < ncand; i++)
		features(f, &sp->cfg[cand[i]], s, 1, g->cx + i * g->nfeat);
	/* The prior: each row's time against its group's best. */
	if (prior && prior->n > 0) {
		long n = prior->n < GUIDED_PRIOR_MAX ? prior->n : GUIDED_PRIOR_MAX;

		for (i = 0; i < n; i++)
			if (prior->rows[i].group + 1 > ngroups)
				ngroups = prior->rows[i].group + 1;
		if (!(best = calloc((size_t)(ngroups ? ngroups : 1), sizeof(double))) ||
		    !(g->px = malloc((size_t)n * g->nfeat * sizeof(double))) ||
		    !(g->py = malloc((size_t)n * sizeof(double))))
			goto oom;
		for (i = 0; i < n; i++) {
			const struct strategy_prior_row *r = &prior->rows[i];

			if (r->group >= 0 && r->us > 0 && (best[r->group] == 0 || r->us < best[r->group]))
				best[r->group] = r->us;
		}
		for (i = 0; i < n; i++) {
			const struct strategy_prior_row *r = &prior->rows[i];

			if (r->group < 0 || !(r->us > 0) || r->cfg.variant < 0 ||
			    r->cfg.variant >= f->nvariants)
				continue;
			features(f, &r->cfg, &r->shape, r->same_device, g->px + g->nprior * g->nfeat);
			g->py[g->nprior++] = log(r->us / best[r->group]);
		}
		free(best);
		best = NULL;
	}
	/* A first look: with a prior, its 6 best guesses; without, two
	 * configs of each variant, spread out, 4 at least; a third of the
	 * budget at most, so that the model gets the rest. */
	g->ninit = g->nprior > 0 ? 6 : 2L * f->nvariants;
	if (g->ninit < 4)
		g->ninit = 4;
	if (g->ninit > budget / 3 && budget >= 6)
		g->ninit = budget / 3;
	*out = g;
	return 0;
oom:
	free(best);
	guided_free(g);
	return kt_err_set(err, KT_EINTERNAL, "out of memory for the guided search");
}

void guided_free(struct guided *g)
{
	if (!g)
		return;
	free(g->cand);
	free(g->cx);
	free(g->state);
	free(g->us);
	free(g->order);
	free(g->px);
	free(g->py);
	free(g);
}

const char *guided_stop_reason(const struct guided *g)
{
	return g->reason;
}

void guided_report(struct guided *g, long idx, double us)
{
	long i;

	for (i = 0; i < g->ncand; i++)
		if (g->cand[i] == idx && g->state[i] == 1) {
			g->state[i] = 2;
			g->us[i] = us;
			g->order[g->nrep++] = i;
			return;
		}
}

/* An unproposed candidate drawn at random, the variants taken in turn
 * (turn counts the draws so far); -1 when none is left. */
static long draw_random(struct guided *g, long turn)
{
	long left = 0, i, pick;
	int v, want = (int)(turn % g->f->nvariants);

	for (v = 0; v < g->f->nvariants; v++) {
		int var = (want + v) % g->f->nvariants;

		left = 0;
		for (i = 0; i < g->ncand; i++)
			if (!g->state[i] && g->sp->cfg[g->cand[i]].variant == var)
				left++;
		if (!left)
			continue;
		pick = (long)(kt_splitmix64(&g->rng) % (uint64_t)left);
		for (i = 0; i < g->ncand; i++)
			if (!g->state[i] && g->sp->cfg[g->cand[i]].variant == var && pick-- == 0)
				return i;
	}
	return -1;
}

/* For the initial design: of 16 unproposed candidates drawn at random
 * (the variants in turn), the one farthest from every proposed one, so
 * that a few configs cover the space's corners rather than one corner. */
static long draw_spread(struct guided *g, long turn)
{
	long best = -1, i, j, c;
	double best_d = -1;
	int k;

	for (k = 0; k < 16; k++) {
		double dmin = INFINITY;

		if ((c = draw_random(g, turn)) < 0)
			break;
		for (i = 0; i < g->ncand; i++) {
			double d = 0;

			if (!g->state[i])
				continue;
			for (j = 0; j < g->nfeat; j++) {
				double x = g->cx[c * g->nfeat + j] - g->cx[i * g->nfeat + j];

				d += x * x;
			}
			if (d < dmin)
				dmin = d;
		}
		if (dmin > best_d) {
			best_d = dmin;
			best = c;
		}
	}
	return best;
}

static double norm_cdf(double z)
{
	return 0.5 * erfc(-z / sqrt(2.0));
}

/* Expected improvement (in log time) of a normal (mu, sd) over best. */
static double expected_improvement(double best, double mu, double sd)
{
	double z;

	if (sd < GUIDED_SD_FLOOR)
		sd = GUIDED_SD_FLOOR;
	z = (best - mu) / sd;
	return (best - mu) * norm_cdf(z) + sd * exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
}

/* Fits the forest on the prior and what was reported, and scores every
 * unproposed candidate by its expected improvement into ei (-1 when
 * proposed) and its predicted log time into mu. Returns the largest
 * expected improvement, or -1 when no model could be fitted. */
static double score(struct guided *g, double *ei, double *mu_out)
{
	long nrows = g->nprior + g->nrep, i, k = 0, ncur_ok = 0;
	double *x = NULL, *y = NULL, *w = NULL, best_us = 0, best_t, top = -1, prior_w = 1;
	struct forest_opts fo = { 0, 0, 0, 0 };
	struct forest *model = NULL;

	for (i = 0; i < g->nrep; i++) {
		double u = g->us[g->order[i]];

		if (u > 0) {
			ncur_ok++;
			if (best_us == 0 || u < best_us)
				best_us = u;
		}
	}
	if (nrows == 0)
		return -1;
	if (!(x = malloc((size_t)nrows * g->nfeat * sizeof(double))) ||
	    !(y = malloc((size_t)nrows * sizeof(double))) ||
	    !(w = malloc((size_t)nrows * sizeof(double))))
		goto out;
	/* The prior weighs at most twice what this problem has (8 rows at
	 * least), so this problem's own trials take over as they land. */
	if (g->nprior > 0) {
		double cap = 2.0 * (double)(g->nrep > 8 ? g->nrep : 8);

		prior_w = g->nprior > cap ? cap / (double)g->nprior : 1.0;
	}
	for (i = 0; i < g->nprior; i++, k++) {
		memcpy(x + k * g->nfeat, g->px + i * g->nfeat, (size_t)g->nfeat * sizeof(double));
		y[k] = g->py[i];
		w[k] = prior_w;
	}
	for (i = 0; i < g->nrep; i++, k++) {
		long c = g->order[i];

		memcpy(x + k * g->nfeat, g->cx + c * g->nfeat, (size_t)g->nfeat * sizeof(double));
		y[k] = g->us[c] > 0 && best_us > 0 ? log(g->us[c] / best_us) : GUIDED_FAIL_TARGET;
		w[k] = 1.0;
	}
	fo.seed = kt_splitmix64(&g->rng);
	if (!(model = forest_fit(x, y, w, nrows, g->nfeat, &fo)))
		goto out;
	/* This problem's best is 0 on the log scale; with no verified config
	 * yet, the prior's best (its minimum prediction) stands in. */
	best_t = 0;
	if (ncur_ok == 0) {
		best_t = INFINITY;
		for (i = 0; i < g->ncand; i++) {
			double mu, sd;

			forest_predict(model, g->cx + i * g->nfeat, &mu, &sd);
			if (mu < best_t)
				best_t = mu;
		}
	}
	for (i = 0; i < g->ncand; i++) {
		double mu, sd;

		if (g->state[i]) {
			ei[i] = -1;
			continue;
		}
		forest_predict(model, g->cx + i * g->nfeat, &mu, &sd);
		mu_out[i] = mu;
		ei[i] = expected_improvement(best_t, mu, sd);
		if (ei[i] > top)
			top = ei[i];
	}
out:
	forest_free(model);
	free(x);
	free(y);
	free(w);
	return top;
}

/* The candidate with the best reported time; -1 none. */
static long incumbent(const struct guided *g)
{
	long i, b = -1;

	for (i = 0; i < g->nrep; i++) {
		long c = g->order[i];

		if (g->us[c] > 0 && (b < 0 || g->us[c] < g->us[b]))
			b = c;
	}
	return b;
}

/* How many parameters candidates a and b differ in; 0 for another variant
 * (or the same config). */
static int distance(const struct guided *g, long a, long b)
{
	const struct kt_config *x = &g->sp->cfg[g->cand[a]], *y = &g->sp->cfg[g->cand[b]];
	int p, diff = 0;

	if (x->variant != y->variant)
		return 0;
	for (p = 0; p < g->f->nparams; p++)
		diff += x->p[p] != y->p[p];
	return diff;
}

/* The unproposed neighbour of the incumbent with the lowest predicted time:
 * one parameter away, else two (parameters that only pay off together, as a
 * tile's two sides or a split and its block); -1 when all of those were
 * tried (the incumbent is a local best). */
static long best_neighbour(const struct guided *g, const double *mu)
{
	long inc = incumbent(g), i, b[3] = { -1, -1, -1 };
	int d;

	if (inc < 0)
		return -1;
	for (i = 0; i < g->ncand; i++)
		if (!g->state[i] && (d = distance(g, inc, i)) >= 1 && d <= 2 &&
		    (b[d] < 0 || mu[i] < mu[b[d]]))
			b[d] = i;
	return b[1] >= 0 ? b[1] : b[2];
}

long guided_next(struct guided *g, long *idx, long max)
{
	long n = 0, want, left = 0, i, turn, nmin;
	double *ei = NULL, *mu = NULL, top;

	if (g->reason[0] || max <= 0)
		return 0;
	for (i = 0; i < g->ncand; i++)
		left += !g->state[i];
	if (left == 0) {
		g->reason = "space";
		return 0;
	}
	if (g->nprop >= g->budget) {
		g->reason = "budget";
		return 0;
	}
	want = g->nprop < g->ninit ? g->ninit - g->nprop : GUIDED_BATCH;
	if (want > max)
		want = max;
	if (want > g->budget - g->nprop)
		want = g->budget - g->nprop;
	turn = g->nprop;
	/* The initial design: random over the variants, unless a prior can
	 * rank the space already. */
	if (g->nprop < g->ninit && g->nprior == 0) {
		while (n < want && (i = draw_spread(g, turn++)) >= 0) {
			g->state[i] = 1;
			idx[n++] = g->cand[i];
		}
		g->nprop += n;
		return n;
	}
	if (!(ei = malloc((size_t)g->ncand * sizeof(double))) ||
	    !(mu = malloc((size_t)g->ncand * sizeof(double))))
		goto random;	/* out of memory: fall back to sampling */
	top = score(g, ei, mu);
	if (top < 0)
		goto random;
	/* Converged: past a minimum of trials, the incumbent is a local best
	 * (every one-parameter neighbour tried) and the model has expected no
	 * gain above the noise anywhere twice in a row. */
	nmin = g->ninit + 2 * GUIDED_BATCH;
	if (nmin < g->ncand / 20)
		nmin = g->ncand / 20;
	if (g->nprop >= g->ninit) {
		g->quiet = top < g->noise ? g->quiet + 1 : 0;
		if (g->quiet >= 2 && g->nprop >= nmin && best_neighbour(g, mu) < 0) {
			free(ei);
			free(mu);
			g->reason = "converged";
			return 0;
		}
	}
	/* Of a batch of four: the best by expected improvement, the best
	 * predicted neighbour of the incumbent (a local step), the next best
	 * by expected improvement, one at random (on a budget of 40 or more). */
	while (n < want) {
		long pick = -1;

		/* (no random pick on a budget too small to spare one) */
		if (n % 4 == 3 && g->budget >= 40)
			pick = draw_random(g, turn++);
		else if (n % 4 == 1)
			pick = best_neighbour(g, mu);
		if (pick < 0)
			for (i = 0; i < g->ncand; i++)
				if (!g->state[i] && (pick < 0 || ei[i] > ei[pick]))
					pick = i;
		if (pick < 0)
			break;
		g->state[pick] = 1;
		ei[pick] = -1;
		idx[n++] = g->cand[pick];
	}
	free(ei);
	free(mu);
	g->nprop += n;
	return n;
random:
	free(ei);
	free(mu);
	while (n < want && (i = draw_random(g, turn++)) >= 0) {
		g->state[i] = 1;
		idx[n++] = g->cand[i];
	}
	g->nprop += n;
	return n;
}
