/*
 * store.h -- the SQLite store: every trial, sweep, device and compiled binary.
 *
 * Leaf module: includes only SQLite, libc and util/. Knows nothing of kernel
 * families beyond their names and canonical keys (text written by kernels/).
 *
 * One writer (a sweep's parent process or the server's job runner), any
 * number of readers: WAL mode, foreign keys on, busy timeout set. Each
 * trial is committed as it lands, so a kill -9 loses at most the trial in
 * flight. The schema lives in db/schema.sql (every column commented) and
 * is versioned with PRAGMA user_version; store_open() migrates older files
 * and refuses newer ones (KT_ESCHEMA) and files that are not SQLite or not
 * ktune's (KT_ECORRUPT), without writing to them.
 *
 * Strings returned inside structs are owned by the struct and freed by its
 * _release() function; every function returns 0 on success and -1 with err
 * set on failure, unless it says otherwise.
 *
 * A struct store is used by one thread at a time: open one per thread (or
 * per process); WAL lets readers and the writer work side by side, and
 * writers on separate connections wait for each other (busy timeout 5 s).
 */
#ifndef KT_STORE_H
#define KT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

#define STORE_SCHEMA_VERSION 2

struct store;

enum store_mode {
	STORE_RW = 0,		/* create if missing, migrate */
	STORE_RO = 1,		/* must exist; never writes */
};

/* STORE_RO never writes, not even the files beside the database: where
 * this process may not write the database (another user's file, a
 * read-only directory or mount) it is read without locks (SQLite's
 * immutable=1) unless its WAL index exists already; see store_stale().
 * STORE_RW refuses such a database with KT_EIO, saying it is read-only. */
int store_open(const char *path, enum store_mode mode, struct store **out,
	       struct kt_err *err);
void store_close(struct store *st);
/* 1 when this process may write the database at path: the file (when it
 * exists) and its directory are writable (or, in a read-only directory,
 * the -wal and -shm files exist and are writable). */
int store_writable(const char *path);
/* 1 when st reads without locks (see store_open) and the file changed
 * since it was opened (size, time, inode, a WAL appeared): such a
 * connection does not see changes, so its user opens a new one. 0 for
 * every other connection. */
int store_stale(struct store *st);
/* PRAGMA user_version of the open file. */
int store_version(struct store *st);

/* Transactions. The outermost store_tx_begin() is BEGIN IMMEDIATE (it
 * waits up to the busy timeout for another writer); one inside it is a
 * savepoint, so that a store function with a transaction of its own can
 * run inside a caller's (an import: all of it or nothing). Each begin is
 * ended by one commit or one rollback; the rollback cannot fail in a way
 * worth reporting, and after an error SQLite rolled back by itself it
 * ends every level. */
int store_tx_begin(struct store *st, struct kt_err *err);
int store_tx_commit(struct store *st, struct kt_err *err);
void store_tx_rollback(struct store *st);

/* ---- devices (one row per GPU, keyed by UUID) ---- */
struct store_device {
	int64_t id;
	char name[128];		/* "NVIDIA H200" */
	char uuid[64];		/* "GPU-..." */
	char arch[16];		/* "sm_90" */
	int sms;
	long l2_bytes;
	int smem_optin;		/* bytes per block */
	int clock_mhz, mem_clock_mhz;
	char driver[32];	/* "580.95" or the driver API version */
	char cuda[16];		/* CUDA version the driver reports */
	char nvrtc[16];
};
/* Inserts or updates by uuid; sets d->id. */
int store_device_upsert(struct store *st, struct store_device *d, struct kt_err *err);
/* All devices, ordered by id. *out is malloc'ed (free()). */
int store_devices_list(struct store *st, struct store_device **out, int *n,
		       struct kt_err *err);
/* By uuid or by id given as decimal text; 1 found, 0 absent, -1 error. */
int store_device_find(struct store *st, const char *uuid_or_id,
		      struct store_device *out, struct kt_err *err);

/* ---- problems and configs (interned by family + canonical key) ---- */
int store_problem_intern(struct store *st, const char *family, const char *shape_key,
			 const char *shape_json, int64_t *id, struct kt_err *err);
int store_config_intern(struct store *st, const char *family, const char *config_key,
			const char *params_json, int64_t *id, struct kt_err *err);

/* ---- sweeps ---- */
enum store_sweep_status {
	STORE_SWEEP_RUNNING = 0,
	STORE_SWEEP_DONE,
	STORE_SWEEP_INTERRUPTED,	/* stopped by the user or a fatal error */
	STORE_SWEEP_FAILED,
};

struct store_sweep_spec {
	int64_t device_id, problem_id;
	const char *strategy;	/* "exhaustive", "random" */
	const char *options_key;/* canonical text of what changes the plan
				 * (budget, seed, space version): same command,
				 * same key -> resume */
	const char *provenance_json;	/* device + versions + template hash */
	long planned;		/* configs the plan will evaluate */
	double started;		/* when it began (unix s; an import gives the
				 * original's); 0: now */
};

struct store_sweep {
	int64_t id, device_id, problem_id;
	char family[32];
	char shape_key[256];
	char strategy[32];
	char *options_key;
	char *provenance_json;
	enum store_sweep_status status;
	long planned, done;	/* done = trials recorded */
	double started, finished;	/* unix seconds; finished 0 while running */
	int owner_pid;		/* the process running it */
	char owner_host[64];
};
void store_sweep_release(struct store_sweep *s);

/* Starts a sweep, or finds the unfinished (or done) sweep with the same
 * device, problem, strategy and options_key and returns it with *resumed = 1
 * (status set back to running, owner updated). A sweep whose owner process
 * is still alive on this host is refused with KT_ECONFLICT -- that includes
 * the calling process itself, until it calls store_sweep_end(). */
int store_sweep_begin(struct store *st, const struct store_sweep_spec *spec,
		      int64_t *sweep_id, int *resumed, struct kt_err *err);
int store_sweep_end(struct store *st, int64_t sweep_id, enum store_sweep_status status,
		    struct kt_err *err);
/* The newest sweep of a plan (device, problem, strategy, options_key), the
 * one store_sweep_begin() would resume, by index: 1 with *sweep_id set, 0
 * when there is none. */
int store_sweep_find(struct store *st, int64_t device_id, int64_t problem_id,
		     const char *strategy, const char *options_key, int64_t *sweep_id,
		     struct kt_err *err);
int store_sweep_get(struct store *st, int64_t sweep_id, struct store_sweep *out,
		    struct kt_err *err);	/* KT_ENOTFOUND when absent */
/* Newest first; limit <= 0 means all. *out malloc'ed, release each, free(). */
int store_sweeps_list(struct store *st, int limit, struct store_sweep **out, int *n,
		      struct kt_err *err);
const char *store_sweep_status_name(enum store_sweep_status s);

/* ---- trials ---- */
/* What a GPU was doing around a candidate's timed repetitions (NVML); a
 * field <= 0 was not read (no NVML, the CPU test device) and is stored as
 * NULL, so a zeroed struct means "unknown". */
struct store_conditions {
	int sm_mhz_before, sm_mhz_after;
	int mem_mhz_before, mem_mhz_after;
	double power_w_before, power_w_after;
	int temp_c_before, temp_c_after;
};

struct store_trial {
	int64_t sweep_id, config_id;
	const char *status;	/* ok wrong compile_error launch_error fault timeout */
	double median_us, min_us, p90_us, spread;	/* timing (ok only) */
	int reps;
	double rel_err;		/* against the reference; -1 if not checked */
	double compile_ms;
	const char *binary_key;	/* cache key of the compiled program(s), or NULL */
	const char *message;	/* short error text or NULL */
	const char *log;	/* NVRTC log or NULL */
	/* since schema 2; zero: not known */
	struct store_conditions cond;
	int throttled;		/* 1: timed at an SM clock under the threshold */
	double norm_us;		/* drift-normalized median; <= 0: none */
	const char *errors_json;/* per-output verification, or NULL */
};
/* Commits one trial (its own transaction). Adding the same (sweep, config)
 * twice is an error: resume must not evaluate anything twice. */
int store_trial_add(struct store *st, const struct store_trial *t, struct kt_err *err);
/* Calls fn(config_key, arg) for each trial already in the sweep. */
int store_trials_done(struct store *st, int64_t sweep_id,
		      void (*fn)(const char *config_key, void *arg), void *arg,
		      struct kt_err *err);

/* A trial as read back. */
struct store_trial_row {
	int64_t sweep_id;
	char status[16];
	char *config_key;
	char *params_json;
	double median_us, min_us, p90_us, spread, rel_err, compile_ms, retime_us;
	int reps;
	char *message;
	char *log;
	double tournament_us;	/* 0 when not in a tournament */
	struct store_conditions cond;
	int throttled;
	double norm_us;		/* 0 when none */
	char *errors_json;	/* NULL when none */
	int64_t id;		/* trials.id: the order trials were recorded in */
};
void store_trial_row_release(struct store_trial_row *r);
/* Releases n rows and frees the array (store_trials_list's *out). */
void store_trial_rows_free(struct store_trial_row *rows, int n);
/* Trials of a sweep ordered by median (ok first), limit <= 0 all. */
int store_trials_list(struct store *st, int64_t sweep_id, int limit,
		      struct store_trial_row **out, int *n, struct kt_err *err);

/* The winner of a sweep timed again at the end of the run. */
int store_retime_set(struct store *st, int64_t sweep_id, const char *config_key,
		     double retime_us, struct kt_err *err);
/* A config's median over the rounds of its sweep's final tournament
 * (trials.tournament_us; the winners view ranks by it first). */
int store_tournament_set(struct store *st, int64_t sweep_id, const char *config_key,
			 double tournament_us, struct kt_err *err);

/* ---- measurements: sentinel, tournament rounds, fresh re-time ---- */
struct store_measure {
	int64_t sweep_id;
	double run;		/* start time of the invocation (groups a tournament) */
	const char *kind;	/* "sentinel", "tournament", "retime" */
	const char *config_key;	/* NULL for a vendor baseline */
	const char *baseline;	/* "cublas_dense" or NULL */
	int round, position;
	const char *status;
	double median_us, min_us, p90_us;	/* ok only */
	int reps;
	struct store_conditions cond;
	const char *message;
};
/* Appends one row (its own transaction); config_key must name a config
 * already interned for the sweep's family (a trial's). */
int store_measure_add(struct store *st, const struct store_measure *m, struct kt_err *err);
struct store_measure_row {
	char kind[16];
	char status[16];
	char *config_key;	/* "" for a baseline */
	char *baseline;		/* "" unless a baseline */
	double run, median_us, min_us, p90_us;
	int round, position, reps;
	struct store_conditions cond;	/* as stored: mem and power/temp before are 0 */
	char *message;
};
void store_measure_row_release(struct store_measure_row *r);
/* A sweep's measurements in the order they were taken; kind NULL: all. */
int store_measures_list(struct store *st, int64_t sweep_id, const char *kind,
			struct store_measure_row **out, int *n, struct kt_err *err);

/* Calls fn(config_key, status, arg) once per config that faulted or timed
 * out in another sweep (not except_sweep) of the same device and problem:
 * what a later sweep skips unless asked to try again. */
int store_faulty_configs(struct store *st, int64_t device_id, int64_t problem_id,
			 int64_t except_sweep,
			 void (*fn)(const char *config_key, const char *status, void *arg),
			 void *arg, struct kt_err *err);

/* The ok trials of family on every (device, problem) but the one given,
 * for a guided search's transfer: fn gets the problem's shape JSON, the
 * device uuid, the config key and the trial's median (its tournament
 * median when it has one). At most limit rows (<= 0: all), newest first. */
int store_family_trials(struct store *st, const char *family, int64_t except_device,
			int64_t except_problem, int limit,
			void (*fn)(const char *shape_json, const char *device_uuid,
				   const char *config_key, double median_us, void *arg),
			void *arg, struct kt_err *err);

/* ---- baselines (cuBLAS, naive reference) per device and problem ---- */
int store_baseline_add(struct store *st, int64_t device_id, int64_t problem_id,
		       int64_t sweep_id, const char *name, double median_us,
		       struct kt_err *err);
/* Newest baseline of that name; 1 found, 0 absent. */
int store_baseline_get(struct store *st, int64_t device_id, int64_t problem_id,
		       const char *name, double *median_us, struct kt_err *err);

/* ---- winners: the fastest ok trial per (device, problem) over all sweeps ----
 * cublas_us and naive_us are the newest baselines named "cublas_dense" and
 * "naive" for that device and problem. */
struct store_winner {
	int64_t device_id, problem_id, sweep_id;
	char device_name[128], device_uuid[64], arch[16];
	char family[32];
	char *shape_key, *shape_json;
	char *config_key, *params_json;
	double median_us, min_us, p90_us, retime_us;	/* retime_us 0 if never */
	double cublas_us, naive_us;	/* baselines; 0 when none */
	char *provenance_json;
};
void store_winner_release(struct store_winner *w);
/* Filters may be NULL (any). device: uuid, id or name; arch: "sm_90".
 * Ordered by device, family, shape_key. */
int store_winners_list(struct store *st, const char *device, const char *arch,
		       const char *family, struct store_winner **out, int *n,
		       struct kt_err *err);

/* The winner of one (device, problem), the row store_winners_list gives for
 * it, without computing the whole view (a few index lookups where the list
 * sorts every ok trial of the database): 1 with *w filled (release it), 0
 * when the pair has no ok trial, -1 with err set. */
int store_winner_get(struct store *st, int64_t device_id, int64_t problem_id,
		     struct store_winner *w, struct kt_err *err);

/* ---- what changed (a lookup's incremental reload) ----
 * The store only appends rows, except that a sweep's row changes when it
 * begins, resumes and ends (and when a merge brings it again), and a
 * trial's retime_us is set just before its sweep ends. So a winner can
 * change only with a new trial or baseline of its (device, problem) --
 * rows past the marks' largest ids -- or with a change of one of its
 * sweeps' rows (finished, running). A row deleted or edited otherwise (by
 * hand) is not seen: reload in full (lookup_table_reload) after that. */
struct store_sweep_mark {
	int64_t id, device_id, problem_id;
	double finished;	/* -1 while NULL */
	int running;
};
struct store_marks {
	int64_t trial_max, baseline_max;	/* largest row ids (0: none) */
	int nsweeps;
	struct store_sweep_mark *sweeps;	/* every sweep, by id; owned */
};
int store_marks_get(struct store *st, struct store_marks *m, struct kt_err *err);
void store_marks_release(struct store_marks *m);
struct store_pair {
	int64_t device_id, problem_id;
};
/* The distinct (device, problem) pairs of the trials and baselines added
 * after `from`'s largest ids, up to `to`'s. *out malloc'ed (free it). */
int store_pairs_since(struct store *st, const struct store_marks *from,
		      const struct store_marks *to, struct store_pair **out, int *n,
		      struct kt_err *err);

/* ---- compiled-binary cache ---- */
/* 1 hit (cubin and log malloc'ed, caller frees), 0 miss. */
int store_binary_get(struct store *st, const char *key, void **cubin, size_t *len,
		     char **log, struct kt_err *err);
int store_binary_put(struct store *st, const char *key, const char *arch,
		     const char *nvrtc_version, const void *cubin, size_t len,
		     const char *log, double compile_ms, struct kt_err *err);

/* ---- maintenance ---- */
/* Folds every row of the database at src into st (devices by uuid, problems
 * and configs by key, sweeps with their trials and baselines, binaries by
 * key); importing the same source twice adds nothing. A sweep loaded by
 * `ktune import` is known by the sweep it was exported from (provenance
 * imported_from.started), so databases that imported one file hold one
 * sweep once merged. A source with a newer
 * schema: KT_ESCHEMA; not a ktune database: KT_ECORRUPT. */
int store_merge_from(struct store *st, const char *src_path, struct kt_err *err);
/* Rows a merge added, by table (rows already present are not counted). */
struct store_merge_counts {
	long devices, problems, configs, sweeps, trials, measurements, baselines, binaries;
};
/* store_merge_from() that also reports what it added (added may be NULL).
 * The whole source is one transaction: on failure nothing of it is added. */
int store_merge_counted(struct store *st, const char *src_path,
			struct store_merge_counts *added, struct kt_err *err);

/* A conflict a merge resolved: one row, by its identity, with other values
 * in the two databases. The rule does not depend on the order of the
 * inputs (docs/merge.md): a device's description seen last (last_seen)
 * wins, on a tie the one whose fields sort first; a trial recorded last
 * (created) wins, on a tie the faster (an ok trial before any other); a
 * problem's or config's JSON is this database's (the key is the identity,
 * the JSON only spells it out). */
struct store_merge_conflict {
	char table[16];		/* "devices", "trials", "problems", "configs" */
	char key[320];		/* the row's identity, as text */
	char kept[256];		/* the values that stay */
	char dropped[256];	/* the values that lost */
};
#define STORE_MERGE_ITEMS 100	/* conflicts described; the rest are counted */
struct store_merge_report {
	struct store_merge_counts added;
	long conflicts;		/* resolved, all of them */
	int nitems;		/* the first STORE_MERGE_ITEMS of them */
	struct store_merge_conflict *items;	/* owned */
};
/* store_merge_counted() that also says what conflicted and how each
 * conflict was resolved; release the report. */
int store_merge_reported(struct store *st, const char *src_path, struct store_merge_report *rep,
			 struct kt_err *err);
void store_merge_report_release(struct store_merge_report *rep);

/* The underlying connection, for read-only queries in other db/ files. */
struct sqlite3 *store_sqlite(struct store *st);

#endif
