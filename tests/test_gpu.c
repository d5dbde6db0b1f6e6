/*
 * test_gpu.c -- the worker on a real GPU: device info, the selftest family's
 * ok / wrong / fault / hang / launch_error kernels (the worker goes on after
 * each), inputs and verification checked against the CPU, and the cuBLAS
 * baseline.
 *
 * Without a GPU the GPU suite is made inactive with the reason printed;
 * with KTUNE_REQUIRE_GPU=1 a missing GPU is a failure. The NVRTC suite
 * (the selftest templates compile) runs everywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/family.h"
#include "../tuner/jit.h"
#include "../tuner/worker.h"
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

/* A compiled plan: one cubin per program. */
struct built {
	struct kt_plan plan;
	struct jit_result res[KT_MAX_PROGRAMS];
	const void *cubins[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
};

static void built_release(struct built *b)
{
	int i;

	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		jit_result_release(&b->res[i]);
}

/* Compiles every program of b->plan for arch; 0 when all compiled. */
static int build(struct built *b, const char *arch)
{
	struct kt_err err = { 0 };
	int i;

	for (i = 0; i < b->plan.nprograms; i++) {
		if (jit_compile(&b->plan.programs[i], arch, &b->res[i], &err) != 0) {
			fprintf(stderr, "jit_compile: %s\n", err.msg);
			return -1;
		}
		if (!b->res[i].ok) {
			fprintf(stderr, "compile error:\n%s\n", b->res[i].log ? b->res[i].log : "");
			return -1;
		}
		b->cubins[i] = b->res[i].cubin;
		b->lens[i] = b->res[i].cubin_len;
	}
	return 0;
}

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
	struct built b;
	struct kt_config c = cfg("ok", 2);
	char arch[16];

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &tgt), 0);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->plan(&s, &c, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL(build(&b, arch), 0);
	CU_ASSERT_TRUE(b.lens[0] > 0);
	built_release(&b);
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(&s, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL(build(&b, arch), 0);
	CU_ASSERT_TRUE(b.lens[0] > 0);
	built_release(&b);
}

/* ---- the GPU suite ---- */

static int gpu_init(void)
{
	struct worker_opts o;
	struct kt_err err = { 0 };

	worker_opts_default(&o);
	o.exe = worker_exe();
	o.backend = WORKER_BACKEND_CUDA;
	o.timeout_s = 30;
	if (worker_start(&o, &gw, &err) != 0) {
		snprintf(gpu_why, sizeof(gpu_why), "%s (%s)", err.msg, kt_errcode_name(err.code));
		gw = NULL;
		return err.code == KT_ENOGPU ? 1 : -1;
	}
	worker_info(gw, &ginfo);
	return 0;
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
	kt_fill_bf16(x, (size_t)n, worker_buffer_seed(SEED, 0), 1.0);
	in[0] = x;
	out[0] = ref;
	if (f->cpu_ref(&s, in, out, &err) != 0) {
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
	struct built b;
	char arch[16];
	double t0;

	memset(r, 0, sizeof(*r));
	r->status = (enum worker_status)-1;
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&b, 0, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(f->plan(&s, &c, &tgt, &b.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(build(&b, arch), 0);
	t0 = now_s();
	if (worker_eval(gw, &c, &b.plan, b.cubins, b.lens, timeout_s, r, &err) != 0) {
		fprintf(stderr, "worker_eval(%s): %s\n", variant, err.msg);
		CU_FAIL("worker_eval returned -1");
	}
	printf("\n    %-12s UNROLL=%ld: %-12s %8.2f us (min %.2f, p90 %.2f, %d reps) "
	       "rel_err %.3g, eval %.0f ms %s", variant, unroll, worker_status_name(r->status),
	       r->median_us, r->min_us, r->p90_us, r->reps, r->rel_err, (now_s() - t0) * 1e3,
	       r->message);
	built_release(&b);
}

static void test_selftest_on_gpu(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { SELFTEST_N } };
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct worker_result r;
	struct built ref;
	char arch[16];
	double t0, expect;
	int restarts0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(&s, &tgt, &ref.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(build(&ref, arch), 0);
	if (worker_problem(gw, f, &s, SEED, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
		fprintf(stderr, "worker_problem: %s\n", err.msg);
		CU_FAIL_FATAL("worker_problem failed");
	}
	built_release(&ref);
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

static void test_cublas_baseline(void)
{
	const struct kt_family *f = kt_family_find("dense");
	struct kt_shape s;
	struct kt_target tgt;
	struct kt_err err = { 0 };
	struct worker_result r;
	struct built ref;
	char arch[16];
	double floor_us;
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(gw);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, "tokens=1024,in=4096,out=4096", &s, &err), 0);
	target_of(&ginfo, &tgt);
	kt_target_arch(&tgt, arch, sizeof(arch));
	memset(&ref, 0, sizeof(ref));
	CU_ASSERT_EQUAL_FATAL(f->ref_plan(&s, &tgt, &ref.plan, &err), 0);
	CU_ASSERT_EQUAL_FATAL(build(&ref, arch), 0);
	if (worker_problem(gw, f, &s, SEED, &ref.plan, ref.cubins, ref.lens, &err) != 0) {
		fprintf(stderr, "worker_problem(dense): %s\n", err.msg);
		CU_FAIL_FATAL("worker_problem failed");
	}
	built_release(&ref);
	rc = worker_baseline(gw, "cublas_dense", &r, &err);
	printf("\n    cublas_dense %s: rc %d %.2f us (min %.2f, p90 %.2f, %d reps) %s%s",
	       "tokens=1024,in=4096,out=4096", rc, r.median_us, r.min_us, r.p90_us, r.reps,
	       r.message, rc < 0 ? err.msg : "");
	CU_ASSERT_EQUAL(rc, 1);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.median_us > 0);
	/* Not faster than the bf16 tensor-core ceiling (790 TFLOP/s on the
	 * H200; every GPU we run on is slower): a time below that measures
	 * nothing. */
	floor_us = f->flops(&s) / 790e12 * 1e6;
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

	gpu = gpu_init();
	s = CU_add_suite("gpu: worker on a real device", NULL, gpu_cleanup);
	if (gpu == 0) {
		CU_add_test(s, "device info", test_device_info);
		CU_add_test(s, "selftest ok wrong launch_error fault hang", test_selftest_on_gpu);
		CU_add_test(s, "cuBLAS baseline", test_cublas_baseline);
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
