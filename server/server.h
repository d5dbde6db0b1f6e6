/*
 * server.h -- `ktune serve`: the HTTP API over a ktune database.
 *
 * libmicrohttpd with an internal thread pool; every pool thread keeps its
 * own read-only store connection and its own winners table (lookup.h), so
 * reads never wait for each other nor for the writer. Writes (starting a
 * sweep, importing) need the bearer token kept in a 0600 file beside the
 * database (created on first start); sweeps run in the job runner
 * (jobs.h), never in a request handler. Every error is a JSON body
 * {"error": {"code", "message"}} with the HTTP status of its kt_errcode.
 *
 * A database this process may not write (another user's file, a read-only
 * directory or mount) is served read-only: writes answer 409.
 *
 * Routes (described in server/openapi.json, served at /v1/openapi.json):
 *   GET  /v1/health, /v1/devices, /v1/families, /v1/families/NAME
 *   GET  /v1/best?family=&device=&arch=&<dim>=...   POST /v1/best:batch
 *   GET  /v1/sweeps   POST /v1/sweeps (token)   GET /v1/sweeps/ID
 *   GET  /v1/sweeps/ID/trials   GET /v1/winners
 *   GET  /v1/export?format=json|c|cuda   POST /v1/import (token)
 *   GET  /metrics (Prometheus text)   GET / (dashboard)   GET /static/chart.js
 */
#ifndef KT_SERVER_H
#define KT_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "../util/err.h"
#include "jobs.h"

struct serve_opts {
	const char *db_path;	/* required; created (empty) when missing */
	const char *listen;	/* "HOST:PORT", ":PORT" or "PORT"; NULL: 127.0.0.1:8080;
				 * port 0 picks a free one (server_port()) */
	int threads;		/* pool threads; 0: one per core */
	const char *token_path;	/* NULL: DB_PATH.token */
	const char *chartjs_path;	/* NULL: Debian's libjs-chart.js file */
	const char *exe;	/* ktune binary for sweep workers (NULL: /proc/self/exe) */
	const char *seed_json;	/* export JSON imported when the database has no
				 * winners (the shipped H200 results); NULL: none */
	size_t body_cap;	/* request body cap in bytes; 0: 1 MiB (imports: 64 MiB) */
	int quiet;		/* no startup lines on stderr */
	/* Connection limits (server_int.h); 0: the defaults. */
	int max_conns;		/* at once, all clients */
	int per_ip;		/* at once, from one address */
	double request_s;	/* a request must arrive whole within this */
	volatile sig_atomic_t *stop;	/* serve_main returns when *stop != 0;
					 * NULL: on SIGINT / SIGTERM */
	job_run_fn job_run;	/* runs a sweep job; NULL: jobs_run_sweep (tests
				 * plug in their own) */
	void *job_arg;
};

struct server;

/* Opens the database, the token and the listening socket and starts the
 * pool and the job runner. */
int server_start(const struct serve_opts *o, struct server **out, struct kt_err *err);
/* Checks that the --listen address parses and its port is free (binds and
 * lets go), for a command that would do other work before serving. */
int server_listen_probe(const char *listen, struct kt_err *err);
/* The bound port (useful with port 0). */
int server_port(const struct server *s);
/* The bearer token writes need ("" on a read-only server). */
const char *server_token(const struct server *s);
/* 1 when the database is read-only for this process (store_writable): the
 * server then answers reads only, and needs and creates no token. */
int server_readonly(const struct server *s);
/* Stops listening, waits for the handlers and the job runner, frees. */
void server_stop(struct server *s);

/* server_start, then wait for *o->stop or a signal, then server_stop. */
int serve_main(const struct serve_opts *o, struct kt_err *err);

/* Reads the token at path, or creates it (32 random hex digits, mode
 * 0600) when absent. A token file readable by others is refused. */
int server_token_load(const char *path, char *out, size_t len, struct kt_err *err);

#endif
