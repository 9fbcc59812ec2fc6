/* SPDX-License-Identifier: MIT */
/* Profile and object documents as rdmactl prints them: one table or line
 * per document, the keys that matter first. */
#ifndef RDMACTL_PROFPRINT_H
#define RDMACTL_PROFPRINT_H

#include <jansson.h>

/* GET /v1/profiles: a line per profile, with its progress. */
void print_profiles(json_t *a);
/* One object's line: kind, name, state, its kind's keys. */
void print_object_line(json_t *o);
/* A profile's line and its objects (of kind only, when not NULL). */
void print_profile_kind(json_t *p, const char *kind);
void print_profile(json_t *p);

#endif
