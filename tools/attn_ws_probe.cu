/*
 * attn_ws_probe.cu -- development harness for templates/blockattn_ws.cu on
 * the device, outside the tuner: one binary per (BWD, ROPE, HD, CONS,
 * STAGES), built with nvcc -arch=sm_90a -I templates and the template's
 * -D macros. It checks the warp-specialized kernel against the GPU
 * reference (templates/blockattn_ref.cu) on a small ragged problem and at
 * the bench shape (B 1152, Lmax 256, H 4; lengths as kernels/blockattn.c
 * draws them), then times it there (L2 flushed, median of 20).
 *   attn_ws_probe [reps]     prints one line: config, rel errors, time
 * The tuner's own verification (test_blockattn, ktune sweep) is what
 * counts; this only shortens the edit-run loop.
 */
#include "blockattn_ws.cu"
#include "blockattn_ref.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
	do {                                                                               \
		cudaError_t e_ = (x);                                                      \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,          \
				cudaGetErrorString(e_));                                   \
			return 1;                                                          \
		}                                                                          \
	} while (0)

static unsigned long long sm64(unsigned long long i)
{
	unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull;

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static float uni(unsigned long long seed, size_t i, float sc)
{
	return ((float)(sm64(seed * 1000003ull + i) >> 40) / 16777216.f * 2.f - 1.f) * sc;
}

struct prob {
	int B, H, T;
	std::vector<int> off;
	std::vector<int2> blocks;
};

static void lengths(prob &p, int B, int H, int lmax, int lo, bool bench)
{
	p.B = B;
	p.H = H;
	p.off.assign(B + 1, 0);
	for (int i = 0; i < B; i++) {
		int len = bench ? (int)(std::max(1, 2 * lmax / 5) +
					sm64(i) % (unsigned long long)(lmax - std::max(1, 2 * lmax / 5) + 1))
				: lo + (int)(sm64(7777 + i) % (unsigned long long)(lmax - lo + 1));
		p.off[i + 1] = p.off[i] + len;
	}
	p.T = p.off[B];
	p.blocks.clear();
	for (int i = 0; i < B; i++)
		for (int t = p.off[i]; t < p.off[i + 1]; t += BLK)
			p.blocks.push_back(make_int2(t, std::min(BLK, p.off[i + 1] - t)));
}

static double rel(const std::vector<__nv_bfloat16> &a, const std::vector<__nv_bfloat16> &b)
{
	double dd = 0, rr = 0;

	for (size_t i = 0; i < a.size(); i++) {
		double x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);

		if (!std::isfinite(x))
			return 1e30;
		dd += (x - y) * (x - y);
		rr += y * y;
	}
	return std::sqrt(dd / (rr > 0 ? rr : 1));
}

static int run(const prob &p, int reps, double *err, float *us)
{
	const size_t n = (size_t)p.T * p.H * HD;
	const int nin = BWD ? 4 : 3, nout = BWD ? 3 : 1;
	std::vector<__nv_bfloat16> h(n);
	__nv_bfloat16 *in[4] = {}, *out[3] = {}, *ref[3] = {};
	float *table = nullptr;
	int *doff = nullptr;
	int2 *dblk = nullptr;
	void *flush = nullptr;

	for (int a = 0; a < nin; a++) {
		for (size_t i = 0; i < n; i++)
			h[i] = __float2bfloat16(uni(a + 1, i, a < 2 ? 2.f : 1.f));
		CK(cudaMalloc(&in[a], n * 2));
		CK(cudaMemcpy(in[a], h.data(), n * 2, cudaMemcpyHostToDevice));
	}
	for (int a = 0; a < nout; a++) {
		CK(cudaMalloc(&out[a], n * 2));
		CK(cudaMalloc(&ref[a], n * 2));
		CK(cudaMemset(out[a], 0xff, n * 2));	/* NaN: unwritten outputs show */
	}
	if (ROPE) {
		std::vector<float> t((size_t)p.T * HD);

		for (int s = 0; s < p.B; s++)
			for (int tk = p.off[s]; tk < p.off[s + 1]; tk++)
				for (int i = 0; i < HD / 2; i++) {
					double th = (tk - p.off[s]) * std::pow(10000.0, -2.0 * i / HD);

					t[(size_t)tk * HD + 2 * i] = (float)std::cos(th);
					t[(size_t)tk * HD + 2 * i + 1] = (float)std::sin(th);
				}
		CK(cudaMalloc(&table, t.size() * 4));
		CK(cudaMemcpy(table, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
	}
	CK(cudaMalloc(&doff, p.off.size() * 4));
	CK(cudaMemcpy(doff, p.off.data(), p.off.size() * 4, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&dblk, p.blocks.size() * 8));
	CK(cudaMemcpy(dblk, p.blocks.data(), p.blocks.size() * 8, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&flush, 256 << 20));

	int nitems = (int)p.blocks.size() * p.H, grid = std::min(nitems, 132);
	int nper = (nitems + grid - 1) / grid;
	size_t smem = (size_t)STAGES * kws::SLOT + 1024;
	dim3 rg((unsigned)p.blocks.size(), p.H);
#if BWD
	auto kern = blockattn_bwd_ws;
	ref_blockattn_bwd<<<rg, BLK>>>(in[0], in[1], in[2], in[3], doff, table, ref[0], ref[1],
				       ref[2], p.B, p.H, HD, BLK);
#else
	auto kern = blockattn_fwd_ws;
	ref_blockattn_fwd<<<rg, BLK>>>(in[0], in[1], in[2], doff, table, ref[0], p.B, p.H, HD, BLK);
#endif
	CK(cudaGetLastError());
	CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	std::vector<float> ts;
	cudaEvent_t e0, e1;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int r = 0; r < reps + 1; r++) {
		CK(cudaMemset(flush, r, 256 << 20));
		CK(cudaEventRecord(e0));
#if BWD
		kern<<<grid, (CONS + 1) * 128, smem>>>(in[0], in[1], in[2], in[3], dblk, table, out[0],
						       out[1], out[2], nitems, p.H, 1, grid, nper);
#else
		kern<<<grid, (CONS + 1) * 128, smem>>>(in[0], in[1], in[2], dblk, table, out[0], nitems,
						       p.H, 1, grid, nper);
#endif
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaGetLastError());
		float ms;

		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (r > 0)
			ts.push_back(ms * 1000.f);
	}
	std::sort(ts.begin(), ts.end());
	*us = ts.empty() ? 0.f : ts[ts.size() / 2];
	for (int a = 0; a < nout; a++) {
		std::vector<__nv_bfloat16> g(n), r(n);

		CK(cudaMemcpy(g.data(), out[a], n * 2, cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(r.data(), ref[a], n * 2, cudaMemcpyDeviceToHost));
		err[a] = rel(g, r);
	}
	for (int a = 0; a < 4; a++)
		cudaFree(in[a]);
	for (int a = 0; a < 3; a++) {
		cudaFree(out[a]);
		cudaFree(ref[a]);
	}
	cudaFree(table);
	cudaFree(doff);
	cudaFree(dblk);
	cudaFree(flush);
	return 0;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 20;
	prob small, bench;
	double es[3] = {0, 0, 0}, eb[3] = {0, 0, 0};
	float us_s, us_b;

	lengths(small, 29, 3, 100, 1, false);
	lengths(bench, 1152, 4, 256, 0, true);
	if (run(small, 1, es, &us_s) || run(bench, reps, eb, &us_b))
		return 1;
	double worst = std::max({es[0], es[1], es[2], eb[0], eb[1], eb[2]});
	printf("%s ROPE %d HD %d CONS %d STAGES %d | small rel %.2e %.2e %.2e | bench rel %.2e %.2e %.2e"
	       " | T %d | %.1f us %s\n",
	       BWD ? "bwd" : "fwd", ROPE, HD, CONS, STAGES, es[0], es[1], es[2], eb[0], eb[1], eb[2],
	       bench.T, us_b, worst < (BWD ? 2e-2 : 1e-2) ? "OK" : "WRONG");
	return worst < (BWD ? 2e-2 : 1e-2) ? 0 : 2;
}
