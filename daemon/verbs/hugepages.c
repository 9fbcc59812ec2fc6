// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hugepages.h"

#define POOLS "/sys/kernel/mm/hugepages"

uint64_t hugepages_default_size(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Hugepagesize: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static int read_count(uint64_t page_size, const char *what, uint64_t *out)
{
	char path[128];
	unsigned long long v;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), POOLS "/hugepages-%" PRIu64 "kB/%s",
		 page_size / 1024, what);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	r = fscanf(f, "%llu", &v) == 1 ? 0 : -EIO;
	fclose(f);
	if (!r)
		*out = v;
	return r;
}

int hugepages_pool(uint64_t page_size, uint64_t *free, uint64_t *total)
{
	int r = read_count(page_size, "free_hugepages", free);

	return r < 0 ? r : read_count(page_size, "nr_hugepages", total);
}

const char *hugepages_label(uint64_t page_size, char *buf, size_t size)
{
	static const char units[] = "KMGT";
	uint64_t v = page_size / 1024;
	size_t u = 0;

	while (v >= 1024 && !(v % 1024) && u + 1 < sizeof(units) - 1) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, "%" PRIu64 "%c", v, units[u]);
	return buf;
}

const char *hugepages_shortage(uint64_t page_size, uint64_t need_pages,
			       char *buf, size_t size)
{
	uint64_t free = 0, total = 0;
	char label[16];
	int r = hugepages_pool(page_size, &free, &total);

	hugepages_label(page_size, label, sizeof(label));
	if (r == -ENOENT)
		snprintf(buf, size,
			 "this host has no %s huge pages (no " POOLS
			 "/hugepages-%" PRIu64 "kB)",
			 label, page_size / 1024);
	else if (r < 0)
		snprintf(buf, size, "cannot read the %s huge page pool: %s",
			 label, strerror(-r));
	else
		snprintf(buf, size,
			 "the %s huge page pool has %" PRIu64 " free page%s "
			 "(of %" PRIu64 "), %" PRIu64 " needed; raise " POOLS
			 "/hugepages-%" PRIu64 "kB/nr_hugepages%s",
			 label, free, free == 1 ? "" : "s", total, need_pages,
			 page_size / 1024,
			 page_size == hugepages_default_size()
				 ? " (sysctl vm.nr_hugepages)"
				 : "");
	return buf;
}
