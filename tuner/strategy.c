/*
 * strategy.c -- the strategies (see strategy.h); guided search is in
 * tuner/guided.c.
 *
 * Exhaustive and random fix their whole order up front and hand it out in
 * pieces. Halving keeps arms: the configs of one variant sharing its first
 * two parameters that vary in the space (tile sizes, for the GEMM-like
 * families, whose parameters are listed coarse first), each in a seeded
 * random order; rung r gives each surviving arm its next share of the
 * budget and keeps the better half by best time so far.
 */
#include "strategy.h"

#include <stdlib.h>
#include <string.h>

#include "guided.h"
#include "../util/hash.h"

static const char *const names[] = {
	[STRATEGY_EXHAUSTIVE] = "exhaustive",
	[STRATEGY_RANDOM] = "random",
	[STRATEGY_HALVING] = "halving",
	[STRATEGY_GUIDED] = "guided",
};
#define NSTRATEGIES ((int)(sizeof(names) / sizeof(names[0])))

int strategy_parse(const char *name)
{
	int i;

	if (!name)
		return STRATEGY_EXHAUSTIVE;
	for (i = 0; i < NSTRATEGIES; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *strategy_name(enum strategy_kind k)
{
	return (int)k >= 0 && (int)k < NSTRATEGIES ? names[k] : "exhaustive";
}

int strategy_check(const char *name, struct kt_err *err)
{
	if (strategy_parse(name) >= 0)
		return 0;
	return kt_err_set(err, KT_EINVAL,
			  "unknown strategy '%.64s' (exhaustive, random, halving or guided)", name);
}

struct arm {
	long *cfg;		/* candidate indices, in a seeded random order */
	long n, next;		/* configs, and how many were proposed */
	double best;		/* best reported time; 0 none yet */
	int alive;
};

struct strategy {
	struct strategy_spec spec;
	const struct kt_family *f;
	const struct space *sp;
	long *planted, nplanted, planted_given;
	/* exhaustive and random: the order */
	long *order, norder, given;
	/* halving: the arms, and the current rung's proposals not yet given */
	struct arm *arms;
	int narms, alive, rung;
	long budget, proposed;
	long *queue, qhead, qlen;
	/* guided */
	struct guided *g;
	const char *reason;
};

static void shuffle(long *a, long n, uint64_t *st)
{
	long i, j, t;

	for (i = n - 1; i > 0; i--) {
		j = (long)(kt_splitmix64(st) % (uint64_t)(i + 1));
		t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

/* The seeded sample: shuffled, then dealt round-robin over the variants,
 * so that a small budget still samples every variant (a plain sample of a
 * space where one variant has most configs can miss the others). */
static int order_random(struct strategy *st, uint64_t seed)
{
	long *tmp, i, out = 0, m = st->norder;
	int v, left;

	if (!(tmp = malloc((m > 0 ? m : 1) * sizeof(*tmp))))
		return -1;
	shuffle(st->order, m, &seed);
	do {
		left = 0;
		for (v = 0; v < st->f->nvariants; v++)
			for (i = 0; i < m; i++) {
				if (st->order[i] < 0 || st->sp->cfg[st->order[i]].variant != v)
					continue;
				tmp[out++] = st->order[i];
				st->order[i] = -1;
				left = 1;
				break;
			}
	} while (left);
	memcpy(st->order, tmp, m * sizeof(*tmp));
	free(tmp);
	return 0;
}

/* The arm key of config c: its variant and its first two parameters (in
 * the family's order) that take more than one value among the variant's
 * configs in the space. */
static void arm_params(const struct strategy *st, int variant, int keys[2])
{
	long i, first;
	int p, k = 0;

	keys[0] = keys[1] = -1;
	for (p = 0; p < st->f->nparams && k < 2; p++) {
		if (!(st->f->params[p].variants & (1u << variant)))
			continue;
		first = -1;
		for (i = 0; i < st->norder; i++) {
			const struct kt_config *c = &st->sp->cfg[st->order[i]];

			if (c->variant != variant)
				continue;
			if (first < 0)
				first = c->p[p];
			else if (c->p[p] != first) {
				keys[k++] = p;
				break;
			}
		}
	}
}

static int arms_build(struct strategy *st, uint64_t seed)
{
	int keys[KT_MAX_VARIANTS][2], v, a;
	long i;

	for (v = 0; v < st->f->nvariants; v++)
		arm_params(st, v, keys[v]);
	if (!(st->arms = calloc((size_t)(st->norder ? st->norder : 1), sizeof(*st->arms))))
		return -1;
	for (i = 0; i < st->norder; i++) {
		const struct kt_config *c = &st->sp->cfg[st->order[i]];
		const int *k = keys[c->variant];

		for (a = 0; a < st->narms; a++) {
			const struct kt_config *h = &st->sp->cfg[st->arms[a].cfg[0]];

			if (h->variant == c->variant && (k[0] < 0 || h->p[k[0]] == c->p[k[0]]) &&
			    (k[1] < 0 || h->p[k[1]] == c->p[k[1]]))
				break;
		}
		if (a == st->narms) {
			/* at most every config is an arm: room for all of them */
			if (!(st->arms[a].cfg = malloc((size_t)st->norder * sizeof(long))))
				return -1;
			st->narms++;
		}
		st->arms[a].cfg[st->arms[a].n++] = st->order[i];
	}
	for (a = 0; a < st->narms; a++) {
		shuffle(st->arms[a].cfg, st->arms[a].n, &seed);
		st->arms[a].alive = 1;
	}
	st->alive = st->narms;
	return 0;
}

static long default_budget(enum strategy_kind k, long n)
{
	long b;

	if (k == STRATEGY_HALVING)
		b = (n * 3 + 9) / 10;
	else if (k == STRATEGY_GUIDED)
		b = n / 5;
	else
		return n;
	if (b < 8)
		b = n < 8 ? n : 8;
	return b;
}

int strategy_new(const struct strategy_spec *spec, const struct kt_family *f,
		 const struct kt_shape *s, const struct space *sp, struct strategy **out,
		 struct kt_err *err)
{
	struct strategy *st;
	long i;

	*out = NULL;
	if ((int)spec->kind < 0 || (int)spec->kind >= NSTRATEGIES)
		return kt_err_set(err, KT_EINVAL, "no strategy %d", (int)spec->kind);
	if (spec->budget < 0)
		return kt_err_set(err, KT_EINVAL, "budget must be >= 0");
	if (!(st = calloc(1, sizeof(*st))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory planning a sweep");
	st->spec = *spec;
	st->f = f;
	st->sp = sp;
	st->reason = "";
	if (!(st->planted = malloc((sp->n ? sp->n : 1) * sizeof(long))) ||
	    !(st->order = malloc((sp->n ? sp->n : 1) * sizeof(long))) ||
	    !(st->queue = malloc((sp->n ? sp->n : 1) * sizeof(long))))
		goto oom;
	/* Planted candidates first: they exist to prove the sweep survives
	 * them, so they are never sampled away. */
	for (i = 0; i < sp->n; i++) {
		if (f->planted & (1u << sp->cfg[i].variant))
			st->planted[st->nplanted++] = i;
		else
			st->order[st->norder++] = i;
	}
	st->budget = spec->budget > 0 && spec->budget < st->norder ? spec->budget :
		     spec->budget > 0 ? st->norder : default_budget(spec->kind, st->norder);
	switch (spec->kind) {
	case STRATEGY_EXHAUSTIVE:
		break;
	case STRATEGY_RANDOM:
		if (order_random(st, spec->seed) != 0)
			goto oom;
		break;
	case STRATEGY_HALVING:
		if (arms_build(st, spec->seed) != 0)
			goto oom;
		break;
	case STRATEGY_GUIDED:
		if (guided_new(f, s, sp, st->order, st->norder, st->budget, spec->seed,
			       spec->noise > 0 ? spec->noise : 0.005, spec->prior, &st->g, err) != 0) {
			strategy_free(st);
			return -1;
		}
		break;
	}
	*out = st;
	return 0;
oom:
	strategy_free(st);
	return kt_err_set(err, KT_EINTERNAL, "out of memory planning a sweep");
}

void strategy_free(struct strategy *st)
{
	int a;

	if (!st)
		return;
	for (a = 0; st->arms && a < st->narms; a++)
		free(st->arms[a].cfg);
	free(st->arms);
	guided_free(st->g);
	free(st->planted);
	free(st->order);
	free(st->queue);
	free(st);
}

long strategy_planned(const struct strategy *st)
{
	return st->nplanted + st->budget;
}

const char *strategy_stop_reason(const struct strategy *st)
{
	return st->reason;
}

static int arm_cmp_best(const struct arm *x, const struct arm *y)
{
	/* arms with a time first, faster first; then arms with none */
	if ((x->best > 0) != (y->best > 0))
		return x->best > 0 ? -1 : 1;
	return x->best < y->best ? -1 : x->best > y->best;
}

/* Plans the next rung of successive halving into the queue: the number of
 * rungs left decides each surviving arm's share of what is left of the
 * budget. 0 when nothing is left to propose (reason set). */
static long halving_rung(struct strategy *st)
{
	long left = st->budget - st->proposed, share, n = 0, avail = 0;
	int a, rungs = 1, alive = st->alive, i;

	if (left <= 0) {
		st->reason = "budget";
		return 0;
	}
	/* Keep the better half after every rung but the first. */
	if (st->rung > 0 && st->alive > 1) {
		int *rank = malloc((size_t)st->narms * sizeof(int)), k = 0, keep;

		if (rank) {
			for (a = 0; a < st->narms; a++)
				if (st->arms[a].alive)
					rank[k++] = a;
			/* insertion sort by best time: arms are few */
			for (i = 1; i < k; i++) {
				int r = rank[i], j = i - 1;

				while (j >= 0 && arm_cmp_best(&st->arms[rank[j]], &st->arms[r]) > 0) {
					rank[j + 1] = rank[j];
					j--;
				}
				rank[j + 1] = r;
			}
			keep = (k + 1) / 2;
			for (i = keep; i < k; i++)
				st->arms[rank[i]].alive = 0;
			st->alive = keep;
			free(rank);
		}
	}
	st->rung++;
	for (alive = st->alive; alive > 1; alive = (alive + 1) / 2)
		rungs++;
	for (a = 0; a < st->narms; a++)
		if (st->arms[a].alive)
			avail += st->arms[a].n - st->arms[a].next;
	if (avail == 0) {
		/* the survivors are exhausted: widen to every arm again */
		for (a = 0; a < st->narms; a++)
			if (st->arms[a].next < st->arms[a].n) {
				st->arms[a].alive = 1;
				avail += st->arms[a].n - st->arms[a].next;
			}
		st->alive = 0;
		for (a = 0; a < st->narms; a++)
			st->alive += st->arms[a].alive;
		if (avail == 0) {
			st->reason = "space";
			return 0;
		}
	}
	share = left / rungs / (st->alive ? st->alive : 1);
	if (share < 1)
		share = 1;
	/* The last rung (one arm) takes all that is left. */
	if (st->alive == 1)
		share = left;
	for (a = 0; a < st->narms && st->proposed + n < st->budget; a++) {
		struct arm *arm = &st->arms[a];
		long k;

		if (!arm->alive)
			continue;
		for (k = 0; k < share && arm->next < arm->n && st->proposed + n < st->budget; k++)
			st->queue[n++] = arm->cfg[arm->next++];
	}
	st->proposed += n;
	st->qhead = 0;
	st->qlen = n;
	return n;
}

/* The current rung's proposals, in pieces of at most max. */
static long halving_next(struct strategy *st, long *idx, long max)
{
	long n = 0;

	if (st->qhead == st->qlen && halving_rung(st) == 0)
		return 0;
	while (n < max && st->qhead < st->qlen)
		idx[n++] = st->queue[st->qhead++];
	return n;
}

long strategy_next(struct strategy *st, long *idx, long max)
{
	long n = 0;

	if (max <= 0 || st->reason[0])
		return 0;
	if (st->planted_given < st->nplanted) {
		while (n < max && st->planted_given < st->nplanted)
			idx[n++] = st->planted[st->planted_given++];
		return n;
	}
	switch (st->spec.kind) {
	case STRATEGY_EXHAUSTIVE:
	case STRATEGY_RANDOM:
		while (n < max && st->given < st->norder && st->given < st->budget)
			idx[n++] = st->order[st->given++];
		if (n == 0)
			st->reason = st->given >= st->norder ? "space" : "budget";
		return n;
	case STRATEGY_HALVING:
		return halving_next(st, idx, max);
	case STRATEGY_GUIDED:
		n = guided_next(st->g, idx, max);
		if (n == 0)
			st->reason = guided_stop_reason(st->g);
		return n;
	}
	return 0;
}

void strategy_report(struct strategy *st, long idx, double us)
{
	int a;
	long k;

	if (st->spec.kind == STRATEGY_GUIDED) {
		guided_report(st->g, idx, us);
		return;
	}
	if (st->spec.kind != STRATEGY_HALVING || !(us > 0))
		return;
	for (a = 0; a < st->narms; a++)
		for (k = 0; k < st->arms[a].next; k++)
			if (st->arms[a].cfg[k] == idx) {
				if (st->arms[a].best == 0 || us < st->arms[a].best)
					st->arms[a].best = us;
				return;
			}
}
