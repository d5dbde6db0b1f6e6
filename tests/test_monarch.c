/*
 * test_monarch.c -- the `monarch` and `monarch_bm` families on the CPU (no
 * GPU needed). The CPU suite runs once per family.
 *
 *  - the CPU reference equals multiplication by the dense matrix W
 *    materialized in double from w1, w2 and both permutations (a W built
 *    without the middle permutation must not match: the control);
 *  - each variant's plan at small shapes: its launches, programs, defines
 *    and prep, with controls that must fail on the emulator (plan_emu.h):
 *    relayout without its transform, ws's x map without its batch
 *    layout, fused_ws with its output layout flipped; fused_ws's
 *    EPILOGUE 1 on each shape it takes, so monarch's y2 goes through both
 *    interleaving kernels (perm_x8's register transpose with its halves
 *    swapped must fail); EPILOGUE 3 (monarch) on several token tiles: one
 *    cooperative launch, the arrival counters a scratch i32 buffer per
 *    tile, the in-kernel interleave after every CTA of a tile stored y2
 *    (one that does not wait reads unwritten y2, and a swapped transpose:
 *    both must fail), and its co-residency refusal past a known SM count;
 *  - monarch_bm's y is monarch's with the columns permuted;
 *  - shape parsing, check() rejections, the space's size and how much of
 *    it each variant keeps valid, the measured defaults, flops and bytes.
 *    What every family promises (spaces, keys, every plan against cpu_ref,
 *    defaults valid) is test_conformance's;
 *  - NVRTC compiles each variant's extremes and a fixed-seed sample for
 *    sm_80, sm_86 and sm_90 (the wgmma and ws variants for sm_90a; fused_ws: every
 *    config of llama7b q/k/v/o, both families) and the reference
 *    template; KTUNE_COMPILE_ALL=1: every valid config of the reference
 *    shapes for sm_80, sm_86, sm_90 and sm_90a (what a sweep on the H200
 *    compiles, and the portable targets);
 *  - with a GPU (sm_90): every fused_ws config of both families through the
 *    worker, as a sweep runs it (verified against the GPU reference, then
 *    timed), on fused_ws's small shapes, and monarch's EPILOGUE 3 configs
 *    on its shapes of several token tiles; with KTUNE_MONARCH_BENCH=1 also
 *    at llama7b q/k/v/o N1024, with relayout_ws's measured winner and
 *    cuBLAS dense timed beside it, and EPILOGUE 1 against 3 at BLOCK_M
 *    128, RING 6 (a table; ~3 minutes of GPU). No GPU: the suite
 *    is inactive (KTUNE_REQUIRE_GPU=1: a failure). KTUNE_MONARCH_GPU_ONLY=1
 *    runs the GPU suite alone.
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

static const struct kt_family *mon;	/* the family under test */
static int blockmajor;			/* 1: monarch_bm (y block-major) */

/* reference shapes of docs/kernels.md (llama7b q/k/v/o, gate/up; gpt2s c_fc) */
static const char *const ref_shapes[] = {
	"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	"tokens=1024,in=4096,out=11008,blocks=16,rank=1536",
	"tokens=1024,in=768,out=3072,blocks=4,rank=192",
};

/* small shapes the emulator runs: b, rp, nb and mb all differ, so a
 * swapped index shows; the fourth has rank/blocks = 4 (naive only); the
 * fifth has tokens past two 64-row tiles and in/blocks = 96 (a partial
 * 64-wide k-tile) for the ws variants' 64..128-row tiles; the last two are
 * fused_ws's (rank/blocks 64 and 128, out/blocks 64 and 128, a partial
 * k-chunk and a partial token tile; in/blocks = 320 is five k-chunks, over
 * RING 4; blocks 8 for the 8-CTA cluster exchange), then two at
 * rank/blocks 48 (gpt2s c_fc's): all four slices in one w2 unit of three
 * panels with out/blocks 512 in two column tiles, and two units with
 * out/blocks 128 */
static const char *const small_shapes[] = {
	"tokens=33,in=256,out=512,blocks=8,rank=128",
	"tokens=7,in=128,out=64,blocks=2,rank=48",
	"tokens=20,in=64,out=384,blocks=4,rank=64",
	"tokens=5,in=128,out=64,blocks=8,rank=32",
	"tokens=130,in=384,out=256,blocks=4,rank=128",
	"tokens=70,in=384,out=256,blocks=4,rank=256",
	"tokens=40,in=640,out=256,blocks=2,rank=256",
	"tokens=40,in=512,out=512,blocks=8,rank=512",
	"tokens=70,in=256,out=2048,blocks=4,rank=192",
	"tokens=40,in=512,out=1024,blocks=8,rank=384",
};

/* EPILOGUE 3's (blocks % 8 == 0, rank/blocks and out/blocks 64): several
 * token tiles, the last one partial, for BLOCK_M 64 and 128; one 8-block
 * group (blocks 8) and two (blocks 16, as llama7b's) */
static const char *const e3_shapes[] = {
	"tokens=136,in=128,out=512,blocks=8,rank=512",
	"tokens=136,in=256,out=1024,blocks=16,rank=1024",
};

/* rank/blocks 16 and 32 on the GPU (w2 panels shared by 4 and 2 input
 * blocks): several token tiles, the last partial; one in/blocks of a single
 * k-chunk, one of two (the second half zero-filled) */
static const char *const small_rp_shapes[] = {
	"tokens=200,in=1024,out=2048,blocks=16,rank=256",
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

#define SV(s, name) kt_shape_get(mon, &(s), name)

static int is_relayout(int v)
{
	return strstr(mon->variants[v], "relayout") != NULL;
}

/* the whole layer in one kernel (templates/monarch_fused.cu) */
static int is_fused(int v)
{
	return strcmp(mon->variants[v], "fused_ws") == 0;
}

/* the two GEMM stages on gemm_tn_ws */
static int is_ws(int v)
{
	const char *n = mon->variants[v];
	size_t len = strlen(n);

	return len > 3 && strcmp(n + len - 3, "_ws") == 0 && !is_fused(v);
}

/* the sm_90a-only variants: the wgmma and the warp-specialized forms */
static int is_wgmma(int v)
{
	return strstr(mon->variants[v], "wgmma") != NULL || is_ws(v) || is_fused(v);
}

/* the variants whose prep re-lays w1 out into w1r */
static int has_w1r(int v)
{
	return is_relayout(v) || is_fused(v);
}

/* The shapes fused_ws's kernel takes (monarch.c's fused_check, without the
 * ring and token-tile rules): rank/blocks 16, 32, 48, 64 or 128, whole w2
 * units (lcm(rp, 64) columns: 4 blocks share one at 16 and 48, 2 at 32),
 * out/blocks 64, 128, 256 or a multiple of 64 (column tiles of the widest
 * of those dividing it), at most 176 accumulator registers. */
static int fused_supports(const struct kt_shape *s)
{
	long b = SV(*s, "blocks"), rp = SV(*s, "rank") / b, mb = SV(*s, "out") / b;
	long jp = rp == 16 || rp == 48 ? 4 : rp == 32 ? 2 : 1;
	long mbt = mb <= 256 ? mb : mb % 256 == 0 ? 256 : mb % 128 == 0 ? 128 : 64;

	return (rp == 16 || rp == 32 || rp == 48 || rp == 64 || rp == 128) && b % jp == 0 &&
	       (mbt == 64 || mbt == 128 || mbt == 256) && mb % mbt == 0 &&
	       mbt / 2 + rp / 2 + rp / 4 <= 176;
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
	p->s = ft_shape(mon, text);
	p->nb = mon->buffers(mon, &p->s, NULL, p->bufs);
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
	CU_ASSERT_EQUAL_FATAL(mon->cpu_ref(mon, &p->s, (const void *const *)p->in, outs, &e), 0);
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
	rel = emu_rel_l2(p->ref, y, (size_t)(T * m));
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


/* Runs plan (prep, then timed launches) on the problem's inputs with the
 * config's buffers (every non-input poisoned with NaN); returns y
 * (malloc'ed). */
static float *plan_run(const struct problem *p, const struct kt_config *c,
		       const struct kt_plan *plan, int round, long *oob)
{
	return emu_run(mon, &p->s, c, plan, (uint16_t *const *)p->in, p->nb, 3, round, "monarch",
		       emu_monarch, oob);
}


/* Each variant's plan at the small shapes: its launches, programs, defines
 * and prep, and the controls that must fail: ws's x map read without its
 * batch layout, fused_ws's other output layout, relayout's stage 1 on the
 * canonical w1 (each plan's math against cpu_ref: test_conformance). */
static void test_variants_on_host(void)
{
	/* sm_90a: the mma.sync and the wgmma variants */
	struct kt_target t = ft_target("sm_90a");
	int emulated[KT_MAX_VARIANTS] = {0};
	size_t i;
	int v, k;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct problem p;

		problem_init(&p, small_shapes[i], 21 + i);
		for (v = 0; v < mon->nvariants; v++) {
			struct ft_collect x;
			const struct kt_config *cs[3];

			memset(&x, 0, sizeof(x));
			x.f = mon;
			x.s = p.s;
			x.t = t;
			x.variant = v;
			kt_space_foreach(mon, 0, ft_collect_one, &x);
			if (is_relayout(v) && (SV(p.s, "rank") / SV(p.s, "blocks")) % 8) {
				CU_ASSERT_EQUAL(x.n, 0);	/* rank/blocks % 8 != 0 */
				continue;
			}
			if (is_fused(v) && !fused_supports(&p.s)) {
				CU_ASSERT_EQUAL(x.n, 0);
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
				long oob;
				float *y;
				int pr;

				CU_ASSERT_EQUAL_FATAL(mon->plan(mon, &p.s, cs[k], &t, &plan, &e),
						      0);
				if (is_fused(v)) {
					long epi = kt_config_get(mon, cs[k], "EPILOGUE");

					/* one kernel, its own template, and the prep's
					 * (monarch's EPILOGUE 1: then the row permutation) */
					CU_ASSERT_EQUAL(plan.nlaunch, blockmajor || epi != 1 ? 1 : 2);
					CU_ASSERT_EQUAL_FATAL(plan.nprograms, 2);
					CU_ASSERT_STRING_EQUAL(plan.programs[0].tpl, "monarch_fused");
					CU_ASSERT_STRING_EQUAL(plan.programs[1].tpl, "monarch");
					CU_ASSERT_STRING_EQUAL(plan.launch[0].kernel, "fused_monarch_ws");
					CU_ASSERT_EQUAL(emu_define(&plan.programs[0], "BLOCKMAJOR"),
							blockmajor || epi == 1);
					/* the register transpose where 8 blocks make a tile */
					if (plan.nlaunch == 2)
						CU_ASSERT_STRING_EQUAL(plan.launch[1].kernel,
								       SV(p.s, "blocks") % 8 ?
								       "monarch_perm_rows" :
								       "monarch_perm_x8");
					/* EPILOGUE 3's CTAs wait for each other */
					CU_ASSERT_EQUAL(plan.launch[0].cooperative, epi == 3);
				} else {
					int wg = 0, ws = 0, gl;
					/* a relayout variant's stage 1 stores g itself:
					 * no copy between the stages (its column groups) */
					int gd = is_relayout(v) &&
						 kt_config_get(mon, cs[k], "GSTORE") == 1;
					/* stage 2 storing y interleaved: no output
					 * permutation either */
					int yd = is_relayout(v) && !is_ws(v) &&
						 kt_config_get(mon, cs[k], "YSTORE") == 1;

					/* PDL 1: both GEMM programs with gemm.cu's
					 * PDL prologue, stage 2 (right after stage 1)
					 * flagged, stage 1 (first after the flush) not */
					int pd = strcmp(mon->variants[v], "relayout") == 0 &&
						 kt_config_get(mon, cs[k], "PDL") == 1;

					CU_ASSERT(!pd || gd);
					CU_ASSERT_EQUAL(emu_define(&plan.programs[0], "PDL_PREFETCH"),
							pd ? 1 : -1);
					CU_ASSERT_EQUAL(emu_define(&plan.programs[plan.nprograms - 2],
								   "KT_PDL"), pd ? 1 : -1);
					CU_ASSERT_EQUAL(plan.launch[0].pdl, 0);
					CU_ASSERT_EQUAL(plan.launch[1].pdl, pd);
					/* monarch_bm: no output permutation */
					CU_ASSERT(!blockmajor || !yd);
					CU_ASSERT_EQUAL(plan.nlaunch, (blockmajor ? 3 : 4) - gd - yd);
					CU_ASSERT_EQUAL(emu_define(&plan.programs[plan.nprograms - 2],
								   "COLSTEP"),
							yd ? SV(p.s, "blocks") : -1);
					CU_ASSERT_EQUAL(emu_define(&plan.programs[0], "COLGRP"),
							gd ? SV(p.s, "rank") / SV(p.s, "blocks") : -1);
					for (pr = 0; pr < plan.nprograms; pr++) {
						wg += emu_define(&plan.programs[pr], "WGMMA") == 1;
						ws += emu_define(&plan.programs[pr], "WS") == 1;
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
						CU_ASSERT_EQUAL(plan.launch[2 - gd].args[8].i, 1);
					}
				}
				/* nothing else waits for another CTA */
				for (pr = 0; pr < plan.nprep + plan.nlaunch; pr++)
					CU_ASSERT_EQUAL(pr < plan.nprep ? plan.prep[pr].cooperative :
							plan.launch[pr - plan.nprep].cooperative,
							pr == plan.nprep && is_fused(v) &&
							kt_config_get(mon, cs[k], "EPILOGUE") == 3);
				if (has_w1r(v)) {
					CU_ASSERT_EQUAL(plan.nprep, 1);
					CU_ASSERT(strlen(plan.transform) > 10);
				} else {
					CU_ASSERT_EQUAL(plan.nprep, 0);
					CU_ASSERT_STRING_EQUAL(plan.transform, "");
				}
				/* control (ws): x's map read as (k, rows, batch) --
				 * the kernel ignoring zA = 2 -- is wrong */
				if (is_ws(v) && SV(p.s, "blocks") > 1) {
					struct kt_plan bad = plan;
					struct kt_tmap *bm = &bad.launch[0].args[0].tmap;

					bad.launch[0].args[8].i = 1;
					bm->box[1] = bm->box[2];
					bm->box[2] = 1;
					y = plan_run(&p, cs[k], &bad, 0, &oob);
					CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
					free(y);
				}
				/* control (fused_ws): the other output layout is wrong */
				if (is_fused(v) && SV(p.s, "blocks") > 1 &&
				    emu_define(&plan.programs[0], "EPILOGUE") == 0) {
					struct kt_plan bad = plan;
					struct kt_program *fp = &bad.programs[0];
					int d;

					for (d = 0; d < fp->ndefines; d++)
						if (strncmp(fp->defines[d], "BLOCKMAJOR=", 11) == 0)
							snprintf(fp->defines[d], sizeof(fp->defines[d]),
								 "BLOCKMAJOR=%d", !blockmajor);
					y = plan_run(&p, cs[k], &bad, 0, &oob);
					CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
					free(y);
				}
				/* control: relayout's stage 1 (fused_ws: its first
				 * product) on the canonical w1 (the transform skipped) is
				 * wrong */
				if (has_w1r(v) && SV(p.s, "blocks") > 1) {
					plan.nprep = 0;
					plan.launch[0].args[1].buf = 1;	/* w1 (map or pointer) */
					y = plan_run(&p, cs[k], &plan, 0, &oob);
					CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
					free(y);
				}
			}
		}
		problem_release(&p);
	}
	for (v = 0; v < mon->nvariants; v++)
		CU_ASSERT(emulated[v] >= (is_fused(v) ? 2 : 1));
}

static int param_index(const char *name);

/* fused_ws with EPILOGUE 1 (the sweeps' winner) on each small shape it
 * takes, whatever the first / mid / last sample above picked: monarch's
 * y2 then goes through monarch_perm_x8 (blocks % 8 == 0) or
 * monarch_perm_rows; the transpose with its halves swapped must fail. */
static void test_fused_epilogue1_on_host(void)
{
	struct kt_target t = ft_target("sm_90a");
	size_t i;
	int x8 = 0, rows = 0;

	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++) {
		struct problem p;
		struct kt_config c;
		struct kt_plan plan;
		struct kt_err e = {0};
		char why[200];
		float *y;
		long oob, b;
		int round;

		problem_init(&p, small_shapes[i], 41 + i);
		b = SV(p.s, "blocks");
		if (ft_first_config(mon, &p.s, &t, kt_variant_index(mon, "fused_ws"), &c)) {
			problem_release(&p);
			continue;
		}
		c.p[param_index("BLOCK_M")] = 64;
		c.p[param_index("RING")] = 6;
		c.p[param_index("EPILOGUE")] = 1;
		c.p[param_index("CLUSTER_I")] = 1;
		c.p[param_index("CLUSTER_T")] = 1;
		if (!fused_supports(&p.s) || mon->check(mon, &p.s, &c, &t, why, sizeof(why))) {
			problem_release(&p);
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(mon->plan(mon, &p.s, &c, &t, &plan, &e), 0);
		CU_ASSERT_EQUAL_FATAL(plan.nlaunch, blockmajor ? 1 : 2);
		if (!blockmajor) {
			const char *k = plan.launch[1].kernel;

			CU_ASSERT_STRING_EQUAL(k, b % 8 ? "monarch_perm_rows" : "monarch_perm_x8");
			x8 += strcmp(k, "monarch_perm_x8") == 0;
			rows += strcmp(k, "monarch_perm_rows") == 0;
		}
		for (round = 0; round < 2; round++) {
			char what[120];

			y = plan_run(&p, &c, &plan, round, &oob);
			snprintf(what, sizeof(what), "fused_ws EPILOGUE=1 %s", small_shapes[i]);
			ft_check_output(y, oob, p.ref, p.bufs[3].elems, round, what);
			free(y);
		}
		if (!blockmajor && b % 8 == 0) {
			emu_monarch_x8_swap = 1;
			y = plan_run(&p, &c, &plan, 0, &oob);
			emu_monarch_x8_swap = 0;
			CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
			free(y);
		}
		problem_release(&p);
	}
	/* monarch: both interleaving kernels ran */
	CU_ASSERT(blockmajor || (x8 > 0 && rows > 0));
}

/* The ws variants with PERSISTENT 1, 2, 3 (each stage its own walk) on
 * every small shape, on a target of 3 SMs so that each CTA walks several
 * (tile, block) items: stage 1's x through the (k, batch, rows) map, g
 * stored through column groups (GSTORE 1), each a persistent grid of at
 * most 3 CTAs with the batch count as its last argument; y exact and
 * rounded. */
static void test_persistent_on_host(void)
{
	static const char *const vs[] = {"naive_ws", "relayout_ws"};
	struct kt_target t = ft_target("sm_90a");
	size_t i, v;
	int ran = 0, walked = 0;

	t.sms = 3;
	for (i = 0; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++)
		for (v = 0; v < 2; v++) {
			struct problem p;
			struct kt_config c;
			long gs, pe;

			problem_init(&p, small_shapes[i], 61 + i);
			if (ft_first_config(mon, &p.s, &t, kt_variant_index(mon, vs[v]), &c)) {
				problem_release(&p);
				continue;
			}
			for (gs = 0; gs <= (v ? 1 : 0); gs++)
				for (pe = 1; pe <= 3; pe++) {
					struct kt_plan plan;
					struct kt_err e = {0};
					char why[200], what[160];
					float *y;
					long oob;
					int l, round;

					c.p[param_index("BLOCK_M")] = 64;
					c.p[param_index("CONSUMERS")] = 1;
					c.p[param_index("BLOCK_N")] = 64;
					c.p[param_index("Z_BLOCK_N")] = 64;
					c.p[param_index("PERSISTENT")] = pe;
					if (v)
						c.p[param_index("GSTORE")] = gs;
					if (mon->check(mon, &p.s, &c, &t, why, sizeof(why)))
						continue;
					CU_ASSERT_EQUAL_FATAL(mon->plan(mon, &p.s, &c, &t, &plan, &e), 0);
					for (l = 0; l < plan.nlaunch; l++) {
						const struct kt_launch *ln = &plan.launch[l];
						const struct kt_program *pg = &plan.programs[ln->program];
						int st = strcmp(ln->kernel, "gemm_tn_ws") != 0 ? 0 :
							 l == 0 ? 1 : 2;

						if (!st)
							continue;
						/* this stage's bit of PERSISTENT: the walk,
						 * at most one CTA per SM */
						CU_ASSERT_EQUAL(emu_define(pg, "PERSISTENT"),
								pe & st ? 1 : -1);
						CU_ASSERT_EQUAL(ln->nargs, pe & st ? 11 : 10);
						if (pe & st) {
							CU_ASSERT(ln->grid[0] <= 3u);
							walked += ln->grid[0] < (unsigned)ln->args[10].i;
						}
					}
					for (round = 0; round < 2; round++) {
						y = plan_run(&p, &c, &plan, round, &oob);
						snprintf(what, sizeof(what), "%s GSTORE=%ld PERSISTENT=%ld %s",
							 vs[v], gs, pe, small_shapes[i]);
						ft_check_output(y, oob, p.ref, p.bufs[3].elems, round, what);
						free(y);
					}
					ran++;
				}
			problem_release(&p);
		}
	CU_ASSERT(ran >= 20);
	CU_ASSERT(walked > 0);	/* CTAs that ran more than one item */
}

/* fused_ws with EPILOGUE 3 (monarch: y2 stored, the token tile's CTAs
 * waited for, the interleave in the same launch) on its shapes, BLOCK_M 64
 * and 128: one cooperative launch, the arrival counters a scratch buffer
 * of one i32 per token tile, y exact and rounded; the transpose with its
 * halves swapped and an interleave that does not wait for the other CTAs
 * (it reads y2 they have not written: NaN) must fail. monarch_bm refuses
 * it. */
static void test_fused_epilogue3_on_host(void)
{
	static const long bms[] = {64, 128};
	struct kt_target t = ft_target("sm_90a");
	size_t i, k;
	int ran = 0;

	for (i = 0; i < sizeof(e3_shapes) / sizeof(e3_shapes[0]); i++)
		for (k = 0; k < sizeof(bms) / sizeof(bms[0]); k++) {
			struct problem p;
			struct kt_config c;
			struct kt_plan plan;
			struct kt_buf bufs[KT_MAX_BUFS];
			struct kt_err e = {0};
			char why[200] = "", what[160];
			long T, grid;
			float *y;
			long oob;
			int round, nb;

			problem_init(&p, e3_shapes[i], 51 + i);
			T = SV(p.s, "tokens");
			memset(&c, 0, sizeof(c));
			c.variant = kt_variant_index(mon, "fused_ws");
			c.p[param_index("BLOCK_M")] = bms[k];
			c.p[param_index("RING")] = 4;
			c.p[param_index("EPILOGUE")] = 3;
			c.p[param_index("CLUSTER_I")] = 1;
			c.p[param_index("CLUSTER_T")] = 1;
			if (blockmajor) {
				CU_ASSERT_EQUAL(mon->check(mon, &p.s, &c, &t, why, sizeof(why)), 1);
				CU_ASSERT_PTR_NOT_NULL(strstr(why, "monarch only"));
				problem_release(&p);
				continue;
			}
			CU_ASSERT_EQUAL_FATAL(mon->check(mon, &p.s, &c, &t, why, sizeof(why)), 0);
			CU_ASSERT_EQUAL_FATAL(mon->plan(mon, &p.s, &c, &t, &plan, &e), 0);
			grid = (T + bms[k] - 1) / bms[k] * SV(p.s, "blocks");
			CU_ASSERT_EQUAL(plan.nprep, 1);
			CU_ASSERT_EQUAL_FATAL(plan.nlaunch, 1);
			CU_ASSERT_EQUAL(plan.launch[0].cooperative, 1);
			CU_ASSERT_EQUAL(plan.prep[0].cooperative, 0);
			CU_ASSERT_EQUAL((long)plan.launch[0].grid[0], grid);
			nb = mon->buffers(mon, &p.s, &c, bufs);
			CU_ASSERT_EQUAL_FATAL(nb, 10);
			CU_ASSERT_STRING_EQUAL(bufs[9].name, "arrived");
			CU_ASSERT_EQUAL(bufs[9].role, KT_BUF_SCRATCH);
			CU_ASSERT_EQUAL(bufs[9].dtype, KT_I32);
			CU_ASSERT_EQUAL((long)bufs[9].elems, (T + bms[k] - 1) / bms[k]);
			CU_ASSERT_EQUAL(measure_plan_check_bufs(&plan, nb, bufs, why, sizeof(why)), 0);
			for (round = 0; round < 2; round++) {
				y = plan_run(&p, &c, &plan, round, &oob);
				snprintf(what, sizeof(what), "fused_ws EPILOGUE=3 BLOCK_M=%ld %s", bms[k],
					 e3_shapes[i]);
				ft_check_output(y, oob, p.ref, p.bufs[3].elems, round, what);
				free(y);
			}
			emu_monarch_e3_swap = 1;
			y = plan_run(&p, &c, &plan, 0, &oob);
			emu_monarch_e3_swap = 0;
			CU_ASSERT(emu_rel_l2(y, p.ref, p.bufs[3].elems) > 0.1);
			free(y);
			emu_monarch_e3_nowait = 1;
			y = plan_run(&p, &c, &plan, 0, &oob);
			emu_monarch_e3_nowait = 0;
			CU_ASSERT(emu_nonfinite(y, p.bufs[3].elems) > 0);
			free(y);
			/* the whole grid resident, one CTA per SM: refused past the
			 * SM count where it is known */
			t.sms = (int)grid;
			CU_ASSERT_EQUAL(mon->check(mon, &p.s, &c, &t, why, sizeof(why)), 0);
			t.sms = (int)grid - 1;
			CU_ASSERT_EQUAL(mon->check(mon, &p.s, &c, &t, why, sizeof(why)), 1);
			CU_ASSERT_PTR_NOT_NULL(strstr(why, "resident at once"));
			t.sms = 0;
			ran++;
			problem_release(&p);
		}
	CU_ASSERT_EQUAL(ran, blockmajor ? 0 : 4);
}

/* ---- shapes, checks, space ---- */

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
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,rank=1024", "missing key 'blocks'");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=16", "missing key 'rank'");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=16,rank=1024,heads=2",
			   "unknown key 'heads'");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=0,rank=1024", "blocks=0 out of range");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=16,rank=4", "rank=4 out of range");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=b16,rank=1024", "not an integer");
	ft_expect_shape_error(mon, "tokens=16,in=4096,out=4096,blocks=16,blocks=16,rank=1024", "given twice");
}

static void expect_reject(const char *text, const struct kt_config *c, const char *want)
{
	struct kt_shape s = ft_shape(mon, text);
	struct kt_target t = ft_target("sm_90");
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";

	CU_ASSERT_EQUAL(mon->check(mon, &s, c, &t, why, sizeof(why)), 1);
	if (!strstr(why, want))
		fprintf(stderr, "\n  '%s': why '%s' lacks '%s'\n", text, why, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	CU_ASSERT_EQUAL(mon->plan(mon, &s, c, &t, &plan, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_EQUAL(mon->ref_plan(mon, &s, &t, &plan, &e) == 0, strstr(want,
									   "rank/blocks") != NULL);
}

static void test_check(void)
{
	struct kt_target t = ft_target("sm_90");
	struct kt_shape s = ft_shape(mon, "tokens=64,in=256,out=256,blocks=4,rank=64");
	struct kt_config naive, relayout;
	char why[200];

	CU_ASSERT_EQUAL_FATAL(ft_first_config(mon, &s, &t, 0, &naive), 0);
	CU_ASSERT_EQUAL_FATAL(ft_first_config(mon, &s, &t, 1, &relayout), 0);
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
	s = ft_shape(mon, "tokens=64,in=256,out=256,blocks=8,rank=32");
	CU_ASSERT_EQUAL(mon->check(mon, &s, &naive, &t, why, sizeof(why)), 0);
	/* PDL: stage 2 must follow stage 1 directly (GSTORE 1), and
	 * griddepcontrol needs sm_90 */
	s = ft_shape(mon, "tokens=64,in=256,out=256,blocks=4,rank=64");
	{
		struct kt_config pc = relayout;
		struct kt_target t80 = ft_target("sm_80");

		pc.p[param_index("GSTORE")] = 1;
		pc.p[param_index("PDL")] = 1;
		CU_ASSERT_EQUAL(mon->check(mon, &s, &pc, &t, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(mon->check(mon, &s, &pc, &t80, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90+"));
		pc.p[param_index("GSTORE")] = 0;
		CU_ASSERT_EQUAL(mon->check(mon, &s, &pc, &t, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "PDL=1"));
	}
	/* a GEMM tile rule reaches through: warp tile 16 x 16 multiples */
	s = ft_shape(mon, "tokens=64,in=256,out=256,blocks=4,rank=64");
	naive.p[0] = 16;	/* BLOCK_M */
	naive.p[4] = 2;		/* WARPS_M */
	CU_ASSERT_EQUAL(mon->check(mon, &s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "warp tile"));
	naive.variant = 7;
	CU_ASSERT_EQUAL(mon->check(mon, &s, &naive, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "variant"));
}

/* The index of param name (a fatal assertion when the family lacks it). */
static int param_index(const char *name)
{
	int k;

	for (k = 0; k < mon->nparams; k++)
		if (strcmp(mon->params[k].name, name) == 0)
			return k;
	CU_FAIL_FATAL("no such param");
	return 0;
}

/* the SM count fused_reject's target claims (0: unknown, compile-only) */
static int reject_sms;

/* fused_ws's refusals, each with its reason, and what it accepts; cluster
 * is CLUSTER_I + 10 * CLUSTER_T (10 * 0 read as 1). */
static void fused_reject(const char *text, long bmt, long ring, long epi, long cluster,
			 const char *tname, const char *want)
{
	struct kt_shape s = ft_shape(mon, text);
	struct kt_target t = ft_target(tname);
	struct kt_config c;
	struct kt_plan plan;
	struct kt_err e = {0};
	char why[200] = "";
	int v = kt_variant_index(mon, "fused_ws");

	CU_ASSERT_FATAL(v >= 0);
	t.sms = reject_sms;
	memset(&c, 0, sizeof(c));
	c.variant = v;
	c.p[param_index("BLOCK_M")] = bmt;
	c.p[param_index("RING")] = ring;
	c.p[param_index("EPILOGUE")] = epi;
	c.p[param_index("CLUSTER_I")] = cluster % 10;
	c.p[param_index("CLUSTER_T")] = cluster / 10 ? cluster / 10 : 1;
	CU_ASSERT_EQUAL(mon->check(mon, &s, &c, &t, why, sizeof(why)), want != NULL);
	if (want && !strstr(why, want))
		fprintf(stderr, "\n  fused_ws '%s': why '%s' lacks '%s'\n", text, why, want);
	if (!want && why[0])
		fprintf(stderr, "\n  fused_ws '%s' refused: %s\n", text, why);
	CU_ASSERT(!want || strstr(why, want) != NULL);
	CU_ASSERT_EQUAL(mon->plan(mon, &s, &c, &t, &plan, &e), want ? -1 : 0);
}

static void test_fused_check(void)
{
	const char *ll = "tokens=1024,in=4096,out=4096,blocks=16,rank=1024";

	fused_reject(ll, 128, 4, 0, 1, "sm_90a", NULL);
	fused_reject(ll, 64, 6, 0, 1, "sm_90a", NULL);
	fused_reject(ll, 128, 4, 0, 1, "sm_90", "sm_90a");
	fused_reject(ll, 32, 4, 0, 1, "sm_90a", "BLOCK_M=32");
	/* rank/blocks 16 (llama1b) shares w2 panels between 4 blocks: whole
	 * groups of 4, two w2 buffers (RING <= 6); 8 and 96 (llama7b gate/up)
	 * are no wgmma N the kernel has */
	fused_reject("tokens=1024,in=2048,out=2048,blocks=16,rank=256", 128, 4, 0, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=2048,out=2048,blocks=16,rank=256", 128, 7, 1, 1, "sm_90a",
		     "two w2 buffers");
	fused_reject("tokens=1024,in=1536,out=768,blocks=6,rank=96", 128, 4, 0, 1, "sm_90a",
		     "multiple");
	fused_reject("tokens=1024,in=1024,out=1024,blocks=8,rank=256", 128, 4, 0, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=2048,out=2048,blocks=16,rank=128", 128, 4, 0, 1, "sm_90a",
		     "rank/blocks=8");
	fused_reject("tokens=1024,in=4096,out=11008,blocks=16,rank=1536", 128, 4, 0, 1, "sm_90a",
		     "rank/blocks=96");
	/* out/blocks 768 (gpt2s c_fc): three column tiles of 256, at
	 * rank/blocks 64 and at its own 48 (one w2 unit of all four slices,
	 * one buffer: RING 5 fits BLOCK_M 128, 6 does not); one CTA per
	 * output block and column tile: no clusters, no interleave */
	fused_reject("tokens=1024,in=768,out=3072,blocks=4,rank=256", 128, 4, 0, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=768,out=3072,blocks=4,rank=192", 128, 5, 1, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=768,out=3072,blocks=4,rank=192", 128, 6, 0, 1, "sm_90a",
		     "shared memory 234752 B");
	fused_reject("tokens=1024,in=768,out=3072,blocks=4,rank=192", 64, 8, 0, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=768,out=3072,blocks=4,rank=192", 64, 4, 0, 21, "sm_90a",
		     "3 column tiles of 256");
	fused_reject("tokens=1024,in=768,out=3040,blocks=4,rank=192", 64, 4, 0, 1, "sm_90a",
		     "out/blocks=760");
	/* two units of rank/blocks 48 take two buffers */
	fused_reject("tokens=1024,in=1024,out=1024,blocks=8,rank=384", 64, 7, 0, 1, "sm_90a",
		     "two w2 buffers");
	fused_reject("tokens=1024,in=1024,out=1024,blocks=8,rank=384", 64, 6, 0, 1, "sm_90a", NULL);
	/* rank/blocks 128 with out/blocks 256: too many accumulators */
	fused_reject("tokens=1024,in=4096,out=4096,blocks=16,rank=2048", 128, 4, 0, 1, "sm_90a",
		     "accumulator registers");
	/* in/blocks 320: five k-chunks, over a ring of 4 (5 fits) */
	fused_reject("tokens=256,in=640,out=256,blocks=2,rank=256", 128, 4, 0, 1, "sm_90a", "RING=4");
	fused_reject("tokens=256,in=640,out=256,blocks=2,rank=256", 128, 5, 0, 1, "sm_90a", NULL);
	/* the staged epilogue (monarch: and the row permutation) */
	fused_reject(ll, 128, 4, 1, 1, "sm_90a", NULL);
	/* RING 8 (one w2 buffer): 230,656 B at llama7b; rank/blocks 128 with
	 * out/blocks 128 is 296,192 B */
	fused_reject(ll, 128, 8, 1, 1, "sm_90a", NULL);
	fused_reject("tokens=1024,in=4096,out=2048,blocks=16,rank=2048", 128, 8, 1, 1, "sm_90a",
		     "shared memory 296192 B");
	/* a cluster pairs output blocks: even blocks only */
	fused_reject(ll, 128, 6, 1, 2, "sm_90a", NULL);
	fused_reject(ll, 128, 6, 1, 22, "sm_90a", NULL);
	fused_reject(ll, 64, 4, 0, 21, "sm_90a", NULL);
	fused_reject(ll, 64, 4, 0, 31, "sm_90a", "CLUSTER_T=3");
	fused_reject("tokens=256,in=192,out=192,blocks=3,rank=192", 128, 4, 0, 2, "sm_90a",
		     "blocks=3 is odd");
	fused_reject("tokens=256,in=192,out=192,blocks=3,rank=192", 128, 4, 0, 1, "sm_90a", NULL);
	fused_reject(ll, 128, 4, 0, 3, "sm_90a", "CLUSTER_I=3");
	/* the cluster exchange: monarch, blocks % 8 == 0, no multicast */
	fused_reject(ll, 128, 6, 2, 1, "sm_90a", blockmajor ? "monarch only" : NULL);
	fused_reject("tokens=256,in=640,out=256,blocks=2,rank=256", 128, 5, 2, 1, "sm_90a",
		     blockmajor ? "monarch only" : "blocks=2 is not");
	fused_reject(ll, 128, 6, 2, 2, "sm_90a", blockmajor ? "monarch only" : "must be 1");
	/* the in-kernel interleave: monarch, blocks % 8 == 0, no clusters, and
	 * (where the SM count is known) every CTA resident, one per SM */
	fused_reject(ll, 128, 6, 3, 1, "sm_90a", blockmajor ? "monarch only" : NULL);
	fused_reject(ll, 64, 4, 3, 1, "sm_90a", blockmajor ? "monarch only" : NULL);
	fused_reject("tokens=256,in=640,out=256,blocks=2,rank=256", 128, 5, 3, 1, "sm_90a",
		     blockmajor ? "monarch only" : "blocks=2 is not a multiple of 8");
	fused_reject(ll, 128, 6, 3, 2, "sm_90a", blockmajor ? "monarch only" : "must be 1");
	fused_reject(ll, 128, 6, 3, 21, "sm_90a", blockmajor ? "monarch only" : "must be 1");
	reject_sms = 132;	/* the H200 */
	fused_reject(ll, 128, 6, 3, 1, "sm_90a", blockmajor ? "monarch only" : NULL);
	fused_reject(ll, 64, 6, 3, 1, "sm_90a", blockmajor ? "monarch only" : "256 CTAs");
	fused_reject("tokens=1040,in=4096,out=4096,blocks=16,rank=1024", 128, 6, 3, 1, "sm_90a",
		     blockmajor ? "monarch only" : "144 CTAs (9 token tiles x 16 blocks");
	fused_reject(ll, 128, 6, 1, 1, "sm_90a", NULL);	/* the other epilogues do not wait */
	reject_sms = 0;
	fused_reject(ll, 128, 6, 4, 1, "sm_90a", "EPILOGUE=4");
	/* a 128-token tile for 64 tokens */
	fused_reject("tokens=64,in=4096,out=4096,blocks=16,rank=1024", 128, 4, 0, 1, "sm_90a",
		     "over twice tokens");
}

struct space_ctx {
	struct kt_shape s;
	struct kt_target t;
	long valid[KT_MAX_VARIANTS];
};

static int space_one(const struct kt_config *c, void *arg)
{
	struct space_ctx *x = arg;
	char why[200] = "";

	if (mon->check(mon, &x->s, c, &x->t, why, sizeof(why)) == 0)
		x->valid[c->variant]++;
	return 0;
}

/* The space's size and, per variant at the reference shapes, how much of
 * it is valid (the space's and the plans' generic rules: test_conformance). */
static void test_space(void)
{
	const char *targets[] = {"sm_80", "sm_90", "sm_86", "sm_90a"};
	long product[KT_MAX_VARIANTS], total = kt_space_size(mon, 1);
	size_t i, t;
	int v, k;

	for (v = 0; v < mon->nvariants; v++) {
		product[v] = 1;
		for (k = 0; k < mon->nparams; k++)
			if ((mon->params[k].variants >> v) & 1u)
				product[v] *= mon->params[k].nvalues;
	}
	CU_ASSERT_EQUAL(kt_space_size(mon, 0), total);	/* nothing planted */
	/* modest: the two stages share all but their N tile (GSTORE doubles
	 * the relayout variants, YSTORE relayout and relayout_wgmma again,
	 * PDL relayout again: 33,536 before the checks, which refuse PDL 1
	 * with GSTORE 0; STAGES 6 and 8, which the checks keep to decode
	 * tiles: 55,680; PERSISTENT's four values on the ws variants: 61,440) */
	CU_ASSERT(total < 64000);
	printf("\n  monarch space %ld\n", total);
	for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++)
		for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]); i++) {
			struct space_ctx x;

			memset(&x, 0, sizeof(x));
			x.s = ft_shape(mon, ref_shapes[i]);
			x.t = ft_target(targets[t]);
			CU_ASSERT_EQUAL(kt_space_foreach(mon, 1, space_one, &x), 0);
			for (v = 0; v < mon->nvariants; v++) {
				/* useful but pruned, per variant; wgmma on sm_90a only */
				if (is_wgmma(v) && !x.t.arch_a) {
					CU_ASSERT_EQUAL(x.valid[v], 0);
					continue;
				}
				/* fused_ws: llama7b q/k/v/o only (rank/blocks 64) */
				if (is_fused(v)) {
					CU_ASSERT_EQUAL(x.valid[v] > 0, fused_supports(&x.s));
					CU_ASSERT(x.valid[v] < product[v]);
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
		x.s = ft_shape(mon, "tokens=16,in=4096,out=4096,blocks=16,rank=1024");
		x.t = ft_target("sm_90a");
		kt_space_foreach(mon, 0, space_one, &x);
		CU_ASSERT(x.valid[0] > 0 && x.valid[1] > 0);
	}
}

/* The measured defaults (that each is a valid config: test_conformance). */
static void test_defaults(void)
{
	size_t i;

	{
		/* sm_90a: fused_ws's measured winner where the shape takes it
		 * (BLOCK_M 64 for few tokens), naive on plain sm_90 */
		struct kt_target t90a = ft_target("sm_90a"), t90 = ft_target("sm_90");
		struct kt_shape ll = ft_shape(mon, ref_shapes[0]);
		struct kt_shape few = ft_shape(mon, "tokens=60,in=4096,out=4096,blocks=16,rank=1024");
		struct kt_config c;

		CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &ll, &t90a, &c), 0);
		CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "fused_ws");
		CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_M"), 128);
		CU_ASSERT_EQUAL(kt_config_get(mon, &c, "EPILOGUE"), 1);
		CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &few, &t90a, &c), 0);
		CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "fused_ws");
		CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_M"), 64);
		CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &ll, &t90, &c), 0);
		CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "naive");
	}
	{
		/* sm_90a where fused_ws refuses: relayout_ws, the winner of its
		 * whole space on the H200 at these four N1024 shapes (BLOCK_N the
		 * largest not past out/blocks, Z_BLOCK_N the largest dividing
		 * rank); BLOCK_M 64 with one consumer for 33-64 tokens of large
		 * layers (small ones take the decode tile, below); naive off
		 * sm_90 */
		/* GSTORE (stage 1 stores g itself) where rank/blocks >= 32: at 16
		 * (llama1b) its 32-byte runs gain nothing over the copy */
		static const struct {
			const char *shape;
			long bm, bn, zbn, gstore;
		} want[] = {
			{"tokens=1024,in=4096,out=11008,blocks=16,rank=1536", 128, 256, 256, 1},
			{"tokens=1024,in=11008,out=4096,blocks=16,rank=1536", 128, 256, 256, 1},
			{"tokens=1024,in=768,out=3072,blocks=4,rank=192", 128, 256, 64, 1},
			{"tokens=64,in=4096,out=11008,blocks=16,rank=1536", 64, 256, 256, 1},
		};
		struct kt_target t90a = ft_target("sm_90a"), t86 = ft_target("sm_86");
		struct kt_config c;

		for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			struct kt_shape s = ft_shape(mon, want[i].shape);

			CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t90a, &c), 0);
			if (!want[i].bm) {
				CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "naive");
				continue;
			}
			CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "relayout_ws");
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_M"), want[i].bm);
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "CONSUMERS"), want[i].bm / 64);
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_N"), want[i].bn);
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "Z_BLOCK_N"), want[i].zbn);
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "STAGES"), 4);
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "GSTORE"), want[i].gstore);
			/* both stages on the persistent walk at BLOCK_M 128 */
			CU_ASSERT_EQUAL(kt_config_get(mon, &c, "PERSISTENT"), want[i].bm == 128 ? 3 : 0);
			CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t86, &c), 0);
			CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "naive");
		}
		/* fused_ws below rank/blocks 64 (small_fused): llama1b's sweep
		 * winners, BLOCK_M 128, RING 5, EPILOGUE 3 (monarch_bm: 1)
		 * where that grid is one wave of the target's SMs, else BLOCK_M
		 * 64, RING 6, EPILOGUE 1; gpt2s's only within one wave, else
		 * relayout_ws (above: the SM count unknown) */
		{
			static const struct {
				const char *shape;
				int sms;
				long bm, ring, epi;	/* bm 0: relayout_ws */
			} sf[] = {
				{"tokens=1024,in=2048,out=2048,blocks=16,rank=256", 0, 64, 6, 1},
				{"tokens=1024,in=2048,out=2048,blocks=16,rank=256", 132, 128, 5, 3},
				{"tokens=4096,in=2048,out=2048,blocks=16,rank=256", 132, 64, 6, 1},
				{"tokens=257,in=2048,out=2048,blocks=16,rank=256", 132, 128, 5, 3},
				{"tokens=1024,in=768,out=3072,blocks=4,rank=192", 132, 128, 5, 1},
				{"tokens=4096,in=768,out=3072,blocks=4,rank=192", 132, 0, 0, 0},
			};

			for (i = 0; i < sizeof(sf) / sizeof(sf[0]); i++) {
				struct kt_shape s = ft_shape(mon, sf[i].shape);

				t90a.sms = sf[i].sms;
				CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t90a, &c), 0);
				if (!sf[i].bm) {
					CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "relayout_ws");
					continue;
				}
				CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], "fused_ws");
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_M"), sf[i].bm);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "RING"), sf[i].ring);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "EPILOGUE"),
						blockmajor ? 1 : sf[i].epi);
			}
			t90a.sms = 0;
		}
		/* decode on sm_90: relayout (naive where rank/blocks % 8) with
		 * the N16 winners' tile, stage 1 storing g itself (GSTORE 1)
		 * and stage 2 the interleaved y (YSTORE 1; monarch_bm: 0) as
		 * stage 1's programmatic dependent (PDL 1); other targets keep
		 * the GEMM list's */
		{
			/* (the last two: few tokens of small layers) */
			static const char *const dec[] = {
				"tokens=16,in=4096,out=11008,blocks=16,rank=1536",
				"tokens=16,in=2048,out=2048,blocks=16,rank=256",
				"tokens=16,in=768,out=3072,blocks=4,rank=192",
				"tokens=16,in=2048,out=2048,blocks=16,rank=32",
				"tokens=64,in=2048,out=2048,blocks=16,rank=256",
				"tokens=256,in=2048,out=2048,blocks=16,rank=256",
				"tokens=256,in=768,out=3072,blocks=4,rank=192",
			};
			struct kt_target t90 = ft_target("sm_90");

			for (i = 0; i < sizeof(dec) / sizeof(dec[0]); i++) {
				struct kt_shape s = ft_shape(mon, dec[i]);
				const char *v = i == 3 ? "naive" : "relayout";

				CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t90a, &c), 0);
				CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], v);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_M"), 16);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "Z_BLOCK_N"), 32);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "BLOCK_K"), 64);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "STAGES"), 4);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "GSTORE"), i != 3);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "YSTORE"), i != 3 && !blockmajor);
				/* stage 2 a programmatic dependent of stage 1 */
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "PDL"), i != 3);
				CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t90, &c), 0);
				CU_ASSERT_STRING_EQUAL(mon->variants[c.variant], v);
				CU_ASSERT_EQUAL_FATAL(mon->default_config(mon, &s, &t86, &c), 0);
				CU_ASSERT_EQUAL(kt_config_get(mon, &c, "Z_BLOCK_N") == 32 &&
						kt_config_get(mon, &c, "BLOCK_K") == 64 &&
						kt_config_get(mon, &c, "STAGES") == 4, 0);
			}
		}
		/* monarch_bm follows the same rule */
		{
			const struct kt_family *mbm = kt_family_find("monarch_bm");
			struct kt_shape s;

			CU_ASSERT_PTR_NOT_NULL_FATAL(mbm);
			s = ft_shape(mbm, want[0].shape);
			CU_ASSERT_EQUAL_FATAL(mbm->default_config(mbm, &s, &t90a, &c), 0);
			CU_ASSERT_STRING_EQUAL(mbm->variants[c.variant], "relayout_ws");
			/* at decode, GSTORE but not YSTORE (refused: block-major y) */
			s = ft_shape(mbm, "tokens=16,in=2048,out=2048,blocks=16,rank=256");
			CU_ASSERT_EQUAL_FATAL(mbm->default_config(mbm, &s, &t90a, &c), 0);
			CU_ASSERT_STRING_EQUAL(mbm->variants[c.variant], "relayout");
			CU_ASSERT_EQUAL(kt_config_get(mbm, &c, "GSTORE"), 1);
			CU_ASSERT_EQUAL(kt_config_get(mbm, &c, "YSTORE"), 0);
		}
	}
	{
		/* nothing to hand out for a shape no config can run */
		struct kt_shape s = ft_shape(mon, "tokens=16,in=4096,out=4096,blocks=3,rank=1024");
		struct kt_target tg = ft_target("sm_90");
		struct kt_config c;

		CU_ASSERT_EQUAL(mon->default_config(mon, &s, &tg, &c), -1);
	}
}

/* monarch's relayout variants interleave y with 16-byte loads and stores
 * (monarch_perm_x8 for blocks % 8 == 0, monarch_perm_rows where a row fits
 * shared memory); naive keeps the element-wise monarch_perm_out (the
 * textbook baseline), as does a relayout whose row does not fit. The
 * element-wise pass cost a third of relayout_ws's time at llama1b q/o and
 * llama7b gate/up (docs/families/monarch.md). */
static void test_output_perm(void)
{
	static const char *const ws = "BLOCK_M=128,BLOCK_N=128,Z_BLOCK_N=64,STAGES=4,GROUP_M=8,"
				      "CONSUMERS=2";
	static const char *const mma = "BLOCK_M=64,BLOCK_N=64,Z_BLOCK_N=64,BLOCK_K=32,WARPS_M=2,"
				       "WARPS_N=2,STAGES=3,GROUP_M=8";
	static const struct {
		const char *shape, *target, *variant, *want;
		int is_ws;
	} cases[] = {
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256", "sm_90a", "relayout_ws", "monarch_perm_x8", 1},
		{"tokens=1024,in=768,out=3072,blocks=4,rank=192", "sm_90a", "relayout_ws", "monarch_perm_rows", 1},
		{"tokens=1024,in=768,out=3072,blocks=4,rank=192", "sm_80", "relayout", "monarch_perm_rows", 0},
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256", "sm_90a", "naive_ws", "monarch_perm_out", 1},
		{"tokens=1024,in=2048,out=2048,blocks=16,rank=256", "sm_80", "naive", "monarch_perm_out", 0},
		/* a row of 2 x 32768 outputs: 128 KiB, past sm_86's shared memory */
		{"tokens=64,in=256,out=65536,blocks=2,rank=64", "sm_86", "relayout", "monarch_perm_out", 0},
	};
	const int bm = strcmp(mon->name, "monarch_bm") == 0;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kt_shape s = ft_shape(mon, cases[i].shape);
		struct kt_target t = ft_target(cases[i].target);
		struct kt_config c;
		struct kt_plan p;
		struct kt_err e = {0};
		char key[256];

		snprintf(key, sizeof(key), "variant=%s,%s", cases[i].variant, cases[i].is_ws ? ws : mma);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(mon, key, &c, &e), 0);
		if (mon->plan(mon, &s, &c, &t, &p, &e) != 0) {
			fprintf(stderr, "\n  %s on %s, %s: %s\n", cases[i].shape, cases[i].target, key, e.msg);
			CU_FAIL("plan");
			continue;
		}
		if (bm) {
			/* block-major y: stage 2 writes it, nothing to permute */
			CU_ASSERT_NOT_EQUAL(strncmp(p.launch[p.nlaunch - 1].kernel, "monarch_perm", 12), 0);
			continue;
		}
		if (strcmp(p.launch[p.nlaunch - 1].kernel, cases[i].want) != 0)
			fprintf(stderr, "\n  %s on %s, %s: last launch %s, want %s\n", cases[i].shape,
				cases[i].target, cases[i].variant, p.launch[p.nlaunch - 1].kernel,
				cases[i].want);
		CU_ASSERT_STRING_EQUAL(p.launch[p.nlaunch - 1].kernel, cases[i].want);
	}
}

/* Same FLOPs and minimum bytes as a rank-r low-rank layer (docs/kernels.md's
 * table); intermediates are not in min_bytes. */
static void test_models(void)
{
	const struct kt_family *lr = kt_family_find("lowrank");
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(lr);
	for (i = 0; i < sizeof(ref_shapes) / sizeof(ref_shapes[0]); i++) {
		struct kt_shape s = ft_shape(mon, ref_shapes[i]), ls;
		struct kt_err e = {0};
		char text[160];
		double T = SV(s, "tokens"), n = SV(s, "in"), m = SV(s, "out"), r = SV(s, "rank");

		snprintf(text, sizeof(text), "tokens=%ld,in=%ld,out=%ld,rank=%ld", SV(s, "tokens"),
			 SV(s, "in"), SV(s, "out"), SV(s, "rank"));
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lr, text, &ls, &e), 0);
		CU_ASSERT_DOUBLE_EQUAL(mon->flops(mon, &s), lr->flops(lr, &ls), 1e-3);
		CU_ASSERT_DOUBLE_EQUAL(mon->min_bytes(mon, &s), lr->min_bytes(lr, &ls), 1e-3);
		/* fewer FLOPs than the dense layer it replaces */
		CU_ASSERT(mon->flops(mon, &s) < 2 * T * n * m);
		CU_ASSERT(mon->min_bytes(mon, &s) > 2 * T * (n + m));
		(void)r;
	}
}

/* ---- NVRTC ---- */

#define SAMPLE_PER_VARIANT 24
#define SAMPLE_WS 6

/* stage 2's tile (BLOCK_N) stands for the smem / register extremes;
 * stage 1's differs only in Z_BLOCK_N, covered by first and last */
static void pick_tile(const struct kt_config *c, struct kt_gemm_tile *t)
{
	if (is_fused(c->variant)) {
		/* its ring and consumers order shared memory and threads alike */
		t->bm = c->p[0];
		t->bn = 64;
		t->bk = 64;
		t->wm = c->p[0] / 16;
		t->wn = 1;
		t->stages = kt_config_get(mon, c, "RING");
		t->ws = 1;
		t->consumers = c->p[0] / 64;
		return;
	}
	t->bm = c->p[0];
	t->bn = c->p[1] > c->p[2] ? c->p[1] : c->p[2];
	t->bk = is_wgmma(c->variant) ? 64 : c->p[3];
	t->wm = is_wgmma(c->variant) ? c->p[0] / 16 : c->p[4];
	t->wn = is_wgmma(c->variant) ? 1 : c->p[5];
	t->stages = c->p[6];
	t->wgmma = is_wgmma(c->variant) && !is_ws(c->variant);
	t->ws = is_ws(c->variant);
	t->consumers = t->ws ? c->p[8] : 0;
}

/* the ws variants: a smaller sample (CI time) */
static int pick_samples(int v)
{
	return is_ws(v) ? SAMPLE_WS : SAMPLE_PER_VARIANT;
}

static uint64_t rng_state = 0x6d6f6e61726368ull;	/* fixed seed: the same sample every run */

/* fused_ws has no config where its kernel does not fit the shape */
static int fused_unsupported(int v, const struct kt_shape *s)
{
	return is_fused(v) && !fused_supports(s);
}

/* Queues the configs of shape on target tname: wgmma variants on sm_90a
 * only, and there only them unless all. */
static void add_shape(struct job_list *j, const char *text, const char *tname, int all)
{
	const struct job_sample js = {mon, is_wgmma, pick_tile, pick_samples, &rng_state,
				      fused_unsupported};
	struct kt_shape s = ft_shape(mon, text);
	struct kt_target t = ft_target(tname);

	job_add_shape(j, &js, &s, &t, all);
}

struct fused_jobs {
	struct job_list *j;
	struct kt_shape s;
	struct kt_target t;
	int variant;
	int unclustered;	/* 1: only CLUSTER_I = CLUSTER_T = 1 */
	long n;
};

/* job_add_plan for each valid config of x->variant */
static int add_fused(const struct kt_config *c, void *arg)
{
	struct fused_jobs *x = arg;
	char why[200];

	if (c->variant != x->variant || mon->check(mon, &x->s, c, &x->t, why, sizeof(why)))
		return 0;
	if (x->unclustered &&
	    (kt_config_get(mon, c, "CLUSTER_I") > 1 || kt_config_get(mon, c, "CLUSTER_T") > 1))
		return 0;
	job_add_plan(x->j, mon, &x->s, c, &x->t, "fused_ws");
	x->n++;
	return 0;
}

/* Adds every fused_ws program of mon at shape text on sm_90a (unclustered:
 * CLUSTER_I = CLUSTER_T = 1 only) to j; returns how many configs. */
static int add_fused_at(struct job_list *j, const char *text, int unclustered)
{
	struct fused_jobs x;

	memset(&x, 0, sizeof(x));
	x.j = j;
	x.s = ft_shape(mon, text);
	x.t = ft_target("sm_90a");
	x.variant = kt_variant_index(mon, "fused_ws");
	x.unclustered = unclustered;
	CU_ASSERT_EQUAL(kt_space_foreach(mon, 0, add_fused, &x), 0);
	return x.n;
}

static void test_compile(void)
{
	int everything = kt_test_env_on("KTUNE_COMPILE_ALL");
	/* sm_86 last: the fixed-seed samples of the others stay as they were */
	const char *targets[] = {"sm_80", "sm_90", "sm_90a", "sm_86"};
	struct job_list j;
	size_t t, i;
	int k, d, monarch_seen = 0, fused_seen = 0, e3_seen = 0;

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
	/* fused_ws: every config at llama7b q/k/v/o in both families (a dozen
	 * each: monarch_bm adds its block-major direct stores) */
	{
		const struct kt_family *fams[2] = {kt_family_find("monarch"),
						    kt_family_find("monarch_bm")};
		const struct kt_family *keep = mon;
		int f;

		for (f = 0; f < 2; f++) {
			CU_ASSERT_PTR_NOT_NULL_FATAL(fams[f]);
			mon = fams[f];
			CU_ASSERT(add_fused_at(&j, ref_shapes[0], 0) >= 80);	/* 80 (monarch_bm), 90 */
			/* rank/blocks 16 (llama1b q/o: w2 panels shared by 4
			 * blocks, RING 4-6), without clusters */
			CU_ASSERT(add_fused_at(&j, "tokens=1024,in=2048,out=2048,blocks=16,rank=256", 1) >=
				  12);	/* 12 (monarch_bm), 18 */
			/* rank/blocks 48: gpt2s c_fc (one w2 unit of four slices,
			 * one buffer, three column tiles of 256) and two units
			 * (two buffers, out/blocks 128) */
			CU_ASSERT(add_fused_at(&j, ref_shapes[2], 1) >= 10);	/* 10 (monarch_bm), 14 */
			CU_ASSERT(add_fused_at(&j, "tokens=1024,in=1024,out=1024,blocks=8,rank=384", 1) >= 8);
		}
		mon = keep;
	}
	job_list_compile(&j);
	for (k = 0; k < j.n; k++) {
		monarch_seen += job_ok(&j, k) && strcmp(j.progs[k].tpl, "monarch") == 0;
		fused_seen += job_ok(&j, k) && strcmp(j.progs[k].tpl, "monarch_fused") == 0;
		for (d = 0; d < j.progs[k].ndefines; d++)
			e3_seen += job_ok(&j, k) && strcmp(j.progs[k].defines[d], "EPILOGUE=3") == 0;
	}
	if (j.sharded) {	/* a part of the whole: its counts say nothing */
		job_list_release(&j);
		return;
	}
	/* the data-movement / reference template (no defines), once per target */
	CU_ASSERT_EQUAL(monarch_seen, 4);
	/* BLOCK_M 64, 128 x RING 4 .. 8 (7, 8: W2BUF 1) x (scattered,
	 * block-major direct, block-major staged) x CLUSTER_I 1, 2 x
	 * CLUSTER_T 1, 2, and the cluster exchange (CLUSTER_I = CLUSTER_T = 1) */
	CU_ASSERT(fused_seen >= 130);
	/* the in-kernel interleave: BLOCK_M 64, 128 x RING 4 .. 8 (monarch) */
	CU_ASSERT(e3_seen >= 10);
	job_list_release(&j);
}

static void add_cpu_tests(CU_pSuite s)
{
	CU_add_test(s, "cpu_ref vs the materialized dense W", test_cpu_ref_vs_dense);
	CU_add_test(s, "outputs are O(1)", test_output_scale);
	CU_add_test(s, "each variant's plan, and the controls that must fail",
		    test_variants_on_host);
	CU_add_test(s, "ws stages on the persistent walk (PERSISTENT 1-3) on the host",
		    test_persistent_on_host);
	CU_add_test(s, "fused_ws EPILOGUE 1 (y2, then the interleaving) on the host",
		    test_fused_epilogue1_on_host);
	CU_add_test(s, "fused_ws EPILOGUE 3 (y2, the tile's CTAs waited for, the interleaving "
		    "in-kernel) on the host", test_fused_epilogue3_on_host);
	CU_add_test(s, "shape parse", test_shape_parse);
	CU_add_test(s, "check rejects", test_check);
	CU_add_test(s, "fused_ws check rejects", test_fused_check);
	CU_add_test(s, "the space: its size, what each variant keeps", test_space);
	CU_add_test(s, "measured defaults", test_defaults);
	CU_add_test(s, "relayout's output permutation moves 16 bytes at a time", test_output_perm);
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
		CU_ASSERT_EQUAL_FATAL(f->cpu_ref(f, &p.s, (const void *const *)p.in, outs, &e), 0);
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

/* ---- GPU: fused_ws through the worker ---- */

static struct worker *gw;
static struct worker_device_info ginfo;
static char gpu_why[600];

static int gpu_init(void)
{
	return ft_gpu_start(30, &gw, &ginfo, gpu_why, sizeof(gpu_why));
}

static int gpu_cleanup(void)
{
	worker_stop(gw);
	gw = NULL;
	return 0;
}

/* Makes (mon, s) the worker's problem (its GPU reference run). */
static int gpu_problem(const struct kt_shape *s, const struct kt_target *t, const char *arch)
{
	struct kt_err err = {0};
	struct ft_built ref;
	int rc = -1;

	memset(&ref, 0, sizeof(ref));
	if (mon->ref_plan(mon, s, t, &ref.plan, &err) != 0 || ft_build(&ref, arch) != 0)
		goto out;
	if (worker_problem(gw, mon, s, 1, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
		fprintf(stderr, "\n  worker_problem: %s\n", err.msg);
		goto out;
	}
	rc = 0;
out:
	ft_built_release(&ref);
	return rc;
}

#define GPU_TIMEOUT_S 10	/* per candidate, as a sweep's default */
#define GPU_MAX_FAILS 2		/* then the rest of the shape's configs are skipped */

/* Config c verified and timed on the current problem; prints one line. */
static void gpu_eval(const struct kt_shape *s, const struct kt_config *c,
		     const struct kt_target *t, const char *arch, struct worker_result *r)
{
	struct kt_err err = {0};
	struct ft_built b;
	char key[256];

	memset(r, 0, sizeof(*r));
	r->status = (enum worker_status)-1;
	memset(&b, 0, sizeof(b));
	kt_config_key(mon, c, key, sizeof(key));
	CU_ASSERT_EQUAL_FATAL(mon->plan(mon, s, c, t, &b.plan, &err), 0);
	if (ft_build(&b, arch) == 0 &&
	    worker_eval(gw, c, &b.plan, b.cubins, b.lens, GPU_TIMEOUT_S, r, &err) != 0)
		fprintf(stderr, "\n  worker_eval(%s): %s\n", key, err.msg);
	printf("\n    %-8s %8.2f us (min %.2f, p90 %.2f, %3d reps) rel_err %.3g  %s %s",
	       worker_status_name(r->status), r->median_us, r->min_us, r->p90_us, r->reps,
	       r->rel_err, key, r->message);
	ft_built_release(&b);
}

struct fused_walk {
	struct kt_shape s;
	struct kt_target t;
	char arch[16];
	int variant;
	long only_epi;		/* >= 0: the configs of this EPILOGUE only */
	long n, ok, failed;
	double best_us;
	struct kt_config best;
	/* BLOCK_M 128, RING 6, no clusters: EPILOGUE 1 and 3 (0: not run) */
	double e1_us, e3_us;
};

static int fused_eval_one(const struct kt_config *c, void *arg)
{
	struct fused_walk *x = arg;
	struct worker_result r;
	char why[200];

	if (c->variant != x->variant || mon->check(mon, &x->s, c, &x->t, why, sizeof(why)))
		return 0;
	if (x->only_epi >= 0 && kt_config_get(mon, c, "EPILOGUE") != x->only_epi)
		return 0;
	x->n++;
	gpu_eval(&x->s, c, &x->t, x->arch, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT(r.rel_err >= 0 && r.rel_err <= mon->tol);
	if (r.status == WORKER_OK) {
		long epi = kt_config_get(mon, c, "EPILOGUE");

		x->ok++;
		if (kt_config_get(mon, c, "BLOCK_M") == 128 && kt_config_get(mon, c, "RING") == 6 &&
		    kt_config_get(mon, c, "CLUSTER_I") == 1 && kt_config_get(mon, c, "CLUSTER_T") == 1) {
			if (epi == 1)
				x->e1_us = r.median_us;
			if (epi == 3)
				x->e3_us = r.median_us;
		}
		if (x->best_us <= 0 || r.median_us < x->best_us) {
			x->best_us = r.median_us;
			x->best = *c;
		}
	} else if (++x->failed >= GPU_MAX_FAILS) {
		printf("\n    %ld failed: the shape's other configs skipped", x->failed);
		return 1;
	}
	return 0;
}

/* Every fused_ws config of shape text (only_epi >= 0: of that EPILOGUE):
 * verified (and timed); the best. */
static void fused_on_gpu(const char *text, long only_epi, struct fused_walk *x)
{
	memset(x, 0, sizeof(*x));
	x->only_epi = only_epi;
	x->s = ft_shape(mon, text);
	x->t = ft_gpu_target(&ginfo);
	kt_target_arch(&x->t, x->arch, sizeof(x->arch));
	x->variant = kt_variant_index(mon, "fused_ws");
	printf("\n  %s %s (%s)%s", mon->name, text, x->arch,
	       only_epi >= 0 ? (only_epi == 3 ? ", EPILOGUE 3 only" : ", one EPILOGUE") : "");
	CU_ASSERT_EQUAL_FATAL(gpu_problem(&x->s, &x->t, x->arch), 0);
	kt_space_foreach(mon, 0, fused_eval_one, x);
	CU_ASSERT(x->n > 0);
	CU_ASSERT_EQUAL(x->ok, x->n);
}

static void test_gpu_fused(void)
{
	static const char *const fams[] = {"monarch", "monarch_bm"};
	const char *relayout_best = "variant=relayout_ws,BLOCK_M=128,BLOCK_N=256,Z_BLOCK_N=256,"
				    "STAGES=4,GROUP_M=8,CONSUMERS=2";
	const struct kt_family *keep = mon;
	const char *b_env = getenv("KTUNE_MONARCH_BENCH");
	int bench = b_env && strcmp(b_env, "1") == 0;
	size_t f, i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	if (ginfo.sm != 90) {
		printf("\n  sm_%d: fused_ws needs sm_90a, nothing to run", ginfo.sm);
		return;
	}
	for (f = 0; f < 2; f++) {
		struct fused_walk x;
		struct worker_result rl, cb;
		struct kt_config c;
		struct kt_err err = {0};
		char key[256];

		mon = kt_family_find(fams[f]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(mon);
		blockmajor = (int)f;
		for (i = 5; i < sizeof(small_shapes) / sizeof(small_shapes[0]); i++)
			fused_on_gpu(small_shapes[i], -1, &x);
		for (i = 0; i < sizeof(small_rp_shapes) / sizeof(small_rp_shapes[0]); i++)
			fused_on_gpu(small_rp_shapes[i], -1, &x);
		/* the in-kernel interleave on several token tiles (monarch) */
		for (i = 0; !blockmajor && i < sizeof(e3_shapes) / sizeof(e3_shapes[0]); i++)
			fused_on_gpu(e3_shapes[i], 3, &x);
		if (!bench)
			continue;
		fused_on_gpu(ref_shapes[0], -1, &x);
		/* beside it: relayout_ws's winner (h200.json) and cuBLAS dense */
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(mon, relayout_best, &c, &err), 0);
		gpu_eval(&x.s, &c, &x.t, x.arch, &rl);
		CU_ASSERT_EQUAL(rl.status, WORKER_OK);
		memset(&cb, 0, sizeof(cb));
		CU_ASSERT_EQUAL(worker_baseline(gw, "cublas_dense", &cb, &err), 1);
		kt_config_key(mon, &x.best, key, sizeof(key));
		printf("\n  %s %s: fused_ws best %.2f us (%s), relayout_ws %.2f us, "
		       "cuBLAS dense %.2f us, fused / cuBLAS %.3f\n",
		       mon->name, ref_shapes[0], x.best_us, key, rl.median_us, cb.median_us,
		       cb.median_us > 0 ? x.best_us / cb.median_us : 0);
		/* the in-kernel interleave against y2 + monarch_perm_x8 (monarch) */
		printf("  %s %s, fused_ws BLOCK_M 128, RING 6, no clusters: EPILOGUE 1 %.2f us, "
		       "EPILOGUE 3 %.2f us%s, cuBLAS dense %.2f us\n",
		       mon->name, ref_shapes[0], x.e1_us, x.e3_us,
		       blockmajor ? " (monarch only)" : "", cb.median_us);
		CU_ASSERT(x.e1_us > 0 && (blockmajor || x.e3_us > 0));
	}
	mon = keep;
	blockmajor = 0;
}

static void test_gpu_missing(void)
{
	fprintf(stderr, "  no GPU: %s\n", gpu_why);
	CU_FAIL("KTUNE_REQUIRE_GPU=1 but no GPU was found");
}

static void add_gpu_suite(void)
{
	CU_pSuite s = CU_add_suite("monarch (GPU)", init_monarch, gpu_cleanup);
	int gpu = gpu_init();

	if (gpu == 0) {
		CU_add_test(s, "fused_ws: every config verified (KTUNE_MONARCH_BENCH=1: and timed "
			    "at llama7b q/k/v/o)", test_gpu_fused);
	} else if (kt_test_gpu_required() || gpu < 0) {
		fprintf(stderr, "GPU not usable: %s\n", gpu_why);
		CU_add_test(s, "a GPU is present", test_gpu_missing);
	} else {
		printf("GPU suite skipped: %s\n", gpu_why);
		CU_add_test(s, "fused_ws: every config verified", test_gpu_fused);
		CU_set_suite_active(s, CU_FALSE);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	/* KTUNE_MONARCH_GPU_ONLY=1: the GPU suite alone (a device run) */
	if (kt_test_env_on("KTUNE_MONARCH_GPU_ONLY")) {
		add_gpu_suite();
		return kt_test_main();
	}
	s = CU_add_suite("monarch (CPU)", init_monarch, NULL);
	add_cpu_tests(s);
	s = CU_add_suite("monarch_bm (CPU)", init_monarch_bm, NULL);
	add_cpu_tests(s);
	CU_add_test(s, "block-major y is the interleaved y, columns permuted", test_bm_is_permuted);
	s = CU_add_suite("monarch (NVRTC)", init_monarch, NULL);
	CU_add_test(s, "compile extremes and a sample for sm_80, sm_86, sm_90 (+ wgmma, ws: sm_90a)",
		    test_compile);
	add_gpu_suite();
	return kt_test_main();
}
