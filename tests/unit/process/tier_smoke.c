/* SPDX-License-Identifier: Apache-2.0 */
/* tier_smoke: creates one sandbox with the real isola-agent and runs `sh -c 'id; echo hi'` in it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "isolad/tiers/tier.h"

/* Usage: tier_smoke ROOTFS STATEDIR (ISOLA_AGENT must name the agent). Exit 0 on success. */
static int send_frame(int fd, uint32_t ch, uint8_t type, const char *json)
{
	uint8_t h[12] = {0};
	uint32_t len = (uint32_t)strlen(json);

	for (int i = 0; i < 4; i++) {
		h[i] = (uint8_t)(len >> (8 * i));
		h[4 + i] = (uint8_t)(ch >> (8 * i));
	}
	h[8] = type;
	if (util_write_all(fd, h, 12) < 0 || util_write_all(fd, json, len) < 0)
		return -1;
	return 0;
}

static int recv_frame(int fd, uint32_t *ch, uint8_t *type, char *buf, size_t cap)
{
	uint8_t h[12];
	uint32_t len = 0;

	if (util_read_exact(fd, h, 12) < 0)
		return -1;
	for (int i = 0; i < 4; i++) {
		len |= (uint32_t)h[i] << (8 * i);
		*ch = i ? *ch | (uint32_t)h[4 + i] << (8 * i) : h[4];
	}
	*type = h[8];
	if (len >= cap || util_read_exact(fd, buf, len) < 0)
		return -1;
	buf[len] = '\0';
	return (int)len;
}

int main(int argc, char **argv)
{
	struct sandbox_spec sp = {0};
	struct tier_sandbox *s;
	struct isola_err *err = NULL;
	static char buf[70000];
	uint64_t t0 = util_now_ns();
	int fd, rc = 1;

	if (argc != 3)
		return 2;
	snprintf(sp.id, sizeof(sp.id), "smoke");
	snprintf(sp.dir, sizeof(sp.dir), "%s", argv[2]);
	snprintf(sp.rootfs, sizeof(sp.rootfs), "%s", argv[1]);
	snprintf(sp.binds[0].src, sizeof(sp.binds[0].src), "/usr");
	snprintf(sp.binds[0].dst, sizeof(sp.binds[0].dst), "/usr");
	sp.n_binds = 1;
	sp.uid_base = 3200000000u;
	sp.memory_bytes = 256 << 20;
	sp.disk_bytes = 64 << 20;
	sp.inodes = 10000;
	sp.pids = 64;
	mkdir(sp.dir, 0700);
	if (tier_process_ops.create(&sp, &s, &err) < 0) {
		fprintf(stderr, "create: %s\n", err->message);
		return 1;
	}
	printf("create %.2f ms\n", (double)(util_now_ns() - t0) / 1e6);
	fd = tier_process_ops.agent_connect(s, &err);
	if (fd >= 0) {
		uint32_t ch;
		uint8_t type;

		send_frame(fd, 0, 1, "{\"version\":1,\"agent\":\"tier_smoke\"}");
		if (recv_frame(fd, &ch, &type, buf, sizeof(buf)) >= 0)
			printf("HELLO type %u: %s\n", type, buf);
		send_frame(fd, 1, 2,
			   "{\"op\":\"exec\",\"cwd\":\"/\",\"argv\":[\"/bin/sh\",\"-c\","
			   "\"id; echo hi; "
			   "hostname\"]}");
		for (int i = 0; i < 20; i++) {
			if (recv_frame(fd, &ch, &type, buf, sizeof(buf)) < 0)
				break;
			printf("frame ch %u type %u: %s\n", ch, type, buf);
			if (type == 11 || type == 4) {
				rc = type == 11 ? 0 : 1;
				break;
			}
		}
		close(fd);
	}
	t0 = util_now_ns();
	tier_process_ops.destroy(s, NULL);
	printf("destroy %.2f ms\n", (double)(util_now_ns() - t0) / 1e6);
	return rc;
}
