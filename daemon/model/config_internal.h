/* SPDX-License-Identifier: MIT */
/*
 * What the pieces of the configuration model share, and nothing outside
 * daemon/model/config*.c may use:
 *   config_fields.c  the key tables, enum names, defaults
 *   config_parse.c   files and includes, libconfig -> structs
 *   config_sources.c reading a file, and the files read (their hashes)
 *   config_notes.c   errors and warnings at their file:line
 *   config_literals.c  the integer literals as written in a file's text
 *   config_verify.c  names, references, shapes
 *   config_index.c   name indexes and the lookups by name
 *   config_dump.c    config_json(), config_print()
 *   config_image.c   a loaded config as bytes and back (validate.c)
 *   config.c         the face: entry points, free, equality; it calls
 *                    the others, and no config_*.c calls it back
 */
#ifndef RDMAD_CONFIG_INTERNAL_H
#define RDMAD_CONFIG_INTERNAL_H

#include <dirent.h>
#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "config.h"
#include "util.h"

enum field_type {
	F_STRING,
	F_INT,	  /* int, with min/max */
	F_UINT32, /* uint32_t, with min/max */
	F_UINT16,
	F_SIZE,	  /* uint64_t, "64M" or integer */
	F_BOOL,
	F_TRIBOOL, /* enum conf_tribool, from a boolean */
	F_ENUM,	  /* int, from names */
	F_ACCESS, /* unsigned int IBV_ACCESS_* from a list of names */
	F_STRLIST,
	F_INT64LIST, /* int64_t array with a count, with min/max */
	F_INT64,  /* int64_t, with min/max */
	F_GROUP,  /* nested table, same struct; offset: a bool set when
		     present, if set_flag */
	F_GROUPLIST, /* a list of groups ( { ... }, ... ): an array of
			size-byte structs (each beginning with its conf_loc)
			at offset, its length at count_offset; defaults()
			fills each first */
	F_IGNORE, /* a known key handled elsewhere */
};

struct enum_name {
	const char *name;
	int value;
};

struct field {
	const char *key;
	enum field_type type;
	size_t offset;
	size_t count_offset; /* F_STRLIST, F_INT64LIST, F_GROUPLIST: where
				the count goes */
	bool required;
	int64_t min, max;
	const struct enum_name *names; /* F_ENUM, F_ACCESS */
	const struct field *sub;       /* F_GROUP, F_GROUPLIST */
	bool set_flag;		       /* F_GROUP: set the bool at offset */
	/* F_GROUP: a struct of its own, allocated when the key is given
	 * (offset: the pointer to it, NULL when absent), of size bytes,
	 * which defaults() fills in first. For what few objects have. */
	bool indirect;
	size_t size;
	void (*defaults)(void *sub);
	/* F_GROUPLIST: at most this many elements (0: no limit). */
	size_t max_count;
	/* F_STRING: a secret (a target's token): documents and --dump say
	 * only that it is set (true), never what it is. */
	bool secret;
	/* F_STRING, F_STRLIST: NULL when the value is fine, else why not. */
	const char *(*check)(const char *value);
	/* F_STRLIST: NULL, or why the value (kept) is doubtful on this
	 * host; a warning, not an error. */
	const char *(*warn)(const char *value);
};

#define END_OF_TABLE { .key = NULL }

/* F_SIZE without a max of its own: 1 PiB, anything above is a typo. */
#define CONF_SIZE_LIMIT (1LL << 50)

struct kind_table {
	const struct field *fields;
	size_t size;
	void (*defaults)(void *elem);
};

/* config_fields.c */
extern const struct enum_name conf_access_names[];
extern const char *const conf_kind_names[OBJ_KIND_MAX];
extern const struct kind_table conf_kinds[OBJ_KIND_MAX];
extern const struct field conf_daemon_fields[];
extern const struct field conf_device_fields[];
extern const struct field conf_profile_fields[];
/* The name of value v in t, or "?". */
const char *conf_enum_name(const struct enum_name *t, int v);

/* config_index.c: a name index over up to cap objects of the array at
 * base (each size bytes), which begin with loc and name. */
struct conf_names *conf_names_new(const void *base, size_t size, size_t cap);
/* Index obj under its name: 0 (also for an object without a name), or
 * -EEXIST when the name is taken (*first: the object that has it, and
 * obj is not indexed), -ENOSPC past cap, or -ENOMEM. */
int conf_names_add(struct conf_names *ix, const void *obj, const void **first);
const void *conf_names_find(const struct conf_names *ix, const char *name);
struct conf_names *conf_names_free(struct conf_names *ix);

/* config_strings.c: the config's own copy of str, shared with every
 * equal string of the config while it loads (so never to be changed or
 * freed on its own), or NULL when out of memory. */
char *conf_strdup(struct config *c, const char *str);
/* Loaded: no more interning (its table goes). */
void conf_strings_seal(struct config *c);
void conf_strings_free(struct config *c);

/*
 * Room for element n of an array of n elements of size bytes, which grows
 * only through here: its capacity is implicit, the next power of two, so
 * that it doubles when n reaches one and n appends cost O(n) copies.
 * Returns the array, moved or not, or NULL when out of memory (the array
 * unchanged).
 */
static inline void *array_room(void *a, size_t n, size_t size)
{
	if (n & (n - 1))
		return a; /* not a power of two: below the capacity */
	return reallocarray(a, n ? 2 * n : 1, size);
}

/* config_literals.c */
/*
 * The integer literals of the text being parsed, in the order libconfig
 * reads them. libconfig 1.5 silently keeps only the low 32 bits of an
 * integer literal without an L suffix (5368709120 becomes 1073741824,
 * 0xFFFFFFFF becomes -1), and saturates one with the suffix beyond 64
 * bits: each integer setting is paired with the literal it was read from
 * (through the setting's hook), so that a value that did not survive is
 * refused, in arrays as in scalars.
 */
struct literal {
	const char *text; /* as written */
	int len;
	int line;
	long long value;
	bool erange; /* beyond 64 bits */
	bool wide;   /* an L suffix: libconfig made it a 64-bit setting */
};

struct source {
	struct literal *lit;
	size_t n_lit;
	size_t next; /* pairing: the next literal to hand out */
	int include_line; /* a line that starts with @include, or 0 */
};

/* Every integer literal of text, and the first line that libconfig
 * would take for an @include. 0 or -ENOMEM. */
int source_scan(struct source *src, const char *text);
void source_free(struct source *src);
/* Pair every integer setting under s, in order, with its literal (the
 * setting's hook). Returns false when the two do not match up. */
bool source_pair(struct source *src, config_setting_t *s);

/* The state of one load: the config being built, and the file being
 * parsed. */
struct parser {
	struct config *c;
	int oom;
	const char *file; /* interned name of the file being parsed */
	/* Where daemon.include and daemon.runtime_dir were set. */
	struct conf_loc include_loc, runtime_dir_loc;
	char label[96];	  /* "mr 'ring'": the object being parsed */
	/* config_load_known(): what each file read must still be, and
	 * whether one was not. */
	const struct config *known;
	bool stale;
};

static inline struct conf_loc conf_loc_at(const char *file, int line)
{
	return (struct conf_loc){ .file = file, .line = line };
}

/* config_notes.c: what a load reports. */
void parser_error(struct parser *p, struct conf_loc loc, const char *fmt, ...)
	_printf_(3, 4);
/* What this host makes doubtful: printed by --check, never refused. */
void parser_warning(struct parser *p, struct conf_loc loc, const char *fmt,
		    ...) _printf_(3, 4);
/* An error about a setting, at its line. */
void parser_setting_error(struct parser *p, const config_setting_t *s,
			  const char *fmt, ...) _printf_(3, 4);
/* An error about a value: prefixed with the object it belongs to
 * (p->label). */
void parser_field_error(struct parser *p, const config_setting_t *s,
			const char *fmt, ...) _printf_(3, 4);
/* A warning about a value, prefixed like parser_field_error()'s. */
void parser_field_warning(struct parser *p, const config_setting_t *s,
			  const char *fmt, ...) _printf_(3, 4);
/* Where s is: the file being parsed, and s's line. */
struct conf_loc parser_loc(struct parser *p, const config_setting_t *s);
/* The name of a file as messages show it (UTF-8, whatever bytes the name
 * on disk holds), kept in the config: NULL is the main file. */
const char *parser_intern_file(struct parser *p, const char *file);

/* config_parse.c */
/* Parse one file's text; name is what locations say. */
void parser_text(struct parser *p, const char *name, const char *text,
		 bool main_file);
void parser_file(struct parser *p, const char *path, bool main_file);
/* Every *.conf of daemon.include, in name order. */
void parser_include(struct parser *p);

/* config_sources.c: reading the files, and what was read. */
/*
 * The text of a regular file of at most 16 MiB (NUL added), opened
 * without blocking so that a FIFO or a device is refused, not waited
 * on. 0, or -errno with a message in *why when the errno alone would
 * not say it.
 */
int config_read_text(const char *path, char **out, size_t *len,
		     const char **why, struct stat *st);
/* config_read_text(), path recorded in p->c->sources; -ESTALE (and
 * p->stale) when it is not what p->known read there. */
int parser_read(struct parser *p, const char *path, char **text,
		size_t *len, const char **why);
/* The include directory d (at path) and the names of its n files, in
 * the order they are read, recorded like parser_read(). */
int parser_dir_seen(struct parser *p, const char *path, DIR *d,
		    char *const *names, size_t n);
/* The *.conf files of directory d (at dir) as "dir/name", in name
 * order, not those whose name starts with a dot: what an include
 * directory gives. 0 or -ENOMEM; free with config_names_free(). */
int config_dir_names(DIR *d, const char *dir, char ***names, size_t *n);
void config_names_free(char **names, size_t n);
void config_sources_free(struct config *c);

/* config_image.c: the image read into c (zeroed, its strings not
 * sealed): 0, -EPROTO or -ENOMEM. c is the caller's to free, whatever
 * the result. */
int conf_image_read(struct config *c, const void *image, size_t len);

/* config_verify.c: what a single key cannot check. */
void parser_verify(struct parser *p);

#endif
