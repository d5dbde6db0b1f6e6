/*
 * cmd_serve.c -- `ktune serve`: the HTTP API over the database (server/).
 */
#include <stdio.h>
#include <string.h>

#include "../server/server.h"
#include "cli.h"

static const char serve_usage[] =
	"usage: ktune serve [--listen HOST:PORT] [--threads N] [--db PATH]\n"
	"                   [--seed FILE.json] [--token-file PATH]\n"
	"\n"
	"Serves the database over HTTP (JSON API, /metrics, dashboard at /) until\n"
	"SIGINT or SIGTERM. Reads are open; starting a sweep or importing needs the\n"
	"bearer token kept in DB.token (created on first start, mode 0600).\n"
	"\n"
	"  --listen ADDR      HOST:PORT, :PORT or PORT (default 127.0.0.1:8080; port 0: any)\n"
	"  --threads N        request threads (default: one per core)\n"
	"  --db PATH          database (default $KTUNE_DB, else ./ktune.db)\n"
	"  --seed FILE        a JSON export loaded when the database has no results\n"
	"  --token-file PATH  where the token is (default DB.token)\n"
	"  --json             print errors as JSON\n";

int cmd_serve(int argc, char **argv)
{
	const char *listen = NULL, *threads = NULL, *db = NULL, *seed = NULL, *token = NULL;
	struct serve_opts o;
	struct kt_err err = { 0 };
	int json = 0, npos, rc;
	const struct cli_opt opts[] = {
		{ "listen", 1, &listen, NULL }, { "threads", 1, &threads, NULL },
		{ "db", 1, &db, NULL }, { "seed", 1, &seed, NULL },
		{ "token-file", 1, &token, NULL }, { "json", 0, NULL, &json },
		{ NULL, 0, NULL, NULL },
	};

	if ((rc = cli_parse("serve", argc, argv, opts, NULL, 0, &npos)) != 0) {
		if (rc == 1)
			fputs(serve_usage, stdout);
		return rc == 1 ? 0 : rc;
	}
	memset(&o, 0, sizeof(o));
	o.db_path = db ? db : cli_default_db();
	o.listen = listen;
	o.seed_json = seed;
	o.token_path = token;
	o.exe = cli_self_exe();
	if (threads && (o.threads = (int)cli_parse_long(threads)) <= 0)
		return cli_usage_error("serve", "--threads wants a positive number");
	if (serve_main(&o, &err) < 0)
		return cli_fail("serve", json, &err);
	return 0;
}
