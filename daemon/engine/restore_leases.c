// SPDX-License-Identifier: MIT
/*
 * The previous run's lease record (restore.h: RESTORE_FDNAME_LEASE), read:
 * who held what, each holder's lease sets (version 2) joined to its own
 * leases, in the shape of version 1 that restore.c and manager_adopt.c
 * go by.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "durable.h"
#include "log.h"
#include "restore_leases.h"
#include "util.h"

/* A record bigger than this is not ours. */
#define RECORD_MAX (64u << 20)
/* Every holder's leases in the record; 2: its lease sets named by id,
 * each in a record of its own. */
#define LEASES_V1 1
#define LEASES_VERSION 2

char *restore_record_read(int fd, size_t *len)
{
	char *text = NULL;
	int r = durable_read(fd, RECORD_MAX, &text, len, NULL);

	if (r == 0 && *len)
		return text;
	free(text);
	text = NULL;
	if (r != -ENOENT || lseek(fd, 0, SEEK_SET) < 0 ||
	    read_all(fd, RECORD_MAX, -1, &text, len) < 0 || !*len) {
		free(text);
		return NULL;
	}
	return text;
}

/* The leases of the set id among sets (its record's "leases"), a new
 * reference; NULL when it is missing or does not read. */
static json_t *set_leases(const struct restore_set *sets, size_t n_sets,
			  const char *id)
{
	json_t *doc, *leases = NULL;
	size_t len = 0;

	for (size_t i = 0; i < n_sets; i++) {
		_cleanup_free_ char *text = NULL;

		if (!streq(sets[i].id, id) ||
		    !(text = restore_record_read(sets[i].fd, &len)))
			continue;
		doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
		if (json_integer_value(json_object_get(doc, "version")) ==
			LEASES_VERSION &&
		    streq(json_string_value(json_object_get(doc, "id")) ?: "",
			  id))
			leases = json_incref(json_object_get(doc, "leases"));
		json_decref(doc);
		if (json_is_array(leases))
			return leases;
		json_decref(leases);
		leases = NULL;
	}
	return NULL;
}

/* A version 2 holder, {..., sets: [id], leases: [...]}, in the shape of
 * version 1: its sets' leases joined to its own. False when a set it
 * names is missing (the record's writer stores a set before a holder
 * names it: the record is not ours, or not whole). */
static bool holder_expand(const struct restore_set *kept, size_t n_kept,
			  json_t *h)
{
	json_t *sets = json_object_get(h, "sets"), *own, *id;
	size_t i;

	if (!sets)
		return true;
	own = json_object_get(h, "leases");
	if (!json_is_array(sets) || (own && !json_is_array(own)))
		return false;
	if (!own && json_object_set_new(h, "leases", own = json_array()) < 0)
		return false;
	json_array_foreach(sets, i, id)
	{
		json_t *leases =
		    json_is_string(id)
			? set_leases(kept, n_kept, json_string_value(id))
			: NULL;
		int r = leases ? json_array_extend(own, leases) : -1;

		json_decref(leases);
		if (r < 0)
			return false;
	}
	return json_object_del(h, "sets") == 0;
}

json_t *restore_leases_read(const char *profile, int lease_fd,
			    const struct restore_set *sets, size_t n_sets,
			    json_t **makers)
{
	_cleanup_free_ char *text = NULL;
	json_t *doc, *holders, *h;
	json_int_t version;
	size_t len = 0, i;

	*makers = NULL;
	if (lease_fd < 0 || !(text = restore_record_read(lease_fd, &len)))
		return NULL;
	doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	holders = json_object_get(doc, "holders");
	version = json_integer_value(json_object_get(doc, "version"));
	if ((version != LEASES_V1 && version != LEASES_VERSION) ||
	    !json_is_array(holders))
		holders = NULL;
	json_array_foreach(holders, i, h)
	{
		if (version == LEASES_VERSION &&
		    !holder_expand(sets, n_sets, h)) {
			log_warn(0,
				 "profile %s: its lease record names a "
				 "lease set the store does not hold",
				 profile);
			holders = NULL;
			break;
		}
	}
	if (holders && json_is_array(json_object_get(doc, "makers")))
		*makers = json_incref(json_object_get(doc, "makers"));
	json_incref(holders);
	json_decref(doc);
	return holders;
}
