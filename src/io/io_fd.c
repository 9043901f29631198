/*
 * io_fd.c - the descriptor the cache's device I/O on a file goes through.
 * Below everything that reads or writes folios' blocks (fill.c, read_io.c,
 * writeback.c, direct.c), so none of them calls up into backing.c for it.
 */
#include "io/io_fd.h"

#include "mem/mapping.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>

int io_fd_set_direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) != 0)
		return -errno;
	return 0;
}

/*
 * O_DIRECT goes on before the first request the cache issues on the
 * descriptor, never off again: io_uring takes a request's flags from the
 * file when it issues (or retries) it, so turning O_DIRECT off would make
 * direct requests in flight buffered.  One caller switches; the others
 * wait the moment it takes.  A file that refuses O_DIRECT here (some
 * per-file exceptions on a file system that allows it, such as ext4's
 * inline data) keeps a buffered descriptor: slower, still coherent.
 */
int io_fd(struct pc_mapping *m)
{
	struct pc_mapping_proc *mp = mproc(m);
	int mode = atomic_load_explicit(&mp->fd_mode, memory_order_acquire);
	if (mode == FD_DIRECT_LATER && atomic_compare_exchange_strong(&mp->fd_mode, &mode, FD_DIRECT_SWITCHING)) {
		int err = io_fd_set_direct(mp->fd);
		atomic_store_explicit(&mp->fd_mode, err ? FD_DIRECT_REFUSED : FD_AS_OPENED, memory_order_release);
		return mp->fd;
	}
	while (mode == FD_DIRECT_SWITCHING) {
		sched_yield();
		mode = atomic_load_explicit(&mp->fd_mode, memory_order_acquire);
	}
	return mp->fd;
}
