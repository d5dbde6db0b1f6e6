/*
 * sweep.c -- the orchestration of one sweep (see sweep.h for the contract).
 *
 * Candidates go through in batches: the batch's programs are looked up in
 * the store's binary cache, the misses compiled by the NVRTC pool (one
 * thread per core), then each candidate is verified and timed in the worker
 * child and its trial committed before the next one starts. Compiling a
 * batch ahead keeps the pool busy without holding thousands of CUBINs.
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
#include "jit.h"
#include "space.h"
#include "strategy.h"
#include "../util/clock.h"

#define SWEEP_BATCH 32

void sweep_opts_default(struct sweep_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->strategy = "exhaustive";
	o->seed = 1;
	o->retime = 1;
	o->baseline = 1;
	o->timeout_s = 10;
	worker_opts_default(&o->worker);
}

double sweep_floor_us(double flops, double bytes)
{
	double c = flops / 790e12, m = bytes / 4.3e12;

	return (c > m ? c : m) * 1e6;
}

/* One candidate of a batch, with the programs it needs. */
struct cand {
	struct kt_config cfg;
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
	int64_t sweep_id;
	struct sweep_summary *sum;
	double t0, last_progress;
	long done;		/* recorded, resumed included */
	long total;
	double best_us;
	char best_key[512];
	double eval_s;		/* wall time spent evaluating this run */
	long evaluated;
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

static void progress(struct run *r, const char *phase, int force)
{
	struct sweep_progress p;
	double t = kt_clock_s();
	long left = r->total - r->done;

	if (!r->o->progress || (!force && t - r->last_progress < 0.1))
		return;
	r->last_progress = t;
	memset(&p, 0, sizeof(p));
	p.sweep_id = r->sweep_id;
	p.phase = phase;
	p.done = r->done;
	p.total = r->total;
	p.ok = r->sum->n_ok;
	p.best_us = r->best_us;
	p.best_config = r->best_key;
	p.eta_s = r->evaluated > 0 ? r->eval_s / r->evaluated * left : -1;
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

static char *params_json(const struct kt_family *f, const struct kt_config *c)
{
	json_t *j = json_object();
	char *s;
	int i;

	if (!j)
		return NULL;
	json_object_set_new(j, "variant", json_string(f->variants[c->variant]));
	for (i = 0; i < f->nparams; i++)
		if (f->params[i].variants & (1u << c->variant))
			json_object_set_new(j, f->params[i].name, json_integer(c->p[i]));
	s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
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

static int record(struct run *r, struct cand *c, const char *status,
		  const struct worker_result *wr, const char *message, struct kt_err *err)
{
	struct store_trial t;
	char *pj = params_json(r->f, &c->cfg);
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
		}
	}
	t.compile_ms = c->compile_ms;
	t.binary_key = c->plan.nprograms ? c->bin[0].key : NULL;
	t.message = message && *message ? message : NULL;
	t.log = log;
	if (store_trial_add(r->st, &t, err) != 0)
		goto out;
	count_status(r->sum, status);
	r->done++;
	if (wr && wr->status == WORKER_OK && (r->best_us == 0 || wr->median_us < r->best_us)) {
		r->best_us = wr->median_us;
		snprintf(r->best_key, sizeof(r->best_key), "%s", c->key);
	}
	rc = 0;
out:
	free(pj);
	free(log);
	return rc;
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

		if (r->o->cancel && r->o->cancel(r->o->arg)) {
			r->sum->interrupted = 1;
			return 0;
		}
		if (r->o->time_limit_s > 0 && kt_clock_s() - r->t0 > r->o->time_limit_s) {
			r->sum->time_limited = 1;
			return 0;
		}
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
		t0 = kt_clock_s();
		if (worker_eval(r->w, &c[i].cfg, &c[i].plan, bins_ptrs(&c[i], ptrs, lens), lens,
				cand_timeout(r), &wr, err) != 0)
			return -1;
		r->eval_s += kt_clock_s() - t0;
		r->evaluated++;
		r->sum->evaluated++;
		if (record(r, &c[i], worker_status_name(wr.status), &wr, wr.message, err) != 0)
			return -1;
		progress(r, "evaluate", 0);
	}
	return 0;
}

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

static char *provenance(const struct run *r, const struct worker_device_info *di,
			const struct store_device *sd)
{
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
		      "templates_hash", jit_templates_hash(), "strategy", r->o->strategy,
		      "backend", r->o->worker.backend == WORKER_BACKEND_CPU ? "cpu" : "cuda",
		      "seed", (json_int_t)r->o->seed, "budget", (json_int_t)r->o->budget,
		      "planted", r->o->plant, "host", host);
	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	return s;
}

/* Builds and compiles a single plan outside a batch (reference, retime). */
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

static int retime_winner(struct run *r, struct kt_err *err)
{
	struct store_trial_row *rows = NULL;
	struct cand c;
	struct worker_result wr;
	const void *ptrs[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
	int n = 0, rc = -1, i;

	memset(&c, 0, sizeof(c));
	if (store_trials_list(r->st, r->sweep_id, 1, &rows, &n, err) != 0)
		return -1;
	if (n == 0 || strcmp(rows[0].status, "ok") != 0) {
		rc = 0;
		goto out;
	}
	r->sum->best_us = rows[0].median_us;
	r->sum->best_min_us = rows[0].min_us;
	r->sum->best_p90_us = rows[0].p90_us;
	r->sum->best_rel_err = rows[0].rel_err;
	snprintf(r->sum->best_config, sizeof(r->sum->best_config), "%s", rows[0].config_key);
	snprintf(r->sum->best_params, sizeof(r->sum->best_params), "%s",
		 rows[0].params_json ? rows[0].params_json : "{}");
	if (kt_config_parse(r->f, rows[0].config_key, &c.cfg, err) != 0)
		goto out;
	snprintf(c.key, sizeof(c.key), "%s", rows[0].config_key);
	if (r->f->plan(&r->shape, &c.cfg, &r->tgt, &c.plan, err) != 0)
		goto out;
	for (i = 0; i < c.plan.nprograms; i++) {
		size_t used = strlen(r->sum->best_templates);

		if (!strstr(r->sum->best_templates, c.plan.programs[i].tpl))
			snprintf(r->sum->best_templates + used, sizeof(r->sum->best_templates) - used,
				 "%s%s.cu", used ? "," : "", c.plan.programs[i].tpl);
	}
	if (!r->o->retime) {
		rc = 0;
		goto out;
	}
	if (single_plan(r, &c, err) != 0)
		goto out;
	progress(r, "retime", 1);
	if (worker_eval(r->w, &c.cfg, &c.plan, bins_ptrs(&c, ptrs, lens), lens, cand_timeout(r) + 5,
			&wr, err) != 0)
		goto out;
	if (wr.status != WORKER_OK) {
		/* A winner that fails when run again is a bug worth shouting
		 * about, but the recorded trials stand. */
		fprintf(stderr, "ktune: warning: the winner %s was %s when timed again: %s\n",
			c.key, worker_status_name(wr.status), wr.message);
		rc = 0;
		goto out;
	}
	r->sum->retime_us = wr.median_us;
	if (store_retime_set(r->st, r->sweep_id, c.key, wr.median_us, err) != 0)
		goto out;
	rc = 0;
out:
	cand_release(&c);
	for (i = 0; i < n; i++)
		store_trial_row_release(&rows[i]);
	free(rows);
	return rc;
}

struct done_set {
	char **keys;
	long n, cap;
};

static void done_add(const char *key, void *arg)
{
	struct done_set *d = arg;

	if (d->n == d->cap) {
		long cap = d->cap ? d->cap * 2 : 64;
		char **nk = realloc(d->keys, cap * sizeof(*nk));

		if (!nk)
			return;
		d->keys = nk;
		d->cap = cap;
	}
	if ((d->keys[d->n] = strdup(key)))
		d->n++;
}

static int done_has(const struct done_set *d, const char *key)
{
	long i;

	for (i = 0; i < d->n; i++)
		if (strcmp(d->keys[i], key) == 0)
			return 1;
	return 0;
}

int sweep_run(const struct sweep_opts *o, struct sweep_summary *sum, struct kt_err *err)
{
	struct run r;
	struct space sp;
	struct worker_device_info di;
	struct store_device sd;
	struct store_sweep_spec spec;
	struct done_set done = { 0 };
	struct cand *batch = NULL, ref;
	long *order = NULL, norder = 0, i;
	char shape_key[256], options_key[512], *shape_json = NULL, *prov = NULL;
	int64_t problem_id;
	int strat, nb = 0, rc = -1, ended = 0, v, nv = 0;
	unsigned vmask = 0;
	char vkey[256] = "";
	json_t *sj = NULL;

	memset(&r, 0, sizeof(r));
	memset(&sp, 0, sizeof(sp));
	memset(&ref, 0, sizeof(ref));
	memset(sum, 0, sizeof(*sum));
	r.o = o;
	r.sum = sum;
	r.t0 = kt_clock_s();
	if (!(r.f = kt_family_find(o->family)))
		return kt_err_set(err, KT_ENOTFOUND, "unknown family '%s' (ktune families lists them)",
				  o->family ? o->family : "");
	if (kt_shape_parse(r.f, o->shape, &r.shape, err) != 0)
		return -1;
	if ((strat = strategy_parse(o->strategy)) < 0)
		return kt_err_set(err, KT_EINVAL, "unknown strategy '%s' (exhaustive, random)",
				  o->strategy);
	if (o->budget < 0)
		return kt_err_set(err, KT_EINVAL, "budget must be >= 0");
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
	if (worker_info(r.w, &di) != 0) {
		kt_err_set(err, KT_ECUDA, "the worker gave no device information");
		goto out;
	}
	memset(&r.tgt, 0, sizeof(r.tgt));
	r.tgt.sm = di.sm >= 50 ? di.sm : 80;	/* the CPU test device compiles for sm_80 */
	r.tgt.arch_a = r.tgt.sm == 90;
	r.tgt.smem_optin = di.smem_optin > 0 ? di.smem_optin : 48 * 1024;
	r.tgt.max_threads = di.max_threads > 0 ? di.max_threads : 1024;
	r.tgt.sms = di.sms;
	r.tgt.l2_bytes = di.l2_bytes;
	kt_target_arch(&r.tgt, r.arch, sizeof(r.arch));

	if (store_open(o->db_path, STORE_RW, &r.st, err) != 0)
		goto out;
	memset(&sd, 0, sizeof(sd));
	snprintf(sd.name, sizeof(sd.name), "%s", di.name);
	snprintf(sd.uuid, sizeof(sd.uuid), "%s", di.uuid);
	snprintf(sd.arch, sizeof(sd.arch), "sm_%d", di.sm);
	sd.sms = di.sms;
	sd.l2_bytes = di.l2_bytes;
	sd.smem_optin = di.smem_optin;
	sd.clock_mhz = di.clock_mhz;
	sd.mem_clock_mhz = di.mem_clock_mhz;
	if (o->worker.backend == WORKER_BACKEND_CPU)
		snprintf(sd.driver, sizeof(sd.driver), "none (cpu test device)");
	else
		driver_version(sd.driver, sizeof(sd.driver));
	snprintf(sd.cuda, sizeof(sd.cuda), "%d.%d", di.driver_version / 1000,
		 (di.driver_version % 1000) / 10);
	snprintf(sd.nvrtc, sizeof(sd.nvrtc), "%s", jit_nvrtc_version());
	if (store_device_upsert(r.st, &sd, err) != 0)
		goto out;
	snprintf(sum->device, sizeof(sum->device), "%s", di.name);
	snprintf(sum->arch, sizeof(sum->arch), "%s", r.arch);
	snprintf(sum->template_hash, sizeof(sum->template_hash), "%s", jit_templates_hash());

	if (!(sj = json_object()))
		goto oom;
	for (i = 0; i < r.f->ndims; i++)
		json_object_set_new(sj, r.f->dims[i].name, json_integer(r.shape.v[i]));
	if (!(shape_json = json_dumps(sj, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		goto oom;
	if (store_problem_intern(r.st, r.f->name, shape_key, shape_json, &problem_id, err) != 0)
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
	if (strategy_plan(strat, r.f, &sp, o->budget, o->seed, &order, &norder, err) != 0)
		goto out;
	sum->planned = norder;
	r.total = norder;

	/* What changes the plan is the sweep's identity: the same command on
	 * the same device and problem resumes; new templates start afresh. */
	snprintf(options_key, sizeof(options_key),
		 "strategy=%s%s,budget=%ld,seed=%llu,plant=%d,arch=%s,space=%ld,templates=%s%s",
		 strategy_name(strat), strat == STRATEGY_RANDOM ? "/by-variant" : "", o->budget, (unsigned long long)o->seed, o->plant ? 1 : 0,
		 r.arch, sp.n, jit_templates_hash(), vkey);
	if (!(prov = provenance(&r, &di, &sd)))
		goto oom;
	memset(&spec, 0, sizeof(spec));
	spec.device_id = sd.id;
	spec.problem_id = problem_id;
	spec.strategy = strategy_name(strat);
	spec.options_key = options_key;
	spec.provenance_json = prov;
	spec.planned = norder;
	if (store_sweep_begin(r.st, &spec, &r.sweep_id, &sum->resumed, err) != 0)
		goto out;
	sum->sweep_id = r.sweep_id;
	if (store_trials_done(r.st, r.sweep_id, done_add, &done, err) != 0)
		goto end;

	/* The reference output, computed once per problem on the GPU. */
	if (r.f->ref_plan(&r.shape, &r.tgt, &ref.plan, err) != 0 || single_plan(&r, &ref, err) != 0)
		goto end;
	{
		const void *ptrs[KT_MAX_PROGRAMS];
		size_t lens[KT_MAX_PROGRAMS];

		if (worker_problem(r.w, r.f, &r.shape, o->seed, &ref.plan, bins_ptrs(&ref, ptrs, lens),
				   lens, err) != 0)
			goto end;
	}
	if (o->baseline) {
		struct worker_result br;
		int b = worker_baseline(r.w, "cublas_dense", &br, err);

		if (b < 0)
			goto end;
		if (b == 1 && br.status == WORKER_OK) {
			sum->cublas_us = br.median_us;
			if (store_baseline_add(r.st, sd.id, problem_id, r.sweep_id, "cublas_dense",
					       br.median_us, err) != 0)
				goto end;
		}
	}
	sum->floor_us = sweep_floor_us(r.f->flops(&r.shape), r.f->min_bytes(&r.shape));

	if (!(batch = calloc(SWEEP_BATCH, sizeof(*batch))))
		goto oom_end;
	for (i = 0; i < norder && !sum->interrupted && !sum->time_limited; i++) {
		struct cand *c = &batch[nb];

		memset(c, 0, sizeof(*c));
		c->cfg = sp.cfg[order[i]];
		kt_config_key(r.f, &c->cfg, c->key, sizeof(c->key));
		if (done_has(&done, c->key)) {
			sum->skipped++;
			r.done++;
			continue;
		}
		{
			struct kt_err pe = { 0 };

			/* A plan the family cannot build is that candidate's
			 * failure, recorded, not the sweep's. */
			if (r.f->plan(&r.shape, &c->cfg, &r.tgt, &c->plan, &pe) != 0) {
				c->plan_failed = 1;
				snprintf(c->message, sizeof(c->message), "plan: %s", pe.msg);
			}
		}
		if (++nb == SWEEP_BATCH || i == norder - 1) {
			progress(&r, "compile", 1);
			if (eval_batch(&r, batch, nb, err) != 0)
				goto end;
			while (nb > 0)
				cand_release(&batch[--nb]);
		}
	}
	if (nb > 0 && !sum->interrupted && !sum->time_limited && eval_batch(&r, batch, nb, err) != 0)
		goto end;
	if (o->cancel && o->cancel(o->arg))
		sum->interrupted = 1;
	if (!sum->interrupted && retime_winner(&r, err) != 0)
		goto end;
	sum->restarts = worker_restarts(r.w);
	progress(&r, "done", 1);
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
	cand_release(&ref);
	for (i = 0; i < done.n; i++)
		free(done.keys[i]);
	free(done.keys);
	free(order);
	space_release(&sp);
	json_decref(sj);
	free(shape_json);
	free(prov);
	sum->wall_s = kt_clock_s() - r.t0;
	worker_stop(r.w);
	store_close(r.st);
	return rc;
}
