/*
 * test_blockattn.c -- jagged block attention (blockattn_fwd, blockattn_bwd)
 * on the CPU: the generator, the CPU references against independent
 * computations (a naive per-token forward, finite differences of the
 * forward for the backward, with and without rotary), the descriptors
 * (shapes, configs, plans) and NVRTC compiles of the templates.
 *
 * The compile suite compiles, for sm_80 and sm_90, the default config and
 * the GPU reference of every (head_dim, block, rope), the first and last
 * valid configs of the bench shape (seqs=1152, lmax=256, heads=4,
 * head_dim=128, block=64, rope 0 and 1) and a fixed-seed sample of its other
 * programs (CI_SAMPLE); KTUNE_COMPILE_ALL=1 compiles every distinct program
 * of every valid config of every (head_dim, block, rope) at blocks 64 and
 * 128 (block 256's programs, the forward's key-chunked and ws and the
 * backward's chunked: in their own suite below, for sm_80 and sm_90a, no
 * spill and no ws wgmma serialized; here only as the first with a KCH or QP
 * value). For sm_90a it compiles programs of the `ws` variant (the only one
 * that needs the `a` features): each (fwd/bwd, head_dim, block, rope)'s
 * first and last that check() admits at blocks 64 and 128, the first with
 * each parameter value and a sample (KTUNE_COMPILE_ALL=1: every one), none
 * of which may spill or, but the backward's at block 64 and head_dim 64,
 * have its wgmmas serialized. Every compiled cubin must hold the kernels its
 * plans name (the prep launch's blockattn_blocks included).
 *
 * A GPU suite (below, inactive without a GPU) runs every config on small
 * ragged shapes against both references and at the bench shape against
 * the GPU reference, and can time them (KTUNE_BLOCKATTN_BENCH). The device
 * is compiled for as a sweep does (kt_target_arch: sm_90a on an sm_90
 * device, so `ws` runs there with the rest).
 * KTUNE_BLOCKATTN_GPU_ONLY=1 leaves the compile suite out (for a timed
 * GPU call; CI runs it). KTUNE_BLOCKATTN_VARIANT=NAME restricts the GPU
 * suite (small shapes, bench shape, timing) to configs of variant NAME
 * (e.g. ws; a family without it is left out), for a short device call
 * while one variant's kernels change. KTUNE_BLOCKATTN_BENCH_ONLY=S: only
 * the bench-shape workloads whose name holds S; KTUNE_BLOCKATTN_SMALL_ONLY=1:
 * the small shapes alone; KTUNE_BLOCKATTN_BLOCK=N: the small shapes at block
 * N only.
 *
 * Dump mode, for the bench's final run: with KTUNE_BLOCKATTN_DUMP=DIR and
 * KTUNE_BLOCKATTN_DUMP_CONFIG=KEY (a blockattn_bwd config key as
 * kt_config_key / `ktune sweep --json` prints it) the program registers
 * one test only: KEY at seqs=1152,lmax=256,heads=4,head_dim=128,block=B,
 * rope=0, verified against the GPU reference (the family's tolerance), then
 * DIR/{q,k,v,do}.bf16, offsets.i32, {dq,dk,dv}_ktune.bf16 (its gradients),
 * dq_config.txt (KEY, canonical) and shape.txt (that shape's key) written,
 * and "dumped dq of KEY: rel_err X" printed. B is KTUNE_BLOCKATTN_DUMP_BLOCK:
 * 64 (unset or empty; ads_d128_L256) or 128 (ads_d128_L256_b128). A block
 * other than those, or a key that does not parse, check or plan at that
 * block, fails with the reason, with or without a GPU.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/blockattn.h"
#include "kernels/family.h"
#include "testutil.h"
#include "tuner/jit.h"

static const struct kt_family *const fams[2] = {&blockattn_fwd_family, &blockattn_bwd_family};
/* the block sizes both families take (ws: 64 and 128); the forward also
 * takes 256, ws too (test_block256; the loops that cover it say so) */
static const int BLKS[] = {32, 64, 128};
#define NBLKS ((int)(sizeof(BLKS) / sizeof(BLKS[0])))
/* the smallest config of each family, as text */
static const char *const base_cfg[2] = {
	"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1",
	"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=0",
};

/* ---- helpers ---- */

/* Deterministic doubles in (-a, a) (an LCG: independent of kt_fill_value). */
static void rand_fill(double *x, size_t n, uint64_t seed, double a)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = ((double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0) * a;
	}
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
	double m = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (fabs(a[i] - b[i]) > m)
			m = fabs(a[i] - b[i]);
	return m;
}

static double *dalloc(size_t n)
{
	double *p = calloc(n, sizeof(double));

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

/* A ragged problem from explicit lengths. */
struct prob {
	struct ba_dims p;
	int32_t off[16];
	double *q, *k, *v, *dout, *table;
	size_t n;
};

static void prob_init(struct prob *pr, const long *lens, int nseq, long heads, long d, long blk,
		      uint64_t seed)
{
	int i;

	memset(pr, 0, sizeof(*pr));
	pr->off[0] = 0;
	for (i = 0; i < nseq; i++)
		pr->off[i + 1] = pr->off[i] + (int32_t)lens[i];
	pr->p.seqs = nseq;
	pr->p.heads = heads;
	pr->p.d = d;
	pr->p.blk = blk;
	pr->p.tokens = pr->off[nseq];
	pr->p.offsets = pr->off;
	pr->n = (size_t)(pr->p.tokens * heads * d);
	pr->q = dalloc(pr->n);
	pr->k = dalloc(pr->n);
	pr->v = dalloc(pr->n);
	pr->dout = dalloc(pr->n);
	pr->table = dalloc((size_t)(pr->p.tokens * d));
	rand_fill(pr->q, pr->n, seed + 1, 2.0);
	rand_fill(pr->k, pr->n, seed + 2, 2.0);
	rand_fill(pr->v, pr->n, seed + 3, 1.0);
	rand_fill(pr->dout, pr->n, seed + 4, 1.0);
	{
		uint16_t *t = calloc((size_t)(pr->p.tokens * d), sizeof(*t));
		size_t j;

		CU_ASSERT_PTR_NOT_NULL_FATAL(t);
		ba_rope_table(pr->off, nseq, d, t);
		for (j = 0; j < (size_t)(pr->p.tokens * d); j++)
			pr->table[j] = kt_bf16_to_f32(t[j]);
		free(t);
	}
}

static void prob_release(struct prob *pr)
{
	free(pr->q);
	free(pr->k);
	free(pr->v);
	free(pr->dout);
	free(pr->table);
}

/* ---- the generator ---- */

static void test_lengths(void)
{
	/* SplitMix64 seeded 0, written as the stateful generator */
	uint64_t state = 0;
	long lmaxes[] = {1, 5, 64, 256, 1024}, i;
	size_t a;

	for (i = 0; i < 200; i++) {
		uint64_t z = (state += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		if (i == 0)	/* the published first output of SplitMix64(0) */
			CU_ASSERT_EQUAL(z, 0xe220a8397b1dcdafull);
		for (a = 0; a < sizeof(lmaxes) / sizeof(lmaxes[0]); a++) {
			long lmax = lmaxes[a], lo = ba_len_min(lmax);

			CU_ASSERT_EQUAL(ba_length(lmax, i), lo + (long)(z % (uint64_t)(lmax - lo + 1)));
		}
	}
	for (a = 0; a < sizeof(lmaxes) / sizeof(lmaxes[0]); a++) {
		long lmax = lmaxes[a], lo = ba_len_min(lmax), seen_lo = lmax, seen_hi = 0, t = 0;
		long nblk = 0;
		int32_t *off = calloc(1153, sizeof(*off)), *off2 = calloc(1153, sizeof(*off2));

		CU_ASSERT_PTR_NOT_NULL_FATAL(off);
		CU_ASSERT_PTR_NOT_NULL_FATAL(off2);
		/* (2 rho - 1) lmax with rho = 0.7, floored, at least 1 */
		CU_ASSERT_EQUAL(lo, (long)floor(0.4 * (double)lmax + 1e-9) > 0 ?
					    (long)floor(0.4 * (double)lmax + 1e-9) : 1);
		ba_offsets(1152, lmax, off);
		ba_offsets(1152, lmax, off2);
		CU_ASSERT_EQUAL(memcmp(off, off2, 1153 * sizeof(*off)), 0);
		CU_ASSERT_EQUAL(off[0], 0);
		for (i = 0; i < 1152; i++) {
			long len = off[i + 1] - off[i];

			CU_ASSERT(len >= lo && len <= lmax);
			seen_lo = len < seen_lo ? len : seen_lo;
			seen_hi = len > seen_hi ? len : seen_hi;
			t += len;
			nblk += (len + 63) / 64;
		}
		CU_ASSERT_EQUAL(t, off[1152]);
		CU_ASSERT_EQUAL(t, ba_tokens(1152, lmax));
		CU_ASSERT_EQUAL(nblk, ba_blocks(1152, lmax, 64));
		/* 1152 draws cover the range (not a constant) */
		if (lmax - lo >= 4) {
			CU_ASSERT(seen_lo < lo + (lmax - lo) / 4);
			CU_ASSERT(seen_hi > lmax - (lmax - lo) / 4);
		}
		free(off);
		free(off2);
	}
}

/* x rounded to bf16 (the table's type), back in double. */
static double bf16_of(double x)
{
	return kt_bf16_to_f32(kt_f32_to_bf16((float)x));
}

static void test_rope_table(void)
{
	long lens[] = {3, 70};
	struct prob pr;
	long t, i;

	prob_init(&pr, lens, 2, 1, 8, 4, 1);
	for (t = 0; t < pr.p.tokens; t++) {
		long pos = t < 3 ? t : t - 3;

		for (i = 0; i < 4; i++) {
			double th = (double)pos / pow(10000.0, (double)(2 * i) / 8.0);

			/* bf16: the nearest of cos, sin, within half an ulp (2^-9) */
			CU_ASSERT(pr.table[t * 8 + 2 * i] == bf16_of(cos(th)));
			CU_ASSERT(pr.table[t * 8 + 2 * i + 1] == bf16_of(sin(th)));
			CU_ASSERT(fabs(pr.table[t * 8 + 2 * i] - cos(th)) <= fabs(cos(th)) / 255);
			CU_ASSERT(fabs(pr.table[t * 8 + 2 * i + 1] - sin(th)) <= fabs(sin(th)) / 255);
		}
	}
	prob_release(&pr);
}

/* ---- CPU references ---- */

/* Naive forward of token t, head h: its block by arithmetic on the
 * position, the softmax by log-sum-exp, the rotation from the angles
 * themselves (not the table), their cos and sin rounded to bf16 as the
 * table's are. */
static void naive_row(const struct prob *pr, int rope, long t, long h, double *o)
{
	long s = 0, H = pr->p.heads, d = pr->p.d, b0, b1, j, c;
	double scale = 1.0 / sqrt((double)d), lse, m = -INFINITY, sc[256];

	while (pr->off[s + 1] <= t)
		s++;
	b0 = pr->off[s] + (t - pr->off[s]) / pr->p.blk * pr->p.blk;
	b1 = b0 + pr->p.blk < pr->off[s + 1] ? b0 + pr->p.blk : pr->off[s + 1];
	for (j = b0; j < b1; j++) {
		double acc = 0;

		for (c = 0; c < d; c += 2) {
			const double *qr = pr->q + (t * H + h) * d, *kr = pr->k + (j * H + h) * d;
			double q0 = qr[c], q1 = qr[c + 1], k0 = kr[c], k1 = kr[c + 1];

			if (rope) {
				double w = pow(10000.0, -(double)c / (double)d);
				double aq = (double)(t - pr->off[s]) * w, ak = (double)(j - pr->off[s]) * w;
				double cq = bf16_of(cos(aq)), sq = bf16_of(sin(aq));
				double ck = bf16_of(cos(ak)), sk = bf16_of(sin(ak));
				double rq0 = q0 * cq - q1 * sq, rq1 = q0 * sq + q1 * cq;
				double rk0 = k0 * ck - k1 * sk, rk1 = k0 * sk + k1 * ck;

				q0 = rq0, q1 = rq1, k0 = rk0, k1 = rk1;
			}
			acc += q0 * k0 + q1 * k1;
		}
		sc[j - b0] = acc * scale;
		m = sc[j - b0] > m ? sc[j - b0] : m;
	}
	lse = 0;
	for (j = b0; j < b1; j++)
		lse += exp(sc[j - b0] - m);
	lse = m + log(lse);
	for (c = 0; c < d; c++) {
		double acc = 0;

		for (j = b0; j < b1; j++) {
			const double *vr = pr->v + (j * H + h) * d;
			double x = vr[c];

			if (rope == 2) {	/* v's pair by key j's position */
				long p = c & ~1L;
				double w = pow(10000.0, -(double)p / (double)d);
				double av = (double)(j - pr->off[s]) * w;
				double cv = bf16_of(cos(av)), sv = bf16_of(sin(av));

				x = (c & 1) ? vr[p] * sv + vr[p + 1] * cv : vr[p] * cv - vr[p + 1] * sv;
			}
			acc += exp(sc[j - b0] - lse) * x;
		}
		o[c] = acc;
	}
}

static void check_fwd_naive(long blk, int rope)
{
	/* shorter than a block, exact blocks, ragged tails, a 1-token
	 * sequence; at block 256 one exact block and two ragged tails */
	long lens[] = {1, 5, 64, 70, 130, 17, 128, 256, 300, 530};
	struct prob pr;
	double *o, row[128];
	long t, h;
	double worst = 0;

	prob_init(&pr, lens, 10, 2, 64, blk, 7 + (uint64_t)blk + (uint64_t)rope);
	o = dalloc(pr.n);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_fwd(&pr.p, pr.q, pr.k, pr.v, rope ? pr.table : NULL, rope == 2,
					 o), 0);
	for (t = 0; t < pr.p.tokens; t++)
		for (h = 0; h < 2; h++) {
			double dd;

			naive_row(&pr, rope, t, h, row);
			dd = max_abs_diff(row, o + (t * 2 + h) * 64, 64);
			worst = dd > worst ? dd : worst;
		}
	/* the same bf16 cos, sin on both sides: double's rounding only */
	CU_ASSERT(worst < 1e-12);
	if (!(worst < 1e-12))
		fprintf(stderr, "fwd blk=%ld rope=%d: max |diff| %g\n", blk, rope, worst);
	free(o);
	prob_release(&pr);
}

static void test_fwd_vs_naive(void)
{
	check_fwd_naive(64, 0);
	check_fwd_naive(128, 0);
	check_fwd_naive(64, 1);
	check_fwd_naive(64, 2);
	check_fwd_naive(128, 2);
	check_fwd_naive(256, 0);
	check_fwd_naive(256, 2);
}

/* The output must differ from a uniform average of v (softmax is not
 * degenerate at the fill scales) -- else the checks above prove little. */
static void test_fwd_not_degenerate(void)
{
	long lens[] = {64};
	struct prob pr;
	double *o, mean[64] = {0}, dev = 0;
	long t, c;

	prob_init(&pr, lens, 1, 1, 64, 64, 11);
	o = dalloc(pr.n);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_fwd(&pr.p, pr.q, pr.k, pr.v, NULL, 0, o), 0);
	for (t = 0; t < 64; t++)
		for (c = 0; c < 64; c++)
			mean[c] += pr.v[t * 64 + c] / 64.0;
	for (t = 0; t < 64; t++)
		for (c = 0; c < 64; c++)
			dev += fabs(o[t * 64 + c] - mean[c]);
	CU_ASSERT(dev / (64.0 * 64.0) > 0.05);
	free(o);
	prob_release(&pr);
}

/* L = sum(o * dout) */
static double loss(struct prob *pr, const double *table, int rot_v, double *o)
{
	double l = 0;
	size_t i;

	CU_ASSERT_EQUAL_FATAL(ba_cpu_fwd(&pr->p, pr->q, pr->k, pr->v, table, rot_v, o), 0);
	for (i = 0; i < pr->n; i++)
		l += o[i] * pr->dout[i];
	return l;
}

static void check_bwd_fd(int rope)
{
	long lens[] = {3, 9, 4};	/* blk 4: blocks of 3 | 4 4 1 | 4 */
	struct prob pr;
	double *dq, *dk, *dv, *o, *x[3], *g[3], worst = 0;
	const double eps = 1e-5;
	const double *table;
	int a;
	size_t i;

	prob_init(&pr, lens, 3, 2, 8, 4, 21 + (uint64_t)rope);
	table = rope ? pr.table : NULL;
	dq = dalloc(pr.n);
	dk = dalloc(pr.n);
	dv = dalloc(pr.n);
	o = dalloc(pr.n);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_bwd(&pr.p, pr.q, pr.k, pr.v, pr.dout, table, rope == 2, dq, dk,
					 dv), 0);
	x[0] = pr.q, x[1] = pr.k, x[2] = pr.v;
	g[0] = dq, g[1] = dk, g[2] = dv;
	for (a = 0; a < 3; a++)
		for (i = 0; i < pr.n; i++) {
			double keep = x[a][i], lp, lm, fd, err;

			x[a][i] = keep + eps;
			lp = loss(&pr, table, rope == 2, o);
			x[a][i] = keep - eps;
			lm = loss(&pr, table, rope == 2, o);
			x[a][i] = keep;
			fd = (lp - lm) / (2 * eps);
			err = fabs(fd - g[a][i]) / (1.0 + fabs(fd));
			worst = err > worst ? err : worst;
		}
	CU_ASSERT(worst < 1e-7);
	if (!(worst < 1e-7))
		fprintf(stderr, "bwd rope=%d: worst relative FD error %g\n", rope, worst);
	/* and the gradient is not trivially zero */
	CU_ASSERT(fabs(dq[0]) + fabs(dk[1]) + fabs(dv[2]) > 0);
	free(dq);
	free(dk);
	free(dv);
	free(o);
	prob_release(&pr);
}

static void test_bwd_fd(void)
{
	check_bwd_fd(0);
}

static void test_bwd_rope_fd(void)
{
	check_bwd_fd(1);
	check_bwd_fd(2);
}

/* The fused-rotary backward equals the plain backward on rotated q, k
 * (and v with rot_v) followed by the conjugate rotation of dq, dk (and
 * dv; else dv unchanged) -- what bench's unfused_rope peer computes. */
static void check_rope_is_conj_of_plain(int rot_v)
{
	long lens[] = {1, 70, 33};
	struct prob pr;
	double *g1[3], *g2[3], *r[3];
	int a;

	prob_init(&pr, lens, 3, 2, 64, 64, 33);
	for (a = 0; a < 3; a++) {
		g1[a] = dalloc(pr.n);
		g2[a] = dalloc(pr.n);
		r[a] = dalloc(pr.n);
	}
	memcpy(r[0], pr.q, pr.n * sizeof(double));
	memcpy(r[1], pr.k, pr.n * sizeof(double));
	memcpy(r[2], pr.v, pr.n * sizeof(double));
	for (a = 0; a < (rot_v ? 3 : 2); a++)
		ba_rotate(&pr.p, pr.table, r[a], 0);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_bwd(&pr.p, pr.q, pr.k, pr.v, pr.dout, pr.table, rot_v, g1[0],
					 g1[1], g1[2]), 0);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_bwd(&pr.p, r[0], r[1], r[2], pr.dout, NULL, 0, g2[0], g2[1],
					 g2[2]), 0);
	/* before the conjugate rotation they differ ... */
	for (a = 0; a < (rot_v ? 3 : 2); a++)
		CU_ASSERT(max_abs_diff(g1[a], g2[a], pr.n) > 1e-3);
	for (a = 0; a < (rot_v ? 3 : 2); a++)
		ba_rotate(&pr.p, pr.table, g2[a], 1);
	/* ... after it they agree */
	for (a = 0; a < 3; a++)
		CU_ASSERT(max_abs_diff(g1[a], g2[a], pr.n) < 1e-12);
	for (a = 0; a < 3; a++) {
		free(g1[a]);
		free(g2[a]);
		free(r[a]);
	}
	prob_release(&pr);
}

static void test_bwd_rope_is_conj_of_plain(void)
{
	check_rope_is_conj_of_plain(0);
	check_rope_is_conj_of_plain(1);
}

/* rope=2 changes every output: v rotated is not v */
static void test_rope_v_differs(void)
{
	long lens[] = {70, 33};
	struct prob pr;
	double *o1, *o2, *g1[3], *g2[3];
	int a;

	prob_init(&pr, lens, 2, 2, 64, 64, 35);
	o1 = dalloc(pr.n);
	o2 = dalloc(pr.n);
	for (a = 0; a < 3; a++) {
		g1[a] = dalloc(pr.n);
		g2[a] = dalloc(pr.n);
	}
	CU_ASSERT_EQUAL_FATAL(ba_cpu_fwd(&pr.p, pr.q, pr.k, pr.v, pr.table, 0, o1), 0);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_fwd(&pr.p, pr.q, pr.k, pr.v, pr.table, 1, o2), 0);
	CU_ASSERT(max_abs_diff(o1, o2, pr.n) > 1e-2);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_bwd(&pr.p, pr.q, pr.k, pr.v, pr.dout, pr.table, 0, g1[0],
					 g1[1], g1[2]), 0);
	CU_ASSERT_EQUAL_FATAL(ba_cpu_bwd(&pr.p, pr.q, pr.k, pr.v, pr.dout, pr.table, 1, g2[0],
					 g2[1], g2[2]), 0);
	for (a = 0; a < 3; a++)
		CU_ASSERT(max_abs_diff(g1[a], g2[a], pr.n) > 1e-3);
	free(o1);
	free(o2);
	for (a = 0; a < 3; a++) {
		free(g1[a]);
		free(g2[a]);
	}
	prob_release(&pr);
}

/* ---- descriptors ---- */

static void test_shape_parse(void)
{
	static const char *const bad[] = {
		"seqs=4,lmax=70,heads=2,head_dim=64,block=64",		  /* rope missing */
		"seqs=4,lmax=70,heads=2,head_dim=64,block=64,rope=3",	  /* out of range */
		"seqs=4,lmax=70,heads=2,head_dim=256,block=64,rope=0",	  /* head_dim */
		"seqs=4,lmax=70,heads=2,head_dim=64,block=16,rope=0",	  /* block */
		"seqs=0,lmax=70,heads=2,head_dim=64,block=64,rope=0",	  /* seqs */
		"tokens=4,lmax=70,heads=2,head_dim=64,block=64,rope=0",	  /* unknown key */
		"seqs=4,lmax=x,heads=2,head_dim=64,block=64,rope=0",	  /* not a number */
	};
	struct kt_shape s;
	struct kt_err e;
	char key[128];
	size_t i;
	int f;

	for (f = 0; f < 2; f++) {
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			kt_err_clear(&e);
			CU_ASSERT_EQUAL(kt_shape_parse(fams[f], bad[i], &s, &e), -1);
			CU_ASSERT_EQUAL(e.code, KT_EINVAL);
		}
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(fams[f],
			"rope=1,block=64,head_dim=128,heads=4,lmax=256,seqs=1152", &s, &e), 0);
		kt_shape_key(fams[f], &s, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1");
	}
}

static int parse(const struct kt_family *f, const char *text, struct kt_shape *s)
{
	struct kt_err e;

	kt_err_clear(&e);
	return kt_shape_parse(f, text, s, &e);
}

static void test_check_rejects(void)
{
	struct kt_target t90;
	struct kt_shape s;
	struct kt_config c;
	struct kt_err e;
	char why[160];
	int f;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	for (f = 0; f < 2; f++) {
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[f],
			base_cfg[f], &c, &e), 0);
		/* head_dim 96 parses (in range) but no kernel takes it */
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=96,block=64,rope=0",
					    &s), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "head_dim"));
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=64,block=100,rope=0",
					    &s), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		/* offsets are int32 */
		CU_ASSERT_EQUAL_FATAL(parse(fams[f],
			"seqs=1048576,lmax=65536,heads=2,head_dim=64,block=64,rope=0", &s), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=64,block=64,rope=0",
					    &s), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 0);
		c.p[0] = 48;	/* ROWS_W */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		/* block 32: ROWS_W 32 (one row group) at head_dim 64 only */
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=64,block=32,rope=0",
					    &s), 0);
		c.p[0] = 32;
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=128,block=32,rope=0",
					    &s), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "ROWS_W 32 at block 32"));
		c.p[0] = 16;
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], "seqs=4,lmax=70,heads=2,head_dim=64,block=64,rope=0",
					    &s), 0);
		c.p[2] = 2;	/* STAGES 2 with ITEMS 1: an empty stage */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
	}
}

/* Defines of a plan's program: 1 when "NAME=VALUE" is among them. */
static int has_define(const struct kt_plan *p, const char *def)
{
	int i;

	for (i = 0; i < p->programs[0].ndefines; i++)
		if (strcmp(p->programs[0].defines[i], def) == 0)
			return 1;
	return 0;
}

/* The backward's RPF 6-8 (the rotation's table read while q, k copy,
 * each thread rotating its own chunks; the epilogue's pairs held as f16x2
 * or read per output): rope only, STAGES 1, no extra shared memory, the
 * forward has none, and the spilling combinations are refused. */
static void test_rpf_fused(void)
{
	struct kt_target t80, t90;
	struct kt_shape s, s0;
	struct kt_config c;
	struct kt_plan p, p0;
	struct kt_err e;
	char why[160], def[16];
	long r;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_80", &t80), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	CU_ASSERT_EQUAL_FATAL(parse(fams[1], "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
				    &s), 0);
	CU_ASSERT_EQUAL_FATAL(parse(fams[1], "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
				    &s0), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=1,MINB=3,EPI=0", &c, &e), 0);
	CU_ASSERT_EQUAL_FATAL(fams[1]->plan(fams[1], &s, &c, &t90, &p0, &e), 0);
	for (r = 6; r <= 8; r++) {
		c.p[5] = r;	/* RPF */
		c.p[2] = 1;	/* STAGES */
		c.p[3] = 1;	/* ITEMS */
		c.p[6] = 3;	/* MINB */
		c.p[7] = 0;	/* EPI */
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(fams[1]->plan(fams[1], &s, &c, &t90, &p, &e), 0);
		snprintf(def, sizeof(def), "RPF=%ld", r);
		CU_ASSERT(has_define(&p, def));
		/* the table never enters shared memory */
		CU_ASSERT_EQUAL(p.launch[0].smem, p0.launch[0].smem);
		CU_ASSERT_EQUAL(p.launch[0].grid[0], p0.launch[0].grid[0]);
		/* rope only */
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s0, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "rope"));
		/* the staged epilogue spills under the 3-CTA register cap, not without it */
		c.p[7] = 1;
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
		c.p[6] = 1;
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t80, why, sizeof(why)), 0);
		/* the table of the item being copied: one stage */
		c.p[2] = 2;
		c.p[3] = 2;
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "STAGES"));
		c.p[2] = 1;
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
		/* persistent too */
		c.variant = 1;
		c.p[3] = 0;
		c.p[4] = 2;	/* CTAS_SM */
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
		c.variant = 0;
		c.p[4] = 0;
	}
	/* RPF 6 holds 32 more registers: at BLK 128 (S and dP of 128 columns)
	 * it is refused; RPF 7, 8 (per output) fit */
	CU_ASSERT_EQUAL_FATAL(parse(fams[1], "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=1",
				    &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=7,MINB=1,EPI=0", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
	c.p[5] = 8;
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);
	c.p[5] = 6;
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
	/* RPF 3-5 are not in the space (they spill): refused with a reason */
	for (r = 3; r <= 5; r++) {
		c.p[5] = r;
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPF"));
	}
	/* the forward has no RPF 6-8 */
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
				    &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=7,MINB=1", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPF"));
}

/* RPF 2 (the table tile in shared memory) and the forward's prefetch
 * variant: what check() refuses, and what the plans ask for. */
static void test_rtab_prefetch(void)
{
	static const char *const shapes[2] = {
		"seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
		"seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
	};
	struct kt_target t80, t90;
	struct kt_shape s, s0;
	struct kt_config c;
	struct kt_plan p, p0;
	struct kt_err e;
	char why[160];
	int f;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_80", &t80), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	for (f = 0; f < 2; f++) {
		unsigned base;

		CU_ASSERT_EQUAL_FATAL(parse(fams[f], shapes[0], &s), 0);
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], shapes[1], &s0), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[f], base_cfg[f], &c, &e), 0);
		CU_ASSERT_EQUAL_FATAL(fams[f]->plan(fams[f], &s, &c, &t90, &p0, &e), 0);
		base = p0.launch[0].smem;
		/* q k v (do) tiles of 64 x 128 bf16, plus dS in the backward */
		CU_ASSERT_EQUAL(base, f ? 4u * 16384 + 8192 : 3u * 16384);
		c.p[5] = 2;	/* RPF */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t80, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(fams[f]->plan(fams[f], &s, &c, &t90, &p, &e), 0);
		/* plus the table tile: 64 rows of 128 bf16, padded by 16 bytes */
		CU_ASSERT_EQUAL(p.launch[0].smem, base + 64u * (256 + 16));
		CU_ASSERT(has_define(&p, "RPF=2"));
		/* no rope: nothing to tile */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s0, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "rope"));
		/* one table tile: STAGES 1 only */
		c.p[2] = 2;	/* STAGES */
		c.p[3] = 2;	/* ITEMS */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "STAGES"));
		c.p[5] = 1;	/* RPF 1 keeps the ring */
		CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t90, why, sizeof(why)), 0);
	}
	/* BLK = d = 128 backward with the tile: 224 KiB + 2 KiB, sm_90 only */
	CU_ASSERT_EQUAL_FATAL(parse(fams[1], "seqs=64,lmax=256,heads=4,head_dim=128,block=128,rope=1",
				    &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=2,MINB=1,EPI=0", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 0);

	/* the forward's prefetch variant: ITEMS >= 2, one stage, -DPF=1 */
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], shapes[0], &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=prefetch,ROWS_W=16,DSPLIT=1,ITEMS=2,RPF=2,MINB=1,EPI=0", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t90, &p, &e), 0);
	CU_ASSERT(has_define(&p, "PF=1"));
	CU_ASSERT(has_define(&p, "EPI=0"));
	CU_ASSERT(has_define(&p, "STAGES=1"));
	CU_ASSERT_EQUAL(p.launch[0].smem, 3u * 16384 + 64u * (256 + 16));
	/* two consecutive items per CTA, as the grid variant */
	CU_ASSERT_EQUAL(p.launch[0].grid[0],
			(unsigned)((ba_blocks(1152, 256, 64) * 4 + 1) / 2));
	c.p[3] = 1;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "ITEMS"));
	/* STAGES is not one of its parameters; the grid's programs get no PF */
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(kt_config_parse(fams[0],
		"variant=prefetch,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=2,RPF=0,MINB=1,EPI=1", &c, &e), -1);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0], base_cfg[0], &c, &e), 0);
	CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t90, &p, &e), 0);
	CU_ASSERT(!has_define(&p, "PF=1"));
	CU_ASSERT(!has_define(&p, "EPI=1") && !has_define(&p, "EPI=0"));
	/* nor is EPI one of the grid's (the forward's grid stages O) */
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(kt_config_parse(fams[0],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=0", &c, &e), -1);
	/* prefetch under the 4-CTA register cap spills at d = 128 (ptxas), not at 64 */
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=prefetch,ROWS_W=16,DSPLIT=1,ITEMS=2,RPF=0,MINB=4,EPI=1", &c, &e), 0);
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], shapes[1], &s0), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s0, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spills"));
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], "seqs=1152,lmax=256,heads=4,head_dim=64,block=64,rope=0",
				    &s0), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s0, &c, &t90, why, sizeof(why)), 0);
	/* the backward's staged epilogue with two m16 tiles per warp spills */
	CU_ASSERT_EQUAL_FATAL(parse(fams[1], shapes[1], &s0), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1],
		"variant=grid,ROWS_W=32,DSPLIT=2,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=1", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s0, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
	c.p[7] = 0;	/* EPI 0 holds */
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s0, &c, &t90, why, sizeof(why)), 0);
	/* the backward has no prefetch variant */
	kt_err_clear(&e);
	CU_ASSERT_EQUAL(kt_config_parse(fams[1],
		"variant=prefetch,ROWS_W=16,DSPLIT=1,ITEMS=2,RPF=0,MINB=1,EPI=0", &c, &e), -1);
	/* its index 2 is ws, not prefetch (the families' own variant lists);
	 * past its last variant, nothing runs */
	CU_ASSERT_EQUAL(kt_variant_index(fams[1], "prefetch"), -1);
	CU_ASSERT_EQUAL(kt_variant_index(fams[0], "prefetch"), 2);
	CU_ASSERT_EQUAL(kt_variant_index(fams[1], "ws"), 2);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1], base_cfg[1], &c, &e), 0);
	c.variant = fams[1]->nvariants;
	CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "unknown variant"));
	test_rpf_fused();
}

/* ---- the ws variant (templates/blockattn_ws.cu: warp-specialized, wgmma) ---- */

static int param_index(const struct kt_family *f, const char *name)
{
	int i;

	for (i = 0; i < f->nparams; i++)
		if (strcmp(f->params[i].name, name) == 0)
			return i;
	return -1;
}

/* 1 when launches a and b pass the same arguments. */
static int same_args(const struct kt_launch *a, const struct kt_launch *b)
{
	int i;

	if (a->nargs != b->nargs)
		return 0;
	for (i = 0; i < a->nargs; i++)
		if (a->args[i].kind != b->args[i].kind || a->args[i].buf != b->args[i].buf ||
		    a->args[i].i != b->args[i].i)
			return 0;
	return 1;
}

/* The mma.sync variants' parameters (every one but CONS and RING). */
static const char *const sync_params[] = {"ROWS_W", "DSPLIT", "STAGES", "ITEMS",
					  "CTAS_SM", "RPF", "MINB", "EPI"};
#define NSYNC_PARAMS ((int)(sizeof(sync_params) / sizeof(sync_params[0])))

/* ws configs of family f valid at a shape with this rope setting: every
 * value of its parameters, RPROD (rope only) held at 0 without rope, RING
 * 2 and up (the backward's RING 1 is block 128, head_dim 128's alone). */
static long ws_count(int f, int rope)
{
	int ws = kt_variant_index(fams[f], "ws"), i;
	long n = 1;

	for (i = 0; i < fams[f]->nparams; i++)
		if ((fams[f]->params[i].variants & (1u << ws)) &&
		    (rope || strcmp(fams[f]->params[i].name, "RPROD") != 0))
			n *= fams[f]->params[i].nvalues -
			     (!strcmp(fams[f]->params[i].name, "RING") &&
			      fams[f]->params[i].values[0] == 1);
	return n;
}

/* 1 when check() admits ws's (CONS, RING, RPROD) of family f at (head_dim
 * d, block blk, rope) on sm_90a: RING 1 only in the backward at block 128,
 * d 128; at block 64 every other. At block 128 the forward
 * takes as many slots of q, k, v (3 x 128 x d bf16) as fit 227 KiB (d 64: all
 * four RINGs, d 128: RING 2), and at d 128 with rope and two consumers
 * RPROD 0 only (the producer spills otherwise). The backward at d 64
 * takes RING slots of 64 KiB and CONS scratches of 32 KiB where they fit
 * 227 KiB (RING 2, or RING 3 with one consumer); at d 128 RING 1 (one 128
 * KiB slot and a 64 KiB scratch), with rope CONS 1 and RPROD 0 or 3 only
 * (two consumers spill, RPROD 2 spills, RPROD 1 is 0 with one slot). */
static int ws_admits(int f, int d, int blk, int rope, long cons, long ring, long rprod)
{
	if (f && blk == 128 && d == 128)
		return ring == 1 && (!rope || (cons == 1 && (rprod == 0 || rprod == 3)));
	if (ring < 2)
		return 0;
	if (blk == 64)
		return 1;
	if (f)
		return d == 64 && ring * 64 + cons * 32 + 1 <= 227;
	if (d == 128 && ring > 2)
		return 0;
	return !(d == 128 && rope && cons == 2 && rprod != 0);
}

/* How many ws configs check() admits at (f, d, blk, rope): none at block
 * 32 (its wgmma tiles are 64 rows), ws_count at block 64; the forward at block 128 all of them at d 64, at d 128 RING 2:
 * 2 without rope (CONS 1, 2), 4 with (CONS 1 with RPROD 0-2, CONS 2 with 0);
 * the backward at block 128 three (CONS, RING) pairs at d 64, each with its
 * four RPRODs under rope, and at d 128 RING 1: CONS 1 and 2 without rope,
 * CONS 1 with RPROD 0 and 3 with it. */
static long ws_valid(int f, int d, int blk, int rope)
{
	if (blk < 64)
		return 0;
	if (blk == 64 || (!f && d == 64))
		return ws_count(f, rope);
	if (f)
		return d == 64 ? 3 * (rope ? 4 : 1) : 2;
	return rope ? 4 : 2;
}

/* The suffix of a ws key after CONS and RING: RPROD=rprod (0..3). */
static const char *ws_tail(int rprod)
{
	static const char *const t[] = {",RPROD=0", ",RPROD=1", ",RPROD=2", ",RPROD=3"};

	return t[rprod & 3];
}

/* Each family's own variant list, ws's parameters and no other. */
static void test_ws_params(void)
{
	int f, i, j;

	for (f = 0; f < 2; f++) {
		const struct kt_family *fa = fams[f];
		int ws = kt_variant_index(fa, "ws"), ic = param_index(fa, "CONS");
		int ir = param_index(fa, "RING");

		/* the forward keeps prefetch at 2; the backward has its own
		 * list, chunked (block 256) last */
		CU_ASSERT_EQUAL(fa->nvariants, 4);
		CU_ASSERT_EQUAL(ws, f ? 2 : 3);
		CU_ASSERT_EQUAL(kt_variant_index(fa, "grid"), 0);
		CU_ASSERT_EQUAL(kt_variant_index(fa, "persistent"), 1);
		CU_ASSERT_FATAL(ws >= 0 && ic >= 0 && ir >= 0);
		for (i = 0; i < NSYNC_PARAMS; i++) {
			int k = param_index(fa, sync_params[i]);

			CU_ASSERT_FATAL(k >= 0);
			CU_ASSERT_EQUAL(fa->params[k].variants & (1u << ws), 0);
		}
		CU_ASSERT_EQUAL(fa->params[ic].variants, 1u << ws);
		/* the backward's chunked variant has a ring of its own */
		CU_ASSERT_EQUAL(fa->params[ir].variants,
				(1u << ws) | (f ? 1u << kt_variant_index(fa, "chunked") : 0u));
		/* RPROD: ws only, 0..2 */
		CU_ASSERT_FATAL(param_index(fa, "RPROD") >= 0);
		CU_ASSERT_EQUAL(fa->params[param_index(fa, "RPROD")].variants, 1u << ws);
		CU_ASSERT_EQUAL(fa->params[param_index(fa, "RPROD")].nvalues, f ? 4 : 3);
		CU_ASSERT_EQUAL(fa->params[ic].nvalues, 2);
		CU_ASSERT_EQUAL(fa->params[ic].values[0], 1);
		CU_ASSERT_EQUAL(fa->params[ic].values[1], 2);
		/* the ring: 2..4 stages forward, 1..3 backward (1: block 128,
		 * head_dim 128) */
		CU_ASSERT_EQUAL(fa->params[ir].nvalues, 3);
		for (j = 0; j < fa->params[ir].nvalues; j++)
			CU_ASSERT_EQUAL(fa->params[ir].values[j], (f ? 1 : 2) + j);
		/* no parameter names a variant the family does not have */
		for (j = 0; j < fa->nparams; j++)
			CU_ASSERT_EQUAL(fa->params[j].variants >> fa->nvariants, 0);
	}
}

/* ws plans: the template, its defines, the persistent launch with the
 * same arguments as the persistent variant's (CTAS_SM 1), one CTA of
 * (CONS + 1) warpgroups per SM, the ring's shared memory; key round trips. */
static void test_ws_plans(void)
{
	struct kt_target t90a, few;
	int f, blk, d, rope;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t90a), 0);
	CU_ASSERT_EQUAL(t90a.sms, 0);	/* compile-only: 132 CTAs assumed */
	few = t90a;
	few.sms = 7;
	for (f = 0; f < 2; f++)
		for (blk = 64; blk <= 128; blk += 64)
		for (d = 64; d <= 128; d += 64)
			for (rope = 0; rope < 2; rope++) {
				const struct kt_family *fa = fams[f];
				int ic = param_index(fa, "CONS"), ir = param_index(fa, "RING"), a, b;
				long nitems = ba_blocks(1152, 256, blk) * 4;
				struct kt_shape s, small;
				struct kt_config pc;
				struct kt_plan pp, ppf, ps;
				struct kt_err e;
				char text[160];

				CU_ASSERT_FATAL(ic >= 0 && ir >= 0);
				snprintf(text, sizeof(text),
					 "seqs=1152,lmax=256,heads=4,head_dim=%d,block=%d,rope=%d", d, blk,
					 rope);
				CU_ASSERT_EQUAL_FATAL(parse(fa, text, &s), 0);
				snprintf(text, sizeof(text),
					 "seqs=3,lmax=70,heads=2,head_dim=%d,block=%d,rope=%d", d, blk, rope);
				CU_ASSERT_EQUAL_FATAL(parse(fa, text, &small), 0);
				snprintf(text, sizeof(text),
					 "variant=persistent,ROWS_W=16,DSPLIT=1,STAGES=1,CTAS_SM=1,RPF=%d,"
					 "MINB=1%s", rope, f ? ",EPI=0" : "");
				kt_err_clear(&e);
				CU_ASSERT_EQUAL_FATAL(kt_config_parse(fa, text, &pc, &e), 0);
				CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s, &pc, &t90a, &pp, &e), 0);
				CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s, &pc, &few, &ppf, &e), 0);
				CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &small, &pc, &t90a, &ps, &e), 0);
				for (a = 0; a < fa->params[ic].nvalues; a++)
					for (b = 0; b < fa->params[ir].nvalues; b++) {
						long cons = fa->params[ic].values[a], ring = fa->params[ir].values[b];
						/* with rope every RPROD but 0 comes round (3: backward) */
						int rprod = rope ? 1 + (int)(cons + ring) % (f ? 3 : 2) : 0;
						/* the backward at block 128: a 32 KiB scratch per
						 * consumer at d 64, one of 64 KiB at d 128, and
						 * there without rope q's second buffer (32 KiB) */
						unsigned smem = (unsigned)(ring * (f ? 4 : 3) * blk * d * 2 + 1024 +
									   (f && blk == 128 ? d == 128 ? 65536
									    : cons * 32768 : 0) +
									   (f && blk == 128 && d == 128 && !rope
									    ? 32768 : 0));
						struct kt_config c;
						struct kt_plan p;
						const struct kt_launch *l = &p.launch[0];
						char key[160], why[160], want[KT_MAX_DEFINES][48], kname[32];
						int i;

						snprintf(text, sizeof(text), "variant=ws,CONS=%ld,RING=%ld%s", cons,
							 ring, ws_tail(rprod));
						kt_err_clear(&e);
						CU_ASSERT_EQUAL_FATAL(kt_config_parse(fa, text, &c, &e), 0);
						kt_config_key(fa, &c, key, sizeof(key));
						CU_ASSERT_STRING_EQUAL(key, text);
						if (!ws_admits(f, d, blk, rope, cons, ring, rprod)) {
							CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why,
										  sizeof(why)), 1);
							continue;
						}
						CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why,
									  sizeof(why)), 0);
						kt_err_clear(&e);
						CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s, &c, &t90a,
									       &p, &e), 0);
						CU_ASSERT_EQUAL(p.nprograms, 1);
						CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "blockattn_ws");
						snprintf(want[0], 48, "BWD=%d", f);
						snprintf(want[1], 48, "BLK=%d", blk);
						snprintf(want[2], 48, "HD=%d", d);
						snprintf(want[3], 48, "ROPE=%d", rope);
						snprintf(want[4], 48, "CONS=%ld", cons);
						snprintf(want[5], 48, "STAGES=%ld", ring);
						snprintf(want[6], 48, "RPROD=%d", rprod);
						CU_ASSERT_EQUAL_FATAL(p.programs[0].ndefines, 7);
						for (i = 0; i < 7; i++)
							CU_ASSERT_STRING_EQUAL(p.programs[0].defines[i], want[i]);
						/* the launch */
						snprintf(kname, sizeof(kname), "%s_ws", fa->name);
						CU_ASSERT_EQUAL_FATAL(p.nlaunch, 1);
						CU_ASSERT_STRING_EQUAL(l->kernel, kname);
						CU_ASSERT_EQUAL(l->program, 0);
						CU_ASSERT_EQUAL(l->block[0], (unsigned)(cons + 1) * 128);
						CU_ASSERT_EQUAL(l->block[1] * l->block[2], 1);
						CU_ASSERT_EQUAL(l->smem, smem);
						CU_ASSERT(nitems > 132);
						CU_ASSERT_EQUAL(l->grid[0], 132);
						CU_ASSERT_EQUAL(l->grid[1] * l->grid[2], 1);
						/* nitems, H, cta_step 1, item_step = grid, nper */
						CU_ASSERT_EQUAL_FATAL(l->nargs, f ? 14 : 11);
						CU_ASSERT_EQUAL(l->args[l->nargs - 5].i, nitems);
						CU_ASSERT_EQUAL(l->args[l->nargs - 4].i, 4);
						CU_ASSERT_EQUAL(l->args[l->nargs - 3].i, 1);
						CU_ASSERT_EQUAL(l->args[l->nargs - 2].i, 132);
						CU_ASSERT_EQUAL(l->args[l->nargs - 1].i, (nitems + 131) / 132);
						CU_ASSERT(same_args(l, &pp.launch[0]));
						CU_ASSERT_EQUAL(l->grid[0], pp.launch[0].grid[0]);
						/* the prep launch is the other variants' */
						CU_ASSERT_EQUAL_FATAL(p.nprep, 1);
						CU_ASSERT_STRING_EQUAL(p.prep[0].kernel, "blockattn_blocks");
						CU_ASSERT_EQUAL(p.prep[0].program, 0);
						CU_ASSERT(same_args(&p.prep[0], &pp.prep[0]));
						CU_ASSERT_EQUAL(p.prep[0].block[0], pp.prep[0].block[0]);
						/* the same buffers (the block list) as every variant */
						{
							struct kt_buf b1[KT_MAX_BUFS], b2[KT_MAX_BUFS];
							int n1 = fa->buffers(fa, &s, &c, b1);
							int n2 = fa->buffers(fa, &s, &pc, b2);

							CU_ASSERT_EQUAL(n1, n2);
							CU_ASSERT_EQUAL(b1[n1 - 1].elems, b2[n2 - 1].elems);
						}
						/* a device of 7 SMs: 7 CTAs */
						kt_err_clear(&e);
						CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s, &c, &few, &p,
									       &e), 0);
						CU_ASSERT_EQUAL(l->grid[0], 7);
						CU_ASSERT(same_args(l, &ppf.launch[0]));
						/* fewer items than SMs: one CTA per item, one item each */
						kt_err_clear(&e);
						CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &small, &c,
									       &t90a, &p, &e), 0);
						CU_ASSERT_EQUAL(l->grid[0], (unsigned)(ba_blocks(3, 70, blk) * 2));
						CU_ASSERT_EQUAL(l->args[l->nargs - 1].i, 1);
						CU_ASSERT(same_args(l, &ps.launch[0]));
					}
			}
}

/* The backward at block 128, d 128 (s128: rope 1) from c (CONS 2, RING
 * 2, RPROD 1), which it leaves as it found: RING 1 only (one 128 KiB slot
 * and the 64 KiB P, dS scratch fill 227 KiB), no RPROD 1 (one slot is
 * never free ahead: the same kernel as 0), with rope CONS 1 and RPROD 0 or
 * 3 only (the others spill); without rope either CONS, and 32 KiB more
 * shared memory (q's second buffer). */
static void ws_bwd128_d128(const struct kt_family *fa, const struct kt_shape *s128,
			   struct kt_config *c, const struct kt_target *t90a)
{
	int ic = param_index(fa, "CONS"), ir = param_index(fa, "RING");
	int irp = param_index(fa, "RPROD");
	unsigned need = (unsigned)(128 * 1024 + 1024 + 64 * 1024);
	struct kt_target tight;
	struct kt_shape s0;
	struct kt_plan p;
	struct kt_err e;
	char why[160];

	c->p[ir] = 3;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING 3 at block 128, head_dim 128"));
	c->p[ir] = 1;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPROD 1 with one slot"));
	c->p[irp] = 0;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "rope with CONS 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spills"));
	c->p[ic] = 1;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(fa->plan(fa, s128, c, t90a, &p, &e), 0);
	CU_ASSERT_EQUAL(p.launch[0].smem, need);
	CU_ASSERT_EQUAL(p.launch[0].block[0], 256u);
	tight = *t90a;
	tight.smem_optin = (int)need - 1;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, &tight, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "64 KiB of P, dS scratch"));
	c->p[irp] = 3;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 0);
	c->p[irp] = 2;
	CU_ASSERT_EQUAL(fa->check(fa, s128, c, t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPROD 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spills"));
	/* without rope both consumer counts */
	CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=0",
				    &s0), 0);
	c->p[irp] = 0;
	CU_ASSERT_EQUAL(fa->check(fa, &s0, c, t90a, why, sizeof(why)), 0);
	c->p[ic] = 2;
	CU_ASSERT_EQUAL(fa->check(fa, &s0, c, t90a, why, sizeof(why)), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s0, c, t90a, &p, &e), 0);
	/* without rope q's second buffer (32 KiB): 225 KiB, within sm_90a's
	 * 227, not one byte less */
	CU_ASSERT_EQUAL(p.launch[0].smem, need + 32768u);
	CU_ASSERT_EQUAL(p.launch[0].smem, 225u * 1024);
	CU_ASSERT(p.launch[0].smem <= (unsigned)t90a->smem_optin);
	CU_ASSERT_EQUAL(p.launch[0].block[0], 384u);
	tight = *t90a;
	tight.smem_optin = (int)need + 32768;
	CU_ASSERT_EQUAL(fa->check(fa, &s0, c, &tight, why, sizeof(why)), 0);
	tight.smem_optin = (int)need + 32767;
	CU_ASSERT_EQUAL(fa->check(fa, &s0, c, &tight, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "q's second buffer"));
	/* the default there: ws, two consumers on the one slot without rope
	 * (timed ahead of grid); with rope 1 (s128), where CONS 2 spills, one
	 * consumer (timed ahead of grid too); with rope 2, untimed, grid */
	{
		struct kt_config dc;
		struct kt_shape s2;

		CU_ASSERT_EQUAL(fa->default_config(fa, &s0, t90a, &dc), 0);
		CU_ASSERT_EQUAL(dc.variant, kt_variant_index(fa, "ws"));
		CU_ASSERT_EQUAL(dc.p[ic], 2);
		CU_ASSERT_EQUAL(dc.p[ir], 1);
		CU_ASSERT_EQUAL(dc.p[irp], 0);
		CU_ASSERT_EQUAL(s128->v[BA_D_ROPE], 1);
		CU_ASSERT_EQUAL(fa->default_config(fa, s128, t90a, &dc), 0);
		CU_ASSERT_EQUAL(dc.variant, kt_variant_index(fa, "ws"));
		CU_ASSERT_EQUAL(dc.p[ic], 1);
		CU_ASSERT_EQUAL(dc.p[ir], 1);
		CU_ASSERT_EQUAL(dc.p[irp], 0);
		CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,"
					    "rope=2", &s2), 0);
		CU_ASSERT_EQUAL(fa->default_config(fa, &s2, t90a, &dc), 0);
		CU_ASSERT_EQUAL(dc.variant, kt_variant_index(fa, "grid"));
	}
	c->p[ir] = 2;
	c->p[irp] = 1;
}

/* What check() refuses for ws, each with its reason. */
static void test_ws_refusals(void)
{
	struct kt_target t80, t90, t90a, tight;
	int f, i;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_80", &t80), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t90a), 0);
	for (f = 0; f < 2; f++) {
		const struct kt_family *fa = fams[f];
		int ic = param_index(fa, "CONS"), ir = param_index(fa, "RING");
		long ring_max = f ? 3 : 4;
		unsigned smem = (unsigned)(ring_max * (f ? 4 : 3) * 64 * 128 * 2 + 1024);
		struct kt_shape s, s0, s128;
		struct kt_config c, dc;
		struct kt_plan p;
		struct kt_err e;
		char why[160], key[96];

		CU_ASSERT_FATAL(ic >= 0 && ir >= 0);
		CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
					    &s0), 0);
		CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
					    &s), 0);
		CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=1",
					    &s128), 0);
		kt_err_clear(&e);
		snprintf(key, sizeof(key), "variant=ws,CONS=2,RING=2%s", ws_tail(2));
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fa, key, &c, &e), 0);
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 0);
		/* RPROD changes only the rotation: refused without rope */
		CU_ASSERT_EQUAL(fa->check(fa, &s0, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "without rope"));
		c.p[param_index(fa, "RPROD")] = 0;
		CU_ASSERT_EQUAL(fa->check(fa, &s0, &c, &t90a, why, sizeof(why)), 0);
		/* 3 (the producer rotates dq, dk) is the backward's only */
		c.p[param_index(fa, "RPROD")] = 3;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), f ? 0 : 1);
		if (!f)
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "0, 1 or 2"));
		c.p[param_index(fa, "RPROD")] = 4;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPROD 4"));
		c.p[param_index(fa, "RPROD")] = 1;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 0);
		/* wgmma: sm_90a only */
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "target sm_90"));
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t80, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_80"));
		kt_err_clear(&e);
		CU_ASSERT_EQUAL(fa->plan(fa, &s, &c, &t90, &p, &e), -1);
		CU_ASSERT_EQUAL(e.code, KT_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "sm_90a"));
		/* block 32: no ws (its wgmma tiles are 64 rows), the mma.sync
		 * variants take it */
		{
			struct kt_shape s32;

			CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=128,"
						    "block=32,rope=1", &s32), 0);
			CU_ASSERT_EQUAL(fa->check(fa, &s32, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "ws at block 32"));
			CU_ASSERT_EQUAL(fa->default_config(fa, &s32, &t90a, &dc), 0);
			CU_ASSERT_EQUAL(dc.variant, kt_variant_index(fa, "grid"));
		}
		/* block 128: the backward at d 128 takes one slot only (a slot of
		 * q, k, v, do is 128 KiB); the forward (here d 128, rope, CONS 2)
		 * takes it only with RPROD 0 -- its producer spills with 1 and 2 --
		 * and RING 2 (a slot of q, k, v is 96 KiB) */
		CU_ASSERT_EQUAL(fa->check(fa, &s128, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, f ? "RING 2 at block 128, head_dim 128" : "spills"));
		if (f) {
			struct kt_shape s64;
			unsigned need = (unsigned)(3 * 64 * 1024 + 1024 + 32 * 1024);

			/* the backward at block 128, d 64: RING slots of 64 KiB and a
			 * 32 KiB scratch per consumer -- RING 2 with either CONS, RING 3
			 * with one, not with two (257 KiB) */
			CU_ASSERT_EQUAL_FATAL(parse(fa, "seqs=1152,lmax=256,heads=4,head_dim=64,"
						    "block=128,rope=1", &s64), 0);
			CU_ASSERT_EQUAL(fa->check(fa, &s64, &c, &t90a, why, sizeof(why)), 0);
			c.p[ir] = 3;
			CU_ASSERT_EQUAL(fa->check(fa, &s64, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "scratch"));
			c.p[ic] = 1;
			CU_ASSERT_EQUAL(fa->check(fa, &s64, &c, &t90a, why, sizeof(why)), 0);
			kt_err_clear(&e);
			CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s64, &c, &t90a, &p, &e), 0);
			CU_ASSERT_EQUAL(p.launch[0].smem, need);
			tight = t90a;
			tight.smem_optin = (int)need - 1;
			CU_ASSERT_EQUAL(fa->check(fa, &s64, &c, &tight, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "scratch"));
			/* RING 1 is d 128's only */
			c.p[ir] = 1;
			CU_ASSERT_EQUAL(fa->check(fa, &s64, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING 1"));
			c.p[ir] = 2;
			c.p[ic] = 2;
			ws_bwd128_d128(fa, &s128, &c, &t90a);
		} else {
			c.p[param_index(fa, "RPROD")] = 0;
			CU_ASSERT_EQUAL(fa->check(fa, &s128, &c, &t90a, why, sizeof(why)), 0);
			c.p[ir] = 3;
			CU_ASSERT_EQUAL(fa->check(fa, &s128, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "96 KiB"));
			c.p[ir] = 2;
			/* one consumer has the registers for RPROD 1, 2 */
			c.p[ic] = 1;
			c.p[param_index(fa, "RPROD")] = 2;
			CU_ASSERT_EQUAL(fa->check(fa, &s128, &c, &t90a, why, sizeof(why)), 0);
			c.p[ic] = 2;
			c.p[param_index(fa, "RPROD")] = 1;
		}
		/* the ring: 2 or more stages, at most ring_max */
		for (i = 0; i < 2; i++) {
			c.p[ir] = i;
			CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING"));
		}
		c.p[ir] = ring_max + 1;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "at most"));
		c.p[ir] = 2;
		/* one or two consumer warpgroups */
		c.p[ic] = 3;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "CONS"));
		c.p[ic] = 0;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "CONS"));
		c.p[ic] = 1;
		/* the deepest ring at d = 128 fits the H200 (bwd: 192 KiB + 1 KiB),
		 * not one byte less */
		c.p[ir] = ring_max;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(fa->plan(fa, &s, &c, &t90a, &p, &e), 0);
		CU_ASSERT_EQUAL(p.launch[0].smem, smem);
		CU_ASSERT(smem <= (unsigned)t90a.smem_optin);
		tight = t90a;
		tight.smem_optin = (int)smem;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &tight, why, sizeof(why)), 0);
		tight.smem_optin = (int)smem - 1;
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &tight, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
		c.p[ir] = 2;
		/* none of the mma.sync variants' parameters: refused in a key and
		 * in a config */
		for (i = 0; i < NSYNC_PARAMS; i++) {
			int k = param_index(fa, sync_params[i]);
			char text[96];

			CU_ASSERT_FATAL(k >= 0);
			snprintf(text, sizeof(text), "variant=ws,CONS=1,RING=2%s,%s=%ld", ws_tail(1),
				 sync_params[i], fa->params[k].values[fa->params[k].nvalues - 1]);
			kt_err_clear(&e);
			CU_ASSERT_EQUAL(kt_config_parse(fa, text, &dc, &e), -1);
			CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, sync_params[i]));
			c.p[k] = fa->params[k].values[fa->params[k].nvalues - 1];
			CU_ASSERT(c.p[k] != 0);
			CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "ws has no parameter"));
			CU_ASSERT_PTR_NOT_NULL(strstr(why, sync_params[i]));
			kt_err_clear(&e);
			CU_ASSERT_EQUAL(fa->plan(fa, &s, &c, &t90a, &p, &e), -1);
			CU_ASSERT_EQUAL(e.code, KT_EINVAL);
			c.p[k] = 0;
		}
		CU_ASSERT_EQUAL(fa->check(fa, &s, &c, &t90a, why, sizeof(why)), 0);
		/* and ws's parameters are no other variant's */
		kt_err_clear(&e);
		CU_ASSERT_EQUAL(kt_config_parse(fa, f ? "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,"
							"ITEMS=1,RPF=0,MINB=1,EPI=0,CONS=1"
						      : "variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,"
							"ITEMS=1,RPF=0,MINB=1,RING=2",
						&dc, &e), -1);
		/* the default stays the grid one, on sm_90a too */
		CU_ASSERT_EQUAL(fa->default_config(fa, &s, &t90a, &dc), 0);
		CU_ASSERT_EQUAL(dc.variant, kt_variant_index(fa, "grid"));
	}
}

/* ---- the dump mode (KTUNE_BLOCKATTN_DUMP + KTUNE_BLOCKATTN_DUMP_CONFIG) ---- */

/* The one problem of the dump mode: blockattn_bwd at the bench shape, at
 * block 64 (ads_d128_L256) or 128 (ads_d128_L256_b128). */
#define DUMP_SHAPE_FMT "seqs=1152,lmax=256,heads=4,head_dim=128,block=%s,rope=0"

/* The dump shape's text for block (KTUNE_BLOCKATTN_DUMP_BLOCK's value;
 * NULL or empty: 64) in shape: 0, or -1 with the reason in why. Only the
 * blocks of the bench's workloads are taken, spelt as decimals. */
static int dump_shape(const char *block, char *shape, size_t slen, char *why, size_t len)
{
	if (!block || !*block)
		block = "64";
	if (strcmp(block, "64") != 0 && strcmp(block, "128") != 0) {
		snprintf(why, len,
			 "KTUNE_BLOCKATTN_DUMP_BLOCK=\"%s\": the dump runs at block 64 "
			 "(ads_d128_L256) or 128 (ads_d128_L256_b128) only",
			 block);
		return -1;
	}
	snprintf(shape, slen, DUMP_SHAPE_FMT, block);
	return 0;
}

/* Parses key (kt_config_key's form) as a blockattn_bwd config, checks it at
 * the dump shape (dump_shape's text) on t and plans it: 0, or -1 with the
 * reason in why. */
static int dump_config(const char *shape, const char *key, const struct kt_target *t,
		       struct kt_config *c, struct kt_plan *p, char *why, size_t len)
{
	struct kt_shape s;
	struct kt_err e;
	char r[160];

	kt_err_clear(&e);
	if (kt_shape_parse(fams[1], shape, &s, &e) != 0) {
		snprintf(why, len, "dump shape: %s", e.msg);
		return -1;
	}
	if (!key || !*key) {
		snprintf(why, len, "KTUNE_BLOCKATTN_DUMP_CONFIG is empty");
		return -1;
	}
	kt_err_clear(&e);
	if (kt_config_parse(fams[1], key, c, &e) != 0) {
		snprintf(why, len, "bad config key \"%s\" for blockattn_bwd: %s", key, e.msg);
		return -1;
	}
	if (fams[1]->check(fams[1], &s, c, t, r, sizeof(r))) {
		snprintf(why, len, "config \"%s\" cannot run %s: %s", key, shape, r);
		return -1;
	}
	kt_err_clear(&e);
	if (fams[1]->plan(fams[1], &s, c, t, p, &e) != 0) {
		snprintf(why, len, "config \"%s\": plan failed: %s", key, e.msg);
		return -1;
	}
	return 0;
}

/* Runs this program again in dump mode with key and block (NULL: unset)
 * and asserts that it fails, printing reason, having run the dump test
 * alone. */
static void dump_mode_fails(const char *key, const char *block, const char *reason)
{
	static const char *const vars[] = {"KTUNE_BLOCKATTN_DUMP", "KTUNE_BLOCKATTN_DUMP_CONFIG",
					   "KTUNE_BLOCKATTN_DUMP_BLOCK", "KTUNE_TEST_SUITE"};
	enum { NV = sizeof(vars) / sizeof(vars[0]) };
	/* the child runs dump mode's own suite, whatever filter this run was
	 * started with; every variable is put back as it was afterwards */
	const char *const set[NV] = {kt_test_tmpdir(), key, block, NULL};
	char self[1024], *out = NULL, *saved[NV];
	char *argv[] = {self, NULL};
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int rc, v;

	CU_ASSERT_FATAL(n > 0);
	self[n] = 0;
	for (v = 0; v < NV; v++) {
		saved[v] = kt_test_env_save(vars[v]);
		CU_ASSERT_EQUAL(kt_test_env_put(vars[v], set[v]), 0);
	}
	rc = kt_test_exec(argv, NULL, &out, 120);
	for (v = 0; v < NV; v++) {
		CU_ASSERT_EQUAL(kt_test_env_put(vars[v], saved[v]), 0);
		CU_ASSERT(saved[v] ? getenv(vars[v]) && strcmp(getenv(vars[v]), saved[v]) == 0
				   : getenv(vars[v]) == NULL);
		free(saved[v]);
	}
	CU_ASSERT_NOT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, reason));
	/* one test only: no CPU suite ran */
	CU_ASSERT_PTR_NULL(strstr(out, "finite differences"));
	if (rc == 0 || !strstr(out, reason))
		fprintf(stderr, "\n  dump mode with key %s, block %s (rc %d), not \"%s\":\n%s\n", key,
			block ? block : "unset", rc, reason, out);
	free(out);
}

/* The dump mode's parsing: what it refuses, with a reason, and what it
 * plans (on the CPU), at blocks 64 and 128; and the mode itself, with a bad
 * key or a bad block, fails clearly (this program run again with the
 * variables set). */
static void test_dump_config(void)
{
	static const char *const bad[] = {
		"",
		"variant=grid,ROWS_W=16",					/* params missing */
		"variant=nope,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=0",
		"variant=prefetch,ROWS_W=16,DSPLIT=1,ITEMS=2,RPF=0,MINB=1,EPI=0", /* fwd only */
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=2,MINB=1,EPI=0", /* no rope */
		"variant=grid,ROWS_W=48,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=0",
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=0,MINB=1,EPI=0,X=1",
	};
	/* the blocks of no bench workload, and 64 or 128 spelt otherwise */
	static const char *const bad_blk[] = {"32", "256", "0", "-64", "064", "64 ", "128x", "abc"};
	/* the block-128 default (ba_default: ws, one ring slot at head_dim
	 * 128) and the block-64 bench winner, whose three slots block 128
	 * has not */
	static const char ws128[] = "variant=ws,CONS=2,RING=1,RPROD=0";
	static const char ws64[] = "variant=ws,CONS=2,RING=3,RPROD=0";
	struct kt_target t90, t90a;
	struct kt_config c;
	struct kt_shape s;
	struct kt_plan p;
	struct kt_err e;
	char why[1024], key[160], shape[128];
	size_t i;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t90a), 0);
	/* block 64 when the variable is unset or empty */
	CU_ASSERT_EQUAL_FATAL(dump_shape(NULL, shape, sizeof(shape), why, sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(shape, "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0");
	CU_ASSERT_EQUAL(dump_shape("", key, sizeof(key), why, sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(key, shape);
	CU_ASSERT_EQUAL(dump_shape("64", key, sizeof(key), why, sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(key, shape);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		CU_ASSERT_EQUAL(dump_config(shape, bad[i], &t90, &c, &p, why, sizeof(why)), -1);
		CU_ASSERT(strlen(why) > 10);
	}
	why[0] = 0;
	CU_ASSERT_EQUAL(dump_config(shape, bad[3], &t90, &c, &p, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "bad config key"));
	CU_ASSERT_EQUAL(dump_config(shape, bad[4], &t90, &c, &p, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "rope"));
	/* the key as kt_config_key prints it plans, and prints back the same */
	CU_ASSERT_EQUAL_FATAL(dump_config(shape, base_cfg[1], &t90, &c, &p, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(p.nlaunch, 1);
	kt_config_key(fams[1], &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, base_cfg[1]);
	CU_ASSERT_EQUAL(dump_config(shape, ws64, &t90a, &c, &p, why, sizeof(why)), 0);
	/* a block the bench does not dump is refused, naming the variable,
	 * the value and the blocks it takes */
	for (i = 0; i < sizeof(bad_blk) / sizeof(bad_blk[0]); i++) {
		why[0] = 0;
		CU_ASSERT_EQUAL(dump_shape(bad_blk[i], key, sizeof(key), why, sizeof(why)), -1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "KTUNE_BLOCKATTN_DUMP_BLOCK"));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, bad_blk[i]));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "64"));
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "128"));
	}
	/* block 128: ba_default's key plans on sm_90a, and prints back the
	 * same; on sm_90 (no ws there) and with three ring slots it is
	 * refused at that shape */
	CU_ASSERT_EQUAL_FATAL(dump_shape("128", shape, sizeof(shape), why, sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(shape, "seqs=1152,lmax=256,heads=4,head_dim=128,block=128,rope=0");
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(fams[1], shape, &s, &e), 0);
	CU_ASSERT_EQUAL_FATAL(fams[1]->default_config(fams[1], &s, &t90a, &c), 0);
	kt_config_key(fams[1], &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, ws128);
	memset(&c, 0, sizeof(c));
	CU_ASSERT_EQUAL_FATAL(dump_config(shape, ws128, &t90a, &c, &p, why, sizeof(why)), 0);
	CU_ASSERT(p.nlaunch >= 1);
	kt_config_key(fams[1], &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, ws128);
	why[0] = 0;
	CU_ASSERT_EQUAL(dump_config(shape, ws128, &t90, &c, &p, why, sizeof(why)), -1);
	CU_ASSERT(strlen(why) > 10);
	why[0] = 0;
	CU_ASSERT_EQUAL(dump_config(shape, ws64, &t90a, &c, &p, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "block=128"));
	/* the mode itself: a bad key, or a good key at a bad block, is a
	 * failure with the reason printed */
	dump_mode_fails(bad[3], NULL, "bad config key");
	dump_mode_fails(ws128, "256", "KTUNE_BLOCKATTN_DUMP_BLOCK=\"256\"");
}

static void test_buffers_and_fill(void)
{
	struct kt_shape s;
	struct kt_buf b[KT_MAX_BUFS];
	struct kt_config c;
	struct kt_err e;
	int32_t off[8], ref[8];
	uint16_t *tab, *ref_tab;
	int f, n, i;

	for (f = 0; f < 2; f++) {
		int rope;

		for (rope = 0; rope < 3; rope++) {
			char text[128];
			int noff, ntab, nout, nin;

			snprintf(text, sizeof(text),
				 "seqs=7,lmax=90,heads=3,head_dim=64,block=64,rope=%d", rope);
			CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
			n = fams[f]->buffers(fams[f], &s, NULL, b);
			nin = (f ? 5 : 4) + (rope != 0);	/* one table for rope 1 and 2 */
			nout = f ? 3 : 1;
			CU_ASSERT_EQUAL(n, nin + nout);
			noff = f ? 4 : 3;
			ntab = rope ? noff + 1 : -1;
			CU_ASSERT_STRING_EQUAL(b[noff].name, "offsets");
			CU_ASSERT_EQUAL(b[noff].dtype, KT_I32);
			CU_ASSERT_EQUAL(b[noff].elems, 8);
			for (i = 0; i < n; i++)
				CU_ASSERT_EQUAL(b[i].role, i < nin ? KT_BUF_INPUT : KT_BUF_OUTPUT);
			CU_ASSERT_EQUAL(b[0].elems, (size_t)ba_tokens(7, 90) * 3 * 64);
			CU_ASSERT_EQUAL(fams[f]->fill(fams[f], &s, noff, off, 1), 0);
			ba_offsets(7, 90, ref);
			CU_ASSERT_EQUAL(memcmp(off, ref, sizeof(off)), 0);
			/* the offsets do not depend on the seed: FA2 must see the same */
			CU_ASSERT_EQUAL(fams[f]->fill(fams[f], &s, noff, off, 99), 0);
			CU_ASSERT_EQUAL(memcmp(off, ref, sizeof(off)), 0);
			if (ntab >= 0) {
				CU_ASSERT_EQUAL(b[ntab].dtype, KT_BF16);
				tab = calloc(b[ntab].elems, sizeof(*tab));
				ref_tab = calloc(b[ntab].elems, sizeof(*ref_tab));
				CU_ASSERT_PTR_NOT_NULL_FATAL(tab);
				CU_ASSERT_PTR_NOT_NULL_FATAL(ref_tab);
				CU_ASSERT_EQUAL(fams[f]->fill(fams[f], &s, ntab, tab, 1), 0);
				ba_rope_table(ref, 7, 64, ref_tab);
				CU_ASSERT_EQUAL(memcmp(tab, ref_tab, b[ntab].elems * sizeof(*tab)), 0);
				free(tab);
				free(ref_tab);
			}
			/* a candidate adds the block list */
			kt_err_clear(&e);
			CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[f],
				base_cfg[f], &c, &e), 0);
			CU_ASSERT_EQUAL(fams[f]->buffers(fams[f], &s, &c, b), n + 1);
			CU_ASSERT_EQUAL(b[n].role, KT_BUF_SCRATCH);
			CU_ASSERT_EQUAL(b[n].elems, 2 * (size_t)ba_blocks(7, 90, 64));
		}
	}
}

/* The family's cpu_ref (bf16 in, float out) agrees with ba_cpu_* on the
 * same values. */
static void test_family_cpu_ref(void)
{
	struct kt_shape s;
	struct kt_buf b[KT_MAX_BUFS];
	struct kt_err e;

	for (int k = 0; k < 4; k++) {
		const int f = k & 1, rope = 1 + (k >> 1);
		void *in[6] = {0};
		float *out[3] = {0};
		double *x[4] = {0}, *y[3] = {0}, *tab = NULL;
		struct ba_dims p;
		int n, i, nin, nout, a;
		size_t j;
		char text[96];

		snprintf(text, sizeof(text), "seqs=3,lmax=80,heads=2,head_dim=64,block=64,rope=%d", rope);
		CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
		n = fams[f]->buffers(fams[f], &s, NULL, b);
		nout = f ? 3 : 1;
		nin = n - nout;
		for (i = 0; i < nin; i++) {
			in[i] = calloc(b[i].elems, kt_dtype_size(b[i].dtype));
			CU_ASSERT_PTR_NOT_NULL_FATAL(in[i]);
			CU_ASSERT_EQUAL(fams[f]->fill(fams[f], &s, i, in[i], 5 + (uint64_t)i), 0);
		}
		for (i = 0; i < nout; i++) {
			out[i] = calloc(b[0].elems, sizeof(float));
			CU_ASSERT_PTR_NOT_NULL_FATAL(out[i]);
		}
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(fams[f]->cpu_ref(fams[f], &s, (const void *const *)in, out,
						       &e), 0);
		p.seqs = 3;
		p.heads = 2;
		p.d = 64;
		p.blk = 64;
		p.offsets = in[f ? 4 : 3];
		p.tokens = p.offsets[3];
		for (a = 0; a < (f ? 4 : 3); a++) {
			x[a] = dalloc(b[0].elems);
			for (j = 0; j < b[0].elems; j++)
				x[a][j] = kt_bf16_to_f32(((uint16_t *)in[a])[j]);
		}
		tab = dalloc((size_t)(p.tokens * 64));
		for (j = 0; j < (size_t)(p.tokens * 64); j++)
			tab[j] = kt_bf16_to_f32(((uint16_t *)in[nin - 1])[j]);
		for (a = 0; a < nout; a++)
			y[a] = dalloc(b[0].elems);
		if (f) {
			CU_ASSERT_EQUAL(ba_cpu_bwd(&p, x[0], x[1], x[2], x[3], tab, rope == 2, y[0], y[1],
					y[2]), 0);
		} else {
			CU_ASSERT_EQUAL(ba_cpu_fwd(&p, x[0], x[1], x[2], tab, rope == 2, y[0]), 0);
		}
		for (a = 0; a < nout; a++) {
			double worst = 0, norm = 0;

			for (j = 0; j < b[0].elems; j++) {
				double d = fabs((double)out[a][j] - y[a][j]);

				worst = d > worst ? d : worst;
				norm += y[a][j] * y[a][j];
			}
			CU_ASSERT(worst < 1e-5);
			CU_ASSERT(norm > 0);
		}
		for (i = 0; i < 6; i++)
			free(in[i]);
		for (a = 0; a < 4; a++)
			free(x[a]);
		for (a = 0; a < 3; a++) {
			free(out[a]);
			free(y[a]);
		}
		free(tab);
	}
}

struct space_walk {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *t;
	int valid, bad;
	int valid_v[KT_MAX_VARIANTS];	/* valid configs per variant */
};

/* A valid config plans the block list's prep and one launch of whole
 * warps (what every plan must be: test_conformance); the backward's
 * chunked variant, and its ws at block 256, two (dQ, then dK and dV). */
static int walk_one(const struct kt_config *c, void *arg)
{
	struct space_walk *w = arg;
	struct kt_plan p;
	struct kt_err e;
	char why[160];

	if (w->f->check(w->f, w->s, c, w->t, why, sizeof(why)))
		return 0;
	w->valid++;
	if (c->variant >= 0 && c->variant < KT_MAX_VARIANTS)
		w->valid_v[c->variant]++;
	kt_err_clear(&e);
	if (w->f->plan(w->f, w->s, c, w->t, &p, &e) != 0 ||
	    p.nlaunch != (c->variant == kt_variant_index(w->f, "chunked") ||
				  (c->variant == kt_variant_index(w->f, "ws") &&
				   kt_shape_get(w->f, w->s, "block") == 256 && w->f == fams[1])
			  ? 2
			  : 1) ||
	    p.nprep != 1 || p.launch[0].block[0] % 32 != 0 || p.launch[p.nlaunch - 1].block[0] % 32 != 0)
		w->bad++;
	return 0;
}

/* Walks f's whole space at shape s for target t into a zeroed w. */
static void walk_space(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *t, struct space_walk *w)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->s = s;
	w->t = t;
	kt_space_foreach(f, 0, walk_one, w);
}

/* test_space's ws counts for one (f, target, shape): ws configs are valid
 * only on sm_90a, as many as ws_valid says (block 64: all of its space);
 * on sm_90a every other variant has as many valid configs as on sm_90
 * (kept in on90). */
static void space_ws(int f, const struct kt_target *t, int d, int blk, int rope,
		     const struct space_walk *w, int *on90)
{
	int ws = kt_variant_index(fams[f], "ws"), v;

	CU_ASSERT_FATAL(ws >= 0);
	CU_ASSERT_EQUAL(w->valid_v[ws], t->arch_a ? ws_valid(f, d, blk, rope) : 0);
	for (v = 0; v < fams[f]->nvariants; v++) {
		if (t->sm == 90 && !t->arch_a)
			on90[v] = w->valid_v[v];
		else if (t->arch_a && v != ws)
			CU_ASSERT_EQUAL(w->valid_v[v], on90[v]);
	}
}

/* Every supported (head_dim, block, rope) has a valid config on sm_80,
 * sm_90 and sm_90a, and a valid default: the grid variant, but ws at block
 * 128 on sm_90a where check_ws admits it. ws is valid on
 * sm_90a only (ws_valid: all of its space at block 64, at 128 the configs
 * that fit); sm_90a changes nothing else. (Every config's plan, every default's validity:
 * test_conformance.) */
static void test_space(void)
{
	static const char *const tn[] = {"sm_80", "sm_90", "sm_90a"};
	/* valid configs per variant on sm_90, per (f, head_dim, block, rope) */
	int on90[2][2][NBLKS][3][KT_MAX_VARIANTS];
	int f, ti, d, bi, rope;

	memset(on90, 0, sizeof(on90));
	for (f = 0; f < 2; f++)
		for (ti = 0; ti < 3; ti++)
			for (d = 64; d <= 128; d += 64)
				for (bi = 0; bi < NBLKS; bi++)
					for (rope = 0; rope < 3; rope++) {
						const int blk = BLKS[bi];
						struct kt_target t;
						struct kt_shape s;
						struct kt_config c;
						struct space_walk w;
						char text[128];

						snprintf(text, sizeof(text),
							 "seqs=1152,lmax=256,heads=4,head_dim=%d,block=%d,rope=%d",
							 d, blk, rope);
						CU_ASSERT_EQUAL_FATAL(kt_target_named(tn[ti], &t), 0);
						CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
						walk_space(fams[f], &s, &t, &w);
						CU_ASSERT(w.valid > 0);
						CU_ASSERT_EQUAL(w.bad, 0);
						CU_ASSERT_EQUAL(fams[f]->default_config(fams[f], &s,
											&t, &c), 0);
						/* ws at block 128 on sm_90a where it fits and was
						 * timed (the backward at head_dim 128: rope 0
						 * and 1), grid elsewhere */
						CU_ASSERT_EQUAL(c.variant,
								kt_variant_index(fams[f],
										 t.arch_a && blk == 128 &&
										 (!f || d == 64 || rope < 2) ? "ws"
													     : "grid"));
						CU_ASSERT_EQUAL(fams[f]->check(fams[f], &s, &c, &t, text,
									       sizeof(text)), 0);
						space_ws(f, &t, d, blk, rope, &w,
							 on90[f][d / 64 - 1][bi][rope]);
					}
}

/* ---- block 256: the forward's key-chunked kernel ---- */

static void b256_text(int d, int rope, char *text, size_t len)
{
	snprintf(text, len, "seqs=1152,lmax=1024,heads=4,head_dim=%d,block=256,rope=%d", d, rope);
}

/* Shared memory of the chunked backward's dK, dV kernel (the larger of
 * its two): the pass's two tiles, RING slots of two chunk tiles, the
 * chunk's fp32 statistics. */
static unsigned chunked_smem(long d, long kch, long qp, long ring)
{
	return (unsigned)(2 * (256 / qp) * d * 2 + ring * 2 * kch * d * 2 + kch * 8);
}

/* The backward at block 256: chunked (grid and persistent refused with
 * the reason; chunked refused at other blocks), every (KCH, QP, RING)
 * whose tiles fit but KCH 64 at head_dim 128 (spills); and ws on sm_90a
 * (CONS 1, 2 x RING 2, 3, RPROD 0), the same two-launch plan with the ws
 * program; the default ws on sm_90a, else chunked with KCH 32, QP 4,
 * RING 2; the chunked plan the
 * prep and two launches (dQ, then dK and dV) of a CTA per (block, head,
 * pass) over the scratch `blocks` grown by the statistics, which start
 * past the list (a bound plan's past its count). */
static void test_block256_bwd(void)
{
	static const char *const tn[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	const struct kt_family *f = fams[1];
	int chk = kt_variant_index(f, "chunked"), ws = kt_variant_index(f, "ws");
	int ik = param_index(f, "KCH");
	int iq = param_index(f, "QP"), ir = param_index(f, "RING");
	struct kt_target t90;
	struct kt_shape s;
	struct kt_config c, c2;
	struct kt_plan p;
	struct kt_buf bufs[KT_MAX_BUFS];
	struct kt_err e;
	char text[128], why[160], key[160];
	int ti, d, rope, nb, i;
	long nblocks = ba_blocks(1152, 1024, 256), T = ba_tokens(1152, 1024);

	CU_ASSERT_FATAL(chk == 3 && ws == 2 && ik >= 0 && iq >= 0 && ir >= 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	for (ti = 0; ti < 4; ti++)
		for (d = 64; d <= 128; d += 64)
			for (rope = 0; rope < 3; rope++) {
				struct kt_target t;
				struct space_walk w;
				int want = 0;

				CU_ASSERT_EQUAL_FATAL(kt_target_named(tn[ti], &t), 0);
				b256_text(d, rope, text, sizeof(text));
				CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
				for (long kch = 32; kch <= 64; kch += 32)
					for (long qp = 2; qp <= 4; qp += 2)
						for (long ring = 2; ring <= 3; ring++)
							want += chunked_smem(d, kch, qp, ring) <=
								(unsigned)t.smem_optin &&
								!(d == 128 && kch == 64);
				walk_space(f, &s, &t, &w);
				CU_ASSERT_EQUAL(w.bad, 0);
				CU_ASSERT_EQUAL(w.valid, w.valid_v[chk] + w.valid_v[ws]);
				CU_ASSERT_EQUAL(w.valid_v[chk], want);
				/* ws: sm_90a, CONS 1 and 2 x RING 2 and 3 (RPROD 0) */
				CU_ASSERT_EQUAL(w.valid_v[ws], ti == 3 ? 4 : 0);
				CU_ASSERT(want > 0);
				if (ti != 1)
					printf("\n    block 256 backward, head_dim %d, rope %d: %d chunked, "
					       "%d ws configs valid on %s", d, rope, w.valid_v[chk],
					       w.valid_v[ws], tn[ti]);
				CU_ASSERT_EQUAL_FATAL(f->default_config(f, &s, &t, &c), 0);
				/* sm_90a: ws (below); the chunked default's
				 * plan checked there all the same */
				if (t.arch_a) {
					CU_ASSERT_EQUAL(c.variant, ws);
					kt_err_clear(&e);
					CU_ASSERT_EQUAL_FATAL(kt_config_parse(f,
						"variant=chunked,RING=2,KCH=32,QP=4", &c, &e), 0);
				}
				CU_ASSERT_EQUAL(c.variant, chk);
				CU_ASSERT_EQUAL(c.p[ik], 32);
				CU_ASSERT_EQUAL(c.p[iq], 4);
				CU_ASSERT_EQUAL(c.p[ir], 2);
				CU_ASSERT(kt_config_in_space(f, &c));
				kt_err_clear(&e);
				CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &t, &p, &e), 0);
				CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "blockattn_bwd");
				CU_ASSERT(has_define(&p, "BLK=256"));
				CU_ASSERT(has_define(&p, "KCH=32"));
				CU_ASSERT(has_define(&p, "QP=4"));
				CU_ASSERT(has_define(&p, "STAGES=2"));
				CU_ASSERT_EQUAL(p.nprep, 1);
				CU_ASSERT_STRING_EQUAL(p.prep[0].kernel, "blockattn_blocks");
				CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
				CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "blockattn_bwd_dq");
				CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "blockattn_bwd_dkv");
				for (i = 0; i < 2; i++) {
					const struct kt_launch *l = &p.launch[i];

					/* 64 rows a pass, 16 a warp; a CTA per (block, head, pass) */
					CU_ASSERT_EQUAL(l->block[0], 128);
					CU_ASSERT_EQUAL(l->grid[0], (unsigned)(nblocks * 4 * 4));
					CU_ASSERT_EQUAL(l->smem, chunked_smem(d, 32, 4, 2) - (i ? 0u : 32u * 8));
					CU_ASSERT_EQUAL_FATAL(l->nargs, 12);
					CU_ASSERT_EQUAL(l->args[9].i, nblocks * 4);
					CU_ASSERT_EQUAL(l->args[10].i, 4);
					CU_ASSERT_EQUAL(l->args[11].i, nblocks);	/* stats_at */
					CU_ASSERT_EQUAL(l->args[4].kind, KT_ARG_BUF);
				}
				/* the scratch: the block list, then (LSE, Di) per token and head */
				nb = f->buffers(f, &s, &c, bufs);
				CU_ASSERT_EQUAL_FATAL(nb, p.launch[0].args[4].buf + 1);
				CU_ASSERT_EQUAL(bufs[nb - 1].role, KT_BUF_SCRATCH);
				CU_ASSERT_EQUAL(bufs[nb - 1].elems, (size_t)(2 * nblocks + 2 * T * 4));
				/* its reference holds a row of 256 scores */
				CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &s, &t, &p, &e), 0);
				CU_ASSERT(has_define(&p, "REF_MAX=256"));
			}
	/* the key round trip; the optional KCH, QP of a key without them */
	b256_text(128, 1, text, sizeof(text));
	CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
	CU_ASSERT_EQUAL_FATAL(f->default_config(f, &s, &t90, &c), 0);
	kt_config_key(f, &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "variant=chunked,RING=2,KCH=32,QP=4");
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, key, &c2, &e), 0);
	CU_ASSERT_EQUAL(memcmp(&c, &c2, sizeof(c)), 0);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, "variant=chunked,RING=2", &c2, &e), 0);
	CU_ASSERT_EQUAL(memcmp(&c, &c2, sizeof(c)), 0);
	c2.p[ik] = 16;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "KCH 16"));
	/* the refusals and their reasons */
	c2 = c;
	c2.p[ik] = 64;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spills"));
	c2.p[iq] = 2;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	c2.p[ik] = 32;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 0);
	c2.p[iq] = 8;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "QP 8"));
	c2 = c;
	c2.p[ir] = 1;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING 1"));
	c2 = c;
	c2.p[param_index(f, "ROWS_W")] = 16;
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "no parameter ROWS_W"));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, base_cfg[1], &c2, &e), 0);
	CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
	CU_ASSERT_STRING_EQUAL(why, "block 256: the backward's grid holds the whole block (32 to "
			       "128); chunked and ws take 256");
	CU_ASSERT_EQUAL(f->plan(f, &s, &c2, &t90, &p, &e), -1);
	/* a bound plan (the runtime's): the statistics past the bound's count,
	 * sized from the tokens */
	{
		long tokens = 5000, bound = ba_bound_blocks(tokens, 1152, 256);

		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(ba_plan_bound(1, &s, tokens, &c, &t90, &p, bufs, &nb, &e), 0);
		CU_ASSERT(has_define(&p, "BOUND=1"));
		CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
		CU_ASSERT_EQUAL(p.launch[1].args[9].i, bound * 4);
		CU_ASSERT_EQUAL(p.launch[0].args[11].i, bound + 1);
		CU_ASSERT_EQUAL(p.launch[1].args[11].i, bound + 1);
		CU_ASSERT_EQUAL(p.launch[0].grid[0], (unsigned)(bound * 4 * 4));
		CU_ASSERT_EQUAL(bufs[nb - 1].role, KT_BUF_SCRATCH);
		CU_ASSERT_EQUAL(bufs[nb - 1].elems, (size_t)(2 * (bound + 1) + 2 * tokens * 4));
	}
	/* ws (sm_90a): the chunked plan on wgmma -- the ws program with KCH
	 * 64, QP 4 / CONS, both kernels (CONS + 1) 128 threads and the same
	 * shared memory, units of (block, head, pass) of 64 CONS rows in
	 * persistent CTAs (compile-only: a CTA per unit; with the SM count
	 * at most one an SM, two at CONS 1 where two fit its 228 KiB), the
	 * same statistics */
	for (d = 64; d <= 128; d += 64)
		for (long cons = 1; cons <= 2; cons++)
			for (long ring = 2; ring <= 3; ring++) {
				struct kt_target t;
				long qp = 4 / cons;
				char def[32];

				CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t), 0);
				b256_text(d, (int)(ring + cons) % 3, text, sizeof(text));
				CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
				snprintf(key, sizeof(key), "variant=ws,CONS=%ld,RING=%ld,RPROD=0", cons,
					 ring);
				kt_err_clear(&e);
				CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, key, &c2, &e), 0);
				CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t, why, sizeof(why)), 0);
				CU_ASSERT(kt_config_in_space(f, &c2));
				/* sm_90 has no wgmma */
				CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t90, why, sizeof(why)), 1);
				CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
				kt_err_clear(&e);
				CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c2, &t, &p, &e), 0);
				CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "blockattn_ws");
				CU_ASSERT(has_define(&p, "BWD=1"));
				CU_ASSERT(has_define(&p, "BLK=256"));
				CU_ASSERT(has_define(&p, "KCH=64"));
				snprintf(def, sizeof(def), "QP=%ld", qp);
				CU_ASSERT(has_define(&p, def));
				snprintf(def, sizeof(def), "CONS=%ld", cons);
				CU_ASSERT(has_define(&p, def));
				snprintf(def, sizeof(def), "STAGES=%ld", ring);
				CU_ASSERT(has_define(&p, def));
				CU_ASSERT_EQUAL(p.nprep, 1);
				CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
				CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "blockattn_bwd_dq");
				CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "blockattn_bwd_dkv");
				for (i = 0; i < 2; i++) {
					const struct kt_launch *l = &p.launch[i];

					CU_ASSERT_EQUAL(l->block[0], (unsigned)(128 * (cons + 1)));
					/* two sets of the pass's two tiles, RING slots
					 * of two chunks and their statistics, the
					 * barriers */
					CU_ASSERT_EQUAL(l->smem, (unsigned)(2 * 2 * 64 * cons * d * 2 +
									    ring * (2 * 64 * d * 2 + 64 * 8) +
									    1024));

					CU_ASSERT(l->smem <= (unsigned)t.smem_optin);
					CU_ASSERT_EQUAL(l->grid[0], (unsigned)(nblocks * 4 * qp));
					CU_ASSERT_EQUAL_FATAL(l->nargs, 12);
					CU_ASSERT_EQUAL(l->args[9].i, nblocks * 4);
					CU_ASSERT_EQUAL(l->args[10].i, 4);
					CU_ASSERT_EQUAL(l->args[11].i, nblocks);	/* stats_at */
				}
				/* on 132 SMs: one CTA each, two at CONS 1 where two
				 * CTAs' shared memory (and 1 KiB each) fits 228 KiB:
				 * head_dim 64 */
				{
					struct kt_target t132 = t;
					struct kt_plan pp;
					long ctas = cons == 1 && d == 64 ? 2 : 1;

					t132.sms = 132;
					CU_ASSERT_EQUAL(ctas, 2 * (p.launch[0].smem + 1024) <= 228 * 1024 &&
								      cons == 1 ? 2 : 1);
					kt_err_clear(&e);
					CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c2, &t132, &pp, &e), 0);
					CU_ASSERT(nblocks * 4 * qp > 132 * ctas);
					for (i = 0; i < 2; i++) {
						CU_ASSERT_EQUAL(pp.launch[i].grid[0], (unsigned)(132 * ctas));
						CU_ASSERT_EQUAL(pp.launch[i].args[9].i, nblocks * 4);
						CU_ASSERT_EQUAL(pp.launch[i].smem, p.launch[i].smem);
					}
					/* fewer units than CTAs: one CTA a unit */
					t132.sms = (int)(nblocks * 4 * qp);
					kt_err_clear(&e);
					CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c2, &t132, &pp, &e), 0);
					CU_ASSERT_EQUAL(pp.launch[1].grid[0], (unsigned)(nblocks * 4 * qp));
					/* chunked keeps a CTA a unit on any SM count */
					t132.sms = 132;
					kt_err_clear(&e);
					CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, "variant=chunked,RING=2,KCH=32,QP=4",
									      &c, &e), 0);
					CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &t132, &pp, &e), 0);
					CU_ASSERT_EQUAL(pp.launch[0].grid[0], (unsigned)(nblocks * 4 * 4));
				}
				nb = f->buffers(f, &s, &c2, bufs);
				CU_ASSERT_EQUAL(bufs[nb - 1].role, KT_BUF_SCRATCH);
				CU_ASSERT_EQUAL(bufs[nb - 1].elems, (size_t)(2 * nblocks + 2 * T * 4));
				/* the refusals: rings outside 2 and 3, RPROD */
				c = c2;
				c.p[ir] = 1;
				CU_ASSERT_EQUAL(f->check(f, &s, &c, &t, why, sizeof(why)), 1);
				CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING 1"));
				c.p[ir] = 4;
				CU_ASSERT_EQUAL(f->check(f, &s, &c, &t, why, sizeof(why)), 1);
				CU_ASSERT_PTR_NOT_NULL(strstr(why, "RING 4: at most 3"));
				c = c2;
				c.p[ik] = 64;
				CU_ASSERT_EQUAL(f->check(f, &s, &c, &t, why, sizeof(why)), 1);
				CU_ASSERT_PTR_NOT_NULL(strstr(why, "ws has no parameter KCH"));
				for (rope = 0; rope < 3; rope++) {
					b256_text(d, rope, text, sizeof(text));
					CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
					CU_ASSERT_EQUAL(f->check(f, &s, &c2, &t, why, sizeof(why)), 0);
					for (long rp = 1; rp <= 3; rp++) {
						c = c2;
						c.p[param_index(f, "RPROD")] = rp;
						CU_ASSERT_EQUAL(f->check(f, &s, &c, &t, why, sizeof(why)), 1);
						CU_ASSERT_PTR_NOT_NULL(strstr(why, rope ? "at block 256 (backward)"
											 : "without rope"));
					}
					/* the default at every rope: ws, two
					 * consumers, a ring of two (timed ahead of
					 * chunked) */
					CU_ASSERT_EQUAL_FATAL(f->default_config(f, &s, &t, &c), 0);
					CU_ASSERT_EQUAL(c.variant, kt_variant_index(f, "ws"));
					CU_ASSERT_EQUAL(c.p[param_index(f, "CONS")], 2);
					CU_ASSERT_EQUAL(c.p[ir], 2);
				}
			}
	/* a bound ws plan: the statistics past the bound's count, as chunked */
	{
		long tokens = 5000, bound = ba_bound_blocks(tokens, 1152, 256);
		struct kt_target t;

		CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t), 0);
		b256_text(128, 0, text, sizeof(text));
		CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, "variant=ws,CONS=2,RING=2,RPROD=0", &c2, &e),
				      0);
		CU_ASSERT_EQUAL_FATAL(ba_plan_bound(1, &s, tokens, &c2, &t, &p, bufs, &nb, &e), 0);
		CU_ASSERT(has_define(&p, "BOUND=1"));
		CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
		CU_ASSERT_EQUAL(p.launch[1].args[11].i, bound + 1);
		CU_ASSERT_EQUAL(p.launch[1].grid[0], (unsigned)(bound * 4 * 2));
		CU_ASSERT_EQUAL(bufs[nb - 1].elems, (size_t)(2 * (bound + 1) + 2 * tokens * 4));
		/* on 132 SMs the persistent grid; the bound still the kernels'
		 * nitems (they read the count behind it) */
		t.sms = 132;
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(ba_plan_bound(1, &s, tokens, &c2, &t, &p, bufs, &nb, &e), 0);
		CU_ASSERT(bound * 4 * 2 > 132);
		CU_ASSERT_EQUAL(p.launch[0].grid[0], 132);
		CU_ASSERT_EQUAL(p.launch[1].grid[0], 132);
		CU_ASSERT_EQUAL(p.launch[1].args[9].i, bound * 4);
	}
	/* block 64: chunked refused; its own grid key unchanged */
	snprintf(text, sizeof(text), "seqs=1152,lmax=256,heads=4,head_dim=64,block=64,rope=0");
	CU_ASSERT_EQUAL_FATAL(parse(f, text, &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, "variant=chunked,RING=2,KCH=32,QP=4", &c, &e), 0);
	CU_ASSERT_EQUAL(f->check(f, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "block 256 only"));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(f, base_cfg[1], &c2, &e), 0);
	kt_config_key(f, &c2, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, base_cfg[1]);
}

/* Block 256: both families parse it; the forward admits grid and
 * persistent configs (KCH 64, 128, or 0: the whole row) and no prefetch or
 * ws; on sm_80 at head_dim 128 only with KST (three 64 KiB tiles exceed its
 * 163 KiB), which its default then takes; its plans name the chunked
 * program (KCH, QP, KST when set) with BLK / QP / ROWS_W * DSPLIT * 32
 * threads and the tiles' (or the ring's) shared memory, its reference
 * REF_MAX=256. The backward takes it as chunked only (test_block256_bwd);
 * blocks 64 and 128 refuse KCH, QP and KST and plan no such define. */
/* ws forward configs check() admits at block 256 (sm_90a): every (CONS,
 * RING) -- two q slots of 64 CONS rows and RING k/v chunks fit 227 KiB --
 * with RPROD 0, or with rope 0 and 1; RPROD 1 not at head_dim 128, rope
 * 2, CONS 2 (spills). */
static long ws256_valid(int d, int rope)
{
	if (!rope)
		return 2 * 3;
	return 2 * 3 * 2 - (d == 128 && rope == 2 ? 3 : 0);
}

/* The ws forward at block 256: its plan (the template's defines, one CTA
 * of CONS + 1 warpgroups per SM, two q slots and RING k/v slots of
 * ws_kc keys plus the barriers' KiB), RPROD 2 and the backward refused
 * with their reasons, the default unchanged (grid). */
static void test_ws256(void)
{
	struct kt_target t90a;
	int d, rope, ws = kt_variant_index(fams[0], "ws");

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t90a), 0);
	for (d = 64; d <= 128; d += 64)
		for (rope = 0; rope < 3; rope++)
			for (long cons = 1; cons <= 2; cons++)
				for (long ring = 2; ring <= 4; ring++)
					for (int rprod = 0; rprod < 3; rprod++) {
						long kc = d == 64 ? 128 : 64;
						int ok = rprod == 0 || (rope && rprod == 1 &&
								!(d == 128 && rope == 2 && cons == 2));
						struct kt_shape s;
						struct kt_config c;
						struct kt_plan p;
						struct kt_err e;
						char text[128], why[160], def[32];

						b256_text(d, rope, text, sizeof(text));
						CU_ASSERT_EQUAL_FATAL(parse(fams[0], text, &s), 0);
						snprintf(text, sizeof(text), "variant=ws,CONS=%ld,RING=%ld%s",
							 cons, ring, ws_tail(rprod));
						kt_err_clear(&e);
						CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0], text, &c, &e), 0);
						CU_ASSERT_EQUAL(c.variant, ws);
						CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90a, why,
									       sizeof(why)), !ok);
						if (!ok) {
							CU_ASSERT_PTR_NOT_NULL(strstr(why, !rope ? "without rope"
											   : rprod == 2 ? "0 or 1"
													: "spills"));
							continue;
						}
						CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t90a, &p,
										    &e), 0);
						CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "blockattn_ws");
						CU_ASSERT(has_define(&p, "BLK=256"));
						snprintf(def, sizeof(def), "CONS=%ld", cons);
						CU_ASSERT(has_define(&p, def));
						snprintf(def, sizeof(def), "STAGES=%ld", ring);
						CU_ASSERT(has_define(&p, def));
						CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "blockattn_fwd_ws");
						CU_ASSERT_EQUAL(p.launch[0].block[0], (unsigned)(cons + 1) * 128);
						CU_ASSERT_EQUAL(p.launch[0].grid[0], 132);
						CU_ASSERT_EQUAL(p.launch[0].smem,
								(unsigned)((2 * 64 * cons + ring * 2 * kc) * d * 2 +
									   1024));
						CU_ASSERT(p.launch[0].smem <= (unsigned)t90a.smem_optin);
					}
	/* the backward's ws at block 256: RPROD 0 only (test_block256_bwd) */
	{
		struct kt_shape s;
		struct kt_config c;
		struct kt_err e;
		char text[128], why[160];

		b256_text(64, 1, text, sizeof(text));
		CU_ASSERT_EQUAL_FATAL(parse(fams[1], text, &s), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1], "variant=ws,CONS=1,RING=2,RPROD=0", &c,
						      &e), 0);
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90a, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[1], "variant=ws,CONS=1,RING=2,RPROD=1", &c,
						      &e), 0);
		CU_ASSERT_EQUAL(fams[1]->check(fams[1], &s, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPROD 1 at block 256 (backward)"));
	}
}

static void test_block256(void)
{
	static const char *const tn[] = {"sm_80", "sm_90", "sm_90a"};
	int grid = kt_variant_index(fams[0], "grid"), pers = kt_variant_index(fams[0], "persistent");
	int pf = kt_variant_index(fams[0], "prefetch"), ws = kt_variant_index(fams[0], "ws");
	int ikch = param_index(fams[0], "KCH"), iqp = param_index(fams[0], "QP");
	int ikst = param_index(fams[0], "KST");
	struct kt_target t90, t80;
	struct kt_shape s;
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e;
	char text[128], why[160], def[16];
	int ti, d, rope;

	CU_ASSERT_FATAL(grid >= 0 && pers >= 0 && pf >= 0 && ws >= 0 && ikch >= 0 && iqp >= 0 &&
			ikst >= 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &t90), 0);
	for (ti = 0; ti < 3; ti++)
		for (d = 64; d <= 128; d += 64)
			for (rope = 0; rope < 3; rope++) {
				struct kt_target t;
				struct space_walk w;
				int streamed = ti == 0 && d == 128;

				CU_ASSERT_EQUAL_FATAL(kt_target_named(tn[ti], &t), 0);
				b256_text(d, rope, text, sizeof(text));
				CU_ASSERT_EQUAL_FATAL(parse(fams[0], text, &s), 0);
				walk_space(fams[0], &s, &t, &w);
				CU_ASSERT_EQUAL(w.bad, 0);
				CU_ASSERT_EQUAL(w.valid_v[pf], 0);
				/* ws on sm_90a only: ws256_valid of its space */
				CU_ASSERT_EQUAL(w.valid_v[ws], ti == 2 ? ws256_valid(d, rope) : 0);
				CU_ASSERT(w.valid_v[grid] > 0);
				CU_ASSERT(w.valid_v[pers] > 0);
				if (ti != 1)
					printf("\n    block 256, head_dim %d, rope %d: %d grid, %d persistent, "
					       "%d ws configs valid on %s", d, rope, w.valid_v[grid],
					       w.valid_v[pers], w.valid_v[ws], tn[ti]);
				kt_err_clear(&e);
				CU_ASSERT_EQUAL_FATAL(fams[0]->default_config(fams[0], &s, &t, &c), 0);
				if (ti == 2) {
					/* sm_90a: ws, two consumers, a k/v ring of four
					 * chunks (128 keys at d 64, 64 at d 128) */
					CU_ASSERT_EQUAL(c.variant, ws);
					CU_ASSERT_EQUAL(c.p[param_index(fams[0], "CONS")], 2);
					CU_ASSERT_EQUAL(c.p[param_index(fams[0], "RING")], 4);
					CU_ASSERT_EQUAL_FATAL(
						fams[0]->plan(fams[0], &s, &c, &t, &p, &e), 0);
					CU_ASSERT(has_define(&p, "BLK=256"));
					CU_ASSERT_EQUAL(p.launch[0].block[0], 384);
					CU_ASSERT_EQUAL(p.launch[0].smem,
							(unsigned)((2 * 64 * 2 + 4 * 2 * (d == 64 ? 128 : 64)) *
								   d * 2 + 1024));
					continue;
				}
				CU_ASSERT_EQUAL(c.variant, grid);
				CU_ASSERT_EQUAL(c.p[ikch], 64);
				CU_ASSERT_EQUAL(c.p[iqp], 2);
				CU_ASSERT_EQUAL(c.p[ikst], streamed ? 2 : 0);
				CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t, &p, &e), 0);
				CU_ASSERT(has_define(&p, "BLK=256"));
				CU_ASSERT(has_define(&p, "KCH=64"));
				CU_ASSERT(has_define(&p, "QP=2"));
				CU_ASSERT_EQUAL(has_define(&p, "KST=2"), streamed);
				/* 128 rows a pass, 16 a warp */
				CU_ASSERT_EQUAL(p.launch[0].block[0], 256);
				if (streamed) /* two passes' 128 q rows, two stages of a 64-row k and v chunk */
					CU_ASSERT_EQUAL(p.launch[0].smem,
							(unsigned)((2 * 128 + 2 * 2 * 64) * d * 2));
				if (!streamed)
					CU_ASSERT_EQUAL(p.launch[0].smem, (unsigned)(3 * 256 * d * 2) +
						(rope ? 256u * (unsigned)(2 * d + 16) *
								(c.p[param_index(fams[0], "RPF")] == 2)
						      : 0u));
				/* its reference holds a row of 256 scores */
				CU_ASSERT_EQUAL_FATAL(fams[0]->ref_plan(fams[0], &s, &t, &p, &e), 0);
				CU_ASSERT(has_define(&p, "REF_MAX=256"));
				CU_ASSERT_EQUAL(p.launch[0].block[0], 256);
			}
	/* one config's plan: threads and shared memory from ROWS_W, DSPLIT,
	 * QP, STAGES and the table tile */
	b256_text(64, 1, text, sizeof(text));
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], text, &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=persistent,ROWS_W=32,DSPLIT=2,STAGES=1,CTAS_SM=1,RPF=2,MINB=1,KCH=128,QP=2",
		&c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t90, &p, &e), 0);
	CU_ASSERT(has_define(&p, "KCH=128"));
	CU_ASSERT_EQUAL(p.launch[0].block[0], 256 / 2 / 32 * 2 * 32);
	CU_ASSERT_EQUAL(p.launch[0].smem, 3 * 256 * 64 * 2 + 256 * (2 * 64 + 16));
	/* the whole S row (KCH 0) of two m16 tiles spills */
	c.p[ikch] = 0;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
	/* RPF 2's table tile beside three 64 KiB tiles at head_dim 128 */
	b256_text(128, 1, text, sizeof(text));
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], text, &s), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=1,RPF=2,MINB=1,KCH=64,QP=2", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	c.p[param_index(fams[0], "RPF")] = 1;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 0);
	/* two stages of 192 KiB do not fit */
	c.p[param_index(fams[0], "STAGES")] = 2;
	c.p[param_index(fams[0], "ITEMS")] = 2;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	/* 512 threads in one pass: 128 registers a thread, too few at d 128 */
	c.p[param_index(fams[0], "STAGES")] = 1;
	c.p[iqp] = 1;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
	/* prefetch has no block-256 kernel; ws has (sm_90a: test_ws256) */
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=prefetch,ROWS_W=16,DSPLIT=1,ITEMS=2,RPF=1,MINB=1,EPI=1", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "grid, persistent and ws"));
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0], "variant=ws,CONS=1,RING=2,RPROD=0", &c, &e), 0);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
	test_ws256();
	/* KST, on sm_80 at head_dim 128 (where three whole tiles overfill shared
	 * memory): the ring's shared memory and define; its refusals, on sm_90
	 * first (the whole tiles fit there) */
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_80", &t80), 0);
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0],
		"variant=grid,ROWS_W=16,DSPLIT=1,STAGES=1,ITEMS=2,RPF=0,MINB=1,KCH=64,QP=2,KST=3", &c, &e),
			      0);
	CU_ASSERT_EQUAL(c.p[ikst], 3);
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "whole k, v tiles fit"));
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t80, &p, &e), 0);
	CU_ASSERT(has_define(&p, "KST=3"));
	CU_ASSERT_EQUAL(p.launch[0].smem, (2 * 128 + 3 * 2 * 64) * 128 * 2);
	c.p[ikst] = 1;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "0, 2 or 3"));
	c.p[ikst] = 2;
	c.p[param_index(fams[0], "RPF")] = 1;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "RPF 0"));
	c.p[param_index(fams[0], "RPF")] = 0;
	c.p[param_index(fams[0], "STAGES")] = 2;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "STAGES 1"));
	c.p[param_index(fams[0], "STAGES")] = 1;
	c.p[ikch] = 0;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "KCH 32, 64 or 128"));
	/* 512 threads at head_dim 128 spill */
	c.p[ikch] = 64;
	c.p[param_index(fams[0], "DSPLIT")] = 2;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "spill"));
	c.p[param_index(fams[0], "DSPLIT")] = 1;
	/* 32-key chunks: KST only; with it, ROWS_W 32 at 128 threads fits */
	c.p[ikch] = 32;
	c.p[ikst] = 0;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "KST only"));
	c.p[ikst] = 3;
	c.p[param_index(fams[0], "ROWS_W")] = 32;
	CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t80, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t80, &p, &e), 0);
	CU_ASSERT_EQUAL(p.launch[0].block[0], 128);
	CU_ASSERT_EQUAL(p.launch[0].smem, (2 * 128 + 3 * 2 * 32) * 128 * 2);
	test_block256_bwd();
	/* blocks 64, 128: a key from before KCH and QP is the one-pass kernel,
	 * no KCH or QP defined; KCH or QP set are refused */
	for (int blk = 64; blk <= 128; blk += 64) {
		snprintf(text, sizeof(text), "seqs=1152,lmax=256,heads=4,head_dim=64,block=%d,rope=0",
			 blk);
		CU_ASSERT_EQUAL_FATAL(parse(fams[0], text, &s), 0);
		kt_err_clear(&e);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fams[0], base_cfg[0], &c, &e), 0);
		CU_ASSERT_EQUAL(c.p[ikch], 0);
		CU_ASSERT_EQUAL(c.p[iqp], 1);
		CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(fams[0]->plan(fams[0], &s, &c, &t90, &p, &e), 0);
		snprintf(def, sizeof(def), "BLK=%d", blk);
		CU_ASSERT(has_define(&p, def));
		CU_ASSERT_EQUAL(c.p[ikst], 0);
		for (int i = 0; i < p.programs[0].ndefines; i++) {
			CU_ASSERT(strncmp(p.programs[0].defines[i], "KCH=", 4) != 0);
			CU_ASSERT(strncmp(p.programs[0].defines[i], "QP=", 3) != 0);
			CU_ASSERT(strncmp(p.programs[0].defines[i], "KST=", 4) != 0);
		}
		CU_ASSERT_EQUAL_FATAL(fams[0]->ref_plan(fams[0], &s, &t90, &p, &e), 0);
		CU_ASSERT_EQUAL(p.programs[0].ndefines, 0);
		c.p[ikch] = 64;
		CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "KCH"));
		c.p[ikch] = 0;
		c.p[iqp] = 2;
		CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "QP"));
		c.p[iqp] = 1;
		c.p[ikst] = 2;
		CU_ASSERT_EQUAL(fams[0]->check(fams[0], &s, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "KST"));
	}
}

static void test_models(void)
{
	struct kt_shape s0, s1;
	double bf, bb, ff, fb, T = (double)ba_tokens(1152, 256);

	CU_ASSERT_EQUAL_FATAL(parse(fams[0], "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
				    &s0), 0);
	CU_ASSERT_EQUAL_FATAL(parse(fams[0], "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
				    &s1), 0);
	bf = fams[0]->min_bytes(fams[0], &s0);
	bb = fams[1]->min_bytes(fams[1], &s0);
	/* the byte floors of docs/kernels.md: 8d and 14d per token-head */
	CU_ASSERT(fabs(bf - 8.0 * 128 * 4 * T) < 8.0 * 1153);
	CU_ASSERT(fabs(bb - 14.0 * 128 * 4 * T) < 8.0 * 1153);
	/* rope adds the bf16 table, read once: 2d bytes per token */
	CU_ASSERT(fabs(fams[0]->min_bytes(fams[0], &s1) - bf - 2.0 * 128 * T) < 1.0);
	CU_ASSERT(fabs(fams[1]->min_bytes(fams[1], &s1) - bb - 2.0 * 128 * T) < 1.0);
	ff = fams[0]->flops(fams[0], &s0);
	fb = fams[1]->flops(fams[1], &s0);
	CU_ASSERT(fabs(fb / ff - 2.5) < 1e-9);
	/* every block is at most BLK long: fewer FLOPs than all-full blocks */
	CU_ASSERT(ff <= 4.0 * T * 64 * 128 * 4 && ff > 4.0 * T * 16 * 128 * 4);
}

/* ---- NVRTC ---- */

/* Optional programs compiled per architecture and suite in CI (about). */
#define CI_SAMPLE 24

struct collect {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *t;
	struct kt_program *progs;
	int *required;		/* 0: may be left out of a CI sample */
	/* the kernels (launch, prep) a plan of each program names: its cubin
	 * must hold them */
	char (*kernels)[3][KT_NAME_MAX];	/* launch[0], prep[0], launch[1] */
	int n, cap;
	/* per family: a required program already has variant v / value j of
	 * parameter i (every value compiled in CI, not only a sample) */
	int cover_var[8], cover[KT_MAX_PARAMS][KT_MAX_VALUES];
	int cover_only;		/* 1: add a program only when it covers something new */
};

/* 1 when cfg has a variant or a parameter value that c has not covered. */
static int covers_new(const struct collect *c, const struct kt_config *cfg)
{
	int i, j;

	if (!c->cover_var[cfg->variant])
		return 1;
	for (i = 0; i < c->f->nparams; i++)
		if (c->f->params[i].variants & (1u << cfg->variant))
			for (j = 0; j < c->f->params[i].nvalues; j++)
				if (c->f->params[i].values[j] == cfg->p[i] && !c->cover[i][j])
					return 1;
	return 0;
}

/* Adds the program of plan pl (once) and returns its index. */
static int add_program(struct collect *c, const struct kt_plan *pl, int required)
{
	const struct kt_program *p = &pl->programs[0];
	int i;

	for (i = 0; i < c->n; i++)
		if (kt_program_same(&c->progs[i], p)) {
			c->required[i] |= required;
			return i;
		}
	if (c->n == c->cap) {
		struct kt_program *np = realloc(c->progs, (size_t)(c->cap * 2 + 16) * sizeof(*np));
		char (*nk)[3][KT_NAME_MAX];
		int *nr;

		CU_ASSERT_PTR_NOT_NULL_FATAL(np);
		c->progs = np;
		nr = realloc(c->required, (size_t)(c->cap * 2 + 16) * sizeof(*nr));
		CU_ASSERT_PTR_NOT_NULL_FATAL(nr);
		c->required = nr;
		nk = realloc(c->kernels, (size_t)(c->cap * 2 + 16) * sizeof(*nk));
		CU_ASSERT_PTR_NOT_NULL_FATAL(nk);
		c->kernels = nk;
		c->cap = c->cap * 2 + 16;
	}
	c->required[c->n] = required;
	memset(c->kernels[c->n], 0, sizeof(c->kernels[c->n]));
	if (pl->nlaunch > 0)
		snprintf(c->kernels[c->n][0], KT_NAME_MAX, "%s", pl->launch[0].kernel);
	if (pl->nprep > 0)
		snprintf(c->kernels[c->n][1], KT_NAME_MAX, "%s", pl->prep[0].kernel);
	if (pl->nlaunch > 1)
		snprintf(c->kernels[c->n][2], KT_NAME_MAX, "%s", pl->launch[1].kernel);
	c->progs[c->n++] = *p;
	return c->n - 1;
}

/* 1 when the cubin's symbol names hold `name` (extern "C": unmangled,
 * NUL on both sides in the ELF string table). */
static int cubin_has(const struct jit_result *r, const char *name)
{
	const char *b = r->cubin;
	size_t n = strlen(name), i;

	for (i = 1; b && i + n < r->cubin_len; i++)
		if (b[i - 1] == 0 && b[i + n] == 0 && memcmp(b + i, name, n) == 0)
			return 1;
	return 0;
}

/* 1 for the ws variant: the only one that needs sm_90a, the only one
 * compiled for it. */
static int is_ws(const struct kt_family *f, int v)
{
	return v >= 0 && v < f->nvariants && strcmp(f->variants[v], "ws") == 0;
}

/* The first config with a variant or a parameter value not seen yet makes
 * its program (index idx) required. */
static void mark_cover(struct collect *c, const struct kt_config *cfg, int idx)
{
	int i, j;

	if (cfg->variant >= 0 && cfg->variant < 8 && !c->cover_var[cfg->variant]) {
		c->cover_var[cfg->variant] = 1;
		c->required[idx] = 1;
	}
	for (i = 0; i < c->f->nparams; i++) {
		const struct kt_param *pa = &c->f->params[i];

		if (!(pa->variants & (1u << cfg->variant)))
			continue;
		for (j = 0; j < pa->nvalues; j++)
			if (pa->values[j] == cfg->p[i] && !c->cover[i][j]) {
				c->cover[i][j] = 1;
				c->required[idx] = 1;
			}
	}
}

/* The first and last program added since c had n0 (one shape's space: its
 * extremes) are required. */
static void mark_ends(struct collect *c, int n0)
{
	if (c->n > n0) {
		c->required[n0] = 1;
		c->required[c->n - 1] = 1;
	}
}

/* Keeps about CI_SAMPLE of c's programs that are not required (a fixed
 * seed: the same ones every run). */
static void sample_optional(struct collect *c)
{
	uint64_t seed = 12345;
	int i, optional = 0;

	for (i = 0; i < c->n; i++)
		optional += !c->required[i];
	for (i = 0; i < c->n; i++) {
		if (c->required[i])
			continue;
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		if ((int)((seed >> 33) % (uint64_t)optional) < CI_SAMPLE)
			c->required[i] = 1;
	}
}

static int collect_one(const struct kt_config *cfg, void *arg)
{
	struct collect *c = arg;
	struct kt_plan p;
	struct kt_err e;
	char why[160];

	/* sm_90a: ws alone (the others' programs are sm_90's) */
	if (c->t->arch_a && !is_ws(c->f, cfg->variant))
		return 0;
	if (c->f->check(c->f, c->s, cfg, c->t, why, sizeof(why)))
		return 0;
	if (c->cover_only && !covers_new(c, cfg))
		return 0;
	kt_err_clear(&e);
	if (c->f->plan(c->f, c->s, cfg, c->t, &p, &e) == 0)
		mark_cover(c, cfg, add_program(c, &p, 0));
	return 0;
}

static void compile_for(const char *arch)
{
	int everything = kt_test_env_on("KTUNE_COMPILE_ALL");
	struct collect c = {0};
	struct kt_target t;
	struct jit_job *jobs;
	int *job_prog;
	int f, d, blk, bi, rope, i, njobs = 0, failed = 0, missing = 0, kept_serial = 0, ws_spills = 0;
	long nws = 0;		/* sm_90a: ws programs expected */

	CU_ASSERT_EQUAL_FATAL(kt_target_named(arch, &t), 0);
	for (f = 0; f < 2; f++) {
		int pi, vi, ws = kt_variant_index(fams[f], "ws");

		/* ws: every config a program; every one valid at block 64, those
		 * that fit at 128 (the backward's at head_dim 64) */
		CU_ASSERT_FATAL(ws >= 0);
		for (d = 64; d <= 128; d += 64)
			for (blk = 64; blk <= 128; blk += 64)
				for (rope = 0; rope < 3; rope++)
					nws += ws_valid(f, d, blk, rope);

		memset(c.cover_var, 0, sizeof(c.cover_var));
		memset(c.cover, 0, sizeof(c.cover));
		for (d = 64; d <= 128; d += 64)
			for (bi = 0; bi < NBLKS; bi++)
				for (rope = 0; rope < 3; rope++) {
					blk = BLKS[bi];
					struct kt_shape s;
					struct kt_config cfg;
					struct kt_plan p;
					struct kt_err e;
					char text[128];
					int bench = d == 128 && blk == 64;
					/* rope 2 (v rotated too) takes other paths of every
					 * RPF and RPROD: at the bench shape its own first
					 * config of each variant and value is required */
					int own = bench && rope == 2 && !everything && !t.arch_a;
					int keep_var[8] = {0}, keep[KT_MAX_PARAMS][KT_MAX_VALUES] = {{0}};

					if (own) {
						memcpy(keep_var, c.cover_var, sizeof(keep_var));
						memcpy(keep, c.cover, sizeof(keep));
						memset(c.cover_var, 0, sizeof(c.cover_var));
						memset(c.cover, 0, sizeof(c.cover));
					}

					snprintf(text, sizeof(text),
						 "seqs=1152,lmax=256,heads=4,head_dim=%d,block=%d,rope=%d",
						 d, blk, rope);
					CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
					c.f = fams[f];
					c.s = &s;
					c.t = &t;
					if (everything || bench || t.arch_a) {
						int n0 = c.n;

						c.cover_only = 0;
						kt_space_foreach(fams[f], 0, collect_one, &c);
						mark_ends(&c, n0);
					}
					for (int v = 0; own && v < 8; v++)
						c.cover_var[v] |= keep_var[v];
					for (int a = 0; own && a < KT_MAX_PARAMS; a++)
						for (int j = 0; j < KT_MAX_VALUES; j++)
							c.cover[a][j] |= keep[a][j];
					if (t.arch_a)
						continue;
					kt_err_clear(&e);
					CU_ASSERT_EQUAL_FATAL(fams[f]->default_config(fams[f], &s,
										      &t, &cfg), 0);
					CU_ASSERT_EQUAL_FATAL(fams[f]->plan(fams[f], &s, &cfg, &t,
									    &p, &e), 0);
					add_program(&c, &p, 1);
					kt_err_clear(&e);
					{
						struct kt_plan rp;

						CU_ASSERT_EQUAL_FATAL(
							fams[f]->ref_plan(fams[f], &s, &t, &rp, &e), 0);
						add_program(&c, &rp, 1);
					}
				}
		/* values valid nowhere at the bench shape (MINB 4 overfills
		 * sm_80's shared memory at d = 128; KCH, QP and the backward's
		 * chunked variant: block 256 only): from the other shapes (bi ==
		 * NBLKS: block 256) */
		for (d = 64; d <= 128 && !t.arch_a; d += 64)
			for (bi = 0; bi <= NBLKS; bi++)
				for (rope = 0; rope < 3; rope++) {
					blk = bi < NBLKS ? BLKS[bi] : 256;
					struct kt_shape s;
					char text[128];

					snprintf(text, sizeof(text),
						 "seqs=1152,lmax=256,heads=4,head_dim=%d,block=%d,rope=%d",
						 d, blk, rope);
					CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
					c.f = fams[f];
					c.s = &s;
					c.cover_only = 1;
					kt_space_foreach(fams[f], 0, collect_one, &c);
				}
		/* every variant and every parameter value is compiled: ws's for
		 * sm_90a, the others' for the other targets */
		for (pi = 0; pi < fams[f]->nvariants; pi++)
			CU_ASSERT_EQUAL(c.cover_var[pi], is_ws(fams[f], pi) == t.arch_a);
		for (pi = 0; pi < fams[f]->nparams; pi++)
			for (vi = 0; vi < fams[f]->params[pi].nvalues; vi++) {
				uint32_t mine = t.arch_a ? 1u << ws : ~(1u << ws);

				if (!(fams[f]->params[pi].variants & mine))
					continue;
				/* KST (and KCH 32, KST's only) where three whole
				 * 256 x 128 tiles fit: refused by design */
				if (!f && t.smem_optin >= 3 * 256 * 128 * 2 &&
				    ((!strcmp(fams[f]->params[pi].name, "KST") &&
				      fams[f]->params[pi].values[vi]) ||
				     (!strcmp(fams[f]->params[pi].name, "KCH") &&
				      fams[f]->params[pi].values[vi] == 32)))
					continue;
				/* RING 1: ws's alone (the backward at block 128,
				 * head_dim 128), never chunked's */
				if (f && !t.arch_a && !strcmp(fams[f]->params[pi].name, "RING") &&
				    fams[f]->params[pi].values[vi] == 1)
					continue;
				CU_ASSERT(c.cover[pi][vi]);
				if (!c.cover[pi][vi])
					fprintf(stderr, "\n  %s %s: %s=%ld in no valid config\n", arch,
						fams[f]->name, fams[f]->params[pi].name,
						fams[f]->params[pi].values[vi]);
			}
	}
	/* CI: every required program plus a fixed-seed sample of the rest */
	if (!everything)
		sample_optional(&c);
	jobs = calloc((size_t)c.n, sizeof(*jobs));
	job_prog = calloc((size_t)c.n, sizeof(*job_prog));
	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(job_prog);
	for (i = 0; i < c.n; i++)
		if (everything || c.required[i]) {
			job_prog[njobs] = i;
			jobs[njobs].prog = &c.progs[i];
			jobs[njobs++].arch = arch;
		}
	jit_compile_all(jobs, njobs, 0);
	for (i = 0; i < njobs; i++) {
		int k;

		if (jobs[i].failed || !jobs[i].res.ok) {
			failed++;
			fprintf(stderr, "%s %s:", arch, jobs[i].prog->tpl);
			for (k = 0; k < jobs[i].prog->ndefines; k++)
				fprintf(stderr, " %s", jobs[i].prog->defines[k]);
			fprintf(stderr, "\n%s\n%s\n", jobs[i].err_msg,
				jobs[i].res.log ? jobs[i].res.log : "");
		} else {
			char what[400];
			size_t w;
			int bwd = 0, d64 = 0, blk64 = 0;

			w = (size_t)snprintf(what, sizeof(what), "%s %s", arch, jobs[i].prog->tpl);
			for (k = 0; k < jobs[i].prog->ndefines && w < sizeof(what); k++) {
				const char *def = jobs[i].prog->defines[k];

				w += (size_t)snprintf(what + w, sizeof(what) - w, " %s", def);
				bwd |= strcmp(def, "BWD=1") == 0;
				d64 |= strcmp(def, "HD=64") == 0;
				blk64 |= strcmp(def, "BLK=64") == 0;
			}
			/* No program may have its wgmmas serialized by ptxas, but
			 * the backward ws ones at block 64, head_dim 64: there the
			 * serialized form was measured faster and is kept (see
			 * zero_acc in blockattn_ws.cu); counted. */
			if (bwd && d64 && blk64 && strcmp(jobs[i].prog->tpl, "blockattn_ws") == 0)
				kept_serial += kt_test_wgmma_serialized(jobs[i].res.log, what);
			else
				CU_ASSERT_FALSE(kt_test_wgmma_serialized(jobs[i].res.log, what));
			/* no ws program spills: check_ws refuses those that do */
			if (strcmp(jobs[i].prog->tpl, "blockattn_ws") == 0) {
				int regs, frame;

				kt_test_cubin_usage(jobs[i].res.cubin, jobs[i].res.cubin_len, &regs,
						    &frame);
				CU_ASSERT(regs > 0);
				if (frame != 0) {
					ws_spills++;
					fprintf(stderr, "  SPILLS %s: %d bytes stack frame\n", what, frame);
				}
			}
		}
		/* the kernels its plans launch are in it */
		for (k = 0; k < 3 && jobs[i].res.ok; k++) {
			const char *name = c.kernels[job_prog[i]][k];

			if (name[0] && !cubin_has(&jobs[i].res, name)) {
				int m;

				missing++;
				fprintf(stderr, "\n  %s %s:", arch, jobs[i].prog->tpl);
				for (m = 0; m < jobs[i].prog->ndefines; m++)
					fprintf(stderr, " %s", jobs[i].prog->defines[m]);
				fprintf(stderr, ": no kernel %s in the cubin\n", name);
			}
		}
		jit_result_release(&jobs[i].res);
	}
	printf("\n  %s: %d of %d blockattn programs compiled%s, %d failed\n", arch, njobs, c.n,
	       everything ? "" : " (KTUNE_COMPILE_ALL=1: all)", failed);
	CU_ASSERT(njobs > 10);
	CU_ASSERT_EQUAL(failed, 0);
	CU_ASSERT_EQUAL(missing, 0);
	CU_ASSERT_EQUAL(ws_spills, 0);
	if (kept_serial)
		printf("  %s: %d backward ws programs at head_dim 64 with serialized wgmma (kept: "
		       "measured faster; blockattn_ws.cu, zero_acc)\n", arch, kept_serial);
	/* sm_90a: every ws program collected, nothing else */
	if (t.arch_a)
		CU_ASSERT_EQUAL(c.n, nws);
	free(jobs);
	free(job_prog);
	free(c.progs);
	free(c.required);
	free(c.kernels);
}

/* Block 256 (the forward's key-chunked kernel, the backward's chunked
 * variant): every distinct program of every config check() admits, for
 * one architecture, each with its plan's shared memory (the largest of
 * its launches). */
struct b256_collect {
	struct collect c;
	unsigned smem[1024];
};

static int b256_one(const struct kt_config *cfg, void *arg)
{
	struct b256_collect *b = arg;
	struct kt_plan p;
	struct kt_err e;
	char why[160];
	int idx;

	if (b->c.f->check(b->c.f, b->c.s, cfg, b->c.t, why, sizeof(why)))
		return 0;
	kt_err_clear(&e);
	CU_ASSERT_EQUAL_FATAL(b->c.f->plan(b->c.f, b->c.s, cfg, b->c.t, &p, &e), 0);
	idx = add_program(&b->c, &p, 0);
	CU_ASSERT_FATAL(idx < 1024);
	mark_cover(&b->c, cfg, idx);
	b->smem[idx] = p.launch[p.nlaunch - 1].smem > p.launch[0].smem ? p.launch[p.nlaunch - 1].smem
									 : p.launch[0].smem;
	return 0;
}

/* The block-256 programs (both families) that check() admits compile for
 * arch with the kernels its plans name and no stack frame (no spill: check()
 * refuses the configs that spill); one line per program, its registers and
 * shared memory (docs/families/blockattn.md's table). In CI: each (family,
 * head_dim, rope)'s first and last admitted config, the first with each
 * variant and parameter value, and a fixed-seed sample of the rest;
 * KTUNE_COMPILE_ALL=1: every one. */
static void compile_b256(const char *arch)
{
	static struct b256_collect b;
	int everything = kt_test_env_on("KTUNE_COMPILE_ALL");
	struct kt_target t;
	struct jit_job *jobs;
	int d, rope, i, n = 0, failed = 0, spills = 0, minr = 1 << 30, maxr = 0, nws = 0, ncws = 0;

	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(kt_target_named(arch, &t), 0);
	for (int f = 0; f < 2; f++) {
		memset(b.c.cover_var, 0, sizeof(b.c.cover_var));
		memset(b.c.cover, 0, sizeof(b.c.cover));
		for (d = 64; d <= 128; d += 64)
			for (rope = 0; rope < 3; rope++) {
				struct kt_shape s;
				char text[128];
				int n0 = b.c.n;

				b256_text(d, rope, text, sizeof(text));
				CU_ASSERT_EQUAL_FATAL(parse(fams[f], text, &s), 0);
				b.c.f = fams[f];
				b.c.s = &s;
				b.c.t = &t;
				kt_space_foreach(fams[f], 0, b256_one, &b);
				mark_ends(&b.c, n0);
			}
	}
	CU_ASSERT_FATAL(b.c.n > 0);
	if (!everything)
		sample_optional(&b.c);
	for (i = 0; i < b.c.n; i++)
		nws += strcmp(b.c.progs[i].tpl, "blockattn_ws") == 0;
	jobs = calloc((size_t)b.c.n, sizeof(*jobs));
	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	for (i = 0; i < b.c.n; i++)
		if (everything || b.c.required[i]) {
			jobs[n].prog = &b.c.progs[i];
			jobs[n].arch = arch;
			/* jobs[n]'s shared memory and kernels at n (n <= i) */
			b.smem[n] = b.smem[i];
			memmove(b.c.kernels[n], b.c.kernels[i], sizeof(b.c.kernels[n]));
			n++;
		}
	jit_compile_all(jobs, n, 0);
	for (i = 0; i < n; i++) {
		char what[400];
		size_t w;
		int k, regs, frame;

		w = (size_t)snprintf(what, sizeof(what), "%s", arch);
		for (k = 0; k < jobs[i].prog->ndefines && w < sizeof(what); k++)
			w += (size_t)snprintf(what + w, sizeof(what) - w, " %s", jobs[i].prog->defines[k]);
		if (jobs[i].failed || !jobs[i].res.ok) {
			failed++;
			fprintf(stderr, "\n  %s: %s\n%s\n", what, jobs[i].err_msg,
				jobs[i].res.log ? jobs[i].res.log : "");
			continue;
		}
		for (k = 0; k < 3; k++)
			CU_ASSERT(!b.c.kernels[i][k][0] || cubin_has(&jobs[i].res, b.c.kernels[i][k]));
		kt_test_cubin_usage(jobs[i].res.cubin, jobs[i].res.cubin_len, &regs, &frame);
		CU_ASSERT(regs > 0);
		/* ws (the forward, the backward's dK, dV kernel): no wgmma
		 * serialized by ptxas */
		if (strcmp(jobs[i].prog->tpl, "blockattn_ws") == 0) {
			ncws++;
			CU_ASSERT_FALSE(kt_test_wgmma_serialized(jobs[i].res.log, what));
		}
		printf("\n    %s: %d registers, %u bytes shared, stack frame %d", what, regs,
		       b.smem[i], frame);
		if (frame != 0) {
			spills++;
			fprintf(stderr, "\n  SPILLS %s: %d bytes stack frame\n", what, frame);
		}
		minr = regs < minr ? regs : minr;
		maxr = regs > maxr ? regs : maxr;
		jit_result_release(&jobs[i].res);
	}
	printf("\n  %s: %d of %d block-256 programs compiled%s (%d of %d ws), %d failed, "
	       "%d spill (registers %d-%d)\n", arch, n, b.c.n,
	       everything ? "" : " (KTUNE_COMPILE_ALL=1: all)", ncws, nws, failed, spills, minr,
	       maxr);
	CU_ASSERT(n > 10);
	CU_ASSERT_EQUAL(failed, 0);
	/* the ws programs: sm_90a only, the forward's every (head_dim, rope,
	 * CONS, RING, RPROD) admitted, the backward's (CONS, RING) at every
	 * head_dim and rope */
	if (strcmp(arch, "sm_90a") == 0) {
		CU_ASSERT_EQUAL(nws, ws256_valid(64, 0) + ws256_valid(64, 1) + ws256_valid(64, 2) +
				     ws256_valid(128, 0) + ws256_valid(128, 1) + ws256_valid(128, 2) +
				     2 * 3 * 4);
	} else {
		CU_ASSERT_EQUAL(nws, 0);
	}
	CU_ASSERT_EQUAL(spills, 0);
	free(jobs);
	free(b.c.progs);
	free(b.c.required);
	free(b.c.kernels);
}

static void test_compile_b256(void)
{
	compile_b256("sm_80");
	compile_b256("sm_90a");
}

static void test_compile_sm80(void)
{
	compile_for("sm_80");
}

static void test_compile_sm90(void)
{
	compile_for("sm_90");
}

static void test_compile_sm90a(void)
{
	compile_for("sm_90a");
}

/* ---- GPU (inactive without one) ----
 *
 * The driver by runtime/cu_api.h's loader (dlopen: the program starts without
 * one), templates compiled with tuner/jit. On small ragged shapes every
 * valid config of every (head_dim, block, rope) is checked against the CPU
 * reference and the GPU reference; at the bench shape (ads_d128_L256) every
 * valid config is checked against the GPU reference. With
 * KTUNE_BLOCKATTN_BENCH=FILE the bench-shape configs are also timed (L2
 * flushed between repetitions, CUDA events, median) and the rows written to
 * FILE as JSON; with KTUNE_BLOCKATTN_DUMP=DIR the bench inputs and the best
 * backward's dq are written there for bench/peers_attn.py.
 */
#include <cuda.h>

#include "runtime/cu_api.h"

#define GPU_REPS 25
#define GPU_WARMUP 3

static struct {
	struct cu_api api;
	CUcontext ctx;
	CUstream st;
	struct kt_target tgt;
	char arch[16], name[128], why[512];
	CUdeviceptr flush, acc;
	size_t flush_bytes;
	CUmodule cmp_mod;
	CUfunction cmp_fn;
	CUevent ev[2 * GPU_REPS];
	FILE *bench;		/* KTUNE_BLOCKATTN_BENCH */
	int nrows;
	const char *variant;	/* KTUNE_BLOCKATTN_VARIANT: only its configs; NULL: all */
	int block;		/* KTUNE_BLOCKATTN_BLOCK: the small shapes at this block only; 0: all */
} G;

/* 1 when family f's configs are left out by KTUNE_BLOCKATTN_VARIANT (it
 * has no such variant); prints why. */
static int variant_left_out(const struct kt_family *f, const char *what)
{
	if (!G.variant || kt_variant_index(f, G.variant) >= 0)
		return 0;
	printf("\n    %s %s: left out (no variant %s)", f->name, what, G.variant);
	return 1;
}

static int gpu_fail(CUresult r, const char *what, int line)
{
	char d[256];

	cu_api_describe(&G.api, r, d, sizeof(d));
	fprintf(stderr, "\n  line %d: %s: %s\n", line, what, d);
	snprintf(G.why, sizeof(G.why), "%s: %s", what, d);
	return -1;
}

#define CK(call)                                                   \
	do {                                                       \
		CUresult r_ = (call);                              \
		if (r_ != CUDA_SUCCESS)                            \
			return gpu_fail(r_, #call, __LINE__);      \
	} while (0)

/* Compiles program p for the device; loads it into *m. */
static int gpu_load(const struct kt_program *p, CUmodule *m)
{
	struct jit_result r;
	struct kt_err e;
	int rc = -1;

	kt_err_clear(&e);
	memset(&r, 0, sizeof(r));
	if (jit_compile(p, G.arch, &r, &e) != 0 || !r.ok) {
		fprintf(stderr, "\n  compiling %s failed: %s\n%s\n", p->tpl, e.msg, r.log ? r.log : "");
		goto out;
	}
	if (G.api.ModuleLoadData(m, r.cubin) != CUDA_SUCCESS) {
		fprintf(stderr, "\n  loading %s failed\n", p->tpl);
		goto out;
	}
	rc = 0;
out:
	jit_result_release(&r);
	return rc;
}

/* 0 up, 1 no GPU (G.why says why), -1 a GPU that failed to set up. */
static int gpu_init(void)
{
	struct kt_err e;
	struct kt_program cmp;
	CUdevice dev;
	int n = 0, maj = 0, mnr = 0, v = 0, i;

	kt_err_clear(&e);
	if (cu_api_load(&G.api, &e) != 0) {
		snprintf(G.why, sizeof(G.why), "%s", e.msg);
		return 1;
	}
	if (G.api.Init(0) != CUDA_SUCCESS || G.api.DeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
		snprintf(G.why, sizeof(G.why), "no CUDA device");
		return 1;
	}
	CK(G.api.DeviceGet(&dev, 0));
	CK(G.api.DeviceGetName(G.name, sizeof(G.name), dev));
	CK(G.api.DeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CK(G.api.DeviceGetAttribute(&mnr, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	G.tgt.sm = maj * 10 + mnr;
	CK(G.api.DeviceGetAttribute(&G.tgt.smem_optin,
				    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
	CK(G.api.DeviceGetAttribute(&G.tgt.max_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
				    dev));
	CK(G.api.DeviceGetAttribute(&G.tgt.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	CK(G.api.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
	G.tgt.l2_bytes = v;
	/* as a sweep compiles (tuner/sweep.c): sm_90a on an sm_90 device */
	G.tgt.arch_a = G.tgt.sm == 90;
	kt_target_arch(&G.tgt, G.arch, sizeof(G.arch));
	CK(G.api.DevicePrimaryCtxRetain(&G.ctx, dev));
	CK(G.api.CtxSetCurrent(G.ctx));
	CK(G.api.StreamCreate(&G.st, 0));
	/* several times any L2 */
	G.flush_bytes = 256u << 20;
	CK(G.api.MemAlloc(&G.flush, G.flush_bytes));
	CK(G.api.MemAlloc(&G.acc, 3 * sizeof(double)));
	for (i = 0; i < 2 * GPU_REPS; i++)
		CK(G.api.EventCreate(&G.ev[i], CU_EVENT_DEFAULT));
	memset(&cmp, 0, sizeof(cmp));
	cmp.tpl = "blockattn_ref";
	if (gpu_load(&cmp, &G.cmp_mod) != 0)
		return -1;
	CK(G.api.ModuleGetFunction(&G.cmp_fn, G.cmp_mod, "ref_blockattn_cmp"));
	printf("GPU: %s (%s, %d SMs)\n", G.name, G.arch, G.tgt.sms);
	return 0;
}

/* One problem on the device: buffers (with the scratch block list), the
 * GPU reference's outputs beside the candidate's, and, for small shapes,
 * the CPU reference. */
struct dprob {
	const struct kt_family *f;
	struct kt_shape s;
	char key[128];
	int nb, nin, nout, first_out;
	struct kt_buf b[KT_MAX_BUFS];
	void *host[KT_MAX_BUFS];
	CUdeviceptr d[KT_MAX_BUFS], ref[3];
	float *cpu[3];
};

static void dprob_release(struct dprob *dp)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++) {
		free(dp->host[i]);
		if (dp->d[i])
			G.api.MemFree(dp->d[i]);
	}
	for (i = 0; i < 3; i++) {
		if (dp->ref[i])
			G.api.MemFree(dp->ref[i]);
		free(dp->cpu[i]);
	}
	memset(dp, 0, sizeof(*dp));
}

static size_t buf_bytes(const struct kt_buf *b)
{
	size_t n = b->elems * kt_dtype_size(b->dtype);

	return n < 16 ? 16 : n;
}

/* Runs launches [first, first + count) of prep-then-timed with buffer
 * pointers ptrs. */
static int gpu_run(const struct kt_plan *p, const CUmodule *mods, const CUdeviceptr *ptrs,
		   int first, int count)
{
	int i, a;

	for (i = first; i < first + count; i++) {
		const struct kt_launch *l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];
		union {
			CUdeviceptr p;
			int i;
			long long l;
			float f;
		} val[KT_MAX_ARGS];
		void *args[KT_MAX_ARGS];
		CUfunction fn;

		CK(G.api.ModuleGetFunction(&fn, mods[l->program], l->kernel));
		if (l->smem > 48 * 1024)
			CK(G.api.FuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						  (int)l->smem));
		for (a = 0; a < l->nargs; a++) {
			switch (l->args[a].kind) {
			case KT_ARG_BUF:
				val[a].p = ptrs[l->args[a].buf];
				break;
			case KT_ARG_I32:
				val[a].i = (int)l->args[a].i;
				break;
			case KT_ARG_I64:
				val[a].l = l->args[a].i;
				break;
			case KT_ARG_F32:
				val[a].f = l->args[a].f;
				break;
			case KT_ARG_TMAP:	/* the worker builds those; no blockattn plan has one */
				fprintf(stderr, "\n  %s: a tensor-map argument, not supported here\n",
					l->kernel);
				return -1;
			}
			args[a] = &val[a];
		}
		CK(G.api.LaunchKernel(fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
				      l->block[2], l->smem, G.st, args, NULL));
	}
	return 0;
}

static int dprob_open(struct dprob *dp, const struct kt_family *f, const char *text, uint64_t seed,
		      int with_cpu)
{
	struct kt_config cfg;
	struct kt_plan rp;
	struct kt_err e;
	CUdeviceptr ptrs[KT_MAX_BUFS];
	CUmodule mod = NULL;
	int i, o;

	memset(dp, 0, sizeof(*dp));
	dp->f = f;
	if (parse(f, text, &dp->s) != 0 || f->default_config(f, &dp->s, &G.tgt, &cfg) != 0)
		return -1;
	kt_shape_key(f, &dp->s, dp->key, sizeof(dp->key));
	dp->nb = f->buffers(f, &dp->s, &cfg, dp->b);
	dp->first_out = -1;
	for (i = 0; i < dp->nb; i++) {
		CK(G.api.MemAlloc(&dp->d[i], buf_bytes(&dp->b[i])));
		if (dp->b[i].role == KT_BUF_INPUT) {
			dp->nin++;
			if (!(dp->host[i] = calloc(1, buf_bytes(&dp->b[i]))) ||
			    f->fill(f, &dp->s, i, dp->host[i], seed + (uint64_t)i) != 0)
				return -1;
			CK(G.api.MemcpyHtoD(dp->d[i], dp->host[i], buf_bytes(&dp->b[i])));
		} else if (dp->b[i].role == KT_BUF_OUTPUT) {
			if (dp->first_out < 0)
				dp->first_out = i;
			dp->nout++;
		}
	}
	/* the GPU reference writes into ref[] */
	memcpy(ptrs, dp->d, sizeof(ptrs));
	for (o = 0; o < dp->nout; o++) {
		CK(G.api.MemAlloc(&dp->ref[o], buf_bytes(&dp->b[dp->first_out + o])));
		ptrs[dp->first_out + o] = dp->ref[o];
	}
	kt_err_clear(&e);
	if (f->ref_plan(f, &dp->s, &G.tgt, &rp, &e) != 0 || gpu_load(&rp.programs[0], &mod) != 0)
		return -1;
	if (gpu_run(&rp, &mod, ptrs, 0, rp.nprep + rp.nlaunch) != 0)
		return -1;
	CK(G.api.StreamSynchronize(G.st));
	CK(G.api.ModuleUnload(mod));
	if (with_cpu) {
		for (o = 0; o < dp->nout; o++)
			if (!(dp->cpu[o] = calloc(dp->b[dp->first_out + o].elems, sizeof(float))))
				return -1;
		kt_err_clear(&e);
		if (f->cpu_ref(f, &dp->s, (const void *const *)dp->host, dp->cpu, &e) != 0)
			return -1;
	}
	return 0;
}

/* Relative L2 error of device bf16 got against device bf16 ref (n
 * elements); *nonfinite counts NaN/Inf in got. */
static int gpu_relerr(CUdeviceptr got, CUdeviceptr ref, size_t n, double *rel, int *nonfinite)
{
	double acc[3];
	long long nn = (long long)n;
	void *args[4] = {&got, &ref, &nn, &G.acc};

	CK(G.api.MemsetD8Async(G.acc, 0, sizeof(acc), G.st));
	CK(G.api.LaunchKernel(G.cmp_fn, 1024, 1, 1, 256, 1, 1, 0, G.st, args, NULL));
	CK(G.api.StreamSynchronize(G.st));
	CK(G.api.MemcpyDtoH(acc, G.acc, sizeof(acc)));
	*rel = acc[1] > 0 ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);
	*nonfinite = (int)acc[2];
	return 0;
}

/* Relative L2 error of device bf16 got against a host float reference. */
static int cpu_relerr(CUdeviceptr got, const float *ref, size_t n, double *rel)
{
	uint16_t *h = malloc(n * sizeof(*h));
	double dd = 0, rr = 0;
	size_t i;

	if (!h)
		return -1;
	if (G.api.MemcpyDtoH(h, got, n * sizeof(*h)) != CUDA_SUCCESS) {
		free(h);
		return -1;
	}
	for (i = 0; i < n; i++) {
		double g = kt_bf16_to_f32(h[i]), r = ref[i];

		dd += isfinite(g) ? (g - r) * (g - r) : INFINITY;
		rr += r * r;
	}
	free(h);
	*rel = rr > 0 ? sqrt(dd / rr) : sqrt(dd);
	return 0;
}

struct cand {
	struct kt_config c;
	struct kt_plan p;
	char key[160];
	struct jit_job job;
	/* results */
	int ran, ok;
	double rel, cpu_rel, us;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Verifies one candidate (poisoned outputs, one run, every output against
 * the GPU reference and, when present, the CPU reference) and times it
 * when asked. */
static int gpu_eval(struct dprob *dp, struct cand *k, int timed)
{
	CUmodule mod = NULL;
	double t[GPU_REPS];
	int o, r, nonfinite = 0, rc = -1;

	k->ran = 1;
	if (!k->job.res.ok || G.api.ModuleLoadData(&mod, k->job.res.cubin) != CUDA_SUCCESS)
		return -1;
	if (gpu_run(&k->p, &mod, dp->d, 0, k->p.nprep) != 0)
		goto out;
	for (o = 0; o < dp->nout; o++)
		if (G.api.MemsetD8Async(dp->d[dp->first_out + o], 0xff,
					buf_bytes(&dp->b[dp->first_out + o]), G.st) != CUDA_SUCCESS)
			goto out;
	if (gpu_run(&k->p, &mod, dp->d, k->p.nprep, k->p.nlaunch) != 0 ||
	    G.api.StreamSynchronize(G.st) != CUDA_SUCCESS)
		goto out;
	k->rel = k->cpu_rel = 0;
	for (o = 0; o < dp->nout; o++) {
		double rel;
		int nf = 0;

		if (gpu_relerr(dp->d[dp->first_out + o], dp->ref[o], dp->b[dp->first_out + o].elems,
			       &rel, &nf) != 0)
			goto out;
		k->rel = rel > k->rel ? rel : k->rel;
		nonfinite += nf;
		if (dp->cpu[o]) {
			if (cpu_relerr(dp->d[dp->first_out + o], dp->cpu[o],
				       dp->b[dp->first_out + o].elems, &rel) != 0)
				goto out;
			k->cpu_rel = rel > k->cpu_rel ? rel : k->cpu_rel;
		}
	}
	k->ok = nonfinite == 0 && k->rel <= dp->f->tol && k->cpu_rel <= dp->f->tol;
	if (timed && k->ok) {
		for (r = 0; r < GPU_WARMUP; r++)
			if (gpu_run(&k->p, &mod, dp->d, k->p.nprep, k->p.nlaunch) != 0)
				goto out;
		for (r = 0; r < GPU_REPS; r++) {
			/* a different byte each time: the flush really writes */
			if (G.api.MemsetD8Async(G.flush, (unsigned char)r, G.flush_bytes, G.st) ||
			    G.api.EventRecord(G.ev[2 * r], G.st) ||
			    gpu_run(&k->p, &mod, dp->d, k->p.nprep, k->p.nlaunch) != 0 ||
			    G.api.EventRecord(G.ev[2 * r + 1], G.st))
				goto out;
		}
		if (G.api.StreamSynchronize(G.st) != CUDA_SUCCESS)
			goto out;
		for (r = 0; r < GPU_REPS; r++) {
			float ms = 0;

			if (G.api.EventElapsedTime(&ms, G.ev[2 * r], G.ev[2 * r + 1]) != CUDA_SUCCESS)
				goto out;
			t[r] = ms * 1e3;
		}
		qsort(t, GPU_REPS, sizeof(double), cmp_double);
		k->us = t[GPU_REPS / 2];
	}
	rc = 0;
out:
	if (mod)
		G.api.ModuleUnload(mod);
	return rc;
}

struct cands {
	const struct dprob *dp;
	struct cand *v;
	int n, cap;
	int few;	/* also plan persistent grids for FEW_SMS SMs */
};

/* The small shapes have about as many work units as the GPU has SMs; a
 * persistent plan (the ws backward at block 256) on a target of FEW_SMS
 * SMs makes every CTA walk many units (both pass sets, the ring across
 * units): the same program, another grid. */
#define FEW_SMS 3	/* the candidates' key suffix says " on 3 SMs" */

/* c planned for t as the next candidate (key suffixed with sfx) */
static int cands_push(struct cands *cs, const struct kt_config *c, const struct kt_target *t,
		      const char *sfx)
{
	struct kt_err e;
	struct cand *k;

	if (cs->n == cs->cap) {
		struct cand *nv = realloc(cs->v, (size_t)(cs->cap * 2 + 16) * sizeof(*nv));

		if (!nv)
			return -1;
		cs->v = nv;
		cs->cap = cs->cap * 2 + 16;
	}
	k = &cs->v[cs->n];
	memset(k, 0, sizeof(*k));
	k->c = *c;
	kt_err_clear(&e);
	if (cs->dp->f->plan(cs->dp->f, &cs->dp->s, c, t, &k->p, &e) != 0)
		return 0;
	kt_config_key(cs->dp->f, c, k->key, sizeof(k->key) - 16);
	strcat(k->key, sfx);
	cs->n++;
	return 0;
}

static int cands_add(const struct kt_config *c, void *arg)
{
	struct cands *cs = arg;
	struct kt_target few = G.tgt;
	char why[160];
	int n = cs->n;

	if (G.variant && strcmp(cs->dp->f->variants[c->variant], G.variant) != 0)
		return 0;
	if (cs->dp->f->check(cs->dp->f, &cs->dp->s, c, &G.tgt, why, sizeof(why)))
		return 0;
	if (cands_push(cs, c, &G.tgt, "") != 0)
		return -1;
	few.sms = FEW_SMS;
	/* the persistent ws backward at block 256 on FEW_SMS SMs too */
	if (cs->few && cs->n > n && G.tgt.sms > FEW_SMS && cs->dp->f == fams[1] &&
	    cs->dp->s.v[BA_D_BLOCK] == 256 && strcmp(cs->v[n].p.programs[0].tpl, "blockattn_ws") == 0)
		return cands_push(cs, c, &few, " on 3 SMs");
	return 0;
}

/* Every valid config of dp (of KTUNE_BLOCKATTN_VARIANT's variant when set;
 * with few, the persistent ones on FEW_SMS SMs too): compiled together,
 * then each verified (and timed). Returns the number
 * of failures, -1 when none could be listed (with the variant filter
 * none is not a failure: ws has no config at block 128), and the
 * candidates (caller frees) in *cs. */
static int gpu_sweep(struct dprob *dp, int timed, int few, struct cands *cs)
{
	struct jit_job *jobs;
	int *job_of, i, j, njobs = 0, bad = 0;

	memset(cs, 0, sizeof(*cs));
	cs->dp = dp;
	cs->few = few;
	if (kt_space_foreach(dp->f, 0, cands_add, cs) != 0)
		return -1;
	if (cs->n == 0)
		return G.variant ? 0 : -1;
	if (!(jobs = calloc((size_t)cs->n, sizeof(*jobs))) ||
	    !(job_of = calloc((size_t)cs->n, sizeof(*job_of)))) {
		free(jobs);
		return -1;
	}
	/* one compile per distinct program (ITEMS, CTAS_SM are launch-time) */
	for (i = 0; i < cs->n; i++) {
		for (j = 0; j < njobs; j++)
			if (kt_program_same(jobs[j].prog, &cs->v[i].p.programs[0]))
				break;
		job_of[i] = j;
		if (j == njobs) {
			/* the programs live in cs->v[i].p, which no longer moves */
			jobs[njobs].prog = &cs->v[i].p.programs[0];
			jobs[njobs++].arch = G.arch;
		}
	}
	jit_compile_all(jobs, njobs, 0);
	for (i = 0; i < cs->n; i++) {
		struct cand *k = &cs->v[i];

		k->job = jobs[job_of[i]];
		if (gpu_eval(dp, k, timed) != 0 || !k->ok) {
			bad++;
			fprintf(stderr, "\n  %s %s %s: %s rel %.3g cpu_rel %.3g\n", dp->f->name, dp->key,
				k->key, k->job.res.ok ? "wrong" : "compile/launch failed", k->rel,
				k->cpu_rel);
			if (k->job.res.log && !k->job.res.ok)
				fprintf(stderr, "%s\n", k->job.res.log);
		}
	}
	for (j = 0; j < njobs; j++)
		jit_result_release(&jobs[j].res);
	free(jobs);
	free(job_of);
	return bad;
}

static void test_gpu_small(void)
{
	int f, d, bi, rope, total[2] = {0, 0};

	if (G.variant)
		CU_ASSERT(kt_variant_index(fams[0], G.variant) >= 0 ||
			  kt_variant_index(fams[1], G.variant) >= 0);
	for (f = 0; f < 2; f++) {
		if (variant_left_out(fams[f], "small shapes"))
			continue;
		for (d = 64; d <= 128; d += 64)
			for (bi = 0; bi <= NBLKS; bi++)	/* NBLKS: block 256 */
				for (rope = 0; rope < 3; rope++) {
					const int blk = bi < NBLKS ? BLKS[bi] : 256;
					struct dprob dp;
					struct cands cs;
					char text[128];
					double worst = 0, worst_cpu = 0;
					int i, bad;

					if (G.block && blk != G.block)
						continue;
					/* lengths in [40, 100]: shorter than a block of 128,
					 * one or two of 64, two to four of 32, ragged tails;
					 * 29 sequences, 3 heads; block 256: lengths in [240,
					 * 600], one to three blocks, ragged tails over every
					 * chunk and every row pass */
					if (blk == 256)
						snprintf(text, sizeof(text),
							 "seqs=11,lmax=600,heads=2,head_dim=%d,block=256,rope=%d",
							 d, rope);
					else
						snprintf(text, sizeof(text),
							 "seqs=29,lmax=100,heads=3,head_dim=%d,block=%d,rope=%d",
							 d, blk, rope);
					CU_ASSERT_EQUAL_FATAL(dprob_open(&dp, fams[f], text, 17, 1), 0);
					/* the GPU reference against the CPU one */
					for (i = 0; i < dp.nout; i++) {
						double rel;

						CU_ASSERT_EQUAL_FATAL(cpu_relerr(dp.ref[i], dp.cpu[i],
								dp.b[dp.first_out + i].elems, &rel), 0);
						CU_ASSERT(rel < 5e-3);
						if (!(rel < 5e-3))
							fprintf(stderr, "\n  %s %s: GPU ref vs CPU ref %.3g\n",
								fams[f]->name, dp.key, rel);
					}
					bad = gpu_sweep(&dp, 0, 1, &cs);
					CU_ASSERT_EQUAL(bad, 0);
					for (i = 0; i < cs.n; i++) {
						worst = cs.v[i].rel > worst ? cs.v[i].rel : worst;
						worst_cpu = cs.v[i].cpu_rel > worst_cpu ? cs.v[i].cpu_rel
											: worst_cpu;
					}
					printf("\n    %s %s: %d configs%s%s, worst rel %.2e (GPU ref) %.2e (CPU ref)",
					       fams[f]->name, dp.key, cs.n, G.variant ? " of " : "",
					       G.variant ? G.variant : "", worst, worst_cpu);
					total[f] += cs.n;
					free(cs.v);
					dprob_release(&dp);
				}
		/* the filters left something to run (the backward at block 256
		 * alone: chunked and ws, so a filter on another variant leaves
		 * it nothing) */
		CU_ASSERT(total[f] > 0 || (f == 1 && G.block == 256 && G.variant &&
					   strcmp(G.variant, "chunked") != 0 &&
					   strcmp(G.variant, "ws") != 0));
	}
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[1024];
	FILE *fp;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(fp = fopen(path, "wb")))
		return -1;
	rc = fwrite(p, 1, n, fp) == n ? 0 : -1;
	return fclose(fp) == 0 ? rc : -1;
}

/* "variant=grid,ROWS_W=16" -> {"variant": "grid", "ROWS_W": 16} */
static void config_json(const char *key, char *out, size_t len)
{
	size_t n = 0;
	const char *p = key;

	n += (size_t)snprintf(out, len, "{");
	while (*p && n + 16 < len) {
		const char *eq = strchr(p, '='), *end;
		int num;

		if (!eq)
			break;
		end = strchr(eq, ',');
		if (!end)
			end = eq + strlen(eq);
		num = eq[1] >= '0' && eq[1] <= '9';
		n += (size_t)snprintf(out + n, len - n, "%s\"%.*s\": %s%.*s%s", p == key ? "" : ", ",
				      (int)(eq - p), p, num ? "" : "\"", (int)(end - eq - 1), eq + 1,
				      num ? "" : "\"");
		p = *end ? end + 1 : end;
	}
	if (n + 2 < len)
		snprintf(out + n, len - n, "}");
}

static void bench_row(const struct dprob *dp, const char *workload, const struct cand *k,
		      const char *impl)
{
	char cfg[512], floor[32];
	double floor_us;

	if (!G.bench)
		return;
	floor_us = kt_floor_us(dp->f, &dp->s, G.name);
	config_json(k->key, cfg, sizeof(cfg));
	/* null: the card's peaks were never measured (kt_peaks_of) */
	if (floor_us > 0)
		snprintf(floor, sizeof(floor), "%.1f", floor_us);
	else
		snprintf(floor, sizeof(floor), "null");
	fprintf(G.bench,
		"%s{\"workload\": \"%s\", \"impl\": \"%s\", \"us\": %.2f, \"floor_us\": %s, "
		"\"verified\": %s, \"rel_err\": %.3e, \"template\": \"%s.cu\", \"shape\": \"%s\", "
		"\"config\": %s}",
		G.nrows++ ? ",\n" : "", workload, impl, k->us, floor,
		k->ok ? "true" : "false", k->rel, dp->f->name, dp->key, cfg);
}

/* Writes the problem's inputs (q k v do offsets) and candidate k's dq, dk,
 * dv to dir for bench/peers_attn.py, k's config key to dir/dq_config.txt and
 * the problem's shape key to dir/shape.txt (the offsets do not tell the
 * block: peers_attn.py checks it against its --block).
 * rerun: run k first (its outputs were overwritten since it was verified). */
static int dump_write(struct dprob *dp, const struct cand *k, const char *dir, int rerun)
{
	static const char *const names[] = {"q.bf16", "k.bf16", "v.bf16", "do.bf16", "offsets.i32"};
	size_t n = dp->b[dp->first_out].elems;
	uint16_t *h = malloc(n * sizeof(*h));
	CUmodule mod = NULL;
	int i, rc = -1;

	if (!h)
		return -1;
	for (i = 0; i < 5; i++)
		if (write_file(dir, names[i], dp->host[i], buf_bytes(&dp->b[i])) != 0) {
			fprintf(stderr, "\n  cannot write %s/%s\n", dir, names[i]);
			goto out;
		}
	if (rerun && (gpu_load(&k->p.programs[0], &mod) != 0 ||
		      gpu_run(&k->p, &mod, dp->d, 0, k->p.nprep + k->p.nlaunch) != 0))
		goto out;
	if (G.api.StreamSynchronize(G.st) != CUDA_SUCCESS)
		goto out;
	for (i = 0; i < 3; i++) {
		static const char *const outs[] = {"dq_ktune.bf16", "dk_ktune.bf16", "dv_ktune.bf16"};

		if (G.api.MemcpyDtoH(h, dp->d[dp->first_out + i], n * sizeof(*h)) != CUDA_SUCCESS)
			goto out;
		if (write_file(dir, outs[i], h, n * sizeof(*h)) != 0) {
			fprintf(stderr, "\n  cannot write %s/%s\n", dir, outs[i]);
			goto out;
		}
	}
	if (write_file(dir, "dq_config.txt", k->key, strlen(k->key)) != 0) {
		fprintf(stderr, "\n  cannot write %s/dq_config.txt\n", dir);
		goto out;
	}
	if (write_file(dir, "shape.txt", dp->key, strlen(dp->key)) != 0) {
		fprintf(stderr, "\n  cannot write %s/shape.txt\n", dir);
		goto out;
	}
	rc = 0;
out:
	if (mod)
		G.api.ModuleUnload(mod);
	free(h);
	return rc;
}

static void test_gpu_bench_shape(void)
{
	const char *dump = getenv("KTUNE_BLOCKATTN_DUMP");
	/* KTUNE_BLOCKATTN_BENCH_ONLY=S: only the workloads whose name holds S
	 * (e.g. "bwd": the plain and rope backward), for a short timed call */
	const char *only = getenv("KTUNE_BLOCKATTN_BENCH_ONLY");
	int f, rope;

	/* the backward first (the rope / plain ratio is the bar nearest to
	 * the line), then the forward */
	for (f = 1; f >= 0; f--)
		for (rope = 0; rope < 2; rope++) {
			struct dprob dp;
			struct cands cs;
			char text[128], wl[96];
			int i, best = -1, bad;

			snprintf(text, sizeof(text),
				 "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=%d", rope);
			snprintf(wl, sizeof(wl), "%s%s:ads_d128_L256", fams[f]->name, rope ? "_rope" : "");
			if (only && *only && !strstr(wl, only)) {
				printf("\n    %s: left out (KTUNE_BLOCKATTN_BENCH_ONLY=%s)", wl, only);
				continue;
			}
			if (variant_left_out(fams[f], wl))
				continue;
			CU_ASSERT_EQUAL_FATAL(dprob_open(&dp, fams[f], text, 5, 0), 0);
			bad = gpu_sweep(&dp, G.bench != NULL, 0, &cs);
			CU_ASSERT_EQUAL(bad, 0);
			CU_ASSERT(cs.n > 0);	/* block 64: every variant has configs */
			for (i = 0; i < cs.n; i++) {
				struct cand *k = &cs.v[i];

				if (G.bench && k->ok) {
					printf("\n    %-26s %-64s %8.1f us  rel %.2e", wl, k->key, k->us, k->rel);
					if (best < 0 || k->us < cs.v[best].us)
						best = i;
				}
			}
			if (best >= 0) {
				struct cand *k = &cs.v[best];

				printf("\n  BEST %s: %s %.1f us (floor %.1f us, %.0f GB/s), rel %.2e", wl,
				       k->key, k->us, kt_floor_us(dp.f, &dp.s, G.name),
				       dp.f->min_bytes(dp.f, &dp.s) / (k->us * 1e3), k->rel);
				bench_row(&dp, wl, k, "ktune");
			}
			/* the inputs and the best plain backward's dq for peers_attn.py */
			if (dump && f == 1 && rope == 0 && best >= 0)
				CU_ASSERT_EQUAL(dump_write(&dp, &cs.v[best], dump, 1), 0);
			free(cs.v);
			dprob_release(&dp);
		}
}

/* The dump mode's one test: the config of KTUNE_BLOCKATTN_DUMP_CONFIG at
 * the bench shape at block KTUNE_BLOCKATTN_DUMP_BLOCK, verified against the
 * GPU reference with the sweep's tolerance, its inputs and dq written to
 * KTUNE_BLOCKATTN_DUMP. */
static int dump_gpu;	/* gpu_init()'s answer */

static void test_gpu_dump(void)
{
	const char *dir = getenv("KTUNE_BLOCKATTN_DUMP");
	const char *key = getenv("KTUNE_BLOCKATTN_DUMP_CONFIG");
	struct kt_target t;
	struct dprob dp;
	struct cand k;
	char why[1024], shape[128];

	memset(&k, 0, sizeof(k));
	/* without a GPU the key is still checked, for sm_90a (where every
	 * variant plans) */
	if (dump_gpu == 0)
		t = G.tgt;
	else
		CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t), 0);
	if (dump_shape(getenv("KTUNE_BLOCKATTN_DUMP_BLOCK"), shape, sizeof(shape), why,
		       sizeof(why)) != 0) {
		fprintf(stderr, "\n  dump mode: %s\n", why);
		CU_FAIL("KTUNE_BLOCKATTN_DUMP_BLOCK is no dump block (reason above)");
		return;
	}
	if (dump_config(shape, key, &t, &k.c, &k.p, why, sizeof(why)) != 0) {
		fprintf(stderr, "\n  KTUNE_BLOCKATTN_DUMP_CONFIG: %s\n", why);
		CU_FAIL("KTUNE_BLOCKATTN_DUMP_CONFIG does not plan (reason above)");
		return;
	}
	if (dump_gpu != 0) {
		if (kt_test_gpu_required() || dump_gpu < 0) {
			fprintf(stderr, "\n  no GPU: %s\n", G.why);
			CU_FAIL("dump mode: no usable GPU");
		} else {
			printf("\n  dump skipped (the key plans for sm_90a): %s\n", G.why);
		}
		return;
	}
	kt_config_key(fams[1], &k.c, k.key, sizeof(k.key));
	CU_ASSERT_EQUAL_FATAL(dprob_open(&dp, fams[1], shape, 5, 0), 0);
	k.job.prog = &k.p.programs[0];
	k.job.arch = G.arch;
	jit_compile_all(&k.job, 1, 0);
	if (!k.job.res.ok)
		fprintf(stderr, "\n  compiling %s failed: %s\n%s\n", k.key, k.job.err_msg,
			k.job.res.log ? k.job.res.log : "");
	CU_ASSERT_EQUAL(gpu_eval(&dp, &k, 0), 0);
	CU_ASSERT(k.ok);
	if (!k.ok)
		fprintf(stderr, "\n  %s at %s: wrong, rel %.3g (tolerance %.3g)\n", k.key, dp.key,
			k.rel, fams[1]->tol);
	if (k.ok) {
		CU_ASSERT_EQUAL(dump_write(&dp, &k, dir, 0), 0);
		printf("\n  dumped dq of %s: rel_err %.3e\n", k.key, k.rel);
	}
	jit_result_release(&k.job.res);
	dprob_release(&dp);
}

static void test_gpu_missing(void)
{
	CU_FAIL("KTUNE_REQUIRE_GPU=1 but no GPU was found");
	fprintf(stderr, "  no GPU: %s\n", G.why);
}

static int gpu_suite_clean(void)
{
	if (G.bench) {
		fprintf(G.bench, "\n]\n");
		fclose(G.bench);
		G.bench = NULL;
	}
	return 0;
}

static void add_gpu_suite(void)
{
	const char *bench = getenv("KTUNE_BLOCKATTN_BENCH");
	const char *variant = getenv("KTUNE_BLOCKATTN_VARIANT");
	const char *block = getenv("KTUNE_BLOCKATTN_BLOCK");
	CU_pSuite s = CU_add_suite("blockattn_gpu", NULL, gpu_suite_clean);
	int gpu = gpu_init();

	G.variant = variant && *variant ? variant : NULL;
	G.block = block && *block ? atoi(block) : 0;
	if (gpu == 0) {
		if (G.variant)
			printf("KTUNE_BLOCKATTN_VARIANT=%s: the GPU suite runs its configs only\n",
			       G.variant);
		if (bench && *bench && (G.bench = fopen(bench, "w")))
			fprintf(G.bench, "[\n");
		CU_add_test(s, "every config vs CPU and GPU refs, small ragged shapes", test_gpu_small);
		/* KTUNE_BLOCKATTN_SMALL_ONLY=1: the small shapes alone (for
		 * compute-sanitizer, which slows kernels a hundredfold) */
		if (!getenv("KTUNE_BLOCKATTN_SMALL_ONLY"))
			CU_add_test(s, "every config vs GPU ref, ads_d128_L256", test_gpu_bench_shape);
	} else if (kt_test_gpu_required() || gpu < 0) {
		fprintf(stderr, "GPU not usable: %s\n", G.why);
		CU_add_test(s, "a GPU is present", test_gpu_missing);
	} else {
		printf("GPU suite skipped: %s\n", G.why);
		CU_add_test(s, "every config vs CPU and GPU refs, small ragged shapes", test_gpu_small);
		CU_set_suite_active(s, CU_FALSE);
	}
}

/* KTUNE_BLOCKATTN_DUMP=DIR with KTUNE_BLOCKATTN_DUMP_CONFIG=KEY: the one
 * dump test alone (for the bench's final run). */
static int dump_mode(void)
{
	const char *dir = getenv("KTUNE_BLOCKATTN_DUMP"), *key = getenv("KTUNE_BLOCKATTN_DUMP_CONFIG");
	const char *blk = getenv("KTUNE_BLOCKATTN_DUMP_BLOCK");
	char name[96];
	CU_pSuite s;

	if (!dir || !*dir || !key)
		return 0;
	s = CU_add_suite("blockattn_dump", NULL, NULL);
	dump_gpu = gpu_init();
	/* the workload's name (a bad block is refused by the test) */
	snprintf(name, sizeof(name), "dump dq of KTUNE_BLOCKATTN_DUMP_CONFIG, ads_d128_L256%s",
		 blk && strcmp(blk, "128") == 0 ? "_b128" : "");
	CU_add_test(s, name, test_gpu_dump);
	return 1;
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	if (dump_mode())
		return kt_test_main();
	s = CU_add_suite("blockattn_cpu", NULL, NULL);
	CU_add_test(s, "lengths generator (SplitMix64 seeded 0)", test_lengths);
	CU_add_test(s, "rope table", test_rope_table);
	CU_add_test(s, "fwd CPU ref vs naive per-token", test_fwd_vs_naive);
	CU_add_test(s, "fwd softmax is not degenerate", test_fwd_not_degenerate);
	CU_add_test(s, "bwd CPU ref vs finite differences", test_bwd_fd);
	CU_add_test(s, "bwd rope CPU ref vs finite differences", test_bwd_rope_fd);
	CU_add_test(s, "bwd rope = conj(plain bwd of rotated)", test_bwd_rope_is_conj_of_plain);
	CU_add_test(s, "rope=2: v rotated changes o, dq, dk, dv", test_rope_v_differs);
	s = CU_add_suite("blockattn_family", NULL, NULL);
	CU_add_test(s, "shape parse", test_shape_parse);
	CU_add_test(s, "check rejects", test_check_rejects);
	CU_add_test(s, "RPF 2 and prefetch: checks and plans", test_rtab_prefetch);
	CU_add_test(s, "ws: variant lists and parameters", test_ws_params);
	CU_add_test(s, "ws: plans and config keys", test_ws_plans);
	CU_add_test(s, "ws: refusals and their reasons", test_ws_refusals);
	CU_add_test(s, "dump mode: the config key's parsing and refusal", test_dump_config);
	CU_add_test(s, "buffers and fill", test_buffers_and_fill);
	CU_add_test(s, "family cpu_ref", test_family_cpu_ref);
	CU_add_test(s, "valid configs per variant, valid defaults (ws at block 128 on sm_90a)", test_space);
	CU_add_test(s, "block 256: forward configs and plans, the backward's chunked variant",
		    test_block256);
	CU_add_test(s, "flops and bytes", test_models);
	s = CU_add_suite("blockattn_nvrtc", NULL, NULL);
	CU_add_test(s, "compile sm_80", test_compile_sm80);
	CU_add_test(s, "compile sm_90", test_compile_sm90);
	CU_add_test(s, "compile sm_90a (ws programs)", test_compile_sm90a);
	/* KTUNE_BLOCKATTN_GPU_ONLY=1 (a timed GPU call): CI compiles these */
	if (kt_test_env_on("KTUNE_BLOCKATTN_GPU_ONLY"))
		CU_set_suite_active(s, CU_FALSE);
	/* its own suite (KTUNE_TEST_SUITE=nvrtc_b256 runs it alone) */
	s = CU_add_suite("blockattn_nvrtc_b256", NULL, NULL);
	CU_add_test(s, "compile block 256 (sm_80 and sm_90a, no spill)",
		    test_compile_b256);
	if (kt_test_env_on("KTUNE_BLOCKATTN_GPU_ONLY"))
		CU_set_suite_active(s, CU_FALSE);
	add_gpu_suite();
	return kt_test_main();
}
