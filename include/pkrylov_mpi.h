/**
 * @file pkrylov_mpi.h
 * @brief The MPI part of the pkrylov API (needs mpi.h): give a context a communicator.
 *
 * These functions are in the library libpkrylov_mpi (CMake: pkrylov::pkrylov_mpi; make: `pkg-config
 * --libs pkrylov-mpi` or `pkrylov-config --libs-mpi`), which links MPI; libpkrylov links none, so a serial
 * model needs no MPI library. Everything else about distributed solves (rank queries, distributed
 * operators, gather/scatter, the reproducible mode) is in pkrylov.h and libpkrylov, which stay free of
 * mpi.h. Only builds configured with MPI (pkrylov_has_mpi()) install this header and libpkrylov_mpi.
 */
#ifndef PKRYLOV_MPI_H
#define PKRYLOV_MPI_H

#include <mpi.h>

#include "pkrylov.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Distribute the context over comm (any communicator; the library never assumes MPI_COMM_WORLD).
 * Collective over comm: every rank calls it. The library keeps a duplicate (MPI_Comm_dup) with
 * MPI_ERRORS_RETURN and frees it in pkrylov_context_destroy(), which must come before MPI_Finalize.
 * Must be called before any object is created from the context, once (::PKRYLOV_ERR_INVALID_STATE
 * otherwise). MPI must be initialised (::PKRYLOV_ERR_INVALID_STATE) and comm must not be MPI_COMM_NULL
 * (::PKRYLOV_ERR_INVALID_VALUE). Every rank must use the same backend (::PKRYLOV_ERR_INVALID_VALUE). A CUDA
 * context on more than one rank moves to GPU (node-local rank mod visible devices; the node-local rank from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), which becomes the calling thread's current device; set the
 * option cuda.bind=none (pkrylov_context_set_option()) to keep the device that was current when the
 * context was created. The options marked collective (dist.*) are compared across the ranks here: a
 * difference is ::PKRYLOV_ERR_BAD_OPTION on every rank and the communicator is not taken. The default CPU thread count becomes this rank's share of the cores of its node (the cores
 * available to the process divided by the ranks of comm on the node that share them, at least 1; see
 * pkrylov_context_get_num_threads()).
 */
PKRYLOV_EXTERN int pkrylov_context_set_comm(pkrylov_context ctx, MPI_Comm comm);
/**
 * Give the context a communicator from Fortran: fcomm is a Fortran MPI handle (`integer` of the `mpi`
 * module, or `comm%MPI_VAL` of mpi_f08's `type(MPI_Comm)`), converted with MPI_Comm_f2c (MPI must be
 * initialised: ::PKRYLOV_ERR_INVALID_STATE otherwise). Collective over that communicator; the rules of
 * pkrylov_context_set_comm(). The Fortran module's pk_context_set_comm calls it (library
 * pkrylov_mpi_fortran).
 */
PKRYLOV_EXTERN int pkrylov_context_set_comm_f(pkrylov_context ctx, int32_t fcomm);

#ifdef __cplusplus
}
#endif

#endif /* PKRYLOV_MPI_H */
