/*
 * famtest.h -- what the family test programs (test_family, test_monarch,
 * test_blast) share: named targets and parsed shapes that fail the test when
 * they do not parse, shape-parse refusals, a walk of one variant's valid
 * configs, and the checks on an emulated plan's output.
 */
#ifndef KT_FAMTEST_H
#define KT_FAMTEST_H

#include "kernels/family.h"

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

#endif
