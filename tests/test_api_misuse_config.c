/*
 * test_api_misuse_config.c - pc_cache_new with each pc_config field out of
 * its documented range fails with EINVAL (include/pagecache.h), at the
 * bounds it makes a cache, and NULL gives the defaults; pc_cache_config
 * reads the settings back resolved.
 *
 * Each case is a table of rows (api_misuse_util.h), each row one or two
 * fields set on top of the small cache's configuration and the expected
 * outcome: -1 with EINVAL, or a cache (destroyed again at once).  A
 * watchdog fails a row that hangs.
 */
#define _GNU_SOURCE
#include "api_misuse_util.h"

#include <limits.h>
#include <stddef.h>

struct cfg_set {
	const char *field;
	size_t off, size;
	uint64_t value;
};
#define SET(f, v) { #f, offsetof(struct pc_config, f), sizeof(((struct pc_config *)0)->f), (uint64_t)(v) }

struct config_row {
	struct cfg_set set[2]; /* on top of small_config(); unused ones have no field */
	long long ret;         /* 0: a cache (destroyed again at once), -1: NULL */
	int err;
	const char *err_name;
};

static void apply_set(struct pc_config *cfg, const struct cfg_set *s)
{
	char *p = (char *)cfg + s->off;
	if (s->size == sizeof(size_t))
		*(size_t *)p = (size_t)s->value;
	else
		*(unsigned *)p = (unsigned)s->value;
}

static long long run_config_row(const struct config_row *r)
{
	struct pc_config cfg = small_config();
	for (unsigned k = 0; k < 2 && r->set[k].field; k++)
		apply_set(&cfg, &r->set[k]);
	struct pc_cache *c = pc_cache_new(&cfg);
	if (!c)
		return -1;
	CHECK(pc_cache_destroy(c) == 0);
	return 0;
}

/* Each row's pc_cache_new, its outcome counted as one check. */
static void run_config_rows(const struct config_row *rows, size_t n)
{
	rows_watchdog();
	unsigned failed = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct config_row *r = &rows[i];
		row_timer_start();
		errno = 0;
		long long got = run_config_row(r);
		int got_err = errno;
		row_timer_stop();
		if (!outcome_ok(got, got_err, r->ret, r->err)) {
			char what[256];
			int len = snprintf(what, sizeof(what), "pc_cache_new(");
			for (unsigned k = 0; k < 2 && r->set[k].field; k++)
				len += snprintf(what + len, sizeof(what) - (size_t)len, "%s%s = %llu", k ? ", " : "",
						r->set[k].field, (unsigned long long)r->set[k].value);
			snprintf(what + len, sizeof(what) - (size_t)len, ")");
			report_row(i, what, got, got_err, r->ret, r->err_name);
			failed++;
		}
	}
	printf("%s: %zu rows, %u failed\n", tu_case_name(), n, failed);
}

/* ------------------------------------------------------------ the cases */

/* memory_limit: at least 1 MiB and 16 folios (after rounding down to
 * 4 KiB), below 16 TiB; 0 is the default. */
TEST_CASE(memory_limit_out_of_range_einval)
{
	const uint64_t TiB = 1024 * 1024 * MiB;
	const struct config_row rows[] = {
		{ { SET(memory_limit, 512 * KiB), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, MiB - 4096), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, MiB + 4095), SET(max_folio_size, 4096) }, GIVES(0) },
		{ { SET(memory_limit, 2 * MiB), SET(max_folio_size, 256 * KiB) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 16 * TiB) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 16 * TiB - 4096) }, FAILS(EINVAL) },
		{ { SET(memory_limit, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(memory_limit, 0) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* max_folio_size: a power of two from 4 KiB to 2 MiB; 0 is the default. */
TEST_CASE(max_folio_size_out_of_range_einval)
{
	const struct config_row rows[] = {
		{ { SET(max_folio_size, 1) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 2048) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 12 * KiB) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 4 * MiB), SET(memory_limit, 128 * MiB) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(max_folio_size, 0) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* block_size: 0, or a power of two from 512 to 64 KiB, at most
 * max_folio_size. */
TEST_CASE(block_size_out_of_range_einval)
{
	const struct config_row rows[] = {
		{ { SET(block_size, 256) }, FAILS(EINVAL) },
		{ { SET(block_size, 1000) }, FAILS(EINVAL) },
		{ { SET(block_size, 128 * KiB), SET(max_folio_size, 256 * KiB) }, FAILS(EINVAL) },
		{ { SET(block_size, 8192), SET(max_folio_size, 4096) }, FAILS(EINVAL) },
		{ { SET(block_size, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(block_size, 64 * KiB) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* dirty_limit_bytes: at most half of memory_limit. */
TEST_CASE(dirty_limit_over_half_memory_einval)
{
	const struct config_row rows[] = {
		{ { SET(dirty_limit_bytes, 2 * MiB + 4096) }, FAILS(EINVAL) },
		{ { SET(dirty_limit_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(dirty_limit_bytes, 2 * MiB) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* dirty_background_bytes: at most dirty_limit_bytes (given or default). */
TEST_CASE(dirty_background_over_dirty_limit_einval)
{
	const struct config_row rows[] = {
		{ { SET(dirty_background_bytes, MiB + 1), SET(dirty_limit_bytes, MiB) }, FAILS(EINVAL) },
		{ { SET(dirty_background_bytes, MiB) }, FAILS(EINVAL) }, /* default limit: 20 % of 4 MiB */
		{ { SET(dirty_background_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(dirty_background_bytes, MiB), SET(dirty_limit_bytes, MiB) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* writeback_threads: at most 64. */
TEST_CASE(writeback_threads_over_64_einval)
{
	const struct config_row rows[] = {
		{ { SET(writeback_threads, 65) }, FAILS(EINVAL) },
		{ { SET(writeback_threads, UINT_MAX) }, FAILS(EINVAL) },
		{ { SET(writeback_threads, 64) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* queue_depth: at most 4096. */
TEST_CASE(queue_depth_over_4096_einval)
{
	const struct config_row rows[] = {
		{ { SET(queue_depth, 4097) }, FAILS(EINVAL) },
		{ { SET(queue_depth, UINT_MAX) }, FAILS(EINVAL) },
		{ { SET(queue_depth, 4096) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* max_io_bytes: a multiple of 4 KiB from 4 KiB to 64 MiB. */
TEST_CASE(max_io_bytes_out_of_range_einval)
{
	const struct config_row rows[] = {
		{ { SET(max_io_bytes, 2048) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 4097) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 64 * MiB + 4096) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, SIZE_MAX) }, FAILS(EINVAL) },
		{ { SET(max_io_bytes, 64 * MiB) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* flags: only PC_CFG_*, and not both no thread (PC_CFG_LAZY_MEMORY) and a
 * thread that faults in all of the memory (PC_CFG_EAGER_MEMORY). */
TEST_CASE(unknown_or_contrary_flags_einval)
{
	const struct config_row rows[] = {
		{ { SET(flags, 0x100) }, FAILS(EINVAL) },
		{ { SET(flags, 0x6f | PC_CFG_EAGER_MEMORY) }, GIVES(0) },
		{ { SET(flags, 0x7f) }, GIVES(0) },
		{ { SET(flags, 0x80000000u) }, FAILS(EINVAL) },
		{ { SET(flags, UINT_MAX) }, FAILS(EINVAL) },
		{ { SET(flags, PC_CFG_LAZY_MEMORY | PC_CFG_EAGER_MEMORY) }, FAILS(EINVAL) },
	};
	run_config_rows(ROWS(rows));
}

/* max_closed_files: at most 1048576. */
TEST_CASE(max_closed_files_over_limit_einval)
{
	const struct config_row rows[] = {
		{ { SET(max_closed_files, (1u << 20) + 1) }, FAILS(EINVAL) },
		{ { SET(max_closed_files, 1u << 20) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}

/* edge_budget_bytes: at most memory_limit / 2 (of 4 MiB here). */
TEST_CASE(edge_budget_over_half_memory_einval)
{
	const struct config_row rows[] = {
		{ { SET(edge_budget_bytes, (2u << 20) + 1) }, FAILS(EINVAL) },
		{ { SET(edge_budget_bytes, 2u << 20) }, GIVES(0) },
		{ { SET(edge_budget_bytes, SIZE_MAX) }, FAILS(EINVAL) },
	};
	run_config_rows(ROWS(rows));
}

/* Fields with no error: limited (documented) or any value. */
TEST_CASE(unbounded_fields_take_any_value)
{
	const struct config_row rows[] = {
		{ { SET(readahead_max_bytes, SIZE_MAX) }, GIVES(0) },
		{ { SET(uncached_kick_bytes, SIZE_MAX) }, GIVES(0) },
		{ { SET(dirty_expire_ms, UINT_MAX) }, GIVES(0) },
		{ { SET(edge_expire_ms, UINT_MAX) }, GIVES(0) },
	};
	run_config_rows(ROWS(rows));
}


/* pc_cache_new(NULL): a cache with the defaults, which pc_cache_config
 * reads back resolved (pagecache.h's comments on struct pc_config). */
TEST_CASE(null_config_gives_defaults)
{
	errno = 0;
	struct pc_cache *d = pc_cache_new(NULL);
	REQUIRE(d != NULL);
	struct pc_config cfg;
	memset(&cfg, 0xff, sizeof(cfg));
	CHECK(pc_cache_config(d, &cfg) == 0);
	CHECK(cfg.memory_limit == 256 * MiB);
	CHECK(cfg.max_folio_size == 256 * KiB);
	CHECK(cfg.block_size == 0); /* from each file */
	CHECK(cfg.dirty_limit_bytes == cfg.memory_limit / 5);
	CHECK(cfg.dirty_background_bytes == cfg.dirty_limit_bytes / 2);
	CHECK(cfg.dirty_expire_ms == 3000);
	CHECK(cfg.writeback_threads == 1);
	CHECK(cfg.queue_depth == 64);
	CHECK(cfg.max_io_bytes == MiB);
	CHECK(cfg.readahead_max_bytes == 8 * MiB);
	CHECK(cfg.uncached_kick_bytes == 8 * MiB);
	CHECK(cfg.edge_expire_ms == 5000);
	CHECK(cfg.edge_budget_bytes == cfg.memory_limit / 4);
	CHECK(cfg.max_closed_files > 0);
	CHECK(cfg.flags == 0);
	CHECK(pc_cache_destroy(d) == 0);
}

/* What pc_cache_config reads back is what the cache made of the fields
 * given: rounded and lowered as pc_cache_new(3) says, the rest as given. */
TEST_CASE(config_reads_back_resolved_settings)
{
	struct pc_config in;
	pc_config_init(&in);
	in.memory_limit = 16 * MiB + 4097;
	in.max_folio_size = 64 * KiB;
	in.readahead_max_bytes = SIZE_MAX;
	in.uncached_kick_bytes = SIZE_MAX;
	in.queue_depth = 8;
	in.flags = PC_CFG_NO_IO_URING;
	struct pc_cache *c = pc_cache_new(&in);
	REQUIRE(c != NULL);
	struct pc_config cfg;
	CHECK(pc_cache_config(c, &cfg) == 0);
	CHECK(cfg.memory_limit == 16 * MiB + 4096); /* whole pages */
	CHECK(cfg.max_folio_size == 64 * KiB);
	CHECK(cfg.readahead_max_bytes == cfg.memory_limit / 4);
	CHECK(cfg.uncached_kick_bytes == cfg.dirty_background_bytes / 2);
	CHECK(cfg.queue_depth == 8);
	CHECK(cfg.flags == PC_CFG_NO_IO_URING);
	/* A cache made from what it reads back has the same settings. */
	struct pc_cache *again = pc_cache_new(&cfg);
	REQUIRE(again != NULL);
	struct pc_config cfg2;
	CHECK(pc_cache_config(again, &cfg2) == 0);
	CHECK(memcmp(&cfg, &cfg2, sizeof(cfg)) == 0);
	errno = 0;
	CHECK(pc_cache_config(NULL, &cfg) == -1 && errno == EINVAL);
	errno = 0;
	CHECK(pc_cache_config(c, NULL) == -1 && errno == EINVAL);
	CHECK(pc_cache_destroy(again) == 0);
	CHECK(pc_cache_destroy(c) == 0);
}
