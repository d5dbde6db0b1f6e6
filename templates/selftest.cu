/*
 * selftest.cu -- kernels of the hidden `selftest` family (kernels/selftest.c):
 * y = 2x on bf16, plus kernels that are wrong, fault or hang on purpose so
 * the worker's failure handling can be proven on a real GPU.
 *
 * bf16 is handled as raw bits (no cuda_bf16.h) so this template needs no
 * include path. Parameter: UNROLL, elements per thread.
 */
#ifndef UNROLL
#define UNROLL 1
#endif

__device__ __forceinline__ float st_load(const unsigned short *p, int i)
{
	return __uint_as_float((unsigned)p[i] << 16);
}

/* float -> bf16, round to nearest even (inputs are finite). */
__device__ __forceinline__ void st_store(unsigned short *p, int i, float v)
{
	unsigned u = __float_as_uint(v);

	p[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The GPU reference: one element per thread, obviously correct. */
extern "C" __global__ void selftest_ref(const unsigned short *x, unsigned short *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		st_store(y, i, 2.0f * st_load(x, i));
}

extern "C" __global__ void selftest_ok(const unsigned short *x, unsigned short *y, int n)
{
	int base = blockIdx.x * blockDim.x * UNROLL + threadIdx.x;

#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		int i = base + u * blockDim.x;

		if (i < n)
			st_store(y, i, 2.0f * st_load(x, i));
	}
}

extern "C" __global__ void selftest_wrong(const unsigned short *x, unsigned short *y, int n)
{
	int base = blockIdx.x * blockDim.x * UNROLL + threadIdx.x;

#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		int i = base + u * blockDim.x;

		if (i < n)
			st_store(y, i, 2.0f * st_load(x, i) + 1.0f);
	}
}

/* Writes through a wild pointer far outside any allocation: an illegal
 * address error that poisons the context. volatile keeps the store. */
extern "C" __global__ void selftest_fault(const unsigned short *x, unsigned short *y, int n)
{
	volatile unsigned short *wild =
		(volatile unsigned short *)((unsigned long long)y ^ (1ull << 46));

	wild[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

/* Spins on a flag nobody sets: a real hang. volatile forces the re-read. */
extern "C" __global__ void selftest_hang(const unsigned short *x, unsigned short *y, int n)
{
	__shared__ volatile int flag;

	if (threadIdx.x == 0)
		flag = 0;
	__syncthreads();
	while (flag == 0)
		;
	y[0] = x[0];
}
