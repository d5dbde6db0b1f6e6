/*
 * blockattn_bwd.cu -- jagged block-diagonal attention, backward (sm_80+,
 * mma.sync m16n8k16 bf16, fp32 accumulation). Parameters and work order as
 * in blockattn_fwd.cu, whose helpers this file includes.
 *
 *   blockattn_bwd(q, k, v, do, blocks, table, dq, dk, dv, nitems, H,
 *                 cta_step, item_step, nper)
 *       block (BLK / ROWS_W) * DSPLIT * 32, dynamic smem
 *       STAGES * 4 * BLK * HD * 2 + (BLK <= HD ? 1 : 2) * BLK * BLK * 2
 *       (+ BLK * (HD * 2 + 16) with RPF 2: the table tile, last).
 *
 * Per item, with q, k, v, do tiles in shared memory (q, k rotated there
 * with ROPE):
 *   phase 1, warps over query rows: P recomputed exactly from q k^T (the
 *     whole row in registers; no LSE read), dP = do v^T, Di = rowsum(P dP)
 *     inline, dS = P (dP - Di) / sqrt(d); P and dS go to shared memory as
 *     bf16; dQ = dS k from registers, conjugate-rotated with ROPE, stored.
 *   phase 2, warps over key rows: dV = P^T do and dK = dS^T q (both read
 *     transposed from shared memory), dK conjugate-rotated with ROPE.
 * EPI 0 stores the outputs from the accumulators (bf16 pairs); 1 stages
 * them in dead shared tiles for 16-byte rows (three more barriers). RPF 2
 * reads the table tile for both rotations (the same tokens: the attention
 * is block-diagonal); RPF 6-8 (STAGES 1) read a thread's table chunks while
 * its q, k copies fly and rotate its own chunks without a barrier (6, 8:
 * packed bf16x2), the conjugate rotation's pairs read ahead of dq's stores
 * and held for dk's (6) or ahead of each output's (7, 8).
 * Blocks are independent: every output element is written once, by one
 * thread, with no atomics and no second pass. Rows past the block's length
 * have zero q/do (zero-filled loads) and P forced to 0, so they add nothing.
 */
#ifndef EPI
#define EPI 0
#endif

#define BLOCKATTN_HELPERS_ONLY
#include "blockattn_fwd.cu"
#undef BLOCKATTN_HELPERS_ONLY

namespace kba {

/* How the conjugate rotation of dq, dk gets its table pairs (put_acc's
 * CTM): RPF 6 reads dq's per row ahead of its stores, as RPF 1, and keeps
 * them as bf16x2 (2) for dk (1); RPF 1, 7, 8 read them per row ahead of
 * each output's stores (nothing held: fewest registers). */
constexpr bool EPRE = ROPE && (RPF == 1 || RPF == 7 || RPF == 8);
constexpr int DQM = RF && !EPRE ? 2 : 0;
constexpr int DKM = RF && !EPRE ? 1 : 0;
constexpr int PCH = BLK / 8;		/* chunks per row of the P and dS tiles */
constexpr int PTILE = BLK * BLK * 2;
/* P only feeds dV = P^T do in phase 2 and v is dead once dP = do v^T is
 * done: when P fits in the v tile it goes there, which is what brings
 * BLK = HD = 128 under sm_80's 163 KiB (4 tiles + dS = 160 KiB). */
constexpr bool P_IN_V = PTILE <= TILE;

/* acc[MI][ND] += X^T . Y[:, d0 : d0 + DW] for key rows j0.. of X (a BLK x
 * BLK tile [query][key], read transposed as the A operand) and Y a BLK x HD
 * tile [query][head_dim] read transposed as B: dV = P^T do, dK = dS^T q. */
KT_DEV void mma_xty(float (&acc)[MI][ND][4], unsigned sx, int j0, unsigned sy, int d0, int len,
		    int lane)
{
#pragma unroll
	for (int kk = 0; kk < BLK / 16; kk++) {
		unsigned a[MI][4];

		if (kk * 16 >= len)	/* query rows past the length: P, dS are 0 */
			break;
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			kt_ldmatrix_x4_trans(a[mi], sx + kt_swz<PCH>(kk * 16 + ((lane >> 4) & 1) * 8 + (lane & 7),
							  ((j0 + mi * 16) >> 3) + ((lane >> 3) & 1)));
#pragma unroll
		for (int np = 0; np < ND / 2; np++) {
			unsigned b[4];

			kt_ldmatrix_x4_trans(b, sy + kt_swz<CH>(kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7),
						     (d0 >> 3) + np * 2 + (lane >> 4)));
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				kt_mma_bf16_16816(acc[mi][2 * np], a[mi], b);
				kt_mma_bf16_16816(acc[mi][2 * np + 1], a[mi], b + 2);
			}
		}
	}
}

/* RPF 6: dq's (cos, sin) pairs, kept as the table's bf16x2 for dk (the
 * same rows: dq's query rows are dk's key rows): half the registers of
 * fp32, and exact (the pair came from bf16). */
KT_DEV unsigned epi_tab_pack1(float2 f)
{
	return kt_pack_bf16x2(f.x, f.y);
}

/* (cos, sin) of a pair from epi_tab_pack1. */
KT_DEV float2 epi_tab_pair(unsigned v)
{
	return bf2_widen(v);
}

/* Writes an output tile of one warp (rows r0.., columns d0..),
 * conjugate-rotated by the table when ROPE and ROT (pairs never straddle a
 * thread: a thread holds columns 2t, 2t+1 of each n8 tile): to x (T, H, HD)
 * from registers (STAGED false, EPI 0), or into a swizzled BLK x HD shared
 * tile for store_tile to write out in 16-byte rows (STAGED true, EPI 1). */
template <bool ROT, int CTM, bool STAGED>
KT_DEV void put_acc(__nv_bfloat16 *x, unsigned char *tile, float (&acc)[MI][ND][4],
		    const rtab *table, const unsigned char *stab, unsigned (&ct)[MI][2][ND],
		    int r0, int d0, int t0, int len, int H, int h, int lane)
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int hf = 0; hf < 2; hf++) {
			int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;
			float2 pre[ND];

			/* RPF 1, 7, 8 and CTM 2: the row's table pairs read ahead, row clamped */
			if (ROPE && ROT && (EPRE || CTM == 2))
#pragma unroll
				for (int nt = 0; nt < ND; nt++)
					pre[nt] = tab_pair_g(table, t0 + min(row, len - 1),
							     d0 + nt * 8 + 2 * (lane & 3));
			if (row >= len)
				continue;
#pragma unroll
			for (int nt = 0; nt < ND; nt++) {
				int col = d0 + nt * 8 + 2 * (lane & 3);
				float y0 = acc[mi][nt][2 * hf], y1 = acc[mi][nt][2 * hf + 1];

				if (ROPE && ROT) {
					float2 cs = CTM == 1 ? epi_tab_pair(ct[mi][hf][nt])
						    : RTAB ? tab_pair(stab, row, col)
						    : EPRE || CTM == 2 ? pre[nt]
							       : tab_pair_g(table, t0 + row, col);

					if (CTM == 2)	/* kept for dk: the same rows */
						ct[mi][hf][nt] = epi_tab_pack1(cs);
					rot_conj(y0, y1, cs.x, cs.y);
				}
				if (STAGED)
					*reinterpret_cast<unsigned *>(tile + elem_off<CH>(row, col)) =
						kt_pack_bf16x2(y0, y1);
				else
					*reinterpret_cast<unsigned *>(
						x + ((long long)(t0 + row) * H + h) * HD + col) =
						kt_pack_bf16x2(y0, y1);
			}
		}
}

KT_DEV void load_item(unsigned st, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
		      const __nv_bfloat16 *v, const __nv_bfloat16 *dout, int2 b, int H, int h,
		      int tid)
{
	load_tile(st, q, b.x, b.y, H, h, tid);
	load_tile(st + TILE, k, b.x, b.y, H, h, tid);
	load_tile(st + 2 * TILE, v, b.x, b.y, H, h, tid);
	load_tile(st + 3 * TILE, dout, b.x, b.y, H, h, tid);
}

} /* namespace kba */

/* blockattn_ws.cu takes the helpers above without this kernel; the
 * chunked variant (KCH set) has kernels of its own, below */
#if !defined(BLOCKATTN_BWD_HELPERS_ONLY) && !KCH
extern "C" __global__ void KBA_BOUNDS
blockattn_bwd(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
	      const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
	      const int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
	      __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
	      __nv_bfloat16 *__restrict__ dv, int nitems, int H, int cta_step, int item_step,
	      int nper)
{
	using namespace kba;
	extern __shared__ __align__(128) unsigned char smem[];
	const unsigned sbase = kt_smem_u32(smem);
	const unsigned sds = sbase + STAGES * 4 * TILE;
	unsigned char *gds = smem + STAGES * 4 * TILE;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int r0 = (warp / DSPLIT) * ROWS_W, d0 = (warp % DSPLIT) * DW;
	const bool writer = warp % DSPLIT == 0;	/* one warp of a row group stores P, dS */
	const float scale = 1.f / sqrtf((float)HD);
	/* RPF 2: the table tile, after P and dS, and the block it holds */
	const unsigned stab_u = sds + (P_IN_V ? 1 : 2) * PTILE;
	const unsigned char *stab = gds + (P_IN_V ? 1 : 2) * PTILE;
	int tblk = -1;
	/* RPF 6: dq's table pairs, held as bf16x2 for dk */
	unsigned ct[MI][2][ND];

#if BOUND
	nitems = bound_items(blocks, nitems, H);
#endif

#pragma unroll
	for (int j = 0; j < STAGES - 1; j++) {
		int w = item_at(j, nitems, cta_step, item_step, nper);

		if (w >= 0)
			load_item(sbase + j * 4 * TILE, q, k, v, dout, blocks[w / H], H, w % H, tid);
		kt_cp_async_commit();
	}
	for (int i = 0;; i++) {
		int w = item_at(i, nitems, cta_step, item_step, nper);
		int wn = item_at(i + STAGES - 1, nitems, cta_step, item_step, nper);

		if (w < 0)
			break;
		if (wn >= 0) {
			int2 bn = blocks[wn / H];
			unsigned st = sbase + ((i + STAGES - 1) % STAGES) * 4 * TILE;

			load_item(st, q, k, v, dout, bn, H, wn % H, tid);
			/* STAGES 1: the previous item is done with the tile */
			if (RTAB && wn / H != tblk) {
				load_table(stab_u, table, bn.x, bn.y, tid);
				tblk = wn / H;
			}
		}
		kt_cp_async_commit();
		if (RF) {
			/* STAGES 1: this item (w = wn). The table while q, k, v,
			 * do copy; each thread rotates its own chunks of q, k once
			 * they have landed */
			const int2 bw = blocks[w / H];
			uint4 tu[BLK * CH / NT];

			rope_tab_load(tu, table, bw.x, bw.y, tid);
			kt_cp_async_wait<0>();
			rope_qk_own(smem, smem + TILE, smem + 2 * TILE, tu, bw.y, tid);
		} else {
			kt_cp_async_wait<STAGES - 1>();
		}
		__syncthreads();

		const int2 b = blocks[w / H];
		const int h = w % H, len = b.y;
		const unsigned sq = sbase + (i % STAGES) * 4 * TILE, sk = sq + TILE, sv = sq + 2 * TILE,
			       sdo = sq + 3 * TILE;
		unsigned char *gq = smem + (i % STAGES) * 4 * TILE;
		const unsigned sp = P_IN_V ? sv : sds + PTILE;
		unsigned char *gp = P_IN_V ? gq + 2 * TILE : gds + PTILE;

		if (ROPE && !RF) {
			if (RTAB) {
				rope_qk_smem(gq, gq + TILE, gq + 2 * TILE, stab, len, tid);
			} else if (RPF) {
				rope_qk(gq, gq + TILE, gq + 2 * TILE, table, b.x, len, tid);
			} else {
				rope_tile(gq, table, b.x, len, tid);
				rope_tile(gq + TILE, table, b.x, len, tid);
				if (ROPE_V)
					rope_tile(gq + 2 * TILE, table, b.x, len, tid);
			}
			__syncthreads();
		}

		/* ---- phase 1: query rows r0.. ----
		 * A warp whose rows all lie past the length skips the work but
		 * not the barriers; phase 2 never reads its rows of P and dS
		 * (it stops at the first 16-row step past the length). */
		float s[MI][NB][4], dp[MI][NB][4], inv[MI][2], acc[MI][ND][4];

		if (r0 < len) {
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int nt = 0; nt < NB; nt++)
#pragma unroll
					for (int e = 0; e < 4; e++)
						s[mi][nt][e] = dp[mi][nt][e] = 0.f;
			mma_abt<CH, HD>(s, sq, r0, sk, len, lane);
			mma_abt<CH, HD>(dp, sdo, r0, sv, len, lane);
		}
		if (P_IN_V)	/* every warp is done reading v */
			__syncthreads();
		if (r0 < len) {
			softmax_rows(s, inv, len, lane);
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					int row = r0 + mi * 16 + (lane >> 2) + 8 * hf;
					float norm = row < len ? inv[mi][hf] : 0.f, di = 0.f;

#pragma unroll
					for (int nt = 0; nt < NB; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							float p = s[mi][nt][2 * hf + e] * norm;

							s[mi][nt][2 * hf + e] = p;
							di += p * dp[mi][nt][2 * hf + e];
						}
					di += __shfl_xor_sync(0xffffffffu, di, 1);
					di += __shfl_xor_sync(0xffffffffu, di, 2);
#pragma unroll
					for (int nt = 0; nt < NB; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							float p = s[mi][nt][2 * hf + e];

							dp[mi][nt][2 * hf + e] =
								p * (dp[mi][nt][2 * hf + e] - di) * scale;
						}
					if (writer)
#pragma unroll
						for (int nt = 0; nt < NB; nt++) {
							int col = nt * 8 + 2 * (lane & 3);

							*reinterpret_cast<unsigned *>(gp + elem_off<PCH>(row, col)) =
								kt_pack_bf16x2(s[mi][nt][2 * hf],
									       s[mi][nt][2 * hf + 1]);
							*reinterpret_cast<unsigned *>(gds + elem_off<PCH>(row, col)) =
								kt_pack_bf16x2(dp[mi][nt][2 * hf],
									       dp[mi][nt][2 * hf + 1]);
						}
				}
			kt_zero_frags(acc);
			mma_px(acc, dp, sk, d0, len, lane);
			if (!EPI)
				put_acc<true, DQM, false>(dq, nullptr, acc, table, stab, ct, r0, d0, b.x,
							  len, H, h, lane);
		}
		__syncthreads();
		/* EPI: outputs staged in tiles that are dead by then -- dQ in k's
		 * (phase 2 reads P, do, dS, q only), dV in do's, dK in q's -- and
		 * written out in 16-byte rows at the end */
		if (EPI && r0 < len)
			put_acc<true, DQM, true>(nullptr, gq + TILE, acc, table, stab, ct, r0, d0,
						 b.x, len, H, h, lane);

		/* ---- phase 2: key rows r0.. ---- */
		if (r0 < len) {
			kt_zero_frags(acc);
			mma_xty(acc, sp, r0, sdo, d0, len, lane);
			if (!EPI)
				put_acc<ROPE_V, DKM, false>(dv, nullptr, acc, table, stab, ct, r0, d0,
							    b.x, len, H, h, lane);
		}
		if (EPI) {
			__syncthreads();	/* every warp is done reading do */
			if (r0 < len)
				put_acc<ROPE_V, DKM, true>(nullptr, gq + 3 * TILE, acc, table, stab, ct,
							   r0, d0, b.x, len, H, h, lane);
		}
		if (r0 < len) {
			kt_zero_frags(acc);
			mma_xty(acc, sds, r0, sq, d0, len, lane);
			if (!EPI)
				put_acc<true, DKM, false>(dk, nullptr, acc, table, stab, ct, r0, d0, b.x,
							  len, H, h, lane);
		}
		if (EPI) {
			__syncthreads();	/* every warp is done reading q */
			if (r0 < len)
				put_acc<true, DKM, true>(nullptr, gq, acc, table, stab, ct, r0, d0, b.x,
							 len, H, h, lane);
			__syncthreads();
			store_tile(dq, gq + TILE, b.x, len, H, h, tid);
			store_tile(dv, gq + 3 * TILE, b.x, len, H, h, tid);
			store_tile(dk, gq, b.x, len, H, h, tid);
		}
		/* the next iteration's loads refill this stage; P, dS are rewritten */
		__syncthreads();
	}
	kt_cp_async_wait<0>();
}
#endif

/*
 * The chunked variant (KCH set; block 256): no tile of the whole block, so
 * two kernels, each CTA one pass of PR = BLK / QP rows of one (block, head)
 * -- grid nitems * QP, passes fastest, so a block's passes run together and
 * share its tiles in L2 -- streaming the other side of the block through a
 * ring of STAGES slots of KCH rows (cp.async). The row statistics the
 * backward needs and has no input for are recomputed by the first kernel
 * and handed to the second through the scratch buffer `blocks`, past its
 * block list: stats[t * H + h] = (log2-domain LSE of row t, Di of row t),
 * fp32, from entry stats_at of `blocks` on.
 *
 *   blockattn_bwd_dq(q, k, v, do, blocks, table, dq, dk, dv, nitems, H, stats_at)
 *       block PR / 16 warps, dynamic smem 2 * PR * HD * 2 + STAGES * 2 * KCH * HD * 2.
 *       The pass's q, do rows stay; the key chunks (k, v) come twice: a
 *       first sweep keeps a running row max, sum and Di = sum_j P_ij dP_ij
 *       (all three rescaled as the forward rescales O), then writes the
 *       statistics; a second recomputes S and dP, P = exp(S - LSE),
 *       dS = P (dP - Di) / sqrt(d), dQ += dS k; dq stored (conjugate-rotated
 *       with ROPE).
 *   blockattn_bwd_dkv(same arguments)
 *       the same block, smem + KCH * 8 (the chunk's statistics). The pass's
 *       k, v rows stay; query chunks (q, do) stream once: S^T = k q^T,
 *       P^T = exp(S^T - LSE), dV += P^T do, dP^T = v do^T,
 *       dS^T = P^T (dP^T - Di) / sqrt(d), dK += dS^T q, P^T and dS^T going
 *       from the accumulators straight into the A operand; dk, dv stored
 *       (dk conjugate-rotated with ROPE, dv with ROPE 2).
 * Every output row is written once, by one thread, no atomics: the result
 * does not depend on the schedule. Rows past the block's length are
 * zero-filled; key columns past it get P = 0, and the statistics of query
 * rows past it are read as 0, so nothing past the length adds in.
 * Rotation: each thread rotates the 16-byte chunks it copied itself, right
 * after its cp.async wait and before the barrier that publishes them (the
 * table chunks read before the wait, so their latency overlaps it).
 */
/* BLOCKATTN_BWD_CHUNKED_HELPERS (blockattn_ws.cu's backward at BLK 256):
 * these helpers even where the rest is helpers only; that program has
 * kernels of its own. */
#if KCH && (!defined(BLOCKATTN_BWD_HELPERS_ONLY) || defined(BLOCKATTN_BWD_CHUNKED_HELPERS))
namespace kba {

constexpr int PR = BLK / QP;		/* rows of one pass */
constexpr int KC = KCH;			/* rows of one streamed chunk */
constexpr int NBC = KC / 8;		/* n8 tiles across a chunk */
constexpr int PTILE_R = PR * HD * 2;	/* bytes of a pass tile */
constexpr int CTILE = KC * HD * 2;	/* bytes of a chunk tile */
constexpr int PIT = PR * CH / NT;	/* a thread's 16-byte chunks of a pass tile */
constexpr int CIT = KC * CH / NT;	/* ... of a chunk tile */

static_assert(ROWS_W == 16 && DSPLIT == 1, "the chunked backward: one m16 row tile a warp, no split");
static_assert(BLK % KC == 0 && KC % 16 == 0, "KCH must divide BLK in k16 steps");
static_assert(PIT * NT == PR * CH && CIT * NT == KC * CH && CIT >= 1,
	      "tiles must spread evenly over the threads");
static_assert(NT >= KC, "one thread per row of a chunk's statistics");
static_assert(STAGES >= 2, "the ring needs a slot to fill while one is read");

/* cp.async of rows [r0, r0 + ROWS) of block rows into a swizzled ROWS x HD
 * tile, rows at or past len zero-filled. */
template <int ROWS>
KT_DEV void load_rows(unsigned s, const __nv_bfloat16 *x, int t0, int r0, int len, int H, int h,
		      int tid)
{
#pragma unroll
	for (int i = 0; i < ROWS * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;
		bool ok = r0 + r < len;
		const __nv_bfloat16 *g = x + ((long long)(t0 + (ok ? r0 + r : 0)) * H + h) * HD + c * 8;

		kt_cp_async16(s + kt_swz<CH>(r, c), g, ok);
	}
}

/* The table chunks of the chunks load_rows<ROWS> gives this thread (rows
 * clamped into the block: no branch). */
template <int ROWS>
KT_DEV void tab_rows(uint4 (&u)[ROWS * CH / NT], const rtab *table, int t0, int r0, int len,
		     int tid)
{
#pragma unroll
	for (int i = 0; i < ROWS * CH / NT; i++) {
		int idx = tid + i * NT, r = min(r0 + idx / CH, len - 1), c = idx % CH;

		u[i] = tab_raw(table, t0 + r, c);
	}
}

/* Rotates this thread's own chunks (load_rows's mapping) of tile a and,
 * with B, of tile b: the same rows, the same table chunks. */
template <int ROWS, bool B>
KT_DEV void rot_rows(unsigned char *a, unsigned char *b, const uint4 (&u)[ROWS * CH / NT], int r0,
		     int len, int tid)
{
#pragma unroll
	for (int i = 0; i < ROWS * CH / NT; i++) {
		int idx = tid + i * NT, r = idx / CH, c = idx % CH;

		if (r0 + r < len) {
			float4 x, y;

			tab_widen(u[i], x, y);
			rot_chunk(a + kt_swz<CH>(r, c), x, y);
			if (B)
				rot_chunk(b + kt_swz<CH>(r, c), x, y);
		}
	}
}

/* acc[NBC] += rows a0.. (one m16 tile) of tile sa . chunk sb^T (KC rows,
 * both HD-contiguous); the chunk's rows from k0 on past len (by 16) are
 * skipped, their columns left as they were. */
KT_DEV void mma_rc(float (&acc)[NBC][4], unsigned sa, int a0, unsigned sb, int k0, int len, int lane)
{
#pragma unroll
	for (int kk = 0; kk < HD / 16; kk++) {
		unsigned a[4];

		kt_ldmatrix_x4(a, sa + kt_swz<CH>(a0 + (lane & 15), kk * 2 + (lane >> 4)));
#pragma unroll
		for (int nj = 0; nj < NBC / 2; nj++) {
			unsigned b[4];

			if (k0 + nj * 16 >= len)
				break;
			kt_ldmatrix_x4(b, sb + kt_swz<CH>(nj * 16 + (lane & 7) + ((lane >> 4) << 3),
							  kk * 2 + ((lane >> 3) & 1)));
			kt_mma_bf16_16816(acc[2 * nj], a, b);
			kt_mma_bf16_16816(acc[2 * nj + 1], a, b + 2);
		}
	}
}

/* X (16 x KC, the accumulator layout of mma_rc) as bf16 A operands, one
 * per k16 step (the forward's a_from_acc). */
KT_DEV void pack_a(unsigned (&a)[KC / 16][4], const float (&x)[NBC][4])
{
#pragma unroll
	for (int kk = 0; kk < KC / 16; kk++) {
		a[kk][0] = kt_pack_bf16x2(x[2 * kk][0], x[2 * kk][1]);
		a[kk][1] = kt_pack_bf16x2(x[2 * kk][2], x[2 * kk][3]);
		a[kk][2] = kt_pack_bf16x2(x[2 * kk + 1][0], x[2 * kk + 1][1]);
		a[kk][3] = kt_pack_bf16x2(x[2 * kk + 1][2], x[2 * kk + 1][3]);
	}
}

/* Element (nt, e) of the X pack_a packed (exact: both are that bf16). */
KT_DEV float packed_at(const unsigned (&a)[KC / 16][4], int nt, int e)
{
	float2 f = bf2_widen(a[nt >> 1][2 * (nt & 1) + (e >> 1)]);

	return e & 1 ? f.y : f.x;
}

/* acc[ND] += X . Y, X (16 x KC) packed by pack_a, Y the chunk sy (KC x HD)
 * read transposed; k16 steps from k0 on past len skipped (X is 0 there). */
KT_DEV void mma_ac(float (&acc)[ND][4], const unsigned (&xa)[KC / 16][4], unsigned sy, int k0,
		   int len, int lane)
{
#pragma unroll
	for (int kk = 0; kk < KC / 16; kk++) {
		const unsigned *a = xa[kk];

		if (k0 + kk * 16 >= len)
			break;
#pragma unroll
		for (int np = 0; np < ND / 2; np++) {
			unsigned b[4];

			kt_ldmatrix_x4_trans(b, sy + kt_swz<CH>(kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7),
							    np * 2 + (lane >> 4)));
			kt_mma_bf16_16816(acc[2 * np], a, b);
			kt_mma_bf16_16816(acc[2 * np + 1], a, b + 2);
		}
	}
}

/* mma_ac of X in fp32 (the accumulator layout of mma_rc). */
KT_DEV void mma_xc(float (&acc)[ND][4], const float (&x)[NBC][4], unsigned sy, int k0, int len,
		   int lane)
{
	unsigned xa[KC / 16][4];

	pack_a(xa, x);
	mma_ac(acc, xa, sy, k0, len, lane);
}

/* The end of sweep 1 for this thread's two rows of an m16 tile (rbase +
 * lane / 4, and + 8): the quad's partial sums reduced, m becomes the row's
 * LSE (log2) and di its Di; one thread a row stores the pair, rows at or
 * past len not. */
KT_DEV void put_stats(float (&m)[2], const float (&l)[2], float (&di)[2], int rbase, int lane,
		      int len, float2 *stats, int t0, int H, int h)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		const int row = rbase + (lane >> 2) + 8 * hf;
		float x = l[hf], y = di[hf];

		x += __shfl_xor_sync(0xffffffffu, x, 1);
		x += __shfl_xor_sync(0xffffffffu, x, 2);
		y += __shfl_xor_sync(0xffffffffu, y, 1);
		y += __shfl_xor_sync(0xffffffffu, y, 2);
		m[hf] += __log2f(x);
		di[hf] = y / x;
		if ((lane & 3) == 0 && row < len)
			stats[(long long)(t0 + row) * H + h] = make_float2(m[hf], di[hf]);
	}
}

/* Stores one warp's 16 rows (pass rows r0.., block rows rb0..) of acc to
 * x (T, H, HD), rows at or past len skipped, conjugate-rotated when ROT. */
template <bool ROT>
KT_DEV void put_rows(__nv_bfloat16 *x, const float (&acc)[ND][4], const rtab *table, int t0,
		     int rb0, int len, int H, int h, int lane)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		int row = rb0 + (lane >> 2) + 8 * hf;

		if (row >= len)
			continue;
#pragma unroll
		for (int nt = 0; nt < ND; nt++) {
			int col = nt * 8 + 2 * (lane & 3);
			float y0 = acc[nt][2 * hf], y1 = acc[nt][2 * hf + 1];

			if (ROT) {
				float2 cs = tab_pair_g(table, t0 + row, col);

				rot_conj(y0, y1, cs.x, cs.y);
			}
			*reinterpret_cast<unsigned *>(x + ((long long)(t0 + row) * H + h) * HD + col) =
				kt_pack_bf16x2(y0, y1);
		}
	}
}

/* This CTA's (item, pass), or false when it has none (past the bound's
 * count or a pass past the block's length): the whole CTA leaves. */
KT_DEV bool cta_work(const int2 *blocks, int nitems, int H, int2 &b, int &h, int &p)
{
	int w = blockIdx.x / QP;

#if BOUND
	nitems = bound_items(blocks, nitems, H);
#endif
	if (w >= nitems)
		return false;
	b = blocks[w / H];
	h = w % H;
	p = blockIdx.x % QP;
	return p * PR < b.y;
}

} /* namespace kba */

#if !defined(BLOCKATTN_BWD_HELPERS_ONLY)
extern "C" __global__ void KBA_BOUNDS
blockattn_bwd_dq(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
		 int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
		 __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
		 __nv_bfloat16 *__restrict__ dv, int nitems, int H, int stats_at)
{
	using namespace kba;
	extern __shared__ __align__(128) unsigned char smem[];
	const unsigned sbase = kt_smem_u32(smem), sring = sbase + 2 * PTILE_R;
	const int tid = threadIdx.x, lane = tid & 31, r0 = (tid >> 5) * 16;
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD), scale = 1.f / sqrtf((float)HD);
	/* written here, read by blockattn_bwd_dkv (the next launch) */
	float2 *stats = reinterpret_cast<float2 *>(blocks + stats_at);
	int2 b;
	int h, p;

	if (!cta_work(blocks, nitems, H, b, h, p))
		return;
	const int t0 = b.x, len = b.y, pr0 = p * PR, nch = (len + KC - 1) / KC, nsteps = 2 * nch;
	const bool busy = pr0 + r0 < len;	/* a warp past the length keeps to the barriers */

	/* the pass's q, do rows with step 0's chunks; steps 1.. STAGES - 2 */
	load_rows<PR>(sbase, q, t0, pr0, len, H, h, tid);
	load_rows<PR>(sbase + PTILE_R, dout, t0, pr0, len, H, h, tid);
#pragma unroll
	for (int j = 0; j < STAGES - 1; j++) {
		if (j < nsteps) {
			int k0 = (j % nch) * KC;

			load_rows<KC>(sring + j * 2 * CTILE, k, t0, k0, len, H, h, tid);
			load_rows<KC>(sring + j * 2 * CTILE + CTILE, v, t0, k0, len, H, h, tid);
		}
		kt_cp_async_commit();
	}
	if (ROPE) {
		uint4 u[PIT];

		tab_rows<PR>(u, table, t0, pr0, len, tid);
		kt_cp_async_wait<STAGES - 2>();	/* step 0's group: q's copies */
		rot_rows<PR, false>(smem, nullptr, u, pr0, len, tid);
	}

	float m[2] = {KBA_NEG_INF, KBA_NEG_INF}, l[2] = {0.f, 0.f}, di[2] = {0.f, 0.f};
	float acc[ND][4];

#pragma unroll
	for (int nt = 0; nt < ND; nt++)
		acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll 1
	for (int i = 0; i < nsteps; i++) {
		const int in = i + STAGES - 1, k0 = (i % nch) * KC;
		const unsigned sk = sring + (i % STAGES) * 2 * CTILE, sv = sk + CTILE;
		unsigned char *gk = smem + 2 * PTILE_R + (i % STAGES) * 2 * CTILE;

		if (in < nsteps) {
			unsigned st = sring + (in % STAGES) * 2 * CTILE;
			int kn = (in % nch) * KC;

			load_rows<KC>(st, k, t0, kn, len, H, h, tid);
			load_rows<KC>(st + CTILE, v, t0, kn, len, H, h, tid);
		}
		kt_cp_async_commit();
		if (ROPE) {
			uint4 u[CIT];

			tab_rows<KC>(u, table, t0, k0, len, tid);
			kt_cp_async_wait<STAGES - 1>();
			rot_rows<KC, ROPE_V>(gk, gk + CTILE, u, k0, len, tid);
		} else {
			kt_cp_async_wait<STAGES - 1>();
		}
		__syncthreads();

		if (busy) {
			float s[NBC][4], dp[NBC][4];

#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					s[nt][e] = dp[nt][e] = 0.f;
			mma_rc(s, sbase, r0, sk, k0, len, lane);
			mma_rc(dp, sbase + PTILE_R, r0, sv, k0, len, lane);
			if (i < nch) {
				/* sweep 1: the running max, sum and Di */
#pragma unroll
				for (int hf = 0; hf < 2; hf++) {
					float mc = m[hf], ls = 0.f, ds = 0.f, alpha;

#pragma unroll
					for (int nt = 0; nt < NBC; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							int col = k0 + nt * 8 + 2 * (lane & 3) + e;
							float x = col < len ? s[nt][2 * hf + e] * sl2 : KBA_NEG_INF;

							s[nt][2 * hf + e] = x;
							mc = fmaxf(mc, x);
						}
					mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 1));
					mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, 2));
					alpha = exp2f(m[hf] - mc);
					m[hf] = mc;
#pragma unroll
					for (int nt = 0; nt < NBC; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							float pe = exp2f(s[nt][2 * hf + e] - mc);

							ls += pe;
							ds += pe * dp[nt][2 * hf + e];
						}
					l[hf] = l[hf] * alpha + ls;
					di[hf] = di[hf] * alpha + ds;
				}
				if (i == nch - 1)
					put_stats(m, l, di, pr0 + r0, lane, len, stats, t0, H, h);
			} else {
				/* sweep 2: dS, dQ += dS k */
#pragma unroll
				for (int hf = 0; hf < 2; hf++)
#pragma unroll
					for (int nt = 0; nt < NBC; nt++)
#pragma unroll
						for (int e = 0; e < 2; e++) {
							int col = k0 + nt * 8 + 2 * (lane & 3) + e;
							float pe = col < len ? exp2f(s[nt][2 * hf + e] * sl2 - m[hf])
									     : 0.f;

							s[nt][2 * hf + e] =
								pe * (dp[nt][2 * hf + e] - di[hf]) * scale;
						}
				mma_xc(acc, s, sk, k0, len, lane);
			}
		}
		/* the slot is refilled at the next step */
		__syncthreads();
	}
	kt_cp_async_wait<0>();
	if (busy)
		put_rows<(ROPE != 0)>(dq, acc, table, t0, pr0 + r0, len, H, h, lane);
}

extern "C" __global__ void KBA_BOUNDS
blockattn_bwd_dkv(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
		  const __nv_bfloat16 *__restrict__ v, const __nv_bfloat16 *__restrict__ dout,
		  const int2 *__restrict__ blocks, const __nv_bfloat16 *__restrict__ table,
		  __nv_bfloat16 *__restrict__ dq, __nv_bfloat16 *__restrict__ dk,
		  __nv_bfloat16 *__restrict__ dv, int nitems, int H, int stats_at)
{
	using namespace kba;
	extern __shared__ __align__(128) unsigned char smem[];
	const unsigned sbase = kt_smem_u32(smem), sring = sbase + 2 * PTILE_R;
	float2 *sst = reinterpret_cast<float2 *>(smem + 2 * PTILE_R + STAGES * 2 * CTILE);
	const int tid = threadIdx.x, lane = tid & 31, r0 = (tid >> 5) * 16;
	const float sl2 = 1.4426950408889634f / sqrtf((float)HD), scale = 1.f / sqrtf((float)HD);
	const float2 *stats = reinterpret_cast<const float2 *>(blocks + stats_at);
	int2 b;
	int h, p;

	if (!cta_work(blocks, nitems, H, b, h, p))
		return;
	const int t0 = b.x, len = b.y, pr0 = p * PR, nch = (len + KC - 1) / KC;
	const bool busy = pr0 + r0 < len;

	/* the pass's k, v rows with step 0's chunks; steps 1.. STAGES - 2 */
	load_rows<PR>(sbase, k, t0, pr0, len, H, h, tid);
	load_rows<PR>(sbase + PTILE_R, v, t0, pr0, len, H, h, tid);
#pragma unroll
	for (int j = 0; j < STAGES - 1; j++) {
		if (j < nch) {
			load_rows<KC>(sring + j * 2 * CTILE, q, t0, j * KC, len, H, h, tid);
			load_rows<KC>(sring + j * 2 * CTILE + CTILE, dout, t0, j * KC, len, H, h, tid);
		}
		kt_cp_async_commit();
	}
	if (ROPE) {
		uint4 u[PIT];

		tab_rows<PR>(u, table, t0, pr0, len, tid);
		kt_cp_async_wait<STAGES - 2>();	/* step 0's group: k's, v's copies */
		rot_rows<PR, ROPE_V>(smem, smem + PTILE_R, u, pr0, len, tid);
	}

	float adk[ND][4], adv[ND][4];

#pragma unroll
	for (int nt = 0; nt < ND; nt++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			adk[nt][e] = adv[nt][e] = 0.f;
#pragma unroll 1
	for (int i = 0; i < nch; i++) {
		const int in = i + STAGES - 1, k0 = i * KC;
		const unsigned sq = sring + (i % STAGES) * 2 * CTILE, sdo = sq + CTILE;
		unsigned char *gq = smem + 2 * PTILE_R + (i % STAGES) * 2 * CTILE;
		/* the chunk's statistics, one row a thread; 0 past the length */
		float2 st = make_float2(0.f, 0.f);

		if (in < nch) {
			unsigned sn = sring + (in % STAGES) * 2 * CTILE;

			load_rows<KC>(sn, q, t0, in * KC, len, H, h, tid);
			load_rows<KC>(sn + CTILE, dout, t0, in * KC, len, H, h, tid);
		}
		kt_cp_async_commit();
		if (tid < KC && k0 + tid < len)
			st = stats[(long long)(t0 + k0 + tid) * H + h];
		if (ROPE) {
			uint4 u[CIT];

			tab_rows<KC>(u, table, t0, k0, len, tid);
			kt_cp_async_wait<STAGES - 1>();
			rot_rows<KC, false>(gq, nullptr, u, k0, len, tid);
		} else {
			kt_cp_async_wait<STAGES - 1>();
		}
		if (tid < KC)	/* the last step's readers passed its closing barrier */
			sst[tid] = st;
		__syncthreads();

		if (busy) {
			float x[NBC][4];

#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					x[nt][e] = 0.f;
			/* S^T -> P^T (query columns past the length: 0) */
			mma_rc(x, sbase, r0, sq, k0, len, lane);
#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					int c = nt * 8 + 2 * (lane & 3) + e;
					float lse = sst[c].x;

					x[nt][e] = k0 + c < len ? exp2f(x[nt][e] * sl2 - lse) : 0.f;
					x[nt][2 + e] = k0 + c < len ? exp2f(x[nt][2 + e] * sl2 - lse) : 0.f;
				}
			/* P^T as bf16 from here on (what both products read): half
			 * the registers beside dP^T */
			unsigned pa[KC / 16][4];

			pack_a(pa, x);
			mma_ac(adv, pa, sdo, k0, len, lane);
			/* dP^T -> dS^T */
			float y[NBC][4];

#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					y[nt][e] = 0.f;
			mma_rc(y, sbase + PTILE_R, r0, sdo, k0, len, lane);
#pragma unroll
			for (int nt = 0; nt < NBC; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					float dd = sst[nt * 8 + 2 * (lane & 3) + e].y;

					y[nt][e] = packed_at(pa, nt, e) * (y[nt][e] - dd) * scale;
					y[nt][2 + e] = packed_at(pa, nt, 2 + e) * (y[nt][2 + e] - dd) * scale;
				}
			mma_xc(adk, y, sq, k0, len, lane);
		}
		/* the slot and the statistics are rewritten at the next step */
		__syncthreads();
	}
	kt_cp_async_wait<0>();
	if (busy) {
		put_rows<(ROPE != 0)>(dk, adk, table, t0, pr0 + r0, len, H, h, lane);
		put_rows<ROPE_V>(dv, adv, table, t0, pr0 + r0, len, H, h, lane);
	}
}
#endif /* !BLOCKATTN_BWD_HELPERS_ONLY */
#endif /* KCH */
