/*
 * monarch.cu -- the data-movement and reference kernels of the `monarch`
 * family (kernels/monarch.c); its two GEMM stages run templates/gemm.cu.
 *
 * Notation as in docs/kernels.md: N tokens, n in, m out, b blocks, r rank,
 * rp = r / b (per-block rank r'), nb = n / b, mb = m / b. Canonical
 * weights w1 (b, r, nb) and w2 (b, mb, r); z[j] = x_j . w1[j]^T (N x r);
 * stage-2 block i gathers g[i][t][j*rp + q] = z[j][t][q*b + i];
 * y2[i] = g[i] . w2[i]^T (N x mb); y[t][s*b + i] = y2[i][t][s].
 *
 * No -D parameters: sizes are run-time arguments, indices 64-bit, and each
 * kernel a grid-stride loop over its outputs (one thread per output, block
 * 256, unless said below), so any grid of at least one block is correct.
 * tests/test_monarch.c's host emulator mirrors each kernel: change both.
 *
 *   monarch_perm_mid(z, g, N, b, r)          naive: z (b, N, r) -> g (b, N, r)
 *   monarch_relayout_w1(w1, w1r, b, r, nb)   prep of `relayout`:
 *         w1r[j][i*rp + q][:] = w1[j][q*b + i][:]
 *   monarch_gather_chunks(z, g, N, b, r)     relayout: z (N, b, b, rp) ->
 *         g (b, N, r), g[i][t][j*rp + q] = z[t][j][i*rp + q], 16-byte
 *         chunks (rp % 8 == 0, pointers 16-byte aligned)
 *   monarch_perm_out(y2, y, N, m, b)         y2 (N, m) block-major
 *         (column i*mb + s) -> y (N, m) interleaved (column s*b + i)
 *   monarch_perm_rows(y2, y, N, m, b)        the same permutation, one row
 *         per block (grid N, block 256) through shared memory: 16-byte
 *         loads and stores (m % 8 == 0); dynamic smem b * (mb + 8) * 2
 *         (each block's run padded by 16 bytes); fused_ws's epilogue 1
 *         where b % 8 != 0
 *   monarch_perm_x8(y2, y, N, m, b)          the same for b % 8 == 0, no
 *         shared memory: a thread per (token, 8-column chunk, group of 8
 *         blocks), g fastest, loads 8 16-byte chunks, transposes the 8 x 8
 *         bf16 in registers and stores 8 chunks, so a warp reads whole runs
 *         of y2 and writes whole 32-byte sectors of y; block 128 (~4 blocks
 *         per SM at llama7b's 65536 items, where 256 would leave SMs uneven)
 *   monarch_ref_z(x, w1, z32, N, n, b, r)    reference stage 1 into fp32
 *         z32 (b, N, r), k in order
 *   monarch_ref_y(z32, w2, y, N, m, b, r, bm)   reference stage 2 with
 *         both permutations written out: O(r) per output, j then q in
 *         order; bm = 1 writes y block-major (y[t][i*mb + s], monarch_bm)
 */
#include "common.cuh"

typedef long long i64;

#define MONARCH_FOR(e, total)                                                        \
	for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
	     e += (i64)gridDim.x * blockDim.x)

extern "C" __global__ void monarch_perm_mid(const __nv_bfloat16 *z, __nv_bfloat16 *g, int N,
					    int b, int r)
{
	const int rp = r / b;

	MONARCH_FOR(e, (i64)b * N * r)
	{
		const int k = (int)(e % r);	/* j*rp + q */
		const i64 row = e / r;		/* i*N + t */
		const int t = (int)(row % N), i = (int)(row / N);
		const int j = k / rp, q = k % rp;

		g[e] = z[((i64)j * N + t) * r + (i64)q * b + i];
	}
}

extern "C" __global__ void monarch_relayout_w1(const __nv_bfloat16 *w1, __nv_bfloat16 *w1r,
					       int b, int r, int nb)
{
	const int rp = r / b;

	MONARCH_FOR(e, (i64)b * r * nb)
	{
		const int k = (int)(e % nb);
		const i64 row = e / nb;		/* j*r + i*rp + q */
		const int c = (int)(row % r), j = (int)(row / r);
		const int i = c / rp, q = c % rp;

		w1r[e] = w1[((i64)j * r + (i64)q * b + i) * nb + k];
	}
}

extern "C" __global__ void monarch_gather_chunks(const __nv_bfloat16 *z, __nv_bfloat16 *g,
						 int N, int b, int r)
{
	const int rp = r / b;

	MONARCH_FOR(ch, (i64)b * N * r / 8)
	{
		const i64 e = ch * 8;		/* first element of the chunk in g */
		const int k = (int)(e % r);	/* j*rp + q, q a multiple of 8 */
		const i64 row = e / r;		/* i*N + t */
		const int t = (int)(row % N), i = (int)(row / N);
		const int j = k / rp, q = k % rp;
		const i64 src = ((i64)t * b + j) * r + (i64)i * rp + q;

		*reinterpret_cast<uint4 *>(g + e) = *reinterpret_cast<const uint4 *>(z + src);
	}
}

extern "C" __global__ void monarch_perm_out(const __nv_bfloat16 *y2, __nv_bfloat16 *y, int N,
					    int m, int b)
{
	const int mb = m / b;

	MONARCH_FOR(e, (i64)N * m)
	{
		const int o = (int)(e % m);
		const i64 t = e / m;
		const int i = o % b, s = o / b;

		y[e] = y2[t * m + (i64)i * mb + s];
	}
}

extern "C" __global__ void monarch_perm_rows(const __nv_bfloat16 *y2, __nv_bfloat16 *y, int N,
					     int m, int b)
{
	extern __shared__ __align__(16) unsigned char monarch_row[];
	__nv_bfloat16 *row = reinterpret_cast<__nv_bfloat16 *>(monarch_row);
	const int mb = m / b, pitch = mb + 8;

	for (i64 t = blockIdx.x; t < N; t += gridDim.x) {
		const __nv_bfloat16 *src = y2 + t * m;

		/* block i's run of mb at i * pitch: 16-byte chunks (mb % 8 == 0) */
		for (int ch = threadIdx.x; ch < m / 8; ch += blockDim.x) {
			const int i = ch / (mb / 8), c = ch % (mb / 8);

			*reinterpret_cast<uint4 *>(row + i * pitch + c * 8) =
				*reinterpret_cast<const uint4 *>(src + ch * 8);
		}
		__syncthreads();
		for (int ch = threadIdx.x; ch < m / 8; ch += blockDim.x) {
			__align__(16) __nv_bfloat16 v[8];

#pragma unroll
			for (int u = 0; u < 8; u++) {
				const int o = ch * 8 + u;

				v[u] = row[(o % b) * pitch + o / b];
			}
			*reinterpret_cast<uint4 *>(y + t * m + ch * 8) =
				*reinterpret_cast<const uint4 *>(v);
		}
		__syncthreads();
	}
}

extern "C" __global__ void monarch_perm_x8(const __nv_bfloat16 *y2, __nv_bfloat16 *y, int N,
					   int m, int b)
{
	const int mb = m / b, sc = mb / 8, ng = b / 8;

	MONARCH_FOR(e, (i64)N * sc * ng)
	{
		const int g = (int)(e % ng), sb = (int)((e / ng) % sc);
		const i64 t = e / ng / sc;
		const __nv_bfloat16 *src = y2 + t * m + (i64)g * 8 * mb + sb * 8;
		__nv_bfloat16 *dst = y + t * m + (i64)sb * 8 * b + g * 8;
		unsigned w[8][4];

		/* w[c]: block 8g + c, s = 8sb .. 8sb+7 (word k: s = 8sb + 2k, +1) */
#pragma unroll
		for (int c = 0; c < 8; c++) {
			const uint4 v = *reinterpret_cast<const uint4 *>(src + (i64)c * mb);

			w[c][0] = v.x;
			w[c][1] = v.y;
			w[c][2] = v.z;
			w[c][3] = v.w;
		}
#pragma unroll
		for (int u = 0; u < 8; u++)	/* s = 8sb + u */
			*reinterpret_cast<uint4 *>(dst + (i64)u * b) = kt_bf16x8_column(w, u);
	}
}

extern "C" __global__ void monarch_ref_z(const __nv_bfloat16 *x, const __nv_bfloat16 *w1,
					 float *z32, int N, int n, int b, int r)
{
	const int nb = n / b;

	MONARCH_FOR(e, (i64)b * N * r)
	{
		const int c = (int)(e % r);
		const i64 row = e / r;		/* j*N + t */
		const int t = (int)(row % N), j = (int)(row / N);
		const __nv_bfloat16 *xr = x + (i64)t * n + (i64)j * nb;
		const __nv_bfloat16 *wr = w1 + ((i64)j * r + c) * nb;
		float acc = 0.f;

		for (int k = 0; k < nb; k++)
			acc += __bfloat162float(xr[k]) * __bfloat162float(wr[k]);
		z32[e] = acc;
	}
}

extern "C" __global__ void monarch_ref_y(const float *z32, const __nv_bfloat16 *w2,
					 __nv_bfloat16 *y, int N, int m, int b, int r, int bm)
{
	const int rp = r / b, mb = m / b;

	MONARCH_FOR(e, (i64)N * m)
	{
		const int o = (int)(e % m);
		const int t = (int)(e / m);
		/* output permutation: interleaved, or block-major (monarch_bm) */
		const int i = bm ? o / mb : o % b, s = bm ? o % mb : o / b;
		const __nv_bfloat16 *wr = w2 + ((i64)i * mb + s) * r;
		float acc = 0.f;

		for (int j = 0; j < b; j++)
			for (int q = 0; q < rp; q++)	/* middle permutation */
				acc += z32[((i64)j * N + t) * r + (i64)q * b + i] *
				       __bfloat162float(wr[j * rp + q]);
		y[e] = __float2bfloat16_rn(acc);
	}
}
