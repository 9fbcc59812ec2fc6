// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "hostmem.h"
#include "hugepages.h"
#include "memory.h"
#include "populate.h"

#ifndef MFD_HUGE_SHIFT /* linux/memfd.h, which clashes with glibc's */
#define MFD_HUGE_SHIFT 26
#endif

static int memory_open(const struct memory_spec *m)
{
	int fd;

	switch (m->backing) {
	case MEMORY_MEMFD:
		fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
		break;
	case MEMORY_HUGETLB:
		/* MFD_HUGE_*: log2 of the page size, above MFD_HUGE_SHIFT. */
		fd = memfd_create(m->name,
				  MFD_CLOEXEC | MFD_HUGETLB |
					  (m->page_size
						   ? (unsigned int)__builtin_ctzll(
							     m->page_size)
							     << MFD_HUGE_SHIFT
						   : 0));
		break;
	case MEMORY_FILE:
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

/* A kept memfd of this key and type of the right size, or -1. */
static int take_kept(const struct memory_spec *m, const char *key)
{
	struct stat st;
	int fd = -1;

	if (!key || !memory_keepable(m->backing))
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

int memory_create(const struct memory_spec *m, struct memory *mem)
{
	return memory_create_keyed(m, NULL, NULL, mem, NULL, 0);
}

static int say(char *why, size_t size, int err, const char *fmt, ...)
	_printf_(4, 5);
static int say(char *why, size_t size, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* Would a large memory fit? Pinned by its registration, it cannot be
 * paged out: a population past what the host has ends in the OOM
 * killer, so it is refused first. Hugetlb memory has its own pool, a
 * file's pages their file. */
static int check_room(const struct memory_spec *m, char *why, size_t size)
{
	struct hostmem h;

	if ((m->backing != MEMORY_ANONYMOUS && m->backing != MEMORY_MEMFD) ||
	    hostmem_read(&h) < 0 || m->size <= h.available + h.swap_free)
		return 0;
	return say(why, size, -ENOMEM,
		   "%" PRIu64 " bytes are more than this host has free "
		   "(MemAvailable %" PRIu64 " + SwapFree %" PRIu64 " bytes)",
		   m->size, h.available, h.swap_free);
}

/* Anonymous memory, private (a client never maps it), on a huge page
 * boundary when huge pages may back it. */
static void *map_anonymous(const struct memory_spec *m)
{
	uint64_t huge = m->no_thp ? 0 : hostmem_thp_size();
	size_t len = m->size;
	char *p, *aligned;

	if (!huge || m->size < huge)
		return mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return p;
	aligned = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (aligned > p)
		munmap(p, (size_t)(aligned - p));
	munmap(aligned + len, (size_t)(p + huge - aligned));
	return aligned;
}

/* A file or memfd of m's size; a file's blocks reserved, so that a
 * registration never finds the filesystem full under a client. */
static int size_file(const struct memory_spec *m, int fd, char *why,
		     size_t size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	/* Grow a file to size, never cut what someone left there. */
	if ((uint64_t)st.st_size < m->size && ftruncate(fd, (off_t)m->size) < 0)
		return -errno;
	if (m->backing != MEMORY_FILE || fallocate(fd, 0, 0, (off_t)m->size) == 0)
		return 0;
	if (errno == EOPNOTSUPP)
		return say(why, size, -EOPNOTSUPP,
			   "the filesystem of %s cannot reserve the file's "
			   "blocks (fallocate: %s); put it on one that can "
			   "(tmpfs, ext4, xfs, btrfs)",
			   m->path, strerror(errno));
	return say(why, size, -errno, "cannot reserve %" PRIu64
		   " bytes for %s (fallocate): %s", m->size, m->path,
		   strerror(errno));
}

/* Transparent huge pages: asked for unless refused (anonymous
 * memory and memfds; the policy decides whether they come). */
static void advise(const struct memory_spec *m, void *addr)
{
	/* The daemon forks only to read a configuration (validate.c), and
	 * that child uses none of this: left out of it, 10k mappings are
	 * neither copied at the fork nor torn down at the child's exit. A
	 * refusal only costs that time. */
	(void)madvise(addr, m->size, MADV_DONTFORK);
	if (m->backing == MEMORY_ANONYMOUS || m->backing == MEMORY_MEMFD)
		(void)madvise(addr, m->size,
			      m->no_thp ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
}

/* A large memory's stats, populated unless it came back from the
 * store (its pages are there). */
static int fill(const struct memory_spec *m, void *addr, bool from_store,
		const atomic_bool *stop, struct memory *mem, char *why,
		size_t size)
{
	struct memory_stats *st = calloc(1, sizeof(*st));
	uint64_t page = m->backing == MEMORY_HUGETLB
				? (m->page_size ? m->page_size
						: hugepages_default_size())
				: 0;
	int r = 0;

	if (!st)
		return -ENOMEM;
	atomic_init(&st->refs, 1);
	atomic_store(&mem->stats, st);
	if (from_store) {
		atomic_store(&st->populated, m->size);
		return 0;
	}
	r = populate(addr, m->size, page, &st->populated, stop);
	if (r < 0) {
		atomic_store(&mem->stats, NULL);
		free(st);
		if (r != -ECANCELED)
			say(why, size, r, "populating %" PRIu64 " bytes: %s",
			    m->size, strerror(-r));
		return r;
	}
	/* What backs most of it: THP's page size when huge pages do. */
	if (hostmem_mapping(addr, &st->page_size, &st->huge_bytes) == 0 &&
	    st->huge_bytes > m->size / 2 && hostmem_thp_size())
		st->page_size = hostmem_thp_size();
	return 0;
}

int memory_create_keyed(const struct memory_spec *m, const char *key,
			const atomic_bool *stop, struct memory *mem,
			char *why, size_t why_size)
{
	bool large = populate_large(m->size), from_store = false;
	_cleanup_close_ int fd = -1;
	void *addr;
	int r;

	if (why && why_size)
		why[0] = '\0';
	if (m->size > SIZE_MAX)
		return -EOVERFLOW;
	fd = take_kept(m, key);
	from_store = fd >= 0;
	if (large && !from_store) {
		r = check_room(m, why, why_size);
		if (r < 0)
			return r;
	}
	if (m->backing == MEMORY_ANONYMOUS) {
		addr = map_anonymous(m);
	} else {
		if (fd < 0)
			fd = memory_open(m);
		if (fd < 0)
			return fd;
		r = from_store ? 0 : size_file(m, fd, why, why_size);
		if (r < 0)
			return r;
		/* Huge pages are taken now, not at the first touch: a short
		 * pool fails the creation, not a client with SIGBUS. A large
		 * memory's are, on several threads (fill()). */
		addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE,
			    MAP_SHARED | (m->backing == MEMORY_HUGETLB && !large
						  ? MAP_POPULATE
						  : 0),
			    fd, 0);
	}
	if (addr == MAP_FAILED)
		return -errno;
	advise(m, addr);
	mem->stats = NULL;
	r = large ? fill(m, addr, from_store, stop, mem, why, why_size) : 0;
	if (r < 0) {
		munmap(addr, m->size);
		return r;
	}
	mem->fd = TAKE_FD(fd);
	mem->addr = addr;
	mem->size = m->size;
	mem->kept = from_store;
	return 0;
}

struct memory_stats *memory_stats_hold(struct memory *mem,
				       uint64_t registered)
{
	struct memory_stats *st = atomic_load(&mem->stats);

	if (st) {
		atomic_fetch_add(&st->refs, 1);
		atomic_fetch_add(&st->registered, registered);
	}
	return st;
}

void memory_stats_release(struct memory_stats *st, uint64_t registered)
{
	if (!st)
		return;
	atomic_fetch_sub(&st->registered, registered);
	if (atomic_fetch_sub(&st->refs, 1) == 1)
		free(st);
}

void memory_destroy(struct memory *mem)
{
	if (mem->addr)
		munmap(mem->addr, mem->size);
	closep(&mem->fd);
	memory_stats_release(atomic_exchange(&mem->stats, NULL), 0);
	mem->kept = false;
	mem->addr = NULL;
	mem->size = 0;
}
