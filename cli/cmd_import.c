/*
 * cmd_import.c -- `ktune import FILE`: load a JSON export into the database
 * (server/import.h). Idempotent: importing the same file again adds nothing.
 */
#include <stdio.h>
#include <string.h>

#include "../db/store.h"
#include "../server/import.h"
#include "../server/server.h"
#include "cli.h"

static const char import_usage[] =
	"usage: ktune import FILE.json [--db PATH] [--json]\n"
	"\n"
	"Loads an export (ktune export --format json) into the database: devices,\n"
	"problems, configs, one sweep per winner with its provenance, the winning\n"
	"trial and its baselines. The file is checked whole before anything is\n"
	"written, and written in one transaction: an error halfway (a full disk)\n"
	"leaves the database as it was. Entries already present are skipped.\n"
	"\n"
	"  --db PATH   database (default $KTUNE_DB, else ./ktune.db; created if missing)\n"
	"  --json      print the counts as JSON\n";

int cmd_import(int argc, char **argv)
{
	const char *db = NULL;
	char *pos[1], token_path[1100], token[65];
	struct import_stats stats;
	struct store *st = NULL;
	json_t *doc = NULL;
	struct kt_err err = { 0 };
	int json = 0, npos, rc;
	const struct cli_opt opts[] = {
		{ "db", 1, &db, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};

	if ((rc = cli_parse("import", argc, argv, opts, pos, 1, &npos)) != 0) {
		if (rc == 1)
			fputs(import_usage, stdout);
		return rc == 1 ? 0 : rc;
	}
	if (npos != 1)
		return cli_usage_error("import", "give one FILE.json");
	rc = 1;
	if (!db)
		db = cli_default_db();
	/* The file first: a bad one creates no database and no token. */
	if (import_json_file_load(pos[0], &doc, &err) < 0)
		goto out;
	/* The database next (a read-only or foreign file is refused before a
	 * token is made for it), then the token: guarded like the server's
	 * writes, only who can read the database's token (created here as on
	 * the server's first start, mode 0600) may import into it. */
	if (store_open(db, STORE_RW, &st, &err) < 0)
		goto out;
	snprintf(token_path, sizeof(token_path), "%s.token", db);
	if (server_token_load(token_path, token, sizeof(token), &err) < 0) {
		struct kt_err e2 = { 0 };

		kt_err_set(&e2, KT_EAUTH, "cannot use the database's token: %s", err.msg);
		err = e2;
		goto out;
	}
	if (import_json(st, doc, &stats, &err) < 0)
		goto out;
	if (json)
		rc = cli_print_json(json_pack("{s:s,s:i,s:i,s:i,s:i}", "file", pos[0],
			"devices", stats.devices, "entries", stats.entries,
			"added", stats.entries_added, "skipped", stats.entries_skipped));
	else {
		printf("imported %s: %d entries, %d added, %d already present\n", pos[0],
		       stats.entries, stats.entries_added, stats.entries_skipped);
		rc = 0;
	}
out:
	if (err.code != KT_OK)
		rc = cli_fail("import", json, &err);
	json_decref(doc);
	store_close(st);
	return rc;
}
