/*
 * errseq.c - errseq counters of write errors: what each handle has seen,
 * as the kernel's errseq_t.  (Failing files, whose new writes are refused
 * while their write-back keeps failing: wb/failing.c.)
 */
#include "lib/errseq.h"

#include "lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- errseq */

/*
 * errseq, as the kernel's: a counter of errors (bits 16 and up), whether a
 * handle has reported the latest one (ERRSEQ_SEEN), and its errno.  A
 * handle reports each error that happened since it sampled, once.  A
 * handle opened after an error that nobody reported yet (say, write-back
 * of a file nobody had open) samples "before it", so it reports it too.
 */
#define ERRSEQ_SEEN 0x8000u
#define ERRSEQ_ERRNO 0x7fffu

void errseq_set(pc_errseq_t *e, int err)
{
	uint64_t old = atomic_load(e), nw;
	do {
		nw = (((old >> 16) + 1) << 16) | ((uint64_t)(-err) & ERRSEQ_ERRNO);
	} while (!atomic_compare_exchange_weak(e, &old, nw));
}

uint64_t errseq_sample(pc_errseq_t *e)
{
	return atomic_load(e);
}

uint64_t errseq_open_sample(pc_errseq_t *e)
{
	uint64_t cur = atomic_load(e);
	return (cur >> 16) && !(cur & ERRSEQ_SEEN) ? 0 : cur;
}

bool errseq_unseen(pc_errseq_t *e)
{
	uint64_t cur = atomic_load(e);
	return (cur >> 16) && !(cur & ERRSEQ_SEEN);
}

int errseq_check_and_advance(pc_errseq_t *e, uint64_t *since)
{
	uint64_t cur = atomic_load(e);
	if ((cur >> 16) == (*since >> 16))
		return 0;
	/* Mark it reported (unless a newer error came meanwhile). */
	if (!(cur & ERRSEQ_SEEN))
		atomic_compare_exchange_strong(e, &cur, cur | ERRSEQ_SEEN);
	*since = cur | ERRSEQ_SEEN;
	return -(int)(cur & ERRSEQ_ERRNO);
}
