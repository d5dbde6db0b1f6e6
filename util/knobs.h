/*
 * knobs.h -- every environment variable ktune, libktune, the Python package,
 * the tests and the bench scripts read: one declared table (name, type,
 * default, scope, who reads it, one line of doc), listed by `ktune env` and
 * in the README (tools/check_knobs.sh fails when something reads a KTUNE_
 * variable the table lacks, or the README's list differs from the table).
 *
 * Product code reads its knobs through kt_knob_get / kt_knob_flag, never
 * getenv. A test hook -- a variable the product reads only so that a test
 * can steer a process it cannot reach otherwise (the exec'ed worker child,
 * a `ktune` run as a command) -- is declared with scope tests and read
 * through kt_knob_test_hook / kt_knob_test_long, so that every one is
 * declared, greppable and refused by the product accessors. Test programs
 * and scripts read their own variables; the table only declares them.
 */
#ifndef KT_KNOBS_H
#define KT_KNOBS_H

/* The knobs C code of ktune or libktune reads, in table order. The table
 * (util/knobs.c) holds these first, then the ones only the Python package,
 * the tests and the scripts read. */
enum kt_knob {
	/* scope product */
	KT_KNOB_DB,
	KT_KNOB_TABLE,
	KT_KNOB_CACHE_DIR,
	KT_KNOB_CUDA_HOME,
	KT_KNOB_PDL,
	KT_KNOB_HOST_COMPARE,
	KT_KNOB_NVML,
	/* scope tests: test hooks in product code */
	KT_KNOB_NVML_LIB,
	KT_KNOB_CPU_DEVICES,
	KT_KNOB_CPU_SMEM,
	KT_KNOB_TEST_NO_TMAP_ENCODE,
	KT_KNOB_NREAD		/* not a knob: how many the C code reads */
};

enum kt_knob_type {
	KT_KNOB_TYPE_PATH,	/* a file or folder */
	KT_KNOB_TYPE_TEXT,	/* a word or a few (flags, a pattern) */
	KT_KNOB_TYPE_LIST,	/* words separated by spaces or commas */
	KT_KNOB_TYPE_INT,	/* a whole number */
	KT_KNOB_TYPE_NUM,	/* a number */
	KT_KNOB_TYPE_FLAG,	/* 1 or 0 (a few: set at all; their doc says so) */
};

enum kt_knob_scope {
	KT_KNOB_SCOPE_PRODUCT,	/* what a user of ktune, libktune or the package sets */
	KT_KNOB_SCOPE_TESTS,	/* the test suites and their hooks */
	KT_KNOB_SCOPE_BENCH,	/* the bench scripts and the tests' bench modes */
};

struct kt_knob_info {
	const char *name;	/* "KTUNE_DB" */
	enum kt_knob_type type;
	/* What applies when unset, as text; "" when nothing does. An int or
	 * flag knob that C code reads has a number here, and the typed
	 * accessors use it. */
	const char *def;
	enum kt_knob_scope scope;
	const char *readers;	/* who reads it: "ktune", "libktune", "tests", a script */
	const char *doc;	/* one line */
};

/* The table: kt_knob_count() entries, the first KT_KNOB_NREAD in enum
 * kt_knob's order. kt_knob_at() is NULL out of range; kt_knob_find() NULL
 * for a name not declared. */
int kt_knob_count(void);
const struct kt_knob_info *kt_knob_at(int i);
const struct kt_knob_info *kt_knob_find(const char *name);
const char *kt_knob_type_name(enum kt_knob_type t);	/* "path", "int", ... */
const char *kt_knob_scope_name(enum kt_knob_scope s);	/* "product", "tests", "bench" */

/* A product knob's value as the environment has it: NULL when unset (an
 * empty value is returned as such: callers decide what empty means). NULL
 * as well for a knob that is not of scope product. */
const char *kt_knob_get(enum kt_knob k);
/* A product flag: 1 for "1", 0 for "0", else (unset, empty, another word)
 * the table's default. */
int kt_knob_flag(enum kt_knob k);

/* A test hook's value, as kt_knob_get; NULL for a knob not of scope tests. */
const char *kt_knob_test_hook(enum kt_knob k);
/* A test hook as a whole number in [min, max]; the table's default when
 * unset, empty, not a whole number or out of range. */
long kt_knob_test_long(enum kt_knob k, long min, long max);

#endif
