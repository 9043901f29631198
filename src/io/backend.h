/*
 * backend.h - device I/O on the backing files, as the layers above see it:
 * the request (struct pc_ioreq) that the I/O queue and synchronous I/O
 * share, and, included here, the headers of the three files that do the
 * work:
 *
 *   io/ioq.h      the I/O queue: io_uring with a completion thread, or
 *                 synchronous calls (ioq.c)
 *   io/sync_io.h  synchronous vector I/O and fsync, and the accounting
 *                 and fault hooks every device I/O goes through (sync_io.c)
 *   io/probe.h    the questions asked of the backing file system:
 *                 direct-I/O alignment, holes (probe.c)
 *
 * The io layer calls only lib (src/layers.txt): it asks io/fault.c which
 * injected fault fires, and tells its callers of completions only through
 * their done() callbacks.
 */
#ifndef PC_BACKEND_H
#define PC_BACKEND_H

#include "lib/util.h"

#include "io/ioq.h"
#include "io/probe.h"
#include "io/sync_io.h"

struct pc_ioreq;

enum { IO_READ, IO_WRITE, IO_FSYNC, IO_FDATASYNC, IO_NOP };

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

#endif
