/*
 * plan.c -- a call's shape, its config (the lookup chain), its plan for the
 * real shape, and where each of the plan's buffers lives. No driver.
 */
#include "rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../kernels/blockattn.h"

static int is_attn(const struct kt_family *f)
{
	return strcmp(f->name, "blockattn_fwd") == 0 || strcmp(f->name, "blockattn_bwd") == 0;
}

static const struct kt_family *family_named(const char *name)
{
	const struct kt_family *f = name ? kt_family_find(name) : NULL;

	return f && !f->hidden ? f : NULL;
}

/* The lookup's lmax when the caller gives none: the generated problems'
 * lengths are uniform in [0.4 lmax, lmax], 0.7 lmax on average. */
static long lmax_estimate(long tokens, long batch)
{
	long mean = (tokens + batch - 1) / batch, l = (long)ceil((double)tokens / (0.7 * (double)batch));

	return l > mean ? l : mean;
}

int rt_shape_attn(int bwd, int64_t batch, int64_t tokens, int64_t heads, int64_t head_dim,
		  int64_t block, int64_t rope, int64_t lmax, struct rt_shape *out)
{
	const struct kt_family *f = family_named(bwd ? "blockattn_bwd" : "blockattn_fwd");
	struct kt_err err = { 0 };
	char text[256];

	memset(out, 0, sizeof(*out));
	if (!f)
		return rt_fail(KTUNE_ERROR_INTERNAL, "attention families missing");
	if (batch < 1 || tokens < 1 || heads < 1)
		return rt_fail(KTUNE_ERROR_INVALID,
			       "%s: batch (%lld), tokens (%lld) and heads (%lld) must be positive",
			       f->name, (long long)batch, (long long)tokens, (long long)heads);
	if (tokens > 2147483647LL || batch > tokens)
		return rt_fail(KTUNE_ERROR_INVALID,
			       "%s: tokens %lld (int32 offsets) with batch %lld: every sequence is "
			       "counted in tokens, so batch <= tokens < 2^31",
			       f->name, (long long)tokens, (long long)batch);
	if (rope < 0 || rope > 2)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: rope %lld: 0, 1 or 2", f->name,
			       (long long)rope);
	if (lmax < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: max_seqlen %lld < 0", f->name,
			       (long long)lmax);
	if (lmax == 0)
		lmax = lmax_estimate((long)tokens, (long)batch);
	if (lmax > 65536)
		lmax = 65536;	/* the lookup's range: the launch does not depend on it */
	snprintf(text, sizeof(text), "seqs=%lld,lmax=%lld,heads=%lld,head_dim=%lld,block=%lld,rope=%lld",
		 (long long)batch, (long long)lmax, (long long)heads, (long long)head_dim,
		 (long long)block, (long long)rope);
	if (kt_shape_parse(f, text, &out->shape, &err) < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: %s", f->name, err.msg);
	out->fam = f;
	out->tokens = (long)tokens;
	out->attn_bwd = bwd;
	snprintf(out->key, sizeof(out->key), "%s seqs=%lld,tokens=%lld,%s", f->name,
		 (long long)batch, (long long)tokens, strchr(text, ',') + 1);
	return KTUNE_OK;
}

int rt_shape_dims(const char *family, const int64_t *dims, int n, struct rt_shape *out)
{
	const struct kt_family *f = family_named(family);
	struct kt_err err = { 0 };
	char text[256];
	size_t len = 0;
	int i;

	memset(out, 0, sizeof(*out));
	if (!f || is_attn(f))
		return rt_fail(KTUNE_ERROR_NOT_FOUND, "unknown linear family '%s'",
			       family ? family : "(null)");
	if (n != f->ndims)
		return rt_fail(KTUNE_ERROR_INTERNAL, "%s: %d dims, not %d", f->name, n, f->ndims);
	text[0] = 0;
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s=%lld", i ? "," : "",
					f->dims[i].name, (long long)dims[i]);
	if (kt_shape_parse(f, text, &out->shape, &err) < 0)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: %s", f->name, err.msg);
	out->fam = f;
	snprintf(out->key, sizeof(out->key), "%s %s", f->name, text);
	return KTUNE_OK;
}

int rt_shape_parse(const char *family, const char *text, struct rt_shape *out)
{
	const struct kt_family *f = family_named(family);
	struct kt_err err = { 0 };
	int64_t v[6] = { -1, -1, -1, -1, -1, 0 }, lmax = 0;
	static const char *const names[] = { "seqs", "tokens", "heads", "head_dim", "block", "rope" };
	char buf[RT_KEY_MAX], *tok, *save = NULL;
	int i;

	memset(out, 0, sizeof(*out));
	if (!f)
		return rt_fail(KTUNE_ERROR_NOT_FOUND, "unknown family '%s'", family ? family : "(null)");
	if (!text)
		return rt_fail(KTUNE_ERROR_INVALID, "%s: no shape", f->name);
	if (!is_attn(f)) {
		if (kt_shape_parse(f, text, &out->shape, &err) < 0)
			return rt_fail(KTUNE_ERROR_INVALID, "%s: %s", f->name, err.msg);
		out->fam = f;
		kt_shape_key(f, &out->shape, buf, sizeof(buf) - 64);
		snprintf(out->key, sizeof(out->key), "%.32s %.250s", f->name, buf);
		return KTUNE_OK;
	}
	if (strlen(text) >= sizeof(buf))
		return rt_fail(KTUNE_ERROR_INVALID, "%s: shape too long", f->name);
	strcpy(buf, text);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		long long x;

		if (!eq)
			return rt_fail(KTUNE_ERROR_INVALID, "%s: '%s' is not key=value", f->name, tok);
		*eq = 0;
		x = strtoll(eq + 1, &end, 10);
		if (*end || end == eq + 1)
			return rt_fail(KTUNE_ERROR_INVALID, "%s: %s=%s is not a number", f->name, tok,
				       eq + 1);
		if (strcmp(tok, "lmax") == 0) {
			lmax = x;
			continue;
		}
		for (i = 0; i < 6 && strcmp(tok, names[i]) != 0; i++)
			;
		if (i == 6)
			return rt_fail(KTUNE_ERROR_INVALID,
				       "%s: unknown key '%s' (seqs, tokens, heads, head_dim, block, "
				       "rope, lmax)", f->name, tok);
		v[i] = x;
	}
	/* a tuned problem's key (seqs, lmax: its generated lengths) */
	if (v[1] < 0 && lmax > 0 && v[0] > 0 && lmax <= 65536 && v[0] <= (1L << 20))
		v[1] = ba_tokens((long)v[0], (long)lmax);
	for (i = 0; i < 5; i++)
		if (v[i] < 0)
			return rt_fail(KTUNE_ERROR_INVALID, "%s: shape lacks %s", f->name, names[i]);
	return rt_shape_attn(strcmp(f->name, "blockattn_bwd") == 0, v[0], v[1], v[2], v[3], v[4],
			     v[5], lmax, out);
}

int rt_prepared_layout(const struct kt_family *f, const struct kt_shape *s,
		       const struct kt_target *tgt, struct kt_plan *plan,
		       struct kt_buf bufs[KT_MAX_BUFS], int *nbufs, size_t offs[KT_MAX_BUFS],
		       size_t *total)
{
	struct kt_plan p;
	struct kt_buf b[KT_MAX_BUFS];
	struct kt_err err = { 0 };
	int n = 0, i;

	*total = 0;
	if (!f->prepare_plan)
		return KTUNE_OK;
	if (f->prepare_plan(f, s, tgt, &p, b, &n, &err) < 0)
		return rt_fail_err(&err);
	for (i = 0; i < n; i++) {
		if (offs)
			offs[i] = 0;
		if (!b[i].prepared)
			continue;
		if (offs)
			offs[i] = *total;
		*total += (b[i].elems * kt_dtype_size(b[i].dtype) + RT_ALIGN - 1) / RT_ALIGN *
			  RT_ALIGN;
	}
	if (plan)
		*plan = p;
	if (bufs) {
		memcpy(bufs, b, sizeof(b));
		*nbufs = n;
	}
	return KTUNE_OK;
}

/* The asked device's index in the table (rt_call_plan), or -1. */
static int table_device(const struct ktune_table *t, const struct chain_device *dev,
			const char *uuid)
{
	const char *want = t->device[0] ? t->device : uuid;
	int i;

	for (i = 0; want && want[0] && t->uuids && i < t->ndevices; i++)
		if (strcmp(t->uuids[i], want) == 0)
			return i;
	want = t->device[0] ? t->device : dev->name;
	for (i = 0; want[0] && i < t->ndevices; i++)
		if (strcasecmp(t->devices[i].name, want) == 0 &&
		    chain_arch_same(t->devices[i].arch, dev->arch))
			return i;
	return -1;
}

/* Every buffer's place: the caller's inputs and outputs in order, the
 * prepared buffers in the family's prepared layout (by name), the scratch
 * the plan uses in the workspace; scratch no launch takes nowhere. */
static int bind_buffers(struct rt_call *c)
{
	const struct kt_family *f = c->shape.fam;
	struct kt_buf pb[KT_MAX_BUFS];
	size_t poffs[KT_MAX_BUFS], ptotal = 0;
	int i, j, pn = 0, rc;

	if (f->prepare_plan &&
	    (rc = rt_prepared_layout(f, &c->shape.shape, &c->target, NULL, pb, &pn, poffs,
				     &ptotal)) != KTUNE_OK)
		return rc;
	c->prep_bytes = ptotal;
	for (i = 0; i < c->nbufs; i++) {
		struct kt_buf *b = &c->bufs[i];
		struct rt_bind *d = &c->bind[i];
		size_t bytes = b->elems * kt_dtype_size(b->dtype);

		memset(d, 0, sizeof(*d));
		if (b->role != KT_BUF_SCRATCH) {
			d->kind = RT_USER;
			d->user = c->nuser++;
			continue;
		}
		if (!kt_plan_uses_buf(&c->plan, i))
			continue;
		d->bytes = bytes;
		if (b->prepared) {
			for (j = 0; j < pn; j++)
				if (pb[j].prepared && strcmp(pb[j].name, b->name) == 0)
					break;
			if (j == pn || pb[j].elems != b->elems || pb[j].dtype != b->dtype)
				return rt_fail(KTUNE_ERROR_INTERNAL,
					       "%s: the config's prepared '%s' is not in the family's "
					       "prepared layout", f->name, b->name);
			d->kind = RT_PREP;
			d->offset = poffs[j];
			continue;
		}
		d->kind = RT_WS;
		d->offset = c->ws_bytes;
		c->ws_bytes += (bytes + RT_ALIGN - 1) / RT_ALIGN * RT_ALIGN;
	}
	/* a launch that writes a prepared buffer ran at prepare time */
	for (i = 0; i < c->plan.nprep + c->plan.nlaunch; i++) {
		const struct kt_launch *l = i < c->plan.nprep ? &c->plan.prep[i]
							       : &c->plan.launch[i - c->plan.nprep];

		c->run[i] = 1;
		for (j = 0; i < c->plan.nprep && j < l->nargs; j++)
			if ((l->args[j].kind == KT_ARG_BUF || l->args[j].kind == KT_ARG_TMAP) &&
			    c->bind[l->args[j].buf].kind == RT_PREP)
				c->run[i] = 0;
	}
	return KTUNE_OK;
}

/* The prepare plan as a call: the weights from the caller (the other
 * problem buffers unused, NULL allowed), every prepared buffer in its
 * place, every prep launch run. */
static int prepare_call(const struct rt_shape *s, const struct chain_device *dev,
			struct rt_call *c)
{
	size_t offs[KT_MAX_BUFS], total;
	struct kt_err err = { 0 };
	int rc, i;

	if (chain_target(dev->arch, dev, &c->target, &err) < 0)
		return rt_fail(KTUNE_ERROR_UNSUPPORTED, "%s", err.msg);
	kt_target_arch(&c->target, c->arch, sizeof(c->arch));
	if ((rc = rt_prepared_layout(s->fam, &s->shape, &c->target, &c->plan, c->bufs, &c->nbufs,
				     offs, &total)) != KTUNE_OK)
		return rc;
	c->prep_bytes = total;
	for (i = 0; i < c->nbufs; i++) {
		struct rt_bind *d = &c->bind[i];

		if (c->bufs[i].role != KT_BUF_SCRATCH) {
			d->kind = kt_plan_uses_buf(&c->plan, i) ? RT_USER : RT_NONE;
			d->user = c->nuser++;
		} else if (c->bufs[i].prepared) {
			d->kind = RT_PREP;
			d->offset = offs[i];
			d->bytes = c->bufs[i].elems * kt_dtype_size(c->bufs[i].dtype);
		}
	}
	for (i = 0; i < c->plan.nprep; i++)
		c->run[i] = 1;
	c->choice.nkernels = c->plan.nprep;
	c->choice.prepared_bytes = (int64_t)total;
	snprintf(c->choice.family, sizeof(c->choice.family), "%s", s->fam->name);
	snprintf(c->choice.arch, sizeof(c->choice.arch), "%s", c->arch);
	return KTUNE_OK;
}

/* The plan of config cfg for s: the family's for its shape, attention's
 * for the bound of its real tokens. */
static int plan_for(const struct rt_shape *s, const struct kt_config *cfg,
		    const struct kt_target *tgt, struct kt_plan *plan, struct kt_buf *bufs,
		    int *nbufs, struct kt_err *err)
{
	if (s->tokens)
		return ba_plan_bound(s->attn_bwd, &s->shape, s->tokens, cfg, tgt, plan, bufs, nbufs,
				     err);
	if (s->fam->plan(s->fam, &s->shape, cfg, tgt, plan, err) < 0)
		return -1;
	*nbufs = s->fam->buffers(s->fam, &s->shape, cfg, bufs);
	return 0;
}

int rt_entry_plans(const struct kt_family *f, const struct kt_shape *s,
		   const struct kt_config *c, const struct kt_target *tgt, struct kt_plan *plan,
		   struct kt_plan *prep, struct kt_err *err)
{
	struct kt_buf bufs[KT_MAX_BUFS];
	struct rt_shape rs;
	int n;

	memset(&rs, 0, sizeof(rs));
	rs.fam = f;
	rs.shape = *s;
	if (is_attn(f)) {
		rs.tokens = ba_tokens(s->v[BA_D_SEQS], s->v[BA_D_LMAX]);
		rs.attn_bwd = strcmp(f->name, "blockattn_bwd") == 0;
	}
	memset(prep, 0, sizeof(*prep));
	if (plan_for(&rs, c, tgt, plan, bufs, &n, err) < 0)
		return -1;
	if (f->prepare_plan && f->prepare_plan(f, s, tgt, prep, bufs, &n, err) < 0)
		return -1;
	return 0;
}

int rt_call_plan(const struct ktune_table *t, const struct rt_shape *s,
		 const struct chain_device *dev, const char *uuid, struct rt_call *c)
{
	struct chain_table ct = { t->ndevices, t->devices, t->nentries, t->entries };
	struct chain_query q;
	struct kt_err err = { 0 };
	ktune_choice *ch = &c->choice;
	int rc, i;

	memset(c, 0, sizeof(*c));
	c->shape = *s;
	if (s->prepare)
		return prepare_call(s, dev, c);
	memset(&q, 0, sizeof(q));
	q.fam = s->fam;
	q.shape = s->shape;
	q.device = table_device(t, dev, uuid);
	q.arch = dev->arch;
	q.max_distance = t->max_distance;
	q.actual = dev;
	if (chain_best(&ct, &q, &c->ans, &err) < 0)
		return err.code == KT_ENOTFOUND ? rt_fail(KTUNE_ERROR_UNSUPPORTED, "%s", err.msg)
						: rt_fail_err(&err);
	c->target = c->ans.target;
	kt_target_arch(&c->target, c->arch, sizeof(c->arch));
	if (plan_for(s, &c->ans.cfg, &c->target, &c->plan, c->bufs, &c->nbufs, &err) < 0)
		return rt_fail(KTUNE_ERROR_UNSUPPORTED, "%s", err.msg);
	if ((rc = bind_buffers(c)) != KTUNE_OK)
		return rc;

	snprintf(ch->match, sizeof(ch->match), "%s", chain_match_name(c->ans.match));
	snprintf(ch->family, sizeof(ch->family), "%s", s->fam->name);
	snprintf(ch->shape, sizeof(ch->shape), "%s", strchr(s->key, ' ') + 1);
	if (c->ans.entry >= 0) {
		const struct chain_entry *e = &t->entries[c->ans.entry];

		kt_shape_key(s->fam, &e->shape, ch->tuned_shape, sizeof(ch->tuned_shape));
		ch->tuned_us = e->median_us;
	}
	kt_config_key(s->fam, &c->ans.cfg, ch->config, sizeof(ch->config));
	snprintf(ch->arch, sizeof(ch->arch), "%s", c->arch);
	ch->distance = c->ans.distance;
	ch->workspace_bytes = (int64_t)c->ws_bytes;
	ch->prepared_bytes = (int64_t)c->prep_bytes;
	for (i = 0; i < c->plan.nprep + c->plan.nlaunch; i++)
		ch->nkernels += c->run[i];
	ch->shipped = 1;
	for (i = 0; i < c->plan.nprograms; i++)
		if (!rt_bin_find(t, &c->plan.programs[i], c->arch))
			ch->shipped = 0;
	return KTUNE_OK;
}
