/* SPDX-License-Identifier: Apache-2.0 */
/* imageref: parses image references the way docker does (docker.io/library/) and registry auth
 * challenges. */
#include "imageref.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define LOWER_REPO "abcdefghijklmnopqrstuvwxyz0123456789._-/"
#define TAG_CHARS  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
#define HOST_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]"

static bool is_sha256(const char *d)
{
	return !strncmp(d, "sha256:", 7) && strlen(d + 7) == 64 &&
	       strspn(d + 7, "0123456789abcdef") == 64;
}

int imageref_parse(const char *ref, struct imageref *out)
{
	char buf[600], *at, *slash, *colon, *name;

	memset(out, 0, sizeof(*out));
	/* UNTRUSTED: a reference from a client; every part is checked against its charset. */
	if (!ref || !*ref || strlen(ref) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", ref);
	at = strchr(buf, '@');
	if (at) {
		*at = '\0';
		if (!is_sha256(at + 1))
			return -EINVAL;
		snprintf(out->digest, sizeof(out->digest), "%s", at + 1);
	}
	name = buf;
	slash = strchr(buf, '/');
	if (slash &&
	    (memchr(buf, '.', (size_t)(slash - buf)) || memchr(buf, ':', (size_t)(slash - buf)) ||
	     (slash - buf == 9 && !strncmp(buf, "localhost", 9)))) {
		*slash = '\0';
		if (strspn(buf, HOST_CHARS) != strlen(buf) || strlen(buf) >= sizeof(out->registry))
			return -EINVAL;
		snprintf(out->registry, sizeof(out->registry), "%s", buf);
		{
			const char *port = strrchr(buf, ':');

			/* host:port, the port numeric (a `]` after the colon: an IPv6 literal) */
			if (port && !strchr(port, ']') &&
			    (!port[1] || strspn(port + 1, "0123456789") != strlen(port + 1)))
				return -EINVAL;
		}
		name = slash + 1;
	} else {
		/* strcpy of a constant that fits: gcc -O2 with ASan warns "null destination
		 * pointer" (format-truncation) about snprintf here. */
		strcpy(out->registry, "docker.io");
	}
	if (!strcmp(out->registry, "index.docker.io") ||
	    !strcmp(out->registry, "registry-1.docker.io"))
		strcpy(out->registry, "docker.io");
	snprintf(out->api_host, sizeof(out->api_host), "%s",
		 strcmp(out->registry, "docker.io") ? out->registry : "registry-1.docker.io");
	colon = strrchr(name, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		if (!colon[1] || strlen(colon + 1) >= sizeof(out->tag) ||
		    strspn(colon + 1, TAG_CHARS) != strlen(colon + 1) || colon[1] == '.' ||
		    colon[1] == '-')
			return -EINVAL;
		snprintf(out->tag, sizeof(out->tag), "%s", colon + 1);
	} else if (!out->digest[0]) {
		strcpy(out->tag, "latest");
	}
	if (!*name || strspn(name, LOWER_REPO) != strlen(name) || name[0] == '/' ||
	    name[strlen(name) - 1] == '/' || strstr(name, "//") || strstr(name, ".."))
		return -EINVAL;
	if (snprintf(out->repo, sizeof(out->repo), "%s%s",
		     !strcmp(out->registry, "docker.io") && !strchr(name, '/') ? "library/" : "",
		     name) >= (int)sizeof(out->repo))
		return -EINVAL;
	return 0;
}

void imageref_format(const struct imageref *r, char *buf, unsigned long size)
{
	snprintf(buf, size, "%s/%s%s%s%s%s", r->registry, r->repo, r->tag[0] ? ":" : "", r->tag,
		 r->digest[0] ? "@" : "", r->digest);
}

bool imageref_host_is_loopback(const char *host)
{
	char h[256];
	size_t n;

	if (host[0] == '[') {
		n = strcspn(host, "]");
		return n == 4 && !strncmp(host, "[::1", 4);
	}
	n = strcspn(host, ":");
	if (n >= sizeof(h))
		return false;
	memcpy(h, host, n);
	h[n] = '\0';
	return !strcmp(h, "localhost") || (!strncmp(h, "127.", 4) && strspn(h, "0123456789.") == n);
}

/* One quoted or bare parameter value of a challenge; returns the end of it. */
static const char *challenge_value(const char *s, char *out, size_t size)
{
	size_t o = 0;
	bool quoted = *s == '"';

	if (quoted)
		s++;
	for (; *s && (quoted ? *s != '"' : *s != ','); s++) {
		if (quoted && *s == '\\' && s[1])
			s++;
		if (o + 1 < size)
			out[o++] = *s;
	}
	out[o] = '\0';
	return quoted && *s == '"' ? s + 1 : s;
}

int imageref_parse_challenge(const char *h, char *scheme, size_t scheme_size, char *realm,
			     size_t realm_size, char *service, size_t service_size, char *scope,
			     size_t scope_size)
{
	size_t n = strcspn(h, " ");

	/* UNTRUSTED: WWW-Authenticate from the registry: Bearer realm="..",service="..". */
	realm[0] = service[0] = scope[0] = '\0';
	if (n == 0 || n >= scheme_size)
		return -EBADMSG;
	memcpy(scheme, h, n);
	scheme[n] = '\0';
	h += n;
	while (*h) {
		char key[32], val[1024];
		size_t k;

		h += strspn(h, " ,");
		k = strcspn(h, "=, ");
		if (!*h || h[k] != '=' || k >= sizeof(key))
			break;
		memcpy(key, h, k);
		key[k] = '\0';
		h = challenge_value(h + k + 1, val, sizeof(val));
		if (!strcasecmp(key, "realm"))
			snprintf(realm, realm_size, "%s", val);
		else if (!strcasecmp(key, "service"))
			snprintf(service, service_size, "%s", val);
		else if (!strcasecmp(key, "scope"))
			snprintf(scope, scope_size, "%s", val);
	}
	return 0;
}
