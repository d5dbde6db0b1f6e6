/*
 * monarch_fused.cu -- the whole Monarch layer in one warp-specialized sm_90a
 * kernel: kernels/monarch.c's `fused_ws` (families monarch and monarch_bm).
 * Notation as in templates/monarch.cu; w1r is w1 re-laid by the variant's
 * prep, w1r[j][i*rp + q][:] = w1[j][q*b + i][:] (block i's rows of block j
 * one run). docs/families/monarch.md says how it works and where it wins.
 *
 *   fused_monarch_ws(tx, tw1, tw2, y, N, m, b, nb)
 *   fused_monarch_ws(tx, tw1, tw2, y2, N, m, b, nb, y, arrived)  EPILOGUE 3
 *       grid ceil(N / BLOCK_M) * b * NCT (token tiles padded to
 *       whole CLUSTER_T pairs), block (CONSUMERS + 1) * 128, dynamic smem
 *       1024 + RING * (BLOCK_M + RP) * 128 + W2BUF * UCOL * MB * 2 + 256
 *       (UCOL = lcm(RP, 64)).
 *   tx: x (N, n) as (nb, b, N), strides (1, nb, n), box (64, 1, BLOCK_M /
 *   CLUSTER_I); tw1: w1r (b, r, nb) as (nb, r, b), box (64, RP / CLUSTER_T,
 *   1); tw2: w2 (b, mb, r) as (r, mb, b), box (64, MB / CLUSTER_T, 1); all
 *   with the 128-byte swizzle.
 *
 * CTA (token tile t0, output block i, output columns c0 .. c0+MB-1 of the
 * block's m/b = NCT * MB), for j = 0 .. b-1:
 *   G_j (BLOCK_M x RP) = x[t0.., j*nb ..] . w1r[j][i*RP .. +RP]^T   S1, K = nb
 *   acc (BLOCK_M x MB) += bf16(G_j) . w2[i][c0.., j*RP .. +RP]^T     S2, K = RP
 * y's block i, columns c0.., is acc: column (c0+s)*b + i (monarch),
 * i*m/b + c0 + s (BLOCKMAJOR). Where the block's m/b fits one tile (MB =
 * m/b, c0 = 0) each z column is computed once, by the one CTA that needs
 * it; a wider block (gpt2s c_fc's 768) is split into m/b/MB column tiles,
 * each CTA recomputing its G (S1 is the smaller product there). Nothing
 * leaves the SM but y. Warpgroup 0 is the TMA producer (the KCH = ceil(nb / 64)
 * k-chunks of each j through a RING-slot ring, the w2 slice into one of
 * W2BUF buffers; a buffer holds w2 unit u, the UCOL = lcm(RP, 64) columns
 * of the JP = UCOL / RP slices j = u*JP .. u*JP+JP-1 in whole 64-wide
 * panels, loaded once for all of them); each consumer warpgroup owns 64 rows (step() says why
 * nothing is in flight while G is converted). The ring must hold one j's
 * chunks (KCH <= RING; the host refuses more, the kernel traps). Clusters
 * (CLUSTER_I x CLUSTER_T, rank ri + CLUSTER_I * rt: block pair * CLUSTER_I
 * + ri, token tile pair * CLUSTER_T + rt) multicast the tiles they share.
 * EPILOGUE: 0 from the accumulators; 1 staged 16-byte rows (BLOCKMAJOR
 * only); 2 (monarch, b % 8 == 0) an 8-CTA exchange (exchange()); 3
 * (monarch, b % 8 == 0, no clusters) y2, then interleave(), which needs
 * the whole grid resident (a cooperative launch, grid <= SMs).
 * NEEDSWORK: RING 7-8 fit only with one w2 buffer, whose reload is then
 * exposed every j; untried: three half-slice w2 buffers (S2 as two
 * m64n(MB/2) halves in their own groups; RING 7 fits) or w2 through the
 * ring. EPILOGUE 2's 8-CTA clusters (214 KB each) probably do not all fit
 * at once (cudaOccupancyMaxActiveClusters not checked); 4-CTA clusters
 * (8-byte stores) are the untried middle.
 * NEEDSWORK: EPILOGUE 3 takes only grids of at most one wave (a persistent
 * walk over the token tiles would lift that).
 */
#include "common.cuh"

#if !defined(BLOCK_M) || !defined(CONSUMERS) || !defined(RING) || !defined(RP) || !defined(MB)
#error "monarch_fused.cu needs -DBLOCK_M -DCONSUMERS -DRING -DRP -DMB"
#endif
#ifndef BLOCKMAJOR
#define BLOCKMAJOR 0
#endif
#ifndef EPILOGUE
#define EPILOGUE 0
#endif
#ifndef CLUSTER_I
#define CLUSTER_I 1
#endif
#ifndef CLUSTER_T
#define CLUSTER_T 1
#endif
#ifndef W2BUF
#define W2BUF 2
#endif
#ifndef NCT
#define NCT 1
#endif

namespace kmf {

constexpr int CONS = CONSUMERS;
constexpr int XCH = BLOCK_M * 128;	/* one x k-chunk: BLOCK_M rows of 64 k */
constexpr int WCH = RP * 128;		/* one w1r k-chunk: RP rows of 64 k */
constexpr int SLOT = XCH + WCH;
__host__ __device__ constexpr int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }
constexpr int UCOL = RP / gcd(RP, 64) * 64;	/* columns of a w2 unit */
constexpr int JP = UCOL / RP;		/* w2 slices (j) a unit holds */
constexpr int WP = UCOL / 64;		/* 64-column panels of a w2 unit */
constexpr int PANEL = MB * 128;		/* one panel: MB rows of 64 k */
constexpr int W2B = WP * PANEL;		/* one w2 buffer: unit u = j / JP */
constexpr int MBF = MB * NCT;		/* an output block's columns: NCT tiles */
constexpr int NA = MB / 8;		/* n8 tiles of the output accumulator */
constexpr int NG = RP / 8;		/* n8 tiles of G */
constexpr int KS = RP / 16;		/* k16 steps of the second product */

static_assert(BLOCK_M == 64 * CONS, "one m64 tile per consumer warpgroup");
static_assert(CONS == 1 || CONS == 2, "1 or 2 consumer warpgroups");
static_assert(RP == 16 || RP == 32 || RP == 48 || RP == 64 || RP == 128,
	      "RP 16, 32, 48, 64 or 128 (a wgmma N the kernel has; k16 steps within panels)");
static_assert(MB == 64 || MB == 128 || MB == 256, "MB 64, 128 or 256 (a wgmma N)");
static_assert(NA * 4 + NG * 4 + KS * 4 <= 176, "accumulators fit the consumer's registers");
static_assert(RING >= 2 && 2 * RING + 4 <= 32, "RING 2..14 (the barriers' 256 bytes)");
static_assert(EPILOGUE >= 0 && EPILOGUE <= 3, "EPILOGUE 0, 1, 2 or 3");
static_assert(EPILOGUE != 1 || BLOCKMAJOR, "the staged epilogue writes block-major rows");
static_assert(EPILOGUE != 2 || (!BLOCKMAJOR && CLUSTER_I == 1 && CLUSTER_T == 1),
	      "the cluster exchange interleaves (8-CTA clusters of its own)");
static_assert(EPILOGUE != 3 || (!BLOCKMAJOR && CLUSTER_I == 1 && CLUSTER_T == 1),
	      "the in-kernel interleave writes y interleaved, without clusters");
static_assert(CLUSTER_I == 1 || CLUSTER_I == 2, "CLUSTER_I 1 or 2 (output blocks i, i+1)");
static_assert(CLUSTER_T == 1 || CLUSTER_T == 2, "CLUSTER_T 1 or 2 (two token tiles)");
static_assert(W2BUF == 1 || W2BUF == 2, "W2BUF 1 or 2 w2 slice buffers");
static_assert(NCT == 1 || (CLUSTER_I == 1 && CLUSTER_T == 1 && EPILOGUE < 2),
	      "column tiles: one CTA per output block and tile, no interleave");
constexpr int CL = CLUSTER_I * CLUSTER_T;	/* CTAs per cluster */
/* the CTAs whose copies land in a CTA's ring (x from its CLUSTER_I
 * x-peers, w1r from its CLUSTER_T w-peers, itself counted once) */
constexpr int RING_PEERS = CLUSTER_I + CLUSTER_T - 1;
static_assert(!EPILOGUE || BLOCK_M * (MB * 2 + 16) <= RING * SLOT,
	      "the staged tile fits in the ring");

/* The m64k16 A fragment of k16 step kk from an m64nN accumulator (the
 * m16n8 layout: n8 tiles 2kk and 2kk+1 are the step's 16 columns). */
KT_DEV void a_frag(unsigned (&a)[4], const float (&g)[NG][4], int kk)
{
	a[0] = kt_pack_bf16x2(g[2 * kk][0], g[2 * kk][1]);
	a[1] = kt_pack_bf16x2(g[2 * kk][2], g[2 * kk][3]);
	a[2] = kt_pack_bf16x2(g[2 * kk + 1][0], g[2 * kk + 1][1]);
	a[3] = kt_pack_bf16x2(g[2 * kk + 1][2], g[2 * kk + 1][3]);
}

struct ctx {
	unsigned ring, w2s, full, empty, wfull, wempty;	/* shared addresses */
	unsigned xoff;		/* this consumer's 64 rows in an x chunk */
	int kch, lane, rank;	/* rank in the cluster (0 without one) */
	int c0;			/* the CTA's first column of its output block */
};

/* c0, a constant 0 where the block is one tile (the code as before tiles) */
KT_DEV int col0(const ctx &c)
{
	return NCT > 1 ? c.c0 : 0;
}

/* Issues S1 for input block j into g (zeroed by the caller): the KCH
 * chunks of j, each once the copy engine has delivered it. */
KT_DEV void s1_issue(const ctx &c, float (&g)[NG][4], int j)
{
	kt_wg_ring_chunks<RP, RING, SLOT>(g, c.ring, c.full, c.kch, j, c.xoff, XCH);
}

/* Arrives (one warp's release) on barrier bar of this CTA and, in a
 * cluster, of every peer whose multicasts fill the same buffer: the
 * x-peers (same token tile, rank ri ^ 1: ranks 2rt, 2rt+1) with xs, the
 * w-peers (same output block, rank ri + CLUSTER_I * (rt ^ 1)) with ws. */
KT_DEV void release(unsigned bar, int rank, bool xs, bool ws)
{
	const int ri = rank % CLUSTER_I, rt = rank / CLUSTER_I;

	if (CL == 1) {
		kt_mbar_arrive(bar);
		return;
	}
	kt_mbar_arrive_cluster(bar, (unsigned)rank);
	if (CLUSTER_I > 1 && xs)
		kt_mbar_arrive_cluster(bar, (unsigned)((ri ^ 1) + CLUSTER_I * rt));
	if (CLUSTER_T > 1 && ws)
		kt_mbar_arrive_cluster(bar, (unsigned)(ri + CLUSTER_I * (rt ^ 1)));
}

/* S1 of block j has retired: its ring slots go back to the producers that
 * fill them (one arrival per warp each). */
KT_DEV void s1_release(const ctx &c, int j)
{
	if (c.lane == 0)
		for (int kc = 0; kc < c.kch; kc++)
			release(c.empty + ((j * c.kch + kc) % RING) * 8, c.rank, true, true);
}

/* One j, with S1(j) issued before: once it (and S2(j-1)) retired, G_j
 * becomes the A fragments, then S2(j) and S1(j+1) go out as one group.
 * Nothing is in flight while G is converted and re-zeroed, so no
 * accumulator register is redefined inside a wgmma pipeline stage. */
KT_DEV void step(const ctx &c, float (&acc)[NA][4], float (&g)[NG][4], int j, int b)
{
	const bool more = j + 1 < b;
	/* w2 unit u (JP slices), this slice's first k16 step within it */
	const int u = j / JP, k0 = (j % JP) * KS;
	const int wbi = u % W2BUF;
	unsigned a[KS][4];

	kt_wg_wait<0>();
	kt_wg_pin(g);
	s1_release(c, j);
	/* S2(j-1), the last of unit u-1, has retired: its w2 buffer is free */
	if (W2BUF == 2 && j > 0 && j % JP == 0 && c.lane == 0)
		release(c.wempty + ((u - 1) & 1) * 8, c.rank, false, true);
#pragma unroll
	for (int kk = 0; kk < KS; kk++)
		a_frag(a[kk], g, kk);
	if (more)
		kt_wg_zero(g);
	const unsigned wb = c.w2s + wbi * W2B;

	kt_mbar_wait(c.wfull + wbi * 8, (u / W2BUF) & 1);
	kt_wg_fence();
#pragma unroll
	for (int kk = 0; kk < KS; kk++) {
		const int ks = k0 + kk;

		kt_wg<MB>::rs<0>(acc, a[kk], kt_wg_desc_k(wb + (ks >> 2) * PANEL) + 2 * (ks & 3));
	}
	if (W2BUF == 1) {
		/* S2(j) a group of its own: the one w2 buffer goes back as soon
		 * as it retired, while S1(j+1) still runs (acc and g are not
		 * touched until the next step's wait) */
		kt_wg_commit();
		if (more)
			s1_issue(c, g, j + 1);
		kt_wg_commit();
		kt_wg_wait<1>();
		/* after the unit's last slice */
		if (j % JP == JP - 1 && c.lane == 0)
			release(c.wempty, c.rank, false, true);
		return;
	}
	if (more)
		s1_issue(c, g, j + 1);
	kt_wg_commit();
}

/* The producer's copy of w2 unit u (columns u*UCOL .. of block i: slices
 * u*JP ..; the CTA's rows c0 .. of the block, its part r0 .. of them
 * multicast to wmask in a CLUSTER_T pair) into buffer u % W2BUF, once the
 * consumers released that buffer's previous unit. */
KT_DEV void w2_load(const ctx &c, const kt_tmap_t *tw2, int u, int i, int r0,
		    unsigned short wmask)
{
	const int wb = u % W2BUF;
	const unsigned fb = c.wfull + wb * 8;

	if (u >= W2BUF)
		kt_mbar_wait(c.wempty + wb * 8, ((u / W2BUF) - 1) & 1);
	kt_mbar_arrive_tx(fb, W2B);
#pragma unroll
	for (int p = 0; p < WP; p++) {
		const unsigned dst = c.w2s + wb * W2B + p * PANEL;

		if (CLUSTER_T > 1)
			kt_tma_load_3d_mc(dst + r0 * 128, tw2, fb, u * UCOL + p * 64, col0(c) + r0, i,
					  wmask);
		else
			kt_tma_load_3d(dst, tw2, fb, u * UCOL + p * 64, col0(c), i);
	}
}

/* A consumer warpgroup's whole life: the j loop, then the epilogue. */
KT_DEV void consumer(ctx &c, __nv_bfloat16 *__restrict__ y, int N, int m, int b, int i, int t0,
		     unsigned base)
{
	const int tid = threadIdx.x;
	const int cw = (tid >> 7) - 1, warp = (tid >> 5) & 3, lane = tid & 31;
	float acc[NA][4], g[NG][4];

	c.xoff = cw * 64 * 128;
	kt_wg_zero(acc);
	kt_wg_zero(g);
	kt_wg_fence();
	s1_issue(c, g, 0);
	kt_wg_commit();
	for (int j = 0; j < b; j++)
		step(c, acc, g, j, b);
	kt_wg_wait<0>();
	kt_wg_pin(acc);

	const int s0 = 2 * (lane & 3);
	const int mb = MBF;	/* the whole block's columns */

	/* by the preprocessor: nvcc reports the direct stores after a staged
	 * epilogue's return as unreachable (#128) */
#if EPILOGUE
	{
		/* every consumer's wgmmas have retired before the ring is reused */
		constexpr int PITCH = MB * 2 + 16, CH = MB / 8;
		const unsigned st0 = base + cw * 64 * PITCH;
		const int lr = warp * 16 + (lane >> 2);

		kt_bar_sync(1, CONS * 128);
#pragma unroll
		for (int nt = 0; nt < NA; nt++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				unsigned o = st0 + (lr + 8 * h) * PITCH + (nt * 8 + s0) * 2;

				asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(o),
					     "r"(kt_pack_bf16x2(acc[nt][2 * h], acc[nt][2 * h + 1])));
			}
		if (EPILOGUE == 2)	/* the cluster exchange (kernel end) stores y */
			return;
		kt_bar_sync(2 + cw, 128);
#pragma unroll 4
		for (int e = tid & 127; e < 64 * CH; e += 128) {
			const int r = e / CH, ch = e % CH, gr = t0 + cw * 64 + r;
			uint4 v;

			asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
				     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
				     : "r"(st0 + r * PITCH + ch * 16));
			if (gr < N)
				*reinterpret_cast<uint4 *>(y + (long long)gr * m + i * mb + col0(c) + ch * 8) = v;
		}
		return;
	}
#else
	const int r0 = t0 + cw * 64 + warp * 16 + (lane >> 2);

#pragma unroll
	for (int h = 0; h < 2; h++) {
		const int row = r0 + 8 * h;

		if (row >= N)
			continue;
		__nv_bfloat16 *yr = y + (long long)row * m;

#pragma unroll
		for (int nt = 0; nt < NA; nt++) {
			const int s = col0(c) + nt * 8 + s0;

			if (BLOCKMAJOR) {
				*reinterpret_cast<unsigned *>(yr + i * mb + s) =
					kt_pack_bf16x2(acc[nt][2 * h], acc[nt][2 * h + 1]);
			} else {
				yr[s * b + i] = __float2bfloat16_rn(acc[nt][2 * h]);
				yr[(s + 1) * b + i] = __float2bfloat16_rn(acc[nt][2 * h + 1]);
			}
		}
	}
#endif
}

/* EPILOGUE 2: the 8 CTAs of output blocks i0 .. i0+7 (one token tile, a
 * cluster) have staged their tiles; CTA i0 + e writes rows e*BLOCK_M/8 ..
 * of the tile for all 8, interleaved: for token row r and 8 consecutive s,
 * one 16-byte load from each CTA's staged row (distributed shared memory),
 * an 8 x 8 transpose of bf16 in registers, and 8 16-byte stores of
 * y[r][s*b + i0 .. i0+7]. ct: the consumer thread, 0 .. CONS*128-1. */
KT_DEV void exchange(__nv_bfloat16 *__restrict__ y, int N, int m, int b, int i, int t0,
		     unsigned base, int ct)
{
	constexpr int PITCH = MB * 2 + 16, RPC = BLOCK_M / 8, SB = MB / 8;
	const int e = i & 7, i0 = i - e;

	for (int it = ct; it < RPC * SB; it += CONS * 128) {
		const int r = e * RPC + it / SB, sb = it % SB, row = t0 + r;
		const unsigned off = base + r * PITCH + sb * 16;
		unsigned w[8][4];

#pragma unroll
		for (int c = 0; c < 8; c++) {
			const uint4 v = kt_ld_cluster_v4(off, (unsigned)c);

			w[c][0] = v.x;
			w[c][1] = v.y;
			w[c][2] = v.z;
			w[c][3] = v.w;
		}
		if (row >= N)
			continue;
		__nv_bfloat16 *yr = y + (long long)row * m + i0;

#pragma unroll
		for (int u = 0; u < 8; u++)	/* s = sb*8 + u */
			*reinterpret_cast<uint4 *>(yr + (long long)(sb * 8 + u) * b) =
				kt_bf16x8_column(w, u);
	}
}

/* EPILOGUE 3: a bound on the arrival wait's polls (~1 s), past which the
 * kernel traps: a wait that long is a bug (a counter that was not zeroed,
 * a grid that is not co-resident), and a fault says so where a hang
 * would only time out. */
constexpr unsigned SPIN_MAX = 1u << 22;

/* EPILOGUE 3: this CTA (token tile t0, output block i) has stored its y2
 * tile; once every CTA of the tile has (arrivals on arrived[tile], zeroed
 * once per buffer: a launch's b arrivals raise it from a multiple of b to
 * the next, so no reset between launches), it interleaves its share of the
 * tile from y2 (just written, in L2) into y. The tile's BLOCK_M * MB * b /
 * 64 work items (token row r, s-chunk sb, group g of 8 blocks; g fastest,
 * as monarch_perm_x8) split evenly, BLOCK_M * MB / 64 per CTA: the rows
 * i * BLOCK_M / b .. where b divides BLOCK_M, and whole 8-block groups
 * whatever b (b % 8 == 0 only). Per item: 8 16-byte loads (blocks 8g ..
 * 8g+7, s = 8sb ..), the 8 x 8 bf16 transpose in registers, 8 16-byte
 * stores of y[r][s*b + 8g ..]. Two items per thread at once: 16 loads in
 * flight. The wait is safe only because the host launches this kernel
 * cooperatively (every CTA resident). ct: the consumer thread. */
KT_DEV void interleave(const __nv_bfloat16 *y2, __nv_bfloat16 *__restrict__ y,
		       unsigned *arrived, int N, int m, int b, int i, int t0, int ct)
{
	constexpr int NT = CONS * 128, PER = BLOCK_M * MB / 64, U = 2, SC = MB / 8;
	const int ng = b / 8;

	/* every consumer's y2 stores are issued (grid-sync pattern: the
	 * barrier, then one thread's fence makes the CTA's stores visible
	 * before its arrival) */
	kt_bar_sync(1, NT);
	if (ct == 0) {
		unsigned *a = arrived + t0 / BLOCK_M, v, n = 0;
		unsigned target;

		__threadfence();
		target = (atomicAdd(a, 1u) / (unsigned)b + 1) * (unsigned)b;
		/* the trap after the loop: inside it, ptxas (13.0) spilled 816
		 * bytes and serialized the j loop's wgmmas (C7512) */
		do {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n"
				     : "=r"(v)
				     : "l"(a)
				     : "memory");
		} while (v < target && ++n < SPIN_MAX);
		if (v < target)
			__trap();
		__threadfence();
	}
	kt_bar_sync(1, NT);
	for (int it = ct; it < PER; it += U * NT) {
		unsigned w[U][8][4];
		long long row[U];
		int sb[U], g[U];

#pragma unroll
		for (int u = 0; u < U; u++) {
			const int e = i * PER + it + u * NT;	/* item in the tile */

			g[u] = e % ng;
			sb[u] = (e / ng) % SC;
			row[u] = t0 + e / (ng * SC);
			if (it + u * NT >= PER || row[u] >= N)
				continue;
			const __nv_bfloat16 *src = y2 + row[u] * m + (long long)g[u] * 8 * MB + sb[u] * 8;

			/* .cg: y2 was written by other SMs during this launch */
#pragma unroll
			for (int c = 0; c < 8; c++) {
				const uint4 q = __ldcg(reinterpret_cast<const uint4 *>(src + c * MB));

				w[u][c][0] = q.x;
				w[u][c][1] = q.y;
				w[u][c][2] = q.z;
				w[u][c][3] = q.w;
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if (it + u * NT >= PER || row[u] >= N)
				continue;
			__nv_bfloat16 *dst = y + row[u] * m + (long long)sb[u] * 8 * b + g[u] * 8;

			/* __stwb: a plain store, but always one 16-byte one (the
			 * assignment came out as four 4-byte stores for x = 0) */
#pragma unroll
			for (int x = 0; x < 8; x++)	/* s = sb*8 + x */
				__stwb(reinterpret_cast<uint4 *>(dst + (long long)x * b),
				       kt_bf16x8_column(w[u], x));
		}
	}
}

} /* namespace kmf */

#if EPILOGUE == 2
#define KMF_CLUSTER __cluster_dims__(8, 1, 1)
#elif CLUSTER_I * CLUSTER_T > 1
#define KMF_CLUSTER __cluster_dims__(CLUSTER_I * CLUSTER_T, 1, 1)
#else
#define KMF_CLUSTER
#endif
extern "C" __global__ void __launch_bounds__((CONSUMERS + 1) * 128, 1) KMF_CLUSTER
fused_monarch_ws(const __grid_constant__ kt_tmap_t tx, const __grid_constant__ kt_tmap_t tw1,
		 const __grid_constant__ kt_tmap_t tw2, __nv_bfloat16 *__restrict__ y, int N,
		 int m, int b, int nb
#if EPILOGUE == 3
		 /* y above is y2 (block-major, staged); yi the interleaved y */
		 , __nv_bfloat16 *__restrict__ yi, unsigned *__restrict__ arrived
#endif
		 )
{
	using namespace kmf;
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	const unsigned base = (kt_smem_u32(smem_raw) + 1023u) & ~1023u;
	const int tid = threadIdx.x, wg = tid >> 7;
	/* cluster (tile pair, block pair) = blockIdx.x / CL, block pairs
	 * fastest; rank = blockIdx.x % CL = ri + CLUSTER_I * rt. Column
	 * tiles (nct > 1: no clusters) are fastest of all, so the CTAs that
	 * share an x tile run together. */
	const int rank = (int)(blockIdx.x % CL), cid = (int)(blockIdx.x / CL / NCT);
	const int ri = rank % CLUSTER_I, rt = rank / CLUSTER_I, bg = b / CLUSTER_I;
	const int i = (cid % bg) * CLUSTER_I + ri;
	const int t0 = ((cid / bg) * CLUSTER_T + rt) * BLOCK_M;
	ctx c;

	c.rank = rank;
	c.c0 = (int)(blockIdx.x / CL % NCT) * MB;
	c.ring = base;
	c.w2s = base + RING * SLOT;
	c.full = c.w2s + W2BUF * W2B;
	c.empty = c.full + RING * 8;
	c.wfull = c.empty + RING * 8;
	c.wempty = c.wfull + 16;
	c.kch = (nb + 63) / 64;
	c.lane = tid & 31;
	/* the host check refuses these; a trap is a fault, not a hang */
	if (c.kch > RING || m != b * MBF || b % CLUSTER_I ||
	    ((EPILOGUE == 2 || EPILOGUE == 3) && b % 8))
		__trap();
	if (JP > 1 && b % JP)	/* whole w2 units */
		__trap();
	if (tid == 0) {
		for (int s = 0; s < RING; s++) {
			kt_mbar_init(c.full + s * 8, 1);
			kt_mbar_init(c.empty + s * 8, 4 * CONS * RING_PEERS);
		}
		for (int s = 0; s < W2BUF; s++) {
			kt_mbar_init(c.wfull + s * 8, 1);
			kt_mbar_init(c.wempty + s * 8, 4 * CONS * CLUSTER_T);
		}
		kt_mbar_init_fence();
	}
	/* with a cluster, the peer's barriers must be initialised before any
	 * multicast or remote arrival reaches them */
	if (CL > 1)
		kt_cluster_sync();
	else
		__syncthreads();

	if (wg == 0) {
		/* producer */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
		if (tid == 0) {
			/* in a cluster: this CTA's part of each x chunk (rows) into
			 * its x-peers, of each w1r chunk and w2 slice (rows) into its
			 * w-peers; the parts land where a whole box would put them
			 * (offsets of whole 1024-byte swizzle groups) */
			const int xh = BLOCK_M / CLUSTER_I, wh = RP / CLUSTER_T, w2h = MB / CLUSTER_T;
			const unsigned short xmask = (unsigned short)(((1 << CLUSTER_I) - 1)
								      << (CLUSTER_I * rt));
			const unsigned short wmask = (unsigned short)(CLUSTER_T > 1 ?
				(1 << ri) | (1 << (ri + CLUSTER_I)) : 1 << ri);

			kt_tmap_prefetch(&tx);
			kt_tmap_prefetch(&tw1);
			kt_tmap_prefetch(&tw2);
			for (int j = 0, q = 0; j < b; j++) {
				for (int kc = 0; kc < c.kch; kc++, q++) {
					const int s = q % RING;
					const unsigned st = c.ring + s * SLOT, fb = c.full + s * 8;

					if (q >= RING)
						kt_mbar_wait(c.empty + s * 8, ((q / RING) - 1) & 1);
					kt_mbar_arrive_tx(fb, SLOT);
					if (CLUSTER_I > 1)
						kt_tma_load_3d_mc(st + ri * xh * 128, &tx, fb, kc * 64, j,
								  t0 + ri * xh, xmask);
					else
						kt_tma_load_3d(st, &tx, fb, kc * 64, j, t0);
					if (CLUSTER_T > 1)
						kt_tma_load_3d_mc(st + XCH + rt * wh * 128, &tw1, fb, kc * 64,
								  i * RP + rt * wh, j, wmask);
					else
						kt_tma_load_3d(st + XCH, &tw1, fb, kc * 64, i * RP, j);
				}
				if (W2BUF == 2 && j % JP == 0)
					w2_load(c, &tw2, j / JP, i, rt * w2h, wmask);
			}
		}
		/* W2BUF 1: the w2 slices from a thread of their own (warp 1), so
		 * that neither stream waits behind the other's releases (x / w1r
		 * chunks free as S1 retires, the w2 buffer as S2 does) */
		if (W2BUF == 1 && tid == 32) {
			const unsigned short wmask = (unsigned short)(CLUSTER_T > 1 ?
				(1 << ri) | (1 << (ri + CLUSTER_I)) : 1 << ri);

			kt_tmap_prefetch(&tw2);
			for (int u = 0; u < b / JP; u++)
				w2_load(c, &tw2, u, i, rt * (MB / CLUSTER_T), wmask);
		}
		/* A CTA of a cluster leaves only when its peers can no longer
		 * multicast into it or arrive on its barriers; EPILOGUE 2: every
		 * tile of the cluster is staged, then (after the exchange) no peer
		 * reads it any more. Each role syncs in its own branch: code after
		 * the join would get the producer's 24 registers. */
		__syncwarp();
		if (CL > 1 || EPILOGUE == 2)
			kt_cluster_sync();
		if (EPILOGUE == 2)
			kt_cluster_sync();
	} else {
		/* consumers */
		if (CONS > 1)
			KT_ASM_90A("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
		consumer(c, y, N, m, b, i, t0, base);
		__syncwarp();
		if (CL > 1 || EPILOGUE == 2)
			kt_cluster_sync();
		if (EPILOGUE == 2) {
			exchange(y, N, m, b, i, t0, base, tid - 128);
			__syncwarp();
			kt_cluster_sync();
		}
#if EPILOGUE == 3
		interleave(y, yi, arrived, N, m, b, i, t0, tid - 128);
#endif
	}
}
