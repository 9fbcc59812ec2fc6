// SPDX-License-Identifier: MIT
/*
 * Reading a configuration's files (config_read_text: regular files of
 * bounded size only), and the files it was read from: the main file, the
 * include directory, each include, each peer's endpoint file, in the
 * order read, each with how its inode looked and a hash of the bytes
 * read (XXH3, 128 bits: libxxhash, made for telling contents apart
 * fast). The parser and the verifier read through here; nothing here
 * calls them back.
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
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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

/* A file of exactly this size is read; one byte more is refused. */
#define CONFIG_MAX_FILE ((size_t)16 << 20)

/*
 * The text of a regular file of at most CONFIG_MAX_FILE bytes. Opened
 * without blocking, so that a FIFO or a device is refused instead of
 * waited on. Returns 0, -errno, or an error message in *why.
 */
int config_read_text(const char *path, char **out, size_t *len,
		     const char **why, struct stat *st_out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC |
						    O_NONBLOCK | O_NOCTTY);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		*why = "is a directory, not a file";
		return -EINVAL;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = S_ISFIFO(st.st_mode) ? "is a FIFO, not a regular file"
					    : "is not a regular file";
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > CONFIG_MAX_FILE) {
		*why = "is larger than the limit of 16 MiB (File too large)";
		return -EFBIG;
	}
	/* One byte more than the limit finds a file that grew since. */
	buf = malloc((size_t)st.st_size + 2);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		size_t room = (size_t)st.st_size + 1 - n;
		ssize_t r;

		if (!room) {
			char *nb;

			if (n > CONFIG_MAX_FILE) {
				*why = "is larger than the limit of 16 MiB "
				       "(File too large)";
				return -EFBIG;
			}
			nb = realloc(buf, CONFIG_MAX_FILE + 2);
			if (!nb)
				return -ENOMEM;
			buf = nb;
			st.st_size = (off_t)CONFIG_MAX_FILE + 1;
			continue;
		}
		r = read(fd, buf + n, room);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	if (st_out)
		*st_out = st;
	*len = n;
	*out = TAKE_PTR(buf);
	return 0;
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

/* What a directory's source records: the names of its files, in order,
 * each with its NUL. */
static XXH128_hash_t names_digest(char *const *names, size_t n)
{
	XXH3_state_t *x = XXH3_createState();
	XXH128_hash_t h = { 0 };

	if (!x)
		return h;
	XXH3_128bits_reset(x);
	for (size_t i = 0; i < n; i++)
		XXH3_128bits_update(x, names[i], strlen(names[i]) + 1);
	h = XXH3_128bits_digest(x);
	XXH3_freeState(x);
	return h;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int config_dir_names(DIR *d, const char *dir, char ***out, size_t *n_out)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;

	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char **nn;

		if (len < 6 || de->d_name[0] == '.' ||
		    !streq(de->d_name + len - 5, ".conf"))
			continue;
		nn = array_room(names, n, sizeof(*nn));
		if (!nn || asprintf(&nn[n], "%s/%s", dir, de->d_name) < 0) {
			names = nn ? nn : names;
			config_names_free(names, n);
			return -ENOMEM;
		}
		names = nn;
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	*out = names;
	*n_out = n;
	return 0;
}

void config_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int parser_dir_seen(struct parser *p, const char *path, DIR *d,
		    char *const *names, size_t n)
{
	struct stat st;
	bool ok;

	if (fstat(dirfd(d), &st) < 0) {
		/* Nothing to hold its look against later: never known. */
		p->stale = p->known != NULL;
		return p->stale ? -ESTALE : -errno;
	}
	ok = source_seen(p, path, &st, names_digest(names, n));
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

/* Whether the source s still has the bytes (a directory: the file names)
 * it had when read. */
static bool source_same(const struct conf_source *s)
{
	_cleanup_free_ char *text = NULL;
	const char *why = NULL;
	XXH128_hash_t h;
	size_t len = 0;

	if (S_ISDIR(s->mode)) {
		DIR *d = opendir(s->path);
		char **names = NULL;
		size_t n = 0;
		int r;

		if (!d)
			return false;
		r = config_dir_names(d, s->path, &names, &n);
		closedir(d);
		if (r < 0)
			return false;
		h = names_digest(names, n);
		config_names_free(names, n);
	} else {
		if (config_read_text(s->path, &text, &len, &why, NULL) < 0)
			return false;
		h = XXH3_128bits(text, len);
	}
	return s->digest[0] == h.low64 && s->digest[1] == h.high64;
}

bool config_sources_same(const struct config *c)
{
	if (!c || !c->n_sources || c->n_errors)
		return false;
	for (size_t i = 0; i < c->n_sources; i++)
		if (!source_same(&c->sources[i]))
			return false;
	return true;
}
