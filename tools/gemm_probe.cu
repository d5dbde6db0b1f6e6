/*
 * gemm_probe.cu -- dev harness for templates/gemm.cu (not part of ktune).
 *
 * Instantiates a list of GEMM tiles (and fused low-rank tiles) in one nvcc
 * build, checks each against cuBLAS on the same inputs (relative L2 error)
 * and times both with CUDA events, L2 flushed before every repetition.
 * The warp-specialized TMA tiles (gemm_probe_wcfgs.h) get their tensor maps
 * from cuTensorMapEncodeTiled (through cudaGetDriverEntryPointByVersion, so
 * no -lcuda), built as the worker builds a KT_ARG_TMAP; they are also run
 * batched (rank-3 maps, padded strides, a shared B, and batches side by
 * side within each row -- monarch's stage 1 -- through the (k, batch, rows)
 * map with zA = 2). The ws split-K tiles (wskcfgs below: K over grid.y
 * into an fp32 workspace, then splitk_reduce) run where the tiles leave
 * half the SMs idle, as kt_gemm_check allows them. A summary table comes
 * last; the exit status is 3 when any result was wrong.
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Itemplates \
 *        -o build-dev/gemm_probe tools/gemm_probe.cu -lcublas
 *   build-dev/gemm_probe [reps]        prints one line per (shape, config)
 *
 * Built on the build machine and run on the GPU machine (with
 * LD_LIBRARY_PATH=/usr/local/cuda/lib64); on the H200 the lists in
 * gemm_probe_cfgs.h / gemm_probe_wcfgs.h / gemm_probe_fcfgs.h and the
 * split-K list below take well under a minute. `gemm_probe 1 small` runs only the edge
 * shape and the batched checks (for compute-sanitizer); `gemm_probe 30
 * persist` only the persistent ws kernel (-DPERSISTENT=1) against the
 * one-tile one (pcfgs: edge shapes with 1, 5 and SM-count CTAs, then
 * BLAST's batched stages, timed; a table last; `persist small` the edge
 * shapes only, for compute-sanitizer); `gemm_probe 30 pingpong` the
 * ping-pong kernel (-DPINGPONG=1, ppcfgs) on edge shapes, then timed beside
 * cuBLAS, the one-tile and the persistent ws kernels on the stage GEMMs
 * (`pingpong small`: the edge shapes only). PROBE_NO_CM2=1
 * leaves the cluster tiles out. A first launch that does not finish in
 * 10 s prints HANG and exits 4.
 */
#define KT_GEMM_NO_KERNELS 1
#define KT_WGMMA 1
#include "../templates/gemm.cu"

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "probe.h"

typedef __nv_bfloat16 bf;

template <int BM, int BN, int BK, int WM, int WN, int ST, int GM>
__global__ void __launch_bounds__(WM * WN * 32, 1)
k_gemm(const bf *A, const bf *B, bf *C, int M, int N, int K, long long lda, long long ldb,
       long long ldc, long long sA, long long sB, long long sC)
{
	ktg::gemm_tn_body<BM, BN, BK, WM, WN, ST, GM>(A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC);
}

template <int BM, int BN, int BK, int WM, int WN, int ST, int R>
__global__ void __launch_bounds__(WM * WN * 32, 1)
k_fused(const bf *X, const bf *V, const bf *U, bf *Y, int M, int K, int N)
{
	ktg::lowrank_fused_body<BM, BN, BK, WM, WN, ST, R>(X, V, U, Y, M, K, N);
}

template <int BM, int BN, int ST, int GM, int INFL = 1>
__global__ void __launch_bounds__(BM / 64 * 128, 1)
k_wgmma(const bf *A, const bf *B, bf *C, int M, int N, int K, long long lda, long long ldb,
	long long ldc, long long sA, long long sB, long long sC)
{
	ktg::gemm_tn_wgmma_body<BM, BN, ST, GM, false, INFL>(A, B, C, M, N, K, lda, ldb, ldc, sA,
							     sB, sC);
}

template <int BM, int BN, int ST, int CONS, int GM, int EPI>
__global__ void __launch_bounds__((CONS + 1) * 128, 1)
k_ws(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB, bf *C, int M,
     int N, int K, long long ldc, long long sC, int zA, int zB)
{
	ktg::gemm_tn_ws_body<BM, BN, ST, CONS, GM, EPI>(&tA, &tB, C, M, N, K, ldc, sC, zA, zB);
}

/* clusters of 2 along M, B multicast (as gemm.cu's -DCLUSTER_M=2) */
template <int BM, int BN, int ST, int CONS, int GM, int EPI>
__global__ void __launch_bounds__((CONS + 1) * 128, 1) __cluster_dims__(2, 1, 1)
k_ws2(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB, bf *C, int M,
      int N, int K, long long ldc, long long sC, int zA, int zB)
{
	ktg::gemm_tn_ws_body<BM, BN, ST, CONS, GM, EPI, 2>(&tA, &tB, C, M, N, K, ldc, sC, zA, zB);
}

typedef void (*ws_fn)(const kt_tmap_t, const kt_tmap_t, bf *, int, int, int, long long,
		      long long, int, int);

/* the persistent form (gemm.cu -DPERSISTENT=1): grid (P, 1, 1) walks every
 * (tile, batch) pair; one more argument, the batch count */
template <int BM, int BN, int ST, int CONS, int GM, int EPI>
__global__ void __launch_bounds__((CONS + 1) * 128, 1)
k_wsp(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB, bf *C, int M,
      int N, int K, long long ldc, long long sC, int zA, int zB, int batch)
{
	ktg::gemm_tn_ws_persistent_body<BM, BN, ST, CONS, GM, EPI>(&tA, &tB, C, M, N, K, ldc, sC,
								   zA, zB, batch);
}

typedef void (*wsp_fn)(const kt_tmap_t, const kt_tmap_t, bf *, int, int, int, long long,
		       long long, int, int, int);

/* `persist` mode: one-tile (fn) or persistent (pfn) ws tiles */
struct pcfg {
	const char *name;
	ws_fn fn;
	wsp_fn pfn;
	int bm, bn, st, cons, gm, epi;
};
#define WSN(BM, BN, ST, CONS, EPI) \
	{"ws " #BM "x" #BN " s" #ST " c" #CONS " e" #EPI, k_ws<BM, BN, ST, CONS, 8, EPI>, NULL, \
	 BM, BN, ST, CONS, 8, EPI}
#define WSP(BM, BN, ST, CONS, EPI) \
	{"ws persistent " #BM "x" #BN " s" #ST " c" #CONS " e" #EPI, NULL, \
	 k_wsp<BM, BN, ST, CONS, 8, EPI>, BM, BN, ST, CONS, 8, EPI}
static const pcfg pcfgs[] = {
	WSN(128, 256, 4, 2, 1),
	WSN(128, 256, 4, 2, 0),
	WSN(128, 256, 3, 2, 1),
	WSN(128, 128, 6, 2, 1),
	WSP(128, 256, 4, 2, 1),
	WSP(128, 256, 3, 2, 1),
	WSP(128, 256, 4, 2, 0),
	WSP(128, 128, 6, 2, 1),
	WSP(256, 128, 3, 2, 1),
	WSP(64, 256, 4, 1, 1),
	WSP(128, 64, 8, 2, 1),
};

/* kt_gemm_smem: the ring, and with a persistent EPI 1 its own staging area
 * (min(BN, 128) columns) */
static int pcfg_smem(const pcfg &c)
{
	return 1024 + c.st * (c.bm + c.bn) * 128 +
	       (c.pfn && c.epi ? c.bm * std::min(c.bn, 128) * 2 : 0) + 256;
}

/* the ping-pong form (gemm.cu -DWS=1 -DPINGPONG=1): grid (P, 1, 1), two
 * consumer warpgroups each owning whole BM x BN tiles, C through tC */
template <int BM, int BN, int ST, int GM>
__global__ void __launch_bounds__(384, 1)
k_wspp(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB,
       const __grid_constant__ kt_tmap_t tC, int M, int N, int K, int zA, int zB, int batch)
{
	ktg::gemm_tn_ws_pingpong_body<BM, BN, ST, GM>(&tA, &tB, &tC, M, N, K, zA, zB, batch);
}

typedef void (*wspp_fn)(const kt_tmap_t, const kt_tmap_t, const kt_tmap_t, int, int, int, int,
			int, int);

struct ppcfg {
	const char *name;
	wspp_fn fn;
	int bm, bn, st, gm;
};
#define PP(BM, BN, ST, GM) \
	{"pingpong " #BM "x" #BN " s" #ST " g" #GM, k_wspp<BM, BN, ST, GM>, BM, BN, ST, GM}
static const ppcfg ppcfgs[] = {
	PP(128, 128, 4, 8),
	PP(128, 128, 5, 8),
	PP(128, 128, 4, 1),
	PP(64, 256, 4, 8),
	PP(64, 128, 6, 8),
	PP(64, 128, 4, 8),
};

/* kt_gemm_smem: the ring, two whole-tile staging areas */
static int ppcfg_smem(const ppcfg &c)
{
	return 1024 + c.st * (c.bm + c.bn) * 128 + 2 * c.bm * c.bn * 2 + 256;
}

/* split-K on the ws kernel (gemm.cu -DWS=1 -DSPLIT_K=SK): fp32 partials */
template <int BM, int BN, int ST, int CONS, int SK>
__global__ void __launch_bounds__((CONS + 1) * 128, 1)
k_wsk(const __grid_constant__ kt_tmap_t tA, const __grid_constant__ kt_tmap_t tB, float *W,
      int M, int N, int K, long long ldw, long long sC, int zA, int zB)
{
	ktg::gemm_tn_ws_body<BM, BN, ST, CONS, 8, 1, 1, SK>(&tA, &tB, W, M, N, K, ldw, sC, zA, zB);
}

typedef void (*wsk_fn)(const kt_tmap_t, const kt_tmap_t, float *, int, int, int, long long,
		       long long, int, int);

struct wskcfg {
	const char *name;
	wsk_fn fn;
	int bm, bn, st, cons, sk;
};
#define WSK(BM, BN, ST, CONS, SK) \
	{"ws " #BM "x" #BN " s" #ST " c" #CONS " split" #SK, k_wsk<BM, BN, ST, CONS, SK>, BM, BN, \
	 ST, CONS, SK}
static const wskcfg wskcfgs[] = {
	WSK(128, 128, 4, 2, 2),
	WSK(128, 128, 6, 2, 2),
	WSK(128, 128, 4, 1, 2),
	WSK(128, 256, 4, 2, 2),
	WSK(128, 256, 4, 2, 4),
	WSK(64, 128, 6, 1, 2),
	WSK(128, 64, 6, 2, 2),
	WSK(128, 64, 6, 2, 4),
	WSK(64, 256, 4, 1, 2),
	WSK(64, 256, 4, 1, 4),
};

static int wsk_smem(const wskcfg &c)
{
	return 1024 + c.st * (c.bm + c.bn) * 128 + 256;
}

struct wcfg {
	const char *name;
	ws_fn fn;
	int bm, bn, st, cons, gm, epi, cm;
};
#define WS(BM, BN, ST, CONS, GM, EPI) \
	{"ws " #BM "x" #BN " s" #ST " c" #CONS " g" #GM " e" #EPI, \
	 k_ws<BM, BN, ST, CONS, GM, EPI>, BM, BN, ST, CONS, GM, EPI, 1}
#define WS2(BM, BN, ST, CONS, GM, EPI) \
	{"ws " #BM "x" #BN " s" #ST " c" #CONS " g" #GM " e" #EPI " cm2", \
	 k_ws2<BM, BN, ST, CONS, GM, EPI>, BM, BN, ST, CONS, GM, EPI, 2}
static const wcfg wcfgs[] = {
#include "gemm_probe_wcfgs.h"
};

static int ws_smem(const wcfg &c)
{
	return 1024 + c.st * (c.bm + c.bn) * 128 + 256;
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
			      const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
			      const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
			      CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static encode_fn encode;

/* The map the worker builds for a KT_ARG_TMAP (kernels/gemm_plan.c,
 * kt_gemm_launch_ws): rank 3 (k, rows, batch), box (64, box_rows, 1),
 * 128-byte swizzle, L2 promotion 128B, zero fill. */
static kt_tmap_t make_map(const bf *p, long long rows, long long K, long long ld, long long batch,
			  long long bstride, int box_rows)
{
	kt_tmap_t m;
	cuuint64_t dims[3] = {(cuuint64_t)K, (cuuint64_t)rows, (cuuint64_t)batch};
	cuuint64_t strides[2] = {(cuuint64_t)ld * 2,
				 (cuuint64_t)(batch > 1 ? bstride : rows * ld) * 2};
	cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, es[3] = {1, 1, 1};
	CUresult r;

	static_assert(sizeof(kt_tmap_t) == sizeof(CUtensorMap), "128-byte map");
	r = encode((CUtensorMap *)&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)p, dims, strides,
		   box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
		   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
		exit(1);
	}
	return m;
}

/* The (k, batch, rows) map kt_gemm_launch builds for batches side by side
 * within each row (batch stride bstride >= K, batch * bstride <= ld):
 * box (64, 1, box_rows); the kernel takes it with zA / zB = 2. */
static kt_tmap_t make_map_rows_last(const bf *p, long long rows, long long K, long long ld,
				    long long batch, long long bstride, int box_rows)
{
	kt_tmap_t m;
	cuuint64_t dims[3] = {(cuuint64_t)K, (cuuint64_t)batch, (cuuint64_t)rows};
	cuuint64_t strides[2] = {(cuuint64_t)bstride * 2, (cuuint64_t)ld * 2};
	cuuint32_t box[3] = {64, 1, (cuuint32_t)box_rows}, es[3] = {1, 1, 1};
	CUresult r;

	r = encode((CUtensorMap *)&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)p, dims, strides,
		   box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
		   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled (k, batch, rows): %d\n", (int)r);
		exit(1);
	}
	return m;
}

/* The map kt_gemm_launch builds over C for the ping-pong kernel: (N, M,
 * batch), strides ldc and sC (M * ldc for one batch), box (64, box_rows,
 * 1), 128-byte swizzle; the TMA stores clip at N and M. */
static kt_tmap_t make_cmap(const bf *p, long long M, long long N, long long ldc, long long batch,
			   long long sC, int box_rows)
{
	kt_tmap_t m;
	cuuint64_t dims[3] = {(cuuint64_t)N, (cuuint64_t)M, (cuuint64_t)batch};
	cuuint64_t strides[2] = {(cuuint64_t)ldc * 2, (cuuint64_t)(batch > 1 ? sC : M * ldc) * 2};
	cuuint32_t box[3] = {64, (cuuint32_t)box_rows, 1}, es[3] = {1, 1, 1};
	CUresult r;

	r = encode((CUtensorMap *)&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void *)p, dims, strides,
		   box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
		   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled (C): %d\n", (int)r);
		exit(1);
	}
	return m;
}

/* split-K, as gemm.cu's gemm_tn does it with -DSPLIT_K: C is the fp32 workspace */
template <int BM, int BN, int BK, int WM, int WN, int ST, int WG, int SK>
__global__ void __launch_bounds__(WM * WN * 32, 1)
k_split(const bf *A, const bf *B, float *W, int M, int N, int K)
{
	const int kc = (K + BK * SK - 1) / (BK * SK) * BK, k0 = blockIdx.y * kc;
	const long long ld = K;	/* the row stride stays the full K */

	A += k0;
	B += k0;
	K = min(K - k0, kc);
	W += (long long)blockIdx.y * M * N;
	if constexpr (WG != 0)
		ktg::gemm_tn_wgmma_body<BM, BN, ST, 8, true>(A, B, W, M, N, K, ld, ld, N, 0, 0, 0);
	else
		ktg::gemm_tn_body<BM, BN, BK, WM, WN, ST, 1, true>(A, B, W, M, N, K, ld, ld, N, 0, 0,
								  0);
}

__global__ void k_reduce(const float *W, bf *C, int M, int N, long long ldc, int splits)
{
	ktg::splitk_reduce_body(W, C, M, N, ldc, splits);
}

struct scfg {
	const char *name;
	void (*fn)(const bf *, const bf *, float *, int, int, int);
	int bm, bn, bk, wm, wn, st, wg, sk;
};
#define S(BM, BN, BK, WM, WN, ST, WG, SK) \
	{#BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST " wg" #WG " split" #SK, \
	 k_split<BM, BN, BK, WM, WN, ST, WG, SK>, BM, BN, BK, WM, WN, ST, WG, SK}
static const scfg scfgs[] = {
	S(16, 64, 64, 1, 4, 4, 0, 2),
	S(16, 64, 64, 1, 4, 4, 0, 4),
	S(16, 128, 64, 1, 4, 4, 0, 4),
	S(64, 64, 64, 2, 2, 4, 0, 2),
	S(64, 64, 64, 2, 2, 4, 0, 4),
	S(128, 128, 64, 8, 1, 5, 1, 2),
	S(128, 128, 64, 8, 1, 4, 1, 2),
	S(128, 256, 64, 8, 1, 4, 1, 2),
	S(64, 128, 64, 4, 1, 4, 1, 2),
	S(64, 128, 64, 4, 1, 4, 1, 4),
	S(128, 64, 64, 8, 1, 4, 1, 2),
	S(128, 64, 64, 8, 1, 4, 1, 4),
};

typedef void (*gemm_fn)(const bf *, const bf *, bf *, int, int, int, long long, long long,
			long long, long long, long long, long long);
typedef void (*fused_fn)(const bf *, const bf *, const bf *, bf *, int, int, int);

struct gcfg {
	const char *name;
	gemm_fn fn;
	int bm, bn, bk, wm, wn, st;
	int wg;		/* 1: wgmma body */
};

#define G(BM, BN, BK, WM, WN, ST, GM) \
	{#BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST " g" #GM, \
	 k_gemm<BM, BN, BK, WM, WN, ST, GM>, BM, BN, BK, WM, WN, ST, 0}
#define W(BM, BN, ST, GM) \
	{"wgmma " #BM "x" #BN "x64 s" #ST " g" #GM, \
	 k_wgmma<BM, BN, ST, GM>, BM, BN, 64, BM / 16, 1, ST, 1}
#define W0(BM, BN, ST, GM) \
	{"wgmma0 " #BM "x" #BN "x64 s" #ST " g" #GM, \
	 k_wgmma<BM, BN, ST, GM, 0>, BM, BN, 64, BM / 16, 1, ST, 1}

static const gcfg gcfgs[] = {
#include "gemm_probe_cfgs.h"
};

struct fcfg {
	const char *name;
	fused_fn fn;
	int bm, bn, bk, wm, wn, st, r;
};
#define F(BM, BN, BK, WM, WN, ST, R) \
	{#BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST " r" #R, \
	 k_fused<BM, BN, BK, WM, WN, ST, R>, BM, BN, BK, WM, WN, ST, R}
static const fcfg fcfgs[] = {
#include "gemm_probe_fcfgs.h"
};

static unsigned long long rng = 88172645463325252ull;
static float frand(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return (float)((rng >> 40) + 0.5) / 16777216.0f * 2.f - 1.f;
}

static bf *dev_rand(size_t n, float scale)
{
	std::vector<bf> h(n);
	bf *d;
	for (size_t i = 0; i < n; i++)
		h[i] = __float2bfloat16(frand() * scale);
	CK(cudaMalloc(&d, n * 2));
	CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
	return d;
}

static double rel_l2(const bf *a, const bf *b, size_t n, int *nonfinite)
{
	std::vector<bf> ha(n), hb(n);
	double num = 0, den = 0;
	CK(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
	*nonfinite = 0;
	for (size_t i = 0; i < n; i++) {
		double x = __bfloat162float(ha[i]), y = __bfloat162float(hb[i]);
		if (!std::isfinite(x)) { (*nonfinite)++; continue; }
		num += (x - y) * (x - y);
		den += y * y;
	}
	return std::sqrt(num / (den > 0 ? den : 1));
}

static void *flushbuf;
static const size_t FLUSH = 256ull << 20;

template <class Fn>
static double time_us(Fn fn, int reps)
{
	cudaEvent_t e0, e1;
	std::vector<float> t;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < 3; i++)
		fn();
	for (int i = 0; i < reps; i++) {
		float ms;
		CK(cudaMemsetAsync(flushbuf, i & 0xff, FLUSH));
		CK(cudaEventRecord(e0));
		fn();
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		t.push_back(ms * 1000.f);
	}
	CK(cudaGetLastError());
	std::sort(t.begin(), t.end());
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	return t[t.size() / 2];
}

static cublasHandle_t hb;

/* C (M x N) = A (M x K) . B (N x K)^T, row-major, via column-major cuBLAS */
static void cublas_tn(const bf *A, const bf *B, bf *C, int M, int N, int K)
{
	float one = 1.f, zero = 0.f;
	cublasStatus_t s = cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, K,
					A, CUDA_R_16BF, K, &zero, C, CUDA_R_16BF, N,
					CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas %d\n", (int)s);
		exit(1);
	}
}

/* the same with leading dimensions (row strides, elements) */
static void cublas_tn_ld(const bf *A, long long lda, const bf *B, long long ldb, bf *C,
			 long long ldc, int M, int N, int K)
{
	float one = 1.f, zero = 0.f;
	cublasStatus_t s = cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF,
					(int)ldb, A, CUDA_R_16BF, (int)lda, &zero, C, CUDA_R_16BF,
					(int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas %d\n", (int)s);
		exit(1);
	}
}

static void launch_ws(const wcfg &c, const kt_tmap_t &ta, const kt_tmap_t &tb, bf *C, int M,
		      int N, int K, long long ldc, long long sC, int batch, int zA, int zB)
{
	dim3 grid(c.cm * ((M + c.cm * c.bm - 1) / (c.cm * c.bm)) * ((N + c.bn - 1) / c.bn), 1, batch);
	c.fn<<<grid, (c.cons + 1) * 128, ws_smem(c)>>>(ta, tb, C, M, N, K, ldc, sC, zA, zB);
}

/* A hung kernel (an mbarrier never completing) would eat the whole device
 * call: wait at most 10 s for a first launch, then say which and leave. */
static void sync_or_die(const char *what)
{
	for (int i = 0; i < 10000; i++) {
		cudaError_t e = cudaStreamQuery(0);
		if (e == cudaSuccess)
			return;
		if (e != cudaErrorNotReady) {
			fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
			exit(1);
		}
		usleep(1000);
	}
	printf("HANG %s\n", what);
	fflush(stdout);
	_exit(4);
}

/* one line of the closing summary */
struct best {
	int M, N, K;
	double cublas, wg, ws;
	std::string wgname, wsname;
	int wrong;
};

static void launch_g(const gcfg &c, const bf *A, const bf *B, bf *C, int M, int N, int K)
{
	int smem = c.st * (c.bm + c.bn) * c.bk * 2 + (c.wg ? 1024 : 0);
	dim3 grid(((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn), 1, 1);
	c.fn<<<grid, c.wm * c.wn * 32, smem>>>(A, B, C, M, N, K, K, K, N, 0, 0, 0);
}

/* C[z] = A[z] . B[z]^T for z < Z, contiguous batches (sA = M*K, sB = N*K or
 * 0 for a shared B, sC = M*N), through cuBLAS */
static void cublas_tn_batched(const bf *A, const bf *B, long long sB, bf *C, int M, int N, int K,
			      int Z)
{
	float one = 1.f, zero = 0.f;
	cublasStatus_t s = cublasGemmStridedBatchedEx(
		hb, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, K, sB, A, CUDA_R_16BF, K,
		(long long)M * K, &zero, C, CUDA_R_16BF, N, (long long)M * N, Z, CUBLAS_COMPUTE_32F,
		CUBLAS_GEMM_DEFAULT);
	if (s != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "cublas batched %d\n", (int)s);
		exit(1);
	}
}

/*
 * `gemm_probe REPS persist`: the persistent ws kernel against the one-tile
 * one, both checked against cuBLAS on every output. First edge shapes
 * (masked M, N and K, several batches, a shared B) with grids of 1, 5 and
 * SM-count CTAs, so that a CTA walks many tiles and the ring wraps across
 * tiles; then BLAST's stage-1 / stage-3 GEMMs at 1024 and 16384 tokens
 * and 1024x4096x4096, timed (L2 flushed). Returns the wrong results.
 */
static int run_persist(int reps, int sms, bool small)
{
	struct { int Z, M, N, K, shared; } shapes[] = {
		{3, 200, 264, 328, 0}, {3, 200, 264, 328, 1}, {2, 77, 136, 64, 0},
		{16, 1024, 1024, 256, 0}, {16, 1024, 256, 1024, 0}, {16, 16384, 1024, 256, 0},
		{16, 16384, 256, 1024, 0}, {1, 1024, 4096, 4096, 0},
	};
	struct row {
		int Z, M, N, K;
		double cublas, one, pers;
		std::string onename, persname;
		int wrong;
	};
	std::vector<row> rows;
	int wrong = 0;

	for (const pcfg &c : pcfgs)
		CK(cudaFuncSetAttribute(c.fn ? (const void *)c.fn : (const void *)c.pfn,
					cudaFuncAttributeMaxDynamicSharedMemorySize, pcfg_smem(c)));
	printf("%-34s %3s %6s %6s %6s %5s %10s %10s %8s %8s\n", "config", "Z", "M", "N", "K", "grid",
	       "us", "TFLOP/s", "xcublas", "relerr");
	for (auto &s : shapes) {
		const int Z = s.Z, M = s.M, N = s.N, K = s.K;
		const bool timed = M >= 1024;

		if (small && timed)
			continue;
		const long long sB = s.shared ? 0 : (long long)N * K;
		const size_t nc = (size_t)Z * M * N;
		bf *A = dev_rand((size_t)Z * M * K, 1.f);
		bf *B = dev_rand((size_t)(s.shared ? 1 : Z) * N * K, 1.f / sqrtf(K));
		bf *C, *Cr;
		double flop = 2.0 * Z * M * N * K, tcb = 0;
		row r = {Z, M, N, K, 0, 1e30, 1e30, "-", "-", 0};

		CK(cudaMalloc(&C, nc * 2));
		CK(cudaMalloc(&Cr, nc * 2));
		cublas_tn_batched(A, B, sB, Cr, M, N, K, Z);
		if (timed)
			tcb = time_us([&] { cublas_tn_batched(A, B, sB, Cr, M, N, K, Z); }, reps);
		r.cublas = tcb;
		printf("%-34s %3d %6d %6d %6d %5s %10.2f %10.1f %8.2f %8s\n", "cublas (strided batched)",
		       Z, M, N, K, "-", tcb, tcb > 0 ? flop / tcb / 1e6 : 0.0, 1.0, "-");
		for (const pcfg &c : pcfgs) {
			if (c.bm / 2 >= M || c.bn / 2 >= N)
				continue;
			const int tiles = ((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn);
			kt_tmap_t ta = make_map(A, M, K, K, Z, (long long)M * K, c.bm);
			kt_tmap_t tb = make_map(B, N, K, K, s.shared ? 1 : Z, sB, c.bn);
			const int zB = s.shared ? 0 : 1, smem = pcfg_smem(c);
			/* the one-tile grid once; persistent: 1, 5 CTAs (edge
			 * shapes only) and one per SM */
			int grids[3] = {sms, 1, 5}, ng = c.pfn && !timed ? 3 : 1;

			for (int g = 0; g < ng; g++) {
				const int P = std::min(grids[g], tiles * Z);
				auto run = [&] {
					if (c.fn)
						c.fn<<<dim3(tiles, 1, Z), (c.cons + 1) * 128, smem>>>(
							ta, tb, C, M, N, K, N, (long long)M * N, 1, zB);
					else
						c.pfn<<<P, (c.cons + 1) * 128, smem>>>(
							ta, tb, C, M, N, K, N, (long long)M * N, 1, zB, Z);
				};
				int nf;
				double err, t = 0;
				bool bad;

				CK(cudaMemset(C, 0xff, nc * 2));
				run();
				sync_or_die(c.name);
				CK(cudaGetLastError());
				err = rel_l2(C, Cr, nc, &nf);
				bad = nf || err > 1e-2;
				if (timed && !bad)
					t = time_us(run, reps);
				r.wrong += bad;
				if (timed && !bad && c.fn && t < r.one)
					r.one = t, r.onename = c.name;
				if (timed && !bad && c.pfn && t < r.pers)
					r.pers = t, r.persname = c.name;
				printf("%-34s %3d %6d %6d %6d %5d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, Z, M,
				       N, K, c.fn ? tiles * Z : P, t, t > 0 ? flop / t / 1e6 : 0.0,
				       tcb > 0 ? t / tcb : 0.0, err, bad ? " WRONG" : "");
			}
		}
		fflush(stdout);
		wrong += r.wrong;
		rows.push_back(r);
		CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cr));
	}
	printf("\npersistent vs one-tile ws (us, median of %d, L2 flushed; persistent grid = %d SMs)\n",
	       reps, sms);
	printf("%3s %6s %6s %6s %9s %9s %9s %7s %5s  %-26s %s\n", "Z", "M", "N", "K", "cublas",
	       "one-tile", "persist", "p/one", "wrong", "best one-tile", "best persistent");
	for (const row &r : rows)
		printf("%3d %6d %6d %6d %9.2f %9.2f %9.2f %7.3f %5d  %-26s %s\n", r.Z, r.M, r.N, r.K,
		       r.cublas, r.one < 1e29 ? r.one : 0.0, r.pers < 1e29 ? r.pers : 0.0,
		       r.one < 1e29 && r.pers < 1e29 ? r.pers / r.one : 0.0, r.wrong,
		       r.onename.c_str(), r.persname.c_str());
	printf("wrong results in total: %d\n", wrong);
	return wrong;
}

/* Relative L2 error of C against Cr over the Z x M x N elements of a
 * strided C (row stride ldc, batch stride sC); *untouched counts the
 * padding elements (columns N..ldc-1, the gap between batches) that are
 * no longer the 0xffff C was filled with: a store past the map's edges. */
static double rel_l2_strided(const bf *C, const bf *Cr, int Z, int M, int N, long long ldc,
			     long long sC, int *nonfinite, long *pad_written)
{
	const size_t n = (size_t)sC * Z;
	std::vector<unsigned short> hc(n);
	std::vector<bf> hr(n);
	double num = 0, den = 0;

	CK(cudaMemcpy(hc.data(), C, n * 2, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hr.data(), Cr, n * 2, cudaMemcpyDeviceToHost));
	*nonfinite = 0;
	*pad_written = 0;
	for (size_t i = 0; i < n; i++) {
		const long long z = (long long)i / sC, o = (long long)i % sC;
		const long long r = o / ldc, c = o % ldc;

		if (r >= M || c >= N) {
			*pad_written += hc[i] != 0xffff;
			continue;
		}
		unsigned u = (unsigned)hc[i] << 16;
		float x, y = __bfloat162float(hr[i]);

		memcpy(&x, &u, 4);
		if (!std::isfinite(x)) {
			(*nonfinite)++;
			continue;
		}
		num += ((double)x - y) * ((double)x - y);
		den += (double)y * y;
		(void)z;
	}
	return std::sqrt(num / (den > 0 ? den : 1));
}

/*
 * `gemm_probe REPS pingpong [small]`: the ping-pong kernel (ppcfgs) checked
 * against cuBLAS on every output. First edge shapes: M, N and K not
 * multiples of the tile, padded ldc and batch strides (the C map's strides;
 * the padding must stay untouched), a shared B, one and two tiles in all,
 * on grids of 1 CTA, 5 and 7 (odd item counts per CTA: consumer 0 one item
 * more than consumer 1) and the SM count. Then, unless small, the stage
 * GEMMs timed beside cuBLAS, the best one-tile ws and the best persistent
 * (pcfgs): dense 1024x4096x1024 (lowrank's y), 1024x1024x4096,
 * 1024x4096x4096 and BLAST's batched stages; a table last. Returns the
 * wrong results.
 */
static int run_pingpong(int reps, int sms, bool small)
{
	struct { int Z, M, N, K, shared, pad; } shapes[] = {
		{3, 200, 264, 328, 0, 1}, {3, 200, 264, 328, 1, 1}, {2, 77, 136, 64, 0, 0},
		{1, 100, 200, 40, 0, 1}, {1, 60, 120, 72, 0, 0},
		{1, 1024, 4096, 1024, 0, 0}, {1, 1024, 1024, 4096, 0, 0}, {1, 1024, 4096, 4096, 0, 0},
		{16, 1024, 1024, 256, 0, 0}, {16, 1024, 256, 1024, 0, 0}, {16, 16384, 1024, 256, 0, 0},
		{16, 16384, 256, 1024, 0, 0},
	};
	struct row {
		int Z, M, N, K;
		double cublas, one, pers, pp;
		std::string onename, persname, ppname;
		int wrong;
	};
	std::vector<row> rows;
	int wrong = 0;

	for (const ppcfg &c : ppcfgs)
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
					ppcfg_smem(c)));
	for (const pcfg &c : pcfgs)
		CK(cudaFuncSetAttribute(c.fn ? (const void *)c.fn : (const void *)c.pfn,
					cudaFuncAttributeMaxDynamicSharedMemorySize, pcfg_smem(c)));
	printf("%-34s %3s %6s %6s %6s %5s %10s %10s %8s %8s\n", "config", "Z", "M", "N", "K", "grid",
	       "us", "TFLOP/s", "xcublas", "relerr");
	for (auto &s : shapes) {
		const int Z = s.Z, M = s.M, N = s.N, K = s.K;
		const bool timed = M >= 1024;

		if (small && timed)
			continue;
		const long long ldc = s.pad ? N + 8 : N, sC = s.pad ? M * ldc + 16 : (long long)M * N;
		const long long sB = s.shared ? 0 : (long long)N * K;
		const size_t nc = (size_t)Z * sC;
		bf *A = dev_rand((size_t)Z * M * K, 1.f);
		bf *B = dev_rand((size_t)(s.shared ? 1 : Z) * N * K, 1.f / sqrtf(K));
		bf *C, *Cr;
		double flop = 2.0 * Z * M * N * K, tcb = 0;
		row r = {Z, M, N, K, 0, 1e30, 1e30, 1e30, "-", "-", "-", 0};

		CK(cudaMalloc(&C, nc * 2));
		CK(cudaMalloc(&Cr, nc * 2));
		CK(cudaMemset(Cr, 0, nc * 2));
		if (s.pad || s.shared) {
			for (int z = 0; z < Z; z++)
				cublas_tn_ld(A + (long long)z * M * K, K, B + z * sB, K, Cr + z * sC, ldc, M,
					     N, K);
		} else {
			cublas_tn_batched(A, B, sB, Cr, M, N, K, Z);
		}
		if (timed)
			tcb = time_us([&] { cublas_tn_batched(A, B, sB, Cr, M, N, K, Z); }, reps);
		r.cublas = tcb;
		printf("%-34s %3d %6d %6d %6d %5s %10.2f %10.1f %8.2f %8s\n", "cublas", Z, M, N, K, "-",
		       tcb, tcb > 0 ? flop / tcb / 1e6 : 0.0, 1.0, "-");
		/* ping-pong: edge shapes on 1, 5, 7 CTAs and one per SM */
		for (const ppcfg &c : ppcfgs) {
			if (c.bm / 2 >= M || c.bn / 2 >= N)
				continue;
			const int tiles = ((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn);
			kt_tmap_t ta = make_map(A, M, K, K, Z, (long long)M * K, c.bm);
			kt_tmap_t tb = make_map(B, N, K, K, s.shared ? 1 : Z, sB, c.bn);
			kt_tmap_t tc = make_cmap(C, M, N, ldc, Z, sC, c.bm);
			const int zB = s.shared ? 0 : 1, smem = ppcfg_smem(c);
			int grids[4] = {sms, 1, 5, 7}, ng = timed ? 1 : 4;

			for (int g = 0; g < ng; g++) {
				const int P = std::min(grids[g], tiles * Z);
				auto run = [&] {
					c.fn<<<P, 384, smem>>>(ta, tb, tc, M, N, K, 1, zB, Z);
				};
				int nf;
				long padw;
				double err, t = 0;
				bool bad;

				CK(cudaMemset(C, 0xff, nc * 2));
				run();
				sync_or_die(c.name);
				CK(cudaGetLastError());
				err = rel_l2_strided(C, Cr, Z, M, N, ldc, sC, &nf, &padw);
				bad = nf || padw || err > 1e-2;
				if (timed && !bad)
					t = time_us(run, reps);
				r.wrong += bad;
				if (timed && !bad && t < r.pp)
					r.pp = t, r.ppname = c.name;
				printf("%-34s %3d %6d %6d %6d %5d %10.2f %10.1f %8.2f %8.1e%s%s\n", c.name, Z,
				       M, N, K, P, t, t > 0 ? flop / t / 1e6 : 0.0, tcb > 0 ? t / tcb : 0.0,
				       err, padw ? " PAD-WRITTEN" : "", bad ? " WRONG" : "");
			}
		}
		/* the one-tile and persistent ws kernels, timed shapes only */
		for (const pcfg &c : pcfgs) {
			if (!timed || c.bm / 2 >= M || c.bn / 2 >= N)
				continue;
			const int tiles = ((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn);
			kt_tmap_t ta = make_map(A, M, K, K, Z, (long long)M * K, c.bm);
			kt_tmap_t tb = make_map(B, N, K, K, s.shared ? 1 : Z, sB, c.bn);
			const int zB = s.shared ? 0 : 1, smem = pcfg_smem(c);
			const int P = std::min(sms, tiles * Z);
			auto run = [&] {
				if (c.fn)
					c.fn<<<dim3(tiles, 1, Z), (c.cons + 1) * 128, smem>>>(
						ta, tb, C, M, N, K, N, (long long)M * N, 1, zB);
				else
					c.pfn<<<P, (c.cons + 1) * 128, smem>>>(ta, tb, C, M, N, K, N,
									   (long long)M * N, 1, zB, Z);
			};
			int nf;
			double err, t = 0;
			bool bad;

			CK(cudaMemset(C, 0xff, nc * 2));
			run();
			sync_or_die(c.name);
			CK(cudaGetLastError());
			err = rel_l2(C, Cr, nc, &nf);
			bad = nf || err > 1e-2;
			if (!bad)
				t = time_us(run, reps);
			r.wrong += bad;
			if (!bad && c.fn && t < r.one)
				r.one = t, r.onename = c.name;
			if (!bad && c.pfn && t < r.pers)
				r.pers = t, r.persname = c.name;
			printf("%-34s %3d %6d %6d %6d %5d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, Z, M, N,
			       K, c.fn ? tiles * Z : P, t, t > 0 ? flop / t / 1e6 : 0.0,
			       tcb > 0 ? t / tcb : 0.0, err, bad ? " WRONG" : "");
		}
		fflush(stdout);
		wrong += r.wrong;
		rows.push_back(r);
		CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cr));
	}
	printf("\nping-pong vs persistent vs one-tile ws vs cuBLAS (us, median of %d, L2 flushed; "
	       "persistent grids = %d SMs)\n", reps, sms);
	printf("%3s %6s %6s %6s %9s %9s %9s %9s %7s %7s %5s  %-24s %-34s %s\n", "Z", "M", "N", "K",
	       "cublas", "one-tile", "persist", "pingpong", "pp/cb", "pp/pers", "wrong",
	       "best pingpong", "best persistent", "best one-tile");
	for (const row &r : rows) {
		const double one = r.one < 1e29 ? r.one : 0, pers = r.pers < 1e29 ? r.pers : 0;
		const double pp = r.pp < 1e29 ? r.pp : 0;

		printf("%3d %6d %6d %6d %9.2f %9.2f %9.2f %9.2f %7.3f %7.3f %5d  %-24s %-34s %s\n", r.Z,
		       r.M, r.N, r.K, r.cublas, one, pers, pp, pp > 0 && r.cublas > 0 ? pp / r.cublas : 0.0,
		       pp > 0 && pers > 0 ? pp / pers : 0.0, r.wrong, r.ppname.c_str(),
		       r.persname.c_str(), r.onename.c_str());
	}
	printf("wrong results in total: %d\n", wrong);
	return wrong;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 30;
	/* "small": the edge shape, the batched checks and nothing else (for
	 * compute-sanitizer) */
	const bool small = argc > 2 && strcmp(argv[2], "small") == 0;
	/* PROBE_NO_CM2=1: leave the cluster tiles out (after a hang in one) */
	const bool no_cm2 = getenv("PROBE_NO_CM2") != NULL;
	/* "persist": the persistent ws kernel against the one-tile one, alone */
	const bool persist = argc > 2 && strcmp(argv[2], "persist") == 0;
	struct { int M, N, K; } shapes[] = {
		{1024, 4096, 4096}, {16, 4096, 4096}, {77, 136, 264}, {1000, 4104, 4096},
		{1024, 1024, 4096}, {1024, 4096, 1024}, {1024, 256, 4096}, {4096, 4096, 4096},
		{16384, 4096, 4096},
	};
	std::vector<best> summary;
	int wrong_total = 0;
	cudaDriverEntryPointQueryResult q;

	CK(cudaMalloc(&flushbuf, FLUSH));
	if (cublasCreate(&hb) != CUBLAS_STATUS_SUCCESS)
		return 1;
	CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000,
					    cudaEnableDefault, &q));
	if (q != cudaDriverEntryPointSuccess || !encode) {
		fprintf(stderr, "no cuTensorMapEncodeTiled\n");
		return 1;
	}
	if (argc > 2 && strcmp(argv[2], "pingpong") == 0) {
		int sms = 0;

		CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
		wrong_total = run_pingpong(reps, sms, argc > 3 && strcmp(argv[3], "small") == 0);
		cublasDestroy(hb);
		return wrong_total ? 3 : 0;
	}
	if (persist) {
		int sms = 0;

		CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
		wrong_total = run_persist(reps, sms, argc > 3 && strcmp(argv[3], "small") == 0);
		cublasDestroy(hb);
		return wrong_total ? 3 : 0;
	}
	for (const wcfg &c : wcfgs)
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, ws_smem(c)));
	for (const gcfg &c : gcfgs)
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
					c.st * (c.bm + c.bn) * c.bk * 2 + (c.wg ? 1024 : 0)));
	for (const wskcfg &c : wskcfgs)
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, wsk_smem(c)));
	for (const scfg &c : scfgs)
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
					c.st * (c.bm + c.bn) * c.bk * 2 + (c.wg ? 1024 : 0)));
	for (const fcfg &c : fcfgs) {
		int ring1 = c.st * (c.bm + c.r) * c.bk * 2, ring2 = c.st * c.bn * c.bk * 2;
		CK(cudaFuncSetAttribute(c.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
					c.bm * c.r * 2 + std::max(ring1, ring2)));
	}
	printf("%-34s %6s %6s %6s %10s %10s %8s %8s\n", "config", "M", "N", "K", "us", "TFLOP/s",
	       "xcublas", "relerr");
	for (auto &s : shapes) {
		int M = s.M, N = s.N, K = s.K;
		if (small && M != 77)
			continue;
		bf *A = dev_rand((size_t)M * K, 1.f), *B = dev_rand((size_t)N * K, 1.f / sqrtf(K));
		bf *C, *Cr;
		double flop = 2.0 * M * N * K, tcb;
		CK(cudaMalloc(&C, (size_t)M * N * 2));
		CK(cudaMalloc(&Cr, (size_t)M * N * 2));
		best b = {M, N, K, 0, 1e30, 1e30, "-", "-", 0};
		cublas_tn(A, B, Cr, M, N, K);
		tcb = time_us([&] { cublas_tn(A, B, Cr, M, N, K); }, reps);
		b.cublas = tcb;
		printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8s\n", "cublas", M, N, K, tcb,
		       flop / tcb / 1e6, 1.0, "-");
		for (const wcfg &c : wcfgs) {
			int nf;
			double err, t;
			bool bad;
			if (c.bm / 2 >= M || (no_cm2 && c.cm > 1))
				continue;
			kt_tmap_t ta = make_map(A, M, K, K, 1, 0, c.bm);
			kt_tmap_t tb = make_map(B, N, K, K, 1, 0, c.bn / c.cm);
			CK(cudaMemset(C, 0xff, (size_t)M * N * 2));
			launch_ws(c, ta, tb, C, M, N, K, N, 0, 1, 1, 1);
			sync_or_die(c.name);
			err = rel_l2(C, Cr, (size_t)M * N, &nf);
			t = time_us([&] { launch_ws(c, ta, tb, C, M, N, K, N, 0, 1, 1, 1); }, reps);
			bad = nf || err > 1e-2;
			b.wrong += bad;
			if (!bad && t < b.ws)
				b.ws = t, b.wsname = c.name;
			printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, M, N, K, t,
			       flop / t / 1e6, t / tcb, err, bad ? " WRONG" : "");
		}
		/* ws split-K where kt_gemm_check allows it (tiles fill under
		 * half of 132 SMs, at most two waves, 4+ k-tiles per slice) */
		for (const wskcfg &c : wskcfgs) {
			if (small)
				break;
			int nf, tiles = ((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn);
			double err, t;
			bool bad;
			float *Wk;
			if (2 * tiles > 132 || tiles * c.sk > 264 || K / c.sk < 4 * 64 || c.bm / 2 >= M ||
			    c.bn / 2 >= N)
				continue;
			CK(cudaMalloc(&Wk, (size_t)c.sk * M * N * 4));
			kt_tmap_t ta = make_map(A, M, K, K, 1, 0, c.bm);
			kt_tmap_t tb = make_map(B, N, K, K, 1, 0, c.bn);
			auto run = [&] {
				c.fn<<<dim3(tiles, c.sk), (c.cons + 1) * 128, wsk_smem(c)>>>(ta, tb, Wk, M, N,
											  K, N, 0, 1, 1);
				k_reduce<<<(unsigned)(((size_t)M * N / 4 + 255) / 256), 256>>>(Wk, C, M, N, N,
											    c.sk);
			};
			CK(cudaMemset(C, 0xff, (size_t)M * N * 2));
			run();
			sync_or_die(c.name);
			err = rel_l2(C, Cr, (size_t)M * N, &nf);
			t = time_us(run, reps);
			bad = nf || err > 1e-2;
			b.wrong += bad;
			if (!bad && t < b.ws)
				b.ws = t, b.wsname = c.name;
			printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, M, N, K, t,
			       flop / t / 1e6, t / tcb, err, bad ? " WRONG" : "");
			CK(cudaFree(Wk));
		}
		for (const gcfg &c : gcfgs) {
			int nf;
			if (small)
				break;
			double err, t;
			if (c.bm / 2 >= M && c.bm > 16)
				continue;
			CK(cudaMemset(C, 0xff, (size_t)M * N * 2));
			launch_g(c, A, B, C, M, N, K);
			CK(cudaDeviceSynchronize());
			err = rel_l2(C, Cr, (size_t)M * N, &nf);
			t = time_us([&] { launch_g(c, A, B, C, M, N, K); }, reps);
			printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, M, N, K, t,
			       flop / t / 1e6, t / tcb, err, nf || err > 1e-2 ? " WRONG" : "");
			b.wrong += nf || err > 1e-2;
			if (c.wg && !(nf || err > 1e-2) && t < b.wg)
				b.wg = t, b.wgname = c.name;
		}
		for (const scfg &c : scfgs) {
			if (small)
				break;
			int nf, tiles = ((M + c.bm - 1) / c.bm) * ((N + c.bn - 1) / c.bn);
			int smem = c.st * (c.bm + c.bn) * c.bk * 2 + (c.wg ? 1024 : 0);
			double err, t;
			float *Wk;
			if (2 * tiles > 132 || K / c.sk < 4 * c.bk || (c.bm / 2 >= M && c.bm > 16))
				continue;
			CK(cudaMalloc(&Wk, (size_t)c.sk * M * N * 4));
			auto run = [&] {
				c.fn<<<dim3(tiles, c.sk), c.wm * c.wn * 32, smem>>>(A, B, Wk, M, N, K);
				k_reduce<<<(unsigned)(((size_t)M * N / 4 + 255) / 256), 256>>>(Wk, C, M, N, N, c.sk);
			};
			CK(cudaMemset(C, 0xff, (size_t)M * N * 2));
			run();
			CK(cudaDeviceSynchronize());
			err = rel_l2(C, Cr, (size_t)M * N, &nf);
			t = time_us(run, reps);
			printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8.1e%s\n", c.name, M, N, K, t,
			       flop / t / 1e6, t / tcb, err, nf || err > 1e-2 ? " WRONG" : "");
			CK(cudaFree(Wk));
		}
		fflush(stdout);
		summary.push_back(b);
		CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cr));
	}
	/* batched WS: strided batches, padded leading dimensions, K not a
	 * multiple of 64, a B shared by every batch (zB = 0) */
	{
		const int M = 200, N = 264, K = 328, Z = 3;
		const long long lda = K + 16, ldb = K + 8, ldc = N + 8;
		const long long sA = M * lda + 64, sB = N * ldb + 8, sC = M * ldc + 16;
		bf *A = dev_rand((size_t)sA * Z, 1.f), *B = dev_rand((size_t)sB * Z, 1.f / sqrtf(K));
		bf *C, *Cr;
		CK(cudaMalloc(&C, (size_t)sC * Z * 2));
		CK(cudaMalloc(&Cr, (size_t)sC * Z * 2));
		for (int shared = 0; shared < 2; shared++) {
			CK(cudaMemset(Cr, 0, (size_t)sC * Z * 2));
			for (int z = 0; z < Z; z++)
				cublas_tn_ld(A + z * sA, lda, B + (shared ? 0 : z * sB), ldb, Cr + z * sC, ldc,
					     M, N, K);
			for (const wcfg &c : wcfgs) {
				int nf;
				double err;
				if (c.bm / 2 >= M || (no_cm2 && c.cm > 1))
					continue;
				kt_tmap_t ta = make_map(A, M, K, lda, Z, sA, c.bm);
				kt_tmap_t tb = make_map(B, N, K, ldb, shared ? 1 : Z, sB, c.bn / c.cm);
				CK(cudaMemset(C, 0, (size_t)sC * Z * 2));
				launch_ws(c, ta, tb, C, M, N, K, ldc, sC, Z, 1, shared ? 0 : 1);
				sync_or_die(c.name);
				err = rel_l2(C, Cr, (size_t)sC * Z, &nf);
				wrong_total += nf || err > 1e-2;
				printf("%-34s batch %d x %dx%dx%d%s relerr %8.1e%s\n", c.name, Z, M, N, K,
				       shared ? " (B shared)" : "", err, nf || err > 1e-2 ? " WRONG" : "");
			}
		}
		CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C)); CK(cudaFree(Cr));
	}
	/* monarch's stage 1: x (M x Z*nb) read as Z column blocks of nb (batch
	 * stride nb < row stride Z*nb: the (k, batch, rows) map, zA = 2), w
	 * (Z, N, nb), C (M x Z*N) block i at column i*N (ldc Z*N, sC N) -- at
	 * a small edge shape and at llama7b q/k/v/o's (1024 x 1024 x 256, 16
	 * blocks), where it is also timed */
	{
		struct { int M, N, nb, Z; } ms[] = {{200, 136, 96, 4}, {1024, 1024, 256, 16}};
		for (auto &s : ms) {
			const int M = s.M, N = s.N, nb = s.nb, Z = s.Z;
			const long long n = (long long)Z * nb, ldc = (long long)Z * N;
			bf *X = dev_rand((size_t)M * n, 1.f), *Wt = dev_rand((size_t)Z * N * nb,
									   1.f / sqrtf(nb));
			bf *C, *Cr;
			double tcb = 0, flop = 2.0 * M * N * nb * Z;
			CK(cudaMalloc(&C, (size_t)M * ldc * 2));
			CK(cudaMalloc(&Cr, (size_t)M * ldc * 2));
			auto ref = [&] {
				for (int z = 0; z < Z; z++)
					cublas_tn_ld(X + (long long)z * nb, n, Wt + (long long)z * N * nb, nb,
						     Cr + (long long)z * N, ldc, M, N, nb);
			};
			ref();
			if (!small)
				tcb = time_us(ref, reps);
			for (const wcfg &c : wcfgs) {
				int nf;
				double err, t = 0;
				if (c.bm / 2 >= M || c.bn / 2 >= N || c.cm > 1 || (small && M > 256))
					continue;
				kt_tmap_t ta = make_map_rows_last(X, M, nb, n, Z, nb, c.bm);
				kt_tmap_t tb = make_map(Wt, N, nb, nb, Z, (long long)N * nb, c.bn);
				CK(cudaMemset(C, 0xff, (size_t)M * ldc * 2));
				launch_ws(c, ta, tb, C, M, N, nb, ldc, N, Z, 2, 1);
				sync_or_die(c.name);
				err = rel_l2(C, Cr, (size_t)M * ldc, &nf);
				wrong_total += nf || err > 1e-2;
				if (!small && M >= 1024)
					t = time_us([&] { launch_ws(c, ta, tb, C, M, N, nb, ldc, N, Z, 2, 1); },
						    reps);
				printf("%-34s x-blocks %d x %dx%dx%d relerr %8.1e us %.2f (cublas x%d %.2f, "
				       "%.1f TFLOP/s)%s\n", c.name, Z, M, N, nb, err, t, Z, tcb,
				       t > 0 ? flop / t / 1e6 : 0.0, nf || err > 1e-2 ? " WRONG" : "");
			}
			fflush(stdout);
			CK(cudaFree(X)); CK(cudaFree(Wt)); CK(cudaFree(C)); CK(cudaFree(Cr));
		}
	}
	/* lowrank: y = (x V^T) U^T, fused vs cuBLAS twice */
	struct { int M, K, N, R; } ls[] = {{1024, 4096, 4096, 256}, {16, 4096, 4096, 256}, {300, 264, 136, 64}};
	for (auto &s : ls) {
		if (small)
			break;
		int M = s.M, K = s.K, N = s.N, R = s.R;
		bf *X = dev_rand((size_t)M * K, 1.f), *V = dev_rand((size_t)R * K, 1.f / sqrtf(K));
		bf *U = dev_rand((size_t)N * R, 1.f / sqrtf(R)), *Z, *Y, *Yr;
		double tcb, flop = 2.0 * M * R * ((double)K + N);
		CK(cudaMalloc(&Z, (size_t)M * R * 2));
		CK(cudaMalloc(&Y, (size_t)M * N * 2));
		CK(cudaMalloc(&Yr, (size_t)M * N * 2));
		auto ref = [&] { cublas_tn(X, V, Z, M, R, K); cublas_tn(Z, U, Yr, M, N, R); };
		ref();
		tcb = time_us(ref, reps);
		printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8s r=%d\n", "cublas x2", M, N, K, tcb,
		       flop / tcb / 1e6, 1.0, "-", R);
		for (const fcfg &c : fcfgs) {
			if (c.r != R)
				continue;
			for (int split = 1; split <= 16; split *= 2) {
				int tn = (N + c.bn - 1) / c.bn, nf;
				int ring1 = c.st * (c.bm + c.r) * c.bk * 2, ring2 = c.st * c.bn * c.bk * 2;
				int smem = c.bm * c.r * 2 + std::max(ring1, ring2);
				dim3 grid((M + c.bm - 1) / c.bm, split);
				double err, t;
				char name[80];
				if (split > tn)
					break;
				auto run = [&] { c.fn<<<grid, c.wm * c.wn * 32, smem>>>(X, V, U, Y, M, K, N); };
				CK(cudaMemset(Y, 0xff, (size_t)M * N * 2));
				run();
				CK(cudaDeviceSynchronize());
				err = rel_l2(Y, Yr, (size_t)M * N, &nf);
				t = time_us(run, reps);
				snprintf(name, sizeof(name), "fused %s n%d", c.name, split);
				printf("%-34s %6d %6d %6d %10.2f %10.1f %8.2f %8.1e%s\n", name, M, N, K, t,
				       flop / t / 1e6, t / tcb, err, nf || err > 1e-2 ? " WRONG" : "");
			}
		}
		fflush(stdout);
		CK(cudaFree(X)); CK(cudaFree(V)); CK(cudaFree(U)); CK(cudaFree(Z)); CK(cudaFree(Y)); CK(cudaFree(Yr));
	}
	printf("\nsummary (us, median of %d, L2 flushed; ratio = ktune / cuBLAS)\n", reps);
	printf("%6s %6s %6s %9s %9s %6s %9s %6s %5s  %s\n", "M", "N", "K", "cublas", "wgmma",
	       "x", "ws", "x", "wrong", "best ws");
	for (const best &b : summary) {
		wrong_total += b.wrong;
		printf("%6d %6d %6d %9.2f %9.2f %6.3f %9.2f %6.3f %5d  %s\n", b.M, b.N, b.K, b.cublas,
		       b.wg < 1e29 ? b.wg : 0.0, b.wg < 1e29 ? b.wg / b.cublas : 0.0,
		       b.ws < 1e29 ? b.ws : 0.0, b.ws < 1e29 ? b.ws / b.cublas : 0.0, b.wrong,
		       b.wsname.c_str());
	}
	printf("wrong results in total: %d\n", wrong_total);
	cublasDestroy(hb);
	return wrong_total ? 3 : 0;
}
