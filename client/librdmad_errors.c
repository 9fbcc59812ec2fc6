// SPDX-License-Identifier: MIT
/*
 * librdmad's errors: the thread's last error, the daemon's codes as
 * errno values, sizes for people (rdmad_strerror(), rdmad_last_error()).
 * It calls no other part of the library.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "librdmad_internal.h"
#include "util.h"

__thread char client_last_error[CLIENT_ERROR_MAX];

/* ---- errors ---- */

const char *rdmad_version(void)
{
	return RDMAD_VERSION;
}

const char *rdmad_strerror(int err)
{
	static __thread char buf[128];

	if (err < 0)
		err = -err;
	/* GNU strerror_r returns the message, not always in buf. */
	return strerror_r(err, buf, sizeof(buf));
}

const char *rdmad_last_error(void)
{
	return client_last_error;
}

int client_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(client_last_error, sizeof(client_last_error), fmt, ap);
	va_end(ap);
	return err < 0 ? err : -err;
}

static const struct {
	const char *code;
	int err;
} error_codes[] = {
	{ "not_found", ENOENT },
	{ "forbidden", EACCES },
	{ "unauthorized", EACCES },
	{ "bad_request", EINVAL },
	{ "bad_json", EINVAL },
	{ "invalid_message", EINVAL },
	{ "not_ready", EAGAIN },
	{ "timeout", ETIMEDOUT },
	{ "too_many_requests", EBUSY },
	{ "not_supported", EOPNOTSUPP },
	{ "too_many_sessions", ECONNREFUSED },
	{ "unsupported_version", EPROTONOSUPPORT },
	{ "bad_message", EBADMSG },
	{ "message_too_large", EMSGSIZE },
	{ "device_error", EIO },
	{ "internal", EIO },
	{ "conflict", EEXIST },
};

int client_code_errno(const char *code)
{
	size_t i;

	for (i = 0; code && i < ARRAY_SIZE(error_codes); i++)
		if (streq(code, error_codes[i].code))
			return error_codes[i].err;
	return EPROTO;
}

void client_size_str(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	uint64_t unit = 1024, whole, tenths;
	size_t u = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
		return;
	}
	while (u + 1 < ARRAY_SIZE(units) && bytes / unit >= 1024) {
		unit *= 1024;
		u++;
	}
	whole = bytes / unit;
	tenths = ((bytes % unit) / (unit / 1024) * 10 + 1023) / 1024;
	if ((bytes % unit) && !tenths)
		tenths = 1;
	if (tenths >= 10) {
		whole++;
		tenths = 0;
	}
	if (tenths)
		snprintf(buf, size, "%llu.%llu %s", (unsigned long long)whole,
			 (unsigned long long)tenths, units[u]);
	else
		snprintf(buf, size, "%llu %s", (unsigned long long)whole,
			 units[u]);
}

