/*
** The part of Open MPI's ABI (mpi.h of Open MPI 3.0 and later, soname
** libmpi.so.40) that csrc/dist/ uses, declared here so that building needs
** no MPI headers: handles are pointers to predefined objects exported by
** libmpi (ompi_mpi_comm_world, ompi_mpi_float, ...), MPI_IN_PLACE is
** (void *)1 and a NULL status means MPI_STATUS_IGNORE.
*/
#ifndef BERT_MPI_ABI_H
#define BERT_MPI_ABI_H

#include "dist/dist.h"

typedef void *MPI_Comm;
typedef void *MPI_Datatype;
typedef void *MPI_Op;
typedef void *MPI_Request;
typedef void *MPI_Errhandler;
typedef struct mpi_status MPI_Status;   /* only ever passed as NULL */

#define MPI_SUCCESS 0
#define MPI_THREAD_FUNNELED 1
#define MPI_IN_PLACE ((void *)1)
#define MPI_MAX_ERROR_STRING 256
#define MPI_MAX_LIBRARY_VERSION_STRING 256

struct mpi_api {
  int (*Initialized)(int *);
  int (*Init_thread)(int *, char ***, int, int *);
  int (*Finalized)(int *);
  int (*Finalize)(void);
  int (*Comm_rank)(MPI_Comm, int *);
  int (*Comm_size)(MPI_Comm, int *);
  int (*Comm_set_errhandler)(MPI_Comm, MPI_Errhandler);
  int (*Error_string)(int, char *, int *);
  int (*Get_library_version)(char *, int *);
  int (*Abort)(MPI_Comm, int);
  int (*Ibarrier)(MPI_Comm, MPI_Request *);
  int (*Iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
  int (*Ibcast)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
  int (*Iallgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *);
  int (*Testall)(int, MPI_Request *, int *, MPI_Status *);
  int (*Test)(MPI_Request *, int *, MPI_Status *);
  MPI_Comm comm_world;
  MPI_Errhandler errors_return;
  MPI_Datatype type[BERT_DIST_BYTE + 1];
  MPI_Op op[BERT_DIST_MIN + 1];
};

/* Resolved by bert_dist_init (mpi.c); valid only when MPI is in use. */
extern struct mpi_api mpi;

/* Waits for n requests, polling, for at most the timeout; *waited (when
** non-NULL) grows by the seconds spent.  0, or -1 with an error naming what. */
int bert_dist_wait(const char *what, int n, MPI_Request *reqs, double *waited);
int bert_dist_using_mpi(void);

#endif
