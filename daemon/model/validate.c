// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "config.h"
#include "util.h"
#include "validate.h"

/* The most the child may say: the errors of a 16 MiB file and then some. */
#define VALIDATE_MAX_REPLY (64u << 20)

/* Testing aid: RDMAD_TEST_VALIDATE=crash|hang makes the child do that, so
 * that the suite can show the daemon survives both. */
static void test_fault(void)
{
	const char *f = getenv("RDMAD_TEST_VALIDATE");

	if (!f)
		return;
	if (streq(f, "crash"))
		raise(SIGSEGV);
	if (streq(f, "hang"))
		for (;;)
			pause();
}

/* What the child read, file by file in the order read: the XXH3 hash of
 * the bytes, as 32 hex digits (low half first). */
static json_t *read_json(const struct config *c)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->n_sources; i++) {
		char hex[33];

		snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64,
			 c->sources[i].digest[0], c->sources[i].digest[1]);
		if (json_array_append_new(a, json_string(hex)) < 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* The child: parse, verify, say what was found and what was read, exit. */
static _Noreturn void child(const char *path, int fd)
{
	struct config *c = NULL;
	json_t *reply;
	sigset_t none;

	/* The daemon's signals are blocked for sd-event; die of ours. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGSEGV, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "rdmad-validate");
	test_fault();
	if (config_load(path, &c) < 0)
		_exit(3);
	reply = json_pack("{s:o?, s:o?}", "errors", config_errors_json(c),
			  "read", read_json(c));
	if (!json_is_array(json_object_get(reply, "errors")) ||
	    !json_is_array(json_object_get(reply, "read")) ||
	    json_dumpfd(reply, fd, JSON_COMPACT) < 0)
		_exit(3);
	/* No cleanup: the process ends here, its memory with it. */
	_exit(0);
}

static int timeout_ms(void)
{
	const char *e = getenv("RDMAD_VALIDATE_TIMEOUT_MS");
	char *end;
	long v;

	if (!e)
		return VALIDATE_TIMEOUT_MS;
	v = strtol(e, &end, 10);
	return *end || v <= 0 || v > 3600000 ? VALIDATE_TIMEOUT_MS : (int)v;
}

/* The files the child read, as config_load_known() holds a load to:
 * a configuration with nothing but its sources' hashes. NULL if read is
 * not such a list. */
static struct config *read_parse(const json_t *read)
{
	struct config *c;
	const json_t *v;
	size_t i;

	if (!json_is_array(read))
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sources = calloc(json_array_size(read) + 1, sizeof(*c->sources));
	if (!c->sources) {
		free(c);
		return NULL;
	}
	json_array_foreach (read, i, v) {
		const char *hex = json_string_value(v);
		struct conf_source *s = &c->sources[c->n_sources++];
		int end = 0;

		if (!hex || strlen(hex) != 32 ||
		    sscanf(hex, "%16" SCNx64 "%16" SCNx64 "%n", &s->digest[0],
			   &s->digest[1], &end) != 2 ||
		    end != 32) {
			config_free(c);
			return NULL;
		}
	}
	return c;
}

/* Testing aid: RDMAD_TEST_VALIDATE_PAUSE_MS holds the daemon that long
 * between the child's answer and its own read, so that the suite can
 * change the files in between. */
static void test_pause(void)
{
	const char *e = getenv("RDMAD_TEST_VALIDATE_PAUSE_MS");
	long ms = e ? strtol(e, NULL, 10) : 0;

	if (ms > 0 && ms < 60000)
		usleep((useconds_t)ms * 1000);
}

static char *describe(int status)
{
	char *why = NULL;

	if (WIFSIGNALED(status))
		(void)!asprintf(&why,
				"reading the configuration crashed (%s)",
				strsignal(WTERMSIG(status)));
	else
		(void)!asprintf(&why,
				"reading the configuration failed (exit "
				"status %d)",
				WEXITSTATUS(status));
	return why;
}

void validate_cancel(struct validate_child *vc)
{
	pthread_mutex_lock(&vc->lock);
	vc->cancelled = true;
	/* Not reaped yet (see below): the pid is still the child's. */
	if (vc->pid > 0)
		kill(vc->pid, SIGKILL);
	pthread_mutex_unlock(&vc->lock);
}

/* Say which child runs now (pid), or none (0); false once cancelled. */
static bool child_is(struct validate_child *vc, pid_t pid)
{
	bool go;

	if (!vc)
		return true;
	pthread_mutex_lock(&vc->lock);
	vc->pid = pid;
	go = !vc->cancelled;
	pthread_mutex_unlock(&vc->lock);
	return go;
}

int config_validate_isolated(const char *path, struct validate_child *vc,
			     json_t **errors, struct config **read, char **why)
{
	_cleanup_free_ char *out = NULL;
	int fds[2], status, r, ms = timeout_ms();
	json_t *j, *e;
	size_t len = 0;
	pid_t pid;

	*errors = NULL;
	*read = NULL;
	*why = NULL;
	if (!child_is(vc, 0))
		return -ECANCELED;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		close(fds[0]);
		child(path, fds[1]);
	}
	close(fds[1]);
	if (!child_is(vc, pid))
		kill(pid, SIGKILL);
	/* It writes once, at the end: silence for ms is a hang. */
	r = read_all(fds[0], VALIDATE_MAX_REPLY, ms, &out, &len);
	close(fds[0]);
	if (r == -ETIMEDOUT || r == -EMSGSIZE)
		kill(pid, SIGKILL);
	/* Before it is reaped, while its pid cannot be someone else's. */
	if (!child_is(vc, 0)) {
		waitpid(pid, &status, 0);
		return -ECANCELED;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (r == -ETIMEDOUT) {
		(void)!asprintf(why,
				"reading the configuration did not finish in "
				"%d ms",
				ms);
		return -ETIMEDOUT;
	}
	if (r < 0)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		*why = describe(status);
		return -EPIPE;
	}
	j = json_loadb(out, len, 0, NULL);
	e = json_object_get(j, "errors");
	if (!json_is_array(e)) {
		json_decref(j);
		return -EPROTO;
	}
	if (json_array_size(e)) {
		*errors = json_incref(e);
		json_decref(j);
		return -EINVAL;
	}
	*read = read_parse(json_object_get(j, "read"));
	json_decref(j);
	if (!*read)
		return -EPROTO;
	test_pause();
	return 0;
}
