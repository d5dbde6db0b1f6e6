/*
 * worker_child.c -- the child side of the worker: `ktune __worker`.
 *
 * Reads one command at a time from fd WK_FD_CMD, answers each on
 * WK_FD_REPLY, and exits when the parent says so, when the pipe closes, or
 * after a reply marked fatal (the CUDA context is poisoned: only a new
 * process gets a clean one). Two backends: CUDA (tuner/cuda.c) and the CPU
 * test device below, which runs the selftest family on the host -- a real
 * SIGSEGV for `fault`, a real endless loop for `hang` -- so that CI proves
 * the parent's crash and hang handling without a GPU.
 *
 * Also here: what both backends share (plan checks, input generation,
 * verification, the timing policy).
 */
#include "worker.h"
#include "worker_int.h"
#include "nvml.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>
#include "../util/clock.h"

/* ---- shared by both backends ---- */

/* 1 for a swizzle span TMA knows: 0 (none), 32, 64 or 128 bytes. */
static int tmap_swizzle_ok(int swizzle)
{
	return swizzle == 0 || swizzle == 32 || swizzle == 64 || swizzle == 128;
}

int wk_tmap_check(const struct kt_tmap *t, const struct kt_buf *b, char *why, size_t whylen)
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

void wk_tmap_describe(const struct kt_tmap *t, const struct kt_buf *b, char *buf, size_t len)
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

int wk_plan_check(const struct kt_plan *p, int nbufs, char *why, size_t whylen)
{
	return wk_plan_check_bufs(p, nbufs, NULL, why, whylen);
}

static int program_has_define(const struct kt_program *pr, const char *def)
{
	int k;

	for (k = 0; k < pr->ndefines && k < KT_MAX_DEFINES; k++)
		if (strncmp(pr->defines[k], def, sizeof(pr->defines[k])) == 0)
			return 1;
	return 0;
}

int wk_plan_check_bufs(const struct kt_plan *p, int nbufs, const struct kt_buf *bufs, char *why,
		       size_t whylen)
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
			    wk_tmap_check(&a->tmap, bufs ? &bufs[a->buf] : NULL, tw, sizeof(tw)) != 0) {
				snprintf(why, whylen, "launch %d (%s) arg %d: tensor map: %s", i,
					 l->kernel, j, tw);
				return -1;
			}
		}
	}
	return 0;
}

int wk_fill_input(const struct kt_family *f, const struct kt_shape *s, int i,
		  const struct kt_buf *b, void *host, uint64_t seed, struct kt_err *err)
{
	uint64_t bs = worker_buffer_seed(seed, i);
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

void wk_to_float(enum kt_dtype t, const void *src, float *dst, size_t n)
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

void worker_tolerance(const struct kt_family *f, const struct kt_shape *s,
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

double wk_atol(const struct worker_tol *t, double ref_rms)
{
	return t->local * ref_rms;
}

void wk_compare(const float *got, const float *ref, size_t n, double atol, double rtol,
		struct wk_cmp *c)
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

int wk_judge(struct worker_result *res, const struct kt_buf *bufs, int nb,
	     const struct wk_cmp *cmp, const struct worker_tol *tol)
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

long wk_guard_count(const void *p, size_t n)
{
	const unsigned char *b = p;
	long bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		bad += b[i] != WK_GUARD_BYTE;
	return bad;
}

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

int wk_time(const struct wk_timing *t, double est_us, wk_batch_fn fn, void *arg,
	    int *fatal, struct worker_result *res, struct kt_err *err)
{
	int max_reps = t->max_reps > 0 && t->max_reps <= WK_MAX_REPS ? t->max_reps : 200;
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

/* ---- the CPU test device ---- */

struct cpu_dev {
	const struct kt_family *f;
	struct kt_shape s;
	size_t n;
	uint16_t *x;		/* host "device" input, bf16 */
	unsigned char *ybuf;	/* y with a guard region on either side */
	uint16_t *y;		/* ybuf + WK_GUARD_BYTES */
	float *ref;		/* expected y */
	double ref_rms;
	struct worker_tol tol;
	struct nvml *nv;	/* a fake NVML in tests; NULL without */
	int smem_optin;		/* what it "allows": 48 KiB */
};

static void cpu_problem_release(struct cpu_dev *d)
{
	free(d->x);
	free(d->ybuf);
	free(d->ref);
	d->x = d->y = NULL;
	d->ybuf = NULL;
	d->ref = NULL;
	d->f = NULL;
}

static void cpu_guard_fill(struct cpu_dev *d)
{
	memset(d->ybuf, WK_GUARD_BYTE, WK_GUARD_BYTES);
	memset(d->y + d->n, WK_GUARD_BYTE, WK_GUARD_BYTES);
}

static long cpu_guard_changed(const struct cpu_dev *d)
{
	return wk_guard_count(d->ybuf, WK_GUARD_BYTES) +
	       wk_guard_count(d->y + d->n, WK_GUARD_BYTES);
}

static int cpu_problem(struct cpu_dev *d, const struct kt_family *f, const struct kt_shape *s,
		       uint64_t seed, struct kt_err *err)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	struct wk_cmp self;
	const void *in[1];
	float *out[1];
	int nb;

	cpu_problem_release(d);
	if (strcmp(f->name, "selftest") != 0)
		return kt_err_set(err, KT_EINVAL,
				  "the cpu test device runs only the selftest family, not %s", f->name);
	nb = f->buffers(f, s, NULL, bufs);
	if (nb != 2 || bufs[0].dtype != KT_BF16 || bufs[1].dtype != KT_BF16 ||
	    bufs[0].elems != bufs[1].elems)
		return kt_err_set(err, KT_EINTERNAL, "selftest: unexpected buffers");
	d->n = bufs[0].elems;
	if (!(d->x = malloc(d->n * 2)) || !(d->ybuf = malloc(d->n * 2 + 2 * WK_GUARD_BYTES)) ||
	    !(d->ref = malloc(d->n * sizeof(float)))) {
		cpu_problem_release(d);
		return kt_err_set(err, KT_EINTERNAL, "cpu device: out of memory for n=%zu", d->n);
	}
	d->y = (uint16_t *)(d->ybuf + WK_GUARD_BYTES);
	cpu_guard_fill(d);
	if (wk_fill_input(f, s, 0, &bufs[0], d->x, seed, err) != 0) {
		cpu_problem_release(d);
		return -1;
	}
	in[0] = d->x;
	out[0] = d->ref;
	if (f->cpu_ref(f, s, in, out, err) != 0) {
		cpu_problem_release(d);
		return -1;
	}
	memset(&self, 0, sizeof(self));
	wk_compare(d->ref, d->ref, d->n, 0, 0, &self);
	d->ref_rms = sqrt(self.sq_ref / (double)(d->n ? d->n : 1));
	worker_tolerance(f, s, &bufs[1], &d->tol);
	d->f = f;
	d->s = *s;
	return 0;
}

/* A real invalid write: a page mapped with no access. volatile keeps the
 * compiler from dropping or reordering the store. */
static void cpu_fault(void)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile int *p = mmap(NULL, page > 0 ? (size_t)page : 4096, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if ((void *)p == MAP_FAILED)
		p = (volatile int *)(uintptr_t)16;
	/* Die of the signal itself, as a GPU fault kills the child: a
	 * sanitizer's SEGV handler would turn it into exit(1). */
	signal(SIGSEGV, SIG_DFL);
	*p = 1;
	/* Not reached: the store above raises SIGSEGV. Make sure anyway. */
	raise(SIGSEGV);
}

static void cpu_hang(void)
{
	volatile int spin = 1;

	while (spin)
		;
}

enum cpu_kind { CPU_OK, CPU_WRONG, CPU_SPARSE, CPU_OOB };

struct cpu_run {
	struct cpu_dev *d;
	enum cpu_kind kind;
	int unroll;
};

/* The "kernels": y = 2x (+ 1 for wrong; 88 elements zeroed for sparse;
 * 256 elements past the end written for oob), UNROLL elements per step,
 * as templates/selftest.cu does them on a GPU. */
static void cpu_kernel(const struct cpu_run *r)
{
	const struct cpu_dev *d = r->d;
	float add = r->kind == CPU_WRONG ? 1.0f : 0.0f;
	size_t stride = d->n / 88 > 0 ? d->n / 88 : 1, i, u;

	for (i = 0; i < d->n; i += (size_t)r->unroll)
		for (u = 0; u < (size_t)r->unroll && i + u < d->n; u++) {
			size_t k = i + u;
			float v = 2.0f * kt_bf16_to_f32(d->x[k]) + add;

			if (r->kind == CPU_SPARSE && k % stride == stride / 2)
				v = 0.0f;
			d->y[k] = kt_f32_to_bf16(v);
		}
	if (r->kind == CPU_OOB)
		for (i = 0; i < 256; i++)
			d->y[d->n + i] = 0x1234;
}

static int cpu_batch(void *arg, int n, double *out_us, int *fatal, struct worker_result *res,
		     struct kt_err *err)
{
	const struct cpu_run *r = arg;
	int i;

	for (i = 0; i < n; i++) {
		double t0 = kt_clock_s();

		cpu_kernel(r);
		out_us[i] = (kt_clock_s() - t0) * 1e6;
	}
	return 0;
}

/* The CPU device runs variants by name, not plans; it still checks a plan
 * as the CUDA device would, refuses TMA tensor maps (nothing on the host
 * could build or read one) and more dynamic shared memory than its 48 KiB.
 * 1 when refused (res filled). */
static int cpu_plan_refused(struct cpu_dev *d, const struct kt_config *c, const struct kt_plan *p,
			    struct worker_result *res)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	char why[200];
	int nb, i, j;

	nb = d->f->buffers(d->f, &d->s, c, bufs);
	if (nb < 1 || nb > KT_MAX_BUFS) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "family gives %d buffers", nb);
		return 1;
	}
	if (wk_plan_check_bufs(p, nb, bufs, why, sizeof(why)) != 0) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "invalid plan: %s", why);
		return 1;
	}
	for (i = 0; i < p->nprep + p->nlaunch; i++) {
		const struct kt_launch *l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];

		if (l->smem > (unsigned)d->smem_optin) {
			res->status = WORKER_LAUNCH_ERROR;
			snprintf(res->message, sizeof(res->message),
				 "launch %d (%s): %u bytes of dynamic shared memory (the cpu test "
				 "device allows %d)", i, l->kernel, l->smem, d->smem_optin);
			return 1;
		}
		for (j = 0; j < l->nargs; j++)
			if (l->args[j].kind == KT_ARG_TMAP) {
				res->status = WORKER_LAUNCH_ERROR;
				snprintf(res->message, sizeof(res->message),
					 "launch %d (%s) arg %d: a TMA tensor map needs a CUDA "
					 "device (sm_90); the cpu test device has none", i,
					 l->kernel, j);
				return 1;
			}
	}
	return 0;
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

int wk_time_read(struct nvml *nv, const struct wk_timing *t, double est_us, wk_batch_fn fn,
		 void *arg, int *fatal, struct worker_result *res, struct kt_err *err)
{
	int rc;

	cond_before(nv, res);
	rc = wk_time(t, est_us, fn, arg, fatal, res, err);
	if (rc == 0)
		cond_after(nv, res);
	return rc;
}

static int cpu_eval(struct cpu_dev *d, const struct kt_config *c, const struct kt_plan *p,
		    const struct wk_timing *t, struct worker_result *res, int *fatal,
		    struct kt_err *err)
{
	struct cpu_run run = { d, CPU_OK, 1 };
	struct kt_buf bufs[2];
	struct wk_cmp cmp[2];
	struct worker_tol tol[2];
	double t0, est;
	const char *v;
	float *got = NULL;
	long unroll;
	int i, rc = -1;

	if (cpu_plan_refused(d, c, p, res))
		return 0;
	if (c->variant < 0 || c->variant >= d->f->nvariants) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "no variant %d", c->variant);
		return 0;
	}
	v = d->f->variants[c->variant];
	unroll = kt_config_get(d->f, c, "UNROLL");
	run.unroll = unroll == 2 ? 2 : 1;
	if (strcmp(v, "fault") == 0)
		cpu_fault();
	if (strcmp(v, "hang") == 0)
		cpu_hang();
	if (strcmp(v, "launch_error") == 0) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message),
			 "launch refused: too many threads per block (cpu test device)");
		return 0;
	}
	if (strcmp(v, "ok") == 0 || strcmp(v, "compile_error") == 0 ||
	    strcmp(v, "smem_excess") == 0)
		run.kind = CPU_OK;	/* the last two never get here: refused earlier */
	else if (strcmp(v, "wrong") == 0)
		run.kind = CPU_WRONG;
	else if (strcmp(v, "sparse_wrong") == 0)
		run.kind = CPU_SPARSE;
	else if (strcmp(v, "oob_write") == 0)
		run.kind = CPU_OOB;
	else {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "cpu test device: no variant %s", v);
		return 0;
	}
	/* Poison, run once, verify (guard regions included). */
	for (size_t k = 0; k < d->n; k++)
		d->y[k] = 0xffff;
	t0 = kt_clock_s();
	cpu_kernel(&run);
	est = (kt_clock_s() - t0) * 1e6;
	if (!(got = malloc(d->n * sizeof(float)))) {
		kt_err_set(err, KT_EINTERNAL, "cpu device: out of memory");
		goto out;
	}
	d->f->buffers(d->f, &d->s, NULL, bufs);
	memset(cmp, 0, sizeof(cmp));
	memset(tol, 0, sizeof(tol));
	tol[1] = d->tol;
	wk_to_float(KT_BF16, d->y, got, d->n);
	wk_compare(got, d->ref, d->n, wk_atol(&d->tol, d->ref_rms), d->tol.rtol, &cmp[1]);
	res->guard_changed = cpu_guard_changed(d);
	if (wk_judge(res, bufs, 2, cmp, tol)) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < t->warmup; i++)
		cpu_kernel(&run);
	if (wk_time_read(d->nv, t, est, cpu_batch, &run, fatal, res, err) != 0)
		goto out;
	res->status = WORKER_OK;
	rc = 0;
out:
	if (res->status != WORKER_OK && res->guard_changed)
		cpu_guard_fill(d);
	free(got);
	return rc;
}

/* ---- the command loop ---- */

struct child {
	enum worker_backend backend;
	struct cpu_dev cpu;
	struct cu_dev *cu;
	const struct kt_family *f;	/* current problem's family */
	struct kt_shape s;
};

/* Splits a payload into its fixed part and the cubins that follow. */
static int split_cubins(const void *payload, size_t len, size_t fixed, const uint64_t *lens,
			int nprograms, const void *cubins[KT_MAX_PROGRAMS],
			size_t out_lens[KT_MAX_PROGRAMS])
{
	size_t off = fixed;
	int i;

	for (i = 0; i < KT_MAX_PROGRAMS; i++) {
		cubins[i] = NULL;
		out_lens[i] = 0;
	}
	for (i = 0; i < nprograms; i++) {
		if (lens[i] > len - off)
			return -1;
		cubins[i] = (const char *)payload + off;
		out_lens[i] = (size_t)lens[i];
		off += (size_t)lens[i];
	}
	return off == len ? 0 : -1;
}

static void on_problem(struct child *ch, const void *payload, size_t len, struct wk_reply *rep,
		       struct kt_err *err)
{
	struct wk_problem pb;
	const void *cubins[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
	const struct kt_family *f;
	char why[200];
	int fatal = 0, i;

	ch->f = NULL;
	if (len < sizeof(pb)) {
		rep->rc = kt_err_set(err, KT_EINTERNAL, "problem message too short");
		return;
	}
	memcpy(&pb, payload, sizeof(pb));
	pb.family[sizeof(pb.family) - 1] = 0;
	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		pb.plan.programs[i].tpl = NULL;
	if (!(f = kt_family_find(pb.family))) {
		rep->rc = kt_err_set(err, KT_ENOTFOUND, "no family %s in the worker", pb.family);
		return;
	}
	for (i = 0; i < f->ndims; i++)
		if (pb.shape.v[i] < f->dims[i].min || pb.shape.v[i] > f->dims[i].max) {
			rep->rc = kt_err_set(err, KT_EINVAL, "%s: %s=%ld out of range", f->name,
					     f->dims[i].name, pb.shape.v[i]);
			return;
		}
	if (wk_plan_check(&pb.plan, KT_MAX_BUFS, why, sizeof(why)) != 0 ||
	    split_cubins(payload, len, sizeof(pb), pb.lens, pb.plan.nprograms, cubins, lens) != 0) {
		rep->rc = kt_err_set(err, KT_EINTERNAL, "bad reference plan for %s: %s", f->name,
				     why[0] ? why : "cubin lengths do not add up");
		return;
	}
	if (ch->backend == WORKER_BACKEND_CPU)
		rep->rc = cpu_problem(&ch->cpu, f, &pb.shape, pb.seed, err);
	else
		rep->rc = cu_dev_problem(ch->cu, f, &pb.shape, pb.seed, &pb.plan, cubins, lens,
					 &fatal, err);
	rep->fatal = fatal;
	if (rep->rc == 0) {
		ch->f = f;
		ch->s = pb.shape;
	}
}

static void on_eval(struct child *ch, const void *payload, size_t len, struct wk_reply *rep,
		    struct kt_err *err)
{
	struct wk_eval ev;
	const void *cubins[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
	int fatal = 0, i;

	if (!ch->f) {
		rep->rc = kt_err_set(err, KT_EINVAL, "no problem set in the worker");
		return;
	}
	if (len < sizeof(ev)) {
		rep->rc = kt_err_set(err, KT_EINTERNAL, "eval message too short");
		return;
	}
	memcpy(&ev, payload, sizeof(ev));
	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		ev.plan.programs[i].tpl = NULL;
	if (ev.plan.nprograms < 0 || ev.plan.nprograms > KT_MAX_PROGRAMS ||
	    split_cubins(payload, len, sizeof(ev), ev.lens, ev.plan.nprograms, cubins, lens) != 0) {
		rep->rc = kt_err_set(err, KT_EINTERNAL, "eval message: cubin lengths do not add up");
		return;
	}
	if (ch->backend == WORKER_BACKEND_CPU)
		rep->rc = cpu_eval(&ch->cpu, &ev.cfg, &ev.plan, &ev.timing, &rep->res, &fatal,
				   err);
	else
		rep->rc = cu_dev_eval(ch->cu, &ev.cfg, &ev.plan, cubins, lens, &ev.timing,
				      &rep->res, &fatal, err);
	rep->fatal = fatal;
}

static void on_baseline(struct child *ch, const void *payload, size_t len, struct wk_reply *rep,
			struct kt_err *err)
{
	struct wk_baseline b;
	int fatal = 0;

	if (!ch->f) {
		rep->rc = kt_err_set(err, KT_EINVAL, "no problem set in the worker");
		return;
	}
	if (len != sizeof(b)) {
		rep->rc = kt_err_set(err, KT_EINTERNAL, "baseline message has %zu bytes", len);
		return;
	}
	memcpy(&b, payload, sizeof(b));
	b.name[sizeof(b.name) - 1] = 0;
	if (ch->backend == WORKER_BACKEND_CPU) {
		rep->rc = 0;
		snprintf(rep->res.message, sizeof(rep->res.message),
			 "%s: no vendor library on the cpu test device", b.name);
		return;
	}
	rep->rc = cu_dev_baseline(ch->cu, b.name, &b.timing, &rep->res, &fatal, err);
	rep->fatal = fatal;
}

/* The dynamic shared memory a CPU test device allows: $KTUNE_CPU_SMEM
 * bytes (a test that wants the selftest family's UNROLL=2 configs, which
 * ask for 64 KiB, sets it higher), else 48 KiB. */
static int cpu_smem_optin(void)
{
	const char *v = getenv("KTUNE_CPU_SMEM");
	char *end;
	long n;

	if (!v || !*v)
		return 48 * 1024;
	n = strtol(v, &end, 10);
	return *end || n < 1024 || n > (1L << 24) ? 48 * 1024 : (int)n;
}

/* How many CPU test devices there are: $KTUNE_CPU_DEVICES, else 2. */
static int cpu_device_count(void)
{
	const char *v = getenv("KTUNE_CPU_DEVICES");
	char *end;
	long n;

	if (!v || !*v)
		return 2;
	n = strtol(v, &end, 10);
	return *end || n < 0 || n > 64 ? 2 : (int)n;
}

static int parse_args(int argc, char **argv, enum worker_backend *backend, int *device)
{
	int i;

	*backend = WORKER_BACKEND_CUDA;
	*device = 0;
	/* argv[0] is "__worker" (or the program name): options follow. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "cpu") == 0)
				*backend = WORKER_BACKEND_CPU;
			else if (strcmp(argv[i], "cuda") == 0)
				*backend = WORKER_BACKEND_CUDA;
			else
				return -1;
		} else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v < 0 || v > 1024)
				return -1;
			*device = (int)v;
		} else if (strcmp(argv[i], "__worker") != 0) {
			return -1;
		}
	}
	return 0;
}

int worker_child_main(int argc, char **argv)
{
	struct child ch;
	struct wk_hello hello;
	struct kt_err err = { 0 };
	struct iovec iov;
	int rc = 1, device;

	memset(&ch, 0, sizeof(ch));
	memset(&hello, 0, sizeof(hello));
	if (parse_args(argc, argv, &ch.backend, &device) != 0) {
		fprintf(stderr, "usage: ktune __worker --backend cuda|cpu --device N\n");
		return 2;
	}
	if (fcntl(WK_FD_CMD, F_GETFD) < 0 || fcntl(WK_FD_REPLY, F_GETFD) < 0) {
		fprintf(stderr, "ktune __worker: internal command, started by a sweep "
				"(needs its pipes on fds %d and %d)\n", WK_FD_CMD, WK_FD_REPLY);
		return 2;
	}
	/* Also when exec'ed by something other than worker.c: never outlive
	 * the parent. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (ch.backend == WORKER_BACKEND_CPU && device >= cpu_device_count()) {
		/* Like a GPU ordinal past the last one, so multi-device code
		 * (probing "all", taking a device out) is testable on CI. */
		hello.rc = -1;
		hello.code = KT_ENOGPU;
		snprintf(hello.msg, sizeof(hello.msg), "no CPU test device %d (%d found; "
			 "KTUNE_CPU_DEVICES sets how many)", device, cpu_device_count());
	} else if (ch.backend == WORKER_BACKEND_CPU) {
		char why[200];

		snprintf(hello.info.name, sizeof(hello.info.name), "ktune CPU test device");
		snprintf(hello.info.uuid, sizeof(hello.info.uuid), "CPU-%d", device);
		hello.info.sms = 1;
		hello.info.max_threads = 1024;
		ch.cpu.smem_optin = cpu_smem_optin();
		hello.info.smem_optin = ch.cpu.smem_optin;
		/* No NVML knows a CPU; a test's fake one does (KTUNE_NVML_LIB). */
		if (nvml_open(hello.info.uuid, &ch.cpu.nv, why, sizeof(why)) != 0)
			ch.cpu.nv = NULL;
	} else if (cu_dev_open(device, &ch.cu, &hello.info, &err) != 0) {
		hello.rc = -1;
		hello.code = err.code;
		snprintf(hello.msg, sizeof(hello.msg), "%s", err.msg);
	}
	iov.iov_base = &hello;
	iov.iov_len = sizeof(hello);
	if (wk_send(WK_FD_REPLY, WK_MSG_HELLO, &iov, 1, -1) != 0 || hello.rc != 0)
		goto out;
	for (;;) {
		struct wk_reply rep;
		void *payload = NULL;
		size_t len = 0;
		uint32_t type = 0;

		if (wk_recv(WK_FD_CMD, &type, &payload, &len, WK_MAX_PAYLOAD, -1) != 0)
			break;	/* EOF: the parent is gone */
		if (type == WK_MSG_QUIT) {
			free(payload);
			rc = 0;
			break;
		}
		memset(&rep, 0, sizeof(rep));
		rep.res.rel_err = -1;
		kt_err_clear(&err);
		switch (type) {
		case WK_MSG_PROBLEM:
			on_problem(&ch, payload, len, &rep, &err);
			break;
		case WK_MSG_EVAL:
			on_eval(&ch, payload, len, &rep, &err);
			break;
		case WK_MSG_BASELINE:
			on_baseline(&ch, payload, len, &rep, &err);
			break;
		default:
			rep.rc = kt_err_set(&err, KT_EINTERNAL, "unknown command %u", type);
			break;
		}
		free(payload);
		if (rep.rc < 0) {
			rep.code = err.code ? err.code : KT_EINTERNAL;
			snprintf(rep.msg, sizeof(rep.msg), "%s", err.msg);
		}
		iov.iov_base = &rep;
		iov.iov_len = sizeof(rep);
		if (wk_send(WK_FD_REPLY, WK_MSG_REPLY, &iov, 1, -1) != 0)
			break;
		if (rep.fatal) {
			rc = 3;
			break;
		}
	}
out:
	cpu_problem_release(&ch.cpu);
	nvml_close(ch.cpu.nv);
	/* A poisoned context is torn down by the exit itself. */
	if (rc != 3)
		cu_dev_close(ch.cu);
	return rc;
}
