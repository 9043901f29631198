/*
 * arena.c - folio memory: one anonymous mapping of memory_limit bytes carved
 * by a buddy allocator into naturally aligned power-of-two blocks of pages.
 *
 * Why a buddy allocator: every folio is then aligned to its own size (so it
 * can be read and written with O_DIRECT in place, no bounce buffer), the
 * cache's memory use is exact by construction, and freeing merges neighbours
 * back into large blocks so large folios stay available.  Free blocks are
 * linked through the descriptors of their first page (lru_prev/lru_next),
 * marked PF_BUDDY with their order.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void free_list_push(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	struct pc_folio *f = &c->folios[pfn];
	f->order = (uint8_t)order;
	atomic_store_explicit(&f->flags, PF_BUDDY, memory_order_relaxed);
	f->lru_prev = PC_NONE;
	f->lru_next = c->free_head[order];
	if (f->lru_next != PC_NONE)
		c->folios[f->lru_next].lru_prev = pfn;
	c->free_head[order] = pfn;
}

static void free_list_del(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	struct pc_folio *f = &c->folios[pfn];
	if (f->lru_prev != PC_NONE)
		c->folios[f->lru_prev].lru_next = f->lru_next;
	else
		c->free_head[order] = f->lru_next;
	if (f->lru_next != PC_NONE)
		c->folios[f->lru_next].lru_prev = f->lru_prev;
	f->lru_prev = f->lru_next = PC_NONE;
	atomic_store_explicit(&f->flags, 0, memory_order_relaxed);
}

int arena_init(struct pc_cache *c)
{
	c->npages = (uint32_t)(c->cfg.memory_limit >> PC_PAGE_SHIFT);
	c->arena_bytes = (size_t)c->npages << PC_PAGE_SHIFT;
	/* MAP_NORESERVE: memory is committed as folios are first used. */
	void *p = mmap(NULL, c->arena_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	madvise(p, c->arena_bytes, MADV_HUGEPAGE);
	/* A child of fork() may not use the cache (process.c): it gets no
	 * copy of the folios, and a fork copies no page tables of them. */
	madvise(p, c->arena_bytes, MADV_DONTFORK);
	/* Fault it in now (zeroing it), not in the first writes through each
	 * folio: that cost belongs to setting the cache up, and the memory is
	 * the cache's anyway.  PC_CFG_LAZY_MEMORY keeps it lazy. */
	if (!(c->cfg.flags & PC_CFG_LAZY_MEMORY))
		madvise(p, c->arena_bytes, MADV_POPULATE_WRITE);
	c->arena = p;
	c->folios = calloc(c->npages, sizeof(*c->folios));
	if (!c->folios) {
		munmap(p, c->arena_bytes);
		return -ENOMEM;
	}
	for (unsigned o = 0; o <= PC_MAX_ORDER; o++)
		c->free_head[o] = PC_NONE;
	for (uint32_t i = 0; i < c->npages; i++)
		c->folios[i].lru_prev = c->folios[i].lru_next = PC_NONE;
	/* Seed the free lists with the largest aligned blocks that fit. */
	uint32_t pfn = 0;
	while (pfn < c->npages) {
		unsigned order = c->max_order;
		while (order && ((pfn & ((1u << order) - 1)) || pfn + (1u << order) > c->npages))
			order--;
		free_list_push(c, pfn, order);
		pfn += 1u << order;
	}
	return 0;
}

void arena_destroy(struct pc_cache *c)
{
	if (c->arena)
		munmap(c->arena, c->arena_bytes);
	free(c->folios);
	c->arena = NULL;
	c->folios = NULL;
}

uint32_t arena_alloc(struct pc_cache *c, unsigned order)
{
	pthread_mutex_lock(&c->arena_lock);
	unsigned o = order;
	while (o <= c->max_order && c->free_head[o] == PC_NONE)
		o++;
	if (o > c->max_order) {
		pthread_mutex_unlock(&c->arena_lock);
		return PC_NONE;
	}
	uint32_t pfn = c->free_head[o];
	free_list_del(c, pfn, o);
	/* Split: the upper halves go back to the free lists. */
	while (o > order) {
		o--;
		free_list_push(c, pfn + (1u << o), o);
	}
	pthread_mutex_unlock(&c->arena_lock);
	return pfn;
}

void arena_free(struct pc_cache *c, uint32_t pfn, unsigned order)
{
	pthread_mutex_lock(&c->arena_lock);
	while (order < c->max_order) {
		uint32_t buddy = pfn ^ (1u << order);
		if (buddy + (1u << order) > c->npages)
			break;
		struct pc_folio *b = &c->folios[buddy];
		if (!(atomic_load_explicit(&b->flags, memory_order_relaxed) & PF_BUDDY) ||
		    b->order != order)
			break;
		free_list_del(c, buddy, order);
		pfn &= ~(1u << order);
		order++;
	}
	free_list_push(c, pfn, order);
	pthread_mutex_unlock(&c->arena_lock);
}
