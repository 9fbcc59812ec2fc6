/* SPDX-License-Identifier: MIT */
/* Checks of a configuration against the devices present: limits above
 * what the device can do are configuration errors, found before anything
 * is created. What a device cannot do at all (XRC, DM on rxe) is not an
 * error here: those objects fail with their reason at run time. */
#ifndef RDMAD_CAPCHECK_H
#define RDMAD_CAPCHECK_H

#include "config.h"

/* Add an error to c for every limit above its device's. Devices absent
 * now are skipped. */
void capcheck_config(struct config *c);

#endif
