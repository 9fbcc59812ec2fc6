/* SPDX-License-Identifier: MIT */
#ifndef RDMAD_OPENAPI_H
#define RDMAD_OPENAPI_H

/* The OpenAPI 3 document of the REST API (GET /v1/openapi.json), as
 * daemon/api/openapi.json holds it: NUL-terminated JSON text. */
extern const char rdmad_openapi_json[];

#endif
