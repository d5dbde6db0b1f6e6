/*
 * blockattn_ref.cu -- GPU references for blockattn_fwd / blockattn_bwd:
 * simple and obviously correct, not fast. fp32 throughout, no tensor cores,
 * no shared tiles; inputs read from global memory as they are needed.
 *
 *   ref_blockattn_fwd(q, k, v, offsets, table, o, B, H, d, blk, rv)
 *   ref_blockattn_bwd(q, k, v, do, offsets, table, dq, dk, dv, B, H, d, blk, rv)
 *       grid (number of BLK-blocks, H), block (blk): one CTA per (block,
 *       head), one thread per row of the block. table (T, d) bf16 is
 *       NULL without rope; with it q and k are raw and rotated as they are
 *       read, and the backward writes the gradients of the raw q, k
 *       (conjugate rotation). rv (rope=2): v is raw too, rotated as it is
 *       read, and dv is the gradient of the raw v.
 *       blk <= REF_MAX, d <= 128 (the families check it); REF_MAX (128;
 *       256 for block 256) sizes a thread's row of scores.
 */
#include <cuda_bf16.h>

#ifndef REF_MAX
#define REF_MAX 128
#endif

/* NVRTC has no <math.h>: -inf by its bits */
#define KBA_NEG_INF __int_as_float(0xff800000)

/* Block g of the problem: its first token and length. Thread 0 walks the
 * sequences in order (O(B) per CTA: fine for a reference). */
__device__ int2 ref_block(const int *off, int B, int blk, int g)
{
	for (int s = 0; s < B; s++) {
		int len = off[s + 1] - off[s], n = (len + blk - 1) / blk;

		if (g < n)
			return make_int2(off[s] + g * blk, min(blk, len - g * blk));
		g -= n;
	}
	return make_int2(0, 0);
}

/* Element c of token t, head h, of x (T, H, d); rotated when table. */
__device__ float ref_ld(const __nv_bfloat16 *x, const __nv_bfloat16 *table, int t, int H, int h,
			int d, int c)
{
	const __nv_bfloat16 *r = x + ((long long)t * H + h) * d;
	int p = c & ~1;
	float x0, x1, co, si;

	if (!table)
		return __bfloat162float(r[c]);
	x0 = __bfloat162float(r[p]);
	x1 = __bfloat162float(r[p + 1]);
	co = __bfloat162float(table[(long long)t * d + p]);
	si = __bfloat162float(table[(long long)t * d + p + 1]);
	return (c & 1) ? x0 * si + x1 * co : x0 * co - x1 * si;
}

/* a[ta] . b[tb] (token rows, head h), each rotated by its table when that
 * is non-NULL. */
__device__ float ref_dot(const __nv_bfloat16 *a, int ta, const __nv_bfloat16 *b, int tb,
			 const __nv_bfloat16 *at, const __nv_bfloat16 *bt, int H, int h, int d)
{
	float acc = 0.f;

	for (int c = 0; c < d; c++)
		acc += ref_ld(a, at, ta, H, h, d, c) * ref_ld(b, bt, tb, H, h, d, c);
	return acc;
}

/* Writes the pair (g0, g1) at columns c, c+1 of token t: conjugate-rotated
 * when table (the gradient of a raw pair from that of a rotated one). */
__device__ void ref_st2(__nv_bfloat16 *x, const __nv_bfloat16 *table, int t, int H, int h,
			int d, int c, float g0, float g1)
{
	__nv_bfloat16 *r = x + ((long long)t * H + h) * d;

	if (table) {
		float co = __bfloat162float(table[(long long)t * d + c]);
		float si = __bfloat162float(table[(long long)t * d + c + 1]);
		float x0 = g0 * co + g1 * si, x1 = g1 * co - g0 * si;

		g0 = x0;
		g1 = x1;
	}
	r[c] = __float2bfloat16_rn(g0);
	r[c + 1] = __float2bfloat16_rn(g1);
}

extern "C" __global__ void ref_blockattn_fwd(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
					     const __nv_bfloat16 *v, const int *offsets,
					     const __nv_bfloat16 *table, __nv_bfloat16 *o, int B, int H,
					     int d, int blk, int rv)
{
	const __nv_bfloat16 *vtab = rv ? table : nullptr;
	__shared__ int2 bl;
	const int i = threadIdx.x, h = blockIdx.y;
	const float scale = rsqrtf((float)d);
	float p[REF_MAX], m = KBA_NEG_INF, l = 0.f;

	if (i == 0)
		bl = ref_block(offsets, B, blk, blockIdx.x);
	__syncthreads();
	if (i >= bl.y)
		return;
	for (int j = 0; j < bl.y; j++) {
		p[j] = ref_dot(q, bl.x + i, k, bl.x + j, table, table, H, h, d) * scale;
		m = fmaxf(m, p[j]);
	}
	for (int j = 0; j < bl.y; j++) {
		p[j] = expf(p[j] - m);
		l += p[j];
	}
	for (int c = 0; c < d; c++) {
		float acc = 0.f;

		for (int j = 0; j < bl.y; j++)
			acc += p[j] * ref_ld(v, vtab, bl.x + j, H, h, d, c);
		o[((long long)(bl.x + i) * H + h) * d + c] = __float2bfloat16_rn(acc / l);
	}
}

extern "C" __global__ void ref_blockattn_bwd(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
					     const __nv_bfloat16 *v, const __nv_bfloat16 *dout,
					     const int *offsets, const __nv_bfloat16 *table,
					     __nv_bfloat16 *dq, __nv_bfloat16 *dk,
					     __nv_bfloat16 *dv, int B, int H, int d, int blk, int rv)
{
	const __nv_bfloat16 *vtab = rv ? table : nullptr;
	__shared__ int2 bl;
	__shared__ float rmax[REF_MAX], rsum[REF_MAX], rdi[REF_MAX];
	const int r = threadIdx.x, h = blockIdx.y;
	const float scale = rsqrtf((float)d);
	float p[REF_MAX], ds[REF_MAX];

	if (r == 0)
		bl = ref_block(offsets, B, blk, blockIdx.x);
	__syncthreads();
	/* query row r: P, dP, Di, dS, dQ */
	if (r < bl.y) {
		float m = KBA_NEG_INF, l = 0.f, di = 0.f;

		for (int j = 0; j < bl.y; j++) {
			p[j] = ref_dot(q, bl.x + r, k, bl.x + j, table, table, H, h, d) * scale;
			m = fmaxf(m, p[j]);
		}
		for (int j = 0; j < bl.y; j++) {
			p[j] = expf(p[j] - m);
			l += p[j];
		}
		for (int j = 0; j < bl.y; j++) {
			p[j] /= l;
			ds[j] = ref_dot(dout, bl.x + r, v, bl.x + j, nullptr, vtab, H, h, d);
			di += p[j] * ds[j];
		}
		for (int j = 0; j < bl.y; j++)
			ds[j] = p[j] * (ds[j] - di) * scale;
		for (int c = 0; c < d; c += 2) {
			float g0 = 0.f, g1 = 0.f;

			for (int j = 0; j < bl.y; j++) {
				g0 += ds[j] * ref_ld(k, table, bl.x + j, H, h, d, c);
				g1 += ds[j] * ref_ld(k, table, bl.x + j, H, h, d, c + 1);
			}
			ref_st2(dq, table, bl.x + r, H, h, d, c, g0, g1);
		}
		rmax[r] = m;
		rsum[r] = l;
		rdi[r] = di;
	}
	__syncthreads();
	/* key row r: column r of P and dS, then dV, dK */
	if (r < bl.y) {
		for (int i = 0; i < bl.y; i++) {
			float s = ref_dot(q, bl.x + i, k, bl.x + r, table, table, H, h, d) * scale;
			float dp = ref_dot(dout, bl.x + i, v, bl.x + r, nullptr, vtab, H, h, d);

			p[i] = expf(s - rmax[i]) / rsum[i];
			ds[i] = p[i] * (dp - rdi[i]) * scale;
		}
		for (int c = 0; c < d; c += 2) {
			float v0 = 0.f, v1 = 0.f, g0 = 0.f, g1 = 0.f;

			for (int i = 0; i < bl.y; i++) {
				const __nv_bfloat16 *dor = dout + ((long long)(bl.x + i) * H + h) * d;

				v0 += p[i] * __bfloat162float(dor[c]);
				v1 += p[i] * __bfloat162float(dor[c + 1]);
				g0 += ds[i] * ref_ld(q, table, bl.x + i, H, h, d, c);
				g1 += ds[i] * ref_ld(q, table, bl.x + i, H, h, d, c + 1);
			}
			ref_st2(dv, vtab, bl.x + r, H, h, d, c, v0, v1);
			ref_st2(dk, table, bl.x + r, H, h, d, c, g0, g1);
		}
	}
}

/*
 * ref_blockattn_cmp(got, ref, n, acc)   grid-stride, block 256
 *     acc[0] += sum (got - ref)^2 over finite got, acc[1] += sum ref^2,
 *     acc[2] += count of non-finite got: the relative L2 check on the
 *     device, so full-size outputs need not travel to the host (tests).
 */
extern "C" __global__ void ref_blockattn_cmp(const __nv_bfloat16 *got, const __nv_bfloat16 *ref,
					     long long n, double *acc)
{
	double dd = 0, rr = 0, nf = 0;

	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		float g = __bfloat162float(got[i]), r = __bfloat162float(ref[i]);

		if ((__float_as_uint(g) & 0x7f800000u) == 0x7f800000u)
			nf += 1;
		else
			dd += (double)(g - r) * (double)(g - r);
		rr += (double)r * (double)r;
	}
	for (int o = 16; o > 0; o >>= 1) {
		dd += __shfl_xor_sync(0xffffffffu, dd, o);
		rr += __shfl_xor_sync(0xffffffffu, rr, o);
		nf += __shfl_xor_sync(0xffffffffu, nf, o);
	}
	if ((threadIdx.x & 31) == 0) {
		atomicAdd(&acc[0], dd);
		atomicAdd(&acc[1], rr);
		atomicAdd(&acc[2], nf);
	}
}
