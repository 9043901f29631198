/*
 * util.h - what every layer of pagecache uses: the conventions of internal
 * calls, page sizes, integer helpers, the clocks (util.c) and iovec copies
 * (util.c).  It includes no other header of the library, so that any
 * header may include it first.
 *
 * Internal calls return 0 (or a count) or a negative errno; only api.c
 * turns that into -1/errno.  docs/design.md has the map of the headers and
 * which layer may call which.
 */
#ifndef PC_UTIL_H
#define PC_UTIL_H

/* Before any system header: every .c includes its library headers first,
 * and each of them includes this one first. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* Internal symbols are hidden: the shared library exports pc_* only
 * (cmake/check_exports.cmake), while tests link the static library and
 * reach them. */
#define HIDDEN __attribute__((visibility("hidden")))

/* PC_TSAN: 1 when built with ThreadSanitizer (some lockless code has a
 * variant it can follow, see read_hit.h and rt_unchanged_since).
 * PC_ASAN, PC_MSAN: 1 with AddressSanitizer, MemorySanitizer (whose
 * interceptors must see the cache hit's copy, read_hit.h). */
#if defined(__SANITIZE_THREAD__)
#define PC_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PC_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PC_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define PC_ASAN 1
#endif
#if __has_feature(memory_sanitizer)
#define PC_MSAN 1
#endif
#endif
#ifndef PC_TSAN
#define PC_TSAN 0
#endif
#ifndef PC_ASAN
#define PC_ASAN 0
#endif
#ifndef PC_MSAN
#define PC_MSAN 0
#endif

#define PC_PAGE_SHIFT 12
#define PC_PAGE_SIZE (1u << PC_PAGE_SHIFT)

static inline uint64_t u64_min(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t u64_max(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline int64_t i64_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline uint64_t round_down(uint64_t x, uint64_t a) { return x & ~(a - 1); }
static inline uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
/* The smallest power of two >= x (1 for 0). */
static inline uint64_t roundup_pow2(uint64_t x) { return x <= 1 ? 1 : (uint64_t)1 << (64 - __builtin_clzll(x - 1)); }
/* *v = max(*v, x), atomically; returns the value it had. */
static inline int64_t atomic_raise_i64(_Atomic int64_t *v, int64_t x)
{
	int64_t cur = atomic_load(v);
	while (x > cur && !atomic_compare_exchange_weak(v, &cur, x))
		;
	return cur;
}

struct pc_cache;
struct pc_folio;

/* util.c: clocks */
HIDDEN uint64_t now_ms(void);
/* FNV-1a of a string: names hashed into addresses and socket names. */
HIDDEN uint64_t hash_name(const char *s);
/* A condition variable that timed_wait_ms may wait on (CLOCK_MONOTONIC:
 * a change of the wall clock neither ends nor prolongs a wait). */
HIDDEN void cond_init_monotonic(pthread_cond_t *cv);
/* Wait on cv (made by cond_init_monotonic) for at most ms milliseconds;
 * the caller checks again why it waited. */
HIDDEN void timed_wait_ms(pthread_cond_t *cv, pthread_mutex_t *lock, unsigned ms);
/* *ts = CLOCK_MONOTONIC now + ms (for pthread_cond_timedwait on a cv made
 * by cond_init_monotonic). */
HIDDEN void deadline_after_ms(struct timespec *ts, unsigned ms);

/* util.c: copies between an iovec array, starting `skip` bytes in, and a
 * flat buffer. */
HIDDEN void iov_copy_from(const struct iovec *iov, int iovcnt, size_t skip, void *dst, size_t len);
HIDDEN void iov_copy_to(const struct iovec *iov, int iovcnt, size_t skip, const void *src, size_t len);

#endif
