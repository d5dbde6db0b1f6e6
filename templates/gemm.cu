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
 * WARPS_M x WARPS_N (warp split of the CTA tile), STAGES (pipeline depth,
 * >= 2), GROUP_M (tile rows walked together for L2 reuse; 1 = row-major
 * tile order), SPLIT_K (> 1: fp32 partials that splitk_reduce sums), WGMMA
 * or WS (the sm_90a main loops; with WS: CONSUMERS, EPILOGUE, CLUSTER_M,
 * PERSISTENT, PINGPONG, L2_HINT), output column remaps COLGRP/COLGSTRIDE and COLSTEP
 * (monarch's relayout variants), KT_PDL with PDL_PREFETCH (gemm_mma.cuh).
 * Each is described where it is checked or used.
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
 *       With -DPINGPONG=1 (gemm_pingpong.cuh): (tA, tB, tC, M, N, K, zA,
 *       zB, batch), grid (P, 1, 1), C stored through the tensor map tC.
 *   splitk_reduce(W, C, M, N, ldc, splits)   the split-K sum into bf16 C.
 *   lowrank_fused(X, V, U, Y, M, K, N)   only when RANK is defined:
 *       Y (M x N) = (X (M x K) . V (RANK x K)^T) . U (N x RANK)^T with the
 *       BLOCK_M x RANK intermediate kept in shared memory (see below).
 *
 * The main loops live in one file each, included below in this order:
 * gemm_epi.cuh (the accumulator stores, tile order and split-K reduction
 * they share), gemm_mma.cuh (mma.sync: gemm_tn, lowrank_fused),
 * gemm_wgmma.cuh (-DWGMMA=1), gemm_ws.cuh (-DWS=1, the warp-specialized
 * TMA kernel that keeps up with cuBLAS; docs/families/dense.md compares the
 * three) and gemm_pingpong.cuh (-DWS=1 -DPINGPONG=1, two consumer
 * warpgroups taking turns on whole tiles). Their bodies are C++ templates; NVRTC only sees the -D configured
 * instance. blast.cu and monarch.cu include this file with
 * -DKT_GEMM_NO_KERNELS=1 for the bodies alone.
 */
#include "common.cuh"

/*
 * COLGRP and COLGSTRIDE (no split-K; with WS the staged epilogue only):
 * output column c lands at (c / COLGRP) * COLGSTRIDE + c % COLGRP of its
 * row, a C cut into groups of COLGRP columns that lie COLGSTRIDE elements
 * apart. COLGRP % 8 == 0, so no 16-byte chunk and no stored pair straddles
 * two groups (monarch's middle permutation). COLSTEP k > 1 (gemm_tn only):
 * column c lands at c * k of its row in 2-byte stores, so ldc and C's batch
 * stride need no alignment (monarch's interleaved y at decode).
 */
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

#include "gemm_epi.cuh"
#include "gemm_mma.cuh"
#include "gemm_wgmma.cuh"
#include "gemm_ws.cuh"
#include "gemm_pingpong.cuh"

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
/* split-K's slices of a tile reduce through distributed shared memory:
 * C is then the bf16 output itself */
#define KT_WS_CLUSTER __cluster_dims__(1, SPLIT_K, 1)
#else
#define KT_WS_CLUSTER
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#if PINGPONG
#if PERSISTENT || SPLIT_K > 1 || CLUSTER_M > 1 || SPLIT_CLUSTER || CONSUMERS != 2 || \
	EPILOGUE != 1 || COLGRP
#error "gemm.cu -DPINGPONG=1: CONSUMERS=2, the TMA-store epilogue, no split-K, clusters, column groups or PERSISTENT"
#endif
/* grid (P, 1, 1): two consumer warpgroups each own whole BLOCK_M x BLOCK_N
 * tiles and take turns (gemm_pingpong.cuh has the contract); C only
 * through tC, a rank-3 map (N, M, batch) with box (64, BLOCK_M, 1) */
extern "C" __global__ void __launch_bounds__(384, 1)
gemm_tn_ws(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB,
	   const __grid_constant__ kt_tmap_t tC, int M, int N, int K, int zA, int zB, int batch)
{
	kt_pdl_wait();
	ktg::gemm_tn_ws_pingpong_body<BLOCK_M, BLOCK_N, STAGES, GROUP_M>(&tA, &tB, &tC, M, N, K, zA,
									zB, batch);
}
#elif PERSISTENT
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
