/*
 * famtest.h -- what the family test programs (test_family, test_monarch,
 * test_blast) share: named targets and parsed shapes that fail the test when
 * they do not parse, shape-parse refusals, a walk of one variant's valid
 * configs, the checks on an emulated plan's output, and for the GPU suites
 * (test_gpu too) a CUDA worker's start, its device as a target, and plans
 * compiled to cubins.
 */
#ifndef KT_FAMTEST_H
#define KT_FAMTEST_H

#include "kernels/family.h"
#include "tuner/jit.h"
#include "tuner/worker.h"

#include <stddef.h>

/* The named target (kt_target_named); a fatal assertion when unknown. */
struct kt_target ft_target(const char *name);
/* text parsed as a shape of f; a fatal assertion when it does not parse. */
struct kt_shape ft_shape(const struct kt_family *f, const char *text);
/* text must not parse as a shape of f, with KT_EINVAL and want in the message. */
void ft_expect_shape_error(const struct kt_family *f, const char *text, const char *want);

/* The valid configs of one variant of f at s on t (kt_space_foreach with
 * ft_collect_one): how many, the first, the last and a spread-out middle
 * one (every 97th from the 13th, else the first). Set f, s, t, variant. */
struct ft_collect {
	const struct kt_family *f;
	struct kt_shape s;
	struct kt_target t;
	int variant;
	long n;
	struct kt_config first, last, mid;
};

int ft_collect_one(const struct kt_config *c, void *arg);
/* The first valid config of variant at s on t: 0, or -1 when it has none. */
int ft_first_config(const struct kt_family *f, const struct kt_shape *s,
		    const struct kt_target *t, int variant, struct kt_config *out);

/* An emulated plan's output y (n floats, oob out-of-bounds accesses) against
 * ref: no out-of-bounds access, nothing non-finite, relative L2 error under
 * 1e-5 with fp32 intermediates (round 0) or 4e-3 with bf16 ones (round 1);
 * what names the case in the message printed on failure. */
void ft_check_output(const float *y, long oob, const float *ref, size_t n, int round,
		     const char *what);

/* Starts a CUDA worker (KTUNE_WORKER_BIN, else the test's ktune) with
 * timeout_s per request: 0 with *w and *info set; 1 when the worker found no
 * GPU, -1 on any other failure (why says which, *w NULL). */
int ft_gpu_start(double timeout_s, struct worker **w, struct worker_device_info *info, char *why,
		 size_t whylen);
/* The target a sweep compiles for on that device (sm_90a on sm_90). */
struct kt_target ft_gpu_target(const struct worker_device_info *info);

/* A compiled plan: one cubin per program (ft_build fills res, cubins, lens
 * from plan; ft_built_release frees the results). */
struct ft_built {
	struct kt_plan plan;
	struct jit_result res[KT_MAX_PROGRAMS];
	const void *cubins[KT_MAX_PROGRAMS];
	size_t lens[KT_MAX_PROGRAMS];
};

void ft_built_release(struct ft_built *b);
/* Compiles every program of b->plan for arch: 0, or -1 with the NVRTC
 * message and log on stderr. */
int ft_build(struct ft_built *b, const char *arch);

#endif
