/*
 * pcbench - pagecache against the kernel's page cache, every seed
 * measurement in one program:
 *
 *   pcbench [SUITE...] [options]
 *
 * Every suite runs its paths in this process on the same file system, one
 * after the other, and states each result's target and PASS/FAIL.  The
 * exit status is 0 even when a target is missed (a benchmark, not a test);
 * 2 for bad arguments.  See usage() for the suites, paths and options.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

struct bench_opts bo = {
	.dir = ".",
	.threads = 32,
	.procs = 4,
};

struct suite {
	const char *name;
	const char *letters;   /* the old pcbench's letters it holds */
	void (*run)(void);
	bool by_default;
	double est_s[3];       /* expected seconds: quick, default, full */
};

/* In the order they run; --help says what each measures. */
static const struct suite suites[] = {
	{ "interleaved", "", suite_interleaved, true, { 10, 80, 670 } },
	{ "dontcache", "c", suite_dontcache, true, { 5, 30, 50 } },
	{ "fstime", "b", suite_fstime, true, { 2, 15, 20 } },
	{ "read", "adh", suite_read, true, { 4, 36, 55 } },
	{ "readahead", "r", suite_readahead, true, { 5, 15, 30 } },
	{ "files", "f", suite_files, true, { 10, 20, 20 } },
	{ "startup", "g", suite_startup, true, { 1, 1, 1 } },
	{ "metadata", "e", suite_metadata, true, { 1, 6, 6 } },
	{ "shared", "", suite_shared, true, { 6, 30, 35 } },
	{ "firstwrites", "G", suite_firstwrites, false, { 240, 240, 240 } },
#ifdef PCBENCH_SQLITE
	{ "sqlite", "", suite_sqlite, true, { 5, 150, 150 } },
#endif
};
#define NSUITES (int)(sizeof(suites) / sizeof(suites[0]))

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: pcbench [SUITE...] [options]\n"
		"\n"
		"Runs the suites named (all but firstwrites when none is), each comparing\n"
		"pagecache with the kernel's page cache in this process on the files of\n"
		"--dir.  The default run takes 2 to 4 minutes on 2 cores at reduced sizes;\n"
		"--full uses the seeds' sizes; --quick is a smoke run of every suite.\n"
		"\n"
		"suites (an old pcbench letter in brackets names the suite that holds it):\n"
		"  interleaved  32 threads write interleaved records (47008, 6000, 49152 B) to\n"
		"               a new file and over existing data, and 6000 B records with\n"
		"               PC_DONTCACHE into a new cache (table 3): MiB/s, device reads per\n"
		"               write, bytes cached after fsync (seed dontcache-edge-pages;\n"
		"               was edgebench); every path, +dsync too (buffered+dsync is\n"
		"               the seed's base for dontcache+dsync)\n"
		"  dontcache    [c] one sequential writer (p50/p99/p99.9 latency, peak dirty),\n"
		"               random 4 KiB writes, 4 writers one file each, 32 files written\n"
		"               at once (peak dirty kernel-buffered vs uncached), competing\n"
		"               writers (buffered vs uncached, and buffered vs buffered, each\n"
		"               pair over one window of --seconds, 0.5 s at least) with each\n"
		"               one's share (seed dontcache-writeback-kick); buffered,\n"
		"               dontcache, direct paths\n"
		"  fstime       [b] UnixBench fstime-w: 1 KiB writes rewriting a 2000-block file\n"
		"               for a fixed time, pagecache with 1 KiB and 4 KiB blocks in large\n"
		"               folios; 4 KiB overwrites into large folios (seed\n"
		"               iomap-subfolio-block-state); buffered paths\n"
		"  read         [a, d, h] warm 4 KiB random reads (files in and out of the CPU\n"
		"               cache, 1 and 2 threads, the bare memcpy limit line, the\n"
		"               memcpy behind a lookup, spans);\n"
		"               in the cache: half the LLC (16 MiB at most); out of it: 2x the\n"
		"               LLC if that is at most 256 MiB, else 128 MiB (a VM can report\n"
		"               hundreds of MiB), --quick 64 MiB; hits of 128 MiB (--quick\n"
		"               64 MiB) in a 512 MiB cache, every cache at least twice its\n"
		"               file (a row with device reads while timed gives no figure);\n"
		"               cold sequential read with read-ahead, uncached and direct, on\n"
		"               the buffered, dontcache and direct paths\n"
		"  readahead    [r] read-ahead streams, cold: scan + hot reads on one handle,\n"
		"               4 threads a quarter each in 1 MiB reads, uncached scan, single\n"
		"               random misses\n"
		"  files        [f] 5000 small files: create+write+close, reopen+read+close;\n"
		"               as root on a fresh XFS and a fresh ext4 made on loop devices\n"
		"               for the run (sparse 1 GiB images in --dir), else on --dir\n"
		"  startup      [g] pc_cache_new time at 256 MiB .. the machine's memory\n"
		"  metadata     [e] metadata per cached 4 KiB folio, from the heap\n"
		"  shared       --procs processes (fork()ed, default 4) sharing one cache\n"
		"               (shared_name) beside a private cache each and the kernel:\n"
		"               warm 4 KiB random reads of one --shared-file (private\n"
		"               caches: a copy each), ops/s (all processes, and 1 with the\n"
		"               others idle) and the PSS of all against 1 alone (targets:\n"
		"               shared hits >= 0.9x private, segment PSS sum <= 1.1x one);\n"
		"               interleaved --shared-record records over an existing file\n"
		"               of --total, fsync included: records/s, device reads per\n"
		"               write, data read back (private caches: not possible, EBUSY)\n"
		"  firstwrites  [G] (never by default: 4 minutes, 8 GiB) first writes into a\n"
		"               new cache, fresh / lazy / warm latencies\n"
		"  sqlite       (built when libsqlite3-dev is there) SQLite through the unix\n"
		"               VFS and the pagecache VFS (sqlite/): bulk insert of 1M rows\n"
		"               (--quick 20000; pc_uncached=1 too), point selects warm and\n"
		"               cold, range scans, updates, deletes, 1 writer + 2 readers\n"
		"\n"
		"paths (each suite runs those it names; --only selects by name):\n"
		"  kernel-buffered             pread/pwrite on a normal descriptor\n"
		"  kernel-buffered+dsync       ... with RWF_DSYNC (interleaved)\n"
		"  kernel-dontcache            preadv2/pwritev2 with RWF_DONTCACHE\n"
		"  kernel-dontcache+dsync      ... with RWF_DONTCACHE | RWF_DSYNC\n"
		"  kernel-direct               O_DIRECT descriptor (aligned workloads only)\n"
		"  kernel-direct+dsync         O_DIRECT with RWF_DSYNC\n"
		"  pagecache-buffered          pc_pread/pc_pwrite, flags 0\n"
		"  pagecache-buffered+dsync    PC_DSYNC (interleaved)\n"
		"  pagecache-dontcache         PC_DONTCACHE\n"
		"  pagecache-dontcache+dsync   PC_DONTCACHE | PC_DSYNC\n"
		"  pagecache-direct            PC_DIRECT (unaligned: aligned middle direct)\n"
		"  pagecache-direct+dsync      PC_DIRECT | PC_DSYNC\n"
		"  +dsync paths run in interleaved (as the seed); the old pcbench's\n"
		"  workloads (files, startup, readahead, metadata, firstwrites, read's\n"
		"  warm reads and hits) compare kernel-buffered with pagecache-buffered\n"
		"  as they always did, each line a pair (startup, metadata, firstwrites:\n"
		"  pagecache-buffered alone); --only selects their sides too, a name\n"
		"  below when it contains one of its words (so kernel-buffered selects\n"
		"  kernel-buffered-2-threads as well, and pagecache-buffered leaves out\n"
		"  pagecache-span and the memcpy lines).\n"
		"\n"
		"other names in the results' \"path\" (columns that are not one of the\n"
		"paths above):\n"
		"  memcpy                        the bare memcpy of the hits' pattern\n"
		"  memcpy-2-threads              the same, 2 threads\n"
		"  memcpy-behind-lookup          the same, its source found through the\n"
		"                                loads of pagecache's index, no checks\n"
		"  pagecache-buffered-1-thread   pagecache hits, 1 thread (the base of\n"
		"                                the 2-thread row)\n"
		"  pagecache-buffered-2-threads  pagecache hits, 2 threads, one handle\n"
		"  kernel-buffered-2-threads     the kernel's pread, 2 threads\n"
		"  pagecache-span                pc_read_begin + pc_read_end, no copy\n"
		"  pagecache-buffered-two-handles readahead: scan and hot reads on two\n"
		"                                handles (the one-handle row's base)\n"
		"  pagecache-buffered-private    shared: a private cache in each process\n"
		"  pagecache-buffered-shared     shared: one shared cache, flags 0\n"
		"  pagecache-dontcache-shared    shared: one shared cache, PC_DONTCACHE\n"
		"  kernel-buffered#2, pagecache-buffered#2\n"
		"                                the second writer of a competing pair\n"
		"                                of one path\n"
		"\n"
		"options:\n"
		"  --dir D           where the files go (default .)\n"
		"  --quick           smoke run: every suite at small sizes, under a minute\n"
		"  --full            the seeds' sizes (1 GiB interleaved, 4x --mem sequential)\n"
		"  --mem BYTES       pagecache memory_limit (default 256M; --quick 64M)\n"
		"  --seconds S       length of each timed phase (default 2; --quick 0.2;\n"
		"                    --full 3)\n"
		"  --total BYTES     interleaved and shared's writes: bytes per run (default\n"
		"                    64M; --quick 8M; --full 1G)\n"
		"  --seq-total BYTES sequential writes and reads (default 2x --mem; --quick\n"
		"                    half of it; --full 4x)\n"
		"  --threads N       interleaved writers (default 32)\n"
		"  --records LIST    interleaved record sizes (default 47008,6000,49152)\n"
		"  --procs N         shared: processes, 2 to 32 (default 4)\n"
		"  --shared-file B   shared: the read workload's file (default 256M;\n"
		"                    --quick 32M), a multiple of 4 KiB, 1M at least\n"
		"  --shared-record B shared: the writers' record size (default 6000)\n"
		"  --block-size B    pagecache block_size (default: the library's choice)\n"
		"  --edge-budget B   pagecache edge_budget_bytes (default: the library's,\n"
		"                    a quarter of --mem; at most half of it)\n"
		"  --no-io-uring     pagecache uses its synchronous I/O fallback\n"
		"  --only PATHS      only the paths whose name contains one of these\n"
		"                    comma-separated words (e.g. dontcache,kernel-buffered);\n"
		"                    a word no path contains is an error; a target\n"
		"                    relative to a path left out is 'not evaluated'; a\n"
		"                    competing pair runs when both its paths are selected\n"
		"  --json FILE       the results as {\"machine\": {...}, \"results\": [...]}\n"
		"  --svg DIR         plots: throughput and dirty bytes over time, write\n"
		"                    latency CDFs, the interleaved tables as grouped bars\n"
		"  --help            this text\n");
}

static const struct suite *find_suite(const char *name)
{
	for (int i = 0; i < NSUITES; i++)
		if (!strcmp(suites[i].name, name))
			return &suites[i];
	for (int i = 0; i < NSUITES; i++)
		if (strlen(name) == 1 && strchr(suites[i].letters, name[0]))
			return &suites[i];
	return NULL;
}

/* Sizes of the scale, for what the options did not set. */
static void apply_scale(bool mem_set, bool seconds_set, bool total_set, bool seq_set)
{
	static const uint64_t shared_file[3] = { 32 * BU_MiB, 256 * BU_MiB, 256 * BU_MiB };
	static const double seconds[3] = { 0.2, 2, 3 };
	static const uint64_t mem[3] = { 64 * BU_MiB, 256 * BU_MiB, 256 * BU_MiB };
	static const uint64_t total[3] = { 8 * BU_MiB, 64 * BU_MiB, BU_GiB };
	/* eighths of --mem */
	static const unsigned seq_eighths[3] = { 4, 16, 32 };

	bo.quick = bo.scale == SCALE_QUICK;
	if (!mem_set)
		bo.mem = mem[bo.scale];
	if (!seconds_set)
		bo.seconds = seconds[bo.scale];
	if (!total_set)
		bo.total = total[bo.scale];
	bo.mem &= ~(uint64_t)4095;
	if (!seq_set)
		bo.seq_total = seq_eighths[bo.scale] * bo.mem / 8;
	if (bo.mem < 8 * BU_MiB)
		bu_die("--mem: at least 8 MiB");
	if (bo.seq_total < 8 * BU_MiB)
		bu_die("--seq-total: at least 8 MiB");
	if (bo.edge_budget > bo.mem / 2)
		bu_die("--edge-budget: at most half of --mem (%s)", bu_human(bo.mem / 2));
	if (bo.nrecords == 0) {
		bo.records[0] = 47008;
		bo.records[1] = 6000;
		bo.records[2] = 49152;
		bo.nrecords = 3;
	}
	for (int i = 0; i < bo.nrecords; i++)
		if (bo.records[i] == 0 || bo.records[i] > 64 * BU_MiB)
			bu_die("--records: sizes from 1 byte to 64 MiB");
	if (!bo.shared_file)
		bo.shared_file = shared_file[bo.scale];
	if (bo.shared_file < BU_MiB || bo.shared_file % 4096)
		bu_die("--shared-file: a multiple of 4 KiB, 1 MiB at least");
	if (!bo.shared_record)
		bo.shared_record = 6000;
	if (bo.shared_record > 64 * BU_MiB)
		bu_die("--shared-record: 1 byte to 64 MiB");
}

enum {
	OPT_QUICK = 1000, OPT_FULL, OPT_SEQ_TOTAL, OPT_BLOCK_SIZE, OPT_EDGE_BUDGET, OPT_NO_URING, OPT_ONLY, OPT_JSON, OPT_SVG,
	OPT_RECORDS, OPT_THREADS, OPT_PROCS, OPT_SHARED_FILE, OPT_SHARED_RECORD,
};

static double parse_seconds(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || !(v > 0))
		bu_die("--seconds: bad value '%s'", s);
	return v;
}

static int parse_threads(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*end || n < 1 || n > 4096)
		bu_die("--threads: 1 to 4096, not '%s'", s);
	return (int)n;
}

static int parse_procs(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);

	if (*end || n < 2 || n > 32)
		bu_die("--procs: 2 to 32, not '%s'", s);
	return (int)n;
}

/* Every word of --only must name (a part of) a path: a word that matches
 * none would select nothing of it, silently. */
static void check_only(void)
{
	char word[64];
	int words = 0;

	if (!bo.only)
		return;
	for (const char *s = bo.only; *s;) {
		size_t n = strcspn(s, ",");
		bool hit = false;

		if (n >= sizeof(word))
			n = sizeof(word) - 1;
		memcpy(word, s, n);
		word[n] = '\0';
		for (int i = 0; i < P_COUNT && n && !hit; i++)
			hit = strstr(bpaths[i].name, word) != NULL;
		for (int i = 0; i < SHARED_NPATHS && n && !hit; i++)
			hit = strstr(shared_paths[i], word) != NULL;
		if (n && !hit) {
			fprintf(stderr, "pcbench: --only: '%s' matches no path, so nothing of it would run "
				"(pcbench --help lists the paths)\n", word);
			exit(2);
		}
		words += n > 0;
		s += strcspn(s, ",");
		s += *s == ',';
	}
	if (!words) {
		fprintf(stderr, "pcbench: --only '%s': no path named, so nothing would run\n", bo.only);
		exit(2);
	}
}

/* The options; the suite names are what is left, in argv[*first..]. */
static void parse_options(int argc, char **argv, int *first)
{
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "mem", required_argument, NULL, 'm' },
		{ "seconds", required_argument, NULL, 's' },
		{ "total", required_argument, NULL, 't' },
		{ "seq-total", required_argument, NULL, OPT_SEQ_TOTAL },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "records", required_argument, NULL, OPT_RECORDS },
		{ "procs", required_argument, NULL, OPT_PROCS },
		{ "shared-file", required_argument, NULL, OPT_SHARED_FILE },
		{ "shared-record", required_argument, NULL, OPT_SHARED_RECORD },
		{ "block-size", required_argument, NULL, OPT_BLOCK_SIZE },
		{ "edge-budget", required_argument, NULL, OPT_EDGE_BUDGET },
		{ "no-io-uring", no_argument, NULL, OPT_NO_URING },
		{ "only", required_argument, NULL, OPT_ONLY },
		{ "json", required_argument, NULL, OPT_JSON },
		{ "svg", required_argument, NULL, OPT_SVG },
		{ "quick", no_argument, NULL, OPT_QUICK },
		{ "full", no_argument, NULL, OPT_FULL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool mem_set = false, seconds_set = false, total_set = false, seq_set = false;
	int ch;

	bo.scale = SCALE_DEFAULT;
	while ((ch = getopt_long(argc, argv, "d:m:s:t:h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': bo.dir = optarg; break;
		case 'm': bo.mem = bu_size_arg("--mem", optarg); mem_set = true; break;
		case 's': bo.seconds = parse_seconds(optarg); seconds_set = true; break;
		case 't': bo.total = bu_size_arg("--total", optarg); total_set = true; break;
		case OPT_SEQ_TOTAL: bo.seq_total = bu_size_arg("--seq-total", optarg); seq_set = true; break;
		case OPT_THREADS: bo.threads = parse_threads(optarg); break;
		case OPT_PROCS: bo.procs = parse_procs(optarg); break;
		case OPT_SHARED_FILE: bo.shared_file = bu_size_arg("--shared-file", optarg); break;
		case OPT_SHARED_RECORD:
			bo.shared_record = bu_size_arg("--shared-record", optarg);
			if (!bo.shared_record)
				bu_die("--shared-record: 1 byte to 64 MiB");
			break;
		case OPT_RECORDS:
			bo.nrecords = bu_size_list_arg("--records", optarg, bo.records, BENCH_MAX_RECORDS);
			break;
		case OPT_BLOCK_SIZE: bo.block_size = bu_size_arg("--block-size", optarg); break;
		case OPT_EDGE_BUDGET: bo.edge_budget = bu_size_arg("--edge-budget", optarg); break;
		case OPT_NO_URING: bo.no_io_uring = true; break;
		case OPT_ONLY: bo.only = optarg; break;
		case OPT_JSON: bo.json = optarg; break;
		case OPT_SVG: bo.svgdir = optarg; break;
		case OPT_QUICK: bo.scale = SCALE_QUICK; break;
		case OPT_FULL: bo.scale = SCALE_FULL; break;
		case 'h': usage(stdout); exit(0);
		default: /* getopt said what was wrong, on one line */
			fprintf(stderr, "pcbench: pcbench --help lists the options\n");
			exit(2);
		}
	}
	apply_scale(mem_set, seconds_set, total_set, seq_set);
	check_only();
	*first = optind;
}

/* The results of a run of minutes must not be lost at its end: --json's
 * file must be writable and --svg's directory makeable before it starts. */
static void check_outputs(void)
{
	if (bo.json) {
		FILE *fp = fopen(bo.json, "ae");
		if (!fp) {
			fprintf(stderr, "pcbench: --json %s: %s\n", bo.json, strerror(errno));
			exit(2);
		}
		fclose(fp);
	}
	if (bo.svgdir && mkdir(bo.svgdir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "pcbench: --svg %s: %s\n", bo.svgdir, strerror(errno));
		exit(2);
	}
}

/* The suites to run, in the order of the table (a suite named twice runs
 * once). */
static int pick_suites(int argc, char **argv, int first, const struct suite **run)
{
	bool want[NSUITES] = { false };
	int n = 0;

	for (int i = first; i < argc; i++) {
		const struct suite *s = find_suite(argv[i]);

		if (!s) {
			fprintf(stderr, "pcbench: no suite '%s' (pcbench --help lists them)\n", argv[i]);
			exit(2);
		}
		want[s - suites] = true;
	}
	for (int i = 0; i < NSUITES; i++)
		if (first < argc ? want[i] : suites[i].by_default)
			run[n++] = &suites[i];
	return n;
}

int main(int argc, char **argv)
{
	const struct suite *run[NSUITES];
	double plan = 0;
	int first, n;

	parse_options(argc, argv, &first);
	n = pick_suites(argc, argv, first, run);
	check_outputs();
	bu_mkdir(bo.dir);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bu_print_cmdline(argc, argv);
	bu_print_environment(bo.dir);
	if (bu_dev_stat_path(bo.dir, bo.devstat, sizeof(bo.devstat)) < 0)
		bo.devstat[0] = '\0';
	printf("scale %s: memory_limit %s, timed phases %.3g s, interleaved %s per run, sequential %s\n",
	       bo.scale == SCALE_QUICK ? "quick" : bo.scale == SCALE_FULL ? "full" : "default", bu_human(bo.mem),
	       bo.seconds, bu_human(bo.total), bu_human(bo.seq_total));

	for (int i = 0; i < n; i++)
		plan += run[i]->est_s[bo.scale];
	prog_init();
	prog_plan(plan);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = bu_now_ns();

		prog_suite(run[i]->name, i + 1, n, run[i]->est_s[bo.scale]);
		run[i]->run();
		printf("(suite %s took %.1f s)\n", run[i]->name, bu_secs(bu_now_ns() - t0));
	}
	prog_end();
	return report_finish(argc, argv) ? 0 : 1;
}
