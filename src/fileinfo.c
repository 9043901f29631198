/*
 * fileinfo.c - pc_cache_file_info: what the cache holds of a file named by
 * its device and inode, open or closed.  A file system server (pcfs) asks
 * it to report the size of a file whose last writes are still only cached:
 * the backing file's own size would be stale until write-back settles it.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

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
