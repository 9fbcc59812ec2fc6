/* SPDX-License-Identifier: MIT */
/* Inside librdmad only (hidden by the version script). */
#ifndef RDMAD_INTERNAL_H
#define RDMAD_INTERNAL_H

/* Set this thread's last error; returns -|err|. */
int client_set_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
