/*
 * worker.h -- GPU work in an isolated child process, one per device.
 *
 * The parent (a sweep, the server's job runner) owns the database and the
 * plan; the child owns the CUDA context. The child is this same binary run
 * as `ktune __worker` (exec'ed, never a bare fork), and talks to the parent
 * over two pipes with length-prefixed messages. The driver is reached with
 * dlopen("libcuda.so.1") + cuGetProcAddress in the child only, so neither
 * the parent nor CI ever needs a driver.
 *
 * When the child dies (a kernel fault poisons its context, a signal) or does
 * not answer within the candidate's timeout, worker_eval() kills it, reports
 * WORKER_FAULT or WORKER_TIMEOUT for that candidate, starts a new child and
 * loads the current problem again before returning, so the caller simply
 * goes on with the next candidate.
 *
 * The "cpu" backend runs the same protocol without a GPU: it executes the
 * hidden `selftest` family on the CPU (including a real SIGSEGV and a real
 * endless loop), which is how the tests prove the crash and hang handling.
 * It is a test device: its device info names no GPU and its times are host
 * wall times of a loop, meaningless as kernel timings.
 *
 * The child is started with PR_SET_PDEATHSIG, which Linux ties to the
 * *thread* that forked it: call worker_start() and worker_eval() (which may
 * restart the child) from a thread that outlives the worker.
 * A struct worker is not thread-safe; use one per thread (one per device).
 */
#ifndef KT_WORKER_H
#define KT_WORKER_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/family.h"
#include "../util/err.h"

enum worker_backend {
	WORKER_BACKEND_CUDA = 0,
	WORKER_BACKEND_CPU = 1,		/* selftest family only, for tests */
};

/* Where the child compares a candidate's outputs with the reference. */
enum worker_compare {
	WORKER_COMPARE_AUTO = 0,	/* on the GPU (templates/compare.cu), else on the host */
	WORKER_COMPARE_GPU,		/* on the GPU; a problem fails when it cannot */
	WORKER_COMPARE_HOST,		/* every output downloaded and compared on the host */
};
const char *worker_compare_name(enum worker_compare c);	/* "auto", "gpu", "host" */
/* "auto", "gpu" or "host"; 0, or -1 for another word. */
int worker_compare_parse(const char *text, enum worker_compare *out);

struct worker_opts {
	const char *exe;	/* path of the ktune binary to exec as the child */
	enum worker_backend backend;
	int device;		/* CUDA ordinal */
	double timeout_s;	/* per candidate, verification + timing; 0: 30 s */
	/* timing policy */
	int warmup;		/* launches before timing; 0: 3 */
	int min_reps, max_reps;	/* 0: 10 and 200 */
	double budget_ms;	/* timed wall budget per candidate; 0: 400 */
	double stable_pct;	/* stop when the median moved less than this
				 * between checks; 0: 0.5 */
	int flush_l2;		/* 1 (default via worker_opts_default) */
	/* experiment switches, defaults from the environment (util/knobs.h) */
	int pdl;		/* 0: plans' pdl launches go out plainly, without
				 * programmatic dependent launch (A/B timings);
				 * default $KTUNE_PDL, else 1 */
	enum worker_compare compare;	/* default $KTUNE_HOST_COMPARE: 1 host,
					 * 0 gpu, else auto */
};
void worker_opts_default(struct worker_opts *o);

/* Provenance of the device the child opened. */
struct worker_device_info {
	char name[128];
	char uuid[64];		/* "GPU-xxxxxxxx-..." */
	int sm;			/* 90 */
	int sms;
	long l2_bytes;
	int smem_optin;
	int max_threads;
	int clock_mhz, mem_clock_mhz;
	int driver_version;	/* cuDriverGetVersion: 13000 */
	char nvrtc[16];		/* "13.0" */
};

enum worker_status {
	WORKER_OK = 0,
	WORKER_WRONG,		/* ran, did not match the reference */
	WORKER_LAUNCH_ERROR,	/* load or launch refused (resources, bad image) */
	WORKER_FAULT,		/* the child died or its context was poisoned */
	WORKER_TIMEOUT,		/* no answer within the timeout; child killed */
};
const char *worker_status_name(enum worker_status s);	/* "ok", "wrong", ... */

/* What the GPU was doing just before the first timed repetition and just
 * after the last (NVML, tuner/nvml.h); a field is 0 when not read (no NVML,
 * the CPU test device without a fake NVML). */
struct worker_conditions {
	int sm_mhz_before, sm_mhz_after;
	int mem_mhz_before, mem_mhz_after;
	double power_w_before, power_w_after;
	int temp_c_before, temp_c_after;
};

/* How close one output buffer must come to the reference
 * (measure_tolerance, tuner/measure.h; docs/measuring.md derives the
 * numbers):
 *  - globally, ||got - ref|| / ||ref|| <= l2;
 *  - locally, every element |got - ref| <= local * rms(ref) + rtol * |ref|,
 *    so that a few wrong elements cannot hide in a pooled norm. */
struct worker_tol {
	double l2, local, rtol;
	long k;			/* the reduction length the bound allows for */
};

/* The verdict on one output buffer. */
struct worker_outerr {
	char name[24];
	double rel_l2;		/* ||got - ref|| / ||ref|| over its finite elements */
	double max_err;		/* largest |got - ref|, in units of rms(ref) */
	double l2_tol, local_tol;	/* the bounds it was held to */
	long over;		/* elements over the local bound */
	long nonfinite;		/* NaN/Inf elements (poison left) */
};

struct worker_result {
	enum worker_status status;
	double rel_err;		/* largest relative L2 error over the outputs; -1 unknown */
	int nonfinite;		/* elements that were NaN/Inf (poison left), all outputs */
	double median_us, min_us, p90_us, spread;	/* spread = (p90-min)/median */
	int reps;
	char message[256];	/* why, when not ok */
	/* verification, per output buffer (nout of them; 0 when not checked) */
	int nout;
	struct worker_outerr out[KT_MAX_BUFS];
	long guard_changed;	/* bytes changed in the guard regions around outputs */
	struct worker_conditions cond;	/* around the timed repetitions */
};

struct worker;

/* Starts the child and opens the device; KT_ENOGPU with a plain message when
 * there is no driver or no device. */
int worker_start(const struct worker_opts *o, struct worker **out, struct kt_err *err);
void worker_stop(struct worker *w);	/* NULL ok; kills and reaps the child */
int worker_info(struct worker *w, struct worker_device_info *out);
/* Times the child was restarted after a fault or timeout. */
int worker_restarts(struct worker *w);
/* Process id of the current child (0 when none); for tests and logs. */
int worker_pid(struct worker *w);

/* Makes (family, shape) the current problem: allocates the problem buffers,
 * fills the inputs from seed on the host (family->fill or kt_fill_bf16) and
 * runs the family's GPU reference (ref_plan, compiled by the caller: cubins
 * in plan-program order) to produce the expected outputs. */
int worker_problem(struct worker *w, const struct kt_family *f, const struct kt_shape *s,
		   uint64_t seed, const struct kt_plan *ref_plan,
		   const void *const *ref_cubins, const size_t *ref_lens,
		   struct kt_err *err);

/* Evaluates one candidate on the current problem: loads its cubins (one per
 * plan program), allocates its scratch buffers, runs the prep launches,
 * poisons the outputs, runs the timed launches once and verifies every
 * output buffer against measure_tolerance() (no non-finite value, nothing
 * written into the guard regions around the outputs), and only then times
 * it, reading the GPU's conditions before and after (res->cond). A write
 * into a guard region during the timed runs makes it wrong too. Returns 0
 * with res->status set for every candidate outcome (fault and timeout
 * included); -1 only when the worker itself cannot go on (err set). */
int worker_eval(struct worker *w, const struct kt_config *c, const struct kt_plan *p,
		const void *const *cubins, const size_t *lens, double timeout_s,
		struct worker_result *res, struct kt_err *err);

/* Times the vendor baseline for the current problem: name "cublas_dense"
 * is cuBLAS bf16 GEMM y = x W^T at (tokens, in, out) of a linear family,
 * loaded with dlopen in the child. Returns 1 timed, 0 not applicable or
 * cuBLAS missing (message in res), -1 worker failure. */
int worker_baseline(struct worker *w, const char *name, struct worker_result *res,
		    struct kt_err *err);

/* The child's entry point: `ktune __worker ARGS` calls this from main(). */
int worker_child_main(int argc, char **argv);

#endif
