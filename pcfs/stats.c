/*
 * stats.c - the cache's counters, for the user: the file .pcfs-stats in the
 * mount's root (mode 0400, owned by the user who mounted: only that user,
 * and root, can read it; it is not listed by readdir), and SIGUSR1, which
 * writes the same text to the daemon's stderr (with -f), to syslog, and
 * to the file -o stats_file= names (a daemon's stderr is /dev/null, and
 * a container may have no syslog).  The text is made when the file is
 * opened: reopen to read new figures.
 *
 * -o stats_file is written by the daemon (root, often) long after it
 * started: through a descriptor of its directory opened once at start
 * (options.c), never through its path again, so that nobody who can
 * rename or replace a directory on the path, or put a symlink at the
 * file's name, can move the write elsewhere.
 */
#include "pcfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <syslog.h>
#include <unistd.h>

char *stats_text(struct pcfs *fs, size_t *len)
{
	struct pc_stats s;
	pc_cache_stats(fs->cache, &s);
	uint64_t writes = atomic_load(&fs->writes);
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	fprintf(f, "hit_bytes %llu\nmiss_bytes %llu\n", (unsigned long long)s.hit_bytes,
		(unsigned long long)s.miss_bytes);
	fprintf(f, "cached_bytes %llu\ndirty_bytes %llu\ndirty_uncached_bytes %llu\npeak_dirty_bytes %llu\n",
		(unsigned long long)s.cached_bytes, (unsigned long long)s.dirty_bytes,
		(unsigned long long)s.dirty_uncached_bytes, (unsigned long long)s.peak_dirty_bytes);
	fprintf(f, "writeback_bytes %llu\nfolios %llu\nevictions %llu\ndropbehind_drops %llu\n",
		(unsigned long long)s.writeback_bytes, (unsigned long long)s.folios,
		(unsigned long long)s.evictions, (unsigned long long)s.dropbehind_drops);
	fprintf(f, "dev_read_ios %llu\ndev_read_bytes %llu\ndev_write_ios %llu\ndev_write_bytes %llu\n",
		(unsigned long long)s.dev_read_ios, (unsigned long long)s.dev_read_bytes,
		(unsigned long long)s.dev_write_ios, (unsigned long long)s.dev_write_bytes);
	fprintf(f, "edge_kept %llu\nedge_completed %llu\nedge_expired %llu\ndeferred_rmw %llu\nrmw_reads %llu\n",
		(unsigned long long)s.edge_kept, (unsigned long long)s.edge_completed,
		(unsigned long long)s.edge_expired, (unsigned long long)s.deferred_rmw,
		(unsigned long long)s.rmw_reads);
	fprintf(f, "throttle_waits %llu\nwrite_errors %llu\nio_uring %u\n", (unsigned long long)s.throttle_waits,
		(unsigned long long)s.write_errors, s.io_uring);
	fprintf(f, "fuse_reads %llu\nfuse_read_bytes %llu\nfuse_writes %llu\nfuse_write_bytes %llu\n",
		(unsigned long long)atomic_load(&fs->reads), (unsigned long long)atomic_load(&fs->read_bytes),
		(unsigned long long)writes, (unsigned long long)atomic_load(&fs->write_bytes));
	fprintf(f, "flush_errors %llu\nshared_mmap %d\n", (unsigned long long)atomic_load(&fs->flush_errors),
		fs->shared_mmap);
	stats_fds(fs, f);
	/* pcbench interleaved's figure: 4 KiB device reads per write request. */
	fprintf(f, "dev_reads_per_write %.3f\n", writes ? (double)s.dev_read_bytes / 4096.0 / (double)writes : 0.0);
	fclose(f);
	*len = n;
	return buf;
}

/* A new file in dirfd named after `name` (tmp, NAME_MAX + 1 bytes), mode
 * 0600: O_EXCL, so that nothing there already (a symlink, another user's
 * file) is opened instead.  The descriptor, or -1 with errno. */
static int stats_tmp_open(int dirfd, const char *name, char *tmp)
{
	for (int try = 0; try < 100; try++) {
		uint32_t r;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)getpid() * 2654435761u + (uint32_t)try;
		/* ".XXXXXXXX" after at most 200 bytes of the name: within NAME_MAX. */
		snprintf(tmp, NAME_MAX + 1, "%.200s.%08x", name, r);
		int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

int stats_file_write(int dirfd, const char *name, const char *text, size_t len)
{
	char tmp[NAME_MAX + 1];
	int fd = stats_tmp_open(dirfd, name, tmp);
	if (fd < 0)
		return -1;
	/* The umask took nothing: 0600 (and the daemon's own user). */
	int err = fchmod(fd, 0600) != 0 ? errno : 0;
	ssize_t n = err ? 0 : write(fd, text, len);
	if (!err)
		err = n < 0 ? errno : (size_t)n < len ? EIO : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	if (!err && renameat(dirfd, tmp, dirfd, name) != 0)
		err = errno;
	if (err)
		unlinkat(dirfd, tmp, 0);
	errno = err;
	return err ? -1 : 0;
}

/* Write -o stats_file, or log why not. */
static void stats_file_put(struct pcfs *fs, const char *text, size_t len)
{
	if (stats_file_write(fs->opt.stats_dirfd, fs->opt.stats_name, text, len) != 0)
		pcfs_log(LOG_ERR, "cannot write -o stats_file=%s: %s", fs->opt.stats_file, strerror(errno));
}

void stats_report(struct pcfs *fs)
{
	size_t len;
	char *text = stats_text(fs, &len);
	if (!text)
		return;
	if (fs->opt.stats_file)
		stats_file_put(fs, text, len);
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		pcfs_log(LOG_INFO, "stats: %s", l);
	free(text);
}

void stats_final(struct pcfs *fs, char *text, size_t len, const char *error)
{
	char *all = NULL;
	size_t n = 0;
	FILE *f = text ? open_memstream(&all, &n) : NULL;
	if (f) {
		fwrite(text, 1, len, f);
		fprintf(f, "unmount_status %d\n", *error ? 1 : 0);
		if (*error)
			fprintf(f, "unmount_error %s\n", error);
		fclose(f);
		stats_file_put(fs, all, n);
	}
	free(all);
	free(text);
}

static void stats_attr(struct pcfs *fs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = PCFS_STATS_INO;
	st->st_mode = S_IFREG | 0400;
	st->st_nlink = 1;
	st->st_uid = fs->owner;
	st->st_gid = getgid();
	st->st_blksize = 4096;
	clock_gettime(CLOCK_REALTIME, &st->st_mtim);
	st->st_atim = st->st_ctim = st->st_mtim;
}

void stats_lookup(fuse_req_t req)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = PCFS_STATS_INO;
	stats_attr(fuse_req_userdata(req), &e.attr);
	fuse_reply_entry(req, &e); /* timeouts 0: always asked again */
}

void stats_getattr(fuse_req_t req)
{
	struct stat st;
	stats_attr(fuse_req_userdata(req), &st);
	fuse_reply_attr(req, &st, 0);
}

void stats_open(fuse_req_t req, struct fuse_file_info *fi)
{
	struct pcfs *fs = fuse_req_userdata(req);
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EACCES);
		return;
	}
	struct pcfs_handle *h = calloc(1, sizeof(*h));
	if (h)
		h->text = stats_text(fs, &h->text_len);
	if (!h || !h->text) {
		free(h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Direct I/O: the kernel reads what we have, whatever the size says. */
	if (reply_open_direct(req, (uint64_t)(uintptr_t)h) == -ENOENT) {
		free(h->text);
		free(h);
	}
}
