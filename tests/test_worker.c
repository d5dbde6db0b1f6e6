/*
 * test_worker.c -- the worker's crash, hang and restart handling, on the CPU
 * test device (no GPU needed): real SIGSEGV, real endless loop, a child
 * killed from outside, a missing executable, a parent that dies.
 *
 * The child is $KTUNE_BIN __worker (the ktune binary), or KTUNE_WORKER_BIN
 * when set (build/worker_child_stub, for working on the worker alone).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../kernels/family.h"
#include "../tuner/worker.h"
#include "../tuner/worker_int.h"	/* measure_plan_check_bufs, measure_tmap_check */
#include "testutil.h"

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

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* 1 once pid is gone or a zombie (dead, not yet reaped), within ~2 s. */
static int wait_dead(int pid)
{
	int i;

	for (i = 0; i < 100; i++) {
		char path[64], buf[256];
		FILE *f;
		int dead = 0;

		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "r")))
			return 1;
		if (fgets(buf, sizeof(buf), f)) {
			char *rp = strrchr(buf, ')');

			dead = rp && (rp[2] == 'Z' || rp[2] == 'X');
		}
		fclose(f);
		if (dead)
			return 1;
		sleep_ms(20);
	}
	return 0;
}

static const struct kt_family *selftest(void)
{
	return kt_family_find("selftest");
}

/* A CPU worker with the selftest problem of n elements loaded. */
static struct worker *start_cpu(long n, struct worker_opts *opts_out)
{
	struct worker_opts o;
	struct worker *w = NULL;
	struct kt_err err = { 0 };
	struct kt_shape s;
	const struct kt_family *f = selftest();

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	if (opts_out) {
		o = *opts_out;
	} else {
		worker_opts_default(&o);
		o.timeout_s = 10;
	}
	if (!o.exe)
		o.exe = worker_exe();
	o.backend = WORKER_BACKEND_CPU;
	if (worker_start(&o, &w, &err) != 0) {
		fprintf(stderr, "worker_start(%s): %s\n", o.exe, err.msg);
		CU_FAIL_FATAL("worker_start failed");
	}
	memset(&s, 0, sizeof(s));
	s.v[0] = n;
	if (worker_problem(w, f, &s, 42, NULL, NULL, NULL, &err) != 0) {
		fprintf(stderr, "worker_problem: %s\n", err.msg);
		worker_stop(w);
		CU_FAIL_FATAL("worker_problem failed");
	}
	return w;
}

static struct kt_config variant(const char *name, long unroll)
{
	struct kt_config c;

	memset(&c, 0, sizeof(c));
	c.variant = kt_variant_index(selftest(), name);
	c.p[0] = unroll;
	return c;
}

/* Evaluates a selftest variant; returns the result (status -1 on error). */
static struct worker_result eval(struct worker *w, const char *name, double timeout_s)
{
	struct kt_config c = variant(name, 2);
	struct kt_plan p;
	struct worker_result res;
	struct kt_err err = { 0 };

	memset(&p, 0, sizeof(p));
	CU_ASSERT_TRUE(c.variant >= 0);
	if (worker_eval(w, &c, &p, NULL, NULL, timeout_s, &res, &err) != 0) {
		fprintf(stderr, "worker_eval(%s): %s\n", name, err.msg);
		res.status = (enum worker_status)-1;
	}
	return res;
}

static void test_selftest_family(void)
{
	const struct kt_family *f = selftest();
	struct kt_shape s = { { 1000 } };
	struct kt_config ok = variant("ok", 1), bad = variant("launch_error", 1);
	struct kt_target tgt;
	struct kt_plan p;
	struct kt_err err = { 0 };
	struct kt_buf bufs[KT_MAX_BUFS];

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_TRUE(f->hidden);
	/* fault and hang are planted: a normal sweep never visits them. */
	CU_ASSERT_TRUE(f->planted & (1u << kt_variant_index(f, "fault")));
	CU_ASSERT_TRUE(f->planted & (1u << kt_variant_index(f, "hang")));
	CU_ASSERT_FALSE(f->planted & (1u << kt_variant_index(f, "ok")));
	CU_ASSERT_EQUAL(kt_space_size(f, 1), 18);	/* 9 variants x UNROLL 1, 2 */
	CU_ASSERT_EQUAL(kt_space_size(f, 0), 6);
	CU_ASSERT_EQUAL(f->buffers(f, &s, NULL, bufs), 2);
	CU_ASSERT_EQUAL(bufs[0].role, KT_BUF_INPUT);
	CU_ASSERT_EQUAL(bufs[1].role, KT_BUF_OUTPUT);
	CU_ASSERT_EQUAL(bufs[1].elems, 1000);
	CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90", &tgt), 0);
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &ok, &tgt, &p, &err), 0);
	CU_ASSERT_EQUAL(p.nlaunch, 1);
	CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "selftest_ok");
	CU_ASSERT_EQUAL(p.launch[0].smem, 0);
	/* Grid covers every element. */
	CU_ASSERT_TRUE((long)p.launch[0].grid[0] * p.launch[0].block[0] >= 1000);
	/* UNROLL=2 opts in to more than 48 KiB of dynamic shared memory. */
	ok.p[0] = 2;
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &ok, &tgt, &p, &err), 0);
	CU_ASSERT_TRUE(p.launch[0].smem > 48 * 1024);
	CU_ASSERT_EQUAL_FATAL(f->plan(f, &s, &bad, &tgt, &p, &err), 0);
	CU_ASSERT_TRUE(p.launch[0].block[0] > 1024);
}

static void test_buffer_seed(void)
{
	CU_ASSERT_EQUAL(measure_buffer_seed(7, 0), measure_buffer_seed(7, 0));
	CU_ASSERT_NOT_EQUAL(measure_buffer_seed(7, 0), measure_buffer_seed(7, 1));
	CU_ASSERT_NOT_EQUAL(measure_buffer_seed(7, 0), measure_buffer_seed(8, 0));
}

/* The whole story: ok, wrong, fault, hang, launch_error, ok. */
static void test_statuses_and_restarts(void)
{
	struct worker *w = start_cpu(4096, NULL);
	struct worker_device_info info;
	struct worker_result r;
	double t0, hang_s;
	int pid0;

	CU_ASSERT_EQUAL(worker_info(w, &info), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(info.name, "CPU"));
	pid0 = worker_pid(w);
	CU_ASSERT_TRUE(pid0 > 0);

	r = eval(w, "ok", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.rel_err >= 0 && r.rel_err <= selftest()->tol);
	CU_ASSERT_EQUAL(r.nonfinite, 0);
	CU_ASSERT_TRUE(r.median_us > 0);
	CU_ASSERT_TRUE(r.min_us <= r.median_us && r.median_us <= r.p90_us);
	CU_ASSERT_TRUE(r.reps >= 1);

	r = eval(w, "wrong", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_WRONG);
	CU_ASSERT_TRUE(r.rel_err > selftest()->tol);
	CU_ASSERT_EQUAL(worker_restarts(w), 0);

	r = eval(w, "fault", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_FAULT);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "SIGSEGV"));
	CU_ASSERT_EQUAL(worker_restarts(w), 1);
	CU_ASSERT_NOT_EQUAL(worker_pid(w), pid0);

	t0 = now_s();
	r = eval(w, "hang", 1.0);
	hang_s = now_s() - t0;
	CU_ASSERT_EQUAL(r.status, WORKER_TIMEOUT);
	CU_ASSERT_TRUE(hang_s >= 0.9);
	CU_ASSERT_TRUE(hang_s < 3.0);
	CU_ASSERT_EQUAL(worker_restarts(w), 2);

	r = eval(w, "launch_error", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_TRUE(r.message[0] != 0);

	/* The problem was re-created in the restarted child. */
	r = eval(w, "ok", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.rel_err >= 0 && r.rel_err <= selftest()->tol);
	CU_ASSERT_EQUAL(worker_restarts(w), 2);
	worker_stop(w);
}

static void test_killed_from_outside(void)
{
	struct worker *w = start_cpu(1000, NULL);
	struct worker_result r;
	int pid = worker_pid(w);

	CU_ASSERT_EQUAL(eval(w, "ok", 0).status, WORKER_OK);
	CU_ASSERT_EQUAL_FATAL(kill(pid, SIGKILL), 0);
	CU_ASSERT_TRUE(wait_dead(pid));
	r = eval(w, "ok", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_EQUAL(worker_restarts(w), 1);
	CU_ASSERT_NOT_EQUAL(worker_pid(w), pid);
	/* Killed again, right before a wrong candidate: still judged right. */
	pid = worker_pid(w);
	CU_ASSERT_EQUAL_FATAL(kill(pid, SIGKILL), 0);
	CU_ASSERT_TRUE(wait_dead(pid));
	CU_ASSERT_EQUAL(eval(w, "wrong", 0).status, WORKER_WRONG);
	CU_ASSERT_EQUAL(worker_restarts(w), 2);
	worker_stop(w);
}

/* When the child cannot be started again, worker_eval gives up with an
 * error after a few tries instead of looping or crashing. */
static void test_restart_fails(void)
{
	struct worker_opts o;
	struct worker *w;
	struct worker_result r;
	struct kt_err err = { 0 };
	char target[4096];
	const char *link = kt_test_path("worker-link");
	int pid;

	CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(worker_exe(), target));
	CU_ASSERT_EQUAL_FATAL(symlink(target, link), 0);
	worker_opts_default(&o);
	o.timeout_s = 10;
	o.exe = link;
	w = start_cpu(100, &o);
	CU_ASSERT_EQUAL(eval(w, "ok", 0).status, WORKER_OK);
	CU_ASSERT_EQUAL(unlink(link), 0);
	pid = worker_pid(w);
	CU_ASSERT_EQUAL(kill(pid, SIGKILL), 0);
	CU_ASSERT_TRUE(wait_dead(pid));
	CU_ASSERT_EQUAL(worker_eval(w, &(struct kt_config){ 0 }, &(struct kt_plan){ 0 }, NULL,
				    NULL, 0, &r, &err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "restart failed"));
	CU_ASSERT_EQUAL(worker_pid(w), 0);
	worker_stop(w);
}

static void test_missing_exe(void)
{
	struct worker_opts o;
	struct worker *w = (struct worker *)&o;	/* must be set to NULL */
	struct kt_err err = { 0 };

	worker_opts_default(&o);
	o.exe = "/nonexistent/ktune-worker";
	o.backend = WORKER_BACKEND_CPU;
	CU_ASSERT_EQUAL(worker_start(&o, &w, &err), -1);
	CU_ASSERT_PTR_NULL(w);
	CU_ASSERT_EQUAL(err.code, KT_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/ktune-worker"));

	/* An executable that is not a worker: ends before saying hello. */
	kt_err_clear(&err);
	o.exe = "/bin/true";
	CU_ASSERT_EQUAL(worker_start(&o, &w, &err), -1);
	CU_ASSERT_PTR_NULL(w);
	CU_ASSERT_EQUAL(err.code, KT_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exited"));

	kt_err_clear(&err);
	o.exe = NULL;
	CU_ASSERT_EQUAL(worker_start(&o, &w, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	worker_stop(NULL);
}

static void test_no_gpu(void)
{
	struct worker_opts o;
	struct worker *w = NULL;
	struct kt_err err = { 0 };

	worker_opts_default(&o);
	o.exe = worker_exe();
	o.backend = WORKER_BACKEND_CUDA;
	if (worker_start(&o, &w, &err) == 0) {
		struct worker_device_info info;

		/* A machine with a GPU: then it must have opened one. */
		printf("\n  (a GPU is present: the no-GPU check becomes a device check) ");
		CU_ASSERT_EQUAL(worker_info(w, &info), 0);
		CU_ASSERT_TRUE(info.sms > 0);
		worker_stop(w);
		return;
	}
	CU_ASSERT_EQUAL(err.code, KT_ENOGPU);
	CU_ASSERT_TRUE(strstr(err.msg, "driver") != NULL || strstr(err.msg, "no CUDA device") != NULL);
	CU_ASSERT_PTR_NULL(w);
}

static void test_usage_errors(void)
{
	struct worker *w = start_cpu(100, NULL);
	struct kt_config c = variant("ok", 1);
	struct kt_plan p;
	struct worker_result r;
	struct kt_err err = { 0 };
	struct kt_shape s = { { 100 } };
	const struct kt_family *dense = kt_family_find("dense");

	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL(worker_baseline(w, "cublas_dense", &r, &err), 0);
	CU_ASSERT_TRUE(r.message[0] != 0);
	/* The CPU device runs only selftest: a clean error, and the worker
	 * then has no problem until a good one is set. */
	if (dense) {
		struct kt_shape ds;

		CU_ASSERT_EQUAL(kt_shape_parse(dense, "tokens=16,in=64,out=64", &ds, &err), 0);
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(worker_problem(w, dense, &ds, 1, NULL, NULL, NULL, &err), -1);
		CU_ASSERT_EQUAL(err.code, KT_EINVAL);
		kt_err_clear(&err);
		CU_ASSERT_EQUAL(worker_eval(w, &c, &p, NULL, NULL, 0, &r, &err), -1);
		CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	}
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(worker_problem(w, selftest(), &s, 3, NULL, NULL, NULL, &err), 0);
	CU_ASSERT_EQUAL(eval(w, "ok", 0).status, WORKER_OK);
	/* A shape out of the family's range is refused by the child. */
	s.v[0] = 0;
	kt_err_clear(&err);
	CU_ASSERT_EQUAL(worker_problem(w, selftest(), &s, 3, NULL, NULL, NULL, &err), -1);
	CU_ASSERT_EQUAL(err.code, KT_EINVAL);
	CU_ASSERT_EQUAL(worker_restarts(w), 0);
	worker_stop(w);
}

static void test_timing_policy(void)
{
	struct worker_opts o;
	struct worker *w;
	struct worker_result r;

	worker_opts_default(&o);
	o.timeout_s = 10;
	o.min_reps = 15;
	o.max_reps = 15;
	o.budget_ms = 60000;
	w = start_cpu(20000, &o);
	r = eval(w, "ok", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_EQUAL(r.reps, 15);
	worker_stop(w);

	/* A tiny budget stops long before max_reps. */
	worker_opts_default(&o);
	o.timeout_s = 10;
	o.min_reps = 1000;
	o.max_reps = 100000;
	o.budget_ms = 5;
	w = start_cpu(200000, &o);
	r = eval(w, "ok", 0);
	CU_ASSERT_EQUAL(r.status, WORKER_OK);
	CU_ASSERT_TRUE(r.reps >= 1 && r.reps < 1000);
	worker_stop(w);
}

/* The child must not outlive its parent (PR_SET_PDEATHSIG). */
static void test_parent_death(void)
{
	int fds[2], child_pid = 0, gone = 0;
	pid_t helper;

	CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
	helper = fork();
	CU_ASSERT_TRUE_FATAL(helper >= 0);
	if (helper == 0) {
		struct worker_opts o;
		struct worker *w = NULL;
		struct kt_err err = { 0 };
		int pid = 0;

		close(fds[0]);
		worker_opts_default(&o);
		o.exe = worker_exe();
		o.backend = WORKER_BACKEND_CPU;
		if (worker_start(&o, &w, &err) == 0)
			pid = worker_pid(w);
		if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid))
			_exit(2);
		_exit(0);	/* dies without worker_stop */
	}
	close(fds[1]);
	CU_ASSERT_EQUAL(read(fds[0], &child_pid, sizeof(child_pid)), (ssize_t)sizeof(child_pid));
	close(fds[0]);
	waitpid(helper, NULL, 0);
	CU_ASSERT_TRUE_FATAL(child_pid > 0);
	gone = wait_dead(child_pid);
	CU_ASSERT_TRUE(gone);
	if (!gone)
		kill(child_pid, SIGKILL);
}

/* A valid rank-2 map over a bf16 buffer of rows x width elements. */
static struct kt_tmap tmap2(long long width, long long rows, int box_w, int box_h, int swizzle)
{
	struct kt_tmap t;

	memset(&t, 0, sizeof(t));
	t.rank = 2;
	t.dims[0] = width;
	t.dims[1] = rows;
	t.strides[0] = 1;
	t.strides[1] = width;
	t.box[0] = box_w;
	t.box[1] = box_h;
	t.swizzle = swizzle;
	return t;
}

/* measure_tmap_check on t over b must fail with a message containing want. */
static void expect_tmap_bad(const struct kt_tmap *t, const struct kt_buf *b, const char *want)
{
	char why[200] = "";
	int rc = measure_tmap_check(t, b, why, sizeof(why));

	CU_ASSERT_EQUAL(rc, -1);
	if (rc != -1 || !strstr(why, want)) {
		fprintf(stderr, "\n  tensor map check: want '%s', got rc %d '%s'\n", want, rc, why);
		CU_FAIL("tensor map check message");
	}
}

static void test_tmap_checks(void)
{
	struct kt_buf b, f32;
	struct kt_tmap t;
	struct kt_plan p;
	char why[200];

	memset(&b, 0, sizeof(b));
	snprintf(b.name, sizeof(b.name), "x");
	b.dtype = KT_BF16;
	b.elems = 256 * 1024;
	f32 = b;
	f32.dtype = KT_F32;

	/* Valid: every swizzle whose span holds box[0]. */
	t = tmap2(256, 1024, 64, 32, 128);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);
	t = tmap2(256, 1024, 32, 8, 64);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);
	t = tmap2(256, 1024, 16, 8, 32);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);
	t = tmap2(256, 1024, 256, 256, 0);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);
	/* rank 3 covering the buffer exactly; a padded row stride. */
	t = tmap2(256, 32, 64, 8, 128);
	t.rank = 3;
	t.dims[2] = 32;
	t.strides[2] = 256 * 32;
	t.box[2] = 1;
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);
	t = tmap2(200, 1000, 64, 32, 128);
	t.strides[1] = 256;
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &b, why, sizeof(why)), 0);

	t = tmap2(256, 1024, 64, 32, 128);
	t.rank = 1;
	expect_tmap_bad(&t, &b, "rank 1");
	t.rank = 4;
	expect_tmap_bad(&t, &b, "rank 4");
	t = tmap2(0, 1024, 64, 32, 128);
	expect_tmap_bad(&t, &b, "dims[0] = 0");
	t = tmap2(256, 1024, 64, 0, 128);
	expect_tmap_bad(&t, &b, "box[1] = 0");
	t = tmap2(256, 1024, 64, 257, 0);
	expect_tmap_bad(&t, &b, "box[1] = 257");
	t = tmap2(256, 1024, 64, 32, 48);
	expect_tmap_bad(&t, &b, "swizzle 48");
	t = tmap2(256, 1024, 64, 32, 128);
	t.strides[0] = 2;
	expect_tmap_bad(&t, &b, "strides[0]");
	/* 100 bf16 = 200 bytes: not a multiple of 16; as f32, 400 bytes is. */
	t = tmap2(100, 1000, 32, 32, 0);
	expect_tmap_bad(&t, &b, "not a multiple of 16");
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &f32, why, sizeof(why)), 0);
	/* box[0]: 4 bf16 = 8 bytes; 128 bf16 = 256 bytes over a 128-byte span;
	 * 64 bf16 = 128 bytes over a 64-byte span. */
	t = tmap2(256, 1024, 4, 32, 0);
	expect_tmap_bad(&t, &b, "box[0] = 4");
	t = tmap2(256, 1024, 128, 32, 128);
	expect_tmap_bad(&t, &b, "swizzle span");
	t = tmap2(256, 1024, 64, 32, 64);
	expect_tmap_bad(&t, &b, "64-byte swizzle span");
	t = tmap2(256, 1024, 32, 32, 128);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, &f32, why, sizeof(why)), 0);
	t = tmap2(256, 1024, 64, 32, 128);
	expect_tmap_bad(&t, &f32, "256 bytes, over the 128-byte");
	/* Past the end of the buffer, by one row or by an overflowing stride. */
	t = tmap2(256, 1025, 64, 32, 128);
	expect_tmap_bad(&t, &b, "buffer x");
	t = tmap2(256, 1024, 64, 32, 128);
	t.strides[1] = 1LL << 36;
	expect_tmap_bad(&t, &b, "buffer x");
	t.strides[1] = 1LL << 40;
	expect_tmap_bad(&t, &b, "strides[1]");
	/* Without a buffer only the shape is checked. */
	t = tmap2(100, 1000000, 4, 32, 0);
	CU_ASSERT_EQUAL(measure_tmap_check(&t, NULL, why, sizeof(why)), 0);

	/* Through the plan check: the buffer index, and the message names the
	 * launch. */
	memset(&p, 0, sizeof(p));
	p.nprograms = 1;
	p.nlaunch = 1;
	snprintf(p.launch[0].kernel, sizeof(p.launch[0].kernel), "k_tma");
	p.launch[0].nargs = 2;
	p.launch[0].args[0].kind = KT_ARG_TMAP;
	p.launch[0].args[0].buf = 0;
	p.launch[0].args[0].tmap = tmap2(256, 1024, 64, 32, 128);
	p.launch[0].args[1].kind = KT_ARG_BUF;
	p.launch[0].args[1].buf = 0;
	CU_ASSERT_EQUAL(measure_plan_check_bufs(&p, 1, &b, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), 0);
	p.launch[0].args[0].buf = 1;
	CU_ASSERT_EQUAL(measure_plan_check_bufs(&p, 1, &b, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "arg 0: buffer 1 of 1"));
	p.launch[0].args[0].buf = -1;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	p.launch[0].args[0].buf = 0;
	p.launch[0].args[0].tmap.box[0] = 128;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), 0);	/* needs the dtype */
	CU_ASSERT_EQUAL(measure_plan_check_bufs(&p, 1, &b, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "launch 0 (k_tma) arg 0: tensor map: box[0] = 128"));
	p.launch[0].args[0].kind = (enum kt_arg_kind)(KT_ARG_TMAP + 1);
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "bad kind"));
	/* the cooperative flag is a flag: 0 or 1 */
	p.launch[0].args[0].kind = KT_ARG_BUF;
	p.launch[0].cooperative = 1;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), 0);
	p.launch[0].cooperative = 2;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "launch 0: cooperative is 2"));
	/* pdl too, and only for a program that waits (KT_PDL=1) */
	p.launch[0].cooperative = 0;
	p.launch[0].pdl = 1;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "launch 0 (k_tma) is flagged pdl but its program"));
	p.programs[0].ndefines = 2;
	snprintf(p.programs[0].defines[0], sizeof(p.programs[0].defines[0]), "KT_PDL=0");
	snprintf(p.programs[0].defines[1], sizeof(p.programs[0].defines[1]), "KT_PDL=10");
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	snprintf(p.programs[0].defines[1], sizeof(p.programs[0].defines[1]), "KT_PDL=1");
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), 0);
	p.launch[0].pdl = 2;
	CU_ASSERT_EQUAL(measure_plan_check(&p, 1, why, sizeof(why)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "launch 0: pdl is 2"));
}

/* The CPU test device refuses a plan with a tensor map, and an invalid
 * one, as launch errors; the worker goes on. */
static void test_tmap_on_cpu_device(void)
{
	struct worker *w = start_cpu(4096, NULL);
	struct kt_config c = variant("ok", 1);
	struct kt_plan p;
	struct worker_result r;
	struct kt_err err = { 0 };

	memset(&p, 0, sizeof(p));
	p.nprograms = 1;
	p.nlaunch = 1;
	snprintf(p.launch[0].kernel, sizeof(p.launch[0].kernel), "selftest_tma");
	p.launch[0].nargs = 2;
	p.launch[0].args[0].kind = KT_ARG_TMAP;
	p.launch[0].args[0].buf = 0;
	p.launch[0].args[0].tmap = tmap2(64, 64, 64, 32, 128);	/* 4096 bf16: all of x */
	p.launch[0].args[1].kind = KT_ARG_BUF;
	p.launch[0].args[1].buf = 1;
	CU_ASSERT_EQUAL_FATAL(worker_eval(w, &c, &p, NULL, NULL, 0, &r, &err), 0);
	printf("\n    %s: %s ", worker_status_name(r.status), r.message);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "TMA tensor map needs a CUDA device"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "selftest_tma"));
	/* One row more than x holds: refused by the plan check first. */
	p.launch[0].args[0].tmap.dims[1] = 65;
	CU_ASSERT_EQUAL_FATAL(worker_eval(w, &c, &p, NULL, NULL, 0, &r, &err), 0);
	printf("\n    %s: %s ", worker_status_name(r.status), r.message);
	CU_ASSERT_EQUAL(r.status, WORKER_LAUNCH_ERROR);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "invalid plan"));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "4160 elements of buffer x"));
	CU_ASSERT_EQUAL(eval(w, "ok", 0).status, WORKER_OK);
	CU_ASSERT_EQUAL(worker_restarts(w), 0);
	worker_stop(w);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("worker (cpu test device)", NULL, NULL);
	CU_add_test(s, "selftest family descriptor", test_selftest_family);
	CU_add_test(s, "buffer seeds", test_buffer_seed);
	CU_add_test(s, "ok wrong fault hang launch_error ok", test_statuses_and_restarts);
	CU_add_test(s, "child killed from outside", test_killed_from_outside);
	CU_add_test(s, "missing or wrong executable", test_missing_exe);
	CU_add_test(s, "restart fails: an error, not a loop", test_restart_fails);
	CU_add_test(s, "cuda backend without a GPU", test_no_gpu);
	CU_add_test(s, "usage errors", test_usage_errors);
	CU_add_test(s, "timing policy", test_timing_policy);
	CU_add_test(s, "child dies with its parent", test_parent_death);
	CU_add_test(s, "tensor map checks", test_tmap_checks);
	CU_add_test(s, "tensor maps on the cpu test device", test_tmap_on_cpu_device);
	return kt_test_main();
}
