/*
 * probe.h - the questions asked of a backing file and its file system
 * (probe.c): direct-I/O alignment, holes, and the cut of an injected
 * short transfer.
 */
#ifndef PC_PROBE_H
#define PC_PROBE_H

#include "lib/util.h"

/* The first part of an injected short transfer of `len` bytes on fd: about
 * half, rounded down to the direct-I/O alignment of an O_DIRECT fd; 0 when
 * the I/O cannot be cut (too small). */
HIDDEN size_t probe_short_len(int fd, size_t len);
/* Block size and memory alignment for direct I/O on fd (statx DIOALIGN). */
HIDDEN int probe_dio_align(int fd, unsigned *offset_align, unsigned *mem_align);
/* Is [off, off+len) of the backing file a hole (no data)?  Uses SEEK_DATA. */
HIDDEN bool probe_is_hole(int fd, off_t off, size_t len);

#endif
