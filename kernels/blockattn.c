/*
 * blockattn.c -- the `blockattn_fwd` and `blockattn_bwd` families: jagged
 * block-diagonal attention with optional fused rotary (blockattn.h for the
 * problem and the generator, docs/kernels.md for the math).
 *
 * Buffers, in order (problem buffers; the table only when rope=1 or 2):
 *   fwd: q k v offsets [table] | o
 *   bwd: q k v do offsets [table] | dq dk dv
 * then, for a candidate, one scratch buffer: the block list (int2 start,
 * length per BLK-block), built by an untimed prep launch from the offsets --
 * the same information FA2 varlen receives as its cu_seqlens with every
 * block boundary, also built outside its timing -- and, for the backward's
 * chunked variant, after it the rows' (LSE, Di) fp32 pairs (stats_words).
 *
 * A work item is one (block, head), heads fastest. Variants
 * (docs/families/blockattn.md says how each works and where it wins):
 * `grid` (ITEMS consecutive items per CTA), `persistent` (CTAS_SM CTAs per
 * SM striding over the items) and, forward only, `prefetch` (the grid's
 * order with its one stage refilled in place) are mma.sync m16n8k16
 * (sm_80+; templates/blockattn_fwd.cu, blockattn_bwd.cu), searched over
 * ROWS_W, DSPLIT, STAGES, EPI, the rope table's reads (RPF) and a register
 * cap (MINB). `ws` (sm_90a; templates/blockattn_ws.cu) is
 * warp-specialized on wgmma: a producer warpgroup loads (and with rope
 * rotates) each item, CONS consumer warpgroups run their own items (the
 * forward at BLK 128: share each item, an m64 row half each; at BLK 256:
 * rounds of m64 row tiles, one per consumer, over key chunks streamed
 * through the ring); RING, and with rope RPROD, are its parameters.
 * rope=2 rotates v as well. At block 256 (the forward's grid, persistent
 * and ws) a row of S no longer fits in registers: the keys come in chunks
 * (KCH; ws: ws_kc) with a running softmax, the query rows in QP passes. The backward at block 256 is
 * `chunked` (templates/blockattn_bwd.cu, KCH set): a dQ kernel that
 * recomputes each row's LSE and Di into the scratch, then a dK, dV kernel
 * that reads them, each CTA a pass of BLK / QP rows of one (block, head)
 * with the other side of the block streamed in chunks of KCH rows through
 * a ring of RING slots; or `ws` (sm_90a), the same plan on wgmma
 * (templates/blockattn_ws.cu: passes of 64 CONS rows, an m64 tile a
 * consumer warpgroup, chunks of 64 rows through RING slots) in persistent
 * CTAs that prefetch the next pass while computing this one.
 * The ws backward at BLK 128 and head_dim 128 has one slot (RING 1) that
 * its consumers share, an m64 query half and then an m64 key tile each.
 * NEEDSWORK: rope costs the mma.sync backward a third more time (instructions and
 * latency on the item's path, not bytes: bench/NOTES-attention.md).
 */
#include "blockattn.h"
#include "gemm_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/hash.h"

/* Variant indices. The forward's are {grid, persistent, prefetch, ws}, the
 * backward's {grid, persistent, ws}: prefetch is the forward's only, so
 * V_PREFETCH means nothing in the backward and ws has an index per family
 * (ws_variant). Config keys name variants, so stored keys stay valid. */
enum { V_GRID, V_PERSIST, V_PREFETCH, V_FWD_WS = 3 };
enum { V_BWD_WS = 2, V_BWD_CHUNK = 3 };
/* ws backward at BLK 128: head_dim 64, a consumer's scratch, half 0's P and
 * dS (64 x 128 bf16 each); head_dim 128, one scratch of the item's P and
 * dS (128 x 128 bf16 each) that the consumers share */
enum { WS_SCRATCH = 2 * 64 * 128 * 2, WS_SCRATCH_D128 = 2 * 128 * 128 * 2 };
/* the ws backward at BLK 128, head_dim 128 without rope: q's second
 * buffer (128 x 128 bf16) after the scratch, so that the next item's q
 * lands while this one runs (templates/blockattn_ws.cu's QB1) */
enum { WS_Q2_D128 = 128 * 128 * 2 };
/* sm_90's shared memory an SM, which decides how many of the ws backward's
 * CTAs at block 256 share one (templates/blockattn_ws.cu's DMINB) */
enum { SM90_SMEM_SM = 228 * 1024 };

/* The ws forward at BLK 256: keys per chunk (templates/blockattn_ws.cu's
 * KC, fixed by head_dim: S of a chunk beside O is 96 fp32 a thread). Not
 * a parameter: one more ws parameter would change every stored ws key. */
static long ws_kc(long d)
{
	return d == 64 ? 128 : 64;
}
/* Parameter indices: the same in both families; EPI is the backward's and
 * the forward prefetch variant's; CONS and RING are ws's only. */
enum {
	P_ROWS_W, P_DSPLIT, P_STAGES, P_ITEMS, P_CTAS_SM, P_RPF, P_MINB, P_EPI, P_CONS, P_RING,
	P_RPROD, P_KCH, P_QP, P_KST
};

static int ws_variant(int bwd)
{
	return bwd ? V_BWD_WS : V_FWD_WS;
}

static const struct kt_dim dims[] = {
	{"seqs", 1, 1L << 20, 0, "sequences B (lengths drawn from (seqs, lmax), see blockattn.h)"},
	{"lmax", 1, 1L << 16, 0, "longest sequence; lengths uniform in [max(1, 2*lmax/5), lmax]"},
	{"heads", 1, 64, 0, "heads H"},
	{"head_dim", 64, 128, 1, "d: 64 or 128"},
	{"block", 32, 256, 1, "BLK: 32, 64, 128 or 256 tokens per attention block (ws: 64, 128, "
	 "256; the backward at 256: chunked, or ws on sm_90a)"},
	{"rope", 0, 2, 1, "1: q, k raw plus a (T, d) bf16 cos/sin table, rotated in the kernel; "
	 "2: v rotated too (dv is the gradient of the raw v)"},
};

/* prefetch (forward only): the grid's work order, one stage refilled in
 * place -- the next item's q, k once S is done, its v once O is out. */
static const char *const fwd_variants[] = {"grid", "persistent", "prefetch", "ws"};
/* chunked (backward only, block 256): two kernels over passes of rows,
 * the other side of the block streamed in chunks (below, and
 * docs/families/blockattn.md) */
static const char *const bwd_variants[] = {"grid", "persistent", "ws", "chunked"};

/* Parameter masks: the mma.sync variants of each family, ws's own. */
#define FWD_SYNC ((1u << V_GRID) | (1u << V_PERSIST) | (1u << V_PREFETCH))
#define BWD_SYNC ((1u << V_GRID) | (1u << V_PERSIST))
#define SYNC_RING ((1u << V_GRID) | (1u << V_PERSIST))
#define ORDERED ((1u << V_GRID) | (1u << V_PREFETCH))

#define CONS_HELP "ws: consumer warpgroups (the warp split: one producer warpgroup loads " \
		  "and, with rope, rotates); each runs its own items, or at block 128 (forward; " \
		  "backward at head_dim 128) and 256 shares each item by row tiles"
#define RING_HELP "ws: ring depth (-DSTAGES): items in flight between the producer and " \
		  "the consumers"
#define RPROD_HELP "ws, rope=1: how the producer rotates q, k -- 0: one item at a time, in " \
		   "the slot; 1: item i+1's copies issued before item i is rotated (when its " \
		   "slot is free); 2: one at a time, q, k read into registers, rotated there"
#define RPROD3_HELP RPROD_HELP "; 3: as 0, and dq, dk conjugate-rotated by the producer " \
		    "(stored unrotated by the consumer, rotated in place once it releases the slot)"

static const struct kt_param fwd_params[] = {
	{"ROWS_W", 2, {16, 32}, FWD_SYNC, "query rows per warp (m16 tiles of S and O)"},
	{"DSPLIT", 2, {1, 2}, FWD_SYNC, "warps per row group, each computing 1/DSPLIT of head_dim"},
	{"STAGES", 3, {1, 2, 3}, SYNC_RING, "cp.async ring depth over a CTA's work items"},
	{"ITEMS", 4, {1, 2, 4, 8}, ORDERED,
	 "(block, head) items per CTA, heads of a block first"},
	{"CTAS_SM", 3, {1, 2, 4}, 1u << V_PERSIST, "persistent grid: CTAs per SM, items strided"},
	{"RPF", 3, {0, 1, 2}, FWD_SYNC,
	 "rope=1: table read per chunk (0), batched ahead (1), tile in shared memory (2)"},
	{"MINB", 2, {1, 4}, FWD_SYNC, "CTAs per SM asked of ptxas (a register cap); 1: none"},
	{"EPI", 2, {0, 1}, 1u << V_PREFETCH,
	 "prefetch: 0: O stored from registers, next v at once; 1: O staged in the v tile"},
	{"CONS", 2, {1, 2}, 1u << V_FWD_WS, CONS_HELP},
	{"RING", 3, {2, 3, 4}, 1u << V_FWD_WS, RING_HELP},
	{"RPROD", 3, {0, 1, 2}, 1u << V_FWD_WS, RPROD_HELP},
	/* optional: keys from before them mean the one-pass kernel */
	{"KCH", 4, {0, 32, 64, 128}, SYNC_RING,
	 "block 256: keys per chunk of S, softmax kept as a running max and sum (32: with KST "
	 "only); 0: the whole row at once (blocks 64, 128: only 0)", 1, 0},
	{"QP", 2, {1, 2}, SYNC_RING,
	 "block 256: passes over the query rows, BLK / QP rows a pass (fewer threads, more "
	 "registers each)", 1, 1},
	{"KST", 3, {0, 2, 3}, SYNC_RING,
	 "block 256 with KCH: k, v streamed a chunk at a time through a ring of KST stages over "
	 "all of a CTA's items, q two passes' rows (less shared memory, loads overlap the MMAs; "
	 "STAGES 1, RPF 0); 0: whole k, v tiles", 1, 0},
};

/* The backward holds four tiles per stage plus P and dS: a third stage
 * never fits beside enough CTAs to matter. */
static const struct kt_param bwd_params[] = {
	{"ROWS_W", 2, {16, 32}, BWD_SYNC, "query (then key) rows per warp"},
	{"DSPLIT", 2, {1, 2}, BWD_SYNC, "warps per row group, each computing 1/DSPLIT of head_dim"},
	{"STAGES", 2, {1, 2}, BWD_SYNC, "cp.async ring depth over a CTA's work items"},
	{"ITEMS", 3, {1, 2, 4}, 1u << V_GRID, "(block, head) items per CTA, heads of a block first"},
	{"CTAS_SM", 3, {1, 2, 4}, 1u << V_PERSIST, "persistent grid: CTAs per SM, items strided"},
	{"RPF", 6, {0, 1, 2, 6, 7, 8}, BWD_SYNC,
	 "rope=1: table read per chunk (0), batched ahead (1), tile in shared memory (2); "
	 "read while q, k copy, each thread rotating its own chunks, no barrier of its "
	 "own (6-8: packed bf16x2 6, 8 / fp32 7; the epilogue's pairs read at dq and held "
	 "for dk 6 / read per output as 1 does 7, 8)"},
	{"MINB", 2, {1, 3}, BWD_SYNC, "CTAs per SM asked of ptxas (a register cap); 1: none"},
	{"EPI", 2, {0, 1}, BWD_SYNC, "0: dq, dk, dv stored from registers; 1: staged in shared memory"},
	{"CONS", 2, {1, 2}, 1u << V_BWD_WS, CONS_HELP},
	{"RING", 3, {1, 2, 3}, (1u << V_BWD_WS) | (1u << V_BWD_CHUNK),
	 RING_HELP " (1: at block 128, head_dim 128 only, one slot shared by the consumers; "
	 "at block 256 64-row chunks); chunked: ring depth over the streamed chunks"},
	{"RPROD", 4, {0, 1, 2, 3}, 1u << V_BWD_WS, RPROD3_HELP},
	/* the chunked variant's only, at P_KCH, P_QP as in the forward;
	 * optional, though no key predates them: absent, the default's values */
	{"KCH", 2, {32, 64}, 1u << V_BWD_CHUNK,
	 "chunked: rows per streamed chunk (keys for dQ, queries for dK, dV)", 1, 32},
	{"QP", 2, {2, 4}, 1u << V_BWD_CHUNK,
	 "chunked: passes over a block's rows, one CTA each, BLK / QP rows (16 a warp)", 1, 4},
};

/* The two families' priv: 1 for the backward. */
static const int directions[2] = {0, 1};

static int is_bwd(const struct kt_family *f)
{
	return *(const int *)f->priv;
}

/* ---- the generator ---- */

static uint64_t splitmix64_at(uint64_t i)
{
	/* output i of SplitMix64 seeded 0: the state after i + 1 steps, mixed */
	return kt_mix64((i + 1) * KT_MIX64_STEP);
}

long ba_len_min(long lmax)
{
	long lo = 2 * lmax / 5;

	return lo < 1 ? 1 : lo;
}

long ba_length(long lmax, long i)
{
	long lo = ba_len_min(lmax);

	return lo + (long)(splitmix64_at((uint64_t)i) % (uint64_t)(lmax - lo + 1));
}

void ba_offsets(long seqs, long lmax, int32_t *offsets)
{
	long i, t = 0;

	offsets[0] = 0;
	for (i = 0; i < seqs; i++) {
		t += ba_length(lmax, i);
		offsets[i + 1] = (int32_t)t;
	}
}

long ba_tokens(long seqs, long lmax)
{
	long i, t = 0;

	for (i = 0; i < seqs; i++)
		t += ba_length(lmax, i);
	return t;
}

long ba_blocks(long seqs, long lmax, long blk)
{
	long i, n = 0;

	for (i = 0; i < seqs; i++)
		n += (ba_length(lmax, i) + blk - 1) / blk;
	return n;
}

void ba_rope_table(const int32_t *offsets, long seqs, long d, uint16_t *table)
{
	long s, t, i;

	for (s = 0; s < seqs; s++)
		for (t = offsets[s]; t < offsets[s + 1]; t++) {
			double pos = (double)(t - offsets[s]);

			for (i = 0; i < d / 2; i++) {
				double th = pos * pow(10000.0, -2.0 * (double)i / (double)d);

				table[t * d + 2 * i] = kt_f32_to_bf16((float)cos(th));
				table[t * d + 2 * i + 1] = kt_f32_to_bf16((float)sin(th));
			}
		}
}

/* ---- CPU references (double) ---- */

void ba_rotate(const struct ba_dims *p, const double *table, double *x, int conj)
{
	long t, h, i, d = p->d;

	for (t = 0; t < p->tokens; t++)
		for (h = 0; h < p->heads; h++) {
			double *r = x + (t * p->heads + h) * d;

			for (i = 0; i < d / 2; i++) {
				double c = table[t * d + 2 * i], s = table[t * d + 2 * i + 1];
				double x0 = r[2 * i], x1 = r[2 * i + 1];

				if (conj) {
					r[2 * i] = x0 * c + x1 * s;
					r[2 * i + 1] = x1 * c - x0 * s;
				} else {
					r[2 * i] = x0 * c - x1 * s;
					r[2 * i + 1] = x0 * s + x1 * c;
				}
			}
		}
}

/* Steps through the blocks of p: start with *s = -1; 1 while there is one,
 * with its first token *b0 and its length *n. */
static int block_next(const struct ba_dims *p, long *s, long *b0, long *n)
{
	if (*s >= 0 && *b0 + p->blk < p->offsets[*s + 1]) {
		*b0 += p->blk;
	} else {
		do
			(*s)++;
		while (*s < p->seqs && p->offsets[*s + 1] <= p->offsets[*s]);
		if (*s >= p->seqs)
			return 0;
		*b0 = p->offsets[*s];
	}
	*n = p->offsets[*s + 1] - *b0;
	if (*n > p->blk)
		*n = p->blk;
	return 1;
}

/* P of one (block, head): n x n, rows softmax(q_i . k_j * scale). */
static void block_probs(const struct ba_dims *p, const double *q, const double *k, long b0,
			long n, long h, double *P)
{
	long H = p->heads, d = p->d, i, j, c;
	double scale = 1.0 / sqrt((double)d);

	for (i = 0; i < n; i++) {
		const double *qi = q + ((b0 + i) * H + h) * d;
		double m = -INFINITY, l = 0;

		for (j = 0; j < n; j++) {
			const double *kj = k + ((b0 + j) * H + h) * d;
			double acc = 0;

			for (c = 0; c < d; c++)
				acc += qi[c] * kj[c];
			P[i * n + j] = acc * scale;
			if (P[i * n + j] > m)
				m = P[i * n + j];
		}
		for (j = 0; j < n; j++)
			l += (P[i * n + j] = exp(P[i * n + j] - m));
		for (j = 0; j < n; j++)
			P[i * n + j] /= l;
	}
}

/* A copy of x rotated by the table, or NULL (and 0) when no table. */
static int rotated(const struct ba_dims *p, const double *x, const double *table, double **rx)
{
	size_t n = (size_t)p->tokens * (size_t)p->heads * (size_t)p->d;

	*rx = NULL;
	if (!table)
		return 0;
	if (!(*rx = malloc(n * sizeof(double))))
		return -1;
	memcpy(*rx, x, n * sizeof(double));
	ba_rotate(p, table, *rx, 0);
	return 0;
}

/* With a table: rotated copies of q, k and, with rot_v, v, owned by rot[]
 * (NULL where not rotated; free them with rotated_free) and *q, *k, *v
 * pointed at them. 0, or -1 (out of memory: rot[] all NULL). */
static int rotated_qkv(const struct ba_dims *p, const double **q, const double **k,
		       const double **v, const double *table, int rot_v, double *rot[3])
{
	rot[1] = rot[2] = NULL;
	if (rotated(p, *q, table, &rot[0]) != 0 || rotated(p, *k, table, &rot[1]) != 0 ||
	    rotated(p, *v, rot_v ? table : NULL, &rot[2]) != 0) {
		free(rot[0]);
		free(rot[1]);
		rot[0] = rot[1] = NULL;
		return -1;
	}
	if (rot[0]) {
		*q = rot[0];
		*k = rot[1];
	}
	if (rot[2])
		*v = rot[2];
	return 0;
}

static void rotated_free(double *rot[3])
{
	free(rot[0]);
	free(rot[1]);
	free(rot[2]);
}

int ba_cpu_fwd(const struct ba_dims *p, const double *q, const double *k, const double *v,
	       const double *table, int rot_v, double *o)
{
	double *rot[3] = { NULL, NULL, NULL }, *P = NULL;
	long H = p->heads, d = p->d;
	int rc = -1;

	if (rotated_qkv(p, &q, &k, &v, table, rot_v, rot) != 0)
		goto out;
	if (!(P = malloc((size_t)(p->blk * p->blk) * sizeof(double))))
		goto out;
	for (long sq = -1, b0 = 0, n = 0; block_next(p, &sq, &b0, &n);)
		for (long h = 0; h < H; h++) {
			block_probs(p, q, k, b0, n, h, P);
			for (long i = 0; i < n; i++)
				for (long c = 0; c < d; c++) {
					double acc = 0;

					for (long j = 0; j < n; j++)
						acc += P[i * n + j] * v[((b0 + j) * H + h) * d + c];
					o[((b0 + i) * H + h) * d + c] = acc;
				}
		}
	rc = 0;
out:
	rotated_free(rot);
	free(P);
	return rc;
}

int ba_cpu_bwd(const struct ba_dims *p, const double *q, const double *k, const double *v,
	       const double *dout, const double *table, int rot_v, double *dq, double *dk,
	       double *dv)
{
	double *rot[3] = { NULL, NULL, NULL }, *P = NULL, *dS = NULL;
	long H = p->heads, d = p->d;
	double scale = 1.0 / sqrt((double)d);
	int rc = -1;

	if (rotated_qkv(p, &q, &k, &v, table, rot_v, rot) != 0)
		goto out;
	if (!(P = malloc((size_t)(p->blk * p->blk) * sizeof(double))) ||
	    !(dS = malloc((size_t)(p->blk * p->blk) * sizeof(double))))
		goto out;
	for (long sq = -1, b0 = 0, n = 0; block_next(p, &sq, &b0, &n);)
		for (long h = 0; h < H; h++) {
#define AT(x, t) ((x) + ((b0 + (t)) * H + h) * d)
			block_probs(p, q, k, b0, n, h, P);
			/* dS = P (dP - Di) scale, dP = dO V^T, Di = rowsum(P dP) */
			for (long i = 0; i < n; i++) {
				double di = 0;

				for (long j = 0; j < n; j++) {
					double dp = 0;

					for (long c = 0; c < d; c++)
						dp += AT(dout, i)[c] * AT(v, j)[c];
					dS[i * n + j] = dp;
					di += P[i * n + j] * dp;
				}
				for (long j = 0; j < n; j++)
					dS[i * n + j] = P[i * n + j] * (dS[i * n + j] - di) * scale;
			}
			for (long i = 0; i < n; i++)
				for (long c = 0; c < d; c++) {
					double aq = 0, ak = 0, av = 0;

					for (long j = 0; j < n; j++) {
						aq += dS[i * n + j] * AT(k, j)[c];
						ak += dS[j * n + i] * AT(q, j)[c];
						av += P[j * n + i] * AT(dout, j)[c];
					}
					AT(dq, i)[c] = aq;
					AT(dk, i)[c] = ak;
					AT(dv, i)[c] = av;
				}
#undef AT
		}
	if (table) {
		ba_rotate(p, table, dq, 1);
		ba_rotate(p, table, dk, 1);
		if (rot_v)
			ba_rotate(p, table, dv, 1);
	}
	rc = 0;
out:
	rotated_free(rot);
	free(P);
	free(dS);
	return rc;
}

/* ---- buffers ---- */

/* Buffer indices of one shape; -1 where absent. */
struct layout {
	int q, k, v, dout, off, tab, o, dq, dk, dv, blocks;
	int nproblem, ninputs;
};

static void layout_of(int bwd, const struct kt_shape *s, struct layout *L)
{
	int n = 0;

	L->q = n++;
	L->k = n++;
	L->v = n++;
	L->dout = bwd ? n++ : -1;
	L->off = n++;
	L->tab = s->v[BA_D_ROPE] ? n++ : -1;
	L->ninputs = n;
	L->o = bwd ? -1 : n++;
	L->dq = bwd ? n++ : -1;
	L->dk = bwd ? n++ : -1;
	L->dv = bwd ? n++ : -1;
	L->nproblem = n;
	L->blocks = n;
}

/* The chunked backward's row statistics in the scratch `blocks`, past its
 * block list: an fp32 (LSE, Di) pair per token and head, in 32-bit words
 * (ws at block 256 too: the same plan). */
static size_t stats_words(long tokens, long heads)
{
	return 2 * (size_t)tokens * (size_t)heads;
}

/* The backward's two-launch plans (chunked; ws at block 256) and their
 * statistics in the scratch. */
static int has_stats(int bwd, const struct kt_shape *s, const struct kt_config *c)
{
	return bwd && (c->variant == V_BWD_CHUNK ||
		       (c->variant == V_BWD_WS && s->v[BA_D_BLOCK] == 256));
}

/* q, k in (-2, 2): S = q.k / sqrt(d) then has a standard deviation of 4/3,
 * far from both a uniform and a one-hot softmax. */
#define QK_SCALE 2.0

static int ba_buffers(const struct kt_family *f, const struct kt_shape *s,
		      const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	const int bwd = is_bwd(f);
	struct layout L;
	long T = ba_tokens(s->v[BA_D_SEQS], s->v[BA_D_LMAX]);
	size_t x = (size_t)T * (size_t)s->v[BA_D_HEADS] * (size_t)s->v[BA_D_HDIM];

	layout_of(bwd, s, &L);
	kt_buf_set(&out[L.q], "q", KT_BUF_INPUT, KT_BF16, x, QK_SCALE);
	kt_buf_set(&out[L.k], "k", KT_BUF_INPUT, KT_BF16, x, QK_SCALE);
	kt_buf_set(&out[L.v], "v", KT_BUF_INPUT, KT_BF16, x, 1.0);
	if (bwd)
		kt_buf_set(&out[L.dout], "do", KT_BUF_INPUT, KT_BF16, x, 1.0);
	kt_buf_set(&out[L.off], "offsets", KT_BUF_INPUT, KT_I32, (size_t)s->v[BA_D_SEQS] + 1, 0);
	if (L.tab >= 0)
		kt_buf_set(&out[L.tab], "rope_table", KT_BUF_INPUT, KT_BF16,
			(size_t)T * (size_t)s->v[BA_D_HDIM], 0);
	if (bwd) {
		kt_buf_set(&out[L.dq], "dq", KT_BUF_OUTPUT, KT_BF16, x, 0);
		kt_buf_set(&out[L.dk], "dk", KT_BUF_OUTPUT, KT_BF16, x, 0);
		kt_buf_set(&out[L.dv], "dv", KT_BUF_OUTPUT, KT_BF16, x, 0);
	} else {
		kt_buf_set(&out[L.o], "o", KT_BUF_OUTPUT, KT_BF16, x, 0);
	}
	if (!cfg)
		return L.nproblem;
	/* the chunked backward: the row statistics after the block list
	 * (stats_words), one buffer, since rope's bwd list already holds
	 * KT_MAX_BUFS */
	kt_buf_set(&out[L.blocks], "blocks", KT_BUF_SCRATCH, KT_I32,
		2 * (size_t)ba_blocks(s->v[BA_D_SEQS], s->v[BA_D_LMAX], s->v[BA_D_BLOCK]) +
		(has_stats(bwd, s, cfg) ? stats_words(T, s->v[BA_D_HEADS]) : 0), 0);
	return L.nproblem + 1;
}

static int ba_fill(const struct kt_family *f, const struct kt_shape *s, int buf, void *host,
		   uint64_t seed)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	struct layout L;
	int32_t *off = NULL;
	int rc = -1;

	layout_of(is_bwd(f), s, &L);
	ba_buffers(f, s, NULL, bufs);
	if (buf < 0 || buf >= L.ninputs)
		return -1;
	if (buf == L.off) {
		ba_offsets(s->v[BA_D_SEQS], s->v[BA_D_LMAX], host);
		return 0;
	}
	if (buf == L.tab) {
		if (!(off = malloc(((size_t)s->v[BA_D_SEQS] + 1) * sizeof(*off))))
			goto out;
		ba_offsets(s->v[BA_D_SEQS], s->v[BA_D_LMAX], off);
		ba_rope_table(off, s->v[BA_D_SEQS], s->v[BA_D_HDIM], host);
		rc = 0;
		goto out;
	}
	kt_fill_bf16(host, bufs[buf].elems, seed, bufs[buf].scale);
	rc = 0;
out:
	free(off);
	return rc;
}

/* ---- configs ---- */

struct cfg {
	long blk, d, rope, heads;
	long rows_w, dsplit, stages, items, ctas_sm, epi, rpf, minb;
	long kch, qp;		/* forward grid, persistent: keys per chunk (0: all), passes */
	long kst;		/* and the chunk ring's stages (0: whole k, v tiles) */
	int persist, pf;
	int ws;			/* the ws variant: cons, and stages from RING */
	long cons, rprod;
	int chunk;		/* the backward's chunked variant: kch, qp, and stages from RING */
	int two;		/* two launches: chunked, and ws's backward at block 256 */
	unsigned smem_dq;	/* two: the dQ kernel's (smem: the dK, dV kernel's) */
	long mi;		/* m16 tiles per warp */
	long threads;
	unsigned smem;
};

/* The ws backward at BLK 128, head_dim 128 without rope: the template's
 * EARLY_REFILL program, which has q's second buffer (WS_Q2_D128) */
static int ws_q2(int bwd, const struct cfg *g)
{
	return bwd && g->blk == 128 && g->d == 128 && !g->rope;
}

static void cfg_of(int bwd, const struct kt_shape *s, const struct kt_config *c, struct cfg *g)
{
	memset(g, 0, sizeof(*g));
	g->blk = s->v[BA_D_BLOCK];
	g->d = s->v[BA_D_HDIM];
	g->rope = s->v[BA_D_ROPE];
	g->heads = s->v[BA_D_HEADS];
	if (c->variant == ws_variant(bwd)) {
		g->ws = 1;
		g->cons = c->p[P_CONS];
		g->stages = c->p[P_RING];
		g->rprod = c->p[P_RPROD];
		/* one producer warpgroup and CONS consumer warpgroups; the
		 * ring of q, k, v (do) tiles plus 1 KiB for the mbarriers; the
		 * backward at BLK 128 adds a scratch per consumer for half 0's
		 * P and dS (64 x 128 bf16 each), at head_dim 128 one shared
		 * scratch for all of P and dS, and without rope q's second
		 * buffer after it. The forward at BLK 256: two
		 * slots of a round's q rows (64 CONS) and RING slots of a k and
		 * a v chunk (ws_kc keys) */
		g->threads = (g->cons + 1) * 128;
		if (bwd && g->blk == 256) {
			/* the chunked plan on wgmma: passes of 64 CONS rows (QP
			 * 4 / CONS), chunks of 64 (KCH); both kernels the same
			 * block and layout: two sets of the pass's two tiles (q,
			 * do or k, v; the next pass's land in one while the
			 * consumers read the other), RING slots of two chunk
			 * tiles (k, v or q, do) and their 64 (LSE, Di) pairs
			 * (dK, dV only), 1 KiB of mbarriers */
			g->two = 1;
			g->kch = 64;
			g->qp = g->cons == 1 || g->cons == 2 ? 4 / g->cons : 0;
			g->smem = (unsigned)(2 * 2 * 64 * g->cons * g->d * 2 +
					     g->stages * (2 * g->kch * g->d * 2 + g->kch * 8) + 1024);
			g->smem_dq = g->smem;
			/* CTAs an SM (the template's DMINB): two at CONS 1
			 * where their shared memory and the 1 KiB an SM keeps a
			 * CTA fit sm_90's 228 KiB */
			g->ctas_sm = g->cons == 1 && 2 * ((long)g->smem + 1024) <= SM90_SMEM_SM ? 2 : 1;
		} else if (!bwd && g->blk == 256)
			g->smem = (unsigned)((2 * 64 * g->cons + g->stages * 2 * ws_kc(g->d)) *
					     g->d * 2 + 1024);
		else
			g->smem = (unsigned)(g->stages * (bwd ? 4 : 3) * g->blk * g->d * 2 + 1024 +
					     (bwd && g->blk == 128 ? g->d == 128 ? WS_SCRATCH_D128
										 : g->cons * WS_SCRATCH
								   : 0) +
					     (ws_q2(bwd, g) ? WS_Q2_D128 : 0));
		return;
	}
	if (bwd && c->variant == V_BWD_CHUNK) {
		/* one m16 row tile a warp; per CTA the pass's two tiles (PR =
		 * BLK / QP rows: q, do or k, v) and RING slots of two chunk
		 * tiles (KCH rows: k, v or q, do); the dK, dV kernel adds the
		 * chunk's statistics (KCH fp32 pairs) */
		g->chunk = 1;
		g->two = 1;
		g->kch = c->p[P_KCH];
		g->qp = c->p[P_QP];
		g->stages = c->p[P_RING];
		g->rows_w = 16;
		g->dsplit = 1;
		g->minb = 1;
		g->mi = 1;
		g->threads = g->qp > 0 ? g->blk / g->qp / 16 * 32 : 0;
		g->smem_dq = g->qp > 0 ? (unsigned)(2 * (g->blk / g->qp) * g->d * 2 +
						    g->stages * 2 * g->kch * g->d * 2) : 0;
		g->smem = g->smem_dq + (unsigned)(g->kch * 8);
		return;
	}
	g->rows_w = c->p[P_ROWS_W];
	g->dsplit = c->p[P_DSPLIT];
	g->pf = !bwd && c->variant == V_PREFETCH;
	g->stages = g->pf ? 1 : c->p[P_STAGES];	/* prefetch: one stage, refilled in place */
	g->persist = c->variant == V_PERSIST;
	g->items = g->persist ? 0 : c->p[P_ITEMS];
	g->ctas_sm = g->persist ? c->p[P_CTAS_SM] : 0;
	/* the forward's grid and persistent stage O (EPI 1 of prefetch) */
	g->epi = bwd || g->pf ? c->p[P_EPI] : 1;
	g->rpf = c->p[P_RPF];
	g->minb = c->p[P_MINB];
	g->kch = bwd || g->pf ? 0 : c->p[P_KCH];
	g->qp = bwd || g->pf ? 1 : c->p[P_QP];
	g->kst = bwd || g->pf ? 0 : c->p[P_KST];
	g->mi = g->rows_w / 16;
	g->threads = g->rows_w > 0 && g->qp > 0 ? g->blk / g->qp / g->rows_w * g->dsplit * 32 : 0;
	/* fwd: q, k, v per stage; bwd: q, k, v, do per stage plus dS, and P
	 * too unless it fits in the consumed v tile (BLK <= d) */
	g->smem = (unsigned)(g->stages * (bwd ? 4 : 3) * g->blk * g->d * 2 +
			     (bwd ? (g->blk <= g->d ? 1 : 2) * g->blk * g->blk * 2 : 0));
	/* RPF 2: the bf16 table tile of the block, rows padded by 16 bytes */
	if (g->rope && g->rpf == 2)
		g->smem += (unsigned)(g->blk * (g->d * 2 + 16));
	/* KST: two passes' q rows and KST stages of a k and a v chunk */
	if (g->kst > 0 && g->qp > 0)
		g->smem = (unsigned)((2 * g->blk / g->qp + g->kst * 2 * g->kch) * g->d * 2);
}

/* fp32 accumulators a thread holds at once: S (and dP) plus one output
 * tile (O, dQ) -- what decides spilling. The limits were read off ptxas
 * (nvcc --resource-usage, sm_90, ROPE=1, every BLK/HD/ROWS_W/DSPLIT) for the
 * templates: above them they spill more than a few words. At 512 threads
 * __launch_bounds__ leaves 128 registers per thread. */
static long acc_regs(int bwd, const struct cfg *g)
{
	long n = g->mi * ((bwd ? 2 : 1) * (g->kch ? g->kch : g->blk) / 2 + g->d / g->dsplit / 2);

	/* RPF 6 holds dq's table pairs (bf16x2) for dk through the second phase */
	if (bwd && g->rope && g->rpf == 6)
		n += g->mi * g->d / g->dsplit / 4;
	return n;
}

static long acc_regs_max(int bwd, const struct cfg *g)
{
	/* block 256 (ptxas, sm_80, sm_90, sm_90a, every ROWS_W, DSPLIT, KCH,
	 * QP, rope): at 1024 threads (64 registers) every one spills
	 * kilobytes; at 512 above 64, or with rope (its table chunks) above
	 * 48; at 256 and 128 above 160 */
	if (g->blk == 256) {
		if (g->threads >= 1024)
			return 0;
		if (g->threads >= 512)
			return g->rope ? 48 : 64;
		return 160;
	}
	if (g->threads >= 512)
		return 80;
	/* EPI 1 keeps more live across its extra barriers: at 192 (ROWS_W
	 * 32) it spills 72-540 bytes, at 160 at most 120 (ptxas, sm_90) */
	if (bwd && g->epi)
		return 176;
	return bwd ? 192 : 160;
}

/* The ws variant past the shape checks: sm_90a, BLK 64 and 128 (the
 * backward at 128 and head_dim 128 with one slot) and 256 (the backward:
 * the chunked plan on wgmma, RPROD 0), its own
 * parameters (CONS, RING, RPROD), none of the mma.sync variants'; no
 * config that spills (ptxas, sm_90a, every ws program). */
static int check_ws(int bwd, const struct kt_config *c, const struct kt_target *tgt,
		    const struct cfg *g, char *why, size_t whylen)
{
	const struct kt_param *params = bwd ? bwd_params : fwd_params;
	int n = bwd ? (int)(sizeof(bwd_params) / sizeof(bwd_params[0]))
		    : (int)(sizeof(fwd_params) / sizeof(fwd_params[0]));
	long ring_max = bwd ? 3 : 4;
	char arch[16];
	int i;

	for (i = 0; i < n; i++)
		if (!(params[i].variants & (1u << c->variant)) && c->p[i] != 0)
			return snprintf(why, whylen, "ws has no parameter %s (%s=%ld)", params[i].name,
					params[i].name, c->p[i]), 1;
	/* a consumer's wgmma tile is m64: a 32-token block would leave half
	 * of every S and O tile empty */
	if (g->blk < 64)
		return snprintf(why, whylen,
				"ws at block %ld: its wgmma tiles are 64 rows (grid and persistent "
				"take block 32)", g->blk), 1;
	if (!tgt->arch_a) {
		kt_target_arch(tgt, arch, sizeof(arch));
		return snprintf(why, whylen, "ws needs sm_90a (wgmma); target %s", arch),
		       1;
	}
	if (g->cons != 1 && g->cons != 2)
		return snprintf(why, whylen, "CONS %ld: 1 or 2 consumer warpgroups", g->cons), 1;
	if (g->rprod < 0 || g->rprod > (bwd ? 3 : 2))
		return snprintf(why, whylen, "RPROD %ld: %s", g->rprod,
				bwd ? "0 to 3" : "0, 1 or 2 (3 rotates the backward's outputs)"), 1;
	if (!g->rope && g->rprod)
		return snprintf(why, whylen, "RPROD %ld without rope: the same kernel as 0", g->rprod),
		       1;
	/* the backward at BLK 256: its producer rotates one step (the pass's
	 * tiles, a chunk) at a time, RPROD 0's way; no other form */
	if (bwd && g->blk == 256 && g->rprod != 0)
		return snprintf(why, whylen, "RPROD %ld at block 256 (backward): 0 (the producer "
				"rotates one step at a time)", g->rprod), 1;
	/* the backward at BLK 128, head_dim 128: a slot of q, k, v, do is 128
	 * KiB, so one slot, shared by the consumers (an m64 query half, then an
	 * m64 key tile each), beside a 64 KiB scratch of the item's P and dS */
	if (bwd && g->blk == 128 && g->d == 128) {
		if (g->stages != 1)
			return snprintf(why, whylen,
					"RING %ld at block 128, head_dim 128 (backward): 1 (a slot of q, "
					"k, v, do is 128 KiB; one slot and the 64 KiB P, dS scratch "
					"fill 227 KiB)", g->stages), 1;
		/* one slot is never free ahead of the item in it */
		if (g->rprod == 1)
			return snprintf(why, whylen,
					"RPROD 1 with one slot (block 128, head_dim 128): the next "
					"item's slot is never free early, the same kernel as 0"), 1;
		/* ptxas: at CONS 2 (168 registers) both the producer's table
		 * chunks beside 64 copies and the consumer's rotated epilogue
		 * spill; RPROD 2's q, k in registers spills at CONS 1 too */
		if (g->rope && (g->cons == 2 || g->rprod == 2))
			return snprintf(why, whylen,
					"%s at block 128, head_dim 128 (backward): spills (ptxas); "
					"CONS 1 with RPROD 0 or 3", g->cons == 2 ? "rope with CONS 2"
										 : "RPROD 2"), 1;
	} else if (g->stages < 2) {
		return snprintf(why, whylen,
				"RING %ld: ws needs 2 or more stages (the producer fills one while "
				"a consumer reads another; RING 1 is the backward's at block 128, "
				"head_dim 128 only)", g->stages), 1;
	}
	if (g->stages > ring_max)
		return snprintf(why, whylen, "RING %ld: at most %ld", g->stages, ring_max), 1;
	/* BLK 256: the producer runs steps (a round's q rows, a key chunk),
	 * not items; RPROD 2's q, k in registers has no step form */
	if (g->blk == 256 && g->rprod > 1)
		return snprintf(why, whylen, "RPROD %ld at block 256: 0 or 1 (the producer's steps "
				"are chunks; no register rotation)", g->rprod), 1;
	/* the template's static_assert: each consumer's waits stay within one
	 * phase of a slot's barriers (unreachable while CONS <= 2 <= RING, and
	 * where the consumers share every item) */
	if (g->stages < g->cons && !(bwd && g->blk == 128 && g->d == 128))
		return snprintf(why, whylen, "RING %ld < CONS %ld: a slot per consumer", g->stages,
				g->cons), 1;
	if (g->threads > tgt->max_threads)
		return snprintf(why, whylen, "%ld threads > %d", g->threads, tgt->max_threads), 1;
	if (g->smem > (unsigned)tgt->smem_optin && bwd && g->blk == 256)
		return snprintf(why, whylen,
				"shared memory %u > %d bytes: RING %ld slots of two 64-row chunks "
				"beside two sets of the pass's two tiles of %ld rows (head_dim %ld)",
				g->smem, tgt->smem_optin, g->stages, 64 * g->cons, g->d), 1;
	if (g->smem > (unsigned)tgt->smem_optin && g->blk == 256)
		return snprintf(why, whylen,
				"shared memory %u > %d bytes: two q slots of %ld rows and RING %ld "
				"slots of a k and a v chunk of %ld keys (head_dim %ld)", g->smem,
				tgt->smem_optin, 64 * g->cons, g->stages, ws_kc(g->d), g->d), 1;
	if (g->smem > (unsigned)tgt->smem_optin)
		return snprintf(why, whylen,
				"shared memory %u > %d bytes: RING %ld slots of %ld KiB (q, k, v%s "
				"at block %ld, head_dim %ld)%s", g->smem, tgt->smem_optin, g->stages,
				(bwd ? 4 : 3) * g->blk * g->d * 2 / 1024, bwd ? ", do" : "", g->blk,
				g->d,
				!bwd || g->blk != 128 ? ""
				: g->d != 128	      ? " + CONS x 32 KiB of P, dS scratch"
				: ws_q2(bwd, g)	      ? " + 64 KiB of P, dS scratch + 32 KiB of q's "
							"second buffer"
						      : " + 64 KiB of P, dS scratch"),
		       1;
	/* BLK 128, head_dim 128, two consumers: under the register cap of
	 * 384 threads the producer cannot hold its rotation's table chunks
	 * across the next item's copies (RPROD 1) or beside q, k (RPROD 2);
	 * ptxas spills (docs/families/blockattn.md) */
	if (g->blk == 128 && g->d == 128 && g->cons == 2 && g->rope && g->rprod != 0)
		return snprintf(why, whylen,
				"RPROD %ld at block 128, head_dim 128 with CONS 2: the producer spills "
				"(ptxas); RPROD 0 or CONS 1", g->rprod), 1;
	/* BLK 256, head_dim 128, two consumers, rope=2: RPROD 1's next step
	 * in flight beside a rotation of k and v spills 4 bytes (ptxas) */
	if (g->blk == 256 && g->d == 128 && g->cons == 2 && g->rope == 2 && g->rprod == 1)
		return snprintf(why, whylen,
				"RPROD 1 at block 256, head_dim 128, rope=2 with CONS 2: spills "
				"(ptxas); RPROD 0 or CONS 1"), 1;
	return 0;
}

/* The backward's chunked variant past the shape checks: block 256 only,
 * its own parameters (KCH, QP, RING), none of the others'; nothing that
 * ptxas spills (sm_80, sm_90, sm_90a: every program of the space). */
static int check_chunk(const struct kt_config *c, const struct kt_target *tgt,
		       const struct cfg *g, char *why, size_t whylen)
{
	int i, n = (int)(sizeof(bwd_params) / sizeof(bwd_params[0]));

	for (i = 0; i < n; i++)
		if (!(bwd_params[i].variants & (1u << V_BWD_CHUNK)) && c->p[i] != 0)
			return snprintf(why, whylen, "chunked has no parameter %s (%s=%ld)",
					bwd_params[i].name, bwd_params[i].name, c->p[i]), 1;
	if (g->blk != 256)
		return snprintf(why, whylen, "chunked at block %ld: block 256 only (grid and "
				"persistent hold a whole block of 32 to 128)", g->blk), 1;
	if (g->kch != 32 && g->kch != 64)
		return snprintf(why, whylen, "KCH %ld: 32 or 64", g->kch), 1;
	if (g->qp != 2 && g->qp != 4)
		return snprintf(why, whylen, "QP %ld: 2 or 4", g->qp), 1;
	if (g->stages != 2 && g->stages != 3)
		return snprintf(why, whylen, "RING %ld: 2 or 3", g->stages), 1;
	if (g->threads > tgt->max_threads)
		return snprintf(why, whylen, "%ld threads > %d", g->threads, tgt->max_threads), 1;
	if (g->smem > (unsigned)tgt->smem_optin)
		return snprintf(why, whylen, "shared memory %u > %d bytes", g->smem, tgt->smem_optin),
		       1;
	/* the dK, dV kernel holds both accumulators (2 x 64 fp32 at head_dim
	 * 128) beside P^T and dP^T of a chunk: with chunks of 64 it sits at
	 * 255 registers and spills 12-96 bytes (sm_80, sm_90a) */
	if (g->d == 128 && g->kch == 64)
		return snprintf(why, whylen, "KCH 64 at head_dim 128: the dK, dV kernel spills "
				"(ptxas); KCH 32"), 1;
	return 0;
}

static int ba_check(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
		    const struct kt_target *tgt, char *why, size_t whylen)
{
	const int bwd = is_bwd(f);
	struct cfg g;
	long seqs = s->v[BA_D_SEQS], lmax = s->v[BA_D_LMAX];

	if (c->variant != V_GRID && c->variant != V_PERSIST && c->variant != ws_variant(bwd) &&
	    (bwd || c->variant != V_PREFETCH) && (!bwd || c->variant != V_BWD_CHUNK))
		return snprintf(why, whylen, "unknown variant %d", c->variant), 1;
	cfg_of(bwd, s, c, &g);
	if (g.d != 64 && g.d != 128)
		return snprintf(why, whylen, "head_dim %ld: the kernels take 64 or 128", g.d), 1;
	if (g.blk != 32 && g.blk != 64 && g.blk != 128 && g.blk != 256)
		return snprintf(why, whylen, "block %ld: the kernels take 32, 64, 128 or 256", g.blk), 1;
	if (bwd && g.blk == 256 && !g.chunk && !g.ws)
		return snprintf(why, whylen, "block 256: the backward's %s holds the whole block "
				"(32 to 128); chunked and ws take 256",
				g.persist ? "persistent" : "grid"), 1;
	if (g.blk == 256 && g.pf)
		return snprintf(why, whylen, "block 256: grid, persistent and ws only (prefetch "
				"has no key-chunked kernel)"), 1;
	if ((double)seqs * (double)lmax > 2147483647.0)
		return snprintf(why, whylen, "seqs x lmax over 2^31: offsets are int32"), 1;
	if (g.ws)
		return check_ws(bwd, c, tgt, &g, why, whylen);
	if (g.chunk)
		return check_chunk(c, tgt, &g, why, whylen);
	if (g.rows_w != 16 && g.rows_w != 32)
		return snprintf(why, whylen, "ROWS_W %ld: 16 or 32", g.rows_w), 1;
	/* block 32, ROWS_W 32: one row group holds the whole block, S and O
	 * two m16 tiles deep; at head_dim 128 ptxas spills (docs/families/blockattn.md) */
	if (g.blk == 32 && g.rows_w == 32 && g.d == 128)
		return snprintf(why, whylen, "ROWS_W 32 at block 32, head_dim 128: spills (ptxas); "
				"ROWS_W 16"), 1;
	if (g.dsplit != 1 && g.dsplit != 2)
		return snprintf(why, whylen, "DSPLIT %ld: 1 or 2", g.dsplit), 1;
	if (g.stages < 1 || g.stages > 3)
		return snprintf(why, whylen, "STAGES %ld: 1 to 3", g.stages), 1;
	if (!g.persist && (g.items < 1 || g.items > 64))
		return snprintf(why, whylen, "ITEMS %ld: 1 to 64", g.items), 1;
	if (g.epi != 0 && g.epi != 1)
		return snprintf(why, whylen, "EPI %ld: 0 or 1", g.epi), 1;
	if (g.kch != 0 && g.kch != 32 && g.kch != 64 && g.kch != 128)
		return snprintf(why, whylen, "KCH %ld: 0, 32, 64 or 128", g.kch), 1;
	if (g.qp != 1 && g.qp != 2)
		return snprintf(why, whylen, "QP %ld: 1 or 2", g.qp), 1;
	if (g.blk < 256 && (g.kch || g.qp != 1))
		return snprintf(why, whylen, "KCH %ld, QP %ld at block %ld: the whole S row fits in "
				"registers (KCH 0, QP 1)", g.kch, g.qp, g.blk), 1;
	if (g.kst != 0 && g.kst != 2 && g.kst != 3)
		return snprintf(why, whylen, "KST %ld: 0, 2 or 3", g.kst), 1;
	if (g.kst && (g.blk != 256 || !g.kch))
		return snprintf(why, whylen, "KST %ld streams KCH-key chunks: block 256 with KCH 32, "
				"64 or 128", g.kst), 1;
	if (g.kch == 32 && !g.kst)
		return snprintf(why, whylen, "KCH 32 with whole k, v tiles: KST only"), 1;
	if (g.kst && g.stages > 1)
		return snprintf(why, whylen, "KST %ld is the ring: STAGES 1", g.kst), 1;
	if (g.kst && g.rpf)
		return snprintf(why, whylen, "KST %ld rotates each chunk as it lands: RPF 0", g.kst),
		       1;
	/* RPF 3-5 (the backward's epilogue pairs read in the prologue, or held
	 * with an fp32 prologue) are not in the space: holding those registers
	 * across the MMAs spills (docs/families/blockattn.md) */
	if (g.rpf < 0 || g.rpf > (bwd ? 8 : 2) || (g.rpf >= 3 && g.rpf <= 5))
		return snprintf(why, whylen, "RPF %ld: %s", g.rpf, bwd ? "0, 1, 2, 6, 7 or 8" : "0, 1 or 2"),
		       1;
	if (g.rpf && !g.rope)
		return snprintf(why, whylen, "RPF %ld without rope: the same kernel as RPF 0", g.rpf),
		       1;
	if (g.rpf == 2 && g.stages > 1)
		return snprintf(why, whylen, "RPF 2 keeps one table tile: STAGES 1 only"), 1;
	if (g.rpf >= 6 && g.stages > 1)
		return snprintf(why, whylen, "RPF %ld reads the table of the item it copies: STAGES 1 only",
				g.rpf), 1;
	if (g.minb < 1 || g.minb > 8)
		return snprintf(why, whylen, "MINB %ld: 1 to 8", g.minb), 1;
	/* a cap under 128 registers spills these kernels heavily (ptxas) */
	if (g.minb > 1 && g.minb * g.threads > 512)
		return snprintf(why, whylen, "MINB %ld x %ld threads: under 128 registers each",
				g.minb, g.threads), 1;
	/* prefetch holds the next item's load addresses across S: under the
	 * 128-register cap of 4 CTAs ptxas spills 68-612 bytes above 64
	 * accumulators (d = 128, ROWS_W 16: 88-100; grid: 20), none at 64 */
	if (g.pf && g.minb * g.threads >= 512 && acc_regs(bwd, &g) > 64)
		return snprintf(why, whylen, "prefetch with MINB %ld: spills under the register cap",
				g.minb), 1;
	/* RPF 6-8 with the staged epilogue under the 3-CTA register cap (170):
	 * ptxas spills 500-800 bytes (d = 128, BLK 64, ROWS_W 16; none uncapped) */
	if (bwd && g.rope && g.rpf >= 6 && g.epi && g.minb > 1 && g.minb * g.threads >= 384)
		return snprintf(why, whylen, "RPF %ld, EPI 1 with MINB %ld: spills under the register cap",
				g.rpf, g.minb), 1;
	if (g.minb > 1 && (long)g.minb * (g.smem + 1024) > (long)tgt->smem_optin + 1024)
		return snprintf(why, whylen, "MINB %ld CTAs of %u bytes overfill an SM's shared memory",
				g.minb, g.smem), 1;
	if (g.persist && (g.ctas_sm < 1 || g.ctas_sm > 32))
		return snprintf(why, whylen, "CTAS_SM %ld: 1 to 32", g.ctas_sm), 1;
	if (g.pf && g.items < 2)
		return snprintf(why, whylen, "prefetch with ITEMS 1: no next item to prefetch"), 1;
	if (!g.persist && g.stages > g.items)
		return snprintf(why, whylen, "STAGES %ld > ITEMS %ld: the extra stages stay empty",
				g.stages, g.items), 1;
	if (g.threads > tgt->max_threads)
		return snprintf(why, whylen, "%ld threads > %d", g.threads, tgt->max_threads), 1;
	if (g.smem > (unsigned)tgt->smem_optin)
		return snprintf(why, whylen, "shared memory %u > %d bytes", g.smem, tgt->smem_optin), 1;
	if (acc_regs(bwd, &g) > acc_regs_max(bwd, &g))
		return snprintf(why, whylen, "%ld fp32 accumulators per thread: would spill",
				acc_regs(bwd, &g)), 1;
	/* block 256 within those limits where ptxas still spills (16-80
	 * bytes; sm_80, sm_90 or sm_90a): RPF 2 with KCH 64, QP 2 and no
	 * split; a second stage beside rope at ROWS_W 32, QP 2 (128 threads) */
	if (g.blk == 256 && g.rope && g.rpf == 2 && g.kch == 64 && g.qp == 2 && g.dsplit == 1)
		return snprintf(why, whylen, "block 256, RPF 2 with KCH 64, QP 2, DSPLIT 1: spills "
				"(ptxas)"), 1;
	if (g.blk == 256 && g.rope && g.stages > 1 && g.threads <= 128)
		return snprintf(why, whylen, "block 256, STAGES %ld with rope at %ld threads: spills "
				"(ptxas)", g.stages, g.threads), 1;
	/* KST only where the whole tiles do not fit (head_dim 128 on sm_80):
	 * where they fit they are the faster kernel (docs/families/blockattn.md) */
	if (g.kst && 3L * g.blk * g.d * 2 <= tgt->smem_optin)
		return snprintf(why, whylen, "KST %ld where whole k, v tiles fit (%ld bytes): slower "
				"there", g.kst, 3L * g.blk * g.d * 2), 1;
	/* KST spills under a register cap (ptxas, sm_80 and sm_90a: 16-80
	 * bytes at 512 threads, head_dim 128, and with MINB 4) */
	if (g.kst && (g.minb > 1 || (g.threads >= 512 && g.d == 128)))
		return snprintf(why, whylen, "KST %ld at %ld threads, MINB %ld: spills (ptxas)", g.kst,
				g.threads, g.minb), 1;
	return 0;
}

/* ---- plans ---- */

/* The arguments every kernel of a direction starts with: q, k, v (and do),
 * `where` (the block list, or the reference's offsets), the rope table (a
 * null pointer without rope), then the outputs. */
static void io_args(struct kt_launch *l, const struct layout *L, int where)
{
	kt_launch_arg_buf(l, L->q);
	kt_launch_arg_buf(l, L->k);
	kt_launch_arg_buf(l, L->v);
	if (L->dout >= 0)
		kt_launch_arg_buf(l, L->dout);
	kt_launch_arg_buf(l, where);
	if (L->tab >= 0)
		kt_launch_arg_buf(l, L->tab);
	else
		kt_launch_arg_i64(l, 0);	/* a null table pointer */
	if (L->o >= 0) {
		kt_launch_arg_buf(l, L->o);
	} else {
		kt_launch_arg_buf(l, L->dq);
		kt_launch_arg_buf(l, L->dk);
		kt_launch_arg_buf(l, L->dv);
	}
}

/* bound 0: the plan of s's generated lengths (the tuner's); else a bound
 * on the blocks (ba_plan_bound), the kernels compiled with BOUND. */
static int plan_of(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
		   const struct kt_target *tgt, long bound, struct kt_plan *out,
		   struct kt_err *err)
{
	const int bwd = is_bwd(f);
	const char *fam = f->name;
	struct layout L;
	struct cfg g;
	struct kt_program *pr = &out->programs[0];
	struct kt_launch *l;
	char why[160];
	long nblocks, nitems, grid, cta_step, item_step, nper;

	memset(out, 0, sizeof(*out));
	if (ba_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "%s: config cannot run: %s", fam, why);
	cfg_of(bwd, s, c, &g);
	layout_of(bwd, s, &L);
	nblocks = bound ? bound : ba_blocks(s->v[BA_D_SEQS], s->v[BA_D_LMAX], g.blk);
	nitems = nblocks * g.heads;
	if (nitems > 2147483647L)
		return kt_err_set(err, KT_EINVAL, "%s: %ld work items over 2^31", fam, nitems);
	out->nprograms = 1;
	pr->tpl = g.ws ? "blockattn_ws" : fam;
	if (g.ws) {
		if (kt_program_define(pr, "BWD", bwd) || kt_program_define(pr, "BLK", g.blk) ||
		    kt_program_define(pr, "HD", g.d) || kt_program_define(pr, "ROPE", g.rope) ||
		    kt_program_define(pr, "CONS", g.cons) ||
		    kt_program_define(pr, "STAGES", g.stages) ||
		    kt_program_define(pr, "RPROD", g.rprod) ||
		    /* the backward at block 256: chunks, passes */
		    (g.two && (kt_program_define(pr, "KCH", g.kch) ||
			       kt_program_define(pr, "QP", g.qp))))
			return kt_err_set(err, KT_EINTERNAL, "%s: too many defines", fam);
	} else if (g.chunk) {
		/* ROWS_W 16, DSPLIT 1, RPF 0, MINB 1: the template's defaults */
		if (kt_program_define(pr, "BLK", g.blk) || kt_program_define(pr, "HD", g.d) ||
		    kt_program_define(pr, "ROPE", g.rope) || kt_program_define(pr, "KCH", g.kch) ||
		    kt_program_define(pr, "QP", g.qp) || kt_program_define(pr, "STAGES", g.stages))
			return kt_err_set(err, KT_EINTERNAL, "%s: too many defines", fam);
	} else if (kt_program_define(pr, "BLK", g.blk) || kt_program_define(pr, "HD", g.d) ||
	    kt_program_define(pr, "ROPE", g.rope) || kt_program_define(pr, "ROWS_W", g.rows_w) ||
	    kt_program_define(pr, "DSPLIT", g.dsplit) ||
	    kt_program_define(pr, "STAGES", g.stages) || kt_program_define(pr, "RPF", g.rpf) ||
	    kt_program_define(pr, "MINB", g.minb) ||
	    (bwd && kt_program_define(pr, "EPI", g.epi)) ||
	    (g.pf && (kt_program_define(pr, "PF", 1) || kt_program_define(pr, "EPI", g.epi))) ||
	    /* block 256 only: the other programs keep their defines */
	    (g.blk == 256 &&
	     (kt_program_define(pr, "KCH", g.kch) || kt_program_define(pr, "QP", g.qp))) ||
	    (g.kst && kt_program_define(pr, "KST", g.kst)))
		return kt_err_set(err, KT_EINTERNAL, "%s: too many defines", fam);
	if (bound && kt_program_define(pr, "BOUND", 1))
		return kt_err_set(err, KT_EINTERNAL, "%s: too many defines", fam);

	/* untimed: the block list from the offsets */
	out->nprep = 1;
	l = &out->prep[0];
	snprintf(l->kernel, sizeof(l->kernel), "blockattn_blocks");
	l->grid[0] = l->grid[1] = l->grid[2] = 1;
	l->block[0] = 1024;
	l->block[1] = l->block[2] = 1;
	kt_launch_arg_buf(l, L.off);
	kt_launch_arg_i32(l, s->v[BA_D_SEQS]);
	kt_launch_arg_buf(l, L.blocks);
	if (bound)
		kt_launch_arg_i32(l, bound);

	if (g.two) {
		/* chunked, and ws at block 256 (the same plan on wgmma):
		 * units of (block, head, pass), passes fastest; chunked a CTA
		 * per unit, ws persistent CTAs (at most ctas_sm an SM, each
		 * walking units blockIdx.x, + gridDim.x, ...; with no SM
		 * count, compile-only, one per unit). The dQ kernel writes
		 * the statistics the dK, dV kernel reads: stats_at, in int2
		 * entries of `blocks`, past the list (and a bound's count) */
		long stats_at = bound ? bound + 1 : nblocks, units = nitems * g.qp;

		if (units > 2147483647L)
			return kt_err_set(err, KT_EINVAL, "%s: %ld CTAs over 2^31", fam, units);
		grid = units;
		if (g.ws && tgt->sms > 0 && (long)tgt->sms * g.ctas_sm < grid)
			grid = (long)tgt->sms * g.ctas_sm;
		out->nlaunch = 2;
		for (int i = 0; i < 2; i++) {
			l = &out->launch[i];
			snprintf(l->kernel, sizeof(l->kernel), "%s", i ? "blockattn_bwd_dkv"
									: "blockattn_bwd_dq");
			l->grid[0] = (unsigned)grid;
			l->grid[1] = l->grid[2] = 1;
			l->block[0] = (unsigned)g.threads;
			l->block[1] = l->block[2] = 1;
			l->smem = i ? g.smem : g.smem_dq;
			io_args(l, &L, L.blocks);
			kt_launch_arg_i32(l, nitems);
			kt_launch_arg_i32(l, g.heads);
			kt_launch_arg_i32(l, stats_at);
		}
		return 0;
	}
	/* The work order: items (block, head), heads fastest so that the CTAs
	 * running at once share a block's table rows in L2. */
	if (g.persist || g.ws) {
		long sms = tgt->sms > 0 ? tgt->sms : 132;	/* compile-only targets */

		/* ws: one CTA per SM (its ring fills most of the shared memory) */
		grid = g.ws ? sms : sms * g.ctas_sm;
		if (grid > nitems)
			grid = nitems;
		cta_step = 1;
		item_step = grid;
		nper = (nitems + grid - 1) / grid;
	} else {
		grid = (nitems + g.items - 1) / g.items;
		cta_step = g.items;
		item_step = 1;
		nper = g.items;
	}
	out->nlaunch = 1;
	l = &out->launch[0];
	snprintf(l->kernel, sizeof(l->kernel), "%s%s", fam, g.ws ? "_ws" : "");
	l->grid[0] = (unsigned)grid;
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = (unsigned)g.threads;
	l->block[1] = l->block[2] = 1;
	l->smem = g.smem;
	io_args(l, &L, L.blocks);
	kt_launch_arg_i32(l, nitems);
	kt_launch_arg_i32(l, g.heads);
	kt_launch_arg_i32(l, cta_step);
	kt_launch_arg_i32(l, item_step);
	kt_launch_arg_i32(l, nper);
	return 0;
}

static int ba_plan(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
		   const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	return plan_of(f, s, c, tgt, 0, out, err);
}

long ba_bound_blocks(long tokens, long seqs, long blk)
{
	long b = (tokens + seqs * (blk - 1)) / blk;

	return b < tokens ? b : tokens;
}

int ba_plan_bound(int bwd, const struct kt_shape *s, long tokens, const struct kt_config *c,
		  const struct kt_target *tgt, struct kt_plan *out, struct kt_buf bufs[KT_MAX_BUFS],
		  int *nbufs, struct kt_err *err)
{
	const struct kt_family *f = bwd ? &blockattn_bwd_family : &blockattn_fwd_family;
	const char *fam = f->name;
	long seqs = s->v[BA_D_SEQS], blk = s->v[BA_D_BLOCK], bound;
	size_t x = (size_t)tokens * (size_t)s->v[BA_D_HEADS] * (size_t)s->v[BA_D_HDIM];
	struct layout L;
	int i;

	if (tokens < 1 || seqs < 1 || blk < 1)
		return kt_err_set(err, KT_EINVAL, "%s: tokens and sequences must be positive", fam);
	if ((double)tokens * (double)s->v[BA_D_HEADS] > 2147483647.0)
		return kt_err_set(err, KT_EINVAL, "%s: tokens x heads over 2^31: work items are int32",
				  fam);
	bound = ba_bound_blocks(tokens, seqs, blk);
	if (plan_of(f, s, c, tgt, bound, out, err) < 0)
		return -1;
	/* s's buffers with T tokens, and the block list of the bound plus
	 * its count */
	layout_of(bwd, s, &L);
	ba_buffers(f, s, c, bufs);
	for (i = 0; i < L.nproblem; i++)
		if (i != L.off)
			bufs[i].elems = i == L.tab ? (size_t)tokens * (size_t)s->v[BA_D_HDIM] : x;
	bufs[L.blocks].elems = 2 * ((size_t)bound + 1) +
		(has_stats(bwd, s, c) ? stats_words(tokens, s->v[BA_D_HEADS]) : 0);
	*nbufs = L.nproblem + 1;
	return 0;
}

/* templates/blockattn_ref.cu: one CTA per (block, head), one thread per row. */
static int ba_ref_plan(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	const int bwd = is_bwd(f);
	struct layout L;
	struct kt_launch *l = &out->launch[0];
	long nblocks = ba_blocks(s->v[BA_D_SEQS], s->v[BA_D_LMAX], s->v[BA_D_BLOCK]);

	memset(out, 0, sizeof(*out));
	if (nblocks > 2147483647L || s->v[BA_D_HEADS] > 65535)
		return kt_err_set(err, KT_EINVAL, "blockattn: %ld blocks do not fit a grid", nblocks);
	layout_of(bwd, s, &L);
	out->nprograms = 1;
	out->programs[0].tpl = "blockattn_ref";
	/* a thread's row of scores holds a block (block 256 only: the others'
	 * program stays as it was) */
	if (s->v[BA_D_BLOCK] > 128 && kt_program_define(&out->programs[0], "REF_MAX", 256))
		return kt_err_set(err, KT_EINTERNAL, "blockattn: too many defines");
	out->nlaunch = 1;
	snprintf(l->kernel, sizeof(l->kernel), "%s", bwd ? "ref_blockattn_bwd" : "ref_blockattn_fwd");
	l->grid[0] = (unsigned)nblocks;
	l->grid[1] = (unsigned)s->v[BA_D_HEADS];
	l->grid[2] = 1;
	l->block[0] = (unsigned)s->v[BA_D_BLOCK];
	l->block[1] = l->block[2] = 1;
	io_args(l, &L, L.off);
	kt_launch_arg_i32(l, s->v[BA_D_SEQS]);
	kt_launch_arg_i32(l, s->v[BA_D_HEADS]);
	kt_launch_arg_i32(l, s->v[BA_D_HDIM]);
	kt_launch_arg_i32(l, s->v[BA_D_BLOCK]);
	kt_launch_arg_i32(l, s->v[BA_D_ROPE] == 2);	/* rv: v rotated too */
	return 0;
}

/* ---- the CPU reference through the family interface ---- */

static int ba_cpu_ref(const struct kt_family *f, const struct kt_shape *s, const void *const *in,
		      float *const *out, struct kt_err *err)
{
	const int bwd = is_bwd(f);
	const char *fam = f->name;
	struct layout L;
	struct ba_dims p;
	double *x[4] = {NULL, NULL, NULL, NULL}, *tab = NULL, *y[3] = {NULL, NULL, NULL};
	size_t n, i;
	int a, nin, nout, rot_v, rc = -1;

	layout_of(bwd, s, &L);
	p.seqs = s->v[BA_D_SEQS];
	p.heads = s->v[BA_D_HEADS];
	p.d = s->v[BA_D_HDIM];
	p.blk = s->v[BA_D_BLOCK];
	p.offsets = in[L.off];
	p.tokens = p.offsets[p.seqs];
	n = (size_t)p.tokens * (size_t)p.heads * (size_t)p.d;
	nin = bwd ? 4 : 3;	/* q k v (do): buffers 0.. in order */
	nout = bwd ? 3 : 1;
	for (a = 0; a < nin; a++) {
		if (!(x[a] = malloc(n * sizeof(double))))
			goto nomem;
		for (i = 0; i < n; i++)
			x[a][i] = kt_bf16_to_f32(((const uint16_t *)in[a])[i]);
	}
	for (a = 0; a < nout; a++)
		if (!(y[a] = malloc(n * sizeof(double))))
			goto nomem;
	if (L.tab >= 0) {
		size_t nt = (size_t)p.tokens * (size_t)p.d;

		if (!(tab = malloc(nt * sizeof(double))))
			goto nomem;
		for (i = 0; i < nt; i++)
			tab[i] = kt_bf16_to_f32(((const uint16_t *)in[L.tab])[i]);
	}
	rot_v = s->v[BA_D_ROPE] == 2;
	if ((bwd ? ba_cpu_bwd(&p, x[0], x[1], x[2], x[3], tab, rot_v, y[0], y[1], y[2])
		 : ba_cpu_fwd(&p, x[0], x[1], x[2], tab, rot_v, y[0])) != 0)
		goto nomem;
	for (a = 0; a < nout; a++)
		for (i = 0; i < n; i++)
			out[a][i] = (float)y[a][i];
	rc = 0;
	goto out;
nomem:
	kt_err_set(err, KT_EINTERNAL, "%s: CPU reference out of memory", fam);
out:
	for (a = 0; a < 4; a++)
		free(x[a]);
	for (a = 0; a < 3; a++)
		free(y[a]);
	free(tab);
	return rc;
}

/* ---- models ---- */

/* Sum over blocks of n^2 (n = block length), times H: the pairs scored. */
static double pairs(const struct kt_shape *s)
{
	long i, blk = s->v[BA_D_BLOCK], lmax = s->v[BA_D_LMAX];
	double acc = 0;

	for (i = 0; i < s->v[BA_D_SEQS]; i++) {
		long len = ba_length(lmax, i), full = len / blk, rest = len % blk;

		acc += (double)full * blk * blk + (double)rest * rest;
	}
	return acc * (double)s->v[BA_D_HEADS];
}

/* fwd: QK^T and PV, 2 n^2 d each; bwd: S again, dV, dP, dQ, dK. */
static double ba_flops(const struct kt_family *f, const struct kt_shape *s)
{
	return (is_bwd(f) ? 10.0 : 4.0) * pairs(s) * (double)s->v[BA_D_HDIM];
}

/* fwd reads q, k, v and writes o (8d bytes per token-head); bwd reads q, k,
 * v, do and writes dq, dk, dv (14d); plus the offsets and, with rope, the
 * bf16 table once (2d bytes per token). */
static double ba_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	const int bwd = is_bwd(f);
	double T = (double)ba_tokens(s->v[BA_D_SEQS], s->v[BA_D_LMAX]);
	double d = (double)s->v[BA_D_HDIM], H = (double)s->v[BA_D_HEADS];

	return (bwd ? 14.0 : 8.0) * d * T * H + 4.0 * ((double)s->v[BA_D_SEQS] + 1) +
	       (s->v[BA_D_ROPE] ? 2.0 * d * T : 0);
}

/* The best mma.sync configs at ads_d128_L256 on the H200
 * (docs/families/blockattn.md): grid, one m16 tile per warp, no split, no
 * ring; the forward two items per CTA (one with rope), the backward one;
 * rope tables read batched (forward: RPF 1) or during the q, k copy with
 * each thread rotating its own chunks (backward: RPF 7); register caps
 * for 4 (fwd) and 3 (bwd) CTAs per SM;
 * the backward's outputs stored from registers (EPI 0). At block 256 off
 * sm_90a the forward's keys in chunks of 64, its rows in two passes. Where a cap
 * overfills the target's shared memory (sm_80 at d = 128) it is dropped,
 * then head_dim is split. At block 128 on sm_90a, where check_ws admits it,
 * ws with two consumers sharing a ring of two instead (the backward at
 * head_dim 128: its one slot; with rope it spills, so grid), which beats
 * that grid config there; with rope 1 at head_dim 128 one consumer over the
 * slot, which beats grid there too; at block 256 (forward) ws with two
 * consumers over a k/v ring of four chunks, which beats the chunked grid
 * path there (docs/families/blockattn.md, "The default").
 * The backward at block 256: on sm_90a without rope ws (both launches on
 * wgmma) with two consumers and a ring of two, which beats chunked there;
 * else (and with rope, where ws is untimed) chunked with chunks of 32 rows,
 * passes of 64 (128 threads), a ring of two -- the smallest CTA, so the
 * most warps per SM (the dK, dV kernel's registers decide).
 * NEEDSWORK: ws at block 64, where the measurements disagree by shape. */
static int ba_default(const struct kt_family *f, const struct kt_shape *s,
		      const struct kt_target *tgt, struct kt_config *out)
{
	const int bwd = is_bwd(f);
	char why[160];
	int rope = s->v[BA_D_ROPE] != 0;

	memset(out, 0, sizeof(*out));
	/* ws where it was timed: blocks 128 and 256 */
	if ((s->v[BA_D_BLOCK] == 128 || s->v[BA_D_BLOCK] == 256) && tgt->arch_a) {
		out->variant = ws_variant(bwd);
		out->p[P_CONS] = 2;
		/* the backward at block 128, head_dim 128 has one slot */
		out->p[P_RING] = s->v[BA_D_BLOCK] == 256 ? (bwd ? 2 : 4)
				 : bwd && s->v[BA_D_HDIM] == 128 ? 1 : 2;
		if (ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
		/* the backward at block 128, head_dim 128 with rope 1: CONS 2
		 * spills there, one consumer does not */
		out->p[P_CONS] = 1;
		if (bwd && s->v[BA_D_BLOCK] == 128 && s->v[BA_D_ROPE] == 1 &&
		    ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
			return 0;
		memset(out, 0, sizeof(*out));
	}
	if (bwd && s->v[BA_D_BLOCK] == 256) {
		out->variant = V_BWD_CHUNK;
		out->p[P_KCH] = 32;
		out->p[P_QP] = 4;
		out->p[P_RING] = 2;
		return ba_check(f, s, out, tgt, why, sizeof(why)) == 0 ? 0 : -1;
	}
	out->variant = V_GRID;
	out->p[P_ROWS_W] = 16;
	out->p[P_DSPLIT] = 1;
	out->p[P_STAGES] = 1;
	out->p[P_ITEMS] = bwd || rope ? 1 : 2;
	out->p[P_RPF] = rope ? (bwd ? 7 : 1) : 0;
	out->p[P_MINB] = bwd ? 3 : 4;
	out->p[P_EPI] = 0;
	if (!bwd) {
		out->p[P_KCH] = s->v[BA_D_BLOCK] == 256 ? 64 : 0;
		out->p[P_QP] = s->v[BA_D_BLOCK] == 256 ? 2 : 1;
	}
	if (ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
		return 0;
	out->p[P_MINB] = 1;
	if (ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
		return 0;
	out->p[P_DSPLIT] = 2;
	if (ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
		return 0;
	if (bwd || s->v[BA_D_BLOCK] != 256)
		return -1;
	/* block 256 where three whole tiles overfill shared memory (sm_80 at
	 * head_dim 128): k, v streamed in chunks, of 32 keys where 64 still
	 * overfill it (sm_86, sm_89: 99 KiB) */
	out->p[P_DSPLIT] = 1;
	out->p[P_RPF] = 0;
	out->p[P_KST] = 2;
	if (ba_check(f, s, out, tgt, why, sizeof(why)) == 0)
		return 0;
	out->p[P_KCH] = 32;
	return ba_check(f, s, out, tgt, why, sizeof(why)) == 0 ? 0 : -1;
}

/* Both directions run the same code; priv says which one. */
#define BLOCKATTN_FAMILY(NAME, SUMMARY, VARIANTS, PARAMS, TOL, DIRECTION) {	\
	.name = NAME,								\
	.summary = SUMMARY,							\
	.hidden = 0,								\
	.ndims = BA_NDIMS,							\
	.dims = dims,								\
	.nvariants = (int)(sizeof(VARIANTS) / sizeof(VARIANTS[0])),		\
	.variants = VARIANTS,							\
	.planted = 0,								\
	.nparams = (int)(sizeof(PARAMS) / sizeof(PARAMS[0])),			\
	.params = PARAMS,							\
	.tol = TOL,								\
	.priv = DIRECTION,							\
	.check = ba_check,							\
	.buffers = ba_buffers,							\
	.plan = ba_plan,							\
	.ref_plan = ba_ref_plan,						\
	.cpu_ref = ba_cpu_ref,							\
	.fill = ba_fill,							\
	.flops = ba_flops,							\
	.min_bytes = ba_min_bytes,						\
	.default_config = ba_default,						\
}

const struct kt_family blockattn_fwd_family = BLOCKATTN_FAMILY(
	"blockattn_fwd",
	"jagged block-diagonal attention forward (O only, no LSE), optional fused rotary",
	fwd_variants, fwd_params, 1e-2, &directions[0]);

const struct kt_family blockattn_bwd_family = BLOCKATTN_FAMILY(
	"blockattn_bwd",
	"jagged block-diagonal attention backward (P recomputed, Di inline), optional fused rotary",
	bwd_variants, bwd_params, 2e-2, &directions[1]);
