#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static void rm_tmpdir(void)
{
	char cmd[300];

	if (!tmpdir[0] || getenv("KTUNE_KEEP_TMP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "testutil: could not remove %s\n", tmpdir);
}

const char *kt_test_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	if (tmpdir[0])
		return tmpdir;
	snprintf(tmpdir, sizeof(tmpdir), "%s/ktune-test-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		abort();
	}
	atexit(rm_tmpdir);
	return tmpdir;
}

const char *kt_test_path(const char *name)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ % 8];

	snprintf(b, 512, "%s/%s", kt_test_tmpdir(), name);
	return b;
}

const char *kt_test_ktune(void)
{
	const char *b = getenv("KTUNE_BIN");

	return b && *b ? b : "build/ktune";
}

int kt_test_env_on(const char *name)
{
	const char *v = getenv(name);

	return v && strcmp(v, "1") == 0;
}

int kt_test_gpu_required(void)
{
	return kt_test_env_on("KTUNE_REQUIRE_GPU");
}

int kt_test_shard_parse(const char *text, int *k, int *n, char *why, size_t whylen)
{
	const char *p = text;
	long a, b;
	char *end;

	*k = 0;
	*n = 1;
	if (!text || !*text)
		return 0;
	errno = 0;
	a = strtol(p, &end, 10);
	if (end == p || *end != '/' || errno)
		goto bad;
	p = end + 1;
	b = strtol(p, &end, 10);
	if (end == p || *end || errno || b < 1 || b > 1024 || a < 0 || a >= b)
		goto bad;
	*k = (int)a;
	*n = (int)b;
	return 0;
bad:
	snprintf(why, whylen, "KTUNE_COMPILE_SHARD: want K/N with 0 <= K < N <= 1024 (e.g. 0/2), "
		 "not \"%.40s\"", text);
	return -1;
}

int kt_test_shard(int *k, int *n)
{
	const char *v = getenv("KTUNE_COMPILE_SHARD");
	char why[160];

	if (kt_test_shard_parse(v, k, n, why, sizeof(why)) != 0) {
		fprintf(stderr, "  %s\n", why);
		return -1;
	}
	return v && *v ? 1 : 0;
}

int kt_test_compile_arch(const char **arch)
{
	static const char *const known[] = {"sm_80", "sm_86", "sm_90", "sm_90a"};
	const char *v = getenv("KTUNE_COMPILE_ARCH");
	size_t i;

	*arch = NULL;
	if (!v || !*v)
		return 0;
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(v, known[i]) == 0) {
			*arch = known[i];
			return 1;
		}
	fprintf(stderr, "  KTUNE_COMPILE_ARCH: want sm_80, sm_86, sm_90 or sm_90a, not \"%.40s\"\n", v);
	return -1;
}

int kt_test_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc = 0;

	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len)
		rc = -1;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int kt_test_exec(char *const argv[], const char *stdin_text, char **out, double timeout_s)
{
	int inp[2], outp[2], status = 0;
	size_t cap = 4096, len = 0, wlen, woff = 0;
	char *buf = malloc(cap);
	double deadline = now_s() + (timeout_s > 0 ? timeout_s : 60);
	pid_t pid;
	int out_open = 1, timed_out = 0;

	if (!buf || pipe(inp) != 0 || pipe(outp) != 0) {
		free(buf);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		free(buf);
		return -1;
	}
	if (pid == 0) {
		dup2(inp[0], 0);
		dup2(outp[1], 1);
		dup2(outp[1], 2);
		close(inp[0]);
		close(inp[1]);
		close(outp[0]);
		close(outp[1]);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(inp[0]);
	close(outp[1]);
	wlen = stdin_text ? strlen(stdin_text) : 0;
	signal(SIGPIPE, SIG_IGN);
	fcntl(inp[1], F_SETFL, O_NONBLOCK);
	if (wlen == 0) {
		close(inp[1]);
		inp[1] = -1;
	}
	while (out_open) {
		struct pollfd p[2] = { { outp[0], POLLIN, 0 }, { inp[1], POLLOUT, 0 } };
		int np = inp[1] >= 0 ? 2 : 1;
		int left = (int)((deadline - now_s()) * 1000);

		if (left <= 0) {
			timed_out = 1;
			kill(pid, SIGKILL);
			break;
		}
		if (poll(p, np, left) < 0 && errno != EINTR)
			break;
		if (np == 2 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = write(inp[1], stdin_text + woff, wlen - woff);

			if (k > 0)
				woff += k;
			if (k < 0 || woff == wlen) {
				close(inp[1]);
				inp[1] = -1;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t k;

			if (len + 4096 > cap) {
				char *nb = realloc(buf, cap * 2);

				if (!nb)
					break;
				buf = nb;
				cap *= 2;
			}
			k = read(outp[0], buf + len, cap - len - 1);
			if (k <= 0)
				out_open = 0;
			else
				len += k;
		}
	}
	if (inp[1] >= 0)
		close(inp[1]);
	close(outp[0]);
	waitpid(pid, &status, 0);
	buf[len] = 0;
	if (out)
		*out = buf;
	else
		free(buf);
	if (timed_out)
		return 124;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int kt_test_suite_wanted(const char *name, const char *filter)
{
	if (!filter || !*filter)
		return 1;
	return name && strcasestr(name, filter) != NULL;
}

char *kt_test_env_save(const char *name)
{
	const char *v = getenv(name);

	return v ? strdup(v) : NULL;
}

int kt_test_env_put(const char *name, const char *value)
{
	return value ? setenv(name, value, 1) : unsetenv(name);
}

/* 1 when suite name holds one of skip's comma-separated texts (any case). */
static int skip_wanted(const char *name, const char *skip)
{
	while (skip && *skip) {
		const char *end = strchr(skip, ',');
		size_t n = end ? (size_t)(end - skip) : strlen(skip);
		char text[128];

		if (n > 0 && n < sizeof(text)) {
			memcpy(text, skip, n);
			text[n] = 0;
			if (kt_test_suite_wanted(name, text))
				return 1;
		}
		skip = end ? end + 1 : NULL;
	}
	return 0;
}

/* KTUNE_TEST_SUITE: the suites it names stay as they are, the others are
 * made inactive; then KTUNE_TEST_SKIP: the suites it names are made
 * inactive. Returns the number of suites KTUNE_TEST_SUITE left active,
 * skipped ones included (-1: no KTUNE_TEST_SUITE). */
static int filter_suites(const char *filter, const char *skip)
{
	CU_pTestRegistry reg = CU_get_registry();
	CU_pSuite s;
	int kept = 0;

	if (!reg)
		return -1;
	for (s = reg->pSuite; s; s = s->pNext) {
		if (filter && *filter && !kt_test_suite_wanted(s->pName, filter)) {
			CU_set_suite_active(s, CU_FALSE);
			continue;
		}
		kept += s->fActive ? 1 : 0;
		if (skip_wanted(s->pName, skip))
			CU_set_suite_active(s, CU_FALSE);
	}
	return filter && *filter ? kept : -1;
}

int kt_test_main(void)
{
	const char *filter = getenv("KTUNE_TEST_SUITE");
	unsigned failures;

	if (filter_suites(filter, getenv("KTUNE_TEST_SKIP")) == 0) {
		fprintf(stderr, "KTUNE_TEST_SUITE=\"%.60s\": no active suite of this program has it "
			"in its name\n", filter);
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_set_fail_on_inactive(CU_FALSE);
	if (CU_basic_run_tests() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 1;
	}
	failures = CU_get_number_of_failure_records();
	CU_cleanup_registry();
	return failures ? 1 : 0;
}

int kt_test_wgmma_serialized(const char *log, const char *label)
{
	const char *hit = log ? strstr(log, "wgmma.mma_async instructions are serialized") : NULL;
	const char *b, *e;

	if (!hit)
		return 0;
	for (b = hit; b > log && b[-1] != '\n'; b--)
		;
	e = strchr(hit, '\n');
	fprintf(stderr, "  SERIALIZED %s: %.*s\n", label ? label : "",
		(int)(e ? e - b : (long)strlen(b)), b);
	return 1;
}

/* The most registers and the largest stack frame of a CUBIN's kernels, from the global
 * .nv.info section (EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11). A frame
 * above 0 in these templates means spills (they use no local arrays). */
void kt_test_cubin_usage(const unsigned char *d, size_t len, int *regs, int *frame)
{
	uint64_t shoff;
	uint16_t shentsize, shnum, shstrndx;
	int i;

	*regs = *frame = -1;
	if (len < 0x40 || memcmp(d, "\177ELF", 4) || d[4] != 2)
		return;
	memcpy(&shoff, d + 0x28, 8);
	memcpy(&shentsize, d + 0x3a, 2);
	memcpy(&shnum, d + 0x3c, 2);
	memcpy(&shstrndx, d + 0x3e, 2);
	if (shentsize < 64 || shoff + (uint64_t)shnum * shentsize > len || shstrndx >= shnum)
		return;
	for (i = 0; i < shnum; i++) {
		const unsigned char *sh = d + shoff + (uint64_t)i * shentsize;
		const unsigned char *strsh = d + shoff + (uint64_t)shstrndx * shentsize;
		uint32_t name;
		uint64_t stroff, off, size, p;

		memcpy(&name, sh, 4);
		memcpy(&stroff, strsh + 0x18, 8);
		memcpy(&off, sh + 0x18, 8);
		memcpy(&size, sh + 0x20, 8);
		if (stroff + name + 9 > len || off + size > len)
			continue;
		if (strcmp((const char *)d + stroff + name, ".nv.info") != 0)
			continue;
		for (p = off; p + 4 <= off + size;) {
			unsigned fmt = d[p], attr = d[p + 1];
			uint16_t sz;
			uint32_t val;

			if (fmt == 1) {	/* no value */
				p += 2;
				continue;
			}
			memcpy(&sz, d + p + 2, 2);
			if (fmt == 4 && sz == 8 && p + 12 <= off + size) {
				memcpy(&val, d + p + 8, 4);
				if (attr == 0x2f && (int)val > *regs)
					*regs = (int)val;
				if (attr == 0x11 && (int)val > *frame)
					*frame = (int)val;
			}
			p += fmt == 4 ? 4u + sz : 4u;
		}
	}
}
