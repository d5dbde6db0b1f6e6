/*
 * cu_api.h -- the CUDA driver API, reached with dlopen("libcuda.so.1") and
 * cuGetProcAddress, so that ktune starts (and CI runs) where no driver is
 * installed. The tuner's worker child and the runtime (libktune) use it.
 *
 * Each pointer is declared with the PFN_<name>_v<version> typedef of
 * <cudaTypedefs.h> that matches the version requested from
 * cuGetProcAddress: a name asked for at the newest version can come back
 * with a newer signature (cuCtxSynchronize at 13000 takes a context).
 */
#ifndef KT_CU_API_H
#define KT_CU_API_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "../util/err.h"

struct cu_api {
	void *lib;		/* dlopen handle of libcuda.so.1 */
	PFN_cuInit_v2000 Init;
	PFN_cuDriverGetVersion_v2020 DriverGetVersion;
	PFN_cuGetErrorName_v6000 GetErrorName;
	PFN_cuGetErrorString_v6000 GetErrorString;
	PFN_cuDeviceGetCount_v2000 DeviceGetCount;
	PFN_cuDeviceGet_v2000 DeviceGet;
	PFN_cuDeviceGetName_v2000 DeviceGetName;
	PFN_cuDeviceGetUuid_v11040 DeviceGetUuid;
	PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
	PFN_cuDevicePrimaryCtxRetain_v7000 DevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxRelease_v11000 DevicePrimaryCtxRelease;
	PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
	PFN_cuCtxSynchronize_v2000 CtxSynchronize;
	PFN_cuStreamCreate_v2000 StreamCreate;
	PFN_cuStreamSynchronize_v2000 StreamSynchronize;
	PFN_cuStreamDestroy_v4000 StreamDestroy;
	PFN_cuMemAlloc_v3020 MemAlloc;
	PFN_cuMemFree_v3020 MemFree;
	PFN_cuMemcpyHtoD_v3020 MemcpyHtoD;
	PFN_cuMemcpyDtoH_v3020 MemcpyDtoH;
	PFN_cuMemcpyDtoDAsync_v3020 MemcpyDtoDAsync;
	PFN_cuMemsetD8Async_v3020 MemsetD8Async;
	PFN_cuMemsetD16Async_v3020 MemsetD16Async;
	PFN_cuMemsetD32Async_v3020 MemsetD32Async;
	PFN_cuModuleLoadData_v2000 ModuleLoadData;
	PFN_cuModuleUnload_v2000 ModuleUnload;
	PFN_cuModuleGetFunction_v2000 ModuleGetFunction;
	PFN_cuFuncSetAttribute_v9000 FuncSetAttribute;
	PFN_cuLaunchKernel_v4000 LaunchKernel;
	PFN_cuLaunchCooperativeKernel_v9000 LaunchCooperativeKernel;
	PFN_cuLaunchKernelEx_v11060 LaunchKernelEx;	/* optional: NULL on old drivers */
	PFN_cuEventCreate_v2000 EventCreate;
	PFN_cuEventRecord_v2000 EventRecord;
	PFN_cuEventSynchronize_v2000 EventSynchronize;
	PFN_cuEventElapsedTime_v2000 EventElapsedTime;	/* same signature as _v12080 */
	PFN_cuEventDestroy_v4000 EventDestroy;
	/* the runtime's: the caller's context and capture state */
	PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
	PFN_cuCtxGetDevice_v2000 CtxGetDevice;
	PFN_cuCtxPushCurrent_v4000 CtxPushCurrent;
	PFN_cuCtxPopCurrent_v4000 CtxPopCurrent;
	PFN_cuStreamGetCtx_v9020 StreamGetCtx;
	PFN_cuStreamIsCapturing_v10000 StreamIsCapturing;
	/* Optional (NULL when the driver lacks it): CUDA 12.0+, sm_90 maps. */
	PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncodeTiled;
};

/* One kernel argument's value, which the launch's params[] points at. */
union cu_arg {
	CUdeviceptr p;
	int i32;
	long long i64;
	float f;
};

/* Loads the driver and resolves every entry point (does not call cuInit);
 * an optional one the driver lacks is left NULL.
 * KT_ENOGPU "no NVIDIA driver (libcuda.so.1 not found)" when it is absent. */
int cu_api_load(struct cu_api *api, struct kt_err *err);
/* "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access ..." */
void cu_api_describe(const struct cu_api *api, CUresult r, char *buf, size_t len);
/* 1 when r leaves the context unusable (illegal address, launch failure,
 * unknown error, ...): only a new process gets a working one. */
int cu_result_sticky(CUresult r);
/* Launches fn (params: its arguments, as cuLaunchKernel takes them) on
 * stream: cooperatively when cooperative (CTAs that wait for each other:
 * the driver refuses a grid that cannot be resident all at once), else
 * as a programmatic dependent launch when pdl and the driver has
 * cuLaunchKernelEx (the kernel must wait for its predecessor before
 * touching memory), else plainly. Returns the driver's result. */
CUresult cu_api_launch(const struct cu_api *api, CUfunction fn, const unsigned grid[3],
		       const unsigned block[3], unsigned smem, CUstream stream, void **params,
		       int cooperative, int pdl);

#endif
