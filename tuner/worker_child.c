/*
 * worker_child.c -- the child side of the worker: `ktune __worker`.
 *
 * Reads one command at a time from fd WK_FD_CMD, answers each on
 * WK_FD_REPLY, and exits when the parent says so, when the pipe closes, or
 * after a reply marked fatal (the CUDA context is poisoned: only a new
 * process gets a clean one). Two backends: CUDA (tuner/cuda.c) and the CPU
 * test device below, which runs the selftest family on the host -- a real
 * SIGSEGV for `fault`, a real endless loop for `hang` -- so that CI proves
 * the parent's crash and hang handling without a GPU. Both backends
 * check, fill, verify and time through tuner/measure.h.
 */
#include "worker.h"
#include "worker_int.h"
#include "nvml.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>
#include "../util/clock.h"
#include "../util/knobs.h"

/* ---- the CPU test device ---- */

struct cpu_dev {
	const struct kt_family *f;
	struct kt_shape s;
	size_t n;
	uint16_t *x;		/* host "device" input, bf16 */
	unsigned char *ybuf;	/* y with a guard region on either side */
	uint16_t *y;		/* ybuf + MEASURE_GUARD_BYTES */
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
	memset(d->ybuf, MEASURE_GUARD_BYTE, MEASURE_GUARD_BYTES);
	memset(d->y + d->n, MEASURE_GUARD_BYTE, MEASURE_GUARD_BYTES);
}

static long cpu_guard_changed(const struct cpu_dev *d)
{
	return measure_guard_count(d->ybuf, MEASURE_GUARD_BYTES) +
	       measure_guard_count(d->y + d->n, MEASURE_GUARD_BYTES);
}

static int cpu_problem(struct cpu_dev *d, const struct kt_family *f, const struct kt_shape *s,
		       uint64_t seed, struct kt_err *err)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	struct measure_cmp self;
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
	if (!(d->x = malloc(d->n * 2)) || !(d->ybuf = malloc(d->n * 2 + 2 * MEASURE_GUARD_BYTES)) ||
	    !(d->ref = malloc(d->n * sizeof(float)))) {
		cpu_problem_release(d);
		return kt_err_set(err, KT_EINTERNAL, "cpu device: out of memory for n=%zu", d->n);
	}
	d->y = (uint16_t *)(d->ybuf + MEASURE_GUARD_BYTES);
	cpu_guard_fill(d);
	if (measure_fill_input(f, s, 0, &bufs[0], d->x, seed, err) != 0) {
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
	measure_compare(d->ref, d->ref, d->n, 0, 0, &self);
	d->ref_rms = sqrt(self.sq_ref / (double)(d->n ? d->n : 1));
	measure_tolerance(f, s, &bufs[1], &d->tol);
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
	if (measure_plan_check_bufs(p, nb, bufs, why, sizeof(why)) != 0) {
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

static int cpu_eval(struct cpu_dev *d, const struct kt_config *c, const struct kt_plan *p,
		    const struct measure_timing *t, struct worker_result *res, int *fatal,
		    struct kt_err *err)
{
	struct cpu_run run = { d, CPU_OK, 1 };
	struct kt_buf bufs[2];
	struct measure_cmp cmp[2];
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
	measure_to_float(KT_BF16, d->y, got, d->n);
	measure_compare(got, d->ref, d->n, measure_atol(&d->tol, d->ref_rms), d->tol.rtol, &cmp[1]);
	res->guard_changed = cpu_guard_changed(d);
	if (measure_judge(res, bufs, 2, cmp, tol)) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < t->warmup; i++)
		cpu_kernel(&run);
	if (measure_time_read(d->nv, t, est, cpu_batch, &run, fatal, res, err) != 0)
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
	if (measure_plan_check(&pb.plan, KT_MAX_BUFS, why, sizeof(why)) != 0 ||
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

/* The CPU test device's limits, test hooks (util/knobs.h): the dynamic
 * shared memory it allows ($KTUNE_CPU_SMEM bytes, else 48 KiB: a test that
 * wants the selftest family's UNROLL=2 configs, which ask for 64 KiB, sets
 * it higher) and how many there are ($KTUNE_CPU_DEVICES, else 2). */
static int cpu_smem_optin(void)
{
	return (int)kt_knob_test_long(KT_KNOB_CPU_SMEM, 1024, 1L << 24);
}

static int cpu_device_count(void)
{
	return (int)kt_knob_test_long(KT_KNOB_CPU_DEVICES, 0, 64);
}

/* What the parent passes on the command line (tuner/worker.c child_spawn). */
struct child_args {
	enum worker_backend backend;
	int device;
	int pdl;
	enum worker_compare compare;
};

static int parse_args(int argc, char **argv, struct child_args *a)
{
	int i;

	a->backend = WORKER_BACKEND_CUDA;
	a->device = 0;
	a->pdl = 1;
	a->compare = WORKER_COMPARE_AUTO;
	/* argv[0] is "__worker" (or the program name): options follow. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "cpu") == 0)
				a->backend = WORKER_BACKEND_CPU;
			else if (strcmp(argv[i], "cuda") == 0)
				a->backend = WORKER_BACKEND_CUDA;
			else
				return -1;
		} else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v < 0 || v > 1024)
				return -1;
			a->device = (int)v;
		} else if (strcmp(argv[i], "--pdl") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "0") != 0 && strcmp(argv[i], "1") != 0)
				return -1;
			a->pdl = argv[i][0] == '1';
		} else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) {
			if (worker_compare_parse(argv[++i], &a->compare) != 0)
				return -1;
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
	struct child_args a;
	struct iovec iov;
	int rc = 1, device;

	memset(&ch, 0, sizeof(ch));
	memset(&hello, 0, sizeof(hello));
	if (parse_args(argc, argv, &a) != 0) {
		fprintf(stderr, "usage: ktune __worker --backend cuda|cpu --device N [--pdl 0|1] "
				"[--compare auto|gpu|host]\n");
		return 2;
	}
	ch.backend = a.backend;
	device = a.device;
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
	} else if (cu_dev_open(device, a.pdl, a.compare, &ch.cu, &hello.info, &err) != 0) {
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
	else
		cu_dev_abandon(ch.cu);
	return rc;
}
