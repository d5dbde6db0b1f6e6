/*
 * store.c -- the SQLite store (see store.h for the contract).
 *
 * SQL is data: sql_text[] below, indexed by enum store_sql (store_int.h),
 * each statement prepared on first use and reset after every use. The
 * schema is db/schema.sql, embedded at build time as kt_schema_sql.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "schema_sql.h"

/* PRAGMA application_id of a ktune database ("ktun"): tells our files from
 * other SQLite files that happen to carry a user_version. */
#define STORE_APP_ID 0x6b74756e

#define STORE_BUSY_MS 5000

static const char *const sql_text[SQL__COUNT] = {
	[SQL_BEGIN] = "BEGIN IMMEDIATE",
	[SQL_COMMIT] = "COMMIT",
	[SQL_ROLLBACK] = "ROLLBACK",
	[SQL_DEVICE_UPSERT] =
		"INSERT INTO devices (uuid, name, arch, sms, l2_bytes, smem_optin,"
		" clock_mhz, mem_clock_mhz, driver, cuda, nvrtc, first_seen, last_seen)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)"
		" ON CONFLICT (uuid) DO UPDATE SET name = excluded.name,"
		" arch = excluded.arch, sms = excluded.sms, l2_bytes = excluded.l2_bytes,"
		" smem_optin = excluded.smem_optin, clock_mhz = excluded.clock_mhz,"
		" mem_clock_mhz = excluded.mem_clock_mhz, driver = excluded.driver,"
		" cuda = excluded.cuda, nvrtc = excluded.nvrtc, last_seen = excluded.last_seen"
		" RETURNING id",
	[SQL_DEVICES_LIST] =
		"SELECT id, name, uuid, arch, sms, l2_bytes, smem_optin, clock_mhz,"
		" mem_clock_mhz, driver, cuda, nvrtc FROM devices ORDER BY id",
	[SQL_DEVICE_FIND] =
		"SELECT id, name, uuid, arch, sms, l2_bytes, smem_optin, clock_mhz,"
		" mem_clock_mhz, driver, cuda, nvrtc FROM devices"
		" WHERE uuid = ?1 OR id = ?2 ORDER BY uuid = ?1 DESC LIMIT 1",
	[SQL_PROBLEM_FIND] = "SELECT id FROM problems WHERE family = ?1 AND shape_key = ?2",
	[SQL_PROBLEM_INSERT] =
		"INSERT INTO problems (family, shape_key, shape_json) VALUES (?1, ?2, ?3)"
		" ON CONFLICT (family, shape_key) DO NOTHING",
	[SQL_CONFIG_FIND] = "SELECT id FROM configs WHERE family = ?1 AND config_key = ?2",
	[SQL_CONFIG_INSERT] =
		"INSERT INTO configs (family, config_key, params_json) VALUES (?1, ?2, ?3)"
		" ON CONFLICT (family, config_key) DO NOTHING",
	[SQL_SWEEP_FIND_PLAN] =
		"SELECT id, status, owner_pid, owner_host FROM sweeps"
		" WHERE device_id = ?1 AND problem_id = ?2 AND strategy = ?3"
		" AND options_key = ?4 ORDER BY started DESC, id DESC LIMIT 1",
	[SQL_SWEEP_RESUME] =
		"UPDATE sweeps SET status = 'running', finished = NULL, owner_pid = ?2,"
		" owner_host = ?3, planned = ?4 WHERE id = ?1",
	[SQL_SWEEP_INSERT] =
		"INSERT INTO sweeps (device_id, problem_id, strategy, options_key,"
		" provenance_json, status, planned, started, owner_pid, owner_host)"
		" VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, ?8, ?9)",
	[SQL_SWEEP_END] = "UPDATE sweeps SET status = ?2, finished = ?3 WHERE id = ?1",
	[SQL_SWEEP_GET] =
		"SELECT s.id, s.device_id, s.problem_id, p.family, p.shape_key, s.strategy,"
		" s.options_key, s.provenance_json, s.status, s.planned,"
		" (SELECT count(*) FROM trials t WHERE t.sweep_id = s.id),"
		" s.started, s.finished, s.owner_pid, s.owner_host"
		" FROM sweeps s JOIN problems p ON p.id = s.problem_id WHERE s.id = ?1",
	[SQL_SWEEPS_LIST] =
		"SELECT s.id, s.device_id, s.problem_id, p.family, p.shape_key, s.strategy,"
		" s.options_key, s.provenance_json, s.status, s.planned,"
		" (SELECT count(*) FROM trials t WHERE t.sweep_id = s.id),"
		" s.started, s.finished, s.owner_pid, s.owner_host"
		" FROM sweeps s JOIN problems p ON p.id = s.problem_id"
		" ORDER BY s.started DESC, s.id DESC LIMIT ?1",
	[SQL_TRIAL_ADD] =
		"INSERT INTO trials (sweep_id, config_id, status, median_us, min_us, p90_us,"
		" spread, reps, rel_err, compile_ms, binary_key, message, log, created,"
		" sm_mhz_before, sm_mhz_after, mem_mhz_before, mem_mhz_after, power_w_before,"
		" power_w_after, temp_c_before, temp_c_after, throttled, norm_us, errors_json)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
		" ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
	[SQL_TRIALS_DONE] =
		"SELECT c.config_key FROM trials t JOIN configs c ON c.id = t.config_id"
		" WHERE t.sweep_id = ?1 ORDER BY t.id",
	[SQL_TRIALS_LIST] =
		"SELECT t.sweep_id, t.status, c.config_key, c.params_json, t.median_us,"
		" t.min_us, t.p90_us, t.spread, t.rel_err, t.compile_ms, t.retime_us,"
		" t.reps, t.message, t.log, t.tournament_us, t.sm_mhz_before, t.sm_mhz_after,"
		" t.mem_mhz_before, t.mem_mhz_after, t.power_w_before, t.power_w_after,"
		" t.temp_c_before, t.temp_c_after, t.throttled, t.norm_us, t.errors_json, t.id"
		" FROM trials t JOIN configs c ON c.id = t.config_id WHERE t.sweep_id = ?1"
		" ORDER BY t.status <> 'ok', t.median_us, t.id LIMIT ?2",
	/* Config keys are unique per family only: the sweep's problem names it. */
	[SQL_RETIME_SET] =
		"UPDATE trials SET retime_us = ?3 WHERE sweep_id = ?1 AND config_id ="
		" (SELECT c.id FROM configs c JOIN problems p ON p.family = c.family"
		"  JOIN sweeps s ON s.problem_id = p.id WHERE s.id = ?1 AND c.config_key = ?2)",
	[SQL_BASELINE_ADD] =
		"INSERT INTO baselines (device_id, problem_id, sweep_id, name, median_us, created)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[SQL_BASELINE_GET] =
		"SELECT median_us FROM baselines WHERE device_id = ?1 AND problem_id = ?2"
		" AND name = ?3 ORDER BY created DESC, id DESC LIMIT 1",
	[SQL_WINNERS_LIST] =
		"SELECT device_id, problem_id, sweep_id, device_name, device_uuid, arch,"
		" family, shape_key, shape_json, config_key, params_json, median_us, min_us,"
		" p90_us, retime_us, cublas_us, naive_us, provenance_json FROM winners"
		" WHERE (?1 IS NULL OR device_uuid = ?1 OR device_name = ?1 OR device_id = ?2)"
		" AND (?3 IS NULL OR arch = ?3) AND (?4 IS NULL OR family = ?4)"
		" ORDER BY device_id, family, shape_key",
	/* The winners view's row of one (device, problem), without computing
	 * the view: the pair's sweeps by sweeps_by_plan, their trials by
	 * (sweep_id, config_id), ranked as the view ranks them. The unary +
	 * keeps the planner off trials_ok_by_time, which would walk every ok
	 * trial of the database in time order. */
	[SQL_WINNER_GET] =
		"SELECT s.device_id, s.problem_id, t.sweep_id, d.name, d.uuid, d.arch,"
		" p.family, p.shape_key, p.shape_json, c.config_key, c.params_json,"
		" coalesce(t.tournament_us, t.median_us),"
		" t.min_us, t.p90_us, t.retime_us,"
		" (SELECT b.median_us FROM baselines b WHERE b.device_id = s.device_id"
		"  AND b.problem_id = s.problem_id AND b.name = 'cublas_dense'"
		"  ORDER BY b.created DESC, b.id DESC LIMIT 1),"
		" (SELECT b.median_us FROM baselines b WHERE b.device_id = s.device_id"
		"  AND b.problem_id = s.problem_id AND b.name = 'naive'"
		"  ORDER BY b.created DESC, b.id DESC LIMIT 1),"
		" s.provenance_json"
		" FROM sweeps s JOIN trials t ON t.sweep_id = s.id"
		" JOIN devices d ON d.id = s.device_id JOIN problems p ON p.id = s.problem_id"
		" JOIN configs c ON c.id = t.config_id"
		" WHERE s.device_id = ?1 AND s.problem_id = ?2 AND +t.status = 'ok'"
		" AND +t.median_us IS NOT NULL"
		" ORDER BY t.tournament_us IS NULL, coalesce(t.tournament_us, t.median_us),"
		" t.min_us, t.id LIMIT 1",
	[SQL_MARKS_MAX] =
		"SELECT (SELECT coalesce(max(id), 0) FROM trials),"
		" (SELECT coalesce(max(id), 0) FROM baselines)",
	[SQL_SWEEP_MARKS] =
		"SELECT id, device_id, problem_id, coalesce(finished, -1), status = 'running'"
		" FROM sweeps ORDER BY id",
	[SQL_PAIRS_SINCE] =
		"SELECT s.device_id, s.problem_id FROM trials t JOIN sweeps s ON s.id = t.sweep_id"
		" WHERE t.id > ?1 AND t.id <= ?2"
		" UNION SELECT device_id, problem_id FROM baselines WHERE id > ?3 AND id <= ?4",
	[SQL_BINARY_GET] = "SELECT cubin, log FROM binaries WHERE key = ?1",
	/* The key names the content, so an existing row is already right. */
	[SQL_BINARY_PUT] =
		"INSERT INTO binaries (key, arch, nvrtc_version, cubin, log, compile_ms, created)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (key) DO NOTHING",
	[SQL_TOURNAMENT_SET] =
		"UPDATE trials SET tournament_us = ?3 WHERE sweep_id = ?1 AND config_id ="
		" (SELECT c.id FROM configs c JOIN problems p ON p.family = c.family"
		"  JOIN sweeps s ON s.problem_id = p.id WHERE s.id = ?1 AND c.config_key = ?2)",
	[SQL_MEASURE_ADD] =
		"INSERT INTO measurements (sweep_id, run, kind, config_id, baseline, round,"
		" position, status, median_us, min_us, p90_us, reps, sm_mhz_before,"
		" sm_mhz_after, power_w_after, temp_c_after, message, created)"
		" VALUES (?1, ?2, ?3, (SELECT c.id FROM configs c JOIN problems p"
		"  ON p.family = c.family JOIN sweeps s ON s.problem_id = p.id"
		"  WHERE s.id = ?1 AND c.config_key = ?4), ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
		" ?13, ?14, ?15, ?16, ?17, ?18)",
	[SQL_MEASURES_LIST] =
		"SELECT m.kind, m.status, coalesce(c.config_key, ''), coalesce(m.baseline, ''),"
		" m.run, m.median_us, m.min_us, m.p90_us, m.round, m.position, m.reps,"
		" m.sm_mhz_before, m.sm_mhz_after, m.power_w_after, m.temp_c_after, m.message"
		" FROM measurements m LEFT JOIN configs c ON c.id = m.config_id"
		" WHERE m.sweep_id = ?1 AND (?2 IS NULL OR m.kind = ?2) ORDER BY m.id",
	[SQL_FAULTY_CONFIGS] =
		"SELECT c.config_key, min(t.status) FROM trials t JOIN sweeps s ON s.id = t.sweep_id"
		" JOIN configs c ON c.id = t.config_id WHERE s.device_id = ?1 AND s.problem_id = ?2"
		" AND t.sweep_id <> ?3 AND t.status IN ('fault', 'timeout') GROUP BY c.config_key",
	[SQL_FAMILY_TRIALS] =
		"SELECT p.shape_json, d.uuid, c.config_key, coalesce(t.tournament_us, t.median_us)"
		" FROM trials t JOIN sweeps s ON s.id = t.sweep_id JOIN problems p ON p.id = s.problem_id"
		" JOIN devices d ON d.id = s.device_id JOIN configs c ON c.id = t.config_id"
		" WHERE p.family = ?1 AND t.status = 'ok' AND t.median_us IS NOT NULL"
		" AND NOT (s.device_id = ?2 AND s.problem_id = ?3) ORDER BY t.id DESC LIMIT ?4",
};

/* Schema steps: an empty file gets schema.sql (the current version) whole;
 * an older file gets migrations[i] for each version i + 1 it lacks (entry 0,
 * to version 1, is never run: version 1 was schema.sql's first form), and
 * then the winners view again from schema.sql's text (the view comes last
 * there), so a migrated file and a new one never rank differently. */
static const char *const migrations[] = {
	NULL,
	/* 1 -> 2: measuring conditions, tournament and drift columns of trials,
	 * the measurements table, the tournament-first winners view */
	"ALTER TABLE trials ADD COLUMN tournament_us REAL;"
	"ALTER TABLE trials ADD COLUMN sm_mhz_before INTEGER;"
	"ALTER TABLE trials ADD COLUMN sm_mhz_after INTEGER;"
	"ALTER TABLE trials ADD COLUMN mem_mhz_before INTEGER;"
	"ALTER TABLE trials ADD COLUMN mem_mhz_after INTEGER;"
	"ALTER TABLE trials ADD COLUMN power_w_before REAL;"
	"ALTER TABLE trials ADD COLUMN power_w_after REAL;"
	"ALTER TABLE trials ADD COLUMN temp_c_before INTEGER;"
	"ALTER TABLE trials ADD COLUMN temp_c_after INTEGER;"
	"ALTER TABLE trials ADD COLUMN throttled INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE trials ADD COLUMN norm_us REAL;"
	"ALTER TABLE trials ADD COLUMN errors_json TEXT;"
	"CREATE TABLE measurements (id INTEGER PRIMARY KEY,"
	" sweep_id INTEGER NOT NULL REFERENCES sweeps(id), run REAL NOT NULL,"
	" kind TEXT NOT NULL CHECK (kind IN ('sentinel', 'tournament', 'retime')),"
	" config_id INTEGER REFERENCES configs(id), baseline TEXT,"
	" round INTEGER NOT NULL DEFAULT 0, position INTEGER NOT NULL DEFAULT 0,"
	" status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'compile_error',"
	" 'launch_error', 'fault', 'timeout')), median_us REAL, min_us REAL, p90_us REAL,"
	" reps INTEGER NOT NULL DEFAULT 0, sm_mhz_before INTEGER, sm_mhz_after INTEGER,"
	" power_w_after REAL, temp_c_after INTEGER, message TEXT, created REAL NOT NULL,"
	" CHECK ((config_id IS NULL) <> (baseline IS NULL)));"
	"CREATE INDEX measurements_by_sweep ON measurements (sweep_id, kind, run);",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == STORE_SCHEMA_VERSION,
	       "one migration step per schema version");

/* How many of ktune's tables store_inspect() must find; a file missing any
 * is not ours. */
#define STORE_NTABLES 7

static const char *const sweep_status_names[] = {
	[STORE_SWEEP_RUNNING] = "running",
	[STORE_SWEEP_DONE] = "done",
	[STORE_SWEEP_INTERRUPTED] = "interrupted",
	[STORE_SWEEP_FAILED] = "failed",
};
#define N_SWEEP_STATUS ((int)(sizeof(sweep_status_names) / sizeof(sweep_status_names[0])))

/* ---- helpers shared with merge.c ---- */

double store_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int store_db_error(struct store *st, struct kt_err *err, const char *what)
{
	int xc = sqlite3_extended_errcode(st->db);
	const char *msg = sqlite3_errmsg(st->db);
	enum kt_errcode code = KT_EDB;

	switch (xc & 0xff) {
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		code = KT_ECORRUPT;
		break;
	case SQLITE_IOERR:
	case SQLITE_FULL:
	case SQLITE_CANTOPEN:
		code = KT_EIO;
		break;
	case SQLITE_CONSTRAINT:
		if (xc == SQLITE_CONSTRAINT_UNIQUE || xc == SQLITE_CONSTRAINT_PRIMARYKEY)
			code = KT_ECONFLICT;
		else if (xc == SQLITE_CONSTRAINT_FOREIGNKEY)
			code = KT_ENOTFOUND;
		else
			code = KT_EINVAL;
		break;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		code = KT_ECONFLICT;
		break;
	}
	return kt_err_set(err, code, "%s: %s (%s)", what, msg, st->path);
}

int store_exec(struct store *st, const char *sql, struct kt_err *err)
{
	char *msg = NULL;
	int rc = -1;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		store_db_error(st, err, "database");
		goto out;
	}
	rc = 0;
out:
	sqlite3_free(msg);
	return rc;
}

sqlite3_stmt *store_stmt(struct store *st, enum store_sql id, struct kt_err *err)
{
	if (id < 0 || id >= SQL__COUNT) {
		kt_err_set(err, KT_EINTERNAL, "store: no statement %d", (int)id);
		return NULL;
	}
	if (!st->stmt[id] &&
	    sqlite3_prepare_v3(st->db, sql_text[id], -1, SQLITE_PREPARE_PERSISTENT,
			       &st->stmt[id], NULL) != SQLITE_OK) {
		store_db_error(st, err, "preparing a statement");
		st->stmt[id] = NULL;
		return NULL;
	}
	return st->stmt[id];
}

void store_stmt_done(sqlite3_stmt *stmt)
{
	if (stmt) {
		sqlite3_reset(stmt);
		sqlite3_clear_bindings(stmt);
	}
}

static int tx_step(struct store *st, enum store_sql id, const char *what, struct kt_err *err)
{
	sqlite3_stmt *s;
	int rc = 0;

	if (!(s = store_stmt(st, id, err)))
		return -1;
	if (sqlite3_step(s) != SQLITE_DONE)
		rc = store_db_error(st, err, what);
	store_stmt_done(s);
	return rc;
}

int store_tx_begin(struct store *st, struct kt_err *err)
{
	int rc;

	/* SQLite ended the transaction by itself (an I/O error, a full
	 * disk): the levels recorded here are gone with it */
	if (st->tx_depth > 0 && sqlite3_get_autocommit(st->db))
		st->tx_depth = 0;
	if (st->tx_depth == 0)
		rc = tx_step(st, SQL_BEGIN, "starting a transaction", err);
	else
		rc = store_exec(st, "SAVEPOINT kt_tx", err);
	if (rc == 0)
		st->tx_depth++;
	return rc;
}

int store_tx_commit(struct store *st, struct kt_err *err)
{
	int rc;

	if (st->tx_depth > 1) {
		if ((rc = store_exec(st, "RELEASE kt_tx", err)) == 0)
			st->tx_depth--;
		return rc;
	}
	/* a failed COMMIT (SQLITE_BUSY) leaves the transaction open for the
	 * caller's rollback */
	if ((rc = tx_step(st, SQL_COMMIT, "committing", err)) == 0 ||
	    sqlite3_get_autocommit(st->db))
		st->tx_depth = 0;
	return rc;
}

void store_tx_rollback(struct store *st)
{
	if (sqlite3_get_autocommit(st->db)) {
		st->tx_depth = 0;
		return;
	}
	if (st->tx_depth > 1) {
		/* back to the savepoint, which stays until released */
		store_exec(st, "ROLLBACK TO kt_tx", NULL);
		store_exec(st, "RELEASE kt_tx", NULL);
		st->tx_depth--;
		return;
	}
	tx_step(st, SQL_ROLLBACK, "rolling back", NULL);
	st->tx_depth = 0;
}

/* ---- small local helpers ---- */

/* Callers OR the results of their binds into one code and check it once
 * with bind_error() before stepping. */
static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
	if (v)
		return sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
	return sqlite3_bind_null(s, i);
}

static int bind_error(struct store *st, int b, struct kt_err *err)
{
	/* The results are OR-ed, so the text names the failure exactly only
	 * when one bind failed; what matters is that the statement never runs
	 * with a parameter silently left NULL. */
	return kt_err_set(err, b == SQLITE_TOOBIG ? KT_ETOOBIG : KT_EINTERNAL,
			  "cannot bind a query parameter: %s (%s)", sqlite3_errstr(b), st->path);
}

static int step_done(struct store *st, sqlite3_stmt *s, struct kt_err *err, const char *what)
{
	int src = sqlite3_step(s);

	if (src != SQLITE_DONE && src != SQLITE_ROW)
		return store_db_error(st, err, what);
	return 0;
}

/* One step of a statement that reads at most one row: 1 a row is there to
 * read, 0 none, -1 a database error (err says what was being done). */
static int step_row(struct store *st, sqlite3_stmt *s, struct kt_err *err, const char *what)
{
	int src = sqlite3_step(s);

	if (src == SQLITE_ROW)
		return 1;
	if (src == SQLITE_DONE)
		return 0;
	store_db_error(st, err, what);
	return -1;
}

static void col_copy(sqlite3_stmt *s, int col, char *dst, size_t n)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	snprintf(dst, n, "%s", t ? (const char *)t : "");
}

/* *dst = a malloc'ed copy of the column, NULL for SQL NULL. */
static int col_dup(sqlite3_stmt *s, int col, char **dst, struct kt_err *err)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	*dst = NULL;
	if (!t)
		return 0;
	if (!(*dst = strdup((const char *)t)))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	return 0;
}

/* Like col_dup but "" for NULL, for strings the contract never leaves NULL. */
static int col_dup_nn(sqlite3_stmt *s, int col, char **dst, struct kt_err *err)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	if (!(*dst = strdup(t ? (const char *)t : "")))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	return 0;
}

static double col_double(sqlite3_stmt *s, int col, double if_null)
{
	return sqlite3_column_type(s, col) == SQLITE_NULL ? if_null : sqlite3_column_double(s, col);
}

/* Makes room for one more element in a growing array. */
static int grow(void **arr, int *cap, int n, size_t elem, struct kt_err *err)
{
	void *p;
	int ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	if (!(p = realloc(*arr, (size_t)ncap * elem)))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

/* A list query's rows: steps s (bound) to its end, filling one elem-sized,
 * zeroed row per result with fill, which may fail after allocating some of
 * the row's fields (release frees whatever a row holds). On success *out
 * and *n own the rows; on failure nothing is kept. Finishes s either way. */
typedef int (*row_fill_fn)(sqlite3_stmt *s, void *row, struct kt_err *err);
typedef void (*row_release_fn)(void *row);

static int rows_collect(struct store *st, sqlite3_stmt *s, size_t elem, row_fill_fn fill,
			row_release_fn release, const char *what, void **out, int *n,
			struct kt_err *err)
{
	char *arr = NULL;
	int cap = 0, cnt = 0, src, i, rc = -1;

	*out = NULL;
	*n = 0;
	while ((src = sqlite3_step(s)) == SQLITE_ROW) {
		if (grow((void **)&arr, &cap, cnt, elem, err) < 0)
			goto out;
		if (fill(s, arr + (size_t)cnt++ * elem, err) < 0)
			goto out;
	}
	if (src != SQLITE_DONE) {
		store_db_error(st, err, what);
		goto out;
	}
	*out = arr;
	*n = cnt;
	arr = NULL;
	rc = 0;
out:
	store_stmt_done(s);
	if (arr) {
		for (i = 0; release && i < cnt; i++)
			release(arr + (size_t)i * elem);
		free(arr);
	}
	return rc;
}

/* Decimal text -> id; 0 when s is not a plain positive number. */
static int64_t parse_id(const char *s)
{
	char *end;
	long long v;

	if (!s || !*s || strspn(s, "0123456789") != strlen(s))
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	return errno || *end ? 0 : (int64_t)v;
}

static void this_host(char *buf, size_t n)
{
	if (gethostname(buf, n) != 0)
		snprintf(buf, n, "unknown");
	buf[n - 1] = 0;
}

/* kill(pid, 0) succeeds or fails with EPERM while the process exists (a
 * zombie counts: its parent has not reaped it yet). */
static int pid_alive(int pid)
{
	if (pid <= 0)
		return 0;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* ---- open, classify, migrate ---- */

/* ---- who may write, and how a reader opens ---- */

/* path with suffix appended, in buf; 0, or -1 when it does not fit. */
static int path_plus(char *buf, size_t n, const char *path, const char *suffix)
{
	int k = snprintf(buf, n, "%s%s", path, suffix);

	return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* The directory holding path, in buf. */
static void dir_of(const char *path, char *buf, size_t n)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(buf, n, "%s", dirname(tmp));
}

int store_writable(const char *path)
{
	char dir[PATH_MAX], wal[PATH_MAX], shm[PATH_MAX];

	if (!path || path_plus(wal, sizeof(wal), path, "-wal") < 0 ||
	    path_plus(shm, sizeof(shm), path, "-shm") < 0)
		return 0;
	if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
		return 0;
	dir_of(path, dir, sizeof(dir));
	if (access(dir, W_OK) == 0)
		return 1;
	return access(wal, W_OK) == 0 && access(shm, W_OK) == 0;
}

static void file_id_get(const char *path, struct store_file_id *id)
{
	char wal[PATH_MAX];
	struct stat sb;

	memset(id, 0, sizeof(*id));
	if (stat(path, &sb) == 0) {
		id->dev = (unsigned long long)sb.st_dev;
		id->ino = (unsigned long long)sb.st_ino;
		id->size = (unsigned long long)sb.st_size;
		id->mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
	}
	id->wal = path_plus(wal, sizeof(wal), path, "-wal") == 0 && access(wal, F_OK) == 0;
}

int store_stale(struct store *st)
{
	struct store_file_id now;

	if (!st || !st->immutable)
		return 0;
	file_id_get(st->path, &now);
	return memcmp(&now, &st->opened, sizeof(now)) != 0;
}

char *store_ro_uri(const char *path, int *immutable, struct kt_err *err)
{
	static const char hex[] = "0123456789ABCDEF";
	char shm[PATH_MAX];
	char *abs = NULL, *uri = NULL, *o;
	const unsigned char *p;
	int imm;

	if (!(abs = realpath(path, NULL))) {
		kt_err_set(err, KT_EIO, "cannot resolve %s: %s", path, strerror(errno));
		goto out;
	}
	imm = !store_writable(abs) &&
	      !(path_plus(shm, sizeof(shm), abs, "-shm") == 0 && access(shm, R_OK) == 0);
	if (!(uri = malloc(strlen(abs) * 3 + 32))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	/* Every byte but the unreserved ones percent-encoded, so that '?',
	 * '#' and '%' in a path stay in the path. */
	o = uri + sprintf(uri, "file:");
	for (p = (const unsigned char *)abs; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/-._~", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	strcpy(o, imm ? "?immutable=1" : "?mode=ro");
	if (immutable)
		*immutable = imm;
out:
	free(abs);
	return uri;
}

struct store_shape {
	int version, app_id, tables, ours;
};

/* Reads what the file is without writing to it. SQLite itself classifies
 * the bytes: a file that is not SQLite fails here with SQLITE_NOTADB, and
 * reading page 1 compares the page count in the header with the file's
 * size, so a truncated file fails with SQLITE_CORRUPT. Nothing but SQLite
 * may open the database file: closing any other descriptor on it drops
 * every POSIX lock this process holds there, and another process may then
 * checkpoint and delete the WAL under our connections. */
static int store_inspect(struct store *st, struct store_shape *sh, struct kt_err *err)
{
	static const char sql[] =
		"SELECT (SELECT user_version FROM pragma_user_version),"
		" (SELECT application_id FROM pragma_application_id),"
		" (SELECT count(*) FROM sqlite_master WHERE type = 'table'"
		"  AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'),"
		" (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN"
		"  ('devices', 'problems', 'configs', 'sweeps', 'trials', 'binaries', 'baselines'))";
	sqlite3_stmt *s = NULL;
	int rc = -1, src;

	memset(sh, 0, sizeof(*sh));
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		goto fail;
	if ((src = sqlite3_step(s)) != SQLITE_ROW)
		goto fail;
	sh->version = sqlite3_column_int(s, 0);
	sh->app_id = sqlite3_column_int(s, 1);
	sh->tables = sqlite3_column_int(s, 2);
	sh->ours = sqlite3_column_int(s, 3);
	rc = 0;
	goto out;
fail:
	src = sqlite3_errcode(st->db);
	if (src == SQLITE_NOTADB)
		kt_err_set(err, KT_ECORRUPT, "%s is not a ktune database (%s)", st->path,
			   sqlite3_errmsg(st->db));
	else if (src == SQLITE_CORRUPT)
		kt_err_set(err, KT_ECORRUPT, "%s is damaged (%s)", st->path,
			   sqlite3_errmsg(st->db));
	else
		store_db_error(st, err, "reading the database header");
out:
	sqlite3_finalize(s);
	return rc;
}

/* Decides from what store_inspect() found whether we may use (and, read-write,
 * migrate) the file. Nothing has been written when this refuses. */
static int store_classify(struct store *st, const struct store_shape *sh, struct kt_err *err)
{
	int v = sh->version;

	if (v > STORE_SCHEMA_VERSION) {
		if (sh->app_id != 0 && sh->app_id != STORE_APP_ID)
			return kt_err_set(err, KT_ECORRUPT,
					  "%s is not a ktune database (application id %#x)",
					  st->path, (unsigned)sh->app_id);
		return kt_err_set(err, KT_ESCHEMA,
				  "database schema version %d is newer than this ktune (%d); upgrade ktune (%s)",
				  v, STORE_SCHEMA_VERSION, st->path);
	}
	if (v == 0) {
		if (sh->tables > 0)
			return kt_err_set(err, KT_ECORRUPT,
					  "%s is a SQLite database but not a ktune one (%d tables of its own, no schema version)",
					  st->path, sh->tables);
		if (st->mode == STORE_RO)
			return kt_err_set(err, KT_ECORRUPT,
					  "%s is empty, not a ktune database", st->path);
		return 0;
	}
	if (sh->app_id != STORE_APP_ID ||
	    sh->ours != STORE_NTABLES)
		return kt_err_set(err, KT_ECORRUPT,
				  "%s is not a ktune database (schema version %d, application id %#x, %d of ktune's tables)",
				  st->path, v, (unsigned)sh->app_id, sh->ours);
	if (v < STORE_SCHEMA_VERSION && st->mode == STORE_RO)
		return kt_err_set(err, KT_ESCHEMA,
				  "%s has schema version %d, older than this ktune (%d); open it read-write once to upgrade it",
				  st->path, v, STORE_SCHEMA_VERSION);
	return 0;
}

/* Applies the missing steps in one transaction. The version is read again
 * inside it because another process may have migrated the file meanwhile. */
static int store_migrate(struct store *st, struct kt_err *err)
{
	char sql[96];
	sqlite3_stmt *s = NULL;
	int v, i, rc = -1, in_tx = 0;

	if (store_tx_begin(st, err) < 0)
		goto out;
	in_tx = 1;
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW) {
		store_db_error(st, err, "reading the schema version");
		goto out;
	}
	v = sqlite3_column_int(s, 0);
	if (v > STORE_SCHEMA_VERSION) {
		kt_err_set(err, KT_ESCHEMA,
			   "database schema version %d is newer than this ktune (%d); upgrade ktune (%s)",
			   v, STORE_SCHEMA_VERSION, st->path);
		goto out;
	}
	if (v == 0 && store_exec(st, kt_schema_sql, err) < 0)
		goto out;
	for (i = v; v > 0 && i < STORE_SCHEMA_VERSION; i++)
		if (store_exec(st, migrations[i], err) < 0)
			goto out;
	if (v > 0) {
		const char *view = strstr(kt_schema_sql, "CREATE VIEW winners");

		if (!view) {
			kt_err_set(err, KT_EINTERNAL, "schema.sql has no winners view");
			goto out;
		}
		if (store_exec(st, "DROP VIEW IF EXISTS winners", err) < 0 ||
		    store_exec(st, view, err) < 0)
			goto out;
	}
	snprintf(sql, sizeof(sql), "PRAGMA application_id = %d; PRAGMA user_version = %d",
		 STORE_APP_ID, STORE_SCHEMA_VERSION);
	if (store_exec(st, sql, err) < 0 || store_tx_commit(st, err) < 0)
		goto out;
	in_tx = 0;
	st->version = STORE_SCHEMA_VERSION;
	rc = 0;
out:
	sqlite3_finalize(s);
	if (in_tx)
		store_tx_rollback(st);
	return rc;
}

static int store_set_wal(struct store *st, struct kt_err *err)
{
	const struct timespec pause = { 0, 10 * 1000 * 1000 };
	sqlite3_stmt *s = NULL;
	const unsigned char *mode;
	int rc = -1, src, waited_ms = 0;

	if (sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &s, NULL) != SQLITE_OK) {
		store_db_error(st, err, "switching to WAL");
		goto out;
	}
	/* Switching a new file to WAL needs a lock that SQLite does not wait
	 * for with the busy handler (another connection creating the same
	 * file holds it for a moment): wait here, as long as the handler
	 * would. */
	while ((src = sqlite3_step(s)) != SQLITE_ROW) {
		if (((src & 0xff) != SQLITE_BUSY && (src & 0xff) != SQLITE_LOCKED) ||
		    waited_ms >= STORE_BUSY_MS) {
			store_db_error(st, err, "switching to WAL");
			goto out;
		}
		sqlite3_reset(s);
		nanosleep(&pause, NULL);
		waited_ms += 10;
	}
	mode = sqlite3_column_text(s, 0);
	/* NEEDSWORK: a file system without shared memory (some network mounts)
	 * cannot do WAL; we refuse rather than run with readers blocking. */
	if (!mode || strcmp((const char *)mode, "wal") != 0) {
		kt_err_set(err, KT_EDB, "%s: cannot use WAL journaling (got \"%s\")",
			   st->path, mode ? (const char *)mode : "?");
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(s);
	return rc;
}

int store_open(const char *path, enum store_mode mode, struct store **out,
	       struct kt_err *err)
{
	struct store *st = NULL;
	struct store_shape sh;
	struct stat sb;
	char open_path[sizeof(st->path) + 2];
	char *uri = NULL;
	int exists, flags, rc = -1;

	*out = NULL;
	if (!path || !*path || strlen(path) >= sizeof(st->path)) {
		kt_err_set(err, KT_EINVAL, "database path missing or too long");
		goto out;
	}
	exists = stat(path, &sb) == 0;
	if (!exists && errno != ENOENT) {
		kt_err_set(err, KT_EIO, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	if (!exists && mode == STORE_RO) {
		kt_err_set(err, KT_ENOTFOUND, "no database at %s", path);
		goto out;
	}
	if (exists && S_ISDIR(sb.st_mode)) {
		kt_err_set(err, KT_EINVAL, "%s is a directory, not a database", path);
		goto out;
	}

	if (mode == STORE_RW && !store_writable(path)) {
		kt_err_set(err, KT_EIO,
			   "%s is read-only for this user (the file or its directory is not writable): "
			   "commands that read it work, writing needs another copy",
			   path);
		goto out;
	}
	if (!(st = calloc(1, sizeof(*st)))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	st->mode = mode;
	snprintf(st->path, sizeof(st->path), "%s", path);
	if (mode == STORE_RO) {
		file_id_get(path, &st->opened);
		if (!(uri = store_ro_uri(path, &st->immutable, err)))
			goto out;
		flags = SQLITE_OPEN_READONLY;
	} else {
		/* A plain path that happens to start with "file:" stays a
		 * plain path (URI names are on for the reader's URIs). */
		snprintf(open_path, sizeof(open_path), "%s%s",
			 strncmp(path, "file:", 5) == 0 ? "./" : "", path);
		flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	}
	flags |= SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_URI;
	if (sqlite3_open_v2(uri ? uri : open_path, &st->db, flags, NULL) != SQLITE_OK) {
		if (st->db)
			store_db_error(st, err, "opening");
		else
			kt_err_set(err, KT_EINTERNAL, "out of memory opening %s", path);
		goto out;
	}
	sqlite3_extended_result_codes(st->db, 1);
	if (sqlite3_busy_timeout(st->db, STORE_BUSY_MS) != SQLITE_OK) {
		store_db_error(st, err, "setting the busy timeout");
		goto out;
	}
	/* Inspect before anything that writes: a refused file stays as it was. */
	if (store_inspect(st, &sh, err) < 0 || store_classify(st, &sh, err) < 0)
		goto out;
	st->version = sh.version;
	if (store_exec(st, "PRAGMA foreign_keys = ON", err) < 0)
		goto out;
	if (mode == STORE_RW) {
		/* NORMAL under WAL: a commit survives a killed process; only
		 * power loss can take the last few back, and a resumed sweep
		 * simply evaluates those configs again. */
		if (store_set_wal(st, err) < 0 ||
		    store_exec(st, "PRAGMA synchronous = NORMAL", err) < 0)
			goto out;
		if (st->version < STORE_SCHEMA_VERSION && store_migrate(st, err) < 0)
			goto out;
	}
	*out = st;
	st = NULL;
	rc = 0;
out:
	free(uri);
	store_close(st);
	return rc;
}

void store_close(struct store *st)
{
	int i;

	if (!st)
		return;
	for (i = 0; i < SQL__COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	/* _v2: a statement someone prepared on store_sqlite() and did not
	 * finalize delays the close instead of leaking the connection. */
	sqlite3_close_v2(st->db);
	free(st);
}

int store_version(struct store *st)
{
	return st->version;
}

struct sqlite3 *store_sqlite(struct store *st)
{
	return st->db;
}

/* ---- devices ---- */

static void device_from_row(sqlite3_stmt *s, struct store_device *d)
{
	memset(d, 0, sizeof(*d));
	d->id = sqlite3_column_int64(s, 0);
	col_copy(s, 1, d->name, sizeof(d->name));
	col_copy(s, 2, d->uuid, sizeof(d->uuid));
	col_copy(s, 3, d->arch, sizeof(d->arch));
	d->sms = sqlite3_column_int(s, 4);
	d->l2_bytes = (long)sqlite3_column_int64(s, 5);
	d->smem_optin = sqlite3_column_int(s, 6);
	d->clock_mhz = sqlite3_column_int(s, 7);
	d->mem_clock_mhz = sqlite3_column_int(s, 8);
	col_copy(s, 9, d->driver, sizeof(d->driver));
	col_copy(s, 10, d->cuda, sizeof(d->cuda));
	col_copy(s, 11, d->nvrtc, sizeof(d->nvrtc));
}

int store_device_upsert(struct store *st, struct store_device *d, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if (!d->uuid[0])
		return kt_err_set(err, KT_EINVAL, "device has no UUID");
	if (!(s = store_stmt(st, SQL_DEVICE_UPSERT, err)))
		return -1;
	b |= bind_text(s, 1, d->uuid);
	b |= bind_text(s, 2, d->name);
	b |= bind_text(s, 3, d->arch);
	b |= sqlite3_bind_int(s, 4, d->sms);
	b |= sqlite3_bind_int64(s, 5, d->l2_bytes);
	b |= sqlite3_bind_int(s, 6, d->smem_optin);
	b |= sqlite3_bind_int(s, 7, d->clock_mhz);
	b |= sqlite3_bind_int(s, 8, d->mem_clock_mhz);
	b |= bind_text(s, 9, d->driver);
	b |= bind_text(s, 10, d->cuda);
	b |= bind_text(s, 11, d->nvrtc);
	b |= sqlite3_bind_double(s, 12, store_now());
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (sqlite3_step(s) != SQLITE_ROW) {
		store_db_error(st, err, "recording a device");
		goto out;
	}
	d->id = sqlite3_column_int64(s, 0);
	if (step_done(st, s, err, "recording a device") < 0)
		goto out;
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

static int device_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	(void)err;
	device_from_row(s, row);
	return 0;
}

int store_devices_list(struct store *st, struct store_device **out, int *n,
		       struct kt_err *err)
{
	sqlite3_stmt *s;

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_DEVICES_LIST, err)))
		return -1;
	return rows_collect(st, s, sizeof(**out), device_fill, NULL, "listing devices",
			    (void **)out, n, err);
}

int store_device_find(struct store *st, const char *uuid_or_id,
		      struct store_device *out, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int64_t id = parse_id(uuid_or_id);
	int rc = -1;

	if (!uuid_or_id)
		return kt_err_set(err, KT_EINVAL, "no device given");
	if (!(s = store_stmt(st, SQL_DEVICE_FIND, err)))
		return -1;
	b |= bind_text(s, 1, uuid_or_id);
	if (id > 0)
		b |= sqlite3_bind_int64(s, 2, id);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if ((rc = step_row(st, s, err, "finding a device")) == 1)
		device_from_row(s, out);
out:
	store_stmt_done(s);
	return rc;
}

/* ---- problems and configs ---- */

/* Finds (family, key) with find_id, else inserts it with insert_id and
 * finds it again. The insert does nothing when the row exists, so two
 * connections interning the same key at once (one sweep thread per GPU,
 * same family) both end with the one row, without a transaction. */
static int intern(struct store *st, enum store_sql find_id, enum store_sql insert_id,
		  const char *family, const char *key, const char *json, int64_t *id,
		  const char *what, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s = NULL;
	int src, pass, rc = -1;

	if (!family || !*family || !key || !json)
		return kt_err_set(err, KT_EINVAL, "%s: family, key and JSON are required", what);
	for (pass = 0; pass < 2; pass++) {
		if (!(s = store_stmt(st, find_id, err)))
			goto out;
		b |= bind_text(s, 1, family);
		b |= bind_text(s, 2, key);
		if (b != SQLITE_OK) {
			bind_error(st, b, err);
			goto out;
		}
		src = sqlite3_step(s);
		if (src == SQLITE_ROW) {
			*id = sqlite3_column_int64(s, 0);
			rc = 0;
			goto out;
		}
		if (src != SQLITE_DONE) {
			store_db_error(st, err, what);
			goto out;
		}
		store_stmt_done(s);
		s = NULL;
		if (pass == 1)
			break;
		if (!(s = store_stmt(st, insert_id, err)))
			goto out;
		b |= bind_text(s, 1, family);
		b |= bind_text(s, 2, key);
		b |= bind_text(s, 3, json);
		if (b != SQLITE_OK) {
			bind_error(st, b, err);
			goto out;
		}
		if (step_done(st, s, err, what) < 0)
			goto out;
		store_stmt_done(s);
		s = NULL;
	}
	kt_err_set(err, KT_EINTERNAL, "%s: %s/%s vanished after insert", what, family, key);
out:
	store_stmt_done(s);
	return rc;
}

int store_problem_intern(struct store *st, const char *family, const char *shape_key,
			 const char *shape_json, int64_t *id, struct kt_err *err)
{
	return intern(st, SQL_PROBLEM_FIND, SQL_PROBLEM_INSERT, family, shape_key,
		      shape_json, id, "recording a problem", err);
}

int store_config_intern(struct store *st, const char *family, const char *config_key,
			const char *params_json, int64_t *id, struct kt_err *err)
{
	return intern(st, SQL_CONFIG_FIND, SQL_CONFIG_INSERT, family, config_key,
		      params_json, id, "recording a config", err);
}

/* ---- sweeps ---- */

const char *store_sweep_status_name(enum store_sweep_status s)
{
	if ((int)s < 0 || (int)s >= N_SWEEP_STATUS)
		return "unknown";
	return sweep_status_names[s];
}

static enum store_sweep_status sweep_status_parse(const char *name)
{
	int i;

	for (i = 0; i < N_SWEEP_STATUS; i++)
		if (name && strcmp(name, sweep_status_names[i]) == 0)
			return (enum store_sweep_status)i;
	return STORE_SWEEP_FAILED;
}

/* The transaction makes find-then-insert atomic: two processes beginning
 * the same sweep at once get one sweep, and the second sees the first as a
 * live owner. */
int store_sweep_begin(struct store *st, const struct store_sweep_spec *spec,
		      int64_t *sweep_id, int *resumed, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s = NULL;
	char host[64], owner_host[64];
	int64_t found = 0;
	int owner_pid = 0, running = 0, in_tx = 0, src, rc = -1;

	*resumed = 0;
	if (!spec->strategy || !*spec->strategy || !spec->options_key)
		return kt_err_set(err, KT_EINVAL, "a sweep needs a strategy and an options key");
	this_host(host, sizeof(host));
	if (store_tx_begin(st, err) < 0)
		goto out;
	in_tx = 1;
	if (!(s = store_stmt(st, SQL_SWEEP_FIND_PLAN, err)))
		goto out;
	b |= sqlite3_bind_int64(s, 1, spec->device_id);
	b |= sqlite3_bind_int64(s, 2, spec->problem_id);
	b |= bind_text(s, 3, spec->strategy);
	b |= bind_text(s, 4, spec->options_key);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	src = sqlite3_step(s);
	if (src == SQLITE_ROW) {
		found = sqlite3_column_int64(s, 0);
		running = strcmp((const char *)sqlite3_column_text(s, 1), "running") == 0;
		owner_pid = sqlite3_column_int(s, 2);
		col_copy(s, 3, owner_host, sizeof(owner_host));
	} else if (src != SQLITE_DONE) {
		store_db_error(st, err, "looking for a sweep to resume");
		goto out;
	}
	store_stmt_done(s);
	s = NULL;

	if (found) {
		/* NEEDSWORK: an owner on another host cannot be checked, so its
		 * sweep is taken over; a heartbeat column would tell a live one. */
		if (running && strcmp(owner_host, host) == 0 && pid_alive(owner_pid)) {
			kt_err_set(err, KT_ECONFLICT,
				   "sweep %lld is already running (pid %d on %s)",
				   (long long)found, owner_pid, owner_host);
			goto out;
		}
		if (!(s = store_stmt(st, SQL_SWEEP_RESUME, err)))
			goto out;
		b |= sqlite3_bind_int64(s, 1, found);
		b |= sqlite3_bind_int(s, 2, (int)getpid());
		b |= bind_text(s, 3, host);
		b |= sqlite3_bind_int64(s, 4, spec->planned);
		if (b != SQLITE_OK) {
			bind_error(st, b, err);
			goto out;
		}
		if (step_done(st, s, err, "resuming a sweep") < 0)
			goto out;
		*sweep_id = found;
		*resumed = 1;
	} else {
		if (!(s = store_stmt(st, SQL_SWEEP_INSERT, err)))
			goto out;
		b |= sqlite3_bind_int64(s, 1, spec->device_id);
		b |= sqlite3_bind_int64(s, 2, spec->problem_id);
		b |= bind_text(s, 3, spec->strategy);
		b |= bind_text(s, 4, spec->options_key);
		b |= bind_text(s, 5, spec->provenance_json ? spec->provenance_json : "{}");
		b |= sqlite3_bind_int64(s, 6, spec->planned);
		b |= sqlite3_bind_double(s, 7, spec->started > 0 && isfinite(spec->started) ?
					 spec->started : store_now());
		b |= sqlite3_bind_int(s, 8, (int)getpid());
		b |= bind_text(s, 9, host);
		if (b != SQLITE_OK) {
			bind_error(st, b, err);
			goto out;
		}
		if (step_done(st, s, err, "starting a sweep") < 0)
			goto out;
		*sweep_id = sqlite3_last_insert_rowid(st->db);
	}
	store_stmt_done(s);
	s = NULL;
	if (store_tx_commit(st, err) < 0)
		goto out;
	in_tx = 0;
	rc = 0;
out:
	store_stmt_done(s);
	if (in_tx)
		store_tx_rollback(st);
	if (rc < 0)
		*resumed = 0;
	return rc;
}

int store_sweep_end(struct store *st, int64_t sweep_id, enum store_sweep_status status,
		    struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if ((int)status < 0 || (int)status >= N_SWEEP_STATUS)
		return kt_err_set(err, KT_EINVAL, "no sweep status %d", (int)status);
	if (!(s = store_stmt(st, SQL_SWEEP_END, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	b |= bind_text(s, 2, sweep_status_names[status]);
	if (status != STORE_SWEEP_RUNNING)
		b |= sqlite3_bind_double(s, 3, store_now());
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (step_done(st, s, err, "ending a sweep") < 0)
		goto out;
	if (sqlite3_changes(st->db) == 0) {
		kt_err_set(err, KT_ENOTFOUND, "no sweep %lld", (long long)sweep_id);
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

int store_sweep_find(struct store *st, int64_t device_id, int64_t problem_id,
		     const char *strategy, const char *options_key, int64_t *sweep_id,
		     struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	*sweep_id = 0;
	if (!strategy || !options_key)
		return kt_err_set(err, KT_EINVAL, "a sweep's plan needs a strategy and an options key");
	if (!(s = store_stmt(st, SQL_SWEEP_FIND_PLAN, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, device_id);
	b |= sqlite3_bind_int64(s, 2, problem_id);
	b |= bind_text(s, 3, strategy);
	b |= bind_text(s, 4, options_key);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if ((rc = step_row(st, s, err, "looking for a sweep")) == 1)
		*sweep_id = sqlite3_column_int64(s, 0);
out:
	store_stmt_done(s);
	return rc;
}

void store_sweep_release(struct store_sweep *s)
{
	if (!s)
		return;
	free(s->options_key);
	free(s->provenance_json);
	memset(s, 0, sizeof(*s));
}

static int sweep_from_row(sqlite3_stmt *s, struct store_sweep *out, struct kt_err *err)
{
	memset(out, 0, sizeof(*out));
	out->id = sqlite3_column_int64(s, 0);
	out->device_id = sqlite3_column_int64(s, 1);
	out->problem_id = sqlite3_column_int64(s, 2);
	col_copy(s, 3, out->family, sizeof(out->family));
	col_copy(s, 4, out->shape_key, sizeof(out->shape_key));
	col_copy(s, 5, out->strategy, sizeof(out->strategy));
	out->status = sweep_status_parse((const char *)sqlite3_column_text(s, 8));
	out->planned = (long)sqlite3_column_int64(s, 9);
	out->done = (long)sqlite3_column_int64(s, 10);
	out->started = col_double(s, 11, 0);
	out->finished = col_double(s, 12, 0);
	out->owner_pid = sqlite3_column_int(s, 13);
	col_copy(s, 14, out->owner_host, sizeof(out->owner_host));
	if (col_dup_nn(s, 6, &out->options_key, err) < 0 ||
	    col_dup_nn(s, 7, &out->provenance_json, err) < 0) {
		store_sweep_release(out);
		return -1;
	}
	return 0;
}

int store_sweep_get(struct store *st, int64_t sweep_id, struct store_sweep *out,
		    struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int src, rc = -1;

	memset(out, 0, sizeof(*out));
	if (!(s = store_stmt(st, SQL_SWEEP_GET, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	src = sqlite3_step(s);
	if (src == SQLITE_ROW)
		rc = sweep_from_row(s, out, err);
	else if (src == SQLITE_DONE)
		kt_err_set(err, KT_ENOTFOUND, "no sweep %lld", (long long)sweep_id);
	else
		store_db_error(st, err, "reading a sweep");
out:
	store_stmt_done(s);
	return rc;
}

static int sweep_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	return sweep_from_row(s, row, err);
}

static void sweep_release_row(void *row)
{
	store_sweep_release(row);
}

int store_sweeps_list(struct store *st, int limit, struct store_sweep **out, int *n,
		      struct kt_err *err)
{
	int b;
	sqlite3_stmt *s;

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_SWEEPS_LIST, err)))
		return -1;
	b = sqlite3_bind_int(s, 1, limit > 0 ? limit : -1);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		store_stmt_done(s);
		return -1;
	}
	return rows_collect(st, s, sizeof(**out), sweep_fill, sweep_release_row, "listing sweeps",
			    (void **)out, n, err);
}

/* ---- trials ---- */

static int bind_pos_int(sqlite3_stmt *s, int i, int v)
{
	return v > 0 ? sqlite3_bind_int(s, i, v) : sqlite3_bind_null(s, i);
}

static int bind_pos_double(sqlite3_stmt *s, int i, double v)
{
	return v > 0 ? sqlite3_bind_double(s, i, v) : sqlite3_bind_null(s, i);
}

/* Binds c from parameter i on: all eight fields (sm, mem, power, temp;
 * before then after) when full, else sm before, sm after, power after,
 * temp after. Fields <= 0 go in as NULL. */
static int bind_conditions(sqlite3_stmt *s, int i, const struct store_conditions *c, int full)
{
	int b = SQLITE_OK;

	b |= bind_pos_int(s, i++, c->sm_mhz_before);
	b |= bind_pos_int(s, i++, c->sm_mhz_after);
	if (full) {
		b |= bind_pos_int(s, i++, c->mem_mhz_before);
		b |= bind_pos_int(s, i++, c->mem_mhz_after);
		b |= bind_pos_double(s, i++, c->power_w_before);
	}
	b |= bind_pos_double(s, i++, c->power_w_after);
	if (full)
		b |= bind_pos_int(s, i++, c->temp_c_before);
	b |= bind_pos_int(s, i, c->temp_c_after);
	return b;
}

int store_trial_add(struct store *st, const struct store_trial *t, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int ok, rc = -1;

	if (!t->status)
		return kt_err_set(err, KT_EINVAL, "a trial needs a status");
	ok = strcmp(t->status, "ok") == 0;
	if (!(s = store_stmt(st, SQL_TRIAL_ADD, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, t->sweep_id);
	b |= sqlite3_bind_int64(s, 2, t->config_id);
	b |= bind_text(s, 3, t->status);
	/* Timings mean something only for a correct run: NULL otherwise, so
	 * no query can mistake a fault's zero for a fast kernel. */
	if (ok) {
		b |= sqlite3_bind_double(s, 4, t->median_us);
		b |= sqlite3_bind_double(s, 5, t->min_us);
		b |= sqlite3_bind_double(s, 6, t->p90_us);
		b |= sqlite3_bind_double(s, 7, t->spread);
	}
	b |= sqlite3_bind_int(s, 8, t->reps);
	if (t->rel_err >= 0)
		b |= sqlite3_bind_double(s, 9, t->rel_err);
	b |= sqlite3_bind_double(s, 10, t->compile_ms);
	b |= bind_text(s, 11, t->binary_key);
	b |= bind_text(s, 12, t->message);
	b |= bind_text(s, 13, t->log);
	b |= sqlite3_bind_double(s, 14, store_now());
	b |= bind_conditions(s, 15, &t->cond, 1);
	b |= sqlite3_bind_int(s, 23, t->throttled ? 1 : 0);
	if (ok && t->norm_us > 0)
		b |= sqlite3_bind_double(s, 24, t->norm_us);
	b |= bind_text(s, 25, t->errors_json);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (sqlite3_step(s) != SQLITE_DONE) {
		if (sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_UNIQUE)
			kt_err_set(err, KT_ECONFLICT,
				   "config %lld is already recorded in sweep %lld",
				   (long long)t->config_id, (long long)t->sweep_id);
		else if (sqlite3_extended_errcode(st->db) == SQLITE_CONSTRAINT_CHECK)
			kt_err_set(err, KT_EINVAL, "bad trial status \"%s\"", t->status);
		else
			store_db_error(st, err, "recording a trial");
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

int store_trials_done(struct store *st, int64_t sweep_id,
		      void (*fn)(const char *config_key, void *arg), void *arg,
		      struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int src, rc = -1;

	if (!(s = store_stmt(st, SQL_TRIALS_DONE, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	/* fn may call other store functions (not this one) meanwhile. */
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	while ((src = sqlite3_step(s)) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(s, 0), arg);
	if (src != SQLITE_DONE) {
		store_db_error(st, err, "listing a sweep's trials");
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

void store_trial_row_release(struct store_trial_row *r)
{
	if (!r)
		return;
	free(r->config_key);
	free(r->params_json);
	free(r->message);
	free(r->log);
	free(r->errors_json);
	memset(r, 0, sizeof(*r));
}

void store_trial_rows_free(struct store_trial_row *rows, int n)
{
	int i;

	for (i = 0; rows && i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);
}

static int trial_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	struct store_trial_row *r = row;

	r->sweep_id = sqlite3_column_int64(s, 0);
	col_copy(s, 1, r->status, sizeof(r->status));
	r->median_us = col_double(s, 4, 0);
	r->min_us = col_double(s, 5, 0);
	r->p90_us = col_double(s, 6, 0);
	r->spread = col_double(s, 7, 0);
	r->rel_err = col_double(s, 8, -1);
	r->compile_ms = col_double(s, 9, 0);
	r->retime_us = col_double(s, 10, 0);
	r->reps = sqlite3_column_int(s, 11);
	r->tournament_us = col_double(s, 14, 0);
	r->cond.sm_mhz_before = sqlite3_column_int(s, 15);
	r->cond.sm_mhz_after = sqlite3_column_int(s, 16);
	r->cond.mem_mhz_before = sqlite3_column_int(s, 17);
	r->cond.mem_mhz_after = sqlite3_column_int(s, 18);
	r->cond.power_w_before = col_double(s, 19, 0);
	r->cond.power_w_after = col_double(s, 20, 0);
	r->cond.temp_c_before = sqlite3_column_int(s, 21);
	r->cond.temp_c_after = sqlite3_column_int(s, 22);
	r->throttled = sqlite3_column_int(s, 23);
	r->norm_us = col_double(s, 24, 0);
	r->id = sqlite3_column_int64(s, 26);
	if (col_dup_nn(s, 2, &r->config_key, err) < 0 ||
	    col_dup_nn(s, 3, &r->params_json, err) < 0 || col_dup(s, 12, &r->message, err) < 0 ||
	    col_dup(s, 13, &r->log, err) < 0 || col_dup(s, 25, &r->errors_json, err) < 0)
		return -1;
	return 0;
}

static void trial_release_row(void *row)
{
	store_trial_row_release(row);
}

int store_trials_list(struct store *st, int64_t sweep_id, int limit,
		      struct store_trial_row **out, int *n, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_TRIALS_LIST, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	b |= sqlite3_bind_int(s, 2, limit > 0 ? limit : -1);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		store_stmt_done(s);
		return -1;
	}
	return rows_collect(st, s, sizeof(**out), trial_fill, trial_release_row, "listing trials",
			    (void **)out, n, err);
}

/* Sets one time column of a sweep's trial of config_key (the statement
 * id's third parameter); KT_ENOTFOUND when the sweep has no such trial. */
static int trial_time_set(struct store *st, enum store_sql id, int64_t sweep_id,
			  const char *config_key, double us, const char *what, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if (!(s = store_stmt(st, id, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	b |= bind_text(s, 2, config_key);
	b |= sqlite3_bind_double(s, 3, us);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (step_done(st, s, err, what) < 0)
		goto out;
	if (sqlite3_changes(st->db) == 0) {
		kt_err_set(err, KT_ENOTFOUND, "sweep %lld has no trial of config %s",
			   (long long)sweep_id, config_key);
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

int store_retime_set(struct store *st, int64_t sweep_id, const char *config_key,
		     double retime_us, struct kt_err *err)
{
	if (!config_key)
		return kt_err_set(err, KT_EINVAL, "no config key");
	return trial_time_set(st, SQL_RETIME_SET, sweep_id, config_key, retime_us,
			      "recording a re-timing", err);
}

int store_tournament_set(struct store *st, int64_t sweep_id, const char *config_key,
			 double tournament_us, struct kt_err *err)
{
	if (!config_key || !(tournament_us > 0))
		return kt_err_set(err, KT_EINVAL, "a tournament time needs a config and a time > 0");
	return trial_time_set(st, SQL_TOURNAMENT_SET, sweep_id, config_key, tournament_us,
			      "recording a tournament time", err);
}

/* ---- measurements ---- */

int store_measure_add(struct store *st, const struct store_measure *m, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int ok, rc = -1;

	if (!m->kind || !m->status)
		return kt_err_set(err, KT_EINVAL, "a measurement needs a kind and a status");
	if (!m->config_key == !m->baseline)
		return kt_err_set(err, KT_EINVAL, "a measurement names a config or a baseline");
	ok = strcmp(m->status, "ok") == 0;
	if (!(s = store_stmt(st, SQL_MEASURE_ADD, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, m->sweep_id);
	b |= sqlite3_bind_double(s, 2, m->run);
	b |= bind_text(s, 3, m->kind);
	b |= bind_text(s, 4, m->config_key);
	b |= bind_text(s, 5, m->baseline);
	b |= sqlite3_bind_int(s, 6, m->round);
	b |= sqlite3_bind_int(s, 7, m->position);
	b |= bind_text(s, 8, m->status);
	if (ok) {
		b |= sqlite3_bind_double(s, 9, m->median_us);
		b |= sqlite3_bind_double(s, 10, m->min_us);
		b |= sqlite3_bind_double(s, 11, m->p90_us);
	}
	b |= sqlite3_bind_int(s, 12, m->reps);
	b |= bind_conditions(s, 13, &m->cond, 0);
	b |= bind_text(s, 17, m->message);
	b |= sqlite3_bind_double(s, 18, store_now());
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (sqlite3_step(s) != SQLITE_DONE) {
		store_db_error(st, err, "recording a measurement");
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

void store_measure_row_release(struct store_measure_row *r)
{
	if (!r)
		return;
	free(r->config_key);
	free(r->baseline);
	free(r->message);
	memset(r, 0, sizeof(*r));
}

static int measure_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	struct store_measure_row *r = row;

	col_copy(s, 0, r->kind, sizeof(r->kind));
	col_copy(s, 1, r->status, sizeof(r->status));
	r->run = col_double(s, 4, 0);
	r->median_us = col_double(s, 5, 0);
	r->min_us = col_double(s, 6, 0);
	r->p90_us = col_double(s, 7, 0);
	r->round = sqlite3_column_int(s, 8);
	r->position = sqlite3_column_int(s, 9);
	r->reps = sqlite3_column_int(s, 10);
	r->cond.sm_mhz_before = sqlite3_column_int(s, 11);
	r->cond.sm_mhz_after = sqlite3_column_int(s, 12);
	r->cond.power_w_after = col_double(s, 13, 0);
	r->cond.temp_c_after = sqlite3_column_int(s, 14);
	if (col_dup_nn(s, 2, &r->config_key, err) < 0 || col_dup_nn(s, 3, &r->baseline, err) < 0 ||
	    col_dup(s, 15, &r->message, err) < 0)
		return -1;
	return 0;
}

static void measure_release_row(void *row)
{
	store_measure_row_release(row);
}

int store_measures_list(struct store *st, int64_t sweep_id, const char *kind,
			struct store_measure_row **out, int *n, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_MEASURES_LIST, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, sweep_id);
	b |= bind_text(s, 2, kind);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		store_stmt_done(s);
		return -1;
	}
	return rows_collect(st, s, sizeof(**out), measure_fill, measure_release_row,
			    "listing measurements", (void **)out, n, err);
}

int store_faulty_configs(struct store *st, int64_t device_id, int64_t problem_id,
			 int64_t except_sweep,
			 void (*fn)(const char *config_key, const char *status, void *arg),
			 void *arg, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int src, rc = -1;

	if (!(s = store_stmt(st, SQL_FAULTY_CONFIGS, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, device_id);
	b |= sqlite3_bind_int64(s, 2, problem_id);
	b |= sqlite3_bind_int64(s, 3, except_sweep);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	while ((src = sqlite3_step(s)) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
		   arg);
	if (src != SQLITE_DONE) {
		store_db_error(st, err, "listing faulty configs");
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

int store_family_trials(struct store *st, const char *family, int64_t except_device,
			int64_t except_problem, int limit,
			void (*fn)(const char *shape_json, const char *device_uuid,
				   const char *config_key, double median_us, void *arg),
			void *arg, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int src, rc = -1;

	if (!family)
		return kt_err_set(err, KT_EINVAL, "no family");
	if (!(s = store_stmt(st, SQL_FAMILY_TRIALS, err)))
		return -1;
	b |= bind_text(s, 1, family);
	b |= sqlite3_bind_int64(s, 2, except_device);
	b |= sqlite3_bind_int64(s, 3, except_problem);
	b |= sqlite3_bind_int(s, 4, limit > 0 ? limit : -1);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	while ((src = sqlite3_step(s)) == SQLITE_ROW)
		fn((const char *)sqlite3_column_text(s, 0), (const char *)sqlite3_column_text(s, 1),
		   (const char *)sqlite3_column_text(s, 2), sqlite3_column_double(s, 3), arg);
	if (src != SQLITE_DONE) {
		store_db_error(st, err, "listing the family's trials");
		goto out;
	}
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

/* ---- baselines ---- */

int store_baseline_add(struct store *st, int64_t device_id, int64_t problem_id,
		       int64_t sweep_id, const char *name, double median_us,
		       struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if (!name || !*name)
		return kt_err_set(err, KT_EINVAL, "a baseline needs a name");
	if (!(s = store_stmt(st, SQL_BASELINE_ADD, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, device_id);
	b |= sqlite3_bind_int64(s, 2, problem_id);
	if (sweep_id > 0)
		b |= sqlite3_bind_int64(s, 3, sweep_id);
	b |= bind_text(s, 4, name);
	b |= sqlite3_bind_double(s, 5, median_us);
	b |= sqlite3_bind_double(s, 6, store_now());
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (step_done(st, s, err, "recording a baseline") < 0)
		goto out;
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}

int store_baseline_get(struct store *st, int64_t device_id, int64_t problem_id,
		       const char *name, double *median_us, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if (!(s = store_stmt(st, SQL_BASELINE_GET, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, device_id);
	b |= sqlite3_bind_int64(s, 2, problem_id);
	b |= bind_text(s, 3, name);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if ((rc = step_row(st, s, err, "reading a baseline")) == 1)
		*median_us = sqlite3_column_double(s, 0);
out:
	store_stmt_done(s);
	return rc;
}

/* ---- winners ---- */

void store_winner_release(struct store_winner *w)
{
	if (!w)
		return;
	free(w->shape_key);
	free(w->shape_json);
	free(w->config_key);
	free(w->params_json);
	free(w->provenance_json);
	memset(w, 0, sizeof(*w));
}

static int winner_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	struct store_winner *w = row;

	w->device_id = sqlite3_column_int64(s, 0);
	w->problem_id = sqlite3_column_int64(s, 1);
	w->sweep_id = sqlite3_column_int64(s, 2);
	col_copy(s, 3, w->device_name, sizeof(w->device_name));
	col_copy(s, 4, w->device_uuid, sizeof(w->device_uuid));
	col_copy(s, 5, w->arch, sizeof(w->arch));
	col_copy(s, 6, w->family, sizeof(w->family));
	w->median_us = col_double(s, 11, 0);
	w->min_us = col_double(s, 12, 0);
	w->p90_us = col_double(s, 13, 0);
	w->retime_us = col_double(s, 14, 0);
	w->cublas_us = col_double(s, 15, 0);
	w->naive_us = col_double(s, 16, 0);
	if (col_dup_nn(s, 7, &w->shape_key, err) < 0 || col_dup_nn(s, 8, &w->shape_json, err) < 0 ||
	    col_dup_nn(s, 9, &w->config_key, err) < 0 ||
	    col_dup_nn(s, 10, &w->params_json, err) < 0 ||
	    col_dup_nn(s, 17, &w->provenance_json, err) < 0)
		return -1;
	return 0;
}

static void winner_release_row(void *row)
{
	store_winner_release(row);
}

int store_winners_list(struct store *st, const char *device, const char *arch,
		       const char *family, struct store_winner **out, int *n,
		       struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int64_t id = parse_id(device);

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_WINNERS_LIST, err)))
		return -1;
	b |= bind_text(s, 1, device);
	if (id > 0)
		b |= sqlite3_bind_int64(s, 2, id);
	b |= bind_text(s, 3, arch);
	b |= bind_text(s, 4, family);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		store_stmt_done(s);
		return -1;
	}
	return rows_collect(st, s, sizeof(**out), winner_fill, winner_release_row,
			    "listing winners", (void **)out, n, err);
}

int store_winner_get(struct store *st, int64_t device_id, int64_t problem_id,
		     struct store_winner *w, struct kt_err *err)
{
	sqlite3_stmt *s;
	int b = SQLITE_OK, rc = -1;

	memset(w, 0, sizeof(*w));
	if (!(s = store_stmt(st, SQL_WINNER_GET, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, device_id);
	b |= sqlite3_bind_int64(s, 2, problem_id);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if ((rc = step_row(st, s, err, "reading a winner")) == 1 && winner_fill(s, w, err) < 0) {
		store_winner_release(w);
		rc = -1;
	}
out:
	store_stmt_done(s);
	return rc;
}

/* ---- what changed since a lookup loaded ---- */

void store_marks_release(struct store_marks *m)
{
	if (!m)
		return;
	free(m->sweeps);
	memset(m, 0, sizeof(*m));
}

static int sweep_mark_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	struct store_sweep_mark *k = row;

	(void)err;
	k->id = sqlite3_column_int64(s, 0);
	k->device_id = sqlite3_column_int64(s, 1);
	k->problem_id = sqlite3_column_int64(s, 2);
	k->finished = sqlite3_column_double(s, 3);
	k->running = sqlite3_column_int(s, 4);
	return 0;
}

int store_marks_get(struct store *st, struct store_marks *m, struct kt_err *err)
{
	sqlite3_stmt *s;
	int src;

	memset(m, 0, sizeof(*m));
	if (!(s = store_stmt(st, SQL_MARKS_MAX, err)))
		return -1;
	src = sqlite3_step(s);
	if (src != SQLITE_ROW) {
		store_db_error(st, err, "reading the change marks");
		store_stmt_done(s);
		return -1;
	}
	m->trial_max = sqlite3_column_int64(s, 0);
	m->baseline_max = sqlite3_column_int64(s, 1);
	store_stmt_done(s);
	if (!(s = store_stmt(st, SQL_SWEEP_MARKS, err)))
		return -1;
	return rows_collect(st, s, sizeof(*m->sweeps), sweep_mark_fill, NULL,
			    "reading the sweeps' marks", (void **)&m->sweeps, &m->nsweeps, err);
}

static int pair_fill(sqlite3_stmt *s, void *row, struct kt_err *err)
{
	struct store_pair *p = row;

	(void)err;
	p->device_id = sqlite3_column_int64(s, 0);
	p->problem_id = sqlite3_column_int64(s, 1);
	return 0;
}

int store_pairs_since(struct store *st, const struct store_marks *from,
		      const struct store_marks *to, struct store_pair **out, int *n,
		      struct kt_err *err)
{
	sqlite3_stmt *s;
	int b = SQLITE_OK;

	*out = NULL;
	*n = 0;
	if (!(s = store_stmt(st, SQL_PAIRS_SINCE, err)))
		return -1;
	b |= sqlite3_bind_int64(s, 1, from->trial_max);
	b |= sqlite3_bind_int64(s, 2, to->trial_max);
	b |= sqlite3_bind_int64(s, 3, from->baseline_max);
	b |= sqlite3_bind_int64(s, 4, to->baseline_max);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		store_stmt_done(s);
		return -1;
	}
	return rows_collect(st, s, sizeof(**out), pair_fill, NULL, "listing changed problems",
			    (void **)out, n, err);
}

/* ---- compiled-binary cache ---- */

int store_binary_get(struct store *st, const char *key, void **cubin, size_t *len,
		     char **log, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	const void *blob;
	void *copy = NULL;
	char *logc = NULL;
	size_t n;
	int rc = -1;

	*cubin = NULL;
	*len = 0;
	if (log)
		*log = NULL;
	if (!key)
		return kt_err_set(err, KT_EINVAL, "no binary key");
	if (!(s = store_stmt(st, SQL_BINARY_GET, err)))
		return -1;
	b |= bind_text(s, 1, key);
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if ((rc = step_row(st, s, err, "reading a cached binary")) != 1)
		goto out;
	rc = -1;
	blob = sqlite3_column_blob(s, 0);
	n = (size_t)sqlite3_column_bytes(s, 0);
	if (!(copy = malloc(n ? n : 1))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	if (n)
		memcpy(copy, blob, n);
	if (log && col_dup(s, 1, &logc, err) < 0)
		goto out;
	*cubin = copy;
	*len = n;
	if (log)
		*log = logc;
	copy = NULL;
	logc = NULL;
	rc = 1;
out:
	store_stmt_done(s);
	free(copy);
	free(logc);
	return rc;
}

int store_binary_put(struct store *st, const char *key, const char *arch,
		     const char *nvrtc_version, const void *cubin, size_t len,
		     const char *log, double compile_ms, struct kt_err *err)
{
	int b = SQLITE_OK;
	sqlite3_stmt *s;
	int rc = -1;

	if (!key || !arch || !nvrtc_version || !cubin)
		return kt_err_set(err, KT_EINVAL, "a cached binary needs key, arch, NVRTC version and bytes");
	if (len > INT_MAX)
		return kt_err_set(err, KT_ETOOBIG, "binary %s is too large to cache (%zu bytes)", key, len);
	if (!(s = store_stmt(st, SQL_BINARY_PUT, err)))
		return -1;
	b |= bind_text(s, 1, key);
	b |= bind_text(s, 2, arch);
	b |= bind_text(s, 3, nvrtc_version);
	b |= sqlite3_bind_blob(s, 4, cubin, (int)len, SQLITE_STATIC);
	b |= bind_text(s, 5, log);
	b |= sqlite3_bind_double(s, 6, compile_ms);
	b |= sqlite3_bind_double(s, 7, store_now());
	if (b != SQLITE_OK) {
		bind_error(st, b, err);
		goto out;
	}
	if (step_done(st, s, err, "caching a binary") < 0)
		goto out;
	rc = 0;
out:
	store_stmt_done(s);
	return rc;
}
