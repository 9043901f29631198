/*
 * ops_data.c - file data, all of it through pagecache: one pc_file handle
 * per FUSE open, opened relative to the inode's O_PATH descriptor (which
 * stays open while the file is: fds.c).
 *
 * What programs ask for maps to pagecache's flags: an O_DIRECT open is a
 * PC_DIRECT handle; O_DSYNC / O_SYNC opens, and writes the kernel flags
 * O_DSYNC / O_SYNC (RWF_DSYNC, RWF_SYNC: there is no separate fsync
 * request for them), are PC_DSYNC writes; -o uncached= adds PC_DONTCACHE.
 *
 * close(2) sends FLUSH, which reports the errors pc_close would (and
 * starts write-back: pc_flush; for a file truncated to zero and written
 * again, writes it back and waits, as ext4 does: inode.c); RELEASE,
 * which comes later and asynchronously, closes the handle.  Nothing
 * depends on RELEASE having run when close() returns.
 */
#include "pcfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

static struct pcfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct pcfs_handle *handle_of(struct fuse_file_info *fi)
{
	return (struct pcfs_handle *)(uintptr_t)fi->fh;
}

/* The flags pc_openat takes for an open(2) with flags fl.  O_RDONLY |
 * O_TRUNC truncates, as on Linux's own file systems: the kernel checked
 * write permission for the O_TRUNC, and it sends no writes on a
 * read-only descriptor, so the backing file may be opened for writing. */
static int pc_open_flags(int fl)
{
	int acc = fl & O_ACCMODE;
	if ((fl & O_TRUNC) && acc == O_RDONLY)
		acc = O_RDWR;
	return acc | (fl & (O_DSYNC | O_SYNC | O_DIRECT | O_NOATIME | O_TRUNC));
}

/* PC_DONTCACHE by -o uncached=, for a request of len bytes. */
static int uncached_flag(const struct pcfs *fs, size_t len)
{
	switch (fs->opt.uncached) {
	case UNCACHED_ALWAYS:
		return PC_DONTCACHE;
	case UNCACHED_SIZE:
		return len >= fs->opt.uncached_min ? PC_DONTCACHE : 0;
	default:
		return 0;
	}
}

/* O_DSYNC in an open's or a write's flags (O_SYNC includes its bit). */
static int dsync_flag(int fl)
{
	return (fl & O_DSYNC) ? PC_DSYNC : 0;
}

/* pc_openat, as the daemon, of name in the directory inode `in`, or of
 * `in` itself (name NULL); retried when out of descriptors (fds_retry).
 * NULL with errno.  Never with the caller's ids on (create_as_caller
 * says why). */
static struct pc_file *open_at_inode(struct pcfs *fs, struct pcfs_inode *in, const char *name, int flags,
				     mode_t mode)
{
	int fd = fd_hold(fs, in);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	char self[32];
	int dirfd = fd;
	if (!name) {
		proc_name(fd, self);
		name = self;
		dirfd = fs->proc_fd;
	}
	struct pc_file *pf = fds_pc_openat(fs, dirfd, name, flags, mode);
	int err = errno;
	fd_put(fs, in);
	errno = err;
	return pf;
}

/* __FMODE_EXEC in an open's flags: the kernel opens a program to run it. */
#define PCFS_FMODE_EXEC 040

/*
 * May the caller of req open `name` in the directory inode `in` (NULL:
 * `in` itself) with the open(2) flags fl?  0 or an errno.  Asked of the
 * backing file system as the caller (its modes and ACLs, the caller's
 * groups), at every open: the file itself is then opened by the daemon,
 * because pagecache shares one descriptor of a file among all its
 * handles, of every user (it reuses a cached file's without an open(2);
 * one that only a write-only user opened could not serve a reader).  A
 * program opened to be run needs execute permission, not read.
 */
static int caller_may_open_at(fuse_req_t req, int dirfd, const char *name, int at_flags, int fl)
{
	int cr = creds_begin(req, 0);
	int acc = fl & O_ACCMODE, mode = 0, err = cr < 0 ? -cr : 0;
	if (acc != O_WRONLY)
		mode |= (fl & PCFS_FMODE_EXEC) ? X_OK : R_OK;
	if (acc != O_RDONLY || (fl & O_TRUNC))
		mode |= W_OK;
	if (cr > 0 && faccessat(dirfd, name, mode, AT_EACCESS | at_flags) != 0)
		err = errno;
	creds_end(cr);
	return err;
}

static int may_open(fuse_req_t req, struct pcfs_inode *in, const char *name, int fl)
{
	struct pcfs *fs = fs_of(req);
	int fd = fd_hold(fs, in);
	if (fd < 0)
		return -fd;
	char self[32];
	if (!name)
		proc_name(fd, self);
	int err = name ? caller_may_open_at(req, fd, name, AT_SYMLINK_NOFOLLOW, fl)
		       : caller_may_open_at(req, fs->proc_fd, self, 0, fl);
	fd_put(fs, in);
	return err;
}

/*
 * Open the file that an O_CREAT found already there, as open(2) would for
 * the caller: the name is looked up once (O_PATH, no symlink followed),
 * and the check and the open both go through that descriptor, so the file
 * checked is the file opened: a name swapped in the backing directory
 * between two lookups cannot be.  NULL with errno (ENOENT: gone meanwhile).
 * fl: pc_open_flags of the caller's (with O_NOFOLLOW); want: the access
 * mode asked.
 */
static struct pc_file *open_existing(fuse_req_t req, struct pcfs_inode *dir, const char *name, int fl, int want)
{
	struct pcfs *fs = fs_of(req);
	int dirfd = fd_hold(fs, dir);
	if (dirfd < 0) {
		errno = -dirfd;
		return NULL;
	}
	int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int err = pfd < 0 ? errno : 0;
	fd_put(fs, dir);
	struct stat st;
	if (!err && fstat(pfd, &st) != 0)
		err = errno;
	if (!err && S_ISLNK(st.st_mode))
		err = ELOOP; /* O_NOFOLLOW's answer */
	char self[32];
	if (!err) {
		proc_name(pfd, self);
		err = caller_may_open_at(req, fs->proc_fd, self, 0, (fl & ~O_ACCMODE) | want);
	}
	struct pc_file *pf = NULL;
	/* O_NOFOLLOW would refuse /proc's link; the name is not looked up again. */
	if (!err && !(pf = fds_pc_openat(fs, fs->proc_fd, self, fl & ~(O_CREAT | O_EXCL | O_NOFOLLOW), 0)))
		err = errno;
	if (pfd >= 0)
		close(pfd);
	errno = err;
	return pf;
}

/*
 * Create `name` in dir as the caller of req (O_EXCL, with its umask): the
 * file is the caller's from the start.  Only the open(2) is the caller's:
 * pagecache is asked as the daemon, through /proc/self/fd, because it
 * may start threads (a device's flusher and I/O queue, at its first
 * file), and a thread started while the caller's ids are on would keep
 * them for the daemon's life.  A root caller needs no switch: pagecache
 * creates the file itself then, and knows it new (no O_DIRECT until its
 * first write-back, see pc_openat).
 */
static void remove_created(struct pcfs *fs, struct pcfs_inode *dir, const char *name);

static struct pc_file *create_as_caller(fuse_req_t req, struct pcfs_inode *dir, const char *name, int fl,
					mode_t mode)
{
	struct pcfs *fs = fs_of(req);
	int dirfd = fd_hold(fs, dir);
	if (dirfd < 0) {
		errno = -dirfd;
		return NULL;
	}
	int cr = creds_begin(req, CREDS_UMASK);
	if (cr <= 0) {
		fd_put(fs, dir);
		if (cr < 0) {
			errno = -cr;
			return NULL;
		}
		return open_at_inode(fs, dir, name, fl | O_CREAT | O_EXCL, mode);
	}
	int cfd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
	int err = errno;
	creds_end(cr);
	fd_put(fs, dir);
	if (cfd < 0) {
		errno = err;
		return NULL;
	}
	char self[32];
	proc_name(cfd, self);
	/* O_NOFOLLOW would refuse /proc's link; O_TRUNC has nothing to cut. */
	int ofl = fl & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOFOLLOW);
	struct pc_file *pf = fds_pc_openat(fs, fs->proc_fd, self, ofl, 0);
	err = errno;
	close(cfd);
	if (!pf)
		remove_created(fs, dir, name);
	errno = err;
	return pf;
}

/*
 * Open `name` in dir, creating it if it does not exist (*created: this
 * call made it); `excl`: fail with EEXIST if it does.  Created as the
 * caller of req (creds_begin, with its umask): a file made here is the
 * caller's from the start, and nothing is given away by name afterwards.
 * The file is first opened O_EXCL; one that someone else created
 * meanwhile (after the kernel found no such name) is opened as open(2)
 * would open it for the caller: if the caller may (may_open).  fl:
 * pc_open_flags of the caller's; want: the access mode asked
 * (pc_open_flags makes O_RDONLY | O_TRUNC read-write).
 */
static struct pc_file *create_at_inode(fuse_req_t req, struct pcfs_inode *dir, const char *name, int fl,
				       int want, mode_t mode, bool excl, bool *created)
{
	for (int try = 0; try < 8; try++) {
		struct pc_file *pf = create_as_caller(req, dir, name, fl, mode);
		*created = pf != NULL;
		if (pf || errno != EEXIST || excl)
			return pf;
		pf = open_existing(req, dir, name, fl, want);
		if (pf || errno != ENOENT)
			return pf; /* it existed: opened as it is, or refused */
		/* Removed meanwhile: create it again. */
	}
	errno = EEXIST;
	return NULL;
}

/* A file this call created and cannot keep (the caller is told it failed). */
static void remove_created(struct pcfs *fs, struct pcfs_inode *dir, const char *name)
{
	int dirfd = fd_hold(fs, dir);
	if (dirfd < 0)
		return;
	unlinkat(dirfd, name, 0);
	fd_put(fs, dir);
}

/* A FUSE open of in: the inode keeps its descriptor open meanwhile (a file
 * unlinked while open could not be reopened by handle). */
static struct pcfs_handle *handle_new(struct pcfs *fs, struct pcfs_inode *in, struct pc_file *pf, int fl)
{
	struct pcfs_handle *h = calloc(1, sizeof(*h));
	int fd = h ? fd_hold(fs, in) : -ENOMEM;
	if (fd < 0) {
		free(h);
		errno = -fd;
		return NULL;
	}
	h->pf = pf;
	h->in = in;
	h->write_flags = dsync_flag(fl);
	inode_open_count(fs, in, 1);
	return h;
}

static int handle_close(struct pcfs *fs, struct pcfs_handle *h)
{
	int err = 0;
	if (h->pf && pc_close(h->pf) != 0)
		err = errno;
	if (h->in) {
		inode_open_count(fs, h->in, -1);
		fd_put(fs, h->in);
		user_fd_put(fs, h->uid); /* limits per user */
	}
	free(h->text);
	free(h);
	return err;
}

/*
 * As the kernel's file_remove_privs, for a write or a truncate of `in`
 * (node id ino): a caller without CAP_FSETID (not root) clears S_ISUID,
 * and S_ISGID where group-execute is set or the caller is not in the
 * file's group, so that nobody can put code in another user's set-ID
 * program.  The kernel leaves this to the daemon (direct I/O writes; the
 * truncate of an O_TRUNC open), and the data reaches the backing file
 * later, written by the daemon, as root.  Costs nothing but a load
 * unless the cached mode has one of the bits.
 */
static void kill_privs(fuse_req_t req, struct pcfs_inode *in, fuse_ino_t ino)
{
	struct pcfs *fs = fs_of(req);
	unsigned cached = atomic_load_explicit(&in->mode, memory_order_relaxed);
	if (!(cached & (S_ISUID | S_ISGID)) || !S_ISREG(cached) || fuse_req_ctx(req)->uid == 0)
		return;
	int fd = fd_hold(fs, in);
	if (fd < 0)
		return;
	struct stat st;
	mode_t kill = 0;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0) {
		kill = st.st_mode & S_ISUID;
		if ((st.st_mode & S_ISGID) && ((st.st_mode & S_IXGRP) || !creds_caller_in_group(req, st.st_gid)))
			kill |= S_ISGID;
		char name[32];
		proc_name(fd, name);
		if (kill && fchmodat(fs->proc_fd, name, st.st_mode & 07777 & ~kill, 0) != 0) {
			pcfs_log(LOG_ERR, "cannot clear the set-ID bits of a file written by uid %u: %s",
				 (unsigned)fuse_req_ctx(req)->uid, strerror(errno));
			kill = 0;
		}
		atomic_store_explicit(&in->mode, st.st_mode & ~kill, memory_order_relaxed);
	}
	fd_put(fs, in);
	if (kill) {
		times_meta_changed(in);
		/* The kernel's cached mode has the bits still. */
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	if (ino == PCFS_STATS_INO) {
		stats_open(req, fi);
		return;
	}
	struct pcfs_inode *in = inode_of(req, ino);
	uid_t uid;
	if (!user_fd_take_or_reply(req, &uid)) /* limits per user */
		return;
	/* The kernel checked the caller's rights (and ACLs, FUSE_POSIX_ACL);
	 * the backing file system checks them again. */
	int err = may_open(req, in, NULL, fi->flags);
	struct pc_file *pf = err ? (errno = err, NULL) : open_at_inode(fs, in, NULL, pc_open_flags(fi->flags), 0);
	struct pcfs_handle *h = pf ? handle_new(fs, in, pf, fi->flags) : NULL;
	if (!h) {
		err = errno;
		if (pf)
			pc_close(pf);
		user_fd_put(fs, uid); /* limits per user */
		fuse_reply_err(req, err);
		return;
	}
	h->uid = uid; /* limits per user */
	if (fi->flags & O_TRUNC) {
		kill_privs(req, in, ino);
		times_data_changed(in);
		inode_mark_emptied(in);
	}
	if (reply_open_direct(req, (uint64_t)(uintptr_t)h) == -ENOENT)
		handle_close(fs, h); /* the open was interrupted */
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_inode *dir = inode_of(req, parent);
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (pcfs_is_stats_name(parent, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	uid_t uid;
	if (!user_fd_take_or_reply(req, &uid)) /* limits per user */
		return;
	int fl = pc_open_flags(fi->flags) | O_NOFOLLOW;
	bool created;
	struct pc_file *pf = create_at_inode(req, dir, name, fl, fi->flags & O_ACCMODE, mode, fi->flags & O_EXCL,
					     &created);
	if (!pf) {
		user_fd_put(fs, uid); /* limits per user */
		fuse_reply_err(req, errno);
		return;
	}
	int err;
	struct fuse_entry_param e;
	err = entry_lookup(fs, dir, name, &e);
	struct pcfs_handle *h = err ? NULL : handle_new(fs, (struct pcfs_inode *)(uintptr_t)e.ino, pf, fi->flags);
	if (!h) {
		if (!err) {
			err = -errno;
			inode_forget(fs, (struct pcfs_inode *)(uintptr_t)e.ino, 1);
		}
		pc_close(pf);
		if (created) /* the caller is told it failed: leave no file behind */
			remove_created(fs, dir, name);
		user_fd_put(fs, uid); /* limits per user */
		fuse_reply_err(req, -err);
		return;
	}
	h->uid = uid; /* limits per user */
	if (!created && (fi->flags & O_TRUNC)) {
		/* An existing file truncated by this create: as an O_TRUNC
		 * open, its set-ID bits go and its rewrite is written back at
		 * close (inode_mark_emptied). */
		kill_privs(req, h->in, e.ino);
		inode_mark_emptied(h->in);
	}
	times_data_changed(h->in);
	if (reply_create_direct(req, &e, (uint64_t)(uintptr_t)h) == -ENOENT) {
		struct pcfs_inode *in = h->in;
		handle_close(fs, h);
		inode_forget(fs, in, 1);
	}
}

/* Spans enough for a 1 MiB read of 4 KiB folios, and the reply header. */
#define READ_SPANS 260

static void release_spans(struct pc_span *spans, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pc_read_end(&spans[i]);
}

/* Reply to a read with the cached bytes themselves: spans of the range
 * (pc_read_begin), sent by fuse_reply_iov straight from the cache's
 * memory, then released.  One copy (the kernel's, into the program's
 * buffer) instead of two (pc_pread into a buffer, then the kernel's).
 *
 * Only the first span may wait (for memory or the device): the others are
 * taken with PC_NOWAIT, because a worker that waited for memory while it
 * pinned spans could wait for ever once every worker pins part of the
 * cache (64 workers of 1 MiB reads in 4 MiB of memory did).  One that
 * would wait makes the whole read a copy (reply_read_copy, which pins
 * nothing while it waits).  The bytes read, or -1 with errno if nothing
 * could be read: EINVAL for a handle that takes no spans (O_DIRECT),
 * which pc_pread serves; EAGAIN when a later span would have waited. */
static ssize_t reply_read_spans(fuse_req_t req, struct pc_file *pf, size_t size, off_t off, int flags)
{
	static __thread struct pc_span spans[READ_SPANS];
	struct iovec iov[READ_SPANS];
	size_t n = 0, done = 0;
	while (done < size && n < READ_SPANS) {
		ssize_t got = pc_read_begin(pf, off + (off_t)done, size - done, flags | (n ? PC_NOWAIT : 0), &spans[n]);
		if (got < 0 && n && errno == EAGAIN) {
			release_spans(spans, n);
			errno = EAGAIN;
			return -1;
		}
		if (got <= 0) {
			if (got < 0 && n == 0)
				return -1;
			break; /* end of file; or an error after some bytes: a short read */
		}
		iov[n].iov_base = spans[n].data;
		iov[n++].iov_len = (size_t)got;
		done += (size_t)got;
	}
	if (n)
		fuse_reply_iov(req, iov, (int)n);
	else
		fuse_reply_buf(req, NULL, 0);
	release_spans(spans, n);
	return (ssize_t)done;
}

/* The same with a copy, for handles that take no spans (O_DIRECT: the
 * device read dwarfs the allocation; a per-thread buffer leaked when
 * libfuse ended its threads). */
static ssize_t reply_read_copy(fuse_req_t req, struct pc_file *pf, size_t size, off_t off, int flags)
{
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	ssize_t n = pc_pread(pf, buf, size, off, flags);
	if (n >= 0)
		fuse_reply_buf(req, buf, (size_t)n);
	int err = errno;
	free(buf);
	errno = err;
	return n;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct pcfs *fs = fs_of(req);
	struct pcfs_handle *h = handle_of(fi);
	if (h->text) {
		size_t n = off >= 0 && (size_t)off < h->text_len ? h->text_len - (size_t)off : 0;
		fuse_reply_buf(req, h->text + (n ? off : 0), n < size ? n : size);
		return;
	}
	int flags = uncached_flag(fs, size);
	ssize_t n = reply_read_spans(req, h->pf, size, off, flags);
	if (n < 0 && (errno == EINVAL || errno == EAGAIN))
		n = reply_read_copy(req, h->pf, size, off, flags);
	if (n < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&fs->read_bytes, (uint64_t)n, memory_order_relaxed);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_handle *h = handle_of(fi);
	if (!h->pf) {
		fuse_reply_err(req, EBADF);
		return;
	}
	/* fi->flags here are the write's: the open's, with O_DSYNC / O_SYNC
	 * for RWF_DSYNC / RWF_SYNC writes. */
	int flags = h->write_flags | dsync_flag(fi->flags) | uncached_flag(fs, size);
	kill_privs(req, h->in, ino);
	ssize_t n = pc_pwrite(h->pf, buf, size, off, flags);
	if (n < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	times_data_changed(h->in);
	atomic_fetch_add_explicit(&fs->writes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&fs->write_bytes, (uint64_t)n, memory_order_relaxed);
	fuse_reply_write(req, (size_t)n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct pcfs *fs = fs_of(req);
	struct pcfs_handle *h = handle_of(fi);
	int err = 0;
	/* A file truncated to zero and not written back since: its data is
	 * written now, and waited for (inode_mark_emptied).  Still empty
	 * (a shell's `>` closes the descriptor it opened once before the
	 * writes, at its dup2), or not written: it stays marked. */
	bool emptied = h->pf && h->in && inode_take_emptied(h->in);
	if (h->pf && pc_flush(h->pf, fs->opt.close_to_open || emptied) != 0) {
		err = errno;
		atomic_fetch_add_explicit(&fs->flush_errors, 1, memory_order_relaxed);
	}
	if (emptied && (err || pc_size(h->pf) <= 0))
		inode_mark_emptied(h->in);
	fuse_reply_err(req, err);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct pcfs *fs = fs_of(req);
	struct pcfs_handle *h = handle_of(fi);
	struct pcfs_inode *in = h->in;
	int err = handle_close(fs, h);
	/* Nobody can hear it now: FLUSH reported what was known then. */
	if (err)
		pcfs_log(LOG_ERR, "write error after the last close of a file: %s (its data stays cached, retried)",
			 strerror(err));
	if (in)
		times_try_settle(fs, in, false);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	struct pcfs_handle *h = handle_of(fi);
	int r = !h->pf ? 0 : datasync ? pc_fdatasync(h->pf) : pc_fsync(h->pf);
	fuse_reply_err(req, r ? errno : 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	struct pcfs_handle *h = handle_of(fi);
	if (!h->pf) {
		fuse_reply_err(req, EBADF);
		return;
	}
	kill_privs(req, h->in, ino);
	int r = pc_fallocate(h->pf, mode, off, len);
	if (r == 0)
		times_data_changed(h->in);
	fuse_reply_err(req, r ? errno : 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)ino;
	struct pcfs_handle *h = handle_of(fi);
	if (!h->pf) {
		fuse_reply_err(req, ESPIPE);
		return;
	}
	off_t r = pc_lseek(h->pf, off, whence);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

int data_truncate(fuse_req_t req, struct pcfs_inode *in, off_t size, struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_handle *h = fi ? handle_of(fi) : NULL;
	struct pc_file *pf = h ? h->pf : NULL, *tmp = NULL;
	if ((uintptr_t)in == PCFS_STATS_INO)
		return -EPERM;
	if (!pf) {
		/* truncate(2) by name: a handle of our own for the call. */
		pf = tmp = open_at_inode(fs, in, NULL, O_WRONLY, 0);
		if (!pf)
			return -errno;
	}
	int err = pc_ftruncate(pf, size) ? -errno : 0;
	if (err == -EBADF && !tmp) {
		/* A read-only handle of a writer's ftruncate? Open our own. */
		tmp = open_at_inode(fs, in, NULL, O_WRONLY, 0);
		err = !tmp ? -errno : pc_ftruncate(tmp, size) ? -errno : 0;
	}
	if (tmp && pc_close(tmp) != 0 && !err)
		err = -errno;
	if (!err)
		times_data_changed(in);
	return err;
}

void ops_data_fill(struct fuse_lowlevel_ops *ops)
{
	ops->open = op_open;
	ops->create = op_create;
	ops->read = op_read;
	ops->write = op_write;
	ops->flush = op_flush;
	ops->release = op_release;
	ops->fsync = op_fsync;
	ops->fallocate = op_fallocate;
	ops->lseek = op_lseek;
	/* No copy_file_range: the kernel falls back to reads and writes. */
}
