/*
 * famjson.h -- a family's shapes and configs as JSON objects (jansson).
 *
 * A shape is {"tokens": 1024, "in": 4096, ...}, its dims in schema order;
 * a config {"variant": "wgmma_ws", "BLOCK_M": 128, ...}, the params its
 * variant uses in table order. The one form the store keeps
 * (problems.shape_json, configs.params_json), the server answers with and
 * the export writes. Each call returns a new reference (NULL when out of
 * memory); the _text forms return json_dumps's compact text (free()).
 */
#ifndef KT_FAMJSON_H
#define KT_FAMJSON_H

#include <jansson.h>

#include "../kernels/family.h"

json_t *famjson_shape(const struct kt_family *f, const struct kt_shape *s);
/* A variant out of range leaves "variant" out. */
json_t *famjson_config(const struct kt_family *f, const struct kt_config *c);
char *famjson_shape_text(const struct kt_family *f, const struct kt_shape *s);
char *famjson_config_text(const struct kt_family *f, const struct kt_config *c);

/* A positive number as JSON, null where it is 0 or less: how the store and
 * kt_floor_us say "not recorded" (a time not measured, a sweep not finished,
 * a floor unknown). A new reference. */
static inline json_t *famjson_num_or_null(double v)
{
	return v > 0 ? json_real(v) : json_null();
}

#endif
