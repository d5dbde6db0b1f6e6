/*
 * gemm.cu -- the tiled bf16 "TN" GEMM core of ktune (sm_80+ mma.sync;
 * sm_90a wgmma with -DWGMMA=1; sm_90a warp-specialized TMA with -DWS=1).
 *
 *   C[z] (M x N) = A[z] (M x K) . B[z] (N x K)^T      z = blockIdx.z (batch)
 *
 * A and B are row-major and K-contiguous (y = x W^T with M = tokens,
 * N = out, K = in), fp32 accumulation, bf16 output, runtime M, N, K, leading
 * dimensions and batch strides (in elements). Requirements, checked by the
 * host plan (kernels/gemm_plan.c): K, N, lda, ldb, ldc and the batch strides
 * are multiples of 8 and the pointers 16-byte aligned (cp.async moves 16
 * bytes); M, N and K edges are masked, so no tile size has to divide.
 *
 * Compile-time parameters (-D): BLOCK_M, BLOCK_N, BLOCK_K (32 or 64),
 * WARPS_M x WARPS_N (warp split of the CTA tile), STAGES (cp.async pipeline
 * depth, >= 2), GROUP_M (rows of CTA tiles walked together for L2 reuse;
 * 1 = plain row-major tile order), SPLIT_K (default 1: > 1 writes fp32
 * partials that splitk_reduce sums), WGMMA (sm_90a warpgroup MMA path);
 * with WS: CONSUMERS (1 or 2), EPILOGUE (1 staged, 0 direct), CLUSTER_M,
 * PERSISTENT (1: a fixed grid walks every (tile, batch) work item),
 * COLGRP and COLGSTRIDE (no split-K; with WS the staged epilogue: output
 * column c lands at (c / COLGRP) * COLGSTRIDE + c % COLGRP of its row, a C
 * cut into groups of COLGRP columns that lie COLGSTRIDE elements apart;
 * COLGRP % 8 == 0, so no 16-byte chunk, and no pair gemm_tn stores from
 * its accumulators, straddles two; monarch's relayout variants write their
 * middle permutation this way), COLSTEP (gemm_tn only, k > 1: output column
 * c lands at c * k of its row, in 2-byte stores, so ldc and the batch
 * stride of C need no alignment; monarch's relayout variants write their
 * interleaved y this way at decode), KT_PDL with PDL_PREFETCH (gemm_tn on
 * the mma.sync path, sm_90, split-K too: launched as a programmatic
 * dependent, it loads its first B stages, then waits for the kernel
 * before, whose dependents it lets start at once; B must not be that
 * kernel's output).
 *
 * Kernels (extern "C"):
 *   gemm_tn(A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC)
 *       grid (ceil(M/BLOCK_M) * ceil(N/BLOCK_N), SPLIT_K, batch),
 *       block WARPS_M*WARPS_N*32, dynamic smem STAGES*(BLOCK_M+BLOCK_N)*BLOCK_K*2
 *       (+1024 with WGMMA, whose plan sets BLOCK_K=64, WARPS_M=BLOCK_M/16,
 *       WARPS_N=1). SPLIT_K > 1: C is an fp32 workspace (batch 1 only).
 *   gemm_tn_ws(tA, tB, C, M, N, K, ldc, sC, zA, zB)   with -DWS=1 instead of
 *       gemm_tn: A and B as TMA tensor maps (see its comment below); with
 *       SPLIT_K > 1 grid.y = SPLIT_K and C an fp32 workspace, as gemm_tn.
 *       With -DPERSISTENT=1: (..., zA, zB, batch), grid (P, 1, 1).
 *   splitk_reduce(W, C, M, N, ldc, splits)   the split-K sum into bf16 C.
 *   lowrank_fused(X, V, U, Y, M, K, N)   only when RANK is defined:
 *       Y (M x N) = (X (M x K) . V (RANK x K)^T) . U (N x RANK)^T with the
 *       BLOCK_M x RANK intermediate kept in shared memory (see below).
 *
 * The body is a C++ template so that the dev harness (tools/gemm_probe.cu)
 * can instantiate many configurations in one nvcc build; NVRTC only ever
 * sees the -D configured instance.
 *
 * -DWS=1 (sm_90a) builds gemm_tn_ws instead, the warp-specialized kernel:
 * TMA loads into an mbarrier ring from a producer warpgroup, CONSUMERS
 * wgmma warpgroups, a staged epilogue (see gemm_tn_ws_body). It is the one
 * that keeps up with cuBLAS on the H200; docs/families/dense.md compares
 * the three main loops.
 *
 * NEEDSWORK: gemm_tn and the cp.async wgmma path store bf16 pairs straight
 * from the accumulators (the ws kernel's staged epilogue is ~12% faster at
 * 1024x4096x4096); they stay as they were. The ws kernel's split-K through
 * the workspace (SPLIT_K with WS: fp32 partials stored from the
 * accumulators, no staged epilogue) is compiled and planned but NOT yet
 * verified or timed on a GPU.
 */
#include "common.cuh"

#ifndef COLGRP
#define COLGRP 0
#endif
#if COLGRP
/* the element offset, within its row, of output column gc (see COLGRP) */
#define KT_COL(gc) ((long long)((gc) / COLGRP) * (COLGSTRIDE) + (gc) % COLGRP)
#else
#define KT_COL(gc) (gc)
#endif
#if COLGRP && (COLGRP % 8 || !defined(COLGSTRIDE) || (defined(SPLIT_K) && SPLIT_K > 1))
#error "gemm.cu -DCOLGRP: a multiple of 8, with -DCOLGSTRIDE, no split-K"
#endif
#ifndef COLSTEP
#define COLSTEP 1
#endif
#if COLSTEP > 1 && (COLGRP || defined(WS) || (defined(SPLIT_K) && SPLIT_K > 1))
#error "gemm.cu -DCOLSTEP: gemm_tn only (not -DWS=1), without COLGRP or split-K"
#endif
/*
 * L2_HINT (ws kernels, bits; 0 leaves the code as it was): 1 A's TMA loads
 * evict_first, 2 B's (operands streamed once); 4 the staged epilogue's
 * stores of C evict_last (an intermediate the next kernel reads).
 * common.cuh says what the policies do.
 */
#ifndef L2_HINT
#define L2_HINT 0
#endif
#if L2_HINT && (!defined(WS) || L2_HINT > 7)
#error "gemm.cu -DL2_HINT: bits 1, 2 and 4, the ws kernels only (-DWS=1)"
#endif

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

/* Stores the warp's accumulators as bf16 pairs, masked at the M/N edges
 * (N is even, so a pair is either wholly inside or wholly outside), column
 * c of C at KT_COL(c) of its row (a pair never straddles a COLGRP group). */
template <int MI, int NI>
KT_DEV void store_acc(const float (&acc)[MI][NI][4], __nv_bfloat16 *C, long long ldc,
		      int row0, int col0, int M, int N, int lane)
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++) {
			int r = row0 + mi * 16 + (lane >> 2);
			int c = col0 + ni * 8 + (lane & 3) * 2;

			if (c < N) {
#if COLSTEP > 1
				/* column c at c * COLSTEP: two 2-byte stores */
				__nv_bfloat16 *p = C + (long long)r * ldc + (long long)c * COLSTEP;

				if (r < M) {
					p[0] = __float2bfloat16_rn(acc[mi][ni][0]);
					p[COLSTEP] = __float2bfloat16_rn(acc[mi][ni][1]);
				}
				if (r + 8 < M) {
					p[8 * ldc] = __float2bfloat16_rn(acc[mi][ni][2]);
					p[8 * ldc + COLSTEP] = __float2bfloat16_rn(acc[mi][ni][3]);
				}
#else
				if (r < M)
					*reinterpret_cast<unsigned *>(C + (long long)r * ldc + KT_COL(c)) =
						kt_pack_bf16x2(acc[mi][ni][0], acc[mi][ni][1]);
				if (r + 8 < M)
					*reinterpret_cast<unsigned *>(C + (long long)(r + 8) * ldc +
								      KT_COL(c)) =
						kt_pack_bf16x2(acc[mi][ni][2], acc[mi][ni][3]);
#endif
			}
		}
}

/* Split-K partials: the same fragments as fp32 pairs into a workspace. */
template <int MI, int NI>
KT_DEV void store_acc_f32(const float (&acc)[MI][NI][4], float *W, long long ldw, int row0,
			  int col0, int M, int N, int lane)
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++) {
			int r = row0 + mi * 16 + (lane >> 2);
			int c = col0 + ni * 8 + (lane & 3) * 2;

			if (c < N) {
				if (r < M)
					*reinterpret_cast<float2 *>(W + (long long)r * ldw + c) =
						make_float2(acc[mi][ni][0], acc[mi][ni][1]);
				if (r + 8 < M)
					*reinterpret_cast<float2 *>(W + (long long)(r + 8) * ldw + c) =
						make_float2(acc[mi][ni][2], acc[mi][ni][3]);
			}
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

#pragma unroll
		for (int mi = 0; mi < MI; mi++)
#pragma unroll
			for (int ni = 0; ni < NI; ni++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[mi][ni][j] = 0.f;

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

/* CTA tile coordinates in GROUP_M-swizzled order: GROUP_M tile rows are
 * walked column by column, so CTAs running together share A rows and B
 * columns in L2. */
template <int BM, int BN, int GM>
KT_DEV void tile_coords(int M, int N, int &m0, int &n0)
{
	int pid = blockIdx.x;
	int tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;

	if (GM <= 1) {
		m0 = (pid / tn) * BM;
		n0 = (pid % tn) * BN;
		return;
	}
	int in_group = GM * tn;
	int first = (pid / in_group) * GM;
	int gsize = min(tm - first, GM);
	int local = pid % in_group;

	m0 = (first + local % gsize) * BM;
	n0 = (local / gsize) * BN;
}

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
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				acc[mi][ni][j] = 0.f;
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
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int ni = 0; ni < NI; ni++)
#pragma unroll
					for (int j = 0; j < 4; j++)
						acc[mi][ni][j] = 0.f;
			kt = 0;
			nt++;
		}
	}
	kt_cp_async_wait<0>();
}

#if defined(KT_WGMMA) || defined(WGMMA) || defined(WS)
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
#pragma unroll
	for (int j = 0; j < BN / 8; j++)
#pragma unroll
		for (int q = 0; q < 4; q++)
			acc[0][j][q] = 0.f;
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
 * CTA loads only its slice and stores fp32 partials straight from the
 * accumulators into slice blockIdx.y of a workspace (M x ldc, batch 1),
 * which splitk_reduce sums.
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
/* Tile pid of an M x N output in GROUP_M order: GM tile rows walked
 * together (L2 reuse of B), then the next GM. */
template <int BM, int BN, int GM>
KT_DEV void ws_tile_at(int pid, int M, int N, int &m0, int &n0)
{
	int tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;

	if (GM <= 1) {
		m0 = (pid / tn) * BM;
		n0 = (pid % tn) * BN;
	} else {
		int in_group = GM * tn;
		int first = (pid / in_group) * GM;
		int gsize = min(tm - first, GM);
		int local = pid % in_group;

		m0 = (first + local % gsize) * BM;
		n0 = (local / gsize) * BN;
	}
}

template <int BM, int BN, int GM, int CM>
KT_DEV void ws_tile_coords(int M, int N, int &m0, int &n0)
{
	/* CM vertically adjacent tiles form one (CM*BM) x BN super-tile */
	ws_tile_at<CM * BM, BN, GM>(blockIdx.x / CM, M, N, m0, n0);
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
			asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
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
			asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
		const int c = wg - 1;
		float acc[MW][1][BN / 8][4];

#pragma unroll
		for (int mw = 0; mw < MW; mw++)
#pragma unroll
			for (int j = 0; j < BN / 8; j++)
#pragma unroll
				for (int q = 0; q < 4; q++)
					acc[mw][0][j][q] = 0.f;
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
			/* SPLIT_CLUSTER: the two K slices of a tile are a
			 * cluster (1, 2, 1). Once both main loops are done (the
			 * ring is free), slice 1 writes its fp32 fragments into
			 * slice 0's ring (thread t's float4 q at (q * CONS*128 +
			 * t) * 16 bytes: a warp's stores are contiguous), then
			 * slice 0 adds them and stores bf16 C as a whole tile. */
			constexpr int NQ = MW * (BN / 8);	/* float4s a thread */
			const int ct = tid - 128;

			static_assert(!SC || (SK == 2 && CM == 1),
				      "the cluster reduce pairs two K slices, no CLUSTER_M");
			static_assert(!SC || NQ * CONS * 128 * 16 <= ST * (BM + BN) * BK * 2,
				      "slice 1's fragments fit in slice 0's ring");
			kt_cluster_sync();
			if (blockIdx.y == 1) {
#pragma unroll
				for (int mw = 0; mw < MW; mw++)
#pragma unroll
					for (int j = 0; j < BN / 8; j++) {
						const unsigned o = sA0 + ((mw * (BN / 8) + j) * CONS * 128 + ct) * 16;

						asm volatile("{\n.reg .b32 ra;\n"
							     "mapa.shared::cluster.u32 ra, %0, 0;\n"
							     "st.shared::cluster.v4.f32 [ra], {%1, %2, %3, %4};\n}\n"
							     ::"r"(o), "f"(acc[mw][0][j][0]), "f"(acc[mw][0][j][1]),
							     "f"(acc[mw][0][j][2]), "f"(acc[mw][0][j][3])
							     : "memory");
					}
			}
			kt_cluster_sync();
			if (blockIdx.y == 1)
				return;	/* slice 0 stores the tile */
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
#pragma unroll
				for (int j = 0; j < BN / 8; j++) {
					const unsigned o = sA0 + ((mw * (BN / 8) + j) * CONS * 128 + ct) * 16;
					float v0, v1, v2, v3;

					asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
						     : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
						     : "r"(o)
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

					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][0],
									acc[mw][0][ni][1])));
					asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o + 8 * PITCH),
						     "r"(kt_pack_bf16x2(acc[mw][0][ni][2],
									acc[mw][0][ni][3])));
				}
			kt_bar_sync(2 + c, 128);
#pragma unroll 4
			for (int i = t; i < RW * CH; i += 128) {
				const int r = i / CH, ch = i % CH;
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
			asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
		if (tid == 0) {
			int it = 0;
			const unsigned long long pol = kt_l2_evict_first_if<(L2_HINT & 3) != 0>();

			kt_tmap_prefetch(tA);
			kt_tmap_prefetch(tB);
			for (int w = blockIdx.x; w < items; w += gridDim.x) {
				const int z = w / tiles;
				const int a1 = zA == 2 ? z : 0, a2 = zA == 2 ? 0 : z * zA;
				const int b1 = zB == 2 ? z : 0, b2 = zB == 2 ? 0 : z * zB;
				int m0, n0;

				ws_tile_at<BM, BN, GM>(w - z * tiles, M, N, m0, n0);
				for (int kt = 0; kt < KT; kt++, it++) {
					const int s = it % ST, kk = kt * BK;
					const unsigned fb = full0 + s * 8;

					/* chunk it - ST, of this tile or an earlier
					 * one, has been released */
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
	} else {
		/* consumers */
		if (CONS > 1)
			asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
		const int c = wg - 1, t = tid & 127;
		const unsigned st0 = epi0 + c * RW * SW * 2;
		const unsigned long long cpol = kt_l2_evict_last_if<(L2_HINT & 4) != 0>();
		float acc[MW][1][BN / 8][4];
		int it = 0;

		for (int w = blockIdx.x; w < items; w += gridDim.x) {
			const int z = w / tiles;
			__nv_bfloat16 *C = (__nv_bfloat16 *)Cv + (long long)z * sC;
			int m0, n0;

			ws_tile_at<BM, BN, GM>(w - z * tiles, M, N, m0, n0);
#pragma unroll
			for (int mw = 0; mw < MW; mw++)
#pragma unroll
				for (int j = 0; j < BN / 8; j++)
#pragma unroll
					for (int q = 0; q < 4; q++)
						acc[mw][0][j][q] = 0.f;
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
#endif

/* C (bf16, row stride ldc) = sum of the `splits` fp32 slices of W
 * (M x N each, row stride N). Four columns per thread (N % 8 == 0).
 * grid ceil(M*N/4 / 256), block 256. */
KT_DEV void splitk_reduce_body(const float *W, __nv_bfloat16 *C, int M, int N, long long ldc,
			       int splits)
{
	long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
	const long long slice = (long long)M * N;

	if (i >= slice)
		return;
	float4 acc = *reinterpret_cast<const float4 *>(W + i);
	for (int s = 1; s < splits; s++) {
		float4 v = *reinterpret_cast<const float4 *>(W + s * slice + i);

		acc.x += v.x;
		acc.y += v.y;
		acc.z += v.z;
		acc.w += v.w;
	}
	long long r = i / N, c = i % N;
	uint2 out = make_uint2(kt_pack_bf16x2(acc.x, acc.y), kt_pack_bf16x2(acc.z, acc.w));

	*reinterpret_cast<uint2 *>(C + r * ldc + c) = out;
}

} /* namespace ktg */

#ifndef KT_GEMM_NO_KERNELS

#if defined(WS)
#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(STAGES)
#error "gemm.cu -DWS=1 needs -DBLOCK_M -DBLOCK_N -DSTAGES (and -DCONSUMERS, -DEPILOGUE)"
#endif
#elif !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(BLOCK_K) || !defined(WARPS_M) || \
	!defined(WARPS_N) || !defined(STAGES)
#error "gemm.cu needs -DBLOCK_M -DBLOCK_N -DBLOCK_K -DWARPS_M -DWARPS_N -DSTAGES"
#endif
#ifndef GROUP_M
#define GROUP_M 1
#endif

#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef WG_INFLIGHT
#define WG_INFLIGHT 1
#endif

#ifdef WS
#ifndef CONSUMERS
#define CONSUMERS 2
#endif
#ifndef EPILOGUE
#define EPILOGUE 1
#endif
#if COLGRP && EPILOGUE == 0
#error "gemm.cu -DCOLGRP with -DWS=1: the staged epilogue only"
#endif
/*
 * -DWS=1 (sm_90a): the warp-specialized TMA kernel alone (no gemm_tn).
 * grid (ceil(M/BLOCK_M) * ceil(N/BLOCK_N), 1, batch) -- with CLUSTER_M=2,
 * 2 * ceil(M/(2*BLOCK_M)) * ceil(N/BLOCK_N) and tB's box (64, BLOCK_N/2, 1)
 * --, block
 * (CONSUMERS + 1) * 128, dynamic smem 1024 + STAGES*(BLOCK_M+BLOCK_N)*128
 * + 256. tA: rank-3 map over A (K, M, batch), box (64, BLOCK_M, 1); tB over
 * B (K, N, batch), box (64, BLOCK_N, 1); both 128-byte swizzled. zA, zB:
 * 1, or 0 for an operand every batch shares.
 */
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
#ifndef SPLIT_CLUSTER
#define SPLIT_CLUSTER 0
#endif
#if CLUSTER_M > 1
#define KT_WS_CLUSTER __cluster_dims__(CLUSTER_M, 1, 1)
#elif SPLIT_CLUSTER
/* split-K's two slices of a tile reduce through distributed shared memory:
 * C is then the bf16 output itself */
#define KT_WS_CLUSTER __cluster_dims__(1, 2, 1)
#else
#define KT_WS_CLUSTER
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#if PERSISTENT
#if SPLIT_K > 1 || CLUSTER_M > 1
#error "gemm.cu -DPERSISTENT=1: no split-K or clusters (one walk of whole tiles per CTA)"
#endif
/* grid (P, 1, 1): CTA b computes work items b, b + P, ... of the
 * ceil(M/BLOCK_M) * ceil(N/BLOCK_N) * batch (tile, batch) pairs; with
 * EPILOGUE=1 the dynamic smem grows by BLOCK_M * min(BLOCK_N, 128) * 2 (the
 * staging area, before the barriers). */
extern "C" __global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1)
gemm_tn_ws(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB,
	   void *C, int M, int N, int K, long long ldc, long long sC, int zA, int zB, int batch)
{
	kt_pdl_wait();
	ktg::gemm_tn_ws_persistent_body<BLOCK_M, BLOCK_N, STAGES, CONSUMERS, GROUP_M, EPILOGUE>(
		&tA, &tB, C, M, N, K, ldc, sC, zA, zB, batch);
}
#else
extern "C" __global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1) KT_WS_CLUSTER
gemm_tn_ws(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB,
	   void *C, int M, int N, int K, long long ldc, long long sC, int zA, int zB)
{
	kt_pdl_wait();
	ktg::gemm_tn_ws_body<BLOCK_M, BLOCK_N, STAGES, CONSUMERS, GROUP_M, EPILOGUE, CLUSTER_M,
			     SPLIT_K, SPLIT_CLUSTER>(&tA, &tB, C, M, N, K, ldc, sC, zA, zB);
}
#endif /* PERSISTENT */
#else
/*
 * SPLIT_K > 1: blockIdx.y picks a slice of K (whole BLOCK_K tiles); C is
 * then an fp32 workspace of SPLIT_K slices of M x ldc, slice after slice
 * (batch 1 only), that splitk_reduce sums into the bf16 output. A slice
 * past the end of K still writes its (zero) partial.
 */
extern "C" __global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
gemm_tn(const __nv_bfloat16 *A, const __nv_bfloat16 *B, void *C, int M, int N, int K,
	long long lda, long long ldb, long long ldc, long long sA, long long sB, long long sC)
{
#if SPLIT_K > 1
	const int kc = (K + BLOCK_K * SPLIT_K - 1) / (BLOCK_K * SPLIT_K) * BLOCK_K;
	const int k0 = blockIdx.y * kc;
	const bool f32 = true;

	A += k0;
	B += k0;
	K = min(K - k0, kc);
	C = (float *)C + (long long)blockIdx.y * M * ldc;
#else
	const bool f32 = false;
#endif
#ifdef WGMMA
	/* -DWGMMA=1 (sm_90a): WARPS_M = BLOCK_M / 16, i.e. BLOCK_M / 64
	 * warpgroups of 4 warps */
	ktg::gemm_tn_wgmma_body<BLOCK_M, BLOCK_N, STAGES, GROUP_M, f32, WG_INFLIGHT>(A, B, C, M, N, K, lda, ldb,
									ldc, sA, sB, sC);
#else
	ktg::gemm_tn_body<BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES, GROUP_M, f32>(
		A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC);
#endif
}
#endif /* WS */

extern "C" __global__ void __launch_bounds__(256)
splitk_reduce(const float *W, __nv_bfloat16 *C, int M, int N, long long ldc, int splits)
{
	kt_pdl_wait();	/* -DKT_PDL=1: launched as the GEMM's dependent */
	ktg::splitk_reduce_body(W, C, M, N, ldc, splits);
}

#ifdef RANK
/* grid (ceil(M/BLOCK_M), N_SPLIT), block WARPS_M*WARPS_N*32, dynamic smem
 * BLOCK_M*RANK*2 + STAGES*max(BLOCK_M+RANK, BLOCK_N)*BLOCK_K*2. */
extern "C" __global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
lowrank_fused(const __nv_bfloat16 *X, const __nv_bfloat16 *V, const __nv_bfloat16 *U,
	      __nv_bfloat16 *Y, int M, int K, int N)
{
	ktg::lowrank_fused_body<BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES, RANK>(
		X, V, U, Y, M, K, N);
}
#endif

#endif /* KT_GEMM_NO_KERNELS */
