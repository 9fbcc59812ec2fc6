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
/*
 * What a record is about, for the journal: RDMAD_PROFILE=, RDMAD_KIND=,
 * RDMAD_OBJECT= and MESSAGE_ID= fields (each only when set). On stderr
 * only the message is written. The engine fills it in; it knows no
 * front end.
 */
struct log_ctx {
	const char *profile;
	const char *kind;   /* pd, mr, qp, ... or "profile" */
	const char *object; /* the object's name */
	const char *message_id; /* 32 hex digits, one of MSGID_* */
};

void log_ctx(int prio, int err, const struct log_ctx *ctx, const char *fmt,
	     ...) _printf_(4, 5);

/* MESSAGE_ID= of the key events (rdmad(8), LOGGING); fixed for good. */
#define MSGID_READY "82b92ff884d84fcda4f8b05275c2c21e"
#define MSGID_RELOADED "4cc6e80021b04fd6a56b78ac6e3ec7fd"
#define MSGID_RELOAD_REFUSED "0bbbfd428402430c9c486eea77073e8a"
#define MSGID_DEVICE_GONE "8e30371028524b2c84dc06fc179954fa"

/* A record about one object or profile (NULL kind/object: the profile). */
#define log_object(prio, err, profile_, kind_, object_, ...)                   \
	log_ctx((prio), (err),                                                 \
		&(struct log_ctx){ .profile = (profile_), .kind = (kind_),     \
				   .object = (object_) },                      \
		__VA_ARGS__)

/* Write the count of repeats held back, if any (at exit). */
void log_flush(void);

/* err is a positive or negative errno appended as ": strerror", or 0. */
#define log_error(err, ...) log_msg(LOG_ERR, (err), __VA_ARGS__)
#define log_warn(err, ...) log_msg(LOG_WARNING, (err), __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, 0, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, 0, __VA_ARGS__)

#endif
