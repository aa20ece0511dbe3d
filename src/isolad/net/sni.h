/* SPDX-License-Identifier: Apache-2.0 */
/* sni: finds the host name in the first bytes of a sandbox's TCP connection (TLS SNI, HTTP Host). */
#ifndef ISOLA_NET_SNI_H
#define ISOLA_NET_SNI_H

#include <stddef.h>

/* The most a client may send before the name must be known (a ClientHello with post-quantum key
 * shares is ~1.8 KiB; browsers stay far below this). Past it, the head is "too long". */
#define NET_SNI_MAX 16384

enum net_sni_kind {
	NET_SNI_RAW,  /* neither TLS nor HTTP/1.x: no name, the original destination decides */
	NET_SNI_TLS,  /* a TLS ClientHello; name is the SNI host_name, or "" without one */
	NET_SNI_HTTP, /* an HTTP/1.x request head; name is the Host (or absolute-form URI) host */
};

/* What the head said. `name` is NUL-terminated and holds no NUL, CR, LF or control byte, but is
 * otherwise UNTRUSTED: validate it as a host name (net_name_normalize) or an IP literal before use.
 * For HTTP, port and IPv6 brackets are stripped ("[::1]:80" → "::1"). */
struct net_sni_head {
	enum net_sni_kind kind; /* see above */
	char name[256];		/* host name or literal; "" = none */
	const char *error;	/* static reason when net_sni_parse returns -EINVAL */
};

/*
 * Parses buf[0..len) (UNTRUSTED: the first bytes a sandbox sent, possibly split anywhere across
 * reads and TLS records). Returns
 *   0        the head is complete enough: *out says the kind and name;
 *   -EAGAIN  the bytes so far are a prefix of a TLS or HTTP head: read more and call again with
 *            the whole buffer (never returned once len >= NET_SNI_MAX);
 *   -EINVAL  malformed TLS lengths, several/conflicting Host values, a head over NET_SNI_MAX,
 *            NUL or control bytes in the head; out->error says which.
 * Pure function: no allocation, any thread, fuzzed by fuzz/fuzz_sni.c.
 */
int net_sni_parse(const void *buf, size_t len, struct net_sni_head *out);

const char *net_sni_kind_name(enum net_sni_kind k);

#endif
