/*
 * launch.h -- a config's launch recipe at a shape, as JSON: everything a
 * third party needs to run it (its programs with the compile options, its
 * buffers, the untimed prep launches and the timed launches in order, each
 * with grid, block, shared memory, flags and arguments). The export
 * carries it for each tuned shape; the answer of `ktune best --json` and
 * GET /v1/best for the asked shape, so that a nearest, arch or default
 * answer comes with launches sized for the shape asked, not the tuned one.
 */
#ifndef KT_SERVER_LAUNCH_H
#define KT_SERVER_LAUNCH_H

#include <jansson.h>

#include "../kernels/family.h"

/* The plan of c at shape s on tgt as JSON (target, programs, buffers,
 * prep, launches, transform); NULL with err set when the family refuses
 * to plan it. */
json_t *launch_plan_json(const struct kt_family *f, const struct kt_shape *s,
			 const struct kt_config *c, const struct kt_target *tgt,
			 struct kt_err *err);

#endif
