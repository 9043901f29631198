/*
 * check.h - invariants as code: assertions, warnings, and a per-thread
 * check of the lock order that mem/mapping.h documents.
 *
 * They are compiled into the checking builds only (PC_CHECKS=1: Debug, the
 * sanitizer builds and the fuzz build; CMakeLists.txt decides) and vanish
 * from Release, so that the data path pays nothing for them there.  A
 * failed check prints where and what, and the locks the thread holds, then
 * aborts: a broken invariant is a bug to fix, not a state to run on in.
 *
 *   PC_ASSERT(cond)        cond must hold; not evaluated in Release, so it
 *                          must have no side effect.
 *   PC_WARN_ONCE(cond, fmt, ...)
 *                          cond is evaluated in every build and returned,
 *                          so the caller handles the case; checking builds
 *                          also print fmt the first time it is true.  For
 *                          states the code survives but should never see.
 *
 * Lock levels.  Every lock the documented order names has a level; a thread
 * may take a lock only while every lock it holds has a lower level (the
 * leaf locks may nest among themselves: they take nothing after them).
 * A try-lock never waits, so it is not checked against the order, only
 * recorded.  The folio lock is a bit that I/O completions release on
 * another thread, so it is not recorded per thread: folio_lock checks only
 * that the thread holds nothing after it (lock_check_may_wait), and
 * assert_folio_locked (mem/folio.h) checks the bit.  Waits for memory, the
 * I/O queue's room, write-back progress and the throttle check the same at
 * LOCK_TREE; a synchronous device call (pread/pwrite, ftruncate) is not
 * checked as a wait.
 */
#ifndef PC_CHECK_H
#define PC_CHECK_H

#include "lib/util.h"

#ifndef PC_CHECKS
#define PC_CHECKS 0
#endif

enum pc_lock_level {
	LOCK_MEMBERS = 0,  /* cache->members_lock: a shared cache's attach and leave */
	LOCK_INVAL = 1,    /* mapping->inval_lock */
	LOCK_THROTTLE = 2, /* cache->throttle_lock (asks the file table) */
	LOCK_FILES = 3,    /* cache->files_lock: opens and closes, the file table */
	LOCK_SIZE = 4,     /* mapping->size_lock: the backing file's size */
	LOCK_FOLIO = 5,    /* the folio lock (not recorded, see above) */
	LOCK_TREE = 6,     /* mapping->tree_lock */
	LOCK_STATE = 7,    /* a folio's block-state spinlock */
	LOCK_LEAF = 8,     /* lru, arena, domain, edges, pacing: nothing after them */
};

/* How a lock is taken (lock_note_take's `how`). */
enum {
	TAKE_TRY = 0,      /* a try-lock that succeeded: it never waited */
	TAKE_WAITS = 1,    /* a lock that may wait: checked against the order */
	TAKE_EXCL = 2,     /* exclusively (a write lock, a mutex) */
};

HIDDEN _Noreturn void check_failed(const char *file, int line, const char *what);
HIDDEN void check_warn(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#if PC_CHECKS

#define PC_ASSERT(cond) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : check_failed(__FILE__, __LINE__, #cond))

#define PC_WARN_ONCE(cond, ...)                                                     \
	({                                                                          \
		static _Atomic bool pc_warned_;                                     \
		bool pc_c_ = !!(cond);                                              \
		if (__builtin_expect(pc_c_, 0) && !atomic_exchange(&pc_warned_, true)) \
			check_warn(__FILE__, __LINE__, __VA_ARGS__);                \
		pc_c_;                                                              \
	})

/* About to wait (block) for a lock, I/O or memory at `level`: no lock of a
 * level at or after it may be held.  LOCK_TREE covers every wait for I/O,
 * memory or the throttle: such waits are allowed under inval_lock and
 * folio locks only. */
HIDDEN void lock_check_may_wait_at(const char *file, int line, enum pc_lock_level level);
/* Record that this thread takes `lock` at `level` (`how`: TAKE_*; the
 * order is checked when it waits), or gives it back. */
HIDDEN void lock_note_take_at(const char *file, int line, const void *lock, enum pc_lock_level level,
			      int how);
HIDDEN void lock_note_give_at(const char *file, int line, const void *lock);
/* Does this thread hold `lock` (at all; exclusively)? */
HIDDEN bool lock_held(const void *lock);
HIDDEN bool lock_held_excl(const void *lock);

#define lock_check_may_wait(level) lock_check_may_wait_at(__FILE__, __LINE__, (level))
#define lock_note_take(lock, level, how) lock_note_take_at(__FILE__, __LINE__, (lock), (level), (how))
#define lock_note_give(lock) lock_note_give_at(__FILE__, __LINE__, (lock))
/* The same, for a wrapper that passes on its caller's place (file, line). */
#define lock_note_take_from(lock, level, how) lock_note_take_at(file, line, (lock), (level), (how))
#define lock_note_give_from(lock) lock_note_give_at(file, line, (lock))
#define PC_ASSERT_HELD(lock) PC_ASSERT(lock_held(lock))
#define PC_ASSERT_HELD_EXCL(lock) PC_ASSERT(lock_held_excl(lock))

#else /* !PC_CHECKS */

/* sizeof: the condition is still type-checked, never evaluated. */
#define PC_ASSERT(cond) ((void)sizeof(!(cond)))
#define PC_WARN_ONCE(cond, ...) ({ __builtin_expect(!!(cond), 0); })
#define lock_check_may_wait(level) ((void)0)
#define lock_note_take(lock, level, how) ((void)(lock))
#define lock_note_give(lock) ((void)(lock))
#define lock_note_take_from(lock, level, how) ((void)(lock), (void)(level), (void)file, (void)line)
#define lock_note_give_from(lock) ((void)(lock), (void)file, (void)line)
#define PC_ASSERT_HELD(lock) ((void)sizeof(lock))
#define PC_ASSERT_HELD_EXCL(lock) ((void)sizeof(lock))

#endif

/* A mutex of the order at `level`: the lock and its record in one call,
 * which records where its caller took it. */
static inline void noted_lock_at(pthread_mutex_t *mu, enum pc_lock_level level, const char *file, int line)
{
	lock_note_take_from(mu, level, TAKE_WAITS | TAKE_EXCL);
	pthread_mutex_lock(mu);
}

static inline bool noted_trylock_at(pthread_mutex_t *mu, enum pc_lock_level level, const char *file, int line)
{
	if (pthread_mutex_trylock(mu))
		return false;
	lock_note_take_from(mu, level, TAKE_TRY | TAKE_EXCL);
	return true;
}

static inline void noted_unlock_at(pthread_mutex_t *mu, const char *file, int line)
{
	lock_note_give_from(mu);
	pthread_mutex_unlock(mu);
}
#define noted_lock(mu, level) noted_lock_at((mu), (level), __FILE__, __LINE__)
#define noted_trylock(mu, level) noted_trylock_at((mu), (level), __FILE__, __LINE__)
#define noted_unlock(mu) noted_unlock_at((mu), __FILE__, __LINE__)
#define leaf_lock(mu) noted_lock((mu), LOCK_LEAF)
#define leaf_unlock(mu) noted_unlock(mu)
/* A "caller holds mu" rule, for the mutexes above. */
#define assert_held(mu) PC_ASSERT_HELD(mu)
/* The same for the locks in shared memory (lib/shlock.h): noted_shmutex_*,
 * noted_shrwlock_*, and their assert_shmutex_held and the like. */

#endif
