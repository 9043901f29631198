/*
 * file.c - backing files: opening them with O_DIRECT, one shared mapping
 * per file in a cache (files.c keeps the table of them), the OFD lock that
 * keeps other processes out, and what happens when the last handle goes.
 *
 * A mapping outlives its handles while it holds cached data, so reopening a
 * file finds its clean data.  What happens to it after the last close is
 * closed.c's: its dirty data is written by the flusher (pc_close does not
 * wait), and its descriptor is kept for a while so that a reopen needs no
 * open(2).  The OFD lock is kept while data is unwritten and released once
 * the file is clean: another process may then use the file, so a reopen
 * compares size, mtime and ctime with what they were then and drops the
 * cached data if they changed.
 */
#include "api/file.h"
#include "mem/cache_mem.h"

#include "api/files.h"
#include "api/shared.h"

#include "io/backend.h"
#include "wb/backing.h"
#include "mem/block_state.h"
#include "api/cache.h"
#include "api/closed.h"
#include "wb/dirty.h"
#include "lib/counter.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "wb/flusher.h"
#include "mem/folio.h"
#include "io/fs_sync.h"
#include "io/io_fd.h"
#include "mem/file_slots.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "lib/radix.h"
#include "mem/reclaim.h"
#include "lib/util.h"
#include "wb/writeback.h"
#include "lib/written.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ofd_lock(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	return (errno == EAGAIN || errno == EACCES) ? -EBUSY : -errno;
}

/* Was fd opened for writing (a shared cache's description may have been
 * opened read-only where the file's permissions allow no more)? */
static bool writable_fd(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
}

/* Open the backing descriptor: O_DIRECT, or buffered if allowed.  An
 * O_WRONLY handle still needs a readable descriptor: a write of part of a
 * block reads the rest (read-modify-write), so ask for O_RDWR and fall
 * back to O_WRONLY only when the file's permissions refuse reading.  An
 * exclusive create opens without O_DIRECT and sets *lazy: the descriptor
 * gets it later (mapping.h, fd_mode; direct_unless_known says when). */
static int open_backing(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode, bool *direct,
			bool *lazy)
{
	/* The cache reads what it writes in part (the rest of a partly
	 * written block, data for later readers): a write-only handle still
	 * needs a descriptor that reads.  A shared cache's one description
	 * of the file serves every process's handles: it is opened for
	 * writing too when the file allows it, and with O_DIRECT at once
	 * (another process may get it before this one's first I/O). */
	int want = flags & O_ACCMODE;
	int acc = want == O_WRONLY || cache_shared(c) ? O_RDWR : want;
	int oflags = acc | (flags & (O_CREAT | O_EXCL | O_NOATIME | O_NOFOLLOW)) | O_CLOEXEC;
	*lazy = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL) && !cache_shared(c);
	int odirect = *lazy ? 0 : O_DIRECT;
	int fd = openat(dirfd, path, oflags | odirect, mode);
	if (fd < 0 && errno == EACCES && acc != want) {
		oflags = (oflags & ~O_ACCMODE) | want;
		fd = openat(dirfd, path, oflags | odirect, mode);
	}
	*direct = true;
	struct stat st;
	if (fd < 0 && errno == EINVAL && fstatat(dirfd, path, &st, 0) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR; /* some file systems refuse O_DIRECT on directories first */
	if (fd < 0 && errno == EINVAL && (c->cfg.flags & PC_CFG_ALLOW_BUFFERED_BACKEND)) {
		/* O_CREAT may have created it already: don't insist on O_EXCL. */
		fd = openat(dirfd, path, oflags & ~O_EXCL, mode);
		*direct = false;
		*lazy = false;
	}
	return fd < 0 ? -errno : fd;
}

/* A descriptor opened without O_DIRECT (open_backing's *lazy) may stay so
 * until its first I/O only on a file system known to do direct I/O (d:
 * its domain, probed; NULL: not known here).  Elsewhere it gets O_DIRECT
 * now, and where that is refused the open fails as an O_DIRECT open(2)
 * would, unless a buffered backend is allowed. */
static int direct_unless_known(struct pc_cache *c, const struct pc_domain *d, int fd, bool *direct, bool *lazy)
{
	if (!*lazy || (d && d->dio_off_align))
		return 0;
	*lazy = false;
	if (io_fd_set_direct(fd) == 0)
		return 0;
	if (!(c->cfg.flags & PC_CFG_ALLOW_BUFFERED_BACKEND))
		return -EINVAL;
	*direct = false;
	return 0;
}

static int choose_block_size(struct pc_cache *c, struct pc_mapping *m, const struct stat *st)
{
	unsigned off_align = 0, mem_align = 0;
	if (mproc(m)->direct) {
		off_align = m->dom->dio_off_align;
		mem_align = m->dom->dio_mem_align;
	}
	m->mem_align = off_align ? (mem_align ? mem_align : off_align) : 1;
	/*
	 * Default: the file system's block size when direct I/O allows it.
	 * The direct-I/O alignment (often 512) is only the minimum: a direct
	 * write of part of a file system block makes ext4 and XFS zero or read
	 * the rest of that block themselves and makes XFS serialise all direct
	 * writers of the file, so smaller blocks cost device reads and
	 * concurrency that per-block state would otherwise save.
	 */
	size_t bs = c->cfg.block_size;
	size_t fsb = st->st_blksize;
	if (!bs) {
		bool fsb_ok = fsb >= 512 && fsb <= 65536 && !(fsb & (fsb - 1)) && fsb <= c->cfg.max_folio_size &&
			      (!off_align || fsb % off_align == 0);
		bs = fsb_ok ? fsb : (off_align ? off_align : 4096);
	}
	if (bs < 512 || bs > 65536 || (bs & (bs - 1)) || (off_align && bs % off_align) ||
	    bs > c->cfg.max_folio_size)
		return -EINVAL;
	m->block_size = (unsigned)bs;
	m->block_shift = (unsigned)__builtin_ctz((unsigned)bs);
	m->min_order = bs > PC_PAGE_SIZE ? (unsigned)__builtin_ctz((unsigned)(bs >> PC_PAGE_SHIFT)) : 0;
	/* A smaller block shares the kernel page (or the file system block)
	 * of a buffered tail write with direct writes of its neighbours: the
	 * kernel would read the page, keep it dirty over blocks we write
	 * directly, fail to invalidate it after those writes (it records
	 * EIO for the next fsync and warns of "possible data corruption"),
	 * and could write its stale copy back over them. */
	long page = sysconf(_SC_PAGESIZE);
	m->tail_via_kernel = bs >= (size_t)(page > 0 ? page : 4096) && bs >= fsb;
	return 0;
}

/*
 * The largest file size the backing file system allows (its s_maxbytes):
 * lseek past it fails with EINVAL, so a binary search of SEEK_SET finds it
 * in at most 63 calls.  Writes and truncates beyond it fail with EFBIG at
 * the call, not later in writeback where the data could never be written.
 */
static int64_t probe_max_bytes(int fd)
{
	int64_t lo = 0, hi = INT64_MAX;
	if (lseek(fd, hi, SEEK_SET) >= 0)
		return hi;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2 + 1;
		if (lseek(fd, mid, SEEK_SET) >= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	lseek(fd, 0, SEEK_SET);
	return lo;
}

/*
 * What every file of a device shares is asked once, of its first file: the
 * largest file size (up to 63 lseeks) and the direct-I/O alignment.  (On
 * the file systems O_DIRECT is used with, both are per file system.)
 */
static void domain_probe(struct pc_domain *d, int fd, bool direct)
{
	if (d->probed || !direct)
		return;
	d->max_bytes = probe_max_bytes(fd);
	if (probe_dio_align(fd, &d->dio_off_align, &d->dio_mem_align) != 0)
		d->dio_off_align = d->dio_mem_align = 0;
	d->probed = true;
}

/* Under files_lock. */
static struct pc_mapping *file_mapping_new(struct pc_cache *c, int fd, bool direct, bool lazy, bool writable,
					   const struct stat *st, int *err)
{
	assert_held(&c->files_lock);
	struct pc_mapping *m = cache_zalloc(c, sizeof(*m));
	if (!m) {
		*err = -ENOMEM;
		return NULL;
	}
	m->c = c;
	m->lockcx = cache_lockcx(c);
	*err = file_slot_get(m);
	if (*err) {
		cache_free(c, m);
		return NULL;
	}
	struct pc_mapping_proc *mp = mproc(m);
	mp->fd = fd;
	mp->direct = direct;
	mp->writable = writable;
	m->dev = st->st_dev;
	m->ino = st->st_ino;
	atomic_store(&m->i_size, st->st_size);
	atomic_store(&m->disk_size, st->st_size);
	atomic_store(&m->data_end, st->st_size);
	written_init(&m->written, (uint64_t)st->st_size, cache_lockcx(c));
	atomic_store(&m->alloc_end, st->st_size);
	m->alloc_base = (uint64_t)st->st_size;
	*err = domain_get(c, st->st_dev, &m->dom);
	if (!*err) {
		domain_probe(m->dom, fd, direct);
		*err = direct_unless_known(c, m->dom, fd, &direct, &lazy);
	}
	if (!*err) {
		mp->direct = direct;
		atomic_store(&mp->fd_mode, lazy ? FD_DIRECT_LATER : FD_AS_OPENED);
		*err = choose_block_size(c, m, st);
	}
	if (*err) {
		cache_free(c, written_destroy(&m->written));
		file_slot_put(m); /* the caller closes fd */
		cache_free(c, m);
		return NULL;
	}
	/* Device writes are whole blocks: the last block must fit too. */
	int64_t max = m->dom->probed && direct ? m->dom->max_bytes : probe_max_bytes(fd);
	m->max_bytes = (int64_t)round_down((uint64_t)max, m->block_size);
	atomic_store(&m->reserve_end, (int64_t)round_up((uint64_t)st->st_size, m->block_size));
	shmutex_init(&m->size_lock);
	shrwlock_init_prefer_readers(&m->inval_lock);
	shrwlock_init(&m->tree_lock);
	shmutex_init(&m->advice_lock);
	rt_init(&m->tree, &c->node_pool);
	if (cache_shared(c))
		counter_make_atomic(&m->hits); /* threads of two processes may share a slot */
	atomic_store(&m->refs, 1); /* the hash table's */
	return m;
}

void file_discard_all(struct pc_mapping *m)
{
	uint64_t idx = 0;
	struct pc_folio *batch[32];
	unsigned n;
	while ((n = mapping_gather(m, &idx, UINT64_MAX, -1, batch, 32))) {
		for (unsigned i = 0; i < n; i++) {
			struct pc_folio *f = batch[i];
			folio_lock(f);
			folio_wait_clear(f, PF_WRITEBACK);
			if (folio_test(f, PF_INDEXED)) {
				size_t d = bs_invalidate_blocks(m, f, 0, folio_size(f), false);
				account_dirty(m, f, -(int64_t)d);
				mapping_remove_folio(m, f);
			}
			folio_unlock(f);
			reclaim_release_folio(m->c, f);
		}
		idx = 0;
	}
}

/* A write-back error of m that no handle reported goes to the cache, for
 * pc_cache_destroy to report (m's own errseq then has nothing unseen). */
static void hand_unseen_error_to_cache(struct pc_mapping *m)
{
	uint64_t none = 0;
	if (errseq_unseen(&m->wb_err))
		atomic_store(&m->c->orphan_error, errseq_check_and_advance(&m->wb_err, &none));
}

/*
 * The part of a mapping's teardown above the memory layer (mapping_put,
 * in mapping.c, calls it through the cache's hook, installed by
 * file_layer_init): its folios discarded, dirty data and all (nothing
 * holds the file any more), and a write error no handle reported handed
 * to the cache for pc_cache_destroy to report.
 */
static void file_mapping_teardown(struct pc_mapping *m)
{
	file_discard_all(m);
	failing_clear(m);
	hand_unseen_error_to_cache(m); /* pc_cache_destroy reports it */
}

void file_layer_init(struct pc_cache *c)
{
	cache_proc(c)->mapping_teardown = file_mapping_teardown;
}

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

bool file_attrs_unchanged(const struct pc_mapping *m, const struct stat *st)
{
	return st->st_size == m->saved_size && same_time(st->st_mtim, m->saved_mtime) &&
	       same_time(st->st_ctim, m->saved_ctime);
}

/* Reopened after it was left alone: drop the cache if the file changed. */
static void revalidate(struct pc_mapping *m, const struct stat *st)
{
	if (file_attrs_unchanged(m, st))
		return;
	/* Someone else wrote: no block is known to be a hole any more. */
	written_reset(&m->written, UINT64_MAX);
	atomic_raise_i64(&m->data_end, st->st_size);
	if (atomic_load(&m->nr_dirty) <= 0) {
		/* (Else our unwritten data wins: it is written over the change.) */
		file_discard_all(m);
		atomic_store(&m->i_size, st->st_size);
		atomic_store(&m->disk_size, st->st_size);
		atomic_store(&m->data_end, st->st_size);
		written_reset(&m->written, (uint64_t)st->st_size);
		atomic_store(&m->alloc_end, st->st_size);
		atomic_store(&m->reserve_end, (int64_t)round_up((uint64_t)st->st_size, m->block_size));
		m->alloc_base = (uint64_t)st->st_size;
	}
	file_save_attrs(m, st); /* what this cache now holds */
}

void file_save_attrs(struct pc_mapping *m, const struct stat *st)
{
	m->saved_size = st->st_size;
	m->saved_mtime = st->st_mtim;
	m->saved_ctime = st->st_ctim;
	atomic_store(&m->changed, false);
}

/* Does the file's lock exclude readers?  Once it has a writer, until the
 * file is settled.  A shared cache's one description holds the lock for
 * every process of the cache, so whether it is a write lock is the
 * mapping's to say, not one process's entry's. */
static bool *wrlocked_of(struct pc_mapping *m)
{
	return cache_shared(m->c) ? &m->desc_wrlocked : &mproc(m)->wrlocked;
}

/* Give a read-only mapping the writable descriptor fd and a write lock. */
static int upgrade_to_writable(struct pc_mapping *m, int fd)
{
	struct pc_mapping_proc *mp = mproc(m);
	ofd_lock(mp->fd, F_UNLCK);
	int err = ofd_lock(fd, F_WRLCK);
	if (err) {
		/* Put back the read lock its handles hold; a closed, settled
		 * mapping held none. */
		if (m->nhandles > 0)
			ofd_lock(mp->fd, F_RDLCK);
		return err;
	}
	if (mp->old_fd >= 0)
		close(mp->old_fd);
	mp->old_fd = mp->fd; /* I/O may still be in flight on it */
	mp->fd = fd;
	atomic_store(&mp->fd_mode, FD_AS_OPENED); /* direct_unless_known ran */
	mp->writable = true;
	*wrlocked_of(m) = true;
	return 0;
}

/* Remember the mode and owner open(2) checked access against. */
static void note_open_attrs(struct pc_mapping *m, const struct stat *st)
{
	m->open_mode = st->st_mode;
	m->open_uid = st->st_uid;
	m->open_gid = st->st_gid;
}

/*
 * Can a handle reuse the descriptor the mapping holds, with no open(2)?
 * It must do what the handle needs, and the file's mode and owner must be
 * what open(2) last checked access against (a chmod or chown since then:
 * open again, and let the kernel say).  The caller's own credentials are
 * taken as unchanged.
 */
static bool can_reuse_fd(struct pc_mapping *m, bool want_write, const struct stat *st)
{
	struct pc_mapping_proc *mp = mproc(m);
	return mp->fd >= 0 && (mp->writable || !want_write) && st->st_mode == m->open_mode && st->st_uid == m->open_uid &&
	       st->st_gid == m->open_gid;
}

/* Reopened after it was left alone, the lock taken: did another program
 * change the file meanwhile?  Asked now, under the lock (a stat before it
 * could miss a change made just before the lock). */
static void revalidate_locked(struct pc_mapping *m)
{
	struct stat st;
	if (fstat(mproc(m)->fd, &st) == 0)
		revalidate(m, &st);
	else
		file_discard_all(m); /* cannot tell: keep nothing */
}

static bool lock_for_writing(const struct pc_mapping *m, bool want_write)
{
	return want_write && mproc(m)->writable;
}

/* A handle of m is opened (files_lock held): lock the file as much as it
 * needs, and take it off the closed lists. */
static int attach_handle(struct pc_mapping *m, bool want_write)
{
	struct pc_mapping_proc *mp = mproc(m);
	assert_held(&m->c->files_lock);
	int err = 0;
	if (want_write && !mp->writable)
		return -EACCES; /* a shared description that cannot write */
	bool *wrlocked = wrlocked_of(m);
	if (m->nhandles == 0 && !m->closed_dirty) {
		/* Reopened after a clean close: the lock was released. */
		*wrlocked = lock_for_writing(m, want_write);
		err = ofd_lock(mp->fd, *wrlocked ? F_WRLCK : F_RDLCK);
		if (err)
			return err;
		revalidate_locked(m);
	} else if (want_write && !*wrlocked) {
		/* Converts this description's read lock in place. */
		err = ofd_lock(mp->fd, F_WRLCK);
		if (err)
			return err;
		*wrlocked = true;
	}
	closed_reopened(m->c, m);
	m->nhandles++;
	mp->nhandles++;
	atomic_fetch_add(&m->refs, 1);
	return 0;
}

/*
 * Shared caches.  A file has one open file description in the cache,
 * whose OFD lock is every process's (docs/shared.md, section 17): the
 * first process to need it opens it; the others get a descriptor of it
 * from a process that holds one (api/shared.c, over a Unix socket), and
 * hold it with a reference to the mapping (m->holders, file_hold) until
 * they let go of the file or leave the cache.  A descriptor that comes
 * without open(2) is checked as open(2) would have: access for this
 * process's credentials (faccessat), then the file is the mapping's.
 */
/* This process starts to hold m: its part of the file's domain (its I/O
 * queue, its flushers) starts with its first file there, and its entry
 * becomes m's, with no descriptor yet.  0 or a negative errno. */
static int hold_start(struct pc_mapping *m)
{
	struct pc_domain *d;
	int err = domain_get(m->c, m->dev, &d);
	return err ? err : file_entry_claim(m);
}

static int take_from_holder(struct pc_mapping *m, int dirfd, const char *path, int flags, const struct stat *st)
{
	assert_held(&m->c->files_lock);
	int acc = flags & O_ACCMODE;
	int amode = (acc != O_WRONLY ? R_OK : 0) | (acc != O_RDONLY ? W_OK : 0);
	int at = AT_EACCESS | ((flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0);
	if (faccessat(dirfd, path, amode, at) != 0)
		return -errno;
	int fd = shared_fd_from_holders(m);
	if (fd < 0)
		return fd;
	struct stat got;
	int err = fstat(fd, &got) != 0 ? -errno : 0;
	if (!err && (got.st_dev != st->st_dev || got.st_ino != st->st_ino))
		err = -EBUSY; /* not the file asked for: cannot happen while it is held */
	if (!err)
		err = hold_start(m);
	if (err) {
		close(fd);
		return err;
	}
	int fl = fcntl(fd, F_GETFL);
	struct pc_mapping_proc *mp = mproc(m);
	mp->fd = fd;
	mp->writable = (fl & O_ACCMODE) != O_RDONLY;
	mp->direct = (fl & O_DIRECT) != 0;
	mp->noatime = (fl & O_NOATIME) != 0;
	atomic_store(&mp->fd_mode, FD_AS_OPENED);
	file_hold(m);
	return 0;
}

/* Reopen a file whose mapping holds its descriptor (in a shared cache:
 * this process's, or another's that it hands over): no open(2).  Returns
 * the mapping, or NULL when open(2) is needed. */
static struct pc_mapping *reopen_cached(struct pc_cache *c, int dirfd, const char *path, int flags,
					 const struct stat *st, int *err)
{
	bool want_write = (flags & O_ACCMODE) != O_RDONLY;
	*err = 0;
	files_lock(c);
	struct pc_mapping *m = files_hash_find(c, st->st_dev, st->st_ino);
	bool took = false; /* a shared cache's hold taken for this open */
	if (m && cache_shared(c) && !file_held_here(m)) {
		if (file_held_by_others(m)) {
			*err = take_from_holder(m, dirfd, path, flags, st);
			took = !*err;
		} else {
			m = NULL; /* nobody holds it: open(2) */
		}
	}
	bool reused = m && !*err && can_reuse_fd(m, want_write, st);
	if (reused)
		*err = attach_handle(m, want_write);
	if (took && (!reused || *err))
		file_unhold(m);
	if (!reused)
		m = NULL;
	files_unlock(c);
	return *err ? NULL : m;
}

/* A mapping whose descriptor was released gets the new one. */
static void adopt_fd(struct pc_mapping *m, int fd, bool direct, bool writable)
{
	struct pc_mapping_proc *mp = mproc(m);
	mp->fd = fd;
	mp->direct = direct;
	atomic_store(&mp->fd_mode, FD_AS_OPENED); /* direct_unless_known ran */
	mp->writable = writable;
	*wrlocked_of(m) = false;
}


/* Open with open(2): a new mapping, or the descriptor for an old one. */
static int open_backing_file(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode,
			     struct pc_mapping **out)
{
	bool want_write = (flags & O_ACCMODE) != O_RDONLY;
	bool direct, lazy;
	int fd = open_backing(c, dirfd, path, flags, mode, &direct, &lazy);
	if (fd == -EMFILE || fd == -ENFILE) {
		/* Out of descriptors: the closed files' go first. */
		closed_release_fds(c);
		fd = open_backing(c, dirfd, path, flags, mode, &direct, &lazy);
	}
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	int err = 0;
	files_lock(c);
	struct pc_mapping *m = files_hash_find(c, st.st_dev, st.st_ino);
	/* Created by this open (O_EXCL), yet the cache knows its inode
	 * number, without a descriptor: that file was deleted and its number
	 * reused.  Its data is dropped by the revalidation that follows (the
	 * times differ); a write error of it nobody heard is the cache's to
	 * report at pc_cache_destroy, not the new file's. */
	if (m && (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		hand_unseen_error_to_cache(m);
	/* A known file's descriptor is not replaced lazily. */
	if (m)
		err = direct_unless_known(c, NULL, fd, &direct, &lazy);
	bool took = false; /* a shared cache's hold taken for this open */
	if (m && !err && cache_shared(c) && !file_held_here(m)) {
		took = true;
		if (file_held_by_others(m)) {
			close(fd); /* the cache's description is the one to use */
			fd = -1;
			err = take_from_holder(m, dirfd, path, flags, &st);
		} else {
			err = hold_start(m);
			if (!err)
				file_hold(m); /* adopts fd below */
		}
		took = !err;
	}
	if (m && !err) {
		struct pc_mapping_proc *mp = mproc(m);
		bool adopted = mp->fd < 0;
		if (adopted) {
			adopt_fd(m, fd, direct, cache_shared(c) ? writable_fd(fd) : want_write);
			fd = -1;
		} else if (want_write && !mp->writable && fd >= 0 && !file_held_by_others(m)) {
			err = upgrade_to_writable(m, fd);
			if (!err)
				fd = -1;
		}
		if (fd < 0)
			mp->noatime = flags & O_NOATIME; /* the descriptor is this open's */
		if (!err) {
			note_open_attrs(m, &st);
			err = attach_handle(m, want_write);
		}
		if (err && adopted) {
			fd = mp->fd; /* closed below: the mapping stays without one */
			mp->fd = -1;
		}
		if (err && took)
			file_unhold(m); /* held for this open only */
	} else if (!m) {
		m = file_mapping_new(c, fd, direct, lazy, cache_shared(c) ? writable_fd(fd) : want_write, &st, &err);
		if (m) {
			struct pc_mapping_proc *mp = mproc(m);
			bool *wrlocked = wrlocked_of(m);
			*wrlocked = lock_for_writing(m, want_write);
			err = want_write && !mp->writable ? -EACCES : ofd_lock(fd, *wrlocked ? F_WRLCK : F_RDLCK);
			if (err) {
				mp->fd = -1;
				mapping_put(m);
				m = NULL;
			} else {
				fd = -1;
				mp->noatime = flags & O_NOATIME;
				note_open_attrs(m, &st);
				file_save_attrs(m, &st);
				files_hash_insert(c, m);
				m->nhandles = 1;
				mp->nhandles = 1;
				atomic_fetch_add(&m->refs, 1);
				if (cache_shared(c))
					file_hold(m);
			}
		}
	}
	files_unlock(c);
	if (fd >= 0)
		close(fd);
	if (err)
		return err;
	*out = m;
	return 0;
}

int file_open(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode, struct pc_mapping **out)
{
	bool excl = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	struct stat st;
	/* stat first: a FIFO's open(2) would wait for a peer (O_DIRECT is
	 * refused only after that), and a file whose mapping holds its
	 * descriptor is reopened without open(2).  O_NOFOLLOW: a symlink is
	 * refused as open(2) refuses it. */
	int at = (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0;
	if (!excl && (flags & O_CREAT)) {
		/* A create is tried exclusively first: a new file cannot be a
		 * FIFO or cached, so it needs no stat (a directory lookup that
		 * costs a create as much as its open(2) does, e.g. tar x or a
		 * compiler writing objects).  Any answer but "exists" is the
		 * one O_CREAT alone would have given. */
		int err = open_backing_file(c, dirfd, path, flags | O_EXCL, mode, out);
		if (err != -EEXIST)
			return err;
	}
	if (!excl && fstatat(dirfd, path, &st, at) == 0) {
		if (S_ISLNK(st.st_mode))
			return -ELOOP;
		if (!S_ISREG(st.st_mode))
			return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		int err;
		struct pc_mapping *m = reopen_cached(c, dirfd, path, flags, &st, &err);
		if (err)
			return err;
		if (m) {
			*out = m;
			return 0;
		}
	}
	return open_backing_file(c, dirfd, path, flags, mode, out);
}

void file_release(struct pc_mapping *m)
{
	struct pc_cache *c = m->c;
	bool settle = false;
	files_lock(c);
	/* The last handle went: closed.c keeps the file (and drops it if it
	 * was unlinked, when it settles it or sweeps). */
	mproc(m)->nhandles--;
	if (--m->nhandles == 0)
		settle = closed_add(c, m);
	files_unlock(c);
	/* Clean already: settled here, so that another process can open the
	 * file once pc_close returns (settling releases the lock), when that
	 * is cheap: the backing file has its size.  Cutting it to size waits
	 * for the device (ftruncate of a block written whole, e.g. by
	 * pc_flush without wait, and sync_file_range): the flusher does that,
	 * as for any closed file, and the close does not wait, unless it
	 * waits anyway (close-to-open; closed files holding too many
	 * descriptors, when the closer gives its own back). */
	bool sized = atomic_load(&m->disk_size) == atomic_load(&m->i_size);
	if (settle && (sized || closed_must_wait(c) || closed_fd_pressure(c)))
		closed_settle(m);
	else if (settle)
		flusher_kick(m->dom);
	mapping_put(m); /* the handle's reference */
}
