/*
 * pairs.c - the lines of the old pcbench's workloads (read's warm reads
 * and hits, readahead, files, startup, metadata): each line is a base
 * (kernel-buffered, or what else the line compares with: memcpy, pagecache
 * itself with 1 thread or two handles) beside the figure judged
 * (pagecache-buffered, or another path), as two results of report.c, each
 * there only when --only selects its path.  Here: adding them, their
 * notes and failures, their caches, and their targets; report_pairs
 * prints them as the old pcbench's table.  And the median of paired
 * ratios, which interleaved's table 3 takes too.
 */
#include "bench.h"

struct pair pair_add(const char *suite, const char *workload, const char *unit, const char *base,
		     const char *pc)
{
	struct pair p = { .base_path = base };

	if (base && name_selected(base)) {
		p.base = res_add(suite, workload, base);
		p.base->is_base = true;
		snprintf(p.base->unit, sizeof(p.base->unit), "%s", unit);
	}
	if (name_selected(pc)) {
		p.pc = res_add(suite, workload, pc);
		snprintf(p.pc->unit, sizeof(p.pc->unit), "%s", unit);
	}
	return p;
}

bool pair_any(const struct pair *p)
{
	return p->base || p->pc;
}

struct bres *pair_noted(const struct pair *p)
{
	return p->pc ? p->pc : p->base;
}

void pair_note(const struct pair *p, const char *fmt, ...)
{
	struct bres *r = pair_noted(p);
	char b[sizeof(r->note)];
	va_list ap;

	if (!r)
		return;
	va_start(ap, fmt);
	vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	res_note(r, "%s", b);
}

void pair_fail(const struct pair *p, const char *what)
{
	int e = errno;
	struct bres *r = pair_noted(p);

	fprintf(stderr, "pcbench: %s: %s failed: %s (errno %d)\n", r ? r->workload : "?", what, strerror(e), e);
	pair_note(p, "%s failed: %s (errno %d)", what, strerror(e), e);
	res_figure(p->pc, NAN);
	errno = e;
}

/* A result without a figure: its error (the note says why). */
static void mark_unmeasured(struct bres *r)
{
	if (r && isnan(r->value) && !r->error[0])
		snprintf(r->error, sizeof(r->error), "not measured (see note)");
}

void pair_judge(const struct pair *p, double min, const char *target)
{
	struct bres *pc = p->pc;

	if (pc && target) {
		double base = res_value(p->base);

		if (isnan(pc->value))
			res_target(pc, false, "%s", target);
		else if (!p->base)
			res_target_na(pc, p->base_path, "%s", target);
		else if (isnan(base) || base <= 0)
			res_target(pc, false, "%s", target);
		else
			res_target(pc, (isnan(pc->ratio) ? pc->value / base : pc->ratio) >= min, "%s", target);
	}
	mark_unmeasured(p->base);
	mark_unmeasured(pc);
}

void pair_judge_own(const struct pair *p, bool ok, const char *target)
{
	if (p->pc)
		res_target(p->pc, ok && !isnan(p->pc->value), "%s", target);
	mark_unmeasured(p->base);
	mark_unmeasured(p->pc);
}

struct pc_cache *pair_cache(const struct pair *p, uint64_t min_mem, size_t readahead_max)
{
	struct pc_config cfg;
	struct pc_cache *c;

	/* a cache in use: see bench_cache_new */
	bench_config(&cfg, bo.mem > min_mem ? bo.mem : min_mem, PC_CFG_EAGER_MEMORY);
	if (readahead_max != (size_t)-1)
		cfg.readahead_max_bytes = readahead_max;
	c = bench_cache_from(&cfg);
	if (!c)
		pair_fail(p, "pc_cache_new");
	return c;
}

void pair_finish_cache(const struct pair *p, struct pc_cache *c, struct pc_file *f)
{
	if (f && pc_close(f) < 0)
		pair_fail(p, "pc_close");
	if (c && pc_cache_destroy(c) < 0)
		pair_fail(p, "pc_cache_destroy");
}

void pair_note_io(const struct pair *p, const char *when, const struct pc_stats *d)
{
	pair_note(p, "pagecache %s: device reads %" PRIu64 " (%s), writes %" PRIu64 " (%s), hit %s, miss %s, "
		  "io_uring %u", when, d->dev_read_ios, bu_human(d->dev_read_bytes), d->dev_write_ios,
		  bu_human(d->dev_write_bytes), bu_human(d->hit_bytes), bu_human(d->miss_bytes), d->io_uring);
}

double median_ratio(const double *num, const double *den, int n)
{
	double q[n];

	for (int i = 0; i < n; i++)
		q[i] = num[i] / (den ? den[i] : 1.0);
	return bu_median(q, n);
}
