/*
 * fds.c - the inodes' O_PATH descriptors, bounded.
 *
 * Every inode the kernel knows needs a descriptor of its backing file (all
 * access is relative to one: see ops_meta.c), and the kernel keeps
 * lookups on every file a program walked, so `cp -r` of a tree of more
 * files than RLIMIT_NOFILE would run pcfs out of descriptors (EMFILE).
 * So each inode also keeps a file handle (name_to_handle_at), and at most
 * fd_limit descriptors that can be reopened from one stay open: the least
 * recently used is closed, and reopened with open_by_handle_at when its
 * inode is used again.  A handle names the file itself, not a path: it
 * survives renames of the file and of its directories, and once the file
 * is gone it is stale (ESTALE), never another file.
 *
 * open_by_handle_at needs CAP_DAC_READ_SEARCH and a file system that
 * gives handles (a file system mounted inside BACKING_DIR decodes its own:
 * dev_take).  Where either is missing (pcfs run by a user, or a file
 * system without handles) an inode keeps its descriptor for its life, as
 * before; running out then is logged (fds_retry).
 *
 * A descriptor in use (fd_hold .. fd_put) or of a file open through pcfs
 * is not closed: a file unlinked while open cannot be reopened by handle.
 */
#include "pcfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- the LRU */

/* fd_lock held for all of these. */
static void lru_unlink(struct pcfs_inode *in)
{
	in->lru_prev->lru_next = in->lru_next;
	in->lru_next->lru_prev = in->lru_prev;
	in->lru_prev = in->lru_next = NULL;
}

static void lru_push(struct pcfs *fs, struct pcfs_inode *in)
{
	in->lru_next = fs->lru.lru_next;
	in->lru_prev = &fs->lru;
	fs->lru.lru_next->lru_prev = in;
	fs->lru.lru_next = in;
}

/* Close unused descriptors from the least recently used end until at most
 * `keep` are open; the number closed.  Ones in use move to the front, so
 * that the next pass does not walk them again. */
static size_t lru_shrink(struct pcfs *fs, size_t keep)
{
	size_t closed = 0, seen = 0, n = fs->lru_fds;
	while (fs->lru_fds > keep && seen++ < n) {
		struct pcfs_inode *in = fs->lru.lru_prev;
		lru_unlink(in);
		if (in->fd_users) {
			lru_push(fs, in);
			continue;
		}
		close(in->fd);
		in->fd = -1;
		fs->lru_fds--;
		closed++;
	}
	atomic_fetch_add_explicit(&fs->fd_evictions, closed, memory_order_relaxed);
	return closed;
}

/* in's descriptor is open (fd set): into the LRU, and over the bound the
 * least recently used others close. */
static void lru_add(struct pcfs *fs, struct pcfs_inode *in)
{
	lru_push(fs, in);
	fs->lru_fds++;
	if (fs->lru_fds > fs->fd_limit)
		lru_shrink(fs, fs->fd_limit);
}

/* ------------------------------------------------------------------ setup */

/* RLIMIT_NOFILE / div, at least min (65536 if there is no limit). */
static size_t rlimit_share(size_t div, size_t min)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 65536;
	size_t n = (size_t)rl.rlim_cur / div;
	return n < min ? min : n;
}

/* Room for descriptors besides the inodes': pagecache keeps up to half of
 * RLIMIT_NOFILE for closed files (max_closed_files, twice a quarter), and
 * open files, directories being read and FUSE need some: the inodes get a
 * quarter. */
static size_t fd_limit_of_rlimit(void)
{
	return rlimit_share(4, 16);
}

/* A handle of fd's file (malloc'd), or NULL with errno. */
static struct file_handle *handle_of_fd(int fd)
{
	union {
		struct file_handle h;
		char room[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} u;
	u.h.handle_bytes = MAX_HANDLE_SZ;
	int mount_id;
	if (name_to_handle_at(fd, "", &u.h, &mount_id, AT_EMPTY_PATH) != 0)
		return NULL;
	size_t size = sizeof(struct file_handle) + u.h.handle_bytes;
	struct file_handle *h = malloc(size);
	if (h)
		memcpy(h, &u.h, size);
	return h;
}

/* Can this process reopen the files of dirfd's file system by handle?
 * Tried on the directory dirfd itself: it takes CAP_DAC_READ_SEARCH and a
 * file system that makes handles that last as long as the file.  FUSE's
 * do not (the kernel decodes one only while it caches the file, unless
 * the daemon offers FUSE_CAP_EXPORT_SUPPORT, which cannot be seen from
 * here): a file closed by the LRU would then be ESTALE, gone.  If so, a
 * descriptor that decodes them (open_by_handle_at takes one that is not
 * O_PATH); else -1, and why not in why[WHY_SIZE]. */
#define WHY_SIZE 160
static int handle_mount_fd(int dirfd, char *why)
{
	struct statfs sfs;
	if (fstatfs(dirfd, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC) {
		snprintf(why, WHY_SIZE, "a FUSE file system: its handles may not outlast the kernel's cache");
		return -1;
	}
	struct file_handle *h = handle_of_fd(dirfd);
	if (!h) {
		snprintf(why, WHY_SIZE, "the file system gives no file handles (name_to_handle_at: %s)",
			 strerror(errno));
		return -1;
	}
	int mount_fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = mount_fd < 0 ? -1 : open_by_handle_at(mount_fd, h, O_PATH | O_CLOEXEC);
	int err = errno;
	free(h);
	if (fd >= 0) {
		close(fd);
		return mount_fd;
	}
	snprintf(why, WHY_SIZE, "%s: %s%s", mount_fd < 0 ? "not a directory" : "open_by_handle_at", strerror(err),
		 err == EPERM ? " (it needs CAP_DAC_READ_SEARCH)" : "");
	if (mount_fd >= 0)
		close(mount_fd);
	return -1;
}

/* ------------------------------------------------------ other file systems */

/*
 * A file system mounted inside BACKING_DIR has handles of its own, which
 * only a descriptor of that file system decodes.  So each one seen gets
 * its own such descriptor (handle_mount_fd of its first inode, its root
 * directory as the kernel looks it up through the mount point), kept
 * while any inode of it lives: it does not keep an unused file system
 * busy.  One that gives no handles (FUSE, procfs, ...; or whose first
 * inode seen is not a directory, a file bind-mounted on a file) cannot be
 * reopened: its inodes keep their descriptors for as long as the kernel
 * knows them, as every inode does without CAP_DAC_READ_SEARCH.  Those are
 * counted (inode_fds_pinned in the stats); they are not charged to a
 * user: the kernel, not a user, holds lookups, and lets them go under
 * memory pressure, not when a user is done.
 */
struct fds_dev {
	dev_t dev;
	int mount_fd;  /* -1: its inodes keep their descriptors */
	size_t inodes; /* counted (dev_counted) and not released */
};

/* fd_lock held. */
static struct fds_dev *dev_find(struct pcfs *fs, dev_t dev)
{
	for (size_t i = 0; i < fs->ndevs; i++)
		if (fs->devs[i].dev == dev)
			return &fs->devs[i];
	return NULL;
}

/* The descriptor that decodes handles of the file system of fd (an inode
 * not on BACKING_DIR's, dev), counting the inode (in->dev_counted); -1:
 * none. */
static int dev_take(struct pcfs *fs, struct pcfs_inode *in, int fd)
{
	pthread_mutex_lock(&fs->fd_lock);
	struct fds_dev *d = dev_find(fs, in->dev);
	int mount_fd = -1;
	if (d) {
		d->inodes++;
		in->dev_counted = true;
		mount_fd = d->mount_fd;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	if (d)
		return mount_fd;
	/* Probed without the lock (a hung file system must not stop the
	 * others); another thread may do the same meanwhile: the first stays. */
	char why[WHY_SIZE];
	int probed = handle_mount_fd(fd, why);
	pthread_mutex_lock(&fs->fd_lock);
	bool first = false;
	if (!(d = dev_find(fs, in->dev)) && fs->ndevs < fs->devs_cap) {
		d = &fs->devs[fs->ndevs++];
		*d = (struct fds_dev){ in->dev, probed, 0 };
		first = true;
	} else if (!d && (d = realloc(fs->devs, (fs->devs_cap * 2 + 4) * sizeof(*d)))) {
		fs->devs = d;
		fs->devs_cap = fs->devs_cap * 2 + 4;
		d = &fs->devs[fs->ndevs++];
		*d = (struct fds_dev){ in->dev, probed, 0 };
		first = true;
	}
	if (d) {
		d->inodes++;
		in->dev_counted = true;
		mount_fd = d->mount_fd;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	if (!first && probed >= 0)
		close(probed);
	if (first && probed < 0)
		pcfs_log(LOG_INFO,
			 "a file system inside BACKING_DIR (device %u:%u) cannot reopen files by handle (%s): its "
			 "files keep their descriptors while the kernel knows them (inode_fds_pinned)",
			 major(in->dev), minor(in->dev), why);
	return mount_fd;
}

/* The inode `in` (dev_counted) goes (fd_lock held): its file system's
 * descriptor too, if it was the last. */
static void dev_put(struct pcfs *fs, struct pcfs_inode *in)
{
	struct fds_dev *d = dev_find(fs, in->dev);
	if (!d || --d->inodes)
		return;
	if (d->mount_fd >= 0)
		close(d->mount_fd);
	*d = fs->devs[--fs->ndevs];
}

static void users_init(struct pcfs *fs); /* limits per user, below */

void fds_init(struct pcfs *fs)
{
	pthread_mutex_init(&fs->fd_lock, NULL);
	fs->lru.lru_next = fs->lru.lru_prev = &fs->lru;
	fs->fd_limit = fd_limit_of_rlimit();
	static char why[WHY_SIZE];
	fs->mount_fd = handle_mount_fd(fs->root.fd, why);
	fs->no_handles_why = fs->mount_fd < 0 ? why : NULL;
	users_init(fs);
}

void fds_adopt(struct pcfs *fs, struct pcfs_inode *in, int fd)
{
	in->fd = fd;
	/* fs->mount_fd decodes handles of BACKING_DIR's own file system
	 * alone: another's inode decodes by its own (dev_take). */
	in->mount_fd = fs->mount_fd;
	if (in->mount_fd >= 0 && in->dev != fs->root.dev)
		in->mount_fd = dev_take(fs, in, fd);
	if (in->mount_fd >= 0)
		in->handle = handle_of_fd(fd);
	pthread_mutex_lock(&fs->fd_lock);
	if (in->handle)
		lru_add(fs, in);
	else
		fs->fds_pinned++;
	pthread_mutex_unlock(&fs->fd_lock);
}

/* Only a handle can tell (an inode number is reused once its file is
 * deleted); none made of fd: assume so. */
bool fds_same_file(const struct pcfs_inode *in, int fd)
{
	struct file_handle *h = handle_of_fd(fd);
	if (!h)
		return true;
	bool same = h->handle_type == in->handle->handle_type && h->handle_bytes == in->handle->handle_bytes &&
		    memcmp(h->f_handle, in->handle->f_handle, h->handle_bytes) == 0;
	free(h);
	return same;
}

bool fds_keeps_number(struct pcfs *fs, struct pcfs_inode *in)
{
	if (!in->handle)
		return true;
	pthread_mutex_lock(&fs->fd_lock);
	bool open_now = in->fd >= 0;
	pthread_mutex_unlock(&fs->fd_lock);
	return open_now;
}

void fds_offer(struct pcfs *fs, struct pcfs_inode *in, int fd)
{
	if (in->handle) {
		pthread_mutex_lock(&fs->fd_lock);
		if (in->fd < 0) {
			in->fd = fd;
			fd = -1;
			lru_add(fs, in);
		}
		pthread_mutex_unlock(&fs->fd_lock);
	}
	if (fd >= 0)
		close(fd);
}

/* ------------------------------------------------------------ holding one */

static int reopen(struct pcfs *fs, struct pcfs_inode *in)
{
	for (int try = 0;; try++) {
		int fd = open_by_handle_at(in->mount_fd, in->handle, O_PATH | O_CLOEXEC);
		if (fd >= 0) {
			atomic_fetch_add_explicit(&fs->fd_reopens, 1, memory_order_relaxed);
			return fd;
		}
		if (!fds_retry(fs, errno, try))
			return -errno;
	}
}

int fd_hold(struct pcfs *fs, struct pcfs_inode *in)
{
	if (!in->handle)
		return in->fd; /* open for the inode's life */
	pthread_mutex_lock(&fs->fd_lock);
	in->fd_users++;
	if (in->fd >= 0) {
		lru_unlink(in);
		lru_push(fs, in);
		pthread_mutex_unlock(&fs->fd_lock);
		return in->fd;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	/* Closed by the LRU: reopen it without the lock (another thread may
	 * do the same meanwhile; the first one's stays). */
	int fd = reopen(fs, in);
	pthread_mutex_lock(&fs->fd_lock);
	if (fd < 0)
		in->fd_users--;
	else if (in->fd >= 0)
		close(fd);
	else {
		in->fd = fd;
		lru_add(fs, in);
	}
	fd = fd < 0 ? fd : in->fd;
	pthread_mutex_unlock(&fs->fd_lock);
	return fd;
}

void fd_put(struct pcfs *fs, struct pcfs_inode *in)
{
	if (!in->handle)
		return;
	pthread_mutex_lock(&fs->fd_lock);
	in->fd_users--;
	pthread_mutex_unlock(&fs->fd_lock);
}

int fd_hold_or_reply(fuse_req_t req, struct pcfs_inode *in)
{
	int fd = fd_hold(fuse_req_userdata(req), in);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return -1;
	}
	return fd;
}

void fds_release(struct pcfs *fs, struct pcfs_inode *in)
{
	pthread_mutex_lock(&fs->fd_lock);
	if (!in->handle)
		fs->fds_pinned--;
	else if (in->fd >= 0) {
		lru_unlink(in);
		fs->lru_fds--;
	}
	if (in->dev_counted)
		dev_put(fs, in);
	pthread_mutex_unlock(&fs->fd_lock);
	free(in->handle);
	in->handle = NULL;
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
}

/* ------------------------------------------------------ running out of them */

/* One line, at most once a minute: what is short and what to do. */
static void log_shortage(struct pcfs *fs, int err)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	int64_t now = t.tv_sec > 0 ? (int64_t)t.tv_sec : 1; /* 0: never logged */
	int64_t last = atomic_load(&fs->fd_shortage_logged);
	if ((last && now - last < 60) || !atomic_compare_exchange_strong(&fs->fd_shortage_logged, &last, now))
		return;
	struct rlimit rl = { 0, 0 };
	getrlimit(RLIMIT_NOFILE, &rl);
	pthread_mutex_lock(&fs->fd_lock);
	size_t open_fds = fs->lru_fds, pinned = fs->fds_pinned;
	pthread_mutex_unlock(&fs->fd_lock);
	char line[512];
	if (fs->no_handles_why)
		snprintf(line, sizeof(line),
			 "out of file descriptors (%s, RLIMIT_NOFILE %llu): every inode the kernel knows keeps one, "
			 "because %s; raise the limit (ulimit -n), or run pcfs as root",
			 strerror(err), (unsigned long long)rl.rlim_cur, fs->no_handles_why);
	else
		snprintf(line, sizeof(line),
			 "out of file descriptors (%s, RLIMIT_NOFILE %llu) with %zu inode descriptors open, all in use "
			 "(open files keep theirs), and %zu kept for life (file systems inside BACKING_DIR without "
			 "file handles): raise the limit (ulimit -n)",
			 strerror(err), (unsigned long long)rl.rlim_cur, open_fds, pinned);
	pcfs_log(LOG_ERR, "%s", line);
}

size_t fds_close_unused(struct pcfs *fs)
{
	pthread_mutex_lock(&fs->fd_lock);
	size_t closed = lru_shrink(fs, 0);
	pthread_mutex_unlock(&fs->fd_lock);
	return closed;
}

bool fds_retry(struct pcfs *fs, int err, int try)
{
	if (err != EMFILE && err != ENFILE)
		return false;
	size_t closed = try == 0 ? fds_close_unused(fs) : 0;
	if (!closed)
		log_shortage(fs, err);
	errno = err;
	return closed > 0;
}

int fds_openat(struct pcfs *fs, int dirfd, const char *name, int flags)
{
	for (int try = 0;; try++) {
		int fd = openat(dirfd, name, flags);
		if (fd >= 0 || !fds_retry(fs, errno, try))
			return fd;
	}
}

struct pc_file *fds_pc_openat(struct pcfs *fs, int dirfd, const char *name, int flags, mode_t mode)
{
	for (int try = 0;; try++) {
		struct pc_file *pf = pc_openat(fs->cache, dirfd, name, flags, mode);
		if (pf || !fds_retry(fs, errno, try))
			return pf;
	}
}

/* ------------------------------------------------------ limits per user */

/*
 * Every open file and directory (a FUSE OPEN, CREATE or OPENDIR, until its
 * RELEASE) costs the daemon descriptors: the backing file's, and its
 * inode's O_PATH one, held while the file is open.  One user could
 * otherwise open until the daemon has none left, and every other user's
 * opens and lookups would fail with EMFILE.  So each user may hold at most
 * user_fd_limit of them; one more gets EMFILE, as open(2) past
 * RLIMIT_NOFILE does, and other users go on.  root and the user pcfs runs
 * as are counted but not held to it: either can stop the daemon anyway
 * (and root is not held to its RLIMIT_NPROC either).
 *
 * A few users at a time: a small array, under its own lock.
 */
struct user_fds {
	uid_t uid;
	size_t n;
};

struct fds_users {
	pthread_mutex_t lock;
	struct user_fds *v; /* the users holding one or more, by uid */
	size_t n, cap;
};

/* The default cap is a sixteenth of RLIMIT_NOFILE (at least 64).  Each
 * open takes one or two descriptors (its inode's counts in the inodes'
 * quarter, fd_limit_of_rlimit): a user at the cap holds an eighth at most,
 * and the others, and the inodes, still have room. */
static void users_init(struct pcfs *fs)
{
	fs->users = calloc(1, sizeof(*fs->users));
	if (!fs->users)
		return; /* nothing counted, nobody refused */
	pthread_mutex_init(&fs->users->lock, NULL);
	fs->user_fd_limit = fs->opt.user_fd_limit_given ? fs->opt.user_fd_limit : rlimit_share(16, 64);
}

/* uid's entry, made if `make` (lock held); NULL if none. */
static struct user_fds *user_entry(struct fds_users *u, uid_t uid, bool make)
{
	size_t i = 0;
	while (i < u->n && u->v[i].uid < uid)
		i++;
	if (i < u->n && u->v[i].uid == uid)
		return &u->v[i];
	if (!make)
		return NULL;
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 16;
		struct user_fds *v = realloc(u->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		u->v = v;
		u->cap = cap;
	}
	memmove(&u->v[i + 1], &u->v[i], (u->n - i) * sizeof(*u->v));
	u->n++;
	u->v[i] = (struct user_fds){ uid, 0 };
	return &u->v[i];
}

int user_fd_take(struct pcfs *fs, uid_t uid)
{
	struct fds_users *u = fs->users;
	if (!u)
		return 0;
	bool capped = uid != 0 && uid != fs->owner && fs->user_fd_limit;
	pthread_mutex_lock(&u->lock);
	struct user_fds *e = user_entry(u, uid, true);
	int err = !e ? (capped ? ENOMEM : 0) : capped && e->n >= fs->user_fd_limit ? EMFILE : 0;
	if (e && !err)
		e->n++;
	pthread_mutex_unlock(&u->lock);
	if (err == EMFILE)
		atomic_fetch_add_explicit(&fs->user_fd_refusals, 1, memory_order_relaxed);
	/* root and the owner go on uncounted if there was no memory. */
	return err;
}

void user_fd_put(struct pcfs *fs, uid_t uid)
{
	struct fds_users *u = fs->users;
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	struct user_fds *e = user_entry(u, uid, false);
	if (e && e->n && --e->n == 0) {
		size_t i = (size_t)(e - u->v);
		memmove(e, e + 1, (u->n - i - 1) * sizeof(*e));
		u->n--;
	}
	pthread_mutex_unlock(&u->lock);
}

bool user_fd_take_or_reply(fuse_req_t req, uid_t *uid)
{
	*uid = fuse_req_ctx(req)->uid;
	int err = user_fd_take(fuse_req_userdata(req), *uid);
	if (err)
		fuse_reply_err(req, err);
	return !err;
}

void stats_fds(struct pcfs *fs, FILE *f)
{
	pthread_mutex_lock(&fs->fd_lock);
	size_t open_fds = fs->lru_fds, pinned = fs->fds_pinned;
	pthread_mutex_unlock(&fs->fd_lock);
	fprintf(f, "file_handles %d\ninode_fds %zu\ninode_fd_limit %zu\ninode_fd_evictions %llu\ninode_fd_reopens %llu\n",
		fs->mount_fd >= 0, open_fds, fs->fd_limit, (unsigned long long)atomic_load(&fs->fd_evictions),
		(unsigned long long)atomic_load(&fs->fd_reopens));
	fprintf(f, "inode_fds_pinned %zu\n", pinned);
	fprintf(f, "user_fd_limit %zu\nuser_fd_refusals %llu\n", fs->user_fd_limit,
		(unsigned long long)atomic_load(&fs->user_fd_refusals));
	struct fds_users *u = fs->users;
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < u->n; i++)
		fprintf(f, "user_fds.%lu %zu\n", (unsigned long)u->v[i].uid, u->v[i].n);
	pthread_mutex_unlock(&u->lock);
}

void proc_name(int fd, char buf[32])
{
	snprintf(buf, 32, "%d", fd);
}
