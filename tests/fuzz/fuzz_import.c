/*
 * fuzz_import.c -- libFuzzer target: a JSON export document as `ktune
 * import` and POST /v1/import take it, checked and written into a store.
 * Each input is imported inside a transaction that is rolled back, so the
 * database stays empty and every input meets the same one. A document the
 * importer takes must import again adding nothing (a mismatch aborts).
 *
 * Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/store.h"
#include "server/import.h"

static struct store *st;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/ktune-fuzz-import-XXXXXX", db[64];
	struct kt_err err = { 0 };

	(void)argc;
	(void)argv;
	if (!mkdtemp(dir))
		abort();
	snprintf(db, sizeof(db), "%s/f.db", dir);
	if (store_open(db, STORE_RW, &st, &err) < 0) {
		fprintf(stderr, "fuzz_import: %s\n", err.msg);
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct import_stats a, b;
	struct kt_err err = { 0 };

	if (store_tx_begin(st, &err) < 0)
		abort();
	if (import_json_text(st, (const char *)data, size, &a, &err) == 0) {
		kt_err_clear(&err);
		if (import_json_text(st, (const char *)data, size, &b, &err) != 0 ||
		    b.entries_added != 0 || b.entries_skipped != a.entries)
			abort();
	}
	store_tx_rollback(st);
	return 0;
}
