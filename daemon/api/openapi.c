// SPDX-License-Identifier: MIT
/*
 * The OpenAPI document, daemon/api/openapi.json, built into the daemon
 * as it is in the tree (and installed beside it): one file, no copy to
 * keep in step. The assembler's .incbin takes the file's bytes as they
 * are, where a generated C array would need a generator and escaping;
 * gcc and clang's assemblers both have it. The path is relative to the
 * top of the tree, where make runs; the Makefile names the file as a
 * prerequisite of this object, which -MMD cannot see.
 */
#include "openapi.h"

__asm__(".section .rodata\n"
	".balign 16\n"
	".globl rdmad_openapi_json\n"
	".hidden rdmad_openapi_json\n"
	".type rdmad_openapi_json, @object\n"
	"rdmad_openapi_json:\n"
	".incbin \"daemon/api/openapi.json\"\n"
	".byte 0\n" /* a C string */
	".size rdmad_openapi_json, . - rdmad_openapi_json\n"
	".previous\n");
