/*
 * segment.c - the memory a cache lives in: private or named segments, one
 * address in every process, membership by flock, and a heap of shared
 * structures (segment.h has the protocol; docs/shared.md, sections 2 and
 * 12, the design and what building it taught).
 */
#include "mem/segment.h"

#include "lib/check.h"
#include "lib/shlock.h"
#include "lib/slots.h"
#include "lib/util.h"

#if PC_ASAN
#include <sanitizer/lsan_interface.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

/* Linux 4.17; glibc 2.28's headers. */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

HIDDEN void (*segment_test_hook)(enum seg_step step);

static void step(enum seg_step st)
{
	void (*hook)(enum seg_step) = segment_test_hook;
	if (hook)
		hook(st);
}

/* A process killed between two stores of the heap's repair protocol
 * (below) has made the first and not the second: the compiler must keep
 * them in this order (a kill stops the thread between two instructions,
 * as a signal would, so a signal fence is what it takes). */
#define STORES_IN_ORDER() atomic_signal_fence(memory_order_seq_cst)

/* ------------------------------------------------ the process's segments */

/*
 * Every segment of this process is on one list, so that the child of a
 * fork can close its copies of their descriptors: a copy of the parent's
 * open file description holds the parent's flock until the child closes
 * it, and the parent would never find itself last.  A segment's
 * membership descriptor is opened and closed under reg_lock, which the
 * prepare handler takes: a fork never copies a descriptor the list does
 * not show.
 */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pc_segment *reg_head;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void reg_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void reg_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

/* In the child: the segments are not mapped here (MADV_DONTFORK), their
 * descriptors and pidfds go, and the copies say they are inherited.  The
 * copies' peers' mutexes may be held by a thread of the parent: not
 * touched. */
static void reg_child(void)
{
	for (struct pc_segment *s = reg_head; s; s = s->next) {
		if (s->fd >= 0)
			close(s->fd);
		s->fd = -1;
		for (unsigned i = 0; i < SLOTS_MAX; i++)
			if (s->peers.peer[i].fd >= 0) {
				close(s->peers.peer[i].fd);
				s->peers.peer[i].fd = -1;
			}
		s->inherited = true;
	}
	pthread_mutex_unlock(&reg_lock);
}

static void reg_register_atfork(void)
{
	pthread_atfork(reg_prepare, reg_parent, reg_child);
}

static void reg_add(struct pc_segment *s)
{
	pthread_once(&reg_once, reg_register_atfork);
	pthread_mutex_lock(&reg_lock);
	s->prev = NULL;
	s->next = reg_head;
	if (reg_head)
		reg_head->prev = s;
	reg_head = s;
	pthread_mutex_unlock(&reg_lock);
}

/* The record whose segment holds addr, or NULL (reg_lock held). */
static struct pc_segment *reg_at(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	for (struct pc_segment *s = reg_head; s; s = s->next)
		if (a >= (uintptr_t)s->hdr && a - (uintptr_t)s->hdr < s->size)
			return s;
	return NULL;
}

/* Take s off the list (reg_lock held). */
static void reg_unlink(struct pc_segment *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		reg_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
}

struct pc_segment *segment_inherited_named_at(const void *addr)
{
	pthread_mutex_lock(&reg_lock);
	struct pc_segment *s = reg_at(addr);
	if (s && !(atomic_load(&s->inherited) && s->shm_name[0]))
		s = NULL;
	pthread_mutex_unlock(&reg_lock);
	return s;
}

/* The object of a named segment: one namespace for every user, as file
 * names are: another user's object of the name is refused (-EACCES),
 * not made anew beside it. */
static void shm_name_of(const char *name, char *out, size_t n)
{
	snprintf(out, n, "/pagecache-%s", name);
}

/* s's object name, written under reg_lock: s is on the list already, and
 * segment_attached_here reads the names of the list's records in other
 * threads. */
static void reg_set_name(struct pc_segment *s, const char *name)
{
	pthread_mutex_lock(&reg_lock);
	shm_name_of(name, s->shm_name, sizeof(s->shm_name));
	pthread_mutex_unlock(&reg_lock);
}

/* s is mapped now: a child of fork()'s inherited record of a named
 * segment at the same address (the parent's attachment, which the child
 * may join again by name) is gone, so that the address names s alone. */
static void reg_drop_inherited_overlapping(struct pc_segment *s)
{
	struct pc_segment *drop = NULL;
	uintptr_t lo = (uintptr_t)s->hdr, hi = lo + s->size;
	pthread_mutex_lock(&reg_lock);
	for (struct pc_segment *r = reg_head, *next; r; r = next) {
		next = r->next;
		uintptr_t rlo = (uintptr_t)r->hdr, rhi = rlo + r->size;
		if (r == s || !atomic_load(&r->inherited) || rhi <= lo || rlo >= hi)
			continue;
		reg_unlink(r);
		r->next = drop;
		drop = r;
	}
	pthread_mutex_unlock(&reg_lock);
	while (drop) {
		struct pc_segment *r = drop;
		drop = r->next;
		free(r); /* an inherited record: its descriptors went at fork */
	}
}

uint64_t segment_backing_room(const struct pc_segment *s)
{
	struct statvfs st;
	if (s->fd < 0 || fstatvfs(s->fd, &st) != 0 || st.f_blocks == 0)
		return UINT64_MAX; /* (a tmpfs of size=0 has no limit, and says 0) */
	return (uint64_t)st.f_bavail * st.f_frsize;
}

bool segment_attached_here(const char *name)
{
	char shm_name[SEG_NAME_MAX + 32];
	shm_name_of(name, shm_name, sizeof(shm_name));
	bool found = false;
	pthread_mutex_lock(&reg_lock);
	for (struct pc_segment *r = reg_head; r && !found; r = r->next)
		found = !strcmp(r->shm_name, shm_name);
	pthread_mutex_unlock(&reg_lock);
	return found;
}

bool segment_inherited_at(const void *addr)
{
	pthread_mutex_lock(&reg_lock);
	struct pc_segment *s = reg_at(addr);
	bool inherited = s && atomic_load(&s->inherited);
	pthread_mutex_unlock(&reg_lock);
	return inherited;
}

static void reg_del(struct pc_segment *s)
{
	pthread_mutex_lock(&reg_lock);
	reg_unlink(s);
	pthread_mutex_unlock(&reg_lock);
}

/* s->fd = shm_open(s->shm_name, flags): 0 or -errno. */
static int reg_shm_open(struct pc_segment *s, int flags)
{
	pthread_mutex_lock(&reg_lock);
	PC_ASSERT(s->fd < 0);
	s->fd = shm_open(s->shm_name, flags, 0600);
	int err = s->fd < 0 ? -errno : 0;
	pthread_mutex_unlock(&reg_lock);
	return err;
}

static void reg_close_fd(struct pc_segment *s)
{
	pthread_mutex_lock(&reg_lock);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	pthread_mutex_unlock(&reg_lock);
}

static struct pc_segment *seg_struct_new(void)
{
	struct pc_segment *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fd = -1;
	s->slot = -1;
	slots_peers_init(&s->peers);
	reg_add(s);
	return s;
}

/* The descriptor is closed before the segment leaves the list: a fork in
 * between would copy a descriptor that the child does not close. */
static void seg_struct_free(struct pc_segment *s)
{
	if (!s->inherited) {
		reg_close_fd(s);
		slots_peers_destroy(&s->peers);
	}
	reg_del(s);
	free(s);
}

/* ------------------------------------------------ names */

int segment_name_check(const char *name)
{
	if (!name)
		return -EINVAL;
	size_t n = strnlen(name, SEG_NAME_MAX + 1);
	if (n == 0 || n > SEG_NAME_MAX || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

static int flock_retry(int fd, int op)
{
	int r;
	do
		r = flock(fd, op);
	while (r != 0 && errno == EINTR);
	return r == 0 ? 0 : -errno;
}

/* Does the name still name the object behind fd?  1 yes, 0 no (unlinked,
 * or another object since), -errno.  The second descriptor is another
 * open file description: closing it leaves fd's flock alone. */
static int names_this(const struct pc_segment *s)
{
	struct stat a, b;
	if (fstat(s->fd, &a) != 0)
		return -errno;
	int fd2 = shm_open(s->shm_name, O_RDONLY, 0);
	if (fd2 < 0)
		return errno == ENOENT ? 0 : -errno;
	int r = fstat(fd2, &b) == 0 ? (a.st_dev == b.st_dev && a.st_ino == b.st_ino) : -errno;
	close(fd2);
	return r;
}

/* ------------------------------------------------ addresses */

/* The end of user space: where the initial stack is, rounded up to a
 * power of two.  On x86-64 it is 2^47 unless a program asks mmap for more
 * with a hint above it (5-level page tables), which nobody's stack does. */
static uint64_t user_top(void)
{
#if defined(__x86_64__)
	return (uint64_t)1 << 47;
#else
	uint64_t a = getauxval(AT_RANDOM); /* 16 bytes on the initial stack */
	if (!a)
		a = (uintptr_t)__builtin_frame_address(0);
	return (uint64_t)1 << (64 - __builtin_clzll(a));
#endif
}

/*
 * Where named segments go (docs/shared.md, 12).  13/16 to 14/16 of user
 * space (on x86-64 0x6800'0000'0000 to 0x7000'0000'0000): above where the
 * kernel puts a PIE program and its heap (2/3 of it, plus up to 2^28 pages
 * of randomisation by default), below the mmap area that grows down from
 * under the stack, and clear of AddressSanitizer's allocator
 * (0x6000'0000'0000 to 0x6400'0000'0000 plus its metadata).
 * ThreadSanitizer's runtime reserves that range for its own (only its
 * application ranges may be mapped, and an mmap elsewhere ends the
 * process), so TSan builds use its low application range, where only a
 * program that is not PIE would lie, and below 0x80'0000'0000 where that
 * range ends in GCC 12's runtime.
 */
void segment_addr_range(uint64_t *lo, uint64_t *hi)
{
#if PC_TSAN && defined(__x86_64__)
	*lo = (uint64_t)0x4000000000;
	*hi = (uint64_t)0x8000000000;
#else
	uint64_t top = user_top();
	*lo = top / 16 * 13;
	*hi = top / 16 * 14;
#endif
}

/* murmur3's finalizer */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

uint64_t segment_pick_addr(const char *name, size_t size, unsigned attempt)
{
	uint64_t lo, hi;
	segment_addr_range(&lo, &hi);
	uint64_t need = round_up(size, SEG_ADDR_ALIGN);
	if (!size || need < size || need > hi - lo)
		return 0;
	uint64_t h = mix64(hash_name(name) + attempt * 0x9e3779b97f4a7c15ull);
	uint64_t places = (hi - lo - need) / SEG_ADDR_ALIGN + 1;
	return lo + h % places * SEG_ADDR_ALIGN;
}

/* ------------------------------------------------ layout and header */

struct seg_layout {
	uint64_t private_bytes, fixed_off, config_off, table_off, heap_off, heap_bytes, size;
};

/* The private window starts after the header's page. */
#define SEG_PRIVATE_OFF ((uint64_t)PC_PAGE_SIZE)

/* Past this the offsets could overflow; no range holds it anyway. */
#define SEG_HEAP_LIMIT ((uint64_t)1 << (SEG_MIN_SHIFT + SEG_ORDERS - 1))

static int layout_of(const struct seg_params *p, struct seg_layout *l)
{
	if (!p || p->heap_bytes < ((size_t)1 << SEG_MIN_SHIFT) || p->config_len > SEG_CONFIG_MAX ||
	    (p->config_len && !p->config) || p->private_bytes > SEG_AREA_MAX || p->fixed_bytes > SEG_AREA_MAX)
		return -EINVAL;
	if (p->heap_bytes > SEG_HEAP_LIMIT)
		return -ENOMEM;
	l->heap_bytes = round_down(p->heap_bytes, (uint64_t)1 << SEG_MIN_SHIFT);
	l->private_bytes = round_up(p->private_bytes, PC_PAGE_SIZE);
	l->fixed_off = SEG_PRIVATE_OFF + l->private_bytes;
	l->config_off = round_up(l->fixed_off + p->fixed_bytes, 64);
	l->table_off = round_up(l->config_off + p->config_len, PC_PAGE_SIZE);
	l->heap_off = round_up(l->table_off + (l->heap_bytes >> SEG_MIN_SHIFT), SEG_ALIGN_MAX);
	l->size = round_up(l->heap_off + l->heap_bytes, PC_PAGE_SIZE);
	return 0;
}

static void heap_init(struct seg_header *h, const struct seg_layout *l);

/* An attacher reads the header through a mapping of the first page. */
_Static_assert(sizeof(struct seg_header) <= PC_PAGE_SIZE, "the header fits in a page");

/* Everything but the state, which the caller sets READY last. */
static void header_init(struct seg_header *h, const struct seg_params *p, const struct seg_layout *l)
{
	h->magic = SEG_MAGIC;
	h->abi = SEG_ABI;
	h->size = l->size;
	h->addr = (uintptr_t)h;
	h->private_off = SEG_PRIVATE_OFF;
	h->private_bytes = l->private_bytes;
	h->fixed_off = l->fixed_off;
	h->fixed_bytes = l->config_off - l->fixed_off;
	h->config_off = l->config_off;
	h->config_len = p->config_len;
	h->creator_pid = getpid();
	if (p->config_len)
		memcpy((char *)h + l->config_off, p->config, p->config_len);
	slots_init(&h->slots);
	heap_init(h, l);
	atomic_init(&h->anchor, 0);
}

/* Each process's own memory over the window's part of the shared mapping
 * (MAP_FIXED: the range is this process's mapping of the segment).  A
 * private segment's memory is the process's already. */
static int map_private_window(struct pc_segment *s)
{
	struct seg_header *h = s->hdr;
	if (!h->private_bytes || s->fd < 0)
		return 0;
	char *at = (char *)h + h->private_off;
	void *m = mmap(at, h->private_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	/* Not inherited, unlike a private segment's: a child may attach to
	 * the name, and its window must go where its parent's was. */
	madvise(m, h->private_bytes, MADV_DONTFORK);
	return 0;
}

/* A child of fork() gets a copy of a private segment's window, and of
 * nothing else of the segment: the window says whose it is (the cache's
 * fork check reads it, api/cache.h), and segment_window_forget drops the
 * copy. */
static void window_inherited(struct seg_header *h)
{
	if (h->private_bytes)
		madvise((char *)h + h->private_off, h->private_bytes, MADV_DOFORK);
}

void segment_window_forget(void *window, size_t bytes)
{
	munmap(window, bytes);
}

/* The creator's last step: READY, for every attacher waiting. */
static void header_ready(struct seg_header *h)
{
	atomic_store_explicit(&h->state, SEG_READY, memory_order_release);
	shfutex_wake(&h->state, INT32_MAX);
}

static void setup_locker(struct pc_segment *s)
{
	s->cx = (struct pc_shlock_ctx){ .slots = &s->hdr->slots, .peers = &s->peers,
					.self = s->slot >= 0 ? (unsigned)s->slot : 0 };
}

static int claim_slot(struct pc_segment *s)
{
	int slot = slots_claim(&s->hdr->slots);
	if (slot < 0)
		return slot;
	s->slot = slot;
	setup_locker(s);
	return 0;
}

/*
 * LeakSanitizer scans the process's heap, stacks and globals for
 * pointers, not its other mappings: the memory a segment's structures
 * point to in the process's heap (handles in the window, and whatever
 * the caller keeps on malloc) would look leaked.  ASan builds register
 * the segment as a root region while it is mapped here.
 */
static void leak_roots_add(const struct pc_segment *s)
{
#if PC_ASAN
	__lsan_register_root_region(s->hdr, s->size);
#else
	(void)s;
#endif
}

static void leak_roots_remove(const struct pc_segment *s)
{
#if PC_ASAN
	__lsan_unregister_root_region(s->hdr, s->size);
#else
	(void)s;
#endif
}

/* ------------------------------------------------ private segments */

int segment_new_private(const struct seg_params *p, struct pc_segment **out)
{
	struct seg_layout l;
	int err = layout_of(p, &l);
	if (err)
		return err;
	/* Over-map, then trim to SEG_ALIGN_MAX: the heap's alignments are
	 * real addresses' alignments. */
	size_t map = l.size + SEG_ALIGN_MAX;
	char *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	char *base = (char *)round_up((uintptr_t)m, SEG_ALIGN_MAX);
	if (base > m)
		munmap(m, (size_t)(base - m));
	if (m + map > base + l.size)
		munmap(base + l.size, (size_t)(m + map - (base + l.size)));
	/* A child of fork() gets no copy but of the window (segment.h, "Fork"). */
	madvise(base, l.size, MADV_DONTFORK);
	struct pc_segment *s = seg_struct_new();
	if (!s) {
		munmap(base, l.size);
		return -ENOMEM;
	}
	s->hdr = (struct seg_header *)base;
	s->size = l.size;
	s->created = true;
	header_init(s->hdr, p, &l);
	window_inherited(s->hdr);
	err = claim_slot(s);
	if (err) {
		munmap(base, l.size);
		seg_struct_free(s);
		return err;
	}
	header_ready(s->hdr);
	leak_roots_add(s);
	*out = s;
	return 0;
}

/* ------------------------------------------------ named: creation */

/* Map the new object at the first of its hashed addresses that is free. */
static int map_created(struct pc_segment *s, const char *name, size_t size)
{
	for (unsigned attempt = 0; attempt < SEG_ADDR_TRIES; attempt++) {
		uint64_t addr = segment_pick_addr(name, size, attempt);
		if (!addr) {
			fprintf(stderr, "pagecache: segment %s: %zu bytes do not fit the range of shared addresses\n",
				s->shm_name, size);
			return -ENOMEM;
		}
		void *m = mmap((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
			       s->fd, 0);
		if (m == MAP_FAILED) {
			if (errno == EEXIST)
				continue;
			return -errno;
		}
		if ((uintptr_t)m != addr) { /* before Linux 4.17 the flag is a hint */
			munmap(m, size);
			continue;
		}
		s->hdr = m;
		s->size = size;
		return 0;
	}
	fprintf(stderr, "pagecache: segment %s: none of %u addresses for its %zu bytes is free in this process\n",
		s->shm_name, SEG_ADDR_TRIES, size);
	return -ENOMEM;
}

/* The object was just made (O_EXCL).  -EAGAIN: somebody took the name
 * over before our flock (we were slow, not dead): start again. */
static int create(struct pc_segment *s, const char *name, const struct seg_params *p, const struct seg_layout *l)
{
	step(SEG_STEP_OPENED);
	int err = flock_retry(s->fd, LOCK_SH);
	if (err)
		return err;
	err = names_this(s);
	if (err <= 0)
		return err ? err : -EAGAIN;
	step(SEG_STEP_LOCKED);
	/* The umask may have taken bits away, never added any: all the same. */
	if (fchmod(s->fd, 0600) != 0 || ftruncate(s->fd, (off_t)l->size) != 0)
		return -errno;
	step(SEG_STEP_SIZED);
	err = map_created(s, name, l->size);
	if (err)
		return err;
	madvise(s->hdr, s->size, MADV_DONTFORK);
	header_init(s->hdr, p, l);
	err = map_private_window(s);
	if (err)
		return err;
	step(SEG_STEP_HEADER);
	err = claim_slot(s);
	if (err)
		return err;
	s->created = true;
	header_ready(s->hdr);
	return 0;
}

/* ------------------------------------------------ named: attach */

/* The first page of the object, for its header, once it has one (the
 * creator may not have sized it yet): NULL until then. */
static struct seg_header *map_header(int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)PC_PAGE_SIZE)
		return NULL;
	void *m = mmap(NULL, PC_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	return m == MAP_FAILED ? NULL : m;
}

static bool ready(const struct seg_header *h)
{
	return h && atomic_load_explicit(&h->state, memory_order_acquire) == SEG_READY;
}

/*
 * Wait until the object is READY, holding nothing meanwhile; then take
 * LOCK_SH.  While it is not, flock(EX | NB) asks whether any process holds
 * the lock: the creator holds LOCK_SH from its shm_open on, so if nobody
 * does, it died initialising (or it is between its shm_open and its flock:
 * then it finds the name gone after its flock, and starts again).  The
 * caller that got EX unlinks the name and starts again (-EAGAIN): its
 * close releases EX, after the unlink.  *hp: the header's page, mapped.
 */
static int wait_ready(struct pc_segment *s, uint64_t deadline, struct seg_header **hp)
{
	struct seg_header *h = NULL;
	int err;
	for (;;) {
		if (!h)
			h = map_header(s->fd);
		if (ready(h))
			break;
		if (flock(s->fd, LOCK_EX | LOCK_NB) == 0) {
			if (!h)
				h = map_header(s->fd);
			if (ready(h))
				break; /* READY meanwhile, and its members gone */
			err = names_this(s);
			if (err == 1 && shm_unlink(s->shm_name) != 0 && errno != ENOENT)
				err = -errno;
			else
				err = err < 0 ? err : -EAGAIN;
			goto fail;
		}
		if (errno != EWOULDBLOCK && errno != EINTR) {
			err = -errno;
			goto fail;
		}
		uint64_t now = now_ms();
		if (now >= deadline) {
			err = -ETIMEDOUT;
			goto fail;
		}
		uint64_t ms = u64_min(deadline - now, SHLOCK_CHECK_MS);
		if (h)
			shfutex_wait_ms(&h->state, SEG_INITIALISING, ms);
		else
			usleep((useconds_t)u64_min(ms, 10) * 1000);
	}
	/* (From EX, this drops it before it takes SH: nobody cares, since a
	 * READY object is never taken over.) */
	err = flock_retry(s->fd, LOCK_SH);
	if (err)
		goto fail;
	*hp = h;
	return 0;
fail:
	if (h)
		munmap(h, PC_PAGE_SIZE);
	return err;
}

/* The window and the fixed area, in order, inside the segment. */
static bool layout_fits(const struct seg_header *h)
{
	return h->private_off == SEG_PRIVATE_OFF && h->private_bytes % PC_PAGE_SIZE == 0 &&
	       h->private_bytes <= SEG_AREA_MAX && h->fixed_off == h->private_off + h->private_bytes &&
	       h->fixed_bytes <= SEG_AREA_MAX + 64 && h->fixed_off + h->fixed_bytes <= h->config_off &&
	       h->config_off <= h->size;
}

/* Is the header one this build can map?  -EPROTO if not. */
static int header_valid(const struct pc_segment *s, const struct seg_header *h)
{
	struct stat st;
	if (fstat(s->fd, &st) != 0)
		return -errno;
	uint64_t top = user_top();
	if (h->magic != SEG_MAGIC || h->abi != SEG_ABI || h->size != (uint64_t)st.st_size ||
	    h->size < h->heap.off + h->heap.bytes || h->config_off + h->config_len > h->size ||
	    !layout_fits(h) || !h->addr ||
	    h->addr % SEG_ADDR_ALIGN || h->addr > top || h->size > top - h->addr)
		return -EPROTO;
	return 0;
}

static int map_attached(struct pc_segment *s, const struct seg_header *h)
{
	uint64_t addr = h->addr, size = h->size;
#if PC_TSAN
	/* An mmap outside ThreadSanitizer's application ranges ends the
	 * process: another build made this segment. */
	uint64_t lo, hi;
	segment_addr_range(&lo, &hi);
	if (addr < lo || addr > hi || size > hi - addr) {
		fprintf(stderr,
			"pagecache: segment %s: at [%#llx, %#llx), outside the range ThreadSanitizer builds "
			"can map [%#llx, %#llx): it was made by another build\n",
			s->shm_name, (unsigned long long)addr, (unsigned long long)(addr + size),
			(unsigned long long)lo, (unsigned long long)hi);
		return -ENOMEM;
	}
#endif
	void *m = mmap((void *)(uintptr_t)addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, s->fd, 0);
	if (m == MAP_FAILED || (uintptr_t)m != addr) {
		int err = m == MAP_FAILED ? errno : EEXIST;
		if (m != MAP_FAILED)
			munmap(m, size);
		fprintf(stderr,
			"pagecache: segment %s: cannot map it at [%#llx, %#llx), where every process maps it: %s\n",
			s->shm_name, (unsigned long long)addr, (unsigned long long)(addr + size),
			err == EEXIST ? "that range is taken in this process" : strerror(err));
		return -ENOMEM;
	}
	s->hdr = m;
	s->size = size;
	return 0;
}

static int attach(struct pc_segment *s, const struct seg_params *p, uint64_t deadline)
{
	struct stat st;
	if (fstat(s->fd, &st) != 0)
		return -errno;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EACCES;
	struct seg_header *h = NULL;
	int err = wait_ready(s, deadline, &h);
	if (err)
		return err;
	/* LOCK_SH held: if the name still names it, it stays until we go. */
	err = names_this(s);
	if (err <= 0)
		err = err ? err : -EAGAIN;
	else
		err = header_valid(s, h);
	if (!err)
		err = map_attached(s, h);
	munmap(h, PC_PAGE_SIZE);
	if (err)
		return err;
	madvise(s->hdr, s->size, MADV_DONTFORK);
	err = map_private_window(s);
	size_t len;
	const void *theirs = segment_config(s, &len);
	if (!err)
		err = p && p->config_check ? p->config_check(theirs, len, p->config_arg) : 0;
	if (err >= 0)
		err = claim_slot(s);
	if (err < 0) {
		munmap(s->hdr, s->size);
		s->hdr = NULL;
		return err;
	}
	return 0;
}

/* ------------------------------------------------ named: open, detach */

int segment_open(const char *name, const struct seg_params *p, struct pc_segment **out)
{
	struct seg_layout l;
	int err = segment_name_check(name);
	if (!err)
		err = layout_of(p, &l);
	if (err)
		return err;
	struct pc_segment *s = seg_struct_new();
	if (!s)
		return -ENOMEM;
	reg_set_name(s, name);
	uint64_t deadline = now_ms() + (p->wait_ms ? p->wait_ms : SEG_WAIT_MS);
	for (;;) {
		err = reg_shm_open(s, O_RDWR | O_CREAT | O_EXCL);
		if (!err) {
			err = create(s, name, p, &l);
			if (err && err != -EAGAIN && names_this(s) == 1)
				shm_unlink(s->shm_name); /* never READY: nobody waits for it */
		} else if (err == -EEXIST) {
			err = reg_shm_open(s, O_RDWR);
			if (err == -ENOENT)
				err = -EAGAIN; /* gone meanwhile: create it */
			else if (!err)
				err = attach(s, p, deadline);
		}
		if (!err) {
			leak_roots_add(s);
			reg_drop_inherited_overlapping(s);
			*out = s;
			return 0;
		}
		if (s->hdr) {
			munmap(s->hdr, s->size);
			s->hdr = NULL;
		}
		reg_close_fd(s); /* after any unlink: releases the flock */
		if (err != -EAGAIN)
			break;
		if (now_ms() >= deadline) {
			err = -ETIMEDOUT;
			break;
		}
	}
	seg_struct_free(s);
	return err;
}

int segment_detach(struct pc_segment *s)
{
	if (s->inherited) {
		seg_struct_free(s);
		return 0;
	}
	if (s->fd < 0) { /* private: alone by construction */
		s->last = true;
		return 1;
	}
	/* The slot first: when another process finds itself last, every slot
	 * still LIVE but its own is a dead process's. */
	if (s->slot >= 0)
		slots_release(&s->hdr->slots, (unsigned)s->slot);
	s->slot = -1;
	if (flock_retry(s->fd, LOCK_EX | LOCK_NB) == 0) {
		s->last = true;
		claim_slot(s); /* alone: fails only if the dead hold every slot */
		return 1;
	}
	leak_roots_remove(s);
	munmap(s->hdr, s->size);
	seg_struct_free(s);
	return 0;
}

void segment_destroy(struct pc_segment *s, bool keep_name)
{
	PC_ASSERT(s->last && !s->inherited);
	if (s->slot >= 0)
		slots_release(&s->hdr->slots, (unsigned)s->slot);
	if (s->fd >= 0 && !keep_name && names_this(s) == 1)
		shm_unlink(s->shm_name);
	leak_roots_remove(s);
	munmap(s->hdr, s->size);
	seg_struct_free(s); /* closes fd: attachers waiting in flock go on */
}

/* ------------------------------------------------------------ the heap */

/*
 * A buddy allocator over [heap.off, heap.off + heap.bytes) of the segment:
 * blocks of 64 << k bytes (order k), each aligned to its size from the
 * heap's start, which is aligned to SEG_ALIGN_MAX.  A request takes the
 * smallest order that holds max(size, align, 64) bytes.  Why a buddy: a
 * block's size and alignment come from one number, a free block finds its
 * neighbour to merge with by one XOR, and every state is easy to walk.
 *
 * The block table (one byte per 64 bytes of heap) is the truth:
 *   TB_HEAD | order        a free block starts here
 *   TB_HEAD | TB_USED | k  an allocated block starts here
 *   0                      inside a block
 * Free blocks are also on their order's doubly linked list, linked through
 * their first 16 bytes by heap offsets (so the lists mean the same in
 * every process, and in any private segment).  The initial heap is the
 * largest aligned blocks that fit, one after another, so no two free
 * buddies are unmerged.
 *
 * The heap's lock (an owned lock, shlock.h) guards both.  Its holder may
 * die at any instruction: the next locker gets -EOWNERDEAD and repairs
 * (heap_repair) before it goes on.  The lists are rebuilt from the table,
 * so they may be left in any state; the table is written so that every
 * store leaves a tiling of the heap that a walk from offset 0, head to
 * head, reads right:
 *   - a split of block x (order o) writes the upper half's head first,
 *     then x's new order: in between, x's head still covers the upper half,
 *     whose byte the walk steps over;
 *   - a merge of buddies into lo writes lo's new order first, then zeroes
 *     the upper one's byte, which the walk again steps over;
 *   - an allocation's last store marks the block used; a free's first
 *     store marks it free.
 * So after a death the table is a tiling with at most one stale byte, at
 * the middle of a block.  A block allocated by a process that died before
 * it used it stays allocated: only the caller can know it is nobody's.
 */
#define TB_HEAD 0x80u
#define TB_USED 0x40u
#define TB_ORDER 0x3fu

struct seg_link {
	uint64_t next, prev;
};

static inline uint64_t blk_bytes(unsigned k)
{
	return (uint64_t)1 << (k + SEG_MIN_SHIFT);
}

static inline uint8_t *tb(struct seg_header *h, uint64_t x)
{
	return (uint8_t *)h + h->heap.table_off + (x >> SEG_MIN_SHIFT);
}

static inline char *heap_mem(struct seg_header *h)
{
	return (char *)h + h->heap.off;
}

static inline struct seg_link *link_at(struct seg_header *h, uint64_t x)
{
	return (struct seg_link *)(heap_mem(h) + x);
}

static void list_push(struct seg_header *h, uint64_t x, unsigned k)
{
	struct seg_link *l = link_at(h, x);
	l->prev = SEG_NONE;
	l->next = h->heap.free_head[k];
	if (l->next != SEG_NONE)
		link_at(h, l->next)->prev = x;
	h->heap.free_head[k] = x;
}

static void list_del(struct seg_header *h, uint64_t x, unsigned k)
{
	struct seg_link *l = link_at(h, x);
	if (l->prev != SEG_NONE)
		link_at(h, l->prev)->next = l->next;
	else
		h->heap.free_head[k] = l->next;
	if (l->next != SEG_NONE)
		link_at(h, l->next)->prev = l->prev;
}

/* The largest block at offset x that fits in the heap: its order. */
static unsigned largest_at(const struct seg_header *h, uint64_t x)
{
	unsigned k = h->heap.orders - 1;
	while (k && ((x & (blk_bytes(k) - 1)) || x + blk_bytes(k) > h->heap.bytes))
		k--;
	return k;
}

static void heap_init(struct seg_header *h, const struct seg_layout *l)
{
	shmutex_init(&h->heap.lock);
	h->heap.off = l->heap_off;
	h->heap.bytes = l->heap_bytes;
	h->heap.table_off = l->table_off;
	h->heap.used = 0;
	unsigned orders = 1;
	while (orders < SEG_ORDERS && blk_bytes(orders) <= l->heap_bytes)
		orders++;
	h->heap.orders = orders;
	for (unsigned k = 0; k < SEG_ORDERS; k++)
		h->heap.free_head[k] = SEG_NONE;
	for (uint64_t x = 0; x < l->heap_bytes;) {
		unsigned k = largest_at(h, x);
		*tb(h, x) = (uint8_t)(TB_HEAD | k);
		list_push(h, x, k);
		x += blk_bytes(k);
	}
}

/*
 * Free block x of order k (its table byte says so, it is on no list):
 * merged with its free buddies, then listed.  With lower_only, only with
 * buddies below it: heap_repair hands the free blocks over in address
 * order, and those above are not on a list yet (they merge with x when
 * their turn comes).
 */
static void free_insert(struct seg_header *h, uint64_t x, unsigned k, bool lower_only)
{
	while (k + 1 < h->heap.orders) {
		uint64_t b = x ^ blk_bytes(k);
		if (b + blk_bytes(k) > h->heap.bytes || (lower_only && b > x) || *tb(h, b) != (TB_HEAD | k))
			break;
		list_del(h, b, k);
		step(SEG_STEP_MERGE);
		uint64_t lo = b < x ? b : x, hi = b < x ? x : b;
		*tb(h, lo) = (uint8_t)(TB_HEAD | (k + 1));
		STORES_IN_ORDER();
		step(SEG_STEP_MERGE_HALF);
		*tb(h, hi) = 0;
		STORES_IN_ORDER();
		x = lo;
		k++;
	}
	list_push(h, x, k);
}

/* The walk's step from the head at x: its order, or -1 if no valid block
 * starts there. */
static int head_order(struct seg_header *h, uint64_t x)
{
	uint8_t b = *tb(h, x);
	unsigned k = b & TB_ORDER;
	if (!(b & TB_HEAD) || k >= h->heap.orders || (x & (blk_bytes(k) - 1)) || x + blk_bytes(k) > h->heap.bytes)
		return -1;
	return (int)k;
}

/* After a holder's death (the comment above): clear the one byte a death
 * can leave inside a block, then rebuild the lists and the used count
 * from the table. */
static int heap_repair(struct seg_header *h)
{
	for (uint64_t x = 0; x < h->heap.bytes;) {
		int k = head_order(h, x);
		if (k < 0) {
			fprintf(stderr, "pagecache: segment heap: no block starts at %llu: beyond repair\n",
				(unsigned long long)x);
			return -EUCLEAN;
		}
		if (k > 0)
			*tb(h, x + blk_bytes((unsigned)k - 1)) = 0;
		x += blk_bytes((unsigned)k);
	}
	for (unsigned k = 0; k < SEG_ORDERS; k++)
		h->heap.free_head[k] = SEG_NONE;
	h->heap.used = 0;
	for (uint64_t x = 0; x < h->heap.bytes;) {
		unsigned k = (unsigned)head_order(h, x);
		uint64_t next = x + blk_bytes(k); /* a merge below x ends here too */
		if (*tb(h, x) & TB_USED)
			h->heap.used += blk_bytes(k);
		else
			free_insert(h, x, k, true);
		x = next;
	}
	return 0;
}

static int heap_lock(struct pc_segment *s)
{
	if (s->inherited || s->slot < 0)
		return -EPERM;
	struct seg_header *h = s->hdr;
	int err = shmutex_lock(&h->heap.lock, &s->cx);
	if (err == -EOWNERDEAD) {
		err = heap_repair(h);
		if (err) {
			/* Still inconsistent: the next locker tries again. */
			shmutex_unlock(&h->heap.lock, &s->cx);
			return err;
		}
		shmutex_consistent(&h->heap.lock, &s->cx);
	}
	return err;
}

static void heap_unlock(struct pc_segment *s)
{
	shmutex_unlock(&s->hdr->heap.lock, &s->cx);
}

int seg_alloc(struct pc_segment *s, size_t size, size_t align, void **out)
{
	if (!size || (align & (align - 1)) || align > SEG_ALIGN_MAX)
		return -EINVAL;
	uint64_t need = u64_max(u64_max(size, align), blk_bytes(0));
	unsigned k = 0;
	while (k < SEG_ORDERS && blk_bytes(k) < need)
		k++;
	int err = heap_lock(s);
	if (err)
		return err;
	struct seg_header *h = s->hdr;
	unsigned o = k;
	while (o < h->heap.orders && h->heap.free_head[o] == SEG_NONE)
		o++;
	if (o >= h->heap.orders) {
		heap_unlock(s);
		return -ENOMEM;
	}
	uint64_t x = h->heap.free_head[o];
	list_del(h, x, o);
	step(SEG_STEP_SPLIT);
	while (o > k) {
		o--;
		uint64_t upper = x + blk_bytes(o);
		*tb(h, upper) = (uint8_t)(TB_HEAD | o);
		STORES_IN_ORDER();
		step(SEG_STEP_SPLIT_HALF);
		*tb(h, x) = (uint8_t)(TB_HEAD | o);
		STORES_IN_ORDER();
		list_push(h, upper, o);
	}
	*tb(h, x) = (uint8_t)(TB_HEAD | TB_USED | k);
	h->heap.used += blk_bytes(k);
	heap_unlock(s);
	*out = heap_mem(h) + x;
	return 0;
}

void seg_free(struct pc_segment *s, void *p)
{
	if (!p || heap_lock(s))
		return;
	struct seg_header *h = s->hdr;
	uint64_t x = (uint64_t)((char *)p - heap_mem(h));
	int k = (char *)p >= heap_mem(h) && x < h->heap.bytes ? head_order(h, x) : -1;
	if (PC_WARN_ONCE(k < 0 || !(*tb(h, x) & TB_USED), "seg_free(%p): not a block seg_alloc gave\n", p)) {
		heap_unlock(s);
		return;
	}
	h->heap.used -= blk_bytes((unsigned)k);
	*tb(h, x) = (uint8_t)(TB_HEAD | (unsigned)k);
	STORES_IN_ORDER();
	free_insert(h, x, (unsigned)k, false);
	heap_unlock(s);
}

uint64_t seg_used(struct pc_segment *s)
{
	if (heap_lock(s))
		return 0;
	uint64_t used = s->hdr->heap.used;
	heap_unlock(s);
	return used;
}

/* ------------------------------------------------------------ the check */

#define CHECK_FAIL(...)                                                       \
	do {                                                                  \
		fprintf(stderr, "pagecache: segment_check: " __VA_ARGS__);    \
		return -EUCLEAN;                                              \
	} while (0)

static int heap_check(struct seg_header *h)
{
	uint64_t nfree[SEG_ORDERS] = { 0 }, used = 0;
	for (uint64_t x = 0; x < h->heap.bytes;) {
		int sk = head_order(h, x);
		if (sk < 0)
			CHECK_FAIL("heap offset %llu: no block starts there (byte %#x)\n", (unsigned long long)x,
				   *tb(h, x));
		unsigned k = (unsigned)sk;
		const uint8_t *inside = tb(h, x);
		for (uint64_t i = 1; i < ((uint64_t)1 << k); i++)
			if (inside[i])
				CHECK_FAIL("heap offset %llu: byte %#x inside the block of order %u at %llu\n",
					   (unsigned long long)(x + (i << SEG_MIN_SHIFT)), inside[i], k,
					   (unsigned long long)x);
		if (*tb(h, x) & TB_USED) {
			used += blk_bytes(k);
		} else {
			nfree[k]++;
			uint64_t b = x ^ blk_bytes(k);
			if (k + 1 < h->heap.orders && b + blk_bytes(k) <= h->heap.bytes && *tb(h, b) == (TB_HEAD | k))
				CHECK_FAIL("free buddies of order %u at %llu and %llu not merged\n", k,
					   (unsigned long long)x, (unsigned long long)b);
		}
		x += blk_bytes(k);
	}
	if (used != h->heap.used)
		CHECK_FAIL("%llu bytes in allocated blocks, the count says %llu\n", (unsigned long long)used,
			   (unsigned long long)h->heap.used);
	for (unsigned k = 0; k < SEG_ORDERS; k++) {
		uint64_t n = 0, prev = SEG_NONE;
		for (uint64_t x = h->heap.free_head[k]; x != SEG_NONE; x = link_at(h, x)->next) {
			if (k >= h->heap.orders || n >= nfree[k])
				CHECK_FAIL("free list %u holds more than its %llu free blocks (a loop, or a stray)\n", k,
					   (unsigned long long)nfree[k]);
			if (x >= h->heap.bytes || head_order(h, x) != (int)k || (*tb(h, x) & TB_USED))
				CHECK_FAIL("free list %u holds %llu, not a free block of order %u\n", k,
					   (unsigned long long)x, k);
			if (link_at(h, x)->prev != prev)
				CHECK_FAIL("free list %u: %llu's back link is not its predecessor\n", k,
					   (unsigned long long)x);
			prev = x;
			n++;
		}
		if (n != nfree[k])
			CHECK_FAIL("free list %u holds %llu of the %llu free blocks of its order\n", k,
				   (unsigned long long)n, (unsigned long long)nfree[k]);
	}
	return 0;
}

int segment_check(struct pc_segment *s)
{
	if (s->inherited)
		return -EPERM;
	struct seg_header *h = s->hdr;
	if (h->magic != SEG_MAGIC || h->abi != SEG_ABI)
		CHECK_FAIL("magic %#llx, ABI %u\n", (unsigned long long)h->magic, h->abi);
	if (atomic_load(&h->state) != SEG_READY)
		CHECK_FAIL("state %u, not READY\n", atomic_load(&h->state));
	if (h->size != s->size || h->addr != (uintptr_t)h)
		CHECK_FAIL("header says %llu bytes at %#llx, mapped %zu at %p\n", (unsigned long long)h->size,
			   (unsigned long long)h->addr, s->size, (void *)h);
	if (!layout_fits(h))
		CHECK_FAIL("window at %llu (%llu bytes), fixed area at %llu (%llu), configuration at %llu: "
			   "not a layout\n", (unsigned long long)h->private_off, (unsigned long long)h->private_bytes,
			   (unsigned long long)h->fixed_off, (unsigned long long)h->fixed_bytes,
			   (unsigned long long)h->config_off);
	if (h->heap.off % SEG_ALIGN_MAX || h->heap.off + h->heap.bytes > h->size ||
	    h->heap.table_off + (h->heap.bytes >> SEG_MIN_SHIFT) > h->heap.off || !h->heap.orders ||
	    h->heap.orders > SEG_ORDERS || blk_bytes(h->heap.orders - 1) > h->heap.bytes)
		CHECK_FAIL("heap at %llu, %llu bytes, table at %llu, %u orders: not a layout\n",
			   (unsigned long long)h->heap.off, (unsigned long long)h->heap.bytes,
			   (unsigned long long)h->heap.table_off, h->heap.orders);
	int err = heap_lock(s);
	if (err)
		return err;
	err = heap_check(h);
	heap_unlock(s);
	return err;
}
