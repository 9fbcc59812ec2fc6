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

#define CONFIG_DEFAULT_PATH "/etc/rdmad/rdmad.conf"
#define CONFIG_DEFAULT_LISTEN "127.0.0.1:8470"

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
};

enum qp_target_state {
	QPS_TARGET_RESET,
	QPS_TARGET_INIT,
};

struct conf_memory {
	struct conf_loc loc;
	char *name;
	uint64_t size;
	enum mem_backing backing;
	char *path; /* backing = file */
};

struct conf_pd {
	struct conf_loc loc;
	char *name;
};

struct conf_mr {
	struct conf_loc loc;
	char *name;
	char *pd;
	char *memory;
	unsigned int access; /* IBV_ACCESS_* */
	uint64_t offset;
	uint64_t length; /* 0: to the end of the memory */
	bool zero_based;
};

struct conf_cq {
	struct conf_loc loc;
	char *name;
	int cqe;
	bool channel;
	int comp_vector;
};

struct conf_qp_cap {
	uint32_t max_send_wr, max_recv_wr;
	uint32_t max_send_sge, max_recv_sge;
	uint32_t max_inline_data;
};

struct conf_qp {
	struct conf_loc loc;
	char *name;
	char *pd;
	enum qp_kind type;
	char *send_cq;
	char *recv_cq;
	struct conf_qp_cap cap;
	bool sq_sig_all;
	enum qp_target_state state;
	unsigned int access; /* qp_access_flags for INIT */
	uint16_t pkey_index;
	uint32_t qkey; /* UD */
};

struct conf_device {
	struct conf_loc loc;
	char *name;
	char *ibdev; /* match */
	int port;
	int gid_index; /* -1: chosen by type/family */
};

struct conf_profile {
	struct conf_loc loc;
	char *name;
	char *device;
	struct conf_memory *memory;
	size_t n_memory;
	struct conf_pd *pd;
	size_t n_pd;
	struct conf_mr *mr;
	size_t n_mr;
	struct conf_cq *cq;
	size_t n_cq;
	struct conf_qp *qp;
	size_t n_qp;
	char **allow_users;
	size_t n_allow_users;
	char **allow_groups;
	size_t n_allow_groups;
};

struct conf_daemon {
	char *runtime_dir;
	char *control_socket;
	char *admin_group;
	char **listen;
	size_t n_listen;
	char *token_file;
	char *include;
	char *log_level;
};

struct config {
	char *path;
	struct conf_daemon daemon;
	struct conf_device *devices;
	size_t n_devices;
	struct conf_profile *profiles;
	size_t n_profiles;

	char **files; /* interned file names for conf_loc */
	size_t n_files;
	struct conf_error *errors;
	size_t n_errors;
};

/*
 * Parse and verify the file at path. Returns a config in *out whenever the
 * allocation succeeded; check n_errors: a config with errors must not be
 * applied. Returns -ENOMEM on allocation failure.
 */
int config_load(const char *path, struct config **out);
/* Same, from a string; name is used in messages. */
int config_load_string(const char *name, const char *text,
		       struct config **out);
void config_print_errors(const struct config *c, FILE *f);
struct config *config_free(struct config *c);
static inline void config_freep(struct config **c)
{
	config_free(*c);
}

const struct conf_device *config_device(const struct config *c,
					const char *name);

/* Names of enum values, as in the configuration. */
const char *mem_backing_name(enum mem_backing b);
const char *qp_kind_name(enum qp_kind k);
const char *qp_target_state_name(enum qp_target_state s);
/* Parse "64M" etc. (powers of 1024). Returns 0 or -EINVAL / -ERANGE. */
int config_parse_size(const char *s, uint64_t *out);

#endif
