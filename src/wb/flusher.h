/*
 * flusher.h - writeback domains (struct pc_domain, one per backing device)
 * and their flusher threads (flusher.c): what to write when.  Writers never
 * write back inline; they kick the flusher, and are throttled past the
 * dirty limit (throttle.h).
 */
#ifndef PC_FLUSHER_H
#define PC_FLUSHER_H

#include "lib/shlock.h"
#include "lib/util.h"

struct pc_cache;
struct pc_mapping;
struct pc_ioq;

/*
 * What one process keeps of a domain: its flusher threads, its I/O queue
 * (ring), its descriptor of the file system.  In the process's part of
 * the cache (struct pc_proc's domains[], at the domain's index), because
 * threads and descriptors mean something in one process only
 * (docs/shared.md, section 4): dproc(d).
 */
struct pc_domain_proc {
	struct pc_ioq *ioq;
	/* Its file system's mount point, opened when the domain was made
	 * here (fs_sync.c), or -1. */
	int fs_fd;
	bool stop;        /* this process's flushers end (under d->lock) */
	unsigned nthreads;
	pthread_t *threads;
};

/* Devices a cache writes to at once: past this many, opening a file on
 * another fails (ENFILE). */
#define PC_MAX_DOMAINS 256

/* A writeback domain: one per backing device.  In the cache's memory
 * (mem/cache_mem.c), with no thread, descriptor or condition variable:
 * its waits are futex words. */
struct pc_domain {
	struct pc_cache *c;
	dev_t dev;
	unsigned index;             /* in struct pc_proc's domains[] */
	struct pc_domain_proc *procs; /* that array: one address in every process */
	struct pc_domain *next;
	struct pc_shmutex lock;     /* the dirty list; a leaf */
	_Atomic uint32_t kick_seq;  /* futex word: bumped to wake a flusher */
	_Atomic uint32_t io_seq;    /* futex word: a device write completed */
	_Atomic int64_t inflight;   /* bytes of device writes submitted, not done */
	int64_t inflight_cap;       /* keep at most this many in flight */
	_Atomic int io_waiters;     /* sleeping in wait_for_room() (writeback.c) */
	/* Files with dirty data, edges, or a closed file's data to settle:
	 * each holds a reference while on it (dirty.c). */
	struct pc_mapping *dirty_head, *dirty_tail;
	_Atomic int64_t dirty, uncached, writeback;
	_Atomic bool kicked;        /* uncached writers want writeback */
	_Atomic int nospace;        /* -ENOSPC/-EDQUOT met: new writes refused */
	_Atomic bool want_free;     /* reclaim waits for clean memory */
	/* What every file of the device shares, asked once (files_lock):
	 * the largest file size, the direct-I/O alignment. */
	bool probed;
	int64_t max_bytes;
	/* Whether data went through the kernel's page cache since the
	 * domain was made (fs_sync.c). */
	_Atomic bool kernel_written;
	unsigned dio_off_align, dio_mem_align;
};

/* This process's part of d. */
static inline struct pc_domain_proc *dproc(const struct pc_domain *d)
{
	return &d->procs[d->index];
}

/* The domain of device dev, made on first use (its I/O queue, flusher
 * threads and file system descriptor); under files_lock.  0, -ENOMEM,
 * -ENFILE (PC_MAX_DOMAINS devices already), or ioq_create's error. */
HIDDEN int domain_get(struct pc_cache *c, dev_t dev, struct pc_domain **out);
/* Stop the flusher threads (their queues stay usable). */
HIDDEN void domains_stop(struct pc_cache *c);
/* Stop flushers, wait for in-flight I/O and free the queues. */
HIDDEN void domains_drain(struct pc_cache *c);
/* A process leaving a shared cache: domains_drain, then free this
 * process's part of every domain (the domains stay the cache's). */
HIDDEN void domains_proc_free(struct pc_cache *c);
/* A process's part of the cache is new: no domain is started here. */
HIDDEN void domains_proc_init(struct pc_cache *c);
/* domains_drain, then free the domains. */
HIDDEN void domains_destroy(struct pc_cache *c);
/* Wake the domain's flusher for a round now (uncached data, closed files,
 * dirty data past the background threshold, reclaim wanting clean
 * memory); a kick not yet answered makes later ones free. */
HIDDEN void flusher_kick(struct pc_domain *d);
/* Have the flusher write m's dirty data soon (within about 0.1 s): what
 * pc_flush without wait leaves to it. */
HIDDEN void flusher_write_soon(struct pc_mapping *m);

/* Install write-back's answer to memory pressure in c (the process's want_free,
 * which reclaim calls): pc_cache_new. */
HIDDEN void flusher_layer_init(struct pc_cache *c);

#endif
