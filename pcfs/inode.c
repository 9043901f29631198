/*
 * inode.c - the inode table: every backing file or directory the kernel
 * holds lookups on, by (dev, ino), each with an O_PATH descriptor (as
 * libfuse's passthrough_ll does; fds.c bounds how many are open).  Two names of one file (hard links) are
 * one inode, so its cached data is one mapping in pagecache too.
 *
 * An inode goes when the kernel has forgotten all its lookups, unless it
 * still owes the backing file an mtime (see times.c): then it stays until
 * its data is written and the time applied.
 */
#include "pcfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static size_t bucket_of(struct pcfs *fs, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)ino * 0xC2B2AE3D27D4EB4Full);
	return (size_t)(h >> 20) % fs->nbuckets;
}

int inode_table_init(struct pcfs *fs)
{
	fs->nbuckets = 1u << 14;
	fs->buckets = calloc(fs->nbuckets, sizeof(*fs->buckets));
	pthread_mutex_init(&fs->table_lock, NULL);
	return fs->buckets ? 0 : -ENOMEM;
}

struct pcfs_inode *inode_of(fuse_req_t req, fuse_ino_t ino)
{
	struct pcfs *fs = fuse_req_userdata(req);
	if (ino == FUSE_ROOT_ID)
		return &fs->root;
	return (struct pcfs_inode *)(uintptr_t)ino;
}

/* Table lock held. */
static void table_grow(struct pcfs *fs)
{
	size_t n = fs->nbuckets * 4;
	struct pcfs_inode **nb = calloc(n, sizeof(*nb));
	if (!nb)
		return; /* longer chains, still right */
	struct pcfs_inode **old = fs->buckets;
	size_t old_n = fs->nbuckets;
	fs->buckets = nb;
	fs->nbuckets = n;
	for (size_t i = 0; i < old_n; i++)
		while (old[i]) {
			struct pcfs_inode *in = old[i];
			old[i] = in->hash_next;
			size_t b = bucket_of(fs, in->dev, in->ino);
			in->hash_next = nb[b];
			nb[b] = in;
		}
	free(old);
}

static void table_remove(struct pcfs *fs, struct pcfs_inode *in);
static void inode_put_hold(struct pcfs *fs, struct pcfs_inode *in);

struct pcfs_inode *inode_get(struct pcfs *fs, int fd, const struct stat *st)
{
	if (st->st_dev == fs->root.dev && st->st_ino == fs->root.ino) {
		close(fd); /* the root, reached again by a name (a bind mount, "..") */
		return &fs->root;
	}
	size_t b;
	struct pcfs_inode *in;
retry:
	pthread_mutex_lock(&fs->table_lock);
	b = bucket_of(fs, st->st_dev, st->st_ino);
	for (in = fs->buckets[b]; in; in = in->hash_next)
		if (in->dev == st->st_dev && in->ino == st->st_ino)
			break;
	if (in && !fds_keeps_number(fs, in)) {
		/* Held while the file it names is checked without the lock. */
		in->nopen++;
		pthread_mutex_unlock(&fs->table_lock);
		bool same = fds_same_file(in, fd);
		pthread_mutex_lock(&fs->table_lock);
		if (!same) {
			/* The number names another file now: the old inode
			 * leaves the table, goes at its last FORGET, and owes no
			 * mtime to a file that is gone; this file gets an inode
			 * of its own. */
			table_remove(fs, in);
			pthread_mutex_unlock(&fs->table_lock);
			pthread_mutex_lock(&in->lock);
			in->times_pending = false;
			pthread_mutex_unlock(&in->lock);
			inode_put_hold(fs, in);
			goto retry; /* another lookup may have made this file's inode meanwhile */
		}
		in->nopen--;
	}
	if (in) {
		in->nlookup++;
		pthread_mutex_unlock(&fs->table_lock);
		fds_offer(fs, in, fd);
		return in;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		pthread_mutex_unlock(&fs->table_lock);
		close(fd);
		return NULL;
	}
	in->dev = st->st_dev;
	in->ino = st->st_ino;
	fds_adopt(fs, in, fd);
	in->nlookup = 1;
	pthread_mutex_init(&in->lock, NULL);
	if (fs->ninodes >= 2 * fs->nbuckets) {
		table_grow(fs);
		b = bucket_of(fs, st->st_dev, st->st_ino);
	}
	in->hash_next = fs->buckets[b];
	fs->buckets[b] = in;
	fs->ninodes++;
	pthread_mutex_unlock(&fs->table_lock);
	return in;
}

/* Table lock held. */
static void table_remove(struct pcfs *fs, struct pcfs_inode *in)
{
	struct pcfs_inode **pp = &fs->buckets[bucket_of(fs, in->dev, in->ino)];
	while (*pp && *pp != in)
		pp = &(*pp)->hash_next;
	if (*pp) {
		*pp = in->hash_next;
		fs->ninodes--;
	}
}

static void inode_free(struct pcfs *fs, struct pcfs_inode *in)
{
	fds_release(fs, in);
	pthread_mutex_destroy(&in->lock);
	free(in);
}

/* Nobody holds it and it owes nothing: out of the table (lock held). */
static bool unused(struct pcfs_inode *in)
{
	return in->nlookup == 0 && in->nopen == 0 && !in->times_pending;
}

/* Drop a hold taken (nopen++) under the table lock, which is not held
 * now; the inode goes if that was all that kept it. */
static void inode_put_hold(struct pcfs *fs, struct pcfs_inode *in)
{
	pthread_mutex_lock(&fs->table_lock);
	in->nopen--;
	bool gone = unused(in);
	if (gone)
		table_remove(fs, in);
	pthread_mutex_unlock(&fs->table_lock);
	if (gone)
		inode_free(fs, in);
}

void inode_forget(struct pcfs *fs, struct pcfs_inode *in, uint64_t n)
{
	if (in->is_root)
		return;
	pthread_mutex_lock(&fs->table_lock);
	in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
	if (in->nlookup == 0 && in->nopen == 0) {
		/* Held (nopen) while the lock is dropped: a lookup and a second
		 * FORGET meanwhile then find it held and leave it to us, instead
		 * of both settling it and one freeing it under the other. */
		in->nopen++;
		pthread_mutex_unlock(&fs->table_lock);
		times_try_settle(fs, in, false); /* an mtime it owes: keep it until paid */
		inode_put_hold(fs, in);
		return;
	}
	pthread_mutex_unlock(&fs->table_lock);
}

void inode_open_count(struct pcfs *fs, struct pcfs_inode *in, int delta)
{
	pthread_mutex_lock(&fs->table_lock);
	in->nopen = (unsigned)((int)in->nopen + delta);
	pthread_mutex_unlock(&fs->table_lock);
}

/*
 * Truncate to zero and rewrite (`: >f; echo new >f`, or ftruncate(fd, 0)
 * and writes): the backing file is empty at once, and the new data would
 * stay only in the cache until the flusher writes it, so a crash of the
 * daemon meanwhile would leave the file empty, where the program meant to
 * replace its content.  ext4 (auto_da_alloc) starts writing such a
 * file's data at its next release; pcfs writes it back at the first
 * close (FLUSH) that finds the file no longer empty, and waits for it
 * (close(2) waits for FLUSH; RELEASE comes later, too late to count on).
 * Only the write, no fsync: after that a crash of the daemon loses
 * nothing of it, and the backing file system's rules decide what a crash
 * of the machine keeps.
 */
void inode_mark_emptied(struct pcfs_inode *in)
{
	atomic_store_explicit(&in->emptied, true, memory_order_relaxed);
}

bool inode_take_emptied(struct pcfs_inode *in)
{
	return atomic_load_explicit(&in->emptied, memory_order_relaxed) &&
	       atomic_exchange_explicit(&in->emptied, false, memory_order_relaxed);
}

/* Snapshot of the inodes that owe an mtime and nobody holds (all: every
 * one that owes an mtime), each held (nopen) until put back. */
static size_t collect_pending(struct pcfs *fs, bool all, struct pcfs_inode ***out)
{
	size_t n = 0, cap = 0;
	struct pcfs_inode **v = NULL;
	pthread_mutex_lock(&fs->table_lock);
	for (size_t i = 0; i < fs->nbuckets; i++)
		for (struct pcfs_inode *in = fs->buckets[i]; in; in = in->hash_next) {
			if (!in->times_pending || (!all && (in->nlookup || in->nopen)))
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				struct pcfs_inode **nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					goto out;
				v = nv;
			}
			in->nopen++; /* held while we look at it */
			v[n++] = in;
		}
out:
	pthread_mutex_unlock(&fs->table_lock);
	*out = v;
	return n;
}

void inode_settle_times(struct pcfs *fs, bool all)
{
	struct pcfs_inode **v;
	size_t n = collect_pending(fs, all, &v);
	for (size_t i = 0; i < n; i++) {
		struct pcfs_inode *in = v[i];
		times_try_settle(fs, in, all);
		inode_put_hold(fs, in);
	}
	free(v);
}

void inode_table_free(struct pcfs *fs)
{
	for (size_t i = 0; i < fs->nbuckets; i++)
		while (fs->buckets[i]) {
			struct pcfs_inode *in = fs->buckets[i];
			fs->buckets[i] = in->hash_next;
			inode_free(fs, in);
		}
	free(fs->buckets);
	fs->buckets = NULL;
}
