/*
 * ingest_probe.cu -- how fast an SM can pull bytes from L2 (or DRAM) into
 * its shared memory with the bulk copy engine, no math: the ceiling that
 * the fused Monarch kernel (2 MiB per CTA) and the ws GEMMs stream under.
 * Not part of ktune; built and run by hand on the GPU machine:
 *
 *   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Itemplates \
 *        -o build-dev/ingest_probe tools/ingest_probe.cu
 *   build-dev/ingest_probe
 *
 * Each CTA (one per SM, or fewer) streams MB MiB of a source buffer through
 * a ring of SLOTS shared-memory slots of CHUNK bytes with
 * cp.async.bulk (one thread issues, completion on an mbarrier per slot, a
 * slot refilled as soon as its copy landed). The source is small enough to
 * stay in L2 (every CTA reads the same 16 MiB, each from its own offset) or
 * large (1 GiB, each CTA its own part: DRAM), from 1, 2 or 4 issuing
 * threads (one a warp, each its own ring). Prints GB/s per SM and in
 * all, for 1, half and all SMs (one CTA each), chunk sizes and ring depths.
 * Then the same with tensor-map copies (cp.async.bulk.tensor, 128-byte
 * rows, the 128-byte swizzle, boxes of 64 .. 256 rows: what the ws kernels
 * issue), all SMs, from the L2-resident window. A checksum of
 * the last slot keeps the copies from being optimized away. Its figures on
 * the H200 (one thread's copies go out one after another; the rates per SM
 * from L2 and DRAM): bench/NOTES-linear.md, "Copy rates".
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.cuh"

#include "probe.h"

__device__ __forceinline__ unsigned smem_u32(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

/* src: base; span: bytes each CTA walks (its offset + i * chunk mod span
 * within window bytes of src); total: bytes per CTA. */
extern "C" __global__ void __launch_bounds__(128) ingest(const char *src, long long window,
							 long long per_cta, int chunk, int slots,
							 int own, unsigned *out)
{
	extern __shared__ __align__(128) unsigned char smem_all[];
	__shared__ __align__(8) unsigned long long bars[4][32];
	/* lane 0 of each warp is one issuer with its own ring and share */
	const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	unsigned char *sm = smem_all + (long long)w * slots * chunk;
	unsigned long long *bar = bars[w];
	const long long n = per_cta / nw / chunk;
	const long long base = (own ? (long long)blockIdx.x * per_cta : (long long)blockIdx.x * 4096) +
			       (long long)w * n * chunk;

	if ((threadIdx.x & 31) != 0)
		return;
	for (int s = 0; s < slots; s++)
		asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" ::"r"(smem_u32(&bar[s])));
	asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
	auto issue = [&](long long i) {
		const int s = (int)(i % slots);
		const long long off = (base + i * chunk) % window;
		const unsigned b = smem_u32(&bar[s]);

		asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(b),
			     "r"(chunk)
			     : "memory");
		asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
			     "[%0], [%1], %2, [%3];\n" ::"r"(smem_u32(sm + (long long)s * chunk)),
			     "l"(src + off), "r"(chunk), "r"(b)
			     : "memory");
	};
	for (long long i = 0; i < slots && i < n; i++)
		issue(i);
	for (long long i = 0; i < n; i++) {
		const int s = (int)(i % slots);
		const unsigned b = smem_u32(&bar[s]), ph = (unsigned)((i / slots) & 1);
		unsigned done = 0;

		while (!done)
			asm volatile("{\n.reg .pred p;\n"
				     "mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
				     "selp.u32 %0, 1, 0, p;\n}\n"
				     : "=r"(done)
				     : "r"(b), "r"(ph)
				     : "memory");
		if (i + slots < n)
			issue(i + slots);
	}
	out[blockIdx.x * 4 + w] = *(volatile unsigned *)(sm + (long long)((n - 1) % slots) * chunk);
}

/* The tensor-map form: boxes of box_rows rows of 128 bytes from a map of
 * window_rows rows, each issuer (lane 0 of a warp) its own ring. */
extern "C" __global__ void __launch_bounds__(128) ingest_tma(const __grid_constant__ kt_tmap_t m,
							     int window_rows, int box_rows,
							     int boxes, int slots, unsigned *out)
{
	extern __shared__ __align__(1024) unsigned char tsm[];
	__shared__ __align__(8) unsigned long long bars[4][32];
	const int w = threadIdx.x >> 5, box = box_rows * 128;
	const unsigned s0 = (smem_u32(tsm) + 1023u) & ~1023u, ring = s0 + w * slots * box;
	const int n = boxes / (blockDim.x >> 5), r0 = blockIdx.x * 32 + w * n * box_rows;

	if ((threadIdx.x & 31) != 0)
		return;
	for (int s = 0; s < slots; s++)
		kt_mbar_init(smem_u32(&bars[w][s]), 1);
	kt_mbar_init_fence();
	auto issue = [&](int i) {
		const int s = i % slots;
		const unsigned b = smem_u32(&bars[w][s]);

		kt_mbar_arrive_tx(b, box);
		kt_tma_load_3d(ring + s * box, &m, b, 0, (r0 + i * box_rows) % (window_rows - box_rows),
			       0);
	};
	for (int i = 0; i < slots && i < n; i++)
		issue(i);
	for (int i = 0; i < n; i++) {
		kt_mbar_wait(smem_u32(&bars[w][i % slots]), (unsigned)((i / slots) & 1));
		if (i + slots < n)
			issue(i + slots);
	}
	out[blockIdx.x * 4 + w] = *(volatile unsigned *)(tsm + 1024);
}

/* The fastest of five timed runs of launch, ms. */
template <typename F>
static float best_ms(cudaEvent_t e0, cudaEvent_t e1, F launch)
{
	float ms = 0, best = 1e30f;

	for (int rep = 0; rep < 5; rep++) {
		CK(cudaEventRecord(e0));
		launch();
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaGetLastError());
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (ms < best)
			best = ms;
	}
	return best;
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
			      const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
			      const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
			      CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static void tma_rows(char *src, unsigned *out, int sms, cudaEvent_t e0, cudaEvent_t e1)
{
	const int window_rows = (16 << 20) / 128;
	encode_fn encode = NULL;
	cudaDriverEntryPointQueryResult q;
	kt_tmap_t m;

	CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000,
					    cudaEnableDefault, &q));
	if (q != cudaDriverEntryPointSuccess || !encode) {
		fprintf(stderr, "no cuTensorMapEncodeTiled\n");
		exit(1);
	}
	CK(cudaFuncSetAttribute(ingest_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
	printf("\n%-6s %-6s %-4s %-9s %-5s %-9s %10s %10s\n", "tma", "ctas", "iss", "box rows",
	       "slots", "MiB/cta", "GB/s/SM", "GB/s all");
	for (int box_rows = 64; box_rows <= 256; box_rows *= 2) {
		cuuint64_t dims[3] = {64, (cuuint64_t)window_rows, 1};
		cuuint64_t strides[2] = {128, (cuuint64_t)window_rows * 128};
		cuuint32_t boxd[3] = {64, (cuuint32_t)box_rows, 1}, es[3] = {1, 1, 1};

		if (encode((CUtensorMap *)&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, src, dims, strides,
			   boxd, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
			   CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
			   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
			fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
			exit(1);
		}
		for (int iss = 1; iss <= 4; iss *= 2)
			for (int depth = 64 << 10; depth <= 192 << 10; depth += 64 << 10) {
				const int box = box_rows * 128, slots = depth / box / iss;
				const int boxes = (2 << 20) / box;

				if (slots < 2 || slots > 32)
					continue;
				const float best = best_ms(e0, e1, [&] {
					ingest_tma<<<sms, 32 * iss, (size_t)iss * slots * box + 1024>>>(
						m, window_rows, box_rows, boxes, slots, out);
				});
				const double bytes = (double)boxes / iss * iss * box * sms;
				printf("%-6s %-6d %-4d %-9d %-5d %-9.1f %10.1f %10.1f\n", "l2", sms, iss,
				       box_rows, slots, 2.0, bytes / (best * 1e-3) / 1e9 / sms,
				       bytes / (best * 1e-3) / 1e9);
			}
	}
}

int main(void)
{
	const long long big = 1LL << 30, small = 16LL << 20;
	char *src;
	unsigned *out;
	cudaEvent_t e0, e1;
	int sms;

	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaMalloc(&src, big));
	CK(cudaMemset(src, 1, big));
	CK(cudaMalloc(&out, 4096 * sizeof(unsigned)));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	CK(cudaFuncSetAttribute(ingest, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
	printf("%-6s %-6s %-4s %-7s %-5s %-9s %10s %10s\n", "src", "ctas", "iss", "chunk", "slots",
	       "MiB/cta", "GB/s/SM", "GB/s all");
	const int chunks[] = {8192, 16384, 32768, 65536};
	const int depth_bytes[] = {64 << 10, 128 << 10, 192 << 10};
	const int ctas_list[] = {1, sms / 2, sms};
	for (int own = 0; own < 2; own++)
		for (int iss = 1; iss <= 4; iss *= 2)
		for (int ci = 0; ci < 3; ci++)
			for (int k = 0; k < 4; k++)
				for (int d = 0; d < 3; d++) {
					const int ctas = ctas_list[ci];
					const int chunk = chunks[k], slots = depth_bytes[d] / chunk / iss;
					const long long per = own ? (big / ctas) / (chunk * iss) * (chunk * iss)
								  : 2LL << 20;
					const long long window = own ? big : small;

					if (slots > 32 || slots < 2)
						continue;
					if (ctas != sms && (k != 1 || d != 1 || iss != 1))
						continue;	/* the CTA sweep at one shape */
					const float best = best_ms(e0, e1, [&] {
						ingest<<<ctas, 32 * iss, (size_t)iss * slots * chunk>>>(
							src, window, per, chunk, slots, own, out);
					});
					const double bytes = (double)per * ctas;
					const int active = ctas < sms ? ctas : sms;
					printf("%-6s %-6d %-4d %-7d %-5d %-9.1f %10.1f %10.1f\n",
					       own ? "dram" : "l2", ctas, iss, chunk, slots, per / 1048576.0,
					       bytes / (best * 1e-3) / 1e9 / active, bytes / (best * 1e-3) / 1e9);
				}
	tma_rows(src, out, sms, e0, e1);
	return 0;
}
