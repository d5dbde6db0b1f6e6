/*
 * test_server.c -- best-config lookup with fallback, and the HTTP API
 * against the real server on 127.0.0.1 (port 0): every route, every error
 * class, the token, the job runner (no_gpu here), readers during a write.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db/store.h"
#include "kernels/family.h"
#include "server/export.h"
#include "server/import.h"
#include "server/lookup.h"
#include "server/query.h"
#include "server/server.h"
#include "server/server_int.h"
#include "tests/server/fixture.h"
#include "tests/server/http_client.h"
#include "tests/testutil.h"

/* The string value, or "" when absent. */
static const char *jstr_or_empty(json_t *v)
{
	const char *s = json_string_value(v);

	return s ? s : "";
}

/* ---- a store with several GPUs of one model (fixture.h's fx_sib_devs) ---- */

static const struct fx_sib_entry sib_entries[] = {
	{ FX_SIB_A, "dense", "tokens=2048,in=4096,out=4096", 100 },	/* 0 */
	{ FX_SIB_A, "dense", "tokens=256,in=4096,out=4096", 50 },	/* 1 */
	{ FX_SIB_B, "dense", "tokens=1024,in=4096,out=4096", 60 },	/* 2 */
	{ FX_SIB_B, "dense", "tokens=256,in=4096,out=4096", 20 },	/* 3 */
	{ FX_SIB_B, "dense", "tokens=64,in=4096,out=4096", 40 },	/* 4 */
	{ FX_SIB_B, "dense", "tokens=4096,in=4096,out=4096", 80 },	/* 5 */
	{ FX_SIB_C, "dense", "tokens=64,in=4096,out=4096", 30 },	/* 6 */
	{ FX_SIB_H100, "dense", "tokens=1024,in=4096,out=4096", 30 },	/* 7 */
	{ FX_SIB_H100, "dense", "tokens=8192,in=4096,out=4096", 200 },	/* 8 */
	{ FX_SIB_X80, "dense", "tokens=64,in=4096,out=4096", 5 },	/* 9 */
	{ FX_SIB_H100, "lowrank", "tokens=1024,in=4096,out=4096,rank=256", 40 },	/* 10 */
	{ FX_SIB_B, "lowrank", "tokens=512,in=4096,out=4096,rank=1024", 40 },	/* 11 */
};
#define SIB_NENTRIES 12

/* Shapes asked below but tuned nowhere: configs must be valid there too. */
static const char *const sib_asked[][2] = {
	{ "dense", "tokens=8192,in=4096,out=4096" },
	{ "lowrank", "tokens=1024,in=4096,out=4096,rank=1024" },
};
#define SIB_NASKED 2

static char sib_key[SIB_NENTRIES][512];

static void sib_asked_at(int i, const char **family, const char **shape)
{
	*family = sib_asked[i][0];
	*shape = sib_asked[i][1];
}

static const struct fx_sib_set sib_set = {
	sib_entries, SIB_NENTRIES, SIB_NASKED, sib_asked_at, sib_key,
};

static struct fx_result fx;
static char db_path[512];
static char sib_path[512];
static struct server *srv;
static int port;
static char auth[160];

static int suite_init(void)
{
	struct serve_opts o;
	struct kt_err err = { 0 };

	snprintf(db_path, sizeof(db_path), "%s", kt_test_path("server.db"));
	if (fx_build(db_path, &fx) < 0)
		return 1;
	snprintf(sib_path, sizeof(sib_path), "%s", kt_test_path("siblings.db"));
	if (fx_sib_build(sib_path, &sib_set, FX_SIB_NDEVS) < 0)
		return 1;
	memset(&o, 0, sizeof(o));
	o.db_path = db_path;
	o.listen = "127.0.0.1:0";
	o.threads = 2;
	o.exe = kt_test_ktune();
	o.quiet = 1;
	if (server_start(&o, &srv, &err) < 0) {
		fprintf(stderr, "server_start: %s\n", err.msg);
		return 1;
	}
	port = server_port(srv);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", server_token(srv));
	return 0;
}

static int suite_clean(void)
{
	server_stop(srv);
	srv = NULL;
	return 0;
}

/* ---- lookup, directly on the store ---- */

struct lk {
	struct store *st;
	struct lookup_table t;
};

static int lk_open_at(struct lk *l, const char *path)
{
	struct kt_err err = { 0 };

	lookup_table_init(&l->t);
	if (store_open(path, STORE_RO, &l->st, &err) < 0 ||
	    lookup_table_load(&l->t, l->st, &err) < 0) {
		fprintf(stderr, "lk_open: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int lk_open(struct lk *l)
{
	return lk_open_at(l, db_path);
}

static void lk_close(struct lk *l)
{
	lookup_table_release(&l->t);
	store_close(l->st);
}

static int ask(struct lk *l, const char *dev, const char *arch, const char *family,
	       const char *shape, struct lookup_query *q, struct lookup_answer *a,
	       struct kt_err *err)
{
	memset(q, 0, sizeof(*q));
	q->device = dev;
	q->arch = arch;
	q->fam = kt_family_find(family);
	if (!q->fam || kt_shape_parse(q->fam, shape, &q->shape, err) < 0)
		return -1;
	return lookup_best(&l->t, q, a, err);
}

static void test_lookup_exact(void)
{
	struct lk l;
	int i;

	CU_ASSERT_FATAL(lk_open(&l) == 0);
	CU_ASSERT_EQUAL(l.t.nentries, FX_NPROBLEMS);
	CU_ASSERT_EQUAL(l.t.ndevices, FX_NDEVS);
	for (i = 0; i < FX_NPROBLEMS; i++) {
		struct lookup_query q;
		struct lookup_answer a;
		struct kt_err err = { 0 };
		char key[512];

		CU_ASSERT_EQUAL_FATAL(ask(&l, fx_devs[fx_problems[i].dev].uuid, NULL,
					  fx_problems[i].family, fx_problems[i].shape, &q, &a, &err), 0);
		CU_ASSERT_EQUAL(a.match, LOOKUP_EXACT);
		CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
		kt_config_key(q.fam, &a.cfg, key, sizeof(key));
		/* the faster ok trial, never the faster `wrong` one */
		CU_ASSERT_STRING_EQUAL(key, fx.winner_key[i]);
		CU_ASSERT_DOUBLE_EQUAL(a.src->w.median_us, fx.winner_us[i], 1e-9);
		CU_ASSERT_DOUBLE_EQUAL(a.src->w.cublas_us, fx.winner_us[i] * 1.2, 1e-6);
		CU_ASSERT_DOUBLE_EQUAL(a.src->w.naive_us, fx.winner_us[i] * 4, 1e-6);
		CU_ASSERT_EQUAL(a.src->w.sweep_id, fx.sweep_id[i]);
		/* the fixture's H200 is a measured device; its "NVIDIA H100"
		 * is not, so its floor is unknown, not the H200's */
		CU_ASSERT(fx_problems[i].dev == 0 ? a.floor_us > 0 : a.floor_us == 0);
		CU_ASSERT_DOUBLE_EQUAL(a.distance, 0, 0);
	}
	lk_close(&l);
}

/* Property: the answer is valid for the shape, and every tuned shape of the
 * device that is closer is either of other structural dims or invalid. */
static void check_nearest(struct lk *l, const char *family, const char *shape,
			  const char *want_tuned, int want_skip)
{
	struct lookup_query q;
	struct lookup_answer a;
	struct kt_err err = { 0 };
	char why[160];
	int i, skipped = 0;

	CU_ASSERT_EQUAL_FATAL(ask(l, "GPU-fx-h200", NULL, family, shape, &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_NEAREST);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
	CU_ASSERT_STRING_EQUAL(a.src->w.shape_key, want_tuned);
	CU_ASSERT_EQUAL(q.fam->check(q.fam, &q.shape, &a.cfg, &a.target, why, sizeof(why)), 0);
	CU_ASSERT(a.distance > 0);
	CU_ASSERT(lookup_within(a.distance, LOOKUP_MAX_DISTANCE));
	CU_ASSERT_DOUBLE_EQUAL(a.distance, lookup_distance(q.fam, &a.src->shape, &q.shape), 1e-12);
	for (i = 0; i < l->t.nentries; i++) {
		const struct lookup_entry *e = &l->t.entries[i];
		double d;

		if (e->fam != q.fam || strcmp(l->t.devices[e->device].uuid, "GPU-fx-h200") != 0)
			continue;
		d = lookup_distance(q.fam, &e->shape, &q.shape);
		if (d < 0 || d >= a.distance)
			continue;
		CU_ASSERT_NOT_EQUAL(q.fam->check(q.fam, &q.shape, &e->cfg, &a.target, why,
						 sizeof(why)), 0);
		skipped++;
	}
	CU_ASSERT_EQUAL(skipped, want_skip);
}

static void test_lookup_nearest(void)
{
	struct lk l;

	CU_ASSERT_FATAL(lk_open(&l) == 0);
	/* 2048 tokens: 1024 is closest (log-distance ln 2). */
	check_nearest(&l, "dense", "tokens=2048,in=4096,out=4096", "tokens=1024,in=4096,out=4096", 0);
	/* 120 tokens: 160 is closest but tuned with BLOCK_M=256, over twice
	 * 120 -- invalid; the next closest (16) answers. */
	check_nearest(&l, "dense", "tokens=120,in=4096,out=4096", "tokens=16,in=4096,out=4096", 1);
	/* rank is structural: rank=256 never answers for rank=1024. */
	check_nearest(&l, "lowrank", "tokens=4096,in=4096,out=4096,rank=1024",
		      "tokens=1024,in=4096,out=4096,rank=1024", 0);
	lk_close(&l);
}

/* A query whose limit is set: max (INFINITY: none). */
static int ask_within(struct lk *l, const char *shape, double max, struct lookup_query *q,
		      struct lookup_answer *a)
{
	struct kt_err err = { 0 };

	memset(q, 0, sizeof(*q));
	q->device = "GPU-fx-h200";
	q->fam = kt_family_find("dense");
	q->max_distance_set = 1;
	q->max_distance = max;
	if (kt_shape_parse(q->fam, shape, &q->shape, &err) < 0)
		return -1;
	return lookup_best(&l->t, q, a, &err);
}

static void test_lookup_distance_limit(void)
{
	struct lookup_query q;
	struct lookup_answer a;
	struct kt_err err = { 0 };
	struct kt_config def;
	char key[512], dk[512];
	double far = sqrt(log(16.0) * log(16.0) + log(11008.0 / 4096) * log(11008.0 / 4096));
	struct lk l;

	CU_ASSERT_FATAL(lk_open(&l) == 0);
	/* 65536 tokens: the closest tuned shape, 4096 x 11008, is ln 16 in
	 * tokens and ln 2.69 in out away (2.94), past ln 8: the default
	 * answers, naming what it passed over; the H100's 2048^3 (arch) is
	 * further still. */
	CU_ASSERT_EQUAL_FATAL(ask(&l, "GPU-fx-h200", NULL, "dense", "tokens=65536,in=4096,out=4096",
				  &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_DEFAULT);
	CU_ASSERT_PTR_NULL(a.src);
	CU_ASSERT_DOUBLE_EQUAL(a.max_distance, LOOKUP_MAX_DISTANCE, 0);
	CU_ASSERT_DOUBLE_EQUAL(LOOKUP_MAX_DISTANCE, log(8.0), 1e-15);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.skipped);
	CU_ASSERT_STRING_EQUAL(a.skipped->w.shape_key, "tokens=4096,in=4096,out=11008");
	CU_ASSERT_DOUBLE_EQUAL(a.skipped_distance, far, 1e-12);
	CU_ASSERT_EQUAL_FATAL(q.fam->default_config(q.fam, &q.shape, &a.target, &def), 0);
	kt_config_key(q.fam, &a.cfg, key, sizeof(key));
	kt_config_key(q.fam, &def, dk, sizeof(dk));
	CU_ASSERT_STRING_EQUAL(key, dk);
	/* No limit: that shape answers; a limit just above its distance, too,
	 * and just below, not. */
	CU_ASSERT_EQUAL_FATAL(ask_within(&l, "tokens=65536,in=4096,out=4096", INFINITY, &q, &a), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_NEAREST);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
	CU_ASSERT_STRING_EQUAL(a.src->w.shape_key, "tokens=4096,in=4096,out=11008");
	CU_ASSERT_PTR_NULL(a.skipped);
	CU_ASSERT_EQUAL_FATAL(ask_within(&l, "tokens=65536,in=4096,out=4096", far + 1e-9, &q, &a), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_NEAREST);
	CU_ASSERT_EQUAL_FATAL(ask_within(&l, "tokens=65536,in=4096,out=4096", far - 1e-6, &q, &a), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_DEFAULT);
	/* A ratio of exactly 8 is within (2 -> 16 tokens). */
	CU_ASSERT_EQUAL_FATAL(ask(&l, "GPU-fx-h200", NULL, "dense", "tokens=2,in=4096,out=4096",
				  &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_NEAREST);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
	CU_ASSERT_STRING_EQUAL(a.src->w.shape_key, "tokens=16,in=4096,out=4096");
	/* 0: exact or default only; an exact shape still answers. */
	CU_ASSERT_EQUAL_FATAL(ask_within(&l, "tokens=2048,in=4096,out=4096", 0, &q, &a), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_DEFAULT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.skipped);
	CU_ASSERT_STRING_EQUAL(a.skipped->w.shape_key, "tokens=1024,in=4096,out=4096");
	CU_ASSERT_EQUAL_FATAL(ask_within(&l, "tokens=1024,in=4096,out=4096", 0, &q, &a), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_EXACT);
	/* The limit's spellings */
	{
		double v;

		CU_ASSERT_EQUAL(lookup_max_distance_parse("1.5", &v, &err), 0);
		CU_ASSERT_DOUBLE_EQUAL(v, 1.5, 0);
		CU_ASSERT_EQUAL(lookup_max_distance_parse("inf", &v, &err), 0);
		CU_ASSERT(isinf(v));
		CU_ASSERT_EQUAL(lookup_max_distance_parse("NONE", &v, &err), 0);
		CU_ASSERT(isinf(v));
		CU_ASSERT_EQUAL(lookup_max_distance_parse("0", &v, &err), 0);
		CU_ASSERT_DOUBLE_EQUAL(v, 0, 0);
		CU_ASSERT_EQUAL(lookup_max_distance_parse("-1", &v, &err), -1);
		CU_ASSERT_EQUAL(err.code, KT_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max_distance '-1'"));
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(lookup_max_distance_parse("2x", &v, &err), -1);
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(lookup_max_distance_parse("nan", &v, &err), -1);
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(lookup_max_distance_parse("", &v, &err), -1);
		kt_err_clear(&err);
	}
	lk_close(&l);
}

static void test_lookup_arch_default(void)
{
	struct lookup_query q;
	struct lookup_answer a;
	struct kt_err err = { 0 };
	struct kt_config def;
	struct lk l;

	CU_ASSERT_FATAL(lk_open(&l) == 0);
	/* H100 has only 2048^3 dense: lowrank comes from the H200 (same arch). */
	CU_ASSERT_EQUAL(ask(&l, "GPU-fx-h100", NULL, "lowrank", "tokens=1024,in=4096,out=4096,rank=256",
			    &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_ARCH);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
	CU_ASSERT_STRING_EQUAL(a.src->w.device_uuid, "GPU-fx-h200");
	CU_ASSERT_DOUBLE_EQUAL(a.distance, 0, 0);
	/* By name, case-insensitively, too. */
	CU_ASSERT_EQUAL(ask(&l, "nvidia h100", NULL, "dense", "tokens=2048,in=2048,out=2048",
			    &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_EXACT);
	/* The A100 (sm_80) never borrows sm_90 results: default. */
	CU_ASSERT_EQUAL(ask(&l, "GPU-fx-a100", NULL, "dense", "tokens=1024,in=4096,out=4096",
			    &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_DEFAULT);
	CU_ASSERT_PTR_NULL(a.src);
	CU_ASSERT_STRING_EQUAL(a.arch, "sm_80");
	CU_ASSERT_EQUAL_FATAL(q.fam->default_config(q.fam, &q.shape, &a.target, &def), 0);
	CU_ASSERT_EQUAL(memcmp(&def, &a.cfg, sizeof(def)), 0);
	/* Unknown device: an error, unless an arch is given to fall back to. */
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(ask(&l, "GPU-nope", NULL, "dense", "tokens=1024,in=4096,out=4096", &q, &a, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_ENOTFOUND);
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(ask(&l, "GPU-nope", "sm_90", "dense", "tokens=1024,in=4096,out=4096",
			    &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, LOOKUP_ARCH);
	/* Three devices and none named: ambiguous. */
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(ask(&l, NULL, NULL, "dense", "tokens=1024,in=4096,out=4096", &q, &a, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	lk_close(&l);
}

static void test_lookup_reload(void)
{
	struct lk l;
	struct kt_err err = { 0 };
	int64_t v0;

	CU_ASSERT_FATAL(lk_open(&l) == 0);
	v0 = l.t.data_version;
	/* No change: the table stays as it is (same version). */
	CU_ASSERT_EQUAL(lookup_table_load(&l.t, l.st, &err), 0);
	CU_ASSERT_EQUAL(l.t.data_version, v0);
	lk_close(&l);
}

/* ---- the incremental reload: after each change, the table equals a full
 * reload of the same database, and only a device change reloads in full ---- */

/* inc equals a table loaded in full from st, entry by entry and in order. */
static void inc_same(struct lookup_table *inc, struct store *st, const char *when)
{
	struct lookup_table f;
	struct kt_err err = { 0 };
	int i, bad = 0;

	lookup_table_init(&f);
	CU_ASSERT_EQUAL_FATAL(lookup_table_reload(&f, st, &err), 0);
	CU_ASSERT_EQUAL(inc->nentries, f.nentries);
	CU_ASSERT_EQUAL(inc->ndevices, f.ndevices);
	for (i = 0; i < inc->nentries && i < f.nentries; i++) {
		const struct lookup_entry *a = &inc->entries[i], *b = &f.entries[i];

		if (a->w.device_id != b->w.device_id || a->w.problem_id != b->w.problem_id ||
		    a->w.sweep_id != b->w.sweep_id || strcmp(a->w.config_key, b->w.config_key) ||
		    strcmp(a->w.shape_key, b->w.shape_key) || a->w.median_us != b->w.median_us ||
		    a->w.min_us != b->w.min_us || a->w.retime_us != b->w.retime_us ||
		    a->w.cublas_us != b->w.cublas_us || a->w.naive_us != b->w.naive_us ||
		    strcmp(a->w.provenance_json, b->w.provenance_json) || a->device != b->device ||
		    a->fam != b->fam || memcmp(&a->cfg, &b->cfg, sizeof(a->cfg)) ||
		    memcmp(&a->shape, &b->shape, sizeof(a->shape)))
			bad++;
	}
	if (bad || inc->nentries != f.nentries)
		fprintf(stderr, "\n  %s: %d entries differ (%d against %d)\n", when, bad,
			inc->nentries, f.nentries);
	CU_ASSERT_EQUAL(bad, 0);
	lookup_table_release(&f);
}

/* Interns config c of f and adds a trial of it to sweep. */
static int inc_trial(struct store *w, int64_t sweep, const struct kt_family *f,
		     const struct kt_config *c, const char *status, double us, double min_us)
{
	struct store_trial tr;
	struct kt_err err = { 0 };
	char key[512];
	int64_t cfg;

	if (fx_config_intern(w, f, c, key, sizeof(key), &cfg, &err) < 0)
		return -1;
	memset(&tr, 0, sizeof(tr));
	tr.sweep_id = sweep;
	tr.config_id = cfg;
	tr.status = status;
	tr.median_us = us;
	tr.min_us = min_us;
	tr.p90_us = us * 1.02;
	tr.reps = 50;
	tr.rel_err = strcmp(status, "ok") ? 0.5 : 0.001;
	return store_trial_add(w, &tr, &err);
}

static int64_t inc_sweep(struct store *w, int64_t dev, int64_t prob, const char *opts)
{
	struct store_sweep_spec spec;
	struct kt_err err = { 0 };
	int64_t id = 0;
	int resumed;

	memset(&spec, 0, sizeof(spec));
	spec.device_id = dev;
	spec.problem_id = prob;
	spec.strategy = "random";
	spec.options_key = opts;
	spec.provenance_json = "{\"ktune_version\":\"incremental\"}";
	spec.planned = 4;
	return store_sweep_begin(w, &spec, &id, &resumed, &err) < 0 ? -1 : id;
}

/* Reloads inc after a change; checks it against a full load and that it
 * read pairs, not everything, unless full says it must. */
static void inc_step(struct lookup_table *inc, struct store *r, const char *when, int full)
{
	struct kt_err err = { 0 };
	long fl = inc->full_loads, pl = inc->pair_loads;

	CU_ASSERT_EQUAL_FATAL(lookup_table_load(inc, r, &err), 0);
	inc_same(inc, r, when);
	if (full >= 0)
		CU_ASSERT_EQUAL(inc->full_loads, fl + full);
	if (full == 0 && inc->pair_loads == pl)
		fprintf(stderr, "\n  %s: no pair read again\n", when);
	if (full == 0)
		CU_ASSERT(inc->pair_loads > pl);
}

static void test_lookup_incremental(void)
{
	const struct kt_family *dense = kt_family_find("dense");
	char path[512];
	struct fx_result res;
	struct store *w = NULL, *r = NULL;
	struct lookup_table inc;
	struct kt_err err = { 0 };
	struct kt_shape s;
	struct kt_target t;
	struct fx_pick pk;
	const struct lookup_entry *e;
	int64_t dev, prob, prob2, sw, sw2;
	long pl;
	int i;
	char *js;

	snprintf(path, sizeof(path), "%s", kt_test_path("incremental.db"));
	CU_ASSERT_FATAL(fx_build(path, &res) == 0);
	CU_ASSERT_FATAL(store_open(path, STORE_RW, &w, &err) == 0);
	CU_ASSERT_FATAL(store_open(path, STORE_RO, &r, &err) == 0);
	lookup_table_init(&inc);
	CU_ASSERT_EQUAL_FATAL(lookup_table_load(&inc, r, &err), 0);
	CU_ASSERT_EQUAL(inc.full_loads, 1);
	CU_ASSERT_EQUAL_FATAL(inc.nentries, FX_NPROBLEMS);

	/* fixture problem 0 (dense 1024^3 on the H200): three valid configs */
	CU_ASSERT_FATAL(kt_shape_parse(dense, fx_problems[0].shape, &s, &err) == 0);
	CU_ASSERT_FATAL(fx_dev_target(&fx_devs[0], &t, &err) == 0);
	memset(&pk, 0, sizeof(pk));
	pk.f = dense;
	pk.s = &s;
	pk.t = &t;
	kt_space_foreach(dense, 0, fx_pick_fn, &pk);
	CU_ASSERT_FATAL(pk.n == 3);
	for (i = 0, e = NULL; i < inc.nentries; i++)
		if (!strcmp(inc.entries[i].w.shape_key, fx_problems[0].shape) &&
		    !strcmp(inc.entries[i].w.device_uuid, fx_devs[0].uuid))
			e = &inc.entries[i];
	CU_ASSERT_PTR_NOT_NULL_FATAL(e);
	dev = e->w.device_id;
	prob = e->w.problem_id;

	/* a new sweep of the problem, and in it a faster ok trial: it wins */
	CU_ASSERT_FATAL((sw = inc_sweep(w, dev, prob, "inc")) > 0);
	inc_step(&inc, r, "new sweep", 0);
	CU_ASSERT_FATAL(inc_trial(w, sw, dense, &pk.c[1], "ok", res.winner_us[0] / 2,
				  res.winner_us[0] / 2) == 0);
	inc_step(&inc, r, "faster ok trial", 0);
	/* slower ok, faster wrong: no change of winner, still right */
	CU_ASSERT_FATAL(inc_trial(w, sw, dense, &pk.c[2], "wrong", res.winner_us[0] / 8, 1) == 0);
	inc_step(&inc, r, "faster wrong trial", 0);
	/* a tie on the median broken by the lower min (config 0, a second sweep) */
	CU_ASSERT_FATAL((sw2 = inc_sweep(w, dev, prob, "inc-tie")) > 0);
	CU_ASSERT_FATAL(inc_trial(w, sw2, dense, &pk.c[0], "ok", res.winner_us[0] / 2,
				  res.winner_us[0] / 4) == 0);
	inc_step(&inc, r, "tie on the median", 0);
	/* a newer cuBLAS baseline, then the retime and the end of the sweep */
	CU_ASSERT_FATAL(store_baseline_add(w, dev, prob, sw, "cublas_dense", 1.5, &err) == 0);
	inc_step(&inc, r, "new baseline", 0);
	{
		char key[512];

		kt_config_key(dense, &pk.c[0], key, sizeof(key));
		CU_ASSERT_FATAL(store_retime_set(w, sw2, key, 7.5, &err) == 0);
		CU_ASSERT_FATAL(store_sweep_end(w, sw2, STORE_SWEEP_DONE, &err) == 0);
	}
	inc_step(&inc, r, "retime and sweep end", 0);
	/* the first sweep ended, then resumed */
	CU_ASSERT_FATAL(store_sweep_end(w, sw, STORE_SWEEP_INTERRUPTED, &err) == 0);
	inc_step(&inc, r, "sweep interrupted", 0);
	CU_ASSERT_FATAL(inc_sweep(w, dev, prob, "inc") == sw);
	inc_step(&inc, r, "sweep resumed", 0);
	/* a problem tuned for the first time: a new entry in its place */
	CU_ASSERT_FATAL(kt_shape_parse(dense, "tokens=2000,in=4096,out=4096", &s, &err) == 0);
	js = fx_dump(famjson_shape(dense, &s));
	CU_ASSERT_FATAL(store_problem_intern(w, "dense", "tokens=2000,in=4096,out=4096", js, &prob2,
					     &err) == 0);
	free(js);
	CU_ASSERT_FATAL((sw = inc_sweep(w, dev, prob2, "inc")) > 0);
	CU_ASSERT_FATAL(inc_trial(w, sw, dense, &pk.c[0], "ok", 80, 79) == 0);
	inc_step(&inc, r, "new problem", 0);
	CU_ASSERT_EQUAL(inc.nentries, FX_NPROBLEMS + 1);
	/* nothing a winner depends on (a compiled binary): nothing read again */
	pl = inc.pair_loads;
	CU_ASSERT_FATAL(store_binary_put(w, "00112233445566778899aabbccddeeff", "sm_90a", "13.0",
					 "cubin", 5, NULL, 1, &err) == 0);
	inc_step(&inc, r, "binary cached", -1);
	CU_ASSERT_EQUAL(inc.pair_loads, pl);
	CU_ASSERT_EQUAL(inc.full_loads, 1);
	/* an import-sized change (more than 256 pairs): in full */
	CU_ASSERT_FATAL(store_tx_begin(w, &err) == 0);
	for (i = 0; i < 300; i++) {
		char key[64];
		int64_t pi, si;

		snprintf(key, sizeof(key), "tokens=%d,in=4096,out=4096", 3000 + i);
		CU_ASSERT_FATAL(kt_shape_parse(dense, key, &s, &err) == 0);
		js = fx_dump(famjson_shape(dense, &s));
		CU_ASSERT_FATAL(store_problem_intern(w, "dense", key, js, &pi, &err) == 0);
		free(js);
		CU_ASSERT_FATAL((si = inc_sweep(w, dev, pi, "inc")) > 0);
		CU_ASSERT_FATAL(inc_trial(w, si, dense, &pk.c[i % 3], "ok", 90 + i, 89 + i) == 0);
	}
	CU_ASSERT_FATAL(store_tx_commit(w, &err) == 0);
	inc_step(&inc, r, "300 new problems", 1);
	CU_ASSERT_EQUAL(inc.nentries, FX_NPROBLEMS + 301);
	/* a new device: in full */
	{
		static const struct fx_dev nd = { "NVIDIA L40S", "GPU-fx-l40s", "sm_89", 142, 100663296,
						  101376 };
		int64_t id;

		CU_ASSERT_FATAL(fx_devices_upsert(w, &nd, 1, &fx_dev_base, &id, &err) == 0);
	}
	inc_step(&inc, r, "new device", 1);
	lookup_table_release(&inc);
	store_close(r);
	store_close(w);
}

/* The answer comes from entry want (of sib_entries) and names the asked
 * device want_dev; want < 0: the family default. */
static void sib_expect(struct lk *l, const char *dev, const char *family, const char *shape,
		       enum lookup_match match, int want, const char *want_dev)
{
	struct lookup_query q;
	struct lookup_answer a;
	struct kt_err err = { 0 };
	char key[512];

	CU_ASSERT_EQUAL_FATAL(ask(l, dev, NULL, family, shape, &q, &a, &err), 0);
	CU_ASSERT_EQUAL(a.match, match);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.device);
	CU_ASSERT_STRING_EQUAL(a.device->uuid, want_dev);
	if (want < 0) {
		CU_ASSERT_PTR_NULL(a.src);
		return;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(a.src);
	kt_config_key(q.fam, &a.cfg, key, sizeof(key));
	if (a.match != match ||
	    strcmp(a.src->w.device_uuid, fx_sib_devs[sib_entries[want].dev].uuid) != 0 ||
	    strcmp(a.src->w.shape_key, sib_entries[want].shape) != 0)
		fprintf(stderr, "%s %s on %s: %s from %s %s, want %s from %s %s\n", family, shape, dev,
			lookup_match_name(a.match), a.src->w.device_uuid, a.src->w.shape_key,
			lookup_match_name(match), fx_sib_devs[sib_entries[want].dev].uuid,
			sib_entries[want].shape);
	CU_ASSERT_STRING_EQUAL(a.src->w.device_uuid, fx_sib_devs[sib_entries[want].dev].uuid);
	CU_ASSERT_STRING_EQUAL(a.src->w.shape_key, sib_entries[want].shape);
	CU_ASSERT_STRING_EQUAL(key, sib_key[want]);
	CU_ASSERT_DOUBLE_EQUAL(a.src->w.median_us, sib_entries[want].us, 1e-9);
	if (match == LOOKUP_EXACT)
		CU_ASSERT_DOUBLE_EQUAL(a.distance, 0, 0);
}

static void test_lookup_same_model(void)
{
	struct lk l;

	CU_ASSERT_FATAL(lk_open_at(&l, sib_path) == 0);
	CU_ASSERT_EQUAL_FATAL(l.t.nentries, SIB_NENTRIES);
	/* The name resolves to A, which has only 2048 tokens near 1024: B's
	 * exact 1024 answers, not A's neighbour (and not the faster exact of
	 * the H100, another model). By uuid the same. */
	sib_expect(&l, "NVIDIA H200", "dense", "tokens=1024,in=4096,out=4096", LOOKUP_EXACT, 2,
		   "GPU-sib-a");
	sib_expect(&l, "GPU-sib-a", "dense", "tokens=1024,in=4096,out=4096", LOOKUP_EXACT, 2,
		   "GPU-sib-a");
	/* A's own exact beats B's faster one; C, which has none, gets the
	 * fastest of its siblings'. */
	sib_expect(&l, "NVIDIA H200", "dense", "tokens=256,in=4096,out=4096", LOOKUP_EXACT, 1,
		   "GPU-sib-a");
	sib_expect(&l, "GPU-sib-c", "dense", "tokens=256,in=4096,out=4096", LOOKUP_EXACT, 3,
		   "GPU-sib-c");
	/* Among siblings the fastest (C over B; the name differs in case
	 * only); the sm_80 "NVIDIA H200", faster still, is another model. */
	sib_expect(&l, "NVIDIA H200", "dense", "tokens=64,in=4096,out=4096", LOOKUP_EXACT, 6,
		   "GPU-sib-a");
	/* Nearest stays on the asked device: A's 2048 for 8192, though B (a
	 * sibling) has the closer 4096 and the H100 has 8192 exactly. */
	sib_expect(&l, "NVIDIA H200", "dense", "tokens=8192,in=4096,out=4096", LOOKUP_NEAREST, 0,
		   "GPU-sib-a");
	/* The H100 is no sibling of the H200s: its own nearest shape (1024,
	 * 4x away) answers, not their exact 256. */
	sib_expect(&l, "NVIDIA H100", "dense", "tokens=256,in=4096,out=4096", LOOKUP_NEAREST, 7,
		   "GPU-sib-h100");
	/* Past the distance limit (1024 is 16x from 64) its own shape does
	 * not answer: the arch's exact 64 does, the fastest (C over B). */
	sib_expect(&l, "NVIDIA H100", "dense", "tokens=64,in=4096,out=4096", LOOKUP_ARCH, 6,
		   "GPU-sib-h100");
	/* Nothing of lowrank on A: the H100's exact comes through arch, and
	 * so does a sibling's nearest shape. */
	sib_expect(&l, "NVIDIA H200", "lowrank", "tokens=1024,in=4096,out=4096,rank=256", LOOKUP_ARCH, 10,
		   "GPU-sib-a");
	sib_expect(&l, "NVIDIA H200", "lowrank", "tokens=1024,in=4096,out=4096,rank=1024", LOOKUP_ARCH, 11,
		   "GPU-sib-a");
	/* The sm_80 one borrows nothing from the sm_90 GPUs of its name: not
	 * B's exact lowrank shape. */
	sib_expect(&l, "GPU-sib-x80", "lowrank", "tokens=512,in=4096,out=4096,rank=1024", LOOKUP_DEFAULT,
		   -1, "GPU-sib-x80");
	lk_close(&l);
}

/* ---- HTTP ---- */

static json_t *get_json(const char *path, int want_status)
{
	struct hc_resp r;
	json_t *j;

	if (hc_request(port, "GET", path, NULL, NULL, 0, &r) < 0)
		return NULL;
	CU_ASSERT_EQUAL(r.status, want_status);
	if (r.status != want_status)
		fprintf(stderr, "GET %s: %d %s\n", path, r.status, r.body);
	j = hc_json(&r);
	hc_free(&r);
	return j;
}

static json_t *req_json(const char *method, const char *path, const char *headers,
			const char *body, int want_status)
{
	struct hc_resp r;
	json_t *j;

	if (hc_request(port, method, path, headers, body, body ? strlen(body) : 0, &r) < 0)
		return NULL;
	CU_ASSERT_EQUAL(r.status, want_status);
	if (r.status != want_status)
		fprintf(stderr, "%s %s: %d %s\n", method, path, r.status, r.body);
	j = hc_json(&r);
	hc_free(&r);
	return j;
}

/* An error reply: JSON {"error": {"code", "message", "status"}}. */
static void expect_error(const char *method, const char *path, const char *headers,
			 const char *body, int status, const char *code)
{
	json_t *j = req_json(method, path, headers, body, status), *e;

	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	e = json_object_get(j, "error");
	CU_ASSERT_PTR_NOT_NULL(e);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(e, "code")), code);
	CU_ASSERT(strlen(jstr_or_empty(json_object_get(e, "message"))) > 5);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "status")), status);
	json_decref(j);
}

static void test_http_reads(void)
{
	json_t *j, *f, *v;
	size_t i;
	int found = 0;

	j = get_json("/v1/health", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "status")), "ok");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "winners")), FX_NPROBLEMS);
	json_decref(j);

	j = get_json("/v1/devices", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "devices")), FX_NDEVS);
	json_array_foreach(json_object_get(j, "devices"), i, v)
		if (strcmp(json_string_value(json_object_get(v, "uuid")), "GPU-fx-h200") == 0)
			CU_ASSERT_EQUAL(json_integer_value(json_object_get(v, "winners")), FX_NH200);
	json_decref(j);

	j = get_json("/v1/families", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	json_array_foreach(json_object_get(j, "families"), i, f) {
		const char *name = json_string_value(json_object_get(f, "name"));

		CU_ASSERT_STRING_NOT_EQUAL(name, "selftest");	/* hidden */
		if (strcmp(name, "lowrank") == 0) {
			json_t *shape = json_object_get(f, "shape");

			found = 1;
			CU_ASSERT_EQUAL(json_array_size(shape), 4);
			CU_ASSERT(json_is_true(json_object_get(json_array_get(shape, 3), "structural")));
			CU_ASSERT(json_array_size(json_object_get(f, "params")) > 0);
			CU_ASSERT(json_integer_value(json_object_get(f, "space_size")) > 1);
		}
	}
	CU_ASSERT(found);
	json_decref(j);

	j = get_json("/v1/families/dense", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "name")), "dense");
	json_decref(j);

	j = get_json("/v1/winners?family=lowrank", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "winners")), 2);
	json_decref(j);
}

/* The grid of the first timed launch of family's config at shape, planned
 * for fixture device dev: 0, or -1. */
static int plan_grid(const char *family, const char *shape, const char *config, int dev,
		     unsigned grid[3])
{
	const struct kt_family *f = kt_family_find(family);
	struct kt_target t;
	struct kt_shape s;
	struct kt_config c;
	struct kt_plan p;
	struct kt_err err = { 0 };

	if (!f || kt_shape_parse(f, shape, &s, &err) < 0 || kt_config_parse(f, config, &c, &err) < 0 ||
	    fx_dev_target(&fx_devs[dev], &t, &err) < 0 || f->plan(f, &s, &c, &t, &p, &err) < 0 ||
	    p.nlaunch < 1)
		return -1;
	memcpy(grid, p.launch[0].grid, sizeof(unsigned) * 3);
	return 0;
}

/* An answer's launch.launches[0].grid equals want. */
static void check_launch_grid(json_t *answer, const unsigned want[3])
{
	json_t *g = json_object_get(json_array_get(json_object_get(json_object_get(answer, "launch"),
								   "launches"), 0), "grid");
	int k;

	CU_ASSERT_EQUAL_FATAL(json_array_size(g), 3);
	for (k = 0; k < 3; k++)
		CU_ASSERT_EQUAL(json_integer_value(json_array_get(g, k)), (json_int_t)want[k]);
}

/* A best:batch result: its match, or "error <code>". */
static const char *batch_answer(json_t *results, size_t i)
{
	static char buf[80];
	json_t *a = json_array_get(results, i), *e = json_object_get(a, "error");

	if (!e)
		return jstr_or_empty(json_object_get(a, "match"));
	snprintf(buf, sizeof(buf), "error %s", jstr_or_empty(json_object_get(e, "code")));
	return buf;
}

static void test_http_best(void)
{
	json_t *j, *b, *r;
	char body[1024];

	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "match")), "exact");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "config_key")), fx.winner_key[0]);
	CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "median_us")), fx.winner_us[0], 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(j, "speedup"), "vs_cublas")),
			       1.2, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(j, "speedup"), "vs_naive")),
			       4.0, 1e-9);
	CU_ASSERT(json_real_value(json_object_get(j, "floor_us")) > 0);
	{
		/* a device without measured peaks: the floor is null, not
		 * another card's */
		json_t *h = get_json("/v1/best?family=dense&device=GPU-fx-h100&tokens=2048&in=2048&out=2048",
				     200);

		CU_ASSERT_PTR_NOT_NULL(h);
		CU_ASSERT_TRUE(json_is_null(json_object_get(h, "floor_us")));
		CU_ASSERT_PTR_NULL(json_object_get(h, "of_floor"));
		json_decref(h);
	}
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "provenance"),
			       "template_hash")), "f1x7");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "tuned"), "sweep_id")),
			fx.sweep_id[0]);
	{
		unsigned want[3];

		CU_ASSERT_EQUAL_FATAL(plan_grid("dense", "tokens=1024,in=4096,out=4096", fx.winner_key[0], 0,
						want), 0);
		check_launch_grid(j, want);
		CU_ASSERT(json_array_size(json_object_get(json_object_get(j, "launch"), "programs")) >= 1);
		CU_ASSERT(json_array_size(json_object_get(json_object_get(j, "launch"), "buffers")) >= 3);
	}
	json_decref(j);

	/* The shape as one key, and the nearest answer. */
	j = get_json("/v1/best?family=dense&device=NVIDIA%20H200&shape=tokens%3D120%2Cin%3D4096%2Cout%3D4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "match")), "nearest");
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(j, "tuned"), "shape_key")),
			       "tokens=16,in=4096,out=4096");
	/* its launch is planned for the 120 tokens asked, not the 16 tuned
	 * (whose grid differs: the check could fail) */
	{
		const char *ck = json_string_value(json_object_get(j, "config_key"));
		unsigned asked[3], tuned[3];

		CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
		CU_ASSERT_EQUAL_FATAL(plan_grid("dense", "tokens=120,in=4096,out=4096", ck, 0, asked), 0);
		CU_ASSERT_EQUAL_FATAL(plan_grid("dense", "tokens=16,in=4096,out=4096", ck, 0, tuned), 0);
		CU_ASSERT(memcmp(asked, tuned, sizeof(asked)) != 0);
		check_launch_grid(j, asked);
		CU_ASSERT_PTR_NULL(json_object_get(j, "launch_error"));
	}
	json_decref(j);

	/* a default answer (nothing tuned of the family) comes with its
	 * launch too */
	j = get_json("/v1/best?family=blast&device=GPU-fx-h200&tokens=1024&in=2048&out=2048&blocks=16&rank=256",
		     200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "match")), "default");
	{
		unsigned want[3];

		CU_ASSERT_EQUAL_FATAL(plan_grid("blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256",
						json_string_value(json_object_get(j, "config_key")), 0, want),
				      0);
		check_launch_grid(j, want);
	}
	json_decref(j);

	/* Batch: answers in order, a bad query gets its own error. */
	snprintf(body, sizeof(body),
		 "{\"queries\": [{\"family\": \"dense\", \"device\": \"GPU-fx-h200\","
		 " \"shape\": {\"tokens\": 1024, \"in\": 4096, \"out\": 4096}},"
		 " {\"family\": \"dense\", \"device\": \"GPU-fx-h200\", \"shape\": \"tokens=0,in=1,out=1\"},"
		 " {\"family\": \"nope\", \"shape\": \"x=1\"},"
		 " {\"family\": \"lowrank\", \"device\": \"GPU-fx-h100\","
		 " \"shape\": \"tokens=1024,in=4096,out=4096,rank=256\"}]}");
	b = req_json("POST", "/v1/best:batch", NULL, body, 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	r = json_object_get(b, "results");
	CU_ASSERT_EQUAL_FATAL(json_array_size(r), 4);
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 0), "exact");
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 1), "error invalid_argument");
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 2), "error not_found");
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 3), "arch");
	json_decref(b);

	/* Past the distance limit: the default, naming the shape passed over;
	 * max_distance=inf takes it; the limit is part of the cached question
	 * (the same shape asked again without it is a default again). */
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=65536&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "default");
	CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(j, "max_distance")), LOOKUP_MAX_DISTANCE, 1e-12);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(json_object_get(j, "skipped_nearest"), "shape_key")),
			       "tokens=4096,in=4096,out=11008");
	CU_ASSERT(json_number_value(json_object_get(json_object_get(j, "skipped_nearest"), "distance")) >
		  LOOKUP_MAX_DISTANCE);
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=65536&in=4096&out=4096&max_distance=inf", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "nearest");
	CU_ASSERT(json_is_null(json_object_get(j, "max_distance")));
	CU_ASSERT(json_is_null(json_object_get(j, "skipped_nearest")));
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=65536&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "default");
	json_decref(j);
	/* max_distance=0: exact or default only */
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=2048&in=4096&out=4096&max_distance=0", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "default");
	json_decref(j);
	/* a bad limit is a 400 naming it, never taken as a shape dim */
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=2048&in=4096&out=4096&max_distance=-2", 400);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_PTR_NOT_NULL(strstr(jstr_or_empty(json_object_get(json_object_get(j, "error"), "message")),
				      "max_distance '-2'"));
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=2048&in=4096&out=4096&max_distance=", 400);
	json_decref(j);
	/* in a batch: a number, "inf" and null answer; a negative one or
	 * another type is a 400 for the whole request (the OpenAPI document
	 * refuses it), naming the query */
	snprintf(body, sizeof(body),
		 "{\"queries\": [{\"family\": \"dense\", \"device\": \"GPU-fx-h200\","
		 " \"shape\": \"tokens=65536,in=4096,out=4096\", \"max_distance\": 3},"
		 " {\"family\": \"dense\", \"device\": \"GPU-fx-h200\","
		 " \"shape\": \"tokens=65536,in=4096,out=4096\", \"max_distance\": \"inf\"},"
		 " {\"family\": \"dense\", \"device\": \"GPU-fx-h200\","
		 " \"shape\": \"tokens=65536,in=4096,out=4096\", \"max_distance\": null}]}");
	b = req_json("POST", "/v1/best:batch", NULL, body, 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	r = json_object_get(b, "results");
	CU_ASSERT_EQUAL_FATAL(json_array_size(r), 3);
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 0), "nearest");
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 1), "nearest");
	CU_ASSERT_STRING_EQUAL(batch_answer(r, 2), "default");
	json_decref(b);
	expect_error("POST", "/v1/best:batch", NULL,
		     "{\"queries\": [{\"family\": \"dense\", \"shape\": \"tokens=16,in=64,out=64\"},"
		     " {\"family\": \"dense\", \"shape\": \"tokens=16,in=64,out=64\", \"max_distance\": -1}]}",
		     400, "invalid_argument");
	expect_error("POST", "/v1/best:batch", NULL,
		     "{\"queries\": [{\"family\": \"dense\", \"shape\": \"tokens=16,in=64,out=64\","
		     " \"max_distance\": true}]}", 400, "invalid_argument");
	expect_error("POST", "/v1/best:batch", NULL,
		     "{\"queries\": [{\"family\": \"dense\", \"shape\": \"tokens=16,in=64,out=64\","
		     " \"max_distance\": \"far\"}]}", 400, "invalid_argument");
}

/* GET /v1/best on a store of several GPUs of one model: an exact entry of
 * a sibling says "exact", the asked device as device and the sibling as
 * tuned.device_uuid. */
static void test_http_same_model(void)
{
	struct serve_opts o;
	struct server *sib_srv = NULL;
	struct kt_err err = { 0 };
	struct hc_resp r;
	json_t *j, *tuned;

	memset(&o, 0, sizeof(o));
	o.db_path = sib_path;
	o.listen = "127.0.0.1:0";
	o.threads = 1;
	o.exe = kt_test_ktune();
	o.quiet = 1;
	CU_ASSERT_EQUAL_FATAL(server_start(&o, &sib_srv, &err), 0);

	CU_ASSERT_EQUAL(hc_request(server_port(sib_srv), "GET",
		"/v1/best?family=dense&device=NVIDIA%20H200&tokens=1024&in=4096&out=4096",
		NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	j = hc_json(&r);
	hc_free(&r);
	CU_ASSERT_PTR_NOT_NULL(j);
	if (j) {
		tuned = json_object_get(j, "tuned");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "exact");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(json_object_get(j, "device"), "uuid")),
				       "GPU-sib-a");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(tuned, "device_uuid")), "GPU-sib-b");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(tuned, "shape_key")),
				       "tokens=1024,in=4096,out=4096");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "config_key")), sib_key[2]);
		CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "median_us")), 60, 1e-9);
		CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "distance")), 0, 0);
		CU_ASSERT_PTR_NOT_NULL(json_object_get(j, "of_floor"));
	}
	json_decref(j);

	/* A neighbour shape still comes from the asked device. */
	CU_ASSERT_EQUAL(hc_request(server_port(sib_srv), "GET",
		"/v1/best?family=dense&device=NVIDIA%20H200&shape=tokens%3D8192%2Cin%3D4096%2Cout%3D4096",
		NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	j = hc_json(&r);
	hc_free(&r);
	CU_ASSERT_PTR_NOT_NULL(j);
	if (j) {
		tuned = json_object_get(j, "tuned");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "nearest");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(tuned, "device_uuid")), "GPU-sib-a");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(tuned, "shape_key")),
				       "tokens=2048,in=4096,out=4096");
	}
	json_decref(j);
	server_stop(sib_srv);
}

static void test_http_errors(void)
{
	char *big;
	size_t n = (1u << 20) + 100;
	struct query_counts before, after;
	struct store *st = NULL;
	struct kt_err err = { 0 };

	CU_ASSERT_FATAL(store_open(db_path, STORE_RO, &st, &err) == 0);
	CU_ASSERT_FATAL(query_counts(st, &before, &err) == 0);

	expect_error("GET", "/v1/nope", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v2/best", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/best?device=GPU-fx-h200&tokens=1&in=16&out=16", NULL, NULL, 400,
		     "invalid_argument");
	expect_error("GET", "/v1/best?family=nope&tokens=1", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/best?family=dense&device=GPU-fx-h200&tokens=abc&in=4096&out=4096",
		     NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096",
		     NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096&bogus=1",
		     NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/best?family=dense&device=GPU-fx-h200&tokens=-5&in=4096&out=4096",
		     NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/best?family=dense&device=GPU-none&tokens=1024&in=4096&out=4096",
		     NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/families/nope", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/sweeps/999999", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/sweeps/abc", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/sweeps/job-999", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/sweeps/job-x", NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/sweeps?limit=-1", NULL, NULL, 400, "invalid_argument");
	expect_error("GET", "/v1/export?format=pdf", NULL, NULL, 400, "invalid_argument");
	/* malformed JSON, wrong JSON */
	expect_error("POST", "/v1/best:batch", NULL, "{\"queries\": [", 400, "invalid_argument");
	expect_error("POST", "/v1/best:batch", NULL, "[1,2]", 400, "invalid_argument");
	expect_error("POST", "/v1/best:batch", NULL, "{\"queries\": 3}", 400, "invalid_argument");
	expect_error("POST", "/v1/best:batch", NULL, NULL, 400, "invalid_argument");
	/* wrong methods */
	expect_error("DELETE", "/v1/best", NULL, NULL, 405, "method_not_allowed");
	expect_error("POST", "/v1/health", NULL, "{}", 405, "method_not_allowed");
	expect_error("GET", "/v1/best:batch", NULL, NULL, 405, "method_not_allowed");
	expect_error("PUT", "/v1/sweeps", auth, "{}", 405, "method_not_allowed");
	{
		struct hc_resp r;

		CU_ASSERT_EQUAL(hc_request(port, "DELETE", "/v1/devices", NULL, NULL, 0, &r), 0);
		CU_ASSERT_EQUAL(r.status, 405);
		CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "Allow: GET, HEAD"));
		hc_free(&r);
	}
	/* oversized body: 413, on an open route and a guarded one */
	big = malloc(n + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	big[n] = 0;
	expect_error("POST", "/v1/best:batch", NULL, big, 413, "too_large");
	expect_error("POST", "/v1/sweeps", auth, big, 413, "too_large");
	free(big);
	/* writes without a token, or with a wrong one */
	expect_error("POST", "/v1/sweeps", NULL, "{\"family\":\"dense\",\"shape\":\"tokens=16,in=16,out=16\"}",
		     401, "unauthorized");
	expect_error("POST", "/v1/sweeps", "Authorization: Bearer 0123456789abcdef0123456789abcdef\r\n",
		     "{\"family\":\"dense\",\"shape\":\"tokens=16,in=16,out=16\"}", 401, "unauthorized");
	expect_error("POST", "/v1/import", "Authorization: Basic Zm9vOmJhcg==\r\n", "{}", 401, "unauthorized");
	/* bad sweep requests, with the token */
	expect_error("POST", "/v1/sweeps", auth, "{\"family\":\"dense\"}", 400, "invalid_argument");
	expect_error("POST", "/v1/sweeps", auth, "{\"family\":\"dense\",\"shape\":\"tokens=0\"}", 400,
		     "invalid_argument");
	expect_error("POST", "/v1/sweeps", auth,
		     "{\"family\":\"dense\",\"shape\":\"tokens=16,in=16,out=16\",\"strategy\":\"magic\"}",
		     400, "invalid_argument");
	expect_error("POST", "/v1/sweeps", auth, "not json", 400, "invalid_argument");
	expect_error("POST", "/v1/import", auth, "{\"format\":\"something-else\"}", 400, "invalid_argument");
	expect_error("POST", "/v1/import", auth,
		     "{\"format\":\"ktune-export\",\"version\":1,\"devices\":[],"
		     "\"entries\":[{\"device\":\"GPU-x\",\"family\":\"dense\"}]}", 400, "invalid_argument");

	/* ... and nothing was written */
	CU_ASSERT_FATAL(query_counts(st, &after, &err) == 0);
	CU_ASSERT_EQUAL(before.devices, after.devices);
	CU_ASSERT_EQUAL(before.sweeps, after.sweeps);
	CU_ASSERT_EQUAL(before.trials, after.trials);
	CU_ASSERT_EQUAL(before.problems, after.problems);
	store_close(st);

	/* still answering */
	json_decref(get_json("/v1/health", 200));
}

/* Random requests: every answer is a status with a JSON body (or the
 * dashboard's documents), and the server goes on answering. */
static void test_http_random(void)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS" };
	static const char *const paths[] = {
		"/v1/best?family=dense&device=GPU-fx-h200&tokens=", "/v1/best?family=lowrank&rank=",
		"/v1/best:batch", "/v1/sweeps/", "/v1/sweeps/job-", "/v1/families/", "/v1/export?format=",
		"/v1/import", "/v1/sweeps", "/v1/winners?family=", "/%2e%2e/", "/v1/best?shape=",
	};
	static const char *const bodies[] = {
		NULL, "{", "{}", "[]", "null", "{\"queries\": [{}]}", "{\"queries\": [1, \"x\", null]}",
		"{\"family\": 7, \"shape\": []}", "{\"format\": \"ktune-export\", \"version\": 1}",
		"\x01\x02\xff", "{\"queries\": [{\"family\": \"dense\", \"shape\": {\"tokens\": 1.5}}]}",
	};
	unsigned seed = 12345;
	int i, bad = 0;

	for (i = 0; i < 300; i++) {
		char path[256], suffix[32];
		const char *m = methods[(seed = seed * 1103515245u + 12345u) % 6];
		const char *body = bodies[(seed = seed * 1103515245u + 12345u) % 11];
		struct hc_resp r;
		json_t *j;
		int k, n;

		n = (int)((seed = seed * 1103515245u + 12345u) % 12);
		for (k = 0; k < (int)sizeof(suffix) - 1 && k < (int)(seed >> 28); k++)
			suffix[k] = "0123456789az%&=,-_/"[(seed = seed * 1103515245u + 12345u) % 19];
		suffix[k] = 0;
		snprintf(path, sizeof(path), "%s%s", paths[n], suffix);
		if (hc_request(port, m, path, (seed & 1) ? auth : NULL, body, body ? strlen(body) : 0, &r) < 0) {
			bad++;
			continue;
		}
		if (r.status < 200 || r.status >= 600)
			bad++;
		if (strcmp(m, "HEAD") != 0 && r.status != 200 && r.status != 202) {
			j = hc_json(&r);
			if (!j || !json_object_get(j, "error")) {
				bad++;
				fprintf(stderr, "%s %s: %d %s\n", m, path, r.status, r.body);
			}
			json_decref(j);
		}
		CU_ASSERT(r.status < 500 || r.status == 503);
		if (r.status >= 500 && r.status != 503)
			fprintf(stderr, "%s %s -> %d %s\n", m, path, r.status, r.body);
		hc_free(&r);
	}
	CU_ASSERT_EQUAL(bad, 0);
	json_decref(get_json("/v1/health", 200));
}

static void test_http_sweeps(void)
{
	json_t *j, *s, *t;
	char path[128];
	size_t i;
	double prev = 0;

	j = get_json("/v1/sweeps", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "sweeps")), FX_NPROBLEMS);
	json_decref(j);

	snprintf(path, sizeof(path), "/v1/sweeps/%lld", (long long)fx.sweep_id[0]);
	s = get_json(path, 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "status")), "done");
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(s, "progress"), "done")), 3);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(s, "progress"), "planned")), 3);
	json_decref(s);

	snprintf(path, sizeof(path), "/v1/sweeps/%lld/trials", (long long)fx.sweep_id[0]);
	t = get_json(path, 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(t, "trials")), 3);
	/* ok trials first, fastest first */
	json_array_foreach(json_object_get(t, "trials"), i, s) {
		if (i < 2) {
			CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "status")), "ok");
			CU_ASSERT(json_real_value(json_object_get(s, "median_us")) >= prev);
			prev = json_real_value(json_object_get(s, "median_us"));
		} else {
			CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "status")), "wrong");
		}
	}
	json_decref(t);
}

static void test_http_export(void)
{
	struct hc_resp r;
	json_t *j;

	j = get_json("/v1/export?format=json", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "format")), "ktune-export");
	CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "entries")), FX_NPROBLEMS);
	json_decref(j);
	j = get_json("/v1/export?format=json&family=lowrank&device=GPU-fx-h200", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "entries")), 2);
	json_decref(j);
	CU_ASSERT_EQUAL(hc_request(port, "GET", "/v1/export?format=c", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "text/x-c"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, ", 8, ktune_tuned_entries,"));
	hc_free(&r);
	j = get_json("/v1/export?format=cuda&device=GPU-fx-h100", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "files"), "ktune_tuned.h"));
	CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "files"), "kernels/p0.cu"));
	CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "files"), "Makefile"));
	json_decref(j);
	expect_error("GET", "/v1/export?format=c&family=nope", NULL, NULL, 404, "not_found");
}

/* Keep-alive: two requests on one connection, both answered, the first
 * not marked "Connection: close" (a handshake per request would cost
 * more than the lookup itself). */
static void test_http_keepalive(void)
{
	static const char req[] = "GET /v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096"
				  " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	struct sockaddr_in sa;
	struct timeval tv = { 10, 0 };
	char buf[16384];
	size_t len = 0;
	int fd, round, answers = 0;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	for (round = 0; round < 2; round++) {
		char *end = NULL;

		CU_ASSERT_EQUAL(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
		len = 0;
		/* one whole answer: headers, then Content-Length bytes */
		while (len < sizeof(buf) - 1) {
			ssize_t k = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
			char *cl;

			if (k <= 0)
				break;
			len += (size_t)k;
			buf[len] = 0;
			if ((end = strstr(buf, "\r\n\r\n")) && (cl = strstr(buf, "Content-Length: ")) &&
			    len >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10))
				break;
		}
		if (strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "\"match\":\"exact\""))
			answers++;
		if (round == 0)
			CU_ASSERT_PTR_NULL(strstr(buf, "Connection: close"));
	}
	close(fd);
	CU_ASSERT_EQUAL(answers, 2);
}

/* A sweep over HTTP runs in the job runner; here (no GPU) it must end
 * failed with no_gpu, visible at /v1/sweeps/job-N. */
static void test_http_sweep_job(void)
{
	json_t *j, *e;
	char path[64];
	const char *state = "";
	int tries;

	j = req_json("POST", "/v1/sweeps", auth,
		     "{\"family\":\"dense\",\"shape\":{\"tokens\":64,\"in\":256,\"out\":256},\"budget\":4}", 202);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "shape_key")), "tokens=64,in=256,out=256");
	snprintf(path, sizeof(path), "/v1/sweeps/%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	/* The request returned at once; the server answers while it runs. */
	json_decref(get_json("/v1/health", 200));
	for (tries = 0; tries < 300; tries++) {
		j = get_json(path, 200);
		CU_ASSERT_PTR_NOT_NULL_FATAL(j);
		state = json_string_value(json_object_get(j, "state"));
		if (strcmp(state, "failed") == 0 || strcmp(state, "done") == 0)
			break;
		json_decref(j);
		j = NULL;
		usleep(100 * 1000);
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	if (kt_test_gpu_required()) {
		CU_ASSERT_STRING_EQUAL(state, "done");
	} else {
		CU_ASSERT_STRING_EQUAL(state, "failed");
		e = json_object_get(j, "error");
		CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(e, "code")), "no_gpu");
		CU_ASSERT(strlen(jstr_or_empty(json_object_get(e, "message"))) > 5);
	}
	json_decref(j);
	j = get_json("/v1/sweeps", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT(json_array_size(json_object_get(j, "jobs")) >= 1);
	json_decref(j);
}

static void test_http_docs(void)
{
	struct hc_resp r;
	json_t *j, *paths;
	int i;

	j = get_json("/v1/openapi.json", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "openapi")), "3.0.3");
	paths = json_object_get(j, "paths");
	/* every route is described */
	for (i = 0; i < srv_nroutes; i++) {
		const char *p = srv_routes[i].path;
		char want[128];

		if (strcmp(p, "/index.html") == 0)
			continue;
		snprintf(want, sizeof(want), "%s", p ? p : "");
		if (strcmp(p, "/v1/families/") == 0)
			snprintf(want, sizeof(want), "/v1/families/{name}");
		if (strcmp(p, "/v1/sweeps/") == 0)
			snprintf(want, sizeof(want), "/v1/sweeps/{id}");
		CU_ASSERT_PTR_NOT_NULL(json_object_get(paths, want));
		if (!json_object_get(paths, want))
			fprintf(stderr, "openapi misses %s\n", want);
	}
	json_decref(j);

	CU_ASSERT_EQUAL(hc_request(port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.head, "text/plain; version=0.0.4"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\nktune_up 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "ktune_winners 8\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "ktune_http_requests_total{route=\"/v1/best\",code=\"200\"}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "ktune_http_requests_total{route=\"unknown\",code=\"404\"}"));
	hc_free(&r);

	CU_ASSERT_EQUAL(hc_request(port, "GET", "/", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "id=\"winners\""));
	hc_free(&r);

	CU_ASSERT_EQUAL(hc_request(port, "GET", "/static/chart.js", NULL, NULL, 0, &r), 0);
	if (access(SRV_CHARTJS, R_OK) == 0) {
		CU_ASSERT_EQUAL(r.status, 200);
		CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "Chart.js"));
	} else {
		CU_ASSERT_EQUAL(r.status, 404);
	}
	hc_free(&r);
}

/* A job that runs until released, reporting progress as it goes. */
static volatile int job_release;

static int slow_job(struct job_runner *r, int id, const struct job_spec *spec, void *arg,
		    struct kt_err *err)
{
	long done = 0;

	(void)spec;
	(void)arg;
	while (!job_release) {
		jobs_progress(r, id, 0, ++done, 1000000, 42.0, "variant=x");
		usleep(10 * 1000);
	}
	return kt_err_set(err, KT_ENOGPU, "released");
}

/* Reads go on while a sweep job runs; a full queue answers 409. */
static void test_http_jobs_busy(void)
{
	struct serve_opts o;
	struct server *s2 = NULL;
	struct kt_err err = { 0 };
	char hdr[160];
	int saved = port, i, accepted = 0, conflicts = 0;
	json_t *j;

	memset(&o, 0, sizeof(o));
	o.db_path = db_path;
	o.listen = ":0";
	o.threads = 2;
	o.quiet = 1;
	o.job_run = slow_job;
	job_release = 0;
	CU_ASSERT_EQUAL_FATAL(server_start(&o, &s2, &err), 0);
	port = server_port(s2);
	snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s\r\n", server_token(s2));
	for (i = 0; i < 300 && !conflicts; i++) {
		struct hc_resp r;

		CU_ASSERT_EQUAL(hc_request(port, "POST", "/v1/sweeps", hdr,
			"{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\"}",
			strlen("{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\"}"), &r), 0);
		if (r.status == 202)
			accepted++;
		else if (r.status == 409 && strstr(r.body, "\"conflict\""))
			conflicts++;
		hc_free(&r);
	}
	CU_ASSERT_EQUAL(accepted, 256);
	CU_ASSERT_EQUAL(conflicts, 1);
	/* the first job is running and reports progress; reads answer */
	usleep(100 * 1000);
	j = get_json("/v1/sweeps/job-1", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "state")), "running");
	CU_ASSERT(json_integer_value(json_object_get(json_object_get(j, "progress"), "done")) > 0);
	CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(j, "best_us")), 42.0, 1e-9);
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL(j);
	json_decref(j);
	j = get_json("/v1/sweeps/job-2", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "state")), "queued");
	json_decref(j);
	job_release = 1;
	port = saved;
	server_stop(s2);
}

/* Chart.js missing: a clear 404 naming the package. */
static void test_http_chartjs_missing(void)
{
	struct serve_opts o;
	struct server *s2 = NULL;
	struct kt_err err = { 0 };
	struct hc_resp r;
	int saved = port;

	memset(&o, 0, sizeof(o));
	o.db_path = db_path;
	o.listen = ":0";
	o.threads = 1;
	o.quiet = 1;
	o.chartjs_path = kt_test_path("no-such-chart.js");
	CU_ASSERT_EQUAL_FATAL(server_start(&o, &s2, &err), 0);
	port = server_port(s2);
	CU_ASSERT_EQUAL(hc_request(port, "GET", "/static/chart.js", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 404);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "libjs-chart.js"));
	hc_free(&r);
	port = saved;
	server_stop(s2);
}

static void test_token_file(void)
{
	struct stat sb;
	char path[600], tok[65], again[65];
	struct kt_err err = { 0 };

	snprintf(path, sizeof(path), "%s.token", db_path);
	CU_ASSERT_EQUAL_FATAL(stat(path, &sb), 0);
	CU_ASSERT_EQUAL(sb.st_mode & 0777, 0600);
	CU_ASSERT_EQUAL(server_token_load(path, tok, sizeof(tok), &err), 0);
	CU_ASSERT_STRING_EQUAL(tok, server_token(srv));
	CU_ASSERT(strlen(tok) >= 32);
	/* a new file gets a new random token */
	CU_ASSERT_EQUAL(server_token_load(kt_test_path("other.token"), again, sizeof(again), &err), 0);
	CU_ASSERT_STRING_NOT_EQUAL(again, tok);
	/* readable by others: refused */
	CU_ASSERT_EQUAL(chmod(kt_test_path("other.token"), 0644), 0);
	CU_ASSERT_EQUAL(server_token_load(kt_test_path("other.token"), again, sizeof(again), &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_EIO);
}

/* ---- import over HTTP, with readers running meanwhile ---- */

static volatile int readers_stop;
static int reader_failures, reader_count;

static void *reader(void *arg)
{
	(void)arg;
	while (!readers_stop) {
		struct hc_resp r;

		if (hc_request(port, "GET",
			       "/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096",
			       NULL, NULL, 0, &r) < 0 || r.status != 200 ||
		    !strstr(r.body, "\"match\":\"exact\""))
			__atomic_add_fetch(&reader_failures, 1, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&reader_count, 1, __ATOMIC_SEQ_CST);
		hc_free(&r);
	}
	return NULL;
}

static void test_http_import(void)
{
	struct fx_result other;
	struct store *st = NULL;
	struct kt_err err = { 0 };
	struct export_bundle b = { 0 };
	const char *odb = kt_test_path("other.db");
	json_t *j, *doc;
	pthread_t th[2];
	char *text;
	int i;

	/* Another database: the fixture with its devices renamed. */
	CU_ASSERT_EQUAL_FATAL(fx_build(odb, &other), 0);
	CU_ASSERT_EQUAL_FATAL(store_open(odb, STORE_RO, &st, &err), 0);
	CU_ASSERT_EQUAL_FATAL(export_build(st, EXPORT_JSON, NULL, &b, &err), 0);
	store_close(st);
	doc = json_loads(b.files[0].data, 0, NULL);
	export_bundle_release(&b);
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	{
		json_t *d, *e;
		size_t k;

		json_array_foreach(json_object_get(doc, "devices"), k, d) {
			char u[96];

			snprintf(u, sizeof(u), "%s-imported", json_string_value(json_object_get(d, "uuid")));
			json_object_set_new(d, "uuid", json_string(u));
		}
		json_array_foreach(json_object_get(doc, "entries"), k, e) {
			char u[96];

			snprintf(u, sizeof(u), "%s-imported", json_string_value(json_object_get(e, "device")));
			json_object_set_new(e, "device", json_string(u));
		}
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);

	readers_stop = 0;
	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	j = req_json("POST", "/v1/import", auth, text, 200);
	CU_ASSERT_PTR_NOT_NULL(j);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "added")), FX_NPROBLEMS);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "skipped")), 0);
	json_decref(j);
	/* idempotent */
	j = req_json("POST", "/v1/import", auth, text, 200);
	CU_ASSERT_PTR_NOT_NULL(j);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "added")), 0);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "skipped")), FX_NPROBLEMS);
	json_decref(j);
	usleep(200 * 1000);
	readers_stop = 1;
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	free(text);
	CU_ASSERT(reader_count > 0);
	CU_ASSERT_EQUAL(reader_failures, 0);

	/* the readers' tables picked up the import (data_version) */
	j = get_json("/v1/health", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "winners")), 2 * FX_NPROBLEMS);
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200-imported&tokens=1024&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "match")), "exact");
	CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "provenance"), "imported_from"));
	json_decref(j);
}

/* A shape no config of the family can run is a 400 naming the rule it
 * broke (it was "nothing tuned ... no default"); a default answer says
 * why nothing tuned answered. */
static void test_http_why(void)
{
	json_t *j, *e;
	const char *m;

	j = req_json("GET", "/v1/best?family=dense&device=GPU-fx-h200&tokens=16&in=4095&out=4096",
		     NULL, NULL, 400);
	e = json_object_get(j, "error");
	m = jstr_or_empty(json_object_get(e, "message"));
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "multiples of 8"));
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "K=4095"));
	json_decref(j);
	j = req_json("GET", "/v1/best?family=blockattn_fwd&device=GPU-fx-h200&seqs=4&lmax=256&heads=4"
		     "&head_dim=96&block=64&rope=0", NULL, NULL, 400);
	m = jstr_or_empty(json_object_get(json_object_get(j, "error"), "message"));
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "head_dim 96"));
	json_decref(j);
	/* exact: no reason */
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=1024&in=4096&out=4096", 200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "exact");
	CU_ASSERT(json_is_null(json_object_get(j, "reason")));
	json_decref(j);
	/* default, nothing of the family tuned there */
	j = get_json("/v1/best?family=monarch&device=GPU-fx-h200&tokens=128&in=4096&out=4096&blocks=4&rank=512",
		     200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "default");
	CU_ASSERT_PTR_NOT_NULL(strstr(jstr_or_empty(json_object_get(j, "reason")), "nothing of monarch"));
	json_decref(j);
	/* default past the distance limit: the reason names the shape */
	j = get_json("/v1/best?family=dense&device=GPU-fx-a100&arch=sm_80&tokens=1024&in=4096&out=4096", 200);
	if (j && strcmp(jstr_or_empty(json_object_get(j, "match")), "default") == 0)
		CU_ASSERT(strlen(jstr_or_empty(json_object_get(j, "reason"))) > 10);
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=16&in=4096&out=4096&max_distance=0",
		     200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	if (strcmp(jstr_or_empty(json_object_get(j, "match")), "default") == 0)
		CU_ASSERT(strlen(jstr_or_empty(json_object_get(j, "reason"))) > 10);
	json_decref(j);
	j = get_json("/v1/best?family=dense&device=GPU-fx-h200&tokens=16384&in=2048&out=2048&max_distance=0.1",
		     200);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_STRING_EQUAL(jstr_or_empty(json_object_get(j, "match")), "default");
	CU_ASSERT(strlen(jstr_or_empty(json_object_get(j, "reason"))) > 10);
	json_decref(j);
}

/* The builds /metrics counts for GET /v1/export. */
static long export_builds(void)
{
	struct hc_resp r;
	const char *p;
	long n = -1;

	if (hc_request(port, "GET", "/metrics", NULL, NULL, 0, &r) == 0 &&
	    (p = strstr(r.body, "\nktune_export_builds_total ")))
		n = strtol(p + strlen("\nktune_export_builds_total "), NULL, 10);
	hc_free(&r);
	return n;
}

struct export_get {
	const char *path;
	char *body;
	int status;
};

static void *export_get_main(void *arg)
{
	struct export_get *g = arg;
	struct hc_resp r;

	if (hc_request(port, "GET", g->path, NULL, NULL, 0, &r) == 0) {
		g->status = r.status;
		g->body = r.body;
		r.body = NULL;
		hc_free(&r);
	}
	return NULL;
}

/* GET /v1/export is built once per change of the database and shared:
 * 8 clients at once cost one build, a second round none; a write makes
 * the next answer new. A filter that names nothing is a 404. */
static void test_http_export_cache(void)
{
	struct export_get g[8];
	pthread_t th[8];
	long b0, b1, b2, b3;
	char *first;
	json_t *j;
	int i, round;

	expect_error("GET", "/v1/export?family=nosuch", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/export?device=nosuch", NULL, NULL, 404, "not_found");
	expect_error("GET", "/v1/export?device=", NULL, NULL, 400, "invalid_argument");
	b0 = export_builds();
	first = NULL;
	for (round = 0; round < 2; round++) {
		memset(g, 0, sizeof(g));
		for (i = 0; i < 8; i++) {
			g[i].path = "/v1/export?format=json&device=GPU-fx-h200";
			pthread_create(&th[i], NULL, export_get_main, &g[i]);
		}
		for (i = 0; i < 8; i++) {
			pthread_join(th[i], NULL);
			CU_ASSERT_EQUAL(g[i].status, 200);
			if (!first && g[i].body)
				first = strdup(g[i].body);
			else
				CU_ASSERT(g[i].body && first && strcmp(g[i].body, first) == 0);
			free(g[i].body);
		}
		if (round == 0)
			b1 = export_builds();
	}
	b2 = export_builds();
	CU_ASSERT_EQUAL(b1 - b0, 1);
	CU_ASSERT_EQUAL(b2, b1);
	/* a write: the next export is built again and shows it */
	j = req_json("POST", "/v1/import", auth,
		     "{\"format\":\"ktune-export\",\"version\":1,\"devices\":[{\"name\":\"NVIDIA H200\","
		     "\"uuid\":\"GPU-fx-h200\",\"arch\":\"sm_90\"}],\"entries\":[{\"device\":\"GPU-fx-h200\","
		     "\"family\":\"dense\",\"shape_key\":\"tokens=48,in=4096,out=4096\",\"config_key\":"
		     "\"variant=wgmma_ws,BLOCK_M=256,BLOCK_N=128,STAGES=4,GROUP_M=1,CONSUMERS=2\","
		     "\"median_us\":9.5,\"sweep\":{\"strategy\":\"exhaustive\",\"options_key\":\"cache\"}}]}",
		     200);
	json_decref(j);
	memset(g, 0, sizeof(g));
	g[0].path = "/v1/export?format=json&device=GPU-fx-h200";
	export_get_main(&g[0]);
	b3 = export_builds();
	CU_ASSERT_EQUAL(g[0].status, 200);
	CU_ASSERT(g[0].body && strstr(g[0].body, "tokens=48,in=4096,out=4096"));
	CU_ASSERT(first && !strstr(first, "tokens=48,in=4096,out=4096"));
	CU_ASSERT_EQUAL(b3 - b2, 1);
	free(g[0].body);
	free(first);
}

/* `ktune serve` as a process: listens, answers, stops on SIGTERM with 0. */
static void test_cli_serve(void)
{
	int pipefd[2], status = -1, cli_port = 0, i;
	char buf[4096];
	size_t len = 0;
	pid_t pid;
	struct hc_resp r;

	if (access(kt_test_ktune(), X_OK) != 0) {
		CU_FAIL("the ktune binary is not built (make build/ktune)");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execl(kt_test_ktune(), kt_test_ktune(), "serve", "--db", db_path, "--listen",
		      "127.0.0.1:0", "--threads", "2", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	/* the first line names the port */
	while (len < sizeof(buf) - 1) {
		ssize_t k = read(pipefd[0], buf + len, sizeof(buf) - 1 - len);
		char *p;

		if (k <= 0)
			break;
		len += (size_t)k;
		buf[len] = 0;
		if ((p = strstr(buf, "http://127.0.0.1:")) && strchr(p, '\n')) {
			cli_port = atoi(p + strlen("http://127.0.0.1:"));
			break;
		}
	}
	CU_ASSERT(cli_port > 0);
	if (cli_port > 0) {
		CU_ASSERT_EQUAL(hc_request(cli_port, "GET", "/v1/health", NULL, NULL, 0, &r), 0);
		CU_ASSERT_EQUAL(r.status, 200);
		hc_free(&r);
	}
	kill(pid, SIGTERM);
	for (i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(50 * 1000);
	if (i == 100) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	close(pipefd[0]);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("server", suite_init, suite_clean);
	CU_add_test(s, "lookup: exact answers are the fastest ok trial", test_lookup_exact);
	CU_add_test(s, "lookup: nearest skips other structural dims and invalid configs", test_lookup_nearest);
	CU_add_test(s, "lookup: no nearest past the distance limit; the default names it", test_lookup_distance_limit);
	CU_add_test(s, "lookup: arch, default, unknown and ambiguous devices", test_lookup_arch_default);
	CU_add_test(s, "lookup: table reloads only on change", test_lookup_reload);
	CU_add_test(s, "lookup: only what changed is read again, and equals a full reload",
		    test_lookup_incremental);
	CU_add_test(s, "lookup: exact on a GPU of the same model before nearest", test_lookup_same_model);
	CU_add_test(s, "http: health, devices, families, winners", test_http_reads);
	CU_add_test(s, "http: best and best:batch", test_http_best);
	CU_add_test(s, "http: best from a GPU of the same model", test_http_same_model);
	CU_add_test(s, "http: every error class, nothing written", test_http_errors);
	CU_add_test(s, "http: sweeps, progress, trials", test_http_sweeps);
	CU_add_test(s, "http: random requests get JSON answers, no crash", test_http_random);
	CU_add_test(s, "http: export as json, c and cuda", test_http_export);
	CU_add_test(s, "http: keep-alive, two answers on one connection", test_http_keepalive);
	CU_add_test(s, "http: a sweep job fails with no_gpu without a GPU", test_http_sweep_job);
	CU_add_test(s, "http: openapi, metrics, dashboard, chart.js", test_http_docs);
	CU_add_test(s, "http: chart.js missing gives a clear 404", test_http_chartjs_missing);
	CU_add_test(s, "http: reads while a job runs; a full queue is a 409", test_http_jobs_busy);
	CU_add_test(s, "token file: 0600, random, refused when readable", test_token_file);
	CU_add_test(s, "http: import (token, idempotent) while readers read", test_http_import);
	CU_add_test(s, "http: an unsupported shape names its rule; a default says why", test_http_why);
	CU_add_test(s, "http: export from a cache a write invalidates; unknown filters 404",
		    test_http_export_cache);
	CU_add_test(s, "cli: ktune serve answers and stops on SIGTERM", test_cli_serve);
	return kt_test_main();
}
