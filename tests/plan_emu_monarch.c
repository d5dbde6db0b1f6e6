/*
 * plan_emu_monarch.c -- monarch.cu's kernels (and monarch_fused.cu's) for
 * the plan emulator (plan_emu.h: emu_monarch), each mirrored from its
 * kernel, with the controls the tests plant in them.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_emu.h"
#include "testutil.h"

/* Each of these mirrors its kernel in templates/monarch.cu. */
static void emu_perm_mid(struct emu *m, const struct kt_launch *l)
{
	int z = emu_ab(l, 0), g = emu_ab(l, 1);
	long long N = emu_ai(l, 2), b = emu_ai(l, 3), r = emu_ai(l, 4), rp = r / b, e;

	for (e = 0; e < b * N * r; e++) {
		long long k = e % r, row = e / r, t = row % N, i = row / N, j = k / rp, q = k % rp;

		emu_st(m, g, e, emu_ld(m, z, (j * N + t) * r + q * b + i));
	}
}

static void emu_relayout_w1(struct emu *m, const struct kt_launch *l)
{
	int w1 = emu_ab(l, 0), w1r = emu_ab(l, 1);
	long long b = emu_ai(l, 2), r = emu_ai(l, 3), nb = emu_ai(l, 4), rp = r / b, e;

	for (e = 0; e < b * r * nb; e++) {
		long long k = e % nb, row = e / nb, c = row % r, j = row / r, i = c / rp, q = c % rp;

		emu_st(m, w1r, e, emu_ld(m, w1, (j * r + q * b + i) * nb + k));
	}
}

static void emu_gather_chunks(struct emu *m, const struct kt_launch *l)
{
	int z = emu_ab(l, 0), g = emu_ab(l, 1);
	long long N = emu_ai(l, 2), b = emu_ai(l, 3), r = emu_ai(l, 4), rp = r / b, ch, u;

	CU_ASSERT(rp % 8 == 0);	/* whole 16-byte chunks */
	for (ch = 0; ch < b * N * r / 8; ch++) {
		long long e = ch * 8, k = e % r, row = e / r, t = row % N, i = row / N;
		long long j = k / rp, q = k % rp, src = (t * b + j) * r + i * rp + q;

		CU_ASSERT(src % 8 == 0);	/* 16-byte aligned source */
		for (u = 0; u < 8; u++)
			emu_st(m, g, e + u, emu_ld(m, z, src + u));
	}
}

static void emu_perm_out(struct emu *m, const struct kt_launch *l)
{
	int y2 = emu_ab(l, 0), y = emu_ab(l, 1);
	long long N = emu_ai(l, 2), mm = emu_ai(l, 3), b = emu_ai(l, 4), mb = mm / b, e;

	for (e = 0; e < N * mm; e++) {
		long long o = e % mm, t = e / mm, i = o % b, s = o / b;

		emu_st(m, y, e, emu_ld(m, y2, t * mm + i * mb + s));
	}
}

/* monarch_perm_rows: the same permutation as monarch_perm_out, a row per
 * block through shared memory (16-byte chunks both ways) */
static void emu_perm_rows(struct emu *m, const struct kt_launch *l)
{
	int y2 = emu_ab(l, 0), y = emu_ab(l, 1);
	long long N = emu_ai(l, 2), mm = emu_ai(l, 3), b = emu_ai(l, 4), mb = mm / b, t, o;

	CU_ASSERT(mm % 8 == 0 && mb % 8 == 0);
	CU_ASSERT_EQUAL(l->grid[0], (unsigned)N);
	CU_ASSERT_EQUAL(l->smem, (unsigned)(b * (mb + 8) * 2));
	for (t = 0; t < N; t++)
		for (o = 0; o < mm; o++)
			emu_st(m, y, t * mm + o, emu_ld(m, y2, t * mm + (o % b) * mb + o / b));
}

int emu_monarch_x8_swap;	/* plan_emu.h */

/* monarch_perm_x8: a work item per (token t, s-chunk sb, group g of 8
 * blocks), g fastest; 8 chunk loads (blocks 8g + c, s 8sb ..), then
 * the transposed chunks: y[t][(8sb + u)*b + 8g + c] = w[c][u] */
static void emu_perm_x8(struct emu *m, const struct kt_launch *l)
{
	int y2 = emu_ab(l, 0), y = emu_ab(l, 1);
	long long N = emu_ai(l, 2), mm = emu_ai(l, 3), b = emu_ai(l, 4), mb = mm / b;
	long long sc = mb / 8, ng = b / 8, total = N * sc * ng, e;

	CU_ASSERT_FATAL(b % 8 == 0 && mb % 8 == 0 && mm == b * mb);
	CU_ASSERT_EQUAL(l->block[0], 128u);
	CU_ASSERT_EQUAL(l->smem, 0u);
	CU_ASSERT_EQUAL((long long)l->grid[0], (total + 127) / 128);
	for (e = 0; e < total; e++) {
		long long g = e % ng, sb = (e / ng) % sc, t = e / ng / sc;
		long long src = t * mm + g * 8 * mb + sb * 8, dst = t * mm + sb * 8 * b + g * 8;
		float w[8][8];
		int c, u;

		for (c = 0; c < 8; c++)
			for (u = 0; u < 8; u++)
				w[c][u] = emu_ld(m, y2, src + c * mb + u);
		for (u = 0; u < 8; u++)
			for (c = 0; c < 8; c++)
				emu_st(m, y, dst + u * b + c, w[c][emu_monarch_x8_swap ? u ^ 1 : u]);
	}
}

static void emu_ref_z(struct emu *m, const struct kt_launch *l)
{
	int x = emu_ab(l, 0), w1 = emu_ab(l, 1), z32 = emu_ab(l, 2);
	long long N = emu_ai(l, 3), n = emu_ai(l, 4), b = emu_ai(l, 5), r = emu_ai(l, 6), nb = n / b, e, k;

	for (e = 0; e < b * N * r; e++) {
		long long c = e % r, row = e / r, t = row % N, j = row / N;
		float acc = 0.f;

		for (k = 0; k < nb; k++)
			acc += emu_ld(m, x, t * n + j * nb + k) * emu_ld(m, w1, (j * r + c) * nb + k);
		emu_st(m, z32, e, acc);
	}
}

static void emu_ref_y(struct emu *m, const struct kt_launch *l)
{
	int z32 = emu_ab(l, 0), w2 = emu_ab(l, 1), y = emu_ab(l, 2);
	long long N = emu_ai(l, 3), mm = emu_ai(l, 4), b = emu_ai(l, 5), r = emu_ai(l, 6), blk = emu_ai(l, 7);
	long long rp = r / b, mb = mm / b, e, j, q;

	for (e = 0; e < N * mm; e++) {
		long long o = e % mm, t = e / mm;
		long long i = blk ? o / mb : o % b, s = blk ? o % mb : o / b, wr = (i * mb + s) * r;
		float acc = 0.f;

		for (j = 0; j < b; j++)
			for (q = 0; q < rp; q++)
				acc += emu_ld(m, z32, (j * N + t) * r + q * b + i) * emu_ld(m, w2, wr + j * rp + q);
		emu_st(m, y, e, acc);
	}
}

/* Map arg a: box (64, b1, b2) and the 128-byte swizzle the kernel's
 * descriptors assume. */
static void map_ok(struct emu *m, const struct kt_arg *a, int b1, int b2)
{
	emu_map_ok(m, a, 64, b1, b2, 128);
}

int emu_monarch_e3_swap, emu_monarch_e3_nowait;	/* plan_emu.h */

/* EPILOGUE 3's interleave (monarch_fused.cu's interleave()) for CTA (t0,
 * i): its BLOCK_M * MB / 64 work items of the token tile (row, s-chunk sb,
 * 8-block group g, g fastest), each 8 16-byte chunks of y2 transposed into
 * 8 of y. */
static void emu_fused_interleave(struct emu *m, int y2, int yi, long long N, long long mm,
				 long long b, long long BM, long long MB, long long i,
				 long long t0)
{
	long long per = BM * MB / 64, sc = MB / 8, ng = b / 8, it;

	for (it = 0; it < per; it++) {
		long long e = i * per + it, g = e % ng, sb = (e / ng) % sc, row = t0 + e / (ng * sc);
		long long src = row * mm + g * 8 * MB + sb * 8, dst = row * mm + sb * 8 * b + g * 8;
		float w[8][8];
		int c, u;

		if (row >= N)
			continue;
		CU_ASSERT(src % 8 == 0 && dst % 8 == 0);	/* 16-byte chunks */
		for (c = 0; c < 8; c++)
			for (u = 0; u < 8; u++)
				w[c][u] = emu_ld(m, y2, src + c * MB + u);
		for (u = 0; u < 8; u++)
			for (c = 0; c < 8; c++)
				emu_st(m, yi, dst + u * b + c, w[c][emu_monarch_e3_swap ? u ^ 1 : u]);
	}
}

/* fused_monarch_ws(tx, tw1, tw2, y, N, m, b, nb) of monarch_fused.cu: per
 * CTA (token tile t0, output block i, column tile c0 = ct * MB of the
 * block's m / b, column tiles fastest) and input block j, G = the boxes of
 * x at (kc*64, j, t0) times those of w1r at (kc*64, i*RP, j) over the KCH
 * k-chunks, rounded to bf16 (m->round), then acc += G times the w2 boxes
 * at (column, c0, i): the k16 steps of slice j in the panels of its unit
 * j / JP (JP = lcm(RP, 64) / RP slices a unit); y's column (c0 + s)*b + i,
 * or i*m/b + c0 + s with BLOCKMAJOR. EPILOGUE 3 (args y2, N, m, b, nb, y, arrived,
 * a cooperative launch): y2 block-major, then, once every CTA has stored
 * (the arrival wait), each CTA's share of its tile interleaved into y. */
static void emu_fused(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	const struct kt_arg *tx = &l->args[0], *tw1 = &l->args[1], *tw2 = &l->args[2];
	long BM = emu_define(p, "BLOCK_M"), cons = emu_define(p, "CONSUMERS");
	long ring = emu_define(p, "RING"), RP = emu_define(p, "RP"), MB = emu_define(p, "MB");
	long blk = emu_define(p, "BLOCKMAJOR"), epi = emu_define(p, "EPILOGUE");
	long ci = emu_define(p, "CLUSTER_I"), ct = emu_define(p, "CLUSTER_T"), cl = ci * ct;
	long long N, mm, b, nb, kch, cta, j, kc, r, q, k, sx, pp, jp, ucol, gd, nct, c0;
	int y, yi = -1, arrived = -1;
	double *G, *acc;

	CU_ASSERT_STRING_EQUAL(p->tpl, "monarch_fused");
	CU_ASSERT_EQUAL_FATAL(l->nargs, epi == 3 ? 10 : 8);
	/* only EPILOGUE 3's CTAs wait for each other */
	CU_ASSERT_EQUAL(l->cooperative, epi == 3);
	y = emu_ab(l, 3);
	N = emu_ai(l, 4);
	mm = emu_ai(l, 5);
	b = emu_ai(l, 6);
	nb = emu_ai(l, 7);
	kch = (nb + 63) / 64;
	/* the kernel's static_asserts and its run-time trap */
	CU_ASSERT_FATAL(BM == 64 * cons && (cons == 1 || cons == 2));
	CU_ASSERT_FATAL(RP == 16 || RP == 32 || RP == 48 || RP == 64 || RP == 128);
	/* a w2 unit: lcm(RP, 64) columns, the slices of jp input blocks */
	for (gd = RP, k = 64; k;) {
		q = gd % k;
		gd = k;
		k = q;
	}
	ucol = RP / gd * 64;
	jp = ucol / RP;
	CU_ASSERT_FATAL(MB == 64 || MB == 128 || MB == 256);
	CU_ASSERT_FATAL(ring >= 2 && kch <= ring && mm % (b * MB) == 0 && b % jp == 0);
	nct = mm / b / MB;
	/* the column tiles a block is split into, a define of the program */
	CU_ASSERT_EQUAL(emu_define(p, "NCT"), nct);
	/* several units of several slices: two buffers */
	CU_ASSERT(jp == 1 || b == jp || ring <= 6);
	/* column tiles: one CTA per output block and column tile */
	CU_ASSERT(nct == 1 || (epi < 2 && ci * ct == 1));
	CU_ASSERT(blk == 0 || blk == 1);
	CU_ASSERT(epi == 0 || (epi == 1 && blk == 1) || ((epi == 2 || epi == 3) && blk == 0));
	/* EPILOGUE 2: 8-CTA clusters of blocks i0 .. i0+7, no multicast;
	 * EPILOGUE 3: 8-block groups, no clusters */
	CU_ASSERT(epi < 2 || (b % 8 == 0 && cl == 1));
	if (epi == 3) {
		/* y is the staged y2 (scratch), then y itself, then the arrival
		 * counters: scratch (zeroed by the worker), i32, one per token
		 * tile (the grid's) */
		yi = emu_ab(l, 8);
		arrived = emu_ab(l, 9);
		CU_ASSERT_FATAL(y >= 0 && y < m->nb && yi >= 0 && yi < m->nb &&
				arrived >= 0 && arrived < m->nb && y != yi);
		CU_ASSERT_EQUAL(m->bufs[y].role, KT_BUF_SCRATCH);
		CU_ASSERT_STRING_EQUAL(m->bufs[y].name, "y2");
		CU_ASSERT_EQUAL(m->bufs[yi].role, KT_BUF_OUTPUT);
		CU_ASSERT_EQUAL(m->bufs[arrived].role, KT_BUF_SCRATCH);
		CU_ASSERT_EQUAL(m->bufs[arrived].dtype, KT_I32);
		CU_ASSERT_EQUAL((long long)m->bufs[arrived].elems, (long long)l->grid[0] / b);
	}
	/* clusters pair output blocks i, i+1 (CLUSTER_I) and token tiles
	 * (CLUSTER_T; the tiles padded to whole pairs) */
	CU_ASSERT_FATAL((ci == 1 || ci == 2) && (ct == 1 || ct == 2) && b % ci == 0);
	CU_ASSERT_EQUAL((long long)l->grid[0], (N + BM * ct - 1) / (BM * ct) * ct * b * nct);
	CU_ASSERT_EQUAL(l->grid[0] % cl, 0);
	CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
	/* RING 7, 8, or a single unit (all b slices): one w2 buffer */
	CU_ASSERT_EQUAL(emu_define(p, "W2BUF"), ring > 6 || b == jp ? 1 : 2);
	CU_ASSERT_EQUAL(l->smem, (unsigned)(1024 + ring * (BM + RP) * 128 +
					    emu_define(p, "W2BUF") * ucol * MB * 2 + 256));
	/* each CTA of a cluster loads its part of the rows it shares */
	map_ok(m, tx, 1, (int)(BM / ci));
	map_ok(m, tw1, (int)(RP / ct), 1);
	map_ok(m, tw2, (int)(MB / ct), 1);
	G = malloc(sizeof(double) * (size_t)(BM * RP));
	acc = malloc(sizeof(double) * (size_t)(BM * MB));
	CU_ASSERT_PTR_NOT_NULL_FATAL(G);
	CU_ASSERT_PTR_NOT_NULL_FATAL(acc);
	for (cta = 0; cta < (long long)l->grid[0]; cta++) {
		/* the kernel's mapping: rank ri + CLUSTER_I * rt, pairs of blocks
		 * fastest */
		long long rank = cta % cl, cid = cta / cl / nct, ri = rank % ci, rt = rank / ci;
		long long i = (cid % (b / ci)) * ci + ri, t0 = ((cid / (b / ci)) * ct + rt) * BM;

		c0 = cta / cl % nct * MB;

		memset(acc, 0, sizeof(double) * (size_t)(BM * MB));
		for (j = 0; j < b; j++) {
			memset(G, 0, sizeof(double) * (size_t)(BM * RP));
			for (kc = 0; kc < kch; kc++)
				for (r = 0; r < BM; r++)
					for (q = 0; q < RP; q++) {
						double g = 0;

						for (k = 0; k < 64; k++)
							g += emu_tma_ld(m, tx, kc * 64 + k, j, t0 + r) *
							     emu_tma_ld(m, tw1, kc * 64 + k, i * RP + q, j);
						G[r * RP + q] += g;
					}
			if (m->round)	/* the A fragments are bf16 */
				for (r = 0; r < BM * RP; r++)
					G[r] = kt_bf16_to_f32(kt_f32_to_bf16((float)G[r]));
			/* the kernel's k16 steps: step kk of slice j is step ks =
			 * (j % jp) * RP/16 + kk of w2 unit j / jp, whose panels
			 * start at column (j / jp) * ucol */
			for (pp = 0; pp < RP / 16; pp++) {
				long long ks = (j % jp) * (RP / 16) + pp;
				long long col = (j / jp) * ucol + (ks >> 2) * 64 + (ks & 3) * 16;

				for (r = 0; r < BM; r++)
					for (sx = 0; sx < MB; sx++) {
						double a = 0;

						for (k = 0; k < 16; k++)
							a += G[r * RP + pp * 16 + k] *
							     emu_tma_ld(m, tw2, col + k, c0 + sx, i);
						acc[r * MB + sx] += a;
					}
			}
		}
		for (r = 0; r < BM && t0 + r < N; r++)
			for (sx = 0; sx < MB; sx++)
				emu_st(m, y, (t0 + r) * mm + (blk || epi == 3 ? i * (mm / b) + c0 + sx
									   : (c0 + sx) * b + i),
				       acc[r * MB + sx]);
		if (epi == 3) {
			/* the CTA's arrival on its tile's counter (bounds) */
			(void)emu_ld(m, arrived, t0 / BM);
			if (emu_monarch_e3_nowait)
				emu_fused_interleave(m, y, yi, N, mm, b, BM, MB, i, t0);
		}
	}
	/* every CTA has arrived: the waits return, the interleave runs */
	for (cta = 0; epi == 3 && !emu_monarch_e3_nowait && cta < (long long)l->grid[0]; cta++)
		emu_fused_interleave(m, y, yi, N, mm, b, BM, MB, cta % b, cta / b * BM);
	free(G);
	free(acc);
}

int emu_monarch(struct emu *m, const struct kt_launch *l)
{
	static const struct {
		const char *name;
		void (*fn)(struct emu *, const struct kt_launch *);
	} kernels[] = {
		{"monarch_perm_mid", emu_perm_mid},
		{"monarch_relayout_w1", emu_relayout_w1},
		{"monarch_gather_chunks", emu_gather_chunks},
		{"monarch_perm_out", emu_perm_out},
		{"monarch_perm_rows", emu_perm_rows},
		{"monarch_perm_x8", emu_perm_x8},
		{"monarch_ref_z", emu_ref_z},
		{"monarch_ref_y", emu_ref_y},
		{"fused_monarch_ws", emu_fused},	/* monarch_fused.cu */
	};
	size_t i;
	int k;

	/* monarch's maps: increasing strides (what the driver's documentation
	 * describes) */
	if (strcmp(l->kernel, "gemm_tn_ws") == 0)
		for (k = 0; k < 2 && k < l->nargs && l->args[k].kind == KT_ARG_TMAP; k++) {
			const struct kt_tmap *t = &l->args[k].tmap;

			CU_ASSERT(t->strides[2] >= t->strides[1] * (t->dims[1] > 1 ? 1 : 0));
		}
	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (strcmp(kernels[i].name, l->kernel) == 0) {
			kernels[i].fn(m, l);
			return 1;
		}
	return 0;
}
