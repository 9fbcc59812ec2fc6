/* SPDX-License-Identifier: MIT */
/*
 * The control layer: one function per operation, each taking decoded
 * parameters and returning a JSON document and a status. REST (http.c)
 * and, later, the control socket are thin front ends over it, so both
 * speak the same documents.
 */
#ifndef RDMAD_API_H
#define RDMAD_API_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct manager;

/*
 * An answer that comes later (POST /v1/reload waits for the reload): the
 * front end's memory, given in api_request.later; fn(later, status,
 * reply) is called once, from the loop, with a new reference. A front
 * end that goes away first calls api_forget().
 */
struct api_later {
	void (*fn)(struct api_later *later, int status, json_t *reply);
};

/* api_handle's status for an answer that comes through later->fn. */
#define API_LATER 0

struct api_request {
	const char *method;
	const char *path;
	json_t *body;	 /* NULL when there is none */
	bool authorized; /* may change things (REST: the bearer token) */
	bool token_set;	 /* a token exists to authorize with */
	bool via_socket; /* the control socket: root or admin_group */
	/* Who asks, on the control socket (SO_PEERCRED); REST callers have
	 * no identity. What sessions, orphans and QP endpoints show of
	 * other users depends on it (view.h). */
	bool has_uid;
	uid_t uid;
	/* A profile's own socket: only that profile's documents and what
	 * shows no other profile (health, version, the API document); no
	 * change, whatever the peer. NULL: the main socket or REST. */
	const char *scope;
	/* NULL: this front end cannot wait, such requests get a 503. */
	struct api_later *later;
};

/* Handle one request. Returns an HTTP status code and the reply document
 * in *reply (a new reference; an error document on failure), or
 * API_LATER: the answer comes through req->later. */
int api_handle(struct manager *m, const struct api_request *req,
	       json_t **reply);
/* May a session scoped to profile scope (api_request.scope) ask method
 * on path? False also for a path no route has. */
bool api_in_scope(const char *method, const char *path, const char *scope);
/* later's answers are not wanted any more (its front end is going). */
void api_forget(struct manager *m, struct api_later *later);

/*
 * Documents that only change when the engine says so: for a GET of such
 * a path, set *generation (unique among that path's, changes with what the
 * document shows) and return true, so that a front end may answer with
 * the bytes it rendered last time the generation was the same. false:
 * render it anew.
 */
bool api_cacheable(struct manager *m, const char *method, const char *path,
		   uint64_t *generation);

/* The methods path answers to, "GET, HEAD, POST" style, into allow
 * (the Allow: header of a 405). Returns its length; 0 for an unknown
 * path. */
size_t api_allow(const char *path, char *allow, size_t size);

/* {"error":{"code":code,"message":message}}; NULL when out of memory.
 * api_verror: the same with a va_list. */
json_t *api_verror(const char *code, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
json_t *api_error(const char *code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
