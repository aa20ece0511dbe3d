/* SPDX-License-Identifier: Apache-2.0 */
/* client: HTTP to isolad over its unix socket or TCP (libcurl), JSON and NDJSON streaming. */
#include "client.h"
#include "client-internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

struct client {
	struct client_conf conf; /* borrowed strings */
	CURL *curl;		 /* reused so the connection stays open between requests */
	char *base;		 /* "http://localhost" or the URL without a trailing slash */
};

/* State of one transfer, shared by the curl callbacks. */
struct xfer {
	struct client_xfer x; /* the reply (client_reply.c) */
	CURL *curl;	      /* its handle, for the status code */
	bool status_known;    /* x.is_error has been decided */
};

int client_new(const struct client_conf *conf, struct client **out, struct isola_err **err)
{
	struct client *c;
	static bool global_init;

	if (!global_init) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return isola_err_set(err, EIO, "internal", "cannot initialise libcurl");
		global_init = true;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	c->conf = *conf;
	c->curl = curl_easy_init();
	if (conf->url) {
		size_t n = strlen(conf->url);

		while (n > 0 && conf->url[n - 1] == '/')
			n--;
		c->base = strndup(conf->url, n);
	} else {
		c->base = strdup("http://localhost");
	}
	if (!c->curl || !c->base) {
		client_free(c);
		return isola_err_set(err, ENOMEM, NULL, "out of memory");
	}
	*out = c;
	return 0;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c);
}

const struct client_conf *client_conf(const struct client *c)
{
	return &c->conf;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;

	if (!x->status_known) {
		long status = 0;

		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
		x->x.is_error = status < 200 || status >= 300;
		x->status_known = true;
	}
	return client_xfer_body(&x->x, p, n) < 0 ? 0 : n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	ssize_t n;

	do
		n = read(x->x.req->body_fd, p, size * nmemb);
	while (n < 0 && errno == EINTR && !(client_cancelled()));
	if (n < 0) {
		isola_err_sys(&x->x.cb_err, errno, NULL, "read request body");
		return CURL_READFUNC_ABORT;
	}
	return (size_t)n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = ud;

	if (client_cancelled())
		return 1;
	if (x->x.req->on_upload && (ulnow || ultotal))
		x->x.req->on_upload(x->x.req->ud, (uint64_t)ulnow, (uint64_t)ultotal);
	return 0;
}

static void setup(struct client *c, const struct client_req *r, struct xfer *x,
		  struct curl_slist **hdrs, char **url, char **json)
{
	CURL *h = c->curl;
	char line[512];

	curl_easy_reset(h);
	if (asprintf(url, "%s%s", c->base, r->path) < 0)
		*url = NULL;
	curl_easy_setopt(h, CURLOPT_URL, *url);
	if (!c->conf.url)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->conf.socket);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, CLIENT_USER_AGENT);
	/* No "Expect: 100-continue" round trip before uploads. */
	*hdrs = curl_slist_append(*hdrs, "Expect:");
	if (c->conf.token) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", c->conf.token);
		*hdrs = curl_slist_append(*hdrs, line);
	}
	if (r->accept) {
		snprintf(line, sizeof(line), "Accept: %s", r->accept);
		*hdrs = curl_slist_append(*hdrs, line);
	}
	if (r->body) {
		*json = json_dumps(r->body, JSON_COMPACT);
		*hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, *json ? *json : "");
	} else if (r->body_fd >= 0) {
		snprintf(line, sizeof(line), "Content-Type: %s",
			 r->content_type ? r->content_type : "application/octet-stream");
		*hdrs = curl_slist_append(*hdrs, line);
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		if (r->body_size >= 0)
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_size);
	}
	if (strcmp(r->method, "GET"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	if (!r->body && r->body_fd < 0 && !strcmp(r->method, "POST")) {
		/* An empty POST: curl must still send Content-Length: 0. */
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
}

int client_do(struct client *c, const struct client_req *r, struct isola_err **err)
{
	struct xfer x = {.x = {.req = r}, .curl = c->curl};
	struct curl_slist *hdrs = NULL;
	char *url = NULL, *json = NULL;
	long status = 0;
	CURLcode cr;
	int ret = 0;

	setup(c, r, &x, &hdrs, &url, &json);
	cr = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (x.x.cb_err) {
		ret = -x.x.cb_err->errnum;
		if (err && !*err)
			*err = steal_ptr(&x.x.cb_err);
	} else if (cr == CURLE_ABORTED_BY_CALLBACK) {
		ret = isola_err_set(err, ECANCELED, "cancelled", "interrupted");
	} else if (cr != CURLE_OK && status >= 200 && status < 300) {
		curl_off_t got = 0;

		/* The headers said success, then the body stopped short (isolad cuts a stream it
		 * cannot finish: no chunked terminator, or less than Content-Length). */
		curl_easy_getinfo(c->curl, CURLINFO_SIZE_DOWNLOAD_T, &got);
		ret = isola_err_set(err, EPIPE, "unavailable",
				    "isolad broke off the reply to %s %s after %lld bytes (%s); "
				    "isolad's log names the cause",
				    r->method, r->path, (long long)got, curl_easy_strerror(cr));
	} else if (cr != CURLE_OK) {
		ret = isola_err_set(
			err, ECONNREFUSED, "unavailable", "cannot reach isolad at %s: %s%s",
			c->conf.url ? c->conf.url : c->conf.socket, curl_easy_strerror(cr),
			cr == CURLE_COULDNT_CONNECT ? client_connect_hint(&c->conf) : "");
	} else {
		ret = client_xfer_finish(&x.x, status, err);
	}
	client_xfer_fini(&x.x);
	curl_slist_free_all(hdrs);
	free(json);
	free(url);
	return ret;
}
