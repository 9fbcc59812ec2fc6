// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rdmad.h"
#include "rdmad_internal.h"

static __thread char last_error[512];

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
	return last_error;
}

int client_set_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return err < 0 ? err : -err;
}
