/* SPDX-License-Identifier: Apache-2.0 */
/* ws: RFC 6455 WebSocket codec — handshake accept key, frame encoder, incremental decoder. */
#include "ws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <nettle/base64.h>
#include <nettle/sha1.h>

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static bool is_b64(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

int ws_accept_key(const char *client_key, char out[WS_ACCEPT_KEY_SIZE])
{
	uint8_t digest[SHA1_DIGEST_SIZE];
	struct sha1_ctx ctx;

	/* UNTRUSTED: the client's header. 16 bytes in base64 is 22 characters and "==". */
	if (!client_key || strlen(client_key) != 24 || client_key[22] != '=' ||
	    client_key[23] != '=')
		return -EINVAL;
	for (int i = 0; i < 22; i++)
		if (!is_b64(client_key[i]))
			return -EINVAL;
	sha1_init(&ctx);
	sha1_update(&ctx, 24, (const uint8_t *)client_key);
	sha1_update(&ctx, sizeof(ws_guid) - 1, (const uint8_t *)ws_guid);
	sha1_digest(&ctx, sizeof(digest), digest);
	base64_encode_raw(out, sizeof(digest), digest);
	out[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE)] = '\0';
	return 0;
}

int ws_client_key(char out[WS_CLIENT_KEY_SIZE])
{
	uint8_t raw[16];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	base64_encode_raw(out, sizeof(raw), raw);
	out[24] = '\0';
	return 0;
}

static bool opcode_known(uint8_t op)
{
	return op == WS_OP_CONT || op == WS_OP_TEXT || op == WS_OP_BINARY || op == WS_OP_CLOSE ||
	       op == WS_OP_PING || op == WS_OP_PONG;
}

static bool opcode_is_control(uint8_t op)
{
	return op & 0x8;
}

int ws_frame_header(uint8_t hdr[WS_MAX_HEADER], uint8_t opcode, const uint8_t *mask, uint64_t len)
{
	int n = 2;

	if (!opcode_known(opcode) || opcode == WS_OP_CONT)
		return -EINVAL;
	if (opcode_is_control(opcode) && len > WS_MAX_CONTROL)
		return -EINVAL;
	hdr[0] = 0x80 | opcode;
	hdr[1] = mask ? 0x80 : 0;
	if (len < 126) {
		hdr[1] |= (uint8_t)len;
	} else if (len <= 0xffff) {
		hdr[1] |= 126;
		hdr[2] = (uint8_t)(len >> 8);
		hdr[3] = (uint8_t)len;
		n = 4;
	} else {
		if (len >> 63)
			return -EINVAL;
		hdr[1] |= 127;
		for (int i = 0; i < 8; i++)
			hdr[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		n = 10;
	}
	if (mask) {
		memcpy(hdr + n, mask, 4);
		n += 4;
	}
	return n;
}

void ws_mask(uint8_t *buf, size_t len, const uint8_t mask[4], uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] ^= mask[(off + i) & 3];
}

int ws_frame_encode(uint8_t opcode, const uint8_t *mask, const void *payload, size_t len,
		    uint8_t **out, size_t *out_len)
{
	uint8_t hdr[WS_MAX_HEADER];
	int h = ws_frame_header(hdr, opcode, mask, len);
	uint8_t *buf;

	if (h < 0)
		return h;
	if (len > SIZE_MAX - WS_MAX_HEADER)
		return -EINVAL;
	buf = malloc((size_t)h + len + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, hdr, (size_t)h);
	if (len)
		memcpy(buf + h, payload, len);
	if (mask)
		ws_mask(buf + h, len, mask, 0);
	*out = buf;
	*out_len = (size_t)h + len;
	return 0;
}

bool ws_utf8_valid(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i - 1 < n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

void ws_decoder_init(struct ws_decoder *d, bool expect_masked, size_t max_message)
{
	memset(d, 0, sizeof(*d));
	d->expect_masked = expect_masked;
	d->max_message = max_message;
	d->hdr_need = 2;
}

void ws_decoder_fini(struct ws_decoder *d)
{
	free(d->msg);
	d->msg = NULL;
	d->msg_len = d->msg_cap = 0;
}

static int fail(struct ws_decoder *d, uint16_t code, int r)
{
	d->close_code = code;
	return r;
}

/* Validates a complete header in d->hdr. UNTRUSTED: every field is the peer's. */
static int header_done(struct ws_decoder *d)
{
	uint8_t b0 = d->hdr[0], b1 = d->hdr[1];
	size_t p = 2;

	d->fin = b0 & 0x80;
	d->opcode = b0 & 0x0f;
	d->masked = b1 & 0x80;
	if (b0 & 0x70) /* RSV1-3: we negotiate no extension */
		return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	if (!opcode_known(d->opcode))
		return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	if (d->masked != d->expect_masked) /* section 5.1: both directions are mandatory */
		return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	d->frame_len = b1 & 0x7f;
	if (d->frame_len == 126) {
		d->frame_len = ((uint64_t)d->hdr[2] << 8) | d->hdr[3];
		p = 4;
	} else if (d->frame_len == 127) {
		d->frame_len = 0;
		for (int i = 0; i < 8; i++)
			d->frame_len = (d->frame_len << 8) | d->hdr[2 + i];
		p = 10;
		if (d->frame_len >> 63)
			return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	}
	if (d->masked)
		memcpy(d->mask, d->hdr + p, 4);
	if (opcode_is_control(d->opcode)) {
		if (!d->fin || d->frame_len > WS_MAX_CONTROL)
			return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	} else if (d->opcode == WS_OP_CONT) {
		if (!d->msg_opcode)
			return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
	} else {
		if (d->msg_opcode) /* a new message while a fragmented one is open */
			return fail(d, WS_CLOSE_PROTOCOL, -EPROTO);
		d->msg_opcode = d->opcode;
		d->msg_len = 0;
	}
	if (!opcode_is_control(d->opcode)) {
		/* Size check before any allocation. */
		if (d->frame_len > d->max_message || d->msg_len > d->max_message - d->frame_len)
			return fail(d, WS_CLOSE_TOO_BIG, -EMSGSIZE);
		if (d->msg_len + d->frame_len > d->msg_cap) {
			size_t cap = d->msg_cap ? d->msg_cap : 4096;
			uint8_t *nb;

			while (cap < d->msg_len + d->frame_len)
				cap = cap > d->max_message / 2 ? d->max_message : cap * 2;
			nb = realloc(d->msg, cap);
			if (!nb)
				return fail(d, WS_CLOSE_INTERNAL, -ENOMEM);
			d->msg = nb;
			d->msg_cap = cap;
		}
	}
	d->frame_have = 0;
	d->in_payload = true;
	return 0;
}

/* A frame's payload is complete: yield it, or keep collecting fragments. */
static int frame_done(struct ws_decoder *d, struct ws_message *out)
{
	d->in_payload = false;
	d->hdr_have = 0;
	d->hdr_need = 2;
	if (opcode_is_control(d->opcode)) {
		out->opcode = d->opcode;
		out->data = d->ctrl;
		out->len = (size_t)d->frame_len;
		return 1;
	}
	d->msg_len += (size_t)d->frame_len;
	if (!d->fin)
		return 0;
	out->opcode = d->msg_opcode;
	out->data = d->msg;
	out->len = d->msg_len;
	d->msg_opcode = 0;
	d->msg_ready = true;
	if (out->opcode == WS_OP_TEXT && !ws_utf8_valid(d->msg, d->msg_len))
		return fail(d, WS_CLOSE_INVALID_DATA, -EILSEQ);
	return 1;
}

int ws_decoder_feed(struct ws_decoder *d, const uint8_t *buf, size_t len, size_t *consumed,
		    struct ws_message *out)
{
	size_t i = 0;
	int r;

	if (d->close_code)
		return -EPROTO;
	if (d->msg_ready) {
		d->msg_ready = false;
		d->msg_len = 0;
	}
	while (i < len || (d->in_payload && d->frame_have == d->frame_len)) {
		if (!d->in_payload) {
			d->hdr[d->hdr_have++] = buf[i++];
			if (d->hdr_have == 2) {
				uint8_t l = d->hdr[1] & 0x7f;

				d->hdr_need = 2 +
					      (l == 126	  ? 2
					       : l == 127 ? 8
							  : 0) +
					      ((d->hdr[1] & 0x80) ? 4 : 0);
			}
			if (d->hdr_have < d->hdr_need)
				continue;
			r = header_done(d);
			if (r < 0)
				return r;
			continue;
		}
		if (d->frame_have < d->frame_len) {
			uint64_t want = d->frame_len - d->frame_have;
			size_t n = len - i < want ? len - i : (size_t)want;
			uint8_t *dst = opcode_is_control(d->opcode)
					       ? d->ctrl + d->frame_have
					       : d->msg + d->msg_len + d->frame_have;

			memcpy(dst, buf + i, n);
			if (d->masked)
				ws_mask(dst, n, d->mask, d->frame_have);
			d->frame_have += n;
			i += n;
		}
		if (d->frame_have == d->frame_len) {
			r = frame_done(d, out);
			if (r != 0) {
				*consumed = i;
				return r;
			}
		}
	}
	*consumed = i;
	return 0;
}

int ws_parse_close(const uint8_t *data, size_t len, uint16_t *code, const uint8_t **reason,
		   size_t *reason_len)
{
	uint16_t c;

	*reason = NULL;
	*reason_len = 0;
	if (len == 0) {
		*code = 1005;
		return 0;
	}
	if (len == 1)
		return -EPROTO;
	c = (uint16_t)((data[0] << 8) | data[1]);
	/* Codes allowed on the wire (section 7.4): 1000-1003, 1007-1011, 3000-4999. */
	if (!((c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1011) || (c >= 3000 && c <= 4999)))
		return -EPROTO;
	if (!ws_utf8_valid(data + 2, len - 2))
		return -EPROTO;
	*code = c;
	*reason = data + 2;
	*reason_len = len - 2;
	return 0;
}
