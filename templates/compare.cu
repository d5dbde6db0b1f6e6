/*
 * compare.cu -- verification on the GPU (tuner/cuda.c): a candidate's output
 * against the device copy of the reference output, without downloading
 * either, and the check of the guard regions around outputs. Compiled by
 * NVRTC in the worker child, once per child, for the device's architecture.
 *
 * kt_compare: each block writes CMP_PART doubles to part[CMP_PART *
 * blockIdx.x ...]: the sum of (got - ref)^2 and of ref^2 over the finite
 * elements of got, how many elements of got were not finite (those add to
 * neither sum), how many were over the local bound |got - ref| > atol +
 * rtol * |ref|, and the largest |got - ref|. The host sums the blocks in
 * block order (and takes the largest maximum), so with a fixed grid the
 * result is the same on every run. Elements are converted to float first,
 * exactly as the host path (measure_to_float, measure_compare) does: bf16 by its
 * bits, f32 as is, i32 by rounding to the nearest float. The element type
 * is an argument (0 bf16, 1 f32, 2 i32, as enum kt_dtype), so one kernel
 * serves every output.
 *
 * kt_guard: counts the bytes of [p, p + n) that differ from the guard byte,
 * one double per block in part[CMP_PART * blockIdx.x] (bytes, not words: a
 * guard after an output of odd length starts unaligned).
 */
#define CMP_THREADS 256
#define CMP_PART 5

__device__ __forceinline__ float cmp_load(const void *p, unsigned long long i, int dtype)
{
	if (dtype == 0)
		return __uint_as_float((unsigned)((const unsigned short *)p)[i] << 16);
	if (dtype == 1)
		return ((const float *)p)[i];
	return (float)((const int *)p)[i];
}

extern "C" __global__ void __launch_bounds__(CMP_THREADS)
kt_compare(const void *got, const void *ref, unsigned long long n, int dtype, double atol,
	   double rtol, double *part)
{
	__shared__ double s_diff[CMP_THREADS], s_ref[CMP_THREADS], s_bad[CMP_THREADS];
	__shared__ double s_over[CMP_THREADS], s_max[CMP_THREADS];
	double sq_diff = 0, sq_ref = 0, bad = 0, over = 0, mx = 0;
	unsigned long long i = (unsigned long long)blockIdx.x * CMP_THREADS + threadIdx.x;
	unsigned long long step = (unsigned long long)gridDim.x * CMP_THREADS;
	int t = threadIdx.x;

	for (; i < n; i += step) {
		float g = cmp_load(got, i, dtype), r = cmp_load(ref, i, dtype);
		double d;

		/* NaN or Inf: all exponent bits set */
		if ((__float_as_uint(g) & 0x7f800000u) == 0x7f800000u) {
			bad += 1.0;
			continue;
		}
		d = fabs((double)g - (double)r);
		sq_diff += d * d;
		sq_ref += (double)r * (double)r;
		if (d > mx)
			mx = d;
		if (d > atol + rtol * fabs((double)r))
			over += 1.0;
	}
	s_diff[t] = sq_diff;
	s_ref[t] = sq_ref;
	s_bad[t] = bad;
	s_over[t] = over;
	s_max[t] = mx;
	__syncthreads();
	/* A fixed tree: the same sums in the same order on every run. */
	for (int h = CMP_THREADS / 2; h > 0; h >>= 1) {
		if (t < h) {
			s_diff[t] += s_diff[t + h];
			s_ref[t] += s_ref[t + h];
			s_bad[t] += s_bad[t + h];
			s_over[t] += s_over[t + h];
			s_max[t] = s_max[t] > s_max[t + h] ? s_max[t] : s_max[t + h];
		}
		__syncthreads();
	}
	if (t == 0) {
		part[CMP_PART * blockIdx.x] = s_diff[0];
		part[CMP_PART * blockIdx.x + 1] = s_ref[0];
		part[CMP_PART * blockIdx.x + 2] = s_bad[0];
		part[CMP_PART * blockIdx.x + 3] = s_over[0];
		part[CMP_PART * blockIdx.x + 4] = s_max[0];
	}
}

extern "C" __global__ void __launch_bounds__(CMP_THREADS)
kt_guard(const unsigned char *p, unsigned long long n, unsigned guard, double *part)
{
	__shared__ double s_bad[CMP_THREADS];
	double bad = 0;
	unsigned long long i = (unsigned long long)blockIdx.x * CMP_THREADS + threadIdx.x;
	unsigned long long step = (unsigned long long)gridDim.x * CMP_THREADS;
	int t = threadIdx.x;

	for (; i < n; i += step)
		bad += p[i] != (unsigned char)guard;
	s_bad[t] = bad;
	__syncthreads();
	for (int h = CMP_THREADS / 2; h > 0; h >>= 1) {
		if (t < h)
			s_bad[t] += s_bad[t + h];
		__syncthreads();
	}
	if (t == 0)
		part[CMP_PART * blockIdx.x] = s_bad[0];
}
