/* SPDX-License-Identifier: MIT */
/*
 * A profile at run time: its own device context and the objects its
 * configuration declares, created in dependency order and destroyed in
 * reverse. Objects a device refuses are marked failed with the reason;
 * the rest of the profile still runs.
 */
#ifndef RDMAD_PROFILE_H
#define RDMAD_PROFILE_H

#include <infiniband/verbs.h>
#include <jansson.h>

#include "config.h"
#include "memory.h"
#include "util.h"

enum obj_kind {
	OBJ_MEMORY,
	OBJ_PD,
	OBJ_MR,
	OBJ_CQ,
	OBJ_QP,
	OBJ_KIND_MAX,
};

enum obj_state {
	OBJ_PENDING, /* not created (yet) */
	OBJ_READY,
	OBJ_FAILED,
};

struct object {
	enum obj_kind kind;
	const char *name; /* owned by the config */
	const void *conf; /* struct conf_<kind> */
	enum obj_state state;
	int err;      /* positive errno when failed */
	char *reason; /* when failed */
	union {
		struct memory mem;
		struct ibv_pd *pd;
		struct ibv_mr *mr;
		struct {
			struct ibv_cq *cq;
			struct ibv_comp_channel *channel;
		} cq;
		struct ibv_qp *qp;
	} u;
	uint64_t iova; /* mr */
};

enum profile_state {
	PROFILE_PENDING, /* device absent */
	PROFILE_READY,	 /* every object created */
	PROFILE_DEGRADED, /* some objects failed */
	PROFILE_FAILED,	  /* the device could not be opened */
};

struct profile {
	const struct conf_profile *conf;
	const struct conf_device *dev;
	struct ibv_context *ctx;
	enum profile_state state;
	char *reason;
	struct object *objects; /* in creation order */
	size_t n_objects;
};

/* Build the object list of c (nothing is created yet). */
int profile_new(const struct config *cfg, const struct conf_profile *c,
		struct profile **out);
/* Open the device and create every object. progress() is told each step.
 * Returns 0 when the profile runs (possibly with failed objects). */
int profile_start(struct profile *p,
		  void (*progress)(void *ud, const struct object *o),
		  void *ud);
/* Destroy every object, children first, and close the context. */
void profile_stop(struct profile *p);
struct profile *profile_free(struct profile *p);

struct object *profile_find(struct profile *p, enum obj_kind kind,
			    const char *name);
int obj_kind_from_name(const char *name);
const char *obj_kind_name(enum obj_kind k);
const char *obj_state_name(enum obj_state s);
const char *profile_state_name(enum profile_state s);

/* JSON documents for the control surfaces. */
json_t *object_json(const struct object *o);
json_t *profile_json(const struct profile *p, int detail);

#endif
