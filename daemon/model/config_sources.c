// SPDX-License-Identifier: MIT
/*
 * The files a configuration was read from: the main file, the include
 * directory, each include, each peer's endpoint file, in the order read,
 * each with how its inode looked and a hash of the bytes read (XXH3,
 * 128 bits: libxxhash, made for telling contents apart fast).
 *
 * A reload whose files all look as they did (config_sources_unchanged:
 * same inode, size, mode, modification and change times) is read again
 * here without a child first (validate.h), by config_load_known(): each
 * file's bytes must then hash as before, checked as it is read and
 * before it is parsed, or the load stops (-ESTALE) and the reload takes
 * the careful way. Bytes this process has parsed once cannot crash it
 * the second time; a time stamp alone would not say they are the same
 * (a file rewritten within the clock's tick looks unchanged).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "config_internal.h"

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool same_look(const struct conf_source *s, const struct stat *st)
{
	return s->dev == st->st_dev && s->ino == st->st_ino &&
	       s->size == st->st_size && s->mode == st->st_mode &&
	       same_time(s->mtime, st->st_mtim) &&
	       same_time(s->ctime, st->st_ctim);
}

/* Record path as read (st, hash h), and hold it against what known read
 * at the same point. false: not the same bytes (p->stale), or out of
 * memory. */
static bool source_seen(struct parser *p, const char *path,
			const struct stat *st, XXH128_hash_t h)
{
	struct config *c = p->c;
	struct conf_source *s;

	if (p->known) {
		const struct conf_source *k = c->n_sources < p->known->n_sources
						      ? &p->known->sources[c->n_sources]
						      : NULL;

		/* The same files in the same order, with the same bytes. */
		if (!k || !k->path || !streq(k->path, path) ||
		    k->digest[0] != h.low64 ||
		    k->digest[1] != h.high64) {
			p->stale = true;
			return false;
		}
	}
	s = array_room(c->sources, c->n_sources, sizeof(*s));
	if (!s) {
		p->oom = 1;
		return false;
	}
	c->sources = s;
	s += c->n_sources;
	*s = (struct conf_source){
		.path = strdup(path),
		.dev = st->st_dev,
		.ino = st->st_ino,
		.size = st->st_size,
		.mode = st->st_mode,
		.mtime = st->st_mtim,
		.ctime = st->st_ctim,
		.digest = { h.low64, h.high64 },
	};
	if (!s->path) {
		p->oom = 1;
		return false;
	}
	c->n_sources++;
	return true;
}

int parser_read(struct parser *p, const char *path, char **text,
		size_t *len, const char **why)
{
	struct stat st;
	int r = config_read_text(path, text, len, why, &st);

	if (r < 0)
		return r;
	if (!source_seen(p, path, &st, XXH3_128bits(*text, *len))) {
		free(*text);
		*text = NULL;
		return p->stale ? -ESTALE : -ENOMEM;
	}
	return 0;
}

int parser_dir_seen(struct parser *p, const char *path, DIR *d,
		    char *const *names, size_t n)
{
	XXH3_state_t *x = XXH3_createState();
	XXH128_hash_t h;
	struct stat st;
	bool ok;

	if (!x) {
		p->oom = 1;
		return -ENOMEM;
	}
	XXH3_128bits_reset(x);
	for (size_t i = 0; i < n; i++)
		XXH3_128bits_update(x, names[i], strlen(names[i]) + 1);
	h = XXH3_128bits_digest(x);
	XXH3_freeState(x);
	if (fstat(dirfd(d), &st) < 0) {
		/* Nothing to hold its look against later: never known. */
		p->stale = p->known != NULL;
		return p->stale ? -ESTALE : -errno;
	}
	ok = source_seen(p, path, &st, h);
	return ok ? 0 : p->stale ? -ESTALE : -ENOMEM;
}

void config_sources_free(struct config *c)
{
	for (size_t i = 0; i < c->n_sources; i++)
		free(c->sources[i].path);
	free(c->sources);
	c->sources = NULL;
	c->n_sources = 0;
}

bool config_sources_unchanged(const struct config *c)
{
	struct stat st;

	if (!c || !c->n_sources || c->n_errors)
		return false;
	for (size_t i = 0; i < c->n_sources; i++)
		if (stat(c->sources[i].path, &st) < 0 ||
		    !same_look(&c->sources[i], &st))
			return false;
	return true;
}
