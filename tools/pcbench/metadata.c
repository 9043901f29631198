/*
 * metadata.c - suite metadata, the old pcbench's e: the metadata
 * pagecache keeps per cached 4 KiB folio, measured from the heap (see
 * bench_metadata()); target <= 2 % of the folio.  One result,
 * pagecache-buffered's, in bytes per folio (its share of the folio in
 * the table's ratio column).
 */
#include "bench.h"

#include <malloc.h>

/* Heap bytes in use: small chunks in every arena plus mmapped chunks. */
static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/*
 * Metadata per cached 4 KiB folio, from what the process allocated:
 *
 *   H0 = heap in use before pc_cache_new()
 *   H1 = after pc_cache_new()        -> cache metadata: the folio descriptor
 *        table (one descriptor per arena page) and the cache's fixed tables;
 *        plus anonymous memory pc_cache_new mapped outside malloc that is
 *        neither the arena nor a thread stack (the descriptor table is such
 *        a mapping), from /proc/self/maps
 *   H2 = after pc_open() of the file  (per-file state, reported, not counted
 *        per folio: it does not grow with the number of folios)
 *   H3 = after reading every 4 KiB page of the file once, in a random
 *        order, with read-ahead disabled, so that every folio is one page
 *        -> index growth: radix-tree nodes (and any per-folio block state)
 *
 *   per folio = (H1 - H0 + mapped) / (memory_limit / 4096)  +  (H3 - H2) / N
 *
 * where N is the number of folios cached (checked against pc_cache_stats:
 * folios == N and cached_bytes == N * 4096).  "Heap" is glibc mallinfo2()
 * uordblks + hblkhd: every malloc'ed byte in all arenas (with malloc's own
 * chunk headers) plus mmapped malloc chunks.  The folio memory itself (an
 * anonymous mmap of memory_limit bytes) is not metadata and is not counted;
 * nor are thread stacks or io_uring rings (per cache, not per folio).  If
 * the library mapped its descriptor table with mmap() instead of malloc()
 * it would be missed here, so the growth of anonymous mappings at
 * pc_cache_new beyond memory_limit, thread stacks and malloc is printed as
 * a cross-check.
 */
struct mapsum {
	uint64_t anon_rw;    /* private anonymous read-write mappings */
	uint64_t guarded;    /* of which directly above a PROT_NONE guard page
			      * (thread stacks) */
};

static void anon_mappings(struct mapsum *m)
{
	char line[512];
	unsigned long prev_end = 0;
	bool prev_guard = false;
	FILE *fp = fopen("/proc/self/maps", "re");

	memset(m, 0, sizeof(*m));
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		unsigned long lo, hi, inode;
		char perms[8], path[256] = "";
		int n = sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &lo, &hi,
			       perms, &inode, path);

		if (n < 4)
			continue;
		if (inode == 0 && (path[0] == '\0' || strcmp(path, "[heap]") == 0) &&
		    strcmp(perms, "rw-p") == 0) {
			m->anon_rw += hi - lo;
			if (prev_guard && prev_end == lo)
				m->guarded += hi - lo;
		}
		prev_guard = strcmp(perms, "---p") == 0 && hi - lo <= 64 * 1024;
		prev_end = hi;
	}
	fclose(fp);
}

static void bench_metadata(const struct pair *p, const char *path, uint64_t fsize)
{
	uint64_t npages = fsize / 4096, arena_pages = bo.mem / 4096;
	uint64_t h0, h1, h2, h3, *perm, i;
	char *buf = bu_alloc_aligned(4096, 4096);
	struct mapsum m0, m1;
	struct pc_stats s;
	struct pc_cache *c;
	struct pc_file *f = NULL;
	struct bu_rng rng;
	double per_folio = NAN;

	perm = malloc(npages * sizeof(*perm));
	if (!perm)
		bu_die("out of memory");
	for (i = 0; i < npages; i++)
		perm[i] = i;
	bu_rng_seed(&rng, 1234);
	for (i = npages - 1; i > 0; i--) {
		uint64_t j = bu_rng_below(&rng, i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}

	malloc_trim(0);
	anon_mappings(&m0);
	h0 = heap_bytes();
	c = pair_cache(p, 0, 0);
	if (!c)
		goto out;
	h1 = heap_bytes();
	anon_mappings(&m1);
	f = pc_open(c, path, O_RDONLY, 0);
	if (!f) {
		pair_fail(p, "pc_open(O_RDONLY)");
		goto done;
	}
	h2 = heap_bytes();
	for (i = 0; i < npages; i++) {
		ssize_t n = pc_pread(f, buf, 4096, (off_t)(perm[i] * 4096), 0);

		prog_advance(1);
		if (n != 4096) {
			if (n >= 0)
				errno = EIO;
			pair_fail(p, "pc_pread (4 KiB, distinct pages)");
			goto done;
		}
	}
	h3 = heap_bytes();
	pc_cache_stats(c, &s);

	/* What pc_cache_new mapped outside malloc (the descriptor table is
	 * an anonymous mapping of its own), besides the arena and the
	 * threads' stacks, counts as cache metadata too ("other" of the
	 * cross-check below). */
	int64_t other = (int64_t)(m1.anon_rw - m0.anon_rw) - (int64_t)(m1.guarded - m0.guarded) -
			(int64_t)bo.mem - (int64_t)(h1 - h0);
	uint64_t cache_meta = (h1 - h0) + (uint64_t)(other < 0 ? 0 : other);
	per_folio = (double)cache_meta / (double)arena_pages +
		    (double)(int64_t)(h3 - h2) / (double)npages;
	res_figure(p->pc, per_folio); /* judged as a share of the folio */
	pair_note(p, "%.1f B per 4 KiB folio = cache metadata %" PRId64 " B / %" PRIu64 " arena pages (%.1f B) + "
		  "index growth %" PRId64 " B / %" PRIu64 " folios (%.1f B); per-file state at pc_open %" PRId64 " B "
		  "(not per folio); stats: folios %" PRIu64 ", cached %s, device reads %" PRIu64,
		  per_folio, (int64_t)cache_meta, arena_pages, (double)cache_meta / (double)arena_pages,
		  (int64_t)(h3 - h2), npages, (double)(int64_t)(h3 - h2) / (double)npages, (int64_t)(h2 - h1), s.folios,
		  bu_human(s.cached_bytes), s.dev_read_ios);
	if (s.folios != npages || s.cached_bytes != npages * 4096)
		pair_note(p, "WARNING: expected %" PRIu64 " folios of 4 KiB", npages);
	/* cross-check: anonymous memory mapped by pc_cache_new, split into
	 * the arena, thread stacks, malloc and the rest ("other", counted
	 * above as metadata: the descriptor table; malloc heaps grow in
	 * steps, so small noise is normal) */
	pair_note(p, "cross-check: anon rw mappings grew %s at pc_cache_new = arena %s + thread stacks %s + "
		  "malloc %s + other %" PRId64 " B", bu_human(m1.anon_rw - m0.anon_rw), bu_human(bo.mem),
		  bu_human(m1.guarded - m0.guarded), bu_human(h1 - h0), other);
done:
	pair_finish_cache(p, c, f);
out:
	pair_judge_own(p, per_folio / 4096.0 * 100.0 <= 2.0, "<= 2 %");
	free(perm);
	free(buf);
}


void suite_metadata(void)
{
	struct pair p = pair_add("metadata", "e. metadata per cached 4 KiB folio", "B/folio", NULL,
				 "pagecache-buffered");
	char path[PATH_MAX];
	uint64_t size = bo.quick ? 16 * BU_MiB : 64 * BU_MiB;

	if (!p.pc) {
		printf("\n(metadata: not run: --only does not select pagecache-buffered)\n");
		return;
	}
	if (size > bo.mem / 2)
		size = (bo.mem / 2) & ~(uint64_t)4095;
	bu_join(path, sizeof(path), bo.dir, "pcbench-meta.dat");
	prog_step_count("e. metadata per folio", "pagecache-buffered", size / 4096, "reads");
	bu_make_file(path, size, 1);
	bench_metadata(&p, path, size);
	prog_step_done();
	unlink(path);
	report_pairs("metadata");
}
