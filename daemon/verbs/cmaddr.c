// SPDX-License-Identifier: MIT
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "cmaddr.h"
#include "util.h"

int cmaddr_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
			&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

int cmaddr_device(const struct sockaddr *sa, char *ibdev, size_t len,
		  int *port)
{
	struct sockaddr_storage any;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id = NULL;
	int r = 0;

	/* Port 0: a port the daemon listens on is taken, the address is
	 * all that matters. */
	memcpy(&any, sa, sa->sa_family == AF_INET6
				 ? sizeof(struct sockaddr_in6)
				 : sizeof(struct sockaddr_in));
	if (any.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&any)->sin6_port = 0;
	else
		((struct sockaddr_in *)&any)->sin_port = 0;
	ch = rdma_create_event_channel();
	if (!ch)
		return errno ? -errno : -ENODEV;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		r = -errno;
		goto out;
	}
	if (rdma_bind_addr(id, (struct sockaddr *)&any)) {
		r = errno == EADDRNOTAVAIL || errno == ENODEV ? -EADDRNOTAVAIL
							      : -errno;
		goto out;
	}
	if (!id->verbs) {
		r = -EADDRNOTAVAIL;
		goto out;
	}
	snprintf(ibdev, len, "%s", ibv_get_device_name(id->verbs->device));
	if (port)
		*port = id->port_num;
out:
	if (id)
		rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return r;
}
