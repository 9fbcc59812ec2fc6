/* SPDX-License-Identifier: MIT */
/* config_mcast.c, for the verify pass. */
#ifndef RDMAD_CONFIG_MCAST_H
#define RDMAD_CONFIG_MCAST_H

#include "config_internal.h"

/* The QPs a group names (its dependencies). */
size_t conf_mcast_refs(const struct conf_mcast *m, struct conf_ref *out,
		       size_t max);
/* Every group of pr: QPs, addresses, duplicates. */
void conf_verify_mcasts(struct parser *p, const struct conf_profile *pr);

#endif
