/*
 * closed.c - files after their last close.
 *
 * pc_close does not wait for write-back (unless PC_CFG_CLOSE_TO_OPEN): a
 * closed file's dirty data stays cached and the flusher writes it like any
 * other (by age or past the background threshold), as the kernel's close
 * leaves dirty pages to its flusher; writing it at once would make every
 * close of a small file cost a device write and the settling after it,
 * competing with the program for the CPU.  Only when many closed files
 * hold descriptors (half of max_closed_files) does the flusher write the
 * closed files first, oldest first.  Until then the
 * file keeps its backing descriptor and its OFD lock (another process must
 * not read the backing file while our data is not in it).  Once clean, it
 * is *settled*: the backing file gets its exact size, space reserved past
 * it is given back, its attributes are saved (a reopen compares them, to
 * notice changes by others), and the lock is released.
 *
 * A settled file keeps its descriptor, so that a reopen needs no open(2),
 * on a list of closed files, oldest first.  Past max_closed_files the
 * oldest gives its descriptor up: its clean data stays cached, and a
 * reopen opens the file again (the inode may have been reused meanwhile:
 * the saved attributes tell).  So the descriptors held are those of open
 * files plus at most max_closed_files settled ones plus the closed files
 * still to be written, of which there are at most as many before
 * pc_close starts waiting for its own write-back (closed_must_wait).
 *
 * A file unlinked while closed is noticed by a sweep every second: its
 * data is dropped, dirty too, and its descriptor closed, which frees its
 * space.  So is a mapping that gave its descriptor up and whose data has
 * all been evicted.
 *
 * Everything here runs under files_lock, except settling, which does I/O
 * under inval_lock and size_lock and so runs outside files_lock.
 */
#include "api/closed.h"

#include "wb/backing.h"
#include "api/cache.h"
#include "wb/dirty.h"
#include "lib/errseq.h"
#include "wb/failing.h"
#include "api/file.h"
#include "api/files.h"
#include "wb/flusher.h"
#include "io/fs_sync.h"
#include "mem/file_slots.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SWEEP_EVERY_MS 1000u

/* ------------------------------------------------------------- lists */

/* Oldest first: the closed files written first are at the head, where
 * the flusher looks for the ones it can settle. */
static void list_push(struct pc_mapping **head, struct pc_mapping **tail, struct pc_mapping *m)
{
	m->closed_next = NULL;
	m->closed_prev = *tail;
	if (*tail)
		(*tail)->closed_next = m;
	else
		*head = m;
	*tail = m;
}

static void list_del(struct pc_mapping **head, struct pc_mapping **tail, struct pc_mapping *m)
{
	if (m->closed_prev)
		m->closed_prev->closed_next = m->closed_next;
	else
		*head = m->closed_next;
	if (m->closed_next)
		m->closed_next->closed_prev = m->closed_prev;
	else
		*tail = m->closed_prev;
	m->closed_prev = m->closed_next = NULL;
}

static void dirty_list_del(struct pc_cache *c, struct pc_mapping *m)
{
	list_del(&c->closed_dirty_head, &c->closed_dirty_tail, m);
	atomic_store(&m->closed_dirty, false);
	/* Written under files_lock, read without it by the flusher. */
	__atomic_sub_fetch(&c->nr_closed_dirty, 1, __ATOMIC_RELAXED);
}

static void files_list_del(struct pc_cache *c, struct pc_mapping *m)
{
	list_del(&c->closed_files_head, &c->closed_files_tail, m);
	m->on_closed_list = false;
	c->nr_closed_fds--;
}

/* ------------------------------------------------------ descriptors */

static bool closed_file_empty(struct pc_mapping *m)
{
	tree_lock_shared(m);
	bool empty = m->tree.nr_heads == 0;
	tree_unlock(m);
	return empty;
}

/* Whether a closed mapping without its descriptor (or giving it up) may be
 * forgotten: nothing of it cached, and no write error of it that no handle
 * reported (the next handle of the file must see that: it finds this
 * mapping again). */
static bool closed_file_forgettable(struct pc_mapping *m)
{
	return closed_file_empty(m) && !errseq_unseen(&m->wb_err);
}

/* Give the descriptors up; a forgettable mapping goes too. */
static void release_fd(struct pc_cache *c, struct pc_mapping *m)
{
	/* Where no syncfs of the file system will hear of it at destroy,
	 * the end that went through the kernel is synced first: a closed
	 * descriptor could neither sync it nor hear its error. */
	fs_sync_before_close(m);
	/* (In a shared cache, only this process's hold goes: others that
	 * hold the file keep it known.) */
	bool others = cache_shared(c) && file_held_by_others(m);
	if (closed_file_forgettable(m) && !others) {
		files_hash_remove(c, m);
		if (cache_shared(c))
			file_unhold(m);
		mapping_put(m); /* the hash table's: clean and empty, no wait */
		return;
	}
	if (cache_shared(c))
		file_unhold(m);
	else
		file_descriptors_close(m);
}

/* A shared cache's settled file whose descriptor is another process's:
 * this one cannot give it up (its own closed files it can). */
static bool others_fd(struct pc_cache *c, struct pc_mapping *m)
{
	return cache_shared(c) && !file_held_here(m);
}

/* Give a settled file's descriptor up (files_lock held).  In a shared
 * cache another process may hold it too: then only this process's hold
 * goes, and the file stays listed, for its other holders to bound. */
static void give_up_fd(struct pc_cache *c, struct pc_mapping *m)
{
	if (cache_shared(c) && file_held_by_others(m)) {
		file_unhold(m);
		return;
	}
	files_list_del(c, m);
	release_fd(c, m);
}

/* Settled files whose descriptors this process keeps: all of them, in a
 * shared cache those it holds. */
static unsigned own_closed_fds(struct pc_cache *c)
{
	if (!cache_shared(c))
		return c->nr_closed_fds;
	unsigned n = 0;
	for (struct pc_mapping *m = c->closed_files_head; m; m = m->closed_next)
		n += file_held_here(m);
	return n;
}

/* Too many settled files keep descriptors: the oldest give theirs up. */
static void enforce_fd_bound(struct pc_cache *c)
{
	unsigned max = cache_proc(c)->max_closed_files;
	if (c->nr_closed_fds <= max)
		return; /* (a shared cache's count is all processes') */
	unsigned own = own_closed_fds(c);
	for (struct pc_mapping *m = c->closed_files_head, *next; m && own > max; m = next) {
		next = m->closed_next;
		if (!others_fd(c, m)) {
			give_up_fd(c, m);
			own--;
		}
	}
}

/* Clean and left alone: keep the descriptor for a reopen, unlocked. */
static void keep_settled(struct pc_cache *c, struct pc_mapping *m)
{
	ofd_lock(mproc(m)->fd, F_UNLCK);
	m->on_closed_list = true;
	list_push(&c->closed_files_head, &c->closed_files_tail, m);
	c->nr_closed_fds++;
	enforce_fd_bound(c);
}

/* ------------------------------------------------------------ close */

static bool needs_settling(struct pc_mapping *m)
{
	return atomic_load(&m->changed) || atomic_load(&m->nr_dirty) > 0 || atomic_load(&m->wb_inflight) > 0 ||
	       atomic_load(&m->disk_size) != atomic_load(&m->i_size) ||
	       atomic_load(&m->reserve_end) > (int64_t)round_up((uint64_t)atomic_load(&m->i_size), m->block_size);
}

static bool closed_file_clean(struct pc_mapping *m)
{
	return atomic_load(&m->nr_dirty) <= 0 && atomic_load(&m->wb_inflight) == 0;
}

bool closed_add(struct pc_cache *c, struct pc_mapping *m)
{
	assert_held(&c->files_lock);
	if (!needs_settling(m)) {
		keep_settled(c, m);
		return false;
	}
	atomic_store(&m->closed_dirty, true);
	list_push(&c->closed_dirty_head, &c->closed_dirty_tail, m);
	__atomic_add_fetch(&c->nr_closed_dirty, 1, __ATOMIC_RELAXED);
	if (!closed_file_clean(m)) {
		if (closed_fd_pressure(c))
			flusher_kick(m->dom);
		return false;
	}
	return true; /* clean already: to be settled now (file_release says by whom) */
}

void closed_release_fds(struct pc_cache *c)
{
	files_lock(c);
	for (struct pc_mapping *m = c->closed_files_head, *next; m; m = next) {
		next = m->closed_next;
		if (!others_fd(c, m))
			give_up_fd(c, m);
	}
	files_unlock(c);
}

void closed_reopened(struct pc_cache *c, struct pc_mapping *m)
{
	assert_held(&c->files_lock);
	if (atomic_load(&m->closed_dirty))
		dirty_list_del(c, m);
	if (m->on_closed_list)
		files_list_del(c, m);
}

bool closed_fd_pressure(const struct pc_cache *c)
{
	return __atomic_load_n(&c->nr_closed_dirty, __ATOMIC_RELAXED) >= cache_proc(c)->max_closed_files / 2;
}

bool closed_must_wait(struct pc_cache *c)
{
	return (c->cfg.flags & PC_CFG_CLOSE_TO_OPEN) ||
	       __atomic_load_n(&c->nr_closed_dirty, __ATOMIC_RELAXED) >= cache_proc(c)->max_closed_files;
}

/* ----------------------------------------------------------- settle */

#define SETTLE_RETRY_MS 1000u

/* Still closed, written, and not settled by someone else?  Returns its
 * descriptor then, else -1. */
static int still_to_settle(struct pc_cache *c, struct pc_mapping *m)
{
	files_lock(c);
	bool yes = atomic_load(&m->closed_dirty) && m->nhandles == 0 && closed_file_clean(m);
	int fd = yes ? mproc(m)->fd : -1;
	files_unlock(c);
	return fd;
}

void closed_settle(struct pc_mapping *m)
{
	struct pc_cache *c = m->c;
	int fd = still_to_settle(c, m);
	if (fd < 0)
		return;
	/* Exact size and reservations first, outside files_lock (they do I/O
	 * under inval_lock and size_lock).  A failure waits
	 * a while before the next try (the flusher would spin on it). */
	if (backing_sync_size(m) != 0) {
		atomic_store(&m->last_error_ms, now_ms());
		return;
	}
	backing_release_reserve(m);
	/* The attributes to save are read before files_lock, which every
	 * open and close takes: the file is locked and closed, so only a
	 * reopen can change it meanwhile, and a reopen takes it off the list
	 * (checked again below).  A descriptor replaced meanwhile (a reopen
	 * for writing) is not the one asked: the next round settles it. */
	struct stat st;
	bool known = fstat(fd, &st) == 0;
	if (known && (st.st_dev != m->dev || st.st_ino != m->ino))
		return; /* the number is another file's now: not ours to judge */
	files_lock(c);
	if (atomic_load(&m->closed_dirty) && m->nhandles == 0 && closed_file_clean(m) && mproc(m)->fd == fd) {
		dirty_list_del(c, m);
		/* (A shared cache's file that others hold is theirs to drop:
		 * it stays known, settled, until the last holder settles it.) */
		if (known && st.st_nlink == 0 && !(cache_shared(c) && file_held_by_others(m))) {
			files_hash_remove(c, m);
			if (cache_shared(c))
				file_unhold(m); /* the caller's and the index's references remain */
			files_unlock(c);
			file_discard_all(m);
			dirty_forget_file(m);
			mapping_put(m); /* the hash table's */
			return;
		}
		if (known)
			file_save_attrs(m, &st);
		else
			file_discard_all(m); /* cannot be compared later: keep nothing */
		keep_settled(c, m);
	}
	files_unlock(c);
}

/* Closed files whose data is written now, with references.  A batch
 * stops after SETTLE_LOOK files still being written: the list is oldest
 * first, so the rest are mostly younger still, and a long list must not be
 * walked under files_lock for every batch. */
#define SETTLE_LOOK 64u
static unsigned collect_clean_closed(struct pc_cache *c, struct pc_mapping **v, unsigned max)
{
	unsigned n = 0, unwritten = 0;
	files_lock(c);
	uint64_t now = now_ms();
	for (struct pc_mapping *m = c->closed_dirty_head; m && n < max && unwritten < SETTLE_LOOK;
	     m = m->closed_next) {
		if (!closed_file_clean(m))
			unwritten++;
		else if (others_fd(c, m))
			continue; /* its holder settles it */
		else if (now - atomic_load(&m->last_error_ms) >= SETTLE_RETRY_MS) {
			atomic_fetch_add(&m->refs, 1);
			v[n++] = m;
		}
	}
	files_unlock(c);
	return n;
}

static void closed_settle_written(struct pc_cache *c)
{
	struct pc_mapping *v[64];
	unsigned n;
	do {
		n = collect_clean_closed(c, v, 64);
		for (unsigned i = 0; i < n; i++) {
			closed_settle(v[i]);
			mapping_put(v[i]);
		}
	} while (n == 64);
}

/* ------------------------------------------------------------ sweep */

/* A shared cache's file this process holds with none of its handles
 * open: open by others, or closed and settled by another process. */
static bool idle_hold(struct pc_cache *c, struct pc_mapping *m)
{
	return cache_shared(c) && file_held_here(m) && mproc(m)->nhandles == 0;
}

/* Let go of an idle hold that another process shares (files_lock held,
 * and this process's round_lock exclusively: none of its flushers is
 * between choosing the file and starting its request): one holder is
 * enough for the file's description and its lock, and every process that
 * keeps one holds a descriptor for nothing.  Not while write-back of the
 * file is in flight (the descriptor may be a request's); the last holder
 * keeps it, as a private cache keeps a closed file's. */
static void let_go_if_others_hold(struct pc_cache *c, struct pc_mapping *m)
{
	if (idle_hold(c, m) && file_held_by_others(m) && atomic_load(&m->wb_inflight) == 0 &&
	    !atomic_load(&m->closed_dirty))
		file_unhold(m);
}

/* The closed mappings of the buckets from *bucket on, up to max, with
 * references and the descriptors they hold now.  Taken in batches, so
 * that files_lock, which every open and close takes, is held only for a
 * walk of a few chains, not for a stat of every closed file. */
static unsigned collect_closed(struct pc_cache *c, unsigned *bucket, struct pc_mapping **v, int *fds, unsigned max)
{
	unsigned n = 0;
	files_lock(c);
	unsigned i;
	for (i = *bucket; i < c->file_hash_size && n < max; i++) {
		unsigned in_chain = 0;
		for (struct pc_mapping *m = c->file_hash[i]; m; m = m->hash_next)
			in_chain += m->nhandles == 0 || idle_hold(c, m);
		if (n + in_chain > max && n > 0)
			break; /* the whole chain in the next batch */
		for (struct pc_mapping *m = c->file_hash[i]; m && n < max; m = m->hash_next) {
			if (m->nhandles != 0 && !idle_hold(c, m))
				continue;
			atomic_fetch_add(&m->refs, 1);
			fds[n] = mproc(m)->fd;
			v[n++] = m;
		}
	}
	*bucket = i;
	files_unlock(c);
	return n;
}

/* Unlinked while closed: nobody can ever read it again.  Asked outside
 * files_lock, by a descriptor number the mapping may have given up
 * meanwhile: one of another file now answers for that file, not m's. */
static bool unlinked(const struct pc_mapping *m, int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == m->dev && st.st_ino == m->ino && st.st_nlink == 0;
}

/* Take a gone mapping out of the lists and the index (files_lock held):
 * still closed, still with the descriptor that was asked (one given up
 * meanwhile is judged at the next sweep), and still indexed (nobody
 * settled it away meanwhile).  True: the index's reference is the
 * caller's now. */
static bool take_gone(struct pc_cache *c, struct pc_mapping *m, int fd, bool fd_unlinked)
{
	assert_held(&c->files_lock);
	if (m->nhandles != 0 || mproc(m)->fd != fd || files_hash_find(c, m->dev, m->ino) != m)
		return false;
	if (cache_shared(c) && file_held_by_others(m))
		return false; /* theirs to judge: they hold it */
	if (fd >= 0 ? !fd_unlinked : !closed_file_forgettable(m))
		return false;
	if (atomic_load(&m->closed_dirty))
		dirty_list_del(c, m);
	if (m->on_closed_list)
		files_list_del(c, m);
	files_hash_remove(c, m);
	if (cache_shared(c))
		file_unhold(m); /* the caller's and the index's references remain */
	return true;
}

static void closed_sweep(struct pc_cache *c)
{
	uint64_t now = now_ms();
	uint64_t *at = cache_shared(c) ? &cache_proc(c)->last_sweep_ms : &c->last_sweep_ms;
	uint64_t last = __atomic_load_n(at, __ATOMIC_RELAXED);
	if (now - last < SWEEP_EVERY_MS ||
	    !__atomic_compare_exchange_n(at, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	struct pc_mapping *v[64];
	int fds[64];
	bool gone[64];
	unsigned n, bucket = 0;
	while ((n = collect_closed(c, &bucket, v, fds, 64)) > 0) {
		for (unsigned i = 0; i < n; i++)
			gone[i] = unlinked(v[i], fds[i]); /* outside files_lock */
		/* No flusher round of this process runs meanwhile (one that
		 * passed flusher_may_write would use the descriptor). */
		bool may_let_go = cache_shared(c) && pthread_rwlock_trywrlock(&cache_proc(c)->round_lock) == 0;
		files_lock(c);
		for (unsigned i = 0; i < n; i++) {
			gone[i] = take_gone(c, v[i], fds[i], gone[i]);
			if (!gone[i] && may_let_go)
				let_go_if_others_hold(c, v[i]);
		}
		files_unlock(c);
		if (may_let_go)
			pthread_rwlock_unlock(&cache_proc(c)->round_lock);
		for (unsigned i = 0; i < n; i++) {
			if (gone[i]) {
				file_discard_all(v[i]);
				dirty_forget_file(v[i]);
				mapping_put(v[i]); /* the index's */
			}
			mapping_put(v[i]); /* ours */
		}
	}
}

static void closed_after_round(struct pc_cache *c)
{
	closed_settle_written(c);
	closed_sweep(c);
}

void closed_layer_init(struct pc_cache *c)
{
	cache_proc(c)->closed_fd_pressure = closed_fd_pressure;
	cache_proc(c)->closed_after_round = closed_after_round;
}
