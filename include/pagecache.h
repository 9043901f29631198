/*
 * pagecache.h - a user-space page cache for files kept open with O_DIRECT.
 *
 * Buffered reads and writes of any size and alignment, write-behind,
 * read-ahead, fsync, truncate and hole punching, inside a fixed memory
 * budget allocated once; plus uncached buffered I/O (PC_DONTCACHE) and
 * direct I/O coherent with the cache (PC_DIRECT).
 *
 * Conventions: a call that fails returns -1 (or NULL) and sets errno, as
 * the POSIX call it is named after.  A NULL or closed handle is EBADF; a
 * NULL cache, path or buffer is EINVAL; arguments are checked before any
 * work.  Every call is thread safe; none may be called from a signal
 * handler.  In a child of fork() calls on inherited objects fail with EPERM.
 * Per-call flags are PC_*, cache flags PC_CFG_*; unknown bits are EINVAL.
 *
 * See pagecache(7) for the model, memory, sharing, fork, crashes, space and
 * write errors, and undefined-behaviour misuse; pc_xxx(3) for each call.
 */
#ifndef PAGECACHE_H
#define PAGECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PC_API __attribute__((visibility("default")))
#else
#define PC_API
#endif

#define PAGECACHE_VERSION_MAJOR 0
#define PAGECACHE_VERSION_MINOR 1

struct pc_cache;
struct pc_file;

/*
 * Configuration.  Fill with pc_config_init() and change what you need.
 * 0 means the default (not in readahead_max_bytes).  See pc_cache_new(3).
 */
struct pc_config {
	/* Bytes of folio memory.  Default 256 MiB; the machine must back it. */
	size_t memory_limit;
	/* Largest folio, a power of two, 4 KiB..2 MiB.  Default 256 KiB. */
	size_t max_folio_size;
	/* Unit of block state and device I/O, 512..65536.  0: from the file. */
	size_t block_size;
	/* Dirty bytes where the flusher starts.  0: dirty_limit_bytes / 2. */
	size_t dirty_background_bytes;
	/* Writers wait past this many dirty bytes.  0: memory_limit / 5. */
	size_t dirty_limit_bytes;
	/* Age at which dirty data is written back.  Default 3000 ms. */
	unsigned dirty_expire_ms;
	/* Flusher threads per backing device.  Default 1, at most 64. */
	unsigned writeback_threads;
	/* Device I/Os in flight per backing device.  Default 64, at most 4096. */
	unsigned queue_depth;
	/* Largest device I/O, 4 KiB..64 MiB.  Default 1 MiB. */
	size_t max_io_bytes;
	/* Largest read-ahead window.  Default 8 MiB (here 0 disables it). */
	size_t readahead_max_bytes;
	/* PC_DONTCACHE dirty bytes that wake the flusher.  Default 8 MiB. */
	size_t uncached_kick_bytes;
	/* How long a dirty edge or partial block waits.  Default 5000 ms. */
	unsigned edge_expire_ms;
	/* Memory for kept clean edges of uncached writes.  0: memory_limit/4. */
	size_t edge_budget_bytes;
	/* Closed files whose descriptor is kept.  0: RLIMIT_NOFILE / 4. */
	unsigned max_closed_files;
	/* Bit flags, PC_CFG_*; any other bit is EINVAL. */
	unsigned flags;
	/* NULL: a cache of this process alone.  A name (1 to 200 bytes, no
	 * '/', not "." or ".."; else EINVAL): the cache of that name shared
	 * by the processes of one user, created by the first pc_cache_new of
	 * the name and attached to by the others (another user's: EACCES).
	 * The creator's settings rule; an attacher's explicit settings that
	 * differ from them are EINVAL.  See pc_cache_new(3), pagecache(7). */
	const char *shared_name;
};

/* Use the file's buffered I/O where O_DIRECT is refused (else EINVAL). */
#define PC_CFG_ALLOW_BUFFERED_BACKEND 0x1u
/* Do not use io_uring even when available (synchronous device I/O). */
#define PC_CFG_NO_IO_URING 0x2u
/* Read partly written blocks at write time.  For testing. */
#define PC_CFG_NO_DEFERRED_RMW 0x4u
/* Do not keep edge blocks of uncached writes.  For testing. */
#define PC_CFG_NO_EDGE_KEEP 0x8u
/* No background fault-in thread: calls fault in the memory they use. */
#define PC_CFG_LAZY_MEMORY 0x10u

/* pc_close writes the file's dirty data back and waits for it. */
#define PC_CFG_CLOSE_TO_OPEN 0x20u
/* At exit(3), write back every file's dirty data and wait for it. */
#define PC_CFG_FLUSH_AT_EXIT 0x40u
/* Fault in all of memory_limit at once.  Not with PC_CFG_LAZY_MEMORY. */
#define PC_CFG_EAGER_MEMORY 0x80u

/* Per-call flags for pc_pread/pc_pwrite, their v-variants and (all but
 * PC_DIRECT) the span calls.  See pc_pread(3). */
/* Durable on return, as RWF_DSYNC. */
#define PC_DSYNC 0x1
/* -1/EAGAIN (or a short read) instead of blocking, as RWF_NOWAIT. */
#define PC_NOWAIT 0x2
/* Uncached buffered I/O: folios this call creates are dropped after use. */
#define PC_DONTCACHE 0x4
/* Direct I/O coherent with the cache, at any alignment. */
#define PC_DIRECT 0x8

/* Counters.  Bytes unless named otherwise; "dev" is the backing file.
 * See pc_stats(3). */
struct pc_stats {
	uint64_t dev_read_ios, dev_read_bytes;
	uint64_t dev_write_ios, dev_write_bytes;
	uint64_t cached_bytes;      /* folio memory in use now */
	uint64_t dirty_bytes;       /* dirty now (block granularity) */
	uint64_t dirty_uncached_bytes; /* of which PC_DONTCACHE */
	uint64_t peak_dirty_bytes;  /* highest dirty_bytes seen */
	uint64_t writeback_bytes;   /* under writeback now */
	uint64_t folios;            /* folios cached now */
	uint64_t evictions;         /* folios evicted by memory pressure */
	uint64_t dropbehind_drops;  /* folios dropped by uncached I/O */
	uint64_t edge_kept;         /* edge folios kept by uncached writes */
	uint64_t edge_completed;    /* edge folios completed by a neighbour */
	uint64_t edge_expired;      /* lone edges dropped at fsync/close */
	uint64_t edge_evicted_budget; /* edges dropped for edge_budget_bytes */
	uint64_t edge_waits;        /* uncached writes that waited for edges */
	uint64_t deferred_rmw;      /* partial blocks written without a read */
	uint64_t rmw_reads;         /* blocks read to merge a partial write */
	uint64_t hit_bytes, miss_bytes; /* read bytes found / not found cached */
	uint64_t throttle_waits;    /* writer waits on the dirty limit */
	uint64_t throttle_pauses;   /* pacing sleeps below the dirty limit */
	uint64_t flusher_kicks;     /* uncached-writer kicks of the flusher */
	uint64_t reserve_inline;    /* writes that reserved space themselves */
	uint64_t write_errors;      /* failed device writes (data kept dirty) */
	uint64_t ra_sync_windows;   /* read-ahead windows started by a miss */
	uint64_t ra_async_windows;  /* windows started by reaching a mark */
	uint64_t ra_window_bytes;   /* bytes those windows covered */
	uint64_t ra_random_reads;   /* misses read with no window */
	uint64_t prefault_pending_bytes; /* lead the fault-in thread lacks */
	uint64_t meta_bytes;        /* the cache's own structures (not folios) */
	uint32_t io_uring;          /* 1: device I/O through io_uring, 0: sync */
	uint32_t block_size;        /* pc_file_stats: the file's block size */
};

/* Defaults into *cfg.  NULL does nothing.  See pc_config_init(3). */
PC_API void pc_config_init(struct pc_config *cfg);

/* A new cache, or (shared_name) the shared cache of that name, made or
 * attached to; NULL cfg means defaults.  Returns NULL/errno on failure:
 * EINVAL (a field out of range, unknown flag, a bad name, a setting that
 * differs from a shared cache's), ENOMEM (the machine, or /dev/shm for a
 * shared cache, cannot back memory_limit, or an allocation failed); for a
 * shared cache also EACCES (another user's), EBUSY (this process is
 * attached to it already), EMFILE (64 processes attached), EPROTO,
 * ETIMEDOUT, EADDRINUSE.  See pc_cache_new(3). */
PC_API struct pc_cache *pc_cache_new(const struct pc_config *cfg);

/* The cache's settings, every default resolved (what the cache uses: a 0
 * asked for becomes the value it stands for), into *cfg.  Returns 0, or
 * -1/errno: EINVAL (NULL c or cfg), EPERM (a child of fork()).  See
 * pc_cache_config(3). */
PC_API int pc_cache_config(struct pc_cache *c, struct pc_config *cfg);

/* Write back all dirty data (closed files too), close open files, stop the
 * threads and free the cache, even on error.  Failed write-back is not
 * retried.  A shared cache's process that is not the last one attached
 * writes back the files it alone holds and detaches; the last one does
 * all of this.  Returns 0, or -1/errno: EINVAL (NULL), the first write
 * error (that data is lost).  0 in a child of fork().  See
 * pc_cache_destroy(3). */
PC_API int pc_cache_destroy(struct pc_cache *c);

/* Open `path` through the cache, with O_DIRECT underneath.  flags: an
 * access mode and O_CREAT, O_EXCL, O_TRUNC, O_DSYNC, O_SYNC, O_DIRECT,
 * O_CLOEXEC, O_LARGEFILE, O_NOATIME; `mode` as for open(2).  O_WRONLY
 * needs read permission.  Returns the handle, or NULL/errno: EINVAL (bad
 * flags, not a regular file, O_DIRECT refused, block_size unsuited),
 * EISDIR, EBUSY (open through pagecache elsewhere), ENOMEM and ENFILE (the
 * cache holds as many files as it can), open(2)'s errors.  See pc_open(3). */
PC_API struct pc_file *pc_open(struct pc_cache *c, const char *path, int flags,
			       mode_t mode);

/* pc_open relative to `dirfd`, as openat(2); O_NOFOLLOW accepted (ELOOP).
 * Errors: those of pc_open, EBADF (bad dirfd).  See pc_openat(3). */
PC_API struct pc_file *pc_openat(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode);

/* close(2) of one of several descriptors (a FUSE FLUSH): report the first
 * write error not yet reported to this handle and start write-back
 * (wait = 0), or write back and wait (wait != 0).  The handle stays open.
 * Returns 0, or -1/errno: EBADF, EPERM, a write error.  See pc_flush(3). */
PC_API int pc_flush(struct pc_file *f, int wait);

/* Free the handle (always, even on error).  Does not wait for write-back
 * unless PC_CFG_CLOSE_TO_OPEN; clean data stays cached.  Returns 0, or
 * -1/errno: EBADF, the first write error not yet reported to this handle.
 * See pc_close(3). */
PC_API int pc_close(struct pc_file *f);

/* pread/pwrite with flags (PC_DSYNC, PC_NOWAIT, PC_DONTCACHE, PC_DIRECT),
 * any size and alignment.  Return the bytes moved (short at end of file,
 * or when an error stops a write after it copied data), or -1/errno:
 * EBADF (bad handle or access mode), EPERM, EINVAL (NULL buf, negative
 * off, unknown flag, len > SSIZE_MAX), EFBIG, EAGAIN (PC_NOWAIT), ENOSPC,
 * EDQUOT, EIO and other device errors.  See pc_pread(3). */
PC_API ssize_t pc_pread(struct pc_file *f, void *buf, size_t len, off_t off,
			int flags);
PC_API ssize_t pc_pwrite(struct pc_file *f, const void *buf, size_t len,
			 off_t off, int flags);
/* Vector forms over one contiguous range of the file.  Errors: those of
 * pc_pread/pc_pwrite, EINVAL (bad iovcnt or iovecs).  See pc_preadv(3). */
PC_API ssize_t pc_preadv(struct pc_file *f, const struct iovec *iov,
			 int iovcnt, off_t off, int flags);
PC_API ssize_t pc_pwritev(struct pc_file *f, const struct iovec *iov,
			  int iovcnt, off_t off, int flags);

/* Zero-copy spans: cached bytes of one folio, read or written in place.
 * Every begin that returned >= 0 is ended exactly once on the same struct.
 * Flags: PC_NOWAIT, PC_DONTCACHE, PC_DSYNC.  See pc_read_begin(3). */
struct pc_span {
	void *data;  /* the span's first byte, in the cache's memory */
	size_t len;  /* bytes at data: what the begin call returned */
	/* Private to pagecache.  Do not read or change it. */
	struct pc_span_private {
		struct pc_cache *cache;
		void *mapping, *folio, *save;
		uint64_t off;
		size_t len, save_off, save_len;
		int flags;
		unsigned state, owner_generation;
		unsigned char created, head_full, tail_full;
	} priv;
};

/* Pin up to len cached bytes at off (read in if needed); s->data points at
 * them.  Returns s->len (0 at end of file), or -1/errno: EBADF, EPERM,
 * EINVAL (NULL s, negative off, bad flags, PC_DIRECT or O_DIRECT handle),
 * EAGAIN, ENOMEM, device errors.  See pc_read_begin(3). */
PC_API ssize_t pc_read_begin(struct pc_file *f, off_t off, size_t len,
			     int flags, struct pc_span *s);
/* End a read span; s->data is not to be used after.  See pc_read_end(3). */
PC_API void pc_read_end(struct pc_span *s);

/* Lock up to len bytes at off in one folio for writing in place; s->data
 * points at them.  Until pc_write_end, this thread must not call what
 * would wait for the span (deadlock).  Returns s->len, or -1/errno: those
 * of pc_read_begin, EFBIG, ENOSPC, EDQUOT.  See pc_write_begin(3). */
PC_API ssize_t pc_write_begin(struct pc_file *f, off_t off, size_t len,
			      int flags, struct pc_span *s);
/* End a write span: its first `copied` bytes are written, as by pc_pwrite.
 * Returns 0, or -1/errno: EINVAL (not an open write span, or copied >
 * s->len: the span stays open), EPERM, a read or PC_DSYNC device error.
 * See pc_write_end(3). */
PC_API int pc_write_end(struct pc_span *s, size_t copied);

/* Write back the file's dirty data, wait, and flush the device.  Any open
 * handle.  A write error is reported once per handle.  Returns 0, or
 * -1/errno: EBADF, write errors.  See pc_fsync(3). */
PC_API int pc_fsync(struct pc_file *f);
PC_API int pc_fdatasync(struct pc_file *f);

/* Set the file size; shrinking discards cached data past it.  Returns 0,
 * or -1/errno: EBADF (also O_RDONLY), EINVAL, EFBIG.  See pc_ftruncate(3). */
PC_API int pc_ftruncate(struct pc_file *f, off_t len);

/* Allocate (0, FALLOC_FL_KEEP_SIZE), punch a hole (PUNCH_HOLE|KEEP_SIZE)
 * or zero a range (FALLOC_FL_ZERO_RANGE).  Returns 0, or -1/errno: EBADF
 * (also O_RDONLY), EINVAL, EFBIG, EOPNOTSUPP (other modes), device errors.
 * See pc_fallocate(3). */
PC_API int pc_fallocate(struct pc_file *f, int mode, off_t off, off_t len);

/* The file size as the cache sees it, or -1/EBADF.  See pc_size(3). */
PC_API off_t pc_size(struct pc_file *f);

/* lseek(2) over the file as the cache sees it (SEEK_DATA, SEEK_HOLE; a
 * handle has no position).  Returns the offset, or -1/errno: EBADF, EPERM,
 * EINVAL, ENXIO.  See pc_lseek(3). */
PC_API off_t pc_lseek(struct pc_file *f, off_t off, int whence);

/* What the cache holds of a file, by st_dev and st_ino of its backing
 * file.  See pc_cache_file_info(3). */
struct pc_file_info {
	off_t size;              /* the size as the cache sees it */
	uint64_t cached_bytes;   /* folio memory of the file */
	uint64_t dirty_bytes;    /* not yet written back */
	uint32_t open_handles;   /* handles open now */
	uint32_t unsettled;      /* 1: closed with data still to be written */
};
/* Fill *out with a snapshot.  Returns 0, or -1/errno: EINVAL, EPERM,
 * ENOENT (nothing cached).  See pc_cache_file_info(3). */
PC_API int pc_cache_file_info(struct pc_cache *c, dev_t dev, ino_t ino, struct pc_file_info *out);

/* futimens(2) on a backing file (any descriptor of it) without the cache
 * taking it for an outside change.  Returns 0, or -1/errno: EINVAL, EPERM,
 * EBADF, EBUSY (unsettled), utimensat(2)'s errors.
 * See pc_cache_file_set_times(3). */
PC_API int pc_cache_file_set_times(struct pc_cache *c, int fd, const struct timespec times[2]);

/* posix_fadvise for the cache: DONTNEED, WILLNEED, NOREUSE, SEQUENTIAL,
 * RANDOM, NORMAL.  Returns 0, or -1 with errno set (unlike posix_fadvise):
 * EBADF, EINVAL (unknown advice, negative off or len).  See pc_fadvise(3). */
PC_API int pc_fadvise(struct pc_file *f, off_t off, off_t len, int advice);

/* Counters of the whole cache, or of one file.  A NULL or closed argument
 * zeroes *s; a NULL s does nothing.  See pc_stats(3). */
PC_API void pc_cache_stats(struct pc_cache *c, struct pc_stats *s);
PC_API void pc_file_stats(struct pc_file *f, struct pc_stats *s);

/*
 * Fault injection, FOR TESTS ONLY: make the cache's device I/O fail, come
 * back short or late.  Rules are tried in the order added; the first that
 * fires decides.  See pc_fault_inject(3).
 */
#define PC_FAULT_READ   0x1u  /* device reads */
#define PC_FAULT_WRITE  0x2u  /* device writes */
#define PC_FAULT_SYNC   0x4u  /* fsync/fdatasync of a backing file */
#define PC_FAULT_SUBMIT 0x8u  /* io_uring submission fails (io_uring only) */
#define PC_FAULT_ALLOC  0x10u /* allocation of a writeback request fails */
enum { PC_FAULT_FAIL = 0, PC_FAULT_SHORT = 1, PC_FAULT_DELAY = 2 };
struct pc_fault {
	unsigned ops;         /* PC_FAULT_* mask this rule applies to */
	int action;           /* PC_FAULT_FAIL, PC_FAULT_SHORT, PC_FAULT_DELAY */
	int error;            /* PC_FAULT_FAIL: a positive errno */
	unsigned delay_ms;    /* PC_FAULT_DELAY: 1..60000 */
	struct pc_file *file; /* only I/O of this handle's file; NULL: any file */
	off_t start, end;     /* only I/O overlapping [start, end); end 0: no upper bound */
	uint64_t skip;        /* let this many matching I/Os pass before faulting */
	uint64_t count;       /* then fault this many; 0: every matching one until removed */
	unsigned one_in;      /* > 1: fault each matching I/O with probability 1/one_in (seeded) */
	uint64_t seed;        /* for one_in; 0 picks a fixed default */
};
/* Add a rule.  Returns its id (>= 0), or -1/errno: EINVAL (bad rule),
 * ENOSPC (16 rules), ENOMEM. */
PC_API int pc_fault_inject(struct pc_cache *c, const struct pc_fault *rule);
/* Remove rule `id`, or every rule with id -1.  -1/EINVAL for an unknown id. */
PC_API int pc_fault_remove(struct pc_cache *c, int id);
/* Faults injected so far by rule `id` (-1: all rules, removed ones included).
 * 0 for an unknown or removed id. */
PC_API uint64_t pc_fault_count(struct pc_cache *c, int id);

#ifdef __cplusplus
}
#endif
#endif /* PAGECACHE_H */
