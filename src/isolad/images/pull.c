/* SPDX-License-Identifier: Apache-2.0 */
/* pull: downloads an image from an OCI distribution (v2) registry into a spool OCI layout,
 * verifying every blob's sha256, then imports the layout (docs/templates.md "Pull"). */
#include "images.h"
#include "images-internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/imageref.h"
#include "../../common/util.h"

#define PULL_THREADS	 3	     /* layers downloaded at once */
#define PULL_MAX_TOKEN	 (64u << 10) /* cap on a token response */
#define PULL_MAX_ERRBODY 4096	     /* bytes of an error response kept for the message */

#define ACCEPT_MANIFESTS                                                                           \
	"Accept: application/vnd.oci.image.index.v1+json, "                                        \
	"application/vnd.oci.image.manifest.v1+json, "                                             \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                              \
	"application/vnd.docker.distribution.manifest.v2+json"

/* One blob to download (config or layer). */
struct pblob {
	char hex[65];	  /* sha256, hex */
	uint64_t size;	  /* bytes, from the manifest */
	const char *what; /* "config" or "layer" */
};

/* One pull. Threads share it: what they change is under lock. */
struct pull {
	const struct images_pull_opts *o; /* options (borrowed) */
	struct imageref ref;		  /* parsed reference */
	char ref_text[600];		  /* normalised reference, for messages */
	char scheme[8];			  /* "https" or "http" */
	char spool[PATH_MAX];		  /* templates/.pull-<hash>: an OCI layout being filled */
	pthread_mutex_t lock;		  /* guards auth, next, err_set, errors */
	char auth[8192];		  /* "Authorization: ..." header line, or "" */
	struct pblob *blobs;		  /* config + layers */
	size_t n_blobs, next;		  /* entries; next one a worker takes */
	images_progress_fn cb;		  /* progress (may be NULL) */
	void *ud;			  /* cb's argument */
	struct isola_err **err;		  /* the first failure of a worker goes here */
	bool failed;			  /* a worker failed: the others stop taking blobs */
	int first_r;			  /* -errno of that failure */
};

/* A response being received. */
struct resp {
	struct pull *p;			/* the pull (progress) */
	CURL *h;			/* the transfer (to read the status in callbacks) */
	char *body;			/* in-memory body (manifests, tokens), NUL-terminated */
	size_t len, max;		/* bytes in body, cap (0: body goes to fd) */
	int fd;				/* file the body is appended to (blobs), else -1 */
	struct sha256_ctx *hash;	/* hashed as written to fd */
	uint64_t got, limit;		/* bytes written to fd, cap */
	const char *phase;		/* progress phase */
	uint64_t last;			/* got at the last progress call */
	int werr;			/* -errno of a failed write, -EFBIG past a cap */
	bool resumed;			/* fd held a partial blob when the request went out */
	char www_auth[1024];		/* WWW-Authenticate of the last response */
	char ctype[128];		/* Content-Type of the last response */
	char errbody[PULL_MAX_ERRBODY]; /* start of a non-2xx body */
	size_t errlen;			/* bytes in errbody */
};

static long status_of(struct resp *rs)
{
	long st = 0;

	curl_easy_getinfo(rs->h, CURLINFO_RESPONSE_CODE, &st);
	return st;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
	struct resp *rs = ud;
	size_t len = size * n, k;
	char line[1024];

	/* UNTRUSTED: registry headers; copied bounded, parsed by parse_challenge(). */
	k = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
	memcpy(line, buf, k);
	line[k] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "HTTP/", 5)) { /* a new response (redirect, retry) */
		rs->www_auth[0] = rs->ctype[0] = '\0';
	} else if (!strncasecmp(line, "WWW-Authenticate:", 17)) {
		snprintf(rs->www_auth, sizeof(rs->www_auth), "%s",
			 line + 17 + strspn(line + 17, " "));
	} else if (!strncasecmp(line, "Content-Type:", 13)) {
		snprintf(rs->ctype, sizeof(rs->ctype), "%s", line + 13 + strspn(line + 13, " "));
		rs->ctype[strcspn(rs->ctype, "; ")] = '\0';
	}
	return len;
}

static size_t on_data(char *buf, size_t size, size_t n, void *ud)
{
	struct resp *rs = ud;
	size_t len = size * n;
	long st = status_of(rs);
	int r;

	if (st != 200 && st != 206) {
		size_t k = len < sizeof(rs->errbody) - 1 - rs->errlen
				   ? len
				   : sizeof(rs->errbody) - 1 - rs->errlen;

		memcpy(rs->errbody + rs->errlen, buf, k);
		rs->errlen += k;
		rs->errbody[rs->errlen] = '\0';
		return len;
	}
	if (rs->fd < 0) {
		/* UNTRUSTED: capped before it grows; parsed as JSON by the caller. */
		if (len > rs->max - rs->len) {
			rs->werr = -EFBIG;
			return 0;
		}
		memcpy(rs->body + rs->len, buf, len);
		rs->len += len;
		rs->body[rs->len] = '\0';
		return len;
	}
	if (st == 200 && rs->resumed) {
		/* The registry ignored the Range request: start the file over. */
		rs->resumed = false;
		if (ftruncate(rs->fd, 0) < 0 || lseek(rs->fd, 0, SEEK_SET) < 0) {
			rs->werr = -errno;
			return 0;
		}
		sha256_init(rs->hash);
		rs->got = rs->last = 0;
	}
	/* UNTRUSTED: blob bytes; never more than the manifest's size, hashed as they land. */
	if (len > rs->limit - rs->got) {
		rs->werr = -EFBIG;
		return 0;
	}
	r = util_write_all(rs->fd, buf, len);
	if (r < 0) {
		rs->werr = r;
		return 0;
	}
	sha256_update(rs->hash, len, (const uint8_t *)buf);
	rs->got += len;
	if (rs->p->cb && rs->got - rs->last >= (1u << 20)) {
		rs->last = rs->got;
		rs->p->cb(rs->p->ud, rs->phase, rs->got, rs->limit);
	}
	return len;
}

/* The curl handle's common options. */
static CURL *handle(struct pull *p, struct resp *rs, const char *url, struct curl_slist *hdrs,
		    char *errbuf)
{
	CURL *h = curl_easy_init();

	if (!h)
		return NULL;
	rs->h = h;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	/* Blob GETs redirect to storage; curl drops the Authorization header on another host. */
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 120L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "isola");
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024); /* fewer, larger writes */
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, rs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, rs);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (p->o->ca_pem && *p->o->ca_pem) {
		struct curl_blob b = {.data = (void *)p->o->ca_pem,
				      .len = strlen(p->o->ca_pem),
				      .flags = CURL_BLOB_COPY};

		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	}
	return h;
}

/* Fetches a bearer token for the challenge into p->auth. */
static int fetch_token(struct pull *p, const char *realm, const char *service, const char *scope,
		       struct isola_err **err)
{
	char url[2048], errbuf[CURL_ERROR_SIZE] = "", body[PULL_MAX_TOKEN + 1];
	struct resp rs = {.p = p, .body = body, .max = PULL_MAX_TOKEN, .fd = -1};
	char *es = NULL, *esc = NULL;
	const char *tok;
	json_t *j;
	CURL *h;
	CURLcode cc;
	long st;
	int r;

	/* The credentials go to the realm (as docker sends them): never in clear text when the
	 * registry itself is spoken to over https. */
	if (strncmp(realm, "https://", 8) &&
	    (strncmp(realm, "http://", 7) || !strcmp(p->scheme, "https")))
		return isola_err_set(err, EBADMSG, "invalid",
				     "registry `%s`: token realm `%.200s` is not an https URL",
				     p->ref.registry, realm);
	es = curl_easy_escape(NULL, service, 0);
	esc = curl_easy_escape(NULL, scope, 0);
	snprintf(url, sizeof(url), "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
		 es ? es : "", esc ? esc : "");
	curl_free(es);
	curl_free(esc);
	body[0] = '\0';
	h = handle(p, &rs, url, NULL, errbuf);
	if (!h)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	if (p->o->username && *p->o->username) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, p->o->username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, p->o->password ? p->o->password : "");
	}
	cc = curl_easy_perform(h);
	st = status_of(&rs);
	curl_easy_cleanup(h);
	if (cc != CURLE_OK)
		return isola_err_set(err, EIO, "unavailable",
				     "registry `%s`: token from `%.200s`: %s", p->ref.registry,
				     realm, errbuf[0] ? errbuf : curl_easy_strerror(cc));
	if (st == 401 || st == 403)
		return isola_err_set(
			err, EACCES, "forbidden",
			"registry `%s` refused the credentials%s (HTTP %ld)", p->ref.registry,
			p->o->username ? "" : " (none given: --username, or docker login)", st);
	if (st != 200)
		return isola_err_set(err, EIO, "unavailable",
				     "registry `%s`: token endpoint answered HTTP %ld",
				     p->ref.registry, st);
	/* UNTRUSTED: the token response; only a string is taken from it. */
	j = json_loadb(body, rs.len, 0, NULL);
	tok = json_string_value(json_object_get(j, "token"));
	if (!tok)
		tok = json_string_value(json_object_get(j, "access_token"));
	r = 0;
	if (!tok || strlen(tok) + 32 > sizeof(p->auth) || strpbrk(tok, "\r\n"))
		r = isola_err_set(err, EBADMSG, "invalid",
				  "registry `%s`: token response without a usable token",
				  p->ref.registry);
	else
		snprintf(p->auth, sizeof(p->auth), "Authorization: Bearer %s", tok);
	json_decref(j);
	return r;
}

/* Answers a 401: sets p->auth from the challenge (Bearer: a token; Basic: the credentials). */
static int authenticate(struct pull *p, const char *www_auth, struct isola_err **err)
{
	char scheme[32], realm[1024], service[256], scope[512];

	if (imageref_parse_challenge(www_auth, scheme, sizeof(scheme), realm, sizeof(realm),
				     service, sizeof(service), scope, sizeof(scope)) < 0)
		return isola_err_set(err, EACCES, "forbidden",
				     "registry `%s` asks for authentication without a usable "
				     "WWW-Authenticate header",
				     p->ref.registry);
	if (!strcasecmp(scheme, "Bearer")) {
		char want[512];

		/* Our own scope, whatever the challenge names: a hostile challenge cannot widen
		 * what the caller's credentials are asked to grant (push, another repository). */
		snprintf(want, sizeof(want), "repository:%s:pull", p->ref.repo);
		return fetch_token(p, realm, service, want, err);
	}
	if (!strcasecmp(scheme, "Basic")) {
		char cred[1024], b64[1400];

		if (!p->o->username || !*p->o->username)
			return isola_err_set(err, EACCES, "forbidden",
					     "registry `%s` asks for a username and password "
					     "(--username, --password-stdin, or docker login)",
					     p->ref.registry);
		if (snprintf(cred, sizeof(cred), "%s:%s", p->o->username,
			     p->o->password ? p->o->password : "") >= (int)sizeof(cred))
			return isola_err_set(err, EINVAL, "invalid", "credentials too long");
		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)cred, strlen(cred),
				  sodium_base64_VARIANT_ORIGINAL);
		sodium_memzero(cred, sizeof(cred));
		snprintf(p->auth, sizeof(p->auth), "Authorization: Basic %s", b64);
		return 0;
	}
	return isola_err_set(err, EACCES, "forbidden",
			     "registry `%s` asks for `%s` authentication, which isola does not "
			     "speak (Bearer, Basic)",
			     p->ref.registry, scheme);
}

/*
 * GET <scheme>://<api_host>/v2/<repo>/<kind>/<ref> into rs, answering one 401 with
 * authenticate(). extra is a header line or NULL. 0 with the HTTP status in *status, or
 * -errno with *err set for transport failures.
 */
static int get(struct pull *p, const char *kind, const char *what, const char *extra,
	       struct resp *rs, long *status, struct isola_err **err)
{
	for (int attempt = 0;; attempt++) {
		char url[1024], errbuf[CURL_ERROR_SIZE] = "", auth[sizeof(p->auth)];
		char auth_used[sizeof(p->auth)];
		int r;
		struct curl_slist *hdrs = NULL;
		CURL *h;
		CURLcode cc;
		off_t start = rs->fd >= 0 ? lseek(rs->fd, 0, SEEK_CUR) : 0;

		pthread_mutex_lock(&p->lock);
		snprintf(auth, sizeof(auth), "%s", p->auth);
		pthread_mutex_unlock(&p->lock);
		snprintf(url, sizeof(url), "%s://%s/v2/%s/%s/%s", p->scheme, p->ref.api_host,
			 p->ref.repo, kind, what);
		if (auth[0])
			hdrs = curl_slist_append(hdrs, auth);
		if (extra)
			hdrs = curl_slist_append(hdrs, extra);
		rs->errlen = 0;
		rs->errbody[0] = '\0';
		h = handle(p, rs, url, hdrs, errbuf);
		if (!h) {
			curl_slist_free_all(hdrs);
			return isola_err_set(err, ENOMEM, "internal", "out of memory");
		}
		cc = curl_easy_perform(h);
		*status = status_of(rs);
		curl_easy_cleanup(h);
		curl_slist_free_all(hdrs);
		memcpy(auth_used, auth, sizeof(auth));
		sodium_memzero(auth, sizeof(auth));
		/* An https attempt at a plain-HTTP registry fails in the TLS handshake. Loopback
		 * registries may be plain HTTP (as docker treats them); others need plain_http. */
		if (cc == CURLE_SSL_CONNECT_ERROR && !strcmp(p->scheme, "https") && attempt == 0 &&
		    !strcmp(kind, "manifests") && imageref_host_is_loopback(p->ref.api_host)) {
			/* only the first manifest request, before the download threads read it */
			snprintf(p->scheme, sizeof(p->scheme), "http");
			continue;
		}
		if (cc == CURLE_SSL_CONNECT_ERROR && !strcmp(p->scheme, "https"))
			return isola_err_set(err, EPROTO, "invalid",
					     "registry `%s` does not speak https (%s): pull with "
					     "--plain-http (`plain_http`) to use plain HTTP",
					     p->ref.registry,
					     errbuf[0] ? errbuf : curl_easy_strerror(cc));
		if (cc == CURLE_PEER_FAILED_VERIFICATION)
			return isola_err_set(
				err, EPROTO, "invalid",
				"registry `%s`: TLS certificate not trusted (%s): pass "
				"its CA with --ca-file",
				p->ref.registry, errbuf[0] ? errbuf : curl_easy_strerror(cc));
		if (rs->werr == -EFBIG)
			return isola_err_set(err, EFBIG, "too_large",
					     "registry `%s`: %s `%.80s` larger than expected",
					     p->ref.registry, kind, what);
		if (rs->werr < 0)
			return isola_err_sys(err, -rs->werr, NULL, "write %s `%.80s`", kind, what);
		if (cc != CURLE_OK)
			return isola_err_set(err, EIO, "unavailable", "registry `%s`: %s",
					     p->ref.registry,
					     errbuf[0] ? errbuf : curl_easy_strerror(cc));
		if (*status != 401 || attempt >= 2)
			return 0;
		/* Under the lock: one worker fetches the token, the others then reuse it. */
		pthread_mutex_lock(&p->lock);
		r = strcmp(auth_used, p->auth) ? 0 : authenticate(p, rs->www_auth, err);
		pthread_mutex_unlock(&p->lock);
		if (r < 0)
			return r;
		/* The 401's body went to errbody; a blob file is where it was. */
		if (rs->fd >= 0 && lseek(rs->fd, start, SEEK_SET) < 0)
			return isola_err_sys(err, errno, NULL, "seek");
		rs->len = 0;
	}
}

static void sha_hex(const void *buf, size_t len, char hex[65])
{
	unsigned char md[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(md, buf, len);
	images_hex(md, sizeof(md), hex);
}

/* Writes a blob of the spool layout (manifest, index) atomically. */
static int spool_put(struct pull *p, const char *rel, const void *buf, size_t len,
		     struct isola_err **err)
{
	char path[PATH_MAX];

	if (images_path(path, "%s/%s", p->spool, rel) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "spool path too long");
	if (util_write_file_atomic(path, buf, len, 0600) < 0)
		return isola_err_sys(err, errno ? errno : EIO, NULL, "write `%s`", path);
	return 0;
}

/* Fetches a manifest (or index) by tag or digest into *out (heap, NUL-terminated), its
 * sha256 into hex, checked against `want` (hex) when given. */
static int fetch_manifest(struct pull *p, const char *what, const char *want, char **out,
			  size_t *len, char hex[65], struct isola_err **err)
{
	struct resp rs = {.p = p, .fd = -1, .max = IMAGES_MAX_JSON};
	long st = 0;
	int r;

	rs.body = malloc(IMAGES_MAX_JSON + 1);
	if (!rs.body)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	rs.body[0] = '\0';
	r = get(p, "manifests", what, ACCEPT_MANIFESTS, &rs, &st, err);
	if (r == 0 && (st == 404 || (st == 401 && !p->auth[0])))
		r = isola_err_set(err, ENOENT, "not_found",
				  "image `%s` not found in registry `%s`%s", p->ref_text,
				  p->ref.registry, st == 401 ? " (or it needs credentials)" : "");
	else if (r == 0 && (st == 401 || st == 403))
		r = isola_err_set(err, EACCES, "forbidden",
				  "registry `%s` refused access to `%s` (HTTP %ld)",
				  p->ref.registry, p->ref.repo, st);
	else if (r == 0 && st != 200)
		r = isola_err_set(err, EIO, "unavailable",
				  "registry `%s`: manifest `%s` answered HTTP %ld: %.200s",
				  p->ref.registry, what, st, rs.errbody);
	if (r < 0) {
		free(rs.body);
		return r;
	}
	sha_hex(rs.body, rs.len, hex);
	if (want && strcmp(want, hex)) {
		free(rs.body);
		return isola_err_set(err, EBADMSG, "invalid",
				     "manifest sha256:%.12s…: digest mismatch (the registry sent "
				     "sha256:%.12s…)",
				     want, hex);
	}
	*out = rs.body;
	*len = rs.len;
	return 0;
}

/* Whether the spool holds blob b complete from an earlier attempt: its size and its digest
 * match (hashed again here, as the import takes a spool blob's name for its digest). A file
 * that does not match is removed, and the blob is downloaded afresh. */
static bool kept_whole(const struct pblob *b, const char *final)
{
	cleanup_fd int fd = open(final, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct sha256_ctx hs;
	struct stat st;
	char hex[65];

	if (fd < 0)
		return false;
	sha256_init(&hs);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == b->size &&
	    images_sha256_fd(&hs, fd, b->size) == (int64_t)b->size) {
		images_sha256_hex(&hs, hex);
		if (!strcmp(hex, b->hex))
			return true;
	}
	unlink(final);
	return false;
}

/*
 * Downloads one blob into the spool, resuming a partial file, verifying its digest as the bytes
 * land (the only pass over them: the import trusts the names of the spool's blobs). A blob that
 * matches is renamed to its digest without an fsync: the spool is a cache that the import
 * consumes, and a blob a crash tore fails kept_whole() on the next attempt.
 */
static int download(struct pull *p, const struct pblob *b, struct isola_err **err)
{
	char final[PATH_MAX], part[PATH_MAX], phase[64], range[64], dg[80], hex[65];
	struct sha256_ctx hs;
	struct resp rs = {.p = p, .fd = -1};
	cleanup_fd int fd = -1;
	struct stat st;
	long status = 0;
	int64_t n;
	int r;

	snprintf(phase, sizeof(phase), "download sha256:%.12s", b->hex);
	snprintf(dg, sizeof(dg), "sha256:%s", b->hex);
	if (images_path(final, "%s/blobs/sha256/%s", p->spool, b->hex) < 0 ||
	    images_path(part, "%s.partial", final) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "spool path too long");
	if (kept_whole(b, final)) {
		if (p->cb)
			p->cb(p->ud, phase, b->size, b->size);
		return 0;
	}
	fd = open(part, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st) < 0)
		return isola_err_sys(err, errno, NULL, "open `%s`", part);
	sha256_init(&hs);
	rs.got = (uint64_t)st.st_size;
	if (rs.got > b->size) {
		if (ftruncate(fd, 0) < 0)
			return isola_err_sys(err, errno, NULL, "truncate `%s`", part);
		rs.got = 0;
	}
	/* Resume: hash what an earlier attempt kept, then ask for the rest. */
	n = images_sha256_fd(&hs, fd, rs.got);
	if (n < 0)
		return isola_err_sys(err, (int)-n, NULL, "read `%s`", part);
	rs.fd = fd;
	rs.hash = &hs;
	rs.limit = b->size;
	rs.phase = phase;
	rs.last = rs.got;
	rs.resumed = rs.got > 0;
	snprintf(range, sizeof(range), "Range: bytes=%llu-", (unsigned long long)rs.got);
	if (rs.got < b->size) {
		r = get(p, "blobs", dg, rs.got ? range : NULL, &rs, &status, err);
		if (r < 0)
			return r;
		if (status == 404)
			return isola_err_set(err, ENOENT, "not_found",
					     "%s %s of `%s`: not in registry `%s`", b->what, dg,
					     p->ref_text, p->ref.registry);
		if (status != 200 && status != 206)
			return isola_err_set(err, EIO, "unavailable",
					     "%s %s: registry `%s` answered HTTP %ld: %.200s",
					     b->what, dg, p->ref.registry, status, rs.errbody);
	}
	if (p->cb)
		p->cb(p->ud, phase, rs.got, b->size);
	if (rs.got != b->size)
		return isola_err_set(err, EIO, "unavailable",
				     "%s sha256:%.12s…: got %llu of %llu bytes (pull again to "
				     "resume)",
				     b->what, b->hex, (unsigned long long)rs.got,
				     (unsigned long long)b->size);
	images_sha256_hex(&hs, hex);
	if (strcmp(hex, b->hex)) {
		/* Bad bytes are not kept: the next attempt starts this blob over. */
		unlink(part);
		return isola_err_set(err, EBADMSG, "invalid",
				     "%s sha256:%.12s…: digest mismatch (the registry sent "
				     "sha256:%.12s…)",
				     b->what, b->hex, hex);
	}
	if (rename(part, final) < 0)
		return isola_err_sys(err, errno, NULL, "keep `%s`", final);
	return 0;
}

static void *worker(void *arg)
{
	struct pull *p = arg;

	for (;;) {
		struct isola_err *e = NULL;
		const struct pblob *b;
		int r;

		pthread_mutex_lock(&p->lock);
		b = !p->failed && p->next < p->n_blobs ? &p->blobs[p->next++] : NULL;
		pthread_mutex_unlock(&p->lock);
		if (!b)
			return NULL;
		/* Each download reports into its own error; the first failure is kept. */
		r = download(p, b, &e);
		if (r < 0) {
			pthread_mutex_lock(&p->lock);
			if (!p->failed) {
				p->failed = true;
				p->first_r = r;
				if (p->err && !*p->err)
					*p->err = steal_ptr(&e);
			}
			pthread_mutex_unlock(&p->lock);
		}
		isola_err_free(e);
	}
}

/* Reads a descriptor's sha256 hex and size; the blob kind names it in errors. */
static int read_desc(json_t *d, struct pblob *b, const char *what, struct isola_err **err)
{
	const char *dg = json_string_value(json_object_get(d, "digest"));
	json_t *sz = json_object_get(d, "size");

	/* UNTRUSTED: manifest descriptors; digest and size checked before use as names/caps. */
	if (!dg || strncmp(dg, "sha256:", 7) || strlen(dg) != 71 ||
	    strspn(dg + 7, "0123456789abcdef") != 64 || !json_is_integer(sz) ||
	    json_integer_value(sz) < 0)
		return isola_err_set(err, EBADMSG, "invalid",
				     "%s: bad descriptor (only sha256 digests are supported)",
				     what);
	memcpy(b->hex, dg + 7, 65);
	b->size = (uint64_t)json_integer_value(sz);
	b->what = what;
	return 0;
}

/* Fetches the manifest chain (index -> linux/<arch> manifest) into the spool and lists the
 * blobs to download. top_hex gets the digest of what the reference names. */
static int resolve(struct pull *p, char top_hex[65], struct isola_err **err)
{
	const char *want = p->ref.digest[0] ? p->ref.digest + 7 : NULL;
	const char *what = p->ref.digest[0] ? p->ref.digest : p->ref.tag;
	char hex[65], rel[96], *body = NULL, *index_text = NULL;
	json_t *doc = NULL, *layers, *chosen;
	size_t len = 0, i;
	int r;

	r = fetch_manifest(p, what, want, &body, &len, top_hex, err);
	if (r < 0)
		return r;
	memcpy(hex, top_hex, 65);
	for (int depth = 0;; depth++) {
		struct pblob d;

		snprintf(rel, sizeof(rel), "blobs/sha256/%s", hex);
		r = spool_put(p, rel, body, len, err);
		/* UNTRUSTED: registry JSON; capped at IMAGES_MAX_JSON, fields type-checked. */
		doc = r < 0 ? NULL : json_loadb(body, len, 0, NULL);
		free(body);
		body = NULL;
		if (r < 0)
			return r;
		if (!doc)
			return isola_err_set(err, EBADMSG, "invalid",
					     "manifest sha256:%.12s…: bad JSON", hex);
		if (!json_is_array(json_object_get(doc, "manifests")))
			break;
		if (depth == 3) {
			json_decref(doc);
			return isola_err_set(err, EBADMSG, "invalid", "index nested too deep");
		}
		chosen = images_index_pick(doc);
		if (!chosen) {
			json_decref(doc);
			return isola_err_set(err, ENOENT, "not_found",
					     "image `%s` has no linux/%s manifest in its index",
					     p->ref_text, images_host_arch());
		}
		r = read_desc(chosen, &d, "manifest", err);
		json_decref(doc);
		doc = NULL;
		if (r < 0)
			return r;
		memcpy(hex, d.hex, 65);
		snprintf(rel, sizeof(rel), "sha256:%s", hex);
		r = fetch_manifest(p, rel, hex, &body, &len, hex, err);
		if (r < 0)
			return r;
	}
	free(index_text);
	layers = json_object_get(doc, "layers");
	if (!json_is_array(layers) || json_array_size(layers) > IMAGES_MAX_LAYERS) {
		json_decref(doc);
		return isola_err_set(err, EBADMSG, "invalid", "manifest sha256:%.12s…: bad layers",
				     hex);
	}
	p->blobs = calloc(json_array_size(layers) + 1, sizeof(*p->blobs));
	if (!p->blobs) {
		json_decref(doc);
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	}
	r = read_desc(json_object_get(doc, "config"), &p->blobs[0], "config", err);
	p->n_blobs = r < 0 ? 0 : 1;
	for (i = 0; r == 0 && i < json_array_size(layers); i++) {
		struct pblob *b = &p->blobs[p->n_blobs];
		bool dup = false;

		r = read_desc(json_array_get(layers, i), b, "layer", err);
		for (size_t k = 0; r == 0 && k < p->n_blobs; k++)
			dup |= !strcmp(p->blobs[k].hex, b->hex);
		if (r == 0 && !dup)
			p->n_blobs++;
	}
	json_decref(doc);
	if (r == 0) {
		struct images_budget cap;
		uint64_t sum = 0;

		/* Declared sizes bound what is downloaded: the whole image within the import's
		 * unpacked-size cap, so a hostile manifest cannot fill the disk. */
		images_get_limits(&cap);
		for (i = 0; i < p->n_blobs; i++)
			sum += p->blobs[i].size > cap.max_bytes ? cap.max_bytes : p->blobs[i].size;
		for (i = 0; i < p->n_blobs; i++)
			if (p->blobs[i].size > cap.max_bytes || sum > cap.max_bytes)
				return isola_err_set(err, EFBIG, "too_large",
						     "image `%s`: %llu bytes of blobs, above the "
						     "%llu-byte cap",
						     p->ref_text, (unsigned long long)sum,
						     (unsigned long long)cap.max_bytes);
	}
	return r;
}

/* Writes the spool's oci-layout and index.json: an OCI layout of what the reference names. */
static int write_layout(struct pull *p, const char *top_hex, struct isola_err **err)
{
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	char path[PATH_MAX], *text;
	json_t *idx;
	struct stat st;
	int r;

	if (images_path(path, "%s/blobs/sha256/%s", p->spool, top_hex) < 0 || stat(path, &st) < 0)
		return isola_err_sys(err, errno, NULL, "spool manifest");
	idx = json_pack("{s:i,s:[{s:s,s:s#,s:I}]}", "schemaVersion", 2, "manifests", "mediaType",
			"application/vnd.oci.image.manifest.v1+json", "digest", "sha256:", 7,
			"size", (json_int_t)st.st_size);
	if (idx) {
		char dg[80];

		snprintf(dg, sizeof(dg), "sha256:%s", top_hex);
		json_object_set_new(json_array_get(json_object_get(idx, "manifests"), 0), "digest",
				    json_string(dg));
	}
	text = idx ? json_dumps(idx, JSON_COMPACT) : NULL;
	json_decref(idx);
	if (!text)
		return isola_err_set(err, ENOMEM, "internal", "out of memory");
	r = spool_put(p, "oci-layout", layout, strlen(layout), err);
	if (r == 0)
		r = spool_put(p, "index.json", text, strlen(text), err);
	free(text);
	return r;
}

/* Creates templates/.pull-<hash of name and reference>/blobs/sha256 (kept between attempts). */
static int make_spool(struct pull *p, const char *tdir, const char *name, struct isola_err **err)
{
	char key[700], hex[65], path[PATH_MAX];
	int r;

	snprintf(key, sizeof(key), "%s%c%s", name, '\0', p->ref_text);
	sha_hex(key, strlen(name) + 1 + strlen(p->ref_text), hex);
	if (images_path(p->spool, "%s/.pull-%.16s", tdir, hex) < 0 ||
	    images_path(path, "%s/blobs/sha256", p->spool) < 0)
		return isola_err_set(err, ENAMETOOLONG, "internal", "spool path too long");
	r = util_mkdir_p(path, 0700);
	if (r < 0)
		return isola_err_sys(err, -r, NULL, "create `%s`", path);
	return 0;
}

int images_pull(const char *name, const struct images_pull_opts *o, images_progress_fn cb, void *ud,
		struct template_info *out, struct isola_err **err)
{
	struct pull p = {.o = o, .cb = cb, .ud = ud, .err = err};
	pthread_t th[PULL_THREADS];
	char tdir[PATH_MAX], top_hex[65], origin[sizeof(((struct template_info *)0)->origin)];
	unsigned n_th = 0;
	int r;

	if (!o->ref || imageref_parse(o->ref, &p.ref) < 0)
		return isola_err_set(err, EINVAL, "invalid",
				     "`%.200s` is not an image reference "
				     "([registry/]repository[:tag][@sha256:hex])",
				     o->ref ? o->ref : "");
	imageref_format(&p.ref, p.ref_text, sizeof(p.ref_text));
	snprintf(p.scheme, sizeof(p.scheme), "%s", o->plain_http ? "http" : "https");
	r = images_reserve(name, tdir, err);
	if (r < 0)
		return r;
	pthread_mutex_init(&p.lock, NULL);
	r = make_spool(&p, tdir, name, err);
	if (r == 0 && cb)
		cb(ud, "manifest", 0, 0);
	if (r == 0)
		r = resolve(&p, top_hex, err);
	if (r == 0)
		r = write_layout(&p, top_hex, err);
	if (r < 0) {
		/* nothing downloaded yet: no spool worth keeping */
		if (p.spool[0])
			util_rm_rf(p.spool);
		goto fail;
	}
	for (; n_th < PULL_THREADS && n_th < p.n_blobs; n_th++)
		if (pthread_create(&th[n_th], NULL, worker, &p) != 0)
			break;
	if (n_th == 0)
		worker(&p);
	for (unsigned i = 0; i < n_th; i++)
		pthread_join(th[i], NULL);
	if (p.failed) {
		r = p.first_r; /* the spool is kept: a retry resumes each blob */
		goto fail;
	}
	if (snprintf(origin, sizeof(origin), "%s/%s%s%s@sha256:%s", p.ref.registry, p.ref.repo,
		     p.ref.tag[0] ? ":" : "", p.ref.tag, top_hex) >= (int)sizeof(origin))
		origin[0] = '\0'; /* cannot happen: origin is sized for the longest reference */
	r = images_import_dir(name, p.spool, "pull", origin, cb, ud, out, err);
	util_rm_rf(p.spool); /* verified blobs of a refused image are not worth keeping */
	free(p.blobs);
	pthread_mutex_destroy(&p.lock);
	if (r < 0)
		isola_err_wrap(err, "pull `%s`", p.ref_text);
	return r;
fail:
	images_unreserve(name);
	free(p.blobs);
	pthread_mutex_destroy(&p.lock);
	isola_err_wrap(err, "pull `%s`", p.ref_text);
	return r;
}

void images_ref_template_name(const char *ref, char *out, size_t n)
{
	char name[64];
	size_t k = 0;

	/* [a-z0-9._-] of the reference, others as '-': "127.0.0.1:5000/e2b/hello:1" ->
	 * "127.0.0.1-5000-e2b-hello-1"; a long one keeps 50 bytes and a hash of the whole. */
	for (const char *c = ref; *c && k < sizeof(name) - 1; c++) {
		char ch = *c >= 'A' && *c <= 'Z' ? (char)(*c - 'A' + 'a') : *c;

		name[k++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
					    ch == '_' || ch == '-'
				    ? ch
				    : '-';
	}
	name[k] = '\0';
	if (strlen(ref) > 63 || name[0] == '.' || name[0] == '-') {
		unsigned char h[32];
		char hx[25];

		crypto_hash_sha256(h, (const unsigned char *)ref, strlen(ref));
		sodium_bin2hex(hx, sizeof(hx), h, 12);
		snprintf(out, n, "img-%.34s-%s", name, hx);
		return;
	}
	snprintf(out, n, "%s", name);
}
