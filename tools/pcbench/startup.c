/*
 * startup.c - suite startup, the old pcbench's g: how long pc_cache_new
 * takes (default flags, so with the background fault-in) at memory_limit
 * 256 MiB, 1 GiB, 8 GiB and the machine's available memory less 2 GiB;
 * the slowest is judged (target <= 50 ms at any size).  And a
 * memory_limit above what the machine can back must fail with ENOMEM
 * (noted).  One result, pagecache-buffered's.
 */
#include "bench.h"

/* Four sizes that must work and one too big to. */
#define STARTUP_CACHES 5

static double startup_ms(uint64_t bytes, int *err)
{
	struct pc_config cfg;
	struct pc_cache *c;
	uint64_t t0;
	double ms;

	bench_config(&cfg, bytes, 0);
	t0 = bu_now_ns();
	c = pc_cache_new(&cfg);
	ms = bu_secs(bu_now_ns() - t0) * 1e3;
	*err = c ? 0 : errno;
	if (c)
		pc_cache_destroy(c);
	return ms;
}

static uint64_t mem_available(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *fp = fopen("/proc/meminfo", "re");

	while (fp && fgets(line, sizeof(line), fp))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (fp)
		fclose(fp);
	return (uint64_t)kb * 1024;
}

static void bench_startup(const struct pair *p)
{
	uint64_t avail = mem_available();
	uint64_t sizes[4] = { 256 * BU_MiB, BU_GiB, 8 * BU_GiB,
			      avail > 4 * BU_GiB ? (avail - 2 * BU_GiB) & ~(BU_MiB - 1) : 2 * BU_GiB };
	double worst = 0;
	char note[sizeof(p->pc->note)] = "";
	size_t l;
	int err;

	for (int i = 0; i < 4; i++) {
		double ms = startup_ms(sizes[i], &err);

		prog_advance(1);
		l = strlen(note);
		snprintf(note + l, sizeof(note) - l, "%s%s: %.2f ms%s%s", l ? ", " : "", bu_human(sizes[i]), ms,
			 err ? " " : "", err ? strerror(err) : "");
		if (err)
			worst = NAN;
		else if (!isnan(worst) && ms > worst)
			worst = ms;
	}
	uint64_t too_big = avail + 4 * BU_GiB;
	double ms = startup_ms(too_big, &err);
	prog_advance(1);
	pair_note(p, "%s; %s (MemAvailable + 4 GiB): %s after %.2f ms", note, bu_human(too_big),
		  err == ENOMEM ? "ENOMEM, as it must" : err ? strerror(err) : "CREATED (wrong)", ms);
	if (err != ENOMEM)
		worst = NAN;
	res_figure(p->pc, worst);
	pair_judge_own(p, worst <= 50, "<= 50 ms");
}

void suite_startup(void)
{
	struct pair p = pair_add("startup", "g. pc_cache_new, slowest size", "ms", NULL, "pagecache-buffered");

	if (!p.pc) {
		printf("\n(startup: not run: --only does not select pagecache-buffered)\n");
		return;
	}
	prog_step_count("g. pc_cache_new", "kernel, pagecache", STARTUP_CACHES, "caches");
	bench_startup(&p);
	prog_step_done();
	report_pairs("startup");
}
