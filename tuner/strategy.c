#include "strategy.h"

#include <stdlib.h>
#include <string.h>

int strategy_parse(const char *name)
{
	if (!name || strcmp(name, "exhaustive") == 0)
		return STRATEGY_EXHAUSTIVE;
	if (strcmp(name, "random") == 0)
		return STRATEGY_RANDOM;
	return -1;
}

const char *strategy_name(enum strategy_kind k)
{
	return k == STRATEGY_RANDOM ? "random" : "exhaustive";
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

int strategy_plan(enum strategy_kind k, const struct kt_family *f, const struct space *sp,
		  long budget, uint64_t seed, long **order, long *n, struct kt_err *err)
{
	long *o, i, m = 0, nplanted = 0;

	*order = NULL;
	*n = 0;
	if (sp->n == 0)
		return 0;
	if (!(o = malloc(sp->n * sizeof(*o))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory planning a sweep");
	/* Planted candidates first: they exist to prove the sweep survives
	 * them, so they are never sampled away. */
	for (i = 0; i < sp->n; i++)
		if (f->planted & (1u << sp->cfg[i].variant))
			o[m++] = i;
	nplanted = m;
	for (i = 0; i < sp->n; i++)
		if (!(f->planted & (1u << sp->cfg[i].variant)))
			o[m++] = i;
	if (k == STRATEGY_RANDOM) {
		uint64_t st = seed;
		long rest = m - nplanted, j, out = 0;
		long *tmp = malloc((rest > 0 ? rest : 1) * sizeof(*tmp));
		int v, left;

		if (!tmp) {
			free(o);
			return kt_err_set(err, KT_EINTERNAL, "out of memory planning a sweep");
		}
		/* Fisher-Yates over the real candidates... */
		for (i = rest - 1; i > 0; i--) {
			long t;

			j = (long)(splitmix(&st) % (uint64_t)(i + 1));
			t = o[nplanted + i];
			o[nplanted + i] = o[nplanted + j];
			o[nplanted + j] = t;
		}
		/* ...then dealt round-robin over the variants, so that a small
		 * budget still samples every variant (a plain sample of a space
		 * where one variant has most configs can miss the others). */
		do {
			left = 0;
			for (v = 0; v < f->nvariants; v++)
				for (i = nplanted; i < m; i++) {
					if (o[i] < 0 || sp->cfg[o[i]].variant != v)
						continue;
					tmp[out++] = o[i];
					o[i] = -1;
					left = 1;
					break;
				}
		} while (left);
		memcpy(o + nplanted, tmp, rest * sizeof(*tmp));
		free(tmp);
	}
	if (budget > 0 && m - nplanted > budget)
		m = nplanted + budget;
	*order = o;
	*n = m;
	return 0;
}
