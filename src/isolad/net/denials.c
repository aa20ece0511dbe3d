/* SPDX-License-Identifier: Apache-2.0 */
/* denials: a bounded ring of one sandbox's most recent egress denials (GET .../network). */
#include "denials.h"

#include <stdio.h>
#include <string.h>

void net_denials_init(struct net_denials *d)
{
	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
}

void net_denials_fini(struct net_denials *d)
{
	pthread_mutex_destroy(&d->lock);
}

/* Copies src into dst (size bytes) keeping printable ASCII only: anything else becomes '?'. */
static void copy_printable(char *dst, size_t size, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < size; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	dst[i] = '\0';
}

void net_denials_add(struct net_denials *d, double at, const char *host, const char *addr,
		     unsigned port, const char *reason)
{
	struct net_denial e = {.at = at, .port = (uint16_t)port};

	/* UNTRUSTED: host is the SNI/Host name a sandbox sent; made printable ASCII here. */
	copy_printable(e.host, sizeof(e.host), host);
	copy_printable(e.addr, sizeof(e.addr), addr);
	copy_printable(e.reason, sizeof(e.reason), reason);
	pthread_mutex_lock(&d->lock);
	d->ring[d->total % NET_DENIALS_MAX] = e;
	d->total++;
	pthread_mutex_unlock(&d->lock);
}

json_t *net_denials_to_json(struct net_denials *d)
{
	struct net_denial copy[NET_DENIALS_MAX];
	json_t *arr = json_array(), *out;
	uint64_t total, n;

	pthread_mutex_lock(&d->lock);
	total = d->total;
	memcpy(copy, d->ring, sizeof(copy));
	pthread_mutex_unlock(&d->lock);
	n = total < NET_DENIALS_MAX ? total : NET_DENIALS_MAX;
	for (uint64_t i = 0; arr && i < n; i++) {
		const struct net_denial *e = &copy[(total - 1 - i) % NET_DENIALS_MAX];

		if (json_array_append_new(arr,
					  json_pack("{s:f, s:s, s:s, s:i, s:s}", "time", e->at,
						    "host", e->host, "address", e->addr, "port",
						    (int)e->port, "reason", e->reason)) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	out = arr ? json_pack("{s:I, s:o}", "total", (json_int_t)total, "recent", arr) : NULL;
	return out;
}
