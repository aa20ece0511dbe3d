/* SPDX-License-Identifier: Apache-2.0 */
/* identity: a restored clone's fresh identity — hostname, machine id, kernel RNG reseed. */
#include "agent-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/proto.h"

#define IDENTITY_SEED_BYTES 32

/* Standard base64 (padding required) into out (cap bytes). Returns bytes or -1. */
static long b64_decode(const char *in, unsigned char *out, size_t cap)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t len = strlen(in), n = 0;
	uint32_t acc = 0;
	int bits = 0;

	if (len % 4)
		return -1;
	for (size_t i = 0; i < len; i++) {
		const char *p;

		if (in[i] == '=') {
			if (i + 2 < len || (i + 1 < len && in[i + 1] != '='))
				return -1;
			break;
		}
		p = memchr(tbl, in[i], 64);
		if (!p || !in[i])
			return -1;
		acc = (acc << 6) | (uint32_t)(p - tbl);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n >= cap)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	return (long)n;
}

/* Writes /etc/machine-id (creating it when the image has none, so every clone has an id of
 * its own; a symlink there is refused). True on success. */
static bool write_machine_id(const char *hex)
{
	char line[34];
	int fd = open("/etc/machine-id", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
		      0444);
	bool ok;

	if (fd < 0)
		return false;
	snprintf(line, sizeof(line), "%s\n", hex);
	ok = write(fd, line, strlen(line)) == (ssize_t)strlen(line);
	close(fd);
	return ok;
}

/*
 * Mixes the seed into the kernel pool and, where permitted, credits it and reseeds the
 * CRNG now, so a clone's getrandom() output diverges from its siblings' at once. Writing
 * /dev/urandom mixes without credit and is always allowed; RNDADDENTROPY and
 * RNDRESEEDCRNG need CAP_SYS_ADMIN in the initial namespace: a microvm guest's agent has
 * it, the process tier's does not — and there the kernel RNG is the host's, never cloned.
 */
static bool reseed(const unsigned char *seed, size_t len)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[IDENTITY_SEED_BYTES];
	} e;
	int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	bool credited = false;

	if (fd < 0)
		return false;
	if (write(fd, seed, len) < 0) {
		/* keep going: the ioctl may still work */
	}
	memset(&e, 0, sizeof(e));
	e.info.entropy_count = (int)(len * 8);
	e.info.buf_size = (int)len;
	memcpy(e.buf, seed, len);
	if (ioctl(fd, RNDADDENTROPY, &e) == 0) {
		credited = true;
#ifdef RNDRESEEDCRNG
		if (ioctl(fd, RNDRESEEDCRNG) < 0)
			credited = false;
#endif
	}
	memset(&e, 0, sizeof(e));
	close(fd);
	return credited;
}

int op_identity(struct chan *ch, json_t *req)
{
	unsigned char seed[IDENTITY_SEED_BYTES];
	const char *host = NULL, *mid = NULL, *seed_b64 = NULL;
	char cur[256] = "";
	bool mid_ok = false, reseeded;
	long n;

	/* UNTRUSTED only in the sense of every request: isolad sends this op, checked anyway. */
	if (req_str(ch, req, "hostname", 63, &host) < 0 ||
	    req_str(ch, req, "machine_id", 32, &mid) < 0 ||
	    req_str(ch, req, "seed", 64, &seed_b64) < 0)
		return 0;
	if (!host || !util_hostname_valid(host)) {
		chan_fail(ch, EINVAL, "field `hostname` must be 1-63 of [A-Za-z0-9.-]");
		return 0;
	}
	if (mid && (strlen(mid) != 32 || strspn(mid, "0123456789abcdef") != 32)) {
		chan_fail(ch, EINVAL, "field `machine_id` must be 32 lowercase hex digits");
		return 0;
	}
	n = seed_b64 ? b64_decode(seed_b64, seed, sizeof(seed)) : -1;
	if (n != IDENTITY_SEED_BYTES) {
		chan_fail(ch, EINVAL, "field `seed` must be %d bytes of base64",
			  IDENTITY_SEED_BYTES);
		return 0;
	}
	/* The process tier names its UTS namespace at setup (and then has no CAP_SYS_ADMIN
	 * left for it): a hostname that is already right is not changed. */
	if (gethostname(cur, sizeof(cur) - 1) == 0 && !strcmp(cur, host)) {
		/* nothing to do */
	} else if (sethostname(host, strlen(host)) < 0) {
		chan_fail(ch, errno, "sethostname: %s", strerror(errno));
		return 0;
	}
	if (mid)
		mid_ok = write_machine_id(mid);
	reseeded = reseed(seed, sizeof(seed));
	memset(seed, 0, sizeof(seed));
	chan_finish(ch, PROTO_RESULT,
		    json_pack("{s:s, s:b, s:b}", "hostname", host, "machine_id", mid_ok, "reseeded",
			      reseeded));
	return 0;
}
