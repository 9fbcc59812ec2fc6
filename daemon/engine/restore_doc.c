// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "restore_doc.h"
#include "util.h"

/* Deeper than any document of ours: a bound for the skipping recursion. */
#define MAX_DEPTH 32

struct scan {
	const char *p, *end;
	int depth;
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static void ws(struct scan *s)
{
	while (s->p < s->end &&
	       (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static bool at(struct scan *s, char c)
{
	ws(s);
	return s->p < s->end && *s->p == c;
}

static bool eat(struct scan *s, char c)
{
	if (!at(s, c))
		return false;
	s->p++;
	return true;
}

/* Past the string at s->p; *esc: it has escapes (its bytes are not its
 * value). */
static int skip_string(struct scan *s, bool *esc)
{
	*esc = false;
	if (!at(s, '"'))
		return -EINVAL;
	for (s->p++; s->p < s->end; s->p++) {
		unsigned char c = (unsigned char)*s->p;

		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return -EINVAL;
		if (c == '\\') {
			*esc = true;
			if (++s->p >= s->end)
				return -EINVAL;
		}
	}
	return -EINVAL;
}

/* Past the string after any white space: where it starts (its quote)
 * in *start, whether it has escapes in *esc. */
static int next_string(struct scan *s, const char **start, bool *esc)
{
	ws(s);
	*start = s->p;
	return skip_string(s, esc);
}

/* The string at s->p, its escapes undone by jansson (rare: names are
 * plain), in *out (malloc'd). */
static int read_string(struct scan *s, char **out)
{
	const char *a;
	json_t *j;
	bool esc;
	int r = next_string(s, &a, &esc);

	if (r < 0)
		return r;
	if (!esc) {
		*out = strndup(a + 1, (size_t)(s->p - a - 2));
		return *out ? 0 : -ENOMEM;
	}
	j = json_loadb(a, (size_t)(s->p - a), JSON_DECODE_ANY, NULL);
	if (!json_is_string(j)) {
		json_decref(j);
		return -EINVAL;
	}
	*out = strdup(json_string_value(j));
	json_decref(j);
	return *out ? 0 : -ENOMEM;
}

static int literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
		return -EINVAL;
	s->p += n;
	return 0;
}

static void digits(struct scan *s)
{
	while (s->p < s->end && is_digit(*s->p))
		s->p++;
}

/* The number at s->p: *is_int when it has neither fraction nor exponent
 * (jansson's integer), then its value in *v. An integer out of range is
 * an error, as to jansson. */
static int read_number(struct scan *s, json_int_t *v, bool *is_int)
{
	const char *a = s->p;
	char tmp[24];

	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p >= s->end || !is_digit(*s->p) ||
	    (*s->p == '0' && s->p + 1 < s->end && is_digit(s->p[1])))
		return -EINVAL;
	digits(s);
	*is_int = true;
	if (s->p < s->end && *s->p == '.') {
		*is_int = false;
		s->p++;
		if (s->p >= s->end || !is_digit(*s->p))
			return -EINVAL;
		digits(s);
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		*is_int = false;
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (s->p >= s->end || !is_digit(*s->p))
			return -EINVAL;
		digits(s);
	}
	if (!*is_int)
		return 0;
	if ((size_t)(s->p - a) >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, a, (size_t)(s->p - a));
	tmp[s->p - a] = '\0';
	errno = 0;
	*v = strtoll(tmp, NULL, 10);
	return errno ? -EINVAL : 0;
}

static int skip_value(struct scan *s);

/* Past the object or array at s->p (members' names unchecked). */
static int skip_container(struct scan *s)
{
	char close = *s->p == '{' ? '}' : ']';
	bool esc;

	if (++s->depth > MAX_DEPTH)
		return -EINVAL;
	s->p++;
	if (!eat(s, close)) {
		do {
			if (close == '}' &&
			    (skip_string(s, &esc) < 0 || !eat(s, ':')))
				return -EINVAL;
			if (skip_value(s) < 0)
				return -EINVAL;
		} while (eat(s, ','));
		if (!eat(s, close))
			return -EINVAL;
	}
	s->depth--;
	return 0;
}

static int skip_value(struct scan *s)
{
	json_int_t v;
	bool b;

	ws(s);
	if (s->p >= s->end)
		return -EINVAL;
	switch (*s->p) {
	case '"':
		return skip_string(s, &b);
	case '{':
	case '[':
		return skip_container(s);
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	default:
		return read_number(s, &v, &b);
	}
}

/* An entry's members this reader keeps. */
enum key {
	K_KIND,
	K_NAME,
	K_PD,
	K_MEMORY, /* the strings end here */
	K_HANDLE,
	K_OFFSET,
	K_LENGTH,
	K_IOVA,
	K_ACCESS,
	K_LKEY,
	K_RKEY, /* the integers end here */
	K_ZERO_BASED,
	K_DRAINING,
	K_N,
};

static const char *const key_names[K_N] = {
	"kind", "name",	  "pd",	  "memory", "handle", "offset",
	"length", "iova", "access", "lkey",   "rkey",	"zero_based",
	"draining",
};

static int key_of(const char *k, size_t len)
{
	for (int i = 0; i < K_N; i++)
		if (strlen(key_names[i]) == len && !memcmp(key_names[i], k, len))
			return i;
	return -1;
}

/* The member name at s->p, as a key (-1: one not kept), without a copy
 * unless it has escapes. */
static int read_key(struct scan *s, int *k)
{
	_cleanup_free_ char *name = NULL;
	const char *a;
	bool esc;
	int r = next_string(s, &a, &esc);

	if (r < 0)
		return r;
	if (!esc) {
		*k = key_of(a + 1, (size_t)(s->p - a - 2));
		return 0;
	}
	s->p = a;
	r = read_string(s, &name);
	if (r < 0)
		return r;
	*k = key_of(name, strlen(name));
	return 0;
}

static char **str_slot(struct restore_doc_entry *e, int k)
{
	char **slots[] = { &e->kind, &e->name, &e->pd, &e->memory };

	return slots[k];
}

static json_int_t *int_slot(struct restore_doc_entry *e, int k)
{
	json_int_t *slots[] = { &e->handle, &e->offset, &e->length, &e->iova,
				&e->access, &e->lkey,	&e->rkey };

	return slots[k - K_HANDLE];
}

/* The value of member k (-1: one not kept) of e. */
static int read_member(struct scan *s, struct restore_doc_entry *e, int k)
{
	json_int_t v;
	bool is_int;
	int r;

	ws(s);
	if (k < 0 || s->p >= s->end)
		return skip_value(s);
	if (k <= K_MEMORY)
		return *s->p == '"' ? read_string(s, str_slot(e, k))
				    : skip_value(s);
	if (k == K_ZERO_BASED || k == K_DRAINING) {
		*(k == K_ZERO_BASED ? &e->zero_based : &e->draining) =
			*s->p == 't';
		return skip_value(s);
	}
	if (*s->p != '-' && !is_digit(*s->p))
		return skip_value(s);
	r = read_number(s, &v, &is_int);
	if (r < 0 || !is_int)
		return r;
	*int_slot(e, k) = v;
	if (k == K_HANDLE)
		e->has_handle = true;
	return 0;
}

static int read_entry(struct scan *s, struct restore_doc_entry *e)
{
	unsigned int seen = 0;

	if (!at(s, '{')) {
		e->not_object = true;
		return skip_value(s);
	}
	s->p++;
	if (eat(s, '}'))
		return 0;
	do {
		int k, r;

		r = read_key(s, &k);
		if (r < 0)
			return r;
		if (!eat(s, ':'))
			return -EINVAL;
		if (k >= 0 && (seen & (1u << k)))
			return -EINVAL;
		if (k >= 0)
			seen |= 1u << k;
		r = read_member(s, e, k);
		if (r < 0)
			return r;
	} while (eat(s, ','));
	return eat(s, '}') ? 0 : -EINVAL;
}

static void entry_clear(struct restore_doc_entry *e)
{
	free(e->kind);
	free(e->name);
	free(e->pd);
	free(e->memory);
}

/* The value of "objects". */
static int read_objects(struct scan *s, struct restore_doc *doc)
{
	size_t cap = 0;

	if (!at(s, '['))
		return skip_value(s); /* not an array: has_objects stays false */
	doc->has_objects = true;
	s->p++;
	if (eat(s, ']'))
		return 0;
	do {
		int r;

		if (doc->n_entries == cap) {
			struct restore_doc_entry *n;

			cap = cap ? 2 * cap : 256;
			n = realloc(doc->entries, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			doc->entries = n;
		}
		doc->entries[doc->n_entries] = (struct restore_doc_entry){ 0 };
		r = read_entry(s, &doc->entries[doc->n_entries]);
		doc->n_entries++; /* freed with the rest, read or not */
		if (r < 0)
			return r;
	} while (eat(s, ','));
	return eat(s, ']') ? 0 : -EINVAL;
}

/* A member of the top level but "objects": jansson's. */
static int read_other(struct scan *s, struct restore_doc *doc, const char *key)
{
	const char *a;
	json_t *j;
	int r;

	ws(s);
	a = s->p;
	r = skip_value(s);
	if (r < 0)
		return r;
	if (json_object_get(doc->rest, key))
		return -EINVAL;
	j = json_loadb(a, (size_t)(s->p - a),
		       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		return -EINVAL;
	return json_object_set_new(doc->rest, key, j) < 0 ? -EINVAL : 0;
}

static int read_top(struct scan *s, struct restore_doc *doc)
{
	bool objects = false;

	if (!eat(s, '{'))
		return -EINVAL;
	if (eat(s, '}'))
		return 0;
	do {
		_cleanup_free_ char *key = NULL;
		int r = read_string(s, &key);

		if (r < 0)
			return r;
		if (!eat(s, ':'))
			return -EINVAL;
		if (streq(key, "objects")) {
			if (objects)
				return -EINVAL;
			objects = true;
			r = read_objects(s, doc);
		} else {
			r = read_other(s, doc, key);
		}
		if (r < 0)
			return r;
	} while (eat(s, ','));
	if (!eat(s, '}'))
		return -EINVAL;
	ws(s);
	return s->p == s->end ? 0 : -EINVAL;
}

int restore_doc_read(const char *buf, size_t len, struct restore_doc *doc)
{
	struct scan s = { .p = buf, .end = buf + len };
	int r;

	*doc = (struct restore_doc){ .rest = json_object() };
	if (!doc->rest)
		return -ENOMEM;
	r = read_top(&s, doc);
	if (r < 0)
		restore_doc_free(doc);
	return r;
}

void restore_doc_free(struct restore_doc *doc)
{
	for (size_t i = 0; i < doc->n_entries; i++)
		entry_clear(&doc->entries[i]);
	free(doc->entries);
	json_decref(doc->rest);
	*doc = (struct restore_doc){ 0 };
}

void restore_doc_str(FILE *f, const char *s)
{
	putc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc(c, f);
		} else if (c < 0x20) {
			fprintf(f, "\\u%04x", c);
		} else {
			putc(c, f);
		}
	}
	putc('"', f);
}
