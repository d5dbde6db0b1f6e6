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

	if (p->f->check(p->s, c, p->t, why, sizeof(why)) != 0)
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

/* Builds the database at path; 0 on success (messages on stderr). */
static FX_UNUSED int fx_build(const char *path, struct fx_result *res)
{
	struct store *st = NULL;
	struct kt_err err = { 0 };
	int64_t dev_ids[FX_NDEVS];
	int i, k, rc = -1;

	memset(res, 0, sizeof(*res));
	if (store_open(path, STORE_RW, &st, &err) < 0)
		goto out;
	for (i = 0; i < FX_NDEVS; i++) {
		struct store_device d;

		memset(&d, 0, sizeof(d));
		snprintf(d.name, sizeof(d.name), "%s", fx_devs[i].name);
		snprintf(d.uuid, sizeof(d.uuid), "%s", fx_devs[i].uuid);
		snprintf(d.arch, sizeof(d.arch), "%s", fx_devs[i].arch);
		d.sms = fx_devs[i].sms;
		d.l2_bytes = fx_devs[i].l2;
		d.smem_optin = fx_devs[i].smem;
		d.clock_mhz = 1980;
		d.mem_clock_mhz = 3201;
		snprintf(d.driver, sizeof(d.driver), "580.95");
		snprintf(d.cuda, sizeof(d.cuda), "13.0");
		snprintf(d.nvrtc, sizeof(d.nvrtc), "13.0");
		if (store_device_upsert(st, &d, &err) < 0)
			goto out;
		dev_ids[i] = d.id;
	}
	for (i = 0; i < FX_NPROBLEMS; i++) {
		const struct fx_problem *p = &fx_problems[i];
		const struct kt_family *f = kt_family_find(p->family);
		struct store_device d;
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
		memset(&d, 0, sizeof(d));
		d.smem_optin = fx_devs[p->dev].smem;
		d.sms = fx_devs[p->dev].sms;
		d.l2_bytes = fx_devs[p->dev].l2;
		if (lookup_device_target(fx_devs[p->dev].arch, &d, &t, &err) < 0)
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
		shape_json = fx_dump(lookup_shape_json(f, &s));
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
		floor_us = lookup_floor_us(f, &s);
		base = floor_us * 1.5 + i;
		for (k = 0; k < 3; k++) {
			struct store_trial tr;
			char key[512], *params;
			int64_t cfg;

			kt_config_key(f, &pk.c[k], key, sizeof(key));
			params = fx_dump(lookup_config_json(f, &pk.c[k]));
			if (store_config_intern(st, f->name, key, params, &cfg, &err) < 0) {
				free(params);
				goto out;
			}
			free(params);
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

#endif
