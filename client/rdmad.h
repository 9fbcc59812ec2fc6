/* SPDX-License-Identifier: MIT */
/*
 * librdmad: the client library of rdmad.
 *
 * This version carries the error reporting and version calls; the attach
 * API of the specification (rdmad_connect, rdmad_attach, ...) comes with
 * the attach protocol.
 */
#ifndef RDMAD_H
#define RDMAD_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.1.0". */
const char *rdmad_version(void);

/* A message for a negative errno returned by an rdmad_* call. */
const char *rdmad_strerror(int err);

/* This thread's last detailed error, or "" if none. */
const char *rdmad_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
