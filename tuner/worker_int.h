/*
 * worker_int.h -- private to tuner/worker*.c and tuner/cuda.c: the wire
 * protocol between the worker parent and its child, and what the child's
 * two backends (the CPU test device, CUDA) share.
 *
 * Wire format: a struct wk_hdr (magic, type, payload length) followed by the
 * payload. Both ends are the same binary, so fixed-layout structs travel as
 * bytes; every receiver still checks lengths and indices before use.
 * The child reads commands on fd WK_FD_CMD and writes replies on WK_FD_REPLY.
 */
#ifndef KT_WORKER_INT_H
#define KT_WORKER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../kernels/family.h"
#include "../util/err.h"
#include "worker.h"

#define WK_MAGIC 0x6b74776bu		/* "kwtk" */
#define WK_MAX_PAYLOAD (1024ull << 20)	/* cubins are a few MiB; this is a sanity cap */
#define WK_FD_CMD 3
#define WK_FD_REPLY 4
#define WK_MAX_REPS 100000		/* hard cap on timed repetitions */

enum wk_msg_type {
	WK_MSG_HELLO = 1,	/* child -> parent, once: struct wk_hello */
	WK_MSG_PROBLEM,		/* struct wk_problem + cubins */
	WK_MSG_EVAL,		/* struct wk_eval + cubins */
	WK_MSG_BASELINE,	/* struct wk_baseline */
	WK_MSG_QUIT,		/* no payload; the child exits */
	WK_MSG_REPLY,		/* child -> parent: struct wk_reply */
};

struct wk_hdr {
	uint32_t magic;
	uint32_t type;
	uint64_t len;		/* payload bytes after the header */
};

struct wk_timing {
	int32_t warmup, min_reps, max_reps, flush_l2;
	double budget_ms, stable_pct;
};

struct wk_hello {
	int32_t rc;		/* 0: device open; -1: code + msg say why */
	int32_t code;		/* enum kt_errcode */
	char msg[512];
	struct worker_device_info info;
};

/* Cubins follow the fixed part, lens[i] bytes each, in plan-program order.
 * kt_program.tpl pointers travel as garbage and are never read. */
struct wk_problem {
	char family[KT_NAME_MAX];
	struct kt_shape shape;
	uint64_t seed;
	struct kt_plan plan;
	uint64_t lens[KT_MAX_PROGRAMS];
};

struct wk_eval {
	struct kt_config cfg;
	struct kt_plan plan;
	struct wk_timing timing;
	uint64_t lens[KT_MAX_PROGRAMS];
};

struct wk_baseline {
	char name[KT_NAME_MAX];
	struct wk_timing timing;
};

struct wk_reply {
	int32_t rc;		/* the worker_* function's return value */
	int32_t code;		/* enum kt_errcode when rc == -1 */
	int32_t fatal;		/* 1: the child exits after this reply */
	char msg[512];		/* rc == -1: why */
	struct worker_result res;
};

/* ---- wire I/O (tuner/worker.c) ---- */
/* Writes one message; deadline < 0 waits forever. 0, or -1 (errno set;
 * ETIMEDOUT past the deadline). */
int wk_send(int fd, uint32_t type, const struct iovec *iov, int niov, double deadline);
/* Reads one message into *payload (malloc'ed, caller frees; NULL when the
 * payload is empty). 0 ok; -1 with errno: 0 on EOF, ETIMEDOUT past the
 * deadline, EPROTO on a bad header or a length over max. */
int wk_recv(int fd, uint32_t *type, void **payload, size_t *len, size_t max,
	    double deadline);

/* ---- shared by the child's backends (tuner/worker_child.c) ---- */
/* Checks every index in a plan against its limits: programs, launches,
 * args, buffers (nbufs), kernel names NUL-terminated, the cooperative and
 * pdl flags (0 or 1; pdl only from a program compiled with KT_PDL=1), and
 * every tensor map (wk_tmap_check, without the buffer). 0, or -1 with why. */
int wk_plan_check(const struct kt_plan *p, int nbufs, char *why, size_t whylen);
/* The same, with the plan's buffers known (bufs[0..nbufs)): tensor maps are
 * also checked against their buffer's element size and extent. */
int wk_plan_check_bufs(const struct kt_plan *p, int nbufs, const struct kt_buf *bufs, char *why,
		       size_t whylen);
/* What cuTensorMapEncodeTiled and TMA need, checked before the driver sees
 * it: rank 2..3, dims 1..2^32, strides[0] == 1, box 1..256, swizzle 0, 32,
 * 64 or 128; with the buffer b (NULL: skipped) also strides in bytes a
 * multiple of 16 (< 2^40), box[0] bytes a multiple of 16 and within the
 * swizzle span, and every addressed element inside b. 0, or -1 with why. */
int wk_tmap_check(const struct kt_tmap *t, const struct kt_buf *b, char *why, size_t whylen);
/* "bf16 x[2 dims 64x1024, strides 1,64; box 64x32; swizzle 128]" for
 * messages; b may be NULL. */
void wk_tmap_describe(const struct kt_tmap *t, const struct kt_buf *b, char *buf, size_t len);
/* Input buffer i of a problem: host bytes generated from the problem seed
 * (family->fill, else kt_fill_bf16 / kt_fill_value with b->scale). */
int wk_fill_input(const struct kt_family *f, const struct kt_shape *s, int i,
		  const struct kt_buf *b, void *host, uint64_t seed, struct kt_err *err);
/* Host bytes of an output buffer (dtype t) to float. */
void wk_to_float(enum kt_dtype t, const void *src, float *dst, size_t n);

/* One output buffer compared with its reference: the sums of the squared
 * difference and squared reference over the finite elements of got, the
 * largest |got - ref|, how many elements were over the local bound
 * |got - ref| > atol + rtol * |ref|, and how many were not finite. */
struct wk_cmp {
	double sq_diff, sq_ref, max_abs;
	long over, nonfinite;
};
/* Adds got[0..n) against ref to c (c zeroed by the caller first). */
void wk_compare(const float *got, const float *ref, size_t n, double atol, double rtol,
		struct wk_cmp *c);
/* The absolute part of the local bound of output b: t->local * rms, rms the
 * reference's root mean square (from comparing the reference with itself). */
double wk_atol(const struct worker_tol *t, double ref_rms);
/* The verdict on a compared candidate, from one wk_cmp per output buffer
 * (bufs[i] and cmp[i] for the nb buffers; only KT_BUF_OUTPUT ones count)
 * with their tolerances: fills res->out, rel_err, nonfinite and, when any
 * output is over a bound, left non-finite values or guard bytes changed
 * (res->guard_changed), WORKER_WRONG with a message naming the output.
 * Returns 1 when wrong. Both backends judge through it. */
int wk_judge(struct worker_result *res, const struct kt_buf *bufs, int nb,
	     const struct wk_cmp *cmp, const struct worker_tol *tol);

/* Guard regions: every output buffer sits between two regions of
 * WK_GUARD_BYTES filled with the byte WK_GUARD_BYTE; a candidate that
 * changes one wrote past (or before) its output. 1 MiB covers an overshoot
 * of a few tiles; a write farther out lands in another allocation or
 * faults. */
#define WK_GUARD_BYTES (1u << 20)
#define WK_GUARD_BYTE 0xa5u
/* Bytes of the n-byte region at p that differ from the guard byte. */
long wk_guard_count(const void *p, size_t n);

/* One timed batch: runs n repetitions and writes each one's time in
 * microseconds to out_us. 0 ok, -1 with res/err filled by the callee
 * (*fatal set when the device is lost). */
typedef int (*wk_batch_fn)(void *arg, int n, double *out_us, int *fatal,
			   struct worker_result *res, struct kt_err *err);
/* The timing policy shared by both backends: batches until the median is
 * stable (and reps >= min_reps), or max_reps, or the budget is spent.
 * est_us: one repetition's time seen so far (0 unknown), sizes the batches.
 * Fills median/min/p90/spread/reps. 0, or -1 as the batch returned. */
int wk_time(const struct wk_timing *t, double est_us, wk_batch_fn fn, void *arg,
	    int *fatal, struct worker_result *res, struct kt_err *err);

/* wk_time between two NVML readings (nv may be NULL: none), which land in
 * res->cond: the conditions a candidate was timed under. */
struct nvml;
int wk_time_read(struct nvml *nv, const struct wk_timing *t, double est_us, wk_batch_fn fn,
		 void *arg, int *fatal, struct worker_result *res, struct kt_err *err);

/* ---- the CUDA backend (tuner/cuda.c) ---- */
struct cu_dev;
/* Opens device ordinal: driver by dlopen, primary context, stream, events,
 * L2 flush buffer. KT_ENOGPU when there is no driver or no such device. */
int cu_dev_open(int ordinal, struct cu_dev **out, struct worker_device_info *info,
		struct kt_err *err);
void cu_dev_close(struct cu_dev *d);
/* These return 0 (with res filled for eval/baseline) or -1 with err; *fatal
 * is set when the context is poisoned and the child must exit. baseline
 * returns 1 when timed, 0 when not applicable. */
int cu_dev_problem(struct cu_dev *d, const struct kt_family *f, const struct kt_shape *s,
		   uint64_t seed, const struct kt_plan *ref, const void *const *cubins,
		   const size_t *lens, int *fatal, struct kt_err *err);
int cu_dev_eval(struct cu_dev *d, const struct kt_config *c, const struct kt_plan *p,
		const void *const *cubins, const size_t *lens, const struct wk_timing *t,
		struct worker_result *res, int *fatal, struct kt_err *err);
int cu_dev_baseline(struct cu_dev *d, const char *name, const struct wk_timing *t,
		    struct worker_result *res, int *fatal, struct kt_err *err);

#endif
