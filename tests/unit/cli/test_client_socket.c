/* SPDX-License-Identifier: Apache-2.0 */
/* test_client_socket: client.h without libcurl (isola-runc's transport) against a scripted
 * HTTP server on a unix socket: the request it writes, and replies framed by length, by
 * chunks and by close, API errors, NDJSON events, bodies cut short and malformed heads. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../tap.h"
#include "cli/client.h"

/* One scripted exchange: the server reads the request, then writes `reply` and closes. */
struct server {
	int listen_fd;
	const char *reply;
	char request[8192]; /* what the client sent (head and body) */
	size_t request_len;
};

/* True once the request in buf is complete: its head, then Content-Length bytes or the
 * last chunk. */
static int request_complete(const char *buf, size_t len)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4), *cl;

	if (!end)
		return 0;
	if ((cl = strcasestr(buf, "Content-Length: ")) && cl < end)
		return len >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
	if (strcasestr(buf, "Transfer-Encoding: chunked"))
		return memmem(end + 4, len - (size_t)(end + 4 - buf), "0\r\n\r\n", 5) != NULL;
	return 1;
}

static void *serve(void *arg)
{
	struct server *s = arg;
	int fd = accept(s->listen_fd, NULL, NULL);

	s->request_len = 0;
	while (fd >= 0 && !request_complete(s->request, s->request_len)) {
		ssize_t n = read(fd, s->request + s->request_len,
				 sizeof(s->request) - 1 - s->request_len);

		if (n <= 0)
			break;
		s->request_len += (size_t)n;
		s->request[s->request_len] = '\0';
	}
	if (fd >= 0) {
		if (write(fd, s->reply, strlen(s->reply)) < 0) {
		}
		close(fd);
	}
	return NULL;
}

/* Runs one request against the scripted reply. */
static int exchange(struct client *c, struct server *s, const char *reply,
		    const struct client_req *r, struct isola_err **err)
{
	pthread_t t;
	int ret;

	s->reply = reply;
	memset(s->request, 0, sizeof(s->request));
	pthread_create(&t, NULL, serve, s);
	ret = client_do(c, r, err);
	pthread_join(t, NULL);
	return ret;
}

static int events;
static char last_event[64];

static int on_event(void *ud, json_t *ev, struct isola_err **err)
{
	(void)ud;
	(void)err;
	events++;
	snprintf(last_event, sizeof(last_event), "%s", json_string_value(json_object_get(ev, "t")));
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/isola-test-client-XXXXXX", path[96];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct server s = {0};
	struct client *c = NULL;
	struct client_conf conf = {0};
	struct isola_err *err = NULL;
	json_t *out = NULL, *body;
	int p[2];

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	s.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (bind(s.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s.listen_fd, 4) < 0)
		return 1;
	conf.socket = path;
	conf.token = "tok";
	ok(client_new(&conf, &c, &err) == 0, "a client for a unix socket");

	/* A JSON request and a reply framed by Content-Length. */
	body = json_pack("{s:s}", "a", "b");
	ok(exchange(c, &s,
		    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
		    "Content-Length: 11\r\n\r\n{\"id\":\"x1\"}",
		    &(struct client_req){.method = "POST",
					 .path = "/v1/sandboxes",
					 .body = body,
					 .body_fd = -1,
					 .accept = "application/json",
					 .out = &out},
		    &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(out, "id")), "x1"),
	   "a 201 with a length-framed JSON body is parsed");
	ok(!strncmp(s.request, "POST /v1/sandboxes HTTP/1.1\r\n", 29) &&
		   strstr(s.request, "\r\nAuthorization: Bearer tok\r\n") &&
		   strstr(s.request, "\r\nContent-Type: application/json\r\n") &&
		   strstr(s.request, "\r\nContent-Length: 9\r\n") &&
		   strstr(s.request, "\r\n\r\n{\"a\":\"b\"}"),
	   "the request carries method, path, token, type, length and body");
	json_decref(body);
	json_decref(out);
	out = NULL;

	/* NDJSON events in chunks, the last line without its newline. */
	events = 0;
	ok(exchange(c, &s,
		    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "9\r\n{\"t\":\"a\"}\r\n"
		    "4\r\n\n{\"t\r\n5\r\n\":\"b\"\r\n1\r\n}\r\n0\r\n\r\n",
		    &(struct client_req){.method = "GET",
					 .path = "/v1/x?follow=true",
					 .body_fd = -1,
					 .on_event = on_event},
		    &err) == 0 &&
		   events == 2 && !strcmp(last_event, "b"),
	   "chunked NDJSON: a line split across chunks arrives whole, the last one too");
	ok(!strstr(s.request, "Content-Length"), "a GET sends no body length");

	/* An API error reply. */
	ok(exchange(c, &s,
		    "HTTP/1.1 404 Not Found\r\nContent-Length: 44\r\n\r\n"
		    "{\"code\":\"not_found\",\"message\":\"no such x\"}  ",
		    &(struct client_req){.method = "DELETE", .path = "/v1/x", .body_fd = -1},
		    &err) == -ENOENT &&
		   err && !strcmp(err->code, "not_found") && !strcmp(err->message, "no such x"),
	   "a 404 becomes the API's code and message");
	isola_err_free(err);
	err = NULL;

	/* A body cut short: fewer bytes than its length. */
	ok(exchange(c, &s, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"id\":",
		    &(struct client_req){
			    .method = "GET", .path = "/v1/y", .body_fd = -1, .out = &out},
		    &err) < 0 &&
		   err && !strcmp(err->code, "unavailable") && strstr(err->message, "broke off"),
	   "a reply shorter than its length is an error, not a truncated success");
	isola_err_free(err);
	err = NULL;

	/* A malformed head. */
	ok(exchange(c, &s, "HTTP/2 200\r\n\r\n",
		    &(struct client_req){.method = "GET", .path = "/v1/y", .body_fd = -1},
		    &err) == -EPROTO &&
		   err && strstr(err->message, "malformed reply head"),
	   "a malformed reply head is refused");
	isola_err_free(err);
	err = NULL;

	/* A body from an fd of unknown size goes chunked; an empty 204 ends the exchange. */
	if (pipe(p) == 0) {
		if (write(p[1], "hello", 5) != 5) {
		}
		close(p[1]);
		ok(exchange(c, &s, "HTTP/1.1 204 No Content\r\n\r\n",
			    &(struct client_req){.method = "PUT",
						 .path = "/v1/f",
						 .body_fd = p[0],
						 .body_size = -1,
						 .content_type = "text/plain"},
			    &err) == 0 &&
			   strstr(s.request, "\r\nTransfer-Encoding: chunked\r\n") &&
			   strstr(s.request, "\r\nContent-Type: text/plain\r\n") &&
			   strstr(s.request, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
		   "an fd body of unknown size is sent chunked, with its last chunk");
		close(p[0]);
	}

	/* Nothing listening: the error names the socket. */
	client_free(c);
	close(s.listen_fd);
	unlink(path);
	ok(client_new(&conf, &c, &err) == 0 &&
		   client_json(c, "GET", "/v1/z", NULL, &out, &err) < 0 && err &&
		   !strcmp(err->code, "unavailable") && strstr(err->message, path),
	   "no isolad: `unavailable` naming the socket");
	isola_err_free(err);
	err = NULL;
	client_free(c);
	c = NULL;

	conf.socket = NULL;
	conf.url = "https://isolad.example:8443";
	ok(client_new(&conf, &c, &err) < 0 && err && strstr(err->message, "plain HTTP"),
	   "an https URL is refused, naming why");
	isola_err_free(err);
	rmdir(dir);
	return tap_done();
}
