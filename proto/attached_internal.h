/* SPDX-License-Identifier: MIT */
/*
 * The field tables of ATTACHED (attached_fields.c), read by its one
 * decoder (attached.c), its one encoder and its free (attached_encode.c):
 * what each list holds, where in the structs of attached.h, of which
 * type and range, whether required, and which names refer to which list.
 */
#ifndef RDMAD_PROTO_ATTACHED_INTERNAL_H
#define RDMAD_PROTO_ATTACHED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attached.h"

enum att_type {
	AT_STR,	   /* char *; a name or reference: non-empty (.nonempty) */
	AT_U64,	   /* uint64_t in [min, max] (max 0: no bound) */
	AT_BOOL,   /* bool */
	AT_ACCESS, /* unsigned int of IBV_ACCESS_ bits: an array of names */
	AT_FD,	   /* uint64_t: an index into the message's fds, used once */
	AT_GID,	   /* uint8_t[16]: text as an IPv6 address */
	AT_MODE,   /* enum proto_attach_mode: "shared" or "local" */
	AT_OBJ,	   /* a struct embedded at off: .sub's fields, into it */
	AT_LIST,   /* an array: pointer at off, count at count_off, of
		      .sub's elements */
};

/* The top-level lists, for references (0: none). */
enum att_list_id {
	AL_NONE,
	AL_MEMORY,
	AL_XRCD,
	AL_PD,
	AL_QP,
	AL_SRQ,
	AL_DM,
	AL_DM_MR,
	AL_IMR,
	AL_MCAST,
	AL_MR,
	AL_MAX
};

struct att_struct;

struct att_field {
	const char *key;
	enum att_type type;
	size_t off;
	size_t has;	 /* 1 + offset of the field's has_ flag; 0: none */
	bool required;	 /* absent is malformed (absent, has_ false) */
	bool nonempty;	 /* AT_STR */
	uint64_t min, max; /* AT_U64 */
	enum att_list_id ref; /* AT_STR: a name in that list */
	size_t ref_index;     /* AT_STR with ref: where its index goes */
	const struct att_struct *sub; /* AT_OBJ, AT_LIST */
	size_t count_off;	      /* AT_LIST */
};

/* A struct of attached.h: its fields, "name" first where it has one. */
struct att_struct {
	const char *what; /* for messages: "mr", "mcast qp", ... */
	size_t size;
	const struct att_field *fields;
	size_t n_fields;
	/* Names unique among the lists of one namespace (0: not checked;
	 * mr, dm_mr and implicit_mr share one). */
	int ns;
	enum att_list_id id; /* top-level lists */
};

/* The payload's own fields and lists. */
extern const struct att_struct att_top;

/* The top-level list of id (its field in att_top). */
const struct att_field *att_list_field(enum att_list_id id);

/* Where a field is in base. */
#define ATT_AT(base, f) ((char *)(base) + (f)->off)

#endif
