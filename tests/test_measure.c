/*
 * test_measure.c -- what makes a winner trustworthy, without a GPU: the
 * store's schema 2 (measuring conditions, tournament and drift columns, the
 * measurements table, a version-1 file migrated to the same schema a new
 * file gets, the tournament-first winners view), per-output verification
 * with its local check (a planted near-tolerance corruption is caught where
 * the pooled relative L2 let it pass), the conditions a fake NVML reports,
 * and the sweep's tournament, sentinel and fault memory on the CPU test
 * device.
 */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "db/store.h"
#include "testutil.h"

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
	return kt_test_main();
}
