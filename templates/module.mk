# templates/: CUDA C++ compiled at run time with NVRTC, embedded at build time.
# Every file here is also handed to NVRTC as an includable header by its
# file name (e.g. #include "common.cuh").
LIB_SRCS += templates/templates.c
TEMPLATES += templates/common.cuh templates/gemm.cu templates/gemm_epi.cuh templates/gemm_mma.cuh \
	templates/gemm_wgmma.cuh templates/gemm_ws.cuh templates/gemm_pingpong.cuh templates/ref.cu \
	templates/planted.cu
