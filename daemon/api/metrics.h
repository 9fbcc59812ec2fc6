/* SPDX-License-Identifier: MIT */
/* GET /metrics: the daemon's state in the Prometheus text format. */
#ifndef RDMAD_METRICS_H
#define RDMAD_METRICS_H

struct manager;

/* The exposition text (to free), or NULL on allocation failure. */
char *metrics_render(struct manager *m);

#endif
