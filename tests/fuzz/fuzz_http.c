/*
 * fuzz_http.c -- libFuzzer target: one raw HTTP/1.1 exchange with the real
 * server, in process. Each input is written as the bytes a client sent on
 * a fresh connection (handed to libmicrohttpd with MHD_add_connection over
 * a socketpair), then the write side is shut and the answer read to its
 * end: request line, headers, query, routes, bodies and handlers all run,
 * on a small database of its own. "@TOKEN@" in an input becomes the
 * server's token, so the seeds reach the guarded writes too; sweeps go to
 * a job function that does nothing (no worker process is started).
 *
 * Built and run by tools/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/import.h"
#include "server/server.h"
#include "server/server_int.h"

static struct server *srv;

static int job_nothing(struct job_runner *r, int id, const struct job_spec *spec, void *arg,
		       struct kt_err *err)
{
	(void)r;
	(void)id;
	(void)spec;
	(void)arg;
	return kt_err_set(err, KT_ENOGPU, "fuzzing: no sweep runs");
}

static const char seed_doc[] =
	"{\"format\":\"ktune-export\",\"version\":1,\"devices\":[{\"name\":\"NVIDIA H200\","
	"\"uuid\":\"GPU-fuzz\",\"arch\":\"sm_90\",\"sms\":132,\"l2_bytes\":62914560,"
	"\"smem_optin\":232448}],\"entries\":[{\"device\":\"GPU-fuzz\",\"family\":\"dense\","
	"\"shape_key\":\"tokens=1024,in=4096,out=4096\",\"config_key\":"
	"\"variant=wgmma_ws,BLOCK_M=256,BLOCK_N=128,STAGES=4,GROUP_M=1,CONSUMERS=2\","
	"\"median_us\":47.7,\"sweep\":{\"strategy\":\"exhaustive\",\"started\":1.7e9}}]}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/ktune-fuzz-http-XXXXXX", db[64], doc[64];
	struct serve_opts o;
	struct kt_err err = { 0 };
	FILE *f;

	(void)argc;
	(void)argv;
	if (!mkdtemp(dir))
		abort();
	snprintf(db, sizeof(db), "%s/f.db", dir);
	snprintf(doc, sizeof(doc), "%s/seed.json", dir);
	if (!(f = fopen(doc, "w")) || fputs(seed_doc, f) < 0 || fclose(f) != 0)
		abort();
	memset(&o, 0, sizeof(o));
	o.db_path = db;
	o.listen = "127.0.0.1:0";
	o.threads = 1;
	o.quiet = 1;
	o.seed_json = doc;
	o.job_run = job_nothing;
	/* a request that never ends (one libFuzzer cut short) is shut in
	 * 0.1 s, not the server's default 10 s */
	o.request_s = 0.1;
	o.chartjs_path = doc;	/* a small file: /static/chart.js answers */
	if (server_start(&o, &srv, &err) < 0) {
		fprintf(stderr, "fuzz_http: %s\n", err.msg);
		abort();
	}
	return 0;
}

/* The input with every "@TOKEN@" replaced by the token. */
static char *with_token(const uint8_t *data, size_t size, size_t *len)
{
	const char *tok = server_token(srv);
	size_t tl = strlen(tok), i, n = 0;
	char *out = malloc(size / 7 * tl + size + 1);

	if (!out)
		abort();
	for (i = 0; i < size; i++) {
		if (size - i >= 7 && memcmp(data + i, "@TOKEN@", 7) == 0) {
			memcpy(out + n, tok, tl);
			n += tl;
			i += 6;
		} else {
			out[n++] = (char)data[i];
		}
	}
	*len = n;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint32_t peers;
	struct sockaddr_in peer;
	char buf[65536], *req;
	size_t len, off = 0;
	int sv[2], eof = 0, idle = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	/* a new address each time: a connection the server still holds (see
	 * below) must not count against the next one's per-address limit */
	memset(&peer, 0, sizeof(peer));
	peer.sin_family = AF_INET;
	peer.sin_addr.s_addr = htonl(0x0a000000u | (++peers & 0xffffffu));
	peer.sin_port = htons(40000);
	/* MHD owns sv[0] from here, and closes it */
	if (MHD_add_connection(srv->mhd, sv[0], (struct sockaddr *)&peer, sizeof(peer)) != MHD_YES) {
		close(sv[1]);
		return 0;
	}
	req = with_token(data, size, &len);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (len == 0)
		shutdown(sv[1], SHUT_WR);
	/* write the request while reading what comes back (an early answer
	 * may arrive before the body is in), then read to the end. An input
	 * whose body ends short of its Content-Length is held by the server
	 * until a timeout, even after this end is shut: 300 ms without a byte
	 * once all is written and the exchange is over (the server frees the
	 * connection later). */
	while (!eof && idle < 30) {
		struct pollfd p = { sv[1], POLLIN | (off < len ? POLLOUT : 0), 0 };
		int r = poll(&p, 1, 10);

		if (r < 0 && errno != EINTR)
			break;
		idle = r == 0 && off == len ? idle + 1 : 0;
		if ((p.revents & POLLOUT) && off < len) {
			ssize_t k = send(sv[1], req + off, len - off, MSG_NOSIGNAL);

			if (k > 0)
				off += (size_t)k;
			else if (k < 0 && errno != EAGAIN)
				off = len;
			if (off == len)
				shutdown(sv[1], SHUT_WR);
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t k = recv(sv[1], buf, sizeof(buf), 0);

			if (k == 0 || (k < 0 && errno != EAGAIN))
				eof = 1;
		}
	}
	free(req);
	close(sv[1]);
	return 0;
}
