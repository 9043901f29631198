/*
 * io_fd.h - the descriptor the cache's device I/O on a file goes through
 * (io_fd.c): O_DIRECT added before the first request, never taken off.
 */
#ifndef PC_IO_FD_H
#define PC_IO_FD_H

#include "lib/util.h"

struct pc_mapping;

/* The backing descriptor for a read or write the cache issues: given
 * O_DIRECT first if it was opened without (mapping.h, fd_mode). */
HIDDEN int io_fd(struct pc_mapping *m);
/* Add O_DIRECT to a descriptor: 0 or a negative errno (EINVAL: the file
 * refuses direct I/O). */
HIDDEN int io_fd_set_direct(int fd);

#endif
