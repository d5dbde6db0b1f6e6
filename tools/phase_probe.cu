/*
 * phase_probe.cu -- what a one-kernel, three-phase BLAST layer could cost at
 * llama1b q/o (2048 -> 2048, b 16, r 256) and N 1024, before any math: one
 * persistent CTA per SM walks stage 1's, the mixer's and stage 3's tiles,
 * with a grid barrier between phases, moving each phase's real bytes (x, V
 * in and z out; z in and w out; w, U in and y out, bf16) and no FLOPs.
 * z and w stay in L2 (8 MiB each). Not part of ktune; built and run by hand
 * on the GPU machine:
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90a -o build-dev/phase_probe tools/phase_probe.cu
 *   build-dev/phase_probe
 *
 * Timed as the tuner times a candidate (tuner/cuda.c): per repetition an L2
 * flush (a memset of twice the L2), a start event, the kernel, a stop event;
 * the median of 50. The rows take phases and barriers away, so that the
 * launch, each phase and the barriers can be told apart, and one row times
 * three separate kernels (one launch a phase) for comparison. Stage 1 and
 * stage 3 are ~1.07 GFLOP each, math that would have to hide under these
 * copies. The row without barriers lets the phases race each other for the
 * same lines: it bounds nothing. The rows' figures on the H200:
 * bench/NOTES-linear.md, blast llama1b.
 *
 * Loads are 16-byte vectors, each phase's all issued before any is used
 * (16 to 24 a thread: 64 to 96 KiB in flight a CTA; .nc for x, V, U, .cg
 * for z and w, written by other SMs in the phase before), U before the
 * barriers; each CTA folds what it read into what it writes, so that no
 * load is dead. So the rows are about the least such a kernel's copies and
 * barriers can take, not what TMA would take.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

#define N 1024		/* tokens */
#define NIN 2048	/* in = out */
#define B 16		/* blocks */
#define R 256		/* rank */
#define NB (NIN / B)	/* 128: in/blocks = out/blocks */
#define UNITS 128	/* tiles per phase */
#define THREADS 256
#define P1 1
#define P2 2
#define P3 4
#define BARRIERS 8

struct bufs {
	const uint4 *x, *v, *u;	/* x (N, NIN), V (B, R, NB), U (B, NB, R) */
	uint4 *z, *w, *y;	/* z, w (B, N, R), y (N, NIN) */
	unsigned *count;	/* the grid barrier's arrivals (zeroed per launch) */
};

/* vector e of a region of rows of vpr 16-byte vectors, pitch bytes apart */
__device__ __forceinline__ const uint4 *at(const void *base, long pitch, int vpr, int e)
{
	return (const uint4 *)((const char *)base + (long)(e / vpr) * pitch) + e % vpr;
}

/* K vectors a thread (vector threadIdx.x + k * THREADS of the region),
 * all loads issued before any is used */
template <int K, bool NC>
__device__ __forceinline__ void load(uint4 (&v)[K], const void *base, long pitch, int vpr)
{
#pragma unroll
	for (int k = 0; k < K; k++) {
		const uint4 *p = at(base, pitch, vpr, threadIdx.x + k * THREADS);

		v[k] = NC ? __ldg(p) : __ldcg(p);
	}
}

template <int K>
__device__ __forceinline__ void fold(const uint4 (&v)[K], uint4 &acc)
{
#pragma unroll
	for (int k = 0; k < K; k++) {
		acc.x ^= v[k].x;
		acc.y ^= v[k].y;
		acc.z ^= v[k].z;
		acc.w ^= v[k].w;
	}
}

template <int K>
__device__ __forceinline__ void store(const uint4 (&v)[K], void *base, long pitch, int vpr,
				      uint4 acc)
{
#pragma unroll
	for (int k = 0; k < K; k++) {
		uint4 o = v[k];

		o.x ^= acc.x;
		*(uint4 *)at(base, pitch, vpr, threadIdx.x + k * THREADS) = o;
	}
}

/* every CTA arrives; all wait until k * gridDim.x have */
__device__ void grid_barrier(unsigned *count, unsigned k)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned seen;

		__threadfence();
		atomicAdd(count, 1u);
		do {
			asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n"
				     : "=r"(seen)
				     : "l"(count)
				     : "memory");
		} while (seen < k * gridDim.x);
	}
	__syncthreads();
}

__global__ void __launch_bounds__(THREADS, 1) phases(struct bufs b, int mode)
{
	const int u = blockIdx.x;
	const bool work = u < UNITS;
	uint4 acc = make_uint4(u, 0, 0, 0), up[16];
	unsigned k = 0;

	if ((mode & P1) && work) {
		/* (token tile t of 128, block j): V_j 256 x 128 and the x tile
		 * 128 x 128 in (16 + 8 vectors a thread); z[j][t] 128 x 256
		 * out (the x vectors twice) */
		const int t = u / B, j = u % B;
		uint4 vv[16], xv[8];

		load<16, true>(vv, (const char *)b.v + (long)j * R * NB * 2, NB * 2, NB / 8);
		load<8, true>(xv, (const char *)b.x + ((long)t * 128 * NIN + j * NB) * 2, NIN * 2,
			      NB / 8);
		fold(vv, acc);
		fold(xv, acc);
		char *zd = (char *)b.z + ((long)j * N + t * 128) * R * 2;
		store(xv, zd, R * 2, NB / 8, acc);
		store(xv, zd + NB * 2, R * 2, NB / 8, acc);
	}
	/* stage 3's weights do not wait for the mixer: U_i in before the
	 * barriers, as a dependent launch would prefetch it */
	if ((mode & P3) && work)
		load<16, true>(up, (const char *)b.u + (long)(u % B) * NB * R * 2, R * 2, R / 8);
	if (mode & BARRIERS)
		grid_barrier(b.count, ++k);
	if ((mode & P2) && work) {
		/* (token tile t of 64, rank slice c of 32): z[j][t][c] for
		 * every j in, w[i][t][c] for every i out: 16 x 64 rows of 64
		 * bytes, rows j * N + t * 64 + row of z's (b * N, r) */
		const int t = u / 8, c = u % 8;
		uint4 zv[16];

		/* rows e / 4 = j * 64 + row: pitch R * 2 within a block, N * R * 2 between */
#pragma unroll
		for (int q = 0; q < 16; q++) {
			const int e = threadIdx.x + q * THREADS, row = e / 4, j = row / 64;
			const long off = ((long)j * N + t * 64 + row % 64) * R * 2 + c * 64 + (e % 4) * 16;

			zv[q] = __ldcg((const uint4 *)((const char *)b.z + off));
		}
		fold(zv, acc);
#pragma unroll
		for (int q = 0; q < 16; q++) {
			const int e = threadIdx.x + q * THREADS, row = e / 4, j = row / 64;
			const long off = ((long)j * N + t * 64 + row % 64) * R * 2 + c * 64 + (e % 4) * 16;
			uint4 o = zv[q];

			o.x ^= acc.x;
			*(uint4 *)((char *)b.w + off) = o;
		}
	}
	if (mode & BARRIERS)
		grid_barrier(b.count, ++k);
	if ((mode & P3) && work) {
		/* (token tile t of 128, block i): w[i][t] 128 x 256 in (16
		 * vectors a thread), U_i folded; y tile 128 x 128 out */
		const int t = u / B, i = u % B;
		uint4 wv[16], yv[8];

		load<16, false>(wv, (const char *)b.w + ((long)i * N + t * 128) * R * 2, R * 2, R / 8);
		fold(up, acc);
#pragma unroll
		for (int q = 0; q < 8; q++) {
			yv[q] = wv[q];
			yv[q].y ^= wv[q + 8].y;
		}
		fold(wv, acc);
		store(yv, (char *)b.y + ((long)t * 128 * NIN + i * NB) * 2, NIN * 2, NB / 8, acc);
	}
	/* what was read reaches memory: one word a thread past y's end */
	if (acc.x == 0x12345678u && acc.y == 0x9abcdef0u)
		((uint4 *)b.y)[(long)N * NIN / 8 + blockIdx.x * THREADS + threadIdx.x] = acc;
}

static int cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

#define REPS 50

/* median us of REPS [flush, start, launches, stop]; launches: one kernel
 * with mode, or (split) one kernel per phase of mode */
static float timeit(struct bufs *b, int grid, int mode, int split, void *flush, size_t flush_b)
{
	cudaEvent_t e0, e1;
	float t[REPS];

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int r = -3; r < REPS; r++) {
		CK(cudaMemsetAsync(b->count, 0, 4));
		CK(cudaMemsetAsync(flush, r & 0xff, flush_b));
		CK(cudaEventRecord(e0));
		if (split) {
			for (int p = P1; p <= P3; p <<= 1)
				if (mode & p)
					phases<<<grid, THREADS>>>(*b, p);
		} else if (mode & BARRIERS) {
			/* co-resident CTAs for the spin barrier */
			void *args[] = {b, &mode};

			CK(cudaLaunchCooperativeKernel((void *)phases, grid, THREADS, args, 0, 0));
		} else {
			phases<<<grid, THREADS>>>(*b, mode);
		}
		CK(cudaGetLastError());
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		if (r >= 0)
			CK(cudaEventElapsedTime(&t[r], e0, e1));
	}
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	qsort(t, REPS, sizeof(t[0]), cmp);
	return t[REPS / 2] * 1000.f;
}

int main(void)
{
	struct bufs b;
	cudaDeviceProp prop;
	void *flush;
	size_t xb = (size_t)N * NIN * 2, vb = (size_t)B * R * NB * 2, zb = (size_t)B * N * R * 2;
	uint4 *x, *v, *u, *z, *w, *y;
	int sms, per_sm = 0;

	CK(cudaGetDeviceProperties(&prop, 0));
	sms = prop.multiProcessorCount;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, phases, THREADS, 0));
	if (per_sm < 1 || sms < UNITS) {
		fprintf(stderr, "phase_probe: needs %d co-resident CTAs (%d SMs x %d)\n", UNITS, sms,
			per_sm);
		return 1;
	}
	CK(cudaMalloc(&x, xb));
	CK(cudaMalloc(&v, vb));
	CK(cudaMalloc(&u, vb));
	CK(cudaMalloc(&z, zb));
	CK(cudaMalloc(&w, zb));
	CK(cudaMalloc(&y, xb + (size_t)sms * THREADS * 16));
	CK(cudaMalloc(&b.count, 4));
	CK(cudaMemset(x, 1, xb));
	CK(cudaMemset(v, 2, vb));
	CK(cudaMemset(u, 3, vb));
	CK(cudaMalloc(&flush, (size_t)prop.l2CacheSize * 2));
	b.x = x;
	b.v = v;
	b.u = u;
	b.z = z;
	b.w = w;
	b.y = y;

	printf("%s, %d SMs, L2 %d MiB; llama1b q/o N%d: x, y %zu KiB, V, U %zu KiB, z, w %zu KiB\n",
	       prop.name, sms, prop.l2CacheSize >> 20, N, xb >> 10, vb >> 10, zb >> 10);
	printf("%-44s %8s\n", "what (one CTA per SM, L2 flushed)", "us");
	static const struct {
		const char *what;
		int mode, split;
	} rows[] = {
		{"empty kernel", 0, 0},
		{"stage 1's bytes (x, V in, z out)", P1, 0},
		{"the mixer's bytes (z in, w out)", P2, 0},
		{"stage 3's bytes (w, U in, y out)", P3, 0},
		{"two grid barriers, no bytes", BARRIERS, 0},
		{"three phases, no barriers (they race: no bound)", P1 | P2 | P3, 0},
		{"three phases, two grid barriers", P1 | P2 | P3 | BARRIERS, 0},
		{"three kernels, one a phase", P1 | P2 | P3, 1},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		printf("%-44s %8.2f\n", rows[i].what,
		       timeit(&b, sms, rows[i].mode, rows[i].split, flush,
			      (size_t)prop.l2CacheSize * 2));
	CK(cudaFree(x));
	CK(cudaFree(v));
	CK(cudaFree(u));
	CK(cudaFree(z));
	CK(cudaFree(w));
	CK(cudaFree(y));
	CK(cudaFree(b.count));
	CK(cudaFree(flush));
	return 0;
}
