/*
 * reply.c - open and create replies built by hand.
 *
 * Every open of a regular file is answered with FOPEN_DIRECT_IO (the
 * kernel caches nothing a second time: pagecache is the cache) and
 * FOPEN_PARALLEL_DIRECT_WRITES (the kernel lets writes to one file run in
 * parallel instead of taking the inode lock for each).  libfuse 3.14's
 * struct fuse_file_info has no bit for the second flag (3.15 added
 * `parallel_direct_writes`), and fuse_reply_open/fuse_reply_create copy
 * only the bits they know.  So pcfs sends the reply itself with
 * fuse_reply_iov: the same struct fuse_open_out (and fuse_entry_out) the
 * kernel's protocol defines, with the flags it wants.  This works with
 * every libfuse 3 and every kernel that has the flag (5.16 and later; an
 * older kernel ignores the bit).
 */
#include "pcfs.h"

#include <linux/fuse.h>
#include <string.h>

#ifndef FOPEN_PARALLEL_DIRECT_WRITES
#define FOPEN_PARALLEL_DIRECT_WRITES (1 << 6)
#endif

static const uint32_t open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;

void fill_entry(struct pcfs_inode *in, const struct stat *st, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->is_root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
	e->attr = *st;
	e->attr_timeout = PCFS_TIMEOUT;
	e->entry_timeout = PCFS_TIMEOUT;
}

static void timeout_split(double t, uint64_t *sec, uint32_t *nsec)
{
	*sec = (uint64_t)t;
	*nsec = (uint32_t)((t - (double)*sec) * 1e9);
}

static void attr_from_stat(const struct stat *st, struct fuse_attr *a)
{
	a->ino = st->st_ino;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->atime = (uint64_t)st->st_atim.tv_sec;
	a->mtime = (uint64_t)st->st_mtim.tv_sec;
	a->ctime = (uint64_t)st->st_ctim.tv_sec;
	a->atimensec = (uint32_t)st->st_atim.tv_nsec;
	a->mtimensec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctimensec = (uint32_t)st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->rdev = (uint32_t)st->st_rdev;
	a->blksize = (uint32_t)st->st_blksize;
}

/* 0, or what fuse_reply_iov said: -ENOENT when the open was interrupted
 * and the kernel will not know the handle (the caller closes it). */
int reply_open_direct(fuse_req_t req, uint64_t fh)
{
	struct fuse_open_out out = { .fh = fh, .open_flags = open_flags };
	struct iovec iov = { &out, sizeof(out) };
	return fuse_reply_iov(req, &iov, 1);
}

int reply_create_direct(fuse_req_t req, const struct fuse_entry_param *e, uint64_t fh)
{
	struct {
		struct fuse_entry_out entry;
		struct fuse_open_out open;
	} out;
	memset(&out, 0, sizeof(out));
	out.entry.nodeid = e->ino;
	out.entry.generation = e->generation;
	timeout_split(e->entry_timeout, &out.entry.entry_valid, &out.entry.entry_valid_nsec);
	timeout_split(e->attr_timeout, &out.entry.attr_valid, &out.entry.attr_valid_nsec);
	attr_from_stat(&e->attr, &out.entry.attr);
	out.open.fh = fh;
	out.open.open_flags = open_flags;
	struct iovec iov = { &out, sizeof(out) };
	return fuse_reply_iov(req, &iov, 1);
}
