/*
 * ktune.h -- libktune, the launch runtime for ktune's tuned kernels.
 *
 * Open a tuned table once (the JSON of `ktune export --format json`, the
 * table compiled into an export bundle, or a ktune database through
 * libktune_db, <ktune_db.h>), then call a family with your device pointers,
 * the real shape and a stream. Each call
 *   1. picks a config by ktune's lookup chain (`ktune best`): the shape tuned
 *      on this GPU model -> the nearest tuned shape (within a factor of 8 per
 *      dim, config valid for your shape) -> the same on other GPUs of the
 *      architecture (sm_90 and sm_90a are one) -> the family's default;
 *   2. plans the launches for YOUR shape with the planners the tuner uses;
 *   3. gets the binary: a cubin shipped with the table, else one compiled
 *      with NVRTC (dlopen'd, only then) and cached on disk, loaded once per
 *      CUDA context;
 *   4. builds the TMA descriptors (below), sets the dynamic shared memory
 *      opt-in (> 48 KiB), and launches on your stream (PDL where planned).
 *
 * Plain C11 / C++17, no CUDA headers needed. Every call returns a status
 * (KTUNE_OK = 0) and, on failure, leaves a message for the calling thread in
 * ktune_last_error(); nothing aborts, exits or prints. All sizes are int64.
 *
 * Data. Every tensor is bf16 (attention's cu_seqlens int32), contiguous,
 * row-major, in the canonical layouts: x (tokens, in), y (tokens, out);
 * dense W (out, in); lowrank V (rank, in), U (out, rank); monarch
 * w1 (blocks, rank, in/blocks), w2 (blocks, out/blocks, rank); blast
 * U (blocks, out/blocks, rank), V (blocks, rank, in/blocks), S (blocks,
 * blocks, rank); attention q, k, v, o (tokens, heads, head_dim) packed by
 * sequence, cu_seqlens (batch + 1) int32 ON THE DEVICE (cu_seqlens[0] = 0,
 * cu_seqlens[batch] = tokens), rope table (tokens, head_dim) bf16 with
 * (cos, sin) of pair i of a token's position in its sequence at 2i, 2i+1.
 * Pointers 16-byte aligned (TMA needs it; torch's allocations are).
 *
 * TMA descriptors are built by the runtime at each call over your pointers
 * (cuTensorMapEncodeTiled, host only): element type bf16 (fp32 for fp32
 * scratch), L2 promotion 128B, out-of-bounds fill NONE (zeros), no
 * interleave, swizzle and box per plan, row strides = the tensors' row
 * lengths above in bytes. Nothing of this is the caller's to do.
 *
 * Streams: ktune_stream is a CUstream / cudaStream_t (both convert to it);
 * NULL is the legacy default stream. The call uses the stream's own context
 * (for NULL the current one, or, on a thread where none is current, device
 * 0's primary context, as the CUDA runtime would), so the caller's device is
 * respected on a multi-GPU host; modules are loaded per context; no context
 * other than a device's primary one is ever created.
 *
 * Workspaces come from the caller: ..._workspace_size() for the same
 * arguments says how many bytes (0: none; pass NULL) for the config the
 * lookup picks on the stream's device. Only buffers a plan's launches use
 * are counted. Pass at least that many, 256-byte aligned. The runtime never
 * allocates device memory.
 *
 * CUDA graphs: once a (family, shape) has run once on a context ("warm"),
 * a call neither synchronizes, allocates nor compiles, and may be captured.
 * A call that would have to compile or load while its stream is capturing
 * fails with KTUNE_ERROR_CAPTURE instead: run it once before capturing.
 * A call only enqueues work: it returns before the kernels finish and
 * reports launch errors only; check your stream for faults as usual.
 *
 * Threads: a table may be used from any number of threads at once.
 */
#ifndef KTUNE_H
#define KTUNE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a declaration below changes; ktune_api_version() says what
 * the library was built with (bindings check it at load time). */
#define KTUNE_API_VERSION 1

typedef struct ktune_table ktune_table;	/* opaque */
typedef void *ktune_stream;		/* CUstream, cudaStream_t */

typedef enum ktune_status {
	KTUNE_OK = 0,
	KTUNE_ERROR_INVALID = 1,	/* bad argument, shape or option */
	KTUNE_ERROR_NOT_FOUND = 2,	/* table file missing, unknown family */
	KTUNE_ERROR_BAD_TABLE = 3,	/* table unreadable or malformed */
	KTUNE_ERROR_UNSUPPORTED = 4,	/* no config can run this shape here */
	KTUNE_ERROR_NO_GPU = 5,		/* no driver, device or context */
	KTUNE_ERROR_CUDA = 6,		/* a driver call failed */
	KTUNE_ERROR_COMPILE = 7,	/* NVRTC missing or compiling failed */
	KTUNE_ERROR_CAPTURE = 8,	/* not warm and the stream is capturing */
	KTUNE_ERROR_WORKSPACE = 9,	/* workspace or prepared buffer too small */
	KTUNE_ERROR_INTERNAL = 10	/* a bug: please report it */
} ktune_status;

int ktune_api_version(void);
/* "KTUNE_ERROR_CUDA" etc.; never NULL. */
const char *ktune_status_name(int status);
/* The message of the last failing call on this thread ("" after a call
 * that succeeded); valid until this thread's next ktune call. */
const char *ktune_last_error(void);

/* ---- tables ---- */

/* The JSON of `ktune export --format json` (path NULL: $KTUNE_TABLE). */
int ktune_open_json(const char *path, ktune_table **out);
/* The same from memory (len bytes, need not be NUL-terminated). */
int ktune_open_json_text(const char *text, int64_t len, ktune_table **out);
/* No tuned entries: every call gets the family's default config. */
int ktune_open_defaults(ktune_table **out);
/* An export bundle's compiled-in table (with its cubins); the bundle's
 * ktune_tuned.h declares it: ktune_open_builtin(&ktune_tuned, &t). */
struct ktune_builtin;
int ktune_open_builtin(const struct ktune_builtin *table, ktune_table **out);
/* Frees the table and unloads its modules; no call may be in flight. */
void ktune_close(ktune_table *t);

/* Options, set before the first call (or between calls):
 *   "cache_dir"    where NVRTC's cubins are kept (default $KTUNE_CACHE_DIR,
 *                  else $XDG_CACHE_HOME/ktune, else ~/.cache/ktune; "" off)
 *   "nvrtc"        "0": never compile (shipped cubins only), "1" (default)
 *   "max_distance" the nearest-shape limit, a log-distance (default ln 8,
 *                  "inf": none, "0": exact or default only)
 *   "arch"         plan for this target ("sm_90a") where no GPU is: lets
 *                  ktune_choose and ..._workspace_size answer without one
 *   "device"       the tuned device to answer for: a uuid ("GPU-...") or a
 *                  name ("NVIDIA H200"; the first of that name); default:
 *                  the stream's GPU, by its uuid, else its name */
int ktune_set_option(ktune_table *t, const char *name, const char *value);

/* ---- what a call would run ---- */

typedef struct ktune_choice {
	char match[16];		/* "exact", "nearest", "arch" or "default" */
	char family[32];
	char shape[256];	/* the lookup key of the asked shape */
	char tuned_shape[256];	/* the tuned entry's shape ("" for default) */
	char config[256];	/* the config key (`ktune best`'s) */
	char arch[16];		/* the target planned for: "sm_90a" */
	double distance;	/* log-distance to the tuned shape */
	double tuned_us;	/* the entry's measured median (0: default) */
	int64_t workspace_bytes;
	int64_t prepared_bytes;	/* monarch, blast: ..._prepared_size() */
	int32_t nkernels;	/* launches per call */
	int32_t warm;		/* 1: binaries loaded in this context */
	int32_t shipped;	/* 1: every program has a cubin in the table */
} ktune_choice;

/* The choice for a family and a runtime shape key: the family's key
 * ("tokens=1024,in=4096,out=4096" ...), for attention "seqs=B,tokens=T,
 * heads=H,head_dim=D,block=BLK,rope=R" plus optional "lmax=L" (or a tuned
 * key "seqs=B,lmax=L,...": T of ktune's generated lengths). stream: the
 * device asked about (NULL: as for a call, else, without a GPU, the "arch"
 * option).
 * On a GPU this warms the call up (loads, or compiles, its kernels). */
int ktune_choose(ktune_table *t, const char *family, const char *shape, ktune_stream stream,
		 ktune_choice *out);

/* Any family by name: buffers in the family's order (`ktune families`;
 * the typed calls below say it), each a device pointer. For monarch,
 * monarch_bm and blast the prepared buffer comes last. */
int ktune_run(ktune_table *t, const char *family, const char *shape, void *const *buffers,
	      int32_t nbuffers, void *workspace, int64_t workspace_bytes, ktune_stream stream);
int ktune_workspace_size(ktune_table *t, const char *family, const char *shape,
			 ktune_stream stream, int64_t *bytes);

/* ---- dense: y = x W^T ---- */
int ktune_dense_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
			       ktune_stream stream, int64_t *bytes);
int ktune_dense(ktune_table *t, const void *x, const void *w, void *y, int64_t tokens,
		int64_t in, int64_t out, void *workspace, int64_t workspace_bytes,
		ktune_stream stream);

/* ---- lowrank: y = (x V^T) U^T ---- */
int ktune_lowrank_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				 int64_t rank, ktune_stream stream, int64_t *bytes);
int ktune_lowrank(ktune_table *t, const void *x, const void *v, const void *u, void *y,
		  int64_t tokens, int64_t in, int64_t out, int64_t rank, void *workspace,
		  int64_t workspace_bytes, ktune_stream stream);

/*
 * ---- structured layers with prepared weights (monarch, blast) ----
 *
 * Some configs read a re-laid-out copy of a weight (monarch's w1 with its
 * rows grouped by row mod blocks; blast's S rank-major in 16 x 16 tiles, or
 * as fp32). ..._prepare() writes EVERY such form any config of the family
 * may use into one caller-owned "prepared" buffer (..._prepared_size()
 * bytes), from the canonical weights, once per weight update. Since a layer
 * sees many token counts and the lookup may pick a different config at
 * each, the forward call takes the canonical weights AND the prepared
 * buffer, and every config finds its form there: no config can run against
 * a layout prepared for another. A prepared buffer belongs to its weights
 * and (in, out, blocks, rank); prepare again after changing the weights.
 * monarch and monarch_bm share one prepared form. Dense and lowrank need
 * none.
 */
int ktune_monarch_prepared_size(ktune_table *t, int64_t in, int64_t out, int64_t blocks,
				int64_t rank, int64_t *bytes);
int ktune_monarch_prepare(ktune_table *t, const void *w1, const void *w2, void *prepared,
			  int64_t prepared_bytes, int64_t in, int64_t out, int64_t blocks,
			  int64_t rank, ktune_stream stream);
int ktune_monarch_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				 int64_t blocks, int64_t rank, ktune_stream stream,
				 int64_t *bytes);
/* y (tokens, out) with Monarch's interleaved output columns. */
int ktune_monarch(ktune_table *t, const void *x, const void *w1, const void *w2,
		  const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		  int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		  int64_t workspace_bytes, ktune_stream stream);
/* The same layer leaving y block-major (column i*(out/blocks) + s). */
int ktune_monarch_bm_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
				    int64_t blocks, int64_t rank, ktune_stream stream,
				    int64_t *bytes);
int ktune_monarch_bm(ktune_table *t, const void *x, const void *w1, const void *w2,
		     const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		     int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		     int64_t workspace_bytes, ktune_stream stream);

int ktune_blast_prepared_size(ktune_table *t, int64_t in, int64_t out, int64_t blocks,
			      int64_t rank, int64_t *bytes);
int ktune_blast_prepare(ktune_table *t, const void *u, const void *v, const void *s,
			void *prepared, int64_t prepared_bytes, int64_t in, int64_t out,
			int64_t blocks, int64_t rank, ktune_stream stream);
int ktune_blast_workspace_size(ktune_table *t, int64_t tokens, int64_t in, int64_t out,
			       int64_t blocks, int64_t rank, ktune_stream stream, int64_t *bytes);
int ktune_blast(ktune_table *t, const void *x, const void *u, const void *v, const void *s,
		const void *prepared, int64_t prepared_bytes, void *y, int64_t tokens,
		int64_t in, int64_t out, int64_t blocks, int64_t rank, void *workspace,
		int64_t workspace_bytes, ktune_stream stream);

/*
 * ---- jagged block-diagonal attention ----
 *
 * batch sequences packed along tokens; each cut into blocks of `block`
 * tokens (the last one of a sequence may be shorter); a token attends to
 * the keys of its own block, same head, non-causal, scale 1/sqrt(head_dim).
 * head_dim 64 or 128, block 32, 64, 128 or 256. rope 0: none; 1: q, k are raw and
 * rotated by rope_table on load; 2: v too (rope_table NULL for 0). The
 * lengths stay on the device: the launch is sized from tokens and batch
 * (at most tokens/block + batch blocks), so cu_seqlens[batch] must equal
 * tokens. max_seqlen: the longest sequence if known (it picks the tuned
 * entry; 0: estimated from tokens / batch). The backward returns the
 * gradients of the raw q, k (and v with rope 2); it recomputes P, so it
 * needs no output or LSE of the forward (at block 256 it recomputes the
 * row statistics into its workspace, 8 bytes per token and head more).
 */
int ktune_blockattn_workspace_size(ktune_table *t, int32_t backward, int64_t batch,
				   int64_t tokens, int64_t heads, int64_t head_dim,
				   int64_t block, int32_t rope, int64_t max_seqlen,
				   ktune_stream stream, int64_t *bytes);
int ktune_blockattn_fwd(ktune_table *t, const void *q, const void *k, const void *v, void *o,
			const int32_t *cu_seqlens, const void *rope_table, int64_t batch,
			int64_t tokens, int64_t heads, int64_t head_dim, int64_t block,
			int32_t rope, int64_t max_seqlen, void *workspace,
			int64_t workspace_bytes, ktune_stream stream);
int ktune_blockattn_bwd(ktune_table *t, const void *q, const void *k, const void *v,
			const void *dout, void *dq, void *dk, void *dv,
			const int32_t *cu_seqlens, const void *rope_table, int64_t batch,
			int64_t tokens, int64_t heads, int64_t head_dim, int64_t block,
			int32_t rope, int64_t max_seqlen, void *workspace,
			int64_t workspace_bytes, ktune_stream stream);

#ifdef __cplusplus
}
#endif

#endif
