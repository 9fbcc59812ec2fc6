/* SPDX-License-Identifier: MIT */
/*
 * libmicrohttpd, opened when REST first needs it.
 *
 * rdmad does not link libmicrohttpd: http_start() opens it with
 * dlopen() when there is an address to listen on. libmicrohttpd brings
 * the TLS stack with it (gnutls, p11-kit, nettle, gmp and more) and
 * sets gnutls up in its constructor: that is about 2.7 MB of RSS and
 * 1.4 ms at every exec, which `rdmad --check`, rdmactl's checks and a
 * daemon with `listen = [ ]` would pay for nothing.
 *
 * The REST files call libmicrohttpd through sym_MHD_*, one pointer per
 * function they use (MHD_FUNCTIONS); the types come from the header, so
 * a call that does not match libmicrohttpd's prototype does not build.
 */
#ifndef RDMAD_MHD_H
#define RDMAD_MHD_H

#include <microhttpd.h>

#define MHD_FUNCTIONS(X)                                                       \
	X(MHD_add_connection)                                                  \
	X(MHD_add_response_header)                                             \
	X(MHD_create_response_from_buffer)                                     \
	X(MHD_create_response_from_callback)                                   \
	X(MHD_destroy_response)                                                \
	X(MHD_get_connection_info)                                             \
	X(MHD_get_daemon_info)                                                 \
	X(MHD_get_timeout)                                                     \
	X(MHD_is_feature_supported)                                            \
	X(MHD_lookup_connection_value)                                         \
	X(MHD_queue_response)                                                  \
	X(MHD_resume_connection)                                               \
	X(MHD_run)                                                             \
	X(MHD_start_daemon)                                                    \
	X(MHD_stop_daemon)                                                     \
	X(MHD_suspend_connection)

#define MHD_DECLARE(f) extern __typeof__(f) *sym_##f;
MHD_FUNCTIONS(MHD_DECLARE)
#undef MHD_DECLARE

/*
 * Open libmicrohttpd (MHD_SONAME) and find every function, once; later
 * calls return at once. Returns 0, or -ENOPKG when the library or one of
 * its functions is missing (logged with dlerror()'s reason). Call from
 * the event loop's thread.
 */
int mhd_open(void);
/* mhd_open() of another file name (the unit tests' failures). */
int mhd_open_file(const char *soname);

#endif
