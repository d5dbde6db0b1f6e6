/*
 * test_runtime.c -- libktune (include/ktune.h).
 *
 * CPU suite (no GPU needed):
 *  - the header compiles as C11 and as C++17 without CUDA's headers, and a
 *    program links both build/libktune.a and build/libktune.so; the shared
 *    library needs nothing but libc/libm (no SQLite, microhttpd, jansson,
 *    NVRTC or driver at load time) and exports ktune_* only;
 *  - error paths: no GPU (a clear KTUNE_ERROR_NO_GPU, never a crash), bad
 *    shapes and arguments, missing or malformed tables, options; messages
 *    per thread;
 *  - libktune's plans for shapes never tuned run on the plan emulator
 *    (tests/plan_emu.c) against the CPU reference: dense and lowrank at
 *    777 tokens with a borrowed (nearest) config, jagged attention forward
 *    and backward over 1,000 random lengths (1 and non-multiples of the
 *    block among them) with the bound launch; monarch's and blast's
 *    workspace and prepared buffers are laid out without overlap, every
 *    prepared buffer a config reads is in the prepared layout, and the
 *    timed launches are the family's plan.
 * GPU suite (skips without a GPU; KTUNE_REQUIRE_GPU=1 makes that a
 * failure): every family through libktune at tuned and untuned shapes
 * against the GPU reference (attention: 1,000 random lengths against the
 * float64 CPU reference, forward and backward), a warmed call captured
 * into a CUDA graph and replayed, a cold call refused while capturing,
 * and calls from several threads at once.
 *
 * KTUNE_RUNTIME_BENCH=FILE (bench/runtime.sh) adds a timing suite: each
 * line "family|shape|tuned" of $KTUNE_RUNTIME_BENCH_SHAPES is verified and
 * timed as the tuner times (L2 flushed, events, median) and written to FILE
 * as a JSON row.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/ktune.h"
#include "include/ktune_db.h"
#include "kernels/blockattn.h"
#include "runtime/cu_api.h"
#include "runtime/rt.h"
#include "tests/plan_emu.h"
#include "tests/testutil.h"

#ifndef KT_CUDA_HOME
#define KT_CUDA_HOME "/usr/local/cuda"
#endif

#define SHIPPED "data/h200-results.json"

/* programs built against a sanitized libktune carry the same runtime */
#if defined(__SANITIZE_ADDRESS__)
#define SAN_FLAGS "-fsanitize=address,undefined "
#else
#define SAN_FLAGS ""
#endif

static int run_cmd(const char *cmd, char **out)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	int rc = kt_test_exec(argv, NULL, out, 300);

	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n%s\n", rc, cmd, out && *out ? *out : "");
	return rc;
}

/* The folder of the ktune binary, which holds libktune.a and .so. */
static const char *libdir(void)
{
	static char dir[1024];
	const char *bin = kt_test_ktune();
	const char *slash = strrchr(bin, '/');

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - bin) : 1, slash ? bin : ".");
	return dir;
}

static ktune_table *open_shipped(void)
{
	ktune_table *t = NULL;

	CU_ASSERT_EQUAL_FATAL(ktune_open_json(SHIPPED, &t), KTUNE_OK);
	return t;
}

/* ---- the header and the libraries ---- */

static const char header_prog[] =
	"#include <stdio.h>\n#include <string.h>\n#include \"ktune.h\"\n\n"
	"int main(void)\n{\n"
	"\tktune_table *t = NULL;\n\tktune_choice c;\n\tint64_t ws = -1;\n"
	"\tint rc, gpu;\n\n"
	"\tif (ktune_api_version() != KTUNE_API_VERSION)\n\t\treturn 1;\n"
	"\tif (ktune_open_defaults(&t) != KTUNE_OK)\n\t\treturn 2;\n"
	"\t/* no GPU here (or one): a status and a message, never a crash */\n"
	"\trc = ktune_dense(t, 0, 0, 0, 16, 64, 64, 0, 0, 0);\n"
	"\tgpu = rc != KTUNE_ERROR_NO_GPU;\n"
	"\tif (rc == KTUNE_OK || !ktune_last_error()[0])\n\t\treturn 3;\n"
	"\tif (ktune_set_option(t, \"arch\", \"sm_90a\") != KTUNE_OK)\n\t\treturn 4;\n"
	"\tif (ktune_choose(t, \"dense\", \"tokens=777,in=4096,out=4096\", 0, &c) != KTUNE_OK ||\n"
	"\t    strcmp(c.match, \"default\") != 0)\n\t\treturn 5;\n"
	"\tif (!gpu && ktune_blockattn_workspace_size(t, 1, 10, 1000, 4, 128, 64, 0, 0, 0, &ws) "
	"!= KTUNE_OK)\n\t\treturn 6;\n"
	"\tprintf(\"%s %s %lld %s\\n\", c.match, c.config, (long long)ws, ktune_status_name(rc));\n"
	"\tktune_close(t);\n\treturn 0;\n}\n";

static void test_header_builds(void)
{
	const char *dir = kt_test_tmpdir();
	char path[1200], cmd[8192], *out = NULL, *cwd = getcwd(NULL, 0);
	const char *ld = libdir();
	char lib[1200];

	CU_ASSERT_PTR_NOT_NULL_FATAL(cwd);
	snprintf(lib, sizeof(lib), "%s%s%s", ld[0] == '/' ? "" : cwd, ld[0] == '/' ? "" : "/", ld);
	snprintf(path, sizeof(path), "%s/hprog.c", dir);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, header_prog, strlen(header_prog)), 0);
	/* no -I of CUDA: the header needs none */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && gcc " SAN_FLAGS "-std=c11 -Wall -Wextra -Wpedantic -Wstrict-prototypes "
		 "-Wshadow -Werror -I'%s/include' -o hc hprog.c '%s/libktune.a' -ldl -lm -pthread && "
		 "./hc && g++ " SAN_FLAGS "-std=c++17 -x c++ -Wall -Wextra -Wpedantic -Werror "
		 "-I'%s/include' -o hcc hprog.c "
		 "-x none -L'%s' -Wl,-rpath,'%s' -lktune && ./hcc",
		 dir, cwd, lib, cwd, lib, lib);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "default variant="));
	free(out);
	out = NULL;
	/* libktune.so: libc, libm (and the loader) only; ktune_* alone exported */
	snprintf(cmd, sizeof(cmd),
		 "readelf -d '%s/libktune.so' | sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p' | "
		 "grep -v -e '^libc\\.so' -e '^libm\\.so' -e '^ld-linux' -e '^libdl\\.so' "
		 "-e '^libpthread\\.so' -e '^libasan' -e '^libubsan' -e '^libstdc' -e '^libgcc' ; "
		 "nm -D --defined-only '%s/libktune.so' | awk '$2 == \"T\" && $3 !~ /^ktune_/ {print}'",
		 lib, lib);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	CU_ASSERT_PTR_NOT_NULL(out);
	if (out) {
		CU_ASSERT_STRING_EQUAL(out, "");
		if (out[0])
			fprintf(stderr, "libktune.so needs or exports more than it should:\n%s\n", out);
	}
	free(out);
	free(cwd);
}

/* README.md's "Use it from C/CUDA" program, built as the README says and
 * run: without a GPU it reports KTUNE_ERROR_NO_GPU; with one it computes. */
static void test_readme_example(void)
{
	FILE *fp = fopen("README.md", "r");
	char *text = NULL, *a, *b, cmd[4096], *out = NULL, *cwd = getcwd(NULL, 0);
	const char *path = kt_test_path("readme_app.c"), *ld = libdir();
	struct cu_api api;
	struct kt_err e = { 0 };
	long len;
	int n = 0, rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cwd);
	fseek(fp, 0, SEEK_END);
	len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	text = calloc((size_t)len + 1, 1);
	CU_ASSERT_FATAL(text && fread(text, 1, (size_t)len, fp) == (size_t)len);
	fclose(fp);
	a = strstr(text, "## Use it from C/CUDA");
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	a = strstr(a, "```c\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	a += 5;
	b = strstr(a, "\n```");
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, a, (size_t)(b - a) + 1), 0);
	snprintf(cmd, sizeof(cmd),
		 "gcc " SAN_FLAGS "-std=c11 -Wall -Wextra -Werror -I'%s/include' -I%s/include -o "
		 "'%s.bin' '%s' "
		 "'%s%s%s/libktune.a' -L%s/lib64 -Wl,-rpath,%s/lib64 -lcudart -ldl -lm -pthread && "
		 "'%s.bin'",
		 cwd, KT_CUDA_HOME, path, path, ld[0] == '/' ? "" : cwd, ld[0] == '/' ? "" : "/", ld,
		 KT_CUDA_HOME, KT_CUDA_HOME, path);
	{
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };

		rc = kt_test_exec(argv, NULL, &out, 300);
	}
	if (cu_api_load(&api, &e) == 0 && api.Init(0) == CUDA_SUCCESS &&
	    api.DeviceGetCount(&n) == CUDA_SUCCESS && n > 0) {
		CU_ASSERT_EQUAL(rc, 0);
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "y[0][0] = 1"));
	} else {
		CU_ASSERT_EQUAL(rc, 1);
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "KTUNE_ERROR_NO_GPU: no GPU"));
	}
	if (out)
		printf("\n    README example: %s", out);
	free(out);
	free(text);
	free(cwd);
}

/* ---- error paths ---- */

static void expect(int rc, int want, const char *needle)
{
	CU_ASSERT_EQUAL(rc, want);
	CU_ASSERT_PTR_NOT_NULL(strstr(ktune_last_error(), needle));
	if (rc != want || !strstr(ktune_last_error(), needle))
		fprintf(stderr, "\n  got %s '%s', want %s with '%s'\n", ktune_status_name(rc),
			ktune_last_error(), ktune_status_name(want), needle);
}

static void test_errors_tables(void)
{
	ktune_table *t = (ktune_table *)1;
	const char *bad = kt_test_path("bad.json"), *notexp = kt_test_path("notexport.json");
	char *save = kt_test_env_save("KTUNE_TABLE");

	expect(ktune_open_json(kt_test_path("nosuch.json"), &t), KTUNE_ERROR_NOT_FOUND, "nosuch.json");
	CU_ASSERT_PTR_NULL(t);
	kt_test_env_put("KTUNE_TABLE", NULL);
	expect(ktune_open_json(NULL, &t), KTUNE_ERROR_NOT_FOUND, "KTUNE_TABLE");
	kt_test_env_put("KTUNE_TABLE", save);
	free(save);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(bad, "{\"format\": \"ktune-export\",\n \"devices\": [,]}", 44), 0);
	expect(ktune_open_json(bad, &t), KTUNE_ERROR_BAD_TABLE, "line 2");
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(notexp, "[1, 2, 3]", 9), 0);
	expect(ktune_open_json(notexp, &t), KTUNE_ERROR_BAD_TABLE, "not a ktune export");
	expect(ktune_open_json_text("{\"a\": \"\\u12\"}", 12, &t), KTUNE_ERROR_BAD_TABLE, "escape");
	expect(ktune_open_json_text("{} {}", 5, &t), KTUNE_ERROR_BAD_TABLE, "after the value");
	expect(ktune_open_builtin(NULL, &t), KTUNE_ERROR_BAD_TABLE, "version");
	expect(ktune_open_json(SHIPPED, NULL), KTUNE_ERROR_INVALID, "NULL");
	/* a table that opens says nothing */
	t = open_shipped();
	CU_ASSERT_STRING_EQUAL(ktune_last_error(), "");
	ktune_close(t);
	ktune_close(NULL);
	CU_ASSERT_STRING_EQUAL(ktune_status_name(KTUNE_ERROR_CAPTURE), "KTUNE_ERROR_CAPTURE");
	CU_ASSERT_STRING_EQUAL(ktune_status_name(99), "KTUNE_ERROR_UNKNOWN");
}

static void test_errors_calls(void)
{
	ktune_table *t = open_shipped();
	ktune_choice c;
	int64_t bytes = 7;
	void *bufs[4] = { NULL, NULL, NULL, NULL };

	/* without a GPU and without an arch to plan for: no GPU, said so */
	if (ktune_dense(t, NULL, NULL, NULL, 16, 64, 64, NULL, 0, NULL) == KTUNE_ERROR_NO_GPU) {
		CU_ASSERT_PTR_NOT_NULL(strstr(ktune_last_error(), "no GPU"));
		expect(ktune_dense_workspace_size(t, 16, 64, 64, NULL, &bytes), KTUNE_ERROR_NO_GPU,
		       "no GPU");
		expect(ktune_run(t, "dense", "tokens=16,in=64,out=64", bufs, 3, NULL, 0, NULL),
		       KTUNE_ERROR_NO_GPU, "no GPU");
		expect(ktune_blockattn_fwd(t, bufs[0], bufs[0], bufs[0], bufs[0], NULL, NULL, 2, 100,
					   4, 128, 64, 0, 0, NULL, 0, NULL),
		       KTUNE_ERROR_NO_GPU, "no GPU");
	}
	expect(ktune_dense(NULL, NULL, NULL, NULL, 16, 64, 64, NULL, 0, NULL), KTUNE_ERROR_INVALID,
	       "table is NULL");
	/* bad shapes: before any GPU is looked for */
	expect(ktune_dense(t, NULL, NULL, NULL, 0, 64, 64, NULL, 0, NULL), KTUNE_ERROR_INVALID,
	       "tokens");
	expect(ktune_lowrank(t, NULL, NULL, NULL, NULL, 16, 64, 64, 0, NULL, 0, NULL),
	       KTUNE_ERROR_INVALID, "rank");
	expect(ktune_blockattn_fwd(t, bufs[0], bufs[0], bufs[0], bufs[0], NULL, NULL, 10, 5, 4, 128,
				   64, 0, 0, NULL, 0, NULL),
	       KTUNE_ERROR_INVALID, "batch <= tokens");
	expect(ktune_blockattn_bwd(t, bufs[0], bufs[0], bufs[0], bufs[0], bufs[0], bufs[0], bufs[0],
				   NULL, NULL, 10, 500, 4, 128, 64, 3, 0, NULL, 0, NULL),
	       KTUNE_ERROR_INVALID, "rope 3");
	expect(ktune_blockattn_fwd(t, bufs[0], bufs[0], bufs[0], bufs[0], NULL, NULL, 10, 500, 4, 128,
				   64, 1, 0, NULL, 0, NULL),
	       KTUNE_ERROR_INVALID, "needs a rope table");
	expect(ktune_choose(t, "nosuch", "tokens=1", NULL, &c), KTUNE_ERROR_NOT_FOUND, "nosuch");
	expect(ktune_choose(t, "selftest", "tokens=1", NULL, &c), KTUNE_ERROR_NOT_FOUND, "selftest");
	expect(ktune_choose(t, "dense", "tokens=16,in=64", NULL, &c), KTUNE_ERROR_INVALID, "out");
	expect(ktune_choose(t, "blockattn_fwd", "seqs=4,heads=4,head_dim=128,block=64,rope=0", NULL,
			    &c), KTUNE_ERROR_INVALID, "tokens");
	expect(ktune_choose(t, "blockattn_fwd", "seqs=4,tokens=100,heads=4,head_dim=128,block=64,x=1",
			    NULL, &c), KTUNE_ERROR_INVALID, "unknown key 'x'");
	/* options */
	expect(ktune_set_option(t, "nosuch", "1"), KTUNE_ERROR_INVALID, "unknown option");
	expect(ktune_set_option(t, "arch", "sm_99"), KTUNE_ERROR_INVALID, "sm_99");
	expect(ktune_set_option(t, "max_distance", "-1"), KTUNE_ERROR_INVALID, "max_distance");
	expect(ktune_set_option(t, "nvrtc", "yes"), KTUNE_ERROR_INVALID, "nvrtc");
	/* shapes no config can run: head_dim 96 (the kernels take 64, 128) */
	CU_ASSERT_EQUAL(ktune_set_option(t, "arch", "sm_90a"), KTUNE_OK);
	expect(ktune_choose(t, "blockattn_fwd", "seqs=4,tokens=100,heads=4,head_dim=96,block=64,rope=0",
			    NULL, &c), KTUNE_ERROR_UNSUPPORTED, "blockattn_fwd");
	expect(ktune_choose(t, "dense", "tokens=16,in=100,out=64", NULL, &c), KTUNE_ERROR_UNSUPPORTED,
	       "dense");
	/* prepared weights: sizes from the dims alone, errors said */
	CU_ASSERT_EQUAL(ktune_monarch_prepared_size(t, 4096, 4096, 16, 1024, &bytes), KTUNE_OK);
	CU_ASSERT_EQUAL(bytes, 4096 * 1024 * 2);	/* w1r */
	CU_ASSERT_EQUAL(ktune_blast_prepared_size(t, 4096, 4096, 16, 1024, &bytes), KTUNE_OK);
	CU_ASSERT_EQUAL(bytes, 1024 * 256 * 2 + 16 * 16 * 1024 * 4);	/* St and S32 */
	expect(ktune_monarch_prepare(t, NULL, NULL, NULL, 0, 4096, 4096, 16, 1024, NULL),
	       KTUNE_ERROR_WORKSPACE, "needs 8388608");
	expect(ktune_monarch_prepared_size(t, 4096, 4096, 16, 1024, NULL), KTUNE_ERROR_INVALID,
	       "NULL");
	ktune_close(t);
}

/* Messages are per thread: another thread's failure does not change
 * this one's. */
static void *fail_other(void *arg)
{
	ktune_table *t = arg;
	ktune_choice c;

	(void)ktune_choose(t, "other_thread_family", "x=1", NULL, &c);
	return NULL;
}

static void test_errors_threads(void)
{
	ktune_table *t = open_shipped();
	ktune_choice c;
	pthread_t th;

	expect(ktune_choose(t, "mine", "x=1", NULL, &c), KTUNE_ERROR_NOT_FOUND, "mine");
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, fail_other, t), 0);
	pthread_join(th, NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(ktune_last_error(), "mine"));
	ktune_close(t);
}

/* libktune_db: the same answers from the database the shipped results
 * import into; a program links it with libktune.a and -lsqlite3. */
static void test_open_db(void)
{
	const char *db = kt_test_path("rt.db"), *bad = kt_test_path("rt_bad.db");
	char *argv[] = { (char *)kt_test_ktune(), "import", SHIPPED, "--db", (char *)db, NULL };
	char cmd[4096], *out = NULL, *cwd = getcwd(NULL, 0);
	const char *ld = libdir();
	ktune_table *t = NULL;
	ktune_choice c;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cwd);
	CU_ASSERT_EQUAL_FATAL(kt_test_exec(argv, NULL, &out, 120), 0);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL_FATAL(ktune_open_db(db, &t), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_set_option(t, "arch", "sm_90a"), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_set_option(t, "device", "NVIDIA H200"), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_choose(t, "blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256",
				     NULL, &c), KTUNE_OK);
	CU_ASSERT_STRING_EQUAL(c.match, "exact");
	CU_ASSERT_PTR_NOT_NULL(strstr(c.config, "variant=tcmix_fused"));
	ktune_close(t);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(bad, "not a database, not at all", 26), 0);
	CU_ASSERT_EQUAL(ktune_open_db(bad, &t), KTUNE_ERROR_BAD_TABLE);
	CU_ASSERT_PTR_NULL(t);
	snprintf(cmd, sizeof(cmd),
		 "printf '#include \"ktune_db.h\"\nint main(int c, char **v)\n{\n\tktune_table *t;\n\n"
		 "\treturn c < 2 || ktune_open_db(v[1], &t) != 0;\n}\n' > '%s.c' && "
		 "gcc " SAN_FLAGS "-std=c11 -Wall -Werror -I'%s/include' -o '%s.bin' '%s.c' "
		 "'%s%s%s/libktune_db.a' "
		 "'%s%s%s/libktune.a' -lsqlite3 -ldl -lm -pthread && '%s.bin' '%s'",
		 bad, cwd, bad, bad, ld[0] == '/' ? "" : cwd, ld[0] == '/' ? "" : "/", ld,
		 ld[0] == '/' ? "" : cwd, ld[0] == '/' ? "" : "/", ld, bad, db);
	CU_ASSERT_EQUAL(run_cmd(cmd, &out), 0);
	free(out);
	free(cwd);
}

/* ---- planning, on the plan emulator ---- */

/* libktune's call of family at shape, planned offline for the shipped
 * table's H200 (sm_90a) with no distance limit (so that an untuned shape
 * borrows a tuned config). */
static struct rt_call *plan_call(ktune_table *t, const char *family, const char *shape)
{
	struct rt_shape s;
	struct rt_call *c = calloc(1, sizeof(*c));

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL_FATAL(rt_shape_parse(family, shape, &s), KTUNE_OK);
	if (rt_choose(t, &s, NULL, c) != KTUNE_OK) {
		fprintf(stderr, "\n  %s %s: %s\n", family, shape, ktune_last_error());
		CU_FAIL_FATAL("libktune did not plan the call");
	}
	return c;
}

static ktune_table *offline_table(void)
{
	ktune_table *t = open_shipped();

	CU_ASSERT_EQUAL(ktune_set_option(t, "arch", "sm_90a"), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_set_option(t, "device", "NVIDIA H200"), KTUNE_OK);
	CU_ASSERT_EQUAL(ktune_set_option(t, "max_distance", "inf"), KTUNE_OK);
	return t;
}

/* Runs call c on the emulator from seeded inputs and compares its one
 * output with the family's CPU reference. */
static void emu_linear(const struct rt_call *c)
{
	const struct kt_family *f = c->shape.fam;
	float *in[KT_MAX_BUFS] = { NULL }, *out[KT_MAX_BUFS] = { NULL }, *ref = NULL;
	uint16_t *bits[KT_MAX_BUFS] = { NULL };
	int i, y = -1;
	size_t e;
	long oob = 0;
	struct kt_err err = { 0 };
	double rel;

	for (i = 0; i < c->nbufs; i++) {
		if (c->bufs[i].role == KT_BUF_OUTPUT)
			y = i;
		if (c->bufs[i].role != KT_BUF_INPUT)
			continue;
		bits[i] = malloc(c->bufs[i].elems * sizeof(uint16_t));
		in[i] = malloc(c->bufs[i].elems * sizeof(float));
		CU_ASSERT_FATAL(bits[i] && in[i]);
		kt_fill_bf16(bits[i], c->bufs[i].elems, 1000 + (uint64_t)i, c->bufs[i].scale);
		for (e = 0; e < c->bufs[i].elems; e++)
			in[i][e] = kt_bf16_to_f32(bits[i][e]);
	}
	CU_ASSERT_FATAL(y >= 0);
	ref = malloc(c->bufs[y].elems * sizeof(float));
	CU_ASSERT_FATAL(ref != NULL);
	{
		float *outs[KT_MAX_BUFS] = { NULL };

		outs[0] = ref;
		CU_ASSERT_EQUAL_FATAL(f->cpu_ref(f, &c->shape.shape, (const void *const *)bits,
						 outs, &err), 0);
	}
	emu_run_all(&c->plan, c->bufs, c->nbufs, (const float *const *)in, c->nbufs, c->run, 1,
		    NULL, NULL, out, &oob);
	CU_ASSERT_EQUAL(oob, 0);
	CU_ASSERT_EQUAL(emu_nonfinite(out[y], c->bufs[y].elems), 0);
	rel = emu_rel_l2(out[y], ref, c->bufs[y].elems);
	CU_ASSERT(rel < f->tol);
	printf("\n    %s %s: %s %s, rel %.2e ", f->name, c->choice.shape, c->choice.match,
	       c->choice.config, rel);
	for (i = 0; i < c->nbufs; i++) {
		free(in[i]);
		free(out[i]);
		free(bits[i]);
	}
	free(ref);
}

static void test_plan_linear(void)
{
	ktune_table *t = offline_table();
	struct rt_call *c;

	/* 777 tokens never tuned: the tuned config borrowed, planned for 777 */
	c = plan_call(t, "dense", "tokens=777,in=512,out=384");
	CU_ASSERT_STRING_NOT_EQUAL(c->choice.match, "default");
	CU_ASSERT_STRING_NOT_EQUAL(c->choice.match, "exact");
	emu_linear(c);
	free(c);
	c = plan_call(t, "lowrank", "tokens=777,in=512,out=256,rank=1024");
	CU_ASSERT_STRING_NOT_EQUAL(c->choice.match, "default");
	emu_linear(c);
	free(c);
	/* and the defaults at a shape of their own */
	CU_ASSERT_EQUAL(ktune_set_option(t, "max_distance", "0"), KTUNE_OK);
	c = plan_call(t, "dense", "tokens=777,in=256,out=136");
	CU_ASSERT_STRING_EQUAL(c->choice.match, "default");
	emu_linear(c);
	free(c);
	ktune_close(t);
}

/* 1,000 lengths in [1, maxlen]: random, with 1s, exact multiples of the
 * block and its neighbours among them. */
static void lengths(int n, int maxlen, int blk, int32_t *off)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	int i;

	off[0] = 0;
	for (i = 0; i < n; i++) {
		int len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		len = 1 + (int)(x % (uint64_t)maxlen);
		if (i % 50 == 0)
			len = 1;
		else if (i % 50 == 1)
			len = blk;
		else if (i % 50 == 2)
			len = blk + 1;
		else if (i % 50 == 3)
			len = 2 * blk - 1;
		off[i + 1] = off[i] + len;
	}
}

static void emu_attention(ktune_table *t, int bwd, int nseq, int maxlen, int heads, int d, int blk,
			  int rope, const char *want_variant)
{
	int32_t *off = malloc(((size_t)nseq + 1) * sizeof(int32_t));
	float *in[KT_MAX_BUFS] = { NULL }, *out[KT_MAX_BUFS] = { NULL };
	double *x[4] = { NULL }, *tab = NULL, *ref[3] = { NULL };
	struct ba_dims p;
	struct rt_call *c;
	char shape[256];
	size_t n, nt, e;
	long oob = 0;
	int i, k, nin = bwd ? 4 : 3, noff, ntab, o0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(off);
	lengths(nseq, maxlen, blk, off);
	snprintf(shape, sizeof(shape), "seqs=%d,tokens=%d,heads=%d,head_dim=%d,block=%d,rope=%d", nseq,
		 off[nseq], heads, d, blk, rope);
	c = plan_call(t, bwd ? "blockattn_bwd" : "blockattn_fwd", shape);
	if (want_variant)
		CU_ASSERT_PTR_NOT_NULL(strstr(c->choice.config, want_variant));
	/* ws's backward at block 256: fewer persistent CTAs than the bound's
	 * items (nitems), each walking several units */
	if (bwd && blk == 256 && want_variant && strstr(want_variant, "ws")) {
		CU_ASSERT_EQUAL_FATAL(c->plan.nlaunch, 2);
		CU_ASSERT(c->plan.launch[0].grid[0] < (unsigned)c->plan.launch[0].args[9].i);
	}
	/* the block list of the bound (T and B only) and its count; the
	 * backward at block 256 its rows' statistics too (two fp32 a row
	 * and head) */
	CU_ASSERT_EQUAL(c->ws_bytes,
			(size_t)(((2 * (ba_bound_blocks(off[nseq], nseq, blk) + 1) +
				   (bwd && blk == 256 ? 2L * off[nseq] * heads : 0)) * 4 +
				  255) / 256 * 256));
	p.seqs = nseq;
	p.heads = heads;
	p.d = d;
	p.blk = blk;
	p.tokens = off[nseq];
	p.offsets = off;
	n = (size_t)p.tokens * (size_t)heads * (size_t)d;
	nt = (size_t)p.tokens * (size_t)d;
	noff = nin;
	ntab = rope ? nin + 1 : -1;
	o0 = (rope ? nin + 2 : nin + 1);
	for (i = 0; i < nin; i++) {
		CU_ASSERT_FATAL(c->bufs[i].elems == n);
		in[i] = malloc(n * sizeof(float));
		x[i] = malloc(n * sizeof(double));
		CU_ASSERT_FATAL(in[i] && x[i]);
		for (e = 0; e < n; e++)
			x[i][e] = in[i][e] = kt_bf16_to_f32(kt_f32_to_bf16(
				kt_fill_value(77 + (uint64_t)i, e, i < 2 ? 2.0 : 1.0)));
	}
	in[noff] = malloc(((size_t)nseq + 1) * sizeof(float));
	CU_ASSERT_FATAL(in[noff] != NULL);
	for (i = 0; i <= nseq; i++)
		in[noff][i] = (float)off[i];
	if (rope) {
		uint16_t *tb = malloc(nt * sizeof(uint16_t));

		in[ntab] = malloc(nt * sizeof(float));
		tab = malloc(nt * sizeof(double));
		CU_ASSERT_FATAL(tb && in[ntab] && tab);
		ba_rope_table(off, nseq, d, tb);
		for (e = 0; e < nt; e++)
			tab[e] = in[ntab][e] = kt_bf16_to_f32(tb[e]);
		free(tb);
	}
	for (k = 0; k < (bwd ? 3 : 1); k++) {
		ref[k] = malloc(n * sizeof(double));
		CU_ASSERT_FATAL(ref[k] != NULL);
	}
	CU_ASSERT_EQUAL_FATAL(bwd ? ba_cpu_bwd(&p, x[0], x[1], x[2], x[3], tab, rope == 2, ref[0],
					      ref[1], ref[2])
				  : ba_cpu_fwd(&p, x[0], x[1], x[2], tab, rope == 2, ref[0]),
			      0);
	emu_run_all(&c->plan, c->bufs, c->nbufs, (const float *const *)in, o0, c->run, 1, NULL,
		    emu_blockattn, out, &oob);
	CU_ASSERT_EQUAL(oob, 0);
	for (k = 0; k < (bwd ? 3 : 1); k++) {
		float *r = malloc(n * sizeof(float));
		double rel;

		CU_ASSERT_FATAL(r != NULL);
		for (e = 0; e < n; e++)
			r[e] = (float)ref[k][e];
		CU_ASSERT_EQUAL(emu_nonfinite(out[o0 + k], n), 0);
		rel = emu_rel_l2(out[o0 + k], r, n);
		CU_ASSERT(rel < c->shape.fam->tol);
		printf("\n    %s T=%d B=%d d=%d rope=%d %s (%s): out %d rel %.2e ", c->shape.fam->name,
		       off[nseq], nseq, d, rope, c->choice.config, c->choice.match, k, rel);
		free(r);
	}
	for (i = 0; i < KT_MAX_BUFS; i++) {
		free(in[i]);
		free(out[i]);
	}
	for (k = 0; k < 4; k++)
		free(x[k]);
	for (k = 0; k < 3; k++)
		free(ref[k]);
	free(tab);
	free(off);
	free(c);
}

static void test_plan_attention(void)
{
	ktune_table *t = offline_table();

	CU_ASSERT_EQUAL(ktune_set_option(t, "max_distance", "inf"), KTUNE_OK);
	/* the tuned grid forward and ws backward (d 128), borrowed */
	emu_attention(t, 0, 1000, 150, 2, 128, 64, 0, "variant=grid");
	emu_attention(t, 1, 1000, 150, 2, 128, 64, 1, "variant=ws");
	/* defaults: d 64, rope 2 (v rotated too), block 128 */
	emu_attention(t, 1, 1000, 200, 2, 64, 128, 2, NULL);
	emu_attention(t, 0, 1000, 100, 1, 64, 64, 2, NULL);
	/* the block-256 backward's ws default: a bound plan in persistent
	 * CTAs (the H200's 132), a few units each */
	emu_attention(t, 1, 90, 600, 2, 64, 256, 1, "variant=ws");
	ktune_close(t);
}

/* Monarch's and blast's calls: the workspace regions of the scratch the
 * plan uses are disjoint and inside the workspace, every prepared buffer
 * is the prepared layout's of its name (offset and size), the launches a
 * call skips are exactly the prep launches that write prepared buffers,
 * and the timed launches are the family's own plan. */
static void bindings(const struct rt_call *c)
{
	const struct kt_family *f = c->shape.fam;
	struct kt_plan fp, pp;
	struct kt_buf pb[KT_MAX_BUFS];
	size_t poffs[KT_MAX_BUFS], ptotal;
	struct kt_err err = { 0 };
	int i, j, np = 0, nws = 0;

	CU_ASSERT_EQUAL_FATAL(f->plan(f, &c->shape.shape, &c->ans.cfg, &c->target, &fp, &err), 0);
	CU_ASSERT_EQUAL(fp.nlaunch, c->plan.nlaunch);
	CU_ASSERT_EQUAL(memcmp(fp.launch, c->plan.launch, sizeof(fp.launch[0]) * (size_t)fp.nlaunch), 0);
	CU_ASSERT_EQUAL_FATAL(rt_prepared_layout(f, &c->shape.shape, &c->target, &pp, pb, &np, poffs,
						 &ptotal), KTUNE_OK);
	CU_ASSERT_EQUAL(ptotal, c->prep_bytes);
	for (i = 0; i < c->nbufs; i++) {
		const struct rt_bind *a = &c->bind[i];

		if (c->bufs[i].role == KT_BUF_SCRATCH && kt_plan_uses_buf(&c->plan, i))
			CU_ASSERT(a->kind == RT_WS || a->kind == RT_PREP);
		if (c->bufs[i].role != KT_BUF_SCRATCH)
			CU_ASSERT_EQUAL(a->kind, RT_USER);
		if (a->kind == RT_WS) {
			nws++;
			CU_ASSERT(a->offset % RT_ALIGN == 0 && a->offset + a->bytes <= c->ws_bytes);
			for (j = 0; j < i; j++)
				if (c->bind[j].kind == RT_WS && c->bind[j].bytes && a->bytes)
					CU_ASSERT(a->offset >= c->bind[j].offset + c->bind[j].bytes ||
						  c->bind[j].offset >= a->offset + a->bytes);
		}
		if (a->kind == RT_PREP) {
			for (j = 0; j < np; j++)
				if (pb[j].prepared && strcmp(pb[j].name, c->bufs[i].name) == 0)
					break;
			CU_ASSERT_FATAL(j < np);
			CU_ASSERT_EQUAL(a->offset, poffs[j]);
			CU_ASSERT_EQUAL(a->bytes, pb[j].elems * kt_dtype_size(pb[j].dtype));
			/* the prepare plan fills it with the kernel the plan's own
			 * prep launch names */
			for (j = 0; j < c->plan.nprep; j++)
				if (!c->run[j]) {
					int k, found = 0;

					for (k = 0; k < pp.nprep; k++)
						found |= strcmp(pp.prep[k].kernel, c->plan.prep[j].kernel) == 0;
					CU_ASSERT(found);
				}
		}
	}
	for (i = 0; i < c->plan.nprep; i++) {
		int writes = 0;

		for (j = 0; j < c->plan.prep[i].nargs; j++)
			if (c->plan.prep[i].args[j].kind == KT_ARG_BUF &&
			    c->bufs[c->plan.prep[i].args[j].buf].prepared)
				writes = 1;
		CU_ASSERT_EQUAL(c->run[i], !writes);
	}
	for (i = 0; i < c->plan.nlaunch; i++)
		CU_ASSERT(c->run[c->plan.nprep + i]);
	printf("\n    %s %s: %s, workspace %zu bytes in %d, prepared %zu ", f->name,
	       c->choice.shape, c->choice.config, c->ws_bytes, nws, c->prep_bytes);
}

static void test_plan_prepared(void)
{
	ktune_table *t = offline_table();
	static const char *const cases[][2] = {
		{ "monarch", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "monarch", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024" },
		{ "monarch_bm", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256" },
		{ "blast", "tokens=96,in=2048,out=2048,blocks=32,rank=256" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rt_call *c = plan_call(t, cases[i][0], cases[i][1]);

		bindings(c);
		free(c);
	}
	/* no unused workspace: blast's z32 / w32 (the GPU reference's) and
	 * monarch's are not in a call's workspace */
	{
		struct rt_call *c = plan_call(t, "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024");
		int k;

		for (k = 0; k < c->nbufs; k++)
			if (!strcmp(c->bufs[k].name, "z32") || !strcmp(c->bufs[k].name, "w32"))
				CU_ASSERT_EQUAL(c->bind[k].kind, RT_NONE);
		/* w and z, bf16: 2 x 32 MiB */
		CU_ASSERT_EQUAL(c->ws_bytes, 2 * (size_t)16 * 1024 * 1024 * 2);
		free(c);
	}
	ktune_close(t);
}

/* ---- the GPU suite ---- */

static struct {
	struct cu_api api;
	CUcontext ctx;
	CUstream st;
	CUdeviceptr flush;
	size_t flush_bytes;
	char why[600];
	char name[128];
	ktune_table *t;
	FILE *bench;
	/* graph capture, resolved from the driver by the test */
	CUresult (*BeginCapture)(CUstream, CUstreamCaptureMode);
	CUresult (*EndCapture)(CUstream, CUgraph *);
	CUresult (*Instantiate)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	CUresult (*GraphDestroy)(CUgraph);
	CUresult (*ExecDestroy)(CUgraphExec);
} G;

#define CK(call)                                                                 \
	do {                                                                     \
		CUresult r_ = (call);                                            \
		if (r_ != CUDA_SUCCESS) {                                        \
			cu_api_describe(&G.api, r_, G.why, sizeof(G.why));       \
			fprintf(stderr, "%s: %s\n", #call, G.why);               \
			CU_FAIL_FATAL(#call);                                    \
		}                                                                \
	} while (0)

static int sym(const char *name, int version, void *out)
{
	PFN_cuGetProcAddress_v12000 gpa;
	void *s = dlsym(G.api.lib, "cuGetProcAddress_v2"), *fn = NULL;
	CUdriverProcAddressQueryResult q;

	if (!s)
		return -1;
	memcpy(&gpa, &s, sizeof(gpa));
	if (gpa(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !fn)
		return -1;
	memcpy(out, &fn, sizeof(fn));
	return 0;
}

/* 0 up, 1 no GPU (G.why says why), -1 a GPU that failed to set up. */
static int gpu_init(void)
{
	struct kt_err e = { 0 };
	CUdevice dev;
	int n = 0, l2 = 0;

	if (cu_api_load(&G.api, &e) != 0) {
		snprintf(G.why, sizeof(G.why), "%s", e.msg);
		return 1;
	}
	if (G.api.Init(0) != CUDA_SUCCESS || G.api.DeviceGetCount(&n) != CUDA_SUCCESS || n < 1) {
		snprintf(G.why, sizeof(G.why), "no CUDA device");
		return 1;
	}
	if (G.api.DeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    G.api.DeviceGetName(G.name, sizeof(G.name), dev) != CUDA_SUCCESS ||
	    G.api.DeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev) != CUDA_SUCCESS ||
	    /* the primary context, as the CUDA runtime (torch) makes current */
	    G.api.DevicePrimaryCtxRetain(&G.ctx, dev) != CUDA_SUCCESS ||
	    G.api.CtxSetCurrent(G.ctx) != CUDA_SUCCESS ||
	    G.api.StreamCreate(&G.st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
		snprintf(G.why, sizeof(G.why), "setting up device 0 failed");
		return -1;
	}
	G.flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
	if (G.api.MemAlloc(&G.flush, G.flush_bytes) != CUDA_SUCCESS ||
	    sym("cuStreamBeginCapture", 10010, &G.BeginCapture) < 0 ||
	    sym("cuStreamEndCapture", 10000, &G.EndCapture) < 0 ||
	    sym("cuGraphInstantiateWithFlags", 11040, &G.Instantiate) < 0 ||
	    sym("cuGraphLaunch", 10000, &G.GraphLaunch) < 0 ||
	    sym("cuGraphDestroy", 10000, &G.GraphDestroy) < 0 ||
	    sym("cuGraphExecDestroy", 10000, &G.ExecDestroy) < 0) {
		snprintf(G.why, sizeof(G.why), "allocating the L2 flush or resolving graph calls failed");
		return -1;
	}
	if (ktune_open_json(SHIPPED, &G.t) != KTUNE_OK) {
		snprintf(G.why, sizeof(G.why), "%s", ktune_last_error());
		return -1;
	}
	printf("GPU: %s\n", G.name);
	return 0;
}

/* A problem on the device: the family's buffers for the shape, inputs
 * seeded, a second copy of the outputs for the reference. */
struct gprob {
	const struct kt_family *f;
	struct kt_shape s;		/* the family's (tuner's) shape */
	int nb;
	struct kt_buf b[KT_MAX_BUFS];
	CUdeviceptr d[KT_MAX_BUFS], ref[KT_MAX_BUFS];
	CUdeviceptr ws, prep;
	int64_t ws_bytes, prep_bytes;
};

static void gprob_free(struct gprob *p)
{
	int i;

	for (i = 0; i < KT_MAX_BUFS; i++) {
		if (p->d[i])
			G.api.MemFree(p->d[i]);
		if (p->ref[i])
			G.api.MemFree(p->ref[i]);
	}
	if (p->ws)
		G.api.MemFree(p->ws);
	if (p->prep)
		G.api.MemFree(p->prep);
	memset(p, 0, sizeof(*p));
}

static size_t bytes_of(const struct kt_buf *b)
{
	return b->elems * kt_dtype_size(b->dtype);
}

/* Allocates and fills the problem buffers of family f at shape key (the
 * tuner's form): inputs seeded as the tuner seeds them, outputs poisoned. */
static void gprob_make(struct gprob *p, const char *family, const char *shape)
{
	struct kt_err err = { 0 };
	int i;

	memset(p, 0, sizeof(*p));
	p->f = kt_family_find(family);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->f);
	CU_ASSERT_EQUAL_FATAL(kt_shape_parse(p->f, shape, &p->s, &err), 0);
	p->nb = p->f->buffers(p->f, &p->s, NULL, p->b);
	for (i = 0; i < p->nb; i++) {
		size_t n = bytes_of(&p->b[i]);
		void *h;

		CK(G.api.MemAlloc(&p->d[i], n ? n : 16));
		if (p->b[i].role == KT_BUF_OUTPUT) {
			CK(G.api.MemAlloc(&p->ref[i], n));
			CK(G.api.MemsetD8Async(p->d[i], 0xff, n, G.st));	/* NaN bf16 */
			CK(G.api.MemsetD8Async(p->ref[i], 0xff, n, G.st));
		}
		if (p->b[i].role != KT_BUF_INPUT)
			continue;
		h = malloc(n);
		CU_ASSERT_PTR_NOT_NULL_FATAL(h);
		if (p->f->fill) {
			CU_ASSERT_EQUAL_FATAL(p->f->fill(p->f, &p->s, i, h, 42 + (uint64_t)i), 0);
		} else {
			kt_fill_bf16(h, p->b[i].elems, 42 + (uint64_t)i, p->b[i].scale);
		}
		CK(G.api.MemcpyHtoD(p->d[i], h, n));
		free(h);
	}
}

/* The family's GPU reference into p->ref (outputs), through libktune's
 * plan runner. */
static void gprob_reference(struct gprob *p)
{
	CUdeviceptr ptrs[KT_MAX_BUFS];
	struct kt_target tgt;
	struct kt_plan plan;
	struct kt_err err = { 0 };
	int i;

	kt_target_named("sm_90a", &tgt);
	CU_ASSERT_EQUAL_FATAL(p->f->ref_plan(p->f, &p->s, &tgt, &plan, &err), 0);
	for (i = 0; i < p->nb; i++)
		ptrs[i] = p->b[i].role == KT_BUF_OUTPUT ? p->ref[i] : p->d[i];
	CU_ASSERT_EQUAL_FATAL(rt_run_plan(G.t, p->f, &plan, p->b, p->nb, ptrs, G.st), KTUNE_OK);
}

static double rel_l2_dev(CUdeviceptr a, CUdeviceptr b, size_t n, int *nonfinite)
{
	uint16_t *x = malloc(n * 2), *y = malloc(n * 2);
	double d = 0, r = 0;
	size_t i;

	CU_ASSERT_FATAL(x && y);
	CK(G.api.StreamSynchronize(G.st));
	CK(G.api.MemcpyDtoH(x, a, n * 2));
	CK(G.api.MemcpyDtoH(y, b, n * 2));
	*nonfinite = 0;
	for (i = 0; i < n; i++) {
		double u = kt_bf16_to_f32(x[i]), v = kt_bf16_to_f32(y[i]);

		if (!isfinite(u)) {
			(*nonfinite)++;
			continue;
		}
		d += (u - v) * (u - v);
		r += v * v;
	}
	free(x);
	free(y);
	return r > 0 ? sqrt(d / r) : 1e30;
}

/* The call of family at the problem's shape through the typed API. */
static int typed_call(struct gprob *p, CUstream st)
{
	const long *v = p->s.v;
	void *d[KT_MAX_BUFS];
	int i;

	for (i = 0; i < p->nb; i++)
		d[i] = (void *)(uintptr_t)p->d[i];
	if (!strcmp(p->f->name, "dense"))
		return ktune_dense(G.t, d[0], d[1], d[2], v[0], v[1], v[2], (void *)(uintptr_t)p->ws,
				   p->ws_bytes, st);
	if (!strcmp(p->f->name, "lowrank"))
		return ktune_lowrank(G.t, d[0], d[1], d[2], d[3], v[0], v[1], v[2], v[3],
				     (void *)(uintptr_t)p->ws, p->ws_bytes, st);
	if (!strcmp(p->f->name, "monarch"))
		return ktune_monarch(G.t, d[0], d[1], d[2], (void *)(uintptr_t)p->prep, p->prep_bytes,
				     d[3], v[0], v[1], v[2], v[3], v[4], (void *)(uintptr_t)p->ws,
				     p->ws_bytes, st);
	if (!strcmp(p->f->name, "monarch_bm"))
		return ktune_monarch_bm(G.t, d[0], d[1], d[2], (void *)(uintptr_t)p->prep,
					p->prep_bytes, d[3], v[0], v[1], v[2], v[3], v[4],
					(void *)(uintptr_t)p->ws, p->ws_bytes, st);
	if (!strcmp(p->f->name, "blast"))
		return ktune_blast(G.t, d[0], d[1], d[2], d[3], (void *)(uintptr_t)p->prep,
				   p->prep_bytes, d[4], v[0], v[1], v[2], v[3], v[4],
				   (void *)(uintptr_t)p->ws, p->ws_bytes, st);
	{
		/* attention with the problem's own (generated) lengths */
		int bwd = !strcmp(p->f->name, "blockattn_bwd"), rope = (int)v[BA_D_ROPE];
		int off = bwd ? 4 : 3, tab = rope ? off + 1 : -1, o = off + 1 + (rope != 0);
		long T = ba_tokens(v[BA_D_SEQS], v[BA_D_LMAX]);

		if (bwd)
			return ktune_blockattn_bwd(G.t, d[0], d[1], d[2], d[3], d[o], d[o + 1], d[o + 2],
						   d[off], tab >= 0 ? d[tab] : NULL, v[BA_D_SEQS], T,
						   v[BA_D_HEADS], v[BA_D_HDIM], v[BA_D_BLOCK], rope,
						   v[BA_D_LMAX], (void *)(uintptr_t)p->ws, p->ws_bytes,
						   st);
		return ktune_blockattn_fwd(G.t, d[0], d[1], d[2], d[o], d[off],
					   tab >= 0 ? d[tab] : NULL, v[BA_D_SEQS], T, v[BA_D_HEADS],
					   v[BA_D_HDIM], v[BA_D_BLOCK], rope, v[BA_D_LMAX],
					   (void *)(uintptr_t)p->ws, p->ws_bytes, st);
	}
}

/* Workspace and prepared buffer of the problem's call, allocated; the
 * weights prepared. */
static void gprob_ready(struct gprob *p, ktune_choice *ch)
{
	const long *v = p->s.v;
	char key[256];
	int rc;

	kt_shape_key(p->f, &p->s, key, sizeof(key));
	rc = ktune_choose(G.t, p->f->name, key, G.st, ch);
	if (rc != KTUNE_OK)
		fprintf(stderr, "\n  %s %s: %s\n", p->f->name, key, ktune_last_error());
	CU_ASSERT_EQUAL_FATAL(rc, KTUNE_OK);
	CU_ASSERT(ch->warm);
	p->ws_bytes = ch->workspace_bytes;
	if (p->ws_bytes)
		CK(G.api.MemAlloc(&p->ws, (size_t)p->ws_bytes));
	if (!strcmp(p->f->name, "monarch") || !strcmp(p->f->name, "monarch_bm")) {
		CU_ASSERT_EQUAL_FATAL(ktune_monarch_prepared_size(G.t, v[1], v[2], v[3], v[4],
								  &p->prep_bytes), KTUNE_OK);
		CK(G.api.MemAlloc(&p->prep, (size_t)p->prep_bytes));
		CU_ASSERT_EQUAL_FATAL(ktune_monarch_prepare(G.t, (void *)(uintptr_t)p->d[1],
							    (void *)(uintptr_t)p->d[2],
							    (void *)(uintptr_t)p->prep, p->prep_bytes,
							    v[1], v[2], v[3], v[4], G.st), KTUNE_OK);
	} else if (!strcmp(p->f->name, "blast")) {
		CU_ASSERT_EQUAL_FATAL(ktune_blast_prepared_size(G.t, v[1], v[2], v[3], v[4],
								&p->prep_bytes), KTUNE_OK);
		CK(G.api.MemAlloc(&p->prep, (size_t)p->prep_bytes));
		CU_ASSERT_EQUAL_FATAL(ktune_blast_prepare(G.t, (void *)(uintptr_t)p->d[1],
							  (void *)(uintptr_t)p->d[2],
							  (void *)(uintptr_t)p->d[3],
							  (void *)(uintptr_t)p->prep, p->prep_bytes, v[1],
							  v[2], v[3], v[4], G.st), KTUNE_OK);
	}
}

/* Every output of the call against the reference's; 1 when all match. */
static int gprob_verify(struct gprob *p, const char *label, double *worst)
{
	int i, ok = 1;

	*worst = 0;
	for (i = 0; i < p->nb; i++) {
		double rel;
		int bad;

		if (p->b[i].role != KT_BUF_OUTPUT)
			continue;
		rel = rel_l2_dev(p->d[i], p->ref[i], p->b[i].elems, &bad);
		ok &= bad == 0 && rel < p->f->tol;
		*worst = rel > *worst ? rel : *worst;
		if (bad || rel >= p->f->tol)
			fprintf(stderr, "\n  %s: %s rel %.3e, %d non-finite\n", label, p->b[i].name, rel, bad);
	}
	return ok;
}

static void gpu_family(const char *family, const char *shape)
{
	struct gprob p;
	ktune_choice ch;
	double worst;
	char label[300];
	int rc;

	gprob_make(&p, family, shape);
	gprob_ready(&p, &ch);
	gprob_reference(&p);
	rc = typed_call(&p, G.st);
	if (rc != KTUNE_OK)
		fprintf(stderr, "\n  %s %s: %s\n", family, shape, ktune_last_error());
	CU_ASSERT_EQUAL(rc, KTUNE_OK);
	snprintf(label, sizeof(label), "%s %s (%s %s)", family, shape, ch.match, ch.config);
	CU_ASSERT(gprob_verify(&p, label, &worst));
	printf("\n    %s: %s %s, %d kernels, rel %.2e ", label, ch.match,
	       ch.shipped ? "shipped" : "compiled", (int)ch.nkernels, worst);
	gprob_free(&p);
}

/* The call cache keeps at most its cap, retires the oldest first (their
 * calls handed over, not freed), finds by key and generation, and frees
 * everything (ASan's leak check in CI). A call is a plain allocation here:
 * the cache never looks inside. */
static void test_call_cache(void)
{
	struct rt_cache c;
	struct rt_cache_entry *retired = NULL, *e;
	struct rt_call *calls[8];
	char key[32];
	int i, n;

	memset(&c, 0, sizeof(c));
	c.cap = 3;
	for (i = 0; i < 8; i++) {
		calls[i] = malloc(16);
		CU_ASSERT_PTR_NOT_NULL_FATAL(calls[i]);
		snprintf(key, sizeof(key), "blockattn_fwd tokens=%d", 1000 + i);
		CU_ASSERT_EQUAL(rt_cache_put(&c, key, 1, calls[i], &retired), 0);
		CU_ASSERT(c.n <= 3);
	}
	CU_ASSERT_EQUAL(c.n, 3);
	/* the newest three are found, under their generation only */
	for (i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "blockattn_fwd tokens=%d", 1000 + i);
		CU_ASSERT_PTR_EQUAL(rt_cache_find(&c, key, 1), i >= 5 ? calls[i] : NULL);
		CU_ASSERT_PTR_NULL(rt_cache_find(&c, key, 2));
	}
	/* the five oldest were retired, each with its own call */
	for (n = 0, e = retired; e; e = e->next, n++) {
		int k = atoi(strchr(e->key, '=') + 1) - 1000;

		CU_ASSERT(k >= 0 && k < 5);
		CU_ASSERT_PTR_EQUAL(e->call, calls[k >= 0 && k < 5 ? k : 0]);
	}
	CU_ASSERT_EQUAL(n, 5);
	rt_cache_free_list(retired);
	/* a key published again under a new generation sits beside the old */
	calls[0] = malloc(16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(calls[0]);
	retired = NULL;
	CU_ASSERT_EQUAL(rt_cache_put(&c, "blockattn_fwd tokens=1007", 2, calls[0], &retired), 0);
	CU_ASSERT_PTR_EQUAL(rt_cache_find(&c, "blockattn_fwd tokens=1007", 2), calls[0]);
	CU_ASSERT_PTR_EQUAL(rt_cache_find(&c, "blockattn_fwd tokens=1007", 1), calls[7]);
	CU_ASSERT_PTR_NOT_NULL(retired);	/* tokens=1005 made room */
	CU_ASSERT_PTR_NULL(rt_cache_find(&c, "blockattn_fwd tokens=1005", 1));
	rt_cache_free_list(retired);
	rt_cache_clear(&c);
	CU_ASSERT_EQUAL(c.n, 0);
	CU_ASSERT_PTR_NULL(c.oldest);
	CU_ASSERT_PTR_NULL(rt_cache_find(&c, "blockattn_fwd tokens=1006", 1));
	/* the default cap holds when none is set */
	c.cap = 0;
	retired = NULL;
	for (i = 0; i < RT_CACHE_CAP + 10; i++) {
		snprintf(key, sizeof(key), "dense tokens=%d", i);
		CU_ASSERT_EQUAL_FATAL(rt_cache_put(&c, key, 0, malloc(16), &retired), 0);
	}
	CU_ASSERT_EQUAL(c.n, RT_CACHE_CAP);
	for (n = 0, e = retired; e; e = e->next)
		n++;
	CU_ASSERT_EQUAL(n, 10);
	rt_cache_free_list(retired);
	rt_cache_clear(&c);
}

/* Counts a list linked through `next` and frees it; *hits (if given) is
 * raised by the entries under key. */
static int free_count_key(struct rt_cache_entry *list, const char *key, int *hits)
{
	int n = 0;
	struct rt_cache_entry *e;

	for (e = list; e; e = e->next, n++)
		if (hits && strcmp(e->key, key) == 0)
			++*hits;
	rt_cache_free_list(list);
	return n;
}

static int free_count(struct rt_cache_entry *list)
{
	return free_count_key(list, NULL, NULL);
}

/* Publishes one more call into a cache of cap 1: the previous call is
 * retired onto the reclaim's current list. */
static void retire_one(struct rt_cache *c, struct rt_reclaim *r, int i)
{
	char key[48];

	snprintf(key, sizeof(key), "blockattn_bwd tokens=%d", i);
	CU_ASSERT_EQUAL_FATAL(rt_cache_put(c, key, 0, malloc(16), rt_reclaim_list(r)), 0);
}

/* A retired call is never freed while a caller that entered before its
 * retirement is inside, and is freed even when callers always overlap (a
 * single count of callers inside never reaches 0 then). ASan's leak check
 * in CI sees every call freed. */
static void test_call_reclaim(void)
{
	struct rt_cache c;
	struct rt_reclaim r;
	int a, b, x, y, i, freed = 0, slot[2];

	memset(&c, 0, sizeof(c));
	memset(&r, 0, sizeof(r));
	c.cap = 1;
	retire_one(&c, &r, 0);	/* published, nothing retired yet */
	/* alone: what was retired while inside goes when the caller leaves */
	a = rt_reclaim_enter(&r);
	retire_one(&c, &r, 1);
	CU_ASSERT_EQUAL(free_count(rt_reclaim_leave(&r, a)), 1);
	/* A inside, X retired, B in and out: A may hold X */
	a = rt_reclaim_enter(&r);
	retire_one(&c, &r, 2);
	b = rt_reclaim_enter(&r);
	CU_ASSERT_EQUAL(free_count(rt_reclaim_leave(&r, b)), 0);
	/* X goes when A leaves, though C came in meanwhile and stays */
	x = rt_reclaim_enter(&r);	/* C */
	CU_ASSERT_EQUAL(free_count(rt_reclaim_leave(&r, a)), 1);
	/* callers that always overlap, one retirement each: each is freed
	 * within two hand-overs, never with its possible holder inside */
	for (i = 0; i < 100; i++) {
		retire_one(&c, &r, 3 + i);
		y = rt_reclaim_enter(&r);
		freed += free_count(rt_reclaim_leave(&r, x));
		x = y;
	}
	CU_ASSERT(freed >= 98);
	/* a caller entered before a retirement blocks it, whatever the slots
	 * of those who come and go around it (tokens=102 is retired by 200) */
	slot[0] = rt_reclaim_enter(&r);
	retire_one(&c, &r, 200);
	for (i = 0, b = 0; i < 6; i++) {
		slot[1] = rt_reclaim_enter(&r);
		free_count_key(rt_reclaim_leave(&r, x), "blockattn_bwd tokens=102", &b);
		x = slot[1];
	}
	CU_ASSERT_EQUAL(b, 0);
	free_count_key(rt_reclaim_leave(&r, x), "blockattn_bwd tokens=102", &b);
	CU_ASSERT_EQUAL(b, 0);
	/* the last one out frees everything */
	free_count_key(rt_reclaim_leave(&r, slot[0]), "blockattn_bwd tokens=102", &b);
	CU_ASSERT_EQUAL(b, 1);
	CU_ASSERT_PTR_NULL(r.retired[0]);
	CU_ASSERT_PTR_NULL(r.retired[1]);
	CU_ASSERT_EQUAL(r.inside[0] + r.inside[1], 0);
	rt_cache_clear(&c);
	CU_ASSERT_PTR_NULL(rt_reclaim_all(&r));
}

static void test_gpu_linear(void)
{
	static const char *const cases[][2] = {
		{ "dense", "tokens=1024,in=4096,out=4096" },
		{ "dense", "tokens=777,in=4096,out=4096" },
		{ "dense", "tokens=16,in=2048,out=11008" },
		{ "lowrank", "tokens=1024,in=4096,out=4096,rank=1024" },
		{ "lowrank", "tokens=777,in=4096,out=4096,rank=1024" },
		{ "lowrank", "tokens=3000,in=2048,out=2048,rank=256" },
		{ "monarch", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024" },
		{ "monarch", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "monarch", "tokens=2000,in=2048,out=2048,blocks=16,rank=256" },
		{ "monarch_bm", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=1024,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256" },
		{ "blast", "tokens=777,in=4096,out=4096,blocks=16,rank=1024" },
		{ "blast", "tokens=333,in=2048,out=2048,blocks=16,rank=256" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		gpu_family(cases[i][0], cases[i][1]);
}

/* Attention at the tuned shapes (generated lengths, the GPU reference),
 * then 1,000 random lengths (1 and non-multiples of the block among them)
 * against the float64 CPU reference, forward and backward. */
static void gpu_attention_random(int bwd, int heads, int d, int blk, int rope)
{
	const int nseq = 1000;
	int32_t *off = malloc((nseq + 1) * sizeof(int32_t));
	const int nin = bwd ? 4 : 3;
	size_t n, nt, e;
	uint16_t *h[4] = { NULL }, *tb = NULL, *got = NULL;
	double *x[4] = { NULL }, *tab = NULL, *ref[3] = { NULL };
	CUdeviceptr dx[4] = { 0 }, doff = 0, dtab = 0, dout[3] = { 0 }, ws = 0;
	int64_t wsb = 0;
	struct ba_dims p;
	ktune_choice ch;
	char shape[256];
	int i, k, rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(off);
	lengths(nseq, 200, blk, off);
	p.seqs = nseq;
	p.heads = heads;
	p.d = d;
	p.blk = blk;
	p.tokens = off[nseq];
	p.offsets = off;
	n = (size_t)p.tokens * (size_t)heads * (size_t)d;
	nt = (size_t)p.tokens * (size_t)d;
	for (i = 0; i < nin; i++) {
		h[i] = malloc(n * 2);
		x[i] = malloc(n * sizeof(double));
		CU_ASSERT_FATAL(h[i] && x[i]);
		kt_fill_bf16(h[i], n, 300 + (uint64_t)i, i < 2 ? 2.0 : 1.0);
		for (e = 0; e < n; e++)
			x[i][e] = kt_bf16_to_f32(h[i][e]);
		CK(G.api.MemAlloc(&dx[i], n * 2));
		CK(G.api.MemcpyHtoD(dx[i], h[i], n * 2));
	}
	CK(G.api.MemAlloc(&doff, (nseq + 1) * 4));
	CK(G.api.MemcpyHtoD(doff, off, (nseq + 1) * 4));
	if (rope) {
		tb = malloc(nt * 2);
		tab = malloc(nt * sizeof(double));
		CU_ASSERT_FATAL(tb && tab);
		ba_rope_table(off, nseq, d, tb);
		for (e = 0; e < nt; e++)
			tab[e] = kt_bf16_to_f32(tb[e]);
		CK(G.api.MemAlloc(&dtab, nt * 2));
		CK(G.api.MemcpyHtoD(dtab, tb, nt * 2));
	}
	for (k = 0; k < (bwd ? 3 : 1); k++) {
		CK(G.api.MemAlloc(&dout[k], n * 2));
		CK(G.api.MemsetD8Async(dout[k], 0xff, n * 2, G.st));
		ref[k] = malloc(n * sizeof(double));
		CU_ASSERT_FATAL(ref[k] != NULL);
	}
	snprintf(shape, sizeof(shape), "seqs=%d,tokens=%d,heads=%d,head_dim=%d,block=%d,rope=%d", nseq,
		 off[nseq], heads, d, blk, rope);
	CU_ASSERT_EQUAL_FATAL(ktune_choose(G.t, bwd ? "blockattn_bwd" : "blockattn_fwd", shape, G.st,
					   &ch), KTUNE_OK);
	CU_ASSERT_EQUAL_FATAL(ktune_blockattn_workspace_size(G.t, bwd, nseq, off[nseq], heads, d, blk,
							     rope, 0, G.st, &wsb), KTUNE_OK);
	if (wsb)
		CK(G.api.MemAlloc(&ws, (size_t)wsb));
	rc = bwd ? ktune_blockattn_bwd(G.t, (void *)(uintptr_t)dx[0], (void *)(uintptr_t)dx[1],
				       (void *)(uintptr_t)dx[2], (void *)(uintptr_t)dx[3],
				       (void *)(uintptr_t)dout[0], (void *)(uintptr_t)dout[1],
				       (void *)(uintptr_t)dout[2], (const int32_t *)(uintptr_t)doff,
				       (void *)(uintptr_t)dtab, nseq, off[nseq], heads, d, blk, rope, 0,
				       (void *)(uintptr_t)ws, wsb, G.st)
		 : ktune_blockattn_fwd(G.t, (void *)(uintptr_t)dx[0], (void *)(uintptr_t)dx[1],
				       (void *)(uintptr_t)dx[2], (void *)(uintptr_t)dout[0],
				       (const int32_t *)(uintptr_t)doff, (void *)(uintptr_t)dtab, nseq,
				       off[nseq], heads, d, blk, rope, 0, (void *)(uintptr_t)ws, wsb,
				       G.st);
	if (rc != KTUNE_OK)
		fprintf(stderr, "\n  %s: %s\n", shape, ktune_last_error());
	CU_ASSERT_EQUAL(rc, KTUNE_OK);
	CU_ASSERT_EQUAL_FATAL(bwd ? ba_cpu_bwd(&p, x[0], x[1], x[2], x[3], tab, rope == 2, ref[0],
					      ref[1], ref[2])
				  : ba_cpu_fwd(&p, x[0], x[1], x[2], tab, rope == 2, ref[0]),
			      0);
	got = malloc(n * 2);
	CU_ASSERT_FATAL(got != NULL);
	CK(G.api.StreamSynchronize(G.st));
	for (k = 0; k < (bwd ? 3 : 1); k++) {
		double dd = 0, rr = 0;
		int bad = 0;

		CK(G.api.MemcpyDtoH(got, dout[k], n * 2));
		for (e = 0; e < n; e++) {
			double u = kt_bf16_to_f32(got[e]);

			bad += !isfinite(u);
			dd += (u - ref[k][e]) * (u - ref[k][e]);
			rr += ref[k][e] * ref[k][e];
		}
		CU_ASSERT_EQUAL(bad, 0);
		CU_ASSERT(sqrt(dd / rr) < (bwd ? 2e-2 : 1e-2));
		printf("\n    %s %s (%s %s): %s rel %.2e vs float64 ", bwd ? "bwd" : "fwd", shape,
		       ch.match, ch.config, bwd ? (k == 0 ? "dq" : k == 1 ? "dk" : "dv") : "o",
		       sqrt(dd / rr));
	}
	for (i = 0; i < 4; i++) {
		free(h[i]);
		free(x[i]);
		if (dx[i])
			G.api.MemFree(dx[i]);
	}
	for (k = 0; k < 3; k++) {
		free(ref[k]);
		if (dout[k])
			G.api.MemFree(dout[k]);
	}
	if (ws)
		G.api.MemFree(ws);
	if (dtab)
		G.api.MemFree(dtab);
	G.api.MemFree(doff);
	free(got);
	free(tb);
	free(tab);
	free(off);
}

static void test_gpu_attention(void)
{
	gpu_family("blockattn_fwd", "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0");
	gpu_family("blockattn_bwd", "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=0");
	gpu_family("blockattn_bwd", "seqs=1152,lmax=256,heads=4,head_dim=128,block=64,rope=1");
	gpu_family("blockattn_fwd", "seqs=700,lmax=300,heads=4,head_dim=128,block=64,rope=0");
	gpu_family("blockattn_bwd", "seqs=700,lmax=300,heads=4,head_dim=128,block=64,rope=0");
	gpu_attention_random(0, 2, 128, 64, 0);
	gpu_attention_random(1, 2, 128, 64, 0);
	gpu_attention_random(1, 2, 128, 64, 1);
	gpu_attention_random(0, 2, 64, 128, 2);
	gpu_attention_random(1, 2, 64, 64, 2);
}

/* A warm call captured into a graph and replayed gives the direct call's
 * output; a cold one is refused while capturing, said so, and leaves the
 * capture to be ended. */
static void test_gpu_graph(void)
{
	struct gprob p;
	ktune_choice ch;
	CUgraph g = NULL;
	CUgraphExec ge = NULL;
	double worst;
	int rc;

	gprob_make(&p, "blast", "tokens=512,in=4096,out=4096,blocks=16,rank=1024");
	gprob_ready(&p, &ch);
	gprob_reference(&p);
	CK(G.api.StreamSynchronize(G.st));
	CK(G.BeginCapture(G.st, CU_STREAM_CAPTURE_MODE_GLOBAL));
	rc = typed_call(&p, G.st);
	CK(G.EndCapture(G.st, &g));
	CU_ASSERT_EQUAL_FATAL(rc, KTUNE_OK);
	CK(G.Instantiate(&ge, g, 0));
	CK(G.api.MemsetD8Async(p.d[4], 0xff, bytes_of(&p.b[4]), G.st));
	CK(G.GraphLaunch(ge, G.st));
	CK(G.GraphLaunch(ge, G.st));
	CU_ASSERT(gprob_verify(&p, "blast in a CUDA graph", &worst));
	printf("\n    graph of %s: %d kernels replayed, rel %.2e ", ch.config, (int)ch.nkernels, worst);
	G.ExecDestroy(ge);
	G.GraphDestroy(g);
	gprob_free(&p);

	/* cold: a table of its own has nothing loaded yet */
	{
		ktune_table *mine = G.t, *fresh = NULL;

		CU_ASSERT_EQUAL_FATAL(ktune_open_json(SHIPPED, &fresh), KTUNE_OK);
		G.t = fresh;
		gprob_make(&p, "dense", "tokens=96,in=1024,out=1024");
		CK(G.BeginCapture(G.st, CU_STREAM_CAPTURE_MODE_GLOBAL));
		rc = typed_call(&p, G.st);
		g = NULL;
		G.EndCapture(G.st, &g);
		if (g)
			G.GraphDestroy(g);
		CU_ASSERT_EQUAL(rc, KTUNE_ERROR_CAPTURE);
		CU_ASSERT_PTR_NOT_NULL(strstr(ktune_last_error(), "run the call once before capturing"));
		/* and the same call outside capture then works */
		gprob_ready(&p, &ch);
		gprob_reference(&p);
		CU_ASSERT_EQUAL(typed_call(&p, G.st), KTUNE_OK);
		CU_ASSERT(gprob_verify(&p, "dense after a refused capture", &worst));
		gprob_free(&p);
		G.t = mine;
		ktune_close(fresh);
	}
}

/* Several threads on one table, their own streams, two shapes each. */
struct thr {
	struct gprob *p;
	CUstream st;
	int rc;
};

static void *thr_run(void *arg)
{
	struct thr *a = arg;
	int i;

	if (G.api.CtxSetCurrent(G.ctx) != CUDA_SUCCESS) {
		a->rc = -1;
		return NULL;
	}
	for (i = 0; i < 20 && a->rc == KTUNE_OK; i++)
		a->rc = typed_call(&a->p[i % 2], a->st);
	if (a->rc == KTUNE_OK && G.api.StreamSynchronize(a->st) != CUDA_SUCCESS)
		a->rc = -2;
	return NULL;
}

static void test_gpu_threads(void)
{
	struct gprob p[4][2];
	struct thr a[4];
	pthread_t th[4];
	ktune_choice ch;
	double worst;
	int i, k;

	for (i = 0; i < 4; i++) {
		gprob_make(&p[i][0], "dense", "tokens=555,in=2048,out=2048");
		gprob_make(&p[i][1], "lowrank", "tokens=333,in=2048,out=2048,rank=256");
		for (k = 0; k < 2; k++) {
			gprob_ready(&p[i][k], &ch);
			gprob_reference(&p[i][k]);
		}
		a[i].p = p[i];
		a[i].rc = KTUNE_OK;
		CK(G.api.StreamCreate(&a[i].st, CU_STREAM_NON_BLOCKING));
	}
	CK(G.api.StreamSynchronize(G.st));
	for (i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, thr_run, &a[i]), 0);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CU_ASSERT_EQUAL(a[i].rc, KTUNE_OK);
		for (k = 0; k < 2; k++) {
			CU_ASSERT(gprob_verify(&p[i][k], "threaded call", &worst));
			gprob_free(&p[i][k]);
		}
		G.api.StreamDestroy(a[i].st);
	}
}

/* ---- timing (bench/runtime.sh) ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of reps calls, each after an L2 flush, timed by events. */
static double time_call(struct gprob *p, int reps)
{
	CUevent ev[2 * 64];
	double us[64];
	float ms;
	int i;

	if (reps > 64)
		reps = 64;
	for (i = 0; i < 2 * reps; i++)
		CK(G.api.EventCreate(&ev[i], CU_EVENT_DEFAULT));
	for (i = 0; i < 3; i++)	/* warm-up */
		CU_ASSERT_EQUAL(typed_call(p, G.st), KTUNE_OK);
	for (i = 0; i < reps; i++) {
		CK(G.api.MemsetD32Async(G.flush, (unsigned)i, G.flush_bytes / 4, G.st));
		CK(G.api.EventRecord(ev[2 * i], G.st));
		CU_ASSERT_EQUAL(typed_call(p, G.st), KTUNE_OK);
		CK(G.api.EventRecord(ev[2 * i + 1], G.st));
	}
	CK(G.api.StreamSynchronize(G.st));
	for (i = 0; i < reps; i++) {
		CK(G.api.EventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
		us[i] = ms * 1e3;
	}
	for (i = 0; i < 2 * reps; i++)
		G.api.EventDestroy(ev[i]);
	qsort(us, (size_t)reps, sizeof(us[0]), cmp_double);
	return reps % 2 ? us[reps / 2] : (us[reps / 2 - 1] + us[reps / 2]) / 2;
}

static void test_bench(void)
{
	const char *list = getenv("KTUNE_RUNTIME_BENCH_SHAPES");
	FILE *in = list ? fopen(list, "r") : NULL;
	char line[512];
	int first = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	fprintf(G.bench, "[\n");
	while (fgets(line, sizeof(line), in)) {
		char *fam = strtok(line, "|\n"), *shape = strtok(NULL, "|\n"), *tuned = strtok(NULL, "|\n");
		struct gprob p;
		ktune_choice ch;
		double worst, us;
		int ok;

		if (!fam || !shape || fam[0] == '#')
			continue;
		gprob_make(&p, fam, shape);
		gprob_ready(&p, &ch);
		gprob_reference(&p);
		CU_ASSERT_EQUAL(typed_call(&p, G.st), KTUNE_OK);
		ok = gprob_verify(&p, shape, &worst);
		CU_ASSERT(ok);
		us = time_call(&p, 40);
		fprintf(G.bench,
			"%s{\"family\": \"%s\", \"shape\": \"%s\", \"tuned\": %s, \"via\": \"c\", "
			"\"verified\": %s, \"us\": %.3f, \"match\": \"%s\", \"config\": \"%s\", "
			"\"rel_err\": %.3e, \"shipped\": %s}",
			first ? "" : ",\n", fam, shape, tuned && !strcmp(tuned, "1") ? "true" : "false",
			ok ? "true" : "false", us, ch.match, ch.config, worst, ch.shipped ? "true" : "false");
		first = 0;
		printf("\n    %s %s: %.2f us (%s %s) ", fam, shape, us, ch.match, ch.config);
		gprob_free(&p);
	}
	fprintf(G.bench, "\n]\n");
	fclose(in);
}

static void test_gpu_missing(void)
{
	CU_FAIL("no usable GPU and KTUNE_REQUIRE_GPU=1");
}

static int gpu_clean(void)
{
	if (G.t)
		ktune_close(G.t);
	G.t = NULL;
	if (G.bench)
		fclose(G.bench);
	G.bench = NULL;
	return 0;
}

int main(void)
{
	CU_pSuite s;
	int gpu;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("runtime (CPU)", NULL, NULL);
	CU_add_test(s, "header builds as C11 and C++17; libktune.a, .so link; .so needs libc only",
		    test_header_builds);
	CU_add_test(s, "README's C example builds and runs", test_readme_example);
	CU_add_test(s, "errors: tables", test_errors_tables);
	CU_add_test(s, "errors: calls, shapes, options, prepared sizes", test_errors_calls);
	CU_add_test(s, "errors: messages are per thread", test_errors_threads);
	CU_add_test(s, "libktune_db: a database's winners, linked with -lsqlite3", test_open_db);
	CU_add_test(s, "plans: dense, lowrank at 777 tokens on the emulator vs the CPU reference",
		    test_plan_linear);
	CU_add_test(s, "plans: attention, 1,000 random lengths, bound launch, on the emulator",
		    test_plan_attention);
	CU_add_test(s, "plans: monarch, blast: workspace, prepared layout, launches",
		    test_plan_prepared);
	CU_add_test(s, "the call cache: bounded, oldest retired first, generations apart",
		    test_call_cache);
	CU_add_test(s, "the call cache: retired calls freed when no caller can hold them",
		    test_call_reclaim);

	s = CU_add_suite("runtime (GPU)", NULL, gpu_clean);
	gpu = gpu_init();
	if (gpu == 0) {
		const char *bench = getenv("KTUNE_RUNTIME_BENCH");

		if (bench && *bench) {
			if (!(G.bench = fopen(bench, "w")))
				fprintf(stderr, "KTUNE_RUNTIME_BENCH=%s: cannot write it\n", bench);
			CU_add_test(s, "timing the shapes of KTUNE_RUNTIME_BENCH_SHAPES", test_bench);
		} else {
			CU_add_test(s, "linear families, tuned and untuned shapes, vs the GPU reference",
				    test_gpu_linear);
			CU_add_test(s, "attention: tuned shapes, 1,000 random lengths vs float64",
				    test_gpu_attention);
			CU_add_test(s, "a warm call in a CUDA graph; a cold one refused while capturing",
				    test_gpu_graph);
			CU_add_test(s, "four threads, one table, their own streams", test_gpu_threads);
			CU_add_test(s, "README's C example computes on the GPU", test_readme_example);
		}
	} else if (kt_test_gpu_required() || gpu < 0) {
		fprintf(stderr, "GPU not usable: %s\n", G.why);
		CU_add_test(s, "a GPU is present", test_gpu_missing);
	} else {
		printf("GPU suite skipped: %s\n", G.why);
		CU_add_test(s, "linear families vs the GPU reference", test_gpu_linear);
		CU_set_suite_active(s, CU_FALSE);
	}
	return kt_test_main();
}
