/*
 * read_hit.h - the cache hit: a read that one cached, uptodate folio serves
 * whole, done without a lock, a reference or any other locked instruction.
 *
 * Why: a hit is a 4 KiB copy plus bookkeeping, and the bookkeeping of the
 * full read path (read.c: the index lock, the folio reference taken and
 * dropped, per-file and per-cache atomic counters, the handle's read-ahead
 * state) wrote shared cache lines that two threads reading one file then
 * passed back and forth, and every locked instruction also made the CPU
 * finish the previous copy before it could start on the next lookup.
 *
 * How (the kernel's seqcount and SLAB_TYPESAFE_BY_RCU ideas):
 *   - the index is walked without its lock (radix.c, "Lockless lookups"),
 *     which yields a folio that was in the file at that index;
 *   - folio memory is never unmapped while the cache lives, so copying from
 *     it is always memory-safe, even if the folio is freed and reused
 *     meanwhile; what must be checked is that the bytes copied are the
 *     file's.  The folio's flags word carries a generation that is
 *     incremented whenever it is freed (PF_GEN_SHIFT): the flags and
 *     order are read before the copy, the generation again after it with
 *     the mapping and index, and the copy counts only if the generation
 *     did not change and the folio is the file's at that offset.  A folio
 *     that was removed from the file but not freed (a truncate or hole punch
 *     racing with the read) still holds the data the file had when the read
 *     began, which is what a read racing with such a call may return;
 *   - hits are counted in per-thread slots (counter.c), nothing else is
 *     written: not the handle, not the folio.
 * So a hit writes no cache line another thread's hit writes (the claim of
 * issue 10 part 1).  `perf c2c` cannot show it on this machine (a VM: "memory
 * events not supported"), so it rests on the above: the loads of the
 * lockless walk and of the folio's fields, the copy into the caller's
 * buffer, and one plain store into this thread's counter slot, 64 bytes
 * from any other slot.  Past PC_COUNTER_SLOTS counting threads, the
 * further ones share one atomic (counter.h).
 * Anything unusual goes the full way (return 0): a folio not uptodate, not
 * yet marked referenced since reclaim last looked at it (the full path sets
 * the mark), kept for drop-behind, carrying a read-ahead mark, a read that
 * crosses a folio boundary, or a writer changing the index right now.
 *
 * ThreadSanitizer cannot see that the generation check makes a racy copy
 * harmless (and would report the copy from a folio being reused), so under
 * it the hit takes a reference instead (folio_try_get) and copies under it:
 * same decisions, same index walk, one locked instruction pair more.
 *
 * Why a header of inline functions: pc_pread (api.c) tries a hit before
 * anything else, and the hit inlined there, index walk included, is one
 * function with one prologue.  Every instruction between two hits' copies
 * delays the next copy's first loads, which the CPU otherwise overlaps with
 * the previous copy's (docs/results.md, "Hits again", has the figure).
 * read_hit.c has the test hook.
 *
 * count_hit_bytes is here too: read.c and span.c count the hits they
 * serve the same way.
 */
#ifndef PC_READ_HIT_H
#define PC_READ_HIT_H

#include "mem/arena.h"
#include "api/cache.h"
#include "lib/counter.h"
#include "mem/folio.h"
#include "mem/mapping.h"
#include "lib/radix.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <string.h>

/* Count n bytes read from the cache without waiting: in this thread's
 * counter slots, so that hits of different threads share no cache line. */
static inline __attribute__((always_inline)) void count_hit_bytes(struct pc_mapping *m, size_t n)
{
	/* counter_add twice, with this thread's slot looked up once (a hit
	 * does little else, see above). */
	int s = counter_slot_plus1 - 1;
	if (__builtin_expect(s < 0, 0)) {
		counter_add(&m->hits, n);
		counter_add(&m->c->hits, n);
		return;
	}
	_Atomic uint64_t *a = &m->hits.slot[s].v, *b = &m->c->hits.slot[s].v;
	atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + n, memory_order_relaxed);
	atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + n, memory_order_relaxed);
}

/* Inlined whole into its callers whatever the compiler's estimate of its
 * size (see above). */
#define HIT_INLINE static inline __attribute__((always_inline))

#define OPTIMISTIC_COPY (!PC_TSAN)

/*
 * The hit's copy.  On x86-64 it is `rep movsb`, inline, where the CPU
 * makes it fast: the instruction the kernel's copy_to_user uses for its
 * pread on such CPUs, and the one glibc's memcpy ends in here for a 4 KiB
 * copy, without the call, so nothing the hit needs after the copy has to
 * be kept across one.  read_hit_rep_movsb_from (read_hit.c, from CPUID
 * once) is the shortest copy it is used for: any with FSRM (fast short
 * rep movsb), 2 KiB and up with ERMS only (glibc's own threshold here is
 * about that), none without ERMS; shorter copies call memcpy (what it
 * gained in pcbench's hits is in docs/results.md, "Hits again").  Under
 * AddressSanitizer or
 * MemorySanitizer it stays memcpy, whose interceptor checks (or marks)
 * the caller's buffer.
 *
 * Ordering: the loads of `rep movsb` may complete in any order among
 * themselves, but all before a later load (x86's rule for fast string
 * operations), so the flags read after the copy are read after every
 * byte of it, as the acquire fence below says for the compiler.
 */
#if defined(__x86_64__) && !PC_ASAN && !PC_MSAN
#define HIT_REP_MOVSB 1
#else
#define HIT_REP_MOVSB 0
#endif
#if HIT_REP_MOVSB
HIDDEN extern size_t read_hit_rep_movsb_from;
HIT_INLINE void hit_copy(void *dst, const void *src, size_t len)
{
	if (__builtin_expect(len >= read_hit_rep_movsb_from, 1))
		__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(len) : : "memory");
	else
		memcpy(dst, src, len);
}
#else
HIT_INLINE void hit_copy(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}
#endif


/* A hit needs all of these flags and none of the others listed. */
#define HIT_NEEDS (PF_UPTODATE | PF_INDEXED | PF_REFERENCED)
#define HIT_DECLINES (PF_DROPBEHIND | PF_READAHEAD)

/*
 * The offset in f, with flags fl, of byte `off` of a file when f, if it is
 * that file's folio at `off` (hit_is_files), holds all of [off, off+len)
 * readable; else -1.
 *
 * Folios are naturally aligned in the file (mapping_order_for), so f holds
 * `off` iff f->index is `off` rounded down to f's size, and the offset is
 * `off` modulo that size.  Why it is computed so, and not as off - f->index:
 * the copy's address then depends on the order only through the switch
 * below, a branch the CPU predicts (a file's folios mostly share an
 * order), and so it starts loading the folio's data while the descriptor
 * is still on its way from memory, where off - f->index made the whole
 * copy wait for it.  The descriptor's fields are only compared.
 *
 * Values read from a folio being reused may be anything: the result keeps
 * the copy inside the arena whatever they are.
 */
HIT_INLINE ssize_t hit_offset(const struct pc_cache *c, struct pc_folio *f, uint32_t fl, uint64_t off, size_t len)
{
	if ((fl & (HIT_NEEDS | HIT_DECLINES)) != HIT_NEEDS)
		return -1;
	unsigned order = __atomic_load_n(&f->order, __ATOMIC_RELAXED);
	uint64_t mask;
	switch (order) {
#define HIT_ORDER(o)                                                                                          \
	case o:                                                                                               \
		mask = ((uint64_t)PC_PAGE_SIZE << o) - 1;                                                     \
		/* Keeps the compiler from turning the cases back into a load \
		 * or arithmetic on `order`. */                                                               \
		__asm__("" : "+r"(mask));                                                                     \
		break;
		HIT_ORDER(0) HIT_ORDER(1) HIT_ORDER(2) HIT_ORDER(3) HIT_ORDER(4)
		HIT_ORDER(5) HIT_ORDER(6) HIT_ORDER(7) HIT_ORDER(8) HIT_ORDER(9)
#undef HIT_ORDER
	default:
		return -1;
	}
	_Static_assert(PC_MAX_ORDER == 9, "hit_offset has a case per order");
	/* The copy stays in the arena (no test of c->max_order: an order up
	 * to PC_MAX_ORDER that fits is as safe, and hit_is_files declines a
	 * folio that is not the file's). */
	if (arena_pfn(c, f) + (1ull << order) > c->npages)
		return -1;
	uint64_t foff = off & mask;
	if (foff + len > mask + 1)
		return -1;
	return (ssize_t)foff;
}

/* Whether f is m's folio whose byte foff is byte `off` of the file. */
HIT_INLINE bool hit_is_files(struct pc_mapping *m, struct pc_folio *f, uint64_t off, uint64_t foff)
{
	return __atomic_load_n(&f->mapping, __ATOMIC_RELAXED) == m &&
	       __atomic_load_n(&f->index, __ATOMIC_RELAXED) << PC_PAGE_SHIFT == off - foff;
}

/* Tests only (test_mt_hits.c): when set, hits go through read_hit_hooked,
 * which calls it once the index gave a folio and before its flags are read
 * (HIT_HOOK_AFTER_LOOKUP: a folio reused there keeps its new generation
 * through the copy, and only the owner and index checks after the copy
 * see it), and once the hit decided to copy and before it copies
 * (HIT_HOOK_BEFORE_COPY: the window the generation check covers). */
enum { HIT_HOOK_AFTER_LOOKUP, HIT_HOOK_BEFORE_COPY };
HIDDEN extern void (*read_hit_test_hook)(struct pc_mapping *m, uint64_t off, int at);
/* Copies a hit made and then threw away (counted for the tests). */
HIDDEN extern _Atomic long read_hit_discards;

/* A copy that may hold another file's bytes must not stay in the caller's
 * buffer past what the full read path will return. */
HIT_INLINE void hit_discard(void *buf, size_t len)
{
	memset(buf, 0, len);
	atomic_fetch_add_explicit(&read_hit_discards, 1, memory_order_relaxed);
}

/* Folio frees in the whole cache during a copy past which the copy is not
 * trusted: half the generations the flags word counts, so the folio's
 * own generation cannot have come round to its old value. */
#define HIT_FREES_MAX ((uint64_t)1 << (32 - PF_GEN_SHIFT - 1))

HIT_INLINE void hit_hook(bool hooked, struct pc_mapping *m, uint64_t off, int at)
{
	void (*hook)(struct pc_mapping *, uint64_t, int) = read_hit_test_hook;
	if (hooked && hook)
		hook(m, off, at);
}

#if OPTIMISTIC_COPY
HIT_INLINE bool copy_hit(struct pc_cache *c, struct pc_mapping *m, struct pc_folio *f, uint32_t seq, void *buf,
			    uint64_t off, size_t len, bool hooked)
{
	(void)seq;
	/* The frees so far, before the flags: see HIT_FREES_MAX. */
	uint64_t frees = atomic_load_explicit(&c->folio_frees, memory_order_acquire);
	uint32_t fl = atomic_load_explicit(&f->flags, memory_order_acquire);
	ssize_t foff = hit_offset(c, f, fl, off, len);
	if (foff < 0)
		return false;
	hit_hook(hooked, m, off, HIT_HOOK_BEFORE_COPY);
	hit_copy(buf, arena_data(c, f) + foff, len);
	/* The copy's loads complete before the generation is read again.
	 * Whose folio it is is checked only now, once: with the generation
	 * unchanged since before the copy, f was this file's folio at `off`
	 * throughout, and a check before the copy as well only delayed it
	 * (the copy stays in the arena whoever f belongs to, hit_offset).
	 * The 15-bit generation cannot have come round meanwhile: fewer
	 * than HIT_FREES_MAX folios of the whole cache were freed (a free
	 * counts itself before it moves a generation, so the count read
	 * after `now` includes every free whose generation `now` shows). */
	atomic_thread_fence(memory_order_acquire);
	uint32_t now = atomic_load_explicit(&f->flags, memory_order_acquire);
	if (!((now ^ fl) & PF_GEN_MASK) && (now & HIT_NEEDS) == HIT_NEEDS && hit_is_files(m, f, off, (uint64_t)foff) &&
	    atomic_load_explicit(&c->folio_frees, memory_order_relaxed) - frees < HIT_FREES_MAX)
		return true;
	hit_discard(buf, len);
	return false;
}
#else
HIT_INLINE bool copy_hit(struct pc_cache *c, struct pc_mapping *m, struct pc_folio *f, uint32_t seq, void *buf,
		     uint64_t off, size_t len, bool hooked)
{
	if (!folio_try_get(f))
		return false;
	/* Still in the tree, so its identity is settled and ours to read. */
	ssize_t foff = rt_unchanged_since(&m->tree, seq)
			       ? hit_offset(c, f, atomic_load_explicit(&f->flags, memory_order_acquire), off, len)
			       : -1;
	bool ok = foff >= 0 && hit_is_files(m, f, off, (uint64_t)foff);
	if (ok) {
		hit_hook(hooked, m, off, HIT_HOOK_BEFORE_COPY);
		memcpy(buf, arena_data(c, f) + foff, len);
	}
	reclaim_release_folio(c, f);
	return ok;
}
#endif

/* read_hit, with the test hook called where it says when `hooked`. */
HIT_INLINE ssize_t read_hit_at(struct pc_mapping *m, void *buf, size_t len, uint64_t off, bool hooked)
{
	uint64_t size = (uint64_t)atomic_load_explicit(&m->i_size, memory_order_acquire);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	uint32_t seq = rt_read_begin(&m->tree);
	struct pc_folio *f = rt_lookup_lockless(&m->tree, off >> PC_PAGE_SHIFT, seq);
	if (!f || f == RT_RETRY)
		return 0;
	hit_hook(hooked, m, off, HIT_HOOK_AFTER_LOOKUP);
	struct pc_cache *c = m->c;
	if (!copy_hit(c, m, f, seq, buf, off, len, hooked))
		return 0;
	count_hit_bytes(m, len);
	return (ssize_t)len;
}

/* read_hit_at with the test hook (read_hit.c): out of line, so that the
 * hit itself only tests whether a hook is set. */
HIDDEN ssize_t read_hit_hooked(struct pc_mapping *m, void *buf, size_t len, uint64_t off);

/* Serve [off, off+len) from one cached folio without a lock: the bytes
 * copied, or 0 when the full read path must do it. */
HIT_INLINE ssize_t read_hit(struct pc_mapping *m, void *buf, size_t len, uint64_t off)
{
	if (__builtin_expect(read_hit_test_hook != NULL, 0))
		return read_hit_hooked(m, buf, len, off);
	return read_hit_at(m, buf, len, off, false);
}

#endif
