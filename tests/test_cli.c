/*
 * test_cli.c -- the ktune binary as a user meets it: help, bad input and a
 * corrupt database, each with a clear message, the right exit code and
 * nothing written.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "testutil.h"
#include "../tuner/worker.h"
#include "../util/knobs.h"

/* Runs ktune with the NULL-terminated arguments; output into *out. */
static int runv(char **out, ...)
{
	char *argv[16] = { (char *)kt_test_ktune() };
	va_list ap;
	int n = 1;

	va_start(ap, out);
	while (n < 15 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	return kt_test_exec(argv, NULL, out, 60);
}

#define RUN(out, ...) runv(out, __VA_ARGS__, (char *)NULL)

static void test_help_everywhere(void)
{
	const char *cmds[] = { "run", "devices", "families", "sweep", "trials", "best", "serve",
			       "export", "merge", "import", "env" };
	size_t i;
	char *out = NULL;

	CU_ASSERT_EQUAL(RUN(&out, "--help"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: ktune"));
	free(out);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		out = NULL;
		CU_ASSERT_EQUAL(RUN(&out, (char *)cmds[i], "--help"), 0);
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "usage: ktune"));
		if (!out || !strstr(out, "usage: ktune"))
			fprintf(stderr, "no help for %s: %s\n", cmds[i], out ? out : "");
		free(out);
	}
	/* the version names the commit built (the bench scripts label their
	 * results with it): "ktune V (commit C)", C non-empty */
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "--version"), 0);
	{
		const char *c = out ? strstr(out, " (commit ") : NULL;

		CU_ASSERT(out && strncmp(out, "ktune ", 6) == 0);
		CU_ASSERT(c && c[9] && c[9] != ')' && strchr(c, ')') && !strchr(c + 9, ' '));
		if (!c)
			fprintf(stderr, "ktune --version: %s\n", out ? out : "");
	}
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "frobnicate"), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown command 'frobnicate'"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--bogus"), 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown option '--bogus'"));
	free(out);
}

static void test_families(void)
{
	char *out = NULL;
	json_t *j;

	CU_ASSERT_EQUAL(RUN(&out, "families", "--json"), 0);
	j = json_loads(out, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT(json_array_size(json_object_get(j, "families")) >= 2);
	/* The test family stays hidden. */
	CU_ASSERT_PTR_NULL(strstr(out, "\"selftest\""));
	json_decref(j);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "families", "dense"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "tokens"));
	free(out);
	out = NULL;
	CU_ASSERT_NOT_EQUAL(RUN(&out, "families", "nosuch"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown family 'nosuch'"));
	free(out);
}

/* Bad shapes and unknown families are refused before any GPU or file is
 * touched: the database must not even be created. */
static void test_sweep_bad_input(void)
{
	char *db = (char *)kt_test_path("never.db");
	const char *shapes[] = { "tokens=1024,in=4096", "tokens=1024,in=4096,out=4096,bogus=1",
				 "tokens=abc,in=4096,out=4096", "tokens=-5,in=4096,out=4096",
				 "tokens=1024,in=4096,out=4096,tokens=8", "" };
	size_t i;
	char *out = NULL;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		out = NULL;
		CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "dense", "--shape", (char *)shapes[i],
				    "--db", db), 2);
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "error"));
		free(out);
	}
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "nosuch", "--shape", "n=1", "--db", db), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown family 'nosuch'"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--workload", "nosuch:1", "--db", db), 2);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "dense", "--shape", "tokens=16,in=64,out=64",
			    "--budget", "-3", "--db", db), 2);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "dense", "--shape", "tokens=16,in=64,out=64",
			    "--time-limit", "soon", "--db", db), 2);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--time-limit"));
	free(out);
	out = NULL;	/* a --config that does not parse fails before the worker starts */
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "dense", "--shape", "tokens=16,in=64,out=64",
			    "--config", "variant=wgmma_ws,NOPE=1", "--db", db), 2);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "'NOPE'"));
	free(out);
	CU_ASSERT_NOT_EQUAL(access(db, F_OK), 0);
}

/* A file that is not a ktune database is refused, named, and left as it was. */
static void test_corrupt_database(void)
{
	const char junk[] = "this is not a database, it is a grocery list\n";
	char *db = (char *)kt_test_path("corrupt.db");
	char *out = NULL, buf[256];
	FILE *f;
	size_t n;

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(db, junk, sizeof(junk) - 1), 0);
	CU_ASSERT_EQUAL(RUN(&out, "trials", "--db", db), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "error"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "trials", "--db", db, "--json"), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"corrupt_database\""));
	free(out);
	out = NULL;
	/* The sweep refuses it too (on CI after finding no GPU, on a GPU
	 * machine when opening the store): either way, an error and no write. */
	CU_ASSERT_NOT_EQUAL(RUN(&out, "sweep", "--family", "selftest", "--shape", "n=64",
				"--worker-backend", "cpu", "--db", db), 0);
	free(out);
	f = fopen(db, "rb");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	CU_ASSERT_EQUAL(n, sizeof(junk) - 1);
	CU_ASSERT_EQUAL(memcmp(buf, junk, n), 0);
	CU_ASSERT_NOT_EQUAL(access(kt_test_path("corrupt.db-wal"), F_OK), 0);
}

/* The CPU test device through the real binary, with a trials listing. */
static void test_sweep_and_trials(void)
{
	char *db = (char *)kt_test_path("cli.db");
	char *out = NULL;
	char *argv[] = { (char *)kt_test_ktune(), "sweep", "--family", "selftest", "--shape", "n=1024",
			 "--worker-backend", "cpu", "--db", db, NULL };
	json_t *j;

	CU_ASSERT_EQUAL(kt_test_exec(argv, NULL, &out, 120), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "best"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "trials", "--db", db, "--json"), 0);
	j = json_loads(out, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(json_array_size(j), 1);
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(j, 0), "status")), "done");
	json_decref(j);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "trials", "1", "--db", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "variant=ok"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "wrong"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "trials", "99", "--db", db), 1);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "trials", "x1", "--db", db), 2);
	free(out);
}

/* Without a GPU, `devices` and `run` say so plainly and do not fail. */
static void test_no_gpu_is_plain(void)
{
	char *out = NULL;

	if (access("/dev/nvidia0", F_OK) == 0) {
		printf("(a GPU is present: the no-GPU messages are not checked here) ");
		return;
	}
	CU_ASSERT_EQUAL(RUN(&out, "devices", "--db", (char *)kt_test_path("nogpu.db")), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "none"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "dense", "--shape", "tokens=16,in=64,out=64",
			    "--db", (char *)kt_test_path("nogpu.db")), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "error"));
	free(out);
}

/* The main job without a GPU: the shipped H200 results are loaded once,
 * printed, and (with --no-serve) it stops there. */
static void test_run_without_gpu(void)
{
	char *db = (char *)kt_test_path("main.db");
	char *out = NULL;

	if (access("/dev/nvidia0", F_OK) == 0) {
		printf("(a GPU is present: `run` would sweep; not checked here) ");
		return;
	}
	CU_ASSERT_EQUAL(RUN(&out, "run", "--no-serve", "--db", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no GPU on this machine"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "loaded"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "NVIDIA H200"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tokens=1024,in=4096,out=4096"));
	free(out);
	out = NULL;
	/* Second start: already loaded, nothing imported again. */
	CU_ASSERT_EQUAL(RUN(&out, "run", "--no-serve", "--db", db), 0);
	CU_ASSERT_PTR_NULL(out ? strstr(out, "loaded") : "x");
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "NVIDIA H200"));
	free(out);
	out = NULL;
	/* And the lookup answers from it, exactly. */
	CU_ASSERT_EQUAL(RUN(&out, "best", "--family", "dense", "--shape", "tokens=1024,in=4096,out=4096",
			    "--db", db, "--json"), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"exact\""));
	free(out);
	/* The shipped entries come from several H200s: an answer measured on
	 * another one than the device the name resolves to says which GPU, in
	 * the text too, as tuned.device_uuid does in the JSON. dense's and
	 * blast's entries are on two different H200s, so at least one is. */
	{
		static const char *const fs[2][2] = {
			{"dense", "tokens=1024,in=4096,out=4096"},
			{"blast", "tokens=1024,in=2048,out=2048,blocks=16,rank=256"},
		};
		int k, named = 0;

		for (k = 0; k < 2; k++) {
			char *js = NULL, uuid[64] = "";
			const char *p;

			out = NULL;
			CU_ASSERT_EQUAL(RUN(&out, "best", "--family", fs[k][0], "--shape", fs[k][1],
					    "--device", "NVIDIA H200", "--db", db), 0);
			CU_ASSERT_EQUAL(RUN(&js, "best", "--family", fs[k][0], "--shape", fs[k][1],
					    "--device", "NVIDIA H200", "--db", db, "--json"), 0);
			CU_ASSERT_PTR_NOT_NULL(out && strstr(out, ": exact"));
			p = out ? strstr(out, "on NVIDIA H200 (GPU-") : NULL;
			if (p) {	/* the uuid printed is the entry's */
				sscanf(p + strlen("on NVIDIA H200 ("), "%63[^)]", uuid);
				CU_ASSERT_PTR_NOT_NULL(js && strstr(js, uuid));
				named++;
			}
			free(out);
			free(js);
		}
		CU_ASSERT(named >= 1);
	}
	/* 16384 tokens is 16x from the shipped 1024: past the distance limit,
	 * the default answers and the text names what it passed over; with
	 * --max-distance inf the tuned shape answers; a bad limit is refused
	 * with the reason. */
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "best", "--family", "dense", "--shape", "tokens=16384,in=4096,out=4096",
			    "--device", "NVIDIA H200", "--db", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, ": default"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "skipped  tokens=1024,in=4096,out=4096"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "best", "--family", "dense", "--shape", "tokens=16384,in=4096,out=4096",
			    "--device", "NVIDIA H200", "--max-distance", "inf", "--db", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, ": nearest"));
	free(out);
	out = NULL;
	CU_ASSERT_NOT_EQUAL(RUN(&out, "best", "--family", "dense", "--shape", "tokens=16,in=4096,out=4096",
				"--max-distance", "far", "--db", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "max_distance 'far'"));
	free(out);
}

/* A port taken by this process, for "port in use" (0: none). */
static int busy_port(int *fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((*fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(*fd, 4) != 0 ||
	    getsockname(*fd, (struct sockaddr *)&sa, &len) != 0)
		return 0;
	return ntohs(sa.sin_port);
}

/* Lines of text (a last line without '\n' counts). */
static int lines_of(const char *text)
{
	int n = 0;

	for (; text && *text; text++)
		if (*text == '\n' || !text[1])
			n++;
	return n;
}

/* Failed commands leave no database and no token behind, and a port in
 * use is one clear line naming --listen (no line of libmicrohttpd's). */
static void test_failures_leave_nothing(void)
{
	const char *bad = kt_test_path("bad-export.json");
	const char *db = kt_test_path("left/k.db");
	char listen[32], *out = NULL;
	int fd = -1, port = busy_port(&fd);
	struct stat sb;

	CU_ASSERT_FATAL(port > 0);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	CU_ASSERT_EQUAL_FATAL(mkdir(kt_test_path("left"), 0755), 0);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(bad, "{\"format\":", 10), 0);

	CU_ASSERT_NOT_EQUAL(RUN(&out, "serve", "--db", (char *)db, "--listen", listen), 0);
	CU_ASSERT_EQUAL(lines_of(out), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "in use"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--listen"));
	if (lines_of(out) != 1)
		fprintf(stderr, "serve on a busy port said: %s\n", out ? out : "");
	free(out);
	CU_ASSERT_NOT_EQUAL(RUN(&out, "run", "--db", (char *)db, "--listen", listen), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--listen"));
	free(out);
	CU_ASSERT_NOT_EQUAL(RUN(&out, "serve", "--db", (char *)db, "--listen", "127.0.0.1:0",
				"--seed", (char *)bad), 0);
	free(out);
	CU_ASSERT_NOT_EQUAL(RUN(&out, "import", "--db", (char *)db, (char *)bad), 0);
	free(out);
	CU_ASSERT_NOT_EQUAL(RUN(&out, "import", "--db", (char *)db, (char *)kt_test_path("no-such.json")), 0);
	free(out);
	close(fd);

	CU_ASSERT_NOT_EQUAL(stat(db, &sb), 0);
	CU_ASSERT_NOT_EQUAL(stat(kt_test_path("left/k.db.token"), &sb), 0);
	CU_ASSERT_NOT_EQUAL(stat(kt_test_path("left/k.db-wal"), &sb), 0);
	if (stat(db, &sb) == 0 || stat(kt_test_path("left/k.db.token"), &sb) == 0)
		fprintf(stderr, "failed commands left files in %s\n", kt_test_path("left"));
}

/* An export filter that names nothing fails with the reason (it was an
 * empty export and exit 0), and --out may not be the database. */
static void test_export_unknown_filters(void)
{
	static const char doc[] =
		"{\"format\":\"ktune-export\",\"version\":1,\"devices\":[{\"name\":\"NVIDIA H200\","
		"\"uuid\":\"GPU-cli-x\",\"arch\":\"sm_90\"}],\"entries\":[{\"device\":\"GPU-cli-x\","
		"\"family\":\"dense\",\"shape_key\":\"tokens=16,in=4096,out=4096\",\"config_key\":"
		"\"variant=wgmma_ws,BLOCK_M=256,BLOCK_N=128,STAGES=4,GROUP_M=1,CONSUMERS=2\","
		"\"median_us\":9.5,\"sweep\":{\"strategy\":\"exhaustive\"}}]}";
	char *db = (char *)kt_test_path("export-filters.db");
	char *docp = (char *)kt_test_path("export-filters.json");
	char *out = NULL;

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(docp, doc, sizeof(doc) - 1), 0);
	CU_ASSERT_EQUAL_FATAL(RUN(&out, "import", "--db", db, docp), 0);
	free(out);
	CU_ASSERT_EQUAL(RUN(&out, "export", "--db", db, "--family", "nosuch"), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unknown family 'nosuch'"));
	free(out);
	CU_ASSERT_EQUAL(RUN(&out, "export", "--db", db, "--device", "nosuch"), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "unknown device 'nosuch'"));
	free(out);
	CU_ASSERT_EQUAL(RUN(&out, "export", "--db", db, "--device", "GPU-cli-x", "--family", "dense"), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tokens=16,in=4096,out=4096"));
	free(out);
	CU_ASSERT_EQUAL(RUN(&out, "export", "--db", db, "--device", "NVIDIA H200"), 0);
	free(out);
	CU_ASSERT_NOT_EQUAL(RUN(&out, "export", "--db", db, "--out", db), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "is the database itself"));
	free(out);
	CU_ASSERT_EQUAL(RUN(&out, "best", "--db", db, "--family", "dense", "--shape",
			    "tokens=16,in=4096,out=4096"), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "exact"));
	free(out);
}

/* `ktune env`: the whole table, this environment's values, filters, and
 * refusals. */
static void test_env(void)
{
	char *saved_pdl = kt_test_env_save("KTUNE_PDL"), *saved_nvml = kt_test_env_save("KTUNE_NVML");
	char *out = NULL;
	json_t *j, *arr, *k;
	size_t i;
	int seen_pdl = 0;

	setenv("KTUNE_PDL", "0", 1);
	unsetenv("KTUNE_NVML");
	CU_ASSERT_EQUAL(RUN(&out, "env", "--json"), 0);
	kt_test_env_put("KTUNE_PDL", saved_pdl);
	kt_test_env_put("KTUNE_NVML", saved_nvml);
	free(saved_pdl);
	free(saved_nvml);
	j = out ? json_loads(out, 0, NULL) : NULL;
	arr = json_object_get(j, "knobs");
	CU_ASSERT_EQUAL_FATAL(json_array_size(arr), (size_t)kt_knob_count());
	json_array_foreach(arr, i, k) {
		const char *name = json_string_value(json_object_get(k, "name"));
		const struct kt_knob_info *info = kt_knob_find(name);

		CU_ASSERT_PTR_NOT_NULL(info);
		CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(k, "doc")));
		if (name && strcmp(name, "KTUNE_PDL") == 0) {
			seen_pdl = 1;
			CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(k, "value")), "0");
		}
		if (name && strcmp(name, "KTUNE_NVML") == 0)
			CU_ASSERT(json_is_null(json_object_get(k, "value")));
	}
	CU_ASSERT(seen_pdl);
	json_decref(j);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "env", "--scope", "bench"), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "KTUNE_STEPS (unset)"));
	CU_ASSERT_PTR_NULL(out ? strstr(out, "KTUNE_DB") : "");
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "env", "KTUNE_CPU_SMEM"), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "tests, int, default 49152"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "env", "NOT_A_KNOB"), 1);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "NOT_A_KNOB is not a variable"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "env", "--scope", "everything"), 2);
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "selftest", "--shape", "n=1024", "--pdl",
			    "yes"), 2);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--pdl is 0 or 1"));
	free(out);
	out = NULL;
	CU_ASSERT_EQUAL(RUN(&out, "sweep", "--family", "selftest", "--shape", "n=1024",
			    "--compare", "cpu"), 2);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--compare is auto, gpu or host"));
	free(out);
}

/* The table and its accessors (util/knobs.h). */
static void test_knobs_table(void)
{
	char *saved[3] = { kt_test_env_save("KTUNE_PDL"), kt_test_env_save("KTUNE_CPU_SMEM"),
			   kt_test_env_save("KTUNE_HOST_COMPARE") };
	struct worker_opts o;
	int i, j;

	/* every entry whole, no name twice, the C-read ones in enum order
	 * with a number as the default the typed accessors use */
	CU_ASSERT(kt_knob_count() > KT_KNOB_NREAD);
	for (i = 0; i < kt_knob_count(); i++) {
		const struct kt_knob_info *k = kt_knob_at(i);

		CU_ASSERT_FATAL(k && k->name && k->def && k->readers && k->doc && k->doc[0]);
		CU_ASSERT(strncmp(k->name, "KTUNE_", 6) == 0);
		for (j = 0; j < i; j++)
			CU_ASSERT(strcmp(kt_knob_at(j)->name, k->name) != 0);
		if (i < KT_KNOB_NREAD && (k->type == KT_KNOB_TYPE_INT ||
					  (k->type == KT_KNOB_TYPE_FLAG && k->def[0]))) {
			char *end;

			strtol(k->def, &end, 10);
			CU_ASSERT(k->def[0] && !*end);
		}
	}
	CU_ASSERT_PTR_NULL(kt_knob_at(kt_knob_count()));
	CU_ASSERT_PTR_NULL(kt_knob_find("NOT_A_KNOB"));
	CU_ASSERT_STRING_EQUAL(kt_knob_at(KT_KNOB_PDL)->name, "KTUNE_PDL");
	CU_ASSERT_EQUAL(kt_knob_at(KT_KNOB_CPU_SMEM)->scope, KT_KNOB_SCOPE_TESTS);

	/* a product flag: "0", "1", else the default */
	unsetenv("KTUNE_PDL");
	CU_ASSERT_EQUAL(kt_knob_flag(KT_KNOB_PDL), 1);
	setenv("KTUNE_PDL", "0", 1);
	CU_ASSERT_EQUAL(kt_knob_flag(KT_KNOB_PDL), 0);
	CU_ASSERT_STRING_EQUAL(kt_knob_get(KT_KNOB_PDL), "0");
	setenv("KTUNE_PDL", "off", 1);
	CU_ASSERT_EQUAL(kt_knob_flag(KT_KNOB_PDL), 1);
	/* a test hook: not through the product accessor, and the reverse */
	setenv("KTUNE_CPU_SMEM", "65536", 1);
	CU_ASSERT_PTR_NULL(kt_knob_get(KT_KNOB_CPU_SMEM));
	CU_ASSERT_PTR_NULL(kt_knob_test_hook(KT_KNOB_PDL));
	CU_ASSERT_EQUAL(kt_knob_test_long(KT_KNOB_CPU_SMEM, 1024, 1L << 24), 65536);
	setenv("KTUNE_CPU_SMEM", "512", 1);	/* out of range: the default */
	CU_ASSERT_EQUAL(kt_knob_test_long(KT_KNOB_CPU_SMEM, 1024, 1L << 24), 49152);
	setenv("KTUNE_CPU_SMEM", "64k", 1);
	CU_ASSERT_EQUAL(kt_knob_test_long(KT_KNOB_CPU_SMEM, 1024, 1L << 24), 49152);

	/* the experiment switches become worker_opts' defaults */
	setenv("KTUNE_PDL", "0", 1);
	setenv("KTUNE_HOST_COMPARE", "1", 1);
	worker_opts_default(&o);
	CU_ASSERT_EQUAL(o.pdl, 0);
	CU_ASSERT_EQUAL(o.compare, WORKER_COMPARE_HOST);
	setenv("KTUNE_HOST_COMPARE", "0", 1);
	worker_opts_default(&o);
	CU_ASSERT_EQUAL(o.compare, WORKER_COMPARE_GPU);
	unsetenv("KTUNE_PDL");
	unsetenv("KTUNE_HOST_COMPARE");
	worker_opts_default(&o);
	CU_ASSERT_EQUAL(o.pdl, 1);
	CU_ASSERT_EQUAL(o.compare, WORKER_COMPARE_AUTO);

	kt_test_env_put("KTUNE_PDL", saved[0]);
	kt_test_env_put("KTUNE_CPU_SMEM", saved[1]);
	kt_test_env_put("KTUNE_HOST_COMPARE", saved[2]);
	for (i = 0; i < 3; i++)
		free(saved[i]);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("ktune command line", NULL, NULL);
	CU_add_test(s, "--help for every command, unknown command and option", test_help_everywhere);
	CU_add_test(s, "families lists, describes and refuses unknown", test_families);
	CU_add_test(s, "sweep refuses bad shapes and unknown families", test_sweep_bad_input);
	CU_add_test(s, "a corrupt database is refused and left untouched", test_corrupt_database);
	CU_add_test(s, "sweep on the CPU test device, then trials", test_sweep_and_trials);
	CU_add_test(s, "no GPU: devices and sweep say so", test_no_gpu_is_plain);
	CU_add_test(s, "no GPU: run serves the shipped H200 results", test_run_without_gpu);
	CU_add_test(s, "export: unknown family or device fails, --out is not the database",
		    test_export_unknown_filters);
	CU_add_test(s, "failed commands leave nothing; a busy port names --listen",
		    test_failures_leave_nothing);
	CU_add_test(s, "env lists every knob with its value; bad names and flags refused",
		    test_env);
	s = CU_add_suite("knobs", NULL, NULL);
	CU_add_test(s, "the table, its accessors, the worker's defaults", test_knobs_table);
	return kt_test_main();
}
