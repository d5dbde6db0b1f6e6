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

/* blockattn_ws.cu takes the helpers above without this kernel */
#ifndef BLOCKATTN_BWD_HELPERS_ONLY
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
