/* SPDX-License-Identifier: Apache-2.0 */
/* console: serves the embedded web console's static files at / and /console/ (docs/console.md). */
#include "api-internal.h"
#include "console-assets.h"

#include <string.h>

#include "../../common/util.h"

/*
 * Sent with every console response, found or not. The console runs no inline script or style
 * and talks only to its own origin (fetch and the WebSocket of the PTY): anything injected into
 * the page (a hostile file name the code failed to escape) can neither run nor phone home. No
 * framing (clickjacking), no Referer leaving the page, no MIME sniffing of a file as HTML.
 */
static const char *const console_headers[][2] = {
	{"Content-Security-Policy",
	 "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
	 "font-src 'self'; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; "
	 "form-action 'none'"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"X-Frame-Options", "DENY"},
	{"Cross-Origin-Opener-Policy", "same-origin"},
	{"Cross-Origin-Resource-Policy", "same-origin"},
};

bool api_console_path(const char *url)
{
	return !strcmp(url, "/") || !strcmp(url, "/console") || !strncmp(url, "/console/", 9);
}

static const struct console_asset *asset_find(const char *url)
{
	for (size_t i = 0; i < console_assets_n; i++)
		if (!strcmp(console_assets[i].path, url))
			return &console_assets[i];
	return NULL;
}

static enum MHD_Result respond(struct api_req *r, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	for (size_t i = 0; i < ARRAY_SIZE(console_headers); i++)
		MHD_add_response_header(resp, console_headers[i][0], console_headers[i][1]);
	return api_respond_response(r, status, resp);
}

static enum MHD_Result respond_error(struct api_req *r, unsigned status, const char *code,
				     const char *msg)
{
	snprintf(r->err_code, sizeof(r->err_code), "%s", code);
	return respond(r, status, api_json_response(api_error_json(code, msg)));
}

enum MHD_Result api_console_serve(struct api_req *r, const char *url, const char *method)
{
	const struct console_asset *a;
	const char *inm;
	struct MHD_Response *resp;
	bool not_modified;

	/* UNTRUSTED: url and method are the client's; url is only compared with the table's
	 * paths (no file system access, no path resolution). */
	if (!r->srv->console)
		return respond_error(r, 404, "not_found",
				     "the web console is off (isolad --console off)");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		resp = api_json_response(
			api_error_json("method_not_allowed", "the console answers GET and HEAD"));
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		snprintf(r->err_code, sizeof(r->err_code), "method_not_allowed");
		return respond(r, 405, resp);
	}
	a = asset_find(url);
	if (!a)
		return respond_error(r, 404, "not_found", "no such console file");
	inm = api_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
	not_modified = inm && strstr(inm, a->etag);
	resp = not_modified ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
			    : MHD_create_response_from_buffer(a->len, (void *)a->data,
							      MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	if (!not_modified)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, a->etag);
	/* Revalidate every time: an upgraded isolad serves new bytes under a new ETag. */
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	return respond(r, not_modified ? 304 : 200, resp);
}
