/*
 * gemm_mma.cuh -- gemm.cu's sm_80+ main loop: cp.async tiles in swizzled
 * shared memory through a STAGES ring, ldmatrix fragments, mma.sync m16n8k16
 * (gemm_tn_body), and the fused low-rank layer on the same loop
 * (lowrank_fused_body). Included by gemm.cu after gemm_epi.cuh.
 */
namespace ktg {

/*
 * Per-thread view of one operand tile (ROWS x BK, K-contiguous) being
 * copied global -> shared: thread tid moves chunk c = tid % KCH of rows
 * r0 + i*RS (r0 = tid / KCH, RS = NT / KCH rows per pass). Only one base
 * pointer, the row step and a bit mask of valid rows stay live: registers
 * are what the 128x256 tiles run short of.
 */
template <int ROWS, int BK, int NT>
struct tile_loader {
	static const int KCH = BK / 8;
	static const int RS = NT / KCH;
	static const int TOTAL = ROWS * KCH;
	static const int ITERS = (TOTAL + NT - 1) / NT;
	static_assert(NT % KCH == 0, "threads must cover whole rows");
	static_assert(ITERS <= 32, "row mask is 32 bits");

	const __nv_bfloat16 *g, *base;
	long long step;
	int r0, c;
	unsigned rowok;

	KT_DEV void init(const __nv_bfloat16 *g_, long long ld, int row0, int nrows, int tid)
	{
		g = g_;
		r0 = tid / KCH;
		c = tid % KCH;
		base = g_ + (long long)(row0 + r0) * ld + c * 8;
		step = (long long)RS * ld;
		rowok = 0;
#pragma unroll
		for (int i = 0; i < ITERS; i++) {
			int r = r0 + i * RS;

			if (r < ROWS && row0 + r < nrows)
				rowok |= 1u << i;
		}
	}

	KT_DEV void load(unsigned sbase, int k0, int K)
	{
		const bool kok = k0 + c * 8 < K;
		const int soff0 = kt_swz<KCH>(r0, c);

#pragma unroll
		for (int i = 0; i < ITERS; i++) {
			if ((TOTAL % NT == 0) || r0 + i * RS < ROWS) {
				bool p = kok && ((rowok >> i) & 1u);
				/* the swizzle has period 8 rows: whole 8-row steps
				 * only shift the offset */
				int soff = (RS % 8 == 0) ? soff0 + i * RS * KCH * 16
							 : kt_swz<KCH>(r0 + i * RS, c);

				kt_cp_async16(sbase + soff, p ? (const void *)(base + i * step + k0)
							     : (const void *)g, p);
			}
		}
	}
};

/* A-operand fragments of one k16 step for MI 16-row tiles of a warp. */
template <int MI, int KCH>
KT_DEV void load_a_frags(unsigned (&af)[MI][4], unsigned sA, int wrow, int kk, int lane)
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++) {
		int row = wrow + mi * 16 + (lane & 15);
		int ch = kk * 2 + (lane >> 4);

		kt_ldmatrix_x4(af[mi], sA + kt_swz<KCH>(row, ch));
	}
}

/* B-operand fragments: two n8 tiles per ldmatrix.x4 (WN is a multiple of 16). */
template <int NI, int KCH>
KT_DEV void load_b_frags(unsigned (&bf)[NI][2], unsigned sB, int wcol, int kk, int lane)
{
#pragma unroll
	for (int nj = 0; nj < NI / 2; nj++) {
		int row = wcol + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
		int ch = kk * 2 + ((lane >> 3) & 1);
		unsigned r[4];

		kt_ldmatrix_x4(r, sB + kt_swz<KCH>(row, ch));
		bf[2 * nj][0] = r[0];
		bf[2 * nj][1] = r[1];
		bf[2 * nj + 1][0] = r[2];
		bf[2 * nj + 1][1] = r[3];
	}
}

template <int MI, int NI>
KT_DEV void mma_step(float (&acc)[MI][NI][4], const unsigned (&af)[MI][4],
		     const unsigned (&bf)[NI][2])
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++) {
			/* serpentine over ni: the B fragment of the turn is reused */
			int n = (mi & 1) ? NI - 1 - ni : ni;

			kt_mma_bf16_16816(acc[mi][n], af[mi], bf[n]);
		}
}

/*
 * The multistage main loop: tile kt+STAGES-1 is in flight while tile kt is
 * multiplied. Fragments are double-buffered across the k16 steps so the
 * ldmatrix of step kk+1 overlaps the MMAs of step kk; the wait for the next
 * stage sits before the last step's fragment load, and the refill of the
 * stage consumed in the previous iteration follows the barrier that proves
 * every warp has read it.
 */
template <int BM, int BN, int BK, int WARPS_M_, int WARPS_N_, int STAGES_>
struct mainloop {
	static const int NT = WARPS_M_ * WARPS_N_ * 32;
	static const int WM = BM / WARPS_M_, WN = BN / WARPS_N_;
	static const int MI = WM / 16, NI = WN / 8;
	static const int KCH = BK / 8, KSTEPS = BK / 16;
	static const int A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;

	KT_DEV static void run(float (&acc)[MI][NI][4], const __nv_bfloat16 *A, long long lda,
			       const __nv_bfloat16 *B, long long ldb, int m0, int n0,
			       int M, int N, int K, unsigned smem)
	{
		const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
		const int wrow = (warp / WARPS_N_) * WM, wcol = (warp % WARPS_N_) * WN;
		const unsigned sA0 = smem, sB0 = smem + STAGES_ * A_STAGE;
		const int KT = (K + BK - 1) / BK;
		tile_loader<BM, BK, NT> la;
		tile_loader<BN, BK, NT> lb;
		unsigned af[2][MI][4], bfr[2][NI][2];
		int rs = 0, ws = STAGES_ - 1;

		kt_zero_frags(acc);

		la.init(A, lda, m0, M, tid);
		lb.init(B, ldb, n0, N, tid);
#if defined(PDL_PREFETCH) && PDL_PREFETCH
		/* -DPDL_PREFETCH=1 (with KT_PDL=1, launched as a dependent):
		 * B (the weights) is no output of the kernel before, so its
		 * first stages go out as one group before the wait, and only
		 * A's wait for that kernel. The group is the oldest, so the
		 * waits below, which count per stage, still cover it. */
#pragma unroll
		for (int s = 0; s < STAGES_ - 1; s++)
			if (s < KT)
				lb.load(sB0 + s * B_STAGE, s * BK, K);
		kt_cp_async_commit();
		kt_pdl_wait();
#pragma unroll
		for (int s = 0; s < STAGES_ - 1; s++) {
			if (s < KT)
				la.load(sA0 + s * A_STAGE, s * BK, K);
			kt_cp_async_commit();
		}
#else
#pragma unroll
		for (int s = 0; s < STAGES_ - 1; s++) {
			if (s < KT) {
				la.load(sA0 + s * A_STAGE, s * BK, K);
				lb.load(sB0 + s * B_STAGE, s * BK, K);
			}
			kt_cp_async_commit();
		}
#endif
		kt_cp_async_wait<STAGES_ - 2>();
		__syncthreads();
		load_a_frags<MI, KCH>(af[0], sA0, wrow, 0, lane);
		load_b_frags<NI, KCH>(bfr[0], sB0, wcol, 0, lane);

		for (int kt = 0; kt < KT; kt++) {
#pragma unroll
			for (int kk = 0; kk < KSTEPS; kk++) {
				if (kk == KSTEPS - 1) {
					kt_cp_async_wait<STAGES_ - 2>();
					__syncthreads();
					rs = rs == STAGES_ - 1 ? 0 : rs + 1;
				}
				load_a_frags<MI, KCH>(af[(kk + 1) & 1], sA0 + rs * A_STAGE, wrow,
						      (kk + 1) % KSTEPS, lane);
				load_b_frags<NI, KCH>(bfr[(kk + 1) & 1], sB0 + rs * B_STAGE, wcol,
						      (kk + 1) % KSTEPS, lane);
				if (kk == 0) {
					int nk = kt + STAGES_ - 1;

					if (nk < KT) {
						la.load(sA0 + ws * A_STAGE, nk * BK, K);
						lb.load(sB0 + ws * B_STAGE, nk * BK, K);
					}
					kt_cp_async_commit();
					ws = ws == STAGES_ - 1 ? 0 : ws + 1;
				}
				mma_step<MI, NI>(acc, af[kk & 1], bfr[kk & 1]);
			}
		}
		kt_cp_async_wait<0>();
	}
};

template <int BM, int BN, int BK, int WM_, int WN_, int ST, int GM, bool F32 = false>
KT_DEV void gemm_tn_body(const __nv_bfloat16 *A, const __nv_bfloat16 *B, void *Cv,
			 int M, int N, int K, long long lda, long long ldb, long long ldc,
			 long long sA, long long sB, long long sC)
{
	typedef mainloop<BM, BN, BK, WM_, WN_, ST> ML;
	extern __shared__ __align__(128) unsigned char kt_smem[];
	float acc[ML::MI][ML::NI][4];
	int m0, n0;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	tile_coords<BM, BN, GM>(M, N, m0, n0);
	A += blockIdx.z * sA;
	B += blockIdx.z * sB;
	ML::run(acc, A, lda, B, ldb, m0, n0, M, N, K, kt_smem_u32(kt_smem));
	if (F32)
		store_acc_f32<ML::MI, ML::NI>(acc, (float *)Cv + blockIdx.z * sC, ldc,
					      m0 + (warp / WN_) * ML::WM, n0 + (warp % WN_) * ML::WN,
					      M, N, lane);
	else
		store_acc<ML::MI, ML::NI>(acc, (__nv_bfloat16 *)Cv + blockIdx.z * sC, ldc,
					  m0 + (warp / WN_) * ML::WM, n0 + (warp % WN_) * ML::WN,
					  M, N, lane);
}

/*
 * NEEDSWORK: N_SPLIT > 1 recomputes z once per split, and N_SPLIT = 1
 * leaves most SMs idle at 1024 tokens: at r=256 the best fused config is
 * several times slower than two cuBLAS GEMMs (docs/families/lowrank.md). A
 * fused kernel that wins needs z shared across CTAs (thread-block clusters
 * / DSMEM on sm_90) or a persistent schedule.
 *
 * Fused low-rank layer for one BLOCK_M-row token tile:
 *   z = X[tile] . V^T   (BLOCK_M x R, fp32 in registers -> bf16 in shared memory)
 *   Y[tile, part] = z . U[part]^T  for this CTA's share of the out columns.
 * z never leaves the SM, so the only DRAM traffic is X, V, U and Y. The
 * price: CTAs that split the out columns of one token tile (blockIdx.y,
 * gridDim.y = N_SPLIT) each recompute z. The second GEMM streams U tiles
 * through the same cp.async ring, as one flat loop over (n-tile, k-tile)
 * so the pipeline never drains between n-tiles.
 */
template <int BM, int BN, int BK, int WM_, int WN_, int ST, int R>
KT_DEV void lowrank_fused_body(const __nv_bfloat16 *X, const __nv_bfloat16 *V,
			       const __nv_bfloat16 *U, __nv_bfloat16 *Y, int M, int K, int N)
{
	typedef mainloop<BM, R, BK, WM_, WN_, ST> ML1;
	const int NT = WM_ * WN_ * 32;
	const int WMr = BM / WM_, WNc = BN / WN_;
	const int MI = WMr / 16, NI = WNc / 8;
	const int KSTEPS = BK / 16, KT2 = R / BK, ZCH = R / 8;
	const int B_STAGE = BN * BK * 2;
	extern __shared__ __align__(128) unsigned char kt_smem[];
	const unsigned zs = kt_smem_u32(kt_smem), ring = zs + BM * R * 2;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wrow = (warp / WN_) * WMr, wcol = (warp % WN_) * WNc;
	const int m0 = blockIdx.x * BM;
	const int tn = (N + BN - 1) / BN, per = (tn + gridDim.y - 1) / gridDim.y;
	const int nt0 = blockIdx.y * per, nt1 = min(tn, nt0 + per);

	{
		float acc1[ML1::MI][ML1::NI][4];
		const int r0 = (warp / WN_) * ML1::WM, c0 = (warp % WN_) * ML1::WN;

		ML1::run(acc1, X, K, V, K, m0, 0, M, R, K, ring);
#pragma unroll
		for (int mi = 0; mi < ML1::MI; mi++)
#pragma unroll
			for (int ni = 0; ni < ML1::NI; ni++) {
				int r = r0 + mi * 16 + (lane >> 2);
				int c = c0 + ni * 8 + (lane & 3) * 2;
				unsigned o = zs + kt_swz<ZCH>(r, c >> 3) + (c & 7) * 2;

				asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
					     "r"(kt_pack_bf16x2(acc1[mi][ni][0], acc1[mi][ni][1])));
				o = zs + kt_swz<ZCH>(r + 8, c >> 3) + (c & 7) * 2;
				asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
					     "r"(kt_pack_bf16x2(acc1[mi][ni][2], acc1[mi][ni][3])));
			}
	}
	/* z complete and the stage-1 ring free for U tiles */
	__syncthreads();
	if (nt0 >= nt1)
		return;

	const int total = (nt1 - nt0) * KT2;
	tile_loader<BN, BK, NT> lb;
	float acc[MI][NI][4];
	unsigned af[2][MI][4], bfr[2][NI][2];
	int rs = 0, ws = ST - 1, kt = 0, nt = nt0;

#pragma unroll
	for (int s = 0; s < ST - 1; s++) {
		if (s < total) {
			lb.init(U, R, (nt0 + s / KT2) * BN, N, tid);
			lb.load(ring + s * B_STAGE, (s % KT2) * BK, R);
		}
		kt_cp_async_commit();
	}
	kt_zero_frags(acc);
	kt_cp_async_wait<ST - 2>();
	__syncthreads();
	load_a_frags<MI, ZCH>(af[0], zs, wrow, 0, lane);
	load_b_frags<NI, (BK / 8)>(bfr[0], ring, wcol, 0, lane);

	for (int it = 0; it < total; it++) {
#pragma unroll
		for (int kk = 0; kk < KSTEPS; kk++) {
			int ka = kk + 1 < KSTEPS ? kt * KSTEPS + kk + 1
						 : (kt + 1 == KT2 ? 0 : (kt + 1) * KSTEPS);

			if (kk == KSTEPS - 1) {
				kt_cp_async_wait<ST - 2>();
				__syncthreads();
				rs = rs == ST - 1 ? 0 : rs + 1;
			}
			load_a_frags<MI, ZCH>(af[(kk + 1) & 1], zs, wrow, ka, lane);
			load_b_frags<NI, (BK / 8)>(bfr[(kk + 1) & 1], ring + rs * B_STAGE, wcol,
						   (kk + 1) % KSTEPS, lane);
			if (kk == 0) {
				int li = it + ST - 1;

				if (li < total) {
					lb.init(U, R, (nt0 + li / KT2) * BN, N, tid);
					lb.load(ring + ws * B_STAGE, (li % KT2) * BK, R);
				}
				kt_cp_async_commit();
				ws = ws == ST - 1 ? 0 : ws + 1;
			}
			mma_step<MI, NI>(acc, af[kk & 1], bfr[kk & 1]);
		}
		if (++kt == KT2) {
			store_acc<MI, NI>(acc, Y, N, m0 + wrow, nt * BN + wcol, M, N, lane);
			kt_zero_frags(acc);
			kt = 0;
			nt++;
		}
	}
	kt_cp_async_wait<0>();
}

} /* namespace ktg */
