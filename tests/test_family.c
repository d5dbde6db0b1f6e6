/*
 * test_family.c -- family.c and the dense and lowrank families on the CPU:
 * the registry, shape and config text, space enumeration, resource
 * checks, their plans, measured defaults and CPU references, inputs and
 * bf16 conversion. What every family promises (spaces, keys, plans,
 * defaults, cpu_ref against the emulated plans) is test_conformance's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "kernels/gemm_plan.h"
#include "famtest.h"
#include "plan_emu.h"
#include "testutil.h"

static const struct kt_family *dense, *lowrank;

static int init_suite(void)
{
	dense = kt_family_find("dense");
	lowrank = kt_family_find("lowrank");
	return dense && lowrank ? 0 : 1;
}

/* ---- registry ---- */

/* A floor comes from the device's own measured peaks; a device never
 * measured (or none) has an unknown floor (0), never another card's. */
static void test_peaks(void)
{
	const struct kt_family *f = kt_family_find("dense");
	struct kt_shape s;
	struct kt_peaks p;
	struct kt_err err = { 0 };
	double h200;

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, "tokens=1024,in=4096,out=4096", &s, &err), 0);
	CU_ASSERT_EQUAL(kt_peaks_of("NVIDIA H200", &p), 1);
	CU_ASSERT(p.flops > 1e14 && p.bytes > 1e12);
	/* 2 * 1024 * 4096 * 4096 FLOPs at the H200's rate: compute-bound */
	h200 = kt_floor_us(f, &s, "nvidia h200");
	CU_ASSERT_DOUBLE_EQUAL(h200, 2.0 * 1024 * 4096 * 4096 / p.flops * 1e6, 1e-9);
	CU_ASSERT_EQUAL(kt_peaks_of("NVIDIA H100 80GB HBM3", &p), 1);
	CU_ASSERT(p.bytes < 4.3e12);	/* its own, not the H200's */
	CU_ASSERT_EQUAL(kt_peaks_of("Some Future GPU", &p), 0);
	CU_ASSERT_EQUAL(p.flops, 0);
	CU_ASSERT_EQUAL(p.bytes, 0);
	CU_ASSERT_EQUAL(kt_floor_us(f, &s, "Some Future GPU"), 0);
	CU_ASSERT_EQUAL(kt_floor_us(f, &s, NULL), 0);
}

static void test_registry(void)
{
	const struct kt_family *st = kt_family_find("selftest");
	int i, visible = 0;

	CU_ASSERT_STRING_EQUAL(dense->name, "dense");
	CU_ASSERT_STRING_EQUAL(lowrank->name, "lowrank");
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	CU_ASSERT_EQUAL(st->hidden, 1);
	CU_ASSERT_PTR_NULL(kt_family_find("nope"));
	CU_ASSERT_PTR_NULL(kt_family_find(NULL));
	CU_ASSERT_PTR_NULL(kt_family_at(-1));
	CU_ASSERT_PTR_NULL(kt_family_at(kt_family_count()));
	CU_ASSERT(kt_family_count() >= 3);
	/* each descriptor: test_conformance */
	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		CU_ASSERT_PTR_EQUAL(kt_family_find(f->name), f);
		visible += !f->hidden;
	}
	CU_ASSERT(visible >= 2);
}

/* ---- shapes ---- */

static void test_shape_roundtrip(void)
{
	struct kt_shape s, s2;
	struct kt_err e = {0};
	char key[128], key2[128];
	int n;

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lowrank, "rank=256,out=4096,tokens=1024,in=2048", &s, &e), 0);
	CU_ASSERT_EQUAL(kt_shape_get(lowrank, &s, "tokens"), 1024);
	CU_ASSERT_EQUAL(kt_shape_get(lowrank, &s, "in"), 2048);
	CU_ASSERT_EQUAL(kt_shape_get(lowrank, &s, "out"), 4096);
	CU_ASSERT_EQUAL(kt_shape_get(lowrank, &s, "rank"), 256);
	CU_ASSERT_EQUAL(kt_shape_get(lowrank, &s, "blocks"), -1);
	n = kt_shape_key(lowrank, &s, key, sizeof(key));
	CU_ASSERT_EQUAL(n, (int)strlen(key));
	CU_ASSERT_STRING_EQUAL(key, "tokens=1024,in=2048,out=4096,rank=256");
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(lowrank, key, &s2, &e), 0);
	kt_shape_key(lowrank, &s2, key2, sizeof(key2));
	CU_ASSERT_STRING_EQUAL(key, key2);
	/* snprintf semantics: the full length even when truncated */
	CU_ASSERT_EQUAL(kt_shape_key(lowrank, &s, key2, 8), n);
	CU_ASSERT_EQUAL(strlen(key2), 7);
	/* range ends are inclusive */
	CU_ASSERT_EQUAL(kt_shape_parse(dense, "tokens=1,in=16,out=65536", &s, &e), 0);
}

static void expect_shape_error(const struct kt_family *f, const char *text, const char *a,
			       const char *b)
{
	struct kt_shape s;
	struct kt_err e = {0};

	CU_ASSERT_EQUAL(kt_shape_parse(f, text, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	if (a && !strstr(e.msg, a))
		fprintf(stderr, "\n  '%s': message '%s' lacks '%s'\n", text, e.msg, a);
	CU_ASSERT(!a || strstr(e.msg, a) != NULL);
	CU_ASSERT(!b || strstr(e.msg, b) != NULL);
}

static void test_shape_errors(void)
{
	/* unknown key: names it and the keys allowed */
	expect_shape_error(dense, "tokens=1,in=64,out=64,rank=8", "rank", "tokens, in, out");
	/* missing key */
	expect_shape_error(dense, "tokens=1,in=64", "missing key 'out'", NULL);
	expect_shape_error(dense, "", "missing", NULL);
	/* duplicate */
	expect_shape_error(dense, "tokens=1,in=64,in=64,out=64", "'in' given twice", NULL);
	/* non-integer */
	expect_shape_error(dense, "tokens=1x,in=64,out=64", "not an integer", NULL);
	expect_shape_error(dense, "tokens=1.5,in=64,out=64", "not an integer", NULL);
	expect_shape_error(dense, "tokens=,in=64,out=64", "not an integer", NULL);
	expect_shape_error(dense, "tokens= 1,in=64,out=64", "not an integer", NULL);
	expect_shape_error(dense, "tokens=99999999999999999999999,in=64,out=64", "not an integer",
			   NULL);
	/* out of range, with the range */
	expect_shape_error(dense, "tokens=0,in=64,out=64", "tokens=0 out of range", "[1, 1048576]");
	expect_shape_error(dense, "tokens=8,in=8,out=64", "in=8 out of range", "[16, 65536]");
	expect_shape_error(lowrank, "tokens=8,in=64,out=64,rank=-8", "rank", "range");
	/* malformed lists */
	expect_shape_error(dense, "tokens=1,in=64,out=64,", "trailing comma", NULL);
	expect_shape_error(dense, "tokens=1,in,out=64", "not key=value", NULL);
	expect_shape_error(dense, "=1,in=64,out=64", "bad item", NULL);
}

/* ---- configs ---- */

/* Every key of every space round-trips: test_conformance. */
static void test_config_roundtrip(void)
{
	struct kt_config c;
	struct kt_err e = {0};
	char key[256];

	/* only the variant's own params are in the key */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank,
		"variant=fused,BLOCK_M=64,BLOCK_N=128,BLOCK_K=32,WARPS_M=2,WARPS_N=4,STAGES=3,N_SPLIT=8",
		&c, &e), 0);
	kt_config_key(lowrank, &c, key, sizeof(key));
	CU_ASSERT_PTR_NULL(strstr(key, "Z_BLOCK"));
	CU_ASSERT_PTR_NULL(strstr(key, "GROUP_M"));
	CU_ASSERT_PTR_NOT_NULL(strstr(key, "N_SPLIT=8"));
	CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "N_SPLIT"), 8);
	CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "NOPE"), -1);
	CU_ASSERT_EQUAL(kt_variant_index(lowrank, "fused"), c.variant);
	CU_ASSERT_EQUAL(kt_variant_index(lowrank, "nope"), -1);
	/* planted variants carry no params */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense, "variant=planted_hang", &c, &e), 0);
	kt_config_key(dense, &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "variant=planted_hang");
}

static void expect_config_error(const struct kt_family *f, const char *text, const char *want)
{
	struct kt_config c;
	struct kt_err e = {0};

	CU_ASSERT_EQUAL(kt_config_parse(f, text, &c, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	if (!strstr(e.msg, want))
		fprintf(stderr, "\n  '%s': message '%s' lacks '%s'\n", text, e.msg, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

static void test_config_errors(void)
{
	const char *ok = "BLOCK_M=64,BLOCK_N=128,BLOCK_K=32,WARPS_M=2,WARPS_N=4,STAGES=3";
	char buf[256];

	expect_config_error(dense, ok, "missing or unknown variant");
	snprintf(buf, sizeof(buf), "variant=wgmma9,%s,GROUP_M=8", ok);
	expect_config_error(dense, buf, "mma_sync");	/* lists the variants */
	snprintf(buf, sizeof(buf), "variant=mma_sync,%s", ok);
	expect_config_error(dense, buf, "missing parameter 'GROUP_M'");
	snprintf(buf, sizeof(buf), "variant=mma_sync,%s,GROUP_M=8,STAGES=4", ok);
	expect_config_error(dense, buf, "'STAGES' given twice");
	snprintf(buf, sizeof(buf), "variant=mma_sync,%s,GROUP_M=8,N_SPLIT=2", ok);
	expect_config_error(dense, buf, "no parameter 'N_SPLIT'");
	snprintf(buf, sizeof(buf), "variant=unfused,%s,GROUP_M=8,Z_BLOCK_M=64,Z_BLOCK_N=64,N_SPLIT=2",
		 ok);
	expect_config_error(lowrank, buf, "no parameter 'N_SPLIT'");
	snprintf(buf, sizeof(buf), "variant=mma_sync,%s,GROUP_M=eight", ok);
	expect_config_error(dense, buf, "not an integer");
	snprintf(buf, sizeof(buf), "variant=mma_sync,%s,GROUP_M=-1", ok);
	expect_config_error(dense, buf, "not an integer");
	expect_config_error(dense, "variant=planted_fault,", "trailing comma");
}

/* A parameter added to a space later (optional 1) takes its `absent` value
 * when a stored key lacks it; a required one is still an error. */
static void test_config_absent(void)
{
	static const char *const variants[] = {"a", "b"};
	static const struct kt_param params[] = {
		{"OLD", 2, {1, 2}, 3, "there from the start"},
		{"NEW", 2, {0, 7}, 1, "added later, variant a only", 1, 7},
	};
	struct kt_family f;
	struct kt_config c;
	struct kt_err e = {0};
	char key[128];

	memset(&f, 0, sizeof(f));
	f.name = "absent";
	f.nvariants = 2;
	f.variants = variants;
	f.nparams = 2;
	f.params = params;
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(&f, "variant=a,OLD=2", &c, &e), 0);
	CU_ASSERT_EQUAL(c.p[0], 2);
	CU_ASSERT_EQUAL(c.p[1], 7);
	kt_config_key(&f, &c, key, sizeof(key));
	CU_ASSERT_STRING_EQUAL(key, "variant=a,OLD=2,NEW=7");	/* new keys name it */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(&f, "variant=a,OLD=1,NEW=0", &c, &e), 0);
	CU_ASSERT_EQUAL(c.p[1], 0);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(&f, "variant=b,OLD=1", &c, &e), 0);
	CU_ASSERT_EQUAL(c.p[1], 0);	/* b does not use it */
	expect_config_error(&f, "variant=a,NEW=0", "missing parameter 'OLD'");
	expect_config_error(&f, "variant=b,OLD=1,NEW=7", "no parameter 'NEW'");
}

/* ---- enumeration ---- */

struct count_ctx {
	const struct kt_family *f;
	struct kt_shape s;
	struct kt_target t;
	long all, valid, planted;
	struct kt_config first;
};

static int count_one(const struct kt_config *c, void *arg)
{
	struct count_ctx *x = arg;
	char why[200] = "";

	if (x->all++ == 0)
		x->first = *c;
	if ((x->f->planted >> c->variant) & 1u)
		x->planted++;
	if (x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)) == 0)
		x->valid++;
	else
		CU_ASSERT(why[0] != 0);	/* every rejection says why */
	return 0;
}

static int stop_at_3(const struct kt_config *c, void *arg)
{
	(void)c;
	return ++*(int *)arg == 3 ? 42 : 0;
}

/* The sizes of the spaces: test_conformance. */
static void test_space(void)
{
	struct count_ctx a, b;
	int i, n = 0;

	memset(&a, 0, sizeof(a));
	a.f = dense;
	a.s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	a.t = ft_target("sm_90");
	b = a;
	CU_ASSERT_EQUAL(kt_space_foreach(dense, 0, count_one, &a), 0);
	CU_ASSERT_EQUAL(a.planted, 0);
	kt_space_foreach(dense, 1, count_one, &b);
	CU_ASSERT_EQUAL(b.all, kt_space_size(dense, 1));
	CU_ASSERT_EQUAL(b.planted, 2);	/* planted_fault, planted_hang */
	CU_ASSERT_EQUAL(b.all, a.all + 2);
	/* fixed order: the first config is every param's first value (0 for
	 * the params the first variant does not use) */
	CU_ASSERT_EQUAL(a.first.variant, 0);
	for (i = 0; i < dense->nparams; i++)
		CU_ASSERT_EQUAL(a.first.p[i],
				(dense->params[i].variants & 1u) ? dense->params[i].values[0] : 0);
	/* a useful but pruned space */
	CU_ASSERT(a.valid > 20);
	CU_ASSERT(a.valid < a.all);
	printf("\n  dense space %ld, valid on sm_90 at 1024x4096x4096: %ld\n", a.all, a.valid);
	/* wgmma configs join on sm_90a only */
	memset(&b, 0, sizeof(b));
	b.f = dense;
	b.s = a.s;
	b.t = ft_target("sm_90a");
	kt_space_foreach(dense, 0, count_one, &b);
	CU_ASSERT(b.valid > a.valid);
	printf("  valid on sm_90a: %ld\n", b.valid);
	/* early stop returns fn's value */
	CU_ASSERT_EQUAL(kt_space_foreach(dense, 0, stop_at_3, &n), 42);
	CU_ASSERT_EQUAL(n, 3);

	memset(&a, 0, sizeof(a));
	a.f = lowrank;
	a.s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=256");
	a.t = ft_target("sm_90");
	kt_space_foreach(lowrank, 0, count_one, &a);
	CU_ASSERT_EQUAL(a.all, kt_space_size(lowrank, 0));
	CU_ASSERT(a.valid > 20);
	printf("  lowrank space %ld, valid on sm_90 at r=256: %ld\n", a.all, a.valid);
}

/* ---- resource checks ---- */

static int dense_cfg(struct kt_config *c, long bm, long bn, long bk, long wm, long wn, long st)
{
	char buf[200];
	struct kt_err e = {0};

	snprintf(buf, sizeof(buf),
		 "variant=mma_sync,BLOCK_M=%ld,BLOCK_N=%ld,BLOCK_K=%ld,WARPS_M=%ld,WARPS_N=%ld,"
		 "STAGES=%ld,GROUP_M=8,SPLIT_K=1", bm, bn, bk, wm, wn, st);
	return kt_config_parse(dense, buf, c, &e);
}

static void test_check(void)
{
	struct kt_shape s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	struct kt_target t90 = ft_target("sm_90"), t86 = ft_target("sm_86"), t80 = ft_target("sm_80");
	struct kt_target small;
	struct kt_config c;
	char why[200];

	/* 3 x (128+256) x 64 x 2 = 147456 B: fits sm_90 and sm_80, not sm_86 */
	CU_ASSERT_EQUAL_FATAL(dense_cfg(&c, 128, 256, 64, 2, 4, 3), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t80, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t86, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	/* 5 stages of it exceed even sm_90's 232448 B */
	dense_cfg(&c, 128, 256, 64, 2, 4, 5);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	/* 256 x 256 on 4 warps: 512 accumulators per thread */
	dense_cfg(&c, 256, 256, 32, 2, 2, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "accumulators"));
	/* threads over the target's limit */
	small = t90;
	small.max_threads = 256;
	dense_cfg(&c, 128, 128, 32, 4, 4, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &small, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "threads"));
	/* warp tile must be 16 x 16 multiples */
	dense_cfg(&c, 16, 32, 32, 2, 1, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "warp tile"));
	/* alignment: out not a multiple of 8 */
	s = ft_shape(dense, "tokens=1024,in=4096,out=4100");
	dense_cfg(&c, 128, 128, 32, 2, 2, 3);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "multiples of 8"));
	/* a 256-row tile for 16 tokens is pruned, a 16-row one is not */
	s = ft_shape(dense, "tokens=16,in=4096,out=4096");
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	dense_cfg(&c, 16, 64, 64, 1, 4, 4);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 0);
	/* wgmma: sm_90a only, 64-row warpgroups, 3+ stages */
	{
		struct kt_err e = {0};
		struct kt_target t90a = ft_target("sm_90a");
		struct kt_shape big = ft_shape(dense, "tokens=1024,in=4096,out=4096");

		CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense, "variant=wgmma,BLOCK_M=128,BLOCK_N=256,"
					"STAGES=4,GROUP_M=8,SPLIT_K=1", &c, &e), 0);
		CU_ASSERT_EQUAL(dense->check(dense, &big, &c, &t90a, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(dense->check(dense, &big, &c, &t90, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
		c.p[0] = 32;
		CU_ASSERT_EQUAL(dense->check(dense, &big, &c, &t90a, why, sizeof(why)), 1);
		c.p[0] = 128;
		c.p[5] = 5;	/* 5 x 384 x 128 B > 227 KiB */
		CU_ASSERT_EQUAL(dense->check(dense, &big, &c, &t90a, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
		c.p[5] = 2;
		CU_ASSERT_EQUAL(dense->check(dense, &big, &c, &t90a, why, sizeof(why)), 1);
		c.p[5] = 4;
		{
			struct kt_plan p;

			CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &big, &c, &t90a, &p, &e), 0);
			CU_ASSERT_EQUAL(p.launch[0].block[0], 256);	/* 2 warpgroups */
			CU_ASSERT_EQUAL(p.launch[0].smem, 4 * (128 + 256) * 64 * 2 + 1024);
			CU_ASSERT_STRING_EQUAL(p.programs[0].defines[p.programs[0].ndefines - 1],
					       "WGMMA=1");
		}
	}
	/* planted variants always "fit": they are meant to fail at run time */
	c.variant = kt_variant_index(dense, "planted_fault");
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 0);
}

static void test_check_lowrank(void)
{
	struct kt_shape s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=1024");
	struct kt_target t = ft_target("sm_90");
	struct kt_config c;
	struct kt_err e = {0};
	char why[200];

	CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank,
		"variant=fused,BLOCK_M=64,BLOCK_N=128,BLOCK_K=32,WARPS_M=2,WARPS_N=4,STAGES=3,N_SPLIT=8",
		&c, &e), 0);
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "rank <= 256"));
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=256");
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 0);
	/* N_SPLIT beyond the out tiles */
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=512,rank=256");
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "N_SPLIT"));
	/* z tile + ring over the sm_86 limit */
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=256");
	t = ft_target("sm_86");
	c.p[0] = 128;	/* BLOCK_M: 64 KiB z + 3 x 384 x 64 B ring */
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 1);
}

/* Every default is a valid config of the space: test_conformance. These
 * are the measured ones. */
static void test_defaults(void)
{
	const char *targets[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
	size_t i, j;

	/* dense at 16 tokens: the list's decode tile, on sm_90 with an 8-deep
	 * ring (bench/results/dense_decode.json), elsewhere the list's 5 stages */
	{
		struct kt_shape s = ft_shape(dense, "tokens=16,in=4096,out=4096");
		struct kt_config c;

		for (j = 0; j < sizeof(targets) / sizeof(targets[0]); j++) {
			struct kt_target t = ft_target(targets[j]);

			CU_ASSERT_EQUAL_FATAL(dense->default_config(dense, &s, &t, &c), 0);
			CU_ASSERT_STRING_EQUAL(dense->variants[c.variant], "mma_sync");
			CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_M"), 16);
			CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_N"), 32);
			CU_ASSERT_EQUAL(kt_config_get(dense, &c, "STAGES"), t.sm == 90 ? 8 : 5);
			CU_ASSERT(kt_config_in_space(dense, &c));
		}
	}
	/* lowrank at decode on sm_90: the mma.sync pair with the measured
	 * tiles, z split in 4 (16 tokens; 64) or less where the split
	 * is refused, y (and the reduce) as programmatic dependents; from 65
	 * tokens the wgmma default, and the ws pair once a ws y tile fills
	 * half the SMs (132 on the test target) */
	{
		static const struct {
			const char *shape;
			long bm, zbm, zsplit;
			const char *variant;
		} want[] = {
			{"tokens=16,in=4096,out=4096,rank=1024", 16, 16, 4, "unfused"},
			{"tokens=64,in=4096,out=4096,rank=1024", 32, 32, 4, "unfused"},
			{"tokens=1,in=768,out=3072,rank=64", 16, 16, 2, "unfused"},
			{"tokens=65,in=4096,out=4096,rank=1024", 0, 0, 0, "unfused_wgmma"},
			{"tokens=512,in=4096,out=4096,rank=1024", 0, 0, 0, "unfused_ws"},
			{"tokens=3000,in=4096,out=4096,rank=1024", 0, 0, 0, "unfused_ws"},
		};
		struct kt_target t = ft_target("sm_90a");

		for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			struct kt_shape s = ft_shape(lowrank, want[i].shape);
			struct kt_config c;

			CU_ASSERT_EQUAL_FATAL(lowrank->default_config(lowrank, &s, &t, &c), 0);
			CU_ASSERT_STRING_EQUAL(lowrank->variants[c.variant], want[i].variant);
			CU_ASSERT(kt_config_in_space(lowrank, &c));
			if (!strcmp(want[i].variant, "unfused_ws")) {
				/* 128 x 256 where it fills half the SMs (3000 tokens:
				 * 24 x 16 tiles), else 128 x 128 (512: 4 x 32) */
				long bn = s.v[0] >= 1024 ? 256 : 128;

				CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "BLOCK_M"), 128);
				CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "BLOCK_N"), bn);
				CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "CONSUMERS"), 2);
				CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "Z_SPLIT_K"), 1);
			}
			if (!want[i].bm)
				continue;
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "BLOCK_M"), want[i].bm);
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "Z_BLOCK_M"), want[i].zbm);
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "Z_SPLIT_K"), want[i].zsplit);
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "PDL"), 1);
			/* 32-wide tiles on an 8-deep ring (bench/results/lowrank_decode.json) */
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "BLOCK_N"), 32);
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "Z_BLOCK_N"), 32);
			CU_ASSERT_EQUAL(kt_config_get(lowrank, &c, "STAGES"), 8);
		}
	}
}

/* The families' spaces keep rings deeper than 5 to the decode tiles
 * (BLOCK_M <= 32); the kernel itself runs them at any tile. */
static void test_ring_rule(void)
{
	struct kt_target t = ft_target("sm_90a");
	struct kt_gemm_tile g;
	char why[200] = "";

	memset(&g, 0, sizeof(g));
	g.bm = 64;
	g.bn = 64;
	g.bk = 32;
	g.wm = 2;
	g.wn = 2;
	g.stages = 6;
	g.group_m = 8;
	g.split_k = 1;
	CU_ASSERT_EQUAL(kt_gemm_check(&g, 1024, 4096, 4096, 0, &t, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(kt_gemm_check_space(&g, 1024, 4096, 4096, 0, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "decode tiles"));
	g.stages = 5;
	CU_ASSERT_EQUAL(kt_gemm_check_space(&g, 1024, 4096, 4096, 0, &t, why, sizeof(why)), 0);
	g.bm = 32;
	g.wm = 1;
	g.stages = 8;
	CU_ASSERT_EQUAL(kt_gemm_check_space(&g, 32, 4096, 4096, 0, &t, why, sizeof(why)), 0);
	g.bm = 16;
	CU_ASSERT_EQUAL(kt_gemm_check_space(&g, 16, 4096, 4096, 0, &t, why, sizeof(why)), 0);
	/* and through a family: dense's mma_sync at STAGES 8 */
	{
		struct kt_shape s16 = ft_shape(dense, "tokens=16,in=4096,out=4096");
		struct kt_shape s1k = ft_shape(dense, "tokens=1024,in=4096,out=4096");
		struct kt_config c;
		struct kt_err e = {0};

		CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense, "variant=mma_sync,BLOCK_M=16,BLOCK_N=32,"
			"BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=8,GROUP_M=1,SPLIT_K=1", &c, &e), 0);
		CU_ASSERT_EQUAL(dense->check(dense, &s16, &c, &t, why, sizeof(why)), 0);
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense, "variant=mma_sync,BLOCK_M=64,BLOCK_N=64,"
			"BLOCK_K=32,WARPS_M=2,WARPS_N=2,STAGES=8,GROUP_M=1,SPLIT_K=1", &c, &e), 0);
		CU_ASSERT_EQUAL(dense->check(dense, &s1k, &c, &t, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "decode tiles"));
	}
}

static int has_define(const struct kt_program *p, const char *d);

/* lowrank unfused with PDL 1: both programs carry gemm.cu's PDL prologue;
 * the z GEMM (first after the L2 flush) is not flagged, its split-K reduce
 * and the y GEMM are; on sm_80 it is refused. */
static void test_lowrank_pdl(void)
{
	struct kt_shape s = ft_shape(lowrank, "tokens=16,in=4096,out=4096,rank=1024");
	struct kt_target t = ft_target("sm_90a"), t80 = ft_target("sm_80");
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e = {0};
	char why[200];
	int k, pr;

	for (k = 0; k < 2; k++) {
		CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank, k ?
			"variant=unfused,BLOCK_M=16,BLOCK_N=64,BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=4,"
			"GROUP_M=8,Z_BLOCK_M=16,Z_BLOCK_N=64,Z_SPLIT_K=4,PDL=1" :
			"variant=unfused,BLOCK_M=16,BLOCK_N=64,BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=4,"
			"GROUP_M=8,Z_BLOCK_M=16,Z_BLOCK_N=64,Z_SPLIT_K=1,PDL=1", &c, &e), 0);
		CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
		CU_ASSERT_EQUAL_FATAL(p.nlaunch, k ? 3 : 2);
		CU_ASSERT_EQUAL(p.launch[0].pdl, 0);
		CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "gemm_tn");
		if (k)
			CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "splitk_reduce");
		for (pr = 1; pr < p.nlaunch; pr++)
			CU_ASSERT_EQUAL(p.launch[pr].pdl, 1);
		for (pr = 0; pr < p.nprograms; pr++) {
			CU_ASSERT(has_define(&p.programs[pr], "KT_PDL=1"));
			CU_ASSERT(has_define(&p.programs[pr], "PDL_PREFETCH=1"));
		}
		CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t80, why, sizeof(why)), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90+"));
	}
	/* keys from before PDL mean plain launches */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank,
		"variant=unfused,BLOCK_M=16,BLOCK_N=64,BLOCK_K=64,WARPS_M=1,WARPS_N=2,STAGES=4,"
		"GROUP_M=8,Z_BLOCK_M=16,Z_BLOCK_N=64,Z_SPLIT_K=4", &c, &e), 0);
	CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
	for (pr = 0; pr < p.nlaunch; pr++)
		CU_ASSERT_EQUAL(p.launch[pr].pdl, 0);
	CU_ASSERT(!has_define(&p.programs[0], "PDL_PREFETCH=1"));
}

/* ---- plans ---- */

/* A tensor map argument the worker can encode: rank 2..3, contiguous dim 0,
 * 16-byte strides, boxes of 1..256 whose inner row fits the swizzle span,
 * and every addressable element inside its buffer. */
static void check_tmap(const struct kt_arg *x, const struct kt_buf *bufs, int nbufs)
{
	const struct kt_tmap *m = &x->tmap;
	size_t es, last = 0;
	int k;

	CU_ASSERT_FATAL(x->buf >= 0 && x->buf < nbufs);
	es = kt_dtype_size(bufs[x->buf].dtype);
	CU_ASSERT(m->rank >= 2 && m->rank <= 3);
	CU_ASSERT_EQUAL(m->strides[0], 1);
	CU_ASSERT(m->swizzle == 0 || m->swizzle == 32 || m->swizzle == 64 || m->swizzle == 128);
	CU_ASSERT(((size_t)m->box[0] * es) % 16 == 0);
	CU_ASSERT(m->swizzle == 0 || (size_t)m->box[0] * es <= (size_t)m->swizzle);
	for (k = 0; k < m->rank && k < 3; k++) {
		CU_ASSERT(m->dims[k] > 0);
		CU_ASSERT(m->box[k] >= 1 && m->box[k] <= 256);
		if (k > 0)
			CU_ASSERT(((size_t)m->strides[k] * es) % 16 == 0);
		last += (size_t)(m->dims[k] - 1) * (size_t)m->strides[k];
	}
	CU_ASSERT(last < bufs[x->buf].elems);
}

static void check_args_bufs(const struct kt_plan *p, const struct kt_buf *bufs, int nbufs)
{
	int l, a;

	for (l = 0; l < p->nlaunch; l++)
		for (a = 0; a < p->launch[l].nargs; a++)
			if (p->launch[l].args[a].kind == KT_ARG_TMAP)
				check_tmap(&p->launch[l].args[a], bufs, nbufs);
}

static void check_args(const struct kt_plan *p, int nbufs)
{
	int l, a;

	CU_ASSERT(p->nlaunch >= 1 && p->nlaunch <= KT_MAX_LAUNCHES);
	CU_ASSERT(p->nprograms >= 1 && p->nprograms <= KT_MAX_PROGRAMS);
	for (l = 0; l < p->nlaunch; l++) {
		const struct kt_launch *x = &p->launch[l];

		CU_ASSERT(x->program >= 0 && x->program < p->nprograms);
		CU_ASSERT(x->kernel[0] != 0);
		CU_ASSERT(x->grid[0] >= 1 && x->grid[1] >= 1 && x->grid[2] >= 1);
		CU_ASSERT(x->block[0] * x->block[1] * x->block[2] >= 32);
		for (a = 0; a < x->nargs; a++) {
			CU_ASSERT(x->args[a].kind >= KT_ARG_BUF && x->args[a].kind <= KT_ARG_TMAP);
			if (x->args[a].kind == KT_ARG_BUF || x->args[a].kind == KT_ARG_TMAP)
				CU_ASSERT(x->args[a].buf >= 0 && x->args[a].buf < nbufs);
		}
	}
}

static void test_plans(void)
{
	char why[200];
	struct kt_shape s = ft_shape(dense, "tokens=1000,in=4096,out=4104");
	struct kt_target t = ft_target("sm_90");
	struct kt_buf bufs[KT_MAX_BUFS], pbufs[KT_MAX_BUFS];
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e = {0};
	int nb, np, i;

	CU_ASSERT_EQUAL_FATAL(dense_cfg(&c, 128, 256, 32, 2, 4, 4), 0);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &s, &c, &t, &p, &e), 0);
	nb = dense->buffers(dense, &s, &c, bufs);
	check_args(&p, nb);
	CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "gemm");
	CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "gemm_tn");
	/* masked edges: the grid covers ceil(1000/128) x ceil(4104/256) tiles */
	CU_ASSERT_EQUAL(p.launch[0].grid[0], ((1000 + 127) / 128) * ((4104 + 255) / 256));
	CU_ASSERT_EQUAL(p.launch[0].block[0], 2 * 4 * 32);
	CU_ASSERT_EQUAL(p.launch[0].smem, 4 * (128 + 256) * 32 * 2);
	CU_ASSERT(p.launch[0].smem <= (unsigned)t.smem_optin);
	CU_ASSERT_EQUAL(p.launch[0].nargs, 12);
	CU_ASSERT_EQUAL(bufs[2].role, KT_BUF_OUTPUT);
	CU_ASSERT_EQUAL(bufs[2].elems, 1000 * 4104);
	/* an invalid config is refused by plan() too */
	dense_cfg(&c, 256, 256, 32, 2, 2, 2);
	CU_ASSERT_EQUAL(dense->plan(dense, &s, &c, &t, &p, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	/* planted */
	kt_config_parse(dense, "variant=planted_fault", &c, &e);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &s, &c, &t, &p, &e), 0);
	CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "planted");
	CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "planted_fault");
	CU_ASSERT_EQUAL_FATAL(dense->ref_plan(dense, &s, &t, &p, &e), 0);
	check_args(&p, dense->buffers(dense, &s, NULL, bufs));
	CU_ASSERT_STRING_EQUAL(p.programs[0].tpl, "ref");

	/* lowrank: problem buffers first and in the same order */
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=256");
	np = lowrank->buffers(lowrank, &s, NULL, pbufs);
	kt_config_parse(lowrank, "variant=unfused,BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,WARPS_M=2,"
				 "WARPS_N=4,STAGES=4,GROUP_M=8,Z_BLOCK_M=64,Z_BLOCK_N=128,Z_SPLIT_K=1", &c, &e);
	nb = lowrank->buffers(lowrank, &s, &c, bufs);
	CU_ASSERT_EQUAL(nb, np + 1);
	for (i = 0; i < np; i++) {
		CU_ASSERT_STRING_EQUAL(bufs[i].name, pbufs[i].name);
		CU_ASSERT_EQUAL(bufs[i].elems, pbufs[i].elems);
	}
	CU_ASSERT_EQUAL(pbufs[np - 1].role, KT_BUF_SCRATCH);	/* the reference's z32 */
	CU_ASSERT_EQUAL(pbufs[np - 1].dtype, KT_F32);
	CU_ASSERT_EQUAL(bufs[nb - 1].role, KT_BUF_SCRATCH);
	CU_ASSERT_EQUAL(bufs[nb - 1].dtype, KT_BF16);
	CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
	check_args(&p, nb);
	CU_ASSERT_EQUAL(p.nlaunch, 2);
	CU_ASSERT_EQUAL(p.nprograms, 2);	/* two tiles, two programs */
	CU_ASSERT_EQUAL(p.launch[0].args[2].buf, nb - 1);	/* z written ... */
	CU_ASSERT_EQUAL(p.launch[1].args[0].buf, nb - 1);	/* ... then read */
	CU_ASSERT(!p.launch[0].pdl && !p.launch[1].pdl);	/* PDL only on the ws path */
	CU_ASSERT_EQUAL_FATAL(lowrank->ref_plan(lowrank, &s, &t, &p, &e), 0);
	check_args(&p, np);
	CU_ASSERT_EQUAL(p.nlaunch, 2);
	kt_config_parse(lowrank, "variant=fused,BLOCK_M=64,BLOCK_N=128,BLOCK_K=32,WARPS_M=2,"
				 "WARPS_N=4,STAGES=3,N_SPLIT=8", &c, &e);
	CU_ASSERT_EQUAL(lowrank->buffers(lowrank, &s, &c, bufs), np);
	CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
	check_args(&p, np);
	CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "lowrank_fused");
	CU_ASSERT_EQUAL(p.launch[0].grid[1], 8);
	CU_ASSERT(p.launch[0].smem <= (unsigned)t.smem_optin);

	/* split-K: a second launch reduces the fp32 workspace (a scratch buffer) */
	s = ft_shape(dense, "tokens=16,in=4096,out=4096");
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense, "variant=mma_sync,BLOCK_M=16,BLOCK_N=64,BLOCK_K=64,"
				"WARPS_M=1,WARPS_N=4,STAGES=4,GROUP_M=1,SPLIT_K=2", &c, &e), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t, why, sizeof(why)), 0);
	nb = dense->buffers(dense, &s, &c, bufs);
	CU_ASSERT_EQUAL_FATAL(nb, 4);
	CU_ASSERT_EQUAL(bufs[3].role, KT_BUF_SCRATCH);
	CU_ASSERT_EQUAL(bufs[3].dtype, KT_F32);
	CU_ASSERT_EQUAL(bufs[3].elems, 2 * 16 * 4096);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &s, &c, &t, &p, &e), 0);
	check_args(&p, nb);
	CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
	CU_ASSERT_EQUAL(p.launch[0].grid[1], 2);
	CU_ASSERT_EQUAL(p.launch[0].args[2].buf, 3);
	CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "splitk_reduce");
	CU_ASSERT_EQUAL(p.launch[1].args[0].buf, 3);
	CU_ASSERT_EQUAL(p.launch[1].args[1].buf, 2);
	CU_ASSERT_STRING_EQUAL(p.programs[0].defines[p.programs[0].ndefines - 1], "SPLIT_K=2");
	/* where the tiles already fill the GPU, splitting is pruned */
	s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	c.p[0] = 128;
	c.p[1] = 256;
	c.p[3] = 2;
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "SPLIT_K"));
	/* lowrank's z GEMM split: z workspace after z, three launches */
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=1024");
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank, "variant=unfused_wgmma,BLOCK_M=128,BLOCK_N=256,"
				"STAGES=4,GROUP_M=8,Z_BLOCK_M=128,Z_BLOCK_N=128,Z_SPLIT_K=2", &c, &e), 0);
	{
		struct kt_target t90a;

		CU_ASSERT_EQUAL_FATAL(kt_target_named("sm_90a", &t90a), 0);
		CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t90a, why, sizeof(why)), 0);
		nb = lowrank->buffers(lowrank, &s, &c, bufs);
		CU_ASSERT_EQUAL_FATAL(nb, 7);
		CU_ASSERT_EQUAL(bufs[6].elems, 2 * 1024 * 1024);
		CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t90a, &p, &e), 0);
		check_args(&p, nb);
		CU_ASSERT_EQUAL(p.nlaunch, 3);
		CU_ASSERT_EQUAL(p.nprograms, 2);
		CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "splitk_reduce");
		CU_ASSERT_EQUAL(p.launch[1].args[1].buf, 5);	/* into z */
		CU_ASSERT_EQUAL(p.launch[2].args[0].buf, 5);	/* y GEMM reads z */
	}

	/* the roofline model */
	s = ft_shape(lowrank, "tokens=1024,in=4096,out=2048,rank=256");
	CU_ASSERT_DOUBLE_EQUAL(lowrank->flops(lowrank, &s), 2.0 * 1024 * 256 * (4096 + 2048), 1);
	CU_ASSERT_DOUBLE_EQUAL(lowrank->min_bytes(lowrank, &s),
			       2.0 * (1024.0 * 4096 + 256.0 * (4096 + 2048) + 1024.0 * 2048), 1);
	s = ft_shape(dense, "tokens=1024,in=4096,out=2048");
	CU_ASSERT_DOUBLE_EQUAL(dense->flops(dense, &s), 2.0 * 1024 * 4096 * 2048, 1);
	CU_ASSERT_DOUBLE_EQUAL(dense->min_bytes(dense, &s),
			       2.0 * (1024.0 * 4096 + 4096.0 * 2048 + 1024.0 * 2048), 1);
}

/* ---- the warp-specialized TMA kernel ---- */

static int ws_cfg(struct kt_config *c, long bm, long bn, long st, long cons)
{
	char buf[200];
	struct kt_err e = {0};

	snprintf(buf, sizeof(buf),
		 "variant=wgmma_ws,BLOCK_M=%ld,BLOCK_N=%ld,STAGES=%ld,GROUP_M=8,CONSUMERS=%ld", bm,
		 bn, st, cons);
	return kt_config_parse(dense, buf, c, &e);
}

static int has_define(const struct kt_program *p, const char *d)
{
	int i;

	for (i = 0; i < p->ndefines; i++)
		if (strcmp(p->defines[i], d) == 0)
			return 1;
	return 0;
}

static void test_ws_check(void)
{
	struct kt_shape s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	struct kt_target t90a = ft_target("sm_90a"), t90 = ft_target("sm_90");
	struct kt_config c;
	char why[200];

	CU_ASSERT_EQUAL_FATAL(ws_cfg(&c, 128, 256, 4, 2), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
	/* one consumer with 128 x 256: 256 accumulators per thread */
	ws_cfg(&c, 128, 256, 3, 1);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "accumulators"));
	/* two consumers need 64 rows each */
	ws_cfg(&c, 64, 128, 4, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "64-row"));
	/* wgmma N of 32 is not instantiated */
	ws_cfg(&c, 128, 32, 4, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "BLOCK_N"));
	/* 5 x (128 + 256) x 128 B of ring > 227 KiB */
	ws_cfg(&c, 128, 256, 5, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	/* TMA strides: in not a multiple of 8 elements (16 bytes) */
	s = ft_shape(dense, "tokens=1024,in=4100,out=4096");
	ws_cfg(&c, 128, 256, 4, 2);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "multiples of 8"));
	/* decode: 64 rows (the smallest warpgroup tile) for 16 tokens is pruned */
	s = ft_shape(dense, "tokens=16,in=4096,out=4096");
	ws_cfg(&c, 64, 128, 4, 1);
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 1);
	s = ft_shape(dense, "tokens=33,in=4096,out=4096");
	CU_ASSERT_EQUAL(dense->check(dense, &s, &c, &t90a, why, sizeof(why)), 0);
	/* the sm_90a default at the reference shape is the ws tile */
	s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	CU_ASSERT_EQUAL_FATAL(dense->default_config(dense, &s, &t90a, &c), 0);
	CU_ASSERT_STRING_EQUAL(dense->variants[c.variant], "wgmma_ws");
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "CONSUMERS"), 2);
	/* one wave where 128x256 would need two (136 CTAs on 132 SMs) */
	s = ft_shape(dense, "tokens=1000,in=4096,out=4104");
	CU_ASSERT_EQUAL_FATAL(dense->default_config(dense, &s, &t90a, &c), 0);
	CU_ASSERT_STRING_EQUAL(dense->variants[c.variant], "wgmma_ws");
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_M"), 256);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_N"), 128);
	/* many waves: 128x256's FLOPs cost less than 64x128's finer waves save */
	s = ft_shape(dense, "tokens=16384,in=4096,out=4096");
	CU_ASSERT_EQUAL_FATAL(dense->default_config(dense, &s, &t90a, &c), 0);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_M"), 128);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "BLOCK_N"), 256);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "CONSUMERS"), 2);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "GROUP_M"), 1);
	s = ft_shape(dense, "tokens=1024,in=4096,out=4096");
	/* and on plain sm_90 it is not */
	CU_ASSERT_EQUAL_FATAL(dense->default_config(dense, &s, &t90, &c), 0);
	CU_ASSERT_STRING_NOT_EQUAL(dense->variants[c.variant], "wgmma_ws");
}

static void test_ws_plan(void)
{
	struct kt_shape s = ft_shape(dense, "tokens=1000,in=4096,out=4104");
	struct kt_target t = ft_target("sm_90a");
	struct kt_buf bufs[KT_MAX_BUFS];
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e = {0};
	struct kt_gemm_tile tile;
	const struct kt_launch *l;
	const struct kt_tmap *ma, *mb;
	int nb, i;

	CU_ASSERT_EQUAL_FATAL(ws_cfg(&c, 128, 256, 4, 2), 0);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &s, &c, &t, &p, &e), 0);
	nb = dense->buffers(dense, &s, &c, bufs);
	CU_ASSERT_EQUAL(nb, 3);	/* no workspace */
	check_args(&p, nb);
	check_args_bufs(&p, bufs, nb);
	CU_ASSERT_EQUAL_FATAL(p.nlaunch, 1);
	l = &p.launch[0];
	CU_ASSERT_STRING_EQUAL(l->kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(l->grid[0], ((1000 + 127) / 128) * ((4104 + 255) / 256));
	CU_ASSERT_EQUAL(l->grid[1], 1);
	CU_ASSERT_EQUAL(l->grid[2], 1);
	CU_ASSERT_EQUAL(l->block[0], 3 * 128);	/* producer + 2 consumers */
	CU_ASSERT_EQUAL(l->smem, 1024 + 4 * (128 + 256) * 128 + 256);
	CU_ASSERT(l->smem <= (unsigned)t.smem_optin);
	CU_ASSERT(has_define(&p.programs[0], "WS=1"));
	CU_ASSERT(has_define(&p.programs[0], "CONSUMERS=2"));
	CU_ASSERT(has_define(&p.programs[0], "EPILOGUE=1"));
	CU_ASSERT(has_define(&p.programs[0], "BLOCK_M=128"));
	CU_ASSERT(has_define(&p.programs[0], "BLOCK_N=256"));
	CU_ASSERT(has_define(&p.programs[0], "STAGES=4"));
	CU_ASSERT(!has_define(&p.programs[0], "WGMMA=1"));
	/* (tA, tB, C, M, N, K, ldc, sC, zA, zB) */
	CU_ASSERT_EQUAL_FATAL(l->nargs, 10);
	CU_ASSERT_EQUAL(l->args[0].kind, KT_ARG_TMAP);
	CU_ASSERT_EQUAL(l->args[1].kind, KT_ARG_TMAP);
	CU_ASSERT_EQUAL(l->args[2].kind, KT_ARG_BUF);
	for (i = 3; i < 6; i++)
		CU_ASSERT_EQUAL(l->args[i].kind, KT_ARG_I32);
	CU_ASSERT_EQUAL(l->args[6].kind, KT_ARG_I64);
	CU_ASSERT_EQUAL(l->args[7].kind, KT_ARG_I64);
	CU_ASSERT_EQUAL(l->args[8].kind, KT_ARG_I32);
	CU_ASSERT_EQUAL(l->args[9].kind, KT_ARG_I32);
	CU_ASSERT_EQUAL(l->args[0].buf, 0);	/* x */
	CU_ASSERT_EQUAL(l->args[1].buf, 1);	/* W */
	CU_ASSERT_EQUAL(l->args[2].buf, 2);	/* y */
	CU_ASSERT_EQUAL(l->args[3].i, 1000);
	CU_ASSERT_EQUAL(l->args[4].i, 4104);
	CU_ASSERT_EQUAL(l->args[5].i, 4096);
	CU_ASSERT_EQUAL(l->args[6].i, 4104);	/* ldc = out */
	CU_ASSERT_EQUAL(l->args[8].i, 1);
	CU_ASSERT_EQUAL(l->args[9].i, 1);
	/* the maps: (k, rows, batch) with the tile's boxes, 128-byte swizzle
	 * whose span is exactly one 64-element bf16 row of the box */
	ma = &l->args[0].tmap;
	mb = &l->args[1].tmap;
	CU_ASSERT_EQUAL(ma->rank, 3);
	CU_ASSERT_EQUAL(ma->dims[0], 4096);
	CU_ASSERT_EQUAL(ma->dims[1], 1000);
	CU_ASSERT_EQUAL(ma->dims[2], 1);
	CU_ASSERT_EQUAL(ma->strides[1], 4096);
	CU_ASSERT_EQUAL(ma->box[0], 64);
	CU_ASSERT_EQUAL(ma->box[1], 128);	/* BLOCK_M */
	CU_ASSERT_EQUAL(ma->box[2], 1);
	CU_ASSERT_EQUAL(ma->swizzle, 128);
	CU_ASSERT_EQUAL(ma->box[0] * 2, ma->swizzle);
	CU_ASSERT_EQUAL(mb->dims[0], 4096);
	CU_ASSERT_EQUAL(mb->dims[1], 4104);
	CU_ASSERT_EQUAL(mb->box[1], 256);	/* BLOCK_N */
	CU_ASSERT_EQUAL(mb->strides[1], 4096);
	/* the bytes one stage expects are the two boxes */
	memset(&tile, 0, sizeof(tile));
	CU_ASSERT_EQUAL_FATAL(kt_gemm_tile_from(dense, &c, &tile), 0);
	CU_ASSERT_EQUAL(tile.ws, 1);
	CU_ASSERT_EQUAL(tile.bk, 64);
	CU_ASSERT_EQUAL((long)(ma->box[0] * ma->box[1] + mb->box[0] * mb->box[1]) * 2,
			(tile.bm + tile.bn) * tile.bk * 2);
	CU_ASSERT_EQUAL(kt_gemm_acc_regs(&tile), 128);
}

/* Batched stages (monarch, blast) launch through kt_gemm_launch: rank-3
 * maps carry the batch; a shared operand (batch stride 0) maps one
 * matrix and zeroes its batch coordinate; a cluster tile halves B's box
 * and pads the grid to pairs. */
static void test_ws_batched(void)
{
	struct kt_gemm_tile t;
	struct kt_launch l;
	struct kt_plan p;
	struct kt_buf bufs[3];
	const long M = 200, N = 264, K = 328, Z = 3;
	const long lda = K + 16, ldb = K + 8, ldc = N + 8;
	const long sA = M * lda + 64, sC = M * ldc + 16;
	char why[200];
	struct kt_target tgt = ft_target("sm_90a");

	memset(&t, 0, sizeof(t));
	t.bm = 128;
	t.bn = 128;
	t.bk = 64;
	t.wm = 8;
	t.wn = 1;
	t.stages = 4;
	t.group_m = 8;
	t.split_k = 1;
	t.ws = 1;
	t.consumers = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 0);
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, 0, 2, ldc, sC, Z, &l);
	CU_ASSERT_STRING_EQUAL(l.kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(l.grid[0], 2 * 3);
	CU_ASSERT_EQUAL(l.grid[2], Z);
	CU_ASSERT_EQUAL_FATAL(l.nargs, 10);
	CU_ASSERT_EQUAL(l.args[0].tmap.dims[2], Z);
	CU_ASSERT_EQUAL(l.args[0].tmap.strides[1], lda);
	CU_ASSERT_EQUAL(l.args[0].tmap.strides[2], sA);
	CU_ASSERT_EQUAL(l.args[1].tmap.dims[2], 1);	/* B shared */
	CU_ASSERT_EQUAL(l.args[1].tmap.strides[1], ldb);
	CU_ASSERT_EQUAL(l.args[6].i, ldc);
	CU_ASSERT_EQUAL(l.args[7].i, sC);
	CU_ASSERT_EQUAL(l.args[8].i, 1);	/* zA */
	CU_ASSERT_EQUAL(l.args[9].i, 0);	/* zB */
	memset(&p, 0, sizeof(p));
	memset(bufs, 0, sizeof(bufs));
	bufs[0].dtype = bufs[1].dtype = bufs[2].dtype = KT_BF16;
	bufs[0].elems = (size_t)(sA * Z);
	bufs[1].elems = (size_t)(N * ldb);
	bufs[2].elems = (size_t)(sC * Z);
	p.nprograms = 1;
	p.nlaunch = 1;
	p.launch[0] = l;
	check_args(&p, 3);
	check_args_bufs(&p, bufs, 3);
	/* a single-batch launch with a stride maps one matrix */
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, 0, 2, ldc, 0, 1, &l);
	CU_ASSERT_EQUAL(l.args[0].tmap.dims[2], 1);
	CU_ASSERT_EQUAL(l.args[8].i, 1);
	CU_ASSERT_EQUAL(l.args[9].i, 1);
	/* CTA pairs sharing B: half boxes, an even grid, the define */
	t.cluster_m = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 0);
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, 0, 2, ldc, sC, Z, &l);
	CU_ASSERT_EQUAL(l.grid[0], 2 * 1 * 3);	/* 2 x ceil(200/256) x ceil(264/128) */
	CU_ASSERT_EQUAL(l.grid[0] % 2, 0);
	CU_ASSERT_EQUAL(l.args[1].tmap.box[1], 64);
	CU_ASSERT_EQUAL(l.args[0].tmap.box[1], 128);
	memset(&p.programs[0], 0, sizeof(p.programs[0]));
	CU_ASSERT_EQUAL(kt_gemm_defines(&t, &p.programs[0]), 0);
	CU_ASSERT(has_define(&p.programs[0], "CLUSTER_M=2"));
	/* split-K here: K = 328 leaves under 4 k-tiles per slice */
	t.cluster_m = 0;
	t.split_k = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "SPLIT_K"));
}

static void ws_tile(struct kt_gemm_tile *t, long bm, long bn, long cons, long split)
{
	memset(t, 0, sizeof(*t));
	t->bm = bm;
	t->bn = bn;
	t->bk = 64;
	t->wm = bm / 16;
	t->wn = 1;
	t->stages = 4;
	t->group_m = 8;
	t->split_k = split;
	t->ws = 1;
	t->consumers = cons;
}

/* Batches side by side within each row (monarch's stage 1 reads x (N, n)
 * as b blocks of n/b columns: batch stride n/b, row stride n) map as
 * (k, batch, rows), zA = 2, and every element the kernel asks for is the
 * one the pointer arithmetic names. */
static void test_ws_interleaved_batches(void)
{
	struct kt_gemm_tile t;
	struct kt_launch l;
	struct kt_plan p;
	struct kt_buf bufs[3];
	const long M = 200, N = 136, nb = 96, Z = 4, n = Z * nb;
	const struct kt_tmap *ma;
	long z, r, k, bad = 0;
	char why[200];
	struct kt_target tgt = ft_target("sm_90a");

	ws_tile(&t, 128, 128, 2, 1);
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, nb, 0, &tgt, why, sizeof(why)), 0);
	/* without row_batches (blast's stages): the plain map, batch stride
	 * below the row stride */
	kt_gemm_launch(&t, 0, M, N, nb, 0, n, nb, 1, nb, N * nb, 2, Z * N, N, Z, &l);
	CU_ASSERT_EQUAL(l.args[8].i, 1);
	CU_ASSERT_EQUAL(l.args[0].tmap.dims[1], M);
	CU_ASSERT_EQUAL(l.args[0].tmap.strides[2], nb);
	t.row_batches = 1;
	kt_gemm_launch(&t, 0, M, N, nb, 0, n, nb, 1, nb, N * nb, 2, Z * N, N, Z, &l);
	CU_ASSERT_EQUAL_FATAL(l.nargs, 10);
	ma = &l.args[0].tmap;
	CU_ASSERT_EQUAL(l.args[8].i, 2);	/* zA: (k, batch, rows) */
	CU_ASSERT_EQUAL(l.args[9].i, 1);	/* w1-like B: (k, rows, batch) */
	CU_ASSERT_EQUAL(ma->dims[0], nb);
	CU_ASSERT_EQUAL(ma->dims[1], Z);
	CU_ASSERT_EQUAL(ma->dims[2], M);
	CU_ASSERT_EQUAL(ma->strides[1], nb);
	CU_ASSERT_EQUAL(ma->strides[2], n);
	CU_ASSERT_EQUAL(ma->box[0], 64);
	CU_ASSERT_EQUAL(ma->box[1], 1);
	CU_ASSERT_EQUAL(ma->box[2], 128);	/* BLOCK_M rows, the same smem tile */
	/* increasing strides, and the map ends exactly at x's last element */
	CU_ASSERT(ma->strides[1] >= ma->dims[0] && ma->strides[2] >= ma->strides[1] * ma->dims[1]);
	CU_ASSERT_EQUAL((ma->dims[0] - 1) + (ma->dims[1] - 1) * ma->strides[1] +
			(ma->dims[2] - 1) * ma->strides[2], M * n - 1);
	for (z = 0; z < Z; z++)
		for (r = 0; r < M; r++)
			for (k = 0; k < nb; k++)
				bad += k + z * ma->strides[1] + r * ma->strides[2] != z * nb + r * n + k;
	CU_ASSERT_EQUAL(bad, 0);
	memset(&p, 0, sizeof(p));
	memset(bufs, 0, sizeof(bufs));
	bufs[0].dtype = bufs[1].dtype = bufs[2].dtype = KT_BF16;
	bufs[0].elems = (size_t)(M * n);
	bufs[1].elems = (size_t)(Z * N * nb);
	bufs[2].elems = (size_t)(M * Z * N);
	p.nprograms = 1;
	p.nlaunch = 1;
	p.launch[0] = l;
	check_args(&p, 3);
	check_args_bufs(&p, bufs, 3);
	/* one batch: the plain map */
	kt_gemm_launch(&t, 0, M, N, nb, 0, n, nb, 1, nb, 0, 2, N, 0, 1, &l);
	CU_ASSERT_EQUAL(l.args[8].i, 1);
	CU_ASSERT_EQUAL(l.args[0].tmap.dims[1], M);
}

/* Split-K on the ws kernel: K over grid.y into the fp32 workspace, then
 * splitk_reduce, where the tiles leave SMs idle (lowrank's z GEMM). */
static void test_ws_splitk(void)
{
	struct kt_gemm_tile t;
	struct kt_launch l[2];
	struct kt_program prog;
	const long M = 1024, N = 1024, K = 4096;
	char why[200];
	struct kt_target tgt = ft_target("sm_90a");

	ws_tile(&t, 128, 128, 2, 2);
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 0);
	memset(&prog, 0, sizeof(prog));
	CU_ASSERT_EQUAL(kt_gemm_defines(&t, &prog), 0);
	CU_ASSERT(has_define(&prog, "WS=1"));
	CU_ASSERT(has_define(&prog, "SPLIT_K=2"));
	CU_ASSERT_EQUAL(kt_gemm_workspace(&t, M, N), (size_t)(2 * M * N));
	CU_ASSERT_EQUAL_FATAL(kt_gemm_launches(&t, 0, M, N, K, 0, K, 1, K, 2, N, 3, l), 2);
	CU_ASSERT_STRING_EQUAL(l[0].kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(l[0].grid[0], 8 * 8);
	CU_ASSERT_EQUAL(l[0].grid[1], 2);
	CU_ASSERT_EQUAL(l[0].grid[2], 1);
	CU_ASSERT_EQUAL(l[0].args[0].kind, KT_ARG_TMAP);
	CU_ASSERT_EQUAL(l[0].args[2].buf, 3);	/* the workspace */
	CU_ASSERT_EQUAL(l[0].args[6].i, N);	/* its row stride */
	CU_ASSERT_EQUAL(l[0].args[0].tmap.dims[0], K);	/* the map spans all of K */
	CU_ASSERT_STRING_EQUAL(l[1].kernel, "splitk_reduce");
	CU_ASSERT_EQUAL(l[1].args[0].buf, 3);
	CU_ASSERT_EQUAL(l[1].args[1].buf, 2);
	CU_ASSERT_EQUAL(l[1].args[5].i, 2);
	/* 64 x 128 tiles already fill half the machine: no split */
	ws_tile(&t, 64, 128, 1, 2);
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "half"));
	/* too few k-tiles per slice */
	ws_tile(&t, 128, 128, 2, 4);
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, 512, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "k-tiles"));
	/* not with CTA pairs */
	ws_tile(&t, 128, 128, 2, 2);
	t.cluster_m = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "CLUSTER_M"));
}

/* The persistent ws kernel (t.persistent CTAs walking every (tile, batch)
 * work item): defines, shared memory, the checks that refuse it, the
 * launch (grid clamped to the items, the batch count as the last
 * argument), and the host emulation of the walk against a direct GEMM at
 * masked edges for several grid sizes; the control passes one batch too
 * few, and the walk must then leave that batch unwritten. */
static void test_ws_persistent(void)
{
	struct kt_gemm_tile t;
	struct kt_launch l;
	struct kt_plan p;
	struct emu m;
	const long M = 200, N = 264, K = 328, Z = 3;
	const long lda = K + 16, ldb = K + 8, ldc = N + 8;
	const long sA = M * lda + 64, sB = N * ldb + 8, sC = M * ldc + 16;
	const long grids[] = {1, 5, 7, 1000};
	struct kt_target tgt = ft_target("sm_90a");
	char why[200];
	float *ref;
	long i, z, r, c, k, g, shared;
	unsigned st = 12345;

	ws_tile(&t, 128, 128, 2, 1);
	t.persistent = 5;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 0);
	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL(kt_gemm_defines(&t, &p.programs[0]), 0);
	CU_ASSERT(has_define(&p.programs[0], "PERSISTENT=1"));
	CU_ASSERT(has_define(&p.programs[0], "EPILOGUE=1"));
	/* the staged epilogue has its own area after the ring */
	CU_ASSERT_EQUAL(kt_gemm_smem(&t), 1024 + 4 * (128 + 128) * 128 + 128 * 128 * 2 + 256);
	t.epi_direct = 1;
	CU_ASSERT_EQUAL(kt_gemm_smem(&t), 1024 + 4 * (128 + 128) * 128 + 256);
	t.epi_direct = 0;
	/* 128x256 stages 128 columns at a time: 4 stages fit */
	ws_tile(&t, 128, 256, 2, 1);
	t.persistent = 132;
	CU_ASSERT_EQUAL(kt_gemm_smem(&t), 1024 + 4 * (128 + 256) * 128 + 128 * 128 * 2 + 256);
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 256, 0, &tgt, why, sizeof(why)), 0);
	/* 256x128 with 4 stages and its staging area exceed the opt-in limit
	 * (the one-tile kernel stages in the ring); 3 stages, or the direct
	 * epilogue, fit */
	ws_tile(&t, 256, 128, 2, 1);
	t.persistent = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 256, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	t.persistent = 0;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 256, 0, &tgt, why, sizeof(why)), 0);
	t.persistent = 132;
	t.stages = 3;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 256, 0, &tgt, why, sizeof(why)), 0);
	t.stages = 4;
	t.epi_direct = 1;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 256, 0, &tgt, why, sizeof(why)), 0);
	/* refused: split-K, clusters, the non-ws paths */
	ws_tile(&t, 128, 128, 2, 2);
	t.persistent = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 4096, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PERSISTENT"));
	ws_tile(&t, 128, 128, 2, 1);
	t.persistent = 132;
	t.cluster_m = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PERSISTENT"));
	t.cluster_m = 0;
	t.ws = 0;
	t.bk = 32;
	t.wm = 2;
	t.wn = 4;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, M, N, K, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PERSISTENT"));

	/* the launch: 2 x 3 tiles x 3 batches = 18 work items */
	ws_tile(&t, 128, 128, 2, 1);
	t.persistent = 5;
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sB, 2, ldc, sC, Z, &l);
	CU_ASSERT_STRING_EQUAL(l.kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(l.grid[0], 5);
	CU_ASSERT_EQUAL(l.grid[1], 1);
	CU_ASSERT_EQUAL(l.grid[2], 1);
	CU_ASSERT_EQUAL(l.smem, kt_gemm_smem(&t));
	CU_ASSERT_EQUAL_FATAL(l.nargs, 11);
	CU_ASSERT_EQUAL(l.args[10].kind, KT_ARG_I32);
	CU_ASSERT_EQUAL(l.args[10].i, Z);
	CU_ASSERT_EQUAL(l.args[0].tmap.dims[2], Z);	/* the maps still carry the batch */
	t.persistent = 1000;
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sB, 2, ldc, sC, Z, &l);
	CU_ASSERT_EQUAL(l.grid[0], 2 * 3 * Z);

	/* emulated: every work item once, at every grid size, a separate and
	 * a shared B, both epilogues' programs (GROUP_M 8 and 1) */
	memset(&m, 0, sizeof(m));
	m.plan = &p;
	m.nb = 3;
	p.nprograms = 1;
	m.bufs[0].dtype = m.bufs[1].dtype = m.bufs[2].dtype = KT_BF16;
	m.bufs[0].elems = (size_t)(sA * Z);
	m.bufs[1].elems = (size_t)(sB * Z);
	m.bufs[2].elems = (size_t)(sC * Z);
	for (i = 0; i < 3; i++) {
		m.d[i] = malloc(m.bufs[i].elems * sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(m.d[i]);
	}
	for (i = 0; i < 2; i++) {
		size_t e;

		for (e = 0; e < m.bufs[i].elems; e++) {
			st = st * 1103515245u + 12345u;
			m.d[i][e] = (float)((int)((st >> 16) % 17) - 8) / 8.f;
		}
	}
	ref = malloc((size_t)(sC * Z) * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
	for (shared = 0; shared < 2; shared++) {
		long long sb = shared ? 0 : sB;

		for (z = 0; z < Z; z++)
			for (r = 0; r < M; r++)
				for (c = 0; c < N; c++) {
					double acc = 0;

					for (k = 0; k < K; k++)
						acc += (double)m.d[0][z * sA + r * lda + k] *
						       m.d[1][z * sb + c * ldb + k];
					ref[z * sC + r * ldc + c] = (float)acc;
				}
		for (g = 0; g < (long)(sizeof(grids) / sizeof(grids[0])); g++) {
			long bad = 0, nan = 0;

			ws_tile(&t, g % 2 ? 64 : 128, 128, g % 2 ? 1 : 2, 1);
			t.group_m = g == 2 ? 1 : 8;
			t.epi_direct = g % 2;
			t.persistent = grids[g];
			memset(&p.programs[0], 0, sizeof(p.programs[0]));
			p.programs[0].tpl = "gemm";
			CU_ASSERT_EQUAL(kt_gemm_defines(&t, &p.programs[0]), 0);
			kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sb, 2, ldc, sC, Z, &l);
			for (i = 0; i < (long)m.bufs[2].elems; i++)
				m.d[2][i] = NAN;
			emu_launch(&m, &l);
			for (z = 0; z < Z; z++)
				for (r = 0; r < M; r++)
					for (c = 0; c < N; c++) {
						float y = m.d[2][z * sC + r * ldc + c];

						nan += isnan(y);
						bad += fabsf(y - ref[z * sC + r * ldc + c]) > 1e-3f;
					}
			CU_ASSERT_EQUAL(nan, 0);
			CU_ASSERT_EQUAL(bad, 0);
			if (g == 1) {
				/* control: one batch too few in the walk's count */
				l.args[10].i = Z - 1;
				for (i = 0; i < (long)m.bufs[2].elems; i++)
					m.d[2][i] = NAN;
				emu_launch(&m, &l);
				nan = 0;
				for (z = 0; z < Z; z++)
					for (r = 0; r < M; r++)
						for (c = 0; c < N; c++)
							nan += isnan(m.d[2][z * sC + r * ldc + c]) &&
							       z == Z - 1;
				CU_ASSERT_EQUAL(nan, M * N);
			}
		}
	}
	CU_ASSERT_EQUAL(m.oob, 0);
	CU_ASSERT_EQUAL(m.unknown, 0);
	for (i = 0; i < 3; i++)
		free(m.d[i]);
	free(ref);
}

/* The ping-pong ws kernel (-DPINGPONG=1): kt_gemm_check's rules, its shared
 * memory, defines and launch (a third map, over C), the emulated walk at
 * several grid sizes (an odd item count per CTA among them), and dense's
 * optional PINGPONG param (a key without it is the one-tile kernel). */
static void test_ws_pingpong(void)
{
	struct kt_gemm_tile t;
	struct kt_launch l;
	struct kt_plan p;
	struct emu m;
	const long M = 200, N = 264, K = 328, Z = 3;
	const long lda = K + 16, ldb = K + 8, ldc = N + 8;
	const long sA = M * lda + 64, sB = N * ldb + 8, sC = M * ldc + 16;
	const long grids[] = {1, 5, 7, 1000};
	struct kt_target tgt = ft_target("sm_90a"), t90 = ft_target("sm_90");
	struct kt_shape ds = ft_shape(dense, "tokens=1024,in=1024,out=4096");
	struct kt_config c;
	struct kt_err e = {0};
	char why[200], key[256];
	float *ref;
	long i, z, r, col, k, g;
	unsigned st = 4242;

	/* accepted: each consumer's whole tile, 128x128 or 64x256 at most */
	ws_tile(&t, 128, 128, 2, 1);
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(kt_gemm_acc_regs(&t), 128);
	CU_ASSERT_EQUAL(kt_gemm_threads(&t), 384);
	/* the ring, then two whole-tile staging areas */
	CU_ASSERT_EQUAL(kt_gemm_smem(&t), 1024 + 4 * (128 + 128) * 128 + 2 * 128 * 128 * 2 + 256);
	memset(&p, 0, sizeof(p));
	CU_ASSERT_EQUAL(kt_gemm_defines(&t, &p.programs[0]), 0);
	CU_ASSERT(has_define(&p.programs[0], "PINGPONG=1"));
	CU_ASSERT(has_define(&p.programs[0], "CONSUMERS=2"));
	CU_ASSERT(has_define(&p.programs[0], "EPILOGUE=1"));
	CU_ASSERT_FALSE(has_define(&p.programs[0], "PERSISTENT=1"));
	t.stages = 5;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 0);
	t.stages = 6;	/* 256 KiB of ring and staging */
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "shared memory"));
	ws_tile(&t, 64, 256, 2, 1);
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(kt_gemm_acc_regs(&t), 128);
	/* refused, each with its reason */
	ws_tile(&t, 128, 256, 2, 1);	/* 256 accumulators a thread */
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	ws_tile(&t, 256, 64, 2, 1);
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "64 or 128 rows"));
	ws_tile(&t, 128, 128, 1, 1);
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "CONSUMERS must be 2"));
	ws_tile(&t, 128, 128, 2, 2);
	t.pingpong = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 1024, 4096, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PINGPONG"));
	ws_tile(&t, 128, 128, 2, 1);
	t.pingpong = 132;
	t.cluster_m = 2;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PINGPONG"));
	t.cluster_m = 0;
	t.persistent = 132;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PINGPONG"));
	t.persistent = 0;
	t.epi_direct = 1;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "TMA stores"));
	t.epi_direct = 0;
	t.col_group = 64;
	t.col_gstride = 128;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "column groups"));
	t.col_group = t.col_gstride = 0;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
	t.ws = 0;
	t.bk = 32;
	t.wm = 2;
	t.wn = 4;
	CU_ASSERT_EQUAL(kt_gemm_check(&t, 1024, 4096, 1024, 0, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PINGPONG"));

	/* the launch: 2 x 3 tiles x 3 batches = 18 work items */
	ws_tile(&t, 128, 128, 2, 1);
	t.pingpong = 5;
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sB, 2, ldc, sC, Z, &l);
	CU_ASSERT_STRING_EQUAL(l.kernel, "gemm_tn_ws");
	CU_ASSERT(l.grid[0] == 5 && l.grid[1] == 1 && l.grid[2] == 1);
	CU_ASSERT_EQUAL(l.block[0], 384);
	CU_ASSERT_EQUAL(l.smem, kt_gemm_smem(&t));
	CU_ASSERT_EQUAL_FATAL(l.nargs, 9);
	CU_ASSERT_EQUAL(l.args[2].kind, KT_ARG_TMAP);
	CU_ASSERT_EQUAL(l.args[2].buf, 2);
	CU_ASSERT(l.args[2].tmap.dims[0] == N && l.args[2].tmap.dims[1] == M &&
		  l.args[2].tmap.dims[2] == Z);
	CU_ASSERT(l.args[2].tmap.strides[1] == ldc && l.args[2].tmap.strides[2] == sC);
	CU_ASSERT(l.args[2].tmap.box[0] == 64 && l.args[2].tmap.box[1] == 128 &&
		  l.args[2].tmap.box[2] == 1);
	CU_ASSERT_EQUAL(l.args[8].i, Z);
	t.pingpong = 1L << 30;	/* SM count unknown: one CTA per item */
	kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sB, 2, ldc, sC, Z, &l);
	CU_ASSERT_EQUAL(l.grid[0], 2 * 3 * Z);

	/* emulated: every item once at every grid size (1 CTA; 5 and 7: odd
	 * item counts per CTA, so consumer 0 has one more than consumer 1) */
	memset(&m, 0, sizeof(m));
	memset(&p, 0, sizeof(p));
	m.plan = &p;
	m.nb = 3;
	p.nprograms = 1;
	m.bufs[0].dtype = m.bufs[1].dtype = m.bufs[2].dtype = KT_BF16;
	m.bufs[0].elems = (size_t)(sA * Z);
	m.bufs[1].elems = (size_t)(sB * Z);
	m.bufs[2].elems = (size_t)(sC * Z);
	for (i = 0; i < 3; i++) {
		m.d[i] = malloc(m.bufs[i].elems * sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(m.d[i]);
	}
	for (i = 0; i < 2; i++) {
		size_t el;

		for (el = 0; el < m.bufs[i].elems; el++) {
			st = st * 1103515245u + 12345u;
			m.d[i][el] = (float)((int)((st >> 16) % 17) - 8) / 8.f;
		}
	}
	ref = malloc((size_t)(sC * Z) * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
	for (z = 0; z < Z; z++)
		for (r = 0; r < M; r++)
			for (col = 0; col < N; col++) {
				double acc = 0;

				for (k = 0; k < K; k++)
					acc += (double)m.d[0][z * sA + r * lda + k] *
					       m.d[1][z * sB + col * ldb + k];
				ref[z * sC + r * ldc + col] = (float)acc;
			}
	for (g = 0; g < (long)(sizeof(grids) / sizeof(grids[0])); g++) {
		long bad = 0, nan = 0;

		ws_tile(&t, g % 2 ? 64 : 128, g % 2 ? 256 : 128, 2, 1);
		t.group_m = g == 2 ? 1 : 8;
		t.pingpong = grids[g];
		memset(&p.programs[0], 0, sizeof(p.programs[0]));
		p.programs[0].tpl = "gemm";
		CU_ASSERT_EQUAL(kt_gemm_defines(&t, &p.programs[0]), 0);
		kt_gemm_launch(&t, 0, M, N, K, 0, lda, sA, 1, ldb, sB, 2, ldc, sC, Z, &l);
		for (i = 0; i < (long)m.bufs[2].elems; i++)
			m.d[2][i] = NAN;
		emu_launch(&m, &l);
		for (z = 0; z < Z; z++)
			for (r = 0; r < M; r++)
				for (col = 0; col < N; col++) {
					float y = m.d[2][z * sC + r * ldc + col];

					nan += isnan(y);
					bad += fabsf(y - ref[z * sC + r * ldc + col]) > 1e-3f;
				}
		CU_ASSERT_EQUAL(nan, 0);
		CU_ASSERT_EQUAL(bad, 0);
	}
	CU_ASSERT_EQUAL(m.oob, 0);
	CU_ASSERT_EQUAL(m.unknown, 0);
	for (i = 0; i < 3; i++)
		free(m.d[i]);
	free(ref);

	/* dense: a key from before PINGPONG is the one-tile kernel; with
	 * PINGPONG=1 the plan walks one CTA per SM */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense,
		"variant=wgmma_ws,BLOCK_M=128,BLOCK_N=128,STAGES=4,GROUP_M=8,CONSUMERS=2", &c, &e), 0);
	CU_ASSERT_EQUAL(kt_config_get(dense, &c, "PINGPONG"), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &ds, &c, &tgt, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &ds, &c, &tgt, &p, &e), 0);
	CU_ASSERT_FALSE(has_define(&p.programs[0], "PINGPONG=1"));
	CU_ASSERT_EQUAL(p.launch[0].nargs, 10);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense,
		"variant=wgmma_ws,BLOCK_M=128,BLOCK_N=128,STAGES=4,GROUP_M=8,CONSUMERS=2,PINGPONG=1",
		&c, &e), 0);
	kt_config_key(dense, &c, key, sizeof(key));
	CU_ASSERT_PTR_NOT_NULL(strstr(key, "PINGPONG=1"));
	CU_ASSERT_EQUAL(dense->check(dense, &ds, &c, &tgt, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &ds, &c, &tgt, &p, &e), 0);
	CU_ASSERT(has_define(&p.programs[0], "PINGPONG=1"));
	CU_ASSERT_EQUAL(p.nlaunch, 1);
	CU_ASSERT_EQUAL(p.launch[0].nargs, 9);
	/* 8 x 32 tiles: one CTA each where the SM count is unknown, else one
	 * per SM */
	CU_ASSERT_EQUAL(p.launch[0].grid[0], tgt.sms > 0 ? (unsigned)tgt.sms : 256u);
	{
		struct kt_target t132 = tgt;

		t132.sms = 132;
		CU_ASSERT_EQUAL_FATAL(dense->plan(dense, &ds, &c, &t132, &p, &e), 0);
		CU_ASSERT_EQUAL(p.launch[0].grid[0], 132u);
	}
	/* the space's rules: 128 or 256 columns, 4+ stages, two consumers */
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense,
		"variant=wgmma_ws,BLOCK_M=128,BLOCK_N=64,STAGES=4,GROUP_M=8,CONSUMERS=2,PINGPONG=1",
		&c, &e), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &ds, &c, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "PINGPONG"));
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense,
		"variant=wgmma_ws,BLOCK_M=128,BLOCK_N=128,STAGES=3,GROUP_M=8,CONSUMERS=2,PINGPONG=1",
		&c, &e), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &ds, &c, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_EQUAL_FATAL(kt_config_parse(dense,
		"variant=wgmma_ws,BLOCK_M=128,BLOCK_N=128,STAGES=4,GROUP_M=8,CONSUMERS=1,PINGPONG=1",
		&c, &e), 0);
	CU_ASSERT_EQUAL(dense->check(dense, &ds, &c, &tgt, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "CONSUMERS"));
}

/* lowrank unfused_ws: both stages on gemm_tn_ws, z split along K. */
static void test_lowrank_ws(void)
{
	struct kt_shape s = ft_shape(lowrank, "tokens=1024,in=4096,out=4096,rank=1024");
	struct kt_target t = ft_target("sm_90a"), t90 = ft_target("sm_90");
	struct kt_buf bufs[KT_MAX_BUFS];
	struct kt_config c;
	struct kt_plan p;
	struct kt_err e = {0};
	const struct kt_tmap *m;
	char why[200];
	int nb, i;

	CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank, "variant=unfused_ws,BLOCK_M=128,BLOCK_N=256,"
				"STAGES=4,GROUP_M=8,Z_BLOCK_M=128,Z_BLOCK_N=128,Z_SPLIT_K=2,"
				"CONSUMERS=2", &c, &e), 0);
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t90, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "sm_90a"));
	/* split in two: the slices reduce in their cluster, no workspace */
	nb = lowrank->buffers(lowrank, &s, &c, bufs);
	CU_ASSERT_EQUAL_FATAL(nb, 6);
	CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
	check_args(&p, nb);
	check_args_bufs(&p, bufs, nb);
	CU_ASSERT_EQUAL_FATAL(p.nlaunch, 2);
	CU_ASSERT_EQUAL_FATAL(p.nprograms, 2);
	for (i = 0; i < 2; i++) {
		CU_ASSERT(has_define(&p.programs[i], "WS=1"));
		CU_ASSERT(has_define(&p.programs[i], "CONSUMERS=2"));
		CU_ASSERT(!has_define(&p.programs[i], "WGMMA=1"));
	}
	CU_ASSERT(has_define(&p.programs[0], "SPLIT_K=2"));
	CU_ASSERT(has_define(&p.programs[0], "SPLIT_CLUSTER=1"));
	CU_ASSERT(!has_define(&p.programs[1], "SPLIT_K=2"));
	CU_ASSERT(!has_define(&p.programs[1], "SPLIT_CLUSTER=1"));
	CU_ASSERT(has_define(&p.programs[1], "BLOCK_N=256"));
	/* z = x V^T, two K slices, straight into bf16 z */
	CU_ASSERT_STRING_EQUAL(p.launch[0].kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(p.launch[0].grid[1], 2);
	CU_ASSERT_EQUAL(p.launch[0].block[0], 3 * 128);
	CU_ASSERT_EQUAL(p.launch[0].args[2].buf, 5);
	CU_ASSERT_EQUAL(p.launch[0].args[6].i, 1024);
	m = &p.launch[0].args[0].tmap;	/* x */
	CU_ASSERT_EQUAL(p.launch[0].args[0].buf, 0);
	CU_ASSERT(m->dims[0] == 4096 && m->dims[1] == 1024 && m->dims[2] == 1);
	CU_ASSERT_EQUAL(m->box[1], 128);	/* Z_BLOCK_M */
	m = &p.launch[0].args[1].tmap;	/* V */
	CU_ASSERT_EQUAL(p.launch[0].args[1].buf, 1);
	CU_ASSERT(m->dims[0] == 4096 && m->dims[1] == 1024);
	CU_ASSERT_EQUAL(m->box[1], 128);	/* Z_BLOCK_N */
	/* y = z U^T */
	CU_ASSERT_STRING_EQUAL(p.launch[1].kernel, "gemm_tn_ws");
	CU_ASSERT_EQUAL(p.launch[1].program, 1);
	CU_ASSERT_EQUAL(p.launch[1].grid[0], 8 * 16);
	CU_ASSERT_EQUAL(p.launch[1].grid[1], 1);
	m = &p.launch[1].args[0].tmap;	/* z */
	CU_ASSERT_EQUAL(p.launch[1].args[0].buf, 5);
	CU_ASSERT(m->dims[0] == 1024 && m->dims[1] == 1024 && m->strides[1] == 1024);
	CU_ASSERT_EQUAL(m->box[1], 128);
	m = &p.launch[1].args[1].tmap;	/* U */
	CU_ASSERT_EQUAL(p.launch[1].args[1].buf, 2);
	CU_ASSERT(m->dims[0] == 1024 && m->dims[1] == 4096 && m->strides[1] == 1024);
	CU_ASSERT_EQUAL(m->box[1], 256);
	CU_ASSERT_EQUAL(p.launch[1].args[2].buf, 3);	/* y */
	CU_ASSERT_EQUAL(p.launch[1].args[6].i, 4096);
	/* both are programmatic dependent launches of programs that wait
	 * for their predecessor (kt_pdl_wait under -DKT_PDL=1) */
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(p.launch[i].pdl, 1);
		CU_ASSERT(has_define(&p.programs[p.launch[i].program], "KT_PDL=1"));
	}
	/* unsplit and equal tiles: one program, two launches */
	c.p[9] = 1;	/* Z_SPLIT_K */
	c.p[7] = 128;	/* Z_BLOCK_M */
	c.p[8] = 256;	/* Z_BLOCK_N */
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(lowrank->buffers(lowrank, &s, &c, bufs), 6);
	CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
	CU_ASSERT_EQUAL(p.nprograms, 1);
	CU_ASSERT_EQUAL(p.nlaunch, 2);
	/* 16-row z tiles are no warpgroup tiles */
	c.p[7] = 16;
	CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "BLOCK_M=16"));
}

/* ---- lowrank unfused_ws plans on the host ---- */

/* unfused_ws plans through the shared emulator (plan_emu.h: gemm_tn_ws
 * with its operands read through the TMAP args' geometry, zero outside
 * the dims, zA / zB = 2: (k, batch, rows), k-tiles of 64, split-K slices
 * into the fp32 workspace; splitk_reduce; bf16 buffers round on store, as
 * on the GPU; every access bounds-checked). lowrank's own check: a split
 * launch comes from a SPLIT_K=2 or 4 program. */
static int lr_kernel(struct emu *m, const struct kt_launch *l)
{
	if (strcmp(l->kernel, "gemm_tn_ws") == 0) {
		long long sk = l->grid[1];

		CU_ASSERT(sk == 1 || has_define(&m->plan->programs[l->program],
						sk == 2 ? "SPLIT_K=2" : "SPLIT_K=4"));
	}
	return 0;
}

/* Runs plan p of config c on inputs in (bf16 bits, problem buffer order);
 * returns y (malloc'ed). */
static float *lr_run(const struct kt_shape *s, const struct kt_config *c, const struct kt_plan *p,
		     uint16_t *const *in, long *oob)
{
	return emu_run(lowrank, s, c, p, in, 3, 3, 1, "lowrank", lr_kernel, oob);
}

static double lr_rel(const float *a, const float *b, size_t n)
{
	double d = 0, r = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		r += (double)b[i] * b[i];
	}
	return r > 0 ? sqrt(d / r) : 1e30;
}

/* unfused_ws plans (z split in 2 and 4 and not, 1 and 2 consumers, masked
 * M, N and K edges) on the host equal cpu_ref; a split plan whose z GEMM
 * covers half of K does not, nor the four-slice plan with its reduce summing
 * one slice only (the controls). */
static void test_lowrank_ws_emulated(void)
{
	static const char *const cfgs[] = {
		"variant=unfused_ws,BLOCK_M=128,BLOCK_N=128,STAGES=4,GROUP_M=8,Z_BLOCK_M=128,"
		"Z_BLOCK_N=64,Z_SPLIT_K=2,CONSUMERS=2",
		"variant=unfused_ws,BLOCK_M=64,BLOCK_N=64,STAGES=3,GROUP_M=8,Z_BLOCK_M=64,"
		"Z_BLOCK_N=64,Z_SPLIT_K=4,CONSUMERS=1",
		"variant=unfused_ws,BLOCK_M=128,BLOCK_N=256,STAGES=3,GROUP_M=8,Z_BLOCK_M=128,"
		"Z_BLOCK_N=128,Z_SPLIT_K=1,CONSUMERS=2",
	};
	struct kt_shape s = ft_shape(lowrank, "tokens=130,in=1032,out=200,rank=72");
	struct kt_target t = ft_target("sm_90a");
	struct kt_buf pb[KT_MAX_BUFS];
	uint16_t *in[3] = {NULL, NULL, NULL};
	float *ref = NULL, *outs[1];
	struct kt_err e = {0};
	size_t i, ny;
	int k;

	CU_ASSERT_EQUAL_FATAL(lowrank->buffers(lowrank, &s, NULL, pb), 5);
	for (k = 0; k < 3; k++) {
		in[k] = malloc(pb[k].elems * sizeof(uint16_t));
		CU_ASSERT_PTR_NOT_NULL_FATAL(in[k]);
		kt_fill_bf16(in[k], pb[k].elems, 500 + (uint64_t)k, pb[k].scale);
	}
	ny = pb[3].elems;
	ref = malloc(ny * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
	outs[0] = ref;
	CU_ASSERT_EQUAL_FATAL(lowrank->cpu_ref(lowrank, &s, (const void *const *)in, outs, &e), 0);
	for (i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		struct kt_config c;
		struct kt_plan p;
		char why[200] = "";
		long oob;
		double rel;
		float *y;

		CU_ASSERT_EQUAL_FATAL(kt_config_parse(lowrank, cfgs[i], &c, &e), 0);
		CU_ASSERT_EQUAL(lowrank->check(lowrank, &s, &c, &t, why, sizeof(why)), 0);
		if (why[0])
			fprintf(stderr, "\n  %s: %s\n", cfgs[i], why);
		CU_ASSERT_EQUAL_FATAL(lowrank->plan(lowrank, &s, &c, &t, &p, &e), 0);
		/* split in four: + splitk_reduce; in two: the cluster reduce */
		CU_ASSERT_EQUAL(p.nlaunch, c.p[9] == 4 ? 3 : 2);
		y = lr_run(&s, &c, &p, in, &oob);
		rel = lr_rel(y, ref, ny);
		CU_ASSERT_EQUAL(oob, 0);
		CU_ASSERT(rel < lowrank->tol / 2);
		printf("\n  emulated %s: rel L2 %.2e", cfgs[i], rel);
		free(y);
		if (c.p[9] > 1) {
			struct kt_plan q = p;

			/* z over about half of K (a multiple of 8) */
			q.launch[0].args[5].i = q.launch[0].args[5].i / 16 * 8;
			y = lr_run(&s, &c, &q, in, &oob);
			CU_ASSERT(lr_rel(y, ref, ny) > 0.1);
			free(y);
		}
		if (p.nlaunch == 3) {
			p.launch[1].args[5].i = 1;	/* the reduce sums one slice */
			y = lr_run(&s, &c, &p, in, &oob);
			CU_ASSERT(lr_rel(y, ref, ny) > 0.1);
			free(y);
		}
	}
	printf("\n");
	free(ref);
	for (k = 0; k < 3; k++)
		free(in[k]);
}

struct ws_space {
	const struct kt_family *f;
	struct kt_shape s;
	struct kt_target t;
	int variant;
	long all, valid, split, bad;
};

/* Exact pruning: a config passes check() iff both of its tiles pass the
 * ws rules (rebuilt here from the params by name), and every valid one
 * plans its two or three ws launches (the plans' own rules:
 * test_conformance). */
static int ws_space_one(const struct kt_config *c, void *arg)
{
	struct ws_space *x = arg;
	struct kt_gemm_tile y, z;
	struct kt_plan p;
	struct kt_err e = {0};
	char why[200];
	long T = kt_shape_get(x->f, &x->s, "tokens"), n = kt_shape_get(x->f, &x->s, "in");
	long m = kt_shape_get(x->f, &x->s, "out"), R = kt_shape_get(x->f, &x->s, "rank");
	int ok;

	if (c->variant != x->variant)
		return 0;
	x->all++;
	ws_tile(&y, kt_config_get(x->f, c, "BLOCK_M"), kt_config_get(x->f, c, "BLOCK_N"),
		kt_config_get(x->f, c, "CONSUMERS"), 1);
	y.stages = kt_config_get(x->f, c, "STAGES");
	ws_tile(&z, kt_config_get(x->f, c, "Z_BLOCK_M"), kt_config_get(x->f, c, "Z_BLOCK_N"),
		kt_config_get(x->f, c, "CONSUMERS"), kt_config_get(x->f, c, "Z_SPLIT_K"));
	z.stages = y.stages;
	z.split_cluster = z.split_k == 2;	/* as lowrank.c plans two slices */
	ok = kt_gemm_check_space(&z, T, R, n, 0, &x->t, why, sizeof(why)) == 0 &&
	     kt_gemm_check_space(&y, T, m, R, 0, &x->t, why, sizeof(why)) == 0;
	if ((x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)) == 0) != ok) {
		x->bad++;
		return 0;
	}
	if (!ok)
		return 0;
	x->valid++;
	x->split += z.split_k > 1;
	if (x->f->plan(x->f, &x->s, c, &x->t, &p, &e) != 0) {
		x->bad++;
		return 0;
	}
	x->bad += strcmp(p.launch[0].kernel, "gemm_tn_ws") != 0 ||
		  strcmp(p.launch[p.nlaunch - 1].kernel, "gemm_tn_ws") != 0 ||
		  p.nlaunch != (z.split_k > 2 ? 3 : 2);	/* 2 slices: the cluster reduce */
	return 0;
}

static void test_lowrank_ws_space(void)
{
	static const char *const shapes[] = {"tokens=1024,in=4096,out=4096,rank=1024",
					     "tokens=1024,in=4096,out=4096,rank=256",
					     "tokens=100,in=4096,out=1000,rank=64"};
	size_t i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		struct ws_space x;

		memset(&x, 0, sizeof(x));
		x.f = lowrank;
		x.s = ft_shape(lowrank, shapes[i]);
		x.t = ft_target("sm_90a");
		x.variant = kt_variant_index(lowrank, "unfused_ws");
		CU_ASSERT_FATAL(x.variant >= 0);
		CU_ASSERT_EQUAL(kt_space_foreach(lowrank, 0, ws_space_one, &x), 0);
		printf("\n  lowrank unfused_ws %s: %ld of %ld valid, %ld split", shapes[i], x.valid,
		       x.all, x.split);
		CU_ASSERT_EQUAL(x.bad, 0);
		CU_ASSERT(x.valid > 0 && x.valid < x.all);
		if (i == 0)
			CU_ASSERT(x.split > 0);	/* the skinny z GEMM gets split-K */
		/* and none on a target without sm_90a */
		memset(&x.valid, 0, sizeof(x.valid));
		x.all = x.split = x.bad = 0;
		x.t = ft_target("sm_90");
		CU_ASSERT_EQUAL(kt_space_foreach(lowrank, 0, ws_space_one, &x), 0);
		CU_ASSERT_EQUAL(x.valid, 0);
		CU_ASSERT_EQUAL(x.bad, 0);
	}
	printf("\n");
}

/* ---- targets ---- */

static void test_targets(void)
{
	struct kt_target t;
	char arch[16];

	CU_ASSERT_EQUAL(kt_target_named("sm_90a", &t), 0);
	CU_ASSERT_EQUAL(t.sm, 90);
	CU_ASSERT_EQUAL(t.arch_a, 1);
	kt_target_arch(&t, arch, sizeof(arch));
	CU_ASSERT_STRING_EQUAL(arch, "sm_90a");
	CU_ASSERT_EQUAL(kt_target_named("sm_80", &t), 0);
	kt_target_arch(&t, arch, sizeof(arch));
	CU_ASSERT_STRING_EQUAL(arch, "sm_80");
	CU_ASSERT_EQUAL(t.smem_optin, 163 * 1024);
	CU_ASSERT_EQUAL(t.max_threads, 1024);
	CU_ASSERT_EQUAL(kt_target_named("sm_86", &t), 0);
	CU_ASSERT_EQUAL(t.smem_optin, 99 * 1024);
	CU_ASSERT_EQUAL(kt_target_named("sm_90", &t), 0);
	CU_ASSERT_EQUAL(t.smem_optin, 227 * 1024);
	CU_ASSERT_EQUAL(kt_target_named("sm_70", &t), -1);
	CU_ASSERT_EQUAL(kt_target_named(NULL, &t), -1);
}

/* ---- inputs and bf16 ---- */

static void test_fill(void)
{
	enum { N = 100000 };
	uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *c = malloc(N * 2);
	double sum = 0, amax = 0;
	int i, zeros = 0, same_ab = 1, diff_ac = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(a && b && c);
	kt_fill_bf16(a, N, 7, 0.5);
	kt_fill_bf16(b, N, 7, 0.5);
	kt_fill_bf16(c, N, 8, 0.5);
	for (i = 0; i < N; i++) {
		float v = kt_bf16_to_f32(a[i]);

		same_ab &= a[i] == b[i];
		diff_ac += a[i] != c[i];
		zeros += v == 0.f;
		sum += v;
		if (fabs(v) > amax)
			amax = fabs(v);
	}
	CU_ASSERT_EQUAL(same_ab, 1);		/* deterministic */
	CU_ASSERT(diff_ac > N * 9 / 10);	/* the seed matters */
	CU_ASSERT_EQUAL(zeros, 0);
	CU_ASSERT(amax <= 0.5 && amax > 0.49);	/* fills (-scale, scale) */
	CU_ASSERT(fabs(sum / N) < 0.01);	/* centred */
	/* the float value is the same function */
	CU_ASSERT_EQUAL(kt_f32_to_bf16(kt_fill_value(7, 123, 0.5)), a[123]);
	CU_ASSERT(kt_fill_value(7, 123, 0.5) != kt_fill_value(7, 124, 0.5));
	free(a);
	free(b);
	free(c);
}

static void test_bf16(void)
{
	unsigned h;
	int bad = 0;
	float one_tie = 1.0f + ldexpf(1.0f, -8), three_tie = 1.0f + 3 * ldexpf(1.0f, -8);

	/* every non-NaN bf16 survives bf16 -> f32 -> bf16 */
	for (h = 0; h < 65536; h++) {
		float f = kt_bf16_to_f32((uint16_t)h);

		if (isnan(f))
			bad += !isnan(kt_bf16_to_f32(kt_f32_to_bf16(f)));
		else
			bad += kt_f32_to_bf16(f) != h;
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* ties go to even */
	CU_ASSERT_EQUAL(kt_bf16_to_f32(kt_f32_to_bf16(one_tie)), 1.0f);
	CU_ASSERT_EQUAL(kt_bf16_to_f32(kt_f32_to_bf16(three_tie)), 1.0f + ldexpf(1.0f, -6));
	CU_ASSERT_EQUAL(kt_bf16_to_f32(kt_f32_to_bf16(nextafterf(one_tie, 2.f))),
			1.0f + ldexpf(1.0f, -7));
	CU_ASSERT_EQUAL(kt_bf16_to_f32(kt_f32_to_bf16(-one_tie)), -1.0f);
	CU_ASSERT(isnan(kt_bf16_to_f32(kt_f32_to_bf16(NAN))));
	CU_ASSERT(isinf(kt_bf16_to_f32(kt_f32_to_bf16(3.4e38f))));
	CU_ASSERT_EQUAL(kt_dtype_size(KT_BF16), 2);
	CU_ASSERT_EQUAL(kt_dtype_size(KT_F32), 4);
	CU_ASSERT_EQUAL(kt_dtype_size(KT_I32), 4);
}

/* ---- CPU references ---- */

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / den);
}

/* Fills a family's inputs the way the worker does: buffer i from seed+i. */
static void **make_inputs(const struct kt_family *f, const struct kt_shape *s, int *n)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	int nb = f->buffers(f, s, NULL, bufs), i;
	void **in = calloc(KT_MAX_BUFS, sizeof(*in));

	*n = 0;
	for (i = 0; i < nb && in; i++) {
		if (bufs[i].role != KT_BUF_INPUT)
			continue;
		in[*n] = malloc(bufs[i].elems * 2);
		CU_ASSERT_PTR_NOT_NULL_FATAL(in[*n]);
		kt_fill_bf16(in[*n], bufs[i].elems, 1000 + (uint64_t)i, bufs[i].scale);
		(*n)++;
	}
	return in;
}

static void free_inputs(void **in, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(in[i]);
	free(in);
}

static void test_dense_ref(void)
{
	struct kt_shape s = ft_shape(dense, "tokens=37,in=200,out=72");
	long T = 37, n = 200, m = 72, t, o, k;
	float *y = malloc(T * m * 4), *naive = malloc(T * m * 4);
	struct kt_err e = {0};
	void **in;
	int nin;
	double err, norm = 0;

	in = make_inputs(dense, &s, &nin);
	CU_ASSERT_EQUAL_FATAL(nin, 2);
	CU_ASSERT_EQUAL_FATAL(dense->cpu_ref(dense, &s, (const void *const *)in, &y, &e), 0);
	/* an independent naive version: float, k descending */
	for (t = 0; t < T; t++)
		for (o = 0; o < m; o++) {
			const uint16_t *x = in[0], *w = in[1];
			float acc = 0;

			for (k = n - 1; k >= 0; k--)
				acc += kt_bf16_to_f32(x[t * n + k]) * kt_bf16_to_f32(w[o * n + k]);
			naive[t * m + o] = acc;
			norm += (double)acc * acc;
		}
	err = rel_l2(y, naive, (size_t)(T * m));
	CU_ASSERT(err < 1e-5);
	/* the scales make y O(1): rms between 0.1 and 10 */
	CU_ASSERT(sqrt(norm / (T * m)) > 0.1 && sqrt(norm / (T * m)) < 10);
	/* and it is not trivially equal to something else: a changed input moves it */
	((uint16_t *)in[0])[0] ^= 0x0040;
	dense->cpu_ref(dense, &s, (const void *const *)in, &naive, &e);
	CU_ASSERT(rel_l2(naive, y, (size_t)(T * m)) > 0);
	free_inputs(in, nin);
	free(y);
	free(naive);
}

static void test_lowrank_ref(void)
{
	struct kt_shape ls = ft_shape(lowrank, "tokens=29,in=96,out=56,rank=24");
	struct kt_shape ds = ft_shape(dense, "tokens=29,in=96,out=56");
	long T = 29, n = 96, m = 56, R = 24, o, k, r;
	float *yl = malloc(T * m * 4), *yd = malloc(T * m * 4);
	uint16_t *W = malloc(m * n * 2);
	struct kt_err e = {0};
	const void *din[2];
	void **in;
	int nin;
	double err;

	in = make_inputs(lowrank, &ls, &nin);
	CU_ASSERT_EQUAL_FATAL(nin, 3);
	CU_ASSERT_EQUAL_FATAL(lowrank->cpu_ref(lowrank, &ls, (const void *const *)in, &yl, &e), 0);
	/* W = U . V materialized in double, then rounded to bf16 like any weight */
	for (o = 0; o < m; o++)
		for (k = 0; k < n; k++) {
			const uint16_t *V = in[1], *U = in[2];
			double acc = 0;

			for (r = 0; r < R; r++)
				acc += (double)kt_bf16_to_f32(U[o * R + r]) *
				       (double)kt_bf16_to_f32(V[r * n + k]);
			W[o * n + k] = kt_f32_to_bf16((float)acc);
		}
	din[0] = in[0];
	din[1] = W;
	CU_ASSERT_EQUAL_FATAL(dense->cpu_ref(dense, &ds, din, &yd, &e), 0);
	err = rel_l2(yl, yd, (size_t)(T * m));
	printf("\n  lowrank vs dense(U.V) rel L2 %.2e (tol %.0e)\n", err, lowrank->tol);
	CU_ASSERT(err < lowrank->tol);
	CU_ASSERT(err > 0);	/* W's rounding shows: the two really are different paths */
	free_inputs(in, nin);
	free(yl);
	free(yd);
	free(W);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("family", init_suite, NULL);
	CU_add_test(s, "registry", test_registry);
	CU_add_test(s, "shape round trip", test_shape_roundtrip);
	CU_add_test(s, "shape errors", test_shape_errors);
	CU_add_test(s, "config round trip", test_config_roundtrip);
	CU_add_test(s, "config errors", test_config_errors);
	CU_add_test(s, "config keys without a later parameter", test_config_absent);
	CU_add_test(s, "space enumeration: planted variants, order, early stop", test_space);
	CU_add_test(s, "check dense", test_check);
	CU_add_test(s, "check lowrank", test_check_lowrank);
	CU_add_test(s, "measured defaults", test_defaults);
	CU_add_test(s, "roofline peaks: measured devices only", test_peaks);
	CU_add_test(s, "rings deeper than 5 only for decode tiles", test_ring_rule);
	CU_add_test(s, "plans", test_plans);
	CU_add_test(s, "check wgmma_ws", test_ws_check);
	CU_add_test(s, "plan wgmma_ws (tensor maps)", test_ws_plan);
	CU_add_test(s, "wgmma_ws batched launches", test_ws_batched);
	CU_add_test(s, "ws: batches side by side in a row map (k, batch, rows)",
		    test_ws_interleaved_batches);
	CU_add_test(s, "ws split-K", test_ws_splitk);
	CU_add_test(s, "ws persistent: checks, launch, emulated walk", test_ws_persistent);
	CU_add_test(s, "ws ping-pong: checks, launch, tC map, emulated walk", test_ws_pingpong);
	CU_add_test(s, "lowrank unfused_ws plan (tensor maps, split z)", test_lowrank_ws);
	CU_add_test(s, "lowrank unfused PDL: the dependents flagged, the first launch not", test_lowrank_pdl);
	CU_add_test(s, "lowrank unfused_ws space: exact pruning, every valid config plans",
		    test_lowrank_ws_space);
	CU_add_test(s, "lowrank unfused_ws plans on the host vs cpu_ref", test_lowrank_ws_emulated);
	CU_add_test(s, "targets", test_targets);
	CU_add_test(s, "fill", test_fill);
	CU_add_test(s, "bf16", test_bf16);
	CU_add_test(s, "dense cpu_ref vs naive", test_dense_ref);
	CU_add_test(s, "lowrank cpu_ref vs dense(U.V)", test_lowrank_ref);
	return kt_test_main();
}
