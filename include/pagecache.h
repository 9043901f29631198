/*
 * pagecache.h - a user-space page cache for files kept open with O_DIRECT.
 *
 * pagecache gives a program that opens its files with O_DIRECT what the
 * kernel's page cache would have given it: buffered reads and writes of any
 * size and alignment, write-behind, read-ahead, fsync, truncate and hole
 * punching, inside a fixed memory budget that is allocated once.  On top of
 * that it offers *uncached* buffered I/O (PC_DONTCACHE: the data passes through
 * the cache and is dropped once it is clean) and direct I/O that stays coherent
 * with the cache (PC_DIRECT).
 *
 * Conventions
 *   - Every call that can fail returns -1 (or NULL) and sets errno, exactly as
 *     the POSIX call it is named after.  Nothing here aborts on bad input.
 *   - Every call is thread safe.  Many threads may use one struct pc_file at
 *     once, and one struct pc_cache may serve any number of files and threads.
 *   - Offsets and lengths are bytes.  A file's cached data is exactly what a
 *     program would see with pread/pwrite on a normal descriptor: reads never
 *     return stale data, and nothing a caller wrote is lost unless the call
 *     that wrote it reported an error or a later fsync/close reports one.
 *
 * Memory
 *   The cache allocates `memory_limit` bytes of folio memory up front (an
 *   anonymous mapping, faulted in at pc_cache_new unless PC_CFG_LAZY_MEMORY)
 *   plus a fixed table of folio descriptors (under 2 % of memory_limit).  Cached data never exceeds
 *   memory_limit: clean data is evicted to make room, dirty data is written
 *   back first, never dropped.
 *
 * Sharing and other processes
 *   Opening the same file twice in one cache shares one cached copy.  A file
 *   open through pagecache is locked with an open-file-description lock
 *   (F_OFD_SETLK; a write lock for writable mappings, a read lock otherwise)
 *   so that another process opening it through pagecache is refused with
 *   EBUSY instead of reading or writing an incoherent copy.  Programs that
 *   bypass pagecache are not stopped (OFD locks are advisory); while a
 *   writable handle is open, the cache takes the blocks past the size the
 *   file had at open that it never wrote for holes (it reads nothing there).
 *
 * Processes and fork
 *   A cache belongs to the process that created it.  The kernel's page
 *   cache is shared by a parent and its child; this one cannot be (its
 *   threads and its dirty data live in one process, and two copies of the
 *   same dirty data writing one file would corrupt it).  So in a child of
 *   fork(), every call on an inherited cache or handle fails at once with
 *   EPERM, without blocking, device I/O, or touching the parent's locks,
 *   threads or io_uring rings; pc_cache_stats and pc_file_stats fill zeros.
 *   In the child, pc_close of an inherited handle marks it closed and
 *   returns 0, and pc_cache_destroy of an inherited cache frees the child's
 *   copy of its memory and returns 0 (the parent's dirty data is the
 *   parent's to write: nothing is written from the child).  The folio
 *   memory itself is not inherited at all (MADV_DONTFORK), so forking a
 *   process with a large cache copies none of it.  The parent is not
 *   affected and loses nothing; fork() may be called at any time, also
 *   while other threads are inside pagecache calls.  The child may create a
 *   cache of its own, but opening a file the parent has open through
 *   pagecache fails with EBUSY (see above).  Create caches after
 *   daemonising, not before.  (A child that exec()s needs nothing: backing
 *   descriptors are O_CLOEXEC.)
 *
 * Space on the device
 *   A write that extends a file first reserves the space it needs
 *   (fallocate with FALLOC_FL_KEEP_SIZE, some MiB ahead of a growing file,
 *   only its own blocks for a write far past the end), so a full file
 *   system fails that pc_pwrite with ENOSPC or EDQUOT, as the kernel's
 *   buffered write would, instead of a later fsync.  What was reserved past
 *   the final size is given back at the file's last close.  Before writing
 *   back, the backing file is allocated up to its size, holes below
 *   included, but never more than four times the bytes written since open,
 *   so a sparse write far past the end leaves a hole as a plain pwrite
 *   would.  Allocation changes no data.  File systems without fallocate
 *   report a full device at writeback, below.
 *
 * Write errors (full device, failing device)
 *   Data whose write-back fails stays dirty and cached (PC_DONTCACHE data
 *   too): it is never dropped.  The error is recorded for fsync/close (see
 *   pc_fsync), and from then on the file is "failing": every new write to
 *   it fails up front with that errno (ENOSPC, EDQUOT, EIO, EFBIG, ...),
 *   as a full file system refuses writes; a writer waiting in the dirty
 *   throttle for that file gets the error within about 20 ms of the failed
 *   write-back instead of waiting for ever (a write that had already
 *   copied some data returns that count, the next one -1), and PC_NOWAIT
 *   writers get it instead of EAGAIN.  A failing file's dirty data does
 *   not count against the dirty limit of other files, so writers of other
 *   files and devices go on.  The file takes writes again when its
 *   write-back succeeds with nothing left dirty (the flusher retries about
 *   every second, so freeing space is enough), or at once when the caller
 *   retries pc_fsync (which retries all of it), truncates, punches or
 *   allocates.  One write larger than the dirty limit is throttled (or,
 *   with PC_DSYNC, made durable) piece by piece as it goes.  When memory
 *   is needed and only failing dirty data holds it, the call that needed it
 *   fails with the write error rather than waiting for ever.
 *   pc_cache_destroy reports data that could not be written.
 */
#ifndef PAGECACHE_H
#define PAGECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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
 */
struct pc_config {
	/* Bytes of folio memory.  Default 256 MiB; at least 16 * max_folio_size
	 * and at least 1 MiB.  Rounded down to a multiple of 4 KiB. */
	size_t memory_limit;
	/* Largest folio, a power of two from 4 KiB to 2 MiB.  Default 256 KiB.
	 * Large sequential I/O uses folios up to this size, small random I/O
	 * uses 4 KiB folios (or block_size ones when the block is larger). */
	size_t max_folio_size;
	/* Block size: the unit of per-block uptodate/dirty state and of device
	 * I/O.  0 (default): the file system's block size (st_blksize) when it
	 * is a multiple of the file's direct-I/O offset alignment (statx
	 * STATX_DIOALIGN) and at most max_folio_size, else that alignment, else
	 * 4096.  The alignment alone (often 512) is only the minimum: direct
	 * writes of part of a file system block make ext4 and XFS read or zero
	 * the rest of the block and make XFS serialise direct writers.  A
	 * non-zero value is a power of two from 512 to 65536, at most
	 * max_folio_size, and a multiple of the direct-I/O alignment (pc_open
	 * fails with EINVAL otherwise).  Blocks larger than 4 KiB make the
	 * smallest folio one block. */
	size_t block_size;
	/* Past this many dirty bytes the flusher starts writing back.  0 (what
	 * pc_config_init sets): half of dirty_limit_bytes. */
	size_t dirty_background_bytes;
	/* Writers are made to wait (never to write back themselves) while dirty
	 * and under-writeback bytes exceed this, and are let through in order
	 * of the bytes their thread has dirtied (fewest first), so writers of
	 * any write size and mode (buffered, PC_DONTCACHE) get equal shares.
	 * 0 (what pc_config_init sets): 20 % of memory_limit.  At most 50 % of
	 * memory_limit (else EINVAL). */
	size_t dirty_limit_bytes;
	/* Dirty data older than this is written back by the flusher even below
	 * the background threshold.  Default 3000 ms.  0 means "the default".
	 * (Background writeback may leave a short run of dirty data younger
	 * than 200 ms for the next round, for neighbouring writes to join.) */
	unsigned dirty_expire_ms;
	/* Flusher threads per backing device (writeback domain).  Default 1. */
	unsigned writeback_threads;
	/* Device I/Os in flight per writeback domain.  Default 64. */
	unsigned queue_depth;
	/* Largest single device I/O built by write clustering and read-ahead.
	 * Default 1 MiB. */
	size_t max_io_bytes;
	/* Largest read-ahead window.  Default 8 MiB (at most a quarter of
	 * memory_limit); 0 disables read-ahead. */
	size_t readahead_max_bytes;
	/* PC_DONTCACHE dirty bytes per writeback domain past which a writer
	 * kicks the flusher.  Default 8 MiB (at most half the background
	 * threshold). */
	size_t uncached_kick_bytes;
	/* An edge block kept for a neighbouring uncached write is dropped after
	 * this long even if no neighbour completes it (fsync and close drop it
	 * at once).  Also how long a deferred partial block waits for its
	 * neighbour before background writeback reads and merges it.  Default
	 * 5000 ms. */
	unsigned edge_expire_ms;
	/* Bit flags, PC_CFG_*. */
	unsigned flags;
};

/* Use the file's own buffered I/O when its file system refuses O_DIRECT
 * (tmpfs, some FUSE file systems).  Without it pc_open fails with EINVAL. */
#define PC_CFG_ALLOW_BUFFERED_BACKEND 0x1u
/* Do not use io_uring even when available (synchronous device I/O). */
#define PC_CFG_NO_IO_URING 0x2u
/* Do not defer read-modify-write of partly written blocks (read at write
 * time, as the kernel does).  For comparison and testing. */
#define PC_CFG_NO_DEFERRED_RMW 0x4u
/* Do not keep edge blocks of uncached writes (behave like the kernel before
 * the edge-pages patch).  For comparison and testing. */
#define PC_CFG_NO_EDGE_KEEP 0x8u
/* Do not fault the folio memory in at pc_cache_new (it is then touched, and
 * zeroed by the kernel, on first use, which slows the first writes). */
#define PC_CFG_LAZY_MEMORY 0x10u

/* Per-call flags for pc_pread/pc_pwrite and their v-variants. */
/* Data (and the metadata needed to read it back) is durable on return, as
 * RWF_DSYNC / O_DSYNC.  Device writes are whole blocks, so until the next
 * fsync/fdatasync/close the durable file size may be rounded up to a block
 * boundary (the extra bytes read as zeros); those calls make it exact. */
#define PC_DSYNC 0x1
/* Return -1/EAGAIN instead of waiting for device I/O, a locked folio, free
 * memory or the dirty throttle.  A read returns what it could copy from the
 * cache (a short count) if it copied anything before it would have blocked. */
#define PC_NOWAIT 0x2
/* Uncached buffered I/O: folios this call creates are dropped once the call
 * is done with them (reads: after copying out; writes: when their writeback
 * completes).  Folios already cached stay cached.  A block an uncached write
 * covers only partly is kept until a neighbouring write completes it (or the
 * file is fsynced/closed, or it ages past edge_expire_ms). */
#define PC_DONTCACHE 0x4
/* Direct I/O, coherent with the cache: dirty cached data of the range is
 * written back first and cached folios of the range are invalidated after a
 * write.  Any alignment is accepted: an unaligned write sends its aligned
 * middle straight to the device and its misaligned head and tail through
 * the PC_DONTCACHE path; an unaligned read reads the covering blocks. */
#define PC_DIRECT 0x8

/* Counters.  Bytes unless named otherwise.  "device" means the backing file
 * (what was submitted with pread/pwrite/io_uring on it). */
struct pc_stats {
	uint64_t dev_read_ios, dev_read_bytes;
	uint64_t dev_write_ios, dev_write_bytes;
	uint64_t cached_bytes;      /* folio memory in use now */
	uint64_t dirty_bytes;       /* dirty now (block granularity) */
	uint64_t dirty_uncached_bytes; /* of which PC_DONTCACHE (drop-behind) */
	uint64_t peak_dirty_bytes;  /* highest dirty_bytes seen */
	uint64_t writeback_bytes;   /* under writeback now */
	uint64_t folios;            /* folios cached now */
	uint64_t evictions;         /* folios evicted by memory pressure */
	uint64_t dropbehind_drops;  /* folios dropped by uncached I/O */
	uint64_t edge_kept;         /* edge folios created unmarked */
	uint64_t edge_completed;    /* edge folios completed by a neighbour */
	uint64_t edge_expired;      /* edge folios dropped at fsync/close/age */
	uint64_t deferred_rmw;      /* partial blocks written without a read */
	uint64_t rmw_reads;         /* blocks read to merge a partial write */
	uint64_t hit_bytes, miss_bytes; /* read bytes found / not found cached */
	uint64_t throttle_waits;    /* writer waits on the dirty limit */
	uint64_t flusher_kicks;     /* uncached-writer kicks of the flusher */
	uint64_t write_errors;      /* failed device writes (data kept dirty) */
	uint32_t io_uring;          /* 1: device I/O through io_uring, 0: sync */
	uint32_t block_size;        /* pc_file_stats: the file's block size */
};

/* Defaults into *cfg. */
PC_API void pc_config_init(struct pc_config *cfg);

/* A new cache.  NULL cfg means defaults.  Errors: EINVAL (bad config; every
 * field is checked), ENOMEM. */
PC_API struct pc_cache *pc_cache_new(const struct pc_config *cfg);

/* Writes back all dirty data of every file, closes files still open, stops
 * the flusher threads and frees everything.  Returns -1 with errno set to the
 * first write error if any dirty data could not be written (the data is then
 * lost; it was reported here).  NULL is EINVAL. */
PC_API int pc_cache_destroy(struct pc_cache *c);

/* Open `path`.  flags: O_RDONLY, O_WRONLY or O_RDWR, optionally with O_CREAT,
 * O_EXCL, O_TRUNC, O_DSYNC (every write as with PC_DSYNC), O_DIRECT (every
 * call as with PC_DIRECT), O_CLOEXEC (accepted, always on) and O_NOATIME.
 * Other flags are EINVAL.  The file is opened with O_DIRECT underneath.
 * Errors: those of open(2); EINVAL when the file system refuses O_DIRECT and
 * the config does not allow a buffered backend, or when the file is not a
 * regular file (EISDIR for a directory) or the configured block_size does
 * not suit it; EBUSY when another process has it open through pagecache. */
PC_API struct pc_file *pc_open(struct pc_cache *c, const char *path, int flags,
			       mode_t mode);

/* Writes back this file's dirty data, waits for it, and frees the handle
 * (always, even on error).  Returns -1 with the first write error not yet
 * reported to this handle.  When the last handle of a file is closed, edge
 * blocks kept for neighbouring uncached writes are dropped, and clean data
 * stays cached (reopening finds it) until evicted. */
PC_API int pc_close(struct pc_file *f);

/* pread/pwrite with flags (PC_DSYNC, PC_NOWAIT, PC_DONTCACHE, PC_DIRECT).
 * Any size and alignment.  Reads past end of file are short (0 at EOF).
 * Writes extend the file.  Errors: EBADF (NULL or closed handle, read on
 * O_WRONLY, write on O_RDONLY), EPERM (a handle inherited through fork),
 * EINVAL (NULL buffer with len > 0, negative offset, unknown flag), EFBIG
 * (off + len past the largest file size the file system allows, less the
 * part of a block past it), EAGAIN (PC_NOWAIT would block), ENOSPC/EDQUOT
 * (no space for a write that extends the file, or the file is failing:
 * see "Write errors" above), EIO and other device errors (PC_DSYNC,
 * PC_DIRECT, reads, and failing files).  A buffered write is complete
 * unless an error stops it after it copied some data: then it returns the
 * bytes copied (as write(2) does) and the next call reports the error;
 * with PC_NOWAIT (as RWF_NOWAIT) it returns the bytes written before it
 * would have blocked. */
PC_API ssize_t pc_pread(struct pc_file *f, void *buf, size_t len, off_t off,
			int flags);
PC_API ssize_t pc_pwrite(struct pc_file *f, const void *buf, size_t len,
			 off_t off, int flags);
/* Vector forms: the iovecs are one contiguous range of the file (a block
 * covered whole across two iovecs counts as covered whole).  iovcnt from 0 to
 * IOV_MAX; more is EINVAL. */
PC_API ssize_t pc_preadv(struct pc_file *f, const struct iovec *iov,
			 int iovcnt, off_t off, int flags);
PC_API ssize_t pc_pwritev(struct pc_file *f, const struct iovec *iov,
			  int iovcnt, off_t off, int flags);

/* Write back the file's dirty data, wait, and flush the device (fdatasync,
 * or fsync, on the backing descriptor); the file size is made durable too.
 * A write error is reported once per handle: every handle open when it
 * happened sees it on its next fsync/fdatasync/close, once.  Data that failed
 * to be written stays dirty and is retried by later writeback. */
PC_API int pc_fsync(struct pc_file *f);
PC_API int pc_fdatasync(struct pc_file *f);

/* Set the file size.  Shrinking discards cached data past the new end
 * (dirty too: it is no longer part of the file) and zeroes the tail of the
 * last block.  Errors: EBADF (not writable), EINVAL (negative), EFBIG. */
PC_API int pc_ftruncate(struct pc_file *f, off_t len);

/* Modes: 0 (allocate, may extend the size), FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE (the range reads as zeros; whole
 * blocks are deallocated on the device), FALLOC_FL_ZERO_RANGE (optionally
 * with KEEP_SIZE; extends the size without it).  Others: EOPNOTSUPP.
 * Errors: EBADF, EINVAL (len <= 0, off < 0), EFBIG, device errors. */
PC_API int pc_fallocate(struct pc_file *f, int mode, off_t off, off_t len);

/* The file size as the cache sees it (including unwritten-back writes), or
 * -1/EBADF. */
PC_API off_t pc_size(struct pc_file *f);

/* POSIX_FADV_DONTNEED: drop clean cached folios of the range and start
 * writeback of dirty ones (they are dropped when it completes).
 * POSIX_FADV_WILLNEED: read the range ahead (asynchronously).
 * POSIX_FADV_NOREUSE: later I/O to the range behaves as PC_DONTCACHE (one
 * range per file; a new NOREUSE replaces it, len 0 means to end of file).
 * POSIX_FADV_NORMAL, _SEQUENTIAL, _RANDOM: accepted; NORMAL also clears the
 * NOREUSE range.  Errors: EBADF, EINVAL (bad advice, negative off/len). */
PC_API int pc_fadvise(struct pc_file *f, off_t off, off_t len, int advice);

/* Counters of the whole cache, or of one file (its mapping: shared by all
 * handles of that file; device and hit/miss counters are per mapping,
 * memory counters are its share).  NULL arguments leave *s zeroed / do
 * nothing. */
PC_API void pc_cache_stats(struct pc_cache *c, struct pc_stats *s);
PC_API void pc_file_stats(struct pc_file *f, struct pc_stats *s);

#define PC_FAULT_READ   0x1u  /* device reads */
#define PC_FAULT_WRITE  0x2u  /* device writes */
#define PC_FAULT_SYNC   0x4u  /* fsync/fdatasync of a backing file */
#define PC_FAULT_SUBMIT 0x8u  /* io_uring submission of a request fails (io_uring mode only) */
#define PC_FAULT_ALLOC  0x10u /* allocation of a writeback request fails */

#ifdef __cplusplus
}
#endif
#endif /* PAGECACHE_H */
