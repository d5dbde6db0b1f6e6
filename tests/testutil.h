/*
 * testutil.h -- what every CUnit test program shares.
 *
 * A test program registers its suites, then returns kt_test_main(). GPU
 * suites that find no GPU are made inactive with a printed reason; with
 * KTUNE_REQUIRE_GPU=1 (the H200 machine) a missing GPU is a failure instead.
 */
#ifndef KT_TESTUTIL_H
#define KT_TESTUTIL_H

#include <CUnit/Basic.h>
#include <stddef.h>

/* Runs every registered suite verbosely, prints CUnit's summary and returns
 * the exit code: 0 when nothing failed (inactive suites are not failures).
 * KTUNE_TEST_SUITE=TEXT runs only the suites whose name holds TEXT (any
 * case; e.g. "nvrtc" for a compile shard on the GPU machine, without the
 * CPU suites); a TEXT no suite's name holds is a failure, not a green run
 * of nothing. KTUNE_TEST_SKIP=TEXT[,TEXT...] leaves out the suites whose name
 * holds one of the texts (CI's sanitizer pass: the compile suites, whose
 * work NVRTC does). */
int kt_test_main(void);

/* 1 when suite name holds filter (ASCII, any case); an empty or NULL
 * filter holds every name. */
int kt_test_suite_wanted(const char *name, const char *filter);

/* An environment variable's value, copied (malloc'ed; NULL when unset), so
 * that a test can change it and put it back with kt_test_env_put. */
char *kt_test_env_save(const char *name);
/* Sets name to value, or unsets it when value is NULL; setenv's result. */
int kt_test_env_put(const char *name, const char *value);

/* A private temporary directory for this test program (created on first
 * use, removed with its contents at exit unless KTUNE_KEEP_TMP is set). */
const char *kt_test_tmpdir(void);
/* kt_test_tmpdir()/name in a static rotating buffer. */
const char *kt_test_path(const char *name);

/* The ktune binary under test: $KTUNE_BIN, else build/ktune. */
const char *kt_test_ktune(void);

/* Runs argv[0] with argv (execvp), stdin from stdin_text (may be NULL),
 * collecting stdout and stderr together into *out (malloc'ed, NUL-ended;
 * may be NULL to discard). Gives up after timeout_s (kills, returns 124).
 * Returns the exit status, or 128 + signal. */
int kt_test_exec(char *const argv[], const char *stdin_text, char **out, double timeout_s);

/* 1 when KTUNE_REQUIRE_GPU=1. */
int kt_test_gpu_required(void);
/* 1 when environment variable name is "1" (unset, empty or anything else:
 * 0), for the suites' KTUNE_*_GPU_ONLY switches. */
int kt_test_env_on(const char *name);

/* Parses a compile shard "K/N" (0 <= K < N <= 1024): a whole-space compile
 * split over N runs, run K taking the programs whose index is K mod N. NULL
 * or "": no shard (0 of 1). Returns 0, or -1 with why (a line) for anything
 * else, e.g. "2/2", "1/0", "a/b", "1/2x". */
int kt_test_shard_parse(const char *text, int *k, int *n, char *why, size_t whylen);
/* KTUNE_COMPILE_SHARD, parsed: 1 with *k, *n set when a shard is asked for,
 * 0 when none, -1 (printed to stderr) when its value is bad. */
int kt_test_shard(int *k, int *n);

/* KTUNE_COMPILE_ARCH=T (sm_80, sm_86, sm_90 or sm_90a): the compile
 * suites keep only target T's programs, e.g. the whole wgmma space alone
 * (counts over what is left say nothing of the whole, as with a shard).
 * Returns 1 with *arch set, 0 when unset or empty, -1 with a line on stderr
 * for any other name. */
int kt_test_compile_arch(const char **arch);

/* Writes len bytes to path; 0 on success. */
int kt_test_write_file(const char *path, const void *data, size_t len);

/* 1 when an NVRTC log (NULL: none) says ptxas serialized a kernel's wgmma
 * instructions ("Potential Performance Loss: wgmma.mma_async instructions
 * are serialized", C7514, C7520 and kin): the program still runs right, but its
 * warpgroup MMAs lose their overlap. The compile suites require that no
 * program of theirs does; the line goes to stderr with label. */
int kt_test_wgmma_serialized(const char *log, const char *label);
/* The most registers and the largest stack frame (bytes; above 0 means
 * spills in these templates) of a CUBIN's kernels; -1 where not found. */
void kt_test_cubin_usage(const unsigned char *d, size_t len, int *regs, int *frame);

#endif
