/*
 * test_measure.c -- what makes a winner trustworthy, without a GPU: the
 * store's schema 2 (measuring conditions, tournament and drift columns, the
 * measurements table, a version-1 file migrated to the same schema a new
 * file gets, the tournament-first winners view), per-output verification
 * with its local check (a planted near-tolerance corruption is caught where
 * the pooled relative L2 let it pass), the conditions a fake NVML reports,
 * and the sweep's tournament, sentinel and fault memory on the CPU test
 * device; and the worker's CUDA backend itself (tuner/cuda.c) on a CPU
 * stand-in for the driver (tests/fake_cuda.c) that refuses any access
 * outside a live allocation.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "db/store.h"
#include "kernels/family.h"
#include "testutil.h"
#include "tuner/sweep.h"
#include "tuner/worker.h"
#include "tuner/worker_int.h"
#include "util/clock.h"

/* ---- helpers ---- */

static struct store *open_rw(const char *path)
{
	struct store *st = NULL;
	struct kt_err e = { 0 };

	if (store_open(path, STORE_RW, &st, &e) != 0)
		fprintf(stderr, "store_open(%s): %s\n", path, e.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	return st;
}

static int raw_sql(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;
	int rc = sqlite3_open(path, &db) == SQLITE_OK &&
		 sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK;

	if (!rc)
		fprintf(stderr, "raw_sql: %s\n", msg ? msg : sqlite3_errmsg(db));
	sqlite3_free(msg);
	sqlite3_close(db);
	return rc ? 0 : -1;
}

/* The rows of a one-column query, joined by '|' (malloc'ed). */
static char *raw_text(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	char *out = calloc(1, 1);
	size_t len = 0;

	if (sqlite3_open(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK)
		while (out && sqlite3_step(s) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(s, 0);
			size_t n = t ? strlen(t) : 0;
			char *grown = realloc(out, len + n + 2);

			if (!grown) {
				free(out);
				out = NULL;
				break;
			}
			out = grown;
			memcpy(out + len, t ? t : "", n);
			len += n;
			out[len++] = '|';
			out[len] = 0;
		}
	sqlite3_finalize(s);
	sqlite3_close(db);
	return out;
}

/* One device, problem, sweep and config; the ids come back. */
static void seed_rows(struct store *st, const char *uuid, const char *shape, int64_t *dev,
		      int64_t *prob, int64_t *sweep)
{
	struct store_device d;
	struct store_sweep_spec spec;
	struct kt_err e = { 0 };
	char shape_json[128];
	int resumed = 0;

	memset(&d, 0, sizeof(d));
	snprintf(d.name, sizeof(d.name), "test gpu");
	snprintf(d.uuid, sizeof(d.uuid), "%s", uuid);
	snprintf(d.arch, sizeof(d.arch), "sm_90");
	CU_ASSERT_EQUAL_FATAL(store_device_upsert(st, &d, &e), 0);
	*dev = d.id;
	snprintf(shape_json, sizeof(shape_json), "{\"n\":%s}", strchr(shape, '=') + 1);
	CU_ASSERT_EQUAL_FATAL(store_problem_intern(st, "selftest", shape, shape_json, prob, &e), 0);
	memset(&spec, 0, sizeof(spec));
	spec.device_id = d.id;
	spec.problem_id = *prob;
	spec.strategy = "exhaustive";
	spec.options_key = "k";
	spec.provenance_json = "{}";
	spec.planned = 3;
	CU_ASSERT_EQUAL_FATAL(store_sweep_begin(st, &spec, sweep, &resumed, &e), 0);
}

static void add_trial(struct store *st, int64_t sweep, const char *key, const char *status,
		      double us)
{
	struct store_trial t;
	struct kt_err e = { 0 };
	int64_t cfg;

	CU_ASSERT_EQUAL_FATAL(store_config_intern(st, "selftest", key, "{}", &cfg, &e), 0);
	memset(&t, 0, sizeof(t));
	t.sweep_id = sweep;
	t.config_id = cfg;
	t.status = status;
	t.median_us = t.min_us = t.p90_us = us;
	t.rel_err = -1;
	t.cond.sm_mhz_before = 1980;
	t.cond.sm_mhz_after = 1755;
	t.cond.power_w_after = 512.5;
	t.cond.temp_c_after = 61;
	t.throttled = 1;
	t.norm_us = us * 0.9;
	t.errors_json = "{\"y\":{\"rel_l2\":0.001}}";
	if (store_trial_add(st, &t, &e) != 0)
		fprintf(stderr, "trial: %s\n", e.msg);
	CU_ASSERT_EQUAL(e.code, KT_OK);
}

/* The winners view as it was in schema version 1. */
static const char v1_view[] =
	"CREATE VIEW winners AS WITH ranked AS ("
	" SELECT t.id AS trial_id, t.sweep_id, t.config_id, t.median_us, t.min_us,"
	" t.p90_us, t.retime_us, s.device_id, s.problem_id,"
	" row_number() OVER (PARTITION BY s.device_id, s.problem_id"
	" ORDER BY t.median_us, t.min_us, t.id) AS rank"
	" FROM trials t JOIN sweeps s ON s.id = t.sweep_id"
	" WHERE t.status = 'ok' AND t.median_us IS NOT NULL)"
	" SELECT r.device_id, r.problem_id, r.sweep_id, r.trial_id,"
	" d.name AS device_name, d.uuid AS device_uuid, d.arch, p.family, p.shape_key,"
	" p.shape_json, c.config_key, c.params_json, r.median_us, r.min_us, r.p90_us,"
	" r.retime_us, NULL AS cublas_us, NULL AS naive_us, s.provenance_json"
	" FROM ranked r JOIN devices d ON d.id = r.device_id"
	" JOIN problems p ON p.id = r.problem_id JOIN configs c ON c.id = r.config_id"
	" JOIN sweeps s ON s.id = r.sweep_id WHERE r.rank = 1;";

/* ---- the store, schema 2 ---- */

/* A version-1 file (made by taking version 2's additions out of a new one)
 * is migrated in place: its rows stay, and its tables and view end up as a
 * new file's. */
static void test_migrate_v1(void)
{
	const char *fresh = kt_test_path("fresh.db"), *old = kt_test_path("v1.db");
	static const char *const cols[] = { "tournament_us", "sm_mhz_before", "sm_mhz_after",
					    "mem_mhz_before", "mem_mhz_after", "power_w_before",
					    "power_w_after", "temp_c_before", "temp_c_after",
					    "throttled", "norm_us", "errors_json" };
	char sql[4096];
	struct store *st;
	int64_t dev, prob, sweep;
	size_t i, n = 0;
	char *a, *b;

	st = open_rw(fresh);
	store_close(st);
	st = open_rw(old);
	seed_rows(st, "GPU-old", "n=64", &dev, &prob, &sweep);
	store_close(st);
	n = (size_t)snprintf(sql, sizeof(sql), "DROP VIEW winners; DROP TABLE measurements;");
	for (i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, "ALTER TABLE trials DROP COLUMN %s;",
				      cols[i]);
	snprintf(sql + n, sizeof(sql) - n,
		 "%s INSERT INTO configs (family, config_key, params_json)"
		 " VALUES ('selftest', 'variant=ok,UNROLL=1', '{}');"
		 " INSERT INTO trials (sweep_id, config_id, status, median_us, min_us, p90_us,"
		 " created) VALUES (%lld, 1, 'ok', 5.0, 4.0, 6.0, 1.0); PRAGMA user_version = 1;",
		 v1_view, (long long)sweep);
	CU_ASSERT_EQUAL_FATAL(raw_sql(old, sql), 0);
	a = raw_text(old, "SELECT name FROM pragma_table_info('trials')");
	CU_ASSERT_PTR_NULL(strstr(a, "tournament_us"));
	free(a);

	st = open_rw(old);
	CU_ASSERT_EQUAL(store_version(st), 2);
	{
		struct store_winner *w = NULL;
		struct kt_err e = { 0 };
		int nw = 0;

		CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, "selftest", &w, &nw, &e), 0);
		CU_ASSERT_EQUAL(nw, 1);
		if (nw == 1)
			CU_ASSERT_DOUBLE_EQUAL(w[0].median_us, 5.0, 1e-9);
		for (i = 0; i < (size_t)nw; i++)
			store_winner_release(&w[i]);
		free(w);
	}
	store_close(st);
	/* The same columns in the same order, the same view. */
	a = raw_text(fresh, "SELECT name || ' ' || type FROM pragma_table_info('trials')");
	b = raw_text(old, "SELECT name || ' ' || type FROM pragma_table_info('trials')");
	CU_ASSERT_STRING_EQUAL(a, b);
	free(a);
	free(b);
	a = raw_text(fresh, "SELECT name || ' ' || type || ' ' || \"notnull\" FROM"
			    " pragma_table_info('measurements')");
	b = raw_text(old, "SELECT name || ' ' || type || ' ' || \"notnull\" FROM"
			  " pragma_table_info('measurements')");
	CU_ASSERT_TRUE(strlen(a) > 100);
	CU_ASSERT_STRING_EQUAL(a, b);
	free(a);
	free(b);
	a = raw_text(fresh, "SELECT sql FROM sqlite_master WHERE name = 'winners'");
	b = raw_text(old, "SELECT sql FROM sqlite_master WHERE name = 'winners'");
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_PTR_NOT_NULL(strstr(a, "tournament_us"));
	free(a);
	free(b);
}

/* Conditions, tournament times and measurements go in and come back; the
 * winners view prefers a tournament median; faulty configs of other sweeps
 * and the family's trials elsewhere are listed. */
static void test_rows_v2(void)
{
	const char *path = kt_test_path("rows2.db");
	struct store *st = open_rw(path);
	struct store_trial_row *rows = NULL;
	struct store_measure_row *ms = NULL;
	struct store_winner w;
	struct store_measure m;
	struct kt_err e = { 0 };
	int64_t dev, prob, sweep;
	int n = 0, i;

	seed_rows(st, "GPU-a", "n=64", &dev, &prob, &sweep);
	add_trial(st, sweep, "variant=ok,UNROLL=1", "ok", 10.0);
	add_trial(st, sweep, "variant=ok,UNROLL=2", "ok", 9.0);
	add_trial(st, sweep, "variant=fault,UNROLL=1", "fault", 0);
	CU_ASSERT_EQUAL(store_trials_list(st, sweep, 0, &rows, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_STRING_EQUAL(rows[0].config_key, "variant=ok,UNROLL=2");
	CU_ASSERT_EQUAL(rows[0].cond.sm_mhz_before, 1980);
	CU_ASSERT_EQUAL(rows[0].cond.sm_mhz_after, 1755);
	CU_ASSERT_EQUAL(rows[0].cond.mem_mhz_before, 0);	/* not read: NULL */
	CU_ASSERT_DOUBLE_EQUAL(rows[0].cond.power_w_after, 512.5, 1e-9);
	CU_ASSERT_EQUAL(rows[0].cond.temp_c_after, 61);
	CU_ASSERT_EQUAL(rows[0].throttled, 1);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].norm_us, 8.1, 1e-9);
	CU_ASSERT_PTR_NOT_NULL(rows[0].errors_json && strstr(rows[0].errors_json, "rel_l2"));
	CU_ASSERT_DOUBLE_EQUAL(rows[2].norm_us, 0, 1e-12);	/* a fault has no time */
	CU_ASSERT_TRUE(rows[0].id > 0 && rows[0].id != rows[1].id);
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);

	/* The sweep's fastest trial wins until a tournament says otherwise. */
	memset(&w, 0, sizeof(w));
	CU_ASSERT_EQUAL(store_winner_get(st, dev, prob, &w, &e), 1);
	CU_ASSERT_STRING_EQUAL(w.config_key, "variant=ok,UNROLL=2");
	store_winner_release(&w);
	CU_ASSERT_EQUAL(store_tournament_set(st, sweep, "variant=ok,UNROLL=1", 8.5, &e), 0);
	CU_ASSERT_EQUAL(store_tournament_set(st, sweep, "variant=ok,UNROLL=2", 8.7, &e), 0);
	CU_ASSERT_EQUAL(store_winner_get(st, dev, prob, &w, &e), 1);
	CU_ASSERT_STRING_EQUAL(w.config_key, "variant=ok,UNROLL=1");
	CU_ASSERT_DOUBLE_EQUAL(w.median_us, 8.5, 1e-9);
	store_winner_release(&w);
	{
		struct store_winner *all = NULL;
		int nw = 0;

		CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, NULL, &all, &nw, &e), 0);
		CU_ASSERT_EQUAL_FATAL(nw, 1);
		CU_ASSERT_STRING_EQUAL(all[0].config_key, "variant=ok,UNROLL=1");
		CU_ASSERT_DOUBLE_EQUAL(all[0].median_us, 8.5, 1e-9);
		store_winner_release(&all[0]);
		free(all);
	}
	CU_ASSERT_EQUAL(store_tournament_set(st, sweep, "variant=nope,UNROLL=1", 1.0, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);
	kt_err_clear(&e);

	memset(&m, 0, sizeof(m));
	m.sweep_id = sweep;
	m.run = 100.5;
	m.kind = "tournament";
	m.config_key = "variant=ok,UNROLL=1";
	m.round = 2;
	m.position = 1;
	m.status = "ok";
	m.median_us = 8.4;
	m.reps = 50;
	m.cond.sm_mhz_before = 1900;
	CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), 0);
	m.kind = "sentinel";
	m.config_key = NULL;
	m.baseline = "cublas_dense";
	m.median_us = 7.0;
	CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), 0);
	m.config_key = "variant=nope,UNROLL=9";	/* both, and an unknown key */
	CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), -1);
	kt_err_clear(&e);
	m.baseline = NULL;
	CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), -1);	/* unknown config */
	kt_err_clear(&e);
	m.config_key = "variant=ok,UNROLL=1";
	m.kind = "sideways";
	CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), -1);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(store_measures_list(st, sweep, NULL, &ms, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(ms[0].kind, "tournament");
	CU_ASSERT_STRING_EQUAL(ms[0].config_key, "variant=ok,UNROLL=1");
	CU_ASSERT_EQUAL(ms[0].round, 2);
	CU_ASSERT_EQUAL(ms[0].cond.sm_mhz_before, 1900);
	CU_ASSERT_DOUBLE_EQUAL(ms[0].run, 100.5, 1e-9);
	CU_ASSERT_STRING_EQUAL(ms[1].baseline, "cublas_dense");
	CU_ASSERT_STRING_EQUAL(ms[1].config_key, "");
	for (i = 0; i < n; i++)
		store_measure_row_release(&ms[i]);
	free(ms);
	CU_ASSERT_EQUAL(store_measures_list(st, sweep, "sentinel", &ms, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 1);
	for (i = 0; i < n; i++)
		store_measure_row_release(&ms[i]);
	free(ms);
	store_close(st);
}

static int nfaulty;
static char faulty_key[128];

static void on_faulty(const char *key, const char *status, void *arg)
{
	(void)arg;
	nfaulty++;
	snprintf(faulty_key, sizeof(faulty_key), "%s %s", key, status);
}

static int nfam;
static double fam_us;

static void on_family(const char *shape_json, const char *uuid, const char *key, double us,
		      void *arg)
{
	(void)arg;
	nfam++;
	if (strstr(shape_json, "64") && !strcmp(uuid, "GPU-f") && !strcmp(key, "variant=ok,UNROLL=1"))
		fam_us = us;
}

static void test_faulty_and_family(void)
{
	const char *path = kt_test_path("faulty.db");
	struct store *st = open_rw(path);
	struct store_sweep_spec spec;
	struct kt_err e = { 0 };
	int64_t dev, prob, sweep, sweep2, dev2, prob2, sweep3;
	int resumed = 0;

	seed_rows(st, "GPU-f", "n=64", &dev, &prob, &sweep);
	add_trial(st, sweep, "variant=fault,UNROLL=1", "fault", 0);
	add_trial(st, sweep, "variant=hang,UNROLL=1", "timeout", 0);
	add_trial(st, sweep, "variant=ok,UNROLL=1", "ok", 4.0);
	CU_ASSERT_EQUAL(store_tournament_set(st, sweep, "variant=ok,UNROLL=1", 3.5, &e), 0);
	memset(&spec, 0, sizeof(spec));
	spec.device_id = dev;
	spec.problem_id = prob;
	spec.strategy = "random";
	spec.options_key = "other";
	spec.provenance_json = "{}";
	CU_ASSERT_EQUAL_FATAL(store_sweep_begin(st, &spec, &sweep2, &resumed, &e), 0);
	nfaulty = 0;
	CU_ASSERT_EQUAL(store_faulty_configs(st, dev, prob, sweep2, on_faulty, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfaulty, 2);
	/* its own faults are not "another sweep's" */
	nfaulty = 0;
	CU_ASSERT_EQUAL(store_faulty_configs(st, dev, prob, sweep, on_faulty, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfaulty, 0);
	/* another problem: nothing */
	seed_rows(st, "GPU-g", "n=128", &dev2, &prob2, &sweep3);
	nfaulty = 0;
	CU_ASSERT_EQUAL(store_faulty_configs(st, dev2, prob2, sweep3, on_faulty, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfaulty, 0);
	add_trial(st, sweep3, "variant=ok,UNROLL=1", "ok", 7.0);

	/* From GPU-g at n=128, the family's trials elsewhere: the one ok trial
	 * at n=64 on GPU-f, by its tournament median. */
	nfam = 0;
	fam_us = 0;
	CU_ASSERT_EQUAL(store_family_trials(st, "selftest", dev2, prob2, 0, on_family, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfam, 1);
	CU_ASSERT_DOUBLE_EQUAL(fam_us, 3.5, 1e-9);
	nfam = 0;
	CU_ASSERT_EQUAL(store_family_trials(st, "selftest", -1, -1, 0, on_family, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfam, 2);
	nfam = 0;
	CU_ASSERT_EQUAL(store_family_trials(st, "dense", -1, -1, 0, on_family, NULL, &e), 0);
	CU_ASSERT_EQUAL(nfam, 0);
	store_close(st);
}


/* ---- verification ---- */

#define BIG_N ((1L << 20) + 17)

/* y = 2x over bf16 inputs, as the selftest family's reference has it. */
static void selftest_ref(float *ref, uint16_t *x, size_t n, uint64_t seed)
{
	size_t i;

	kt_fill_bf16(x, n, seed, 1.0);
	for (i = 0; i < n; i++)
		ref[i] = 2.0f * kt_bf16_to_f32(x[i]);
}

static void judge_one(const float *got, const float *ref, size_t n, const char *name,
		      struct worker_result *res)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { (long)n } };
	struct kt_buf bufs[2];
	struct measure_cmp cmp[2], self;
	struct worker_tol tol[2];
	double rms;

	memset(bufs, 0, sizeof(bufs));
	memset(cmp, 0, sizeof(cmp));
	memset(tol, 0, sizeof(tol));
	memset(&self, 0, sizeof(self));
	kt_buf_set(&bufs[0], "x", KT_BUF_INPUT, KT_BF16, n, 1.0);
	kt_buf_set(&bufs[1], name, KT_BUF_OUTPUT, KT_BF16, n, 0);
	measure_tolerance(f, &s, &bufs[1], &tol[1]);
	measure_compare(ref, ref, n, 0, 0, &self);
	rms = sqrt(self.sq_ref / (double)n);
	measure_compare(got, ref, n, measure_atol(&tol[1], rms), tol[1].rtol, &cmp[1]);
	memset(res, 0, sizeof(*res));
	measure_judge(res, bufs, 2, cmp, tol);
}

/* 88 zeroed elements of 2^20 (the selftest family's planted sparse_wrong,
 * and the case that slipped through a pooled 1e-2 bound): relative L2 just
 * under the global tolerance, caught by the local check. A correct output
 * rounded to bf16 twice over passes. */
static void test_local_check_catches_sparse_zeros(void)
{
	size_t n = BIG_N, stride = n / 88, i;
	float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
	uint16_t *x = malloc(n * sizeof(uint16_t));
	struct worker_result res;
	long zeroed = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ref && got && x);
	selftest_ref(ref, x, n, 99);
	/* a correct kernel: the same values through bf16 */
	for (i = 0; i < n; i++)
		got[i] = kt_bf16_to_f32(kt_f32_to_bf16(ref[i]));
	judge_one(got, ref, n, "y", &res);
	CU_ASSERT_EQUAL(res.status, WORKER_OK);
	CU_ASSERT_EQUAL(res.nout, 1);
	CU_ASSERT_EQUAL(res.out[0].over, 0);
	CU_ASSERT_TRUE(res.out[0].max_err < res.out[0].local_tol);
	for (i = 0; i < n; i++)
		if (i % stride == stride / 2) {
			got[i] = 0;
			zeroed++;
		}
	CU_ASSERT(zeroed >= 88 && zeroed <= 89);
	judge_one(got, ref, n, "y", &res);
	printf("\n  %ld of %zu zeroed: relative L2 %.4f (tolerance %.3g), largest error %.2f x rms "
	       "(local bound %.3f), %ld over", zeroed, n, res.out[0].rel_l2, res.out[0].l2_tol,
	       res.out[0].max_err, res.out[0].local_tol, res.out[0].over);
	/* the pooled global check alone would have passed it */
	CU_ASSERT_TRUE(res.out[0].rel_l2 < res.out[0].l2_tol);
	CU_ASSERT_EQUAL(res.status, WORKER_WRONG);
	CU_ASSERT_TRUE(res.out[0].over >= 60);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.message, "local bound"));
	CU_ASSERT_PTR_NOT_NULL(strstr(res.message, "y:"));
	/* One zeroed element is caught too (when it was not near 0 anyway). */
	for (i = 0; i < n; i++)
		got[i] = kt_bf16_to_f32(kt_f32_to_bf16(ref[i]));
	for (i = 0; fabsf(ref[i]) < 0.5f; i++)
		;
	got[i] = 0;
	judge_one(got, ref, n, "y", &res);
	CU_ASSERT_EQUAL(res.status, WORKER_WRONG);
	CU_ASSERT_EQUAL(res.out[0].over, 1);
	free(ref);
	free(got);
	free(x);
}

/* Outputs are judged one by one: dq 4.5% off beside exact dk and dv (twice
 * its magnitude, as gradients of unequal scale are) fails, naming dq, where
 * the pooled error is under 2e-2. */
static void test_outputs_judged_separately(void)
{
	const struct kt_family *f = kt_family_find("blockattn_bwd");
	size_t n = 4096, i;
	struct kt_buf bufs[3];
	struct measure_cmp cmp[3];
	struct worker_tol tol[3];
	struct worker_result res;
	float *ref = malloc(n * sizeof(float)), *dq = malloc(n * sizeof(float));
	float *big = malloc(n * sizeof(float));
	uint16_t *x = malloc(n * sizeof(uint16_t));
	struct kt_shape s;
	struct kt_err e = { 0 };
	double pooled_diff = 0, pooled_ref = 0, rms;
	int b;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f && ref && dq && x && big);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, "seqs=8,lmax=256,heads=1,head_dim=64,block=64,rope=0",
					     &s, &e), 0);
	selftest_ref(ref, x, n, 7);
	for (i = 0; i < n; i++) {
		dq[i] = ref[i] * (i % 2 ? 1.045f : 0.955f);
		big[i] = 2.0f * ref[i];
	}
	memset(bufs, 0, sizeof(bufs));
	memset(cmp, 0, sizeof(cmp));
	kt_buf_set(&bufs[0], "dq", KT_BUF_OUTPUT, KT_F32, n, 0);
	kt_buf_set(&bufs[1], "dk", KT_BUF_OUTPUT, KT_F32, n, 0);
	kt_buf_set(&bufs[2], "dv", KT_BUF_OUTPUT, KT_F32, n, 0);
	for (b = 0; b < 3; b++) {
		struct measure_cmp self;

		memset(&self, 0, sizeof(self));
		measure_tolerance(f, &s, &bufs[b], &tol[b]);
		measure_compare(b ? big : ref, b ? big : ref, n, 0, 0, &self);
		rms = sqrt(self.sq_ref / (double)n);
		measure_compare(b == 0 ? dq : big, b ? big : ref, n, measure_atol(&tol[b], rms),
				tol[b].rtol, &cmp[b]);
		pooled_diff += cmp[b].sq_diff;
		pooled_ref += cmp[b].sq_ref;
	}
	/* head_dim 64 and block 64: the reduction length the bound allows */
	CU_ASSERT_EQUAL(tol[0].k, 64);
	CU_ASSERT_DOUBLE_EQUAL(tol[0].l2, f->tol, 1e-12);
	CU_ASSERT_TRUE(sqrt(pooled_diff / pooled_ref) < f->tol);
	memset(&res, 0, sizeof(res));
	CU_ASSERT_EQUAL(measure_judge(&res, bufs, 3, cmp, tol), 1);
	CU_ASSERT_EQUAL(res.nout, 3);
	CU_ASSERT_STRING_EQUAL(res.out[0].name, "dq");
	CU_ASSERT_TRUE(res.out[0].rel_l2 > 0.04);
	CU_ASSERT_DOUBLE_EQUAL(res.out[1].rel_l2, 0, 1e-12);
	CU_ASSERT_PTR_NOT_NULL(strstr(res.message, "dq:"));
	CU_ASSERT_DOUBLE_EQUAL(res.rel_err, res.out[0].rel_l2, 1e-12);
	free(ref);
	free(dq);
	free(big);
	free(x);
}

/* The bounds follow the problem: K from the shape, ulps from the dtype,
 * the Gaussian tail from the count. */
static void test_tolerance_from_problem(void)
{
	const struct kt_family *dense = kt_family_find("dense"), *sel = kt_family_find("selftest");
	struct kt_shape s1, s2, st = { { 1000 } };
	struct kt_buf b;
	struct worker_tol t1, t2, t3;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(dense, "tokens=1024,in=4096,out=4096", &s1, &e), 0);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(dense, "tokens=1024,in=65536,out=4096", &s2, &e), 0);
	kt_buf_set(&b, "y", KT_BUF_OUTPUT, KT_BF16, 1024 * 4096, 0);
	measure_tolerance(dense, &s1, &b, &t1);
	measure_tolerance(dense, &s2, &b, &t2);
	CU_ASSERT_EQUAL(t1.k, 4096);
	CU_ASSERT_EQUAL(t2.k, 65536);
	CU_ASSERT_TRUE(t2.local > t1.local);	/* a longer reduction: a looser bound */
	CU_ASSERT_DOUBLE_EQUAL(t1.rtol, 1.0 / 64, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(t1.local, 2 * sqrt(2 * log(1024.0 * 4096)) * 1e-2 + 4096 * ldexp(1, -23),
			       1e-12);
	kt_buf_set(&b, "y", KT_BUF_OUTPUT, KT_F32, 1000, 0);
	measure_tolerance(sel, &st, &b, &t3);
	CU_ASSERT_EQUAL(t3.k, 1);
	CU_ASSERT_TRUE(t3.rtol < 1e-6);
	CU_ASSERT_TRUE(t3.local < t1.local);	/* fewer elements: a thinner tail */
}

static void test_guard_count(void)
{
	unsigned char buf[64];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = MEASURE_GUARD_BYTE;
	CU_ASSERT_EQUAL(measure_guard_count(buf, sizeof(buf)), 0);
	buf[5] = 0;
	buf[63] ^= 1;
	CU_ASSERT_EQUAL(measure_guard_count(buf, sizeof(buf)), 2);
}

/* ---- on the CPU test device ---- */

/* rel, a path under the folder of this test program (where the build puts
 * the stand-in libraries), into buf. */
static const char *beside_exe(char *buf, size_t len, const char *rel)
{
	char exe[4000];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return "";
	exe[n] = 0;
	if ((slash = strrchr(exe, '/')))
		*slash = 0;
	snprintf(buf, len, "%s/%s", exe, rel);
	return buf;
}

static const char *fake_nvml(void)
{
	static char path[4096];

	return beside_exe(path, sizeof(path), "fake-nvml/libnvidia-ml.so.1");
}

static void cpu_opts(struct sweep_opts *o, const char *db, const char *shape)
{
	sweep_opts_default(o);
	o->db_path = db;
	o->family = "selftest";
	o->shape = shape;
	o->threads = 2;
	o->timeout_s = 3;
	o->worker.exe = kt_test_ktune();
	o->worker.backend = WORKER_BACKEND_CPU;
	o->worker.budget_ms = 20;
}

static int trial_rows(const char *db, int64_t sweep, struct store_trial_row **rows)
{
	struct store *st = NULL;
	struct kt_err e = { 0 };
	int n = -1;

	*rows = NULL;
	if (store_open(db, STORE_RO, &st, &e) == 0 && store_trials_list(st, sweep, 0, rows, &n, &e) != 0)
		n = -1;
	store_close(st);
	return n;
}

/* Planted at 2^20 elements: the near-tolerance wrong kernel, the write
 * past the output, the compile error and the shared-memory excess each get
 * their status, and the winner is the good config. */
static void test_planted_statuses(void)
{
	const char *db = kt_test_path("planted.db");
	struct sweep_opts o;
	struct sweep_summary s;
	struct store_trial_row *rows;
	struct kt_err e = { 0 };
	int n, i, seen = 0;

	cpu_opts(&o, db, "n=1048593");
	o.plant = 1;
	o.rounds = 2;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_STRING_EQUAL(s.best_config, "variant=ok,UNROLL=1");
	CU_ASSERT_TRUE(s.verified);
	n = trial_rows(db, s.sweep_id, &rows);
	CU_ASSERT_EQUAL(n, s.evaluated);
	for (i = 0; i < n; i++) {
		const char *k = rows[i].config_key, *st = rows[i].status,
			   *m = rows[i].message ? rows[i].message : "";

		if (strstr(k, "sparse_wrong")) {
			seen |= 1;
			CU_ASSERT_STRING_EQUAL(st, "wrong");
			CU_ASSERT_PTR_NOT_NULL(strstr(m, "local bound"));
			CU_ASSERT_PTR_NOT_NULL(rows[i].errors_json &&
					       strstr(rows[i].errors_json, "\"over\""));
			CU_ASSERT_TRUE(rows[i].rel_err > 0 && rows[i].rel_err < 0.01);
		} else if (strstr(k, "oob_write")) {
			seen |= 2;
			CU_ASSERT_STRING_EQUAL(st, "wrong");
			CU_ASSERT_PTR_NOT_NULL(strstr(m, "guard"));
		} else if (strstr(k, "compile_error")) {
			seen |= 4;
			CU_ASSERT_STRING_EQUAL(st, "compile_error");
			CU_ASSERT_PTR_NOT_NULL(rows[i].log && strstr(rows[i].log, "planted compile error"));
		} else if (strstr(k, "smem_excess")) {
			seen |= 8;
			CU_ASSERT_STRING_EQUAL(st, "launch_error");
			CU_ASSERT_PTR_NOT_NULL(strstr(m, "shared memory"));
		} else if (strstr(k, "variant=fault")) {
			seen |= 16;
			CU_ASSERT_STRING_EQUAL(st, "fault");
		} else if (strstr(k, "variant=hang")) {
			seen |= 32;
			CU_ASSERT_STRING_EQUAL(st, "timeout");
		}
	}
	CU_ASSERT_EQUAL(seen, 63);
	store_trial_rows_free(rows, n);
}

/* The fake NVML's clocks land in every timed trial; one under the
 * threshold is marked, and the summary says how low the clock went. */
static void test_conditions_recorded(void)
{
	const char *db = kt_test_path("nvml.db");
	char *old_lib = kt_test_env_save("KTUNE_NVML_LIB"), *old_sm = kt_test_env_save("KTUNE_FAKE_NVML_SM");
	struct sweep_opts o;
	struct sweep_summary s;
	struct store_trial_row *rows;
	struct kt_err e = { 0 };
	int n, i, ok = 0;

	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("KTUNE_NVML_LIB", fake_nvml()), 0);
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_FAKE_NVML_SM", "1980,1300"), 0);
	cpu_opts(&o, db, "n=4096");
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	if (e.code)
		fprintf(stderr, "%s\n", e.msg);
	CU_ASSERT_TRUE(s.nvml);
	CU_ASSERT_EQUAL(s.clock_min_mhz, 1300);
	CU_ASSERT_EQUAL(s.clock_max_mhz, 1980);
	CU_ASSERT_EQUAL(s.clock_threshold_mhz, (int)(0.96 * 1980));
	CU_ASSERT_TRUE(s.power_max_w > 400);
	n = trial_rows(db, s.sweep_id, &rows);
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].status, "ok") != 0) {
			CU_ASSERT_EQUAL(rows[i].cond.sm_mhz_before, 0);
			continue;
		}
		ok++;
		CU_ASSERT_EQUAL(rows[i].cond.sm_mhz_before, 1980);
		CU_ASSERT_EQUAL(rows[i].cond.sm_mhz_after, 1300);
		CU_ASSERT_EQUAL(rows[i].cond.mem_mhz_after, 3201);
		CU_ASSERT_TRUE(rows[i].cond.temp_c_after > rows[i].cond.temp_c_before);
		CU_ASSERT_EQUAL(rows[i].throttled, 1);
	}
	CU_ASSERT_TRUE(ok >= 1);
	CU_ASSERT_EQUAL(s.n_throttled, ok);
	store_trial_rows_free(rows, n);

	/* Steady clocks: nothing marked. */
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_FAKE_NVML_SM", "1980"), 0);
	cpu_opts(&o, kt_test_path("nvml2.db"), "n=4096");
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_TRUE(s.nvml);
	CU_ASSERT_EQUAL(s.n_throttled, 0);
	CU_ASSERT_EQUAL(s.clock_min_mhz, 1980);

	/* No NVML at all: no conditions, said plainly. */
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1"), 0);
	cpu_opts(&o, kt_test_path("nvml3.db"), "n=4096");
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_FALSE(s.nvml);
	CU_ASSERT_EQUAL(s.clock_min_mhz, 0);
	CU_ASSERT_TRUE(s.best_us > 0);
	kt_test_env_put("KTUNE_NVML_LIB", old_lib);
	kt_test_env_put("KTUNE_FAKE_NVML_SM", old_sm);
	free(old_lib);
	free(old_sm);
}

/* Two good configs (the CPU device allowing 64 KiB of shared memory): the
 * tournament runs both in every round, rotated, stores their medians, and
 * the summary's us is the winner's; the fresh re-time and the sentinel are
 * recorded. */
static void test_tournament_and_sentinel(void)
{
	const char *db = kt_test_path("tourn.db");
	char *old = kt_test_env_save("KTUNE_CPU_SMEM");
	struct sweep_opts o;
	struct sweep_summary s;
	struct store *st = NULL;
	struct store_measure_row *m = NULL;
	struct store_trial_row *rows;
	struct kt_err e = { 0 };
	int n = 0, i, k, first[3] = { -1, -1, -1 }, ntour = 0, nsent = 0, nret = 0, n2;

	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("KTUNE_CPU_SMEM", "131072"), 0);
	cpu_opts(&o, db, "n=65536");
	o.rounds = 3;
	o.sentinel_every = 1;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.n_ok, 2);
	CU_ASSERT_EQUAL(s.tournament_n, 2);
	CU_ASSERT_EQUAL(s.tournament_rounds, 3);
	CU_ASSERT_TRUE(s.contenders[0].median_us > 0 && s.contenders[1].median_us > 0);
	CU_ASSERT_TRUE(s.contenders[0].median_us <= s.contenders[1].median_us);
	CU_ASSERT_STRING_EQUAL(s.best_config, s.contenders[0].config);
	CU_ASSERT_DOUBLE_EQUAL(s.best_us, s.contenders[0].median_us, 1e-9);
	CU_ASSERT_TRUE(s.retime_us > 0);
	CU_ASSERT_TRUE(s.verified);
	CU_ASSERT_STRING_EQUAL(s.sentinel, "variant=ok,UNROLL=1");
	CU_ASSERT_TRUE(s.sentinel_n >= 3);	/* before, between, after */

	CU_ASSERT_EQUAL_FATAL(store_open(db, STORE_RO, &st, &e), 0);
	CU_ASSERT_EQUAL(store_measures_list(st, s.sweep_id, NULL, &m, &n, &e), 0);
	for (i = 0; i < n; i++) {
		if (!strcmp(m[i].kind, "tournament")) {
			ntour++;
			CU_ASSERT_STRING_EQUAL(m[i].status, "ok");
			if (m[i].position == 0 && m[i].round < 3)
				first[m[i].round] = strstr(m[i].config_key, "UNROLL=2") != NULL;
		}
		nsent += !strcmp(m[i].kind, "sentinel");
		nret += !strcmp(m[i].kind, "retime");
		store_measure_row_release(&m[i]);
	}
	free(m);
	store_close(st);
	CU_ASSERT_EQUAL(ntour, 6);
	CU_ASSERT_EQUAL(nsent, s.sentinel_n);
	CU_ASSERT_EQUAL(nret, 1);
	/* rotated: round 1 starts with whom round 0 ended with */
	CU_ASSERT_TRUE(first[0] >= 0 && first[1] >= 0 && first[0] != first[1]);
	CU_ASSERT_EQUAL(first[0], first[2]);
	n2 = trial_rows(db, s.sweep_id, &rows);
	for (k = 0, i = 0; i < n2; i++)
		if (!strcmp(rows[i].status, "ok")) {
			CU_ASSERT_TRUE(rows[i].tournament_us > 0);
			CU_ASSERT_TRUE(rows[i].norm_us > 0);
			k++;
		}
	CU_ASSERT_EQUAL(k, 2);
	store_trial_rows_free(rows, n2);

	/* No tournament, no re-time, nothing new: the winner was verified by
	 * an earlier run, and the summary says so. */
	o.tournament_k = 0;
	o.retime = 0;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_TRUE(s.resumed);
	CU_ASSERT_EQUAL(s.evaluated, 0);
	CU_ASSERT_TRUE(s.best_us > 0);
	CU_ASSERT_FALSE(s.verified);
	/* The same with a tournament: verified again, in this run. */
	o.tournament_k = 8;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.evaluated, 0);
	CU_ASSERT_TRUE(s.verified);
	kt_test_env_put("KTUNE_CPU_SMEM", old);
	free(old);
}

/* A config that faulted or hung is skipped by a later sweep of the same
 * device and problem, unless asked to run it again. */
static void test_faulty_remembered(void)
{
	const char *db = kt_test_path("remember.db");
	struct sweep_opts o;
	struct sweep_summary s;
	struct kt_err e = { 0 };

	cpu_opts(&o, db, "n=4096");
	o.plant = 1;
	o.tournament_k = 0;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.n_fault, 1);
	CU_ASSERT_EQUAL(s.n_timeout, 1);
	CU_ASSERT_EQUAL(s.skipped_faulty, 0);
	/* another sweep (another seed): fault and hang are not run */
	o.seed = 2;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_FALSE(s.resumed);
	CU_ASSERT_EQUAL(s.skipped_faulty, 2);
	CU_ASSERT_EQUAL(s.n_fault + s.n_timeout, 0);
	CU_ASSERT_EQUAL(s.restarts, 0);
	CU_ASSERT_TRUE(s.best_us > 0);
	o.seed = 3;
	o.retry_faulty = 1;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.skipped_faulty, 0);
	CU_ASSERT_EQUAL(s.n_fault, 1);
	CU_ASSERT_EQUAL(s.n_timeout, 1);
}

/* The set of config keys with a trial in sweep 1 of db ('|'-joined, in
 * key order; malloc'ed), the duplicate count, and the integrity check. */
static char *kill_state(const char *db, long *ntrials, long *dup, int *intact)
{
	char *keys = raw_text(db, "SELECT c.config_key || ':' || t.status FROM trials t JOIN configs c"
				  " ON c.id = t.config_id WHERE t.sweep_id = 1 ORDER BY 1");
	char *d = raw_text(db, "SELECT count(*) - count(DISTINCT config_id) FROM trials");
	char *n = raw_text(db, "SELECT count(*) FROM trials");
	char *ic = raw_text(db, "PRAGMA integrity_check");

	*dup = d ? atol(d) : -1;
	*ntrials = n ? atol(n) : -1;
	*intact = ic && strcmp(ic, "ok|") == 0;
	free(d);
	free(n);
	free(ic);
	return keys;
}

/* 1 when every key of before ('|'-joined) is in after. */
static int kept_all(const char *before, const char *after)
{
	char *copy = strdup(before ? before : ""), *save = NULL, *k;
	int ok = copy != NULL;

	for (k = copy ? strtok_r(copy, "|", &save) : NULL; k; k = strtok_r(NULL, "|", &save)) {
		char want[600];

		snprintf(want, sizeof(want), "|%s|", k);
		if (!strstr(after, want) && strncmp(after, want + 1, strlen(want) - 1) != 0)
			ok = 0;
	}
	free(copy);
	return ok;
}

/* `ktune sweep` killed with SIGKILL twenty times at random moments (a
 * seeded draw over the span of one uncut run on a scratch file, so a slow
 * build such as the sanitizer one is cut as often mid-sweep as a fast one),
 * started again each time: no trial recorded before a kill is lost or
 * changed, none is there twice, the file stays intact, and the last run
 * resumes the one sweep and completes it. bench/reliability_gpu.py does the
 * same on a GPU. The timeout ends the planted hang early in each run, yet
 * must stay well above what the ok config takes, which the sanitizers
 * slow several-fold. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define KILL20_TIMEOUT "4"
#else
#define KILL20_TIMEOUT "1"
#endif
static void test_kill_resume_20(void)
{
	const char *db = kt_test_path("kill20.db");
	char *argv[] = { (char *)kt_test_ktune(), "sweep", "--family", "selftest", "--shape",
			 "n=8388608", "--plant", "--worker-backend", "cpu", "--timeout", KILL20_TIMEOUT,
			 "--rounds", "3", "--db", (char *)db, "--json", NULL };
	uint64_t rng = 20;
	char *before = NULL, *out = NULL;
	long ntrials = 0, dup = 0, killed = 0, last = -1;
	int i, intact, status, rc, stall = 0;
	json_t *j;
	double span;

	{
		const char *scratch = kt_test_path("kill20-uncut.db");
		char *uncut[sizeof(argv) / sizeof(argv[0])];
		size_t k;

		for (k = 0; k < sizeof(argv) / sizeof(argv[0]); k++)
			uncut[k] = argv[k] == db ? (char *)scratch : argv[k];
		span = kt_clock_s();
		rc = kt_test_exec(uncut, NULL, &out, 300);
		span = kt_clock_s() - span;
		CU_ASSERT_EQUAL_FATAL(rc, 0);
		free(out);
		out = NULL;
		printf("\n  one uncut run: %.2f s", span);
	}
	for (i = 0; i < 20; i++) {
		struct timespec ts;
		double delay;
		pid_t pid;
		char *now;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		/* until two trials are recorded, each kill that found no new
		 * one moves the next later (up to 90% of the span): a resumed
		 * run must get past its start and the next trial, the planted
		 * hang's timeout at worst, or a slow build (the sanitizers')
		 * would be cut before it every time */
		delay = span * fmin(0.9, (0.03 + 0.45 * (double)(rng >> 11) * 0x1.0p-53) * (1 + stall));
		pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			dup2(fd, 2);
			execv(argv[0], argv);
			_exit(127);
		}
		ts.tv_sec = (time_t)delay;
		ts.tv_nsec = (long)((delay - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		/* killed, or done before the kill came */
		CU_ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
		if (access(db, F_OK) != 0) {
			stall++;	/* killed before the database existed */
			continue;
		}
		now = kill_state(db, &ntrials, &dup, &intact);
		stall = ntrials > last || ntrials >= 2 ? 0 : stall + 1;
		last = ntrials;
		CU_ASSERT_PTR_NOT_NULL_FATAL(now);
		CU_ASSERT_TRUE(intact);
		CU_ASSERT_EQUAL(dup, 0);
		CU_ASSERT_TRUE(kept_all(before, now));
		free(before);
		before = now;
	}
	/* the killed runs got somewhere: trials were recorded between kills */
	printf("\n  before the last run: %ld trials", ntrials);
	CU_ASSERT_TRUE(ntrials >= 2);
	rc = kt_test_exec(argv, NULL, &out, 300);
	CU_ASSERT_EQUAL(rc, 0);
	j = out && strchr(out, '{') ? json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL) : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	{
		long planned = (long)json_integer_value(
			json_object_get(json_object_get(j, "counts"), "planned"));
		char *now = kill_state(db, &ntrials, &dup, &intact), *ns;

		CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "sweep_id")), 1);
		CU_ASSERT_TRUE(json_is_true(json_object_get(j, "resumed")));
		CU_ASSERT_TRUE(json_is_true(json_object_get(j, "verified")));
		CU_ASSERT_EQUAL(ntrials, planned);
		CU_ASSERT_EQUAL(dup, 0);
		CU_ASSERT_TRUE(intact);
		CU_ASSERT_TRUE(kept_all(before, now));
		/* kills landed mid-run (once every config has its trial, a run
		 * -- tournament and re-time only -- may finish before its kill) */
		CU_ASSERT_TRUE(killed >= 5);
		ns = raw_text(db, "SELECT count(*) FROM sweeps");
		CU_ASSERT_STRING_EQUAL(ns, "1|");
		printf("\n  %ld of 20 runs killed; %ld trials of %ld planned, none lost, none twice",
		       killed, ntrials, planned);
		free(ns);
		free(now);
	}
	json_decref(j);
	free(out);
	free(before);
}

/* ---- the CUDA backend on a stand-in driver (tests/fake_cuda.c) ---- */

static const char *fake_cuda_dir(void)
{
	static char path[4096];

	return beside_exe(path, sizeof(path), "fake-cuda");
}

/* One sweep of the planted selftest configs through the CUDA backend on the
 * stand-in driver, verifying on the host ("1") or with the compare kernels
 * ("0", KTUNE_HOST_COMPARE). */
static void fake_driver_sweep(const char *host_compare, const char *db)
{
	struct sweep_opts o;
	struct sweep_summary s;
	struct store_trial_row *rows;
	struct kt_err e = { 0 };
	int n, i, ok = 0, seen = 0;

	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("KTUNE_HOST_COMPARE", host_compare), 0);
	cpu_opts(&o, db, "n=4096");
	o.worker.backend = WORKER_BACKEND_CUDA;
	o.plant = 1;
	o.baseline = 0;
	o.rounds = 2;
	if (sweep_run(&o, &s, &e) != 0) {
		fprintf(stderr, "\n    sweep on the fake driver (KTUNE_HOST_COMPARE=%s): %s\n",
			host_compare, e.msg);
		CU_FAIL("sweep on the fake driver");
		return;
	}
	CU_ASSERT_STRING_EQUAL(s.device, "Fake sm_90 (CPU)");
	CU_ASSERT_TRUE(s.verified);
	CU_ASSERT_PTR_NOT_NULL(strstr(s.best_config, "variant=ok,"));
	CU_ASSERT_TRUE(s.nvml);
	n = trial_rows(db, s.sweep_id, &rows);
	CU_ASSERT_EQUAL(n, s.evaluated);
	for (i = 0; i < n; i++) {
		const char *c = rows[i].config_key, *st = rows[i].status,
			   *m = rows[i].message ? rows[i].message : "";
		const char *want = NULL, *says = NULL;
		int bit = 0;

		if (strstr(c, "variant=ok,")) {
			want = "ok", bit = 1;
			ok++;
			CU_ASSERT_EQUAL(rows[i].rel_err, 0.0);
			CU_ASSERT_EQUAL(rows[i].cond.sm_mhz_after, 1980);
		} else if (strstr(c, "variant=wrong,")) {
			want = "wrong", says = "local bound", bit = 2;
		} else if (strstr(c, "sparse_wrong")) {
			want = "wrong", says = "local bound", bit = 4;
		} else if (strstr(c, "oob_write")) {
			want = "wrong", says = "512 bytes of the guard regions", bit = 8;
		} else if (strstr(c, "variant=fault,")) {
			want = "fault", says = "ILLEGAL_ADDRESS", bit = 16;
		} else if (strstr(c, "variant=hang,")) {
			want = "timeout", bit = 32;
		} else if (strstr(c, "compile_error")) {
			want = "compile_error", bit = 64;
		} else if (strstr(c, "smem_excess")) {
			want = "launch_error", says = "shared memory", bit = 128;
		} else if (strstr(c, "variant=launch_error,")) {
			want = "launch_error", says = "cuLaunchKernel", bit = 256;
		}
		if (!want)
			continue;
		seen |= bit;
		if (strcmp(st, want) != 0 || (says && !strstr(m, says)))
			fprintf(stderr, "\n    KTUNE_HOST_COMPARE=%s %s: %s (%s), want %s%s%s\n",
				host_compare, c, st, m, want, says ? " saying " : "", says ? says : "");
		CU_ASSERT_STRING_EQUAL(st, want);
		if (says)
			CU_ASSERT_PTR_NOT_NULL(strstr(m, says));
	}
	CU_ASSERT_EQUAL(seen, 511);
	CU_ASSERT_EQUAL(ok, 2);
	store_trial_rows_free(rows, n);
}

/* tuner/cuda.c itself -- its allocations, guard regions, uploads and
 * downloads, launches, events, compare kernels and failure paths -- on a
 * CPU stand-in for libcuda.so.1 that refuses any copy or kernel access
 * outside a live allocation: each planted config gets its status, the good
 * one wins, and every trial records the (fake) NVML's clocks, verifying on
 * the host and with the compare kernels. The first GPU run of the guard
 * regions failed every trial by reading past an input's end; this is the
 * check that would have caught it. */
static void test_cuda_backend_on_fake_driver(void)
{
	static const char *const names[] = { "LD_LIBRARY_PATH", "KTUNE_HOST_COMPARE",
					      "KTUNE_NVML_LIB", "KTUNE_FAKE_NVML_SM" };
	char *old[4];
	char ld[8400];
	int k;

	for (k = 0; k < 4; k++)
		old[k] = kt_test_env_save(names[k]);
	snprintf(ld, sizeof(ld), "%s%s%.4000s", fake_cuda_dir(), old[0] ? ":" : "",
		 old[0] ? old[0] : "");
	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("LD_LIBRARY_PATH", ld), 0);
	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("KTUNE_NVML_LIB", fake_nvml()), 0);
	CU_ASSERT_EQUAL_FATAL(kt_test_env_put("KTUNE_FAKE_NVML_SM", "1980"), 0);
	fake_driver_sweep("1", kt_test_path("fake-cuda-host.db"));
	fake_driver_sweep("0", kt_test_path("fake-cuda-gpu.db"));
	for (k = 0; k < 4; k++) {
		kt_test_env_put(names[k], old[k]);
		free(old[k]);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("store schema 2", NULL, NULL);
	CU_add_test(s, "a version-1 file is migrated to a new file's schema", test_migrate_v1);
	CU_add_test(s, "conditions, tournament times, measurements", test_rows_v2);
	CU_add_test(s, "faulty configs of other sweeps, the family's trials",
		    test_faulty_and_family);
	s = CU_add_suite("verification per output, with a local check", NULL, NULL);
	CU_add_test(s, "88 zeroed of 2^20 pass the pooled L2, fail the local check",
		    test_local_check_catches_sparse_zeros);
	CU_add_test(s, "dq, dk and dv judged one by one", test_outputs_judged_separately);
	CU_add_test(s, "tolerances follow K, the dtype and the count", test_tolerance_from_problem);
	CU_add_test(s, "guard bytes counted", test_guard_count);
	s = CU_add_suite("sweep on the CPU test device: trust", NULL, NULL);
	CU_add_test(s, "planted configs each get their status", test_planted_statuses);
	CU_add_test(s, "NVML conditions per trial, throttled marked", test_conditions_recorded);
	CU_add_test(s, "tournament, fresh re-time, sentinel, verified", test_tournament_and_sentinel);
	CU_add_test(s, "faulty configs remembered, retried when asked", test_faulty_remembered);
	CU_add_test(s, "20 kill -9 at random moments, then a resume completes", test_kill_resume_20);
	s = CU_add_suite("the CUDA backend on a stand-in driver (CPU)", NULL, NULL);
	CU_add_test(s, "planted configs each get their status, host and GPU compare",
		    test_cuda_backend_on_fake_driver);
	return kt_test_main();
}
