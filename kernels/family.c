/*
 * family.c -- the family-independent parts of family.h: shape and config
 * text, space enumeration, targets, inputs (the registry is registry.c).
 */
#include "family.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/hash.h"

/* ---- text ---- */

/* One "key=value" item of a comma-separated list: [*p, end). */
struct kv {
	char key[KT_NAME_MAX];
	char val[KT_NAME_MAX];
};

/* Splits the next item off *p; 0 at the end, 1 for an item, -1 on a
 * malformed one (err set). */
static int next_kv(const char **p, struct kv *kv, const char *what, struct kt_err *err)
{
	const char *s = *p, *comma, *eq;
	size_t klen, vlen;

	if (!*s)
		return 0;
	comma = strchr(s, ',');
	if (!comma)
		comma = s + strlen(s);
	eq = memchr(s, '=', (size_t)(comma - s));
	if (!eq)
		return kt_err_set(err, KT_EINVAL, "%s: '%.*s' is not key=value", what,
				  (int)(comma - s), s);
	klen = (size_t)(eq - s);
	vlen = (size_t)(comma - eq - 1);
	if (klen == 0 || klen >= sizeof(kv->key) || vlen >= sizeof(kv->val))
		return kt_err_set(err, KT_EINVAL, "%s: bad item '%.*s'", what, (int)(comma - s), s);
	memcpy(kv->key, s, klen);
	kv->key[klen] = 0;
	memcpy(kv->val, eq + 1, vlen);
	kv->val[vlen] = 0;
	*p = *comma ? comma + 1 : comma;
	if (*comma && !**p)
		return kt_err_set(err, KT_EINVAL, "%s: trailing comma", what);
	return 1;
}

/* Strict decimal integer: optional sign, digits only, no overflow. */
static int parse_long(const char *s, long *out)
{
	char *end;
	long v;

	if (!*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static void dim_names(const struct kt_family *f, char *buf, size_t len)
{
	size_t n = 0;
	int d;

	buf[0] = 0;
	for (d = 0; d < f->ndims && n < len; d++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", d ? ", " : "", f->dims[d].name);
}

int kt_shape_parse(const struct kt_family *f, const char *text, struct kt_shape *out,
		   struct kt_err *err)
{
	int seen[KT_MAX_DIMS] = {0};
	struct kv kv;
	char names[256];
	const char *p = text ? text : "";
	int d, r;

	memset(out, 0, sizeof(*out));
	dim_names(f, names, sizeof(names));
	while ((r = next_kv(&p, &kv, "shape", err)) == 1) {
		long v;

		for (d = 0; d < f->ndims; d++)
			if (strcmp(f->dims[d].name, kv.key) == 0)
				break;
		if (d == f->ndims)
			return kt_err_set(err, KT_EINVAL, "shape: unknown key '%s' for %s (keys: %s)",
					  kv.key, f->name, names);
		if (seen[d])
			return kt_err_set(err, KT_EINVAL, "shape: key '%s' given twice", kv.key);
		seen[d] = 1;
		if (parse_long(kv.val, &v) != 0)
			return kt_err_set(err, KT_EINVAL, "shape: %s='%s' is not an integer", kv.key,
					  kv.val);
		if (v < f->dims[d].min || v > f->dims[d].max)
			return kt_err_set(err, KT_EINVAL, "shape: %s=%ld out of range [%ld, %ld]",
					  kv.key, v, f->dims[d].min, f->dims[d].max);
		out->v[d] = v;
	}
	if (r < 0)
		return -1;
	for (d = 0; d < f->ndims; d++)
		if (!seen[d])
			return kt_err_set(err, KT_EINVAL, "shape: missing key '%s' for %s (keys: %s)",
					  f->dims[d].name, f->name, names);
	return 0;
}

int kt_shape_key(const struct kt_family *f, const struct kt_shape *s, char *buf, size_t len)
{
	int n = 0, d;

	if (len)
		buf[0] = 0;
	for (d = 0; d < f->ndims; d++) {
		size_t room = (size_t)n < len ? len - (size_t)n : 0;

		n += snprintf(room ? buf + n : NULL, room, "%s%s=%ld", d ? "," : "", f->dims[d].name,
			      s->v[d]);
	}
	return n;
}

static int uses(const struct kt_param *p, int variant)
{
	return (p->variants >> variant) & 1u;
}

int kt_config_key(const struct kt_family *f, const struct kt_config *c, char *buf, size_t len)
{
	int n, i;

	if (len)
		buf[0] = 0;
	if (c->variant < 0 || c->variant >= f->nvariants)
		return -1;
	n = snprintf(buf, len, "variant=%s", f->variants[c->variant]);
	for (i = 0; i < f->nparams; i++) {
		size_t room;

		if (!uses(&f->params[i], c->variant))
			continue;
		room = (size_t)n < len ? len - (size_t)n : 0;
		n += snprintf(room ? buf + n : NULL, room, ",%s=%ld", f->params[i].name, c->p[i]);
	}
	return n;
}

int kt_variant_index(const struct kt_family *f, const char *name)
{
	int v;

	for (v = 0; name && v < f->nvariants; v++)
		if (strcmp(f->variants[v], name) == 0)
			return v;
	return -1;
}

int kt_config_parse(const struct kt_family *f, const char *text, struct kt_config *out,
		    struct kt_err *err)
{
	struct kv items[KT_MAX_PARAMS + 2];
	int nitems = 0, seen[KT_MAX_PARAMS] = {0};
	const char *p = text ? text : "";
	int i, j, r;

	memset(out, 0, sizeof(*out));
	out->variant = -1;
	while ((r = next_kv(&p, &items[nitems], "config", err)) == 1) {
		for (j = 0; j < nitems; j++)
			if (strcmp(items[j].key, items[nitems].key) == 0)
				return kt_err_set(err, KT_EINVAL, "config: key '%s' given twice",
						  items[j].key);
		if (++nitems == (int)(sizeof(items) / sizeof(items[0])) && *p)
			return kt_err_set(err, KT_EINVAL, "config: too many keys");
	}
	if (r < 0)
		return -1;
	for (j = 0; j < nitems; j++)
		if (strcmp(items[j].key, "variant") == 0)
			out->variant = kt_variant_index(f, items[j].val);
	if (out->variant < 0) {
		char names[256];
		size_t n = 0;

		names[0] = 0;
		for (i = 0; i < f->nvariants && n < sizeof(names); i++)
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
					      f->variants[i]);
		return kt_err_set(err, KT_EINVAL, "config: missing or unknown variant for %s (variants: %s)",
				  f->name, names);
	}
	for (j = 0; j < nitems; j++) {
		long v;

		if (strcmp(items[j].key, "variant") == 0)
			continue;
		for (i = 0; i < f->nparams; i++)
			if (strcmp(f->params[i].name, items[j].key) == 0)
				break;
		if (i == f->nparams || !uses(&f->params[i], out->variant))
			return kt_err_set(err, KT_EINVAL, "config: variant %s of %s has no parameter '%s'",
					  f->variants[out->variant], f->name, items[j].key);
		/* Any integer is accepted, not only the listed values: a config
		 * tuned under an older, wider space must still parse; check()
		 * decides whether it can run. */
		if (parse_long(items[j].val, &v) != 0 || v < 0 || v > (1L << 30))
			return kt_err_set(err, KT_EINVAL, "config: %s='%s' is not an integer in [0, %ld]",
					  items[j].key, items[j].val, 1L << 30);
		out->p[i] = v;
		seen[i] = 1;
	}
	for (i = 0; i < f->nparams; i++) {
		if (!uses(&f->params[i], out->variant) || seen[i])
			continue;
		if (f->params[i].optional)	/* a key from before it existed */
			out->p[i] = f->params[i].absent;
		else
			return kt_err_set(err, KT_EINVAL, "config: missing parameter '%s' for variant %s",
					  f->params[i].name, f->variants[out->variant]);
	}
	return 0;
}

long kt_shape_get(const struct kt_family *f, const struct kt_shape *s, const char *name)
{
	int d;

	for (d = 0; d < f->ndims; d++)
		if (strcmp(f->dims[d].name, name) == 0)
			return s->v[d];
	return -1;
}

long kt_config_get(const struct kt_family *f, const struct kt_config *c, const char *name)
{
	int i;

	for (i = 0; i < f->nparams; i++)
		if (strcmp(f->params[i].name, name) == 0)
			return c->p[i];
	return -1;
}

/* ---- enumeration ---- */

int kt_space_foreach(const struct kt_family *f, int with_planted,
		     int (*fn)(const struct kt_config *c, void *arg), void *arg)
{
	int v, i, rc;

	for (v = 0; v < f->nvariants; v++) {
		int used[KT_MAX_PARAMS], nused = 0, idx[KT_MAX_PARAMS] = {0};
		struct kt_config c;

		if (!with_planted && ((f->planted >> v) & 1u))
			continue;
		for (i = 0; i < f->nparams; i++)
			if (uses(&f->params[i], v) && f->params[i].nvalues > 0)
				used[nused++] = i;
		/* odometer over the used params, last param fastest */
		for (;;) {
			memset(&c, 0, sizeof(c));
			c.variant = v;
			for (i = 0; i < nused; i++)
				c.p[used[i]] = f->params[used[i]].values[idx[i]];
			if ((rc = fn(&c, arg)) != 0)
				return rc;
			for (i = nused - 1; i >= 0; i--) {
				if (++idx[i] < f->params[used[i]].nvalues)
					break;
				idx[i] = 0;
			}
			if (i < 0)
				break;
		}
	}
	return 0;
}

int kt_config_in_space(const struct kt_family *f, const struct kt_config *c)
{
	int i, k;

	if (c->variant < 0 || c->variant >= f->nvariants)
		return 0;
	for (i = 0; i < f->nparams; i++) {
		const struct kt_param *p = &f->params[i];

		if (!uses(p, c->variant) || p->nvalues == 0) {
			if (c->p[i] != 0)
				return 0;
			continue;
		}
		for (k = 0; k < p->nvalues && p->values[k] != c->p[i]; k++)
			;
		if (k == p->nvalues)
			return 0;
	}
	return 1;
}

long kt_param_clamp(const struct kt_family *f, int i, long v)
{
	const struct kt_param *p = &f->params[i];
	long best = 0, lo = 0;
	int k, have = 0;

	for (k = 0; k < p->nvalues; k++) {
		if (k == 0 || p->values[k] < lo)
			lo = p->values[k];
		if (p->values[k] <= v && (!have || p->values[k] > best)) {
			best = p->values[k];
			have = 1;
		}
	}
	return have ? best : lo;
}

long kt_space_size(const struct kt_family *f, int with_planted)
{
	long total = 0;
	int v, i;

	for (v = 0; v < f->nvariants; v++) {
		long n = 1;

		if (!with_planted && ((f->planted >> v) & 1u))
			continue;
		for (i = 0; i < f->nparams; i++)
			if (uses(&f->params[i], v) && f->params[i].nvalues > 0)
				n *= f->params[i].nvalues;
		total += n;
	}
	return total;
}

/* ---- targets ---- */

static const struct {
	const char *name;
	struct kt_target t;
} targets[] = {
	/* opt-in dynamic shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin) */
	{"sm_80", {80, 0, 166912, 1024, 0, 0}},
	{"sm_86", {86, 0, 101376, 1024, 0, 0}},
	{"sm_89", {89, 0, 101376, 1024, 0, 0}},
	{"sm_90", {90, 0, 232448, 1024, 0, 0}},
	{"sm_90a", {90, 1, 232448, 1024, 0, 0}},
};

int kt_target_named(const char *name, struct kt_target *out)
{
	size_t i;

	for (i = 0; name && i < sizeof(targets) / sizeof(targets[0]); i++)
		if (strcmp(targets[i].name, name) == 0) {
			*out = targets[i].t;
			return 0;
		}
	return -1;
}

void kt_target_arch(const struct kt_target *t, char *buf, size_t len)
{
	snprintf(buf, len, "sm_%d%s", t->sm, t->arch_a ? "a" : "");
}

/* ---- roofline ---- */

/* Ceilings measured per device (docs/kernels.md, bench/peaks.py): the bf16
 * GEMM rate cuBLAS reaches at its best and the copy rate. */
static const struct {
	const char *device;
	struct kt_peaks p;
} measured_peaks[] = {
	{"NVIDIA H200", {790e12, 4.3e12}},
	{"NVIDIA H100 80GB HBM3", {787e12, 3.04e12}},
};

int kt_peaks_of(const char *device, struct kt_peaks *out)
{
	size_t i;

	for (i = 0; i < sizeof(measured_peaks) / sizeof(measured_peaks[0]); i++)
		if (device && strcasecmp(device, measured_peaks[i].device) == 0) {
			*out = measured_peaks[i].p;
			return 1;
		}
	out->flops = 0;
	out->bytes = 0;
	return 0;
}

double kt_floor_us(const struct kt_family *f, const struct kt_shape *s, const char *device)
{
	struct kt_peaks p;
	double c, m;

	if (!kt_peaks_of(device, &p))
		return 0;
	c = f->flops ? f->flops(f, s) / p.flops : 0;
	m = f->min_bytes ? f->min_bytes(f, s) / p.bytes : 0;
	return (c > m ? c : m) * 1e6;
}

/* ---- inputs ---- */

float kt_fill_value(uint64_t seed, size_t i, double scale)
{
	/* one SplitMix64 step from seed, then one from that ^ i */
	uint64_t h = kt_mix64((kt_mix64(seed + KT_MIX64_STEP) ^ (uint64_t)i) + KT_MIX64_STEP);
	/* 24 random bits, centred in their cell: (2k+1)/2^24 - 1 is never 0 */
	double u = ((double)(h >> 40) + 0.5) / 16777216.0;

	return (float)((2.0 * u - 1.0) * scale);
}

void kt_fill_bf16(uint16_t *dst, size_t n, uint64_t seed, double scale)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = kt_f32_to_bf16(kt_fill_value(seed, i, scale));
}

uint16_t kt_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)	/* NaN: keep it a quiet NaN */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);	/* round to nearest, ties to even */
	return (uint16_t)(u >> 16);
}

float kt_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

size_t kt_dtype_size(enum kt_dtype t)
{
	switch (t) {
	case KT_BF16:
		return 2;
	case KT_F32:
	case KT_I32:
		return 4;
	}
	return 0;
}

void kt_buf_set(struct kt_buf *b, const char *name, enum kt_buf_role role, enum kt_dtype t,
		size_t elems, double scale)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->role = role;
	b->dtype = t;
	b->elems = elems;
	b->scale = scale;
}

int kt_program_same(const struct kt_program *a, const struct kt_program *b)
{
	int i;

	if (strcmp(a->tpl, b->tpl) != 0 || a->ndefines != b->ndefines)
		return 0;
	for (i = 0; i < a->ndefines; i++)
		if (strcmp(a->defines[i], b->defines[i]) != 0)
			return 0;
	return 1;
}

int kt_plan_uses_buf(const struct kt_plan *p, int i)
{
	int l, a;

	for (l = 0; l < p->nprep + p->nlaunch; l++) {
		const struct kt_launch *k = l < p->nprep ? &p->prep[l] : &p->launch[l - p->nprep];

		for (a = 0; a < k->nargs; a++)
			if ((k->args[a].kind == KT_ARG_BUF || k->args[a].kind == KT_ARG_TMAP) &&
			    k->args[a].buf == i)
				return 1;
	}
	return 0;
}
