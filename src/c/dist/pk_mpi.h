/**
 * @file pk_mpi.h
 * @brief Private MPI helpers for the C files that talk MPI (mpi.c, reduce.c, dist.c). Not for the CUDA
 *        sources: pk_impl.h keeps MPI types out of the shared structures.
 */
#ifndef PK_MPI_H
#define PK_MPI_H

#ifdef PKRYLOV_HAVE_MPI
#include <mpi.h>

#include "pk_impl.h"

/** The context's private MPI state (ctx->mpi). */
typedef struct {
  MPI_Comm comm; /* the duplicate of the caller's communicator */
  void *nccl;    /* its NCCL communicator (ncclComm_t), created on first use (pk_mpi_nccl); NULL: none */
  int nccl_tried; /* pk_mpi_nccl tried to create it (once) */
} pk_mpi_state;

/** The context's communicator (only valid when ctx->mpi != NULL). */
static inline MPI_Comm pk_mpi_comm(pkrylov_context ctx) { return ((pk_mpi_state *)ctx->mpi)->comm; }

/** Record an MPI failure (status rc of the call named what) in ctx: PKRYLOV_ERR_BACKEND. */
int pk_mpi_error(pkrylov_context ctx, const char *func, const char *what, int rc);
#endif

#endif /* PK_MPI_H */
