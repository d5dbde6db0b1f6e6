/*
 * gemm_wgmma.cuh -- gemm.cu's sm_90a main loop on wgmma with cp.async
 * operands (-DWGMMA=1; gemm_tn_wgmma_body). Included by gemm.cu after
 * gemm_mma.cuh, whose tile loader it uses.
 */
#if defined(KT_WGMMA) || defined(WGMMA) || defined(WS)
namespace ktg {

/*
 * The sm_90a path: warpgroup MMA (wgmma.mma_async) reading both operands
 * straight from shared memory through matrix descriptors. Each warpgroup
 * (4 warps) owns 64 rows x BLOCK_N columns of the CTA tile. BLOCK_K is 64,
 * so one K-contiguous row is 128 bytes and the XOR swizzle of kt_swz<8> is
 * exactly the hardware's 128-byte swizzle (16-byte chunk ^= row % 8 within
 * 1024-byte groups of 8 rows): cp.async fills the tiles in the layout the
 * tensor cores read, no TMA needed. The wgmma wrappers and descriptors are
 * common.cuh's (kt_wg).
 *
 * Pipeline: STAGES buffers. With INFL = 1 one wgmma group (four k16 steps)
 * stays in flight across the barrier and STAGES-2 tiles load ahead: the
 * stage refilled in iteration kt is the one read in kt-2, which every
 * warpgroup has retired (wait_group 1 at the end of kt-1) before that
 * barrier. INFL = 0 drains the tensor cores each k-tile but loads one tile
 * further ahead (WG_INFLIGHT=0).
 */
template <int BM, int BN, int ST, int GM, bool F32 = false, int INFL = 1>
KT_DEV void gemm_tn_wgmma_body(const __nv_bfloat16 *A, const __nv_bfloat16 *B, void *Cv,
			       int M, int N, int K, long long lda, long long ldb, long long ldc,
			       long long sA, long long sB, long long sC)
{
	const int BK = 64, NT = (BM / 64) * 128;
	const int A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
	extern __shared__ __align__(1024) unsigned char kt_smem_wg[];
	/* the swizzle is anchored to 1024-byte address boundaries */
	const unsigned base = (kt_smem_u32(kt_smem_wg) + 1023u) & ~1023u;
	const unsigned sA0 = base, sB0 = base + ST * A_STAGE;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
	const int KT = (K + BK - 1) / BK;
	tile_loader<BM, BK, NT> la;
	tile_loader<BN, BK, NT> lb;
	float acc[1][BN / 8][4];
	int m0, n0;

	/* INFL wgmma groups stay in flight across the barrier; the ring then
	 * loads LA = STAGES-1-INFL tiles ahead */
	const int LA = ST - 1 - INFL;
	static_assert(LA >= 1, "wgmma pipeline needs STAGES > 1 + INFL");
	tile_coords<BM, BN, GM>(M, N, m0, n0);
	A += blockIdx.z * sA;
	B += blockIdx.z * sB;
	kt_zero_frags(acc);
	la.init(A, lda, m0, M, tid);
	lb.init(B, ldb, n0, N, tid);
#pragma unroll
	for (int s = 0; s < LA; s++) {
		if (s < KT) {
			la.load(sA0 + s * A_STAGE, s * BK, K);
			lb.load(sB0 + s * B_STAGE, s * BK, K);
		}
		kt_cp_async_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		const int rs = kt % ST, nk = kt + LA;

		kt_cp_async_wait<LA - 1>();
		kt_fence_proxy_async();
		__syncthreads();
		if (nk < KT) {
			la.load(sA0 + (nk % ST) * A_STAGE, nk * BK, K);
			lb.load(sB0 + (nk % ST) * B_STAGE, nk * BK, K);
		}
		kt_cp_async_commit();
		{
			unsigned long long da = kt_wg_desc_k(sA0 + rs * A_STAGE + wg * 64 * 128);
			unsigned long long db = kt_wg_desc_k(sB0 + rs * B_STAGE);

			kt_wg_fence();
#pragma unroll
			for (int kk = 0; kk < BK / 16; kk++)
				/* +32 bytes per k16 step: the hardware applies the
				 * swizzle to the advanced address */
				kt_wg<BN>::ss<0, 0>(acc[0], da + 2 * kk, db + 2 * kk);
			kt_wg_commit();
		}
		kt_wg_wait<INFL>();
	}
	kt_wg_wait<0>();
	kt_cp_async_wait<0>();
	if (F32)
		store_acc_f32<1, BN / 8>(acc, (float *)Cv + blockIdx.z * sC, ldc,
					 m0 + wg * 64 + (warp & 3) * 16, n0, M, N, lane);
	else
		store_acc<1, BN / 8>(acc, (__nv_bfloat16 *)Cv + blockIdx.z * sC, ldc,
				     m0 + wg * 64 + (warp & 3) * 16, n0, M, N, lane);
}

} /* namespace ktg */
#endif
