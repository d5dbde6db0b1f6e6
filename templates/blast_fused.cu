/*
 * blast_fused.cu -- the whole BLAST layer in one kernel for small rank,
 * kernels/blast.c's `fused_cl` (sm_90: thread-block clusters, distributed
 * shared memory, mma.sync): nothing in global memory but x, the weights and
 * y. Notation as in templates/blast.cu: N tokens, n in, m out, b blocks, r
 * rank, nb = n / b, mb = m / b; St (r, 16, 16) is S rank-major and
 * zero-padded (blast.cu's blast_s_to_t16, the variant's prep).
 *
 *   fused_blast_cl(x, V, U, St, y, N)
 *       compile-time shape and tile: FB_B = b, FB_R = r, FB_NB = nb, FB_MB =
 *       mb, FB_T = token tile, FB_G = blocks per CTA, FB_STAGES = copy ring
 *       depth, FB_RESIDENT; C = b / G CTAs per cluster (__cluster_dims__).
 *       grid ceil(N / T) * C (FB_RESIDENT: any number of clusters up to
 *       that, each walking token tiles cid, cid + clusters, ...), block 256,
 *       dynamic smem SMEM below (kernels/blast.c's fcl_smem says the same).
 *
 * A cluster owns T tokens. CTA q owns blocks q*G .. q*G+G-1 (as j in stage
 * 1, as i in stage 3) and the rank slice q*RS .. +RS, RS = r / C:
 *   1. stage 1 of its blocks into shared memory, zT[g] = V_j . x_j^T (rank
 *      rows, tokens contiguous), bf16 as the unfused variants round z;
 *   2. the exchange: per own block and peer, one bulk copy of that peer's
 *      rank slice of zT into the peer's GB, counted in on its mbarrier;
 *   3. the mixing of its rank slice on tensor cores, W_c = S_c . Z_c;
 *   4. per peer and block, the slice of w the peer's block needs into the
 *      peer's WL (exchange_mix() says when each buffer may be reused);
 *   5. stage 3 of its blocks, y[t0.., i*mb ..] = w[i] . U_i^T, from the
 *      accumulators; then the cluster barrier's arrive.
 * z and w never leave the cluster: 2 * (C-1)/C * b*T*r*2 bytes per tile
 * cross the SM-to-SM network instead of 4 * b*N*r*2 through memory.
 * FB_RESIDENT 1 loads the CTA's V and U once and double-buffers x; 0
 * streams x, V and U through one cp.async ring of FB_STAGES slots in the
 * order both stages use them. Rows of the T-contiguous tiles are T + 8
 * elements, so the 8 rows an ldmatrix touches fall in distinct banks.
 */
#include "common.cuh"

#ifndef FB_STAGES
#define FB_STAGES 2
#endif
#ifndef FB_RESIDENT
#define FB_RESIDENT 0
#endif
/* tools/fcl_probe.cu only (the host never sets it): phases left out to time
 * the rest, wrong results -- 1 stage 1's mma, 2 the exchanges, 4 the mixing,
 * 8 stage 3's mma, 16 the cluster barriers (with 2) */
#ifndef FB_SKIP
#define FB_SKIP 0
#endif

namespace kfb {

constexpr int B = FB_B, R = FB_R, NB = FB_NB, MB = FB_MB, T = FB_T, G = FB_G;
constexpr int C = B / G, RS = R / C, STG = FB_STAGES, RES = FB_RESIDENT;
constexpr int N_IN = B * NB, M_OUT = B * MB;
constexpr int THREADS = 256;
constexpr int LDT = T + 8;			/* elements per T-contiguous row */
constexpr int KC1 = NB / 64, KC3 = R / 64, P3 = MB / 128;
constexpr int NC1 = G * KC1, NC = NC1 + G * P3 * KC3;
/* streaming: the ring's slots */
constexpr int SLOT = ((T + R) > 128 ? (T + R) : 128) * 128;
constexpr int RING_BYTES = RES ? 0 : STG * SLOT;
/* resident: V and U of the own blocks as 64-wide k-chunks, x twice */
constexpr int VR_BYTES = RES ? G * KC1 * R * 128 : 0;
constexpr int UR_BYTES = RES ? G * P3 * KC3 * 128 * 128 : 0;
constexpr int XB_BYTES = RES ? 2 * G * KC1 * T * 128 : 0;
constexpr int SLICE = RS * LDT * 2;	/* one block's rank slice of z or w, bytes */
constexpr int ZT_BYTES = G * R * LDT * 2;
constexpr int WL_BYTES = ZT_BYTES;
constexpr int GBJ = SLICE + 16;		/* GB's block stride: ldmatrix rows apart */
constexpr int GB_BYTES = 16 * GBJ;
constexpr int WX_BYTES = B * SLICE;
constexpr int SMEM = RING_BYTES + VR_BYTES + UR_BYTES + XB_BYTES + ZT_BYTES + WL_BYTES +
		     GB_BYTES + WX_BYTES + 16;	/* + the two exchange mbarriers */
constexpr int MC = (RS + 7) / 8;	/* mixing ranks per warp */

/* stage 1: warps over (rank, tokens); stage 3: over (tokens, columns) */
constexpr int WN1 = T / 32, WM1 = 8 / WN1, NT1 = 4, MT1 = R / 16 / WM1;
constexpr int WM3 = T / 32, WN3 = 8 / WM3, MT3 = 2, NT3 = 128 / WN3 / 8;

static_assert(B <= 16 && B % G == 0 && C >= 1 && C <= 16, "blocks: b <= 16, G | b");
static_assert(R % (8 * C) == 0 && R % 64 == 0, "rank: a multiple of 64 and of 8 * C");
static_assert(NB % 64 == 0 && MB % 128 == 0, "nb % 64, mb % 128");
static_assert(T == 32 || T == 64, "token tile 32 or 64");
static_assert(MT1 >= 1 && MT1 * 16 * WM1 == R, "stage 1's warps tile the rank");
static_assert(NT3 % 2 == 0, "stage 3's warps take column pairs");
static_assert(SMEM <= 227 * 1024, "shared memory: kernels/blast.c refuses this config");

struct smem_t {
	unsigned ring, vr, ur, xb, zt, wl, gb, wx, bar;	/* shared-memory offsets */
};

/* rows x 64 bf16 of a K-contiguous matrix (row stride ld elements) into
 * 128-byte rows with kt_swz<8>; rows a multiple of 32 */
KT_DEV void copy_rows(unsigned dst, const __nv_bfloat16 *__restrict__ src, long long ld, int rows,
		      int tid)
{
	const int ch = tid & 7, r0 = tid >> 3;

	for (int row = r0; row < rows; row += THREADS / 8)
		kt_cp_async16(dst + kt_swz<8>(row, ch), src + row * ld + ch * 8, true);
}

/* x's T rows from token t0, columns col0 .. +63; rows past N zero-filled */
KT_DEV void copy_x(unsigned dst, const __nv_bfloat16 *__restrict__ x, int t0, int N, int col0,
		   int tid)
{
	const int ch = tid & 7, r0 = tid >> 3;

#pragma unroll
	for (int row = r0; row < T; row += THREADS / 8) {
		const bool in = t0 + row < N;

		kt_cp_async16(dst + kt_swz<8>(row, ch),
			      x + (long long)(in ? t0 + row : 0) * N_IN + col0 + ch * 8, in);
	}
}

/* B fragments of two n8 tiles (rows n0 .. n0+15 of a K-contiguous 128-byte
 * row tile at base, k16 step ks): ldmatrix.x4, matrices (n 0-7, k lo),
 * (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi). */
KT_DEV void ld_b_pair(unsigned r[4], unsigned base, int n0, int ks, int lane)
{
	kt_ldmatrix_x4(r, base + kt_swz<8>(n0 + (lane & 7) + (lane >> 4) * 8,
					   ks * 2 + ((lane >> 3) & 1)));
}

KT_DEV void st_shared_u32(unsigned addr, unsigned v)
{
	asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

KT_DEV void st_shared_v4(unsigned addr, uint4 v)
{
	asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x),
		     "r"(v.y), "r"(v.z), "r"(v.w)
		     : "memory");
}

/* len bytes (a multiple of 16) at this CTA's src into CTA cta's dst, by
 * the bulk copy engine, completing len transaction bytes on that CTA's
 * mbarrier at offset bar. dst, bar: offsets as in every CTA. */
KT_DEV void push(unsigned dst, unsigned src, unsigned len, unsigned bar, unsigned cta)
{
	if (FB_SKIP & 2)
		return;
	asm volatile("{\n"
		     ".reg .b32 rd, rb;\n"
		     "mapa.shared::cluster.u32 rd, %0, %3;\n"
		     "mapa.shared::cluster.u32 rb, %2, %3;\n"
		     "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"
		     " [rd], [%1], %4, [rb];\n"
		     "}\n" ::"r"(dst),
		     "r"(src), "r"(bar), "r"(cta), "r"(len)
		     : "memory");
}

/* One 64-wide k-chunk of a warp's tile: acc (M x N m16n8 tiles) += A . B^T,
 * B's rows n0.. from a K-contiguous 128-byte row tile at bb (ld_b_pair),
 * A's fragments of m tile a at k16 step ks from lda(ks, a, frag). */
template <int M, int N, class LdA>
KT_DEV void mma_chunk(float (&acc)[M][N][4], LdA lda, unsigned bb, int n0, int lane)
{
#pragma unroll
	for (int ks = 0; ks < 4; ks++) {
		unsigned bf[N / 2][4], af[M][4];

#pragma unroll
		for (int n = 0; n < N / 2; n++)
			ld_b_pair(bf[n], bb, n0 + n * 16, ks, lane);
#pragma unroll
		for (int a = 0; a < M; a++)
			lda(ks, a, af[a]);
#pragma unroll
		for (int a = 0; a < M; a++)
#pragma unroll
			for (int n = 0; n < N; n++)
				kt_mma_bf16_16816(acc[a][n], af[a], &bf[n / 2][(n & 1) * 2]);
	}
}

/* The warp's part of stage 1, one k-chunk: acc (ranks rb.., tokens tb..)
 * += V chunk (rows rank, at vb) . x chunk (rows token, at xb)^T */
KT_DEV void stage1_chunk(float (&acc)[MT1][NT1][4], unsigned xb, unsigned vb, int rb, int tb,
			 int lane)
{
	if (FB_SKIP & 1)
		return;
	mma_chunk(
		acc,
		[&](int ks, int a, unsigned (&f)[4]) {
			kt_ldmatrix_x4(f, vb + kt_swz<8>(rb + a * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
							 ks * 2 + (lane >> 4)));
		},
		xb, tb, lane);
}

/* stage 1's accumulators as bf16 into zT[g] (rank rows, tokens contiguous) */
KT_DEV void store_zt(const float (&acc)[MT1][NT1][4], unsigned zt, int g, int rb, int tb,
		     int lane)
{
	const int lr = lane >> 2, lc = lane & 3;

#pragma unroll
	for (int a = 0; a < MT1; a++)
#pragma unroll
		for (int n = 0; n < NT1; n++) {
			const int rho = rb + a * 16 + lr, t = tb + n * 8 + lc * 2;
			const unsigned o = zt + (unsigned)(((g * R + rho) * LDT + t) * 2);

			st_shared_u32(o, kt_pack_bf16x2(acc[a][n][0], acc[a][n][1]));
			st_shared_u32(o + 8 * LDT * 2, kt_pack_bf16x2(acc[a][n][2], acc[a][n][3]));
		}
}

/* The cluster barrier in two halves: a CTA arrives when its GB and WL are
 * free for the next tile (after its stage 3), and waits before its first
 * push of that tile, so the barrier's latency overlaps stage 1. */
KT_DEV void cluster_arrive(void)
{
	if (!(FB_SKIP & 16))
		kt_cluster_arrive();
}

KT_DEV void cluster_wait(void)
{
	if (FB_SKIP & 16)
		__syncthreads();
	else
		kt_cluster_wait();
}

/* S_c's m16n8k16 A fragments for the warp's ranks c = warp, warp + 8, ...
 * of the slice (St rows i, columns j) */
KT_DEV void load_st(unsigned (&sf)[MC][4], const __nv_bfloat16 *__restrict__ St, int q, int tid)
{
	const int lane = tid & 31, warp = tid >> 5, lr = lane >> 2, lc = lane & 3;

#pragma unroll
	for (int k = 0; k < MC; k++) {
		const int c = warp + 8 * k;
		const unsigned *sc =
			reinterpret_cast<const unsigned *>(St + (long long)(q * RS + (c < RS ? c : 0)) * 256);

		sf[k][0] = sc[(lr * 16 + lc * 2) >> 1];
		sf[k][1] = sc[((lr + 8) * 16 + lc * 2) >> 1];
		sf[k][2] = sc[(lr * 16 + lc * 2 + 8) >> 1];
		sf[k][3] = sc[((lr + 8) * 16 + lc * 2 + 8) >> 1];
	}
}

/* 2.-4.: the exchange and the mixing of one tile (mbarrier phase parity),
 * from stage 1's zT stores to WL ready for stage 3. Every CTA pushes, per
 * own block and peer, that peer's rank slice of its zT into the peer's GB
 * (block j at j * GBJ), and after the mixing, per own block and peer, the
 * slice of w the peer's block needs into its WL (ranks q*RS ..): C * G bulk
 * copies of SLICE bytes each way, counted in on the receiver's mbarriers
 * bar (z) and bar + 8 (w). The cluster barrier's wait first (its arrive
 * ended the previous tile, or followed the mbarriers' init): every peer is
 * past the previous tile's mixing and stage 3, so its GB and WL are free.
 * A CTA's own zT and WX are reused only after its pushes landed: it waits
 * for every peer's w, which each peer sends after receiving its z, and
 * WX's next writes come after the next barrier. The caller arrives once
 * stage 3 is done. */
KT_DEV void exchange_mix(const smem_t &s, int q, int tid, const unsigned (&sf)[MC][4],
			 unsigned parity)
{
	const int lane = tid & 31, warp = tid >> 5, lr = lane >> 2, lc = lane & 3;
	const unsigned bz = s.bar, bw = s.bar + 8;

	kt_fence_proxy_async();	/* zT's stores before the copy engine reads */
	__syncthreads();
	if (tid == 0) {
		kt_mbar_arrive_tx(bz, (FB_SKIP & 2) ? 0u : (unsigned)(B * SLICE));
		kt_mbar_arrive_tx(bw, (FB_SKIP & 2) ? 0u : (unsigned)(G * C * SLICE));
	}
	cluster_wait();
	if (tid < C * G) {
		const int d = tid / G, g = tid % G;

		push(s.gb + (unsigned)((q * G + g) * GBJ),
		     s.zt + (unsigned)(((g * R + d * RS) * LDT) * 2), SLICE, bz, (unsigned)d);
	}
	kt_mbar_wait(bz, parity);

	/* mixing: W_c = S_c . Z_c for the slice's ranks c, into WX */
#pragma unroll
	for (int k = 0; k < MC; k++) {
		const int c = warp + 8 * k;

		if ((FB_SKIP & 4) || c >= RS)
			break;
#pragma unroll
		for (int tn = 0; tn < T / 16; tn++) {
			unsigned bf[4];
			float d[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
			const int j = (lane & 7) + ((lane >> 3) & 1) * 8;

			kt_ldmatrix_x4_trans(bf, s.gb + (unsigned)(j * GBJ +
								(c * LDT + tn * 16 + (lane >> 4) * 8) * 2));
			kt_mma_bf16_16816(d[0], sf[k], &bf[0]);
			kt_mma_bf16_16816(d[1], sf[k], &bf[2]);
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int t = tn * 16 + h * 8 + lc * 2;

				if (lr < B)
					st_shared_u32(s.wx + (unsigned)(lr * SLICE + (c * LDT + t) * 2),
						      kt_pack_bf16x2(d[h][0], d[h][1]));
				if (lr + 8 < B)
					st_shared_u32(s.wx + (unsigned)((lr + 8) * SLICE +
									(c * LDT + t) * 2),
						      kt_pack_bf16x2(d[h][2], d[h][3]));
			}
		}
	}
	kt_fence_proxy_async();
	__syncthreads();
	if (tid < C * G) {
		const int d = tid / G, g = tid % G, i = d * G + g;

		push(s.wl + (unsigned)(((g * R + q * RS) * LDT) * 2), s.wx + (unsigned)(i * SLICE),
		     SLICE, bw, (unsigned)d);
	}
	kt_mbar_wait(bw, parity);
}

/* The warp's part of stage 3, one 64-wide k-chunk of block g: acc (tokens
 * tb.., columns nb0..) += WL[g] (rank rows: A through ldmatrix.trans) . U
 * chunk (rows column, at ub)^T */
KT_DEV void stage3_chunk(float (&acc)[MT3][NT3][4], unsigned wl, int g, int kc, unsigned ub,
			 int tb, int nb0, int lane)
{
	if (FB_SKIP & 8)
		return;
	mma_chunk(
		acc,
		[&](int ks, int a, unsigned (&f)[4]) {
			const int mi = lane >> 3;
			const int krow = kc * 64 + ks * 16 + (mi >> 1) * 8 + (lane & 7);
			const int col = tb + a * 16 + (mi & 1) * 8;

			kt_ldmatrix_x4_trans(f, wl + (unsigned)(((g * R + krow) * LDT + col) * 2));
		},
		ub, nb0, lane);
}

/* y[t0 + tokens, i*mb + p*128 + columns] from stage 3's accumulators */
KT_DEV void store_y(const float (&acc)[MT3][NT3][4], __nv_bfloat16 *__restrict__ y, int t0,
		    int N, int i, int p, int tb, int nb0, int lane)
{
	const int lr = lane >> 2, lc = lane & 3;

#pragma unroll
	for (int a = 0; a < MT3; a++)
#pragma unroll
		for (int n = 0; n < NT3; n++) {
			const int t = t0 + tb + a * 16 + lr;
			const int col = i * MB + p * 128 + nb0 + n * 8 + lc * 2;

			if (t < N)
				*reinterpret_cast<unsigned *>(y + (long long)t * M_OUT + col) =
					kt_pack_bf16x2(acc[a][n][0], acc[a][n][1]);
			if (t + 8 < N)
				*reinterpret_cast<unsigned *>(y + (long long)(t + 8) * M_OUT + col) =
					kt_pack_bf16x2(acc[a][n][2], acc[a][n][3]);
		}
}

/* GB's pad rows j = b .. 15 stay zero (S_c's pad columns are zero, but
 * 0 * garbage need not be) */
KT_DEV void zero_gb_pad(unsigned gb, int tid)
{
	constexpr int PAD = B < 16 ? 16 - B : 1;	/* the divisor; none when B = 16 */

	for (int u = tid; u < RS * (16 - B) * (T / 8); u += THREADS) {
		const int t8 = u % (T / 8), row = u / (T / 8);
		const int c = row / PAD, j = B + row % PAD;

		st_shared_v4(gb + (unsigned)(j * GBJ + (c * LDT + t8 * 8) * 2), make_uint4(0, 0, 0, 0));
	}
}

/* Streaming: chunk c's copies into its ring slot (one cp.async group, empty
 * past the last chunk so that the group count stays uniform). */
KT_DEV void issue(const smem_t &s, int c, int q, int t0, int N, int tid,
		  const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ V,
		  const __nv_bfloat16 *__restrict__ U)
{
	if (c < NC) {
		const unsigned base = s.ring + (unsigned)((c % STG) * SLOT);

		if (c < NC1) {
			const int g = c / KC1, kc = c % KC1, j = q * G + g;

			copy_x(base, x, t0, N, j * NB + kc * 64, tid);
			copy_rows(base + T * 128, V + (long long)j * R * NB + kc * 64, NB, R, tid);
		} else {
			const int c3 = c - NC1, g = c3 / (P3 * KC3), p = (c3 / KC3) % P3;
			const int kc = c3 % KC3, i = q * G + g;

			copy_rows(base, U + ((long long)i * MB + p * 128) * R + kc * 64, R, 128, tid);
		}
	}
	kt_cp_async_commit();
}

/* One token tile, weights streamed through the ring. */
KT_DEV void tile_streaming(const smem_t &s, int q, int t0, int N, int tid,
			   const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ V,
			   const __nv_bfloat16 *__restrict__ U,
			   const __nv_bfloat16 *__restrict__ St, __nv_bfloat16 *__restrict__ y)
{
	const int lane = tid & 31, warp = tid >> 5;

	for (int c = 0; c < STG; c++)
		issue(s, c, q, t0, N, tid, x, V, U);
	zero_gb_pad(s.gb, tid);
	{
		const int rb = (warp % WM1) * MT1 * 16, tb = (warp / WM1) * NT1 * 8;
		float acc[MT1][NT1][4];

		for (int c = 0; c < NC1; c++) {
			const int g = c / KC1, kc = c % KC1;
			const unsigned base = s.ring + (unsigned)((c % STG) * SLOT);

			if (kc == 0)
				kt_zero_frags(acc);
			kt_cp_async_wait<STG - 1>();
			__syncthreads();
			stage1_chunk(acc, base, base + T * 128, rb, tb, lane);
			__syncthreads();	/* the slot is free */
			issue(s, c + STG, q, t0, N, tid, x, V, U);
			if (kc == KC1 - 1)
				store_zt(acc, s.zt, g, rb, tb, lane);
		}
	}
	{
		unsigned sf[MC][4];

		load_st(sf, St, q, tid);
		exchange_mix(s, q, tid, sf, 0);
	}
	{
		const int tb = (warp / WN3) * MT3 * 16, nb0 = (warp % WN3) * NT3 * 8;
		float acc[MT3][NT3][4];

		for (int c = NC1; c < NC; c++) {
			const int c3 = c - NC1, g = c3 / (P3 * KC3), p = (c3 / KC3) % P3;
			const int kc = c3 % KC3;
			const unsigned base = s.ring + (unsigned)((c % STG) * SLOT);

			if (kc == 0)
				kt_zero_frags(acc);
			kt_cp_async_wait<STG - 1>();
			__syncthreads();
			stage3_chunk(acc, s.wl, g, kc, base, tb, nb0, lane);
			__syncthreads();
			issue(s, c + STG, q, t0, N, tid, x, V, U);
			if (kc == KC3 - 1)
				store_y(acc, y, t0, N, q * G + g, p, tb, nb0, lane);
		}
	}
	/* no CTA leaves while a push from or into it is in flight */
	cluster_arrive();
	cluster_wait();
}

/* Resident: the cluster walks token tiles cid, cid + clusters, ... with
 * its blocks' V and U loaded once and x double-buffered. */
KT_DEV void tiles_resident(const smem_t &s, int q, int cid, int ncl, int N, int tid,
			   const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ V,
			   const __nv_bfloat16 *__restrict__ U,
			   const __nv_bfloat16 *__restrict__ St, __nv_bfloat16 *__restrict__ y)
{
	const int lane = tid & 31, warp = tid >> 5, ntiles = (N + T - 1) / T;
	constexpr unsigned XBUF = G * KC1 * T * 128;
	unsigned sf[MC][4];

	for (int g = 0; g < G; g++) {
		const int j = q * G + g;

		for (int kc = 0; kc < KC1; kc++)
			copy_rows(s.vr + (unsigned)((g * KC1 + kc) * R * 128),
				  V + (long long)j * R * NB + kc * 64, NB, R, tid);
	}
	zero_gb_pad(s.gb, tid);
	load_st(sf, St, q, tid);
	for (int g = 0; g < G && cid < ntiles; g++)
		for (int kc = 0; kc < KC1; kc++)
			copy_x(s.xb + (unsigned)((g * KC1 + kc) * T * 128), x, cid * T, N,
			       (q * G + g) * NB + kc * 64, tid);
	kt_cp_async_commit();	/* V and the first x, then U: stage 3 needs it later */
	for (int g = 0; g < G; g++)
		for (int p = 0; p < P3; p++)
			for (int kc = 0; kc < KC3; kc++)
				copy_rows(s.ur + (unsigned)(((g * P3 + p) * KC3 + kc) * 128 * 128),
					  U + ((long long)(q * G + g) * MB + p * 128) * R + kc * 64, R,
					  128, tid);
	kt_cp_async_commit();
	for (int tile = cid, it = 0; tile < ntiles; tile += ncl, it++) {
		const unsigned xb = s.xb + (unsigned)(it & 1) * XBUF;
		const int t0 = tile * T;

		/* the next tile's x into the other buffer, read last by the
		 * previous tile's stage 1 */
		if (tile + ncl < ntiles)
			for (int g = 0; g < G; g++)
				for (int kc = 0; kc < KC1; kc++)
					copy_x(s.xb + (unsigned)((it + 1) & 1) * XBUF +
						       (unsigned)((g * KC1 + kc) * T * 128),
					       x, t0 + ncl * T, N, (q * G + g) * NB + kc * 64, tid);
		kt_cp_async_commit();
		if (it == 0)
			kt_cp_async_wait<2>();	/* V and this tile's x */
		else
			kt_cp_async_wait<1>();	/* this tile's x */
		__syncthreads();
		{
			const int rb = (warp % WM1) * MT1 * 16, tb = (warp / WM1) * NT1 * 8;
			float acc[MT1][NT1][4];

			for (int g = 0; g < G; g++) {
				kt_zero_frags(acc);
				for (int kc = 0; kc < KC1; kc++)
					stage1_chunk(acc, xb + (unsigned)((g * KC1 + kc) * T * 128),
						     s.vr + (unsigned)((g * KC1 + kc) * R * 128), rb, tb,
						     lane);
				store_zt(acc, s.zt, g, rb, tb, lane);
			}
		}
		exchange_mix(s, q, tid, sf, (unsigned)(it & 1));
		if (it == 0) {	/* U */
			kt_cp_async_wait<1>();
			__syncthreads();
		}
		{
			const int tb = (warp / WN3) * MT3 * 16, nb0 = (warp % WN3) * NT3 * 8;
			float acc[MT3][NT3][4];

			for (int g = 0; g < G; g++)
				for (int p = 0; p < P3; p++) {
					kt_zero_frags(acc);
					for (int kc = 0; kc < KC3; kc++)
						stage3_chunk(acc, s.wl, g, kc,
							     s.ur + (unsigned)(((g * P3 + p) * KC3 + kc) *
									       128 * 128),
							     tb, nb0, lane);
					store_y(acc, y, t0, N, q * G + g, p, tb, nb0, lane);
				}
		}
		cluster_arrive();	/* GB and WL free for the next tile */
	}
	/* no CTA leaves while a push from or into it is in flight */
	cluster_wait();
}

} /* namespace kfb */

extern "C" __global__ void __launch_bounds__(kfb::THREADS, 1) __cluster_dims__(kfb::C, 1, 1)
fused_blast_cl(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ V,
	       const __nv_bfloat16 *__restrict__ U, const __nv_bfloat16 *__restrict__ St,
	       __nv_bfloat16 *__restrict__ y, int N)
{
	using namespace kfb;
	extern __shared__ __align__(128) unsigned char fb_smem[];
	const int q = (int)kt_cluster_ctarank(), cid = (int)(blockIdx.x / C);
	smem_t s;

	s.ring = kt_smem_u32(fb_smem);
	s.vr = s.ring + RING_BYTES;
	s.ur = s.vr + VR_BYTES;
	s.xb = s.ur + UR_BYTES;
	s.zt = s.xb + XB_BYTES;
	s.wl = s.zt + ZT_BYTES;
	s.gb = s.wl + WL_BYTES;
	s.wx = s.gb + GB_BYTES;
	s.bar = s.wx + WX_BYTES;
	if (threadIdx.x == 0) {
		kt_mbar_init(s.bar, 1);
		kt_mbar_init(s.bar + 8, 1);
		kt_mbar_init_fence();	/* visible to the peers' copies */
	}
	__syncthreads();
	cluster_arrive();	/* the first exchange waits for every CTA's init */
	if (RES)
		tiles_resident(s, q, cid, (int)(gridDim.x / C), N, (int)threadIdx.x, x, V, U, St, y);
	else
		tile_streaming(s, q, cid * T, N, (int)threadIdx.x, x, V, U, St, y);
}
