/*
 * ops_meta.c - metadata operations, passed through to the backing
 * directory.  Every call is relative to the O_PATH descriptor of an inode
 * (held by fd_hold, fds.c, for the call; or to /proc/self/fd/<fd> for
 * calls that refuse O_PATH descriptors), and
 * names are single components the kernel gave us, opened with O_NOFOLLOW:
 * no path, `..` or symlink in the backing directory can take a call
 * outside it.  The kernel resolves symlinks itself, in the mount.
 *
 * Truncation goes through pagecache (ops_data.c): it has cached data.
 */
#include "pcfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

static struct pcfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}


static void reply_entry_or_err(fuse_req_t req, int err, const struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, -err);
	else if (fuse_reply_entry(req, e) == -ENOENT && e->ino != FUSE_ROOT_ID)
		inode_forget(fs_of(req), (struct pcfs_inode *)(uintptr_t)e->ino, 1);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (pcfs_is_stats_name(parent, name)) {
		stats_lookup(req);
		return;
	}
	struct fuse_entry_param e;
	int err = entry_lookup(fs_of(req), inode_of(req, parent), name, &e);
	if (err == -ENOENT) {
		/* A negative entry the kernel may cache for a while. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = PCFS_TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry_or_err(req, err, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (ino != PCFS_STATS_INO)
		inode_forget(fs_of(req), inode_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		if (forgets[i].ino != PCFS_STATS_INO)
			inode_forget(fs_of(req), inode_of(req, forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	if (ino == PCFS_STATS_INO) {
		stats_getattr(req);
		return;
	}
	struct stat st;
	int err = attr_of(fs_of(req), inode_of(req, ino), &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, PCFS_TIMEOUT);
}

/* A time to set: now, omitted, or given. */
static struct timespec set_time(int to_set, int now_bit, int set_bit, struct timespec given)
{
	struct timespec t = { .tv_nsec = UTIME_OMIT };
	if (to_set & now_bit)
		t.tv_nsec = UTIME_NOW;
	else if (to_set & set_bit)
		t = given;
	return t;
}

/* setattr's mode, owner and times, through in's descriptor fd. */
static int setattr_calls(struct pcfs *fs, struct pcfs_inode *in, int fd, const struct stat *attr, int to_set)
{
	char name[32];
	proc_name(fd, name);
	if ((to_set & FUSE_SET_ATTR_MODE) && fchmodat(fs->proc_fd, name, attr->st_mode, 0) != 0)
		return -errno;
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
			return -errno;
	}
	const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW;
	if (to_set & times) {
		struct timespec tv[2] = {
			set_time(to_set, FUSE_SET_ATTR_ATIME_NOW, FUSE_SET_ATTR_ATIME, attr->st_atim),
			set_time(to_set, FUSE_SET_ATTR_MTIME_NOW, FUSE_SET_ATTR_MTIME, attr->st_mtim),
		};
		if (utimensat(fs->proc_fd, name, tv, 0) != 0)
			return -errno;
		/* Re-applied once the data is written.  A given time is kept as
		 * given: read back, it could already be a later write-back's
		 * (one in flight changes the backing mtime at any moment).
		 * UTIME_NOW is read back: the kernel's clock and granularity. */
		if (tv[1].tv_nsec == UTIME_NOW) {
			struct stat st;
			if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
				times_explicit_mtime(in, &st.st_mtim);
		} else if (tv[1].tv_nsec != UTIME_OMIT) {
			times_explicit_mtime(in, &tv[1]);
		}
	} else if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		times_meta_changed(in);
	}
	return 0;
}

/* Does changing fd's mode to `mode` only clear set-ID bits?  The kernel
 * asks that of a truncate, a chown or a write by another user (its
 * file_remove_privs, which needs no rights over the file). */
static bool mode_only_kills(int fd, mode_t mode)
{
	struct stat st;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		return false;
	mode_t old = st.st_mode & 07777, new = mode & 07777;
	return !(new & ~old) && !((old ^ new) & ~(mode_t)(S_ISUID | S_ISGID));
}

/* setattr_calls as the caller: the backing file system checks its rights
 * and applies its rules (a chmod by someone outside the file's group loses
 * S_ISGID; a chown clears set-ID bits), as the kernel did already.  A
 * mode change that only clears set-ID bits is the daemon's. */
static int setattr_meta(fuse_req_t req, struct pcfs_inode *in, int fd, const struct stat *attr, int to_set)
{
	bool kill = (to_set & FUSE_SET_ATTR_MODE) && mode_only_kills(fd, attr->st_mode);
	int cr = kill ? 0 : creds_begin(req, 0);
	if (cr < 0)
		return cr;
	int err = setattr_calls(fs_of(req), in, fd, attr, to_set);
	creds_end(cr);
	return err;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	if (ino == PCFS_STATS_INO) {
		fuse_reply_err(req, EPERM);
		return;
	}
	struct pcfs_inode *in = inode_of(req, ino);
	int err = 0;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		err = data_truncate(req, in, attr->st_size, fi);
		if (!err && attr->st_size == 0)
			inode_mark_emptied(in); /* rewritten, it is written back at close */
	}
	int fd = err ? -1 : fd_hold(fs, in);
	if (!err)
		err = fd < 0 ? fd : setattr_meta(req, in, fd, attr, to_set);
	if (fd >= 0)
		fd_put(fs, in);
	struct stat st;
	if (!err)
		err = attr_of(fs, in, &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, PCFS_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct pcfs_inode *in = inode_of(req, ino);
	int fd = fd_hold_or_reply(req, in);
	if (fd < 0)
		return;
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(fd, "", buf, sizeof(buf));
	int err = errno;
	fd_put(fs_of(req), in);
	if (n < 0)
		fuse_reply_err(req, err);
	else if (n >= (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = 0;
		fuse_reply_readlink(req, buf);
	}
}

/* Make a node (mknod, mkdir, symlink) in the directory dirfd. */
static int make_node_at(int dirfd, const char *name, mode_t mode, dev_t rdev, const char *link)
{
	if (link)
		return symlinkat(link, dirfd, name);
	if (S_ISDIR(mode))
		return mkdirat(dirfd, name, mode);
	return mknodat(dirfd, name, mode, rdev);
}

/* Make a node (mknod, mkdir, symlink) and reply with its entry. */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		      const char *link)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_inode *dir = inode_of(req, parent);
	if (entry_bad_name(name) || pcfs_is_stats_name(parent, name)) {
		fuse_reply_err(req, entry_bad_name(name) ? EINVAL : EEXIST);
		return;
	}
	int dirfd = fd_hold_or_reply(req, dir);
	if (dirfd < 0)
		return;
	/* As the caller, with its umask (a symlink has none): the node is
	 * the caller's, with the group and mode the backing file system
	 * gives (set-group-ID directories, default ACLs). */
	int cr = creds_begin(req, link ? 0 : CREDS_UMASK);
	int err = cr < 0 ? -cr : make_node_at(dirfd, name, mode, rdev, link) ? errno : 0;
	creds_end(cr);
	fd_put(fs, dir);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	struct fuse_entry_param e;
	reply_entry_or_err(req, entry_lookup(fs, dir, name, &e), &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | mode, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, S_IFLNK, 0, link);
}

/* A new name in dirfd for the file of fd; errno on failure. */
static int link_at(struct pcfs *fs, int fd, int dirfd, const char *newname)
{
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc name does not. */
	char name[32];
	proc_name(fd, name);
	if (linkat(fd, "", dirfd, newname, AT_EMPTY_PATH) != 0 &&
	    linkat(fs->proc_fd, name, dirfd, newname, AT_SYMLINK_FOLLOW) != 0)
		return errno;
	return 0;
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_inode *in = inode_of(req, ino), *dir = inode_of(req, newparent);
	if (entry_bad_name(newname) || ino == PCFS_STATS_INO || pcfs_is_stats_name(newparent, newname)) {
		fuse_reply_err(req, entry_bad_name(newname) ? EINVAL : EPERM);
		return;
	}
	int fd = fd_hold_or_reply(req, in);
	if (fd < 0)
		return;
	int dirfd = fd_hold(fs, dir);
	/* As the caller: protected_hardlinks, the directory's rights. */
	int cr = dirfd < 0 ? 0 : creds_begin(req, 0);
	int err = dirfd < 0 ? -dirfd : cr < 0 ? -cr : link_at(fs, fd, dirfd, newname);
	creds_end(cr);
	if (dirfd >= 0)
		fd_put(fs, dir);
	fd_put(fs, in);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	times_meta_changed(in);
	struct fuse_entry_param e;
	reply_entry_or_err(req, entry_lookup(fs, dir, newname, &e), &e);
}

/* unlink and rmdir (flags AT_REMOVEDIR). */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct pcfs_inode *dir = inode_of(req, parent);
	if (entry_bad_name(name) || pcfs_is_stats_name(parent, name)) {
		fuse_reply_err(req, entry_bad_name(name) ? EINVAL : EPERM);
		return;
	}
	int dirfd = fd_hold_or_reply(req, dir);
	if (dirfd < 0)
		return;
	/* As the caller: sticky directories. */
	int cr = creds_begin(req, 0);
	int err = cr < 0 ? -cr : unlinkat(dirfd, name, flags) ? errno : 0;
	creds_end(cr);
	fd_put(fs_of(req), dir);
	fuse_reply_err(req, err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	/* An open file keeps working: its pagecache handle holds the
	 * backing descriptor, and its inode keeps its O_PATH one. */
	remove_name(req, parent, name, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, AT_REMOVEDIR);
}

/*
 * Before a rename replaces a file: the cached data of the file that takes
 * its name is written to the backing file, and waited for (pc_flush with
 * wait: written, not synced).  A program that writes t, closes it and
 * renames it over a (editors, package managers, config tools) then finds
 * a whole after a crash of the daemon, old or new, never empty: the
 * backing rename comes after the data.  What a crash of the machine keeps
 * is then the backing file system's rule for the same calls (ext4's
 * auto_da_alloc starts writing such a file at the rename too).
 * RENAME_EXCHANGE and RENAME_NOREPLACE replace nothing, and
 * neither does a rename to a free name.  0, or the write error (ENOSPC,
 * EIO, ...), which fails the rename: a stays as it was, as it would have
 * if the write of t had failed in the kernel.  A source that cannot be
 * opened (gone, or not a regular file) is left to renameat2.
 */
static int rename_write_back(struct pcfs *fs, int afd, const char *name, int bfd, const char *newname,
			     unsigned int flags)
{
	struct stat st;
	if ((flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)) ||
	    fstatat(bfd, newname, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	int fd = fds_openat(fs, afd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct pc_file_info info;
	int err = 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    pc_cache_file_info(fs->cache, st.st_dev, st.st_ino, &info) == 0 && (info.dirty_bytes || info.unsettled)) {
		char self[32];
		proc_name(fd, self);
		struct pc_file *pf = fds_pc_openat(fs, fs->proc_fd, self, O_RDONLY, 0);
		if (pf) {
			err = pc_flush(pf, 1) ? errno : 0;
			pc_close(pf);
		}
	}
	close(fd);
	return err;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_inode *a = inode_of(req, parent), *b = inode_of(req, newparent);
	if (entry_bad_name(name) || entry_bad_name(newname)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (pcfs_is_stats_name(parent, name) || pcfs_is_stats_name(newparent, newname)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	int afd = fd_hold_or_reply(req, a);
	if (afd < 0)
		return;
	int bfd = fd_hold(fs, b);
	int err = bfd < 0 ? -bfd : rename_write_back(fs, afd, name, bfd, newname, flags);
	/* RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT: as the backing
	 * file system does them.  Cached data follows the inode, not the
	 * name, so a renamed open file keeps its data. */
	if (!err)
		err = renameat2(afd, name, bfd, newname, flags) ? errno : 0;
	if (bfd >= 0)
		fd_put(fs, b);
	fd_put(fs, a);
	fuse_reply_err(req, err);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct pcfs_inode *in = inode_of(req, ino == PCFS_STATS_INO ? FUSE_ROOT_ID : ino);
	int fd = fd_hold_or_reply(req, in);
	if (fd < 0)
		return;
	struct statvfs sv;
	int err = fstatvfs(fd, &sv) ? errno : 0;
	fd_put(fs_of(req), in);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_statfs(req, &sv);
}

/* ------------------------------------------------------------ directories */

struct dir_handle {
	DIR *dp;
	off_t offset;
	struct dirent *entry; /* read but not yet sent */
	uid_t uid;            /* who opened it (limits per user) */
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pcfs *fs = fs_of(req);
	struct pcfs_inode *in = inode_of(req, ino);
	uid_t uid;
	if (!user_fd_take_or_reply(req, &uid)) /* limits per user */
		return;
	int dirfd = fd_hold_or_reply(req, in);
	if (dirfd < 0) {
		user_fd_put(fs, uid); /* limits per user */
		return;
	}
	int fd = fds_openat(fs, dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd_put(fs, in);
	struct dir_handle *d = fd >= 0 ? calloc(1, sizeof(*d)) : NULL;
	if (d)
		d->dp = fdopendir(fd);
	if (!d || !d->dp) {
		int err = fd < 0 ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		free(d);
		user_fd_put(fs, uid); /* limits per user */
		fuse_reply_err(req, err);
		return;
	}
	d->uid = uid; /* limits per user */
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dp);
		free(d);
		user_fd_put(fs, uid); /* limits per user */
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != d->offset) {
		seekdir(d->dp, off);
		d->entry = NULL;
		d->offset = off;
	}
	size_t used = 0;
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				if (errno && used == 0) {
					free(buf);
					fuse_reply_err(req, errno);
					return;
				}
				break;
			}
		}
		struct stat st = { .st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12 };
		off_t next = d->entry->d_off;
		size_t n = fuse_add_direntry(req, buf + used, size - used, d->entry->d_name, &st, next);
		if (n > size - used)
			break; /* full: this entry goes first next time */
		used += n;
		d->entry = NULL;
		d->offset = next;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dir_handle *d = (struct dir_handle *)(uintptr_t)fi->fh;
	closedir(d->dp);
	user_fd_put(fuse_req_userdata(req), d->uid); /* limits per user */
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int fd = dirfd(((struct dir_handle *)(uintptr_t)fi->fh)->dp);
	int r = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, r ? errno : 0);
}

/* ----------------------------------------------------------------- xattrs */

/* xattr calls take paths: /proc/self/fd/N names the inode itself.  A
 * symlink's xattrs are not reachable that way (the l-calls would act on
 * the /proc link): ENOTSUP, as for user xattrs on symlinks anyway.  The
 * inode, its descriptor held until xattr_done; NULL when replied to. */
static struct pcfs_inode *xattr_path(fuse_req_t req, fuse_ino_t ino, char path[64])
{
	if (ino == PCFS_STATS_INO) {
		fuse_reply_err(req, ENOTSUP);
		return NULL;
	}
	struct pcfs_inode *in = inode_of(req, ino);
	int fd = fd_hold_or_reply(req, in);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 || S_ISLNK(st.st_mode)) {
		fd_put(fs_of(req), in);
		fuse_reply_err(req, ENOTSUP);
		return NULL;
	}
	snprintf(path, 64, "/proc/self/fd/%d", fd);
	return in;
}

/* After the call on xattr_path's path that returned r (errno set if < 0):
 * the descriptor goes back; the errno to reply. */
static int xattr_done(fuse_req_t req, struct pcfs_inode *in, ssize_t r)
{
	int err = r < 0 ? errno : 0;
	fd_put(fs_of(req), in);
	return err;
}

/* trusted.* is CAP_SYS_ADMIN's (taken for root's): to others the kernel
 * neither lists these names, nor gives their values (ENODATA), nor lets
 * them be set or removed (EPERM).  The kernel refuses the calls itself
 * before they reach pcfs, but not the names in a list. */
static bool xattr_privileged(fuse_req_t req, const char *name)
{
	return fuse_req_ctx(req)->uid != 0 && !strncmp(name, "trusted.", 8);
}

/* getxattr and listxattr: the value (or name list) of `ino` into a buffer
 * of the size the kernel asked for (0: just the size), replied. */
static void get_or_list_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	char path[64];
	struct pcfs_inode *in = xattr_path(req, ino, path);
	if (in) {
		ssize_t n = name ? getxattr(path, name, buf, size) : listxattr(path, buf, size);
		int err = xattr_done(req, in, n);
		if (err)
			fuse_reply_err(req, err);
		else if (size == 0)
			fuse_reply_xattr(req, (size_t)n);
		else
			fuse_reply_buf(req, buf, (size_t)n);
	}
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	if (xattr_privileged(req, name))
		fuse_reply_err(req, ENODATA);
	else
		get_or_list_xattr(req, ino, name, size);
}

/* The names of the list of n bytes in buf that xattr_privileged keeps
 * from req's caller taken out; the new length. */
static size_t xattr_list_filter(fuse_req_t req, char *buf, size_t n)
{
	size_t kept = 0;
	for (size_t i = 0; i < n;) {
		size_t len = strnlen(buf + i, n - i) + 1;
		if (!xattr_privileged(req, buf + i)) {
			memmove(buf + kept, buf + i, len <= n - i ? len : n - i);
			kept += len <= n - i ? len : n - i;
		}
		i += len;
	}
	return kept;
}

/* listxattr for a caller that is not root: the whole list, filtered. */
static void list_xattr_filtered(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char path[64];
	struct pcfs_inode *in = xattr_path(req, ino, path);
	if (!in)
		return;
	char *buf = NULL;
	ssize_t n;
	do { /* the list may grow between the two calls */
		n = listxattr(path, NULL, 0);
		char *nb = n > 0 ? realloc(buf, (size_t)n) : buf;
		if (n > 0 && !nb) {
			errno = ENOMEM;
			n = -1;
		} else {
			buf = nb;
		}
		if (n > 0)
			n = listxattr(path, buf, (size_t)n);
	} while (n < 0 && errno == ERANGE);
	int err = xattr_done(req, in, n);
	size_t kept = err ? 0 : xattr_list_filter(req, buf, (size_t)(n > 0 ? n : 0));
	if (err)
		fuse_reply_err(req, err);
	else if (size == 0)
		fuse_reply_xattr(req, kept);
	else if (kept > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, kept);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (fuse_req_ctx(req)->uid == 0)
		get_or_list_xattr(req, ino, NULL, size);
	else
		list_xattr_filtered(req, ino, size);
}

/* setxattr (value) and removexattr (value NULL), replied. */
static void set_or_remove_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
				int flags)
{
	if (xattr_privileged(req, name)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	char path[64];
	struct pcfs_inode *in = xattr_path(req, ino, path);
	if (!in)
		return;
	/* As the caller: the backing file system lets only the owner (or
	 * CAP_FOWNER) set ACLs, whatever this kernel checked, and applies
	 * an access ACL's mode as for the caller (S_ISGID). */
	int cr = creds_begin(req, 0);
	int r = cr < 0 ? (errno = -cr, -1) : value ? setxattr(path, name, value, size, flags) : removexattr(path, name);
	creds_end(cr);
	int err = xattr_done(req, in, r);
	if (!err)
		times_meta_changed(in);
	fuse_reply_err(req, err);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	set_or_remove_xattr(req, ino, name, value, size, flags);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	set_or_remove_xattr(req, ino, name, NULL, 0, 0);
}

void ops_meta_fill(struct fuse_lowlevel_ops *ops)
{
	ops->lookup = op_lookup;
	ops->forget = op_forget;
	ops->forget_multi = op_forget_multi;
	ops->getattr = op_getattr;
	ops->setattr = op_setattr;
	ops->readlink = op_readlink;
	ops->mknod = op_mknod;
	ops->mkdir = op_mkdir;
	ops->symlink = op_symlink;
	ops->link = op_link;
	ops->unlink = op_unlink;
	ops->rmdir = op_rmdir;
	ops->rename = op_rename;
	ops->statfs = op_statfs;
	ops->opendir = op_opendir;
	ops->readdir = op_readdir;
	ops->releasedir = op_releasedir;
	ops->fsyncdir = op_fsyncdir;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->setxattr = op_setxattr;
	ops->removexattr = op_removexattr;
}
