/*
 * knobs.c -- the table of environment variables (util/knobs.h). One entry
 * per variable; the doc line is what `ktune env` and the README print.
 */
#include "knobs.h"

#include <stdlib.h>
#include <string.h>

#define PATH KT_KNOB_TYPE_PATH
#define TEXT KT_KNOB_TYPE_TEXT
#define LIST KT_KNOB_TYPE_LIST
#define INT KT_KNOB_TYPE_INT
#define NUM KT_KNOB_TYPE_NUM
#define FLAG KT_KNOB_TYPE_FLAG
#define PRODUCT KT_KNOB_SCOPE_PRODUCT
#define TESTS KT_KNOB_SCOPE_TESTS
#define BENCH KT_KNOB_SCOPE_BENCH

static const struct kt_knob_info knobs[] = {
	/* ---- read by ktune and libktune (enum kt_knob's order) ---- */
	[KT_KNOB_DB] = { "KTUNE_DB", PATH, "./ktune.db", PRODUCT, "ktune",
		"the database of every subcommand run without --db" },
	[KT_KNOB_TABLE] = { "KTUNE_TABLE", PATH, "", PRODUCT, "libktune, python",
		"the tuned table (a `ktune export --format json` file) that ktune_open_json(NULL) "
		"and the Python package load; the package falls back to the shipped H200 table" },
	[KT_KNOB_CACHE_DIR] = { "KTUNE_CACHE_DIR", PATH, "$XDG_CACHE_HOME/ktune, else ~/.cache/ktune",
		PRODUCT, "libktune",
		"where libktune keeps the kernels it compiled with NVRTC; empty: no disk cache" },
	[KT_KNOB_CUDA_HOME] = { "KTUNE_CUDA_HOME", PATH, "the CUDA the build used (make CUDA=)",
		PRODUCT, "ktune, libktune",
		"the CUDA toolkit whose NVRTC and headers compile the kernel templates" },
	[KT_KNOB_PDL] = { "KTUNE_PDL", FLAG, "1", PRODUCT, "ktune, libktune",
		"0: kernels that may overlap their predecessor launch plainly, without programmatic "
		"dependent launch (A/B timings; results are the same); `ktune sweep --pdl` overrides" },
	[KT_KNOB_HOST_COMPARE] = { "KTUNE_HOST_COMPARE", TEXT, "", PRODUCT, "ktune",
		"1: candidates are verified on the host; 0: on the GPU, required; unset: on the GPU, "
		"else on the host; `ktune sweep --compare` overrides" },
	[KT_KNOB_NVML] = { "KTUNE_NVML", FLAG, "1", PRODUCT, "ktune",
		"0: the worker reads no clocks, power or temperature through NVML" },
	/* ---- test hooks: read by the product, for the tests ---- */
	[KT_KNOB_NVML_LIB] = { "KTUNE_NVML_LIB", PATH, "libnvidia-ml.so.1", TESTS, "ktune",
		"the NVML library the worker loads (the tests' fake one, tests/fake_nvml.c)" },
	[KT_KNOB_CPU_DEVICES] = { "KTUNE_CPU_DEVICES", INT, "2", TESTS, "ktune",
		"how many CPU test devices (--worker-backend cpu) there are, 0 to 64" },
	[KT_KNOB_CPU_SMEM] = { "KTUNE_CPU_SMEM", INT, "49152", TESTS, "ktune",
		"the dynamic shared memory in bytes a CPU test device allows, 1024 to 2^24" },
	[KT_KNOB_TEST_NO_TMAP_ENCODE] = { "KTUNE_TEST_NO_TMAP_ENCODE", FLAG, "", TESTS, "ktune",
		"set (any value): the CUDA worker acts as a driver without cuTensorMapEncodeTiled" },

	/* ---- read by the Python package ---- */
	{ "KTUNE_LIB", PATH, "the libktune.so installed with the package", PRODUCT, "python",
		"the libktune the Python package loads, and the one `pip install` bundles" },

	/* ---- read by the test programs and test scripts ---- */
	{ "KTUNE_BIN", PATH, "build/ktune", TESTS, "tests, tools/schemathesis.sh",
		"the ktune binary the tests and scripts run" },
	{ "KTUNE_WORKER_BIN", PATH, "$KTUNE_BIN", TESTS, "tests",
		"the binary the worker tests exec as `__worker`" },
	{ "KTUNE_TEST_SUITE", TEXT, "", TESTS, "tests",
		"runs only the suites whose name holds this text (any case; `nvrtc`: the compile suites)" },
	{ "KTUNE_TEST_SKIP", TEXT, "", TESTS, "tests",
		"leaves out the suites whose name holds one of these comma-separated texts (any case)" },
	{ "KTUNE_REQUIRE_GPU", FLAG, "0", TESTS, "tests, python tests",
		"1: a GPU suite without a usable GPU fails instead of skipping" },
	{ "KTUNE_KEEP_TMP", FLAG, "", TESTS, "tests",
		"set (any value): a test program keeps its temporary folder" },
	{ "KTUNE_COMPILE_ALL", FLAG, "0", TESTS, "test_compile, test_blast, test_monarch, test_blockattn",
		"1: NVRTC compiles every config of the spaces, not a sample (a device run)" },
	{ "KTUNE_COMPILE_SHARD", TEXT, "", TESTS, "test_compile, test_blast, test_monarch",
		"K/N: only part K of N of the compile lists" },
	{ "KTUNE_COMPILE_ARCH", TEXT, "", TESTS, "test_compile, test_blast, test_monarch",
		"only this target's programs: sm_80, sm_86, sm_90 or sm_90a" },
	{ "KTUNE_COMPILE_MATCH", TEXT, "", TESTS, "test_compile",
		"only the programs whose label holds this text" },
	{ "KTUNE_BLAST_GPU_ONLY", FLAG, "0", TESTS, "test_blast", "1: the GPU suite alone" },
	{ "KTUNE_MONARCH_GPU_ONLY", FLAG, "0", TESTS, "test_monarch", "1: the GPU suite alone" },
	{ "KTUNE_BLOCKATTN_GPU_ONLY", FLAG, "0", TESTS, "test_blockattn",
		"1: the GPU suite alone" },
	{ "KTUNE_BLOCKATTN_SMALL_ONLY", FLAG, "", TESTS, "test_blockattn",
		"set (any value): the GPU suite runs the small shapes only (for compute-sanitizer)" },
	{ "KTUNE_BLOCKATTN_VARIANT", TEXT, "", TESTS, "test_blockattn",
		"the GPU suite runs only this variant's configs" },
	{ "KTUNE_BLOCKATTN_BLOCK", INT, "", TESTS, "test_blockattn",
		"the GPU suite's small shapes run only at this block size (32, 64, 128 or 256)" },
	{ "KTUNE_REPLAY_SEEDS", INT, "5", TESTS, "test_strategy",
		"seeds the strategy replays average over" },
	{ "KTUNE_SOURCE_DIR", PATH, ".", TESTS, "test_strategy",
		"the repository root, for the replay files under tests/data/replay" },
	{ "KTUNE_FAKE_NVML_FAIL", FLAG, "0", TESTS, "tests/fake_nvml.c",
		"1: the fake NVML fails to initialize" },
	{ "KTUNE_FAKE_NVML_SM", LIST, "1980", TESTS, "tests/fake_nvml.c",
		"SM clocks in MHz the fake NVML reports, one per reading, the last repeated" },
	{ "KTUNE_HEADER", PATH, "include/ktune.h", TESTS, "python tests",
		"the ktune.h the binding tests read" },
	{ "KTUNE_TEST_INSTALLED", FLAG, "0", TESTS, "python tests",
		"1: also test the installed package (python/ci.sh)" },
	{ "KTUNE_TEST_REQUIRE_LIB", FLAG, "0", TESTS, "python tests",
		"1: a missing libktune.so fails the tests instead of skipping them" },

	/* ---- the tests' bench and dump modes ---- */
	{ "KTUNE_MONARCH_BENCH", FLAG, "0", BENCH, "test_monarch",
		"1: the fused_ws GPU test also times the configs it walks" },
	{ "KTUNE_BLOCKATTN_BENCH", PATH, "", BENCH, "test_blockattn",
		"the GPU suite writes its timings to this JSON file" },
	{ "KTUNE_BLOCKATTN_BENCH_ONLY", TEXT, "", BENCH, "test_blockattn",
		"the timed workloads are only those whose name holds this text (e.g. bwd)" },
	{ "KTUNE_BLOCKATTN_DUMP", PATH, "", BENCH, "test_blockattn, bench/peers_attn.py",
		"a folder: the program dumps the bench inputs and gradients there" },
	{ "KTUNE_BLOCKATTN_DUMP_CONFIG", TEXT, "", BENCH, "test_blockattn, bench/peers_attn.py",
		"with KTUNE_BLOCKATTN_DUMP: dump the gradients of this config key" },
	{ "KTUNE_BLOCKATTN_DUMP_BLOCK", INT, "64", BENCH, "test_blockattn, bench/device.sh",
		"with KTUNE_BLOCKATTN_DUMP_CONFIG: the block of the dumped problem, 64 "
		"(ads_d128_L256) or 128 (ads_d128_L256_b128)" },
	{ "KTUNE_RUNTIME_BENCH", PATH, "", BENCH, "test_runtime, bench/runtime.sh",
		"test_runtime's GPU suite times the shapes of KTUNE_RUNTIME_BENCH_SHAPES into this "
		"JSON file" },
	{ "KTUNE_RUNTIME_BENCH_SHAPES", PATH, "", BENCH, "test_runtime, bench/runtime.sh",
		"the shapes file KTUNE_RUNTIME_BENCH times" },

	/* ---- read by the bench scripts ---- */
	{ "KTUNE_STEPS", LIST, "tests compile sweeps peers export collect", BENCH, "bench/device.sh",
		"the steps to run (`attn` adds the attention suite and its peers)" },
	{ "KTUNE_WORKLOADS", LIST, "dense:4096x4096:N1024 lowrank:llama7b_qkvo:N1024", BENCH,
		"bench/device.sh",
		"workload ids to sweep; ID@random:N, ID@limit:S and ID@variants:A+B narrow one" },
	{ "KTUNE_SWEEP_ARGS", TEXT, "", BENCH, "bench/device.sh", "flags added to every sweep" },
	{ "KTUNE_SWEEP_LIMIT", INT, "none (bench/h200.sh: 150)", BENCH, "bench/device.sh, bench/h200.sh",
		"the --time-limit in seconds of every sweep" },
	{ "KTUNE_DEVICES", TEXT, "one GPU (bench/shapes.sh: all)", BENCH,
		"bench/device.sh, bench/shapes.sh", "the GPUs to sweep on (ktune sweep --devices)" },
	{ "KTUNE_BENCH_DB", PATH, "OUT_DIR/h200.db", BENCH, "bench/device.sh",
		"the database the sweeps write" },
	{ "KTUNE_MORE_RESULTS", PATH, "", BENCH, "bench/device.sh",
		"a folder of an earlier call of the same run whose results are collected too" },
	{ "KTUNE_LINEAR_WORKLOADS", LIST,
		"dense:4096x4096:N1024 lowrank:llama7b_qkvo:N1024 monarch:llama7b_qkvo:N1024", BENCH,
		"bench/h200.sh", "the workloads of the linear lane" },
	{ "KTUNE_ATTN_WORKLOADS", LIST, "the blockattn workloads of the development suite", BENCH,
		"bench/h200.sh", "the workloads of the attention lane" },
	{ "KTUNE_LANES", LIST, "linear attn", BENCH, "bench/h200.sh", "the lanes to run" },
	{ "KTUNE_COLLECT_KEEP", PATH, "", BENCH, "bench/collect.py",
		"an earlier h200.json whose rows of workloads not run now are carried over" },
	{ "KTUNE_PEERS_COMPILE", FLAG, "1", BENCH, "bench/peers.py",
		"0: the torch.compile peer is left out" },
	{ "KTUNE_MG_BUDGET", INT, "48", BENCH, "bench/multigpu.sh",
		"the random sweep's budget in configs" },
	{ "KTUNE_RT_BUDGET", INT, "6", BENCH, "bench/runtime.sh",
		"the budget in configs of each untuned shape's sweep" },
	{ "KTUNE_RT_LIMIT", INT, "12", BENCH, "bench/runtime.sh",
		"the time limit in seconds of each untuned shape's sweep" },
	{ "KTUNE_SEARCH_WORK", PATH, "BUILD_DIR/search", BENCH, "bench/search.sh",
		"the work folder phase sweeps leaves for phase fresh" },
	{ "KTUNE_SEARCH_RESTORE", PATH, "", BENCH, "bench/search.sh",
		"a search-work.tar.gz of an earlier call to unpack into the work folder" },
	{ "KTUNE_SEARCH_PROBLEMS", PATH, "", BENCH, "bench/search.sh",
		"a file of problem lines replacing the script's own" },
	{ "KTUNE_SEARCH_ARGS", TEXT, "", BENCH, "bench/search.sh", "flags added to every sweep" },
	{ "KTUNE_SEARCH_H200", FLAG, "1", BENCH, "bench/search.sh",
		"0: the rows of bench/results/h200.json are not re-measured" },
	{ "KTUNE_BENCH_OUT", PATH, "bench/results/server.json", BENCH, "bench/server.sh",
		"the results file" },
	{ "KTUNE_BENCH_DURATION", INT, "10", BENCH, "bench/server.sh, bench/server_sweep.sh",
		"seconds of load" },
	{ "KTUNE_BENCH_PROBLEMS", INT, "5000", BENCH, "bench/server_sweep.sh",
		"dense problems added to the database" },
	{ "KTUNE_BENCH_TRIALS", INT, "100", BENCH, "bench/server_sweep.sh",
		"trials of each added problem" },
	{ "KTUNE_BENCH_EVERY", NUM, "0.25", BENCH, "bench/server_sweep.sh",
		"seconds between the writer's trials" },
	{ "KTUNE_SHAPES_BUDGET", INT, "5", BENCH, "bench/shapes.sh", "configs per problem" },
	{ "KTUNE_SHAPES_FAMILIES", LIST, "blast monarch lowrank", BENCH, "bench/shapes.sh",
		"the families swept" },
	{ "KTUNE_SHAPES_VARIANTS", LIST, "", BENCH, "bench/shapes.sh",
		"FAMILY=V1,V2 ...: only those variants of those families" },
	{ "KTUNE_ATTN_BUDGET", INT, "16", BENCH, "bench/shapes_attn.sh",
		"configs per cell (random strategy)" },
	{ "KTUNE_ATTN_LIMIT", INT, "40", BENCH, "bench/shapes_attn.sh",
		"each cell's sweep --time-limit, seconds" },
	{ "KTUNE_ATTN_BLOCKS", LIST, "32 64 128 256", BENCH, "bench/shapes_attn.sh",
		"the block sizes of the cells" },
	{ "KTUNE_ATTN_HDS", LIST, "64 128", BENCH, "bench/shapes_attn.sh",
		"the head_dims of the cells" },
	{ "KTUNE_SHAPES_KEEP", PATH, "", BENCH, "bench/shapes_attn.py",
		"an earlier shapes_attn.json whose cells not run now are carried over" },
	{ "KTUNE_ATTN_STEPS", LIST, "ktune fa2", BENCH, "bench/shapes_attn.sh",
		"which sides run: ktune's sweeps, FlashAttention-2 (bench/peers_attn.py)" },
	{ "KTUNE_TORCH_STEPS", LIST, "tests rows", BENCH, "bench/torch.sh", "the steps to run" },
	{ "KTUNE_PYTEST_ARGS", TEXT, "", BENCH, "bench/torch.sh", "arguments added to pytest" },
	{ "KTUNE_ROWS_ARGS", TEXT, "", BENCH, "bench/torch.sh",
		"arguments added to bench/torch_rows.py" },
	{ "KTUNE_C_ROWS", PATH, "", BENCH, "bench/torch.sh",
		"bench/runtime.sh's runtime.json of the same call (its shapes and sweep times)" },
};

#define NKNOBS ((int)(sizeof(knobs) / sizeof(knobs[0])))

int kt_knob_count(void)
{
	return NKNOBS;
}

const struct kt_knob_info *kt_knob_at(int i)
{
	return i >= 0 && i < NKNOBS ? &knobs[i] : NULL;
}

const struct kt_knob_info *kt_knob_find(const char *name)
{
	int i;

	for (i = 0; name && i < NKNOBS; i++)
		if (strcmp(knobs[i].name, name) == 0)
			return &knobs[i];
	return NULL;
}

const char *kt_knob_type_name(enum kt_knob_type t)
{
	switch (t) {
	case KT_KNOB_TYPE_PATH: return "path";
	case KT_KNOB_TYPE_TEXT: return "text";
	case KT_KNOB_TYPE_LIST: return "list";
	case KT_KNOB_TYPE_INT: return "int";
	case KT_KNOB_TYPE_NUM: return "number";
	case KT_KNOB_TYPE_FLAG: return "flag";
	}
	return "?";
}

const char *kt_knob_scope_name(enum kt_knob_scope s)
{
	switch (s) {
	case KT_KNOB_SCOPE_PRODUCT: return "product";
	case KT_KNOB_SCOPE_TESTS: return "tests";
	case KT_KNOB_SCOPE_BENCH: return "bench";
	}
	return "?";
}

static const char *knob_read(enum kt_knob k, enum kt_knob_scope scope)
{
	if ((unsigned)k >= KT_KNOB_NREAD || knobs[k].scope != scope)
		return NULL;
	return getenv(knobs[k].name);
}

const char *kt_knob_get(enum kt_knob k)
{
	return knob_read(k, KT_KNOB_SCOPE_PRODUCT);
}

int kt_knob_flag(enum kt_knob k)
{
	const char *v = kt_knob_get(k);

	if (v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0))
		return v[0] == '1';
	return (unsigned)k < KT_KNOB_NREAD && strcmp(knobs[k].def, "1") == 0;
}

const char *kt_knob_test_hook(enum kt_knob k)
{
	return knob_read(k, KT_KNOB_SCOPE_TESTS);
}

long kt_knob_test_long(enum kt_knob k, long min, long max)
{
	const char *v = kt_knob_test_hook(k);
	long def = (unsigned)k < KT_KNOB_NREAD ? strtol(knobs[k].def, NULL, 10) : 0, n;
	char *end;

	if (!v || !*v)
		return def;
	n = strtol(v, &end, 10);
	return *end || n < min || n > max ? def : n;
}
