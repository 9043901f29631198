/*
 * slots.c - process slots in a shared area, and whether their processes
 * run (slots.h has the protocol).
 */
#include "lib/slots.h"

#include "lib/check.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* glibc before 2.36 has no wrapper, and older headers no number. */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define STATE_MASK 3ull
#define GEN_MASK 0x3fffffffull

static uint64_t make_word(enum slot_state st, uint32_t gen, pid_t pid)
{
	return (uint64_t)st | ((uint64_t)gen & GEN_MASK) << 2 | (uint64_t)(uint32_t)pid << 32;
}

int64_t slots_start_time(pid_t pid)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return err == ESRCH ? -ESRCH : -err;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	 * so fields are counted from the last ')'.  Field 3 is the state,
	 * field 22 the start time. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || end == p || v > INT64_MAX)
		return -EIO;
	return (int64_t)v;
}

void slots_init(struct pc_slots *s)
{
	for (unsigned i = 0; i < SLOTS_MAX; i++) {
		atomic_init(&s->slot[i].word, 0);
		atomic_init(&s->slot[i].start_time, 0);
	}
}

int slots_claim(struct pc_slots *s)
{
	int64_t start = slots_start_time(0);
	if (start < 0)
		return (int)start;
	pid_t pid = getpid();
	for (unsigned i = 0; i < SLOTS_MAX; i++) {
		struct pc_slot *sl = &s->slot[i];
		uint64_t w = atomic_load_explicit(&sl->word, memory_order_relaxed);
		while (slot_word_state(w) == SLOT_FREE) {
			uint64_t claim = make_word(SLOT_CLAIMING, slot_word_generation(w) + 1, pid);
			if (!atomic_compare_exchange_weak_explicit(&sl->word, &w, claim, memory_order_acq_rel,
								   memory_order_relaxed))
				continue;
			/* Ours.  The start time before LIVE, which publishes it. */
			atomic_store_explicit(&sl->start_time, (uint64_t)start, memory_order_relaxed);
			atomic_store_explicit(&sl->word, (claim & ~STATE_MASK) | SLOT_LIVE, memory_order_release);
			return (int)i;
		}
	}
	return -EMFILE;
}

void slots_release(struct pc_slots *s, unsigned slot)
{
	PC_ASSERT(slot < SLOTS_MAX);
	struct pc_slot *sl = &s->slot[slot];
	uint64_t w = atomic_load_explicit(&sl->word, memory_order_relaxed);
	PC_ASSERT(slot_word_state(w) == SLOT_LIVE || slot_word_state(w) == SLOT_RECOVERING);
	/* The generation stays: the next claim bumps it. */
	atomic_store_explicit(&sl->word, make_word(SLOT_FREE, slot_word_generation(w), 0), memory_order_release);
}

void slots_peers_init(struct pc_slot_peers *peers)
{
	pthread_mutex_init(&peers->lock, NULL);
	for (unsigned i = 0; i < SLOTS_MAX; i++)
		peers->peer[i] = (struct pc_slot_peer){ .word = 0, .fd = -1, .dead = false };
}

void slots_peers_destroy(struct pc_slot_peers *peers)
{
	for (unsigned i = 0; i < SLOTS_MAX; i++)
		if (peers->peer[i].fd >= 0) {
			close(peers->peer[i].fd);
			peers->peer[i].fd = -1;
		}
	pthread_mutex_destroy(&peers->lock);
}

/* This process's start time, read once per process (a child of fork has
 * its own pid, and reads its own). */
static int64_t own_start_time(pid_t self)
{
	static _Atomic pid_t cached_pid;
	static _Atomic int64_t cached;
	if (atomic_load_explicit(&cached_pid, memory_order_acquire) == self)
		return atomic_load_explicit(&cached, memory_order_relaxed);
	int64_t t = slots_start_time(0);
	if (t >= 0) {
		atomic_store_explicit(&cached, t, memory_order_relaxed);
		atomic_store_explicit(&cached_pid, self, memory_order_release);
	}
	return t;
}

/* Has the process behind pidfd `fd` exited? */
static bool pidfd_exited(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;
	do
		r = poll(&p, 1, 0);
	while (r < 0 && errno == EINTR);
	return r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/*
 * The verdict on slot word w (state LIVE or CLAIMING) of `slot`, whose
 * start time the caller read after w: 1 runs, 0 dead.  Called with the
 * peers' lock held; keeps a pidfd in peer for the next question.
 */
static int ask_kernel(struct pc_slot_peer *peer, uint64_t w, uint64_t slot_start)
{
	pid_t pid = slot_word_pid(w);
	bool claiming = slot_word_state(w) == SLOT_CLAIMING;

	if (peer->word != w) {
		if (peer->fd >= 0)
			close(peer->fd);
		*peer = (struct pc_slot_peer){ .word = w, .fd = -1, .dead = false };
	}
	if (peer->dead)
		return 0;
	if (peer->fd >= 0) {
		if (!pidfd_exited(peer->fd))
			return 1;
		close(peer->fd);
		peer->fd = -1;
		peer->dead = true;
		return 0;
	}

	/* First question about this word (or pidfds failed last time). */
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0 && errno == ESRCH) {
		peer->dead = true;
		return 0;
	}
	/* After the open: if the pid now names a process started at another
	 * time, the slot's process is gone (and the pidfd is not its).  Not
	 * the state field: a process whose first thread ended shows a
	 * zombie there while its other threads run. */
	int64_t now_start = slots_start_time(pid);
	bool dead = now_start == -ESRCH || (!claiming && now_start >= 0 && (uint64_t)now_start != slot_start);
	if (!dead && fd >= 0 && pidfd_exited(fd))
		dead = true;
	if (dead) {
		if (fd >= 0)
			close(fd);
		peer->dead = true;
		return 0;
	}
	/* A CLAIMING word's start time is not there yet: its pidfd is kept
	 * only once the word is LIVE and the start time checked. */
	if (fd >= 0 && !claiming && now_start >= 0)
		peer->fd = fd;
	else if (fd >= 0)
		close(fd);
	return 1;
}

/* The verdict on slot `slot` as word w shows it: 1 runs, 0 dead, -EAGAIN
 * the word changed meanwhile (ask again). */
static int word_alive(struct pc_slots *s, struct pc_slot_peers *peers, unsigned slot, uint64_t w)
{
	enum slot_state st = slot_word_state(w);
	if (st == SLOT_FREE || st == SLOT_RECOVERING)
		return 0;
	struct pc_slot *sl = &s->slot[slot];
	uint64_t start = atomic_load_explicit(&sl->start_time, memory_order_relaxed);
	/* The start time belongs to w only if the word is still w. */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&sl->word, memory_order_relaxed) != w)
		return -EAGAIN;
	pid_t pid = slot_word_pid(w), self = getpid();
	if (pid == self) {
		/* Our own slot, or one a dead process with our pid left. */
		int64_t mine = own_start_time(self);
		return st == SLOT_CLAIMING || mine < 0 || (uint64_t)mine == start;
	}
	pthread_mutex_lock(&peers->lock);
	int r = ask_kernel(&peers->peer[slot], w, start);
	pthread_mutex_unlock(&peers->lock);
	return r;
}

int slots_alive(struct pc_slots *s, struct pc_slot_peers *peers, unsigned slot)
{
	PC_ASSERT(slot < SLOTS_MAX);
	for (;;) {
		uint64_t w = atomic_load_explicit(&s->slot[slot].word, memory_order_acquire);
		int r = word_alive(s, peers, slot, w);
		if (r != -EAGAIN)
			return r;
	}
}

int slots_recover_begin(struct pc_slots *s, struct pc_slot_peers *peers, unsigned slot)
{
	PC_ASSERT(slot < SLOTS_MAX);
	struct pc_slot *sl = &s->slot[slot];
	for (;;) {
		uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
		switch (slot_word_state(w)) {
		case SLOT_FREE:
			return -ENOENT;
		case SLOT_RECOVERING:
			return 0;
		default:
			break;
		}
		int r = word_alive(s, peers, slot, w);
		if (r == -EAGAIN)
			continue;
		if (r)
			return -EBUSY;
		/* Dead, and the word unchanged: nobody else can claim it now. */
		if (atomic_compare_exchange_strong_explicit(&sl->word, &w, (w & ~STATE_MASK) | SLOT_RECOVERING,
							    memory_order_acq_rel, memory_order_relaxed))
			return 0;
	}
}
