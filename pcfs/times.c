/*
 * times.c - the times and size a file shows while its data is only cached.
 *
 * pagecache writes data back seconds after the write (and pc_close does not
 * wait), and every device write changes the backing file's mtime and
 * ctime.  Shown as they are, a file would change its times long after a
 * program last wrote it: tar would say "file changed as we read it", make
 * would rebuild, and `cp -a` would lose the mtime it set.  So pcfs keeps
 * the time of each write (or the mtime a program set since), shows it
 * while data is unwritten, and puts the mtime on the backing file once
 * all of the data is written (settling), through the cache
 * (pc_cache_file_set_times), so that the new ctime this gives the backing
 * file does not look like another program's change: the next open keeps
 * the cached data instead of reading it all again.  ctime cannot be set: pcfs shows
 * its own until the backing file's ctime changes for another reason.
 *
 * The size comes from the cache whenever it knows the file: it is what
 * reads return, written back or not.
 */
#include "pcfs.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>

static struct timespec now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

void times_data_changed(struct pcfs_inode *in)
{
	struct timespec t = now();
	pthread_mutex_lock(&in->lock);
	in->mtime = in->ctime = t;
	in->times_pending = true;
	in->shown_ctime_valid = true;
	pthread_mutex_unlock(&in->lock);
}

/* chmod, chown, link, rename: the backing file's ctime changed now too. */
void times_meta_changed(struct pcfs_inode *in)
{
	pthread_mutex_lock(&in->lock);
	if (in->times_pending)
		in->ctime = now();
	else
		in->shown_ctime_valid = false; /* the backing ctime is the news */
	pthread_mutex_unlock(&in->lock);
}

void times_explicit_mtime(struct pcfs_inode *in, const struct timespec *mtime)
{
	pthread_mutex_lock(&in->lock);
	if (in->times_pending) {
		in->mtime = *mtime;
		in->ctime = now();
	} else {
		in->shown_ctime_valid = false;
	}
	pthread_mutex_unlock(&in->lock);
}

/* Is everything the cache had of the file written to the backing file? */
static bool data_all_written(struct pcfs *fs, struct pcfs_inode *in)
{
	struct pc_file_info info;
	if (pc_cache_file_info(fs->cache, in->dev, in->ino, &info) != 0)
		return errno == ENOENT;
	return info.open_handles == 0 && !info.unsettled && info.dirty_bytes == 0;
}

/* Put in's pending mtime on its backing file, of descriptor fd (in->lock
 * held): 0, or -1 with errno (EBUSY: written again meanwhile). */
static int set_pending_mtime(struct pcfs *fs, struct pcfs_inode *in, int fd)
{
	struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, in->mtime };
	if (fs->cache) {
		/* Through the cache: set directly, the new ctime would make
		 * the next open drop the cached data. */
		return pc_cache_file_set_times(fs->cache, fd, tv);
	}
	/* At unmount, after the cache wrote everything back and is gone:
	 * nothing is cached any more that a new ctime could drop. */
	char name[32];
	proc_name(fd, name);
	return utimensat(fs->proc_fd, name, tv, 0);
}

bool times_try_settle(struct pcfs *fs, struct pcfs_inode *in, bool all_written)
{
	pthread_mutex_lock(&in->lock);
	bool pending = in->times_pending;
	if (pending && (all_written || data_all_written(fs, in))) {
		int fd = fd_hold(fs, in);
		int set = fd < 0 ? -1 : set_pending_mtime(fs, in, fd);
		if (fd >= 0 && set != 0 && errno == EBUSY) {
			/* Written again meanwhile: the next settling puts it. */
			fd_put(fs, in);
			pthread_mutex_unlock(&in->lock);
			return false;
		}
		if (fd < 0 && fd != -ESTALE && !all_written) {
			/* Out of descriptors for a moment: try again later. */
			pthread_mutex_unlock(&in->lock);
			return false;
		}
		/* A file that cannot take its mtime (gone: its handle is
		 * stale; read-only) keeps the backing file's. */
		struct stat st;
		if (set == 0 && fstatat(fd, "", &st, AT_EMPTY_PATH) == 0) {
			in->settled_backing_ctime = st.st_ctim;
			in->shown_ctime_valid = true;
		}
		if (fd >= 0)
			fd_put(fs, in);
		in->times_pending = pending = false;
	}
	pthread_mutex_unlock(&in->lock);
	return !pending;
}

int attr_of(struct pcfs *fs, struct pcfs_inode *in, struct stat *st)
{
	int fd = fd_hold(fs, in);
	if (fd < 0)
		return fd;
	int r = fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) ? -errno : 0;
	fd_put(fs, in);
	if (r)
		return r;
	atomic_store_explicit(&in->mode, st->st_mode, memory_order_relaxed);
	if (!S_ISREG(st->st_mode))
		return 0;
	struct pc_file_info info;
	if (fs->cache && pc_cache_file_info(fs->cache, st->st_dev, st->st_ino, &info) == 0) {
		st->st_size = info.size;
		/* Unwritten data occupies no device blocks yet: count it, so
		 * that no program takes the file for all holes. */
		blkcnt_t most = (info.size + 511) / 512, dirty = (blkcnt_t)(info.dirty_bytes / 512);
		st->st_blocks = st->st_blocks + dirty < most ? st->st_blocks + dirty : most;
		if (st->st_blocks < most && info.size > 0 && st->st_blocks == 0)
			st->st_blocks = 1;
	}
	pthread_mutex_lock(&in->lock);
	bool pending = in->times_pending;
	if (pending) {
		st->st_mtim = in->mtime;
		st->st_ctim = in->ctime;
	} else if (in->shown_ctime_valid) {
		if (same_time(st->st_ctim, in->settled_backing_ctime))
			st->st_ctim = in->ctime;
		else
			in->shown_ctime_valid = false;
	}
	pthread_mutex_unlock(&in->lock);
	if (pending)
		times_try_settle(fs, in, false);
	return 0;
}
