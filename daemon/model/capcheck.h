/* SPDX-License-Identifier: MIT */
/* Checks of a configuration against the devices present: limits above
 * what the device can do are configuration errors, found before anything
 * is created. What a device cannot do at all (XRC, DM on rxe) is not an
 * error here: those objects fail with their reason at run time. */
#ifndef RDMAD_CAPCHECK_H
#define RDMAD_CAPCHECK_H

#include <stdio.h>

#include "config.h"

/* Add an error to c for every limit above its device's. Devices absent
 * now are skipped; skipped (if not NULL) hears which. */
void capcheck_config(struct config *c, FILE *skipped);
/*
 * hugetlb memory against this host's huge page pools (rdmad --check):
 * the page size exists, the size is a multiple of it, and the pool has
 * the free pages the whole file needs. Not at start nor at reload, where
 * memory the daemon holds already counts as used.
 */
void capcheck_memory(struct config *c);

#endif
