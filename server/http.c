/*
 * http.c -- the daemon: libmicrohttpd with an internal thread pool, request
 * bodies in capped buffers, JSON replies, the token, per-thread stores.
 * It serves the route table it is started with (srv_http_start) and knows
 * no handler by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../db/store.h"
#include "import.h"
#include "server_int.h"
#include "../util/clock.h"

const int srv_codes[SRV_NCODES] = { 200, 202, 400, 401, 404, 405, 409, 413, 500, 503, 0, -1 };

/* ---- token ---- */

int server_token_load(const char *path, char *out, size_t len, struct kt_err *err)
{
	unsigned char raw[16];
	struct stat sb;
	char buf[80];
	int fd = -1, rfd = -1, rc = -1, i;
	ssize_t n;

	if (len < 33)
		return kt_err_set(err, KT_EINTERNAL, "token buffer too small");
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
		if (fstat(fd, &sb) != 0) {
			kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
			goto out;
		}
		/* A token others can read is no secret: refuse rather than
		 * guard writes with it. */
		if (sb.st_mode & 077) {
			kt_err_set(err, KT_EIO, "%s is readable by others (mode %03o): chmod 600 it",
				   path, (unsigned)(sb.st_mode & 0777));
			goto out;
		}
		n = read(fd, buf, sizeof(buf) - 1);
		if (n < 0) {
			kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
			goto out;
		}
		buf[n] = 0;
		buf[strcspn(buf, "\r\n \t")] = 0;
		if (strlen(buf) < 16 || strlen(buf) >= len) {
			kt_err_set(err, KT_EIO, "%s: not a ktune token (16 to 64 characters)", path);
			goto out;
		}
		snprintf(out, len, "%s", buf);
		rc = 0;
		goto out;
	}
	if (errno != ENOENT) {
		kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) < 0 ||
	    read(rfd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
		kt_err_set(err, KT_EIO, "/dev/urandom: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	/* O_EXCL: two servers starting at once must not overwrite each
	 * other's token; the loser reads the winner's. */
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		if (errno == EEXIST)
			rc = server_token_load(path, out, len, err);
		else
			kt_err_set(err, KT_EIO, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	snprintf(buf, sizeof(buf), "%s\n", out);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf)) {
		kt_err_set(err, KT_EIO, "%s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rfd >= 0)
		close(rfd);
	return rc;
}

static enum MHD_Result count_auth(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	(void)kind;
	(void)value;
	if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
		(*(int *)cls)++;
	return MHD_YES;
}

int srv_authorized(struct request *rq)
{
	const char *h = NULL, *tok = rq->srv->token;
	size_t n = strlen(tok), hlen = 0, i;
	unsigned char diff = 0;
	int count = 0;

	/* The header's whole length: a NUL inside it ("Bearer TOKEN\0junk")
	 * must not cut it to the token. Two Authorization headers are refused
	 * rather than one picked. */
	if (!n || MHD_lookup_connection_value_n(rq->conn, MHD_HEADER_KIND,
						MHD_HTTP_HEADER_AUTHORIZATION,
						strlen(MHD_HTTP_HEADER_AUTHORIZATION), &h,
						&hlen) != MHD_YES || !h)
		return 0;
	MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, count_auth, &count);
	if (count != 1 || hlen != 7 + n || strncmp(h, "Bearer ", 7) != 0)
		return 0;
#if MHD_VERSION < 0x01000000
	/* libmicrohttpd 0.9 parses header lines in place, turning the CR LF
	 * that ends each line into two NULs, and gives a value that holds a
	 * NUL only up to it: "Bearer TOKEN\0junk" reads as the token. The
	 * value is taken only when its line ended right after it (1.0 refuses
	 * such lines itself). A line ended by a bare LF is refused too. */
	if (h[hlen] != 0 || h[hlen + 1] != 0)
		return 0;
#endif
	h += 7;
	/* Constant time: the answer's timing says nothing about a prefix. */
	for (i = 0; i < n; i++)
		diff |= (unsigned char)(h[i] ^ tok[i]);
	return diff == 0;
}

/* ---- per-thread stores ---- */

void srv_cache_clear(struct srv_tls *t)
{
	int i;

	for (i = 0; i < SRV_CACHE_SLOTS; i++) {
		free(t->cache[i].key);
		free(t->cache[i].body);
	}
	memset(t->cache, 0, sizeof(t->cache));
}

struct srv_tls *srv_tls_get(struct server *s, struct kt_err *err)
{
	struct srv_tls *t = pthread_getspecific(s->tls_key);

	if (!t) {
		if (!(t = calloc(1, sizeof(*t)))) {
			kt_err_set(err, KT_EINTERNAL, "out of memory");
			return NULL;
		}
		lookup_table_init(&t->table);
		t->seen_version = -2;
		if (store_open(s->db_path, STORE_RO, &t->st, err) < 0) {
			free(t);
			return NULL;
		}
		pthread_setspecific(s->tls_key, t);
		pthread_mutex_lock(&s->tls_mu);
		t->next = s->tls_list;
		s->tls_list = t;
		pthread_mutex_unlock(&s->tls_mu);
	} else if (store_stale(t->st)) {
		/* A database read without locks changed under us: its
		 * connection sees none of it, so take a new one. */
		struct store *fresh = NULL;

		if (store_open(s->db_path, STORE_RO, &fresh, err) < 0)
			return NULL;
		srv_cache_clear(t);
		lookup_table_release(&t->table);
		store_close(t->st);
		t->st = fresh;
		lookup_table_init(&t->table);
		atomic_fetch_add(&s->gen, 1);
	}
	if (lookup_table_load(&t->table, t->st, err) < 0)
		return NULL;
	if (t->table.data_version != t->seen_version) {
		t->seen_version = t->table.data_version;
		atomic_fetch_add(&s->gen, 1);
	}
	return t;
}

struct store *srv_writer_lock(struct server *s, struct kt_err *err)
{
	if (s->readonly) {
		kt_err_set(err, KT_ECONFLICT, "%s is read-only for this server: writes are off",
			   s->db_path);
		return NULL;
	}
	pthread_mutex_lock(&s->write_mu);
	if (!s->writer && store_open(s->db_path, STORE_RW, &s->writer, err) < 0) {
		pthread_mutex_unlock(&s->write_mu);
		return NULL;
	}
	return s->writer;
}

void srv_writer_unlock(struct server *s)
{
	pthread_mutex_unlock(&s->write_mu);
}

const char *srv_arg(struct request *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- connections and their deadline ---- */

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct srv_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* The current request needs no deadline any more (exempt 1), or a new one
 * begins now (0). */
static void conn_mark(struct server *s, struct MHD_Connection *conn, int exempt)
{
	struct srv_conn *c = conn_of(conn);

	if (!c)
		return;
	pthread_mutex_lock(&s->conn_mu);
	c->exempt = exempt;
	if (!exempt)
		c->since = mono_s();
	pthread_mutex_unlock(&s->conn_mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct server *s = cls;
	struct srv_conn *c = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (!ci || !(c = calloc(1, sizeof(*c))))
			return;	/* untracked: only the idle timeout applies */
		c->fd = ci->connect_fd;
		c->since = mono_s();
		pthread_mutex_lock(&s->conn_mu);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		pthread_mutex_unlock(&s->conn_mu);
		*socket_context = c;
		return;
	}
	if (!c)
		return;
	/* MHD closes the socket after this returns, so the reaper, which
	 * shuts sockets down under the same lock, never touches a socket
	 * number that was reused. */
	pthread_mutex_lock(&s->conn_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&s->conn_mu);
	free(c);
	*socket_context = NULL;
}

/* Shuts down the connections whose request is late: MHD then reads the
 * end of the stream and closes them, freeing their slot. */
static void *reaper_main(void *arg)
{
	struct server *s = arg;
	/* a fifth of the deadline, at most 200 ms */
	double t = s->request_s / 5 < 0.2 ? s->request_s / 5 : 0.2;
	const struct timespec tick = { 0, (long)(t * 1e9) };

	while (!atomic_load(&s->stopping)) {
		double now = mono_s();
		struct srv_conn *c;

		pthread_mutex_lock(&s->conn_mu);
		for (c = s->conns; c; c = c->next)
			if (!c->exempt && !c->reaped && now - c->since > s->request_s) {
				shutdown(c->fd, SHUT_RDWR);
				c->reaped = 1;
				atomic_fetch_add(&s->reaped, 1);
			}
		pthread_mutex_unlock(&s->conn_mu);
		nanosleep(&tick, NULL);
	}
	return NULL;
}

/* libmicrohttpd's own messages are about clients (a connection limit
 * reached, a malformed request): any client could fill the log with
 * them, and every error of ours is reported by the server itself. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	(void)fmt;
	(void)ap;
}

/* ---- requests ---- */

static int route_find(const struct server *s, const char *url, const char **tail)
{
	int i;

	for (i = 0; i < s->nroutes; i++) {
		const char *p = s->routes[i].path;
		size_t n = strlen(p);

		if (p[n - 1] == '/' && n > 1) {
			if (strncmp(url, p, n) == 0 && url[n]) {
				*tail = url + n;
				return i;
			}
		} else if (strcmp(url, p) == 0) {
			*tail = "";
			return i;
		}
	}
	return -1;
}

/* Drops what the reply owns (json, text, its blob reference) and leaves
 * the three NULL. */
static void reply_release(struct reply *r)
{
	json_decref(r->json);
	r->json = NULL;
	free(r->text);
	r->text = NULL;
	srv_blob_unref(r->blob);
	r->blob = NULL;
}

static void reply_error(struct reply *out, const struct kt_err *err)
{
	int status = kt_errcode_http(err->code);

	reply_release(out);
	out->status = status;
	out->json = json_pack("{s:{s:s,s:s,s:i}}", "error", "code", kt_errcode_name(err->code),
			      "message", err->msg, "status", status);
	if (!out->json) {
		/* The message quotes the request, which may not be UTF-8:
		 * JSON strings must be, so send it with such bytes as '?'. */
		char msg[sizeof(err->msg)];
		size_t i;

		for (i = 0; i < sizeof(msg) - 1 && err->msg[i]; i++)
			msg[i] = (unsigned char)err->msg[i] < 0x20 || (unsigned char)err->msg[i] >= 0x7f ?
				 '?' : err->msg[i];
		msg[i] = 0;
		out->json = json_pack("{s:{s:s,s:s,s:i}}", "error", "code",
				      kt_errcode_name(err->code), "message", msg, "status", status);
	}
}

static int code_bucket(int status)
{
	int i;

	for (i = 0; i < SRV_NCODES - 2; i++)
		if (srv_codes[i] == status)
			return i;
	return SRV_NCODES - 1;
}

struct srv_blob *srv_blob_new(const char *data, size_t len)
{
	struct srv_blob *b = malloc(sizeof(*b) + len + 1);

	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	memcpy(b->data, data, len);
	b->data[len] = 0;
	return b;
}

void srv_blob_unref(struct srv_blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

static void blob_done(void *cls)
{
	srv_blob_unref(cls);
}

static enum MHD_Result send_reply(struct request *rq, struct reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *body;
	size_t len;
	const char *ctype;

	if (r->blob && !r->json) {
		/* the reply's reference goes to MHD, which drops it when sent */
		resp = MHD_create_response_from_buffer_with_free_callback_cls(
			r->blob->len, r->blob->data, blob_done, r->blob);
		if (!resp)
			return MHD_NO;
		r->blob = NULL;
		ctype = r->ctype ? r->ctype : "application/octet-stream";
		goto headers;
	}
	if (r->json) {
		body = json_dumps(r->json, JSON_COMPACT);
		if (!body)
			return MHD_NO;
		len = strlen(body);
		ctype = "application/json";
	} else {
		body = r->text ? r->text : strdup("");
		r->text = NULL;
		len = body ? r->len : 0;
		ctype = r->ctype ? r->ctype : "text/plain; charset=utf-8";
		if (!body)
			return MHD_NO;
	}
	/* MUST_FREE hands the buffer to MHD, which free()s it. */
	resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
headers:
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (r->allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
	if (r->status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	ret = MHD_queue_response(rq->conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	atomic_fetch_add(&rq->srv->requests[rq->route + 1][code_bucket(r->status)], 1);
	return ret;
}

static unsigned method_bit(const char *m)
{
	if (strcmp(m, MHD_HTTP_METHOD_GET) == 0 || strcmp(m, MHD_HTTP_METHOD_HEAD) == 0)
		return SRV_METHOD_GET;
	if (strcmp(m, MHD_HTTP_METHOD_POST) == 0)
		return SRV_METHOD_POST;
	return 0;
}

/* Everything a request needs before it may run: known route, allowed
 * method, token, body within its cap. 0 when it may run. */
static int admit(struct request *rq, struct reply *out, struct kt_err *err)
{
	unsigned m = method_bit(rq->method);
	const struct route *rt;

	if (rq->route < 0)
		return kt_err_set(err, KT_ENOTFOUND, "no route %s %s (see /v1/openapi.json)",
				  rq->method, rq->url);
	rt = &rq->srv->routes[rq->route];
	if (!(m & rt->methods)) {
		out->allow = rt->allow;
		kt_err_set(err, KT_EINVAL, "method %s not allowed on %s (allowed: %s)",
			   rq->method, rq->url, rt->allow);
		return -2;
	}
	if ((m & rt->auth) && rq->srv->readonly)
		return kt_err_set(err, KT_ECONFLICT,
				  "%s %s: the database %s is read-only for this server (reads only)",
				  rq->method, rq->url, rq->srv->db_path);
	if ((m & rt->auth) && !srv_authorized(rq))
		return kt_err_set(err, KT_EAUTH,
				  "%s %s needs 'Authorization: Bearer TOKEN' (the token is in %s)",
				  rq->method, rq->url, rq->srv->token_path);
	if (rq->too_big)
		return kt_err_set(err, KT_ETOOBIG, "request body over %zu bytes", rq->limit);
	return 0;
}

/* Called with the request line's URI before libmicrohttpd parses its
 * query (MHD_OPTION_URI_LOG_CALLBACK); what it returns is the request's
 * con_cls. libmicrohttpd 0.9.75 keeps each argument in the connection's
 * 32 KiB pool and, when the pool runs out, queues a 431 but then waits for
 * headers it will never read: 500 arguments and the client got no answer
 * at all. A query over SRV_MAX_ARGS is therefore cut here, before the
 * parse, at its '?' (the URI is libmicrohttpd's own read buffer, which it
 * parses in place right after this call), and answered 400. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct request *rq = calloc(1, sizeof(*rq));
	const char *q = uri ? strchr(uri, '?') : NULL;

	(void)conn;
	if (!rq)
		return NULL;
	rq->srv = cls;
	if (q) {
		const char *p;
		int n = 1;

		for (p = q + 1; *p; p++)
			n += *p == '&';
		if (n > SRV_MAX_ARGS) {
			rq->nargs_over = n;
			((char *)q)[1] = 0;
		}
	}
	return rq;
}

struct arg_check {
	const char *allowed;	/* the route's arguments; NULL: any */
	const char *keys[SRV_MAX_ARGS];
	size_t lens[SRV_MAX_ARGS];
	int n;
	struct kt_err *err;
};

/* 1 when name (of len bytes) is a word of the space-separated list. */
static int arg_listed(const char *list, const char *name, size_t len)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, " ");

		if (n == len && memcmp(p, name, len) == 0)
			return 1;
		p += n;
		p += *p == ' ';
	}
	return 0;
}

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				 size_t key_size, const char *value, size_t value_size)
{
	struct arg_check *c = cls;
	int i;

	(void)kind;
	if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
		kt_err_set(c->err, KT_EINVAL, "query argument '%.*s' holds a NUL byte",
			   (int)strnlen(key, 64), key);
		return MHD_NO;
	}
	if (!key_size || !value || !value_size) {
		kt_err_set(c->err, KT_EINVAL, "query argument '%.64s' is empty", key);
		return MHD_NO;
	}
	if (c->allowed && !arg_listed(c->allowed, key, key_size)) {
		if (*c->allowed)
			kt_err_set(c->err, KT_EINVAL, "unknown query argument '%.64s' (this route takes: %s)",
				   key, c->allowed);
		else
			kt_err_set(c->err, KT_EINVAL, "unknown query argument '%.64s' (this route takes none)",
				   key);
		return MHD_NO;
	}
	for (i = 0; i < c->n; i++)
		if (c->lens[i] == key_size && memcmp(c->keys[i], key, key_size) == 0) {
			kt_err_set(c->err, KT_EINVAL, "query argument '%.64s' is given more than once",
				   key);
			return MHD_NO;
		}
	if (c->n == SRV_MAX_ARGS) {
		kt_err_set(c->err, KT_EINVAL, "more than %d query arguments", SRV_MAX_ARGS);
		return MHD_NO;
	}
	c->keys[c->n] = key;
	c->lens[c->n++] = key_size;
	return MHD_YES;
}

/* The query as a whole: not too many arguments, only those the route
 * takes, none empty (a name without a value says nothing), none twice (the handlers read one value per name, so a second
 * would be silently dropped), no NUL inside one (it would cut the value
 * short). 0, or -1 with err. */
static int query_check(struct request *rq, struct kt_err *err)
{
	struct arg_check c;

	if (rq->nargs_over)
		return kt_err_set(err, KT_EINVAL, "%d query arguments; at most %d",
				  rq->nargs_over, SRV_MAX_ARGS);
	memset(&c, 0, sizeof(c));
	c.err = err;
	c.allowed = rq->route >= 0 ? rq->srv->routes[rq->route].args : NULL;
	MHD_get_connection_values_n(rq->conn, MHD_GET_ARGUMENT_KIND, check_arg, &c);
	return err->code != KT_OK ? -1 : 0;
}

/* Sends what a handler answered: out, or err's JSON when rc < 0. */
static enum MHD_Result answer(struct request *rq, struct reply *out, struct kt_err *err, int rc)
{
	enum MHD_Result ret;

	if (rc < 0) {
		if (err->code == KT_OK)
			kt_err_set(err, KT_EINTERNAL, "handler failed without a reason");
		reply_error(out, err);
		/* kt_errcode has no "wrong method": say it here. */
		if (rc == -2) {
			json_t *e = json_object_get(out->json, "error");

			out->status = 405;
			json_object_set_new(e, "status", json_integer(405));
			json_object_set_new(e, "code", json_string("method_not_allowed"));
		}
	}
	ret = send_reply(rq, out);
	reply_release(out);
	return ret;
}

static void *slow_main(void *arg)
{
	struct request *rq = arg;
	struct server *s = rq->srv;

	rq->async_out.status = 200;
	rq->async_rc = s->routes[rq->route].fn(rq, &rq->async_out, &rq->async_err);
	rq->done = 1;
	/* MHD calls on_request again, which sends the answer; nothing here
	 * touches rq after this */
	MHD_resume_connection(rq->conn);
	pthread_mutex_lock(&s->slow_mu);
	s->nslow--;
	pthread_cond_broadcast(&s->slow_cv);
	pthread_mutex_unlock(&s->slow_mu);
	return NULL;
}

/* Runs rq's handler on a thread of its own and suspends its connection;
 * 0, or -1 with err set when it cannot (too many running, stopping). */
static int slow_start(struct request *rq, struct kt_err *err)
{
	struct server *s = rq->srv;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	pthread_mutex_lock(&s->slow_mu);
	if (atomic_load(&s->stopping) || s->nslow >= SRV_SLOW_MAX) {
		pthread_mutex_unlock(&s->slow_mu);
		return kt_err_set(err, KT_ECONFLICT, "%s %s: %d are running already; try again",
				  rq->method, rq->url, SRV_SLOW_MAX);
	}
	s->nslow++;
	pthread_mutex_unlock(&s->slow_mu);
	/* suspended before the thread can resume it */
	MHD_suspend_connection(rq->conn);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &attr, slow_main, rq);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		MHD_resume_connection(rq->conn);
		pthread_mutex_lock(&s->slow_mu);
		s->nslow--;
		pthread_cond_broadcast(&s->slow_cv);
		pthread_mutex_unlock(&s->slow_mu);
		return kt_err_set(err, KT_EINTERNAL, "cannot start a thread for %s", rq->url);
	}
	return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct server *s = cls;
	struct request *rq = *con_cls;
	struct reply out = { 0 };
	struct kt_err err = { 0 };
	int rc;

	if (!rq || !rq->started) {
		if (!rq && !(rq = calloc(1, sizeof(*rq))))
			return MHD_NO;
		rq->started = 1;
		rq->srv = s;
		rq->conn = conn;
		rq->method = method;
		rq->url = url;
		rq->route = route_find(s, url, &rq->tail);
		rq->limit = rq->route >= 0 && s->routes[rq->route].body_cap ?
			    s->routes[rq->route].body_cap : s->body_cap;
		*con_cls = rq;
		atomic_fetch_add(&s->in_flight, 1);
		/* Every request is answered on a later call, once MHD has read
		 * all of it: an answer queued on the first call makes MHD
		 * close the connection after it (no keep-alive), which costs
		 * a TCP handshake per request. */
		/* A body announced far over the cap is refused before it is
		 * read (MHD then closes the connection); one just over it is
		 * read and dropped, so that the client surely sees the 413. */
		{
			const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						MHD_HTTP_HEADER_CONTENT_LENGTH);

			if (cl && strtoull(cl, NULL, 10) / 16 > rq->limit) {
				rq->too_big = 1;
				goto process;
			}
		}
		if (query_check(rq, &err) < 0)
			goto process;
		/* A write's token is checked from its headers, before one byte
		 * of its body is read: without it the answer goes out now (and
		 * MHD closes the connection) instead of after buffering up to
		 * the cap -- 64 MiB per connection for an import. */
		if (rq->route >= 0 && (method_bit(method) & s->routes[rq->route].auth)) {
			if (s->readonly || !srv_authorized(rq))
				goto process;
			/* a trusted writer may upload slowly */
			conn_mark(s, conn, 1);
		}
		return MHD_YES;
	}
	if (rq->done) {
		/* resumed: the slow handler has answered */
		rq->done = 0;
		out = rq->async_out;
		memset(&rq->async_out, 0, sizeof(rq->async_out));
		return answer(rq, &out, &rq->async_err, rq->async_rc);
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		/* A capped buffer: past the cap the rest is read and dropped,
		 * so the client gets a 413 rather than a reset. */
		if (!rq->too_big && rq->len + n > rq->limit) {
			rq->too_big = 1;
			free(rq->body);
			rq->body = NULL;
			rq->len = rq->cap = 0;
		}
		if (!rq->too_big) {
			if (rq->len + n + 1 > rq->cap) {
				size_t cap = rq->cap ? rq->cap : 4096;
				char *nb;

				while (cap < rq->len + n + 1)
					cap *= 2;
				if (!(nb = realloc(rq->body, cap)))
					return MHD_NO;
				rq->body = nb;
				rq->cap = cap;
			}
			memcpy(rq->body + rq->len, upload_data, n);
			rq->len += n;
			rq->body[rq->len] = 0;
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
process:
	conn_mark(s, conn, 1);
	out.status = 200;
	rc = err.code != KT_OK ? -1 : admit(rq, &out, &err);
	if (rc == 0 && s->routes[rq->route].slow) {
		if ((rc = slow_start(rq, &err)) == 0)
			return MHD_YES;	/* answered after the resume */
	} else if (rc == 0) {
		rc = s->routes[rq->route].fn(rq, &out, &err);
	}
	return answer(rq, &out, &err, rc);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *rq = *con_cls;

	/* the next request on a kept-alive connection has its own deadline */
	conn_mark(s, conn, 0);
	if (!rq)
		return;
	reply_release(&rq->async_out);
	free(rq->body);
	if (rq->started)
		atomic_fetch_sub(&s->in_flight, 1);
	free(rq);
	*con_cls = NULL;
}

/* ---- start / stop ---- */

static int parse_listen(const char *text, struct sockaddr_in *sa, struct kt_err *err)
{
	char host[64] = "127.0.0.1";
	const char *colon = text ? strrchr(text, ':') : NULL;
	const char *port = text;
	char *end;
	long p;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!text || !*text)
		port = "8080";
	else if (colon) {
		size_t n = colon - text;

		if (n >= sizeof(host))
			return kt_err_set(err, KT_EINVAL, "--listen: host too long");
		if (n) {
			memcpy(host, text, n);
			host[n] = 0;
		}
		if (strcmp(host, "localhost") == 0)
			snprintf(host, sizeof(host), "127.0.0.1");
		port = colon + 1;
	}
	errno = 0;
	p = strtol(port, &end, 10);
	if (!*port || *end || errno || p < 0 || p > 65535)
		return kt_err_set(err, KT_EINVAL, "--listen '%s': want HOST:PORT, :PORT or PORT",
				  text);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return kt_err_set(err, KT_EINVAL, "--listen: '%s' is not an IPv4 address", host);
	sa->sin_port = htons((unsigned short)p);
	return 0;
}

static void tls_free_all(struct server *s)
{
	struct srv_tls *t = s->tls_list, *next;

	for (; t; t = next) {
		next = t->next;
		srv_cache_clear(t);
		lookup_table_release(&t->table);
		store_close(t->st);
		free(t);
	}
	s->tls_list = NULL;
}

/* The shipped results go into an empty database on first start. */
static int seed(struct server *s, json_t *doc, const char *path, struct kt_err *err)
{
	struct store_winner *w = NULL;
	struct store *st;
	int n = 0, i, rc = -1;

	if (!(st = srv_writer_lock(s, err)))
		return -1;
	if (store_winners_list(st, NULL, NULL, NULL, &w, &n, err) < 0)
		goto out;
	if (n == 0) {
		struct import_stats stats;

		if (import_json(st, doc, &stats, err) < 0)
			goto out;
		if (!s->quiet)
			fprintf(stderr, "ktune serve: loaded %d results from %s\n",
				stats.entries_added, path);
	}
	rc = 0;
out:
	for (i = 0; i < n; i++)
		store_winner_release(&w[i]);
	free(w);
	srv_writer_unlock(s);
	return rc;
}

/* The listening socket, bound here rather than by libmicrohttpd so that
 * a port in use gets one clear message (and none of the library's). */
static int listen_socket(const struct sockaddr_in *sa, struct kt_err *err)
{
	char a[32];
	int fd, one = 1, e;

	inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return kt_err_set(err, KT_EIO, "cannot make a socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 || listen(fd, 1024) != 0) {
		e = errno;
		close(fd);
		if (e == EADDRINUSE)
			return kt_err_set(err, KT_EIO,
					  "cannot listen on %s:%d: the port is in use (another ktune serve?); "
					  "pick another with --listen HOST:PORT", a, ntohs(sa->sin_port));
		if (e == EADDRNOTAVAIL)
			return kt_err_set(err, KT_EIO,
					  "cannot listen on %s:%d: not an address of this machine; "
					  "pick another with --listen HOST:PORT", a, ntohs(sa->sin_port));
		return kt_err_set(err, KT_EIO, "cannot listen on %s:%d: %s; pick another with "
				  "--listen HOST:PORT", a, ntohs(sa->sin_port), strerror(e));
	}
	return fd;
}

/* The connection limits of o, or the defaults, within what the open-file
 * limit leaves (each connection is a descriptor; the database, the jobs
 * and the worker need some). */
static void conn_limits(struct server *s, const struct serve_opts *o)
{
	struct rlimit rl;
	long room = SRV_MAX_CONNS;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		room = (long)rl.rlim_cur - 64 - 8L * s->threads;
	s->max_conns = o->max_conns > 0 ? o->max_conns : SRV_MAX_CONNS;
	if (s->max_conns > room)
		s->max_conns = room > 16 ? (int)room : 16;
	s->per_ip = o->per_ip > 0 ? o->per_ip : SRV_PER_IP;
	if (s->per_ip > s->max_conns)
		s->per_ip = s->max_conns;
	s->request_s = o->request_s > 0 ? o->request_s : SRV_REQUEST_S;
}

int srv_http_start(const struct serve_opts *o, const struct route *routes, int nroutes,
		   struct server **out, struct kt_err *err)
{
	struct server *s;
	struct sockaddr_in sa;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	json_t *seed_doc = NULL;
	int lfd = -1;

	*out = NULL;
	if (nroutes < 1 || nroutes >= SRV_MAX_ROUTES)
		return kt_err_set(err, KT_EINTERNAL, "%d routes (1 to %d)", nroutes,
				  SRV_MAX_ROUTES - 1);
	if (!o->db_path || !*o->db_path)
		return kt_err_set(err, KT_EINVAL, "no database path");
	if (parse_listen(o->listen, &sa, err) < 0)
		return -1;
	if (!(s = calloc(1, sizeof(*s))))
		return kt_err_set(err, KT_EINTERNAL, "out of memory");
	s->routes = routes;
	s->nroutes = nroutes;
	snprintf(s->db_path, sizeof(s->db_path), "%s", o->db_path);
	if (o->token_path)
		snprintf(s->token_path, sizeof(s->token_path), "%s", o->token_path);
	else
		snprintf(s->token_path, sizeof(s->token_path), "%s.token", o->db_path);
	snprintf(s->chartjs_path, sizeof(s->chartjs_path), "%s",
		 o->chartjs_path ? o->chartjs_path : SRV_CHARTJS);
	snprintf(s->exe, sizeof(s->exe), "%s", o->exe ? o->exe : "/proc/self/exe");
	s->body_cap = o->body_cap ? o->body_cap : SRV_BODY_CAP;
	s->threads = o->threads > 0 ? o->threads : (cores > 0 ? (int)cores : 2);
	s->quiet = o->quiet;
	s->started = kt_unix_s();
	pthread_mutex_init(&s->tls_mu, NULL);
	pthread_mutex_init(&s->write_mu, NULL);
	pthread_mutex_init(&s->conn_mu, NULL);
	pthread_mutex_init(&s->slow_mu, NULL);
	pthread_cond_init(&s->slow_cv, NULL);
	pthread_mutex_init(&s->export_mu, NULL);
	pthread_mutex_init(&s->export_build_mu, NULL);
	if (pthread_key_create(&s->tls_key, NULL) != 0) {
		pthread_mutex_destroy(&s->export_mu);
		pthread_mutex_destroy(&s->export_build_mu);
		pthread_mutex_destroy(&s->slow_mu);
		pthread_cond_destroy(&s->slow_cv);
		pthread_mutex_destroy(&s->tls_mu);
		pthread_mutex_destroy(&s->write_mu);
		pthread_mutex_destroy(&s->conn_mu);
		free(s);
		return kt_err_set(err, KT_EINTERNAL, "pthread_key_create failed");
	}
	/* What can fail without writing anything goes first, so that a port
	 * in use or a bad seed file leaves no new database or token behind. */
	if ((lfd = listen_socket(&sa, err)) < 0)
		goto fail;
	if (o->seed_json && import_json_file_load(o->seed_json, &seed_doc, err) < 0)
		goto fail;
	/* A database others keep (a shared results file, a read-only mount)
	 * is served as it is: readers only, no token. */
	s->readonly = access(s->db_path, F_OK) == 0 && !store_writable(s->db_path);
	if (s->readonly) {
		struct store *probe = NULL;

		/* refused here, as a writer would refuse it, when it is not a
		 * ktune database */
		if (store_open(s->db_path, STORE_RO, &probe, err) < 0)
			goto fail;
		store_close(probe);
	} else {
		/* The writer creates (or migrates) the database before any
		 * reader opens it read-only. */
		if (!srv_writer_lock(s, err))
			goto fail;
		srv_writer_unlock(s);
		if (seed_doc && seed(s, seed_doc, o->seed_json, err) < 0)
			goto fail;
		if (server_token_load(s->token_path, s->token, sizeof(s->token), err) < 0)
			goto fail;
	}
	if (jobs_start(o->job_run ? o->job_run : jobs_run_sweep, o->job_arg, &s->jobs, err) < 0)
		goto fail;
	conn_limits(s, o);
	if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
		kt_err_set(err, KT_EINTERNAL, "cannot start the connection reaper thread");
		goto fail;
	}
	s->reaper_started = 1;
	{
		/* An options array, so that one thread means no pool at all
		 * (MHD warns about a pool of one). */
		struct MHD_OptionItem ops[] = {
			{ MHD_OPTION_LISTEN_SOCKET, lfd, NULL },
			{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s },
			{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s },
			{ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, s },
			{ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, s },
			{ MHD_OPTION_CONNECTION_LIMIT, s->max_conns, NULL },
			{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->per_ip, NULL },
			{ MHD_OPTION_CONNECTION_TIMEOUT, SRV_IDLE_S, NULL },
			{ s->threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
			  s->threads, NULL },
			{ MHD_OPTION_END, 0, NULL },
		};

		s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
					  MHD_ALLOW_SUSPEND_RESUME,
					  0, NULL, NULL, on_request, s,
					  MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
	}
	if (!s->mhd) {
		kt_err_set(err, KT_EINTERNAL, "libmicrohttpd could not start on %s:%d",
			   inet_ntoa(sa.sin_addr), ntohs(sa.sin_port));
		goto fail;
	}
	json_decref(seed_doc);
	/* the port chosen for port 0 */
	{
		struct sockaddr_in bound;
		socklen_t blen = sizeof(bound);

		s->port = getsockname(lfd, (struct sockaddr *)&bound, &blen) == 0 ?
			  ntohs(bound.sin_port) : ntohs(sa.sin_port);
	}
	inet_ntop(AF_INET, &sa.sin_addr, s->host, sizeof(s->host));
	*out = s;
	return 0;
fail:
	/* MHD closes the listening socket it was given, once started */
	if (lfd >= 0 && !s->mhd)
		close(lfd);
	json_decref(seed_doc);
	server_stop(s);
	return -1;
}

int server_listen_probe(const char *listen, struct kt_err *err)
{
	struct sockaddr_in sa;
	int fd;

	if (parse_listen(listen, &sa, err) < 0 || (fd = listen_socket(&sa, err)) < 0)
		return -1;
	close(fd);
	return 0;
}

int server_port(const struct server *s)
{
	return s->port;
}

const char *server_token(const struct server *s)
{
	return s->token;
}

int server_readonly(const struct server *s)
{
	return s->readonly;
}

void server_stop(struct server *s)
{
	int i;

	if (!s)
		return;
	/* No new slow handler starts; the running ones finish and resume
	 * their connections (MHD may not stop with one suspended). */
	pthread_mutex_lock(&s->slow_mu);
	atomic_store(&s->stopping, 1);
	while (s->nslow > 0)
		pthread_cond_wait(&s->slow_cv, &s->slow_mu);
	pthread_mutex_unlock(&s->slow_mu);
	if (s->reaper_started)
		pthread_join(s->reaper, NULL);
	/* Stop the handlers first: they may queue jobs and use the writer. */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	jobs_stop(s->jobs);
	tls_free_all(s);
	store_close(s->writer);
	pthread_key_delete(s->tls_key);
	pthread_mutex_destroy(&s->tls_mu);
	pthread_mutex_destroy(&s->write_mu);
	pthread_mutex_destroy(&s->conn_mu);
	pthread_mutex_destroy(&s->slow_mu);
	pthread_cond_destroy(&s->slow_cv);
	for (i = 0; i < SRV_EXPORT_SLOTS; i++)
		srv_blob_unref(s->exports[i].blob);
	pthread_mutex_destroy(&s->export_mu);
	pthread_mutex_destroy(&s->export_build_mu);
	free(s);
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	(void)sig;
	got_signal = 1;
}

int srv_http_main(const struct serve_opts *o, const struct route *routes, int nroutes,
		  struct kt_err *err)
{
	volatile sig_atomic_t *stop = o->stop ? o->stop : &got_signal;
	struct sigaction sa, old_int, old_term;
	struct server *s;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	got_signal = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	/* A client closing its socket mid-reply must not kill the server. */
	signal(SIGPIPE, SIG_IGN);
	/* Every connection is a descriptor: take all the process may have
	 * (the soft limit is often 1,024, the hard one far more). */
	{
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (srv_http_start(o, routes, nroutes, &s, err) < 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGTERM, &old_term, NULL);
		return -1;
	}
	if (!o->quiet) {
		fprintf(stderr, "ktune serve: http://%s:%d/ (database %s, %d threads)\n",
			s->host, s->port, s->db_path, s->threads);
		if (s->readonly)
			fprintf(stderr, "ktune serve: %s is read-only here: serving reads only\n",
				s->db_path);
		else
			fprintf(stderr, "ktune serve: writes need the token in %s\n", s->token_path);
	}
	while (!*stop && !got_signal)
		usleep(100 * 1000);
	server_stop(s);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return 0;
}
