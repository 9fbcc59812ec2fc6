/* SPDX-License-Identifier: MIT */
/* Logging: to the journal under systemd, else to stderr. Only the edges log. */
#ifndef RDMAD_LOG_H
#define RDMAD_LOG_H

#include <syslog.h>
#include "util.h"

int log_parse_level(const char *name);
void log_set_level(int level);
int log_get_level(void);
void log_open(const char *ident);

/* Identical lines in a row are written a few times, then counted
 * ("last message repeated N more times: ..."). */
void log_msg(int prio, int err, const char *fmt, ...) _printf_(3, 4);
/* Write the count of repeats held back, if any (at exit). */
void log_flush(void);

/* err is a positive or negative errno appended as ": strerror", or 0. */
#define log_error(err, ...) log_msg(LOG_ERR, (err), __VA_ARGS__)
#define log_warn(err, ...) log_msg(LOG_WARNING, (err), __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, 0, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, 0, __VA_ARGS__)

#endif
