/*
 * ioq.h - the I/O queue (ioq.c): device I/O through io_uring with a
 * completion thread, or synchronously when io_uring is unavailable.  The
 * request it takes, struct pc_ioreq, is backend.h's.
 */
#ifndef PC_IOQ_H
#define PC_IOQ_H

#include "lib/util.h"

struct pc_cache;
struct pc_ioreq;

/* An I/O queue. */
struct pc_ioq;

HIDDEN int ioq_create(struct pc_cache *c, unsigned depth, bool use_uring, struct pc_ioq **out);
HIDDEN void ioq_destroy(struct pc_ioq *q);
/* Free a child's copy of a queue inherited through fork(): the ring is
 * the parent's, nothing of it is touched. */
HIDDEN void ioq_forget(struct pc_ioq *q);
HIDDEN bool ioq_is_uring(const struct pc_ioq *q);
/* Submit; waits only while `depth` I/Os are in flight.  With no io_uring the
 * I/O runs synchronously and done() is called before this returns. */
HIDDEN void ioq_submit(struct pc_ioq *q, struct pc_ioreq *req);
/* ioq_submit, but the request may wait in the queue, unseen by the device,
 * until ioq_flush (or any ioq_submit, or enough of them waiting): a caller
 * that submits many sends them in one system call, one batch of device
 * requests.  It must call ioq_flush before it waits for anything (another
 * request's end, a lock, room) and when it is done. */
HIDDEN void ioq_submit_defer(struct pc_ioq *q, struct pc_ioreq *req);
HIDDEN void ioq_flush(struct pc_ioq *q);

#endif
