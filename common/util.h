/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the daemon, the client and the tests. */
#ifndef RDMAD_UTIL_H
#define RDMAD_UTIL_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define container_of(ptr, type, member)                                        \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))

/* Hand ownership on: returns the value and clears the variable. */
#define TAKE_PTR(p)                                                            \
	({                                                                     \
		__typeof__(p) _p = (p);                                        \
		(p) = NULL;                                                    \
		_p;                                                            \
	})
#define TAKE_FD(fd)                                                            \
	({                                                                     \
		int _fd = (fd);                                                \
		(fd) = -1;                                                     \
		_fd;                                                           \
	})

static inline void freep(void *p)
{
	free(*(void **)p);
}

/* Close *fd if open, and say so in it (-1): a second closep() of the
 * same variable is a no-op, never a close of whatever took the number
 * since (a session's socket, in the daemon: issue 48's note). */
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
		*fd = -1;
	}
}

/* Close fds[0..n), those not -1. */
static inline void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		closep(&fds[i]);
}

/* Close f, an open_memstream() of *buf: true when all was written, else
 * *buf is freed (and NULL). */
static inline bool memstream_done(FILE *f, char **buf)
{
	bool ok = !ferror(f);

	if (fclose(f) != 0)
		ok = false;
	if (!ok) {
		free(*buf);
		*buf = NULL;
	}
	return ok;
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/*
 * Read fd to its end into a NUL-terminated buffer (to free) of at most max
 * bytes; with timeout_ms >= 0, give up when nothing comes for that long.
 * Returns 0, -EMSGSIZE past max, -ETIMEDOUT, -ENOMEM or the read's -errno.
 */
static inline int read_all(int fd, size_t max, int timeout_ms, char **out,
			   size_t *out_len)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (len + 1 >= cap) {
			char *nb = cap < max ? realloc(buf, cap * 2) : NULL;

			if (!nb) {
				err = cap < max ? -ENOMEM : -EMSGSIZE;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		if (timeout_ms >= 0 && poll(&pfd, 1, timeout_ms) == 0) {
			err = -ETIMEDOUT;
			break;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : 0;
			break;
		}
		len += (size_t)n;
	}
	if (err) {
		free(buf);
		return err;
	}
	buf[len] = '\0';
	*out = buf;
	if (out_len)
		*out_len = len;
	return 0;
}

/* Write all n bytes of p to fd, through short writes and EINTR: 0 or
 * -errno. */
static inline int write_all(int fd, const void *p, size_t n)
{
	const char *at = p;

	while (n) {
		ssize_t w = write(fd, at, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		at += w;
		n -= (size_t)w;
	}
	return 0;
}

/* strerror(e) without its locale lookup (rdmad speaks English): for
 * paths that run per request. */
static inline const char *errno_desc(int e)
{
	const char *d = strerrordesc_np(e);

	return d ? d : strerror(e);
}

static inline int streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

#endif
