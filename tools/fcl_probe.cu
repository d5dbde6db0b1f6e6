/*
 * fcl_probe.cu -- dev harness for templates/blast_fused.cu (blast's fused_cl;
 * not part of ktune): times fused_blast_cl at one shape and tile, built with
 * FB_SKIP to leave phases out, so that a set of builds says what each phase
 * costs. Results of a skipping build are wrong by design; ktune's sweeps
 * verify the real kernel.
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Itemplates \
 *        -DFB_B=16 -DFB_R=256 -DFB_NB=128 -DFB_MB=128 -DFB_T=32 -DFB_G=1 \
 *        -DFB_STAGES=2 -DFB_RESIDENT=1 [-DFB_SKIP=k] \
 *        -o build-dev/fcl_probe tools/fcl_probe.cu
 *   build-dev/fcl_probe [tokens [clusters [reps]]]
 *
 * clusters: 0 (default) = every token tile (streaming) or 7 (resident, what
 * the H200 holds of 16-CTA clusters). Prints the median of reps launches
 * (events around each, warm L2). What it showed (launch and weights
 * against the cost of a tile, the exchange and the barrier): bench/
 * NOTES-linear.md, blast llama1b.
 */
#include "../templates/blast_fused.cu"

#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "probe.h"

/* deterministic values in (-a, a) */
__global__ void fill(__nv_bfloat16 *p, long long n, float a, unsigned seed)
{
	for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		unsigned h = (unsigned)i * 2654435761u ^ seed;

		h ^= h >> 13;
		h *= 0x5bd1e995u;
		h ^= h >> 15;
		p[i] = __float2bfloat16_rn(a * ((float)(h & 0xffff) / 32768.f - 1.f));
	}
}

int main(int argc, char **argv)
{
	using namespace kfb;
	const int N = argc > 1 ? atoi(argv[1]) : 1024;
	const int tiles = (N + T - 1) / T;
	int ncl = argc > 2 ? atoi(argv[2]) : 0;
	const int reps = argc > 3 ? atoi(argv[3]) : 50;
	__nv_bfloat16 *x, *V, *U, *St, *y;
	cudaEvent_t e0, e1;
	std::vector<float> ms;

	if (ncl <= 0)
		ncl = RES ? std::min(tiles, 7) : tiles;
	CK(cudaMalloc(&x, sizeof(*x) * (size_t)N * N_IN));
	CK(cudaMalloc(&V, sizeof(*V) * (size_t)B * R * NB));
	CK(cudaMalloc(&U, sizeof(*U) * (size_t)B * MB * R));
	CK(cudaMalloc(&St, sizeof(*St) * (size_t)R * 256));
	CK(cudaMalloc(&y, sizeof(*y) * (size_t)N * M_OUT));
	fill<<<1024, 256>>>(x, (long long)N * N_IN, 1.f, 1);
	fill<<<1024, 256>>>(V, (long long)B * R * NB, 0.15f, 2);
	fill<<<1024, 256>>>(U, (long long)B * MB * R, 0.1f, 3);
	fill<<<1024, 256>>>(St, (long long)R * 256, 0.4f, 4);
	CK(cudaGetLastError());
	CK(cudaFuncSetAttribute(fused_blast_cl, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
	CK(cudaFuncSetAttribute(fused_blast_cl, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < reps + 5; i++) {
		float t;

		CK(cudaEventRecord(e0));
		fused_blast_cl<<<ncl * C, THREADS, SMEM>>>(x, V, U, St, y, N);
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaGetLastError());
		CK(cudaEventElapsedTime(&t, e0, e1));
		if (i >= 5)
			ms.push_back(t);
	}
	std::sort(ms.begin(), ms.end());
	printf("fused_blast_cl b%d r%d nb%d mb%d T%d G%d resident %d skip %d: N %d, %d clusters "
	       "of %d, smem %d: %.2f us\n",
	       B, R, NB, MB, T, G, RES, FB_SKIP, N, ncl, C, SMEM, 1000.f * ms[ms.size() / 2]);
	return 0;
}
