// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hostmem.h"

#define THP "/sys/kernel/mm/transparent_hugepage"

int hostmem_read(struct hostmem *out)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "MemTotal:", offsetof(struct hostmem, ram) },
		{ "SwapTotal:", offsetof(struct hostmem, swap) },
		{ "MemAvailable:", offsetof(struct hostmem, available) },
		{ "SwapFree:", offsetof(struct hostmem, swap_free) },
	};
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb;
	char line[128], key[32];

	*out = (struct hostmem){ 0 };
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%31s %llu kB", key, &kb) == 2)
			for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]);
			     i++)
				if (!strcmp(key, keys[i].key))
					*(uint64_t *)((char *)out +
						      keys[i].off) =
						(uint64_t)kb * 1024;
	fclose(f);
	return out->ram ? 0 : -EIO;
}

const char *hostmem_thp_policy(bool shmem, char *buf, size_t size)
{
	FILE *f = fopen(shmem ? THP "/shmem_enabled" : THP "/enabled", "re");
	char line[160], *a, *b;

	buf[0] = '\0';
	if (!f)
		return buf;
	/* "always [madvise] never": the bracketed word. */
	if (fgets(line, sizeof(line), f) && (a = strchr(line, '[')) &&
	    (b = strchr(a, ']'))) {
		*b = '\0';
		snprintf(buf, size, "%s", a + 1);
	}
	fclose(f);
	return buf;
}

bool hostmem_thp_usable(bool shmem, const char *policy)
{
	if (!shmem)
		return !strcmp(policy, "always") || !strcmp(policy, "madvise");
	return !strcmp(policy, "always") || !strcmp(policy, "within_size") ||
	       !strcmp(policy, "advise") || !strcmp(policy, "force");
}

uint64_t hostmem_thp_size(void)
{
	/* The PMD size never changes while we run: read once (0 not read
	 * yet, UINT64_MAX none). Racing first readers read the same. */
	static _Atomic uint64_t size;
	unsigned long long v = 0;
	uint64_t s = atomic_load(&size);
	FILE *f;

	if (s)
		return s == UINT64_MAX ? 0 : s;
	f = fopen(THP "/hpage_pmd_size", "re");
	if (f && fscanf(f, "%llu", &v) != 1)
		v = 0;
	if (f)
		fclose(f);
	atomic_store(&size, v ? v : UINT64_MAX);
	return v;
}

int hostmem_mapping(const void *addr, uint64_t *page_size,
		    uint64_t *huge_bytes)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	unsigned long long start, kb;
	char line[512], key[64];
	bool ours = false;
	int r = -ENOENT;

	*page_size = 0;
	*huge_bytes = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t n;

		if (sscanf(line, "%63s", key) != 1)
			continue;
		n = strlen(key);
		/* A mapping's first line: "start-end perms ...", then
		 * "Key: value kB" lines. */
		if (key[n - 1] != ':') {
			if (ours)
				break;
			ours = sscanf(key, "%llx-", &start) == 1 &&
			       start == (uintptr_t)addr;
			continue;
		}
		if (!ours || sscanf(line, "%*s %llu kB", &kb) != 1)
			continue;
		r = 0;
		if (!strcmp(key, "KernelPageSize:"))
			*page_size = (uint64_t)kb * 1024;
		else if (!strcmp(key, "AnonHugePages:") ||
			 !strcmp(key, "ShmemPmdMapped:") ||
			 !strcmp(key, "FilePmdMapped:"))
			*huge_bytes += (uint64_t)kb * 1024;
	}
	fclose(f);
	return r;
}
