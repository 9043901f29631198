/*
 * direct.h - PC_DIRECT (direct.c): direct I/O that stays coherent with the
 * cache (dirty cached data of the range written back first, cached blocks
 * invalidated after a direct write); any alignment, an unaligned write's
 * ends going through the uncached buffered path.
 */
#ifndef PC_DIRECT_H
#define PC_DIRECT_H

#include "lib/util.h"

struct pc_file;

HIDDEN ssize_t direct_read(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len);
HIDDEN ssize_t direct_write(struct pc_file *h, const struct iovec *iov, int iovcnt, uint64_t off, size_t len,
			    int flags);

#endif
