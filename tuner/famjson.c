/*
 * famjson.c -- a family's shapes and configs as JSON (famjson.h).
 */
#include "famjson.h"

json_t *famjson_shape(const struct kt_family *f, const struct kt_shape *s)
{
	json_t *o = json_object();
	int i;

	for (i = 0; o && i < f->ndims; i++)
		json_object_set_new(o, f->dims[i].name, json_integer(s->v[i]));
	return o;
}

json_t *famjson_config(const struct kt_family *f, const struct kt_config *c)
{
	json_t *o = json_object();
	int i;

	if (!o)
		return NULL;
	if (c->variant >= 0 && c->variant < f->nvariants)
		json_object_set_new(o, "variant", json_string(f->variants[c->variant]));
	for (i = 0; i < f->nparams; i++)
		if (f->params[i].variants & (1u << c->variant))
			json_object_set_new(o, f->params[i].name, json_integer(c->p[i]));
	return o;
}

static char *dump_steal(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(j);
	return s;
}

char *famjson_shape_text(const struct kt_family *f, const struct kt_shape *s)
{
	return dump_steal(famjson_shape(f, s));
}

char *famjson_config_text(const struct kt_family *f, const struct kt_config *c)
{
	return dump_steal(famjson_config(f, c));
}
