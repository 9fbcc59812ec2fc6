// SPDX-License-Identifier: MIT
/*
 * A loaded configuration as bytes, and back: how the child that reads a
 * changed configuration (validate.c) hands the daemon what it read, so
 * that the daemon does not parse the files a second time.
 *
 * The image is private between two rdmad processes of one binary (the
 * child is a fork): it follows the key tables of config_fields.c, field
 * by field, with no key names, and changes whenever they do. Numbers are
 * LEB128 varints (signed ones zigzag-coded), strings a length and their
 * bytes with the NUL, each array its count first. Each object, device,
 * profile and group-list element starts with its location (file index,
 * line).
 *
 * Reading trusts the values: the child verified them (config_verify.c)
 * before it wrote them. It does not trust the bytes: whatever they are,
 * conf_image_read() reads within them, allocates no more than they can
 * describe, and fails with -EPROTO (fuzz_image checks this). It fills a
 * config it is given and never frees it: config_from_image() (config.c)
 * owns it.
 */
#include <string.h>

#include "config_internal.h"

#define IMAGE_MAGIC "rdmad-config-image-1"

/* ---- writing ------------------------------------------------------------ */

struct writer {
	char *buf;
	size_t len, cap;
	const struct config *c;
	size_t last; /* the file of the last location: the next one's, often */
	bool oom;
};

static void put(struct writer *w, const void *p, size_t n)
{
	if (w->oom)
		return;
	if (w->cap - w->len < n) {
		size_t cap = w->cap ? w->cap : 65536;
		char *b;

		while (cap - w->len < n)
			cap *= 2;
		b = realloc(w->buf, cap);
		if (!b) {
			w->oom = true;
			return;
		}
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void put_u(struct writer *w, uint64_t v)
{
	uint8_t b[10];
	size_t n = 0;

	do {
		b[n] = v & 0x7f;
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	put(w, b, n);
}

static void put_s(struct writer *w, int64_t v)
{
	put_u(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* NULL is 0; a string of n bytes is n + 2 and them with the NUL. */
static void put_str(struct writer *w, const char *s)
{
	size_t n;

	if (!s) {
		put_u(w, 0);
		return;
	}
	n = strlen(s) + 1;
	put_u(w, n + 1);
	put(w, s, n);
}

/* The file as an index into c->files, plus one; 0: none. */
static void put_loc(struct writer *w, const struct conf_loc *loc)
{
	size_t i = w->last;

	if (loc->file && (i >= w->c->n_files || w->c->files[i] != loc->file))
		for (i = 0; i < w->c->n_files; i++)
			if (w->c->files[i] == loc->file)
				break;
	w->last = i;
	/* A location outside the files (only after running out of
	 * memory, which leaves errors) is written as none. */
	put_u(w, loc->file && i < w->c->n_files ? i + 1 : 0);
	put_s(w, loc->line);
}

static void put_fields(struct writer *w, const struct field *table,
		       const void *obj);

static void put_field(struct writer *w, const struct field *f,
		      const void *obj)
{
	const char *at = (const char *)obj + f->offset;
	size_t n;

	switch (f->type) {
	case F_STRING:
		put_str(w, *(char *const *)at);
		return;
	case F_INT:
	case F_ENUM:
		put_s(w, *(const int *)at);
		return;
	case F_INT64:
		put_s(w, *(const int64_t *)at);
		return;
	case F_UINT32:
	case F_ACCESS:
		put_u(w, *(const uint32_t *)at);
		return;
	case F_UINT16:
		put_u(w, *(const uint16_t *)at);
		return;
	case F_SIZE:
		put_u(w, *(const uint64_t *)at);
		return;
	case F_BOOL:
		put_u(w, *(const bool *)at);
		return;
	case F_TRIBOOL:
		put_u(w, *(const enum conf_tribool *)at);
		return;
	case F_STRLIST:
		n = *(const size_t *)((const char *)obj + f->count_offset);
		put_u(w, n);
		for (size_t i = 0; i < n; i++)
			put_str(w, (*(char **const *)at)[i]);
		return;
	case F_INT64LIST:
		n = *(const size_t *)((const char *)obj + f->count_offset);
		put_u(w, n);
		for (size_t i = 0; i < n; i++)
			put_s(w, (*(int64_t *const *)at)[i]);
		return;
	case F_GROUP:
		if (f->indirect) {
			const void *sub = *(const void *const *)at;

			put_u(w, sub != NULL);
			if (sub)
				put_fields(w, f->sub, sub);
			return;
		}
		if (f->set_flag)
			put_u(w, *(const bool *)at);
		put_fields(w, f->sub, obj);
		return;
	case F_GROUPLIST:
		n = *(const size_t *)((const char *)obj + f->count_offset);
		put_u(w, n);
		for (size_t i = 0; i < n; i++) {
			const char *el = *(char *const *)at + i * f->size;

			put_loc(w, (const struct conf_loc *)el);
			put_fields(w, f->sub, el);
		}
		return;
	case F_IGNORE:
		return;
	}
}

static void put_fields(struct writer *w, const struct field *table,
		       const void *obj)
{
	for (const struct field *f = table; f->key; f++)
		put_field(w, f, obj);
}

static void put_profile(struct writer *w, const struct conf_profile *pr)
{
	put_loc(w, &pr->loc);
	put_fields(w, conf_profile_fields, pr);
	for (int k = 0; k < OBJ_KIND_MAX; k++) {
		put_u(w, pr->n_objs[k]);
		for (size_t i = 0; i < pr->n_objs[k]; i++) {
			const void *o = conf_obj(pr, k, i);

			put_loc(w, o);
			put_fields(w, conf_kinds[k].fields, o);
			if (k == OBJ_QP)
				put_str(w, ((const struct conf_qp *)o)
						   ->peer_endpoint);
		}
	}
}

int config_image(const struct config *c, char **out, size_t *len)
{
	struct writer w = { .c = c };

	if (c->n_errors)
		return -EINVAL;
	put(&w, IMAGE_MAGIC, sizeof(IMAGE_MAGIC));
	put_str(&w, c->path);
	put_u(&w, c->n_files);
	for (size_t i = 0; i < c->n_files; i++)
		put_str(&w, c->files[i]);
	put_u(&w, c->n_sources);
	for (size_t i = 0; i < c->n_sources; i++) {
		const struct conf_source *s = &c->sources[i];

		put_str(&w, s->path);
		put_u(&w, s->dev);
		put_u(&w, s->ino);
		put_s(&w, s->size);
		put_u(&w, s->mode);
		put_s(&w, s->mtime.tv_sec);
		put_s(&w, s->mtime.tv_nsec);
		put_s(&w, s->ctime.tv_sec);
		put_s(&w, s->ctime.tv_nsec);
		put_u(&w, s->digest[0]);
		put_u(&w, s->digest[1]);
	}
	put_u(&w, c->n_warnings);
	for (size_t i = 0; i < c->n_warnings; i++) {
		put_loc(&w, &c->warnings[i].loc);
		put_str(&w, c->warnings[i].msg);
	}
	put_fields(&w, conf_daemon_fields, &c->daemon);
	put_loc(&w, &c->daemon.listen_loc);
	put_loc(&w, &c->daemon.http_loc);
	put_u(&w, c->n_devices);
	for (size_t i = 0; i < c->n_devices; i++) {
		put_loc(&w, &c->devices[i].loc);
		put_fields(&w, conf_device_fields, &c->devices[i]);
	}
	put_u(&w, c->n_profiles);
	for (size_t i = 0; i < c->n_profiles; i++)
		put_profile(&w, &c->profiles[i]);
	if (w.oom) {
		free(w.buf);
		return -ENOMEM;
	}
	*out = w.buf;
	*len = w.len;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

struct reader {
	const uint8_t *p, *end;
	struct config *c;
	int err; /* the first: -EPROTO or -ENOMEM */
};

static void fail(struct reader *r, int err)
{
	if (!r->err)
		r->err = err;
	r->p = r->end; /* nothing more is read */
}

static uint64_t get_u(struct reader *r)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (r->p == r->end) {
			fail(r, -EPROTO);
			return 0;
		}
		b = *r->p++;
		if (shift == 63 && b > 1)
			break; /* past 64 bits */
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	fail(r, -EPROTO);
	return 0;
}

static int64_t get_s(struct reader *r)
{
	uint64_t u = get_u(r);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* A number that must fit in [min, max]. */
static int64_t get_in(struct reader *r, int64_t min, int64_t max)
{
	int64_t v = get_s(r);

	if (v < min || v > max) {
		fail(r, -EPROTO);
		return 0;
	}
	return v;
}

static uint64_t get_umax(struct reader *r, uint64_t max)
{
	uint64_t v = get_u(r);

	if (v > max) {
		fail(r, -EPROTO);
		return 0;
	}
	return v;
}

/* A count of things that take at least a byte each. */
static size_t get_count(struct reader *r)
{
	return (size_t)get_umax(r, (uint64_t)(r->end - r->p));
}

/* The string in the image (NULL for none), NUL-terminated there and
 * with no other NUL: to copy. */
static const char *get_raw(struct reader *r)
{
	uint64_t n = get_u(r);
	const char *s;

	if (!n || r->err)
		return NULL;
	n--;
	if (n == 0 || n > (uint64_t)(r->end - r->p) || r->p[n - 1] != '\0' ||
	    memchr(r->p, '\0', n - 1)) {
		fail(r, -EPROTO);
		return NULL;
	}
	s = (const char *)r->p;
	r->p += n;
	return s;
}

/* A string of the settings: the config's own, interned. */
static char *get_str(struct reader *r)
{
	const char *s = get_raw(r);
	char *v;

	if (!s)
		return NULL;
	v = conf_strdup(r->c, s);
	if (!v)
		fail(r, -ENOMEM);
	return v;
}

/* A string of its own (malloc). */
static char *get_dup(struct reader *r)
{
	const char *s = get_raw(r);
	char *v;

	if (!s)
		return NULL;
	v = strdup(s);
	if (!v)
		fail(r, -ENOMEM);
	return v;
}

static void get_loc(struct reader *r, struct conf_loc *loc)
{
	uint64_t f = get_umax(r, r->c->n_files);

	loc->file = f ? r->c->files[f - 1] : NULL;
	loc->line = (int)get_in(r, INT32_MIN, INT32_MAX);
}

/* calloc of n elements with room for the next power of two of them, as
 * array_room() assumes of an array that may still grow (warnings). */
static void *get_array(struct reader *r, size_t n, size_t size)
{
	size_t cap = 1;
	void *a;

	while (cap < n)
		cap *= 2;
	a = calloc(cap, size);
	if (!a)
		fail(r, -ENOMEM);
	return a;
}

static void get_fields(struct reader *r, const struct field *table,
		       void *obj);

static void get_field(struct reader *r, const struct field *f, void *obj)
{
	char *at = (char *)obj + f->offset;
	size_t *count = (size_t *)((char *)obj + f->count_offset);
	size_t n;

	switch (f->type) {
	case F_STRING:
		*(char **)at = get_str(r);
		return;
	case F_INT:
	case F_ENUM:
		*(int *)at = (int)get_in(r, INT32_MIN, INT32_MAX);
		return;
	case F_INT64:
		*(int64_t *)at = get_s(r);
		return;
	case F_UINT32:
	case F_ACCESS:
		*(uint32_t *)at = (uint32_t)get_umax(r, UINT32_MAX);
		return;
	case F_UINT16:
		*(uint16_t *)at = (uint16_t)get_umax(r, UINT16_MAX);
		return;
	case F_SIZE:
		*(uint64_t *)at = get_u(r);
		return;
	case F_BOOL:
		*(bool *)at = get_umax(r, 1);
		return;
	case F_TRIBOOL:
		*(enum conf_tribool *)at =
			(enum conf_tribool)get_umax(r, CONF_FALSE);
		return;
	case F_STRLIST: {
		char **v;

		n = get_count(r);
		if (r->err || !n)
			return;
		v = calloc(n + 1, sizeof(*v));
		if (!v) {
			fail(r, -ENOMEM);
			return;
		}
		*(char ***)at = v;
		for (size_t i = 0; i < n && !r->err; i++, (*count)++)
			if (!(v[i] = get_str(r)))
				fail(r, -EPROTO);
		return;
	}
	case F_INT64LIST: {
		int64_t *v;

		n = get_count(r);
		if (r->err || !n)
			return;
		v = calloc(n + 1, sizeof(*v));
		if (!v) {
			fail(r, -ENOMEM);
			return;
		}
		*(int64_t **)at = v;
		*count = n;
		for (size_t i = 0; i < n; i++)
			v[i] = get_s(r);
		return;
	}
	case F_GROUP:
		if (f->indirect) {
			if (!get_umax(r, 1))
				return;
			*(void **)at = calloc(1, f->size);
			if (!*(void **)at) {
				fail(r, -ENOMEM);
				return;
			}
			get_fields(r, f->sub, *(void **)at);
			return;
		}
		if (f->set_flag)
			*(bool *)at = get_umax(r, 1);
		get_fields(r, f->sub, obj);
		return;
	case F_GROUPLIST: {
		char *v;

		n = get_count(r);
		if (f->max_count && n > f->max_count)
			fail(r, -EPROTO);
		if (r->err || !n)
			return;
		v = calloc(n, f->size);
		if (!v) {
			fail(r, -ENOMEM);
			return;
		}
		*(char **)at = v;
		for (size_t i = 0; i < n && !r->err; i++, (*count)++) {
			get_loc(r, (struct conf_loc *)(v + i * f->size));
			get_fields(r, f->sub, v + i * f->size);
		}
		return;
	}
	case F_IGNORE:
		return;
	}
}

static void get_fields(struct reader *r, const struct field *table,
		       void *obj)
{
	for (const struct field *f = table; f->key && !r->err; f++)
		get_field(r, f, obj);
}

/* Names are unique in a configuration that loaded without errors: a
 * duplicate is a broken image. */
static void get_index(struct reader *r, const void *arr, size_t n,
		      size_t size, struct conf_names **out)
{
	struct conf_names *ix;
	const void *first;

	if (!n || r->err)
		return;
	ix = conf_names_new(arr, size, n);
	if (!ix) {
		fail(r, -ENOMEM);
		return;
	}
	*out = ix;
	for (size_t i = 0; i < n; i++) {
		int e = conf_names_add(ix, (const char *)arr + i * size,
				       &first);

		if (e < 0) {
			fail(r, e == -EEXIST ? -EPROTO : -ENOMEM);
			return;
		}
	}
}

static void get_profile(struct reader *r, struct conf_profile *pr)
{
	get_loc(r, &pr->loc);
	get_fields(r, conf_profile_fields, pr);
	for (int k = 0; k < OBJ_KIND_MAX && !r->err; k++) {
		size_t n = get_count(r), size = conf_kinds[k].size;

		if (r->err || !n)
			continue;
		pr->objs[k] = calloc(n, size);
		if (!pr->objs[k]) {
			fail(r, -ENOMEM);
			return;
		}
		for (size_t i = 0; i < n && !r->err; i++) {
			char *o = (char *)pr->objs[k] + i * size;

			pr->n_objs[k]++;
			get_loc(r, (struct conf_loc *)o);
			get_fields(r, conf_kinds[k].fields, o);
			if (k == OBJ_QP)
				((struct conf_qp *)o)->peer_endpoint =
					get_dup(r);
		}
		get_index(r, pr->objs[k], pr->n_objs[k], size, &pr->names[k]);
	}
}

static void get_config(struct reader *r)
{
	struct config *c = r->c;
	size_t n;

	if ((size_t)(r->end - r->p) < sizeof(IMAGE_MAGIC) ||
	    memcmp(r->p, IMAGE_MAGIC, sizeof(IMAGE_MAGIC))) {
		fail(r, -EPROTO);
		return;
	}
	r->p += sizeof(IMAGE_MAGIC);
	c->path = get_dup(r);
	if (!c->path)
		fail(r, -EPROTO);
	n = get_count(r);
	if (n && !r->err && (c->files = get_array(r, n, sizeof(char *))))
		for (size_t i = 0; i < n && !r->err; i++) {
			if ((c->files[c->n_files] = get_dup(r)))
				c->n_files++;
			else
				fail(r, -EPROTO);
		}
	n = get_count(r);
	if (n && !r->err &&
	    (c->sources = get_array(r, n, sizeof(*c->sources))))
		for (size_t i = 0; i < n && !r->err; i++) {
			struct conf_source *s = &c->sources[c->n_sources++];

			if (!(s->path = get_dup(r)))
				fail(r, -EPROTO);
			s->dev = get_u(r);
			s->ino = get_u(r);
			s->size = get_s(r);
			s->mode = (mode_t)get_umax(r, UINT32_MAX);
			s->mtime.tv_sec = get_s(r);
			s->mtime.tv_nsec = get_s(r);
			s->ctime.tv_sec = get_s(r);
			s->ctime.tv_nsec = get_s(r);
			s->digest[0] = get_u(r);
			s->digest[1] = get_u(r);
		}
	n = get_count(r);
	if (n && !r->err &&
	    (c->warnings = get_array(r, n, sizeof(*c->warnings))))
		for (size_t i = 0; i < n && !r->err; i++) {
			struct conf_error *e = &c->warnings[c->n_warnings];

			get_loc(r, &e->loc);
			e->seq = i;
			if ((e->msg = get_dup(r)))
				c->n_warnings++;
			else
				fail(r, -EPROTO);
		}
	get_fields(r, conf_daemon_fields, &c->daemon);
	get_loc(r, &c->daemon.listen_loc);
	get_loc(r, &c->daemon.http_loc);
	n = get_count(r);
	if (n && !r->err &&
	    (c->devices = get_array(r, n, sizeof(*c->devices))))
		for (size_t i = 0; i < n && !r->err; i++) {
			struct conf_device *d = &c->devices[c->n_devices++];

			get_loc(r, &d->loc);
			get_fields(r, conf_device_fields, d);
		}
	get_index(r, c->devices, c->n_devices, sizeof(*c->devices),
		  &c->device_names);
	n = get_count(r);
	if (n && !r->err &&
	    (c->profiles = get_array(r, n, sizeof(*c->profiles))))
		for (size_t i = 0; i < n && !r->err; i++)
			get_profile(r, &c->profiles[c->n_profiles++]);
	get_index(r, c->profiles, c->n_profiles, sizeof(*c->profiles),
		  &c->profile_names);
	if (!r->err && r->p != r->end)
		fail(r, -EPROTO); /* trailing bytes */
}

int conf_image_read(struct config *c, const void *image, size_t len)
{
	struct reader r = { .p = image, .end = (const uint8_t *)image + len,
			    .c = c };

	get_config(&r);
	return r.err;
}
