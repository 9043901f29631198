/*
 * check.c - what a failed check prints, and the per-thread record of the
 * locks a thread holds that the lock-order check reads (check.h).
 *
 * The record is a small array per thread: a thread of the cache holds at
 * most a few locks at once (inval_lock, tree_lock, a state spinlock and a
 * leaf or two), and a linear walk of a few entries costs less than any
 * hash.  Only checking builds (PC_CHECKS) have it.
 */
#include "lib/check.h"

#include <execinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if PC_CHECKS

static const char *level_name(int level)
{
	switch (level) {
	case LOCK_MEMBERS: return "members_lock";
	case LOCK_INVAL: return "inval_lock";
	case LOCK_THROTTLE: return "throttle_lock";
	case LOCK_FILES: return "files_lock";
	case LOCK_SIZE: return "size_lock";
	case LOCK_FOLIO: return "folio lock";
	case LOCK_TREE: return "tree_lock";
	case LOCK_STATE: return "block-state spinlock";
	case LOCK_LEAF: return "leaf lock";
	}
	return "lock";
}

enum { MAX_HELD = 16 };

struct held_lock {
	const void *lock;
	enum pc_lock_level level;
	bool excl;
	const char *file;
	int line;
};

static __thread struct held_lock held[MAX_HELD];
static __thread int nheld;

static void print_held(void)
{
	for (int i = 0; i < nheld; i++)
		fprintf(stderr, "pagecache:   holds %s %p%s, taken at %s:%d\n", level_name((int)held[i].level),
			held[i].lock, held[i].excl ? " exclusively" : "", held[i].file, held[i].line);
}

#else

static void print_held(void)
{
}

#endif

void check_failed(const char *file, int line, const char *what)
{
	fprintf(stderr, "pagecache: check failed at %s:%d: %s\n", file, line, what);
	print_held();
	fflush(stderr);
	/* The calls that led here (addr2line, or a debugger, names them). */
	void *frames[32];
	backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
	abort();
}

void check_warn(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pagecache: warning at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#if PC_CHECKS

static _Noreturn void order_broken(const char *file, int line, const char *what, int level, int held_level)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "%s: %s while holding %s (lock order, mem/mapping.h)", what,
		 level_name(level), level_name(held_level));
	check_failed(file, line, msg);
}

/* A lock of `level` may be waited for only when every lock held is of a
 * lower level; leaf locks may nest among themselves. */
static void check_order(const char *file, int line, const char *what, enum pc_lock_level level)
{
	for (int i = 0; i < nheld; i++) {
		enum pc_lock_level h = held[i].level;

		if (h > level || (h == level && level != LOCK_LEAF))
			order_broken(file, line, what, (int)level, (int)h);
	}
}

void lock_check_may_wait_at(const char *file, int line, enum pc_lock_level level)
{
	check_order(file, line, "waits", level);
}

void lock_note_take_at(const char *file, int line, const void *lock, enum pc_lock_level level, int how)
{
	if (lock_held(lock))
		check_failed(file, line, "takes a lock this thread already holds");
	if (how & TAKE_WAITS)
		check_order(file, line, "takes", level);
	if (nheld == MAX_HELD)
		check_failed(file, line, "holds more locks than check.c records");
	held[nheld++] = (struct held_lock){ lock, level, (how & TAKE_EXCL) != 0, file, line };
}

void lock_note_give_at(const char *file, int line, const void *lock)
{
	for (int i = nheld - 1; i >= 0; i--) {
		if (held[i].lock == lock) {
			held[i] = held[--nheld];
			return;
		}
	}
	check_failed(file, line, "releases a lock this thread does not hold");
}

static const struct held_lock *find_held(const void *lock)
{
	for (int i = 0; i < nheld; i++)
		if (held[i].lock == lock)
			return &held[i];
	return NULL;
}

bool lock_held(const void *lock)
{
	return find_held(lock) != NULL;
}

bool lock_held_excl(const void *lock)
{
	const struct held_lock *h = find_held(lock);

	return h && h->excl;
}

#endif
