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
 * gives handles.  Where either is missing (pcfs run by a user, or a file
 * on another file system under BACKING_DIR) an inode keeps its descriptor
 * for its life, as before; running out then is logged (fds_retry).
 *
 * A descriptor in use (fd_hold .. fd_put) or of a file open through pcfs
 * is not closed: a file unlinked while open cannot be reopened by handle.
 */
#include "pcfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* Room for descriptors besides the inodes': pagecache keeps up to half of
 * RLIMIT_NOFILE for closed files (max_closed_files, twice a quarter), and
 * open files, directories being read and FUSE need some: the inodes get a
 * quarter. */
static size_t fd_limit_of_rlimit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 65536;
	size_t n = (size_t)rl.rlim_cur / 4;
	return n < 16 ? 16 : n;
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

/* Can this process reopen BACKING_DIR's files by handle?  Tried on the
 * root itself: it takes CAP_DAC_READ_SEARCH and a file system that makes
 * handles.  NULL if so, else why not. */
static const char *try_handles(struct pcfs *fs)
{
	static char why[160];
	struct file_handle *h = handle_of_fd(fs->root.fd);
	if (!h) {
		snprintf(why, sizeof(why), "the file system gives no file handles (name_to_handle_at: %s)",
			 strerror(errno));
		return why;
	}
	/* open_by_handle_at takes a descriptor of the file system that is not O_PATH. */
	fs->mount_fd = openat(fs->root.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = fs->mount_fd < 0 ? -1 : open_by_handle_at(fs->mount_fd, h, O_PATH | O_CLOEXEC);
	int err = errno;
	free(h);
	if (fd >= 0) {
		close(fd);
		return NULL;
	}
	snprintf(why, sizeof(why), "open_by_handle_at: %s%s", strerror(err),
		 err == EPERM ? " (it needs CAP_DAC_READ_SEARCH)" : "");
	if (fs->mount_fd >= 0)
		close(fs->mount_fd);
	fs->mount_fd = -1;
	return why;
}

void fds_init(struct pcfs *fs)
{
	pthread_mutex_init(&fs->fd_lock, NULL);
	fs->lru.lru_next = fs->lru.lru_prev = &fs->lru;
	fs->fd_limit = fd_limit_of_rlimit();
	fs->mount_fd = -1;
	fs->no_handles_why = try_handles(fs);
}

void fds_adopt(struct pcfs *fs, struct pcfs_inode *in, int fd)
{
	in->fd = fd;
	/* Only a file of BACKING_DIR's own file system: mount_fd decodes
	 * handles of that one alone. */
	if (fs->mount_fd < 0 || in->dev != fs->root.dev || !(in->handle = handle_of_fd(fd)))
		return;
	pthread_mutex_lock(&fs->fd_lock);
	lru_add(fs, in);
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
		int fd = open_by_handle_at(fs->mount_fd, in->handle, O_PATH | O_CLOEXEC);
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
	if (in->handle) {
		pthread_mutex_lock(&fs->fd_lock);
		if (in->fd >= 0) {
			lru_unlink(in);
			fs->lru_fds--;
		}
		pthread_mutex_unlock(&fs->fd_lock);
		free(in->handle);
		in->handle = NULL;
	}
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
	size_t open_fds = fs->lru_fds;
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
			 "(open files keep theirs): raise the limit (ulimit -n)",
			 strerror(err), (unsigned long long)rl.rlim_cur, open_fds);
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

void stats_fds(struct pcfs *fs, FILE *f)
{
	pthread_mutex_lock(&fs->fd_lock);
	size_t open_fds = fs->lru_fds;
	pthread_mutex_unlock(&fs->fd_lock);
	fprintf(f, "file_handles %d\ninode_fds %zu\ninode_fd_limit %zu\ninode_fd_evictions %llu\ninode_fd_reopens %llu\n",
		fs->mount_fd >= 0, open_fds, fs->fd_limit, (unsigned long long)atomic_load(&fs->fd_evictions),
		(unsigned long long)atomic_load(&fs->fd_reopens));
}

void proc_name(int fd, char buf[32])
{
	snprintf(buf, 32, "%d", fd);
}
