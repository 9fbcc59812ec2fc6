/* SPDX-License-Identifier: MIT */
/* Inside librdmad only (hidden by the version script). */
#ifndef RDMAD_INTERNAL_H
#define RDMAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Set this thread's last error; returns -|err|. */
int client_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The errno for an ERROR code of the daemon ("not_found": ENOENT, ...;
 * EPROTO for a code this library does not know, or NULL). */
int client_code_errno(const char *code);

/* "64 MiB", "1.5 KiB", "100 bytes": exact, or one decimal rounded up. */
void client_size_str(uint64_t bytes, char *buf, size_t size);

#endif
