/*
 * fake_cuda.c -- a stand-in for libcuda.so.1, built as a shared library for
 * the tests: with its folder first on LD_LIBRARY_PATH, the worker's CUDA
 * backend (tuner/cuda.c) runs on the CPU, so its bookkeeping -- allocations,
 * guard regions, uploads, downloads, launches, events -- is exercised in CI.
 *
 * It answers cuGetProcAddress_v2 for every entry point runtime/cu_api.c
 * asks for. One device, "Fake sm_90 (CPU)": sm_90, 4 SMs, 1 MiB of L2.
 * Device memory is host memory; every copy, memset and kernel access must
 * lie inside one live allocation, else the call (or, for a kernel, the next
 * synchronizing call) fails as the driver would: CUDA_ERROR_INVALID_VALUE
 * for a copy, a sticky CUDA_ERROR_ILLEGAL_ADDRESS for a kernel.
 *
 * Kernels run by name, as their templates define them: the selftest
 * family's (templates/selftest.cu) -- selftest_ref/ok/wrong/sparse/oob on
 * bf16 bits, selftest_fault an illegal address, selftest_hang a synchronize
 * that never returns -- and the worker's kt_compare and kt_guard
 * (templates/compare.cu; the totals land in block 0's part, the other
 * blocks' are zero, which sums the same). Any other kernel is refused
 * (CUDA_ERROR_NOT_FOUND at cuModuleGetFunction). Events read
 * CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_SMEM_DEFAULT (48 * 1024)
#define FAKE_SMEM_OPTIN 232448
#define FAKE_MAX_ALLOCS 4096

struct alloc {
	uintptr_t base;
	size_t bytes;
};

static struct alloc allocs[FAKE_MAX_ALLOCS];
static int nallocs;
static CUresult sticky = CUDA_SUCCESS;	/* a kernel's fault, reported from then on */
static int hung;			/* selftest_hang ran: synchronizing never returns */

struct fake_func {
	char name[64];
	int smem_max;
};

/* Handles live in static pools, so that nothing the fake hands out is
 * ever reported as leaked by a sanitizer in the process that loads it. */
#define FAKE_MAX_FUNCS 1024
#define FAKE_MAX_EVENTS 1024

struct fake_event {
	double t;
	int used;
};

static struct fake_func funcs[FAKE_MAX_FUNCS];
static int nfuncs;
static struct fake_event events[FAKE_MAX_EVENTS];

/* [p, p + n) inside one live allocation */
static int inside(uintptr_t p, size_t n)
{
	int i;

	for (i = 0; i < nallocs; i++)
		if (p >= allocs[i].base && p - allocs[i].base <= allocs[i].bytes &&
		    n <= allocs[i].bytes - (p - allocs[i].base))
			return 1;
	return 0;
}

static CUresult sync_point(void)
{
	while (hung)
		pause();
	return sticky;
}

static CUresult f_Init(unsigned flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

static CUresult f_DriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

static CUresult f_GetErrorName(CUresult r, const char **s)
{
	switch (r) {
	case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
	case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
	case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
	case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
	default: *s = "CUDA_ERROR_UNKNOWN"; break;
	}
	return CUDA_SUCCESS;
}

static CUresult f_GetErrorString(CUresult r, const char **s)
{
	*s = r == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered" :
	     r == CUDA_ERROR_INVALID_VALUE ? "invalid argument" : "fake driver error";
	return CUDA_SUCCESS;
}

static CUresult f_DeviceGetCount(int *n)
{
	*n = 1;
	return CUDA_SUCCESS;
}

static CUresult f_DeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult f_DeviceGetName(char *name, int len, CUdevice d)
{
	(void)d;
	if (len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	strncpy(name, "Fake sm_90 (CPU)", (size_t)len - 1);
	name[len - 1] = 0;
	return CUDA_SUCCESS;
}

static CUresult f_DeviceGetUuid(CUuuid *u, CUdevice d)
{
	(void)d;
	memset(u->bytes, 0x5a, sizeof(u->bytes));
	return CUDA_SUCCESS;
}

static CUresult f_DeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	(void)d;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 4; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 1 << 20; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = FAKE_SMEM_OPTIN; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 3201000; break;
	default: *v = 0; break;
	}
	return CUDA_SUCCESS;
}

static int the_ctx;

static CUresult f_DevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	(void)d;
	*c = (CUcontext)&the_ctx;
	return CUDA_SUCCESS;
}

static CUresult f_DevicePrimaryCtxRelease(CUdevice d)
{
	(void)d;
	return CUDA_SUCCESS;
}

static CUresult f_CtxSetCurrent(CUcontext c)
{
	(void)c;
	return CUDA_SUCCESS;
}

static CUresult f_CtxGetCurrent(CUcontext *c)
{
	*c = (CUcontext)&the_ctx;
	return CUDA_SUCCESS;
}

static CUresult f_CtxGetDevice(CUdevice *d)
{
	*d = 0;
	return CUDA_SUCCESS;
}

static CUresult f_CtxPushCurrent(CUcontext c)
{
	(void)c;
	return CUDA_SUCCESS;
}

static CUresult f_CtxPopCurrent(CUcontext *c)
{
	if (c)
		*c = (CUcontext)&the_ctx;
	return CUDA_SUCCESS;
}

static CUresult f_CtxSynchronize(void)
{
	return sync_point();
}

static int the_stream;

static CUresult f_StreamCreate(CUstream *s, unsigned flags)
{
	(void)flags;
	*s = (CUstream)&the_stream;
	return CUDA_SUCCESS;
}

static CUresult f_StreamSynchronize(CUstream s)
{
	(void)s;
	return sync_point();
}

static CUresult f_StreamDestroy(CUstream s)
{
	(void)s;
	return CUDA_SUCCESS;
}

static CUresult f_StreamGetCtx(CUstream s, CUcontext *c)
{
	(void)s;
	*c = (CUcontext)&the_ctx;
	return CUDA_SUCCESS;
}

static CUresult f_StreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
	(void)s;
	*st = CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

static CUresult f_MemAlloc(CUdeviceptr *p, size_t bytes)
{
	void *m;

	if (sticky)
		return sticky;
	if (bytes == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (nallocs == FAKE_MAX_ALLOCS || !(m = malloc(bytes)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	allocs[nallocs].base = (uintptr_t)m;
	allocs[nallocs].bytes = bytes;
	nallocs++;
	*p = (CUdeviceptr)(uintptr_t)m;
	return CUDA_SUCCESS;
}

static CUresult f_MemFree(CUdeviceptr p)
{
	int i;

	for (i = 0; i < nallocs; i++)
		if (allocs[i].base == (uintptr_t)p) {
			free((void *)allocs[i].base);
			allocs[i] = allocs[--nallocs];
			return sticky;
		}
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_MemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
	if (sticky)
		return sticky;
	if (!inside((uintptr_t)dst, n))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return CUDA_SUCCESS;
}

static CUresult f_MemcpyDtoH(void *dst, CUdeviceptr src, size_t n)
{
	CUresult r = sync_point();

	if (r)
		return r;
	if (!inside((uintptr_t)src, n))
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

static CUresult f_MemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	(void)s;
	if (sticky)
		return sticky;
	if (!inside((uintptr_t)dst, n) || !inside((uintptr_t)src, n))
		return CUDA_ERROR_INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

static CUresult f_MemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
	(void)s;
	if (sticky)
		return sticky;
	if (!inside((uintptr_t)p, n))
		return CUDA_ERROR_INVALID_VALUE;
	memset((void *)(uintptr_t)p, v, n);
	return CUDA_SUCCESS;
}

static CUresult f_MemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream s)
{
	unsigned short *q = (unsigned short *)(uintptr_t)p;
	size_t i;

	(void)s;
	if (sticky)
		return sticky;
	if (n > SIZE_MAX / 2 || !inside((uintptr_t)p, 2 * n))
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++)
		q[i] = v;
	return CUDA_SUCCESS;
}

static CUresult f_MemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
	unsigned *q = (unsigned *)(uintptr_t)p;
	size_t i;

	(void)s;
	if (sticky)
		return sticky;
	if (n > SIZE_MAX / 4 || !inside((uintptr_t)p, 4 * n))
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++)
		q[i] = v;
	return CUDA_SUCCESS;
}

static int the_module;

static CUresult f_ModuleLoadData(CUmodule *m, const void *image)
{
	if (sticky)
		return sticky;
	if (!image)
		return CUDA_ERROR_INVALID_VALUE;
	*m = (CUmodule)&the_module;
	return CUDA_SUCCESS;
}

static CUresult f_ModuleUnload(CUmodule m)
{
	(void)m;
	return CUDA_SUCCESS;
}

static const char *const known_kernels[] = {
	"selftest_ref", "selftest_ok", "selftest_wrong", "selftest_sparse",
	"selftest_oob", "selftest_fault", "selftest_hang", "kt_compare", "kt_guard",
};

static CUresult f_ModuleGetFunction(CUfunction *fn, CUmodule m, const char *name)
{
	struct fake_func *f;
	size_t i;

	(void)m;
	for (i = 0; i < sizeof(known_kernels) / sizeof(known_kernels[0]); i++)
		if (strcmp(name, known_kernels[i]) == 0)
			break;
	if (i == sizeof(known_kernels) / sizeof(known_kernels[0]))
		return CUDA_ERROR_NOT_FOUND;
	/* one per lookup, kept for the process's life (a module lives as
	 * long as its worker child in practice) */
	if (nfuncs == FAKE_MAX_FUNCS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	f = &funcs[nfuncs++];
	strncpy(f->name, name, sizeof(f->name) - 1);
	f->smem_max = FAKE_SMEM_DEFAULT;
	*fn = (CUfunction)f;
	return CUDA_SUCCESS;
}

static CUresult f_FuncSetAttribute(CUfunction fn, CUfunction_attribute a, int v)
{
	struct fake_func *f = (struct fake_func *)fn;

	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
		if (v < 0 || v > FAKE_SMEM_OPTIN)
			return CUDA_ERROR_INVALID_VALUE;
		f->smem_max = v;
	}
	return CUDA_SUCCESS;
}

static float bf16_load(const unsigned short *p, long i)
{
	uint32_t u = (uint32_t)p[i] << 16;
	float v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

/* round to nearest even, as st_store */
static void bf16_store(unsigned short *p, long i, float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof(u));
	p[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#define CMP_PART 5	/* templates/compare.cu */

static float cmp_load(uintptr_t p, unsigned long long i, int dtype)
{
	if (dtype == 0)
		return bf16_load((const unsigned short *)p, (long)i);
	if (dtype == 1)
		return ((const float *)p)[i];
	return (float)((const int *)p)[i];
}

/* kt_compare and kt_guard over [0, n), the totals in part[0 .. CMP_PART) */
static CUresult run_compare(const char *k, unsigned gx, void **params)
{
	double *part, tot[CMP_PART] = { 0 };
	unsigned long long n, i;
	uintptr_t p, got, ref, pp;

	if (strcmp(k, "kt_guard") == 0) {
		unsigned guard;

		memcpy(&p, params[0], sizeof(p));
		memcpy(&n, params[1], sizeof(n));
		memcpy(&guard, params[2], sizeof(guard));
		memcpy(&pp, params[3], sizeof(pp));
		if (!inside(p, n) || !inside(pp, (size_t)gx * CMP_PART * sizeof(double))) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			return CUDA_SUCCESS;
		}
		for (i = 0; i < n; i++)
			tot[0] += ((const unsigned char *)p)[i] != (unsigned char)guard;
	} else {
		int dtype;
		double atol, rtol;
		size_t es;

		memcpy(&got, params[0], sizeof(got));
		memcpy(&ref, params[1], sizeof(ref));
		memcpy(&n, params[2], sizeof(n));
		memcpy(&dtype, params[3], sizeof(dtype));
		memcpy(&atol, params[4], sizeof(atol));
		memcpy(&rtol, params[5], sizeof(rtol));
		memcpy(&pp, params[6], sizeof(pp));
		es = dtype == 0 ? 2 : 4;
		if (!inside(got, n * es) || !inside(ref, n * es) ||
		    !inside(pp, (size_t)gx * CMP_PART * sizeof(double))) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			return CUDA_SUCCESS;
		}
		for (i = 0; i < n; i++) {
			float g = cmp_load(got, i, dtype), r = cmp_load(ref, i, dtype);
			uint32_t gb;
			double d;

			memcpy(&gb, &g, sizeof(gb));
			if ((gb & 0x7f800000u) == 0x7f800000u) {
				tot[2] += 1.0;
				continue;
			}
			d = (double)g - (double)r;
			d = d < 0 ? -d : d;
			tot[0] += d * d;
			tot[1] += (double)r * (double)r;
			if (d > tot[4])
				tot[4] = d;
			if (d > atol + rtol * ((double)r < 0 ? -(double)r : (double)r))
				tot[3] += 1.0;
		}
	}
	part = (double *)pp;
	memset(part, 0, (size_t)gx * CMP_PART * sizeof(double));
	memcpy(part, tot, sizeof(tot));
	return CUDA_SUCCESS;
}

static CUresult run(struct fake_func *f, unsigned gx, unsigned bx, unsigned by, unsigned bz,
		    unsigned smem, void **params)
{
	const char *k = f->name;
	uintptr_t x, y;
	long n, i, stride;
	int nn;

	if (sticky)
		return sticky;
	if ((unsigned long long)bx * by * bz > 1024 || bx == 0 || by == 0 || bz == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if ((int)smem > f->smem_max)
		return CUDA_ERROR_INVALID_VALUE;
	if (!params || gx == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (strncmp(k, "kt_", 3) == 0)
		return run_compare(k, gx, params);
	memcpy(&x, params[0], sizeof(x));
	memcpy(&y, params[1], sizeof(y));
	memcpy(&nn, params[2], sizeof(nn));
	n = nn;
	if (strcmp(k, "selftest_hang") == 0) {
		hung = 1;
		return CUDA_SUCCESS;
	}
	if (strcmp(k, "selftest_fault") == 0 || n < 0 || !inside(x, (size_t)n * 2) ||
	    !inside(y, (size_t)n * 2)) {
		sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
		return CUDA_SUCCESS;
	}
	stride = n / 88 > 0 ? n / 88 : 1;
	for (i = 0; i < n; i++) {
		float v = 2.0f * bf16_load((const unsigned short *)x, i);

		if (strcmp(k, "selftest_wrong") == 0)
			v += 1.0f;
		else if (strcmp(k, "selftest_sparse") == 0 && i % stride == stride / 2)
			v = 0.0f;
		bf16_store((unsigned short *)y, i, v);
	}
	if (strcmp(k, "selftest_oob") == 0) {
		if (!inside(y + (uintptr_t)n * 2, 512)) {
			sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
			return CUDA_SUCCESS;
		}
		for (i = 0; i < 256; i++)
			((unsigned short *)y)[n + i] = 0x1234;
	}
	return CUDA_SUCCESS;
}

static CUresult f_LaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
			       void **extra)
{
	(void)gy, (void)gz, (void)s, (void)extra;
	return run((struct fake_func *)fn, gx, bx, by, bz, smem, params);
}

static CUresult f_LaunchCooperativeKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
					  unsigned bx, unsigned by, unsigned bz, unsigned smem,
					  CUstream s, void **params)
{
	(void)gy, (void)gz, (void)s;
	return run((struct fake_func *)fn, gx, bx, by, bz, smem, params);
}

static CUresult f_LaunchKernelEx(const CUlaunchConfig *c, CUfunction fn, void **params,
				 void **extra)
{
	(void)extra;
	return run((struct fake_func *)fn, c->gridDimX, c->blockDimX, c->blockDimY, c->blockDimZ,
		   c->sharedMemBytes, params);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static CUresult f_EventCreate(CUevent *e, unsigned flags)
{
	int i;

	(void)flags;
	for (i = 0; i < FAKE_MAX_EVENTS; i++)
		if (!events[i].used) {
			events[i].used = 1;
			*e = (CUevent)&events[i];
			return CUDA_SUCCESS;
		}
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult f_EventRecord(CUevent e, CUstream s)
{
	(void)s;
	((struct fake_event *)e)->t = now_ms();
	return sticky;
}

static CUresult f_EventSynchronize(CUevent e)
{
	(void)e;
	return sync_point();
}

static CUresult f_EventElapsedTime(float *ms, CUevent a, CUevent b)
{
	CUresult r = sync_point();

	if (r)
		return r;
	*ms = (float)(((struct fake_event *)b)->t - ((struct fake_event *)a)->t);
	return CUDA_SUCCESS;
}

static CUresult f_EventDestroy(CUevent e)
{
	((struct fake_event *)e)->used = 0;
	return CUDA_SUCCESS;
}

static CUresult f_TensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank,
				       void *g, const cuuint64_t *dims, const cuuint64_t *strides,
				       const cuuint32_t *box, const cuuint32_t *estr,
				       CUtensorMapInterleave il, CUtensorMapSwizzle sw,
				       CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
	(void)t, (void)rank, (void)g, (void)dims, (void)strides, (void)box, (void)estr;
	(void)il, (void)sw, (void)l2, (void)oob;
	memset(m, 0, sizeof(*m));
	return CUDA_SUCCESS;
}

#define E(name) { "cu" #name, (void *)f_##name }

static const struct {
	const char *name;
	void *fn;
} table[] = {
	E(Init), E(DriverGetVersion), E(GetErrorName), E(GetErrorString), E(DeviceGetCount),
	E(DeviceGet), E(DeviceGetName), E(DeviceGetUuid), E(DeviceGetAttribute),
	E(DevicePrimaryCtxRetain), E(DevicePrimaryCtxRelease), E(CtxSetCurrent), E(CtxSynchronize),
	E(StreamCreate), E(StreamSynchronize), E(StreamDestroy), E(MemAlloc), E(MemFree),
	E(MemcpyHtoD), E(MemcpyDtoH), E(MemcpyDtoDAsync), E(MemsetD8Async), E(MemsetD16Async),
	E(MemsetD32Async), E(ModuleLoadData), E(ModuleUnload), E(ModuleGetFunction),
	E(FuncSetAttribute), E(LaunchKernel), E(LaunchCooperativeKernel), E(LaunchKernelEx),
	E(EventCreate), E(EventRecord), E(EventSynchronize), E(EventElapsedTime), E(EventDestroy),
	E(CtxGetCurrent), E(CtxGetDevice), E(CtxPushCurrent), E(CtxPopCurrent), E(StreamGetCtx),
	E(StreamIsCapturing), E(TensorMapEncodeTiled),
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	size_t i;

	(void)version, (void)flags;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(symbol, table[i].name) == 0) {
			*pfn = table[i].fn;
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}
