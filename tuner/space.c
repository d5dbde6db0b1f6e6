#include "space.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct space_ctx {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *tgt;
	struct space *sp;
	long cap;
};

static int space_visit(const struct kt_config *c, void *arg)
{
	struct space_ctx *x = arg;
	char why[256];

	x->sp->visited++;
	if (x->f->check(x->f, x->s, c, x->tgt, why, sizeof(why)) != 0) {
		x->sp->pruned++;
		return 0;
	}
	if (x->sp->n == x->cap) {
		long cap = x->cap ? x->cap * 2 : 256;
		struct kt_config *nc = realloc(x->sp->cfg, cap * sizeof(*nc));

		if (!nc)
			return 1;
		x->sp->cfg = nc;
		x->cap = cap;
	}
	x->sp->cfg[x->sp->n++] = *c;
	return 0;
}

int space_build(const struct kt_family *f, const struct kt_shape *s,
		const struct kt_target *tgt, int with_planted, struct space *sp,
		struct kt_err *err)
{
	struct space_ctx x = { f, s, tgt, sp, 0 };

	memset(sp, 0, sizeof(*sp));
	if (kt_space_foreach(f, with_planted, space_visit, &x) != 0) {
		space_release(sp);
		return kt_err_set(err, KT_EINTERNAL, "out of memory enumerating %s", f->name);
	}
	return 0;
}

void space_release(struct space *sp)
{
	if (!sp)
		return;
	free(sp->cfg);
	memset(sp, 0, sizeof(*sp));
}

int space_variant_mask(const struct kt_family *f, const char *list, unsigned *mask,
		       struct kt_err *err)
{
	const char *p = list ? list : "";

	*mask = 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		char name[64], names[512];
		size_t n = 0;
		int v, i;

		if (len == 0 || len >= sizeof(name))
			goto bad;
		memcpy(name, p, len);
		name[len] = 0;
		if ((v = kt_variant_index(f, name)) >= 0) {
			*mask |= 1u << v;
			if (!p[len])
				return 0;
			p += len + 1;
			continue;
		}
bad:
		names[0] = 0;
		for (i = 0; i < f->nvariants && n < sizeof(names); i++)
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
					      f->variants[i]);
		return kt_err_set(err, KT_EINVAL, "variants: '%.*s' is not a variant of %s (%s)",
				  (int)(len < 64 ? len : 64), p, f->name, names);
	}
}

void space_keep_variants(const struct kt_family *f, struct space *sp, unsigned mask)
{
	long i, n = 0;

	for (i = 0; i < sp->n; i++) {
		unsigned bit = 1u << sp->cfg[i].variant;

		if ((mask & bit) || (f->planted & bit))
			sp->cfg[n++] = sp->cfg[i];
	}
	sp->n = n;
}

int space_keep_configs(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *tgt, struct space *sp, const char *const *keys,
		       int n, char *ident, size_t identlen, struct kt_err *err)
{
	char want[512], have[512], why[256];
	unsigned char *keep;
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a over the kept keys */
	long i, m = 0, kept = 0;
	int k;

	if (!(keep = calloc(sp->n ? (size_t)sp->n : 1, 1)))
		return kt_err_set(err, KT_EINTERNAL, "out of memory filtering configs");
	for (k = 0; k < n; k++) {
		struct kt_config c;

		if (kt_config_parse(f, keys[k], &c, err) != 0)
			goto fail;
		kt_config_key(f, &c, want, sizeof(want));
		for (i = 0; i < sp->n; i++) {
			kt_config_key(f, &sp->cfg[i], have, sizeof(have));
			if (strcmp(want, have) == 0)
				break;
		}
		if (i < sp->n) {
			keep[i] = 1;
			continue;
		}
		if (f->check(f, s, &c, tgt, why, sizeof(why)) != 0)
			kt_err_set(err, KT_EINVAL, "config %s does not run here: %s", want, why);
		else
			kt_err_set(err, KT_EINVAL,
				   "config %s is not in this sweep's space (a parameter value "
				   "outside those `ktune families` lists, or a variant left out "
				   "by --variants)", want);
		goto fail;
	}
	for (i = 0; i < sp->n; i++) {
		const char *q;

		if (!keep[i] && !(f->planted & (1u << sp->cfg[i].variant)))
			continue;
		if (keep[i]) {
			kt_config_key(f, &sp->cfg[i], have, sizeof(have));
			for (q = have; *q; q++)
				h = (h ^ (unsigned char)*q) * 1099511628211ULL;
			h = (h ^ ';') * 1099511628211ULL;
			kept++;
		}
		sp->cfg[m++] = sp->cfg[i];
	}
	sp->n = m;
	free(keep);
	snprintf(ident, identlen, "%ld/%016llx", kept, (unsigned long long)h);
	return 0;
fail:
	free(keep);
	return -1;
}
