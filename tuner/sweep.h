/*
 * sweep.h -- one sweep: a family at one shape on one GPU, from the space to
 * verified, timed trials in the store.
 *
 * The orchestration: space (valid configs) -> strategy (ordered plan) ->
 * jit (NVRTC pool, binary cache in the store) -> worker (isolated child:
 * verify, then time) -> store (each trial committed as it lands). The same
 * options on the same device and problem resume an unfinished sweep and
 * evaluate nothing twice. Nothing but the caller's cancel callback stops a
 * sweep: faults, hangs and compile errors are recorded outcomes.
 */
#ifndef KT_SWEEP_H
#define KT_SWEEP_H

#include <stdint.h>

#include "../util/err.h"
#include "worker.h"

struct sweep_progress {
	int64_t sweep_id;
	const char *phase;	/* "compile", "evaluate", "retime", "done" */
	long done, total;	/* candidates recorded (resumed ones included) / planned */
	long ok;
	double best_us;		/* 0 until a candidate verified */
	const char *best_config;/* config key of the best so far, or "" */
	double eta_s;		/* -1 when unknown */
};

struct sweep_opts {
	const char *db_path;
	const char *family;
	const char *shape;	/* "tokens=1024,in=4096,out=4096" */
	const char *strategy;	/* "exhaustive" (default) or "random" */
	long budget;		/* random: configs to evaluate (0: all) */
	const char *variants;	/* NULL: all; else comma-separated variant names */
	/* nconfigs > 0: only these configs (config keys, `ktune best`'s
	 * form), e.g. to re-verify and time an exported winner on this GPU */
	const char *const *configs;
	int nconfigs;
	uint64_t seed;		/* strategy and input seed */
	int plant;		/* add the family's planted fault/hang candidates */
	int threads;		/* NVRTC compile threads, 0: one per core */
	int retime;		/* time the winner again at the end (default 1) */
	int baseline;		/* time cuBLAS beside it (default 1) */
	struct worker_opts worker;	/* exe, backend, device, timing policy */
	double timeout_s;	/* per-candidate ceiling (0: 30 s) */
	/* > 0: no candidate starts after this many seconds of the sweep; the
	 * winner so far is still retimed and the rest is left to a resume
	 * (the sweep ends unfinished, summary.time_limited). */
	double time_limit_s;
	/* Called at most ~10 times a second and at the end; may be NULL. */
	void (*progress)(const struct sweep_progress *p, void *arg);
	/* Polled between candidates; non-zero stops the sweep (interrupted). */
	int (*cancel)(void *arg);
	void *arg;
};
/* Defaults for every field but db_path, family, shape and worker.exe. */
void sweep_opts_default(struct sweep_opts *o);

struct sweep_summary {
	int64_t sweep_id;
	int resumed;
	int interrupted;
	int time_limited;	/* stopped by time_limit_s: the plan is unfinished */
	long space, pruned;	/* valid configs, configs rejected by constraints */
	long planned, skipped;	/* in the plan, already recorded (resume) */
	long evaluated;		/* this run */
	long n_ok, n_wrong, n_compile_error, n_launch_error, n_fault, n_timeout;
	int restarts;		/* worker restarts after faults and timeouts */
	double best_us, best_min_us, best_p90_us, best_rel_err;	/* 0 when none */
	double retime_us;	/* winner timed again (0 if not) */
	char best_config[512];
	char best_params[1024];	/* JSON object */
	char best_templates[128];	/* template files of the winner: "gemm.cu" */
	double cublas_us;	/* 0 when not timed */
	double floor_us;	/* roofline floor of the shape on the H200 figures */
	char device[128];
	char arch[16];
	char template_hash[33];
	double wall_s;
};

/* Runs (or resumes) a sweep. -1 with err for what stops a sweep before or
 * outside the candidates: bad family/shape (KT_EINVAL/KT_ENOTFOUND), no GPU
 * (KT_ENOGPU), database errors, a sweep of the same key already running. */
int sweep_run(const struct sweep_opts *o, struct sweep_summary *sum, struct kt_err *err);

/* Roofline floor in microseconds: max(flops / 790e12, bytes / 4.3e12). */
double sweep_floor_us(double flops, double bytes);

#endif
