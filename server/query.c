#include "query.h"

#include <stdio.h>

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* SQL as data: one string per query, indexed by enum query_sql. */
enum query_sql {
	Q_DATA_VERSION,
	Q_COUNTS,
	Q__COUNT
};

static const char *const query_sql[Q__COUNT] = {
	[Q_DATA_VERSION] = "PRAGMA data_version",
	[Q_COUNTS] =
		"SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM problems),"
		" (SELECT count(*) FROM configs), (SELECT count(*) FROM sweeps),"
		" (SELECT count(*) FROM trials),"
		" (SELECT count(*) FROM trials WHERE status = 'ok')",
};

static sqlite3_stmt *query_prepare(struct store *st, enum query_sql q, struct kt_err *err)
{
	sqlite3 *db = store_sqlite(st);
	sqlite3_stmt *stmt = NULL;

	if (sqlite3_prepare_v2(db, query_sql[q], -1, &stmt, NULL) != SQLITE_OK) {
		kt_err_set(err, KT_EDB, "prepare: %s", sqlite3_errmsg(db));
		sqlite3_finalize(stmt);
		return NULL;
	}
	return stmt;
}

int query_data_version(struct store *st, int64_t *out, struct kt_err *err)
{
	sqlite3_stmt *stmt;
	int rc = -1;

	if (!(stmt = query_prepare(st, Q_DATA_VERSION, err)))
		return -1;
	if (sqlite3_step(stmt) != SQLITE_ROW) {
		kt_err_set(err, KT_EDB, "data_version: %s", sqlite3_errmsg(store_sqlite(st)));
		goto out;
	}
	*out = sqlite3_column_int64(stmt, 0);
	rc = 0;
out:
	sqlite3_finalize(stmt);
	return rc;
}

int query_data_version_cached(struct store *st, sqlite3_stmt **stmt, int64_t *out,
			      struct kt_err *err)
{
	int rc;

	if (!*stmt && !(*stmt = query_prepare(st, Q_DATA_VERSION, err)))
		return -1;
	rc = sqlite3_step(*stmt);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(*stmt, 0);
	sqlite3_reset(*stmt);
	if (rc != SQLITE_ROW)
		return kt_err_set(err, KT_EDB, "data_version: %s", sqlite3_errmsg(store_sqlite(st)));
	return 0;
}

void query_stmt_free(sqlite3_stmt *stmt)
{
	sqlite3_finalize(stmt);
}

int query_counts(struct store *st, struct query_counts *out, struct kt_err *err)
{
	sqlite3_stmt *stmt;
	int rc = -1;

	if (!(stmt = query_prepare(st, Q_COUNTS, err)))
		return -1;
	if (sqlite3_step(stmt) != SQLITE_ROW) {
		kt_err_set(err, KT_EDB, "counts: %s", sqlite3_errmsg(store_sqlite(st)));
		goto out;
	}
	out->devices = sqlite3_column_int64(stmt, 0);
	out->problems = sqlite3_column_int64(stmt, 1);
	out->configs = sqlite3_column_int64(stmt, 2);
	out->sweeps = sqlite3_column_int64(stmt, 3);
	out->trials = sqlite3_column_int64(stmt, 4);
	out->trials_ok = sqlite3_column_int64(stmt, 5);
	rc = 0;
out:
	sqlite3_finalize(stmt);
	return rc;
}

int query_device_known(struct store *st, const char *device, struct kt_err *err)
{
	struct store_device *d = NULL;
	char id[32];
	int n = 0, i, found = 0;

	if (store_devices_list(st, &d, &n, err) < 0)
		return -1;
	for (i = 0; i < n && !found; i++) {
		snprintf(id, sizeof(id), "%lld", (long long)d[i].id);
		found = strcmp(device, d[i].uuid) == 0 || strcmp(device, d[i].name) == 0 ||
			strcmp(device, id) == 0;
	}
	free(d);
	if (!found)
		kt_err_set(err, KT_ENOTFOUND,
			   "unknown device '%.200s' (a uuid, name or id of `ktune devices`, GET /v1/devices)",
			   device);
	return found;
}
