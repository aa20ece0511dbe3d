/* SPDX-License-Identifier: Apache-2.0 */
/* proto: frame header encoding, validation and the incremental frame decoder. */
#include "proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void proto_header_encode(const struct proto_header *h, uint8_t out[PROTO_HEADER_SIZE])
{
	put_le32(out, h->len);
	put_le32(out + 4, h->channel);
	out[8] = h->type;
	out[9] = h->flags;
	out[10] = 0;
	out[11] = 0;
}

bool proto_type_is_json(uint8_t type)
{
	switch (type) {
	case PROTO_HELLO:
	case PROTO_OPEN:
	case PROTO_RESULT:
	case PROTO_ERROR:
	case PROTO_CONTROL:
	case PROTO_EXIT:
	case PROTO_ENTRY:
	case PROTO_DROPPED:
		return true;
	default:
		return false;
	}
}

/* The payload length a frame of this type may carry: [min, max]. */
static void len_limits(uint8_t type, uint32_t *min, uint32_t *max)
{
	*min = 0;
	if (proto_type_is_json(type)) {
		*min = 2; /* "{}" */
		*max = PROTO_MAX_JSON;
	} else if (proto_type_is_data(type)) {
		*min = 1; /* empty data frames are pointless and would cost a wakeup for nothing */
		*max = PROTO_MAX_PAYLOAD;
	} else if (type == PROTO_CREDIT) {
		*min = 4;
		*max = 4;
	} else { /* EOF, CLOSE */
		*max = 0;
	}
}

int proto_header_decode(const uint8_t in[PROTO_HEADER_SIZE], struct proto_header *h)
{
	uint32_t min, max;

	/* UNTRUSTED: all 12 bytes come from the peer; every field is checked here. */
	h->len = get_le32(in);
	h->channel = get_le32(in + 4);
	h->type = in[8];
	h->flags = in[9];
	if (h->type < 1 || h->type > PROTO_TYPE_MAX)
		return -EPROTO;
	if (h->flags != PROTO_F_NONE || in[10] != 0 || in[11] != 0)
		return -EPROTO;
	/* HELLO lives on channel 0 and nothing else does. */
	if ((h->type == PROTO_HELLO) != (h->channel == 0))
		return -EPROTO;
	len_limits(h->type, &min, &max);
	if (h->len < min || h->len > max)
		return -EPROTO;
	return 0;
}

int proto_decoder_init(struct proto_decoder *d)
{
	memset(d, 0, sizeof(*d));
	d->payload = malloc(PROTO_MAX_PAYLOAD + 1);
	if (!d->payload)
		return -ENOMEM;
	return 0;
}

void proto_decoder_fini(struct proto_decoder *d)
{
	free(d->payload);
	d->payload = NULL;
}

int proto_decoder_feed(struct proto_decoder *d, const uint8_t *buf, size_t len, size_t *consumed,
		       struct proto_header *h, const uint8_t **payload)
{
	size_t used = 0, n;
	int r;

	*consumed = 0;
	if (!d->payload)
		return -EPROTO; /* a failed stream stays failed */
	while (used < len) {
		if (d->hdr_have < PROTO_HEADER_SIZE) {
			n = PROTO_HEADER_SIZE - d->hdr_have;
			if (n > len - used)
				n = len - used;
			memcpy(d->hdr + d->hdr_have, buf + used, n);
			d->hdr_have += n;
			used += n;
			if (d->hdr_have < PROTO_HEADER_SIZE)
				break;
			r = proto_header_decode(d->hdr, &d->cur);
			if (r < 0) {
				*consumed = used;
				proto_decoder_fini(d);
				return r;
			}
			d->payload_have = 0;
		}
		n = d->cur.len - d->payload_have;
		if (n > len - used)
			n = len - used;
		memcpy(d->payload + d->payload_have, buf + used, n);
		d->payload_have += n;
		used += n;
		if (d->payload_have == d->cur.len) {
			d->payload[d->cur.len] = '\0'; /* convenience for JSON parsers */
			*h = d->cur;
			*payload = d->payload;
			d->hdr_have = 0;
			d->payload_have = 0;
			*consumed = used;
			return 1;
		}
	}
	*consumed = used;
	return 0;
}
