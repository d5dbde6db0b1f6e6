/* test_store.c -- the SQLite store and ktune merge, on real files (no GPU). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
		*len = (size_t)n;
	fclose(f);
	return buf;
}

/* 1 when path holds exactly (data, len). */
static int file_is(const char *path, const char *data, size_t len)
{
	size_t n;
	char *now = slurp(path, &n);
	int same = now && n == len && memcmp(now, data, len) == 0;

	free(now);
	return same;
}

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* Runs SQL on a file with a plain SQLite connection (no ktune rules). */
static int raw_sql(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(path, &db) == SQLITE_OK &&
		 sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;

	sqlite3_close(db);
	return rc ? 0 : -1;
}

static long long raw_count(struct store *st, const char *sql)
{
	sqlite3_stmt *s = NULL;
	long long v = -1;

	if (sqlite3_prepare_v2(store_sqlite(st), sql, -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static void fill_device(struct store_device *d, const char *uuid, const char *name,
			const char *arch)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->arch, sizeof(d->arch), "%s", arch);
	d->sms = 132;
	d->l2_bytes = 50L << 20;
	d->smem_optin = 232448;
	d->clock_mhz = 1980;
	d->mem_clock_mhz = 2619;
	snprintf(d->driver, sizeof(d->driver), "580.95");
	snprintf(d->cuda, sizeof(d->cuda), "13.0");
	snprintf(d->nvrtc, sizeof(d->nvrtc), "13.0");
}

static int64_t add_device(struct store *st, const char *uuid, const char *name, const char *arch)
{
	struct store_device d;
	struct kt_err e = { 0 };

	fill_device(&d, uuid, name, arch);
	CU_ASSERT_EQUAL_FATAL(store_device_upsert(st, &d, &e), 0);
	return d.id;
}

static int64_t add_problem(struct store *st, const char *family, const char *key)
{
	int64_t id = 0;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(store_problem_intern(st, family, key, "{\"tokens\":64}", &id, &e), 0);
	return id;
}

static int64_t add_config(struct store *st, const char *family, const char *key)
{
	int64_t id = 0;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(store_config_intern(st, family, key, "{\"bm\":64}", &id, &e), 0);
	return id;
}

static int64_t begin(struct store *st, int64_t dev, int64_t prob, const char *opts, int *resumed)
{
	struct store_sweep_spec spec = { dev, prob, "exhaustive", opts, "{\"host\":\"test\"}", 8 };
	struct kt_err e = { 0 };
	int64_t id = 0;
	int r = -1;

	if (store_sweep_begin(st, &spec, &id, &r, &e) != 0)
		fprintf(stderr, "store_sweep_begin: %s\n", e.msg);
	CU_ASSERT_TRUE_FATAL(id > 0);
	if (resumed)
		*resumed = r;
	return id;
}

static int add_trial(struct store *st, int64_t sweep, int64_t config, const char *status,
		     double median, struct kt_err *e)
{
	struct store_trial t;

	memset(&t, 0, sizeof(t));
	t.sweep_id = sweep;
	t.config_id = config;
	t.status = status;
	t.median_us = median;
	t.min_us = median * 0.98;
	t.p90_us = median * 1.05;
	t.spread = 0.01;
	t.reps = 50;
	t.rel_err = strcmp(status, "ok") == 0 ? 1e-3 : -1;
	t.compile_ms = 120.5;
	t.binary_key = "0123456789abcdef0123456789abcdef";
	t.message = strcmp(status, "ok") == 0 ? NULL : "mismatch";
	t.log = strcmp(status, "compile_error") == 0 ? "error: expected ;" : NULL;
	return store_trial_add(st, &t, e);
}

/* ---- open and migrations ---- */

static void test_open_new_file(void)
{
	const char *path = kt_test_path("new.db");
	struct store *st = NULL;
	struct kt_err e = { 0 };

	st = open_rw(path);
	CU_ASSERT_EQUAL(store_version(st), STORE_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(raw_count(st, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(raw_count(st, "PRAGMA foreign_keys"), 1);
	CU_ASSERT_EQUAL(raw_count(st, "PRAGMA synchronous"), 1);	/* NORMAL */
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sqlite_master WHERE name IN"
				  " ('devices','problems','configs','sweeps','trials',"
				  "'binaries','baselines','winners')"), 8);
	{
		sqlite3_stmt *s = NULL;

		CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(store_sqlite(st), "PRAGMA journal_mode",
							 -1, &s, NULL), SQLITE_OK);
		CU_ASSERT_EQUAL(sqlite3_step(s), SQLITE_ROW);
		CU_ASSERT_STRING_EQUAL(sqlite3_column_text(s, 0), "wal");
		sqlite3_finalize(s);
	}
	store_close(st);

	/* Reopened, nothing is migrated twice; read-only works too. */
	st = open_rw(path);
	CU_ASSERT_EQUAL(store_version(st), STORE_SCHEMA_VERSION);
	store_close(st);
	st = NULL;
	CU_ASSERT_EQUAL(store_open(path, STORE_RO, &st, &e), 0);
	CU_ASSERT_EQUAL(e.code, KT_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_EQUAL(store_version(st), STORE_SCHEMA_VERSION);
	store_close(st);
}

static void test_open_empty_file_migrates(void)
{
	const char *path = kt_test_path("empty.db");
	struct store *st;

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, "", 0), 0);
	st = open_rw(path);
	CU_ASSERT_EQUAL(store_version(st), STORE_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices"), 0);
	store_close(st);
}

static void test_open_ro_missing(void)
{
	const char *path = kt_test_path("missing.db");
	struct store *st = NULL;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL(store_open(path, STORE_RO, &st, &e), -1);
	CU_ASSERT_PTR_NULL(st);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);
	CU_ASSERT_FALSE(exists(path));
}

static void test_open_ro_never_writes(void)
{
	const char *path = kt_test_path("ro.db");
	struct store *st;
	struct kt_err e = { 0 };
	struct store_device d;

	store_close(open_rw(path));
	st = NULL;
	CU_ASSERT_EQUAL_FATAL(store_open(path, STORE_RO, &st, &e), 0);
	fill_device(&d, "GPU-ro", "ro", "sm_90");
	CU_ASSERT_EQUAL(store_device_upsert(st, &d, &e), -1);
	CU_ASSERT_NOT_EQUAL(e.code, KT_OK);
	store_close(st);
}

/* Opens path both ways and expects code each time, with the file unchanged. */
static void expect_refused(const char *path, enum kt_errcode code, const char *msg_part)
{
	size_t len;
	char *before = slurp(path, &len);
	struct store *st = NULL;
	struct kt_err e = { 0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	CU_ASSERT_EQUAL(store_open(path, STORE_RW, &st, &e), -1);
	CU_ASSERT_PTR_NULL(st);
	CU_ASSERT_EQUAL(e.code, code);
	if (msg_part && !strstr(e.msg, msg_part))
		fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, msg_part);
	CU_ASSERT(!msg_part || strstr(e.msg, msg_part) != NULL);
	CU_ASSERT_TRUE(file_is(path, before, len));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(store_open(path, STORE_RO, &st, &e), -1);
	CU_ASSERT_EQUAL(e.code, code);
	CU_ASSERT_TRUE(file_is(path, before, len));
	free(before);
}

static void test_newer_schema_refused(void)
{
	const char *path = kt_test_path("newer.db");

	CU_ASSERT_EQUAL_FATAL(raw_sql(path, "CREATE TABLE future (x); PRAGMA user_version = 99;"), 0);
	expect_refused(path, KT_ESCHEMA,
		       "database schema version 99 is newer than this ktune (2); upgrade ktune");
}

static void test_text_file_refused(void)
{
	const char *path = kt_test_path("x.db");
	const char text[] = "these are my notes, not a database\n";

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, text, sizeof(text) - 1), 0);
	expect_refused(path, KT_ECORRUPT, "not a ktune database");
	/* A longer text file, past SQLite's 100-byte header. */
	{
		char big[4096];

		memset(big, 'a', sizeof(big));
		CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, big, sizeof(big)), 0);
		expect_refused(path, KT_ECORRUPT, "not a ktune database");
	}
}

static void test_foreign_sqlite_refused(void)
{
	const char *p0 = kt_test_path("foreign0.db");
	const char *p1 = kt_test_path("foreign1.db");

	/* Someone else's tables, no version. */
	CU_ASSERT_EQUAL_FATAL(raw_sql(p0, "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('hi');"), 0);
	expect_refused(p0, KT_ECORRUPT, "not a ktune one");
	/* A version of ours but none of our tables. */
	CU_ASSERT_EQUAL_FATAL(raw_sql(p1, "CREATE TABLE notes (t TEXT); PRAGMA user_version = 1;"), 0);
	expect_refused(p1, KT_ECORRUPT, "not a ktune database");
}

static void test_garbage_and_truncated_refused(void)
{
	const char *garbage = kt_test_path("garbage.db");
	const char *good = kt_test_path("good.db");
	const char *trunc = kt_test_path("trunc.db");
	char buf[8192];
	char *whole;
	size_t len, i;
	struct store *st;
	int64_t dev, prob;
	char key[32];

	/* SQLite's magic, then noise. */
	srand(7);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(rand() & 0xff);
	memcpy(buf, "SQLite format 3", 16);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(garbage, buf, sizeof(buf)), 0);
	expect_refused(garbage, KT_ECORRUPT, NULL);

	/* A real ktune file of many pages, cut in half. */
	st = open_rw(good);
	dev = add_device(st, "GPU-trunc", "T", "sm_90");
	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "tokens=%zu", i);
		prob = add_problem(st, "dense", key);
		CU_ASSERT(prob > 0 && dev > 0);
	}
	store_close(st);	/* the last close checkpoints the WAL into the file */
	CU_ASSERT_FALSE(exists(kt_test_path("good.db-wal")));
	whole = slurp(good, &len);
	CU_ASSERT_FATAL(whole != NULL && len > 4 * 4096);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(trunc, whole, len / 2), 0);
	expect_refused(trunc, KT_ECORRUPT, "damaged");
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(trunc, whole, 2000), 0);
	expect_refused(trunc, KT_ECORRUPT, NULL);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(trunc, whole, 60), 0);
	expect_refused(trunc, KT_ECORRUPT, NULL);
	free(whole);
}

/* ---- round trips ---- */

/* store_tx_*: a begin inside a begin is a savepoint; store functions with
 * a transaction of their own (store_sweep_begin) nest inside a caller's;
 * each level ends on its own, and the outermost decides. */
static void test_nested_tx(void)
{
	struct store *st = open_rw(kt_test_path("nested.db"));
	struct kt_err e = { 0 };
	int64_t sweep;
	int resumed;

	/* inner rolled back, outer committed: only the outer's rows */
	CU_ASSERT_EQUAL_FATAL(store_tx_begin(st, &e), 0);
	add_device(st, "GPU-outer", "NVIDIA H200", "sm_90");
	CU_ASSERT_EQUAL_FATAL(store_tx_begin(st, &e), 0);
	add_device(st, "GPU-inner", "NVIDIA H200", "sm_90");
	store_tx_rollback(st);
	CU_ASSERT_EQUAL(store_tx_commit(st, &e), 0);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices WHERE uuid = 'GPU-outer'"), 1);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices WHERE uuid = 'GPU-inner'"), 0);

	/* inner committed (a sweep begun inside), outer rolled back: nothing */
	CU_ASSERT_EQUAL_FATAL(store_tx_begin(st, &e), 0);
	{
		struct store_sweep_spec spec = {
			.device_id = add_device(st, "GPU-gone", "NVIDIA H200", "sm_90"),
			.problem_id = add_problem(st, "dense", "tokens=64,in=64,out=64"),
			.strategy = "exhaustive", .options_key = "nested", .provenance_json = "{}",
			.planned = 1,
		};

		CU_ASSERT_EQUAL(store_sweep_begin(st, &spec, &sweep, &resumed, &e), 0);
	}
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps"), 1);
	store_tx_rollback(st);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps"), 0);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices WHERE uuid = 'GPU-gone'"), 0);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM problems"), 0);

	/* every level ended: the next begin is a transaction of its own */
	CU_ASSERT(sqlite3_get_autocommit(store_sqlite(st)) != 0);
	CU_ASSERT_EQUAL(store_tx_begin(st, &e), 0);
	add_device(st, "GPU-after", "NVIDIA H200", "sm_90");
	CU_ASSERT_EQUAL(store_tx_commit(st, &e), 0);
	CU_ASSERT(sqlite3_get_autocommit(store_sqlite(st)) != 0);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices WHERE uuid = 'GPU-after'"), 1);
	CU_ASSERT_EQUAL(e.code, KT_OK);
	store_close(st);
}

static void test_devices(void)
{
	struct store *st = open_rw(kt_test_path("devices.db"));
	struct store_device d, got, *all = NULL;
	struct kt_err e = { 0 };
	char idtext[32];
	int64_t id1, id2;
	int n = 0;

	fill_device(&d, "GPU-aaaa", "NVIDIA H200", "sm_90");
	CU_ASSERT_EQUAL(store_device_upsert(st, &d, &e), 0);
	id1 = d.id;
	CU_ASSERT(id1 > 0);
	id2 = add_device(st, "GPU-bbbb", "NVIDIA A100", "sm_80");
	CU_ASSERT(id2 > 0 && id2 != id1);

	/* Same uuid: same row, fields refreshed. */
	snprintf(d.driver, sizeof(d.driver), "590.10");
	d.clock_mhz = 1755;
	d.id = 0;
	CU_ASSERT_EQUAL(store_device_upsert(st, &d, &e), 0);
	CU_ASSERT_EQUAL(d.id, id1);

	CU_ASSERT_EQUAL(store_devices_list(st, &all, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(all[0].id, id1);
	CU_ASSERT_STRING_EQUAL(all[0].uuid, "GPU-aaaa");
	CU_ASSERT_STRING_EQUAL(all[0].name, "NVIDIA H200");
	CU_ASSERT_STRING_EQUAL(all[0].arch, "sm_90");
	CU_ASSERT_STRING_EQUAL(all[0].driver, "590.10");
	CU_ASSERT_EQUAL(all[0].clock_mhz, 1755);
	CU_ASSERT_EQUAL(all[0].sms, d.sms);
	CU_ASSERT_EQUAL(all[0].l2_bytes, d.l2_bytes);
	CU_ASSERT_EQUAL(all[0].smem_optin, d.smem_optin);
	CU_ASSERT_EQUAL(all[0].mem_clock_mhz, d.mem_clock_mhz);
	CU_ASSERT_STRING_EQUAL(all[0].cuda, "13.0");
	CU_ASSERT_STRING_EQUAL(all[0].nvrtc, "13.0");
	CU_ASSERT_STRING_EQUAL(all[1].uuid, "GPU-bbbb");
	free(all);

	CU_ASSERT_EQUAL(store_device_find(st, "GPU-bbbb", &got, &e), 1);
	CU_ASSERT_EQUAL(got.id, id2);
	snprintf(idtext, sizeof(idtext), "%lld", (long long)id1);
	CU_ASSERT_EQUAL(store_device_find(st, idtext, &got, &e), 1);
	CU_ASSERT_STRING_EQUAL(got.uuid, "GPU-aaaa");
	CU_ASSERT_EQUAL(store_device_find(st, "GPU-none", &got, &e), 0);
	CU_ASSERT_EQUAL(store_device_find(st, "999", &got, &e), 0);
	CU_ASSERT_EQUAL(e.code, KT_OK);

	/* No uuid: refused. */
	memset(&d, 0, sizeof(d));
	CU_ASSERT_EQUAL(store_device_upsert(st, &d, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	store_close(st);
}

static void test_intern(void)
{
	struct store *st = open_rw(kt_test_path("intern.db"));
	int64_t p1, p2, p3, c1, c2, c3;

	p1 = add_problem(st, "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024");
	p2 = add_problem(st, "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024");
	p3 = add_problem(st, "monarch", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024");
	CU_ASSERT(p1 > 0);
	CU_ASSERT_EQUAL(p1, p2);
	CU_ASSERT_NOT_EQUAL(p1, p3);
	c1 = add_config(st, "blast", "partial_bmm:bm=128,bn=64");
	c2 = add_config(st, "blast", "partial_bmm:bm=128,bn=64");
	c3 = add_config(st, "blast", "partial_bmm:bm=64,bn=64");
	CU_ASSERT(c1 > 0);
	CU_ASSERT_EQUAL(c1, c2);
	CU_ASSERT_NOT_EQUAL(c1, c3);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM problems"), 2);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM configs"), 2);
	store_close(st);
}

static void test_sweeps(void)
{
	struct store *st = open_rw(kt_test_path("sweeps.db"));
	struct store_sweep sw, *all = NULL;
	struct kt_err e = { 0 };
	int64_t dev, prob, s1, s2;
	int resumed = -1, n = 0, i;
	char host[64];

	dev = add_device(st, "GPU-s", "H200", "sm_90");
	prob = add_problem(st, "dense", "tokens=64,in=128,out=128");
	s1 = begin(st, dev, prob, "budget=0,seed=1", &resumed);
	CU_ASSERT_EQUAL(resumed, 0);
	CU_ASSERT_EQUAL_FATAL(store_sweep_get(st, s1, &sw, &e), 0);
	CU_ASSERT_EQUAL(sw.id, s1);
	CU_ASSERT_EQUAL(sw.device_id, dev);
	CU_ASSERT_EQUAL(sw.problem_id, prob);
	CU_ASSERT_STRING_EQUAL(sw.family, "dense");
	CU_ASSERT_STRING_EQUAL(sw.shape_key, "tokens=64,in=128,out=128");
	CU_ASSERT_STRING_EQUAL(sw.strategy, "exhaustive");
	CU_ASSERT_STRING_EQUAL(sw.options_key, "budget=0,seed=1");
	CU_ASSERT_STRING_EQUAL(sw.provenance_json, "{\"host\":\"test\"}");
	CU_ASSERT_EQUAL(sw.status, STORE_SWEEP_RUNNING);
	CU_ASSERT_EQUAL(sw.planned, 8);
	CU_ASSERT_EQUAL(sw.done, 0);
	CU_ASSERT(sw.started > 1.6e9);
	CU_ASSERT_EQUAL(sw.finished, 0);
	CU_ASSERT_EQUAL(sw.owner_pid, (int)getpid());
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = 0;
	CU_ASSERT_STRING_EQUAL(sw.owner_host, host);
	store_sweep_release(&sw);
	CU_ASSERT_PTR_NULL(sw.options_key);

	CU_ASSERT_EQUAL(store_sweep_end(st, s1, STORE_SWEEP_DONE, &e), 0);
	CU_ASSERT_EQUAL_FATAL(store_sweep_get(st, s1, &sw, &e), 0);
	CU_ASSERT_EQUAL(sw.status, STORE_SWEEP_DONE);
	CU_ASSERT(sw.finished >= sw.started);
	store_sweep_release(&sw);

	s2 = begin(st, dev, prob, "budget=100,seed=1", &resumed);
	CU_ASSERT_EQUAL(resumed, 0);
	CU_ASSERT_NOT_EQUAL(s1, s2);
	CU_ASSERT_EQUAL(store_sweep_end(st, s2, STORE_SWEEP_INTERRUPTED, &e), 0);

	CU_ASSERT_EQUAL(store_sweeps_list(st, 0, &all, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(all[0].id, s2);		/* newest first */
	CU_ASSERT_EQUAL(all[0].status, STORE_SWEEP_INTERRUPTED);
	CU_ASSERT_EQUAL(all[1].id, s1);
	for (i = 0; i < n; i++)
		store_sweep_release(&all[i]);
	free(all);
	CU_ASSERT_EQUAL(store_sweeps_list(st, 1, &all, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 1);
	for (i = 0; i < n; i++)
		store_sweep_release(&all[i]);
	free(all);

	CU_ASSERT_EQUAL(store_sweep_get(st, 12345, &sw, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(store_sweep_end(st, 12345, STORE_SWEEP_DONE, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);

	CU_ASSERT_STRING_EQUAL(store_sweep_status_name(STORE_SWEEP_RUNNING), "running");
	CU_ASSERT_STRING_EQUAL(store_sweep_status_name(STORE_SWEEP_DONE), "done");
	CU_ASSERT_STRING_EQUAL(store_sweep_status_name(STORE_SWEEP_INTERRUPTED), "interrupted");
	CU_ASSERT_STRING_EQUAL(store_sweep_status_name(STORE_SWEEP_FAILED), "failed");
	store_close(st);
}

struct keys {
	int n;
	char key[16][64];
};

static void collect_key(const char *config_key, void *arg)
{
	struct keys *k = arg;

	if (k->n < 16)
		snprintf(k->key[k->n++], sizeof(k->key[0]), "%s", config_key);
}

static int has_key(const struct keys *k, const char *key)
{
	int i;

	for (i = 0; i < k->n; i++)
		if (strcmp(k->key[i], key) == 0)
			return 1;
	return 0;
}

static void test_trials(void)
{
	struct store *st = open_rw(kt_test_path("trials.db"));
	struct store_trial_row *rows = NULL;
	struct kt_err e = { 0 };
	struct keys k = { 0 };
	int64_t dev, prob, sw, c[4];
	int n = 0, i;

	dev = add_device(st, "GPU-t", "H200", "sm_90");
	prob = add_problem(st, "dense", "tokens=64,in=128,out=128");
	sw = begin(st, dev, prob, "o", NULL);
	c[0] = add_config(st, "dense", "a");
	c[1] = add_config(st, "dense", "b");
	c[2] = add_config(st, "dense", "c");
	c[3] = add_config(st, "dense", "d");
	CU_ASSERT_EQUAL(add_trial(st, sw, c[0], "ok", 20.0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, sw, c[1], "compile_error", 0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, sw, c[2], "ok", 10.0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, sw, c[3], "wrong", 5.0, &e), 0);
	CU_ASSERT_EQUAL(e.code, KT_OK);

	/* Evaluating anything twice is refused. */
	CU_ASSERT_EQUAL(add_trial(st, sw, c[0], "ok", 19.0, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ECONFLICT);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(add_trial(st, sw, add_config(st, "dense", "e"), "excellent", 1.0, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(add_trial(st, 9999, c[0], "ok", 1.0, &e), -1);
	CU_ASSERT_NOT_EQUAL(e.code, KT_OK);
	kt_err_clear(&e);

	CU_ASSERT_EQUAL(store_trials_done(st, sw, collect_key, &k, &e), 0);
	CU_ASSERT_EQUAL(k.n, 4);
	CU_ASSERT_TRUE(has_key(&k, "a") && has_key(&k, "b") && has_key(&k, "c") && has_key(&k, "d"));

	CU_ASSERT_EQUAL(store_trials_list(st, sw, 0, &rows, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	/* ok first, fastest first; then the rest. */
	CU_ASSERT_STRING_EQUAL(rows[0].config_key, "c");
	CU_ASSERT_STRING_EQUAL(rows[0].status, "ok");
	CU_ASSERT_DOUBLE_EQUAL(rows[0].median_us, 10.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].min_us, 9.8, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].p90_us, 10.5, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].spread, 0.01, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].rel_err, 1e-3, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].compile_ms, 120.5, 1e-9);
	CU_ASSERT_EQUAL(rows[0].reps, 50);
	CU_ASSERT_EQUAL(rows[0].sweep_id, sw);
	CU_ASSERT_STRING_EQUAL(rows[0].params_json, "{\"bm\":64}");
	CU_ASSERT_PTR_NULL(rows[0].message);
	CU_ASSERT_STRING_EQUAL(rows[1].config_key, "a");
	for (i = 2; i < 4; i++) {
		CU_ASSERT_STRING_NOT_EQUAL(rows[i].status, "ok");
		/* No timing is kept for a failed candidate, however fast. */
		CU_ASSERT_EQUAL(rows[i].median_us, 0);
		CU_ASSERT_EQUAL(rows[i].rel_err, -1);
		CU_ASSERT_STRING_EQUAL(rows[i].message, "mismatch");
		if (strcmp(rows[i].status, "compile_error") == 0)
			CU_ASSERT_STRING_EQUAL(rows[i].log, "error: expected ;");
	}
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);

	CU_ASSERT_EQUAL(store_trials_list(st, sw, 1, &rows, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 1);
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);

	/* Re-timing of the winner. */
	CU_ASSERT_EQUAL(store_retime_set(st, sw, "c", 10.25, &e), 0);
	CU_ASSERT_EQUAL(store_trials_list(st, sw, 1, &rows, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_DOUBLE_EQUAL(rows[0].retime_us, 10.25, 1e-12);
	store_trial_row_release(&rows[0]);
	free(rows);
	CU_ASSERT_EQUAL(store_retime_set(st, sw, "nope", 1.0, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);

	/* The sweep counts its trials. */
	{
		struct store_sweep s;

		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(store_sweep_get(st, sw, &s, &e), 0);
		CU_ASSERT_EQUAL(s.done, 4);
		store_sweep_release(&s);
	}
	store_close(st);
}

/* ---- resume and ownership ---- */

/* In a child: begins the sweep, records `ntrials` configs and dies without
 * ending it or closing the store, the way a kill -9 would leave it. */
static void crash_child(const char *path, int ntrials)
{
	struct store *st = NULL;
	struct kt_err e = { 0 };
	struct store_device d;
	struct store_sweep_spec spec = { 0, 0, "exhaustive", "budget=0", "{}", 8 };
	int64_t sw, cfg;
	int resumed, i;
	char key[16];

	if (store_open(path, STORE_RW, &st, &e) != 0)
		_exit(10);
	fill_device(&d, "GPU-crash", "H200", "sm_90");
	if (store_device_upsert(st, &d, &e) != 0 ||
	    store_problem_intern(st, "dense", "tokens=64", "{}", &spec.problem_id, &e) != 0)
		_exit(11);
	spec.device_id = d.id;
	if (store_sweep_begin(st, &spec, &sw, &resumed, &e) != 0 || resumed)
		_exit(12);
	for (i = 0; i < ntrials; i++) {
		snprintf(key, sizeof(key), "cfg%d", i);
		if (store_config_intern(st, "dense", key, "{}", &cfg, &e) != 0 ||
		    add_trial(st, sw, cfg, i % 2 ? "wrong" : "ok", 10.0 + i, &e) != 0)
			_exit(13);
	}
	_exit(0);
}

static void test_resume_after_crash(void)
{
	const char *path = kt_test_path("resume.db");
	struct store *st;
	struct store_sweep s;
	struct kt_err e = { 0 };
	struct keys k = { 0 };
	struct store_device d;
	int64_t sw, sw2, sw3, prob;
	int status = -1, resumed = -1;
	pid_t pid;

	store_close(open_rw(path));	/* the schema exists before the child runs */
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		crash_child(path, 3);
	CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE_FATAL(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	st = open_rw(path);
	CU_ASSERT_EQUAL_FATAL(store_device_find(st, "GPU-crash", &d, &e), 1);
	prob = add_problem(st, "dense", "tokens=64");
	sw = begin(st, d.id, prob, "budget=0", &resumed);
	CU_ASSERT_EQUAL(resumed, 1);
	CU_ASSERT_EQUAL_FATAL(store_trials_done(st, sw, collect_key, &k, &e), 0);
	CU_ASSERT_EQUAL(k.n, 3);
	CU_ASSERT_TRUE(has_key(&k, "cfg0") && has_key(&k, "cfg1") && has_key(&k, "cfg2"));
	CU_ASSERT_FALSE(has_key(&k, "cfg3"));
	CU_ASSERT_EQUAL_FATAL(store_sweep_get(st, sw, &s, &e), 0);
	CU_ASSERT_EQUAL(s.status, STORE_SWEEP_RUNNING);
	CU_ASSERT_EQUAL(s.owner_pid, (int)getpid());	/* taken over */
	CU_ASSERT_EQUAL(s.done, 3);
	store_sweep_release(&s);

	/* Now this process owns it and is alive: a second begin is refused. */
	{
		struct store_sweep_spec spec = { d.id, prob, "exhaustive", "budget=0", "{}", 8 };
		int64_t id = 0;

		CU_ASSERT_EQUAL(store_sweep_begin(st, &spec, &id, &resumed, &e), -1);
		CU_ASSERT_EQUAL(e.code, KT_ECONFLICT);
		kt_err_clear(&e);
	}

	/* A finished sweep is found again too (and reports itself running). */
	CU_ASSERT_EQUAL(store_sweep_end(st, sw, STORE_SWEEP_DONE, &e), 0);
	sw2 = begin(st, d.id, prob, "budget=0", &resumed);
	CU_ASSERT_EQUAL(resumed, 1);
	CU_ASSERT_EQUAL(sw2, sw);
	CU_ASSERT_EQUAL(store_sweep_end(st, sw, STORE_SWEEP_DONE, &e), 0);

	/* Another plan is another sweep. */
	sw3 = begin(st, d.id, prob, "budget=50", &resumed);
	CU_ASSERT_EQUAL(resumed, 0);
	CU_ASSERT_NOT_EQUAL(sw3, sw);
	k.n = 0;
	CU_ASSERT_EQUAL(store_trials_done(st, sw3, collect_key, &k, &e), 0);
	CU_ASSERT_EQUAL(k.n, 0);
	store_close(st);
}

static void test_live_owner_conflict(void)
{
	const char *path = kt_test_path("owner.db");
	struct store *st;
	struct kt_err e = { 0 };
	int64_t dev, prob, sw, id = 0;
	int fds[2], status, resumed = -1;
	char c = 0;
	pid_t pid;

	st = open_rw(path);
	dev = add_device(st, "GPU-own", "H200", "sm_90");
	prob = add_problem(st, "dense", "tokens=64");
	store_close(st);
	CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		/* The owner: begins, says so, then sleeps until killed. */
		struct store *cst = NULL;
		struct store_sweep_spec spec = { dev, prob, "exhaustive", "o", "{}", 1 };
		int64_t cid;
		int r;

		close(fds[0]);
		if (store_open(path, STORE_RW, &cst, &e) != 0 ||
		    store_sweep_begin(cst, &spec, &cid, &r, &e) != 0)
			_exit(1);
		if (write(fds[1], "x", 1) != 1)
			_exit(2);
		for (;;)
			pause();
	}
	close(fds[1]);
	CU_ASSERT_EQUAL_FATAL(read(fds[0], &c, 1), 1);
	close(fds[0]);

	st = open_rw(path);
	{
		struct store_sweep_spec spec = { dev, prob, "exhaustive", "o", "{}", 1 };
		char pidtext[32];

		CU_ASSERT_EQUAL(store_sweep_begin(st, &spec, &id, &resumed, &e), -1);
		CU_ASSERT_EQUAL(e.code, KT_ECONFLICT);
		snprintf(pidtext, sizeof(pidtext), "pid %d", (int)pid);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, pidtext));
	}
	kill(pid, SIGKILL);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);

	/* Its owner dead, the sweep is taken over. */
	sw = begin(st, dev, prob, "o", &resumed);
	CU_ASSERT_EQUAL(resumed, 1);
	CU_ASSERT(sw > 0);
	store_close(st);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_reader_not_blocked(void)
{
	const char *path = kt_test_path("concurrent.db");
	struct store *w, *r = NULL;
	struct store_trial_row *rows = NULL;
	struct kt_err e = { 0 };
	int64_t dev, prob, sw;
	int n = -1, i;
	double t0;

	w = open_rw(path);
	dev = add_device(w, "GPU-c", "H200", "sm_90");
	prob = add_problem(w, "dense", "tokens=64");
	sw = begin(w, dev, prob, "o", NULL);
	CU_ASSERT_EQUAL(add_trial(w, sw, add_config(w, "dense", "a"), "ok", 3.0, &e), 0);
	CU_ASSERT_EQUAL_FATAL(store_open(path, STORE_RO, &r, &e), 0);

	/* The writer holds a write transaction with an uncommitted trial. */
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(store_sqlite(w), "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	CU_ASSERT_EQUAL(add_trial(w, sw, add_config(w, "dense", "b"), "ok", 2.0, &e), 0);

	t0 = mono_s();
	CU_ASSERT_EQUAL(store_trials_list(r, sw, 0, &rows, &n, &e), 0);
	CU_ASSERT(mono_s() - t0 < 1.0);		/* not waiting out the busy timeout */
	CU_ASSERT_EQUAL(n, 1);			/* sees the committed state only */
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);

	CU_ASSERT_EQUAL(sqlite3_exec(store_sqlite(w), "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	CU_ASSERT_EQUAL(store_trials_list(r, sw, 0, &rows, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 2);
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);
	store_close(r);
	store_close(w);
}

/* One sweep thread per GPU, each with its own connection, as tuner/fleet
 * runs them: same family, so they intern the same configs at once. */
struct writer {
	const char *path;
	int index, ok, trials;
	char msg[512];
};

#define WRITER_CONFIGS 40

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct store *st = NULL;
	struct kt_err e = { 0 };
	struct store_device d;
	struct store_sweep_spec spec = { 0, 0, "exhaustive", "o", "{}", WRITER_CONFIGS };
	char uuid[32], key[32];
	int64_t sw, cfg;
	int resumed, i;

	snprintf(uuid, sizeof(uuid), "GPU-thread-%d", w->index);
	fill_device(&d, uuid, "H200", "sm_90");
	if (store_open(w->path, STORE_RW, &st, &e) != 0 || store_device_upsert(st, &d, &e) != 0 ||
	    store_problem_intern(st, "dense", "tokens=64", "{}", &spec.problem_id, &e) != 0)
		goto out;
	spec.device_id = d.id;
	if (store_sweep_begin(st, &spec, &sw, &resumed, &e) != 0)
		goto out;
	for (i = 0; i < WRITER_CONFIGS; i++) {
		struct store_trial t = { sw, 0, "ok", 1.0 + i, 1.0, 1.0, 0, 10, -1, 0, NULL, NULL, NULL };

		snprintf(key, sizeof(key), "shared%d", i);
		if (store_config_intern(st, "dense", key, "{}", &cfg, &e) != 0)
			goto out;
		t.config_id = cfg;
		if (store_trial_add(st, &t, &e) != 0)
			goto out;
		w->trials++;
	}
	if (store_sweep_end(st, sw, STORE_SWEEP_DONE, &e) != 0)
		goto out;
	w->ok = 1;
out:
	snprintf(w->msg, sizeof(w->msg), "%s", e.msg);
	store_close(st);
	return NULL;
}

static void test_concurrent_writers(void)
{
	const char *path = kt_test_path("writers.db");
	struct writer w[4];
	pthread_t th[4];
	struct store *st;
	int i;

	memset(w, 0, sizeof(w));
	for (i = 0; i < 4; i++) {
		w[i].path = path;
		w[i].index = i;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		if (!w[i].ok)
			fprintf(stderr, "writer %d: %s\n", i, w[i].msg);
		CU_ASSERT_TRUE(w[i].ok);
		CU_ASSERT_EQUAL(w[i].trials, WRITER_CONFIGS);
	}
	st = open_rw(path);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM configs"), WRITER_CONFIGS);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM problems"), 1);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps WHERE status = 'done'"), 4);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM trials"), 4 * WRITER_CONFIGS);
	store_close(st);
}

/* Many connections opening one new file at once: each must end up with
 * the schema and WAL, none may give up with "database is locked" (the
 * switch to WAL takes a lock the busy handler does not wait for). */
struct opener {
	const char *path;
	int ok;
	char msg[512];
};

static void *opener_main(void *arg)
{
	struct opener *o = arg;
	struct store *st = NULL;
	struct kt_err e = { 0 };

	o->ok = store_open(o->path, STORE_RW, &st, &e) == 0;
	snprintf(o->msg, sizeof(o->msg), "%s", e.msg);
	store_close(st);
	return NULL;
}

#define OPEN_ROUNDS 40
#define OPENERS 6

static void test_concurrent_first_open(void)
{
	struct opener o[OPENERS];
	pthread_t th[OPENERS];
	char name[64];
	int round, i, failed = 0;

	for (round = 0; round < OPEN_ROUNDS; round++) {
		snprintf(name, sizeof(name), "first-open-%d.db", round);
		memset(o, 0, sizeof(o));
		for (i = 0; i < OPENERS; i++) {
			o[i].path = kt_test_path(name);
			CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, opener_main, &o[i]), 0);
		}
		for (i = 0; i < OPENERS; i++) {
			pthread_join(th[i], NULL);
			if (!o[i].ok && failed++ < 3)
				fprintf(stderr, "round %d opener %d: %s\n", round, i, o[i].msg);
		}
	}
	CU_ASSERT_EQUAL(failed, 0);
}

/* ---- binaries, baselines, winners ---- */

static void test_binary_cache(void)
{
	struct store *st = open_rw(kt_test_path("bin.db"));
	struct kt_err e = { 0 };
	unsigned char cubin[3000];
	void *got = NULL;
	size_t len = 1, i;
	char *log = NULL;

	for (i = 0; i < sizeof(cubin); i++)
		cubin[i] = (unsigned char)(i * 7 + 1);
	cubin[10] = 0;	/* binary, NULs included */
	CU_ASSERT_EQUAL(store_binary_get(st, "k1", &got, &len, &log, &e), 0);	/* miss */
	CU_ASSERT_PTR_NULL(got);
	CU_ASSERT_EQUAL(len, 0);
	CU_ASSERT_EQUAL(store_binary_put(st, "k1", "sm_90a", "13.0", cubin, sizeof(cubin),
					 "warning: unused", 250.0, &e), 0);
	CU_ASSERT_EQUAL(store_binary_get(st, "k1", &got, &len, &log, &e), 1);	/* hit */
	CU_ASSERT_EQUAL_FATAL(len, sizeof(cubin));
	CU_ASSERT_EQUAL(memcmp(got, cubin, len), 0);
	CU_ASSERT_STRING_EQUAL(log, "warning: unused");
	free(got);
	free(log);
	/* Same key again: content-addressed, the first copy stays. */
	cubin[0] ^= 0xff;
	CU_ASSERT_EQUAL(store_binary_put(st, "k1", "sm_90a", "13.0", cubin, sizeof(cubin),
					 NULL, 1.0, &e), 0);
	CU_ASSERT_EQUAL(store_binary_get(st, "k1", &got, &len, NULL, &e), 1);
	CU_ASSERT_NOT_EQUAL(((unsigned char *)got)[0], cubin[0]);
	free(got);
	CU_ASSERT_EQUAL(store_binary_get(st, "k2", &got, &len, &log, &e), 0);
	CU_ASSERT_EQUAL(e.code, KT_OK);
	store_close(st);
}

static void test_baselines(void)
{
	struct store *st = open_rw(kt_test_path("base.db"));
	struct kt_err e = { 0 };
	int64_t dev = add_device(st, "GPU-b", "H200", "sm_90");
	int64_t prob = add_problem(st, "dense", "tokens=64");
	double us = 0;

	CU_ASSERT_EQUAL(store_baseline_get(st, dev, prob, "cublas_dense", &us, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, 0, "cublas_dense", 12.0, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, 0, "cublas_dense", 11.0, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, 0, "naive", 30.0, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_get(st, dev, prob, "cublas_dense", &us, &e), 1);
	CU_ASSERT_DOUBLE_EQUAL(us, 11.0, 1e-12);	/* the newest */
	CU_ASSERT_EQUAL(store_baseline_get(st, dev, prob, "naive", &us, &e), 1);
	CU_ASSERT_DOUBLE_EQUAL(us, 30.0, 1e-12);
	CU_ASSERT_EQUAL(store_baseline_add(st, 999, prob, 0, "naive", 1.0, &e), -1);	/* no device */
	CU_ASSERT_NOT_EQUAL(e.code, KT_OK);
	store_close(st);
}

static void free_winners(struct store_winner *w, int n)
{
	int i;

	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
}

static void test_winners(void)
{
	struct store *st = open_rw(kt_test_path("winners.db"));
	struct store_winner *w = NULL;
	struct kt_err e = { 0 };
	int64_t dev, dev2, prob, prob2, s1, s2, s3;
	char idtext[32];
	int n = -1;

	dev = add_device(st, "GPU-w", "NVIDIA H200", "sm_90");
	dev2 = add_device(st, "GPU-w2", "NVIDIA A100", "sm_80");
	prob = add_problem(st, "blast", "tokens=64,blocks=4");
	prob2 = add_problem(st, "dense", "tokens=64");
	s1 = begin(st, dev, prob, "o1", NULL);
	CU_ASSERT_EQUAL(add_trial(st, s1, add_config(st, "blast", "slow"), "ok", 10.0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, s1, add_config(st, "blast", "fast"), "ok", 8.0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, s1, add_config(st, "blast", "liar"), "wrong", 5.0, &e), 0);
	CU_ASSERT_EQUAL(add_trial(st, s1, add_config(st, "blast", "crash"), "fault", 0.0, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, s1, "cublas_dense", 12.0, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, s1, "cublas_dense", 11.5, &e), 0);
	CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, s1, "naive", 30.0, &e), 0);
	CU_ASSERT_EQUAL(store_retime_set(st, s1, "fast", 8.1, &e), 0);

	CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(w[0].config_key, "fast");	/* not the faster 'wrong' */
	CU_ASSERT_DOUBLE_EQUAL(w[0].median_us, 8.0, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(w[0].min_us, 8.0 * 0.98, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(w[0].retime_us, 8.1, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(w[0].cublas_us, 11.5, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(w[0].naive_us, 30.0, 1e-12);
	CU_ASSERT_EQUAL(w[0].sweep_id, s1);
	CU_ASSERT_EQUAL(w[0].device_id, dev);
	CU_ASSERT_EQUAL(w[0].problem_id, prob);
	CU_ASSERT_STRING_EQUAL(w[0].device_uuid, "GPU-w");
	CU_ASSERT_STRING_EQUAL(w[0].device_name, "NVIDIA H200");
	CU_ASSERT_STRING_EQUAL(w[0].arch, "sm_90");
	CU_ASSERT_STRING_EQUAL(w[0].family, "blast");
	CU_ASSERT_STRING_EQUAL(w[0].shape_key, "tokens=64,blocks=4");
	CU_ASSERT_STRING_EQUAL(w[0].params_json, "{\"bm\":64}");
	CU_ASSERT_STRING_EQUAL(w[0].provenance_json, "{\"host\":\"test\"}");
	free_winners(w, n);

	/* A later sweep that does better wins; the earlier best stays a trial. */
	s2 = begin(st, dev, prob, "o2", NULL);
	CU_ASSERT_EQUAL(add_trial(st, s2, add_config(st, "blast", "faster"), "ok", 7.0, &e), 0);
	/* Other devices and problems have their own winners, without baselines. */
	s3 = begin(st, dev2, prob2, "o1", NULL);
	CU_ASSERT_EQUAL(add_trial(st, s3, add_config(st, "dense", "d1"), "ok", 4.0, &e), 0);

	CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(w[0].config_key, "faster");
	CU_ASSERT_EQUAL(w[0].sweep_id, s2);
	CU_ASSERT_EQUAL(w[0].retime_us, 0);
	CU_ASSERT_DOUBLE_EQUAL(w[0].cublas_us, 11.5, 1e-12);
	CU_ASSERT_STRING_EQUAL(w[1].config_key, "d1");
	CU_ASSERT_EQUAL(w[1].cublas_us, 0);
	CU_ASSERT_EQUAL(w[1].naive_us, 0);
	free_winners(w, n);

	/* Filters. */
	CU_ASSERT_EQUAL(store_winners_list(st, "GPU-w2", NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 1);
	free_winners(w, n);
	snprintf(idtext, sizeof(idtext), "%lld", (long long)dev);
	CU_ASSERT_EQUAL(store_winners_list(st, idtext, NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_TRUE(n == 1 && strcmp(w[0].device_uuid, "GPU-w") == 0);
	free_winners(w, n);
	CU_ASSERT_EQUAL(store_winners_list(st, "NVIDIA A100", NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_TRUE(n == 1 && w[0].device_id == dev2);
	free_winners(w, n);
	CU_ASSERT_EQUAL(store_winners_list(st, NULL, "sm_80", NULL, &w, &n, &e), 0);
	CU_ASSERT_TRUE(n == 1 && strcmp(w[0].family, "dense") == 0);
	free_winners(w, n);
	CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, "blast", &w, &n, &e), 0);
	CU_ASSERT_TRUE(n == 1 && strcmp(w[0].config_key, "faster") == 0);
	free_winners(w, n);
	CU_ASSERT_EQUAL(store_winners_list(st, "GPU-w", "sm_90", "dense", &w, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 0);
	free_winners(w, n);
	CU_ASSERT_EQUAL(e.code, KT_OK);
	store_close(st);
}

/* ---- merge ---- */

/* One host's database: its devices, one sweep per (device, problem) with
 * `trials` trials each, one baseline per sweep, one binary per sweep. */
struct fixture {
	const char *uuids[3];
	const char *shapes[3];
	int trials;
	const char *config_prefix;
};

struct totals {
	long sweeps, trials, measurements, baselines, binaries;
};

static void build_db(const char *path, const struct fixture *f, struct totals *t)
{
	struct store *st = open_rw(path);
	struct kt_err e = { 0 };
	int di, pi, i;
	char key[64];

	memset(t, 0, sizeof(*t));
	for (di = 0; di < 3 && f->uuids[di]; di++) {
		int64_t dev = add_device(st, f->uuids[di], "NVIDIA H200", "sm_90");

		for (pi = 0; pi < 3 && f->shapes[pi]; pi++) {
			int64_t prob = add_problem(st, "dense", f->shapes[pi]);
			int64_t sw = begin(st, dev, prob, "budget=0", NULL);
			unsigned char blob[64];

			t->sweeps++;
			for (i = 0; i < f->trials; i++) {
				snprintf(key, sizeof(key), "%s%d", f->config_prefix, i);
				CU_ASSERT_EQUAL(add_trial(st, sw, add_config(st, "dense", key),
							  "ok", 10.0 + i + di, &e), 0);
				t->trials++;
			}
			/* schema 2: a tournament median with its round, and a
			 * sentinel timing (both must survive a merge) */
			{
				struct store_measure m = { 0 };

				snprintf(key, sizeof(key), "%s0", f->config_prefix);
				CU_ASSERT_EQUAL(store_tournament_set(st, sw, key, 10.0 + di, &e), 0);
				m.sweep_id = sw;
				m.run = 1000.0;
				m.kind = "tournament";
				m.config_key = key;
				m.status = "ok";
				m.median_us = m.min_us = m.p90_us = 10.0 + di;
				m.reps = 10;
				m.cond.sm_mhz_before = m.cond.sm_mhz_after = 1980;
				CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), 0);
				m.kind = "sentinel";
				m.config_key = NULL;
				m.baseline = "cublas_dense";
				m.cond.sm_mhz_after = 1410;
				CU_ASSERT_EQUAL(store_measure_add(st, &m, &e), 0);
				t->measurements += 2;
			}
			CU_ASSERT_EQUAL(store_baseline_add(st, dev, prob, sw, "cublas_dense",
							   20.0 + di, &e), 0);
			t->baselines++;
			snprintf(key, sizeof(key), "%s-%s-%s", f->uuids[di], f->shapes[pi],
				 f->config_prefix);
			memset(blob, di + pi, sizeof(blob));
			CU_ASSERT_EQUAL(store_binary_put(st, key, "sm_90", "13.0", blob,
							 sizeof(blob), NULL, 1.0, &e), 0);
			t->binaries++;
			CU_ASSERT_EQUAL(store_sweep_end(st, sw, STORE_SWEEP_DONE, &e), 0);
		}
	}
	CU_ASSERT_EQUAL(e.code, KT_OK);
	store_close(st);
}

static void test_merge(void)
{
	const char *a = kt_test_path("host_a.db");
	const char *b = kt_test_path("host_b.db");
	const char *c = kt_test_path("merged.db");
	/* Hosts share GPU-2 and the shape tokens=128, and config names. */
	const struct fixture fa = { { "GPU-1", "GPU-2", NULL }, { "tokens=64", "tokens=128", NULL }, 3, "cfg" };
	const struct fixture fb = { { "GPU-2", "GPU-3", NULL }, { "tokens=128", "tokens=256", NULL }, 2, "cfg" };
	struct store_merge_counts ca, cb, again;
	struct totals ta, tb;
	struct store *st;
	struct kt_err e = { 0 };
	struct store_winner *w = NULL;
	struct store_sweep *sweeps = NULL;
	char *a_bytes;
	size_t a_len;
	int n = 0, i;

	build_db(a, &fa, &ta);
	build_db(b, &fb, &tb);
	a_bytes = slurp(a, &a_len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a_bytes);

	st = open_rw(c);
	CU_ASSERT_EQUAL(store_merge_counted(st, a, &ca, &e), 0);
	CU_ASSERT_EQUAL(e.code, KT_OK);
	CU_ASSERT_EQUAL(ca.devices, 2);
	CU_ASSERT_EQUAL(ca.problems, 2);
	CU_ASSERT_EQUAL(ca.configs, fa.trials);
	CU_ASSERT_EQUAL(ca.sweeps, ta.sweeps);
	CU_ASSERT_EQUAL(ca.trials, ta.trials);
	CU_ASSERT_EQUAL(ca.measurements, ta.measurements);
	CU_ASSERT_EQUAL(ca.baselines, ta.baselines);
	CU_ASSERT_EQUAL(ca.binaries, ta.binaries);

	CU_ASSERT_EQUAL(store_merge_counted(st, b, &cb, &e), 0);
	CU_ASSERT_EQUAL(cb.devices, 1);		/* GPU-2 is known */
	CU_ASSERT_EQUAL(cb.problems, 1);	/* tokens=128 is known */
	CU_ASSERT_EQUAL(cb.configs, 0);		/* cfg0, cfg1 are known */
	/* GPU-2 x tokens=128 ran on both hosts: two sweeps (different starts). */
	CU_ASSERT_EQUAL(cb.sweeps, tb.sweeps);
	CU_ASSERT_EQUAL(cb.trials, tb.trials);
	CU_ASSERT_EQUAL(cb.measurements, tb.measurements);
	CU_ASSERT_EQUAL(cb.baselines, tb.baselines);
	/* build_db names a binary by device, shape and prefix: B's binary for
	 * GPU-2 x tokens=128 has A's key, so it is already there. */
	CU_ASSERT_EQUAL(cb.binaries, tb.binaries - 1);

	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM devices"), 3);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps"), ta.sweeps + tb.sweeps);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM trials"), ta.trials + tb.trials);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps WHERE merged_from IS NULL"), 0);
	/* the trials' schema-2 columns and the measurements come along */
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM trials WHERE tournament_us IS NOT NULL"),
			ta.sweeps + tb.sweeps);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM measurements"),
			ta.measurements + tb.measurements);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM measurements WHERE kind = 'sentinel'"
				      " AND baseline = 'cublas_dense' AND sm_mhz_after = 1410"),
			ta.sweeps + tb.sweeps);
	CU_ASSERT_EQUAL(raw_count(st, "PRAGMA foreign_key_check"), -1);	/* no rows */

	/* Merging again adds nothing. */
	CU_ASSERT_EQUAL(store_merge_counted(st, a, &again, &e), 0);
	CU_ASSERT_EQUAL(again.devices + again.problems + again.configs + again.sweeps +
			again.trials + again.measurements + again.baselines + again.binaries, 0);
	CU_ASSERT_EQUAL(store_merge_from(st, b, &e), 0);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM trials"), ta.trials + tb.trials);

	/* Winners are recomputed over both: one per (device, shape) pair. On
	 * GPU-2 x tokens=128 both hosts ran; B's is faster there (build_db
	 * times a device by its place in the host's list). */
	CU_ASSERT_EQUAL(store_winners_list(st, NULL, NULL, NULL, &w, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 2 * 2 + 2 * 2 - 1);
	for (i = 0; i < n; i++) {
		CU_ASSERT_STRING_EQUAL(w[i].config_key, "cfg0");
		CU_ASSERT(w[i].cublas_us > 0);
		if (strcmp(w[i].device_uuid, "GPU-2") == 0 &&
		    strcmp(w[i].shape_key, "tokens=128") == 0) {
			CU_ASSERT_DOUBLE_EQUAL(w[i].median_us, 10.0, 1e-12);
			CU_ASSERT_DOUBLE_EQUAL(w[i].cublas_us, 20.0, 1e-12);
		}
	}
	free_winners(w, n);

	/* Sweeps come with their status and counts. */
	CU_ASSERT_EQUAL(store_sweeps_list(st, 0, &sweeps, &n, &e), 0);
	CU_ASSERT_EQUAL(n, ta.sweeps + tb.sweeps);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(sweeps[i].status, STORE_SWEEP_DONE);
		CU_ASSERT(sweeps[i].done == fa.trials || sweeps[i].done == fb.trials);
		store_sweep_release(&sweeps[i]);
	}
	free(sweeps);

	/* The sources are read, never written. */
	CU_ASSERT_TRUE(file_is(a, a_bytes, a_len));
	free(a_bytes);

	/* Merging into itself is refused. */
	CU_ASSERT_EQUAL(store_merge_from(st, c, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	store_close(st);
}

static void test_merge_refusals(void)
{
	const char *src = kt_test_path("src.db");
	const char *dst = kt_test_path("dst.db");
	const char *newer = kt_test_path("newer_src.db");
	const char *text = kt_test_path("text_src.db");
	const struct fixture f = { { "GPU-9", NULL, NULL }, { "tokens=64", NULL, NULL }, 2, "k" };
	struct totals t;
	struct store *st;
	struct kt_err e = { 0 };
	char *before, *nb;
	size_t len, nlen;

	build_db(src, &f, &t);
	st = open_rw(dst);
	CU_ASSERT_EQUAL_FATAL(store_merge_from(st, src, &e), 0);
	store_close(st);
	before = slurp(dst, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);

	CU_ASSERT_EQUAL_FATAL(raw_sql(newer, "CREATE TABLE devices (x); PRAGMA user_version = 7;"), 0);
	nb = slurp(newer, &nlen);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(text, "hello\n", 6), 0);

	st = open_rw(dst);
	CU_ASSERT_EQUAL(store_merge_from(st, newer, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ESCHEMA);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "newer than this ktune"));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(store_merge_from(st, text, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ECORRUPT);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(store_merge_from(st, kt_test_path("absent.db"), &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);
	CU_ASSERT_FALSE(exists(kt_test_path("absent.db")));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM trials"), t.trials);
	store_close(st);

	CU_ASSERT_TRUE(file_is(dst, before, len));	/* target untouched */
	CU_ASSERT_TRUE(file_is(newer, nb, nlen));	/* source untouched */
	free(before);
	free(nb);
}

/* A path with URI-special characters still names a file, read-only. */
static void test_merge_odd_path(void)
{
	const char *src = kt_test_path("odd ?#%name.db");
	const char *dst = kt_test_path("odd_dst.db");
	const struct fixture f = { { "GPU-odd", NULL, NULL }, { "tokens=8", NULL, NULL }, 1, "z" };
	struct store_merge_counts cnt;
	struct totals t;
	struct store *st;
	struct kt_err e = { 0 };

	build_db(src, &f, &t);
	st = open_rw(dst);
	CU_ASSERT_EQUAL(store_merge_counted(st, src, &cnt, &e), 0);
	if (e.code)
		fprintf(stderr, "merge: %s\n", e.msg);
	CU_ASSERT_EQUAL(cnt.trials, t.trials);
	CU_ASSERT_EQUAL(raw_count(st, "SELECT count(*) FROM sweeps WHERE merged_from LIKE '%odd ?#\\%name.db' ESCAPE '\\'"), 1);
	store_close(st);
}

/* ---- ktune merge (the binary) ---- */

static long json_count(json_t *root, const char *kind)
{
	return (long)json_integer_value(json_object_get(json_object_get(root, "added"), kind));
}

static void test_merge_cli(void)
{
	const char *a = kt_test_path("cli_a.db");
	const char *b = kt_test_path("cli_b.db");
	const char *out = kt_test_path("cli_out.db");
	const char *newer = kt_test_path("cli_newer.db");
	const struct fixture fa = { { "GPU-c1", NULL, NULL }, { "tokens=64", "tokens=128", NULL }, 2, "m" };
	const struct fixture fb = { { "GPU-c1", "GPU-c2", NULL }, { "tokens=64", NULL, NULL }, 3, "n" };
	char *argv[8], *text = NULL, *before;
	json_t *root;
	json_error_t jerr;
	struct totals ta, tb;
	size_t len;
	int rc;

	build_db(a, &fa, &ta);
	build_db(b, &fb, &tb);
	argv[0] = (char *)kt_test_ktune();
	argv[1] = "merge";
	argv[2] = (char *)a;
	argv[3] = (char *)b;
	argv[4] = "-o";
	argv[5] = (char *)out;
	argv[6] = "--json";
	argv[7] = NULL;
	rc = kt_test_exec(argv, NULL, &text, 60);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(text);
	root = json_loads(text, 0, &jerr);
	if (!root)
		fprintf(stderr, "not JSON (%s):\n%s\n", jerr.text, text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(json_array_size(json_object_get(root, "inputs")), 2);
	CU_ASSERT_EQUAL(json_count(root, "devices"), 2);
	CU_ASSERT_EQUAL(json_count(root, "sweeps"), ta.sweeps + tb.sweeps);
	CU_ASSERT_EQUAL(json_count(root, "trials"), ta.trials + tb.trials);
	json_decref(root);
	free(text);

	/* Again, in text: nothing more to add. */
	argv[6] = NULL;
	rc = kt_test_exec(argv, NULL, &text, 60);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "+0 devices, +0 sweeps, +0 trials"));
	free(text);

	/* A newer input refuses the whole command; the output is untouched. */
	CU_ASSERT_EQUAL_FATAL(raw_sql(newer, "PRAGMA user_version = 42;"), 0);
	before = slurp(out, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);
	argv[2] = (char *)a;
	argv[3] = (char *)newer;
	rc = kt_test_exec(argv, NULL, &text, 60);
	CU_ASSERT_EQUAL(rc, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "database schema version 42 is newer than this ktune (2); upgrade ktune"));
	CU_ASSERT_TRUE(file_is(out, before, len));
	free(text);
	free(before);

	/* No input is a usage error. */
	argv[2] = "-o";
	argv[3] = (char *)out;
	argv[4] = NULL;
	rc = kt_test_exec(argv, NULL, &text, 60);
	CU_ASSERT_EQUAL(rc, 2);
	free(text);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("store_open", NULL, NULL);
	CU_add_test(s, "new file: schema, WAL, foreign keys", test_open_new_file);
	CU_add_test(s, "empty file is migrated", test_open_empty_file_migrates);
	CU_add_test(s, "read-only, missing file", test_open_ro_missing);
	CU_add_test(s, "read-only never writes", test_open_ro_never_writes);
	CU_add_test(s, "newer schema refused, file unchanged", test_newer_schema_refused);
	CU_add_test(s, "text file refused, unchanged", test_text_file_refused);
	CU_add_test(s, "foreign SQLite refused, unchanged", test_foreign_sqlite_refused);
	CU_add_test(s, "garbage and truncated refused", test_garbage_and_truncated_refused);
	s = CU_add_suite("store_rows", NULL, NULL);
	CU_add_test(s, "devices", test_devices);
	CU_add_test(s, "nested transactions", test_nested_tx);
	CU_add_test(s, "problems and configs", test_intern);
	CU_add_test(s, "sweeps", test_sweeps);
	CU_add_test(s, "trials", test_trials);
	CU_add_test(s, "binary cache", test_binary_cache);
	CU_add_test(s, "baselines", test_baselines);
	CU_add_test(s, "winners", test_winners);
	s = CU_add_suite("store_sweep_life", NULL, NULL);
	CU_add_test(s, "resume after a crash", test_resume_after_crash);
	CU_add_test(s, "live owner conflict", test_live_owner_conflict);
	CU_add_test(s, "reader not blocked by writer", test_reader_not_blocked);
	CU_add_test(s, "concurrent writers, one per GPU", test_concurrent_writers);
	CU_add_test(s, "concurrent first opens of a new file", test_concurrent_first_open);
	s = CU_add_suite("store_merge", NULL, NULL);
	CU_add_test(s, "merge two hosts", test_merge);
	CU_add_test(s, "merge refusals leave files alone", test_merge_refusals);
	CU_add_test(s, "merge a path with odd characters", test_merge_odd_path);
	s = CU_add_suite("merge_cli", NULL, NULL);
	CU_add_test(s, "ktune merge", test_merge_cli);
	return kt_test_main();
}
