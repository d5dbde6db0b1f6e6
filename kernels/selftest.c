/*
 * selftest.c -- the hidden `selftest` family: y = 2x on n bf16 elements.
 *
 * It exists to prove the worker's failure handling, on a GPU and on the
 * worker's CPU test device alike. Its variants are a correct kernel (`ok`),
 * a wrong one (`wrong`: y = 2x + 1), a kernel that writes through a wild
 * pointer (`fault`), one that spins forever (`hang`) and a launch the driver
 * refuses (`launch_error`: more threads per block than any GPU allows);
 * planted too: `sparse_wrong` (right but for 88 zeroed elements, spread
 * evenly: at n = 2^20 its relative L2 error is 0.0094, under a pooled 1e-2
 * bound, so only the local check catches it), `oob_write` (right, and 256
 * elements written past the end of y), `compile_error` (its program does
 * not compile) and `smem_excess` (asks for more shared memory than the
 * target allows). Planted variants are visited only when a sweep asks.
 * The templates are in templates/selftest.cu; the CPU test device in
 * tuner/worker_child.c gives the variants the same meaning on the host.
 */
#include "family.h"

#include <stdio.h>
#include <string.h>

enum { SELFTEST_THREADS = 256, SELFTEST_BAD_THREADS = 2048 };
/* UNROLL=2 configs ask for this much dynamic shared memory (unused by the
 * kernel): more than the 48 KiB default, so a GPU run proves the worker's
 * opt-in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) path. */
#define SELFTEST_SMEM (64u * 1024u)

enum {
	V_OK = 0,
	V_WRONG,
	V_FAULT,
	V_HANG,
	V_LAUNCH_ERROR,
	V_SPARSE_WRONG,
	V_OOB_WRITE,
	V_COMPILE_ERROR,
	V_SMEM_EXCESS,
	V_COUNT
};

static const struct kt_dim selftest_dims[] = {
	{ "n", 1, 1L << 28, 0, "elements of x and y" },
};

static const char *const selftest_variants[V_COUNT] = {
	"ok", "wrong", "fault", "hang", "launch_error", "sparse_wrong", "oob_write",
	"compile_error", "smem_excess",
};

static const struct kt_param selftest_params[] = {
	{ "UNROLL", 2, { 1, 2 }, (1u << V_COUNT) - 1,
	  "elements per thread (so every variant has more than one config)" },
};

static int selftest_check(const struct kt_family *f, const struct kt_shape *s,
			  const struct kt_config *c, const struct kt_target *tgt, char *why,
			  size_t whylen)
{
	if (c->variant < 0 || c->variant >= V_COUNT) {
		snprintf(why, whylen, "no variant %d", c->variant);
		return 1;
	}
	if (c->p[0] != 1 && c->p[0] != 2) {
		snprintf(why, whylen, "UNROLL must be 1 or 2");
		return 1;
	}
	if (c->p[0] == 2 && c->variant != V_SMEM_EXCESS && tgt && tgt->smem_optin > 0 &&
	    (unsigned)tgt->smem_optin < SELFTEST_SMEM) {
		snprintf(why, whylen, "needs %u bytes of shared memory, target allows %d",
			 SELFTEST_SMEM, tgt->smem_optin);
		return 1;
	}
	/* launch_error is meant to be refused by the driver, not pruned here. */
	if (c->variant != V_LAUNCH_ERROR && tgt && tgt->max_threads > 0 &&
	    tgt->max_threads < SELFTEST_THREADS) {
		snprintf(why, whylen, "needs %d threads per block, target allows %d",
			 SELFTEST_THREADS, tgt->max_threads);
		return 1;
	}
	return 0;
}

static int selftest_buffers(const struct kt_family *f, const struct kt_shape *s,
			    const struct kt_config *cfg, struct kt_buf out[KT_MAX_BUFS])
{
	memset(out, 0, 2 * sizeof(out[0]));
	snprintf(out[0].name, sizeof(out[0].name), "x");
	out[0].role = KT_BUF_INPUT;
	out[0].dtype = KT_BF16;
	out[0].elems = (size_t)s->v[0];
	out[0].scale = 1.0;
	snprintf(out[1].name, sizeof(out[1].name), "y");
	out[1].role = KT_BUF_OUTPUT;
	out[1].dtype = KT_BF16;
	out[1].elems = (size_t)s->v[0];
	out[1].scale = 0;
	return 2;
}

/* One launch of kernel over x, y, n with `per` elements per thread. */
static void selftest_launch(struct kt_launch *l, const char *kernel, long n, long per,
			    unsigned threads)
{
	long per_block = (long)SELFTEST_THREADS * per;

	memset(l, 0, sizeof(*l));
	l->program = 0;
	snprintf(l->kernel, sizeof(l->kernel), "%s", kernel);
	l->grid[0] = (unsigned)((n + per_block - 1) / per_block);
	l->grid[1] = l->grid[2] = 1;
	l->block[0] = threads;
	l->block[1] = l->block[2] = 1;
	l->smem = 0;
	l->nargs = 3;
	l->args[0].kind = KT_ARG_BUF;
	l->args[0].buf = 0;
	l->args[1].kind = KT_ARG_BUF;
	l->args[1].buf = 1;
	l->args[2].kind = KT_ARG_I32;
	l->args[2].i = n;
}

static void selftest_program(struct kt_program *p, long unroll, int broken)
{
	memset(p, 0, sizeof(*p));
	p->tpl = "selftest";
	p->ndefines = 1;
	snprintf(p->defines[0], sizeof(p->defines[0]), "UNROLL=%ld", unroll);
	if (broken)
		snprintf(p->defines[p->ndefines++], sizeof(p->defines[0]), "SELFTEST_BROKEN=1");
}

static int selftest_plan(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *c, const struct kt_target *tgt,
			 struct kt_plan *out, struct kt_err *err)
{
	static const char *const kernels[V_COUNT] = {
		"selftest_ok", "selftest_wrong", "selftest_fault", "selftest_hang",
		"selftest_ok", "selftest_sparse", "selftest_oob", "selftest_ok", "selftest_ok",
	};
	char why[128];

	if (selftest_check(f, s, c, tgt, why, sizeof(why)))
		return kt_err_set(err, KT_EINVAL, "selftest: %s", why);
	memset(out, 0, sizeof(*out));
	out->nprograms = 1;
	selftest_program(&out->programs[0], c->p[0], c->variant == V_COMPILE_ERROR);
	out->nlaunch = 1;
	selftest_launch(&out->launch[0], kernels[c->variant], s->v[0], c->p[0],
			c->variant == V_LAUNCH_ERROR ? SELFTEST_BAD_THREADS : SELFTEST_THREADS);
	if (c->p[0] == 2)
		out->launch[0].smem = SELFTEST_SMEM;
	/* More than the target's opt-in limit: the driver refuses the launch. */
	if (c->variant == V_SMEM_EXCESS)
		out->launch[0].smem = (tgt && tgt->smem_optin > 0 ? (unsigned)tgt->smem_optin :
				       SELFTEST_SMEM) + 1024u;
	return 0;
}

static int selftest_ref_plan(const struct kt_family *f, const struct kt_shape *s,
			     const struct kt_target *tgt, struct kt_plan *out, struct kt_err *err)
{
	memset(out, 0, sizeof(*out));
	out->nprograms = 1;
	selftest_program(&out->programs[0], 1, 0);
	out->nlaunch = 1;
	selftest_launch(&out->launch[0], "selftest_ref", s->v[0], 1, SELFTEST_THREADS);
	return 0;
}

static int selftest_cpu_ref(const struct kt_family *f, const struct kt_shape *s,
			    const void *const *in, float *const *out, struct kt_err *err)
{
	const uint16_t *x = in[0];
	long i;

	for (i = 0; i < s->v[0]; i++)
		out[0][i] = 2.0f * kt_bf16_to_f32(x[i]);
	return 0;
}

static double selftest_flops(const struct kt_family *f, const struct kt_shape *s)
{
	return (double)s->v[0];
}

static double selftest_min_bytes(const struct kt_family *f, const struct kt_shape *s)
{
	return 4.0 * (double)s->v[0];
}

static int selftest_default_config(const struct kt_family *f, const struct kt_shape *s,
				   const struct kt_target *tgt, struct kt_config *out)
{
	memset(out, 0, sizeof(*out));
	out->variant = V_OK;
	out->p[0] = 1;
	return 0;
}

const struct kt_family selftest_family = {
	.name = "selftest",
	.summary = "test family: y = 2x, with planted wrong, faulting and hanging kernels",
	.hidden = 1,
	.ndims = 1,
	.dims = selftest_dims,
	.nvariants = V_COUNT,
	.variants = selftest_variants,
	.planted = (1u << V_FAULT) | (1u << V_HANG) | (1u << V_SPARSE_WRONG) | (1u << V_OOB_WRITE) |
		   (1u << V_COMPILE_ERROR) | (1u << V_SMEM_EXCESS),
	.nparams = 1,
	.params = selftest_params,
	/* 2x is exact in bf16; wrong adds 1, far above this. */
	.tol = 1e-2,
	.check = selftest_check,
	.buffers = selftest_buffers,
	.plan = selftest_plan,
	.ref_plan = selftest_ref_plan,
	.cpu_ref = selftest_cpu_ref,
	.fill = NULL,
	.flops = selftest_flops,
	.min_bytes = selftest_min_bytes,
	.default_config = selftest_default_config,
};
