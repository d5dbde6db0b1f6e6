#include "chain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *chain_match_name(enum chain_match m)
{
	switch (m) {
	case CHAIN_EXACT: return "exact";
	case CHAIN_NEAREST: return "nearest";
	case CHAIN_ARCH: return "arch";
	case CHAIN_DEFAULT: return "default";
	}
	return "unknown";
}

double chain_distance(const struct kt_family *f, const struct kt_shape *a,
		      const struct kt_shape *b)
{
	double d = 0;
	int i;

	for (i = 0; i < f->ndims; i++) {
		double x, y;

		if (f->dims[i].structural) {
			if (a->v[i] != b->v[i])
				return -1;
			continue;
		}
		/* log-distance: 512 -> 1024 is as far as 1024 -> 2048 */
		x = log((double)(a->v[i] > 0 ? a->v[i] : 1));
		y = log((double)(b->v[i] > 0 ? b->v[i] : 1));
		d += (x - y) * (x - y);
	}
	return sqrt(d);
}

int chain_within(double distance, double limit)
{
	return distance <= limit * (1 + 1e-12);
}

int chain_arch_same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la && a[la - 1] == 'a')
		la--;
	if (lb && b[lb - 1] == 'a')
		lb--;
	return la == lb && strncmp(a, b, la) == 0;
}

int chain_target(const char *arch, const struct chain_device *d, struct kt_target *out,
		 struct kt_err *err)
{
	char a[24];
	size_t n = strlen(arch);

	/* A device of sm_90 runs sm_90a code, and its sweeps were planned
	 * with the sm_90a features on: check configs against that target. */
	snprintf(a, sizeof(a), "%s%s", arch, n && arch[n - 1] == 'a' ? "" : "a");
	if (kt_target_named(a, out) < 0 && kt_target_named(arch, out) < 0)
		return kt_err_set(err, KT_EINVAL, "unknown architecture '%s'", arch);
	if (d) {
		if (d->smem_optin > 0)
			out->smem_optin = d->smem_optin;
		if (d->sms > 0)
			out->sms = d->sms;
		if (d->l2_bytes > 0)
			out->l2_bytes = d->l2_bytes;
	}
	return 0;
}

/* Which entries a search stage looks at. A model is a GPU name and an
 * architecture: several physical GPUs of one model (a multi-GPU host's
 * table) are interchangeable for an exact shape, so their exact entries
 * answer before a nearest shape of the asked device does. */
enum stage_kind {
	STAGE_DEVICE = 0,	/* the asked device */
	STAGE_MODEL,		/* the other devices of its name and arch */
	STAGE_ARCH,		/* every device of the arch but the asked one */
};

struct stage {
	enum stage_kind kind;
	int dev;		/* the asked device, or -1 (STAGE_ARCH only) */
	const char *arch;
};

static int in_stage(const struct chain_table *t, const struct chain_entry *e,
		    const struct stage *s)
{
	const struct chain_device *d = &t->devices[e->device];

	switch (s->kind) {
	case STAGE_DEVICE:
		return e->device == s->dev;
	case STAGE_MODEL:
		return e->device != s->dev && chain_arch_same(d->arch, s->arch) &&
		       strcasecmp(d->name, t->devices[s->dev].name) == 0;
	case STAGE_ARCH:
		return e->device != s->dev && chain_arch_same(d->arch, s->arch);
	}
	return 0;
}

/* The exact shape within a stage; among several (only across devices)
 * the fastest, the first in table order on a tie. */
static int search_exact(const struct chain_table *t, const struct chain_query *q,
			const struct stage *s)
{
	int best = -1, i;

	for (i = 0; i < t->nentries; i++) {
		const struct chain_entry *e = &t->entries[i];

		if (e->fam != q->fam || !in_stage(t, e, s) ||
		    memcmp(e->shape.v, q->shape.v, sizeof(long) * q->fam->ndims) != 0)
			continue;
		if (best < 0 || e->median_us < t->entries[best].median_us)
			best = i;
	}
	return best;
}

/* The closest valid shape within a stage and the limit, the first in table
 * order on a tie; *dist its log-distance. *skipped (if -1 so far) gets the
 * closest valid one past the limit, when it is closer than any within, and
 * *skipped_dist its distance. */
static int search_nearest(const struct chain_table *t, const struct chain_query *q,
			  const struct kt_target *tgt, const struct stage *s, double limit,
			  double *dist, int *skipped, double *skipped_dist)
{
	int best = -1, far = -1, i;
	double bd = 0, fd = 0;
	char why[160];

	for (i = 0; i < t->nentries; i++) {
		const struct chain_entry *e = &t->entries[i];
		double d;
		int within;

		if (e->fam != q->fam || !in_stage(t, e, s))
			continue;
		if ((d = chain_distance(q->fam, &e->shape, &q->shape)) < 0)
			continue;
		within = chain_within(d, limit);
		/* a shape past the limit is only reported when none within
		 * answers, and only the first stage's: no check() for it then */
		if (within ? best >= 0 && d >= bd
			   : best >= 0 || *skipped >= 0 || (far >= 0 && d >= fd))
			continue;
		if (e->fam->check(e->fam, &q->shape, &e->cfg, tgt, why, sizeof(why)) != 0)
			continue;
		if (within) {
			best = i;
			bd = d;
		} else {
			far = i;
			fd = d;
		}
	}
	if (best < 0 && far >= 0 && *skipped < 0) {
		*skipped = far;
		*skipped_dist = fd;
	}
	*dist = bd;
	return best;
}

int chain_best(const struct chain_table *t, const struct chain_query *q,
	       struct chain_answer *a, struct kt_err *err)
{
	const struct chain_device *d = q->device >= 0 ? &t->devices[q->device] : NULL;
	struct stage s;
	double dist = 0;
	int e;

	memset(a, 0, sizeof(*a));
	a->entry = a->skipped = -1;
	/* Without a device or an arch (an empty table) the answer is the
	 * default for the project's reference GPU. */
	snprintf(a->arch, sizeof(a->arch), "%s",
		 d ? d->arch : (q->arch && *q->arch ? q->arch : "sm_90"));
	if (chain_target(a->arch, q->actual ? q->actual : d, &a->target, err) < 0)
		return -1;

	/* Exact on the device, then exact on another GPU of its model: a
	 * config tuned for this very shape beats a neighbour shape's. Then
	 * the nearest shape on the device alone, so that a "nearest" answer
	 * was always measured on the asked device; the siblings' nearest
	 * shapes wait for the arch stage with the other devices. */
	s.dev = q->device;
	s.arch = a->arch;
	if (q->device >= 0) {
		s.kind = STAGE_DEVICE;
		if ((e = search_exact(t, q, &s)) >= 0) {
			a->match = CHAIN_EXACT;
			goto found;
		}
		s.kind = STAGE_MODEL;
		if ((e = search_exact(t, q, &s)) >= 0) {
			a->match = CHAIN_EXACT;
			goto found;
		}
		s.kind = STAGE_DEVICE;
		if ((e = search_nearest(t, q, &a->target, &s, q->max_distance, &dist, &a->skipped,
					&a->skipped_distance)) >= 0) {
			a->match = CHAIN_NEAREST;
			goto found;
		}
	}
	/* The other devices of the arch, siblings included (their nearest
	 * shapes; their exact ones answered above). */
	s.kind = STAGE_ARCH;
	if ((e = search_exact(t, q, &s)) >= 0 ||
	    (e = search_nearest(t, q, &a->target, &s, q->max_distance, &dist, &a->skipped,
				&a->skipped_distance)) >= 0) {
		a->match = CHAIN_ARCH;
		goto found;
	}
	if (!q->fam->default_config ||
	    q->fam->default_config(q->fam, &q->shape, &a->target, &a->cfg) != 0)
		return kt_err_set(err, KT_ENOTFOUND,
				  "nothing tuned for %s on %s and the family has no default for this shape",
				  q->fam->name, a->arch);
	a->match = CHAIN_DEFAULT;
	return 0;
found:
	a->entry = e;
	a->cfg = t->entries[e].cfg;
	a->distance = dist;
	return 0;
}
