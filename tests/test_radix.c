/*
 * test_radix.c - the page index radix tree (src/lib/radix.c).
 *
 * Cases for insert/lookup/remove of single- and multi-slot items, items
 * held whole in interior slots, -EEXIST and -ENOMEM leaving the tree
 * unchanged, large indices, tags and rt_find_next, freeing and shrinking;
 * a randomized comparison against an array model (PC_SEED replays it), with
 * the tree's structural invariants checked as it goes; and random lookups
 * over a large tree.
 */
#include "testutil.h"

#include "api/internal.h"
#include "radix_pool_util.h"

#include <time.h>

/* Test hooks in radix.c. */
extern _Atomic long rt_test_nodes;
extern _Atomic long rt_test_alloc_budget;

static long nodes_now(void)
{
	return atomic_load(&rt_test_nodes);
}

/* The trees' pool, which the cases keep filled (radix.c takes nodes
 * only from it) before every change: no insert takes more than
 * RT_INSERT_MAX_NODES, no removal splits more slots than that. */
static struct rt_pool *test_pool(void)
{
	static struct rt_pool pool;
	static bool ready;
	if (!ready) {
		rt_pool_init(&pool, test_lockcx());
		ready = true;
	}
	return &pool;
}

static int t_insert(struct rt_root *r, uint64_t index, uint64_t nr, void *item)
{
	tp_fill(r->pool, 2 * RT_INSERT_MAX_NODES);
	return rt_insert(r, index, nr, item);
}

static void t_remove(struct rt_root *r, uint64_t index, uint64_t nr)
{
	tp_fill(r->pool, 2 * RT_INSERT_MAX_NODES);
	rt_remove(r, index, nr);
}

/* ------------------------------------------------------------ invariants */

static int inv_errors;

#define INV(cond)                                                                          \
	do {                                                                               \
		if (!(cond)) {                                                             \
			if (inv_errors++ < 10)                                             \
				fprintf(stderr, "invariant failed: %s (node shift %u)\n", #cond, \
					(unsigned)n->shift);                               \
		}                                                                          \
	} while (0)

/* Checks node n; returns the number of nodes in its subtree. */
static long check_node(struct rt_node *n)
{
	long nodes = 1;
	unsigned used = 0;
	INV(n->count > 0);
	for (unsigned i = 0; i < RT_SLOTS; i++) {
		void *p = n->slots[i];
		uint64_t bit = (uint64_t)1 << i;
		if (!p) {
			for (int t = 0; t < RT_NTAGS; t++)
				INV(!(n->tags[t] & bit));
			continue;
		}
		used++;
		if (n->shift && rt_slot_is_item(p)) {
			/* An item held whole in an interior slot: only its
			 * first slot may carry tags (checked by the model). */
			continue;
		}
		if (n->shift) {
			struct rt_node *c = p;
			INV(c->parent == n);
			INV(c->offset == i);
			INV(c->shift + RT_SHIFT == n->shift);
			for (int t = 0; t < RT_NTAGS; t++)
				INV(!!(n->tags[t] & bit) == (c->tags[t] != 0));
			nodes += check_node(c);
		}
	}
	INV(used == n->count);
	return nodes;
}

/* Full check: structure, minimal height, node count matches allocations. */
static void check_tree(struct rt_root *r, long nodes_before)
{
	inv_errors = 0;
	long nodes = 0;
	struct rt_node *n = r->node;
	/* The root's shift is kept beside it for lockless walks. */
	INV(r->shift == (n ? n->shift : 0));
	if (n) {
		INV(n->parent == NULL);
		/* would have shrunk (an item held in slot 0 keeps the height) */
		INV(!(n->shift && n->count == 1 && n->slots[0] && !rt_slot_is_item(n->slots[0])));
		nodes = check_node(n);
	}
	CHECK(inv_errors == 0);
	CHECK(nodes_now() - nodes_before == nodes);
}

/* ------------------------------------------------------------ unit cases */

static int items[4096]; /* distinct addresses to use as items */
#define IT(i) ((void *)&items[i])

TEST_CASE(insert_lookup_grow_and_shrink)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());
	CHECK(rt_lookup(&r, 0) == NULL);
	CHECK(rt_lookup(&r, 12345) == NULL);
	uint64_t idx = 0;
	CHECK(rt_find_next(&r, &idx, -1) == NULL);
	CHECK(rt_range_empty(&r, 0, 1000));

	CHECK(t_insert(&r, 5, 1, IT(1)) == 0);
	CHECK(rt_lookup(&r, 5) == IT(1));
	CHECK(rt_lookup(&r, 4) == NULL);
	CHECK(rt_lookup(&r, 6) == NULL);
	CHECK(rt_lookup(&r, 5 + 64) == NULL);
	CHECK(r.nr_heads == 1);
	CHECK(r.node && r.node->shift == 0);
	check_tree(&r, base);

	/* Bad arguments. */
	CHECK(t_insert(&r, 7, 0, IT(2)) == -EINVAL);
	CHECK(t_insert(&r, 7, 1, NULL) == -EINVAL);
	CHECK(t_insert(&r, UINT64_MAX, 2, IT(2)) == -EINVAL);

	/* -EEXIST, nothing changed. */
	long n0 = nodes_now();
	CHECK(t_insert(&r, 5, 1, IT(2)) == -EEXIST);
	CHECK(t_insert(&r, 0, 8, IT(2)) == -EEXIST);
	CHECK(t_insert(&r, 5, 10000, IT(2)) == -EEXIST);
	CHECK(rt_lookup(&r, 0) == NULL && rt_lookup(&r, 5) == IT(1) && rt_lookup(&r, 6) == NULL);
	CHECK(nodes_now() == n0);
	CHECK(r.nr_heads == 1);

	/* Grow: an index needing three levels. */
	CHECK(t_insert(&r, 64 * 64 + 3, 1, IT(3)) == 0);
	CHECK(r.node->shift == 12);
	CHECK(rt_lookup(&r, 5) == IT(1));
	CHECK(rt_lookup(&r, 64 * 64 + 3) == IT(3));
	CHECK(rt_lookup(&r, 64 * 64 * 64) == NULL);
	CHECK(rt_lookup(&r, UINT64_MAX) == NULL);
	check_tree(&r, base);

	/* Shrink back when the high one goes. */
	t_remove(&r, 64 * 64 + 3, 1);
	CHECK(r.node && r.node->shift == 0);
	CHECK(rt_lookup(&r, 5) == IT(1));
	CHECK(r.nr_heads == 1);
	check_tree(&r, base);

	/* Shrink when the low one goes: root keeps its height (slot 0 empty). */
	CHECK(t_insert(&r, 64 * 64 + 3, 1, IT(3)) == 0);
	t_remove(&r, 5, 1);
	CHECK(rt_lookup(&r, 5) == NULL);
	CHECK(rt_lookup(&r, 64 * 64 + 3) == IT(3));
	check_tree(&r, base);

	/* Removing absent slots is harmless. */
	t_remove(&r, 0, 1000);
	t_remove(&r, 1ULL << 50, 1000);
	CHECK(rt_lookup(&r, 64 * 64 + 3) == IT(3));
	CHECK(r.nr_heads == 1);
	check_tree(&r, base);

	t_remove(&r, 64 * 64 + 3, 1);
	CHECK(r.node == NULL);
	CHECK(r.nr_heads == 0);
	CHECK(nodes_now() == base);
	rt_destroy(&r);
}

TEST_CASE(multi_slot_items_of_every_size)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());

	/* Every size 1..512 at an unaligned start that crosses leaves. */
	for (uint64_t nr = 1; nr <= 512; nr++) {
		uint64_t start = 1000 + nr * 7;
		REQUIRE(t_insert(&r, start, nr, IT(nr)) == 0);
		int ok = 1;
		for (uint64_t i = start; i < start + nr; i++)
			ok &= rt_lookup(&r, i) == IT(nr);
		ok &= rt_lookup(&r, start - 1) == NULL;
		ok &= rt_lookup(&r, start + nr) == NULL;
		CHECK(ok);
		CHECK(!rt_range_empty(&r, start - 5, 6));
		CHECK(rt_range_empty(&r, start - 5, 5));
		CHECK(rt_range_empty(&r, start + nr, 100));
		CHECK(t_insert(&r, start + nr - 1, 3, IT(0)) == -EEXIST);
		CHECK(rt_lookup(&r, start + nr) == NULL);
		/* find_next from inside returns the tail slots too */
		uint64_t idx = start + nr / 2;
		CHECK(rt_find_next(&r, &idx, -1) == IT(nr) && idx == start + nr / 2);
		CHECK(r.nr_heads == 1);
		if (nr % 61 == 0)
			check_tree(&r, base);
		t_remove(&r, start, nr);
		CHECK(r.node == NULL);
		CHECK(r.nr_heads == 0);
	}
	CHECK(nodes_now() == base);

	/* Folio-like: aligned 512-slot items side by side, then removed in one
	 * call: nr_heads counts runs. */
	for (unsigned i = 0; i < 8; i++)
		REQUIRE(t_insert(&r, 4096 + i * 512, 512, IT(100 + i)) == 0);
	REQUIRE(t_insert(&r, 4096 + 8 * 512, 1, IT(200)) == 0);
	CHECK(r.nr_heads == 9);
	check_tree(&r, base);
	t_remove(&r, 4096, 3 * 512);
	CHECK(r.nr_heads == 6);
	CHECK(rt_lookup(&r, 4096 + 3 * 512) == IT(103));
	CHECK(rt_lookup(&r, 4096 + 3 * 512 - 1) == NULL);
	check_tree(&r, base);
	rt_destroy(&r);
	CHECK(r.node == NULL && r.nr_heads == 0);
	CHECK(nodes_now() == base);
}

/* Items that fill whole slots of an interior node are held there (one
 * slot for 64 indices), and behave as if held slot per index. */
TEST_CASE(interior_slots_hold_whole_items)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());
	CHECK(t_insert(&r, 0, 1, (void *)((uintptr_t)IT(1) | 1)) == -EINVAL); /* the tree's mark */

	/* Folios of 64 pages at 64..575: one node (shift 6), no leaves. */
	for (uint64_t k = 1; k <= 8; k++)
		REQUIRE(t_insert(&r, 64 * k, 64, IT(k)) == 0);
	CHECK(r.node && r.node->shift == 6);
	CHECK(nodes_now() - base == 1);
	CHECK(rt_slot_is_item(r.node->slots[1]) && rt_slot_item(r.node->slots[1]) == IT(1));
	int ok = 1;
	for (uint64_t i = 0; i < 700; i++)
		ok &= rt_lookup(&r, i) == (i >= 64 && i < 576 ? IT(i / 64) : NULL);
	CHECK(ok);
	CHECK(r.nr_heads == 8);
	CHECK(t_insert(&r, 100, 1, IT(9)) == -EEXIST);
	CHECK(!rt_range_empty(&r, 60, 5) && rt_range_empty(&r, 0, 64));
	check_tree(&r, base);

	/* Tags belong to the first index; find_next by tag finds an item by
	 * its first index, by slot from anywhere inside it. */
	rt_tag_set(&r, 128, RT_TAG_DIRTY);
	rt_tag_set(&r, 320, RT_TAG_DIRTY);
	CHECK(rt_tag_get(&r, 128, RT_TAG_DIRTY) && !rt_tag_get(&r, 192, RT_TAG_DIRTY));
	uint64_t idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(2) && idx == 128);
	idx = 129;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(5) && idx == 320);
	idx = 321;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == NULL);
	idx = 130;
	CHECK(rt_find_next(&r, &idx, -1) == IT(2) && idx == 130);
	/* Another index inside an interior slot has no tag of its own: a
	 * leaf would tag that index, which no call of the cache does; here
	 * it changes nothing (nor clears the first index's). */
	rt_tag_set(&r, 100, RT_TAG_EDGE);
	CHECK(!rt_tag_get(&r, 100, RT_TAG_EDGE) && !rt_tag_get(&r, 64, RT_TAG_EDGE));
	rt_tag_clear(&r, 130, RT_TAG_DIRTY);
	CHECK(rt_tag_get(&r, 128, RT_TAG_DIRTY) && !rt_tag_get(&r, 130, RT_TAG_DIRTY));
	rt_tag_clear(&r, 128, RT_TAG_DIRTY);
	CHECK(!rt_tag_get(&r, 128, RT_TAG_DIRTY));
	idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(5) && idx == 320);
	check_tree(&r, base);

	/* Part of an item removed: its slot moves down into a leaf, the rest
	 * of it stays, its tag with its first index. */
	t_remove(&r, 320 + 10, 5);
	CHECK(nodes_now() - base == 2);
	CHECK(rt_lookup(&r, 329) == IT(5) && rt_lookup(&r, 330) == NULL && rt_lookup(&r, 334) == NULL &&
	      rt_lookup(&r, 335) == IT(5) && rt_lookup(&r, 383) == IT(5));
	CHECK(rt_tag_get(&r, 320, RT_TAG_DIRTY));
	idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(5) && idx == 320);
	check_tree(&r, base);
	t_remove(&r, 320, 64);
	CHECK(nodes_now() - base == 1 && rt_lookup(&r, 340) == NULL);
	idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == NULL);
	check_tree(&r, base);

	/* The split cannot allocate: the whole slot is emptied. */
	atomic_store(&rt_test_alloc_budget, 0);
	t_remove(&r, 256 + 1, 1);
	atomic_store(&rt_test_alloc_budget, -1);
	CHECK(rt_lookup(&r, 256) == NULL && rt_lookup(&r, 300) == NULL && rt_lookup(&r, 255) == IT(3));
	check_tree(&r, base);

	/* Whole items removed in one call: nr_heads counts them. */
	uint64_t heads = r.nr_heads;
	t_remove(&r, 64, 192);
	CHECK(r.nr_heads == heads - 3);
	check_tree(&r, base);
	rt_destroy(&r);
	CHECK(nodes_now() == base);

	/* A file's first folio of 64 pages, at 0: the new root holds it in
	 * a slot (a leaf root would stay a leaf as the tree grew). */
	REQUIRE(t_insert(&r, 0, 64, IT(30)) == 0);
	CHECK(r.node->shift == 6 && rt_slot_is_item(r.node->slots[0]));
	CHECK(nodes_now() - base == 1);
	CHECK(rt_lookup(&r, 0) == IT(30) && rt_lookup(&r, 63) == IT(30) && rt_lookup(&r, 64) == NULL);
	check_tree(&r, base);
	t_remove(&r, 0, 64);
	CHECK(r.node == NULL && nodes_now() == base);

	/* A 512-index item: 8 slots of one node; an unaligned run: leaf
	 * slots at both ends, interior slots between. */
	REQUIRE(t_insert(&r, 4096 + 512, 512, IT(20)) == 0);
	REQUIRE(t_insert(&r, 8192 + 60, 200, IT(21)) == 0);
	ok = 1;
	for (uint64_t i = 4096; i < 8192 + 400; i++)
		ok &= rt_lookup(&r, i) == (i >= 4608 && i < 5120 ? IT(20) : i >= 8252 && i < 8452 ? IT(21) : NULL);
	CHECK(ok);
	CHECK(r.nr_heads == 2);
	check_tree(&r, base);
	t_remove(&r, 4096 + 512, 512);
	t_remove(&r, 8192 + 60, 200);
	CHECK(r.node == NULL && r.nr_heads == 0);
	CHECK(nodes_now() == base);
	rt_destroy(&r);
}

TEST_CASE(large_indices_set_the_height)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());
	uint64_t big = 1ULL << 40;
	CHECK(t_insert(&r, big - 3, 512, IT(1)) == 0); /* crosses 2^40 */
	CHECK(rt_lookup(&r, big - 3) == IT(1));
	CHECK(rt_lookup(&r, big) == IT(1));
	CHECK(rt_lookup(&r, big + 508) == IT(1));
	CHECK(rt_lookup(&r, big + 509) == NULL);
	CHECK(rt_lookup(&r, big - 4) == NULL);
	CHECK(rt_lookup(&r, 0) == NULL);
	/* 8 nodes per path plus the split at 2^40: 7 levels (shift 36 root) */
	CHECK(r.node->shift == 36);
	check_tree(&r, base);

	CHECK(t_insert(&r, 0, 1, IT(2)) == 0);
	CHECK(t_insert(&r, (1ULL << 52) - 1, 1, IT(3)) == 0);
	CHECK(t_insert(&r, UINT64_MAX - 9, 10, IT(4)) == 0); /* top of index space */
	CHECK(r.node->shift == 60);
	CHECK(rt_lookup(&r, UINT64_MAX) == IT(4));
	CHECK(rt_lookup(&r, (1ULL << 52) - 1) == IT(3));
	CHECK(r.nr_heads == 4);
	check_tree(&r, base);

	uint64_t idx = 1;
	CHECK(rt_find_next(&r, &idx, -1) == IT(1) && idx == big - 3);
	idx = big + 509;
	CHECK(rt_find_next(&r, &idx, -1) == IT(3) && idx == (1ULL << 52) - 1);
	idx = 1ULL << 52;
	CHECK(rt_find_next(&r, &idx, -1) == IT(4) && idx == UINT64_MAX - 9);
	idx = UINT64_MAX;
	CHECK(rt_find_next(&r, &idx, -1) == IT(4) && idx == UINT64_MAX);

	rt_tag_set(&r, UINT64_MAX - 9, RT_TAG_EDGE);
	rt_tag_set(&r, big - 3, RT_TAG_EDGE);
	idx = big - 2;
	CHECK(rt_find_next(&r, &idx, RT_TAG_EDGE) == IT(4) && idx == UINT64_MAX - 9);
	check_tree(&r, base);

	t_remove(&r, UINT64_MAX - 9, 10);
	CHECK(r.node->shift == 48);
	t_remove(&r, (1ULL << 52) - 1, 1);
	CHECK(r.node->shift == 36);
	t_remove(&r, big - 3, 512);
	CHECK(r.node->shift == 0);
	CHECK(rt_lookup(&r, 0) == IT(2));
	check_tree(&r, base);
	t_remove(&r, 0, 1);
	CHECK(r.node == NULL);
	CHECK(nodes_now() == base);

	/* Creating a tree directly at a large index starts at the right height. */
	CHECK(t_insert(&r, 1ULL << 52, 1, IT(5)) == 0);
	CHECK(r.node->shift == 48);
	CHECK(nodes_now() - base == 9);
	rt_destroy(&r);
	CHECK(nodes_now() == base);
}

TEST_CASE(tags_summarise_and_find_next)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());
	/* 4096 items of 4 slots each: 16384 slots, 256 leaves, 2 levels above. */
	for (unsigned i = 0; i < 4096; i++)
		REQUIRE(t_insert(&r, (uint64_t)i * 4, 4, IT(i)) == 0);
	CHECK(r.nr_heads == 4096);

	/* Tag on an empty slot is ignored. */
	rt_tag_set(&r, 1ULL << 30, RT_TAG_DIRTY);
	CHECK(!rt_tag_get(&r, 1ULL << 30, RT_TAG_DIRTY));
	uint64_t idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == NULL);

	unsigned tagged[] = {3, 700, 701, 2048, 4095};
	for (unsigned k = 0; k < 5; k++)
		rt_tag_set(&r, tagged[k] * 4ULL, RT_TAG_DIRTY);
	rt_tag_set(&r, 1000 * 4, RT_TAG_EDGE);
	rt_tag_set(&r, 1000 * 4, RT_TAG_EDGE); /* twice is once */
	check_tree(&r, base);
	CHECK(rt_tag_get(&r, 700 * 4, RT_TAG_DIRTY));
	CHECK(!rt_tag_get(&r, 700 * 4 + 1, RT_TAG_DIRTY)); /* tail slot */
	CHECK(!rt_tag_get(&r, 700 * 4, RT_TAG_EDGE));
	CHECK(rt_tag_get(&r, 1000 * 4, RT_TAG_EDGE));
	CHECK(!rt_tag_get(&r, 1000 * 4, 2)); /* bad tag */

	idx = 0;
	for (unsigned k = 0; k < 5; k++) {
		void *p = rt_find_next(&r, &idx, RT_TAG_DIRTY);
		CHECK(p == IT(tagged[k]) && idx == tagged[k] * 4ULL);
		idx++;
	}
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == NULL);
	idx = 701 * 4 + 1;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(2048) && idx == 2048 * 4);
	idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_EDGE) == IT(1000) && idx == 4000);

	/* Clearing propagates: summary bits go when the last tag below goes. */
	rt_tag_clear(&r, 2048 * 4, RT_TAG_DIRTY);
	rt_tag_clear(&r, 2048 * 4, RT_TAG_DIRTY);
	rt_tag_clear(&r, 5, RT_TAG_DIRTY); /* untagged: harmless */
	check_tree(&r, base);
	idx = 702 * 4;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == IT(4095) && idx == 4095 * 4);
	rt_tag_clear(&r, 1000 * 4, RT_TAG_EDGE);
	CHECK(r.node->tags[RT_TAG_EDGE] == 0);
	idx = 0;
	CHECK(rt_find_next(&r, &idx, RT_TAG_EDGE) == NULL);

	/* Removing clears the slot's tags. */
	t_remove(&r, 4095 * 4, 4);
	CHECK(r.nr_heads == 4095);
	idx = 702 * 4;
	CHECK(rt_find_next(&r, &idx, RT_TAG_DIRTY) == NULL);
	CHECK(t_insert(&r, 4095 * 4, 4, IT(4095)) == 0);
	CHECK(!rt_tag_get(&r, 4095 * 4, RT_TAG_DIRTY));
	check_tree(&r, base);

	/* find_next(-1) walks every slot in order, tails included. */
	idx = 0;
	uint64_t seen = 0;
	int order_ok = 1;
	void *p;
	while ((p = rt_find_next(&r, &idx, -1))) {
		order_ok &= idx == seen && p == IT(idx / 4);
		seen++;
		idx++;
	}
	CHECK(order_ok && seen == 16384);
	rt_destroy(&r);
	CHECK(nodes_now() == base);
}

TEST_CASE(enomem_leaves_tree_unchanged)
{
	long base = nodes_now();
	struct rt_root r;
	rt_init(&r, test_pool());

	/* Empty tree: a deep path fails part way (8 nodes: shifts 48 down to
	 * 6, whose node holds the aligned 512-index item in 8 slots). */
	for (long b = 0; b < 8; b++) {
		atomic_store(&rt_test_alloc_budget, b);
		CHECK(t_insert(&r, 1ULL << 50, 512, IT(1)) == -ENOMEM);
		atomic_store(&rt_test_alloc_budget, -1);
		CHECK(r.node == NULL && r.nr_heads == 0);
		CHECK(nodes_now() == base);
	}

	/* Non-empty tree: growing and filling fail part way, at every step. */
	REQUIRE(t_insert(&r, 10, 3, IT(2)) == 0);
	rt_tag_set(&r, 10, RT_TAG_DIRTY);
	long n0 = nodes_now();
	int failures = 0;
	for (long b = 0;; b++) {
		atomic_store(&rt_test_alloc_budget, b);
		int e = t_insert(&r, (1ULL << 30) - 200, 512, IT(3));
		atomic_store(&rt_test_alloc_budget, -1);
		if (e == 0)
			break;
		failures++;
		CHECK(e == -ENOMEM);
		CHECK(nodes_now() == n0);
		CHECK(r.node->shift == 0);
		CHECK(rt_lookup(&r, 10) == IT(2) && rt_lookup(&r, 12) == IT(2));
		CHECK(rt_lookup(&r, (1ULL << 30) - 200) == NULL);
		CHECK(rt_tag_get(&r, 10, RT_TAG_DIRTY));
		CHECK(r.nr_heads == 1);
		check_tree(&r, base);
		REQUIRE(b < 100);
	}
	CHECK(failures > 5);
	CHECK(rt_lookup(&r, (1ULL << 30) + 311) == IT(3));
	CHECK(r.nr_heads == 2);
	check_tree(&r, base);
	rt_destroy(&r);
	CHECK(nodes_now() == base);
}

/* The tree takes its nodes from the pool and nothing else: an empty pool
 * fails an insert (-ENOMEM, the tree unchanged); RT_INSERT_MAX_NODES
 * spares are enough for the insert that needs the most, and as many as it
 * needs; every node goes back to the pool. */
TEST_CASE(nodes_come_only_from_the_pool)
{
	struct rt_pool pool;
	rt_pool_init(&pool, test_lockcx());
	struct rt_root r;
	rt_init(&r, &pool);
	long base = nodes_now();

	CHECK(rt_insert(&r, 5, 1, IT(1)) == -ENOMEM);
	CHECK(r.node == NULL && r.nr_heads == 0 && nodes_now() == base);
	tp_fill(&pool, 1);
	CHECK(rt_insert(&r, 0, 1, IT(1)) == 0);
	CHECK(rt_pool_spares(&pool) == 0 && nodes_now() - base == 1);
	CHECK(rt_insert(&r, 64, 1, IT(2)) == -ENOMEM); /* a new root and leaf */
	CHECK(rt_lookup(&r, 0) == IT(1) && r.node->shift == 0 && r.nr_heads == 1);

	/* The most an insert takes: a leaf root grown to 11 levels (10
	 * nodes), and a path of 10 new nodes below the root at each end. */
	uint64_t first = (1ULL << 60) + 1, nr = (1ULL << 60) + 5;
	tp_fill(&pool, RT_INSERT_MAX_NODES - 1);
	CHECK(rt_insert(&r, first, nr, IT(3)) == -ENOMEM);
	CHECK(rt_pool_spares(&pool) == RT_INSERT_MAX_NODES - 1);
	CHECK(r.node->shift == 0 && rt_lookup(&r, 0) == IT(1) && rt_lookup(&r, first) == NULL);
	check_tree(&r, base);
	tp_fill(&pool, RT_INSERT_MAX_NODES);
	CHECK(rt_insert(&r, first, nr, IT(3)) == 0);
	CHECK(rt_pool_spares(&pool) == 0);
	CHECK(nodes_now() - base == 1 + RT_INSERT_MAX_NODES);
	CHECK(rt_lookup(&r, first) == IT(3) && rt_lookup(&r, first + nr - 1) == IT(3) &&
	      rt_lookup(&r, first + nr) == NULL && rt_lookup(&r, 0) == IT(1));
	check_tree(&r, base);

	rt_destroy(&r);
	CHECK(nodes_now() == base);
	CHECK(tp_destroy(&pool) == 1 + RT_INSERT_MAX_NODES);
}

/* ------------------------------------------------------------ randomized */

/* Two windows of the index space: low, and one straddling 2^40 (deep tree,
 * height changes as the windows fill and empty). */
#define WIN 16384
static const uint64_t win_base[2] = {0, (1ULL << 40) - WIN / 2};

struct mitem {
	uint64_t index, nr;
	struct mitem *next_free;
};

struct model {
	struct mitem *slot[2][WIN];
	uint8_t tags[2][WIN]; /* bit t: tag t on that slot (heads only) */
	uint64_t heads;
};

static uint64_t m_index(int w, uint64_t i) { return win_base[w] + i; }

static void *m_find_next(struct model *m, uint64_t *index, int tag)
{
	for (int w = 0; w < 2; w++) {
		uint64_t start;
		if (*index < win_base[w])
			start = 0;
		else if (*index - win_base[w] < WIN)
			start = *index - win_base[w];
		else
			continue;
		for (uint64_t i = start; i < WIN; i++) {
			if (!m->slot[w][i])
				continue;
			if (tag >= 0 && !(m->tags[w][i] & (1u << tag)))
				continue;
			*index = m_index(w, i);
			return m->slot[w][i];
		}
	}
	return NULL;
}

TEST_CASE(matches_array_model)
{
	uint64_t seed = test_seed("test_radix", 20240611);
	long base = nodes_now();
	struct model *m = calloc(1, sizeof(*m));
	REQUIRE(m);
	struct rt_root r;
	rt_init(&r, test_pool());
	int bad = 0;
	const int steps = 200000;

	for (int step = 0; step < steps && bad < 10; step++) {
		uint64_t x = tu_rand(&seed);
		int w = (int)(x & 1);
		unsigned op = (unsigned)((x >> 1) % 100);
		uint64_t i = (x >> 8) % WIN;
		int fail = 0;

		if (op < 30) {
			/* insert: folio-like (aligned power of two) or any run */
			uint64_t nr;
			if ((x >> 40) & 1) {
				unsigned order = (unsigned)((x >> 41) % 10);
				nr = 1ULL << order;
				i &= ~(nr - 1);
			} else {
				nr = 1 + (x >> 41) % 600;
			}
			if (i + nr > WIN)
				nr = WIN - i;
			bool empty = true;
			for (uint64_t k = i; k < i + nr; k++)
				empty &= m->slot[w][k] == NULL;
			struct mitem *it = malloc(sizeof(*it));
			REQUIRE(it);
			it->index = m_index(w, i);
			it->nr = nr;
			int e = t_insert(&r, it->index, nr, it);
			if (empty) {
				fail |= e != 0;
				for (uint64_t k = i; k < i + nr; k++)
					m->slot[w][k] = it;
				m->heads++;
			} else {
				fail |= e != -EEXIST;
				free(it);
			}
		} else if (op < 50) {
			/* remove the item covering a slot (or an empty range) */
			struct mitem *it = m->slot[w][i];
			if (it) {
				uint64_t first = it->index - win_base[w];
				t_remove(&r, it->index, it->nr);
				for (uint64_t k = first; k < first + it->nr; k++) {
					m->slot[w][k] = NULL;
					m->tags[w][k] = 0;
				}
				m->heads--;
				free(it);
			} else {
				uint64_t k = i;
				while (k < WIN && k < i + 100 && !m->slot[w][k])
					k++;
				t_remove(&r, m_index(w, i), k - i);
			}
		} else if (op < 60) {
			/* remove a whole region of items in one call */
			uint64_t end = u64_min(WIN, i + 1 + (x >> 40) % 2000);
			struct mitem *it = m->slot[w][i];
			if (it)
				i = it->index - win_base[w];
			it = m->slot[w][end - 1];
			if (it)
				end = it->index - win_base[w] + it->nr;
			t_remove(&r, m_index(w, i), end - i);
			for (uint64_t k = i; k < end; k++) {
				struct mitem *p = m->slot[w][k];
				if (p && p->index == m_index(w, k)) {
					m->heads--;
					for (uint64_t j = k; j < k + p->nr; j++) {
						m->slot[w][j] = NULL;
						m->tags[w][j] = 0;
					}
					k += p->nr - 1;
					free(p);
				}
			}
		} else if (op < 70) {
			/* tag set/clear on a head (or an empty slot) */
			int tag = (int)((x >> 40) & 1);
			bool set = (x >> 41) & 1;
			struct mitem *it = m->slot[w][i];
			uint64_t k = it ? it->index - win_base[w] : i;
			if (set) {
				rt_tag_set(&r, m_index(w, k), tag);
				if (it)
					m->tags[w][k] |= 1u << tag;
			} else {
				rt_tag_clear(&r, m_index(w, k), tag);
				m->tags[w][k] &= ~(1u << tag);
			}
			fail |= rt_tag_get(&r, m_index(w, k), tag) != !!(m->tags[w][k] & (1u << tag));
		} else if (op < 85) {
			/* find_next, any tag, from anywhere (also between windows) */
			int tag = (int)((x >> 40) % 3) - 1;
			uint64_t from = (x >> 42) & 1 ? m_index(w, i) : tu_rand(&seed) % (1ULL << 41);
			uint64_t a = from, b = from;
			void *pa = rt_find_next(&r, &a, tag);
			void *pb = m_find_next(m, &b, tag);
			fail |= pa != pb || (pa && a != b);
		} else if (op < 95) {
			/* lookups */
			for (int k = 0; k < 16; k++) {
				uint64_t j = (i + (uint64_t)k * 37) % WIN;
				fail |= rt_lookup(&r, m_index(w, j)) != m->slot[w][j];
			}
			fail |= rt_lookup(&r, win_base[1] - 1 - i) != NULL;
		} else {
			/* range_empty */
			uint64_t nr = 1 + (x >> 40) % 700;
			if (i + nr > WIN)
				nr = WIN - i;
			bool empty = true;
			for (uint64_t k = i; k < i + nr; k++)
				empty &= m->slot[w][k] == NULL;
			fail |= rt_range_empty(&r, m_index(w, i), nr) != empty;
		}
		fail |= r.nr_heads != m->heads;
		if (fail) {
			bad++;
			fprintf(stderr, "random: mismatch at step %d op %u\n", step, op);
		}
		if (step % 5000 == 0)
			check_tree(&r, base);
	}
	CHECK(bad == 0);
	check_tree(&r, base);

	/* Full comparison, then empty the model and the tree item by item. */
	int full_ok = 1;
	for (int w = 0; w < 2; w++)
		for (uint64_t k = 0; k < WIN; k++)
			full_ok &= rt_lookup(&r, m_index(w, k)) == m->slot[w][k];
	CHECK(full_ok);
	for (int w = 0; w < 2; w++) {
		for (uint64_t k = 0; k < WIN; k++) {
			struct mitem *p = m->slot[w][k];
			if (p && p->index == m_index(w, k)) {
				t_remove(&r, p->index, p->nr);
				k += p->nr - 1;
				free(p);
			}
		}
	}
	CHECK(r.node == NULL && r.nr_heads == 0);
	CHECK(nodes_now() == base);
	rt_destroy(&r);
	free(m);
}

/* Random lookups over a large tree all find their item; the time they
 * take is printed, a rough figure for the hot path (not a pass/fail
 * check). */
TEST_CASE(random_lookups_hit_every_page)
{
	struct rt_root r;
	rt_init(&r, test_pool());
	const uint64_t n = 1 << 18; /* 1 GiB of 4 KiB pages */
	for (uint64_t i = 0; i < n; i += 16)
		REQUIRE(t_insert(&r, i, 16, IT(i % 4096)) == 0);
	struct timespec t0, t1;
	uint64_t s = 12345, hits = 0;
	const int iters = 2000000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < iters; k++)
		hits += rt_lookup(&r, tu_rand(&s) % n) != NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters;
	printf("rt_lookup: %.1f ns per random lookup over %llu pages\n", ns, (unsigned long long)n);
	CHECK(hits == (uint64_t)iters);
	rt_destroy(&r);
}
