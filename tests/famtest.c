/*
 * famtest.c -- shared helpers of the family test programs (famtest.h).
 */
#include "famtest.h"
#include "plan_emu.h"
#include "testutil.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kt_target ft_target(const char *name)
{
	struct kt_target t;

	memset(&t, 0, sizeof(t));
	CU_ASSERT_EQUAL_FATAL(kt_target_named(name, &t), 0);
	return t;
}

struct kt_shape ft_shape(const struct kt_family *f, const char *text)
{
	struct kt_shape s;
	struct kt_err e = {0};

	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(f, text, &s, &e), 0);
	return s;
}

void ft_expect_shape_error(const struct kt_family *f, const char *text, const char *want)
{
	struct kt_shape s;
	struct kt_err e = {0};
	const char *hit;

	CU_ASSERT_EQUAL(kt_shape_parse(f, text, &s, &e), -1);
	CU_ASSERT_EQUAL(e.code, KT_EINVAL);
	hit = strstr(e.msg, want);
	if (!hit)
		fprintf(stderr, "\n  '%s': message '%s' lacks '%s'\n", text, e.msg, want);
	CU_ASSERT_PTR_NOT_NULL(hit);
}

int ft_collect_one(const struct kt_config *c, void *arg)
{
	struct ft_collect *x = arg;
	char why[200];

	if (c->variant != x->variant || x->f->check(x->f, &x->s, c, &x->t, why, sizeof(why)))
		return 0;
	if (x->n == 0)
		x->first = *c;
	if (x->n % 97 == 13 || x->n == 0)
		x->mid = *c;
	x->last = *c;
	x->n++;
	return 0;
}

int ft_first_config(const struct kt_family *f, const struct kt_shape *s,
		    const struct kt_target *t, int variant, struct kt_config *out)
{
	struct ft_collect x;

	memset(&x, 0, sizeof(x));
	x.f = f;
	x.s = *s;
	x.t = *t;
	x.variant = variant;
	kt_space_foreach(f, 0, ft_collect_one, &x);
	*out = x.first;
	return x.n > 0 ? 0 : -1;
}

void ft_check_output(const float *y, long oob, const float *ref, size_t n, int round,
		     const char *what)
{
	double rel, tol = round ? 4e-3 : 1e-5;

	CU_ASSERT_EQUAL(oob, 0);
	CU_ASSERT_EQUAL(emu_nonfinite(y, n), 0);
	rel = emu_rel_l2(y, ref, n);
	CU_ASSERT(rel < tol);
	if (rel >= tol)
		fprintf(stderr, "\n  %s round=%d: rel %.3g\n", what, round, rel);
}

int ft_gpu_start(double timeout_s, struct worker **w, struct worker_device_info *info, char *why,
		 size_t whylen)
{
	struct worker_opts o;
	struct kt_err err = {0};
	const char *e = getenv("KTUNE_WORKER_BIN");

	worker_opts_default(&o);
	o.exe = e && *e ? e : kt_test_ktune();
	o.backend = WORKER_BACKEND_CUDA;
	o.timeout_s = timeout_s;
	if (worker_start(&o, w, &err) != 0) {
		snprintf(why, whylen, "%s (%s)", err.msg, kt_errcode_name(err.code));
		*w = NULL;
		return err.code == KT_ENOGPU ? 1 : -1;
	}
	worker_info(*w, info);
	return 0;
}

struct kt_target ft_gpu_target(const struct worker_device_info *info)
{
	struct kt_target t;

	memset(&t, 0, sizeof(t));
	t.sm = info->sm;
	t.arch_a = info->sm == 90;
	t.smem_optin = info->smem_optin;
	t.max_threads = info->max_threads;
	t.sms = info->sms;
	t.l2_bytes = info->l2_bytes;
	return t;
}

void ft_built_release(struct ft_built *b)
{
	int i;

	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		jit_result_release(&b->res[i]);
}

int ft_build(struct ft_built *b, const char *arch)
{
	struct kt_err err = {0};
	int i;

	for (i = 0; i < b->plan.nprograms; i++) {
		if (jit_compile(&b->plan.programs[i], arch, &b->res[i], &err) != 0 ||
		    !b->res[i].ok) {
			fprintf(stderr, "\n  compiling %s for %s: %s\n%s\n", b->plan.programs[i].tpl,
				arch, err.msg, b->res[i].log ? b->res[i].log : "");
			return -1;
		}
		b->cubins[i] = b->res[i].cubin;
		b->lens[i] = b->res[i].cubin_len;
	}
	return 0;
}
