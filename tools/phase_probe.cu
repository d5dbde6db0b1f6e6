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
 * stage 3 are ~1.07 GFLOP each: at ~600 TFLOPS another ~3.6 us of math
 * would have to hide under these copies.
 *
 * Loads are 16-byte vectors, eight in flight a thread (.nc for x, V, U; .cg
 * for z and w, written by other SMs in the phase before); each CTA folds
 * what it read into what it writes, so that no load is dead.
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

/* copies nrows rows of rowb bytes (16-byte multiple) from src (row pitch
 * sp bytes) into dst (pitch dp) and, if not null, dst2 (the same pitch),
 * src rows folded with acc; eight vectors in flight a thread */
template <bool NC>
__device__ void move(const char *src, long sp, char *dst, long dp, int nrows, int rowb,
		     uint4 &acc, char *dst2 = nullptr)
{
	const int vpr = rowb / 16, total = nrows * vpr;

	for (int base = threadIdx.x; base < total; base += 8 * THREADS) {
		uint4 v[8];

#pragma unroll
		for (int k = 0; k < 8; k++) {
			const int e = base + k * THREADS;

			if (e < total) {
				const uint4 *p = (const uint4 *)(src + (long)(e / vpr) * sp) + e % vpr;

				v[k] = NC ? __ldg(p) : __ldcg(p);
			} else {
				v[k] = make_uint4(0, 0, 0, 0);
			}
		}
#pragma unroll
		for (int k = 0; k < 8; k++) {
			const int e = base + k * THREADS;

			acc.x ^= v[k].x;
			acc.y ^= v[k].y;
			acc.z ^= v[k].z;
			acc.w ^= v[k].w;
			if (dst && e < total)
				*((uint4 *)(dst + (long)(e / vpr) * dp) + e % vpr) = v[k];
			if (dst2 && e < total)
				*((uint4 *)(dst2 + (long)(e / vpr) * dp) + e % vpr) = v[k];
		}
	}
}

/* reads nrows x rowb bytes, folds them into acc, writes nothing */
template <bool NC>
__device__ void take(const char *src, long sp, int nrows, int rowb, uint4 &acc)
{
	move<NC>(src, sp, nullptr, 0, nrows, rowb, acc);
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
	uint4 acc = make_uint4(u, 0, 0, 0);
	unsigned k = 0;

	if ((mode & P1) && work) {
		/* (token tile t of 128, block j): x tile 128 x 128, V_j 256 x
		 * 128 in; z[j][t] 128 x 256 out (x's rows stand for it) */
		const int t = u / B, j = u % B;
		const char *xs = (const char *)b.x + ((long)t * 128 * NIN + j * NB) * 2;
		char *zd = (char *)b.z + ((long)j * N + t * 128) * R * 2;

		take<true>((const char *)b.v + (long)j * R * NB * 2, NB * 2, R, NB * 2, acc);
		move<true>(xs, NIN * 2, zd, R * 2, 128, NB * 2, acc, zd + NB * 2);
	}
	if (mode & BARRIERS)
		grid_barrier(b.count, ++k);
	if ((mode & P2) && work) {
		/* (token tile t of 64, rank slice c of 32): z[j][t][c] for
		 * every j in, w[i][t][c] for every i out */
		const int t = u / 8, c = u % 8;

		for (int j = 0; j < B; j++) {
			const long off = ((long)j * N + t * 64) * R * 2 + c * 64;

			move<false>((const char *)b.z + off, R * 2, (char *)b.w + off, R * 2, 64, 64,
				    acc);
		}
	}
	if (mode & BARRIERS)
		grid_barrier(b.count, ++k);
	if ((mode & P3) && work) {
		/* (token tile t of 128, block i): w[i][t] 128 x 256 and U_i
		 * 128 x 256 in; y tile 128 x 128 out */
		const int t = u / B, i = u % B;

		take<true>((const char *)b.u + (long)i * NB * R * 2, R * 2, NB, R * 2, acc);
		move<false>((const char *)b.w + ((long)i * N + t * 128) * R * 2, R * 2,
			    (char *)b.y + ((long)t * 128 * NIN + i * NB) * 2, NIN * 2, 128, NB * 2,
			    acc);
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
		{"three phases, no barriers (races: a bound)", P1 | P2 | P3, 0},
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
