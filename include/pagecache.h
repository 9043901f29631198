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
 *   - Bad arguments: a NULL or closed struct pc_file is EBADF; a NULL cache,
 *     path, buffer or iovec array (with a non-zero length) is EINVAL, never
 *     EFAULT (pc_cache_stats and pc_file_stats, which return nothing, zero
 *     their output instead).  Handles, pointers, flags, offsets and lengths
 *     are checked before any work, so a call failing on them changes
 *     nothing.  When several arguments are bad, which of their errors is
 *     reported is not specified.
 *   - Misuse that is not detected, with undefined behaviour (a crash or
 *     memory corruption, not an errno):
 *       - a struct pc_file after pc_close once it has left the quarantine:
 *         a cache keeps the memory of the last 1024 handles closed in it
 *         (never reusing it), and every call on one of those fails with
 *         EBADF; older ones are freed.
 *       - any struct pc_file, open or closed, after pc_cache_destroy of its
 *         cache, and a struct pc_cache after pc_cache_destroy (destroying it
 *         twice included).
 *       - pc_cache_destroy while another thread is inside a call on that
 *         cache or one of its handles.
 *       - pc_close while another thread is inside a call on the same handle
 *         (two concurrent pc_close of it included): the quarantine only
 *         catches calls that start after pc_close has returned.
 *       - a pointer that pc_open or pc_cache_new did not return (a copy of
 *         the structure, garbage): the handle check reads through it.
 *       - a buffer or iovec array shorter than the length given: data is
 *         copied with memcpy (or, with PC_DIRECT, given to the kernel).
 *       - calls from a signal handler (they take locks and allocate).
 *       - spans (pc_read_begin, pc_write_begin): s->data used after the
 *         span is ended, or past s->len; a copy of a struct pc_span ended
 *         as well as the original; an open span's struct given to a begin
 *         call (overwritten: the span is never ended); a write span ended
 *         by another thread than the one that began it, or a call of that
 *         thread that waits for its own write span (see pc_write_begin: a
 *         deadlock).
 *     A handle needs no cache argument: it always works on the cache that
 *     opened it, so it cannot be given to another one by mistake.
 *
 * Memory
 *   The cache reserves `memory_limit` bytes of folio memory up front (an
 *   anonymous mapping) plus a fixed table of folio descriptors (1/64 of
 *   memory_limit, under 2 %).  Cached data never exceeds memory_limit:
 *   clean data is evicted to make room, dirty data is written back first,
 *   never dropped.  pc_cache_new takes about the same time at any
 *   memory_limit (well under a millisecond here): it faults none of the
 *   memory in and touches none of the table.  It grows the process's
 *   descriptor table once to hold the descriptors the cache keeps for
 *   closed files (max_closed_files, twice over; at most 16384 and the
 *   soft RLIMIT_NOFILE: up to 128 KiB of kernel memory), by duplicating a
 *   descriptor to that number and closing it: in a process that has
 *   threads, the first such growth waits for an RCU grace period
 *   (milliseconds on a virtual machine) where each later one, as files are
 *   kept open, would have waited in a pc_open; a program that dup2()s onto
 *   high descriptor numbers in another thread meanwhile could lose that
 *   descriptor.  A thread of the cache then
 *   faults the memory in behind the program's back, 2 MiB at a time, in the
 *   order in which folios are handed out, so that writes and reads find
 *   memory that is ready and do not pay the page faults and the kernel's
 *   zeroing on their own time.  It keeps a lead of a sixteenth of
 *   memory_limit (2 to 32 MiB) ahead of the memory the cache has used and
 *   then waits for the cache to use more (it fills the lead once the
 *   cache has taken no new memory for 20 ms, so that it takes no CPU from
 *   a burst of first writes): the process's resident memory
 *   grows with what the cache holds, not to memory_limit at once, and a
 *   cache whose working set stays small (uncached writes use the dirty
 *   limit and their edges) never spends a CPU faulting in the rest.  It
 *   sleeps meanwhile, and ends once all of memory_limit is in (so it lives
 *   as long as a cache that never fills), and pc_cache_destroy stops it
 *   first (it waits for at most one 2 MiB step).  It asks for transparent
 *   huge pages as it goes; where the system gives them only on advice
 *   ("madvise"), a writer that outruns it faults small pages (which the
 *   kernel may merge into huge ones later).
 *   Writes into new memory faster than the machine can fault memory in
 *   (400 to 600 MiB/s on the virtual machine of tools/pcbench's figures,
 *   whose host backs guest memory on first touch) catch up with it and
 *   fault their folios in themselves.  Each 2 MiB step holds the process's
 *   mmap_lock for reading (and the huge-page advice before a run of steps,
 *   briefly, for writing): mmap, munmap, fork and malloc growing its heap in
 *   other threads may wait for one step meanwhile (a fraction of a
 *   millisecond where the kernel zeroes memory at memory speed, up to 30 ms
 *   on that virtual machine).  While it faults memory in it takes a CPU
 *   (seconds for a few hundred MiB on that machine when the host backs the
 *   memory first; with PC_CFG_EAGER_MEMORY that is all of memory_limit):
 *   pc_stats.prefault_pending_bytes tells how much of its lead is left, so
 *   a program (or a benchmark) can wait for it before timing-sensitive
 *   work.
 *   PC_CFG_LAZY_MEMORY: no such thread.
 *   The thread is not inherited by a child of fork(), nor is the memory.
 *   pc_cache_new fails with ENOMEM when the machine cannot back
 *   memory_limit (the rule is given with memory_limit below).
 *
 * Sharing and other processes
 *   Opening the same file twice in one cache shares one cached copy.  A file
 *   open through pagecache is locked with an open-file-description lock
 *   (F_OFD_SETLK; a write lock for writable mappings, a read lock otherwise)
 *   so that another process opening it through pagecache is refused with
 *   EBUSY instead of reading or writing an incoherent copy.  Programs that
 *   bypass pagecache are not stopped (OFD locks are advisory).  A file
 *   closed with data still to write keeps its lock until the data is
 *   written and the file settled (pc_cache_file_info: unsettled 0); a
 *   reopen notices a change by such a program (size, mtime or ctime) only
 *   if it came after that.  While a
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
 * Crashes
 *   A process that dies (SIGKILL, abort, a power cut) loses what was only
 *   in its cache: data of plain and PC_DONTCACHE writes that write-back had
 *   not sent to the device yet.  A write is safe from a crash once it is
 *   acknowledged: its PC_DSYNC write returned, or a pc_fsync/pc_fdatasync
 *   that started after the write returned has returned (pc_close does not
 *   wait for write-back; with PC_CFG_CLOSE_TO_OPEN it writes but does not
 *   flush the device: only fsync and PC_DSYNC promise durability).
 *   Anything else may be lost, wholly or in part, and a rewrite in progress
 *   may leave its range part new, part old.  But a crash never corrupts:
 *   every byte of the file holds what some write put at that position, or
 *   zeros (a hole, or space allocated ahead), never stale cache memory or
 *   another position's data, and acknowledged data is never replaced by
 *   older data.  After a crash the file's size is at least the end of
 *   every acknowledged write and at most the end of the furthest write
 *   rounded up to a block (device writes are whole blocks, and allocation
 *   ahead extends to a block boundary; the extra bytes read as zeros).  The
 *   next pc_open takes the file as it finds it.  tests/test_crash.c checks
 *   exactly this at 60 SIGKILL points per run.
 *
 * Space on the device
 *   A write that extends a file past 1 MiB first reserves the space it
 *   needs (fallocate with FALLOC_FL_KEEP_SIZE, some MiB ahead of a growing
 *   file: the flusher renews it ahead of the writer, and a writer that
 *   reserves itself, at the first write or when the flusher fell behind,
 *   reserves further by what it may dirty before it is slowed, the dirty
 *   limit or 64 MiB, whichever is less; a gap of up to 8 MiB behind the
 *   write with it, which stays allocated and reads as zeros; only its own
 *   blocks for a write further past the end), so a full file system fails
 *   that pc_pwrite with ENOSPC or EDQUOT, as the kernel's buffered write
 *   would, instead of a later fsync.  (Smaller files reserve nothing:
 *   their ENOSPC comes at write-back, below.)  What was reserved past the
 *   final size is given back at the file's last close.  Before writing
 *   back, the backing file is allocated up to its size, holes below
 *   included, but never more than four times the bytes written since open,
 *   so a sparse write far past the end leaves a hole as a plain pwrite
 *   would.  Allocation changes no data.  File systems without fallocate
 *   report a full device at writeback, below.
 *
 * Write errors (full device, failing device)
 *   Data whose write-back fails stays dirty and cached (PC_DONTCACHE data
 *   too): it is never dropped.  (A failed read of the rest of a partly
 *   written block, needed before writing it back, counts as a failed
 *   write-back.)  The error is recorded for fsync/close (see pc_fsync), and
 *   from then on the file is "failing": every new buffered write to it
 *   (PC_DIRECT writes meet the device themselves and report what it says)
 *   fails up front with that errno (ENOSPC, EDQUOT, EIO, EFBIG, ...), as a
 *   full file system refuses writes.  ENOSPC and EDQUOT are the device's:
 *   every file of the same backing device is refused with them too (each
 *   would meet them, with a pile of data it could not write), while EIO and
 *   the others stay the file's.  A writer waiting in the dirty throttle for
 *   a failing file gets the error within about 20 ms of the failed
 *   write-back instead of waiting for ever (a write that had already copied
 *   some data returns that count, the next one -1), and PC_NOWAIT writers
 *   get it instead of EAGAIN.  A failing file's dirty data does not count
 *   against the dirty limit of other files, so writers of other files and
 *   devices go on.  The file (and its device) take writes again when a
 *   write-back of its data succeeds, with nothing left dirty for the file
 *   (the flusher retries about every second, so freeing space is enough),
 *   or at once when the caller retries pc_fsync (which retries all of it),
 *   truncates, punches or allocates.  One write larger than the dirty limit
 *   is throttled (or, with PC_DSYNC, made durable) piece by piece as it
 *   goes.  When memory is needed and only failing dirty data holds it, the
 *   call that needed it fails with the write error rather than waiting for
 *   ever (many files failing with EIO at once can come to that).
 *   pc_cache_destroy reports data that could not be written.
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
 */
struct pc_config {
	/* Bytes of folio memory.  Default 256 MiB (also what 0 means).
	 * Rounded down to a multiple of 4 KiB, then at least 1 MiB, at least
	 * 16 * max_folio_size (4 MiB with the default max_folio_size) and
	 * below 16 TiB (else EINVAL).
	 * The machine must be able to back it, so that filling the cache
	 * never runs the machine out of memory (into swap or the OOM killer):
	 * pc_cache_new fails with ENOMEM when memory_limit plus its descriptor
	 * table (memory_limit / 64) is more than
	 *     min(MemAvailable of /proc/meminfo,
	 *         the room under each memory cgroup limit of the process)
	 *     - what other caches of this process have yet to take,
	 * measured at that moment.  The room under a cgroup limit is the
	 * limit less the cgroup's usage without its inactive file pages, for
	 * the process's cgroup and each ancestor up to the root of the cgroup
	 * mount at /sys/fs/cgroup (v2: memory.max, memory.current and
	 * inactive_file of memory.stat; v1, /sys/fs/cgroup/memory:
	 * memory.limit_in_bytes, memory.usage_in_bytes, total_inactive_file).
	 * What another cache of this process has yet to take is the part of
	 * its memory_limit neither handed out nor faulted in yet (MemAvailable
	 * does not show it yet; a PC_CFG_LAZY_MEMORY cache counts all of its
	 * memory it has not handed out).  Swap does not count.  It is a check
	 * at pc_cache_new: memory that other processes take later can still
	 * run the machine short, as the cache fills (only with
	 * PC_CFG_EAGER_MEMORY does it take all of its memory soon, see
	 * "Memory").  A figure that cannot be read (no
	 * /proc, no cgroup files) limits nothing.  The
	 * kernel's own limits fail the mapping, also with ENOMEM: RLIMIT_AS,
	 * RLIMIT_DATA (the arena is private writable memory) and, with
	 * vm.overcommit_memory = 2, the commit limit.  The rule is the same
	 * with and without PC_CFG_LAZY_MEMORY. */
	size_t memory_limit;
	/* Largest folio, a power of two from 4 KiB to 2 MiB (else EINVAL).
	 * Default 256 KiB (also what 0 means).
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
	 * non-zero value is a power of two from 512 to 65536 and at most
	 * max_folio_size (else pc_cache_new fails with EINVAL), and a multiple
	 * of the file's direct-I/O alignment (else pc_open fails with EINVAL).
	 * Blocks larger than 4 KiB make the smallest folio one block. */
	size_t block_size;
	/* Past this many dirty bytes the flusher starts writing back.  0 (what
	 * pc_config_init sets): half of dirty_limit_bytes.  At most
	 * dirty_limit_bytes, given or default (else EINVAL). */
	size_t dirty_background_bytes;
	/* Writers are made to wait (never to write back themselves) while dirty
	 * and under-writeback bytes leave no room under this for another
	 * write as large as the one just made (at most an eighth of the limit),
	 * so a single writer never takes them past it, and are let through in
	 * order of the bytes their thread has dirtied (fewest first), so
	 * writers of any write size and mode (buffered, PC_DONTCACHE) get
	 * equal shares.  Writers racing for the last room may pass it by their
	 * writes' sizes.
	 * Before that, past dirty_background_bytes, a writer sleeps a little
	 * after each write of at least max_io_bytes / 4 (smaller writes, and
	 * PC_NOWAIT and PC_DSYNC writes, do not), so that together the
	 * writers dirty data about as fast as write-back completes it, each
	 * its share: the dirty data
	 * settles below the limit and writes take about the same time each,
	 * instead of running at memory speed into the limit and stopping
	 * there (pc_stats throttle_pauses counts the sleeps, throttle_waits
	 * the waits at the limit).
	 * 0 (what pc_config_init sets): 20 % of memory_limit.  At most 50 % of
	 * memory_limit (else EINVAL). */
	size_t dirty_limit_bytes;
	/* Dirty data older than this is written back by the flusher even below
	 * the background threshold.  Default 3000 ms.  0 means "the default".
	 * (Background writeback may leave a short run of dirty data younger
	 * than 200 ms for the next round, for neighbouring writes to join.) */
	unsigned dirty_expire_ms;
	/* Flusher threads per backing device (writeback domain).  Default 1
	 * (also what 0 means); at most 64 (else EINVAL). */
	unsigned writeback_threads;
	/* Device I/Os in flight per writeback domain.  Default 64 (also what 0
	 * means); at most 4096 (else EINVAL). */
	unsigned queue_depth;
	/* Largest single device I/O built by write clustering and read-ahead.
	 * Default 1 MiB (also what 0 means); a multiple of 4 KiB from 4 KiB to
	 * 64 MiB (else EINVAL). */
	size_t max_io_bytes;
	/* Largest read-ahead window.  Default 8 MiB; larger than a quarter of
	 * memory_limit is cut to that.  0 disables read-ahead. */
	size_t readahead_max_bytes;
	/* PC_DONTCACHE dirty bytes per writeback domain past which a writer
	 * kicks the flusher.  Default 8 MiB (also what 0 means); more than half
	 * the background threshold is cut to that. */
	size_t uncached_kick_bytes;
	/* How long a dirty edge block (one an uncached write covered only
	 * partly, kept for the neighbouring write) or a deferred partial block
	 * waits for its neighbour before background writeback writes it (a
	 * partial block is read and merged first).  Writing an edge does not
	 * drop it: it stays cached, clean, for the neighbour.  Age never drops
	 * an edge (it once did, and a late neighbour then read the block back;
	 * edge_budget_bytes says what drops one now).  Default 5000 ms.  0
	 * means "the default". */
	unsigned edge_expire_ms;
	/* Memory the kept clean edges of uncached writes may hold, in bytes
	 * of folios (an edge is one smallest folio: 4 KiB, or a block when
	 * blocks are larger).  An edge is kept until the write that completes
	 * it comes, however late (slow or drifting writers), and goes early
	 * only
	 *   - at pc_fsync/pc_fdatasync and close of its file (nobody is left
	 *     to complete it), or
	 *   - when an uncached write leaves an edge and the clean edges of
	 *     the cache hold more than this: the oldest clean ones go, or
	 *   - when memory_limit is reached: a clean edge is evicted like any
	 *     clean folio (oldest first too).
	 * An edge that goes early costs its neighbour a device read.  Dirty
	 * edges (and those under writeback) do not count: they are dirty
	 * data, under dirty_limit_bytes; the check subtracts all dirty data
	 * from the edges' bytes, so clean edges may pass the budget by at most
	 * the dirty data there is.
	 * Before the budget drops edges, a writer whose write left more edges
	 * than it completed (it is ahead of its neighbours) waits while others
	 * complete edges of the same file (up to 2 s; PC_NOWAIT writes do not;
	 * pc_stats edge_waits counts these waits).  A write that completes as
	 * many edges as it leaves, or more, never waits: those are the writers
	 * that are catching up.  So many writers of one file that drift apart
	 * are kept within the budget of each other.  The misaligned head and
	 * tail of a PC_DIRECT write count as one write.  0 (what
	 * pc_config_init sets): memory_limit / 4, which keeps 16384 4 KiB
	 * edges in the default 256 MiB (an eighth was not enough for 32
	 * PC_DSYNC writers drifting 800 records apart).  At most
	 * memory_limit / 2 (else EINVAL). */
	size_t edge_budget_bytes;
	/* Closed files whose backing descriptor the cache keeps open (so that
	 * reopening them costs no open(2)); past it the oldest's is closed
	 * (their clean data stays cached).  Files closed with dirty data keep
	 * theirs until it is written, and close waits for its own write-back
	 * while this many do (see pc_close).  0 (what pc_config_init sets): a
	 * quarter of the soft RLIMIT_NOFILE at pc_cache_new, at most 65536; at
	 * most 1048576 (else EINVAL).  So the descriptors pagecache holds are
	 * those of open files plus at most twice this (half the limit by
	 * default; on EMFILE the closed files give theirs up), counting one
	 * per file: a file opened for reading and then, while open, for
	 * writing keeps its read-only descriptor too (I/O may have been
	 * issued through it) until its descriptor is given up.  Those are
	 * descriptors of the process's own limit: a program that itself opens
	 * many files or sockets should set this lower (pagecache's own opens
	 * recover from EMFILE by giving closed files' descriptors up; the
	 * program's open(2) does not).  While write-back keeps failing (a
	 * full disk), closed files whose data cannot be written keep their
	 * descriptors beyond this bound, as their data stays: fsync a file to
	 * hear its error; truncating or unlinking it discards the data. */
	unsigned max_closed_files;
	/* Bit flags, PC_CFG_*; any other bit is EINVAL. */
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
/* No background fault-in of the folio memory (see "Memory" above): each
 * folio's memory is faulted in, and zeroed by the kernel, by the first call
 * that uses it, on that call's time (a 1 MiB write into new memory then
 * takes milliseconds).  For programs that want no thread, and no resident
 * memory beyond what the cache uses (not even the thread's lead).
 * pc_cache_new is as fast either way, and its
 * ENOMEM rule (memory_limit) is the same. */
#define PC_CFG_LAZY_MEMORY 0x10u

/* pc_close writes the file's dirty data back and waits for it, as
 * close-to-open consistency (NFS) wants: once pc_close returns, another
 * process sees the data.  Without it pc_close does not wait (see there). */
#define PC_CFG_CLOSE_TO_OPEN 0x20u
/* At exit(3) (atexit), write back the dirty data of every file of the
 * cache, open or closed, and wait for it.  A write error there is printed
 * to stderr (exit cannot return it) and kept for a pc_cache_destroy that
 * runs later.  Without it, a process that ends without pc_cache_destroy
 * loses what was not yet written (see pc_close). */
#define PC_CFG_FLUSH_AT_EXIT 0x40u
/* The background fault-in (see "Memory" above) faults in all of
 * memory_limit at once instead of keeping a lead ahead of what the cache
 * uses: for a program that will fill the cache and wants none of its
 * calls to pay a page fault, once pc_stats.prefault_pending_bytes is 0.
 * Meanwhile the thread takes a CPU and the process's resident memory grows
 * to memory_limit.  Not with PC_CFG_LAZY_MEMORY (EINVAL). */
#define PC_CFG_EAGER_MEMORY 0x80u

/* Per-call flags for pc_pread/pc_pwrite and their v-variants, and (all but
 * PC_DIRECT) for the span calls (pc_read_begin, pc_write_begin). */
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
 * completes).  Folios already cached stay cached.  Read-ahead of an
 * uncached stream is dropped as the stream reads it; what a stream that
 * stops never reads stays until evicted (it is never used, so it goes
 * first).  A block an uncached write
 * covers only partly is kept until a neighbouring write completes it (or the
 * file is fsynced/closed, or the edges outgrow edge_budget_bytes or memory
 * runs short, the oldest first: never for its age). */
#define PC_DONTCACHE 0x4
/* Direct I/O, coherent with the cache: dirty cached data of the range is
 * written back first and cached folios of the range are invalidated after a
 * write.  Any alignment is accepted: an unaligned write sends its aligned
 * middle straight to the device and its misaligned head and tail through
 * the PC_DONTCACHE path; an unaligned read reads the covering blocks. */
#define PC_DIRECT 0x8

/* Counters.  Bytes unless named otherwise.  "device" means the backing file
 * (what was submitted with pread/pwrite/io_uring on it).  Counters that
 * cache hits add to (hit_bytes) are kept per thread, so that readers in
 * different threads write no shared memory: a call that returned has been
 * counted, and a sum taken while other threads read is a value the counter
 * had at some moment, as for one shared counter.
 *
 * Cache hits: a read that one cached folio serves whole (a 4 KiB read of
 * warm data, typically) takes no lock and writes nothing shared: not the
 * handle, not the file, not the folio.  So any number of threads can read
 * one file through one handle without slowing each other.  Read-ahead
 * still follows a sequential reader through data it has read ahead: the
 * first folio of each window is marked, and reading it starts the next
 * window (the ra_ counters below; see pc_fadvise). */
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
	uint64_t edge_expired;      /* lone edge folios dropped at fsync/close
	                               (never for their age) */
	uint64_t edge_evicted_budget; /* edge folios dropped, oldest first, to
	                               keep edges within edge_budget_bytes
	                               (edges evicted under memory_limit count
	                               in evictions) */
	uint64_t edge_waits;        /* uncached writes that, leaving more edges
	                               than they completed past the budget,
	                               waited for the file's other writers to
	                               complete edges first (see
	                               edge_budget_bytes) */
	uint64_t deferred_rmw;      /* partial blocks written without a read */
	uint64_t rmw_reads;         /* blocks read to merge a partial write */
	uint64_t hit_bytes, miss_bytes; /* read bytes found / not found cached */
	uint64_t throttle_waits;    /* writer waits on the dirty limit */
	uint64_t throttle_pauses;   /* short sleeps of writers paced below the
	                               limit by the write-back bandwidth */
	uint64_t flusher_kicks;     /* uncached-writer kicks of the flusher */
	uint64_t reserve_inline;    /* writes that extended a file past the
	                               space reserved ahead of it and reserved
	                               more themselves (a fallocate of some
	                               milliseconds); a sequential writer's
	                               flusher reserves ahead, so this stays
	                               near one per file */
	uint64_t write_errors;      /* failed device writes (data kept dirty) */
	/* Read-ahead (see pc_fadvise).  A window is issued for a sequential
	 * stream either by a miss (sync: the reader waits for the start of
	 * it) or, without waiting, by a read that reaches the folio marked in
	 * the previous window (async).  A random miss reads only what was
	 * asked, in the caller's thread. */
	uint64_t ra_sync_windows;   /* windows started by a miss of a stream */
	uint64_t ra_async_windows;  /* windows started by reaching a mark */
	uint64_t ra_window_bytes;   /* bytes those windows covered (cached parts too) */
	uint64_t ra_random_reads;   /* misses read with no window */
	uint64_t prefault_pending_bytes; /* pc_cache_stats: folio memory the
	                               background thread has yet to fault in to
	                               be its lead ahead of the memory used
	                               ("Memory" above); 0 once it is, once it
	                               has ended, and with PC_CFG_LAZY_MEMORY */
	uint32_t io_uring;          /* 1: device I/O through io_uring, 0: sync */
	uint32_t block_size;        /* pc_file_stats: the file's block size */
};

/* Defaults into *cfg.  NULL does nothing. */
PC_API void pc_config_init(struct pc_config *cfg);

/* A new cache.  NULL cfg means defaults.  Errors: EINVAL (a field out of the
 * range given in struct pc_config, or an unknown flag), ENOMEM (the machine
 * cannot back memory_limit, see there, or an allocation failed). */
PC_API struct pc_cache *pc_cache_new(const struct pc_config *cfg);

/* Writes back all dirty data of every file (closed ones too), closes files
 * still open, stops the flusher threads and frees everything.  Returns -1
 * with errno set to the first write error if any dirty data could not be
 * written (the data is then lost; it was reported here), or if write-back
 * of a closed file failed earlier and no handle reported it since (also
 * when a later retry wrote the data).  Never waits for ever: write-back
 * that fails is not retried here.  Like close(2) it does not flush the
 * device cache of what it wrote directly (no fsync of the backing files):
 * data is durable only after pc_fsync/pc_fdatasync or PC_DSYNC.  What of
 * closed files went through the kernel's page cache (a small file's data,
 * a larger one's last partial block: see pc_close) is written to the
 * device here, by one syncfs(2) of each file system it went to (or, where
 * the file system's mount point cannot be opened, an fdatasync(2) of each
 * such file), and the kernel's write error with it is returned too: so
 * once pc_cache_destroy returns 0, everything written through the cache
 * is on the device.  NULL is EINVAL; in a child of fork() see "Processes
 * and fork". */
PC_API int pc_cache_destroy(struct pc_cache *c);

/* Open `path`.  flags: O_RDONLY, O_WRONLY or O_RDWR, optionally with O_CREAT,
 * O_EXCL, O_TRUNC (not with O_RDONLY), O_DSYNC or O_SYNC (every write as
 * with PC_DSYNC), O_DIRECT (every call as with PC_DIRECT), O_CLOEXEC
 * (accepted, always on), O_LARGEFILE (accepted) and O_NOATIME.  `mode` is
 * that of open(2) with O_CREAT.  The file is opened with O_DIRECT underneath,
 * and read-write for O_WRONLY too (the cache reads the rest of blocks it
 * writes in part), so O_WRONLY needs read permission (else EACCES).
 * Errors: EINVAL for a NULL cache or path, any other flag, the access mode
 * O_ACCMODE (3) and O_TRUNC with O_RDONLY, all before anything is opened or
 * created; those of open(2) (ENOENT, EEXIST, EACCES, ENOTDIR, ENAMETOOLONG,
 * ELOOP, EMFILE, ...); EISDIR for a directory; EINVAL for any other file
 * that is not a regular file (a FIFO, a device or a socket: refused after a
 * stat(2) of the path, before open(2), which would block on a FIFO; one put
 * in the file's place between the two can still block), when the file
 * system refuses O_DIRECT and the config does not allow a buffered
 * backend, or when the configured block_size does not suit the file; EBUSY
 * when another process, or another cache in this process, has it open
 * through pagecache (unless both only read it). */
PC_API struct pc_file *pc_open(struct pc_cache *c, const char *path, int flags,
			       mode_t mode);

/* pc_open relative to a directory, as openat(2) is to open(2): a relative
 * `path` is looked up from the directory `dirfd` (AT_FDCWD: the current
 * directory, which makes it pc_open).  `dirfd` may be an O_PATH descriptor.
 * The flags are pc_open's, and O_NOFOLLOW: a symlink as the last component
 * is refused with ELOOP (before anything is opened or created), as open(2)
 * refuses it.  So a program that owns a directory tree (a file system
 * server, say) opens files by a directory descriptor and one name, and no
 * `..` or rename of a directory above makes it leave the tree.  Errors:
 * those of pc_open, and EBADF for a bad dirfd with a relative path. */
PC_API struct pc_file *pc_openat(struct pc_cache *c, int dirfd, const char *path, int flags, mode_t mode);

/* What close(2) does for one of several descriptors of a file (a FUSE
 * FLUSH): report the first write error not yet reported to this handle,
 * as pc_close would, and start write-back of the file's dirty data
 * without waiting for it (wait = 0), or write it back and wait as pc_close
 * does with PC_CFG_CLOSE_TO_OPEN (wait != 0; the device is not flushed:
 * that is pc_fsync).  The handle stays open.  Returns 0, or -1 with errno:
 * EBADF (NULL or closed handle), EPERM (inherited through fork), a write
 * error. */
/* With wait = 0, a file of at most 64 KiB (and a larger file's last
 * partial block) is not written at once but about 100 ms later by the
 * flusher, so that the pc_close that usually follows finds it and it is
 * written once, whole, as a closed file is (pc_close). */
PC_API int pc_flush(struct pc_file *f, int wait);

/* Frees the handle (always, even on error) and returns -1 with the first
 * write error not yet reported to this handle, or with EBADF for a NULL or
 * closed handle.  It does not wait for write-back, as close(2) does not:
 * the file's dirty data stays cached and the flusher writes it like any
 * other dirty data (after dirty_expire_ms, or past the background
 * threshold; first of all when max_closed_files / 2 closed files hold
 * descriptors for unwritten data); a later write error is reported to the next
 * pc_fsync/pc_fdatasync/pc_close of any handle of the file, also one
 * opened after the error (an error nobody reported yet is never lost on a
 * new handle), and by pc_cache_destroy.  An exception: what went
 * through the kernel's page cache (a small closed file, below) is written
 * by the kernel, and its error is heard only by a later pc_fsync or
 * pc_fdatasync of the file and by pc_cache_destroy, not by a later
 * handle's pc_close.  Until its data is written the
 * file keeps its backing descriptor and its lock (another process opening
 * it through pagecache gets EBUSY meanwhile; programs reading the backing
 * file directly may see old data: use pc_fsync, or PC_CFG_CLOSE_TO_OPEN,
 * which makes every pc_close write back and wait as pc_fsync does).
 * While max_closed_files closed files still have data to write, pc_close
 * writes back and waits for its own file, which bounds the descriptors
 * held.  When the last handle of a file is closed, edge blocks kept for
 * neighbouring uncached writes are dropped, and clean data stays cached
 * (reopening finds it, without an open(2) while the cache keeps the
 * descriptor; the file's mode and owner are checked against those of the
 * last open(2), and a changed size, mtime or ctime drops the cached data.
 * Like NFS's close-to-open check, this cannot see a change by another
 * program that keeps the size and lands within the same timestamp tick:
 * files changed behind the cache's back must be reopened after the
 * cache dropped them, e.g. by pc_fadvise(POSIX_FADV_DONTNEED)).
 * A closed file of at most 64 KiB goes to the backing file in one
 * pwrite(2) through the kernel's page cache (the kernel writes it back, as
 * it would have written the program's own close), and of a larger one its
 * last partial block does: the backing file gets its exact size without a
 * truncate, and a small file costs no direct write of its first blocks.
 * A file unlinked loses its cached data, dirty too (it is not written),
 * and its space is freed within about a second of its last close (or of
 * the unlink, when that came after); so is a file that another descriptor
 * of the process (an O_PATH one, say) still refers to: reopened through
 * that descriptor (/proc/self/fd), it does not have the dropped data.  Note that a pipeline where one process writes
 * and closes a file and another at once opens it through pagecache (a
 * compiler and a linker, say) makes the second get EBUSY until the data
 * is written: use PC_CFG_CLOSE_TO_OPEN (or pc_fsync) there.
 *
 * A process that ends without pc_cache_destroy loses the dirty data of
 * every file, closed files too (the kernel's page cache would have kept
 * it): call pc_cache_destroy, or set PC_CFG_FLUSH_AT_EXIT to have exit(3)
 * write it back. */
PC_API int pc_close(struct pc_file *f);

/* pread/pwrite with flags (PC_DSYNC, PC_NOWAIT, PC_DONTCACHE, PC_DIRECT).
 * Any size and alignment.  Reads past end of file are short, and a read at
 * or past EOF returns 0 whatever the offset (no EOVERFLOW).  len 0 returns 0
 * at any offset once the handle, offset and flags passed their checks.
 * Writes extend the file.  Errors: EBADF (NULL or closed handle, read on
 * O_WRONLY, write on O_RDONLY, also with len 0), EPERM (a handle inherited
 * through fork), EINVAL (NULL buffer with len > 0, negative offset, unknown
 * flag, len over SSIZE_MAX), EFBIG (a write with off + len past the largest
 * file size the file system allows, less the part of a block past it, or
 * overflowing off_t: nothing is written), EAGAIN (PC_NOWAIT would block),
 * ENOSPC/EDQUOT (no space for a write that extends the file, or the file
 * is failing: see "Write errors" above), EIO and other device errors
 * (PC_DSYNC, PC_DIRECT, reads, and failing files).  A buffered write is
 * complete unless an error stops it after it copied some data: then it
 * returns the bytes copied (as write(2) does) and the next call reports
 * the error; with PC_NOWAIT (as RWF_NOWAIT) it returns the bytes written
 * before it would have blocked. */
PC_API ssize_t pc_pread(struct pc_file *f, void *buf, size_t len, off_t off,
			int flags);
PC_API ssize_t pc_pwrite(struct pc_file *f, const void *buf, size_t len,
			 off_t off, int flags);
/* Vector forms: the iovecs are one contiguous range of the file (a block
 * covered whole across two iovecs counts as covered whole).  The errors of
 * pc_pread/pc_pwrite, and EINVAL for iovcnt < 0 or > IOV_MAX, a NULL iov
 * with iovcnt > 0, an iovec with a NULL iov_base and iov_len > 0 (a NULL
 * base of length 0 is fine), and iov_len adding up to more than SSIZE_MAX. */
PC_API ssize_t pc_preadv(struct pc_file *f, const struct iovec *iov,
			 int iovcnt, off_t off, int flags);
PC_API ssize_t pc_pwritev(struct pc_file *f, const struct iovec *iov,
			  int iovcnt, off_t off, int flags);

/*
 * Zero-copy access: spans (the mmap / page_mkwrite analog)
 *
 *   For programs that own their buffers (storage engines): cached data read
 *   and written in place, without the copy of pc_pread/pc_pwrite.  A span
 *   is up to `len` bytes of the file at `off` inside one folio of the
 *   cache: s->data points at them and s->len, also the return value, says
 *   how many.  It is shorter than asked at the end of a folio (folios are
 *   naturally aligned, at most max_folio_size) and at the end of the file:
 *   the rest is another span at off + s->len.
 *
 *   Every begin call that returned >= 0 is ended exactly once, by
 *   pc_read_end or pc_write_end on the same struct pc_span (not on a copy
 *   of it); a span of 0 bytes holds nothing and ending it costs nothing.
 *   After -1 there is nothing to end.  Ending a span twice, or one whose
 *   begin failed, is caught (pc_read_end does nothing, pc_write_end fails
 *   with EINVAL); ending a copy made while the span was open is not.  A
 *   begin call overwrites *s.  The fields after
 *   `len` are private.  Spans must be ended before pc_cache_destroy.  A
 *   span stays valid if another thread closes its handle meanwhile.
 *
 *   Flags: PC_NOWAIT, PC_DONTCACHE and PC_DSYNC, as for pc_pread and
 *   pc_pwrite, with those a handle's O_DSYNC or POSIX_FADV_NOREUSE adds.
 *   PC_DIRECT is EINVAL, and so is every span of a handle opened with
 *   O_DIRECT: a pointer into the cache is the opposite of direct I/O.
 *
 *   Errors of both begin calls: EBADF (NULL or closed handle, pc_read_begin
 *   on O_WRONLY, pc_write_begin on O_RDONLY, also with len 0), EPERM (a
 *   handle inherited through fork), EINVAL (NULL s, negative off, unknown
 *   flags, PC_DIRECT or an O_DIRECT handle, len over SSIZE_MAX), EAGAIN
 *   (PC_NOWAIT would block), ENOMEM, and device errors; pc_write_begin also
 *   EFBIG (off at or past the largest file size the file system allows: a
 *   span reaching past it is cut short there instead), ENOSPC/EDQUOT and a
 *   failing file's error, as pc_pwrite.  Arguments are checked before any
 *   work, as for the other calls.
 */
struct pc_span {
	void *data;  /* the span's first byte, in the cache's memory */
	size_t len;  /* bytes at data: what the begin call returned */
	/* Private: pagecache's record of the span, written by the begin call
	 * and used by the end call.  Do not read or change it. */
	struct pc_span_private {
		struct pc_cache *cache;
		void *mapping, *folio, *save;
		uint64_t off;
		size_t len, save_off, save_len;
		int flags;
		unsigned state;
		unsigned char created, head_full, tail_full;
	} priv;
};

/* Up to len cached bytes of the file at off: s->data points at them, read
 * from the device first if they are not cached (with PC_NOWAIT, -1/EAGAIN
 * instead of reading or waiting for a read).  Returns s->len: 0 at or past
 * the end of the file (whatever the offset) and for len 0, else 1 to len.
 * The folio is pinned until pc_read_end: eviction leaves it alone, and
 * when truncate, hole punching or a PC_DIRECT write take it out of the
 * file, its memory is neither freed nor reused: the span keeps the bytes
 * it had.  The bytes are the cache's own, shared: what others write while
 * the span is held (writes, write spans, truncates or punches covering
 * part of the folio) may be seen in them, in part or whole, as through a
 * shared mapping; copy them out if they must stay still.  Do not store
 * through a read span.  Counted in hit_bytes/miss_bytes as pc_pread
 * counts.  A miss reads [off, off + len) in one device read (up to
 * max_io_bytes: the next spans find the rest); spans start no sequential
 * read-ahead of their own (POSIX_FADV_WILLNEED does).  PC_DONTCACHE: the
 * folio is dropped at pc_read_end if an uncached read created it (this
 * call, or read-ahead of an earlier uncached one) and nobody else uses it,
 * as pc_pread drops it; folios already cached stay cached.  Pinned folios
 * hold memory: a program holding many spans at once can leave the cache
 * no room, and calls then wait for memory.  Errors: see above. */
PC_API ssize_t pc_read_begin(struct pc_file *f, off_t off, size_t len,
			     int flags, struct pc_span *s);
/* End a read span: the pin goes, and s->data must not be used after.  A
 * NULL s, a span of 0 bytes, one ended already or one whose begin failed:
 * nothing. */
PC_API void pc_read_end(struct pc_span *s);

/* Up to len bytes of the file at off, in one folio, to be written in
 * place: s->data points at them.  They are prepared as pc_pwrite prepares
 * a write of [off, off + s->len): the partly covered first and last
 * blocks are zeroed (holes, past the end of the file), read, or left for a
 * deferred read-modify-write by the same rules (PC_DSYNC and
 * PC_CFG_NO_DEFERRED_RMW read them now), and space for a write past the
 * end is reserved.  Returns s->len (0 for len 0, else 1 to len).  Bytes the
 * cache holds show the file's data; bytes it does not hold yet (blocks the
 * span covers whole are not read, as for pc_pwrite) are unspecified,
 * neither the file's data nor zeros: store all you will commit, or, to
 * change part of a range in place, have it cached first and keep it so
 * (hold a pc_read_begin span of it).  Where the span covers dirty data,
 * pc_write_begin saves a copy of those bytes (see pc_write_end): zero-copy
 * is for new and clean data.
 *
 * The folio stays locked against other writers until pc_write_end: other
 * threads' writes and spans of it, and truncate, hole punching, fsync and
 * direct I/O of the file, wait (readers do not: they may see the bytes as
 * they are stored, as through a shared mapping; only readers of blocks
 * not cached wait).  So until pc_write_end the thread holding a write span
 * must not call anything that would wait for it: reads, writes or spans of
 * that folio, pc_fsync, pc_fdatasync, pc_ftruncate, pc_fallocate,
 * pc_fadvise(POSIX_FADV_DONTNEED), PC_DSYNC or PC_DIRECT calls on the
 * file, pc_close of the handle (each would deadlock).  That thread ends
 * the span itself (it holds the file's invalidation lock as a pthread
 * read lock, which only its owner may release), and two write spans held
 * at once are two locks (take them in file order).  With PC_NOWAIT,
 * -1/EAGAIN instead of waiting for the folio's lock, memory, a read or the
 * dirty throttle.  Errors: see above. */
PC_API ssize_t pc_write_begin(struct pc_file *f, off_t off, size_t len,
			      int flags, struct pc_span *s);
/* End a write span: its first `copied` bytes (0 to s->len) are written.
 * Exactly [off, off + copied) becomes dirty (the blocks holding those
 * bytes: never the rest of the folio, never past the end of the file as
 * the write leaves it), the file grows to off + copied if copied > 0 and
 * that is past its end, the folio is unlocked, and the writer meets the dirty throttle, as
 * after pc_pwrite (PC_NOWAIT: without waiting there).  copied 0 writes
 * nothing.  What the caller stored past `copied` does not become file
 * data (though readers may have seen it meanwhile, as they see every store
 * into a span at once): dirty bytes there are put back from the copy pc_write_begin saved,
 * clean cached blocks there are dropped (read again when needed), blocks
 * not cached stay so, and the block holding the new end is completed as
 * for a write that ends there.  PC_DSYNC: durable on return, as pc_pwrite
 * with PC_DSYNC (an error: the data is in the cache, not durable);
 * PC_DONTCACHE: dropped once written back, as pc_pwrite.  Returns 0, or -1
 * with errno: EINVAL for a NULL s, a span that is not an open write span
 * (ended already, a read span, a failed begin) and copied > s->len (then
 * the span stays open: end it again with a right count); EPERM in a child
 * of fork(); the device's error for PC_DSYNC; and, only when copied cuts
 * a block that must be read to be completed (PC_CFG_NO_DEFERRED_RMW, or
 * joining an earlier partial write of the block) and that read fails, its
 * error (EIO, ENOMEM, ...), with nothing of the span written.  The span is
 * ended in every case but EINVAL.  A write error of the file met in the
 * throttle is the next call's to report, as after pc_pwrite. */
PC_API int pc_write_end(struct pc_span *s, size_t copied);

/* Write back the file's dirty data, wait, and flush the device (fdatasync,
 * or fsync, on the backing descriptor); the file size is made durable too.
 * Any open handle may be synced, a read-only one too.  Errors: EBADF (NULL
 * or closed handle), write errors.
 * A write error is reported once per handle (errseq, as the kernel's):
 * every handle open when it happened sees it on its next
 * fsync/fdatasync/close, once; a handle opened after an error that no
 * handle had reported yet (write-back of a closed file, say) sees it too.
 * Data that failed to be written stays dirty and is retried by later
 * writeback; a retried pc_fsync retries all of it at once (see "Write
 * errors"). */
PC_API int pc_fsync(struct pc_file *f);
PC_API int pc_fdatasync(struct pc_file *f);

/* Set the file size.  Shrinking discards cached data past the new end
 * (dirty too: it is no longer part of the file) and zeroes the tail of the
 * last block.  Errors: EBADF (NULL, closed or O_RDONLY handle, where
 * ftruncate(2) on Linux says EINVAL), EINVAL (negative), EFBIG (past the
 * largest file the file system allows). */
PC_API int pc_ftruncate(struct pc_file *f, off_t len);

/* Modes: 0 (allocate, may extend the size), FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE (the range reads as zeros; whole
 * blocks are deallocated on the device), FALLOC_FL_ZERO_RANGE (optionally
 * with KEEP_SIZE; extends the size without it).  Errors: EBADF (NULL, closed
 * or O_RDONLY handle), EINVAL (len <= 0, off < 0), EFBIG (off + len past the
 * largest file the file system allows, or overflowing off_t), EOPNOTSUPP
 * (any other mode), device errors. */
PC_API int pc_fallocate(struct pc_file *f, int mode, off_t off, off_t len);

/* The file size as the cache sees it (including unwritten-back writes), or
 * -1/EBADF (NULL or closed handle). */
PC_API off_t pc_size(struct pc_file *f);

/* lseek(2)'s SEEK_DATA and SEEK_HOLE over the file as the cache sees it:
 * its size is the cached size, and a range is data if the backing file
 * has data there or the cache holds any of it (dirty data not yet written
 * included).  As on Linux, a hole may be reported as data (cached zeros
 * are data here), never data as a hole, and the end of the file is a
 * hole.  SEEK_SET, SEEK_CUR (taken as from 0: a handle has no position)
 * and SEEK_END return off, off and size + off.  Returns the offset, or
 * -1 with errno: EBADF (NULL or closed handle), EPERM (inherited through
 * fork), EINVAL (unknown whence, a negative result), ENXIO (SEEK_DATA or
 * SEEK_HOLE at or past the end of the file, SEEK_DATA with no data after
 * off). */
PC_API off_t pc_lseek(struct pc_file *f, off_t off, int whence);

/* What the cache holds of the file with device `dev` and inode `ino`
 * (st_dev, st_ino of its backing file), open or closed: for a program
 * that reports a file's attributes while a handle of it may have data
 * that is not written yet (a file system server answering stat).  */
struct pc_file_info {
	off_t size;              /* the size as the cache sees it */
	uint64_t cached_bytes;   /* folio memory of the file */
	uint64_t dirty_bytes;    /* not yet written back */
	uint32_t open_handles;   /* handles open now */
	uint32_t unsettled;      /* 1: closed with data still to be written (or
				  * being written): the backing file's size
				  * and times are not final yet */
};
/* 0 and *out filled, or -1 with errno: EINVAL (NULL c or out), EPERM
 * (inherited through fork), ENOENT (the cache holds nothing of that file:
 * the backing file is all there is).  A snapshot: handles of other
 * threads may change it at once. */
PC_API int pc_cache_file_info(struct pc_cache *c, dev_t dev, ino_t ino, struct pc_file_info *out);

/* Set the access and modification times of a backing file, as futimens(2)
 * with `times` does (UTIME_NOW and UTIME_OMIT included), given any
 * descriptor of it (O_PATH too), without making the cache take the
 * change for one by another program: a reopen keeps the cached data.
 * (The same utimensat done directly changes the backing file's ctime,
 * and the next open of the file then drops the data and reads it again.)
 * For a file system server that puts back the mtime a program saw while
 * the data was only cached (pcfs does, once the file is settled).  Only
 * times: data changed behind the cache's back must still be noticed, so
 * when the file had already changed since the cache last saw it, or
 * changes meanwhile, the times are set and the cached data is dropped at
 * the next open as usual.  A file the cache holds nothing of just gets
 * its times.  Returns 0, or -1 with errno: EINVAL (NULL c or times), EPERM
 * (inherited through fork), EBADF (fd), EBUSY (closed with data still to
 * be written, whose write-back would change the times again: try once
 * pc_cache_file_info says it is settled), or utimensat(2)'s error. */
PC_API int pc_cache_file_set_times(struct pc_cache *c, int fd, const struct timespec times[2]);

/* POSIX_FADV_DONTNEED: drop clean cached folios of the range and start
 * writeback of dirty ones (they are dropped when it completes).
 * POSIX_FADV_WILLNEED: read the range ahead (asynchronously).
 * POSIX_FADV_NOREUSE: later I/O to the range behaves as PC_DONTCACHE (one
 * range per file; a new NOREUSE replaces it, len 0 means to end of file).
 * Read-ahead follows each sequential stream through the cache (a mark in
 * its newest window starts the next one; a miss right after cached data
 * continues a stream), so random reads, other streams and other threads on
 * the same handle do not break a stream.  These three set this handle's
 * read-ahead, for the whole file (off and len are ignored, as in Linux):
 * POSIX_FADV_SEQUENTIAL: windows up to twice readahead_max_bytes (but no
 * more than max(readahead_max_bytes, memory_limit / 4)), and a stream
 * starts at the largest window instead of ramping up.  (A stream that
 * starts in the middle of a file, with nothing cached before it, is taken
 * for random at its first read and gets its first window at its second.)
 * A window is issued cached or uncached as its stream is (whether its
 * folios are PC_DONTCACHE ones), whoever's read reaches the mark.
 * POSIX_FADV_RANDOM: no read-ahead; a miss reads only what was asked (and
 * marks of other handles' streams are left to them).
 * POSIX_FADV_NORMAL: the default read-ahead again; also clears the NOREUSE
 * range.  Any open handle (of any access mode).  len 0, or off + len
 * past the largest offset, means to the end of the file.  Returns 0, or -1
 * with errno set (unlike posix_fadvise, which returns the error number).
 * Errors: EBADF (NULL or closed handle), EINVAL (unknown advice, negative
 * off or len). */
PC_API int pc_fadvise(struct pc_file *f, off_t off, off_t len, int advice);

/* Counters of the whole cache, or of one file (its mapping: shared by all
 * handles of that file; device and hit/miss counters are per mapping,
 * memory counters are its share).  A NULL cache, or a NULL or closed
 * handle, leaves *s zeroed; a NULL s does nothing. */
PC_API void pc_cache_stats(struct pc_cache *c, struct pc_stats *s);
PC_API void pc_file_stats(struct pc_file *f, struct pc_stats *s);

/*
 * Testing hooks (fault injection)
 *
 *   FOR TESTS ONLY.  These calls make the cache's own device I/O fail, come
 *   back short or late, so that a program's tests (and ours) can exercise
 *   error handling: EIO on reads, ENOSPC/EDQUOT on write-back, failed
 *   fsync, short transfers, slow devices.  They are not a production switch
 *   and change nothing about how the cache behaves otherwise; a cache that
 *   is never given a rule pays one relaxed atomic load per device I/O.
 *
 *   A rule matches device I/O of the kinds in `ops`, optionally only of one
 *   file and only overlapping [start, end) of it (a fsync covers the whole
 *   file).  Rules are tried in the order they were added; the first one
 *   that fires decides the I/O and the rules after it do not see that I/O.
 *   Of the I/Os a rule sees, the first `skip` pass; after that each fires
 *   (with one_in > 1, with probability 1/one_in from the rule's own
 *   generator seeded with `seed`: the same order of I/Os faults the same
 *   ones) until `count` have fired, then the rule stays installed, spent,
 *   until removed.  A fired I/O is not counted in dev_read_ios/
 *   dev_write_ios (fail) or is counted once (short, delay).
 *
 *   Actions:
 *     PC_FAULT_FAIL   the I/O fails with `error` without being done.  The
 *                     library handles it as a device error: a read reports
 *                     it (pc_pread -1/errno), failed write-back keeps the
 *                     data dirty and reports it on fsync/close, a failed
 *                     fsync reports it.
 *     PC_FAULT_SHORT  reads and writes only: the device moves only the
 *                     first part of the I/O (about half; on an O_DIRECT
 *                     descriptor rounded down to its direct-I/O alignment,
 *                     so an I/O smaller than two alignment units is not
 *                     seen by the rule) and the library continues the rest
 *                     as it does for any short transfer.  The data ends up
 *                     complete; only the continuation paths are exercised.
 *     PC_FAULT_DELAY  the I/O is issued `delay_ms` (1 to 60000) late: the
 *                     submitting thread sleeps before issuing it (caller,
 *                     flusher, or io_uring completion thread for I/O issued
 *                     from a completion).
 *   Kinds:
 *     PC_FAULT_READ, PC_FAULT_WRITE: device reads and writes (read-ahead,
 *     misses, read-modify-write, write-back, PC_DIRECT).  PC_FAULT_SYNC:
 *     the backing file's fsync/fdatasync (pc_fsync, pc_fdatasync).
 *     PC_FAULT_SUBMIT: io_uring only (never fires with PC_CFG_NO_IO_URING):
 *     the submission of a request fails as if io_uring_enter had refused
 *     it; the library then does the I/O synchronously on the submitting
 *     thread, so the I/O itself still succeeds (a FAIL rule's `error` is
 *     what the submission failed with).  PC_FAULT_ALLOC: the allocation of
 *     a write-back request fails (FAIL), or is slow (DELAY).
 *
 *   The calls are thread safe and may be used while I/O is in flight; a
 *   rule added while the flusher runs applies from some I/O on.  Rules
 *   holding a `file` keep that file's backing descriptors open until the
 *   rule is removed (or the cache destroyed), also after pc_close.
 */
#define PC_FAULT_READ   0x1u  /* device reads */
#define PC_FAULT_WRITE  0x2u  /* device writes */
#define PC_FAULT_SYNC   0x4u  /* fsync/fdatasync of a backing file */
#define PC_FAULT_SUBMIT 0x8u  /* io_uring submission of a request fails (io_uring mode only) */
#define PC_FAULT_ALLOC  0x10u /* allocation of a writeback request fails */
enum { PC_FAULT_FAIL = 0, PC_FAULT_SHORT = 1, PC_FAULT_DELAY = 2 };
struct pc_fault {
	unsigned ops;         /* PC_FAULT_* mask this rule applies to */
	int action;           /* PC_FAULT_FAIL: fail with `error`; PC_FAULT_SHORT: the device transfers only part
	                         (see above) and the library continues the rest; PC_FAULT_DELAY: the I/O is
	                         issued `delay_ms` late */
	int error;            /* PC_FAULT_FAIL: a positive errno (EIO, ENOSPC, EDQUOT, EFBIG, ...) */
	unsigned delay_ms;    /* PC_FAULT_DELAY */
	struct pc_file *file; /* only I/O of this handle's file; NULL: any file */
	off_t start, end;     /* only I/O overlapping [start, end); end 0: no upper bound */
	uint64_t skip;        /* let this many matching I/Os pass before faulting */
	uint64_t count;       /* then fault this many; 0: every matching one until removed */
	unsigned one_in;      /* > 1: fault each matching I/O with probability 1/one_in (seeded) */
	uint64_t seed;        /* for one_in; 0 picks a fixed default */
};
/* Add a rule; returns its id (>= 0) or -1/errno (EINVAL bad rule, ENOSPC too many rules: at most 16).
 * EINVAL: NULL arguments, ops 0 or unknown bits, unknown action, FAIL with
 * error not in 1..4095, SHORT with ops other than READ/WRITE, DELAY with
 * delay_ms not in 1..60000, start or end negative, end != 0 and end <= start,
 * file not an open handle of this cache.  ENOMEM when the rule table cannot
 * be allocated (on the first call).  Ids are not reused. */
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
