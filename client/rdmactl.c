// SPDX-License-Identifier: MIT
/*
 * rdmactl: inspect and control a running rdmad over its control socket
 * (the daemon knows the caller by SO_PEERCRED: no token). Every command
 * prints text, or the daemon's JSON document with --json.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "devprint.h"
#include "profprint.h"
#include "progress.h"
#include "rdmad.h"
#include "suggest.h"
#include "util.h"

struct ctl {
	const char *socket; /* NULL: $RDMAD_SOCKET or the default */
	const char *state;  /* qp --state */
	const char *endpoint; /* qp --endpoint FILE ("-": stdin) */
	bool json;
	bool force; /* reload --force */
	int follow; /* profiles, show: -1 on a terminal, 0 never, 1 always */
	/* The command's arguments, for suggestions after "not found". */
	int argc;
	char **argv;
};

/* The object kinds, as the configuration and the daemon name them. */
static const char *const kinds[] = { "memory", "xrcd", "pd", "dm",
				     "mr",     "mw",   "cq", "srq",
				     "qp",     "ah",   "target", "mcast" };

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rdmactl [--socket PATH] [--json] COMMAND [ARGS]\n"
		"Inspect and control a running rdmad through its control socket.\n"
		"\n"
		"Commands:\n"
		"  devices                   every RDMA device, used, import capable\n"
		"  device show IBDEV         device attributes (as pyverbs prints them)\n"
		"  port IBDEV N              port attributes\n"
		"  gids IBDEV [N]            GID table of port N (default 1)\n"
		"  profiles                  profiles and their state; while one\n"
		"                            is being created, its progress\n"
		"  show PROFILE [KIND [NAME]]\n"
		"                            a profile's objects, those of one kind,\n"
		"                            or one object\n"
		"  health | version          daemon liveness, version and uptime\n"
		"  config                    the running configuration (JSON)\n"
		"  sessions                  attached clients: pid, uid, mode, leases\n"
		"  orphans PROFILE           objects dead clients left in the\n"
		"                            profile's context (RDMA netlink)\n"
		"  reload [--force]          reload the configuration file; prints\n"
		"                            what changed, or the errors; a file\n"
		"                            that declares no profile removes the\n"
		"                            running ones only with --force\n"
		"  qp PROFILE NAME --state STATE [--endpoint FILE] [KEY=VALUE...]\n"
		"                            move a QP to STATE; KEY=VALUE are path\n"
		"                            attributes (dqpn=17 dgid=::ffff:192.0.2.2);\n"
		"                            FILE (- for stdin) holds the other end's\n"
		"                            endpoint document (rdmactl --json endpoint)\n"
		"  qp migrate PROFILE NAME   move the QP to its alternate path\n"
		"                            (alt_path; automatic path migration)\n"
		"  endpoint PROFILE QP       what a peer needs to connect to QP\n"
		"                            without rdma_cm: qp_num, port, lid,\n"
		"                            gid, psn, mtu\n"
		"  monitor [EVENT...]        follow the daemon's events as they\n"
		"                            happen (ports, objects, reloads,\n"
		"                            sessions, ...), one line each (with\n"
		"                            --json, one JSON object each); EVENT\n"
		"                            keeps only events whose name starts\n"
		"                            so (port, object_state, reload, ...)\n"
		"  target list PROFILE TARGET\n"
		"                            a target's connections: id, peer, QP,\n"
		"                            state, age\n"
		"  target revoke PROFILE TARGET ID\n"
		"                            end a connection's access now (its\n"
		"                            memory windows), then the connection\n"
		"  selftest PROFILE QP_A QP_B [MR]\n"
		"                            RDMA write and send/recv between two\n"
		"                            connected QPs of PROFILE through MR\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH  the control socket (default $RDMAD_SOCKET or\n"
		"                  " RDMAD_DEFAULT_SOCKET "); changes need root or\n"
		"                  the daemon's admin_group\n"
		"  -j, --json      print the daemon's JSON document\n"
		"  --follow        profiles, show: while anything is being\n"
		"                  created, follow it (a progress bar on a\n"
		"                  terminal, plain lines otherwise), then print\n"
		"                  the result; the default on a terminal\n"
		"  --no-follow     print once, also on a terminal\n"
		"  -h, --help      show this help\n"
		"  -V, --version   show rdmactl's version\n"
		"\n"
		"Exit status: 0 on success, 1 when the daemon answers with an\n"
		"error, 64 for bad usage, 69 when the daemon cannot be reached,\n"
		"76 when its reply cannot be understood.\n");
}

/*
 * One request over the control socket. Returns EX_OK with the status and
 * the parsed reply in *status and *doc, or an exit status (said why).
 */
static int request(const struct ctl *c, const char *method, const char *path,
		   const char *req_body, int *status, json_t **doc)
{
	_cleanup_free_ char *body = NULL;
	json_error_t jerr;
	struct rdmad *d = rdmad_connect(c->socket);
	int r;

	if (!d) {
		fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
		return EX_UNAVAILABLE;
	}
	r = rdmad_request(d, method, path, req_body, status, &body);
	if (r < 0)
		fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
	rdmad_close(d);
	if (r < 0)
		return r == -EPROTO || r == -EBADMSG ? EX_PROTOCOL
						     : EX_UNAVAILABLE;
	*doc = json_loads(body, 0, &jerr);
	if (!*doc) {
		fprintf(stderr, "rdmactl: bad reply from %s (status %d): %s\n",
			c->socket ? c->socket : RDMAD_DEFAULT_SOCKET, *status,
			jerr.text);
		return EX_PROTOCOL;
	}
	return EX_OK;
}

/* A document for a suggestion: NULL on any failure, said nothing. */
static json_t *fetch_quietly(const struct ctl *c, const char *path)
{
	struct rdmad *d = rdmad_connect(c->socket);
	_cleanup_free_ char *body = NULL;
	int status = 0, r;

	if (!d)
		return NULL;
	r = rdmad_request(d, "GET", path, NULL, &status, &body);
	rdmad_close(d);
	if (r < 0 || status != 200)
		return NULL;
	return json_loads(body, 0, NULL);
}

/* The closest "name" among the documents of array a (of kind, when not
 * NULL) to word, copied; NULL when none is close. */
static char *closest_name(json_t *a, const char *kind, const char *word)
{
	size_t n = 0, i;
	const char **names = calloc(json_array_size(a) + 1, sizeof(*names));
	const char *best;
	char *found;
	json_t *o;

	if (!names)
		return NULL;
	json_array_foreach (a, i, o)
		if (!kind ||
		    streq(kind, json_string_value(json_object_get(o, "kind"))
					?: ""))
			names[n++] = json_string_value(json_object_get(o, "name"));
	best = suggest_closest(word, names, n);
	found = best ? strdup(best) : NULL;
	free(names);
	return found;
}

/*
 * After "no WHAT 'NAME'" (the daemon's not_found), the name the caller
 * probably meant: the nearest profile, device, kind, or object of that
 * kind in the profile the command names first. NULL when none is close.
 */
static char *not_found_hint(const struct ctl *c, const char *msg)
{
	_cleanup_free_ char *what = NULL, *name = NULL;
	const char *q = strstr(msg, " '"), *end = strrchr(msg, '\'');
	char path[1024];
	json_t *doc = NULL;
	char *hint = NULL;
	const char *best;

	if (strncmp(msg, "no ", 3) || !q || end <= q + 1 || end[1])
		return NULL;
	what = strndup(msg + 3, (size_t)(q - msg - 3));
	name = strndup(q + 2, (size_t)(end - q - 2));
	if (!what || !name)
		return NULL;
	if (streq(what, "object kind")) {
		best = suggest_closest(name, kinds, ARRAY_SIZE(kinds));
		return best ? strdup(best) : NULL;
	}
	if (streq(what, "profile")) {
		doc = fetch_quietly(c, "/v1/profiles");
		hint = closest_name(doc, NULL, name);
	} else if (streq(what, "device")) {
		doc = fetch_quietly(c, "/v1/devices");
		hint = closest_name(doc, NULL, name);
	} else if (c->argc > 0) {
		/* An object: the commands that name one name its profile
		 * first (show, qp, selftest). */
		for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
			if (streq(kinds[k], what)) {
				snprintf(path, sizeof(path), "/v1/profiles/%s",
					 c->argv[0]);
				doc = fetch_quietly(c, path);
				hint = closest_name(
					json_object_get(doc, "objects"), what,
					name);
				break;
			}
	}
	json_decref(doc);
	return hint;
}

/* Print a failed reply once: the daemon's message (with a suggestion when
 * it did not find a name), then the configuration errors it lists. */
static void print_error(const struct ctl *c, json_t *j)
{
	json_t *e = json_object_get(j, "error"), *item;
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));
	_cleanup_free_ char *hint = NULL;
	size_t i;

	if (msg && code && streq(code, "not_found"))
		hint = not_found_hint(c, msg);
	fprintf(stderr, "rdmactl: %s", msg ? msg : "request failed");
	if (hint)
		fprintf(stderr, "; did you mean '%s'?", hint);
	fputc('\n', stderr);
	json_array_foreach (json_object_get(e, "errors"), i, item) {
		const char *file =
			json_string_value(json_object_get(item, "file"));
		json_int_t line =
			json_integer_value(json_object_get(item, "line"));
		const char *text =
			json_string_value(json_object_get(item, "message"));

		/* Line 0: about the whole file. */
		if (line > 0)
			fprintf(stderr, "%s:%lld: %s\n", file ? file : "?",
				(long long)line, text ? text : "?");
		else
			fprintf(stderr, "%s: %s\n", file ? file : "?",
				text ? text : "?");
	}
}

/*
 * One request; on success (2xx) *doc holds the reply. With keep_failed,
 * a failed reply that is a document of its own (no "error" object) is
 * still handed back, with exit status 1. Returns an exit status.
 */
static int call(const struct ctl *c, const char *method, const char *path,
		const char *req_body, bool keep_failed, json_t **doc)
{
	json_t *j = NULL;
	int status = 0, r;

	r = request(c, method, path, req_body, &status, &j);
	if (r != EX_OK)
		return r;
	if (status / 100 != 2) {
		/* A report of its own ("error" a sentence), not an error
		 * document ("error" an object). */
		if (keep_failed && !json_is_object(json_object_get(j, "error"))) {
			*doc = j;
			return 1;
		}
		print_error(c, j);
		json_decref(j);
		return 1;
	}
	*doc = j;
	return EX_OK;
}

static int get(const struct ctl *c, const char *path, json_t **doc)
{
	return call(c, "GET", path, NULL, false, doc);
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	/* Never empty: a last column must not end a line in a space. */
	return s && *s ? s : "-";
}

static void print_devices(json_t *a)
{
	size_t i;
	json_t *d;

	printf("%-12s %-10s %-20s %-5s %s\n", "DEVICE", "NODE", "GUID", "USED",
	       "IMPORT");
	json_array_foreach (a, i, d)
		printf("%-12s %-10s %-20s %-5s %s\n", str(d, "name"),
		       str(d, "node_type_name"), str(d, "node_guid"),
		       json_is_true(json_object_get(d, "used")) ? "yes" : "no",
		       json_is_true(json_object_get(d, "import_capable"))
			       ? "yes"
			       : str(d, "import_error"));
}

static void print_gids(json_t *a)
{
	size_t i;
	json_t *g;

	printf("%-5s %-40s %-8s %s\n", "INDEX", "GID", "TYPE", "NETDEV");
	json_array_foreach (a, i, g)
		printf("%-5lld %-40s %-8s %s\n",
		       json_integer_value(json_object_get(g, "index")),
		       str(g, "gid"), str(g, "type"), str(g, "netdev"));
}

static void print_sessions(json_t *a)
{
	size_t i, k;
	json_t *s, *t;

	printf("%-8s %-8s %-6s %-16s %-7s %s\n", "SESSION", "PID", "UID",
	       "PROFILE", "MODE", "LEASES");
	json_array_foreach (a, i, s)
		json_array_foreach (json_object_get(s, "attachments"), k, t) {
			/* Another user's, to one who is no admin: no pid,
			 * no uid (rdmad(8)). */
			char pid[24] = "-", uid[24] = "-";

			if (json_object_get(s, "pid"))
				snprintf(pid, sizeof(pid), "%lld",
					 json_integer_value(
						 json_object_get(s, "pid")));
			if (json_object_get(s, "uid"))
				snprintf(uid, sizeof(uid), "%lld",
					 json_integer_value(
						 json_object_get(s, "uid")));
			printf("%-8lld %-8s %-6s %-16s %-7s %lld\n",
			       json_integer_value(json_object_get(s, "session")),
			       pid, uid, str(t, "profile"), str(t, "mode"),
			       json_integer_value(json_object_get(t, "leases")));
		}
}

/* The kind's number has the key rdma resource show uses for it. */
static const char *const orphan_ids[] = { "pdn", "cqn", "lqpn", "mrn",
					  "srqn" };

static void print_orphans(json_t *d)
{
	json_t *objs = json_object_get(d, "objects"), *o;
	size_t i;

	printf("profile %s", str(d, "profile"));
	if (json_object_get(d, "ibdev"))
		printf(" on %s", str(d, "ibdev"));
	if (json_object_get(d, "ctxn"))
		printf(", context %lld",
		       json_integer_value(json_object_get(d, "ctxn")));
	if (json_object_get(d, "error"))
		printf(": %s", str(d, "error"));
	else if (!json_is_true(json_object_get(d, "scanned")))
		printf(": not scanned yet");
	printf("\n");
	if (objs) {
		static const char *const owners[] = { "daemon", "client",
						      "orphan" };

		printf("%-7s %5s %5s %5s %5s %5s\n", "OWNER", "PD", "CQ", "QP",
		       "MR", "SRQ");
		for (size_t w = 0; w < ARRAY_SIZE(owners); w++) {
			json_t *n = json_object_get(objs, owners[w]);
			static const char *const ctx_kinds[] = {
				"pd", "cq", "qp", "mr", "srq"
			};

			printf("%-7s", owners[w]);
			for (size_t k = 0; k < ARRAY_SIZE(ctx_kinds); k++)
				printf(" %5lld",
				       json_integer_value(json_object_get(
					       n, ctx_kinds[k])));
			printf("\n");
		}
	}
	json_array_foreach (json_object_get(d, "orphans"), i, o) {
		printf("orphan %-4s", str(o, "kind"));
		for (size_t k = 0; k < ARRAY_SIZE(orphan_ids); k++) {
			json_t *v = json_object_get(o, orphan_ids[k]);

			if (json_is_integer(v))
				printf(" %s=%lld", orphan_ids[k],
				       json_integer_value(v));
		}
		if (json_object_get(o, "pid"))
			printf(" pid=%lld",
			       json_integer_value(json_object_get(o, "pid")));
		printf("\n");
	}
}

static void print_reload(json_t *r)
{
	json_t *changes = json_object_get(r, "changes"), *ch;
	size_t n = json_array_size(changes), i;
	long long kept = json_integer_value(json_object_get(r, "kept"));

	json_array_foreach (changes, i, ch)
		printf("%-8s %-8s %-16s profile %s\n", str(ch, "action"),
		       str(ch, "kind"), str(ch, "name"), str(ch, "profile"));
	printf("%zu change%s, %lld object%s kept\n", n, n == 1 ? "" : "s",
	       kept, kept == 1 ? "" : "s");
}

static void print_selftest(json_t *r)
{
	static const char *const parts[] = { "rdma_write", "send_recv" };

	printf("selftest %s: %s <-> %s through mr %s: %s\n",
	       str(r, "profile"), str(r, "a"), str(r, "b"), str(r, "mr"),
	       json_is_true(json_object_get(r, "ok")) ? "ok" : "FAILED");
	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		json_t *p = json_object_get(r, parts[i]);

		if (!p)
			continue;
		printf("  %-10s %s, %lld bytes, %lld us%s%s\n", parts[i],
		       json_is_true(json_object_get(p, "ok")) ? "ok" : "failed",
		       json_integer_value(json_object_get(p, "bytes")),
		       json_integer_value(json_object_get(p, "usec")),
		       json_object_get(p, "error") ? ": " : "",
		       json_object_get(p, "error") ? str(p, "error") : "");
	}
	if (json_object_get(r, "error"))
		printf("  %s\n", str(r, "error"));
}

static void print_kv(json_t *o)
{
	const char *k;
	json_t *v;

	json_object_foreach (o, k, v) {
		char *s;

		if (json_is_string(v)) {
			const char *t = json_string_value(v);

			printf("%s:%s%s\n", k, *t ? " " : "", t);
			continue;
		}
		s = json_dumps(v, JSON_ENCODE_ANY);
		printf("%s: %s\n", k, s ? s : "?");
		free(s);
	}
}

struct command {
	const char *name;
	int min_args, max_args;
	const char *path_fmt; /* with %s for the arguments */
	void (*print)(json_t *doc);
};

static void print_json(json_t *d)
{
	json_dumpf(d, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
}

static void print_device(json_t *d)
{
	devprint_device(stdout, d);
}

static void print_port(json_t *p)
{
	devprint_port(stdout, p);
}

/* A target's connections, one a line. */
static void print_connections(json_t *d)
{
	size_t i;
	json_t *c;

	if (json_is_object(d) && json_object_get(d, "state")) {
		printf("connection %lld %s\n",
		       (long long)json_integer_value(json_object_get(d, "id")),
		       str(d, "state"));
		return;
	}
	json_array_foreach (d, i, c)
		printf("%lld %s qp_num=%lld %s age=%.0fs\n",
		       (long long)json_integer_value(json_object_get(c, "id")),
		       str(c, "peer"),
		       (long long)json_integer_value(json_object_get(c, "qp_num")),
		       str(c, "state"),
		       json_number_value(json_object_get(c, "age")));
}

static const struct command commands[] = {
	{ "devices", 0, 0, "/v1/devices", print_devices },
	{ "device", 2, 2, "/v1/devices/%s", print_device }, /* show IBDEV */
	{ "port", 2, 2, "/v1/devices/%s/ports/%s", print_port },
	{ "gids", 1, 2, "/v1/devices/%s/ports/%s/gids", print_gids },
	{ "profiles", 0, 0, "/v1/profiles", print_profiles },
	{ "show", 1, 3, NULL, print_profile }, /* PROFILE [KIND [NAME]] */
	{ "health", 0, 0, "/v1/health", print_kv },
	{ "config", 0, 0, "/v1/config", print_json },
	{ "sessions", 0, 0, "/v1/sessions", print_sessions },
	{ "orphans", 1, 1, "/v1/profiles/%s/orphans", print_orphans },
	{ "reload", 0, 0, "/v1/reload", print_reload },
	{ "selftest", 3, 4, "/v1/profiles/%s/selftest", print_selftest },
	{ "qp", 2, 34, "/v1/profiles/%s/qp/%s", print_object_line },
	{ "endpoint", 2, 2, "/v1/profiles/%s/qp/%s/endpoint", print_kv },
	{ "version", 0, 0, "/v1/version", print_kv },
	{ "monitor", 0, 32, NULL, NULL },
	/* list|revoke PROFILE TARGET [ID] */
	{ "target", 3, 4, "/v1/profiles/%s/target/%s/connections",
	  print_connections },
};

/* ---- monitor ---- */

static bool wanted(const char *name, int argc, char **argv)
{
	if (!argc)
		return true;
	for (int i = 0; i < argc; i++)
		if (!strncmp(name, argv[i], strlen(argv[i])))
			return true;
	return false;
}

/* "17:30:25.893 port_error profile=p device=rxe0 port=1 state=down":
 * like ip monitor, the time, what happened, then its fields (nested
 * ones as compact JSON). */
static void print_event_line(json_t *ev)
{
	const char *time = str(ev, "time"), *t;
	const char *key;
	json_t *v;

	t = strchr(time, 'T');
	printf("%.12s %s", t ? t + 1 : time, str(ev, "event"));
	json_object_foreach(ev, key, v) {
		char *text;

		if (streq(key, "seq") || streq(key, "time") ||
		    streq(key, "event"))
			continue;
		if (json_is_string(v)) {
			printf(strchr(json_string_value(v), ' ') ? " %s=\"%s\""
								  : " %s=%s",
			       key, json_string_value(v));
			continue;
		}
		text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		printf(" %s=%s", key, text ? text : "?");
		free(text);
	}
	putchar('\n');
}

static int monitor(const struct ctl *c, int argc, char **argv)
{
	struct rdmad *d = rdmad_connect(c->socket);
	struct rdmad_event ev;
	int r;

	if (!d) {
		fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
		return EX_UNAVAILABLE;
	}
	r = rdmad_subscribe(d);
	if (r < 0) {
		fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
		rdmad_close(d);
		return EX_UNAVAILABLE;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		struct pollfd pfd = { .fd = rdmad_fd(d), .events = POLLIN };
		json_t *doc;

		r = rdmad_next_event(d, &ev);
		if (r < 0) {
			fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
			break;
		}
		if (r == 0) {
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				break;
			continue;
		}
		if (ev.type == RDMAD_EVENT_DAEMON_GONE) {
			fprintf(stderr, "rdmactl: %s\n", ev.reason);
			r = -ECONNRESET;
			break;
		}
		if (ev.type != RDMAD_EVENT_STREAM || !rdmad_event_json(d))
			continue;
		doc = json_loads(rdmad_event_json(d), 0, NULL);
		if (!doc)
			continue;
		if (wanted(str(doc, "event"), argc, argv) ||
		    streq(str(doc, "event"), "overflow")) {
			if (c->json)
				puts(rdmad_event_json(d));
			else
				print_event_line(doc);
		}
		if (streq(str(doc, "event"), "overflow")) {
			json_decref(doc);
			r = -ENOBUFS;
			break;
		}
		json_decref(doc);
	}
	rdmad_close(d);
	return r == -ECONNRESET || r == -ENOBUFS ? EX_UNAVAILABLE : EX_SOFTWARE;
}

/* PATCH a QP to --state, with KEY=VALUE path attributes (numbers stay
 * numbers). */
static int qp_state(const struct ctl *c, const char *path, int argc,
		    char **argv, json_t **doc)
{
	json_t *body, *p = json_object();
	char *text;
	int r;

	if (!c->state) {
		fprintf(stderr, "rdmactl: qp needs --state reset|init|rtr|rts|"
				"error\n");
		json_decref(p);
		return EX_USAGE;
	}
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		char *end;
		long long v;

		if (!eq || eq == argv[i]) {
			fprintf(stderr, "rdmactl: '%s' is not KEY=VALUE\n",
				argv[i]);
			json_decref(p);
			return EX_USAGE;
		}
		*eq = '\0';
		v = strtoll(eq + 1, &end, 0);
		json_object_set_new(p, argv[i],
				    eq[1] && !*end ? json_integer(v)
						   : json_string(eq + 1));
	}
	body = json_pack("{s:s, s:o}", "state", c->state, "path", p);
	if (body && c->endpoint) {
		json_error_t jerr;
		json_t *ep = streq(c->endpoint, "-")
				     ? json_loadf(stdin, 0, &jerr)
				     : json_load_file(c->endpoint, 0, &jerr);

		if (!ep) {
			fprintf(stderr, "rdmactl: %s: %s\n", c->endpoint,
				jerr.text);
			json_decref(body);
			return EX_USAGE;
		}
		json_object_set_new(body, "endpoint", ep);
	}
	text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	r = text ? call(c, "PATCH", path, text, false, doc) : EX_OSERR;
	free(text);
	return r;
}

/* Path segments come from the command line: refuse what would change the
 * path's shape. */
static bool safe_segment(const char *s)
{
	return *s && !strchr(s, '/') && !strchr(s, '?') && !strchr(s, '#') &&
	       !strchr(s, ' ') && !streq(s, "..") && !streq(s, ".");
}

/*
 * show PROFILE KIND: the profile's objects of that kind (with --json, an
 * array of their documents, each as GET /v1/profiles/P/KIND/NAME gives
 * it). The profile is asked first, so that a wrong profile is reported
 * as such.
 */
static int show_kind(const struct ctl *c, const char *path, const char *kind)
{
	json_t *doc = NULL, *objs, *o;
	const char *best;
	size_t i;
	int r;

	r = call(c, "GET", path, NULL, false, &doc);
	if (r != EX_OK)
		return r;
	for (i = 0; i < ARRAY_SIZE(kinds); i++)
		if (streq(kinds[i], kind))
			break;
	if (i == ARRAY_SIZE(kinds)) {
		/* The daemon's words for the same mistake in a longer path. */
		best = suggest_closest(kind, kinds, ARRAY_SIZE(kinds));
		fprintf(stderr, "rdmactl: no object kind '%s'", kind);
		if (best)
			fprintf(stderr, "; did you mean '%s'?", best);
		fputc('\n', stderr);
		json_decref(doc);
		return 1;
	}
	if (c->json) {
		objs = json_array();
		json_array_foreach (json_object_get(doc, "objects"), i, o)
			if (streq(kind, str(o, "kind")))
				json_array_append(objs, o);
		print_json(objs);
		json_decref(objs);
	} else {
		print_profile_kind(doc, kind);
	}
	json_decref(doc);
	return EX_OK;
}

struct refetch {
	const struct ctl *c;
	const char *path;
};

static int refetch(void *ud, json_t **doc)
{
	struct refetch *f = ud;

	return get(f->c, f->path, doc);
}

/* profiles, show PROFILE: while anything is being made, its progress
 * (a bar on a terminal), then the document as it ends. */
static int follow(const struct ctl *c, const char *path, json_t **doc, int r)
{
	bool tty = isatty(STDOUT_FILENO);
	struct refetch f = { c, path };

	if (r || !(c->follow > 0 || (c->follow < 0 && tty)))
		return r;
	return progress_follow(doc, refetch, &f, tty);
}

static int run_command(const struct ctl *c, const struct command *cmd,
		       int argc, char **argv)
{
	char path[1024];
	json_t *doc = NULL;
	void (*print)(json_t *) = cmd->print;
	bool migrate;
	int r;

	if (argc < cmd->min_args || argc > cmd->max_args) {
		fprintf(stderr, "rdmactl: wrong number of arguments for '%s'\n",
			cmd->name);
		return EX_USAGE;
	}
	for (int i = 0; i < argc; i++)
		if (!safe_segment(argv[i])) {
			fprintf(stderr, "rdmactl: invalid argument '%s'\n",
				argv[i]);
			return EX_USAGE;
		}
	if (streq(cmd->name, "monitor"))
		return monitor(c, argc, argv);
	/* qp migrate PROFILE QP: the extra arguments of a state change
	 * are KEY=VALUE, so a third one without '=' can only mean this. */
	migrate = streq(cmd->name, "qp") && argc == 3 &&
		  streq(argv[0], "migrate") && !strchr(argv[2], '=');
	if (migrate) {
		snprintf(path, sizeof(path), "/v1/profiles/%s/qp/%s/migrate",
			 argv[1], argv[2]);
	} else if (streq(cmd->name, "qp")) {
		snprintf(path, sizeof(path), cmd->path_fmt, argv[0], argv[1]);
	} else if (streq(cmd->name, "device")) {
		if (!streq(argv[0], "show")) {
			fprintf(stderr, "rdmactl: usage: device show IBDEV\n");
			return EX_USAGE;
		}
		snprintf(path, sizeof(path), cmd->path_fmt, argv[1]);
	} else if (streq(cmd->name, "target")) {
		bool revoke = streq(argv[0], "revoke");

		if ((!revoke && !streq(argv[0], "list")) ||
		    argc != (revoke ? 4 : 3)) {
			fprintf(stderr, "rdmactl: usage: target list PROFILE "
					"TARGET | target revoke PROFILE TARGET "
					"ID\n");
			return EX_USAGE;
		}
		snprintf(path, sizeof(path), cmd->path_fmt, argv[1], argv[2]);
		if (revoke) {
			size_t n = strlen(path);

			snprintf(path + n, sizeof(path) - n, "/%s", argv[3]);
		}
	} else if (streq(cmd->name, "gids")) {
		snprintf(path, sizeof(path), cmd->path_fmt, argv[0],
			 argc > 1 ? argv[1] : "1");
	} else if (streq(cmd->name, "show")) {
		if (argc == 3) {
			snprintf(path, sizeof(path), "/v1/profiles/%s/%s/%s",
				 argv[0], argv[1], argv[2]);
			print = print_object_line;
		} else {
			snprintf(path, sizeof(path), "/v1/profiles/%s", argv[0]);
		}
	} else {
		snprintf(path, sizeof(path), cmd->path_fmt,
			 argc > 0 ? argv[0] : "", argc > 1 ? argv[1] : "");
	}

	if (streq(cmd->name, "show") && argc == 2)
		return show_kind(c, path, argv[1]);
	if (migrate) {
		r = call(c, "POST", path, "{}", true, &doc);
	} else if (streq(cmd->name, "qp")) {
		r = qp_state(c, path, argc - 2, argv + 2, &doc);
	} else if (streq(cmd->name, "target") && streq(argv[0], "revoke")) {
		r = call(c, "DELETE", path, NULL, false, &doc);
	} else if (streq(cmd->name, "reload")) {
		r = call(c, "POST", path, c->force ? "{\"force\":true}" : "{}",
			 false, &doc);
	} else if (streq(cmd->name, "selftest")) {
		json_t *b = json_pack("{s:s, s:s}", "a", argv[1], "b", argv[2]);
		char *text;

		snprintf(path, sizeof(path), cmd->path_fmt, argv[0]);
		if (argc > 3)
			json_object_set_new(b, "mr", json_string(argv[3]));
		text = json_dumps(b, JSON_COMPACT);
		json_decref(b);
		r = text ? call(c, "POST", path, text, true, &doc) : EX_OSERR;
		free(text);
	} else {
		r = get(c, path, &doc);
	}
	if (!doc)
		return r;
	if (!c->json && print != print_object_line &&
	    (streq(cmd->name, "profiles") || streq(cmd->name, "show")))
		r = follow(c, path, &doc, r);
	if (!doc)
		return r;
	if (c->json) {
		json_dumpf(doc, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		print(doc);
	}
	json_decref(doc);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "state", required_argument, NULL, 'S' },
		{ "endpoint", required_argument, NULL, 'E' },
		{ "force", no_argument, NULL, 'f' },
		{ "follow", no_argument, NULL, 'F' },
		{ "no-follow", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { .socket = getenv("RDMAD_SOCKET"), .follow = -1 };
	const char *names[ARRAY_SIZE(commands)], *best;
	int opt;

	if (c.socket && !*c.socket)
		c.socket = NULL;
	while ((opt = getopt_long(argc, argv, "s:jfhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			c.socket = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'S':
			c.state = optarg;
			break;
		case 'E':
			c.endpoint = optarg;
			break;
		case 'f':
			c.force = true;
			break;
		case 'F':
			c.follow = 1;
			break;
		case 'N':
			c.follow = 0;
			break;
		case 'h':
			usage(stdout);
			return EX_OK;
		case 'V':
			printf("rdmactl %s\n", RDMAD_VERSION);
			return EX_OK;
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	c.argc = argc - optind - 1;
	c.argv = argv + optind + 1;
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (streq(commands[i].name, argv[optind]))
			return run_command(&c, &commands[i], c.argc, c.argv);
		names[i] = commands[i].name;
	}
	best = suggest_closest(argv[optind], names, ARRAY_SIZE(commands));
	if (best)
		fprintf(stderr,
			"rdmactl: unknown command '%s'; did you mean '%s'? "
			"(see --help)\n",
			argv[optind], best);
	else
		fprintf(stderr, "rdmactl: unknown command '%s' (see --help)\n",
			argv[optind]);
	return EX_USAGE;
}
