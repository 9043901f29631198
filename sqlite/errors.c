/*
 * errors.c - errno to SQLite's result codes, and the errno kept for
 * xGetLastError (sqlite3_system_errno).
 *
 * Each call site names the SQLITE_IOERR_* of what it was doing (a read,
 * a write, a sync); a few errnos mean the same whatever the call, and
 * SQLite acts on them: a full device or quota is SQLITE_FULL (the
 * statement fails, the database stays usable), no memory is
 * SQLITE_IOERR_NOMEM, and a file another process holds is SQLITE_BUSY.
 */
#include "vfs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Per thread, as errno is: connections of other threads fail apart. */
static __thread int last_errno;

int pcs_ioerr(int code, int e)
{
	last_errno = e;
	switch (e) {
	case ENOSPC:
	case EDQUOT:
		return SQLITE_FULL;
	case ENOMEM:
		return SQLITE_IOERR_NOMEM;
	case EBUSY:
		return SQLITE_BUSY;
	default:
		return code;
	}
}

int pcs_last_error(sqlite3_vfs *vfs, int nbuf, char *buf)
{
	(void)vfs;
	if (buf && nbuf > 0)
		snprintf(buf, (size_t)nbuf, "%s", last_errno ? strerror(last_errno) : "");
	return last_errno;
}
