/* SPDX-License-Identifier: Apache-2.0 */
/* guest: the agent as init of a microvm guest (guestinit.c) and its serial transport. */
#ifndef ISOLA_AGENT_GUEST_H
#define ISOLA_AGENT_GUEST_H

#include <stddef.h>

/* Where the initramfs keeps the modules kernel.sh put there, and their load order. */
#define GUEST_MODULE_DIR   "/lib/isola/modules"
#define GUEST_MODULE_ORDER "/lib/isola/modules.order"
/* The virtio-serial port name isolad gives the agent channel (QEMU virtserialport name=). */
#define GUEST_PORT_NAME "org.isola.agent"

/*
 * Runs as PID 1 of a microvm guest, from the initramfs: mounts /dev, /proc, /sys, loads the
 * modules in GUEST_MODULE_ORDER, mounts /dev/vda (ext4) read-write, grows it to the disk
 * size, moves into it (switch_root), mounts devpts, /dev/shm and /run, sets the hostname
 * from `isola.hostname=` on the kernel command line and brings lo up. Writes the path of
 * the agent's virtio-serial port into port (len bytes). Returns 0, or dies (the kernel then
 * panics, and the host sees QEMU exit with the reason on the console).
 */
int guest_init(char *port, size_t len);

/* Serves the agent protocol on the virtio-serial port at path (never returns on success;
 * -errno if the port cannot be opened or the loop fails). */
int guest_serial_run(const char *path);

/* Finds "\nISOLA-SYNC <32 lowercase hex>\n" in buf: returns the offset just past it and
 * copies the hex to nonce, or -1. Pure (unit-tested). */
int guest_sync_find(const char *buf, size_t len, char nonce[33]);

#endif
