/*
 * cmd_info.c -- the read-only subcommands: devices, families, trials.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../db/store.h"
#include "../kernels/family.h"
#include "../tuner/famjson.h"
#include "../tuner/jit.h"
#include "../tuner/worker.h"

/* Opens the database read-only; a missing file is not an error for the
 * listing commands (*st stays NULL), anything else is. */
static int open_ro(const char *path, struct store **st, struct kt_err *err)
{
	struct kt_err e = { 0 };

	*st = NULL;
	if (store_open(path, STORE_RO, st, &e) == 0)
		return 0;
	if (e.code == KT_ENOTFOUND)
		return 0;
	*err = e;
	return -1;
}

static json_t *device_info_json(const struct worker_device_info *d, int ordinal)
{
	return json_pack("{s:i,s:s,s:s,s:s,s:i,s:I,s:i,s:i,s:i,s:i}", "ordinal", ordinal,
			 "name", d->name, "uuid", d->uuid, "arch",
			 d->sm == 90 ? "sm_90" : (d->sm == 80 ? "sm_80" : "other"),
			 "sms", d->sms, "l2_bytes", (json_int_t)d->l2_bytes,
			 "smem_optin", d->smem_optin, "clock_mhz", d->clock_mhz,
			 "mem_clock_mhz", d->mem_clock_mhz, "driver_api", d->driver_version);
}

int cmd_devices(int argc, char **argv)
{
	const char *db = NULL;
	int json = 0, npos, rc, ordinal, ngpu = 0;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};
	struct kt_err err = { 0 }, gerr = { 0 };
	struct store *st = NULL;
	struct store_device *devs = NULL;
	json_t *out = NULL, *gpus = NULL, *known = NULL;
	int ndev = 0, i;

	rc = cli_parse("devices", argc, argv, opts, pos, 0, &npos);
	if (rc == 1) {
		printf("usage: ktune devices [--db PATH] [--json]\n\n"
		       "Lists the GPUs of this machine (each opened in an isolated worker process)\n"
		       "and the devices recorded in the database, with NVRTC's version.\n");
		return 0;
	}
	if (rc)
		return rc;
	if (!(out = json_object()) || !(gpus = json_array()) || !(known = json_array()))
		goto oom;
	json_object_set_new(out, "nvrtc", json_string(jit_nvrtc_version()));
	/* One worker per ordinal until one fails: the same path a sweep takes. */
	for (ordinal = 0; ordinal < 16; ordinal++) {
		struct worker_opts wo;
		struct worker *w = NULL;
		struct worker_device_info di;

		worker_opts_default(&wo);
		wo.exe = cli_self_exe();
		wo.device = ordinal;
		if (worker_start(&wo, &w, ordinal == 0 ? &gerr : &(struct kt_err){ 0 }) != 0)
			break;
		if (worker_info(w, &di) == 0) {
			json_array_append_new(gpus, device_info_json(&di, ordinal));
			ngpu++;
		}
		worker_stop(w);
	}
	json_object_set_new(out, "gpus", gpus);
	gpus = NULL;
	if (ngpu == 0)
		json_object_set_new(out, "no_gpu", json_string(gerr.msg[0] ? gerr.msg : "no CUDA device"));
	if (open_ro(db ? db : cli_default_db(), &st, &err) != 0)
		goto fail;
	if (st && store_devices_list(st, &devs, &ndev, &err) != 0)
		goto fail;
	for (i = 0; i < ndev; i++)
		json_array_append_new(known, json_pack("{s:I,s:s,s:s,s:s,s:i,s:s,s:s}",
						       "id", (json_int_t)devs[i].id, "name", devs[i].name,
						       "uuid", devs[i].uuid, "arch", devs[i].arch,
						       "sms", devs[i].sms, "driver", devs[i].driver,
						       "nvrtc", devs[i].nvrtc));
	json_object_set_new(out, "database_devices", known);
	known = NULL;
	if (json) {
		rc = cli_print_json(out);
		out = NULL;
		goto done;
	}
	printf("NVRTC %s\n", jit_nvrtc_version());
	if (ngpu == 0)
		printf("GPUs on this machine: none (%s)\n", gerr.msg[0] ? gerr.msg : "no CUDA device");
	else
		printf("GPUs on this machine:\n");
	for (i = 0; i < (int)json_array_size(json_object_get(out, "gpus")); i++) {
		json_t *g = json_array_get(json_object_get(out, "gpus"), i);

		printf("  %lld  %s  %s  %lld SMs, L2 %lld MiB\n",
		       json_integer_value(json_object_get(g, "ordinal")),
		       json_string_value(json_object_get(g, "name")),
		       json_string_value(json_object_get(g, "uuid")),
		       json_integer_value(json_object_get(g, "sms")),
		       json_integer_value(json_object_get(g, "l2_bytes")) >> 20);
	}
	printf("devices in the database:%s\n", ndev ? "" : " none");
	for (i = 0; i < ndev; i++)
		printf("  %lld  %s  %s  %s  driver %s\n", (long long)devs[i].id, devs[i].name,
		       devs[i].uuid, devs[i].arch, devs[i].driver);
	rc = 0;
	goto done;
oom:
	kt_err_set(&err, KT_EINTERNAL, "out of memory");
fail:
	rc = cli_fail("devices", json, &err);
done:
	json_decref(out);
	json_decref(gpus);
	json_decref(known);
	free(devs);
	store_close(st);
	return rc;
}

static json_t *family_json(const struct kt_family *f)
{
	json_t *j = json_object(), *dims = json_array(), *vars = json_array(), *params = json_array();
	int i, k;

	if (!j || !dims || !vars || !params) {
		json_decref(j);
		json_decref(dims);
		json_decref(vars);
		json_decref(params);
		return NULL;
	}
	json_object_set_new(j, "name", json_string(f->name));
	json_object_set_new(j, "summary", json_string(f->summary));
	for (i = 0; i < f->ndims; i++)
		json_array_append_new(dims, json_pack("{s:s,s:I,s:I,s:b,s:s}", "name", f->dims[i].name,
						      "min", (json_int_t)f->dims[i].min,
						      "max", (json_int_t)f->dims[i].max,
						      "structural", f->dims[i].structural,
						      "help", f->dims[i].help ? f->dims[i].help : ""));
	for (i = 0; i < f->nvariants; i++)
		if (!(f->planted & (1u << i)))
			json_array_append_new(vars, json_string(f->variants[i]));
	for (i = 0; i < f->nparams; i++) {
		json_t *vals = json_array(), *used = json_array();

		for (k = 0; k < f->params[i].nvalues; k++)
			json_array_append_new(vals, json_integer(f->params[i].values[k]));
		for (k = 0; k < f->nvariants; k++)
			if ((f->params[i].variants & (1u << k)) && !(f->planted & (1u << k)))
				json_array_append_new(used, json_string(f->variants[k]));
		json_array_append_new(params, json_pack("{s:s,s:o,s:o,s:s}", "name", f->params[i].name,
							"values", vals, "variants", used, "help",
							f->params[i].help ? f->params[i].help : ""));
	}
	json_object_set_new(j, "dims", dims);
	json_object_set_new(j, "variants", vars);
	json_object_set_new(j, "params", params);
	json_object_set_new(j, "space_size", json_integer(kt_space_size(f, 0)));
	json_object_set_new(j, "tolerance", json_real(f->tol));
	return j;
}

int cmd_families(int argc, char **argv)
{
	const char *db = NULL;
	int json = 0, npos, rc, i, k;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};
	json_t *arr;

	rc = cli_parse("families", argc, argv, opts, pos, 1, &npos);
	if (rc == 1) {
		printf("usage: ktune families [NAME] [--json]\n\n"
		       "Lists the kernel families: shape keys (with ranges; structural keys are never\n"
		       "crossed by a nearest-shape lookup), variants and parameter spaces.\n");
		return 0;
	}
	if (rc)
		return rc;
	if (npos == 1) {
		const struct kt_family *f = kt_family_find(pos[0]);
		struct kt_err err = { 0 };

		if (!f || f->hidden) {
			kt_err_set(&err, KT_ENOTFOUND, "unknown family '%s' (ktune families lists them)",
				   pos[0]);
			return cli_fail("families", json, &err);
		}
		if (json)
			return cli_print_json(family_json(f));
		printf("%s: %s\n  shape keys:", f->name, f->summary);
		for (i = 0; i < f->ndims; i++)
			printf(" %s [%ld..%ld]%s", f->dims[i].name, f->dims[i].min, f->dims[i].max,
			       f->dims[i].structural ? " (structural)" : "");
		printf("\n  variants:");
		for (i = 0; i < f->nvariants; i++)
			if (!(f->planted & (1u << i)))
				printf(" %s", f->variants[i]);
		printf("\n  parameters:\n");
		for (i = 0; i < f->nparams; i++) {
			printf("    %-10s", f->params[i].name);
			for (k = 0; k < f->params[i].nvalues; k++)
				printf("%s%ld", k ? "," : " ", f->params[i].values[k]);
			printf("%s%s\n", f->params[i].help ? "  -- " : "",
			       f->params[i].help ? f->params[i].help : "");
		}
		printf("  space: %ld configs before constraints\n", kt_space_size(f, 0));
		return 0;
	}
	if (json) {
		if (!(arr = json_array()))
			return 1;
		for (i = 0; i < kt_family_count(); i++)
			if (!kt_family_at(i)->hidden)
				json_array_append_new(arr, family_json(kt_family_at(i)));
		return cli_print_json(json_pack("{s:o}", "families", arr));
	}
	for (i = 0; i < kt_family_count(); i++) {
		const struct kt_family *f = kt_family_at(i);

		if (f->hidden)
			continue;
		printf("%-10s %s\n           shape:", f->name, f->summary);
		for (k = 0; k < f->ndims; k++)
			printf(" %s", f->dims[k].name);
		printf("; %ld configs\n", kt_space_size(f, 0));
	}
	return 0;
}

static void trials_help(void)
{
	printf("usage: ktune trials [SWEEP_ID] [--measurements] [--limit N] [--db PATH] [--json]\n\n"
	       "Without SWEEP_ID: the sweeps in the database, newest first, with progress.\n"
	       "With it: that sweep's trials, fastest verified first, then the failures with\n"
	       "their status and message. Each timed trial shows the SM clock before and after\n"
	       "its timed repetitions, power and temperature (NVML; blank where not read),\n"
	       "THROTTLED when timed under the sweep's clock threshold, its median on the\n"
	       "drift sentinel's footing (norm) and its final-tournament median (tourn).\n"
	       "--measurements lists the sweep's sentinel, tournament and re-time runs instead.\n");
}

static json_t *int_or_null(int v)
{
	return v > 0 ? json_integer(v) : json_null();
}

static json_t *conditions_json(const struct store_conditions *c)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "sm_mhz_before",
			 int_or_null(c->sm_mhz_before), "sm_mhz_after", int_or_null(c->sm_mhz_after),
			 "mem_mhz_before", int_or_null(c->mem_mhz_before), "mem_mhz_after",
			 int_or_null(c->mem_mhz_after), "power_w_before",
			 famjson_num_or_null(c->power_w_before), "power_w_after",
			 famjson_num_or_null(c->power_w_after), "temp_c_before",
			 int_or_null(c->temp_c_before), "temp_c_after", int_or_null(c->temp_c_after));
}

/* "SM 1980->1755 MHz 512 W 61 C" or "" when nothing was read. */
static void conditions_text(const struct store_conditions *c, char *buf, size_t len)
{
	buf[0] = 0;
	if (c->sm_mhz_before <= 0 && c->sm_mhz_after <= 0)
		return;
	snprintf(buf, len, "SM %d->%d MHz %.0f W %d C", c->sm_mhz_before, c->sm_mhz_after,
		 c->power_w_after, c->temp_c_after);
}

/* --measurements: a sweep's sentinel, tournament and re-time rows. */
static int measurements_list(struct store *st, long id, int json, json_t *arr, struct kt_err *err)
{
	struct store_measure_row *m = NULL;
	int n = 0, i;

	if (store_measures_list(st, id, NULL, &m, &n, err) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		const char *what = m[i].baseline[0] ? m[i].baseline : m[i].config_key;
		char cond[96];

		json_array_append_new(arr, json_pack("{s:s,s:f,s:i,s:i,s:s,s:s,s:o,s:o,s:o,s:s}",
						     "kind", m[i].kind, "run", m[i].run, "round",
						     m[i].round, "position", m[i].position,
						     "config", what, "status", m[i].status,
						     "median_us", famjson_num_or_null(m[i].median_us),
						     "reps", m[i].reps ? json_integer(m[i].reps) :
						     json_null(),
						     "conditions", conditions_json(&m[i].cond),
						     "message", m[i].message ? m[i].message : ""));
		if (!json) {
			conditions_text(&m[i].cond, cond, sizeof(cond));
			if (!strcmp(m[i].status, "ok"))
				printf("%-10s %3d.%-3d %9.2f us  %-28s %s\n", m[i].kind, m[i].round,
				       m[i].position, m[i].median_us, cond, what);
			else
				printf("%-10s %3d.%-3d %-12s %-28s %s  %s\n", m[i].kind, m[i].round,
				       m[i].position, m[i].status, cond, what,
				       m[i].message ? m[i].message : "");
		}
		store_measure_row_release(&m[i]);
	}
	free(m);
	if (!json && n == 0)
		printf("no measurements in sweep %ld\n", id);
	return 0;
}

int cmd_trials(int argc, char **argv)
{
	const char *db = NULL, *limit_s = NULL;
	int json = 0, npos, rc, n = 0, i, measures = 0;
	long limit = 0;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "limit", 1, &limit_s, NULL }, { "json", 0, NULL, &json },
		{ "measurements", 0, NULL, &measures }, { NULL, 0, NULL, NULL },
	};
	struct kt_err err = { 0 };
	struct store *st = NULL;
	json_t *arr = NULL;

	rc = cli_parse("trials", argc, argv, opts, pos, 1, &npos);
	if (rc == 1) {
		trials_help();
		return 0;
	}
	if (rc)
		return rc;
	if (limit_s && (limit = cli_parse_long(limit_s)) < 0)
		return cli_usage_error("trials", "--limit wants a non-negative integer");
	if (store_open(db ? db : cli_default_db(), STORE_RO, &st, &err) != 0)
		return cli_fail("trials", json, &err);
	if (!(arr = json_array())) {
		store_close(st);
		return 1;
	}
	if (npos == 0) {
		struct store_sweep *sw = NULL;

		if (store_sweeps_list(st, (int)limit, &sw, &n, &err) != 0)
			goto fail;
		for (i = 0; i < n; i++) {
			json_array_append_new(arr, json_pack("{s:I,s:s,s:s,s:s,s:s,s:I,s:I,s:f,s:f}",
							     "id", (json_int_t)sw[i].id, "family", sw[i].family,
							     "shape", sw[i].shape_key, "strategy", sw[i].strategy,
							     "status", store_sweep_status_name(sw[i].status),
							     "done", (json_int_t)sw[i].done,
							     "planned", (json_int_t)sw[i].planned,
							     "started", sw[i].started, "finished", sw[i].finished));
			if (!json)
				printf("%4lld  %-11s %-8s %ld/%ld  %s %s\n", (long long)sw[i].id,
				       store_sweep_status_name(sw[i].status), sw[i].family, sw[i].done,
				       sw[i].planned, sw[i].shape_key, sw[i].strategy);
			store_sweep_release(&sw[i]);
		}
		free(sw);
		if (!json && n == 0)
			printf("no sweeps in the database\n");
	} else {
		struct store_trial_row *rows = NULL;
		long id = cli_parse_long(pos[0]);
		struct store_sweep sw;

		if (id <= 0) {
			store_close(st);
			json_decref(arr);
			return cli_usage_error("trials", "SWEEP_ID must be a positive integer, not '%s'",
					       pos[0]);
		}
		memset(&sw, 0, sizeof(sw));
		if (store_sweep_get(st, id, &sw, &err) != 0)
			goto fail;
		store_sweep_release(&sw);
		if (measures) {
			if (measurements_list(st, id, json, arr, &err) != 0)
				goto fail;
			goto done;
		}
		if (store_trials_list(st, id, (int)limit, &rows, &n, &err) != 0)
			goto fail;
		for (i = 0; i < n; i++) {
			json_t *params = json_loads(rows[i].params_json ? rows[i].params_json : "{}", 0, NULL);
			json_t *errs = rows[i].errors_json ? json_loads(rows[i].errors_json, 0, NULL) : NULL;
			json_t *t = json_pack("{s:s,s:s,s:o,s:f,s:f,s:f,s:f,s:i,s:f,s:f,s:s}",
					      "config", rows[i].config_key,
					      "status", rows[i].status,
					      "params", params ? params : json_object(),
					      "median_us", rows[i].median_us,
					      "min_us", rows[i].min_us, "p90_us", rows[i].p90_us,
					      "spread", rows[i].spread, "reps", rows[i].reps,
					      "rel_err", rows[i].rel_err,
					      "retime_us", rows[i].retime_us,
					      "message", rows[i].message ? rows[i].message : "");
			char cond[96];

			if (t) {
				json_object_set_new(t, "tournament_us", famjson_num_or_null(rows[i].tournament_us));
				json_object_set_new(t, "norm_us", famjson_num_or_null(rows[i].norm_us));
				json_object_set_new(t, "throttled", json_boolean(rows[i].throttled));
				json_object_set_new(t, "conditions", conditions_json(&rows[i].cond));
				json_object_set_new(t, "errors", errs ? errs : json_null());
				errs = NULL;
				json_array_append_new(arr, t);
			}
			json_decref(errs);
			if (!json) {
				conditions_text(&rows[i].cond, cond, sizeof(cond));
				if (!strcmp(rows[i].status, "ok")) {
					printf("%-13s %9.2f us", rows[i].status, rows[i].median_us);
					if (rows[i].norm_us > 0)
						printf("  norm %9.2f", rows[i].norm_us);
					if (rows[i].tournament_us > 0)
						printf("  tourn %9.2f", rows[i].tournament_us);
					printf("  %s%s%s%s\n", cond, rows[i].throttled ? " THROTTLED" : "",
					       cond[0] || rows[i].throttled ? "  " : "", rows[i].config_key);
				} else {
					printf("%-13s %12s  %s  %s\n", rows[i].status, "", rows[i].config_key,
					       rows[i].message ? rows[i].message : "");
				}
			}
			store_trial_row_release(&rows[i]);
		}
		free(rows);
	}
done:
	store_close(st);
	if (json)
		return cli_print_json(arr);
	json_decref(arr);
	return 0;
fail:
	store_close(st);
	json_decref(arr);
	return cli_fail("trials", json, &err);
}
