/*
 * test_segment.c - the memory a shared cache lives in (src/mem/segment.h):
 * names and permissions, creation races and a creator's death while it
 * initialises, one address in every process, the heap across processes
 * and its repair after a holder's death, the last process out, and fork.
 *
 * Each case names its segments "seg-<pid>-<tag>" and unlinks what is left
 * of them at its end, passed or failed.  Processes meet in a MAP_SHARED
 * area that the case maps before it forks (struct area).
 */
#include "testutil.h"

#include "lib/shlock.h"
#include "mem/segment.h"

#include <pwd.h>
#include <sys/file.h>
#include <sys/mman.h>

static void segment_setup(void)
{
	tu_exit_guard();
}

TEST_FIXTURE(segment_setup, NULL)

#define HEAP (1u << 20)

/* What the processes of one case share. */
struct area {
	_Atomic int ready;    /* children at their rendezvous */
	_Atomic int go;       /* the parent's word to the children */
	_Atomic int stopped;  /* a child stopped in the test hook */
	_Atomic int created;  /* children that created */
	_Atomic int last;     /* processes told they were last */
	_Atomic uint64_t base[16];
	_Atomic int slot[16];
	_Atomic int result[16];
	_Atomic uint64_t word; /* a value or a pointer passed on */
};

static struct area *area_new(void)
{
	struct area *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED);
	return a;
}

static void area_free(struct area *a)
{
	munmap(a, sizeof(*a));
}

/* The case's names: "seg-<pid>-<tag>" (so parallel runs never meet);
 * testutil.h's tu_shm_* name, find and remove their objects. */
static void seg_name(char *out, size_t n, const char *tag)
{
	snprintf(out, n, "seg-%d-%s", (int)getpid(), tag);
}


static struct seg_params params(void)
{
	return (struct seg_params){ .heap_bytes = HEAP };
}

static struct pc_segment *open_ok(const char *name)
{
	struct seg_params p = params();
	struct pc_segment *s = NULL;
	int r = segment_open(name, &p, &s);
	if (r)
		fprintf(stderr, "segment_open(%s): %s\n", name, strerror(-r));
	REQUIRE(r == 0 && s);
	return s;
}

/* A case's segment: name[64] gets "seg-<pid>-<tag>". */
static struct pc_segment *open_named(char *name, const char *tag)
{
	seg_name(name, 64, tag);
	return open_ok(name);
}

/* Detach, and if last, remove: returns what detach said. */
static int leave(struct pc_segment *s)
{
	int r = segment_detach(s);
	if (r == 1)
		segment_destroy(s, false);
	return r;
}

/* Is any byte of [addr, addr + len) mapped in this process? */
static bool range_mapped(uint64_t addr, uint64_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	REQUIRE(f);
	char line[512];
	bool hit = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && lo < addr + len && hi > addr)
			hit = true;
	}
	fclose(f);
	return hit;
}

/* Does this process see a segment at base (its header's magic)?  Read
 * through /proc/self/mem, so that an unmapped address is an error, not a
 * fault.  Not "is anything mapped there": a child's own mappings may take
 * the hole that the parent's MADV_DONTFORK segment leaves (ThreadSanitizer's
 * runtime puts a thread's stack there). */
static bool sees_segment(uint64_t base)
{
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	uint64_t magic = 0;
	ssize_t n = pread(fd, &magic, sizeof(magic), (off_t)base);
	close(fd);
	return n == (ssize_t)sizeof(magic) && magic == SEG_MAGIC;
}

/* ------------------------------------------------ names, permissions, ABI */

TEST_CASE(bad_names_and_sizes_einval)
{
	struct seg_params p = params();
	struct pc_segment *s = NULL;
	char long_name[SEG_NAME_MAX + 2];
	memset(long_name, 'n', sizeof(long_name));
	long_name[SEG_NAME_MAX + 1] = '\0';
	const char *bad[] = { "", "a/b", "/x", "x/", ".", "..", long_name, NULL };
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(segment_open(bad[i], &p, &s) == -EINVAL);
	/* 200 bytes is a name ("..." and ".x" too). */
	char name[SEG_NAME_MAX + 1];
	int n = snprintf(name, sizeof(name), "seg-%d-", (int)getpid());
	memset(name + n, 'n', SEG_NAME_MAX - (size_t)n);
	name[SEG_NAME_MAX] = '\0';
	s = open_ok(name);
	CHECK(segment_created(s));
	CHECK(leave(s) == 1);
	CHECK(!tu_shm_exists(name));
	char dots[64];
	seg_name(dots, sizeof(dots), "...");
	s = open_ok(dots);
	CHECK(leave(s) == 1);
	/* Sizes: a heap under 64 bytes, too much configuration. */
	char ok[64];
	seg_name(ok, sizeof(ok), "sizes");
	p.heap_bytes = 63;
	CHECK(segment_open(ok, &p, &s) == -EINVAL);
	CHECK(segment_new_private(&p, &s) == -EINVAL);
	p.heap_bytes = HEAP;
	p.config_len = SEG_CONFIG_MAX + 1;
	p.config = ok;
	CHECK(segment_open(ok, &p, &s) == -EINVAL);
	CHECK(segment_open(ok, NULL, &s) == -EINVAL);
	CHECK(!tu_shm_exists(ok));
	tu_shm_unlink(name);
	tu_shm_unlink(dots);
}

/* Make the object of a name by hand, as another program could. */
static int make_object(const char *name, mode_t mode)
{
	char path[300];
	tu_shm_name(path, sizeof(path), name);
	int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(fchmod(fd, mode) == 0);
	REQUIRE(ftruncate(fd, 4 << 20) == 0);
	return fd;
}

TEST_CASE(group_or_other_mode_eacces)
{
	struct seg_params p = params();
	struct pc_segment *s = NULL;
	char name[64];
	seg_name(name, sizeof(name), "mode");
	const mode_t modes[] = { 0640, 0604, 0660, 0606, 0700 | 0020 };
	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		int fd = make_object(name, modes[i]);
		CHECK(segment_open(name, &p, &s) == -EACCES);
		CHECK(tu_shm_exists(name)); /* refused, not taken over */
		close(fd);
		tu_shm_unlink(name);
	}
	/* The same object at 0600 is ours: not READY, nobody holds it, so
	 * it is taken over (a creator that died). */
	int fd = make_object(name, 0600);
	s = open_ok(name);
	CHECK(segment_created(s));
	close(fd);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

TEST_CASE(other_users_segment_eacces)
{
	if (geteuid() != 0)
		TEST_SKIP("needs root, to run a child as user pcfs-u1");
	struct passwd *pw = getpwnam("pcfs-u1");
	if (!pw)
		TEST_SKIP("no user pcfs-u1 (pcfs/tests/perms.sh makes it: useradd --system pcfs-u1)");
	uid_t uid = pw->pw_uid;
	gid_t gid = pw->pw_gid;
	/* The children become pcfs-u1 and leave by _exit: LeakSanitizer's
	 * check at exit cannot trace a process that changed its
	 * credentials (it is no longer dumpable). */
	char name[64];
	seg_name(name, sizeof(name), "user");
	char ours[300], theirs[300];
	tu_shm_name(ours, sizeof(ours), name); /* root's name */
	snprintf(theirs, sizeof(theirs), "/pagecache-%s", name); /* one namespace */

	/* pcfs-u1 makes an object under root's name (anybody may create in
	 * /dev/shm): root's attach refuses it, although root could open it. */
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		REQUIRE(setgid(gid) == 0 && setuid(uid) == 0);
		int fd = shm_open(ours, O_RDWR | O_CREAT | O_EXCL, 0600);
		REQUIRE(fd >= 0);
		REQUIRE(ftruncate(fd, 4 << 20) == 0);
		_exit(0);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	struct seg_params p = params();
	struct pc_segment *s = NULL;
	CHECK(segment_open(name, &p, &s) == -EACCES);
	CHECK(tu_shm_exists(name));
	shm_unlink(ours);

	/* Root's segment under pcfs-u1's name: pcfs-u1 cannot even open it. */
	int fd = shm_open(theirs, O_RDWR | O_CREAT | O_EXCL, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, 4 << 20) == 0);
	pid = tu_fork(60);
	if (pid == 0) {
		REQUIRE(setgid(gid) == 0 && setuid(uid) == 0);
		struct pc_segment *t = NULL;
		struct seg_params q = params();
		_exit(segment_open(name, &q, &t) == -EACCES ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	close(fd);
	shm_unlink(theirs);

	/* And pcfs-u1's own segment of that name is its own. */
	pid = tu_fork(60);
	if (pid == 0) {
		REQUIRE(setgid(gid) == 0 && setuid(uid) == 0);
		struct pc_segment *t = NULL;
		struct seg_params q = params();
		REQUIRE(segment_open(name, &q, &t) == 0);
		_exit(segment_created(t) && leave(t) == 1 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
}

TEST_CASE(other_abi_or_magic_eproto)
{
	char name[64];
	struct pc_segment *s = open_named(name, "abi");
	struct seg_header *h = segment_base(s);
	for (int what = 0; what < 3; what++) {
		if (what == 0)
			h->abi = SEG_ABI + 1;
		else if (what == 1)
			h->magic = ~SEG_MAGIC;
		else
			h->size += 4096; /* not the object's size */
		pid_t pid = tu_fork(60);
		if (pid == 0) {
			struct seg_params p = params();
			struct pc_segment *t = NULL;
			exit(segment_open(name, &p, &t) == -EPROTO ? 0 : 1);
		}
		CHECK(tu_wait_child(pid, 60) == 0);
		h->abi = SEG_ABI;
		h->magic = SEG_MAGIC;
		h->size = segment_size(s);
	}
	/* Put right, it attaches. */
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		exit(!segment_created(t) && leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

static int config_equal(const void *theirs, size_t len, void *arg)
{
	const char *mine = arg;
	return len == strlen(mine) && !memcmp(theirs, mine, len) ? 0 : -EINVAL;
}

TEST_CASE(config_blob_copied_and_checked)
{
	char name[64];
	seg_name(name, sizeof(name), "config");
	const char *cfg = "memory_limit=64M block=4096";
	struct seg_params p = { .heap_bytes = HEAP, .config = cfg, .config_len = strlen(cfg) };
	struct pc_segment *s = NULL;
	REQUIRE(segment_open(name, &p, &s) == 0);
	size_t len;
	const char *got = segment_config(s, &len);
	CHECK(len == strlen(cfg) && !memcmp(got, cfg, len));
	CHECK(got > (char *)segment_base(s) && got + len < (char *)segment_base(s) + segment_size(s));
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		/* A conflicting attacher is refused with its check's error,
		 * having taken no slot; the same configuration attaches. */
		struct seg_params q = { .heap_bytes = HEAP, .config_check = config_equal, .config_arg = "memory_limit=1G" };
		struct pc_segment *t = NULL;
		REQUIRE(segment_open(name, &q, &t) == -EINVAL);
		q.config_arg = (void *)cfg;
		REQUIRE(segment_open(name, &q, &t) == 0);
		size_t n;
		const char *c = segment_config(t, &n);
		REQUIRE(n == strlen(cfg) && !memcmp(c, cfg, n));
		REQUIRE(segment_slot(t) == 1); /* the refused attach took none */
		exit(leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

/* docs/shared.md, 13: the cache in the segment, its process part right
 * below it in each process's own memory. */
TEST_CASE(private_window_per_process_fixed_area_shared)
{
	char name[64];
	seg_name(name, sizeof(name), "window");
	struct seg_params p = { .heap_bytes = HEAP, .private_bytes = 5000, .fixed_bytes = 100 };
	struct pc_segment *s = NULL;
	REQUIRE(segment_open(name, &p, &s) == 0);
	char *win = segment_private(s), *fixed = segment_fixed(s);
	CHECK(win && (uintptr_t)win % PC_PAGE_SIZE == 0);
	CHECK(fixed == win + 8192); /* the window is whole pages */
	CHECK((char *)segment_config(s, &(size_t){ 0 }) >= fixed + 100);
	memset(win, 'P', 8192);
	memset(fixed, 'F', 100);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		/* Attached, the child has a window of its own (zeros), the
		 * same fixed area, at the same addresses. */
		struct seg_params q = params();
		struct pc_segment *t = NULL;
		REQUIRE(segment_open(name, &q, &t) == 0);
		char *w = segment_private(t), *f = segment_fixed(t);
		REQUIRE(w == win && f == fixed);
		for (int i = 0; i < 8192; i++)
			REQUIRE(w[i] == 0);
		REQUIRE(f[0] == 'F' && f[99] == 'F');
		memset(w, 'C', 8192);
		memset(f, 'G', 100);
		REQUIRE(segment_check(t) == 0);
		exit(leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(win[0] == 'P' && win[8191] == 'P');
	CHECK(fixed[0] == 'G' && fixed[99] == 'G');
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
	/* A private segment lays out the same. */
	REQUIRE(segment_new_private(&p, &s) == 0);
	CHECK(segment_fixed(s) == (char *)segment_private(s) + 8192);
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
	/* Without a window, the fixed area follows the header's page. */
	p.private_bytes = 0;
	REQUIRE(segment_new_private(&p, &s) == 0);
	CHECK(!segment_private(s) && segment_fixed(s) == (char *)segment_base(s) + PC_PAGE_SIZE);
	CHECK(leave(s) == 1);
	p.private_bytes = SEG_AREA_MAX + 1;
	CHECK(segment_new_private(&p, &s) == -EINVAL);
}

/* ------------------------------------------------ addresses */

TEST_CASE(addresses_hashed_in_this_builds_free_range)
{
	uint64_t lo, hi;
	segment_addr_range(&lo, &hi);
	printf("named segments' range in this build: [%#llx, %#llx)\n", (unsigned long long)lo,
	       (unsigned long long)hi);
	CHECK(lo < hi && lo % SEG_ADDR_ALIGN == 0 && hi % SEG_ADDR_ALIGN == 0);
	/* Nothing of this process (its program, its heap, its libraries, a
	 * sanitizer's shadow and allocator) lies in the range. */
	CHECK(!range_mapped(lo, hi - lo));
	/* Addresses: aligned, in the range with the size, another one per
	 * attempt, another one per name. */
	uint64_t first = segment_pick_addr("a", 1, 0);
	unsigned differ = 0, names_differ = 0;
	for (unsigned i = 0; i < SEG_ADDR_TRIES; i++) {
		size_t size = (size_t)(i + 1) << 29;
		uint64_t at = segment_pick_addr("a", size, i);
		CHECK(at >= lo && at + size <= hi && at % SEG_ADDR_ALIGN == 0);
		differ += at != first;
		char other[16];
		snprintf(other, sizeof(other), "n%u", i);
		names_differ += segment_pick_addr(other, 1, 0) != first;
	}
	CHECK(differ >= SEG_ADDR_TRIES - 2);
	CHECK(names_differ >= SEG_ADDR_TRIES - 1);
	CHECK(segment_pick_addr("a", 1, 0) == first); /* a function of the name */
	CHECK(segment_pick_addr("a", hi - lo, 3) == lo);
	CHECK(segment_pick_addr("a", hi - lo + 1, 0) == 0);
	/* A real segment maps at its first address, in this build too. */
	char name[64];
	struct pc_segment *s = open_named(name, "range");
	CHECK((uint64_t)(uintptr_t)segment_base(s) == segment_pick_addr(name, segment_size(s), 0));
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

TEST_CASE(same_address_in_parent_and_attached_child)
{
	char name[64];
	struct pc_segment *s = open_named(name, "addr");
	CHECK(segment_created(s));
	CHECK(segment_slot(s) == 0);
	atomic_store(segment_anchor(s), 0x1234abcdull);
	struct area *a = area_new();
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		atomic_store(&a->base[0], (uintptr_t)segment_base(t));
		atomic_store(&a->slot[0], segment_slot(t));
		atomic_store(&a->created, segment_created(t));
		atomic_store(&a->word, atomic_load(segment_anchor(t)));
		atomic_store(segment_anchor(t), 0x5678ull);
		exit(leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(atomic_load(&a->base[0]) == (uintptr_t)segment_base(s));
	CHECK(atomic_load(&a->slot[0]) == 1);
	CHECK(atomic_load(&a->created) == 0);
	CHECK(atomic_load(&a->word) == 0x1234abcdull);
	CHECK(atomic_load(segment_anchor(s)) == 0x5678ull);
	CHECK(slot_word_state(slots_word(segment_slots(s), 1)) == SLOT_FREE); /* released */
	CHECK(tu_shm_exists(name));
	CHECK(leave(s) == 1);
	CHECK(!tu_shm_exists(name));
	tu_shm_unlink(name);
	area_free(a);
}

TEST_CASE(attach_where_range_taken_enomem)
{
	char name[64];
	struct pc_segment *s = open_named(name, "taken");
	uint64_t base = (uintptr_t)segment_base(s);
	/* In this process the range is the segment's own. */
	struct seg_params p = params();
	struct pc_segment *t = NULL;
	CHECK(segment_open(name, &p, &t) == -ENOMEM);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		/* Something of the child's own in the last page of the range. */
		void *m = mmap((void *)(uintptr_t)(base + segment_size(s) - 4096), 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		REQUIRE(m != MAP_FAILED);
		struct seg_params q = params();
		struct pc_segment *u = NULL;
		REQUIRE(segment_open(name, &q, &u) == -ENOMEM);
		munmap(m, 4096);
		u = open_ok(name);
		exit(segment_base(u) == (void *)(uintptr_t)base && leave(u) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

/* ------------------------------------------------ creation races and deaths */

#define RACERS 8

TEST_CASE(creators_racing_one_creates_all_same_address)
{
	struct area *a = area_new();
	for (int round = 0; round < 4; round++) {
		char name[64], tag[16];
		snprintf(tag, sizeof(tag), "race%d", round);
		seg_name(name, sizeof(name), tag);
		memset(a, 0, sizeof(*a));
		pid_t pids[RACERS];
		for (int i = 0; i < RACERS; i++) {
			pids[i] = tu_fork(60);
			if (pids[i] == 0) {
				/* All start at once: asleep on the word until the
				 * parent's wake. */
				atomic_fetch_add(&a->ready, 1);
				while (!atomic_load(&a->go))
					shfutex_wait_ms((_Atomic uint32_t *)&a->go, 0, 1000);
				struct pc_segment *t = open_ok(name);
				atomic_store(&a->base[i], (uintptr_t)segment_base(t));
				atomic_store(&a->slot[i], segment_slot(t));
				if (segment_created(t))
					atomic_fetch_add(&a->created, 1);
				/* Everyone in before anyone leaves: the slots are
				 * then all distinct, and one is last. */
				atomic_fetch_add(&a->result[0], 1);
				while (atomic_load(&a->result[0]) < RACERS)
					usleep(1000);
				REQUIRE(segment_check(t) == 0);
				if (leave(t) == 1)
					atomic_fetch_add(&a->last, 1);
				exit(0);
			}
		}
		REQUIRE(TU_POLL(atomic_load(&a->ready) == RACERS, 10000));
		atomic_store(&a->go, 1);
		shfutex_wake((_Atomic uint32_t *)&a->go, RACERS);
		for (int i = 0; i < RACERS; i++)
			CHECK(tu_wait_child(pids[i], 60) == 0);
		CHECK(atomic_load(&a->created) == 1);
		CHECK(atomic_load(&a->last) == 1);
		uint64_t slots_seen = 0;
		for (int i = 0; i < RACERS; i++) {
			CHECK(atomic_load(&a->base[i]) == atomic_load(&a->base[0]));
			int sl = atomic_load(&a->slot[i]);
			CHECK(sl >= 0 && sl < RACERS);
			slots_seen |= 1ull << sl;
		}
		CHECK(slots_seen == (1ull << RACERS) - 1);
		CHECK(!tu_shm_exists(name));
		tu_shm_unlink(name);
	}
	area_free(a);
}

static struct area *hook_area;
static enum seg_step hook_at;
static bool hook_waits_for_go; /* else it waits to be killed */

static void stop_at_step(enum seg_step st)
{
	if (st != hook_at)
		return;
	atomic_store(&hook_area->stopped, 1);
	if (hook_waits_for_go) {
		while (!atomic_load(&hook_area->go))
			usleep(1000);
		return;
	}
	for (;;)
		pause();
}

/* A child that opens `name` and stops at step `at`: stopped when this
 * returns. */
static pid_t spawn_stopped_creator(struct area *a, const char *name, enum seg_step at, bool wait_for_go)
{
	atomic_store(&a->stopped, 0);
	atomic_store(&a->go, 0);
	pid_t pid = tu_fork(120);
	if (pid == 0) {
		hook_area = a;
		hook_at = at;
		hook_waits_for_go = wait_for_go;
		segment_test_hook = stop_at_step;
		struct pc_segment *t = open_ok(name);
		atomic_store(&a->base[1], (uintptr_t)segment_base(t));
		atomic_store(&a->created, segment_created(t));
		atomic_store(&a->word, atomic_load(segment_anchor(t)));
		atomic_store(&a->ready, 1);
		while (!atomic_load(&a->result[1]))
			usleep(1000);
		exit(leave(t) == 0 ? 0 : 1);
	}
	REQUIRE(TU_POLL(atomic_load(&a->stopped), 10000));
	return pid;
}

TEST_CASE(creator_killed_initialising_taken_over)
{
	struct area *a = area_new();
	const enum seg_step steps[] = { SEG_STEP_OPENED, SEG_STEP_LOCKED, SEG_STEP_SIZED, SEG_STEP_HEADER };
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		char name[64], tag[16];
		snprintf(tag, sizeof(tag), "dead%u", i);
		seg_name(name, sizeof(name), tag);
		memset(a, 0, sizeof(*a));
		pid_t creator = spawn_stopped_creator(a, name, steps[i], false);
		struct seg_params p = params();
		struct pc_segment *s = NULL;
		if (steps[i] != SEG_STEP_OPENED) {
			/* Alive and holding the flock: an attacher waits, and
			 * gives up after its wait. */
			p.wait_ms = 300;
			CHECK(segment_open(name, &p, &s) == -ETIMEDOUT);
			CHECK(tu_shm_exists(name));
			/* One that waits longer is there when the creator
			 * dies: it takes the name over. */
			pid_t waiter = tu_fork(60);
			if (waiter == 0) {
				struct pc_segment *t = open_ok(name); /* waits up to 5 s */
				REQUIRE(segment_created(t));
				atomic_store(&a->base[2], (uintptr_t)segment_base(t));
				atomic_store(&a->ready, 2);
				while (!atomic_load(&a->result[2]))
					usleep(1000);
				exit(leave(t) == 0 ? 0 : 1);
			}
			usleep(150 * 1000); /* it waits meanwhile (or not yet: either way) */
			REQUIRE(kill(creator, SIGKILL) == 0);
			CHECK(tu_wait_child(creator, 60) == 128 + SIGKILL);
			REQUIRE(TU_POLL(atomic_load(&a->ready) == 2, 10000));
			s = open_ok(name);
			CHECK(!segment_created(s));
			CHECK((uintptr_t)segment_base(s) == atomic_load(&a->base[2]));
			atomic_store(&a->result[2], 1);
			CHECK(tu_wait_child(waiter, 60) == 0);
		} else {
			/* Between its shm_open and its flock nobody holds the
			 * lock: the next one takes the name over at once. */
			s = open_ok(name);
			CHECK(segment_created(s));
			REQUIRE(kill(creator, SIGKILL) == 0);
			CHECK(tu_wait_child(creator, 60) == 128 + SIGKILL);
		}
		CHECK(segment_check(s) == 0);
		CHECK(leave(s) == 1);
		CHECK(!tu_shm_exists(name));
		tu_shm_unlink(name);
	}
	area_free(a);
}

TEST_CASE(slow_creator_overtaken_rejoins)
{
	struct area *a = area_new();
	char name[64];
	seg_name(name, sizeof(name), "slow");
	/* Stopped between its shm_open and its flock, not dead. */
	pid_t creator = spawn_stopped_creator(a, name, SEG_STEP_OPENED, true);
	struct pc_segment *s = open_ok(name);
	CHECK(segment_created(s)); /* took the name over */
	atomic_store(segment_anchor(s), 77);
	atomic_store(&a->go, 1);
	/* The slow one finds its object unnamed after its flock, starts
	 * again and attaches to ours. */
	REQUIRE(TU_POLL(atomic_load(&a->ready) == 1, 10000));
	CHECK(atomic_load(&a->created) == 0);
	CHECK(atomic_load(&a->base[1]) == (uintptr_t)segment_base(s));
	CHECK(atomic_load(&a->word) == 77);
	atomic_store(&a->result[1], 1);
	CHECK(tu_wait_child(creator, 60) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
	area_free(a);
}

TEST_CASE(all_slots_taken_emfile)
{
	char name[64];
	struct pc_segment *s = open_named(name, "slots");
	int taken[SLOTS_MAX], n = 0;
	for (int r; (r = slots_claim(segment_slots(s))) >= 0;)
		taken[n++] = r;
	CHECK(n == SLOTS_MAX - 1);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct seg_params p = params();
		struct pc_segment *t = NULL;
		exit(segment_open(name, &p, &t) == -EMFILE ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	slots_release(segment_slots(s), (unsigned)taken[n - 1]);
	pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		exit(segment_slot(t) == taken[n - 1] && leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	for (int i = 0; i < n - 1; i++)
		slots_release(segment_slots(s), (unsigned)taken[i]);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

/* ------------------------------------------------ membership */

TEST_CASE(last_detacher_found_after_killed_member)
{
	char name[64];
	seg_name(name, sizeof(name), "last");
	struct area *a = area_new();
	struct pc_segment *s = open_ok(name);
	/* B attaches and waits for its turn to leave; C attaches and is
	 * killed. */
	pid_t b = tu_fork(60);
	if (b == 0) {
		struct pc_segment *t = open_ok(name);
		atomic_fetch_add(&a->ready, 1);
		while (!atomic_load(&a->go))
			usleep(1000);
		exit(leave(t) == 0 ? 0 : 1);
	}
	pid_t c = tu_fork(60);
	if (c == 0) {
		struct pc_segment *t = open_ok(name);
		atomic_store(&a->slot[0], segment_slot(t));
		atomic_fetch_add(&a->ready, 1);
		for (;;)
			pause();
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready) == 2, 10000));
	REQUIRE(kill(c, SIGKILL) == 0);
	CHECK(tu_wait_child(c, 60) == 128 + SIGKILL);
	atomic_store(&a->go, 1);
	CHECK(tu_wait_child(b, 60) == 0); /* not last: we are here */
	CHECK(tu_shm_exists(name));
	/* C's slot is still LIVE (recovery is the cache's), but C holds no
	 * lock: we are last. */
	int cs = atomic_load(&a->slot[0]);
	CHECK(slot_word_state(slots_word(segment_slots(s), (unsigned)cs)) == SLOT_LIVE);
	int r = segment_detach(s);
	CHECK(r == 1);
	if (r == 1) {
		/* Still mapped, with a slot, for the write-back. */
		CHECK(segment_slot(s) >= 0 && segment_slot(s) != cs);
		void *p;
		CHECK(seg_alloc(s, 100, 0, &p) == 0);
		seg_free(s, p);
		CHECK(segment_check(s) == 0);
		/* An attacher meanwhile waits (flock), then finds the name
		 * gone and creates anew. */
		pid_t d = tu_fork(60);
		if (d == 0) {
			struct pc_segment *t = open_ok(name);
			exit(segment_created(t) && leave(t) == 1 ? 0 : 1);
		}
		usleep(100 * 1000);
		segment_destroy(s, false);
		CHECK(tu_wait_child(d, 60) == 0);
	}
	CHECK(!tu_shm_exists(name));
	tu_shm_unlink(name);
	area_free(a);
}

TEST_CASE(last_one_may_keep_the_name)
{
	char name[64];
	struct pc_segment *s = open_named(name, "keep");
	void *p;
	REQUIRE(seg_alloc(s, 64, 0, &p) == 0);
	memcpy(p, "dirty", 6);
	atomic_store(segment_anchor(s), (uintptr_t)p);
	REQUIRE(segment_detach(s) == 1);
	segment_destroy(s, true); /* write-back failed: the data waits */
	CHECK(tu_shm_exists(name));
	/* The next process finds it READY with nobody in it, and joins. */
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		const char *q = (const char *)(uintptr_t)atomic_load(segment_anchor(t));
		REQUIRE(!segment_created(t) && q && !strcmp(q, "dirty"));
		REQUIRE(segment_check(t) == 0);
		exit(leave(t) == 1 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(!tu_shm_exists(name));
	tu_shm_unlink(name);
}

TEST_CASE(fork_child_inherits_no_mapping_nor_membership)
{
	char name[64];
	struct pc_segment *s = open_named(name, "fork");
	uint64_t base = (uintptr_t)segment_base(s);
	int fd = s->fd;
	CHECK(sees_segment(base));
	struct area *a = area_new();
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		REQUIRE(!sees_segment(base));
		REQUIRE(fcntl(fd, F_GETFD) == -1 && errno == EBADF); /* its copy closed */
		void *p;
		REQUIRE(seg_alloc(s, 64, 0, &p) == -EPERM);
		REQUIRE(segment_check(s) == -EPERM);
		REQUIRE(segment_detach(s) == 0); /* frees the copy */
		/* It may attach like anybody, at the same address. */
		struct pc_segment *t = open_ok(name);
		REQUIRE((uintptr_t)segment_base(t) == base && !segment_created(t));
		REQUIRE(leave(t) == 0);
		atomic_store(&a->ready, 1);
		while (!atomic_load(&a->go))
			usleep(1000);
		exit(0);
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready), 10000));
	/* The child lives and held a copy of our descriptor: we are last. */
	CHECK(leave(s) == 1);
	CHECK(!tu_shm_exists(name));
	atomic_store(&a->go, 1);
	CHECK(tu_wait_child(pid, 60) == 0);

	/* A private segment: the child has none of it either. */
	struct seg_params p = params();
	REQUIRE(segment_new_private(&p, &s) == 0);
	base = (uintptr_t)segment_base(s);
	CHECK(sees_segment(base));
	CHECK(base % SEG_ALIGN_MAX == 0);
	CHECK(s->fd == -1 && segment_slot(s) == 0);
	pid = tu_fork(60);
	if (pid == 0) {
		void *q;
		REQUIRE(!sees_segment(base));
		REQUIRE(seg_alloc(s, 64, 0, &q) == -EPERM);
		exit(segment_detach(s) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	void *q;
	CHECK(seg_alloc(s, 64, 0, &q) == 0);
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
	area_free(a);
}

/* ------------------------------------------------ the heap */

TEST_CASE(heap_pointer_from_one_process_read_in_another)
{
	char name[64];
	struct pc_segment *s = open_named(name, "ptr");
	char *p;
	REQUIRE(seg_alloc(s, 4000, 0, (void **)&p) == 0);
	for (int i = 0; i < 4000; i++)
		p[i] = (char)(i * 7);
	atomic_store(segment_anchor(s), (uintptr_t)p);
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		char *q = (char *)(uintptr_t)atomic_load(segment_anchor(t));
		REQUIRE(q == p);
		for (int i = 0; i < 4000; i++)
			REQUIRE(q[i] == (char)(i * 7));
		/* One of its own, for the parent. */
		char *r;
		REQUIRE(seg_alloc(t, 100, 0, (void **)&r) == 0);
		strcpy(r, "from the child");
		memcpy(q, &r, sizeof(r));
		exit(leave(t) == 0 ? 0 : 1);
	}
	CHECK(tu_wait_child(pid, 60) == 0);
	char *r;
	memcpy(&r, p, sizeof(r));
	CHECK(r > (char *)segment_base(s) && r < (char *)segment_base(s) + segment_size(s));
	CHECK(!strcmp(r, "from the child"));
	CHECK(seg_used(s) == 4096 + 128);
	seg_free(s, r); /* another process's block */
	seg_free(s, p);
	CHECK(seg_used(s) == 0);
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}

TEST_CASE(heap_full_enomem_then_merges_back)
{
	struct seg_params p = { .heap_bytes = 64 << 10 };
	struct pc_segment *s;
	REQUIRE(segment_new_private(&p, &s) == 0);
	void *blk[1024 + 1];
	int n = 0;
	while (n <= 1024 && seg_alloc(s, 1, 0, &blk[n]) == 0)
		n++;
	CHECK(n == 1024);
	CHECK(seg_used(s) == 64 << 10);
	void *x;
	CHECK(seg_alloc(s, 1, 0, &x) == -ENOMEM);
	CHECK(segment_check(s) == 0);
	seg_free(s, blk[500]);
	CHECK(seg_alloc(s, 64, 0, &x) == 0 && x == blk[500]);
	CHECK(seg_alloc(s, 64, 0, &x) == -ENOMEM);
	/* Freed in a scattered order, everything merges into one block. */
	for (int stride = 0; stride < 7; stride++)
		for (int i = stride; i < n; i += 7)
			seg_free(s, blk[i]);
	CHECK(seg_used(s) == 0);
	CHECK(segment_check(s) == 0);
	CHECK(seg_alloc(s, 64 << 10, 0, &x) == 0);
	CHECK(seg_alloc(s, 1, 0, &x) == -ENOMEM);
	/* Bad requests. */
	CHECK(seg_alloc(s, (64 << 10) + 1, 0, &x) == -ENOMEM);
	CHECK(seg_alloc(s, SIZE_MAX, 0, &x) == -ENOMEM);
	CHECK(seg_alloc(s, 0, 0, &x) == -EINVAL);
	CHECK(seg_alloc(s, 64, 96, &x) == -EINVAL);
	CHECK(seg_alloc(s, 64, SEG_ALIGN_MAX * 2, &x) == -EINVAL);
	CHECK(leave(s) == 1);
}

/* A heap that is not a power of two: its tail blocks. */
TEST_CASE(heap_alignment_and_odd_size)
{
	struct seg_params p = { .heap_bytes = (5u << 20) + 3 * 64 + 10 };
	struct pc_segment *s;
	REQUIRE(segment_new_private(&p, &s) == 0);
	CHECK(segment_check(s) == 0);
	for (size_t align = 64; align <= SEG_ALIGN_MAX; align <<= 1) {
		void *x;
		REQUIRE(seg_alloc(s, 10, align, &x) == 0);
		CHECK((uintptr_t)x % align == 0);
	}
	/* The whole heap, small blocks: every byte of it, no more. */
	void *x;
	uint64_t got = seg_used(s);
	while (seg_alloc(s, 64, 0, &x) == 0)
		got += 64;
	CHECK(got == ((5u << 20) + 3 * 64));
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
}

struct live {
	uint8_t *p;
	size_t len;
	uint8_t tag;
};

/* Random allocations and frees with their bytes filled and verified, `ops`
 * of them; a check every 200. */
static bool churn(struct pc_segment *s, uint64_t seed, int ops)
{
	struct live live[64] = { 0 };
	bool ok = true;
	for (int op = 0; op < ops && ok; op++) {
		struct live *l = &live[tu_rand(&seed) % 64];
		if (l->p) {
			for (size_t i = 0; i < l->len; i++)
				if (l->p[i] != (uint8_t)(l->tag + i)) {
					fprintf(stderr, "block %p byte %zu overwritten\n", (void *)l->p, i);
					ok = false;
					break;
				}
			seg_free(s, l->p);
			l->p = NULL;
			continue;
		}
		size_t len = 1 + tu_rand(&seed) % (tu_rand(&seed) % 4 ? 300 : 20000);
		size_t align = tu_rand(&seed) % 3 ? 0 : (size_t)64 << (tu_rand(&seed) % 7);
		int r = seg_alloc(s, len, align, (void **)&l->p);
		if (r) {
			l->p = NULL;
			ok = r == -ENOMEM;
			continue;
		}
		if (align && (uintptr_t)l->p % align) {
			fprintf(stderr, "block %p not aligned to %zu\n", (void *)l->p, align);
			ok = false;
		}
		l->len = len;
		l->tag = (uint8_t)tu_rand(&seed);
		for (size_t i = 0; i < len; i++)
			l->p[i] = (uint8_t)(l->tag + i);
		if (op % 200 == 0 && segment_check(s) != 0)
			ok = false;
	}
	for (int i = 0; i < 64; i++)
		if (live[i].p)
			seg_free(s, live[i].p);
	return ok;
}

#define CHURNERS 3

TEST_CASE(heap_churn_across_processes_then_check)
{
	char name[64];
	seg_name(name, sizeof(name), "churn");
	struct area *a = area_new();
	struct pc_segment *s = open_ok(name);
	uint64_t seed = test_seed("segment.heap_churn", (uint64_t)getpid());
	int ops = TU_SANITIZED ? 3000 : 20000;
	pid_t pids[CHURNERS];
	for (int i = 0; i < CHURNERS; i++) {
		pids[i] = tu_fork(300);
		if (pids[i] == 0) {
			struct pc_segment *t = open_ok(name);
			atomic_fetch_add(&a->ready, 1);
			while (!atomic_load(&a->go))
				usleep(1000);
			bool ok = churn(t, seed + (uint64_t)i + 1, ops);
			exit(ok && leave(t) == 0 ? 0 : 1);
		}
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready) == CHURNERS, 10000));
	atomic_store(&a->go, 1);
	CHECK(churn(s, seed, ops));
	for (int i = 0; i < CHURNERS; i++)
		CHECK(tu_wait_child(pids[i], 300) == 0);
	CHECK(seg_used(s) == 0);
	CHECK(segment_check(s) == 0);
	void *x;
	CHECK(seg_alloc(s, HEAP, 0, &x) == 0); /* all merged back */
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
	area_free(a);
}

/* The checker sees what is wrong: a walker that passes everything would
 * let the tests above pass too. */
TEST_CASE(checker_finds_broken_heaps)
{
	struct seg_params p = { .heap_bytes = 64 << 10 };
	struct pc_segment *s;
	REQUIRE(segment_new_private(&p, &s) == 0);
	struct seg_header *h = segment_base(s);
	uint8_t *table = (uint8_t *)h + h->heap.table_off;
	void *x, *y;
	REQUIRE(seg_alloc(s, 64, 0, &x) == 0 && seg_alloc(s, 64, 0, &y) == 0);
	CHECK(segment_check(s) == 0);
	uint64_t xo = (uint64_t)((char *)x - ((char *)h + h->heap.off));
	uint8_t saved = table[xo >> 6];
	table[xo >> 6] = 0; /* no block starts where one does */
	CHECK(segment_check(s) == -EUCLEAN);
	table[xo >> 6] = saved;
	table[(h->heap.bytes >> 6) - 1] = 0x80; /* a byte inside a free block */
	CHECK(segment_check(s) == -EUCLEAN);
	table[(h->heap.bytes >> 6) - 1] = 0;
	h->heap.used += 64;
	CHECK(segment_check(s) == -EUCLEAN);
	h->heap.used -= 64;
	unsigned k = 0;
	while (h->heap.free_head[k] == SEG_NONE)
		k++;
	uint64_t head = h->heap.free_head[k];
	h->heap.free_head[k] = SEG_NONE; /* a free block on no list */
	CHECK(segment_check(s) == -EUCLEAN);
	h->heap.free_head[k] = head;
	CHECK(segment_check(s) == 0);
	seg_free(s, x);
	seg_free(s, y);
	CHECK(segment_check(s) == 0);
	CHECK(leave(s) == 1);
}

/* A child that takes the heap's lock and stops at `at` (the lists half
 * changed) is killed there; the next allocation repairs the heap. */
static void kill_heap_holder(struct pc_segment *s, const char *name, enum seg_step at, void *to_free)
{
	struct area *a = area_new();
	pid_t pid = tu_fork(60);
	if (pid == 0) {
		struct pc_segment *t = open_ok(name);
		hook_area = a;
		hook_at = at;
		hook_waits_for_go = false;
		segment_test_hook = stop_at_step;
		void *x;
		if (to_free)
			seg_free(t, to_free);
		else
			seg_alloc(t, 64, 0, &x);
		exit(1); /* never here */
	}
	REQUIRE(TU_POLL(atomic_load(&a->stopped), 10000));
	REQUIRE(kill(pid, SIGKILL) == 0);
	CHECK(tu_wait_child(pid, 60) == 128 + SIGKILL);
	int owner = shlock_word_owner(atomic_load(&((struct seg_header *)segment_base(s))->heap.lock.word));
	CHECK(owner >= 0 && owner != segment_slot(s)); /* the dead child's */
	area_free(a);
}

TEST_CASE(heap_repaired_after_holder_killed)
{
	char name[64];
	struct pc_segment *s = open_named(name, "repair");
	/* Killed splitting: a block off its list; then with a split half
	 * made (the upper half's head inside the block being split). */
	const enum seg_step splits[] = { SEG_STEP_SPLIT, SEG_STEP_SPLIT_HALF };
	for (int i = 0; i < 2; i++) {
		kill_heap_holder(s, name, splits[i], NULL);
		void *x;
		CHECK(seg_alloc(s, 64, 0, &x) == 0); /* waits, finds the owner dead, repairs */
		CHECK(segment_check(s) == 0);
		CHECK(seg_used(s) == 64);
		seg_free(s, x);
		CHECK(segment_check(s) == 0);
	}
	/* Killed merging: y's buddy x is free, off its list, not merged; then
	 * with the merged block's order written and y's head not cleared. */
	const enum seg_step merges[] = { SEG_STEP_MERGE, SEG_STEP_MERGE_HALF };
	for (int i = 0; i < 2; i++) {
		void *x, *y;
		CHECK(seg_alloc(s, 64, 0, &x) == 0);
		CHECK(seg_alloc(s, 64, 0, &y) == 0);
		seg_free(s, x);
		kill_heap_holder(s, name, merges[i], y);
		CHECK(seg_alloc(s, HEAP, 0, &x) == 0); /* repaired, merged: the whole heap */
		CHECK(segment_check(s) == 0);
		seg_free(s, x);
		CHECK(seg_used(s) == 0);
		CHECK(segment_check(s) == 0);
	}
	/* The dead children's slots are LIVE still; ours is last anyway. */
	CHECK(leave(s) == 1);
	tu_shm_unlink(name);
}
