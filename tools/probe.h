/*
 * probe.h -- what the hand-run CUDA probes in tools/ share (not part of
 * ktune; `make probes` builds them with nvcc, they run on the GPU machine):
 * a runtime call that fails ends the probe with where and why.
 */
#ifndef KT_TOOLS_PROBE_H
#define KT_TOOLS_PROBE_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                        \
	do {                                                                         \
		cudaError_t e_ = (x);                                                \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,    \
				cudaGetErrorString(e_));                             \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

#endif
