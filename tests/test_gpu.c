/*
 * test_gpu.c -- the worker on a real GPU: device info, the selftest family's
 * ok / wrong / fault / hang / launch_error kernels (the worker goes on after
 * each), inputs and verification checked against the CPU, TMA tensor-map
 * arguments (KT_ARG_TMAP: a TMA copy kernel verified element for element),
 * verification on the GPU (the compare kernel) against verification on the
 * host, and the cuBLAS baseline.
 *
 * Without a GPU the GPU suite is made inactive with the reason printed;
 * with KTUNE_REQUIRE_GPU=1 a missing GPU is a failure. The NVRTC suite
 * (the selftest, TMA and compare templates compile) runs everywhere. A
 * failed GPU check prints a line starting with FAILED: saying which.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/family.h"
#include "../tuner/jit.h"
#include "../tuner/worker.h"
#include "../tuner/measure.h"	/* measure_buffer_seed */
#include "../tuner/sweep.h"
#include "../db/store.h"
#include "famtest.h"
#include "testutil.h"

#define SELFTEST_N ((1L << 20) + 17)	/* odd: the tail must be masked */
#define SEED 1234

static struct worker *gw;		/* the GPU worker, for the GPU suite */
static struct worker_device_info ginfo;
static char gpu_why[600];

static const char *worker_exe(void)
{
	const char *e = getenv("KTUNE_WORKER_BIN");

	return e && *e ? e : kt_test_ktune();
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct tma_case {
	int rank, box_w, box_h, swizzle;	/* the map */
	long width, rows, planes;		/* x viewed as [planes][rows][width] */
	int kernel_swizzle;			/* what the kernel undoes */
};

static void target_of(const struct worker_device_info *info, struct kt_target *t)
{
	memset(t, 0, sizeof(*t));
	t->sm = info->sm;
	t->arch_a = 0;
	t->smem_optin = info->smem_optin;
	t->max_threads = info->max_threads;
	t->sms = info->sms;
	t->l2_bytes = info->l2_bytes;
}

static struct kt_config cfg(const char *variant, long unroll)
{
	struct kt_config c;

	memset(&c, 0, sizeof(c));
	c.variant = kt_variant_index(kt_family_find("selftest"), variant);
	c.p[0] = unroll;
	return c;
}

/* ---- everywhere: the selftest templates compile ---- */

static void test_selftest_compiles(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { 1000 } };
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct ft_built b;
	struct kt_config c = cfg("ok", 2);
	char arch[16];

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &tgt), 0);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL(ft_build(&b, arch), 0);
	CU_ASSERT_TRUE(b.lens[0] > 0);
	ft_built_release(&b);
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &s, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL(ft_build(&b, arch), 0);
	CU_ASSERT_TRUE(b.lens[0] > 0);
	ft_built_release(&b);
}

static void tma_plan(const struct tma_case *tc, struct kt_plan *p);

/* The planted kernels compile, and compile_error's program does not, with
 * its planted message in the log. */
static void test_planted_compile(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	static const char *const ok[] = { "sparse_wrong", "oob_write", "smem_excess" };
	struct kt_shape s = { { 1000 } };
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct kt_config c;
	struct kt_plan p;
	struct jit_result jr;
	char arch[16];
	size_t i;

	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &tgt), 0);
	kt_target_arch(&tgt, arch, sizeof(arch));
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct ft_built b;

		c = cfg(ok[i], 1);
		memset(&b, 0, sizeof(b));
		CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &tgt, &b.plan, &err), 0);
		CU_ASSERT_EQUAL(ft_build(&b, arch), 0);
		ft_built_release(&b);
	}
	c = cfg("smem_excess", 1);
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &tgt, &p, &err), 0);
	CU_ASSERT_TRUE(p.launch[0].smem > (unsigned)tgt.smem_optin);
	c = cfg("compile_error", 1);
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &tgt, &p, &err), 0);
	memset(&jr, 0, sizeof(jr));
	CU_ASSERT_EQUAL(jit_compile(&p.programs[0], arch, &jr, &err), 0);
	CU_ASSERT_FALSE(jr.ok);
	CU_ASSERT_PTR_NOT_NULL(jr.log && strstr(jr.log, "planted compile error"));
	jit_result_release(&jr);
}

/* The worker's compare kernel (templates/compare.cu) compiles for the
 * architectures it is built for at run time. */
static void test_compare_compiles(void)
{
	static const char *const archs[] = { "sm_80", "sm_90" };
	struct ft_built b;
	size_t i;

	for (i = 0; i < 2; i++) {
		memset(&b, 0, sizeof(b));
		b.plan.nprograms = 1;
		b.plan.programs[0].tpl = "compare";
		CU_ASSERT_EQUAL(ft_build(&b, archs[i]), 0);
		CU_ASSERT_TRUE(b.lens[0] > 0);
		/* The kernel the worker looks up is there (extern "C"). */
		CU_ASSERT_TRUE(b.lens[0] > 0 && memmem(b.cubins[0], b.lens[0], "kt_compare", 10));
		ft_built_release(&b);
	}
}

/* The TMA program compiles for sm_90 (TMA) and sm_80 (an empty kernel). */
static void test_tma_compiles(void)
{
	static const struct tma_case tc = { 3, 32, 8, 64, 200, 50, 100, 64 };
	static const char *const archs[] = { "sm_90", "sm_80" };
	struct ft_built b;
	size_t i;

	for (i = 0; i < 2; i++) {
		memset(&b, 0, sizeof(b));
		tma_plan(&tc, &b.plan);
		CU_ASSERT_EQUAL(ft_build(&b, archs[i]), 0);
		CU_ASSERT_TRUE(b.lens[0] > 0);
		ft_built_release(&b);
	}
}

/* ---- the GPU suite ---- */

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

static void test_device_info(void)
{
	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	printf("\n  %s %s sm_%d, %d SMs, L2 %ld KiB, smem optin %d, clocks %d/%d MHz, "
	       "driver %d, NVRTC %s ", ginfo.name, ginfo.uuid, ginfo.sm, ginfo.sms,
	       ginfo.l2_bytes >> 10, ginfo.smem_optin, ginfo.clock_mhz, ginfo.mem_clock_mhz,
	       ginfo.driver_version, ginfo.nvrtc);
	CU_ASSERT_TRUE(ginfo.name[0] != 0);
	CU_ASSERT_TRUE(ginfo.sm >= 80);
	CU_ASSERT_TRUE(ginfo.sms > 0);
	CU_ASSERT_TRUE(ginfo.l2_bytes > 0);
	CU_ASSERT_TRUE(ginfo.smem_optin >= 48 * 1024);
	CU_ASSERT_TRUE(ginfo.max_threads >= 1024);
	CU_ASSERT_TRUE(ginfo.driver_version >= 12000);
	CU_ASSERT_EQUAL(strncmp(ginfo.uuid, "GPU-", 4), 0);
	CU_ASSERT_EQUAL(strlen(ginfo.uuid), 40);
	CU_ASSERT_TRUE(ginfo.nvrtc[0] != 0);
}

/* The relative L2 error of y = 2x + 1 against 2x on the worker's inputs,
 * computed on the host from the documented seed: checks input generation
 * and the GPU reference against the CPU at once. */
static double host_wrong_rel_err(long n)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { n } };
	struct kt_err err = { 0 };
	uint16_t *x = malloc((size_t)n * 2);
	float *ref = malloc((size_t)n * sizeof(float));
	const void *in[1];
	float *out[1];
	double num = 0, den = 0;
	long i;

	if (!x || !ref) {
		free(x);
		free(ref);
		return -1;
	}
	kt_fill_bf16(x, (size_t)n, measure_buffer_seed(SEED, 0), 1.0);
	in[0] = x;
	out[0] = ref;
	if (f->cpu_ref(f, &s, in, out, &err) != 0) {
		free(x);
		free(ref);
		return -1;
	}
	for (i = 0; i < n; i++) {
		double y = kt_bf16_to_f32(kt_f32_to_bf16(2.0f * kt_bf16_to_f32(x[i]) + 1.0f));

		num += (y - ref[i]) * (y - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	free(x);
	free(ref);
	return sqrt(num / den);
}

static void eval_variant(const char *variant, long unroll, double timeout_s,
			 struct worker_result *r)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { SELFTEST_N } };
	struct kt_config c = cfg(variant, unroll);
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct ft_built b;
	char arch[16];
	double t0;

	memset(r, 0, sizeof(*r));
	r->status = (enum worker_status)-1;
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &c, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(ft_build(&b, arch), 0);
	t0 = now_s();
	if (worker_eval(gw, &c, &b.plan, b.cubins, b.lens, timeout_s, r, &err) != 0) {
		fprintf(stderr, "worker_eval(%s): %s\n", variant, err.msg);
		CU_FAIL("worker_eval returned -1");
	}
	printf("\n    %-12s UNROLL=%ld: %-12s %8.2f us (min %.2f, p90 %.2f, %d reps) "
	       "rel_err %.3g, eval %.0f ms %s", variant, unroll, worker_status_name(r->status),
	       r->median_us, r->min_us, r->p90_us, r->reps, r->rel_err, (now_s() - t0) * 1e3,
	       r->message);
	ft_built_release(&b);
}

static void test_selftest_on_gpu(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { SELFTEST_N } };
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct worker_result r;
	struct ft_built ref;
	char arch[16];
	double t0, expect;
	int restarts0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &s, &tgt, &ref.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(ft_build(&ref, arch), 0);
	if (worker_problem(gw, f, &s, SEED, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
		fprintf(stderr, "worker_problem: %s\n", err.msg);
		CU_FAIL_FATAL("worker_problem failed");
	}
	ft_built_release(&ref);
	restarts0 = worker_restarts(gw);

	eval_variant("ok", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.rel_err >= 0 && r.rel_err <= f->tol);
	CU_ASSERT_TRUE(r.median_us > 0 && r.min_us <= r.median_us && r.median_us <= r.p90_us);
	CU_ASSERT_TRUE(r.reps >= 10);
	eval_variant("ok", 2, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);

	eval_variant("wrong", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_WRONG);
	expect = host_wrong_rel_err(SELFTEST_N);
	printf("\n    wrong: worker rel_err %.6g, host %.6g", r.rel_err, expect);
	CU_ASSERT_TRUE(expect > 0 && fabs(r.rel_err - expect) <= 1e-3 * expect);

	eval_variant("launch_error", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_EQUAL(worker_restarts(gw), restarts0);

	/* Planted, near the tolerance: 88 zeroed elements of 2^20 pass a
	 * pooled relative L2 of 1e-2 and fail the local check. */
	eval_variant("sparse_wrong", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_WRONG);
	CU_ASSERT_TRUE(r.rel_err > 0 && r.rel_err < f->tol);
	CU_ASSERT_TRUE(r.nout == 1 && r.out[0].over > 0);
	if (r.status != WORKER_WRONG)
		printf("\nFAILED: the planted near-tolerance kernel passed verification");
	/* Planted: 256 elements written past y land in its guard region. */
	eval_variant("oob_write", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_WRONG);
	CU_ASSERT_EQUAL(r.guard_changed, 512);
	/* Planted: more shared memory than the device allows. */
	eval_variant("smem_excess", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_EQUAL(worker_restarts(gw), restarts0);
	/* The guards were set again: a good kernel still passes. */
	eval_variant("ok", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_EQUAL(r.guard_changed, 0);
	printf("\n    conditions: SM %d -> %d MHz, memory %d MHz, %.0f -> %.0f W, %d -> %d C",
	       r.cond.sm_mhz_before, r.cond.sm_mhz_after, r.cond.mem_mhz_after,
	       r.cond.power_w_before, r.cond.power_w_after, r.cond.temp_c_before,
	       r.cond.temp_c_after);
	/* Where a driver is, NVML is: the H200 run requires the readings. */
	if (kt_test_gpu_required()) {
		CU_ASSERT_TRUE(r.cond.sm_mhz_before > 0 && r.cond.sm_mhz_after > 0);
		CU_ASSERT_TRUE(r.cond.power_w_after > 0 && r.cond.temp_c_after > 0);
	}

	eval_variant("fault", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_FAULT);
	CU_ASSERT_EQUAL(worker_restarts(gw), restarts0 + 1);
	eval_variant("ok", 1, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);

	t0 = now_s();
	eval_variant("hang", 1, 2.0, &r);
	printf("\n    hang returned after %.2f s", now_s() - t0);
	CU_ASSERT_EQUAL(r.status, WORKER_TIMEOUT);
	CU_ASSERT_TRUE(now_s() - t0 < 30);
	CU_ASSERT_EQUAL(worker_restarts(gw), restarts0 + 2);
	eval_variant("ok", 2, 0, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.rel_err >= 0 && r.rel_err <= f->tol);

	/* Not a linear family: no cuBLAS baseline. */
	CU_ASSERT_EQUAL(worker_baseline(gw, "cublas_dense", &r, &err), 0);
}

/* Makes the selftest problem of SELFTEST_N elements current; 0 when set. */
static int selftest_problem(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { SELFTEST_N } };
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct ft_built ref;
	char arch[16];
	int rc;

	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	if (f->ref_plan(f, &s, &tgt, &ref.plan, &err) != 0 || ft_build(&ref, arch) != 0) {
		ft_built_release(&ref);
		fprintf(stderr, "selftest reference: %s\n", err.msg);
		return -1;
	}
	rc = worker_problem(gw, f, &s, SEED, &ref.plan, ref.cubins, ref.lens, &err);
	if (rc != 0)
		fprintf(stderr, "worker_problem(selftest): %s\n", err.msg);
	ft_built_release(&ref);
	return rc;
}

/* ---- TMA tensor maps (KT_ARG_TMAP) ---- */


/* selftest_tma over the selftest problem: y = 2x, the tensor part through
 * TMA boxes, the tail (n - width*rows*planes elements) by plain loads. */
static void tma_plan(const struct tma_case *tc, struct kt_plan *p)
{
	struct kt_launch *l = &p->launch[0];
	struct kt_tmap *t;
	long v[4];
	int i;

	memset(p, 0, sizeof(*p));
	p->nprograms = 1;
	p->programs[0].tpl = "selftest";
	snprintf(p->programs[0].defines[0], 48, "SELFTEST_TMA=1");
	snprintf(p->programs[0].defines[1], 48, "TMA_RANK=%d", tc->rank);
	snprintf(p->programs[0].defines[2], 48, "TMA_BOX_W=%d", tc->box_w);
	snprintf(p->programs[0].defines[3], 48, "TMA_BOX_H=%d", tc->box_h);
	snprintf(p->programs[0].defines[4], 48, "TMA_SWIZZLE=%d", tc->kernel_swizzle);
	p->programs[0].ndefines = 5;
	p->nlaunch = 1;
	snprintf(l->kernel, sizeof(l->kernel), "selftest_tma");
	l->grid[0] = (unsigned)((tc->width + tc->box_w - 1) / tc->box_w);
	l->grid[1] = (unsigned)((tc->rows + tc->box_h - 1) / tc->box_h);
	l->grid[2] = (unsigned)tc->planes;
	l->block[0] = 128;
	l->block[1] = l->block[2] = 1;
	l->nargs = 7;
	l->args[0].kind = KT_ARG_TMAP;
	l->args[0].buf = 0;
	t = &l->args[0].tmap;
	t->rank = tc->rank;
	t->dims[0] = tc->width;
	t->dims[1] = tc->rows;
	t->dims[2] = tc->planes;
	t->strides[0] = 1;
	t->strides[1] = tc->width;
	t->strides[2] = tc->width * tc->rows;
	t->box[0] = tc->box_w;
	t->box[1] = tc->box_h;
	t->box[2] = 1;
	t->swizzle = tc->swizzle;
	l->args[1].kind = KT_ARG_BUF;
	l->args[1].buf = 0;
	l->args[2].kind = KT_ARG_BUF;
	l->args[2].buf = 1;
	v[0] = SELFTEST_N;
	v[1] = tc->width;
	v[2] = tc->rows;
	v[3] = tc->planes;
	for (i = 0; i < 4; i++) {
		l->args[3 + i].kind = KT_ARG_I32;
		l->args[3 + i].i = v[i];
	}
}

static struct worker *start_gpu_worker(enum worker_compare compare, const char *name,
					const char *value);
static int set_problem(struct worker *w, const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_plan *ref_override, struct kt_err *err);

static void tma_eval_on(struct worker *w, const struct tma_case *tc, struct worker_result *r);

static void tma_eval(const struct tma_case *tc, struct worker_result *r)
{
	tma_eval_on(gw, tc, r);
}

static void tma_eval_on(struct worker *w, const struct tma_case *tc, struct worker_result *r)
{
	struct kt_config c = cfg("ok", 1);
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct ft_built b;
	char arch[16];

	memset(r, 0, sizeof(*r));
	r->status = (enum worker_status)-1;
	memset(&b, 0, sizeof(b));
	tma_plan(tc, &b.plan);
	/* The device's arch (sm_90, not sm_90a: cp.async.bulk.tensor needs no
	 * arch-specific features); below sm_90 the kernel compiles to nothing. */
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	CU_ASSERT_EQUAL_FATAL(ft_build(&b, arch), 0);
	if (worker_eval(w, &c, &b.plan, b.cubins, b.lens, 0, r, &err) != 0) {
		fprintf(stderr, "worker_eval(selftest_tma): %s\n", err.msg);
		CU_FAIL("worker_eval returned -1");
	}
	printf("\n    TMA rank %d box %dx%d swizzle %3d (kernel %3d), %ldx%ldx%ld: %-12s rel_err %.3g, "
	       "%d non-finite, %.2f us %s", tc->rank, tc->box_w, tc->box_h, tc->swizzle,
	       tc->kernel_swizzle, tc->width, tc->rows, tc->planes, worker_status_name(r->status),
	       r->rel_err, r->nonfinite, r->median_us, r->message);
	ft_built_release(&b);
}

static void test_tma_tmap(void)
{
	/* 200 is no multiple of any box width: out-of-bounds columns of the
	 * last box arrive as zeros and must not be written. */
	static const struct tma_case good[] = {
		{ 2, 64, 32, 128, 200, 5000, 1, 128 },
		{ 2, 32, 16, 0, 200, 5000, 1, 0 },
		{ 2, 16, 8, 32, 200, 5000, 1, 32 },
		{ 3, 32, 8, 64, 200, 50, 100, 64 },
	};
	struct tma_case tc;
	struct worker_result r;
	size_t i;
	int restarts0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	CU_ASSERT_EQUAL_FATAL(selftest_problem(), 0);
	restarts0 = worker_restarts(gw);
	if (ginfo.sm < 90) {
		/* No TMA: the worker must say so as a launch error. */
		tma_eval(&good[0], &r);
		printf("\n    TMA check skipped: device is sm_%d (TMA needs sm_90) ", ginfo.sm);
		CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
		CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "sm_90"));
		return;
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		tma_eval(&good[i], &r);
		if (r.status != WORKER_OK || r.rel_err != 0 || r.nonfinite != 0)
			fprintf(stderr, "\nFAILED: TMA case %zu (rank %d, swizzle %d): %s, rel_err %g, "
				"%d non-finite: %s\n", i, good[i].rank, good[i].swizzle,
				worker_status_name(r.status), r.rel_err, r.nonfinite, r.message);
		CU_ASSERT_EQUAL(r.status, WORKER_OK);
		/* 2x is exact in bf16: every element equal, none left poisoned. */
		CU_ASSERT_EQUAL(r.rel_err, 0.0);
		CU_ASSERT_EQUAL(r.nonfinite, 0);
	}
	/* The kernel reading a 128B-swizzled box as if unswizzled gets rows
	 * 1..7 of every 8 scrambled: wrong, so the cases above prove the map
	 * was swizzled as asked. */
	tc = good[0];
	tc.kernel_swizzle = 0;
	tma_eval(&tc, &r);
	if (r.status != WORKER_WRONG)
		fprintf(stderr, "\nFAILED: TMA swizzle mismatch was not caught: %s\n",
			worker_status_name(r.status));
	CU_ASSERT_EQUAL(r.status, WORKER_WRONG);
	/* A map the worker refuses before the driver sees it: box[0] of
	 * 128 bf16 = 256 bytes over the 128-byte swizzle span. */
	tc = good[0];
	tc.box_w = 128;
	tma_eval(&tc, &r);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "tensor map"));
	CU_ASSERT_EQUAL(worker_restarts(gw), restarts0);

	/* A driver without cuTensorMapEncodeTiled (a test hook hides it): a
	 * launch error that says so, not a crash. */
	{
		const struct kt_family *f = kt_family_find("selftest");
		struct kt_shape s = { { SELFTEST_N } };
		struct kt_err err = { 0 };
		struct worker *w = start_gpu_worker(WORKER_COMPARE_AUTO, "KTUNE_TEST_NO_TMAP_ENCODE",
						    "1");

		CU_ASSERT_PTR_NOT_NULL_FATAL(w);
		if (set_problem(w, f, &s, NULL, &err) != 0) {
			fprintf(stderr, "\nFAILED: selftest problem: %s\n", err.msg);
			CU_FAIL("selftest problem (no-encode worker)");
		} else {
			tma_eval_on(w, &good[0], &r);
			if (r.status != WORKER_LAUNCH_ERROR ||
			    !strstr(r.message, "no cuTensorMapEncodeTiled"))
				fprintf(stderr, "\nFAILED: missing cuTensorMapEncodeTiled: %s: %s\n",
					worker_status_name(r.status), r.message);
			CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
			CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "no cuTensorMapEncodeTiled"));
		}
		worker_stop(w);
	}
}

/* ---- verification on the GPU vs on the host ---- */

/* A CUDA worker comparing where compare says; hook=value, when hook is not
 * NULL, is a test hook (util/knobs.h) its child sees in its environment. */
static struct worker *start_gpu_worker(enum worker_compare compare, const char *hook,
				       const char *value)
{
	struct worker_opts o;
	struct worker *w = NULL;
	struct kt_err err = { 0 };
	char *saved = hook ? kt_test_env_save(hook) : NULL;

	worker_opts_default(&o);
	o.exe = worker_exe();
	o.backend = WORKER_BACKEND_CUDA;
	o.timeout_s = 60;
	o.max_reps = 10;	/* verification is what these tests are about */
	o.compare = compare;
	if (hook)
		setenv(hook, value, 1);
	if (worker_start(&o, &w, &err) != 0) {
		fprintf(stderr, "worker_start (compare %s, %s=%s): %s\n", worker_compare_name(compare),
			hook ? hook : "no hook", hook ? value : "", err.msg);
		w = NULL;
	}
	if (hook)
		kt_test_env_put(hook, saved);
	free(saved);
	return w;
}

/* Sets (f, shape) on w with the family's reference, or with ref_override. */
static int set_problem(struct worker *w, const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_plan *ref_override, struct kt_err *err)
{
	struct kt_target tgt;
	struct ft_built ref;
	char arch[16];
	int rc = -1;

	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	if (ref_override)
		ref.plan = *ref_override;
	else if (f->ref_plan(f, s, &tgt, &ref.plan, err) != 0)
		goto out;
	if (ft_build(&ref, arch) != 0) {
		kt_err_set(err, KT_ECOMPILE, "reference did not compile");
		goto out;
	}
	rc = worker_problem(w, f, s, SEED, &ref.plan, ref.cubins, ref.lens, err);
out:
	ft_built_release(&ref);
	return rc;
}

static int eval_plan(struct worker *w, const struct kt_config *c, const struct kt_plan *p,
		     struct worker_result *r)
{
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct ft_built b;
	char arch[16];
	int rc = -1;

	memset(r, 0, sizeof(*r));
	r->status = (enum worker_status)-1;
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&b, 0, sizeof(b));
	b.plan = *p;
	if (ft_build(&b, arch) == 0 &&
	    (rc = worker_eval(w, c, &b.plan, b.cubins, b.lens, 0, r, &err)) != 0)
		fprintf(stderr, "worker_eval: %s\n", err.msg);
	ft_built_release(&b);
	return rc;
}

/* Both paths must agree: status, non-finite count, and rel_err within 1e-6
 * relative. Prints both, and which check failed. */
static void expect_same(const char *what, const struct worker_result *g,
			const struct worker_result *h)
{
	double tol = 1e-6 * fmax(fabs(g->rel_err), fabs(h->rel_err));
	int same_rel = fabs(g->rel_err - h->rel_err) <= tol;

	printf("\n    %-34s gpu: %-6s rel_err %.9g, %d non-finite | host: %-6s rel_err %.9g, "
	       "%d non-finite", what, worker_status_name(g->status), g->rel_err, g->nonfinite,
	       worker_status_name(h->status), h->rel_err, h->nonfinite);
	if (g->status != h->status || g->nonfinite != h->nonfinite || !same_rel)
		fprintf(stderr, "\nFAILED: GPU and host verification disagree on %s (%s)\n", what,
			g->status != h->status ? "status" : g->nonfinite != h->nonfinite ?
			"non-finite count" : "rel_err beyond 1e-6 relative");
	CU_ASSERT_EQUAL(g->status, h->status);
	CU_ASSERT_EQUAL(g->nonfinite, h->nonfinite);
	CU_ASSERT_TRUE(same_rel);
	CU_ASSERT_TRUE(g->rel_err >= 0);
}

static void test_compare_paths(void)
{
	const struct kt_family *st = kt_family_find("selftest"), *dense = kt_family_find("dense");
	struct kt_shape s = { { SELFTEST_N } }, ds;
	struct worker *w[2];	/* [0] GPU compare, [1] host compare */
	struct worker_result r[2];
	struct kt_target tgt;
	struct kt_config c;
	struct kt_plan p;
	struct kt_err err = { 0 };
	double expect;
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	w[0] = start_gpu_worker(WORKER_COMPARE_GPU, NULL, NULL);	/* required */
	w[1] = start_gpu_worker(WORKER_COMPARE_HOST, NULL, NULL);
	if (!w[0] || !w[1]) {
		CU_FAIL("FAILED: a compare worker did not start");
		goto out;
	}
	target_of(&ginfo, &tgt);
	for (k = 0; k < 2; k++)
		if (set_problem(w[k], st, &s, NULL, &err) != 0) {
			fprintf(stderr, "FAILED: selftest problem on the %s path: %s\n",
				k ? "host" : "GPU", err.msg);
			CU_FAIL("selftest problem (KTUNE_HOST_COMPARE=0 fails when the compare "
				"kernel cannot be built)");
			goto out;
		}
	/* ok: exact; wrong: y = 2x + 1, also checked against the host's own
	 * computation from the documented seed. */
	c = cfg("ok", 2);
	CU_ASSERT_EQUAL_FATAL(st->plan(st, &s, &c, &tgt, &p, &err), 0);
	for (k = 0; k < 2; k++)
		eval_plan(w[k], &c, &p, &r[k]);
	expect_same("selftest ok", &r[0], &r[1]);
	CU_ASSERT_EQUAL(r[0].status, WORKER_OK);
	CU_ASSERT_EQUAL(r[0].rel_err, 0.0);
	c = cfg("wrong", 1);
	CU_ASSERT_EQUAL_FATAL(st->plan(st, &s, &c, &tgt, &p, &err), 0);
	for (k = 0; k < 2; k++)
		eval_plan(w[k], &c, &p, &r[k]);
	expect_same("selftest wrong", &r[0], &r[1]);
	CU_ASSERT_EQUAL(r[0].status, WORKER_WRONG);
	expect = host_wrong_rel_err(SELFTEST_N);
	CU_ASSERT_TRUE(expect > 0 && fabs(r[0].rel_err - expect) <= 1e-6 * expect);
	/* The last 1000 elements left unwritten: exactly 1000 poisoned (NaN)
	 * outputs seen by both paths. */
	c = cfg("ok", 1);
	CU_ASSERT_EQUAL_FATAL(st->plan(st, &s, &c, &tgt, &p, &err), 0);
	p.launch[0].args[2].i = SELFTEST_N - 1000;
	for (k = 0; k < 2; k++)
		eval_plan(w[k], &c, &p, &r[k]);
	expect_same("selftest ok, 1000 left unwritten", &r[0], &r[1]);
	CU_ASSERT_EQUAL(r[0].status, WORKER_WRONG);
	CU_ASSERT_EQUAL(r[0].nonfinite, 1000);

	/* A reference that leaves 5 outputs unwritten is refused (the
	 * reference's sanity check) on both paths. */
	CU_ASSERT_EQUAL_FATAL(st->ref_plan(st, &s, &tgt, &p, &err), 0);
	p.launch[0].args[2].i = SELFTEST_N - 5;
	for (k = 0; k < 2; k++) {
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(set_problem(w[k], st, &s, &p, &err), -1);
		printf("\n    %s path, reference with holes: %s", k ? "host" : "gpu ", err.msg);
		if (!strstr(err.msg, "5 non-finite"))
			fprintf(stderr, "\nFAILED: the %s path did not refuse a non-finite "
				"reference: %s\n", k ? "host" : "GPU", err.msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "5 non-finite"));
	}

	/* A real GEMM: bf16 rounding gives a small non-zero error. */
	if (dense && kt_shape_parse(dense, "tokens=256,in=1024,out=1024", &ds, &err) == 0 &&
	    dense->default_config(dense, &ds, &tgt, &c) == 0 &&
	    dense->plan(dense, &ds, &c, &tgt, &p, &err) == 0) {
		for (k = 0; k < 2; k++) {
			if (set_problem(w[k], dense, &ds, NULL, &err) != 0) {
				fprintf(stderr, "FAILED: dense problem: %s\n", err.msg);
				CU_FAIL("dense problem");
				goto out;
			}
			eval_plan(w[k], &c, &p, &r[k]);
		}
		expect_same("dense default config", &r[0], &r[1]);
		CU_ASSERT_EQUAL(r[0].status, WORKER_OK);
	} else {
		fprintf(stderr, "FAILED: dense default plan: %s\n", err.msg);
		CU_FAIL("dense default plan");
	}
out:
	worker_stop(w[0]);
	worker_stop(w[1]);
}

/* A random sweep of a GPU family (dense: hundreds of configs, a sample of
 * 2 that misses the default for these seeds) evaluates the family's
 * default config too, verified, so the winner is never slower than what an
 * untuned shape gets. */
static void test_sweep_adds_default(void)
{
	const struct kt_family *f = kt_family_find("dense");
	struct kt_shape s;
	struct kt_target tgt;
	struct kt_config dc;
	struct kt_err err = { 0 };
	char dkey[512];
	int seed, missed = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, "tokens=256,in=1024,out=1024", &s, &err), 0);
	target_of(&ginfo, &tgt);
	tgt.arch_a = tgt.sm == 90;	/* as a sweep compiles for it */
	CU_ASSERT_EQUAL_FATAL(f->default_config(f, &s, &tgt, &dc), 0);
	kt_config_key(f, &dc, dkey, sizeof(dkey));
	for (seed = 1; seed <= 2; seed++) {
		struct sweep_opts o;
		struct sweep_summary sum;
		struct store *st = NULL;
		struct store_trial_row *rows = NULL;
		char db[64];
		int n = 0, i, found = 0;

		snprintf(db, sizeof(db), "default%d.db", seed);
		sweep_opts_default(&o);
		o.db_path = kt_test_path(db);
		o.family = "dense";
		o.shape = "tokens=256,in=1024,out=1024";
		o.strategy = "random";
		o.budget = 2;
		o.seed = (uint64_t)seed;
		o.baseline = 0;
		o.worker.exe = worker_exe();
		kt_err_clear(&err);
		if (sweep_run(&o, &sum, &err) != 0) {
			fprintf(stderr, "\n  sweep: %s\n", err.msg);
			CU_FAIL("sweep_run");
			return;
		}
		CU_ASSERT_EQUAL_FATAL(store_open(o.db_path, STORE_RO, &st, &err), 0);
		CU_ASSERT_EQUAL(store_trials_list(st, sum.sweep_id, 0, &rows, &n, &err), 0);
		for (i = 0; i < n; i++)
			if (!strcmp(rows[i].config_key, dkey)) {
				found++;
				CU_ASSERT_STRING_EQUAL(rows[i].status, "ok");
			}
		store_trial_rows_free(rows, n);
		store_close(st);
		CU_ASSERT_EQUAL(found, 1);
		CU_ASSERT_EQUAL(n, sum.evaluated);
		CU_ASSERT(sum.evaluated == 2 || sum.evaluated == 3);
		missed += sum.evaluated == 3;
		printf("\n    seed %d: %ld evaluated, winner %s", seed, sum.evaluated, sum.best_config);
	}
	CU_ASSERT(missed > 0);	/* the added evaluation itself ran */
}

static void test_cublas_baseline(void)
{
	const struct kt_family *f = kt_family_find("dense");
	struct kt_shape s;
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct worker_result r;
	struct ft_built ref;
	char arch[16];
	double floor_us;
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, "tokens=1024,in=4096,out=4096", &s, &err), 0);
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &s, &tgt, &ref.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(ft_build(&ref, arch), 0);
	if (worker_problem(gw, f, &s, SEED, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
		fprintf(stderr, "worker_problem(dense): %s\n", err.msg);
		CU_FAIL_FATAL("worker_problem failed");
	}
	ft_built_release(&ref);
	rc = worker_baseline(gw, "cublas_dense", &r, &err);
	printf("\n    cublas_dense %s: rc %d %.2f us (min %.2f, p90 %.2f, %d reps) %s%s",
	       "tokens=1024,in=4096,out=4096", rc, r.median_us, r.min_us, r.p90_us, r.reps,
	       r.message, rc < 0 ? err.msg : "");
	CU_ASSERT_EQUAL(rc, 1);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.median_us > 0);
	/* Not faster than the roofline floor: a time below that measures
	 * nothing. On a device not measured, the H200's floor still bounds it
	 * (no card we run on is faster). The shape is compute-bound. */
	floor_us = kt_floor_us(f, &s, ginfo.name);
	if (floor_us <= 0)
		floor_us = kt_floor_us(f, &s, "NVIDIA H200");
	CU_ASSERT_TRUE(r.median_us >= 0.9 * floor_us);
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(worker_baseline(gw, "no_such_baseline", &r, &err), 0);
}

/* An ordinal past the last device: KT_ENOGPU, saying how many there are. */
static void test_bad_ordinal(void)
{
	struct worker_opts o;
	struct worker *w = NULL;
	struct kt_err err = { 0 };

	worker_opts_default(&o);
	o.exe = worker_exe();
	o.device = 64;
	CU_ASSERT_EQUAL(worker_start(&o, &w, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_ENOGPU);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no CUDA device 64"));
	printf("\n    %s ", err.msg);
	worker_stop(w);
}

static void test_gpu_missing(void)
{
	CU_FAIL("KTUNE_REQUIRE_GPU=1 but no GPU was found");
	fprintf(stderr, "  no GPU: %s\n", gpu_why);
}

int main(void)
{
	CU_pSuite s;
	int gpu;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("nvrtc: selftest templates", NULL, NULL);
	CU_add_test(s, "selftest plans compile", test_selftest_compiles);
	CU_add_test(s, "selftest TMA program compiles", test_tma_compiles);
	CU_add_test(s, "compare kernel compiles (sm_80, sm_90)", test_compare_compiles);
	CU_add_test(s, "planted kernels compile, compile_error does not", test_planted_compile);

	gpu = gpu_init();
	s = CU_add_suite("gpu: worker on a real device", NULL, gpu_cleanup);
	if (gpu == 0) {
		CU_add_test(s, "device info", test_device_info);
		CU_add_test(s, "selftest ok wrong launch_error fault hang", test_selftest_on_gpu);
		CU_add_test(s, "TMA tensor map arguments (KT_ARG_TMAP)", test_tma_tmap);
		CU_add_test(s, "verification: GPU compare kernel vs host agree",
			    test_compare_paths);
		CU_add_test(s, "cuBLAS baseline", test_cublas_baseline);
		CU_add_test(s, "a random sweep evaluates the family's default too",
			    test_sweep_adds_default);
		CU_add_test(s, "device ordinal out of range", test_bad_ordinal);
	} else if (kt_test_gpu_required() || gpu < 0) {
		/* Required, or a worker that failed for another reason. */
		fprintf(stderr, "GPU worker did not start: %s\n", gpu_why);
		CU_add_test(s, "a GPU is present", test_gpu_missing);
	} else {
		printf("GPU suite skipped: %s\n", gpu_why);
		CU_add_test(s, "device info", test_device_info);
		CU_set_suite_active(s, CU_FALSE);
	}
	return kt_test_main();
}
