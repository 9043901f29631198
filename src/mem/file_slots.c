/*
 * file_slots.c - a file's slot in the cache and the process's descriptors
 * at that slot (file_slots.h).
 *
 * Slots: a bitmap in the cache (struct pc_cache.file_slot_bits), claimed
 * with a compare-and-swap and freed with an atomic and, so that a file's
 * last reference may go under any lock or none.  A hint says where the
 * last claim found room, so that a claim does not scan the full words
 * from the start each time.
 *
 * The table: the process's chunks of FILE_CHUNK entries, made (calloc) by
 * the first file of a chunk and published with a release store; a chunk
 * never moves and is freed only with the cache, so mproc takes no lock.
 */
#include "mem/file_slots.h"

#include "api/cache.h"
#include "mem/mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define SLOT_WORDS (FILE_SLOTS / 64)

/* A free slot of c, now taken: 0, or -ENFILE. */
static int slot_claim(struct pc_cache *c, uint32_t *out)
{
	uint32_t start = atomic_load_explicit(&c->file_slot_hint, memory_order_relaxed) % SLOT_WORDS;
	for (uint32_t i = 0; i < SLOT_WORDS; i++) {
		uint32_t wi = (start + i) % SLOT_WORDS;
		_Atomic uint64_t *w = &c->file_slot_bits[wi];
		uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
		while (v != UINT64_MAX) {
			unsigned bit = (unsigned)__builtin_ctzll(~v);
			if (atomic_compare_exchange_weak_explicit(w, &v, v | (1ull << bit), memory_order_acq_rel,
								  memory_order_relaxed)) {
				atomic_store_explicit(&c->file_slot_hint, wi, memory_order_relaxed);
				*out = wi * 64 + bit;
				return 0;
			}
		}
	}
	return -ENFILE;
}

static void slot_release(struct pc_cache *c, uint32_t slot)
{
	atomic_fetch_and_explicit(&c->file_slot_bits[slot / 64], ~(1ull << (slot % 64)), memory_order_release);
}

/* The process's chunk for `slot`, made if it is not there yet: 0 or
 * -ENOMEM.  Two threads may make it at once: one chunk is published, the
 * other freed. */
static int chunk_ensure(struct pc_file_procs *t, uint32_t slot)
{
	struct pc_mapping_proc *_Atomic *at = &t->chunk[slot / FILE_CHUNK];
	if (atomic_load_explicit(at, memory_order_acquire))
		return 0;
	struct pc_mapping_proc *chunk = calloc(FILE_CHUNK, sizeof(*chunk));
	if (!chunk)
		return -ENOMEM;
	for (uint32_t i = 0; i < FILE_CHUNK; i++)
		chunk[i].fd = chunk[i].old_fd = -1;
	struct pc_mapping_proc *none = NULL;
	if (!atomic_compare_exchange_strong_explicit(at, &none, chunk, memory_order_acq_rel, memory_order_acquire))
		free(chunk);
	return 0;
}

/* This process's entry at m's slot, whatever file it is for now. */
static struct pc_mapping_proc *slot_entry(const struct pc_mapping *m)
{
	struct pc_mapping_proc *chunk =
		atomic_load_explicit(&m->procs->chunk[m->slot / FILE_CHUNK], memory_order_acquire);
	return &chunk[m->slot % FILE_CHUNK];
}

int file_slot_get(struct pc_mapping *m)
{
	struct pc_proc *p = cache_proc(m->c);
	uint32_t slot;
	int err = slot_claim(m->c, &slot);
	if (err)
		return err;
	err = chunk_ensure(&p->files, slot);
	if (err) {
		slot_release(m->c, slot);
		return err;
	}
	m->procs = &p->files;
	m->slot = slot;
	/* Never 0, which is "no file" in an entry. */
	do
		m->gen = atomic_fetch_add_explicit(&m->c->file_gen, 1, memory_order_relaxed) + 1;
	while (m->gen == 0);
	*slot_entry(m) = (struct pc_mapping_proc){ .fd = -1, .old_fd = -1, .gen = m->gen };
	return 0;
}

int file_entry_claim(struct pc_mapping *m)
{
	int err = chunk_ensure(m->procs, m->slot);
	if (err)
		return err;
	struct pc_mapping_proc *mp = slot_entry(m);
	PC_ASSERT(mp->fd < 0 && mp->old_fd < 0); /* an earlier file's were closed with its hold */
	*mp = (struct pc_mapping_proc){ .fd = -1, .old_fd = -1, .gen = m->gen };
	return 0;
}

/* A shared cache's fdpass server may be reading the entry's descriptor
 * to duplicate it (file_fd_dup): it is closed under fd_lock, so the
 * number is not reused for another file while the server sends it. */
void file_descriptors_close(struct pc_mapping *m)
{
	struct pc_mapping_proc *mp = mproc(m);
	if (!mproc_is_mine(m, mp))
		return;
	pthread_mutex_t *lock = &cache_proc(m->c)->fd_lock;
	pthread_mutex_lock(lock);
	if (mp->fd >= 0)
		close(mp->fd);
	if (mp->old_fd >= 0)
		close(mp->old_fd);
	mp->fd = mp->old_fd = -1;
	pthread_mutex_unlock(lock);
}

int file_fd_dup(struct pc_cache *c, uint32_t slot, uint32_t gen)
{
	struct pc_proc *p = cache_proc(c);
	if (slot >= FILE_SLOTS)
		return -ENOENT;
	struct pc_mapping_proc *chunk = atomic_load_explicit(&p->files.chunk[slot / FILE_CHUNK], memory_order_acquire);
	if (!chunk)
		return -ENOENT;
	pthread_mutex_lock(&p->fd_lock);
	struct pc_mapping_proc *mp = &chunk[slot % FILE_CHUNK];
	int fd = mp->gen == gen && gen && mp->fd >= 0 ? fcntl(mp->fd, F_DUPFD_CLOEXEC, 0) : -1;
	int err = fd >= 0 ? 0 : (mp->gen == gen && gen && mp->fd >= 0 ? -errno : -ENOENT);
	pthread_mutex_unlock(&p->fd_lock);
	return err ? err : fd;
}

bool file_held_here(const struct pc_mapping *m)
{
	return atomic_load(&m->holders) & cache_proc(m->c)->self_bit;
}

bool file_held_by_others(const struct pc_mapping *m)
{
	return atomic_load(&m->holders) & ~cache_proc(m->c)->self_bit;
}

void file_hold(struct pc_mapping *m)
{
	PC_ASSERT(!file_held_here(m));
	atomic_fetch_add(&m->refs, 1);
	atomic_fetch_or(&m->holders, cache_proc(m->c)->self_bit);
}

void file_unhold(struct pc_mapping *m)
{
	if (!file_held_here(m))
		return;
	file_descriptors_close(m);
	struct pc_mapping_proc *mp = mproc(m);
	if (mproc_is_mine(m, mp))
		mp->gen = 0;
	atomic_fetch_and(&m->holders, ~cache_proc(m->c)->self_bit);
	mapping_put(m);
}

void file_slot_put(struct pc_mapping *m)
{
	if (!m->procs)
		return;
	struct pc_mapping_proc *mp = mproc(m);
	if (mproc_is_mine(m, mp))
		*mp = (struct pc_mapping_proc){ .fd = -1, .old_fd = -1 };
	slot_release(m->c, m->slot);
}

void file_procs_free(struct pc_proc *p)
{
	for (uint32_t i = 0; i < FILE_SLOTS / FILE_CHUNK; i++) {
		free(atomic_load_explicit(&p->files.chunk[i], memory_order_relaxed));
		atomic_store_explicit(&p->files.chunk[i], NULL, memory_order_relaxed);
	}
}
