/*
 * locks.c - SQLite's lock levels among the connections of one process.
 *
 * While a file is open through pagecache, its OFD lock (pc_open(3))
 * keeps every other process out: another process's pagecache gets EBUSY
 * at open, and plain SQLite's POSIX locks conflict with it.  What is left
 * is what the unix VFS's unixInodeInfo does among the connections of one
 * process, without the POSIX locks under it (as "unix-excl" holds its
 * lock for the process): one state per file, found by (dev, ino), with
 * the strongest lock held and how many connections hold SHARED or more.
 *
 *   SHARED     granted unless a writer holds PENDING or EXCLUSIVE
 *   RESERVED   one connection at a time; readers keep coming
 *   PENDING    a writer waiting for EXCLUSIVE: no new readers
 *   EXCLUSIVE  granted once the writer is the only SHARED holder
 *
 * The table is small (files open now) and its lock is held for a few
 * instructions, so one mutex serves every file.
 */
#include "vfs.h"

#include <stdlib.h>

struct pcs_inode {
	dev_t dev;
	ino_t ino;
	unsigned refs;
	int level;        /* the strongest lock any connection holds */
	unsigned shared;  /* connections holding SHARED or more */
	struct pcs_inode *next;
};

static pthread_mutex_t inodes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pcs_inode *inodes;

struct pcs_inode *pcs_inode_get(dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&inodes_lock);
	struct pcs_inode *in = inodes;
	while (in && (in->dev != dev || in->ino != ino))
		in = in->next;
	if (!in && (in = calloc(1, sizeof(*in)))) {
		in->dev = dev;
		in->ino = ino;
		in->next = inodes;
		inodes = in;
	}
	if (in)
		in->refs++;
	pthread_mutex_unlock(&inodes_lock);
	return in;
}

void pcs_inode_put(struct pcs_inode *in)
{
	pthread_mutex_lock(&inodes_lock);
	if (--in->refs == 0) {
		struct pcs_inode **p = &inodes;
		while (*p != in)
			p = &(*p)->next;
		*p = in->next;
		free(in);
	}
	pthread_mutex_unlock(&inodes_lock);
}

bool pcs_inode_alone(struct pcs_inode *in)
{
	pthread_mutex_lock(&inodes_lock);
	bool alone = in->refs == 1;
	pthread_mutex_unlock(&inodes_lock);
	return alone;
}

/* The unix VFS's rules (unixLock), where every byte lock always works. */
static int lock_locked(struct pcs_inode *in, int *held, int want)
{
	/* Another connection is past SHARED (writing, or waiting to): a
	 * newcomer may only share, and not once a writer is PENDING. */
	if (in->level != *held && (in->level >= SQLITE_LOCK_PENDING || want > SQLITE_LOCK_SHARED))
		return SQLITE_BUSY;
	if (want == SQLITE_LOCK_SHARED) {
		if (in->level < SQLITE_LOCK_SHARED)
			in->level = SQLITE_LOCK_SHARED;
		in->shared++;
		*held = SQLITE_LOCK_SHARED;
		return SQLITE_OK;
	}
	if (want == SQLITE_LOCK_EXCLUSIVE && in->shared > 1) {
		/* Readers are still in: wait for them, letting no new one in. */
		in->level = *held = SQLITE_LOCK_PENDING;
		return SQLITE_BUSY;
	}
	in->level = *held = want;
	return SQLITE_OK;
}

int pcs_lock(struct pcs_inode *in, int *held, int want)
{
	if (*held >= want)
		return SQLITE_OK;
	pthread_mutex_lock(&inodes_lock);
	int rc = lock_locked(in, held, want);
	pthread_mutex_unlock(&inodes_lock);
	return rc;
}

void pcs_unlock(struct pcs_inode *in, int *held, int want)
{
	if (*held <= want)
		return;
	pthread_mutex_lock(&inodes_lock);
	if (*held > SQLITE_LOCK_SHARED)
		in->level = SQLITE_LOCK_SHARED; /* the only one above SHARED was us */
	if (want == SQLITE_LOCK_NONE && --in->shared == 0)
		in->level = SQLITE_LOCK_NONE;
	*held = want;
	pthread_mutex_unlock(&inodes_lock);
}

bool pcs_reserved(struct pcs_inode *in)
{
	pthread_mutex_lock(&inodes_lock);
	bool r = in->level > SQLITE_LOCK_SHARED;
	pthread_mutex_unlock(&inodes_lock);
	return r;
}
