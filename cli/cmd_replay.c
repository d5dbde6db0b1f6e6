/*
 * cmd_replay.c -- `ktune replay`: strategies run against recorded sweeps,
 * without a GPU (tuner/replay.h), and recorded sweeps written out as the
 * small text files CI replays.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../kernels/family.h"
#include "../tuner/replay.h"
#include "../tuner/strategy.h"

#define REPLAY_MAX_FILES 32
#define REPLAY_MAX_SEEDS 16

static void help(void)
{
	printf("usage: ktune replay FILE... [--strategy NAME]... [--seeds 1,2,3] [--budget N]\n"
	       "                    [--transfer] [--json]\n"
	       "       ktune replay --db PATH --sweep ID [--strategy NAME]... [...]\n"
	       "       ktune replay --db PATH --sweep ID --dump OUT.txt\n\n"
	       "Runs search strategies against recorded exhaustive sweeps, without a GPU: each\n"
	       "config a strategy proposes gets the time (or failure) the recording has for it.\n"
	       "For every recording, strategy and seed it prints how many configs were tried,\n"
	       "the winner found, and its speed against the recording's best (1 = found it).\n"
	       "The recordings are replay files (format in tuner/replay.h; tests/data/replay/\n"
	       "has H200 ones) or a sweep of a database.\n\n"
	       "options:\n"
	       "  --strategy NAME    exhaustive, random, halving or guided (repeatable; default:\n"
	       "                     random, halving and guided)\n"
	       "  --seeds LIST       seeds, comma-separated (default 1,2,3)\n"
	       "  --budget N         configs at most (default: each strategy's own; random gets\n"
	       "                     guided's, 20%% of the space, to be compared with it)\n"
	       "  --transfer         guided: the other recordings of the same family are its\n"
	       "                     prior, as a database's trials at other shapes would be\n"
	       "  --db PATH --sweep ID   replay (or --dump) a sweep of a database\n"
	       "  --dump OUT         write the recording (one file or sweep) as a replay file\n"
	       "  --json             print the runs and their means as JSON\n"
	       "  --help             this text\n");
}

/* "1,2,3" -> seeds; the count, or -1. */
static int parse_seeds(const char *text, uint64_t *seeds, int max)
{
	const char *p = text;
	int n = 0;

	while (*p) {
		char *end;
		unsigned long long v;

		if (n == max || *p < '0' || *p > '9')
			return -1;
		v = strtoull(p, &end, 10);
		seeds[n++] = v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n > 0 ? n : -1;
}

struct mean {
	const char *strategy;
	double fraction, speed, min_speed;
	int n;
};

int cmd_replay(int argc, char **argv)
{
	const char *strategies[8], *seeds_s = NULL, *budget_s = NULL, *db = NULL, *sweep_s = NULL;
	const char *dump = NULL;
	char *pos[REPLAY_MAX_FILES];
	int nstrat = 0, json = 0, transfer = 0, npos = 0, rc, i, j, k, nrec = 0, nseeds;
	const struct cli_opt opts[] = {
		{ "strategy", 1, NULL, NULL, strategies, &nstrat, 8 },
		{ "seeds", 1, &seeds_s, NULL }, { "budget", 1, &budget_s, NULL },
		{ "db", 1, &db, NULL }, { "sweep", 1, &sweep_s, NULL }, { "dump", 1, &dump, NULL },
		{ "transfer", 0, NULL, &transfer }, { "json", 0, NULL, &json },
		{ NULL, 0, NULL, NULL },
	};
	static const char *const default_strategies[] = { "random", "halving", "guided" };
	struct replay_rec recs[REPLAY_MAX_FILES];
	struct mean means[8];
	uint64_t seeds[REPLAY_MAX_SEEDS] = { 1, 2, 3 };
	struct kt_err err = { 0 };
	json_t *runs = NULL, *out = NULL;
	long budget = 0;

	memset(recs, 0, sizeof(recs));
	memset(means, 0, sizeof(means));
	rc = cli_parse("replay", argc, argv, opts, pos, REPLAY_MAX_FILES, &npos);
	if (rc == 1) {
		help();
		return 0;
	}
	if (rc)
		return rc;
	if (!!db != !!sweep_s)
		return cli_usage_error("replay", "--db and --sweep go together");
	if ((db ? 1 : 0) + npos == 0)
		return cli_usage_error("replay", "give replay files, or --db PATH --sweep ID");
	if (db && npos)
		return cli_usage_error("replay", "replay files or a database sweep, not both");
	if (dump && (db ? 1 : npos) != 1)
		return cli_usage_error("replay", "--dump writes one recording");
	nseeds = 3;
	if (seeds_s && (nseeds = parse_seeds(seeds_s, seeds, REPLAY_MAX_SEEDS)) < 0)
		return cli_usage_error("replay", "--seeds wants numbers like 1,2,3, not '%s'", seeds_s);
	if (budget_s && (budget = cli_parse_long(budget_s)) < 0)
		return cli_usage_error("replay", "--budget wants a non-negative integer");
	if (nstrat == 0) {
		for (i = 0; i < 3; i++)
			strategies[i] = default_strategies[i];
		nstrat = 3;
	}
	for (i = 0; i < nstrat; i++)
		if (strategy_check(strategies[i], &err) != 0)
			return cli_usage_error("replay", "%s", err.msg);

	if (db) {
		long id = cli_parse_long(sweep_s);

		if (id <= 0)
			return cli_usage_error("replay", "--sweep wants a sweep id, not '%s'", sweep_s);
		if (replay_load_db(db, id, &recs[0], &err) != 0)
			return cli_fail("replay", json, &err);
		nrec = 1;
	} else {
		for (i = 0; i < npos; i++) {
			if (replay_load_file(pos[i], &recs[i], &err) != 0)
				goto fail;
			nrec++;
		}
	}
	if (dump) {
		if (replay_write_file(&recs[0], dump, NULL, &err) != 0)
			goto fail;
		fprintf(stderr, "ktune replay: wrote %ld configs to %s\n", recs[0].sp.n, dump);
		rc = 0;
		goto done;
	}
	if (!(runs = json_array()))
		goto oom;
	if (!json)
		printf("%-40s %-10s %4s %13s %8s %10s  %s\n", "recording", "strategy", "seed", "trials",
		       "speed", "stop", "winner");
	for (i = 0; i < nrec; i++) {
		struct strategy_prior_row *prior = NULL;
		long nprior = 0, best = replay_best(&recs[i]);
		char shape[256];

		kt_shape_key(recs[i].f, &recs[i].shape, shape, sizeof(shape));
		if (transfer && replay_prior(recs, nrec, i, &prior, &nprior, &err) != 0)
			goto fail;
		for (j = 0; j < nstrat; j++) {
			struct mean *m = &means[j];

			m->strategy = strategies[j];
			for (k = 0; k < nseeds; k++) {
				struct strategy_spec spec;
				struct strategy_prior pr = { prior, nprior };
				struct replay_result res;
				char key[512] = "", bkey[512] = "";
				const char *label = npos ? pos[i] : recs[i].source;

				memset(&spec, 0, sizeof(spec));
				spec.kind = strategy_parse(strategies[j]);
				spec.budget = budget;
				spec.seed = seeds[k];
				spec.prior = &pr;
				if (!budget && spec.kind == STRATEGY_RANDOM) {
					long real = 0, c;

					for (c = 0; c < recs[i].sp.n; c++)
						real += !(recs[i].f->planted &
							  (1u << recs[i].sp.cfg[c].variant));
					spec.budget = (real + 4) / 5 > 8 ? (real + 4) / 5 : 8;
				}
				if (replay_run(&recs[i], &spec, &res, &err) != 0) {
					free(prior);
					goto fail;
				}
				if (res.winner >= 0)
					kt_config_key(recs[i].f, &recs[i].sp.cfg[res.winner], key,
						      sizeof(key));
				if (best >= 0)
					kt_config_key(recs[i].f, &recs[i].sp.cfg[best], bkey, sizeof(bkey));
				m->fraction += res.space ? (double)res.trials / res.space : 0;
				m->speed += res.speed;
				if (m->n == 0 || res.speed < m->min_speed)
					m->min_speed = res.speed;
				m->n++;
				json_array_append_new(runs, json_pack(
					"{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:f,s:s,s:f,s:s,s:f,s:f,s:s}",
					"recording", label, "family", recs[i].f->name, "shape", shape,
					"strategy", strategies[j], "seed", (json_int_t)seeds[k],
					"budget", (json_int_t)spec.budget, "trials",
					(json_int_t)res.trials, "space", (json_int_t)res.space,
					"fraction", res.space ? (double)res.trials / res.space : 0.0,
					"winner", key, "winner_us", res.winner_us, "best", bkey,
					"best_us", res.best_us, "speed", res.speed, "stop",
					res.stop ? res.stop : ""));
				if (!json)
					printf("%-40.40s %-10s %4llu %5ld/%-5ld %3.0f%% %7.4f %10s  %s\n",
					       label, strategies[j], (unsigned long long)seeds[k],
					       res.trials, res.space,
					       res.space ? 100.0 * res.trials / res.space : 0, res.speed,
					       res.stop ? res.stop : "", key);
			}
		}
		free(prior);
	}
	if (!json) {
		printf("\nmeans over %d recording(s) x %d seed(s):\n", nrec, nseeds);
		for (j = 0; j < nstrat; j++)
			printf("  %-10s trials %5.1f%% of the space, speed %.4f (lowest %.4f)\n",
			       means[j].strategy, 100 * means[j].fraction / (means[j].n ? means[j].n : 1),
			       means[j].speed / (means[j].n ? means[j].n : 1), means[j].min_speed);
		json_decref(runs);
		rc = 0;
		goto done;
	}
	if (!(out = json_pack("{s:o,s:[]}", "runs", runs, "means")))
		goto oom;
	runs = NULL;
	for (j = 0; j < nstrat; j++)
		json_array_append_new(json_object_get(out, "means"),
				      json_pack("{s:s,s:f,s:f,s:f}", "strategy", means[j].strategy,
						"fraction", means[j].fraction / (means[j].n ? means[j].n : 1),
						"speed", means[j].speed / (means[j].n ? means[j].n : 1),
						"min_speed", means[j].min_speed));
	rc = cli_print_json(out);
	goto done;
oom:
	kt_err_set(&err, KT_EINTERNAL, "out of memory");
fail:
	rc = cli_fail("replay", json, &err);
done:
	json_decref(runs);
	for (i = 0; i < nrec; i++)
		replay_rec_release(&recs[i]);
	return rc;
}
