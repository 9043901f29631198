/*
 * fileinfo.c - pc_cache_file_info: what the cache holds of a file named by
 * its device and inode, open or closed.  A file system server (pcfs) asks
 * it to report the size of a file whose last writes are still only cached:
 * the backing file's own size would be stale until write-back settles it.
 */
#include "internal.h"

#include <errno.h>
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
	pthread_mutex_lock(&c->files_lock);
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
	pthread_mutex_unlock(&c->files_lock);
	if (!m) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* The descriptor of a cached file, with a reference, or NULL: ENOENT
 * (nothing cached, or no descriptor kept), EBUSY (closed with data still
 * to be written: its write-back would change the times again). */
static struct pc_mapping *mapping_with_fd(struct pc_cache *c, dev_t dev, ino_t ino, int *fd, int *err)
{
	pthread_mutex_lock(&c->files_lock);
	struct pc_mapping *m = files_hash_find(c, dev, ino);
	*err = 0;
	if (!m || m->fd < 0)
		*err = ENOENT;
	else if (m->nhandles == 0 && atomic_load(&m->closed_dirty))
		*err = EBUSY;
	if (*err) {
		m = NULL;
	} else {
		atomic_fetch_add(&m->refs, 1);
		*fd = m->fd;
	}
	pthread_mutex_unlock(&c->files_lock);
	return m;
}

int pc_cache_file_set_times(struct pc_cache *c, dev_t dev, ino_t ino, const struct timespec times[2])
{
	if (!c || !times) {
		errno = EINVAL;
		return -1;
	}
	if (cache_inherited(c)) {
		errno = EPERM;
		return -1;
	}
	int fd, err;
	struct pc_mapping *m = mapping_with_fd(c, dev, ino, &fd, &err);
	if (!m) {
		errno = err;
		return -1;
	}
	/* The syscalls outside files_lock, which every open and close takes.
	 * Only a closed file's saved attributes are renewed (an open one's
	 * are saved when it settles), and only if nobody changed the file
	 * since they were saved: such a change must still drop the cache at
	 * the next open. */
	struct stat before, after;
	bool was_saved = fstat(fd, &before) == 0;
	err = futimens(fd, times) == 0 ? 0 : errno;
	if (!err && was_saved && fstat(fd, &after) == 0) {
		pthread_mutex_lock(&c->files_lock);
		bool closed = m->nhandles == 0 && !atomic_load(&m->closed_dirty) && m->fd == fd;
		/* And nothing but the times changed between the two stats
		 * (another program's write meanwhile would show in the size
		 * or, when times[1] is explicit, in the mtime). */
		bool only_times = after.st_size == before.st_size &&
				  (times[1].tv_nsec == UTIME_NOW || times[1].tv_nsec == UTIME_OMIT ||
				   (after.st_mtim.tv_sec == times[1].tv_sec && after.st_mtim.tv_nsec == times[1].tv_nsec));
		if (closed && only_times && !atomic_load(&m->changed) && mapping_attrs_unchanged(m, &before))
			mapping_save_attrs(m, &after);
		pthread_mutex_unlock(&c->files_lock);
	}
	mapping_put(m);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}
