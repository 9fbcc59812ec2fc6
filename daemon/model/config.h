/* SPDX-License-Identifier: MIT */
/*
 * The configuration: parsed from libconfig files into an immutable tree,
 * then verified as a whole. Every problem found is recorded with its
 * file:line so that all of them can be reported at once.
 */
#ifndef RDMAD_CONFIG_H
#define RDMAD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>
#include <jansson.h>

/* The build passes SYSCONFDIR (make install's, /etc by default). */
#ifndef RDMAD_SYSCONFDIR
#define RDMAD_SYSCONFDIR "/etc"
#endif
#define CONFIG_DEFAULT_PATH RDMAD_SYSCONFDIR "/rdmad/rdmad.conf"
#define CONFIG_DEFAULT_LISTEN "127.0.0.1:8470"
/* The control socket in daemon.runtime_dir, unless said otherwise. */
#define CONFIG_DEFAULT_SOCKET_NAME "rdmad.sock"
#define CONFIG_DEFAULT_MAX_SESSIONS 4096
#define CONFIG_DEFAULT_MAX_SESSIONS_PER_UID 256
#define CONFIG_DEFAULT_HELLO_TIMEOUT 10
/* What the control socket's sessions may make the daemon hold. */
#define CONFIG_DEFAULT_OUTPUT_BUDGET (64ULL << 20)
#define CONFIG_DEFAULT_OUTPUT_BUDGET_PER_UID (16ULL << 20)
#define CONFIG_DEFAULT_MAX_ATTACHMENTS_PER_SESSION 64
/* Where container engines look for CDI specifications (cdi.c). */
#define CONFIG_DEFAULT_CDI_SPEC "/run/cdi/rdmad.json"
#define CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS 4096
#define CONFIG_DEFAULT_HTTP_MAX_PER_ADDRESS 64
#define CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT 60
#define CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT 10

/* Where a setting came from, for messages. */
struct conf_loc {
	const char *file; /* interned in struct config */
	int line;
};

struct conf_error {
	struct conf_loc loc;
	char *msg;
	size_t seq; /* order found, to keep sorting stable */
};

/* A boolean key that may be left out, so that a default can depend on
 * the host. */
enum conf_tribool {
	CONF_UNSET,
	CONF_TRUE,
	CONF_FALSE,
};

enum mem_backing {
	MEM_MEMFD,
	MEM_HUGETLB,
	MEM_FILE,
	MEM_ANONYMOUS,
};

enum qp_kind {
	QPK_RC,
	QPK_UC,
	QPK_UD,
	QPK_RAW_PACKET,
	QPK_XRC_SEND,
	QPK_XRC_RECV,
};

enum qp_target_state {
	QPS_TARGET_RESET,
	QPS_TARGET_INIT,
	QPS_TARGET_RTR,
	QPS_TARGET_RTS,
};

/* What the daemon does when one of its QPs goes to the error state. */
enum qp_recover {
	QPR_NONE,  /* report it; the QP stays in error */
	QPR_RESET, /* back through RESET to its declared state and path */
};

enum srq_kind {
	SRQK_BASIC,
	SRQK_XRC,
};

enum gid_kind {
	GIDK_ANY = -1,
	GIDK_IB,
	GIDK_ROCE_V1,
	GIDK_ROCE_V2,
};

enum gid_family {
	GIDF_ANY,
	GIDF_IPV4,
	GIDF_IPV6,
};

/*
 * Every conf_<kind> of a profile object starts with loc and name, in that
 * order, and so do conf_device and conf_profile: generic code (lookups,
 * the reload diff) relies on it.
 */
struct conf_memory {
	struct conf_loc loc;
	char *name;
	uint64_t size;
	enum mem_backing backing;
	char *path; /* backing = file */
	uint64_t page_size; /* backing = hugetlb; 0: the host's default */
	/* Transparent huge pages (anonymous, memfd): unset asks for them
	 * where the host's policy gives them. */
	enum conf_tribool thp;
};

struct conf_pd {
	struct conf_loc loc;
	char *name;
};

struct conf_mr {
	struct conf_loc loc;
	char *name;
	char *pd;
	char *memory; /* or: */
	char *dm;     /* device memory (ibv_reg_dm_mr), zero-based */
	unsigned int access; /* IBV_ACCESS_* */
	bool zero_based;
	bool odp; /* on-demand paging: IBV_ACCESS_ON_DEMAND */
	uint64_t offset;
	uint64_t length; /* 0: to the end of the memory */
};

struct conf_mw {
	struct conf_loc loc;
	char *name;
	char *pd;
	int type; /* 1 or 2 */
};

struct conf_dm {
	struct conf_loc loc;
	char *name;
	uint64_t size;
};

struct conf_cq {
	struct conf_loc loc;
	char *name;
	int cqe;
	bool channel;
	int comp_vector;
};

struct conf_srq {
	struct conf_loc loc;
	char *name;
	char *pd;
	enum srq_kind type;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
	char *xrcd; /* type xrc */
	char *cq;   /* type xrc */
};

struct conf_xrcd {
	struct conf_loc loc;
	char *name;
	char *file; /* shareable by inode; NULL: private to the daemon */
};

struct conf_qp_cap {
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline_data;
};

/* The remote end of a QP in the config's vocabulary: the keys of
 * struct qp_path (qpstate.h). Unset numbers are -1: the device's port
 * and selected GID, or qp_path_init()'s defaults, fill them. */
struct conf_path {
	char *dgid;
	int64_t port_num, pkey_index, qkey, dqpn, rq_psn, sq_psn, mtu;
	int64_t max_dest_rd_atomic, min_rnr_timer, dlid, sl, src_path_bits;
	int64_t static_rate, sgid_index, hop_limit, traffic_class, flow_label;
	int64_t timeout, retry_cnt, rnr_retry, max_rd_atomic;
};

struct conf_qp {
	struct conf_loc loc;
	char *name;
	char *pd;
	char *send_cq;
	char *recv_cq;
	char *srq;
	char *xrcd; /* xrc_recv */
	/* rtr/rts: another QP of the profile (loopback), or the endpoint
	 * document of a QP elsewhere: "@/path" of a file, or the JSON
	 * inline (conf_peer_is_endpoint()). */
	char *peer;
	/* That document, read and checked at load, as compact JSON text
	 * (what a reload compares). NULL: peer is a QP's name, or none. */
	char *peer_endpoint;
	struct conf_path *path; /* NULL: no path block */
	/* The alternate path (APM): its address keys and timeout, the
	 * primary path's where not given. NULL: none. */
	struct conf_path *alt_path;
	enum qp_kind type;
	struct conf_qp_cap cap;
	enum qp_target_state state;
	enum qp_recover recover;
	unsigned int access; /* qp_access_flags for INIT */
	uint32_t qkey;	     /* UD */
	uint16_t pkey_index;
	int pkey; /* by value, looked up in the port's table; -1: none */
	bool sq_sig_all;
};

struct conf_ah {
	struct conf_loc loc;
	char *name;
	char *pd;
	char *dgid;
	int sgid_index; /* -1: the device's selected GID */
	int hop_limit;
	int traffic_class;
	int sl;
	int dlid;
	int static_rate; /* enum ibv_rate; 0: the port's */
};

/* A range of an MR that a target's connections reach through a type-2
 * memory window of their own. */
struct conf_expose {
	struct conf_loc loc;
	char *mr;
	unsigned int access; /* IBV_ACCESS_REMOTE_{READ,WRITE,ATOMIC} */
	uint64_t offset;     /* into the MR */
	uint64_t length;     /* 0: to the MR's end */
};

/* At most this many ranges: the accept private data holds them all
 * (proto/target.h). */
#define CONF_TARGET_MAX_EXPOSE 8
/* A token travels in the connect private data (56 bytes for RC). */
#define CONF_TARGET_MAX_TOKEN 56

/* An rdma_cm listener: each admitted connection gets an RC QP and one
 * memory window per exposed range (engine/target.c). */
struct conf_target {
	struct conf_loc loc;
	char *name;
	char *listen; /* "IPV4:PORT" or "[IPV6]:PORT" */
	char *pd;
	char *cq;
	struct conf_expose *expose;
	size_t n_expose;
	char **allow; /* source prefixes "ADDR/LEN" or addresses */
	size_t n_allow;
	int max_connections;
	char *token; /* the token, or "@/path" of a file holding it */
};

/* How a multicast group is joined (rdma_join_multicast_ex's flags). */
enum mcast_join {
	MCJ_FULL,      /* full member: sends and receives */
	MCJ_SEND_ONLY, /* send-only full member: sends, receives nothing */
};

/* At most this many QPs per group: each is a reference (CONF_MAX_REFS). */
#define CONF_MCAST_MAX_QPS 8
/* The Q_Key of the groups rdma_cm makes (RDMA_UDP_QKEY): what member QPs
 * must use to receive what is sent to the group. */
#define CONF_MCAST_QKEY 0x01234567u

/* A multicast group the profile's UD QPs join (engine/mcast.c). */
struct conf_mcast {
	struct conf_loc loc;
	char *name;
	char *addr; /* an IPv4 or IPv6 multicast address, or: */
	char *mgid; /* the group's GID, as it is (IPv6 notation) */
	char **qps; /* UD QPs of the profile attached to the group */
	size_t n_qps;
	enum mcast_join join;
};

struct conf_device {
	struct conf_loc loc;
	char *name;
	/* match: every matcher given must hold */
	char *ibdev;
	char *guid;
	char *netdev;
	char *pci;
	char *driver;
	int port;
	int gid_index; /* -1: chosen by type/family */
	enum gid_kind gid_type;
	enum gid_family gid_family;
};

/*
 * The object kinds. Their order is the creation order, stated here
 * alone: each kind refers only to kinds before it (a QP's peer is a
 * link, not a dependency); a profile holds its objects in this order,
 * makes each once what it names is ready and destroys them in reverse;
 * lists of kinds (the configuration's names, REST, the docs) follow it.
 * Everything the engine knows of a kind is its table
 * (daemon/engine/kinds.h). tests/unit/test_kinds.c and tests/kinds
 * check the tables and the lists against this order.
 */
enum obj_kind {
	OBJ_MEMORY,
	OBJ_XRCD,
	OBJ_PD,
	OBJ_DM,
	OBJ_MR,
	OBJ_MW,
	OBJ_CQ,
	OBJ_SRQ,
	OBJ_QP,
	OBJ_AH,
	OBJ_TARGET,
	OBJ_MCAST,
	OBJ_KIND_MAX,
};

/* A name index (config_index.c): use conf_obj_find() and friends. */
struct conf_names;

struct conf_profile {
	struct conf_loc loc;
	char *name;
	char *device;
	/* Objects by kind: arrays of struct conf_<kind>. */
	void *objs[OBJ_KIND_MAX];
	size_t n_objs[OBJ_KIND_MAX];
	struct conf_names *names[OBJ_KIND_MAX]; /* by name, for lookups */
	char **allow_users;
	size_t n_allow_users;
	char **allow_groups;
	size_t n_allow_groups;
	int64_t *allow_uids;
	size_t n_allow_uids;
	/* The allow list as numbers, resolved once by
	 * config_resolve_identities(): no name lookup when a client comes. */
	uint32_t *admit_uids;
	size_t n_admit_uids;
	uint32_t *admit_gids;
	size_t n_admit_gids;
};

#define CONF_OBJS(prof, kind, type) ((struct conf_##type *)(prof)->objs[kind])

struct conf_daemon {
	char *runtime_dir;
	char *control_socket;
	char *admin_group;
	char *control_group; /* group of the control socket */
	char **listen;
	size_t n_listen;
	char *token_file;
	char *include;
	char *log_level;
	/* The CDI specification written for container engines; "": none. */
	char *cdi_spec;
	int workers; /* worker threads; 0: two per online CPU */
	/* What becomes of leftovers in a shared context that cannot be
	 * reclaimed by handle (reclaim.h): "keep" them, or "retire" the
	 * context once no session is attached. */
	char *orphans;
	int64_t admin_gid; /* admin_group resolved; -1: none */
	/* uid 0 is admitted to every profile; false: only where a
	 * profile's allow list names it (uid 0, root, group 0). */
	bool admit_root;
	/* Front-end limits (0 in the file: the default, filled in). */
	int max_sessions;	  /* control socket sessions, all uids */
	int max_sessions_per_uid;
	int hello_timeout;	  /* seconds until HELLO */
	/* Answers waiting for sessions that do not read, bytes: in all,
	 * and of one uid's sessions (past either, sessions are not read
	 * until they have taken what waits for them). */
	uint64_t output_budget, output_budget_per_uid;
	int max_attachments_per_session;
	int http_max_connections; /* REST connections, all listeners */
	int http_max_per_address; /* per non-loopback client address */
	/* Connections only requests with the token may take: anonymous
	 * ones (streams, keep-alives, requests) hold the rest at most. */
	int http_reserved;
	/* Host names REST answers to, beside the loopback names and the
	 * listen addresses (Host and Origin are checked). */
	char **http_hosts;
	size_t n_http_hosts;
	int http_idle_timeout;	  /* seconds */
	int http_header_timeout;  /* seconds to send a request's headers */
	char *tls_cert;		  /* PEM files: HTTPS on TCP listeners */
	char *tls_key;
	bool insecure; /* plain HTTP on a non-loopback address */
	struct conf_loc listen_loc; /* of http.listen, when given */
	struct conf_loc http_loc;   /* of the http group, when given */
};

/* A file a configuration was read from, as it was when read
 * (config_sources.c): its inode's look, and the XXH3 128-bit hash of
 * the bytes read (of a directory: of the names read in it). */
struct conf_source {
	char *path;
	dev_t dev;
	ino_t ino;
	off_t size;
	mode_t mode;
	struct timespec mtime, ctime;
	uint64_t digest[2];
};

struct config {
	char *path;
	struct conf_daemon daemon;
	struct conf_device *devices;
	size_t n_devices;
	struct conf_profile *profiles;
	size_t n_profiles;
	/* By name, for lookups: built by config_load(). */
	struct conf_names *device_names;
	struct conf_names *profile_names;

	/* Every string of the settings above (config_strings.c). */
	struct conf_strings *strings;
	char **files; /* interned file names for conf_loc */
	size_t n_files;
	/* Every file read (main, include directory, includes, peers'
	 * endpoint files), in the order read. */
	struct conf_source *sources;
	size_t n_sources;
	struct conf_error *errors;
	size_t n_errors;
	/* What this host makes doubtful but does not make wrong (a user
	 * that does not exist here): printed by --check, never refused. */
	struct conf_error *warnings;
	size_t n_warnings;
};

/*
 * Parse and verify the file at path. Returns a config in *out whenever the
 * allocation succeeded; check n_errors: a config with errors must not be
 * applied. Returns -ENOMEM on allocation failure.
 */
int config_load(const char *path, struct config **out);
/*
 * config_load() of files that known, a configuration this process has
 * loaded, read too: each file must be what it was then, checked as it
 * is read, before it is parsed. -ESTALE (nothing in *out) when one is
 * not: the caller reads it the careful way (validate.h).
 */
int config_load_known(const char *path, const struct config *known,
		      struct config **out);
/* Whether every file c was read from is still as it was then: same
 * inode, size, mode, modification and change times. false for a config
 * with errors or read from a string. */
bool config_sources_unchanged(const struct config *c);
/*
 * A configuration without errors as bytes (to free) that
 * config_from_image() makes the same configuration of, in another rdmad
 * process of this binary: how a child that read the files hands what it
 * read to the daemon (validate.h). -EINVAL for a config with errors,
 * -ENOMEM.
 */
int config_image(const struct config *c, char **out, size_t *len);
/* The configuration of an image, indexes built; -EPROTO when the bytes
 * are not an image (whatever they are, nothing is read past len),
 * -ENOMEM. */
int config_from_image(const void *image, size_t len, struct config **out);
/* Whether every file c was read from has the same bytes now (each read
 * again and hashed; a directory, the names it gives). false for a
 * config with errors or read from a string. */
bool config_sources_same(const struct config *c);
/*
 * The configuration across a restart (config_kept.c): c as bytes (to
 * free) for the fd store, stamped with this binary's build ID
 * (-ENOTSUP when it has none; -EINVAL for a config with errors).
 * config_load_kept() makes of them the configuration of path, when they
 * come from this binary, name path, and every file they were read from
 * has the same bytes now; else -ESTALE (load path as always), -EPROTO
 * for bytes that are not such an image, -ENOMEM.
 */
int config_keep(const struct config *c, char **out, size_t *len);
int config_load_kept(const char *path, const void *kept, size_t len,
		     struct config **out);
/* config_load() of a string; name is used in messages. */
int config_load_string(const char *name, const char *text,
		       struct config **out);
void config_print_errors(const struct config *c, FILE *f);
/* The warnings, one per line: "file:line: warning: message". */
void config_print_warnings(const struct config *c, FILE *f);
/* The errors as a JSON array of {"file", "line", "message"}. */
json_t *config_errors_json(const struct config *c);
struct config *config_free(struct config *c);
static inline void config_freep(struct config **c)
{
	config_free(*c);
}

/*
 * Lookups by name, in constant time: the first device, profile or object
 * of the kind with that name (names are unique in a config without
 * errors), or NULL; NULL for a NULL name. The config must not change
 * after config_load() (a config built by hand, without indexes, is
 * searched in order).
 */
const struct conf_device *config_device(const struct config *c,
					const char *name);
const struct conf_profile *config_profile(const struct config *c,
					  const char *name);

/*
 * Resolve the users and groups the configuration names (allow lists,
 * admin_group) to numbers, through NSS, once: at start and at each
 * reload, so that admitting a client never waits on a directory service.
 * A user or group that does not exist then admits nobody; logged.
 * Returns -ENOMEM or 0.
 */
int config_resolve_identities(struct config *c);
/* A user or group of this host by name (thread-safe lookups). */
bool identity_user(const char *name, uid_t *uid);
bool identity_group(const char *name, gid_t *gid);

/* Names of enum values, as in the configuration. */
const char *mem_backing_name(enum mem_backing b);
const char *qp_kind_name(enum qp_kind k);
const char *qp_target_state_name(enum qp_target_state s);
const char *qp_recover_name(enum qp_recover r);
const char *srq_kind_name(enum srq_kind k);
const char *obj_kind_name(enum obj_kind k);
int obj_kind_from_name(const char *name);
/* Size of struct conf_<kind>. */
size_t conf_obj_size(enum obj_kind k);
/* Object i of kind k in profile p, and its name. */
const void *conf_obj(const struct conf_profile *p, enum obj_kind k, size_t i);
const char *conf_obj_name(const void *obj);
/* Object of kind k named name in p: see config_device(). */
const void *conf_obj_find(const struct conf_profile *p, enum obj_kind k,
			  const char *name);
/* Do two objects of kind k declare the same thing (ignoring where)? */
bool conf_obj_equal(enum obj_kind k, const void *a, const void *b);
/* A QP's peer given as an endpoint document ("@FILE" or "{...}"), not a
 * QP's name. */
bool conf_peer_is_endpoint(const char *peer);
/* The objects obj (of kind k) names: its dependencies, and a QP's peer. */
struct conf_ref {
	enum obj_kind kind;
	const char *name;
};
#define CONF_MAX_REFS (2 + CONF_TARGET_MAX_EXPOSE)
size_t conf_obj_refs(enum obj_kind k, const void *obj, struct conf_ref *out,
		     size_t max);
bool conf_device_equal(const struct conf_device *a,
		       const struct conf_device *b);
/* "192.0.2.1:7471" or "[fe80::1]:7471" (numeric): 0 or -EINVAL. */
struct sockaddr_storage;
int config_parse_sockaddr(const char *s, struct sockaddr_storage *out);
/* An address or a prefix, "192.0.2.0/24", "fd00::/8", "192.0.2.7". */
struct conf_prefix {
	int family; /* AF_INET or AF_INET6 */
	int bits;
	uint8_t addr[16];
};
int config_parse_prefix(const char *s, struct conf_prefix *out);
/* "::ffff:192.0.2.1", "fe80::1" or "192.0.2.1" (IPv4-mapped). */
int config_parse_gid(const char *s, uint8_t gid[16]);
/* The effective configuration, every default filled in: as JSON (the
 * vocabulary of the file), and as libconfig text that reads back the same
 * (rdmad --dump). */
json_t *config_json(const struct config *c);
/* One object's declaration (a struct conf_<kind>), as config_json() shows
 * it in its profile's list. */
json_t *config_object_json(enum obj_kind kind, const void *obj);
int config_print(const struct config *c, FILE *f);
/* Record an error found outside the parser (e.g. a device check). */
void config_add_error(struct config *c, struct conf_loc loc,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * The group a multicast declaration names, as an address rdma_cm joins:
 * addr as AF_INET or AF_INET6, mgid as AF_INET6 holding the GID. 0, or
 * -EINVAL with *why set (static text) when it is no multicast address.
 */
int config_parse_mcast(const struct conf_mcast *m,
		       struct sockaddr_storage *out, const char **why);
const char *mcast_join_name(enum mcast_join j);
/* Parse "64M" etc. (powers of 1024). Returns 0 or -EINVAL / -ERANGE. */
int config_parse_size(const char *s, uint64_t *out);

#endif
