#include "lookup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launch.h"
#include "query.h"

/* H200 ceilings (docs/kernels.md): the floor every result is reported against. */
#define PEAK_FLOPS 790e12
#define PEAK_BYTES 4.3e12

void lookup_table_init(struct lookup_table *t)
{
	memset(t, 0, sizeof(*t));
	t->data_version = -1;
}

static void table_clear(struct lookup_table *t)
{
	int i;

	for (i = 0; i < t->nentries; i++)
		store_winner_release(&t->entries[i].w);
	free(t->entries);
	free(t->devices);
	t->entries = NULL;
	t->devices = NULL;
	t->nentries = t->ndevices = t->skipped = 0;
	t->cap = 0;
	store_marks_release(&t->marks);
	t->marked = 0;
}

void lookup_table_release(struct lookup_table *t)
{
	table_clear(t);
	query_stmt_free(t->dv_stmt);
	t->dv_stmt = NULL;
	t->dv_store = NULL;
	t->data_version = -1;
}

static int device_index(const struct lookup_table *t, int64_t id)
{
	int i;

	for (i = 0; i < t->ndevices; i++)
		if (t->devices[i].id == id)
			return i;
	return -1;
}

/* Parses winner w into e, taking its strings (w is left empty): 0, or -1
 * when it cannot be used (w then still owns them). A winner of a family
 * this binary does not know (a newer database, a merged one) cannot be
 * checked or planned: skipped rather than answered with a config nobody
 * can build. */
static int entry_from_winner(const struct lookup_table *t, struct lookup_entry *e,
			     struct store_winner *w)
{
	struct kt_err perr = { 0 };

	memset(e, 0, sizeof(*e));
	e->fam = kt_family_find(w->family);
	e->device = device_index(t, w->device_id);
	if (!e->fam || e->device < 0 || kt_shape_parse(e->fam, w->shape_key, &e->shape, &perr) < 0 ||
	    kt_config_parse(e->fam, w->config_key, &e->cfg, &perr) < 0)
		return -1;
	e->w = *w;		/* moves the strings into the entry */
	memset(w, 0, sizeof(*w));
	return 0;
}

int lookup_table_reload(struct lookup_table *t, struct store *st, struct kt_err *err)
{
	struct store_winner *w = NULL;
	int n = 0, i, rc = -1;

	table_clear(t);
	/* the marks first: whatever lands after them is read again next time */
	if (store_marks_get(st, &t->marks, err) < 0)
		goto out;
	if (store_devices_list(st, &t->devices, &t->ndevices, err) < 0)
		goto out;
	if (store_winners_list(st, NULL, NULL, NULL, &w, &n, err) < 0)
		goto out;
	if (n && !(t->entries = calloc(n, sizeof(*t->entries)))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	t->cap = n;
	for (i = 0; i < n; i++) {
		if (entry_from_winner(t, &t->entries[t->nentries], &w[i]) < 0) {
			t->skipped++;
			store_winner_release(&w[i]);
			continue;
		}
		t->nentries++;
	}
	t->marked = 1;
	t->full_loads++;
	rc = 0;
out:
	if (rc < 0) {
		for (i = 0; i < n; i++)
			store_winner_release(&w[i]);
		table_clear(t);
	}
	free(w);
	return rc;
}

/* More changed pairs than this after a commit: reload in full. */
#define LOOKUP_MAX_PAIRS 256

/* The table's order, store_winners_list's: device id, family, shape key
 * (SQLite compares text bytewise, as strcmp does). */
static int entry_order(const struct store_winner *a, const struct store_winner *b)
{
	int c;

	if (a->device_id != b->device_id)
		return a->device_id < b->device_id ? -1 : 1;
	if ((c = strcmp(a->family, b->family)) != 0)
		return c;
	return strcmp(a->shape_key, b->shape_key);
}

/* Index of the entry of (device, problem), or -1. */
static int entry_find(const struct lookup_table *t, int64_t device_id, int64_t problem_id)
{
	int i;

	for (i = 0; i < t->nentries; i++)
		if (t->entries[i].w.device_id == device_id && t->entries[i].w.problem_id == problem_id)
			return i;
	return -1;
}

static void entry_remove(struct lookup_table *t, int i)
{
	store_winner_release(&t->entries[i].w);
	memmove(&t->entries[i], &t->entries[i + 1], (size_t)(t->nentries - i - 1) * sizeof(*t->entries));
	t->nentries--;
}

/* Reads the winner of one pair again and puts it in its place. A pair
 * whose winner cannot be used now counts as skipped; skipped then counts
 * pairs, not rows (a pair skipped at the full load and again here is
 * counted twice: it is a hint for logs, not an exact figure). */
static int pair_refresh(struct lookup_table *t, struct store *st, const struct store_pair *p,
			struct kt_err *err)
{
	struct store_winner w;
	struct lookup_entry e;
	int r, i, lo, hi;

	if ((r = store_winner_get(st, p->device_id, p->problem_id, &w, err)) < 0)
		return -1;
	if ((i = entry_find(t, p->device_id, p->problem_id)) >= 0)
		entry_remove(t, i);
	t->pair_loads++;
	if (r == 0)
		return 0;
	if (entry_from_winner(t, &e, &w) < 0) {
		store_winner_release(&w);
		t->skipped++;
		return 0;
	}
	if (t->nentries == t->cap) {
		int cap = t->cap ? 2 * t->cap : 16;
		struct lookup_entry *ne = realloc(t->entries, (size_t)cap * sizeof(*ne));

		if (!ne) {
			store_winner_release(&e.w);
			return kt_err_set(err, KT_EINTERNAL, "out of memory");
		}
		t->entries = ne;
		t->cap = cap;
	}
	for (lo = 0, hi = t->nentries; lo < hi;) {
		int mid = lo + (hi - lo) / 2;

		if (entry_order(&t->entries[mid].w, &e.w) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&t->entries[lo + 1], &t->entries[lo], (size_t)(t->nentries - lo) * sizeof(*t->entries));
	t->entries[lo] = e;
	t->nentries++;
	return 0;
}

static int same_devices(const struct store_device *a, int na, const struct store_device *b,
			int nb)
{
	int i;

	if (na != nb)
		return 0;
	for (i = 0; i < na; i++)
		if (a[i].id != b[i].id || strcmp(a[i].name, b[i].name) || strcmp(a[i].uuid, b[i].uuid) ||
		    strcmp(a[i].arch, b[i].arch) || a[i].sms != b[i].sms ||
		    a[i].l2_bytes != b[i].l2_bytes || a[i].smem_optin != b[i].smem_optin ||
		    a[i].clock_mhz != b[i].clock_mhz || a[i].mem_clock_mhz != b[i].mem_clock_mhz ||
		    strcmp(a[i].driver, b[i].driver) || strcmp(a[i].cuda, b[i].cuda) ||
		    strcmp(a[i].nvrtc, b[i].nvrtc))
			return 0;
	return 1;
}

/* Appends to *ps the pairs of the sweeps that are new in `to` or whose row
 * changed since `from` (both by id). 1 when a sweep of `from` is gone or
 * moved to another pair (reload in full), 0, or -1 with err set. */
static int sweeps_changed(const struct store_marks *from, const struct store_marks *to,
			  struct store_pair **ps, int *n, struct kt_err *err)
{
	int i = 0, j = 0;

	for (; j < to->nsweeps; j++) {
		const struct store_sweep_mark *b = &to->sweeps[j];
		struct store_pair *np;

		if (i < from->nsweeps && from->sweeps[i].id < b->id)
			return 1;	/* from's sweep i is gone */
		if (i < from->nsweeps && from->sweeps[i].id == b->id) {
			const struct store_sweep_mark *a = &from->sweeps[i++];

			if (a->device_id != b->device_id || a->problem_id != b->problem_id)
				return 1;
			if (a->finished == b->finished && a->running == b->running)
				continue;
		}
		if (!(np = realloc(*ps, (size_t)(*n + 1) * sizeof(*np))))
			return kt_err_set(err, KT_EINTERNAL, "out of memory");
		*ps = np;
		np[*n].device_id = b->device_id;
		np[*n].problem_id = b->problem_id;
		(*n)++;
	}
	return i < from->nsweeps;
}

/* Reads again what can have changed since the table's marks; 1 when only
 * a full reload will do, 0, or -1 with err set (the table is then
 * cleared). */
static int table_refresh(struct lookup_table *t, struct store *st, struct kt_err *err)
{
	struct store_marks m;
	struct store_device *devs = NULL;
	struct store_pair *ps = NULL;
	int ndevs = 0, n = 0, i, k, r, rc = -1;

	if (store_marks_get(st, &m, err) < 0)
		goto fail;
	if (store_devices_list(st, &devs, &ndevs, err) < 0)
		goto out;
	if (!same_devices(t->devices, t->ndevices, devs, ndevs)) {
		rc = 1;
		goto out;
	}
	if (store_pairs_since(st, &t->marks, &m, &ps, &n, err) < 0)
		goto out;
	if ((r = sweeps_changed(&t->marks, &m, &ps, &n, err)) != 0) {
		rc = r;
		goto out;
	}
	/* an import or a merge: one pass over everything is cheaper than a
	 * query per pair (each also walks the entries) */
	if (n > LOOKUP_MAX_PAIRS) {
		rc = 1;
		goto out;
	}
	for (i = 0; i < n; i++) {
		for (k = 0; k < i; k++)
			if (ps[k].device_id == ps[i].device_id && ps[k].problem_id == ps[i].problem_id)
				break;
		if (k == i && pair_refresh(t, st, &ps[i], err) < 0)
			goto out;
	}
	store_marks_release(&t->marks);
	t->marks = m;
	memset(&m, 0, sizeof(m));
	rc = 0;
out:
	store_marks_release(&m);
	free(devs);
	free(ps);
fail:
	if (rc < 0)
		table_clear(t);
	return rc;
}

int lookup_table_load(struct lookup_table *t, struct store *st, struct kt_err *err)
{
	int64_t v;
	int r;

	if (t->dv_store != st) {
		query_stmt_free(t->dv_stmt);
		t->dv_stmt = NULL;
		t->dv_store = st;
		table_clear(t);
	}
	if (query_data_version_cached(st, &t->dv_stmt, &v, err) < 0)
		return -1;
	if (v == t->data_version && t->marked)
		return 0;
	t->data_version = -1;
	r = t->marked ? table_refresh(t, st, err) : 1;
	if (r < 0)
		return -1;
	if (r > 0 && lookup_table_reload(t, st, err) < 0)
		return -1;
	t->data_version = v;
	return 0;
}

const char *lookup_match_name(enum lookup_match m)
{
	switch (m) {
	case LOOKUP_EXACT: return "exact";
	case LOOKUP_NEAREST: return "nearest";
	case LOOKUP_ARCH: return "arch";
	case LOOKUP_DEFAULT: return "default";
	}
	return "unknown";
}

double lookup_distance(const struct kt_family *f, const struct kt_shape *a,
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
		/* log-distance: 512 -> 1024 is as far as 1024 -> 2048. The
		 * exported header computes exactly this expression. */
		x = log((double)(a->v[i] > 0 ? a->v[i] : 1));
		y = log((double)(b->v[i] > 0 ? b->v[i] : 1));
		d += (x - y) * (x - y);
	}
	return sqrt(d);
}

int lookup_device_target(const char *arch, const struct store_device *d,
			 struct kt_target *out, struct kt_err *err)
{
	char a[24];

	/* A device of sm_90 runs sm_90a code, and its sweeps were planned
	 * with the sm_90a features on: check configs against that target. */
	snprintf(a, sizeof(a), "%sa", arch);
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

double lookup_floor_us(const struct kt_family *f, const struct kt_shape *s)
{
	double c = f->flops ? f->flops(s) / PEAK_FLOPS : 0;
	double m = f->min_bytes ? f->min_bytes(s) / PEAK_BYTES : 0;

	return (c > m ? c : m) * 1e6;
}

static int device_matches(const struct store_device *d, const char *name)
{
	char id[32];

	snprintf(id, sizeof(id), "%lld", (long long)d->id);
	return strcmp(d->uuid, name) == 0 || strcmp(id, name) == 0 ||
	       strcasecmp(d->name, name) == 0;
}

/* The device a query names: 0 found (or none named and none needed), -1
 * with err set. */
static int resolve_device(const struct lookup_table *t, const struct lookup_query *q,
			  int *dev, struct kt_err *err)
{
	int i;

	*dev = -1;
	if (q->device && *q->device) {
		for (i = 0; i < t->ndevices; i++)
			if (device_matches(&t->devices[i], q->device)) {
				*dev = i;
				return 0;
			}
		if (q->arch && *q->arch)
			return 0;
		return kt_err_set(err, KT_ENOTFOUND,
				  "unknown device '%s' (give arch= to fall back to an architecture)",
				  q->device);
	}
	if (q->arch && *q->arch)
		return 0;
	if (t->ndevices == 1)
		*dev = 0;
	/* Several GPUs of one model (a multi-GPU host's database): none
	 * needs naming; the first answers, its siblings' exact shapes
	 * counting as its own (lookup_best). */
	for (i = 1; i < t->ndevices; i++)
		if (strcasecmp(t->devices[i].name, t->devices[0].name) != 0)
			break;
	if (t->ndevices > 1 && i == t->ndevices)
		*dev = 0;
	else if (t->ndevices > 1)
		return kt_err_set(err, KT_EINVAL,
				  "%d devices are known: name one (--device, or device= over HTTP: uuid, id or name)",
				  t->ndevices);
	return 0;
}

static int entry_valid(const struct lookup_entry *e, const struct lookup_query *q,
		       const struct kt_target *tgt)
{
	char why[160];

	return e->fam->check(&q->shape, &e->cfg, tgt, why, sizeof(why)) == 0;
}

/* Which entries a search stage looks at. A model is a GPU name and an
 * architecture: several physical GPUs of one model (a multi-GPU host's
 * database) are interchangeable for an exact shape, so their exact entries
 * answer before a nearest shape of the asked device does. Names compare
 * case-insensitively, as a --device name does. */
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

static int in_stage(const struct lookup_table *t, const struct lookup_entry *e,
		    const struct stage *s)
{
	const struct store_device *d = &t->devices[e->device];

	switch (s->kind) {
	case STAGE_DEVICE:
		return e->device == s->dev;
	case STAGE_MODEL:
		return e->device != s->dev && strcmp(d->arch, s->arch) == 0 &&
		       strcasecmp(d->name, t->devices[s->dev].name) == 0;
	case STAGE_ARCH:
		return e->device != s->dev && strcmp(d->arch, s->arch) == 0;
	}
	return 0;
}

/* The exact shape within a stage; among several (only across devices)
 * the fastest, the first in table order on a tie. */
static const struct lookup_entry *search_exact(const struct lookup_table *t,
					       const struct lookup_query *q,
					       const struct stage *s)
{
	const struct lookup_entry *best = NULL;
	int i;

	for (i = 0; i < t->nentries; i++) {
		const struct lookup_entry *e = &t->entries[i];

		if (e->fam != q->fam || !in_stage(t, e, s) ||
		    memcmp(e->shape.v, q->shape.v, sizeof(long) * q->fam->ndims) != 0)
			continue;
		if (!best || e->w.median_us < best->w.median_us)
			best = e;
	}
	return best;
}

int lookup_within(double distance, double limit)
{
	return distance <= limit * (1 + 1e-12);
}

int lookup_max_distance_parse(const char *text, double *out, struct kt_err *err)
{
	char *end;
	double v;

	if (!text || !*text)
		return kt_err_set(err, KT_EINVAL, "max_distance is empty (a number >= 0, or inf)");
	if (strcasecmp(text, "inf") == 0 || strcasecmp(text, "none") == 0) {
		*out = INFINITY;
		return 0;
	}
	v = strtod(text, &end);
	if (*end || end == text || isnan(v) || v < 0)
		return kt_err_set(err, KT_EINVAL,
				  "max_distance '%s' is not a number >= 0 (or inf): it is a log-distance, ln 8 = 2.079 by default",
				  text);
	*out = v;
	return 0;
}

int lookup_query_max_distance(struct lookup_query *q, const char *text, struct kt_err *err)
{
	if (!text)
		return 0;
	if (lookup_max_distance_parse(text, &q->max_distance, err) < 0)
		return -1;
	q->max_distance_set = 1;
	return 0;
}

/* The closest valid shape within a stage and the limit, the first in table
 * order on a tie; *dist its log-distance. *skipped (if NULL so far) gets
 * the closest valid one past the limit, when it is closer than any within,
 * and *skipped_dist its distance. */
static const struct lookup_entry *search_nearest(const struct lookup_table *t,
						 const struct lookup_query *q,
						 const struct kt_target *tgt,
						 const struct stage *s, double limit, double *dist,
						 const struct lookup_entry **skipped,
						 double *skipped_dist)
{
	const struct lookup_entry *best = NULL, *far = NULL;
	double bd = 0, fd = 0;
	int i;

	for (i = 0; i < t->nentries; i++) {
		const struct lookup_entry *e = &t->entries[i];
		double d;
		int within;

		if (e->fam != q->fam || !in_stage(t, e, s))
			continue;
		if ((d = lookup_distance(q->fam, &e->shape, &q->shape)) < 0)
			continue;
		within = lookup_within(d, limit);
		/* a shape past the limit is only reported when none within
		 * answers, and only the first stage's: no check() for it then */
		if (within ? best && d >= bd : best || *skipped || (far && d >= fd))
			continue;
		if (!entry_valid(e, q, tgt))
			continue;
		if (within) {
			best = e;
			bd = d;
		} else {
			far = e;
			fd = d;
		}
	}
	if (!best && far && !*skipped) {
		*skipped = far;
		*skipped_dist = fd;
	}
	*dist = bd;
	return best;
}

int lookup_best(const struct lookup_table *t, const struct lookup_query *q,
		struct lookup_answer *a, struct kt_err *err)
{
	const struct lookup_entry *e;
	const struct store_device *d = NULL;
	struct stage s;
	int dev;
	double dist;

	memset(a, 0, sizeof(*a));
	if (resolve_device(t, q, &dev, err) < 0)
		return -1;
	if (dev >= 0)
		d = &t->devices[dev];
	/* Without a device or an arch (an empty database) the answer is the
	 * default for the project's reference GPU. */
	snprintf(a->arch, sizeof(a->arch), "%s",
		 d ? d->arch : (q->arch && *q->arch ? q->arch : "sm_90"));
	a->device = d;
	if (lookup_device_target(a->arch, d, &a->target, err) < 0)
		return -1;
	a->floor_us = lookup_floor_us(q->fam, &q->shape);
	a->max_distance = q->max_distance_set ? q->max_distance : LOOKUP_MAX_DISTANCE;

	/* Exact on the device, then exact on another GPU of its model: a
	 * config tuned for this very shape beats a neighbour shape's. Then
	 * the nearest shape on the device alone, so that a "nearest" answer
	 * was always measured on the asked device; the siblings' nearest
	 * shapes wait for the arch stage with the other devices. */
	dist = 0;
	s.dev = dev;
	s.arch = a->arch;
	if (dev >= 0) {
		s.kind = STAGE_DEVICE;
		if ((e = search_exact(t, q, &s))) {
			a->match = LOOKUP_EXACT;
			goto found;
		}
		s.kind = STAGE_MODEL;
		if ((e = search_exact(t, q, &s))) {
			a->match = LOOKUP_EXACT;
			goto found;
		}
		s.kind = STAGE_DEVICE;
		if ((e = search_nearest(t, q, &a->target, &s, a->max_distance, &dist,
					&a->skipped, &a->skipped_distance))) {
			a->match = LOOKUP_NEAREST;
			goto found;
		}
	}
	/* The other devices of the arch, siblings included (their nearest
	 * shapes; their exact ones answered above). */
	s.kind = STAGE_ARCH;
	if ((e = search_exact(t, q, &s)) ||
	    (e = search_nearest(t, q, &a->target, &s, a->max_distance, &dist, &a->skipped,
				&a->skipped_distance))) {
		a->match = LOOKUP_ARCH;
		goto found;
	}
	if (!q->fam->default_config ||
	    q->fam->default_config(&q->shape, &a->target, &a->cfg) != 0)
		return kt_err_set(err, KT_ENOTFOUND,
				  "nothing tuned for %s on %s and the family has no default for this shape",
				  q->fam->name, a->arch);
	a->match = LOOKUP_DEFAULT;
	return 0;
found:
	a->src = e;
	a->cfg = e->cfg;
	a->distance = dist;
	return 0;
}

/* ---- JSON ---- */

json_t *lookup_shape_json(const struct kt_family *f, const struct kt_shape *s)
{
	json_t *o = json_object();
	int i;

	for (i = 0; o && i < f->ndims; i++)
		json_object_set_new(o, f->dims[i].name, json_integer(s->v[i]));
	return o;
}

json_t *lookup_config_json(const struct kt_family *f, const struct kt_config *c)
{
	json_t *o = json_object();
	int i;

	if (!o)
		return NULL;
	if (c->variant >= 0 && c->variant < f->nvariants)
		json_object_set_new(o, "variant", json_string(f->variants[c->variant]));
	for (i = 0; i < f->nparams; i++)
		if (f->params[i].variants & (1u << c->variant))
			json_object_set_new(o, f->params[i].name, json_integer(c->p[i]));
	return o;
}

json_t *lookup_device_json(const struct store_device *d)
{
	return json_pack("{s:I,s:s,s:s,s:s,s:i,s:I,s:i,s:i,s:i,s:s,s:s,s:s}",
			 "id", (json_int_t)d->id, "name", d->name, "uuid", d->uuid,
			 "arch", d->arch, "sms", d->sms, "l2_bytes", (json_int_t)d->l2_bytes,
			 "smem_optin", d->smem_optin, "clock_mhz", d->clock_mhz,
			 "mem_clock_mhz", d->mem_clock_mhz, "driver", d->driver,
			 "cuda", d->cuda, "nvrtc", d->nvrtc);
}

static json_t *num_or_null(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

json_t *lookup_answer_json(const struct lookup_query *q, const struct lookup_answer *a)
{
	const struct kt_family *f = q->fam;
	const struct lookup_entry *e = a->src;
	json_t *o = json_object(), *m;
	char key[512], ck[512];
	double us;

	if (!o)
		return NULL;
	kt_shape_key(f, &q->shape, key, sizeof(key));
	kt_config_key(f, &a->cfg, ck, sizeof(ck));
	json_object_set_new(o, "family", json_string(f->name));
	json_object_set_new(o, "shape_key", json_string(key));
	json_object_set_new(o, "shape", lookup_shape_json(f, &q->shape));
	json_object_set_new(o, "device", a->device ? lookup_device_json(a->device) : json_null());
	json_object_set_new(o, "arch", json_string(a->arch));
	json_object_set_new(o, "match", json_string(lookup_match_name(a->match)));
	json_object_set_new(o, "distance", json_real(a->distance));
	/* null: no limit (JSON has no infinity) */
	json_object_set_new(o, "max_distance",
			    isfinite(a->max_distance) ? json_real(a->max_distance) : json_null());
	json_object_set_new(o, "skipped_nearest", a->skipped ?
		json_pack("{s:s,s:s,s:s,s:f}", "shape_key", a->skipped->w.shape_key,
			  "device", a->skipped->w.device_name, "device_uuid", a->skipped->w.device_uuid,
			  "distance", a->skipped_distance) : json_null());
	json_object_set_new(o, "config_key", json_string(ck));
	json_object_set_new(o, "config", lookup_config_json(f, &a->cfg));
	json_object_set_new(o, "floor_us", json_real(a->floor_us));
	/* How to run the answer at the asked shape (grids, buffers and
	 * arguments are the shape's; a nearest answer's tuned shape has
	 * others): null, with the reason, when the family will not plan it. */
	{
		struct kt_err perr = { 0 };
		json_t *plan = launch_plan_json(f, &q->shape, &a->cfg, &a->target, &perr);

		json_object_set_new(o, "launch", plan ? plan : json_null());
		if (!plan)
			json_object_set_new(o, "launch_error", json_string(perr.msg));
	}
	if (!e) {
		json_object_set_new(o, "tuned", json_null());
		json_object_set_new(o, "median_us", json_null());
		json_object_set_new(o, "baselines", json_object());
		json_object_set_new(o, "speedup", json_object());
		json_object_set_new(o, "provenance", json_null());
		return o;
	}
	/* Times were measured on the tuned shape (tuned.shape_key), which is
	 * the asked one only for an exact match. */
	json_object_set_new(o, "tuned", json_pack("{s:s,s:s,s:s,s:I}",
		"shape_key", e->w.shape_key, "device", e->w.device_name,
		"device_uuid", e->w.device_uuid, "sweep_id", (json_int_t)e->w.sweep_id));
	json_object_set_new(o, "median_us", json_real(e->w.median_us));
	json_object_set_new(o, "min_us", json_real(e->w.min_us));
	json_object_set_new(o, "p90_us", json_real(e->w.p90_us));
	json_object_set_new(o, "retime_us", num_or_null(e->w.retime_us));
	json_object_set_new(o, "baselines", json_pack("{s:o,s:o}",
		"cublas_us", num_or_null(e->w.cublas_us), "naive_us", num_or_null(e->w.naive_us)));
	us = e->w.median_us;
	json_object_set_new(o, "speedup", json_pack("{s:o,s:o}",
		"vs_cublas", e->w.cublas_us > 0 && us > 0 ? json_real(e->w.cublas_us / us) : json_null(),
		"vs_naive", e->w.naive_us > 0 && us > 0 ? json_real(e->w.naive_us / us) : json_null()));
	if (a->match == LOOKUP_EXACT && a->floor_us > 0)
		json_object_set_new(o, "of_floor", json_real(us / a->floor_us));
	m = e->w.provenance_json ? json_loads(e->w.provenance_json, 0, NULL) : NULL;
	json_object_set_new(o, "provenance", m ? m : json_null());
	return o;
}

int lookup_shape_from_json(const struct kt_family *f, json_t *j, struct kt_shape *out,
			   struct kt_err *err)
{
	char text[512];
	size_t len = 0;
	const char *k;
	json_t *v;

	if (json_is_string(j))
		return kt_shape_parse(f, json_string_value(j), out, err);
	if (!json_is_object(j))
		return kt_err_set(err, KT_EINVAL, "shape must be an object of dims or a key string");
	text[0] = 0;
	json_object_foreach(j, k, v) {
		int n;

		if (!json_is_integer(v))
			return kt_err_set(err, KT_EINVAL, "shape dim '%s' must be an integer", k);
		n = snprintf(text + len, sizeof(text) - len, "%s%s=%lld", len ? "," : "", k,
			     (long long)json_integer_value(v));
		if (n < 0 || (size_t)n >= sizeof(text) - len)
			return kt_err_set(err, KT_EINVAL, "shape too long");
		len += n;
	}
	return kt_shape_parse(f, text, out, err);
}
