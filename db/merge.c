/*
 * merge.c -- fold another ktune database into this one (ktune merge).
 *
 * The source is first opened on its own, read-only, through store_open(), so
 * it passes exactly the checks any open does (missing, not SQLite, not
 * ktune's, newer schema) without being written. It is then ATTACHed
 * read-only and copied with INSERT ... SELECT in one transaction, mapping
 * local ids through natural keys: devices by uuid, problems and configs by
 * (family, key), sweeps by (device, problem, strategy, options_key,
 * started), trials by (sweep, config), baselines by all their values,
 * binaries by key. Every insert skips rows already present, so merging the
 * same file twice adds nothing. Winners are a view: nothing to recompute.
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
};

#define COUNT(f) offsetof(struct store_merge_counts, f)

static const struct merge_step merge_steps[] = {
	/* Id maps, source row id -> this database's row id. */
	{ "CREATE TEMP TABLE merge_device_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT },
	{ "CREATE TEMP TABLE merge_problem_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT },
	{ "CREATE TEMP TABLE merge_config_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT },
	{ "CREATE TEMP TABLE merge_sweep_map (src_id INTEGER PRIMARY KEY, dst_id INTEGER NOT NULL)", NO_COUNT },

	{ "INSERT INTO main.devices (uuid, name, arch, sms, l2_bytes, smem_optin, clock_mhz,"
	  " mem_clock_mhz, driver, cuda, nvrtc, first_seen, last_seen)"
	  " SELECT s.uuid, s.name, s.arch, s.sms, s.l2_bytes, s.smem_optin, s.clock_mhz,"
	  " s.mem_clock_mhz, s.driver, s.cuda, s.nvrtc, s.first_seen, s.last_seen"
	  " FROM merge_src.devices s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.devices d WHERE d.uuid = s.uuid) ORDER BY s.id",
	  COUNT(devices) },
	{ "INSERT INTO temp.merge_device_map SELECT s.id, d.id FROM merge_src.devices s"
	  " JOIN main.devices d ON d.uuid = s.uuid", NO_COUNT },

	{ "INSERT INTO main.problems (family, shape_key, shape_json)"
	  " SELECT s.family, s.shape_key, s.shape_json FROM merge_src.problems s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.problems p"
	  "  WHERE p.family = s.family AND p.shape_key = s.shape_key) ORDER BY s.id",
	  COUNT(problems) },
	{ "INSERT INTO temp.merge_problem_map SELECT s.id, p.id FROM merge_src.problems s"
	  " JOIN main.problems p ON p.family = s.family AND p.shape_key = s.shape_key", NO_COUNT },

	{ "INSERT INTO main.configs (family, config_key, params_json)"
	  " SELECT s.family, s.config_key, s.params_json FROM merge_src.configs s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.configs c"
	  "  WHERE c.family = s.family AND c.config_key = s.config_key) ORDER BY s.id",
	  COUNT(configs) },
	{ "INSERT INTO temp.merge_config_map SELECT s.id, c.id FROM merge_src.configs s"
	  " JOIN main.configs c ON c.family = s.family AND c.config_key = s.config_key", NO_COUNT },

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
	  "  AND m.options_key = s.options_key AND m.started = s.started) ORDER BY s.id",
	  COUNT(sweeps) },
	{ "INSERT INTO temp.merge_sweep_map SELECT s.id, m.id FROM merge_src.sweeps s"
	  " JOIN temp.merge_device_map dm ON dm.src_id = s.device_id"
	  " JOIN temp.merge_problem_map pm ON pm.src_id = s.problem_id"
	  " JOIN main.sweeps m ON m.device_id = dm.dst_id AND m.problem_id = pm.dst_id"
	  "  AND m.strategy = s.strategy AND m.options_key = s.options_key"
	  "  AND m.started = s.started", NO_COUNT },
	/* A later copy of a sweep merged before (a host's database merged
	 * again after more work) brings its end; only for rows that came
	 * from a merge, never for a sweep a local process may be running. */
	{ "UPDATE main.sweeps AS m SET status = s.status, finished = s.finished,"
	  " planned = s.planned"
	  " FROM merge_src.sweeps s JOIN temp.merge_sweep_map sm ON sm.src_id = s.id"
	  " WHERE m.id = sm.dst_id AND m.merged_from IS NOT NULL AND s.finished IS NOT NULL"
	  " AND (m.finished IS NULL OR m.finished < s.finished)", NO_COUNT },

	{ "INSERT INTO main.trials (sweep_id, config_id, status, median_us, min_us, p90_us,"
	  " spread, reps, rel_err, compile_ms, binary_key, message, log, retime_us, created)"
	  " SELECT sm.dst_id, cm.dst_id, t.status, t.median_us, t.min_us, t.p90_us,"
	  " t.spread, t.reps, t.rel_err, t.compile_ms, t.binary_key, t.message, t.log,"
	  " t.retime_us, t.created"
	  " FROM merge_src.trials t"
	  " JOIN temp.merge_sweep_map sm ON sm.src_id = t.sweep_id"
	  " JOIN temp.merge_config_map cm ON cm.src_id = t.config_id"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.trials m"
	  "  WHERE m.sweep_id = sm.dst_id AND m.config_id = cm.dst_id) ORDER BY t.id",
	  COUNT(trials) },
	{ "UPDATE main.trials AS m SET retime_us = t.retime_us"
	  " FROM merge_src.trials t"
	  " JOIN temp.merge_sweep_map sm ON sm.src_id = t.sweep_id"
	  " JOIN temp.merge_config_map cm ON cm.src_id = t.config_id"
	  " WHERE m.sweep_id = sm.dst_id AND m.config_id = cm.dst_id"
	  " AND m.retime_us IS NULL AND t.retime_us IS NOT NULL", NO_COUNT },

	{ "INSERT INTO main.baselines (device_id, problem_id, sweep_id, name, median_us, created)"
	  " SELECT dm.dst_id, pm.dst_id, sm.dst_id, b.name, b.median_us, b.created"
	  " FROM merge_src.baselines b"
	  " JOIN temp.merge_device_map dm ON dm.src_id = b.device_id"
	  " JOIN temp.merge_problem_map pm ON pm.src_id = b.problem_id"
	  " LEFT JOIN temp.merge_sweep_map sm ON sm.src_id = b.sweep_id"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.baselines m WHERE m.device_id = dm.dst_id"
	  "  AND m.problem_id = pm.dst_id AND m.name = b.name AND m.created = b.created"
	  "  AND m.median_us = b.median_us) ORDER BY b.id",
	  COUNT(baselines) },

	{ "INSERT INTO main.binaries (key, arch, nvrtc_version, cubin, log, compile_ms, created)"
	  " SELECT s.key, s.arch, s.nvrtc_version, s.cubin, s.log, s.compile_ms, s.created"
	  " FROM merge_src.binaries s"
	  " WHERE NOT EXISTS (SELECT 1 FROM main.binaries m WHERE m.key = s.key)",
	  COUNT(binaries) },

	{ "DROP TABLE temp.merge_device_map", NO_COUNT },
	{ "DROP TABLE temp.merge_problem_map", NO_COUNT },
	{ "DROP TABLE temp.merge_config_map", NO_COUNT },
	{ "DROP TABLE temp.merge_sweep_map", NO_COUNT },
};

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Runs one fixed statement that may take ?1 = text. */
static int run_sql(struct store *st, const char *sql, const char *text, const char *what,
		   struct kt_err *err)
{
	sqlite3_stmt *s = NULL;
	int rc = -1;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		store_db_error(st, err, what);
		goto out;
	}
	if (sqlite3_bind_parameter_count(s) >= 1 &&
	    sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC) != SQLITE_OK) {
		store_db_error(st, err, what);
		goto out;
	}
	if (sqlite3_step(s) != SQLITE_DONE) {
		store_db_error(st, err, what);
		goto out;
	}
	rc = 0;
out:
	sqlite3_finalize(s);
	return rc;
}

int store_merge_counted(struct store *st, const char *src_path,
			struct store_merge_counts *added, struct kt_err *err)
{
	struct store_merge_counts cnt;
	struct store *src = NULL;
	char *uri = NULL;
	size_t i;
	int attached = 0, in_tx = 0, rc = -1;
	char what[PATH_MAX + 32];

	memset(&cnt, 0, sizeof(cnt));
	if (added)
		memset(added, 0, sizeof(*added));
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
	if (run_sql(st, "ATTACH DATABASE ?1 AS merge_src", uri, what, err) < 0)
		goto out;
	attached = 1;
	/* NEEDSWORK: a source of an older schema version is refused by the
	 * read-only open above; once version 2 exists, merge should read
	 * version-1 sources column by column instead. */
	if (store_tx_begin(st, err) < 0)
		goto out;
	in_tx = 1;
	for (i = 0; i < sizeof(merge_steps) / sizeof(merge_steps[0]); i++) {
		if (run_sql(st, merge_steps[i].sql, src_path, what, err) < 0)
			goto out;
		if (merge_steps[i].count != NO_COUNT)
			*(long *)((char *)&cnt + merge_steps[i].count) += sqlite3_changes(st->db);
	}
	if (store_tx_commit(st, err) < 0)
		goto out;
	in_tx = 0;
	if (added)
		*added = cnt;
	rc = 0;
out:
	if (in_tx)
		store_tx_rollback(st);
	/* Every statement on the attached file is finalized or reset, so
	 * DETACH does not find it busy. */
	if (attached && sqlite3_exec(st->db, "DETACH DATABASE merge_src", NULL, NULL, NULL) != SQLITE_OK &&
	    rc == 0)
		rc = store_db_error(st, err, "detaching a merged database");
	store_close(src);
	free(uri);
	return rc;
}

int store_merge_from(struct store *st, const char *src_path, struct kt_err *err)
{
	return store_merge_counted(st, src_path, NULL, err);
}
