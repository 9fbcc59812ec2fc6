// SPDX-License-Identifier: MIT
/*
 * librdmad against a fake daemon: a forked child that listens on a
 * socket in a temporary directory and plays a script of the protocol
 * (proto/PROTOCOL.md). Every test counts /proc/self/fd and looks for the
 * fake daemon's memfds in /proc/self/maps before and after, so that a
 * failed attach that leaves an fd or a mapping behind fails the test.
 * The child reports through its exit status whether the client said
 * what it should (e.g. DETACH after a failed attach).
 *
 * The local-mode success test needs an RDMA device (tests/vm/run) and
 * is skipped without one.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <infiniband/verbs.h>

#include "proto.h"
#include "rdmad.h"
#include "rdmad_internal.h"
#include "util.h"

#define MEMFD_NAME "librdmad-test-mem"

/* ---- what the client process holds ---- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own */
}

/* Mappings of the fake daemon's memfds in this process. */
static int count_test_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, MEMFD_NAME))
			n++;
	fclose(f);
	return n;
}

/* ---- the fake daemon (runs in the child: no cmocka asserts there) ---- */

/* Exit codes of the child, to tell the parent what went wrong. */
enum {
	FAKE_OK = 0,
	FAKE_RECV = 10,	      /* proto_recv failed */
	FAKE_UNEXPECTED = 11, /* a message of another type than expected */
	FAKE_SEND = 12,
	FAKE_NOT_EOF = 13,     /* the client said more than it should */
	FAKE_BAD_REQUEST = 14, /* a payload not as the contract says */
	FAKE_SETUP = 15,
	FAKE_NOT_PIPELINED = 16, /* the client waited where it need not */
};

static void fake_die(int code)
{
	_exit(code);
}

static void fake_recv(int sock, struct proto_msg *m, uint16_t type)
{
	if (proto_recv(sock, m) < 0)
		fake_die(FAKE_RECV);
	if (m->type != type)
		fake_die(FAKE_UNEXPECTED);
}

/* Send payload (taken) with fds (kept open here). */
static void fake_send(int sock, uint16_t type, uint32_t id, json_t *payload,
		      const int *fds, size_t n_fds)
{
	struct proto_msg m;
	proto_msg_init(&m);
	size_t i;

	if (!payload)
		fake_die(FAKE_SETUP);
	m.type = type;
	m.id = id;
	m.payload = payload;
	for (i = 0; i < n_fds; i++)
		m.fds[i] = fds[i];
	m.n_fds = n_fds;
	if (proto_send(sock, &m) < 0)
		fake_die(FAKE_SEND);
	json_decref(payload);
}

static void fake_error(int sock, uint32_t id, const char *code,
		       const char *message)
{
	fake_send(sock, PROTO_ERROR, id,
		  json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
			    message),
		  NULL, 0);
}

static void fake_welcome(int sock)
{
	struct proto_msg m;

	fake_recv(sock, &m, PROTO_HELLO);
	fake_send(sock, PROTO_WELCOME, m.id,
		  json_pack("{s:i, s:s, s:s}", "version", 1, "server", "rdmad",
			    "server_version", "test"),
		  NULL, 0);
	proto_msg_clear(&m);
}

/* The client hangs up: nothing more may arrive. */
static void fake_expect_eof(int sock)
{
	struct proto_msg m;
	int r = proto_recv(sock, &m);

	if (r != -EPIPE && r != -ECONNRESET) {
		proto_msg_clear(&m);
		fake_die(FAKE_NOT_EOF);
	}
}

/* Read and drop whatever the client sends, until it hangs up. */
static void fake_drain(int sock)
{
	for (;;) {
		struct proto_msg m;
		int r = proto_recv(sock, &m);

		if (r == -EPIPE || r == -ECONNRESET)
			return;
		if (r < 0)
			fake_die(FAKE_RECV);
		proto_msg_clear(&m);
	}
}

/*
 * Wait until the client's next message is queued, without reading it:
 * the client sent it without waiting for an answer we have not given.
 */
static void fake_wait_queued(int sock)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};

	if (poll(&pfd, 1, 10000) != 1)
		fake_die(FAKE_NOT_PIPELINED);
}

static void fake_expect_detach(int sock, int attachment)
{
	struct proto_msg m;
	json_int_t a;

	fake_recv(sock, &m, PROTO_DETACH);
	a = json_integer_value(json_object_get(m.payload, "attachment"));
	if (a != attachment)
		fake_die(FAKE_BAD_REQUEST);
	fake_send(sock, PROTO_DETACHED, m.id,
		  json_pack("{s:i}", "attachment", attachment), NULL, 0);
	proto_msg_clear(&m);
}

/* DETACH of attachment, left unanswered until the client has moved on
 * (here: closed the connection): rdmad_detach() does not wait for
 * DETACHED (librdmad(3)); one that did would sit here until
 * fake_wait_queued() gives up. */
static void fake_expect_detach_unawaited(int sock, int attachment)
{
	struct proto_msg m;
	json_int_t a;

	fake_recv(sock, &m, PROTO_DETACH);
	a = json_integer_value(json_object_get(m.payload, "attachment"));
	proto_msg_clear(&m);
	if (a != attachment)
		fake_die(FAKE_BAD_REQUEST);
	fake_wait_queued(sock);
}

/* Receive ATTACH for profile in mode; returns its id. */
static uint32_t fake_attach_req(int sock, const char *profile, const char *mode)
{
	struct proto_msg m;
	const char *p, *md;
	uint32_t id;

	fake_recv(sock, &m, PROTO_ATTACH);
	p = json_string_value(json_object_get(m.payload, "profile"));
	md = json_string_value(json_object_get(m.payload, "mode"));
	if (!p || !md || (profile && strcmp(p, profile)) ||
	    (mode && strcmp(md, mode)))
		fake_die(FAKE_BAD_REQUEST);
	id = m.id;
	proto_msg_clear(&m);
	return id;
}

static int fake_memfd(size_t size, char fill)
{
	int fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC);
	char buf[256];

	if (fd < 0 || ftruncate(fd, size) < 0)
		fake_die(FAKE_SETUP);
	memset(buf, fill, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = fill + (char)i;
	if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		fake_die(FAKE_SETUP);
	return fd;
}

typedef void (*fake_script)(int sock, const void *arg);

struct fake {
	char dir[64];
	char path[128];
	pid_t pid;
};

/* again: at the place of f's last run, which fake_wait() removed. */
static void fake_run(struct fake *f, fake_script script, const void *arg,
		     bool again)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int lfd;

	if (again) {
		assert_int_equal(mkdir(f->dir, 0700), 0);
	} else {
		strcpy(f->dir, "/tmp/librdmad-test.XXXXXX");
		assert_non_null(mkdtemp(f->dir));
	}
	snprintf(f->path, sizeof(f->path), "%s/rdmad.sock", f->dir);
	strcpy(sun.sun_path, f->path);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(lfd, 4), 0);

	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		int sock;

		alarm(30); /* a script waiting for a client that is gone */
		sock = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (sock < 0)
			fake_die(FAKE_SETUP);
		close(lfd);
		script(sock, arg);
		close(sock);
		_exit(FAKE_OK);
	}
	close(lfd);
}

static void fake_start(struct fake *f, fake_script script, const void *arg)
{
	fake_run(f, script, arg, false);
}

/* The child's exit code (FAKE_*), or 100 + signal. */
static int fake_wait(struct fake *f)
{
	int status;

	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	unlink(f->path);
	rmdir(f->dir);
	if (WIFSIGNALED(status))
		return 100 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* ---- pure helpers ---- */

static void test_size_str(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *want;
	} cases[] = {
	    {0, "0 bytes"},
	    {1023, "1023 bytes"},
	    {1024, "1 KiB"},
	    {1536, "1.5 KiB"},
	    {1025, "1.1 KiB"}, /* rounded up: a limit to reach */
	    {64 << 20, "64 MiB"},
	    {8 << 20, "8 MiB"},
	    {(64ull << 20) - 1, "64 MiB"},
	    {3ull << 30, "3 GiB"},
	    {5ull << 40, "5 TiB"},
	};
	char buf[32];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		client_size_str(cases[i].bytes, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].want);
	}
}

static void test_code_errno(void **state)
{
	(void)state;
	assert_int_equal(client_code_errno("not_found"), ENOENT);
	assert_int_equal(client_code_errno("forbidden"), EACCES);
	assert_int_equal(client_code_errno("not_ready"), EAGAIN);
	assert_int_equal(client_code_errno("not_supported"), EOPNOTSUPP);
	assert_int_equal(client_code_errno("bad_request"), EINVAL);
	assert_int_equal(client_code_errno("too_many_sessions"), ECONNREFUSED);
	assert_int_equal(client_code_errno("timeout"), ETIMEDOUT);
	assert_int_equal(client_code_errno("too_many_requests"), EBUSY);
	assert_int_equal(client_code_errno("what_is_this"), EPROTO);
	assert_int_equal(client_code_errno(NULL), EPROTO);
}

/* ---- connecting ---- */

/* HELLO, WELCOME: the client may hang up before reading it. */
static void script_welcome(int sock, const void *arg)
{
	struct proto_msg m, w;
	int r;

	(void)arg;
	fake_recv(sock, &m, PROTO_HELLO);
	if (proto_welcome(&w, m.id, 1, "test") < 0)
		fake_die(FAKE_SETUP);
	r = proto_send(sock, &w);
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		fake_die(FAKE_SEND);
	proto_msg_clear(&w);
	proto_msg_clear(&m);
	fake_expect_eof(sock);
}

static void test_connect(void **state)
{
	struct fake f;
	struct rdmad *c;
	int fds;

	(void)state;
	fake_start(&f, script_welcome, NULL);
	fds = count_fds();
	c = rdmad_connect(f.path);
	assert_non_null(c);
	assert_int_equal(count_fds(), fds + 1);
	rdmad_close(c);
	assert_int_equal(count_fds(), fds);
	assert_int_equal(fake_wait(&f), FAKE_OK);
	rdmad_close(NULL);
}

static void test_connect_env(void **state)
{
	struct fake f;
	struct rdmad *c;

	(void)state;
	fake_start(&f, script_welcome, NULL);
	assert_int_equal(setenv("RDMAD_SOCKET", f.path, 1), 0);
	c = rdmad_connect(NULL);
	unsetenv("RDMAD_SOCKET");
	assert_non_null(c);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

static void test_connect_no_daemon(void **state)
{
	int fds = count_fds();
	char longpath[200];

	(void)state;
	errno = 0;
	assert_null(rdmad_connect("/nonexistent/rdmad.sock"));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(rdmad_last_error(), "/nonexistent/rdmad.sock"));
	assert_non_null(strstr(rdmad_last_error(), "is rdmad running?"));
	assert_int_equal(count_fds(), fds);

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_null(rdmad_connect(longpath));
	assert_int_equal(errno, ENAMETOOLONG);
	assert_null(rdmad_connect(""));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(count_fds(), fds);
}

/*
 * How the fake daemon answers HELLO. rdmad_connect() does not wait for
 * the answer: the first request's call reads it, and fails with it.
 */
enum hello_answer {
	HELLO_VERSION_2,  /* WELCOME choosing a version we do not speak (3) */
	HELLO_NO_VERSION, /* WELCOME without one */
	HELLO_FRAME_V2,	  /* a WELCOME framed as version 2 */
	HELLO_ERROR_ID0,  /* ERROR for no request: too many sessions */
	HELLO_WRONG_ID,	  /* a WELCOME for another request */
	HELLO_REPLY,	  /* another type than WELCOME */
	HELLO_HANG_UP,	  /* nothing: the daemon closes */
	/* ERROR unsupported_version, then the daemon closes (as rdmad) */
	HELLO_REFUSED,
	/* ERROR too_many_sessions, closing with the request unread (as
	 * rdmad, whose refusal may cross the client's first messages):
	 * the client's read says "reset" before the ERROR */
	HELLO_BUSY_UNREAD,
};

static const struct hello_case {
	const char *name;
	enum hello_answer answer;
	/* The fake has answered and gone before the first request is
	 * sent: sending fails, and the answer still says why. */
	bool gone_first;
	int err;
	const char *message; /* part of the last error */
} hello_cases[] = {
	{ "welcome_version_2", HELLO_VERSION_2, false, EPROTONOSUPPORT,
	  "protocol version" },
	{ "welcome_no_version", HELLO_NO_VERSION, false, EBADMSG,
	  "no protocol" },
	{ "welcome_frame_v2", HELLO_FRAME_V2, false, EPROTONOSUPPORT,
	  "protocol version this library does not speak" },
	{ "hello_error", HELLO_ERROR_ID0, false, ECONNREFUSED,
	  "uid 1000 has 256 sessions already" },
	{ "welcome_wrong_id", HELLO_WRONG_ID, false, EPROTO,
	  "answered request 2 while 1 was expected" },
	{ "welcome_wrong_type", HELLO_REPLY, false, EPROTO,
	  "HELLO with REPLY" },
	{ "hello_hang_up", HELLO_HANG_UP, false, ECONNRESET,
	  "rdmad went away (stopped or restarted)" },
	{ "hello_hang_up_first", HELLO_HANG_UP, true, ECONNRESET,
	  "before it answered REQUEST" },
	{ "hello_refused", HELLO_REFUSED, false, EPROTONOSUPPORT,
	  "this daemon speaks protocol versions 3 to 4" },
	{ "hello_refused_first", HELLO_REFUSED, true, EPROTONOSUPPORT,
	  "this daemon speaks protocol versions 3 to 4" },
	{ "hello_busy_unread", HELLO_BUSY_UNREAD, false, ECONNREFUSED,
	  "uid 1000 has 256 sessions already" },
};

static void script_hello(int sock, const void *arg)
{
	const struct hello_case *hc = arg;
	struct proto_msg m;
	uint8_t buf[128];
	struct proto_hdr h;
	const char *payload = "{\"version\":1}";

	fake_recv(sock, &m, PROTO_HELLO);
	switch (hc->answer) {
	case HELLO_VERSION_2:
		fake_send(
		    sock, PROTO_WELCOME, m.id,
		    json_pack("{s:i, s:s}", "version", 3, "server", "rdmad"),
		    NULL, 0);
		break;
	case HELLO_NO_VERSION:
		fake_send(sock, PROTO_WELCOME, m.id,
			  json_pack("{s:s}", "server", "rdmad"), NULL, 0);
		break;
	case HELLO_FRAME_V2:
		h = (struct proto_hdr){.magic = PROTO_MAGIC,
				       .version = 3,
				       .type = PROTO_WELCOME,
				       .id = m.id,
				       .length = strlen(payload)};
		proto_hdr_pack(&h, buf);
		memcpy(buf + PROTO_HDR_SIZE, payload, strlen(payload));
		if (send(sock, buf, PROTO_HDR_SIZE + strlen(payload),
			 MSG_NOSIGNAL) < 0)
			fake_die(FAKE_SEND);
		break;
	case HELLO_ERROR_ID0:
		fake_error(sock, 0, "too_many_sessions",
			   "uid 1000 has 256 sessions already");
		break;
	case HELLO_WRONG_ID:
		fake_send(sock, PROTO_WELCOME, m.id + 1,
			  json_pack("{s:i}", "version", 1), NULL, 0);
		break;
	case HELLO_REPLY:
		fake_send(sock, PROTO_REPLY, m.id,
			  json_pack("{s:i}", "status", 200), NULL, 0);
		break;
	case HELLO_HANG_UP:
		break;
	case HELLO_REFUSED:
		fake_error(sock, m.id, "unsupported_version",
			   "this daemon speaks protocol versions 3 to 4");
		break;
	case HELLO_BUSY_UNREAD:
		fake_wait_queued(sock);
		fake_error(sock, 0, "too_many_sessions",
			   "uid 1000 has 256 sessions already");
		break;
	}
	proto_msg_clear(&m);
	/* The daemon that closes, closes now; the others hear the client
	 * out (it sends its request before it reads the answer). */
	if (hc->answer != HELLO_HANG_UP && hc->answer != HELLO_REFUSED &&
	    hc->answer != HELLO_BUSY_UNREAD)
		fake_drain(sock);
}

static void test_connect_bad_hello(void **state)
{
	const struct hello_case *hc = *state;
	struct rdmad *c;
	struct fake f;
	int fds, status = 0;

	fake_start(&f, script_hello, hc);
	fds = count_fds();
	c = rdmad_connect(f.path);
	assert_non_null(c);
	if (hc->gone_first)
		assert_int_equal(fake_wait(&f), FAKE_OK);
	errno = 0;
	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/health", NULL, &status, NULL),
	    -hc->err);
	if (!strstr(rdmad_last_error(), hc->message))
		fail_msg("last error '%s' lacks '%s'", rdmad_last_error(),
			 hc->message);
	/* The session is over: gone, if the daemon was seen to close it. */
	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/health", NULL, &status, NULL),
	    hc->err == ECONNRESET ? -ECONNRESET : -ENOTCONN);
	assert_null(rdmad_attach(c, "p", 0));
	assert_int_equal(errno, hc->err == ECONNRESET ? ECONNRESET : ENOTCONN);
	rdmad_close(c);
	assert_int_equal(count_fds(), fds);
	if (!hc->gone_first)
		assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- pipelining ---- */

/*
 * WELCOME only once ATTACH has arrived: a client that waited for it
 * first would hang here. Then a REQUEST, answered in turn.
 */
static void script_pipelined(int sock, const void *arg)
{
	struct proto_msg m;
	uint32_t id;

	(void)arg;
	fake_recv(sock, &m, PROTO_HELLO);
	fake_wait_queued(sock);
	fake_send(sock, PROTO_WELCOME, m.id,
		  json_pack("{s:i, s:s, s:s}", "version", 1, "server", "rdmad",
			    "server_version", "test"),
		  NULL, 0);
	proto_msg_clear(&m);
	id = fake_attach_req(sock, "p", "auto");
	fake_error(sock, id, "not_found", "no profile 'p'");
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{s:s}}", "status", 200, "body", "status",
			    "ok"),
		  NULL, 0);
	proto_msg_clear(&m);
	fake_expect_eof(sock);
}

static void test_attach_pipelined(void **state)
{
	struct fake f;
	struct rdmad *c;
	char *reply = NULL;
	int status = 0;

	(void)state;
	fake_start(&f, script_pipelined, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	errno = 0;
	assert_null(rdmad_attach(c, "p", RDMAD_ATTACH_AUTO));
	assert_int_equal(errno, ENOENT);
	assert_string_equal(rdmad_last_error(), "no profile 'p'");
	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/health", NULL, &status, &reply), 0);
	assert_int_equal(status, 200);
	assert_string_equal(reply, "{\"status\":\"ok\"}");
	free(reply);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- ERROR answers to ATTACH ---- */

/* Each ATTACH is refused with the profile's name as the code. */
static void script_refuse_all(int sock, const void *arg)
{
	(void)arg;
	fake_welcome(sock);
	for (;;) {
		struct proto_msg m;
		char msg[128];
		const char *p;
		int r = proto_recv(sock, &m);

		if (r == -EPIPE || r == -ECONNRESET)
			return;
		if (r < 0)
			fake_die(FAKE_RECV);
		if (m.type != PROTO_ATTACH)
			fake_die(FAKE_UNEXPECTED);
		p = json_string_value(json_object_get(m.payload, "profile"));
		snprintf(msg, sizeof(msg), "the daemon says %s", p ? p : "?");
		fake_error(sock, m.id, p ? p : "?", msg);
		proto_msg_clear(&m);
	}
}

static void test_attach_errors(void **state)
{
	static const struct {
		const char *code;
		int err;
	} cases[] = {
	    {"not_found", ENOENT},   {"forbidden", EACCES},
	    {"not_ready", EAGAIN},   {"not_supported", EOPNOTSUPP},
	    {"bad_request", EINVAL}, {"internal", EIO},
	    {"mystery", EPROTO},
	};
	struct fake f;
	struct rdmad *c;
	char want[128];
	size_t i;
	int fds;

	(void)state;
	fake_start(&f, script_refuse_all, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	fds = count_fds();
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		errno = 0;
		assert_null(rdmad_attach(c, cases[i].code, RDMAD_ATTACH_AUTO));
		assert_int_equal(errno, cases[i].err);
		snprintf(want, sizeof(want), "the daemon says %s",
			 cases[i].code);
		assert_string_equal(rdmad_last_error(), want);
		assert_int_equal(count_fds(), fds);
	}
	/* Refused without a word to the daemon. */
	assert_null(
	    rdmad_attach(c, "x", RDMAD_ATTACH_SHARED | RDMAD_ATTACH_LOCAL));
	assert_int_equal(errno, EINVAL);
	assert_null(rdmad_attach(c, "x", 1u << 7));
	assert_int_equal(errno, EINVAL);
	assert_null(rdmad_attach(c, "x",
				 RDMAD_ATTACH_WAIT | RDMAD_ATTACH_SHARED |
				     RDMAD_ATTACH_LOCAL));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rdmad_set_attach_timeout(NULL, 1000), -EINVAL);
	assert_null(rdmad_attach(c, NULL, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(rdmad_attach(NULL, "x", 0));
	assert_int_equal(errno, EINVAL);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- waiting attach ---- */

/* One attach of test_attach_wait, in order. */
static const struct wait_case {
	unsigned int flags;
	bool set;	 /* rdmad_set_attach_timeout(timeout) first */
	int timeout;
	json_int_t wait; /* "wait_ms" in the ATTACH; 0: no such key */
	const char *mode;
	int delay_ms; /* the fake answers not_ready after that */
	const char *message;
	int err;
	int rcvtimeo_ms; /* the socket's receive timeout meanwhile */
} wait_cases[] = {
	/* No flag: no wait_ms, the usual receive timeout. */
	{ 0, false, 0, 0, "auto", 0, "profile 'p' is creating", EAGAIN,
	  30000 },
	/* The default wait; the profile failed meanwhile: EAGAIN. */
	{ RDMAD_ATTACH_WAIT, false, 0, 30000, "auto", 0,
	  "profile 'p' is failed: no device", EAGAIN, 60000 },
	/* The daemon gave up after the whole wait: ETIMEDOUT. */
	{ RDMAD_ATTACH_WAIT | RDMAD_ATTACH_LOCAL, true, 200, 200, "local",
	  200, "timed out after 200 ms: profile 'p' is creating", ETIMEDOUT,
	  30200 },
	/* Negative: no limit, and no receive timeout at all. */
	{ RDMAD_ATTACH_WAIT, true, -7, -1, "auto", 0,
	  "profile 'p' is failed", EAGAIN, 0 },
	/* 0: do not wait. */
	{ RDMAD_ATTACH_WAIT | RDMAD_ATTACH_SHARED, true, 0, 0, "shared", 0,
	  "profile 'p' is creating", EAGAIN, 30000 },
	/* A timeout set does not wait without the flag. */
	{ 0, true, 500, 0, "auto", 0, "profile 'p' is creating", EAGAIN,
	  30000 },
};

/* Check each ATTACH against wait_cases and answer not_ready. */
static void script_wait(int sock, const void *arg)
{
	const struct wait_case *wc = arg;
	size_t i;

	fake_welcome(sock);
	for (i = 0; i < ARRAY_SIZE(wait_cases); i++) {
		struct proto_msg m;
		json_t *w;

		fake_recv(sock, &m, PROTO_ATTACH);
		w = json_object_get(m.payload, "wait_ms");
		if (wc[i].wait ? !json_is_integer(w) ||
				     json_integer_value(w) != wc[i].wait
			       : w != NULL)
			fake_die(FAKE_BAD_REQUEST);
		if (!streq(json_string_value(json_object_get(m.payload, "mode")),
			   wc[i].mode))
			fake_die(FAKE_BAD_REQUEST);
		if (wc[i].delay_ms)
			usleep(wc[i].delay_ms * 1000);
		fake_error(sock, m.id, "not_ready", wc[i].message);
		proto_msg_clear(&m);
	}
	fake_expect_eof(sock);
}

/* The fds open now, as a bitmap of the first 1024. */
static void open_fds(bool open[1024])
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	assert_non_null(d);
	memset(open, 0, 1024 * sizeof(*open));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) < 1024 &&
		    atoi(e->d_name) != dirfd(d))
			open[atoi(e->d_name)] = true;
	closedir(d);
}

static int rcvtimeo_ms(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len),
			 0);
	return (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
}

static void test_attach_wait(void **state)
{
	bool before[1024], after[1024];
	struct fake f;
	struct rdmad *c;
	int fd = -1;
	size_t i;

	(void)state;
	fake_start(&f, script_wait, wait_cases);
	open_fds(before);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	open_fds(after);
	for (i = 0; i < 1024; i++)
		if (after[i] && !before[i])
			fd = (int)i;
	assert_true(fd >= 0);
	assert_int_equal(rcvtimeo_ms(fd), 30000);

	for (i = 0; i < ARRAY_SIZE(wait_cases); i++) {
		const struct wait_case *wc = &wait_cases[i];

		if (wc->set)
			assert_int_equal(
			    rdmad_set_attach_timeout(c, wc->timeout), 0);
		errno = 0;
		assert_null(rdmad_attach(c, "p", wc->flags));
		if (errno != wc->err)
			fail_msg("case %zu: errno %d, not %d (%s)", i, errno,
				 wc->err, rdmad_last_error());
		assert_string_equal(rdmad_last_error(), wc->message);
		assert_int_equal(rcvtimeo_ms(fd), wc->rcvtimeo_ms);
	}
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- failed attaches leave nothing behind ---- */

#define MEM_BIG (1 << 20)
#define MEM_SMALL (64 << 10)

/* An ATTACHED that the client must refuse or fail to set up. */
struct attached_case {
	const char *name;
	unsigned int flags; /* what the client asks */
	const char *mode;   /* what ATTACH must say */
	/* The payload; the fds sent with it are: two memfds (MEM_BIG,
	 * MEM_SMALL), then one more memfd posing as cmd_fd. */
	const char *payload;
	int err;
	const char *message; /* part of the last error */
	bool detach;	     /* the client must DETACH attachment 7 */
	bool memlock;	     /* run with RLIMIT_MEMLOCK at 64 KiB */
};

#define GOOD_MEMORY                                                            \
	"\"memory\":[{\"name\":\"big\",\"size\":1048576,\"backing\":"          \
	"\"memfd\",\"fd\":0},"                                                 \
	"{\"name\":\"small\",\"size\":65536,\"backing\":\"memfd\",\"fd\":1}]"
#define GOOD_PD "\"pd\":[{\"name\":\"main\",\"handle\":0}]"
#define MR(memory, offset, length, access)                                     \
	"{\"name\":\"ring\",\"pd\":\"main\",\"memory\":\"" memory              \
	"\",\"handle\":1,\"lkey\":528,\"rkey\":529,\"length\":" #length        \
	",\"offset\":" #offset ",\"iova\":0,\"zero_based\":true,"              \
	"\"access\":[" access "]}"
#define GOOD_MR                                                                \
	"\"mr\":[" MR("small", 0, 65536,                                       \
		      "\"local_write\",\"remote_write\",\"remote_read\"") "]"
#define HEAD(mode)                                                             \
	"{\"profile\":\"p\",\"attachment\":7,\"mode\":\"" mode "\","           \
	"\"ibdev\":\"nosuchdev0\",\"port\":1,\"gid_index\":1,"

static const struct attached_case attached_cases[] = {
	{ "local_no_device", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY "," GOOD_PD "," GOOD_MR "}", ENODEV,
	  "nosuchdev0", true, false },
	{ "local_asked_no_device", RDMAD_ATTACH_LOCAL, "local",
	  HEAD("local") GOOD_MEMORY "," GOOD_PD "," GOOD_MR "}", ENODEV,
	  "nosuchdev0", true, false },
	{ "shared_import_fails", RDMAD_ATTACH_SHARED, "shared",
	  HEAD("shared") "\"cmd_fd\":2," GOOD_MEMORY "," GOOD_PD
			 "," GOOD_MR "}",
	  EINVAL, "cannot import the context of nosuchdev0", true, false },
	{ "memlock", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY
	  "," GOOD_PD ",\"mr\":[" MR("big", 0, 1048576, "\"local_write\"") "]}",
	  ENOMEM,
	  "local mode registers 1 MiB but RLIMIT_MEMLOCK is 64 KiB: raise "
	  "it to at least 1 MiB (ulimit -l 1024, LimitMEMLOCK=1024K)",
	  true, true },
	{ "mode_not_asked", RDMAD_ATTACH_SHARED, "shared",
	  HEAD("local") GOOD_MEMORY "," GOOD_PD "," GOOD_MR "}", EPROTO,
	  "in local mode, not in the mode asked", true, false },
	{ "mode_unknown", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("sideways") GOOD_MEMORY "," GOOD_PD "," GOOD_MR "}", EPROTO,
	  "mode 'sideways'", true, false },
	{ "no_attachment_id", RDMAD_ATTACH_AUTO, "auto",
	  "{\"mode\":\"local\",\"ibdev\":\"x\",\"port\":1,\"gid_index\":"
	  "0," GOOD_MEMORY "}",
	  EPROTO, "no attachment id", false, false },
	{ "fd_out_of_range", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") "\"memory\":[{\"name\":\"big\",\"size\":1048576,"
		   "\"fd\":5}]}",
	  EPROTO, "'big': fd 5 of 3", true, false },
	{ "fd_twice", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") "\"memory\":[{\"name\":\"a\",\"size\":4096,\"fd\":0},"
		   "{\"name\":\"b\",\"size\":4096,\"fd\":0}]}",
	  EPROTO, "fd 0 given twice", true, false },
	{ "memory_twice", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") "\"memory\":[{\"name\":\"a\",\"size\":4096,\"fd\":0},"
		   "{\"name\":\"a\",\"size\":4096,\"fd\":1}]}",
	  EPROTO, "memory 'a' twice", true, false },
	{ "mr_no_memory", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY
	  "," GOOD_PD ",\"mr\":[" MR("nope", 0, 4096, "\"local_write\"") "]}",
	  EPROTO, "mr 'ring': no memory 'nope'", true, false },
	{ "mr_no_pd", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY
	  ",\"mr\":[" MR("small", 0, 4096, "\"local_write\"") "]}",
	  EPROTO, "mr 'ring': no pd 'main'", true, false },
	{ "mr_too_long", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY
	  "," GOOD_PD ",\"mr\":["
	  MR("small", 4096, 65536, "\"local_write\"") "]}",
	  EPROTO, "offset and length do not fit memory 'small'", true, false },
	{ "mr_bad_access", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") GOOD_MEMORY
	  "," GOOD_PD ",\"mr\":[" MR("small", 0, 4096, "\"telepathy\"") "]}",
	  EPROTO, "unknown access 'telepathy'", true, false },
	{ "shared_no_cmd_fd", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("shared") GOOD_MEMORY "," GOOD_PD "," GOOD_MR "}", EPROTO,
	  "shared mode without cmd_fd", true, false },
	{ "memory_larger_than_fd", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") "\"memory\":[{\"name\":\"small\",\"size\":1048576,"
		   "\"fd\":1}]}",
	  EPROTO, "memory 'small' has 65536 bytes, rdmad said 1048576", true,
	  false },
	{ "memory_not_array", RDMAD_ATTACH_AUTO, "auto",
	  HEAD("local") "\"memory\":{}}", EPROTO, "\"memory\" is not an array",
	  true, false },
};

static void script_attached(int sock, const void *arg)
{
	const struct attached_case *ac = arg;
	json_t *doc;
	uint32_t id;
	int fds[3];

	fake_welcome(sock);
	id = fake_attach_req(sock, "p", ac->mode);
	doc = json_loads(ac->payload, 0, NULL);
	if (!doc)
		fake_die(FAKE_SETUP);
	fds[0] = fake_memfd(MEM_BIG, 'a');
	fds[1] = fake_memfd(MEM_SMALL, 'A');
	fds[2] = fake_memfd(4096, 'c');
	fake_send(sock, PROTO_ATTACHED, id, doc, fds, 3);
	if (ac->detach)
		fake_expect_detach(sock, 7);
	fake_expect_eof(sock);
}

/* CAP_IPC_LOCK exempts from RLIMIT_MEMLOCK: take it out of the effective
 * set for a while (it stays permitted, to put back). */
static bool set_cap_ipc_lock(bool on)
{
	struct __user_cap_header_struct h = {
	    .version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	bool was;

	assert_int_equal(syscall(SYS_capget, &h, d), 0);
	was =
	    d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK);
	if (on)
		d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective |=
		    CAP_TO_MASK(CAP_IPC_LOCK);
	else
		d[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &=
		    ~CAP_TO_MASK(CAP_IPC_LOCK);
	assert_int_equal(syscall(SYS_capset, &h, d), 0);
	return was;
}

static void test_attach_fails_clean(void **state)
{
	const struct attached_case *ac = *state;
	struct rlimit saved, low;
	bool had_cap = false;
	struct rdmad_profile *p;
	struct fake f;
	struct rdmad *c;
	int fds, maps;

	fake_start(&f, script_attached, ac);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	fds = count_fds();
	maps = count_test_maps();
	assert_int_equal(maps, 0);
	if (ac->memlock) {
		assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
		low = saved;
		low.rlim_cur = 64 << 10;
		assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &low), 0);
		had_cap = set_cap_ipc_lock(false);
	}

	errno = 0;
	p = rdmad_attach(c, "p", ac->flags);

	if (ac->memlock) {
		if (had_cap)
			set_cap_ipc_lock(true);
		assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
	}
	assert_null(p);
	assert_int_equal(errno, ac->err);
	if (!strstr(rdmad_last_error(), ac->message))
		fail_msg("last error '%s' lacks '%s'", rdmad_last_error(),
			 ac->message);
	assert_int_equal(count_fds(), fds);
	assert_int_equal(count_test_maps(), 0);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- the connection after a failure ---- */

/* Answer ATTACH by hanging up. */
static void script_hang_up(int sock, const void *arg)
{
	(void)arg;
	fake_welcome(sock);
	fake_attach_req(sock, "p", "auto");
}

static void test_daemon_gone(void **state)
{
	struct rdmad_event ev;
	struct fake f;
	struct rdmad *c;
	int status = 0;

	(void)state;
	fake_start(&f, script_hang_up, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	assert_null(rdmad_attach(c, "p", 0));
	assert_int_equal(errno, ECONNRESET);
	assert_string_equal(rdmad_last_error(),
			    "rdmad went away (stopped or restarted) before it "
			    "answered ATTACH; connect again");
	/* Nothing more is sent on a connection the daemon closed. */
	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/health", NULL, &status, NULL),
	    -ECONNRESET);
	assert_non_null(strstr(rdmad_last_error(), "connect again"));
	/* And it is an event, once. */
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_DAEMON_GONE);
	assert_null(ev.profile);
	assert_null(ev.profile_name);
	assert_non_null(strstr(ev.reason, "stopped or restarted"));
	assert_int_equal(rdmad_next_event(c, &ev), 0);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- events ---- */

static void fake_event(int sock, const char *event, const char *device)
{
	json_t *doc = json_pack("{s:s, s:i, s:s, s:s}", "event", event,
				"attachment", 9, "profile", "p", "reason",
				"device rxe9 was removed");

	if (doc && device)
		json_object_set_new(doc, "device", json_string(device));
	fake_send(sock, PROTO_EVENT, 0, doc, NULL, 0);
}

/*
 * EVENTs in front of an answer, between answers, one of a kind this
 * library does not know, then the end of the session.
 */
static void script_events(int sock, const void *arg)
{
	struct proto_msg m;

	(void)arg;
	fake_welcome(sock);
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_event(sock, "device_removed", "rxe9");
	fake_event(sock, "something_new", NULL);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{}}", "status", 200, "body"), NULL, 0);
	proto_msg_clear(&m);
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{}}", "status", 204, "body"), NULL, 0);
	proto_msg_clear(&m);
	/* Unasked, while the client waits for nothing. */
	fake_event(sock, "profile_removed", NULL);
	/* Then the daemon stops. */
}

static void test_events(void **state)
{
	struct rdmad_event ev;
	struct pollfd pfd;
	struct fake f;
	struct rdmad *c;
	int status = 0, fds;

	(void)state;
	fake_start(&f, script_events, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	fds = count_fds();
	assert_int_equal(rdmad_next_event(NULL, &ev), -EINVAL);
	assert_int_equal(rdmad_next_event(c, NULL), -EINVAL);
	assert_int_equal(rdmad_fd(NULL), -EINVAL);

	/* The events in front of the answer are not taken for one. */
	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, &status, NULL),
			 0);
	assert_int_equal(status, 200);
	/* Set aside while the next answer is read, too. */
	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, &status, NULL),
			 0);
	assert_int_equal(status, 204);
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_DEVICE_REMOVED);
	assert_null(ev.profile); /* attachment 9 is not ours */
	assert_string_equal(ev.profile_name, "p");
	assert_string_equal(ev.device, "rxe9");
	assert_string_equal(ev.reason, "device rxe9 was removed");

	/* The rest comes through the fd: the event, then the end. */
	pfd = (struct pollfd){.fd = rdmad_fd(c), .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(fake_wait(&f), FAKE_OK);
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_PROFILE_REMOVED);
	assert_string_equal(ev.profile_name, "p");
	assert_null(ev.device);
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_DAEMON_GONE);
	assert_int_equal(rdmad_next_event(c, &ev), 0);
	assert_int_equal(rdmad_next_event(c, &ev), 0);
	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, &status, NULL),
			 -ECONNRESET);
	assert_non_null(strstr(rdmad_last_error(),
			       "went away (stopped or restarted)"));
	assert_int_equal(count_fds(), fds);
	rdmad_close(c);
}

/* An answer nobody asked for, between events: the protocol is broken. */
static void script_unasked(int sock, const void *arg)
{
	(void)arg;
	fake_welcome(sock);
	fake_send(sock, PROTO_REPLY, 77,
		  json_pack("{s:i, s:{}}", "status", 200, "body"), NULL, 0);
	fake_event(sock, "device_removed", "rxe9");
	fake_drain(sock);
}

static void test_event_unasked_answer(void **state)
{
	struct rdmad_event ev;
	struct pollfd pfd;
	struct fake f;
	struct rdmad *c;
	int status = 0;

	(void)state;
	fake_start(&f, script_unasked, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	pfd = (struct pollfd){.fd = rdmad_fd(c), .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	usleep(100000); /* the WELCOME, the REPLY and the EVENT */
	/* The WELCOME is the HELLO's answer; the REPLY answers nothing. */
	assert_int_equal(rdmad_next_event(c, &ev), -EPROTO);
	assert_non_null(strstr(rdmad_last_error(), "REPLY (id 77) unasked"));
	/* What comes after is still read. */
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_DEVICE_REMOVED);
	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, &status, NULL),
			 -ENOTCONN);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* A daemon that restarts: the same socket path, a new session. */
static void script_bye(int sock, const void *arg)
{
	(void)arg;
	fake_welcome(sock);
}

static void script_one_request(int sock, const void *arg)
{
	struct proto_msg m;

	(void)arg;
	fake_welcome(sock);
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{}}", "status", 200, "body"), NULL, 0);
	proto_msg_clear(&m);
	fake_expect_eof(sock);
}

static void test_reconnect(void **state)
{
	struct rdmad_event ev;
	struct pollfd pfd;
	struct fake f;
	struct rdmad *c;
	int status = 0, fds;

	(void)state;
	fake_start(&f, script_bye, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	fds = count_fds();
	pfd = (struct pollfd){.fd = rdmad_fd(c), .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(fake_wait(&f), FAKE_OK); /* the socket is gone */
	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, &status, NULL),
			 -ECONNRESET);
	/* Nobody there: c stays as it was. */
	assert_int_equal(rdmad_reconnect(c), -ENOENT);
	assert_non_null(strstr(rdmad_last_error(), "is rdmad running?"));
	assert_int_equal(rdmad_reconnect(NULL), -EINVAL);

	/* The daemon is back, at the same place. */
	fake_run(&f, script_one_request, NULL, true);
	assert_int_equal(rdmad_reconnect(c), 0);
	assert_int_equal(count_fds(), fds);
	/* What was not read of the old connection is still there. */
	assert_int_equal(rdmad_next_event(c, &ev), 1);
	assert_int_equal(ev.type, RDMAD_EVENT_DAEMON_GONE);
	assert_int_equal(rdmad_next_event(c, &ev), 0);
	assert_int_equal(rdmad_request(c, "PATCH", "/v1/y", "{}", &status,
				       NULL),
			 0);
	assert_int_equal(status, 200);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- control requests ---- */

static void script_requests(int sock, const void *arg)
{
	struct proto_msg m;
	json_t *body;

	(void)arg;
	fake_welcome(sock);
	/* 1: echoed */
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{s:O}}", "status", 200, "body", "echo",
			    m.payload),
		  NULL, 0);
	proto_msg_clear(&m);
	/* 2: no body sent; a 404 document back */
	fake_recv(sock, &m, PROTO_REQUEST);
	if (json_object_get(m.payload, "body"))
		fake_die(FAKE_BAD_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{s:{s:s, s:s}}}", "status", 404, "body",
			    "error", "code", "not_found", "message", "no"),
		  NULL, 0);
	proto_msg_clear(&m);
	/* 3: refused at the protocol level */
	fake_recv(sock, &m, PROTO_REQUEST);
	fake_error(sock, m.id, "bad_request", "\"body\" must be an object");
	proto_msg_clear(&m);
	/* 4: a REPLY without a status */
	fake_recv(sock, &m, PROTO_REQUEST);
	body = json_object();
	fake_send(sock, PROTO_REPLY, m.id, json_pack("{s:o}", "body", body),
		  NULL, 0);
	proto_msg_clear(&m);
	fake_expect_eof(sock);
}

static void test_request(void **state)
{
	struct fake f;
	struct rdmad *c;
	char *reply = NULL;
	json_t *doc;
	int status = 0, fds;

	(void)state;
	fake_start(&f, script_requests, NULL);
	c = rdmad_connect(f.path);
	assert_non_null(c);
	fds = count_fds();

	/* Bad arguments go nowhere. */
	assert_int_equal(
	    rdmad_request(c, "PATCH", "/v1/x", "{not json", &status, &reply),
	    -EINVAL);
	assert_int_equal(
	    rdmad_request(c, "PATCH", "/v1/x", "[1]", &status, &reply),
	    -EINVAL);
	assert_int_equal(rdmad_request(c, "GET", "v1/x", NULL, &status, &reply),
			 -EINVAL);

	assert_int_equal(rdmad_request(c, "PATCH", "/v1/profiles/p/qp/a",
				       "{\"state\":\"rts\"}", &status, &reply),
			 0);
	assert_int_equal(status, 200);
	doc = json_loads(reply, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(doc, "echo"), "method")),
			    "PATCH");
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(doc, "echo"), "path")),
			    "/v1/profiles/p/qp/a");
	assert_string_equal(
	    json_string_value(json_object_get(
		json_object_get(json_object_get(doc, "echo"), "body"),
		"state")),
	    "rts");
	json_decref(doc);
	free(reply);
	reply = NULL;

	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/nothing", NULL, &status, &reply), 0);
	assert_int_equal(status, 404);
	assert_string_equal(reply,
			    "{\"error\":{\"code\":\"not_found\",\"message\":"
			    "\"no\"}}");
	free(reply);
	reply = NULL;

	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/x", "{}", &status, &reply), -EINVAL);
	assert_string_equal(rdmad_last_error(), "\"body\" must be an object");
	assert_null(reply);

	assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL, NULL, NULL),
			 -EPROTO);
	assert_non_null(strstr(rdmad_last_error(), "no status"));
	assert_int_equal(count_fds(), fds);
	rdmad_close(c);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

/* ---- accessors without an attachment ---- */

static void test_accessors_null(void **state)
{
	(void)state;
	assert_null(rdmad_context(NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(rdmad_pd(NULL, "x"));
	assert_null(rdmad_mr(NULL, "x"));
	assert_null(rdmad_mr_map(NULL, "x", NULL));
	assert_int_equal(rdmad_mr_iova(NULL, "x"), 0);
	assert_int_equal(rdmad_mr_rkey(NULL, "x"), 0);
	assert_null(rdmad_pd_name(NULL, 0));
	assert_null(rdmad_mr_name(NULL, 0));
	assert_int_equal(rdmad_mode(NULL), 0);
	assert_int_equal(rdmad_port(NULL), -EINVAL);
	assert_int_equal(rdmad_gid_index(NULL), -EINVAL);
	assert_int_equal(rdmad_detach(NULL), -EINVAL);
	assert_null(rdmad_xrcd(NULL, "x"));
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(rdmad_last_error(), "shares no xrcd 'x'"));
	assert_string_equal(rdmad_version(), RDMAD_VERSION);
	assert_non_null(strstr(rdmad_strerror(-ENOENT), "No such file"));
}

/* ---- local mode on a real device (tests/vm/run) ---- */

/*
 * How the fake daemon answers the REPORT, which the client does not
 * wait for: a request made between attach and detach reads that
 * answer first.
 */
enum report_answer {
	REPORT_LATE,	 /* REPLY 200, once the next request is queued */
	REPORT_REFUSED,	 /* ERROR: only the daemon's view lacks the keys */
	REPORT_WRONG_ID, /* a REPLY for another request: EPROTO */
	REPORT_HANG_UP,	 /* no answer, the daemon closes: ECONNRESET */
};

static const struct local_case {
	const char *name;
	enum report_answer report;
	int err; /* of the request after the attach */
	const char *message;
} local_cases[] = {
	{ "local_report_late", REPORT_LATE, 0, NULL },
	{ "local_report_refused", REPORT_REFUSED, 0, NULL },
	{ "local_report_wrong_id", REPORT_WRONG_ID, EPROTO,
	  "answered request 103 while 3 was expected" },
	{ "local_report_hang_up", REPORT_HANG_UP, ECONNRESET,
	  "went away (stopped or restarted) before it answered REQUEST" },
};

/* A local case on the device found. */
struct local_run {
	const struct local_case *lc;
	char ibdev[64];
};

/* The answer to the REQUEST after the attach: not the REPORT's. */
static void fake_request_404(int sock)
{
	struct proto_msg m;

	fake_recv(sock, &m, PROTO_REQUEST);
	fake_send(sock, PROTO_REPLY, m.id,
		  json_pack("{s:i, s:{s:s}}", "status", 404, "body", "mark",
			    "request"),
		  NULL, 0);
	proto_msg_clear(&m);
}

/* Two MRs: zero-based on "small", VA-based at an offset in "big". */
#define LOCAL_IOVA 0x7f1234560000ull

static void script_local(int sock, const void *arg)
{
	const struct local_run *lr = arg;
	struct proto_msg m;
	json_t *doc, *mrs, *mr;
	size_t i;
	uint32_t id;
	int fds[2];

	fake_welcome(sock);
	id = fake_attach_req(sock, "p", "auto");
	doc = json_pack(
	    "{s:s, s:i, s:s, s:s, s:i, s:i, s:b,"
	    " s:[{s:s, s:i, s:s, s:i}, {s:s, s:i, s:s, s:i}],"
	    " s:[{s:s, s:i}],"
	    " s:[{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:b, s:[s, s]},"
	    "    {s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:b, s:[s]}]}",
	    "profile", "p", "attachment", 7, "mode", "local", "ibdev",
	    lr->ibdev, "port", 1, "gid_index", 1, "import_capable", 0, "memory",
	    "name", "big", "size", MEM_BIG, "backing", "memfd", "fd", 0, "name",
	    "small", "size", MEM_SMALL, "backing", "memfd", "fd", 1, "pd",
	    "name", "main", "handle", 0, "mr", "name", "ring", "pd", "main",
	    "memory", "small", "handle", 1, "lkey", 1, "rkey", 2, "length",
	    MEM_SMALL, "offset", 0, "iova", (json_int_t)0, "zero_based", 1,
	    "access", "local_write", "remote_write", "name", "tail", "pd",
	    "main", "memory", "big", "handle", 2, "lkey", 3, "rkey", 4,
	    "length", 8192, "offset", 4096, "iova",
	    (json_int_t)(LOCAL_IOVA + 4096), "zero_based", 0, "access",
	    "remote_read");
	fds[0] = fake_memfd(MEM_BIG, 'a');
	fds[1] = fake_memfd(MEM_SMALL, 'A');
	fake_send(sock, PROTO_ATTACHED, id, doc, fds, 2);

	fake_recv(sock, &m, PROTO_REPORT);
	if (json_integer_value(json_object_get(m.payload, "attachment")) != 7)
		fake_die(FAKE_BAD_REQUEST);
	mrs = json_object_get(m.payload, "mr");
	if (json_array_size(mrs) != 2)
		fake_die(FAKE_BAD_REQUEST);
	json_array_foreach(mrs, i, mr)
	{
		const char *name =
		    json_string_value(json_object_get(mr, "name"));
		json_int_t iova =
		    json_integer_value(json_object_get(mr, "iova"));
		json_int_t len =
		    json_integer_value(json_object_get(mr, "length"));

		if (!name || !json_is_integer(json_object_get(mr, "lkey")) ||
		    !json_is_integer(json_object_get(mr, "rkey")))
			fake_die(FAKE_BAD_REQUEST);
		if (streq(name, "ring")
			? iova != 0 || len != MEM_SMALL
			: iova != (json_int_t)(LOCAL_IOVA + 4096) ||
			      len != 8192)
			fake_die(FAKE_BAD_REQUEST);
	}
	id = m.id;
	proto_msg_clear(&m);
	switch (lr->lc->report) {
	case REPORT_LATE:
		/* The attach is over without this answer. */
		fake_wait_queued(sock);
		fake_send(sock, PROTO_REPLY, id,
			  json_pack("{s:i, s:{}}", "status", 200, "body"),
			  NULL, 0);
		fake_request_404(sock);
		break;
	case REPORT_REFUSED:
		fake_error(sock, id, "bad_request", "REPORT is for local mode");
		fake_request_404(sock);
		break;
	case REPORT_WRONG_ID:
		fake_send(sock, PROTO_REPLY, id + 100,
			  json_pack("{s:i, s:{}}", "status", 200, "body"),
			  NULL, 0);
		fake_drain(sock);
		return;
	case REPORT_HANG_UP:
		return;
	}
	/* The client writes through its mapping: we must see it. */
	fake_expect_detach_unawaited(sock, 7);
	{
		char got[8] = {0};

		if (pread(fds[0], got, 5, 4096) != 5 || strcmp(got, "hello"))
			fake_die(FAKE_BAD_REQUEST);
	}
	fake_expect_eof(sock);
}

static void test_attach_local_device(void **state)
{
	struct local_run lr = {.lc = *state};
	struct ibv_device **list;
	struct rdmad_profile *p;
	struct ibv_mr *mr;
	struct fake f;
	struct rdmad *c;
	char *reply = NULL;
	size_t len = 0;
	char *bytes;
	int n = 0, fds, maps, status = 0;

	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		skip();
	}
	snprintf(lr.ibdev, sizeof(lr.ibdev), "%s",
		 ibv_get_device_name(list[0]));
	ibv_free_device_list(list);

	fake_start(&f, script_local, &lr);
	fds = count_fds();
	maps = count_test_maps();
	c = rdmad_connect(f.path);
	assert_non_null(c);
	p = rdmad_attach(c, "p", RDMAD_ATTACH_AUTO);
	if (!p)
		fail_msg("attach: %s", rdmad_last_error());
	assert_int_equal(rdmad_mode(p), RDMAD_MODE_LOCAL);
	assert_non_null(rdmad_context(p));
	assert_string_equal(ibv_get_device_name(rdmad_context(p)->device),
			    lr.ibdev);
	assert_int_equal(rdmad_port(p), 1);
	assert_int_equal(rdmad_gid_index(p), 1);
	assert_non_null(rdmad_pd(p, "main"));
	assert_string_equal(rdmad_pd_name(p, 0), "main");
	assert_null(rdmad_pd_name(p, 1));
	assert_string_equal(rdmad_mr_name(p, 0), "ring");
	assert_string_equal(rdmad_mr_name(p, 1), "tail");
	assert_null(rdmad_mr_name(p, 2));
	assert_null(rdmad_pd(p, "other"));
	assert_int_equal(errno, ENOENT);

	mr = rdmad_mr(p, "ring");
	assert_non_null(mr);
	assert_ptr_equal(mr->pd, rdmad_pd(p, "main"));
	assert_int_equal(mr->length, MEM_SMALL);
	bytes = rdmad_mr_map(p, "ring", &len);
	assert_ptr_equal(bytes, mr->addr);
	assert_int_equal(len, MEM_SMALL);
	assert_int_equal(bytes[0], 'A');
	assert_int_equal(bytes[1], 'A' + 1);
	assert_int_equal(rdmad_mr_iova(p, "ring"), 0);
	assert_int_equal(rdmad_mr_rkey(p, "ring"), 2);

	mr = rdmad_mr(p, "tail");
	assert_non_null(mr);
	bytes = rdmad_mr_map(p, "tail", &len);
	assert_int_equal(len, 8192);
	/* offset 4096 in "big": the fill pattern stops at 256 bytes. */
	assert_int_equal(bytes[-4096], 'a');
	assert_int_equal(rdmad_mr_iova(p, "tail"), LOCAL_IOVA + 4096);
	assert_int_equal(rdmad_mr_rkey(p, "tail"), 4);
	memcpy(bytes, "hello", 5);
	assert_int_equal(count_test_maps(), 2);

	/* The REPORT's answer, read first, is not taken for this one. */
	errno = 0;
	if (lr.lc->err) {
		assert_int_equal(rdmad_request(c, "GET", "/v1/x", NULL,
					       &status, &reply),
				 -lr.lc->err);
		if (!strstr(rdmad_last_error(), lr.lc->message))
			fail_msg("last error '%s' lacks '%s'",
				 rdmad_last_error(), lr.lc->message);
		assert_null(reply);
		/* Released here; the daemon cannot be told (a daemon that
		 * went away has ended the lease itself). */
		assert_int_equal(rdmad_detach(p), lr.lc->err == ECONNRESET
							  ? 0
							  : -ENOTCONN);
		assert_int_equal(count_test_maps(), maps);
		rdmad_close(c);
		assert_int_equal(count_fds(), fds);
		assert_int_equal(fake_wait(&f), FAKE_OK);
		return;
	}
	assert_int_equal(
	    rdmad_request(c, "GET", "/v1/x", NULL, &status, &reply), 0);
	assert_int_equal(status, 404);
	assert_string_equal(reply, "{\"mark\":\"request\"}");
	free(reply);

	assert_int_equal(rdmad_detach(p), 0);
	assert_int_equal(count_test_maps(), maps);
	rdmad_close(c);
	assert_int_equal(count_fds(), fds);
	assert_int_equal(fake_wait(&f), FAKE_OK);
}

#define CASES(table, fn)                                                       \
	for (i = 0; i < ARRAY_SIZE(table); i++)                                \
		tests[n++] = (struct CMUnitTest)                               \
		{                                                              \
			.name = table[i].name, .test_func = fn,                \
			.initial_state = (void *)&table[i],                    \
		}

int main(void)
{
	struct CMUnitTest
	    tests[ARRAY_SIZE(hello_cases) + ARRAY_SIZE(attached_cases) +
		  ARRAY_SIZE(local_cases) + 16];
	size_t n = 0, i;

	/* A test that got SIGPIPE would die instead of failing. */
	signal(SIGPIPE, SIG_DFL);

	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_size_str);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_code_errno);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_connect);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_connect_env);
	tests[n++] =
	    (struct CMUnitTest)cmocka_unit_test(test_connect_no_daemon);
	CASES(hello_cases, test_connect_bad_hello);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_attach_errors);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_attach_pipelined);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_attach_wait);
	CASES(attached_cases, test_attach_fails_clean);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_daemon_gone);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_events);
	tests[n++] =
	    (struct CMUnitTest)cmocka_unit_test(test_event_unasked_answer);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_reconnect);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_request);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_accessors_null);
	CASES(local_cases, test_attach_local_device);
	assert_true(n <= ARRAY_SIZE(tests));
	return _cmocka_run_group_tests("librdmad", tests, n, NULL, NULL);
}
