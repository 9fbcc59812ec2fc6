// SPDX-License-Identifier: MIT
#include <dlfcn.h>
#include <errno.h>

#include "log.h"
#include "mhd.h"

#ifndef MHD_SONAME
#define MHD_SONAME "libmicrohttpd.so.12"
#endif

#define MHD_DEFINE(f) __typeof__(f) *sym_##f;
MHD_FUNCTIONS(MHD_DEFINE)
#undef MHD_DEFINE

static void *lib;

int mhd_open_file(const char *soname)
{
	void *dl;

	if (lib)
		return 0;
	dl = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		log_error(0, "REST needs %s: %s", soname, dlerror());
		return -ENOPKG;
	}
#define MHD_FIND(f)                                                            \
	if (!(sym_##f = (__typeof__(f) *)dlsym(dl, #f))) {                     \
		log_error(0, "REST needs %s from %s", #f, soname);             \
		goto missing;                                                  \
	}
	MHD_FUNCTIONS(MHD_FIND)
#undef MHD_FIND
	lib = dl;
	return 0;
missing:
#define MHD_FORGET(f) sym_##f = NULL;
	MHD_FUNCTIONS(MHD_FORGET)
#undef MHD_FORGET
	dlclose(dl);
	return -ENOPKG;
}

int mhd_open(void)
{
	return mhd_open_file(MHD_SONAME);
}
