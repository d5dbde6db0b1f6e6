/*
 * merge.c -- fold another ktune database into this one (ktune merge).
 *
 * The source is first opened on its own, read-only, through store_open(), so
 * it passes exactly the checks any open does (missing, not SQLite, not
 * ktune's, newer schema) without being written. It is then ATTACHed
 * read-only and copied with INSERT ... SELECT in one transaction, mapping
 * local ids through natural keys: devices by uuid, problems and configs by
 * (family, key), sweeps by (device, problem, strategy, options_key, origin)
 * where the origin is the start of the sweep it was imported from, else its
 * own start, trials by (sweep, config), baselines by their values and
 * time or sweep (an imported one is timed at its import), binaries by key. Every insert skips rows already present, so merging the
 * same file twice adds nothing. Winners are a view: nothing to recompute.
 *
 * A row present in both with other values is a conflict (store.h gives the
 * rule): each is listed before it is resolved, and the rule depends on the
 * rows alone, never on which database came first. A trial the source wins
 * replaces this database's as a new row (a larger id), so that a server's
 * incremental reload (store_marks) sees it.
 *
 * The merge statements name the attached schema, which exists only during a
 * merge, so they are prepared here and finalized, not kept in the
 * connection's statement table.
 */
#include "store_int.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NO_COUNT ((size_t)-1)

struct merge_step {
	const char *sql;	/* ?1, where present, is the source's path */
	size_t count;		/* offsetof the counter in store_merge_counts, or NO_COUNT */
	int conflicts;		/* 1: a SELECT whose rows are conflicts (table, key,
				 * kept, dropped) */
};

#define COUNT(f) offsetof(struct store_merge_counts, f)

/* A sweep's identity across databases: the start of the sweep it was
 * imported from (import keeps it in its provenance), else its own. */
#define ORIGIN(t) \
	"coalesce(CASE WHEN json_valid(" t ".provenance_json) THEN" \
	" nullif(json_extract(" t ".provenance_json, '$.imported_from.started'), 0) END, " t ".started)"

/* What a device row says, and whether the source's description wins. */
#define DEV_FIELDS(t) \
	"(" t ".name, " t ".arch, " t ".sms, " t ".l2_bytes, " t ".smem_optin, " t ".clock_mhz," \
	" " t ".mem_clock_mhz, " t ".driver, " t ".cuda, " t ".nvrtc)"
#define DEV_SRC_WINS \
	"(s.last_seen > d.last_seen OR (s.last_seen = d.last_seen AND " DEV_FIELDS("s") " < " \
	DEV_FIELDS("d") "))"
#define DEV_DESC(t) \
	"printf('%s, %s, %d SMs, %d MHz, driver %s, CUDA %s, seen %s', " t ".name, " t ".arch, " \
	t ".sms, " t ".clock_mhz, " t ".driver, " t ".cuda, datetime(" t ".last_seen, 'unixepoch'))"

/* What a trial says, and whether the source's wins: recorded last, then
 * the faster (no time, as for a failed trial, counts as slowest). */
/* The trial columns of schema version 2 (conditions, tournament, drift),
 * copied as they are: a source has this database's version (store_open). */
#define TRIAL_V2_COLS \
	" tournament_us, sm_mhz_before, sm_mhz_after, mem_mhz_before, mem_mhz_after," \
	" power_w_before, power_w_after, temp_c_before, temp_c_after, throttled, norm_us," \
	" errors_json"
#define TRIAL_V2_SRC \
	" t.tournament_us, t.sm_mhz_before, t.sm_mhz_after, t.mem_mhz_before, t.mem_mhz_after," \
	" t.power_w_before, t.power_w_after, t.temp_c_before, t.temp_c_after, t.throttled," \
	" t.norm_us, t.errors_json"
#define TRIAL_FIELDS(t) \
	"(" t ".status, " t ".median_us, " t ".min_us, " t ".p90_us, " t ".reps, " t ".rel_err)"
#define TRIAL_SRC_WINS \
	"(t.created > m.created OR (t.created = m.created AND" \
	" (coalesce(t.median_us, 1e308), t.status) < (coalesce(m.median_us, 1e308), m.status)))"
#define TRIAL_DESC(t) \
	"printf('%s %s us (min %s, p90 %s, %d reps), recorded %s', " t ".status," \
	" coalesce(printf('%.3f', " t ".median_us), '-'), coalesce(printf('%.3f', " t ".min_us), '-')," \
	" coalesce(printf('%.3f', " t ".p90_us), '-'), " t ".reps, datetime(" t ".created, 'unixepoch'))"
/* The source trials that meet one of this database's (t and m), and the
 * condition that they differ. */
#define TRIAL_JOIN \
	" FROM merge_src.trials t" \
	" JOIN temp.merge_sweep_map sm ON sm.src_id = t.sweep_id" \
	" JOIN temp.merge_config_map cm ON cm.src_id = t.config_id" \
	" JOIN main.trials m ON m.sweep_id = sm.dst_id AND m.config_id = cm.dst_id"
#define TRIAL_DIFF " WHERE " TRIAL_FIELDS("t") " IS NOT " TRIAL_FIELDS("m")

static const struct merge_step merge_steps[] = {
	/* Id maps, source row id -> this database's row id. */
	{ "CREATE TEMP TABLE merge_device_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT, 0 },
	{ "CREATE TEMP TABLE merge_problem_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT, 0 },
	{ "CREATE TEMP TABLE merge_config_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT, 0 },
	{ "CREATE TEMP TABLE merge_sweep_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT, 0 },
	{ "CREATE TEMP TABLE merge_replace (dst_id INTEGER PRIMARY KEY, src_id INTEGER NOT NULL,"
	  " sweep_id INTEGER NOT NULL, config_id INTEGER NOT NULL)", NO_COUNT, 0 },

	/* One GPU described two ways: listed, then the rule's winner kept. */
	{ "SELECT 'devices', s.uuid,"
	  " CASE WHEN " DEV_SRC_WINS " THEN " DEV_DESC("s") " ELSE " DEV_DESC("d") " END,"
	  " CASE WHEN " DEV_SRC_WINS " THEN " DEV_DESC("d") " ELSE " DEV_DESC("s") " END"
	  " FROM merge_src.devices s JOIN main.devices d ON d.uuid = s.uuid"
	  " WHERE " DEV_FIELDS("s") " IS NOT " DEV_FIELDS("d") " ORDER BY s.uuid", NO_COUNT, 1 },
	{ "UPDATE main.devices AS d SET name = s.name, arch = s.arch, sms = s.sms,"
	  " l2_bytes = s.l2_bytes, smem_optin = s.smem_optin, clock_mhz = s.clock_mhz,"
	  " mem_clock_mhz = s.mem_clock_mhz, driver = s.driver, cuda = s.cuda, nvrtc = s.nvrtc,"
	  " last_seen = s.last_seen FROM merge_src.devices s"
	  " WHERE d.uuid = s.uuid AND " DEV_FIELDS("s") " IS NOT " DEV_FIELDS("d") " AND " DEV_SRC_WINS,
	  NO_COUNT, 0 },
	{ "INSERT INTO main.devices (uuid, name, arch, sms, l2_bytes, smem_optin, clock_mhz,"
	  " mem_clock_mhz, driver, cuda, nvrtc, first_seen, last_seen)"
	  " SELECT s.uuid, s.name, s.arch, s.sms, s.l2_bytes, s.smem_optin, s.clock_mhz,"
	  " s.mem_clock_mhz, s.driver, s.cuda, s.nvrtc, s.first_seen, s.last_seen"
	  " FROM merge_src.devices s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.devices d WHERE d.uuid = s.uuid) ORDER BY s.id",
	  COUNT(devices), 0 },
	{ "INSERT INTO temp.merge_device_map SELECT s.id, d.id FROM merge_src.devices s"
	  " JOIN main.devices d ON d.uuid = s.uuid", NO_COUNT, 0 },

	/* A key is the identity and its JSON only spells it out: one that
	 * differs is listed, and this database's is kept. */
	{ "SELECT 'problems', s.family || ' ' || s.shape_key, p.shape_json, s.shape_json"
	  " FROM merge_src.problems s JOIN main.problems p"
	  " ON p.family = s.family AND p.shape_key = s.shape_key WHERE p.shape_json <> s.shape_json",
	  NO_COUNT, 1 },
	{ "INSERT INTO main.problems (family, shape_key, shape_json)"
	  " SELECT s.family, s.shape_key, s.shape_json FROM merge_src.problems s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.problems p"
	  "  WHERE p.family = s.family AND p.shape_key = s.shape_key) ORDER BY s.id",
	  COUNT(problems), 0 },
	{ "INSERT INTO temp.merge_problem_map SELECT s.id, p.id FROM merge_src.problems s"
	  " JOIN main.problems p ON p.family = s.family AND p.shape_key = s.shape_key", NO_COUNT, 0 },

	{ "SELECT 'configs', s.family || ' ' || s.config_key, c.params_json, s.params_json"
	  " FROM merge_src.configs s JOIN main.configs c"
	  " ON c.family = s.family AND c.config_key = s.config_key WHERE c.params_json <> s.params_json",
	  NO_COUNT, 1 },
	{ "INSERT INTO main.configs (family, config_key, params_json)"
	  " SELECT s.family, s.config_key, s.params_json FROM merge_src.configs s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.configs c"
	  "  WHERE c.family = s.family AND c.config_key = s.config_key) ORDER BY s.id",
	  COUNT(configs), 0 },
	{ "INSERT INTO temp.merge_config_map SELECT s.id, c.id FROM merge_src.configs s"
	  " JOIN main.configs c ON c.family = s.family AND c.config_key = s.config_key", NO_COUNT, 0 },

	/* A sweep keeps where it came from: its own merged_from if it was
	 * already merged once, else the source file. */
	{ "INSERT INTO main.sweeps (device_id, problem_id, strategy, options_key, provenance_json,"
	  " status, planned, started, finished, owner_pid, owner_host, merged_from)"
	  " SELECT dm.dst_id, pm.dst_id, s.strategy, s.options_key, s.provenance_json,"
	  " s.status, s.planned, s.started, s.finished, s.owner_pid, s.owner_host,"
	  " coalesce(s.merged_from, ?1)"
	  " FROM merge_src.sweeps s"
	  " JOIN temp.merge_device_map dm ON dm.src_id = s.device_id"
	  " JOIN temp.merge_problem_map pm ON pm.src_id = s.problem_id"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.sweeps m WHERE m.device_id = dm.dst_id"
	  "  AND m.problem_id = pm.dst_id AND m.strategy = s.strategy"
	  "  AND m.options_key = s.options_key AND " ORIGIN("m") " = " ORIGIN("s") ")"
	  " ORDER BY s.id",
	  COUNT(sweeps), 0 },
	/* (the oldest row of this database, if it holds one origin twice) */
	{ "INSERT INTO temp.merge_sweep_map SELECT s.id, min(m.id) FROM merge_src.sweeps s"
	  " JOIN temp.merge_device_map dm ON dm.src_id = s.device_id"
	  " JOIN temp.merge_problem_map pm ON pm.src_id = s.problem_id"
	  " JOIN main.sweeps m ON m.device_id = dm.dst_id AND m.problem_id = pm.dst_id"
	  "  AND m.strategy = s.strategy AND m.options_key = s.options_key"
	  "  AND " ORIGIN("m") " = " ORIGIN("s") " GROUP BY s.id", NO_COUNT, 0 },
	/* A later copy of a sweep merged before (a host's database merged
	 * again after more work) brings its end; only for rows that came
	 * from a merge, never for a sweep a local process may be running. */
	{ "UPDATE main.sweeps AS m SET status = s.status, finished = s.finished,"
	  " planned = s.planned"
	  " FROM merge_src.sweeps s JOIN temp.merge_sweep_map sm ON sm.src_id = s.id"
	  " WHERE m.id = sm.dst_id AND m.merged_from IS NOT NULL AND s.finished IS NOT NULL"
	  " AND (m.finished IS NULL OR m.finished < s.finished)", NO_COUNT, 0 },

	/* One config of one sweep timed two ways: listed, then the rule's
	 * winner kept, replacing the loser as a new row. */
	{ "SELECT 'trials', printf('%s %s %s, sweep begun %s, config %s', d.uuid, p.family,"
	  " p.shape_key, datetime(ms.started, 'unixepoch'), c.config_key),"
	  " CASE WHEN " TRIAL_SRC_WINS " THEN " TRIAL_DESC("t") " ELSE " TRIAL_DESC("m") " END,"
	  " CASE WHEN " TRIAL_SRC_WINS " THEN " TRIAL_DESC("m") " ELSE " TRIAL_DESC("t") " END"
	  TRIAL_JOIN
	  " JOIN main.sweeps ms ON ms.id = m.sweep_id JOIN main.devices d ON d.id = ms.device_id"
	  " JOIN main.problems p ON p.id = ms.problem_id JOIN main.configs c ON c.id = m.config_id"
	  TRIAL_DIFF " ORDER BY m.id", NO_COUNT, 1 },
	{ "INSERT INTO temp.merge_replace SELECT m.id, t.id, m.sweep_id, m.config_id"
	  TRIAL_JOIN TRIAL_DIFF " AND " TRIAL_SRC_WINS, NO_COUNT, 0 },
	{ "DELETE FROM main.trials WHERE id IN (SELECT dst_id FROM temp.merge_replace)", NO_COUNT, 0 },
	{ "INSERT INTO main.trials (id, sweep_id, config_id, status, median_us, min_us, p90_us,"
	  " spread, reps, rel_err, compile_ms, binary_key, message, log, retime_us, created,"
	  TRIAL_V2_COLS ")"
	  " SELECT (SELECT max(b) FROM (SELECT max(id) AS b FROM main.trials"
	  "  UNION ALL SELECT max(dst_id) FROM temp.merge_replace)) + row_number() OVER (ORDER BY r.dst_id),"
	  " r.sweep_id, r.config_id, t.status, t.median_us, t.min_us, t.p90_us, t.spread, t.reps,"
	  " t.rel_err, t.compile_ms, t.binary_key, t.message, t.log, t.retime_us, t.created,"
	  TRIAL_V2_SRC
	  " FROM temp.merge_replace r JOIN merge_src.trials t ON t.id = r.src_id", NO_COUNT, 0 },

	{ "INSERT INTO main.trials (sweep_id, config_id, status, median_us, min_us, p90_us,"
	  " spread, reps, rel_err, compile_ms, binary_key, message, log, retime_us, created,"
	  TRIAL_V2_COLS ")"
	  " SELECT sm.dst_id, cm.dst_id, t.status, t.median_us, t.min_us, t.p90_us,"
	  " t.spread, t.reps, t.rel_err, t.compile_ms, t.binary_key, t.message, t.log,"
	  " t.retime_us, t.created," TRIAL_V2_SRC
	  " FROM merge_src.trials t"
	  " JOIN temp.merge_sweep_map sm ON sm.src_id = t.sweep_id"
	  " JOIN temp.merge_config_map cm ON cm.src_id = t.config_id"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.trials m"
	  "  WHERE m.sweep_id = sm.dst_id AND m.config_id = cm.dst_id) ORDER BY t.id",
	  COUNT(trials), 0 },
	{ "UPDATE main.trials AS m SET retime_us = t.retime_us"
	  " FROM merge_src.trials t"
	  " JOIN temp.merge_sweep_map sm ON sm.src_id = t.sweep_id"
	  " JOIN temp.merge_config_map cm ON cm.src_id = t.config_id"
	  " WHERE m.sweep_id = sm.dst_id AND m.config_id = cm.dst_id"
	  " AND m.retime_us IS NULL AND t.retime_us IS NOT NULL", NO_COUNT, 0 },

	/* Sentinel, tournament and re-time rows: one per (sweep, invocation,
	 * kind, round, position), so merging a file again adds none. */
	{ "INSERT INTO main.measurements (sweep_id, run, kind, config_id, baseline, round,"
	  " position, status, median_us, min_us, p90_us, reps, sm_mhz_before, sm_mhz_after,"
	  " power_w_after, temp_c_after, message, created)"
	  " SELECT sm.dst_id, x.run, x.kind, cm.dst_id, x.baseline, x.round, x.position, x.status,"
	  " x.median_us, x.min_us, x.p90_us, x.reps, x.sm_mhz_before, x.sm_mhz_after,"
	  " x.power_w_after, x.temp_c_after, x.message, x.created"
	  " FROM merge_src.measurements x"
	  " JOIN temp.merge_sweep_map sm ON sm.src_id = x.sweep_id"
	  " LEFT JOIN temp.merge_config_map cm ON cm.src_id = x.config_id"
	  " WHERE (x.config_id IS NULL) = (cm.dst_id IS NULL)"
	  " AND NOT EXISTS (SELECT 1 FROM main.measurements m WHERE m.sweep_id = sm.dst_id"
	  "  AND m.run = x.run AND m.kind = x.kind AND m.round = x.round"
	  "  AND m.position = x.position) ORDER BY x.id",
	  COUNT(measurements), 0 },

	{ "INSERT INTO main.baselines (device_id, problem_id, sweep_id, name, median_us, created)"
	  " SELECT dm.dst_id, pm.dst_id, sm.dst_id, b.name, b.median_us, b.created"
	  " FROM merge_src.baselines b"
	  " JOIN temp.merge_device_map dm ON dm.src_id = b.device_id"
	  " JOIN temp.merge_problem_map pm ON pm.src_id = b.problem_id"
	  " LEFT JOIN temp.merge_sweep_map sm ON sm.src_id = b.sweep_id"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.baselines m WHERE m.device_id = dm.dst_id"
	  "  AND m.problem_id = pm.dst_id AND m.name = b.name AND m.median_us = b.median_us"
	  "  AND (m.created = b.created OR m.sweep_id = sm.dst_id)) ORDER BY b.id",
	  COUNT(baselines), 0 },

	{ "INSERT INTO main.binaries (key, arch, nvrtc_version, cubin, log, compile_ms, created)"
	  " SELECT s.key, s.arch, s.nvrtc_version, s.cubin, s.log, s.compile_ms, s.created"
	  " FROM merge_src.binaries s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.binaries m WHERE m.key = s.key)",
	  COUNT(binaries), 0 },

	{ "DROP TABLE temp.merge_device_map", NO_COUNT, 0 },
	{ "DROP TABLE temp.merge_problem_map", NO_COUNT, 0 },
	{ "DROP TABLE temp.merge_config_map", NO_COUNT, 0 },
	{ "DROP TABLE temp.merge_sweep_map", NO_COUNT, 0 },
	{ "DROP TABLE temp.merge_replace", NO_COUNT, 0 },
};

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Runs one fixed statement that may take ?1 = text; a conflicts step's
 * rows go into rep (counted all, described up to STORE_MERGE_ITEMS). */
static int run_sql(struct store *st, const char *sql, const char *text, const char *what,
		   struct store_merge_report *rep, struct kt_err *err)
{
	sqlite3_stmt *s = NULL;
	int rc = -1, src;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		store_db_error(st, err, what);
		goto out;
	}
	if (sqlite3_bind_parameter_count(s) >= 1 &&
	    sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC) != SQLITE_OK) {
		store_db_error(st, err, what);
		goto out;
	}
	while ((src = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_merge_conflict *c;

		if (!rep)
			continue;
		rep->conflicts++;
		if (rep->nitems >= STORE_MERGE_ITEMS)
			continue;
		if (!rep->items &&
		    !(rep->items = calloc(STORE_MERGE_ITEMS, sizeof(*rep->items)))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			goto out;
		}
		c = &rep->items[rep->nitems++];
		snprintf(c->table, sizeof(c->table), "%s", (const char *)sqlite3_column_text(s, 0));
		snprintf(c->key, sizeof(c->key), "%s", (const char *)sqlite3_column_text(s, 1));
		snprintf(c->kept, sizeof(c->kept), "%s", (const char *)sqlite3_column_text(s, 2));
		snprintf(c->dropped, sizeof(c->dropped), "%s", (const char *)sqlite3_column_text(s, 3));
	}
	if (src != SQLITE_DONE) {
		store_db_error(st, err, what);
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(s);
	return rc;
}

void store_merge_report_release(struct store_merge_report *rep)
{
	if (!rep)
		return;
	free(rep->items);
	memset(rep, 0, sizeof(*rep));
}

int store_merge_reported(struct store *st, const char *src_path, struct store_merge_report *rep,
			 struct kt_err *err)
{
	struct store_merge_report local;
	struct store *src = NULL;
	char *uri = NULL;
	size_t i;
	int attached = 0, in_tx = 0, rc = -1;
	char what[PATH_MAX + 32];

	memset(&local, 0, sizeof(local));
	if (rep)
		memset(rep, 0, sizeof(*rep));
	if (st->mode == STORE_RO) {
		kt_err_set(err, KT_EINVAL, "cannot merge into %s: opened read-only", st->path);
		goto out;
	}
	if (!src_path || !*src_path) {
		kt_err_set(err, KT_EINVAL, "no database to merge from");
		goto out;
	}
	snprintf(what, sizeof(what), "merging %s", src_path);
	/* The same checks as any open, read-only: a refused source is never
	 * written, and neither is this database. */
	if (store_open(src_path, STORE_RO, &src, err) < 0)
		goto out;
	store_close(src);
	src = NULL;
	if (same_file(src_path, st->path)) {
		kt_err_set(err, KT_EINVAL, "cannot merge %s into itself", src_path);
		goto out;
	}
	if (!(uri = store_ro_uri(src_path, NULL, err)))
		goto out;
	if (run_sql(st, "ATTACH DATABASE ?1 AS merge_src", uri, what, NULL, err) < 0)
		goto out;
	attached = 1;
	/* NEEDSWORK: a source of an older schema version is refused by the
	 * read-only open above; once version 2 exists, merge should read
	 * version-1 sources column by column instead. */
	if (store_tx_begin(st, err) < 0)
		goto out;
	in_tx = 1;
	for (i = 0; i < sizeof(merge_steps) / sizeof(merge_steps[0]); i++) {
		if (run_sql(st, merge_steps[i].sql, src_path, what,
			    merge_steps[i].conflicts ? &local : NULL, err) < 0)
			goto out;
		if (merge_steps[i].count != NO_COUNT)
			*(long *)((char *)&local.added + merge_steps[i].count) += sqlite3_changes(st->db);
	}
	if (store_tx_commit(st, err) < 0)
		goto out;
	in_tx = 0;
	if (rep) {
		*rep = local;
		memset(&local, 0, sizeof(local));
	}
	rc = 0;
out:
	if (in_tx)
		store_tx_rollback(st);
	/* Every statement on the attached file is finalized or reset, so
	 * DETACH does not find it busy. */
	if (attached && sqlite3_exec(st->db, "DETACH DATABASE merge_src", NULL, NULL, NULL) != SQLITE_OK &&
	    rc == 0)
		rc = store_db_error(st, err, "detaching a merged database");
	store_merge_report_release(&local);
	store_close(src);
	free(uri);
	return rc;
}

int store_merge_counted(struct store *st, const char *src_path,
			struct store_merge_counts *added, struct kt_err *err)
{
	struct store_merge_report rep;
	int rc = store_merge_reported(st, src_path, &rep, err);

	if (added)
		*added = rep.added;
	store_merge_report_release(&rep);
	return rc;
}

int store_merge_from(struct store *st, const char *src_path, struct kt_err *err)
{
	return store_merge_counted(st, src_path, NULL, err);
}
