#include "lookup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../runtime/chain.h"
#include "launch.h"
#include "query.h"

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
	free(t->chain_devices);
	free(t->chain_entries);
	t->entries = NULL;
	t->devices = NULL;
	t->chain_devices = NULL;
	t->chain_entries = NULL;
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

static void chain_device_of(const struct store_device *d, struct chain_device *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", d->name);
	snprintf(c->arch, sizeof(c->arch), "%s", d->arch);
	c->sms = d->sms;
	c->l2_bytes = d->l2_bytes;
	c->smem_optin = d->smem_optin;
}

/* The chain's view of the table (runtime/chain.h), rebuilt whenever the
 * entries change: the same plain data, so that the server, `ktune best` and
 * libktune answer with one chain. */
static int chain_sync(struct lookup_table *t, struct kt_err *err)
{
	int i;

	free(t->chain_devices);
	free(t->chain_entries);
	t->chain_devices = NULL;
	t->chain_entries = NULL;
	if ((t->ndevices && !(t->chain_devices = calloc(t->ndevices, sizeof(*t->chain_devices)))) ||
	    (t->nentries && !(t->chain_entries = calloc(t->nentries, sizeof(*t->chain_entries)))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	for (i = 0; i < t->ndevices; i++)
		chain_device_of(&t->devices[i], &t->chain_devices[i]);
	for (i = 0; i < t->nentries; i++) {
		const struct lookup_entry *e = &t->entries[i];
		struct chain_entry *c = &t->chain_entries[i];

		c->fam = e->fam;
		c->shape = e->shape;
		c->cfg = e->cfg;
		c->device = e->device;
		c->median_us = e->w.median_us;
	}
	return 0;
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
	if (chain_sync(t, err) < 0)
		goto out;
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
	if (chain_sync(t, err) < 0)
		goto out;
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
	return chain_match_name((enum chain_match)m);
}

double lookup_distance(const struct kt_family *f, const struct kt_shape *a,
		       const struct kt_shape *b)
{
	return chain_distance(f, a, b);
}

int lookup_device_target(const char *arch, const struct store_device *d,
			 struct kt_target *out, struct kt_err *err)
{
	struct chain_device c;

	if (d)
		chain_device_of(d, &c);
	return chain_target(arch, d ? &c : NULL, out, err);
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

int lookup_within(double distance, double limit)
{
	return chain_within(distance, limit);
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

int lookup_best(const struct lookup_table *t, const struct lookup_query *q,
		struct lookup_answer *a, struct kt_err *err)
{
	struct chain_table ct = { t->ndevices, t->chain_devices, t->nentries, t->chain_entries };
	struct chain_query cq;
	struct chain_answer ca;
	int dev, rc;

	memset(a, 0, sizeof(*a));
	if (resolve_device(t, q, &dev, err) < 0)
		return -1;
	memset(&cq, 0, sizeof(cq));
	cq.fam = q->fam;
	cq.shape = q->shape;
	cq.device = dev;
	cq.arch = q->arch;
	cq.max_distance = q->max_distance_set ? q->max_distance : LOOKUP_MAX_DISTANCE;
	a->device = dev >= 0 ? &t->devices[dev] : NULL;
	a->floor_us = kt_floor_us(q->fam, &q->shape, a->device ? a->device->name : NULL);
	a->max_distance = cq.max_distance;
	memset(&ca, 0, sizeof(ca));
	rc = chain_best(&ct, &cq, &ca, err);
	/* the target asked about, also on failure: the server explains a
	 * refused shape against it */
	snprintf(a->arch, sizeof(a->arch), "%s", ca.arch);
	a->target = ca.target;
	if (rc < 0)
		return -1;
	a->match = (enum lookup_match)ca.match;
	a->distance = ca.distance;
	a->cfg = ca.cfg;
	a->src = ca.entry >= 0 ? &t->entries[ca.entry] : NULL;
	a->skipped = ca.skipped >= 0 ? &t->entries[ca.skipped] : NULL;
	a->skipped_distance = ca.skipped_distance;
	return 0;
}

/* ---- JSON ---- */

json_t *lookup_device_json(const struct store_device *d)
{
	return json_pack("{s:I,s:s,s:s,s:s,s:i,s:I,s:i,s:i,s:i,s:s,s:s,s:s}",
			 "id", (json_int_t)d->id, "name", d->name, "uuid", d->uuid,
			 "arch", d->arch, "sms", d->sms, "l2_bytes", (json_int_t)d->l2_bytes,
			 "smem_optin", d->smem_optin, "clock_mhz", d->clock_mhz,
			 "mem_clock_mhz", d->mem_clock_mhz, "driver", d->driver,
			 "cuda", d->cuda, "nvrtc", d->nvrtc);
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
	json_object_set_new(o, "shape", famjson_shape(f, &q->shape));
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
	json_object_set_new(o, "config", famjson_config(f, &a->cfg));
	json_object_set_new(o, "floor_us", famjson_num_or_null(a->floor_us));
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
	json_object_set_new(o, "retime_us", famjson_num_or_null(e->w.retime_us));
	json_object_set_new(o, "baselines", json_pack("{s:o,s:o}",
		"cublas_us", famjson_num_or_null(e->w.cublas_us), "naive_us", famjson_num_or_null(e->w.naive_us)));
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
