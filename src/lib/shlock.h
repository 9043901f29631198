/*
 * shlock.h - locks in memory shared between processes, that survive the
 * death of their holders (shlock.c): an owned mutex, and a counted shared
 * lock (a reader-writer lock).  docs/shared.md, section 3, is the design;
 * this file knows nothing of caches.
 *
 * Who locks.  Every locker is a process slot (slots.h): the lock word
 * names its owner by slot number + 1 (0: no owner), never by pid or
 * pointer, so the locks work at any address in any process that maps the
 * area.  A process's threads share its slot: the lock is owned by the
 * process, and any of its threads may release it (as the folio lock is
 * released by a completion thread).  A thread that takes a lock its own
 * process holds waits like anybody else; one that takes a lock it holds
 * itself waits for ever, as with any non-recursive mutex.  The caller
 * passes a struct pc_shlock_ctx, in its own memory: its slot, the shared
 * slot table and its pidfds (struct pc_slot_peers).
 *
 * The word (32 bits, a futex):
 *
 *   bits 0..7   the owner's slot + 1; 0 when free
 *   bit  8      SHLOCK_WAITERS: somebody may sleep on the word; the
 *               unlock that finds it wakes them
 *   bit  9      SHLOCK_INCONSISTENT: an owner died holding the lock; the
 *               structure it protects may be half changed
 *
 * Waiting.  A waiter sets SHLOCK_WAITERS and sleeps on the word with
 * FUTEX_WAIT (shared, without FUTEX_PRIVATE_FLAG: the word is in shared
 * memory, and the kernel keys it by the page, not the address), at most
 * SHLOCK_CHECK_MS at a time.  Each time it has waited that long for an
 * owner, it asks slots_alive whether the owner's slot still runs.  If not
 * (exited, its pid reused, or the slot freed or being recovered), it takes
 * the lock over with one compare-and-swap of the word it saw (owner: the
 * waiter, SHLOCK_INCONSISTENT set), so that of several waiters exactly one
 * takes it.  A waiter killed after a wake-up, or an owner killed between
 * releasing the word and waking, costs the others at most one timeout,
 * never a hang.  When nobody dies, a wait costs a pidfd poll per
 * SHLOCK_CHECK_MS, and an uncontended lock or unlock one atomic operation
 * and no system call.
 *
 * Owner death, like a robust mutex.  A lock call that took the lock from a
 * dead owner, or found SHLOCK_INCONSISTENT set, returns -EOWNERDEAD with
 * the lock held by the caller.  The caller repairs the protected structure
 * (the repairs must be idempotent: it may die too, and the next taker gets
 * -EOWNERDEAD in its turn), calls ..._consistent, and unlocks.  An unlock
 * without ..._consistent leaves the flag set, so the next locker gets
 * -EOWNERDEAD again (not POSIX's ENOTRECOVERABLE: here a repair can always
 * be tried again).
 *
 * Owned mutex (struct pc_shmutex): the word alone.  Lock takes a free word
 * with one compare-and-swap; unlock clears the owner and SHLOCK_WAITERS and
 * wakes one sleeper if SHLOCK_WAITERS was set (a woken waiter that takes
 * the lock sets SHLOCK_WAITERS again, since others may still sleep).
 *
 * Counted shared lock (struct pc_shrwlock): the word names the writer;
 * beside it, one reader count per slot (a byte each: 64 bytes), so the
 * read holds of a dead process are known and can be dropped.
 *   - A reader adds one to its slot's count, then reads the word: no
 *     writer and no SHLOCK_INCONSISTENT, and it holds the lock.  Otherwise
 *     it takes its count back and waits on the word (as above) until the
 *     writer leaves.  A count at 255 (255 read holds by one process's
 *     threads) makes the next reader of that process wait a millisecond
 *     and try again.
 *   - A writer takes the word as the mutex does (so new readers back off:
 *     writers are not starved), then waits until every slot's count is
 *     zero, sleeping on a second futex, `drain`, that readers leaving
 *     while a writer holds the word bump and wake.
 *   - Both sides' steps are sequentially consistent: a reader that missed
 *     the writer's word is seen by the writer's look at the counts.
 *   - A writer that died: a waiting writer or reader takes the word over
 *     (-EOWNERDEAD) and waits for the readers, as a writer does.  A reader
 *     that gets -EOWNERDEAD therefore holds the lock FOR WRITING: it
 *     repairs, calls shrwlock_consistent, and releases with
 *     shrwlock_wrunlock.  So does a reader that finds the lock free but
 *     SHLOCK_INCONSISTENT set.
 *   - A reader that died: its slot's count stays, and writers wait.  A
 *     reader changes nothing, so nothing needs repair: the recovery of the
 *     dead slot (slots_recover_begin, then shrwlock_clear_reader for every
 *     counted lock, then slots_release) zeroes the count and wakes the
 *     writer.  Only the recoverer may clear a count: a count cleared while
 *     the slot could be claimed again might be a new process's.  A writer
 *     does not clear a dead reader's count by itself, and does not start
 *     the recovery (lib knows no recovery): until someone recovers the
 *     slot, it waits, re-reading the counts every SHLOCK_CHECK_MS.
 *
 * Recovery of a dead slot S (docs/shared.md, section 5) therefore: make S
 * RECOVERING; take over every lock whose word names S (shmutex_take_over,
 * shrwlock_take_over) and repair; clear S's reader counts
 * (shrwlock_clear_reader); only then slots_release(S).  A lock word that
 * still names S after S is freed and claimed again belongs to S's new
 * occupant, which does not know it holds it: every lock must be
 * reachable by recovery.
 *
 * Not yet: the per-thread lock-order record of check.h.  These locks do
 * not note themselves (lock_note_take) or check the order before they wait
 * (lock_check_may_wait); when the cache's locks move to them (docs/shared.md,
 * section 9, step 3), the noting wrappers of check.h will wrap these calls
 * as they wrap pthread mutexes today.  ThreadSanitizer cannot see a
 * futex's ordering either: threads acting as processes under TSan will
 * need annotations then.
 */
#ifndef PC_SHLOCK_H
#define PC_SHLOCK_H

#include "lib/slots.h"
#include "lib/util.h"

/* How long a waiter sleeps before it asks whether the owner lives. */
#define SHLOCK_CHECK_MS 100

#define SHLOCK_OWNER_MASK 0xffu
#define SHLOCK_WAITERS 0x100u
#define SHLOCK_INCONSISTENT 0x200u

/* The locker: in the caller's memory, set up once per process and slot
 * table (several threads may share one). */
struct pc_shlock_ctx {
	struct pc_slots *slots;      /* the shared table the owners' slots are in */
	struct pc_slot_peers *peers; /* this process's pidfds of the others */
	unsigned self;               /* this process's slot (slots_claim) */
};

struct pc_shmutex {
	_Atomic uint32_t word;
};

struct pc_shrwlock {
	_Atomic uint32_t word;                   /* the writer, as a mutex's word */
	_Atomic uint32_t drain;                  /* readers leaving while a writer waits */
	_Atomic uint64_t readers[SLOTS_MAX / 8]; /* byte s % 8 of [s / 8]: slot s's read holds */
};

/* The slot that owns a word (-1: none). */
static inline int shlock_word_owner(uint32_t w)
{
	return (int)(w & SHLOCK_OWNER_MASK) - 1;
}

/* ----------------------------------------------------------- mutex */

HIDDEN void shmutex_init(struct pc_shmutex *m);
/* 0, or -EOWNERDEAD: held, and the previous owner died (repair, then
 * shmutex_consistent). */
HIDDEN int shmutex_lock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
/* 0, -EBUSY (owned: never waits, so never asks whether the owner lives),
 * or -EOWNERDEAD (held, SHLOCK_INCONSISTENT set). */
HIDDEN int shmutex_trylock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
/* The caller's slot holds m. */
HIDDEN void shmutex_unlock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
/* The caller holds m and repaired what it protects. */
HIDDEN void shmutex_consistent(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
/* Recovery of dead slot `dead` (RECOVERING, slots.h): if m's word names
 * it, the caller takes m over: -EOWNERDEAD, held (repair, consistent,
 * unlock).  0 if m was not dead's. */
HIDDEN int shmutex_take_over(struct pc_shmutex *m, const struct pc_shlock_ctx *cx, unsigned dead);

/* ----------------------------------------------------------- counted shared lock */

HIDDEN void shrwlock_init(struct pc_shrwlock *rw);
/* 0: held for reading.  -EOWNERDEAD: held FOR WRITING, because the writer
 * died or left the lock inconsistent (repair, shrwlock_consistent,
 * shrwlock_wrunlock). */
HIDDEN int shrwlock_rdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
/* 0 held for reading, -EBUSY a writer holds or waits (or a repair is due). */
HIDDEN int shrwlock_tryrdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
HIDDEN void shrwlock_rdunlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
/* 0, or -EOWNERDEAD: held for writing, the previous writer died.  Waits for
 * every read hold to go, those of dead slots until they are cleared. */
HIDDEN int shrwlock_wrlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
/* 0, -EBUSY (a writer or a reader holds it), or -EOWNERDEAD (held for
 * writing, SHLOCK_INCONSISTENT set). */
HIDDEN int shrwlock_trywrlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
HIDDEN void shrwlock_wrunlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
HIDDEN void shrwlock_consistent(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
/* Recovery of dead slot `slot` (RECOVERING): its read holds are dropped,
 * and a writer waiting for them woken. */
HIDDEN void shrwlock_clear_reader(struct pc_shrwlock *rw, unsigned slot);
/* Recovery of dead slot `dead` (RECOVERING): if rw's writer is dead, the
 * caller takes the write lock over, waiting for the readers as a writer
 * does: -EOWNERDEAD, held for writing.  0 if dead was not the writer. */
HIDDEN int shrwlock_take_over(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx, unsigned dead);
/* Slot `slot`'s read holds now (for recovery and tests). */
HIDDEN unsigned shrwlock_readers(struct pc_shrwlock *rw, unsigned slot);

#endif
