/*
 * test_sweep.c -- the sweep engine end to end on the CPU test device: real
 * worker processes that really crash and hang, a real SQLite file, and a
 * `ktune sweep` killed with SIGKILL mid-run and resumed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include <jansson.h>

#include "db/store.h"
#include "testutil.h"
#include "kernels/family.h"
#include "tuner/strategy.h"
#include "tuner/sweep.h"

static void selftest_opts(struct sweep_opts *o, const char *db, int plant)
{
	sweep_opts_default(o);
	o->db_path = db;
	o->family = "selftest";
	o->shape = "n=4096";
	o->plant = plant;
	o->threads = 2;
	o->timeout_s = 2;
	o->worker.exe = kt_test_ktune();
	o->worker.backend = WORKER_BACKEND_CPU;
}

static long count_trials(const char *db, int64_t sweep_id, long *ok)
{
	struct store *st = NULL;
	struct store_trial_row *rows = NULL;
	struct kt_err e = { 0 };
	int n = 0, i;

	*ok = 0;
	if (store_open(db, STORE_RO, &st, &e) != 0)
		return -1;
	if (store_trials_list(st, sweep_id, 0, &rows, &n, &e) != 0)
		n = -1;
	for (i = 0; i < n; i++) {
		if (!strcmp(rows[i].status, "ok"))
			(*ok)++;
		store_trial_row_release(&rows[i]);
	}
	free(rows);
	store_close(st);
	return n;
}

/* Crashing and hanging candidates are recorded and the sweep finishes. */
static void test_planted_failures_do_not_stop_a_sweep(void)
{
	struct sweep_opts o;
	struct sweep_summary s;
	struct kt_err e = { 0 };
	const char *db = kt_test_path("planted.db");
	long ok;

	selftest_opts(&o, db, 1);
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	if (e.code)
		fprintf(stderr, "sweep: %s\n", e.msg);
	CU_ASSERT_EQUAL(s.interrupted, 0);
	CU_ASSERT(s.planned >= 5);	/* one config per variant at least */
	CU_ASSERT_EQUAL(s.evaluated, s.planned);
	CU_ASSERT(s.n_fault >= 1);
	CU_ASSERT(s.n_timeout >= 1);
	CU_ASSERT(s.n_wrong >= 1);
	CU_ASSERT(s.n_launch_error >= 1);
	CU_ASSERT(s.n_ok >= 1);
	CU_ASSERT_EQUAL(s.restarts, s.n_fault + s.n_timeout);
	CU_ASSERT_EQUAL(s.n_ok + s.n_wrong + s.n_fault + s.n_timeout + s.n_launch_error +
			s.n_compile_error, s.planned);
	/* The winner verified and was timed again. */
	CU_ASSERT(s.best_us > 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(s.best_config, "variant=ok"));
	CU_ASSERT(s.retime_us > 0);
	CU_ASSERT_EQUAL(count_trials(db, s.sweep_id, &ok), s.planned);
	CU_ASSERT_EQUAL(ok, s.n_ok);

	/* The same sweep again evaluates nothing. */
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.resumed, 1);
	CU_ASSERT_EQUAL(s.evaluated, 0);
	CU_ASSERT_EQUAL(s.skipped, s.planned);
}

static void test_bad_requests(void)
{
	struct sweep_opts o;
	struct sweep_summary s;
	struct kt_err e = { 0 };

	selftest_opts(&o, kt_test_path("bad.db"), 0);
	o.family = "no_such_family";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_ENOTFOUND);

	kt_err_clear(&e);
	selftest_opts(&o, kt_test_path("bad.db"), 0);
	o.shape = "n=banana";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);

	kt_err_clear(&e);
	selftest_opts(&o, kt_test_path("bad.db"), 0);
	o.strategy = "clairvoyant";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	/* Nothing was created for bad input. */
	CU_ASSERT_NOT_EQUAL(access(kt_test_path("bad.db"), F_OK), 0);
}

/* --time-limit: nothing starts after the limit, the sweep is left
 * resumable, and the same options without a limit finish it. */
static void test_time_limit_leaves_a_resumable_sweep(void)
{
	struct sweep_opts o;
	struct sweep_summary s;
	struct kt_err e = { 0 };
	const char *db = kt_test_path("limit.db");

	selftest_opts(&o, db, 0);
	o.time_limit_s = 1e-6;	/* spent before the first candidate */
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.time_limited, 1);
	CU_ASSERT_EQUAL(s.interrupted, 0);
	CU_ASSERT(s.planned >= 2);
	CU_ASSERT_EQUAL(s.evaluated, 0);
	CU_ASSERT_EQUAL(s.best_us, 0);

	o.time_limit_s = 0;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.resumed, 1);
	CU_ASSERT_EQUAL(s.time_limited, 0);
	CU_ASSERT_EQUAL(s.evaluated, s.planned);
	CU_ASSERT(s.best_us > 0);
	CU_ASSERT(s.retime_us > 0);
}

/* The status of config key's trial in the sweep; "" when it has none. */
static void trial_status(const char *db, int64_t sweep_id, const char *key, char *out, size_t len)
{
	struct store *st = NULL;
	struct store_trial_row *rows = NULL;
	struct kt_err e = { 0 };
	int n = 0, i;

	snprintf(out, len, "%s", "");
	CU_ASSERT_EQUAL_FATAL(store_open(db, STORE_RO, &st, &e), 0);
	CU_ASSERT_EQUAL(store_trials_list(st, sweep_id, 0, &rows, &n, &e), 0);
	for (i = 0; i < n; i++)
		if (!strcmp(rows[i].config_key, key))
			snprintf(out, len, "%s", rows[i].status);
	store_trial_rows_free(rows, n);
	store_close(st);
}

/* A random sweep evaluates its budget, and the family's default config
 * too when the sample missed it: the default always has a trial, never
 * two, and a resumed sweep adds nothing. (On the CPU device selftest's ok
 * variant, first in the round-robin deal, has one valid config, the
 * default, so every sample here holds it; the GPU families' samples miss
 * theirs.) With --variants leaving the default out, the budget alone. */
static void test_random_budget(void)
{
	struct sweep_opts o;
	struct sweep_summary s;
	struct kt_err e = { 0 };
	char st[32];
	int seed;

	for (seed = 1; seed <= 8; seed++) {
		char db[64];
		long n, ok;

		snprintf(db, sizeof(db), "random%d.db", seed);
		selftest_opts(&o, kt_test_path(db), 0);
		o.strategy = "random";
		o.budget = 3;
		o.seed = (uint64_t)seed;
		CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
		n = count_trials(kt_test_path(db), s.sweep_id, &ok);
		trial_status(kt_test_path(db), s.sweep_id, "variant=ok,UNROLL=1", st, sizeof(st));
		CU_ASSERT_STRING_EQUAL(st, "ok");
		CU_ASSERT(s.evaluated == 3 || s.evaluated == 4);
		CU_ASSERT_EQUAL(s.planned, s.evaluated);
		CU_ASSERT_EQUAL(n, s.evaluated);
		/* resumed: nothing more, the default included */
		CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
		CU_ASSERT_EQUAL(s.resumed, 1);
		CU_ASSERT_EQUAL(s.evaluated, 0);
	}

	selftest_opts(&o, kt_test_path("random_v.db"), 0);
	o.strategy = "random";
	o.budget = 2;
	o.variants = "wrong";	/* one valid config on the CPU device */
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.space, 1);
	CU_ASSERT_EQUAL(s.evaluated, 1);
	trial_status(kt_test_path("random_v.db"), s.sweep_id, "variant=ok,UNROLL=1", st, sizeof(st));
	CU_ASSERT_STRING_EQUAL(st, "");
}

/* --variants keeps the listed variants only (and is part of the sweep's
 * identity); an unknown name is refused before anything is created. */
static void test_variants_filter(void)
{
	struct sweep_opts o;
	struct sweep_summary all, s;
	struct kt_err e = { 0 };
	long n, ok;

	selftest_opts(&o, kt_test_path("variants.db"), 0);
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &all, &e), 0);
	o.variants = "ok";
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.resumed, 0);	/* a sweep of its own, not the one above */
	CU_ASSERT(s.planned > 0 && s.planned < all.planned);
	CU_ASSERT_EQUAL(s.evaluated, s.planned);
	n = count_trials(kt_test_path("variants.db"), s.sweep_id, &ok);
	CU_ASSERT_EQUAL(n, s.planned);
	CU_ASSERT_EQUAL(ok, n);		/* no "wrong", "fault", ... candidate ran */
	n = count_trials(kt_test_path("variants.db"), all.sweep_id, &ok);
	CU_ASSERT(ok < n);

	kt_err_clear(&e);
	selftest_opts(&o, kt_test_path("variants_bad.db"), 0);
	o.variants = "ok,nope";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "'nope'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "launch_error"));	/* names the variants */
	o.variants = "ok,";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_NOT_EQUAL(access(kt_test_path("variants_bad.db"), F_OK), 0);
}

/* --config sweeps exactly the configs named (their order and spelling do
 * not change the sweep's identity); a config the family refuses, one
 * outside the space and one that does not parse are errors. */
static void test_config_filter(void)
{
	static const char *const one[] = { "variant=ok,UNROLL=1" };
	static const char *const two[] = { "UNROLL=1,variant=wrong", "variant=ok,UNROLL=1",
					   "variant=wrong,UNROLL=1" };
	static const char *const two_again[] = { "variant=ok,UNROLL=1", "variant=wrong,UNROLL=1" };
	/* the CPU test device has 48 KiB of shared memory, UNROLL 2 wants 64 */
	static const char *const refused[] = { "variant=ok,UNROLL=2" };
	static const char *const typo[] = { "variant=ok,UNROLLS=1" };
	struct sweep_opts o;
	struct sweep_summary s, s2;
	struct kt_err e = { 0 };
	long n, ok;

	selftest_opts(&o, kt_test_path("configs.db"), 0);
	o.configs = one;
	o.nconfigs = 1;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.space, 1);
	CU_ASSERT_EQUAL(s.evaluated, 1);
	CU_ASSERT_STRING_EQUAL(s.best_config, "variant=ok,UNROLL=1");
	n = count_trials(kt_test_path("configs.db"), s.sweep_id, &ok);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(ok, 1);

	o.configs = two;
	o.nconfigs = 3;	/* a repeat counts once */
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s, &e), 0);
	CU_ASSERT_EQUAL(s.resumed, 0);	/* another set, another sweep */
	CU_ASSERT_EQUAL(s.planned, 2);
	CU_ASSERT_EQUAL(s.evaluated, 2);
	o.configs = two_again;
	o.nconfigs = 2;
	CU_ASSERT_EQUAL_FATAL(sweep_run(&o, &s2, &e), 0);
	CU_ASSERT_EQUAL(s2.resumed, 1);	/* the same set: nothing evaluated twice */
	CU_ASSERT_EQUAL(s2.sweep_id, s.sweep_id);
	CU_ASSERT_EQUAL(s2.evaluated, 0);

	o.configs = refused;
	o.nconfigs = 1;
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "shared memory"));	/* check()'s reason */
	kt_err_clear(&e);
	o.configs = one;
	o.variants = "wrong";
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--variants"));
	kt_err_clear(&e);

	selftest_opts(&o, kt_test_path("configs_bad.db"), 0);
	o.configs = typo;
	o.nconfigs = 1;
	CU_ASSERT_EQUAL(sweep_run(&o, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "UNROLLS"));
	CU_ASSERT_NOT_EQUAL(access(kt_test_path("configs_bad.db"), F_OK), 0);
}

/* A small random budget samples every variant, even when one variant has
 * most of the space (a plain sample of 3 out of 12 would mostly miss the
 * two lone ones). */
static void test_random_covers_variants(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape shape = { { 4096 } };
	struct kt_config cfg[12];
	struct space sp;
	struct kt_err e = { 0 };
	uint64_t seed;
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	memset(cfg, 0, sizeof(cfg));
	for (i = 0; i < 12; i++)
		cfg[i].variant = i < 10 ? 0 : (i == 10 ? 1 : 4);
	memset(&sp, 0, sizeof(sp));
	sp.cfg = cfg;
	sp.n = 12;
	for (seed = 1; seed <= 20; seed++) {
		struct strategy_spec spec = { STRATEGY_RANDOM, 3, seed, 0, NULL };
		struct strategy *st = NULL;
		long order[12], n = 0, k;
		int seen[KT_MAX_VARIANTS] = { 0 };

		CU_ASSERT_EQUAL_FATAL(strategy_new(&spec, f, &shape, &sp, &st, &e), 0);
		while ((k = strategy_next(st, order + n, 12 - n)) > 0)
			n += k;
		CU_ASSERT_EQUAL(n, 3);
		CU_ASSERT_STRING_EQUAL(strategy_stop_reason(st), "budget");
		for (i = 0; i < n; i++)
			seen[cfg[order[i]].variant]++;
		CU_ASSERT(seen[0] == 1 && seen[1] == 1 && seen[4] == 1);
		strategy_free(st);
	}
}

/* kill -9 of `ktune sweep` while a candidate hangs, then the same command:
 * it resumes, evaluates only what is missing, and nothing twice. */
static void test_kill9_resume(void)
{
	const char *db = kt_test_path("resume.db");
	char *argv[] = { (char *)kt_test_ktune(), "sweep", "--family", "selftest", "--shape", "n=4096",
			 "--plant", "--worker-backend", "cpu", "--timeout", "3", "--threads", "2",
			 "--db", (char *)db, "--json", NULL };
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	char *out = NULL;
	long before = 0, ok, after;
	pid_t pid;
	int status, i, rc;
	json_t *j;

	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		int fd = open("/dev/null", 1);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	/* Wait until some trials are in (the planted fault comes first, then the
	 * 3-second hang), then kill it mid-hang. */
	for (i = 0; i < 200 && before < 1; i++) {
		nanosleep(&ts, NULL);
		before = count_trials(db, 1, &ok);
		if (before < 0)
			before = 0;
	}
	CU_ASSERT_FATAL(before >= 1);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CU_ASSERT(WIFSIGNALED(status));
	before = count_trials(db, 1, &ok);

	rc = kt_test_exec(argv, NULL, &out, 120);
	CU_ASSERT_EQUAL(rc, 0);
	j = out ? json_loads(strchr(out, '{') ? strchr(out, '{') : out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_TRUE(json_is_true(json_object_get(j, "resumed")));
	after = count_trials(db, 1, &ok);
	{
		json_t *c = json_object_get(j, "counts");
		long planned = (long)json_integer_value(json_object_get(c, "planned"));
		long skipped = (long)json_integer_value(json_object_get(c, "skipped"));
		long evaluated = (long)json_integer_value(json_object_get(c, "evaluated"));

		CU_ASSERT_EQUAL(after, planned);
		CU_ASSERT_EQUAL(skipped, before);
		CU_ASSERT_EQUAL(evaluated, planned - before);
	}
	json_decref(j);
	free(out);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("sweep on the CPU test device", NULL, NULL);
	CU_add_test(s, "planted crash and hang are recorded, the sweep finishes",
		    test_planted_failures_do_not_stop_a_sweep);
	CU_add_test(s, "bad family, shape and strategy are refused", test_bad_requests);
	CU_add_test(s, "--time-limit leaves a resumable sweep", test_time_limit_leaves_a_resumable_sweep);
	CU_add_test(s, "random strategy honours its budget", test_random_budget);
	CU_add_test(s, "random strategy samples every variant", test_random_covers_variants);
	CU_add_test(s, "--variants sweeps only those variants", test_variants_filter);
	CU_add_test(s, "--config sweeps only those configs", test_config_filter);
	CU_add_test(s, "kill -9 mid-sweep, then the same command resumes", test_kill9_resume);
	return kt_test_main();
}
