/*
 * cu_api.c -- the CUDA driver by dlopen("libcuda.so.1") and cuGetProcAddress
 * (cu_api.h). A leaf: the tuner's worker and the runtime both load the
 * driver through it.
 */
#include "cu_api.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- the driver table ---- */

static const struct {
	const char *name;
	int version;		/* matches the PFN_ typedef of the field */
	int alt_version;	/* tried when version is not found; 0 none */
	size_t off;
	int optional;		/* 1: left NULL when missing; users check */
} cu_syms[] = {
	{ "cuInit", 2000, 0, offsetof(struct cu_api, Init) },
	{ "cuDriverGetVersion", 2020, 0, offsetof(struct cu_api, DriverGetVersion) },
	{ "cuGetErrorName", 6000, 0, offsetof(struct cu_api, GetErrorName) },
	{ "cuGetErrorString", 6000, 0, offsetof(struct cu_api, GetErrorString) },
	{ "cuDeviceGetCount", 2000, 0, offsetof(struct cu_api, DeviceGetCount) },
	{ "cuDeviceGet", 2000, 0, offsetof(struct cu_api, DeviceGet) },
	{ "cuDeviceGetName", 2000, 0, offsetof(struct cu_api, DeviceGetName) },
	{ "cuDeviceGetUuid", 11040, 0, offsetof(struct cu_api, DeviceGetUuid) },
	{ "cuDeviceGetAttribute", 2000, 0, offsetof(struct cu_api, DeviceGetAttribute) },
	{ "cuDevicePrimaryCtxRetain", 7000, 0, offsetof(struct cu_api, DevicePrimaryCtxRetain) },
	{ "cuDevicePrimaryCtxRelease", 11000, 0, offsetof(struct cu_api, DevicePrimaryCtxRelease) },
	{ "cuCtxSetCurrent", 4000, 0, offsetof(struct cu_api, CtxSetCurrent) },
	{ "cuCtxSynchronize", 2000, 0, offsetof(struct cu_api, CtxSynchronize) },
	{ "cuStreamCreate", 2000, 0, offsetof(struct cu_api, StreamCreate) },
	{ "cuStreamSynchronize", 2000, 0, offsetof(struct cu_api, StreamSynchronize) },
	{ "cuStreamDestroy", 4000, 0, offsetof(struct cu_api, StreamDestroy) },
	{ "cuMemAlloc", 3020, 0, offsetof(struct cu_api, MemAlloc) },
	{ "cuMemFree", 3020, 0, offsetof(struct cu_api, MemFree) },
	{ "cuMemcpyHtoD", 3020, 0, offsetof(struct cu_api, MemcpyHtoD) },
	{ "cuMemcpyDtoH", 3020, 0, offsetof(struct cu_api, MemcpyDtoH) },
	{ "cuMemcpyDtoDAsync", 3020, 0, offsetof(struct cu_api, MemcpyDtoDAsync) },
	{ "cuMemsetD8Async", 3020, 0, offsetof(struct cu_api, MemsetD8Async) },
	{ "cuMemsetD16Async", 3020, 0, offsetof(struct cu_api, MemsetD16Async) },
	{ "cuMemsetD32Async", 3020, 0, offsetof(struct cu_api, MemsetD32Async) },
	{ "cuModuleLoadData", 2000, 0, offsetof(struct cu_api, ModuleLoadData) },
	{ "cuModuleUnload", 2000, 0, offsetof(struct cu_api, ModuleUnload) },
	{ "cuModuleGetFunction", 2000, 0, offsetof(struct cu_api, ModuleGetFunction) },
	{ "cuFuncSetAttribute", 9000, 0, offsetof(struct cu_api, FuncSetAttribute) },
	{ "cuLaunchKernel", 4000, 0, offsetof(struct cu_api, LaunchKernel) },
	{ "cuLaunchCooperativeKernel", 9000, 0, offsetof(struct cu_api, LaunchCooperativeKernel) },
	{ "cuLaunchKernelEx", 11060, 1, offsetof(struct cu_api, LaunchKernelEx) },
	{ "cuEventCreate", 2000, 0, offsetof(struct cu_api, EventCreate) },
	{ "cuEventRecord", 2000, 0, offsetof(struct cu_api, EventRecord) },
	{ "cuEventSynchronize", 2000, 0, offsetof(struct cu_api, EventSynchronize) },
	{ "cuEventElapsedTime", 12080, 2000, offsetof(struct cu_api, EventElapsedTime) },
	{ "cuEventDestroy", 4000, 0, offsetof(struct cu_api, EventDestroy) },
	{ "cuCtxGetCurrent", 4000, 0, offsetof(struct cu_api, CtxGetCurrent) },
	{ "cuCtxGetDevice", 2000, 0, offsetof(struct cu_api, CtxGetDevice) },
	{ "cuCtxPushCurrent", 4000, 0, offsetof(struct cu_api, CtxPushCurrent) },
	{ "cuCtxPopCurrent", 4000, 0, offsetof(struct cu_api, CtxPopCurrent) },
	{ "cuStreamGetCtx", 9020, 0, offsetof(struct cu_api, StreamGetCtx) },
	{ "cuStreamIsCapturing", 10000, 0, offsetof(struct cu_api, StreamIsCapturing) },
	{ "cuTensorMapEncodeTiled", 12000, 0, offsetof(struct cu_api, TensorMapEncodeTiled), 1 },
};

int cu_api_load(struct cu_api *api, struct kt_err *err)
{
	PFN_cuGetProcAddress_v12000 gpa;
	void *sym;
	size_t i;

	memset(api, 0, sizeof(*api));
	if (!(api->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)))
		return kt_err_set(err, KT_ENOGPU, "no NVIDIA driver (libcuda.so.1 not found)");
	/* cuGetProcAddress is itself versioned: _v2 (CUDA 12) takes a status. */
	if (!(sym = dlsym(api->lib, "cuGetProcAddress_v2"))) {
		dlclose(api->lib);
		api->lib = NULL;
		return kt_err_set(err, KT_ENOGPU,
				  "NVIDIA driver too old (libcuda.so.1 has no cuGetProcAddress_v2; "
				  "CUDA 12 or newer needed)");
	}
	memcpy(&gpa, &sym, sizeof(gpa));
	for (i = 0; i < sizeof(cu_syms) / sizeof(cu_syms[0]); i++) {
		CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
		void *fn = NULL;
		CUresult r = gpa(cu_syms[i].name, &fn, cu_syms[i].version,
				 CU_GET_PROC_ADDRESS_DEFAULT, &found);

		if ((r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS) &&
		    cu_syms[i].alt_version) {
			fn = NULL;
			r = gpa(cu_syms[i].name, &fn, cu_syms[i].alt_version,
				CU_GET_PROC_ADDRESS_DEFAULT, &found);
		}
		if (r == CUDA_ERROR_STUB_LIBRARY)
			return kt_err_set(err, KT_ENOGPU, "no NVIDIA driver (libcuda.so.1 is the "
					  "CUDA toolkit's stub library)");
		if ((r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS) &&
		    cu_syms[i].optional)
			continue;
		if (r != CUDA_SUCCESS || !fn || found != CU_GET_PROC_ADDRESS_SUCCESS) {
			/* NEEDSWORK: libcuda stays loaded (dlclose of the driver
			 * is unsafe once it has started threads); the child exits. */
			return kt_err_set(err, KT_ENOGPU,
					  "NVIDIA driver lacks %s (version %d): error %d, status %d",
					  cu_syms[i].name, cu_syms[i].version, (int)r, (int)found);
		}
		memcpy((char *)api + cu_syms[i].off, &fn, sizeof(fn));
	}
	return 0;
}

void cu_api_describe(const struct cu_api *api, CUresult r, char *buf, size_t len)
{
	const char *name = NULL, *text = NULL;

	if (api->GetErrorName)
		api->GetErrorName(r, &name);
	if (api->GetErrorString)
		api->GetErrorString(r, &text);
	snprintf(buf, len, "%s (%d)%s%s", name ? name : "CUDA error", (int)r, text ? ": " : "",
		 text ? text : "");
}

int cu_result_sticky(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_TENSOR_MEMORY_LEAK:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_UNKNOWN:
		return 1;
	default:
		return 0;
	}
}

CUresult cu_api_launch(const struct cu_api *api, CUfunction fn, const unsigned grid[3],
		       const unsigned block[3], unsigned smem, CUstream stream, void **params,
		       int cooperative, int pdl)
{
	CUlaunchAttribute at;
	CUlaunchConfig cfg;

	if (cooperative)
		return api->LaunchCooperativeKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
						    block[2], smem, stream, params);
	if (!pdl || !api->LaunchKernelEx)
		return api->LaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
					 smem, stream, params, NULL);
	memset(&at, 0, sizeof(at));
	memset(&cfg, 0, sizeof(cfg));
	at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	at.value.programmaticStreamSerializationAllowed = 1;
	cfg.gridDimX = grid[0];
	cfg.gridDimY = grid[1];
	cfg.gridDimZ = grid[2];
	cfg.blockDimX = block[0];
	cfg.blockDimY = block[1];
	cfg.blockDimZ = block[2];
	cfg.sharedMemBytes = smem;
	cfg.hStream = stream;
	cfg.attrs = &at;
	cfg.numAttrs = 1;
	return api->LaunchKernelEx(&cfg, fn, params, NULL);
}
