/*
 * jit_one.h -- compile one template instance to a CUBIN with NVRTC.
 *
 * Never touches the GPU driver, so it runs (and is tested) on machines
 * without a GPU. A struct jit_result owns its cubin and log;
 * jit_result_release() frees both and leaves the struct zeroed.
 *
 * The cache key is a content hash of the template text, every compile
 * option (architecture, defines, include paths) and the NVRTC version, so a
 * changed template, option or compiler never reuses an old binary.
 */
#ifndef KT_JIT_ONE_H
#define KT_JIT_ONE_H

#include <stddef.h>

#include "../kernels/family.h"
#include "../util/err.h"

struct jit_result {
	int ok;			/* 1: cubin valid */
	void *cubin;
	size_t cubin_len;
	char *log;		/* NVRTC program log, also on success; may be NULL */
	double ms;		/* compile wall time */
	char key[33];		/* cache key */
};
void jit_result_release(struct jit_result *r);

/* "13.0" */
const char *jit_nvrtc_version(void);
/* Content hash of every embedded template (provenance, cache keys). */
const char *jit_templates_hash(void);
/* Cache key of program p compiled for arch ("sm_90a"). */
int jit_key(const struct kt_program *p, const char *arch, char out[33], struct kt_err *err);
/* Compiles p for arch. Returns 0 with r->ok = 1 on success, 0 with r->ok = 0
 * and the log on a compile error (a candidate outcome), -1 with err set when
 * NVRTC itself fails (cannot load, out of memory, unknown template). */
int jit_compile(const struct kt_program *p, const char *arch, struct jit_result *r,
		struct kt_err *err);

#endif
