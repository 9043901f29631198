/*
 * backend.h - device I/O on the backing files (backend.c): an I/O queue
 * (io_uring with a completion thread, or synchronous calls), synchronous
 * vector I/O, and the questions asked of the backing file system.  The
 * bottom of the library: it calls nothing above it but the fault rules
 * (fault.h), and tells its callers of completions only through their
 * done() callbacks.
 */
#ifndef PC_BACKEND_H
#define PC_BACKEND_H

#include "lib/util.h"

struct pc_cache;

enum { IO_READ, IO_WRITE, IO_FSYNC, IO_FDATASYNC, IO_NOP };

/* An I/O queue (backend.c). */
struct pc_ioq;
struct pc_ioreq;
typedef void (*pc_io_done_fn)(struct pc_ioreq *req, ssize_t res);

/* One device I/O.  Owned by the submitter until `done` is called. */
struct pc_ioreq {
	int op;          /* IO_* */
	int fd;
	int rw_flags;    /* RWF_DSYNC for durable writes */
	int iovcnt;
	const struct iovec *iov;
	off_t off;
	size_t len;      /* sum of iov lengths */
	pc_io_done_fn done;
	void *priv;
};

HIDDEN int ioq_create(struct pc_cache *c, unsigned depth, bool use_uring, struct pc_ioq **out);
HIDDEN void ioq_destroy(struct pc_ioq *q);
/* Free a child's copy of a queue inherited through fork(): the ring is
 * the parent's, nothing of it is touched. */
HIDDEN void ioq_forget(struct pc_ioq *q);
HIDDEN bool ioq_is_uring(const struct pc_ioq *q);
/* Submit; waits only while `depth` I/Os are in flight.  With no io_uring the
 * I/O runs synchronously and done() is called before this returns. */
HIDDEN void ioq_submit(struct pc_ioq *q, struct pc_ioreq *req);
/* Synchronous I/O on the caller's thread; retries EINTR and partial
 * transfers (a read stops at EOF).  Returns bytes or negative errno. */
HIDDEN ssize_t backend_preadv(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off);
HIDDEN ssize_t backend_pwritev(struct pc_cache *c, int fd, const struct iovec *iov, int iovcnt, off_t off,
			       int rw_flags);
/* The same, written through alias_fd, another open file description of
 * fd's file: counted and fault-checked as fd's. */
HIDDEN ssize_t backend_pwritev_alias(struct pc_cache *c, int fd, int alias_fd, const struct iovec *iov, int iovcnt,
				     off_t off, int rw_flags);
/* fsync/fdatasync of a backing file, through the fault hooks (PC_FAULT_SYNC). */
HIDDEN int backend_fsync(struct pc_cache *c, int fd, bool datasync);
/* The first part of an injected short transfer of `len` bytes on fd: about
 * half, rounded down to the direct-I/O alignment of an O_DIRECT fd; 0 when
 * the I/O cannot be cut (too small). */
HIDDEN size_t backend_short_len(int fd, size_t len);
/* Block size and memory alignment for direct I/O on fd (statx DIOALIGN). */
HIDDEN int backend_dio_align(int fd, unsigned *offset_align, unsigned *mem_align);
/* Is [off, off+len) of the backing file a hole (no data)?  Uses SEEK_DATA. */
HIDDEN bool backend_is_hole(int fd, off_t off, size_t len);

#endif
