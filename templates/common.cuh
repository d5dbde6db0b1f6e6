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

#endif
