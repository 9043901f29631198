/*
 * hits.c - timed random 4 KiB reads of a warm file, the threads that make
 * them (read's a and h), and h: cache hits at memory speed (issue 10).
 *
 * h: warm 4 KiB random reads of a 128 MiB file (twice the CPU's cache,
 * 64 MiB at least, with --quick) and of one the CPU's cache holds,
 * through a 512 MiB cache, against the kernel's pread of the same file
 * and against the limit the memory allows: a bare 4 KiB memcpy of the
 * same random pattern out of a hugepage-backed anonymous buffer of the
 * same size.  One thread, then two threads sharing one handle (and one
 * kernel descriptor).  Then the zero-copy pair (pc_read_begin +
 * pc_read_end of the same 4 KiB, one thread) against the kernel's pread.
 * Every thread uses its own random sequence; ops/s are summed over the
 * threads.  --only selects the runs whose lines it selects.
 */
#include "bench.h"

/*
 * HIT_LOOKUP: the bare memcpy again, but with its source found the way any
 * cache must find a cached piece before it can copy it: through memory,
 * here the dependent loads a hit on pagecache's index of a file of 256 KiB
 * folios makes (handle -> file -> root node [-> interior node, in a file
 * over 16 MiB] -> the 256 KiB piece), and nothing else: no check, no
 * count, no call.  Where the memcpy line computes its source from the
 * offset alone, this one shows what the lookup by itself costs on this
 * machine: a reference between the bare copy and a hit, not a target.
 */
#define LK_PIECE_SHIFT 18 /* 256 KiB pieces */
struct lk_node {
	const void *slot[64];
};
struct lk_file {
	const struct lk_node *root;
	bool two_levels; /* root -> interior nodes -> pieces, else root -> pieces */
};
struct lk_handle {
	const struct lk_file *file;
};

static int hit_one(struct hit_arg *a, char *buf, off_t off)
{
	switch (a->kind) {
	case HIT_KERNEL:
		return pread(a->fd, buf, 4096, off) == 4096 ? 0 : -1;
	case HIT_PAGECACHE:
		return pc_pread(a->f, buf, 4096, off, 0) == 4096 ? 0 : -1;
	case HIT_SPAN: {
		/* The zero-copy pair: a pointer to the cached bytes, no copy. */
		struct pc_span s;

		if (pc_read_begin(a->f, off, 4096, 0, &s) != 4096)
			return -1;
		pc_read_end(&s);
		return 0;
	}
	case HIT_MEMCPY:
		memcpy(buf, a->mem + off, 4096);
		/* Keep the copy from being optimised away. */
		__asm__ volatile("" : : "r"(buf) : "memory");
		return 0;
	case HIT_LOOKUP: {
		uint64_t piece = (uint64_t)off >> LK_PIECE_SHIFT;
		const struct lk_file *file = a->lk->file;
		const struct lk_node *n = file->root;
		if (file->two_levels)
			n = n->slot[(piece >> 6) & 63];
		const char *src = n->slot[piece & 63];

		memcpy(buf, src + (off & ((1 << LK_PIECE_SHIFT) - 1)), 4096);
		/* As above; the clobber also makes every iteration load the
		 * way again. */
		__asm__ volatile("" : : "r"(buf) : "memory");
		return 0;
	}
	}
	return -1;
}

static void *hit_thread(void *p)
{
	struct hit_arg *a = p;
	char *buf = bu_alloc_aligned(4096, 4096);
	struct bu_rng rng;

	bu_rng_seed(&rng, a->seed);
	pthread_barrier_wait(a->start);
	for (;;) {
		for (int i = 0; i < 256; i++) {
			off_t off = (off_t)(bu_rng_below(&rng, a->npages) * 4096);

			if (hit_one(a, buf, off) < 0) {
				a->err = errno ? errno : EIO;
				goto out;
			}
		}
		a->ops += 256;
		if (bu_now_ns() >= a->deadline)
			break;
	}
out:
	free(buf);
	return NULL;
}

double hit_run(const struct hit_arg *proto, int nthreads)
{
	struct hit_arg a[2];
	pthread_t t[2];
	pthread_barrier_t start;
	uint64_t t0, ops = 0;
	int err = 0;

	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		a[i] = *proto;
		a[i].seed = 42 + (unsigned)i;
		a[i].start = &start;
		a[i].ops = 0;
		a[i].err = 0;
		a[i].deadline = UINT64_MAX;
	}
	t0 = bu_now_ns() + 1000000;
	for (int i = 0; i < nthreads; i++) {
		a[i].deadline = t0 + (uint64_t)(bo.seconds * 1e9);
		if (pthread_create(&t[i], NULL, hit_thread, &a[i]))
			bu_die("pthread_create:");
	}
	pthread_barrier_wait(&start);
	t0 = bu_now_ns();
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		ops += a[i].ops;
		if (a[i].err)
			err = a[i].err;
	}
	double secs = bu_secs(bu_now_ns() - t0);
	pthread_barrier_destroy(&start);
	if (err) {
		errno = err;
		return NAN;
	}
	return (double)ops / secs;
}

double kernel_hit_run(const struct hit_arg *proto, int nthreads, int64_t *read_bytes)
{
	int64_t r0 = bu_proc_read_bytes();
	double ops = hit_run(proto, nthreads);
	int64_t r1 = bu_proc_read_bytes();

	if (r0 >= 0 && r1 > r0)
		*read_bytes += r1 - r0;
	return ops;
}

void kernel_read_all(int fd, char *buf, size_t chunk)
{
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, chunk, off)) > 0)
		off += n;
	if (n < 0)
		bu_die("pread:");
}

static int pc_read_all(struct pc_file *f, char *buf, size_t chunk)
{
	off_t off = 0;
	ssize_t n;

	while ((n = pc_pread(f, buf, chunk, off, 0)) > 0)
		off += n;
	return n < 0 ? -1 : 0;
}

struct pc_file *pc_open_warm(const struct pair *p, struct pc_cache *c, const char *path, char *buf)
{
	struct pc_file *f = pc_open(c, path, O_RDONLY, 0);

	if (!f) {
		pair_fail(p, "pc_open(O_RDONLY)");
		return NULL;
	}
	if (pc_read_all(f, buf, BU_MiB) < 0) {
		pair_fail(p, "pc_pread (warming, 1 MiB)");
		pc_close(f);
		return NULL;
	}
	return f;
}

bool check_all_hits(const struct pair *p, const struct pc_stats *d, int64_t kernel_read_bytes)
{
	if (kernel_read_bytes > 0)
		pair_note(p, "kernel: %s read from the device while timed (/proc/self/io)",
			  bu_human((uint64_t)kernel_read_bytes));
	if (!d || !d->dev_read_ios)
		return true;
	pair_note(p, "NOT ALL HITS: pagecache read %" PRIu64 " times from the device while timed, so no figure",
		  d->dev_read_ios);
	return false;
}

/* The way to mem's 256 KiB pieces for HIT_LOOKUP, laid out like
 * pagecache's index of a file of 256 KiB folios (NULL if fsize is over
 * the 1 GiB it covers); lk_free frees it. */
static struct lk_handle *lk_build(const char *mem, uint64_t fsize)
{
	uint64_t pieces = fsize >> LK_PIECE_SHIFT;

	if (pieces > 64 * 64)
		return NULL;
	struct lk_handle *h = calloc(1, sizeof(*h));
	struct lk_file *f = calloc(1, sizeof(*f));
	struct lk_node *root = calloc(1, sizeof(*root));
	if (!h || !f || !root)
		bu_die("calloc:");
	f->root = root;
	h->file = f;
	f->two_levels = pieces > 64;
	if (!f->two_levels) {
		for (uint64_t i = 0; i < pieces; i++)
			root->slot[i] = mem + (i << LK_PIECE_SHIFT);
		return h;
	}
	for (uint64_t i = 0; i < pieces; i++) {
		struct lk_node *inner = (struct lk_node *)root->slot[i >> 6];
		if (!inner) {
			inner = calloc(1, sizeof(*inner));
			if (!inner)
				bu_die("calloc:");
			root->slot[i >> 6] = inner;
		}
		inner->slot[i & 63] = mem + (i << LK_PIECE_SHIFT);
	}
	return h;
}

static void lk_free(struct lk_handle *h)
{
	if (!h)
		return;
	struct lk_node *root = (struct lk_node *)h->file->root;
	for (int i = 0; h->file->two_levels && i < 64; i++)
		free((void *)root->slot[i]);
	free(root);
	free((void *)h->file);
	free(h);
}

/* ---------------------------------------------------------------- h */

/* Rounds of every kind of run, interleaved, so that a change of the
 * machine's speed (other guests, frequency) hits all of them alike.  The
 * ratios are the medians of each round's own ratios: the two runs a ratio
 * compares follow each other, so a spell of a slow machine (it comes and
 * goes within seconds here) slows both or neither, where a quotient of two
 * medians taken over different rounds moved far more between runs of
 * pcbench (docs/results.md, "Figures the code's comments used to carry",
 * Hits). */
#define HIT_ROUNDS 7

/*
 * The runs of a round, in the order they run: kernel 2 threads, memcpy 2,
 * memcpy behind the lookup, memcpy 1, pagecache 1, kernel 1, pagecache 2,
 * span.  Every pair a ratio compares follows each other (pagecache 1 vs
 * memcpy 1 and vs kernel 1, lookup vs memcpy 1) or has one run between
 * them (pagecache 2 vs 1, memcpy 2 vs 1, span vs kernel 1), pagecache 2
 * vs kernel 2 (no target) five: all in the same round.
 */
enum { R_K2, R_M2, R_L1, R_M1, R_P1, R_K1, R_P2, R_S1, R_RUNS };

/* The lines of one file size, in the order of the table. */
enum { H_K, H_M, H_2, H_S, H_K2, H_M2, H_MK, H_L, H_LINES };

/* What each line compares (the run of its base column and of its
 * figure), and its target. */
static const struct hit_line {
	const char *what, *target, *base, *pc;
	double min;
	int base_run, pc_run;
} hit_lines[H_LINES] = {
	[H_K] = { "hit, 1 thread (vs kernel)", ">= 2.5x", "kernel-buffered", "pagecache-buffered", 2.5, R_K1, R_P1 },
	[H_M] = { "hit, 1 thread (vs memcpy)", ">= 0.75x", "memcpy", "pagecache-buffered", 0.75, R_M1, R_P1 },
	[H_2] = { "hit, 2 threads (vs 1 thread)", ">= 1.8x", "pagecache-buffered-1-thread",
		  "pagecache-buffered-2-threads", 1.8, R_P1, R_P2 },
	[H_S] = { "span begin+end (vs kernel)", ">= 10x", "kernel-buffered", "pagecache-span", 10, R_K1, R_S1 },
	/* no target of its own: the kernel's 2 threads beside pagecache's */
	[H_K2] = { "hit, 2 threads (vs kernel 2 threads)", NULL, "kernel-buffered-2-threads",
		   "pagecache-buffered-2-threads", 0, R_K2, R_P2 },
	/* No target either: how far the machine itself scales the bare copy
	 * from one thread to two (memory bandwidth, what the host lets two
	 * vCPUs do), beside the 2-thread line's ratio.  Not a ceiling of it:
	 * a hit does more than copy, and that part scales further (the hits
	 * have scaled more than the bare copy from one thread to two:
	 * docs/results.md, "Figures the code's comments used to carry",
	 * Hits). */
	[H_M2] = { "memcpy, 2 threads (vs memcpy 1 thread)", NULL, "memcpy", "memcpy-2-threads", 0, R_M1, R_M2 },
	/* No targets: what the memory allows against the kernel (the most
	 * the 1-thread hit could reach), and what finding the source through
	 * memory costs the bare copy by itself (HIT_LOOKUP). */
	[H_MK] = { "memcpy, 1 thread (vs kernel)", NULL, "kernel-buffered", "memcpy", 0, R_K1, R_M1 },
	[H_L] = { "memcpy behind a lookup (vs memcpy)", NULL, "memcpy", "memcpy-behind-lookup", 0, R_M1, R_L1 },
};

/* The notes of the lines other than the first, once measured. */
static const char *const hit_notes[H_LINES] = {
	[H_M] = "\"kernel\" column: the bare memcpy of the same pattern (a 4 KiB memcpy the compiler may inline: "
		"gcc makes it rep movsq), as in the other memcpy rows; pagecache column: the same measurement as "
		"the vs-kernel row's",
	[H_2] = "\"kernel\" column: pagecache with 1 thread, the same measurement as the vs-kernel row's pagecache "
		"column",
	[H_S] = "\"kernel\" column: the same measurement as the vs-kernel row's",
	[H_K2] = "no target; pagecache column: the same measurement as the 2-thread row's",
	[H_M2] = "no target; the machine's own scaling of the bare copy, for comparison with the 2-thread row",
	[H_MK] = "no target; the bare memcpy against the kernel's pread, both the measurements of the rows above: "
		 "the most a 1-thread hit could reach on this machine",
};

/* What the runs of the file go through. */
struct hit_setup {
	struct hit_arg run[R_RUNS];
	char *mem;         /* the memcpy lines' buffer, NULL if none runs */
	struct pc_cache *c;
	uint64_t cmem;     /* the cache's memory_limit */
	struct pc_stats d; /* the cache's stats over the timed phases */
	int64_t kr;        /* what the kernel read from the device meanwhile */
};

/* Opens what the runs selected need (a warm kernel descriptor, the
 * memcpy buffer and its lookup, a warm cache); false after a failure
 * (noted in np). */
static bool hit_open(struct hit_setup *h, const bool need[R_RUNS], const struct pair *np, const char *path,
		     uint64_t fsize, char *buf)
{
	struct hit_arg mc = { .npages = fsize / 4096, .kind = HIT_MEMCPY, .fd = -1 };

	for (int i = 0; i < R_RUNS; i++)
		h->run[i] = mc;
	if (need[R_M1] || need[R_M2] || need[R_L1]) {
		/* The limit line: the same random pattern out of plain memory. */
		h->mem = mmap(NULL, fsize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (h->mem == MAP_FAILED)
			bu_die("mmap %s:", bu_human(fsize));
		madvise(h->mem, fsize, MADV_HUGEPAGE);
		memset(h->mem, 0x5a, fsize);
		for (int i = 0; i < R_RUNS; i++)
			h->run[i].mem = h->mem;
		h->run[R_L1].kind = HIT_LOOKUP;
		h->run[R_L1].lk = lk_build(h->mem, fsize);
		if (!h->run[R_L1].lk)
			bu_die("pcbench: a %s file is over what the lookup line covers", bu_human(fsize));
	}
	if (need[R_K1] || need[R_K2]) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			bu_die("open %s:", path);
		kernel_read_all(fd, buf, BU_MiB);
		h->run[R_K1].kind = h->run[R_K2].kind = HIT_KERNEL;
		h->run[R_K1].fd = h->run[R_K2].fd = fd;
	}
	if (!need[R_P1] && !need[R_P2] && !need[R_S1])
		return true;

	struct pc_config cfg;
	/* Without the background fault-in of the other 384 MiB, which would
	 * otherwise run on one of the two cores during the first rounds: the
	 * warming read faults in all the memory the hits touch. */
	bench_config(&cfg, h->cmem, PC_CFG_LAZY_MEMORY);
	h->c = bench_cache_from(&cfg);
	if (!h->c) {
		pair_fail(np, "pc_cache_new");
		return false;
	}
	struct pc_file *f = pc_open_warm(np, h->c, path, buf);
	if (!f)
		return false;
	h->run[R_P1].kind = h->run[R_P2].kind = HIT_PAGECACHE;
	h->run[R_S1].kind = HIT_SPAN;
	h->run[R_P1].f = h->run[R_P2].f = h->run[R_S1].f = f;
	return true;
}

static void hit_close(struct hit_setup *h, const struct pair *np, uint64_t fsize)
{
	pair_finish_cache(np, h->c, h->run[R_P1].f);
	if (h->run[R_K1].fd >= 0)
		close(h->run[R_K1].fd);
	lk_free((struct lk_handle *)h->run[R_L1].lk);
	if (h->mem)
		munmap(h->mem, fsize);
}

/* The rounds of the runs needed, v[run][round]; false after a failed
 * pagecache run (noted in np). */
static bool hit_rounds(struct hit_setup *h, const bool need[R_RUNS], const struct pair *np,
		       double v[R_RUNS][HIT_ROUNDS])
{
	static const int threads[R_RUNS] = { [R_K2] = 2, [R_M2] = 2, [R_P2] = 2 };
	struct pc_stats st0, st1;
	double secs = bo.seconds;
	bool ok = true;

	/* Each timed run lasts --seconds / HIT_ROUNDS. */
	bo.seconds = secs / HIT_ROUNDS;
	if (h->c)
		pc_cache_stats(h->c, &st0);
	for (int i = 0; i < HIT_ROUNDS && ok; i++) {
		for (int r = 0; r < R_RUNS; r++) {
			int n = threads[r] ? threads[r] : 1;

			if (!need[r])
				v[r][i] = NAN;
			else if (h->run[r].kind == HIT_KERNEL)
				v[r][i] = kernel_hit_run(&h->run[r], n, &h->kr);
			else
				v[r][i] = hit_run(&h->run[r], n);
		}
		if ((need[R_P1] && isnan(v[R_P1][i])) || (need[R_P2] && isnan(v[R_P2][i])) ||
		    (need[R_S1] && isnan(v[R_S1][i]))) {
			pair_fail(np, "pc_pread / pc_read_begin");
			ok = false;
		}
	}
	bo.seconds = secs;
	if (ok && h->c) {
		pc_cache_stats(h->c, &st1);
		bench_stats_delta(&h->d, &st0, &st1);
		pair_note_io(np, "timed phases", &h->d);
		/* How the file is cached (a file of small folios costs a hit
		 * more descriptor and index lines than one of large folios). */
		pair_note(np, "%" PRIu64 " folios cached", st1.folios);
	}
	return ok;
}

void bench_hits(const char *path, uint64_t fsize)
{
	struct pair p[H_LINES];
	const struct pair *np = NULL; /* the line of the general notes */
	bool need[R_RUNS] = { false };
	double v[R_RUNS][HIT_ROUNDS];
	/* a cache of twice the file at least: every read a hit */
	struct hit_setup h = { .cmem = 2 * fsize > 512 * BU_MiB ? 2 * fsize : 512 * BU_MiB };

	for (int i = 0; i < H_LINES; i++) {
		const struct hit_line *l = &hit_lines[i];
		char name[96];

		/* bench_hits runs for two file sizes: the size is in the name */
		snprintf(name, sizeof(name), "h. 4 KiB %s, %s file", l->what, bu_human(fsize));
		p[i] = pair_add("read", name, "ops/s", l->base, l->pc);
		need[l->base_run] |= p[i].base != NULL;
		need[l->pc_run] |= p[i].pc != NULL;
		if (!np && pair_any(&p[i]))
			np = &p[i];
	}
	if (!np)
		return;
	bu_make_file(path, fsize, 1);
	char *buf = bu_alloc_aligned(BU_MiB, 4096);
	if (!hit_open(&h, need, np, path, fsize, buf) || !hit_rounds(&h, need, np, v))
		goto out;
	bool hits = check_all_hits(np, h.c ? &h.d : NULL, h.kr);
	for (int i = 0; i < H_LINES; i++) {
		const struct hit_line *l = &hit_lines[i];
		int b = l->base_run, f = l->pc_run;
		/* Pagecache's runs give no figure if they were not all hits. */
		bool ok_b = hits || (b != R_P1 && b != R_P2 && b != R_S1);
		bool ok_f = hits || (f != R_P1 && f != R_P2 && f != R_S1);

		if (p[i].pc && p[i].base && ok_f && ok_b)
			p[i].pc->ratio = median_ratio(v[f], v[b], HIT_ROUNDS);
		res_figure(p[i].base, p[i].base && ok_b ? median_ratio(v[b], NULL, HIT_ROUNDS) : NAN);
		res_figure(p[i].pc, p[i].pc && ok_f ? median_ratio(v[f], NULL, HIT_ROUNDS) : NAN);
	}
	pair_note(np, "file %s, cache %s (PC_CFG_LAZY_MEMORY; at least twice the file, all hits); medians of %d "
		  "interleaved rounds (kernel 2 threads, memcpy 2 threads, memcpy behind a lookup, memcpy, pagecache, "
		  "kernel, pagecache 2 threads, span) of %.2f s each; ratios: medians of the rounds' own ratios",
		  bu_human(fsize), bu_human(h.cmem), HIT_ROUNDS, bo.seconds / HIT_ROUNDS);
	for (int i = 0; i < H_LINES; i++)
		if (hit_notes[i])
			pair_note(&p[i], "%s", hit_notes[i]);
	if (h.mem)
		pair_note(&p[H_L], "no target; the bare memcpy with its source found through %d dependent loads "
			  "(handle, file, root%s: what a hit on a file of 256 KiB folios loads), no check, no count, "
			  "no call: what finding the data costs the copy by itself",
			  h.run[R_L1].lk->file->two_levels ? 4 : 3,
			  h.run[R_L1].lk->file->two_levels ? ", interior node" : "");
out:
	hit_close(&h, np, fsize);
	for (int i = 0; i < H_LINES; i++)
		pair_judge(&p[i], hit_lines[i].min, hit_lines[i].target);
	free(buf);
}
