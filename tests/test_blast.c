/*
 * test_blast.c -- the `blast` family on the CPU (no GPU needed).
 *
 *  - the CPU reference equals multiplication by the dense matrix W
 *    materialized in double from U, S, V (block (i, j) = U_i diag(s_ij)
 *    V_j), within 1e-6 relative; a W built with S's block indices swapped
 *    must not match (the control);
 *  - a BLAST with one block equals the low-rank layer with U' = U diag(s)
 *    (lowrank's own cpu_ref; s powers of two so that U' is exact in bf16);
 *  - each variant's plan: its launches, the MMA path of its GEMM
 *    programs, its prep, where z lives; the space's size and how much of
 *    it each variant keeps valid, the PDL and persistent rules of its
 *    plans; emulated plans (plan_emu.h) under tcmix_ws's L2 discards, the
 *    mixer's grids and walks, fused_cl's grids, each with a control that
 *    must fail; shape parsing, check() rejections, the measured defaults,
 *    flops and bytes. What every family promises (spaces, keys, every
 *    plan against cpu_ref, defaults valid) is test_conformance's;
 *  - NVRTC compiles each variant's extremes and a fixed-seed sample for
 *    sm_80, sm_86 and sm_90 (wgmma and ws variants for sm_90a), the mixer for
 *    every register-cache width and the reference template;
 *    KTUNE_COMPILE_ALL=1: every valid config of the suite's shapes;
 *  - GPU (inactive without one; a failure without one when
 *    KTUNE_REQUIRE_GPU=1): through the worker, as a sweep runs them, the
 *    first, a middle and the last valid config of every variant on small
 *    and suite shapes must verify against the GPU reference.
 *    KTUNE_BLAST_GPU_ONLY=1 runs the GPU suite alone.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "kernels/gemm_plan.h"
#include "famtest.h"
#include "plan_emu.h"
#include "testutil.h"
#include "tuner/jit.h"
#include "tuner/worker.h"
#include "tuner/worker_int.h"	/* measure_plan_check: what the worker accepts */

static const struct kt_family *fam;

/* buffer order of kernels/blast.c (the contract: problem buffers first) */
enum { X, U, V, S, Y, Z32, W32, NPROBLEM = 7 };

/* the workloads of tuner/suite.c (llama7b q/k/v/o at N 1024 and 16384,
 * llama1b q/o) */
static const char *const suite_shapes[] = {
	"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	"tokens=16384,in=4096,out=4096,blocks=16,rank=1024",
	"tokens=1024,in=2048,out=2048,blocks=16,rank=256",
};

/* small shapes the emulator runs: b, r, nb and mb all differ so a swapped
 * index shows; rank is not a multiple of blocks in two; b = 20, 40, 72
 * take the mixer's 4-, 2- and 1-rank paths (72: z not cached) */
static const char *const small_shapes[] = {
	"tokens=65,in=256,out=384,blocks=4,rank=40",
	"tokens=7,in=64,out=192,blocks=8,rank=24",
	"tokens=5,in=48,out=96,blocks=1,rank=32",
	"tokens=3,in=160,out=320,blocks=20,rank=16",
	"tokens=2,in=320,out=640,blocks=40,rank=8",
	"tokens=2,in=576,out=576,blocks=72,rank=8",
	/* fused_cl's: a 16-CTA cluster (and 8, 4), a tail token tile; two
	 * blocks, padded to 16 in the mixing, one rank slice of 32 or 64 */
	"tokens=70,in=1024,out=2048,blocks=16,rank=128",
	"tokens=40,in=128,out=256,blocks=2,rank=64",
};

static int init_blast(void)
{
	fam = kt_family_find("blast");
	return fam ? 0 : 1;
}

#define SV(s, name) kt_shape_get(fam, &(s), name)

static int is_wgmma(int v)
{
	return strstr(fam->variants[v], "wgmma") != NULL;
}

/* sm_90a only: the wgmma and the warp-specialized (TMA) GEMM stages */
static int is_ws(int v)
{
	return strstr(fam->variants[v], "_ws") != NULL;
}

/* tcmix_fused: stage 1 + the tensor-core mixing on wgmma, then a ws
 * stage 3 (sm_90a) */
static int is_tcf(int v)
{
	return strcmp(fam->variants[v], "tcmix_fused") == 0;
}

static int is_90a(int v)
{
	return is_wgmma(v) || is_ws(v) || is_tcf(v);
}

/* mix_fused, mix_fused_ws: stage 1 + mixing, then stage 3 */
static int is_fused(int v)
{
	return strstr(fam->variants[v], "mix_fused") != NULL && !is_tcf(v);
}

/* fused_cl: the whole layer in one cluster kernel (sm_90+, narrow shapes) */
static int is_fcl(int v)
{
	return strcmp(fam->variants[v], "fused_cl") == 0;
}

/* the tensor-core mixer: blocks <= 16 */
static int is_tc(int v)
{
	return strstr(fam->variants[v], "tcmix") != NULL;
}

static double bf(uint16_t h)
{
	return (double)kt_bf16_to_f32(h);
}

/* ---- problem inputs on the host ---- */

struct problem {
	struct kt_shape s;
	int nb;
	struct kt_buf bufs[KT_MAX_BUFS];
	uint16_t *in[KT_MAX_BUFS];	/* inputs, bf16 bits */
	float *ref;			/* cpu_ref's y */
};

static void problem_ref(struct problem *p)
{
	struct kt_err e = {0};
	float *outs[1];

	free(p->ref);
	p->ref = malloc(p->bufs[Y].elems * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->ref);
	outs[0] = p->ref;
	CU_ASSERT_EQUAL_FATAL(fam->cpu_ref(fam, &p->s, (const void *const *)p->in, outs, &e), 0);
}

static void problem_init(struct problem *p, const char *text, uint64_t seed)
{
	int i;

	memset(p, 0, sizeof(*p));
	p->s = ft_shape(fam, text);
	p->nb = fam->buffers(fam, &p->s, NULL, p->bufs);
	CU_ASSERT_EQUAL_FATAL(p->nb, NPROBLEM);
	CU_ASSERT_STRING_EQUAL(p->bufs[X].name, "x");
	CU_ASSERT_STRING_EQUAL(p->bufs[U].name, "U");
	CU_ASSERT_STRING_EQUAL(p->bufs[V].name, "V");
	CU_ASSERT_STRING_EQUAL(p->bufs[S].name, "S");
	for (i = 0; i < p->nb; i++) {
		if (p->bufs[i].role != KT_BUF_INPUT)
			continue;
		CU_ASSERT_EQUAL(p->bufs[i].dtype, KT_BF16);
		p->in[i] = malloc(p->bufs[i].elems * 2);
		CU_ASSERT_PTR_NOT_NULL_FATAL(p->in[i]);
		kt_fill_bf16(p->in[i], p->bufs[i].elems, seed + (uint64_t)i, p->bufs[i].scale);
	}
	CU_ASSERT_EQUAL_FATAL(p->bufs[Y].role, KT_BUF_OUTPUT);
	problem_ref(p);
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

/* W (m x n) in double: W[i*mb + o][j*nb + k] = sum_c U[i][o][c] S[i][j][c]
 * V[j][c][k]. `wrong` uses S[j][i] instead: the control that the
 * comparison can fail. */
static double *materialize(const struct problem *p, int wrong)
{
	long n = SV(p->s, "in"), m = SV(p->s, "out"), b = SV(p->s, "blocks"), r = SV(p->s, "rank");
	long nb = n / b, mb = m / b, i, o, j, k, c;
	const uint16_t *Uh = p->in[U], *Vh = p->in[V], *Sh = p->in[S];
	double *W = calloc((size_t)(m * n), sizeof(double));

	if (!W)
		return NULL;
	for (i = 0; i < b; i++)
		for (o = 0; o < mb; o++)
			for (j = 0; j < b; j++)
				for (k = 0; k < nb; k++) {
					double acc = 0;

					for (c = 0; c < r; c++)
						acc += bf(Uh[(i * mb + o) * r + c]) *
						       bf(Sh[((wrong ? j * b + i : i * b + j)) * r + c]) *
						       bf(Vh[(j * r + c) * nb + k]);
					W[(i * mb + o) * n + j * nb + k] = acc;
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
				acc += bf(p->in[X][t * n + k]) * W[o * n + k];
			y[t * m + o] = (float)acc;
		}
	rel = emu_rel_l2(p->ref, y, (size_t)(T * m));
	free(W);
	free(y);
	return rel;
}

static void test_cpu_ref_vs_dense(void)
{
	/* tiny shapes the GEMM alignment would reject: cpu_ref needs only
	 * blocks | in, out */
	static const char *const tiny[] = {
		"tokens=3,in=18,out=24,blocks=3,rank=9",
		"tokens=4,in=20,out=30,blocks=5,rank=8",
		"tokens=2,in=16,out=24,blocks=4,rank=11",
		"tokens=3,in=17,out=16,blocks=1,rank=8",
		"tokens=2,in=64,out=32,blocks=8,rank=12",
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
		/* the comparison sees S's blocks transposed (where it matters) */
		if (SV(p.s, "blocks") > 1) {
			bad = dense_vs_ref(&p, 1);
			CU_ASSERT(bad > 0.1);
		}
		for (e = 0; e < p.bufs[Y].elems; e++)
			nonzero += p.ref[e] != 0;
		CU_ASSERT(nonzero > 0);	/* not all zero */
		problem_release(&p);
	}
}

/* b = 1: y = x (U diag(s) V)^T, the low-rank layer with U' = U diag(s).
 * s takes the values +-1/2, +-1, +-2 so that U' is exact in bf16 and the
 * two double references must agree to rounding. Scaling U' by the wrong
 * s (reversed) is the control. */
static void test_b1_is_lowrank(void)
{
	static const char *const shapes[] = {
		"tokens=5,in=48,out=40,blocks=1,rank=16",
		"tokens=3,in=24,out=56,blocks=1,rank=24",
	};
	static const float pow2[] = {0.5f, -1.0f, 2.0f, -0.5f, 1.0f, -2.0f};
	const struct kt_family *lr = kt_family_find("lowrank");
	size_t k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(lr);
	for (k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		struct problem p;
		struct kt_shape ls;
		struct kt_buf lb[KT_MAX_BUFS];
		struct kt_err e = {0};
		char text[160];
		long T, n, m, r, o, c;
		uint16_t *lin[KT_MAX_BUFS] = {0};
		float *ly, *outs[1];
		int round, nlb;

		problem_init(&p, shapes[k], 300 + k);
		T = SV(p.s, "tokens");
		n = SV(p.s, "in");
		m = SV(p.s, "out");
		r = SV(p.s, "rank");
		for (c = 0; c < r; c++)
			p.in[S][c] = kt_f32_to_bf16(pow2[(c * 7 + k) % 6]);
		problem_ref(&p);
		snprintf(text, sizeof(text), "tokens=%ld,in=%ld,out=%ld,rank=%ld", T, n, m, r);
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lr, text, &ls, &e), 0);
		nlb = lr->buffers(lr, &ls, NULL, lb);
		CU_ASSERT_FATAL(nlb >= 4);
		/* lowrank's buffers by name: x, V (r, n), U (m, r) */
		for (round = 0; round < 2; round++) {
			int bi;

			for (bi = 0; bi < nlb; bi++) {
				const char *nm = lb[bi].name;

				if (lb[bi].role != KT_BUF_INPUT)
					continue;
				lin[bi] = malloc(lb[bi].elems * 2);
				CU_ASSERT_PTR_NOT_NULL_FATAL(lin[bi]);
				if (strcmp(nm, "x") == 0) {
					CU_ASSERT_EQUAL_FATAL(lb[bi].elems, p.bufs[X].elems);
					memcpy(lin[bi], p.in[X], lb[bi].elems * 2);
				} else if (strcmp(nm, "V") == 0) {
					CU_ASSERT_EQUAL_FATAL(lb[bi].elems, p.bufs[V].elems);
					memcpy(lin[bi], p.in[V], lb[bi].elems * 2);
				} else {
					CU_ASSERT_STRING_EQUAL_FATAL(nm, "U");
					CU_ASSERT_EQUAL_FATAL(lb[bi].elems, (size_t)(m * r));
					for (o = 0; o < m; o++)
						for (c = 0; c < r; c++) {
							long sc = round ? r - 1 - c : c;
							float u = (float)(bf(p.in[U][o * r + c]) *
									  bf(p.in[S][sc]));

							lin[bi][o * r + c] = kt_f32_to_bf16(u);
						}
				}
			}
			ly = malloc(sizeof(float) * (size_t)(T * m));
			CU_ASSERT_PTR_NOT_NULL_FATAL(ly);
			outs[0] = ly;
			CU_ASSERT_EQUAL_FATAL(lr->cpu_ref(lr, &ls, (const void *const *)lin, outs,
							  &e), 0);
			if (round == 0) {
				CU_ASSERT(emu_rel_l2(p.ref, ly, (size_t)(T * m)) < 1e-6);
			} else {
				CU_ASSERT(emu_rel_l2(p.ref, ly, (size_t)(T * m)) > 0.1);
			}
			free(ly);
			for (bi = 0; bi < KT_MAX_BUFS; bi++) {
				free(lin[bi]);
				lin[bi] = NULL;
			}
		}
		problem_release(&p);
	}
}

/* y is O(1) with the family's input scales (what tol is relative to) */
static void test_output_scale(void)
{
	size_t i;

	for (i = 0; i < 3; i++) {
		struct problem p;
		double ss = 0;
		size_t e;

		problem_init(&p, small_shapes[i], 7);
		for (e = 0; e < p.bufs[Y].elems; e++)
			ss += (double)p.ref[e] * p.ref[e];
		ss = sqrt(ss / (double)p.bufs[Y].elems);
		CU_ASSERT(ss > 0.2 && ss < 2);
		problem_release(&p);
	}
}


/* Runs plan (prep, then timed launches) on the problem's inputs with the
 * config's buffers (every non-input poisoned with NaN, as the worker poisons
 * outputs); returns y (malloc'ed). */
static float *plan_run(const struct problem *p, const struct kt_config *c,
		       const struct kt_plan *plan, int round, long *oob)
{
	return emu_run(fam, &p->s, c, plan, (uint16_t *const *)p->in, p->nb, Y, round, "blast",
		       emu_blast, oob);
}


/* The GPU reference: one program without defines for every shape, no
 * prep (its math against cpu_ref: test_conformance). */
static void test_ref_plan(void)
{
	struct kt_target t = ft_target("sm_90");
	size_t i;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct kt_shape s = ft_shape(fam, small_shapes[i]);
		struct kt_plan plan;
		struct kt_err e = {0};

		CU_ASSERT_EQUAL_FATAL(fam->ref_plan(fam, &s, &t, &plan, &e), 0);
		CU_ASSERT_EQUAL(plan.nprep, 0);
		CU_ASSERT_EQUAL(plan.nprograms, 1);
		CU_ASSERT_EQUAL(plan.programs[0].ndefines, 0);
		CU_ASSERT_EQUAL(plan.nlaunch, 3);
	}
}

/* Each variant's plan at the small shapes: its launches, the MMA path of
 * its GEMM programs, its prep and where z lives (each plan's math against
 * cpu_ref: test_conformance). */
static void test_variants_on_host(void)
{
	/* sm_90a: the mma.sync and the wgmma variants */
	struct kt_target t = ft_target("sm_90a");
	int planned[KT_MAX_VARIANTS] = {0};
	size_t i;
	int v, k;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct {
			struct kt_shape s;
		} p;
		int small;

		p.s = ft_shape(fam, small_shapes[i]);
		for (v = 0; v < fam->nvariants; v++) {
			struct ft_collect x;
			const struct kt_config *cs[3];

			memset(&x, 0, sizeof(x));
			x.f = fam;
			x.s = p.s;
			x.t = t;
			x.variant = v;
			kt_space_foreach(fam, 0, ft_collect_one, &x);
			/* wgmma's 64-row, 64-column tiles are pruned for GEMMs
			 * under 33 in M or N */
			small = SV(p.s, "tokens") < 33 || SV(p.s, "rank") < 33 ||
				SV(p.s, "out") / SV(p.s, "blocks") < 33;
			CU_ASSERT_FATAL(x.n > 0 || (is_90a(v) && small) ||
					(is_tc(v) && SV(p.s, "blocks") > 16) || is_fcl(v) ||
					(is_tcf(v) && SV(p.s, "rank") % 32));
			if (x.n == 0)
				continue;
			planned[v]++;
			cs[0] = &x.first;
			cs[1] = &x.mid;
			cs[2] = &x.last;
			for (k = 0; k < 3; k++) {
				struct kt_plan plan;
				struct kt_err e = {0};
				int pr, wg = 0;

				CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &p.s, cs[k], &t, &plan, &e),
						      0);
				/* fused: stage 1 + mixing, stage 3; fused_cl: one */
				CU_ASSERT_EQUAL(plan.nlaunch,
						is_fcl(v) ? 1 : is_fused(v) || is_tcf(v) ? 2 : 3);
				CU_ASSERT_STRING_EQUAL(plan.launch[0].kernel,
						       is_fcl(v) ? "fused_blast_cl" :
						       is_tcf(v) ? "fused_blast_s1tc" :
						       is_fused(v) ? "blast_s1mix" :
						       is_ws(v) ? "gemm_tn_ws" : "gemm_tn");
				CU_ASSERT_EQUAL(plan.nprep, 1);
				CU_ASSERT(strlen(plan.transform) > 10);
				for (pr = 0; pr < plan.nprograms; pr++)
					wg += emu_define(&plan.programs[pr],
							 is_ws(v) || is_tcf(v) ? "WS" : "WGMMA") == 1;
				/* every GEMM program on the variant's MMA path
				 * (tcmix_fused: stage 3 its only GEMM) */
				CU_ASSERT_EQUAL(wg, is_tcf(v) ? 1 : is_90a(v) ? plan.nprograms - 1 : 0);
				/* z only where it goes through memory */
				{
					struct kt_buf bb[KT_MAX_BUFS];
					int nbb = fam->buffers(fam, &p.s, cs[k], bb), q, hasz = 0;

					for (q = 0; q < nbb; q++)
						hasz += strcmp(bb[q].name, "z") == 0;
					CU_ASSERT_EQUAL(hasz, !is_fused(v) && !is_fcl(v) && !is_tcf(v));
				}
			}
		}
	}
	for (v = 0; v < fam->nvariants; v++)
		CU_ASSERT(planned[v] > 0);
}

static void expect_config_reject(const char *shape_text, const char *cfg, const char *tname,
				 const char *want);

/* tcmix_ws's L2 parameter: the programs' defines as blast.c maps them
 * (the mixer: MIX_L2 1, 9 with the hints; stage 1: L2_HINT 7 and stage 3:
 * 2 with the hints), and plans that still match cpu_ref with every z line
 * the mixer discards turned NaN in the emulator. Controls: a plan that
 * runs the mixer again after its discards reads NaN and spoils y, so the
 * emulated discard can fail; L2 > 0 needs whole 128-byte lines of z
 * (rank % 64). */
static void test_l2(void)
{
	static const struct {
		const char *tile;
		long l2, s1, s3, mix;	/* expected defines, -1: none */
	} cases[] = {
		{"BLOCK_M=64,BLOCK_N=128,Z_BLOCK_N=64,STAGES=2,GROUP_M=8,CONSUMERS=1,PERSISTENT=0", 0,
		 -1, -1, -1},
		{"BLOCK_M=64,BLOCK_N=128,Z_BLOCK_N=64,STAGES=2,GROUP_M=8,CONSUMERS=1,PERSISTENT=0", 1,
		 -1, -1, 1},
		{"BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=128,STAGES=2,GROUP_M=8,CONSUMERS=1,PERSISTENT=3", 1,
		 -1, -1, 1},
		{"BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=128,STAGES=2,GROUP_M=8,CONSUMERS=1,PERSISTENT=3", 2,
		 7, 2, 9},
		{"BLOCK_M=64,BLOCK_N=128,Z_BLOCK_N=64,STAGES=2,GROUP_M=8,CONSUMERS=1,PERSISTENT=2", 2,
		 7, 2, 9},
	};
	const char *shape = "tokens=100,in=256,out=512,blocks=4,rank=128";
	struct kt_target t = ft_target("sm_90a");
	struct problem p;
	size_t i;

	t.sms = 4;	/* the persistent stages walk several items a CTA */
	problem_init(&p, shape, 31);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kt_config c;
		struct kt_plan plan, again;
		struct kt_err e = {0};
		char key[256], why[200] = "";
		long oob;
		float *y;

		snprintf(key, sizeof(key), "variant=tcmix_ws,%s,L2=%ld", cases[i].tile, cases[i].l2);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, key, &c, &e), 0);
		CU_ASSERT_EQUAL(fam->check(fam, &p.s, &c, &t, why, sizeof(why)), 0);
		if (why[0])
			fprintf(stderr, "\n  %s: %s\n", key, why);
		CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &p.s, &c, &t, &plan, &e), 0);
		CU_ASSERT_EQUAL_FATAL(plan.nlaunch, 3);
		CU_ASSERT_STRING_EQUAL(plan.launch[1].kernel, "blast_mix_tcp");
		CU_ASSERT_EQUAL(emu_define(&plan.programs[plan.launch[0].program], "L2_HINT"),
				cases[i].s1);
		CU_ASSERT_EQUAL(emu_define(&plan.programs[plan.launch[2].program], "L2_HINT"),
				cases[i].s3);
		CU_ASSERT_EQUAL(emu_define(&plan.programs[plan.launch[1].program], "MIX_L2"),
				cases[i].mix);
		y = plan_run(&p, &c, &plan, 0, &oob);
		CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
		CU_ASSERT_EQUAL(oob, 0);
		free(y);
		/* the mixer again, then stage 3: it reads the dropped z */
		again = plan;
		again.launch[again.nlaunch++] = plan.launch[1];
		again.launch[again.nlaunch++] = plan.launch[2];
		y = plan_run(&p, &c, &again, 0, &oob);
		if (cases[i].l2 > 0) {
			CU_ASSERT(emu_nonfinite(y, p.bufs[Y].elems) > 0);
		} else {	/* without the discard the repeat is harmless */
			CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
		}
		free(y);
	}
	problem_release(&p);
	expect_config_reject("tokens=100,in=256,out=512,blocks=4,rank=96",
			     "variant=tcmix_ws,BLOCK_M=64,BLOCK_N=128,Z_BLOCK_N=64,STAGES=2,"
			     "GROUP_M=8,CONSUMERS=1,PERSISTENT=0,L2=1",
			     "sm_90a", "multiple of 64");
}

/* The first valid config of `variant` at small_shapes[0] on t, planned:
 * p (seed), x (its collected configs) and plan set up for plan_run. */
static void first_plan(const char *variant, const struct kt_target *t, uint64_t seed,
		       struct problem *p, struct ft_collect *x, struct kt_plan *plan)
{
	struct kt_err e = {0};

	problem_init(p, small_shapes[0], seed);
	memset(x, 0, sizeof(*x));
	x->f = fam;
	x->s = p->s;
	x->t = *t;
	x->variant = kt_variant_index(fam, variant);
	CU_ASSERT_FATAL(x->variant >= 0);
	kt_space_foreach(fam, 0, ft_collect_one, x);
	CU_ASSERT_FATAL(x->n > 0);
	CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &p->s, &x->first, t, plan, &e), 0);
}

/* A plan whose mixer grid misses the last rank vector leaves NaN (the
 * emulator runs threads, not the math): the coverage check can fail. */
static void test_mix_grid_control(void)
{
	struct kt_target t = ft_target("sm_90");
	struct problem p;
	struct ft_collect x;
	struct kt_plan plan;
	long oob;
	float *y;

	first_plan("naive", &t, 5, &p, &x, &plan);
	CU_ASSERT_STRING_EQUAL_FATAL(plan.launch[1].kernel, "blast_mix");
	/* r = 40, b = 4: 5 vectors of 8 ranks, one CTA of 8 warps covers them */
	CU_ASSERT_EQUAL(plan.launch[1].grid[1], 1);
	plan.launch[1].block[1] = 4;
	y = plan_run(&p, &x.first, &plan, 0, &oob);
	CU_ASSERT(emu_nonfinite(y, p.bufs[Y].elems) > 0);
	free(y);
	problem_release(&p);
}

/* fused_cl's grids on a 132-SM sm_90: streaming, one cluster of b / G CTAs
 * per token tile; resident, the 7 clusters of 16 the H200 holds at once
 * (or every tile, when fewer), each walking its tiles, run on the host. */
static void test_fcl_grid(void)
{
	static const struct {
		const char *shape, *config;
		unsigned grid;
	} g[] = {
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256",
		 "variant=fused_cl,BLOCK_M=64,STAGES=2,PERSISTENT=0,CTA_BLOCKS=1", 16 * 16},
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256",
		 "variant=fused_cl,BLOCK_M=32,STAGES=2,PERSISTENT=1,CTA_BLOCKS=1", 7 * 16},
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256",
		 "variant=fused_cl,BLOCK_M=32,STAGES=3,PERSISTENT=0,CTA_BLOCKS=1", 32 * 16},
		{"tokens=70,in=1024,out=2048,blocks=16,rank=128",
		 "variant=fused_cl,BLOCK_M=32,STAGES=2,PERSISTENT=1,CTA_BLOCKS=2", 3 * 8},
		{"tokens=300,in=1024,out=2048,blocks=16,rank=128",
		 "variant=fused_cl,BLOCK_M=32,STAGES=2,PERSISTENT=1,CTA_BLOCKS=1", 7 * 16},
	};
	struct kt_target t = ft_target("sm_90");
	size_t i;

	t.sms = 132;
	for (i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		struct kt_shape s = ft_shape(fam, g[i].shape);
		struct kt_config c;
		struct kt_plan plan;
		struct kt_err e = {0};
		char why[200];

		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, g[i].config, &c, &e), 0);
		CU_ASSERT_EQUAL_FATAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &s, &c, &t, &plan, &e), 0);
		CU_ASSERT_EQUAL(plan.nlaunch, 1);
		CU_ASSERT_EQUAL(plan.launch[0].grid[0], g[i].grid);
		if (i >= 3) {	/* the walk covers every tile once: y vs cpu_ref */
			struct problem p;
			long oob;
			float *y;

			problem_init(&p, g[i].shape, 91 + (int)i);
			y = plan_run(&p, &c, &plan, 0, &oob);
			CU_ASSERT_EQUAL(oob, 0);
			CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
			free(y);
			problem_release(&p);
		}
	}
	/* the resident kernel has no ring: STAGES 2 stands for it */
	{
		struct kt_shape s = ft_shape(fam, g[0].shape);
		struct kt_config c;
		struct kt_err e = {0};
		char why[200];

		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, "variant=fused_cl,BLOCK_M=32,STAGES=3,"
							    "PERSISTENT=1,CTA_BLOCKS=1", &c, &e), 0);
		CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "STAGES"));
		c.p[6] = 2;	/* STAGES */
		CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 0);
		t.sm = 86;
		t.arch_a = 0;
		CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90"));
	}
}

/* blast_mix_tcp's CTAs walk token tiles when the SMs are few: on a 1-SM
 * target (3 CTAs at once) tokens=65 (9 tiles of TP_T) and rank=40 (one
 * rank tile) deal 3 tiles to each of 3 CTAs (tiles y, y+3, y+6); the plan
 * still matches cpu_ref, and so does any other grid: one CTA for all, and
 * on a shape of 4 rank tiles (rank=200) grids of fewer CTAs than rank
 * tiles (each walks several), of some rank tiles with one CTA more than
 * others, and of one unit per CTA. */
static void test_mix_tcp_walk(void)
{
	static const unsigned grids[] = {1, 3, 5, 6, 7, 4 * 3};
	struct kt_target t = ft_target("sm_90");
	struct problem p;
	struct ft_collect x;
	struct kt_plan plan;
	long oob;
	float *y;
	size_t g;

	t.sms = 1;
	first_plan("tcmix", &t, 9, &p, &x, &plan);
	CU_ASSERT_STRING_EQUAL_FATAL(plan.launch[1].kernel, "blast_mix_tcp");
	CU_ASSERT_EQUAL(plan.launch[1].grid[0], 3);
	CU_ASSERT_EQUAL(plan.launch[1].grid[1], 1);
	y = plan_run(&p, &x.first, &plan, 0, &oob);
	CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
	CU_ASSERT_EQUAL(oob, 0);
	free(y);
	plan.launch[1].grid[0] = 1;
	y = plan_run(&p, &x.first, &plan, 0, &oob);
	CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
	free(y);
	problem_release(&p);

	/* 17 tokens: 3 token tiles; rank 200: 4 rank tiles, the last partial */
	problem_init(&p, "tokens=17,in=64,out=128,blocks=4,rank=200", 11);
	memset(&x, 0, sizeof(x));
	x.f = fam;
	x.s = p.s;
	x.t = t;
	x.variant = kt_variant_index(fam, "tcmix");
	kt_space_foreach(fam, 0, ft_collect_one, &x);
	CU_ASSERT_FATAL(x.n > 0);
	{
		struct kt_err e = {0};

		CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &p.s, &x.first, &t, &plan, &e), 0);
	}
	CU_ASSERT_EQUAL(plan.launch[1].grid[0], 3);	/* the 3 places, 12 units */
	for (g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
		plan.launch[1].grid[0] = grids[g];
		y = plan_run(&p, &x.first, &plan, 0, &oob);
		CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[Y].elems) < 1e-5);
		CU_ASSERT_EQUAL(oob, 0);
		free(y);
	}
	problem_release(&p);
}

/* ---- shapes, checks, space ---- */

static void test_shape_parse(void)
{
	struct kt_shape s;
	struct kt_err e = {0};
	char key[160];
	int d;

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(fam, "rank=1024,blocks=16,out=4096,in=4096,tokens=16",
					     &s, &e), 0);
	kt_shape_key(fam, &s, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "tokens=16,in=4096,out=4096,blocks=16,rank=1024");
	CU_ASSERT_EQUAL(SV(s, "blocks"), 16);
	CU_ASSERT_EQUAL(SV(s, "rank"), 1024);
	/* blocks and rank are structural, tokens, in and out are not */
	for (d = 0; d < fam->ndims; d++)
		CU_ASSERT_EQUAL(fam->dims[d].structural,
				strcmp(fam->dims[d].name, "blocks") == 0 ||
					strcmp(fam->dims[d].name, "rank") == 0);
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,rank=1024", "missing key 'blocks'");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=16", "missing key 'rank'");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=16,rank=1024,heads=2",
			   "unknown key 'heads'");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=0,rank=1024", "blocks=0 out of range");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=512,rank=1024",
			   "blocks=512 out of range");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=16,rank=4", "rank=4 out of range");
	ft_expect_shape_error(fam, "tokens=0,in=4096,out=4096,blocks=16,rank=1024", "tokens=0 out of range");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=b16,rank=1024", "not an integer");
	ft_expect_shape_error(fam, "tokens=16,in=4096,out=4096,blocks=16,blocks=16,rank=1024", "given twice");
}

/* cfg cannot run text; plan says so too; ref_plan too unless ref_ok */
static void expect_reject(const char *text, const struct kt_config *c, const char *want, int ref_ok)
{
	struct kt_shape s = ft_shape(fam, text);
	struct kt_target t = ft_target("sm_90");
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";

	CU_ASSERT_EQUAL(fam->check(fam, &s, c, &t, why, sizeof(why)), 1);
	if (!strstr(why, want))
		fprintf(stderr, "\n  '%s': why '%s' lacks '%s'\n", text, why, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	CU_ASSERT_EQUAL(fam->plan(fam, &s, c, &t, &plan, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_EQUAL(fam->ref_plan(fam, &s, &t, &plan, &e) == 0, ref_ok);
}

static void expect_config_reject(const char *shape_text, const char *cfg, const char *tname,
				 const char *want)
{
	struct kt_shape s = ft_shape(fam, shape_text);
	struct kt_target t = ft_target(tname);
	struct kt_config c;
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, cfg, &c, &e), 0);
	CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 1);
	if (!strstr(why, want))
		fprintf(stderr, "\n  '%s' on %s: why '%s' lacks '%s'\n", cfg, tname, why, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	CU_ASSERT_EQUAL(fam->plan(fam, &s, &c, &t, &plan, &e), -1);
}

static void expect_config_ok(const char *shape_text, const char *cfg, const char *tname)
{
	struct kt_shape s = ft_shape(fam, shape_text);
	struct kt_target t = ft_target(tname);
	struct kt_config c;
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";

	CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, cfg, &c, &e), 0);
	CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 0);
	if (why[0])
		fprintf(stderr, "\n  '%s' on %s: %s\n", cfg, tname, why);
	CU_ASSERT_EQUAL(fam->plan(fam, &s, &c, &t, &plan, &e), 0);
}

static void test_check(void)
{
	struct kt_target t = ft_target("sm_90"), ta = ft_target("sm_90a");
	struct kt_shape s = ft_shape(fam, "tokens=64,in=256,out=256,blocks=4,rank=64");
	struct kt_config naive, wg;
	char why[200];

	CU_ASSERT_EQUAL_FATAL(ft_first_config(fam, &s, &t, 0, &naive), 0);
	CU_ASSERT_EQUAL_FATAL(ft_first_config(fam, &s, &ta, 1, &wg), 0);
	/* blocks must divide in and out (not rank) */
	expect_reject("tokens=64,in=258,out=256,blocks=4,rank=64", &naive, "must divide", 0);
	expect_reject("tokens=64,in=256,out=250,blocks=4,rank=64", &naive, "must divide", 0);
	s = ft_shape(fam, "tokens=64,in=384,out=384,blocks=3,rank=64");
	CU_ASSERT_EQUAL(fam->check(fam, &s, &naive, &t, why, sizeof(why)), 0);
	/* the GEMMs' 16-byte alignment: in/blocks, out/blocks, rank */
	expect_reject("tokens=64,in=256,out=256,blocks=64,rank=64", &naive, "multiples of 8", 0);
	expect_reject("tokens=64,in=256,out=96,blocks=8,rank=64", &naive, "multiples of 8", 0);
	expect_reject("tokens=64,in=256,out=256,blocks=4,rank=68", &naive, "multiples of 8", 0);
	/* a GEMM tile rule reaches through: warp tile 16 x 16 multiples */
	s = ft_shape(fam, "tokens=64,in=256,out=256,blocks=4,rank=64");
	naive.p[0] = 16;	/* BLOCK_M */
	naive.p[4] = 2;		/* WARPS_M */
	CU_ASSERT_EQUAL(fam->check(fam, &s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "warp tile"));
	/* wgmma needs sm_90a */
	CU_ASSERT_EQUAL(fam->check(fam, &s, &wg, &ta, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(fam->check(fam, &s, &wg, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
	naive.variant = fam->nvariants;
	CU_ASSERT_EQUAL(fam->check(fam, &s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "variant"));
	/* mix_fused: b z tiles in shared memory, b * RV z values per thread */
	expect_config_reject(suite_shapes[0],
			     "variant=mix_fused,BLOCK_M=128,BLOCK_N=64,Z_BLOCK_N=256,BLOCK_K=32,"
			     "WARPS_M=2,WARPS_N=2,STAGES=2,GROUP_M=8", "sm_90", "shared memory");
	expect_config_reject(suite_shapes[0],
			     "variant=mix_fused,BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=64,BLOCK_K=32,"
			     "WARPS_M=4,WARPS_N=4,STAGES=2,GROUP_M=8", "sm_90", "register file");
	expect_config_ok(suite_shapes[0],
			 "variant=mix_fused,BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=64,BLOCK_K=32,"
			 "WARPS_M=2,WARPS_N=2,STAGES=3,GROUP_M=8", "sm_90");
	/* the same tile is over sm_80's 163 KiB; a narrower rank tile fits */
	expect_config_reject(suite_shapes[0],
			     "variant=mix_fused,BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=64,BLOCK_K=32,"
			     "WARPS_M=2,WARPS_N=2,STAGES=3,GROUP_M=8", "sm_80", "shared memory");
	expect_config_ok(suite_shapes[0],
			 "variant=mix_fused,BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=32,BLOCK_K=32,"
			 "WARPS_M=2,WARPS_N=2,STAGES=3,GROUP_M=8", "sm_80");
	/* tcmix: the blocks padded to one 16 x 16 mma tile */
	expect_config_reject("tokens=64,in=640,out=640,blocks=20,rank=64",
			     "variant=tcmix,BLOCK_M=64,BLOCK_N=32,Z_BLOCK_N=32,BLOCK_K=32,"
			     "WARPS_M=2,WARPS_N=2,STAGES=2,GROUP_M=8", "sm_90", "blocks=20 > 16");
	expect_config_ok("tokens=64,in=1024,out=1024,blocks=16,rank=64",
			 "variant=tcmix,BLOCK_M=64,BLOCK_N=32,Z_BLOCK_N=32,BLOCK_K=32,"
			 "WARPS_M=2,WARPS_N=2,STAGES=2,GROUP_M=8", "sm_90");
	expect_config_ok(suite_shapes[0],
			 "variant=tcmix_ws,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=256,STAGES=4,GROUP_M=8,"
			 "CONSUMERS=2,PERSISTENT=0", "sm_90a");
	/* persistent stages stage their epilogue beside the ring (128 columns
	 * a pass): 4 stages of 128 x 256 still fit */
	expect_config_ok(suite_shapes[0],
			 "variant=tcmix_ws,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=256,STAGES=4,GROUP_M=8,"
			 "CONSUMERS=2,PERSISTENT=3", "sm_90a");
	{
		/* a CTA per SM for the persistent stage (1), a CTA per tile for
		 * the other (stage 3: 8 x 1 tiles x 16 blocks) */
		struct kt_shape s7 = ft_shape(fam, suite_shapes[0]);
		struct kt_target t7 = ft_target("sm_90a");
		struct kt_config c7;
		struct kt_plan p7;
		struct kt_err e7 = {0};

		t7.sms = 132;
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, "variant=tcmix_ws,BLOCK_M=128,BLOCK_N=256,"
						      "Z_BLOCK_N=256,STAGES=3,GROUP_M=8,"
						      "CONSUMERS=2,PERSISTENT=1", &c7, &e7), 0);
		CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &s7, &c7, &t7, &p7, &e7), 0);
		CU_ASSERT_EQUAL(p7.launch[0].grid[0], 132);
		CU_ASSERT_EQUAL(p7.launch[0].grid[2], 1);
		CU_ASSERT_EQUAL(p7.launch[2].grid[0] * p7.launch[2].grid[2], 8 * 16);
	}
	/* tcmix_fused: sm_90a; S_c one 16 x 16 tile; rank slices of 32 or 64;
	 * one block's k-chunks in the ring; its z, staging and ring tiles in
	 * shared memory (only FUSED_M 64 with slices of 32 fit 227 KiB) */
#define TCF_KEY(zbn, fm, ring)                                                                    \
	"variant=tcmix_fused,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=" zbn ",STAGES=4,GROUP_M=8,"      \
	"FUSED_M=" fm ",RING=" ring
	expect_config_ok(suite_shapes[0], TCF_KEY("32", "64", "8"), "sm_90a");
	expect_config_ok(suite_shapes[0], TCF_KEY("32", "64", "12"), "sm_90a");
	expect_config_reject(suite_shapes[0], TCF_KEY("32", "64", "8"), "sm_90", "sm_90a");
	expect_config_reject("tokens=1024,in=5120,out=5120,blocks=20,rank=1280",
			     TCF_KEY("32", "64", "8"), "sm_90a", "blocks=20 > 16");
	expect_config_reject("tokens=1024,in=4096,out=4096,blocks=16,rank=1040",
			     TCF_KEY("32", "64", "8"), "sm_90a", "not a multiple");
	expect_config_reject(suite_shapes[0], TCF_KEY("128", "64", "8"), "sm_90a", "32 or 64");
	/* in/blocks 384: six k-chunks, over 4 slots */
	expect_config_reject("tokens=1024,in=6144,out=4096,blocks=16,rank=1024",
			     TCF_KEY("32", "64", "4"), "sm_90a", "cannot hold");
	expect_config_ok(suite_shapes[2],
			 "variant=tcmix_fused,BLOCK_M=128,BLOCK_N=128,Z_BLOCK_N=32,STAGES=4,GROUP_M=8,"
			 "FUSED_M=64,RING=4", "sm_90a");
	expect_config_reject(suite_shapes[0], TCF_KEY("64", "64", "8"), "sm_90a", "shared memory");
	expect_config_reject(suite_shapes[0], TCF_KEY("32", "128", "8"), "sm_90a", "shared memory");
#undef TCF_KEY
	/* naive_ws: sm_90a, and CONSUMERS whole 64-row warpgroups */
	expect_config_reject(suite_shapes[0],
			     "variant=naive_ws,BLOCK_M=128,BLOCK_N=128,Z_BLOCK_N=128,STAGES=4,GROUP_M=8,"
			     "CONSUMERS=2", "sm_90", "sm_90a");
	expect_config_reject(suite_shapes[0],
			     "variant=naive_ws,BLOCK_M=64,BLOCK_N=128,Z_BLOCK_N=128,STAGES=4,GROUP_M=8,"
			     "CONSUMERS=2", "sm_90a", "consumer");
	expect_config_ok(suite_shapes[0],
			 "variant=naive_ws,BLOCK_M=128,BLOCK_N=128,Z_BLOCK_N=128,STAGES=4,GROUP_M=8,"
			 "CONSUMERS=2", "sm_90a");
}

struct space_ctx {
	struct kt_shape s;
	struct kt_target t;
	long valid[KT_MAX_VARIANTS], bad_plans;
};

/* blast's own rules for a valid config's plan (what every plan must be:
 * test_conformance): the persistent ws kernel takes the batch count as an
 * 11th argument; programmatic dependent launch only for kernels that wait
 * for their predecessor (kt_pdl_wait: compiled with KT_PDL=1), and for all
 * three of tcmix_ws's and tcmix_fused's; gemm_tn (tcmix PDL 1) not as the
 * first timed launch, whose prologue reads V before it waits. */
static int space_one(const struct kt_config *c, void *arg)
{
	struct space_ctx *x = arg;
	struct kt_plan p;
	struct kt_err e = {0};
	char why[200] = "", key[256];
	int i, bad = 0;

	if (fam->check(fam, &x->s, c, &x->t, why, sizeof(why)))
		return 0;
	x->valid[c->variant]++;
	if (fam->plan(fam, &x->s, c, &x->t, &p, &e) != 0) {
		x->bad_plans++;
		return 0;
	}
	for (i = 0; i < p.nprep + p.nlaunch; i++) {
		const struct kt_launch *l = i < p.nprep ? &p.prep[i] : &p.launch[i - p.nprep];

		if (!bad && strcmp(l->kernel, "gemm_tn_ws") == 0)
			bad |= (emu_define(&p.programs[l->program], "PERSISTENT") == 1) !=
			       (l->nargs == 11);
		if (!bad)
			bad |= l->pdl != (emu_define(&p.programs[l->program], "KT_PDL") == 1 &&
					  i >= p.nprep && (strcmp(l->kernel, "gemm_tn_ws") == 0 ||
							   strcmp(l->kernel, "blast_mix_tcp") == 0 ||
							   strcmp(l->kernel, "fused_blast_s1tc") == 0 ||
							   (strcmp(l->kernel, "gemm_tn") == 0 &&
							    i > p.nprep)));
		if (!bad && (strcmp(fam->variants[c->variant], "tcmix_ws") == 0 ||
			     strcmp(fam->variants[c->variant], "tcmix_fused") == 0))
			bad |= i >= p.nprep && !l->pdl;
	}
	if (bad) {
		x->bad_plans++;
		kt_config_key(fam, c, key, sizeof(key));
		fprintf(stderr, "\n  bad plan for %s\n", key);
	}
	return 0;
}

/* The space's size and, per variant at the suite's shapes, how much of it
 * is valid (the space's and the plans' generic rules: test_conformance). */
static void test_space(void)
{
	const char *targets[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	long product[KT_MAX_VARIANTS], total = kt_space_size(fam, 1);
	size_t i, t;
	int v, k;

	CU_ASSERT_STRING_EQUAL(fam->variants[0], "naive");	/* the baseline first */
	for (v = 0; v < fam->nvariants; v++) {
		product[v] = 1;
		for (k = 0; k < fam->nparams; k++)
			if ((fam->params[k].variants >> v) & 1u)
				product[v] *= fam->params[k].nvalues;
	}
	CU_ASSERT_EQUAL(kt_space_size(fam, 0), total);	/* nothing planted */
	/* modest: the two stages share all but their N tile (what a sweep
	 * compiles is the valid part, bounded per variant below); tcmix's PDL
	 * doubles tcmix: 30,720; STAGES 6 and 8, which the checks keep to
	 * decode tiles: 51,200; tcmix_ws's L2 (3 values): 57,600 */
	CU_ASSERT(total < 60000);
	printf("\n  blast space %ld\n", total);
	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
		for (i = 0; i < sizeof(suite_shapes) / sizeof(suite_shapes[0]); i++) {
			struct space_ctx x;

			memset(&x, 0, sizeof(x));
			x.s = ft_shape(fam, suite_shapes[i]);
			x.t = ft_target(targets[t]);
			CU_ASSERT_EQUAL(kt_space_foreach(fam, 1, space_one, &x), 0);
			CU_ASSERT_EQUAL(x.bad_plans, 0);
			for (v = 0; v < fam->nvariants; v++) {
				/* useful but pruned, per variant; wgmma and ws on
				 * sm_90a only */
				if (is_90a(v) && !x.t.arch_a) {
					CU_ASSERT_EQUAL(x.valid[v], 0);
					continue;
				}
				/* fused_cl: sm_90+, and only llama1b's rank fits
				 * its z and w into shared memory */
				if (is_fcl(v)) {
					if (x.t.sm < 90 || SV(x.s, "rank") > 256) {
						CU_ASSERT_EQUAL(x.valid[v], 0);
					} else {
						CU_ASSERT(x.valid[v] >= 4 && x.valid[v] < product[v]);
					}
					continue;
				}
				CU_ASSERT(x.valid[v] > (is_90a(v) ? 10 : 20));
				/* (tcmix on sm_90: twice, PDL 0 and 1) */
				CU_ASSERT(x.valid[v] < 4000);
				CU_ASSERT(x.valid[v] < product[v]);
			}
			printf("  %s %s: valid", targets[t], suite_shapes[i]);
			for (v = 0; v < fam->nvariants; v++)
				printf(" %s %ld", fam->variants[v], x.valid[v]);
			printf("\n");
		}
	/* decode-sized tokens still have configs */
	{
		struct space_ctx x;

		memset(&x, 0, sizeof(x));
		x.s = ft_shape(fam, "tokens=16,in=4096,out=4096,blocks=16,rank=1024");
		x.t = ft_target("sm_90a");
		kt_space_foreach(fam, 0, space_one, &x);
		CU_ASSERT(x.valid[0] > 0);
		CU_ASSERT_EQUAL(x.bad_plans, 0);
	}
}

/* suite_shapes' tcmix_ws defaults on sm_90a: the H200 sweeps' winners */
static const char *const suite_ws_default[] = {
	"variant=tcmix_ws,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=256,STAGES=4,GROUP_M=8,CONSUMERS=2,"
	"PERSISTENT=1,L2=0",
	"variant=tcmix_ws,BLOCK_M=256,BLOCK_N=128,Z_BLOCK_N=128,STAGES=3,GROUP_M=8,CONSUMERS=2,"
	"PERSISTENT=1,L2=0",
	"variant=tcmix_ws,BLOCK_M=256,BLOCK_N=64,Z_BLOCK_N=128,STAGES=4,GROUP_M=8,CONSUMERS=2,"
	"PERSISTENT=0,L2=0",
};

/* The measured defaults (that each is a valid config: test_conformance). */
static void test_defaults(void)
{
	const char *targets[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	const char *extra[] = {"tokens=16,in=4096,out=4096,blocks=16,rank=1024",
			       "tokens=1,in=64,out=64,blocks=8,rank=8",
			       "tokens=1024,in=768,out=3072,blocks=6,rank=192"};
	size_t i, t, nsuite = sizeof(suite_shapes) / sizeof(suite_shapes[0]);

	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
		for (i = 0; i < nsuite + sizeof(extra) / sizeof(extra[0]); i++) {
			const char *text = i < nsuite ? suite_shapes[i] : extra[i - nsuite];
			struct kt_shape s = ft_shape(fam, text);
			struct kt_target tg = ft_target(targets[t]);
			struct kt_config c;

			CU_ASSERT_EQUAL_FATAL(fam->default_config(fam, &s, &tg, &c), 0);
			/* the tensor-core mixer wherever blocks <= 16; on sm_90a
			 * tcmix_ws's measured winners at the suite's shapes */
			if (tg.arch_a && i < nsuite) {
				char key[256];

				kt_config_key(fam, &c, key, sizeof(key));
				CU_ASSERT_STRING_EQUAL(key, suite_ws_default[i]);
			} else {
				CU_ASSERT_STRING_EQUAL(fam->variants[c.variant],
						       SV(s, "blocks") <= 16 ? "tcmix" : "naive");
			}
		}
	{
		/* sm_90 at decode: tcmix's measured tile, mixer and stage 3 as
		 * programmatic dependents, on a 6-deep ring */
		struct kt_shape s = ft_shape(fam, "tokens=16,in=4096,out=4096,blocks=16,rank=1024");
		struct kt_target tg = ft_target("sm_90a");
		struct kt_config c;
		char key[256];

		CU_ASSERT_EQUAL_FATAL(fam->default_config(fam, &s, &tg, &c), 0);
		kt_config_key(fam, &c, key, sizeof(key));
		CU_ASSERT_STRING_EQUAL(key, "variant=tcmix,BLOCK_M=16,BLOCK_N=64,Z_BLOCK_N=32,BLOCK_K=64,"
					    "WARPS_M=1,WARPS_N=2,STAGES=6,GROUP_M=8,PDL=1");
	}
	{
		/* blocks > 16: naive's CUDA-core mixer */
		struct kt_shape s = ft_shape(fam, "tokens=64,in=640,out=640,blocks=20,rank=64");
		struct kt_target tg = ft_target("sm_90");
		struct kt_config c;

		CU_ASSERT_EQUAL_FATAL(fam->default_config(fam, &s, &tg, &c), 0);
		CU_ASSERT_STRING_EQUAL(fam->variants[c.variant], "naive");
	}
	{
		/* nothing to hand out for a shape no config can run */
		struct kt_shape s = ft_shape(fam, "tokens=16,in=4096,out=4096,blocks=3,rank=1024");
		struct kt_target tg = ft_target("sm_90");
		struct kt_config c;

		CU_ASSERT_EQUAL(fam->default_config(fam, &s, &tg, &c), -1);
	}
}

/* docs/kernels.md's table: FLOPs 2Nr(n+m+b^2), bytes 2(Nn + r(n+m+b^2) +
 * Nm); the low-rank layer's plus the mixing; the floor of llama7b q/k/v/o
 * at N=1024 on the H200 is the compute floor of docs/kernels.md. */
static void test_models(void)
{
	const struct kt_family *lr = kt_family_find("lowrank");
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(lr);
	for (i = 0; i < sizeof(suite_shapes) / sizeof(suite_shapes[0]); i++) {
		struct kt_shape s = ft_shape(fam, suite_shapes[i]), ls;
		struct kt_err e = {0};
		char text[160];
		double T = SV(s, "tokens"), n = SV(s, "in"), m = SV(s, "out"), r = SV(s, "rank");
		double b = SV(s, "blocks"), params = 0;
		struct kt_buf bufs[KT_MAX_BUFS];
		int k, nb;

		snprintf(text, sizeof(text), "tokens=%ld,in=%ld,out=%ld,rank=%ld", SV(s, "tokens"),
			 SV(s, "in"), SV(s, "out"), SV(s, "rank"));
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lr, text, &ls, &e), 0);
		CU_ASSERT_DOUBLE_EQUAL(fam->flops(fam, &s), lr->flops(lr, &ls) + 2 * T * r * b * b,
				       1e-3);
		/* params counted from the buffers: U, V, S */
		nb = fam->buffers(fam, &s, NULL, bufs);
		for (k = 0; k < nb; k++)
			if (bufs[k].role == KT_BUF_INPUT && strcmp(bufs[k].name, "x") != 0)
				params += (double)bufs[k].elems;
		CU_ASSERT_DOUBLE_EQUAL(params, r * (n + m + b * b), 1e-3);
		CU_ASSERT_DOUBLE_EQUAL(fam->min_bytes(fam, &s), 2 * (T * n + params + T * m), 1e-3);
		/* fewer FLOPs than the dense layer it replaces */
		CU_ASSERT(fam->flops(fam, &s) < 2 * T * n * m);
	}
	{
		struct kt_shape s = ft_shape(fam, suite_shapes[0]);
		double floor_us = kt_floor_us(fam, &s, "NVIDIA H200");

		CU_ASSERT(floor_us > 22.0 && floor_us < 23.0);
	}
}

/* ---- NVRTC ---- */

#define SAMPLE_PER_VARIANT 12

/* the larger of the two N tiles stands for the smem / register extremes */
static void pick_tile(const struct kt_config *c, struct kt_gemm_tile *t)
{
	if (is_fcl(c->variant)) {	/* its 8 warps; smem grows with STAGES */
		t->bm = c->p[0];
		t->bn = 64;
		t->bk = 64;
		t->wm = 2;
		t->wn = 4;
		t->stages = c->p[6];
		return;
	}
	if (is_tcf(c->variant)) {	/* the fused kernel: FUSED_M x rank slice, RING */
		t->bm = c->p[11];
		t->bn = c->p[2];
		t->bk = 64;
		t->wm = t->bm / 16;
		t->wn = 1;
		t->stages = c->p[12];
		t->ws = 1;
		t->consumers = t->bm / 64;
		return;
	}
	t->bm = c->p[0];
	t->bn = c->p[1] > c->p[2] ? c->p[1] : c->p[2];
	t->bk = is_90a(c->variant) ? 64 : c->p[3];
	t->wm = is_90a(c->variant) ? c->p[0] / 16 : c->p[4];
	t->wn = is_90a(c->variant) ? 1 : c->p[5];
	t->stages = c->p[6];
	t->wgmma = is_wgmma(c->variant);
	t->ws = is_ws(c->variant);
	t->consumers = t->ws ? c->p[8] : 0;
}

static int samples_some(int v)
{
	return SAMPLE_PER_VARIANT;
}

static int samples_none(int v)
{
	return 0;
}

/* fused_cl has no config below sm_90 nor where z and w outgrow shared
 * memory (llama7b's rank); test_space pins where it has them */
static int fcl_unsupported(int v, const struct kt_shape *s)
{
	(void)s;
	return is_fcl(v);
}

static uint64_t rng_state = 0x626c617374ull;	/* fixed seed: the same sample every run */

/* Queues the configs of shape on target tname: wgmma variants on sm_90a
 * only, and there only them unless all; nsample (0 or SAMPLE_PER_VARIANT)
 * random ones per variant besides the extremes. */
static void add_shape(struct job_list *j, const char *text, const char *tname, int all,
		      int nsample)
{
	const struct job_sample js = {fam, is_90a, pick_tile,
				      nsample ? samples_some : samples_none, &rng_state,
				      fcl_unsupported};
	struct kt_shape s = ft_shape(fam, text);
	struct kt_target t = ft_target(tname);

	CU_ASSERT(nsample == 0 || nsample == SAMPLE_PER_VARIANT);
	job_add_shape(j, &js, &s, &t, all);
}

/* One plan per shape for arch, on the default config's tiles with the
 * given variant (the mixers' variants share their parameters). */
static void add_plans(struct job_list *j, const char *tname, const char *const *shapes, size_t n,
		      const char *variant, const char *what)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct kt_shape s = ft_shape(fam, shapes[i]);
		struct kt_target t = ft_target(tname);
		struct kt_config c;
		char why[200];

		int k;

		CU_ASSERT_EQUAL_FATAL(fam->default_config(fam, &s, &t, &c), 0);
		c.variant = kt_variant_index(fam, variant);
		/* the plain mixer on every target (sm_90's decode default
		 * takes PDL 1; the sample and tcmix_ws compile that one) */
		for (k = 0; k < fam->nparams; k++)
			if (strcmp(fam->params[k].name, "PDL") == 0)
				c.p[k] = 0;
		CU_ASSERT_EQUAL_FATAL(fam->check(fam, &s, &c, &t, why, sizeof(why)), 0);
		job_add_plan(j, fam, &s, &c, &t, what);
	}
}

/* The CUDA-core mixer of every register-cache width (MIX_B 1, 16, 20, 40,
 * 72, 256) and the tensor-core one at b = 1, 6 (gpt2s), 9 (dit_xl), 16. */
static void add_mixers(struct job_list *j, const char *tname)
{
	static const char *const cuda[] = {
		"tokens=64,in=64,out=64,blocks=1,rank=64",
		"tokens=64,in=256,out=256,blocks=16,rank=64",
		"tokens=64,in=320,out=320,blocks=20,rank=64",
		"tokens=64,in=640,out=640,blocks=40,rank=64",
		"tokens=64,in=1152,out=1152,blocks=72,rank=64",
		"tokens=64,in=2048,out=2048,blocks=256,rank=64",
	};
	static const char *const tc[] = {
		"tokens=64,in=64,out=64,blocks=1,rank=64",
		"tokens=64,in=384,out=384,blocks=6,rank=192",
		"tokens=64,in=576,out=576,blocks=9,rank=72",
		"tokens=64,in=1024,out=1024,blocks=16,rank=64",
	};

	add_plans(j, tname, cuda, sizeof(cuda) / sizeof(cuda[0]), "naive", "mixer");
	add_plans(j, tname, tc, sizeof(tc) / sizeof(tc[0]), "tcmix", "tc mixer");
}

static void test_compile(void)
{
	int everything = kt_test_env_on("KTUNE_COMPILE_ALL");
	const char *targets[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	struct job_list j;
	size_t t, i;
	int k, blast_seen = 0, mixers = 0, fused = 0, tc = 0, tc_pdl = 0, fcl = 0, s1tc = 0;

	memset(&j, 0, sizeof(j));
	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
		if (everything) {
			for (i = 0; i < sizeof(suite_shapes) / sizeof(suite_shapes[0]); i++)
				add_shape(&j, suite_shapes[i], targets[t], 1, 0);
		} else {
			add_shape(&j, suite_shapes[0], targets[t], 0, SAMPLE_PER_VARIANT);
			add_shape(&j, suite_shapes[2], targets[t], 0, 0);
		}
		add_mixers(&j, targets[t]);
	}
	job_list_compile(&j);
	for (k = 0; k < j.n; k++) {
		if (job_ok(&j, k) && strcmp(j.progs[k].tpl, "blast_fused") == 0)
			fcl++;
		if (job_ok(&j, k) && strcmp(j.progs[k].tpl, "blast_s1tc") == 0)
			s1tc++;
		if (!job_ok(&j, k) || strcmp(j.progs[k].tpl, "blast") != 0)
			continue;
		if (emu_define(&j.progs[k], "FUSED") == 1) {
			fused++;
		} else if (emu_define(&j.progs[k], "MIX_TC") == 1) {
			if (emu_define(&j.progs[k], "KT_PDL") == 1)
				tc_pdl++;
			else
				tc++;
		} else {
			blast_seen++;
			mixers += emu_define(&j.progs[k], "MIX_B") > 0;
		}
	}
	if (j.sharded) {	/* a part of the whole: its counts say nothing */
		job_list_release(&j);
		return;
	}
	/* per target: the reference (no defines) and the mixer for b = 1,
	 * 16, 20, 40, 72, 256 */
	CU_ASSERT_EQUAL(blast_seen, 4 * 7);
	CU_ASSERT_EQUAL(mixers, 4 * 6);
	/* the tensor-core mixer for b = 1, 6, 9, 16 on every target, and
	 * tcmix_ws's or a sampled PDL 1 tcmix's (programmatic dependent
	 * launch) at the suite's b = 16 */
	CU_ASSERT_EQUAL(tc, 4 * 4);
	CU_ASSERT(tc_pdl >= 1);
	/* mix_fused on sm_80, sm_86, sm_90 (and naive's targets only) */
	CU_ASSERT(fused >= 3 * 6);
	/* fused_cl at llama1b on sm_90 (its extremes; sm_90a with
	 * KTUNE_COMPILE_ALL) */
	CU_ASSERT(fcl >= 2);
	/* tcmix_fused's stage-1 + mixing kernel on sm_90a (its extremes) */
	CU_ASSERT(s1tc >= 2);
	job_list_release(&j);
}

/* ---- GPU (inactive without one) ---- */

static struct worker *gw;
static struct worker_device_info ginfo;
static char gpu_why[600];

static int gpu_init(void)
{
	return ft_gpu_start(60, &gw, &ginfo, gpu_why, sizeof(gpu_why));
}

static int gpu_cleanup(void)
{
	worker_stop(gw);
	gw = NULL;
	return 0;
}

static void test_gpu_missing(void)
{
	CU_FAIL("no usable GPU (KTUNE_REQUIRE_GPU=1 or the worker failed)");
	fprintf(stderr, "  %s\n", gpu_why);
}

static void test_gpu_variants(void)
{
	static const char *const shapes[] = {
		"tokens=200,in=512,out=768,blocks=4,rank=136",
		"tokens=77,in=768,out=3072,blocks=6,rank=192",
		"tokens=1024,in=2048,out=2048,blocks=16,rank=256",
	};
	struct kt_target t;
	char arch[16];
	size_t i;
	int v, k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	t = ft_gpu_target(&ginfo);
	kt_target_arch(&t, arch, sizeof(arch));
	printf("\n  %s (%s)", ginfo.name, arch);
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct kt_shape s = ft_shape(fam, shapes[i]);
		struct kt_err err = {0};
		struct ft_built ref;

		memset(&ref, 0, sizeof(ref));
		CU_ASSERT_EQUAL_FATAL(fam->ref_plan(fam, &s, &t, &ref.plan, &err), 0);
		CU_ASSERT_EQUAL_FATAL(ft_build(&ref, arch), 0);
		if (worker_problem(gw, fam, &s, 4321 + i, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
			fprintf(stderr, "\n  worker_problem(%s): %s\n", shapes[i], err.msg);
			CU_FAIL_FATAL("worker_problem failed");
		}
		ft_built_release(&ref);
		{
			/* what a lookup hands out for an untuned shape */
			struct kt_config dc;
			struct ft_built b;
			struct worker_result r;

			memset(&b, 0, sizeof(b));
			memset(&r, 0, sizeof(r));
			CU_ASSERT_EQUAL_FATAL(fam->default_config(fam, &s, &t, &dc), 0);
			CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &s, &dc, &t, &b.plan, &err), 0);
			CU_ASSERT_EQUAL_FATAL(ft_build(&b, arch), 0);
			if (worker_eval(gw, &dc, &b.plan, b.cubins, b.lens, 0, &r, &err) != 0)
				CU_FAIL("worker_eval of the default config returned -1");
			CU_ASSERT_EQUAL(r.status, WORKER_OK);
			CU_ASSERT(r.rel_err >= 0 && r.rel_err <= fam->tol);
			printf("\n  %s default (%s): %s rel %.2e, %.1f us", shapes[i],
			       fam->variants[dc.variant], worker_status_name(r.status), r.rel_err,
			       r.median_us);
			ft_built_release(&b);
		}
		for (v = 0; v < fam->nvariants; v++) {
			struct ft_collect x;
			const struct kt_config *cs[3];

			memset(&x, 0, sizeof(x));
			x.f = fam;
			x.s = s;
			x.t = t;
			x.variant = v;
			kt_space_foreach(fam, 0, ft_collect_one, &x);
			if (x.n == 0) {	/* fused_cl: narrow shapes; tcmix_fused: rank slices of 32 */
				CU_ASSERT((is_90a(v) && !t.arch_a) || is_fcl(v) ||
					  (is_tcf(v) && SV(s, "rank") % 32));
				continue;
			}
			cs[0] = &x.first;
			cs[1] = &x.mid;
			cs[2] = &x.last;
			for (k = 0; k < 3; k++) {
				struct ft_built b;
				struct worker_result r;
				char key[256];

				memset(&b, 0, sizeof(b));
				kt_config_key(fam, cs[k], key, sizeof(key));
				CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &s, cs[k], &t, &b.plan, &err),
						      0);
				CU_ASSERT_EQUAL_FATAL(ft_build(&b, arch), 0);
				memset(&r, 0, sizeof(r));
				if (worker_eval(gw, cs[k], &b.plan, b.cubins, b.lens, 0, &r, &err) != 0) {
					fprintf(stderr, "\n  worker_eval(%s): %s\n", key, err.msg);
					CU_FAIL("worker_eval returned -1");
				}
				CU_ASSERT_EQUAL(r.status, WORKER_OK);
				CU_ASSERT(r.rel_err >= 0 && r.rel_err <= fam->tol);
				if (r.status != WORKER_OK)
					fprintf(stderr, "\n  FAILED %s %s: %s rel %.3g: %s\n", shapes[i], key,
						worker_status_name(r.status), r.rel_err, r.message);
				else
					printf("\n  %s %s: rel %.2e, %.1f us", shapes[i], key, r.rel_err,
					       r.median_us);
				ft_built_release(&b);
			}
		}
	}
}

/* tcmix with PDL 1 (sm_90): stage 1, the first launch after the L2 flush,
 * unflagged; the mixer and stage 3 flagged; the GEMM programs carry gemm.cu's
 * PDL prologue and the mixer's KT_PDL; refused on sm_80; keys without PDL
 * mean plain launches. */
static void test_tcmix_pdl(void)
{
	struct kt_shape s = ft_shape(fam, "tokens=16,in=2048,out=2048,blocks=16,rank=256");
	struct kt_target t = ft_target("sm_90"), t80 = ft_target("sm_80");
	static const char key[] = "variant=tcmix,BLOCK_M=16,BLOCK_N=32,Z_BLOCK_N=256,BLOCK_K=32,"
				  "WARPS_M=1,WARPS_N=2,STAGES=2,GROUP_M=8";
	char buf[256], why[200];
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e = {0};
	int k, pr;

	for (k = 0; k < 2; k++) {
		snprintf(buf, sizeof(buf), "%s%s", key, k ? ",PDL=1" : "");
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(fam, buf, &c, &e), 0);
		CU_ASSERT_EQUAL_FATAL(fam->plan(fam, &s, &c, &t, &p, &e), 0);
		CU_ASSERT_EQUAL_FATAL(p.nlaunch, 3);
		CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "blast_mix_tcp");
		CU_ASSERT_EQUAL(p.launch[0].pdl, 0);
		CU_ASSERT_EQUAL(p.launch[1].pdl, k);
		CU_ASSERT_EQUAL(p.launch[2].pdl, k);
		for (pr = 0; pr < p.nprograms; pr++)
			CU_ASSERT_EQUAL(emu_define(&p.programs[pr], "KT_PDL"), k ? 1 : -1);
		CU_ASSERT_EQUAL(emu_define(&p.programs[0], "PDL_PREFETCH"), k ? 1 : -1);
		CU_ASSERT_EQUAL(fam->check(fam, &s, &c, &t80, why, sizeof(why)), k);
	}
}

int main(void)
{
	CU_pSuite s;
	int gpu;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	/* KTUNE_BLAST_GPU_ONLY=1: the GPU suite alone (a device run) */
	if (kt_test_env_on("KTUNE_BLAST_GPU_ONLY"))
		goto gpu_suite;
	s = CU_add_suite("blast (CPU)", init_blast, NULL);
	CU_add_test(s, "cpu_ref vs the materialized dense W", test_cpu_ref_vs_dense);
	CU_add_test(s, "one block is the low-rank layer with U diag(s)", test_b1_is_lowrank);
	CU_add_test(s, "outputs are O(1)", test_output_scale);
	CU_add_test(s, "the GPU reference's plan", test_ref_plan);
	CU_add_test(s, "each variant's launches, programs and buffers", test_variants_on_host);
	CU_add_test(s, "tcmix PDL: the mixer and stage 3 flagged, stage 1 not", test_tcmix_pdl);
	CU_add_test(s, "tcmix_ws L2: its defines, and a read after the discard caught", test_l2);
	CU_add_test(s, "a mixer grid that misses ranks is caught", test_mix_grid_control);
	CU_add_test(s, "the tensor-core mixer walks token tiles on few SMs", test_mix_tcp_walk);
	CU_add_test(s, "fused_cl's grids, streaming and resident", test_fcl_grid);
	CU_add_test(s, "shape parse", test_shape_parse);
	CU_add_test(s, "check rejects", test_check);
	CU_add_test(s, "the space: its size, what each variant keeps, PDL and persistent rules",
		    test_space);
	CU_add_test(s, "measured defaults", test_defaults);
	CU_add_test(s, "flops and bytes", test_models);
	s = CU_add_suite("blast (NVRTC)", init_blast, NULL);
	CU_add_test(s, "compile extremes and a sample for sm_80, sm_86, sm_90 (+ wgmma: sm_90a)",
		    test_compile);
gpu_suite:
	gpu = gpu_init();
	s = CU_add_suite("blast (GPU)", init_blast, gpu_cleanup);
	if (gpu == 0) {
		CU_add_test(s, "every variant verifies against the GPU reference", test_gpu_variants);
	} else if (kt_test_gpu_required()) {
		fprintf(stderr, "GPU worker did not start: %s\n", gpu_why);
		CU_add_test(s, "a GPU is present", test_gpu_missing);
	} else {
		printf("GPU suite skipped: %s\n", gpu_why);
		CU_add_test(s, "every variant verifies against the GPU reference", test_gpu_variants);
		CU_set_suite_active(s, CU_FALSE);
	}
	return kt_test_main();
}
