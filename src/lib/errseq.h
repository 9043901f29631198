/*
 * errseq.h - errseq counters (errseq.c): what each handle has seen of a
 * file's write errors, as the kernel's errseq_t.  Failing files are
 * wb/failing.h's.
 */
#ifndef PC_ERRSEQ_H
#define PC_ERRSEQ_H

#include "lib/util.h"

#include <stdatomic.h>
#include <stdint.h>

/* A file's write-back errors (struct pc_mapping's wb_err). */
typedef _Atomic uint64_t pc_errseq_t;

/* Record a write error in the mapping's errseq. */
HIDDEN void errseq_set(pc_errseq_t *e, int err);
HIDDEN uint64_t errseq_sample(pc_errseq_t *e);
/* The sample a new handle starts from: before an error nobody reported. */
HIDDEN uint64_t errseq_open_sample(pc_errseq_t *e);
/* Is there an error no handle has reported? */
HIDDEN bool errseq_unseen(pc_errseq_t *e);
/* Report an error newer than *since once; 0 or negative errno. */
HIDDEN int errseq_check_and_advance(pc_errseq_t *e, uint64_t *since);

#endif
