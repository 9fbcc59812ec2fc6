// SPDX-License-Identifier: MIT
/*
 * rdmad: read the configuration, create what it declares, serve the
 * control surfaces, and on SIGTERM/SIGINT destroy everything and exit.
 */
#include <getopt.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sysexits.h>

#include "capcheck.h"
#include "cdi.h"
#include "config.h"
#include "control.h"
#include "http.h"
#include "fdsink.h"
#include "log.h"
#include "manager.h"
#include "proto.h"
#include "restore.h"
#include "sysd.h"

struct options {
	const char *config;
	bool check;
	bool dump;
	const char *log_level;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rdmad [OPTIONS]\n"
		"Declarative RDMA resource daemon: creates the RDMA objects a\n"
		"configuration declares and serves them over a REST API.\n"
		"\n"
		"  -c, --config FILE     configuration file (default %s)\n"
		"  -n, --check           validate the configuration (and the limits\n"
		"                        of the devices present) and exit\n"
		"  -d, --dump            print the effective configuration and exit\n"
		"  -l, --log-level LEVEL error, warning, notice, info, debug\n"
		"  -h, --help            show this help\n"
		"  -V, --version         show the version\n"
		"\n"
		"Exit status: 0 on a clean stop, 64 for bad usage, 78 for a bad\n"
		"or unreadable configuration, 69 when the REST API cannot listen,\n"
		"70 when the event loop fails, 71 when setting up fails.\n"
		"See rdmad(8) and rdmad.conf(5).\n",
		CONFIG_DEFAULT_PATH);
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'n' },
		{ "dump", no_argument, NULL, 'd' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->config = CONFIG_DEFAULT_PATH;
	while ((c = getopt_long(argc, argv, "c:ndl:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'n':
			o->check = true;
			break;
		case 'd':
			o->dump = true;
			break;
		case 'l':
			if (log_parse_level(optarg) < 0) {
				fprintf(stderr, "rdmad: unknown log level '%s'\n",
					optarg);
				return EX_USAGE;
			}
			o->log_level = optarg;
			break;
		case 'h':
			usage(stdout);
			return EX_OK;
		case 'V':
			printf("rdmad %s\n", RDMAD_VERSION);
			return EX_OK;
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rdmad: unexpected argument '%s'\n",
			argv[optind]);
		return EX_USAGE;
	}
	return -1;
}

static int on_stop_signal(sd_event_source *s,
			  const struct signalfd_siginfo *si, void *ud)
{
	(void)ud;
	log_info("received %s, stopping", strsignal((int)si->ssi_signo));
	sysd_stopping();
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static void config_errors_log(json_t *errors);

static void on_hup_done(void *ud, int r, json_t *result)
{
	(void)ud;
	if (r == -EINVAL)
		config_errors_log(json_object_get(result, "errors"));
	else if (r < 0 && r != -ENOTEMPTY) /* that one, manager.c says */
		log_ctx(LOG_ERR, r,
			&(struct log_ctx){ .message_id = MSGID_RELOAD_REFUSED },
			"reload failed");
	/* A reload that applied says READY=1 once what it creates is
	 * there (on_manager_event); one that failed changed nothing. */
	if (r < 0)
		sysd_reload_refused();
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si,
		  void *ud)
{
	struct manager *m = ud;
	int r;

	(void)s;
	(void)si;
	log_info("SIGHUP: reloading %s", manager_config(m)->path);
	sysd_reloading();
	/* Read and checked on a worker; on_hup_done has the outcome. */
	r = manager_reload(m, false, on_hup_done, NULL);
	if (r < 0) {
		log_ctx(LOG_ERR, r,
			&(struct log_ctx){ .message_id = MSGID_RELOAD_REFUSED },
			"reload failed");
		sysd_reload_refused();
	}
	return 0;
}

/* A failed reload's errors, one line each, as the parser prints them. */
static void config_errors_log(json_t *errors)
{
	size_t i;
	json_t *e;

	json_array_foreach (errors, i, e) {
		const char *file = json_string_value(json_object_get(e, "file"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		json_int_t line = json_integer_value(json_object_get(e, "line"));

		/* Line 0: about the whole file. */
		if (line > 0)
			log_warn(0, "%s:%lld: %s", file, (long long)line, msg);
		else
			log_warn(0, "%s: %s", file, msg);
	}
}

/* For tests only (rdmad(8), ENVIRONMENT): with RDMAD_TEST_STALL_ON_SIGNAL=1,
 * SIGUSR2 blocks the event loop for good, as a bug would, so that a test
 * can see the watchdog make systemd restart the daemon. */
static int on_stall_signal(sd_event_source *s,
			   const struct signalfd_siginfo *si, void *ud)
{
	(void)s;
	(void)si;
	(void)ud;
	log_warn(0, "SIGUSR2 with RDMAD_TEST_STALL_ON_SIGNAL=1: stalling the "
		    "event loop (a test of the watchdog)");
	for (;;)
		pause();
	return 0;
}

static int setup_signals(struct manager *m)
{
	const char *stall = getenv("RDMAD_TEST_STALL_ON_SIGNAL");
	sigset_t mask;
	int r;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = sd_event_add_signal(manager_loop(m), NULL, SIGTERM, on_stop_signal, NULL);
	if (r >= 0)
		r = sd_event_add_signal(manager_loop(m), NULL, SIGINT, on_stop_signal,
					NULL);
	if (r >= 0)
		r = sd_event_add_signal(manager_loop(m), NULL, SIGHUP, on_hup, m);
	if (r >= 0 && stall && streq(stall, "1")) {
		sigaddset(&mask, SIGUSR2);
		sigprocmask(SIG_BLOCK, &mask, NULL);
		r = sd_event_add_signal(manager_loop(m), NULL, SIGUSR2,
					on_stall_signal, NULL);
	}
	return r;
}

/* Each memory object holds an fd: thousands of them are normal. The
 * soft limit (1024 by default, for select()) is not ours to keep: we
 * use epoll only. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn(errno, "cannot raise the limit of open files");
	}
}

/* The configuration the previous run stored, when path's files are
 * still those it was read from (config_load_kept()); else NULL, and
 * the files are loaded. */
static struct config *load_kept(const char *path)
{
	_cleanup_free_ char *kept = NULL;
	struct config *c = NULL;
	size_t len = 0;
	int r = sysd_take_config(&kept, &len);

	if (r == -ENOENT)
		return NULL;
	if (r == 0)
		r = config_load_kept(path, kept, len, &c);
	if (r == 0) {
		log_info("%s: as the previous run loaded it (its files have "
			 "the same bytes): not parsed again", path);
		sysd_config_reused();
	}
	else if (r == -ESTALE)
		log_info("%s: changed since the previous run (or another "
			 "build of rdmad): parsing it", path);
	else
		log_warn(r, "the configuration the previous run stored "
			    "cannot be read: parsing %s", path);
	return c;
}

static int run(const struct options *o)
{
	_cleanup_(config_freep) struct config *config = NULL;
	_cleanup_(manager_freep) struct manager *m = NULL;
	/* Freed before the manager: it listens to it. */
	_cleanup_(cdi_stopp) struct cdi *cdi = NULL;
	struct control *control = NULL;
	struct http *http = NULL;
	const char *failed = NULL;
	int r;

	/* What systemd passed (a restart: the fd store) is taken first: it
	 * may hold the configuration as the previous run loaded it. */
	if (!o->check && !o->dump) {
		r = sysd_listen_init();
		if (r < 0)
			log_warn(r, "cannot take the fds systemd passed, "
				    "ignoring");
		/* The previous run's state documents are read meanwhile. */
		restore_read_ahead();
		config = load_kept(o->config);
	}
	if (!config) {
		r = config_load(o->config, &config);
		if (r < 0) {
			log_error(r, "cannot load %s", o->config);
			return EX_OSERR;
		}
	}
	/* Limits against the devices present, before anything exists. */
	if (!config->n_errors)
		capcheck_config(config, o->check ? stderr : NULL);
	if (!config->n_errors && o->check)
		capcheck_memory(config);
	/* At start, identity.c says the same when it resolves the names. */
	if (o->check)
		config_print_warnings(config, stderr);
	if (config->n_errors) {
		config_print_errors(config, stderr);
		fprintf(stderr, "rdmad: %s has %zu error%s\n", o->config,
			config->n_errors, config->n_errors == 1 ? "" : "s");
		return EX_CONFIG;
	}
	if (o->dump)
		return config_print(config, stdout) < 0 ? EX_OSERR : EX_OK;
	if (o->check) {
		printf("%s: configuration OK (%zu device%s, %zu profile%s",
		       o->config, config->n_devices,
		       config->n_devices == 1 ? "" : "s", config->n_profiles,
		       config->n_profiles == 1 ? "" : "s");
		if (config->n_warnings)
			printf(", %zu warning%s", config->n_warnings,
			       config->n_warnings == 1 ? "" : "s");
		printf(")\n");
		return EX_OK;
	}
	if (!o->log_level)
		log_set_level(log_parse_level(config->daemon.log_level));
	raise_fd_limit();

	/* The manager owns the configuration from here on (a reload
	 * replaces it). */
	r = manager_new(TAKE_PTR(config), &m);
	if (r < 0) {
		log_error(r, "cannot set up");
		return EX_OSERR;
	}
	r = setup_signals(m);
	if (r < 0) {
		log_error(r, "cannot watch signals");
		return EX_OSERR;
	}
	r = sysd_start(m);
	if (r < 0) {
		log_error(r, "cannot set up");
		return EX_OSERR;
	}
	r = http_start(m, &failed, &http);
	if (r < 0) {
		log_error(r, "cannot listen on %s", failed);
		return EX_UNAVAILABLE;
	}
	r = control_start(m, &control);
	if (r < 0) {
		log_error(r, "cannot listen on %s",
			  manager_config(m)->daemon.control_socket);
		control_stop(control);
		http_stop(http);
		return EX_UNAVAILABLE;
	}
	sysd_listen_done();
	/* Container engines hear of a profile once its device is open. */
	r = cdi_start(m, &cdi);
	if (r < 0)
		log_warn(r, "cannot write CDI specifications, ignoring");
	/* The front ends answer while the objects are being created. */
	manager_start(m);

	r = sd_event_loop(manager_loop(m));
	/* A reload under way answers those who asked while they listen. */
	manager_reload_cancel(m);
	/* No container is given a profile of a daemon that is going. */
	cdi = cdi_stop(cdi);
	control = control_stop(control);
	http = http_stop(http);
	manager_stop(m);
	if (r < 0) {
		log_error(r, "event loop failed");
		return EX_SOFTWARE;
	}
	log_info("stopped");
	return EX_OK;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	int r;

	log_open("rdmad");
	/* The workers allocate little (what libibverbs keeps per object):
	 * one heap for all threads, not an arena of its own for each. */
	mallopt(M_ARENA_MAX, 1);
	/* On a device that disassociates when removed (mlx5), destroys then
	 * fail with EIO; this tells libibverbs to free our side anyway. It
	 * must be set before libibverbs initialises. */
	setenv("RDMAV_ALLOW_DISASSOC_DESTROY", "1", 0);
	/* What clients send is never closed on the loop (fdsink.h). */
	proto_set_closer(fdsink_close);
	r = parse_args(argc, argv, &o);
	if (r >= 0)
		return r;
	if (o.log_level)
		log_set_level(log_parse_level(o.log_level));
	r = run(&o);
	log_flush();
	return r;
}
