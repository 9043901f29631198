/*
 * test_io_faults.c - fault injection at the I/O layer (src/io/fault.c,
 * src/api/fault_rules.c), on the queue with io_uring and in synchronous
 * mode and through the synchronous calls: the internal fault hook, and the
 * public pc_fault_* rules: which rules are refused, every action (FAIL,
 * SHORT, DELAY), the op and range filters, skip/count/one_in, the order
 * of rules, removal and counters; a failed I/O leaves the buffer and the
 * file as they were and is not counted; a short transfer is really
 * continued.  A case named _uring runs on the synchronous fallback where
 * io_uring is not available (the queue says which).  (test_fault.c covers
 * the rules through the cache's public API; test_io_queue.c failed
 * io_uring submissions.)
 */
#include "io_util.h"

IO_FIXTURE("io_faults")

extern _Atomic long backend_test_continued;

/* ------------------------------------------ which rules are taken */

/* Rules the header calls bad; the table's size; removing unknown ids. */
TEST_CASE(rule_validation_and_table_limit)
{
	struct pc_fault ok = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	ok.error = EIO;
	struct pc_fault bad[12];
	for (int i = 0; i < 12; i++)
		bad[i] = ok;
	bad[0].ops = 0;
	bad[1].ops = 0x100;
	bad[2].action = 7;
	bad[3].error = 0;
	bad[4].error = -EIO;
	bad[5] = rule_of(PC_FAULT_READ | PC_FAULT_SYNC, PC_FAULT_SHORT);
	bad[6] = rule_of(PC_FAULT_READ, PC_FAULT_DELAY); /* delay_ms 0 */
	bad[7].start = -1;
	bad[8].start = 8192;
	bad[8].end = 4096;
	bad[9].start = 4096;
	bad[9].end = 4096;
	bad[10] = rule_of(PC_FAULT_ALLOC, PC_FAULT_SHORT);
	bad[11].end = -5;
	for (int i = 0; i < 12; i++) {
		errno = 0;
		CHECK(pc_fault_inject(cache, &bad[i]) == -1 && errno == EINVAL);
	}
	errno = 0;
	CHECK(pc_fault_inject(NULL, &ok) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pc_fault_inject(cache, NULL) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(NULL, -1) == -1 && errno == EINVAL);
	CHECK(pc_fault_count(NULL, -1) == 0);

	/* At most 16 rules; ids are not reused. */
	ok.start = 1 << 30; /* never matches what the other cases do */
	int ids[16];
	for (int i = 0; i < 16; i++)
		ids[i] = inject(&ok);
	errno = 0;
	CHECK(pc_fault_inject(cache, &ok) == -1 && errno == ENOSPC);
	CHECK(pc_fault_remove(cache, ids[3]) == 0);
	int again = inject(&ok);
	for (int i = 0; i < 16; i++)
		CHECK(again != ids[i]);
	CHECK(pc_fault_remove(cache, 123456) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(cache, -2) == -1 && errno == EINVAL);
	CHECK(pc_fault_remove(cache, -1) == 0);
	CHECK(pc_fault_remove(cache, -1) == 0); /* none left: still fine */
	CHECK(pc_fault_remove(cache, again) == -1 && errno == EINVAL);
}

/* ------------------------------------------------------- fault hook */

static _Atomic int hook_calls;
static _Atomic int hook_fail_op = -1;     /* op to fail, -1: none */
static _Atomic long long hook_fail_off = -1; /* offset to fail, -1: any */

static int test_hook(void *arg, int op, int hfd, off_t off, size_t len)
{
	(void)len;
	CHECK(arg == (void *)&hook_calls);
	CHECK(hfd == fd);
	atomic_fetch_add(&hook_calls, 1);
	if (op == atomic_load(&hook_fail_op) &&
	    (atomic_load(&hook_fail_off) < 0 || atomic_load(&hook_fail_off) == (long long)off))
		return -EIO;
	return 0;
}

/* The internal hook: failed I/O left untouched and not counted, on the
 * queue and through the synchronous calls. */
static void fault_hook(struct pc_ioq *q)
{
	const size_t len = 16384;
	uint8_t *w = abuf(len), *r = abuf(len);
	tu_fill_pattern(w, len, 3, 0);
	REQUIRE(ftruncate(fd, 0) == 0);

	cache_proc(cache)->fault_hook = test_hook;
	cache_proc(cache)->fault_arg = (void *)&hook_calls;
	int calls0 = atomic_load(&hook_calls);

	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);
	CHECK(atomic_load(&hook_calls) == calls0 + 1);

	/* A failed read: -EIO, buffer untouched, not counted. */
	atomic_store(&hook_fail_op, IO_READ);
	atomic_store(&hook_fail_off, 4096);
	struct counters k0 = counters_now();
	memset(r, 0x5a, len);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == -EIO);
	CHECK(r[0] == 0x5a && r[4095] == 0x5a);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096); /* other offsets work */
	struct counters k1 = counters_now();
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + 4096);
	/* Synchronous calls go through the hook too. */
	struct iovec v = {r, 4096};
	CHECK(sync_io_preadv(cache, fd, &v, 1, 4096) == -EIO);
	CHECK(sync_io_preadv(cache, fd, &v, 1, 8192) == 4096);
	CHECK(tu_is_pattern(r, 4096, 3, 8192));

	/* A failed write leaves the file as it was. */
	atomic_store(&hook_fail_op, IO_WRITE);
	atomic_store(&hook_fail_off, -1);
	tu_fill_pattern(w, len, 4, 0);
	CHECK(do_io(q, IO_WRITE, w, 4096, 0, 0) == -EIO);
	struct iovec wv = {w, 4096};
	CHECK(sync_io_pwritev(cache, fd, &wv, 1, 0, 0) == -EIO);
	CHECK(counters_now().wios == k1.wios);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(tu_is_pattern(r, 4096, 3, 0));

	/* fsync can fail too. */
	atomic_store(&hook_fail_op, IO_FDATASYNC);
	CHECK(do_io(q, IO_FDATASYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == 0);

	atomic_store(&hook_fail_op, -1);
	cache_proc(cache)->fault_hook = NULL;
	cache_proc(cache)->fault_arg = NULL;
	free(w);
	free(r);
}

TEST_CASE(fault_hook_fails_io_leaving_data_uring)
{
	run_on_queue(true, fault_hook);
}

TEST_CASE(fault_hook_fails_io_leaving_data_sync)
{
	run_on_queue(false, fault_hook);
}

/* ------------------------------------------- public fault rules (api/fault_rules.c) */

/* A request over buf[0, len) at off in three iovecs (len a multiple of
 * 16 KiB: 1/8, 1/2 and 3/8 of it), submitted and waited for. */
static ssize_t do_io3(struct pc_ioq *q, int op, uint8_t *buf, size_t len, off_t off)
{
	struct group g;
	struct treq t;
	group_init(&g);
	treq_prep(&t, &g, op, NULL, 0, off);
	t.iov[0] = (struct iovec){buf, len / 8};
	t.iov[1] = (struct iovec){buf + len / 8, len / 2};
	t.iov[2] = (struct iovec){buf + len / 8 + len / 2, len - len / 8 - len / 2};
	t.req.iov = t.iov;
	t.req.iovcnt = 3;
	t.req.len = len;
	submit(q, &t);
	group_wait(&g);
	group_destroy(&g);
	CHECK(atomic_load(&t.ndone) == 1);
	return t.res;
}

/* FAIL on reads, writes, flushes and allocations, with the range filter. */
static void rule_fail(struct pc_ioq *q)
{
	const size_t len = 16384;
	uint8_t *w = abuf(len), *r = abuf(len);
	REQUIRE(ftruncate(fd, 0) == 0);
	tu_fill_pattern(w, len, 11, 0);
	CHECK(do_io(q, IO_WRITE, w, len, 0, 0) == (ssize_t)len);

	/* Reads overlapping [4096, 8192) fail with EIO and are not counted. */
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.start = 4096;
	f.end = 8192;
	int id = inject(&f);
	uint64_t all0 = pc_fault_count(cache, -1);
	struct counters k0 = counters_now();
	memset(r, 0x5a, len);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == -EIO);
	CHECK(r[0] == 0x5a);
	CHECK(do_io(q, IO_READ, r, 8192, 0, 0) == -EIO);      /* overlaps the start */
	CHECK(do_io(q, IO_READ, r, 4096, 8192, 0) == 4096);   /* begins at the end */
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);      /* ends at the start */
	CHECK(tu_is_pattern(r, 4096, 11, 0));
	struct iovec v = {r, 4096};
	CHECK(sync_io_preadv(cache, fd, &v, 1, 4096) == -EIO);
	CHECK(counters_now().rios == k0.rios + 2);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_count(cache, -1) == all0 + 3);
	CHECK(do_io(q, IO_WRITE, w + 4096, 4096, 4096, 0) == 4096); /* a write is no read */
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_READ, r, 4096, 4096, 0) == 4096);

	/* Writes fail with ENOSPC and leave the file as it was. */
	f = rule_of(PC_FAULT_WRITE, PC_FAULT_FAIL);
	f.error = ENOSPC;
	id = inject(&f);
	uint8_t *w2 = abuf(len);
	tu_fill_pattern(w2, len, 12, 0);
	CHECK(do_io(q, IO_WRITE, w2, len, 0, 0) == -ENOSPC);
	struct iovec wv = {w2, 4096};
	CHECK(sync_io_pwritev(cache, fd, &wv, 1, 0, 0) == -ENOSPC);
	CHECK(pc_fault_count(cache, id) == 2);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_READ, r, len, 0, 0) == (ssize_t)len);
	CHECK(tu_is_pattern(r, len, 11, 0));

	/* Flushes, queued and synchronous; a flush covers the whole file, so
	 * a range far away still matches. */
	f = rule_of(PC_FAULT_SYNC, PC_FAULT_FAIL);
	f.error = EIO;
	f.start = 1 << 30;
	id = inject(&f);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(do_io(q, IO_FDATASYNC, NULL, 0, 0, 0) == -EIO);
	CHECK(sync_io_fsync(cache, fd, false) == -EIO);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(do_io(q, IO_FSYNC, NULL, 0, 0, 0) == 0);
	CHECK(sync_io_fsync(cache, fd, true) == 0);

	/* Allocation faults are asked for by writeback (fault_check) only. */
	f = rule_of(PC_FAULT_ALLOC, PC_FAULT_FAIL);
	f.error = ENOMEM;
	id = inject(&f);
	CHECK(fault_check(cache, PC_FAULT_ALLOC, fd, 0, 4096) == -ENOMEM);
	CHECK(fault_check(cache, PC_FAULT_WRITE, fd, 0, 4096) == 0);
	CHECK(do_io(q, IO_WRITE, w, 4096, 0, 0) == 4096);
	CHECK(pc_fault_count(cache, id) == 1);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(fault_check(cache, PC_FAULT_ALLOC, fd, 0, 4096) == 0);
	free(w);
	free(w2);
	free(r);
}

TEST_CASE(rule_fail_matches_op_and_range_uring)
{
	run_on_queue(true, rule_fail);
}

TEST_CASE(rule_fail_matches_op_and_range_sync)
{
	run_on_queue(false, rule_fail);
}

/* SHORT: the device moves part, the backend continues: the data is whole
 * and the continuation really ran. */
static void rule_short(struct pc_ioq *q)
{
	const size_t len = 64 * 1024;
	uint8_t *w = abuf(len), *r = abuf(2 * len);
	REQUIRE(ftruncate(fd, 0) == 0);
	tu_fill_pattern(w, len, 13, 0);
	struct pc_fault f = rule_of(PC_FAULT_READ | PC_FAULT_WRITE, PC_FAULT_SHORT);
	int id = inject(&f);
	CHECK(probe_short_len(fd, len) > 0 && probe_short_len(fd, len) <= len / 2);

	/* A vectored write cut inside its second iovec, then a vectored read. */
	long c0 = atomic_load(&backend_test_continued);
	struct counters k0 = counters_now();
	CHECK(do_io3(q, IO_WRITE, w, len, 0) == (ssize_t)len);
	CHECK(atomic_load(&backend_test_continued) == c0 + 1);
	memset(r, 0, len);
	CHECK(do_io3(q, IO_READ, r, len, 0) == (ssize_t)len);
	CHECK(tu_is_pattern(r, len, 13, 0));
	CHECK(atomic_load(&backend_test_continued) == c0 + 2);
	CHECK(pc_fault_count(cache, id) == 2);
	/* One I/O each, counted once with the requested length. */
	struct counters k1 = counters_now();
	CHECK(k1.wios == k0.wios + 1 && k1.wbytes == k0.wbytes + len);
	CHECK(k1.rios == k0.rios + 1 && k1.rbytes == k0.rbytes + len);

	/* Cut at EOF exactly: the continuation finds EOF. */
	memset(r, 0, 2 * len);
	CHECK(do_io(q, IO_READ, r, len, (off_t)len / 2, 0) == (ssize_t)len / 2);
	CHECK(tu_is_pattern(r, len / 2, 13, len / 2));
	/* The first part already crosses EOF. */
	CHECK(do_io(q, IO_READ, r, 2 * len, (off_t)len / 2, 0) == (ssize_t)len / 2);
	CHECK(tu_is_pattern(r, len / 2, 13, len / 2));
	CHECK(pc_fault_count(cache, id) == 4);

	/* Synchronous vector calls are cut too. */
	struct iovec v[2] = {{r, len / 4}, {r + len / 4, 3 * len / 4}};
	memset(r, 0, len);
	long c1 = atomic_load(&backend_test_continued);
	CHECK(sync_io_preadv(cache, fd, v, 2, 0) == (ssize_t)len);
	CHECK(tu_is_pattern(r, len, 13, 0));
	CHECK(atomic_load(&backend_test_continued) == c1 + 1);
	CHECK(pc_fault_count(cache, id) == 5);

	/* An I/O too small to cut (one direct-I/O unit) passes whole and is
	 * not a fault. */
	size_t unit = 1;
	while (probe_short_len(fd, 2 * unit) == 0)
		unit *= 2;
	CHECK(do_io(q, IO_READ, r, unit, 0, 0) == (ssize_t)unit);
	CHECK(pc_fault_count(cache, id) == 5);

	CHECK(pc_fault_remove(cache, id) == 0);
	free(w);
	free(r);
}

TEST_CASE(rule_short_transfer_is_continued_uring)
{
	run_on_queue(true, rule_short);
}

TEST_CASE(rule_short_transfer_is_continued_sync)
{
	run_on_queue(false, rule_short);
}

/* DELAY: the I/O is issued no sooner than delay_ms later (a lower bound
 * only: a loaded machine makes it later, never earlier). */
static void rule_delay(struct pc_ioq *q)
{
	uint8_t *r = abuf(4096);
	REQUIRE(ftruncate(fd, 4096) == 0);
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_DELAY);
	f.delay_ms = 150;
	f.count = 1;
	int id = inject(&f);
	uint64_t t0 = tu_now_ms();
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);
	CHECK(tu_now_ms() - t0 >= 150);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096); /* count 1: spent */
	CHECK(pc_fault_count(cache, id) == 1);
	CHECK(pc_fault_remove(cache, id) == 0);
	free(r);
}

TEST_CASE(rule_delay_issues_no_sooner_uring)
{
	run_on_queue(true, rule_delay);
}

TEST_CASE(rule_delay_issues_no_sooner_sync)
{
	run_on_queue(false, rule_delay);
}

/* Which reads of `n` at offset 0 fail (bit i: the i-th); each must be a
 * clean pass or -EIO. */
static uint64_t fail_pattern(struct pc_ioq *q, uint8_t *r, int n)
{
	uint64_t bits = 0;
	for (int i = 0; i < n; i++) {
		ssize_t res = do_io(q, IO_READ, r, 4096, 0, 0);
		CHECK(res == 4096 || res == -EIO);
		if (res == -EIO)
			bits |= 1ull << i;
	}
	return bits;
}

/* skip/count, rule order, one_in with a seed, remove and count. */
static void rule_selection(struct pc_ioq *q)
{
	uint8_t *r = abuf(4096);
	REQUIRE(ftruncate(fd, 16384) == 0);

	/* skip 2, count 3: pass, pass, fail x3, then spent (still there). */
	struct pc_fault f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.skip = 2;
	f.count = 3;
	int id = inject(&f);
	uint64_t all0 = pc_fault_count(cache, -1);
	CHECK(fail_pattern(q, r, 7) == 0x1c);
	CHECK(pc_fault_count(cache, id) == 3);
	CHECK(pc_fault_remove(cache, id) == 0);
	CHECK(pc_fault_remove(cache, id) == -1 && errno == EINVAL);
	CHECK(pc_fault_count(cache, id) == 0);
	CHECK(pc_fault_count(cache, -1) == all0 + 3); /* removed ones included */

	/* The first rule that fires decides; the next does not see the I/O. */
	struct pc_fault a = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	a.error = EIO;
	a.end = 4096;
	struct pc_fault b = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	b.error = ENOSPC;
	int ida = inject(&a), idb = inject(&b);
	CHECK(ida != idb);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == -EIO);
	CHECK(do_io(q, IO_READ, r, 4096, 8192, 0) == -ENOSPC);
	CHECK(pc_fault_count(cache, ida) == 1 && pc_fault_count(cache, idb) == 1);
	CHECK(pc_fault_remove(cache, -1) == 0);
	CHECK(do_io(q, IO_READ, r, 4096, 0, 0) == 4096);

	/* one_in 3: a seed gives the same faults each time; another seed
	 * others; seed 0 is a fixed default. */
	f = rule_of(PC_FAULT_READ, PC_FAULT_FAIL);
	f.error = EIO;
	f.one_in = 3;
	uint64_t pat[4];
	const uint64_t seeds[4] = {42, 42, 43, 0};
	for (int i = 0; i < 4; i++) {
		f.seed = seeds[i];
		id = inject(&f);
		pat[i] = fail_pattern(q, r, 60);
		CHECK(pc_fault_count(cache, id) == (uint64_t)__builtin_popcountll(pat[i]));
		CHECK(pc_fault_remove(cache, id) == 0);
	}
	CHECK(pat[0] == pat[1]);
	CHECK(pat[0] != pat[2]);
	for (int i = 0; i < 4; i++) /* about a third of 60 */
		CHECK(__builtin_popcountll(pat[i]) >= 5 && __builtin_popcountll(pat[i]) <= 35);
	f.seed = 0;
	id = inject(&f);
	CHECK(fail_pattern(q, r, 60) == pat[3]);
	CHECK(pc_fault_remove(cache, id) == 0);
	free(r);
}

TEST_CASE(rule_skip_count_order_and_seed_uring)
{
	run_on_queue(true, rule_selection);
}

TEST_CASE(rule_skip_count_order_and_seed_sync)
{
	run_on_queue(false, rule_selection);
}
