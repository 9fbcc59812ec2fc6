// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "memory.h"

#ifndef MFD_HUGE_SHIFT /* linux/memfd.h, which clashes with glibc's */
#define MFD_HUGE_SHIFT 26
#endif

static int memory_open(const struct conf_memory *m)
{
	int fd;

	switch (m->backing) {
	case MEM_MEMFD:
		fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
		break;
	case MEM_HUGETLB:
		/* MFD_HUGE_*: log2 of the page size, above MFD_HUGE_SHIFT. */
		fd = memfd_create(m->name,
				  MFD_CLOEXEC | MFD_HUGETLB |
					  (m->page_size
						   ? (unsigned int)__builtin_ctzll(
							     m->page_size)
							     << MFD_HUGE_SHIFT
						   : 0));
		break;
	case MEM_FILE:
		/* The operator named this path: do not follow a link
		 * someone put there instead. */
		fd = open(m->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			  0600);
		break;
	default:
		return -EINVAL;
	}
	return fd < 0 ? -errno : fd;
}

struct kept {
	char *key;
	int fd;
};

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static size_t n_kept;

int memory_keep(const char *key, int fd)
{
	struct kept *k = realloc(kept, (n_kept + 1) * sizeof(*kept));

	if (!k) {
		close(fd);
		return -ENOMEM;
	}
	kept = k;
	kept[n_kept].key = strdup(key);
	if (!kept[n_kept].key) {
		close(fd);
		return -ENOMEM;
	}
	kept[n_kept++].fd = fd;
	return 0;
}

void memory_keep_done(void (*gone)(const char *key))
{
	pthread_mutex_lock(&kept_lock);
	for (size_t i = 0; i < n_kept; i++) {
		if (kept[i].fd >= 0) {
			if (gone)
				gone(kept[i].key);
			close(kept[i].fd);
		}
		free(kept[i].key);
	}
	free(kept);
	kept = NULL;
	n_kept = 0;
	pthread_mutex_unlock(&kept_lock);
}

/* A kept memfd of this key and type of the right size, or -1. Only
 * memfds: a file backing keeps its contents by itself. */
static int take_kept(const struct conf_memory *m, const char *key)
{
	struct stat st;
	int fd = -1;

	if (!key || (m->backing != MEM_MEMFD && m->backing != MEM_HUGETLB))
		return -1;
	pthread_mutex_lock(&kept_lock);
	for (size_t i = 0; i < n_kept; i++)
		if (kept[i].fd >= 0 && streq(kept[i].key, key) &&
		    fstat(kept[i].fd, &st) == 0 &&
		    (uint64_t)st.st_size == m->size) {
			fd = kept[i].fd;
			kept[i].fd = -1;
			break;
		}
	pthread_mutex_unlock(&kept_lock);
	return fd;
}

int memory_create(const struct conf_memory *m, struct memory *mem)
{
	return memory_create_keyed(m, NULL, mem);
}

int memory_create_keyed(const struct conf_memory *m, const char *key,
			struct memory *mem)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	void *addr;
	bool from_store = false;

	if (m->size > SIZE_MAX)
		return -EOVERFLOW;
	if (m->backing == MEM_ANONYMOUS) {
		addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	} else {
		fd = take_kept(m, key);
		from_store = fd >= 0;
		if (fd < 0)
			fd = memory_open(m);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st) < 0)
			return -errno;
		/* Grow a file to size, never cut what someone left there. */
		if ((uint64_t)st.st_size < m->size &&
		    ftruncate(fd, (off_t)m->size) < 0)
			return -errno;
		/* Huge pages are taken now, not at the first touch: a short
		 * pool fails the creation, not a client with SIGBUS. */
		addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE,
			    MAP_SHARED |
				    (m->backing == MEM_HUGETLB ? MAP_POPULATE : 0),
			    fd, 0);
	}
	if (addr == MAP_FAILED)
		return -errno;
	/* The daemon forks only to read a configuration (validate.c), and
	 * that child uses none of this: left out of it, 10k mappings are
	 * neither copied at the fork nor torn down at the child's exit. A
	 * refusal only costs that time. */
	(void)madvise(addr, m->size, MADV_DONTFORK);
	*mem = (struct memory){ .fd = TAKE_FD(fd), .addr = addr,
				.size = m->size, .kept = from_store };
	return 0;
}

void memory_destroy(struct memory *mem)
{
	if (mem->addr)
		munmap(mem->addr, mem->size);
	closep(&mem->fd);
	*mem = (struct memory){ .fd = -1 };
}
