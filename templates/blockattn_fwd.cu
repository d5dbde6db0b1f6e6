/*
 * blockattn_fwd.cu -- jagged block-diagonal attention, forward (sm_80+,
 * mma.sync m16n8k16 bf16, fp32 accumulation). kernels/blockattn.c has the
 * problem, the buffers and the variants; docs/families/blockattn.md why.
 *
 * -D parameters: BLK (32, 64, 128, 256) tokens per block, HD (64, 128) head_dim, ROPE
 * (0; 1 q, k rotated; 2 v too), ROWS_W (16, 32) query rows per warp, DSPLIT
 * (1, 2) warps per row group splitting head_dim for O = P.V, STAGES (1..3)
 * the cp.async ring over a CTA's items, RPF how rope reads its table (0 a
 * chunk at a time; 1 batched ahead of the rotation; 2 the block's table
 * tile brought into shared memory with q, k and kept across the block's
 * items, STAGES 1; 6-8 backward only, see below), MINB (1..4) CTAs per SM
 * asked of ptxas through __launch_bounds__, PF (0, 1; STAGES 1) the next
 * item's q, k loaded into the current tiles once every warp has S and its
 * v once O has left the v tile, with EPI (0: O from registers, v refilled
 * right after P.V; 1: O staged through the v tile). KCH (0: BLK) keys per
 * chunk and QP (1, 2) passes over the query rows: with KCH < BLK or QP > 1
 * (BLK 256: 256 query rows in one pass, each warp holding its whole S row
 * beside O, spill) the key-chunked path below. KST (0; 2, 3 with KCH <
 * BLK, STAGES 1, RPF 0): k and v streamed through a cp.async ring of KST
 * chunk stages, q holding one pass's rows, instead of whole tiles.
 *
 *   blockattn_blocks(offsets, B, blocks)     grid 1, block 1024: (first
 *       token, length) of every BLK-block (the untimed prep launch)
 *   with BOUND (libktune's launches, sized on the host from T and B alone:
 *   nbound = min(T, (T + B (BLK - 1)) / BLK) blocks at most):
 *   blockattn_blocks(offsets, B, blocks, nbound)
 *       the same, at most nbound entries, then blocks[nbound].x = their
 *       count; the kernels get nitems = nbound * H and run only the first
 *       count * H items (kba::bound_items).
 *   blockattn_fwd(q, k, v, blocks, table, o, nitems, H, cta_step, item_step, nper)
 *       block (BLK / QP / ROWS_W) * DSPLIT * 32, dynamic smem STAGES * 3 * BLK *
 *       HD * 2 (+ BLK * (HD * 2 + 16) with RPF 2); table (T, HD) bf16. Item
 *       w = block * H + head; CTA c runs c * cta_step + i * item_step, i <
 *       nper: ITEMS consecutive items or a persistent stride.
 * Per item: q, k, v tiles (rows past the length zero-filled) by cp.async,
 * q, k rotated there with ROPE; S = q k^T masked past the length, the row
 * whole in registers, so the softmax is exact in one pass (no running max,
 * no LSE); P from S's accumulator layout straight into O = P v's A operand;
 * O divided by the row sum, staged through the v tile, out in 16-byte rows.
 * The key-chunked path (KCH < BLK or QP > 1; grid and persistent): per
 * pass over BLK / QP query rows, S a chunk of KCH keys at a time with a
 * running row max and sum (O rescaled when the max grows), O += P v of the
 * chunk; O divided by the row sum, staged into the pass's consumed q rows.
 * With KST the shared memory holds two passes' q rows and KST stages of
 * (k, v) chunks, 2 * PROWS * HD * 2 + KST * 2 * KCH * HD * 2 bytes, one
 * ring over all of a CTA's (item, pass, chunk) steps, so that every load
 * but the first overlaps the MMAs (fwd_kring); each pass streams the
 * block's chunks again (from L2) and rotates them again with rope.
 * BLOCKATTN_HELPERS_ONLY compiles only the helpers and blockattn_blocks
 * (blockattn_bwd.cu includes this file).
 */
#include "common.cuh"

#ifndef BLK
#define BLK 64
#endif
#ifndef HD
#define HD 128
#endif
#ifndef ROPE
#define ROPE 0
#endif
#ifndef ROWS_W
#define ROWS_W 16
#endif
#ifndef DSPLIT
#define DSPLIT 1
#endif
#ifndef STAGES
#define STAGES 1
#endif
#ifndef RPF
#define RPF 0
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef PF
#define PF 0
#endif
#ifndef BOUND
#define BOUND 0
#endif
#ifndef KCH
#define KCH 0
#endif
#ifndef QP
#define QP 1
#endif
#ifndef KST
#define KST 0
#endif
/* the key-chunked forward (blockattn_fwd below); with KST, its chunk ring */
#define KBA_CHUNKED ((KCH && KCH < BLK) || QP > 1)
#define KBA_KRING (KBA_CHUNKED && KST > 0)

#ifndef KT_BLOCKATTN_HELPERS
#define KT_BLOCKATTN_HELPERS

/* NVRTC has no <math.h>: -inf by its bits */
#define KBA_NEG_INF __int_as_float(0xff800000)

namespace kba {

constexpr int CH = HD / 8;		/* 16-byte chunks per row of a q/k/v tile */
constexpr int TILE = BLK * HD * 2;	/* bytes of one tile */
constexpr int MI = ROWS_W / 16;		/* m16 tiles per warp */
constexpr int GROUPS = BLK / QP / ROWS_W;	/* row groups (of one pass's rows) */
constexpr int NWARPS = GROUPS * DSPLIT;
constexpr int NT = NWARPS * 32;
constexpr int DW = HD / DSPLIT;		/* head_dim columns of one warp's outputs */
constexpr int NB = BLK / 8;		/* n8 tiles across a row of S */
constexpr int ND = DW / 8;		/* n8 tiles across a warp's output columns */
/* ROPE 2: v is rotated with q and k (the same rows, the same table chunks) */
constexpr bool ROPE_V = ROPE == 2;
/* RPF 2: the table tile in shared memory, TCH 16-byte chunks per row */
constexpr bool RTAB = ROPE && RPF == 2;
constexpr int TCH = HD / 8;
constexpr int TROW = HD * 2 + 16;	/* padded row: row r starts r bank groups on */
constexpr int TTILE = RTAB ? BLK * TROW : 0;

static_assert((BLK / QP) % ROWS_W == 0 && ROWS_W % 16 == 0,
	      "ROWS_W must divide BLK / QP in m16 tiles");
static_assert(BLK % QP == 0, "QP must divide BLK");
static_assert(DW % 16 == 0, "HD / DSPLIT must be a multiple of 16");
static_assert((BLK * CH) % NT == 0, "tile chunks must spread evenly over the threads");
static_assert(!RTAB || STAGES == 1, "RPF 2 keeps one table tile: STAGES 1 only");
static_assert(!PF || STAGES == 1, "PF refills the one stage in place");
/* RPF 6-8 (backward): the rotation's table read while q, k copy, each
 * thread rotating its own chunks with no barrier of its own; in packed
 * bf16x2 (6, 8) or fp32 arithmetic (7); the conjugate-rotation epilogue's
 * table pairs read ahead of dq's stores and held as bf16x2 for dk's (6), or
 * read ahead of each output's stores as RPF 1 does (7, 8). (RPF 3-5, which
 * read the epilogue's pairs in the prologue or held them with an fp32
 * prologue, spilled and are not in the space: docs/families/blockattn.md.) */
constexpr bool RF = ROPE && RPF >= 6;
constexpr bool RPK = ROPE && (RPF == 6 || RPF == 8);
static_assert(RPF <= 2 || (RPF >= 6 && RPF <= 8), "RPF: 0, 1, 2, 6, 7 or 8");
static_assert(!RF || STAGES == 1, "RPF 6-8 read the table of this item: STAGES 1 only");
static_assert(!RF || !PF, "RPF 6-8 and PF: not combined");

/* Byte offset of element (row, col) in a swizzled tile of NCH chunks per row. */
template <int NCH>
KT_DEV int elem_off(int row, int col)
{
	return kt_swz<NCH>(row, col >> 3) + (col & 7) * 2;
}

/* cp.async of one BLK x HD tile of x (T, H, HD) for head h, tokens
 * [t0, t0 + len); rows past len are zero-filled. */
KT_DEV void load_tile(unsigned s, const __nv_bfloat16 *x, int t0, int len, int H, int h, int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;
		bool ok = r < len;
		const __nv_bfloat16 *g = x + ((long long)(t0 + (ok ? r : 0)) * H + h) * HD + c * 8;

		kt_cp_async16(s + kt_swz<CH>(r, c), g, ok);
	}
}

/* (x0, x1) -> (x0 c - x1 s, x0 s + x1 c) on one bf16 pair. */
KT_DEV unsigned rot_pair(unsigned v, float c, float s)
{
	__nv_bfloat162 b = *reinterpret_cast<__nv_bfloat162 *>(&v);
	float x0 = __low2float(b), x1 = __high2float(b);

	return kt_pack_bf16x2(x0 * c - x1 * s, x0 * s + x1 * c);
}

/* The rope table (T, HD): bf16 like every tensor of the family (docs/kernels.md),
 * (cos, sin) interleaved per pair -- 2 HD bytes a token, read once. */
typedef __nv_bfloat16 rtab;

/* A bf16 pair (low half first) widened to fp32: exact, two integer ops. */
KT_DEV float2 bf2_widen(unsigned u)
{
	return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

/* The (cos, sin) pairs of x's 16-byte chunk c (4 pairs) from its table
 * chunk (16 bytes, 8 bf16), widened: a = pairs 0, 1; b = pairs 2, 3. */
KT_DEV void tab_widen(uint4 u, float4 &a, float4 &b)
{
	float2 p0 = bf2_widen(u.x), p1 = bf2_widen(u.y);
	float2 p2 = bf2_widen(u.z), p3 = bf2_widen(u.w);

	a = make_float4(p0.x, p0.y, p1.x, p1.y);
	b = make_float4(p2.x, p2.y, p3.x, p3.y);
}

/* The table chunk (16 bytes: the 4 pairs of x's chunk c) of row t, as
 * stored (read-only path). */
KT_DEV uint4 tab_raw(const rtab *table, long long t, int c)
{
	return __ldg(reinterpret_cast<const uint4 *>(table + t * HD + c * 8));
}

/* tab_widen of the table chunk of row t, chunk c. */
KT_DEV void tab_chunk(const rtab *table, long long t, int c, float4 &a, float4 &b)
{
	tab_widen(tab_raw(table, t, c), a, b);
}

/* The (cos, sin) pair of column col (even) of table row t. */
KT_DEV float2 tab_pair_g(const rtab *table, long long t, int col)
{
	return bf2_widen(__ldg(reinterpret_cast<const unsigned *>(table + t * HD + col)));
}

/* Rotates the first len rows of a tile in place by the table (T, HD)
 * (cos, sin interleaved per pair). Called between two __syncthreads. */
KT_DEV void rope_tile(unsigned char *s, const rtab *table, int t0, int len, int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (r < len) {
			uint4 *p = reinterpret_cast<uint4 *>(s + kt_swz<CH>(r, c));
			float4 a, b;
			uint4 v = *p;

			tab_chunk(table, t0 + r, c, a, b);

			v.x = rot_pair(v.x, a.x, a.y);
			v.y = rot_pair(v.y, a.z, a.w);
			v.z = rot_pair(v.z, b.x, b.y);
			v.w = rot_pair(v.w, b.z, b.w);
			*p = v;
		}
	}
}

KT_DEV void rot_chunk(unsigned char *p, float4 a, float4 b)
{
	uint4 v = *reinterpret_cast<uint4 *>(p);

	v.x = rot_pair(v.x, a.x, a.y);
	v.y = rot_pair(v.y, a.z, a.w);
	v.z = rot_pair(v.z, b.x, b.y);
	v.w = rot_pair(v.w, b.z, b.w);
	*reinterpret_cast<uint4 *>(p) = v;
}

/* rope_tile for the q and k (and with ROPE_V v) tiles together (RPF = 1):
 * each table chunk is read once for all, and the reads of RB chunks are issued before any
 * shared-memory access, so their latencies overlap instead of adding up
 * (rows are clamped into the block so the reads need no branch). */
KT_DEV void rope_qk(unsigned char *sq, unsigned char *sk, unsigned char *sv, const rtab *table,
		    int t0, int len, int tid)
{
	constexpr int IT = BLK * CH / NT, RB = IT < 4 ? IT : 4;

	static_assert(IT % RB == 0, "chunks per thread must split into batches");
#pragma unroll
	for (int i0 = 0; i0 < IT; i0 += RB) {
		float4 a[RB], b[RB];

#pragma unroll
		for (int j = 0; j < RB; j++) {
			int idx = tid + (i0 + j) * NT, r = min(idx / CH, len - 1), c = idx % CH;

			tab_chunk(table, t0 + r, c, a[j], b[j]);
		}
#pragma unroll
		for (int j = 0; j < RB; j++) {
			int idx = tid + (i0 + j) * NT, r = idx / CH, c = idx % CH;

			if (r < len) {
				rot_chunk(sq + kt_swz<CH>(r, c), a[j], b[j]);
				rot_chunk(sk + kt_swz<CH>(r, c), a[j], b[j]);
				if (ROPE_V)
					rot_chunk(sv + kt_swz<CH>(r, c), a[j], b[j]);
			}
		}
	}
}

/* Byte offset of 16-byte chunk c16 of row r of the table tile. Rows are
 * padded by 16 bytes, so the 8 rows an MMA accumulator spans (the
 * epilogue's pair reads: 8 rows x 32 bytes) fall into distinct bank groups
 * and a warp's read takes the minimum two wavefronts; unlike an XOR
 * swizzle, the offset stays additive in the column (fewer registers). */
KT_DEV int tab_off(int r, int c16)
{
	return r * TROW + (c16 << 4);
}

/* cp.async of the table rows [t0, t0 + len) into the tile at s (RPF 2);
 * rows past len are zero-filled (never read). */
KT_DEV void load_table(unsigned s, const rtab *table, int t0, int len, int tid)
{
	static_assert((BLK * TCH) % NT == 0, "table chunks must spread evenly over the threads");
#pragma unroll
	for (int i = 0; i < BLK * TCH / NT; i++) {
		int idx = tid + i * NT, r = idx / TCH, c = idx % TCH;
		bool ok = r < len;

		kt_cp_async16(s + tab_off(r, c), table + (long long)(t0 + (ok ? r : 0)) * HD + c * 8,
			      ok);
	}
}

/* The (cos, sin) pair of column col (even) of row r of the table tile. */
KT_DEV float2 tab_pair(const unsigned char *st, int r, int col)
{
	return bf2_widen(
		*reinterpret_cast<const unsigned *>(st + tab_off(r, col >> 3) + (col & 7) * 2));
}

/* rope_qk from the table tile in shared memory (RPF 2): no global load in
 * the rotation. A chunk of 8 bf16 of q (k) needs table chunk c of its row,
 * 16 bytes: 8 consecutive threads read 128 consecutive bytes. */
KT_DEV void rope_qk_smem(unsigned char *sq, unsigned char *sk, unsigned char *sv,
			 const unsigned char *st, int len, int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (r < len) {
			float4 a, b;

			tab_widen(*reinterpret_cast<const uint4 *>(st + tab_off(r, c)), a, b);
			rot_chunk(sq + kt_swz<CH>(r, c), a, b);
			rot_chunk(sk + kt_swz<CH>(r, c), a, b);
			if (ROPE_V)
				rot_chunk(sv + kt_swz<CH>(r, c), a, b);
		}
	}
}

/* (x0, x1) -> (x0 c - x1 s, x0 s + x1 c) in packed bf16x2 arithmetic
 * (RPF 6, 8): x * (c, c) + swap(x) * (-s, s), one swap, one HMUL2, one
 * HFMA2 per pair instead of an unpack, four FP32 ops and a pack. c and s
 * are the table's bf16; the product swap(x) * (-s, s) is rounded to bf16
 * before the sum: one more rounding of 2^-9 than rot_pair. */
KT_DEV unsigned rot_pair_pk(unsigned v, __nv_bfloat162 cc, __nv_bfloat162 sn)
{
	__nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162 *>(&v);
	__nv_bfloat162 r = __hfma2(x, cc, __hmul2(__lowhigh2highlow(x), sn));

	return *reinterpret_cast<unsigned *>(&r);
}

/* One 16-byte chunk (4 pairs) rotated by its widened table chunk (a, b). */
KT_DEV uint4 rot_chunk_reg(uint4 v, float4 a, float4 b)
{
	if (RPK) {
		v.x = rot_pair_pk(v.x, __floats2bfloat162_rn(a.x, a.x), __floats2bfloat162_rn(-a.y, a.y));
		v.y = rot_pair_pk(v.y, __floats2bfloat162_rn(a.z, a.z), __floats2bfloat162_rn(-a.w, a.w));
		v.z = rot_pair_pk(v.z, __floats2bfloat162_rn(b.x, b.x), __floats2bfloat162_rn(-b.y, b.y));
		v.w = rot_pair_pk(v.w, __floats2bfloat162_rn(b.z, b.z), __floats2bfloat162_rn(-b.w, b.w));
	} else {
		v.x = rot_pair(v.x, a.x, a.y);
		v.y = rot_pair(v.y, a.z, a.w);
		v.z = rot_pair(v.z, b.x, b.y);
		v.w = rot_pair(v.w, b.z, b.w);
	}
	return v;
}

/* RPF 6-8, step 1: the table chunks of the q and k chunks this thread
 * copies by cp.async (load_tile's mapping), read into registers right
 * after those copies are issued, so that their latency overlaps the
 * copies' instead of following it (rows clamped: no branch). */
KT_DEV void rope_tab_load(uint4 (&u)[BLK * CH / NT], const rtab *table, int t0, int len, int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = min(idx / CH, len - 1), c = idx % CH;

		u[i] = tab_raw(table, t0 + r, c);
	}
}

/* RPF 6-8, step 2, after cp.async.wait_group and before any barrier: the
 * thread rotates the q, k chunks it copied itself (a thread sees its own
 * completed copies without a barrier), each table chunk serving q and k.
 * The separate rotation pass's barrier and its global table latency are
 * gone; what is left on the item's path is one shared read-modify-write
 * per chunk. */
KT_DEV void rope_qk_own(unsigned char *sq, unsigned char *sk, unsigned char *sv,
			const uint4 (&u)[BLK * CH / NT], int len, int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (r < len) {
			uint4 *pq = reinterpret_cast<uint4 *>(sq + kt_swz<CH>(r, c));
			uint4 *pk = reinterpret_cast<uint4 *>(sk + kt_swz<CH>(r, c));
			float4 a, b;

			tab_widen(u[i], a, b);
			*pq = rot_chunk_reg(*pq, a, b);
			*pk = rot_chunk_reg(*pk, a, b);
			if (ROPE_V) {
				uint4 *pv = reinterpret_cast<uint4 *>(sv + kt_swz<CH>(r, c));

				*pv = rot_chunk_reg(*pv, a, b);
			}
		}
	}
}

/* Conjugate rotation of an fp32 pair (the gradient of a raw pair). */
KT_DEV void rot_conj(float &y0, float &y1, float c, float s)
{
	float x0 = y0 * c + y1 * s, x1 = y1 * c - y0 * s;

	y0 = x0;
	y1 = x1;
}

/*
 * acc[MI][NB] += A . B^T where A is MI m16 row tiles starting at row a0 of
 * a swizzled tile with ACH chunks per row and B is the first nb rows (then
 * rounded up to 16) of another, both K-contiguous (K = KDIM): S = q k^T and
 * dP = do v^T. Columns past nb are left alone: the softmax masks them.
 */
template <int ACH, int KDIM>
KT_DEV void mma_abt(float (&acc)[MI][NB][4], unsigned sa, int a0, unsigned sb, int nb, int lane)
{
#pragma unroll
	for (int kk = 0; kk < KDIM / 16; kk++) {
		unsigned a[MI][4];

#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			kt_ldmatrix_x4(a[mi], sa + kt_swz<ACH>(a0 + mi * 16 + (lane & 15),
							       kk * 2 + (lane >> 4)));
#pragma unroll
		for (int nj = 0; nj < NB / 2; nj++) {
			unsigned b[4];

			if (nj * 16 >= nb)	/* keys past the block's length */
				break;
			kt_ldmatrix_x4(b, sb + kt_swz<ACH>(nj * 16 + (lane & 7) + ((lane >> 4) << 3),
							   kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				kt_mma_bf16_16816(acc[mi][2 * nj], a[mi], b);
				kt_mma_bf16_16816(acc[mi][2 * nj + 1], a[mi], b + 2);
			}
		}
	}
}

/* The A fragment of k-step kk from an S-layout accumulator: tiles 2kk and
 * 2kk+1 of a row of n8 tiles are exactly one m16 x k16 A operand. */
KT_DEV void a_from_acc(unsigned a[4], const float (&s)[NB][4], int kk)
{
	a[0] = kt_pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
	a[1] = kt_pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
	a[2] = kt_pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
	a[3] = kt_pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/* acc[MI][ND] += P . X[:, d0 : d0 + DW], P from registers (S layout), X a
 * BLK x HD tile read transposed (token = k, head_dim = n): O = P v, dQ = dS k. */
KT_DEV void mma_px(float (&acc)[MI][ND][4], const float (&p)[MI][NB][4], unsigned sx, int d0,
		   int nk, int lane)
{
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++) {
		unsigned a[MI][4];

		if (kk * 16 >= nk)	/* keys past the block's length: P is 0 */
			break;
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			a_from_acc(a[mi], p[mi], kk);
#pragma unroll
		for (int np = 0; np < ND / 2; np++) {
			unsigned b[4];

			kt_ldmatrix_x4_trans(b, sx + kt_swz<CH>(kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7),
						     (d0 >> 3) + np * 2 + (lane >> 4)));
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				kt_mma_bf16_16816(acc[mi][2 * np], a[mi], b);
				kt_mma_bf16_16816(acc[mi][2 * np + 1], a[mi], b + 2);
			}
		}
	}
}

/* 2^x, one MUFU op: subnormal results flush to 0, which a probability
 * that small is to the bf16 P anyway. */
KT_DEV float kba_ex2(float x)
{
	float y;

	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

/* Masks key columns >= len to -inf and turns each row of s into
 * exp(scale (s - max)) (unnormalized), one FFMA and one MUFU an element;
 * inv[mi][half] = 1 / row sum. */
KT_DEV void softmax_rows(float (&s)[MI][NB][4], float (&inv)[MI][2], int len, int lane)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD);

#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float m = KBA_NEG_INF, l = 0.f, mb;

#pragma unroll
			for (int nt = 0; nt < NB; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int col = nt * 8 + 2 * (lane & 3) + e;
					float v = col < len ? s[mi][nt][2 * hf + e] : KBA_NEG_INF;

					s[mi][nt][2 * hf + e] = v;
					m = fmaxf(m, v);
				}
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
			mb = m * sl2;
#pragma unroll
			for (int nt = 0; nt < NB; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float p = kba_ex2(fmaf(s[mi][nt][2 * hf + e], sl2, -mb));

					s[mi][nt][2 * hf + e] = p;
					l += p;
				}
			l += __shfl_xor_sync(0xffffffffu, l, 1);
			l += __shfl_xor_sync(0xffffffffu, l, 2);
			inv[mi][hf] = 1.f / l;
		}
}

/* Writes the first len rows of a swizzled BLK x HD tile to x (T, H, HD),
 * 16 bytes per thread and step. */
KT_DEV void store_tile(__nv_bfloat16 *x, const unsigned char *s, int t0, int len, int H, int h,
		       int tid)
{
#pragma unroll
	for (int i = 0; i < BLK * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (r < len)
			*reinterpret_cast<uint4 *>(x + ((long long)(t0 + r) * H + h) * HD + c * 8) =
				*reinterpret_cast<const uint4 *>(s + kt_swz<CH>(r, c));
	}
}

#if BOUND
/* The items a bound launch really has: the prep's count after the bound's
 * entries (nitems = nbound * H). */
KT_DEV int bound_items(const int2 *blocks, int nitems, int H)
{
	return min(nitems, blocks[nitems / H].x * H);
}
#endif

/* Item i of this CTA, or -1 past the end. */
KT_DEV int item_at(int i, int nitems, int cta_step, int item_step, int nper)
{
	long long w = (long long)blockIdx.x * cta_step + (long long)i * item_step;

	return i < nper && w < nitems ? (int)w : -1;
}

} /* namespace kba */

/* MINB 1 gives ptxas no minimum at all: naming 1 changes its register
 * heuristics (more registers, and slower). */
#if MINB > 1
#define KBA_BOUNDS __launch_bounds__(kba::NT, MINB)
#else
#define KBA_BOUNDS __launch_bounds__(kba::NT)
#endif

/* Exclusive scan of the per-sequence block counts by one CTA of 1024
 * threads, each owning a run of consecutive sequences. */
extern "C" __global__ void __launch_bounds__(1024)
#if BOUND
blockattn_blocks(const int *offsets, int B, int2 *blocks, int nbound)
#else
blockattn_blocks(const int *offsets, int B, int2 *blocks)
#endif
{
	__shared__ int part[1024];
	int tid = threadIdx.x, per = (B + 1023) / 1024;
	int s0 = min(B, tid * per), s1 = min(B, s0 + per), cnt = 0, base;

	for (int s = s0; s < s1; s++)
		cnt += (offsets[s + 1] - offsets[s] + BLK - 1) / BLK;
	part[tid] = cnt;
	__syncthreads();
	for (int step = 1; step < 1024; step *= 2) {
		int add = tid >= step ? part[tid - step] : 0;

		__syncthreads();
		part[tid] += add;
		__syncthreads();
	}
	base = part[tid] - cnt;
#if BOUND
	/* offsets past T (a caller's mistake) cannot write past the bound */
	for (int s = s0; s < s1; s++)
		for (int t = offsets[s]; t < offsets[s + 1] && base < nbound; t += BLK)
			blocks[base++] = make_int2(t, min(BLK, offsets[s + 1] - t));
	if (tid == 1023)
		blocks[nbound] = make_int2(min(part[1023], nbound), 0);
#else
	for (int s = s0; s < s1; s++)
		for (int t = offsets[s]; t < offsets[s + 1]; t += BLK)
			blocks[base++] = make_int2(t, min(BLK, offsets[s + 1] - t));
#endif
}

#endif /* KT_BLOCKATTN_HELPERS */

#ifndef BLOCKATTN_HELPERS_ONLY

/* EPI (prefetch only): O staged through the v tile and written in 16-byte
 * rows (1, as the other variants), or stored from the registers (0), which
 * frees v for the next item right after P.V. */
#ifndef EPI
#define EPI 1
#endif

/* The key-chunked path (KCH < BLK or QP > 1): its own copies of the MMA
 * and softmax helpers, over KC keys from k0 rather than the whole row, and
 * only in its programs (NVRTC emits every namespace constant), so that the
 * one-pass programs keep their code. */
#if KBA_CHUNKED
namespace kba {

constexpr int PROWS = BLK / QP;		/* query rows of one pass */
constexpr int KC = KCH ? KCH : BLK;	/* keys per chunk */
constexpr int NBC = KC / 8;		/* n8 tiles across a chunk of S */

static_assert(BLK % KC == 0 && KC % 16 == 0, "KCH must divide BLK in k16 steps");
static_assert(!PF, "the key-chunked path has no prefetch");
static_assert((PROWS * CH) % NT == 0, "a pass's rows must spread evenly over the threads");

/* acc[MI][NBC] = q rows a0.. (MI m16 tiles) . keys [k0, k0 + KC)^T, those
 * past nb (rounded up to 16) left at 0: the softmax masks them. sk points
 * at key row k0 (a multiple of 8: the swizzle is the same from there). */
KT_DEV void mma_qk_chunk(float (&acc)[MI][NBC][4], unsigned sq, int a0, unsigned sk, int k0, int nb,
			 int lane)
{
#pragma unroll
	for (int kk = 0; kk < HD / 16; kk++) {
		unsigned a[MI][4];

#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			kt_ldmatrix_x4(a[mi], sq + kt_swz<CH>(a0 + mi * 16 + (lane & 15),
							      kk * 2 + (lane >> 4)));
#pragma unroll
		for (int nj = 0; nj < NBC / 2; nj++) {
			unsigned b[4];

			if (k0 + nj * 16 >= nb)
				break;
			kt_ldmatrix_x4(b, sk + kt_swz<CH>(nj * 16 + (lane & 7) + ((lane >> 4) << 3),
							  kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				kt_mma_bf16_16816(acc[mi][2 * nj], a[mi], b);
				kt_mma_bf16_16816(acc[mi][2 * nj + 1], a[mi], b + 2);
			}
		}
	}
}

/* Masks the chunk's key columns >= len to -inf (only the chunk holding
 * len has any), raises the running row max m (raw scores) to the chunk's,
 * rescales the running sum l (this thread's part) and O by
 * exp(scale (old max - new max)) and turns s into exp(scale (s - max)),
 * one FFMA and one MUFU an element. The first chunk starts from m = -inf,
 * l = O = 0 (its rescale is by 0); every chunk run holds key k0 < len, so
 * the new max is finite. */
KT_DEV void softmax_chunk(float (&s)[MI][NBC][4], float (&m)[MI][2], float (&l)[MI][2],
			  float (&acc)[MI][ND][4], int k0, int len, int lane)
{
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD);

	const int lim = len - k0 - 2 * (lane & 3);	/* this thread's columns below it count */

#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float mc = m[mi][hf], ls = 0.f, alpha, mb;

#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					if (nt * 8 + e >= lim)
						s[mi][nt][2 * hf + e] = KBA_NEG_INF;
					mc = fmaxf(mc, s[mi][nt][2 * hf + e]);
				}
			mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 1));
			mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 2));
			alpha = kba_ex2((m[mi][hf] - mc) * sl2);
			m[mi][hf] = mc;
			mb = mc * sl2;
#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float p = kba_ex2(fmaf(s[mi][nt][2 * hf + e], sl2, -mb));

					s[mi][nt][2 * hf + e] = p;
					ls += p;
				}
			l[mi][hf] = l[mi][hf] * alpha + ls;
#pragma unroll
			for (int nt = 0; nt < ND; nt++) {
				acc[mi][nt][2 * hf] *= alpha;
				acc[mi][nt][2 * hf + 1] *= alpha;
			}
		}
}

/* acc[MI][ND] += P . v[k0 : k0 + KC, d0 : d0 + DW], P the chunk in S's
 * accumulator layout (a_from_acc's packing), v read transposed from sv,
 * which points at row k0. */
KT_DEV void mma_pv_chunk(float (&acc)[MI][ND][4], const float (&p)[MI][NBC][4], unsigned sv,
			 int k0, int d0, int nk, int lane)
{
#pragma unroll
	for (int kk = 0; kk < KC / 16; kk++) {
		unsigned a[MI][4];

		if (k0 + kk * 16 >= nk)	/* keys past the block's length: P is 0 */
			break;
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
			a[mi][0] = kt_pack_bf16x2(p[mi][2 * kk][0], p[mi][2 * kk][1]);
			a[mi][1] = kt_pack_bf16x2(p[mi][2 * kk][2], p[mi][2 * kk][3]);
			a[mi][2] = kt_pack_bf16x2(p[mi][2 * kk + 1][0], p[mi][2 * kk + 1][1]);
			a[mi][3] = kt_pack_bf16x2(p[mi][2 * kk + 1][2], p[mi][2 * kk + 1][3]);
		}
#pragma unroll
		for (int np = 0; np < ND / 2; np++) {
			unsigned b[4];

			kt_ldmatrix_x4_trans(b, sv + kt_swz<CH>(kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7),
							    (d0 >> 3) + np * 2 + (lane >> 4)));
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				kt_mma_bf16_16816(acc[mi][2 * np], a[mi], b);
				kt_mma_bf16_16816(acc[mi][2 * np + 1], a[mi], b + 2);
			}
		}
	}
}

/* One chunk of keys [k0, k0 + KC) into a warp's running max m, sum l and
 * O (acc): S = q k_chunk^T for rows a0.., the online softmax, O += P v.
 * sk, sv point at the chunk's key row k0 (a whole number of 8-row
 * swizzle groups). */
KT_DEV void attend_chunk(float (&acc)[MI][ND][4], float (&m)[MI][2], float (&l)[MI][2],
			 unsigned sq, int a0, unsigned sk, unsigned sv, int k0, int d0, int len,
			 int lane)
{
	float s[MI][NBC][4];

#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int nt = 0; nt < NBC; nt++)
			s[mi][nt][0] = s[mi][nt][1] = s[mi][nt][2] = s[mi][nt][3] = 0.f;
	mma_qk_chunk(s, sq, a0, sk, k0, len, lane);
	softmax_chunk(s, m, l, acc, k0, len, lane);
	mma_pv_chunk(acc, s, sv, k0, d0, len, lane);
}

/* One warp's rows [a0, a0 + ROWS_W) of O, unnormalized, over every chunk
 * of keys below len; inv[mi][half] = 1 / row sum. */
KT_DEV void attend_chunked(float (&acc)[MI][ND][4], float (&inv)[MI][2], unsigned sq, unsigned sk,
			   unsigned sv, int a0, int d0, int len, int lane)
{
	float m[MI][2], l[MI][2];

#pragma unroll
	for (int mi = 0; mi < MI; mi++) {
		m[mi][0] = m[mi][1] = KBA_NEG_INF;
		l[mi][0] = l[mi][1] = 0.f;
#pragma unroll
		for (int nt = 0; nt < ND; nt++)
			acc[mi][nt][0] = acc[mi][nt][1] = acc[mi][nt][2] = acc[mi][nt][3] = 0.f;
	}
#pragma unroll
	for (int k0 = 0; k0 < BLK; k0 += KC) {
		if (k0 >= len)
			break;
		attend_chunk(acc, m, l, sq, a0, sk + k0 * CH * 16, sv + k0 * CH * 16, k0, d0, len,
			     lane);
	}
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			float x = l[mi][hf];

			x += __shfl_xor_sync(0xffffffffu, x, 1);
			x += __shfl_xor_sync(0xffffffffu, x, 2);
			inv[mi][hf] = 1.f / x;
		}
}

/* Writes rows [r0, r1) of a swizzled BLK x HD tile to x (T, H, HD), 16
 * bytes per thread and step (store_tile over one pass's rows). */
KT_DEV void store_rows(__nv_bfloat16 *x, const unsigned char *s, int t0, int r0, int r1, int H,
		       int h, int tid)
{
#pragma unroll
	for (int i = 0; i < PROWS * CH / NT; i++) {
		int idx = tid + i * NT, r = r0 + idx / CH, c = idx % CH;

		if (r < r1)
			*reinterpret_cast<uint4 *>(x + ((long long)(t0 + r) * H + h) * HD + c * 8) =
				*reinterpret_cast<const uint4 *>(s + kt_swz<CH>(r, c));
	}
}

#if KBA_KRING
constexpr int KTILE = KC * HD * 2;	/* one chunk of k (or v) */
constexpr int QTILE = PROWS * HD * 2;	/* one pass's q rows (two buffers) */

static_assert(KCH && KCH < BLK, "KST streams chunks of KCH keys");
static_assert(STAGES == 1 && RPF == 0, "KST: STAGES 1 (its own ring), RPF 0 (a chunk rotated as it lands)");
static_assert(KST >= 2 && KST <= 3, "KST: 2 or 3 stages");

/* cp.async of rows [r0, r0 + R) of the block at t0 (head h) of x (T, H,
 * HD) into a swizzled R x HD tile; rows at or past len zero-filled. */
template <int R>
KT_DEV void load_rows(unsigned s, const __nv_bfloat16 *x, int t0, int r0, int len, int H, int h,
		      int tid)
{
#pragma unroll
	for (int i = 0; i < (R * CH + NT - 1) / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;
		bool ok = r0 + r < len;

		if (idx < R * CH)
			kt_cp_async16(s + kt_swz<CH>(r, c),
				      x + ((long long)(t0 + (ok ? r0 + r : 0)) * H + h) * HD + c * 8, ok);
	}
}

/* rope_tile over an R-row tile holding the block's rows [r0, r0 + R):
 * rows below len rotated by the table rows t0 + r0 + r. Called between two
 * __syncthreads. */
template <int R>
KT_DEV void rope_rows(unsigned char *s, const rtab *table, int t0, int r0, int len, int tid)
{
#pragma unroll
	for (int i = 0; i < (R * CH + NT - 1) / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (idx < R * CH && r0 + r < len) {
			float4 a, b;

			tab_chunk(table, t0 + r0 + r, c, a, b);
			rot_chunk(s + kt_swz<CH>(r, c), a, b);
		}
	}
}

/* A position in a CTA's sequence of steps: (item, pass, key chunk), the
 * passes holding rows below the block's length, the chunks keys below it.
 * gp counts the passes from the CTA's first: q buffer gp % 2. */
struct kcursor {
	int i, w, x, y, p, c, gp;
};

KT_DEV void kcur_item(kcursor &u, const int2 *blocks, int nitems, int H, int cta_step,
		      int item_step, int nper)
{
	u.w = item_at(u.i, nitems, cta_step, item_step, nper);
	if (u.w >= 0) {
		int2 b = blocks[u.w / H];

		u.x = b.x;
		u.y = b.y;
	}
}

KT_DEV void kcur_next(kcursor &u, const int2 *blocks, int nitems, int H, int cta_step,
		      int item_step, int nper)
{
	if (++u.c * KC < u.y)
		return;
	u.c = 0;
	u.gp++;
	if (++u.p < QP && u.p * PROWS < u.y)
		return;
	u.p = 0;
	u.i++;
	kcur_item(u, blocks, nitems, H, cta_step, item_step, nper);
}

/* Issues the producer's steps while fewer than lim are in flight and
 * none is two passes ahead of the consumer's pass gp: the (k, v) chunk of
 * step t into stage t % KST and, with a pass's first chunk, its q rows into
 * buffer gp % 2; one commit group a step. */
KT_DEV void issue_steps(kcursor &pu, int &issued, int lim, int gp, const __nv_bfloat16 *q,
			const __nv_bfloat16 *k, const __nv_bfloat16 *v, const int2 *blocks,
			int nitems, int H, int cta_step, int item_step, int nper, unsigned sbase,
			int tid)
{
	while (pu.w >= 0 && issued < lim && pu.gp <= gp + 1) {
		unsigned st = sbase + 2 * QTILE + (issued % KST) * 2 * KTILE;
		int h = pu.w % H;

		if (pu.c == 0)
			load_rows<PROWS>(sbase + (pu.gp & 1) * QTILE, q, pu.x, pu.p * PROWS, pu.y, H, h,
					 tid);
		load_rows<KC>(st, k, pu.x, pu.c * KC, pu.y, H, h, tid);
		load_rows<KC>(st + KTILE, v, pu.x, pu.c * KC, pu.y, H, h, tid);
		kt_cp_async_commit();
		issued++;
		kcur_next(pu, blocks, nitems, H, cta_step, item_step, nper);
	}
}

/* The chunk ring of one CTA over all its steps, items and passes alike:
 * step t's (k, v) chunk goes to stage t % KST, issued KST - 1 steps ahead
 * once every warp is past step t - KST (the one barrier a step has), a
 * pass's first step bringing its q rows into buffer gp % 2 with it -- at
 * most one pass ahead, so the buffer's previous pass (two back, its O
 * staged there and stored) is done. A pass's O is staged into its q rows
 * (each warp its own, once the warps sharing them are past their last
 * S) and stored. Each pass streams the block's chunks again (L2). */
KT_DEV void fwd_kring(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
		      const int2 *blocks, const rtab *table, __nv_bfloat16 *o, int nitems, int H,
		      int cta_step, int item_step, int nper, unsigned char *smem)
{
	const unsigned sbase = kt_smem_u32(smem), sring = sbase + 2 * QTILE;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int r0 = (warp / DSPLIT) * ROWS_W, d0 = (warp % DSPLIT) * DW;
	kcursor u = {0, -1, 0, 0, 0, 0, 0}, pu;	/* the consumer's step, the producer's */
	float acc[MI][ND][4], m[MI][2], l[MI][2];
	int issued = 0;

	kcur_item(u, blocks, nitems, H, cta_step, item_step, nper);
	pu = u;
	issue_steps(pu, issued, KST - 1, u.gp, q, k, v, blocks, nitems, H, cta_step, item_step, nper,
		    sbase, tid);
	for (int s = 0; u.w >= 0; s++) {
		/* step s's group done: issued - s - 1 (at most KST - 2) younger may pend */
		if (KST > 2 && issued - s - 1 >= 1)
			kt_cp_async_wait<1>();
		else
			kt_cp_async_wait<0>();
		__syncthreads();
		/* every warp is past step s - 1: the ring takes steps up to s + KST - 1 */
		issue_steps(pu, issued, s + KST, u.gp, q, k, v, blocks, nitems, H, cta_step, item_step,
			    nper, sbase, tid);

		const int pr0 = u.p * PROWS, k0 = u.c * KC;
		const bool busy = pr0 + r0 < u.y;
		unsigned char *gq = smem + (u.gp & 1) * QTILE;
		const unsigned sq = sbase + (u.gp & 1) * QTILE;
		const unsigned sk = sring + (s % KST) * 2 * KTILE, sv = sk + KTILE;

		if (ROPE) {
			unsigned char *gk = smem + 2 * QTILE + (s % KST) * 2 * KTILE;

			if (u.c == 0)
				rope_rows<PROWS>(gq, table, u.x, pr0, u.y, tid);
			rope_rows<KC>(gk, table, u.x, k0, u.y, tid);
			if (ROPE_V)
				rope_rows<KC>(gk + KTILE, table, u.x, k0, u.y, tid);
			__syncthreads();
		}
		if (u.c == 0)
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				m[mi][0] = m[mi][1] = KBA_NEG_INF;
				l[mi][0] = l[mi][1] = 0.f;
#pragma unroll
				for (int nt = 0; nt < ND; nt++)
					acc[mi][nt][0] = acc[mi][nt][1] = acc[mi][nt][2] =
						acc[mi][nt][3] = 0.f;
			}
		if (busy)
			attend_chunk(acc, m, l, sq, r0, sk, sv, k0, d0, u.y, lane);
		if ((u.c + 1) * KC >= u.y) {
			const int h = u.w % H, rows = min(PROWS, u.y - pr0);

			/* O goes into the warp's own q rows: with DSPLIT its
			 * partner may still be reading them for S */
			if (DSPLIT > 1)
				__syncthreads();

#pragma unroll
			for (int mi = 0; mi < MI && busy; mi++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					float x = l[mi][hf], inv;

					x += __shfl_xor_sync(0xffffffffu, x, 1);
					x += __shfl_xor_sync(0xffffffffu, x, 2);
					inv = 1.f / x;
#pragma unroll
					for (int nt = 0; nt < ND; nt++) {
						int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;
						int col = d0 + nt * 8 + 2 * (lane & 3);

						*reinterpret_cast<unsigned *>(gq + elem_off<CH>(row, col)) =
							kt_pack_bf16x2(acc[mi][nt][2 * hf] * inv,
								       acc[mi][nt][2 * hf + 1] * inv);
					}
				}
			__syncthreads();
			/* the buffer takes the q of the pass after next, issued past
			 * a later step's barrier */
			store_rows(o, gq, u.x + pr0, 0, rows, H, h, tid);
		}
		kcur_next(u, blocks, nitems, H, cta_step, item_step, nper);
	}
	kt_cp_async_wait<0>();
}
#endif /* KBA_KRING */

} /* namespace kba */
#endif /* KBA_CHUNKED */

extern "C" __global__ void KBA_BOUNDS
blockattn_fwd(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
	      const __nv_bfloat16 *__restrict__ v, const int2 *__restrict__ blocks,
	      const __nv_bfloat16 *__restrict__ table, __nv_bfloat16 *__restrict__ o, int nitems, int H,
	      int cta_step, int item_step, int nper)
{
	using namespace kba;
	extern __shared__ __align__(128) unsigned char smem[];
	const unsigned sbase = kt_smem_u32(smem);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int r0 = (warp / DSPLIT) * ROWS_W, d0 = (warp % DSPLIT) * DW;
	int tblk = -1;	/* RPF 2: the block whose table tile is in shared memory */

#if BOUND
	nitems = bound_items(blocks, nitems, H);
#endif
#if KBA_KRING
	(void)sbase, (void)tblk, (void)r0, (void)d0;
	fwd_kring(q, k, v, blocks, table, o, nitems, H, cta_step, item_step, nper, smem);
#else
	/* the ring: item j's tiles go to stage j % STAGES; PF: item 0 */
#pragma unroll
	for (int j = 0; j < (PF ? 1 : STAGES - 1); j++) {
		int w = item_at(j, nitems, cta_step, item_step, nper);

		if (w >= 0) {
			int2 b = blocks[w / H];
			unsigned st = sbase + j * 3 * TILE;

			load_tile(st, q, b.x, b.y, H, w % H, tid);
			load_tile(st + TILE, k, b.x, b.y, H, w % H, tid);
			load_tile(st + 2 * TILE, v, b.x, b.y, H, w % H, tid);
			if (PF && RTAB) {
				load_table(sbase + 3 * TILE, table, b.x, b.y, tid);
				tblk = w / H;
			}
		}
		kt_cp_async_commit();
	}
	for (int i = 0;; i++) {
		int w = item_at(i, nitems, cta_step, item_step, nper);
		int wn = item_at(i + (PF ? 1 : STAGES - 1), nitems, cta_step, item_step, nper);
		int stage = i % STAGES;

		if (w < 0)
			break;
		/* PF: the next item's block, read early (its loads come later) */
		const int2 bn = PF && wn >= 0 ? blocks[wn / H] : make_int2(0, 0);

		if (!PF && wn >= 0) {
			int2 b = blocks[wn / H];
			unsigned st = sbase + ((i + STAGES - 1) % STAGES) * 3 * TILE;

			load_tile(st, q, b.x, b.y, H, wn % H, tid);
			load_tile(st + TILE, k, b.x, b.y, H, wn % H, tid);
			load_tile(st + 2 * TILE, v, b.x, b.y, H, wn % H, tid);
			/* STAGES 1: the previous item is done with the tile */
			if (RTAB && wn / H != tblk) {
				load_table(sbase + STAGES * 3 * TILE, table, b.x, b.y, tid);
				tblk = wn / H;
			}
		}
		if (!PF)
			kt_cp_async_commit();
		kt_cp_async_wait<PF ? 0 : STAGES - 1>();
		__syncthreads();

		const int2 b = blocks[w / H];
		const int h = w % H;
		const unsigned sq = sbase + stage * 3 * TILE, sk = sq + TILE, sv = sq + 2 * TILE;
		unsigned char *gq = smem + stage * 3 * TILE;

		if (ROPE) {
			if (RTAB) {
				rope_qk_smem(gq, gq + TILE, gq + 2 * TILE, smem + STAGES * 3 * TILE, b.y,
					     tid);
			} else if (RPF) {
				rope_qk(gq, gq + TILE, gq + 2 * TILE, table, b.x, b.y, tid);
			} else {
				rope_tile(gq, table, b.x, b.y, tid);
				rope_tile(gq + TILE, table, b.x, b.y, tid);
				if (ROPE_V)
					rope_tile(gq + 2 * TILE, table, b.x, b.y, tid);
			}
			__syncthreads();
		}

#if KBA_CHUNKED
		/* per pass: every warp's rows of O over the key chunks, staged
		 * into the pass's q rows (every warp is done with them) and
		 * stored; the next pass reads other q rows */
#pragma unroll 1
		for (int p = 0; p < QP; p++) {
			const int ra = p * PROWS + r0;
			const bool busy = ra < b.y;
			float acc[MI][ND][4], inv[MI][2];

			if (busy)
				attend_chunked(acc, inv, sq, sk, sv, ra, d0, b.y, lane);
			__syncthreads();
#pragma unroll
			for (int mi = 0; mi < MI && busy; mi++)
#pragma unroll
				for (int nt = 0; nt < ND; nt++)
#pragma unroll
					for (int hf = 0; hf < 2; hf++) {
						int row = ra + mi * 16 + (lane >> 2) + 8 * hf;
						int col = d0 + nt * 8 + 2 * (lane & 3);

						*reinterpret_cast<unsigned *>(gq + elem_off<CH>(row, col)) =
							kt_pack_bf16x2(acc[mi][nt][2 * hf] * inv[mi][hf],
								       acc[mi][nt][2 * hf + 1] * inv[mi][hf]);
					}
			__syncthreads();
			store_rows(o, gq, b.x, p * PROWS, min(b.y, (p + 1) * PROWS), H, h, tid);
		}
		/* the next iteration's loads refill this stage */
		__syncthreads();
#else
		float s[MI][NB][4], acc[MI][ND][4], inv[MI][2];

#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int nt = 0; nt < NB; nt++)
				s[mi][nt][0] = s[mi][nt][1] = s[mi][nt][2] = s[mi][nt][3] = 0.f;
#pragma unroll
			for (int nt = 0; nt < ND; nt++)
				acc[mi][nt][0] = acc[mi][nt][1] = acc[mi][nt][2] = acc[mi][nt][3] = 0.f;
		}
		/* a warp whose rows all lie past the length has nothing to do but
		 * keep to the barriers: its rows are never stored */
		const bool busy = r0 < b.y;

		if (busy)
			mma_abt<CH, HD>(s, sq, r0, sk, b.y, lane);
		if (PF) {
			/* every warp is done with q, k (and, in the forward, the
			 * table): the next item's q, k land there while this one's
			 * softmax, P.V and output run */
			__syncthreads();
			if (wn >= 0) {
				load_tile(sq, q, bn.x, bn.y, H, wn % H, tid);
				load_tile(sk, k, bn.x, bn.y, H, wn % H, tid);
				if (RTAB && wn / H != tblk) {
					load_table(sbase + 3 * TILE, table, bn.x, bn.y, tid);
					tblk = wn / H;
				}
			}
			kt_cp_async_commit();
		}
		if (busy) {
			softmax_rows(s, inv, b.y, lane);
			mma_px(acc, s, sv, d0, b.y, lane);
		}
		if (PF && !EPI) {
			/* EPI 0: O leaves from the registers, so v is free as soon
			 * as every warp is done with P.V: the next v goes now */
			__syncthreads();
			if (wn >= 0)
				load_tile(sv, v, bn.x, bn.y, H, wn % H, tid);
			kt_cp_async_commit();
#pragma unroll
			for (int mi = 0; mi < MI && busy; mi++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;

					if (row >= b.y)
						continue;
#pragma unroll
					for (int nt = 0; nt < ND; nt++) {
						int col = d0 + nt * 8 + 2 * (lane & 3);

						*reinterpret_cast<unsigned *>(
							o + ((long long)(b.x + row) * H + h) * HD + col) =
							kt_pack_bf16x2(acc[mi][nt][2 * hf] * inv[mi][hf],
								       acc[mi][nt][2 * hf + 1] * inv[mi][hf]);
					}
				}
			continue;
		}
		/* every warp is done with v: stage O in its place */
		__syncthreads();
#pragma unroll
		for (int mi = 0; mi < MI && busy; mi++)
#pragma unroll
			for (int nt = 0; nt < ND; nt++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;
					int col = d0 + nt * 8 + 2 * (lane & 3);

					*reinterpret_cast<unsigned *>(gq + 2 * TILE + elem_off<CH>(row, col)) =
						kt_pack_bf16x2(acc[mi][nt][2 * hf] * inv[mi][hf],
							       acc[mi][nt][2 * hf + 1] * inv[mi][hf]);
				}
		__syncthreads();
		store_tile(o, gq + 2 * TILE, b.x, b.y, H, h, tid);
		/* the next iteration's loads refill this stage */
		__syncthreads();
		if (PF) {
			/* PF: O has left the v tile; the next item's v */
			if (wn >= 0)
				load_tile(sv, v, bn.x, bn.y, H, wn % H, tid);
			kt_cp_async_commit();
		}
#endif
	}
	kt_cp_async_wait<0>();
#endif /* KBA_KRING */
}

#endif /* BLOCKATTN_HELPERS_ONLY */
