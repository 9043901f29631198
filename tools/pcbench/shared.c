/*
 * shared.c - suite shared (docs/shared.md, section 8): processes that
 * share one cache (struct pc_config's shared_name) beside processes with
 * a private cache each and beside the kernel's page cache.
 *
 * Every process is a fork()ed child of pcbench that makes its own cache
 * (or descriptor) after the fork, and then does what the parent asks it,
 * one command at a time over a pipe, answering over another: open (and
 * warm), timed random reads, the interleaved writes, check the data,
 * quit.  A timed phase starts at a CLOCK_MONOTONIC instant the parent
 * sends with the command (every process sleeps until then) and each
 * process times itself; the parent waits for every answer with a
 * deadline, so a child that dies (EOF on its pipe) or hangs (the deadline:
 * it is killed) is an error of its row, never a hang of the run.  The
 * children also die with the parent (PR_SET_PDEATHSIG).
 *
 * Reads: --procs processes (default 4) do warm random 4 KiB reads of one
 * --shared-file (default 256 MiB) in three groups, alive side by side:
 *
 *   kernel-buffered             pread(2) of one file, the kernel's cache
 *   pagecache-buffered-private  a private cache each, each process its
 *                               own copy of the file (a private cache
 *                               cannot open a file another process's
 *                               cache holds: EBUSY)
 *   pagecache-buffered-shared   one shared cache, every process opening
 *                               the one file
 *
 * The caches are PC_CFG_LAZY_MEMORY (memory faulted in when first used,
 * so that a process's PSS is what it touched) of twice the file (--mem if
 * larger).  Process 1 of each group opens its file and reads it whole
 * (checking the data) alone; its PSS is taken; then the others do the
 * same at once, and the PSS of all is taken.  Then rounds of timed phases
 * (--seconds in all per phase kind, split over SH_ROUNDS rounds): all
 * processes of each group, then process 1 alone of each (the others idle),
 * the private and shared phases next to each other, their order swapped
 * every round.  ops/s are medians over the rounds, ratios the medians of
 * each round's own ratio.  PSS: the Pss of the mappings of
 * /dev/shm/pagecache-NAME in /proc/PID/smaps for the shared cache, every
 * mapping's for the others (a private cache's memory is anonymous; the
 * kernel's page cache is in no process's PSS).
 *
 * Targets: a process's hits in the shared cache at least 0.9x those in a
 * private cache (1 process, and all of them at once); the sum of the
 * processes' PSS of the shared segment at most 1.1x that of one process
 * alone.
 *
 * Writes: --procs processes write interleaved --shared-record records
 * (default 6000 B; record i at offset i*R by process i mod procs, in
 * increasing order) over an existing file of --total bytes (rounded down
 * to whole records; its kernel cache dropped first); once every process
 * has written its records, process 1 calls fsync (the kernel's and
 * pc_fsync write back the whole file, whoever wrote it: as interleaved's
 * one fsync after its threads), inside the timing.  An fsync in each
 * process as it finishes would write back, and so read to merge, the
 * blocks still waiting for a slower process's neighbouring record.
 * Rows: kernel-buffered (pwrite), kernel-dontcache
 * (RWF_DONTCACHE), pagecache-buffered-shared and pagecache-dontcache-shared
 * (PC_DONTCACHE) in one shared cache of --mem.  Private caches cannot
 * write one file from several processes: the row tries (pc_open in every
 * process) and reports what happened, no figure.  Printed: records/s,
 * MiB/s, device reads per write counted by the library (I/Os and 4 KiB
 * units), by the processes' read_bytes (/proc/PID/io) and by the block
 * device; afterwards process 1 reads every record back through its handle
 * (the others' records too) and pcbench reads the file through the
 * kernel: both must find every record as written.  No targets.
 */
#include "bench.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define SH_MAX_PROCS 32
#define SH_ROUNDS 7
/* Time between a phase's command and its start: every process is asleep
 * waiting for the start by then. */
#define SH_START_DELAY_NS (50 * 1000 * 1000ull)
/* How long a process may take to answer, beyond what it was asked to do. */
#define SH_OPEN_TIMEOUT_S 300
#define SH_SLACK_TIMEOUT_S 60
#define SH_WRITE_TIMEOUT_S 600
#define SH_STAMP 0x5348415245440000ull /* "SHARED" */

enum sh_kind { SH_KERNEL, SH_PRIVATE, SH_SHARED };
enum sh_op { OP_OPEN = 1, OP_READS, OP_WRITE, OP_FSYNC, OP_VERIFY, OP_STAT, OP_QUIT };

struct sh_cmd {
	int op;
	unsigned seed;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
};

struct sh_rep {
	int err;               /* errno of what failed; 0: done */
	char msg[240];
	uint64_t ops;          /* reads, or records written */
	uint64_t t0, t1;       /* when the process started and ended */
	int64_t proc_read_bytes; /* /proc/self/io read_bytes when answering */
	struct pc_stats st;    /* the cache's counters when answering */
};

/* The processes of one row. */
struct sh_group {
	const char *row;       /* the result's path */
	enum sh_kind kind;
	int flags;             /* writes: PC_* or RWF_* */
	int n;
	const char *files[SH_MAX_PROCS];
	char name[64];         /* the shared cache's name */
	char seg_path[96];     /* /dev/shm/pagecache-NAME */
	uint64_t cmem;
	bool reader;           /* reads: open read-only, warm */
	uint64_t fsize;        /* reads: the file's size */
	uint64_t rsize, nrec;  /* writes */
	unsigned cache_flags;  /* PC_CFG_* */
	pid_t pid[SH_MAX_PROCS];
	int cmd[SH_MAX_PROCS], rep[SH_MAX_PROCS]; /* the parent's ends, -1: closed */
	bool gone[SH_MAX_PROCS];
	struct sh_rep r[SH_MAX_PROCS]; /* the last answers */
	char err[400];         /* the first failure */
	bool quiet;            /* failures expected: not said on stderr */
};

const char *const shared_paths[SHARED_NPATHS] = { "pagecache-buffered-private", "pagecache-buffered-shared",
						  "pagecache-dontcache-shared" };

/* Groups with children alive: a child closes their parent's ends. */
static struct sh_group *live[8];

/* The file's data as bu_make_file writes it: 1 MiB chunks of one random
 * pattern, the first byte of chunk k increased by k. */
#define SH_SEED_READ 11
#define SH_SEED_WRITE 12

/* ------------------------------------------------------------ child */

struct sh_proc {
	struct sh_group *g;
	int idx;
	struct pc_cache *c;
	struct pc_file *f;
	int fd;
	char *buf, *expect;    /* 1 MiB each */
	char *rec, *got;       /* a record each */
};

__attribute__((format(printf, 3, 4)))
static int child_fail(struct sh_rep *r, int e, const char *fmt, ...)
{
	va_list ap;
	size_t l;

	if (r->err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	l = strlen(r->msg);
	if (e)
		snprintf(r->msg + l, sizeof(r->msg) - l, ": %s (errno %d)", strerror(e), e);
	r->err = e ? e : EIO;
	return -1;
}

static ssize_t full_io(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = wr ? write(fd, (char *)buf + done, len - done) : read(fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static ssize_t proc_pread(struct sh_proc *p, void *buf, size_t n, uint64_t off)
{
	if (p->g->kind == SH_KERNEL)
		return pread(p->fd, buf, n, (off_t)off);
	return pc_pread(p->f, buf, n, (off_t)off, 0);
}

/* Does buf hold bytes [off, off + n) of a file bu_make_file wrote? */
static bool matches_made_file(const char *buf, const char *pattern, uint64_t off, size_t n, uint64_t *bad)
{
	size_t done = 0;

	while (done < n) {
		uint64_t o = off + done;
		size_t in = (size_t)(o % BU_MiB), len = (size_t)(BU_MiB - in);

		if (len > n - done)
			len = n - done;
		if (in == 0 && (uint8_t)buf[done] != (uint8_t)(pattern[0] + (char)(o / BU_MiB))) {
			*bad = o;
			return false;
		}
		size_t skip = in == 0;
		if (memcmp(buf + done + skip, pattern + in + skip, len - skip) != 0) {
			for (size_t i = skip; i < len; i++)
				if (buf[done + i] != pattern[in + i]) {
					*bad = o + i;
					break;
				}
			return false;
		}
		done += len;
	}
	return true;
}

/* Read the whole file once in 1 MiB reads (warming the cache), checking
 * every byte. */
static int child_warm(struct sh_proc *p, struct sh_rep *r)
{
	uint64_t off = 0, bad = 0;

	while (off < p->g->fsize) {
		size_t want = p->g->fsize - off < BU_MiB ? (size_t)(p->g->fsize - off) : (size_t)BU_MiB;
		ssize_t n = proc_pread(p, p->buf, want, off);

		if (n <= 0)
			return child_fail(r, n < 0 ? errno : EIO, "%s at %" PRIu64 " (warming)",
					  p->g->kind == SH_KERNEL ? "pread" : "pc_pread", off);
		if (!matches_made_file(p->buf, p->expect, off, (size_t)n, &bad))
			return child_fail(r, 0, "wrong data read at offset %" PRIu64 " of %s (warming)", bad,
					  p->g->files[p->idx]);
		off += (uint64_t)n;
	}
	return 0;
}

static int child_open(struct sh_proc *p, struct sh_rep *r)
{
	struct sh_group *g = p->g;
	const char *file = g->files[p->idx];
	int oflags = g->reader ? O_RDONLY : O_RDWR;

	if (g->kind == SH_KERNEL) {
		p->fd = open(file, oflags | O_CLOEXEC);
		if (p->fd < 0)
			return child_fail(r, errno, "open %s", file);
	} else {
		struct pc_config cfg;

		bench_config(&cfg, g->cmem, g->cache_flags);
		if (g->kind == SH_SHARED)
			cfg.shared_name = g->name;
		p->c = pc_cache_new(&cfg);
		if (!p->c)
			return child_fail(r, errno, "pc_cache_new (%s%s%s)", g->kind == SH_SHARED ? "shared_name \"" : "private",
					  g->kind == SH_SHARED ? g->name : "", g->kind == SH_SHARED ? "\"" : "");
		if (g->cache_flags & PC_CFG_EAGER_MEMORY)
			bench_wait_prefault(p->c);
		p->f = pc_open(p->c, file, oflags, 0);
		if (!p->f)
			return child_fail(r, errno, "pc_open %s", file);
	}
	return g->reader ? child_warm(p, r) : 0;
}

static int child_reads(struct sh_proc *p, const struct sh_cmd *c, struct sh_rep *r)
{
	uint64_t npages = p->g->fsize / 4096, ops = 0;
	struct bu_rng rng;

	bu_rng_seed(&rng, (uint64_t)c->seed * 7919 + (uint64_t)p->idx + 1);
	sleep_until(c->start_ns);
	r->t0 = bu_now_ns();
	for (;;) {
		for (int i = 0; i < 256; i++) {
			uint64_t off = bu_rng_below(&rng, npages) * 4096;
			ssize_t n = p->g->kind == SH_KERNEL ? pread(p->fd, p->buf, 4096, (off_t)off)
							    : pc_pread(p->f, p->buf, 4096, (off_t)off, 0);

			if (n != 4096)
				return child_fail(r, n < 0 ? errno : EIO, "%s of 4 KiB at %" PRIu64 " returned %zd",
						  p->g->kind == SH_KERNEL ? "pread" : "pc_pread", off, n);
		}
		ops += 256;
		if (bu_now_ns() >= c->end_ns)
			break;
	}
	r->t1 = bu_now_ns();
	r->ops = ops;
	return 0;
}

/* Record i as written: a byte of i throughout, i stamped at both ends. */
static void fill_record(char *b, uint64_t rsize, uint64_t i)
{
	uint64_t stamp = SH_STAMP ^ i;

	memset(b, (int)(i % 251) + 1, (size_t)rsize);
	if (rsize >= 16) {
		memcpy(b, &stamp, 8);
		memcpy(b + rsize - 8, &stamp, 8);
	}
}

static int child_write(struct sh_proc *p, const struct sh_cmd *c, struct sh_rep *r)
{
	struct sh_group *g = p->g;
	uint64_t recs = 0;

	sleep_until(c->start_ns);
	r->t0 = bu_now_ns();
	for (uint64_t i = (uint64_t)p->idx; i < g->nrec; i += (uint64_t)g->n) {
		uint64_t off = i * g->rsize;
		size_t done = 0;

		fill_record(p->rec, g->rsize, i);
		while (done < g->rsize) {
			ssize_t n;

			if (g->kind == SH_KERNEL) {
				struct iovec v = { p->rec + done, (size_t)g->rsize - done };

				n = pwritev2(p->fd, &v, 1, (off_t)(off + done), g->flags);
			} else {
				n = pc_pwrite(p->f, p->rec + done, (size_t)g->rsize - done, (off_t)(off + done), g->flags);
			}
			if (n <= 0)
				return child_fail(r, n < 0 ? errno : EIO, "%s of record %" PRIu64 " at %" PRIu64,
						  g->kind == SH_KERNEL ? "pwritev2" : "pc_pwrite", i, off + done);
			done += (size_t)n;
		}
		recs++;
	}
	r->t1 = bu_now_ns();
	r->ops = recs;
	return 0;
}

/* fsync(2) and pc_fsync write back the whole file, whoever wrote it. */
static int child_fsync(struct sh_proc *p, struct sh_rep *r)
{
	r->t0 = bu_now_ns();
	if (p->g->kind == SH_KERNEL ? fsync(p->fd) < 0 : pc_fsync(p->f) < 0)
		return child_fail(r, errno, "%s", p->g->kind == SH_KERNEL ? "fsync" : "pc_fsync");
	r->t1 = bu_now_ns();
	return 0;
}

/* Every record, the other processes' too, read back through this
 * process's handle. */
static int child_verify(struct sh_proc *p, struct sh_rep *r)
{
	struct sh_group *g = p->g;

	for (uint64_t i = 0; i < g->nrec; i++) {
		ssize_t n = proc_pread(p, p->got, (size_t)g->rsize, i * g->rsize);

		if (n != (ssize_t)g->rsize)
			return child_fail(r, n < 0 ? errno : EIO, "reading record %" PRIu64 " back: %zd bytes", i, n);
		fill_record(p->rec, g->rsize, i);
		if (memcmp(p->rec, p->got, (size_t)g->rsize) != 0) {
			size_t k = 0;

			while (p->rec[k] == p->got[k])
				k++;
			return child_fail(r, 0, "record %" PRIu64 " (written by process %d) read back wrong at its byte %zu: "
					  "0x%02x, not 0x%02x", i, (int)(i % (uint64_t)g->n) + 1, k,
					  (unsigned)(uint8_t)p->got[k], (unsigned)(uint8_t)p->rec[k]);
		}
		r->ops++;
	}
	return 0;
}

static int child_quit(struct sh_proc *p, struct sh_rep *r)
{
	if (p->f && pc_close(p->f) < 0)
		child_fail(r, errno, "pc_close");
	p->f = NULL;
	if (p->c && pc_cache_destroy(p->c) < 0)
		child_fail(r, errno, "pc_cache_destroy");
	p->c = NULL;
	if (p->fd >= 0 && close(p->fd) < 0)
		child_fail(r, errno, "close");
	p->fd = -1;
	return r->err ? -1 : 0;
}

static void *child_alloc(size_t n)
{
	void *b = NULL;

	if (posix_memalign(&b, 4096, n ? n : 4096) != 0)
		_exit(3);
	memset(b, 0, n);
	return b;
}

__attribute__((noreturn))
static void child_main(struct sh_group *g, int idx, int cmd_fd, int rep_fd, pid_t parent)
{
	struct sh_proc p = { .g = g, .idx = idx, .fd = -1 };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(4);
	signal(SIGPIPE, SIG_IGN);
	for (size_t k = 0; k < sizeof(live) / sizeof(live[0]); k++)
		for (int j = 0; live[k] && j < live[k]->n; j++) {
			if (live[k]->cmd[j] >= 0)
				close(live[k]->cmd[j]);
			if (live[k]->rep[j] >= 0)
				close(live[k]->rep[j]);
		}
	p.buf = child_alloc(BU_MiB);
	p.expect = child_alloc(BU_MiB);
	bu_fill_random(p.expect, BU_MiB, SH_SEED_READ);
	if (!g->reader) {
		p.rec = child_alloc((size_t)g->rsize);
		p.got = child_alloc((size_t)g->rsize);
	}
	for (;;) {
		struct sh_cmd c;
		struct sh_rep r;

		if (full_io(cmd_fd, &c, sizeof(c), false) != (ssize_t)sizeof(c)) {
			/* the parent is gone or done with us: detach all the same */
			memset(&r, 0, sizeof(r));
			child_quit(&p, &r);
			_exit(0);
		}
		memset(&r, 0, sizeof(r));
		switch (c.op) {
		case OP_OPEN: child_open(&p, &r); break;
		case OP_READS: child_reads(&p, &c, &r); break;
		case OP_WRITE: child_write(&p, &c, &r); break;
		case OP_FSYNC: child_fsync(&p, &r); break;
		case OP_VERIFY: child_verify(&p, &r); break;
		case OP_STAT: break;
		case OP_QUIT: child_quit(&p, &r); break;
		default: child_fail(&r, EINVAL, "unknown command %d", c.op); break;
		}
		if (p.c)
			pc_cache_stats(p.c, &r.st);
		r.proc_read_bytes = bu_proc_read_bytes();
		if (full_io(rep_fd, &r, sizeof(r), true) != (ssize_t)sizeof(r) || c.op == OP_QUIT) {
			if (c.op != OP_QUIT)
				child_quit(&p, &r);
			_exit(0);
		}
	}
}

/* ------------------------------------------------------------ parent */

__attribute__((format(printf, 2, 3)))
static void group_fail(struct sh_group *g, const char *fmt, ...)
{
	va_list ap;

	if (g->err[0])
		return;
	va_start(ap, fmt);
	vsnprintf(g->err, sizeof(g->err), fmt, ap);
	va_end(ap);
	if (!g->quiet)
		fprintf(stderr, "pcbench: shared: %s: %s\n", g->row, g->err);
}

static void describe_status(char *b, size_t len, int st)
{
	if (WIFSIGNALED(st))
		snprintf(b, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else if (WIFEXITED(st))
		snprintf(b, len, "exited with status %d", WEXITSTATUS(st));
	else
		snprintf(b, len, "status 0x%x", st);
}

/* Reap child i: wait up to wait_ms for it to exit, then SIGKILL it.
 * Its exit status into b. */
static void reap(struct sh_group *g, int i, unsigned wait_ms, char *b, size_t len)
{
	int st = 0;
	pid_t w = 0;

	snprintf(b, len, "?");
	if (g->pid[i] <= 0)
		return;
	for (unsigned t = 0; t <= wait_ms / 10; t++) {
		w = waitpid(g->pid[i], &st, WNOHANG);
		if (w != 0)
			break;
		bu_sleep_ms(10);
	}
	if (w == 0) {
		kill(g->pid[i], SIGKILL);
		w = waitpid(g->pid[i], &st, 0);
		snprintf(b, len, "did not exit: killed");
	} else if (w == g->pid[i]) {
		describe_status(b, len, st);
	}
	g->pid[i] = 0;
}

static void close_ends(struct sh_group *g, int i)
{
	if (g->cmd[i] >= 0)
		close(g->cmd[i]);
	if (g->rep[i] >= 0)
		close(g->rep[i]);
	g->cmd[i] = g->rep[i] = -1;
}

/* A child that stopped answering or died: killed, reaped, its ends closed. */
static void child_lost(struct sh_group *g, int i, const char *why, const char *what)
{
	char st[96];

	if (g->pid[i] > 0)
		kill(g->pid[i], SIGKILL);
	reap(g, i, 2000, st, sizeof(st));
	close_ends(g, i);
	g->gone[i] = true;
	group_fail(g, "process %d %s during %s (%s)", i + 1, why, what, st);
}

static bool group_start(struct sh_group *g)
{
	size_t slot;
	pid_t parent = getpid();

	for (slot = 0; slot < sizeof(live) / sizeof(live[0]) && live[slot]; slot++)
		;
	if (slot == sizeof(live) / sizeof(live[0]))
		bu_die("pcbench: shared: too many groups alive");
	for (int i = 0; i < g->n; i++) {
		g->cmd[i] = g->rep[i] = -1;
		g->pid[i] = 0;
		g->gone[i] = true;
	}
	live[slot] = g;
	fflush(NULL);
	for (int i = 0; i < g->n; i++) {
		int c[2], r[2];

		if (pipe2(c, O_CLOEXEC) < 0 || pipe2(r, O_CLOEXEC) < 0)
			bu_die("pipe2:");
		pid_t pid = fork();
		if (pid < 0) {
			group_fail(g, "fork: %s", strerror(errno));
			close(c[0]), close(c[1]), close(r[0]), close(r[1]);
			return false;
		}
		if (pid == 0) {
			close(c[1]);
			close(r[0]);
			child_main(g, i, c[0], r[1], parent);
		}
		close(c[0]);
		close(r[1]);
		g->pid[i] = pid;
		g->cmd[i] = c[1];
		g->rep[i] = r[0];
		g->gone[i] = false;
	}
	return true;
}

static const char *op_name(int op)
{
	switch (op) {
	case OP_OPEN: return "open";
	case OP_READS: return "the timed reads";
	case OP_WRITE: return "the writes";
	case OP_FSYNC: return "the fsync";
	case OP_VERIFY: return "the check of the data";
	case OP_STAT: return "a look at the counters";
	case OP_QUIT: return "quit";
	}
	return "?";
}

/*
 * Send c to processes [lo, hi) and wait for their answers (into g->r) at
 * most timeout_s.  False if one failed: its error (or that it died or hung)
 * is in g->err; a process that died or hung is killed and gone.
 */
static bool group_do(struct sh_group *g, int lo, int hi, const struct sh_cmd *c, unsigned timeout_s)
{
	uint64_t deadline = bu_now_ns() + (uint64_t)timeout_s * 1000000000ull;
	bool ok = true;

	for (int i = lo; i < hi; i++) {
		memset(&g->r[i], 0, sizeof(g->r[i]));
		if (g->gone[i]) {
			ok = false;
			continue;
		}
		if (full_io(g->cmd[i], (void *)c, sizeof(*c), true) != (ssize_t)sizeof(*c)) {
			child_lost(g, i, "was gone (its pipe broke)", op_name(c->op));
			ok = false;
		}
	}
	for (int i = lo; i < hi; i++) {
		if (g->gone[i])
			continue;
		struct pollfd pfd = { .fd = g->rep[i], .events = POLLIN };
		int pr;

		do {
			uint64_t now = bu_now_ns();
			int ms = now >= deadline ? 0 : (int)((deadline - now) / 1000000);

			pr = poll(&pfd, 1, ms);
		} while (pr < 0 && errno == EINTR);
		if (pr == 0) {
			char why[64];

			snprintf(why, sizeof(why), "did not answer within %u s", timeout_s);
			child_lost(g, i, why, op_name(c->op));
			ok = false;
			continue;
		}
		if (full_io(g->rep[i], &g->r[i], sizeof(g->r[i]), false) != (ssize_t)sizeof(g->r[i])) {
			child_lost(g, i, "died", op_name(c->op));
			ok = false;
			continue;
		}
		if (g->r[i].err) {
			group_fail(g, "process %d: %s", i + 1, g->r[i].msg);
			ok = false;
		}
	}
	return ok;
}

/* Quit every process (the last of a shared cache writes everything back),
 * reap them, close the pipes, remove a shared segment left over. */
static void group_end(struct sh_group *g)
{
	struct sh_cmd c = { .op = OP_QUIT };
	char st[96];

	if (!g->n)
		return;
	group_do(g, 0, g->n, &c, SH_OPEN_TIMEOUT_S);
	for (int i = 0; i < g->n; i++) {
		if (g->pid[i] > 0) {
			reap(g, i, 10000, st, sizeof(st));
			if (strcmp(st, "exited with status 0") != 0)
				group_fail(g, "process %d at its end: %s", i + 1, st);
		}
		close_ends(g, i);
		g->gone[i] = true;
	}
	for (size_t k = 0; k < sizeof(live) / sizeof(live[0]); k++)
		if (live[k] == g)
			live[k] = NULL;
	if (g->kind == SH_SHARED) {
		char shm[80];

		snprintf(shm, sizeof(shm), "/pagecache-%s", g->name);
		if (shm_unlink(shm) == 0)
			group_fail(g, "the segment %s was still there after every process had detached (removed)", shm);
	}
}

static void group_init(struct sh_group *g, const char *row, enum sh_kind kind, int n, const char *tag)
{
	memset(g, 0, sizeof(*g));
	g->row = row;
	g->kind = kind;
	g->n = n;
	for (int i = 0; i < SH_MAX_PROCS; i++) {
		g->cmd[i] = g->rep[i] = -1;
		g->gone[i] = true;
	}
	if (kind == SH_SHARED) {
		char shm[80];

		/* unique per run; a leftover of an earlier run of this pid goes */
		snprintf(g->name, sizeof(g->name), "pcbench-%d-%s", (int)getpid(), tag);
		snprintf(g->seg_path, sizeof(g->seg_path), "/dev/shm/pagecache-%s", g->name);
		snprintf(shm, sizeof(shm), "/pagecache-%s", g->name);
		if (shm_unlink(shm) == 0)
			printf("(removed a leftover shared segment %s)\n", shm);
	}
}

/* ------------------------------------------------------------ PSS */

struct pss {
	double total, seg;           /* bytes; NAN: unknown */
	double huge_total, huge_seg; /* of which mapped by huge pages */
};

/* The Pss of every mapping of process pid, and of those of seg_path
 * ("" : none) in /proc/PID/smaps. */
static struct pss read_pss(pid_t pid, const char *seg_path)
{
	struct pss out = { NAN, NAN, NAN, NAN };
	char path[64], line[1024];
	bool in_seg = false;
	size_t sl = strlen(seg_path);
	double total = 0, seg = 0, huge = 0, huge_seg = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	fp = fopen(path, "re");
	if (!fp)
		return out;
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long a, b, kb;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &a, &b, &pos) >= 2 && pos > 0) {
			const char *name = line + pos;

			in_seg = sl && !strncmp(name, seg_path, sl) &&
				 (name[sl] == '\n' || name[sl] == ' ' || name[sl] == '\0');
			continue;
		}
		if (!strncmp(line, "Pss:", 4) && sscanf(line + 4, "%llu", &kb) == 1) {
			total += (double)kb * 1024;
			if (in_seg)
				seg += (double)kb * 1024;
		}
		/* Rss mapped by huge pages: anonymous, shmem (tmpfs), file */
		if ((!strncmp(line, "AnonHugePages:", 14) && sscanf(line + 14, "%llu", &kb) == 1) ||
		    (!strncmp(line, "ShmemPmdMapped:", 15) && sscanf(line + 15, "%llu", &kb) == 1) ||
		    (!strncmp(line, "FilePmdMapped:", 14) && sscanf(line + 14, "%llu", &kb) == 1)) {
			huge += (double)kb * 1024;
			if (in_seg)
				huge_seg += (double)kb * 1024;
		}
	}
	fclose(fp);
	out.total = total;
	out.seg = sl ? seg : NAN;
	out.huge_total = huge;
	out.huge_seg = sl ? huge_seg : NAN;
	return out;
}

/* The sum over processes [lo, hi). */
static struct pss group_pss(const struct sh_group *g, int lo, int hi)
{
	struct pss s = { 0, 0, 0, 0 };

	for (int i = lo; i < hi; i++) {
		struct pss p = g->gone[i] ? (struct pss){ NAN, NAN, NAN, NAN } : read_pss(g->pid[i], g->seg_path);

		s.total += p.total;
		s.seg += p.seg;
		s.huge_total += p.huge_total;
		s.huge_seg += p.huge_seg;
	}
	return s;
}

/* The results the summary divides (NULL: not measured). */
static struct bres *sum_hits[2], *sum_pss[2]; /* [1 process, all] / [shared, private] */
static struct bres *sum_writes[8];           /* by write row */

/* ------------------------------------------------------------ reads */

enum { G_K, G_P, G_S, G_COUNT };
static const char *const read_rows[G_COUNT] = { "kernel-buffered", "pagecache-buffered-private",
						"pagecache-buffered-shared" };

struct read_state {
	struct sh_group g[G_COUNT];
	bool run[G_COUNT];
	struct pss one[G_COUNT], all[G_COUNT], after[G_COUNT];
	struct pc_stats st0[G_COUNT][SH_MAX_PROCS];
	int64_t prb0[G_COUNT][SH_MAX_PROCS];   /* read_bytes before the rounds */
	/* [group][all processes (1) or process 1 alone (0)][round] */
	double ops[G_COUNT][2][SH_ROUNDS];
	uint64_t dev_reads[G_COUNT]; /* device reads while timed: pagecache's count;
				      * kernel: read_bytes / 4096 of the processes */
};

/* Open (and warm): process 1 alone, its PSS; then the others at once,
 * and the PSS of all. */
static bool read_open(struct read_state *s, int gi)
{
	struct sh_group *g = &s->g[gi];
	struct sh_cmd c = { .op = OP_OPEN };

	if (!group_start(g) || !group_do(g, 0, 1, &c, SH_OPEN_TIMEOUT_S))
		return false;
	s->one[gi] = group_pss(g, 0, 1);
	if (!group_do(g, 1, g->n, &c, SH_OPEN_TIMEOUT_S))
		return false;
	s->all[gi] = group_pss(g, 0, g->n);
	return true;
}

/* One timed phase: processes [0, n) of group gi; ops/s summed over them
 * (each over its own time), NAN on failure. */
static double read_phase(struct read_state *s, int gi, int n, double secs, unsigned seed)
{
	struct sh_group *g = &s->g[gi];
	uint64_t start = bu_now_ns() + SH_START_DELAY_NS;
	struct sh_cmd c = { .op = OP_READS, .seed = seed, .start_ns = start,
			    .end_ns = start + (uint64_t)(secs * 1e9) };
	double sum = 0;

	if (g->err[0] || !group_do(g, 0, n, &c, (unsigned)secs + SH_SLACK_TIMEOUT_S))
		return NAN;
	for (int i = 0; i < n; i++)
		sum += (double)g->r[i].ops / bu_secs(g->r[i].t1 - g->r[i].t0);
	return sum;
}

static void print_mib(double v)
{
	if (isnan(v))
		printf(" %14s", "-");
	else
		printf(" %10.1f MiB", v / BU_MiB);
}

static double round_median(const double *v)
{
	double c[SH_ROUNDS];

	for (int i = 0; i < SH_ROUNDS; i++)
		if (isnan(v[i]))
			return NAN;
	memcpy(c, v, sizeof(c));
	return bu_median(c, SH_ROUNDS);
}

static double round_ratio(const double *num, const double *den)
{
	if (isnan(round_median(num)) || isnan(round_median(den)))
		return NAN;
	return median_ratio(num, den, SH_ROUNDS);
}

static void read_results(struct read_state *s, const char *file_desc)
{
	int n = bo.procs;
	char wl[2][128], wpss[128];
	double ratio[2] = { round_ratio(s->ops[G_S][1], s->ops[G_P][1]), round_ratio(s->ops[G_S][0], s->ops[G_P][0]) };

	snprintf(wl[1], sizeof(wl[1]), "reads: warm 4 KiB random, %d processes, %s", n, file_desc);
	snprintf(wl[0], sizeof(wl[0]), "reads: warm 4 KiB random, 1 process (%d idle), %s", n - 1, file_desc);
	snprintf(wpss, sizeof(wpss), "reads: PSS of the cache, %d processes vs 1, %s", n, file_desc);

	printf("\n%-28s %5s %14s %14s %11s  %s\n", "path", "procs", "ops/s (sum)", "per process", "vs private",
	       "target");
	for (int all = 1; all >= 0; all--) {
		int procs = all ? n : 1;

		for (int gi = 0; gi < G_COUNT; gi++) {
			if (!s->run[gi])
				continue;
			struct sh_group *g = &s->g[gi];
			struct bres *b = res_add("shared", wl[all], g->row);
			double v = round_median(s->ops[gi][all]);

			snprintf(b->unit, sizeof(b->unit), "ops/s");
			if (g->err[0]) {
				snprintf(b->error, sizeof(b->error), "%s", g->err);
				printf("%-28s %5d  error: %s\n", g->row, procs, g->err);
				continue;
			}
			res_figure(b, v);
			res_note(b, "%.0f ops/s per process; median of %d rounds", v / procs, SH_ROUNDS);
			if (s->dev_reads[gi])
				res_note(b, "NOT ALL HITS: %" PRIu64 " %s while timed", s->dev_reads[gi],
					 gi == G_K ? "4 KiB read from the device (read_bytes)" : "device reads");
			char vs[32] = "-";
			if (gi == G_S) {
				sum_hits[all] = b;
				b->ratio = ratio[!all];
				if (!isnan(b->ratio))
					snprintf(vs, sizeof(vs), "%.2fx", b->ratio);
				if (!s->run[G_P] || s->g[G_P].err[0])
					res_target_na(b, read_rows[G_P], "per process >= 0.9x private");
				else if (s->dev_reads[G_S] || s->dev_reads[G_P])
					res_target_unjudged(b, "device reads while timed", "per process >= 0.9x private");
				else
					res_target(b, b->ratio >= 0.9, "per process >= 0.9x private (%.2fx)", b->ratio);
			}
			printf("%-28s %5d %14.0f %14.0f %11s  %s%s%s\n", g->row, procs, v, v / procs, vs, b->target,
			       b->pass < 0 ? "" : " ", b->pass < 0 ? "" : b->pass ? "PASS" : "FAIL");
		}
	}
	printf("  (1-process rows: process 1 reads, the group's other %d processes stay attached and idle; ops/s are "
	       "medians over %d rounds; vs private: the median of the rounds' own ratios)\n", n - 1, SH_ROUNDS);

	printf("\nmemory: PSS from /proc/PID/smaps (shared: the mappings of /dev/shm/pagecache-NAME; private and kernel: "
	       "every mapping: a private cache is anonymous memory)\n");
	printf("%-40s %14s %14s %14s %9s  %s\n", "path (what)", "1 alone", "all, warm", "all, after", "all/1",
	       "target");
	for (int gi = 0; gi < G_COUNT; gi++) {
		if (!s->run[gi])
			continue;
		struct sh_group *g = &s->g[gi];
		bool seg = gi == G_S;
		double one = seg ? s->one[gi].seg : s->one[gi].total;
		double all = seg ? s->all[gi].seg : s->all[gi].total;
		double after = seg ? s->after[gi].seg : s->after[gi].total;
		double worst = isnan(after) ? all : fmax(all, after);
		struct bres *b = res_add("shared", wpss, g->row);
		char what[64];

		snprintf(b->unit, sizeof(b->unit), "bytes");
		snprintf(what, sizeof(what), "%s (%s)", g->row, seg ? "segment" : "all");
		if (isnan(one) || isnan(all)) {
			snprintf(b->error, sizeof(b->error), "%s", g->err[0] ? g->err : "PSS not read");
			printf("%-40s  error: %s\n", what, b->error);
			continue;
		}
		b->value = worst;
		b->ratio = worst / one;
		if (gi != G_K)
			sum_pss[gi == G_P] = b;
		res_note(b, "PSS (%s) of process 1 alone %.1f MiB, of all %d %.1f MiB after warming, %.1f MiB after "
			 "the timed reads", seg ? "the segment's mappings" : "every mapping", one / BU_MiB, n,
			 all / BU_MiB, after / BU_MiB);
		if (seg) {
			res_target(b, worst <= 1.1 * one, "sum <= 1.1x one process's (%.2fx)", worst / one);
			res_note(b, "every mapping: 1 alone %.1f MiB, all %.1f MiB", s->one[gi].total / BU_MiB,
				 s->all[gi].total / BU_MiB);
		}
		int64_t resident = gi == G_K ? bu_kernel_resident_bytes(g->files[0]) : -1;
		if (resident >= 0)
			res_note(b, "the file's %.1f MiB in the kernel's page cache are in no process's PSS",
				 (double)resident / BU_MiB);
		printf("%-40s", what);
		print_mib(one);
		print_mib(all);
		print_mib(after);
		printf(" %8.2fx  %s%s%s\n", worst / one, b->target, b->pass < 0 ? "" : " ",
		       b->pass < 0 ? "" : b->pass ? "PASS" : "FAIL");
		if (seg) {
			snprintf(what, sizeof(what), "%s (all)", g->row);
			printf("%-40s", what);
			print_mib(s->one[gi].total);
			print_mib(s->all[gi].total);
			print_mib(s->after[gi].total);
			printf(" %8.2fx\n", fmax(s->all[gi].total, s->after[gi].total) / s->one[gi].total);
		}
		if (gi == G_K)
			printf("  (the kernel's page cache holds %s of the file, in no process's PSS)\n",
			       resident >= 0 ? bu_human((uint64_t)resident) : "?");
	}
	printf("  (all/1: the larger of the two sums over process 1 alone)\n");
	for (int gi = G_P; gi < G_COUNT; gi++)
		if (s->run[gi] && !isnan(s->one[gi].total)) {
			double h = gi == G_S ? s->one[gi].huge_seg : s->one[gi].huge_total;

			printf("  %s: process 1 alone maps %s of its %s with huge pages (AnonHugePages + ShmemPmdMapped)\n",
			       s->g[gi].row, bu_human((uint64_t)h), gi == G_S ? "segment" : "memory");
			struct bres *b = gi == G_S ? sum_pss[0] : sum_pss[1];
			if (b)
				res_note(b, "process 1 alone maps %.1f MiB with huge pages", h / BU_MiB);
		}
	for (int gi = 0; gi < G_COUNT; gi++)
		if (s->run[gi])
			printf("  %s: %" PRIu64 " %s while timed%s\n", s->g[gi].row, s->dev_reads[gi],
			       gi == G_K ? "4 KiB device reads (the processes' read_bytes)" : "device reads (the library's)",
			       s->dev_reads[gi] ? " (NOT ALL HITS: the rows' figures include misses)" : " (all hits)");
}

/* The setting in brackets of a /sys/kernel/mm/transparent_hugepage file
 * ("?" if none). */
static const char *thp_setting(const char *name, char *b, size_t len)
{
	char path[96], line[256];
	FILE *fp;

	snprintf(path, sizeof(path), "/sys/kernel/mm/transparent_hugepage/%s", name);
	snprintf(b, len, "?");
	fp = fopen(path, "re");
	if (!fp)
		return b;
	if (fgets(line, sizeof(line), fp)) {
		char *o = strchr(line, '['), *c = o ? strchr(o, ']') : NULL;

		if (o && c)
			snprintf(b, len, "%.*s", (int)(c - o - 1), o + 1);
	}
	fclose(fp);
	return b;
}

/* The huge= option of the /dev/shm mount (the last one listed is the one
 * seen): what decides whether a shared cache's segment, a POSIX shared
 * memory object there, gets huge pages ("never" when not given), unless
 * shmem_enabled is "force" or "deny". */
static const char *dev_shm_huge(char *b, size_t len)
{
	char line[512];
	FILE *fp = fopen("/proc/self/mounts", "re");
	snprintf(b, len, "?");
	if (!fp)
		return b;
	while (fgets(line, sizeof(line), fp)) {
		char dev[128], dir[128], type[32], opts[384];
		if (sscanf(line, "%127s %127s %31s %383s", dev, dir, type, opts) != 4 || strcmp(dir, "/dev/shm"))
			continue;
		char *h = strstr(opts, "huge=");
		snprintf(b, len, "%.*s", h ? (int)strcspn(h + 5, ",") : 5, h ? h + 5 : "never");
	}
	fclose(fp);
	return b;
}

/* Device reads while timed: process 1's view of a shared cache (its
 * counters are the cache's), the sum of every private cache's; for the
 * kernel the processes' read_bytes in 4 KiB units (its cache of the file
 * can lose pages meanwhile: memory pressure, proactive reclaim). */
static uint64_t read_dev_reads(struct read_state *s, int gi)
{
	struct sh_group *g = &s->g[gi];
	uint64_t d = 0;
	int64_t b = 0;

	for (int i = 0; i < (gi == G_S ? 1 : g->n); i++) {
		d += g->r[i].st.dev_read_ios - s->st0[gi][i].dev_read_ios;
		if (g->r[i].proc_read_bytes >= 0 && s->prb0[gi][i] >= 0)
			b += g->r[i].proc_read_bytes - s->prb0[gi][i];
	}
	return gi == G_K ? (uint64_t)(b + 4095) / 4096 : d;
}

static void shared_reads(void)
{
	static struct read_state s;
	int n = bo.procs;
	uint64_t fsize = bo.shared_file, cmem = bo.mem > 2 * fsize ? bo.mem : 2 * fsize;
	static char files[SH_MAX_PROCS + 1][PATH_MAX];
	double secs = bo.seconds / SH_ROUNDS;
	char file_desc[32];
	bool any = false;

	memset(&s, 0, sizeof(s));
	for (int gi = 0; gi < G_COUNT; gi++) {
		any |= s.run[gi] = name_selected(read_rows[gi]);
		s.one[gi] = s.all[gi] = s.after[gi] = (struct pss){ NAN, NAN, NAN, NAN };
	}
	if (!any)
		return;
	snprintf(file_desc, sizeof(file_desc), "%s file", bu_human(fsize));
	printf("\n== shared, reads: %d processes, warm 4 KiB random reads of a %s file; %d rounds, each phase %.2f s ==\n",
	       n, bu_human(fsize), SH_ROUNDS, secs);
	printf("kernel-buffered: %d processes pread(2) one file through the kernel's page cache\n", n);
	printf("pagecache-buffered-private: %d processes, a private cache of %s each, and each ITS OWN COPY of the file "
	       "(a private cache cannot open a file that another process's cache holds: EBUSY)\n", n, bu_human(cmem));
	printf("pagecache-buffered-shared: %d processes attached to one shared cache of %s, every one opening the one "
	       "file\n", n, bu_human(cmem));
	char thp_anon[32], thp_shmem[32], shm_huge[32];
	printf("transparent huge pages: anonymous memory (a private cache) %s; a shared cache's segment: /dev/shm "
	       "mounted huge=%s (shmem_enabled %s; pagecache(7), \"Shared caches\")\n",
	       thp_setting("enabled", thp_anon, sizeof(thp_anon)), dev_shm_huge(shm_huge, sizeof(shm_huge)),
	       thp_setting("shmem_enabled", thp_shmem, sizeof(thp_shmem)));
	printf("caches PC_CFG_LAZY_MEMORY (memory faulted in when used); process 1 of each opens and reads its file "
	       "whole alone (PSS taken), then the others at once (PSS of all); every warming read checks the data\n");

	bu_join(files[0], sizeof(files[0]), bo.dir, "pcbench-shared-read.dat");
	prog_step_count("shared reads: files", "write", (uint64_t)(s.run[G_P] ? n + 1 : 1), "files");
	bu_make_file(files[0], fsize, SH_SEED_READ);
	prog_advance(1);
	for (int i = 0; s.run[G_P] && i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "pcbench-shared-read-%d.dat", i + 1);
		bu_join(files[i + 1], sizeof(files[i + 1]), bo.dir, name);
		bu_make_file(files[i + 1], fsize, SH_SEED_READ);
		/* pagecache reads it with O_DIRECT: the kernel's copy is no use */
		bu_drop_file_cache(files[i + 1], false);
		prog_advance(1);
	}
	prog_step_done();

	for (int gi = 0; gi < G_COUNT; gi++) {
		struct sh_group *g = &s.g[gi];

		if (!s.run[gi])
			continue;
		group_init(g, read_rows[gi], gi == G_K ? SH_KERNEL : gi == G_P ? SH_PRIVATE : SH_SHARED, n, "reads");
		g->reader = true;
		g->fsize = fsize;
		g->cmem = cmem;
		g->cache_flags = PC_CFG_LAZY_MEMORY;
		for (int i = 0; i < n; i++)
			g->files[i] = gi == G_P ? files[i + 1] : files[0];
	}
	prog_step_count("shared reads: open and warm", "kernel, private, shared", G_COUNT, "groups");
	for (int gi = 0; gi < G_COUNT; gi++) {
		if (s.run[gi])
			read_open(&s, gi);
		prog_advance(1);
	}
	prog_step_done();

	struct sh_cmd st = { .op = OP_STAT };
	for (int gi = 0; gi < G_COUNT; gi++) {
		if (!s.run[gi] || s.g[gi].err[0] || !group_do(&s.g[gi], 0, n, &st, SH_SLACK_TIMEOUT_S))
			continue;
		for (int i = 0; i < n; i++) {
			s.st0[gi][i] = s.g[gi].r[i].st;
			s.prb0[gi][i] = s.g[gi].r[i].proc_read_bytes;
		}
	}
	prog_step_timed("shared reads: timed rounds", "kernel, private, shared",
			(uint64_t)(SH_ROUNDS * 6 * (secs + SH_START_DELAY_NS / 1e9) * 1e9), NULL, NULL);
	for (int r = 0; r < SH_ROUNDS; r++) {
		/* all processes, then process 1 alone; private and shared next
		 * to each other, in turns first */
		int order[2][G_COUNT] = { { G_K, G_P, G_S }, { G_K, G_S, G_P } };

		for (int all = 1; all >= 0; all--)
			for (int k = 0; k < G_COUNT; k++) {
				int gi = order[r % 2][k];

				s.ops[gi][all][r] = s.run[gi] ? read_phase(&s, gi, all ? n : 1, secs, (unsigned)(r * 2 + all))
							      : NAN;
			}
	}
	prog_step_done();
	for (int gi = 0; gi < G_COUNT; gi++) {
		if (!s.run[gi] || s.g[gi].err[0])
			continue;
		s.after[gi] = group_pss(&s.g[gi], 0, n);
		if (group_do(&s.g[gi], 0, n, &st, SH_SLACK_TIMEOUT_S))
			s.dev_reads[gi] = read_dev_reads(&s, gi);
	}
	for (int gi = 0; gi < G_COUNT; gi++)
		if (s.run[gi])
			group_end(&s.g[gi]);
	read_results(&s, file_desc);
	for (int i = 0; i <= (s.run[G_P] ? n : 0); i++)
		unlink(files[i]);
}

/* ------------------------------------------------------------ writes */

enum { W_KBUF, W_KDC, W_PRIV, W_SBUF, W_SDC, W_COUNT };

static const struct write_row {
	const char *row;
	enum sh_kind kind;
	int flags;
} write_rows[W_COUNT] = {
	[W_KBUF] = { "kernel-buffered", SH_KERNEL, 0 },
	[W_KDC] = { "kernel-dontcache", SH_KERNEL, RWF_DONTCACHE },
	[W_PRIV] = { "pagecache-buffered-private", SH_PRIVATE, 0 },
	[W_SBUF] = { "pagecache-buffered-shared", SH_SHARED, 0 },
	[W_SDC] = { "pagecache-dontcache-shared", SH_SHARED, PC_DONTCACHE },
};

struct write_result {
	bool run, ok, unsupported;
	char err[400];
	double secs, recs_s, mib_s;
	double first_done_s, last_write_s; /* when the first and last process were done writing */
	double lib_ios, lib_4k;      /* the library's device reads (NAN: kernel) */
	double proc_4k, dev_4k;      /* read_bytes of the processes, the device's sectors, in 4 KiB */
	double proc_bytes;
	char check[160];             /* how the data was found */
	struct pc_stats d;           /* pagecache: the cache's counters over the run */
};

/* The file through the kernel, its cache dropped: every record as
 * written?  "" or what was wrong, into why. */
static void kernel_check(const char *file, uint64_t rsize, uint64_t nrec, int procs, char *why, size_t len)
{
	char *got = bu_alloc_aligned((size_t)rsize, 4096), *want = bu_alloc_aligned((size_t)rsize, 4096);
	int fd;

	why[0] = '\0';
	bu_drop_file_cache(file, false);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "open: %s", strerror(errno));
		goto out;
	}
	for (uint64_t i = 0; i < nrec; i++) {
		ssize_t n = pread(fd, got, (size_t)rsize, (off_t)(i * rsize));

		fill_record(want, rsize, i);
		if (n != (ssize_t)rsize || memcmp(got, want, (size_t)rsize) != 0) {
			snprintf(why, len, "record %" PRIu64 " (process %d's) wrong on the device", i,
				 (int)(i % (uint64_t)procs) + 1);
			break;
		}
	}
	close(fd);
out:
	free(got);
	free(want);
}

/* Private caches: every process tries to open the one file. */
static void write_private(struct sh_group *g, struct write_result *w)
{
	struct sh_cmd c = { .op = OP_OPEN };
	int busy = 0, opened = 0;
	char other[300] = "";

	g->quiet = true;
	if (!group_start(g))
		goto out;
	group_do(g, 0, 1, &c, SH_OPEN_TIMEOUT_S);
	opened += g->r[0].err == 0 && !g->gone[0];
	if (g->n > 1)
		group_do(g, 1, g->n, &c, SH_OPEN_TIMEOUT_S);
	for (int i = 1; i < g->n; i++) {
		if (g->gone[i])
			continue;
		if (g->r[i].err == EBUSY)
			busy++;
		else if (g->r[i].err && !other[0])
			snprintf(other, sizeof(other), "process %d: %s", i + 1, g->r[i].msg);
		else if (!g->r[i].err)
			opened++;
	}
out:
	if (opened == 1 && busy == g->n - 1 && !other[0]) {
		snprintf(w->err, sizeof(w->err), "not possible: process 1 opened the file, pc_open failed with EBUSY in "
			 "the other %d (private caches cannot share one file)", busy);
		g->err[0] = '\0'; /* as expected */
	} else {
		snprintf(w->err, sizeof(w->err), "not possible, but the attempt did not fail as expected: %d of %d "
			 "processes opened the file, %d got EBUSY%s%.120s%s%.120s", opened, g->n, busy,
			 other[0] ? "; " : "", other, g->err[0] ? "; " : "", g->err);
		fprintf(stderr, "pcbench: shared: %s: %s\n", g->row, w->err);
	}
	group_end(g);
}

static void write_one(struct sh_group *g, const char *file, struct write_result *w)
{
	struct sh_cmd c = { .op = OP_OPEN }, st = { .op = OP_STAT }, v = { .op = OP_VERIFY };
	struct sh_cmd wr = { .op = OP_WRITE }, fs = { .op = OP_FSYNC };
	int n = g->n;
	int64_t sec0, sec1, prb0 = 0, prb1 = 0;
	uint64_t end = 0;
	struct pc_stats s0;
	bool pc = g->kind != SH_KERNEL, ok;

	/* the existing file, out of the kernel's cache */
	if (bu_drop_file_cache(file, true) < 0)
		bu_warn("pcbench: dropping the cache of %s:", file);
	if (!group_start(g) || !group_do(g, 0, 1, &c, SH_OPEN_TIMEOUT_S) || !group_do(g, 1, n, &c, SH_OPEN_TIMEOUT_S) ||
	    !group_do(g, 0, n, &st, SH_SLACK_TIMEOUT_S))
		goto out;
	s0 = g->r[0].st;
	for (int i = 0; i < n; i++)
		prb0 += g->r[i].proc_read_bytes;

	wr.start_ns = bu_now_ns() + SH_START_DELAY_NS;
	sec0 = bu_dev_read_sectors(bo.devstat);
	ok = group_do(g, 0, n, &wr, SH_WRITE_TIMEOUT_S);
	if (!ok) {
		if (g->kind == SH_KERNEL)
			for (int i = 0; i < n; i++)
				w->unsupported |= g->r[i].err == EOPNOTSUPP;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		uint64_t t = g->r[i].t1 - wr.start_ns;

		w->last_write_s = fmax(w->last_write_s, bu_secs(t));
		w->first_done_s = i ? fmin(w->first_done_s, bu_secs(t)) : bu_secs(t);
	}
	/* every process has written its records: one fsync, as interleaved's */
	ok = group_do(g, 0, 1, &fs, SH_WRITE_TIMEOUT_S);
	sec1 = bu_dev_read_sectors(bo.devstat);
	if (!ok)
		goto out;
	end = g->r[0].t1;
	if (!group_do(g, 0, n, &st, SH_SLACK_TIMEOUT_S))
		goto out;
	for (int i = 0; i < n; i++)
		prb1 += g->r[i].proc_read_bytes;
	w->secs = bu_secs(end - wr.start_ns);
	w->recs_s = (double)g->nrec / w->secs;
	w->mib_s = (double)(g->nrec * g->rsize) / BU_MiB / w->secs;
	w->proc_bytes = (double)(prb1 - prb0);
	w->proc_4k = w->proc_bytes / 4096;
	w->dev_4k = sec0 >= 0 && sec1 >= 0 ? (double)(sec1 - sec0) * 512 / 4096 : NAN;
	w->lib_ios = w->lib_4k = NAN;
	if (pc) {
		bench_stats_delta(&w->d, &s0, &g->r[0].st);
		w->lib_ios = (double)w->d.dev_read_ios;
		w->lib_4k = (double)w->d.dev_read_bytes / 4096;
	}
	w->ok = true;
	/* read back: process 1 through its handle, the others' records too */
	group_do(g, 0, 1, &v, SH_WRITE_TIMEOUT_S);
out:
	group_end(g);
	if (g->err[0]) {
		snprintf(w->err, sizeof(w->err), "%s", g->err);
		w->ok = false;
		return;
	}
	kernel_check(file, g->rsize, g->nrec, n, w->check, sizeof(w->check));
	if (w->check[0]) {
		memcpy(w->err, w->check, sizeof(w->check)); /* err is the larger */
		fprintf(stderr, "pcbench: shared: %s: %s\n", g->row, w->err);
		w->ok = false;
		return;
	}
	snprintf(w->check, sizeof(w->check), "ok");
}

static void fmt_per_write(char *b, size_t len, double v, uint64_t writes)
{
	if (isnan(v))
		snprintf(b, len, "-");
	else
		snprintf(b, len, "%.3f", v / (double)writes);
}

static void shared_writes(void)
{
	static struct write_result w[W_COUNT];
	static struct sh_group g;
	int n = bo.procs;
	uint64_t rsize = bo.shared_record, nrec = bo.total / rsize;
	char file[PATH_MAX], wl[128];
	const char *files[SH_MAX_PROCS];
	int nrun = 0;

	memset(w, 0, sizeof(w));
	for (int k = 0; k < W_COUNT; k++)
		nrun += w[k].run = name_selected(write_rows[k].row);
	if (!nrun)
		return;
	snprintf(wl, sizeof(wl), "writes: %d processes, interleaved %" PRIu64 " B records over an existing %s file", n,
		 rsize, bu_human(nrec * rsize));
	printf("\n== shared, writes: %d processes write interleaved %" PRIu64 " B records (record i at i*%" PRIu64
	       " by process i mod %d) over an existing %s file (%" PRIu64 " records), then process 1 fsyncs it, "
	       "fsync included ==\n",
	       n, rsize, rsize, n, bu_human(nrec * rsize), nrec);
	if (nrec < (uint64_t)n) {
		printf("(not run: --total below one record per process)\n");
		return;
	}
	printf("the file written and synced first, its kernel cache dropped before each row; pagecache: one shared "
	       "cache of %s (a new name each row); device reads per write: lib ios/w: the library's dev_read_ios; "
	       "lib 4K/w: its dev_read_bytes/4096; proc 4K/w: the processes' read_bytes (/proc/PID/io)/4096; dev 4K/w: "
	       "%s read sectors*512/4096 (the whole device); check: every record read back by process 1 through its "
	       "handle, and from the device through the kernel\n",
	       bu_human(bo.mem), bo.devstat[0] ? bo.devstat : "(no device counters: n/a)");
	bu_join(file, sizeof(file), bo.dir, "pcbench-shared-write.dat");
	for (int i = 0; i < n; i++)
		files[i] = file;
	printf("(writing and syncing %s of existing data first)\n", bu_human(nrec * rsize));
	bu_make_file(file, nrec * rsize, SH_SEED_WRITE);

	prog_step_count("shared writes", "kernel, private, shared", (uint64_t)nrun, "runs");
	for (int k = 0; k < W_COUNT; k++) {
		const struct write_row *row = &write_rows[k];
		char tag[16];

		if (!w[k].run)
			continue;
		snprintf(tag, sizeof(tag), "w%d", k);
		group_init(&g, row->row, row->kind, n, tag);
		memcpy(g.files, files, sizeof(files[0]) * (size_t)n);
		g.flags = row->flags;
		g.cmem = bo.mem;
		g.cache_flags = PC_CFG_EAGER_MEMORY; /* a cache in use, as the kernel's */
		g.rsize = rsize;
		g.nrec = nrec;
		if (k == W_PRIV)
			write_private(&g, &w[k]);
		else
			write_one(&g, file, &w[k]);
		prog_advance(1);
	}
	prog_step_done();
	unlink(file);

	double kbuf = w[W_KBUF].ok ? w[W_KBUF].recs_s : NAN;
	printf("%-28s %10s %8s %8s %9s %9s %9s %9s  %s\n", "path", "records/s", "MiB/s", "vs k-buf", "lib ios/w",
	       "lib 4K/w", "proc 4K/w", "dev 4K/w", "check");
	for (int k = 0; k < W_COUNT; k++) {
		struct write_result *r = &w[k];
		struct bres *b;
		char a[24], c4[24], p4[24], d4[24], vs[24] = "-";

		if (!r->run)
			continue;
		b = res_add("shared", wl, write_rows[k].row);
		snprintf(b->unit, sizeof(b->unit), "records/s");
		b->writes = (double)nrec;
		if (k == W_PRIV) {
			/* not an error of the library: the mode cannot be */
			res_note(b, "%s", r->err);
			printf("%-28s %s\n", write_rows[k].row, r->err);
			continue;
		}
		if (!r->ok) {
			snprintf(b->error, sizeof(b->error), "%s%s", r->unsupported ? "unsupported: " : "", r->err);
			printf("%-28s %s: %s\n", write_rows[k].row, r->unsupported ? "unsupported" : "error", r->err);
			continue;
		}
		sum_writes[k] = b;
		res_figure(b, r->recs_s);
		b->mib_s = r->mib_s;
		b->device_reads_4k = write_rows[k].kind == SH_KERNEL ? r->proc_4k : r->lib_4k;
		b->reads_per_write = b->device_reads_4k / (double)nrec;
		b->proc_read_bytes = r->proc_bytes;
		if (write_rows[k].kind != SH_KERNEL)
			b->peak_dirty_bytes = (double)r->d.peak_dirty_bytes;
		fmt_per_write(a, sizeof(a), r->lib_ios, nrec);
		fmt_per_write(c4, sizeof(c4), r->lib_4k, nrec);
		fmt_per_write(p4, sizeof(p4), r->proc_4k, nrec);
		fmt_per_write(d4, sizeof(d4), r->dev_4k, nrec);
		if (k != W_KBUF && !isnan(kbuf))
			snprintf(vs, sizeof(vs), "%.2fx", r->recs_s / kbuf);
		res_note(b, "%.2f s; lib ios/w %s, lib 4K/w %s, proc 4K/w %s, dev 4K/w %s; data %s", r->secs, a, c4, p4,
			 d4, r->check);
		if (write_rows[k].kind != SH_KERNEL)
			res_note(b, "device reads %" PRIu64 " (%s), writes %" PRIu64 " (%s); edges kept %" PRIu64
				 " completed %" PRIu64 "; deferred rmw %" PRIu64 ", rmw reads %" PRIu64 "; peak dirty %s",
				 r->d.dev_read_ios, bu_human(r->d.dev_read_bytes), r->d.dev_write_ios,
				 bu_human(r->d.dev_write_bytes), r->d.edge_kept, r->d.edge_completed, r->d.deferred_rmw,
				 r->d.rmw_reads, bu_human(r->d.peak_dirty_bytes));
		printf("%-28s %10.0f %8.1f %8s %9s %9s %9s %9s  %s\n", write_rows[k].row, r->recs_s, r->mib_s, vs, a, c4,
		       p4, d4, r->check);
	}
	for (int k = 0; k < W_COUNT; k++)
		if (w[k].ok && write_rows[k].kind != SH_KERNEL)
			printf("  %s: %.2f s (writers done after %.2f to %.2f s); device reads %" PRIu64 " (%s), writes %" PRIu64 " (%s); edges kept %" PRIu64
			       " completed %" PRIu64 "; deferred rmw %" PRIu64 ", rmw reads %" PRIu64 "; peak dirty %s\n",
			       write_rows[k].row, w[k].secs, w[k].first_done_s, w[k].last_write_s, w[k].d.dev_read_ios, bu_human(w[k].d.dev_read_bytes),
			       w[k].d.dev_write_ios, bu_human(w[k].d.dev_write_bytes), w[k].d.edge_kept,
			       w[k].d.edge_completed, w[k].d.deferred_rmw, w[k].d.rmw_reads,
			       bu_human(w[k].d.peak_dirty_bytes));
		else if (w[k].ok)
			printf("  %s: %.2f s (writers done after %.2f to %.2f s)\n", write_rows[k].row, w[k].secs,
			       w[k].first_done_s, w[k].last_write_s);
}

/* ------------------------------------------------------------ summary */

static void shared_summary(void)
{
	char a[32] = "-", b[32] = "-";

	printf("\nshared, within-run ratios:\n");
	if (sum_hits[0] && !isnan(sum_hits[0]->ratio))
		snprintf(a, sizeof(a), "%.2fx", sum_hits[0]->ratio);
	if (sum_hits[1] && !isnan(sum_hits[1]->ratio))
		snprintf(b, sizeof(b), "%.2fx", sum_hits[1]->ratio);
	printf("  hits, shared / private, per process: 1 process %s, %d processes %s\n", a, bo.procs, b);
	for (int i = 0; i < 2; i++)
		if (sum_pss[i])
			printf("  PSS, %d processes / 1 alone, %s: %.2fx\n", bo.procs,
			       i ? "private caches (all memory)" : "shared cache (its segment)", sum_pss[i]->ratio);
	for (int k = W_KDC; k < W_COUNT; k++) {
		const struct bres *kb = sum_writes[W_KBUF], *r = sum_writes[k];

		if (r && kb && !isnan(r->value) && !isnan(kb->value) && kb->value > 0)
			printf("  records/s, %s / kernel-buffered: %.2fx\n", write_rows[k].row, r->value / kb->value);
	}
}

void suite_shared(void)
{
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);

	printf("\nshared: %d processes (fork()ed children, each its own cache or descriptor made after the fork); "
	       "reads of a %s file, --seconds %.3g per phase kind; writes of %" PRIu64 " B records, %s per run; "
	       "pagecache memory_limit %s (reads: at least twice the file)\n",
	       bo.procs, bu_human(bo.shared_file), bo.seconds, bo.shared_record, bu_human(bo.total), bu_human(bo.mem));
	shared_reads();
	shared_writes();
	shared_summary();
	signal(SIGPIPE, old);
}
