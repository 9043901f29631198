/*
 * test_slots.c - process slots in shared memory (src/lib/slots.h): claims
 * by many processes at once, release and reuse, the 65th claim, and
 * whether a slot's process lives: after SIGKILL (exited, then reaped),
 * and when its pid names a process started at another time (pid reuse).
 *
 * Each case maps a zeroed MAP_SHARED area before it forks; children claim
 * slots in it, and the parent asks about them with pidfds of its own.
 */
#include "testutil.h"

#include "lib/slots.h"

#include <sys/mman.h>

static void slots_setup(void)
{
	tu_exit_guard();
}

TEST_FIXTURE(slots_setup, NULL)

/* What the processes of one case share. */
struct area {
	struct pc_slots slots;
	_Atomic int ready;           /* children that reached their rendezvous */
	_Atomic int go;              /* the parent's word to the children */
	_Atomic int held;            /* a holder child's slot */
	_Atomic int claims[SLOTS_MAX]; /* how many times each slot was handed out */
};

static struct area *area_new(void)
{
	struct area *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a != MAP_FAILED);
	slots_init(&a->slots);
	return a;
}

static void area_free(struct area *a)
{
	munmap(a, sizeof(*a));
}

/* Field 22 of /proc/self/stat, parsed here apart from slots.c. */
static uint64_t my_start_time(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	REQUIRE(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	REQUIRE(p);
	unsigned long long v = 0;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime cutime cstime priority nice threads itreal
	 * starttime */
	REQUIRE(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		       &v) == 1);
	return v;
}

/* A child that claims a slot, says which (a->held) and waits until it is
 * killed, or released (a->go). */
static pid_t spawn_holder(struct area *a)
{
	atomic_store(&a->held, -1);
	atomic_store(&a->go, 0);
	pid_t pid = tu_fork(120);
	if (pid == 0) {
		int s = slots_claim(&a->slots);
		REQUIRE(s >= 0);
		atomic_store(&a->held, s);
		while (!atomic_load(&a->go))
			usleep(1000);
		slots_release(&a->slots, (unsigned)s);
		exit(0);
	}
	REQUIRE(TU_POLL(atomic_load(&a->held) >= 0, 10000));
	return pid;
}

/* slots_alive as a process that never asked before would see it. */
static int alive_fresh(struct area *a, unsigned slot)
{
	struct pc_slot_peers peers;
	slots_peers_init(&peers);
	int r = slots_alive(&a->slots, &peers, slot);
	slots_peers_destroy(&peers);
	return r;
}

TEST_CASE(claim_records_pid_start_time_generation)
{
	struct area *a = area_new();
	int s = slots_claim(&a->slots);
	CHECK(s == 0);
	uint64_t w = slots_word(&a->slots, 0);
	CHECK(slot_word_state(w) == SLOT_LIVE);
	CHECK(slot_word_pid(w) == getpid());
	CHECK(slot_word_generation(w) == 1);
	CHECK(atomic_load(&a->slots.slot[0].start_time) == my_start_time());
	CHECK(slots_start_time(0) == (int64_t)my_start_time());
	CHECK(slots_start_time(getpid()) == (int64_t)my_start_time());

	/* A second claim of the same process: the next slot. */
	CHECK(slots_claim(&a->slots) == 1);
	slots_release(&a->slots, 0);
	w = slots_word(&a->slots, 0);
	CHECK(slot_word_state(w) == SLOT_FREE);
	CHECK(slot_word_pid(w) == 0);
	CHECK(slot_word_generation(w) == 1);
	/* Claimed again: a new generation. */
	CHECK(slots_claim(&a->slots) == 0);
	CHECK(slot_word_generation(slots_word(&a->slots, 0)) == 2);
	CHECK(slot_word_generation(slots_word(&a->slots, 1)) == 1);
	area_free(a);
}

TEST_CASE(release_and_reuse_across_processes)
{
	struct area *a = area_new();
	pid_t child = spawn_holder(a);
	CHECK(atomic_load(&a->held) == 0);
	uint64_t w = slots_word(&a->slots, 0);
	CHECK(slot_word_pid(w) == child);
	CHECK(slot_word_state(w) == SLOT_LIVE);
	/* Taken: the parent gets the next one. */
	int mine = slots_claim(&a->slots);
	CHECK(mine == 1);

	atomic_store(&a->go, 1); /* the child releases its slot and exits */
	CHECK(tu_wait_child(child, 60) == 0);
	w = slots_word(&a->slots, 0);
	CHECK(slot_word_state(w) == SLOT_FREE);
	CHECK(slot_word_generation(w) == 1);
	CHECK(alive_fresh(a, 0) == 0);

	/* Reused by another process, with a new generation. */
	child = spawn_holder(a);
	CHECK(atomic_load(&a->held) == 0);
	w = slots_word(&a->slots, 0);
	CHECK(slot_word_pid(w) == child);
	CHECK(slot_word_generation(w) == 2);
	CHECK(alive_fresh(a, 0) == 1);
	atomic_store(&a->go, 1);
	CHECK(tu_wait_child(child, 60) == 0);

	/* And by this one. */
	slots_release(&a->slots, (unsigned)mine);
	CHECK(slots_claim(&a->slots) == 0);
	CHECK(slot_word_pid(slots_word(&a->slots, 0)) == getpid());
	CHECK(slot_word_generation(slots_word(&a->slots, 0)) == 3);
	area_free(a);
}

TEST_CASE(sixty_fifth_claim_gets_emfile)
{
	struct area *a = area_new();
	for (int i = 0; i < SLOTS_MAX; i++)
		CHECK(slots_claim(&a->slots) == i);
	CHECK(slots_claim(&a->slots) == -EMFILE);

	/* Another process: the same answer. */
	pid_t pid = tu_fork(60);
	if (pid == 0)
		exit(slots_claim(&a->slots) == -EMFILE ? 0 : 1);
	CHECK(tu_wait_child(pid, 60) == 0);

	/* One slot given back: the next claim gets that one. */
	slots_release(&a->slots, 37);
	pid = tu_fork(60);
	if (pid == 0)
		exit(slots_claim(&a->slots) == 37 ? 0 : 1);
	CHECK(tu_wait_child(pid, 60) == 0);
	CHECK(slot_word_pid(slots_word(&a->slots, 37)) == pid);
	CHECK(slots_claim(&a->slots) == -EMFILE);
	area_free(a);
}

/* 8 processes claim 8 slots each at once: every slot is handed out once,
 * to the process its word names; then a 9th claim each gets EMFILE. */
TEST_CASE(concurrent_claims_are_unique)
{
	enum { PROCS = 8, EACH = SLOTS_MAX / PROCS };
	struct area *a = area_new();
	pid_t pids[PROCS];
	for (int p = 0; p < PROCS; p++) {
		pids[p] = tu_fork(120);
		if (pids[p] == 0) {
			atomic_fetch_add(&a->ready, 1);
			while (!atomic_load(&a->go))
				;
			for (int i = 0; i < EACH; i++) {
				int s = slots_claim(&a->slots);
				REQUIRE(s >= 0 && s < SLOTS_MAX);
				REQUIRE(slot_word_pid(slots_word(&a->slots, (unsigned)s)) == getpid());
				atomic_fetch_add(&a->claims[s], 1);
			}
			atomic_fetch_add(&a->ready, 1);
			while (atomic_load(&a->ready) < 2 * PROCS)
				usleep(1000);
			exit(slots_claim(&a->slots) == -EMFILE ? 0 : 2);
		}
	}
	REQUIRE(TU_POLL(atomic_load(&a->ready) == PROCS, 10000));
	atomic_store(&a->go, 1);
	for (int p = 0; p < PROCS; p++)
		CHECK(tu_wait_child(pids[p], 120) == 0);
	unsigned per_proc[PROCS] = { 0 };
	for (int s = 0; s < SLOTS_MAX; s++) {
		CHECK(atomic_load(&a->claims[s]) == 1);
		uint64_t w = slots_word(&a->slots, (unsigned)s);
		CHECK(slot_word_state(w) == SLOT_LIVE);
		for (int p = 0; p < PROCS; p++)
			per_proc[p] += slot_word_pid(w) == pids[p];
	}
	for (int p = 0; p < PROCS; p++)
		CHECK(per_proc[p] == EACH);
	area_free(a);
}

/* Alive while it runs; dead once SIGKILLed: as a zombie, to a process
 * that kept its pidfd and to one that asks afresh; and once reaped. */
TEST_CASE(alive_until_killed)
{
	struct area *a = area_new();
	pid_t child = spawn_holder(a);
	unsigned s = (unsigned)atomic_load(&a->held);
	struct pc_slot_peers peers;
	slots_peers_init(&peers);
	CHECK(slots_alive(&a->slots, &peers, s) == 1);
	CHECK(peers.peer[s].fd >= 0); /* the pidfd is kept */
	CHECK(slots_alive(&a->slots, &peers, s) == 1);

	REQUIRE(kill(child, SIGKILL) == 0);
	CHECK(TU_POLL(slots_alive(&a->slots, &peers, s) == 0, 1000));
	CHECK(peers.peer[s].fd < 0); /* closed once dead */
	CHECK(alive_fresh(a, s) == 0); /* a zombie, not reaped yet */
	CHECK(tu_wait_child(child, 60) == 128 + SIGKILL);
	CHECK(alive_fresh(a, s) == 0); /* gone */
	CHECK(slots_alive(&a->slots, &peers, s) == 0);
	/* Its word is untouched: dead is a verdict, not a state. */
	CHECK(slot_word_state(slots_word(&a->slots, s)) == SLOT_LIVE);

	/* A free slot has no process; our own slot has one. */
	CHECK(slots_alive(&a->slots, &peers, 5) == 0);
	int mine = slots_claim(&a->slots);
	CHECK(mine >= 0 && (unsigned)mine != s);
	CHECK(slots_alive(&a->slots, &peers, (unsigned)mine) == 1);
	slots_peers_destroy(&peers);
	area_free(a);
}

/* The pid in a slot may have been given to another process since the
 * claim: same pid, another start time.  Simulated by changing the slot's
 * start time under a live process, ours or a child's. */
TEST_CASE(pid_reuse_is_dead)
{
	struct area *a = area_new();
	pid_t child = spawn_holder(a);
	unsigned s = (unsigned)atomic_load(&a->held);
	_Atomic uint64_t *start = &a->slots.slot[s].start_time;
	uint64_t right = atomic_load(start);
	CHECK(alive_fresh(a, s) == 1);
	atomic_store(start, right + 1);
	CHECK(alive_fresh(a, s) == 0); /* the pid runs, but not the claimer */
	atomic_store(start, right - 1);
	CHECK(alive_fresh(a, s) == 0);
	atomic_store(start, right);
	CHECK(alive_fresh(a, s) == 1);

	/* A slot that a dead process with our own pid left. */
	int mine = slots_claim(&a->slots);
	REQUIRE(mine >= 0);
	start = &a->slots.slot[mine].start_time;
	right = atomic_load(start);
	CHECK(alive_fresh(a, (unsigned)mine) == 1);
	atomic_store(start, right + 100);
	CHECK(alive_fresh(a, (unsigned)mine) == 0);
	atomic_store(start, right);
	CHECK(alive_fresh(a, (unsigned)mine) == 1);

	atomic_store(&a->go, 1);
	CHECK(tu_wait_child(child, 60) == 0);
	area_free(a);
}

/* Recovery may begin only on a dead slot; RECOVERING keeps claimers out
 * until the recoverer frees it. */
TEST_CASE(recover_begin_only_for_dead_slots)
{
	struct area *a = area_new();
	struct pc_slot_peers peers;
	slots_peers_init(&peers);
	pid_t child = spawn_holder(a);
	unsigned s = (unsigned)atomic_load(&a->held);
	CHECK(s == 0);
	CHECK(slots_recover_begin(&a->slots, &peers, s) == -EBUSY);
	CHECK(slots_recover_begin(&a->slots, &peers, 9) == -ENOENT);
	REQUIRE(kill(child, SIGKILL) == 0);
	CHECK(tu_wait_child(child, 60) == 128 + SIGKILL);

	CHECK(slots_recover_begin(&a->slots, &peers, s) == 0);
	uint64_t w = slots_word(&a->slots, s);
	CHECK(slot_word_state(w) == SLOT_RECOVERING);
	CHECK(slot_word_pid(w) == child); /* whose it was stays visible */
	CHECK(slots_alive(&a->slots, &peers, s) == 0);
	CHECK(slots_recover_begin(&a->slots, &peers, s) == 0); /* a recoverer starts over */
	CHECK(slots_claim(&a->slots) == 1);                    /* not slot 0 */
	slots_release(&a->slots, s);
	CHECK(slot_word_state(slots_word(&a->slots, s)) == SLOT_FREE);
	CHECK(slots_claim(&a->slots) == 0);
	CHECK(slot_word_generation(slots_word(&a->slots, s)) == 2);

	/* A claimer killed before LIVE is known by the pid its claim wrote:
	 * a CLAIMING word of a dead pid is dead, and recoverable. */
	atomic_store(&a->slots.slot[5].word, (uint64_t)SLOT_CLAIMING | 7u << 2 | (uint64_t)child << 32);
	CHECK(slots_alive(&a->slots, &peers, 5) == 0);
	CHECK(slots_recover_begin(&a->slots, &peers, 5) == 0);
	/* ... and a CLAIMING word of a live pid is alive. */
	atomic_store(&a->slots.slot[6].word, (uint64_t)SLOT_CLAIMING | 7u << 2 | (uint64_t)getpid() << 32);
	CHECK(slots_alive(&a->slots, &peers, 6) == 1);
	CHECK(slots_recover_begin(&a->slots, &peers, 6) == -EBUSY);
	slots_peers_destroy(&peers);
	area_free(a);
}
