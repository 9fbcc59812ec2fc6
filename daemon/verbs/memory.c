// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "memory.h"

static int memory_open(const struct conf_memory *m)
{
	int fd;

	switch (m->backing) {
	case MEM_MEMFD:
		fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
		break;
	case MEM_HUGETLB:
		fd = memfd_create(m->name, MFD_CLOEXEC | MFD_HUGETLB);
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

int memory_create(const struct conf_memory *m, struct memory *mem)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	void *addr;

	if (m->size > SIZE_MAX)
		return -EOVERFLOW;
	if (m->backing == MEM_ANONYMOUS) {
		addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	} else {
		fd = memory_open(m);
		if (fd < 0)
			return fd;
		if (fstat(fd, &st) < 0)
			return -errno;
		/* Grow a file to size, never cut what someone left there. */
		if ((uint64_t)st.st_size < m->size &&
		    ftruncate(fd, (off_t)m->size) < 0)
			return -errno;
		addr = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			    fd, 0);
	}
	if (addr == MAP_FAILED)
		return -errno;
	*mem = (struct memory){ .fd = TAKE_FD(fd), .addr = addr,
				.size = m->size };
	return 0;
}

void memory_destroy(struct memory *mem)
{
	if (mem->addr)
		munmap(mem->addr, mem->size);
	closep(&mem->fd);
	*mem = (struct memory){ .fd = -1 };
}
