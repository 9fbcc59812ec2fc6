/* SPDX-License-Identifier: MIT */
/*
 * The restart state document (restore.h) read and written without a
 * tree of json_t per object. A profile of 10k objects has a document of
 * about a megabyte, read on the loop before anything of the profile is
 * made and written before READY=1: through jansson's tree that took
 * longer than taking the objects back (0.3 s each way natively, seconds
 * under emulation), through this a few milliseconds.
 *
 * It is still JSON, the same document: "objects" is read here, an entry
 * at a time, without a tree; every other member of the top level (a few
 * small ones) is handed to jansson. Anything JSON allows is read
 * (whitespace, escapes, any order of members), so a document written by
 * another tool (a test's forgery) reads the same. What it refuses: what
 * is not JSON, a member twice (at the top, or one it keeps in an entry).
 * What passes unseen: a bad escape inside what it skips (an entry's other
 * members), and bytes that are not UTF-8 in an entry's strings (a name
 * that is not valid matches no declared one).
 */
#ifndef RDMAD_RESTORE_DOC_H
#define RDMAD_RESTORE_DOC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* One member of "objects", as read. A string member that is absent or
 * not a string is NULL (the reader's: may be taken, leaving NULL); an
 * integer one absent or not an integer is 0, as json_integer_value()
 * says; zero_based and draining are true only when the member is true. */
struct restore_doc_entry {
	char *kind, *name, *pd, *memory;
	bool has_handle, zero_based, draining;
	json_int_t handle, offset, length, iova, access, lkey, rkey;
	bool not_object; /* the member was not an object */
};

struct restore_doc {
	json_t *rest; /* every member of the top level but "objects" */
	bool has_objects; /* "objects" was there, an array */
	struct restore_doc_entry *entries;
	size_t n_entries;
};

/* Read buf (len bytes) into *doc. 0, or -EINVAL: not JSON, not an
 * object at the top, or a member twice in an object (the top level or
 * an entry). -ENOMEM. */
int restore_doc_read(const char *buf, size_t len, struct restore_doc *doc);
void restore_doc_free(struct restore_doc *doc);
/* s as a JSON string (quoted, escaped) to f. */
void restore_doc_str(FILE *f, const char *s);

#endif
