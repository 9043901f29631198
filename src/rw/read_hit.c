/*
 * read_hit.c - what the cache hit keeps out of line: its test hook, the
 * count of copies it threw away, and the shortest copy it makes with
 * `rep movsb` on this CPU.  The hit itself is inline in read_hit.h (see
 * there) so that pc_pread serves a hit as one function.
 */
#include "rw/read_hit.h"

#include "mem/mapping.h"
#include "lib/util.h"

#if HIT_REP_MOVSB
#include <cpuid.h>
#endif

HIDDEN void (*read_hit_test_hook)(struct pc_mapping *m, uint64_t off, int at);
HIDDEN _Atomic long read_hit_discards;

ssize_t read_hit_hooked(struct pc_mapping *m, void *buf, size_t len, uint64_t off)
{
	return read_hit_at(m, buf, len, off, true);
}

#if HIT_REP_MOVSB
/* Until the CPU is known: never (memcpy). */
HIDDEN size_t read_hit_rep_movsb_from = SIZE_MAX;

/* CPUID leaf 7: EBX bit 9 ERMS (enhanced rep movsb), EDX bit 4 FSRM (fast
 * short rep movsb).  At load time, before any cache exists. */
__attribute__((constructor)) static void read_hit_check_cpu(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	if (d & (1u << 4))
		read_hit_rep_movsb_from = 0;
	else if (b & (1u << 9))
		read_hit_rep_movsb_from = 2048;
}
#endif
