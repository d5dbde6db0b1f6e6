/*
 * cmd_export.c -- `ktune export`: tuned tables as JSON, a C header or a .cu
 * bundle (server/export.h).
 */
#include <stdio.h>
#include <string.h>

#include <sys/stat.h>

#include "../db/store.h"
#include "../kernels/family.h"
#include "../server/export.h"
#include "../server/query.h"
#include "cli.h"

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static const char export_usage[] =
	"usage: ktune export [--format json|c|lib] [--out PATH] [--device D]\n"
	"                    [--family NAME] [--db PATH]\n"
	"\n"
	"  --format F    json (default): everything `ktune import` needs, plus launch data;\n"
	"                c: libktune's compiled-in table as a header (ktune_tuned.h);\n"
	"                lib (also cuda): a folder that `make` turns into a library:\n"
	"                libktune with the table and every tuned kernel built by nvcc\n"
	"  --out PATH    file for json and c (default: stdout), directory for lib\n"
	"  --device D    only this device (uuid, id or name)\n"
	"  --family F    only this family\n"
	"  --db PATH     database (default $KTUNE_DB, else ./ktune.db)\n"
	"  --json        print errors (and, for cuda, the file list) as JSON\n";

int cmd_export(int argc, char **argv)
{
	const char *format = "json", *outp = NULL, *device = NULL, *family = NULL, *db = NULL;
	struct export_filter f;
	struct export_bundle b = { 0 };
	enum export_format fmt;
	struct store *st = NULL;
	const struct kt_family *fam;
	struct kt_err err = { 0 };
	int json = 0, npos, rc, i;
	const struct cli_opt opts[] = {
		{ "format", 1, &format, NULL }, { "out", 1, &outp, NULL },
		{ "device", 1, &device, NULL }, { "family", 1, &family, NULL },
		{ "db", 1, &db, NULL }, { "json", 0, NULL, &json }, { NULL, 0, NULL, NULL },
	};

	if ((rc = cli_parse("export", argc, argv, opts, NULL, 0, &npos)) != 0) {
		if (rc == 1)
			fputs(export_usage, stdout);
		return rc == 1 ? 0 : rc;
	}
	if (export_format_parse(format, &fmt) < 0)
		return cli_usage_error("export", "--format must be json, c or lib");
	if (fmt == EXPORT_CUDA && !outp)
		return cli_usage_error("export", "--format lib writes a directory: give --out DIR");
	f.device = device;
	f.family = family;
	rc = 1;
	if (!db)
		db = cli_default_db();
	/* A filter that names nothing is a mistake, not an empty export. */
	if (family && (!(fam = kt_family_find(family)) || fam->hidden)) {
		kt_err_set(&err, KT_ENOTFOUND, "unknown family '%s' (see ktune families)", family);
		goto out;
	}
	/* --out must not be the database (the export would overwrite it) */
	if (outp && same_file(outp, db)) {
		kt_err_set(&err, KT_EINVAL, "--out %s is the database itself", outp);
		goto out;
	}
	if (store_open(db, STORE_RO, &st, &err) < 0 ||
	    (device && query_device_known(st, device, &err) <= 0) ||
	    export_build(st, fmt, &f, &b, &err) < 0 ||
	    export_bundle_write(&b, fmt, outp ? outp : "-", &err) < 0)
		goto out;
	rc = 0;
	if (fmt == EXPORT_CUDA) {
		if (json) {
			json_t *files = json_array();

			for (i = 0; i < b.n; i++)
				json_array_append_new(files, json_string(b.files[i].name));
			rc = cli_print_json(json_pack("{s:s,s:o}", "dir", outp, "files", files));
		} else {
			fprintf(stderr, "ktune export: wrote %d files to %s\n", b.n, outp);
		}
	}
out:
	if (err.code != KT_OK)
		rc = cli_fail("export", json, &err);
	export_bundle_release(&b);
	store_close(st);
	return rc;
}
