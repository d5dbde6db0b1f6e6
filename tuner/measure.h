/*
 * measure.h -- what the worker child measures with, whichever backend runs
 * the candidate (the CPU test device, CUDA): plan checks before anything
 * reaches a driver, the problem's inputs, the comparison of an output with
 * its reference and the verdict over all outputs, and the timing policy.
 * A leaf module: it calls into kernels/ (family data), util/ and NVML
 * (tuner/nvml.h) only, never back into the worker.
 */
#ifndef KT_MEASURE_H
#define KT_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/family.h"
#include "../util/err.h"
#include "worker.h"

#define MEASURE_MAX_REPS 100000		/* hard cap on timed repetitions */

/* The timing policy of one candidate (travels in the worker's eval
 * message, hence the fixed-size fields). */
struct measure_timing {
	int32_t warmup, min_reps, max_reps, flush_l2;
	double budget_ms, stable_pct;
};

/* Checks every index in a plan against its limits: programs, launches,
 * args, buffers (nbufs), kernel names NUL-terminated, the cooperative and
 * pdl flags (0 or 1; pdl only from a program compiled with KT_PDL=1), and
 * every tensor map (measure_tmap_check, without the buffer). 0, or -1 with why. */
int measure_plan_check(const struct kt_plan *p, int nbufs, char *why, size_t whylen);
/* The same, with the plan's buffers known (bufs[0..nbufs)): tensor maps are
 * also checked against their buffer's element size and extent. */
int measure_plan_check_bufs(const struct kt_plan *p, int nbufs, const struct kt_buf *bufs,
			    char *why, size_t whylen);
/* What cuTensorMapEncodeTiled and TMA need, checked before the driver sees
 * it: rank 2..3, dims 1..2^32, strides[0] == 1, box 1..256, swizzle 0, 32,
 * 64 or 128; with the buffer b (NULL: skipped) also strides in bytes a
 * multiple of 16 (< 2^40), box[0] bytes a multiple of 16 and within the
 * swizzle span, and every addressed element inside b. 0, or -1 with why. */
int measure_tmap_check(const struct kt_tmap *t, const struct kt_buf *b, char *why, size_t whylen);
/* "bf16 x[2 dims 64x1024, strides 1,64; box 64x32; swizzle 128]" for
 * messages; b may be NULL. */
void measure_tmap_describe(const struct kt_tmap *t, const struct kt_buf *b, char *buf, size_t len);
/* Input buffer i of a problem: host bytes generated from the problem seed
 * (family->fill, else kt_fill_bf16 / kt_fill_value with b->scale). */
int measure_fill_input(const struct kt_family *f, const struct kt_shape *s, int i,
		       const struct kt_buf *b, void *host, uint64_t seed, struct kt_err *err);
/* Host bytes of an output buffer (dtype t) to float. */
void measure_to_float(enum kt_dtype t, const void *src, float *dst, size_t n);

/* One output buffer compared with its reference: the sums of the squared
 * difference and squared reference over the finite elements of got, the
 * largest |got - ref|, how many elements were over the local bound
 * |got - ref| > atol + rtol * |ref|, and how many were not finite. */
struct measure_cmp {
	double sq_diff, sq_ref, max_abs;
	long over, nonfinite;
};
/* Adds got[0..n) against ref to c (c zeroed by the caller first). */
void measure_compare(const float *got, const float *ref, size_t n, double atol, double rtol,
		     struct measure_cmp *c);
/* The absolute part of the local bound of output b: t->local * rms, rms the
 * reference's root mean square (from comparing the reference with itself). */
double measure_atol(const struct worker_tol *t, double ref_rms);
/* The verdict on a compared candidate, from one measure_cmp per output buffer
 * (bufs[i] and cmp[i] for the nb buffers; only KT_BUF_OUTPUT ones count)
 * with their tolerances: fills res->out, rel_err, nonfinite and, when any
 * output is over a bound, left non-finite values or guard bytes changed
 * (res->guard_changed), WORKER_WRONG with a message naming the output.
 * Returns 1 when wrong. Both backends judge through it. */
int measure_judge(struct worker_result *res, const struct kt_buf *bufs, int nb,
		  const struct measure_cmp *cmp, const struct worker_tol *tol);

/* Guard regions: every output buffer sits between two regions of
 * MEASURE_GUARD_BYTES filled with the byte MEASURE_GUARD_BYTE; a candidate that
 * changes one wrote past (or before) its output. 1 MiB covers an overshoot
 * of a few tiles; a write farther out lands in another allocation or
 * faults. */
#define MEASURE_GUARD_BYTES (1u << 20)
#define MEASURE_GUARD_BYTE 0xa5u
/* Bytes of the n-byte region at p that differ from the guard byte. */
long measure_guard_count(const void *p, size_t n);

/* One timed batch: runs n repetitions and writes each one's time in
 * microseconds to out_us. 0 ok, -1 with res/err filled by the callee
 * (*fatal set when the device is lost). */
typedef int (*measure_batch_fn)(void *arg, int n, double *out_us, int *fatal,
				struct worker_result *res, struct kt_err *err);
/* The timing policy shared by both backends: batches until the median is
 * stable (and reps >= min_reps), or max_reps, or the budget is spent.
 * est_us: one repetition's time seen so far (0 unknown), sizes the batches.
 * Fills median/min/p90/spread/reps. 0, or -1 as the batch returned. */
int measure_time(const struct measure_timing *t, double est_us, measure_batch_fn fn, void *arg,
		 int *fatal, struct worker_result *res, struct kt_err *err);

/* measure_time between two NVML readings (nv may be NULL: none), which land in
 * res->cond: the conditions a candidate was timed under. */
struct nvml;
int measure_time_read(struct nvml *nv, const struct measure_timing *t, double est_us,
		      measure_batch_fn fn, void *arg, int *fatal, struct worker_result *res,
		      struct kt_err *err);

/* The tolerance of output buffer b of family f at shape s: l2 is the
 * family's tol; local allows 2 * sqrt(2 ln n) * l2 (twice the largest of n
 * Gaussian errors at the global bound) plus K * 2^-23 (fp32 accumulation
 * over the reduction length K: the shape's in/rank, head_dim/block); rtol
 * is two units in the last place of b's dtype. */
void measure_tolerance(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_buf *b, struct worker_tol *t);

/* The seed input buffer `buf` of a problem is filled from (passed to
 * family->fill, or to kt_fill_bf16), derived from worker_problem()'s seed,
 * so that a test can rebuild the same inputs on the host. */
uint64_t measure_buffer_seed(uint64_t seed, int buf);

#endif
