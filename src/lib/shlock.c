/*
 * shlock.c - the owned mutex and the counted shared lock of shlock.h,
 * on shared futexes, with owners that may die.  shlock.h has the protocol.
 */
#include "lib/shlock.h"

#include "lib/check.h"
#include "lib/slots.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The mutex annotations of shlock.h, "ThreadSanitizer"; TSAN(call) is
 * nothing at all in other builds. */
#ifndef PC_SHLOCK_TSAN
#define PC_SHLOCK_TSAN PC_TSAN
#endif
#if PC_SHLOCK_TSAN
#include <sanitizer/tsan_interface.h>
#define TSAN(call) call
#else
#define TSAN(call) ((void)0)
#endif

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* FUTEX_WAIT takes a relative CLOCK_MONOTONIC timeout.  Not
 * FUTEX_PRIVATE_FLAG: the word is shared with other processes, and the
 * kernel keys it by the page it is in, not by its address. */
void shfutex_wait_ms(_Atomic uint32_t *word, uint32_t val, uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void shfutex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* The calling thread's id, read from the kernel once per thread; the child
 * of a fork forgets its parent's (its one thread has an id of its own). */
static __thread uint32_t tid_cached;
static pthread_once_t tid_once = PTHREAD_ONCE_INIT;

static void tid_forget(void)
{
	tid_cached = 0;
}

static void tid_at_fork(void)
{
	pthread_atfork(NULL, NULL, tid_forget);
}

uint32_t shlock_thread_id(void)
{
	uint32_t t = tid_cached;
	if (__builtin_expect(t == 0, 0)) {
		pthread_once(&tid_once, tid_at_fork);
		t = tid_cached = (uint32_t)syscall(SYS_gettid);
	}
	return t;
}

/* The word beside `tid` is now the caller's (taken, or taken over), or
 * about to be given up. */
static void tid_take(_Atomic uint32_t *tid)
{
	atomic_store_explicit(tid, shlock_thread_id(), memory_order_relaxed);
}

static void tid_give(_Atomic uint32_t *tid)
{
	atomic_store_explicit(tid, 0, memory_order_relaxed);
}

/* A wait for a word that this very thread owns would never end: checking
 * builds say so instead. */
static void assert_not_own(_Atomic uint32_t *word, _Atomic uint32_t *tid, const struct pc_shlock_ctx *cx)
{
#if PC_CHECKS
	if (shlock_word_owner(atomic_load_explicit(word, memory_order_relaxed)) == (int)cx->self &&
	    atomic_load_explicit(tid, memory_order_relaxed) == shlock_thread_id())
		check_failed(__FILE__, __LINE__, "takes a shared lock this thread holds (it would wait for ever)");
#else
	(void)word, (void)tid, (void)cx;
#endif
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

static uint32_t mine(const struct pc_shlock_ctx *cx)
{
	PC_ASSERT(cx->self < SLOTS_MAX);
	return cx->self + 1;
}

static bool cas(_Atomic uint32_t *word, uint32_t *seen, uint32_t want)
{
	return atomic_compare_exchange_strong_explicit(word, seen, want, memory_order_seq_cst,
						       memory_order_relaxed);
}

/*
 * Wait while `word` has an owner, asking every SHLOCK_CHECK_MS whether the
 * owner lives.  Returns -EOWNERDEAD when the owner was dead and the word is
 * now the caller's (SHLOCK_INCONSISTENT set).  Once the word has no owner:
 * with `acquire`, takes it and returns 0 (-EOWNERDEAD if it was
 * inconsistent); without, returns 1 and leaves it be.  word_wait_while
 * waits while any bit of `stop` is set instead (without `acquire`; the
 * bits must imply an owner, whose life it checks): a reader of a
 * reader-preferring lock waits only while SHLOCK_DRAINED is set.
 */
static int word_wait_while(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx, bool acquire, uint32_t stop)
{
	uint32_t me = mine(cx);
	bool slept = false;
	uint64_t check_at = mono_ms() + SHLOCK_CHECK_MS;
	for (;;) {
		uint32_t w = atomic_load_explicit(word, memory_order_relaxed);
		if (!(w & stop)) {
			if (!acquire)
				return 1;
			/* After a sleep others may sleep too: keep the bit, so
			 * that our unlock wakes the next. */
			uint32_t take = w | me | (slept ? SHLOCK_WAITERS : 0);
			if (cas(word, &w, take))
				return take & SHLOCK_INCONSISTENT ? -EOWNERDEAD : 0;
			continue;
		}
		if (!(w & SHLOCK_WAITERS)) {
			if (!cas(word, &w, w | SHLOCK_WAITERS))
				continue;
			w |= SHLOCK_WAITERS;
		}
		uint64_t now = mono_ms();
		if (now >= check_at) {
			int owner = shlock_word_owner(w);
			PC_ASSERT(owner < SLOTS_MAX);
			if (slots_alive(cx->slots, cx->peers, (unsigned)owner) == 0) {
				/* Of all who saw this word, one takes it over. */
				if (cas(word, &w, me | SHLOCK_INCONSISTENT | SHLOCK_WAITERS))
					return -EOWNERDEAD;
				continue;
			}
			check_at = now + SHLOCK_CHECK_MS;
		}
		shfutex_wait_ms(word, w, check_at - now);
		slept = true;
	}
}

static int word_wait(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx, bool acquire)
{
	return word_wait_while(word, cx, acquire, SHLOCK_OWNER_MASK);
}

/* Up to `spins` looks at the word for its owner to leave, taking it when
 * it has none: 0 or -EOWNERDEAD taken (inconsistent), 1 still owned (the
 * caller waits).  A word whose sleepers' bit is set keeps it, so that our
 * unlock wakes one of them. */
static int word_spin(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx, unsigned spins)
{
	uint32_t me = mine(cx);
	for (unsigned i = 0; i < spins; i++) {
		uint32_t w = atomic_load_explicit(word, memory_order_relaxed);
		if (!(w & SHLOCK_OWNER_MASK) && cas(word, &w, w | me))
			return w & SHLOCK_INCONSISTENT ? -EOWNERDEAD : 0;
		cpu_relax();
	}
	return 1;
}

/* Give the word up (the caller's slot owns it); returns what it was.  The
 * inconsistent flag stays. */
static uint32_t word_release(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx)
{
	uint32_t old = atomic_fetch_and_explicit(word, SHLOCK_INCONSISTENT, memory_order_seq_cst);
	PC_ASSERT((old & SHLOCK_OWNER_MASK) == mine(cx));
	(void)cx;
	return old;
}

/* Without waiting: 0, -EOWNERDEAD (taken, inconsistent) or -EBUSY. */
static int word_try(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx)
{
	uint32_t w = atomic_load_explicit(word, memory_order_relaxed);
	while (!(w & SHLOCK_OWNER_MASK))
		if (cas(word, &w, w | mine(cx)))
			return w & SHLOCK_INCONSISTENT ? -EOWNERDEAD : 0;
	return -EBUSY;
}

/* Recovery: take the word over from dead slot `dead` (1), or leave it (0)
 * when dead does not own it. */
static bool word_take_over(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx, unsigned dead)
{
	PC_ASSERT(dead < SLOTS_MAX && slot_word_state(slots_word(cx->slots, dead)) == SLOT_RECOVERING);
	uint32_t w = atomic_load_explicit(word, memory_order_relaxed);
	while (shlock_word_owner(w) == (int)dead)
		if (cas(word, &w, mine(cx) | SHLOCK_INCONSISTENT | (w & SHLOCK_WAITERS)))
			return true;
	return false;
}

static void word_consistent(_Atomic uint32_t *word, const struct pc_shlock_ctx *cx)
{
	PC_ASSERT((atomic_load_explicit(word, memory_order_relaxed) & SHLOCK_OWNER_MASK) == mine(cx));
	(void)cx;
	atomic_fetch_and_explicit(word, ~SHLOCK_INCONSISTENT, memory_order_release);
}

/* ----------------------------------------------------------- mutex */

void shmutex_init(struct pc_shmutex *m)
{
	atomic_init(&m->word, 0);
	atomic_init(&m->tid, 0);
	TSAN(__tsan_mutex_create(m, 0));
}

/* shmutex_lock, spinning `spins` times before the wait. */
static int mutex_lock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx, unsigned spins)
{
	TSAN(__tsan_mutex_pre_lock(m, 0));
	uint32_t w = 0;
	int r = 0;
	if (!cas(&m->word, &w, mine(cx))) {
		assert_not_own(&m->word, &m->tid, cx);
		r = word_spin(&m->word, cx, spins);
		if (r == 1)
			r = word_wait(&m->word, cx, true);
	}
	tid_take(&m->tid);
	TSAN(__tsan_mutex_post_lock(m, 0, 0));
	return r;
}

int shmutex_lock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	return mutex_lock(m, cx, 0);
}

int shmutex_lock_spin(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	return mutex_lock(m, cx, SHLOCK_SPINS);
}

int shmutex_trylock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_lock(m, __tsan_mutex_try_lock));
	int r = word_try(&m->word, cx);
	if (r != -EBUSY)
		tid_take(&m->tid);
	TSAN(__tsan_mutex_post_lock(m, __tsan_mutex_try_lock | (r == -EBUSY ? __tsan_mutex_try_lock_failed : 0), 0));
	return r;
}

void shmutex_unlock(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_unlock(m, 0));
	tid_give(&m->tid);
	if (word_release(&m->word, cx) & SHLOCK_WAITERS)
		shfutex_wake(&m->word, 1);
	TSAN(__tsan_mutex_post_unlock(m, 0));
}

void shmutex_consistent(struct pc_shmutex *m, const struct pc_shlock_ctx *cx)
{
	word_consistent(&m->word, cx);
}

int shmutex_take_over(struct pc_shmutex *m, const struct pc_shlock_ctx *cx, unsigned dead)
{
	TSAN(__tsan_mutex_pre_lock(m, __tsan_mutex_try_lock));
	bool took = word_take_over(&m->word, cx, dead);
	if (took)
		tid_take(&m->tid);
	TSAN(__tsan_mutex_post_lock(m, __tsan_mutex_try_lock | (took ? 0 : __tsan_mutex_try_lock_failed), 0));
	return took ? -EOWNERDEAD : 0;
}

/* ----------------------------------------------------------- counted shared lock */

static _Atomic uint64_t *count_word(struct pc_shrwlock *rw, unsigned slot, unsigned *shift)
{
	PC_ASSERT(slot < SLOTS_MAX);
	*shift = (slot % 8) * 8;
	return &rw->readers[slot / 8];
}

/* One more read hold for the caller's slot (sequentially consistent: the
 * writer that misses it is seen by the caller's look at the word). */
static void count_up(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	unsigned shift;
	_Atomic uint64_t *cw = count_word(rw, cx->self, &shift);
	uint64_t c = atomic_load_explicit(cw, memory_order_relaxed);
	for (;;) {
		if (((c >> shift) & 0xff) == 0xff) {
			/* 255 holds of this process: wait for one to go. */
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
			c = atomic_load_explicit(cw, memory_order_relaxed);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(cw, &c, c + ((uint64_t)1 << shift), memory_order_seq_cst,
							  memory_order_relaxed))
			return;
	}
}

/* A read hold goes; a writer waiting for the readers is told. */
static void count_down(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	unsigned shift;
	_Atomic uint64_t *cw = count_word(rw, cx->self, &shift);
	uint64_t old = atomic_fetch_sub_explicit(cw, (uint64_t)1 << shift, memory_order_seq_cst);
	PC_ASSERT((old >> shift) & 0xff);
	(void)old;
	if (atomic_load_explicit(&rw->word, memory_order_seq_cst) & SHLOCK_OWNER_MASK) {
		atomic_fetch_add_explicit(&rw->drain, 1, memory_order_seq_cst);
		shfutex_wake(&rw->drain, INT_MAX);
	}
}

static bool no_readers(struct pc_shrwlock *rw)
{
	for (unsigned i = 0; i < SLOTS_MAX / 8; i++)
		if (atomic_load_explicit(&rw->readers[i], memory_order_seq_cst))
			return false;
	return true;
}

/* A lock that lets readers past a waiting writer: the writer that saw no
 * reader says so in the word (SHLOCK_DRAINED) and looks at the counts
 * again.  Either a reader that counted itself meanwhile sees the bit and
 * backs off, or the writer sees its count, takes the bit back and waits
 * on (both sides sequentially consistent, as Dekker's).  True: the bit is
 * set and no reader came past it.  Writer-preferring locks need no bit:
 * their readers back off from the owner itself. */
static bool drained(struct pc_shrwlock *rw)
{
	if (!rw->prefer_readers)
		return true;
	atomic_fetch_or_explicit(&rw->word, SHLOCK_DRAINED, memory_order_seq_cst);
	if (no_readers(rw))
		return true;
	/* Readers that backed off from the bit wait for it to go (not for
	 * the writer to leave: one of them may be what a reader that came
	 * past waits for). */
	if (atomic_fetch_and_explicit(&rw->word, ~SHLOCK_DRAINED, memory_order_seq_cst) & SHLOCK_WAITERS)
		shfutex_wake(&rw->word, INT_MAX);
	return false;
}

/* The caller holds the word: wait until no slot holds a read.  The drain
 * count is read before the counts, so a reader leaving after the look
 * changes it and the sleep does not begin (or ends).  The timeout only
 * bounds a wake-up lost to a reader killed before it woke us; a dead
 * reader's count waits for recovery (shrwlock_clear_reader). */
static void wait_readers(struct pc_shrwlock *rw)
{
	for (;;) {
		uint32_t d = atomic_load_explicit(&rw->drain, memory_order_seq_cst);
		if (no_readers(rw)) {
			if (drained(rw))
				return;
			continue; /* a reader came past before SHLOCK_DRAINED */
		}
		shfutex_wait_ms(&rw->drain, d, SHLOCK_CHECK_MS);
	}
}

void shrwlock_init(struct pc_shrwlock *rw)
{
	atomic_init(&rw->word, 0);
	atomic_init(&rw->tid, 0);
	atomic_init(&rw->drain, 0);
	rw->prefer_readers = 0;
	for (unsigned i = 0; i < SLOTS_MAX / 8; i++)
		atomic_init(&rw->readers[i], 0);
	TSAN(__tsan_mutex_create(rw, 0));
}

void shrwlock_init_prefer_readers(struct pc_shrwlock *rw)
{
	shrwlock_init(rw);
	rw->prefer_readers = 1;
}

/* The word bits that send a reader away: a writer that holds the lock
 * (or, for a writer-preferring lock, one that waits for it too), and a
 * repair that is due. */
static uint32_t reader_stop_bits(const struct pc_shrwlock *rw)
{
	return (rw->prefer_readers ? SHLOCK_DRAINED : SHLOCK_OWNER_MASK) | SHLOCK_INCONSISTENT;
}

/* The write lock and its release, without the annotations (the public
 * calls annotate; the read lock uses these inside its own). */
static int rw_wrlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	uint32_t w = 0;
	int r = 0;
	if (!cas(&rw->word, &w, mine(cx))) {
		assert_not_own(&rw->word, &rw->tid, cx);
		r = word_wait(&rw->word, cx, true);
	}
	tid_take(&rw->tid);
	wait_readers(rw);
	return r;
}

static void rw_wrunlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	tid_give(&rw->tid);
	if (word_release(&rw->word, cx) & SHLOCK_WAITERS)
		shfutex_wake(&rw->word, INT_MAX);
}

int shrwlock_wrlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_lock(rw, 0));
	int r = rw_wrlock(rw, cx);
	TSAN(__tsan_mutex_post_lock(rw, 0, 0));
	return r;
}

int shrwlock_trywrlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_lock(rw, __tsan_mutex_try_lock));
	int r = word_try(&rw->word, cx);
	if (r != -EBUSY && !(no_readers(rw) && drained(rw))) {
		/* Readers hold it: give the word back, waking the readers
		 * that backed off meanwhile. */
		rw_wrunlock(rw, cx);
		r = -EBUSY;
	}
	if (r != -EBUSY)
		tid_take(&rw->tid);
	TSAN(__tsan_mutex_post_lock(rw, __tsan_mutex_try_lock | (r == -EBUSY ? __tsan_mutex_try_lock_failed : 0), 0));
	return r;
}

void shrwlock_wrunlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_unlock(rw, 0));
	rw_wrunlock(rw, cx);
	TSAN(__tsan_mutex_post_unlock(rw, 0));
}

void shrwlock_consistent(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	word_consistent(&rw->word, cx);
}

/* shrwlock_rdlock without the annotations: 0 held for reading,
 * -EOWNERDEAD held for writing. */
static int rw_rdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	for (;;) {
		count_up(rw, cx);
		uint32_t w = atomic_load_explicit(&rw->word, memory_order_seq_cst);
		if (!(w & reader_stop_bits(rw)))
			return 0;
		count_down(rw, cx);
		if (!(w & SHLOCK_OWNER_MASK)) {
			/* Nobody holds it, but a repair is due: as a writer. */
			if (rw_wrlock(rw, cx) == -EOWNERDEAD)
				return -EOWNERDEAD;
			rw_wrunlock(rw, cx); /* repaired meanwhile */
			continue;
		}
		assert_not_own(&rw->word, &rw->tid, cx);
		/* A reader-preferring lock's reader waits only while the
		 * writer says it drained the readers. */
		uint32_t stop = rw->prefer_readers && !(w & SHLOCK_INCONSISTENT) ? SHLOCK_DRAINED : SHLOCK_OWNER_MASK;
		if (word_wait_while(&rw->word, cx, false, stop) == -EOWNERDEAD) {
			/* The writer died: the word is ours, the lock for writing. */
			tid_take(&rw->tid);
			wait_readers(rw);
			return -EOWNERDEAD;
		}
	}
}

int shrwlock_rdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_lock(rw, __tsan_mutex_read_lock));
	int r = rw_rdlock(rw, cx);
	if (r == 0) {
		TSAN(__tsan_mutex_post_lock(rw, __tsan_mutex_read_lock, 0));
	} else {
		/* Held for writing: to TSan, a failed read lock, then a
		 * write lock taken without waiting. */
		TSAN(__tsan_mutex_post_lock(rw, __tsan_mutex_read_lock | __tsan_mutex_try_lock_failed, 0));
		TSAN(__tsan_mutex_pre_lock(rw, __tsan_mutex_try_lock));
		TSAN(__tsan_mutex_post_lock(rw, __tsan_mutex_try_lock, 0));
	}
	return r;
}

int shrwlock_tryrdlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_lock(rw, __tsan_mutex_try_read_lock));
	int r = 0;
	count_up(rw, cx);
	if (atomic_load_explicit(&rw->word, memory_order_seq_cst) & reader_stop_bits(rw)) {
		count_down(rw, cx);
		r = -EBUSY;
	}
	TSAN(__tsan_mutex_post_lock(rw, r ? __tsan_mutex_try_read_lock_failed : __tsan_mutex_try_read_lock, 0));
	return r;
}

void shrwlock_rdunlock(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx)
{
	TSAN(__tsan_mutex_pre_unlock(rw, __tsan_mutex_read_lock));
	count_down(rw, cx);
	TSAN(__tsan_mutex_post_unlock(rw, __tsan_mutex_read_lock));
}

int shrwlock_take_over(struct pc_shrwlock *rw, const struct pc_shlock_ctx *cx, unsigned dead)
{
	TSAN(__tsan_mutex_pre_lock(rw, __tsan_mutex_try_lock));
	bool took = word_take_over(&rw->word, cx, dead);
	if (took) {
		tid_take(&rw->tid);
		wait_readers(rw);
	}
	TSAN(__tsan_mutex_post_lock(rw, __tsan_mutex_try_lock | (took ? 0 : __tsan_mutex_try_lock_failed), 0));
	return took ? -EOWNERDEAD : 0;
}

void shrwlock_clear_reader(struct pc_shrwlock *rw, unsigned slot)
{
	unsigned shift;
	_Atomic uint64_t *cw = count_word(rw, slot, &shift);
	uint64_t c = atomic_load_explicit(cw, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(cw, &c, c & ~((uint64_t)0xff << shift), memory_order_seq_cst,
						      memory_order_relaxed))
		;
	atomic_fetch_add_explicit(&rw->drain, 1, memory_order_seq_cst);
	shfutex_wake(&rw->drain, INT_MAX);
}

unsigned shrwlock_readers(struct pc_shrwlock *rw, unsigned slot)
{
	unsigned shift;
	_Atomic uint64_t *cw = count_word(rw, slot, &shift);
	return (unsigned)(atomic_load_explicit(cw, memory_order_relaxed) >> shift) & 0xff;
}
