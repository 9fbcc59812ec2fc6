// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "durable.h"

#define MAGIC "RDMADREC"

/* Little-endian on every machine we build for; the record never leaves
 * the host, and only this code reads it. */
struct header {
	char magic[8];
	uint64_t gen;
	uint64_t off, len;
	uint64_t sum;  /* XXH64 of the version */
	uint64_t hsum; /* XXH64 of the fields above */
};

_Static_assert(sizeof(struct header) == 48, "one write, one page");

static uint64_t header_sum(const struct header *h)
{
	return XXH64(h, offsetof(struct header, hsum), 0);
}

/* fd's header, when it is whole and names a version inside the file. */
static bool header_read(int fd, struct header *h)
{
	struct stat st;

	if (pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
	    memcmp(h->magic, MAGIC, sizeof(h->magic)) ||
	    h->hsum != header_sum(h) || fstat(fd, &st) < 0)
		return false;
	return h->off >= DURABLE_DATA_OFFSET && h->len <= (uint64_t)st.st_size &&
	       h->off <= (uint64_t)st.st_size - h->len;
}

bool durable_is(int fd)
{
	struct header h;

	return header_read(fd, &h);
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static uint64_t page_up(uint64_t n)
{
	return (n + DURABLE_DATA_OFFSET - 1) & ~(uint64_t)(DURABLE_DATA_OFFSET - 1);
}

int64_t durable_write(int fd, const void *text, size_t len)
{
	struct header cur, h = { .magic = MAGIC };
	bool have = header_read(fd, &cur);
	int r;

	if (!have) {
		/* Not ours yet (empty, or an older run's plain text): it
		 * starts afresh. */
		if (ftruncate(fd, 0) < 0)
			return -errno;
		cur = (struct header){ .gen = 0 };
	}
	h.gen = cur.gen + 1;
	h.len = len;
	/* Below the current version when it fits there, else above it. */
	h.off = !have || DURABLE_DATA_OFFSET + len <= cur.off
			? DURABLE_DATA_OFFSET
			: page_up(cur.off + cur.len);
	h.sum = XXH64(text, len, 0);
	h.hsum = header_sum(&h);
	r = pwrite_all(fd, text, len, h.off);
	if (r < 0)
		return r;
	/* The version is whole: now name it. */
	r = pwrite_all(fd, &h, sizeof(h), 0);
	if (r < 0)
		return r;
	/* What lies past it is no one's any more. */
	if (h.off == DURABLE_DATA_OFFSET &&
	    ftruncate(fd, (off_t)page_up(h.off + len)) < 0) {
		/* Only room not given back: the version is named. */
	}
	return (int64_t)h.gen;
}

int durable_read(int fd, size_t max, char **out, size_t *len, uint64_t *gen)
{
	struct header h;
	char *buf;
	ssize_t n;

	if (!header_read(fd, &h)) {
		char magic[8];

		return pread(fd, magic, sizeof(magic), 0) ==
				       (ssize_t)sizeof(magic) &&
			       !memcmp(magic, MAGIC, sizeof(magic))
			       ? -EBADMSG
			       : -ENOENT;
	}
	if (h.len > max)
		return -EMSGSIZE;
	buf = malloc(h.len + 1);
	if (!buf)
		return -ENOMEM;
	n = pread(fd, buf, h.len, (off_t)h.off);
	if (n != (ssize_t)h.len || XXH64(buf, h.len, 0) != h.sum) {
		free(buf);
		return n < 0 ? -errno : -EBADMSG;
	}
	buf[h.len] = '\0';
	*out = buf;
	*len = h.len;
	if (gen)
		*gen = h.gen;
	return 0;
}
