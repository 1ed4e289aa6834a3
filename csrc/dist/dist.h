/*
** Data parallelism over MPI (csrc/dist/).
**
** The MPI library is opened at run time (dlopen), so the module builds and
** runs without MPI: a process not started by mpirun is a world of one and
** never touches MPI.  The binding speaks Open MPI's ABI (libmpi.so.40,
** Open MPI 3.x to 5.x: handles are pointers to predefined objects), the
** MPI that Debian and most clusters ship.
**
** Every wait on the other ranks is bounded by a timeout: a rank that dies
** or hangs makes the others fail with a message instead of hanging, and
** MPI errors are returned, not fatal, so the message can say what failed.
*/
#ifndef BERT_DIST_H
#define BERT_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

typedef enum { BERT_DIST_SUM, BERT_DIST_MAX, BERT_DIST_MIN } bert_dist_op;
typedef enum { BERT_DIST_F32, BERT_DIST_F64, BERT_DIST_I32, BERT_DIST_I64, BERT_DIST_BYTE } bert_dist_type;

/* Joins the job mpirun started (MPI_Init once), or makes a world of one
** when there is no launcher.  0, or -1 with bert_set_error. */
int bert_dist_init(void);
int bert_dist_initialized(void);
int bert_dist_rank(void);
int bert_dist_size(void);
/* "Open MPI v4.1.4, ..." when MPI is in use, else NULL. */
const char *bert_dist_library(void);
/* Whether the MPI library can be loaded; *reason (when not) says why. */
int bert_dist_loadable(const char **reason);
/* Seconds any collective may wait for the other ranks (default 300). */
void bert_dist_set_timeout(double seconds);
double bert_dist_get_timeout(void);

/* Collectives over every rank (in-place where it makes sense); each
** returns 0, or -1 with bert_set_error naming the operation.  Sizes are
** element counts and may exceed INT_MAX (sent in pieces). */
int bert_dist_barrier(void);
int bert_dist_all_reduce(void *buf, int64_t count, bert_dist_type type, bert_dist_op op);
int bert_dist_broadcast(void *buf, int64_t count, bert_dist_type type, int root);
/* recv holds size() * count elements, rank r's at r * count. */
int bert_dist_all_gather(const void *send, void *recv, int64_t count, bert_dist_type type);
/* Ends every rank of the job (MPI_Abort), after writing msg to stderr. */
void bert_dist_abort(const char *msg, int code);
int bert_dist_finalize(void);

/* ---- gradient reduction overlapped with backward ----
** A reducer owns a partition of a flat gradient buffer into buckets.
** Armed, it watches the backward pass (bert_set_backward_hook): as soon as
** every parameter inside a bucket has received its last gradient of this
** pass, the bucket's sum over ranks starts (MPI_Iallreduce), in a fixed
** order (last bucket first) so every rank issues the same sequence.
** finish() starts what is left, waits for all, and divides by size(). */
typedef struct bert_dist_reducer bert_dist_reducer;
bert_dist_reducer *bert_dist_reducer_new(bert_tensor *flat_grad, int64_t bucket_elems);
void bert_dist_reducer_free(bert_dist_reducer *r);
int bert_dist_reducer_arm(bert_dist_reducer *r);
/* *overlapped (optional): buckets that had started before backward ended. */
int bert_dist_reducer_finish(bert_dist_reducer *r, int *overlapped, double *wait_seconds);
int bert_dist_reducer_buckets(const bert_dist_reducer *r);

#endif
