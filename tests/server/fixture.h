/*
 * fixture.h -- a small ktune database built through the store API, shared by
 * test_server, test_export and test_dashboard (included by each; test-only).
 *
 * Three devices (two sm_90, one sm_80 with nothing tuned), dense and lowrank
 * problems, three trials per sweep: two ok (the faster one wins) and one
 * `wrong` that is faster still and must never win. Configs are taken from
 * the family's real space, valid under check() on the device's target, so
 * lookups, plans and exports work on them. One problem (dense tokens=160)
 * is tuned with BLOCK_M=256 so that it is the closest shape to tokens=120
 * but not valid there: "nearest" must skip it.
 *
 * Also the devices of a store with several GPUs of one model and its
 * builder, fx_sib_build(); each test that uses it lists its own entries
 * and the shapes it asks.
 */
#ifndef KT_TEST_FIXTURE_H
#define KT_TEST_FIXTURE_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/store.h"
#include "kernels/family.h"
#include "server/lookup.h"

#define FX_UNUSED __attribute__((unused))

struct fx_dev {
	const char *name, *uuid, *arch;
	int sms;
	long l2;
	int smem;
};

/* The target check() and plan() see for fixture device fd, as the lookup
 * builds it from a stored device: 0, or -1 with err set. */
static FX_UNUSED int fx_dev_target(const struct fx_dev *fd, struct kt_target *t,
				   struct kt_err *err)
{
	struct store_device d;

	memset(&d, 0, sizeof(d));
	d.sms = fd->sms;
	d.l2_bytes = fd->l2;
	d.smem_optin = fd->smem;
	return lookup_device_target(fd->arch, &d, t, err);
}

static const struct fx_dev fx_devs[] FX_UNUSED = {
	{ "NVIDIA H200", "GPU-fx-h200", "sm_90", 132, 62914560, 232448 },
	{ "NVIDIA H100", "GPU-fx-h100", "sm_90", 132, 52428800, 232448 },
	{ "NVIDIA A100", "GPU-fx-a100", "sm_80", 108, 41943040, 166912 },
};
#define FX_NDEVS 3

struct fx_problem {
	int dev;
	const char *family;
	const char *shape;
	long want_block_m;	/* winner must have this BLOCK_M; 0: any */
};

static const struct fx_problem fx_problems[] FX_UNUSED = {
	{ 0, "dense", "tokens=1024,in=4096,out=4096", 0 },
	{ 0, "dense", "tokens=16,in=4096,out=4096", 0 },
	{ 0, "dense", "tokens=160,in=4096,out=4096", 256 },
	{ 0, "dense", "tokens=4096,in=4096,out=11008", 0 },
	{ 0, "lowrank", "tokens=1024,in=4096,out=4096,rank=1024", 0 },
	{ 0, "lowrank", "tokens=1024,in=4096,out=4096,rank=256", 0 },
	{ 0, "blockattn_fwd", "seqs=64,lmax=256,heads=4,head_dim=128,block=64,rope=0", 0 },
	{ 1, "dense", "tokens=2048,in=2048,out=2048", 0 },
};
#define FX_NPROBLEMS 8
#define FX_NH200 7	/* problems tuned on the H200 */

struct fx_result {
	char winner_key[FX_NPROBLEMS][512];	/* expected winning config */
	double winner_us[FX_NPROBLEMS];
	int64_t sweep_id[FX_NPROBLEMS];
};

struct fx_pick {
	const struct kt_family *f;
	const struct kt_shape *s;
	const struct kt_target *t;
	long want_block_m;
	int n;
	struct kt_config c[3];
};

static int fx_pick_fn(const struct kt_config *c, void *arg)
{
	struct fx_pick *p = arg;
	char why[160];

	if (p->f->check(p->f, p->s, c, p->t, why, sizeof(why)) != 0)
		return 0;
	if (p->n == 0 && p->want_block_m && kt_config_get(p->f, c, "BLOCK_M") != p->want_block_m)
		return 0;
	p->c[p->n++] = *c;
	return p->n == 3;
}

static FX_UNUSED char *fx_dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

/* Interns config c of family f (its canonical key into key, its params as
 * JSON) into st; *cfg gets the row id. 0, or -1 with err set. */
static FX_UNUSED int fx_config_intern(struct store *st, const struct kt_family *f,
				      const struct kt_config *c, char *key, size_t keylen,
				      int64_t *cfg, struct kt_err *err)
{
	char *js;
	int r;

	kt_config_key(f, c, key, keylen);
	js = fx_dump(famjson_config(f, c));
	r = store_config_intern(st, f->name, key, js, cfg, err);
	free(js);
	return r < 0 ? -1 : 0;
}

/* Upserts devs[0..n), each with base's clocks and versions (NULL: none);
 * ids[i] gets devs[i]'s row id. 0, or -1 with err set. */
static FX_UNUSED int fx_devices_upsert(struct store *st, const struct fx_dev *devs, int n,
				       const struct store_device *base, int64_t *ids,
				       struct kt_err *err)
{
	int i;

	for (i = 0; i < n; i++) {
		struct store_device d;

		memset(&d, 0, sizeof(d));
		if (base)
			d = *base;
		snprintf(d.name, sizeof(d.name), "%s", devs[i].name);
		snprintf(d.uuid, sizeof(d.uuid), "%s", devs[i].uuid);
		snprintf(d.arch, sizeof(d.arch), "%s", devs[i].arch);
		d.sms = devs[i].sms;
		d.l2_bytes = devs[i].l2;
		d.smem_optin = devs[i].smem;
		if (store_device_upsert(st, &d, err) < 0)
			return -1;
		ids[i] = d.id;
	}
	return 0;
}

/* What fx_build's devices report besides fx_devs. */
static const struct store_device fx_dev_base FX_UNUSED = {
	.clock_mhz = 1980,
	.mem_clock_mhz = 3201,
	.driver = "580.95",
	.cuda = "13.0",
	.nvrtc = "13.0",
};

/* Builds the database at path; 0 on success (messages on stderr). */
static FX_UNUSED int fx_build(const char *path, struct fx_result *res)
{
	struct store *st = NULL;
	struct kt_err err = { 0 };
	int64_t dev_ids[FX_NDEVS];
	int i, k, rc = -1;

	memset(res, 0, sizeof(*res));
	if (store_open(path, STORE_RW, &st, &err) < 0 ||
	    fx_devices_upsert(st, fx_devs, FX_NDEVS, &fx_dev_base, dev_ids, &err) < 0)
		goto out;
	for (i = 0; i < FX_NPROBLEMS; i++) {
		const struct fx_problem *p = &fx_problems[i];
		const struct kt_family *f = kt_family_find(p->family);
		struct kt_shape s;
		struct kt_target t;
		struct fx_pick pk;
		struct store_sweep_spec spec;
		int64_t prob, sweep;
		char *shape_json, prov[256];
		int resumed;
		double floor_us, base;

		if (!f || kt_shape_parse(f, p->shape, &s, &err) < 0)
			goto out;
		if (fx_dev_target(&fx_devs[p->dev], &t, &err) < 0)
			goto out;
		memset(&pk, 0, sizeof(pk));
		pk.f = f;
		pk.s = &s;
		pk.t = &t;
		pk.want_block_m = p->want_block_m;
		kt_space_foreach(f, 0, fx_pick_fn, &pk);
		if (pk.n < 3) {
			fprintf(stderr, "fixture: only %d valid configs for %s %s\n", pk.n, p->family, p->shape);
			goto out;
		}
		shape_json = fx_dump(famjson_shape(f, &s));
		if (store_problem_intern(st, f->name, p->shape, shape_json, &prob, &err) < 0) {
			free(shape_json);
			goto out;
		}
		free(shape_json);
		snprintf(prov, sizeof(prov),
			 "{\"device\":\"%s\",\"ktune_version\":\"fixture\",\"template_hash\":\"f1x7\"}",
			 fx_devs[p->dev].name);
		memset(&spec, 0, sizeof(spec));
		spec.device_id = dev_ids[p->dev];
		spec.problem_id = prob;
		spec.strategy = "exhaustive";
		spec.options_key = "fixture";
		spec.provenance_json = prov;
		spec.planned = 3;
		if (store_sweep_begin(st, &spec, &sweep, &resumed, &err) < 0)
			goto out;
		/* times above the H200's floor, on every fixture device (the
		 * others' peaks are not measured) */
		floor_us = kt_floor_us(f, &s, "NVIDIA H200");
		base = floor_us * 1.5 + i;
		for (k = 0; k < 3; k++) {
			struct store_trial tr;
			char key[512];
			int64_t cfg;

			if (fx_config_intern(st, f, &pk.c[k], key, sizeof(key), &cfg, &err) < 0)
				goto out;
			memset(&tr, 0, sizeof(tr));
			tr.sweep_id = sweep;
			tr.config_id = cfg;
			/* Config 0 wins; config 2 is faster but wrong. */
			tr.status = k == 2 ? "wrong" : "ok";
			tr.median_us = k == 0 ? base : k == 1 ? base * 1.3 : base * 0.5;
			tr.min_us = tr.median_us * 0.98;
			tr.p90_us = tr.median_us * 1.02;
			tr.spread = 0.04;
			tr.reps = 50;
			tr.rel_err = k == 2 ? 0.5 : 0.001;
			tr.compile_ms = 300;
			if (k == 2)
				tr.message = "max rel err 0.5 > tol";
			if (store_trial_add(st, &tr, &err) < 0)
				goto out;
			if (k == 0) {
				snprintf(res->winner_key[i], sizeof(res->winner_key[i]), "%s", key);
				res->winner_us[i] = tr.median_us;
			}
		}
		if (store_retime_set(st, sweep, res->winner_key[i], base * 1.01, &err) < 0 ||
		    store_baseline_add(st, dev_ids[p->dev], prob, sweep, "cublas_dense", base * 1.2, &err) < 0 ||
		    store_baseline_add(st, dev_ids[p->dev], prob, sweep, "naive", base * 4, &err) < 0 ||
		    store_sweep_end(st, sweep, STORE_SWEEP_DONE, &err) < 0)
			goto out;
		res->sweep_id[i] = sweep;
	}
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "fixture: %s\n", err.msg);
	store_close(st);
	return rc;
}

/* ---- a store with several GPUs of one model ----
 *
 * Three "NVIDIA H200" of sm_90 (the third named in lower case: names
 * compare case-insensitively), an H100 of the same arch (another model)
 * and an "NVIDIA H200" claiming sm_80 (same name, another arch: another
 * model too). Asking by the name resolves to the first, GPU-sib-a. A test
 * lists its own entries on these devices and the shapes it asks; every
 * entry gets its own config (the i-th of those valid on the sm_90 H200
 * for every shape of its family stored or asked), so a config key says
 * which entry answered. */
static const struct fx_dev fx_sib_devs[] FX_UNUSED = {
	{ "NVIDIA H200", "GPU-sib-a", "sm_90", 132, 62914560, 232448 },
	{ "NVIDIA H200", "GPU-sib-b", "sm_90", 132, 62914560, 232448 },
	{ "nvidia h200", "GPU-sib-c", "sm_90", 132, 62914560, 232448 },
	{ "NVIDIA H100", "GPU-sib-h100", "sm_90", 132, 52428800, 232448 },
	{ "NVIDIA H200", "GPU-sib-x80", "sm_80", 108, 41943040, 166912 },
};
enum fx_sib_dev { FX_SIB_A, FX_SIB_B, FX_SIB_C, FX_SIB_H100, FX_SIB_X80, FX_SIB_NDEVS };
#define FX_SIB_NMODEL 3	/* the first three: the sm_90 H200s */

struct fx_sib_entry {
	enum fx_sib_dev dev;
	const char *family, *shape;
	double us;
};

struct fx_sib_set {
	const struct fx_sib_entry *entries;
	int nentries;
	/* Shapes asked (perhaps stored nowhere): entry configs are valid there too. */
	int nasked;
	void (*asked)(int i, const char **family, const char **shape);
	char (*keys)[512];	/* out: entry i's config key */
};

/* Stores one tuned entry: f's problem at shape, config c (its key into
 * key) and a done sweep of it on device dev_id (options "siblings") whose
 * one ok trial took us (min 2% under, p90 2% over). 0, or -1 with err set. */
static FX_UNUSED int fx_sib_entry_add(struct store *st, int64_t dev_id, const struct kt_family *f,
				      const char *shape, const struct kt_config *c, double us,
				      char *key, size_t keylen, struct kt_err *err)
{
	struct store_sweep_spec spec;
	struct store_trial tr;
	struct kt_shape s;
	int64_t prob, cfg, sweep;
	char *js;
	int resumed, r;

	if (kt_shape_parse(f, shape, &s, err) < 0)
		return -1;
	js = fx_dump(famjson_shape(f, &s));
	r = store_problem_intern(st, f->name, shape, js, &prob, err);
	free(js);
	if (r < 0 || fx_config_intern(st, f, c, key, keylen, &cfg, err) < 0)
		return -1;
	memset(&spec, 0, sizeof(spec));
	spec.device_id = dev_id;
	spec.problem_id = prob;
	spec.strategy = "exhaustive";
	spec.options_key = "siblings";
	spec.provenance_json = "{\"ktune_version\":\"siblings\"}";
	spec.planned = 1;
	if (store_sweep_begin(st, &spec, &sweep, &resumed, err) < 0)
		return -1;
	memset(&tr, 0, sizeof(tr));
	tr.sweep_id = sweep;
	tr.config_id = cfg;
	tr.status = "ok";
	tr.median_us = us;
	tr.min_us = us * 0.98;
	tr.p90_us = us * 1.02;
	tr.reps = 10;
	tr.rel_err = 0.001;
	if (store_trial_add(st, &tr, err) < 0 ||
	    store_sweep_end(st, sweep, STORE_SWEEP_DONE, err) < 0)
		return -1;
	return 0;
}

#define FX_SIB_MAXSHAPES 64

struct fx_sib_pick {
	const struct kt_family *f;
	const struct kt_target *t;
	struct kt_shape s[FX_SIB_MAXSHAPES];
	int ns, skip, found;
	struct kt_config c;
};

static int fx_sib_pick_fn(const struct kt_config *c, void *arg)
{
	struct fx_sib_pick *p = arg;
	char why[160];
	int i;

	for (i = 0; i < p->ns; i++)
		if (p->f->check(p->f, &p->s[i], c, p->t, why, sizeof(why)) != 0)
			return 0;
	if (p->skip-- > 0)
		return 0;
	p->c = *c;
	p->found = 1;
	return 1;
}

/* Adds family f's shape to pk's shapes when fam is f: 0, or -1 with err set. */
static int fx_sib_pick_shape(struct fx_sib_pick *pk, const char *fam, const char *shape,
			     struct kt_err *err)
{
	if (strcmp(fam, pk->f->name) != 0)
		return 0;
	if (pk->ns == FX_SIB_MAXSHAPES)
		return kt_err_set(err, KT_EINTERNAL, "more than %d shapes of %s", FX_SIB_MAXSHAPES,
				  pk->f->name);
	return kt_shape_parse(pk->f, shape, &pk->s[pk->ns++], err) < 0 ? -1 : 0;
}

/* The n-th config of family f valid on the sm_90 H200 for every shape of
 * f that set stores or asks: 0, or -1 with err set. */
static int fx_sib_pick_config(const struct fx_sib_set *set, const struct kt_family *f, int n,
			      struct kt_config *out, struct kt_err *err)
{
	struct kt_target t;
	struct fx_sib_pick pk;
	int i;

	if (fx_dev_target(&fx_sib_devs[FX_SIB_A], &t, err) < 0)
		return -1;
	memset(&pk, 0, sizeof(pk));
	pk.f = f;
	pk.t = &t;
	pk.skip = n;
	for (i = 0; i < set->nentries; i++)
		if (fx_sib_pick_shape(&pk, set->entries[i].family, set->entries[i].shape, err) < 0)
			return -1;
	for (i = 0; i < set->nasked; i++) {
		const char *fam, *shape;

		set->asked(i, &fam, &shape);
		if (fx_sib_pick_shape(&pk, fam, shape, err) < 0)
			return -1;
	}
	kt_space_foreach(f, 0, fx_sib_pick_fn, &pk);
	if (!pk.found)
		return kt_err_set(err, KT_EINTERNAL, "fewer than %d configs of %s valid everywhere",
				  n + 1, f->name);
	*out = pk.c;
	return 0;
}

/* Builds at path the store of the first ndevs of fx_sib_devs and those of
 * set's entries on them, each one done sweep with one ok trial; keys[i]
 * gets entry i's config key (an entry left out keeps its key). 0 on
 * success (messages on stderr). */
static FX_UNUSED int fx_sib_build(const char *path, const struct fx_sib_set *set, int ndevs)
{
	struct store *st = NULL;
	struct kt_err err = { 0 };
	int64_t dev_ids[FX_SIB_NDEVS];
	int i, rc = -1;

	if (ndevs < 0 || ndevs > FX_SIB_NDEVS) {
		kt_err_set(&err, KT_EINTERNAL, "%d devices of %d", ndevs, FX_SIB_NDEVS);
		goto out;
	}
	if (store_open(path, STORE_RW, &st, &err) < 0 ||
	    fx_devices_upsert(st, fx_sib_devs, ndevs, NULL, dev_ids, &err) < 0)
		goto out;
	for (i = 0; i < set->nentries; i++) {
		const struct fx_sib_entry *se = &set->entries[i];
		const struct kt_family *f = kt_family_find(se->family);
		struct kt_config c;

		if ((int)se->dev >= ndevs)
			continue;
		if (!f) {
			kt_err_set(&err, KT_EINTERNAL, "no family %s", se->family);
			goto out;
		}
		if (fx_sib_pick_config(set, f, i, &c, &err) < 0 ||
		    fx_sib_entry_add(st, dev_ids[se->dev], f, se->shape, &c, se->us, set->keys[i],
				     sizeof(set->keys[i]), &err) < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "siblings store: %s\n", err.msg);
	store_close(st);
	return rc;
}

#endif
