# kernels/blockattn.mk: jagged block-diagonal attention (blockattn_fwd,
# blockattn_bwd), its templates and its tests
LIB_SRCS += kernels/blockattn.c
TEMPLATES += templates/blockattn_fwd.cu templates/blockattn_bwd.cu templates/blockattn_ref.cu \
	templates/blockattn_ws.cu
TESTS += test_blockattn
