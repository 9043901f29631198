/*
 * flusher.h - writeback domains (struct pc_domain, one per backing device)
 * and their flusher threads (flusher.c): what to write when.  Writers never
 * write back inline; they kick the flusher, and are throttled past the
 * dirty limit (throttle.h).
 */
#ifndef PC_FLUSHER_H
#define PC_FLUSHER_H

#include "lib/util.h"

struct pc_cache;
struct pc_mapping;
struct pc_ioq;

/* A writeback domain: one per backing device. */
struct pc_domain {
	struct pc_cache *c;
	dev_t dev;
	struct pc_domain *next;
	pthread_mutex_t lock;
	pthread_cond_t kick_cv;     /* wakes the flusher */
	pthread_cond_t io_cv;       /* a device write completed */
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
	bool stop;
	/* What every file of the device shares, asked once (files_lock):
	 * the largest file size, the direct-I/O alignment. */
	bool probed;
	int64_t max_bytes;
	/* Its file system's mount point, opened when the domain was made
	 * (fs_sync.c), or -1; whether data went through the kernel since. */
	int fs_fd;
	_Atomic bool kernel_written;
	unsigned dio_off_align, dio_mem_align;
	unsigned nthreads;
	pthread_t *threads;
	struct pc_ioq *ioq;
};

/* The domain of device dev, made on first use (its I/O queue, flusher
 * threads and file system descriptor); under files_lock. */
HIDDEN int domain_get(struct pc_cache *c, dev_t dev, struct pc_domain **out);
/* Stop the flusher threads (their queues stay usable). */
HIDDEN void domains_stop(struct pc_cache *c);
/* Stop flushers, wait for in-flight I/O and free the queues. */
HIDDEN void domains_drain(struct pc_cache *c);
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
