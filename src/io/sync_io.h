/*
 * sync_io.h - synchronous device I/O on the caller's thread (sync_io.c),
 * and what the I/O queue (ioq.c) shares with it: the accounting and fault
 * hooks every device I/O passes first, and running a request
 * synchronously.
 */
#ifndef PC_SYNC_IO_H
#define PC_SYNC_IO_H

#include "lib/util.h"

struct pc_cache;
struct pc_ioreq;

/* Synchronous I/O on the caller's thread; retries EINTR and partial
 * transfers (a read stops at EOF).  Returns bytes or negative errno. */
HIDDEN ssize_t sync_io_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off);
HIDDEN ssize_t sync_io_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			       int rw_flags);
/* The same, written through alias_fd, another open file description of
 * fd's file: counted and fault-checked as fd's. */
HIDDEN ssize_t sync_io_pwritev_alias(struct pc_cache *c, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
				     off_t off, int rw_flags);
/* fsync/fdatasync of a backing file, through the fault hooks (PC_FAULT_SYNC). */
HIDDEN int sync_io_fsync(struct pc_cache *c, int fd, bool datasync);

/* For the I/O queue (ioq.c). */

/* Before a device I/O of op IO_* (backend.h): the cache's fault hook and
 * fault rules, then the counters.  Returns 0 or a hook's negative errno;
 * *cut: 0, or the bytes the device is to move first (an injected short
 * transfer).  c may be NULL. */
HIDDEN int io_account(struct pc_cache *c, int op, int fd, off_t off, size_t len, size_t *cut);
/* Do (or finish) a request synchronously, `done_bytes` of it already
 * done; from the start, `cut` (0: none) are the bytes to move alone first.
 * No hook, no accounting.  Bytes moved or negative errno. */
HIDDEN ssize_t sync_exec(struct pc_ioreq *req, size_t done_bytes, size_t cut);
/* The first `n` bytes of iov as iovecs in out (at most iovcnt
 * of them); their count. */
HIDDEN int iov_head(const struct iovec *iov, int iovcnt, size_t n, struct iovec *out);

#endif
