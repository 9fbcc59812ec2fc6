// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-journal.h>

#include "log.h"
#include "utf8.h"

static int log_level = LOG_INFO;
static int log_to_journal;
static const char *log_ident = "rdmad";

static const char *const level_names[] = {
	[LOG_ERR] = "error", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
	[LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

int log_parse_level(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (level_names[i] && streq(level_names[i], name))
			return (int)i;
	return -EINVAL;
}

void log_set_level(int level)
{
	log_level = level;
}

int log_get_level(void)
{
	return log_level;
}

void log_open(const char *ident)
{
	log_ident = ident;
	/* systemd sets JOURNAL_STREAM when stderr goes to the journal. */
	log_to_journal = getenv("JOURNAL_STREAM") != NULL;
}

void log_msg(int prio, int err, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int saved = errno;

	if (prio > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (err < 0)
		err = -err;
	/* Messages quote what clients sent (request paths, names): one
	 * line of UTF-8, whatever bytes those hold. */
	utf8_trim_cut(buf);
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (!utf8_valid(buf)) {
		char *clean = utf8_sanitize(buf);

		if (clean) {
			snprintf(buf, sizeof(buf), "%s", clean);
			utf8_trim_cut(buf);
			free(clean);
		}
	}

	if (log_to_journal) {
		if (err)
			sd_journal_send("MESSAGE=%s: %s", buf, strerror(err),
					"PRIORITY=%d", prio, "ERRNO=%d", err,
					"SYSLOG_IDENTIFIER=%s", log_ident, NULL);
		else
			sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%d", prio,
					"SYSLOG_IDENTIFIER=%s", log_ident, NULL);
	} else {
		if (err)
			fprintf(stderr, "%s: %s: %s\n", log_ident, buf,
				strerror(err));
		else
			fprintf(stderr, "%s: %s\n", log_ident, buf);
	}
	errno = saved;
}
