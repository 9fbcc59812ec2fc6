/* SPDX-License-Identifier: MIT */
/*
 * A configuration read first in a short-lived child process: whatever the
 * files hold, a crash or a hang while parsing and verifying them is a
 * failed reload with a clear message, never the end of the daemon and the
 * objects it holds. Only a configuration the child found valid is then
 * loaded by the daemon itself.
 */
#ifndef RDMAD_VALIDATE_H
#define RDMAD_VALIDATE_H

#include <jansson.h>

/* How long the child may take, in milliseconds, unless the environment
 * says otherwise (RDMAD_VALIDATE_TIMEOUT_MS, for tests). */
#define VALIDATE_TIMEOUT_MS 20000

/*
 * Parse and verify the configuration at path in a child process.
 *   0        valid;
 *   -EINVAL  invalid: *errors is the array of {file, line, message} the
 *            daemon would report (config_errors_json's shape);
 *   -EPIPE   the child crashed or was killed, -ETIMEDOUT it hung: *why
 *            says what happened (to free);
 *   other    -errno of fork/pipe.
 */
int config_validate_isolated(const char *path, json_t **errors, char **why);

#endif
