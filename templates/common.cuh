/*
 * common.cuh -- device helpers shared by the ktune templates (sm_80+):
 * cp.async copies, ldmatrix, the bf16 m16n8k16 tensor-core MMA and the XOR
 * swizzle of K-contiguous shared-memory tiles.
 *
 * Included by file name ("common.cuh"): NVRTC gets it as a header, and the
 * dev harness in tools/ includes it through -I templates. Device code only,
 * no host code, no headers beyond what NVRTC ships (cuda_bf16.h).
 */
#ifndef KT_COMMON_CUH
#define KT_COMMON_CUH

#include <cuda_bf16.h>

#define KT_DEV __device__ __forceinline__

typedef unsigned short kt_bf16_bits;

/*
 * Programmatic dependent launch (-DKT_PDL=1, sm_90+; kernels/family.h's
 * kt_launch.pdl). A kernel launched with the attribute may start while the
 * previous kernel on its stream is still running; griddepcontrol.wait
 * returns once that kernel has completed and its memory is visible (at
 * once without the attribute), so every global access must come after it.
 * launch_dependents then lets the next such kernel be scheduled as soon as
 * every CTA of this one has passed that point: its launch and set-up
 * overlap this kernel's tail. A kernel compiled without KT_PDL must never
 * be launched with the attribute.
 */
KT_DEV void kt_pdl_wait(void)
{
#if defined(KT_PDL) && KT_PDL
	asm volatile("griddepcontrol.wait;\n" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

KT_DEV unsigned kt_smem_u32(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

/* 16-byte global -> shared copy that bypasses L1 (.cg). When pred is false
 * the source size is 0: nothing is read and the 16 bytes are zero-filled,
 * which is how tile edges are masked without branches around the copy. */
KT_DEV void kt_cp_async16(unsigned dst, const void *src, bool pred)
{
	int n = pred ? 16 : 0;

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(dst), "l"(src), "r"(n));
}

KT_DEV void kt_cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

/* Waits until at most N groups are still in flight. */
template <int N>
KT_DEV void kt_cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

KT_DEV void kt_ldmatrix_x4(unsigned r[4], unsigned addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

/* The same, each 8 x 8 matrix transposed: for an operand stored with its
 * M or N dimension contiguous. */
KT_DEV void kt_ldmatrix_x4_trans(unsigned r[4], unsigned addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

KT_DEV void kt_ldmatrix_x2(unsigned r[2], unsigned addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(addr));
}

/* Four 8 x 8 b16 matrices stored, each transposed: register q of every
 * lane holds its fragment pair (row lane / 4, columns 2 (lane % 4), +1) of
 * matrix q, and lane 8q + c gives the address of the 16 bytes that take
 * column c of matrix q (sm_90). */
KT_DEV void kt_stmatrix_x4_trans(unsigned addr, const unsigned r[4])
{
	asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr),
		     "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
		     : "memory");
}

/* d += a * b for one 16x8x16 tile: a row-major (4 regs), b column-major
 * (2 regs), fp32 accumulators (4 floats). */
KT_DEV void kt_mma_bf16_16816(float d[4], const unsigned a[4], const unsigned b[2])
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* An M x N grid of m16n8 fp32 accumulators zeroed. */
template <int M, int N>
KT_DEV void kt_zero_frags(float (&acc)[M][N][4])
{
#pragma unroll
	for (int a = 0; a < M; a++)
#pragma unroll
		for (int n = 0; n < N; n++)
			acc[a][n][0] = acc[a][n][1] = acc[a][n][2] = acc[a][n][3] = 0.f;
}

/* One step of an 8 x 8 bf16 transpose: element u (0..7) of each of eight
 * 16-byte chunks w[0..7] (chunk c's word u/2, its low or high half), as one
 * 16-byte chunk in order of c. */
KT_DEV uint4 kt_bf16x8_column(const unsigned (&w)[8][4], int u)
{
	const int k = u >> 1;
	const unsigned sel = (u & 1) ? 0x7632u : 0x5410u;
	uint4 o;

	o.x = __byte_perm(w[0][k], w[1][k], sel);
	o.y = __byte_perm(w[2][k], w[3][k], sel);
	o.z = __byte_perm(w[4][k], w[5][k], sel);
	o.w = __byte_perm(w[6][k], w[7][k], sel);
	return o;
}

KT_DEV unsigned kt_pack_bf16x2(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *reinterpret_cast<unsigned *>(&v);
}

/*
 * Byte offset of the 16-byte chunk (row, chunk) in a tile whose rows hold
 * CHUNKS chunks of 8 bf16 (K-contiguous). ldmatrix reads one chunk column
 * of 8 consecutive rows at once; without the XOR those 8 addresses would
 * fall into the same 4 banks whenever a row is a multiple of 128 bytes.
 * The XOR spreads the 8 rows over the 8 distinct 16-byte bank groups of a
 * 128-byte line: with 8+ chunks per row the row index itself picks the
 * group, with 4 (64-byte rows) two rows share a line so row/2 does, with 2
 * (32-byte rows) four rows share a line so row/4 does.
 */
template <int CHUNKS>
KT_DEV int kt_swz(int row, int chunk)
{
	int x;

	if (CHUNKS >= 8)
		x = chunk ^ (row & 7);
	else if (CHUNKS == 4)
		x = chunk ^ ((row >> 1) & 3);
	else if (CHUNKS == 2)
		x = chunk ^ ((row >> 2) & 1);
	else
		x = chunk;
	return (row * CHUNKS + x) * 16;
}

/*
 * L2 residency (sm_80+). A policy from createpolicy rides on a load or
 * store's .L2::cache_hint: evict_first marks lines to go first when L2
 * needs room (operands streamed once), evict_last to stay longest (an
 * intermediate the next kernel reads). discard.global.L2 drops a 128-byte
 * line without writing it back: for an intermediate nobody reads again, so
 * that its dirty lines cost no DRAM writes and free their room. It is a
 * weak write of an indeterminate value: only after the last read of the
 * line, by the thread or CTA that read it.
 */
KT_DEV unsigned long long kt_l2_evict_first(void)
{
	unsigned long long p;

	asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
	return p;
}

KT_DEV unsigned long long kt_l2_evict_last(void)
{
	unsigned long long p;

	asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
	return p;
}

/* The policy where ON (a compile-time switch), else 0 and no instruction:
 * for code whose hints are compiled in or out by a define. */
template <bool ON>
KT_DEV unsigned long long kt_l2_evict_first_if(void)
{
	if constexpr (ON)
		return kt_l2_evict_first();
	return 0;
}

template <bool ON>
KT_DEV unsigned long long kt_l2_evict_last_if(void)
{
	if constexpr (ON)
		return kt_l2_evict_last();
	return 0;
}

KT_DEV void kt_l2_discard(const void *line)
{
	asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(line) : "memory");
}

/* A 16-byte global store with an L2 policy. */
KT_DEV void kt_st16_hint(void *p, uint4 v, unsigned long long pol)
{
	asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p),
		     "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
		     : "memory");
}

/*
 * sm_90: TMA (cp.async.bulk.tensor) and mbarrier helpers for the
 * warp-specialized GEMM (templates/gemm.cu, -DWS=1).
 *
 * A tensor map built on the host (cuTensorMapEncodeTiled; the worker does
 * it for KT_ARG_TMAP arguments) arrives by value as a kernel parameter
 * `const __grid_constant__ kt_tmap_t`: 128 opaque bytes, 64-byte aligned.
 * The copy instructions take its generic address.
 */
struct __align__(64) kt_tmap_t {
	unsigned long long v[16];
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
KT_DEV void kt_mbar_init(unsigned bar, unsigned count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* makes the initialised barriers visible to the async proxy (TMA) */
KT_DEV void kt_mbar_init_fence(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* one arrival that also announces tx bytes the copy engine will deliver */
KT_DEV void kt_mbar_arrive_tx(unsigned bar, unsigned bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
		     "r"(bytes)
		     : "memory");
}

KT_DEV void kt_mbar_arrive(unsigned bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Spins until the phase with parity `parity` has completed. */
KT_DEV void kt_mbar_wait(unsigned bar, unsigned parity)
{
	unsigned done;

	do {
		asm volatile("{\n"
			     ".reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
			     "selp.u32 %0, 1, 0, p;\n"
			     "}\n"
			     : "=r"(done)
			     : "r"(bar), "r"(parity)
			     : "memory");
	} while (!done);
}

KT_DEV void kt_tmap_prefetch(const kt_tmap_t *m)
{
	asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)m) : "memory");
}

/* One box of a rank-3 tensor map at element coordinates (c0 innermost,
 * c1, c2) into shared memory at dst; completes tx bytes on bar.
 * Out-of-bounds elements arrive as zeros and still count. */
KT_DEV void kt_tma_load_3d(unsigned dst, const kt_tmap_t *m, unsigned bar, int c0, int c1, int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
		     "l"((unsigned long long)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
		     : "memory");
}

/* The same box delivered to the same shared-memory offset (and mbarrier
 * offset) of every CTA of the cluster whose bit is set in mask. */
KT_DEV void kt_tma_load_3d_mc(unsigned dst, const kt_tmap_t *m, unsigned bar, int c0, int c1,
			      int c2, unsigned short mask)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     ".multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
		     "l"((unsigned long long)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(mask)
		     : "memory");
}

/* kt_tma_load_3d with an L2 policy on the lines it reads. */
KT_DEV void kt_tma_load_3d_hint(unsigned dst, const kt_tmap_t *m, unsigned bar, int c0, int c1,
				int c2, unsigned long long pol)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     ".L2::cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
		     "l"((unsigned long long)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "l"(pol)
		     : "memory");
}

KT_DEV unsigned kt_cluster_ctarank(void)
{
	unsigned r;

	asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
	return r;
}

/* Every thread of every CTA of the cluster (all of them must call it). */
KT_DEV void kt_cluster_sync(void)
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n"
		     "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* kt_cluster_sync split in two: work between them overlaps the wait for
 * the other CTAs. Every thread calls arrive once, then wait once. */
KT_DEV void kt_cluster_arrive(void)
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}

KT_DEV void kt_cluster_wait(void)
{
	asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* 16 bytes at shared-memory offset addr of CTA `cta` of the cluster
 * (distributed shared memory; that CTA must be running and the data
 * published to it by a cluster barrier). */
KT_DEV uint4 kt_ld_cluster_v4(unsigned addr, unsigned cta)
{
	uint4 v;

	asm volatile("{\n"
		     ".reg .b32 ra;\n"
		     "mapa.shared::cluster.u32 ra, %4, %5;\n"
		     "ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [ra];\n"
		     "}\n"
		     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
		     : "r"(addr), "r"(cta)
		     : "memory");
	return v;
}

/* Arrives on the mbarrier at the same offset in CTA `cta` of the cluster.
 * Default semantics (release at CTA scope), as CUTLASS's ClusterBarrier:
 * the arrival only says "my wgmmas have read the stage", it publishes no
 * data. (.release.cluster made the clusters about twice as slow; see the
 * CM note in gemm.cu.) */
KT_DEV void kt_mbar_arrive_cluster(unsigned bar, unsigned cta)
{
	asm volatile("{\n"
		     ".reg .b32 ra;\n"
		     "mapa.shared::cluster.u32 ra, %0, %1;\n"
		     "mbarrier.arrive.shared::cluster.b64 _, [ra];\n"
		     "}\n" ::"r"(bar), "r"(cta)
		     : "memory");
}

/* Named barrier for `count` threads (a multiple of 32); id 0 is
 * __syncthreads'. */
KT_DEV void kt_bar_sync(int id, int count)
{
	asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* Arrives on named barrier `id` without waiting: the producer side of a
 * hand-off whose consumer side calls kt_bar_sync with the same count. */
KT_DEV void kt_bar_arrive(int id, int count)
{
	asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* One box of shared memory at src into a rank-3 tensor map at element
 * coordinates (c0 innermost, c1, c2): a TMA store, committed to this
 * thread's bulk group by kt_bulk_commit. Elements outside the tensor are
 * not written. The shared-memory writes must be fenced to the async proxy
 * (kt_fence_proxy_async) before, and src not rewritten until
 * kt_bulk_wait_read says the copy has read it. */
KT_DEV void kt_tma_store_3d(const kt_tmap_t *m, unsigned src, int c0, int c1, int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
		     " [%0, {%2, %3, %4}], [%1];\n" ::"l"((unsigned long long)m), "r"(src),
		     "r"(c0), "r"(c1), "r"(c2)
		     : "memory");
}

/* kt_tma_store_3d with an L2 policy on the lines it writes. */
KT_DEV void kt_tma_store_3d_hint(const kt_tmap_t *m, unsigned src, int c0, int c1, int c2,
				 unsigned long long pol)
{
	asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group.L2::cache_hint"
		     " [%0, {%2, %3, %4}], [%1], %5;\n" ::"l"((unsigned long long)m), "r"(src),
		     "r"(c0), "r"(c1), "r"(c2), "l"(pol)
		     : "memory");
}

KT_DEV void kt_bulk_commit(void)
{
	asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's bulk groups still read shared
 * memory (their sources may then be rewritten). */
template <int N>
KT_DEV void kt_bulk_wait_read(void)
{
	asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/* Waits until at most N of this thread's bulk groups are incomplete
 * (their writes done). */
template <int N>
KT_DEV void kt_bulk_wait(void)
{
	asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

/*
 * sm_90a warpgroup MMA (wgmma.mma_async), shared by gemm.cu's wgmma paths
 * and blockattn_ws.cu. Operands in shared memory are described by matrix
 * descriptors over tiles stored with the 128-byte swizzle (16-byte chunk ^=
 * row % 8 within 1024-byte groups of 8 rows of 128 bytes -- kt_swz<8>):
 *   K-major (rows of 128 bytes along K): kt_wg_desc_k; a k16 step is +32 B.
 *   MN-major (rows of 128 bytes along M or N, one row per k): kt_wg_desc_mn,
 *   lbo the bytes between 64-element groups along M/N; a k16 step is +2048 B.
 * kt_wg<N>::ss<TA, TB>: D(64 x N) += A . B, both from shared memory, TA / TB
 * 1 for an MN-major (transposed) operand; kt_wg<N>::rs<TB>: A from registers
 * (the warpgroup's m64k16 fragment: per warp the m16n8k16 A layout). D is the
 * warp's m16n8 accumulator layout, N / 8 tiles of 4. Only instantiated
 * templates reach ptxas, so sm_80 / sm_90 programs may include this.
 */
/* sm_90a's arch-specific instructions (wgmma, setmaxnreg) only where they
 * are compiled for: NVRTC's sm_90a, nvcc's compute_90a. nvcc -arch=sm_90a
 * also builds a compute_90 PTX, in which they become a trap: that PTX is
 * never what an sm_90 device runs (it takes the sm_90a cubin). */
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KT_ASM_90A asm volatile
#else
#define KT_ASM_90A(...) __trap()
#endif

KT_DEV unsigned long long kt_wg_desc_k(unsigned saddr)
{
	return (unsigned long long)((saddr & 0x3ffff) >> 4) | (1ull << 16) |
	       ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

KT_DEV unsigned long long kt_wg_desc_mn(unsigned saddr, unsigned lbo)
{
	return (unsigned long long)((saddr & 0x3ffff) >> 4) |
	       ((unsigned long long)(lbo >> 4) << 16) | ((unsigned long long)(1024 >> 4) << 32) |
	       (1ull << 62);
}

KT_DEV void kt_wg_fence(void)
{
	KT_ASM_90A("wgmma.fence.sync.aligned;\n" ::: "memory");
}

KT_DEV void kt_wg_commit(void)
{
	KT_ASM_90A("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
KT_DEV void kt_wg_wait(void)
{
	KT_ASM_90A("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Keeps the compiler from touching an accumulator (N m64 fragments of
 * 4 floats a thread) across a wgmma wait. */
template <int N>
KT_DEV void kt_wg_pin(float (&d)[N][4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			asm volatile("" : "+f"(d[i][e])::"memory");
}

/* The same accumulator zeroed (before a first wgmma with scale-d 1). */
template <int N>
KT_DEV void kt_wg_zero(float (&d)[N][4])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.f;
}

/* Generic-proxy shared-memory writes (cp.async, st.shared) before
 * async-proxy reads (wgmma, TMA stores). */
KT_DEV void kt_fence_proxy_async(void)
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* A wgmma's accumulator operands: the 4 floats of fragments i, i+1, ... of
 * `d`, as m64nNk16 lists them (N/8 fragments). */
#define KT_WG_D1(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define KT_WG_D2(i) KT_WG_D1(i), KT_WG_D1(i + 1)
#define KT_WG_D4(i) KT_WG_D2(i), KT_WG_D2(i + 2)
#define KT_WG_D8(i) KT_WG_D4(i), KT_WG_D4(i + 4)
#define KT_WG_D16(i) KT_WG_D8(i), KT_WG_D8(i + 8)
#define KT_WG_D32(i) KT_WG_D16(i), KT_WG_D16(i + 16)

template <int N>
struct kt_wg;

template <>
struct kt_wg<16> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[2][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1, %10, %11;\n"
			     "}\n"
			     : KT_WG_D2(0)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
};

template <>
struct kt_wg<32> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[4][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, 1, 1, %18, %19;\n"
			     "}\n"
			     : KT_WG_D4(0)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
};

template <>
struct kt_wg<48> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[6][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
			     "%16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, 1, 1, 1, %26, %27;\n"
			     "}\n"
			     : KT_WG_D4(0), KT_WG_D2(4)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
};

template <>
struct kt_wg<64> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[8][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, 1, 1, 1, %34, %35;\n"
			     "}\n"
			     : KT_WG_D8(0)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
	template <int TB>
	KT_DEV static void rs(float (&d)[8][4], const unsigned (&a)[4], unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, 1, 1, 1, %37;\n"
			     "}\n"
			     : KT_WG_D8(0)
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
	}
};

template <>
struct kt_wg<128> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[16][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, %66, %67;\n"
			     "}\n"
			     : KT_WG_D16(0)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
	template <int TB>
	KT_DEV static void rs(float (&d)[16][4], const unsigned (&a)[4], unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, 1, 1, 1, %69;\n"
			     "}\n"
			     : KT_WG_D16(0)
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
	}
};

template <>
struct kt_wg<256> {
	template <int TA, int TB>
	KT_DEV static void ss(float (&d)[32][4], unsigned long long da, unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, %130, %131;\n"
			     "}\n"
			     : KT_WG_D32(0)
			     : "l"(da), "l"(db), "n"(TA), "n"(TB));
	}
	template <int TB>
	KT_DEV static void rs(float (&d)[32][4], const unsigned (&a)[4], unsigned long long db)
	{
		KT_ASM_90A("{\n"
			     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
			     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1, %133;\n"
			     "}\n"
			     : KT_WG_D32(0)
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(TB));
	}
};

/* Issues one block's KCH k-chunks from a warp-specialized kernel's TMA ring
 * into g (zeroed and fenced by the caller): ring slot q % SLOTS (q = j * kch
 * + kc, SLOT_BYTES each) holds a 64-wide k-chunk of A at aoff and of B at boff,
 * both K-major with the 128-byte swizzle; each chunk once its full barrier
 * (8 bytes a slot from full) says the copy engine delivered it, then its
 * four k16 steps of D (64 x WN) += A . B^T. monarch_fused.cu's S1 and
 * blast_s1tc.cu's stage 1. (Parameter names apart from the kernels' -D
 * macros: RING, SLOT.) */
template <int WN, int SLOTS, int SLOT_BYTES>
KT_DEV void kt_wg_ring_chunks(float (&g)[WN / 8][4], unsigned ring, unsigned full, int kch, int j,
			      unsigned aoff, unsigned boff)
{
	for (int kc = 0; kc < kch; kc++) {
		const int q = j * kch + kc, s = q % SLOTS;
		const unsigned st = ring + s * SLOT_BYTES;

		kt_mbar_wait(full + s * 8, (q / SLOTS) & 1);
#pragma unroll
		for (int kk = 0; kk < 4; kk++)
			kt_wg<WN>::template ss<0, 0>(g, kt_wg_desc_k(st + aoff) + 2 * kk,
						    kt_wg_desc_k(st + boff) + 2 * kk);
	}
}

#endif

#endif
