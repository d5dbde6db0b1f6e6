/*
 * gemm_ws.cuh -- gemm.cu's sm_90a warp-specialized kernels (-DWS=1): TMA
 * into an mbarrier ring from a producer warpgroup, CONSUMERS wgmma
 * warpgroups, a staged or direct epilogue; one tile per CTA
 * (gemm_tn_ws_body) or a persistent walk (gemm_tn_ws_persistent_body).
 * Included by gemm.cu after gemm_wgmma.cuh. Split-K reduces in a cluster
 * (SPLIT_CLUSTER, what the families plan) or through a workspace (only
 * tools/gemm_probe runs that form).
 */
#if defined(KT_WGMMA) || defined(WGMMA) || defined(WS)
namespace ktg {

/*
 * The warp-specialized sm_90a path (-DWS=1): TMA + mbarrier ring, one
 * producer warpgroup and CONS consumer warpgroups.
 *
 * Block (CONS + 1) * 128 threads. Warpgroup 0 is the producer: it gives
 * its registers back (setmaxnreg.dec to 40, when CONS > 1) and one thread
 * issues, per k-tile, the TMA box copies (A: 64 x BM, B: 64 x BN, 128-byte
 * swizzle, the layout kt_wg_desc_k describes) into stage kt % ST, completing
 * on full[stage]; before reusing a stage it waits on empty[stage]. The
 * consumers (setmaxnreg.inc to 232) each own BM / CONS rows (MW m64 tiles)
 * x BN columns: wait full, issue 4 k16 wgmmas per m64 tile, keep one
 * group in flight (wait_group 1), and release the previous stage (each
 * warp's lane 0 arrives on empty: count 4 * CONS per CTA of the cluster).
 *
 * CM = 2: clusters of two CTAs on vertically adjacent tiles (rows m0 and
 * m0 + BM, the same BN columns) share the B tile: each CTA loads half of
 * it (box 64 x BN/2) and multicasts it into both CTAs' stage, so B crosses
 * L2 -> SM once per pair. A stage may then be refilled only when the
 * consumers of both CTAs have released it: consumers arrive on the empty
 * barrier of every CTA of the cluster. The kernel carries
 * __cluster_dims__(2, 1, 1) and the grid is padded to an even count (a
 * CTA whose rows are all past M still runs the protocol and stores
 * nothing).
 *
 * The tensor maps are rank 3 (k, rows, batch): blockIdx.z picks the batch
 * through the map's third coordinate (times zA / zB: 0 for an operand
 * shared by every batch). zA / zB = 2 says the map is (k, batch, rows)
 * instead, for batches that sit side by side within each row (monarch's
 * stage 1 reads x (N, n) as b column blocks of n/b: batch stride n/b <
 * row stride n); its box (64, 1, rows) lands in shared memory exactly like
 * (64, rows, 1), and its strides stay increasing. The copy engine
 * zero-fills outside the tensor, so M, N and K edges need no masking in
 * the main loop.
 *
 * SK > 1 (-DSPLIT_K): grid.y splits K into slices of whole k-tiles; each
 * CTA loads only its slice. With SC (-DSPLIT_CLUSTER) the SK slices are a
 * cluster that reduce-scatters the tile (below) and stores bf16 C; else
 * each stores fp32 partials straight from the accumulators into slice
 * blockIdx.y of a workspace (M x ldc, batch 1), which splitk_reduce sums.
 *
 * Epilogue: EPI 0 stores bf16 pairs straight from the accumulators; EPI 1
 * stages the consumer's tile in shared memory (the ring, free by then:
 * a named barrier over the consumers proves every wgmma retired) and
 * writes 16-byte chunks, whole rows per warp.
 *
 * Dynamic shared memory: 1024 (alignment) + ST * (BM + BN) * 128 + 256
 * (barriers); see kt_gemm_smem.
 *
 * ptxas: 168 registers at 384 threads, 154-165 at 256, no stack frame.
 *
 * CM = 2 is verified (every shape and the batched checks) but runs near the
 * one-CTA tiles, never ahead of them (docs/families/dense.md): halving B's
 * L2 reads buys nothing where the tile is compute-bound, so it stays out of
 * the spaces. The remote empty arrivals use the default semantics (as
 * CUTLASS); .release.cluster made it about twice as slow.
 *
 * NEEDSWORK: one CTA per tile: the epilogue does not overlap the next
 * tile's loads, which costs most where tiles come in many waves (16384
 * tokens) or few k-chunks; see the persistent form below. Few tiles
 * (N = 256) would want split-K or stream-K instead.
 */
template <int BM, int BN, int GM, int CM>
KT_DEV void ws_tile_coords(int M, int N, int &m0, int &n0)
{
	/* CM vertically adjacent tiles form one (CM*BM) x BN super-tile */
	tile_at<CM * BM, BN, GM>(blockIdx.x / CM, M, N, m0, n0);
	if (CM > 1)
		m0 += (int)kt_cluster_ctarank() * BM;
}

/* A's or B's box (WHICH 1 or 2) into the ring: with L2_HINT's bit WHICH
 * set, under the evict_first policy pol. */
template <int WHICH>
KT_DEV void ws_load(unsigned dst, const kt_tmap_t *m, unsigned bar, int c0, int c1, int c2,
		    unsigned long long pol)
{
#if L2_HINT & 3
	if (L2_HINT & WHICH) {
		kt_tma_load_3d_hint(dst, m, bar, c0, c1, c2, pol);
		return;
	}
#endif
	(void)pol;
	kt_tma_load_3d(dst, m, bar, c0, c1, c2);
}

/* A 16-byte chunk of the staged epilogue into C: with L2_HINT bit 4, under
 * the evict_last policy pol. */
KT_DEV void ws_store16(__nv_bfloat16 *p, uint4 v, unsigned long long pol)
{
#if L2_HINT & 4
	kt_st16_hint(p, v, pol);
#else
	(void)pol;
	*reinterpret_cast<uint4 *>(p) = v;
#endif
}

/* A consumer warpgroup's ring chunk q (stage q % ST): waits for it to land,
 * issues its BK/16 x MW wgmmas (rows c*RW.. of the A stage) as one group
 * and waits until the previous chunk's group has retired, so the caller
 * may release that chunk's stage. */
template <int BM, int BN, int ST, int MW, int RW>
KT_DEV void ws_mma_chunk(float (&acc)[MW][1][BN / 8][4], unsigned sA0, unsigned sB0,
			 unsigned full0, int q, int c)
{
	const int BK = 64;
	const unsigned A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	const int s = q % ST;

	kt_mbar_wait(full0 + s * 8, (q / ST) & 1);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < BK / 16; kk++) {
		unsigned long long db = kt_wg_desc_k(sB0 + s * B_STAGE) + 2 * kk;

#pragma unroll
		for (int mw = 0; mw < MW; mw++)
			kt_wg<BN>::ss<0, 0>(acc[mw][0],
					    kt_wg_desc_k(sA0 + s * A_STAGE + (c * RW + mw * 64) * 128) +
						    2 * kk,
					    db);
	}
	kt_wg_commit();
	kt_wg_wait<1>();
}

template <int BM, int BN, int ST, int CONS, int GM, int EPI, int CM = 1, int SK = 1, int SC = 0>
KT_DEV void gemm_tn_ws_body(const kt_tmap_t *tA, const kt_tmap_t *tB, void *Cv, int M, int N,
			    int K, long long ldc, long long sC, int zA, int zB)
{
	const int BK = 64, RW = BM / CONS, MW = RW / 64;
	const unsigned A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	static_assert(RW % 64 == 0, "each consumer warpgroup owns whole m64 tiles");
	static_assert(MW * BN / 2 <= 128, "at most 128 accumulators per consumer thread");
	static_assert(ST >= 2, "the ring needs 2+ stages");
	static_assert(BM <= 256 && BN <= 256, "a TMA box is at most 256 rows");
	static_assert(CM == 1 || CM == 2, "clusters of 1 or 2 CTAs");
	static_assert(SK == 1 || CM == 1, "split-K runs without clusters");
	static_assert(EPI == 0 || BM * (BN * 2 + 16) <= ST * (BM + BN) * BK * 2,
		      "the staged epilogue tile fits in the ring (the barriers follow it)");
	extern __shared__ __align__(1024) unsigned char kt_smem_ws[];
	const unsigned base = (kt_smem_u32(kt_smem_ws) + 1023u) & ~1023u;
	const unsigned sA0 = base, sB0 = base + ST * A_STAGE;
	const unsigned full0 = base + ST * (A_STAGE + B_STAGE), empty0 = full0 + ST * 8;
	const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;
	const int z = blockIdx.z;
	/* SK > 1: this CTA's slice of K, whole k-tiles (a slice past K has
	 * KT <= 0 and stores a zero partial); the map still spans all of K, so
	 * the copy engine zero-fills only past K itself */
	const int kc = SK > 1 ? (K + BK * SK - 1) / (BK * SK) * BK : K;
	const int k0 = SK > 1 ? (int)blockIdx.y * kc : 0;
	const int KT = SK > 1 ? (min(K - k0, kc) + BK - 1) / BK : (K + BK - 1) / BK;
	/* zA / zB == 2: the map is (k, batch, rows) (batches interleaved
	 * within a row: monarch's x), else (k, rows, batch) with the batch
	 * coordinate times zA / zB */
	const int a1 = zA == 2 ? z : 0, a2 = zA == 2 ? 0 : z * zA;
	const int b1 = zB == 2 ? z : 0, b2 = zB == 2 ? 0 : z * zB;
	int m0, n0;

	ws_tile_coords<BM, BN, GM, CM>(M, N, m0, n0);
	if (tid == 0) {
		for (int s = 0; s < ST; s++) {
			kt_mbar_init(full0 + s * 8, 1);
			kt_mbar_init(empty0 + s * 8, 4 * CONS * CM);
		}
		kt_mbar_init_fence();
	}
	/* with a cluster, the peer's barriers must be initialised before any
	 * multicast or remote arrival reaches them */
	if (CM > 1)
		kt_cluster_sync();
	else
		__syncthreads();

	if (wg == 0) {
		/* producer */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
		if (tid == 0) {
			const unsigned rank = CM > 1 ? kt_cluster_ctarank() : 0;
			const unsigned long long pol = kt_l2_evict_first_if<(L2_HINT & 3) != 0>();

			kt_tmap_prefetch(tA);
			kt_tmap_prefetch(tB);
			for (int kt = 0; kt < KT; kt++) {
				const int s = kt % ST;
				const unsigned fb = full0 + s * 8;

				if (kt >= ST)
					kt_mbar_wait(empty0 + s * 8, ((kt / ST) - 1) & 1);
				kt_mbar_arrive_tx(fb, A_STAGE + B_STAGE);
				const int kk = k0 + kt * BK, nr = n0 + (int)rank * (BN / 2);

				if (zA == 2)
					ws_load<1>(sA0 + s * A_STAGE, tA, fb, kk, a1, m0, pol);
				else
					ws_load<1>(sA0 + s * A_STAGE, tA, fb, kk, m0, a2, pol);
				if (CM > 1)
					kt_tma_load_3d_mc(sB0 + s * B_STAGE + rank * (B_STAGE / 2), tB, fb,
							  kk, zB == 2 ? b1 : nr, zB == 2 ? nr : b2,
							  (unsigned short)3);
				else if (zB == 2)
					ws_load<2>(sB0 + s * B_STAGE, tB, fb, kk, b1, n0, pol);
				else
					ws_load<2>(sB0 + s * B_STAGE, tB, fb, kk, n0, b2, pol);
			}
		}
		if (SC) {	/* the consumers' two cluster barriers (below) */
			__syncwarp();
			kt_cluster_sync();
			kt_cluster_sync();
		}
	} else {
		/* consumers */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
		const int c = wg - 1;
		float acc[MW][1][BN / 8][4];

#pragma unroll
		for (int mw = 0; mw < MW; mw++)
			kt_zero_frags(acc[mw]);
		for (int kt = 0; kt < KT; kt++) {
			ws_mma_chunk<BM, BN, ST, MW, RW>(acc, sA0, sB0, full0, kt, c);
			/* k-tile kt-1 has retired: its stage may be refilled */
			if (kt > 0 && lane == 0) {
				const unsigned eb = empty0 + ((kt - 1) % ST) * 8;

				if (CM > 1) {
#pragma unroll
					for (int r = 0; r < CM; r++)
						kt_mbar_arrive_cluster(eb, r);
				} else {
					kt_mbar_arrive(eb);
				}
			}
		}
		kt_wg_wait<0>();

		if (SC) {
			/* SPLIT_CLUSTER: the SK (2) K slices of a tile are a
			 * cluster (1, SK, 1) that reduce-scatters the tile: slice o
			 * owns column chunks [o * CHO, (o + 1) * CHO) (CHO =
			 * BN / 8 / SK). Once every main loop is done (the rings
			 * are free), each slice writes the fp32 fragments of the
			 * chunks it does not own into their owner's ring (slot
			 * q of sender index s at ((s * MW * CHO + q) * CONS*128
			 * + t) * 16 bytes: a warp's stores are contiguous); each
			 * owner adds them and stores its columns, so the tail
			 * is spread over the cluster rather than left to one
			 * CTA. */
			constexpr int CHO = BN / 8 / SK;
			const int ct = tid - 128, me = (int)blockIdx.y;

			/* two slices only: a GPC holds fewer clusters of four
			 * than a quarter of its SMs, so a one-wave grid of them
			 * takes two (docs/families/lowrank.md) */
			static_assert(!SC || (SK == 2 && CM == 1 && EPI == 1),
				      "the cluster reduce pairs two K slices, no CLUSTER_M, the "
				      "staged epilogue");
			static_assert(!SC || (BN / 8) % SK == 0, "each slice owns whole chunks");
			static_assert(!SC || (SK - 1) * MW * CHO * CONS * 128 * 16 <=
						     ST * (BM + BN) * BK * 2,
				      "the peers' fragments fit in the owner's ring");
			kt_cluster_sync();
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
#pragma unroll
				for (int j = 0; j < BN / 8; j++) {
					const int o = j / CHO;

					if (o == me)
						continue;
					const int s = me < o ? me : me - 1;
					const unsigned a =
						sA0 + (((s * MW + mw) * CHO + j % CHO) * CONS * 128 + ct) * 16;

					asm volatile("{\n.reg .b32 ra;\n"
						     "mapa.shared::cluster.u32 ra, %0, %1;\n"
						     "st.shared::cluster.v4.f32 [ra], {%2, %3, %4, %5};\n}\n"
						     ::"r"(a), "r"(o), "f"(acc[mw][0][j][0]),
						     "f"(acc[mw][0][j][1]), "f"(acc[mw][0][j][2]),
						     "f"(acc[mw][0][j][3])
						     : "memory");
				}
			kt_cluster_sync();
#pragma unroll
			for (int s = 0; s < SK - 1; s++)
#pragma unroll
				for (int mw = 0; mw < MW; mw++)
#pragma unroll
					for (int j = 0; j < BN / 8; j++) {
						if (j / CHO != me)
							continue;
						const unsigned a =
							sA0 + (((s * MW + mw) * CHO + j % CHO) * CONS * 128 +
							       ct) * 16;
						float v0, v1, v2, v3;

						asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
							     : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
							     : "r"(a)
							     : "memory");
						acc[mw][0][j][0] += v0;
						acc[mw][0][j][1] += v1;
						acc[mw][0][j][2] += v2;
						acc[mw][0][j][3] += v3;
					}
		}
		if (SK > 1 && !SC) {
			/* fp32 partials into slice blockIdx.y of the workspace
			 * (M x ldc each, batch 1), summed by splitk_reduce */
			float *W = (float *)Cv + (long long)blockIdx.y * M * ldc;

#pragma unroll
			for (int mw = 0; mw < MW; mw++)
				store_acc_f32<1, BN / 8>(acc[mw], W, ldc,
							 m0 + c * RW + mw * 64 + (warp & 3) * 16, n0,
							 M, N, lane);
		} else if (EPI == 0) {
			__nv_bfloat16 *C = (__nv_bfloat16 *)Cv + (long long)z * sC;


#pragma unroll
			for (int mw = 0; mw < MW; mw++)
				store_acc<1, BN / 8>(acc[mw], C, ldc,
						     m0 + c * RW + mw * 64 + (warp & 3) * 16, n0, M, N,
						     lane);
		} else {
			__nv_bfloat16 *C = (__nv_bfloat16 *)Cv + (long long)z * sC;
			/* staged: rows of BN bf16 + 16 bytes of padding (the 8
			 * rows a warp writes land in distinct banks) */
			const int PITCH = BN * 2 + 16, CH = BN / 8, t = tid & 127;
			/* the chunks this CTA stores: all, or its share of a
			 * cluster-reduced tile */
			const int CHS = SC ? CH / SK : CH, ch0 = SC ? (int)blockIdx.y * CHS : 0;
			const unsigned st0 = base + c * RW * PITCH;
			const unsigned long long cpol = kt_l2_evict_last_if<(L2_HINT & 4) != 0>();

			kt_fence_proxy_async();
			kt_bar_sync(1, CONS * 128);	/* every consumer's wgmmas retired */
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
#pragma unroll
				for (int ni = 0; ni < BN / 8; ni++) {
					int r = mw * 64 + (warp & 3) * 16 + (lane >> 2);
					unsigned o = st0 + r * PITCH + (ni * 8 + (lane & 3) * 2) * 2;

					if (SC && ni / CHS != (int)blockIdx.y)
						continue;

					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][0],
									acc[mw][0][ni][1])));
					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o + 8 * PITCH),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][2],
									acc[mw][0][ni][3])));
				}
			kt_bar_sync(2 + c, 128);
#pragma unroll 4
			for (int i = t; i < RW * CHS; i += 128) {
				const int r = i / CHS, ch = ch0 + i % CHS;
				const int gr = m0 + c * RW + r, gc = n0 + ch * 8;
				uint4 v;

				asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
					     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
					     : "r"(st0 + r * PITCH + ch * 16));
				if (gr < M && gc < N)
					ws_store16(C + (long long)gr * ldc + KT_COL(gc), v, cpol);
			}
		}
	}
	/* a CTA of a cluster leaves only when its peer can no longer arrive on
	 * its barriers */
	if (CM > 1) {
		__syncwarp();
		kt_cluster_sync();
	}
}

/*
 * The persistent form (-DPERSISTENT=1; gemm_tn_ws then takes one more
 * argument, the batch count): grid (P, 1, 1), P fixed by the caller
 * (typically the SM count); CTA b walks the work items w = b, b + P, ...
 * below tiles * batch, w / tiles the batch and w % tiles the tile in
 * ws_tile_coords' order, so consecutive CTAs take the tiles the one-tile
 * grid would run side by side. Barrier init and the tensor-map fetch are
 * paid once per CTA, not once per tile.
 *
 * The producer streams k-chunks into the ring across tiles: one running
 * chunk counter `it` gives the stage (it % ST) and the phase of every
 * barrier wait, so the next tile's loads proceed while the consumers run
 * the current tile's epilogue. Hence the consumers also release each
 * tile's last stage (after wait_group 0), which the one-tile kernel never
 * needs to.
 *
 * EPI 1 stages in its own area after the ring (the barriers after it;
 * see kt_gemm_smem): the ring is being refilled while the epilogue runs.
 * The area holds BM rows of SW = min(BN, 128) bf16 columns, swizzled
 * rather than padded (chunk j of row r at j ^ (r % 8): the 8 rows a warp
 * writes, and the 8 chunks a quarter-warp reads, hit distinct banks), so
 * a 256-column tile stages in two passes and 128x256 keeps 4 stages. A
 * consumer warpgroup owns its RW rows of that area; it restages only once
 * all of its 128 threads have read the previous pass's or tile's (named
 * barrier 2 + c before the shared stores). EPI 0 stores bf16 pairs from
 * the accumulators as in the one-tile kernel.
 *
 * Not with split-K or clusters (the kernel entry refuses them). A
 * separate body so that the one-tile kernel's code (and PTX) stays as
 * it was. It pays where tiles are many and short (BLAST's stage 1, K =
 * 256: a quarter less time), not where one wave covers the grid. The
 * staging area is swizzled rather than padded because padding left
 * 128x256 only 3 stages, which lost everywhere. compute-sanitizer
 * racecheck is clean on the edge shapes (gemm_probe 1 persist small).
 */
/* The persistent producer (one thread): every k-chunk of the CTA's work
 * items w = blockIdx.x, + gridDim.x, ... (below items; w / tiles the
 * batch, w % tiles the tile in tile_at's order) into the ring, in walk
 * order. One running chunk counter gives the stage (it % ST) and the phase
 * of every wait; chunk it waits until chunk it - ST, of this item or an
 * earlier one, has been released by whoever read it. */
template <int BM, int BN, int ST, int GM>
KT_DEV void ws_produce_walk(const kt_tmap_t *tA, const kt_tmap_t *tB, unsigned sA0, unsigned sB0,
			    unsigned full0, unsigned empty0, int M, int N, int K, int zA, int zB,
			    int items, int tiles)
{
	const int BK = 64, KT = (K + BK - 1) / BK;
	const unsigned A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	int it = 0;
	const unsigned long long pol = kt_l2_evict_first_if<(L2_HINT & 3) != 0>();

	kt_tmap_prefetch(tA);
	kt_tmap_prefetch(tB);
	for (int w = blockIdx.x; w < items; w += gridDim.x) {
		const int z = w / tiles;
		const int a1 = zA == 2 ? z : 0, a2 = zA == 2 ? 0 : z * zA;
		const int b1 = zB == 2 ? z : 0, b2 = zB == 2 ? 0 : z * zB;
		int m0, n0;

		tile_at<BM, BN, GM>(w - z * tiles, M, N, m0, n0);
		for (int kt = 0; kt < KT; kt++, it++) {
			const int s = it % ST, kk = kt * BK;
			const unsigned fb = full0 + s * 8;

			if (it >= ST)
				kt_mbar_wait(empty0 + s * 8, ((it / ST) - 1) & 1);
			kt_mbar_arrive_tx(fb, A_STAGE + B_STAGE);
			if (zA == 2)
				ws_load<1>(sA0 + s * A_STAGE, tA, fb, kk, a1, m0, pol);
			else
				ws_load<1>(sA0 + s * A_STAGE, tA, fb, kk, m0, a2, pol);
			if (zB == 2)
				ws_load<2>(sB0 + s * B_STAGE, tB, fb, kk, b1, n0, pol);
			else
				ws_load<2>(sB0 + s * B_STAGE, tB, fb, kk, n0, b2, pol);
		}
	}
}

template <int BM, int BN, int ST, int CONS, int GM, int EPI>
KT_DEV void gemm_tn_ws_persistent_body(const kt_tmap_t *tA, const kt_tmap_t *tB, void *Cv,
				       int M, int N, int K, long long ldc, long long sC, int zA,
				       int zB, int nbatch)
{
	const int BK = 64, RW = BM / CONS, MW = RW / 64;
	/* EPI 1 stages SW columns at a time: rows of SW * 2 bytes, 16-byte
	 * chunk j of row r at j ^ (r % 8) (no padding: 128x256 fits 4 stages) */
	const int SW = BN > 128 ? 128 : BN, SCH = SW / 8;
	const unsigned A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	const unsigned EPI_BYTES = EPI ? BM * SW * 2 : 0;
	static_assert(RW % 64 == 0, "each consumer warpgroup owns whole m64 tiles");
	static_assert(MW * BN / 2 <= 128, "at most 128 accumulators per consumer thread");
	static_assert(ST >= 2, "the ring needs 2+ stages");
	static_assert(BM <= 256 && BN <= 256, "a TMA box is at most 256 rows");
	static_assert(SCH >= 8 && BN % SW == 0, "the staging swizzle spans 8 chunks");
	extern __shared__ __align__(1024) unsigned char kt_smem_wsp[];
	const unsigned base = (kt_smem_u32(kt_smem_wsp) + 1023u) & ~1023u;
	const unsigned sA0 = base, sB0 = base + ST * A_STAGE;
	const unsigned epi0 = base + ST * (A_STAGE + B_STAGE);
	const unsigned full0 = epi0 + EPI_BYTES, empty0 = full0 + ST * 8;
	const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = tid >> 5;
	const int KT = (K + BK - 1) / BK;
	const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), items = tiles * nbatch;

	if (tid == 0) {
		for (int s = 0; s < ST; s++) {
			kt_mbar_init(full0 + s * 8, 1);
			kt_mbar_init(empty0 + s * 8, 4 * CONS);
		}
		kt_mbar_init_fence();
	}
	__syncthreads();

	if (wg == 0) {
		/* producer */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
		if (tid == 0) {
			ws_produce_walk<BM, BN, ST, GM>(tA, tB, sA0, sB0, full0, empty0, M, N, K, zA,
							zB, items, tiles);
		}
	} else {
		/* consumers */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
		const int c = wg - 1, t = tid & 127;
		const unsigned st0 = epi0 + c * RW * SW * 2;
		const unsigned long long cpol = kt_l2_evict_last_if<(L2_HINT & 4) != 0>();
		float acc[MW][1][BN / 8][4];
		int it = 0;

		for (int w = blockIdx.x; w < items; w += gridDim.x) {
			const int z = w / tiles;
			__nv_bfloat16 *C = (__nv_bfloat16 *)Cv + (long long)z * sC;
			int m0, n0;

			tile_at<BM, BN, GM>(w - z * tiles, M, N, m0, n0);
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
				kt_zero_frags(acc[mw]);
			for (int kt = 0; kt < KT; kt++, it++) {
				ws_mma_chunk<BM, BN, ST, MW, RW>(acc, sA0, sB0, full0, it, c);
				/* chunk it-1 has retired: its stage may be refilled */
				if (kt > 0 && lane == 0)
					kt_mbar_arrive(empty0 + ((it - 1) % ST) * 8);
			}
			kt_wg_wait<0>();
			/* the tile's last chunk too: the producer is already
			 * loading the next tile */
			if (KT > 0 && lane == 0)
				kt_mbar_arrive(empty0 + ((it - 1) % ST) * 8);

			if (EPI == 0) {
#pragma unroll
				for (int mw = 0; mw < MW; mw++)
					store_acc<1, BN / 8>(acc[mw], C, ldc,
							     m0 + c * RW + mw * 64 + (warp & 3) * 16,
							     n0, M, N, lane);
			} else {
#pragma unroll
				for (int h = 0; h < BN / SW; h++) {
					/* the previous pass's (tile's) staged rows
					 * have been read */
					kt_bar_sync(2 + c, 128);
#pragma unroll
					for (int mw = 0; mw < MW; mw++)
#pragma unroll
						for (int nj = 0; nj < SCH; nj++) {
							const int ni = h * SCH + nj;
							int r = mw * 64 + (warp & 3) * 16 + (lane >> 2);
							/* rows r and r + 8 share the swizzle */
							unsigned o = st0 + r * (SW * 2) + ((nj ^ (r & 7)) << 4) +
								     (lane & 3) * 4;

							asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
								     "r"(kt_pack_bf16x2(acc[mw][0][ni][0],
											acc[mw][0][ni][1])));
							asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o + 8 * SW * 2),
								     "r"(kt_pack_bf16x2(acc[mw][0][ni][2],
											acc[mw][0][ni][3])));
						}
					kt_bar_sync(2 + c, 128);
#pragma unroll 4
					for (int i = t; i < RW * SCH; i += 128) {
						const int r = i / SCH, ch = i % SCH;
						const int gr = m0 + c * RW + r, gc = n0 + h * SW + ch * 8;
						uint4 v;

						asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
							     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
							     : "r"(st0 + r * (SW * 2) + ((ch ^ (r & 7)) << 4)));
						if (gr < M && gc < N)
							ws_store16(C + (long long)gr * ldc + KT_COL(gc), v, cpol);
					}
				}
			}
		}
	}
}

} /* namespace ktg */
#endif
