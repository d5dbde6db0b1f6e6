/*
 * blast.cu -- the mixing and reference kernels of the `blast` family
 * (kernels/blast.c); its two GEMM stages run templates/gemm.cu.
 *
 * Notation as in docs/kernels.md: N tokens, n in, m out, b blocks, r rank,
 * nb = n / b, mb = m / b. Canonical weights U (b, mb, r), V (b, r, nb),
 * S (b, b, r); z[j] = x_j . V_j^T (N x r); w[i][t][c] = sum_j S[i][j][c] *
 * z[j][t][c]; y[:, i*mb + o'] = w[i] . U_i^T.
 *
 * Every size is a run-time argument and every index 64-bit. The host
 * emulator in tests/test_blast.c mirrors each kernel line by line: change
 * both together.
 *
 *   blast_s_to_f32(S, S32, count)            prep (offline transform):
 *         S32[e] = float(S[e]); grid-stride, block 256
 *   blast_mix(z, S32, w, N, r)               only with -DMIX_B=b:
 *         w[i][t][c] = sum_j S32[i][j][c] * z[j][t][c], z and w (b, N, r)
 *         bf16, fp32 sums in j order. grid (ceil(N/32), ceil((r/RV)/8)),
 *         block (32, 8): lane = token, (blockIdx.y*8 + threadIdx.y) = the
 *         RV-rank vector, so a warp's S32 loads are one broadcast address.
 *         RV = 8 for b <= 16, 4 for b <= 32, 2 for b <= 64, else 1
 *         (kernels/blast.c mix_rv() says the same); for b <= 64 the b
 *         vectors of z of the thread stay in registers as fp32.
 *   blast_s1mix(x, V, S32, w, N, n, r)       only with -DFUSED=1 -DMIX_B=b
 *         and gemm.cu's tile defines (BLOCK_M, BLOCK_N = the rank tile,
 *         BLOCK_K, WARPS_M, WARPS_N, STAGES, GROUP_M): mix_fused's stage 1
 *         and mixing in one kernel, w written once (see below)
 *   blast_ref_z(x, V, z32, N, n, b, r)       reference stage 1 into fp32
 *         z32 (b, N, r), k in order
 *   blast_ref_w(z32, S, w32, N, b, r)        reference mixing into fp32
 *         w32 (b, N, r), j in order
 *   blast_ref_y(w32, U, y, N, m, b, r)       reference stage 3: y (N, m)
 *         bf16, c in order
 * The element-wise kernels are grid-stride loops over their outputs (one
 * thread per output element, block 256), so any grid of at least one block
 * is correct.
 */
#include <cuda_bf16.h>

typedef long long i64;

#define BLAST_FOR(e, total)                                                        \
	for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \
	     e += (i64)gridDim.x * blockDim.x)

extern "C" __global__ void blast_s_to_f32(const __nv_bfloat16 *S, float *S32, i64 count)
{
	BLAST_FOR(e, count)
	S32[e] = __bfloat162float(S[e]);
}

#ifdef MIX_B

#define MIX_RV (MIX_B <= 16 ? 8 : MIX_B <= 32 ? 4 : MIX_B <= 64 ? 2 : 1)
#define MIX_CACHE (MIX_B <= 64)

constexpr int mix_unroll = MIX_CACHE ? MIX_B : 8;

/* RV bf16 values at p (RV-aligned) as fp32. */
__device__ __forceinline__ void mix_ld_bf16(float (&f)[MIX_RV], const __nv_bfloat16 *p)
{
	if constexpr (MIX_RV == 8) {
		uint4 u = *reinterpret_cast<const uint4 *>(p);
		unsigned w[4] = {u.x, u.y, u.z, u.w};

#pragma unroll
		for (int k = 0; k < 4; k++) {
			f[2 * k] = __uint_as_float(w[k] << 16);
			f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
		}
	} else if constexpr (MIX_RV == 4) {
		uint2 u = *reinterpret_cast<const uint2 *>(p);
		unsigned w[2] = {u.x, u.y};

#pragma unroll
		for (int k = 0; k < 2; k++) {
			f[2 * k] = __uint_as_float(w[k] << 16);
			f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
		}
	} else if constexpr (MIX_RV == 2) {
		unsigned w = *reinterpret_cast<const unsigned *>(p);

		f[0] = __uint_as_float(w << 16);
		f[1] = __uint_as_float(w & 0xffff0000u);
	} else {
		f[0] = __bfloat162float(p[0]);
	}
}

/* RV fp32 values at p (RV*4-byte aligned). */
__device__ __forceinline__ void mix_ld_f32(float (&f)[MIX_RV], const float *p)
{
	if constexpr (MIX_RV >= 4) {
#pragma unroll
		for (int k = 0; k < MIX_RV / 4; k++) {
			float4 v = reinterpret_cast<const float4 *>(p)[k];

			f[4 * k] = v.x;
			f[4 * k + 1] = v.y;
			f[4 * k + 2] = v.z;
			f[4 * k + 3] = v.w;
		}
	} else if constexpr (MIX_RV == 2) {
		float2 v = *reinterpret_cast<const float2 *>(p);

		f[0] = v.x;
		f[1] = v.y;
	} else {
		f[0] = p[0];
	}
}

__device__ __forceinline__ void mix_st_bf16(__nv_bfloat16 *p, const float (&f)[MIX_RV])
{
	if constexpr (MIX_RV == 1) {
		p[0] = __float2bfloat16_rn(f[0]);
	} else {
		unsigned w[(MIX_RV + 1) / 2];

#pragma unroll
		for (int k = 0; k < MIX_RV / 2; k++) {
			__nv_bfloat162 h = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);

			w[k] = *reinterpret_cast<unsigned *>(&h);
		}
		if constexpr (MIX_RV == 8)
			*reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
		else if constexpr (MIX_RV == 4)
			*reinterpret_cast<uint2 *>(p) = make_uint2(w[0], w[1]);
		else
			*reinterpret_cast<unsigned *>(p) = w[0];
	}
}

/*
 * One mixing point: the RV ranks c.. of one token, all b blocks:
 * w[i][c..] = sum_j S32[i][j][c..] * z_j[c..] (fp32, j in order) for every
 * i. z_j is at zp + j * zstride (global z or a shared-memory tile), w[i]
 * at wp + i * wstride; S32 at S32 + c, r ranks per (i, j).
 */
__device__ __forceinline__ void mix_point(const __nv_bfloat16 *zp, i64 zstride, const float *S32,
					  int r, __nv_bfloat16 *wp, i64 wstride)
{
#if MIX_CACHE
	float zf[MIX_B][MIX_RV];

#pragma unroll
	for (int j = 0; j < MIX_B; j++)
		mix_ld_bf16(zf[j], zp + j * zstride);
#endif
#pragma unroll 1
	for (int i = 0; i < MIX_B; i++) {
		float acc[MIX_RV];

#pragma unroll
		for (int k = 0; k < MIX_RV; k++)
			acc[k] = 0.f;
		/* fully unrolled while z sits in registers (zf[j] needs a
		 * constant j); beyond that a partial unroll keeps ptxas from
		 * hoisting hundreds of loads into spills */
#pragma unroll mix_unroll
		for (int j = 0; j < MIX_B; j++) {
			float s[MIX_RV];

			mix_ld_f32(s, S32 + ((i64)i * MIX_B + j) * r);
#if MIX_CACHE
#pragma unroll
			for (int k = 0; k < MIX_RV; k++)
				acc[k] = fmaf(s[k], zf[j][k], acc[k]);
#else
			float zv[MIX_RV];

			mix_ld_bf16(zv, zp + j * zstride);
#pragma unroll
			for (int k = 0; k < MIX_RV; k++)
				acc[k] = fmaf(s[k], zv[k], acc[k]);
#endif
		}
		mix_st_bf16(wp + i * wstride, acc);
	}
}

extern "C" __global__ void __launch_bounds__(256)
blast_mix(const __nv_bfloat16 *z, const float *S32, __nv_bfloat16 *w, int N, int r)
{
	const int t = blockIdx.x * 32 + threadIdx.x;
	const int vec = blockIdx.y * blockDim.y + threadIdx.y;
	const int c = vec * MIX_RV;
	const i64 plane = (i64)N * r;	/* elements of one block's z or w */

	if (t >= N || c >= r)
		return;
	const i64 off = (i64)t * r + c;

	mix_point(z + off, plane, S32 + c, r, w + off, plane);
}

#ifdef FUSED
/*
 * mix_fused (kernels/blast.c): stage 1 and the mixing in one kernel. A CTA
 * owns the BLOCK_M x BLOCK_N (tokens x ranks) tile of every block: for
 * j = 0..b-1 gemm.cu's mma.sync main loop computes z[j]'s tile (K = nb)
 * and parks it as bf16 in shared memory (rows ZLD = BLOCK_N + 8 apart:
 * the pad spreads the mixer's row-wise 16-byte reads over the banks);
 * then the CTA mixes the b tiles into w (lane = token, so S32 loads are
 * warp-wide broadcasts) and writes w once. z never reaches global memory.
 * Tile order: gemm.cu's GROUP_M order over (tokens, ranks).
 * grid ceil(N/BLOCK_M)*ceil(r/BLOCK_N), block WARPS_M*WARPS_N*32, dynamic
 * smem STAGES*(BLOCK_M+BLOCK_N)*BLOCK_K*2 + MIX_B*BLOCK_M*(BLOCK_N+8)*2.
 */
#define KT_GEMM_NO_KERNELS 1
#include "gemm.cu"

#ifndef GROUP_M
#define GROUP_M 1
#endif

extern "C" __global__ void __launch_bounds__(WARPS_M * WARPS_N * 32, 1)
blast_s1mix(const __nv_bfloat16 *x, const __nv_bfloat16 *V, const float *S32, __nv_bfloat16 *w,
	    int N, int n, int r)
{
	typedef ktg::mainloop<BLOCK_M, BLOCK_N, BLOCK_K, WARPS_M, WARPS_N, STAGES> ML;
	constexpr int NT = WARPS_M * WARPS_N * 32, ZLD = BLOCK_N + 8;
	constexpr int RING = STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * 2;
	constexpr int VECS = BLOCK_N / MIX_RV, POS = BLOCK_M * VECS;
	extern __shared__ __align__(128) unsigned char kt_smem[];
	__nv_bfloat16 *zs = reinterpret_cast<__nv_bfloat16 *>(kt_smem + RING);
	const unsigned ring = kt_smem_u32(kt_smem);
	const int nb = n / MIX_B, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int wrow = (warp / WARPS_N) * ML::WM, wcol = (warp % WARPS_N) * ML::WN;
	const i64 plane = (i64)N * r;
	float acc[ML::MI][ML::NI][4];
	int m0, n0;

	static_assert(BLOCK_N % MIX_RV == 0, "rank tile in whole mixer vectors");
	ktg::tile_coords<BLOCK_M, BLOCK_N, GROUP_M>(N, r, m0, n0);
#pragma unroll 1
	for (int j = 0; j < MIX_B; j++) {
		__nv_bfloat16 *zj = zs + j * (BLOCK_M * ZLD);

		ML::run(acc, x + (i64)j * nb, n, V + (i64)j * r * nb, nb, m0, n0, N, r, nb, ring);
#pragma unroll
		for (int mi = 0; mi < ML::MI; mi++)
#pragma unroll
			for (int ni = 0; ni < ML::NI; ni++) {
				const int row = wrow + mi * 16 + (lane >> 2);
				const int col = wcol + ni * 8 + (lane & 3) * 2;

				*reinterpret_cast<__nv_bfloat162 *>(zj + row * ZLD + col) =
					__floats2bfloat162_rn(acc[mi][ni][0], acc[mi][ni][1]);
				*reinterpret_cast<__nv_bfloat162 *>(zj + (row + 8) * ZLD + col) =
					__floats2bfloat162_rn(acc[mi][ni][2], acc[mi][ni][3]);
			}
		/* every warp is done with the ring before the next j refills
		 * it; after the last j, every z tile is complete */
		__syncthreads();
	}
	for (int p = threadIdx.x; p < POS; p += NT) {
		const int tl = p % BLOCK_M, vl = p / BLOCK_M;
		const int t = m0 + tl, c = n0 + vl * MIX_RV;

		if (t >= N || c >= r)
			continue;
		mix_point(zs + tl * ZLD + vl * MIX_RV, BLOCK_M * ZLD, S32 + c, r,
			  w + (i64)t * r + c, plane);
	}
}
#endif /* FUSED */

#ifdef MIX_TC
/*
 * tcmix, tcmix_ws (kernels/blast.c): the mixing on tensor cores. For one
 * rank c the mixing is a b x b matrix times a b x N one, W_c = S_c Z_c
 * (S_c[i][j] = S[i][j][c], Z_c[j][t] = z[j][t][c]): with b <= 16 padded to
 * 16, an m16n8k16 mma per (rank, 8 tokens), A = S_c from St (the prep's
 * rank-major copy of S), B = Z_c, fp32 sums, w rounded to bf16 once.
 *
 * blast_mix_tcp(z, St, w, N, r): a CTA (4 warps) owns TC_R = 64 ranks
 * and walks token tiles of TP_T = 8 tokens (one mma n), y + k * gy as
 * tp_assign deals them (every CTA is resident at once, so the CTAs of the
 * rank tiles that take token tile tt read and write its rows together),
 * through a ring
 * of TP_RING = 3 shared-memory tiles: the next two tiles' cp.async copies
 * are in flight while the current one is mixed and stored. Each warp holds
 * the A fragments (S_c) of its 16 ranks in registers, loaded once.
 *
 * Transposes: lane (g, q) of warp w (ranks 16w .. 16w+15 of the tile)
 * reads 16 bytes (8 ranks) of each of the rows (j = 2q, 2q+1, 2q+8, 2q+9;
 * token g): the k = j pairs of its B fragments, so one byte permute per
 * fragment register is the whole transpose (rank k's pair is the low or
 * high half of one word of rows j and j+1). Its accumulators are rows
 * i = g, g+8 and tokens 2q, 2q+1 of each rank: 8 ranks of one (i, token)
 * are one 16-byte chunk of w's tile, which takes the warp's own chunk
 * columns of z's as soon as the warp has read them (no other warp reads or
 * writes those columns). z's slot of block j is tc_zslot(j), w's is i,
 * TP_ZS bytes apart (2 chunks mod 8), rows TP_P bytes (1 chunk mod 8):
 * the 8 lanes of a quarter warp reading z hit 8 distinct 16-byte bank
 * groups (w's stores: 2-way), and so do the row-wise copies from and to
 * global memory (tp_issue, tp_store).
 *
 * The mixer is bound by its traffic (z in, w out: it runs near cudaMemcpy
 * of the same bytes, tools/mix_probe.cu). Why this form: two tiles in
 * flight per CTA at 3 CTAs per SM (164 registers) beat one at 4 (128
 * registers), and fragments read straight from global memory touch 32
 * lines per 16-byte warp load (docs/families/blast.md has the figures).
 * grid (any, 1, 1) (tp_assign), block 128, TP_SMEM bytes of dynamic
 * shared memory (kernels/blast.c's TP_SMEM says the same).
 */
#include "common.cuh"

/* MIX_L2 (bits, kernels/blast.c's L2 parameter; 0 leaves the code as it
 * was): 1 the mixer drops z's L2 lines of a tile once the tile has landed
 * in shared memory (z is dead then: each line is read by one CTA, once), so
 * that stage 1's dirty lines are never written back and w takes their
 * room; needs r % 64 == 0 (a rank tile's row is one 128-byte line); 8 w's
 * stores under evict_last (stage 3 reads them next). */
#ifndef MIX_L2
#define MIX_L2 0
#endif

static_assert(MIX_B <= 16, "tcmix pads the blocks to one 16 x 16 tile");
constexpr int TC_R = 64, TP_T = 8, TP_P = TC_R * 2 + 16, TP_ZS = TP_T * TP_P + 32;
constexpr int TP_TILE = 16 * TP_ZS;	/* one tile: 16 slots */
constexpr int TP_RING = 3;		/* tiles in shared memory: 2 in flight */
constexpr int TP_SMEM = TP_RING * TP_TILE;
constexpr int TP_LD = 16 * TP_T * (TC_R / 8) / 128;	/* z chunks per thread per tile */
static_assert(TP_P % 128 == 16 && TP_ZS % 128 == 32, "blast_mix_tcp's conflict-free strides");
static_assert(TP_SMEM <= 227 * 1024, "blast_mix_tcp's tile fits one CTA's shared memory");

__device__ __forceinline__ int tc_zslot(int j)
{
	return (j & 1) ? 8 + (j >> 1) : (j >> 1);
}

extern "C" __global__ void blast_s_to_t16(const __nv_bfloat16 *S, __nv_bfloat16 *St, int r)
{
	BLAST_FOR(e, (i64)r * 256)
	{
		const int j = (int)(e & 15), i = (int)((e >> 4) & 15);
		const i64 c = e >> 8;

		St[e] = (i < MIX_B && j < MIX_B) ? S[((i64)i * MIX_B + j) * r + c]
						 : __float2bfloat16_rn(0.f);
	}
}

/* Starts the copy of z's tile at token t0 into the shared tile at sz
 * (block j in slot tc_zslot(j)): thread tid's chunks e = tid + 128u (8
 * chunks a row, then rows t, then blocks j), zero-filled outside the
 * shape; one cp.async group. */
__device__ __forceinline__ void tp_issue(unsigned sz, const __nv_bfloat16 *z, i64 plane, int N,
					 int r, int t0, int c0, int tid)
{
#pragma unroll
	for (int u = 0; u < TP_LD; u++) {
		const int e = tid + 128 * u, ch = e & 7, tl = (e >> 3) % TP_T, j = e / (8 * TP_T);
		const int t = t0 + tl, c = c0 + ch * 8;
		const bool in = j < MIX_B && t < N && c < r;

		kt_cp_async16(sz + tc_zslot(j) * TP_ZS + tl * TP_P + ch * 16,
			      in ? z + j * plane + (i64)t * r + c : z, in);
	}
	kt_cp_async_commit();
}

/* The shared tile at sz (block i in slot i, i < MIX_B) as w's tile at
 * token t0, in 16-byte chunks inside the shape (MIX_L2 & 8: under the
 * policy pol). */
__device__ __forceinline__ void tp_store(unsigned sz, __nv_bfloat16 *w, i64 plane, int N, int r,
					 int t0, int c0, int tid, unsigned long long pol)
{
	for (int e = tid; e < MIX_B * TP_T * 8; e += 128) {
		const int ch = e & 7, tl = (e >> 3) % TP_T, i = e / (8 * TP_T);
		const int t = t0 + tl, c = c0 + ch * 8;
		uint4 o;

		if (t >= N || c >= r)
			continue;
		asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
			     : "=r"(o.x), "=r"(o.y), "=r"(o.z), "=r"(o.w)
			     : "r"(sz + i * TP_ZS + tl * TP_P + ch * 16)
			     : "memory");
#if MIX_L2 & 8
		kt_st16_hint(w + i * plane + (i64)t * r + c, o, pol);
#else
		(void)pol;
		*reinterpret_cast<uint4 *>(w + i * plane + (i64)t * r + c) = o;
#endif
	}
}

/* The warp's 8-rank chunk ch of the tile at sz: z -> w in place (the
 * warp's own columns), with the A fragments af of its 8 ranks. */
__device__ __forceinline__ void tp_mix_chunk(unsigned sz, const unsigned af[8][4], int ch,
					     int lane)
{
	const int g = lane >> 2, q = lane & 3;
	uint4 b4[4];		/* rows j = 2q, 2q+1, 2q+8, 2q+9 */
	unsigned o[4][4];	/* (i = g | g+8) x (token 2q | 2q+1), rank pairs */

#pragma unroll
	for (int jj = 0; jj < 4; jj++) {
		const int slot = (jj & 1) * 8 + (jj >> 1) * 4 + q;	/* tc_zslot(j) */

		asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
			     : "=r"(b4[jj].x), "=r"(b4[jj].y), "=r"(b4[jj].z), "=r"(b4[jj].w)
			     : "r"(sz + slot * TP_ZS + g * TP_P + ch * 16)
			     : "memory");
	}
#pragma unroll
	for (int k = 0; k < 8; k += 2) {
		float d[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};

#pragma unroll
		for (int kk = 0; kk < 2; kk++) {
			const unsigned sel = kk ? 0x7632u : 0x5410u;
			unsigned wd[4], bb[2];

#pragma unroll
			for (int jj = 0; jj < 4; jj++) {
				const uint4 u = b4[jj];

				wd[jj] = k == 0 ? u.x : k == 2 ? u.y : k == 4 ? u.z : u.w;
			}
			bb[0] = __byte_perm(wd[0], wd[1], sel);
			bb[1] = __byte_perm(wd[2], wd[3], sel);
			kt_mma_bf16_16816(d[kk], af[k + kk], bb);
		}
#pragma unroll
		for (int x = 0; x < 4; x++)
			o[x][k >> 1] = kt_pack_bf16x2(d[0][x], d[1][x]);
	}
	/* every lane of the warp has read chunk ch of every row */
	__syncwarp();
#pragma unroll
	for (int x = 0; x < 4; x++) {
		/* x = 0, 1: row g, tokens 2q, 2q+1; x = 2, 3: row g + 8 */
		const int i = g + 8 * (x >> 1), t = 2 * q + (x & 1);

		if (MIX_B <= 8 && x >= 2)
			continue;
		asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
				     sz + i * TP_ZS + t * TP_P + ch * 16),
			     "r"(o[x][0]), "r"(o[x][1]), "r"(o[x][2]), "r"(o[x][3])
			     : "memory");
	}
}

/* The work of CTA k of a grid of C over R rank tiles of TC_R ranks and the
 * token tiles. C >= R: rank tile rt goes to G or G + 1 CTAs (G = C / R,
 * the first C % R tiles get G + 1), and CTA y of those takes token tiles y,
 * y + gy, ..; C < R: CTA k takes rank tiles k, k + C, .., each with every
 * token tile. Any C >= 1 covers every (rank tile, token tile) once;
 * kernels/blast.c picks C so that the CTAs resident at once share the
 * tiles evenly (a grid of rank tiles x token runs left SMs with two CTAs
 * beside SMs with three, or a few CTAs for a second wave). */
struct tp_work {
	int rt, rstep;	/* first rank tile, step to the next */
	int y, gy;	/* first token tile, step to the next */
};

__device__ __forceinline__ tp_work tp_assign(int k, int C, int R)
{
	const int G = C / R, A = C % R;
	tp_work a;

	if (G == 0) {
		a.rt = k;
		a.rstep = C;
		a.y = 0;
		a.gy = 1;
	} else if (k < A * (G + 1)) {
		a.rt = k / (G + 1);
		a.rstep = R;
		a.y = k % (G + 1);
		a.gy = G + 1;
	} else {
		const int k2 = k - A * (G + 1);

		a.rt = A + k2 / G;
		a.rstep = R;
		a.y = k2 % G;
		a.gy = G;
	}
	return a;
}

/* The walk of a CTA over its token tiles tt = y + k * gy (k-th in ring
 * slot k % TP_RING; one cp.async group each, empty past the end, TP_RING -
 * 1 ahead): tile(sz, tt) runs on each tile once it is in for every thread,
 * and the slot is refilled only after the next tile's barrier, i.e. once
 * every thread is done with it. Every cp.async group has landed on return. */
template <typename F>
__device__ __forceinline__ void tp_walk(unsigned s0, const __nv_bfloat16 *z, i64 plane, int N,
					int r, int c0, int tid, int y, int gy, F tile)
{
	const int ntiles = (N + TP_T - 1) / TP_T;
	int k = 0;

	for (int p = 0; p < TP_RING - 1; p++) {
		const int tt = y + p * gy;

		if (tt < ntiles)
			tp_issue(s0 + p * TP_TILE, z, plane, N, r, tt * TP_T, c0, tid);
		else
			kt_cp_async_commit();
	}
	for (int tt = y; tt < ntiles; tt += gy, k++) {
		const int tn = tt + (TP_RING - 1) * gy;

		kt_cp_async_wait<TP_RING - 2>();
		/* tile k is in for every thread, and tile k-1's slot, which tile
		 * k+2 takes, has been used by all */
		__syncthreads();
		if (tn < ntiles)
			tp_issue(s0 + ((k + TP_RING - 1) % TP_RING) * TP_TILE, z, plane, N, r, tn * TP_T,
				 c0, tid);
		else
			kt_cp_async_commit();
		tile(s0 + (k % TP_RING) * TP_TILE, tt);
	}
	kt_cp_async_wait<0>();
}

#ifndef TP_MINB
#define TP_MINB 3	/* CTAs per SM (kernels/blast.c's TP_CTAS_PER_SM): 164 registers */
#endif
extern "C" __global__ void __launch_bounds__(128, TP_MINB)
blast_mix_tcp(const __nv_bfloat16 *__restrict__ z, const __nv_bfloat16 *__restrict__ St,
	      __nv_bfloat16 *__restrict__ w, int N, int r)
{
	extern __shared__ __align__(16) unsigned char tp_smem[];
	const unsigned s0 = kt_smem_u32(tp_smem);
	const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
	const int g = lane >> 2, q = lane & 3;
	const int R = (r + TC_R - 1) / TC_R;
	const tp_work a = tp_assign(blockIdx.x, gridDim.x, R);
	const i64 plane = (i64)N * r;
	/* MIX_L2 & 8: w's stores evict_last (one policy for the whole walk) */
	const unsigned long long wpol = kt_l2_evict_last_if<(MIX_L2 & 8) != 0>();
	unsigned af[2][8][4];	/* St_c's A fragments of the warp's 16 ranks */
	/* lane (g, q): rows g, g + 8; k = 2q.. | 2q+8.. (St is the prep's:
	 * ready before the previous kernel ran) */
	auto load_af = [&](int c0) {
#pragma unroll
		for (int hh = 0; hh < 2; hh++)
#pragma unroll
			for (int kk = 0; kk < 8; kk++) {
				const int c = c0 + warp * 16 + hh * 8 + kk;
				const unsigned *sp =
					reinterpret_cast<const unsigned *>(St + (i64)c * 256);
				const bool in = c < r;

				af[hh][kk][0] = in ? __ldg(sp + g * 8 + q) : 0u;
				af[hh][kk][1] = in ? __ldg(sp + (g + 8) * 8 + q) : 0u;
				af[hh][kk][2] = in ? __ldg(sp + g * 8 + q + 4) : 0u;
				af[hh][kk][3] = in ? __ldg(sp + (g + 8) * 8 + q + 4) : 0u;
			}
	};

	load_af(a.rt * TC_R);
	kt_pdl_wait();	/* z is the previous kernel's */
	for (int rt = a.rt; rt < R; rt += a.rstep) {
		const int c0 = rt * TC_R;

		if (rt != a.rt)	/* more rank tiles than CTAs */
			load_af(c0);
		tp_walk(s0, z, plane, N, r, c0, tid, a.y, a.gy, [&](unsigned sz, int tt) {
#if MIX_L2 & 1
			{
				/* the tile is in for every thread: thread (j, token)
				 * drops its 128-byte line of z */
				const int j = tid / TP_T, t = tt * TP_T + tid % TP_T;

				static_assert(16 * TP_T == 128 && TC_R * 2 == 128,
					      "one z line a thread per tile");
				if (j < MIX_B && t < N && c0 + TC_R <= r)
					kt_l2_discard(z + j * plane + (i64)t * r + c0);
			}
#endif
			tp_mix_chunk(sz, af[0], warp * 2, lane);
			tp_mix_chunk(sz, af[1], warp * 2 + 1, lane);
			__syncthreads();
			tp_store(sz, w, plane, N, r, tt * TP_T, c0, tid, wpol);
		});
	}
}
#endif /* MIX_TC */

#endif /* MIX_B */

extern "C" __global__ void blast_ref_z(const __nv_bfloat16 *x, const __nv_bfloat16 *V, float *z32,
				       int N, int n, int b, int r)
{
	const int nb = n / b;

	BLAST_FOR(e, (i64)b * N * r)
	{
		const int c = (int)(e % r);
		const i64 row = e / r;		/* j*N + t */
		const int t = (int)(row % N), j = (int)(row / N);
		const __nv_bfloat16 *xr = x + (i64)t * n + (i64)j * nb;
		const __nv_bfloat16 *vr = V + ((i64)j * r + c) * nb;
		float acc = 0.f;

		for (int k = 0; k < nb; k++)
			acc += __bfloat162float(xr[k]) * __bfloat162float(vr[k]);
		z32[e] = acc;
	}
}

extern "C" __global__ void blast_ref_w(const float *z32, const __nv_bfloat16 *S, float *w32, int N,
				       int b, int r)
{
	BLAST_FOR(e, (i64)b * N * r)
	{
		const int c = (int)(e % r);
		const i64 row = e / r;		/* i*N + t */
		const int t = (int)(row % N), i = (int)(row / N);
		float acc = 0.f;

		for (int j = 0; j < b; j++)
			acc += __bfloat162float(S[((i64)i * b + j) * r + c]) *
			       z32[((i64)j * N + t) * r + c];
		w32[e] = acc;
	}
}

extern "C" __global__ void blast_ref_y(const float *w32, const __nv_bfloat16 *U, __nv_bfloat16 *y,
				       int N, int m, int b, int r)
{
	const int mb = m / b;

	BLAST_FOR(e, (i64)N * m)
	{
		const int o = (int)(e % m);
		const int t = (int)(e / m);
		const int i = o / mb, op = o % mb;	/* y's column block i */
		const float *wr = w32 + ((i64)i * N + t) * r;
		const __nv_bfloat16 *ur = U + ((i64)i * mb + op) * r;
		float acc = 0.f;

		for (int c = 0; c < r; c++)
			acc += wr[c] * __bfloat162float(ur[c]);
		y[e] = __float2bfloat16_rn(acc);
	}
}
