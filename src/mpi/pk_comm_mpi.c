/**
 * @file pk_comm_mpi.c
 * @brief libpkrylov_mpi: the MPI implementation of the communication table (pk_comm.h) and the public
 *        entry points that take an MPI communicator, pkrylov_context_set_comm() (pkrylov_mpi.h) and
 *        pkrylov_context_set_comm_f() (a Fortran handle). The only file of pkrylov that calls MPI; libpkrylov
 *        itself needs no MPI library (a serial model links no MPI).
 *
 * A communicator of the table is a pointer to an MPI_Comm: the caller's (only during pk_comm_attach) or a
 * malloc'ed duplicate (dup, split_shared; freed by free). Every operation is the MPI call of the same name
 * with the same arguments in the same order, and returns its MPI status.
 */
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "pk_comm.h"
#include "pkrylov_mpi.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(pk_comm_req), "MPI_Request does not fit into pk_comm_req");

/** The MPI datatype of a table type. */
static MPI_Datatype dtype(pk_comm_type t) {
  switch (t) {
  case PK_COMM_BYTE: return MPI_BYTE;
  case PK_COMM_INT: return MPI_INT;
  case PK_COMM_INT32: return MPI_INT32_T;
  case PK_COMM_INT64: return MPI_INT64_T;
  case PK_COMM_DOUBLE: return MPI_DOUBLE;
  case PK_COMM_2INT: return MPI_2INT;
  }
  return MPI_DATATYPE_NULL; /* an unknown type: MPI reports it */
}

/** The MPI operation of a table operation. */
static MPI_Op mop(pk_comm_op op) {
  switch (op) {
  case PK_COMM_SUM: return MPI_SUM;
  case PK_COMM_MIN: return MPI_MIN;
  case PK_COMM_MAX: return MPI_MAX;
  case PK_COMM_MINLOC: return MPI_MINLOC;
  }
  return MPI_OP_NULL;
}

static inline MPI_Comm C(void *comm) { return *(MPI_Comm *)comm; }
static inline MPI_Request *R(pk_comm_req *req) { return (MPI_Request *)(void *)req->bytes; }

static int c_size(void *comm, int *size) { return MPI_Comm_size(C(comm), size); }
static int c_rank(void *comm, int *rank) { return MPI_Comm_rank(C(comm), rank); }

static int c_dup(void *comm, void **dup) {
  MPI_Comm *d = malloc(sizeof *d);
  if (!d) return MPI_ERR_NO_MEM;
  const int rc = MPI_Comm_dup(C(comm), d);
  if (rc != MPI_SUCCESS) {
    free(d);
    return rc;
  }
  MPI_Comm_set_errhandler(*d, MPI_ERRORS_RETURN);
  *dup = d;
  return MPI_SUCCESS;
}

static void c_free(void *comm) {
  if (!comm) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Comm_free((MPI_Comm *)comm);
  free(comm);
}

static int c_split_shared(void *comm, int key, void **node) {
  MPI_Comm *d = malloc(sizeof *d);
  if (!d) return MPI_ERR_NO_MEM;
  const int rc = MPI_Comm_split_type(C(comm), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, d);
  if (rc != MPI_SUCCESS) {
    free(d);
    return rc;
  }
  *node = d;
  return MPI_SUCCESS;
}

static int c_allreduce(void *comm, const void *in, void *out, int count, pk_comm_type t, pk_comm_op op) {
  return MPI_Allreduce(in ? in : MPI_IN_PLACE, out, count, dtype(t), mop(op), C(comm));
}

static int c_iallreduce(void *comm, void *inout, int count, pk_comm_type t, pk_comm_op op, pk_comm_req *req) {
  return MPI_Iallreduce(MPI_IN_PLACE, inout, count, dtype(t), mop(op), C(comm), R(req));
}

static int c_allgather(void *comm, const void *mine, int count, pk_comm_type t, void *all) {
  return MPI_Allgather(mine, count, dtype(t), all, count, dtype(t), C(comm));
}

static int c_alltoall(void *comm, const void *send, int count, pk_comm_type t, void *recv) {
  return MPI_Alltoall(send, count, dtype(t), recv, count, dtype(t), C(comm));
}

static int c_alltoallv(void *comm, const void *send, const int *scounts, const int *sdispls, void *recv,
                       const int *rcounts, const int *rdispls, pk_comm_type t) {
  return MPI_Alltoallv(send, scounts, sdispls, dtype(t), recv, rcounts, rdispls, dtype(t), C(comm));
}

static int c_gatherv(void *comm, const void *send, int count, void *recv, const int *counts, const int *displs,
                     pk_comm_type t, int root) {
  return MPI_Gatherv(send, count, dtype(t), recv, counts, displs, dtype(t), root, C(comm));
}

static int c_scatterv(void *comm, const void *send, const int *counts, const int *displs, void *recv, int count,
                      pk_comm_type t, int root) {
  return MPI_Scatterv(send, counts, displs, dtype(t), recv, count, dtype(t), root, C(comm));
}

static int c_bcast(void *comm, void *buf, int count, pk_comm_type t, int root) {
  return MPI_Bcast(buf, count, dtype(t), root, C(comm));
}

static int c_isend(void *comm, const void *buf, int count, pk_comm_type t, int dest, int tag, pk_comm_req *req) {
  return MPI_Isend(buf, count, dtype(t), dest, tag, C(comm), R(req));
}

static int c_irecv(void *comm, void *buf, int count, pk_comm_type t, int source, int tag, pk_comm_req *req) {
  return MPI_Irecv(buf, count, dtype(t), source, tag, C(comm), R(req));
}

static int c_wait(pk_comm_req *req) { return MPI_Wait(R(req), MPI_STATUS_IGNORE); }

/** MPI_Waitall of the requests stored one per pk_comm_req (copied into an MPI_Request array when they are
 *  not laid out as one). */
static int c_waitall(int n, pk_comm_req *reqs) {
  if (n <= 0) return MPI_SUCCESS;
  MPI_Request stack[16], *r = n <= 16 ? stack : malloc(sizeof(MPI_Request) * (size_t)n);
  if (!r) return MPI_ERR_NO_MEM;
  for (int i = 0; i < n; i++) r[i] = *R(&reqs[i]);
  const int rc = MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
  for (int i = 0; i < n; i++) *R(&reqs[i]) = r[i]; /* MPI_REQUEST_NULL now */
  if (r != stack) free(r);
  return rc;
}

static void c_error_string(int rc, char *buf, int len) {
  char msg[MPI_MAX_ERROR_STRING + 1];
  int n = 0;
  if (MPI_Error_string(rc, msg, &n) != MPI_SUCCESS) n = 0;
  msg[n] = '\0';
  if (len > 0) {
    strncpy(buf, msg, (size_t)len - 1);
    buf[len - 1] = '\0';
  }
}

static const pk_comm_ops pk_comm_mpi_ops = {
    .version = PK_COMM_OPS_VERSION,
    .name = "MPI",
    .size = c_size,
    .rank = c_rank,
    .dup = c_dup,
    .free = c_free,
    .split_shared = c_split_shared,
    .allreduce = c_allreduce,
    .iallreduce = c_iallreduce,
    .allgather = c_allgather,
    .alltoall = c_alltoall,
    .alltoallv = c_alltoallv,
    .gatherv = c_gatherv,
    .scatterv = c_scatterv,
    .bcast = c_bcast,
    .isend = c_isend,
    .irecv = c_irecv,
    .wait = c_wait,
    .waitall = c_waitall,
    .error_string = c_error_string,
};

int pkrylov_context_set_comm(pkrylov_context ctx, MPI_Comm comm) {
  static const char func[] = "pkrylov_context_set_comm";
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  /* the checks that need MPI; pk_comm_attach raises them (after its check of ctx) and does the rest */
  if (!init || fin)
    return pk_comm_attach(ctx, func, &pk_comm_mpi_ops, NULL, PKRYLOV_ERR_INVALID_STATE,
                          fin ? "MPI is finalized: call pkrylov_context_set_comm between MPI_Init and MPI_Finalize"
                              : "MPI is not initialised: call pkrylov_context_set_comm between MPI_Init and "
                                "MPI_Finalize");
  if (comm == MPI_COMM_NULL)
    return pk_comm_attach(ctx, func, &pk_comm_mpi_ops, NULL, PKRYLOV_ERR_INVALID_VALUE,
                          "argument 'comm' is MPI_COMM_NULL");
  return pk_comm_attach(ctx, func, &pk_comm_mpi_ops, &comm, PKRYLOV_SUCCESS, NULL);
}

int pkrylov_context_set_comm_f(pkrylov_context ctx, int32_t fcomm) {
  int init = 0;
  MPI_Initialized(&init);
  if (!ctx || !init) /* MPI_Comm_f2c needs MPI */
    return pk_comm_attach(ctx, "pkrylov_context_set_comm_f", &pk_comm_mpi_ops, NULL, PKRYLOV_ERR_INVALID_STATE,
                          "MPI is not initialised: call pkrylov_context_set_comm_f after MPI_Init");
  return pkrylov_context_set_comm(ctx, MPI_Comm_f2c((MPI_Fint)fcomm));
}
