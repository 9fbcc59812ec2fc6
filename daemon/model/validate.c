// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "config.h"
#include "util.h"
#include "validate.h"

/* The most the child may say: the errors, or the image, of the largest
 * files (16 MiB each; an image is smaller than its text, 0.4-0.75 x for
 * 10k-object files) and then some. */
#define VALIDATE_MAX_REPLY (256u << 20)

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

/*
 * The child: parse and verify, answer, exit. The answer is one byte and
 * what it says: 'E' and the errors as a JSON array
 * (config_errors_json's), or 'I' and the configuration's image
 * (config_image), which the daemon loads as it is.
 */
static _Noreturn void child(const char *path, int fd)
{
	struct config *c = NULL;
	char *out = NULL;
	size_t len = 0;
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
	if (c->n_errors) {
		json_t *e = config_errors_json(c);

		if (!e || write_all(fd, "E", 1) < 0 ||
		    json_dumpfd(e, fd, JSON_COMPACT) < 0)
			_exit(3);
	} else if (config_image(c, &out, &len) < 0 ||
		   write_all(fd, "I", 1) < 0 || write_all(fd, out, len) < 0) {
		_exit(3);
	}
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

/* Testing aid: RDMAD_TEST_VALIDATE_PAUSE_MS holds the daemon that long
 * between the child's answer and the reload's apply, so that the suite
 * can change the files in between. */
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

/* Where a child that did not answer in time was (before it is killed):
 * its state and kernel wait channel, as /proc shows them, so that the
 * message says what it hung in ("futex_wait_queue": a lock). */
static char *describe_hang(pid_t pid, int ms)
{
	char path[64], stat[512] = "", wchan[64] = "", *why = NULL, *end;
	const char *state = "?";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re"))) {
		if (!fgets(stat, sizeof(stat), f))
			stat[0] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
	if ((f = fopen(path, "re"))) {
		if (!fgets(wchan, sizeof(wchan), f))
			wchan[0] = '\0';
		fclose(f);
	}
	/* "pid (comm) S ...": the state after the last ')'. */
	end = strrchr(stat, ')');
	if (end && end[1] == ' ' && end[2]) {
		end[3] = '\0';
		state = end + 2;
	}
	if (asprintf(&why,
		     "reading the configuration did not finish in %d ms (the "
		     "reading child was in state %s, waiting in %s)",
		     ms, state, wchan[0] ? wchan : "?") < 0)
		why = NULL;
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
			     json_t **errors, struct config **loaded,
			     char **why)
{
	_cleanup_free_ char *out = NULL;
	int fds[2], status, r, ms = timeout_ms();
	struct config *c;
	size_t len = 0;
	pid_t pid;

	*errors = NULL;
	*loaded = NULL;
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
	if (r == -ETIMEDOUT)
		*why = describe_hang(pid, ms);
	if (r == -ETIMEDOUT || r == -EMSGSIZE)
		kill(pid, SIGKILL);
	/* Before it is reaped, while its pid cannot be someone else's. */
	if (!child_is(vc, 0)) {
		waitpid(pid, &status, 0);
		free(*why);
		*why = NULL;
		return -ECANCELED;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			free(*why);
			*why = NULL;
			return -errno;
		}
	if (r == -ETIMEDOUT)
		return *why ? -ETIMEDOUT : -ENOMEM;
	if (r < 0)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		*why = describe(status);
		return -EPIPE;
	}
	if (len && out[0] == 'E') {
		json_t *e = json_loadb(out + 1, len - 1, 0, NULL);

		if (!json_is_array(e) || !json_array_size(e)) {
			json_decref(e);
			return -EPROTO;
		}
		*errors = e;
		return -EINVAL;
	}
	if (!len || out[0] != 'I')
		return -EPROTO;
	r = config_from_image(out + 1, len - 1, &c);
	if (r < 0)
		return r;
	test_pause();
	*loaded = c;
	return 0;
}
