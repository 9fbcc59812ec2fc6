// SPDX-License-Identifier: MIT
/*
 * The configuration across a restart. A restart brings back, almost
 * always, the very files the previous run loaded, and parsing them again
 * is most of what a large configuration costs a start (libconfig and
 * the checks: 10k objects take longer than taking back every PD and MR
 * of the previous run). So the previous run leaves its configuration's
 * image (config_image.c) in the fd store, stamped with its binary's
 * build ID, and the next run takes it instead of parsing when all of
 * this holds:
 *
 *   - the same binary (build ID): the same parser, defaults and checks,
 *     so the same files give the same configuration;
 *   - the same main file name;
 *   - every source it was read from (main file, include directory,
 *     included files, peers' endpoint files) has the same bytes now:
 *     each file read again and hashed (XXH3-128, as the parser hashed
 *     it), each directory's *.conf names listed again.
 *
 * Anything else is -ESTALE and the caller loads the files as always:
 * the image saves time, it never decides what the configuration says.
 * The bytes come from the service's own fd store; their reading is
 * bounded all the same (conf_image_read(), fuzz_image).
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define KEPT_MAGIC "rdmad-config-kept-1"
#define BUILD_ID_MAX 64

struct build_id {
	unsigned char id[BUILD_ID_MAX];
	size_t len;
};

/* The GNU build ID note among the program's headers, if any. */
static int find_build_id(struct dl_phdr_info *info, size_t size, void *ud)
{
	struct build_id *b = ud;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const char *at = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = at + ph->p_memsz;

		/* Notes are padded to their segment's alignment: 4, or 8. */
		size_t pad = ph->p_align == 8 ? 7 : 3;

		if (ph->p_type != PT_NOTE)
			continue;
		while ((size_t)(end - at) >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *nh = (const void *)at;
			size_t name = (nh->n_namesz + pad) & ~pad;
			size_t desc = (nh->n_descsz + pad) & ~pad;
			const char *n = at + sizeof(*nh);

			if ((size_t)(end - n) < name + desc)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(n, "GNU", 4) && nh->n_descsz &&
			    nh->n_descsz <= BUILD_ID_MAX) {
				memcpy(b->id, n + name, nh->n_descsz);
				b->len = nh->n_descsz;
				return 1;
			}
			at = n + name + desc;
		}
	}
	return 1; /* the first object is the program: look no further */
}

static const struct build_id *build_id(void)
{
	static struct build_id b;
	static bool looked;

	if (!looked) {
		dl_iterate_phdr(find_build_id, &b);
		looked = true;
	}
	return b.len ? &b : NULL;
}

int config_keep(const struct config *c, char **out, size_t *len)
{
	const struct build_id *b = build_id();
	_cleanup_free_ char *image = NULL;
	size_t n = 0, head;
	char *buf;
	int r;

	if (!b)
		return -ENOTSUP;
	r = config_image(c, &image, &n);
	if (r < 0)
		return r;
	head = sizeof(KEPT_MAGIC) + 1 + b->len;
	buf = malloc(head + n);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, KEPT_MAGIC, sizeof(KEPT_MAGIC));
	buf[sizeof(KEPT_MAGIC)] = (char)b->len;
	memcpy(buf + sizeof(KEPT_MAGIC) + 1, b->id, b->len);
	memcpy(buf + head, image, n);
	*out = buf;
	*len = head + n;
	return 0;
}

int config_load_kept(const char *path, const void *kept, size_t len,
		     struct config **out)
{
	const struct build_id *b = build_id();
	const unsigned char *k = kept;
	struct config *c = NULL;
	size_t head;
	int r;

	if (len < sizeof(KEPT_MAGIC) + 1 ||
	    memcmp(k, KEPT_MAGIC, sizeof(KEPT_MAGIC)))
		return -EPROTO;
	head = sizeof(KEPT_MAGIC) + 1 + k[sizeof(KEPT_MAGIC)];
	if (len < head)
		return -EPROTO;
	/* Another build may parse, default or check otherwise. */
	if (!b || k[sizeof(KEPT_MAGIC)] != b->len ||
	    memcmp(k + sizeof(KEPT_MAGIC) + 1, b->id, b->len))
		return -ESTALE;
	r = config_from_image(k + head, len - head, &c);
	if (r < 0)
		return r;
	if (!streq(c->path, path) || !config_sources_same(c)) {
		config_free(c);
		return -ESTALE;
	}
	*out = c;
	return 0;
}
