/*
 * routes.c -- the handlers of the HTTP API and their table, which
 * server_start() hands to the HTTP layer (http.c). Each handler fills a
 * struct reply or returns -1 with err set (http.c turns it into the JSON
 * error body).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/family.h"
#include "../tuner/strategy.h"
#include "explain.h"
#include "export.h"
#include "import.h"
#include "query.h"
#include "server_int.h"

#include "index_html.h"
#include "openapi_json.h"
#include "../util/clock.h"

#ifndef KTUNE_VERSION
#define KTUNE_VERSION "unknown"
#endif

#define BATCH_MAX 1000		/* queries per POST /v1/best:batch */

static int reply_json(struct reply *out, int status, json_t *j, struct kt_err *err)
{
	if (!j)
		return kt_err_set(err, KT_EINTERNAL, "out of memory building the reply");
	out->status = status;
	out->json = j;
	return 0;
}

static int reply_text(struct reply *out, const char *ctype, const char *text, size_t len,
		      struct kt_err *err)
{
	if (!(out->text = malloc(len + 1)))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	memcpy(out->text, text, len);
	out->text[len] = 0;
	out->len = len;
	out->ctype = ctype;
	out->status = 200;
	return 0;
}

/* A non-negative integer query argument; def when absent. */
static int arg_long(struct request *rq, const char *name, long def, long max, long *out,
		    struct kt_err *err)
{
	const char *v = srv_arg(rq, name);
	char *end;

	*out = def;
	if (!v)
		return 0;
	errno = 0;
	*out = strtol(v, &end, 10);
	if (!*v || *end || errno || *out < 0 || *out > max)
		return kt_err_set(err, KT_EINVAL, "%s must be an integer in 0..%ld", name, max);
	return 0;
}

static json_t *parse_body(struct request *rq, struct kt_err *err)
{
	json_error_t je;
	json_t *j;

	if (!rq->body || !rq->len) {
		kt_err_set(err, KT_EINVAL, "a JSON body is required");
		return NULL;
	}
	if (!(j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &je))) {
		kt_err_set(err, KT_EINVAL, "malformed JSON body: %s (line %d, column %d)", je.text,
			   je.line, je.column);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		kt_err_set(err, KT_EINVAL, "the JSON body must be an object");
		return NULL;
	}
	return j;
}

static const struct kt_family *family_named(const char *name, struct kt_err *err)
{
	const struct kt_family *f;

	if (!name || !*name) {
		kt_err_set(err, KT_EINVAL, "family is required");
		return NULL;
	}
	if (!(f = kt_family_find(name)) || f->hidden) {
		kt_err_set(err, KT_ENOTFOUND, "unknown family '%s' (see /v1/families)", name);
		return NULL;
	}
	return f;
}

/* ---- GET /v1/health ---- */

static int r_health(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct srv_tls *t = srv_tls_get(rq->srv, err);

	if (!t)
		return -1;
	return reply_json(out, 200, json_pack("{s:s,s:s,s:s,s:i,s:i,s:f}", "status", "ok",
		"version", KTUNE_VERSION, "db", rq->srv->db_path, "devices", t->table.ndevices,
		"winners", t->table.nentries, "uptime_s", kt_unix_s() - rq->srv->started), err);
}

/* ---- GET /v1/devices ---- */

static int r_devices(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct srv_tls *t = srv_tls_get(rq->srv, err);
	json_t *arr;
	int i;

	if (!t)
		return -1;
	arr = json_array();
	for (i = 0; arr && i < t->table.ndevices; i++) {
		json_t *d = lookup_device_json(&t->table.devices[i]);
		int k, n = 0;

		for (k = 0; k < t->table.nentries; k++)
			n += t->table.entries[k].device == i;
		json_object_set_new(d, "winners", json_integer(n));
		json_array_append_new(arr, d);
	}
	return reply_json(out, 200, json_pack("{s:o}", "devices", arr), err);
}

/* ---- GET /v1/families[/NAME] ---- */

static json_t *family_detail(const struct kt_family *f)
{
	json_t *dims = json_array(), *vars = json_array(), *params = json_array();
	int i, v;

	for (i = 0; i < f->ndims; i++)
		json_array_append_new(dims, json_pack("{s:s,s:I,s:I,s:b,s:s}",
			"name", f->dims[i].name, "min", (json_int_t)f->dims[i].min,
			"max", (json_int_t)f->dims[i].max, "structural", f->dims[i].structural,
			"help", f->dims[i].help ? f->dims[i].help : ""));
	for (i = 0; i < f->nvariants; i++)
		json_array_append_new(vars, json_pack("{s:s,s:b}", "name", f->variants[i],
			"planted", (f->planted >> i) & 1));
	for (i = 0; i < f->nparams; i++) {
		json_t *vals = json_array(), *used = json_array();

		for (v = 0; v < f->params[i].nvalues; v++)
			json_array_append_new(vals, json_integer(f->params[i].values[v]));
		for (v = 0; v < f->nvariants; v++)
			if (f->params[i].variants & (1u << v))
				json_array_append_new(used, json_string(f->variants[v]));
		json_array_append_new(params, json_pack("{s:s,s:o,s:o,s:s}", "name",
			f->params[i].name, "values", vals, "variants", used,
			"help", f->params[i].help ? f->params[i].help : ""));
	}
	return json_pack("{s:s,s:s,s:o,s:o,s:o,s:I,s:f}", "name", f->name,
		"summary", f->summary ? f->summary : "", "shape", dims, "variants", vars,
		"params", params, "space_size", (json_int_t)kt_space_size(f, 0), "tol", f->tol);
}

static int r_families(struct request *rq, struct reply *out, struct kt_err *err)
{
	json_t *arr = json_array();
	int i;

	for (i = 0; arr && i < kt_family_count(); i++)
		if (!kt_family_at(i)->hidden)
			json_array_append_new(arr, family_detail(kt_family_at(i)));
	return reply_json(out, 200, json_pack("{s:o}", "families", arr), err);
}

static int r_family(struct request *rq, struct reply *out, struct kt_err *err)
{
	const struct kt_family *f = family_named(rq->tail, err);

	if (!f)
		return -1;
	return reply_json(out, 200, family_detail(f), err);
}

/* ---- GET /v1/best, POST /v1/best:batch ---- */

struct shape_args {
	char text[512];
	size_t len;
	int overflow;
};

static enum MHD_Result collect_dim(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	static const char *const reserved[] = { "family", "device", "arch", "shape", "pretty",
						"max_distance" };
	struct shape_args *a = cls;
	size_t i;
	int n;

	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcmp(key, reserved[i]) == 0)
			return MHD_YES;
	n = snprintf(a->text + a->len, sizeof(a->text) - a->len, "%s%s=%s", a->len ? "," : "",
		     key, value ? value : "");
	if (n < 0 || (size_t)n >= sizeof(a->text) - a->len)
		a->overflow = 1;
	else
		a->len += n;
	return MHD_YES;
}

static int best_one(struct srv_tls *t, struct lookup_query *q, json_t **out, struct kt_err *err)
{
	struct lookup_answer a;

	if (lookup_best(&t->table, q, &a, err) < 0) {
		/* "no default for this shape": say which rule the shape broke */
		if (err->code == KT_ENOTFOUND && a.target.sm)
			explain_unsupported(q->fam, &q->shape, &a.target, a.arch,
					    "GET /v1/families lists the shape keys", err);
		return -1;
	}
	if (!(*out = lookup_answer_json(q, &a)))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	if (a.match == LOOKUP_DEFAULT) {
		char why[640];

		explain_default(&t->table, q, &a, why, sizeof(why));
		json_object_set_new(*out, "reason", json_string(why));
	} else
		json_object_set_new(*out, "reason", json_null());
	return 0;
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* A cached answer for key, copied into out: 1 hit, 0 miss. */
static int cache_get(struct srv_tls *t, const char *key, uint64_t h, struct reply *out)
{
	struct srv_cached *c = &t->cache[h % SRV_CACHE_SLOTS];

	if (t->cache_version != t->table.data_version) {
		srv_cache_clear(t);
		t->cache_version = t->table.data_version;
		return 0;
	}
	if (!c->key || c->hash != h || strcmp(c->key, key) != 0)
		return 0;
	if (!(out->text = malloc(c->len)))
		return 0;
	memcpy(out->text, c->body, c->len);
	out->len = c->len;
	out->ctype = "application/json";
	out->status = 200;
	return 1;
}

static void cache_put(struct srv_tls *t, const char *key, uint64_t h, json_t *j)
{
	struct srv_cached *c = &t->cache[h % SRV_CACHE_SLOTS];
	char *body = json_dumps(j, JSON_COMPACT), *k = strdup(key);

	if (!body || !k) {
		free(body);
		free(k);
		return;
	}
	free(c->key);
	free(c->body);
	c->hash = h;
	c->key = k;
	c->body = body;
	c->len = strlen(body);
}

static int r_best(struct request *rq, struct reply *out, struct kt_err *err)
{
	char key[800];
	uint64_t h;
	struct lookup_query q = { 0 };
	struct shape_args sa = { .len = 0 };
	struct srv_tls *t;
	const char *shape = srv_arg(rq, "shape");
	json_t *j;

	if (!(q.fam = family_named(srv_arg(rq, "family"), err)))
		return -1;
	q.device = srv_arg(rq, "device");
	q.arch = srv_arg(rq, "arch");
	if (lookup_query_max_distance(&q, srv_arg(rq, "max_distance"), err) < 0)
		return -1;
	/* The shape as dims (tokens=1024&in=4096...) or one key (shape=...). */
	if (!shape) {
		MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, collect_dim, &sa);
		if (sa.overflow)
			return kt_err_set(err, KT_EINVAL, "shape too long");
		shape = sa.text;
	}
	if (kt_shape_parse(q.fam, shape, &q.shape, err) < 0)
		return -1;
	if (!(t = srv_tls_get(rq->srv, err)))
		return -1;
	/* The normalized query: the same question in another spelling
	 * (argument order, shape= or dims) hits the same slot. */
	{
		int n = snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%.17g\x1f", q.fam->name,
				 q.device ? q.device : "", q.arch ? q.arch : "",
				 q.max_distance_set ? q.max_distance : -1.0);

		if (n < 0 || (size_t)n >= sizeof(key))
			return kt_err_set(err, KT_EINVAL, "device or arch too long");
		kt_shape_key(q.fam, &q.shape, key + n, sizeof(key) - n);
	}
	h = fnv1a(key);
	if (cache_get(t, key, h, out))
		return 0;
	if (best_one(t, &q, &j, err) < 0)
		return -1;
	cache_put(t, key, h, j);
	return reply_json(out, 200, j, err);
}

/* A batch query's "max_distance": absent or null (the default limit), a
 * number >= 0, or a string lookup_max_distance_parse takes ("inf"). */
static int batch_max_distance(json_t *md, size_t i, struct lookup_query *q, struct kt_err *err)
{
	if (!md || json_is_null(md))
		return 0;
	if (json_is_string(md))
		return lookup_query_max_distance(q, json_string_value(md), err);
	if (!json_is_number(md) || json_number_value(md) < 0)
		return kt_err_set(err, KT_EINVAL, "query %zu: max_distance must be a number >= 0 or \"inf\"", i);
	q->max_distance = json_number_value(md);
	q->max_distance_set = 1;
	return 0;
}

/* A batch query's keys and their types, before any is read: a key the
 * API does not have, or a value of another type, would otherwise be
 * ignored (a number for "device" answered for the only device). What the
 * OpenAPI document says of a query is checked here, for all of them
 * before any answers (a 400 for the request); what only the database or
 * the family can say (an unknown family, a shape it does not have) is
 * that query's own error. */
static int batch_item_check(json_t *item, size_t i, struct kt_err *err)
{
	static const char *const strings[] = { "family", "device", "arch" };
	const char *k;
	json_t *v;
	size_t n;

	if (!json_is_object(item))
		return kt_err_set(err, KT_EINVAL, "query %zu is not an object", i);
	json_object_foreach(item, k, v) {
		if (strcmp(k, "shape") == 0) {
			const char *dk;
			json_t *dv;

			if (json_is_string(v) && *json_string_value(v))
				continue;
			if (!json_is_object(v))
				return kt_err_set(err, KT_EINVAL, "query %zu: shape must be a key string or "
						  "an object of dims", i);
			json_object_foreach(v, dk, dv)
				if (!json_is_integer(dv))
					return kt_err_set(err, KT_EINVAL,
							  "query %zu: shape dim '%.64s' must be an integer", i, dk);
			continue;
		}
		if (strcmp(k, "max_distance") == 0) {
			double d;

			if (json_is_null(v) || (json_is_number(v) && json_number_value(v) >= 0))
				continue;
			if (json_is_string(v) && lookup_max_distance_parse(json_string_value(v), &d, err) == 0)
				continue;
			kt_err_clear(err);
			return kt_err_set(err, KT_EINVAL,
					  "query %zu: max_distance must be a number >= 0 or \"inf\"", i);
		}
		for (n = 0; n < sizeof(strings) / sizeof(strings[0]); n++)
			if (strcmp(k, strings[n]) == 0)
				break;
		if (n == sizeof(strings) / sizeof(strings[0]))
			return kt_err_set(err, KT_EINVAL,
					  "query %zu: unknown key '%.64s' (keys: family, shape, device, arch, max_distance)",
					  i, k);
		if (!json_is_string(v) || !*json_string_value(v))
			return kt_err_set(err, KT_EINVAL, "query %zu: %s must be a non-empty string", i, k);
	}
	if (!json_object_get(item, "family"))
		return kt_err_set(err, KT_EINVAL, "query %zu: family is required", i);
	if (!json_object_get(item, "shape"))
		return kt_err_set(err, KT_EINVAL, "query %zu: shape is required", i);
	return 0;
}

static int r_best_batch(struct request *rq, struct reply *out, struct kt_err *err)
{
	json_t *body = parse_body(rq, err), *qs, *res, *item;
	struct srv_tls *t;
	size_t i;
	int rc = -1;

	if (!body)
		return -1;
	qs = json_object_get(body, "queries");
	if (!json_is_array(qs)) {
		kt_err_set(err, KT_EINVAL, "body must be {\"queries\": [{\"family\", \"shape\", \"device\"?, \"arch\"?, \"max_distance\"?}, ...]}");
		goto out;
	}
	/* a 400, as the document's maxItems says: 413 is for bodies over
	 * the byte cap */
	if (json_array_size(qs) > BATCH_MAX) {
		kt_err_set(err, KT_EINVAL, "at most %d queries per batch (%zu given)", BATCH_MAX,
			   json_array_size(qs));
		goto out;
	}
	json_array_foreach(qs, i, item)
		if (batch_item_check(item, i, err) < 0)
			goto out;
	{
		const char *k;
		json_t *v;

		json_object_foreach(body, k, v)
			if (strcmp(k, "queries") != 0) {
				kt_err_set(err, KT_EINVAL, "unknown key '%.64s' (the body is {\"queries\": [...]})",
					   k);
				goto out;
			}
	}
	if (!(t = srv_tls_get(rq->srv, err)))
		goto out;
	res = json_array();
	/* One bad query answers with its own error; the others still answer. */
	json_array_foreach(qs, i, item) {
		struct lookup_query q = { 0 };
		struct kt_err qe = { 0 };
		json_t *a = NULL;

		if ((q.fam = family_named(json_string_value(json_object_get(item, "family")), &qe)) &&
		    lookup_shape_from_json(q.fam, json_object_get(item, "shape"), &q.shape, &qe) == 0) {
			q.device = json_string_value(json_object_get(item, "device"));
			q.arch = json_string_value(json_object_get(item, "arch"));
			if (batch_max_distance(json_object_get(item, "max_distance"), i, &q, &qe) == 0)
				best_one(t, &q, &a, &qe);
		}
		if (!a)
			a = json_pack("{s:{s:s,s:s,s:i}}", "error", "code", kt_errcode_name(qe.code),
				      "message", qe.msg, "status", kt_errcode_http(qe.code));
		json_array_append_new(res, a);
	}
	rc = reply_json(out, 200, json_pack("{s:o}", "results", res), err);
out:
	json_decref(body);
	return rc;
}

/* ---- winners (the dashboard's table) ---- */

static int r_winners(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct srv_tls *t = srv_tls_get(rq->srv, err);
	const char *dev = srv_arg(rq, "device"), *fam = srv_arg(rq, "family");
	json_t *arr;
	int i;

	if (!t)
		return -1;
	arr = json_array();
	for (i = 0; arr && i < t->table.nentries; i++) {
		const struct lookup_entry *e = &t->table.entries[i];
		const struct store_winner *w = &e->w;
		json_t *o;

		if (fam && strcmp(fam, w->family) != 0)
			continue;
		if (dev && strcmp(dev, w->device_uuid) != 0 && strcmp(dev, w->device_name) != 0)
			continue;
		o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:s,s:I,s:f,s:o}",
			"device", w->device_name, "device_uuid", w->device_uuid, "arch", w->arch,
			"family", w->family, "shape_key", w->shape_key,
			"config", famjson_config(e->fam, &e->cfg), "config_key", w->config_key,
			"sweep_id", (json_int_t)w->sweep_id, "median_us", w->median_us,
			"floor_us", famjson_num_or_null(kt_floor_us(e->fam, &e->shape, w->device_name)));
		json_object_set_new(o, "cublas_us", famjson_num_or_null(w->cublas_us));
		json_object_set_new(o, "naive_us", famjson_num_or_null(w->naive_us));
		json_object_set_new(o, "speedup_vs_cublas", w->cublas_us > 0 ?
				    json_real(w->cublas_us / w->median_us) : json_null());
		json_object_set_new(o, "speedup_vs_naive", w->naive_us > 0 ?
				    json_real(w->naive_us / w->median_us) : json_null());
		json_array_append_new(arr, o);
	}
	return reply_json(out, 200, json_pack("{s:o}", "winners", arr), err);
}

/* ---- sweeps ---- */

static json_t *sweep_json(const struct store_sweep *s)
{
	json_t *prov = s->provenance_json ? json_loads(s->provenance_json, 0, NULL) : NULL;

	return json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:{s:I,s:I,s:f},s:f,s:o,s:o}",
		"id", (json_int_t)s->id, "device_id", (json_int_t)s->device_id,
		"family", s->family, "shape_key", s->shape_key, "strategy", s->strategy,
		"status", store_sweep_status_name(s->status),
		"progress", "done", (json_int_t)s->done, "planned", (json_int_t)s->planned,
		"fraction", s->planned > 0 ? (double)s->done / s->planned : (s->done ? 1.0 : 0.0),
		"started", s->started, "finished", famjson_num_or_null(s->finished),
		"provenance", prov ? prov : json_null());
}

static json_t *job_json(const struct job_status *j)
{
	char id[32];
	json_t *o;

	snprintf(id, sizeof(id), "job-%d", j->id);
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:{s:I,s:I,s:f},s:f}", "id", id,
		"state", job_state_name(j->state), "status", job_state_name(j->state),
		"family", j->spec.family, "shape_key", j->spec.shape_key,
		"progress", "done", (json_int_t)j->done, "planned", (json_int_t)j->planned,
		"fraction", j->planned > 0 ? (double)j->done / j->planned : 0.0,
		"created", j->created);
	json_object_set_new(o, "sweep_id", j->sweep_id ? json_integer(j->sweep_id) : json_null());
	json_object_set_new(o, "best_us", famjson_num_or_null(j->best_us));
	json_object_set_new(o, "best_config", j->best_config[0] ? json_string(j->best_config) : json_null());
	json_object_set_new(o, "error", j->state == JOB_FAILED ?
		json_pack("{s:s,s:s}", "code", kt_errcode_name(j->code), "message", j->message) :
		json_null());
	return o;
}

static int r_sweeps(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct store_sweep *sw = NULL;
	struct job_status *jobs = NULL;
	struct srv_tls *t;
	json_t *a, *b;
	long limit;
	int n = 0, nj = 0, i, rc = -1;

	if (strcmp(rq->method, "POST") == 0) {
		json_t *body = parse_body(rq, err), *shape;
		const struct kt_family *f;
		struct job_spec spec;
		struct kt_shape s;
		json_t *v;
		int id;

		if (!body)
			return -1;
		memset(&spec, 0, sizeof(spec));
		{
			static const char keys[] = " family shape strategy budget device ";
			const char *k;
			char word[72];

			json_object_foreach(body, k, v) {
				snprintf(word, sizeof(word), " %.64s ", k);
				if (!strstr(keys, word)) {
					kt_err_set(err, KT_EINVAL, "unknown key '%.64s' (keys:%s)", k, keys);
					goto post_out;
				}
			}
		}
		if ((v = json_object_get(body, "family")) && !json_is_string(v)) {
			kt_err_set(err, KT_EINVAL, "family must be a string");
			goto post_out;
		}
		if (!(f = family_named(json_string_value(json_object_get(body, "family")), err)))
			goto post_out;
		shape = json_object_get(body, "shape");
		if (!shape) {
			kt_err_set(err, KT_EINVAL, "shape is required");
			goto post_out;
		}
		if (lookup_shape_from_json(f, shape, &s, err) < 0)
			goto post_out;
		snprintf(spec.family, sizeof(spec.family), "%s", f->name);
		kt_shape_key(f, &s, spec.shape_key, sizeof(spec.shape_key));
		if ((v = json_object_get(body, "strategy"))) {
			const char *st = json_string_value(v);

			if (!st || strategy_check(st, err) != 0) {
				kt_err_set(err, KT_EINVAL, "strategy must be a string");
				goto post_out;
			}
			snprintf(spec.strategy, sizeof(spec.strategy), "%s", st);
		}
		if ((v = json_object_get(body, "budget"))) {
			if (!json_is_integer(v) || json_integer_value(v) < 0) {
				kt_err_set(err, KT_EINVAL, "budget must be a non-negative integer");
				goto post_out;
			}
			spec.budget = (long)json_integer_value(v);
		}
		if ((v = json_object_get(body, "device"))) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 64) {
				kt_err_set(err, KT_EINVAL, "device must be a CUDA ordinal (0, 1, ...)");
				goto post_out;
			}
			snprintf(spec.device, sizeof(spec.device), "%lld", (long long)json_integer_value(v));
		}
		snprintf(spec.db_path, sizeof(spec.db_path), "%s", rq->srv->db_path);
		snprintf(spec.exe, sizeof(spec.exe), "%s", rq->srv->exe);
		if (jobs_submit(rq->srv->jobs, &spec, &id, err) < 0)
			goto post_out;
		{
			struct job_status js;

			if (jobs_get(rq->srv->jobs, id, &js))
				rc = reply_json(out, 202, job_json(&js), err);
			else
				rc = kt_err_set(err, KT_EINTERNAL, "job %d vanished", id);
		}
post_out:
		json_decref(body);
		return rc;
	}
	if (arg_long(rq, "limit", 100, 100000, &limit, err) < 0)
		return -1;
	if (!(t = srv_tls_get(rq->srv, err)))
		return -1;
	if (store_sweeps_list(t->st, (int)limit, &sw, &n, err) < 0)
		goto out;
	if (jobs_list(rq->srv->jobs, &jobs, &nj, err) < 0)
		goto out;
	a = json_array();
	b = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(a, sweep_json(&sw[i]));
	for (i = 0; i < nj; i++)
		json_array_append_new(b, job_json(&jobs[i]));
	rc = reply_json(out, 200, json_pack("{s:o,s:o}", "sweeps", a, "jobs", b), err);
out:
	for (i = 0; i < n; i++)
		store_sweep_release(&sw[i]);
	free(sw);
	free(jobs);
	return rc;
}

static int r_trials(struct request *rq, struct reply *out, int64_t id, struct kt_err *err)
{
	struct store_trial_row *rows = NULL;
	struct store_sweep sw;
	struct srv_tls *t;
	json_t *a;
	long limit;
	int n = 0, i, rc = -1;

	memset(&sw, 0, sizeof(sw));
	if (arg_long(rq, "limit", 0, 1000000, &limit, err) < 0)
		return -1;
	if (!(t = srv_tls_get(rq->srv, err)))
		return -1;
	if (store_sweep_get(t->st, id, &sw, err) < 0)
		return -1;
	if (store_trials_list(t->st, id, (int)limit, &rows, &n, err) < 0)
		goto out;
	a = json_array();
	for (i = 0; i < n; i++) {
		const struct store_trial_row *r = &rows[i];
		json_t *o = json_pack("{s:s,s:s}", "config_key", r->config_key, "status", r->status);
		json_t *params = r->params_json ? json_loads(r->params_json, 0, NULL) : NULL;
		int ok = strcmp(r->status, "ok") == 0;

		json_object_set_new(o, "config", params ? params : json_null());
		json_object_set_new(o, "median_us", ok ? json_real(r->median_us) : json_null());
		json_object_set_new(o, "min_us", ok ? json_real(r->min_us) : json_null());
		json_object_set_new(o, "p90_us", ok ? json_real(r->p90_us) : json_null());
		json_object_set_new(o, "spread", ok ? json_real(r->spread) : json_null());
		json_object_set_new(o, "reps", json_integer(r->reps));
		json_object_set_new(o, "rel_err", r->rel_err >= 0 ? json_real(r->rel_err) : json_null());
		json_object_set_new(o, "compile_ms", json_real(r->compile_ms));
		json_object_set_new(o, "retime_us", famjson_num_or_null(r->retime_us));
		json_object_set_new(o, "message", r->message ? json_string(r->message) : json_null());
		json_array_append_new(a, o);
	}
	rc = reply_json(out, 200, json_pack("{s:I,s:s,s:s,s:o}", "sweep_id", (json_int_t)id,
		"family", sw.family, "shape_key", sw.shape_key, "trials", a), err);
out:
	store_trial_rows_free(rows, n);
	store_sweep_release(&sw);
	return rc;
}

/* /v1/sweeps/ID, /v1/sweeps/job-N, /v1/sweeps/ID/trials */
static int r_sweep(struct request *rq, struct reply *out, struct kt_err *err)
{
	const char *tail = rq->tail;
	struct store_sweep sw;
	struct srv_tls *t;
	char *end;
	long long id;
	int rc;

	if (strncmp(tail, "job-", 4) == 0) {
		struct job_status js;

		if (srv_arg(rq, "limit"))
			return kt_err_set(err, KT_EINVAL, "limit is for /v1/sweeps/ID/trials");
		errno = 0;
		id = strtoll(tail + 4, &end, 10);
		if (errno || *end || end == tail + 4 || id <= 0 || id > 1000000000)
			return kt_err_set(err, KT_EINVAL, "bad job id '%s'", tail);
		if (!jobs_get(rq->srv->jobs, (int)id, &js))
			return kt_err_set(err, KT_ENOTFOUND, "no job %s", tail);
		return reply_json(out, 200, job_json(&js), err);
	}
	errno = 0;
	id = strtoll(tail, &end, 10);
	if (errno || end == tail || id <= 0 || (*end && strcmp(end, "/trials") != 0))
		return kt_err_set(err, KT_ENOTFOUND, "no route %s %s (sweep ids are numbers or job-N)",
				  rq->method, rq->url);
	if (*end)
		return r_trials(rq, out, id, err);
	if (srv_arg(rq, "limit"))
		return kt_err_set(err, KT_EINVAL, "limit is for /v1/sweeps/ID/trials");
	if (!(t = srv_tls_get(rq->srv, err)))
		return -1;
	memset(&sw, 0, sizeof(sw));
	if (store_sweep_get(t->st, id, &sw, err) < 0)
		return -1;
	rc = reply_json(out, 200, sweep_json(&sw), err);
	store_sweep_release(&sw);
	return rc;
}

/* ---- export / import ---- */

/* Builds the export of (fmt, f) from t's connection as one blob. */
static struct srv_blob *export_blob(struct srv_tls *t, enum export_format fmt,
				    const struct export_filter *f, struct kt_err *err)
{
	struct export_bundle b = { 0 };
	struct srv_blob *blob = NULL;
	char *text = NULL;
	int i;

	if (export_build(t->st, fmt, f, &b, err) < 0)
		return NULL;
	if (fmt == EXPORT_CUDA) {
		/* Several files: a JSON object of name -> text. */
		json_t *files = json_object(), *o;

		for (i = 0; files && i < b.n; i++)
			json_object_set_new(files, b.files[i].name,
					    json_stringn(b.files[i].data, b.files[i].len));
		o = json_pack("{s:o}", "files", files);
		text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		blob = text ? srv_blob_new(text, strlen(text)) : NULL;
		free(text);
	} else if (b.n > 0) {
		blob = srv_blob_new(b.files[0].data, b.files[0].len);
	}
	export_bundle_release(&b);
	if (!blob)
		kt_err_set(err, KT_EINTERNAL, "out of memory building the export");
	return blob;
}

/* The cached export for the key at generation gen, with a reference
 * taken; NULL when absent. Caller holds export_mu. */
static struct srv_blob *export_cached(struct server *s, int fmt, const char *dev, const char *fam,
				      long gen)
{
	int i;

	for (i = 0; i < SRV_EXPORT_SLOTS; i++) {
		struct srv_export_slot *e = &s->exports[i];

		if (e->blob && e->gen == gen && e->fmt == fmt && strcmp(e->device, dev) == 0 &&
		    strcmp(e->family, fam) == 0) {
			e->used = ++s->export_tick;
			atomic_fetch_add(&e->blob->refs, 1);
			return e->blob;
		}
	}
	return NULL;
}

/* Keeps blob for the key (a reference of its own); stale and least
 * recently used entries make room, and the cache stays under
 * SRV_EXPORT_BYTES. Caller holds export_mu. */
static void export_keep(struct server *s, int fmt, const char *dev, const char *fam, long gen,
			struct srv_blob *blob)
{
	struct srv_export_slot *e, *lru, *free_slot = NULL;
	size_t total;
	int i, full;

	if (blob->len > SRV_EXPORT_BYTES)
		return;	/* bigger than the whole cache: sent, not kept */
	/* what is stale goes, and the key's older copy */
	for (i = 0; i < SRV_EXPORT_SLOTS; i++) {
		e = &s->exports[i];
		if (e->blob && (e->gen != gen || (e->fmt == fmt && strcmp(e->device, dev) == 0 &&
						  strcmp(e->family, fam) == 0))) {
			srv_blob_unref(e->blob);
			e->blob = NULL;
		}
	}
	/* then the least recently used, until the bytes and a slot fit */
	for (;;) {
		total = blob->len;
		full = 0;
		lru = NULL;
		for (i = 0; i < SRV_EXPORT_SLOTS; i++) {
			e = &s->exports[i];
			if (!e->blob)
				continue;
			total += e->blob->len;
			full++;
			if (!lru || e->used < lru->used)
				lru = e;
		}
		if ((total <= SRV_EXPORT_BYTES && full < SRV_EXPORT_SLOTS) || !lru)
			break;
		srv_blob_unref(lru->blob);
		lru->blob = NULL;
	}
	for (i = 0; i < SRV_EXPORT_SLOTS && !free_slot; i++)
		if (!s->exports[i].blob)
			free_slot = &s->exports[i];
	if (!free_slot)
		return;
	free_slot->fmt = fmt;
	snprintf(free_slot->device, sizeof(free_slot->device), "%s", dev);
	snprintf(free_slot->family, sizeof(free_slot->family), "%s", fam);
	free_slot->gen = gen;
	free_slot->used = ++s->export_tick;
	atomic_fetch_add(&blob->refs, 1);
	free_slot->blob = blob;
}

/* Open like every read: it holds nothing /v1/winners and /v1/best do not
 * give. What made it costly (a second of CPU and tens of MB per call on a
 * big database) is bounded here instead: an export is built once per
 * change of the database and key, one at a time, and shared. */
static int r_export(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct server *s = rq->srv;
	const char *fmt_name = srv_arg(rq, "format");
	struct export_filter f = { srv_arg(rq, "device"), srv_arg(rq, "family") };
	struct srv_blob *blob;
	enum export_format fmt;
	struct srv_tls *t;
	long gen;

	if (!fmt_name)
		fmt_name = "json";
	if (export_format_parse(fmt_name, &fmt) < 0)
		return kt_err_set(err, KT_EINVAL, "format must be json, c, lib or cuda (the same as lib)");
	if (f.family && !family_named(f.family, err))
		return -1;
	if (f.device && (!*f.device || strlen(f.device) >= sizeof(s->exports[0].device)))
		return kt_err_set(err, KT_EINVAL, "device must be a uuid, name or id of 1 to %zu characters",
				  sizeof(s->exports[0].device) - 1);
	if (!(t = srv_tls_get(s, err)))
		return -1;
	if (f.device && query_device_known(t->st, f.device, err) <= 0)
		return -1;
	gen = atomic_load(&s->gen);
	pthread_mutex_lock(&s->export_mu);
	blob = export_cached(s, (int)fmt, f.device ? f.device : "", f.family ? f.family : "", gen);
	pthread_mutex_unlock(&s->export_mu);
	if (!blob) {
		pthread_mutex_lock(&s->export_build_mu);
		/* built meanwhile by the thread this one waited for? */
		pthread_mutex_lock(&s->export_mu);
		blob = export_cached(s, (int)fmt, f.device ? f.device : "", f.family ? f.family : "",
				     gen);
		pthread_mutex_unlock(&s->export_mu);
		if (!blob) {
			atomic_fetch_add(&s->export_builds, 1);
			if ((blob = export_blob(t, fmt, &f, err))) {
				pthread_mutex_lock(&s->export_mu);
				export_keep(s, (int)fmt, f.device ? f.device : "",
					    f.family ? f.family : "", gen, blob);
				pthread_mutex_unlock(&s->export_mu);
			}
		}
		pthread_mutex_unlock(&s->export_build_mu);
		if (!blob)
			return -1;
	}
	out->blob = blob;
	out->ctype = fmt == EXPORT_C ? "text/x-c; charset=utf-8" : "application/json";
	out->status = 200;
	return 0;
}

static int r_import(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct import_stats stats;
	struct store *st;
	int rc;

	if (!rq->body || !rq->len)
		return kt_err_set(err, KT_EINVAL, "a JSON body (a ktune export) is required");
	if (!(st = srv_writer_lock(rq->srv, err)))
		return -1;
	rc = import_json_text(st, rq->body, rq->len, &stats, err);
	srv_writer_unlock(rq->srv);
	if (rc < 0)
		return -1;
	return reply_json(out, 200, json_pack("{s:i,s:i,s:i,s:i}", "devices", stats.devices,
		"entries", stats.entries, "added", stats.entries_added,
		"skipped", stats.entries_skipped), err);
}

/* ---- /metrics ---- */

static int r_metrics(struct request *rq, struct reply *out, struct kt_err *err)
{
	struct server *s = rq->srv;
	struct srv_tls *t = srv_tls_get(s, err);
	struct query_counts qc;
	long jc[4];
	char *buf = NULL;
	size_t len = 0;
	FILE *fp;
	int i, k;

	if (!t || query_counts(t->st, &qc, err) < 0)
		return -1;
	jobs_counts(s->jobs, jc);
	if (!(fp = open_memstream(&buf, &len)))
		return kt_err_set(err, KT_EINTERNAL, "open_memstream failed");
	fprintf(fp, "# HELP ktune_up 1 while the server answers.\n# TYPE ktune_up gauge\nktune_up 1\n");
	fprintf(fp, "# HELP ktune_uptime_seconds Seconds since the server started.\n"
		    "# TYPE ktune_uptime_seconds gauge\nktune_uptime_seconds %.3f\n",
		kt_unix_s() - s->started);
	fprintf(fp, "# HELP ktune_http_requests_total Requests answered, by route and status.\n"
		    "# TYPE ktune_http_requests_total counter\n");
	for (i = 0; i <= s->nroutes; i++)
		for (k = 0; k < SRV_NCODES; k++) {
			long n = atomic_load(&s->requests[i][k]);

			if (!n)
				continue;
			fprintf(fp, "ktune_http_requests_total{route=\"%s\",code=\"",
				i == 0 ? "unknown" : s->routes[i - 1].path);
			if (srv_codes[k] > 0)
				fprintf(fp, "%d\"} %ld\n", srv_codes[k], n);
			else
				fprintf(fp, "other\"} %ld\n", n);
		}
	fprintf(fp, "# HELP ktune_http_in_flight Requests being handled.\n"
		    "# TYPE ktune_http_in_flight gauge\nktune_http_in_flight %ld\n",
		atomic_load(&s->in_flight));
	fprintf(fp, "# HELP ktune_http_connections_reaped_total Connections shut down for not sending "
		    "their request within %.0f s.\n# TYPE ktune_http_connections_reaped_total counter\n"
		    "ktune_http_connections_reaped_total %ld\n", s->request_s, atomic_load(&s->reaped));
	fprintf(fp, "# HELP ktune_export_builds_total Exports built for GET /v1/export (the others "
		    "came from the cache).\n# TYPE ktune_export_builds_total counter\n"
		    "ktune_export_builds_total %ld\n", atomic_load(&s->export_builds));
	fprintf(fp, "# HELP ktune_devices Devices in the database.\n# TYPE ktune_devices gauge\n"
		    "ktune_devices %ld\n", qc.devices);
	fprintf(fp, "# HELP ktune_winners Tuned (device, problem) pairs.\n# TYPE ktune_winners gauge\n"
		    "ktune_winners %d\n", t->table.nentries);
	fprintf(fp, "# HELP ktune_problems Problems in the database.\n# TYPE ktune_problems gauge\n"
		    "ktune_problems %ld\n", qc.problems);
	fprintf(fp, "# HELP ktune_sweeps Sweeps in the database.\n# TYPE ktune_sweeps gauge\n"
		    "ktune_sweeps %ld\n", qc.sweeps);
	fprintf(fp, "# HELP ktune_trials Trials in the database, by outcome.\n# TYPE ktune_trials gauge\n"
		    "ktune_trials{status=\"ok\"} %ld\nktune_trials{status=\"other\"} %ld\n",
		qc.trials_ok, qc.trials - qc.trials_ok);
	fprintf(fp, "# HELP ktune_jobs Sweep jobs started over HTTP, by state.\n# TYPE ktune_jobs gauge\n");
	for (i = 0; i < 4; i++)
		fprintf(fp, "ktune_jobs{state=\"%s\"} %ld\n", job_state_name((enum job_state)i), jc[i]);
	if (fclose(fp) != 0 || !buf) {
		free(buf);
		return kt_err_set(err, KT_EINTERNAL, "metrics: out of memory");
	}
	out->text = buf;
	out->len = len;
	out->ctype = "text/plain; version=0.0.4; charset=utf-8";
	out->status = 200;
	return 0;
}

/* ---- documents and the dashboard ---- */

static int r_openapi(struct request *rq, struct reply *out, struct kt_err *err)
{
	return reply_text(out, "application/json", openapi_json, sizeof(openapi_json) - 1, err);
}

static int r_index(struct request *rq, struct reply *out, struct kt_err *err)
{
	return reply_text(out, "text/html; charset=utf-8", index_html, sizeof(index_html) - 1, err);
}

/* Chart.js comes from Debian's libjs-chart.js, read at run time so a
 * security update of the package needs no rebuild of ktune. */
static int r_chartjs(struct request *rq, struct reply *out, struct kt_err *err)
{
	FILE *fp = fopen(rq->srv->chartjs_path, "rb");
	char *buf = NULL;
	long n;

	if (!fp)
		return kt_err_set(err, KT_ENOTFOUND,
				  "Chart.js not found at %s: install Debian's libjs-chart.js "
				  "(apt-get install libjs-chart.js)", rq->srv->chartjs_path);
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		fclose(fp);
		return kt_err_set(err, KT_EIO, "cannot read %s", rq->srv->chartjs_path);
	}
	fclose(fp);
	out->text = buf;
	out->len = (size_t)n;
	out->ctype = "application/javascript; charset=utf-8";
	out->status = 200;
	return 0;
}

#define G SRV_METHOD_GET
#define P SRV_METHOD_POST

const struct route srv_routes[] = {
	{ "/", G, 0, 0, "GET, HEAD", r_index, 0, "" },
	{ "/index.html", G, 0, 0, "GET, HEAD", r_index, 0, "" },
	{ "/static/chart.js", G, 0, 0, "GET, HEAD", r_chartjs, 0, "" },
	{ "/metrics", G, 0, 0, "GET, HEAD", r_metrics, 0, "" },
	{ "/v1/openapi.json", G, 0, 0, "GET, HEAD", r_openapi, 0, "" },
	{ "/v1/health", G, 0, 0, "GET, HEAD", r_health, 0, "" },
	{ "/v1/devices", G, 0, 0, "GET, HEAD", r_devices, 0, "" },
	{ "/v1/families", G, 0, 0, "GET, HEAD", r_families, 0, "" },
	{ "/v1/families/", G, 0, 0, "GET, HEAD", r_family, 0, "" },
	{ "/v1/best", G, 0, 0, "GET, HEAD", r_best, 0, NULL },
	{ "/v1/best:batch", P, 0, 0, "POST", r_best_batch, 0, "" },
	{ "/v1/winners", G, 0, 0, "GET, HEAD", r_winners, 0, "device family" },
	{ "/v1/sweeps", G | P, P, 0, "GET, HEAD, POST", r_sweeps, 0, "limit" },
	{ "/v1/sweeps/", G, 0, 0, "GET, HEAD", r_sweep, 0, "limit" },
	{ "/v1/export", G, 0, 0, "GET, HEAD", r_export, 0, "format device family" },
	{ "/v1/import", P, P, SRV_IMPORT_CAP, "POST", r_import, 1, "" },
};
const int srv_nroutes = (int)(sizeof(srv_routes) / sizeof(srv_routes[0]));

int server_start(const struct serve_opts *o, struct server **out, struct kt_err *err)
{
	return srv_http_start(o, srv_routes, srv_nroutes, out, err);
}

int serve_main(const struct serve_opts *o, struct kt_err *err)
{
	return srv_http_main(o, srv_routes, srv_nroutes, err);
}
