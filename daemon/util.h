/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the daemon, the client and the tests. */
#ifndef RDMAD_UTIL_H
#define RDMAD_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
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

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

static inline int streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

#endif
