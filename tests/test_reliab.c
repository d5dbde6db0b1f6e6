/*
 * test_reliab.c -- the service as users and attackers meet it: a second
 * writer beside `ktune serve`, a read-only database, unauthenticated
 * bodies, slow and many connections, odd queries, merge conflicts.
 *
 * Each suite is named after its row of bench/results/reliability.json
 * (bench/reliability.sh runs them one by one with KTUNE_TEST_SUITE).
 * Servers run as real `ktune serve` processes where the point is two
 * processes on one file, else in-process (server_start) on port 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "db/store.h"
#include "server/query.h"
#include "server/server.h"
#include "server/server_int.h"
#include "tests/server/http_client.h"
#include "tests/testutil.h"

/* ---- helpers ---- */

/* An export document of n dense entries on device uuid, shapes
 * tokens=16..16n (so two documents of other uuids never share a row),
 * each with its sweep's start, as `ktune export` writes them. */
static char *gen_export(const char *uuid, int n)
{
	json_t *doc, *ents;
	char *text;
	int i;

	ents = json_array();
	for (i = 0; i < n; i++) {
		char shape[96];

		snprintf(shape, sizeof(shape), "tokens=%d,in=%d,out=4096", 16 * (i % 512 + 1),
			 4096 + 8 * (i / 512));
		json_array_append_new(ents, json_pack("{s:s,s:s,s:s,s:s,s:f,s:{s:s,s:s,s:s,s:f}}",
			"device", uuid, "family", "dense", "shape_key", shape,
			"config_key", "variant=wgmma_ws,BLOCK_M=256,BLOCK_N=128,STAGES=4,GROUP_M=1,CONSUMERS=2",
			"median_us", 10.0 + i, "sweep", "strategy", "exhaustive", "options_key", "gen",
			"status", "done", "started", 1.7e9 + i));
	}
	doc = json_pack("{s:s,s:i,s:[{s:s,s:s,s:s,s:i}],s:o}", "format", "ktune-export",
			"version", 1, "devices", "name", "NVIDIA H200", "uuid", uuid, "arch", "sm_90",
			"sms", 132, "entries", ents);
	text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	return text;
}

/* The whole file, malloc'ed and NUL-ended; NULL when unreadable. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		if (len)
			*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* Runs the NULL-ended command; its exit status, output in *out. */
static int runv(char **out, char *const *prefix, ...)
{
	char *argv[40];
	va_list ap;
	int n = 0;

	while (prefix && *prefix && n < 16)
		argv[n++] = *prefix++;
	va_start(ap, prefix);
	while (n < 39 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	if (out)
		*out = NULL;
	return kt_test_exec(argv, NULL, out, 120);
}

static long trials_in(const char *db)
{
	struct store *st = NULL;
	struct query_counts qc;
	struct kt_err err = { 0 };
	long n = -1;

	if (store_open(db, STORE_RO, &st, &err) == 0 && query_counts(st, &qc, &err) == 0)
		n = qc.trials;
	else
		fprintf(stderr, "counting trials in %s: %s\n", db, err.msg);
	store_close(st);
	return n;
}

/* A `ktune serve` process. */
struct serve_proc {
	pid_t pid;
	int port;
	int errfd;		/* its stderr */
	char token[80];
};

/* Starts `ktune serve --db db --listen 127.0.0.1:0 --threads 2` with the
 * extra arguments (NULL-ended), under the command prefix (NULL-ended
 * list, e.g. setpriv ...; NULL: none); 0 once it printed its address. The
 * token, if the server has one, is read from db.token. */
static int serve_proc_startv(struct serve_proc *sp, char *const *prefix, const char *ktune,
			     const char *db, va_list ap)
{
	char *argv[40];
	char buf[4096], tokpath[600];
	size_t len = 0;
	int pipefd[2], n = 0, fd;

	memset(sp, 0, sizeof(*sp));
	sp->pid = -1;
	while (prefix && *prefix && n < 16)
		argv[n++] = *prefix++;
	argv[n++] = (char *)ktune;
	argv[n++] = "serve";
	argv[n++] = "--db";
	argv[n++] = (char *)db;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--threads";
	argv[n++] = "2";
	while (n < 39 && (argv[n] = va_arg(ap, char *)))
		n++;
	argv[n] = NULL;
	if (pipe(pipefd) != 0)
		return -1;
	if ((sp->pid = fork()) < 0)
		return -1;
	if (sp->pid == 0) {
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pipefd[1]);
	sp->errfd = pipefd[0];
	while (len < sizeof(buf) - 1) {
		ssize_t k = read(sp->errfd, buf + len, sizeof(buf) - 1 - len);
		char *p;

		if (k <= 0)
			break;
		len += (size_t)k;
		buf[len] = 0;
		if ((p = strstr(buf, "http://127.0.0.1:")) && strchr(p, '\n')) {
			sp->port = atoi(p + strlen("http://127.0.0.1:"));
			break;
		}
	}
	if (sp->port <= 0) {
		buf[len] = 0;
		fprintf(stderr, "ktune serve did not start: %s\n", buf);
		return -1;
	}
	snprintf(tokpath, sizeof(tokpath), "%s.token", db);
	if ((fd = open(tokpath, O_RDONLY)) >= 0) {
		ssize_t k = read(fd, sp->token, sizeof(sp->token) - 1);

		sp->token[k > 0 ? k : 0] = 0;
		sp->token[strcspn(sp->token, "\r\n")] = 0;
		close(fd);
	}
	return 0;
}

static int serve_proc_start(struct serve_proc *sp, const char *db, ...)
{
	va_list ap;
	int rc;

	va_start(ap, db);
	rc = serve_proc_startv(sp, NULL, kt_test_ktune(), db, ap);
	va_end(ap);
	return rc;
}

static int serve_proc_start_as(struct serve_proc *sp, char *const *prefix, const char *ktune,
			       const char *db, ...)
{
	va_list ap;
	int rc;

	va_start(ap, db);
	rc = serve_proc_startv(sp, prefix, ktune, db, ap);
	va_end(ap);
	return rc;
}

/* SIGTERM, then the exit status (-1: had to be killed). */
static int serve_proc_stop(struct serve_proc *sp)
{
	int status = 0, i;

	if (sp->pid <= 0)
		return -1;
	kill(sp->pid, SIGTERM);
	for (i = 0; i < 200 && waitpid(sp->pid, &status, WNOHANG) == 0; i++)
		usleep(50 * 1000);
	if (i == 200) {
		kill(sp->pid, SIGKILL);
		waitpid(sp->pid, &status, 0);
		status = -1;
	}
	if (sp->errfd > 0)
		close(sp->errfd);
	sp->pid = -1;
	return status < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- second_writer: `ktune import` beside `ktune serve` on one file ----
 *
 * The server holds its connections open for its whole life; a CLI import
 * is another process writing the same file. Each round imports one
 * document over HTTP and another with the CLI, and asks the server for a
 * row the CLI wrote. Nothing may be lost, and no answer may be a 500. */

#define SW_ROUNDS 6
#define SW_ENTRIES 10

static void test_second_writer(void)
{
	const char *db = kt_test_path("second-writer.db");
	struct serve_proc sp;
	char auth[160], uuid[64], path[256], *out = NULL;
	int round, http_ok = 0, cli_ok = 0, seen = 0, errors5xx = 0;
	long n;

	CU_ASSERT_EQUAL_FATAL(serve_proc_start(&sp, db, NULL), 0);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", sp.token);
	for (round = 0; round < SW_ROUNDS; round++) {
		char *doc;
		struct hc_resp r;
		char *argv[] = { (char *)kt_test_ktune(), "import", "--db", (char *)db, path, NULL };

		snprintf(uuid, sizeof(uuid), "GPU-http-%d", round);
		doc = gen_export(uuid, SW_ENTRIES);
		CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
		if (hc_request(sp.port, "POST", "/v1/import", auth, doc, strlen(doc), &r) == 0) {
			http_ok += r.status == 200;
			errors5xx += r.status >= 500;
			if (r.status != 200)
				fprintf(stderr, "http import: %d %s\n", r.status, r.body);
			hc_free(&r);
		}
		free(doc);

		snprintf(uuid, sizeof(uuid), "GPU-cli-%d", round);
		doc = gen_export(uuid, SW_ENTRIES);
		snprintf(path, sizeof(path), "%s", kt_test_path(uuid));
		CU_ASSERT_EQUAL_FATAL(kt_test_write_file(path, doc, strlen(doc)), 0);
		free(doc);
		out = NULL;
		if (kt_test_exec(argv, NULL, &out, 60) == 0)
			cli_ok++;
		else
			fprintf(stderr, "ktune import: %s\n", out ? out : "");
		free(out);

		/* the server sees what the other process wrote */
		snprintf(path, sizeof(path), "/v1/best?family=dense&device=%s&tokens=16&in=4096&out=4096",
			 uuid);
		if (hc_request(sp.port, "GET", path, NULL, NULL, 0, &r) == 0) {
			seen += r.status == 200 && strstr(r.body, "\"match\":\"exact\"") != NULL;
			errors5xx += r.status >= 500;
			if (r.status != 200)
				fprintf(stderr, "GET %s: %d %s\n", path, r.status, r.body);
			hc_free(&r);
		}
		if (hc_request(sp.port, "GET", "/v1/health", NULL, NULL, 0, &r) == 0) {
			errors5xx += r.status >= 500;
			hc_free(&r);
		}
	}
	CU_ASSERT_EQUAL(serve_proc_stop(&sp), 0);
	CU_ASSERT_EQUAL(http_ok, SW_ROUNDS);
	CU_ASSERT_EQUAL(cli_ok, SW_ROUNDS);
	CU_ASSERT_EQUAL(seen, SW_ROUNDS);
	CU_ASSERT_EQUAL(errors5xx, 0);
	/* counted after both stopped: every committed row is there */
	n = trials_in(db);
	CU_ASSERT_EQUAL(n, 2L * SW_ROUNDS * SW_ENTRIES);
	if (n != 2L * SW_ROUNDS * SW_ENTRIES)
		fprintf(stderr, "%ld trials, want %d\n", n, 2 * SW_ROUNDS * SW_ENTRIES);
}


/* ---- readonly_db: a results file others keep ----
 *
 * File 0444 in a directory 0555, read by another user (the tests run as
 * root in CI, and root ignores modes: the commands run as nobody through
 * setpriv). best, trials, export, merge (as its input) and serve must read
 * it, write nothing next to it, and serve must see what its owner adds. */

static int entries_in_export(const char *text)
{
	json_t *j = json_loads(text ? text : "", 0, NULL);
	int n = j ? (int)json_array_size(json_object_get(j, "entries")) : -1;

	json_decref(j);
	return n;
}

static void test_readonly_db(void)
{
	char dir[] = "/tmp/ktune-ro-XXXXXX";
	char dbdir[64], outdir[64], exe[80], db[96], doc_path[96], merged[96], *out = NULL;
	char *setpriv[] = { "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", NULL };
	char *const *as = NULL;
	char *before = NULL, *bin, *doc;
	size_t blen = 0, n;
	struct serve_proc sp;
	struct hc_resp r;
	int rc, have_setpriv;

	if (getuid() == 0) {
		have_setpriv = runv(NULL, NULL, "setpriv", "--version", NULL) == 0;
		if (!have_setpriv) {
			fprintf(stderr, "SKIPPED: running as root and setpriv (util-linux) is missing: "
					"root reads any file, so this needs another user\n");
			return;
		}
		as = setpriv;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	CU_ASSERT_EQUAL_FATAL(chmod(dir, 0755), 0);
	snprintf(dbdir, sizeof(dbdir), "%s/db", dir);
	snprintf(outdir, sizeof(outdir), "%s/out", dir);
	snprintf(exe, sizeof(exe), "%s/ktune", dir);
	snprintf(db, sizeof(db), "%s/k.db", dbdir);
	snprintf(doc_path, sizeof(doc_path), "%s/doc.json", dir);
	snprintf(merged, sizeof(merged), "%s/m.db", outdir);
	CU_ASSERT_EQUAL_FATAL(mkdir(dbdir, 0755), 0);
	CU_ASSERT_EQUAL_FATAL(mkdir(outdir, 0777), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(outdir, 0777), 0);
	/* the binary where the other user can run it (a checkout may sit
	 * under a home directory others cannot enter) */
	bin = slurp(kt_test_ktune(), &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bin);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(exe, bin, n), 0);
	free(bin);
	CU_ASSERT_EQUAL_FATAL(chmod(exe, 0755), 0);
	doc = gen_export("GPU-ro", 5);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(doc_path, doc, strlen(doc)), 0);
	free(doc);
	rc = runv(&out, NULL, exe, "import", "--db", db, doc_path, NULL);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	free(out);
	CU_ASSERT_EQUAL_FATAL(chmod(db, 0444), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(dbdir, 0555), 0);
	before = slurp(db, &blen);
	CU_ASSERT_PTR_NOT_NULL_FATAL(before);

	rc = runv(&out, as, exe, "best", "--db", db, "--family", "dense", "--shape",
		  "tokens=16,in=4096,out=4096", NULL);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "exact"));
	if (rc != 0)
		fprintf(stderr, "best: %s\n", out ? out : "");
	free(out);
	rc = runv(&out, as, exe, "trials", "--db", db, NULL);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "dense"));
	if (rc != 0)
		fprintf(stderr, "trials: %s\n", out ? out : "");
	free(out);
	rc = runv(&out, as, exe, "export", "--db", db, NULL);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(entries_in_export(out), 5);
	if (rc != 0)
		fprintf(stderr, "export: %s\n", out ? out : "");
	free(out);
	rc = runv(&out, as, exe, "merge", "-o", merged, db, NULL);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0)
		fprintf(stderr, "merge: %s\n", out ? out : "");
	free(out);
	CU_ASSERT_EQUAL(trials_in(merged), 5);

	CU_ASSERT_EQUAL_FATAL(serve_proc_start_as(&sp, as, exe, db, NULL), 0);
	CU_ASSERT_EQUAL(hc_request(sp.port, "GET",
				   "/v1/best?family=dense&device=GPU-ro&tokens=16&in=4096&out=4096",
				   NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"match\":\"exact\""));
	hc_free(&r);
	/* writes are refused at once, as read-only */
	CU_ASSERT_EQUAL(hc_request(sp.port, "POST", "/v1/import", NULL, "{}", 2, &r), 0);
	CU_ASSERT_EQUAL(r.status, 409);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "read-only"));
	hc_free(&r);
	/* ... and nothing was written, not even beside the file */
	{
		size_t alen = 0;
		char *after = slurp(db, &alen);
		struct stat sb;
		char p[128];

		CU_ASSERT(after && alen == blen && memcmp(after, before, blen) == 0);
		free(after);
		snprintf(p, sizeof(p), "%s-wal", db);
		CU_ASSERT_NOT_EQUAL(stat(p, &sb), 0);
		snprintf(p, sizeof(p), "%s-shm", db);
		CU_ASSERT_NOT_EQUAL(stat(p, &sb), 0);
	}
	/* its owner adds results: the reader sees them */
	if (getuid() == 0) {
		doc = gen_export("GPU-ro-more", 3);
		CU_ASSERT_EQUAL_FATAL(kt_test_write_file(doc_path, doc, strlen(doc)), 0);
		free(doc);
		rc = runv(&out, NULL, exe, "import", "--db", db, doc_path, NULL);
		CU_ASSERT_EQUAL(rc, 0);
		if (rc != 0)
			fprintf(stderr, "owner's import: %s\n", out ? out : "");
		free(out);
		CU_ASSERT_EQUAL(hc_request(sp.port, "GET",
					   "/v1/best?family=dense&device=GPU-ro-more&tokens=16&in=4096&out=4096",
					   NULL, NULL, 0, &r), 0);
		CU_ASSERT_EQUAL(r.status, 200);
		if (r.status != 200)
			fprintf(stderr, "after the owner's import: %d %s\n", r.status, r.body);
		hc_free(&r);
	}
	CU_ASSERT_EQUAL(serve_proc_stop(&sp), 0);
	free(before);
	chmod(dbdir, 0755);
	runv(NULL, NULL, "rm", "-rf", dir, NULL);
}

/* ---- unauthenticated_body: a write's token before its body ----
 *
 * 8 connections each announce and send a 60 MiB body to POST /v1/import
 * without the token. The server must refuse them from their headers: its
 * peak resident memory may not grow by the bodies (it grew by 500 MB when
 * each body was buffered up to the 64 MiB cap before the token check). */

#define FLOOD_CONNS 8
#define FLOOD_BYTES (60u << 20)
#define FLOOD_CHUNK (1u << 20)

static char flood_chunk[FLOOD_CHUNK];

struct flood {
	int port;
	int status;		/* the answer's, 0 when none came */
	size_t sent;
};

static int connect_from(int port, const char *from)
{
	struct sockaddr_in sa;
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (from) {
		sa.sin_addr.s_addr = inet_addr(from);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(fd);
			return -1;
		}
	}
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	char head[256], resp[512];
	ssize_t k;
	int fd, n;

	if ((fd = connect_from(f->port, NULL)) < 0)
		return NULL;
	n = snprintf(head, sizeof(head), "POST /v1/import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Content-Type: application/json\r\nContent-Length: %u\r\n\r\n", FLOOD_BYTES);
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) == n) {
		while (f->sent < FLOOD_BYTES) {
			size_t left = FLOOD_BYTES - f->sent;

			k = send(fd, flood_chunk, left < FLOOD_CHUNK ? left : FLOOD_CHUNK, MSG_NOSIGNAL);
			if (k <= 0)
				break;
			f->sent += (size_t)k;
		}
	}
	if ((k = recv(fd, resp, sizeof(resp) - 1, 0)) > 0) {
		resp[k] = 0;
		sscanf(resp, "HTTP/1.%*d %d", &f->status);
	}
	close(fd);
	return NULL;
}

/* The process's peak resident set, kB (-1 unknown). */
static long peak_rss_kb(pid_t pid)
{
	char path[64], text[4096], *p;
	long kb = -1;
	ssize_t n;
	int fd;

	/* read(), not stdio's size: /proc files say they are empty */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fd = open(path, O_RDONLY)) < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	if ((p = strstr(text, "VmHWM:")))
		kb = strtol(p + 6, NULL, 10);
	return kb;
}

static void test_unauthenticated_body(void)
{
	const char *db = kt_test_path("flood.db");
	struct flood f[FLOOD_CONNS];
	pthread_t th[FLOOD_CONNS];
	struct serve_proc sp;
	struct hc_resp r;
	long before, after;
	int i, refused = 0;

	memset(flood_chunk, ' ', sizeof(flood_chunk));
	CU_ASSERT_EQUAL_FATAL(serve_proc_start(&sp, db, NULL), 0);
	CU_ASSERT_EQUAL(hc_request(sp.port, "GET", "/v1/health", NULL, NULL, 0, &r), 0);
	hc_free(&r);
	before = peak_rss_kb(sp.pid);
	memset(f, 0, sizeof(f));
	for (i = 0; i < FLOOD_CONNS; i++) {
		f[i].port = sp.port;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, flood_main, &f[i]), 0);
	}
	for (i = 0; i < FLOOD_CONNS; i++) {
		pthread_join(th[i], NULL);
		/* a 401, or the connection closed before the body was in */
		refused += f[i].status == 401 || (f[i].status == 0 && f[i].sent < FLOOD_BYTES);
	}
	after = peak_rss_kb(sp.pid);
	fprintf(stderr, "  server peak RSS %ld kB before, %ld kB after %d x %u MiB unauthenticated\n",
		before, after, FLOOD_CONNS, FLOOD_BYTES >> 20);
	CU_ASSERT_EQUAL(refused, FLOOD_CONNS);
	CU_ASSERT(before > 0 && after > 0 && after - before < 16 * 1024);
	/* the token still works, and the server still answers */
	CU_ASSERT_EQUAL(hc_request(sp.port, "GET", "/v1/health", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	hc_free(&r);
	CU_ASSERT_EQUAL(serve_proc_stop(&sp), 0);
}

/* ---- slow_connections: many trickling connections lock nobody out ----
 *
 * Clients that send their request a byte at a time, or never finish it,
 * each hold a connection slot. From one address they get at most the
 * per-address limit; from many addresses they are shut down when their
 * request is late, so another client gets its answer within the deadline
 * even when they filled every slot. The server runs in this process, on
 * port 0; the attackers connect from other loopback addresses (127.0.0.2,
 * 127.0.1.N), the client from 127.0.0.1. */

static int slow_conns = 1100;	/* lowered when the open-file limit is low */

/* Opens n connections from address from, each sending the start of a
 * request head it never finishes; fds[] gets them (-1: refused). */
static int open_slow(int port, const char *from, int *fds, int n)
{
	static const char head[] = "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
	int i, opened = 0;

	for (i = 0; i < n; i++) {
		fds[i] = connect_from(port, from);
		if (fds[i] >= 0 && send(fds[i], head, sizeof(head) - 1, MSG_NOSIGNAL) > 0)
			opened++;
	}
	return opened;
}

/* 1 when the server has closed fd (EOF or reset), 0 while it is open. */
static int closed_by_server(int fd)
{
	char c;
	ssize_t k;

	if (fd < 0)
		return 1;
	k = recv(fd, &c, 1, MSG_DONTWAIT);
	return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Seconds until GET /v1/health from 127.0.0.1 answers 200 (retrying),
 * or -1 after limit_s. */
static double answer_within(int port, double limit_s)
{
	struct timespec t0, t;
	double el = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (el < limit_s) {
		struct hc_resp r;
		int ok = hc_request(port, "GET", "/v1/health", NULL, NULL, 0, &r) == 0 &&
			 r.status == 200;

		if (ok || r.head)
			hc_free(&r);
		clock_gettime(CLOCK_MONOTONIC, &t);
		el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
		if (ok)
			return el;
		usleep(100 * 1000);
	}
	return -1;
}

static struct server *slow_server(const char *db, int max_conns, double request_s)
{
	struct serve_opts o;
	struct server *srv = NULL;
	struct kt_err err = { 0 };

	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.listen = "127.0.0.1:0";
	o.threads = 2;
	o.quiet = 1;
	o.max_conns = max_conns;
	o.request_s = request_s;
	if (server_start(&o, &srv, &err) < 0)
		fprintf(stderr, "server_start: %s\n", err.msg);
	return srv;
}

/* One address opens slow_conns connections and never finishes a request:
 * past the per-address limit it is refused, and others are answered. */
static void test_slow_one_address(void)
{
	struct server *srv = slow_server(kt_test_path("slow1.db"), 0, 0);
	int *fds = calloc((size_t)slow_conns, sizeof(int));
	int i, open_now = 0, answered = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fds);
	open_slow(server_port(srv), "127.0.0.2", fds, slow_conns);
	usleep(300 * 1000);
	for (i = 0; i < slow_conns; i++)
		open_now += !closed_by_server(fds[i]);
	for (i = 0; i < 20; i++)
		answered += answer_within(server_port(srv), 2.0) >= 0;
	fprintf(stderr, "  %d slow connections from one address: %d kept open, %d of 20 answers\n",
		slow_conns, open_now, answered);
	CU_ASSERT(open_now <= SRV_PER_IP);
	CU_ASSERT_EQUAL(answered, 20);
	for (i = 0; i < slow_conns; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	server_stop(srv);
}

/* 20 addresses trickle a byte every 300 ms on slow_conns connections,
 * more than the server's 1,000 slots: each connection is shut down when
 * its request is late (2 s here), and a client that found every slot
 * taken is answered within the deadline. */
static void test_slow_many_addresses(void)
{
	const double deadline = 2.0;
	struct server *srv = slow_server(kt_test_path("slow2.db"), 1000, deadline);
	int *fds = calloc((size_t)slow_conns, sizeof(int));
	int per = slow_conns / 20, n = per * 20, i, a, still = 0;
	double waited;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fds);
	for (a = 0; a < 20; a++) {
		char from[32];

		snprintf(from, sizeof(from), "127.0.1.%d", a + 1);
		open_slow(server_port(srv), from, fds + a * per, per);
	}
	/* trickle, while a client asks */
	{
		struct timespec t0, t;
		double el = 0;
		int round = 0;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		waited = -1;
		while (el < deadline + 2.5) {
			for (i = 0; i < n; i++)
				if (fds[i] >= 0 && send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
				    errno != EAGAIN) {
					close(fds[i]);
					fds[i] = -1;
				}
			if (waited < 0 && round++ % 2 == 0) {
				struct hc_resp r;

				if (hc_request(server_port(srv), "GET", "/v1/health", NULL, NULL, 0, &r) == 0) {
					clock_gettime(CLOCK_MONOTONIC, &t);
					if (r.status == 200)
						waited = (double)(t.tv_sec - t0.tv_sec) +
							 (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
					hc_free(&r);
				}
			}
			usleep(300 * 1000);
			clock_gettime(CLOCK_MONOTONIC, &t);
			el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
		}
	}
	for (i = 0; i < n; i++)
		still += !closed_by_server(fds[i]);
	fprintf(stderr, "  %d trickling connections from 20 addresses: answered after %.1f s, "
		"%d still open after %.1f s\n", n, waited, still, deadline + 2.5);
	CU_ASSERT(waited >= 0 && waited <= deadline + 1.5);
	CU_ASSERT_EQUAL(still, 0);
	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	server_stop(srv);
}

/* ---- import: linear, and off the request threads ---- */

/* 4,000 entries: listing every sweep per entry made this 19 s (0.96 s for
 * 1,000); by index it is a fraction of a second. The bound leaves room
 * for a slow machine and the sanitizers. */
static void test_import_linear(void)
{
	const char *db = kt_test_path("linear.db"), *doc_path = kt_test_path("linear.json");
	char *doc = gen_export("GPU-linear", 4000), *out = NULL;
	struct timespec t0, t1;
	double s1, s2;
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(doc_path, doc, strlen(doc)), 0);
	free(doc);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = runv(&out, NULL, kt_test_ktune(), "import", "--db", db, doc_path, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s1 = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "4000 added"));
	free(out);
	/* again: every entry found, nothing added */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = runv(&out, NULL, kt_test_ktune(), "import", "--db", db, doc_path, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s2 = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "4000 already present"));
	free(out);
	fprintf(stderr, "  4,000 entries: %.2f s, again %.2f s\n", s1, s2);
	CU_ASSERT(s1 < 5.0);
	CU_ASSERT(s2 < 5.0);
	CU_ASSERT_EQUAL(trials_in(db), 4000);
}

/* An import that waits (here: for another process's write lock) holds no
 * pool thread: with one thread, another connection is answered meanwhile,
 * and the import completes once the lock is let go. */
struct slow_import {
	int port;
	const char *auth;
	const char *doc;
	int status;
};

static void *slow_import_main(void *arg)
{
	struct slow_import *si = arg;
	struct hc_resp r;

	if (hc_request(si->port, "POST", "/v1/import", si->auth, si->doc, strlen(si->doc), &r) == 0) {
		si->status = r.status;
		hc_free(&r);
	}
	return NULL;
}

static void test_import_off_thread(void)
{
	const char *db = kt_test_path("busy-import.db");
	struct serve_opts o;
	struct server *srv = NULL;
	struct store *holder = NULL;
	struct kt_err err = { 0 };
	struct slow_import si;
	struct timespec t0, t1;
	struct hc_resp r;
	pthread_t th;
	char auth[160];
	double waited;
	int in_tx;

	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.listen = "127.0.0.1:0";
	o.threads = 1;
	o.quiet = 1;
	CU_ASSERT_EQUAL_FATAL(server_start(&o, &srv, &err), 0);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", server_token(srv));
	/* another writer holds the lock */
	CU_ASSERT_EQUAL_FATAL(store_open(db, STORE_RW, &holder, &err), 0);
	in_tx = store_tx_begin(holder, &err) == 0;
	CU_ASSERT_FATAL(in_tx);
	memset(&si, 0, sizeof(si));
	si.port = server_port(srv);
	si.auth = auth;
	si.doc = gen_export("GPU-waiting", 20);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, slow_import_main, &si), 0);
	usleep(300 * 1000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CU_ASSERT_EQUAL(hc_request(si.port, "GET", "/v1/health", NULL, NULL, 0, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	CU_ASSERT_EQUAL(r.status, 200);
	hc_free(&r);
	fprintf(stderr, "  /v1/health during a waiting import: %.3f s\n", waited);
	CU_ASSERT(waited < 1.0);
	usleep(500 * 1000);
	store_tx_rollback(holder);
	store_close(holder);
	pthread_join(th, NULL);
	CU_ASSERT_EQUAL(si.status, 200);
	free((char *)si.doc);
	server_stop(srv);
	CU_ASSERT_EQUAL(trials_in(db), 20);
}

/* ---- many_arguments: odd queries get a clear 4xx ---- */

/* Sends len raw bytes, returns the answer's status (0: none within 5 s)
 * and its body in *body (may be NULL). */
static int raw_request(int port, const char *bytes, size_t len, char **body)
{
	char buf[8192];
	size_t got = 0;
	ssize_t k;
	int fd = connect_from(port, NULL), status = 0;
	struct timeval tv = { 5, 0 };

	if (body)
		*body = NULL;
	if (fd < 0)
		return 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(fd, bytes, len, MSG_NOSIGNAL) == (ssize_t)len)
		while (got < sizeof(buf) - 1 && (k = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
			got += (size_t)k;
	close(fd);
	buf[got] = 0;
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	if (body && strstr(buf, "\r\n\r\n"))
		*body = strdup(strstr(buf, "\r\n\r\n") + 4);
	return status;
}

/* GET path; the status, and 1 when the body is a JSON error whose message
 * holds want (NULL: any). */
static int get_error(int port, const char *path, const char *want, int *status)
{
	struct hc_resp r;
	json_t *j;
	const char *msg;
	int ok;

	*status = 0;
	if (hc_request(port, "GET", path, NULL, NULL, 0, &r) < 0)
		return 0;
	*status = r.status;
	j = hc_json(&r);
	msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
	ok = msg && (!want || strstr(msg, want));
	if (!ok)
		fprintf(stderr, "GET %.80s...: %d %.200s\n", path, r.status, r.body);
	json_decref(j);
	hc_free(&r);
	return ok;
}

static char *many_args_path(int n, const char *fmt)
{
	size_t cap = (size_t)n * 24 + 64, len;
	char *p = malloc(cap);
	int i;

	if (!p)
		return NULL;
	len = (size_t)snprintf(p, cap, "/v1/best?family=dense");
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(p + len, cap - len, fmt, i);
	return p;
}

static void test_many_arguments(void)
{
	const char *db = kt_test_path("args.db");
	struct serve_opts o;
	struct server *srv = NULL;
	struct kt_err err = { 0 };
	struct hc_resp r;
	char *path, req[1024], *body = NULL;
	int port, status, n;
	json_t *j;

	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.listen = "127.0.0.1:0";
	o.threads = 2;
	o.quiet = 1;
	CU_ASSERT_EQUAL_FATAL(server_start(&o, &srv, &err), 0);
	port = server_port(srv);

	/* 700 arguments: a JSON 400 that says so (it was no answer at all) */
	path = many_args_path(700, "&a%d=1");
	CU_ASSERT(get_error(port, path, "query arguments", &status));
	CU_ASSERT_EQUAL(status, 400);
	free(path);
	/* 65, just over the limit; 64 in all pass the check */
	path = many_args_path(64, "&a%d=1");
	CU_ASSERT(get_error(port, path, "query arguments", &status));
	CU_ASSERT_EQUAL(status, 400);
	free(path);
	path = many_args_path(60, "&a%d=1");
	CU_ASSERT(get_error(port, path, "unknown key", &status));
	CU_ASSERT_EQUAL(status, 400);
	free(path);
	/* 5,000 short ones, a 39 kB line: libmicrohttpd's own 414 */
	path = many_args_path(5000, "&a%d");
	CU_ASSERT_EQUAL(hc_request(port, "GET", path, NULL, NULL, 0, &r), 0);
	CU_ASSERT(r.status >= 400 && r.status < 500);
	hc_free(&r);
	free(path);
	/* a repeated key is named, not resolved by order */
	CU_ASSERT(get_error(port, "/v1/best?family=dense&family=lowrank&tokens=16&in=64&out=64",
			    "'family' is given more than once", &status));
	CU_ASSERT_EQUAL(status, 400);
	CU_ASSERT(get_error(port, "/v1/best?family=dense&tokens=16&tokens=32&in=64&out=64",
			    "'tokens' is given more than once", &status));
	CU_ASSERT_EQUAL(status, 400);
	/* a NUL in a value does not cut it short */
	CU_ASSERT(get_error(port, "/v1/best?family=dense%00x&tokens=16&in=64&out=64", "NUL", &status));
	CU_ASSERT_EQUAL(status, 400);
	CU_ASSERT(get_error(port, "/v1/export?family=dense%00junk", "NUL", &status));
	CU_ASSERT_EQUAL(status, 400);
	/* the token followed by a NUL and more is not the token */
	{
		char *doc = gen_export("GPU-nul", 1);

		n = snprintf(req, sizeof(req), "POST /v1/import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			     "Authorization: Bearer %s", server_token(srv));
		memcpy(req + n, "\0junk\r\n", 7);
		n += 7;
		n += snprintf(req + n, sizeof(req) - (size_t)n,
			      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			      strlen(doc), doc);
		status = raw_request(port, req, (size_t)n, &body);
		CU_ASSERT(status == 400 || status == 401);
		if (status != 400 && status != 401)
			fprintf(stderr, "Bearer TOKEN\\0junk: %d %s\n", status, body ? body : "");
		free(body);
		/* two Authorization headers, the second the token: refused */
		n = snprintf(req, sizeof(req), "POST /v1/import HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			     "Authorization: Bearer nope\r\nAuthorization: Bearer %s\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			     server_token(srv), strlen(doc), doc);
		status = raw_request(port, req, (size_t)n, NULL);
		CU_ASSERT_EQUAL(status, 401);
		free(doc);
		CU_ASSERT_EQUAL(trials_in(db), 0);
	}
	/* a non-string device in a batch query, or an unknown key, is a 400
	 * naming the query (it was ignored); a good batch still answers */
	{
		static const char bad1[] =
			"{\"queries\":[{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\"},"
			"{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\",\"device\":5}]}";
		static const char bad2[] =
			"{\"queries\":[{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\",\"devise\":\"x\"}]}";
		static const char good[] =
			"{\"queries\":[{\"family\":\"dense\",\"shape\":\"tokens=16,in=64,out=64\"},"
			"{\"family\":\"nosuch\",\"shape\":\"tokens=16\"}]}";

		CU_ASSERT_EQUAL(hc_request(port, "POST", "/v1/best:batch", NULL, bad1, sizeof(bad1) - 1, &r), 0);
		CU_ASSERT_EQUAL(r.status, 400);
		CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "query 1: device must be a non-empty string"));
		hc_free(&r);
		CU_ASSERT_EQUAL(hc_request(port, "POST", "/v1/best:batch", NULL, bad2, sizeof(bad2) - 1, &r), 0);
		CU_ASSERT_EQUAL(r.status, 400);
		CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "unknown key 'devise'"));
		hc_free(&r);
		j = NULL;
		if (hc_request(port, "POST", "/v1/best:batch", NULL, good, sizeof(good) - 1, &r) == 0) {
			CU_ASSERT_EQUAL(r.status, 200);
			j = hc_json(&r);
			hc_free(&r);
		}
		{
			json_t *res = json_object_get(j, "results");
			const char *m = json_string_value(json_object_get(json_array_get(res, 0), "match"));

			CU_ASSERT_STRING_EQUAL(m ? m : "", "default");
			CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(
				json_array_get(res, 1), "error"), "status")), 404);
		}
		json_decref(j);
	}
	/* an empty value says nothing: refused */
	CU_ASSERT(get_error(port, "/v1/winners?family=", "is empty", &status));
	CU_ASSERT_EQUAL(status, 400);
	CU_ASSERT(get_error(port, "/v1/winners?=x", "is empty", &status));
	CU_ASSERT_EQUAL(status, 400);
	CU_ASSERT(get_error(port, "/v1/health?x=1", "unknown query argument 'x'", &status));
	CU_ASSERT_EQUAL(status, 400);
	/* and the server still answers */
	CU_ASSERT_EQUAL(hc_request(port, "GET", "/v1/health", NULL, NULL, 0, &r), 0);
	CU_ASSERT_EQUAL(r.status, 200);
	hc_free(&r);
	server_stop(srv);
}

/* ---- merge_conflicts: one rule whatever the order, and said ---- */

static long raw_long(const char *db, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *s = NULL;
	long v = -1;

	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = (long)sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

static double raw_double(const char *db, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *s = NULL;
	double v = -1;

	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_double(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(h);
	return v;
}

static int raw_exec(const char *db, const char *sql)
{
	sqlite3 *h = NULL;
	int rc = -1;

	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK)
		rc = 0;
	sqlite3_close(h);
	return rc;
}

/* `ktune merge --json -o out inputs...`: its exit status; *conflicts the
 * conflicts it reported (-1 when it said nothing readable). */
static int merge_cli(const char *out_db, const char *a, const char *b, const char *c,
		     long *conflicts)
{
	char *out = NULL, *brace;
	json_t *j;
	int rc = runv(&out, NULL, kt_test_ktune(), "merge", "--json", "-o", out_db, a, b, c, NULL);

	*conflicts = -1;
	brace = out ? strchr(out, '{') : NULL;
	if ((j = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, NULL) : NULL))
		*conflicts = (long)json_integer_value(json_object_get(j, "conflicts"));
	if (rc != 0)
		fprintf(stderr, "ktune merge: %s\n", out ? out : "");
	json_decref(j);
	free(out);
	return rc;
}

/* Three hosts imported one file: merged, one sweep per entry (it was one
 * per host and entry, every trial three times). One of them imported it
 * before imports kept the original start (its sweeps started at the
 * import): the same. */
static void test_merge_same_import(void)
{
	const char *doc_path = kt_test_path("same-import.json");
	char *doc = gen_export("GPU-same", 10), *out = NULL;
	const char *dbs[3] = { kt_test_path("same-a.db"), kt_test_path("same-b.db"),
			       kt_test_path("same-c.db") };
	const char *merged = kt_test_path("same-merged.db");
	long conflicts;
	int i;

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(doc_path, doc, strlen(doc)), 0);
	free(doc);
	for (i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(runv(&out, NULL, kt_test_ktune(), "import", "--db", dbs[i], doc_path,
				     NULL), 0);
		free(out);
	}
	CU_ASSERT_EQUAL(raw_exec(dbs[2], "UPDATE sweeps SET started = started + 1000"), 0);
	CU_ASSERT_EQUAL(merge_cli(merged, dbs[0], dbs[1], dbs[2], &conflicts), 0);
	CU_ASSERT_EQUAL(conflicts, 0);
	CU_ASSERT_EQUAL(raw_long(merged, "SELECT count(*) FROM sweeps"), 10);
	CU_ASSERT_EQUAL(raw_long(merged, "SELECT count(*) FROM trials"), 10);
	if (raw_long(merged, "SELECT count(*) FROM sweeps") != 10)
		fprintf(stderr, "%ld sweeps after merging three imports of one file\n",
			raw_long(merged, "SELECT count(*) FROM sweeps"));
}

/* One sweep in two databases with one config timed differently, and one
 * GPU described differently: each conflict is reported, and both orders
 * of the inputs give the same result (the later trial, the newer
 * description). */
static void test_merge_conflict_rule(void)
{
	const char *doc_path = kt_test_path("conflict.json");
	const char *a = kt_test_path("conflict-a.db"), *b = kt_test_path("conflict-b.db");
	const char *ab = kt_test_path("conflict-ab.db"), *ba = kt_test_path("conflict-ba.db");
	const char *nothing = kt_test_path("conflict-none.db");
	char *doc = gen_export("GPU-conflict", 4), *out = NULL, *bytes;
	const char *outs[2] = { ab, ba };
	long c1, c2;
	size_t n;
	int i;

	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(doc_path, doc, strlen(doc)), 0);
	free(doc);
	CU_ASSERT_EQUAL_FATAL(runv(&out, NULL, kt_test_ktune(), "import", "--db", a, doc_path, NULL), 0);
	free(out);
	/* b: a copy of a, then its trial 2 re-timed later and its GPU seen
	 * later with another driver */
	bytes = slurp(a, &n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
	CU_ASSERT_EQUAL_FATAL(kt_test_write_file(b, bytes, n), 0);
	free(bytes);
	CU_ASSERT_EQUAL_FATAL(raw_exec(b, "UPDATE trials SET median_us = 77.5, created = created + 60"
				       " WHERE id = 2; UPDATE devices SET driver = '999.9',"
				       " last_seen = last_seen + 60"), 0);
	/* a third input, a's twin imported apart */
	CU_ASSERT_EQUAL(runv(&out, NULL, kt_test_ktune(), "import", "--db", nothing, doc_path, NULL), 0);
	free(out);

	CU_ASSERT_EQUAL(merge_cli(ab, a, b, nothing, &c1), 0);
	CU_ASSERT_EQUAL(merge_cli(ba, b, a, nothing, &c2), 0);
	/* a vs b: the trial and the device; then the third input (a's
	 * twin, imported apart) meets them again */
	CU_ASSERT(c1 >= 2);
	CU_ASSERT(c2 >= 2);
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(raw_long(outs[i], "SELECT count(*) FROM trials"), 4);
		CU_ASSERT_DOUBLE_EQUAL(raw_double(outs[i], "SELECT median_us FROM trials t JOIN configs c"
						  " ON c.id = t.config_id JOIN sweeps s ON s.id = t.sweep_id"
						  " JOIN problems p ON p.id = s.problem_id"
						  " WHERE p.shape_key = 'tokens=32,in=4096,out=4096'"), 77.5, 1e-9);
		CU_ASSERT_EQUAL(raw_long(outs[i], "SELECT count(*) FROM devices WHERE driver = '999.9'"), 1);
	}
	/* the text names what conflicted and what was kept */
	CU_ASSERT_EQUAL(runv(&out, NULL, kt_test_ktune(), "merge", "-o", kt_test_path("conflict-t.db"),
			     a, b, NULL), 0);
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "conflict in trials: GPU-conflict dense tokens=32"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "kept    ok 77.500 us"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "conflict in devices: GPU-conflict"));
	CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "driver 999.9"));
	free(out);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	/* the slow-connection tests hold two descriptors per connection (both
	 * ends are in this process) */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
			if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < 2 * slow_conns + 400) {
				slow_conns = ((int)rl.rlim_cur - 400) / 2;
				fprintf(stderr, "open-file limit %ld: %d slow connections, not 1,100\n",
					(long)rl.rlim_cur, slow_conns);
			}
		}
	}
	s = CU_add_suite("second_writer", NULL, NULL);
	CU_add_test(s, "ktune import beside ktune serve: nothing lost, no 500", test_second_writer);
	s = CU_add_suite("readonly_db", NULL, NULL);
	CU_add_test(s, "a read-only database read by another user", test_readonly_db);
	s = CU_add_suite("unauthenticated_body", NULL, NULL);
	CU_add_test(s, "8 x 60 MiB without the token: refused from the headers", test_unauthenticated_body);
	s = CU_add_suite("slow_connections", NULL, NULL);
	CU_add_test(s, "1,100 unfinished requests from one address", test_slow_one_address);
	CU_add_test(s, "1,100 trickling connections from 20 addresses", test_slow_many_addresses);
	CU_add_test(s, "an import waiting for the write lock holds no pool thread",
		    test_import_off_thread);
	s = CU_add_suite("many_arguments", NULL, NULL);
	CU_add_test(s, "700 arguments, repeated keys, NULs, odd tokens, batch types", test_many_arguments);
	s = CU_add_suite("merge_conflicts", NULL, NULL);
	CU_add_test(s, "three imports of one file merge into one sweep each", test_merge_same_import);
	CU_add_test(s, "conflicts are reported and resolved the same in either order",
		    test_merge_conflict_rule);
	s = CU_add_suite("import", NULL, NULL);
	CU_add_test(s, "4,000 entries in linear time", test_import_linear);
	return kt_test_main();
}
