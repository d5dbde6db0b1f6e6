/*
 * plan_emu_blast.c -- blast.cu's kernels (and blast_fused.cu's,
 * blast_s1tc.cu's) for the plan emulator (plan_emu.h: emu_blast). Each
 * mirrors its kernel line by line: the mixers thread by thread, the fused
 * kernels CTA by CTA in gemm.cu's tile order, so that a grid that misses an
 * element leaves the NaN poison.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_emu.h"
#include "testutil.h"

/* Each of these mirrors its kernel in templates/blast.cu. */
static void emu_s_to_f32(struct emu *m, const struct kt_launch *l)
{
	int Sb = emu_ab(l, 0), S32 = emu_ab(l, 1);
	long long count = emu_ai(l, 2), e;

	CU_ASSERT_EQUAL(m->bufs[S32].dtype, KT_F32);
	for (e = 0; e < count; e++)
		emu_st(m, S32, e, emu_ld(m, Sb, e));
}

/* blast_mix thread by thread: (block x, y) x (thread x, y). */
static void emu_mix(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int z = emu_ab(l, 0), S32 = emu_ab(l, 1), w = emu_ab(l, 2);
	long long N = emu_ai(l, 3), r = emu_ai(l, 4), plane = N * r;
	long B = emu_define(p, "MIX_B");
	long RV = B <= 16 ? 8 : B <= 32 ? 4 : B <= 64 ? 2 : 1;
	long long bx, by, tx, ty, i, j, k;

	CU_ASSERT_FATAL(B >= 1);
	CU_ASSERT_EQUAL(l->block[0], 32);
	CU_ASSERT(l->block[0] * l->block[1] <= 256);	/* __launch_bounds__(256) */
	CU_ASSERT_EQUAL(m->bufs[S32].dtype, KT_F32);
	CU_ASSERT_EQUAL(m->bufs[z].dtype, KT_BF16);
	CU_ASSERT_EQUAL(m->bufs[w].dtype, KT_BF16);
	for (bx = 0; bx < l->grid[0]; bx++)
		for (by = 0; by < l->grid[1]; by++)
			for (ty = 0; ty < l->block[1]; ty++)
				for (tx = 0; tx < l->block[0]; tx++) {
					long long t = bx * 32 + tx, vec = by * l->block[1] + ty;
					long long c = vec * RV, off = t * r + c;

					if (t >= N || c >= r)
						continue;
					CU_ASSERT(off % RV == 0);	/* vector alignment */
					for (i = 0; i < B; i++) {
						double acc[8] = {0};

						for (j = 0; j < B; j++)
							for (k = 0; k < RV; k++)
								acc[k] = (float)(acc[k] +
									  (double)emu_ld(m, S32, (i * B + j) * r + c + k) *
									  emu_ld(m, z, j * plane + off + k));
						for (k = 0; k < RV; k++)
							emu_st(m, w, i * plane + off + k, acc[k]);
					}
				}
}

/* blast_s1mix CTA by CTA: gemm.cu's GROUP_M tile order, z tiles of all
 * blocks (bf16 in shared memory: rounded when m->round), then the mixing
 * points of the tile, edges masked. */
static void emu_s1mix(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int x = emu_ab(l, 0), Vb = emu_ab(l, 1), S32 = emu_ab(l, 2), w = emu_ab(l, 3);
	long long N = emu_ai(l, 4), n = emu_ai(l, 5), r = emu_ai(l, 6), plane = N * r;
	long B = emu_define(p, "MIX_B"), BM = emu_define(p, "BLOCK_M"), BN = emu_define(p, "BLOCK_N");
	long BK = emu_define(p, "BLOCK_K"), ST = emu_define(p, "STAGES"), GM = emu_define(p, "GROUP_M");
	long WM = emu_define(p, "WARPS_M"), WN = emu_define(p, "WARPS_N");
	long RV = B <= 16 ? 8 : B <= 32 ? 4 : B <= 64 ? 2 : 1, nb;
	long long tm, tn, pid;
	double *zt;

	CU_ASSERT_EQUAL_FATAL(emu_define(p, "FUSED"), 1);
	CU_ASSERT_FATAL(B >= 1 && BM > 0 && BN > 0 && BK > 0 && ST > 0 && WM > 0 && WN > 0);
	CU_ASSERT_EQUAL(l->block[0], (unsigned)(WM * WN * 32));
	CU_ASSERT_EQUAL(l->smem, (unsigned)(ST * (BM + BN) * BK * 2 + B * BM * (BN + 8) * 2));
	CU_ASSERT(BN % RV == 0);
	CU_ASSERT_EQUAL(m->bufs[S32].dtype, KT_F32);
	CU_ASSERT_EQUAL(n % B, 0);
	nb = n / B;
	CU_ASSERT(nb % 8 == 0 && r % 8 == 0 && n % 8 == 0);	/* cp.async rules */
	tm = (N + BM - 1) / BM;
	tn = (r + BN - 1) / BN;
	CU_ASSERT_EQUAL((long long)l->grid[0], tm * tn);
	zt = malloc(sizeof(double) * (size_t)(B * BM * BN));
	CU_ASSERT_PTR_NOT_NULL_FATAL(zt);
	for (pid = 0; pid < (long long)l->grid[0]; pid++) {
		long long m0, n0, j, tl, cl, k, q, i;

		if (GM <= 1) {
			m0 = (pid / tn) * BM;
			n0 = (pid % tn) * BN;
		} else {
			long long in_group = GM * tn, first = (pid / in_group) * GM;
			long long gsize = tm - first < GM ? tm - first : GM, local = pid % in_group;

			m0 = (first + local % gsize) * BM;
			n0 = (local / gsize) * BN;
		}
		for (j = 0; j < B; j++)
			for (tl = 0; tl < BM; tl++)
				for (cl = 0; cl < BN; cl++) {
					long long row = m0 + tl, col = n0 + cl;
					double acc = 0;

					if (row < N && col < r)
						for (k = 0; k < nb; k++)
							acc += (double)emu_ld(m, x, row * n + j * nb + k) *
							       emu_ld(m, Vb, (j * r + col) * nb + k);
					if (m->round)
						acc = kt_bf16_to_f32(kt_f32_to_bf16((float)acc));
					zt[(j * BM + tl) * BN + cl] = acc;
				}
		for (q = 0; q < BM * (BN / RV); q++) {
			long long tl2 = q % BM, vl = q / BM, t = m0 + tl2, c = n0 + vl * RV;

			if (t >= N || c >= r)
				continue;
			for (i = 0; i < B; i++) {
				double acc[8] = {0};

				for (j = 0; j < B; j++)
					for (k = 0; k < RV; k++)
						acc[k] = (float)(acc[k] +
							  (double)emu_ld(m, S32, (i * B + j) * r + c + k) *
							  zt[(j * BM + tl2) * BN + vl * RV + k]);
				for (k = 0; k < RV; k++)
					emu_st(m, w, i * plane + t * r + c + k, acc[k]);
			}
		}
	}
	free(zt);
}

/* blast_s_to_t16: St[c][i][j] = S[i][j][c], zero beyond MIX_B. */
static void emu_s_to_t16(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int Sb = emu_ab(l, 0), St = emu_ab(l, 1);
	long long r = emu_ai(l, 2), e;
	long B = emu_define(p, "MIX_B");

	CU_ASSERT_EQUAL(emu_define(p, "MIX_TC"), 1);
	CU_ASSERT_FATAL(B >= 1 && B <= 16);
	CU_ASSERT_EQUAL(m->bufs[St].dtype, KT_BF16);
	CU_ASSERT_EQUAL((long long)m->bufs[St].elems, r * 256);
	for (e = 0; e < r * 256; e++) {
		long long j = e & 15, i = (e >> 4) & 15, c = e >> 8;

		emu_st(m, St, e, i < B && j < B ? emu_ld(m, Sb, (i * B + j) * r + c) : 0.0);
	}
}

/* blast_mix_tcp CTA by CTA: CTA k of grid x takes the rank tiles (TC_R
 * ranks) and token tiles (TP_T tokens) that blast.cu's tp_assign deals it
 * (mix_assign below, the same arithmetic); per tile it mixes every z[j]
 * (zero outside) as W_c = St_c (16 x 16) . Z_c (16 x TP_T) with fp32 sums
 * and stores w for i < MIX_B inside the shape.
 * templates/blast.cu has the same TC_R, TP_T and shared memory size. */
#define TC_R 64
#define TP_T 8
#define TP_SMEM (3 * 16 * (TP_T * (TC_R * 2 + 16) + 32))
static void mix_assign(long long k, long long C, long long R, long long *rt, long long *rstep,
		       long long *y, long long *gy)
{
	const long long G = C / R, A = C % R;

	if (G == 0) {
		*rt = k, *rstep = C, *y = 0, *gy = 1;
	} else if (k < A * (G + 1)) {
		*rt = k / (G + 1), *rstep = R, *y = k % (G + 1), *gy = G + 1;
	} else {
		*rt = A + (k - A * (G + 1)) / G, *rstep = R, *y = (k - A * (G + 1)) % G, *gy = G;
	}
}

static void emu_mix_tc(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int z = emu_ab(l, 0), St = emu_ab(l, 1), w = emu_ab(l, 2);
	long long N = emu_ai(l, 3), r = emu_ai(l, 4), plane = N * r;
	long B = emu_define(p, "MIX_B"), l2 = emu_define(p, "MIX_L2");
	long long k, bx, rstep, by, gy, tt;
	static double zt[16][TP_T][TC_R];

	CU_ASSERT_EQUAL(emu_define(p, "MIX_TC"), 1);
	/* MIX_L2: 1 (discard z) or 9 (and w's stores evict_last); discards
	 * whole rank tiles only */
	CU_ASSERT(l2 == -1 || l2 == 1 || l2 == 9);
	if (l2 > 0)
		CU_ASSERT(r % TC_R == 0);
	CU_ASSERT_FATAL(B >= 1 && B <= 16);
	CU_ASSERT_EQUAL(l->block[0] * l->block[1] * l->block[2], 128);	/* 4 warps */
	CU_ASSERT_EQUAL(l->smem, TP_SMEM);
	CU_ASSERT_EQUAL(l->grid[1], 1);
	CU_ASSERT_EQUAL(l->grid[2], 1);
	CU_ASSERT_EQUAL(m->bufs[z].dtype, KT_BF16);
	CU_ASSERT_EQUAL(m->bufs[St].dtype, KT_BF16);
	for (k = 0; k < l->grid[0]; k++)
		for (mix_assign(k, l->grid[0], (r + TC_R - 1) / TC_R, &bx, &rstep, &by, &gy);
		     bx * TC_R < r; bx += rstep)
			for (tt = by; tt * TP_T < N; tt += gy) {
				long long j, tl, cl, i;

				for (j = 0; j < 16; j++)
					for (tl = 0; tl < TP_T; tl++)
						for (cl = 0; cl < TC_R; cl++) {
							long long t = tt * TP_T + tl, c = bx * TC_R + cl;

							zt[j][tl][cl] = j < B && t < N && c < r ?
								emu_ld(m, z, j * plane + t * r + c) : 0.0;
						}
				/* MIX_L2 & 1: the tile's z lines, once read, are gone */
				for (j = 0; l2 > 0 && (l2 & 1) && j < B; j++)
					for (tl = 0; tl < TP_T && tt * TP_T + tl < N; tl++)
						if ((bx + 1) * TC_R <= r)
							emu_discard(m, z, j * plane + (tt * TP_T + tl) * r +
										  bx * TC_R);
				for (i = 0; i < B; i++)
					for (tl = 0; tl < TP_T; tl++)
						for (cl = 0; cl < TC_R; cl++) {
							long long t = tt * TP_T + tl, c = bx * TC_R + cl;
							float acc = 0.f;

							if (t >= N || c >= r)
								continue;
							for (j = 0; j < 16; j++)
								acc += (float)(emu_ld(m, St, (c * 16 + i) * 16 + j) *
									       zt[j][tl][cl]);
							emu_st(m, w, i * plane + t * r + c, acc);
						}
			}
}

static double fcl_round(const struct emu *m, double v);

/* blast_s1tc.cu's fused_blast_s1tc, CTA by CTA (rank slices fastest):
 * z_j of its token tile and rank slice through the x and V maps (k-chunks
 * of 64, zero fill), bf16-rounded where the kernel rounds it, blocks b ..
 * 15 zero; then the mixing over 16 blocks with St read through its map,
 * w[i][t][c] stored for i < b, t < N. */
static void emu_s1tc(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	const struct kt_arg *tx = &l->args[0], *tv = &l->args[1], *ts = &l->args[2];
	const struct kt_arg *tw = &l->args[3];
	long T = emu_define(p, "ST_T"), cons = emu_define(p, "ST_CONS");
	long RS = emu_define(p, "ST_RS"), ring = emu_define(p, "ST_RING");
	long long N, r, b, nb, kch, slices, cta;
	double *z;
	int w;

	CU_ASSERT_STRING_EQUAL_FATAL(p->tpl, "blast_s1tc");
	CU_ASSERT_EQUAL_FATAL(l->nargs, 8);
	CU_ASSERT_EQUAL_FATAL(tw->kind, KT_ARG_TMAP);
	w = tw->buf;
	N = emu_ai(l, 4);
	r = emu_ai(l, 5);
	b = emu_ai(l, 6);
	nb = emu_ai(l, 7);
	kch = (nb + 63) / 64;
	/* the kernel's static_asserts and its run-time trap */
	CU_ASSERT_FATAL(T == 64 * cons && (cons == 1 || cons == 2));
	CU_ASSERT_FATAL(RS == 32 || RS == 64);
	CU_ASSERT_FATAL(ring >= 2 && ring <= 15 && kch <= ring && b >= 1 && b <= 16 && r % RS == 0);
	/* it waits for the previous stage 3 (reads of w) */
	CU_ASSERT_EQUAL(l->pdl, 1);
	CU_ASSERT_EQUAL(emu_define(p, "KT_PDL"), 1);
	CU_ASSERT_EQUAL(m->bufs[w].dtype, KT_BF16);
	CU_ASSERT_EQUAL((long long)m->bufs[w].elems, b * N * r);
	slices = r / RS;
	CU_ASSERT_EQUAL((long long)l->grid[0], (N + T - 1) / T * slices);
	CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
	/* the ring (after the j loop the consumer warps' w staging tiles),
	 * a z tile per consumer warp, St's slice */
	{
		long rb = ring * (T + RS) * 128, tiles = cons * 4 * RS * 512;

		CU_ASSERT_EQUAL(l->smem, (unsigned)(1024 + (rb > tiles ? rb : tiles) + tiles +
						    RS / 8 * 4096 + 256));
	}
	emu_map_ok(m, tx, 64, 1, (int)T, 128);
	emu_map_ok(m, tv, 64, (int)RS, 1, 128);
	emu_map_ok(m, ts, 16, 16, 8, 32);
	/* w's stores: (rank, token, block), a warp's 16 tokens x 16 blocks */
	emu_map_ok(m, tw, (int)RS, 16, 16, (int)RS * 2);
	CU_ASSERT(tw->tmap.dims[0] == r && tw->tmap.dims[1] == N && tw->tmap.dims[2] == b &&
		  tw->tmap.strides[1] == r && tw->tmap.strides[2] == N * r);
	z = malloc(sizeof(double) * (size_t)(16 * T * RS));
	CU_ASSERT_PTR_NOT_NULL_FATAL(z);
	for (cta = 0; cta < (long long)l->grid[0]; cta++) {
		long long c0 = (cta % slices) * RS, t0 = (cta / slices) * T, j, t, c, k, i;

		for (j = 0; j < 16; j++)
			for (t = 0; t < T; t++)
				for (c = 0; c < RS; c++) {
					double acc = 0;

					for (k = 0; j < b && k < kch * 64; k++)
						acc += emu_tma_ld(m, tx, k, j, t0 + t) *
						       emu_tma_ld(m, tv, k, c0 + c, j);
					z[(j * T + t) * RS + c] = fcl_round(m, acc);
				}
		for (i = 0; i < 16; i++)
			for (t = 0; t < T; t++)
				for (c = 0; c < RS; c++) {
					double acc = 0;

					for (j = 0; j < 16; j++)
						acc += emu_tma_ld(m, ts, j, i, c0 + c) *
						       z[(j * T + t) * RS + c];
					if (i < b && t0 + t < N)
						emu_st(m, w, (i * N + t0 + t) * r + c0 + c, acc);
				}
	}
	free(z);
}

static double fcl_round(const struct emu *m, double v)
{
	return m->round ? (double)kt_bf16_to_f32(kt_f32_to_bf16((float)v)) : v;
}

/* blast_fused.cu's fused_blast_cl, cluster by cluster (FB_RESIDENT: each
 * walking token tiles cid, cid + clusters, ...), each phase for all CTAs
 * of the cluster, in the kernel's shared-memory layouts (zT (G, r, T) per
 * CTA, GB (RS, 16, T), WX (b, RS, T), WL (G, r, T)), bf16-rounded where the
 * kernel stores bf16. */
static void emu_fused_cl(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int x = emu_ab(l, 0), Vb = emu_ab(l, 1), Ub = emu_ab(l, 2), St = emu_ab(l, 3);
	int y = emu_ab(l, 4);
	long long N = emu_ai(l, 5);
	long B = emu_define(p, "FB_B"), R = emu_define(p, "FB_R"), NB = emu_define(p, "FB_NB");
	long MB = emu_define(p, "FB_MB"), T = emu_define(p, "FB_T"), G = emu_define(p, "FB_G");
	long ST = emu_define(p, "FB_STAGES"), RES = emu_define(p, "FB_RESIDENT"), C, RS, n, mm;
	long ldt = T + 8, tiles;
	double *zt, *gb, *wx, *wl;
	long long k, ntiles = (N + T - 1) / T, ncl;

	CU_ASSERT_STRING_EQUAL_FATAL(p->tpl, "blast_fused");
	CU_ASSERT_FATAL(B >= 1 && B <= 16 && G >= 1 && B % G == 0 && ST >= 2);
	C = B / G;
	RS = R / C;
	n = B * NB;
	mm = B * MB;
	/* the kernel's static_asserts */
	CU_ASSERT_FATAL(R % 64 == 0 && R % (8 * C) == 0 && NB % 64 == 0 && MB % 128 == 0);
	CU_ASSERT_FATAL(T == 32 || T == 64);
	CU_ASSERT_EQUAL((R / 16) % (8 / (T / 32)), 0);
	CU_ASSERT_EQUAL(l->block[0], 256u);
	CU_ASSERT_FATAL(RES == 0 || RES == 1);
	/* zT, WL, GB (16 blocks 16 bytes apart), WX, two mbarriers */
	tiles = 2 * G * R * ldt * 2 + 16 * (RS * ldt * 2 + 16) + B * RS * ldt * 2 + 16;
	if (RES) {	/* V, U, x twice */
		CU_ASSERT_EQUAL(l->smem,
				(unsigned)(G * (R * NB + MB * R + 2 * T * NB) * 2 + tiles));
	} else {	/* the ring */
		CU_ASSERT_EQUAL(l->smem,
				(unsigned)(ST * (T + R > 128 ? T + R : 128) * 128 + tiles));
	}
	CU_ASSERT_EQUAL_FATAL(l->grid[0] % C, 0);
	ncl = l->grid[0] / C;
	/* streaming: one tile per cluster; resident: at most one cluster per
	 * tile, every tile walked */
	CU_ASSERT(RES ? ncl >= 1 && ncl <= ntiles : ncl == ntiles);
	CU_ASSERT_EQUAL(m->bufs[St].dtype, KT_BF16);
	CU_ASSERT_EQUAL(m->bufs[x].elems, (size_t)(N * n));
	zt = calloc((size_t)(C * G * R * T), sizeof(double));
	gb = calloc((size_t)(C * RS * 16 * T), sizeof(double));
	wx = calloc((size_t)(C * B * RS * T), sizeof(double));
	wl = calloc((size_t)(C * G * R * T), sizeof(double));
	CU_ASSERT_FATAL(zt && gb && wx && wl);
	for (k = 0; k < ntiles; k++) {	/* tile k: cluster k % ncl's walk */
		const long long t0 = k * T;
		long q, g, c, j, i, t, rho, o;

		/* 1. stage 1, rows past N zero-filled */
		for (q = 0; q < C; q++)
			for (g = 0; g < G; g++)
				for (rho = 0; rho < R; rho++)
					for (t = 0; t < T; t++) {
						long long e;
						float acc = 0.f;

						j = q * G + g;
						for (e = 0; e < NB && t0 + t < N; e++)
							acc += emu_ld(m, x, (t0 + t) * n + j * NB + e) *
							       emu_ld(m, Vb, (j * R + rho) * NB + e);
						zt[((q * G + g) * R + rho) * T + t] = fcl_round(m, acc);
					}
		/* 2. gather the slice's z of every block, pad rows zero */
		for (q = 0; q < C; q++)
			for (c = 0; c < RS; c++)
				for (j = 0; j < 16; j++)
					for (t = 0; t < T; t++)
						gb[((q * RS + c) * 16 + j) * T + t] =
							j < B ? zt[(((j / G) * G + j % G) * R + q * RS + c) * T + t]
							      : 0.0;
		/* 3. mixing with St */
		for (q = 0; q < C; q++)
			for (c = 0; c < RS; c++)
				for (i = 0; i < B; i++)
					for (t = 0; t < T; t++) {
						float acc = 0.f;

						rho = q * RS + c;
						for (j = 0; j < 16; j++)
							acc += (float)(emu_ld(m, St, (rho * 16 + i) * 16 + j) *
								       gb[((q * RS + c) * 16 + j) * T + t]);
						wx[((q * B + i) * RS + c) * T + t] = fcl_round(m, acc);
					}
		/* 4. gather w of the own blocks, all ranks */
		for (q = 0; q < C; q++)
			for (g = 0; g < G; g++)
				for (rho = 0; rho < R; rho++)
					for (t = 0; t < T; t++)
						wl[((q * G + g) * R + rho) * T + t] =
							wx[(((rho / RS) * B + q * G + g) * RS + rho % RS) * T + t];
		/* 5. stage 3, rows past N not stored */
		for (q = 0; q < C; q++)
			for (g = 0; g < G; g++)
				for (t = 0; t < T && t0 + t < N; t++)
					for (o = 0; o < MB; o++) {
						float acc = 0.f;

						i = q * G + g;
						for (rho = 0; rho < R; rho++)
							acc += (float)(wl[((q * G + g) * R + rho) * T + t] *
								       emu_ld(m, Ub, (i * MB + o) * R + rho));
						emu_st(m, y, (t0 + t) * mm + i * MB + o, acc);
					}
	}
	free(zt);
	free(gb);
	free(wx);
	free(wl);
}

static void emu_ref_z(struct emu *m, const struct kt_launch *l)
{
	int x = emu_ab(l, 0), Vb = emu_ab(l, 1), z32 = emu_ab(l, 2);
	long long N = emu_ai(l, 3), n = emu_ai(l, 4), b = emu_ai(l, 5), r = emu_ai(l, 6), nb = n / b, e, k;

	for (e = 0; e < b * N * r; e++) {
		long long c = e % r, row = e / r, t = row % N, j = row / N;
		float acc = 0.f;

		for (k = 0; k < nb; k++)
			acc += emu_ld(m, x, t * n + j * nb + k) * emu_ld(m, Vb, (j * r + c) * nb + k);
		emu_st(m, z32, e, acc);
	}
}

static void emu_ref_w(struct emu *m, const struct kt_launch *l)
{
	int z32 = emu_ab(l, 0), Sb = emu_ab(l, 1), w32 = emu_ab(l, 2);
	long long N = emu_ai(l, 3), b = emu_ai(l, 4), r = emu_ai(l, 5), e, j;

	for (e = 0; e < b * N * r; e++) {
		long long c = e % r, row = e / r, t = row % N, i = row / N;
		float acc = 0.f;

		for (j = 0; j < b; j++)
			acc += emu_ld(m, Sb, (i * b + j) * r + c) * emu_ld(m, z32, (j * N + t) * r + c);
		emu_st(m, w32, e, acc);
	}
}

static void emu_ref_y(struct emu *m, const struct kt_launch *l)
{
	int w32 = emu_ab(l, 0), Ub = emu_ab(l, 1), y = emu_ab(l, 2);
	long long N = emu_ai(l, 3), mm = emu_ai(l, 4), b = emu_ai(l, 5), r = emu_ai(l, 6), mb = mm / b, e, c;

	for (e = 0; e < N * mm; e++) {
		long long o = e % mm, t = e / mm, i = o / mb, op = o % mb;
		float acc = 0.f;

		for (c = 0; c < r; c++)
			acc += emu_ld(m, w32, (i * N + t) * r + c) * emu_ld(m, Ub, (i * mb + op) * r + c);
		emu_st(m, y, e, acc);
	}
}

/* blast's gemm_tn_ws maps cover exactly their operands. */
int emu_blast(struct emu *m, const struct kt_launch *l)
{
	static const struct {
		const char *name;
		void (*fn)(struct emu *, const struct kt_launch *);
	} kernels[] = {
		{"blast_s_to_f32", emu_s_to_f32},
		{"blast_mix", emu_mix},
		{"blast_s1mix", emu_s1mix},
		{"blast_s_to_t16", emu_s_to_t16},
		{"blast_mix_tcp", emu_mix_tc},
		{"fused_blast_cl", emu_fused_cl},
		{"fused_blast_s1tc", emu_s1tc},
		{"blast_ref_z", emu_ref_z},
		{"blast_ref_w", emu_ref_w},
		{"blast_ref_y", emu_ref_y},
	};
	size_t i;

	if (strcmp(l->kernel, "gemm_tn_ws") == 0 && l->nargs == 10) {
		emu_map_extent(&l->args[0], l->args[8].i, l->args[3].i, l->args[5].i, l->grid[2]);
		emu_map_extent(&l->args[1], l->args[9].i, l->args[4].i, l->args[5].i, l->grid[2]);
		return 0;
	}
	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (strcmp(kernels[i].name, l->kernel) == 0) {
			kernels[i].fn(m, l);
			return 1;
		}
	return 0;
}
