/*
 * replay.c -- recorded sweeps and strategies run against them (see
 * replay.h).
 */
#include "replay.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../db/store.h"

#define REPLAY_MAGIC "# ktune replay 1"

void replay_rec_release(struct replay_rec *r)
{
	if (!r)
		return;
	space_release(&r->sp);
	free(r->status);
	free(r->us);
	memset(r, 0, sizeof(*r));
}

/* Room for one more config. */
static int rec_grow(struct replay_rec *r, long *cap, struct kt_err *err)
{
	long ncap;
	void *a, *b, *c;

	if (r->sp.n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 256;
	a = realloc(r->sp.cfg, (size_t)ncap * sizeof(*r->sp.cfg));
	if (a)
		r->sp.cfg = a;
	b = realloc(r->status, (size_t)ncap * sizeof(*r->status));
	if (b)
		r->status = b;
	c = realloc(r->us, (size_t)ncap * sizeof(*r->us));
	if (c)
		r->us = c;
	if (!a || !b || !c)
		return kt_err_set(err, KT_EINTERNAL, "out of memory reading a recording");
	*cap = ncap;
	return 0;
}

static int status_known(const char *s)
{
	static const char *const st[] = { "ok", "wrong", "compile_error", "launch_error", "fault",
					  "timeout" };
	size_t i;

	for (i = 0; i < sizeof(st) / sizeof(st[0]); i++)
		if (strcmp(s, st[i]) == 0)
			return 1;
	return 0;
}

/* The next whitespace-separated word of *p (NUL-terminated in place). */
static char *word(char **p)
{
	char *w;

	while (**p && isspace((unsigned char)**p))
		(*p)++;
	if (!**p)
		return NULL;
	w = *p;
	while (**p && !isspace((unsigned char)**p))
		(*p)++;
	if (**p)
		*(*p)++ = 0;
	return w;
}

int replay_load_file(const char *path, struct replay_rec *r, struct kt_err *err)
{
	FILE *fp = NULL;
	char line[2048];
	int pidx[KT_MAX_PARAMS], np = -1, lineno = 0, have_shape = 0, rc = -1, magic = 0;
	long cap = 0;

	memset(r, 0, sizeof(*r));
	if (!(fp = fopen(path, "r")))
		return kt_err_set(err, errno == ENOENT ? KT_ENOTFOUND : KT_EIO, "cannot read %s: %s",
				  path, strerror(errno));
	while (fgets(line, sizeof(line), fp)) {
		char *p = line, *key, *nl = strchr(line, '\n');

		lineno++;
		if (!nl && !feof(fp)) {
			kt_err_set(err, KT_EINVAL, "%s:%d: line too long", path, lineno);
			goto out;
		}
		if (nl)
			*nl = 0;
		if (lineno == 1) {
			if (strcmp(line, REPLAY_MAGIC) != 0) {
				kt_err_set(err, KT_EINVAL, "%s: not a ktune replay file (the first line "
					   "is not \"%s\")", path, REPLAY_MAGIC);
				goto out;
			}
			magic = 1;
			continue;
		}
		if (line[0] == '#' || !(key = word(&p)))
			continue;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strcmp(key, "family") == 0) {
			if (!(r->f = kt_family_find(p))) {
				kt_err_set(err, KT_ENOTFOUND, "%s:%d: unknown family '%s'", path, lineno, p);
				goto out;
			}
		} else if (strcmp(key, "shape") == 0) {
			struct kt_err pe = { 0 };

			if (!r->f) {
				kt_err_set(err, KT_EINVAL, "%s:%d: shape before family", path, lineno);
				goto out;
			}
			if (kt_shape_parse(r->f, p, &r->shape, &pe) != 0) {
				kt_err_set(err, KT_EINVAL, "%s:%d: %s", path, lineno, pe.msg);
				goto out;
			}
			have_shape = 1;
		} else if (strcmp(key, "device") == 0) {
			snprintf(r->device, sizeof(r->device), "%s", p);
		} else if (strcmp(key, "source") == 0) {
			snprintf(r->source, sizeof(r->source), "%s", p);
		} else if (strcmp(key, "params") == 0) {
			char *w;

			if (!r->f) {
				kt_err_set(err, KT_EINVAL, "%s:%d: params before family", path, lineno);
				goto out;
			}
			np = 0;
			while ((w = word(&p))) {
				int i;

				for (i = 0; i < r->f->nparams; i++)
					if (strcmp(r->f->params[i].name, w) == 0)
						break;
				if (i == r->f->nparams || np == KT_MAX_PARAMS) {
					kt_err_set(err, KT_EINVAL, "%s:%d: %s has no parameter %s", path,
						   lineno, r->f->name, w);
					goto out;
				}
				pidx[np++] = i;
			}
		} else {
			/* a config line: variant, values, status, time */
			struct kt_config c;
			char *w, *st, *us, *end;
			int i, v;

			if (np < 0 || !have_shape) {
				kt_err_set(err, KT_EINVAL, "%s:%d: a config before the family, shape "
					   "and params lines", path, lineno);
				goto out;
			}
			if ((v = kt_variant_index(r->f, key)) < 0) {
				kt_err_set(err, KT_EINVAL, "%s:%d: %s has no variant %s", path, lineno,
					   r->f->name, key);
				goto out;
			}
			memset(&c, 0, sizeof(c));
			c.variant = v;
			for (i = 0; i < r->f->nparams; i++)
				if (r->f->params[i].variants & (1u << v))
					c.p[i] = r->f->params[i].absent;
			for (i = 0; i < np; i++) {
				if (!(w = word(&p))) {
					kt_err_set(err, KT_EINVAL, "%s:%d: too few values", path, lineno);
					goto out;
				}
				if (strcmp(w, "-") == 0)
					continue;
				errno = 0;
				c.p[pidx[i]] = strtol(w, &end, 10);
				if (*end || errno) {
					kt_err_set(err, KT_EINVAL, "%s:%d: '%s' is not a number", path,
						   lineno, w);
					goto out;
				}
			}
			st = word(&p);
			us = word(&p);
			if (!st || !us || word(&p) || !status_known(st)) {
				kt_err_set(err, KT_EINVAL, "%s:%d: want a status and a time after the "
					   "values", path, lineno);
				goto out;
			}
			if (rec_grow(r, &cap, err) != 0)
				goto out;
			r->sp.cfg[r->sp.n] = c;
			snprintf(r->status[r->sp.n], sizeof(r->status[0]), "%s", st);
			r->us[r->sp.n] = 0;
			if (strcmp(st, "ok") == 0) {
				r->us[r->sp.n] = strtod(us, &end);
				if (*end || !(r->us[r->sp.n] > 0)) {
					kt_err_set(err, KT_EINVAL, "%s:%d: an ok config needs a time > 0",
						   path, lineno);
					goto out;
				}
			}
			r->sp.n++;
		}
	}
	if (ferror(fp)) {
		kt_err_set(err, KT_EIO, "reading %s failed", path);
		goto out;
	}
	if (!magic || !r->f || !have_shape || r->sp.n == 0) {
		kt_err_set(err, KT_EINVAL, "%s: no family, shape or configs", path);
		goto out;
	}
	rc = 0;
out:
	fclose(fp);
	if (rc != 0)
		replay_rec_release(r);
	return rc;
}

int replay_load_db(const char *db, int64_t sweep_id, struct replay_rec *r, struct kt_err *err)
{
	struct store *st = NULL;
	struct store_sweep sw;
	struct store_trial_row *rows = NULL;
	int n = 0, i, rc = -1;
	long cap = 0;

	memset(r, 0, sizeof(*r));
	memset(&sw, 0, sizeof(sw));
	if (store_open(db, STORE_RO, &st, err) != 0)
		return -1;
	if (store_sweep_get(st, sweep_id, &sw, err) != 0)
		goto out;
	if (!(r->f = kt_family_find(sw.family))) {
		kt_err_set(err, KT_ENOTFOUND, "sweep %lld is of family %s, unknown here",
			   (long long)sweep_id, sw.family);
		goto out;
	}
	if (kt_shape_parse(r->f, sw.shape_key, &r->shape, err) != 0)
		goto out;
	{
		json_t *prov = json_loads(sw.provenance_json ? sw.provenance_json : "{}", 0, NULL);
		json_t *dev = json_object_get(prov, "device");

		snprintf(r->device, sizeof(r->device), "%s %s",
			 json_string_value(json_object_get(dev, "name")) ?
			 json_string_value(json_object_get(dev, "name")) : "unknown",
			 json_string_value(json_object_get(dev, "uuid")) ?
			 json_string_value(json_object_get(dev, "uuid")) : "");
		json_decref(prov);
	}
	snprintf(r->source, sizeof(r->source), "sweep %lld (%s) of %s", (long long)sweep_id,
		 sw.strategy, db);
	if (store_trials_list(st, sweep_id, 0, &rows, &n, err) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		struct kt_config c;
		struct kt_err pe = { 0 };

		/* a config this build cannot parse (a retired parameter) is left out */
		if (kt_config_parse(r->f, rows[i].config_key, &c, &pe) != 0)
			continue;
		if (rec_grow(r, &cap, err) != 0)
			goto out;
		r->sp.cfg[r->sp.n] = c;
		snprintf(r->status[r->sp.n], sizeof(r->status[0]), "%s", rows[i].status);
		r->us[r->sp.n] = strcmp(rows[i].status, "ok") == 0 ? rows[i].median_us : 0;
		r->sp.n++;
	}
	if (r->sp.n == 0) {
		kt_err_set(err, KT_EINVAL, "sweep %lld has no trials to replay", (long long)sweep_id);
		goto out;
	}
	rc = 0;
out:
	store_trial_rows_free(rows, n);
	store_sweep_release(&sw);
	store_close(st);
	if (rc != 0)
		replay_rec_release(r);
	return rc;
}

int replay_write_file(const struct replay_rec *r, const char *path, const char *source,
		      struct kt_err *err)
{
	FILE *fp;
	char shape[256];
	long i;
	int p, bad;

	if (!(fp = fopen(path, "w")))
		return kt_err_set(err, KT_EIO, "cannot write %s: %s", path, strerror(errno));
	kt_shape_key(r->f, &r->shape, shape, sizeof(shape));
	fprintf(fp, "%s\n# a recorded sweep: variant, parameter values ('-': unused), status, "
		"median us\nfamily %s\nshape %s\ndevice %s\nsource %s\nparams", REPLAY_MAGIC,
		r->f->name, shape, r->device[0] ? r->device : "unknown",
		source ? source : r->source[0] ? r->source : "unknown");
	for (p = 0; p < r->f->nparams; p++)
		fprintf(fp, " %s", r->f->params[p].name);
	fputc('\n', fp);
	for (i = 0; i < r->sp.n; i++) {
		const struct kt_config *c = &r->sp.cfg[i];

		fprintf(fp, "%s", r->f->variants[c->variant]);
		for (p = 0; p < r->f->nparams; p++)
			if (r->f->params[p].variants & (1u << c->variant))
				fprintf(fp, " %ld", c->p[p]);
			else
				fputs(" -", fp);
		if (strcmp(r->status[i], "ok") == 0)
			fprintf(fp, " ok %.3f\n", r->us[i]);
		else
			fprintf(fp, " %s -\n", r->status[i]);
	}
	bad = ferror(fp);
	if (fclose(fp) != 0 || bad)
		return kt_err_set(err, KT_EIO, "writing %s failed", path);
	return 0;
}

long replay_best(const struct replay_rec *r)
{
	long i, best = -1;

	for (i = 0; i < r->sp.n; i++)
		if (r->us[i] > 0 && !(r->f->planted & (1u << r->sp.cfg[i].variant)) &&
		    (best < 0 || r->us[i] < r->us[best]))
			best = i;
	return best;
}

int replay_prior(const struct replay_rec *recs, int nrecs, int except,
		 struct strategy_prior_row **rows, long *nrows, struct kt_err *err)
{
	long n = 0, i;
	int k;

	*rows = NULL;
	*nrows = 0;
	for (k = 0; k < nrecs; k++)
		if (k != except && recs[k].f == recs[except].f)
			n += recs[k].sp.n;
	if (n == 0)
		return 0;
	if (!(*rows = calloc((size_t)n, sizeof(**rows))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	for (k = 0; k < nrecs; k++) {
		if (k == except || recs[k].f != recs[except].f)
			continue;
		for (i = 0; i < recs[k].sp.n; i++) {
			struct strategy_prior_row *p;

			if (!(recs[k].us[i] > 0))
				continue;
			p = &(*rows)[(*nrows)++];
			p->shape = recs[k].shape;
			p->cfg = recs[k].sp.cfg[i];
			p->us = recs[k].us[i];
			p->group = k;
			p->same_device = strcmp(recs[k].device, recs[except].device) == 0;
		}
	}
	return 0;
}

int replay_run(const struct replay_rec *r, const struct strategy_spec *spec,
	       struct replay_result *res, struct kt_err *err)
{
	struct strategy *st = NULL;
	long idx[32], k, i;

	memset(res, 0, sizeof(*res));
	res->winner = -1;
	res->best = replay_best(r);
	res->best_us = res->best >= 0 ? r->us[res->best] : 0;
	for (i = 0; i < r->sp.n; i++)
		res->space += !(r->f->planted & (1u << r->sp.cfg[i].variant));
	if (strategy_new(spec, r->f, &r->shape, &r->sp, &st, err) != 0)
		return -1;
	while ((k = strategy_next(st, idx, 32)) > 0)
		for (i = 0; i < k; i++) {
			long c = idx[i];
			double us = r->us[c];

			if (!(r->f->planted & (1u << r->sp.cfg[c].variant)))
				res->trials++;
			if (us > 0 && (res->winner < 0 || us < res->winner_us)) {
				res->winner = c;
				res->winner_us = us;
			}
			strategy_report(st, c, us > 0 ? us : -1);
		}
	res->stop = strategy_stop_reason(st);
	res->speed = res->winner_us > 0 ? res->best_us / res->winner_us : 0;
	strategy_free(st);
	return 0;
}
