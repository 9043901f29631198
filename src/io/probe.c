/*
 * probe.c - the questions asked of a backing file and its file system:
 * its direct-I/O alignment, whether a range is a hole, and how much of an
 * I/O on a descriptor an injected short transfer moves.
 *
 * Why a file of its own (it was part of backend.c): these move no data;
 * they are answered by statx, fcntl and lseek, and asked by the layers
 * above (a file's open, a write over a hole) and by fault injection
 * (fault.c), not by the I/O paths (sync_io.c, ioq.c).
 */
#include "io/probe.h"

#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t probe_short_len(int fd, size_t len)
{
	size_t unit = 1;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return 0;
	if (fl & O_DIRECT) {
		unsigned oa = 0, ma = 0;
		if (probe_dio_align(fd, &oa, &ma) < 0)
			return 0;
		unit = oa > ma ? oa : ma;
		if (!unit)
			unit = 4096;
	}
	return len / 2 / unit * unit;
}

/*
 * Direct-I/O alignment of fd: statx(STATX_DIOALIGN) when the file system
 * reports it (Linux 6.1+; ext4, xfs, btrfs, f2fs, block devices...).
 * Otherwise, when fd is open with O_DIRECT (the open succeeded, so the file
 * system accepts it), a conservative guess: the file system's block size
 * (st_blksize) clamped to [512, 4096] for both offset and memory.  Aligning
 * to the file-system block is always enough where the device's logical
 * block is no larger, and 4 KiB covers 4Kn devices; it is coarser than
 * needed on 512-byte devices but never wrong.  Otherwise 0 for both: "no
 * direct I/O known to work on this descriptor".  Returns 0 or -errno (the
 * descriptor could not be queried).
 */
int probe_dio_align(int fd, unsigned *offset_align, unsigned *mem_align)
{
	unsigned oa = 0, ma = 0;
	struct statx stx;
	memset(&stx, 0, sizeof(stx));
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, STATX_DIOALIGN, &stx) == 0) {
		if (stx.stx_mask & STATX_DIOALIGN) {
			/* stx_dio_mem_align and stx_dio_offset_align, read by
			 * offset so that older headers without them work too */
			uint32_t v[2];
			memcpy(v, (const char *)&stx + 0x98, sizeof(v));
			ma = v[0];
			oa = v[1];
		}
	} else if (errno != ENOSYS && errno != EINVAL) {
		return -errno;
	}
	if (oa == 0 || ma == 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return -errno;
		oa = ma = 0;
		if (fl & O_DIRECT) {
			struct stat st;
			if (fstat(fd, &st) < 0)
				return -errno;
			unsigned bs = 512;
			while (bs < 4096 && bs < (unsigned)st.st_blksize)
				bs <<= 1;
			oa = ma = bs;
		}
	}
	if (offset_align)
		*offset_align = oa;
	if (mem_align)
		*mem_align = ma;
	return 0;
}

/* Test hook: how many times the file system was asked (see written.c). */
HIDDEN _Atomic long backend_test_hole_queries;

/*
 * Is [off, off+len) a hole?  SEEK_DATA finds the first data at or after
 * off: none (ENXIO: only a hole up to EOF, or off is past EOF) or none
 * before off+len means a hole.  Any other failure (EINVAL where the file
 * system does not support it, ...) answers false: "might be data", the
 * safe answer (the caller reads instead of assuming zeros).  Unwritten
 * (preallocated) extents count as holes on most file systems; they read
 * as zeros anyway.  lseek moves the descriptor's file position, which
 * nothing here uses (all I/O is positional).
 */
bool probe_is_hole(int fd, off_t off, size_t len)
{
	atomic_fetch_add_explicit(&backend_test_hole_queries, 1, memory_order_relaxed);
	if (off < 0)
		return false;
	if (len == 0)
		return true;
	off_t d = lseek(fd, off, SEEK_DATA);
	if (d < 0)
		return errno == ENXIO;
	return (uint64_t)d - (uint64_t)off >= len;
}
