/*
 * files.c - the cache's table of files: one mapping per backing file,
 * found by device and inode (a hash that grows as files are opened), and
 * what pc_cache_destroy does to all of them at once.
 *
 * The table is under cache->files_lock (its place in the lock order is in
 * mem/mapping.h): an open finds or inserts a file's mapping and attaches a
 * handle in one hold of it.
 */
#include "api/files.h"

#include "mem/file_slots.h"
#include "mem/cache_mem.h"

#include "api/cache.h"
#include "api/file.h"
#include "io/fs_sync.h"
#include "lib/check.h"
#include "lib/errseq.h"
#include "mem/mapping.h"
#include "wb/backing.h"
#include "wb/writeback.h"

#include <fcntl.h>
#include <stdlib.h>

static unsigned hash_of(struct pc_cache *c, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)ino * 0xC2B2AE3D27D4EB4Full);
	return (unsigned)(h >> 32) % c->file_hash_size;
}

struct pc_mapping *files_hash_find(struct pc_cache *c, dev_t dev, ino_t ino)
{
	assert_held(&c->files_lock);
	for (struct pc_mapping *m = c->file_hash[hash_of(c, dev, ino)]; m; m = m->hash_next)
		if (m->dev == dev && m->ino == ino)
			return m;
	return NULL;
}

void files_hash_remove(struct pc_cache *c, struct pc_mapping *m)
{
	assert_held(&c->files_lock);
	struct pc_mapping **pp = &c->file_hash[hash_of(c, m->dev, m->ino)];
	while (*pp && *pp != m)
		pp = &(*pp)->hash_next;
	if (*pp) {
		*pp = m->hash_next;
		c->nr_mappings--;
	}
	m->hash_next = NULL;
}

/* Twice as many files as buckets: four times the buckets (chains stay
 * short with a hundred thousand files). */
static void hash_grow(struct pc_cache *c)
{
	unsigned size = c->file_hash_size * 4;
	struct pc_mapping **nh = cache_zalloc(c, size * sizeof(*nh));
	if (!nh)
		return; /* longer chains, still right */
	struct pc_mapping **old = c->file_hash;
	unsigned old_size = c->file_hash_size;
	c->file_hash = nh;
	c->file_hash_size = size;
	for (unsigned i = 0; i < old_size; i++)
		while (old[i]) {
			struct pc_mapping *m = old[i];
			old[i] = m->hash_next;
			unsigned h = hash_of(c, m->dev, m->ino);
			m->hash_next = nh[h];
			nh[h] = m;
		}
	cache_free(c, old);
}

void files_hash_insert(struct pc_cache *c, struct pc_mapping *m)
{
	assert_held(&c->files_lock);
	if (c->nr_mappings >= 2 * c->file_hash_size)
		hash_grow(c);
	unsigned h = hash_of(c, m->dev, m->ino);
	m->hash_next = c->file_hash[h];
	c->file_hash[h] = m;
	c->nr_mappings++;
}

/* Snapshot every mapping of the cache with a reference. */
unsigned files_snapshot(struct pc_cache *c, struct pc_mapping ***out)
{
	unsigned n = 0, cap = 0;
	struct pc_mapping **v = NULL;
	files_lock(c);
	for (unsigned i = 0; i < c->file_hash_size; i++)
		for (struct pc_mapping *m = c->file_hash[i]; m; m = m->hash_next) {
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				struct pc_mapping **nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					break;
				v = nv;
			}
			atomic_fetch_add(&m->refs, 1);
			v[n++] = m;
		}
	files_unlock(c);
	*out = v;
	return n;
}

int files_writeback_last(struct pc_mapping *m)
{
	int err = writeback_file(m);
	/* A flusher write that failed while we waited for it left its
	 * blocks dirty again without this call having tried them. */
	if (err && atomic_load(&m->nr_dirty) > 0)
		(void)writeback_file(m);
	/* An error of write-back that no handle reported (the file was
	 * closed): this is the last one who can. */
	uint64_t none = 0;
	if (!err && errseq_unseen(&m->wb_err))
		err = errseq_check_and_advance(&m->wb_err, &none);
	if (!err)
		err = fs_sync_mapping(m); /* its end through the kernel */
	backing_release_reserve(m);
	return err;
}

int files_writeback_all(struct pc_cache *c)
{
	struct pc_mapping **v;
	unsigned n = files_snapshot(c, &v);
	int first_err = 0;
	for (unsigned i = 0; i < n; i++) {
		/* A shared cache's file that this process does not hold is
		 * its holders' to write (every file with dirty data has one):
		 * the last member holds all that do. */
		if (cache_shared(c) && !file_held_here(v[i])) {
			/* Dirty and held by nobody: a member's write-back
			 * failed as it left (it reported it), or a member died
			 * (docs/shared.md, section 5).  Nobody can write it. */
			if (!file_held_by_others(v[i]) && atomic_load(&v[i]->nr_dirty) > 0 && !first_err)
				first_err = -EIO;
			mapping_put(v[i]);
			continue;
		}
		int err = files_writeback_last(v[i]);
		if (err && !first_err)
			first_err = err;
		mapping_put(v[i]);
	}
	free(v);
	/* What went through the kernel's page cache reaches the device now,
	 * and the kernel's error writing it is heard. */
	int fs_err = fs_sync_domains(c);
	if (fs_err && !first_err)
		first_err = fs_err;
	int orphan = atomic_exchange(&c->orphan_error, 0);
	return first_err ? first_err : orphan;
}

void files_free_all(struct pc_cache *c)
{
	for (unsigned i = 0; i < c->file_hash_size; i++) {
		while (c->file_hash[i]) {
			struct pc_mapping *m = c->file_hash[i];
			c->file_hash[i] = m->hash_next;
			if (mproc(m)->fd >= 0)
				ofd_lock(mproc(m)->fd, F_UNLCK);
			/* No I/O is in flight (the queues are gone): whatever
			 * references handles still hold die with the cache. */
			atomic_store(&m->refs, 1);
			mapping_put(m);
		}
	}
}
