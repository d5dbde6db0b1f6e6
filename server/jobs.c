#include "jobs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tuner/sweep.h"
#include "../util/clock.h"

#define JOBS_MAX 256		/* kept in memory, queued + finished */

struct job_runner {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int started;
	int stopping;
	job_run_fn fn;
	void *arg;
	int next_id;
	int n;
	struct job_status jobs[JOBS_MAX];	/* oldest first */
};

const char *job_state_name(enum job_state s)
{
	switch (s) {
	case JOB_QUEUED: return "queued";
	case JOB_RUNNING: return "running";
	case JOB_DONE: return "done";
	case JOB_FAILED: return "failed";
	}
	return "unknown";
}

/* Caller holds mu. */
static struct job_status *find(struct job_runner *r, int id)
{
	int i;

	for (i = 0; i < r->n; i++)
		if (r->jobs[i].id == id)
			return &r->jobs[i];
	return NULL;
}

static void *runner_main(void *arg)
{
	struct job_runner *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		struct job_status *j = NULL;
		struct job_spec spec;
		struct kt_err err = { 0 };
		int i, id, rc;

		for (i = 0; i < r->n && !j; i++)
			if (r->jobs[i].state == JOB_QUEUED)
				j = &r->jobs[i];
		if (r->stopping)
			break;
		if (!j) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		j->state = JOB_RUNNING;
		j->started = kt_unix_s();
		spec = j->spec;
		id = j->id;
		/* The sweep runs without the lock: readers of the job list and
		 * progress reports go on while it does. */
		pthread_mutex_unlock(&r->mu);
		rc = r->fn(r, id, &spec, r->arg, &err);
		pthread_mutex_lock(&r->mu);
		if ((j = find(r, id))) {
			j->finished = kt_unix_s();
			j->state = rc < 0 ? JOB_FAILED : JOB_DONE;
			if (rc < 0) {
				j->code = err.code != KT_OK ? err.code : KT_EINTERNAL;
				snprintf(j->message, sizeof(j->message), "%s",
					 err.msg[0] ? err.msg : "the sweep failed");
			}
		}
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

int jobs_start(job_run_fn fn, void *arg, struct job_runner **out, struct kt_err *err)
{
	struct job_runner *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	r->fn = fn;
	r->arg = arg;
	r->next_id = 1;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (pthread_create(&r->thread, NULL, runner_main, r) != 0) {
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		free(r);
		return kt_err_set(err, KT_EINTERNAL, "cannot start the job runner thread");
	}
	r->started = 1;
	*out = r;
	return 0;
}

int jobs_submit(struct job_runner *r, const struct job_spec *spec, int *id,
		struct kt_err *err)
{
	struct job_status *j;
	int rc = -1, i;

	pthread_mutex_lock(&r->mu);
	if (r->n == JOBS_MAX) {
		/* Forget the oldest finished job to make room. */
		for (i = 0; i < r->n; i++)
			if (r->jobs[i].state == JOB_DONE || r->jobs[i].state == JOB_FAILED)
				break;
		if (i == r->n) {
			kt_err_set(err, KT_ECONFLICT, "%d sweeps are queued or running already",
				   JOBS_MAX);
			goto out;
		}
		memmove(&r->jobs[i], &r->jobs[i + 1], (r->n - i - 1) * sizeof(r->jobs[0]));
		r->n--;
	}
	j = &r->jobs[r->n++];
	memset(j, 0, sizeof(*j));
	j->id = r->next_id++;
	j->spec = *spec;
	j->state = JOB_QUEUED;
	j->created = kt_unix_s();
	*id = j->id;
	pthread_cond_signal(&r->cv);
	rc = 0;
out:
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void jobs_progress(struct job_runner *r, int id, int64_t sweep_id, long done,
		   long planned, double best_us, const char *best_config)
{
	struct job_status *j;

	pthread_mutex_lock(&r->mu);
	if ((j = find(r, id))) {
		if (sweep_id)
			j->sweep_id = sweep_id;
		j->done = done;
		j->planned = planned;
		if (best_us > 0) {
			j->best_us = best_us;
			snprintf(j->best_config, sizeof(j->best_config), "%s",
				 best_config ? best_config : "");
		}
	}
	pthread_mutex_unlock(&r->mu);
}

int jobs_get(struct job_runner *r, int id, struct job_status *out)
{
	struct job_status *j;
	int found = 0;

	pthread_mutex_lock(&r->mu);
	if ((j = find(r, id))) {
		*out = *j;
		found = 1;
	}
	pthread_mutex_unlock(&r->mu);
	return found;
}

int jobs_list(struct job_runner *r, struct job_status **out, int *n, struct kt_err *err)
{
	int i;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&r->mu);
	if (r->n && !(*out = malloc(r->n * sizeof(**out)))) {
		pthread_mutex_unlock(&r->mu);
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	}
	for (i = 0; i < r->n; i++)
		(*out)[i] = r->jobs[r->n - 1 - i];
	*n = r->n;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

void jobs_counts(struct job_runner *r, long counts[4])
{
	int i;

	memset(counts, 0, 4 * sizeof(long));
	pthread_mutex_lock(&r->mu);
	for (i = 0; i < r->n; i++)
		counts[r->jobs[i].state]++;
	pthread_mutex_unlock(&r->mu);
}

void jobs_stop(struct job_runner *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stopping = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	/* NEEDSWORK: a running sweep is waited for; the engine would need a
	 * cancel flag to interrupt it (it resumes later anyway). */
	if (r->started)
		pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r);
}

/* ---- the production run function: the tuner's sweep engine ---- */

struct sweep_ctx {
	struct job_runner *r;
	int id;
};

static void sweep_progress_cb(const struct sweep_progress *p, void *arg)
{
	struct sweep_ctx *c = arg;

	jobs_progress(c->r, c->id, p->sweep_id, p->done, p->total, p->best_us,
		      p->best_config);
}

static int sweep_cancel_cb(void *arg)
{
	struct sweep_ctx *c = arg;
	int stop;

	pthread_mutex_lock(&c->r->mu);
	stop = c->r->stopping;
	pthread_mutex_unlock(&c->r->mu);
	return stop;
}

int jobs_run_sweep(struct job_runner *r, int id, const struct job_spec *spec, void *arg,
		   struct kt_err *err)
{
	struct sweep_ctx ctx = { r, id };
	struct sweep_summary sum;
	struct sweep_opts o;
	long dev = 0;

	(void)arg;
	sweep_opts_default(&o);
	o.db_path = spec->db_path;
	o.family = spec->family;
	o.shape = spec->shape_key;
	if (spec->strategy[0])
		o.strategy = spec->strategy;
	if (spec->budget > 0)
		o.budget = spec->budget;
	if (spec->device[0])
		dev = strtol(spec->device, NULL, 10);
	o.worker.device = (int)dev;
	o.worker.exe = spec->exe;
	o.progress = sweep_progress_cb;
	o.cancel = sweep_cancel_cb;
	o.arg = &ctx;
	memset(&sum, 0, sizeof(sum));
	if (sweep_run(&o, &sum, err) < 0)
		return -1;
	jobs_progress(r, id, sum.sweep_id, sum.planned, sum.planned, sum.best_us,
		      sum.best_config);
	return 0;
}
