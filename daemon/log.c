// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static void log_write(int prio, int err, const char *msg)
{
	if (log_to_journal) {
		if (err)
			sd_journal_send("MESSAGE=%s: %s", msg, strerror(err),
					"PRIORITY=%d", prio, "ERRNO=%d", err,
					"SYSLOG_IDENTIFIER=%s", log_ident, NULL);
		else
			sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%d", prio,
					"SYSLOG_IDENTIFIER=%s", log_ident, NULL);
	} else {
		if (err)
			fprintf(stderr, "%s: %s: %s\n", log_ident, msg,
				strerror(err));
		else
			fprintf(stderr, "%s: %s\n", log_ident, msg);
	}
}

/*
 * Repeats: a condition that persists (a full fd table, clients that
 * retry in a loop) must not fill the journal. The same line (text, errno
 * and priority) is written LOG_REPEAT_BURST times within
 * LOG_REPEAT_WINDOW seconds; after that it is counted, and the count is
 * written when the window has passed (at the next line logged), when
 * the line is forgotten for others, or at exit. A few lines are
 * remembered at once, so that floods that interleave are counted too.
 */
#define LOG_REPEAT_BURST 3
#define LOG_REPEAT_WINDOW 10
#define LOG_REPEAT_SLOTS 16

struct repeat {
	char text[1024];
	int prio, err;
	unsigned long seen;	  /* times in this window */
	unsigned long suppressed; /* not written yet */
	time_t since;
	unsigned long long used; /* for forgetting the least recent */
};

static pthread_mutex_t repeat_lock = PTHREAD_MUTEX_INITIALIZER;
static struct repeat repeats[LOG_REPEAT_SLOTS];
static unsigned long long repeat_clock;

static void flush_repeat(struct repeat *r)
{
	char buf[1200];

	if (!r->suppressed)
		return;
	snprintf(buf, sizeof(buf), "repeated %lu more time%s: %s",
		 r->suppressed, r->suppressed == 1 ? "" : "s", r->text);
	log_write(r->prio, r->err, buf);
	r->suppressed = 0;
}

void log_flush(void)
{
	pthread_mutex_lock(&repeat_lock);
	for (size_t i = 0; i < LOG_REPEAT_SLOTS; i++)
		flush_repeat(&repeats[i]);
	pthread_mutex_unlock(&repeat_lock);
}

/* Should this line be written? Counts it, and writes the counts whose
 * window has passed. */
static bool repeat_admit(int prio, int err, const char *text, time_t now)
{
	struct repeat *hit = NULL, *lru = &repeats[0];

	for (size_t i = 0; i < LOG_REPEAT_SLOTS; i++) {
		struct repeat *r = &repeats[i];

		if (r->suppressed && now - r->since >= LOG_REPEAT_WINDOW)
			flush_repeat(r);
		if (r->used && r->prio == prio && r->err == err &&
		    streq(r->text, text))
			hit = r;
		if (r->used < lru->used)
			lru = r;
	}
	if (!hit) {
		flush_repeat(lru);
		hit = lru;
		snprintf(hit->text, sizeof(hit->text), "%s", text);
		hit->prio = prio;
		hit->err = err;
		hit->seen = 0;
	}
	hit->used = ++repeat_clock;
	if (!hit->seen || now - hit->since >= LOG_REPEAT_WINDOW) {
		hit->since = now;
		hit->seen = 0;
	}
	if (++hit->seen > LOG_REPEAT_BURST) {
		hit->suppressed++;
		return false;
	}
	return true;
}

/* Length of the valid UTF-8 sequence at s (of a multi-byte character),
 * or 0. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
		   : s[0] >= 0xe0		  ? 3
		   : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
						  : 0;
	unsigned int cp = s[0] & (0x7f >> n);

	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

/* What clients send (paths, names) ends up in messages: one line each,
 * valid UTF-8, control characters and stray bytes as \xNN. */
static void sanitize(const char *in, char *out, size_t size)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;

	while (*s && o + 5 < size) {
		size_t n = *s >= 0x80 ? utf8_seq(s) : 1;

		if (*s < 0x20 || *s == 0x7f || !n) {
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", *s);
			s++;
			continue;
		}
		memcpy(out + o, s, n);
		o += n;
		s += n;
	}
	out[o] = '\0';
}

void log_msg(int prio, int err, const char *fmt, ...)
{
	char raw[1024], buf[1024];
	va_list ap;
	int saved = errno;
	struct timespec ts;

	if (prio > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	sanitize(raw, buf, sizeof(buf));
	if (err < 0)
		err = -err;
	clock_gettime(CLOCK_MONOTONIC, &ts);

	pthread_mutex_lock(&repeat_lock);
	if (repeat_admit(prio, err, buf, ts.tv_sec))
		log_write(prio, err, buf);
	pthread_mutex_unlock(&repeat_lock);
	errno = saved;
}
