#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/knobs.h"

const char *cli_default_db(void)
{
	const char *p = kt_knob_get(KT_KNOB_DB);

	return p && *p ? p : "./ktune.db";
}

int cli_fail(const char *cmd, int json, const struct kt_err *err)
{
	const char *msg = err && err->msg[0] ? err->msg : "unknown error";
	enum kt_errcode code = err ? err->code : KT_EINTERNAL;

	if (json) {
		json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", kt_errcode_name(code),
				      "message", msg);

		if (j)
			cli_print_json(j);
	}
	fprintf(stderr, "ktune %s: error: %s\n", cmd, msg);
	return code == KT_EINVAL ? 2 : 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ktune %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'ktune %s --help'.\n", cmd);
	return 2;
}

int cli_print_json(json_t *j)
{
	int rc = 0;

	if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
	    fputc('\n', stdout) == EOF || fflush(stdout) != 0)
		rc = 1;
	json_decref(j);
	return rc;
}

const char *cli_self_exe(void)
{
	static char path[PATH_MAX];
	ssize_t n;

	if (path[0])
		return path;
	n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0)
		snprintf(path, sizeof(path), "ktune");
	else
		path[n] = 0;
	return path;
}

int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
	      char **pos, int maxpos, int *npos)
{
	int i;

	*npos = 0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct cli_opt *o;
		const char *eq;
		size_t len;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		if (strcmp(a, "--") == 0) {
			for (i++; i < argc; i++) {
				if (*npos >= maxpos)
					return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
				pos[(*npos)++] = argv[i];
			}
			break;
		}
		if (strncmp(a, "--", 2) != 0 || !a[2]) {
			if (*npos >= maxpos)
				return cli_usage_error(cmd, "unexpected argument '%s'", a);
			pos[(*npos)++] = argv[i];
			continue;
		}
		a += 2;
		eq = strchr(a, '=');
		len = eq ? (size_t)(eq - a) : strlen(a);
		for (o = opts; o->name; o++)
			if (strlen(o->name) == len && strncmp(o->name, a, len) == 0)
				break;
		if (!o->name)
			return cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, a);
		if (!o->has_arg) {
			if (eq)
				return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
			*o->flag = 1;
			continue;
		}
		if (!eq && i + 1 >= argc)
			return cli_usage_error(cmd, "option '--%s' needs a value", o->name);
		if (o->multi) {
			if (*o->nmulti >= o->maxmulti)
				return cli_usage_error(cmd, "option '--%s' given more than %d times",
						       o->name, o->maxmulti);
			o->multi[(*o->nmulti)++] = eq ? eq + 1 : argv[++i];
		} else {
			*o->val = eq ? eq + 1 : argv[++i];
		}
	}
	return 0;
}

long cli_parse_long(const char *text)
{
	char *end;
	long v;

	if (!text || !*text || *text == '-' || *text == '+')
		return -1;
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || *end)
		return -1;
	return v;
}
