/*
 * written.c - which parts of the backing file past its size at open our
 * own writes may have put data in.
 *
 * A write that covers a block only partly must know whether the rest of
 * the block holds data on the device (then it is read or merged later) or
 * is a hole (then it is zeros and nothing is read).  Past the end of the
 * written data (data_end) the answer is free.  Below it the file system
 * knows (lseek SEEK_DATA), but asking costs a system call that takes the
 * inode lock, which ext4 and XFS also hold exclusively across direct
 * writes that allocate: with many writers filling a new file out of order
 * (interleaved records), every partial block below data_end queued behind
 * the device, while holding its folio lock, and the writers drifted far
 * apart.
 *
 * We know the answer ourselves for everything past the size the file had
 * when we opened it: a writable mapping holds the file's write lock, so the
 * only data there is what we sent to the device.  So we keep the byte
 * ranges we sent (a sorted array of disjoint ranges, merged as they touch;
 * interleaved writers leave gaps only as wide as their drift).  Before the
 * base, and when too many ranges would be needed, we ask the file system:
 * being unsure only costs that call, never correctness.
 *
 * The array is the caller's memory (written.h): when a range needs a slot
 * and none is left, written_add says how many it wants, and the caller
 * hands a larger array in (written_grow) and adds again.
 */
#include "lib/written.h"

#include "lib/util.h"

#include <string.h>

void written_init(struct pc_written *w, uint64_t base_end, const struct pc_shlock_ctx *cx)
{
	memset(w, 0, sizeof(*w));
	shmutex_init(&w->lock);
	w->cx = cx;
	w->base_end = base_end;
}

struct pc_range *written_destroy(struct pc_written *w)
{
	struct pc_range *r = w->r;
	w->r = NULL;
	w->n = w->cap = 0;
	return r;
}

/* Forget all ranges: [0, base_end) is unknown again (the file changed). */
void written_reset(struct pc_written *w, uint64_t base_end)
{
	shmutex_lock_live(&w->lock, w->cx);
	w->n = 0;
	w->base_end = base_end;
	shmutex_unlock(&w->lock, w->cx);
}

/* Index of the first range ending after pos (w->n if none). */
static size_t first_ending_after(const struct pc_written *w, uint64_t pos)
{
	size_t lo = 0, hi = w->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->r[mid].end <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Too many ranges: everything up to the last one becomes "ask the file
 * system", which is always correct. */
static void give_up_tracking(struct pc_written *w)
{
	if (w->n)
		w->base_end = u64_max(w->base_end, w->r[w->n - 1].end);
	w->n = 0;
}

struct pc_range *written_grow(struct pc_written *w, struct pc_range *r, size_t cap)
{
	shmutex_lock_live(&w->lock, w->cx);
	struct pc_range *old = r;
	if (cap > w->cap) {
		if (w->n)
			memcpy(r, w->r, w->n * sizeof(*r));
		old = w->r;
		w->r = r;
		w->cap = cap;
	}
	shmutex_unlock(&w->lock, w->cx);
	return old;
}

void written_give_up(struct pc_written *w, uint64_t end)
{
	shmutex_lock_live(&w->lock, w->cx);
	give_up_tracking(w);
	w->base_end = u64_max(w->base_end, end);
	shmutex_unlock(&w->lock, w->cx);
}

/*
 * Data is about to be sent to [start, end): called before the device write
 * is issued, so that no one who looks later takes it for a hole.
 */
size_t written_add(struct pc_written *w, uint64_t start, uint64_t end)
{
	size_t want = 0;
	shmutex_lock_live(&w->lock, w->cx);
	start = u64_max(start, w->base_end);
	if (start >= end) {
		shmutex_unlock(&w->lock, w->cx);
		return 0;
	}
	/* Ranges that overlap or touch [start, end) merge with it. */
	size_t i = first_ending_after(w, start == 0 ? 0 : start - 1);
	size_t j = i;
	while (j < w->n && w->r[j].start <= end)
		j++;
	if (j > i) {
		start = u64_min(start, w->r[i].start);
		end = u64_max(end, w->r[j - 1].end);
		w->r[i] = (struct pc_range){ start, end };
		memmove(&w->r[i + 1], &w->r[j], (w->n - j) * sizeof(*w->r));
		w->n -= j - i - 1;
	} else if (w->n < w->cap) {
		memmove(&w->r[i + 1], &w->r[i], (w->n - i) * sizeof(*w->r));
		w->r[i] = (struct pc_range){ start, end };
		w->n++;
	} else if (w->cap < WRITTEN_MAX_RANGES) {
		/* The caller grows the array, from 4 ranges (64 bytes, the
		 * heap's smallest block: most files need one range), doubling. */
		want = w->cap ? w->cap * 2 : 4;
	} else {
		give_up_tracking(w);
		w->base_end = u64_max(w->base_end, end);
	}
	shmutex_unlock(&w->lock, w->cx);
	return want;
}

/* The backing file was cut to size: nothing of ours lies past it. */
void written_truncate(struct pc_written *w, uint64_t size)
{
	shmutex_lock_live(&w->lock, w->cx);
	w->base_end = u64_min(w->base_end, size);
	size_t i = first_ending_after(w, size);
	if (i < w->n && w->r[i].start < size)
		w->r[i++].end = size;
	w->n = i;
	shmutex_unlock(&w->lock, w->cx);
}

/* Is [start, end) known to hold no data of ours and lie past the base? */
bool written_known_hole(struct pc_written *w, uint64_t start, uint64_t end)
{
	shmutex_lock_live(&w->lock, w->cx);
	bool hole = start >= w->base_end;
	if (hole) {
		size_t i = first_ending_after(w, start);
		hole = i == w->n || w->r[i].start >= end;
	}
	shmutex_unlock(&w->lock, w->cx);
	return hole;
}
