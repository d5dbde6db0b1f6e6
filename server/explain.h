/* explain.h -- why a lookup answered as it did, for the CLI and the routes
 *
 * lookup_best() answers with a tuned config or the family's default, or
 * not at all. These say why in words a user can act on: which rule a shape
 * broke when no config can run it, and why the default answered (nothing
 * tuned, no shape with the same structural keys, the nearest past
 * max_distance, or its config invalid here). */
#ifndef KTUNE_SERVER_EXPLAIN_H
#define KTUNE_SERVER_EXPLAIN_H

#include <stddef.h>

#include "lookup.h"

/* When no config of f can run s on t, replaces err with KT_EINVAL naming
 * the rule most configs give (the shape's own rule: a multiple of 8, a
 * head_dim the kernels have) and where the shape keys are listed (hint, e.g.
 * "ktune families"), and returns 1; returns 0 and leaves err alone when
 * some config can. Walks the whole space (about 10 ms for the largest), so
 * it is meant for the error path. */
int explain_unsupported(const struct kt_family *f, const struct kt_shape *s,
			const struct kt_target *t, const char *arch, const char *hint,
			struct kt_err *err);

/* Why a's default answered, from the entries of the family on the asked
 * device's architecture; into buf (always terminated). */
void explain_default(const struct lookup_table *tab, const struct lookup_query *q,
		     const struct lookup_answer *a, char *buf, size_t n);

#endif
