// SPDX-License-Identifier: MIT
/*
 * rdmactl: inspect a running rdmad. This version speaks to the REST API;
 * every command prints text, or the daemon's JSON document with --json.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <sysexits.h>

#include "devprint.h"
#include "rdmad.h"
#include "restc.h"
#include "util.h"

struct ctl {
	const char *url;    /* REST; NULL: the control socket */
	const char *socket; /* NULL: $RDMAD_SOCKET or the default */
	const char *token_file;
	const char *state; /* qp --state */
	bool json;
	bool force; /* reload --force */
};

#define DEFAULT_TOKEN_FILE "/etc/rdmad/token"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rdmactl [--url URL] [--json] COMMAND [ARGS]\n"
		"Inspect a running rdmad.\n"
		"\n"
		"Commands:\n"
		"  devices                   every RDMA device, used, import capable\n"
		"  device show IBDEV         device attributes (as pyverbs prints them)\n"
		"  port IBDEV N              port attributes\n"
		"  gids IBDEV [N]            GID table of port N (default 1)\n"
		"  profiles                  profiles and their state\n"
		"  show PROFILE [KIND NAME]  a profile's objects, or one object\n"
		"  health | version          daemon liveness, version and uptime\n"
		"  config                    the running configuration (JSON)\n"
		"  sessions                  attached clients: pid, uid, mode, leases\n"
		"  orphans PROFILE           objects dead clients left in the\n"
		"                            profile's context (RDMA netlink)\n"
		"  reload [--force]          reload the configuration file; prints\n"
		"                            what changed, or the errors; a file\n"
		"                            that declares no profile removes the\n"
		"                            running ones only with --force\n"
		"  qp PROFILE NAME --state STATE [KEY=VALUE...]\n"
		"                            move a QP to STATE; KEY=VALUE are path\n"
		"                            attributes (dqpn=17 dgid=::ffff:192.0.2.2)\n"
		"  selftest PROFILE QP_A QP_B [MR]\n"
		"                            RDMA write and send/recv between two\n"
		"                            connected QPs of PROFILE through MR\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH  the control socket (default $RDMAD_SOCKET or\n"
		"                  " RDMAD_DEFAULT_SOCKET "); changes need root or\n"
		"                  the daemon's admin_group\n"
		"  -u, --url URL   use the REST API instead: http://HOST:PORT or\n"
		"                  unix:/PATH (e.g. %s; also $RDMAD_URL); changes\n"
		"                  need the token\n"
		"  -j, --json      print the daemon's JSON document\n"
		"  -t, --token-file FILE\n"
		"                  bearer token for reload and selftest (default\n"
		"                  $RDMAD_TOKEN_FILE or " DEFAULT_TOKEN_FILE ")\n"
		"  -h, --help      show this help\n"
		"  -V, --version   show rdmactl's version\n"
		"\n"
		"Exit status: 0 on success, 1 when the daemon answers with an\n"
		"error, 64 for bad usage, 69 when the daemon cannot be reached,\n"
		"76 when its reply cannot be understood.\n",
		RESTC_DEFAULT_URL);
}

/* The token for changes: the first line of the token file, if readable. */
static char *read_token(const struct ctl *c)
{
	const char *path = c->token_file ? c->token_file : DEFAULT_TOKEN_FILE;
	char buf[256];
	FILE *f = fopen(path, "re");

	if (!f) {
		if (c->token_file)
			fprintf(stderr, "rdmactl: cannot read %s: %s\n", path,
				strerror(errno));
		return NULL;
	}
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? strdup(buf) : NULL;
}

/* Print a failed reply: its message, and the config errors it lists. */
static void print_error(json_t *j)
{
	json_t *e = json_object_get(j, "error"), *item;
	size_t i;

	fprintf(stderr, "rdmactl: %s\n",
		json_string_value(json_object_get(e, "message"))
			?: "request failed");
	json_array_foreach (json_object_get(e, "errors"), i, item)
		fprintf(stderr, "%s:%lld: %s\n",
			json_string_value(json_object_get(item, "file")),
			json_integer_value(json_object_get(item, "line")),
			json_string_value(json_object_get(item, "message")));
}

/*
 * One request; on success (2xx) *doc holds the reply. A mutating request
 * (req_body non-NULL, "{}" at least) carries the token. With keep_failed,
 * a failed reply that is a document of its own (no "error" key) is still
 * handed back, with exit status 1. Returns an exit status.
 */
static int call(const struct ctl *c, const char *method, const char *path,
		const char *req_body, bool keep_failed, json_t **doc)
{
	_cleanup_free_ char *body = NULL, *token = NULL;
	json_error_t jerr;
	json_t *j;
	int status, r;

	if (!c->url) {
		/* The control socket: the daemon knows us by SO_PEERCRED. */
		struct rdmad *d = rdmad_connect(c->socket);

		if (!d) {
			fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
			return EX_UNAVAILABLE;
		}
		r = rdmad_request(d, method, path, req_body, &status, &body);
		if (r < 0)
			fprintf(stderr, "rdmactl: %s\n", rdmad_last_error());
		rdmad_close(d);
		if (r < 0)
			return r == -EPROTO || r == -EBADMSG ? EX_PROTOCOL
							     : EX_UNAVAILABLE;
	} else {
		if (req_body)
			token = read_token(c);
		r = restc_request_ex(c->url, method, path, req_body, token,
				     &status, &body);
		if (r == -EPROTO) {
			fprintf(stderr, "rdmactl: %s did not answer in HTTP\n",
				c->url);
			return EX_PROTOCOL;
		}
		if (r < 0) {
			fprintf(stderr,
				"rdmactl: cannot reach rdmad at %s: %s\n",
				c->url, strerror(-r));
			return EX_UNAVAILABLE;
		}
	}
	j = json_loads(body, 0, &jerr);
	if (!j) {
		fprintf(stderr, "rdmactl: bad reply from %s (status %d): %s\n",
			c->url ? c->url
			       : c->socket ? c->socket : RDMAD_DEFAULT_SOCKET,
			status, jerr.text);
		return EX_PROTOCOL;
	}
	if (status / 100 != 2) {
		/* A report of its own ("error" a sentence), not an error
		 * document ("error" an object). */
		if (keep_failed && !json_is_object(json_object_get(j, "error"))) {
			*doc = j;
			return 1;
		}
		print_error(j);
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

	return s ? s : "-";
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

/* " (3/12 objects, 64/1088 MiB)" while a profile is being created. */
static const char *progress_text(json_t *p, char *buf, size_t len)
{
	json_t *pr = json_object_get(p, "progress");

#define N(k) json_integer_value(json_object_get(pr, k))
	if (!pr)
		return "";
	snprintf(buf, len, " (%lld/%lld objects, %lld/%lld MiB)", N("objects"),
		 N("objects_total"), N("bytes") >> 20, N("bytes_total") >> 20);
#undef N
	return buf;
}

static void print_profiles(json_t *a)
{
	char progress[96];
	size_t i;
	json_t *p;

	printf("%-16s %-12s %-8s %-9s %s\n", "PROFILE", "DEVICE", "IBDEV",
	       "STATE", "OBJECTS");
	json_array_foreach (a, i, p)
		printf("%-16s %-12s %-8s %-9s %lld%s\n", str(p, "name"),
		       str(p, "device"), str(p, "ibdev"), str(p, "state"),
		       json_integer_value(json_object_get(p, "objects")),
		       progress_text(p, progress, sizeof(progress)));
}

/* One line of details per object: the keys that matter for its kind. */
static void print_object_line(json_t *o)
{
	static const char *const keys[] = { "handle", "size",	"backing",
					    "lkey",   "rkey",	"length",
					    "iova",   "qp_num", "qp_state",
					    "cqe",    "errno",	"reason" };

	printf("%-7s %-16s %-8s", str(o, "kind"), str(o, "name"),
	       str(o, "state"));
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		json_t *v = json_object_get(o, keys[k]);

		if (json_is_integer(v))
			printf(" %s=%lld", keys[k], json_integer_value(v));
		else if (json_is_string(v))
			printf(" %s=%s", keys[k], json_string_value(v));
	}
	printf("\n");
}

static void print_profile(json_t *p)
{
	char progress[96];
	size_t i;
	json_t *o;

	printf("profile %s on %s (%s port %lld): %s%s%s%s\n", str(p, "name"),
	       str(p, "device"), str(p, "ibdev"),
	       json_integer_value(json_object_get(p, "port")), str(p, "state"),
	       progress_text(p, progress, sizeof(progress)),
	       json_object_get(p, "reason") ? ": " : "",
	       json_object_get(p, "reason") ? str(p, "reason") : "");
	printf("%-7s %-16s %-8s %s\n", "KIND", "NAME", "STATE", "DETAILS");
	json_array_foreach (json_object_get(p, "objects"), i, o)
		print_object_line(o);
}

static void print_sessions(json_t *a)
{
	size_t i, k;
	json_t *s, *t;

	printf("%-8s %-8s %-6s %-16s %-7s %s\n", "SESSION", "PID", "UID",
	       "PROFILE", "MODE", "LEASES");
	json_array_foreach (a, i, s)
		json_array_foreach (json_object_get(s, "attachments"), k, t)
			printf("%-8lld %-8lld %-6lld %-16s %-7s %lld\n",
			       json_integer_value(json_object_get(s, "session")),
			       json_integer_value(json_object_get(s, "pid")),
			       json_integer_value(json_object_get(s, "uid")),
			       str(t, "profile"), str(t, "mode"),
			       json_integer_value(json_object_get(t, "leases")));
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
			static const char *const kinds[] = { "pd", "cq", "qp",
							     "mr", "srq" };

			printf("%-7s", owners[w]);
			for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
				printf(" %5lld", json_integer_value(
							 json_object_get(n, kinds[k])));
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
	size_t i;
	json_t *ch;

	json_array_foreach (json_object_get(r, "changes"), i, ch)
		printf("%-8s %-8s %-16s profile %s\n", str(ch, "action"),
		       str(ch, "kind"), str(ch, "name"), str(ch, "profile"));
	printf("%zu changes, %lld objects kept\n",
	       json_array_size(json_object_get(r, "changes")),
	       json_integer_value(json_object_get(r, "kept")));
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
			printf("%s: %s\n", k, json_string_value(v));
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

static const struct command commands[] = {
	{ "devices", 0, 0, "/v1/devices", print_devices },
	{ "device", 2, 2, "/v1/devices/%s", print_device }, /* show IBDEV */
	{ "port", 2, 2, "/v1/devices/%s/ports/%s", print_port },
	{ "gids", 1, 2, "/v1/devices/%s/ports/%s/gids", print_gids },
	{ "profiles", 0, 0, "/v1/profiles", print_profiles },
	{ "show", 1, 3, NULL, print_profile },
	{ "health", 0, 0, "/v1/health", print_kv },
	{ "config", 0, 0, "/v1/config", print_json },
	{ "sessions", 0, 0, "/v1/sessions", print_sessions },
	{ "orphans", 1, 1, "/v1/profiles/%s/orphans", print_orphans },
	{ "reload", 0, 0, "/v1/reload", print_reload },
	{ "selftest", 3, 4, "/v1/profiles/%s/selftest", print_selftest },
	{ "qp", 2, 34, "/v1/profiles/%s/qp/%s", print_object_line },
	{ "version", 0, 0, "/v1/version", print_kv },
};

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

static int run_command(const struct ctl *c, const struct command *cmd,
		       int argc, char **argv)
{
	char path[1024];
	json_t *doc = NULL;
	void (*print)(json_t *) = cmd->print;
	int r;

	if (argc < cmd->min_args || argc > cmd->max_args ||
	    (argc == 2 && streq(cmd->name, "show"))) {
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
	if (streq(cmd->name, "qp")) {
		snprintf(path, sizeof(path), cmd->path_fmt, argv[0], argv[1]);
	} else if (streq(cmd->name, "device")) {
		if (!streq(argv[0], "show")) {
			fprintf(stderr, "rdmactl: usage: device show IBDEV\n");
			return EX_USAGE;
		}
		snprintf(path, sizeof(path), cmd->path_fmt, argv[1]);
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

	if (streq(cmd->name, "qp")) {
		r = qp_state(c, path, argc - 2, argv + 2, &doc);
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
		{ "url", required_argument, NULL, 'u' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "token-file", required_argument, NULL, 't' },
		{ "state", required_argument, NULL, 'S' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct ctl c = { .url = getenv("RDMAD_URL"),
			 .socket = getenv("RDMAD_SOCKET"),
			 .token_file = getenv("RDMAD_TOKEN_FILE") };
	int opt;

	while ((opt = getopt_long(argc, argv, "u:s:jt:fhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'u':
			c.url = optarg;
			break;
		case 's':
			c.socket = optarg;
			c.url = NULL;
			break;
		case 'j':
			c.json = true;
			break;
		case 't':
			c.token_file = optarg;
			break;
		case 'S':
			c.state = optarg;
			break;
		case 'f':
			c.force = true;
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
	if (c.url && !restc_url_valid(c.url)) {
		fprintf(stderr,
			"rdmactl: '%s' is not http://HOST:PORT or unix:/PATH\n",
			c.url);
		return EX_USAGE;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (streq(commands[i].name, argv[optind]))
			return run_command(&c, &commands[i], argc - optind - 1,
					   argv + optind + 1);
	fprintf(stderr, "rdmactl: unknown command '%s' (see --help)\n",
		argv[optind]);
	return EX_USAGE;
}
