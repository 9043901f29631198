/*
 * fault.h - test-only fault injection (fault.c): which of the rules of
 * pc_fault_inject() (api/fault_rules.c) fires for a device I/O.  What a
 * firing rule does to the I/O is the backend's business.
 */
#ifndef PC_FAULT_H
#define PC_FAULT_H

#include "lib/util.h"

struct pc_cache;

/* Asked by the backend before every device I/O and by writeback before
 * allocating a request.  Returns 0, or a negative errno when a
 * PC_FAULT_FAIL rule fires; sleeps when a PC_FAULT_DELAY rule fires.
 * op_mask: PC_FAULT_* of this I/O.  Only one relaxed atomic load when no
 * rule is installed. */
HIDDEN int fault_check(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len);
/* fault_check for a device read or write that may be cut short: *cut gets
 * 0 or the bytes the device moves first (a PC_FAULT_SHORT rule fired);
 * cut NULL: SHORT rules do not apply. */
HIDDEN int fault_check_io(struct pc_cache *c, unsigned op_mask, int fd, off_t off, size_t len, size_t *cut);

#endif
