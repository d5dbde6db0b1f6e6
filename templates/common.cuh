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

KT_DEV void kt_ldmatrix_x2(unsigned r[2], unsigned addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(addr));
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

/* Arrives on the mbarrier at the same offset in CTA `cta` of the cluster.
 * Default semantics (release at CTA scope), as CUTLASS's ClusterBarrier:
 * the arrival only says "my wgmmas have read the stage", it publishes no
 * data. (The first version, measured slow on the H200, used
 * .release.cluster; see the CM note in gemm.cu.) */
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
#endif

#endif
