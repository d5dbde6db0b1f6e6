/*
 * server_int.h -- what http.c (the daemon, requests, replies) and routes.c
 * (the handlers and their table) share. Private to server/. The arrow runs
 * one way: routes.c calls http.c, which reaches the handlers only through
 * the table it was started with.
 */
#ifndef KT_SERVER_INT_H
#define KT_SERVER_INT_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../db/store.h"
#include "jobs.h"
#include "lookup.h"
#include "server.h"

#define SRV_BODY_CAP (1u << 20)		/* default request body cap */
#define SRV_IMPORT_CAP (64u << 20)	/* POST /v1/import carries a whole export */
#define SRV_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"

/* Connections. A client that trickles its request a byte at a time holds
 * a slot as long as it likes unless something ends it: the whole request
 * (head, and the body of anything but an authorized write) must arrive
 * within SRV_REQUEST_S of the connection's start or of its previous
 * answer; one address holds at most SRV_PER_IP connections; the server at
 * most SRV_MAX_CONNS, fewer when the open-file limit is lower. */
#define SRV_MAX_CONNS 4096
#define SRV_PER_IP 64
#define SRV_REQUEST_S 10
#define SRV_IDLE_S 10		/* a connection quiet this long is closed */

/* One open connection, for the request deadline (http.c). */
struct srv_conn {
	struct srv_conn *prev, *next;
	int fd;
	double since;		/* when its current request began */
	int exempt;		/* whole, answering, or an authorized write */
	int reaped;		/* shut down for missing its deadline */
};

/* Answers of GET /v1/best already serialized, per thread, keyed by the
 * normalized query; dropped whenever the winners table reloads. */
#define SRV_CACHE_SLOTS 512
struct srv_cached {
	uint64_t hash;
	char *key;
	char *body;
	size_t len;
};

/* Per pool thread: a read-only connection and the winners parsed from it. */
struct srv_tls {
	struct store *st;
	struct lookup_table table;
	int64_t seen_version;		/* table.data_version when gen was last bumped */
	int64_t cache_version;		/* table.data_version the cache belongs to */
	struct srv_cached cache[SRV_CACHE_SLOTS];
	struct srv_tls *next;
};
/* Drops every cached answer of the thread (http.c, when its connection is
 * replaced; routes.c, when the winners table reloaded). */
void srv_cache_clear(struct srv_tls *t);

/* Bytes shared by the export cache and the replies that send them: the
 * last reference dropped frees them. */
struct srv_blob {
	atomic_int refs;
	size_t len;
	char data[];
};
struct srv_blob *srv_blob_new(const char *data, size_t len);
void srv_blob_unref(struct srv_blob *b);

/* GET /v1/export answers from here: a few exports (format, device,
 * family) built once per change of the database and shared by every
 * thread; one is built at a time, so asking for exports costs the
 * server at most one core whatever the number of clients. */
#define SRV_EXPORT_SLOTS 8
#define SRV_EXPORT_BYTES (256u << 20)	/* cached bytes at most */
struct srv_export_slot {
	int fmt;
	char device[128], family[32];
	long gen;			/* server.gen it was built at */
	unsigned long used;		/* LRU tick */
	struct srv_blob *blob;
};

enum { SRV_METHOD_GET = 1, SRV_METHOD_POST = 2 };

struct reply {
	int status;
	json_t *json;		/* owned; sent compact */
	char *text;		/* owned (malloc); or NULL */
	size_t len;
	const char *ctype;	/* for text or blob */
	const char *allow;	/* 405: the Allow header */
	struct srv_blob *blob;	/* one reference, sent without a copy; or NULL */
};

/* Query arguments a request may carry: a legitimate one has a dozen. */
#define SRV_MAX_ARGS 64

struct request {
	struct server *srv;
	int started;		/* on_request's first call has run */
	int nargs_over;		/* arguments counted when over SRV_MAX_ARGS */
	struct MHD_Connection *conn;
	const char *method, *url;
	int route;		/* index in srv->routes; -1 unknown */
	const char *tail;	/* what a prefix route matched after its prefix */
	char *body;
	size_t len, cap, limit;
	int too_big;
	struct srv_tls *tls;
	/* a slow route's handler runs on its own thread (http.c): what it
	 * answered, kept for the call that follows the resume */
	int done;
	int async_rc;
	struct reply async_out;
	struct kt_err async_err;
};

struct route {
	const char *path;	/* exact, or a prefix when it ends with '/' */
	unsigned methods;	/* SRV_METHOD_* */
	unsigned auth;		/* methods that need the bearer token */
	size_t body_cap;	/* 0: the server's default */
	const char *allow;	/* the Allow header for 405 */
	int (*fn)(struct request *rq, struct reply *out, struct kt_err *err);
	/* 1: fn may take seconds (an import): it runs on a thread of its own
	 * while the connection is suspended, so that the pool thread goes on
	 * serving its other connections */
	int slow;
	/* The query arguments it takes, space-separated ("" none); NULL: any
	 * (its handler checks them, as /v1/best does its shape's dims). An
	 * argument a route does not take is a 400, not silently ignored. */
	const char *args;
};

/* Slow handlers running at once; more answer 409. */
#define SRV_SLOW_MAX 4

/* The API's routes (routes.c), and how many; fewer than SRV_MAX_ROUTES. */
extern const struct route srv_routes[];
extern const int srv_nroutes;
#define SRV_MAX_ROUTES 64	/* server.requests' rows, less the unknown route's */

/* Buckets of /metrics' request counter. */
#define SRV_NCODES 12
extern const int srv_codes[SRV_NCODES];

struct server {
	char db_path[1024];
	char token_path[1040];
	char chartjs_path[1024];
	char exe[1024];
	char token[65];
	char host[64];		/* the address listened on */
	size_t body_cap;
	int threads;
	int port;
	int quiet;
	int readonly;		/* the database is not writable here: reads only */
	double started;
	struct MHD_Daemon *mhd;
	struct job_runner *jobs;
	pthread_key_t tls_key;
	pthread_mutex_t tls_mu;
	struct srv_tls *tls_list;
	pthread_mutex_t write_mu;	/* one writer: imports */
	struct store *writer;
	const struct route *routes;	/* the table it serves, nroutes of them */
	int nroutes;
	atomic_long requests[SRV_MAX_ROUTES][SRV_NCODES];	/* [route + 1][code bucket] */
	atomic_long in_flight;
	atomic_long reaped;		/* connections that missed the deadline */
	int max_conns, per_ip;
	double request_s;
	pthread_mutex_t conn_mu;	/* conns and their fields */
	struct srv_conn *conns;
	pthread_t reaper;
	int reaper_started;
	atomic_int stopping;
	/* Bumped by a thread that sees the database changed (its connection's
	 * data_version moved): whatever was built before is stale. */
	atomic_long gen;
	pthread_mutex_t export_mu;	/* exports[] */
	pthread_mutex_t export_build_mu;	/* one export built at a time */
	struct srv_export_slot exports[SRV_EXPORT_SLOTS];
	unsigned long export_tick;
	atomic_long export_builds;	/* exports built (the rest came from the cache) */
	pthread_mutex_t slow_mu;	/* nslow, and stopping for new ones */
	pthread_cond_t slow_cv;
	int nslow;			/* slow handlers running */
};

/* server_start and serve_main (server.h) for the table routes[0..nroutes):
 * http.c's entry points; routes.c passes srv_routes. */
int srv_http_start(const struct serve_opts *o, const struct route *routes, int nroutes,
		   struct server **out, struct kt_err *err);
int srv_http_main(const struct serve_opts *o, const struct route *routes, int nroutes,
		  struct kt_err *err);

/* This thread's read-only store and winners table, current with the db. */
struct srv_tls *srv_tls_get(struct server *s, struct kt_err *err);
/* The writer connection, locked: call srv_writer_unlock() after. */
struct store *srv_writer_lock(struct server *s, struct kt_err *err);
void srv_writer_unlock(struct server *s);

/* A query argument or NULL. */
const char *srv_arg(struct request *rq, const char *name);
/* 1 when the request carries the server's bearer token. */
int srv_authorized(struct request *rq);

#endif
