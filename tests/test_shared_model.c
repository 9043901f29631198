/*
 * test_shared_model.c - model-based test of one shared cache used by
 * several processes.
 *
 * NPROCS processes attach to one shared cache (pc_config.shared_name;
 * memory_limit 4 MiB, so that reclaim, the dirty throttle and write-back
 * run all the time) and work on NFILES files, each through handles of its
 * own.  The operations, each drawn by the process that runs it from its
 * own random stream: pc_pwrite (flags 0, PC_DSYNC, PC_DONTCACHE,
 * PC_DIRECT and their mixes with PC_DSYNC; 1 byte to 64 KiB at any
 * offset); bursts of buffered pc_pwrites (256 KiB to 1 MiB in all: past
 * the dirty limit, so that the writer is throttled); pc_pread (flags 0,
 * PC_DONTCACHE, PC_DIRECT) of a range or of the whole file, checked byte
 * for byte against the model, and pc_size; pc_ftruncate down and up; a
 * punched hole (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE); pc_fsync,
 * after which the backing file, read with plain pread(2), must be the
 * model, size included (an fsync in one process writes back every
 * process's data); and pc_close + pc_open.
 *
 * The operations run in one global order: a process-shared (and robust)
 * pthread mutex in MAP_SHARED memory mapped before the fork is held around
 * each operation and its update of the model, which lives in that memory
 * too (each file's bytes, FILE_MAX at most, and its size).  Whose turn it
 * is comes from a random stream of the shared state, so that the order,
 * like every process's operations, follows from the seed alone (what the
 * cache's own threads do meanwhile does not).  At the end each process
 * reads every file whole and checks it against the model, and destroys
 * its cache (they leave at about the same time; one of them is last); the
 * parent then reads each backing file with plain read(2): it must be the
 * model exactly.  A process that finds a difference reports the seed, the
 * operation's number, the file, the offset and the last operations, and
 * exits non-zero; the others stop at their next turn.
 *
 * Environment: PC_SEED (the base seed, printed; default: from the time),
 * PC_SHARED_MODEL_OPS (operations in all, default 60000; 15000 with
 * PC_TEST_QUICK=1).  The order of the operations follows from the seed,
 * so a run with the same PC_SEED and PC_SHARED_MODEL_OPS repeats them.
 */
#include "testutil.h"

#include <linux/falloc.h>
#include <pthread.h>
#include <sys/mman.h>

#define KiB 1024ull
#define MiB (1024ull * 1024ull)

#define NPROCS 4
#define NFILES 3
#define FILE_MAX (2 * MiB)   /* the largest a file gets: 3 of them are more than the cache */
#define IO_MAX (64 * KiB)
#define PUNCH_MAX (256 * KiB)
#define BURST_MIN (256 * KiB)
#define BURST_MAX (1 * MiB)
#define RING 24              /* the last operations, printed on a failure */
#define KID_WATCHDOG_S 540u  /* under the harness's 600 s */
#define KID_WAIT_S (KID_WATCHDOG_S + 10)

enum op_kind { OP_WRITE, OP_READ, OP_TRUNCATE, OP_PUNCH, OP_BURST, OP_FSYNC, OP_REOPEN, OP_READ_ALL, OP_KINDS };

static const char *const op_names[OP_KINDS] = { "write", "read", "truncate", "punch", "burst", "fsync", "reopen",
						"read-all" };

/* One operation, as the log keeps it. */
struct op_rec {
	uint64_t n;       /* its number in the global order */
	unsigned proc, file;
	int kind, flags;
	uint64_t off, len; /* truncate: len is the new size */
	int64_t ret;
};

/* What the processes share (MAP_SHARED, mapped before the fork). */
struct state {
	pthread_mutex_t lock;
	pthread_cond_t turn[NPROCS];
	unsigned owner;      /* whose turn it is */
	uint64_t order_rng;  /* draws the next owner */
	uint64_t next_op, total_ops;
	uint64_t base_seed;
	int failed;          /* a process found a difference or died: all stop */
	int attached;        /* processes attached, opened and ready */
	uint64_t ops_by[NPROCS];
	uint64_t kinds[OP_KINDS];
	struct op_rec ring[RING];
	uint64_t size[NFILES];
	uint8_t data[NFILES][FILE_MAX]; /* 0 past size */
};

static const char *dir;
static struct state *S;
static char cache_name[128];
static char paths[NFILES][4200];

static void model_setup(void)
{
	tu_exit_guard();
	dir = test_dir("shared_model");
}

static void model_teardown(void)
{
	test_rmdir(dir);
}

TEST_FIXTURE(model_setup, model_teardown)

/* ------------------------------------------------ the shared lock */

/* Take the lock; a holder that died leaves the state unknown: stop. */
static void state_lock(void)
{
	int r = pthread_mutex_lock(&S->lock);
	if (r == EOWNERDEAD) {
		S->failed = 1;
		pthread_mutex_consistent(&S->lock);
		fprintf(stderr, "process %d: the lock's holder died\n", (int)getpid());
	} else if (r) {
		fprintf(stderr, "pthread_mutex_lock: %s\n", strerror(r));
		_exit(5);
	}
}

static void state_unlock(void)
{
	pthread_mutex_unlock(&S->lock);
}

/* Wait for my turn (or the end, or a failure).  Holds the lock. */
static void wait_turn(unsigned k)
{
	while (!S->failed && S->next_op < S->total_ops && S->owner != k) {
		int r = pthread_cond_wait(&S->turn[k], &S->lock);
		if (r == EOWNERDEAD) {
			S->failed = 1;
			pthread_mutex_consistent(&S->lock);
		}
	}
}

/* Pass the turn on (to anybody: the order's own stream).  Holds the lock. */
static void pass_turn(void)
{
	S->owner = (unsigned)(tu_rand(&S->order_rng) % NPROCS);
	if (S->failed || S->next_op >= S->total_ops) {
		for (unsigned i = 0; i < NPROCS; i++)
			pthread_cond_broadcast(&S->turn[i]);
	} else {
		pthread_cond_signal(&S->turn[S->owner]);
	}
}

/* ------------------------------------------------ a process */

struct proc {
	unsigned k;
	uint64_t seed, rng;
	struct pc_cache *c;
	struct pc_file *f[NFILES];
	uint8_t *buf;  /* IO_MAX + 1, and the whole file for read-all */
	uint8_t *disk; /* FILE_MAX + 1: the backing file */
};

static void print_ring(void)
{
	uint64_t from = S->next_op >= RING ? S->next_op - RING + 1 : 0;
	fprintf(stderr, "the last operations (number, process, kind, file, offset, length or size, flags, result):\n");
	for (uint64_t n = from; n <= S->next_op; n++) {
		struct op_rec *r = &S->ring[n % RING];
		if (r->n != n || r->kind < 0 || r->kind >= OP_KINDS)
			continue;
		char fl[64];
		fprintf(stderr, "  #%llu p%u %s f%u off %llu len %llu %s -> %lld\n", (unsigned long long)r->n, r->proc,
			op_names[r->kind], r->file, (unsigned long long)r->off, (unsigned long long)r->len,
			tu_flags_str(r->flags, fl, sizeof(fl)), (long long)r->ret);
	}
}

/* Report a difference (holding the lock) and stop everybody. */
static void fail(struct proc *p, const struct op_rec *r, const char *what, uint64_t at, int got, int want)
{
	int e = errno;
	char fl[64];
	fprintf(stderr,
		"shared_model: MISMATCH (base seed %llu, process %u with seed %llu, op #%llu: %s of file %u, off %llu, "
		"len %llu, flags %s, returned %lld): %s",
		(unsigned long long)S->base_seed, p->k, (unsigned long long)p->seed, (unsigned long long)r->n,
		op_names[r->kind], r->file, (unsigned long long)r->off, (unsigned long long)r->len,
		tu_flags_str(r->flags, fl, sizeof(fl)), (long long)r->ret, what);
	if (want >= 0)
		fprintf(stderr, " at byte %llu: 0x%02x, model 0x%02x", (unsigned long long)at, got, want);
	fprintf(stderr, " (errno %d %s)\n", e, strerror(e));
	print_ring();
	S->failed = 1;
}

/* buf[0, n) against the model of file i at off: true when equal. */
static bool same_as_model(struct proc *p, const struct op_rec *r, const uint8_t *buf, uint64_t n, unsigned i,
			  uint64_t off, const char *what)
{
	const uint8_t *m = S->data[i] + off;
	if (memcmp(buf, m, n) == 0)
		return true;
	for (uint64_t j = 0; j < n; j++)
		if (buf[j] != m[j]) {
			fail(p, r, what, off + j, buf[j], m[j]);
			break;
		}
	return false;
}

/* The backing file of file i, read with plain pread(2), is the model. */
static bool backing_is_model(struct proc *p, const struct op_rec *r, unsigned i)
{
	int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fail(p, r, "cannot open or stat the backing file", 0, -1, -1);
		if (fd >= 0)
			close(fd);
		return false;
	}
	bool ok = true;
	if ((uint64_t)st.st_size != S->size[i]) {
		char what[128];
		snprintf(what, sizeof(what), "the backing file's size is %lld, the model's %llu after fsync",
			 (long long)st.st_size, (unsigned long long)S->size[i]);
		fail(p, r, what, 0, -1, -1);
		ok = false;
	}
	uint64_t got = 0;
	while (ok && got < S->size[i]) {
		ssize_t n = pread(fd, p->disk + got, S->size[i] - got, (off_t)got);
		if (n <= 0) {
			fail(p, r, "short read of the backing file", got, -1, -1);
			ok = false;
		} else {
			got += (uint64_t)n;
		}
	}
	close(fd);
	return ok && same_as_model(p, r, p->disk, S->size[i], i, 0, "the backing file after fsync differs");
}

/* A length of 1 byte to IO_MAX, small ones often. */
static uint64_t draw_len(struct proc *p, uint64_t max)
{
	uint64_t r = tu_rand(&p->rng);
	uint64_t cap = (r & 3) == 0 ? 512 : (r & 3) == 1 ? 4096 : max;
	return 1 + (r >> 8) % tu_min_u64(cap, max);
}

/* An offset for an access of len bytes to file i: near the end of the
 * file half the time, anywhere below FILE_MAX otherwise. */
static uint64_t draw_off(struct proc *p, unsigned i, uint64_t len)
{
	uint64_t r = tu_rand(&p->rng);
	uint64_t top = FILE_MAX - len;
	if (r & 1) {
		uint64_t size = S->size[i];
		uint64_t lo = size > 64 * KiB ? size - 64 * KiB : 0;
		return tu_min_u64(lo + (r >> 8) % (80 * KiB), top);
	}
	return (r >> 8) % (top + 1);
}

static int read_flags(struct proc *p)
{
	uint64_t r = tu_rand(&p->rng) % 10;
	return r < 6 ? 0 : r < 8 ? PC_DONTCACHE : PC_DIRECT;
}

/* Run operation number n (holding the lock).  False: a difference, the
 * state is failed. */
static bool run_op(struct proc *p, uint64_t n)
{
	uint64_t r = tu_rand(&p->rng) % 100;
	unsigned i = (unsigned)(tu_rand(&p->rng) % NFILES);
	struct op_rec *rec = &S->ring[n % RING];
	*rec = (struct op_rec){ .n = n, .proc = p->k, .file = i, .kind = -1 };
	struct pc_file *f = p->f[i];
	uint64_t size = S->size[i];
	if (r < 38) {
		rec->kind = OP_WRITE;
		rec->len = draw_len(p, IO_MAX);
		rec->off = draw_off(p, i, rec->len);
		rec->flags = tu_io_flags_at(tu_rand(&p->rng) % 100);
		uint64_t seed = tu_rand(&p->rng);
		tu_fill_pattern(p->buf, rec->len, seed, rec->off);
		errno = 0;
		rec->ret = pc_pwrite(f, p->buf, rec->len, (off_t)rec->off, rec->flags);
		if (rec->ret != (int64_t)rec->len) {
			fail(p, rec, "pc_pwrite did not write it all", 0, -1, -1);
			return false;
		}
		memcpy(S->data[i] + rec->off, p->buf, rec->len);
		if (rec->off + rec->len > size)
			S->size[i] = rec->off + rec->len;
	} else if (r < 76) {
		rec->kind = OP_READ;
		rec->len = draw_len(p, IO_MAX);
		rec->off = draw_off(p, i, rec->len);
		rec->flags = read_flags(p);
		uint64_t want = rec->off >= size ? 0 : tu_min_u64(rec->len, size - rec->off);
		memset(p->buf, 0xa5, rec->len);
		errno = 0;
		rec->ret = pc_pread(f, p->buf, rec->len, (off_t)rec->off, rec->flags);
		if (rec->ret != (int64_t)want) {
			char what[96];
			snprintf(what, sizeof(what), "pc_pread returned %lld, the model has %llu bytes there",
				 (long long)rec->ret, (unsigned long long)want);
			fail(p, rec, what, 0, -1, -1);
			return false;
		}
		if (!same_as_model(p, rec, p->buf, want, i, rec->off, "pc_pread differs from the model"))
			return false;
	} else if (r < 81) {
		rec->kind = OP_TRUNCATE;
		uint64_t t = tu_rand(&p->rng);
		rec->len = (t & 1) ? (t >> 8) % (size + 1) : (t >> 8) % (FILE_MAX + 1);
		errno = 0;
		rec->ret = pc_ftruncate(f, (off_t)rec->len);
		if (rec->ret != 0) {
			fail(p, rec, "pc_ftruncate failed", 0, -1, -1);
			return false;
		}
		if (rec->len < size)
			memset(S->data[i] + rec->len, 0, size - rec->len);
		S->size[i] = rec->len;
	} else if (r < 88) {
		rec->kind = OP_PUNCH;
		rec->len = 1 + tu_rand(&p->rng) % PUNCH_MAX;
		rec->off = tu_rand(&p->rng) % (size + 4096);
		errno = 0;
		rec->ret = pc_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)rec->off, (off_t)rec->len);
		if (rec->ret != 0) {
			fail(p, rec, "pc_fallocate(PUNCH_HOLE | KEEP_SIZE) failed", 0, -1, -1);
			return false;
		}
		if (rec->off < size)
			memset(S->data[i] + rec->off, 0, tu_min_u64(rec->len, size - rec->off));
	} else if (r < 89) {
		/* Buffered writes one after the other, 256 KiB to 1 MiB in
		 * all: more than the dirty limit, so the writer is throttled. */
		rec->kind = OP_BURST;
		rec->len = BURST_MIN + tu_rand(&p->rng) % (BURST_MAX - BURST_MIN + 1);
		rec->off = tu_rand(&p->rng) % (FILE_MAX - rec->len + 1);
		uint64_t seed = tu_rand(&p->rng);
		uint64_t done = 0;
		while (done < rec->len) {
			uint64_t n = tu_min_u64(draw_len(p, IO_MAX), rec->len - done);
			tu_fill_pattern(p->buf, n, seed, rec->off + done);
			errno = 0;
			ssize_t w = pc_pwrite(f, p->buf, n, (off_t)(rec->off + done), 0);
			if (w != (ssize_t)n) {
				rec->ret = (int64_t)done + (w > 0 ? w : 0);
				fail(p, rec, "pc_pwrite of a burst did not write it all", rec->off + done, -1, -1);
				return false;
			}
			memcpy(S->data[i] + rec->off + done, p->buf, n);
			done += n;
		}
		rec->ret = (int64_t)done;
		if (rec->off + rec->len > size)
			S->size[i] = rec->off + rec->len;
	} else if (r < 92) {
		rec->kind = OP_FSYNC;
		errno = 0;
		rec->ret = pc_fsync(f);
		if (rec->ret != 0) {
			fail(p, rec, "pc_fsync failed", 0, -1, -1);
			return false;
		}
		if (!backing_is_model(p, rec, i))
			return false;
	} else if (r < 96) {
		rec->kind = OP_REOPEN;
		errno = 0;
		rec->ret = pc_close(f);
		p->f[i] = NULL;
		if (rec->ret != 0) {
			fail(p, rec, "pc_close failed", 0, -1, -1);
			return false;
		}
		errno = 0;
		p->f[i] = pc_open(p->c, paths[i], O_RDWR, 0);
		if (!p->f[i]) {
			rec->ret = -1;
			fail(p, rec, "pc_open failed", 0, -1, -1);
			return false;
		}
		if (pc_size(p->f[i]) != (off_t)S->size[i]) {
			rec->ret = pc_size(p->f[i]);
			fail(p, rec, "pc_size after the reopen is not the model's size", 0, -1, -1);
			return false;
		}
	} else {
		rec->kind = OP_READ_ALL;
		rec->len = FILE_MAX + 1;
		rec->flags = read_flags(p);
		errno = 0;
		off_t sz = pc_size(f);
		if (sz != (off_t)size) {
			rec->ret = sz;
			fail(p, rec, "pc_size is not the model's size", 0, -1, -1);
			return false;
		}
		rec->ret = pc_pread(f, p->disk, rec->len, 0, rec->flags);
		if (rec->ret != (int64_t)size) {
			fail(p, rec, "pc_pread of the whole file is not the model's size", 0, -1, -1);
			return false;
		}
		if (!same_as_model(p, rec, p->disk, size, i, 0, "the whole file differs from the model"))
			return false;
	}
	S->kinds[rec->kind]++;
	return true;
}

/* In a process: report and leave. */
#define PCHECK(p, cond)                                                                              \
	do {                                                                                         \
		if (!(cond)) {                                                                       \
			fprintf(stderr, "process %u: %s:%d: %s (errno %d %s)\n", (p)->k, __FILE__, __LINE__, \
				#cond, errno, strerror(errno));                                      \
			state_lock();                                                                \
			S->failed = 1;                                                               \
			pass_turn();                                                                 \
			state_unlock();                                                              \
			_exit(2);                                                                    \
		}                                                                                    \
	} while (0)

static struct pc_config model_config(void)
{
	struct pc_config cfg = tu_config(4 * MiB);
	cfg.shared_name = cache_name;
	return cfg;
}

/* Process k: attach (0 first: it creates), open the files, take turns,
 * check every file, leave.  Never returns. */
static _Noreturn void proc_main(unsigned k, int go_fd)
{
	struct proc p = { .k = k };
	p.seed = tu_mix64(S->base_seed + 0x1000 * (k + 1));
	if (!p.seed)
		p.seed = 1;
	p.rng = p.seed;
	PCHECK(&p, posix_memalign((void **)&p.buf, 4096, IO_MAX + 4096) == 0);
	PCHECK(&p, posix_memalign((void **)&p.disk, 4096, FILE_MAX + 4096) == 0);
	/* Process 0 attaches first (it creates); the others once it has. */
	if (k != 0) {
		char c;
		PCHECK(&p, read(go_fd, &c, 1) == 1);
	}
	close(go_fd);
	struct pc_config cfg = model_config();
	errno = 0;
	p.c = pc_cache_new(&cfg);
	PCHECK(&p, p.c);
	for (unsigned i = 0; i < NFILES; i++) {
		errno = 0;
		p.f[i] = pc_open(p.c, paths[i], O_RDWR, 0);
		PCHECK(&p, p.f[i]);
	}
	state_lock();
	S->attached++;
	state_unlock();

	uint64_t mine = 0;
	bool ok = true;
	state_lock();
	for (;;) {
		wait_turn(k);
		if (S->failed || S->next_op >= S->total_ops)
			break;
		uint64_t n = S->next_op;
		ok = run_op(&p, n);
		S->next_op++;
		S->ops_by[k]++;
		mine++;
		pass_turn();
		if (!ok)
			break;
	}
	/* The end: every file whole, as this process sees it. */
	for (unsigned i = 0; ok && !S->failed && i < NFILES; i++) {
		struct op_rec rec = { .n = S->next_op, .proc = k, .file = i, .kind = OP_READ_ALL,
				      .len = FILE_MAX + 1 };
		rec.ret = pc_pread(p.f[i], p.disk, FILE_MAX + 1, 0, 0);
		if (rec.ret != (int64_t)S->size[i]) {
			fail(&p, &rec, "at the end, pc_pread of the whole file is not the model's size", 0, -1, -1);
			ok = false;
		} else if (!same_as_model(&p, &rec, p.disk, S->size[i], i, 0, "at the end, the file differs")) {
			ok = false;
		}
	}
	if (!ok || S->failed)
		pass_turn(); /* wake everybody to stop */
	bool failed = S->failed;
	state_unlock();

	if (k == 0) {
		struct pc_stats st;
		pc_cache_stats(p.c, &st);
		printf("process 0 at the end: cached %llu, dirty %llu, evictions %llu, dropbehind drops %llu, "
		       "throttle waits %llu, throttle pauses %llu, device writes %llu (%llu bytes), reads %llu\n",
		       (unsigned long long)st.cached_bytes, (unsigned long long)st.dirty_bytes,
		       (unsigned long long)st.evictions, (unsigned long long)st.dropbehind_drops,
		       (unsigned long long)st.throttle_waits, (unsigned long long)st.throttle_pauses,
		       (unsigned long long)st.dev_write_ios, (unsigned long long)st.dev_write_bytes,
		       (unsigned long long)st.dev_read_ios);
	}
	/* Half the processes close their handles, the others leave them to
	 * pc_cache_destroy. */
	int bad = 0;
	if (k % 2 == 0)
		for (unsigned i = 0; i < NFILES; i++)
			if (p.f[i] && pc_close(p.f[i]) != 0) {
				fprintf(stderr, "process %u: pc_close of file %u: %s\n", k, i, strerror(errno));
				bad = 1;
			}
	if (pc_cache_destroy(p.c) != 0) {
		fprintf(stderr, "process %u: pc_cache_destroy: %s\n", k, strerror(errno));
		bad = 1;
	}
	printf("process %u (seed %llu): %llu operations\n", k, (unsigned long long)p.seed, (unsigned long long)mine);
	fflush(NULL);
	_exit(failed || !ok ? 1 : bad ? 2 : 0);
}

static uint64_t total_ops(void)
{
	const char *s = getenv("PC_SHARED_MODEL_OPS");
	if (s && *s)
		return strtoull(s, NULL, 0);
	return tu_quick() ? 15000 : 60000;
}

/* A stopped process stops the others: mark the state failed and wake them. */
static void stop_all(void)
{
	state_lock();
	S->failed = 1;
	pass_turn();
	state_unlock();
}

/* Four processes on one shared cache of 4 MiB and three files, every
 * operation checked against the model, and every backing file the model
 * once all have left. */
TEST_CASE(processes_match_model)
{
	uint64_t base = test_seed("shared_model", (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20));
	snprintf(cache_name, sizeof(cache_name), "pctest-%d-model", (int)getpid());
	tu_shm_unlink(cache_name);
	for (unsigned i = 0; i < NFILES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "file%u", i);
		test_path(paths[i], sizeof(paths[i]), dir, name);
		int fd = open(paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		REQUIRE(fd >= 0);
		close(fd);
	}

	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(S != MAP_FAILED);
	pthread_mutexattr_t ma;
	REQUIRE(pthread_mutexattr_init(&ma) == 0);
	REQUIRE(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) == 0);
	REQUIRE(pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) == 0);
	REQUIRE(pthread_mutex_init(&S->lock, &ma) == 0);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_t ca;
	REQUIRE(pthread_condattr_init(&ca) == 0);
	REQUIRE(pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) == 0);
	for (unsigned i = 0; i < NPROCS; i++)
		REQUIRE(pthread_cond_init(&S->turn[i], &ca) == 0);
	pthread_condattr_destroy(&ca);
	S->base_seed = base;
	S->order_rng = tu_mix64(base ^ 0x5eed) | 1;
	S->owner = (unsigned)(tu_rand(&S->order_rng) % NPROCS);
	S->total_ops = total_ops();
	printf("shared_model: %d processes, %d files of up to %llu bytes, %llu operations, cache \"%s\"\n", NPROCS,
	       NFILES, (unsigned long long)FILE_MAX, (unsigned long long)S->total_ops, cache_name);

	/* The children start their caches: forked while this process has no
	 * thread.  Process 0 attaches (creates) first; a pipe lets the others
	 * go once it has. */
	int go[2];
	REQUIRE(pipe2(go, O_CLOEXEC) == 0);
	pid_t pids[NPROCS];
	double t0 = tu_now_s();
	for (unsigned k = 0; k < NPROCS; k++) {
		pids[k] = tu_fork_alone(KID_WATCHDOG_S);
		if (pids[k] == 0) {
			close(go[1]);
			proc_main(k, go[0]);
		}
	}
	close(go[0]);
	/* Process 0 has attached once it counts itself (or it failed). */
	bool started = false;
	for (;;) {
		state_lock();
		bool up = S->attached >= 1, failed = S->failed;
		state_unlock();
		if (up || failed) {
			started = up && !failed;
			break;
		}
		int st;
		if (waitpid(pids[0], &st, WNOHANG) == pids[0]) {
			fprintf(stderr, "process 0 ended before it attached (status 0x%x)\n", st);
			pids[0] = -1;
			stop_all();
			break;
		}
		usleep(5000);
	}
	char c[NPROCS] = { 0 };
	if (write(go[1], c, NPROCS - 1) != NPROCS - 1)
		stop_all();
	close(go[1]);
	CHECK(started);

	/* Wait for them all; the first that fails stops the others. */
	bool ok = true;
	unsigned left = 0;
	for (unsigned k = 0; k < NPROCS; k++)
		if (pids[k] > 0)
			left++;
		else
			ok = false;
	uint64_t until = tu_now_ms() + (uint64_t)KID_WAIT_S * 1000;
	while (left) {
		bool any = false;
		for (unsigned k = 0; k < NPROCS; k++) {
			if (pids[k] <= 0)
				continue;
			int st;
			pid_t r = waitpid(pids[k], &st, WNOHANG);
			if (r != pids[k])
				continue;
			any = true;
			pids[k] = -1;
			left--;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				if (WIFSIGNALED(st))
					fprintf(stderr, "process %u ended by signal %d (%s)\n", k, WTERMSIG(st),
						strsignal(WTERMSIG(st)));
				else
					fprintf(stderr, "process %u exited with status %d\n", k, WEXITSTATUS(st));
				ok = false;
				stop_all();
			}
		}
		if (!any) {
			if (tu_now_ms() > until) {
				fprintf(stderr, "processes still running after %u s: killed\n", KID_WAIT_S);
				for (unsigned k = 0; k < NPROCS; k++)
					if (pids[k] > 0) {
						kill(pids[k], SIGKILL);
						waitpid(pids[k], NULL, 0);
					}
				ok = false;
				break;
			}
			usleep(10000);
		}
	}
	CHECK(ok);
	CHECK(!S->failed);
	CHECK(S->next_op == S->total_ops);
	printf("shared_model: %llu operations in %.1f s (", (unsigned long long)S->next_op, tu_now_s() - t0);
	for (unsigned k = 0; k < OP_KINDS; k++)
		printf("%s%s %llu", k ? ", " : "", op_names[k], (unsigned long long)S->kinds[k]);
	printf("); by process:");
	for (unsigned k = 0; k < NPROCS; k++)
		printf(" %llu", (unsigned long long)S->ops_by[k]);
	printf("\n");

	/* Every process left: each backing file is the model, size included. */
	if (ok && !S->failed) {
		static uint8_t disk[FILE_MAX + 1];
		for (unsigned i = 0; i < NFILES; i++) {
			int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
			REQUIRE(fd >= 0);
			struct stat st;
			REQUIRE(fstat(fd, &st) == 0);
			if ((uint64_t)st.st_size != S->size[i])
				fprintf(stderr, "file %u: backing size %lld, model %llu (base seed %llu)\n", i,
					(long long)st.st_size, (unsigned long long)S->size[i], (unsigned long long)base);
			CHECK((uint64_t)st.st_size == S->size[i]);
			uint64_t got = 0;
			for (;;) {
				ssize_t n = read(fd, disk + got, sizeof(disk) - got);
				if (n <= 0)
					break;
				got += (uint64_t)n;
			}
			close(fd);
			CHECK(got == S->size[i]);
			uint64_t n = tu_min_u64(got, S->size[i]);
			for (uint64_t j = 0; j < n; j++)
				if (disk[j] != S->data[i][j]) {
					fprintf(stderr,
						"file %u: backing byte %llu is 0x%02x, model 0x%02x (base seed %llu)\n",
						i, (unsigned long long)j, disk[j], S->data[i][j],
						(unsigned long long)base);
					CHECK(!"the backing file differs from the model");
					break;
				}
		}
	}
	for (unsigned i = 0; i < NFILES; i++)
		unlink(paths[i]);
	tu_shm_unlink(cache_name);
	munmap(S, sizeof(*S));
	S = NULL;
}
