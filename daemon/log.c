// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/uio.h>
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

/* systemd sets JOURNAL_STREAM=dev:inode of the stream it connects to
 * stderr. It is inherited, though: only when stderr is still that very
 * stream (not redirected by a shell in between) is the journal ours. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int n = 0;

	if (!e || sscanf(e, "%llu:%llu%n", &dev, &ino, &n) != 2 || e[n])
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_open(const char *ident)
{
	log_ident = ident;
	log_to_journal = stderr_is_journal();
}

/* One journal field "NAME=value" in iov[*n], in buf. */
static void field(struct iovec *iov, size_t *n, char *buf, size_t size,
		  const char *name, const char *value)
{
	int len;

	if (!value)
		return;
	len = snprintf(buf, size, "%s=%s", name, value);
	if (len < 0)
		return;
	iov[*n].iov_base = buf;
	iov[*n].iov_len = (size_t)len < size ? (size_t)len : size - 1;
	(*n)++;
}

static void journal_write(int prio, int err, const char *msg,
			  const struct log_ctx *ctx)
{
	char f[8][1200], num[2][16];
	struct iovec iov[8];
	size_t n = 0;

	if (err) {
		char text[1100];

		snprintf(text, sizeof(text), "%s: %s", msg, strerror(err));
		field(iov, &n, f[n], sizeof(f[n]), "MESSAGE", text);
		snprintf(num[1], sizeof(num[1]), "%d", err);
		field(iov, &n, f[n], sizeof(f[n]), "ERRNO", num[1]);
	} else {
		field(iov, &n, f[n], sizeof(f[n]), "MESSAGE", msg);
	}
	snprintf(num[0], sizeof(num[0]), "%d", prio);
	field(iov, &n, f[n], sizeof(f[n]), "PRIORITY", num[0]);
	field(iov, &n, f[n], sizeof(f[n]), "SYSLOG_IDENTIFIER", log_ident);
	if (ctx) {
		field(iov, &n, f[n], sizeof(f[n]), "RDMAD_PROFILE", ctx->profile);
		field(iov, &n, f[n], sizeof(f[n]), "RDMAD_KIND", ctx->kind);
		field(iov, &n, f[n], sizeof(f[n]), "RDMAD_OBJECT", ctx->object);
		field(iov, &n, f[n], sizeof(f[n]), "MESSAGE_ID",
		      ctx->message_id);
	}
	sd_journal_sendv(iov, (int)n);
}

static void log_write_ctx(int prio, int err, const char *msg,
			  const struct log_ctx *ctx)
{
	if (log_to_journal) {
		journal_write(prio, err, msg, ctx);
	} else {
		if (err)
			fprintf(stderr, "%s: %s: %s\n", log_ident, msg,
				strerror(err));
		else
			fprintf(stderr, "%s: %s\n", log_ident, msg);
	}
}

static void log_write(int prio, int err, const char *msg)
{
	log_write_ctx(prio, err, msg, NULL);
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

static void log_vmsg(int prio, int err, const struct log_ctx *ctx,
		     const char *fmt, va_list ap)
{
	char raw[1024], buf[1024];
	int saved = errno;
	struct timespec ts;

	if (prio > log_level)
		return;
	vsnprintf(raw, sizeof(raw), fmt, ap);
	sanitize(raw, buf, sizeof(buf));
	if (err < 0)
		err = -err;
	clock_gettime(CLOCK_MONOTONIC, &ts);

	/* (A count of repeats written later carries no context: the text
	 * names the object anyway.) */
	pthread_mutex_lock(&repeat_lock);
	if (repeat_admit(prio, err, buf, ts.tv_sec))
		log_write_ctx(prio, err, buf, ctx);
	pthread_mutex_unlock(&repeat_lock);
	errno = saved;
}

void log_msg(int prio, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(prio, err, NULL, fmt, ap);
	va_end(ap);
}

void log_ctx(int prio, int err, const struct log_ctx *ctx, const char *fmt,
	     ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(prio, err, ctx, fmt, ap);
	va_end(ap);
}
