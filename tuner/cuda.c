/*
 * cuda.c -- the worker child's CUDA backend: the driver by dlopen, the
 * problem buffers and the reference, candidate verification and timing, and
 * the cuBLAS baseline (also by dlopen).
 *
 * Error policy: a driver error caused by a candidate is its result
 * (WORKER_LAUNCH_ERROR), unless it poisoned the context (cu_result_sticky,
 * or the context no longer synchronizes): then the result is WORKER_FAULT
 * and *fatal tells the child to exit, because only a new process gets a
 * working context. Errors that are not a candidate's (setting up a problem)
 * go up as struct kt_err.
 *
 * Verification runs on the GPU: after the reference run each output is
 * copied on the device, and a candidate's outputs are compared with those
 * copies by templates/compare.cu (compiled with NVRTC once per child), which
 * leaves a few partial sums per output to download. The host path (download
 * every output, measure_compare) is used when worker_opts.compare says host, or
 * when the compare kernel cannot be built or the reference copies do not
 * fit (one line on stderr says so); compare gpu makes the GPU path required
 * (a problem fails instead of falling back). Both judge through measure_judge,
 * every output buffer on its own (measure_tolerance).
 *
 * Every output buffer is allocated with a guard region of MEASURE_GUARD_BYTES on
 * either side, filled with MEASURE_GUARD_BYTE; a candidate that changed a guard
 * (checked after its verification run and after its timed runs, by
 * compare.cu's kt_guard or on the host) wrote past its output: wrong.
 *
 * NVML (tuner/nvml.c, by the device's UUID) is read just before the first
 * timed repetition and just after the last, for the trial's conditions.
 *
 * A launch flagged pdl goes out with programmatic dependent launch
 * (cuLaunchKernelEx), unless it is the first of what one repetition runs
 * (it follows the L2 flush and the start event: overlapping them would
 * start the clock late), the driver lacks it or worker_opts.pdl is 0 (A/B
 * timings): its kernel waits for the previous one before touching memory
 * either way, so results do not depend on it.
 */
#include "../runtime/cu_api.h"
#include "jit.h"
#include "nvml.h"
#include "worker_int.h"
#include "../util/knobs.h"

#include <cublas_api.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU_MAX_BATCH 32		/* events for this many repetitions in flight */

/* ---- cuBLAS, by dlopen ---- */

typedef cublasStatus_t (*fn_cublasCreate)(cublasHandle_t *);
typedef cublasStatus_t (*fn_cublasDestroy)(cublasHandle_t);
typedef cublasStatus_t (*fn_cublasSetStream)(cublasHandle_t, CUstream);
typedef cublasStatus_t (*fn_cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
					  int, int, int, const void *, const void *, cudaDataType,
					  int, const void *, cudaDataType, int, const void *, void *,
					  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct cu_blas {
	void *lib;
	cublasHandle_t h;
	fn_cublasCreate create;
	fn_cublasDestroy destroy;
	fn_cublasSetStream set_stream;
	fn_cublasGemmEx gemm;
};

/* ---- the device ---- */

struct cu_dev {
	struct cu_api api;
	CUdevice dev;
	CUcontext ctx;		/* the primary context, retained */
	CUstream stream;
	CUevent ev[2 * CU_MAX_BATCH];
	int nev;
	CUdeviceptr flush;	/* L2 flush buffer, 2x L2 */
	size_t flush_bytes;
	int smem_optin;
	int sm;			/* 90 */
	int sms;
	int pdl;		/* 0: launch plans' pdl launches plainly (worker_opts) */
	enum worker_compare compare;	/* where outputs are compared (worker_opts) */
	/* the current problem */
	const struct kt_family *f;
	struct kt_shape s;
	int nprob;
	struct kt_buf bufs[KT_MAX_BUFS];
	CUdeviceptr dptr[KT_MAX_BUFS];
	CUdeviceptr dbase[KT_MAX_BUFS];	/* allocations: outputs start MEASURE_GUARD_BYTES in */
	double ref_rms[KT_MAX_BUFS];	/* root mean square of each expected output */
	struct worker_tol tol[KT_MAX_BUFS];
	void *host_in[KT_MAX_BUFS];	/* inputs, kept to restore them after a bad candidate */
	float *ref[KT_MAX_BUFS];	/* expected outputs (host compare only) */
	CUdeviceptr dref[KT_MAX_BUFS];	/* expected outputs on the device (GPU compare) */
	int dev_cmp;		/* 1: this problem is verified on the GPU */
	struct cu_blas blas;
	/* the compare kernel (templates/compare.cu), set up once per child */
	int cmp_state;		/* 0 not tried, 1 ready, -1 host path */
	int cmp_required;	/* compare is WORKER_COMPARE_GPU */
	char cmp_why[200];	/* why the host path, when cmp_state == -1 */
	CUmodule cmp_mod;
	CUfunction cmp_fn;
	CUfunction guard_fn;
	CUdeviceptr cmp_part;	/* CMP_PART doubles per block */
	double *cmp_host;
	unsigned cmp_blocks;
	struct nvml *nv;	/* NULL without NVML */
};

/* Formats a failed call into err (KT_ECUDA); sets *fatal when sticky. */
static int cu_fail(struct cu_dev *d, CUresult r, const char *what, int *fatal, struct kt_err *err)
{
	char desc[200];

	cu_api_describe(&d->api, r, desc, sizeof(desc));
	if (fatal && cu_result_sticky(r))
		*fatal = 1;
	return kt_err_set(err, KT_ECUDA, "%s: %s", what, desc);
}

/* A candidate's failure becomes its result. A non-sticky error still gets
 * a context check, since some faults surface first as another error. */
static void cand_fail(struct cu_dev *d, CUresult r, const char *what, int *fatal,
		      struct worker_result *res)
{
	char desc[200];

	cu_api_describe(&d->api, r, desc, sizeof(desc));
	if (cu_result_sticky(r) || d->api.CtxSynchronize() != CUDA_SUCCESS) {
		*fatal = 1;
		res->status = WORKER_FAULT;
	} else {
		res->status = WORKER_LAUNCH_ERROR;
	}
	snprintf(res->message, sizeof(res->message), "%s: %s", what, desc);
}

static size_t buf_bytes(const struct kt_buf *b)
{
	return b->elems * kt_dtype_size(b->dtype);
}

/* Outputs sit between two guard regions of MEASURE_GUARD_BYTES; inputs
 * have none (their allocation ends where their data does). */
static size_t guard_bytes(const struct kt_buf *b)
{
	return b->role == KT_BUF_OUTPUT ? MEASURE_GUARD_BYTES : 0;
}

int cu_dev_open(int ordinal, int pdl, enum worker_compare compare, struct cu_dev **out,
		struct worker_device_info *info, struct kt_err *err)
{
	static const struct {
		CUdevice_attribute a;
		int required;
	} attrs[] = {
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 1 },
		{ CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 1 },
		{ CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1 },
		{ CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 1 },
		{ CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 1 },
		{ CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1 },
		/* Deprecated in CUDA 13; provenance only. */
		{ CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0 },
		{ CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 0 },
	};
	int val[sizeof(attrs) / sizeof(attrs[0])];
	struct cu_dev *d = NULL;
	CUuuid uuid;
	CUresult r;
	int count = 0, i, rc = -1;
	unsigned char *u;

	*out = NULL;
	memset(info, 0, sizeof(*info));
	if (!(d = calloc(1, sizeof(*d)))) {
		kt_err_set(err, KT_EINTERNAL, "out of memory");
		goto out;
	}
	if (cu_api_load(&d->api, err) != 0)
		goto out;
	/* Test hook: behave as a driver without the tensor map entry point
	 * (tests/test_gpu.c proves the launch error it must give). */
	if (kt_knob_test_hook(KT_KNOB_TEST_NO_TMAP_ENCODE))
		d->api.TensorMapEncodeTiled = NULL;
	r = d->api.Init(0);
	if (r == CUDA_ERROR_STUB_LIBRARY) {
		kt_err_set(err, KT_ENOGPU,
			   "no NVIDIA driver (libcuda.so.1 is the CUDA toolkit's stub library)");
		goto out;
	}
	if (r == CUDA_ERROR_NO_DEVICE) {
		kt_err_set(err, KT_ENOGPU, "no CUDA device");
		goto out;
	}
	if (r != CUDA_SUCCESS) {
		char desc[200];

		cu_api_describe(&d->api, r, desc, sizeof(desc));
		kt_err_set(err, KT_ENOGPU, "the NVIDIA driver did not initialize: cuInit: %s", desc);
		goto out;
	}
	if ((r = d->api.DeviceGetCount(&count)) != CUDA_SUCCESS) {
		cu_fail(d, r, "cuDeviceGetCount", NULL, err);
		goto out;
	}
	if (count == 0) {
		kt_err_set(err, KT_ENOGPU, "no CUDA device");
		goto out;
	}
	if (ordinal < 0 || ordinal >= count) {
		kt_err_set(err, KT_ENOGPU, "no CUDA device %d (%d found)", ordinal, count);
		goto out;
	}
	if ((r = d->api.DeviceGet(&d->dev, ordinal)) != CUDA_SUCCESS ||
	    (r = d->api.DeviceGetName(info->name, (int)sizeof(info->name), d->dev)) != CUDA_SUCCESS ||
	    (r = d->api.DeviceGetUuid(&uuid, d->dev)) != CUDA_SUCCESS ||
	    (r = d->api.DriverGetVersion(&info->driver_version)) != CUDA_SUCCESS) {
		cu_fail(d, r, "reading the device's identity", NULL, err);
		goto out;
	}
	for (i = 0; i < (int)(sizeof(attrs) / sizeof(attrs[0])); i++) {
		val[i] = 0;
		r = d->api.DeviceGetAttribute(&val[i], attrs[i].a, d->dev);
		if (r != CUDA_SUCCESS && attrs[i].required) {
			cu_fail(d, r, "cuDeviceGetAttribute", NULL, err);
			goto out;
		}
	}
	u = (unsigned char *)uuid.bytes;
	snprintf(info->uuid, sizeof(info->uuid),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	info->sm = val[0] * 10 + val[1];
	info->sms = val[2];
	info->l2_bytes = val[3];
	info->smem_optin = val[4];
	info->max_threads = val[5];
	info->clock_mhz = val[6] / 1000;
	info->mem_clock_mhz = val[7] / 1000;
	d->smem_optin = val[4];
	d->sm = info->sm;
	d->sms = info->sms;
	{
		char why[200];

		/* Without NVML a trial records no conditions; the sweep says so. */
		if (nvml_open(info->uuid, &d->nv, why, sizeof(why)) != 0) {
			d->nv = NULL;
			fprintf(stderr, "ktune worker: no clock readings: %s\n", why);
		}
	}
	d->pdl = pdl;
	d->compare = compare;
	/* The primary context: the same one cuBLAS's runtime will pick up. */
	if ((r = d->api.DevicePrimaryCtxRetain(&d->ctx, d->dev)) != CUDA_SUCCESS) {
		cu_fail(d, r, "cuDevicePrimaryCtxRetain", NULL, err);
		goto out;
	}
	if ((r = d->api.CtxSetCurrent(d->ctx)) != CUDA_SUCCESS ||
	    (r = d->api.StreamCreate(&d->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) {
		cu_fail(d, r, "setting up the context", NULL, err);
		goto out;
	}
	for (d->nev = 0; d->nev < 2 * CU_MAX_BATCH; d->nev++)
		if ((r = d->api.EventCreate(&d->ev[d->nev], CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
			cu_fail(d, r, "cuEventCreate", NULL, err);
			goto out;
		}
	/* Twice the L2, so that nothing of the last repetition stays cached. */
	d->flush_bytes = (size_t)(info->l2_bytes > 0 ? info->l2_bytes : 64L << 20) * 2;
	if ((r = d->api.MemAlloc(&d->flush, d->flush_bytes)) != CUDA_SUCCESS) {
		cu_fail(d, r, "allocating the L2 flush buffer", NULL, err);
		goto out;
	}
	*out = d;
	d = NULL;
	rc = 0;
out:
	cu_dev_close(d);
	return rc;
}

/* The problem's host copies (inputs, references): no driver call. */
static void problem_release_host(struct cu_dev *d)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++) {
		free(d->host_in[i]);
		free(d->ref[i]);
		d->host_in[i] = NULL;
		d->ref[i] = NULL;
	}
}

static void problem_release(struct cu_dev *d)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++) {
		if (d->dbase[i])
			d->api.MemFree(d->dbase[i]);
		if (d->dref[i])
			d->api.MemFree(d->dref[i]);
		d->dptr[i] = 0;
		d->dbase[i] = 0;
		d->dref[i] = 0;
	}
	problem_release_host(d);
	d->nprob = 0;
	d->dev_cmp = 0;
	d->f = NULL;
}

static void blas_release(struct cu_blas *b)
{
	if (b->h && b->destroy)
		b->destroy(b->h);
	if (b->lib)
		dlclose(b->lib);
	memset(b, 0, sizeof(*b));
}

/* ---- verification on the GPU (templates/compare.cu) ---- */

#define CMP_THREADS 256		/* as CMP_THREADS in templates/compare.cu */
#define CMP_PART 5		/* as CMP_PART there: doubles per block */
#define CMP_MAX_BLOCKS 1024

static void cmp_release(struct cu_dev *d)
{
	if (d->cmp_mod)
		d->api.ModuleUnload(d->cmp_mod);
	if (d->cmp_part)
		d->api.MemFree(d->cmp_part);
	free(d->cmp_host);
	d->cmp_mod = NULL;
	d->cmp_fn = NULL;
	d->guard_fn = NULL;
	d->cmp_part = 0;
	d->cmp_host = NULL;
}

/* Sets the compare kernel up, once per child. 1: verify on the GPU; 0: on
 * the host (said once on stderr); -1 with err when the GPU path is required
 * (WORKER_COMPARE_GPU) and unavailable. */
static int cmp_setup(struct cu_dev *d, struct kt_err *err)
{
	struct kt_program prog;
	struct jit_result jr;
	struct kt_err jerr = { 0 };
	char arch[16], desc[160];
	CUresult r;

	if (d->cmp_state == 0) {
		d->cmp_required = d->compare == WORKER_COMPARE_GPU;
		memset(&prog, 0, sizeof(prog));
		memset(&jr, 0, sizeof(jr));
		prog.tpl = "compare";
		snprintf(arch, sizeof(arch), "sm_%d", d->sm);
		d->cmp_blocks = (unsigned)(d->sms > 0 ? 4 * d->sms : 128);
		if (d->cmp_blocks > CMP_MAX_BLOCKS)
			d->cmp_blocks = CMP_MAX_BLOCKS;
		if (d->compare == WORKER_COMPARE_HOST) {
			snprintf(d->cmp_why, sizeof(d->cmp_why),
				 "asked for (--compare host, KTUNE_HOST_COMPARE=1)");
		} else if (jit_compile(&prog, arch, &jr, &jerr) != 0 || !jr.ok) {
			snprintf(d->cmp_why, sizeof(d->cmp_why),
				 "templates/compare.cu did not compile for %s: %.120s", arch,
				 jerr.msg[0] ? jerr.msg : jr.log ? jr.log : "no log");
		} else if ((r = d->api.ModuleLoadData(&d->cmp_mod, jr.cubin)) != CUDA_SUCCESS ||
			   (r = d->api.ModuleGetFunction(&d->cmp_fn, d->cmp_mod, "kt_compare")) !=
			   CUDA_SUCCESS ||
			   (r = d->api.ModuleGetFunction(&d->guard_fn, d->cmp_mod, "kt_guard")) !=
			   CUDA_SUCCESS ||
			   (r = d->api.MemAlloc(&d->cmp_part, (size_t)d->cmp_blocks * CMP_PART *
						sizeof(double))) != CUDA_SUCCESS) {
			cu_api_describe(&d->api, r, desc, sizeof(desc));
			snprintf(d->cmp_why, sizeof(d->cmp_why), "loading the compare kernel: %s",
				 desc);
			d->cmp_part = 0;
		} else if (!(d->cmp_host = malloc((size_t)d->cmp_blocks * CMP_PART *
						  sizeof(double)))) {
			snprintf(d->cmp_why, sizeof(d->cmp_why), "out of memory");
		} else {
			d->cmp_state = 1;
		}
		jit_result_release(&jr);
		if (d->cmp_state != 1) {
			cmp_release(d);
			d->cmp_state = -1;
			fprintf(stderr, "ktune worker: verifying on the host: %s\n", d->cmp_why);
		}
	}
	if (d->cmp_state == 1)
		return 1;
	if (d->cmp_required)
		return kt_err_set(err, KT_ECUDA, "verification on the GPU is required (--compare gpu, "
				  "KTUNE_HOST_COMPARE=0) but unavailable: %s", d->cmp_why);
	return 0;
}

/* Compares output buffer b at got with its reference at ref on the GPU and
 * adds to c, in block order (atol, rtol: the local bound). */
static CUresult cmp_run(struct cu_dev *d, CUdeviceptr got, CUdeviceptr ref, const struct kt_buf *b,
			double atol, double rtol, struct measure_cmp *c)
{
	unsigned long long n = b->elems;
	int dtype = (int)b->dtype;
	void *params[] = { &got, &ref, &n, &dtype, &atol, &rtol, &d->cmp_part, NULL };
	CUresult r;
	unsigned i;

	if ((r = d->api.LaunchKernel(d->cmp_fn, d->cmp_blocks, 1, 1, CMP_THREADS, 1, 1, 0,
				     d->stream, params, NULL)) != CUDA_SUCCESS ||
	    (r = d->api.StreamSynchronize(d->stream)) != CUDA_SUCCESS ||
	    (r = d->api.MemcpyDtoH(d->cmp_host, d->cmp_part,
				   (size_t)d->cmp_blocks * CMP_PART * sizeof(double))) != CUDA_SUCCESS)
		return r;
	for (i = 0; i < d->cmp_blocks; i++) {
		const double *v = d->cmp_host + (size_t)CMP_PART * i;

		c->sq_diff += v[0];
		c->sq_ref += v[1];
		c->nonfinite += (long)v[2];
		c->over += (long)v[3];
		if (v[4] > c->max_abs)
			c->max_abs = v[4];
	}
	return CUDA_SUCCESS;
}

/* Fills both guard regions of output i with the pattern. */
static CUresult guard_fill(struct cu_dev *d, int i)
{
	CUresult r;

	if (!d->dbase[i] || !guard_bytes(&d->bufs[i]))
		return CUDA_SUCCESS;
	if ((r = d->api.MemsetD8Async(d->dbase[i], MEASURE_GUARD_BYTE, MEASURE_GUARD_BYTES,
				      d->stream)) != CUDA_SUCCESS)
		return r;
	return d->api.MemsetD8Async(d->dptr[i] + buf_bytes(&d->bufs[i]), MEASURE_GUARD_BYTE,
				    MEASURE_GUARD_BYTES, d->stream);
}

/* Bytes changed in the guard regions of every output into *changed; the
 * regions are filled again when any changed. */
static CUresult guard_check(struct cu_dev *d, long *changed)
{
	CUresult r = CUDA_SUCCESS;
	unsigned char *host = NULL;
	int i, side;

	*changed = 0;
	for (i = 0; i < d->nprob; i++) {
		long here = 0;

		if (!d->dbase[i] || !guard_bytes(&d->bufs[i]))
			continue;
		for (side = 0; side < 2; side++) {
			CUdeviceptr g = side ? d->dptr[i] + buf_bytes(&d->bufs[i]) : d->dbase[i];

			if (d->cmp_state == 1) {
				unsigned long long nbytes = MEASURE_GUARD_BYTES;
				unsigned guard = MEASURE_GUARD_BYTE;
				void *params[] = { &g, &nbytes, &guard, &d->cmp_part, NULL };
				unsigned b;

				if ((r = d->api.LaunchKernel(d->guard_fn, d->cmp_blocks, 1, 1,
							     CMP_THREADS, 1, 1, 0, d->stream, params,
							     NULL)) != CUDA_SUCCESS ||
				    (r = d->api.StreamSynchronize(d->stream)) != CUDA_SUCCESS ||
				    (r = d->api.MemcpyDtoH(d->cmp_host, d->cmp_part,
							   (size_t)d->cmp_blocks * CMP_PART *
							   sizeof(double))) != CUDA_SUCCESS)
					goto out;
				for (b = 0; b < d->cmp_blocks; b++)
					here += (long)d->cmp_host[(size_t)CMP_PART * b];
				continue;
			}
			if (!host && !(host = malloc(MEASURE_GUARD_BYTES))) {
				r = CUDA_ERROR_OUT_OF_MEMORY;
				goto out;
			}
			if ((r = d->api.MemcpyDtoH(host, g, MEASURE_GUARD_BYTES)) != CUDA_SUCCESS)
				goto out;
			here += measure_guard_count(host, MEASURE_GUARD_BYTES);
		}
		if (here && (r = guard_fill(d, i)) != CUDA_SUCCESS)
			goto out;
		*changed += here;
	}
out:
	free(host);
	return r;
}

void cu_dev_close(struct cu_dev *d)
{
	int i;

	if (!d)
		return;
	if (d->ctx) {
		blas_release(&d->blas);
		problem_release(d);
		cmp_release(d);
		if (d->flush)
			d->api.MemFree(d->flush);
		for (i = 0; i < d->nev; i++)
			d->api.EventDestroy(d->ev[i]);
		if (d->stream)
			d->api.StreamDestroy(d->stream);
		d->api.DevicePrimaryCtxRelease(d->dev);
	}
	nvml_close(d->nv);
	/* NEEDSWORK: libcuda.so.1 is never dlclose'd: unloading the driver
	 * while its threads run is unsafe, and the child exits next. */
	free(d);
}

void cu_dev_abandon(struct cu_dev *d)
{
	if (!d)
		return;
	problem_release_host(d);
	free(d->cmp_host);
	nvml_close(d->nv);
	free(d);
}

/* ---- modules and launches ---- */

#define CU_MAX_TMAPS 16	/* tensor maps per plan */

struct cu_mods {
	CUmodule mod[KT_MAX_PROGRAMS];
	CUfunction fn[2 * KT_MAX_LAUNCHES];	/* prep launches, then timed ones */
	/* Tensor maps, encoded once per plan (tmaps_encode): arg j of launch i
	 * takes tmap[tmap_of[i][j] - 1]; 0 where the arg is no map. */
	CUtensorMap tmap[CU_MAX_TMAPS];
	unsigned char tmap_of[2 * KT_MAX_LAUNCHES][KT_MAX_ARGS];
};

static void mods_unload(struct cu_dev *d, struct cu_mods *m)
{
	int i;

	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		if (m->mod[i])
			d->api.ModuleUnload(m->mod[i]);
	memset(m, 0, sizeof(*m));
}

/* Loads every program and finds every launch's kernel; on failure returns
 * the driver's code and what failed. */
static CUresult mods_load(struct cu_dev *d, const struct kt_plan *p, const void *const *cubins,
			  const size_t *lens, struct cu_mods *m, char *what, size_t wlen)
{
	const struct kt_launch *l;
	void *copy;
	CUresult r;
	int i;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < p->nprograms; i++) {
		if (!cubins[i] || lens[i] < 4) {
			snprintf(what, wlen, "program %d has no cubin", i);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		/* Cubins arrive packed one after another in a message: give the
		 * driver an aligned copy of the ELF image. */
		if (!(copy = malloc(lens[i]))) {
			snprintf(what, wlen, "out of memory for program %d", i);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(copy, cubins[i], lens[i]);
		r = d->api.ModuleLoadData(&m->mod[i], copy);
		free(copy);
		if (r != CUDA_SUCCESS) {
			m->mod[i] = NULL;
			snprintf(what, wlen, "cuModuleLoadData (program %d)", i);
			return r;
		}
	}
	for (i = 0; i < p->nprep + p->nlaunch; i++) {
		l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];
		if ((r = d->api.ModuleGetFunction(&m->fn[i], m->mod[l->program], l->kernel)) !=
		    CUDA_SUCCESS) {
			snprintf(what, wlen, "cuModuleGetFunction (%s)", l->kernel);
			return r;
		}
		/* Also below 48 KiB: static plus dynamic above it needs the opt-in. */
		if (l->smem > 0 &&
		    (r = d->api.FuncSetAttribute(m->fn[i],
						 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						 (int)l->smem)) != CUDA_SUCCESS) {
			snprintf(what, wlen, "%s: %u bytes of dynamic shared memory (device allows %d)",
				 l->kernel, l->smem, d->smem_optin);
			return r;
		}
		/* Clusters of more than 8 CTAs (a kernel's __cluster_dims__,
		 * blast fused_cl's 16) launch only with this opt-in; it changes
		 * nothing for other kernels. sm_90+ only. A driver that does
		 * not know it (older than CUDA 12: invalid value / not
		 * supported) fails only such a kernel's launch, which the
		 * candidate's trial records; any other error is one. */
		if (d->sm >= 90 &&
		    (r = d->api.FuncSetAttribute(m->fn[i],
						 CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)) !=
			    CUDA_SUCCESS &&
		    r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED) {
			snprintf(what, wlen, "%s: allowing non-portable cluster sizes", l->kernel);
			return r;
		}
	}
	return CUDA_SUCCESS;
}

/* Builds every KT_ARG_TMAP of plan p over its buffer (ptrs, bufs as the
 * launches will see them). The plan was checked with measure_plan_check_bufs. On
 * failure returns the driver's code and says what failed. */
static CUresult tmaps_encode(struct cu_dev *d, const struct kt_plan *p, const CUdeviceptr *ptrs,
			     const struct kt_buf *bufs, struct cu_mods *m, char *what, size_t wlen)
{
	static const CUtensorMapDataType types[] = {
		[KT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
		[KT_F32] = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
		[KT_I32] = CU_TENSOR_MAP_DATA_TYPE_INT32,
	};
	const struct kt_launch *l;
	int i, j, k, n = 0;

	memset(m->tmap_of, 0, sizeof(m->tmap_of));
	for (i = 0; i < p->nprep + p->nlaunch; i++) {
		l = i < p->nprep ? &p->prep[i] : &p->launch[i - p->nprep];
		for (j = 0; j < l->nargs; j++) {
			const struct kt_arg *a = &l->args[j];
			const struct kt_tmap *t = &a->tmap;
			const struct kt_buf *b = &bufs[a->buf];
			cuuint64_t dims[3], strides[2];
			cuuint32_t box[3], estr[3] = { 1, 1, 1 };
			CUtensorMapSwizzle sw;
			char desc[200];
			CUresult r;

			if (a->kind != KT_ARG_TMAP)
				continue;
			if (d->sm < 90) {
				snprintf(what, wlen, "%s arg %d: a TMA tensor map needs sm_90 or newer "
					 "(device is sm_%d)", l->kernel, j, d->sm);
				return CUDA_ERROR_NOT_SUPPORTED;
			}
			if (!d->api.TensorMapEncodeTiled) {
				snprintf(what, wlen, "%s arg %d: the NVIDIA driver has no "
					 "cuTensorMapEncodeTiled (CUDA 12.0 or newer needed)",
					 l->kernel, j);
				return CUDA_ERROR_NOT_SUPPORTED;
			}
			if (n == CU_MAX_TMAPS) {
				snprintf(what, wlen, "%s arg %d: more than %d tensor maps in a plan",
					 l->kernel, j, CU_MAX_TMAPS);
				return CUDA_ERROR_INVALID_VALUE;
			}
			for (k = 0; k < t->rank; k++) {
				dims[k] = (cuuint64_t)t->dims[k];
				box[k] = (cuuint32_t)t->box[k];
				if (k > 0)	/* bytes, for the driver */
					strides[k - 1] = (cuuint64_t)t->strides[k] *
							 kt_dtype_size(b->dtype);
			}
			sw = t->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B :
			     t->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B :
			     t->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_NONE;
			r = d->api.TensorMapEncodeTiled(&m->tmap[n], types[b->dtype],
							(cuuint32_t)t->rank,
							(void *)(uintptr_t)ptrs[a->buf], dims, strides,
							box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,
							CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
							CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
			if (r != CUDA_SUCCESS) {
				measure_tmap_describe(t, b, desc, sizeof(desc));
				/* Cut short when long: the map's description is the tail. */
				if (snprintf(what, wlen, "cuTensorMapEncodeTiled (%s arg %d: %s)",
					     l->kernel, j, desc) >= (int)wlen && wlen > 1)
					what[wlen - 2] = ')';
				return r;
			}
			m->tmap_of[i][j] = (unsigned char)(++n);
		}
	}
	return CUDA_SUCCESS;
}

/* 1 when launch l goes out with programmatic dependent launch: flagged,
 * not the first launch of what is run (it follows the timer's L2 flush
 * and start event, which it must not overlap: a plan may flag it for
 * production, where the layer before it is the primary), and the driver
 * has cuLaunchKernelEx, and worker_opts.pdl is 1. */
static int uses_pdl(const struct cu_dev *d, const struct kt_launch *l, int first)
{
	return l->pdl && !first && d->api.LaunchKernelEx && d->pdl;
}

static CUresult launch_one(struct cu_dev *d, const struct kt_launch *l, CUfunction fn,
			   const CUdeviceptr *ptrs, const struct cu_mods *m, int li, int first)
{
	union cu_arg vals[KT_MAX_ARGS];
	void *params[KT_MAX_ARGS + 1];
	int j;

	for (j = 0; j < l->nargs; j++) {
		switch (l->args[j].kind) {
		case KT_ARG_BUF:
			vals[j].p = ptrs[l->args[j].buf];
			break;
		case KT_ARG_I32:
			vals[j].i32 = (int)l->args[j].i;
			break;
		case KT_ARG_I64:
			vals[j].i64 = l->args[j].i;
			break;
		case KT_ARG_F32:
			vals[j].f = l->args[j].f;
			break;
		case KT_ARG_TMAP:
			if (!m->tmap_of[li][j])
				return CUDA_ERROR_INVALID_VALUE;	/* not encoded: a bug */
			break;
		}
		/* A map travels by value: the driver copies the 128 bytes the
		 * kernel's __grid_constant__ parameter declares. */
		params[j] = l->args[j].kind == KT_ARG_TMAP ?
			    (void *)&m->tmap[m->tmap_of[li][j] - 1] : (void *)&vals[j];
	}
	params[l->nargs] = NULL;
	/* A kernel whose CTAs wait for each other goes out cooperatively: the
	 * driver then refuses a grid that cannot be resident all at once
	 * (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, the candidate's result)
	 * where an ordinary launch would hang until the worker's timeout. A
	 * PDL kernel may start while the one before it still runs; it waits
	 * for that one's completion in kt_pdl_wait before touching memory
	 * (the plan guarantees it was compiled so), so a driver without
	 * cuLaunchKernelEx, or pdl 0 (for A/B timings), launches it plainly
	 * with the same results. */
	return cu_api_launch(&d->api, fn, l->grid, l->block, l->smem, d->stream, params,
			     l->cooperative, uses_pdl(d, l, first));
}

/* What one timed repetition runs: a plan's launches or a cuBLAS GEMM. */
struct cu_work {
	struct cu_dev *d;
	const struct kt_plan *p;
	const struct cu_mods *m;
	const CUdeviceptr *ptrs;
	int first, count;	/* launches [first, first + count) of prep-then-timed */
	/* cuBLAS: y = x W^T */
	int gemm;
	int m_, n_, k_;
	CUdeviceptr x, w, y;
	int flush;
	/* the failure, when enqueue returns -1 */
	CUresult cr;		/* CUDA_SUCCESS when cuBLAS failed */
	int blas_status;
	char what[96];
};

static int work_enqueue(struct cu_work *w)
{
	struct cu_dev *d = w->d;
	int i;

	if (w->gemm) {
		float alpha = 1.0f, beta = 0.0f;
		cublasStatus_t st = d->blas.gemm(d->blas.h, CUBLAS_OP_T, CUBLAS_OP_N, w->m_, w->n_,
						 w->k_, &alpha, (const void *)(uintptr_t)w->w,
						 CUDA_R_16BF, w->k_, (const void *)(uintptr_t)w->x,
						 CUDA_R_16BF, w->k_, &beta, (void *)(uintptr_t)w->y,
						 CUDA_R_16BF, w->m_, CUBLAS_COMPUTE_32F,
						 CUBLAS_GEMM_DEFAULT);

		if (st != CUBLAS_STATUS_SUCCESS) {
			w->cr = CUDA_SUCCESS;
			w->blas_status = (int)st;
			snprintf(w->what, sizeof(w->what), "cublasGemmEx: status %d", (int)st);
			return -1;
		}
		return 0;
	}
	for (i = w->first; i < w->first + w->count; i++) {
		const struct kt_launch *l = i < w->p->nprep ? &w->p->prep[i] :
					    &w->p->launch[i - w->p->nprep];

		if ((w->cr = launch_one(d, l, w->m->fn[i], w->ptrs, w->m, i, i == w->first)) !=
		    CUDA_SUCCESS) {
			snprintf(w->what, sizeof(w->what), "%s (%s)",
				 l->cooperative ? "cuLaunchCooperativeKernel" :
				 uses_pdl(d, l, i == w->first) ? "cuLaunchKernelEx (PDL)" :
				 "cuLaunchKernel",
				 l->kernel);
			return -1;
		}
	}
	return 0;
}

/* Marks the failure in w as a result (candidate) or an error (baseline). */
static void work_fail(struct cu_work *w, int *fatal, struct worker_result *res,
		      struct kt_err *err)
{
	if (w->cr == CUDA_SUCCESS) {
		/* cuBLAS said no; the context may still be poisoned. */
		if (w->d->api.CtxSynchronize() != CUDA_SUCCESS)
			*fatal = 1;
		kt_err_set(err, KT_ECUDA, "%s", w->what);
	} else if (w->gemm) {
		cu_fail(w->d, w->cr, w->what, fatal, err);
	} else {
		cand_fail(w->d, w->cr, w->what, fatal, res);
	}
}

/* One batch for measure_time: n x [flush, event, work, event], one sync. */
static int gpu_batch(void *arg, int n, double *out_us, int *fatal, struct worker_result *res,
		     struct kt_err *err)
{
	struct cu_work *w = arg;
	struct cu_dev *d = w->d;
	CUresult r = CUDA_SUCCESS;
	int i;

	if (n > CU_MAX_BATCH)
		n = CU_MAX_BATCH;	/* measure_time never asks for more */
	for (i = 0; i < n; i++) {
		if (w->flush &&
		    (r = d->api.MemsetD8Async(d->flush, (unsigned char)i, d->flush_bytes,
					      d->stream)) != CUDA_SUCCESS) {
			snprintf(w->what, sizeof(w->what), "cuMemsetD8Async (L2 flush)");
			goto fail;
		}
		if ((r = d->api.EventRecord(d->ev[2 * i], d->stream)) != CUDA_SUCCESS) {
			snprintf(w->what, sizeof(w->what), "cuEventRecord");
			goto fail;
		}
		if (work_enqueue(w) != 0)
			goto failed;
		if ((r = d->api.EventRecord(d->ev[2 * i + 1], d->stream)) != CUDA_SUCCESS) {
			snprintf(w->what, sizeof(w->what), "cuEventRecord");
			goto fail;
		}
	}
	if ((r = d->api.StreamSynchronize(d->stream)) != CUDA_SUCCESS) {
		snprintf(w->what, sizeof(w->what), "cuStreamSynchronize (timing)");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		float ms = 0;

		if ((r = d->api.EventElapsedTime(&ms, d->ev[2 * i], d->ev[2 * i + 1])) !=
		    CUDA_SUCCESS) {
			snprintf(w->what, sizeof(w->what), "cuEventElapsedTime");
			goto fail;
		}
		out_us[i] = ms * 1000.0;
	}
	return 0;
fail:
	w->cr = r;
failed:
	work_fail(w, fatal, res, err);
	return -1;
}

/* Runs work once between two events; its time in microseconds. */
static int run_once(struct cu_work *w, double *us, const char *what, int *fatal,
		    struct worker_result *res, struct kt_err *err)
{
	struct cu_dev *d = w->d;
	CUresult r;
	float ms = 0;

	if ((r = d->api.EventRecord(d->ev[0], d->stream)) != CUDA_SUCCESS)
		goto fail;
	if (work_enqueue(w) != 0)
		goto failed;
	if ((r = d->api.EventRecord(d->ev[1], d->stream)) != CUDA_SUCCESS ||
	    (r = d->api.StreamSynchronize(d->stream)) != CUDA_SUCCESS ||
	    (r = d->api.EventElapsedTime(&ms, d->ev[0], d->ev[1])) != CUDA_SUCCESS)
		goto fail;
	if (us)
		*us = ms * 1000.0;
	return 0;
fail:
	w->cr = r;
	snprintf(w->what, sizeof(w->what), "%s", what);
failed:
	work_fail(w, fatal, res, err);
	return -1;
}

/* Poisons every output buffer with NaN so an element the kernel does not
 * write cannot pass verification. */
static CUresult poison_outputs(struct cu_dev *d)
{
	CUresult r = CUDA_SUCCESS;
	int i;

	for (i = 0; i < d->nprob && r == CUDA_SUCCESS; i++) {
		if (d->bufs[i].role != KT_BUF_OUTPUT)
			continue;
		if (d->bufs[i].dtype == KT_BF16)
			r = d->api.MemsetD16Async(d->dptr[i], 0xffff, d->bufs[i].elems, d->stream);
		else
			r = d->api.MemsetD32Async(d->dptr[i], 0xffffffffu, d->bufs[i].elems,
						  d->stream);
	}
	return r;
}

/* Uploads the kept host inputs again. */
static CUresult upload_inputs(struct cu_dev *d)
{
	CUresult r;
	int i;

	for (i = 0; i < d->nprob; i++)
		if (d->host_in[i] &&
		    (r = d->api.MemcpyHtoD(d->dptr[i], d->host_in[i], buf_bytes(&d->bufs[i]))) !=
		    CUDA_SUCCESS)
			return r;
	return CUDA_SUCCESS;
}

/* Downloads output i as float into dst. */
static CUresult download_output(struct cu_dev *d, int i, float *dst)
{
	size_t bytes = buf_bytes(&d->bufs[i]);
	void *tmp = malloc(bytes ? bytes : 1);
	CUresult r;

	if (!tmp)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = d->api.MemcpyDtoH(tmp, d->dptr[i], bytes);
	if (r == CUDA_SUCCESS)
		measure_to_float(d->bufs[i].dtype, tmp, dst, d->bufs[i].elems);
	free(tmp);
	return r;
}

int cu_dev_problem(struct cu_dev *d, const struct kt_family *f, const struct kt_shape *s,
		   uint64_t seed, const struct kt_plan *ref, const void *const *cubins,
		   const size_t *lens, int *fatal, struct kt_err *err)
{
	struct cu_mods mods;
	struct worker_result res;
	struct cu_work w;
	char what[128];
	CUresult r = CUDA_SUCCESS;
	int i, nb, rc = -1, cmp;
	long nonfinite = 0;

	memset(&mods, 0, sizeof(mods));
	memset(&res, 0, sizeof(res));
	problem_release(d);
	if ((cmp = cmp_setup(d, err)) < 0)
		return -1;
	nb = f->buffers(f, s, NULL, d->bufs);
	if (nb < 1 || nb > KT_MAX_BUFS) {
		kt_err_set(err, KT_EINTERNAL, "%s: %d problem buffers", f->name, nb);
		goto out;
	}
	if (measure_plan_check_bufs(ref, nb, d->bufs, what, sizeof(what)) != 0 ||
	    ref->nlaunch < 1) {
		kt_err_set(err, KT_EINTERNAL, "%s: bad reference plan: %s", f->name,
			   ref->nlaunch < 1 ? "no launches" : what);
		goto out;
	}
	d->nprob = nb;
	for (i = 0; i < nb; i++) {
		const struct kt_buf *b = &d->bufs[i];
		size_t bytes = buf_bytes(b);

		if (b->elems == 0 || bytes / kt_dtype_size(b->dtype) != b->elems) {
			kt_err_set(err, KT_EINTERNAL, "%s: buffer %s has %zu elements", f->name,
				   b->name, b->elems);
			goto out;
		}
		/* Outputs between two guard regions (16-byte alignment and more
		 * kept: the guards are whole MiBs). */
		if ((r = d->api.MemAlloc(&d->dbase[i], bytes + 2 * guard_bytes(b))) != CUDA_SUCCESS) {
			d->dbase[i] = 0;
			snprintf(what, sizeof(what), "allocating %s (%zu bytes)", b->name, bytes);
			cu_fail(d, r, what, fatal, err);
			goto out;
		}
		d->dptr[i] = d->dbase[i] + guard_bytes(b);
		if ((r = guard_fill(d, i)) != CUDA_SUCCESS) {
			cu_fail(d, r, "filling the guard regions", fatal, err);
			goto out;
		}
		if (b->role == KT_BUF_INPUT) {
			if (!(d->host_in[i] = malloc(bytes))) {
				kt_err_set(err, KT_EINTERNAL, "out of memory for %s", b->name);
				goto out;
			}
			if (measure_fill_input(f, s, i, b, d->host_in[i], seed, err) != 0)
				goto out;
		}
	}
	if ((r = upload_inputs(d)) != CUDA_SUCCESS || (r = poison_outputs(d)) != CUDA_SUCCESS) {
		cu_fail(d, r, "uploading the inputs", fatal, err);
		goto out;
	}
	if ((r = mods_load(d, ref, cubins, lens, &mods, what, sizeof(what))) != CUDA_SUCCESS ||
	    (r = tmaps_encode(d, ref, d->dptr, d->bufs, &mods, what, sizeof(what))) !=
	    CUDA_SUCCESS) {
		cu_fail(d, r, what, fatal, err);
		goto out;
	}
	/* The reference runs its prep launches and its launches in order. */
	memset(&w, 0, sizeof(w));
	w.d = d;
	w.p = ref;
	w.m = &mods;
	w.ptrs = d->dptr;
	w.first = 0;
	w.count = ref->nprep + ref->nlaunch;
	/* A reference failure is ours, not a candidate's: report it as err. */
	if (work_enqueue(&w) != 0 || (r = d->api.StreamSynchronize(d->stream)) != CUDA_SUCCESS) {
		if (w.cr == CUDA_SUCCESS)
			w.cr = r;
		cu_fail(d, w.cr, w.what[0] ? w.what : "the reference", fatal, err);
		goto out;
	}
	/* The expected outputs stay on the device (a copy per output) when
	 * they fit; else they go to the host. */
	for (i = 0; i < nb && cmp; i++) {
		size_t bytes = buf_bytes(&d->bufs[i]);

		if (d->bufs[i].role != KT_BUF_OUTPUT)
			continue;
		if ((r = d->api.MemAlloc(&d->dref[i], bytes)) == CUDA_ERROR_OUT_OF_MEMORY &&
		    !d->cmp_required) {
			d->dref[i] = 0;
			fprintf(stderr, "ktune worker: verifying %s on the host: no device memory "
				"for a copy of %s (%zu bytes)\n", f->name, d->bufs[i].name, bytes);
			cmp = 0;
			break;
		}
		if (r != CUDA_SUCCESS) {
			d->dref[i] = 0;
			snprintf(what, sizeof(what), "allocating the reference copy of %s (%zu bytes)",
				 d->bufs[i].name, bytes);
			cu_fail(d, r, what, fatal, err);
			goto out;
		}
		if ((r = d->api.MemcpyDtoDAsync(d->dref[i], d->dptr[i], bytes, d->stream)) !=
		    CUDA_SUCCESS) {
			cu_fail(d, r, "copying the reference outputs", fatal, err);
			goto out;
		}
	}
	/* Sanity: the reference itself must be finite (compared with itself),
	 * and its root mean square scales each output's local bound. */
	for (i = 0; i < nb; i++) {
		struct measure_cmp self;

		if (d->bufs[i].role != KT_BUF_OUTPUT)
			continue;
		memset(&self, 0, sizeof(self));
		measure_tolerance(f, s, &d->bufs[i], &d->tol[i]);
		if (cmp) {
			if ((r = cmp_run(d, d->dref[i], d->dref[i], &d->bufs[i], 0, 0, &self)) !=
			    CUDA_SUCCESS) {
				cu_fail(d, r, "checking the reference on the GPU", fatal, err);
				goto out;
			}
			nonfinite += self.nonfinite;
			d->ref_rms[i] = sqrt(self.sq_ref / (double)d->bufs[i].elems);
			continue;
		}
		if (d->dref[i]) {
			d->api.MemFree(d->dref[i]);
			d->dref[i] = 0;
		}
		if (!(d->ref[i] = malloc(d->bufs[i].elems * sizeof(float)))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory for %s", d->bufs[i].name);
			goto out;
		}
		if ((r = download_output(d, i, d->ref[i])) != CUDA_SUCCESS) {
			cu_fail(d, r, "downloading the reference", fatal, err);
			goto out;
		}
		measure_compare(d->ref[i], d->ref[i], d->bufs[i].elems, 0, 0, &self);
		nonfinite += self.nonfinite;
		d->ref_rms[i] = sqrt(self.sq_ref / (double)d->bufs[i].elems);
	}
	d->dev_cmp = cmp;
	if (nonfinite) {
		kt_err_set(err, KT_EINTERNAL, "%s: the GPU reference left %ld non-finite outputs",
			   f->name, nonfinite);
		goto out;
	}
	d->f = f;
	d->s = *s;
	rc = 0;
out:
	mods_unload(d, &mods);
	if (rc != 0 && !*fatal)
		problem_release(d);
	return rc;
}

int cu_dev_eval(struct cu_dev *d, const struct kt_config *c, const struct kt_plan *p,
		const void *const *cubins, const size_t *lens, const struct measure_timing *t,
		struct worker_result *res, int *fatal, struct kt_err *err)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	CUdeviceptr ptrs[KT_MAX_BUFS];
	struct cu_mods mods;
	struct cu_work w;
	char what[160];
	CUresult r;
	struct measure_cmp cmp[KT_MAX_BUFS];
	double est_us = 0;
	float *got = NULL;
	int i, nb, rc = -1;

	memset(&mods, 0, sizeof(mods));
	memset(ptrs, 0, sizeof(ptrs));
	memset(cmp, 0, sizeof(cmp));
	res->rel_err = -1;
	if (!d->f)
		return kt_err_set(err, KT_EINVAL, "no problem set");
	nb = d->f->buffers(d->f, &d->s, c, bufs);
	if (nb < d->nprob || nb > KT_MAX_BUFS) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "family gives %d buffers for the config",
			 nb);
		return 0;
	}
	for (i = 0; i < d->nprob; i++)
		if (bufs[i].elems != d->bufs[i].elems || bufs[i].dtype != d->bufs[i].dtype) {
			res->status = WORKER_LAUNCH_ERROR;
			snprintf(res->message, sizeof(res->message),
				 "buffer %d differs from the problem's", i);
			return 0;
		}
	if (measure_plan_check_bufs(p, nb, bufs, what, sizeof(what)) != 0 || p->nlaunch < 1) {
		res->status = WORKER_LAUNCH_ERROR;
		snprintf(res->message, sizeof(res->message), "invalid plan: %s",
			 p->nlaunch < 1 ? "no launches" : what);
		return 0;
	}
	for (i = 0; i < d->nprob; i++)
		ptrs[i] = d->dptr[i];
	/* Scratch: zeroed so that a prep-less candidate starts from the same
	 * state every time. */
	for (i = d->nprob; i < nb; i++) {
		size_t bytes = buf_bytes(&bufs[i]);

		if ((r = d->api.MemAlloc(&ptrs[i], bytes ? bytes : 1)) != CUDA_SUCCESS) {
			ptrs[i] = 0;
			snprintf(what, sizeof(what), "allocating scratch %s (%zu bytes)", bufs[i].name,
				 bytes);
			cand_fail(d, r, what, fatal, res);
			rc = 0;
			goto out;
		}
		if (bytes && (r = d->api.MemsetD8Async(ptrs[i], 0, bytes, d->stream)) != CUDA_SUCCESS) {
			cand_fail(d, r, "clearing scratch", fatal, res);
			rc = 0;
			goto out;
		}
	}
	if ((r = mods_load(d, p, cubins, lens, &mods, what, sizeof(what))) != CUDA_SUCCESS ||
	    (r = tmaps_encode(d, p, ptrs, bufs, &mods, what, sizeof(what))) != CUDA_SUCCESS) {
		cand_fail(d, r, what, fatal, res);
		rc = 0;
		goto out;
	}
	memset(&w, 0, sizeof(w));
	w.d = d;
	w.p = p;
	w.m = &mods;
	w.ptrs = ptrs;
	if (p->nprep > 0) {
		w.first = 0;
		w.count = p->nprep;
		if (run_once(&w, NULL, "prep launches", fatal, res, err) != 0) {
			rc = 0;
			goto out;
		}
	}
	w.first = p->nprep;
	w.count = p->nlaunch;
	if ((r = poison_outputs(d)) != CUDA_SUCCESS) {
		cand_fail(d, r, "poisoning the outputs", fatal, res);
		rc = 0;
		goto out;
	}
	if (run_once(&w, &est_us, "cuStreamSynchronize (verification run)", fatal, res, err) != 0) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < d->nprob; i++) {
		if (d->bufs[i].role != KT_BUF_OUTPUT)
			continue;
		if (d->dev_cmp) {
			if ((r = cmp_run(d, d->dptr[i], d->dref[i], &d->bufs[i],
					 measure_atol(&d->tol[i], d->ref_rms[i]), d->tol[i].rtol,
					 &cmp[i])) != CUDA_SUCCESS) {
				cand_fail(d, r, "verifying on the GPU (compare kernel)", fatal, res);
				rc = 0;
				goto out;
			}
			continue;
		}
		free(got);
		if (!(got = malloc(d->bufs[i].elems * sizeof(float)))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			goto out;
		}
		if ((r = download_output(d, i, got)) != CUDA_SUCCESS) {
			cand_fail(d, r, "downloading the outputs", fatal, res);
			rc = 0;
			goto out;
		}
		measure_compare(got, d->ref[i], d->bufs[i].elems,
				measure_atol(&d->tol[i], d->ref_rms[i]), d->tol[i].rtol, &cmp[i]);
	}
	if ((r = guard_check(d, &res->guard_changed)) != CUDA_SUCCESS) {
		cand_fail(d, r, "checking the guard regions", fatal, res);
		rc = 0;
		goto out;
	}
	if (measure_judge(res, d->bufs, d->nprob, cmp, d->tol)) {
		rc = 0;
		goto out;
	}
	for (i = 0; i < t->warmup; i++)
		if (work_enqueue(&w) != 0) {
			work_fail(&w, fatal, res, err);
			rc = 0;
			goto out;
		}
	w.flush = t->flush_l2;
	if (measure_time_read(d->nv, t, est_us, gpu_batch, &w, fatal, res, err) != 0) {
		/* A candidate failing while timed is a result; anything else
		 * (out of memory on the host) is ours. */
		rc = err->code == KT_OK ? 0 : -1;
		goto out;
	}
	/* A write past the outputs during the timed runs is as wrong. */
	if ((r = guard_check(d, &res->guard_changed)) != CUDA_SUCCESS) {
		cand_fail(d, r, "checking the guard regions after timing", fatal, res);
		rc = 0;
		goto out;
	}
	if (res->guard_changed) {
		res->status = WORKER_WRONG;
		snprintf(res->message, sizeof(res->message),
			 "wrote past its outputs while timed: %ld bytes of the guard regions changed",
			 res->guard_changed);
		rc = 0;
		goto out;
	}
	res->status = WORKER_OK;
	rc = 0;
out:
	free(got);
	mods_unload(d, &mods);
	for (i = d->nprob; i < KT_MAX_BUFS; i++)
		if (ptrs[i])
			d->api.MemFree(ptrs[i]);
	/* A candidate that went wrong may have written over the inputs.
	 * NEEDSWORK: one that verified but wrote over an input during its
	 * timed runs goes unnoticed; a checksum of the inputs would catch it. */
	if (!*fatal && (rc != 0 || res->status != WORKER_OK) && upload_inputs(d) != CUDA_SUCCESS)
		*fatal = 1;
	return rc;
}

/* ---- the cuBLAS baseline ---- */

static int blas_load(struct cu_dev *d, struct worker_result *res)
{
	static const char *const libs[] = { "libcublas.so.13", "libcublas.so" };
	struct cu_blas *b = &d->blas;
	void *sym;
	size_t i;

	if (b->h)
		return 1;
	for (i = 0; i < sizeof(libs) / sizeof(libs[0]) && !b->lib; i++)
		b->lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
	if (!b->lib) {
		snprintf(res->message, sizeof(res->message), "cuBLAS not found (libcublas.so.13)");
		return 0;
	}
#define BLAS_SYM(field, name)                                     \
	do {                                                      \
		if (!(sym = dlsym(b->lib, name)))                 \
			goto missing;                             \
		memcpy(&b->field, &sym, sizeof(b->field));        \
	} while (0)
	BLAS_SYM(create, "cublasCreate_v2");
	BLAS_SYM(destroy, "cublasDestroy_v2");
	BLAS_SYM(set_stream, "cublasSetStream_v2");
	BLAS_SYM(gemm, "cublasGemmEx");
#undef BLAS_SYM
	if (b->create(&b->h) != CUBLAS_STATUS_SUCCESS) {
		b->h = NULL;
		snprintf(res->message, sizeof(res->message), "cublasCreate failed");
		blas_release(b);
		return 0;
	}
	if (b->set_stream(b->h, d->stream) != CUBLAS_STATUS_SUCCESS) {
		snprintf(res->message, sizeof(res->message), "cublasSetStream failed");
		blas_release(b);
		return 0;
	}
	return 1;
missing:
	snprintf(res->message, sizeof(res->message), "cuBLAS lacks an entry point: %s", dlerror());
	blas_release(b);
	return 0;
}

/* Index of the problem buffer with this name (or, failing that, the only
 * one of this role and size), else -1. */
static int find_buf(const struct cu_dev *d, const char *const *names, enum kt_buf_role role,
		    size_t elems)
{
	int i, j, hit = -1, hits = 0;

	for (j = 0; names[j]; j++)
		for (i = 0; i < d->nprob; i++)
			if (strcmp(d->bufs[i].name, names[j]) == 0 && d->bufs[i].role == role &&
			    d->bufs[i].elems == elems && d->bufs[i].dtype == KT_BF16)
				return i;
	for (i = 0; i < d->nprob; i++)
		if (d->bufs[i].role == role && d->bufs[i].elems == elems &&
		    d->bufs[i].dtype == KT_BF16) {
			hit = i;
			hits++;
		}
	return hits == 1 ? hit : -1;
}

/* A temporary bf16 tensor filled from a fixed seed. */
static CUresult temp_tensor(struct cu_dev *d, size_t elems, uint64_t seed, CUdeviceptr *out)
{
	uint16_t *host = malloc(elems * sizeof(uint16_t));
	CUresult r;

	*out = 0;
	if (!host)
		return CUDA_ERROR_OUT_OF_MEMORY;
	kt_fill_bf16(host, elems, seed, 1.0);
	r = d->api.MemAlloc(out, elems * sizeof(uint16_t));
	if (r == CUDA_SUCCESS && (r = d->api.MemcpyHtoD(*out, host, elems * 2)) != CUDA_SUCCESS) {
		d->api.MemFree(*out);
		*out = 0;
	}
	free(host);
	return r;
}

int cu_dev_baseline(struct cu_dev *d, const char *name, const struct measure_timing *t,
		    struct worker_result *res, int *fatal, struct kt_err *err)
{
	static const char *const x_names[] = { "x", "X", NULL };
	static const char *const w_names[] = { "W", "w", NULL };
	long tokens, in, out;
	CUdeviceptr tmp_x = 0, tmp_w = 0, tmp_y = 0;
	struct cu_work w;
	double est_us = 0;
	CUresult r;
	int i, xi, wi, rc = -1;

	res->rel_err = -1;
	if (strcmp(name, "cublas_dense") != 0) {
		rc = 0;
		snprintf(res->message, sizeof(res->message), "no baseline named %s", name);
		goto out;
	}
	tokens = kt_shape_get(d->f, &d->s, "tokens");
	in = kt_shape_get(d->f, &d->s, "in");
	out = kt_shape_get(d->f, &d->s, "out");
	if (tokens < 1 || in < 1 || out < 1) {
		rc = 0;
		snprintf(res->message, sizeof(res->message), "%s is not a linear family",
			 d->f->name);
		goto out;
	}
	if (tokens > 0x7fffffffL || in > 0x7fffffffL || out > 0x7fffffffL) {
		rc = 0;
		snprintf(res->message, sizeof(res->message), "shape too large for cuBLAS int dims");
		goto out;
	}
	if (!blas_load(d, res)) {
		rc = 0;
		goto out;
	}
	memset(&w, 0, sizeof(w));
	w.d = d;
	w.gemm = 1;
	w.m_ = (int)out;
	w.n_ = (int)tokens;
	w.k_ = (int)in;
	/* The problem's own x and W where it has them (lowrank has no W). */
	xi = find_buf(d, x_names, KT_BUF_INPUT, (size_t)tokens * (size_t)in);
	wi = find_buf(d, w_names, KT_BUF_INPUT, (size_t)out * (size_t)in);
	if (wi == xi)
		wi = -1;
	if (xi >= 0)
		w.x = d->dptr[xi];
	else if ((r = temp_tensor(d, (size_t)tokens * (size_t)in, 0x78, &tmp_x)) != CUDA_SUCCESS)
		goto cuda_fail;
	if (wi >= 0)
		w.w = d->dptr[wi];
	else if ((r = temp_tensor(d, (size_t)out * (size_t)in, 0x57, &tmp_w)) != CUDA_SUCCESS)
		goto cuda_fail;
	if (tmp_x)
		w.x = tmp_x;
	if (tmp_w)
		w.w = tmp_w;
	/* Its own y: the problem's outputs stay as the candidates left them. */
	if ((r = d->api.MemAlloc(&tmp_y, (size_t)tokens * (size_t)out * 2)) != CUDA_SUCCESS) {
		tmp_y = 0;
		goto cuda_fail;
	}
	w.y = tmp_y;
	if (run_once(&w, &est_us, "cublasGemmEx (first call)", fatal, res, err) != 0)
		goto out;
	for (i = 0; i < t->warmup; i++)
		if (work_enqueue(&w) != 0) {
			work_fail(&w, fatal, res, err);
			goto out;
		}
	w.flush = t->flush_l2;
	if (measure_time_read(d->nv, t, est_us, gpu_batch, &w, fatal, res, err) != 0)
		goto out;
	res->status = WORKER_OK;
	snprintf(res->message, sizeof(res->message), "cublasGemmEx bf16, compute 32F, %s, %s",
		 xi >= 0 ? "problem x" : "temporary x", wi >= 0 ? "problem W" : "temporary W");
	rc = 1;
	goto out;
cuda_fail:
	cu_fail(d, r, "baseline buffers", fatal, err);
out:
	if (tmp_x)
		d->api.MemFree(tmp_x);
	if (tmp_w)
		d->api.MemFree(tmp_w);
	if (tmp_y)
		d->api.MemFree(tmp_y);
	return rc;
}
