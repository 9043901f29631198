/*
 * failing.c - files whose write-back keeps failing: their new writes are
 * refused until it succeeds again (failing.h).
 */
#include "wb/failing.h"

#include "api/cache.h"
#include "lib/errseq.h"
#include "lib/util.h"

#include <errno.h>

/*
 * A file whose writeback fails (ENOSPC, EDQUOT, EIO, EFBIG...) keeps its
 * data dirty: nothing acknowledged is dropped.  But while it fails, more
 * data for it would only pile up where it cannot go, and writers throttled
 * on it would wait for ever for dirty bytes that never fall.  So from the
 * first failure new writes to the file fail up front with that error, as a
 * full file system refuses them, throttled writers of it get the error,
 * and its dirty bytes do not count against other files' room (see
 * throttle_over_limit).  It ends when its writeback succeeds with nothing
 * left dirty (the flusher retries every second), or when the caller
 * retries fsync, truncates or punches: space may be back.
 */
/* A full device (or quota) is the device's, not the file's: every file of
 * it would meet it, each with its own pile of data it cannot write.  So
 * ENOSPC and EDQUOT refuse new writes to every file of the domain. */
static bool device_wide(int err)
{
	return err == -ENOSPC || err == -EDQUOT;
}

void failing_set(struct pc_mapping *m, int err)
{
	atomic_store(&m->c->last_wb_error, err);
	if (device_wide(err))
		atomic_store(&m->dom->nospace, err);
	if (atomic_exchange(&m->wb_failing, err) == 0)
		atomic_fetch_add(&m->c->nr_failing, 1);
}

void failing_clear(struct pc_mapping *m)
{
	atomic_store(&m->dom->nospace, 0);
	if (atomic_exchange(&m->wb_failing, 0) != 0)
		atomic_fetch_sub(&m->c->nr_failing, 1);
}

void failing_wb_failed(struct pc_mapping *m, int err)
{
	errseq_set(&m->wb_err, err);
	atomic_store(&m->last_error_ms, now_ms());
	atomic_fetch_add_explicit(&m->c->st_write_errors, 1, memory_order_relaxed);
	failing_set(m, err);
}

/* A write of a failing file went through: the fault is gone (space came
 * back), for its device too; the file is well once nothing is left. */
void failing_wb_recovered(struct pc_mapping *m)
{
	if (atomic_load(&m->nr_dirty) <= 0)
		failing_clear(m);
	else
		atomic_store(&m->dom->nospace, 0);
}
