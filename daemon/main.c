// SPDX-License-Identifier: MIT
/*
 * rdmad: read the configuration, create what it declares, serve the
 * control surfaces, and on SIGTERM/SIGINT destroy everything and exit.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <sysexits.h>
#include <systemd/sd-daemon.h>

#include "config.h"
#include "http.h"
#include "log.h"
#include "manager.h"

struct options {
	const char *config;
	bool check;
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
		"  -n, --check           validate the configuration and exit\n"
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
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->config = CONFIG_DEFAULT_PATH;
	while ((c = getopt_long(argc, argv, "c:nl:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'n':
			o->check = true;
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
	sd_notify(0, "STOPPING=1");
	return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si,
		  void *ud)
{
	(void)s;
	(void)si;
	(void)ud;
	/* Reload by diff arrives with the declarative engine; until then a
	 * SIGHUP must not kill the daemon. */
	log_warn(0, "SIGHUP: this version cannot reload, restart the "
		    "service to apply a new configuration; ignoring");
	return 0;
}

static int setup_signals(struct manager *m)
{
	sigset_t mask;
	int r;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = sd_event_add_signal(m->event, NULL, SIGTERM, on_stop_signal, NULL);
	if (r >= 0)
		r = sd_event_add_signal(m->event, NULL, SIGINT, on_stop_signal,
					NULL);
	if (r >= 0)
		r = sd_event_add_signal(m->event, NULL, SIGHUP, on_hup, NULL);
	return r;
}

static int run(const struct options *o)
{
	_cleanup_(config_freep) struct config *config = NULL;
	_cleanup_(manager_freep) struct manager *m = NULL;
	const char *failed = NULL;
	int r;

	r = config_load(o->config, &config);
	if (r < 0) {
		log_error(r, "cannot load %s", o->config);
		return EX_OSERR;
	}
	if (config->n_errors) {
		config_print_errors(config, stderr);
		fprintf(stderr, "rdmad: %s has %zu error%s\n", o->config,
			config->n_errors, config->n_errors == 1 ? "" : "s");
		return EX_CONFIG;
	}
	if (o->check) {
		printf("%s: configuration OK (%zu devices, %zu profiles)\n",
		       o->config, config->n_devices, config->n_profiles);
		return EX_OK;
	}
	if (!o->log_level)
		log_set_level(log_parse_level(config->daemon.log_level));

	r = manager_new(config, &m);
	if (r < 0) {
		log_error(r, "cannot set up");
		return EX_OSERR;
	}
	r = setup_signals(m);
	if (r < 0) {
		log_error(r, "cannot watch signals");
		return EX_OSERR;
	}
	r = http_start(m, &failed);
	if (r < 0) {
		log_error(r, "cannot listen on %s", failed);
		return EX_UNAVAILABLE;
	}
	manager_start(m);
	sd_notify(0, "READY=1\nSTATUS=running");
	log_info("ready: %zu profiles", m->n_profiles);

	r = sd_event_loop(m->event);
	http_stop(m);
	manager_stop(m);
	if (r < 0) {
		log_error(r, "event loop failed");
		return EX_SOFTWARE;
	}
	log_info("stopped");
	return EX_OK; /* m is freed before config: it refers to it */
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	int r;

	log_open("rdmad");
	r = parse_args(argc, argv, &o);
	if (r >= 0)
		return r;
	if (o.log_level)
		log_set_level(log_parse_level(o.log_level));
	return run(&o);
}
