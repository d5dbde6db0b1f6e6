// probe.cu -- the smallest template: used by `ktune devices` to show that
// NVRTC works on this machine, and by the jit tests. PROBE_BROKEN plants a
// compile error on purpose (the tests check that its log is kept).
#include <cuda_bf16.h>

#ifndef PROBE_SCALE
#define PROBE_SCALE 2.0f
#endif

extern "C" __global__ void kt_probe(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = __float2bfloat16(__bfloat162float(x[i]) * PROBE_SCALE);
#ifdef PROBE_BROKEN
	this_is_not_cuda;
#endif
}
