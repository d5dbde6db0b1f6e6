/*
 * plan_emu.c -- the host emulator of launch plans and the NVRTC compile-job
 * list the family test programs share (see plan_emu.h).
 */
#include "plan_emu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm_plan.h"
#include "testutil.h"
#include "tuner/worker_int.h"	/* measure_tmap_check: the map the worker encodes */

float emu_ld(struct emu *m, int buf, long long i)
{
	if (buf < 0 || buf >= m->nb || i < 0 || (size_t)i >= m->bufs[buf].elems) {
		m->oob++;
		return 0;
	}
	return m->d[buf][i];
}

void emu_discard(struct emu *m, int buf, long long i)
{
	long long k;

	CU_ASSERT(i % 64 == 0);
	CU_ASSERT(buf >= 0 && buf < m->nb && m->bufs[buf].dtype == KT_BF16);
	if (buf < 0 || buf >= m->nb || i < 0 || (size_t)(i + 64) > m->bufs[buf].elems) {
		m->oob++;
		return;
	}
	for (k = 0; k < 64; k++)
		m->d[buf][i + k] = NAN;
}

void emu_st(struct emu *m, int buf, long long i, double v)
{
	if (buf < 0 || buf >= m->nb || i < 0 || (size_t)i >= m->bufs[buf].elems) {
		m->oob++;
		return;
	}
	if (m->round && m->bufs[buf].dtype == KT_BF16)
		m->d[buf][i] = kt_bf16_to_f32(kt_f32_to_bf16((float)v));
	else
		m->d[buf][i] = (float)v;
}

long long emu_ai(const struct kt_launch *l, int k)
{
	CU_ASSERT(k < l->nargs && l->args[k].kind != KT_ARG_BUF);
	return k < l->nargs ? l->args[k].i : 0;
}

int emu_ab(const struct kt_launch *l, int k)
{
	CU_ASSERT(k < l->nargs && l->args[k].kind == KT_ARG_BUF);
	return k < l->nargs ? l->args[k].buf : -1;
}

long emu_define(const struct kt_program *p, const char *name)
{
	size_t len = strlen(name);
	int i;

	for (i = 0; i < p->ndefines; i++)
		if (strncmp(p->defines[i], name, len) == 0 && p->defines[i][len] == '=')
			return atol(p->defines[i] + len + 1);
	return -1;
}

/* Where gemm.cu puts output column c within its row: with -DCOLGRP,
 * groups of COLGRP columns COLGSTRIDE apart; with -DCOLSTEP, c * COLSTEP. */
static long long emu_col(const struct kt_program *p, long long c)
{
	long g = emu_define(p, "COLGRP"), k = emu_define(p, "COLSTEP");

	if (k > 1)
		return c * k;
	return g <= 0 ? c : c / g * emu_define(p, "COLGSTRIDE") + c % g;
}

/* what gemm.cu's #errors allow with COLGRP and COLSTEP */
static void emu_col_ok(const struct kt_program *p)
{
	long g = emu_define(p, "COLGRP");

	/* a column step: gemm_tn, without groups or split-K */
	if (emu_define(p, "COLSTEP") > 1)
		CU_ASSERT(g <= 0 && emu_define(p, "WS") != 1 && emu_define(p, "SPLIT_K") <= 1);
	/* and with -DWS=1 the staged epilogue only */
	if (g > 0)
		CU_ASSERT(g % 8 == 0 && emu_define(p, "COLGSTRIDE") > 0 &&
			  emu_define(p, "SPLIT_K") <= 1 &&
			  (emu_define(p, "WS") != 1 || emu_define(p, "EPILOGUE") == 1));
}

/* gemm_tn(A, B, C, M, N, K, lda, ldb, ldc, sA, sB, sC): C = A B^T per
 * batch blockIdx.z; with -DSPLIT_K > 1 (batch 1) slice blockIdx.y of K,
 * whole BLOCK_K tiles of ceil(K / (BLOCK_K SPLIT_K)) each, into slice
 * blockIdx.y of the fp32 workspace C (M x ldc each). */
static void emu_gemm(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int A = emu_ab(l, 0), B = emu_ab(l, 1), C = emu_ab(l, 2);
	long long M = emu_ai(l, 3), N = emu_ai(l, 4), K = emu_ai(l, 5), lda = emu_ai(l, 6);
	long long ldb = emu_ai(l, 7), ldc = emu_ai(l, 8), sA = emu_ai(l, 9), sB = emu_ai(l, 10);
	long long sC = emu_ai(l, 11);
	long bm = emu_define(p, "BLOCK_M"), bn = emu_define(p, "BLOCK_N");
	long bk = emu_define(p, "BLOCK_K"), sk = emu_define(p, "SPLIT_K");
	long long z, t, c, k, sl, kc;

	CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
	CU_ASSERT_EQUAL(l->nargs, 12);
	/* the launch matches its program's tile and split */
	CU_ASSERT(bm > 0 && bn > 0 && bk > 0);
	if (bm > 0 && bn > 0)
		CU_ASSERT_EQUAL((long long)l->grid[0], ((M + bm - 1) / bm) * ((N + bn - 1) / bn));
	if (sk < 1)
		sk = 1;
	CU_ASSERT_EQUAL((long long)l->grid[1], sk);
	CU_ASSERT(sk == 1 || (l->grid[2] == 1 && m->bufs[C].dtype == KT_F32));
	kc = (K + bk * sk - 1) / (bk * sk) * bk;
	/* gemm.cu's 16-byte rules (C's 4-byte pairs: none with a column
	 * step, whose stores are 2-byte) */
	CU_ASSERT(K % 8 == 0 && N % 8 == 0 && lda % 8 == 0 && ldb % 8 == 0);
	CU_ASSERT(sA % 8 == 0 && sB % 8 == 0);
	if (emu_define(p, "COLSTEP") <= 1)
		CU_ASSERT(ldc % 8 == 0 && sC % 8 == 0);
	CU_ASSERT(l->smem > 0);
	emu_col_ok(p);
	for (z = 0; z < (long long)l->grid[2]; z++)
		for (sl = 0; sl < sk; sl++)
			for (t = 0; t < M; t++)
				for (c = 0; c < N; c++) {
					double acc = 0;

					for (k = sl * kc; k < K && k < (sl + 1) * kc; k++)
						acc += (double)emu_ld(m, A, z * sA + t * lda + k) *
						       (double)emu_ld(m, B, z * sB + c * ldb + k);
					if (sk > 1)
						emu_st(m, C, sl * M * ldc + t * ldc + c, acc);
					else
						emu_st(m, C, z * sC + t * ldc + emu_col(p, c), acc);
				}
}

double emu_tma_ld(struct emu *m, const struct kt_arg *a, long long c0, long long c1,
		  long long c2)
{
	const struct kt_tmap *t = &a->tmap;

	if (c0 < 0 || c0 >= t->dims[0] || c1 < 0 || c1 >= t->dims[1] || c2 < 0 ||
	    c2 >= t->dims[2])
		return 0;
	return emu_ld(m, a->buf, c0 + c1 * t->strides[1] + c2 * t->strides[2]);
}

/* Element (row, k) of batch z as gemm_tn_ws loads it: map (k, rows,
 * batch) with the batch coordinate z * zm, or (k, batch, rows) for zm 2. */
static double ws_elem(struct emu *m, const struct kt_arg *a, long long zm, long long z,
		      long long row, long long k)
{
	return zm == 2 ? emu_tma_ld(m, a, k, z, row) : emu_tma_ld(m, a, k, row, z * zm);
}

/* The map as the worker will encode it, with the tile's box (rows_box
 * along the rows dimension, one batch). */
static void ws_map_ok(struct emu *m, const struct kt_arg *a, long long zm, long rows_box)
{
	const struct kt_tmap *t = &a->tmap;
	int rd = zm == 2 ? 2 : 1, bd = zm == 2 ? 1 : 2;
	long long last;
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(a->kind, KT_ARG_TMAP);
	CU_ASSERT_FATAL(a->buf >= 0 && a->buf < m->nb);
	CU_ASSERT(zm == 0 || zm == 1 || zm == 2);
	CU_ASSERT_EQUAL(measure_tmap_check(t, &m->bufs[a->buf], why, sizeof(why)), 0);
	if (why[0])
		fprintf(stderr, "\n  tensor map: %s\n", why);
	CU_ASSERT_EQUAL(t->rank, 3);
	CU_ASSERT_EQUAL(t->box[0], 64);
	CU_ASSERT_EQUAL(t->swizzle, 128);
	CU_ASSERT_EQUAL(t->box[rd], rows_box);
	CU_ASSERT_EQUAL(t->box[bd], 1);
	/* 16-byte strides, rows no shorter than K (blast's batch stride is
	 * below its row stride: no order between them), the last element
	 * inside the buffer */
	CU_ASSERT(t->strides[1] >= t->dims[0]);
	CU_ASSERT(t->strides[1] % 8 == 0 && t->strides[2] % 8 == 0);
	last = (t->dims[2] - 1) * t->strides[2] + (t->dims[1] - 1) * t->strides[1] + t->dims[0] - 1;
	CU_ASSERT(last >= 0 && (size_t)last < m->bufs[a->buf].elems);
}

void emu_map_extent(const struct kt_arg *a, long long zm, long long rows, long long K,
		    long long nz)
{
	const struct kt_tmap *t = &a->tmap;
	int rd = zm == 2 ? 2 : 1, bd = zm == 2 ? 1 : 2;

	CU_ASSERT_EQUAL_FATAL(a->kind, KT_ARG_TMAP);
	CU_ASSERT_EQUAL(t->dims[0], K);
	CU_ASSERT_EQUAL(t->dims[rd], rows);
	CU_ASSERT((nz - 1) * (zm == 2 ? 1 : zm) < t->dims[bd]);
}

/* The tile origin of tile pid of one batch, as gemm.cu's ws_tile_at (and
 * ws_tile_coords without clusters): GROUP_M rows of tiles walked
 * column-major, the last group shorter. */
static void ws_tile_at(long long pid, long long M, long long N, long bm, long bn, long gm,
		       long long *m0, long long *n0)
{
	long long tm = (M + bm - 1) / bm, tn = (N + bn - 1) / bn;

	if (gm <= 1) {
		*m0 = pid / tn * bm;
		*n0 = pid % tn * bn;
	} else {
		long long in_group = gm * tn, first = pid / in_group * gm;
		long long gsize = tm - first < gm ? tm - first : gm, local = pid % in_group;

		*m0 = (first + local % gsize) * bm;
		*n0 = local / gsize * bn;
	}
}

/* gemm_tn_ws with -DPERSISTENT=1 (one more argument, the batch count):
 * CTA b of grid (P, 1, 1) computes work items w = b, b + P, ... below
 * tiles * batch, w / tiles the batch, w % tiles the tile; each tile's
 * elements (masked at the M and N edges) from k-tiles of 64 through the
 * maps. Work items the walk never reaches leave C as it was (NaN where
 * nothing else wrote); one reached twice is an assertion. */
static void emu_gemm_ws_walk(struct emu *m, const struct kt_launch *l, long bm, long bn, long gm,
			     int C, long long M, long long N, long long K, long long ldc,
			     long long sC, long long zA, long long zB, long long nb)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	const struct kt_arg *tA = &l->args[0], *tB = &l->args[1];
	long long tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn), items = tiles * nb;
	long long P = l->grid[0], kend = (K + 63) / 64 * 64, b, w, t, c, k;
	unsigned char *seen;

	CU_ASSERT_EQUAL(l->grid[1], 1);
	CU_ASSERT_EQUAL(l->grid[2], 1);	/* the batch is walked, not gridDim.z */
	CU_ASSERT(nb >= 1 && P >= 1 && P <= items);	/* no CTA that only starts and leaves */
	seen = calloc((size_t)(items > 0 ? items : 1), 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(seen);
	for (b = 0; b < P; b++)
		for (w = b; w < items; w += P) {
			long long z = w / tiles, m0, n0;

			CU_ASSERT_EQUAL(seen[w], 0);
			seen[w]++;
			ws_tile_at(w - z * tiles, M, N, bm, bn, gm, &m0, &n0);
			for (t = m0; t < m0 + bm && t < M; t++)
				for (c = n0; c < n0 + bn && c < N; c++) {
					double acc = 0;

					for (k = 0; k < kend; k++)
						acc += ws_elem(m, tA, zA, z, t, k) *
						       ws_elem(m, tB, zB, z, c, k);
					emu_st(m, C, z * sC + t * ldc + emu_col(p, c), acc);
				}
		}
	free(seen);
}

static void emu_gemm_ws_persistent(struct emu *m, const struct kt_launch *l, long bm, long bn,
				   long gm)
{
	emu_gemm_ws_walk(m, l, bm, bn, gm, emu_ab(l, 2), emu_ai(l, 3), emu_ai(l, 4), emu_ai(l, 5),
			 emu_ai(l, 6), emu_ai(l, 7), emu_ai(l, 8), emu_ai(l, 9), emu_ai(l, 10));
}

/* gemm_tn_ws with -DPINGPONG=1, (tA, tB, tC, M, N, K, zA, zB, batch): the
 * persistent walk (two consumer warpgroups share a CTA's items; which one
 * computes an item changes nothing here), C written through tC, a map (N,
 * M, batch) whose box is one 64-column panel of a bm-row tile and whose
 * strides are ldc and sC. */
static void emu_gemm_ws_pingpong(struct emu *m, const struct kt_launch *l, long bm, long bn,
				 long gm)
{
	const struct kt_arg *tC = &l->args[2];
	const struct kt_tmap *c = &tC->tmap;
	long long M = emu_ai(l, 3), N = emu_ai(l, 4), nb = emu_ai(l, 8);
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(tC->kind, KT_ARG_TMAP);
	CU_ASSERT_FATAL(tC->buf >= 0 && tC->buf < m->nb);
	CU_ASSERT_EQUAL(measure_tmap_check(c, &m->bufs[tC->buf], why, sizeof(why)), 0);
	if (why[0])
		fprintf(stderr, "\n  tensor map of C: %s\n", why);
	CU_ASSERT_EQUAL(c->rank, 3);
	CU_ASSERT(c->dims[0] == N && c->dims[1] == M && c->dims[2] == nb);
	CU_ASSERT(c->box[0] == 64 && c->box[1] == bm && c->box[2] == 1);
	CU_ASSERT_EQUAL(c->swizzle, 128);
	CU_ASSERT(c->strides[1] >= N && c->strides[1] % 8 == 0 && c->strides[2] % 8 == 0);
	CU_ASSERT((size_t)((nb - 1) * c->strides[2] + (M - 1) * c->strides[1] + N - 1) <
		  m->bufs[tC->buf].elems);
	emu_gemm_ws_walk(m, l, bm, bn, gm, tC->buf, M, N, emu_ai(l, 5), c->strides[1],
			 c->strides[2], emu_ai(l, 6), emu_ai(l, 7), nb);
}

/* gemm_tn_ws(tA, tB, C, M, N, K, ldc, sC, zA, zB): k-tiles of 64 through
 * the maps (past K the map's zero fill); SPLIT_K: slice blockIdx.y of
 * whole k-tiles into fp32 workspace slices; PERSISTENT: the walk above. */
static void emu_gemm_ws(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	const struct kt_arg *tA = &l->args[0], *tB = &l->args[1];
	int C;
	long long M, N, K, ldc, sC, zA, zB;
	long bm = emu_define(p, "BLOCK_M"), bn = emu_define(p, "BLOCK_N");
	long cons = emu_define(p, "CONSUMERS"), sk = emu_define(p, "SPLIT_K");
	long long z, t, c, k, sl, kc, k0, kend;

	if (emu_define(p, "PINGPONG") == 1) {	/* its own argument list */
		CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
		CU_ASSERT_EQUAL(emu_define(p, "WS"), 1);
		CU_ASSERT(emu_define(p, "COLGRP") == -1 && emu_define(p, "SPLIT_K") <= 1);
		CU_ASSERT_FATAL(bm > 0 && bn > 0);
		CU_ASSERT_EQUAL_FATAL(l->nargs, 9);
		CU_ASSERT(cons == 2 && emu_define(p, "EPILOGUE") == 1);
		CU_ASSERT(emu_define(p, "CLUSTER_M") <= 1 && emu_define(p, "PERSISTENT") != 1);
		CU_ASSERT_EQUAL(l->block[0], 384u);
		CU_ASSERT(l->grid[1] == 1 && l->grid[2] == 1);
		ws_map_ok(m, tA, emu_ai(l, 6), bm);
		ws_map_ok(m, tB, emu_ai(l, 7), bn);
		CU_ASSERT(emu_ai(l, 5) % 8 == 0 && emu_ai(l, 4) % 8 == 0);
		emu_gemm_ws_pingpong(m, l, bm, bn, emu_define(p, "GROUP_M"));
		return;
	}
	C = emu_ab(l, 2);
	M = emu_ai(l, 3);
	N = emu_ai(l, 4);
	K = emu_ai(l, 5);
	ldc = emu_ai(l, 6);
	sC = emu_ai(l, 7);
	zA = emu_ai(l, 8);
	zB = emu_ai(l, 9);
	CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
	CU_ASSERT_EQUAL(emu_define(p, "WS"), 1);
	emu_col_ok(p);
	CU_ASSERT_FATAL(bm > 0 && bn > 0 && (cons == 1 || cons == 2));
	if (sk < 1)
		sk = 1;
	/* L2_HINT: load and store policies, nothing the math sees */
	CU_ASSERT(emu_define(p, "L2_HINT") == -1 ||
		  (emu_define(p, "L2_HINT") > 0 && emu_define(p, "L2_HINT") < 8));
	if (emu_define(p, "PERSISTENT") == 1) {
		CU_ASSERT_EQUAL_FATAL(l->nargs, 11);
		CU_ASSERT_EQUAL(sk, 1);
		CU_ASSERT(emu_define(p, "CLUSTER_M") <= 1);
		CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
		ws_map_ok(m, tA, zA, bm);
		ws_map_ok(m, tB, zB, bn);
		CU_ASSERT(K % 8 == 0 && N % 8 == 0 && ldc % 8 == 0 && sC % 8 == 0);
		emu_gemm_ws_persistent(m, l, bm, bn, emu_define(p, "GROUP_M"));
		return;
	}
	CU_ASSERT_EQUAL_FATAL(l->nargs, 10);
	CU_ASSERT_EQUAL((long long)l->grid[0], ((M + bm - 1) / bm) * ((N + bn - 1) / bn));
	CU_ASSERT_EQUAL((long long)l->grid[1], sk);
	if (emu_define(p, "SPLIT_CLUSTER") == 1) {
		/* the two slices reduce in their (1, 2, 1) cluster: C is the
		 * bf16 output of the whole K */
		CU_ASSERT_EQUAL(sk, 2);
		CU_ASSERT(emu_define(p, "CLUSTER_M") <= 1 && l->grid[2] == 1);
		sk = 1;
	}
	CU_ASSERT(sk == 1 || l->grid[2] == 1);
	CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
	ws_map_ok(m, tA, zA, bm);
	ws_map_ok(m, tB, zB, bn);
	/* 16-byte rows, the staged epilogue's 16-byte stores */
	CU_ASSERT(K % 8 == 0 && N % 8 == 0 && ldc % 8 == 0 && sC % 8 == 0);
	kc = sk > 1 ? (K + 64 * sk - 1) / (64 * sk) * 64 : K;
	for (z = 0; z < (long long)l->grid[2]; z++)
		for (sl = 0; sl < sk; sl++) {
			k0 = sl * kc;
			kend = k0 + ((K - k0 < kc ? K - k0 : kc) + 63) / 64 * 64;
			for (t = 0; t < M; t++)
				for (c = 0; c < N; c++) {
					double acc = 0;

					for (k = k0; k < kend; k++)
						acc += ws_elem(m, tA, zA, z, t, k) *
						       ws_elem(m, tB, zB, z, c, k);
					if (sk > 1)
						emu_st(m, C, sl * M * ldc + t * ldc + c, acc);
					else
						emu_st(m, C, z * sC + t * ldc + emu_col(p, c), acc);
				}
		}
}

/* splitk_reduce(W, C, M, N, ldc, splits): C = the sum of the slices. */
static void emu_splitk_reduce(struct emu *m, const struct kt_launch *l)
{
	int W = emu_ab(l, 0), C = emu_ab(l, 1);
	long long M = emu_ai(l, 2), N = emu_ai(l, 3), ldc = emu_ai(l, 4), splits = emu_ai(l, 5);
	long long t, c, s;

	CU_ASSERT(N % 8 == 0);
	CU_ASSERT((long long)l->grid[0] * 256 * 4 >= M * N);
	for (t = 0; t < M; t++)
		for (c = 0; c < N; c++) {
			double acc = 0;

			for (s = 0; s < splits; s++)
				acc += emu_ld(m, W, s * M * N + t * N + c);
			emu_st(m, C, t * ldc + c, acc);
		}
}

/* lowrank_fused(X, V, U, Y, M, K, N), -DRANK: CTA (x, y) computes the
 * BLOCK_M x RANK tile z = X V^T of its tokens (bf16 in shared memory), then
 * y = z U^T for its share of the BLOCK_N output tiles (ceil(tiles /
 * gridDim.y) each, in order). */
static void emu_lowrank_fused(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int X = emu_ab(l, 0), V = emu_ab(l, 1), U = emu_ab(l, 2), Y = emu_ab(l, 3);
	long long M = emu_ai(l, 4), K = emu_ai(l, 5), N = emu_ai(l, 6);
	long long R = emu_define(p, "RANK"), bm = emu_define(p, "BLOCK_M"), bn = emu_define(p, "BLOCK_N");
	long long tn, per, bx, by, t, c, r, k, nt;
	double *z;

	CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
	CU_ASSERT_EQUAL(l->nargs, 7);
	CU_ASSERT_FATAL(R > 0 && bm > 0 && bn > 0);
	CU_ASSERT(K % 8 == 0 && N % 8 == 0 && R % 16 == 0);
	tn = (N + bn - 1) / bn;
	per = (tn + l->grid[1] - 1) / l->grid[1];
	z = malloc((size_t)(bm * R) * sizeof(double));
	CU_ASSERT_PTR_NOT_NULL_FATAL(z);
	for (bx = 0; bx < (long long)l->grid[0]; bx++)
		for (by = 0; by < (long long)l->grid[1]; by++) {
			for (t = 0; t < bm; t++)
				for (r = 0; r < R; r++) {
					double acc = 0;

					for (k = 0; bx * bm + t < M && k < K; k++)
						acc += (double)emu_ld(m, X, (bx * bm + t) * K + k) *
						       (double)emu_ld(m, V, r * K + k);
					z[t * R + r] = m->round ? kt_bf16_to_f32(kt_f32_to_bf16((float)acc))
								: acc;
				}
			for (nt = by * per; nt < tn && nt < (by + 1) * per; nt++)
				for (t = 0; t < bm && bx * bm + t < M; t++)
					for (c = nt * bn; c < N && c < (nt + 1) * bn; c++) {
						double acc = 0;

						for (r = 0; r < R; r++)
							acc += z[t * R + r] * (double)emu_ld(m, U, c * R + r);
						emu_st(m, Y, (bx * bm + t) * N + c, acc);
					}
		}
	free(z);
}

/* ref.cu's ref_gemm_tn(A, a_f32, B, C, c_f32, M, N, K): C = A B^T, one
 * thread per element of C. */
static void emu_ref_gemm(struct emu *m, const struct kt_launch *l)
{
	int A = emu_ab(l, 0), B = emu_ab(l, 2), C = emu_ab(l, 3);
	long long M = emu_ai(l, 5), N = emu_ai(l, 6), K = emu_ai(l, 7), t, c, k;

	CU_ASSERT_EQUAL(l->nargs, 8);
	CU_ASSERT_FATAL(A >= 0 && A < m->nb && C >= 0 && C < m->nb);
	CU_ASSERT_EQUAL(emu_ai(l, 1), m->bufs[A].dtype == KT_F32);
	CU_ASSERT_EQUAL(emu_ai(l, 4), m->bufs[C].dtype == KT_F32);
	CU_ASSERT((long long)l->grid[0] * l->block[0] >= N);
	CU_ASSERT((long long)l->grid[1] * l->block[1] >= M);
	for (t = 0; t < M; t++)
		for (c = 0; c < N; c++) {
			double acc = 0;

			for (k = 0; k < K; k++)
				acc += (double)emu_ld(m, A, t * K + k) * (double)emu_ld(m, B, c * K + k);
			emu_st(m, C, t * N + c, acc);
		}
}

void emu_map_ok(struct emu *m, const struct kt_arg *a, int b0, int b1, int b2, int swz)
{
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(a->kind, KT_ARG_TMAP);
	CU_ASSERT_FATAL(a->buf >= 0 && a->buf < m->nb);
	CU_ASSERT_EQUAL(measure_tmap_check(&a->tmap, &m->bufs[a->buf], why, sizeof(why)), 0);
	if (why[0])
		fprintf(stderr, "\n  tensor map: %s\n", why);
	CU_ASSERT_EQUAL(a->tmap.rank, 3);
	CU_ASSERT_EQUAL(a->tmap.box[0], b0);
	CU_ASSERT_EQUAL(a->tmap.box[1], b1);
	CU_ASSERT_EQUAL(a->tmap.box[2], b2);
	CU_ASSERT_EQUAL(a->tmap.swizzle, swz);
}

void emu_launch(struct emu *m, const struct kt_launch *l)
{
	static const struct {
		const char *name;
		void (*fn)(struct emu *, const struct kt_launch *);
	} kernels[] = {
		{"gemm_tn", emu_gemm},
		{"gemm_tn_ws", emu_gemm_ws},
		{"splitk_reduce", emu_splitk_reduce},
		{"lowrank_fused", emu_lowrank_fused},
		{"ref_gemm_tn", emu_ref_gemm},
	};
	size_t i, n = m->tpl ? strlen(m->tpl) : 0;

	CU_ASSERT_FATAL(l->program >= 0 && l->program < m->plan->nprograms);
	CU_ASSERT(l->grid[0] >= 1 && l->grid[1] >= 1 && l->grid[2] >= 1);
	CU_ASSERT(l->block[0] >= 32 && l->block[0] * l->block[1] * l->block[2] <= 1024);
	if (n && strncmp(l->kernel, m->tpl, n) == 0 && l->kernel[n] == '_')
		CU_ASSERT_STRING_EQUAL(m->plan->programs[l->program].tpl, m->tpl);
	if (m->family && m->family(m, l))
		return;
	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (strcmp(kernels[i].name, l->kernel) == 0) {
			kernels[i].fn(m, l);
			return;
		}
	m->unknown++;
}

float *emu_run(const struct kt_family *f, const struct kt_shape *s, const struct kt_config *c,
	       const struct kt_plan *plan, uint16_t *const *in, int nin, int y, int round,
	       const char *tpl, emu_family_fn family, long *oob)
{
	struct emu m;
	float *out;
	size_t e;
	int i;

	memset(&m, 0, sizeof(m));
	m.plan = plan;
	m.round = round;
	m.tpl = tpl;
	m.family = family;
	m.nb = f->buffers(f, s, c, m.bufs);
	CU_ASSERT_FATAL(m.nb >= nin && m.nb <= KT_MAX_BUFS && y >= 0 && y < m.nb);
	for (i = 0; i < m.nb; i++) {
		m.d[i] = malloc(m.bufs[i].elems * sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(m.d[i]);
		for (e = 0; e < m.bufs[i].elems; e++)
			m.d[i][e] = i < nin && in[i] ? kt_bf16_to_f32(in[i][e]) : NAN;
	}
	for (i = 0; i < plan->nprep; i++)
		emu_launch(&m, &plan->prep[i]);
	for (i = 0; i < plan->nlaunch; i++)
		emu_launch(&m, &plan->launch[i]);
	CU_ASSERT_EQUAL(m.unknown, 0);
	*oob = m.oob;
	out = m.d[y];
	m.d[y] = NULL;
	for (i = 0; i < m.nb; i++)
		free(m.d[i]);
	return out;
}

void emu_run_all(const struct kt_plan *plan, const struct kt_buf *bufs, int nb,
		 const float *const *in, int nin, const int *run, int round, const char *tpl,
		 emu_family_fn family, float **out, long *oob)
{
	struct emu m;
	size_t e;
	int i;

	memset(&m, 0, sizeof(m));
	m.plan = plan;
	m.round = round;
	m.tpl = tpl;
	m.family = family;
	m.nb = nb;
	CU_ASSERT_FATAL(nb >= nin && nb <= KT_MAX_BUFS);
	memcpy(m.bufs, bufs, (size_t)nb * sizeof(*bufs));
	for (i = 0; i < m.nb; i++) {
		m.d[i] = malloc((m.bufs[i].elems ? m.bufs[i].elems : 1) * sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(m.d[i]);
		for (e = 0; e < m.bufs[i].elems; e++)
			m.d[i][e] = i < nin && in[i] ? in[i][e] : NAN;
	}
	for (i = 0; i < plan->nprep + plan->nlaunch; i++)
		if (!run || run[i])
			emu_launch(&m, i < plan->nprep ? &plan->prep[i] : &plan->launch[i - plan->nprep]);
	CU_ASSERT_EQUAL(m.unknown, 0);
	*oob = m.oob;
	for (i = 0; i < m.nb; i++)
		out[i] = m.d[i];
}

/* ---- jagged block attention (templates/blockattn_*.cu) ----
 *
 * blockattn_blocks fills the block list from the offsets (with BOUND: at
 * most nbound entries, then their count); the attention kernels walk their
 * CTAs' items as the templates do (CTA c: items c * cta_step + i *
 * item_step, i < nper, below nitems -- with BOUND below the count times H)
 * and compute each (block, head) in double: rotate on load, S, softmax, O;
 * the backward's dV, dP, Di inline, dS, dQ, dK, the conjugate rotation. An
 * item run twice or a block list entry out of order fails. The backward's
 * chunked kernels (blockattn_bwd_dq, blockattn_bwd_dkv; ws at block 256
 * plans the same names, arguments and grid) run a CTA per
 * (item, pass) of BLK / QP rows: dq writes the rows' statistics into the
 * scratch past the block list and dQ, dkv reads them back for dK, dV. */

/* Rows [0, n) of q, k, v (and do) of block t0, head h, rotated where rope
 * says, into X (a n x d array each, in that order). */
static void ba_rows(struct emu *m, const struct kt_launch *l, int bwd, long long t0, long long n,
		    long long h, long long H, long long d, int rope, double *X)
{
	int tab = l->args[bwd ? 5 : 4].kind == KT_ARG_BUF ? l->args[bwd ? 5 : 4].buf : -1;
	long long i, c;

	for (i = 0; i < n; i++)
		for (int a = 0; a < (bwd ? 4 : 3); a++) {
			int buf = emu_ab(l, a);
			double *x = X + (a * n + i) * d;

			for (c = 0; c < d; c++)
				x[c] = emu_ld(m, buf, ((t0 + i) * H + h) * d + c);
			if (rope && tab >= 0 && (a < 2 || (a == 2 && rope == 2)))
				for (c = 0; c < d; c += 2) {
					double cs = emu_ld(m, tab, (t0 + i) * d + c);
					double sn = emu_ld(m, tab, (t0 + i) * d + c + 1);
					double x0 = x[c], x1 = x[c + 1];

					x[c] = x0 * cs - x1 * sn;
					x[c + 1] = x0 * sn + x1 * cs;
				}
		}
}

/* Stores g (d values) to row t of out, conjugate-rotated when rot. */
static void ba_put(struct emu *m, const struct kt_launch *l, int out, long long t, long long h,
		   long long H, long long d, int rot, double *g)
{
	int tab = l->args[5].kind == KT_ARG_BUF ? l->args[5].buf : -1;
	long long c;

	if (rot && tab >= 0)
		for (c = 0; c < d; c += 2) {
			double cs = emu_ld(m, tab, t * d + c), sn = emu_ld(m, tab, t * d + c + 1);
			double y0 = g[c], y1 = g[c + 1];

			g[c] = y0 * cs + y1 * sn;
			g[c + 1] = y1 * cs - y0 * sn;
		}
	for (c = 0; c < d; c++)
		emu_st(m, out, (t * H + h) * d + c, g[c]);
}

static double ba_dot(const double *a, const double *b, long long d)
{
	double acc = 0;

	for (long long c = 0; c < d; c++)
		acc += a[c] * b[c];
	return acc;
}

/* One CTA of blockattn_bwd_dq (dkv 0) or blockattn_bwd_dkv (1): rows [r0,
 * r1) of block (t0, n), head h; the statistics at entry sat of `blocks`
 * (2 words each: LSE in log2, Di). */
static void ba_chunked_cta(struct emu *m, const struct kt_launch *l, int dkv, int blocks,
			   long long sat, long long t0, long long n, long long h, long long H,
			   long long d, int rope, long long r0, long long r1)
{
	const double scale = 1.0 / sqrt((double)d), l2e = 1.4426950408889634;
	double *X = calloc((size_t)(4 * n * d), sizeof(double)), *g = calloc((size_t)(2 * d), sizeof(double));
	long long i, j, c;

	CU_ASSERT_FATAL(X && g);
#define XR(a, r) (X + ((a) * n + (r)) * d)
#define ST(t, e) (2 * sat + 2 * ((t) * H + h) + (e))
	ba_rows(m, l, 1, t0, n, h, H, d, rope, X);
	for (i = r0; i < r1; i++) {
		for (c = 0; c < 2 * d; c++)
			g[c] = 0;
		if (!dkv) {
			/* query row i: its statistics, then dQ */
			double mx = -INFINITY, sum = 0, di = 0, lse;

			for (j = 0; j < n; j++) {
				double sc = ba_dot(XR(0, i), XR(1, j), d) * scale;

				mx = sc > mx ? sc : mx;
			}
			for (j = 0; j < n; j++)
				sum += exp(ba_dot(XR(0, i), XR(1, j), d) * scale - mx);
			lse = mx + log(sum);
			for (j = 0; j < n; j++)
				di += exp(ba_dot(XR(0, i), XR(1, j), d) * scale - lse) *
				      ba_dot(XR(3, i), XR(2, j), d);
			emu_st(m, blocks, ST(t0 + i, 0), lse * l2e);
			emu_st(m, blocks, ST(t0 + i, 1), di);
			for (j = 0; j < n; j++) {
				double p = exp(ba_dot(XR(0, i), XR(1, j), d) * scale - lse);
				double ds = p * (ba_dot(XR(3, i), XR(2, j), d) - di) * scale;

				for (c = 0; c < d; c++)
					g[c] += ds * XR(1, j)[c];
			}
			ba_put(m, l, emu_ab(l, 6), t0 + i, h, H, d, rope != 0, g);
		} else {
			/* key row i: dV, dK from the statistics dq wrote */
			for (j = 0; j < n; j++) {
				double lse2 = emu_ld(m, blocks, ST(t0 + j, 0));
				double di = emu_ld(m, blocks, ST(t0 + j, 1));
				double p = exp2(ba_dot(XR(0, j), XR(1, i), d) * scale * l2e - lse2);
				double ds = p * (ba_dot(XR(3, j), XR(2, i), d) - di) * scale;

				for (c = 0; c < d; c++) {
					g[c] += ds * XR(0, j)[c];
					g[d + c] += p * XR(3, j)[c];
				}
			}
			ba_put(m, l, emu_ab(l, 7), t0 + i, h, H, d, rope != 0, g);
			ba_put(m, l, emu_ab(l, 8), t0 + i, h, H, d, rope == 2, g + d);
		}
	}
#undef ST
#undef XR
	free(X);
	free(g);
}

/* blockattn_bwd_dq / _dkv: unit u is pass u % QP of item u / QP; CTA c
 * runs units c, c + grid, ... (chunked: a CTA per unit; ws: persistent,
 * any grid up to one per unit). */
static void emu_ba_chunked(struct emu *m, const struct kt_launch *l, const struct kt_program *p,
			   int dkv, int bound)
{
	long blk = emu_define(p, "BLK"), d = emu_define(p, "HD"), rope = emu_define(p, "ROPE");
	long qp = emu_define(p, "QP"), pr;
	int blocks = emu_ab(l, 4);
	long long nitems, H, sat, cta, grid = l->grid[0];

	CU_ASSERT_FATAL(l->nargs == 12 && qp > 0 && blk % qp == 0);
	pr = blk / qp;
	nitems = emu_ai(l, 9);
	H = emu_ai(l, 10);
	sat = emu_ai(l, 11);
	CU_ASSERT_FATAL(H > 0 && nitems % H == 0);
	CU_ASSERT_FATAL(grid >= 1 && grid <= nitems * qp);
	if (strcmp(p->tpl, "blockattn_ws") != 0)
		CU_ASSERT_EQUAL(grid, nitems * qp);
	CU_ASSERT(l->grid[1] == 1 && l->grid[2] == 1);
	/* the statistics start past the list (and a bound's count) */
	CU_ASSERT_EQUAL(sat, nitems / H + bound);
	if (bound) {
		long long count = (long long)emu_ld(m, blocks, 2 * (nitems / H));

		CU_ASSERT(count >= 0 && count <= nitems / H);
		nitems = count * H < nitems ? count * H : nitems;
	}
	for (cta = 0; cta < grid; cta++)
		for (long long u = cta; u < nitems * qp; u += grid) {
			long long w = u / qp, ps = u % qp, t0, n;

			t0 = (long long)emu_ld(m, blocks, 2 * (w / H));
			n = (long long)emu_ld(m, blocks, 2 * (w / H) + 1);
			CU_ASSERT_FATAL(n >= 1 && n <= blk);
			if (ps * pr >= n)
				continue;
			ba_chunked_cta(m, l, dkv, blocks, sat, t0, n, w % H, H, d, (int)rope,
				       ps * pr, n < (ps + 1) * pr ? n : (ps + 1) * pr);
		}
}

static int ba_item(struct emu *m, const struct kt_launch *l, int blocks, int bwd, long long w,
		   long long H, long long d, int rope)
{
	int tab = l->args[bwd ? 5 : 4].kind == KT_ARG_BUF ? l->args[bwd ? 5 : 4].buf : -1;
	long long b = w / H, h = w % H, t0, n, i, j, c;
	double *X, *P, *dS, scale = 1.0 / sqrt((double)d);

	t0 = (long long)emu_ld(m, blocks, 2 * b);
	n = (long long)emu_ld(m, blocks, 2 * b + 1);
	if (n < 1 || n > 256)
		return -1;
	/* rows of q, k, v, do (rotated where rope says), n x d each */
	X = calloc((size_t)(4 * n * d), sizeof(double));
	P = calloc((size_t)(n * n), sizeof(double));
	dS = calloc((size_t)(n * n), sizeof(double));
	CU_ASSERT_FATAL(X && P && dS);
#define XR(a, r) (X + ((a) * n + (r)) * d)
	ba_rows(m, l, bwd, t0, n, h, H, d, rope, X);
	for (i = 0; i < n; i++) {
		double mx = -INFINITY, sum = 0;

		for (j = 0; j < n; j++) {
			double acc = 0;

			for (c = 0; c < d; c++)
				acc += XR(0, i)[c] * XR(1, j)[c];
			P[i * n + j] = acc * scale;
			mx = P[i * n + j] > mx ? P[i * n + j] : mx;
		}
		for (j = 0; j < n; j++)
			sum += (P[i * n + j] = exp(P[i * n + j] - mx));
		for (j = 0; j < n; j++)
			P[i * n + j] /= sum;
	}
	if (!bwd) {
		int o = emu_ab(l, 5);

		for (i = 0; i < n; i++)
			for (c = 0; c < d; c++) {
				double acc = 0;

				for (j = 0; j < n; j++)
					acc += P[i * n + j] * XR(2, j)[c];
				emu_st(m, o, ((t0 + i) * H + h) * d + c, acc);
			}
	} else {
		int out[3] = { emu_ab(l, 6), emu_ab(l, 7), emu_ab(l, 8) };

		for (i = 0; i < n; i++) {
			double di = 0;

			for (j = 0; j < n; j++) {
				double dp = 0;

				for (c = 0; c < d; c++)
					dp += XR(3, i)[c] * XR(2, j)[c];
				dS[i * n + j] = dp;
				di += P[i * n + j] * dp;
			}
			for (j = 0; j < n; j++)
				dS[i * n + j] = P[i * n + j] * (dS[i * n + j] - di) * scale;
		}
		for (i = 0; i < n; i++) {
			double g[3][256];

			for (c = 0; c < d; c++) {
				g[0][c] = g[1][c] = g[2][c] = 0;
				for (j = 0; j < n; j++) {
					g[0][c] += dS[i * n + j] * XR(1, j)[c];
					g[1][c] += dS[j * n + i] * XR(0, j)[c];
					g[2][c] += P[j * n + i] * XR(3, j)[c];
				}
			}
			for (int a = 0; a < 3; a++) {
				if (rope && tab >= 0 && (a < 2 || rope == 2))
					for (c = 0; c < d; c += 2) {
						double cs = emu_ld(m, tab, (t0 + i) * d + c);
						double sn = emu_ld(m, tab, (t0 + i) * d + c + 1);
						double y0 = g[a][c], y1 = g[a][c + 1];

						g[a][c] = y0 * cs + y1 * sn;
						g[a][c + 1] = y1 * cs - y0 * sn;
					}
				for (c = 0; c < d; c++)
					emu_st(m, out[a], ((t0 + i) * H + h) * d + c, g[a][c]);
			}
		}
	}
#undef XR
	free(X);
	free(P);
	free(dS);
	return 0;
}

static void emu_ba_blocks(struct emu *m, const struct kt_launch *l, long blk, int bound)
{
	int off = emu_ab(l, 0), blocks = emu_ab(l, 2);
	long long B = emu_ai(l, 1), nbound = bound ? emu_ai(l, 3) : -1, n = 0, s, t;

	CU_ASSERT_EQUAL(l->nargs, bound ? 4 : 3);
	CU_ASSERT_EQUAL(l->grid[0], 1);
	CU_ASSERT_EQUAL(l->block[0], 1024);
	for (s = 0; s < B; s++) {
		long long a = (long long)emu_ld(m, off, s), e = (long long)emu_ld(m, off, s + 1);

		for (t = a; t < e; t += blk) {
			/* the bound holds for any lengths summing to T */
			if (bound) {
				CU_ASSERT(n < nbound);
				if (n >= nbound)
					return;
			}
			emu_st(m, blocks, 2 * n, (double)t);
			emu_st(m, blocks, 2 * n + 1, (double)(e - t < blk ? e - t : blk));
			n++;
		}
	}
	if (bound) {
		emu_st(m, blocks, 2 * nbound, (double)n);
		emu_st(m, blocks, 2 * nbound + 1, 0);
	}
}

int emu_blockattn(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	long blk = emu_define(p, "BLK"), d = emu_define(p, "HD"), rope = emu_define(p, "ROPE");
	int bound = emu_define(p, "BOUND") == 1, bwd, blocks;
	long long nitems, H, cta_step, item_step, nper, cta, i, w, a0;
	unsigned char *seen;

	if (strcmp(l->kernel, "blockattn_blocks") == 0) {
		emu_ba_blocks(m, l, blk, bound);
		return 1;
	}
	if (strcmp(l->kernel, "blockattn_bwd_dq") == 0 || strcmp(l->kernel, "blockattn_bwd_dkv") == 0) {
		emu_ba_chunked(m, l, p, strcmp(l->kernel, "blockattn_bwd_dkv") == 0, bound);
		return 1;
	}
	if (strcmp(l->kernel, "blockattn_fwd") == 0 || strcmp(l->kernel, "blockattn_fwd_ws") == 0)
		bwd = 0;
	else if (strcmp(l->kernel, "blockattn_bwd") == 0 || strcmp(l->kernel, "blockattn_bwd_ws") == 0)
		bwd = 1;
	else
		return 0;
	a0 = bwd ? 9 : 6;
	CU_ASSERT_FATAL(l->nargs == a0 + 5);
	blocks = emu_ab(l, bwd ? 4 : 3);
	nitems = emu_ai(l, (int)a0);
	H = emu_ai(l, (int)a0 + 1);
	cta_step = emu_ai(l, (int)a0 + 2);
	item_step = emu_ai(l, (int)a0 + 3);
	nper = emu_ai(l, (int)a0 + 4);
	CU_ASSERT_FATAL(H > 0 && nitems % H == 0);
	if (bound) {
		long long count = (long long)emu_ld(m, blocks, 2 * (nitems / H));

		CU_ASSERT(count >= 0 && count <= nitems / H);
		nitems = count * H < nitems ? count * H : nitems;
	}
	CU_ASSERT(l->grid[1] == 1 && l->grid[2] == 1);
	seen = calloc((size_t)(nitems ? nitems : 1), 1);
	CU_ASSERT_FATAL(seen != NULL);
	for (cta = 0; cta < (long long)l->grid[0]; cta++)
		for (i = 0; i < nper; i++) {
			w = cta * cta_step + i * item_step;
			if (w >= nitems)
				break;
			CU_ASSERT(!seen[w]);
			seen[w] = 1;
			CU_ASSERT(ba_item(m, l, blocks, bwd, w, H, d, (int)rope) == 0);
		}
	/* every item of the real blocks ran */
	for (w = 0; w < nitems; w++)
		CU_ASSERT(seen[w]);
	free(seen);
	return 1;
}

double emu_rel_l2(const float *a, const float *b, size_t n)
{
	double d = 0, r = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		r += (double)b[i] * b[i];
	}
	return r > 0 ? sqrt(d / r) : (d > 0 ? 1e30 : 0);
}

int emu_nonfinite(const float *y, size_t n)
{
	int bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad += !isfinite(y[i]);
	return bad;
}

/* ---- NVRTC compile jobs ---- */

void job_add(struct job_list *j, const struct kt_program *p, const char *arch, const char *label)
{
	int i, d;

	for (i = 0; i < j->n; i++) {
		const struct kt_program *q = &j->progs[i];

		if (strcmp(q->tpl, p->tpl) || q->ndefines != p->ndefines || strcmp(j->arch[i], arch))
			continue;
		for (d = 0; d < p->ndefines && strcmp(q->defines[d], p->defines[d]) == 0; d++)
			;
		if (d == p->ndefines)
			return;
	}
	if (j->n == j->cap) {
		int cap = j->cap ? j->cap * 2 : 64;
		void *a = realloc(j->progs, sizeof(*j->progs) * (size_t)cap);

		CU_ASSERT_PTR_NOT_NULL_FATAL(a);
		j->progs = a;
		a = realloc(j->arch, sizeof(*j->arch) * (size_t)cap);
		CU_ASSERT_PTR_NOT_NULL_FATAL(a);
		j->arch = a;
		a = realloc(j->label, sizeof(*j->label) * (size_t)cap);
		CU_ASSERT_PTR_NOT_NULL_FATAL(a);
		j->label = a;
		j->cap = cap;
	}
	j->progs[j->n] = *p;
	snprintf(j->arch[j->n], sizeof(j->arch[0]), "%s", arch);
	snprintf(j->label[j->n], sizeof(j->label[0]), "%s", label);
	j->n++;
}

void job_add_plan(struct job_list *j, const struct kt_family *f, const struct kt_shape *s,
		  const struct kt_config *c, const struct kt_target *t, const char *why)
{
	struct kt_plan p;
	struct kt_err e = {0};
	char arch[16], key[200], label[200];
	int i;

	CU_ASSERT_EQUAL_FATAL(f->plan(f, s, c, t, &p, &e), 0);
	kt_target_arch(t, arch, sizeof(arch));
	kt_config_key(f, c, key, sizeof(key));
	snprintf(label, sizeof(label), "%.160s [%.20s]", key, why);
	for (i = 0; i < p.nprograms; i++)
		job_add(j, &p.programs[i], arch, label);
}

struct pick {
	const struct job_sample *js;
	struct kt_shape s;
	struct kt_target t;
	int variant;
	long n;
	struct kt_config *valid;
	long cap;
	struct kt_config ext[6];	/* first, last, max smem, max acc, min/max threads */
	long ext_v[6];
};

static int pick_one(const struct kt_config *c, void *arg)
{
	struct pick *x = arg;
	struct kt_gemm_tile t;
	char why[200];
	long v[6];
	int k;

	if (c->variant != x->variant || x->js->f->check(x->js->f, &x->s, c, &x->t, why,
							sizeof(why)))
		return 0;
	if (x->n == x->cap) {
		void *a;

		x->cap = x->cap ? x->cap * 2 : 256;
		a = realloc(x->valid, sizeof(*x->valid) * (size_t)x->cap);
		if (!a)
			return -1;
		x->valid = a;
	}
	x->valid[x->n] = *c;
	memset(&t, 0, sizeof(t));
	x->js->tile(c, &t);
	v[0] = -x->n;
	v[1] = x->n;
	v[2] = kt_gemm_smem(&t);
	v[3] = kt_gemm_acc_regs(&t);
	v[4] = -(long)kt_gemm_threads(&t);
	v[5] = kt_gemm_threads(&t);
	for (k = 0; k < 6; k++)
		if (x->n == 0 || v[k] > x->ext_v[k]) {
			x->ext_v[k] = v[k];
			x->ext[k] = *c;
		}
	x->n++;
	return 0;
}

static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void job_add_shape(struct job_list *j, const struct job_sample *js, const struct kt_shape *s,
		   const struct kt_target *t, int all)
{
	static const char *const ext_names[] = {"first", "last", "max smem", "max acc",
						"min threads", "max threads"};
	const struct kt_family *f = js->f;
	struct kt_plan rp;
	struct kt_err e = {0};
	char arch[16];
	int v, k, arch_a;
	long i;

	kt_target_arch(t, arch, sizeof(arch));
	arch_a = strcmp(arch, "sm_90a") == 0;
	for (v = 0; v < f->nvariants; v++) {
		struct pick x;

		if (js->only_90a(v) ? !arch_a : arch_a && !all)
			continue;
		memset(&x, 0, sizeof(x));
		x.js = js;
		x.s = *s;
		x.t = *t;
		x.variant = v;
		CU_ASSERT_EQUAL(kt_space_foreach(f, 0, pick_one, &x), 0);
		CU_ASSERT(x.n > 0 || (js->unsupported && js->unsupported(v, s)));
		if (all) {
			for (i = 0; i < x.n; i++)
				job_add_plan(j, f, &x.s, &x.valid[i], &x.t, "all");
		} else if (x.n > 0) {
			int n = js->samples(v);

			for (k = 0; k < 6; k++)
				job_add_plan(j, f, &x.s, &x.ext[k], &x.t, ext_names[k]);
			for (k = 0; k < n; k++)
				job_add_plan(j, f, &x.s, &x.valid[rng_next(js->rng) % (uint64_t)x.n],
					     &x.t, "sample");
		}
		free(x.valid);
	}
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, s, t, &rp, &e), 0);
	for (k = 0; k < rp.nprograms; k++)
		job_add(j, &rp.programs[k], arch, "reference");
}

int job_shard(int n, int *first, int *step)
{
	int has = kt_test_shard(first, step);

	CU_ASSERT(has >= 0);
	if (has < 0)
		*step = 0;
	if (has > 0)
		printf("\n  shard %d/%d: %d of %d programs", *first, *step,
		       n > *first ? (n - *first + *step - 1) / *step : 0, n);
	return has;
}

int shard_keep(void *a, size_t size, int n, int first, int step)
{
	char *p = a;
	int i, m = 0;

	for (i = first; step > 0 && i < n; i += step, m++)
		if (m != i)
			memcpy(p + (size_t)m * size, p + (size_t)i * size, size);
	return m;
}

void jobs_compile(struct jit_job *jobs, int n)
{
	int chunk = n >= 1000 ? (n + 19) / 20 : n, done = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < n) {
		int m = n - done < chunk ? n - done : chunk;
		double s;

		jit_compile_all(jobs + done, m, 0);
		done += m;
		if (chunk == n)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		fprintf(stderr, "  compiled %d of %d programs, %.0f s, about %.0f s left\n", done, n, s,
			s / done * (n - done));
	}
}

int job_list_compile(struct job_list *j)
{
	int k, ok = 0, spills = 0;

	CU_ASSERT_PTR_NULL_FATAL(j->jobs);
	{
		const char *only;
		int has = kt_test_compile_arch(&only), m = 0;

		CU_ASSERT(has >= 0);
		for (k = 0; has > 0 && k < j->n; k++) {	/* bad (-1): nothing stays */
			if (strcmp(j->arch[k], only) != 0)
				continue;
			if (m != k) {
				j->progs[m] = j->progs[k];
				memcpy(j->arch[m], j->arch[k], sizeof(j->arch[m]));
				memcpy(j->label[m], j->label[k], sizeof(j->label[m]));
			}
			m++;
		}
		if (has != 0) {
			if (has > 0)
				printf("\n  KTUNE_COMPILE_ARCH=%s: %d of %d programs", only, m, j->n);
			j->n = m;
			j->sharded = 1;
		}
	}
	{
		int first, step;

		if (job_shard(j->n, &first, &step) != 0) {
			shard_keep(j->progs, sizeof(j->progs[0]), j->n, first, step);
			shard_keep(j->arch, sizeof(j->arch[0]), j->n, first, step);
			j->n = shard_keep(j->label, sizeof(j->label[0]), j->n, first, step);
			j->sharded = 1;
		}
	}
	j->jobs = calloc((size_t)(j->n > 0 ? j->n : 1), sizeof(*j->jobs));
	CU_ASSERT_PTR_NOT_NULL_FATAL(j->jobs);
	for (k = 0; k < j->n; k++) {
		j->jobs[k].prog = &j->progs[k];
		j->jobs[k].arch = j->arch[k];
	}
	printf("\n  compiling %d programs (NVRTC %s)\n", j->n, jit_nvrtc_version());
	jobs_compile(j->jobs, j->n);
	for (k = 0; k < j->n; k++) {
		struct jit_result *r = &j->jobs[k].res;

		CU_ASSERT_EQUAL(j->jobs[k].failed, 0);
		CU_ASSERT(r->ok && r->cubin && r->cubin_len > 64);
		if (j->jobs[k].failed || !r->ok) {
			fprintf(stderr, "  FAILED %s %s %s: %s\n%s\n", j->arch[k], j->progs[k].tpl,
				j->label[k], j->jobs[k].err_msg, r->log ? r->log : "");
			continue;
		}
		ok++;
		{
			char what[200];
			int regs, frame;

			snprintf(what, sizeof(what), "%s %s %s", j->arch[k], j->progs[k].tpl,
				 j->label[k]);
			CU_ASSERT_FALSE(kt_test_wgmma_serialized(r->log, what));
			/* sm_90a's programs (wgmma, ws, fused) keep their
			 * accumulators in registers: a stack frame there is a
			 * spill the design did not plan; elsewhere it is shown */
			kt_test_cubin_usage(r->cubin, r->cubin_len, &regs, &frame);
			CU_ASSERT(regs > 0 && regs <= 255);
			if (strcmp(j->arch[k], "sm_90a") == 0)
				CU_ASSERT_EQUAL(frame, 0);
			if (frame > 0) {
				spills++;
				fprintf(stderr, "  SPILLS %s: %d B stack frame, %d registers\n", what,
					frame, regs);
			}
		}
	}
	printf("  %d/%d compiled, %d with a stack frame\n", ok, j->n, spills);
	return ok;
}

int job_ok(const struct job_list *j, int k)
{
	return j->jobs && k >= 0 && k < j->n && !j->jobs[k].failed && j->jobs[k].res.ok;
}

void job_list_release(struct job_list *j)
{
	int k;

	if (j->jobs)
		for (k = 0; k < j->n; k++)
			jit_result_release(&j->jobs[k].res);
	free(j->jobs);
	free(j->progs);
	free(j->arch);
	free(j->label);
	memset(j, 0, sizeof(*j));
}
