/*
 * counter.c - statistics counters that threads update without sharing a
 * cache line (struct pc_counter in counter.h).
 *
 * Cache hits are counted per file and per cache.  With one atomic counter
 * each, two threads hitting different folios of one file would both write
 * the same two cache lines on every hit, which costs more than the rest of
 * the hit (and a locked instruction also keeps the CPU from overlapping
 * the next hit's loads with this one's copy).  So each thread owns a slot:
 * only the owner writes it, with a plain load and store.  Slots are handed
 * out per process from a small table and given back when the thread exits
 * (a pthread key destructor), so a long-lived program that starts threads
 * over and over does not run out of them; a slot keeps its value across
 * owners (the new owner continues the count).  Readers sum the slots with
 * relaxed loads: a sum taken while others count is a value the counter had
 * at some point, up to the additions still in flight, as for one atomic.
 */
#include "lib/counter.h"

#include "lib/util.h"

#include <pthread.h>

HIDDEN __thread int counter_slot_plus1 PC_TLS_IE;

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static bool slot_taken[PC_COUNTER_SLOTS];
static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;

/* Thread exit: the slot goes back to the table. */
static void slot_release(void *arg)
{
	int s = (int)(intptr_t)arg - 1;
	/* Later destructors of this thread that count use `shared`, not a
	 * slot that may already have a new owner. */
	counter_slot_plus1 = -1;
	pthread_mutex_lock(&slots_lock);
	slot_taken[s] = false;
	pthread_mutex_unlock(&slots_lock);
}

static void slot_key_create(void)
{
	pthread_key_create(&slot_key, slot_release);
}

void counter_init(void)
{
	pthread_once(&slot_key_once, slot_key_create);
}

int counter_thread_slot(void)
{
	if (counter_slot_plus1)
		return counter_slot_plus1 > 0 ? counter_slot_plus1 - 1 : -1;
	pthread_once(&slot_key_once, slot_key_create);
	int s = -1;
	pthread_mutex_lock(&slots_lock);
	for (int i = 0; i < PC_COUNTER_SLOTS && s < 0; i++) {
		if (!slot_taken[i]) {
			slot_taken[i] = true;
			s = i;
		}
	}
	pthread_mutex_unlock(&slots_lock);
	if (s >= 0 && pthread_setspecific(slot_key, (void *)(intptr_t)(s + 1)) != 0) {
		slot_release((void *)(intptr_t)(s + 1));
		s = -1;
	}
	/* A thread that found none does not look again: it counts in
	 * `shared` (-1 says so). */
	counter_slot_plus1 = s >= 0 ? s + 1 : -1;
	return s;
}

/* fork() child: a parent thread may have held slots_lock, and the
 * parent's other threads' slots are not in use here. */
void counter_fork_child(void)
{
	pthread_mutex_init(&slots_lock, NULL);
	for (int i = 0; i < PC_COUNTER_SLOTS; i++)
		slot_taken[i] = i == counter_slot_plus1 - 1;
}

void counter_make_atomic(struct pc_counter *c)
{
	for (int i = 0; i < PC_COUNTER_SLOTS; i++)
		c->slot[i].atomic_adds = true;
}

uint64_t counter_sum(struct pc_counter *c)
{
	uint64_t sum = atomic_load_explicit(&c->shared, memory_order_relaxed);
	for (int i = 0; i < PC_COUNTER_SLOTS; i++)
		sum += atomic_load_explicit(&c->slot[i].v, memory_order_relaxed);
	return sum;
}
