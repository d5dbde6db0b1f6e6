/*
 * sweep.c -- the orchestration of one sweep (see sweep.h for the contract).
 *
 * The strategy proposes candidates in batches; a batch's programs are
 * looked up in the store's binary cache, the misses compiled by the NVRTC
 * pool (one thread per core), then each candidate is verified and timed in
 * the worker child, its trial committed and its outcome told to the
 * strategy before the next one starts. Compiling a batch ahead keeps the
 * pool busy without holding thousands of CUBINs. A candidate the sweep
 * already has a trial of (a resume) is told from the store, never run.
 *
 * Drift: the sentinel is timed before the first candidate, after every
 * sentinel_every evaluated ones and after the last; a trial's norm_us is
 * its median times (the sweep's first sentinel time / the latest one), the
 * time it would have read on the sentinel's footing. The tournament, not
 * norm_us, decides the winner: norm_us only ranks who enters it.
 */
#include "sweep.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../db/store.h"
#include "../kernels/family.h"
#include "famjson.h"
#include "jit.h"
#include "space.h"
#include "strategy.h"
#include "../util/clock.h"

#define SWEEP_BATCH 32
#define SWEEP_PRIOR_ROWS 4000

void sweep_opts_default(struct sweep_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->strategy = "exhaustive";
	o->seed = 1;
	o->retime = 1;
	o->baseline = 1;
	o->timeout_s = 10;
	o->tournament_k = 8;
	o->tournament_max = 24;
	o->rounds = 5;
	o->tie_pct = 3;
	o->sentinel_every = 16;
	worker_opts_default(&o->worker);
}

/* ---- a set of config keys with what is known of each ---- */

struct kentry {
	char *key;
	char status[16];
	double us;		/* ok: its time; else 0 */
};

struct keyset {
	struct kentry *e;
	long cap, n;
};

static uint64_t key_hash(const char *k)
{
	uint64_t h = 1469598103934665603ULL;

	while (*k)
		h = (h ^ (unsigned char)*k++) * 1099511628211ULL;
	return h;
}

static struct kentry *keyset_find(const struct keyset *s, const char *key)
{
	long i;

	if (!s->cap)
		return NULL;
	for (i = (long)(key_hash(key) % (uint64_t)s->cap); s->e[i].key; i = (i + 1) % s->cap)
		if (strcmp(s->e[i].key, key) == 0)
			return &s->e[i];
	return NULL;
}

/* Adds (or updates) key; 0, or -1 when out of memory. */
static int keyset_put(struct keyset *s, const char *key, const char *status, double us)
{
	struct kentry *e;
	long i;

	if ((s->n + 1) * 2 > s->cap) {
		struct keyset bigger = { NULL, s->cap ? s->cap * 2 : 256, 0 };

		if (!(bigger.e = calloc((size_t)bigger.cap, sizeof(*bigger.e))))
			return -1;
		for (i = 0; i < s->cap; i++) {
			long j;

			if (!s->e[i].key)
				continue;
			for (j = (long)(key_hash(s->e[i].key) % (uint64_t)bigger.cap); bigger.e[j].key;
			     j = (j + 1) % bigger.cap)
				;
			bigger.e[j] = s->e[i];
			bigger.n++;
		}
		free(s->e);
		*s = bigger;
	}
	if (!(e = keyset_find(s, key))) {
		for (i = (long)(key_hash(key) % (uint64_t)s->cap); s->e[i].key; i = (i + 1) % s->cap)
			;
		e = &s->e[i];
		if (!(e->key = strdup(key)))
			return -1;
		s->n++;
	}
	snprintf(e->status, sizeof(e->status), "%s", status ? status : "");
	e->us = us;
	return 0;
}

static void keyset_release(struct keyset *s)
{
	long i;

	for (i = 0; i < s->cap; i++)
		free(s->e[i].key);
	free(s->e);
	memset(s, 0, sizeof(*s));
}

/* ---- candidates and the run ---- */

/* One candidate of a batch, with the programs it needs. */
struct cand {
	struct kt_config cfg;
	long idx;		/* index into the space; -1 outside it */
	char key[512];
	struct kt_plan plan;
	int plan_failed;
	char message[600];
	struct jit_result bin[KT_MAX_PROGRAMS];
	int compile_failed;	/* NVRTC rejected one of its programs */
	double compile_ms;
};

struct run {
	const struct sweep_opts *o;
	const struct kt_family *f;
	struct kt_shape shape;
	struct kt_target tgt;
	char arch[16];
	struct store *st;
	struct worker *w;
	struct worker_device_info di;
	int64_t sweep_id, device_id, problem_id;
	double run_id;		/* this invocation's start (unix s): groups its measurements */
	struct sweep_summary *sum;
	struct strategy *strat;
	struct cand ref;	/* the reference, kept for a fresh worker */
	struct keyset done;	/* trials of this sweep, recorded before or now */
	struct keyset faulty;	/* faulted or hung in another sweep */
	struct keyset ok_now;	/* configs verified by this invocation */
	double t0, last_progress;
	long done_n;		/* recorded (resumed included) or skipped */
	long total;
	double best_us;
	char best_key[512];
	double eval_s;		/* wall time spent evaluating this run */
	long evaluated;		/* worker evaluations this run */
	/* drift */
	int sent_kind;		/* 0 none, 1 the cuBLAS baseline, 2 a config */
	struct cand sent;	/* the sentinel config, sent_kind 2 */
	double sent_ref, sent_last;
	long sent_since;
	int sent_round;
	int max_mhz;		/* the highest SM clock seen (or the device's) */
};

/* Resolves every program of a plan to a CUBIN: the store's cache first, then
 * NVRTC for the misses (in parallel), writing new binaries back. A program
 * that fails to compile leaves its bin[i].ok = 0 with the log. */
static int plans_compile(struct run *r, struct cand *c, int n, struct kt_err *err)
{
	struct jit_job *jobs = NULL;
	int *owner = NULL, *prog = NULL;
	int njobs = 0, i, p, rc = -1;

	if (!(jobs = calloc((size_t)n * KT_MAX_PROGRAMS, sizeof(*jobs))) ||
	    !(owner = calloc((size_t)n * KT_MAX_PROGRAMS, sizeof(int))) ||
	    !(prog = calloc((size_t)n * KT_MAX_PROGRAMS, sizeof(int)))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory compiling a batch");
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (c[i].plan_failed)
			continue;
		for (p = 0; p < c[i].plan.nprograms; p++) {
			struct jit_result *b = &c[i].bin[p];
			int hit;

			if (b->ok)
				continue;	/* compiled before (a sentinel, a contender) */
			if (jit_key(&c[i].plan.programs[p], r->arch, b->key, err) != 0)
				goto out;
			hit = store_binary_get(r->st, b->key, &b->cubin, &b->cubin_len, &b->log, err);
			if (hit < 0)
				goto out;
			if (hit) {
				b->ok = 1;
				continue;
			}
			jobs[njobs].prog = &c[i].plan.programs[p];
			jobs[njobs].arch = r->arch;
			owner[njobs] = i;
			prog[njobs] = p;
			njobs++;
		}
	}
	if (njobs)
		jit_compile_all(jobs, njobs, r->o->threads);
	for (i = 0; i < njobs; i++) {
		struct cand *cd = &c[owner[i]];
		struct jit_job *j = &jobs[i];

		if (j->failed) {
			/* NVRTC itself broke (not the program): stop, it would
			 * fail every candidate the same way. */
			kt_err_set(err, KT_ECOMPILE, "NVRTC failed: %s", j->err_msg);
			goto out;
		}
		cd->bin[prog[i]] = j->res;
		memset(&j->res, 0, sizeof(j->res));
		cd->compile_ms += cd->bin[prog[i]].ms;
		if (!cd->bin[prog[i]].ok) {
			cd->compile_failed = 1;
			continue;
		}
		if (store_binary_put(r->st, cd->bin[prog[i]].key, r->arch, jit_nvrtc_version(),
				     cd->bin[prog[i]].cubin, cd->bin[prog[i]].cubin_len,
				     cd->bin[prog[i]].log, cd->bin[prog[i]].ms, err) != 0)
			goto out;
	}
	rc = 0;
out:
	if (jobs)
		for (i = 0; i < njobs; i++)
			jit_result_release(&jobs[i].res);
	free(jobs);
	free(owner);
	free(prog);
	return rc;
}

static void cand_release(struct cand *c)
{
	int p;

	for (p = 0; p < KT_MAX_PROGRAMS; p++)
		jit_result_release(&c->bin[p]);
}

/* Plans config cfg into c (zeroed first); a plan the family cannot build
 * is the candidate's failure (plan_failed), not the sweep's. */
static void cand_plan(struct run *r, struct cand *c, const struct kt_config *cfg, long idx)
{
	struct kt_err pe = { 0 };

	memset(c, 0, sizeof(*c));
	c->cfg = *cfg;
	c->idx = idx;
	kt_config_key(r->f, &c->cfg, c->key, sizeof(c->key));
	if (r->f->plan(r->f, &r->shape, &c->cfg, &r->tgt, &c->plan, &pe) != 0) {
		c->plan_failed = 1;
		snprintf(c->message, sizeof(c->message), "plan: %s", pe.msg);
	}
}

static void progress(struct run *r, const char *phase, long done, long total, int force)
{
	struct sweep_progress p;
	double t = kt_clock_s();
	long left = total - done;

	if (!r->o->progress || (!force && t - r->last_progress < 0.1))
		return;
	r->last_progress = t;
	memset(&p, 0, sizeof(p));
	p.sweep_id = r->sweep_id;
	p.phase = phase;
	p.done = done;
	p.total = total;
	p.ok = r->sum->n_ok;
	p.best_us = r->best_us;
	p.best_config = r->best_key;
	p.eta_s = r->evaluated > 0 && !strcmp(phase, "evaluate") ? r->eval_s / r->evaluated * left
								  : -1;
	r->o->progress(&p, r->o->arg);
}

static void count_status(struct sweep_summary *s, const char *status)
{
	if (!strcmp(status, "ok"))
		s->n_ok++;
	else if (!strcmp(status, "wrong"))
		s->n_wrong++;
	else if (!strcmp(status, "compile_error"))
		s->n_compile_error++;
	else if (!strcmp(status, "launch_error"))
		s->n_launch_error++;
	else if (!strcmp(status, "fault"))
		s->n_fault++;
	else if (!strcmp(status, "timeout"))
		s->n_timeout++;
}

/* {"y": {"rel_l2", "max_err", "over", "tol", "local_tol"}, ...}, or NULL. */
static char *errors_json(const struct worker_result *wr)
{
	json_t *j;
	char *s;
	int i;

	if (!wr || wr->nout <= 0 || !(j = json_object()))
		return NULL;
	for (i = 0; i < wr->nout && i < KT_MAX_BUFS; i++) {
		const struct worker_outerr *o = &wr->out[i];

		json_object_set_new(j, o->name, json_pack("{s:f,s:f,s:I,s:I,s:f,s:f}", "rel_l2",
							  o->rel_l2, "max_err", o->max_err, "over",
							  (json_int_t)o->over, "nonfinite",
							  (json_int_t)o->nonfinite, "tol", o->l2_tol,
							  "local_tol", o->local_tol));
	}
	s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(4));
	json_decref(j);
	return s;
}

static const void *const *bins_ptrs(struct cand *c, const void *ptrs[KT_MAX_PROGRAMS],
				    size_t lens[KT_MAX_PROGRAMS])
{
	int p;

	for (p = 0; p < c->plan.nprograms; p++) {
		ptrs[p] = c->bin[p].cubin;
		lens[p] = c->bin[p].cubin_len;
	}
	return ptrs;
}

/* A per-candidate ceiling scaled from the best time so far: a candidate's
 * verification and timing take a few hundred launches, so anything running
 * far longer than the best one is hung. */
static double cand_timeout(const struct run *r)
{
	double t = r->o->timeout_s > 0 ? r->o->timeout_s : 10;

	if (r->best_us > 0) {
		double scaled = 2.0 + r->best_us * 1e-6 * 20000;

		if (scaled < t)
			t = scaled;
	}
	return t;
}

/* ---- conditions ---- */

static int clock_threshold(const struct run *r)
{
	if (r->o->clock_threshold_mhz > 0)
		return r->o->clock_threshold_mhz;
	return r->max_mhz > 0 ? (int)(0.96 * r->max_mhz) : 0;
}

static void cond_note_clock(struct run *r, int mhz)
{
	struct sweep_summary *s = r->sum;

	if (mhz <= 0)
		return;
	s->nvml = 1;
	if (s->clock_min_mhz == 0 || mhz < s->clock_min_mhz)
		s->clock_min_mhz = mhz;
	if (mhz > s->clock_max_mhz)
		s->clock_max_mhz = mhz;
	if (mhz > r->max_mhz)
		r->max_mhz = mhz;
}

/* Folds one result's conditions into the summary; 1 when it was timed
 * under the clock threshold. */
static int cond_note(struct run *r, const struct worker_conditions *c)
{
	int thr, lo;

	cond_note_clock(r, c->sm_mhz_before);
	cond_note_clock(r, c->sm_mhz_after);
	if (c->power_w_before > r->sum->power_max_w)
		r->sum->power_max_w = c->power_w_before;
	if (c->power_w_after > r->sum->power_max_w)
		r->sum->power_max_w = c->power_w_after;
	if (c->temp_c_after > r->sum->temp_max_c)
		r->sum->temp_max_c = c->temp_c_after;
	thr = clock_threshold(r);
	r->sum->clock_threshold_mhz = thr;
	lo = c->sm_mhz_before > 0 && (c->sm_mhz_after <= 0 || c->sm_mhz_before < c->sm_mhz_after) ?
	     c->sm_mhz_before : c->sm_mhz_after;
	return thr > 0 && lo > 0 && lo < thr;
}

static void cond_to_store(const struct worker_conditions *c, struct store_conditions *s)
{
	s->sm_mhz_before = c->sm_mhz_before;
	s->sm_mhz_after = c->sm_mhz_after;
	s->mem_mhz_before = c->mem_mhz_before;
	s->mem_mhz_after = c->mem_mhz_after;
	s->power_w_before = c->power_w_before;
	s->power_w_after = c->power_w_after;
	s->temp_c_before = c->temp_c_before;
	s->temp_c_after = c->temp_c_after;
}

/* One measurement row (sentinel, tournament round, retime). */
static int measure_add(struct run *r, const char *kind, const char *key, const char *baseline,
		       int round, int position, const char *status, const struct worker_result *wr,
		       struct kt_err *err)
{
	struct store_measure m;

	memset(&m, 0, sizeof(m));
	m.sweep_id = r->sweep_id;
	m.run = r->run_id;
	m.kind = kind;
	m.config_key = key;
	m.baseline = baseline;
	m.round = round;
	m.position = position;
	m.status = status;
	if (wr) {
		m.median_us = wr->median_us;
		m.min_us = wr->min_us;
		m.p90_us = wr->p90_us;
		m.reps = wr->reps;
		cond_to_store(&wr->cond, &m.cond);
		m.message = wr->message[0] ? wr->message : NULL;
	}
	return store_measure_add(r->st, &m, err);
}

/* ---- the drift sentinel ---- */

/* Times the sentinel once and records it; a sentinel that stops working
 * is dropped (the sweep goes on without one). */
static int sentinel_time(struct run *r, struct kt_err *err)
{
	struct worker_result wr;
	const void *ptrs[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
	int rc;

	if (r->sent_kind == 0)
		return 0;
	progress(r, "sentinel", r->done_n, r->total, 1);
	if (r->sent_kind == 1)
		rc = worker_baseline(r->w, "cublas_dense", &wr, err);
	else
		rc = worker_eval(r->w, &r->sent.cfg, &r->sent.plan, bins_ptrs(&r->sent, ptrs, lens),
				 lens, cand_timeout(r) + 5, &wr, err);
	if (rc < 0)
		return -1;
	if (measure_add(r, "sentinel", r->sent_kind == 2 ? r->sent.key : NULL,
			r->sent_kind == 1 ? "cublas_dense" : NULL, r->sent_round++, (int)r->done_n,
			worker_status_name(wr.status), &wr, err) != 0)
		return -1;
	r->sent_since = 0;
	cond_note(r, &wr.cond);
	if (wr.status != WORKER_OK) {
		fprintf(stderr, "ktune: warning: the drift sentinel %s was %s (%s); going on without\n",
			r->sum->sentinel, worker_status_name(wr.status), wr.message);
		r->sent_kind = 0;
		return 0;
	}
	r->sum->sentinel_n++;
	if (r->sent_ref <= 0)
		r->sent_ref = wr.median_us;
	if (r->sum->sentinel_first_us <= 0)
		r->sum->sentinel_first_us = r->sent_ref;
	r->sent_last = wr.median_us;
	r->sum->sentinel_last_us = wr.median_us;
	if (r->sum->sentinel_min_us <= 0 || wr.median_us < r->sum->sentinel_min_us)
		r->sum->sentinel_min_us = wr.median_us;
	if (wr.median_us > r->sum->sentinel_max_us)
		r->sum->sentinel_max_us = wr.median_us;
	return 0;
}

/* Picks the sentinel: the cuBLAS baseline when it was timed (linear
 * families), else the family's default config on this target. Earlier
 * invocations' sentinel rows give the reference time, so norm_us keeps one
 * footing across resumes. */
static int sentinel_setup(struct run *r, int have_baseline, struct kt_err *err)
{
	struct store_measure_row *rows = NULL;
	struct kt_config dc;
	int n = 0, i;

	if (r->o->sentinel_every <= 0)
		return 0;
	if (have_baseline) {
		r->sent_kind = 1;
		snprintf(r->sum->sentinel, sizeof(r->sum->sentinel), "cublas_dense");
	} else if (r->f->default_config && r->f->default_config(r->f, &r->shape, &r->tgt,
								&dc) == 0) {
		cand_plan(r, &r->sent, &dc, -1);
		if (r->sent.plan_failed)
			return 0;
		if (plans_compile(r, &r->sent, 1, err) != 0)
			return -1;
		if (r->sent.compile_failed)
			return 0;
		r->sent_kind = 2;
		snprintf(r->sum->sentinel, sizeof(r->sum->sentinel), "%s", r->sent.key);
		/* its config must be interned for its measurement rows */
		{
			char *pj = famjson_config_text(r->f, &dc);
			int64_t id;
			int rc = pj ? store_config_intern(r->st, r->f->name, r->sent.key, pj, &id, err) :
				 kt_err_set(err, KT_EINTERNAL, "out of memory");

			free(pj);
			if (rc != 0)
				return -1;
		}
	} else {
		return 0;
	}
	if (store_measures_list(r->st, r->sweep_id, "sentinel", &rows, &n, err) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		int same = r->sent_kind == 1 ? !strcmp(rows[i].baseline, "cublas_dense") :
			   !strcmp(rows[i].config_key, r->sent.key);

		if (same && !strcmp(rows[i].status, "ok")) {
			if (r->sent_ref <= 0)
				r->sent_ref = rows[i].median_us;
			r->sum->sentinel_n++;
			if (r->sum->sentinel_min_us <= 0 || rows[i].median_us < r->sum->sentinel_min_us)
				r->sum->sentinel_min_us = rows[i].median_us;
			if (rows[i].median_us > r->sum->sentinel_max_us)
				r->sum->sentinel_max_us = rows[i].median_us;
		}
		if (rows[i].round >= r->sent_round)
			r->sent_round = rows[i].round + 1;
		store_measure_row_release(&rows[i]);
	}
	free(rows);
	r->sum->sentinel_first_us = r->sent_ref;
	return 0;
}

/* ---- trials ---- */

static int record(struct run *r, struct cand *c, const char *status,
		  const struct worker_result *wr, const char *message, struct kt_err *err)
{
	struct store_trial t;
	char *pj = famjson_config_text(r->f, &c->cfg), *ej = NULL;
	int64_t cfg_id;
	char *log = NULL;
	size_t loglen = 0;
	int p, rc = -1;

	if (!pj)
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	if (store_config_intern(r->st, r->f->name, c->key, pj, &cfg_id, err) != 0)
		goto out;
	/* The logs of every program, kept with the trial (warnings too). */
	for (p = 0; p < c->plan.nprograms; p++)
		if (c->bin[p].log && *c->bin[p].log)
			loglen += strlen(c->bin[p].log) + 1;
	if (loglen && (log = calloc(1, loglen + 1)))
		for (p = 0; p < c->plan.nprograms; p++)
			if (c->bin[p].log && *c->bin[p].log) {
				strcat(log, c->bin[p].log);
				strcat(log, "\n");
			}
	memset(&t, 0, sizeof(t));
	t.sweep_id = r->sweep_id;
	t.config_id = cfg_id;
	t.status = status;
	t.rel_err = -1;
	if (wr) {
		t.rel_err = wr->rel_err;
		if (wr->status == WORKER_OK) {
			t.median_us = wr->median_us;
			t.min_us = wr->min_us;
			t.p90_us = wr->p90_us;
			t.spread = wr->spread;
			t.reps = wr->reps;
			cond_to_store(&wr->cond, &t.cond);
			t.throttled = cond_note(r, &wr->cond);
			r->sum->n_throttled += t.throttled;
			if (r->sent_kind && r->sent_ref > 0 && r->sent_last > 0)
				t.norm_us = wr->median_us * r->sent_ref / r->sent_last;
		}
		ej = errors_json(wr);
	}
	t.compile_ms = c->compile_ms;
	t.binary_key = c->plan.nprograms ? c->bin[0].key : NULL;
	t.message = message && *message ? message : NULL;
	t.log = log;
	t.errors_json = ej;
	if (store_trial_add(r->st, &t, err) != 0)
		goto out;
	count_status(r->sum, status);
	r->done_n++;
	r->sum->evaluated++;
	if (keyset_put(&r->done, c->key, status, t.median_us) != 0) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	if (wr && wr->status == WORKER_OK) {
		if (keyset_put(&r->ok_now, c->key, "ok", wr->median_us) != 0) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			goto out;
		}
		if (r->best_us == 0 || wr->median_us < r->best_us) {
			r->best_us = wr->median_us;
			snprintf(r->best_key, sizeof(r->best_key), "%s", c->key);
		}
	}
	if (c->idx >= 0)
		strategy_report(r->strat, c->idx, wr && wr->status == WORKER_OK ? wr->median_us : -1);
	rc = 0;
out:
	free(pj);
	free(ej);
	free(log);
	return rc;
}

/* 1 when the sweep must stop before the next candidate. */
static int must_stop(struct run *r)
{
	if (r->o->cancel && r->o->cancel(r->o->arg)) {
		r->sum->interrupted = 1;
		return 1;
	}
	if (r->o->time_limit_s > 0 && kt_clock_s() - r->t0 > r->o->time_limit_s) {
		r->sum->time_limited = 1;
		return 1;
	}
	return 0;
}

static int eval_batch(struct run *r, struct cand *c, int n, struct kt_err *err)
{
	int i;

	if (plans_compile(r, c, n, err) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		struct worker_result wr;
		const void *ptrs[KT_MAX_PROGRAMS];
		size_t lens[KT_MAX_PROGRAMS];
		double t0;
		int p;

		if (must_stop(r))
			return 0;
		if (c[i].plan_failed) {
			if (record(r, &c[i], "compile_error", NULL, c[i].message, err) != 0)
				return -1;
			continue;
		}
		if (c[i].compile_failed) {
			char msg[512] = "NVRTC rejected the program";

			for (p = 0; p < c[i].plan.nprograms; p++)
				if (!c[i].bin[p].ok)
					snprintf(msg, sizeof(msg), "NVRTC rejected %s (see log)",
						 c[i].plan.programs[p].tpl);
			if (record(r, &c[i], "compile_error", NULL, msg, err) != 0)
				return -1;
			continue;
		}
		if (r->sent_kind && r->sent_since >= r->o->sentinel_every &&
		    sentinel_time(r, err) != 0)
			return -1;
		t0 = kt_clock_s();
		if (worker_eval(r->w, &c[i].cfg, &c[i].plan, bins_ptrs(&c[i], ptrs, lens), lens,
				cand_timeout(r), &wr, err) != 0)
			return -1;
		r->eval_s += kt_clock_s() - t0;
		r->evaluated++;
		r->sent_since++;
		if (record(r, &c[i], worker_status_name(wr.status), &wr, wr.message, err) != 0)
			return -1;
		progress(r, "evaluate", r->done_n, r->total, 0);
	}
	return 0;
}

/* A sample (random, halving, guided) may miss the family's default config,
 * the one an untuned shape runs: it is evaluated too when it is in the
 * space swept (not excluded by --variants or --config) and this sweep has
 * no trial of it, so that the winner is never a config the default beats. */
static int eval_default(struct run *r, const struct space *sp, struct cand *slot,
			struct kt_err *err)
{
	struct kt_config dc;
	char key[512], k2[512];
	long i;
	int rc;

	if (!r->f->default_config || r->f->default_config(r->f, &r->shape, &r->tgt, &dc) != 0)
		return 0;
	kt_config_key(r->f, &dc, key, sizeof(key));
	if (keyset_find(&r->faulty, key))
		return 0;
	/* this sweep's trials, this run's included */
	{
		struct store_trial_row *rows = NULL;
		int n = 0, j, found = 0;

		if (store_trials_list(r->st, r->sweep_id, 0, &rows, &n, err) != 0)
			return -1;
		for (j = 0; j < n; j++)
			found |= strcmp(rows[j].config_key, key) == 0;
		store_trial_rows_free(rows, n);
		if (found)
			return 0;
	}
	for (i = 0; i < sp->n; i++) {
		kt_config_key(r->f, &sp->cfg[i], k2, sizeof(k2));
		if (strcmp(k2, key) == 0)
			break;
	}
	if (i == sp->n)
		return 0;
	r->total++;
	cand_plan(r, slot, &sp->cfg[i], i);
	progress(r, "compile", r->done_n, r->total, 1);
	rc = eval_batch(r, slot, 1, err);
	cand_release(slot);
	return rc;
}

/* ---- the final tournament ---- */

struct entrant {
	char key[512];
	double rank_us;		/* what ranks it for entry: norm_us, else median */
	double trial_us;
};

static int entrant_cmp(const void *a, const void *b)
{
	const struct entrant *x = a, *y = b;

	return x->rank_us < y->rank_us ? -1 : x->rank_us > y->rank_us;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(const double *v, int n)
{
	double s[SWEEP_MAX_ROUNDS];
	int i, k = 0;

	for (i = 0; i < n; i++)
		if (v[i] > 0)
			s[k++] = v[i];
	if (k == 0)
		return 0;
	qsort(s, (size_t)k, sizeof(double), dbl_cmp);
	return k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}

/* The leading candidates of the sweep's ok trials, each planned and
 * compiled (from the binary cache) into c. Returns how many, or -1. */
static int tournament_entrants(struct run *r, struct cand **out, struct kt_err *err)
{
	struct store_trial_row *rows = NULL;
	struct entrant *e = NULL;
	struct cand *c = NULL;
	int n = 0, ne = 0, i, take = 0, cap;
	double best;

	*out = NULL;
	if (store_trials_list(r->st, r->sweep_id, 0, &rows, &n, err) != 0)
		return -1;
	if (!(e = calloc((size_t)(n ? n : 1), sizeof(*e))))
		goto oom;
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].status, "ok") != 0)
			continue;
		snprintf(e[ne].key, sizeof(e[ne].key), "%s", rows[i].config_key);
		e[ne].trial_us = rows[i].median_us;
		e[ne].rank_us = rows[i].norm_us > 0 ? rows[i].norm_us : rows[i].median_us;
		ne++;
	}
	qsort(e, (size_t)ne, sizeof(*e), entrant_cmp);
	cap = r->o->tournament_max > 0 ? r->o->tournament_max : 24;
	if (cap > SWEEP_MAX_CONTENDERS)
		cap = SWEEP_MAX_CONTENDERS;
	best = ne ? e[0].rank_us : 0;
	for (i = 0; i < ne && take < cap; i++)
		if (i < r->o->tournament_k || e[i].rank_us <= best * (1 + r->o->tie_pct / 100.0))
			take++;
	if (take == 0)
		goto done;
	if (!(c = calloc((size_t)take, sizeof(*c))))
		goto oom;
	for (i = 0; i < take; i++) {
		struct kt_config cfg;

		if (kt_config_parse(r->f, e[i].key, &cfg, err) != 0)
			goto fail;
		cand_plan(r, &c[i], &cfg, -1);
		snprintf(r->sum->contenders[i].config, sizeof(r->sum->contenders[i].config), "%s",
			 e[i].key);
		r->sum->contenders[i].trial_us = e[i].trial_us;
	}
	if (plans_compile(r, c, take, err) != 0)
		goto fail;
done:
	store_trial_rows_free(rows, n);
	free(e);
	*out = c;
	return take;
oom:
	kt_err_set(err, KT_EINTERNAL, "out of memory");
fail:
	for (i = 0; c && i < take; i++)
		cand_release(&c[i]);
	free(c);
	c = NULL;
	take = -1;
	goto done;
}

static int contender_cmp(const void *a, const void *b)
{
	const struct sweep_contender *x = a, *y = b;

	if ((x->median_us > 0) != (y->median_us > 0))
		return x->median_us > 0 ? -1 : 1;
	return x->median_us < y->median_us ? -1 : x->median_us > y->median_us;
}

/* Every contender timed afresh in each of R rounds; round k runs them in
 * the order rotated by k, so that each takes every place in turn and drift
 * over a round touches them alike. */
static int tournament(struct run *r, struct kt_err *err)
{
	struct sweep_summary *s = r->sum;
	struct cand *c = NULL;
	int n, rounds = r->o->rounds > 0 ? r->o->rounds : 5, k, j, i, rc = -1;
	long done = 0;

	if (rounds > SWEEP_MAX_ROUNDS)
		rounds = SWEEP_MAX_ROUNDS;
	if ((n = tournament_entrants(r, &c, err)) < 0)
		return -1;
	s->tournament_n = n;
	s->tournament_rounds = rounds;
	for (k = 0; k < rounds && n > 0; k++)
		for (j = 0; j < n; j++) {
			struct worker_result wr;
			const void *ptrs[KT_MAX_PROGRAMS];
			size_t lens[KT_MAX_PROGRAMS];
			struct cand *cd;

			if (r->o->cancel && r->o->cancel(r->o->arg)) {
				s->interrupted = 1;
				rc = 0;
				goto out;
			}
			i = (j + k) % n;
			cd = &c[i];
			progress(r, "tournament", done++, (long)n * rounds, 0);
			if (cd->plan_failed || cd->compile_failed) {
				memset(&wr, 0, sizeof(wr));
				wr.status = WORKER_LAUNCH_ERROR;
				snprintf(wr.message, sizeof(wr.message), "%.200s",
					 cd->plan_failed ? cd->message : "did not compile this time");
			} else if (worker_eval(r->w, &cd->cfg, &cd->plan, bins_ptrs(cd, ptrs, lens), lens,
					       cand_timeout(r) + 5, &wr, err) != 0) {
				goto out;
			}
			if (measure_add(r, "tournament", cd->key, NULL, k, j,
					wr.status == WORKER_LAUNCH_ERROR && (cd->plan_failed ||
									cd->compile_failed) ?
					"compile_error" : worker_status_name(wr.status), &wr, err) != 0)
				goto out;
			cond_note(r, &wr.cond);
			if (wr.status == WORKER_OK) {
				s->contenders[i].round_us[k] = wr.median_us;
				s->contenders[i].ok_rounds++;
				if (keyset_put(&r->ok_now, cd->key, "ok", wr.median_us) != 0) {
					kt_err_set(err, KT_EINTERNAL, "out of memory");
					goto out;
				}
			} else {
				fprintf(stderr, "ktune: warning: %s was %s in tournament round %d: %s\n",
					cd->key, worker_status_name(wr.status), k + 1, wr.message);
			}
		}
	for (i = 0; i < n; i++) {
		struct sweep_contender *ct = &s->contenders[i];

		/* A contender that failed a round cannot win: it is not
		 * reliably right. */
		ct->median_us = ct->ok_rounds == rounds ? median_of(ct->round_us, rounds) : 0;
		if (ct->median_us > 0 &&
		    store_tournament_set(r->st, r->sweep_id, ct->config, ct->median_us, err) != 0)
			goto out;
	}
	qsort(s->contenders, (size_t)n, sizeof(s->contenders[0]), contender_cmp);
	rc = 0;
out:
	for (i = 0; c && i < n; i++)
		cand_release(&c[i]);
	free(c);
	return rc;
}

/* ---- the winner ---- */

/* The winner timed once more in a new worker process (a new context, a new
 * reference run): the figure to set beside the tournament's. */
static int retime_fresh(struct run *r, struct cand *c, struct kt_err *err)
{
	struct worker_result wr;
	const void *ptrs[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];

	if (plans_compile(r, c, 1, err) != 0)
		return -1;
	if (c->compile_failed || c->plan_failed)
		return kt_err_set(err, KT_ECOMPILE, "%s: the winner %s does not build again",
				  r->f->name, c->key);
	progress(r, "retime", r->done_n, r->total, 1);
	r->sum->restarts += worker_restarts(r->w);
	worker_stop(r->w);
	r->w = NULL;
	if (worker_start(&r->o->worker, &r->w, err) != 0 ||
	    worker_problem(r->w, r->f, &r->shape, r->o->seed, &r->ref.plan,
			   bins_ptrs(&r->ref, ptrs, lens), lens, err) != 0)
		return -1;
	if (worker_eval(r->w, &c->cfg, &c->plan, bins_ptrs(c, ptrs, lens), lens, cand_timeout(r) + 5,
			&wr, err) != 0)
		return -1;
	if (measure_add(r, "retime", c->key, NULL, 0, 0, worker_status_name(wr.status), &wr, err) != 0)
		return -1;
	cond_note(r, &wr.cond);
	if (wr.status != WORKER_OK) {
		/* A winner that fails when run again is a bug worth shouting
		 * about, but the recorded trials stand. */
		fprintf(stderr, "ktune: warning: the winner %s was %s when timed again: %s\n",
			c->key, worker_status_name(wr.status), wr.message);
		return 0;
	}
	r->sum->retime_us = wr.median_us;
	if (keyset_put(&r->ok_now, c->key, "ok", wr.median_us) != 0)
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	return store_retime_set(r->st, r->sweep_id, c->key, wr.median_us, err);
}

/* Fills the summary's winner: the tournament's when it had one, else the
 * sweep's fastest ok trial; then the fresh re-time. */
static int finish_winner(struct run *r, struct kt_err *err)
{
	struct store_trial_row *rows = NULL;
	struct sweep_summary *s = r->sum;
	struct cand c;
	const char *key = NULL;
	int n = 0, rc = -1, i, w = -1;

	memset(&c, 0, sizeof(c));
	if (store_trials_list(r->st, r->sweep_id, 0, &rows, &n, err) != 0)
		return -1;
	if (s->tournament_n > 0 && s->contenders[0].median_us > 0)
		key = s->contenders[0].config;
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].status, "ok") != 0)
			continue;
		if (key ? !strcmp(rows[i].config_key, key) : (w < 0 ||
							     rows[i].median_us < rows[w].median_us))
			w = i;
	}
	if (w < 0) {
		rc = 0;
		goto out;
	}
	s->best_trial_us = rows[w].median_us;
	s->best_us = key ? s->contenders[0].median_us : rows[w].median_us;
	s->best_min_us = rows[w].min_us;
	s->best_p90_us = rows[w].p90_us;
	s->best_rel_err = rows[w].rel_err;
	snprintf(s->best_config, sizeof(s->best_config), "%s", rows[w].config_key);
	snprintf(s->best_params, sizeof(s->best_params), "%s",
		 rows[w].params_json ? rows[w].params_json : "{}");
	{
		struct kt_config cfg;

		if (kt_config_parse(r->f, rows[w].config_key, &cfg, err) != 0)
			goto out;
		cand_plan(r, &c, &cfg, -1);
	}
	if (c.plan_failed) {
		kt_err_set(err, KT_EINTERNAL, "%s", c.message);
		goto out;
	}
	for (i = 0; i < c.plan.nprograms; i++) {
		size_t used = strlen(s->best_templates);

		if (!strstr(s->best_templates, c.plan.programs[i].tpl))
			snprintf(s->best_templates + used, sizeof(s->best_templates) - used,
				 "%s%s.cu", used ? "," : "", c.plan.programs[i].tpl);
	}
	if (r->o->retime && !s->interrupted && retime_fresh(r, &c, err) != 0)
		goto out;
	s->verified = keyset_find(&r->ok_now, s->best_config) != NULL;
	rc = 0;
out:
	cand_release(&c);
	store_trial_rows_free(rows, n);
	return rc;
}

/* ---- set-up ---- */

/* "580.95.05" from the kernel module, when there is one: the first word of
 * its version line that looks like a version ("NVRM version: NVIDIA UNIX
 * Open Kernel Module for x86_64  580.95.05  Release Build ..."). */
static void driver_version(char *buf, size_t len)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	char line[512], *tok, *save = NULL;

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f))
		for (tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
			char *dot = strchr(tok, '.');

			if (tok[0] >= '0' && tok[0] <= '9' && dot && dot[1] >= '0' && dot[1] <= '9') {
				snprintf(buf, len, "%s", tok);
				break;
			}
		}
	fclose(f);
}

static char *provenance(const struct run *r, const struct store_device *sd)
{
	const struct worker_device_info *di = &r->di;
	char host[64] = "";
	json_t *j;
	char *s;

	gethostname(host, sizeof(host) - 1);
	j = json_pack("{s:{s:s,s:s,s:s,s:i,s:I,s:i,s:i,s:i,s:s,s:s},s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:b,s:s}",
		      "device", "name", di->name, "uuid", di->uuid, "arch", sd->arch,
		      "sms", di->sms, "l2_bytes", (json_int_t)di->l2_bytes,
		      "smem_optin", di->smem_optin, "clock_mhz", di->clock_mhz,
		      "mem_clock_mhz", di->mem_clock_mhz, "driver", sd->driver, "cuda", sd->cuda,
		      "ktune_version", KTUNE_VERSION, "nvrtc", jit_nvrtc_version(),
		      "templates_hash", jit_templates_hash(), "strategy", r->sum->strategy,
		      "backend", r->o->worker.backend == WORKER_BACKEND_CPU ? "cpu" : "cuda",
		      "seed", (json_int_t)r->o->seed, "budget", (json_int_t)r->o->budget,
		      "planted", r->o->plant, "host", host);
	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	return s;
}

/* Builds and compiles a single plan outside a batch (the reference). */
static int single_plan(struct run *r, struct cand *c, struct kt_err *err)
{
	if (plans_compile(r, c, 1, err) != 0)
		return -1;
	if (c->compile_failed)
		return kt_err_set(err, KT_ECOMPILE, "%s: a %s program failed to compile:\n%s",
				  r->f->name, c->plan.programs[0].tpl,
				  c->bin[0].log ? c->bin[0].log : "(no log)");
	return 0;
}

static void on_done_row(struct run *r, const struct store_trial_row *row)
{
	keyset_put(&r->done, row->config_key, row->status, row->median_us);
}

static void on_faulty(const char *key, const char *status, void *arg)
{
	keyset_put(arg, key, status, 0);
}

/* The prior of a guided sweep: the family's ok trials on other problems
 * and devices, one group per (shape, device). */
struct prior_build {
	const struct kt_family *f;
	const char *uuid;
	struct strategy_prior_row *rows;
	long n, cap;
	char (*groups)[320];
	int ngroups, gcap;
	int failed;
};

static void on_prior_row(const char *shape_json, const char *uuid, const char *key, double us,
			 void *arg)
{
	struct prior_build *b = arg;
	struct strategy_prior_row row;
	struct kt_err e = { 0 };
	json_t *sj;
	char gname[320];
	int i, g;

	if (b->failed || b->n >= SWEEP_PRIOR_ROWS)
		return;
	memset(&row, 0, sizeof(row));
	if (kt_config_parse(b->f, key, &row.cfg, &e) != 0)
		return;		/* a retired parameter: not this build's space */
	if (!(sj = json_loads(shape_json ? shape_json : "{}", 0, NULL)))
		return;
	for (i = 0; i < b->f->ndims; i++)
		row.shape.v[i] = (long)json_integer_value(json_object_get(sj, b->f->dims[i].name));
	json_decref(sj);
	snprintf(gname, sizeof(gname), "%.200s|%.100s", shape_json, uuid ? uuid : "");
	for (g = 0; g < b->ngroups; g++)
		if (!strcmp(b->groups[g], gname))
			break;
	if (g == b->ngroups) {
		if (b->ngroups == b->gcap) {
			int cap = b->gcap ? b->gcap * 2 : 16;
			void *ng = realloc(b->groups, (size_t)cap * sizeof(*b->groups));

			if (!ng) {
				b->failed = 1;
				return;
			}
			b->groups = ng;
			b->gcap = cap;
		}
		snprintf(b->groups[b->ngroups++], sizeof(b->groups[0]), "%s", gname);
	}
	if (b->n == b->cap) {
		long cap = b->cap ? b->cap * 2 : 256;
		void *nr = realloc(b->rows, (size_t)cap * sizeof(*b->rows));

		if (!nr) {
			b->failed = 1;
			return;
		}
		b->rows = nr;
		b->cap = cap;
	}
	row.us = us;
	row.group = g;
	row.same_device = uuid && b->uuid && !strcmp(uuid, b->uuid);
	b->rows[b->n++] = row;
}

int sweep_run(const struct sweep_opts *o, struct sweep_summary *sum, struct kt_err *err)
{
	struct run r;
	struct space sp;
	struct store_device sd;
	struct store_sweep_spec spec;
	struct strategy_spec ss;
	struct prior_build pb;
	struct strategy_prior prior = { NULL, 0 };
	struct cand *batch = NULL;
	long idx[SWEEP_BATCH], k, i;
	char shape_key[256], options_key[512], *shape_json = NULL, *prov = NULL;
	int strat, nb = 0, rc = -1, ended = 0, v, nv = 0, have_baseline = 0;
	unsigned vmask = 0;
	char vkey[256] = "";

	memset(&r, 0, sizeof(r));
	memset(&sp, 0, sizeof(sp));
	memset(&pb, 0, sizeof(pb));
	memset(sum, 0, sizeof(*sum));
	r.o = o;
	r.sum = sum;
	r.t0 = kt_clock_s();
	r.run_id = kt_unix_s();
	if (!(r.f = kt_family_find(o->family)))
		return kt_err_set(err, KT_ENOTFOUND, "unknown family '%s' (ktune families lists them)",
				  o->family ? o->family : "");
	if (kt_shape_parse(r.f, o->shape, &r.shape, err) != 0)
		return -1;
	if (strategy_check(o->strategy, err) != 0)
		return -1;
	strat = strategy_parse(o->strategy);
	snprintf(sum->strategy, sizeof(sum->strategy), "%s", strategy_name(strat));
	if (o->budget < 0)
		return kt_err_set(err, KT_EINVAL, "budget must be >= 0");
	if (o->tournament_k < 0 || o->rounds < 0 || o->rounds > SWEEP_MAX_ROUNDS ||
	    o->tournament_max < 0 || o->tie_pct < 0 || o->sentinel_every < 0)
		return kt_err_set(err, KT_EINVAL, "tournament: k, max, ties and sentinel interval "
				  "must be >= 0, rounds 0..%d", SWEEP_MAX_ROUNDS);
	if (o->variants && space_variant_mask(r.f, o->variants, &vmask, err) != 0)
		return -1;
	for (i = 0; i < o->nconfigs; i++) {	/* a typo fails before anything starts */
		struct kt_config c;

		if (kt_config_parse(r.f, o->configs[i], &c, err) != 0)
			return -1;
	}
	kt_shape_key(r.f, &r.shape, shape_key, sizeof(shape_key));

	/* The GPU first: without one there is nothing to record. */
	if (worker_start(&o->worker, &r.w, err) != 0)
		goto out;
	if (worker_info(r.w, &r.di) != 0) {
		kt_err_set(err, KT_ECUDA, "the worker gave no device information");
		goto out;
	}
	memset(&r.tgt, 0, sizeof(r.tgt));
	r.tgt.sm = r.di.sm >= 50 ? r.di.sm : 80;	/* the CPU test device compiles for sm_80 */
	r.tgt.arch_a = r.tgt.sm == 90;
	r.tgt.smem_optin = r.di.smem_optin > 0 ? r.di.smem_optin : 48 * 1024;
	r.tgt.max_threads = r.di.max_threads > 0 ? r.di.max_threads : 1024;
	r.tgt.sms = r.di.sms;
	r.tgt.l2_bytes = r.di.l2_bytes;
	kt_target_arch(&r.tgt, r.arch, sizeof(r.arch));
	r.max_mhz = r.di.clock_mhz;

	if (store_open(o->db_path, STORE_RW, &r.st, err) != 0)
		goto out;
	memset(&sd, 0, sizeof(sd));
	snprintf(sd.name, sizeof(sd.name), "%s", r.di.name);
	snprintf(sd.uuid, sizeof(sd.uuid), "%s", r.di.uuid);
	snprintf(sd.arch, sizeof(sd.arch), "sm_%d", r.di.sm);
	sd.sms = r.di.sms;
	sd.l2_bytes = r.di.l2_bytes;
	sd.smem_optin = r.di.smem_optin;
	sd.clock_mhz = r.di.clock_mhz;
	sd.mem_clock_mhz = r.di.mem_clock_mhz;
	if (o->worker.backend == WORKER_BACKEND_CPU)
		snprintf(sd.driver, sizeof(sd.driver), "none (cpu test device)");
	else
		driver_version(sd.driver, sizeof(sd.driver));
	snprintf(sd.cuda, sizeof(sd.cuda), "%d.%d", r.di.driver_version / 1000,
		 (r.di.driver_version % 1000) / 10);
	snprintf(sd.nvrtc, sizeof(sd.nvrtc), "%s", jit_nvrtc_version());
	if (store_device_upsert(r.st, &sd, err) != 0)
		goto out;
	r.device_id = sd.id;
	snprintf(sum->device, sizeof(sum->device), "%s", r.di.name);
	snprintf(sum->arch, sizeof(sum->arch), "%s", r.arch);
	snprintf(sum->template_hash, sizeof(sum->template_hash), "%s", jit_templates_hash());

	if (!(shape_json = famjson_shape_text(r.f, &r.shape)))
		goto oom;
	if (store_problem_intern(r.st, r.f->name, shape_key, shape_json, &r.problem_id, err) != 0)
		goto out;

	if (space_build(r.f, &r.shape, &r.tgt, o->plant, &sp, err) != 0)
		goto out;
	if (vmask) {
		/* a canonical list (the family's order) for the sweep's identity */
		for (v = 0, nv = 0; v < r.f->nvariants; v++)
			if (vmask & (1u << v))
				nv += snprintf(vkey + nv, sizeof(vkey) - (size_t)nv, "%s%s",
					       nv ? "+" : ",variants=", r.f->variants[v]);
		space_keep_variants(r.f, &sp, vmask);
	}
	if (o->nconfigs > 0) {
		char ident[64];

		if (space_keep_configs(r.f, &r.shape, &r.tgt, &sp, o->configs, o->nconfigs, ident,
				       sizeof(ident), err) != 0)
			goto out;
		nv += snprintf(vkey + nv, sizeof(vkey) - (size_t)nv, ",configs=%s", ident);
	}
	sum->space = sp.n;
	sum->pruned = sp.pruned;
	if (sp.n == 0) {
		kt_err_set(err, KT_EINVAL, "no config of %s%s fits %s on %s (%ld looked at, all "
			   "rejected by its constraints)", r.f->name, vkey, shape_key, r.arch,
			   sp.visited);
		goto out;
	}

	/* What changes the plan is the sweep's identity: the same command on
	 * the same device and problem resumes; new templates start afresh. */
	snprintf(options_key, sizeof(options_key),
		 "strategy=%s%s,budget=%ld,seed=%llu,plant=%d,arch=%s,space=%ld,templates=%s%s",
		 strategy_name(strat), strat == STRATEGY_RANDOM ? "/by-variant" : "", o->budget,
		 (unsigned long long)o->seed, o->plant ? 1 : 0, r.arch, sp.n, jit_templates_hash(),
		 vkey);
	if (!(prov = provenance(&r, &sd)))
		goto oom;
	/* The transfer prior comes before the sweep exists, so that only
	 * other sweeps' trials are in it. */
	if (strat == STRATEGY_GUIDED) {
		pb.f = r.f;
		pb.uuid = r.di.uuid;
		if (store_family_trials(r.st, r.f->name, r.device_id, r.problem_id, SWEEP_PRIOR_ROWS,
					on_prior_row, &pb, err) != 0)
			goto out;
		if (pb.failed)
			goto oom;
		prior.rows = pb.rows;
		prior.n = pb.n;
	}
	memset(&ss, 0, sizeof(ss));
	ss.kind = strat;
	ss.budget = o->budget;
	ss.seed = o->seed;
	ss.noise = o->noise;
	ss.prior = &prior;
	if (strategy_new(&ss, r.f, &r.shape, &sp, &r.strat, err) != 0)
		goto out;
	sum->planned = strategy_planned(r.strat);
	r.total = sum->planned;
	memset(&spec, 0, sizeof(spec));
	spec.device_id = sd.id;
	spec.problem_id = r.problem_id;
	spec.strategy = strategy_name(strat);
	spec.options_key = options_key;
	spec.provenance_json = prov;
	spec.planned = sum->planned;
	if (store_sweep_begin(r.st, &spec, &r.sweep_id, &sum->resumed, err) != 0)
		goto out;
	sum->sweep_id = r.sweep_id;
	{
		struct store_trial_row *rows = NULL;
		int n = 0, j;

		if (store_trials_list(r.st, r.sweep_id, 0, &rows, &n, err) != 0)
			goto end;
		for (j = 0; j < n; j++) {
			on_done_row(&r, &rows[j]);
			store_trial_row_release(&rows[j]);
		}
		free(rows);
		if (r.done.n < n)
			goto oom_end;
	}
	if (!o->retry_faulty &&
	    store_faulty_configs(r.st, r.device_id, r.problem_id, r.sweep_id, on_faulty, &r.faulty,
				 err) != 0)
		goto end;

	/* The reference output, computed once per problem on the GPU. */
	if (r.f->ref_plan(r.f, &r.shape, &r.tgt, &r.ref.plan, err) != 0 ||
	    single_plan(&r, &r.ref, err) != 0)
		goto end;
	{
		const void *ptrs[KT_MAX_PROGRAMS];
		size_t lens[KT_MAX_PROGRAMS];

		if (worker_problem(r.w, r.f, &r.shape, o->seed, &r.ref.plan, bins_ptrs(&r.ref, ptrs, lens),
				   lens, err) != 0)
			goto end;
	}
	if (o->baseline) {
		struct worker_result br;
		int b = worker_baseline(r.w, "cublas_dense", &br, err);

		if (b < 0)
			goto end;
		if (b == 1 && br.status == WORKER_OK) {
			have_baseline = 1;
			sum->cublas_us = br.median_us;
			cond_note(&r, &br.cond);
			if (store_baseline_add(r.st, sd.id, r.problem_id, r.sweep_id, "cublas_dense",
					       br.median_us, err) != 0)
				goto end;
		}
	}
	sum->floor_us = kt_floor_us(r.f, &r.shape, r.di.name);
	if (sentinel_setup(&r, have_baseline, err) != 0)
		goto end;

	if (!(batch = calloc(SWEEP_BATCH, sizeof(*batch))))
		goto oom_end;
	r.sent_since = o->sentinel_every;	/* the sentinel before the first candidate */
	while (!sum->interrupted && !sum->time_limited &&
	       (k = strategy_next(r.strat, idx, SWEEP_BATCH)) > 0) {
		nb = 0;
		for (i = 0; i < k; i++) {
			const struct kt_config *cfg = &sp.cfg[idx[i]];
			char key[512];
			struct kentry *e;

			kt_config_key(r.f, cfg, key, sizeof(key));
			if ((e = keyset_find(&r.done, key))) {
				/* recorded by an earlier run: told, not run again */
				strategy_report(r.strat, idx[i], !strcmp(e->status, "ok") ? e->us : -1);
				sum->skipped++;
				r.done_n++;
				continue;
			}
			if ((e = keyset_find(&r.faulty, key))) {
				strategy_report(r.strat, idx[i], -1);
				sum->skipped_faulty++;
				r.done_n++;
				fprintf(stderr, "ktune: skipping %s: it was %s in an earlier sweep "
					"(--retry-faulty runs it)\n", key, e->status);
				continue;
			}
			cand_plan(&r, &batch[nb++], cfg, idx[i]);
		}
		if (nb == 0)
			continue;
		progress(&r, "compile", r.done_n, r.total, 1);
		if (eval_batch(&r, batch, nb, err) != 0)
			goto end;
		while (nb > 0)
			cand_release(&batch[--nb]);
	}
	if (!sum->interrupted && !sum->time_limited && strat != STRATEGY_EXHAUSTIVE &&
	    eval_default(&r, &sp, batch, err) != 0)
		goto end;
	if (!sum->interrupted && !sum->time_limited)
		snprintf(sum->stop, sizeof(sum->stop), "%s", strategy_stop_reason(r.strat));
	if (!sum->time_limited && !sum->interrupted)
		sum->planned = sum->skipped + sum->skipped_faulty + sum->evaluated;
	if (o->cancel && o->cancel(o->arg))
		sum->interrupted = 1;
	/* The drift over the sweep: the sentinel once more at its end. */
	if (!sum->interrupted && r.evaluated > 0 && r.sent_kind && sentinel_time(&r, err) != 0)
		goto end;
	if (!sum->interrupted && o->tournament_k > 0 && tournament(&r, err) != 0)
		goto end;
	if (!sum->interrupted && finish_winner(&r, err) != 0)
		goto end;
	sum->restarts += worker_restarts(r.w);
	progress(&r, "done", r.done_n, r.total, 1);
	/* A sweep stopped by its time limit stays resumable, like an
	 * interrupted one. */
	if (store_sweep_end(r.st, r.sweep_id,
			    sum->interrupted || sum->time_limited ? STORE_SWEEP_INTERRUPTED :
			    STORE_SWEEP_DONE, err) != 0)
		goto out;
	ended = 1;
	rc = 0;
	goto out;
oom_end:
	kt_err_set(err, KT_EINTERNAL, "out of memory");
end:
	/* Stopped by an error outside the candidates: keep the trials, mark
	 * the sweep so the same command resumes it. */
	if (!ended && r.sweep_id)
		store_sweep_end(r.st, r.sweep_id, STORE_SWEEP_INTERRUPTED, &(struct kt_err){ 0 });
	goto out;
oom:
	kt_err_set(err, KT_EINTERNAL, "out of memory");
out:
	if (batch) {
		while (nb > 0)
			cand_release(&batch[--nb]);
		free(batch);
	}
	cand_release(&r.ref);
	cand_release(&r.sent);
	keyset_release(&r.done);
	keyset_release(&r.faulty);
	keyset_release(&r.ok_now);
	strategy_free(r.strat);
	free(pb.rows);
	free(pb.groups);
	space_release(&sp);
	free(shape_json);
	free(prov);
	sum->wall_s = kt_clock_s() - r.t0;
	worker_stop(r.w);
	store_close(r.st);
	return rc;
}
