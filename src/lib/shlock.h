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
 * released by a completion thread; not under ThreadSanitizer, see below).
 * A thread that takes a lock its own process holds waits like anybody
 * else; one that takes a lock it holds itself waits for ever, as with any
 * non-recursive mutex (a checking build fails a check).  The caller
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
 *   bit 10      SHLOCK_DRAINED (counted locks made with
 *               shrwlock_init_prefer_readers): the writer saw no reader
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
 * Owned mutex (struct pc_shmutex): the word, and its holder's thread id
 * (below).  Lock takes a free word
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
 *   - The reader-preferring kind (shrwlock_init_prefer_readers): readers
 *     back off only from SHLOCK_DRAINED, which the writer sets once it
 *     saw every count at zero, then looks at the counts again (and takes
 *     the bit back, waking the readers that backed off, if one came
 *     past).  A reader that backed off waits for the bit to go, not for
 *     the writer to leave.  Writers may starve while readers keep coming.
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
 * The owning thread.  Beside each word (the mutex's, the counted lock's
 * writer word) sits the id (gettid) of the thread that took it, 0 while
 * free: written by every build after the word is taken, cleared before it
 * is released (a relaxed store each, to a line the lock call has just
 * written, and a thread-local read), so that shmutex_held and
 * shrwlock_wrheld can say "held by this thread" in any process, and a
 * debugger or a checker can name the holder.  A thread that takes a lock
 * it holds itself fails a check in the checking builds instead of
 * waiting for ever.  The counted lock is 80 bytes with it.  Read holds are counted per slot, not per thread:
 * whether this thread holds a read lock is the lock-order record's to
 * say (check.h, lock_held).  A child of fork() records its own id.
 *
 * Spinning.  shmutex_lock_spin is shmutex_lock with a bounded spin first:
 * up to SHLOCK_SPINS looks at the word (a pause between them) for the
 * owner to leave, then the same futex wait, with the same checks of the
 * owner's life, so that an owner killed while it holds the lock costs the
 * others a bounded spin and then the usual SHLOCK_CHECK_MS, never a spin
 * for ever.  For locks held for a few instructions (the block-state
 * lock); the word, the unlock and the recovery are the mutex's.
 *
 * The lock-order record.  The noted_shmutex_* and noted_shrwlock_*
 * wrappers below do for these locks what check.h's noted_lock does for a
 * pthread mutex: before a lock call that may wait they check the order of
 * docs/design.md against the locks this thread holds (lock_note_take,
 * TAKE_WAITS), and they record the lock and give the record back at
 * unlock; Release keeps only the lock calls.  A counted lock's reader told
 * -EOWNERDEAD holds it for writing: its record says so.  A lock that the
 * record follows is released by the thread that took it (the record is
 * per thread); one released by another thread of the process (the folio
 * lock) is taken with the bare calls and checked with
 * lock_check_may_wait only, as check.h says of the folio lock today.
 *
 * ThreadSanitizer.  Threads that act as processes (a slot each, the TSan
 * builds' stand-in for processes, which TSan cannot follow) lock these
 * words like processes.  The hand-over from one holder to the next
 * already passes through C11 atomics that TSan models (the unlock's
 * read-modify-write, the next locker's compare-and-swap or sequentially
 * consistent load; the futex only sleeps), but those atomics also order
 * things that the lock does not: two readers' counts share a 64-bit word,
 * so their read holds would look ordered, and a write made under a read
 * lock would hide from TSan.  So in TSan builds every lock and unlock is
 * annotated as a mutex (__tsan_mutex_pre_lock ... __tsan_mutex_post_unlock,
 * read locks as such): TSan ignores the atomics inside, orders holders
 * exactly as a reader-writer mutex would, names the locks in its reports,
 * and checks their order against each other and against pthread mutexes
 * (lock-order inversions).  TSan's mutex wants the thread that took a lock
 * to release it: under TSan a lock released by another thread is reported
 * ("unlock of an unlocked mutex (or by a wrong thread)").  Compiling with
 * -DPC_SHLOCK_TSAN=0 leaves the annotations out (to compare).
 */
#ifndef PC_SHLOCK_H
#define PC_SHLOCK_H

#include "lib/check.h"
#include "lib/slots.h"
#include "lib/util.h"

#include <errno.h>

/* How long a waiter sleeps before it asks whether the owner lives. */
#define SHLOCK_CHECK_MS 100
/* How many times shmutex_lock_spin looks at an owned word before it
 * sleeps (a pause between looks). */
#define SHLOCK_SPINS 100

#define SHLOCK_OWNER_MASK 0xffu
#define SHLOCK_WAITERS 0x100u
#define SHLOCK_INCONSISTENT 0x200u
#define SHLOCK_DRAINED 0x400u /* a reader-preferring lock's writer saw no reader */

/* The locker: in the caller's memory, set up once per process and slot
 * table (several threads may share one). */
struct pc_shlock_ctx {
	struct pc_slots *slots;      /* the shared table the owners' slots are in */
	struct pc_slot_peers *peers; /* this process's pidfds of the others */
	unsigned self;               /* this process's slot (slots_claim) */
};

struct pc_shmutex {
	_Atomic uint32_t word;
	_Atomic uint32_t tid; /* the thread that holds it (gettid), 0 when free */
};

struct pc_shrwlock {
	_Atomic uint32_t word;                   /* the writer, as a mutex's word */
	_Atomic uint32_t tid;                    /* the writer's thread, as a mutex's */
	_Atomic uint32_t drain;                  /* readers leaving while a writer waits */
	uint32_t prefer_readers;                 /* set at init: readers pass a waiting writer */
	_Atomic uint64_t readers[SLOTS_MAX / 8]; /* byte s % 8 of [s / 8]: slot s's read holds */
};

/* The slot that owns a word (-1: none). */
static inline int shlock_word_owner(uint32_t w)
{
	return (int)(w & SHLOCK_OWNER_MASK) - 1;
}

/* The calling thread's id (gettid), as the lock words' neighbours hold it. */
HIDDEN uint32_t shlock_thread_id(void);

/* A futex in shared memory, for words other than the locks' (a shared
 * segment's state, mem/segment.c): sleep while *word == val, at most ms
 * milliseconds (wake-ups, timeouts, signals and a changed word all return:
 * the caller looks again); wake up to n sleepers. */
HIDDEN void shfutex_wait_ms(_Atomic uint32_t *word, uint32_t val, uint64_t ms);
HIDDEN void shfutex_wake(_Atomic uint32_t *word, int n);

/* ----------------------------------------------------------- mutex */

HIDDEN void shmutex_init(struct pc_shmutex *m);
/* 0, or -EOWNERDEAD: held, and the previous owner died (repair, then
 * shmutex_consistent). */
HIDDEN int shmutex_lock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
/* shmutex_lock, spinning up to SHLOCK_SPINS times before it sleeps. */
HIDDEN int shmutex_lock_spin(struct pc_shmutex *m, const struct pc_shlock_ctx *cx);
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

/* Does the calling thread hold m: its slot owns the word, and its id sits
 * beside it?  (Any thread may ask about any lock.) */
static inline bool shmutex_held(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	uint32_t w = atomic_load_explicit(&m->word, memory_order_relaxed);
	return shlock_word_owner(w) == (int)cx->self &&
	       atomic_load_explicit(&m->tid, memory_order_relaxed) == shlock_thread_id();
}

/* What a lock call returned, for a lock whose repair after its owner's
 * death is not written yet (docs/shared.md, section 9, step 5: the
 * cache's recovery): -EOWNERDEAD fails a check.  Only a shared cache's
 * other processes can die holding a lock; a private cache's one slot is
 * the caller's own live process, so there it cannot happen.  The one
 * place that says so, for every lock of the cache. */
static inline int shlock_owner_lives(int r)
{
	PC_ASSERT(r != -EOWNERDEAD);
	return r;
}

/* shmutex_lock for such a lock. */
static inline void shmutex_lock_live(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	shlock_owner_lives(shmutex_lock(m, cx));
}

/* ----------------------------------------------------------- counted shared lock */

HIDDEN void shrwlock_init(struct pc_shrwlock *rw);
/* A lock whose readers pass a writer that waits for the readers before
 * it (as glibc's default rwlock), so that a thread holding a read lock
 * may take another while a writer waits, and a writer may wait for ever
 * while readers keep coming.  The writer sets SHLOCK_DRAINED once it saw
 * no reader; readers back off from that bit, not from the owner. */
HIDDEN void shrwlock_init_prefer_readers(struct pc_shrwlock *rw);
/* 0: held for reading.  -EOWNERDEAD: held FOR WRITING, because the writer
 * died or left the lock inconsistent (repair, shrwlock_consistent,
 * shrwlock_wrunlock). */
HIDDEN int shrwlock_rdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx);
/* 0 held for reading, -EBUSY a writer holds or waits (a reader-preferring
 * lock: holds, SHLOCK_DRAINED), or a repair is due. */
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

/* Does the calling thread hold rw for writing (as shmutex_held)? */
static inline bool shrwlock_wrheld(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	uint32_t w = atomic_load_explicit(&rw->word, memory_order_relaxed);
	return shlock_word_owner(w) == (int)cx->self &&
	       atomic_load_explicit(&rw->tid, memory_order_relaxed) == shlock_thread_id();
}

/* ----------------------------------------------------------- with the lock-order record
 *
 * The calls above, recorded in this thread's record of held locks and
 * checked against the lock order before they may wait (check.h), at
 * `level`; the record names the caller's file and line.  They return what
 * the call they wrap returns.  Release has the bare calls. */

static inline int noted_shmutex_lock_at(struct pc_shmutex *m, const struct pc_shlock_ctx *cx,
					enum pc_lock_level level, bool spin, const char *file, int line)
{
	lock_note_take_from(m, level, TAKE_WAITS | TAKE_EXCL);
	return spin ? shmutex_lock_spin(m, cx) : shmutex_lock(m, cx);
}

static inline int noted_shmutex_trylock_at(struct pc_shmutex *m, const struct pc_shlock_ctx *cx,
					   enum pc_lock_level level, const char *file, int line)
{
	int r = shmutex_trylock(m, cx);
	if (r != -EBUSY)
		lock_note_take_from(m, level, TAKE_TRY | TAKE_EXCL);
	return r;
}

static inline void noted_shmutex_unlock_at(struct pc_shmutex *m, const struct pc_shlock_ctx *cx, const char *file,
					   int line)
{
	lock_note_give_from(m);
	shmutex_unlock(m, cx);
}

/* A read lock told -EOWNERDEAD is held for writing: so says the record. */
static inline int noted_shrwlock_rdlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					   enum pc_lock_level level, const char *file, int line)
{
	lock_note_take_from(rw, level, TAKE_WAITS);
	int r = shrwlock_rdlock(rw, cx);
	if (r == -EOWNERDEAD) {
		lock_note_give_from(rw);
		lock_note_take_from(rw, level, TAKE_TRY | TAKE_EXCL);
	}
	return r;
}

static inline int noted_shrwlock_tryrdlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					      enum pc_lock_level level, const char *file, int line)
{
	int r = shrwlock_tryrdlock(rw, cx);
	if (r == 0)
		lock_note_take_from(rw, level, TAKE_TRY);
	return r;
}

static inline int noted_shrwlock_wrlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					   enum pc_lock_level level, const char *file, int line)
{
	lock_note_take_from(rw, level, TAKE_WAITS | TAKE_EXCL);
	return shrwlock_wrlock(rw, cx);
}

static inline int noted_shrwlock_trywrlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					      enum pc_lock_level level, const char *file, int line)
{
	int r = shrwlock_trywrlock(rw, cx);
	if (r != -EBUSY)
		lock_note_take_from(rw, level, TAKE_TRY | TAKE_EXCL);
	return r;
}

static inline void noted_shrwlock_rdunlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					      const char *file, int line)
{
	lock_note_give_from(rw);
	shrwlock_rdunlock(rw, cx);
}

static inline void noted_shrwlock_wrunlock_at(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx,
					      const char *file, int line)
{
	lock_note_give_from(rw);
	shrwlock_wrunlock(rw, cx);
}

#define noted_shmutex_lock(m, cx, level) noted_shmutex_lock_at((m), (cx), (level), false, __FILE__, __LINE__)
#define noted_shmutex_lock_spin(m, cx, level) noted_shmutex_lock_at((m), (cx), (level), true, __FILE__, __LINE__)
#define noted_shmutex_trylock(m, cx, level) noted_shmutex_trylock_at((m), (cx), (level), __FILE__, __LINE__)
#define noted_shmutex_unlock(m, cx) noted_shmutex_unlock_at((m), (cx), __FILE__, __LINE__)
#define noted_shrwlock_rdlock(rw, cx, level) noted_shrwlock_rdlock_at((rw), (cx), (level), __FILE__, __LINE__)
#define noted_shrwlock_tryrdlock(rw, cx, level) noted_shrwlock_tryrdlock_at((rw), (cx), (level), __FILE__, __LINE__)
#define noted_shrwlock_wrlock(rw, cx, level) noted_shrwlock_wrlock_at((rw), (cx), (level), __FILE__, __LINE__)
#define noted_shrwlock_trywrlock(rw, cx, level) noted_shrwlock_trywrlock_at((rw), (cx), (level), __FILE__, __LINE__)
#define noted_shrwlock_rdunlock(rw, cx) noted_shrwlock_rdunlock_at((rw), (cx), __FILE__, __LINE__)
#define noted_shrwlock_wrunlock(rw, cx) noted_shrwlock_wrunlock_at((rw), (cx), __FILE__, __LINE__)

/* "The caller holds it" rules (checking builds): exclusively, from the
 * lock itself (slot and thread); a counted lock for reading or writing,
 * from the record. */
#define assert_shmutex_held(m, cx) PC_ASSERT(shmutex_held((m), (cx)))
#define assert_shrwlock_wrheld(rw, cx) PC_ASSERT(shrwlock_wrheld((rw), (cx)))
#define assert_shrwlock_held(rw) PC_ASSERT_HELD(rw)

#endif
