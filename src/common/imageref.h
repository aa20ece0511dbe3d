/* SPDX-License-Identifier: Apache-2.0 */
/* imageref: parses image references the way docker does (docker.io/library/) and registry auth
 * challenges. */
#ifndef ISOLA_IMAGEREF_H
#define ISOLA_IMAGEREF_H

#include <stdbool.h>
#include <stddef.h>

/* A parsed reference: "busybox" is docker.io/library/busybox:latest. */
struct imageref {
	char registry[256]; /* host[:port] as users write it ("docker.io" for Docker Hub) */
	char api_host[256]; /* host[:port] the v2 API is reached at (registry-1.docker.io) */
	char repo[256];	    /* repository path, e.g. "library/busybox" */
	char tag[129];	    /* tag, "" when the reference names a digest only */
	char digest[72];    /* "sha256:<64 hex>" or "" */
};

/*
 * Parses ref ([registry/]repo[:tag][@sha256:hex]) into *out. The first component is a
 * registry when it has a '.' or ':' or is "localhost"; else Docker Hub, where a one-component
 * repo gets "library/". No tag and no digest means tag "latest". 0, or -EINVAL for what is
 * not a reference (upper case repo, bad tag or digest, too long). Pure; any thread.
 */
int imageref_parse(const char *ref, struct imageref *out);

/* Writes "registry/repo[:tag][@digest]" (the normalised form) into buf. */
void imageref_format(const struct imageref *r, char *buf, unsigned long size);

/* Whether host[:port] names the loopback interface (localhost, 127.0.0.0/8, [::1]). */
bool imageref_host_is_loopback(const char *host);

/* Parses a WWW-Authenticate challenge (`Bearer realm="..",service="..",scope=".."`): the
 * scheme and the three parameters ("" when absent; truncated to the sizes). 0 or -EBADMSG.
 * Pure; behind fuzz/fuzz_imageref.c. */
int imageref_parse_challenge(const char *h, char *scheme, size_t scheme_size, char *realm,
			     size_t realm_size, char *service, size_t service_size, char *scope,
			     size_t scope_size);

#endif
