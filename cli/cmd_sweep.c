/*
 * cmd_sweep.c -- `ktune sweep`: one family at one shape on one GPU.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../kernels/family.h"
#include "../tuner/famjson.h"
#include "../tuner/fleet.h"
#include "../tuner/strategy.h"
#include "../tuner/suite.h"
#include "../tuner/sweep.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	interrupted = 1;
	/* A second ^C (or SIGTERM) kills at once; the sweep resumes from the
	 * store. */
	signal(sig, SIG_DFL);
}

static int sweep_cancelled(void *arg)
{
	(void)arg;
	return interrupted;
}

struct progress_state {
	const char *label;
	int tty;
	int printed;
	long last_logged;
};

static void fmt_eta(double s, char *buf, size_t len)
{
	if (s < 0)
		snprintf(buf, len, "?");
	else if (s < 60)
		snprintf(buf, len, "%.0fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
	else
		snprintf(buf, len, "%dh%02dm", (int)(s / 3600), ((int)s % 3600) / 60);
}

/* One \r-rewritten line on a terminal; plain lines every 10% otherwise. */
static void on_progress(const struct sweep_progress *p, void *arg)
{
	struct progress_state *ps = arg;
	char eta[32], best[600];

	fmt_eta(p->eta_s, eta, sizeof(eta));
	if (p->best_us > 0)
		snprintf(best, sizeof(best), "best %.2f us (%s)", p->best_us, p->best_config);
	else
		snprintf(best, sizeof(best), "no verified config yet");
	if (ps->tty) {
		fprintf(stderr, "\r\033[K%s: %s %ld/%ld configs, %s, ETA %s", ps->label, p->phase,
			p->done, p->total, best, eta);
		ps->printed = 1;
		if (!strcmp(p->phase, "done")) {
			fputc('\n', stderr);
			ps->printed = 0;
		}
	} else if (!strcmp(p->phase, "done") || p->total == 0 ||
		   p->done * 10 / (p->total ? p->total : 1) != ps->last_logged * 10 / (p->total ? p->total : 1)) {
		fprintf(stderr, "%s: %s %ld/%ld configs, %s, ETA %s\n", ps->label, p->phase, p->done,
			p->total, best, eta);
		ps->last_logged = p->done;
	}
	fflush(stderr);
}

static json_t *contenders_json(const struct sweep_summary *s)
{
	json_t *a = json_array();
	int i, k;

	for (i = 0; a && i < s->tournament_n; i++) {
		const struct sweep_contender *c = &s->contenders[i];
		json_t *rounds = json_array();

		for (k = 0; k < s->tournament_rounds; k++)
			json_array_append_new(rounds, famjson_num_or_null(c->round_us[k]));
		json_array_append_new(a, json_pack("{s:s,s:o,s:f,s:i,s:o}", "config", c->config,
						   "median_us", c->median_us > 0 ?
						   json_real(c->median_us) : json_null(),
						   "trial_us", c->trial_us, "ok_rounds", c->ok_rounds,
						   "rounds_us", rounds));
	}
	return a;
}

json_t *cli_sweep_summary_json(const char *family, const char *shape, const struct sweep_summary *s)
{
	json_t *params = json_loads(s->best_params[0] ? s->best_params : "{}", 0, NULL);
	json_t *j;

	j = json_pack("{s:s,s:s,s:I,s:b,s:b,s:b,s:s,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I},"
		      "s:{s:I,s:I,s:I,s:I,s:I,s:I},s:i,s:b,s:s,s:o,s:f,s:f,s:f,s:f,s:f,s:f,s:o,s:s,s:s,s:f}",
		      "family", family, "shape", shape, "sweep_id", (json_int_t)s->sweep_id,
		      "resumed", s->resumed, "interrupted", s->interrupted,
		      "time_limited", s->time_limited,
		      "device", s->device, "arch", s->arch,
		      "counts", "space", (json_int_t)s->space, "pruned", (json_int_t)s->pruned,
		      "planned", (json_int_t)s->planned, "skipped", (json_int_t)s->skipped,
		      "evaluated", (json_int_t)s->evaluated,
		      "skipped_faulty", (json_int_t)s->skipped_faulty,
		      "statuses", "ok", (json_int_t)s->n_ok, "wrong", (json_int_t)s->n_wrong,
		      "compile_error", (json_int_t)s->n_compile_error,
		      "launch_error", (json_int_t)s->n_launch_error, "fault", (json_int_t)s->n_fault,
		      "timeout", (json_int_t)s->n_timeout,
		      "worker_restarts", s->restarts,
		      "verified", s->verified && s->best_us > 0,
		      "config", s->best_config,
		      "params", params ? params : json_object(),
		      "us", s->best_us, "min_us", s->best_min_us, "p90_us", s->best_p90_us,
		      "retime_us", s->retime_us, "rel_err", s->best_rel_err,
		      "cublas_us", s->cublas_us,
		      "floor_us", famjson_num_or_null(s->floor_us),
		      "templates_hash", s->template_hash, "template", s->best_templates,
		      "wall_s", s->wall_s);
	if (!j)
		return NULL;
	json_object_set_new(j, "strategy", json_string(s->strategy));
	json_object_set_new(j, "stop", json_string(s->stop));
	json_object_set_new(j, "trial_us", json_real(s->best_trial_us));
	json_object_set_new(j, "retime_method", json_string(s->tournament_n > 0 ? "tournament" :
							    "trial"));
	json_object_set_new(j, "tournament",
			    json_pack("{s:i,s:i,s:o}", "contenders", s->tournament_n, "rounds",
				      s->tournament_rounds, "table", contenders_json(s)));
	json_object_set_new(j, "drift",
			    json_pack("{s:b,s:o,s:o,s:o,s:I,s:o,s:o,s:s,s:i,s:o,s:o,s:o,s:o,s:o}",
				      "nvml", s->nvml,
				      "clock_min_mhz", s->clock_min_mhz > 0 ?
				      json_integer(s->clock_min_mhz) : json_null(),
				      "clock_max_mhz", s->clock_max_mhz > 0 ?
				      json_integer(s->clock_max_mhz) : json_null(),
				      "clock_threshold_mhz", s->clock_threshold_mhz > 0 ?
				      json_integer(s->clock_threshold_mhz) : json_null(),
				      "throttled_trials", (json_int_t)s->n_throttled,
				      "power_max_w", famjson_num_or_null(s->power_max_w),
				      "temp_max_c", s->temp_max_c > 0 ? json_integer(s->temp_max_c) :
				      json_null(),
				      "sentinel", s->sentinel, "sentinel_n", s->sentinel_n,
				      "sentinel_first_us", famjson_num_or_null(s->sentinel_first_us),
				      "sentinel_min_us", famjson_num_or_null(s->sentinel_min_us),
				      "sentinel_max_us", famjson_num_or_null(s->sentinel_max_us),
				      "sentinel_last_us", famjson_num_or_null(s->sentinel_last_us),
				      "sentinel_drift", s->sentinel_min_us > 0 ?
				      json_real(s->sentinel_max_us / s->sentinel_min_us - 1) :
				      json_null()));
	return j;
}

void cli_sweep_summary_print(const char *family, const char *shape, const struct sweep_summary *s)
{
	printf("sweep %lld: %s %s on %s (%s)%s%s%s\n", (long long)s->sweep_id, family, shape,
	       s->device, s->arch, s->resumed ? ", resumed" : "", s->interrupted ? ", INTERRUPTED" : "",
	       s->time_limited ? ", STOPPED AT ITS TIME LIMIT (the same command resumes it)" : "");
	printf("  space %ld valid (%ld pruned); %s proposed %ld%s%s%s: already recorded %ld, "
	       "evaluated now %ld", s->space, s->pruned, s->strategy, s->planned,
	       s->stop[0] ? " (stopped: " : "", s->stop, s->stop[0] ? ")" : "", s->skipped,
	       s->evaluated);
	if (s->skipped_faulty)
		printf(", skipped %ld that faulted or hung before (--retry-faulty runs them)",
		       s->skipped_faulty);
	printf("\n  statuses this run: ok %ld, wrong %ld, compile_error %ld, launch_error %ld, "
	       "fault %ld, timeout %ld (worker restarts %d)\n",
	       s->n_ok, s->n_wrong, s->n_compile_error, s->n_launch_error, s->n_fault, s->n_timeout,
	       s->restarts);
	if (s->nvml)
		printf("  clocks: SM %d..%d MHz (under %d MHz: %ld trials marked throttled), power "
		       "up to %.0f W, %d C\n", s->clock_min_mhz, s->clock_max_mhz,
		       s->clock_threshold_mhz, s->n_throttled, s->power_max_w, s->temp_max_c);
	else
		printf("  clocks: not read (no NVML)\n");
	if (s->sentinel_n > 0)
		printf("  drift sentinel %s: %d times, %.2f..%.2f us (%+.1f%%), last %.2f us\n",
		       s->sentinel, s->sentinel_n, s->sentinel_min_us, s->sentinel_max_us,
		       (s->sentinel_max_us / s->sentinel_min_us - 1) * 100, s->sentinel_last_us);
	if (s->tournament_n > 0) {
		int i;

		printf("  tournament: %d contenders x %d rounds, each round rotated, every run "
		       "fresh:\n", s->tournament_n, s->tournament_rounds);
		for (i = 0; i < s->tournament_n && i < 5; i++)
			printf("    %9.2f us (sweep %9.2f)  %s\n", s->contenders[i].median_us,
			       s->contenders[i].trial_us, s->contenders[i].config);
		if (s->tournament_n > 5)
			printf("    ... %d more (ktune trials %lld)\n", s->tournament_n - 5,
			       (long long)s->sweep_id);
	}
	if (s->best_us > 0) {
		printf("  best   %.2f us%s (min %.2f, p90 %.2f in the sweep), rel err %.2e: %s\n",
		       s->best_us, s->tournament_n > 0 ? " (tournament median)" : "",
		       s->best_min_us, s->best_p90_us, s->best_rel_err, s->best_config);
		if (s->retime_us > 0)
			printf("  retime %.2f us (%+.1f%%, a fresh worker process)\n", s->retime_us,
			       (s->retime_us / s->best_us - 1) * 100);
		printf("  verified in this run: %s\n", s->verified ? "yes" :
		       "NO (the winner comes from an earlier run)");
		if (s->cublas_us > 0)
			printf("  cuBLAS %.2f us: ktune is %.2fx its time\n", s->cublas_us,
			       s->best_us / s->cublas_us);
		if (s->floor_us > 0)
			printf("  floor  %.2f us (%.0f%% of roofline)\n", s->floor_us,
			       s->floor_us / s->best_us * 100);
		else
			printf("  floor  unknown (no measured peaks for this device: bench/peaks.py)\n");
	} else {
		printf("  no config verified\n");
	}
}

int cli_sweep_one(const char *cmd, struct sweep_opts *o, int json, struct sweep_summary *sum,
		  struct kt_err *err)
{
	struct progress_state ps;
	char label[300];
	int rc;

	snprintf(label, sizeof(label), "%s %s", o->family, o->shape);
	memset(&ps, 0, sizeof(ps));
	ps.label = label;
	ps.tty = isatty(2);
	ps.last_logged = -1;
	o->progress = on_progress;
	o->cancel = sweep_cancelled;
	o->arg = &ps;
	interrupted = 0;
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	rc = sweep_run(o, sum, err);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (ps.printed)
		fputc('\n', stderr);
	(void)cmd;
	(void)json;
	return rc;
}

#define SWEEP_MAX_ITEMS 64
#define SWEEP_MAX_CONFIGS 64

static pthread_mutex_t print_mu = PTHREAD_MUTEX_INITIALIZER;

/* Fleet mode: one line per finished problem (sweeps run side by side). */
static void on_item_done(const struct fleet_item *it, int device, void *arg)
{
	(void)arg;
	pthread_mutex_lock(&print_mu);
	if (it->done && it->sum.best_us > 0)
		fprintf(stderr, "[gpu %d] %s %s: best %.2f us (%s), %ld evaluated\n", device, it->family,
			it->shape, it->sum.best_us, it->sum.best_config, it->sum.evaluated);
	else if (it->done)
		fprintf(stderr, "[gpu %d] %s %s: no config verified\n", device, it->family, it->shape);
	else
		fprintf(stderr, "[gpu %d] %s %s: %s\n", device, it->family, it->shape, it->err.msg);
	pthread_mutex_unlock(&print_mu);
}

static int sweep_fleet(struct sweep_opts *o, const char *devices, struct fleet_item *items,
		       int nitems, int json)
{
	int devs[FLEET_MAX_DEVICES], ndev, i, rc;
	struct fleet_report rep;
	struct kt_err err = { 0 };
	json_t *arr, *out;

	if ((ndev = fleet_parse_devices(devices, &o->worker, devs, &err)) < 0)
		return cli_fail("sweep", json, &err);
	o->cancel = sweep_cancelled;
	o->arg = NULL;
	interrupted = 0;
	signal(SIGINT, on_sigint);
	signal(SIGTERM, on_sigint);
	fprintf(stderr, "ktune sweep: %d problem(s) on %d GPU(s)\n", nitems, ndev);
	rc = fleet_run(o, devs, ndev, items, nitems, &rep, on_item_done, NULL, &err);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (!json) {
		for (i = 0; i < nitems; i++) {
			if (!items[i].done)
				continue;
			printf("[gpu %d] ", items[i].device);
			cli_sweep_summary_print(items[i].family, items[i].shape, &items[i].sum);
		}
		for (i = 0; i < rep.ndevices; i++)
			printf("gpu %d: %d problem(s)%s%s\n", rep.devices[i], rep.swept[i],
			       rep.failed[i] ? ", TAKEN OUT: " : "", rep.failed[i] ? rep.why[i] : "");
		printf("wall time %.1f s\n", rep.wall_s);
		return rc ? cli_fail("sweep", 0, &err) : 0;
	}
	arr = json_array();
	for (i = 0; i < nitems; i++) {
		json_t *j;

		if (items[i].done) {
			j = cli_sweep_summary_json(items[i].family, items[i].shape, &items[i].sum);
			json_object_set_new(j, "gpu", json_integer(items[i].device));
		} else {
			j = json_pack("{s:s,s:s,s:{s:s,s:s}}", "family", items[i].family, "shape",
				      items[i].shape, "error", "code", kt_errcode_name(items[i].err.code),
				      "message", items[i].err.msg);
		}
		if (items[i].label)
			json_object_set_new(j, "workload", json_string(items[i].label));
		json_array_append_new(arr, j);
	}
	out = json_pack("{s:o,s:f,s:[]}", "sweeps", arr, "wall_s", rep.wall_s, "devices");
	for (i = 0; i < rep.ndevices; i++)
		json_array_append_new(json_object_get(out, "devices"),
				      json_pack("{s:i,s:i,s:b,s:s}", "gpu", rep.devices[i], "swept",
						rep.swept[i], "taken_out", rep.failed[i], "why",
						rep.failed[i] ? rep.why[i] : ""));
	if (cli_print_json(out))
		return 1;
	return rc ? 1 : 0;
}

static void help(void)
{
	printf("usage: ktune sweep (--family NAME --shape KEY=N,... | --workload ID) [options]\n\n"
	       "Tunes one kernel family at one problem shape on one GPU: every valid config is\n"
	       "compiled with NVRTC, run in an isolated worker process, verified against the\n"
	       "family's reference and timed; every trial is committed to the database as it\n"
	       "lands. Running the same command again resumes an unfinished sweep and\n"
	       "evaluates nothing twice (^C stops cleanly; the sweep is resumable).\n\n"
	       "options:\n"
	       "  --family NAME      kernel family (ktune families)\n"
	       "  --shape KEYS       e.g. tokens=1024,in=4096,out=4096\n"
	       "  --workload ID      a development-suite workload, e.g. dense:4096x4096:N1024\n"
	       "                     (--shape and --workload may repeat: several problems)\n"
	       "  --devices LIST     all, or ordinals like 0,1: one isolated worker per GPU,\n"
	       "                     problems shared between them; a GPU that fails is\n"
	       "                     taken out and its problem redone on another\n"
	       "  --strategy NAME    exhaustive (default), random, halving (successive halving\n"
	       "                     over tile-shape arms) or guided (a model fitted as trials\n"
	       "                     land, and on the database's trials of the family at other\n"
	       "                     shapes; stops when no config is expected to gain more than\n"
	       "                     the noise). docs/search.md compares them\n"
	       "  --budget N         configs to evaluate at most (default: all for exhaustive and\n"
	       "                     random, 30%% of the space for halving, 20%% for guided);\n"
	       "                     a sample that misses the family's default config (what an\n"
	       "                     untuned shape runs) evaluates it too, one more\n"
	       "  --variants LIST    only these variants, e.g. tcmix_ws,naive_ws (default:\n"
	       "                     all; ktune families lists them)\n"
	       "  --config KEY       only this config (repeatable), in `ktune best`'s form,\n"
	       "                     e.g. variant=wgmma_ws,BLOCK_M=128,...: re-verifies and\n"
	       "                     times a known config (an exported winner) on this GPU\n"
	       "  --seed N           seed of the sample and of the inputs (default 1)\n"
	       "  --device N         CUDA device ordinal (default 0)\n"
	       "  --threads N        NVRTC compile threads (default: one per core)\n"
	       "  --timeout S        per-candidate ceiling in seconds (default 10; scaled\n"
	       "                     down from the best time once one config verified)\n"
	       "  --plant            add the family's planted faulting and hanging kernels\n"
	       "  --time-limit S     start no candidate after S seconds; the best so far meet\n"
	       "                     in the tournament, the rest is left for a resume\n"
	       "  --tournament K     the K best (default 8; 0: none) and any within --ties %%\n"
	       "                     of the best (default 3; at most 24, or K) meet at the end in\n"
	       "                     --rounds R (default 5) interleaved, rotated rounds, each\n"
	       "                     run afresh; the best median wins (docs/measuring.md)\n"
	       "  --sentinel-every N time the drift sentinel (cuBLAS, or the family's default\n"
	       "                     config) again every N candidates (default 16; 0: never)\n"
	       "  --clock-threshold MHZ  mark trials timed under this SM clock (default: 96%% of\n"
	       "                     the device's highest)\n"
	       "  --retry-faulty     run configs that faulted or hung in an earlier sweep of this\n"
	       "                     device and shape (skipped by default)\n"
	       "  --no-retime        do not time the winner again in a fresh worker process\n"
	       "  --no-baseline      do not time cuBLAS beside it\n"
	       "  --pdl 0|1          0: kernels that may overlap their predecessor launch\n"
	       "                     plainly, for A/B timings (default $KTUNE_PDL, else 1)\n"
	       "  --compare WHERE    where outputs are verified: auto (the GPU, else the\n"
	       "                     host), gpu (required) or host (default: from\n"
	       "                     $KTUNE_HOST_COMPARE, 1 host, 0 gpu, else auto)\n"
	       "  --db PATH          database (default $KTUNE_DB, else ./ktune.db)\n"
	       "  --json             print the summary as JSON\n"
	       "  --help             this text\n");
}

int cmd_sweep(int argc, char **argv)
{
	const char *family = NULL, *strategy = NULL, *devices = NULL;
	const char *shapes[SWEEP_MAX_ITEMS], *workloads[SWEEP_MAX_ITEMS], *shape = NULL, *workload = NULL;
	const char *configs[SWEEP_MAX_CONFIGS];
	int nshapes = 0, nworkloads = 0, nconfigs = 0;
	struct fleet_item items[SWEEP_MAX_ITEMS];
	int nitems = 0, i, k;
	const char *budget = NULL, *seed = NULL, *device = NULL, *threads = NULL, *timeout = NULL;
	const char *time_limit = NULL, *variants = NULL;
	const char *tournament = NULL, *rounds = NULL, *ties = NULL, *sentinel = NULL;
	const char *clock = NULL, *pdl = NULL, *compare = NULL;
	const char *db = NULL, *backend = NULL;
	int json = 0, plant = 0, no_retime = 0, no_baseline = 0, retry_faulty = 0, npos, rc;
	char *pos[1];
	const struct cli_opt opts[] = {
		{ "family", 1, &family, NULL },
		{ "shape", 1, NULL, NULL, shapes, &nshapes, SWEEP_MAX_ITEMS },
		{ "workload", 1, NULL, NULL, workloads, &nworkloads, SWEEP_MAX_ITEMS },
		{ "config", 1, NULL, NULL, configs, &nconfigs, SWEEP_MAX_CONFIGS },
		{ "strategy", 1, &strategy, NULL }, { "devices", 1, &devices, NULL },
		{ "budget", 1, &budget, NULL }, { "seed", 1, &seed, NULL },
		{ "device", 1, &device, NULL }, { "threads", 1, &threads, NULL },
		{ "timeout", 1, &timeout, NULL }, { "db", 1, &db, NULL },
		{ "time-limit", 1, &time_limit, NULL }, { "variants", 1, &variants, NULL },
		{ "worker-backend", 1, &backend, NULL },	/* test-only: cpu */
		{ "tournament", 1, &tournament, NULL }, { "rounds", 1, &rounds, NULL },
		{ "ties", 1, &ties, NULL }, { "sentinel-every", 1, &sentinel, NULL },
		{ "clock-threshold", 1, &clock, NULL },
		{ "pdl", 1, &pdl, NULL }, { "compare", 1, &compare, NULL },
		{ "retry-faulty", 0, NULL, &retry_faulty },
		{ "plant", 0, NULL, &plant }, { "no-retime", 0, NULL, &no_retime },
		{ "no-baseline", 0, NULL, &no_baseline }, { "json", 0, NULL, &json },
		{ NULL, 0, NULL, NULL },
	};
	struct sweep_opts o;
	struct sweep_summary sum;
	struct kt_err err = { 0 };

	rc = cli_parse("sweep", argc, argv, opts, pos, 0, &npos);
	if (rc == 1) {
		help();
		return 0;
	}
	if (rc)
		return rc;
	if (nworkloads && (family || nshapes))
		return cli_usage_error("sweep", "--workload replaces --family and --shape");
	memset(items, 0, sizeof(items));
	for (i = 0; i < nworkloads; i++) {
		const struct suite_workload *w = suite_find(workloads[i]);

		if (!w)
			return cli_usage_error("sweep", "unknown workload '%s'", workloads[i]);
		items[nitems].family = w->family;
		items[nitems].shape = w->shape;
		items[nitems++].label = w->id;
	}
	for (i = 0; i < nshapes; i++) {
		items[nitems].family = family;
		items[nitems++].shape = shapes[i];
	}
	if (nitems == 0 || !items[0].family)
		return cli_usage_error("sweep", "--family and --shape are required (or --workload)");
	/* Every problem is checked before anything starts: a typo in the
	 * fifth shape must not surface an hour into the sweep. */
	for (i = 0; i < nitems; i++) {
		const struct kt_family *f = kt_family_find(items[i].family);
		struct kt_shape ks;

		if (!f) {
			kt_err_set(&err, KT_ENOTFOUND, "unknown family '%s' (ktune families lists them)",
				   items[i].family);
			return cli_fail("sweep", json, &err);
		}
		if (kt_shape_parse(f, items[i].shape, &ks, &err) != 0)
			return cli_fail("sweep", json, &err);
		for (k = 0; k < nconfigs; k++) {
			struct kt_config kc;

			if (kt_config_parse(f, configs[k], &kc, &err) != 0)
				return cli_fail("sweep", json, &err);
		}
	}
	family = items[0].family;
	shape = items[0].shape;
	workload = items[0].label;
	sweep_opts_default(&o);
	o.db_path = db ? db : cli_default_db();
	o.family = family;
	o.shape = shape;
	if (strategy) {
		if (strategy_check(strategy, &err) != 0)
			return cli_usage_error("sweep", "%s", err.msg);
		o.strategy = strategy;
	}
#define NUM(flag, var, dst)                                                        \
	if (var) {                                                                 \
		long v_ = cli_parse_long(var);                                     \
		if (v_ < 0)                                                        \
			return cli_usage_error("sweep", "--%s wants a non-negative integer, " \
					       "not '%s'", flag, var);             \
		dst = v_;                                                          \
	}
	NUM("budget", budget, o.budget);
	NUM("seed", seed, o.seed);
	NUM("device", device, o.worker.device);
	NUM("threads", threads, o.threads);
	NUM("timeout", timeout, o.timeout_s);
	NUM("time-limit", time_limit, o.time_limit_s);
	NUM("tournament", tournament, o.tournament_k);
	NUM("rounds", rounds, o.rounds);
	NUM("ties", ties, o.tie_pct);
	NUM("sentinel-every", sentinel, o.sentinel_every);
	NUM("clock-threshold", clock, o.clock_threshold_mhz);
#undef NUM
	if (rounds && (o.rounds < 1 || o.rounds > SWEEP_MAX_ROUNDS))
		return cli_usage_error("sweep", "--rounds is 1 to %d", SWEEP_MAX_ROUNDS);
	if (tournament && o.tournament_k > SWEEP_MAX_CONTENDERS)
		return cli_usage_error("sweep", "--tournament is 0 to %d", SWEEP_MAX_CONTENDERS);
	/* --tournament K asks for K contenders even past the default cap. */
	if (tournament && o.tournament_k > o.tournament_max)
		o.tournament_max = o.tournament_k;
	if (time_limit && o.time_limit_s < 1)
		return cli_usage_error("sweep", "--time-limit must be at least 1 second");
	if (timeout && o.timeout_s < 1)
		return cli_usage_error("sweep", "--timeout must be at least 1 second");
	if (backend) {
		if (strcmp(backend, "cpu") == 0)
			o.worker.backend = WORKER_BACKEND_CPU;
		else if (strcmp(backend, "cuda") != 0)
			return cli_usage_error("sweep", "--worker-backend is cuda or cpu");
	}
	if (pdl) {
		if (strcmp(pdl, "0") != 0 && strcmp(pdl, "1") != 0)
			return cli_usage_error("sweep", "--pdl is 0 or 1, not '%s'", pdl);
		o.worker.pdl = pdl[0] == '1';
	}
	if (compare && worker_compare_parse(compare, &o.worker.compare) != 0)
		return cli_usage_error("sweep", "--compare is auto, gpu or host, not '%s'", compare);
	o.variants = variants;
	o.configs = configs;
	o.nconfigs = nconfigs;
	o.plant = plant;
	o.retry_faulty = retry_faulty;
	o.retime = !no_retime;
	o.baseline = !no_baseline;
	o.worker.exe = cli_self_exe();
	if (nitems > 1 || devices)
		return sweep_fleet(&o, devices, items, nitems, json);
	if (cli_sweep_one("sweep", &o, json, &sum, &err) != 0)
		return cli_fail("sweep", json, &err);
	if (json) {
		json_t *j = cli_sweep_summary_json(family, shape, &sum);

		if (j && workload)
			json_object_set_new(j, "workload", json_string(workload));
		return cli_print_json(j) ? 1 : 0;
	}
	cli_sweep_summary_print(family, shape, &sum);
	return sum.interrupted ? 130 : 0;
}
