/*
 * fileinfo.c - pc_cache_file_info: what the cache holds of a file named by
 * its device and inode, open or closed.  A file system server (pcfs) asks
 * it to report the size of a file whose last writes are still only cached:
 * the backing file's own size would be stale until write-back settles it.
 */
#include "api/cache.h"
#include "api/file.h"
#include "api/files.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "api/process.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int pc_cache_file_info(struct pc_cache *c, dev_t dev, ino_t ino, struct pc_file_info *out)
{
	if (!c || !out) {
		errno = EINVAL;
		return -1;
	}
	memset(out, 0, sizeof(*out));
	if (cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	files_lock(c);
	struct pc_mapping *m = files_hash_find(c, dev, ino);
	if (m) {
		out->size = (off_t)atomic_load(&m->i_size);
		int64_t cached = atomic_load(&m->st_cached);
		int64_t dirty = atomic_load(&m->nr_dirty);
		out->cached_bytes = cached > 0 ? (uint64_t)cached : 0;
		out->dirty_bytes = dirty > 0 ? (uint64_t)dirty : 0;
		out->open_handles = m->nhandles > 0 ? (uint32_t)m->nhandles : 0;
		out->unsettled = m->nhandles == 0 && atomic_load(&m->closed_dirty);
	}
	files_unlock(c);
	if (!m) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* The mapping of (dev, ino), with a reference, or NULL; *busy: closed with
 * data still to be written (its write-back would change the times
 * again). */
static struct pc_mapping *fileinfo_mapping_of(struct pc_cache *c, dev_t dev, ino_t ino, bool *busy)
{
	files_lock(c);
	struct pc_mapping *m = files_hash_find(c, dev, ino);
	*busy = m && m->nhandles == 0 && atomic_load(&m->closed_dirty);
	if (m && !*busy)
		atomic_fetch_add(&m->refs, 1);
	else
		m = NULL;
	files_unlock(c);
	return m;
}

/* utimensat of the file fd is a descriptor of (O_PATH too). */
static int set_times_of(int fd, const struct timespec times[2])
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (utimensat(AT_FDCWD, path, times, 0) == 0)
		return 0;
	if (errno == ENOENT && futimens(fd, times) == 0) /* no /proc here */
		return 0;
	return errno;
}

/* Nothing but the times changed between the two stats: another program's
 * write meanwhile would show in the size or, when times[1] is explicit,
 * in the mtime. */
static bool only_times_changed(const struct stat *before, const struct stat *after, const struct timespec times[2])
{
	if (after->st_size != before->st_size)
		return false;
	if (times[1].tv_nsec == UTIME_NOW || times[1].tv_nsec == UTIME_OMIT)
		return true;
	return after->st_mtim.tv_sec == times[1].tv_sec && after->st_mtim.tv_nsec == times[1].tv_nsec;
}

int pc_cache_file_set_times(struct pc_cache *c, int fd, const struct timespec times[2])
{
	if (!c || !times) {
		errno = EINVAL;
		return -1;
	}
	if (cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	struct stat before, after;
	if (fstat(fd, &before) != 0)
		return -1; /* EBADF */
	bool busy;
	struct pc_mapping *m = fileinfo_mapping_of(c, before.st_dev, before.st_ino, &busy);
	if (busy) {
		errno = EBUSY;
		return -1;
	}
	/* The syscalls outside files_lock, which every open and close takes.
	 * Only a closed file's saved attributes are renewed (an open one's
	 * are saved when it settles), and only if nobody changed the file
	 * since they were saved: such a change must still drop the cache at
	 * the next open. */
	int err = set_times_of(fd, times);
	if (!err && m && fstat(fd, &after) == 0 && only_times_changed(&before, &after, times)) {
		files_lock(c);
		bool closed = m->nhandles == 0 && !atomic_load(&m->closed_dirty);
		if (closed && !atomic_load(&m->changed) && file_attrs_unchanged(m, &before))
			file_save_attrs(m, &after);
		files_unlock(c);
	}
	if (m)
		mapping_put(m);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
