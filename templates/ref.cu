/*
 * ref.cu -- GPU references: simple and obviously correct, not fast.
 *
 *   ref_gemm_tn(A, a_f32, B, C, c_f32, M, N, K)
 *       C (M x N) = A (M x K) . B (N x K)^T, one thread per element of C,
 *       fp32 accumulation in k order. A is bf16, or fp32 when a_f32; B is
 *       bf16; C is bf16 (rounded to nearest even), or fp32 when c_f32.
 *       Dense runs it once (x, W -> y); lowrank twice through an fp32
 *       intermediate (x, V -> z32; z32, U -> y).
 *       grid (ceil(N/32), ceil(M/8)), block (32, 8).
 */
#include <cuda_bf16.h>

extern "C" __global__ void ref_gemm_tn(const void *A, int a_f32, const __nv_bfloat16 *B, void *C,
				       int c_f32, int M, int N, int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;
	int m = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0.f;

	if (m >= M || n >= N)
		return;
	for (int k = 0; k < K; k++) {
		float a = a_f32 ? ((const float *)A)[(long long)m * K + k]
				: __bfloat162float(((const __nv_bfloat16 *)A)[(long long)m * K + k]);

		acc += a * __bfloat162float(B[(long long)n * K + k]);
	}
	if (c_f32)
		((float *)C)[(long long)m * N + n] = acc;
	else
		((__nv_bfloat16 *)C)[(long long)m * N + n] = __float2bfloat16_rn(acc);
}
