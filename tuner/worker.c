/*
 * worker.c -- the parent side of the isolated GPU worker.
 *
 * The parent never touches the driver. It execs the child, sends it
 * commands over a pipe and waits for each reply with poll() and a deadline,
 * so that a child that faults (EOF on the pipe), hangs (deadline) or reports
 * a poisoned context (reply with `fatal`) costs one candidate, never the
 * sweep: the child is killed, reaped and started again with the current
 * problem before worker_eval() returns.
 */
#include "worker.h"
#include "worker_int.h"

#include <errno.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../util/clock.h"
#include "../util/knobs.h"

#define WK_START_TIMEOUT_S 120.0	/* cuInit on a cold multi-GPU host is slow */
#define WK_SETUP_TIMEOUT_S 300.0	/* problem: host fill + the GPU reference */
#define WK_EXIT_WAIT_S 10.0	/* a child tearing down a poisoned context */
#define WK_RESTART_TRIES 3

struct worker {
	struct worker_opts o;
	char *exe;		/* owned copy of o.exe */
	pid_t pid;		/* 0: no child */
	int to_child, from_child;
	struct worker_device_info info;
	int restarts;
	void *problem;		/* payload of the current WK_MSG_PROBLEM, or NULL */
	size_t problem_len;
};

/* ---- wire I/O (shared with the child) ---- */

/* Waits until fd is ready for ev; 0, or -1 with errno (ETIMEDOUT). */
static int wk_wait(int fd, short ev, double deadline)
{
	for (;;) {
		struct pollfd p = { fd, ev, 0 };
		int ms = -1, r;

		if (deadline >= 0) {
			double left = deadline - kt_clock_s();

			if (left <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			ms = (int)(left * 1000.0) + 1;
		}
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;	/* POLLHUP/POLLERR too: the read or write says what */
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

static int wk_write_all(int fd, const void *buf, size_t len, double deadline)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t k = write(fd, p, len);

		if (k > 0) {
			p += k;
			len -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			if (wk_wait(fd, POLLOUT, deadline) != 0)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/* 0 ok; -1 with errno (0 at EOF). */
static int wk_read_all(int fd, void *buf, size_t len, double deadline)
{
	char *p = buf;

	while (len > 0) {
		ssize_t k = read(fd, p, len);

		if (k > 0) {
			p += k;
			len -= (size_t)k;
			continue;
		}
		if (k == 0) {
			errno = 0;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			if (wk_wait(fd, POLLIN, deadline) != 0)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

int wk_send(int fd, uint32_t type, const struct iovec *iov, int niov, double deadline)
{
	struct wk_hdr h = { WK_MAGIC, type, 0 };
	int i;

	for (i = 0; i < niov; i++)
		h.len += iov[i].iov_len;
	if (wk_write_all(fd, &h, sizeof(h), deadline) != 0)
		return -1;
	for (i = 0; i < niov; i++)
		if (iov[i].iov_len && wk_write_all(fd, iov[i].iov_base, iov[i].iov_len, deadline) != 0)
			return -1;
	return 0;
}

int wk_recv(int fd, uint32_t *type, void **payload, size_t *len, size_t max, double deadline)
{
	struct wk_hdr h;
	void *buf = NULL;

	*payload = NULL;
	*len = 0;
	if (wk_read_all(fd, &h, sizeof(h), deadline) != 0)
		return -1;
	if (h.magic != WK_MAGIC || h.len > max || h.len > WK_MAX_PAYLOAD) {
		errno = EPROTO;
		return -1;
	}
	if (h.len) {
		if (!(buf = malloc(h.len)))
			return -1;	/* errno ENOMEM */
		if (wk_read_all(fd, buf, h.len, deadline) != 0) {
			int e = errno;

			free(buf);
			errno = e;
			return -1;
		}
	}
	*type = h.type;
	*payload = buf;
	*len = h.len;
	return 0;
}

/* ---- small helpers ---- */

void worker_opts_default(struct worker_opts *o)
{
	const char *hc;

	memset(o, 0, sizeof(*o));
	o->backend = WORKER_BACKEND_CUDA;
	o->timeout_s = 30;
	o->warmup = 3;
	o->min_reps = 10;
	o->max_reps = 200;
	o->budget_ms = 400;
	o->stable_pct = 0.5;
	o->flush_l2 = 1;
	o->pdl = kt_knob_flag(KT_KNOB_PDL);
	hc = kt_knob_get(KT_KNOB_HOST_COMPARE);
	o->compare = hc && strcmp(hc, "1") == 0 ? WORKER_COMPARE_HOST :
		     hc && strcmp(hc, "0") == 0 ? WORKER_COMPARE_GPU : WORKER_COMPARE_AUTO;
}

const char *worker_compare_name(enum worker_compare c)
{
	switch (c) {
	case WORKER_COMPARE_AUTO: return "auto";
	case WORKER_COMPARE_GPU: return "gpu";
	case WORKER_COMPARE_HOST: return "host";
	}
	return "unknown";
}

int worker_compare_parse(const char *text, enum worker_compare *out)
{
	static const enum worker_compare all[] = { WORKER_COMPARE_AUTO, WORKER_COMPARE_GPU,
						   WORKER_COMPARE_HOST };
	size_t i;

	for (i = 0; text && i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(text, worker_compare_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	return -1;
}

const char *worker_status_name(enum worker_status s)
{
	switch (s) {
	case WORKER_OK: return "ok";
	case WORKER_WRONG: return "wrong";
	case WORKER_LAUNCH_ERROR: return "launch_error";
	case WORKER_FAULT: return "fault";
	case WORKER_TIMEOUT: return "timeout";
	}
	return "unknown";
}

static const char *signal_name(int sig, char *buf, size_t len)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev) {
		snprintf(buf, len, "SIG%s", abbrev);
		return buf;
	}
#endif
	snprintf(buf, len, "signal %d", sig);
	return buf;
}

static void describe_exit(int status, char *why, size_t len)
{
	char sig[32];

	if (WIFSIGNALED(status))
		snprintf(why, len, "child killed by %s",
			 signal_name(WTERMSIG(status), sig, sizeof(sig)));
	else if (WIFEXITED(status))
		snprintf(why, len, "child exited with status %d", WEXITSTATUS(status));
	else
		snprintf(why, len, "child stopped (status 0x%x)", (unsigned)status);
}

static void close_pipes(struct worker *w)
{
	if (w->to_child >= 0)
		close(w->to_child);
	if (w->from_child >= 0)
		close(w->from_child);
	w->to_child = w->from_child = -1;
}

/* Waits up to wait_s for the child to exit, then SIGKILLs it, and reaps it.
 * why (may be NULL) says how it ended. */
static void child_reap(struct worker *w, double wait_s, char *why, size_t whylen)
{
	double deadline = kt_clock_s() + wait_s;
	int status = 0, killed = 0;
	pid_t r;

	close_pipes(w);
	if (w->pid <= 0)
		return;
	for (;;) {
		r = waitpid(w->pid, &status, WNOHANG);
		if (r == w->pid || (r < 0 && errno != EINTR))
			break;
		if (r == 0 && !killed && kt_clock_s() >= deadline) {
			kill(w->pid, SIGKILL);
			killed = 1;
			/* A process inside the driver can take a while to die. */
			deadline = kt_clock_s() + 30;
		} else if (r == 0 && killed && kt_clock_s() >= deadline) {
			/* NEEDSWORK: left unreaped (a zombie until we exit); a
			 * child stuck in the kernel driver is all that gets here. */
			r = -1;
			break;
		}
		if (r == 0) {
			struct timespec ts = { 0, 2 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	if (why) {
		if (r == w->pid)
			describe_exit(status, why, whylen);
		else
			snprintf(why, whylen, "child %d could not be reaped", (int)w->pid);
	}
	w->pid = 0;
}

static void child_kill(struct worker *w)
{
	if (w->pid > 0)
		kill(w->pid, SIGKILL);
	child_reap(w, 30, NULL, 0);
}

/* ---- starting the child ---- */

static void ignore_sigpipe(void)
{
	struct sigaction sa;

	/* A dead child must show up as EPIPE, not kill us; keep a handler
	 * someone else installed. */
	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_IGN;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGPIPE, &sa, NULL);
	}
}

/* In the forked child: async-signal-safe calls only, then exec. */
static void child_exec(const char *exe, char *const argv[], int cmd_rd, int rep_wr, int err_wr,
		       pid_t parent)
{
	struct sigaction sa;
	struct rlimit nocore = { 0, 0 };
	sigset_t none;
	int a, b, e, null;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);	/* the parent died before prctl took effect */
	/* Move the pipes above the target numbers first so that dup2 cannot
	 * clobber one with the other. */
	a = fcntl(cmd_rd, F_DUPFD_CLOEXEC, 10);
	b = fcntl(rep_wr, F_DUPFD_CLOEXEC, 10);
	err_wr = fcntl(err_wr, F_DUPFD_CLOEXEC, 10);
	if (a < 0 || b < 0 || err_wr < 0 || dup2(a, WK_FD_CMD) < 0 || dup2(b, WK_FD_REPLY) < 0)
		goto fail;
	/* Stray prints of libraries must not mix with anything: stdout goes
	 * to stderr, stdin is empty. */
	dup2(2, 1);
	if ((null = open("/dev/null", O_RDONLY)) >= 0 && null != 0) {
		dup2(null, 0);
		close(null);
	}
	/* Nothing else of the parent's (its database, sockets) survives exec. */
	close_range(WK_FD_REPLY + 1, ~0u, CLOSE_RANGE_CLOEXEC);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* A faulting child is expected; do not litter core files. */
	setrlimit(RLIMIT_CORE, &nocore);
	execv(exe, argv);
fail:
	e = errno;
	if (err_wr >= 0 && write(err_wr, &e, sizeof(e)) < 0)
		_exit(126);
	_exit(127);
}

/* Forks and execs the child, then waits for its hello (device open). */
static int child_spawn(struct worker *w, struct kt_err *err)
{
	int cmd[2] = { -1, -1 }, rep[2] = { -1, -1 }, ee[2] = { -1, -1 };
	char dev[16], why[160];
	char *argv[] = { w->exe, "__worker", "--backend",
			 w->o.backend == WORKER_BACKEND_CPU ? "cpu" : "cuda", "--device", dev,
			 "--pdl", w->o.pdl ? "1" : "0",
			 "--compare", (char *)worker_compare_name(w->o.compare), NULL };
	struct wk_hello *hello = NULL;
	void *payload = NULL;
	size_t len = 0;
	uint32_t type = 0;
	pid_t parent = getpid(), pid;
	int rc = -1, child_errno = 0;
	ssize_t k;

	snprintf(dev, sizeof(dev), "%d", w->o.device);
	if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0 || pipe2(ee, O_CLOEXEC) != 0) {
		kt_err_set(err, KT_EIO, "worker: pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		kt_err_set(err, KT_EIO, "worker: fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		child_exec(w->exe, argv, cmd[0], rep[1], ee[1], parent);
	w->pid = pid;
	w->to_child = cmd[1];
	w->from_child = rep[0];
	cmd[1] = rep[0] = -1;
	/* Only the child may hold these ends, or its death would go unseen
	 * (no EOF, no EPIPE). */
	close(cmd[0]);
	close(rep[1]);
	close(ee[1]);
	cmd[0] = rep[1] = ee[1] = -1;
	/* Closed by a successful exec: 0 bytes; an errno when exec failed. */
	do
		k = read(ee[0], &child_errno, sizeof(child_errno));
	while (k < 0 && errno == EINTR);
	if (k == (ssize_t)sizeof(child_errno)) {
		child_reap(w, 5, NULL, 0);
		kt_err_set(err, KT_EIO, "worker: cannot run %s: %s", w->exe, strerror(child_errno));
		goto out;
	}
	if (fcntl(w->to_child, F_SETFL, O_NONBLOCK) != 0 ||
	    fcntl(w->from_child, F_SETFL, O_NONBLOCK) != 0) {
		kt_err_set(err, KT_EIO, "worker: fcntl: %s", strerror(errno));
		child_kill(w);
		goto out;
	}
	if (wk_recv(w->from_child, &type, &payload, &len, sizeof(*hello),
		    kt_clock_s() + WK_START_TIMEOUT_S) != 0) {
		int e = errno;

		if (e == ETIMEDOUT) {
			child_kill(w);
			kt_err_set(err, KT_EIO, "worker: %s did not open device %d within %.0f s",
				   w->exe, w->o.device, WK_START_TIMEOUT_S);
		} else {
			child_reap(w, WK_EXIT_WAIT_S, why, sizeof(why));
			kt_err_set(err, KT_EIO, "worker: %s __worker ended before opening the device (%s)",
				   w->exe, e == 0 ? why : strerror(e));
		}
		goto out;
	}
	hello = payload;
	if (type != WK_MSG_HELLO || len != sizeof(*hello)) {
		child_kill(w);
		kt_err_set(err, KT_EINTERNAL, "worker: bad hello from the child (type %u, %zu bytes)",
			   type, len);
		goto out;
	}
	if (hello->rc != 0) {
		hello->msg[sizeof(hello->msg) - 1] = 0;
		child_reap(w, WK_EXIT_WAIT_S, NULL, 0);
		kt_err_set(err, hello->code > KT_OK && hello->code <= KT_EINTERNAL ?
			   (enum kt_errcode)hello->code : KT_EINTERNAL, "%s", hello->msg);
		goto out;
	}
	w->info = hello->info;
	w->info.name[sizeof(w->info.name) - 1] = 0;
	w->info.uuid[sizeof(w->info.uuid) - 1] = 0;
	{
		int major = 0, minor = 0;

		/* NVRTC is the parent's (it compiles); the child never loads it. */
		if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
			snprintf(w->info.nvrtc, sizeof(w->info.nvrtc), "%d.%d", major, minor);
	}
	rc = 0;
out:
	free(payload);
	if (cmd[0] >= 0)
		close(cmd[0]);
	if (cmd[1] >= 0)
		close(cmd[1]);
	if (rep[0] >= 0)
		close(rep[0]);
	if (rep[1] >= 0)
		close(rep[1]);
	if (ee[0] >= 0)
		close(ee[0]);
	if (ee[1] >= 0)
		close(ee[1]);
	return rc;
}

/* ---- one command, one reply ---- */

enum call_outcome {
	CALL_REPLY = 0,		/* *rep is valid */
	CALL_DIED,		/* the child ended (or broke the protocol); reaped */
	CALL_TIMEOUT,		/* no reply by the deadline; killed and reaped */
	CALL_UNSENT,		/* the child was already gone: nothing was started */
};

static enum call_outcome child_call(struct worker *w, uint32_t type, const struct iovec *iov,
				    int niov, double timeout_s, struct wk_reply *rep,
				    char *why, size_t whylen)
{
	double deadline = kt_clock_s() + timeout_s;
	void *payload = NULL;
	uint32_t rtype = 0;
	size_t len = 0;

	if (w->pid <= 0) {
		snprintf(why, whylen, "no child running");
		return CALL_UNSENT;
	}
	if (wk_send(w->to_child, type, iov, niov, deadline) != 0) {
		if (errno == ETIMEDOUT) {
			child_kill(w);
			snprintf(why, whylen, "child did not take the command within %.1f s; killed",
				 timeout_s);
			return CALL_TIMEOUT;
		}
		child_reap(w, WK_EXIT_WAIT_S, why, whylen);
		return CALL_UNSENT;
	}
	if (wk_recv(w->from_child, &rtype, &payload, &len, sizeof(*rep), deadline) != 0) {
		int e = errno;

		if (e == ETIMEDOUT) {
			child_kill(w);
			snprintf(why, whylen, "no answer within %.1f s; child killed", timeout_s);
			return CALL_TIMEOUT;
		}
		if (e == 0) {
			child_reap(w, WK_EXIT_WAIT_S, why, whylen);
		} else {
			child_kill(w);
			snprintf(why, whylen, "reading the child's reply: %s", strerror(e));
		}
		return CALL_DIED;
	}
	if (rtype != WK_MSG_REPLY || len != sizeof(*rep)) {
		free(payload);
		child_kill(w);
		snprintf(why, whylen, "bad reply from the child (type %u, %zu bytes)", rtype, len);
		return CALL_DIED;
	}
	memcpy(rep, payload, sizeof(*rep));
	free(payload);
	rep->msg[sizeof(rep->msg) - 1] = 0;
	rep->res.message[sizeof(rep->res.message) - 1] = 0;
	return CALL_REPLY;
}

/* Sends the stored problem to a fresh child. */
static int problem_resend(struct worker *w, struct kt_err *err)
{
	struct iovec iov = { w->problem, w->problem_len };
	struct wk_reply rep;
	char why[256];

	switch (child_call(w, WK_MSG_PROBLEM, &iov, 1, WK_SETUP_TIMEOUT_S, &rep, why, sizeof(why))) {
	case CALL_REPLY:
		if (rep.rc == 0)
			return 0;
		if (rep.fatal)
			child_reap(w, WK_EXIT_WAIT_S, NULL, 0);
		return kt_err_set(err, rep.code ? (enum kt_errcode)rep.code : KT_EINTERNAL,
				  "re-creating the problem: %s", rep.msg);
	default:
		return kt_err_set(err, KT_EIO, "re-creating the problem: %s", why);
	}
}

/* Replaces a dead or killed child: a new one with the device open and the
 * current problem loaded. Gives up after WK_RESTART_TRIES in a row. */
static int worker_restart(struct worker *w, struct kt_err *err)
{
	struct kt_err last = { 0 };
	int i;

	if (w->pid > 0)
		child_kill(w);
	for (i = 0; i < WK_RESTART_TRIES; i++) {
		kt_err_clear(&last);
		if (child_spawn(w, &last) == 0 && (!w->problem || problem_resend(w, &last) == 0)) {
			w->restarts++;
			return 0;
		}
		if (w->pid > 0)
			child_kill(w);
	}
	return kt_err_set(err, last.code ? last.code : KT_EINTERNAL,
			  "worker: restart failed %d times in a row: %s", WK_RESTART_TRIES, last.msg);
}

/* Restarts the child if it died while idle (killed from outside, OOM). */
static int worker_ensure_alive(struct worker *w, struct kt_err *err)
{
	int status;

	if (w->pid > 0) {
		pid_t r = waitpid(w->pid, &status, WNOHANG);

		if (r == 0)
			return 0;
		/* Gone (r == pid: reaped now; r < 0: someone else reaped it). */
		close_pipes(w);
		w->pid = 0;
	}
	return worker_restart(w, err);
}

/* ---- the public functions ---- */

int worker_start(const struct worker_opts *o, struct worker **out, struct kt_err *err)
{
	struct worker *w = NULL;
	int rc = -1;

	*out = NULL;
	if (!o || !o->exe || !*o->exe) {
		kt_err_set(err, KT_EINVAL, "worker: no executable given for the worker child");
		goto out;
	}
	if (!(w = calloc(1, sizeof(*w))) || !(w->exe = strdup(o->exe))) {
		kt_err_set(err, KT_EINTERNAL, "worker: out of memory");
		goto out;
	}
	w->o = *o;
	w->o.exe = w->exe;
	w->to_child = w->from_child = -1;
	if (w->o.timeout_s <= 0)
		w->o.timeout_s = 30;
	if (w->o.warmup <= 0)
		w->o.warmup = 3;
	if (w->o.min_reps <= 0)
		w->o.min_reps = 10;
	if (w->o.max_reps <= 0)
		w->o.max_reps = 200;
	if (w->o.max_reps > MEASURE_MAX_REPS)
		w->o.max_reps = MEASURE_MAX_REPS;
	if (w->o.min_reps > w->o.max_reps)
		w->o.min_reps = w->o.max_reps;
	if (w->o.budget_ms <= 0)
		w->o.budget_ms = 400;
	if (w->o.stable_pct <= 0)
		w->o.stable_pct = 0.5;
	ignore_sigpipe();
	if (child_spawn(w, err) != 0)
		goto out;
	*out = w;
	w = NULL;
	rc = 0;
out:
	worker_stop(w);
	return rc;
}

void worker_stop(struct worker *w)
{
	if (!w)
		return;
	if (w->pid > 0 && wk_send(w->to_child, WK_MSG_QUIT, NULL, 0, kt_clock_s() + 1) == 0)
		child_reap(w, 5, NULL, 0);
	else
		child_kill(w);
	free(w->problem);
	free(w->exe);
	free(w);
}

int worker_info(struct worker *w, struct worker_device_info *out)
{
	if (!w || !out)
		return -1;
	*out = w->info;
	return 0;
}

int worker_restarts(struct worker *w)
{
	return w ? w->restarts : 0;
}

int worker_pid(struct worker *w)
{
	return w ? (int)w->pid : 0;
}

static void timing_of(const struct worker *w, struct measure_timing *t)
{
	memset(t, 0, sizeof(*t));
	t->warmup = w->o.warmup;
	t->min_reps = w->o.min_reps;
	t->max_reps = w->o.max_reps;
	t->flush_l2 = w->o.flush_l2;
	t->budget_ms = w->o.budget_ms;
	t->stable_pct = w->o.stable_pct;
}

/* Fixed part plus one iovec per cubin; checks the plan's program count. */
static int cubin_iov(const struct kt_plan *p, const void *const *cubins, const size_t *lens,
		     uint64_t out_lens[KT_MAX_PROGRAMS], struct iovec *iov, struct kt_err *err)
{
	int i;

	if (p->nprograms < 0 || p->nprograms > KT_MAX_PROGRAMS)
		return kt_err_set(err, KT_EINVAL, "worker: plan has %d programs", p->nprograms);
	for (i = 0; i < KT_MAX_PROGRAMS; i++)
		out_lens[i] = 0;
	for (i = 0; i < p->nprograms; i++) {
		if (!cubins || !lens) {
			out_lens[i] = 0;
			iov[i].iov_base = NULL;
			iov[i].iov_len = 0;
			continue;
		}
		if (lens[i] && !cubins[i])
			return kt_err_set(err, KT_EINVAL, "worker: cubin %d missing", i);
		out_lens[i] = lens[i];
		iov[i].iov_base = (void *)cubins[i];
		iov[i].iov_len = lens[i];
	}
	return 0;
}

int worker_problem(struct worker *w, const struct kt_family *f, const struct kt_shape *s,
		   uint64_t seed, const struct kt_plan *ref_plan,
		   const void *const *ref_cubins, const size_t *ref_lens, struct kt_err *err)
{
	struct iovec iov[KT_MAX_PROGRAMS];
	struct wk_problem *pb = NULL;
	struct wk_reply rep;
	char why[256];
	size_t total, off;
	int i, rc = -1;

	if (!w || !f || !s) {
		kt_err_set(err, KT_EINVAL, "worker_problem: missing argument");
		goto out;
	}
	if (strlen(f->name) >= KT_NAME_MAX) {
		kt_err_set(err, KT_EINVAL, "worker_problem: family name too long");
		goto out;
	}
	/* The payload is kept whole so that a restarted child gets it again. */
	{
		struct kt_plan empty;
		uint64_t lens[KT_MAX_PROGRAMS];

		memset(&empty, 0, sizeof(empty));
		if (!ref_plan)
			ref_plan = &empty;
		if (cubin_iov(ref_plan, ref_cubins, ref_lens, lens, iov, err) != 0)
			goto out;
		total = sizeof(*pb);
		for (i = 0; i < ref_plan->nprograms; i++)
			total += iov[i].iov_len;
		if (total > WK_MAX_PAYLOAD) {
			kt_err_set(err, KT_ETOOBIG, "worker_problem: reference cubins too large");
			goto out;
		}
		if (!(pb = calloc(1, total))) {
			kt_err_set(err, KT_EINTERNAL, "worker_problem: out of memory");
			goto out;
		}
		snprintf(pb->family, sizeof(pb->family), "%s", f->name);
		pb->shape = *s;
		pb->seed = seed;
		pb->plan = *ref_plan;
		memcpy(pb->lens, lens, sizeof(lens));
		off = sizeof(*pb);
		for (i = 0; i < ref_plan->nprograms; i++) {
			if (iov[i].iov_len)
				memcpy((char *)pb + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
	}
	/* The old problem is gone either way: a failed setup leaves none. */
	free(w->problem);
	w->problem = NULL;
	w->problem_len = 0;
	if (worker_ensure_alive(w, err) != 0)
		goto out;
	{
		struct iovec one = { pb, total };

		switch (child_call(w, WK_MSG_PROBLEM, &one, 1, WK_SETUP_TIMEOUT_S, &rep, why,
				   sizeof(why))) {
		case CALL_REPLY:
			if (rep.fatal)
				child_reap(w, WK_EXIT_WAIT_S, NULL, 0);
			if (rep.rc != 0) {
				kt_err_set(err, rep.code ? (enum kt_errcode)rep.code : KT_EINTERNAL,
					   "%s", rep.msg);
				break;
			}
			w->problem = pb;
			w->problem_len = total;
			pb = NULL;
			rc = 0;
			break;
		default:
			kt_err_set(err, KT_EIO, "worker: setting up %s: %s", f->name, why);
			break;
		}
	}
	/* Leave a live child behind for the next call, also after a failure. */
	if (w->pid <= 0 && worker_restart(w, rc == 0 ? err : NULL) != 0)
		rc = -1;
out:
	free(pb);
	return rc;
}

/* Runs one command whose reply carries a worker_result; shared by eval and
 * baseline. A candidate that kills or hangs the child becomes its result. */
static int result_call(struct worker *w, uint32_t type, struct iovec *iov, int niov,
		       double timeout_s, struct worker_result *res, struct kt_err *err)
{
	struct wk_reply rep;
	char why[256];
	int tries;

	memset(res, 0, sizeof(*res));
	res->rel_err = -1;
	for (tries = 0; tries < 2; tries++) {
		if (worker_ensure_alive(w, err) != 0)
			return -1;
		switch (child_call(w, type, iov, niov, timeout_s, &rep, why, sizeof(why))) {
		case CALL_REPLY:
			if (rep.fatal)
				child_reap(w, WK_EXIT_WAIT_S, NULL, 0);
			if (rep.rc < 0) {
				kt_err_set(err, rep.code ? (enum kt_errcode)rep.code : KT_EINTERNAL,
					   "%s", rep.msg);
				if (w->pid <= 0)
					worker_restart(w, NULL);
				return -1;
			}
			*res = rep.res;
			if (w->pid <= 0 && worker_restart(w, err) != 0)
				return -1;
			return rep.rc;
		case CALL_DIED:
			res->status = WORKER_FAULT;
			snprintf(res->message, sizeof(res->message), "%s", why);
			return worker_restart(w, err) == 0 ? 0 : -1;
		case CALL_TIMEOUT:
			res->status = WORKER_TIMEOUT;
			snprintf(res->message, sizeof(res->message), "%s", why);
			return worker_restart(w, err) == 0 ? 0 : -1;
		case CALL_UNSENT:
			/* Died before taking the command: not the candidate's
			 * doing; start a new child and send it once more. */
			continue;
		}
	}
	return kt_err_set(err, KT_EIO, "worker: the child keeps dying before taking a command");
}

int worker_eval(struct worker *w, const struct kt_config *c, const struct kt_plan *p,
		const void *const *cubins, const size_t *lens, double timeout_s,
		struct worker_result *res, struct kt_err *err)
{
	struct iovec iov[1 + KT_MAX_PROGRAMS];
	struct wk_eval ev;

	if (!w || !c || !p || !res)
		return kt_err_set(err, KT_EINVAL, "worker_eval: missing argument");
	if (!w->problem)
		return kt_err_set(err, KT_EINVAL, "worker_eval: no problem set (worker_problem first)");
	memset(&ev, 0, sizeof(ev));
	ev.cfg = *c;
	ev.plan = *p;
	timing_of(w, &ev.timing);
	if (cubin_iov(p, cubins, lens, ev.lens, iov + 1, err) != 0)
		return -1;
	iov[0].iov_base = &ev;
	iov[0].iov_len = sizeof(ev);
	if (timeout_s <= 0)
		timeout_s = w->o.timeout_s;
	return result_call(w, WK_MSG_EVAL, iov, 1 + p->nprograms, timeout_s, res, err);
}

int worker_baseline(struct worker *w, const char *name, struct worker_result *res,
		    struct kt_err *err)
{
	struct iovec iov;
	struct wk_baseline b;

	if (!w || !name || !res)
		return kt_err_set(err, KT_EINVAL, "worker_baseline: missing argument");
	if (!w->problem)
		return kt_err_set(err, KT_EINVAL, "worker_baseline: no problem set");
	if (strlen(name) >= sizeof(b.name))
		return kt_err_set(err, KT_EINVAL, "worker_baseline: name too long");
	memset(&b, 0, sizeof(b));
	snprintf(b.name, sizeof(b.name), "%s", name);
	timing_of(w, &b.timing);
	iov.iov_base = &b;
	iov.iov_len = sizeof(b);
	/* cuBLAS's first call loads kernels and picks heuristics: give it time. */
	return result_call(w, WK_MSG_BASELINE, &iov, 1,
			   w->o.timeout_s > 60 ? w->o.timeout_s : 60, res, err);
}
