#include "explain.h"

#include <stdio.h>
#include <string.h>

#include "../kernels/family.h"

#define WHY_KINDS 16

struct shape_why {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *t;
	long n, ok;
	int nkinds;
	char why[WHY_KINDS][160];
	long count[WHY_KINDS];
};

static int why_visit(const struct kt_config *c, void *arg)
{
	struct shape_why *w = arg;
	char why[160] = "";
	int i;

	w->n++;
	if (w->f->check(w->f, w->s, c, w->t, why, sizeof(why)) == 0) {
		w->ok++;
		return 0;
	}
	for (i = 0; i < w->nkinds; i++)
		if (strcmp(w->why[i], why) == 0) {
			w->count[i]++;
			return 0;
		}
	if (w->nkinds < WHY_KINDS) {
		snprintf(w->why[w->nkinds], sizeof(w->why[0]), "%s", why);
		w->count[w->nkinds++] = 1;
	}
	return 0;
}

/* When no config of the family can run the shape on the target, err says
 * the rule it broke -- the reason most configs give, which is the shape's
 * own (a multiple of 8, a head_dim the kernels have), since the others
 * vary with the config -- and 1 is returned; 0 when some config can. The
 * whole space is checked: about 10 ms for the largest, on the error path
 * only. */
int explain_unsupported(const struct kt_family *f, const struct kt_shape *s,
			const struct kt_target *t, const char *arch, const char *hint,
			struct kt_err *err)
{
	struct shape_why w;
	char key[512];
	int i, top = 0;

	memset(&w, 0, sizeof(w));
	w.f = f;
	w.s = s;
	w.t = t;
	kt_space_foreach(f, 0, why_visit, &w);
	if (w.ok > 0 || w.nkinds == 0)
		return 0;
	for (i = 1; i < w.nkinds; i++)
		if (w.count[i] > w.count[top])
			top = i;
	kt_shape_key(f, s, key, sizeof(key));
	kt_err_clear(err);
	kt_err_set(err, KT_EINVAL,
		   "no %s config can run %s on %s: %s (%ld of %ld configs say so; %s)", f->name, key,
		   arch, w.why[top], w.count[top], w.n, hint);
	return 1;
}

/* Why the family's default answered (the chain found nothing tuned that
 * fits), from the entries the chain looked at: those of the family on the
 * asked device or its architecture. */
void explain_default(const struct lookup_table *tab, const struct lookup_query *q,
		     const struct lookup_answer *a, char *buf, size_t n)
{
	const struct lookup_entry *near = NULL;
	double nd = 0;
	int i, same = 0;
	char why[160] = "";

	if (a->skipped) {
		snprintf(buf, n, "the nearest tuned shape, %s on %s, is %.3g from this one, past "
				    "max_distance %.3g: see skipped_nearest", a->skipped->w.shape_key,
				    a->skipped->w.device_name, a->skipped_distance, a->max_distance);
		return;
	}
	for (i = 0; i < tab->nentries; i++) {
		const struct lookup_entry *e = &tab->entries[i];
		double d;

		if (e->fam != q->fam || strcmp(tab->devices[e->device].arch, a->arch) != 0)
			continue;
		same++;
		if ((d = lookup_distance(q->fam, &q->shape, &e->shape)) < 0)
			continue;
		if (!near || d < nd) {
			near = e;
			nd = d;
		}
	}
	if (!same)
		snprintf(buf, n, "nothing of %s is tuned on %s (%s), nor on another %s device",
			 q->fam->name, a->device ? a->device->name : "this architecture", a->arch, a->arch);
	else if (!near)
		snprintf(buf, n, "%d shape%s of %s %s tuned on %s, none with this shape's "
			 "structural keys (a nearest shape must have the same)", same, same == 1 ? "" : "s",
			 q->fam->name, same == 1 ? "is" : "are", a->arch);
	else if (!lookup_within(nd, a->max_distance))
		snprintf(buf, n, "the nearest tuned shape, %s, is %.3g from this one, past "
			 "max_distance %.3g", near->w.shape_key, nd, a->max_distance);
	else {
		q->fam->check(q->fam, &q->shape, &near->cfg, &a->target, why, sizeof(why));
		snprintf(buf, n, "the tuned shapes within max_distance %.3g have configs that "
			 "cannot run this shape; the nearest, %s (%.3g away), says: %s", a->max_distance,
			 near->w.shape_key, nd, why[0] ? why : "invalid here");
	}
}
