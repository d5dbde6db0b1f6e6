/*
 * gemm_epi.cuh -- what gemm.cu's three main loops share after the loop:
 * the mma.sync-layout accumulator stores (bf16 pairs, fp32 split-K
 * partials), the GROUP_M tile order of the cp.async kernels, and the split-K
 * reduction. Included by gemm.cu after its parameter defines (KT_COL,
 * COLSTEP); not a program of its own. gemm_tn and the wgmma path store bf16
 * pairs straight from the accumulators; only the ws kernel stages its
 * output tile (docs/families/dense.md has what that is worth).
 */
namespace ktg {

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

/* Tile pid of an M x N output in GROUP_M order: GM tile rows walked
 * column by column (CTAs running together share A rows and B columns in
 * L2), then the next GM. */
template <int BM, int BN, int GM>
KT_DEV void tile_at(int pid, int M, int N, int &m0, int &n0)
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

/* The cp.async kernels' CTA tile: blockIdx.x in tile_at's order. */
template <int BM, int BN, int GM>
KT_DEV void tile_coords(int M, int N, int &m0, int &n0)
{
	tile_at<BM, BN, GM>(blockIdx.x, M, N, m0, n0);
}

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
