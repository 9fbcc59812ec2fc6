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

struct manager;

/* Handle one request. Returns an HTTP status code and the reply document
 * in *reply (a new reference; an error document on failure). */
int api_handle(struct manager *m, const char *method, const char *path,
	       json_t **reply);

/* {"error":{"code":code,"message":message}} */
json_t *api_error(const char *code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
