/*
 * shared.c - what a process does as a member of a shared cache
 * (shared.h): the attacher's check of the creator's configuration, the
 * server that hands its descriptors of the cache's files to the other
 * members, joining, and leaving.
 *
 * Who owns what (docs/shared.md, sections 17 and 19): everything that
 * describes cached data is the cache's, in the segment; a file's one
 * open file description is held by the members that hold a descriptor
 * of it (m->holders), and its OFD lock with it, so that the file stays
 * locked against every other cache while any member holds it.  Dirty
 * data always has a holder: a member writes back the files it alone
 * holds before it lets go of them, and each member's flushers write the
 * files it holds.
 */
#include "api/shared.h"

#include "api/closed.h"
#include "api/files.h"
#include "io/fs_sync.h"
#include "lib/fdpass.h"
#include "lib/slots.h"
#include "mem/file_slots.h"
#include "mem/mapping.h"
#include "mem/segment.h"
#include "wb/flusher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a member waits for another's server to hand a descriptor
 * over: it answers from one thread that takes no lock but its own
 * process's fd_lock, so this is only a bound for a process that stopped
 * (SIGSTOP, a debugger). */
#define FDPASS_WAIT_MS 2000u

/* ------------------------------------------------------ configuration */

/* The settings an attacher may leave to the creator, and the value that
 * says "left": pc_config_init's, or 0.  (max_closed_files is each
 * process's own: it bounds the process's descriptors.) */
#define SHARED_CONFIG_FIELDS(X)                                                                    \
	X(memory_limit) X(max_folio_size) X(block_size) X(dirty_background_bytes) X(dirty_limit_bytes) \
	X(dirty_expire_ms) X(writeback_threads) X(queue_depth) X(max_io_bytes) X(readahead_max_bytes)  \
	X(uncached_kick_bytes) X(edge_expire_ms) X(edge_budget_bytes) X(flags)

int shared_config_check(const void *theirs_bytes, size_t len, void *arg)
{
	const struct shared_config_ask *ask = arg;
	if (len != sizeof(struct pc_config))
		return -EPROTO;
	struct pc_config theirs, dflt;
	memcpy(&theirs, theirs_bytes, sizeof(theirs));
	pc_config_init(&dflt);
#define CHECK_FIELD(f)                                                                \
	if (ask->user->f != dflt.f && ask->user->f != 0 && ask->mine->f != theirs.f) \
		return -EINVAL;
	SHARED_CONFIG_FIELDS(CHECK_FIELD)
#undef CHECK_FIELD
	return 0;
}

/* ------------------------------------------------- descriptor servers */

/* The abstract socket of the member in `slot`: the cache's name hashed
 * (a name may be longer than a socket's), with the user's id. */
static void server_name(const struct pc_cache *c, unsigned slot, char *out, size_t n)
{
	snprintf(out, n, "pagecache-%u-%016llx-%u", (unsigned)geteuid(), (unsigned long long)hash_name(c->name), slot);
}

static int serve_descriptor(void *arg, uint64_t key, uint64_t gen)
{
	if (key > UINT32_MAX || gen > UINT32_MAX)
		return -ENOENT;
	return file_fd_dup(arg, (uint32_t)key, (uint32_t)gen);
}

int shared_proc_start(struct pc_cache *c)
{
	struct pc_proc *p = cache_proc(c);
	int slot = segment_slot(p->seg);
	PC_ASSERT(slot >= 0 && slot < 64);
	p->self_bit = 1ull << slot;
	char name[FDPASS_NAME_MAX + 1];
	server_name(c, (unsigned)slot, name, sizeof(name));
	return fdpass_serve(name, serve_descriptor, c, &p->fdpass);
}

void shared_proc_stop(struct pc_cache *c)
{
	struct pc_proc *p = cache_proc(c);
	if (p->fdpass)
		fdpass_stop(p->fdpass);
	p->fdpass = NULL;
}

int shared_fd_from_holders(struct pc_mapping *m)
{
	struct pc_cache *c = m->c;
	assert_held(&c->files_lock);
	uint64_t others = atomic_load(&m->holders) & ~cache_proc(c)->self_bit;
	int err = -EBUSY;
	while (others) {
		unsigned slot = (unsigned)__builtin_ctzll(others);
		others &= others - 1;
		char name[FDPASS_NAME_MAX + 1];
		server_name(c, slot, name, sizeof(name));
		int fd = fdpass_request(name, m->slot, m->gen, FDPASS_WAIT_MS);
		if (fd >= 0)
			return fd;
		if (fd == -EMFILE || fd == -ENFILE)
			err = fd; /* ours to report: no room for it here */
	}
	return err;
}

/* ------------------------------------------------------------- joining */

int shared_join(struct pc_cache *c, unsigned wait_ms)
{
	uint64_t deadline = now_ms() + wait_ms;
	for (;;) {
		uint32_t r = atomic_load_explicit(&c->ready, memory_order_acquire);
		if (r)
			break;
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT; /* its creator died making it: section 5 */
		shfutex_wait_ms(&c->ready, 0, deadline - now);
	}
	cache_lock(c, &c->members_lock, LOCK_MEMBERS);
	if (c->closing) {
		cache_unlock(c, &c->members_lock);
		return SHARED_CLOSING;
	}
	return 0;
}

void shared_member_add(struct pc_cache *c)
{
	c->members |= 1ull << segment_slot(cache_proc(c)->seg);
}

/* ------------------------------------------------------------- leaving */

/* Does a member other than this process run (members_lock held)?  The
 * members are those that joined and have not left (a leaver's slot stays
 * LIVE until it detaches, after members_lock), less the dead. */
static bool others_alive(struct pc_cache *c)
{
	struct pc_segment *seg = cache_proc(c)->seg;
	uint64_t others = c->members & ~cache_proc(c)->self_bit;
	while (others) {
		unsigned i = (unsigned)__builtin_ctzll(others);
		others &= others - 1;
		if (slots_alive(segment_slots(seg), &seg->peers, i) == 1)
			return true;
	}
	return false;
}

/* Write back a file this process alone holds and settle it: after this
 * nobody holds it, so its data must be on the backing file, at its exact
 * size, and its lock released with the last descriptor. */
static int write_back_held_alone(struct pc_mapping *m)
{
	int err = files_writeback_last(m);
	if (!err)
		closed_settle(m);
	return err;
}

int shared_leave(struct pc_cache *c, int *err)
{
	*err = 0;
	cache_lock(c, &c->members_lock, LOCK_MEMBERS);
	if (!others_alive(c)) {
		c->closing = true;
		cache_unlock(c, &c->members_lock);
		return 1;
	}
	c->members &= ~cache_proc(c)->self_bit;
	domains_stop(c); /* this process's flushers: its I/O queues stay */
	struct pc_mapping **v;
	unsigned n = files_snapshot(c, &v);
	for (unsigned i = 0; i < n; i++) {
		/* Asked now: a member that takes a descriptor from this one
		 * meanwhile holds the file too, and this write-back was only
		 * early. */
		if (file_held_here(v[i]) && !file_held_by_others(v[i])) {
			int e = write_back_held_alone(v[i]);
			if (e && !*err)
				*err = e;
		}
	}
	/* What of those files went through the kernel's page cache reaches
	 * the device (the last member syncs only what it holds). */
	int e = fs_sync_domains(c);
	if (e && !*err)
		*err = e;
	/* Its I/O in flight ends before its descriptors close: a request's
	 * completion may still use its descriptor's number. */
	domains_proc_free(c);
	files_lock(c);
	for (unsigned i = 0; i < n; i++) {
		struct pc_mapping *m = v[i];
		if (!file_held_here(m))
			continue;
		/* Nobody keeps its descriptor for a reopen now: the next
		 * opener opens it, locks it and compares its attributes. */
		if (!file_held_by_others(m) && (atomic_load(&m->closed_dirty) || m->on_closed_list))
			closed_reopened(c, m);
		file_unhold(m);
	}
	files_unlock(c);
	for (unsigned i = 0; i < n; i++)
		mapping_put(v[i]);
	free(v);
	cache_unlock(c, &c->members_lock);
	return 0;
}
