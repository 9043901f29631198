/*
 * fdtable.c - grow the process's descriptor table before the cache fills it.
 *
 * A cache keeps the descriptors of closed files (closed.c) so that reopening
 * them costs no open(2): a program that creates thousands of small files
 * leaves thousands of descriptors open where open/write/close left none.
 * Linux grows a process's descriptor table by doubling it when a new
 * descriptor does not fit, and in a process with more than one thread each
 * growth waits for an RCU grace period (expand_fdtable: the old table may
 * still be read locklessly).  That wait lands on whichever open(2) needed
 * the room: on a virtual machine each wait took many times what an open
 * costs, at every doubling while thousands of files were created, and
 * came to a large part of the cost of creating them (docs/results.md,
 * "Figures the code's comments used to carry", Descriptor table).
 *
 * So pc_cache_new grows the table once, to what the cache will keep, before
 * the cache starts its threads (a single-threaded caller then pays no grace
 * period at all, and a threaded one pays one).  The table is grown by
 * duplicating a descriptor to the highest number wanted and closing it: the
 * kernel never shrinks a table, so the room stays.  It is kernel memory of
 * 8 bytes a descriptor (plus bitmaps), which is why the reservation is
 * bounded (FDTABLE_RESERVE_MAX) and never more than the soft limit.
 */
#include "api/fdtable.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

/* 128 KiB of kernel memory for the table at most; past it, growth is
 * rare enough (each doubling twice as far apart) to be left to use. */
#define FDTABLE_RESERVE_MAX 16384u

void fdtable_reserve(unsigned n)
{
	struct rlimit rl;
	if (n > FDTABLE_RESERVE_MAX)
		n = FDTABLE_RESERVE_MAX;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && n > rl.rlim_cur)
		n = (unsigned)rl.rlim_cur;
	if (n < 2)
		return;
	int fd = open("/", O_PATH | O_CLOEXEC);
	if (fd < 0)
		return;
	/* The lowest free number at or above n - 1: the table must hold it. */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)n - 1);
	if (high >= 0)
		close(high);
	close(fd);
}
