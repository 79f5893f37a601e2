/**
 * @file pk_rci.h
 * @brief Private interface between the handle-based reverse communication's front end (rci.c) and its two
 *        paths: the coroutine running the library's own solve on host vectors, every solver type
 *        (rci_kry.c), and the state machine of CG and pipelined CG on device vectors (rci_dev.c).
 */
#ifndef PK_RCI_H
#define PK_RCI_H

#include "pk_impl.h"

/** The coroutine state of a reverse-communication solve on host vectors (every solver type). */
typedef struct pk_rci_kry pk_rci_kry;

/** Settings handed to the private solver when a solve starts. */
typedef struct {
  double rtol, atol;
  int32_t maxit, replace_interval, restart, step;
} pk_rci_kry_settings;

/**
 * Make the coroutine of a solver of type `type` (pk_kry_is_kry_type) and size n: a private CPU context,
 * a user operator and (preconditioned) a user preconditioner whose routines hand their requests to the
 * caller, the reduction hook (reduce_by_caller), the solver and its worker thread. Errors go to ctx.
 */
int pk_rci_kry_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                      int32_t reduce_by_caller, pk_rci_kry **K);
/** Abandon a solve in progress, stop the worker, free everything (NULL is a no-op). */
void pk_rci_kry_destroy(pk_rci_kry *K);
/**
 * Abandon the solve in progress, if any: its pending request is answered with an abort, the driver
 * unwinds (writing nothing of the caller's) and the worker waits for the next solve.
 */
void pk_rci_kry_abandon(pk_rci_kry *K);
/**
 * Prepare a solve of A x = b (host arrays of n values, checked by the caller; nothing in progress). The
 * solve works on a copy of x (copied in here when x_nonzero), copied out to x at DONE.
 */
int pk_rci_kry_start(pk_rci_kry *K, const pk_rci_kry_settings *set, const double *b, double *x,
                     int32_t x_nonzero);
/**
 * Run the solve to its next request: *req (PKRYLOV_RCI_*), in/out (MATVEC, PRECOND), partials/npartials
 * (REDUCE_START, REDUCE_WAIT). At PKRYLOV_RCI_DONE *res holds the result. A status < 0: the solve failed
 * (the message is in the caller's context) and is over.
 */
int pk_rci_kry_step(pk_rci_kry *K, int32_t *req, double **in, double **out, double **partials,
                    int32_t *npartials, pkrylov_result *res);

/** The state machine of a CG or pipelined CG solve on device vectors (a device backend's rci_* entries). */
typedef struct pk_rci_dev pk_rci_dev;

/** Make it: the backend's device work vectors for type (CG or pipelined CG) and size n. */
int pk_rci_dev_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                      int32_t reduce_by_caller, pk_rci_dev **R);
/** Free the device work and the state (NULL is a no-op). */
void pk_rci_dev_destroy(pk_rci_dev *R);
/** b (and x when x_nonzero) finite, checked on the device; errors raised as func. */
int pk_rci_dev_check(pk_rci_dev *R, const char *func, const double *b, const double *x, int32_t x_nonzero);
/** Start a solve of A x = b on device arrays (checked), x updated in place (zeroed unless x_nonzero). */
int pk_rci_dev_start(pk_rci_dev *R, const pk_rci_kry_settings *set, const double *b, double *x,
                     int32_t x_nonzero);
/** Run to the next request, as pk_rci_kry_step (partials: the host array of the sums, whatever the request).
 */
int pk_rci_dev_step(pk_rci_dev *R, int32_t *req, double **in, double **out, double **partials,
                    int32_t *npartials, pkrylov_result *res);

#endif /* PK_RCI_H */
