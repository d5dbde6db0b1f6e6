/*
 * jit.h -- compile template instances to CUBINs with NVRTC, many at once.
 *
 * Compiling one (jit_compile, jit_key, struct jit_result) is the leaf
 * runtime/jit_one.h, which libktune shares; this adds the tuner's pool.
 */
#ifndef KT_JIT_H
#define KT_JIT_H

#include "../runtime/jit_one.h"

/* One compile job of a batch. */
struct jit_job {
	const struct kt_program *prog;	/* borrowed */
	const char *arch;
	struct jit_result res;	/* filled by jit_compile_all */
	int failed;		/* -1 from jit_compile: err_msg says why */
	char err_msg[512];
};
/* Compiles every job, `threads` at a time (0: one per core). */
void jit_compile_all(struct jit_job *jobs, int n, int threads);

#endif
