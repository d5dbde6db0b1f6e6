/*
 * sweep.h -- one sweep: a family at one shape on one GPU, from the space to
 * verified, timed trials in the store, and a winner that can be trusted.
 *
 * The orchestration: space (valid configs) -> strategy (proposes, is told
 * each outcome) -> jit (NVRTC pool, binary cache in the store) -> worker
 * (isolated child: verify every output, then time, with the GPU's clocks
 * read around it) -> store (each trial committed as it lands). A drift
 * sentinel -- cuBLAS for the linear families, else the family's default
 * config -- is timed again every few candidates, and each trial keeps its
 * median on the sentinel's footing (norm_us). At the end the leading
 * candidates meet in a tournament of interleaved, rotated rounds, each run
 * afresh (load, verify, time); the best tournament median wins, and the
 * winner is timed once more in a new worker process. docs/measuring.md has
 * the details.
 *
 * The same options on the same device and problem resume an unfinished
 * sweep and evaluate nothing twice. Configs that faulted or hung in another
 * sweep of the same device and problem are skipped unless retry_faulty.
 * Nothing but the caller's cancel callback stops a sweep: faults, hangs and
 * compile errors are recorded outcomes.
 */
#ifndef KT_SWEEP_H
#define KT_SWEEP_H

#include <stdint.h>

#include "../util/err.h"
#include "worker.h"

#define SWEEP_MAX_CONTENDERS 64	/* tournament_max at most */
#define SWEEP_MAX_ROUNDS 16	/* rounds at most */

struct sweep_progress {
	int64_t sweep_id;
	const char *phase;	/* "compile", "evaluate", "tournament", "retime", "done" */
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
	const char *strategy;	/* strategy.h's names; NULL or "exhaustive" default */
	long budget;		/* configs to evaluate at most (0: the strategy's own) */
	const char *variants;	/* NULL: all; else comma-separated variant names */
	/* nconfigs > 0: only these configs (config keys, `ktune best`'s
	 * form), e.g. to re-verify and time an exported winner on this GPU */
	const char *const *configs;
	int nconfigs;
	uint64_t seed;		/* strategy and input seed */
	int plant;		/* add the family's planted fault/hang candidates */
	int threads;		/* NVRTC compile threads, 0: one per core */
	int retime;		/* time the winner again in a fresh worker (default 1) */
	int baseline;		/* time cuBLAS beside it (default 1) */
	/* The final tournament: the tournament_k best (0: none; default 8)
	 * plus any within tie_pct percent of the best (default 3), at most
	 * tournament_max (default 24), each timed afresh in `rounds` rotated
	 * rounds (default 5). */
	int tournament_k, tournament_max, rounds;
	double tie_pct;
	/* The drift sentinel is timed again after every sentinel_every
	 * evaluated candidates (default 16; 0: no sentinel). */
	int sentinel_every;
	/* A trial timed with the SM clock under this many MHz is marked
	 * throttled (0: 96% of the highest clock seen on the device). */
	int clock_threshold_mhz;
	int retry_faulty;	/* evaluate configs that faulted or hung before */
	double noise;		/* guided: stop when gains fall under it (0: 0.005) */
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
	long planned, skipped;	/* proposed by the strategy, already recorded (resume) */
	long evaluated;		/* trials recorded by this run */
	long skipped_faulty;	/* not run: faulted or hung in an earlier sweep */
	char strategy[16];
	char stop[16];		/* why the strategy stopped: space, budget, converged */
	long n_ok, n_wrong, n_compile_error, n_launch_error, n_fault, n_timeout;
	int restarts;		/* worker restarts after faults and timeouts */
	/* The winner: us is its tournament median when there was one, else
	 * its trial median. */
	double best_us, best_min_us, best_p90_us, best_rel_err;	/* 0 when none */
	double best_trial_us;	/* the winner's median in the sweep itself */
	double retime_us;	/* winner timed again in a fresh worker (0 if not) */
	int verified;		/* 1: this invocation verified the winner */
	/* the tournament: tournament_n contenders, best first */
	int tournament_n, tournament_rounds;
	struct sweep_contender {
		char config[256];
		double median_us;	/* median of its ok rounds; 0 none */
		double trial_us;	/* its median in the sweep */
		int ok_rounds;
		double round_us[SWEEP_MAX_ROUNDS];	/* per round, 0 when not ok */
	} contenders[SWEEP_MAX_CONTENDERS];
	/* drift: conditions of this invocation's trials and measurements */
	int nvml;		/* 1: clocks were read */
	int clock_min_mhz, clock_max_mhz, clock_threshold_mhz;
	long n_throttled;
	double power_max_w;
	int temp_max_c;
	char sentinel[512];	/* "cublas_dense" or a config key; "" none */
	int sentinel_n;		/* times it was timed (all invocations) */
	double sentinel_first_us, sentinel_min_us, sentinel_max_us, sentinel_last_us;
	char best_config[512];
	char best_params[1024];	/* JSON object */
	char best_templates[128];	/* template files of the winner: "gemm.cu" */
	double cublas_us;	/* 0 when not timed */
	double floor_us;	/* roofline floor of the shape on the device (kt_floor_us) */
	char device[128];
	char arch[16];
	char template_hash[33];
	double wall_s;
};

/* Runs (or resumes) a sweep. -1 with err for what stops a sweep before or
 * outside the candidates: bad family/shape/strategy (KT_EINVAL/KT_ENOTFOUND),
 * no GPU (KT_ENOGPU), database errors, a sweep of the same key already
 * running. */
int sweep_run(const struct sweep_opts *o, struct sweep_summary *sum, struct kt_err *err);


#endif
