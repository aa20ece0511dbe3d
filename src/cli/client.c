/* SPDX-License-Identifier: Apache-2.0 */
/* client: HTTP to isolad over its unix socket or TCP (libcurl), JSON and NDJSON streaming. */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

#define CLIENT_MAX_ERROR_BODY (64u * 1024u)	    /* an error reply is small */
#define CLIENT_MAX_JSON_BODY  (64u * 1024u * 1024u) /* a whole JSON reply (sandbox lists) */
#define CLIENT_MAX_LINE	      (16u * 1024u * 1024u) /* one NDJSON event */

struct client {
	struct client_conf conf; /* borrowed strings */
	CURL *curl;		 /* reused so the connection stays open between requests */
	char *base;		 /* "http://localhost" or the URL without a trailing slash */
};

static volatile sig_atomic_t *cancel_flag;

/* State of one transfer, shared by the curl callbacks. */
struct xfer {
	const struct client_req *req; /* the request being performed */
	CURL *curl;		      /* its handle, for the status code */
	char *buf;		  /* accumulated body: error reply, JSON reply or a partial line */
	size_t len;		  /* bytes in buf */
	size_t cap;		  /* bytes allocated */
	struct isola_err *cb_err; /* error set by a callback; aborts the transfer */
	bool is_error;		  /* the reply status is not 2xx */
	bool status_known;	  /* is_error has been decided */
};

void client_set_cancel_flag(volatile sig_atomic_t *flag)
{
	cancel_flag = flag;
}

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

static int buf_append(struct xfer *x, const char *p, size_t n, size_t max)
{
	if (x->len + n > max)
		return -EFBIG;
	if (x->len + n + 1 > x->cap) {
		size_t cap = (x->len + n + 1) * 2;
		char *nb;

		if (cap > max + 1)
			cap = max + 1;
		nb = realloc(x->buf, cap);
		if (!nb)
			return -ENOMEM;
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return 0;
}

/* Hands one complete NDJSON line to on_event. */
static int emit_line(struct xfer *x, const char *line, size_t n)
{
	json_error_t jerr;
	json_t *ev;
	int r;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' '))
		n--;
	if (n == 0)
		return 0;
	/* UNTRUSTED: daemon reply; only objects reach the command's handler. */
	ev = json_loadb(line, n, 0, &jerr);
	if (!json_is_object(ev)) {
		json_decref(ev);
		return isola_err_set(&x->cb_err, EPROTO, "internal",
				     "isolad sent a malformed event: %s", jerr.text);
	}
	r = x->req->on_event(x->req->ud, ev, &x->cb_err);
	json_decref(ev);
	return r;
}

static int feed_lines(struct xfer *x, const char *p, size_t n)
{
	const char *nl;
	int r;

	while ((nl = memchr(p, '\n', n))) {
		size_t k = (size_t)(nl - p);

		if (x->len) {
			r = buf_append(x, p, k, CLIENT_MAX_LINE);
			if (r == 0)
				r = emit_line(x, x->buf, x->len);
			x->len = 0;
		} else {
			r = emit_line(x, p, k);
		}
		if (r < 0)
			return r;
		p = nl + 1;
		n -= k + 1;
	}
	if (n && buf_append(x, p, n, CLIENT_MAX_LINE) < 0)
		return isola_err_set(&x->cb_err, EFBIG, "too_large",
				     "isolad sent an event over %u bytes", CLIENT_MAX_LINE);
	return 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	int r = 0;

	if (!x->status_known) {
		long status = 0;

		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
		x->is_error = status < 200 || status >= 300;
		x->status_known = true;
	}
	if (x->is_error) {
		/* Keep the start of an error body; the rest is not needed for the message. */
		if (x->len < CLIENT_MAX_ERROR_BODY)
			buf_append(x, p,
				   n < CLIENT_MAX_ERROR_BODY - x->len
					   ? n
					   : CLIENT_MAX_ERROR_BODY - x->len,
				   CLIENT_MAX_ERROR_BODY);
		return n;
	}
	if (x->req->on_data)
		r = x->req->on_data(x->req->ud, p, n, &x->cb_err);
	else if (x->req->on_event)
		r = feed_lines(x, p, n);
	else if (x->req->out && buf_append(x, p, n, CLIENT_MAX_JSON_BODY) < 0)
		r = isola_err_set(&x->cb_err, EFBIG, "too_large", "reply from isolad is too large");
	return r < 0 ? 0 : n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	ssize_t n;

	do
		n = read(x->req->body_fd, p, size * nmemb);
	while (n < 0 && errno == EINTR && !(cancel_flag && *cancel_flag));
	if (n < 0) {
		isola_err_sys(&x->cb_err, errno, NULL, "read request body");
		return CURL_READFUNC_ABORT;
	}
	return (size_t)n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct xfer *x = ud;

	if (cancel_flag && *cancel_flag)
		return 1;
	if (x->req->on_upload && (ulnow || ultotal))
		x->req->on_upload(x->req->ud, (uint64_t)ulnow, (uint64_t)ultotal);
	return 0;
}

/* Builds the error for a non-2xx reply from the API's {code, message}. */
static int reply_error(struct xfer *x, long status, struct isola_err **err)
{
	json_t *body = x->buf ? json_loadb(x->buf, x->len, 0, NULL) : NULL;
	json_t *e = body;
	const char *code, *msg;
	int r;

	/* UNTRUSTED: the reply is only read as two strings. */
	if (json_is_object(json_object_get(body, "error")))
		e = json_object_get(body, "error");
	code = json_string_value(json_object_get(e, "code"));
	msg = json_string_value(json_object_get(e, "message"));
	if (msg)
		r = isola_err_set(err, status == 404 ? ENOENT : EIO, code ? code : "internal", "%s",
				  msg);
	else
		r = isola_err_set(err, EIO, "internal", "isolad replied HTTP %ld to %s %s", status,
				  x->req->method, x->req->path);
	json_decref(body);
	return r;
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
	curl_easy_setopt(h, CURLOPT_USERAGENT, "isola-cli/" ISOLA_VERSION);
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

/* Why a unix socket refused us, as advice (static text; "" when nothing is known). */
static const char *connect_hint(const struct client *c)
{
	if (c->conf.url || !c->conf.socket)
		return "";
	if (access(c->conf.socket, R_OK | W_OK) == 0)
		return "; is isolad running? (systemctl status isolad)";
	if (errno == EACCES)
		return "; permission denied: add yourself to group isola "
		       "(sudo usermod -aG isola $USER, then log in again)";
	if (errno == ENOENT)
		return "; no socket there: is isolad running? (systemctl status isolad)";
	return "";
}

int client_do(struct client *c, const struct client_req *r, struct isola_err **err)
{
	struct xfer x = {.req = r, .curl = c->curl};
	struct curl_slist *hdrs = NULL;
	char *url = NULL, *json = NULL;
	long status = 0;
	CURLcode cr;
	int ret = 0;

	setup(c, r, &x, &hdrs, &url, &json);
	cr = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (x.cb_err) {
		ret = -x.cb_err->errnum;
		if (err && !*err)
			*err = steal_ptr(&x.cb_err);
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
			cr == CURLE_COULDNT_CONNECT ? connect_hint(c) : "");
	} else if (status < 200 || status >= 300) {
		ret = reply_error(&x, status, err);
	} else if (r->on_event && x.len) {
		/* The last event may lack its newline. */
		if (emit_line(&x, x.buf, x.len) < 0) {
			ret = -x.cb_err->errnum;
			if (err && !*err)
				*err = steal_ptr(&x.cb_err);
		}
	} else if (r->out) {
		json_error_t jerr;

		*r->out = NULL;
		/* UNTRUSTED: the reply is parsed here and read field by field by the commands. */
		if (x.len && !(*r->out = json_loadb(x.buf, x.len, 0, &jerr)))
			ret = isola_err_set(err, EPROTO, "internal",
					    "isolad sent malformed JSON: %s", jerr.text);
	}
	isola_err_free(x.cb_err);
	curl_slist_free_all(hdrs);
	free(x.buf);
	free(json);
	free(url);
	return ret;
}

int client_json(struct client *c, const char *method, const char *path, const json_t *body,
		json_t **out, struct isola_err **err)
{
	struct client_req r = {
		.method = method,
		.path = path,
		.body = body,
		.body_fd = -1,
		.accept = "application/json",
		.out = out,
	};

	if (out)
		*out = NULL;
	return client_do(c, &r, err);
}
