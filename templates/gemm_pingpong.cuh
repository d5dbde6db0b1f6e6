/*
 * gemm_pingpong.cuh -- gemm.cu's ping-pong warp-specialized kernel
 * (-DWS=1 -DPINGPONG=1; gemm_tn_ws_pingpong_body): a persistent walk of
 * whole tiles in which two consumer warpgroups take turns, so that one's
 * epilogue runs while the other's main loop keeps the tensor cores busy.
 * Included by gemm.cu after gemm_ws.cuh, whose ws_load and ws_mma_chunk
 * it uses. Where it stands against the other forms: docs/families/dense.md.
 *
 * The contract (gemm.cu's entry checks the defines, kt_gemm_check the
 * plan):
 *
 *   gemm_tn_ws(tA, tB, tC, M, N, K, zA, zB, batch)
 *   C[z] (M x N) = A[z] (M x K) . B[z] (N x K)^T for z < batch
 *
 * grid (P, 1, 1) with P <= tiles * batch (the caller's CTA count, e.g. the
 * SM count), block 384: warpgroup 0 the TMA producer, warpgroups 1 and 2
 * the consumers. tA and tB are gemm_tn_ws's maps (rank 3, box (64, BM, 1)
 * and (64, BN, 1), 128-byte swizzle, zA / zB 0, 1 or 2 as there). tC is
 * a rank-3 map over bf16 C (N, M, batch) with row stride ldc and batch
 * stride sC (multiples of 8 elements), box (64, BM, 1), 128-byte swizzle:
 * C is written only through it, and the copy engine clips at M and N.
 * BM x BN (BLOCK_M x BLOCK_N) is the tile ONE consumer warpgroup owns, not
 * the CTA's share of a tile: BM 64 or 128, BN 64, 128 or 256, at most 128
 * fp32 accumulators a thread (128x128 or 64x256 at the largest).
 *
 * Work: CTA b walks items w = b + j * P (j = 0, 1, ...) below tiles *
 * batch, w / tiles the batch and w % tiles the tile in tile_at's order
 * (GROUP_M); consumer c takes the items with j % 2 == c. Why whole tiles
 * per warpgroup rather than halves of one tile (the persistent body):
 * only then can one warpgroup's epilogue overlap the other's main loop.
 * The price is twice the accumulator tile per CTA, hence BM <= 128.
 *
 * Ring: the producer loads every item's KT = ceil(K / 64) k-chunks in walk
 * order into one FIFO of ST stages; chunk q = j * KT + kt (all items of a
 * launch have the same KT) sits in stage q % ST with phase (q / ST) & 1, so
 * each consumer derives its chunks from j and skips the other's without a
 * second counter. Only the consumer that reads a chunk releases it (empty
 * count 4: lane 0 of each of its warps), after wgmma.wait shows the chunk
 * retired; a tile's last chunk too, since the producer is already on the
 * next item.
 *
 * Order: the two main loops alternate strictly (consumer 0 item 0, consumer
 * 1 item 1, consumer 0 item 2, ...): before item j > 0 consumer c waits on
 * named barrier KT_PP_BAR_ORDER + c, on which the other consumer arrives
 * once it has issued the last chunk of item j - 1 (and only if item j
 * exists, so that every arrival has its wait). Why: the main loops then
 * consume the ring in the order the producer fills it (no consumer waits
 * on a chunk queued behind one the other has not released), and a
 * consumer in its epilogue cedes the tensor cores to the other instead of
 * splitting them (CUTLASS's sm90 ping-pong kernel orders them the same
 * way). The epilogues are not ordered: each consumer has its own staging
 * area.
 *
 * Epilogue: the accumulators go to the consumer's staging area as bf16 in
 * BN / 64 panels of BM rows x 128 bytes, 16-byte chunk j of row r at j ^
 * (r % 8) -- the 128-byte swizzle tC's box expects, and the 8 rows a warp
 * writes hit distinct banks. After fence.proxy.async and a named barrier
 * over the warpgroup (KT_PP_BAR_EPI + c), one thread stores every panel
 * with a TMA store and commits the bulk group; before the next item's
 * staging writes it waits (wait_group.read) until that group has read the
 * area, and at exit until the stores are done. L2_HINT bit 4 stores under
 * evict_last, bits 1 and 2 load as gemm_ws.cuh does.
 *
 * Named barriers: 1..3 are gemm_ws.cuh's; this body uses KT_PP_BAR_ORDER
 * (4, 5) and KT_PP_BAR_EPI (6, 7).
 *
 * Dynamic shared memory: 1024 (alignment) + ST * (BM + BN) * 128 (ring) +
 * 2 * BM * BN * 2 (two staging areas) + 256 (barriers); see kt_gemm_smem.
 * Registers: setmaxnreg 40 for the producer, 232 for the consumers, as the
 * other ws bodies (384 threads: 168 a thread by default).
 */
#if defined(KT_WGMMA) || defined(WGMMA) || defined(WS)
namespace ktg {

#define KT_PP_BAR_ORDER 4
#define KT_PP_BAR_EPI 6

template <int BM, int BN, int ST, int GM>
KT_DEV void gemm_tn_ws_pingpong_body(const kt_tmap_t *tA, const kt_tmap_t *tB,
				     const kt_tmap_t *tC, int M, int N, int K, int zA, int zB,
				     int nbatch)
{
	const int BK = 64, MW = BM / 64, NP = BN / 64;
	const unsigned A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	const unsigned PANEL = BM * 128, EPI_BYTES = NP * PANEL;
	static_assert(BM == 64 || BM == 128, "a consumer warpgroup's tile is 64 or 128 rows");
	static_assert(BN == 64 || BN == 128 || BN == 256, "BN is 64, 128 or 256");
	static_assert(MW * BN / 2 <= 128, "at most 128 accumulators per consumer thread");
	static_assert(ST >= 2, "the ring needs 2+ stages");
	extern __shared__ __align__(1024) unsigned char kt_smem_wspp[];
	/* the ring and the staging panels are multiples of 1024 bytes: every
	 * stage and panel starts on a swizzle group */
	const unsigned base = (kt_smem_u32(kt_smem_wspp) + 1023u) & ~1023u;
	const unsigned sA0 = base, sB0 = base + ST * A_STAGE;
	const unsigned epi0 = base + ST * (A_STAGE + B_STAGE);
	const unsigned full0 = epi0 + 2 * EPI_BYTES, empty0 = full0 + ST * 8;
	const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;
	const int KT = (K + BK - 1) / BK;
	const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), items = tiles * nbatch;
	const int P = (int)gridDim.x;

	if (tid == 0) {
		for (int s = 0; s < ST; s++) {
			kt_mbar_init(full0 + s * 8, 1);
			kt_mbar_init(empty0 + s * 8, 4);	/* one warpgroup */
		}
		kt_mbar_init_fence();
	}
	__syncthreads();

	if (wg == 0) {
		/* producer: every item's chunks, in walk order */
		KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
		if (tid == 0) {
			ws_produce_walk<BM, BN, ST, GM>(tA, tB, sA0, sB0, full0, empty0, M, N, K, zA,
							zB, items, tiles);
		}
	} else {
		/* consumers: c takes items j = c, c + 2, ... of this CTA */
		KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
		const int c = wg - 1, t = tid & 127;
		const unsigned st0 = epi0 + c * EPI_BYTES;
		const unsigned long long cpol = kt_l2_evict_last_if<(L2_HINT & 4) != 0>();
		float acc[MW][1][BN / 8][4];

		if (t == 0)
			kt_tmap_prefetch(tC);
		for (int j = c, w = blockIdx.x + c * P; w < items; j += 2, w += 2 * P) {
			const int z = w / tiles, q0 = j * KT;
			int m0, n0;

			tile_at<BM, BN, GM>(w - z * tiles, M, N, m0, n0);
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
				kt_zero_frags(acc[mw]);
			/* our turn: the other consumer has issued item j - 1 */
			if (j > 0)
				kt_bar_sync(KT_PP_BAR_ORDER + c, 256);
			for (int kt = 0; kt < KT; kt++) {
				ws_mma_chunk<BM, BN, ST, MW, BM>(acc, sA0, sB0, full0, q0 + kt, 0);
				/* chunk q0+kt-1 has retired: its stage may be refilled */
				if (kt > 0 && lane == 0)
					kt_mbar_arrive(empty0 + ((q0 + kt - 1) % ST) * 8);
			}
			/* the other consumer's item j + 1 may issue now, while our
			 * last group retires and the epilogue runs */
			if (w + P < items)
				kt_bar_arrive(KT_PP_BAR_ORDER + (c ^ 1), 256);
			kt_wg_wait<0>();
			if (lane == 0)
				kt_mbar_arrive(empty0 + ((q0 + KT - 1) % ST) * 8);

			/* the previous item's TMA stores have read the area */
			if (t == 0)
				kt_bulk_wait_read<0>();
			kt_bar_sync(KT_PP_BAR_EPI + c, 128);
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
#pragma unroll
				for (int ni = 0; ni < BN / 8; ni++) {
					const int r = mw * 64 + (warp & 3) * 16 + (lane >> 2);
					/* rows r and r + 8 share the swizzle */
					const unsigned o = st0 + (ni >> 3) * PANEL + r * 128 +
							   (((ni & 7) ^ (r & 7)) << 4) + (lane & 3) * 4;

					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][0], acc[mw][0][ni][1])));
					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o + 8 * 128),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][2], acc[mw][0][ni][3])));
				}
			/* every thread's writes, visible to the copy engine */
			kt_fence_proxy_async();
			kt_bar_sync(KT_PP_BAR_EPI + c, 128);
			if (t == 0) {
#pragma unroll
				for (int p = 0; p < NP; p++) {
					if (n0 + p * 64 >= N)
						break;	/* a panel wholly past N */
#if L2_HINT & 4
					kt_tma_store_3d_hint(tC, st0 + p * PANEL, n0 + p * 64, m0, z, cpol);
#else
					kt_tma_store_3d(tC, st0 + p * PANEL, n0 + p * 64, m0, z);
#endif
				}
				kt_bulk_commit();
			}
		}
		(void)cpol;
		/* the staging area must outlive the copies that read it */
		if (t == 0)
			kt_bulk_wait<0>();
	}
}

} /* namespace ktg */
#endif
