/*
 * seek.c - lseek(2)'s SEEK_DATA and SEEK_HOLE over a file as the cache sees
 * it (pc_lseek): the backing file's own answer, joined with what the cache
 * holds that the backing file may not have yet.
 *
 * The rule is the one Linux file systems follow: a hole may be reported as
 * data, data never as a hole (a program copying a sparse file skips what
 * it is told is a hole).  So any cached folio counts as data, even one
 * holding zeros, and the answer never looks below the folio level.
 */
#include "api/cache.h"
#include "mem/folio.h"
#include "api/handle.h"
#include "mem/mapping.h"
#include "pagecache.h"
#include "mem/reclaim.h"
#include "lib/util.h"

#include <errno.h>
#include <unistd.h>

/* First byte >= pos that the cache holds a folio for, or UINT64_MAX. */
static uint64_t first_cached_from(struct pc_mapping *m, uint64_t pos)
{
	struct pc_folio *f = mapping_lookup(m, pos);
	if (f) {
		reclaim_release_folio(m->c, f);
		return pos;
	}
	uint64_t idx = pos >> PC_PAGE_SHIFT;
	struct pc_folio *batch[1];
	if (!mapping_gather(m, &idx, UINT64_MAX, -1, batch, 1))
		return UINT64_MAX;
	uint64_t at = folio_pos(batch[0]);
	reclaim_release_folio(m->c, batch[0]);
	return at > pos ? at : pos;
}

/* End of the run of cached folios that starts at pos (pos itself when no
 * folio holds pos). */
static uint64_t cached_run_end(struct pc_mapping *m, uint64_t pos)
{
	struct pc_folio *f;
	while ((f = mapping_lookup(m, pos))) {
		uint64_t end = folio_pos(f) + folio_size(f);
		reclaim_release_folio(m->c, f);
		if (end <= pos)
			break; /* raced with a change of the index: stop here */
		pos = end;
	}
	return pos;
}

/* The backing file's answer, or `none` where it has no data (or hole)
 * there: past its end lseek says ENXIO, and past its end is a hole. */
static uint64_t backing_seek(int fd, uint64_t pos, int whence, uint64_t none)
{
	off_t r = fd >= 0 ? lseek(fd, (off_t)pos, whence) : -1;
	return r < 0 ? none : (uint64_t)r;
}

static off_t seek_data(struct pc_mapping *m, uint64_t pos, uint64_t size)
{
	uint64_t dev = backing_seek(mproc(m)->fd, pos, SEEK_DATA, UINT64_MAX);
	uint64_t cached = first_cached_from(m, pos);
	uint64_t at = dev < cached ? dev : cached;
	return at >= size ? -ENXIO : (off_t)at;
}

static off_t seek_hole(struct pc_mapping *m, uint64_t pos, uint64_t size)
{
	while (pos < size) {
		/* Past the backing file's end it is all hole there. */
		uint64_t hole = backing_seek(mproc(m)->fd, pos, SEEK_HOLE, pos);
		if (hole >= size)
			break;
		uint64_t end = cached_run_end(m, hole);
		if (end == hole)
			return (off_t)hole; /* neither the device nor the cache has data */
		pos = end;
	}
	return (off_t)size;
}

off_t pc_lseek(struct pc_file *h, off_t off, int whence)
{
	int err = 0;
	off_t r = -1;
	if (!h || h->magic != PC_FILE_MAGIC)
		err = -EBADF;
	else if (handle_inherited(h))
		err = -EPERM;
	if (err) {
		errno = -err;
		return -1;
	}
	uint64_t size = (uint64_t)atomic_load(&h->m->i_size);
	switch (whence) {
	case SEEK_SET:
	case SEEK_CUR:
		r = off;
		break;
	case SEEK_END:
		r = off > INT64_MAX - (off_t)size ? -1 : (off_t)size + off;
		break;
	case SEEK_DATA:
	case SEEK_HOLE:
		if (off < 0 || (uint64_t)off >= size)
			err = -ENXIO;
		else if ((r = whence == SEEK_DATA ? seek_data(h->m, (uint64_t)off, size)
						  : seek_hole(h->m, (uint64_t)off, size)) < 0)
			err = (int)r; /* the helpers return a negative errno */
		break;
	default:
		err = -EINVAL;
	}
	if (!err && r < 0)
		err = -EINVAL; /* a negative position */
	if (err) {
		errno = -err;
		return -1;
	}
	return r;
}
