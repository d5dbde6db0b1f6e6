/*
 * rt.h -- libktune's internals, shared by its files and its tests.
 *
 *   rt_shape   a call's problem: the family, the shape the lookup asks
 *              for, and (attention) the real token count;
 *   rt_call    what one call runs, planned for its shape on a device: the
 *              config the chain picked, the family's plan, and where each
 *              buffer of the plan lives (the caller's pointers, the
 *              workspace, the prepared buffer); per context it also holds
 *              the loaded kernels. Immutable once published.
 *
 * Planning (rt_call_plan) needs no driver, so the CPU tests check it
 * against the plan emulator. Errors are a ktune_status plus the thread's
 * message (rt_fail).
 */
#ifndef KT_RT_H
#define KT_RT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../include/ktune.h"
#include "../kernels/family.h"
#include "callcache.h"
#include "chain.h"
#include "cu_api.h"

#define RT_ALIGN 256		/* workspace and prepared regions */
#define RT_KEY_MAX 320

/* Sets the thread's message; returns status. */
int rt_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The status for a kt_err from kernels/ or the chain, with its message. */
int rt_fail_err(const struct kt_err *e);
void rt_ok(void);

struct rt_shape {
	const struct kt_family *fam;
	struct kt_shape shape;	/* what the lookup asks for */
	long tokens;		/* attention: T; 0 for the other families */
	int attn_bwd;		/* attention: 1 for the backward */
	int prepare;		/* 1: the family's prepare plan (tokens ignored) */
	char key[RT_KEY_MAX];	/* family + runtime key: the call cache's key */
};

/* "tokens=1024,in=4096,out=4096"; attention "seqs=B,tokens=T,heads=H,
 * head_dim=D,block=BLK,rope=R[,lmax=L]" (lmax 0 or absent: estimated), or
 * a tuned problem's key without tokens (seqs and lmax: T of its generated
 * lengths). */
int rt_shape_parse(const char *family, const char *text, struct rt_shape *out);
int rt_shape_attn(int bwd, int64_t batch, int64_t tokens, int64_t heads, int64_t head_dim,
		  int64_t block, int64_t rope, int64_t lmax, struct rt_shape *out);
/* A linear family's shape from its dims in schema order. */
int rt_shape_dims(const char *family, const int64_t *dims, int n, struct rt_shape *out);

enum rt_bind_kind { RT_NONE = 0, RT_USER, RT_WS, RT_PREP };

struct rt_bind {
	enum rt_bind_kind kind;
	int user;		/* RT_USER: index among the caller's buffers */
	size_t offset, bytes;	/* RT_WS, RT_PREP */
};

struct rt_call {
	struct rt_shape shape;
	struct chain_answer ans;
	struct kt_plan plan;
	struct kt_target target;
	char arch[16];		/* the plan's compile target, "sm_90a" */
	int nbufs;
	struct kt_buf bufs[KT_MAX_BUFS];
	struct rt_bind bind[KT_MAX_BUFS];
	int nuser;		/* the caller's buffers (inputs and outputs) */
	size_t ws_bytes, prep_bytes;
	/* launches in prep-then-timed order; run[i] 1 for what a call runs
	 * (the timed ones and the prep launches that read no prepared
	 * buffer, e.g. attention's block list) */
	int run[2 * KT_MAX_LAUNCHES];
	ktune_choice choice;
	/* set once loaded in a context */
	CUfunction fn[2 * KT_MAX_LAUNCHES];
};

/* The lookup table and options (table.c). */
struct rt_bin {
	char *program;		/* identity (rt_program_id) */
	char prefix[32];
	const unsigned char *data;
	size_t len;
	unsigned char *owned;	/* data, when the table owns it */
};

struct rt_ctx;

struct ktune_table {
	pthread_mutex_t lock;	/* options, contexts and their maps */
	pthread_mutex_t build;	/* planning, compiling and loading, one at a time */
	int ndevices;
	struct chain_device *devices;
	char (*uuids)[64];	/* the devices' uuids, "" when unknown */
	int nentries;
	struct chain_entry *entries;
	int nbins;
	struct rt_bin *bins;
	int skipped;		/* entries of unknown families or bad keys */
	/* options */
	char cache_dir[1024];
	int nvrtc;
	int pdl;
	double max_distance;
	char arch[16];
	char device[128];	/* option "device": a uuid or a name */
	/* the driver, loaded on first use */
	int api_state;		/* 0 not tried, 1 loaded, -1 failed (api_why) */
	char api_why[600];
	struct cu_api api;
	/* device 0's primary context, retained on first need (see ctx_enter in
	 * launch.c) and released by ktune_close; NULL until then */
	CUcontext dev0;
	struct rt_ctx *ctxs;
	unsigned generation;	/* bumped by options that change answers */
	/* callers inside (launch.c's enter_call and leave_call) and the calls
	 * the caches retired, freed once no caller can hold them */
	struct rt_reclaim reclaim;
};

int rt_table_new(struct ktune_table **out);
/* Frees what rt_table_new and the loaders built (entries, devices,
 * binaries); a table that never launched needs nothing else. ktune_close
 * (launch.c) releases the contexts and modules first, then calls it. */
void rt_table_free(struct ktune_table *t);
/* Appends a device / an entry (libktune_db); an entry of an unknown family
 * or key is counted in skipped, not an error. */
int rt_table_add_device(struct ktune_table *t, const char *name, const char *uuid,
			const char *arch, long sms, long long l2, long smem);
int rt_table_add_entry(struct ktune_table *t, int device, const char *family, const char *shape,
		       const char *config, double median_us);
/* The shipped binary of a program for arch, or NULL. */
const struct rt_bin *rt_bin_find(const struct ktune_table *t, const struct kt_program *p,
				 const char *arch);
/* "gemm sm_90a BLOCK_M=256 ..." */
void rt_program_id(const struct kt_program *p, const char *arch, char *buf, size_t len);

/* Plans s on device dev (its name, arch and resources; uuid: the GPU's, or
 * NULL): the chain's answer, the family's plan for the real shape, and
 * every buffer's place (plan.c). No driver. The table's device is the one
 * of option "device" (uuid or name), else of the GPU's uuid, else of its
 * name: the first in table order. */
int rt_call_plan(const struct ktune_table *t, const struct rt_shape *s,
		 const struct chain_device *dev, const char *uuid, struct rt_call *c);
/* The plans libktune runs for a tuned entry (config c at its shape s; for
 * attention its generated lengths' tokens with the bound) and, for
 * families with prepared weights, the prepare plan (else prep->nprograms
 * is 0): the programs an export bundle compiles ahead of time. */
int rt_entry_plans(const struct kt_family *f, const struct kt_shape *s,
		   const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *plan,
		   struct kt_plan *prep, struct kt_err *err);
/* The prepared buffer of family f at shape s (tokens ignored): its bytes
 * and, when bufs is not NULL, the prepare plan and where each prepared
 * buffer lies (offs[i] for bufs[i].prepared). */
int rt_prepared_layout(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *tgt, struct kt_plan *plan,
		       struct kt_buf bufs[KT_MAX_BUFS], int *nbufs, size_t offs[KT_MAX_BUFS],
		       size_t *total);

/* Runs plan p (its prep, then its timed launches) over ptrs, one per
 * buffer, on the stream's device: its programs compiled and loaded like a
 * call's (launch.c). For references in tests and benchmarks. */
int rt_run_plan(struct ktune_table *t, const struct kt_family *f, const struct kt_plan *p,
		const struct kt_buf *bufs, int nbufs, const CUdeviceptr *ptrs, ktune_stream stream);
/* The call of s on the stream's device, planned and loaded (a warm-up),
 * copied to *out. */
int rt_choose(struct ktune_table *t, const struct rt_shape *s, ktune_stream stream,
	      struct rt_call *out);

#endif
