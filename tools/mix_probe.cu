/*
 * mix_probe.cu -- dev harness for templates/blast.cu's mixers (not part of
 * ktune): times blast_mix_tcp (tensor cores, what tcmix runs) and
 * blast_mix (CUDA cores) at BLAST's mixing shapes beside two memory
 * references that do no math -- cudaMemcpy of z into w (the same 2 x b*N*r
 * bytes, streamed) and tile_copy (blast_mix_tcp's own loads, parks and
 * stores on its grid, the mma left out) -- each cold (L2 flushed before
 * every repetition) and warm (z rewritten by a kernel just before, as
 * stage 1 leaves it). blast_mix_tcp's w is checked against blast_mix's
 * (both fp32 sums of the same bf16 products).
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Itemplates \
 *        -o build-dev/mix_probe tools/mix_probe.cu
 *   build-dev/mix_probe [reps] [tc]     (tc: blast_mix_tcp only)
 *
 * Build with -DTP_MINB=4 to try four CTAs per SM (kernels/blast.c plans
 * TP_CTAS_PER_SM). What it measured (the mixer against cudaMemcpy of its
 * bytes): bench/NOTES-linear.md and docs/families/blast.md.
 */
#define MIX_B 16
#define MIX_TC 1
#include "../templates/blast.cu"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <string.h>
#include <vector>

#include "probe.h"

/* blast_mix_tcp's memory traffic without the math: its own ring of
 * cp.async tile copies and its stores on its grid, nothing between them --
 * w gets z's blocks in slot order, a traffic reference, not a copy. */
extern "C" __global__ void __launch_bounds__(128, TP_MINB)
tile_copy(const __nv_bfloat16 *z, __nv_bfloat16 *w, int N, int r)
{
	extern __shared__ __align__(16) unsigned char tc_smem[];
	const int R = (r + TC_R - 1) / TC_R, tid = threadIdx.x;
	const tp_work a = tp_assign(blockIdx.x, gridDim.x, R);
	const i64 plane = (i64)N * r;

	for (int rt = a.rt; rt < R; rt += a.rstep) {
		const int c0 = rt * TC_R;

		tp_walk(kt_smem_u32(tc_smem), z, plane, N, r, c0, tid, a.y, a.gy,
			[&](unsigned sz, int tt) { tp_store(sz, w, plane, N, r, tt * TP_T, c0, tid, 0ull); });
	}
}

/* Rewrites every z element (as stage 1 leaves z in L2 before the mixer). */
extern "C" __global__ void touch(__nv_bfloat16 *z, i64 n, float k)
{
	for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < n; e += (i64)gridDim.x * blockDim.x)
		z[e] = __float2bfloat16_rn(k * (float)((e * 2654435761ll) % 2001 - 1000) / 1000.f);
}

static unsigned short h_bf16(float f)
{
	unsigned u;

	memcpy(&u, &f, 4);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* blast_mix_tcp's grid as kernels/blast.c plans it (mix_tc_launch): the
 * CTAs that fit at once (TP_MINB per SM), but no fewer than two (rank tile,
 * token tile) units per CTA */
static int tp_ctas(int N, int r, int sms)
{
	const long units = (long)((N + TP_T - 1) / TP_T) * ((r + TC_R - 1) / TC_R);
	const long slots = (long)TP_MINB * sms, c = (units + 1) / 2;

	return (int)(c < slots ? c : slots);
}

int main(int argc, char **argv)
{
	const int reps = argc > 1 ? atoi(argv[1]) : 20;
	const int shapes[][2] = {{1024, 1024}, {1024, 256}, {16384, 1024}};
	__nv_bfloat16 *z, *w, *w2, *S, *St;
	float *S32;
	char *flush;
	const size_t flush_bytes = 256u << 20;
	cudaEvent_t e0, e1;

	int sms = 0;

	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaFuncSetAttribute(blast_mix_tcp, cudaFuncAttributeMaxDynamicSharedMemorySize, TP_SMEM));
	CK(cudaFuncSetAttribute(tile_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, TP_SMEM));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaMalloc(&flush, flush_bytes));
	printf("%-14s %-10s %-5s %9s %9s\n", "N x r", "kernel", "L2", "us", "TB/s");
	for (auto &sh : shapes) {
		const int N = sh[0], r = sh[1];
		const i64 nz = (i64)16 * N * r, ns = (i64)16 * 16 * r;
		std::vector<unsigned short> hs(ns);

		CK(cudaMalloc(&z, nz * 2));
		CK(cudaMalloc(&w, nz * 2));
		CK(cudaMalloc(&w2, nz * 2));
		CK(cudaMalloc(&S, ns * 2));
		CK(cudaMalloc(&St, (i64)r * 256 * 2));
		CK(cudaMalloc(&S32, ns * 4));
		for (i64 e = 0; e < ns; e++)
			hs[e] = h_bf16((float)((e * 7919) % 201 - 100) / 173.f);
		CK(cudaMemcpy(S, hs.data(), ns * 2, cudaMemcpyHostToDevice));
		touch<<<1024, 256>>>(z, nz, 1.f);
		blast_s_to_t16<<<1024, 256>>>(S, St, r);
		blast_s_to_f32<<<1024, 256>>>(S, S32, ns);
		CK(cudaDeviceSynchronize());
		/* check: tensor cores vs CUDA cores */
		blast_mix_tcp<<<tp_ctas(N, r, sms), 128, TP_SMEM>>>(z, St, w,
											      N, r);
		blast_mix<<<dim3((N + 31) / 32, (r / MIX_RV + 7) / 8), dim3(32, 8)>>>(z, S32, w2, N, r);
		CK(cudaDeviceSynchronize());
		{
			std::vector<unsigned short> a(nz), b(nz);
			double num = 0, den = 0;

			CK(cudaMemcpy(a.data(), w, nz * 2, cudaMemcpyDeviceToHost));
			CK(cudaMemcpy(b.data(), w2, nz * 2, cudaMemcpyDeviceToHost));
			for (i64 e = 0; e < nz; e++) {
				unsigned ua = (unsigned)a[e] << 16, ub = (unsigned)b[e] << 16;
				float fa, fb;

				memcpy(&fa, &ua, 4);
				memcpy(&fb, &ub, 4);
				num += ((double)fa - fb) * ((double)fa - fb);
				den += (double)fb * fb;
			}
			printf("%5d x %-6d w(tcp) vs w(cuda cores): rel L2 %.2e%s\n", N, r, sqrt(num / den),
			       sqrt(num / den) < 1e-2 ? "" : "  WRONG");
		}
		for (int k = 0; k < 4; k++)
			for (int warm = 0; warm < 2; warm++) {
				if (argc > 2 && k != 0)	/* `mix_probe N tc`: blast_mix_tcp only */
					continue;
				std::vector<float> t;
				const char *name[] = {"mix_tcp", "mix_cuda", "tile_copy", "memcpy"};

				for (int it = 0; it < reps + 2; it++) {
					float ms;

					CK(cudaMemsetAsync(flush, it & 255, flush_bytes));
					if (warm)
						touch<<<1024, 256>>>(z, nz, 1.f);
					CK(cudaEventRecord(e0));
					if (k == 0)
						blast_mix_tcp<<<tp_ctas(N, r, sms), 128,
								TP_SMEM>>>(z, St, w, N, r);
					else if (k == 1)
						blast_mix<<<dim3((N + 31) / 32, (r / MIX_RV + 7) / 8), dim3(32, 8)>>>(
							z, S32, w, N, r);
					else if (k == 2)
						tile_copy<<<tp_ctas(N, r, sms), 128,
							    TP_SMEM>>>(z, w, N, r);
					else
						CK(cudaMemcpyAsync(w, z, nz * 2, cudaMemcpyDeviceToDevice));
					CK(cudaEventRecord(e1));
					CK(cudaEventSynchronize(e1));
					CK(cudaEventElapsedTime(&ms, e0, e1));
					if (it >= 2)
						t.push_back(ms * 1e3f);
				}
				CK(cudaGetLastError());
				std::sort(t.begin(), t.end());
				printf("%5d x %-6d %-10s %-5s %9.2f %9.2f\n", N, r, name[k], warm ? "warm" : "cold",
				       t[t.size() / 2], 2.0 * nz * 2 / (t[t.size() / 2] * 1e-6) / 1e12);
			}
		CK(cudaFree(z));
		CK(cudaFree(w));
		CK(cudaFree(w2));
		CK(cudaFree(S));
		CK(cudaFree(St));
		CK(cudaFree(S32));
	}
	return 0;
}
