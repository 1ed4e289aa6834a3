/*
** The MPI binding: Open MPI's libmpi opened at run time (see dist.h).
**
** Collectives are started non-blocking and completed by polling
** MPI_Testall, so a wait can give up after the timeout with a message
** naming the operation (MPI's blocking calls would hang forever on a rank
** that stopped answering).  Polling spins briefly, then sleeps in short
** naps so that a waiting rank leaves the core to the others.
*/
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/mpi_abi.h"

struct mpi_api mpi;

static int initialized, finalized, world_rank, world_size = 1, using_mpi;
static double timeout_s = 300.0;
static char library[256];
static char unavailable[512];
static int load_tried;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ loading */

/* Open MPI's library; $BERT_MPI_LIBRARY names another path (an install
** outside the loader's search path). */
static const char *mpi_library(void) {
  const char *p = getenv("BERT_MPI_LIBRARY");
  return p && *p ? p : "libmpi.so.40";
}
#define MPI_LIBRARY mpi_library()

static void *sym(void *h, const char *name, int *missing) {
  void *p = dlsym(h, name);
  if (p == NULL && *missing == 0) {
    *missing = 1;
    snprintf(unavailable, sizeof unavailable, "%s has no symbol %s (not Open MPI 3.x-5.x?)", MPI_LIBRARY, name);
  }
  return p;
}

/* Resolves the functions and predefined handles we use; 0 or -1. */
static int load_mpi(void) {
  /* RTLD_GLOBAL: Open MPI's own plugins (mca_*.so) resolve libmpi's symbols */
  void *h = dlopen(MPI_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) {
    snprintf(unavailable, sizeof unavailable, "cannot load %s (install Open MPI: openmpi-bin libopenmpi-dev): %s",
             MPI_LIBRARY, dlerror());
    load_tried = 1;
    return -1;
  }
  int missing = 0;
#define FN(name) *(void **)&mpi.name = sym(h, "MPI_" #name, &missing)
  FN(Initialized); FN(Init_thread); FN(Finalized); FN(Finalize); FN(Comm_rank); FN(Comm_size);
  FN(Comm_set_errhandler); FN(Error_string); FN(Get_library_version); FN(Abort);
  FN(Ibarrier); FN(Iallreduce); FN(Ibcast); FN(Iallgather); FN(Testall); FN(Test);
#undef FN
  mpi.comm_world = sym(h, "ompi_mpi_comm_world", &missing);
  mpi.errors_return = sym(h, "ompi_mpi_errors_return", &missing);
  mpi.type[BERT_DIST_F32] = sym(h, "ompi_mpi_float", &missing);
  mpi.type[BERT_DIST_F64] = sym(h, "ompi_mpi_double", &missing);
  mpi.type[BERT_DIST_I32] = sym(h, "ompi_mpi_int", &missing);
  mpi.type[BERT_DIST_I64] = sym(h, "ompi_mpi_long_long_int", &missing);
  mpi.type[BERT_DIST_BYTE] = sym(h, "ompi_mpi_byte", &missing);
  mpi.op[BERT_DIST_SUM] = sym(h, "ompi_mpi_op_sum", &missing);
  mpi.op[BERT_DIST_MAX] = sym(h, "ompi_mpi_op_max", &missing);
  mpi.op[BERT_DIST_MIN] = sym(h, "ompi_mpi_op_min", &missing);
  load_tried = 1;
  return missing ? -1 : 0;
}

/* A launcher started this process: Open MPI's mpirun, or a PMIx launcher. */
static int launched_by_mpirun(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

static volatile sig_atomic_t stopped_by_launcher;

/* mpirun ends the survivors with SIGTERM when a rank dies (or when it is
** interrupted itself): say so (only async-signal-safe calls here), then
** die of the signal as intended. */
static void on_sigterm(int sig) {
  static const char msg[] =
      "\nbert.distributed: rank 0 was stopped by mpirun: another rank of the job ended abnormally "
      "(killed, crashed or out of memory), or the job was interrupted. The last checkpoint is intact; "
      "restart with --resume.\n";
  if (!stopped_by_launcher) {
    stopped_by_launcher = 1;
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

int bert_dist_init(void) {
  if (initialized) return 0;
  if (!launched_by_mpirun()) {
    initialized = 1;
    return 0;
  }
  if (load_mpi() != 0) {
    bert_set_error("distributed.init: started by mpirun, but %s", unavailable);
    return -1;
  }
  int already = 0, provided = 0;
  mpi.Initialized(&already);
  /* FUNNELED: only the main thread calls MPI (OpenMP and the loader's
  ** thread never do) */
  if (!already && mpi.Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    bert_set_error("distributed.init: MPI_Init_thread failed");
    return -1;
  }
  mpi.Comm_set_errhandler(mpi.comm_world, mpi.errors_return);
  mpi.Comm_rank(mpi.comm_world, &world_rank);
  mpi.Comm_size(mpi.comm_world, &world_size);
  int len = 0;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  if (mpi.Get_library_version(version, &len) == MPI_SUCCESS) {
    version[len < (int)sizeof version ? len : (int)sizeof version - 1] = 0;
    char *nl = strchr(version, ',');   /* "Open MPI v4.1.4, package: ..." */
    if (nl) *nl = 0;
    snprintf(library, sizeof library, "%.200s (%.50s)", version, MPI_LIBRARY);
  } else {
    snprintf(library, sizeof library, "%.200s", MPI_LIBRARY);
  }
  unavailable[0] = 0;
  using_mpi = 1;
  initialized = 1;
  if (world_rank == 0 && world_size > 1) signal(SIGTERM, on_sigterm);
  const char *t = getenv("BERT_DIST_TIMEOUT");
  if (t && atof(t) > 0) timeout_s = atof(t);
  return 0;
}

int bert_dist_initialized(void) { return initialized && !finalized; }
int bert_dist_using_mpi(void) { return using_mpi && !finalized; }
int bert_dist_rank(void) { return world_rank; }
int bert_dist_size(void) { return world_size; }
const char *bert_dist_library(void) { return using_mpi ? library : NULL; }

int bert_dist_loadable(const char **reason) {
  if (using_mpi) return 1;
  if (!load_tried) {
    void *h = dlopen(MPI_LIBRARY, RTLD_LAZY | RTLD_LOCAL);
    if (h == NULL)
      snprintf(unavailable, sizeof unavailable, "cannot load %s (install Open MPI: openmpi-bin libopenmpi-dev)",
               MPI_LIBRARY);
    else
      unavailable[0] = 0;
    /* kept open: unloading Open MPI's library tree is not worth the risk */
    load_tried = 1;
  }
  if (reason) *reason = unavailable[0] ? unavailable : NULL;
  return unavailable[0] == 0;
}

void bert_dist_set_timeout(double seconds) { timeout_s = seconds > 0 ? seconds : 300.0; }
double bert_dist_get_timeout(void) { return timeout_s; }

/* ------------------------------------------------------------ waiting */

static int mpi_fail(const char *what, int code) {
  char msg[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (mpi.Error_string(code, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING] = 0;
  bert_set_error("distributed.%s: MPI error %d on rank %d of %d: %s (did another rank die?)", what, code,
                 world_rank, world_size, len ? msg : "unknown");
  return -1;
}

/* Waits for n requests; -1 with a message after the timeout. */
int bert_dist_wait(const char *what, int n, MPI_Request *reqs, double *waited) {
  double t0 = now_s();
  long spins = 0;
  for (;;) {
    int done = 0;
    int rc = mpi.Testall(n, reqs, &done, NULL);
    if (rc != MPI_SUCCESS) return mpi_fail(what, rc);
    if (done) break;
    double t = now_s() - t0;
    if (t > timeout_s) {
      bert_set_error("distributed.%s: rank %d of %d waited %.0f s for the other ranks (a rank died "
                     "or hangs; BERT_DIST_TIMEOUT sets the limit)", what, world_rank, world_size, t);
      return -1;
    }
    /* spin ~50 us for fast answers, then nap: the other ranks need the core */
    if (++spins > 2000) {
      struct timespec nap = {0, t < 0.01 ? 20000 : 200000};
      nanosleep(&nap, NULL);
    }
  }
  if (waited) *waited += now_s() - t0;
  return 0;
}

static size_t type_size(bert_dist_type t) {
  switch (t) {
    case BERT_DIST_F32: case BERT_DIST_I32: return 4;
    case BERT_DIST_F64: case BERT_DIST_I64: return 8;
    default: return 1;
  }
}

static int need_world(const char *what) {
  if (!initialized || finalized) {
    bert_set_error("distributed.%s: %s", what, finalized ? "distributed.finalize() was called"
                                                          : "call distributed.init() first");
    return -1;
  }
  return 0;
}

/* Pieces of at most CHUNK elements (MPI counts are int). */
#define CHUNK ((int64_t)1 << 28)

int bert_dist_barrier(void) {
  if (need_world("barrier")) return -1;
  if (!using_mpi) return 0;
  MPI_Request r;
  int rc = mpi.Ibarrier(mpi.comm_world, &r);
  if (rc != MPI_SUCCESS) return mpi_fail("barrier", rc);
  return bert_dist_wait("barrier", 1, &r, NULL);
}

int bert_dist_all_reduce(void *buf, int64_t count, bert_dist_type type, bert_dist_op op) {
  if (need_world("all_reduce")) return -1;
  if (!using_mpi || count == 0) return 0;
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    MPI_Request r;
    int rc = mpi.Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)at * type_size(type), n, mpi.type[type],
                            mpi.op[op], mpi.comm_world, &r);
    if (rc != MPI_SUCCESS) return mpi_fail("all_reduce", rc);
    if (bert_dist_wait("all_reduce", 1, &r, NULL)) return -1;
  }
  return 0;
}

int bert_dist_broadcast(void *buf, int64_t count, bert_dist_type type, int root) {
  if (need_world("broadcast")) return -1;
  if (root < 0 || root >= world_size) {
    bert_set_error("distributed.broadcast: root %d outside 0..%d", root, world_size - 1);
    return -1;
  }
  if (!using_mpi || count == 0) return 0;
  for (int64_t at = 0; at < count; at += CHUNK) {
    int n = (int)(count - at < CHUNK ? count - at : CHUNK);
    MPI_Request r;
    int rc = mpi.Ibcast((char *)buf + (size_t)at * type_size(type), n, mpi.type[type], root, mpi.comm_world, &r);
    if (rc != MPI_SUCCESS) return mpi_fail("broadcast", rc);
    if (bert_dist_wait("broadcast", 1, &r, NULL)) return -1;
  }
  return 0;
}

int bert_dist_all_gather(const void *send, void *recv, int64_t count, bert_dist_type type) {
  if (need_world("all_gather")) return -1;
  if (!using_mpi) {
    memmove(recv, send, (size_t)count * type_size(type));
    return 0;
  }
  if (count * world_size > INT_MAX) {
    bert_set_error("distributed.all_gather: %lld elements per rank is too many (at most %d in all)",
                   (long long)count, INT_MAX);
    return -1;
  }
  MPI_Request r;
  int rc = mpi.Iallgather(send, (int)count, mpi.type[type], recv, (int)count, mpi.type[type], mpi.comm_world, &r);
  if (rc != MPI_SUCCESS) return mpi_fail("all_gather", rc);
  return bert_dist_wait("all_gather", 1, &r, NULL);
}

void bert_dist_abort(const char *msg, int code) {
  if (msg && *msg) fprintf(stderr, "%s\n", msg);
  fflush(stderr);
  fflush(stdout);
  if (using_mpi && !finalized && world_size > 1) mpi.Abort(mpi.comm_world, code ? code : 1);
  _exit(code ? code : 1);
}

int bert_dist_finalize(void) {
  if (!using_mpi || finalized) { finalized = initialized; return 0; }
  finalized = 1;
  int done = 0;
  mpi.Finalized(&done);
  if (!done) {
    int rc = mpi.Finalize();
    if (rc != MPI_SUCCESS) return mpi_fail("finalize", rc);
  }
  return 0;
}
