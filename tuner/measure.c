/*
 * measure.c -- what both backends of the worker child measure with: plan
 * checks, input fills, comparison with the reference, the verdict, and the
 * timing policy (tuner/measure.h). A leaf: no driver, no process, no pipe.
 */
#include "measure.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "../util/hash.h"
#include "nvml.h"

/* ---- plans ---- */

static int tmap_swizzle_ok(int swizzle)
{
	return swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128;
}

int measure_tmap_check(const struct kt_tmap *t, const struct kt_buf *b, char *why, size_t whylen)
{
	unsigned long long es, last = 0, term;
	int i;

	if (t->rank < 2 || t->rank > 3) {
		snprintf(why, whylen, "rank %d (2 or 3 supported)", t->rank);
		return -1;
	}
	for (i = 0; i < t->rank; i++) {
		if (t->dims[i] <= 0 || t->dims[i] > (1LL << 32)) {
			snprintf(why, whylen, "dims[%d] = %lld (1..2^32)", i, t->dims[i]);
			return -1;
		}
		if (t->box[i] < 1 || t->box[i] > 256) {
			snprintf(why, whylen, "box[%d] = %d (1..256)", i, t->box[i]);
			return -1;
		}
	}
	if (!tmap_swizzle_ok(t->swizzle)) {
		snprintf(why, whylen, "swizzle %d (0, 32, 64 or 128 bytes)", t->swizzle);
		return -1;
	}
	if (t->strides[0] != 1) {
		snprintf(why, whylen, "strides[0] = %lld (dimension 0 is contiguous: 1)",
			 t->strides[0]);
		return -1;
	}
	if (!b)
		return 0;	/* the rest needs the element size */
	es = kt_dtype_size(b->dtype);
	for (i = 1; i < t->rank; i++) {
		unsigned long long bytes;

		if (t->strides[i] <= 0 || __builtin_mul_overflow((unsigned long long)t->strides[i], es,
								 &bytes) || bytes >= (1ULL << 40)) {
			snprintf(why, whylen, "strides[%d] = %lld elements (1 .. 2^40 bytes)", i,
				 t->strides[i]);
			return -1;
		}
		if (bytes % 16) {
			snprintf(why, whylen, "strides[%d] = %lld elements = %llu bytes, not a "
				 "multiple of 16", i, t->strides[i], bytes);
			return -1;
		}
	}
	if (((unsigned long long)t->box[0] * es) % 16) {
		snprintf(why, whylen, "box[0] = %d elements = %llu bytes, not a multiple of 16",
			 t->box[0], (unsigned long long)t->box[0] * es);
		return -1;
	}
	if (t->swizzle && (unsigned long long)t->box[0] * es > (unsigned long long)t->swizzle) {
		snprintf(why, whylen, "box[0] = %d elements = %llu bytes, over the %d-byte swizzle "
			 "span", t->box[0], (unsigned long long)t->box[0] * es, t->swizzle);
		return -1;
	}
	/* The last element the map can address must lie inside the buffer:
	 * the driver does not know the allocation and TMA would read past it. */
	last = (unsigned long long)t->dims[0] - 1;
	for (i = 1; i < t->rank; i++)
		if (__builtin_mul_overflow((unsigned long long)(t->dims[i] - 1),
					   (unsigned long long)t->strides[i], &term) ||
		    __builtin_add_overflow(last, term, &last)) {
			last = ~0ULL;
			break;
		}
	if (last >= b->elems) {
		snprintf(why, whylen, "spans %s%llu elements of buffer %s (%zu elements)",
			 last == ~0ULL ? "over " : "", last == ~0ULL ? last : last + 1, b->name,
			 b->elems);
		return -1;
	}
	return 0;
}

void measure_tmap_describe(const struct kt_tmap *t, const struct kt_buf *b, char *buf, size_t len)
{
	static const char *const types[] = { "bf16", "f32", "i32" };
	char dims[96] = "", strides[96] = "", box[48] = "";
	int rank = t->rank < 1 ? 1 : t->rank > 3 ? 3 : t->rank, i;
	size_t nd = 0, ns = 0, nb = 0;

	for (i = 0; i < rank; i++) {
		nd += (size_t)snprintf(dims + nd, sizeof(dims) - nd, "%s%lld", i ? "x" : "",
				       t->dims[i]);
		ns += (size_t)snprintf(strides + ns, sizeof(strides) - ns, "%s%lld", i ? "," : "",
				       t->strides[i]);
		nb += (size_t)snprintf(box + nb, sizeof(box) - nb, "%s%d", i ? "x" : "", t->box[i]);
		if (nd >= sizeof(dims) || ns >= sizeof(strides) || nb >= sizeof(box))
			break;
	}
	snprintf(buf, len, "%s %s[rank %d, dims %s, strides %s; box %s; swizzle %d]",
		 b && (unsigned)b->dtype < 3 ? types[b->dtype] : "?", b ? b->name : "buffer",
		 t->rank, dims, strides, box, t->swizzle);
}

int measure_plan_check(const struct kt_plan *p, int nbufs, char *why, size_t whylen)
{
	return measure_plan_check_bufs(p, nbufs, NULL, why, whylen);
}

static int program_has_define(const struct kt_program *pr, const char *def)
{
	int k;

	for (k = 0; k < pr->ndefines && k < KT_MAX_DEFINES; k++)
		if (strncmp(pr->defines[k], def, sizeof(pr->defines[k])) == 0)
			return 1;
	return 0;
}

int measure_plan_check_bufs(const struct kt_plan *p, int nbufs, const struct kt_buf *bufs,
			    char *why, size_t whylen)
{
	const struct kt_launch *l;
	char tw[160];
	int i, j;

	if (p->nprograms < 0 || p->nprograms > KT_MAX_PROGRAMS ||
	    p->nprep < 0 || p->nprep > KT_MAX_LAUNCHES ||
	    p->nlaunch < 0 || p->nlaunch > KT_MAX_LAUNCHES) {
		snprintf(why, whylen, "plan counts out of range (%d programs, %d prep, %d launches)",
			 p->nprograms, p->nprep, p->nlaunch);
		return -1;
	}
	for (i = 0; i < p->nprep + p->nlaunch; i++) {
		l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];
		if (l->program < 0 || l->program >= p->nprograms) {
			snprintf(why, whylen, "launch %d uses program %d of %d", i, l->program,
				 p->nprograms);
			return -1;
		}
		if (!memchr(l->kernel, 0, sizeof(l->kernel)) || !l->kernel[0]) {
			snprintf(why, whylen, "launch %d has no kernel name", i);
			return -1;
		}
		if (l->nargs < 0 || l->nargs > KT_MAX_ARGS) {
			snprintf(why, whylen, "launch %d has %d args", i, l->nargs);
			return -1;
		}
		if (l->cooperative != 0 && l->cooperative != 1) {
			snprintf(why, whylen, "launch %d: cooperative is %d, not 0 or 1", i,
				 l->cooperative);
			return -1;
		}
		if (l->pdl != 0 && l->pdl != 1) {
			snprintf(why, whylen, "launch %d: pdl is %d, not 0 or 1", i, l->pdl);
			return -1;
		}
		/* a kernel that may start before its predecessor finished must
		 * wait for it (templates/common.cuh kt_pdl_wait) */
		if (l->pdl && !program_has_define(&p->programs[l->program], "KT_PDL=1")) {
			snprintf(why, whylen,
				 "launch %d (%.64s) is flagged pdl but its program is not "
				 "compiled with KT_PDL=1",
				 i, l->kernel);
			return -1;
		}
		for (j = 0; j < l->nargs; j++) {
			const struct kt_arg *a = &l->args[j];

			if (a->kind < KT_ARG_BUF || a->kind > KT_ARG_TMAP) {
				snprintf(why, whylen, "launch %d arg %d: bad kind", i, j);
				return -1;
			}
			if ((a->kind == KT_ARG_BUF || a->kind == KT_ARG_TMAP) &&
			    (a->buf < 0 || a->buf >= nbufs)) {
				snprintf(why, whylen, "launch %d arg %d: buffer %d of %d", i, j,
					 a->buf, nbufs);
				return -1;
			}
			if (a->kind == KT_ARG_TMAP &&
			    measure_tmap_check(&a->tmap, bufs ? &bufs[a->buf] : NULL, tw,
					       sizeof(tw)) != 0) {
				snprintf(why, whylen, "launch %d (%s) arg %d: tensor map: %s", i,
					 l->kernel, j, tw);
				return -1;
			}
		}
	}
	return 0;
}

/* ---- inputs and verification ---- */

int measure_fill_input(const struct kt_family *f, const struct kt_shape *s, int i,
		       const struct kt_buf *b, void *host, uint64_t seed, struct kt_err *err)
{
	uint64_t bs = measure_buffer_seed(seed, i);
	size_t k;

	if (f->fill)
		return f->fill(f, s, i, host, bs) == 0 ? 0 :
		       kt_err_set(err, KT_EINTERNAL, "%s: filling input %s failed", f->name, b->name);
	switch (b->dtype) {
	case KT_BF16:
		kt_fill_bf16(host, b->elems, bs, b->scale > 0 ? b->scale : 1.0);
		return 0;
	case KT_F32:
		for (k = 0; k < b->elems; k++)
			((float *)host)[k] = kt_fill_value(bs, k, b->scale > 0 ? b->scale : 1.0);
		return 0;
	case KT_I32:
		break;
	}
	return kt_err_set(err, KT_EINTERNAL, "%s: input %s is int32 and the family has no fill",
			  f->name, b->name);
}

void measure_to_float(enum kt_dtype t, const void *src, float *dst, size_t n)
{
	size_t i;

	switch (t) {
	case KT_BF16:
		for (i = 0; i < n; i++)
			dst[i] = kt_bf16_to_f32(((const uint16_t *)src)[i]);
		break;
	case KT_F32:
		memcpy(dst, src, n * sizeof(float));
		break;
	case KT_I32:
		for (i = 0; i < n; i++)
			dst[i] = (float)((const int32_t *)src)[i];
		break;
	}
}

/* The longest reduction of the problem that the shape names: K of a GEMM
 * (in, rank), of attention (head_dim, and block for P V). Over-estimating
 * it only loosens the local bound a little. */
static long reduction_len(const struct kt_family *f, const struct kt_shape *s)
{
	static const char *const names[] = { "in", "rank", "head_dim", "block" };
	long k = 1, v;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((v = kt_shape_get(f, s, names[i])) > k)
			k = v;
	return k;
}

void measure_tolerance(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_buf *b, struct worker_tol *t)
{
	double n = b->elems > 2 ? (double)b->elems : 2.0;

	t->k = reduction_len(f, s);
	t->l2 = f->tol;
	t->local = 2.0 * sqrt(2.0 * log(n)) * t->l2 + (double)t->k * ldexp(1.0, -23);
	switch (b->dtype) {
	case KT_BF16:
		t->rtol = ldexp(1.0, -6);	/* 2 ulps: 8 significant bits */
		break;
	case KT_F32:
		t->rtol = ldexp(1.0, -22);
		break;
	case KT_I32:
		t->rtol = 0;
		break;
	}
}

double measure_atol(const struct worker_tol *t, double ref_rms)
{
	return t->local * ref_rms;
}

void measure_compare(const float *got, const float *ref, size_t n, double atol, double rtol,
		     struct measure_cmp *c)
{
	size_t i;

	for (i = 0; i < n; i++) {
		double d, r = (double)ref[i];

		if (!isfinite(got[i])) {
			c->nonfinite++;
			continue;
		}
		d = fabs((double)got[i] - r);
		c->sq_diff += d * d;
		c->sq_ref += r * r;
		if (d > c->max_abs)
			c->max_abs = d;
		if (d > atol + rtol * fabs(r))
			c->over++;
	}
}

int measure_judge(struct worker_result *res, const struct kt_buf *bufs, int nb,
		  const struct measure_cmp *cmp, const struct worker_tol *tol)
{
	char why[200] = "";
	int i, wrong = 0;
	long nonfinite = 0;

	res->nout = 0;
	res->rel_err = 0;
	for (i = 0; i < nb && i < KT_MAX_BUFS; i++) {
		struct worker_outerr *o;
		double n, rms;

		if (bufs[i].role != KT_BUF_OUTPUT)
			continue;
		o = &res->out[res->nout++];
		memset(o, 0, sizeof(*o));
		snprintf(o->name, sizeof(o->name), "%s", bufs[i].name);
		n = (double)(bufs[i].elems - (size_t)cmp[i].nonfinite);
		rms = n > 0 ? sqrt(cmp[i].sq_ref / n) : 0;
		o->rel_l2 = cmp[i].sq_ref > 0 ? sqrt(cmp[i].sq_diff / cmp[i].sq_ref) :
			    sqrt(cmp[i].sq_diff);
		o->max_err = rms > 0 ? cmp[i].max_abs / rms : cmp[i].max_abs;
		o->l2_tol = tol[i].l2;
		o->local_tol = tol[i].local;
		o->over = cmp[i].over;
		o->nonfinite = cmp[i].nonfinite;
		nonfinite += cmp[i].nonfinite;
		if (o->rel_l2 > res->rel_err)
			res->rel_err = o->rel_l2;
		if (wrong)
			continue;
		if (o->nonfinite) {
			snprintf(why, sizeof(why), "%s: %ld non-finite", o->name, o->nonfinite);
		} else if (o->over) {
			snprintf(why, sizeof(why),
				 "%s: %ld elements over the local bound (largest error %.3g x rms, "
				 "bound %.3g x rms + %.2g x |ref|); relative L2 %.3g (tolerance %.3g)",
				 o->name, o->over, o->max_err, o->local_tol, tol[i].rtol, o->rel_l2,
				 o->l2_tol);
		} else if (o->rel_l2 > o->l2_tol) {
			snprintf(why, sizeof(why), "%s: relative L2 error %.3g (tolerance %.3g)",
				 o->name, o->rel_l2, o->l2_tol);
		} else {
			continue;
		}
		wrong = 1;
	}
	res->nonfinite = nonfinite > INT_MAX ? INT_MAX : (int)nonfinite;
	if (!wrong && res->guard_changed) {
		snprintf(why, sizeof(why), "wrote past its outputs: %ld bytes of the guard regions "
			 "changed", res->guard_changed);
		wrong = 1;
	}
	if (!wrong)
		return 0;
	res->status = WORKER_WRONG;
	snprintf(res->message, sizeof(res->message), "%s", why);
	return 1;
}

long measure_guard_count(const void *p, size_t n)
{
	const unsigned char *b = p;
	long bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad += b[i] != MEASURE_GUARD_BYTE;
	return bad;
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorted copy statistics of v[0..n). */
static void stats(const double *v, int n, double *scratch, struct worker_result *res)
{
	int p90;

	memcpy(scratch, v, (size_t)n * sizeof(double));
	qsort(scratch, (size_t)n, sizeof(double), cmp_double);
	res->min_us = scratch[0];
	res->median_us = n % 2 ? scratch[n / 2] : 0.5 * (scratch[n / 2 - 1] + scratch[n / 2]);
	p90 = (int)ceil(0.9 * n) - 1;
	res->p90_us = scratch[p90 < 0 ? 0 : p90];
	res->spread = res->median_us > 0 ? (res->p90_us - res->min_us) / res->median_us : 0;
	res->reps = n;
}

int measure_time(const struct measure_timing *t, double est_us, measure_batch_fn fn, void *arg,
		 int *fatal, struct worker_result *res, struct kt_err *err)
{
	int max_reps = t->max_reps > 0 && t->max_reps <= MEASURE_MAX_REPS ? t->max_reps : 200;
	int min_reps = t->min_reps > 0 ? t->min_reps : 10;
	double budget_us = (t->budget_ms > 0 ? t->budget_ms : 400) * 1000.0;
	double stable = t->stable_pct > 0 ? t->stable_pct : 0.5;
	double *times = NULL, *sorted = NULL, prev = -1, start = kt_clock_s();
	int reps = 0, batch, rc = -1;

	if (!(times = malloc((size_t)max_reps * sizeof(double))) ||
	    !(sorted = malloc((size_t)max_reps * sizeof(double)))) {
		kt_err_set(err, KT_EINTERNAL, "timing: out of memory");
		goto out;
	}
	/* Batches amortize the host round trip; a tenth of the budget per
	 * batch at most, so a slow candidate still stops near its budget. */
	batch = est_us > 0 ? (int)(budget_us / 10.0 / est_us) : 10;
	if (batch < 1)
		batch = 1;
	if (batch > 32)
		batch = 32;
	while (reps < max_reps) {
		int n = batch < max_reps - reps ? batch : max_reps - reps;

		if (fn(arg, n, times + reps, fatal, res, err) != 0)
			goto out;
		reps += n;
		stats(times, reps, sorted, res);
		if (reps >= min_reps && prev > 0 &&
		    fabs(res->median_us - prev) <= stable / 100.0 * res->median_us)
			break;
		prev = res->median_us;
		if ((kt_clock_s() - start) * 1e6 >= budget_us)
			break;
	}
	rc = 0;
out:
	free(times);
	free(sorted);
	return rc;
}

/* NVML readings around the timed runs, into res->cond. */
static void cond_before(struct nvml *nv, struct worker_result *res)
{
	struct nvml_sample s;

	if (nv && nvml_read(nv, &s) == 0) {
		res->cond.sm_mhz_before = s.sm_mhz;
		res->cond.mem_mhz_before = s.mem_mhz;
		res->cond.power_w_before = s.power_w;
		res->cond.temp_c_before = s.temp_c;
	}
}

static void cond_after(struct nvml *nv, struct worker_result *res)
{
	struct nvml_sample s;

	if (nv && nvml_read(nv, &s) == 0) {
		res->cond.sm_mhz_after = s.sm_mhz;
		res->cond.mem_mhz_after = s.mem_mhz;
		res->cond.power_w_after = s.power_w;
		res->cond.temp_c_after = s.temp_c;
	}
}

int measure_time_read(struct nvml *nv, const struct measure_timing *t, double est_us,
		      measure_batch_fn fn, void *arg, int *fatal, struct worker_result *res,
		      struct kt_err *err)
{
	int rc;

	cond_before(nv, res);
	rc = measure_time(t, est_us, fn, arg, fatal, res, err);
	if (rc == 0)
		cond_after(nv, res);
	return rc;
}

/* ---- seeds ---- */

uint64_t measure_buffer_seed(uint64_t seed, int buf)
{
	/* splitmix64 of (seed, buf): neighbouring buffers get unrelated values. */
	return kt_mix64(seed + KT_MIX64_STEP * (uint64_t)(buf + 1));
}
