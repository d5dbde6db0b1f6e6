/*
 * worker_int.h -- private to tuner/worker*.c and tuner/cuda.c: the wire
 * protocol between the worker parent and its child, and the CUDA backend
 * the child drives (the CPU test device is in worker_child.c; what both
 * measure with is tuner/measure.h).
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
#include "measure.h"
#include "worker.h"

#define WK_MAGIC 0x6b74776bu		/* "kwtk" */
#define WK_MAX_PAYLOAD (1024ull << 20)	/* cubins are a few MiB; this is a sanity cap */
#define WK_FD_CMD 3
#define WK_FD_REPLY 4

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
	struct measure_timing timing;
	uint64_t lens[KT_MAX_PROGRAMS];
};

struct wk_baseline {
	char name[KT_NAME_MAX];
	struct measure_timing timing;
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

/* ---- the CUDA backend (tuner/cuda.c) ---- */
struct cu_dev;
/* Opens device ordinal: driver by dlopen, primary context, stream, events,
 * L2 flush buffer. KT_ENOGPU when there is no driver or no such device.
 * pdl and compare: struct worker_opts's. */
int cu_dev_open(int ordinal, int pdl, enum worker_compare compare, struct cu_dev **out,
		struct worker_device_info *info, struct kt_err *err);
void cu_dev_close(struct cu_dev *d);
/* After a fatal (sticky) error: frees what cu_dev holds in host memory and
 * makes no driver call -- the poisoned context goes with the process. */
void cu_dev_abandon(struct cu_dev *d);
/* These return 0 (with res filled for eval/baseline) or -1 with err; *fatal
 * is set when the context is poisoned and the child must exit. baseline
 * returns 1 when timed, 0 when not applicable. */
int cu_dev_problem(struct cu_dev *d, const struct kt_family *f, const struct kt_shape *s,
		   uint64_t seed, const struct kt_plan *ref, const void *const *cubins,
		   const size_t *lens, int *fatal, struct kt_err *err);
int cu_dev_eval(struct cu_dev *d, const struct kt_config *c, const struct kt_plan *p,
		const void *const *cubins, const size_t *lens, const struct measure_timing *t,
		struct worker_result *res, int *fatal, struct kt_err *err);
int cu_dev_baseline(struct cu_dev *d, const char *name, const struct measure_timing *t,
		    struct worker_result *res, int *fatal, struct kt_err *err);

#endif
