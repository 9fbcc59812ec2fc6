/* SPDX-License-Identifier: MIT */
/*
 * Talking to the service manager: readiness and progress (sd_notify), the
 * watchdog, and the sockets systemd passes (socket activation). Without
 * systemd (no NOTIFY_SOCKET, no LISTEN_FDS) all of it does nothing.
 * A front end, the daemon's face to systemd: it hears the manager as the
 * others do, they claim their passed sockets here, and nothing below
 * front/ calls it.
 */
#ifndef RDMAD_SYSD_H
#define RDMAD_SYSD_H

#include <stdbool.h>
#include <sys/socket.h>

struct manager;

/* Takes the sockets systemd passed (LISTEN_FDS), before the front ends
 * start; they claim theirs with sysd_listen_take_*(). */
int sysd_listen_init(void);
/* A passed socket for this unix path (by FileDescriptorName=name, or by
 * type and path), or -ENOENT. The caller owns it then. */
int sysd_listen_take_unix(const char *name, int type, const char *path);
/* A passed socket bound to this address (SOCK_STREAM), or -ENOENT. */
int sysd_listen_take_inet(const struct sockaddr *sa, socklen_t len);
/* The configuration the previous run stored (config_keep()), taken
 * once: its bytes (to free), or -ENOENT when systemd passed none. */
int sysd_take_config(char **out, size_t *len);
/* What sysd_take_config() gave is the configuration this run loaded:
 * the store holds it already, and it is not stored again until a
 * reload changes it. */
void sysd_config_reused(void);
/* Closes what no front end claimed (a warning each), once all started. */
void sysd_listen_done(void);

/* READY=1 once every profile has been tried, STATUS= and
 * EXTEND_TIMEOUT_USEC= while objects are being created, the watchdog
 * (sd-event's, when WatchdogSec= is set). */
int sysd_start(struct manager *m);
void sysd_reloading(void);
/* A reload that was refused: nothing will be created, ready again now. */
void sysd_reload_refused(void);
void sysd_stopping(void);

#endif
