/*
 * fs_sync.c - the file system of a writeback domain, synced when the cache
 * is destroyed.
 *
 * A closed file's end (all of a small closed file) goes to its backing
 * file through the kernel's page cache (backing_write_tail): pagecache
 * then takes it for written, and the kernel writes it to the device later.
 * So pc_cache_destroy must not stop there: it syncs each file system such
 * data went to, once (syncfs), and reports the write error the kernel met
 * with it.  syncfs reports the errors of a file system met since the
 * descriptor it is given was opened, so each domain opens its file
 * system's mount point when it is created, before any of its files is
 * written.  Where that cannot be had (no mount point found for the
 * device, as for btrfs subvolumes, or not one this process may open),
 * each such file is synced by its own descriptor instead (fdatasync),
 * which reports errors met since that descriptor was opened.
 */
#include "io/fs_sync.h"

#include "api/cache.h"
#include "lib/errseq.h"
#include "wb/flusher.h"
#include "mem/mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *out = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' &&
		    p[3] <= '7') {
			*out++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*out++ = *p;
		}
	}
	*out = 0;
}

/* A directory of the mount at `mnt` that is on dev, opened; or -1. */
static int open_if_on(const char *mnt, dev_t dev)
{
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != dev)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int fs_sync_open(dev_t dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	int fd = -1;
	while (fd < 0 && getline(&line, &cap, f) > 0) {
		/* id parent major:minor root mount-point ... */
		unsigned maj, min;
		char *mnt = NULL;
		if (sscanf(line, "%*u %*u %u:%u %*s %ms", &maj, &min, &mnt) == 3 && makedev(maj, min) == dev) {
			unescape(mnt);
			fd = open_if_on(mnt, dev);
		}
		free(mnt);
	}
	free(line);
	fclose(f);
	return fd;
}

void fs_sync_note_kernel_write(struct pc_mapping *m)
{
	if (!atomic_load_explicit(&m->kernel_written, memory_order_relaxed))
		atomic_store(&m->kernel_written, true);
	if (!atomic_load_explicit(&m->dom->kernel_written, memory_order_relaxed))
		atomic_store(&m->dom->kernel_written, true);
}

int fs_sync_mapping(struct pc_mapping *m)
{
	if (!atomic_load(&m->kernel_written) || dproc(m->dom)->fs_fd >= 0 || mproc(m)->fd < 0)
		return 0; /* nothing through the kernel, or synced with its domain */
	/* Cleared before the sync, as a dirty bit is before write-back: a
	 * kernel write that lands meanwhile sets it again for the next. */
	atomic_store(&m->kernel_written, false);
	if (fdatasync(mproc(m)->fd) == 0)
		return 0;
	int err = -errno;
	atomic_store(&m->kernel_written, true);
	return err;
}

void fs_sync_before_close(struct pc_mapping *m)
{
	int err = fs_sync_mapping(m);
	if (err)
		errseq_set(&m->wb_err, err); /* unseen: the next handle or destroy reports it */
}

int fs_sync_domains(struct pc_cache *c)
{
	int first = 0;
	for (struct pc_domain *d = c->domains; d; d = d->next) {
		int fs_fd = dproc(d)->fs_fd;
		if (!atomic_load(&d->kernel_written) || fs_fd < 0)
			continue;
		int err = syncfs(fs_fd) == 0 ? 0 : -errno;
		if (!err)
			atomic_store(&d->kernel_written, false);
		if (err && !first)
			first = err;
	}
	return first;
}
