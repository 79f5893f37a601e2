/**
 * @file pk_comm.h
 * @brief The communication table: the few collective and point-to-point operations the core needs between
 *        ranks, as function pointers, so that libpkrylov itself has no MPI in it. The one implementation is
 *        MPI's (src/mpi/pk_comm_mpi.c, in libpkrylov_mpi, which also holds pkrylov_context_set_comm); it
 *        hands the table and the caller's communicator to pk_comm_attach(). A context without a
 *        communicator has no table (ctx->mpi == NULL): everything works on its one rank without calling it.
 *
 * A communicator is an opaque pointer the table understands (for MPI a pointer to an MPI_Comm). Every
 * operation returns 0 or the implementation's error code, which pk_comm_error() turns into the context's
 * PKRYLOV_ERR_BACKEND with the implementation's text for it (error_string: no abort, no output). The
 * operations mean what their MPI namesakes mean (same arguments in the same order, counts in elements of
 * the given type), so that the callers keep the calls and their order exactly: the sums, and so the
 * iterates, are bitwise the same as when the core called MPI itself.
 *
 * No mpi.h here: pk_impl.h, the CUDA sources and the whole core stay free of it.
 */
#ifndef PK_COMM_H
#define PK_COMM_H

#include <stdint.h>

#include "pk_impl.h"

/** Bumped when the table changes: a libpkrylov_mpi of another build is refused (PKRYLOV_ERR_INTERNAL). */
#define PK_COMM_OPS_VERSION 1

/** Element types (MPI_BYTE, MPI_INT, MPI_INT32_T, MPI_INT64_T, MPI_DOUBLE, MPI_2INT). */
typedef enum { PK_COMM_BYTE, PK_COMM_INT, PK_COMM_INT32, PK_COMM_INT64, PK_COMM_DOUBLE, PK_COMM_2INT } pk_comm_type;
/** Reduction operations (MPI_SUM, MPI_MIN, MPI_MAX, MPI_MINLOC). */
typedef enum { PK_COMM_SUM, PK_COMM_MIN, PK_COMM_MAX, PK_COMM_MINLOC } pk_comm_op;

/** A request of a non-blocking operation, opaque (an MPI_Request fits; the implementation checks). */
typedef union {
  unsigned char bytes[32];
  void *align_p;
  int64_t align_i;
} pk_comm_req;

/** The table. comm is a communicator the implementation understands; in == NULL means in place. */
typedef struct pk_comm_ops {
  int32_t version; /* PK_COMM_OPS_VERSION */
  const char *name; /* "MPI": error messages say "<name> error <code> (<text>)" */
  /* ---- lifetime and queries */
  int (*size)(void *comm, int *size);
  int (*rank)(void *comm, int *rank);
  /** A private duplicate of comm whose errors are returned (MPI_Comm_dup + MPI_ERRORS_RETURN). */
  int (*dup)(void *comm, void **dup);
  /** Free a communicator from dup or split_shared (nothing once the implementation is finalised). */
  void (*free)(void *comm);
  /** The ranks of comm on this node, ordered by key (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)). */
  int (*split_shared)(void *comm, int key, void **node);
  /* ---- collectives */
  int (*allreduce)(void *comm, const void *in, void *out, int count, pk_comm_type type, pk_comm_op op);
  /** Split phase: start an in-place reduction of inout; finish with wait. */
  int (*iallreduce)(void *comm, void *inout, int count, pk_comm_type type, pk_comm_op op, pk_comm_req *req);
  int (*allgather)(void *comm, const void *mine, int count, pk_comm_type type, void *all);
  int (*alltoall)(void *comm, const void *send, int count, pk_comm_type type, void *recv);
  int (*alltoallv)(void *comm, const void *send, const int *scounts, const int *sdispls, void *recv,
                   const int *rcounts, const int *rdispls, pk_comm_type type);
  int (*gatherv)(void *comm, const void *send, int count, void *recv, const int *counts, const int *displs,
                 pk_comm_type type, int root);
  int (*scatterv)(void *comm, const void *send, const int *counts, const int *displs, void *recv, int count,
                  pk_comm_type type, int root);
  int (*bcast)(void *comm, void *buf, int count, pk_comm_type type, int root);
  /* ---- point to point (finish with wait / waitall) */
  int (*isend)(void *comm, const void *buf, int count, pk_comm_type type, int dest, int tag, pk_comm_req *req);
  int (*irecv)(void *comm, void *buf, int count, pk_comm_type type, int source, int tag, pk_comm_req *req);
  int (*wait)(pk_comm_req *req);
  int (*waitall)(int n, pk_comm_req *reqs);
  /* ---- errors */
  /** The text of error code rc into buf (len bytes, NUL-terminated). */
  void (*error_string)(int rc, char *buf, int len);
} pk_comm_ops;

/** The context's communication state (ctx->mpi). */
typedef struct {
  const pk_comm_ops *ops;
  void *comm;     /* the duplicate of the caller's communicator (ops->dup) */
  void *nccl;     /* its NCCL communicator (ncclComm_t), created on first use (pk_mpi_nccl); NULL: none */
  int nccl_tried; /* pk_mpi_nccl tried to create it (once) */
} pk_comm_state;

/** The context's table and communicator (only valid when ctx->mpi != NULL). */
static inline const pk_comm_ops *pk_comm_ops_of(pkrylov_context ctx) { return ((pk_comm_state *)ctx->mpi)->ops; }
static inline void *pk_comm_of(pkrylov_context ctx) { return ((pk_comm_state *)ctx->mpi)->comm; }

/** Record a failure (status rc of the operation named what) in ctx: PKRYLOV_ERR_BACKEND. */
int pk_comm_error(pkrylov_context ctx, const char *func, const char *what, int rc);

/**
 * Give ctx the communicator comm of the table ops (pkrylov_context_set_comm, called by libpkrylov_mpi):
 * code != 0 is an error the caller found before (MPI not initialised, a null communicator: its message
 * why), recorded here after the NULL check of ctx. Then, collectively over comm, everything
 * pkrylov_context_set_comm() documents: the backends and the collective options compared, a CUDA context
 * moved to its GPU, the node's cores shared, and comm duplicated. Errors are raised as func. Exported
 * (libpkrylov_mpi calls it) but not in a public header.
 */
PKRYLOV_EXTERN int pk_comm_attach(pkrylov_context ctx, const char *func, const pk_comm_ops *ops, void *comm,
                                  int code, const char *why);

#endif /* PK_COMM_H */
