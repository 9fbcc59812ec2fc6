/* SPDX-License-Identifier: MIT */
/*
 * A configuration read first in a short-lived child process: whatever the
 * files hold, a crash or a hang while parsing and verifying them is a
 * failed reload with a clear message, never the end of the daemon and the
 * objects it holds. A configuration the child found valid comes back
 * whole, as an image (config_image): the daemon loads what the child
 * read, as it read it, without parsing the files again; files rewritten
 * since are for the next reload.
 */
#ifndef RDMAD_VALIDATE_H
#define RDMAD_VALIDATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "config.h"

/* How long the child may take, in milliseconds, unless the environment
 * says otherwise (RDMAD_VALIDATE_TIMEOUT_MS, for tests). */
#define VALIDATE_TIMEOUT_MS 20000

/* The child of a validation under way, so that another thread may end
 * it (validate_cancel): the daemon stops without waiting it out. */
struct validate_child {
	pthread_mutex_t lock;
	pid_t pid; /* 0: none to kill (not forked yet, or being reaped) */
	bool cancelled;
};
#define VALIDATE_CHILD_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* Kill the child, or keep the validation from starting one. */
void validate_cancel(struct validate_child *vc);

/*
 * Parse and verify the configuration at path in a child process (vc:
 * where another thread may cancel it, or NULL).
 *   0        valid: *loaded is the configuration the child read
 *            (config_free it);
 *   -EINVAL  invalid: *errors is the array of {file, line, message} the
 *            daemon would report (config_errors_json's shape);
 *   -EPIPE   the child crashed or was killed, -ETIMEDOUT it hung: *why
 *            says what happened (to free);
 *   -ECANCELED validate_cancel;
 *   -EPROTO  the child's answer is not one (not an image);
 *   other    -errno of fork/pipe, -ENOMEM.
 */
int config_validate_isolated(const char *path, struct validate_child *vc,
			     json_t **errors, struct config **loaded,
			     char **why);

#endif
