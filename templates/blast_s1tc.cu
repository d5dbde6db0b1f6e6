/*
 * blast_s1tc.cu -- BLAST's stage 1 and its mixing in one sm_90a kernel, the
 * first launch of kernels/blast.c's `tcmix_fused` (stage 3 is gemm.cu's ws
 * GEMM, as in tcmix_ws). Notation as in templates/blast.cu: N tokens, n
 * in, b blocks, r rank, nb = n / b; St (r, 16, 16) is S rank-major and
 * zero-padded (blast.cu's blast_s_to_t16, the variant's prep).
 *
 *   fused_blast_s1tc(tx, tv, ts, tw, N, r, b, nb)
 *       grid ceil(N / ST_T) * (r / ST_RS), rank slices fastest (the CTAs
 *       that run together share their x tile in L2); block (ST_CONS + 1) *
 *       128; dynamic smem 1024 + max(ST_RING * SLOT, ST_CONS * 4 * ZW) +
 *       ST_CONS * 4 * ZW + ST_RS / 8 * 4096 + 256 (kernels/blast.c's
 *       s1tc_smem computes the same).
 *   tx: x (N, n) as (k = nb, block = b, token = N), box (64, 1, ST_T) and
 *   tv: V (b, r, nb) as (k = nb, rank = r, block = b), box (64, ST_RS, 1),
 *       both with the 128-byte swizzle; ts: St as (j = 16, i = 16, rank =
 *       r), box (16, 16, 8), 32-byte swizzle; tw: w (b, N, r) bf16 (what
 *       stage 3 reads) as (rank, token, block), box (ST_RS, 16, 16),
 *       swizzle 2 * ST_RS bytes: stores. -DKT_PDL=1: launched as a
 *       dependent (the previous stage 3 reads w).
 *
 * CTA (token tile t0 of ST_T, rank slice c0 of ST_RS), for j = 0 .. b-1:
 *   z_j (ST_T x ST_RS) = x[t0.., j*nb ..] . V_j[c0 .. +ST_RS]^T  (K = nb)
 * on wgmma (m64 per consumer warpgroup, both operands from a ring of
 * ST_RING slots that NP producer threads fill), rounded to bf16 into the
 * warp's z tile; then per rank c of the slice the mixing w[.][t][c] = S_c .
 * z[.][t][c] on tensor cores (mix()), and w is stored once. z never reaches
 * memory: the b values of a (token, rank) that the mixing needs together
 * are all made in this CTA. The price: x is read once per rank slice (r /
 * ST_RS times in all, from L2). The ring must hold one j's chunks (KCH =
 * ceil(nb / 64) <= ST_RING; the host check refuses less, the kernel traps).
 */
#include "common.cuh"

#if !defined(ST_T) || !defined(ST_CONS) || !defined(ST_RS) || !defined(ST_RING)
#error "blast_s1tc.cu needs -DST_T -DST_CONS -DST_RS -DST_RING"
#endif

namespace kst {

constexpr int T = ST_T, CONS = ST_CONS, RS = ST_RS, RING = ST_RING;
constexpr int XCH = T * 128;		/* one x k-chunk: T rows of 64 k */
constexpr int SLOT = XCH + RS * 128;	/* + one V k-chunk: RS rows */
constexpr int NG = RS / 8;		/* n8 tiles of G; also St copies */
constexpr int ZW = RS * 512;		/* a warp's z tile */
constexpr int SBLK = 4096;		/* one St copy: 8 ranks x 16 x 16 bf16 */
constexpr int RINGB = RING * SLOT > CONS * 4 * ZW ? RING * SLOT : CONS * 4 * ZW;
constexpr int NP = RING % 4 == 0 ? 4 : RING % 2 == 0 ? 2 : 1;	/* issuing threads */

static_assert(T == 64 * CONS, "one m64 tile per consumer warpgroup");
static_assert(CONS == 1 || CONS == 2, "1 or 2 consumer warpgroups");
static_assert(RS == 32 || RS == 64, "ST_RS 32 or 64 (a wgmma N, whole St copies)");
static_assert(RING >= 2 && 2 * RING + 1 <= 32, "ST_RING 2..15 (the barriers' 256 bytes)");
static_assert(SLOT % 1024 == 0, "ring slots keep the 128-byte swizzle's alignment");

struct ctx {
	unsigned ring, st, full, empty, sfull;	/* shared addresses */
	int kch, lane;
};

/* Byte offset of (rank c, block j, token half h) in a warp's z tile of ZW =
 * ST_RS * 512 bytes: line (c * 2 + j / 8) * 2 + h of 128 bytes, 16-byte
 * slot (j ^ c) % 8. The 8 chunks an ldmatrix reads (8 blocks, one rank)
 * and the 8 a stmatrix writes (8 ranks, one block) fall on 8 distinct
 * slots: no bank conflicts either way. Each warp stores and later reads
 * only its own 16 token rows (those wgmma's m64 layout gives it), so a
 * warp mixes with no barrier but its own. Blocks b .. 15 are zeros (the
 * mixing's K is 16; St is zero there too). */
KT_DEV unsigned zoff(int c, int j, int h)
{
	return (unsigned)(((((c * 2 + (j >> 3)) * 2 + h) * 8) + ((j ^ c) & 7)) * 16);
}

/* G_j (this warp's 16 rows x RS ranks, fp32) into its z tile as bf16:
 * matrix q of each stmatrix is n8 tile 2p + q / 2, token half q % 2. */
KT_DEV void z_store(const float (&g)[NG][4], int j, unsigned zw, int lane)
{
	const int q = lane >> 3;

#pragma unroll
	for (int p = 0; p < NG / 2; p++) {
		unsigned v[4];

		v[0] = kt_pack_bf16x2(g[2 * p][0], g[2 * p][1]);
		v[1] = kt_pack_bf16x2(g[2 * p][2], g[2 * p][3]);
		v[2] = kt_pack_bf16x2(g[2 * p + 1][0], g[2 * p + 1][1]);
		v[3] = kt_pack_bf16x2(g[2 * p + 1][2], g[2 * p + 1][3]);
		kt_stmatrix_x4_trans(zw + zoff(8 * (2 * p + (q >> 1)) + (lane & 7), j, q & 1), v);
	}
}

/* One j, S1(j) issued into cur before: once it retired its slots go back,
 * S1(j+1) goes out into nxt, and G_j is stored while that runs (with
 * stmatrix.trans; nothing in flight touches G_j). One S1 group in flight:
 * a second would hold ring slots the copies lack. The j loop is unrolled
 * over a fixed trip count, or ptxas serializes the wgmmas (C7514). */
KT_DEV void step(const ctx &c, float (&cur)[NG][4], float (&nxt)[NG][4], int j, int b,
		 unsigned xoff, unsigned zw)
{
	kt_wg_wait<0>();
	kt_wg_pin(cur);
	if (c.lane == 0)
		for (int kc = 0; kc < c.kch; kc++)
			kt_mbar_arrive(c.empty + ((j * c.kch + kc) % RING) * 8);
	if (j + 1 < b) {
		kt_wg_zero(nxt);
		kt_wg_fence();
		kt_wg_ring_chunks<RS, RING, SLOT>(nxt, c.ring, c.full, c.kch, j + 1, xoff, XCH);
		kt_wg_commit();
	}
	z_store(cur, j, zw, c.lane);
}

/* The mixing of this warp's 16 tokens (t0w ..) over the CTA's RS ranks
 * (c0 ..), St's copy g at c.st + g * SBLK, 8 ranks at a time: W_c^T (16
 * tokens x 16 i) = Z_c^T (16 tokens x 16 j) . S_c^T, two m16n8k16 (i 0-7,
 * 8-15), A by ldmatrix.trans from the z tile, B by ldmatrix from St (rows
 * i of 32 bytes, the 32-byte swizzle: no conflicts). w goes into the
 * warp's staging tile ws (rows (i, token) of RS ranks, 2*RS bytes, the
 * 2*RS-byte swizzle of the tw map), then out as one TMA store of box (RS,
 * 16, 16) at (c0, t0w, 0): whole 64- or 128-byte row runs, rows past N and
 * blocks past b clipped by the copy engine. Storing 16 bytes straight from
 * the fragments instead (32 rows an instruction) cost more than the whole
 * j loop. */
KT_DEV void mix(const ctx &c, unsigned zw, unsigned ws, const kt_tmap_t *tw, int t0w, int c0)
{
	const int lane = c.lane, q = lane >> 3, lj = 8 * (q >> 1) + (lane & 7), lh = q & 1;
	constexpr int RB = RS * 2, SWM = RB / 16 - 1;	/* row bytes; swizzle's chunk mask */

	kt_mbar_wait(c.sfull, 0);
#pragma unroll 1
	for (int g = 0; g < NG; g++) {
		const unsigned sts = c.st + g * SBLK;
		float d[8][2][4];

#pragma unroll
		for (int u = 0; u < 8; u++) {
			const int cc = 8 * g + u;
			unsigned a[4], sf[4];

			/* A: Z_c^T (tokens x j); B: S_c^T (j x i) from St rows i
			 * (lj stands for i here), 32-byte swizzle */
			kt_ldmatrix_x4_trans(a, zw + zoff(cc, lj, lh));
			kt_ldmatrix_x4(sf, sts + (unsigned)((u * 16 + lj) * 32 +
							    ((lh ^ ((lj >> 2) & 1)) * 16)));
			d[u][0][0] = d[u][0][1] = d[u][0][2] = d[u][0][3] = 0.f;
			d[u][1][0] = d[u][1][1] = d[u][1][2] = d[u][1][3] = 0.f;
			kt_mma_bf16_16816(d[u][0], a, sf);
			kt_mma_bf16_16816(d[u][1], a, sf + 2);
		}
#pragma unroll
		for (int nt = 0; nt < 2; nt++)
#pragma unroll
			for (int k = 0; k < 4; k++) {
				const int i = nt * 8 + 2 * (lane & 3) + (k & 1);
				const int row = i * 16 + (lane >> 2) + 8 * (k >> 1);
				const unsigned o = ws + row * RB + ((g ^ ((row >> 1) & SWM)) << 4);

				asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(o),
					     "r"(kt_pack_bf16x2(d[0][nt][k], d[1][nt][k])),
					     "r"(kt_pack_bf16x2(d[2][nt][k], d[3][nt][k])),
					     "r"(kt_pack_bf16x2(d[4][nt][k], d[5][nt][k])),
					     "r"(kt_pack_bf16x2(d[6][nt][k], d[7][nt][k]))
					     : "memory");
			}
	}
	kt_fence_proxy_async();	/* the st.shared above, before the copy engine reads */
	__syncwarp();
	if (lane == 0) {
		asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
			     " [%0, {%2, %3, %4}], [%1];\n" ::"l"((unsigned long long)tw),
			     "r"(ws), "r"(c0), "r"(t0w), "r"(0)
			     : "memory");
		asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
		/* the staging tile must outlive the copy's reads (CTA exit) */
		asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
	}
}

} /* namespace kst */

extern "C" __global__ void __launch_bounds__((ST_CONS + 1) * 128, 1)
fused_blast_s1tc(const __grid_constant__ kt_tmap_t tx, const __grid_constant__ kt_tmap_t tv,
	   const __grid_constant__ kt_tmap_t ts, const __grid_constant__ kt_tmap_t tw, int N, int r,
	   int b, int nb)
{
	using namespace kst;
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	const unsigned base = (kt_smem_u32(smem_raw) + 1023u) & ~1023u;
	const int tid = threadIdx.x, wg = tid >> 7;
	const int slices = r / RS, c0 = (int)(blockIdx.x % slices) * RS;
	const int t0 = (int)(blockIdx.x / slices) * T;
	/* the ring (after the j loop: the consumer warps' w staging tiles),
	 * the z tiles, St's slice, the barriers */
	const unsigned zs = base + RINGB;
	ctx c;

	c.ring = base;
	c.st = zs + CONS * 4 * ZW;
	c.full = c.st + NG * SBLK;
	c.empty = c.full + RING * 8;
	c.sfull = c.empty + RING * 8;
	c.kch = (nb + 63) / 64;
	c.lane = tid & 31;
	/* the host check refuses these; a trap is a fault, not a hang */
	if (c.kch > RING || b > 16 || r % RS)
		__trap();
	if (tid == 0) {
		for (int s = 0; s < RING; s++) {
			kt_mbar_init(c.full + s * 8, 1);
			kt_mbar_init(c.empty + s * 8, 4 * CONS);
		}
		kt_mbar_init(c.sfull, 1);
		kt_mbar_init_fence();
	}
	__syncthreads();
	kt_pdl_wait();	/* the previous stage 3 reads w */

	if (wg == 0) {
		/* NP issuing threads (lane 0 of producer warps 0 .. NP-1): thread
		 * p owns the ring slots s with s % NP == p and issues every copy
		 * into them, in order, so each slot's empty barrier is waited on
		 * by one thread, one phase at a time. One thread's copies go out
		 * one after another (tools/ingest_probe.cu): 8 KiB boxes from a
		 * single thread came to ~32 GB/s per SM here. */
		const int pw = tid >> 5;

		if ((tid & 31) == 0 && pw < NP) {
			const int qend = b * c.kch;

			kt_tmap_prefetch(&tx);
			kt_tmap_prefetch(&tv);
			kt_tmap_prefetch(&ts);
			kt_tmap_prefetch(&tw);
			if (pw == 0) {	/* St's slice first, into its own place */
				kt_mbar_arrive_tx(c.sfull, NG * SBLK);
				for (int g = 0; g < NG; g++)
					kt_tma_load_3d(c.st + g * SBLK, &ts, c.sfull, 0, 0, c0 + 8 * g);
			}
			for (int q = pw; q < qend; q += NP) {
				const int s = q % RING, j = q / c.kch, kc = q % c.kch;
				const unsigned st = c.ring + s * SLOT, fb = c.full + s * 8;

				if (q >= RING)
					kt_mbar_wait(c.empty + s * 8, ((q / RING) - 1) & 1);
				kt_mbar_arrive_tx(fb, SLOT);
				kt_tma_load_3d(st, &tx, fb, kc * 64, j, t0);
				kt_tma_load_3d(st + XCH, &tv, fb, kc * 64, c0, j);
			}
		}
	} else {
		const int cw = wg - 1, warp = (tid >> 5) & 3;
		const unsigned zw = zs + (cw * 4 + warp) * ZW, xoff = cw * 64 * 128;
		const unsigned wst = c.ring + (cw * 4 + warp) * ZW;
		float g0[NG][4], g1[NG][4];

		/* blocks b .. 15 of the z tile: zeros */
		for (int e = c.lane; e < RS * (16 - b) * 2; e += 32) {
			const int cc = e / ((16 - b) * 2), jj = b + (e / 2) % (16 - b);

			asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(
					     zw + zoff(cc, jj, e & 1)),
				     "r"(0u)
				     : "memory");
		}
		kt_wg_zero(g0);
		kt_wg_fence();
		kt_wg_ring_chunks<RS, RING, SLOT>(g0, c.ring, c.full, c.kch, 0, xoff, XCH);
		kt_wg_commit();
		for (int j = 0; j < b; j += 2) {
			step(c, g0, g1, j, b, xoff, zw);
			if (j + 1 < b)
				step(c, g1, g0, j + 1, b, xoff, zw);
		}
		/* every consumer warp's wgmmas have read the ring before any
		 * staging tile lands on it */
		kt_bar_sync(1, CONS * 128);
		mix(c, zw, wst, &tw, t0 + cw * 64 + warp * 16, c0);
	}
}
