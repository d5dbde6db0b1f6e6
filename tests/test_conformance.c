/*
 * test_conformance.c -- what every registered family promises (family.h),
 * checked the same way for each, on the CPU. A family in the registry
 * without a case below fails the suite; the per-family test files keep
 * what is special to their family.
 *
 *  - descriptor: dims, variants and parameters within the limits, names
 *    unique, every hook a listed family needs present, a tolerance;
 *  - space: per variant the product of its parameters' value lists, summed,
 *    is kt_space_size and what kt_space_foreach visits; every config visited
 *    is in the space, and its key parses back to it and is unique;
 *  - plans, at each family's shapes on sm_80, sm_86, sm_90 and sm_90a (and
 *    sm_90a with 132 SMs): a config check() refuses has a reason and plan()
 *    refuses it too; a config it accepts plans into launches the target
 *    can run and the worker accepts (measure_plan_check_bufs), over the config's
 *    buffers, the problem's first and in the same order, every output
 *    written; every variant is valid somewhere; the reference plans over
 *    the problem's buffers; prepare_plan's buffers are the configs' own;
 *  - defaults, at each family's default shapes on every target: a config of
 *    the space that check() takes and plan() plans; none only where no
 *    config of the space is valid;
 *  - on small shapes the emulator (plan_emu.h) runs the reference plan and
 *    the first, a middle and the last valid config of every variant (prep
 *    included, sm_90a: every MMA path), and every output agrees with
 *    cpu_ref: within 1e-5 with fp32 intermediates, within half the family's
 *    tolerance with bf16 ones, no access out of bounds, nothing left
 *    non-finite; a plan that reads a prepared buffer, run without its prep
 *    launches, does not agree (the control).
 *
 * Hidden families (selftest) break rules on purpose (a launch of too many
 * threads, a kernel that faults): they take the descriptor, space and
 * default checks only.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/family.h"
#include "famtest.h"
#include "plan_emu.h"
#include "testutil.h"
#include "templates/templates.h"
#include "tuner/measure.h"	/* measure_plan_check_bufs: what the worker accepts */

#define NMAX 10

struct fcase {
	const char *family;
	const char *shapes[NMAX];	/* spaces and plans (NULL-terminated) */
	const char *small[NMAX];	/* the emulator's (none: not emulated) */
	const char *tpl;		/* its kernels' template, for the emulator */
	emu_family_fn emu;		/* its own kernels (NULL: the GEMM template's) */
	int ref_emulated;		/* 1: the emulator knows its reference's kernels */
};

static const struct fcase cases[] = {
	{"dense",
	 {"tokens=1024,in=4096,out=4096", "tokens=16,in=4096,out=4096",
	  "tokens=1000,in=4096,out=4104", "tokens=16384,in=11008,out=4096", "tokens=1,in=16,out=16",
	  "tokens=77,in=264,out=136"},
	 /* masked M, N and K edges; 64-row tiles from 33 tokens */
	 {"tokens=130,in=264,out=136", "tokens=33,in=72,out=48", "tokens=5,in=32,out=40"},
	 "gemm", NULL, 1},
	{"lowrank",
	 {"tokens=1024,in=4096,out=4096,rank=1024", "tokens=16,in=4096,out=4096,rank=1024",
	  "tokens=1024,in=2048,out=2048,rank=128", "tokens=1024,in=4096,out=4096,rank=256",
	  "tokens=16,in=2048,out=2048,rank=8", "tokens=1,in=16,out=16,rank=8"},
	 {"tokens=130,in=1032,out=200,rank=72", "tokens=40,in=64,out=96,rank=32",
	  "tokens=5,in=48,out=64,rank=16"},
	 "gemm", NULL, 1},
	{"monarch",
	 {"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	  "tokens=1024,in=768,out=3072,blocks=4,rank=192",
	  "tokens=16,in=2048,out=2048,blocks=16,rank=256", "tokens=1,in=64,out=64,blocks=8,rank=8"},
	 /* b, rank/b, in/b and out/b all differ, so that a swapped index
	  * shows; rank/blocks 4 (naive only); a partial 64-wide k-tile; the
	  * last two are fused_ws's (rank/blocks 128, 256) */
	 {"tokens=33,in=256,out=512,blocks=8,rank=128", "tokens=7,in=128,out=64,blocks=2,rank=48",
	  "tokens=5,in=128,out=64,blocks=8,rank=32", "tokens=130,in=384,out=256,blocks=4,rank=128",
	  "tokens=40,in=640,out=256,blocks=2,rank=256",
	  "tokens=40,in=512,out=512,blocks=8,rank=512"},
	 "monarch", emu_monarch, 1},
	{"monarch_bm",
	 {"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	  "tokens=1024,in=768,out=3072,blocks=4,rank=192",
	  "tokens=16,in=2048,out=2048,blocks=16,rank=256", "tokens=1,in=64,out=64,blocks=8,rank=8"},
	 {"tokens=33,in=256,out=512,blocks=8,rank=128", "tokens=7,in=128,out=64,blocks=2,rank=48",
	  "tokens=130,in=384,out=256,blocks=4,rank=128",
	  "tokens=40,in=640,out=256,blocks=2,rank=256"},
	 "monarch", emu_monarch, 1},
	{"blast",
	 {"tokens=1024,in=4096,out=4096,blocks=16,rank=1024",
	  "tokens=1024,in=2048,out=2048,blocks=16,rank=256",
	  "tokens=16,in=4096,out=4096,blocks=16,rank=1024",
	  "tokens=1024,in=1152,out=3456,blocks=9,rank=384",
	  "tokens=1,in=64,out=64,blocks=8,rank=8"},
	 /* rank not a multiple of blocks; b = 20, 72 take the mixer's 4- and
	  * 1-rank paths; fused_cl's 16-CTA cluster with a tail token tile;
	  * tcmix_fused's rank slices of 32 */
	 {"tokens=65,in=256,out=384,blocks=4,rank=40", "tokens=7,in=64,out=192,blocks=8,rank=24",
	  "tokens=3,in=160,out=320,blocks=20,rank=16", "tokens=2,in=576,out=576,blocks=72,rank=8",
	  "tokens=70,in=1024,out=2048,blocks=16,rank=128",
	  "tokens=40,in=128,out=256,blocks=2,rank=64"},
	 "blast", emu_blast, 1},
	{"blockattn_fwd",
	 {"seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
	  "seqs=29,lmax=100,heads=3,head_dim=64,block=128,rope=2",
	  "seqs=64,lmax=1024,heads=4,head_dim=128,block=256,rope=1"},
	 /* ragged: sequences shorter than a block and partial tails */
	 {"seqs=5,lmax=100,heads=2,head_dim=64,block=64,rope=0",
	  "seqs=3,lmax=150,heads=2,head_dim=128,block=64,rope=1",
	  "seqs=4,lmax=200,heads=1,head_dim=64,block=128,rope=2",
	  "seqs=3,lmax=300,heads=1,head_dim=128,block=128,rope=0",
	  "seqs=3,lmax=600,heads=1,head_dim=64,block=256,rope=2"},
	 NULL, emu_blockattn, 0},
	{"blockattn_bwd",
	 {"seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0",
	  "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1",
	  "seqs=29,lmax=100,heads=3,head_dim=64,block=128,rope=2",
	  "seqs=64,lmax=1024,heads=4,head_dim=128,block=256,rope=1",
	  "seqs=64,lmax=1024,heads=4,head_dim=128,block=256,rope=0"},
	 /* block 256 at rope 0 too: ws (the chunked plan on wgmma) with
	  * and without its rotations */
	 {"seqs=5,lmax=100,heads=2,head_dim=64,block=64,rope=0",
	  "seqs=3,lmax=150,heads=2,head_dim=128,block=64,rope=1",
	  "seqs=4,lmax=200,heads=1,head_dim=64,block=128,rope=2",
	  "seqs=3,lmax=300,heads=1,head_dim=128,block=128,rope=0",
	  "seqs=3,lmax=600,heads=1,head_dim=64,block=256,rope=2",
	  "seqs=3,lmax=600,heads=1,head_dim=64,block=256,rope=0"},
	 NULL, emu_blockattn, 0},
	/* its kernels run on the worker's CPU test device (test_worker) */
	{"selftest", {"n=1000000", "n=1"}, {NULL}, NULL, NULL, 0},
};

#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static const char *const tnames[] = {"sm_80", "sm_86", "sm_90", "sm_90a", "sm_90a"};
#define NTARGETS 5

/* target i of tnames; the last: sm_90a with the H200's SM count and L2 */
static struct kt_target target_at(int i)
{
	struct kt_target t = ft_target(tnames[i]);

	if (i == NTARGETS - 1) {
		t.sms = 132;
		t.l2_bytes = 60L << 20;
	}
	return t;
}

static const struct fcase *case_of(const struct kt_family *f)
{
	int i;

	for (i = 0; i < NCASES; i++)
		if (strcmp(cases[i].family, f->name) == 0)
			return &cases[i];
	return NULL;
}

static int has_dim(const struct kt_family *f, const char *name)
{
	struct kt_shape s;

	memset(&s, 0, sizeof(s));
	return kt_shape_get(f, &s, name) >= 0;
}

static int planted(const struct kt_family *f, int v)
{
	return (f->planted >> v) & 1u;
}

/* ---- descriptors ---- */

static void test_descriptors(void)
{
	int i, j, k, v;

	CU_ASSERT(kt_family_count() >= NCASES);
	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);

		CU_ASSERT_PTR_NOT_NULL_FATAL(f);
		CU_ASSERT_PTR_NOT_NULL(case_of(f));
		if (!case_of(f))
			fprintf(stderr, "\n  family %s has no conformance case\n", f->name);
		CU_ASSERT_PTR_EQUAL(kt_family_find(f->name), f);
		CU_ASSERT(f->summary && f->summary[0]);
		CU_ASSERT(f->ndims > 0 && f->ndims <= KT_MAX_DIMS);
		CU_ASSERT(f->nparams >= 0 && f->nparams <= KT_MAX_PARAMS);
		CU_ASSERT(f->nvariants > 0 && f->nvariants <= KT_MAX_VARIANTS);
		CU_ASSERT(f->check && f->buffers && f->plan && f->ref_plan && f->cpu_ref);
		CU_ASSERT(f->flops && f->min_bytes && f->default_config);
		CU_ASSERT(f->tol > 0 && f->tol < 0.1);
		CU_ASSERT_EQUAL(f->planted >> f->nvariants, 0);
		for (j = 0; j < f->ndims; j++) {
			CU_ASSERT(f->dims[j].name && f->dims[j].min <= f->dims[j].max);
			for (k = 0; k < j; k++)
				CU_ASSERT(strcmp(f->dims[j].name, f->dims[k].name) != 0);
		}
		for (v = 0; v < f->nvariants; v++)
			for (k = 0; k < v; k++)
				CU_ASSERT(strcmp(f->variants[v], f->variants[k]) != 0);
		for (j = 0; j < f->nparams; j++) {
			const struct kt_param *p = &f->params[j];
			int in_list = 0;

			CU_ASSERT(p->nvalues >= 1 && p->nvalues <= KT_MAX_VALUES);
			CU_ASSERT(p->variants != 0 && (p->variants >> f->nvariants) == 0);
			for (k = 0; k < j; k++)
				CU_ASSERT(strcmp(p->name, f->params[k].name) != 0);
			for (k = 0; k < p->nvalues; k++) {
				int m;

				in_list |= p->values[k] == p->absent;
				for (m = 0; m < k; m++)
					CU_ASSERT(p->values[k] != p->values[m]);
			}
			/* an old key parses into the space */
			CU_ASSERT(!p->optional || in_list);
		}
	}
}

/* ---- spaces and keys ---- */

struct walk {
	const struct kt_family *f;
	long n, bad;
	char **keys;
};

static int key_one(const struct kt_config *c, void *arg)
{
	struct walk *w = arg;
	struct kt_config c2;
	struct kt_err e = {0};
	char key[512], key2[512];

	kt_config_key(w->f, c, key, sizeof(key));
	if (!kt_config_in_space(w->f, c) || kt_config_parse(w->f, key, &c2, &e) != 0 ||
	    c2.variant != c->variant || memcmp(c2.p, c->p, sizeof(c->p)) != 0) {
		if (w->bad++ < 5)
			fprintf(stderr, "\n  %s: %s does not round-trip (%s)\n", w->f->name, key,
				e.msg);
	} else {
		kt_config_key(w->f, &c2, key2, sizeof(key2));
		if (strcmp(key, key2) != 0)
			w->bad++;
	}
	w->keys[w->n++] = strdup(key);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_spaces(void)
{
	int i, v, k, with;

	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);

		for (with = 0; with < 2; with++) {
			long product = 0, j;
			struct walk w;

			for (v = 0; v < f->nvariants; v++) {
				long pv = 1;

				if (!with && planted(f, v))
					continue;
				for (k = 0; k < f->nparams; k++)
					if ((f->params[k].variants >> v) & 1u)
						pv *= f->params[k].nvalues;
				product += pv;
			}
			CU_ASSERT_EQUAL(kt_space_size(f, with), product);
			memset(&w, 0, sizeof(w));
			w.f = f;
			w.keys = calloc((size_t)product + 1, sizeof(char *));
			CU_ASSERT_PTR_NOT_NULL_FATAL(w.keys);
			CU_ASSERT_EQUAL(kt_space_foreach(f, with, key_one, &w), 0);
			CU_ASSERT_EQUAL(w.n, product);
			CU_ASSERT_EQUAL(w.bad, 0);
			/* every key names one config */
			qsort(w.keys, (size_t)w.n, sizeof(char *), cmp_str);
			for (j = 1; j < w.n; j++)
				CU_ASSERT(strcmp(w.keys[j - 1], w.keys[j]) != 0);
			for (j = 0; j < w.n; j++)
				free(w.keys[j]);
			free(w.keys);
			if (with)
				printf("\n  %-14s %6ld configs (%ld planted)", f->name, product,
				       product - kt_space_size(f, 0));
		}
	}
}

/* ---- plans ---- */

/* What any plan of any family must be on target t over buffers b[0..nb):
 * launches the target can run and the worker accepts, every output
 * buffer written. 0, or 1 with why. */
static int plan_bad(const struct kt_plan *p, const struct kt_buf *b, int nb,
		    const struct kt_target *t, char *why, size_t whylen)
{
	int i, a, prepared = 0;

	if (p->nprograms < 1 || p->nprograms > KT_MAX_PROGRAMS || p->nlaunch < 1 ||
	    p->nlaunch > KT_MAX_LAUNCHES || p->nprep < 0 || p->nprep > KT_MAX_LAUNCHES)
		return snprintf(why, whylen, "%d programs, %d prep and %d launches", p->nprograms,
				p->nprep, p->nlaunch), 1;
	for (i = 0; i < p->nprograms; i++)
		if (!p->programs[i].tpl || !kt_template_find(p->programs[i].tpl))
			return snprintf(why, whylen, "program %d: no template '%s'", i,
					p->programs[i].tpl ? p->programs[i].tpl : "(null)"), 1;
	for (i = 0; i < p->nprep + p->nlaunch; i++) {
		const struct kt_launch *l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];
		unsigned threads = l->block[0] * l->block[1] * l->block[2];

		if (l->program < 0 || l->program >= p->nprograms || !l->kernel[0])
			return snprintf(why, whylen, "launch %d: program %d, kernel '%s'", i,
					l->program, l->kernel), 1;
		if (!l->grid[0] || !l->grid[1] || !l->grid[2] || l->grid[1] > 65535 ||
		    l->grid[2] > 65535 || threads < 1 || threads > (unsigned)t->max_threads ||
		    l->smem > (unsigned)t->smem_optin)
			return snprintf(why, whylen, "%s: grid %u,%u,%u block %u smem %u",
					l->kernel,
					l->grid[0], l->grid[1], l->grid[2], threads, l->smem), 1;
		for (a = 0; a < l->nargs; a++)
			if ((l->args[a].kind == KT_ARG_BUF || l->args[a].kind == KT_ARG_TMAP) &&
			    (l->args[a].buf < 0 || l->args[a].buf >= nb))
				return snprintf(why, whylen,
						"%s: argument %d names buffer %d of %d",
						l->kernel, a, l->args[a].buf, nb), 1;
	}
	for (i = 0; i < nb; i++) {
		if (b[i].role == KT_BUF_OUTPUT && !kt_plan_uses_buf(p, i))
			return snprintf(why, whylen, "output %s is no launch's", b[i].name), 1;
		prepared |= b[i].prepared && kt_plan_uses_buf(p, i);
	}
	if (prepared && p->nprep < 1)
		return snprintf(why, whylen, "a prepared buffer and no prep launch"), 1;
	return measure_plan_check_bufs(p, nb, b, why, whylen) != 0;
}

/* the problem's buffers first, the same and in the same order */
static int prefix_bad(const struct kt_buf *pb, int np, const struct kt_buf *b, int nb)
{
	int i;

	if (nb < np || nb > KT_MAX_BUFS)
		return 1;
	for (i = 0; i < np; i++)
		if (strcmp(pb[i].name, b[i].name) != 0 || pb[i].role != b[i].role ||
		    pb[i].dtype != b[i].dtype || pb[i].elems != b[i].elems)
			return 1;
	return 0;
}

struct pwalk {
	const struct kt_family *f;
	struct kt_shape s;
	struct kt_target t;
	const char *sname, *tname;
	struct kt_buf pb[KT_MAX_BUFS];
	int np;
	struct kt_buf prep[KT_MAX_BUFS];	/* prepare_plan's, nprep of them */
	int nprep;
	long valid[KT_MAX_VARIANTS], bad;
};

static void pw_fail(struct pwalk *x, const struct kt_config *c, const char *what, const char *why)
{
	char key[512];

	kt_config_key(x->f, c, key, sizeof(key));
	if (x->bad++ < 5)
		fprintf(stderr, "\n  %s %s %s %s: %s%s%s\n", x->f->name, x->sname, x->tname, key,
			what,
			why ? ": " : "", why ? why : "");
}

static int plan_one(const struct kt_config *c, void *arg)
{
	struct pwalk *x = arg;
	struct kt_buf b[KT_MAX_BUFS];
	struct kt_plan p;
	struct kt_err e = {0};
	char why[300] = "";
	int nb, i, k;

	if (x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)) != 0) {
		if (!why[0])
			pw_fail(x, c, "refused without a reason", NULL);
		if (x->f->plan(x->f, &x->s, c, &x->t, &p, &e) == 0 || e.code != KT_EINVAL)
			pw_fail(x, c, "refused by check(), not by plan()", NULL);
		return 0;
	}
	x->valid[c->variant]++;
	if (x->f->plan(x->f, &x->s, c, &x->t, &p, &e) != 0) {
		pw_fail(x, c, "does not plan", e.msg);
		return 0;
	}
	nb = x->f->buffers(x->f, &x->s, c, b);
	if (prefix_bad(x->pb, x->np, b, nb)) {
		pw_fail(x, c, "its buffers do not start with the problem's", NULL);
		return 0;
	}
	if (plan_bad(&p, b, nb, &x->t, why, sizeof(why)))
		pw_fail(x, c, "bad plan", why);
	/* a prepared buffer is prepare_plan's, the same name, type and size */
	for (i = x->np; i < nb; i++) {
		if (!b[i].prepared)
			continue;
		for (k = 0; k < x->nprep; k++)
			if (x->prep[k].prepared && strcmp(x->prep[k].name, b[i].name) == 0)
				break;
		if (k == x->nprep || x->prep[k].dtype != b[i].dtype ||
		    x->prep[k].elems != b[i].elems)
			pw_fail(x, c, "a prepared buffer prepare_plan() does not fill", b[i].name);
	}
	return 0;
}

static void test_plans(void)
{
	int i, j, ti, v;

	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);
		const struct fcase *fc = case_of(f);
		long seen[KT_MAX_VARIANTS] = {0};

		if (!fc || f->hidden)
			continue;
		for (j = 0; fc->shapes[j]; j++)
			for (ti = 0; ti < NTARGETS; ti++) {
				struct pwalk x;
				struct kt_plan p;
				struct kt_err e = {0};
				char why[300] = "";

				memset(&x, 0, sizeof(x));
				x.f = f;
				x.s = ft_shape(f, fc->shapes[j]);
				x.t = target_at(ti);
				x.sname = fc->shapes[j];
				x.tname = tnames[ti];
				x.np = f->buffers(f, &x.s, NULL, x.pb);
				CU_ASSERT_FATAL(x.np >= 2 && x.np <= KT_MAX_BUFS);
				/* the reference, over the problem's buffers */
				CU_ASSERT_EQUAL(f->ref_plan(f, &x.s, &x.t, &p, &e), 0);
				if (e.msg[0])
					fprintf(stderr, "\n  %s %s ref_plan: %s\n", f->name,
						x.sname, e.msg);
				if (!e.msg[0] && plan_bad(&p, x.pb, x.np, &x.t, why, sizeof(why))) {
					CU_FAIL("a bad reference plan");
					fprintf(stderr, "\n  %s %s ref_plan: %s\n", f->name,
						x.sname, why);
				}
				if (f->prepare_plan) {
					kt_err_clear(&e);
					CU_ASSERT_EQUAL(f->prepare_plan(f, &x.s, &x.t, &p, x.prep,
									&x.nprep,
									&e), 0);
					CU_ASSERT(!prefix_bad(x.pb, x.np, x.prep, x.nprep));
					CU_ASSERT(p.nprep >= 1 && p.nlaunch == 0);
				}
				CU_ASSERT_EQUAL(kt_space_foreach(f, 1, plan_one, &x), 0);
				CU_ASSERT_EQUAL(x.bad, 0);
				for (v = 0; v < f->nvariants; v++)
					seen[v] += x.valid[v];
			}
		/* no variant is dead at every shape and target */
		for (v = 0; v < f->nvariants; v++) {
			CU_ASSERT(seen[v] > 0);
			if (!seen[v])
				fprintf(stderr, "\n  %s: variant %s valid nowhere\n", f->name,
					f->variants[v]);
		}
	}
}

/* ---- defaults ---- */

static int any_valid(const struct kt_config *c, void *arg)
{
	struct pwalk *x = arg;
	char why[300];

	return x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)) == 0;
}

/* The default of f at shape text on every target: a config of the space
 * that check() takes and plan() plans, or none where no config of the
 * space is valid. Returns how many shape x target pairs had one. */
static int defaults_at(const struct kt_family *f, const char *text)
{
	int ti, n = 0;

	for (ti = 0; ti < NTARGETS; ti++) {
		struct pwalk x;
		struct kt_config c;
		struct kt_plan p;
		struct kt_err e = {0};
		char why[300] = "", key[512];
		int ok;

		memset(&x, 0, sizeof(x));
		x.f = f;
		x.s = ft_shape(f, text);
		x.t = target_at(ti);
		memset(&c, 0, sizeof(c));
		if (f->default_config(f, &x.s, &x.t, &c) != 0) {
			ok = kt_space_foreach(f, 0, any_valid, &x) == 0;
			CU_ASSERT(ok);
			if (!ok)
				fprintf(stderr, "\n  %s %s %s: no default, but a valid config\n",
					f->name, text, tnames[ti]);
			continue;
		}
		n++;
		ok = kt_config_in_space(f, &c);
		if (ok)
			ok = f->check(f, &x.s, &c, &x.t, why, sizeof(why)) == 0;
		if (ok)
			ok = f->plan(f, &x.s, &c, &x.t, &p, &e) == 0;
		CU_ASSERT(ok);
		if (!ok) {
			kt_config_key(f, &c, key, sizeof(key));
			fprintf(stderr, "\n  %s %s %s: default %s: %s%s\n", f->name, text,
				tnames[ti], key,
				why[0] ? why : "not in the space", e.msg);
		}
	}
	return n;
}

/* The reference layers of docs/kernels.md (bench/shapes.sh's list):
 * in, out, blast's blocks and rank, monarch's (0: none). */
static const struct {
	long in, out, bb, br, mb, mr;
} layers[] = {
	{4096, 4096, 16, 1024, 16, 1024},	/* llama7b q/k/v/o */
	{4096, 11008, 16, 1488, 16, 1536},	/* llama7b gate/up */
	{11008, 4096, 16, 1488, 16, 1536},	/* llama7b down */
	{2048, 2048, 16, 256, 16, 256},		/* llama1b q/o */
	{768, 3072, 6, 192, 4, 192},		/* gpt2s c_fc */
	{1152, 3456, 9, 384, 0, 0},		/* dit_xl qkv */
};

/* Layer l at `tokens` as a shape of linear family f: 0, or -1 where f
 * has no such layer (monarch at dit_xl). */
static int layer_shape(const struct kt_family *f, size_t l, long tokens, char *text, size_t len)
{
	int mon = strncmp(f->name, "monarch", 7) == 0;

	if (has_dim(f, "blocks")) {
		if (mon && !layers[l].mb)
			return -1;
		snprintf(text, len, "tokens=%ld,in=%ld,out=%ld,blocks=%ld,rank=%ld", tokens,
			 layers[l].in, layers[l].out, mon ? layers[l].mb : layers[l].bb,
			 mon ? layers[l].mr : layers[l].br);
	} else if (has_dim(f, "rank")) {
		snprintf(text, len, "tokens=%ld,in=%ld,out=%ld,rank=%ld", tokens, layers[l].in,
			 layers[l].out, layers[l].br);
	} else {
		snprintf(text, len, "tokens=%ld,in=%ld,out=%ld", tokens, layers[l].in,
			 layers[l].out);
	}
	return 0;
}

/* Linear families at the reference layers and token counts from decode
 * to 16384; attention at every head_dim, block and rope, the bench's and
 * small ragged lengths; every family at its own shapes. */
static void test_defaults(void)
{
	static const long tokens[] = {1, 16, 33, 64, 65, 256, 1024, 4096, 16384};
	static const long lens[][2] = {{1152, 256}, {1152, 1024}, {29, 100}, {1, 1}};
	int i, seen = 0;

	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);
		const struct fcase *fc = case_of(f);
		char text[200];
		size_t l, n;
		int j, d, b, r;

		for (j = 0; fc && fc->shapes[j]; j++)
			seen += defaults_at(f, fc->shapes[j]);
		for (l = 0; has_dim(f, "in") && l < sizeof(layers) / sizeof(layers[0]); l++)
			for (n = 0; n < sizeof(tokens) / sizeof(tokens[0]); n++)
				if (layer_shape(f, l, tokens[n], text, sizeof(text)) == 0)
					seen += defaults_at(f, text);
		for (n = 0; has_dim(f, "head_dim") && n < sizeof(lens) / sizeof(lens[0]); n++)
			for (d = 64; d <= 128; d += 64)
				for (b = 64; b <= 128; b += 64)
					for (r = 0; r < 3; r++) {
						snprintf(text, sizeof(text),
							 "seqs=%ld,lmax=%ld,heads=4,head_dim=%d,"
							 "block=%d,rope=%d", lens[n][0],
							 lens[n][1], d, b, r);
						seen += defaults_at(f, text);
					}
	}
	printf("\n  %d defaults checked", seen);
	CU_ASSERT(seen > 1500);
}

/* ---- the CPU reference against emulated plans ---- */

/* One problem on the host: every buffer of the problem, inputs filled as
 * the worker fills them (fill, else kt_fill_bf16 at the buffer's scale),
 * and cpu_ref's outputs. */
struct hprob {
	const struct kt_family *f;
	struct kt_shape s;
	const char *text;
	int np, nout;
	struct kt_buf pb[KT_MAX_BUFS];
	void *host[KT_MAX_BUFS];	/* inputs as the family stores them */
	float *in[KT_MAX_BUFS];		/* the same as floats, for the emulator */
	float *ref[KT_MAX_BUFS];	/* cpu_ref's, per output in order */
};

static void hprob_init(struct hprob *h, const struct kt_family *f, const char *text, uint64_t seed)
{
	struct kt_err e = {0};
	float *outs[KT_MAX_BUFS];
	size_t k;
	int i;

	memset(h, 0, sizeof(*h));
	h->f = f;
	h->text = text;
	h->s = ft_shape(f, text);
	h->np = f->buffers(f, &h->s, NULL, h->pb);
	for (i = 0; i < h->np; i++) {
		const struct kt_buf *b = &h->pb[i];

		if (b->role == KT_BUF_OUTPUT) {
			h->ref[h->nout] = calloc(b->elems ? b->elems : 1, sizeof(float));
			CU_ASSERT_PTR_NOT_NULL_FATAL(h->ref[h->nout]);
			outs[h->nout] = h->ref[h->nout];
			h->nout++;
		}
		if (b->role != KT_BUF_INPUT)
			continue;
		h->host[i] = calloc(b->elems ? b->elems : 1, kt_dtype_size(b->dtype));
		h->in[i] = calloc(b->elems ? b->elems : 1, sizeof(float));
		CU_ASSERT_PTR_NOT_NULL_FATAL(h->host[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(h->in[i]);
		if (f->fill) {
			CU_ASSERT_EQUAL_FATAL(f->fill(f, &h->s, i, h->host[i], seed + (uint64_t)i),
					      0);
		} else {
			CU_ASSERT_EQUAL_FATAL(b->dtype, KT_BF16);	/* else a fill() */
			kt_fill_bf16(h->host[i], b->elems, seed + (uint64_t)i, b->scale);
		}
		for (k = 0; k < b->elems; k++) {
			const void *x = h->host[i];

			if (b->dtype == KT_BF16)
				h->in[i][k] = kt_bf16_to_f32(((const uint16_t *)x)[k]);
			else if (b->dtype == KT_I32)
				h->in[i][k] = (float)((const int32_t *)x)[k];
			else
				h->in[i][k] = ((const float *)x)[k];
		}
	}
	CU_ASSERT_FATAL(h->nout >= 1);
	CU_ASSERT_EQUAL_FATAL(f->cpu_ref(f, &h->s, (const void *const *)h->host, outs, &e), 0);
}

static void hprob_release(struct hprob *h)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++) {
		free(h->host[i]);
		free(h->in[i]);
		free(h->ref[i]);
	}
	memset(h, 0, sizeof(*h));
}

/* Runs plan p over buffers b[0..nb) (the problem's first) with h's
 * inputs; returns the worst relative L2 error of an output against
 * cpu_ref, *bad set when an access was out of bounds or an output kept a
 * non-finite value. skip_prep: the timed launches alone. */
static double emu_error(const struct hprob *h, const struct fcase *fc, const struct kt_plan *p,
			const struct kt_buf *b, int nb, int round, int skip_prep, int *bad)
{
	const float *in[KT_MAX_BUFS] = {NULL};
	float *out[KT_MAX_BUFS], *zero[KT_MAX_BUFS];
	int run[2 * KT_MAX_LAUNCHES] = {0}, i, o = 0;
	double worst = 0;
	long oob = 0;

	memset(zero, 0, sizeof(zero));
	for (i = 0; i < nb; i++) {
		in[i] = i < h->np ? h->in[i] : NULL;
		/* scratch the worker zeroes */
		if (b[i].zeroed) {
			zero[i] = calloc(b[i].elems ? b[i].elems : 1, sizeof(float));
			in[i] = zero[i];
		}
	}
	for (i = 0; i < p->nprep + p->nlaunch; i++)
		run[i] = !skip_prep || i >= p->nprep;
	emu_run_all(p, b, nb, in, nb, run, round, fc->tpl, fc->emu, out, &oob);
	*bad = oob != 0;
	for (i = 0; i < nb; i++) {
		if (i < h->np && b[i].role == KT_BUF_OUTPUT) {
			double rel = emu_rel_l2(out[i], h->ref[o++], b[i].elems);

			*bad |= emu_nonfinite(out[i], b[i].elems) != 0;
			if (!(rel <= worst))
				worst = rel;
		}
		free(out[i]);
		free(zero[i]);
	}
	return worst;
}

/* The emulated plan of config c (NULL: the reference) against cpu_ref,
 * exactly and with bf16 rounding; with a prepared buffer also the
 * control. */
static void emu_check(const struct hprob *h, const struct fcase *fc, const struct kt_config *c,
		      const struct kt_target *t)
{
	const struct kt_family *f = h->f;
	struct kt_buf b[KT_MAX_BUFS];
	struct kt_plan p;
	struct kt_err e = {0};
	char key[512] = "reference";
	int nb, round, bad, i, prepared = 0;

	if (c) {
		kt_config_key(f, c, key, sizeof(key));
		CU_ASSERT_EQUAL_FATAL(f->plan(f, &h->s, c, t, &p, &e), 0);
	} else {
		CU_ASSERT_EQUAL_FATAL(f->ref_plan(f, &h->s, t, &p, &e), 0);
	}
	nb = f->buffers(f, &h->s, c, b);
	for (round = 0; round < 2; round++) {
		double lim = round ? f->tol / 2 : 1e-5;
		double rel = emu_error(h, fc, &p, b, nb, round, 0, &bad);

		CU_ASSERT(rel < lim && !bad);
		if (!(rel < lim) || bad)
			fprintf(stderr, "\n  %s %s %s round %d: rel %.3g%s\n", f->name, h->text,
				key,
				round, rel, bad ? ", out of bounds or not finite" : "");
	}
	for (i = 0; i < nb; i++)
		prepared |= b[i].prepared && kt_plan_uses_buf(&p, i);
	if (prepared) {
		double rel = emu_error(h, fc, &p, b, nb, 0, 1, &bad);

		CU_ASSERT(bad || rel > 0.1);
		if (!(bad || rel > 0.1))
			fprintf(stderr, "\n  %s %s %s: right without its prep launches\n", f->name,
				h->text, key);
	}
}

static void test_emulated(void)
{
	/* sm_90a: the mma.sync, wgmma and warp-specialized paths */
	struct kt_target t = ft_target("sm_90a");
	int i, j, v, k;

	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);
		const struct fcase *fc = case_of(f);
		int runs[KT_MAX_VARIANTS] = {0};

		if (!fc || !fc->small[0])
			continue;
		for (j = 0; fc->small[j]; j++) {
			struct hprob h;

			hprob_init(&h, f, fc->small[j], 31 + (uint64_t)j);
			if (fc->ref_emulated)
				emu_check(&h, fc, NULL, &t);
			for (v = 0; v < f->nvariants; v++) {
				struct ft_collect x;
				const struct kt_config *cs[3];

				if (planted(f, v))
					continue;
				memset(&x, 0, sizeof(x));
				x.f = f;
				x.s = h.s;
				x.t = t;
				x.variant = v;
				kt_space_foreach(f, 0, ft_collect_one, &x);
				if (x.n == 0)
					continue;
				runs[v]++;
				cs[0] = &x.first;
				cs[1] = &x.mid;
				cs[2] = &x.last;
				for (k = 0; k < 3; k++)
					emu_check(&h, fc, cs[k], &t);
			}
			hprob_release(&h);
		}
		printf("\n  %-14s", f->name);
		for (v = 0; v < f->nvariants; v++) {
			if (planted(f, v))
				continue;
			/* every variant ran on some small shape */
			CU_ASSERT(runs[v] > 0);
			printf(" %s %d", f->variants[v], runs[v]);
		}
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("conformance", NULL, NULL);
	CU_add_test(s, "every family's descriptor is complete", test_descriptors);
	CU_add_test(s, "spaces: the product of the value lists, every key round-trips",
		    test_spaces);
	CU_add_test(s, "every valid config plans, every refused one says why", test_plans);
	CU_add_test(s, "defaults are valid configs of the space", test_defaults);
	CU_add_test(s, "cpu_ref against the emulated plans on small shapes", test_emulated);
	return kt_test_main();
}
