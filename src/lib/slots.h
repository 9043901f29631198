/*
 * slots.h - process slots in shared memory, and whether a slot's process
 * still runs (slots.c).  The first half of a shared cache's identity
 * protocol (docs/shared.md, 2.5): a process that uses a shared memory area
 * claims one of its 64 slots, and the slot number is then its name in
 * that area (lock owners are slot numbers, shlock.h).
 *
 * The area is the caller's: it maps it (shared by every process that uses
 * it: MAP_SHARED, a memfd, a shm_open segment) and puts a struct pc_slots
 * in it, zero-filled or set up by slots_init before any process claims a
 * slot.  Nothing in it is a pointer, so every process may map it at its
 * own address.  This file knows nothing of caches.
 *
 * A slot is one 64-bit word, read and changed atomically as a whole, and
 * the start time of its process:
 *
 *   bits  0..1   the state: FREE, CLAIMING, LIVE, RECOVERING
 *   bits  2..31  the generation: bumped by every claim of the slot
 *   bits 32..63  the pid of the process that holds it (0 when FREE)
 *
 *   FREE --claim (CAS)--> CLAIMING --start time stored--> LIVE
 *   LIVE --slots_release (its process)--------------------------> FREE
 *   LIVE or CLAIMING, process dead --slots_recover_begin--> RECOVERING
 *   RECOVERING --slots_release (the recoverer, when done)--> FREE
 *
 * The claim writes state, generation and pid in one compare-and-swap, so
 * a claimer killed at any point is known by its pid: a CLAIMING slot whose
 * pid is dead is as dead as a LIVE one.  The start time (field 22 of
 * /proc/<pid>/stat, clock ticks since boot) is stored before LIVE; it is
 * what tells the claimer from a later process that got the same pid.
 *
 * Whether a slot's process runs is asked of the kernel, never guessed
 * from time (slots_alive).  Each process keeps, in its own memory (struct
 * pc_slot_peers), a pidfd per slot, opened the first time it asks about
 * that slot's occupant: pidfd_open(pid), then the start time read again
 * from /proc/<pid>/stat and compared with the slot's (the pid may have
 * been reused between the claim and the open; once the pidfd is open and
 * the start time matches, the pidfd is the claimer's).  A pidfd becomes
 * readable when all its threads have exited (a zombie not yet reaped
 * included): from then on the process changes nothing in the area.  A
 * verdict of "dead" is final for that slot word (pid and generation); a
 * new claim of the slot is a new word, asked about afresh.  When the
 * kernel has no pidfd_open (ENOSYS) or it fails for another reason than
 * the process being gone, the answer comes from /proc/<pid>/stat alone,
 * read each time: dead when the pid is gone or names a process started at
 * another time.  A process that exited then counts as alive until it is
 * reaped: the state field cannot tell, since a process whose first thread
 * ended shows a zombie there while its other threads run.
 *
 * A claimer killed between its compare-and-swap and LIVE leaves a
 * CLAIMING word without a start time: it is asked about by pid alone, so
 * if that pid is reused before anybody asks, the slot counts as alive
 * while the new process runs (a window of two stores).
 *
 * What the slots do not do: decide who recovers a dead slot, or what
 * recovery means.  slots_recover_begin moves a dead slot to RECOVERING,
 * where nobody can claim it; the caller serialises recoverers (a recovery
 * lock, shlock.h) and, once the slot's locks and reader counts are taken
 * over or cleared (shlock.h), frees it with slots_release.  A slot must
 * not become FREE while a lock word still names it: the slot's next
 * occupant would inherit the lock.
 *
 * A process may hold several slots (threads that act as processes, two
 * caches).  All calls return 0 (or a slot number, or 1 for true) or a
 * negative errno.
 */
#ifndef PC_SLOTS_H
#define PC_SLOTS_H

#include "lib/util.h"

#define SLOTS_MAX 64

enum slot_state {
	SLOT_FREE = 0,
	SLOT_CLAIMING = 1,  /* pid and generation set, start time being stored */
	SLOT_LIVE = 2,
	SLOT_RECOVERING = 3, /* its process is dead; a recoverer works on it */
};

struct pc_slot {
	_Atomic uint64_t word;       /* state | generation << 2 | pid << 32 */
	_Atomic uint64_t start_time; /* the holder's, /proc/<pid>/stat field 22 */
};

/* In the shared area. */
struct pc_slots {
	struct pc_slot slot[SLOTS_MAX];
};

static inline enum slot_state slot_word_state(uint64_t w) { return (enum slot_state)(w & 3); }
static inline uint32_t slot_word_generation(uint64_t w) { return (uint32_t)(w >> 2) & 0x3fffffffu; }
static inline pid_t slot_word_pid(uint64_t w) { return (pid_t)(w >> 32); }

/* A slot's word, as it is now (for tests and messages). */
static inline uint64_t slots_word(struct pc_slots *s, unsigned slot)
{
	return atomic_load_explicit(&s->slot[slot].word, memory_order_acquire);
}

/* What one process knows of the other slots' processes: its pidfds.  In
 * the process's own memory, one per process and slot table; threads share
 * it.  A child of fork() makes its own (slots_peers_init) and never uses
 * its parent's: at most it closes what it inherited (slots_peers_destroy
 * of the copy, which only closes descriptors). */
struct pc_slot_peer {
	uint64_t word; /* the slot word the verdict below is for (0: none yet) */
	int fd;        /* its pidfd, -1 if none (dead, or no pidfds here) */
	bool dead;     /* that word's process has exited: final */
};

struct pc_slot_peers {
	pthread_mutex_t lock;
	struct pc_slot_peer peer[SLOTS_MAX];
};

/* Every slot FREE, generation 0 (zero-filled memory is the same). */
HIDDEN void slots_init(struct pc_slots *s);

/* Claim a free slot for the calling process: its number, or -EMFILE when
 * all 64 are taken (or the start time's -errno). */
HIDDEN int slots_claim(struct pc_slots *s);

/* Give slot `slot` up: the calling process's own (it must hold no lock
 * that names the slot), or a dead one the caller recovered
 * (slots_recover_begin). */
HIDDEN void slots_release(struct pc_slots *s, unsigned slot);

/* Does the process holding `slot` run?  1 yes (the caller's own slot
 * included), 0 no: the slot is FREE or RECOVERING, or its process has
 * exited, or its pid now names a process started at another time.  When
 * the kernel cannot tell (no descriptor left, no /proc), 1: a live process
 * is never called dead. */
HIDDEN int slots_alive(struct pc_slots *s, struct pc_slot_peers *peers, unsigned slot);

/* Start the recovery of a dead slot: LIVE or CLAIMING whose process is
 * dead → RECOVERING.  0 when the slot is RECOVERING now (also when it was
 * already: a recoverer that died leaves it so, and the next one starts
 * over), -EBUSY when its process runs, -ENOENT when it is FREE.  Callers
 * serialise themselves: two recoverers may both get 0. */
HIDDEN int slots_recover_begin(struct pc_slots *s, struct pc_slot_peers *peers, unsigned slot);

HIDDEN void slots_peers_init(struct pc_slot_peers *peers);
/* Closes the pidfds. */
HIDDEN void slots_peers_destroy(struct pc_slot_peers *peers);

/* Field 22 of /proc/<pid>/stat (0: this process), the process's start time
 * in clock ticks since boot; -errno when it cannot be read (-ESRCH: no such
 * process). */
HIDDEN int64_t slots_start_time(pid_t pid);

#endif
