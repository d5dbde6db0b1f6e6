/*
 * jobs.h -- the server's job runner: sweeps started over HTTP.
 *
 * One runner thread takes jobs in order (one GPU sweep at a time), so a
 * request handler only queues a job and returns its id. A job's state,
 * progress and error are kept in memory (the sweep's trials go to the
 * database through the sweep engine); GET /v1/sweeps/job-N reads them.
 * The function that runs a job is a parameter: the server passes
 * jobs_run_sweep (the tuner's sweep engine); tests may pass their own.
 */
#ifndef KT_JOBS_H
#define KT_JOBS_H

#include <stdint.h>

#include "../util/err.h"

struct job_spec {
	char family[32];
	char shape_key[256];
	char device[64];	/* CUDA ordinal as text, "" for 0 */
	char strategy[32];	/* "" : the engine's default */
	long budget;		/* max configs to evaluate; 0: no cap */
	char db_path[1024];	/* the database the sweep writes */
	char exe[1024];		/* ktune binary for the worker child */
};

enum job_state { JOB_QUEUED = 0, JOB_RUNNING, JOB_DONE, JOB_FAILED };
const char *job_state_name(enum job_state s);

struct job_status {
	int id;
	enum job_state state;
	struct job_spec spec;
	int64_t sweep_id;	/* 0 until the engine created the sweep */
	long done, planned;
	double best_us;		/* 0 until a candidate was timed */
	char best_config[256];
	double created, started, finished;	/* unix seconds; 0: not yet */
	enum kt_errcode code;	/* KT_OK unless failed */
	char message[512];
};

struct job_runner;

/* Progress reports from inside a running job (any thread). */
void jobs_progress(struct job_runner *r, int id, int64_t sweep_id, long done,
		   long planned, double best_us, const char *best_config);

typedef int (*job_run_fn)(struct job_runner *r, int id, const struct job_spec *spec,
			  void *arg, struct kt_err *err);

int jobs_start(job_run_fn fn, void *arg, struct job_runner **out, struct kt_err *err);
/* Queues a job; KT_ECONFLICT when the queue is full. */
int jobs_submit(struct job_runner *r, const struct job_spec *spec, int *id,
		struct kt_err *err);
/* 1 found, 0 unknown id. */
int jobs_get(struct job_runner *r, int id, struct job_status *out);
/* Newest first; *out malloc'ed (free()). */
int jobs_list(struct job_runner *r, struct job_status **out, int *n, struct kt_err *err);
/* Counts per state, for /metrics. */
void jobs_counts(struct job_runner *r, long counts[4]);
/* Lets the running job finish, drops the queued ones, joins the thread. */
void jobs_stop(struct job_runner *r);

/* The production run function: the tuner's sweep engine on spec. */
int jobs_run_sweep(struct job_runner *r, int id, const struct job_spec *spec, void *arg,
		   struct kt_err *err);

#endif
