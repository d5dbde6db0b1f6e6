/*
 * test_compile.c -- NVRTC compiles the templates of the `dense` and
 * `lowrank` families (no GPU needed).
 *
 * By default, for sm_80, sm_86 and sm_90: every variant's extremes (first and last
 * valid config in space order, the largest shared memory, the most
 * accumulators, the fewest and the most threads) plus a fixed-seed random
 * sample, and the reference and planted templates; the wgmma and wgmma_ws
 * variants' for sm_90a (wgmma_ws also at a shape with masked edges, and
 * its programs must compile with no stack frame), and lowrank's unfused_ws
 * (extremes and a smaller sample, split-K z GEMMs included) at the rank
 * 1024 shape for sm_90a. With KTUNE_COMPILE_ALL=1
 * every valid config of the development-suite shapes for sm_90a, what a
 * sweep on the H200 compiles, and for sm_90, sm_80 and sm_86 (the bench
 * script runs that on the 16-core machine). Every program must compile to a
 * non-empty CUBIN whose NVRTC log does not say that ptxas serialized its
 * wgmma instructions (kt_test_wgmma_serialized; test_blast, test_monarch
 * and test_blockattn check theirs too); registers and stack frame (spills)
 * are read back from the CUBIN's .nv.info attributes and reported.
 * KTUNE_COMPILE_MATCH=TEXT
 * keeps only the programs whose label (family, config key) holds TEXT, e.g.
 * to recompile what a whole-space run reported; KTUNE_COMPILE_SHARD=K/N
 * compiles only programs K, K + N, ... of the list (test_blast and
 * test_monarch take it too), so N calls of a time-limited machine cover it;
 * KTUNE_COMPILE_ARCH=sm_90a (or sm_80, sm_86, sm_90) keeps only that
 * target's programs (test_blast and test_monarch too), e.g. the whole wgmma
 * space for the serialization check alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "kernels/gemm_plan.h"
#include "plan_emu.h"
#include "testutil.h"
#include "tuner/jit.h"

#define SAMPLE_PER_VARIANT 24
#define SAMPLE_WS 8	/* the newer ws variants: CI time */

struct item {
	char label[320];
	struct kt_program prog;
	char arch[16];
	unsigned smem;
	unsigned threads;	/* the most of any launch of it; 0: not known */
};

static struct item *items;
static int nitems, capitems;

/* Adds a program unless the same (template, defines, arch) is queued. */
static void add_program(const char *label, const struct kt_program *p, const char *arch,
			unsigned smem, unsigned threads)
{
	const char *match = getenv("KTUNE_COMPILE_MATCH");
	int i;

	if (match && *match && !strstr(label, match))
		return;
	for (i = 0; i < nitems; i++)
		if (strcmp(items[i].arch, arch) == 0 && kt_program_same(&items[i].prog, p))
			return;
	if (nitems == capitems) {
		struct item *n;

		capitems = capitems ? capitems * 2 : 256;
		n = realloc(items, sizeof(*items) * (size_t)capitems);
		CU_ASSERT_PTR_NOT_NULL_FATAL(n);
		items = n;
	}
	memset(&items[nitems], 0, sizeof(items[0]));
	snprintf(items[nitems].label, sizeof(items[0].label), "%s", label);
	items[nitems].prog = *p;
	snprintf(items[nitems].arch, sizeof(items[0].arch), "%s", arch);
	items[nitems].smem = smem;
	items[nitems].threads = threads;
	nitems++;
}

static void add_plan(const struct kt_family *f, const struct kt_shape *s,
		     const struct kt_config *c, const struct kt_target *t, const char *why)
{
	struct kt_plan plan;
	struct kt_err e = {0};
	char key[256], label[320], arch[16];
	unsigned smem = 0;
	int i;

	kt_target_arch(t, arch, sizeof(arch));
	CU_ASSERT_EQUAL_FATAL(f->plan(f, s, c, t, &plan, &e), 0);
	for (i = 0; i < plan.nlaunch; i++)
		if (plan.launch[i].smem > smem)
			smem = plan.launch[i].smem;
	kt_config_key(f, c, key, sizeof(key));
	snprintf(label, sizeof(label), "%s %s [%s]", f->name, key, why);
	for (i = 0; i < plan.nprograms; i++) {
		unsigned threads = 0;
		int l;

		for (l = 0; l < plan.nlaunch; l++) {
			const struct kt_launch *la = &plan.launch[l];
			unsigned n = la->block[0] * la->block[1] * la->block[2];

			if (la->program == i && n > threads)
				threads = n;
		}
		add_program(label, &plan.programs[i], arch, smem, threads);
	}
}

/* ---- picking configs ---- */

struct pick {
	const struct kt_family *f;
	struct kt_shape s;
	struct kt_target t;
	int variant;
	int all;
	long nvalid;
	struct kt_config first, last, max_smem, max_acc, min_thr, max_thr;
	long v_smem, v_acc, v_min_thr, v_max_thr;
	struct kt_config *valid;	/* every valid config, for the sample */
	long cap;
};

static int pick_one(const struct kt_config *c, void *arg)
{
	struct pick *x = arg;
	struct kt_gemm_tile t;
	char why[200];
	long smem, acc, thr;

	if (c->variant != x->variant || x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)))
		return 0;
	if (x->nvalid == x->cap) {
		struct kt_config *n;

		x->cap = x->cap ? x->cap * 2 : 1024;
		n = realloc(x->valid, sizeof(*n) * (size_t)x->cap);
		if (!n)
			return -1;
		x->valid = n;
	}
	x->valid[x->nvalid] = *c;
	if (x->nvalid++ == 0) {
		x->first = x->max_smem = x->max_acc = x->min_thr = x->max_thr = *c;
		x->v_smem = x->v_acc = x->v_max_thr = -1;
		x->v_min_thr = 1 << 30;
	}
	x->last = *c;
	if (kt_gemm_tile_from(x->f, c, &t) != 0)
		return 0;	/* not a GEMM tile (planted): first/last only */
	smem = kt_gemm_smem(&t);
	acc = kt_gemm_acc_regs(&t);
	thr = kt_gemm_threads(&t);
	if (smem > x->v_smem)
		x->v_smem = smem, x->max_smem = *c;
	if (acc > x->v_acc)
		x->v_acc = acc, x->max_acc = *c;
	if (thr < x->v_min_thr)
		x->v_min_thr = thr, x->min_thr = *c;
	if (thr > x->v_max_thr)
		x->v_max_thr = thr, x->max_thr = *c;
	return 0;
}

static uint64_t rng_state = 0x6b74756e65ull;	/* fixed seed: the same sample every run */

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Queues configs of family f valid for the shape on target (only variant
 * `only` when set): every one when all, else extremes and a sample. */
static void add_family(const struct kt_family *f, const char *shape_text, const char *target,
		       int all, const char *only)
{
	struct pick x;
	struct kt_err e = {0};
	int v, i;
	int ns = only && strstr(only, "_ws") && strcmp(only, "wgmma_ws") ? SAMPLE_WS
									     : SAMPLE_PER_VARIANT;

	for (v = 0; v < f->nvariants; v++) {
		if (only && strcmp(f->variants[v], only) != 0)
			continue;
		memset(&x, 0, sizeof(x));
		x.f = f;
		x.variant = v;
		CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, shape_text, &x.s, &e), 0);
		CU_ASSERT_EQUAL_FATAL(kt_target_named(target, &x.t), 0);
		CU_ASSERT_EQUAL(kt_space_foreach(f, 1, pick_one, &x), 0);
		if (x.nvalid == 0) {
			free(x.valid);
			continue;	/* e.g. fused at a rank it does not support */
		}
		if (all) {
			for (i = 0; i < x.nvalid; i++)
				add_plan(f, &x.s, &x.valid[i], &x.t, "all");
		} else {
			add_plan(f, &x.s, &x.first, &x.t, "first");
			add_plan(f, &x.s, &x.last, &x.t, "last");
			add_plan(f, &x.s, &x.max_smem, &x.t, "max smem");
			add_plan(f, &x.s, &x.max_acc, &x.t, "max acc");
			add_plan(f, &x.s, &x.min_thr, &x.t, "min threads");
			add_plan(f, &x.s, &x.max_thr, &x.t, "max threads");
			for (i = 0; i < ns && i < x.nvalid; i++)
				add_plan(f, &x.s, &x.valid[rng_next() % (uint64_t)x.nvalid], &x.t,
					 "sample");
		}
		free(x.valid);
	}
}

static void add_refs(const struct kt_family *f, const char *shape_text, const char *target)
{
	struct kt_shape s;
	struct kt_target t;
	struct kt_plan p;
	struct kt_err e = {0};
	char arch[16], label[64];
	int i;

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, shape_text, &s, &e), 0);
	CU_ASSERT_EQUAL_FATAL(kt_target_named(target, &t), 0);
	kt_target_arch(&t, arch, sizeof(arch));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &s, &t, &p, &e), 0);
	snprintf(label, sizeof(label), "%s reference", f->name);
	for (i = 0; i < p.nprograms; i++)
		add_program(label, &p.programs[i], arch, 0, 0);
}

/* ---- reading the CUBIN ---- */

/* The most registers a thread may have with `threads` in the block and the
 * whole block on one SM: 65536 / threads, allocated in steps of 8, at most
 * 255 (0 threads: unknown, 255). */
static int ws_reg_cap(unsigned threads)
{
	int cap = threads ? (int)(65536 / threads) / 8 * 8 : 255;

	return cap > 255 ? 255 : cap;
}

static void compile_and_check(void)
{
	struct jit_job *jobs = calloc((size_t)nitems, sizeof(*jobs));
	int i, ok = 0, spills = 0, reported = 0, maxregs = 0, ws_items = 0;
	int first, step, has, part = 0;
	struct kt_target t86;

	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	if (kt_target_named("sm_86", &t86) != 0)
		t86.smem_optin = 0;	/* then every sm_86 program fails below */
	CU_ASSERT_EQUAL(ws_reg_cap(384), 168);	/* producer + 2 consumers */
	CU_ASSERT_EQUAL(ws_reg_cap(256), 255);
	{
		const char *only;
		int a = kt_test_compile_arch(&only), m = 0;

		CU_ASSERT(a >= 0);
		for (i = 0; a > 0 && i < nitems; i++)	/* bad (-1): nothing stays */
			if (strcmp(items[i].arch, only) == 0)
				items[m++] = items[i];
		if (a != 0) {
			if (a > 0)
				printf("\n  KTUNE_COMPILE_ARCH=%s: %d of %d programs", only, m, nitems);
			nitems = m;
			part = 1;	/* a part of the whole, as a shard is */
		}
	}
	has = job_shard(nitems, &first, &step);
	if (has != 0)
		nitems = shard_keep(items, sizeof(items[0]), nitems, first, step);
	has |= part;
	for (i = 0; i < nitems; i++) {
		jobs[i].prog = &items[i].prog;
		jobs[i].arch = items[i].arch;
	}
	printf("\n  compiling %d programs (NVRTC %s)\n", nitems, jit_nvrtc_version());
	jobs_compile(jobs, nitems);
	for (i = 0; i < nitems; i++) {
		struct jit_result *r = &jobs[i].res;
		int regs = -1, frame = -1;

		CU_ASSERT_EQUAL(jobs[i].failed, 0);
		CU_ASSERT_EQUAL(r->ok, 1);
		CU_ASSERT(r->ok && r->cubin && r->cubin_len > 64);
		if (jobs[i].failed || !r->ok || !r->cubin) {
			fprintf(stderr, "  FAILED %s %s: %s\n%s\n", items[i].arch, items[i].label,
				jobs[i].err_msg, r->log ? r->log : "");
			continue;
		}
		ok++;
		{
			char what[400];

			snprintf(what, sizeof(what), "%s %s", items[i].arch, items[i].label);
			CU_ASSERT_FALSE(kt_test_wgmma_serialized(r->log, what));
		}
		kt_test_cubin_usage(r->cubin, r->cubin_len, &regs, &frame);
		CU_ASSERT(regs > 0 && regs <= 255);
		/* sm_86's opt-in limit (99 KiB): check() kept the rest out */
		if (strcmp(items[i].arch, "sm_86") == 0)
			CU_ASSERT(items[i].smem <= (unsigned)t86.smem_optin);
		/* the warp-specialized kernel keeps its accumulators in
		 * registers: no stack frame, and its block's share of the
		 * register file holds (__launch_bounds__ asks ptxas for it:
		 * 168 at 384 threads, 255 at 256) */
		if (strstr(items[i].label, "_ws")) {	/* wgmma_ws, unfused_ws */
			int cap = ws_reg_cap(items[i].threads);

			CU_ASSERT(items[i].threads > 0);
			CU_ASSERT_EQUAL(frame, 0);
			CU_ASSERT(regs <= cap);
			ws_items++;
			if (frame != 0 || regs > cap)
				fprintf(stderr, "  OVER the ws kernel's budget (%d regs at %u threads): "
					"%s %d regs %d B frame  %s\n", cap, items[i].threads,
					items[i].arch, regs, frame, items[i].label);
		}
		if (regs > maxregs)
			maxregs = regs;
		if (frame > 0)
			spills++;
		if (frame > 0 || (reported < 48 && strstr(items[i].label, "sample") == NULL)) {
			printf("  %-6s %4d regs %5d B frame %6u B smem  %.1f ms  %s\n", items[i].arch,
			       regs, frame, items[i].smem, r->ms, items[i].label);
			reported++;
		}
	}
	printf("  %d/%d compiled; %d with a stack frame (spills); max %d registers; %d wgmma_ws\n",
	       ok, nitems, spills, maxregs, ws_items);
	if (!getenv("KTUNE_COMPILE_ALL") && !getenv("KTUNE_COMPILE_MATCH") && has == 0)
		CU_ASSERT(ws_items >= 6);	/* the extremes at least */
	for (i = 0; i < nitems; i++)
		jit_result_release(&jobs[i].res);
	free(jobs);
}

static void test_compile_space(void)
{
	const char *all = getenv("KTUNE_COMPILE_ALL");
	const char *dshape = "tokens=1024,in=4096,out=4096";
	const char *dsmall = "tokens=16,in=4096,out=4096";
	const char *lbig = "tokens=1024,in=4096,out=4096,rank=1024";
	const char *lsmall = "tokens=1024,in=4096,out=4096,rank=256";

	nitems = 0;
	if (all && strcmp(all, "1") == 0) {
		/* What a sweep on the H200 compiles (sm_90a), and the portable
		 * spaces for sm_80 and sm_90: every valid config of the
		 * development-suite shapes and the decode shape. */
		const char *targets[] = {"sm_90a", "sm_90", "sm_80", "sm_86"};
		size_t t;

		for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
			add_family(kt_family_find("dense"), dshape, targets[t], 1, NULL);
			add_family(kt_family_find("dense"), dsmall, targets[t], 1, NULL);
			add_family(kt_family_find("lowrank"), lbig, targets[t], 1, NULL);
			add_family(kt_family_find("lowrank"), lsmall, targets[t], 1, NULL);
		}
	} else {
		const char *targets[] = {"sm_80", "sm_90"};
		size_t t;

		for (t = 0; t < sizeof(targets) / sizeof(targets[0]); t++) {
			add_family(kt_family_find("dense"), dshape, targets[t], 0, NULL);
			add_family(kt_family_find("lowrank"), lsmall, targets[t], 0, NULL);
		}
		add_family(kt_family_find("dense"), dshape, "sm_90a", 0, "wgmma");
		/* the warp-specialized TMA kernel, at the reference shape and
		 * at one with masked M and N edges */
		add_family(kt_family_find("dense"), dshape, "sm_90a", 0, "wgmma_ws");
		add_family(kt_family_find("dense"), "tokens=1000,in=4096,out=4104", "sm_90a", 0,
			   "wgmma_ws");
		/* the CTA-pair (TMA multicast) form no family plans yet:
		 * __cluster_dims__ through NVRTC */
		{
			struct kt_gemm_tile ct;
			struct kt_program p;

			memset(&ct, 0, sizeof(ct));
			memset(&p, 0, sizeof(p));
			ct.bm = 128;
			ct.bn = 256;
			ct.bk = 64;
			ct.wm = 8;
			ct.wn = 1;
			ct.stages = 4;
			ct.group_m = 8;
			ct.split_k = 1;
			ct.ws = 1;
			ct.consumers = 2;
			ct.cluster_m = 2;
			p.tpl = "gemm";
			CU_ASSERT_EQUAL(kt_gemm_defines(&ct, &p), 0);
			add_program("gemm wgmma_ws CLUSTER_M=2 128x256", &p, "sm_90a", kt_gemm_smem(&ct),
				    (unsigned)kt_gemm_threads(&ct));
		}
		/* the persistent form (-DPERSISTENT=1), which no family plans
		 * yet: staged in two passes (BLOCK_N 256) and one (128, 64),
		 * direct, one consumer, GROUP_M 1 */
		{
			static const long pt[][6] = {
				/* bm, bn, stages, consumers, epi_direct, group_m */
				{128, 256, 4, 2, 0, 8},
				{128, 256, 4, 2, 1, 8},
				{128, 128, 6, 2, 0, 1},
				{64, 256, 4, 1, 0, 8},
				{128, 64, 8, 2, 0, 8},
			};
			struct kt_target tgt;
			size_t i;

			memset(&tgt, 0, sizeof(tgt));
			CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &tgt), 0);

			for (i = 0; i < sizeof(pt) / sizeof(pt[0]); i++) {
				struct kt_gemm_tile ct;
				struct kt_program p;
				char label[80], why[200];

				memset(&ct, 0, sizeof(ct));
				memset(&p, 0, sizeof(p));
				ct.bm = pt[i][0];
				ct.bn = pt[i][1];
				ct.bk = 64;
				ct.wm = ct.bm / 16;
				ct.wn = 1;
				ct.stages = pt[i][2];
				ct.consumers = pt[i][3];
				ct.epi_direct = pt[i][4];
				ct.group_m = pt[i][5];
				ct.split_k = 1;
				ct.ws = 1;
				ct.persistent = 132;
				CU_ASSERT_EQUAL(kt_gemm_check(&ct, 1024, 1024, 256, 0, &tgt, why,
							      sizeof(why)), 0);
				p.tpl = "gemm";
				CU_ASSERT_EQUAL(kt_gemm_defines(&ct, &p), 0);
				snprintf(label, sizeof(label), "gemm wgmma_ws PERSISTENT %ldx%ld s%ld c%ld e%d",
					 ct.bm, ct.bn, ct.stages, ct.consumers, ct.epi_direct ? 0 : 1);
				add_program(label, &p, "sm_90a", kt_gemm_smem(&ct),
					    (unsigned)kt_gemm_threads(&ct));
			}
		}
		/* the ping-pong form (-DPINGPONG=1, gemm_pingpong.cuh): each
		 * consumer warpgroup's whole tile at the accumulator limit
		 * (128x128, 64x256), the smaller 64x128, an L2 hint on every
		 * copy (the TMA stores' cache_hint form) and PDL */
		{
			static const long pt[][5] = {
				/* bm, bn, stages, group_m, l2 */
				{128, 128, 4, 8, 0},
				{128, 128, 5, 1, 0},
				{64, 256, 4, 8, 0},
				{64, 128, 6, 8, 7},
			};
			struct kt_target tgt;
			size_t i;

			memset(&tgt, 0, sizeof(tgt));
			CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &tgt), 0);
			for (i = 0; i < sizeof(pt) / sizeof(pt[0]); i++) {
				struct kt_gemm_tile ct;
				struct kt_program p;
				char label[96], why[200];

				memset(&ct, 0, sizeof(ct));
				memset(&p, 0, sizeof(p));
				ct.bm = pt[i][0];
				ct.bn = pt[i][1];
				ct.bk = 64;
				ct.wm = ct.bm / 16;
				ct.wn = 1;
				ct.stages = pt[i][2];
				ct.group_m = pt[i][3];
				ct.l2 = pt[i][4];
				ct.pdl = i == 3;
				ct.split_k = 1;
				ct.ws = 1;
				ct.consumers = 2;
				ct.pingpong = 132;
				CU_ASSERT_EQUAL(kt_gemm_check(&ct, 1024, 4096, 1024, 0, &tgt, why,
							      sizeof(why)), 0);
				p.tpl = "gemm";
				CU_ASSERT_EQUAL(kt_gemm_defines(&ct, &p), 0);
				snprintf(label, sizeof(label),
					 "gemm wgmma_ws PINGPONG %ldx%ld s%ld g%ld l2 %ld pdl %ld", ct.bm,
					 ct.bn, ct.stages, ct.group_m, ct.l2, ct.pdl);
				add_program(label, &p, "sm_90a", kt_gemm_smem(&ct),
					    (unsigned)kt_gemm_threads(&ct));
			}
		}
		/* lowrank's stages on the ws kernel, where the z GEMM
		 * (1024 x 1024 x 4096) takes split-K */
		add_family(kt_family_find("lowrank"), lbig, "sm_90a", 0, "unfused_ws");
		/* decode-sized: the small tiles and split-K */
		add_family(kt_family_find("dense"), dsmall, "sm_90", 0, "mma_sync");
		/* sm_86 (A40, RTX 30xx): 99 KiB of shared memory, so a space of
		 * its own; last, so the samples above stay the ones they were */
		add_family(kt_family_find("dense"), dshape, "sm_86", 0, NULL);
		add_family(kt_family_find("lowrank"), lsmall, "sm_86", 0, NULL);
	}
	add_refs(kt_family_find("dense"), dshape, "sm_90");
	add_refs(kt_family_find("lowrank"), lsmall, "sm_90");
	add_refs(kt_family_find("dense"), dshape, "sm_80");
	add_refs(kt_family_find("dense"), dshape, "sm_86");
	compile_and_check();
	free(items);
	items = NULL;
	nitems = capitems = 0;
}

/* KTUNE_COMPILE_SHARD's parser: what splits a whole-space compile over the
 * calls of a time-limited machine */
static void test_shard_parse(void)
{
	static const char *const bad[] = {"2/2", "1/0", "0/0", "-1/2", "a/b", "1/2x", "1",
					  "1/", "/2", "0/1025", "3/99999999999999999999"};
	char why[160];
	int k, n;
	size_t i;

	CU_ASSERT_EQUAL(kt_test_shard_parse(NULL, &k, &n, why, sizeof(why)), 0);
	CU_ASSERT(k == 0 && n == 1);
	CU_ASSERT_EQUAL(kt_test_shard_parse("", &k, &n, why, sizeof(why)), 0);
	CU_ASSERT(k == 0 && n == 1);
	CU_ASSERT_EQUAL(kt_test_shard_parse("1/3", &k, &n, why, sizeof(why)), 0);
	CU_ASSERT(k == 1 && n == 3);
	CU_ASSERT_EQUAL(kt_test_shard_parse("0/1", &k, &n, why, sizeof(why)), 0);
	CU_ASSERT(k == 0 && n == 1);
	CU_ASSERT_EQUAL(kt_test_shard_parse("1023/1024", &k, &n, why, sizeof(why)), 0);
	CU_ASSERT(k == 1023 && n == 1024);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		CU_ASSERT_EQUAL(kt_test_shard_parse(bad[i], &k, &n, why, sizeof(why)), -1);
		CU_ASSERT(strstr(why, "KTUNE_COMPILE_SHARD") != NULL);
		CU_ASSERT(k == 0 && n == 1);	/* no half-parsed shard */
	}
}

/* KTUNE_COMPILE_ARCH's reader: one of the four targets, exactly, or nothing. */
static void test_compile_arch(void)
{
	static const char *const bad[] = {"sm_90A", "sm_9", "sm_90a ", "sm_100a", "all"};
	const char *old = getenv("KTUNE_COMPILE_ARCH"), *a = "x";
	char *keep = old ? strdup(old) : NULL;
	size_t i;

	CU_ASSERT_EQUAL_FATAL(setenv("KTUNE_COMPILE_ARCH", "sm_90a", 1), 0);
	CU_ASSERT_EQUAL(kt_test_compile_arch(&a), 1);
	CU_ASSERT(a && strcmp(a, "sm_90a") == 0);
	CU_ASSERT_EQUAL_FATAL(setenv("KTUNE_COMPILE_ARCH", "sm_86", 1), 0);
	CU_ASSERT_EQUAL(kt_test_compile_arch(&a), 1);
	CU_ASSERT(a && strcmp(a, "sm_86") == 0);
	CU_ASSERT_EQUAL_FATAL(setenv("KTUNE_COMPILE_ARCH", "", 1), 0);
	CU_ASSERT_EQUAL(kt_test_compile_arch(&a), 0);
	CU_ASSERT_PTR_NULL(a);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = "x";
		CU_ASSERT_EQUAL_FATAL(setenv("KTUNE_COMPILE_ARCH", bad[i], 1), 0);
		CU_ASSERT_EQUAL(kt_test_compile_arch(&a), -1);
		CU_ASSERT_PTR_NULL(a);
	}
	unsetenv("KTUNE_COMPILE_ARCH");
	CU_ASSERT_EQUAL(kt_test_compile_arch(&a), 0);
	if (keep) {
		CU_ASSERT_EQUAL(setenv("KTUNE_COMPILE_ARCH", keep, 1), 0);
		free(keep);
	}
}

static void test_suite_wanted(void)
{
	CU_ASSERT(kt_test_suite_wanted("monarch (NVRTC)", "nvrtc"));
	CU_ASSERT(kt_test_suite_wanted("blockattn_nvrtc", "NVRTC"));
	CU_ASSERT(kt_test_suite_wanted("monarch (CPU)", NULL));
	CU_ASSERT(kt_test_suite_wanted("monarch (CPU)", ""));
	CU_ASSERT(kt_test_suite_wanted("x", "x"));
	CU_ASSERT(!kt_test_suite_wanted("monarch (CPU)", "nvrtc"));
	CU_ASSERT(!kt_test_suite_wanted("nvrt", "nvrtc"));	/* longer than the name */
	CU_ASSERT(!kt_test_suite_wanted(NULL, "nvrtc"));
}

/* This program, run again under KTUNE_TEST_SUITE: a name no suite holds
 * fails with a line saying so; "nvrtc" runs the compile suite alone (its
 * list cut to the dense reference by KTUNE_COMPILE_MATCH) and not this one. */
static void test_suite_filter_run(void)
{
	char *const argv[] = {"/proc/self/exe", NULL};
	char *old_suite, *old_match, *old_skip, *out = NULL;
	int rc;

	old_skip = kt_test_env_save("KTUNE_TEST_SKIP");
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SKIP", NULL), 0);
	old_match = kt_test_env_save("KTUNE_COMPILE_MATCH");
	old_suite = kt_test_env_save("KTUNE_TEST_SUITE");
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_COMPILE_MATCH", "dense reference"), 0);
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SUITE", "no-such-suite"), 0);
	rc = kt_test_exec(argv, NULL, &out, 120);
	CU_ASSERT_EQUAL(rc, 1);
	CU_ASSERT(out && strstr(out, "KTUNE_TEST_SUITE=\"no-such-suite\": no active suite"));
	CU_ASSERT(out && !strstr(out, "compiling"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SUITE", "nvrtc"), 0);
	rc = kt_test_exec(argv, NULL, &out, 300);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT(out && strstr(out, "compiling"));
	CU_ASSERT(out && !strstr(out, "K/N parses"));
	if (rc != 0 && out)
		fprintf(stderr, "%s\n", out);
	free(out);
	out = NULL;
	/* KTUNE_TEST_SKIP (any case) leaves the compile suite out: a green run
	 * of nothing, not the missing-suite failure */
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SKIP", "no-such-suite,,(NVRTC)"), 0);
	rc = kt_test_exec(argv, NULL, &out, 120);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT(out && !strstr(out, "compiling"));
	CU_ASSERT(out && !strstr(out, "no active suite"));
	CU_ASSERT(out && strstr(out, "Inactive"));
	free(out);
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SKIP", old_skip), 0);
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_TEST_SUITE", old_suite), 0);
	CU_ASSERT_EQUAL(kt_test_env_put("KTUNE_COMPILE_MATCH", old_match), 0);
	free(old_suite);
	free(old_match);
	free(old_skip);
}

/* The check every compile suite makes on each program's NVRTC log. The
 * C7514 line is NVRTC 13.0's, from a blast_s1tc.cu form with a runtime trip
 * count and wait_group 1 (the form blast_s1tc.cu's step() says to avoid). */
static void test_wgmma_serialized(void)
{
	static const char clean[] =
		"ptxas info    : (C7519) warpgroup.arrive is injected in around line 405 by compiler "
		"to allow use of registers in GMMA in function 'fused_blast_s1tc'\n";
	static const char bad[] =
		"ptxas info    : (C7519) warpgroup.arrive is injected in around line 396 by compiler "
		"to allow use of registers in GMMA in function 'fused_blast_s1tc'\n"
		"ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are "
		"serialized due to non wgmma instructions reading accumulator registers of  a wgmma "
		"between start and end of the pipeline stage in the function 'fused_blast_s1tc'\n";

	CU_ASSERT_EQUAL(kt_test_wgmma_serialized(NULL, "none"), 0);
	CU_ASSERT_EQUAL(kt_test_wgmma_serialized("", "empty"), 0);
	CU_ASSERT_EQUAL(kt_test_wgmma_serialized(clean, "clean"), 0);
	printf("\n  (a SERIALIZED line below is expected)\n");
	CU_ASSERT_EQUAL(kt_test_wgmma_serialized(bad, "the C7514 log"), 1);
	{	/* the log's last line, without its newline */
		char tail[sizeof(bad)];
		const char *l2 = strchr(bad, '\n') + 1;

		snprintf(tail, sizeof(tail), "%.*s", (int)(strlen(l2) - 1), l2);
		CU_ASSERT_EQUAL(kt_test_wgmma_serialized(tail, "no newline"), 1);
	}
}

/* tools/kdigest next to the ktune under test (make builds both). */
static const char *kdigest_path(void)
{
	static char path[4096];
	const char *k = kt_test_ktune(), *slash = strrchr(k, '/');

	snprintf(path, sizeof(path), "%.*skdigest", slash ? (int)(slash - k + 1) : 0, k);
	return path;
}

/* What tools/same_kernels.sh relies on: one line a program, sorted, each
 * ending in a 32-digit content hash, the same on a second run; bad usage
 * and a corrupt export refused with exit 2. */
static void test_kdigest(void)
{
	char *const run[] = {(char *)kdigest_path(), "--family", "dense", "--sample", "1",
			     "--arch", "sm_80", NULL};
	char *out = NULL, *again = NULL, *p, *line, *save = NULL, prev[1024] = "";
	const char *bad[][3] = {{"--arch", "sm_99", NULL}, {"--family", "nope", NULL},
				{"--sample", "x", NULL}, {"--winners", NULL, NULL}};
	int lines = 0, ref = 0;
	size_t i;

	CU_ASSERT_EQUAL_FATAL(kt_test_exec(run, NULL, &out, 300), 0);
	CU_ASSERT_EQUAL_FATAL(kt_test_exec(run, NULL, &again, 300), 0);
	CU_ASSERT_STRING_EQUAL(out, again);
	p = strstr(out, "\ndense ");	/* stderr's progress line comes first */
	for (line = strtok_r(p ? p : out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n = strlen(line);

		if (strncmp(line, "dense ", 6) != 0)
			continue;
		lines++;
		ref += strstr(line, " sm_80 reference #0 ref ") != NULL;
		CU_ASSERT(n > 33 && line[n - 33] == ' ' && strspn(line + n - 32, "0123456789abcdef") == 32);
		CU_ASSERT(strcmp(prev, line) <= 0);
		snprintf(prev, sizeof(prev), "%s", line);
	}
	/* reference, default, and mma_sync's first, last and one sample (sm_80
	 * runs neither wgmma variant) */
	CU_ASSERT_EQUAL(lines, 5);
	CU_ASSERT_EQUAL(ref, 1);
	free(out);
	free(again);

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(kt_test_path("bad.json"), "{\"entries\": 3", 13), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *const argv[] = {(char *)kdigest_path(), (char *)bad[i][0],
				      (char *)(bad[i][1] ? bad[i][1] : kt_test_path("bad.json")), NULL};

		out = NULL;
		CU_ASSERT_EQUAL(kt_test_exec(argv, NULL, &out, 60), 2);
		CU_ASSERT(out && (strstr(out, "kdigest:") || strstr(out, "usage:")));
		free(out);
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("testutil (shards, suite filter)", NULL, NULL);
	CU_add_test(s, "KTUNE_COMPILE_SHARD K/N parses, and refuses what is not", test_shard_parse);
	CU_add_test(s, "KTUNE_COMPILE_ARCH names one target, or is refused", test_compile_arch);
	CU_add_test(s, "KTUNE_TEST_SUITE matches suite names, any case", test_suite_wanted);
	CU_add_test(s, "KTUNE_TEST_SUITE runs only its suites, and fails on a name none has; "
		    "KTUNE_TEST_SKIP leaves suites out",
		    test_suite_filter_run);
	CU_add_test(s, "a log that says ptxas serialized wgmma is caught", test_wgmma_serialized);
	s = CU_add_suite("compile (NVRTC)", NULL, NULL);
	CU_add_test(s, "NVRTC compiles dense and lowrank", test_compile_space);
	CU_add_test(s, "tools/kdigest: sorted, stable digests; bad usage refused", test_kdigest);
	return kt_test_main();
}
