/*
 * cmd_env.c -- `ktune env`: every environment variable of the project
 * (util/knobs.h's table), its doc and its value here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "../util/knobs.h"

#define ENV_MAX_NAMES 64

static void help(void)
{
	printf("usage: ktune env [--scope product|tests|bench] [--json] [NAME...]\n\n"
	       "Lists the environment variables ktune, libktune, the Python package, the\n"
	       "tests and the bench scripts read: scope, type, default, who reads it, what\n"
	       "it does, and its value in this environment (product first, then tests,\n"
	       "then bench). NAMEs list only those.\n\n"
	       "options:\n"
	       "  --scope S   only the variables of scope S\n"
	       "  --json      {\"knobs\": [{name, scope, type, default, read_by, doc, value}]},\n"
	       "              value null when unset\n"
	       "  --help      this text\n");
}

static int scope_parse(const char *text, enum kt_knob_scope *out)
{
	static const enum kt_knob_scope all[] = { KT_KNOB_SCOPE_PRODUCT, KT_KNOB_SCOPE_TESTS,
						  KT_KNOB_SCOPE_BENCH };
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(text, kt_knob_scope_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	return -1;
}

static json_t *knob_json(const struct kt_knob_info *k, const char *value)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s?}", "name", k->name, "scope",
			 kt_knob_scope_name(k->scope), "type", kt_knob_type_name(k->type),
			 "default", k->def, "read_by", k->readers, "doc", k->doc, "value", value);
}

static void knob_print(const struct kt_knob_info *k, const char *value)
{
	if (value)
		printf("%s=%s\n", k->name, value);
	else
		printf("%s (unset)\n", k->name);
	printf("    %s, %s%s%s; read by %s\n    %s\n", kt_knob_scope_name(k->scope),
	       kt_knob_type_name(k->type), k->def[0] ? ", default " : "", k->def, k->readers,
	       k->doc);
}

int cmd_env(int argc, char **argv)
{
	const char *scope_s = NULL;
	int json = 0, npos, rc, pass, i, j;
	char *pos[ENV_MAX_NAMES];
	const struct cli_opt opts[] = {
		{ "scope", 1, &scope_s, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};
	enum kt_knob_scope scope = KT_KNOB_SCOPE_PRODUCT;
	struct kt_err err = { 0 };
	json_t *out = NULL, *arr = NULL;

	rc = cli_parse("env", argc, argv, opts, pos, ENV_MAX_NAMES, &npos);
	if (rc == 1) {
		help();
		return 0;
	}
	if (rc)
		return rc;
	if (scope_s && scope_parse(scope_s, &scope) != 0)
		return cli_usage_error("env", "--scope is product, tests or bench, not '%s'", scope_s);
	for (j = 0; j < npos; j++)
		if (!kt_knob_find(pos[j])) {
			kt_err_set(&err, KT_ENOTFOUND, "%s is not a variable ktune knows (ktune env "
				   "lists them)", pos[j]);
			return cli_fail("env", json, &err);
		}
	if (json && (!(out = json_object()) || !(arr = json_array()) ||
		     json_object_set_new(out, "knobs", arr) != 0)) {
		json_decref(out);
		kt_err_set(&err, KT_EINTERNAL, "out of memory");
		return cli_fail("env", 0, &err);
	}
	/* One pass per scope, in the table's order within each. */
	for (pass = KT_KNOB_SCOPE_PRODUCT; pass <= KT_KNOB_SCOPE_BENCH; pass++) {
		if (scope_s && (enum kt_knob_scope)pass != scope)
			continue;
		for (i = 0; i < kt_knob_count(); i++) {
			const struct kt_knob_info *k = kt_knob_at(i);
			const char *value = getenv(k->name);	/* what this environment has */

			if (k->scope != (enum kt_knob_scope)pass)
				continue;
			for (j = 0; j < npos && strcmp(pos[j], k->name) != 0; j++)
				;
			if (npos && j == npos)
				continue;
			if (!json)
				knob_print(k, value);
			else if (json_array_append_new(arr, knob_json(k, value)) != 0) {
				json_decref(out);
				kt_err_set(&err, KT_EINTERNAL, "out of memory");
				return cli_fail("env", 0, &err);
			}
		}
	}
	return json ? cli_print_json(out) : 0;
}
