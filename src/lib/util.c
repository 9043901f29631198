/* util.c - small helpers with no better home: the millisecond clock and
 * copying between iovec arrays and flat buffers. */
#include "lib/util.h"


#include <string.h>
#include <time.h>

void cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

void deadline_after_ms(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += (long)ms * 1000000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

/* Wait on cv (made by cond_init_monotonic) for at most ms milliseconds
 * (the caller re-checks why). */
void timed_wait_ms(pthread_cond_t *cv, pthread_mutex_t *lock, unsigned ms)
{
	struct timespec ts;
	deadline_after_ms(&ts, ms);
	pthread_cond_timedwait(cv, lock, &ts);
}

/* Milliseconds, for ages and back-offs of a few ms and more.  The coarse
 * clock (a tick's resolution) reads a word instead of the time stamp
 * counter, which in a virtual machine can cost a microsecond, and every
 * write that dirties a folio stamps it. */
uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Walk `len` bytes of the iovec array starting `skip` bytes in, calling the
 * copy for each piece.  Shared by both directions. */
static void iov_walk(const struct iovec *iov, int iovcnt, size_t skip, uint8_t *flat, size_t len,
		     bool to_iov)
{
	int i = 0;
	while (i < iovcnt && skip >= iov[i].iov_len)
		skip -= iov[i++].iov_len;
	for (; len && i < iovcnt; i++, skip = 0) {
		size_t n = iov[i].iov_len - skip;
		if (n > len)
			n = len;
		uint8_t *p = (uint8_t *)iov[i].iov_base + skip;
		if (to_iov)
			memcpy(p, flat, n);
		else
			memcpy(flat, p, n);
		flat += n;
		len -= n;
	}
}

void iov_copy_from(const struct iovec *iov, int iovcnt, size_t skip, void *dst, size_t len)
{
	iov_walk(iov, iovcnt, skip, dst, len, false);
}

void iov_copy_to(const struct iovec *iov, int iovcnt, size_t skip, const void *src, size_t len)
{
	iov_walk(iov, iovcnt, skip, (uint8_t *)src, len, true);
}

uint64_t hash_name(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}
