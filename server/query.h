/*
 * query.h -- read-only queries the server needs beyond db/store.h.
 *
 * Runs plain SQL on store_sqlite(st); never writes. Kept in server/ so the
 * store stays a leaf with the API every module shares.
 */
#ifndef KT_QUERY_H
#define KT_QUERY_H

#include <stdint.h>

#include "../db/store.h"
#include "../util/err.h"

struct sqlite3_stmt;

/* PRAGMA data_version of this connection: changes when another connection
 * committed since the last call (SQLite's cheap "did anything change"). */
int query_data_version(struct store *st, int64_t *out, struct kt_err *err);
/* The same with the statement kept in *stmt (prepared on first use, on
 * st; the caller finalizes it with query_stmt_free before closing st). */
int query_data_version_cached(struct store *st, struct sqlite3_stmt **stmt, int64_t *out,
			      struct kt_err *err);
void query_stmt_free(struct sqlite3_stmt *stmt);

/* 1 when device names a device of the database the way a winners filter
 * takes it (uuid, name or id); 0 with KT_ENOTFOUND set in err, naming it,
 * when none; -1 on a database error. */
int query_device_known(struct store *st, const char *device, struct kt_err *err);

/* Counts for /metrics and /v1/health. */
struct query_counts {
	long devices, problems, configs, sweeps, trials, trials_ok;
};
int query_counts(struct store *st, struct query_counts *out, struct kt_err *err);

#endif
