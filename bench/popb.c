// SPDX-License-Identifier: MIT
/*
 * popb: the population phase of a large memory against the machine's
 * floor, in one process each time, on fresh pages of a memfd.
 *
 *   popb -m populate -s BYTES -t THREADS
 *       rdmad's own population (daemon/verbs/populate.c, linked in):
 *       MADV_POPULATE_WRITE in chunks on THREADS threads.
 *   popb -m memset -s BYTES -t THREADS
 *       the floor: THREADS threads each memset() its slice of the
 *       fresh mapping (each page faulted in, zeroed by the kernel, then
 *       written), the most any population on as many threads can do.
 *
 * Prints "secs X": from before the first fault to the last thread's end;
 * the memfd's creation, mapping and release stay out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "populate.h"

struct slice {
	char *p;
	size_t len;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *fill(void *arg)
{
	struct slice *s = arg;

	memset(s->p, 0x5a, s->len);
	return NULL;
}

static int memset_threads(char *p, size_t len, unsigned int n)
{
	pthread_t t[64];
	struct slice s[64];
	size_t per = (len / n + 4095) & ~(size_t)4095;

	for (unsigned int i = 0; i < n; i++) {
		size_t off = per * i;

		s[i].p = p + off;
		s[i].len = off >= len ? 0 : len - off < per ? len - off : per;
		if (pthread_create(&t[i], NULL, fill, &s[i]))
			return -1;
	}
	for (unsigned int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = NULL;
	unsigned long long bytes = 0;
	unsigned int threads = 1;
	_Atomic uint64_t done = 0;
	double t0, t1;
	char *p;
	int opt, fd, r;

	while ((opt = getopt(argc, argv, "m:s:t:")) != -1) {
		switch (opt) {
		case 'm':
			mode = optarg;
			break;
		case 's':
			bytes = strtoull(optarg, NULL, 0);
			break;
		case 't':
			threads = (unsigned int)atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!mode || !bytes || threads < 1 || threads > 64) {
		fprintf(stderr, "usage: popb -m populate|memset -s BYTES "
				"-t THREADS (1-64)\n");
		return 2;
	}
	fd = memfd_create("popb", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
		perror("popb: memfd");
		return 1;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("popb: mmap");
		return 1;
	}
	populate_set_threads(threads);
	t0 = now();
	if (!strcmp(mode, "populate"))
		r = populate(p, bytes, 0, &done, NULL);
	else
		r = memset_threads(p, bytes, threads);
	t1 = now();
	if (r) {
		fprintf(stderr, "popb: %s: %s\n", mode, strerror(r < 0 ? -r : EIO));
		return 1;
	}
	printf("secs %.6f\n", t1 - t0);
	munmap(p, bytes);
	close(fd);
	return 0;
}
