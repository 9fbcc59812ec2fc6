/* SPDX-License-Identifier: MIT */
/*
 * A manager for the fuzz targets of the control layer and the HTTP front
 * end: the configuration of tests/fuzz/daemon.conf (profiles of every
 * kind of object, on devices that are absent here, so that they stay
 * pending), written to a temporary file so that POST /v1/reload reads it.
 */
#ifndef RDMAD_FUZZ_MANAGER_H
#define RDMAD_FUZZ_MANAGER_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "manager.h"

static const char fuzz_daemon_conf[] =
	"daemon = { workers = 1; log_level = \"error\"; };\n"
	"devices = ( { name = \"d\"; match = { ibdev = \"fuzz0\"; }; } );\n"
	"profiles = ( { name = \"p\"; device = \"d\";\n"
	"  memory = ( { name = \"m\"; size = \"1M\"; } );\n"
	"  pd = ( { name = \"pd\"; } );\n"
	"  mr = ( { name = \"mr\"; pd = \"pd\"; memory = \"m\";\n"
	"           access = [ \"local_write\", \"remote_write\" ]; } );\n"
	"  cq = ( { name = \"cq\"; } );\n"
	"  qp = ( { name = \"a\"; pd = \"pd\"; type = \"rc\"; send_cq = \"cq\";\n"
	"           recv_cq = \"cq\"; state = \"rts\"; peer = \"b\"; },\n"
	"         { name = \"b\"; pd = \"pd\"; type = \"rc\"; send_cq = \"cq\";\n"
	"           recv_cq = \"cq\"; state = \"rts\"; peer = \"a\"; } ); },\n"
	"  { name = \"q\"; device = \"d\"; } );\n";

static struct manager *fuzz_manager(void)
{
	static struct manager *m;
	char path[] = "/tmp/fuzz-rdmad-XXXXXX";
	struct config *c = NULL;
	FILE *f;
	int fd;

	if (m)
		return m;
	log_set_level(LOG_ERR);
	fd = mkstemp(path);
	if (fd < 0 || !(f = fdopen(fd, "w")))
		abort();
	fputs(fuzz_daemon_conf, f);
	fclose(f);
	if (config_load(path, &c) < 0 || c->n_errors) {
		config_print_errors(c, stderr);
		abort();
	}
	if (manager_new(c, &m) < 0 || manager_start(m) < 0)
		abort();
	return m;
}

#endif
