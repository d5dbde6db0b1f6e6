/*
 * test_monarch.c -- the `monarch` and `monarch_bm` families on the CPU (no
 * GPU needed). The CPU suite runs once per family.
 *
 *  - the CPU reference equals multiplication by the dense matrix W
 *    materialized in double from w1, w2 and both permutations (a W built
 *    without the middle permutation must not match: the control);
 *  - plans run on the host: a small emulator executes a plan's launches
 *    (gemm_tn, gemm_tn_ws -- its operands read through the TMAP args'
 *    geometry with the copy engine's zero fill, k-tiles of 64, split-K
 *    slices -- splitk_reduce and every monarch.cu kernel, each mirrored line
 *    by line, every access bounds-checked, gemm.cu's alignment rules, grid,
 *    boxes and the worker's tensor-map check asserted),
 *    so the GPU reference (ref_plan) and every variant's plan -- prep
 *    launches, strides, batch offsets, program indices -- are checked
 *    against the CPU reference, exactly (fp32/double intermediates) and
 *    with bf16 rounding like the GPU's; relayout without its transform
 *    must fail (the control);
 *  - monarch_bm's y is monarch's with the columns permuted;
 *  - shape parsing, check() rejections, the space and its pruning, that
 *    every valid config of the reference shapes plans (and passes the
 *    worker's plan check), default configs, flops and bytes;
 *  - NVRTC compiles each variant's extremes and a fixed-seed sample for
 *    sm_80 and sm_90 (the wgmma and ws variants for sm_90a) and the reference
 *    template; KTUNE_COMPILE_ALL=1: every valid config of the reference
 *    shapes for sm_80, sm_90 and sm_90a (what a sweep on the H200 compiles).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "kernels/gemm_plan.h"
#include "testutil.h"
#include "tuner/jit.h"
#include "tuner/worker_int.h"	/* wk_plan_check: what the worker accepts */

static const struct kt_family *mon;	/* the family under test */
static int blockmajor;			/* 1: monarch_bm (y block-major) */

/* the shapes KERNELS.md names (llama7b q/k/v/o, gate/up; gpt2s c_fc) */
static const char *const ref_shapes[] = {
	"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	"tokens=1024,in=4096,out=11008,blocks=16,rank=1536",
	"tokens=1024,in=768,out=3072,blocks=4,rank=192",
};

/* small shapes the emulator runs: b, rp, nb and mb all differ, so a
 * swapped index shows; the fourth has rank/blocks = 4 (naive only); the
 * last has tokens past two 64-row tiles and in/blocks = 96 (a partial
 * 64-wide k-tile) for the ws variants' 64..128-row tiles */
static const char *const small_shapes[] = {
	"tokens=33,in=256,out=512,blocks=8,rank=128",
	"tokens=7,in=128,out=64,blocks=2,rank=48",
	"tokens=20,in=64,out=384,blocks=4,rank=64",
	"tokens=5,in=128,out=64,blocks=8,rank=32",
	"tokens=130,in=384,out=256,blocks=4,rank=128",
};

static int init_monarch(void)
{
	mon = kt_family_find("monarch");
	blockmajor = 0;
	return mon ? 0 : 1;
}

static int init_monarch_bm(void)
{
	mon = kt_family_find("monarch_bm");
	blockmajor = 1;
	return mon ? 0 : 1;
}

static struct kt_target target(const char *name)
{
	struct kt_target t;

	memset(&t, 0, sizeof(t));
	CU_ASSERT_EQUAL_FATAL(kt_target_named(name, &t), 0);
	return t;
}

static struct kt_shape shape(const char *text)
{
	struct kt_shape s;
	struct kt_err e = {0};

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(mon, text, &s, &e), 0);
	return s;
}

#define SV(s, name) kt_shape_get(mon, &(s), name)

static int is_relayout(int v)
{
	return strstr(mon->variants[v], "relayout") != NULL;
}

static int is_ws(int v)
{
	const char *n = mon->variants[v];
	size_t len = strlen(n);

	return len > 3 && strcmp(n + len - 3, "_ws") == 0;
}

/* the sm_90a-only variants: the wgmma and the warp-specialized forms */
static int is_wgmma(int v)
{
	return strstr(mon->variants[v], "wgmma") != NULL || is_ws(v);
}

static double rel_l2(const float *a, const float *b, size_t n)
{
	double d = 0, r = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		r += (double)b[i] * b[i];
	}
	return r > 0 ? sqrt(d / r) : (d > 0 ? 1e30 : 0);
}

/* ---- problem inputs on the host ---- */

struct problem {
	struct kt_shape s;
	int nb;
	struct kt_buf bufs[KT_MAX_BUFS];
	uint16_t *in[KT_MAX_BUFS];	/* inputs, bf16 bits */
	float *ref;			/* cpu_ref's y */
};

static void problem_init(struct problem *p, const char *text, uint64_t seed)
{
	struct kt_err e = {0};
	float *outs[1];
	int i;

	memset(p, 0, sizeof(*p));
	p->s = shape(text);
	p->nb = mon->buffers(&p->s, NULL, p->bufs);
	CU_ASSERT_EQUAL_FATAL(p->nb, 5);
	for (i = 0; i < p->nb; i++) {
		if (p->bufs[i].role != KT_BUF_INPUT)
			continue;
		CU_ASSERT_EQUAL(p->bufs[i].dtype, KT_BF16);
		p->in[i] = malloc(p->bufs[i].elems * 2);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->in[i]);
		kt_fill_bf16(p->in[i], p->bufs[i].elems, seed + (uint64_t)i, p->bufs[i].scale);
	}
	CU_ASSERT_EQUAL_FATAL(p->bufs[3].role, KT_BUF_OUTPUT);
	p->ref = malloc(p->bufs[3].elems * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->ref);
	outs[0] = p->ref;
	CU_ASSERT_EQUAL_FATAL(mon->cpu_ref(&p->s, (const void *const *)p->in, outs, &e), 0);
}

static void problem_release(struct problem *p)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++)
		free(p->in[i]);
	free(p->ref);
	memset(p, 0, sizeof(*p));
}

/* ---- CPU reference vs the materialized dense W ---- */

/* W (m x n) in double: W[s*b + i][j*nb + k] = sum_q w2[i][s][j*rp + q] *
 * w1[j][q*b + i][k] (monarch_bm: row i*mb + s). `wrong` uses the row
 * i*rp + q of w1 instead (the middle permutation forgotten): the control
 * that the comparison can fail. */
static double *materialize(const struct problem *p, int wrong)
{
	long n = SV(p->s, "in"), m = SV(p->s, "out"), b = SV(p->s, "blocks"), r = SV(p->s, "rank");
	long nb = n / b, mb = m / b, rp = r / b, i, sx, j, k, q;
	const uint16_t *w1 = p->in[1], *w2 = p->in[2];
	double *W = calloc((size_t)(m * n), sizeof(double));

	if (!W)
		return NULL;
	for (i = 0; i < b; i++)
		for (sx = 0; sx < mb; sx++)
			for (j = 0; j < b; j++)
				for (k = 0; k < nb; k++) {
					double acc = 0;

					for (q = 0; q < rp; q++) {
						long row = wrong ? i * rp + q : q * b + i;

						acc += (double)kt_bf16_to_f32(w2[(i * mb + sx) * r + j * rp + q]) *
						       (double)kt_bf16_to_f32(w1[(j * r + row) * nb + k]);
					}
					W[(blockmajor ? i * mb + sx : sx * b + i) * n + j * nb + k] = acc;
				}
	return W;
}

static double dense_vs_ref(const struct problem *p, int wrong)
{
	long T = SV(p->s, "tokens"), n = SV(p->s, "in"), m = SV(p->s, "out"), t, o, k;
	double *W = materialize(p, wrong);
	float *y = malloc(sizeof(float) * (size_t)(T * m));
	double rel = -1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(W);
	CU_ASSERT_PTR_NOT_NULL_FATAL(y);
	for (t = 0; t < T; t++)
		for (o = 0; o < m; o++) {
			double acc = 0;

			for (k = 0; k < n; k++)
				acc += (double)kt_bf16_to_f32(p->in[0][t * n + k]) * W[o * n + k];
			y[t * m + o] = (float)acc;
		}
	rel = rel_l2(p->ref, y, (size_t)(T * m));
	free(W);
	free(y);
	return rel;
}

static void test_cpu_ref_vs_dense(void)
{
	/* tiny shapes the GEMM alignment would reject: cpu_ref needs only
	 * blocks | in, out, rank */
	static const char *const tiny[] = {
		"tokens=3,in=18,out=24,blocks=3,rank=9",
		"tokens=4,in=20,out=30,blocks=5,rank=10",
		"tokens=2,in=16,out=24,blocks=4,rank=12",
		"tokens=3,in=17,out=16,blocks=1,rank=8",
	};
	size_t i;

	for (i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) {
		struct problem p;
		double rel, bad;
		long nonzero = 0;
		size_t e;

		problem_init(&p, tiny[i], 100 + i);
		rel = dense_vs_ref(&p, 0);
		if (rel > 1e-6)
			fprintf(stderr, "\n  %s: cpu_ref vs dense W rel %.3g\n", tiny[i], rel);
		CU_ASSERT(rel >= 0 && rel <= 1e-6);
		/* the comparison sees a forgotten permutation (where it matters) */
		if (SV(p.s, "blocks") > 1) {
			bad = dense_vs_ref(&p, 1);
			CU_ASSERT(bad > 0.1);
		}
		for (e = 0; e < p.bufs[3].elems; e++)
			nonzero += p.ref[e] != 0;
		CU_ASSERT(nonzero > 0);	/* not all zero */
		problem_release(&p);
	}
}

/* y is O(1) with the family's input scales (what tol is relative to) */
static void test_output_scale(void)
{
	size_t i;

	for (i = 0; i < 2; i++) {
		struct problem p;
		double ss = 0;
		size_t e;

		problem_init(&p, small_shapes[i], 7);
		for (e = 0; e < p.bufs[3].elems; e++)
			ss += (double)p.ref[e] * p.ref[e];
		ss = sqrt(ss / (double)p.bufs[3].elems);
		CU_ASSERT(ss > 0.05 && ss < 5);
		problem_release(&p);
	}
}

/* ---- the host emulator of plans ---- */

struct emu {
	const struct kt_plan *plan;
	int nb;
	struct kt_buf bufs[KT_MAX_BUFS];
	float *d[KT_MAX_BUFS];
	int round;		/* 1: bf16 stores rounded like the GPU's */
	long oob;		/* out-of-bounds accesses seen */
	long unknown;		/* launches of kernels the emulator lacks */
};

static float ld(struct emu *m, int buf, long long i)
{
	if (buf < 0 || buf >= m->nb || i < 0 || (size_t)i >= m->bufs[buf].elems) {
		m->oob++;
		return 0;
	}
	return m->d[buf][i];
}

static void st(struct emu *m, int buf, long long i, double v)
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

static long long ai(const struct kt_launch *l, int k)
{
	CU_ASSERT(k < l->nargs && l->args[k].kind != KT_ARG_BUF);
	return k < l->nargs ? l->args[k].i : 0;
}

static int ab(const struct kt_launch *l, int k)
{
	CU_ASSERT(k < l->nargs && l->args[k].kind == KT_ARG_BUF);
	return k < l->nargs ? l->args[k].buf : -1;
}

static long define_of(const struct kt_program *p, const char *name)
{
	size_t len = strlen(name);
	int i;

	for (i = 0; i < p->ndefines; i++)
		if (strncmp(p->defines[i], name, len) == 0 && p->defines[i][len] == '=')
			return atol(p->defines[i] + len + 1);
	return -1;
}

static void emu_gemm(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	int A = ab(l, 0), B = ab(l, 1), C = ab(l, 2);
	long long M = ai(l, 3), N = ai(l, 4), K = ai(l, 5), lda = ai(l, 6), ldb = ai(l, 7);
	long long ldc = ai(l, 8), sA = ai(l, 9), sB = ai(l, 10), sC = ai(l, 11);
	long bm = define_of(p, "BLOCK_M"), bn = define_of(p, "BLOCK_N");
	long long z, t, c, k;

	CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
	CU_ASSERT_EQUAL(l->nargs, 12);
	/* the launch matches its program's tile */
	CU_ASSERT(bm > 0 && bn > 0);
	if (bm > 0 && bn > 0)
		CU_ASSERT_EQUAL((long long)l->grid[0], ((M + bm - 1) / bm) * ((N + bn - 1) / bn));
	/* gemm.cu's 16-byte rules */
	CU_ASSERT(K % 8 == 0 && N % 8 == 0 && lda % 8 == 0 && ldb % 8 == 0 && ldc % 8 == 0);
	CU_ASSERT(sA % 8 == 0 && sB % 8 == 0 && sC % 8 == 0);
	for (z = 0; z < (long long)l->grid[2]; z++)
		for (t = 0; t < M; t++)
			for (c = 0; c < N; c++) {
				double acc = 0;

				for (k = 0; k < K; k++)
					acc += (double)ld(m, A, z * sA + t * lda + k) *
					       (double)ld(m, B, z * sB + c * ldb + k);
				st(m, C, z * sC + t * ldc + c, acc);
			}
}

/* A TMA read: element (c0, c1, c2) of map a, zero outside its dims (the
 * copy engine's fill), else through its strides (bounds-checked). */
static double tma_ld(struct emu *m, const struct kt_arg *a, long long c0, long long c1,
		     long long c2)
{
	const struct kt_tmap *t = &a->tmap;

	if (c0 < 0 || c0 >= t->dims[0] || c1 < 0 || c1 >= t->dims[1] || c2 < 0 ||
	    c2 >= t->dims[2])
		return 0;
	return ld(m, a->buf, c0 + c1 * t->strides[1] + c2 * t->strides[2]);
}

/* Element (row, k) of batch z as gemm_tn_ws loads it: map (k, rows,
 * batch) with the batch coordinate z * zm, or (k, batch, rows) for zm 2. */
static double ws_elem(struct emu *m, const struct kt_arg *a, long long zm, long long z,
		      long long row, long long k)
{
	return zm == 2 ? tma_ld(m, a, k, z, row) : tma_ld(m, a, k, row, z * zm);
}

/* The map as the worker will encode it, with the tile's box (rows
 * BLOCK_M or BLOCK_N along the rows dimension, one batch). */
static void ws_map_ok(struct emu *m, const struct kt_arg *a, long long zm, long rows_box)
{
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(a->kind, KT_ARG_TMAP);
	CU_ASSERT_FATAL(a->buf >= 0 && a->buf < m->nb);
	CU_ASSERT(zm == 0 || zm == 1 || zm == 2);
	CU_ASSERT_EQUAL(wk_tmap_check(&a->tmap, &m->bufs[a->buf], why, sizeof(why)), 0);
	if (why[0])
		fprintf(stderr, "\n  tensor map: %s\n", why);
	CU_ASSERT_EQUAL(a->tmap.rank, 3);
	CU_ASSERT_EQUAL(a->tmap.box[0], 64);
	CU_ASSERT_EQUAL(a->tmap.swizzle, 128);
	CU_ASSERT_EQUAL(a->tmap.box[zm == 2 ? 2 : 1], rows_box);
	CU_ASSERT_EQUAL(a->tmap.box[zm == 2 ? 1 : 2], 1);
	/* increasing strides (what the driver's documentation describes) */
	CU_ASSERT(a->tmap.strides[2] >= a->tmap.strides[1] * (a->tmap.dims[1] > 1 ? 1 : 0));
	CU_ASSERT(a->tmap.strides[1] >= a->tmap.dims[0]);
}

/* gemm_tn_ws(tA, tB, C, M, N, K, ldc, sC, zA, zB): k-tiles of 64 through
 * the maps (past K the map's zero fill, or whatever the map holds there);
 * SPLIT_K: slice blockIdx.y of whole k-tiles into fp32 workspace slices. */
static void emu_gemm_ws(struct emu *m, const struct kt_launch *l)
{
	const struct kt_program *p = &m->plan->programs[l->program];
	const struct kt_arg *tA = &l->args[0], *tB = &l->args[1];
	int C = ab(l, 2);
	long long M = ai(l, 3), N = ai(l, 4), K = ai(l, 5), ldc = ai(l, 6), sC = ai(l, 7);
	long long zA = ai(l, 8), zB = ai(l, 9);
	long bm = define_of(p, "BLOCK_M"), bn = define_of(p, "BLOCK_N");
	long cons = define_of(p, "CONSUMERS"), sk = define_of(p, "SPLIT_K");
	long long z, t, c, k, sl, kc, k0, kend;

	CU_ASSERT_STRING_EQUAL(p->tpl, "gemm");
	CU_ASSERT_EQUAL(define_of(p, "WS"), 1);
	CU_ASSERT_EQUAL_FATAL(l->nargs, 10);
	CU_ASSERT_FATAL(bm > 0 && bn > 0 && (cons == 1 || cons == 2));
	if (sk < 1)
		sk = 1;
	CU_ASSERT_EQUAL((long long)l->grid[0], ((M + bm - 1) / bm) * ((N + bn - 1) / bn));
	CU_ASSERT_EQUAL((long long)l->grid[1], sk);
	CU_ASSERT(sk == 1 || l->grid[2] == 1);
	CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
	ws_map_ok(m, tA, zA, bm);
	ws_map_ok(m, tB, zB, bn);
	/* the staged epilogue's 16-byte stores */
	CU_ASSERT(N % 8 == 0 && ldc % 8 == 0 && sC % 8 == 0);
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
						st(m, C, sl * M * ldc + t * ldc + c, acc);
					else
						st(m, C, z * sC + t * ldc + c, acc);
				}
		}
}

static void emu_splitk_reduce(struct emu *m, const struct kt_launch *l)
{
	int W = ab(l, 0), C = ab(l, 1);
	long long M = ai(l, 2), N = ai(l, 3), ldc = ai(l, 4), splits = ai(l, 5), t, c, s;

	CU_ASSERT(N % 8 == 0);
	CU_ASSERT((long long)l->grid[0] * 256 * 4 >= M * N);
	for (t = 0; t < M; t++)
		for (c = 0; c < N; c++) {
			double acc = 0;

			for (s = 0; s < splits; s++)
				acc += ld(m, W, s * M * N + t * N + c);
			st(m, C, t * ldc + c, acc);
		}
}

/* Each of these mirrors its kernel in templates/monarch.cu. */
static void emu_perm_mid(struct emu *m, const struct kt_launch *l)
{
	int z = ab(l, 0), g = ab(l, 1);
	long long N = ai(l, 2), b = ai(l, 3), r = ai(l, 4), rp = r / b, e;

	for (e = 0; e < b * N * r; e++) {
		long long k = e % r, row = e / r, t = row % N, i = row / N, j = k / rp, q = k % rp;

		st(m, g, e, ld(m, z, (j * N + t) * r + q * b + i));
	}
}

static void emu_relayout_w1(struct emu *m, const struct kt_launch *l)
{
	int w1 = ab(l, 0), w1r = ab(l, 1);
	long long b = ai(l, 2), r = ai(l, 3), nb = ai(l, 4), rp = r / b, e;

	for (e = 0; e < b * r * nb; e++) {
		long long k = e % nb, row = e / nb, c = row % r, j = row / r, i = c / rp, q = c % rp;

		st(m, w1r, e, ld(m, w1, (j * r + q * b + i) * nb + k));
	}
}

static void emu_gather_chunks(struct emu *m, const struct kt_launch *l)
{
	int z = ab(l, 0), g = ab(l, 1);
	long long N = ai(l, 2), b = ai(l, 3), r = ai(l, 4), rp = r / b, ch, u;

	CU_ASSERT(rp % 8 == 0);	/* whole 16-byte chunks */
	for (ch = 0; ch < b * N * r / 8; ch++) {
		long long e = ch * 8, k = e % r, row = e / r, t = row % N, i = row / N;
		long long j = k / rp, q = k % rp, src = (t * b + j) * r + i * rp + q;

		CU_ASSERT(src % 8 == 0);	/* 16-byte aligned source */
		for (u = 0; u < 8; u++)
			st(m, g, e + u, ld(m, z, src + u));
	}
}

static void emu_perm_out(struct emu *m, const struct kt_launch *l)
{
	int y2 = ab(l, 0), y = ab(l, 1);
	long long N = ai(l, 2), mm = ai(l, 3), b = ai(l, 4), mb = mm / b, e;

	for (e = 0; e < N * mm; e++) {
		long long o = e % mm, t = e / mm, i = o % b, s = o / b;

		st(m, y, e, ld(m, y2, t * mm + i * mb + s));
	}
}

static void emu_ref_z(struct emu *m, const struct kt_launch *l)
{
	int x = ab(l, 0), w1 = ab(l, 1), z32 = ab(l, 2);
	long long N = ai(l, 3), n = ai(l, 4), b = ai(l, 5), r = ai(l, 6), nb = n / b, e, k;

	for (e = 0; e < b * N * r; e++) {
		long long c = e % r, row = e / r, t = row % N, j = row / N;
		float acc = 0.f;

		for (k = 0; k < nb; k++)
			acc += ld(m, x, t * n + j * nb + k) * ld(m, w1, (j * r + c) * nb + k);
		st(m, z32, e, acc);
	}
}

static void emu_ref_y(struct emu *m, const struct kt_launch *l)
{
	int z32 = ab(l, 0), w2 = ab(l, 1), y = ab(l, 2);
	long long N = ai(l, 3), mm = ai(l, 4), b = ai(l, 5), r = ai(l, 6), blk = ai(l, 7);
	long long rp = r / b, mb = mm / b, e, j, q;

	for (e = 0; e < N * mm; e++) {
		long long o = e % mm, t = e / mm;
		long long i = blk ? o / mb : o % b, s = blk ? o % mb : o / b, wr = (i * mb + s) * r;
		float acc = 0.f;

		for (j = 0; j < b; j++)
			for (q = 0; q < rp; q++)
				acc += ld(m, z32, (j * N + t) * r + q * b + i) * ld(m, w2, wr + j * rp + q);
		st(m, y, e, acc);
	}
}

static void emu_launch(struct emu *m, const struct kt_launch *l)
{
	static const struct {
		const char *name;
		void (*fn)(struct emu *, const struct kt_launch *);
	} kernels[] = {
		{"gemm_tn", emu_gemm},
		{"gemm_tn_ws", emu_gemm_ws},
		{"splitk_reduce", emu_splitk_reduce},
		{"monarch_perm_mid", emu_perm_mid},
		{"monarch_relayout_w1", emu_relayout_w1},
		{"monarch_gather_chunks", emu_gather_chunks},
		{"monarch_perm_out", emu_perm_out},
		{"monarch_ref_z", emu_ref_z},
		{"monarch_ref_y", emu_ref_y},
	};
	size_t i;

	CU_ASSERT(l->program >= 0 && l->program < m->plan->nprograms);
	CU_ASSERT(l->grid[0] >= 1 && l->grid[1] >= 1 && l->grid[2] >= 1);
	CU_ASSERT(l->block[0] >= 32 && l->block[0] * l->block[1] * l->block[2] <= 1024);
	if (strncmp(l->kernel, "monarch_", 8) == 0)
		CU_ASSERT_STRING_EQUAL(m->plan->programs[l->program].tpl, "monarch");
	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (strcmp(kernels[i].name, l->kernel) == 0) {
			kernels[i].fn(m, l);
			return;
		}
	m->unknown++;
}

/* Runs plan (prep, then timed launches) on the problem's inputs with the
 * config's buffers; returns y (malloc'ed) or NULL. */
static float *emu_run(const struct problem *p, const struct kt_config *c, const struct kt_plan *plan,
		      int round, long *oob)
{
	struct emu m;
	float *y = NULL;
	size_t e;
	int i;

	memset(&m, 0, sizeof(m));
	m.plan = plan;
	m.round = round;
	m.nb = mon->buffers(&p->s, c, m.bufs);
	CU_ASSERT_FATAL(m.nb >= p->nb && m.nb <= KT_MAX_BUFS);
	for (i = 0; i < m.nb; i++) {
		m.d[i] = malloc(m.bufs[i].elems * sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(m.d[i]);
		for (e = 0; e < m.bufs[i].elems; e++)
			m.d[i][e] = p->in[i] ? kt_bf16_to_f32(p->in[i][e])
					     : m.bufs[i].role == KT_BUF_OUTPUT ? NAN : 0.f;
	}
	for (i = 0; i < plan->nprep; i++)
		emu_launch(&m, &plan->prep[i]);
	for (i = 0; i < plan->nlaunch; i++)
		emu_launch(&m, &plan->launch[i]);
	CU_ASSERT_EQUAL(m.unknown, 0);
	*oob = m.oob;
	y = m.d[3];
	m.d[3] = NULL;
	for (i = 0; i < m.nb; i++)
		free(m.d[i]);
	return y;
}

static int count_nonfinite(const float *y, size_t n)
{
	int bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad += !isfinite(y[i]);
	return bad;
}

/* The GPU reference's math (ref_plan through the emulator) vs cpu_ref. */
static void test_gpu_ref_on_host(void)
{
	struct kt_target t = target("sm_90");
	size_t i;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct problem p;
		struct kt_plan plan;
		struct kt_err e = {0};
		float *y;
		long oob;
		int round;

		problem_init(&p, small_shapes[i], 11 + i);
		CU_ASSERT_EQUAL_FATAL(mon->ref_plan(&p.s, &t, &plan, &e), 0);
		CU_ASSERT_EQUAL(plan.nprep, 0);
		{
			char why[200];

			CU_ASSERT_EQUAL(wk_plan_check(&plan, p.nb, why, sizeof(why)), 0);
		}
		for (round = 0; round < 2; round++) {
			double rel;

			y = emu_run(&p, NULL, &plan, round, &oob);
			CU_ASSERT_EQUAL(oob, 0);
			CU_ASSERT_EQUAL(count_nonfinite(y, p.bufs[3].elems), 0);
			rel = rel_l2(y, p.ref, p.bufs[3].elems);
			/* fp32 accumulation; then bf16 output rounding */
			CU_ASSERT(rel < (round ? 4e-3 : 1e-5));
			if (rel >= (round ? 4e-3 : 1e-5))
				fprintf(stderr, "\n  ref_plan %s round=%d: rel %.3g\n", small_shapes[i],
					round, rel);
			free(y);
		}
		problem_release(&p);
	}
}

struct collect {
	struct kt_shape s;
	struct kt_target t;
	int variant;
	long n;
	struct kt_config first, last, mid;
};

static int collect_one(const struct kt_config *c, void *arg)
{
	struct collect *x = arg;
	char why[200];

	if (c->variant != x->variant || mon->check(&x->s, c, &x->t, why, sizeof(why)))
		return 0;
	if (x->n == 0)
		x->first = *c;
	if (x->n % 97 == 13 || x->n == 0)
		x->mid = *c;
	x->last = *c;
	x->n++;
	return 0;
}

/* Each variant's plan, prep included, on the host vs cpu_ref. */
static void test_variants_on_host(void)
{
	/* sm_90a: the mma.sync and the wgmma variants */
	struct kt_target t = target("sm_90a");
	int emulated[KT_MAX_VARIANTS] = {0};
	size_t i;
	int v, k;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct problem p;

		problem_init(&p, small_shapes[i], 21 + i);
		for (v = 0; v < mon->nvariants; v++) {
			struct collect x;
			const struct kt_config *cs[3];

			memset(&x, 0, sizeof(x));
			x.s = p.s;
			x.t = t;
			x.variant = v;
			kt_space_foreach(mon, 0, collect_one, &x);
			if (is_relayout(v) && (SV(p.s, "rank") / SV(p.s, "blocks")) % 8) {
				CU_ASSERT_EQUAL(x.n, 0);	/* rank/blocks % 8 != 0 */
				continue;
			}
			/* wgmma's 64-row tiles are pruned for few tokens (ws:
			 * also 64-row tiles for 32 tokens) */
			CU_ASSERT_FATAL(x.n > 0 || (is_wgmma(v) && SV(p.s, "tokens") <= 32));
			if (x.n == 0)
				continue;
			emulated[v]++;
			cs[0] = &x.first;
			cs[1] = &x.mid;
			cs[2] = &x.last;
			for (k = 0; k < 3; k++) {
				struct kt_plan plan;
				struct kt_err e = {0};
				char key[256];
				double rel;
				long oob;
				float *y;
				int round;

				CU_ASSERT_EQUAL_FATAL(mon->plan(&p.s, cs[k], &t, &plan, &e), 0);
				kt_config_key(mon, cs[k], key, sizeof(key));
				/* monarch_bm: no output permutation */
				CU_ASSERT_EQUAL(plan.nlaunch, blockmajor ? 3 : 4);
				{
					int pr, wg = 0, ws = 0, gl;

					for (pr = 0; pr < plan.nprograms; pr++) {
						wg += define_of(&plan.programs[pr], "WGMMA") == 1;
						ws += define_of(&plan.programs[pr], "WS") == 1;
					}
					/* every GEMM program on the variant's MMA path */
					CU_ASSERT_EQUAL(wg, is_wgmma(v) && !is_ws(v) ? plan.nprograms - 1 : 0);
					CU_ASSERT_EQUAL(ws, is_ws(v) ? plan.nprograms - 1 : 0);
					/* ws: both GEMM stages on gemm_tn_ws, through maps */
					for (pr = gl = 0; pr < plan.nlaunch; pr++)
						gl += strcmp(plan.launch[pr].kernel,
							     is_ws(v) ? "gemm_tn_ws" : "gemm_tn") == 0;
					CU_ASSERT_EQUAL(gl, 2);
					if (is_ws(v)) {
						/* stage 1's x: blocks side by side in a row */
						CU_ASSERT_EQUAL(plan.launch[0].args[8].i,
								SV(p.s, "blocks") > 1 ? 2 : 1);
						CU_ASSERT_EQUAL(plan.launch[2].args[8].i, 1);
					}
				}
				if (is_relayout(v)) {
					CU_ASSERT_EQUAL(plan.nprep, 1);
					CU_ASSERT(strlen(plan.transform) > 10);
				} else {
					CU_ASSERT_EQUAL(plan.nprep, 0);
					CU_ASSERT_STRING_EQUAL(plan.transform, "");
				}
				for (round = 0; round < 2; round++) {
					y = emu_run(&p, cs[k], &plan, round, &oob);
					rel = rel_l2(y, p.ref, p.bufs[3].elems);
					CU_ASSERT_EQUAL(oob, 0);
					CU_ASSERT_EQUAL(count_nonfinite(y, p.bufs[3].elems), 0);
					/* exact: the plan is the math; rounded: bf16 z, g, y2
					 * and y stay well inside the family's tolerance */
					CU_ASSERT(rel < (round ? mon->tol / 2 : 1e-5));
					if (rel >= (round ? mon->tol / 2 : 1e-5) || oob)
						fprintf(stderr, "\n  %s %s round=%d: rel %.3g, %ld OOB\n",
							small_shapes[i], key, round, rel, oob);
					free(y);
				}
				/* control (ws): x's map read as (k, rows, batch) --
				 * the kernel ignoring zA = 2 -- is wrong */
				if (is_ws(v) && SV(p.s, "blocks") > 1) {
					struct kt_plan bad = plan;
					struct kt_tmap *bm = &bad.launch[0].args[0].tmap;

					bad.launch[0].args[8].i = 1;
					bm->box[1] = bm->box[2];
					bm->box[2] = 1;
					y = emu_run(&p, cs[k], &bad, 0, &oob);
					CU_ASSERT(rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
					free(y);
				}
				/* control: relayout's stage 1 on the canonical w1 (the
				 * transform skipped) is wrong */
				if (is_relayout(v) && SV(p.s, "blocks") > 1) {
					plan.nprep = 0;
					plan.launch[0].args[1].buf = 1;	/* w1 (map or pointer) */
					y = emu_run(&p, cs[k], &plan, 0, &oob);
					CU_ASSERT(rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
					free(y);
				}
			}
		}
		problem_release(&p);
	}
	for (v = 0; v < mon->nvariants; v++)
		CU_ASSERT(emulated[v] > 0);
}

/* ---- shapes, checks, space ---- */

static void expect_shape_error(const char *text, const char *want)
{
	struct kt_shape s;
	struct kt_err e = {0};

	CU_ASSERT_EQUAL(kt_shape_parse(mon, text, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	if (!strstr(e.msg, want))
		fprintf(stderr, "\n  '%s': message '%s' lacks '%s'\n", text, e.msg, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

static void test_shape_parse(void)
{
	struct kt_shape s;
	struct kt_err e = {0};
	char key[160];
	int d;

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(mon, "rank=1024,blocks=16,out=4096,in=4096,tokens=16",
					     &s, &e), 0);
	kt_shape_key(mon, &s, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "tokens=16,in=4096,out=4096,blocks=16,rank=1024");
	CU_ASSERT_EQUAL(SV(s, "blocks"), 16);
	/* blocks and rank are structural, tokens, in and out are not */
	for (d = 0; d < mon->ndims; d++)
		CU_ASSERT_EQUAL(mon->dims[d].structural,
				strcmp(mon->dims[d].name, "blocks") == 0 ||
					strcmp(mon->dims[d].name, "rank") == 0);
	expect_shape_error("tokens=16,in=4096,out=4096,rank=1024", "missing key 'blocks'");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=16", "missing key 'rank'");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=16,rank=1024,heads=2",
			   "unknown key 'heads'");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=0,rank=1024", "blocks=0 out of range");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=16,rank=4", "rank=4 out of range");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=b16,rank=1024", "not an integer");
	expect_shape_error("tokens=16,in=4096,out=4096,blocks=16,blocks=16,rank=1024", "given twice");
}

static int first_config(const struct kt_shape *s, const struct kt_target *t, int variant,
			struct kt_config *out)
{
	struct collect x;

	memset(&x, 0, sizeof(x));
	x.s = *s;
	x.t = *t;
	x.variant = variant;
	kt_space_foreach(mon, 0, collect_one, &x);
	*out = x.first;
	return x.n > 0 ? 0 : -1;
}

static void expect_reject(const char *text, const struct kt_config *c, const char *want)
{
	struct kt_shape s = shape(text);
	struct kt_target t = target("sm_90");
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";

	CU_ASSERT_EQUAL(mon->check(&s, c, &t, why, sizeof(why)), 1);
	if (!strstr(why, want))
		fprintf(stderr, "\n  '%s': why '%s' lacks '%s'\n", text, why, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	CU_ASSERT_EQUAL(mon->plan(&s, c, &t, &plan, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_EQUAL(mon->ref_plan(&s, &t, &plan, &e) == 0, strstr(want, "rank/blocks") != NULL);
}

static void test_check(void)
{
	struct kt_target t = target("sm_90");
	struct kt_shape s = shape("tokens=64,in=256,out=256,blocks=4,rank=64");
	struct kt_config naive, relayout;
	char why[200];

	CU_ASSERT_EQUAL_FATAL(first_config(&s, &t, 0, &naive), 0);
	CU_ASSERT_EQUAL_FATAL(first_config(&s, &t, 1, &relayout), 0);
	/* blocks must divide in, out and rank */
	expect_reject("tokens=64,in=258,out=256,blocks=4,rank=64", &naive, "must divide");
	expect_reject("tokens=64,in=256,out=250,blocks=4,rank=64", &naive, "must divide");
	expect_reject("tokens=64,in=256,out=256,blocks=3,rank=63", &naive, "must divide");
	/* the GEMMs' 16-byte alignment: in/blocks, out/blocks, rank */
	expect_reject("tokens=64,in=256,out=256,blocks=64,rank=64", &naive, "multiples of 8");
	expect_reject("tokens=64,in=256,out=96,blocks=8,rank=64", &naive, "multiples of 8");
	expect_reject("tokens=64,in=256,out=256,blocks=4,rank=68", &naive, "multiples of 8");
	/* relayout's chunks: rank/blocks % 8; naive runs there */
	expect_reject("tokens=64,in=256,out=256,blocks=8,rank=32", &relayout, "rank/blocks");
	s = shape("tokens=64,in=256,out=256,blocks=8,rank=32");
	CU_ASSERT_EQUAL(mon->check(&s, &naive, &t, why, sizeof(why)), 0);
	/* a GEMM tile rule reaches through: warp tile 16 x 16 multiples */
	s = shape("tokens=64,in=256,out=256,blocks=4,rank=64");
	naive.p[0] = 16;	/* BLOCK_M */
	naive.p[4] = 2;		/* WARPS_M */
	CU_ASSERT_EQUAL(mon->check(&s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "warp tile"));
	naive.variant = 7;
	CU_ASSERT_EQUAL(mon->check(&s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "variant"));
}

struct space_ctx {
	struct kt_shape s;
	struct kt_target t;
	long all, valid[KT_MAX_VARIANTS], bad_plans, roundtrip_bad;
};

/* Every valid config plans, and the plan is self-consistent. */
static int space_one(const struct kt_config *c, void *arg)
{
	struct space_ctx *x = arg;
	struct kt_buf bufs[KT_MAX_BUFS];
	struct kt_plan p;
	struct kt_config c2;
	struct kt_err e = {0};
	char why[200] = "", key[256];
	int nb, i, a, bad = 0;

	x->all++;
	kt_config_key(mon, c, key, sizeof(key));
	if (kt_config_parse(mon, key, &c2, &e) != 0 || memcmp(c2.p, c->p, sizeof(c->p)) ||
	    c2.variant != c->variant)
		x->roundtrip_bad++;
	if (mon->check(&x->s, c, &x->t, why, sizeof(why))) {
		CU_ASSERT(why[0] != 0);
		return 0;
	}
	x->valid[c->variant]++;
	if (mon->plan(&x->s, c, &x->t, &p, &e) != 0) {
		x->bad_plans++;
		return 0;
	}
	nb = mon->buffers(&x->s, c, bufs);
	bad |= p.nprograms < 1 || p.nprograms > KT_MAX_PROGRAMS || p.nlaunch < 1;
	for (i = 0; i < p.nprep + p.nlaunch; i++) {
		const struct kt_launch *l = i < p.nprep ? &p.prep[i] : &p.launch[i - p.nprep];

		bad |= l->program < 0 || l->program >= p.nprograms;
		bad |= l->smem > (unsigned)x->t.smem_optin;
		bad |= l->block[0] * l->block[1] * l->block[2] > (unsigned)x->t.max_threads;
		bad |= !l->grid[0] || !l->grid[1] || !l->grid[2] || l->grid[2] > 65535;
		for (a = 0; a < l->nargs; a++)
			if (l->args[a].kind == KT_ARG_BUF)
				bad |= l->args[a].buf < 0 || l->args[a].buf >= nb;
	}
	for (i = 0; i < p.nprograms; i++)
		bad |= !p.programs[i].tpl;
	bad |= wk_plan_check(&p, nb, why, sizeof(why)) != 0;
	if (bad) {
		x->bad_plans++;
		fprintf(stderr, "\n  bad plan for %s\n", key);
	}
	return 0;
}

static void test_space(void)
{
	const char *targets[] = {"sm_80", "sm_90", "sm_86", "sm_90a"};
	long product[KT_MAX_VARIANTS], total = 0;
	size_t i, t;
	int v, k;

	for (v = 0; v < mon->nvariants; v++) {
		product[v] = 1;
		for (k = 0; k < mon->nparams; k++)
			if ((mon->params[k].variants >> v) & 1u)
				product[v] *= mon->params[k].nvalues;
		total += product[v];
	}
	CU_ASSERT_EQUAL(kt_space_size(mon, 0), total);
	CU_ASSERT_EQUAL(kt_space_size(mon, 1), total);	/* nothing planted */
	/* modest: the two stages share all but their N tile */
	CU_ASSERT(total < 10000);
	printf("\n  monarch space %ld\n", total);
	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
		for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]); i++) {
			struct space_ctx x;

			memset(&x, 0, sizeof(x));
			x.s = shape(ref_shapes[i]);
			x.t = target(targets[t]);
			CU_ASSERT_EQUAL(kt_space_foreach(mon, 1, space_one, &x), 0);
			CU_ASSERT_EQUAL(x.all, total);
			CU_ASSERT_EQUAL(x.bad_plans, 0);
			CU_ASSERT_EQUAL(x.roundtrip_bad, 0);
			for (v = 0; v < mon->nvariants; v++) {
				/* useful but pruned, per variant; wgmma on sm_90a only */
				if (is_wgmma(v) && !x.t.arch_a) {
					CU_ASSERT_EQUAL(x.valid[v], 0);
					continue;
				}
				CU_ASSERT(x.valid[v] > (is_wgmma(v) ? 10 : 20));
				CU_ASSERT(x.valid[v] < product[v]);
			}
			printf("  %s %s: valid", targets[t], ref_shapes[i]);
			for (v = 0; v < mon->nvariants; v++)
				printf(" %s %ld", mon->variants[v], x.valid[v]);
			printf("\n");
		}
	/* decode-sized tokens still have configs */
	{
		struct space_ctx x;

		memset(&x, 0, sizeof(x));
		x.s = shape("tokens=16,in=4096,out=4096,blocks=16,rank=1024");
		x.t = target("sm_90a");
		kt_space_foreach(mon, 0, space_one, &x);
		CU_ASSERT(x.valid[0] > 0 && x.valid[1] > 0);
		CU_ASSERT_EQUAL(x.bad_plans, 0);
	}
}

static void test_defaults(void)
{
	const char *targets[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	const char *extra[] = {"tokens=16,in=4096,out=4096,blocks=16,rank=1024",
			       "tokens=1,in=64,out=64,blocks=8,rank=8"};
	size_t i, t;

	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
		for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]) + 2; i++) {
			const char *text = i < 3 ? ref_shapes[i] : extra[i - 3];
			struct kt_shape s = shape(text);
			struct kt_target tg = target(targets[t]);
			struct kt_config c;
			struct kt_plan p;
			struct kt_err e = {0};
			char why[200] = "";

			CU_ASSERT_EQUAL_FATAL(mon->default_config(&s, &tg, &c), 0);
			CU_ASSERT_EQUAL(mon->check(&s, &c, &tg, why, sizeof(why)), 0);
			if (why[0])
				fprintf(stderr, "\n  default for %s on %s: %s\n", text, targets[t], why);
			CU_ASSERT_EQUAL(mon->plan(&s, &c, &tg, &p, &e), 0);
		}
	{
		/* nothing to hand out for a shape no config can run */
		struct kt_shape s = shape("tokens=16,in=4096,out=4096,blocks=3,rank=1024");
		struct kt_target tg = target("sm_90");
		struct kt_config c;

		CU_ASSERT_EQUAL(mon->default_config(&s, &tg, &c), -1);
	}
}

/* Same FLOPs and minimum bytes as a rank-r low-rank layer (KERNELS.md's
 * table); intermediates are not in min_bytes. */
static void test_models(void)
{
	const struct kt_family *lr = kt_family_find("lowrank");
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(lr);
	for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]); i++) {
		struct kt_shape s = shape(ref_shapes[i]), ls;
		struct kt_err e = {0};
		char text[160];
		double T = SV(s, "tokens"), n = SV(s, "in"), m = SV(s, "out"), r = SV(s, "rank");

		snprintf(text, sizeof(text), "tokens=%ld,in=%ld,out=%ld,rank=%ld", SV(s, "tokens"),
			 SV(s, "in"), SV(s, "out"), SV(s, "rank"));
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lr, text, &ls, &e), 0);
		CU_ASSERT_DOUBLE_EQUAL(mon->flops(&s), lr->flops(&ls), 1e-3);
		CU_ASSERT_DOUBLE_EQUAL(mon->min_bytes(&s), lr->min_bytes(&ls), 1e-3);
		/* fewer FLOPs than the dense layer it replaces */
		CU_ASSERT(mon->flops(&s) < 2 * T * n * m);
		CU_ASSERT(mon->min_bytes(&s) > 2 * T * (n + m));
		(void)r;
	}
}

/* ---- NVRTC ---- */

#define SAMPLE_PER_VARIANT 24
#define SAMPLE_WS 6

struct job_list {
	struct kt_program *progs;
	char (*arch)[16];
	char (*label)[200];
	int n, cap;
};

static void job_add(struct job_list *j, const struct kt_program *p, const char *arch,
		    const char *label)
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

static void job_add_plan(struct job_list *j, const struct kt_shape *s, const struct kt_config *c,
			 const struct kt_target *t, const char *why)
{
	struct kt_plan p;
	struct kt_err e = {0};
	char arch[16], key[200], label[200];
	int i;

	CU_ASSERT_EQUAL_FATAL(mon->plan(s, c, t, &p, &e), 0);
	kt_target_arch(t, arch, sizeof(arch));
	kt_config_key(mon, c, key, sizeof(key));
	snprintf(label, sizeof(label), "%.160s [%.20s]", key, why);
	for (i = 0; i < p.nprograms; i++)
		job_add(j, &p.programs[i], arch, label);
}

struct pick {
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

	if (c->variant != x->variant || mon->check(&x->s, c, &x->t, why, sizeof(why)))
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
	/* stage 2's tile (BLOCK_N) stands for the smem / register extremes;
	 * stage 1's differs only in Z_BLOCK_N, covered by first and last */
	memset(&t, 0, sizeof(t));
	t.bm = c->p[0];
	t.bn = c->p[1] > c->p[2] ? c->p[1] : c->p[2];
	t.bk = is_wgmma(c->variant) ? 64 : c->p[3];
	t.wm = is_wgmma(c->variant) ? c->p[0] / 16 : c->p[4];
	t.wn = is_wgmma(c->variant) ? 1 : c->p[5];
	t.stages = c->p[6];
	t.wgmma = is_wgmma(c->variant) && !is_ws(c->variant);
	t.ws = is_ws(c->variant);
	t.consumers = t.ws ? c->p[8] : 0;
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

static uint64_t rng_state = 0x6d6f6e61726368ull;	/* fixed seed: the same sample every run */

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Queues the configs of shape on target tname: wgmma variants on sm_90a
 * only, and there only them unless all. */
static void add_shape(struct job_list *j, const char *text, const char *tname, int all)
{
	static const char *const ext_names[] = {"first", "last", "max smem", "max acc",
						"min threads", "max threads"};
	struct kt_plan rp;
	struct kt_err e = {0};
	char arch[16];
	int v, k;
	long i;

	for (v = 0; v < mon->nvariants; v++) {
		int arch_a = strcmp(tname, "sm_90a") == 0;
		struct pick x;

		if (is_wgmma(v) ? !arch_a : arch_a && !all)
			continue;
		memset(&x, 0, sizeof(x));
		x.s = shape(text);
		x.t = target(tname);
		x.variant = v;
		CU_ASSERT_EQUAL(kt_space_foreach(mon, 0, pick_one, &x), 0);
		CU_ASSERT(x.n > 0);
		if (all) {
			for (i = 0; i < x.n; i++)
				job_add_plan(j, &x.s, &x.valid[i], &x.t, "all");
		} else if (x.n > 0) {
			for (k = 0; k < 6; k++)
				job_add_plan(j, &x.s, &x.ext[k], &x.t, ext_names[k]);
			/* the ws variants: a smaller sample (CI time) */
			for (k = 0; k < (is_ws(v) ? SAMPLE_WS : SAMPLE_PER_VARIANT); k++)
				job_add_plan(j, &x.s, &x.valid[rng_next() % (uint64_t)x.n], &x.t,
					     "sample");
		}
		free(x.valid);
	}
	{
		struct kt_shape s = shape(text);
		struct kt_target t = target(tname);

		CU_ASSERT_EQUAL_FATAL(mon->ref_plan(&s, &t, &rp, &e), 0);
		kt_target_arch(&t, arch, sizeof(arch));
		for (k = 0; k < rp.nprograms; k++)
			job_add(j, &rp.programs[k], arch, "reference");
	}
}

static void test_compile(void)
{
	const char *all = getenv("KTUNE_COMPILE_ALL");
	int everything = all && strcmp(all, "1") == 0;
	const char *targets[] = {"sm_80", "sm_90", "sm_90a"};
	struct job_list j;
	struct jit_job *jobs;
	size_t t, i;
	int k, ok = 0, monarch_seen = 0;

	memset(&j, 0, sizeof(j));
	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
		if (everything)
			for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]); i++)
				add_shape(&j, ref_shapes[i], targets[t], 1);
		else {
			add_shape(&j, ref_shapes[0], targets[t], 0);
			add_shape(&j, ref_shapes[2], targets[t], 0);
		}
	}
	jobs = calloc((size_t)j.n, sizeof(*jobs));
	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	for (k = 0; k < j.n; k++) {
		jobs[k].prog = &j.progs[k];
		jobs[k].arch = j.arch[k];
	}
	printf("\n  compiling %d programs (NVRTC %s)\n", j.n, jit_nvrtc_version());
	jit_compile_all(jobs, j.n, 0);
	for (k = 0; k < j.n; k++) {
		struct jit_result *r = &jobs[k].res;

		CU_ASSERT_EQUAL(jobs[k].failed, 0);
		CU_ASSERT(r->ok && r->cubin && r->cubin_len > 64);
		if (jobs[k].failed || !r->ok) {
			fprintf(stderr, "  FAILED %s %s %s: %s\n%s\n", j.arch[k], j.progs[k].tpl,
				j.label[k], jobs[k].err_msg, r->log ? r->log : "");
			continue;
		}
		ok++;
		monarch_seen += strcmp(j.progs[k].tpl, "monarch") == 0;
	}
	/* the data-movement / reference template (no defines), once per target */
	CU_ASSERT_EQUAL(monarch_seen, 3);
	printf("  %d/%d compiled\n", ok, j.n);
	for (k = 0; k < j.n; k++)
		jit_result_release(&jobs[k].res);
	free(jobs);
	free(j.progs);
	free(j.arch);
	free(j.label);
}

static void add_cpu_tests(CU_pSuite s)
{
	CU_add_test(s, "cpu_ref vs the materialized dense W", test_cpu_ref_vs_dense);
	CU_add_test(s, "outputs are O(1)", test_output_scale);
	CU_add_test(s, "GPU reference's math on the host vs cpu_ref", test_gpu_ref_on_host);
	CU_add_test(s, "every variant's plan on the host vs cpu_ref", test_variants_on_host);
	CU_add_test(s, "shape parse", test_shape_parse);
	CU_add_test(s, "check rejects", test_check);
	CU_add_test(s, "space, pruning, every valid config plans", test_space);
	CU_add_test(s, "default configs", test_defaults);
	CU_add_test(s, "flops and bytes", test_models);
}

/* monarch_bm's y[t][i*mb + s] is monarch's y[t][s*b + i], bit for bit (the
 * same double sums), and the two differ as arrays where b > 1. */
static void test_bm_is_permuted(void)
{
	const struct kt_family *f = kt_family_find("monarch"), *g = kt_family_find("monarch_bm");
	size_t k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	for (k = 0; k < sizeof(small_shapes) / sizeof(small_shapes[0]); k++) {
		struct problem p;
		struct kt_err e = {0};
		long T, m, b, mb, t, i, sx, same = 0, mism = 0;
		float *yi;
		float *outs[1];

		mon = g;
		blockmajor = 1;
		problem_init(&p, small_shapes[k], 31 + k);
		T = SV(p.s, "tokens");
		m = SV(p.s, "out");
		b = SV(p.s, "blocks");
		mb = m / b;
		yi = malloc(sizeof(float) * (size_t)(T * m));
		CU_ASSERT_PTR_NOT_NULL_FATAL(yi);
		outs[0] = yi;
		CU_ASSERT_EQUAL_FATAL(f->cpu_ref(&p.s, (const void *const *)p.in, outs, &e), 0);
		for (t = 0; t < T; t++)
			for (i = 0; i < b; i++)
				for (sx = 0; sx < mb; sx++) {
					mism += p.ref[t * m + i * mb + sx] != yi[t * m + sx * b + i];
					same += p.ref[t * m + i * mb + sx] == yi[t * m + i * mb + sx];
				}
		CU_ASSERT_EQUAL(mism, 0);
		CU_ASSERT(same < T * m / 2);
		free(yi);
		problem_release(&p);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("monarch (CPU)", init_monarch, NULL);
	add_cpu_tests(s);
	s = CU_add_suite("monarch_bm (CPU)", init_monarch_bm, NULL);
	add_cpu_tests(s);
	CU_add_test(s, "block-major y is the interleaved y, columns permuted", test_bm_is_permuted);
	s = CU_add_suite("monarch (NVRTC)", init_monarch, NULL);
	CU_add_test(s, "compile extremes and a sample for sm_80, sm_90 (+ wgmma, ws: sm_90a)",
		    test_compile);
	return kt_test_main();
}
