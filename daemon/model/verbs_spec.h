/* SPDX-License-Identifier: MIT */
/*
 * The configuration's sections as verbs/ takes them: verbs/ sits below
 * the model and knows no struct conf_*, so whoever holds one (the engine,
 * the device checks) translates it here, in one place.
 */
#ifndef RDMAD_VERBS_SPEC_H
#define RDMAD_VERBS_SPEC_H

#include "config.h"
#include "devmatch.h"
#include "memory.h"

/* A device section's matchers and GID choice; its strings are d's. */
struct devmatch_spec devmatch_of(const struct conf_device *d);

/* A memory object's backing; its strings are c's. */
struct memory_spec memory_of(const struct conf_memory *c);

#endif
