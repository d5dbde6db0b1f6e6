/*
 * planted.cu -- kernels that fail on purpose, for the `dense` family's
 * planted variants (visited only when a sweep asks for planted candidates).
 * They prove on a real GPU that a fault or a hang costs one candidate, not
 * the sweep.
 *
 *   planted_fault(y)  stores through an address no allocation can have,
 *                     which raises a real illegal-address fault and poisons
 *                     the context.
 *   planted_hang(y)   spins on a volatile shared flag that nothing ever
 *                     changes; only killing the worker ends it.
 * Both take the output buffer so their signature matches a real candidate.
 */
#include <cuda_bf16.h>

extern "C" __global__ void planted_fault(__nv_bfloat16 *y)
{
	/* far beyond any allocation, in the unmapped part of the address space */
	volatile float *bad = (volatile float *)((unsigned long long)(size_t)y ^ (0x7ull << 44));

	bad[threadIdx.x] = 1.0f;
	y[threadIdx.x] = __float2bfloat16(0.f);
}

extern "C" __global__ void planted_hang(__nv_bfloat16 *y)
{
	__shared__ volatile int flag;

	if (threadIdx.x == 0)
		flag = 0;
	__syncthreads();
	/* flag is volatile: every pass re-reads shared memory, and nothing
	 * writes it again */
	while (flag == 0)
		;
	y[threadIdx.x] = __float2bfloat16(0.f);
}
