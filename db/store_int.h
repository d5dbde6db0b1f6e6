/*
 * store_int.h -- what db/store.c shares with the other db/ files (merge.c):
 * the connection struct, the statement table and the small SQLite helpers.
 * Not for use outside db/.
 */
#ifndef KT_STORE_INT_H
#define KT_STORE_INT_H

#include <sqlite3.h>

#include "store.h"

/* Statement ids; the SQL text is store.c's sql_text[] in the same order. */
enum store_sql {
	SQL_BEGIN,
	SQL_COMMIT,
	SQL_ROLLBACK,
	SQL_DEVICE_UPSERT,
	SQL_DEVICES_LIST,
	SQL_DEVICE_FIND,
	SQL_PROBLEM_FIND,
	SQL_PROBLEM_INSERT,
	SQL_CONFIG_FIND,
	SQL_CONFIG_INSERT,
	SQL_SWEEP_FIND_PLAN,
	SQL_SWEEP_RESUME,
	SQL_SWEEP_INSERT,
	SQL_SWEEP_END,
	SQL_SWEEP_GET,
	SQL_SWEEPS_LIST,
	SQL_TRIAL_ADD,
	SQL_TRIALS_DONE,
	SQL_TRIALS_LIST,
	SQL_RETIME_SET,
	SQL_BASELINE_ADD,
	SQL_BASELINE_GET,
	SQL_WINNERS_LIST,
	SQL_WINNER_GET,
	SQL_MARKS_MAX,
	SQL_SWEEP_MARKS,
	SQL_PAIRS_SINCE,
	SQL_BINARY_GET,
	SQL_BINARY_PUT,
	SQL_TOURNAMENT_SET,
	SQL_MEASURE_ADD,
	SQL_MEASURES_LIST,
	SQL_FAULTY_CONFIGS,
	SQL_FAMILY_TRIALS,
	SQL__COUNT
};

/* What tells one state of a database file from another without opening
 * it: a connection opened immutable sees none of the changes. */
struct store_file_id {
	unsigned long long dev, ino, size;
	long long mtime_ns;
	int wal;			/* a -wal file was there */
};

struct store {
	sqlite3 *db;
	enum store_mode mode;
	int version;			/* PRAGMA user_version after open */
	sqlite3_stmt *stmt[SQL__COUNT];	/* prepared on first use, reset after */
	int tx_depth;			/* store_tx_begin()s not yet ended */
	int immutable;			/* opened with immutable=1 (store_ro_uri) */
	struct store_file_id opened;	/* the file when it was opened */
	char path[4096];
};

/* The prepared statement for id (prepared on first use), or NULL with err
 * set. The caller resets it with store_stmt_done() on every path. */
sqlite3_stmt *store_stmt(struct store *st, enum store_sql id, struct kt_err *err);
void store_stmt_done(sqlite3_stmt *stmt);

/* Sets err from the connection's last error: "what: sqlite message", with
 * the code mapped (corrupt -> KT_ECORRUPT, I/O and full disk -> KT_EIO, the
 * rest KT_EDB). Returns -1. */
int store_db_error(struct store *st, struct kt_err *err, const char *what);
/* sqlite3_exec() of fixed SQL; -1 with err set on failure. */
int store_exec(struct store *st, const char *sql, struct kt_err *err);
/* The URI a connection that never writes opens path with (malloc'ed;
 * NULL with err set): "file:ABS?mode=ro" where this process may write the
 * database and its directory (SQLite then shares the WAL index, -shm, with
 * the writers, creating it if need be) or where a -shm already exists;
 * else "file:ABS?immutable=1", the one way SQLite reads a WAL database
 * whose index it can neither use nor create (a read-only directory or
 * mount, another user's file), without creating a file next to it that
 * its owner's writers could then not open. *immutable (may be NULL) says
 * which. */
char *store_ro_uri(const char *path, int *immutable, struct kt_err *err);
/* Wall clock as unix seconds with sub-second precision. */
double store_now(void);

#endif
