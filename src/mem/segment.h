/*
 * segment.h - the memory a cache lives in (segment.c): a private segment
 * (anonymous memory of one process), or a named one that every process of
 * one user attaching to that name maps at the same address.
 * docs/shared.md, sections 2 and 12, is the design; the cache does not use
 * segments yet (docs/shared.md, section 9, step 2).
 *
 * Layout (every offset from the segment's start, which is where every
 * process maps it):
 *
 *   0           struct seg_header: magic, ABI, state, size, address, the
 *               slot table (lib/slots.h), the heap's lock and free lists,
 *               the caller's anchor (one page)
 *   private_off the caller's private window: each process maps its own
 *               anonymous memory there, over the shared object's bytes
 *   fixed_off   the caller's fixed shared area, right after the window
 *               (docs/shared.md, 13: struct pc_cache, whose process part,
 *               struct pc_proc, is right below it)
 *   config_off  the creator's configuration bytes (opaque here)
 *   table_off   the heap's block table: one byte per 64 bytes of heap
 *   heap_off    the heap (a multiple of SEG_ALIGN_MAX from the start)
 *
 * Named segments.  The object is shm_open("/pagecache-<NAME>") (one
 * namespace for all users: another user's object is -EACCES),
 * NAME 1 to SEG_NAME_MAX bytes without '/', not "." or "..".  The first
 * process creates it (O_CREAT | O_EXCL, mode 0600, fchmod 0600), the others
 * attach; an attacher refuses an object that is not its euid's or has
 * group or other mode bits (-EACCES), or that another layout made
 * (-EPROTO).  Membership is a flock: every attached process holds LOCK_SH
 * on its descriptor while attached (the creator from just after its
 * shm_open), so the kernel keeps the count, a dead process included.
 *
 *   creation: shm_open(O_EXCL) -> flock(SH) -> the name still names this
 *     object? (else someone took it over: start again) -> ftruncate -> map
 *     at the hashed address -> header, configuration, slots, heap -> claim a
 *     slot -> state READY (release store, futex wake)
 *   attach: shm_open -> fstat (owner, mode) -> wait for READY, at most
 *     wait_ms (5 s): while not READY, flock(EX | NB) tells whether anybody
 *     holds the lock; if nobody does the creator died initialising, and
 *     the attacher, holding EX, unlinks the name (nothing in the object was
 *     ever acknowledged to anybody) and creates it anew -> flock(SH) -> the
 *     name still names this object? (else the last member removed it
 *     meanwhile: start again) -> magic, ABI, size (-EPROTO) -> the caller's
 *     configuration check -> map at the header's address,
 *     MAP_FIXED_NOREPLACE (-ENOMEM, with a message, when the range is
 *     taken in this process) -> claim a slot (-EMFILE)
 *   detach: release the slot, then flock(EX | NB) (which drops SH first):
 *     the one process that gets it is the last: no other process is a
 *     member, and attachers wait in flock(SH) until it closes.  It claims
 *     a slot again, and segment_detach returns 1: the caller writes
 *     everything back, then segment_destroy unlinks the name and unmaps.
 *     The others (0) are unmapped at once.
 *
 * The address.  The creator hashes the name to an address aligned to
 * SEG_ADDR_ALIGN in this build's range (segment_addr_range: on x86-64
 * 0x6800'0000'0000 to 0x7000'0000'0000, or 0x40'0000'0000 to
 * 0x80'0000'0000 under ThreadSanitizer, whose runtime takes the first
 * range; elsewhere the same fractions of the address space), and tries
 * SEG_ADDR_TRIES hashes when the kernel finds one taken (EEXIST).
 *
 * Fork.  The mapping is MADV_DONTFORK: a child of fork() has none, but
 * for a copy of a private segment's window (the process part of whatever
 * the caller keeps there says whose it is; segment_window_forget drops
 * it).  A named segment's window is not inherited: the child may attach
 * to the name, at the same address.  A
 * pthread_atfork handler closes the child's copies of the segments'
 * descriptors (which would hold the parent's flock as long as the child
 * lived) and its pidfds, and marks its copies inherited: every call on an
 * inherited segment fails with -EPERM, but segment_detach, which frees
 * the copy.  The child may attach to the name like any process.
 *
 * The heap: seg_alloc and seg_free (segment.c, "The heap", has the
 * buddy allocator and its repair after a holder's death), segment_check its
 * walker.  Pointers into the segment are the same in every process that
 * maps it, so structures in the heap may hold plain pointers.
 *
 * Calls return 0 (or 1 for true) or a negative errno, and may be called by
 * any thread of the process; segment_detach and segment_destroy by one,
 * once no thread uses the segment.
 */
#ifndef PC_SEGMENT_H
#define PC_SEGMENT_H

#include "lib/shlock.h"
#include "lib/slots.h"
#include "lib/util.h"

#include <stddef.h>

#define SEG_MAGIC 0x746e6d6765736370ull /* "pcsegmnt" */
/* The layout's version: bump it with any change of a structure in the
 * segment (this header's, the heap's, and later the cache's), so that
 * another build's process gets -EPROTO instead of reading it. */
#define SEG_ABI 1

#define SEG_NAME_MAX 200
#define SEG_WAIT_MS 5000          /* an attacher's wait for READY */
#define SEG_CONFIG_MAX (1u << 20) /* the creator's configuration bytes */
#define SEG_ADDR_ALIGN ((uint64_t)1 << 30) /* named segments' addresses */
#define SEG_ADDR_TRIES 8          /* hashed addresses a creator tries */
#define SEG_MIN_SHIFT 6           /* the heap's smallest block: 64 bytes */
#define SEG_ORDERS 41             /* blocks of 64 B to 64 TiB */
#define SEG_ALIGN_MAX ((size_t)2 << 20) /* seg_alloc's largest alignment */
#define SEG_AREA_MAX ((size_t)1 << 30) /* the private window, the fixed area */

enum seg_state {
	SEG_INITIALISING = 0, /* a zero-filled object is one */
	SEG_READY = 1,
};

/* The heap's state, in the header (segment.c, "The heap"). */
struct seg_heap {
	struct pc_shmutex lock;
	uint32_t orders;                 /* blocks of order 0 .. orders - 1 */
	uint64_t off, bytes;             /* where the heap is in the segment */
	uint64_t table_off;              /* its block table */
	uint64_t used;                   /* bytes in allocated blocks */
	uint64_t free_head[SEG_ORDERS];  /* heap offsets; SEG_NONE: empty */
};

#define SEG_NONE UINT64_MAX

/*
 * At offset 0 of every segment.  magic, abi and state stay where they are
 * in every version (an attacher of another version reads them to refuse
 * the segment); the rest may change with SEG_ABI.
 */
struct seg_header {
	uint64_t magic;
	uint32_t abi;
	_Atomic uint32_t state;      /* enum seg_state; READY is stored last */
	uint64_t size;               /* the segment's bytes */
	uint64_t addr;               /* where every process maps it (named) */
	uint64_t private_off, private_bytes; /* each process's own memory */
	uint64_t fixed_off, fixed_bytes;     /* shared, right after it */
	uint64_t config_off, config_len;
	int32_t creator_pid;         /* for messages */
	_Alignas(64) struct pc_slots slots;
	_Alignas(64) struct seg_heap heap;
	/* The caller's: where its shared structures start (a pointer into
	 * the heap, say).  0 when the segment is made. */
	_Alignas(64) _Atomic uint64_t anchor;
};

/* What the caller passes to make or attach a segment. */
struct seg_params {
	/* The creator's: the heap's bytes (at least 64), and configuration
	 * bytes copied into the segment (at most SEG_CONFIG_MAX).  Every
	 * caller of segment_open passes what it would make, and they are
	 * checked (-EINVAL); an attacher's are not used: the creator's
	 * configuration rules. */
	size_t heap_bytes;
	const void *config;
	size_t config_len;
	/* The creator's too (at most SEG_AREA_MAX each): the private window's
	 * bytes (rounded up to pages; 0: none), and the fixed shared area's,
	 * which starts right after it.  Both start zeroed. */
	size_t private_bytes;
	size_t fixed_bytes;
	/* An attacher's: asked about the creator's configuration before the
	 * attach takes a slot; a negative errno refuses the attach with it.
	 * NULL: any configuration will do. */
	int (*config_check)(const void *theirs, size_t len, void *arg);
	void *config_arg;
	/* How long an attacher waits for a creator to finish; 0: SEG_WAIT_MS. */
	unsigned wait_ms;
};

/* A process's attachment of a segment: in its own memory. */
struct pc_segment {
	struct seg_header *hdr; /* the segment's start */
	size_t size;
	int fd;                 /* named: the shm descriptor that holds the flock; -1 private */
	bool created;           /* this process made it */
	bool last;              /* segment_detach returned 1 */
	_Atomic bool inherited; /* a child of fork()'s copy: unusable */
	int slot;               /* this process's slot; -1 none */
	struct pc_slot_peers peers;
	struct pc_shlock_ctx cx;
	struct pc_segment *next, *prev; /* the process's segments (fork) */
	char shm_name[SEG_NAME_MAX + 32];
};

/* A private segment: MAP_PRIVATE | MAP_ANONYMOUS, MADV_DONTFORK, at an
 * address the kernel picks, one slot claimed.  -EINVAL (heap or
 * configuration size), -ENOMEM. */
HIDDEN int segment_new_private(const struct seg_params *p, struct pc_segment **out);

/* Create the named segment, or attach to it (segment_created tells which).
 * -EINVAL a bad name or size, -EACCES another user's or a group/other
 * mode, -EPROTO another layout or not a segment, -ETIMEDOUT its creator
 * runs but did not finish within wait_ms, -ENOMEM its address is taken in
 * this process (a message says which range) or the size fits no range,
 * -EMFILE all slots taken, the configuration check's error, or another
 * system call's.  While the last process writes back (segment_detach
 * returned 1 there), an attacher waits for it, however long it takes. */
HIDDEN int segment_open(const char *name, const struct seg_params *p, struct pc_segment **out);

/* Leave: 1 the caller was the last (named: no other process is attached;
 * private: always): the segment stays mapped, its name linked, and the
 * caller has a slot again (-1 only if every slot is held by a dead
 * process); it writes back what it must, then calls segment_destroy.
 * 0 others remain: the segment is unmapped and *s freed.  An inherited
 * segment's copy is freed (0). */
HIDDEN int segment_detach(struct pc_segment *s);
/* After segment_detach returned 1: release the slot, unlink the name
 * (unless keep_name: write-back failed, and the data must wait for the
 * next process), unmap, close, free. */
HIDDEN void segment_destroy(struct pc_segment *s, bool keep_name);

static inline void *segment_base(const struct pc_segment *s) { return s->hdr; }
static inline size_t segment_size(const struct pc_segment *s) { return s->size; }
static inline bool segment_created(const struct pc_segment *s) { return s->created; }
static inline int segment_slot(const struct pc_segment *s) { return s->slot; }
static inline struct pc_slots *segment_slots(struct pc_segment *s) { return &s->hdr->slots; }
/* The locker to pass to shlock.h's calls on locks in this segment. */
static inline const struct pc_shlock_ctx *segment_lock_ctx(const struct pc_segment *s) { return &s->cx; }
static inline _Atomic uint64_t *segment_anchor(struct pc_segment *s) { return &s->hdr->anchor; }
/* This process's window (NULL if none) and the fixed shared area right
 * after it (a page-aligned address if the window has pages). */
static inline void *segment_private(const struct pc_segment *s)
{
	return s->hdr->private_bytes ? (char *)s->hdr + s->hdr->private_off : NULL;
}
static inline void *segment_fixed(const struct pc_segment *s) { return (char *)s->hdr + s->hdr->fixed_off; }
/* The creator's configuration bytes, in the segment. */
static inline const void *segment_config(const struct pc_segment *s, size_t *len)
{
	*len = s->hdr->config_len;
	return (const char *)s->hdr + s->hdr->config_off;
}

/* Is addr inside a segment this process holds as an inherited copy (in a
 * child of fork(), before the copy is detached)?  False for a segment of
 * its own, and for an address in none.  Reads only the process's list of
 * its segments (never the segment, which a child does not have mapped):
 * under a mutex, for calls that are not on a data path. */
HIDDEN bool segment_inherited_at(const void *addr);
/* A child of fork()'s copy of a named segment holding addr, or NULL: its
 * memory is not mapped here at all (not even a window), so only the
 * record is left to free (segment_detach). */
HIDDEN struct pc_segment *segment_inherited_named_at(const void *addr);
/* 0 for a valid name (1 to SEG_NAME_MAX bytes, no '/', not "." or ".."),
 * else -EINVAL. */
HIDDEN int segment_name_check(const char *name);
/* Is the named segment `name` attached in this process already, or (in a
 * child of fork()) inherited and not yet detached?  A new attachment would
 * be mapped at the address the inherited pointer names. */
HIDDEN bool segment_attached_here(const char *name);
/* Bytes the file system of a named segment's object (the tmpfs of
 * /dev/shm) has free, UINT64_MAX when not known or private: the object is
 * sparse, and a page touched past that room is a SIGBUS. */
HIDDEN uint64_t segment_backing_room(const struct pc_segment *s);

/* A child of fork(): drop its copy of an inherited segment's window
 * (segment_private's address and the window's bytes, read before). */
HIDDEN void segment_window_forget(void *window, size_t bytes);

/* This build's range of named segments' addresses, [*lo, *hi). */
HIDDEN void segment_addr_range(uint64_t *lo, uint64_t *hi);
/* The address a creator tries at its attempt-th try (0 ..
 * SEG_ADDR_TRIES - 1) for `size` bytes of `name`; 0 when the size does
 * not fit the range. */
HIDDEN uint64_t segment_pick_addr(const char *name, size_t size, unsigned attempt);

/* ----------------------------------------------------------- the heap */

/* A block of at least `size` bytes aligned to `align` (a power of two, at
 * most SEG_ALIGN_MAX; 0 means 64), at the same address in every process:
 * 0 and *out set, -ENOMEM no free block is large enough, -EINVAL, -EPERM
 * (inherited), -EUCLEAN the heap is damaged beyond repair (segment_check). */
HIDDEN int seg_alloc(struct pc_segment *s, size_t size, size_t align, void **out);
/* Give back what seg_alloc gave, in any process. */
HIDDEN void seg_free(struct pc_segment *s, void *p);
/* Bytes in allocated blocks (each a power of two of at least 64). */
HIDDEN uint64_t seg_used(struct pc_segment *s);

/* Walk the segment: the header, then the heap (every block free or
 * allocated, none overlapping, the table's bytes inside blocks zero, no two
 * free buddies unmerged, each free block on its order's list once, the
 * lists' links both ways, the used count).  0, or -EUCLEAN with the first
 * problem on stderr.  Takes the heap's lock. */
HIDDEN int segment_check(struct pc_segment *s);

/* Tests only: called at the steps below, in the process that takes
 * them, when set (the creator's: at a kill here, the attachers take the
 * name over; the heap's: with its lock held and the free lists half
 * changed). */
enum seg_step {
	SEG_STEP_OPENED,   /* the creator's shm_open done, no flock yet */
	SEG_STEP_LOCKED,   /* flock held, size 0 */
	SEG_STEP_SIZED,    /* ftruncate done, nothing written */
	SEG_STEP_HEADER,   /* header written, state INITIALISING */
	SEG_STEP_SPLIT,      /* seg_alloc: a block off its list, not split yet */
	SEG_STEP_SPLIT_HALF, /* a split: the upper half's head written, not the lower's */
	SEG_STEP_MERGE,      /* seg_free: a free buddy off its list, not merged yet */
	SEG_STEP_MERGE_HALF, /* a merge: the lower buddy's new order written, the
			      * upper one's head not cleared */
};
HIDDEN extern void (*segment_test_hook)(enum seg_step step);

#endif
