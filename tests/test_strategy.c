/*
 * test_strategy.c -- the search strategies, without a GPU.
 *
 *  - Their contract on a real space (dense on sm_90a): nothing proposed
 *    twice, planted candidates first, budgets honoured, the same path for
 *    the same seed and reports.
 *  - Replay files: written, read back, refused when malformed.
 *  - Their quality, by replay: on the H200 recordings committed in
 *    tests/data/replay/ (when there are some) and on synthetic recordings
 *    made here from a performance model of the dense family, the guided
 *    strategy reaches 0.97 of the best speed with at most 20% of the trials
 *    and halving with at most 35% (means over three seeds); random at
 *    guided's budget is printed beside them for scale. The synthetic
 *    recordings test the machinery; only the H200 ones say how a strategy
 *    does on a GPU (docs/search.md).
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/family.h"
#include "testutil.h"
#include "tuner/replay.h"
#include "tuner/space.h"
#include "tuner/strategy.h"

static struct kt_target h200(void)
{
	struct kt_target t;

	CU_ASSERT_EQUAL(kt_target_named("sm_90a", &t), 0);
	t.sms = 132;
	t.l2_bytes = 60L << 20;
	t.smem_optin = 232448;
	t.max_threads = 1024;
	return t;
}

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A uniform in [0, 1) from a hash. */
static double unit(uint64_t h)
{
	return (double)(mix(h) >> 11) * 0x1.0p-53;
}

/* A model of a dense GEMM config's time (not a measurement): FLOPs over a
 * peak per variant, scaled by tile size, pipeline depth, consumers, L2
 * grouping and how well the tiles fill 132 SMs in waves, with a config's
 * own idiosyncrasy (+-6%, fixed by a hash of its key), 0.5% noise, and a
 * drift of up to 8% over the order the sweep ran them in (a GPU heating). */
static double synth_us(const struct kt_family *f, const struct kt_config *c,
		       const struct kt_shape *s, double progress, uint64_t seed)
{
	static const double stage_eff[] = { 0, 0, 0.72, 0.86, 1.0, 0.98, 0.95, 0, 0.9 };
	char key[512];
	long M = s->v[0], K = s->v[1], N = s->v[2];
	long bm = kt_config_get(f, c, "BLOCK_M"), bn = kt_config_get(f, c, "BLOCK_N");
	long st = kt_config_get(f, c, "STAGES"), g = kt_config_get(f, c, "GROUP_M");
	long cons = kt_config_get(f, c, "CONSUMERS"), sk = kt_config_get(f, c, "SPLIT_K");
	const char *v = f->variants[c->variant];
	double peak, eff, tiles, waves, fill, t;
	uint64_t h = seed;
	size_t i;

	kt_config_key(f, c, key, sizeof(key));
	for (i = 0; key[i]; i++)
		h = mix(h ^ (unsigned char)key[i]);
	peak = !strcmp(v, "wgmma_ws") ? 720e12 : !strcmp(v, "wgmma") ? 560e12 : 330e12;
	if (sk < 1)
		sk = 1;
	eff = pow(fmin(1.0, (double)(bm * bn) / (128.0 * 256.0)), 0.35);
	eff *= st >= 2 && st <= 8 && stage_eff[st] > 0 ? stage_eff[st] : 0.8;
	if (!strcmp(v, "wgmma_ws"))
		eff *= cons == 2 && bm >= 128 ? 1.0 : 0.86;
	tiles = (double)((M + bm - 1) / bm) * (double)((N + bn - 1) / bn) * (double)sk;
	if (tiles > 132 * 4)
		eff *= g == 8 ? 1.0 : 0.93;
	waves = ceil(tiles / 132.0);
	fill = tiles / (waves * 132.0);
	t = 2.0 * M * N * K / (peak * eff * fill) * 1e6 + 4.0 + (sk > 1 ? 0.02 * M * N / 1e4 : 0);
	t *= 1.0 + 0.12 * (unit(h) - 0.5);	/* the config's own +-6% */
	t *= exp(0.005 * (unit(h ^ 0x77) + unit(h ^ 0x99) - 1.0) * 2.45);	/* ~0.5% noise */
	t *= 1.0 + 0.08 * progress;
	return t;
}

/* A synthetic recording of the dense space at shape on sm_90a (only the
 * variants in vlist when it is not NULL, as `ktune sweep --variants`). */
static int synth_rec_v(const char *shape, const char *vlist, uint64_t seed, struct replay_rec *r)
{
	struct kt_target t = h200();
	struct kt_err e = { 0 };
	unsigned mask = 0;
	long i;

	memset(r, 0, sizeof(*r));
	r->f = kt_family_find("dense");
	if (kt_shape_parse(r->f, shape, &r->shape, &e) != 0 ||
	    space_build(r->f, &r->shape, &t, 0, &r->sp, &e) != 0)
		return -1;
	if (vlist) {
		if (space_variant_mask(r->f, vlist, &mask, &e) != 0)
			return -1;
		space_keep_variants(r->f, &r->sp, mask);
	}
	r->status = calloc((size_t)r->sp.n, sizeof(*r->status));
	r->us = calloc((size_t)r->sp.n, sizeof(*r->us));
	if (!r->status || !r->us)
		return -1;
	snprintf(r->device, sizeof(r->device), "synthetic H200-like model");
	snprintf(r->source, sizeof(r->source), "synthetic (tests/test_strategy.c), not a measurement");
	for (i = 0; i < r->sp.n; i++) {
		snprintf(r->status[i], sizeof(r->status[0]), "ok");
		r->us[i] = synth_us(r->f, &r->sp.cfg[i], &r->shape, (double)i / r->sp.n, seed);
	}
	return 0;
}

static int synth_rec(const char *shape, uint64_t seed, struct replay_rec *r)
{
	return synth_rec_v(shape, NULL, seed, r);
}

/* ---- the contract ---- */

static void drain(struct strategy *st, const struct replay_rec *r, long *order, long *n,
		  long max)
{
	long idx[32], k, i;

	*n = 0;
	while ((k = strategy_next(st, idx, 32)) > 0)
		for (i = 0; i < k; i++) {
			CU_ASSERT_TRUE_FATAL(*n < max);
			order[(*n)++] = idx[i];
			strategy_report(st, idx[i], r->us[idx[i]] > 0 ? r->us[idx[i]] : -1);
		}
}

static void test_contract(void)
{
	static const enum strategy_kind kinds[] = { STRATEGY_EXHAUSTIVE, STRATEGY_RANDOM,
						    STRATEGY_HALVING, STRATEGY_GUIDED };
	struct replay_rec r;
	struct kt_err e = { 0 };
	long *a, *b, na, nb, i;
	unsigned char *seen;
	size_t kk;

	CU_ASSERT_EQUAL_FATAL(synth_rec("tokens=2048,in=4096,out=4096", 5, &r), 0);
	CU_ASSERT_TRUE_FATAL(r.sp.n > 500);
	a = malloc((size_t)r.sp.n * sizeof(long));
	b = malloc((size_t)r.sp.n * sizeof(long));
	seen = calloc((size_t)r.sp.n, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && seen);
	for (kk = 0; kk < sizeof(kinds) / sizeof(kinds[0]); kk++) {
		struct strategy_spec spec = { kinds[kk], 0, 11, 0, NULL };
		struct strategy *s1 = NULL, *s2 = NULL;
		long budget;

		CU_ASSERT_EQUAL_FATAL(strategy_new(&spec, r.f, &r.shape, &r.sp, &s1, &e), 0);
		budget = strategy_planned(s1);
		drain(s1, &r, a, &na, r.sp.n);
		memset(seen, 0, (size_t)r.sp.n);
		for (i = 0; i < na; i++) {
			CU_ASSERT_FALSE(seen[a[i]]);	/* never twice */
			seen[a[i]] = 1;
		}
		CU_ASSERT_TRUE(na <= budget);
		if (kinds[kk] == STRATEGY_EXHAUSTIVE)
			CU_ASSERT_EQUAL(na, r.sp.n);
		if (kinds[kk] == STRATEGY_HALVING)	/* it spends its budget */
			CU_ASSERT_EQUAL(na, budget);
		CU_ASSERT_TRUE(strategy_stop_reason(s1)[0] != 0);
		/* the same seed and reports, the same path */
		CU_ASSERT_EQUAL_FATAL(strategy_new(&spec, r.f, &r.shape, &r.sp, &s2, &e), 0);
		drain(s2, &r, b, &nb, r.sp.n);
		CU_ASSERT_EQUAL(na, nb);
		CU_ASSERT_EQUAL(memcmp(a, b, (size_t)na * sizeof(long)), 0);
		printf("\n  %-10s proposed %4ld of %ld (%s)", strategy_name(kinds[kk]), na, r.sp.n,
		       strategy_stop_reason(s1));
		strategy_free(s1);
		strategy_free(s2);
		/* an explicit budget is a ceiling */
		spec.budget = 40;
		CU_ASSERT_EQUAL_FATAL(strategy_new(&spec, r.f, &r.shape, &r.sp, &s1, &e), 0);
		drain(s1, &r, a, &na, r.sp.n);
		CU_ASSERT_TRUE(na <= 40);
		if (kinds[kk] != STRATEGY_GUIDED)
			CU_ASSERT_EQUAL(na, 40);
		strategy_free(s1);
	}
	free(a);
	free(b);
	free(seen);
	replay_rec_release(&r);
}

/* Planted candidates come first, whatever the strategy, outside the budget. */
static void test_planted_first(void)
{
	const struct kt_family *f = kt_family_find("selftest");
	struct kt_shape s = { { 4096 } };
	struct kt_target t = h200();
	struct space sp;
	struct kt_err e = { 0 };
	int kind;

	CU_ASSERT_EQUAL_FATAL(space_build(f, &s, &t, 1, &sp, &e), 0);
	for (kind = 0; kind < 4; kind++) {
		struct strategy_spec spec = { (enum strategy_kind)kind, 1, 3, 0, NULL };
		struct strategy *st = NULL;
		long idx[64], k, i, planted = 0, real = 0;
		int first = 1;

		CU_ASSERT_EQUAL_FATAL(strategy_new(&spec, f, &s, &sp, &st, &e), 0);
		while ((k = strategy_next(st, idx, 64)) > 0) {
			for (i = 0; i < k; i++) {
				int p = (f->planted >> sp.cfg[idx[i]].variant) & 1;

				if (p)
					CU_ASSERT_TRUE(first);
				planted += p;
				real += !p;
				strategy_report(st, idx[i], 1.0);
			}
			first = 0;
		}
		CU_ASSERT_EQUAL(planted, 12);	/* six planted variants, UNROLL 1 and 2 */
		CU_ASSERT_EQUAL(real, 1);
		strategy_free(st);
	}
	space_release(&sp);
}

static void test_names(void)
{
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL(strategy_parse("guided"), STRATEGY_GUIDED);
	CU_ASSERT_EQUAL(strategy_parse("halving"), STRATEGY_HALVING);
	CU_ASSERT_EQUAL(strategy_parse(NULL), STRATEGY_EXHAUSTIVE);
	CU_ASSERT_EQUAL(strategy_parse("Guided"), -1);
	CU_ASSERT_EQUAL(strategy_check("random", &e), 0);
	CU_ASSERT_EQUAL(strategy_check("clairvoyant", &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "halving or guided"));
	CU_ASSERT_STRING_EQUAL(strategy_name(STRATEGY_GUIDED), "guided");
}

/* ---- replay files ---- */

static void test_file_round_trip(void)
{
	const char *path = kt_test_path("rec.txt");
	struct replay_rec r, back;
	struct kt_err e = { 0 };
	long i;

	CU_ASSERT_EQUAL_FATAL(synth_rec("tokens=1024,in=4096,out=4096", 3, &r), 0);
	snprintf(r.status[7], sizeof(r.status[7]), "launch_error");
	r.us[7] = 0;
	CU_ASSERT_EQUAL_FATAL(replay_write_file(&r, path, NULL, &e), 0);
	CU_ASSERT_EQUAL_FATAL(replay_load_file(path, &back, &e), 0);
	CU_ASSERT_EQUAL(back.f, r.f);
	CU_ASSERT_EQUAL(back.sp.n, r.sp.n);
	CU_ASSERT_EQUAL(memcmp(&back.shape, &r.shape, sizeof(r.shape)), 0);
	for (i = 0; i < r.sp.n; i++) {
		CU_ASSERT_EQUAL(memcmp(&back.sp.cfg[i], &r.sp.cfg[i], sizeof(r.sp.cfg[i])), 0);
		CU_ASSERT_STRING_EQUAL(back.status[i], r.status[i]);
		CU_ASSERT_DOUBLE_EQUAL(back.us[i], r.us[i], 1e-3);
	}
	CU_ASSERT_STRING_EQUAL(back.status[7], "launch_error");
	CU_ASSERT_PTR_NOT_NULL(strstr(back.source, "synthetic"));
	replay_rec_release(&back);
	replay_rec_release(&r);
}

static void expect_bad(const char *text, const char *want)
{
	const char *path = kt_test_path("bad.txt");
	struct replay_rec r;
	struct kt_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, text, strlen(text)), 0);
	CU_ASSERT_EQUAL(replay_load_file(path, &r, &e), -1);
	if (!strstr(e.msg, want))
		fprintf(stderr, "\"%s\" lacks \"%s\"\n", e.msg, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

static void test_file_refusals(void)
{
	static const char head[] = "# ktune replay 1\nfamily selftest\nshape n=64\nparams UNROLL\n";
	char buf[512];
	struct kt_err e = { 0 };
	struct replay_rec r;

	expect_bad("family selftest\n", "not a ktune replay file");
	expect_bad("# ktune replay 1\nfamily nope\n", "unknown family 'nope'");
	expect_bad("# ktune replay 1\nfamily selftest\nshape n=zero\n", ":3:");
	snprintf(buf, sizeof(buf), "%sok 1 ok\n", head);
	expect_bad(buf, ":5: want a status and a time");
	snprintf(buf, sizeof(buf), "%sok x ok 1.0\n", head);
	expect_bad(buf, "'x' is not a number");
	snprintf(buf, sizeof(buf), "%snope 1 ok 1.0\n", head);
	expect_bad(buf, "no variant nope");
	snprintf(buf, sizeof(buf), "%sok 1 ok 0\n", head);
	expect_bad(buf, "time > 0");
	snprintf(buf, sizeof(buf), "%sok 1 great 1.0\n", head);
	expect_bad(buf, "want a status");
	expect_bad(head, "no family, shape or configs");
	snprintf(buf, sizeof(buf), "%sok 1 ok 2.5\nwrong 2 wrong -\n", head);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(kt_test_path("good.txt"), buf, strlen(buf)), 0);
	CU_ASSERT_EQUAL(replay_load_file(kt_test_path("good.txt"), &r, &e), 0);
	CU_ASSERT_EQUAL(r.sp.n, 2);
	CU_ASSERT_EQUAL(r.sp.cfg[1].p[0], 2);
	CU_ASSERT_EQUAL(replay_best(&r), 0);
	replay_rec_release(&r);
	CU_ASSERT_EQUAL(replay_load_file(kt_test_path("none.txt"), &r, &e), -1);
}

/* ---- quality, by replay ---- */

/* The recording's real (not planted) configs. */
static long r_space(const struct replay_rec *r)
{
	long i, n = 0;

	for (i = 0; i < r->sp.n; i++)
		n += !(r->f->planted & (1u << r->sp.cfg[i].variant));
	return n;
}

struct tally {
	double fraction, speed, min_speed;
	int n;
};

static void check_targets(const struct tally t[3])
{
	/* the targets: guided >= 0.97 with <= 20%, halving >= 0.97
	 * with <= 35% (means over the seeds and recordings) */
	CU_ASSERT_TRUE(t[2].speed >= 0.97);
	CU_ASSERT_TRUE(t[2].fraction <= 0.20);
	CU_ASSERT_TRUE(t[1].speed >= 0.97);
	CU_ASSERT_TRUE(t[1].fraction <= 0.35);
}

/* Replays every strategy on every recording and seed; t: the means over all
 * of them. each: the targets must hold on each recording's own means too
 * (the issue asks them per problem). */
static void replay_all(struct replay_rec *recs, int nrec, const char *what, int transfer,
		       int each, struct tally t[3])
{
	static const enum strategy_kind kinds[] = { STRATEGY_RANDOM, STRATEGY_HALVING,
						    STRATEGY_GUIDED };
	struct kt_err e = { 0 };
	/* KTUNE_REPLAY_SEEDS=N averages over more seeds, when working on a
	 * strategy (the targets are checked over 5: over 3 a per-recording
	 * mean sits within the seed noise -- docs/search.md) */
	int i, k, seed, nseeds = getenv("KTUNE_REPLAY_SEEDS") ? atoi(getenv("KTUNE_REPLAY_SEEDS")) : 5;

	memset(t, 0, 3 * sizeof(*t));
	for (i = 0; i < nrec; i++) {
		struct strategy_prior_row *prior = NULL;
		struct tally one[3];
		long nprior = 0;

		memset(one, 0, sizeof(one));
		if (transfer)
			CU_ASSERT_EQUAL(replay_prior(recs, nrec, i, &prior, &nprior, &e), 0);
		for (k = 0; k < 3; k++)
			for (seed = 1; seed <= nseeds; seed++) {
				struct strategy_prior pr = { prior, nprior };
				struct strategy_spec spec = { kinds[k], 0, (uint64_t)seed, 0, &pr };
				struct replay_result res;
				double t0 = (double)clock() / CLOCKS_PER_SEC;

				/* random gets guided's budget, for scale */
				if (kinds[k] == STRATEGY_RANDOM)
					spec.budget = (r_space(&recs[i]) + 4) / 5;
				CU_ASSERT_EQUAL_FATAL(replay_run(&recs[i], &spec, &res, &e), 0);
				printf("\n  %s %d %-8s seed %d: %4ld/%ld trials, speed %.4f (%s, %.1f s)",
				       what, i, strategy_name(kinds[k]), seed, res.trials, res.space,
				       res.speed, res.stop, (double)clock() / CLOCKS_PER_SEC - t0);
				t[k].fraction += (double)res.trials / res.space;
				t[k].speed += res.speed;
				one[k].fraction += (double)res.trials / res.space / nseeds;
				one[k].speed += res.speed / nseeds;
				if (t[k].n == 0 || res.speed < t[k].min_speed)
					t[k].min_speed = res.speed;
				t[k].n++;
			}
		free(prior);
		if (each) {
			printf("\n  %s %d means: guided %.1f%% %.4f, halving %.1f%% %.4f", what, i,
			       100 * one[2].fraction, one[2].speed, 100 * one[1].fraction, one[1].speed);
			check_targets(one);
		}
	}
	for (k = 0; k < 3; k++) {
		t[k].fraction /= t[k].n ? t[k].n : 1;
		t[k].speed /= t[k].n ? t[k].n : 1;
		printf("\n  %s %-8s mean: %.1f%% of the trials, speed %.4f (lowest %.4f)", what,
		       strategy_name(kinds[k]), 100 * t[k].fraction, t[k].speed, t[k].min_speed);
	}
}

/* The whole dense space at one shape, and the wgmma_ws variant's alone
 * (84 configs, as the bench sweeps it) at three more. */
static void test_synthetic_quality(void)
{
	static const char *const shapes[] = { "tokens=8192,in=8192,out=8192",
					      "tokens=16384,in=8192,out=8192",
					      "tokens=4096,in=4096,out=11008",
					      "tokens=1024,in=11008,out=4096" };
	struct replay_rec recs[4];
	struct tally t[3];
	int i;

	for (i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(synth_rec_v(shapes[i], i ? "wgmma_ws" : NULL, 100 + (uint64_t)i,
						  &recs[i]), 0);
	replay_all(recs, 4, "synthetic", 1, 0, t);
	check_targets(t);
	/* and without the transfer prior */
	replay_all(recs, 4, "synthetic, no prior,", 0, 0, t);
	check_targets(t);
	for (i = 0; i < 4; i++)
		replay_rec_release(&recs[i]);
}

/* Every committed GPU recording: tests/data/replay/ holds one .txt a sweep. */
static void test_gpu_quality(void)
{
	char dir[4096], path[4600];
	struct replay_rec recs[16];
	struct kt_err e = { 0 };
	struct tally t[3];
	struct dirent *de;
	DIR *d;
	int n = 0, i;

	/* run from the repository root, as make test does */
	snprintf(dir, sizeof(dir), "%s/tests/data/replay",
		 getenv("KTUNE_SOURCE_DIR") ? getenv("KTUNE_SOURCE_DIR") : ".");
	if (!(d = opendir(dir))) {
		printf("\n  no %s: nothing recorded on a GPU to replay yet", dir);
		return;
	}
	while ((de = readdir(d)) && n < 16) {
		size_t len = strlen(de->d_name);

		if (len < 4 || strcmp(de->d_name + len - 4, ".txt") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (replay_load_file(path, &recs[n], &e) != 0) {
			fprintf(stderr, "%s\n", e.msg);
			CU_FAIL("a committed recording does not load");
			kt_err_clear(&e);
			continue;
		}
		n++;
	}
	closedir(d);
	if (n == 0) {
		printf("\n  no GPU recordings in %s yet", dir);
		return;
	}
	replay_all(recs, n, "GPU", 1, 1, t);
	check_targets(t);
	for (i = 0; i < n; i++)
		replay_rec_release(&recs[i]);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("strategies: the contract", NULL, NULL);
	CU_add_test(s, "names checked in one place", test_names);
	CU_add_test(s, "nothing twice, budgets, same seed same path", test_contract);
	CU_add_test(s, "planted candidates first, outside the budget", test_planted_first);
	s = CU_add_suite("replay files", NULL, NULL);
	CU_add_test(s, "written and read back", test_file_round_trip);
	CU_add_test(s, "malformed files refused with the line", test_file_refusals);
	s = CU_add_suite("strategies by replay", NULL, NULL);
	CU_add_test(s, "synthetic dense recordings: guided and halving reach 0.97",
		    test_synthetic_quality);
	CU_add_test(s, "GPU recordings: guided and halving reach 0.97", test_gpu_quality);
	return kt_test_main();
}
