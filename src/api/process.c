/*
 * process.c - a cache belongs to the process that created it.
 *
 * After fork() the child has a copy of the cache's memory but none of its
 * threads: no flusher and no completion thread, so nothing would ever clean
 * the dirty data a child's writer waits for, and a child that wrote its copy
 * of the parent's dirty data would write the same file as the parent, from
 * a second, diverging copy.  The kernel's page cache is shared by parent and
 * child; ours cannot be without a shared arena.  So the child may not use an
 * inherited cache at all: every call on it fails at once with EPERM, and
 * pc_close / pc_cache_destroy only free the child's copy of the memory.
 *
 * Detection is one relaxed load and compare per call: a pthread_atfork
 * child handler bumps a process generation, and a cache remembers the
 * generation it was created in.  The handler only increments a counter (no
 * prepare or parent handler, no lock taken), so a fork while other threads
 * hold cache locks cannot deadlock, and the parent is not touched at all.
 *
 * The child's copy of a lock may be held by a parent thread that does not
 * exist in the child, so freeing the copy takes no lock, waits for nothing
 * and never unlocks the parent's OFD locks (they belong to the open file
 * descriptions the two processes share), nor touches the shared io_uring
 * rings (the child's mappings of them go at its exit or exec).  The folio arena is
 * MADV_DONTFORK (arena.c): the child never gets it, so a fork copies no
 * page tables of a large cache, and there is nothing of it to unmap here.
 * Nor is the thread that faults the arena in the child's (a fork copies
 * only the calling thread): it is never stopped or joined here, and it
 * only ever touched the arena and atomics, so its state needs no care.
 */
#include "api/process.h"
#include "lib/forkgen.h"

#include "mem/arena.h"
#include "api/cache.h"
#include "lib/counter.h"
#include "api/files.h"
#include "api/handle.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_exit_caches_in_child(void);

static void on_fork_child(void)
{
	forkgen_child();
	forget_exit_caches_in_child();
	arena_forget_parent_caches();
	counter_fork_child();
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, on_fork_child);
}

void process_setup(void)
{
	pthread_once(&atfork_once, register_atfork);
	counter_init(); /* here, not at a first count that could follow a fork */
}

static void free_handle_list(struct pc_file *h, bool closed_list)
{
	while (h) {
		struct pc_file *next = closed_list ? h->next_closed : h->open_next;
		free(h);
		h = next;
	}
}

/*
 * A child's copy of a cache is its process part only (the segment is
 * MADV_DONTFORK, mem/segment.h): the handles, which are the child's own
 * memory, are freed; what the cache's structures hold (mappings, folios,
 * domains, index nodes) is not mapped here and was never the child's to
 * free.  Domains, which still come from malloc (docs/shared.md, section
 * 13), stay as a little unreachable memory of the child's, never a
 * double free.  Descriptors are not
 * closed: the child may have closed them already and opened others under
 * the same numbers (a daemon does), and they go at exit or exec anyway
 * (O_CLOEXEC).  The open file descriptions, and the OFD locks on them,
 * stay the parent's.  A handle list is consistent in the child only if no
 * parent thread was changing it at fork; it is changed under files_lock,
 * which is in the segment and cannot be asked, so the lists are walked
 * as they are: a handle being linked or unlinked at fork is at worst
 * left unfreed.
 */
void cache_free_inherited(struct pc_cache *c)
{
	free_handle_list(cache_proc(c)->open_head, false);
	free_handle_list(cache_proc(c)->closed_head, true);
}

/* ------------------------------------------------------ flush at exit */

/*
 * PC_CFG_FLUSH_AT_EXIT: a process that ends with exit(3) without
 * pc_cache_destroy would lose the dirty data of its files (closed ones
 * too: close does not wait).  The kernel's page cache would have kept it;
 * this writes it back from an atexit handler.  The caches are listed here
 * (a process has few); the handler writes back each one this process owns
 * and leaves the rest to pc_cache_destroy, which may still run after it.
 */
static pthread_mutex_t exit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_cache **exit_caches;
static unsigned exit_n, exit_cap;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* In the child (one thread, in the atfork handler): the inherited caches
 * are not the child's to write, and a parent thread may have held the
 * lock at fork. */
static void forget_exit_caches_in_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	exit_lock = fresh;
	exit_n = 0;
}

static void flush_at_exit(void)
{
	pthread_mutex_lock(&exit_lock);
	for (unsigned i = 0; i < exit_n; i++) {
		struct pc_cache *c = exit_caches[i];
		if (cache_inherited(c))
			continue;
		/* An error is said, and kept for a pc_cache_destroy that an
		 * exit handler may still call (the write-back took it). */
		int err = files_writeback_all(c);
		if (err) {
			fprintf(stderr, "pagecache: write-back at exit failed: %s\n", strerror(-err));
			atomic_store(&c->orphan_error, err);
		}
	}
	pthread_mutex_unlock(&exit_lock);
}

static void register_exit_handler(void)
{
	atexit(flush_at_exit);
}

int process_flush_at_exit(struct pc_cache *c)
{
	pthread_once(&exit_once, register_exit_handler);
	pthread_mutex_lock(&exit_lock);
	int err = 0;
	if (exit_n == exit_cap) {
		unsigned cap = exit_cap ? exit_cap * 2 : 4;
		struct pc_cache **v = realloc(exit_caches, cap * sizeof(*v));
		if (v) {
			exit_caches = v;
			exit_cap = cap;
		} else {
			err = -ENOMEM;
		}
	}
	if (!err)
		exit_caches[exit_n++] = c;
	pthread_mutex_unlock(&exit_lock);
	return err;
}

void process_forget_at_exit(struct pc_cache *c)
{
	pthread_mutex_lock(&exit_lock);
	for (unsigned i = 0; i < exit_n; i++)
		if (exit_caches[i] == c) {
			exit_caches[i] = exit_caches[--exit_n];
			break;
		}
	if (!exit_n) {
		free(exit_caches);
		exit_caches = NULL;
		exit_cap = 0;
	}
	pthread_mutex_unlock(&exit_lock);
}
