/* SPDX-License-Identifier: Apache-2.0 */
/* agenttar: turns an agent's entry stream (tar_get, fs_diff) into a tar with libarchive. */
#ifndef ISOLA_CORE_AGENTTAR_H
#define ISOLA_CORE_AGENTTAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "agentconn.h"

struct archive;

/* One stream being written; fill the first three fields (and max_bytes), zero the rest. */
struct agent_tar {
	struct archive *a;			  /* open tar writer (borrowed) */
	unsigned perm_mask;			  /* mode bits kept (0777, 07777) */
	bool (*name_ok)(const char *n, size_t l); /* refuses names a reader must not see */
	uint64_t max_bytes;			  /* cap on declared file bytes, 0 = none */
	uint64_t total;				  /* declared file bytes so far */
	bool skipping;				  /* current entry refused: drop its data */
	bool finished;				  /* EOF came and the trailer was written */
	uint64_t remaining;			  /* data bytes the current entry still needs */
	uint64_t skipped;			  /* entries refused by name_ok or type */
	char entry[256];			  /* name of the current entry (messages) */
};

/*
 * Handles one frame of the stream: ENTRY writes a header (an entry whose name name_ok refuses,
 * or of a type tar cannot hold here, is skipped with its data; one whose size would take the
 * declared total past max_bytes fails the stream with `too_large`), STDOUT its data (held to
 * the size ENTRY announced), EOF closes the archive (t->finished). UNTRUSTED: the agent's frames;
 * every size is held to what its ENTRY announced. Returns 0, or -errno with *err naming the
 * entry (an agent ERROR keeps its code). m is borrowed. Any thread (one per agent_tar).
 */
int agent_tar_frame(struct agent_tar *t, const struct agent_msg *m, struct isola_err **err);

#endif
