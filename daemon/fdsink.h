/* SPDX-License-Identifier: MIT */
/*
 * Closing what a client may have made slow to close, off the loop.
 *
 * A close(2) runs the file's flush and, for the last reference, its
 * release, in the caller: a TCP socket with unsent data and SO_LINGER
 * waits out its linger there, a FUSE file waits for its server's answer
 * to FLUSH (for ever, if the server never gives one). Any fd a client
 * sends over a unix socket is such a file, and so is the client's
 * socket itself while fds it sent are still queued in it (the kernel
 * releases them when the socket goes, in the thread that closes it).
 * The event loop never closes those: it hands them here, and threads
 * of their own close them.
 *
 * One thread closes in turn; when every thread has been in one close
 * for more than FDSINK_STUCK_MSEC, the next fd handed over starts
 * another, up to FDSINK_THREADS_MAX. Past that (every thread stuck, the
 * work of a client that means harm) fds wait in the queue, up to
 * FDSINK_QUEUE_MAX; beyond it they are kept open (counted, logged
 * once): the loop is never the one to wait.
 */
#ifndef RDMAD_FDSINK_H
#define RDMAD_FDSINK_H

#include <stddef.h>

#define FDSINK_STUCK_MSEC 100
#define FDSINK_THREADS_MAX 16
#define FDSINK_QUEUE_MAX 65536

/* Hand fd over to be closed (fd < 0: nothing). Never blocks. */
void fdsink_close(int fd);
/* The fds of fds[0..n) handed over; each set to -1. */
void fdsink_close_all(int *fds, size_t n);

struct fdsink_stats {
	size_t queued;	  /* waiting for a thread */
	size_t threads;	  /* started */
	size_t busy;	  /* in a close now */
	size_t kept_open; /* past FDSINK_QUEUE_MAX, never closed */
	unsigned long long closed;
};
void fdsink_stats(struct fdsink_stats *st);

#endif
