/**
 * @file pkrylov.h
 * @brief Public C API of pkrylov: Krylov pressure solvers for weather, climate and ocean models.
 *
 * One header, opaque handles, every call returns a status code (::PKRYLOV_SUCCESS = 0, errors are
 * negative, see ::pkrylov_error). Objects belong to a context (::pkrylov_context) which picks the
 * backend and stores the message of the last error raised through it.
 *
 * Life cycle (plan once, solve every time step):
 * @code
 *   pkrylov_context ctx;   pkrylov_context_create(PKRYLOV_BACKEND_AUTO, &ctx);
 *   pkrylov_operator A;    pkrylov_operator_create_stencil7(ctx, nx, ny, nz, aW, aS, aV, aC, mask, &A);
 *   pkrylov_precond M;     pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M);
 *   pkrylov_solver s;      pkrylov_solver_create(ctx, PKRYLOV_SOLVER_PIPECG, A, M, &s);
 *   pkrylov_solver_set_tolerances(s, 1e-8, 0.0);
 *   for (step = 0; step < nsteps; step++)
 *     pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x);   // check the result with pkrylov_solver_get_result
 *   pkrylov_solver_destroy(&s); pkrylov_precond_destroy(&M); pkrylov_operator_destroy(&A);
 *   pkrylov_context_destroy(&ctx);
 * @endcode
 *
 * Conventions
 * - Every array argument says where it lives: host (C pointer to host memory) or, where the call takes a
 *   ::pkrylov_memtype, the memory space named by it. On a CUDA context, host arrays are copied to the device
 *   and back, device arrays are used in place (this is how OpenACC and CUDA Fortran models call us); a pointer
 *   in the other space than `mem` says is rejected with ::PKRYLOV_ERR_MEMTYPE. The CPU backend accepts host
 *   memory only (::PKRYLOV_ERR_MEMTYPE for ::PKRYLOV_MEM_DEVICE). Matrix arrays given at creation are always
 *   host arrays; operators and factorisations are uploaded once. A CUDA context works on its own
 *   non-blocking stream, which does not wait for other streams (the legacy default stream included): device
 *   arrays must be complete when passed (synchronise the stream or OpenACC queue that wrote them), and the
 *   call has finished with them when it returns.
 * - Invalid arguments return an error and modify nothing; the message names the argument
 *   (pkrylov_context_get_error_message()).
 * - Not converging is an outcome, not an error: pkrylov_solver_solve() returns ::PKRYLOV_SUCCESS and the
 *   result (::pkrylov_result) says why it stopped; x then holds the last good iterate.
 * - Integers that count unknowns or nonzeros are int64_t; everything else is int32_t. No bool crosses
 *   the interface (Fortran interoperability): flags are int32_t 0/1.
 * - Enumerations use disjoint value ranges so that a swapped argument is detected.
 * - Destroy functions take the address of the handle, set it to NULL, and accept NULL.
 *
 * Threads
 * - Different contexts are independent: each may be used from its own thread while the others are (a
 *   model's threads each solving their own systems).
 * - On one CPU context without a communicator, different solvers may solve at the same time from
 *   different threads, also when they share an operator or a preconditioner of the built-in kinds (CSR,
 *   column stencil, thin shell; Jacobi, column), whose products only read them; the results are bitwise
 *   those of the same solves done one after another. An operator or preconditioner that keeps state during
 *   a product (a user routine, a stencil with the caller's halo exchange, a distributed operator) serves
 *   one solve or product at a time, and so do a CUDA context (one stream) and a context with a
 *   communicator (one sequence of collective calls), which the thread that holds it may use again inside
 *   (a product with another operator of the context in a callback of its own solve).
 * - One object is used by one thread at a time. A call that finds its object in use by another call (a
 *   second thread solving with the same solver, changing its settings, reading its result or destroying
 *   it meanwhile; a second solve or product on a CUDA context or one with a communicator; a second solve
 *   or product with a stateful operator or preconditioner) does nothing and returns ::PKRYLOV_ERR_BUSY with
 *   a message naming the argument; the call in progress goes on unharmed. So does a call on a solver from
 *   a callback of that solver's own solve. With a communicator, make the same calls on every rank: a call
 *   refused on one rank only leaves the others waiting in it. Creating and destroying the objects of one
 *   context, and its settings (pkrylov_context_set_num_threads(), set_comm, set_reproducible), are for one
 *   thread at a time.
 * - The last error of a context that several threads use is the last one raised by any of them.
 * - The CPU backend's loops use OpenMP (pkrylov_context_get_num_threads() says how many threads). Idle
 *   OpenMP threads wait as the OpenMP runtime decides (OMP_WAIT_POLICY, read by the runtime when the
 *   program starts; GCC's libgomp spins about 3 ms by default): a model that shares its cores with other
 *   work should run with OMP_WAIT_POLICY=passive (docs/design.md, "Threads").
 */
#ifndef PKRYLOV_H
#define PKRYLOV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define PKRYLOV_EXTERN __declspec(dllexport)
#else
#define PKRYLOV_EXTERN __attribute__((visibility("default")))
#endif

/** @name Version */
/**@{*/
#define PKRYLOV_VERSION_MAJOR 0
#define PKRYLOV_VERSION_MINOR 1
#define PKRYLOV_VERSION_PATCH 0
/** True when the library headers are at least version major.minor.patch. */
#define PKRYLOV_VERSION_GE(major, minor, patch)                                                   \
  (PKRYLOV_VERSION_MAJOR > (major) ||                                                             \
   (PKRYLOV_VERSION_MAJOR == (major) &&                                                           \
    (PKRYLOV_VERSION_MINOR > (minor) ||                                                           \
     (PKRYLOV_VERSION_MINOR == (minor) && PKRYLOV_VERSION_PATCH >= (patch)))))
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Status codes */
/**@{*/
/** Every function returns one of these. 0 is success; errors are negative. */
typedef enum {
  PKRYLOV_SUCCESS = 0,
  PKRYLOV_ERR_NULL_POINTER = -1,       /**< a required pointer argument is NULL */
  PKRYLOV_ERR_INVALID_SIZE = -2,       /**< a size is <= 0 or too large */
  PKRYLOV_ERR_INVALID_VALUE = -3,      /**< an enumeration or scalar argument is out of its range */
  PKRYLOV_ERR_INDEX_OUT_OF_RANGE = -4, /**< a CSR column index or row pointer is out of range */
  PKRYLOV_ERR_DUPLICATE_ENTRY = -5,    /**< the same (row, column) appears twice */
  PKRYLOV_ERR_NOT_FINITE = -6,         /**< NaN or Inf in a matrix, coefficient or vector */
  PKRYLOV_ERR_SIZE_MISMATCH = -7,      /**< sizes of two arguments do not agree */
  PKRYLOV_ERR_LAYOUT = -8,             /**< levels/layout do not fit the operator (column preconditioner) */
  PKRYLOV_ERR_SINGULAR = -9,           /**< a preconditioner could not be built: zero pivot, zero diagonal */
  PKRYLOV_ERR_FILE_IO = -10,           /**< a file could not be opened, read or written */
  PKRYLOV_ERR_FILE_FORMAT = -11,       /**< a Matrix Market file is malformed (message names the line) */
  PKRYLOV_ERR_UNSUPPORTED = -12,       /**< valid input this build or version cannot handle */
  PKRYLOV_ERR_BACKEND_UNAVAILABLE = -13, /**< the requested backend is not compiled in or has no device */
  PKRYLOV_ERR_MEMTYPE = -14,           /**< memory type not accepted by this backend, or pointer in wrong space */
  PKRYLOV_ERR_OUT_OF_MEMORY = -15,     /**< an allocation failed */
  PKRYLOV_ERR_INCOMPATIBLE = -16,      /**< objects from different contexts, or of kinds that do not fit */
  PKRYLOV_ERR_INVALID_STATE = -17,     /**< call not valid now, e.g. a result asked for before any solve */
  PKRYLOV_ERR_ALIASING = -18,          /**< two arguments that must be distinct point to the same memory */
  PKRYLOV_ERR_BACKEND = -19,           /**< a backend library (LAPACK, CUDA) reported a failure */
  PKRYLOV_ERR_INTERNAL = -20,          /**< a bug in pkrylov: please report it */
  PKRYLOV_ERR_CALLBACK = -21,          /**< a user callback (pkrylov_apply_fn) returned nonzero */
  PKRYLOV_ERR_BUSY = -22,              /**< the object is in use by another thread (see "Threads" above) */
  PKRYLOV_ERR_TOPOLOGY = -23,          /**< a tile connectivity that cannot be: an asymmetric neighbour table,
                                            an edge joined to itself, a tile owned by no rank or by two */
  PKRYLOV_ERR_BAD_OPTION = -24         /**< an unknown option, a value it does not accept, a context-level
                                            option set on a solver, or a collective option that differs
                                            between the ranks (the message names it and the allowed values) */
} pkrylov_error;
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Enumerations (disjoint value ranges) */
/**@{*/
/** Backend a context runs on. AUTO: CUDA when it loads and a device is present (pkrylov_context_create()). */
typedef enum {
  PKRYLOV_BACKEND_AUTO = 100,
  PKRYLOV_BACKEND_CPU = 101,
  PKRYLOV_BACKEND_CUDA = 102
} pkrylov_backend;

/** Where an array argument lives. */
typedef enum { PKRYLOV_MEM_HOST = 200, PKRYLOV_MEM_DEVICE = 201 } pkrylov_memtype;

/** Krylov method. */
typedef enum {
  PKRYLOV_SOLVER_CG = 300,           /**< preconditioned CG, fused two-loop form (two reductions/iteration) */
  PKRYLOV_SOLVER_PIPECG = 301,       /**< pipelined PCG (Ghysels-Vanroose), one reduction/iteration */
  PKRYLOV_SOLVER_BICGSTAB = 302,     /**< BiCGStab (van der Vorst), right preconditioned */
  PKRYLOV_SOLVER_PIPEBICGSTAB = 303, /**< pipelined BiCGStab (Cools-Vanroose), reductions merged */
  PKRYLOV_SOLVER_GMRES = 304,        /**< GMRES(m), classical Gram-Schmidt with reorthogonalisation */
  PKRYLOV_SOLVER_PIPEGMRES = 305,    /**< pipelined GMRES(m) (Ghysels et al.), one reduction/iteration */
  PKRYLOV_SOLVER_FGMRES = 306,       /**< flexible GMRES(m) (Saad), for variable preconditioners */
  PKRYLOV_SOLVER_CAGMRES = 307,      /**< CA-GMRES(s, m): matrix powers, block orthogonalisation,
                                          CholQR with a double-double Gram matrix */
  PKRYLOV_SOLVER_SRCG = 308          /**< single-reduction PCG (Chronopoulos-Gear, d'Azevedo-Eijkhout-Romine;
                                          MITgcm's CG2D_SR): one reduction of (r,z), (z,A z), (r,r) per
                                          iteration */
} pkrylov_solver_type;

/** Preconditioner. */
typedef enum {
  PKRYLOV_PRECOND_NONE = 400,
  PKRYLOV_PRECOND_JACOBI = 401, /**< diagonal scaling */
  PKRYLOV_PRECOND_COLUMN = 402, /**< block Jacobi over vertical columns, one tridiagonal solve each */
  PKRYLOV_PRECOND_USER = 403,   /**< the caller's routine (pkrylov_precond_create_user()) */
  PKRYLOV_PRECOND_AINV = 404    /**< the ocean models' 5-point approximate inverse of a 2-D operator
                                     (pkrylov_precond_create_ainv()) */
} pkrylov_precond_type;

/** Where the vertical levels of a column lie in a vector (column preconditioner on CSR). */
typedef enum {
  PKRYLOV_LAYOUT_AUTO = 500,  /**< take it from the operator (column stencil, thin shell) */
  PKRYLOV_LAYOUT_KSLOW = 501, /**< index i + nx*(j + ny*k): levels farthest apart (model/GPU order) */
  PKRYLOV_LAYOUT_KFAST = 502  /**< index k + nz*column: the levels of a column are contiguous */
} pkrylov_layout;

/** Horizontal geometry of the thin-shell model problem. */
typedef enum {
  PKRYLOV_GEOMETRY_GNOMONIC = 600, /**< one equiangular cubed-sphere panel */
  PKRYLOV_GEOMETRY_UNIFORM = 601   /**< |T| = dx^2, alpha = 1 (quick tests) */
} pkrylov_geometry;

/** Operator kind, as reported by pkrylov_operator_get_info(). */
typedef enum {
  PKRYLOV_OPERATOR_CSR = 700,
  PKRYLOV_OPERATOR_STENCIL7 = 701,
  PKRYLOV_OPERATOR_THINSHELL = 702,
  PKRYLOV_OPERATOR_USER = 703 /**< the caller's routine (pkrylov_operator_create_user()) */
} pkrylov_operator_type;

/** Precision of the stored coefficients (pkrylov_solver_set_precision()). */
typedef enum {
  PKRYLOV_PRECISION_FP64 = 800,
  PKRYLOV_PRECISION_MIXED_PRECOND = 801, /**< fp32 preconditioner factors */
  PKRYLOV_PRECISION_MIXED = 802          /**< fp32 preconditioner factors and operator coefficients */
} pkrylov_precision;

/** When a solve stops converged (pkrylov_solver_set_stop_rule()). */
typedef enum {
  PKRYLOV_STOP_CONFIRMED = 1000, /**< the recurrence residual meets the tolerance and the true residual
                                      b - A x confirms it (the default) */
  PKRYLOV_STOP_RECURRENCE = 1001 /**< the recurrence residual alone, as a model's own CG stops (MITgcm's
                                      CG2D / CG3D: sum r^2 < tol^2) */
} pkrylov_stop_rule;

/** Why a solve stopped. Positive: converged. Negative: did not converge (not an error). */
typedef enum {
  PKRYLOV_REASON_NONE = 0,                  /**< no solve yet */
  PKRYLOV_CONVERGED_RTOL = 1,               /**< ||r|| <= rtol * ||b|| */
  PKRYLOV_CONVERGED_ATOL = 2,               /**< ||r|| <= atol (includes a zero initial residual) */
  PKRYLOV_DIVERGED_MAX_ITERATIONS = -1,     /**< iteration cap reached */
  PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_MATRIX = -2, /**< (p, A p) zero or of changing sign */
  PKRYLOV_DIVERGED_BREAKDOWN_INDEFINITE_PRECOND = -3, /**< (r, M^-1 r) zero or of changing sign */
  PKRYLOV_DIVERGED_NAN = -4,                /**< NaN or Inf appeared in a reduction */
  PKRYLOV_DIVERGED_STAGNATION = -5,         /**< no progress over the stagnation window */
  PKRYLOV_STOPPED_BY_MONITOR = -6,          /**< the monitor callback asked to stop */
  PKRYLOV_DIVERGED_BREAKDOWN_RHO = -7,      /**< BiCGStab: (r0*, r) vanished */
  PKRYLOV_DIVERGED_BREAKDOWN_SHADOW = -8,   /**< BiCGStab: (r0*, A p) vanished */
  PKRYLOV_DIVERGED_BREAKDOWN_OMEGA = -9,    /**< BiCGStab: omega = (t, s)/(t, t) vanished or undefined */
  PKRYLOV_DIVERGED_BREAKDOWN_ORTHOGONALITY = -10 /**< GMRES family: the Krylov basis lost linear
                                                  independence (CholQR Gram matrix not positive definite) */
} pkrylov_reason;
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Opaque handles */
/**@{*/
typedef struct pkrylov_context_s *pkrylov_context;   /**< backend, error state */
typedef struct pkrylov_operator_s *pkrylov_operator; /**< the matrix A (CSR, column stencil, thin shell) */
typedef struct pkrylov_precond_s *pkrylov_precond;   /**< M ~ A, applied as M^-1 */
typedef struct pkrylov_solver_s *pkrylov_solver;     /**< Krylov solver, reused for many right-hand sides */
typedef struct pkrylov_grid_s *pkrylov_grid;         /**< a model's tiles, halos and their connectivity */
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Library and context */
/**@{*/
/** Library version at run time. Any output pointer may be NULL. */
PKRYLOV_EXTERN int pkrylov_get_version(int32_t *major, int32_t *minor, int32_t *patch);
/**
 * 1 when the CUDA backend can be loaded, else 0: built in, and, in a shared build, its plugin
 * libpkrylov_cuda.so found beside libpkrylov.so (or through the loader's path) and loadable (the CUDA
 * runtime present). Whether a driver and a device exist is checked at context creation.
 */
PKRYLOV_EXTERN int32_t pkrylov_has_cuda(void);
/**
 * 1 when the CUDA backend (pkrylov_has_cuda()) was built with NCCL (CUDA and MPI builds that found it:
 * distributed solves on CUDA contexts send their halos and global sums device to device), else 0.
 * pkrylov_has_mpi() is in the MPI section below.
 */
PKRYLOV_EXTERN int32_t pkrylov_has_nccl(void);
/** 1 when the CPU backend was compiled with OpenMP (threads: pkrylov_context_set_num_threads()), else 0. */
PKRYLOV_EXTERN int32_t pkrylov_has_openmp(void);
/** A static, human-readable description of a status code ("unknown status code" for others). */
PKRYLOV_EXTERN const char *pkrylov_error_string(int code);
/** A static name for a ::pkrylov_reason, e.g. "converged_rtol". */
PKRYLOV_EXTERN const char *pkrylov_reason_string(int reason);

/**
 * Create a context on a backend. AUTO resolves to CUDA when the CUDA backend loads (pkrylov_has_cuda())
 * and a device is present, otherwise to CPU, keeping why (pkrylov_context_describe()). Asking for CUDA
 * where it is not available (built without it, its plugin libpkrylov_cuda.so missing or not loadable, no
 * driver, no device) returns ::PKRYLOV_ERR_BACKEND_UNAVAILABLE (the reason is in
 * pkrylov_last_error_message(), since no context exists then).
 * @param[in]  backend  ::pkrylov_backend
 * @param[out] ctx      the new context
 */
PKRYLOV_EXTERN int pkrylov_context_create(int backend, pkrylov_context *ctx);
/** Destroy a context. All objects created from it must be destroyed first. NULL is a no-op. */
PKRYLOV_EXTERN int pkrylov_context_destroy(pkrylov_context *ctx);
/** The backend the context resolved to (CPU or CUDA, never AUTO). */
PKRYLOV_EXTERN int pkrylov_context_get_backend(pkrylov_context ctx, int32_t *backend);
/** Most threads pkrylov_context_set_num_threads() accepts. */
#define PKRYLOV_MAX_THREADS 4096
/**
 * Number of CPU threads the CPU backend's loops use (OpenMP), 1 <= n <= ::PKRYLOV_MAX_THREADS (more is
 * ::PKRYLOV_ERR_INVALID_VALUE naming 'n'); n <= 0 restores the default (pkrylov_context_get_num_threads()
 * says how it is chosen). The results do not depend on it: every sum is added in a fixed order of chunks.
 */
PKRYLOV_EXTERN int pkrylov_context_set_num_threads(pkrylov_context ctx, int32_t n);
/**
 * One line that says what the context runs on, for a model's log: "CPU backend, 8 OpenMP threads" (the
 * threads a call uses now: pkrylov_context_set_num_threads() or OpenMP's default), "CPU backend, 1 thread
 * (built without OpenMP)", or "CUDA backend on NVIDIA H100 80GB HBM3 (device 0 of 4)"; a context with a
 * communicator of several ranks adds ", rank R of N"; a context created with PKRYLOV_BACKEND_AUTO that runs
 * on the CPU adds why, on one line: " (AUTO: no CUDA device is visible)", " (AUTO: the CUDA plugin cannot be
 * loaded: <the loader's message>)", " (AUTO: built without CUDA ...)". Written into buf (buflen bytes, always
 * NUL-terminated, cut to fit). ::PKRYLOV_ERR_NULL_POINTER for a NULL ctx or buf, ::PKRYLOV_ERR_INVALID_SIZE
 * for buflen <= 0.
 */
PKRYLOV_EXTERN int pkrylov_context_describe(pkrylov_context ctx, char *buf, int32_t buflen);
/**
 * The number of CPU threads the context's loops use now: the count set with
 * pkrylov_context_set_num_threads(), or the default, which never oversubscribes the cores:
 * - without a communicator, the cores available to the process: the CPUs of its affinity mask
 *   (sched_getaffinity; with OpenMP thread binding on, OMP_PROC_BIND, the union of the runtime's places),
 *   taken when the context is created;
 * - on a context with a communicator (taken by pkrylov_context_set_comm()), those cores divided by the
 *   number of ranks of the communicator on this node that share them (MPI_Comm_split_type
 *   MPI_COMM_TYPE_SHARED; the ranks whose affinity masks overlap this rank's: all of the node's when the
 *   ranks are not bound, this one only when each is bound to cores of its own), at least 1;
 * - either capped by the number of threads OpenMP would use (omp_get_max_threads(): OMP_NUM_THREADS or
 *   omp_set_num_threads() when the program set them);
 * - 1 when called from inside an active OpenMP parallel region of the caller (its threads hold the cores).
 * Loops over fewer values than the library's threshold run on one thread whatever the count (a parallel
 * region costs more than it saves there), and a solver on the default count runs on one thread while it
 * measures one thread faster (on a node where other processes hold the cores: docs/design.md, "Threads").
 * Without OpenMP: 1.
 * @param[out] n  the count
 */
PKRYLOV_EXTERN int pkrylov_context_get_num_threads(pkrylov_context ctx, int32_t *n);
/**
 * Last error raised through this context: its code and message. The message is valid until the next
 * call on the context. Both outputs may be NULL. A context with no error gives ::PKRYLOV_SUCCESS and "".
 */
PKRYLOV_EXTERN int pkrylov_context_get_last_error(pkrylov_context ctx, int32_t *code, const char **message);
/** Copy the last error message into buf (length buflen, always NUL-terminated); for Fortran. */
PKRYLOV_EXTERN int pkrylov_context_get_error_message(pkrylov_context ctx, char *buf, int32_t buflen);
/** Forget the last error of the context. */
PKRYLOV_EXTERN int pkrylov_context_clear_error(pkrylov_context ctx);
/**
 * Message of the last error raised on this thread by a call that had no context to store it in
 * (pkrylov_context_create(), calls given a NULL handle). "" when there is none.
 */
PKRYLOV_EXTERN const char *pkrylov_last_error_message(void);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Options
 * Tuning and measurement switches, set by name with a string value: `pkrylov_context_set_option(ctx,
 * "cuda.csr_format", "dia")`. One table in the library lists them (pkrylov_option_count(),
 * pkrylov_option_describe(); `pkrylov-solve -o help`). Each option has a type (a flag: 0/1, on/off,
 * true/false, yes/no; an integer in a range, some with the keyword auto; one of a list of names), a
 * level and a default:
 * - context-level options belong to the context: those of the CUDA operators (cuda.csr_format,
 *   cuda.csr_lanes, cuda.kc, cuda.l2pf) are read when an operator is created, cuda.bind by
 *   pkrylov_context_set_comm(), the dist.* ones at each distributed solve or product;
 * - solver-level options are copied from the context into a solver when it is created and may then be
 *   changed on the solver (pkrylov_solver_set_option()); they are read at each solve.
 *
 * The environment variable `PKRYLOV_OPTIONS` (whitespace-separated key=value pairs, the syntax of
 * pkrylov_context_set_options()) is read once, by pkrylov_context_create(), after the defaults; calls
 * made later override it. It is the only environment variable the library reads. Options marked
 * collective (those that choose a communication path: dist.*) must be the same on every rank of a
 * communicator: pkrylov_context_set_comm() and every distributed solve or product compare them, and a
 * difference is ::PKRYLOV_ERR_BAD_OPTION on every rank, naming the option and the values.
 *
 * Options never change what a solve computes beyond rounding (most of them give bitwise the same
 * results); they choose storage formats, kernels and launch paths. A CPU build accepts and stores the
 * CUDA ones too (they then do nothing).
 */
/**@{*/
/**
 * Set one option of the context. name: an option's name (e.g. "cuda.kc"); value: its text ("64", "auto",
 * "off"...). An unknown name or a value the option does not accept is ::PKRYLOV_ERR_BAD_OPTION with a
 * message that names the option and what it accepts; the options are then unchanged. Solver-level options
 * set here apply to solvers created afterwards; operator options to operators created afterwards.
 * Set options before other threads use the context.
 */
PKRYLOV_EXTERN int pkrylov_context_set_option(pkrylov_context ctx, const char *name, const char *value);
/**
 * Set several options of the context from a string of whitespace-separated key=value pairs, e.g.
 * "cuda.csr_format=dia kry.graph=0" (the syntax of the environment variable PKRYLOV_OPTIONS), in order.
 * A pair without '=', an unknown name or a bad value is ::PKRYLOV_ERR_BAD_OPTION and none of the pairs is
 * applied. NULL or "" changes nothing.
 */
PKRYLOV_EXTERN int pkrylov_context_set_options(pkrylov_context ctx, const char *options);
/**
 * The value of one option of the context as text (the form pkrylov_context_set_option() accepts: "1", "0",
 * "auto", a number or a name), written into buf (buflen bytes, always NUL-terminated, cut to fit).
 * ::PKRYLOV_ERR_BAD_OPTION for an unknown name, ::PKRYLOV_ERR_INVALID_SIZE for buflen <= 0.
 */
PKRYLOV_EXTERN int pkrylov_context_get_option(pkrylov_context ctx, const char *name, char *buf, int32_t buflen);
/**
 * Set one solver-level option of a solver (its copy, taken from the context when the solver was created).
 * A context-level option is ::PKRYLOV_ERR_BAD_OPTION naming it (set it on the context); unknown names and
 * bad values as pkrylov_context_set_option(). Read at the next solve.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_option(pkrylov_solver s, const char *name, const char *value);
/**
 * The value of one option as the solver sees it: its own copy for solver-level options, the context's for
 * context-level ones (text as pkrylov_context_get_option()).
 */
PKRYLOV_EXTERN int pkrylov_solver_get_option(pkrylov_solver s, const char *name, char *buf, int32_t buflen);
/** The number of options the library knows (the lines of pkrylov_option_describe()). */
PKRYLOV_EXTERN int32_t pkrylov_option_count(void);
/**
 * One line describing option i (0 <= i < pkrylov_option_count()), for a listing such as `pkrylov-solve -o
 * help`: the name, the values it accepts, its level (", collective" for the collective ones), its default and
 * one line of help, e.g. "cuda.l2pf        an integer 0..16; context level; default 1. L2 prefetch
 * distance ...". Written into buf (buflen bytes, always NUL-terminated, cut to fit). i out of range
 * ::PKRYLOV_ERR_INDEX_OUT_OF_RANGE.
 */
PKRYLOV_EXTERN int pkrylov_option_describe(int32_t i, char *buf, int32_t buflen);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Operators */
/**@{*/
/**
 * Square CSR matrix from host arrays with 32-bit indices (copied; the caller keeps ownership).
 * Within a row the column indices may come in any order (the library sorts its copy); a repeated
 * (row, column) is rejected with ::PKRYLOV_ERR_DUPLICATE_ENTRY. Explicit zeros are kept.
 * @param[in] n           number of rows and columns, > 0
 * @param[in] index_base  0 (C) or 1 (Fortran) for both rowptr and colind
 * @param[in] rowptr      host, n+1 entries, rowptr[0] == index_base, non-decreasing
 * @param[in] colind      host, nnz = rowptr[n] - index_base entries, each in [index_base, n + index_base)
 * @param[in] values      host, nnz finite values
 */
PKRYLOV_EXTERN int pkrylov_operator_create_csr(pkrylov_context ctx, int32_t n, int32_t index_base,
                                               const int32_t *rowptr, const int32_t *colind,
                                               const double *values, pkrylov_operator *A);
/** As pkrylov_operator_create_csr() with 64-bit indices, for n or nnz beyond 2^31-1. */
PKRYLOV_EXTERN int pkrylov_operator_create_csr64(pkrylov_context ctx, int64_t n, int32_t index_base,
                                                 const int64_t *rowptr, const int64_t *colind,
                                                 const double *values, pkrylov_operator *A);

/**
 * The 7-point column stencil models store (MITgcm aW/aS/aV/aC face convention) on an nx x ny x nz grid,
 * cell (i,j,k) at index i + nx*(j + ny*k) (Fortran a(nx,ny,nz)), all arrays host, nx*ny*nz values:
 *
 *     (A x)(i,j,k) = aC(i,j,k) x(i,j,k)
 *                  + aW(i,j,k) x(i-1,j,k) + aW(i+1,j,k) x(i+1,j,k)
 *                  + aS(i,j,k) x(i,j-1,k) + aS(i,j+1,k) x(i,j+1,k)
 *                  + aV(i,j,k) x(i,j,k-1) + aV(i,j,k+1) x(i,j,k+1)
 *
 * so A is symmetric by construction. aW(0,j,k), aS(i,0,k) and aV(i,j,0) couple to cells outside the grid
 * and are ignored. Optional mask (host, nx*ny*nz, NULL = all wet): a cell with mask 0 is dry; every
 * coupling to or from it is dropped and its row is zero. The solvers ignore b at dry cells and leave x
 * there at its initial value; the column preconditioner treats dry cells as identity rows.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_stencil7(pkrylov_context ctx, int32_t nx, int32_t ny,
                                                    int32_t nz, const double *aW, const double *aS,
                                                    const double *aV, const double *aC,
                                                    const int32_t *mask, pkrylov_operator *A);

/** Parameters of the thin-shell model problem (docs/model-problem.md). */
typedef struct {
  double H;         /**< shell thickness in Earth radii, > 0 (default 0.01) */
  double lambda;    /**< vertical/horizontal scaling, > 0 (default 1) */
  double nu;        /**< Courant-like number: omega = nu * (pi/2)/nx, > 0 (default 10) */
  int32_t nx, ny, nz; /**< grid, each >= 1 */
  int32_t geometry; /**< ::pkrylov_geometry (default gnomonic) */
} pkrylov_thinshell_params;

/** Fill p with the defaults for an nx x ny x nz grid. */
PKRYLOV_EXTERN int pkrylov_thinshell_params_default(int32_t nx, int32_t ny, int32_t nz,
                                                    pkrylov_thinshell_params *p);
/**
 * The tensor-product thin-shell operator, matrix-free: stores four level vectors (a, b, c, d) and
 * per-column scalars (cell area and face weights) only, and recomputes the stencil on the fly.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_thinshell(pkrylov_context ctx,
                                                     const pkrylov_thinshell_params *p,
                                                     pkrylov_operator *A);
/**
 * A nonsymmetric convection-diffusion test operator with column structure, as CSR: -div(D grad u) +
 * w . grad u on an nx x ny x nz grid of unit cells in the k-slow layout (index i + nx*(j + ny*k)),
 * D = diag(1, 1, aniso) (vertical coupling aniso times the horizontal one), Dirichlet walls, 7-point
 * stencil with first-order upwind convection: A[c][c] = 2 (2 + aniso) + |wx| + |wy| + |wz|, the x
 * neighbours -1 - max(wx, 0) (i-1) and -1 - max(-wx, 0) (i+1), y alike with wy, z with aniso and wz. An
 * M-matrix (nonsingular) for any wind; nonsymmetric when wind != 0, with nonsymmetric vertical columns
 * when wind[2] != 0 (the column preconditioner then factors them with dgttrf). Errors: nx, ny, nz < 1 or
 * too many cells ::PKRYLOV_ERR_INVALID_SIZE; a non-finite wind or aniso ::PKRYLOV_ERR_NOT_FINITE;
 * aniso <= 0 ::PKRYLOV_ERR_INVALID_VALUE; wind (3 values) NULL ::PKRYLOV_ERR_NULL_POINTER.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_convdiff(pkrylov_context ctx, int32_t nx, int32_t ny, int32_t nz,
                                                   const double wind[3], double aniso,
                                                   pkrylov_operator *A);
/**
 * The thin-shell matrix as column-stencil face coefficients (host arrays of nx*ny*nz values each), so
 * that pkrylov_operator_create_stencil7() with them gives the same A.
 */
PKRYLOV_EXTERN int pkrylov_thinshell_stencil_coefficients(const pkrylov_thinshell_params *p,
                                                          double *aW, double *aS, double *aV,
                                                          double *aC);

/**
 * The 2-D free-surface (barotropic) model problem of docs/model-problem.md as MITgcm's cg2d stores it: a global
 * ocean on an nx x ny longitude-latitude grid (longitudes [0, 360), latitudes [-80, 80]) with three continents
 * and a polar cap (mask 0 = land), 4000 m deep with a 500 m shelf along the coasts, aW = g dt^2 H_w dyG/dxC,
 * aS = g dt^2 H_s dxG/dyC, aC = -(the four couplings) - the cell area (the implicit free surface), dt = 1200 s,
 * all divided by the largest magnitude (cg2dNorm). Index i + nx*j; aW(i,j) couples (i-1,j) and (i,j) (at
 * i = 0 the wrap when periodic in x, else 0), aS likewise. Negative definite. Arrays host, nx*ny each, written.
 * Errors (no context): nx, ny < 4 ::PKRYLOV_ERR_INVALID_SIZE, a bad periodic ::PKRYLOV_ERR_INVALID_VALUE, NULL.
 */
PKRYLOV_EXTERN int pkrylov_barotropic_coefficients(int32_t nx, int32_t ny, int32_t periodic, double *aW,
                                                   double *aS, double *aC, int32_t *mask);
/**
 * The thin-shell model problem on the six faces of the cube sphere (docs/model-problem.md), p->nx = p->ny = N
 * columns per face edge, p->nz levels, gnomonic geometry: per face the panel of the one-face problem, the
 * faces joined as pkrylov_grid_connect_cubesphere() says (a closed surface: every column has four
 * neighbours), alpha = (great-circle length of the shared edge) / (great-circle distance of the centres)
 * computed in 3-D for every face. Column-stencil coefficients in the global order i + N*(j + N*(f + 6*k)) (f the
 * face), 6 N^2 nz values each: aW / aS the coupling of the cell's west / south face (across a cube edge too),
 * aV to the level below (0 at k = 0), aC the diagonal. SPD.
 */
PKRYLOV_EXTERN int pkrylov_cubesphere_stencil_coefficients(const pkrylov_thinshell_params *p, double *aW,
                                                           double *aS, double *aV, double *aC);

/**
 * Read a square sparse matrix from a Matrix Market file ("coordinate", real/integer/pattern, general or
 * symmetric) into a CSR operator. A malformed file is ::PKRYLOV_ERR_FILE_FORMAT with "PATH:LINE:" in the
 * message; so is a size line whose entry count cannot give every row an entry (NNZ < M, or NNZ < M/2 in a
 * symmetric file), refused before anything of size M is allocated.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_from_mtx(pkrylov_context ctx, const char *path,
                                                    pkrylov_operator *A);

/** Destroy an operator (NULL is a no-op). Preconditioners and solvers using it must be destroyed first. */
PKRYLOV_EXTERN int pkrylov_operator_destroy(pkrylov_operator *A);

/**
 * Size, stored nonzeros of the equivalent CSR matrix (-1 for a user operator, which has none), kind
 * (::pkrylov_operator_type) and grid (nx, ny, nz; 0 for CSR and user operators). Any output may be NULL.
 */
PKRYLOV_EXTERN int pkrylov_operator_get_info(pkrylov_operator A, int64_t *n, int64_t *nnz,
                                             int32_t *type, int32_t *nx, int32_t *ny, int32_t *nz);
/** y = A x. x and y in the memory space mem, n values each, distinct. */
PKRYLOV_EXTERN int pkrylov_operator_apply(pkrylov_operator A, int32_t mem, const double *x, double *y);
/**
 * The operator as a 0-based CSR matrix with sorted columns, into host arrays the caller allocated:
 * rowptr n+1, colind and values nnz (pkrylov_operator_get_info()). Stencil forms list the entries of
 * the couplings that exist (lateral and vertical boundaries and dry cells drop out). A user operator has no
 * CSR form (::PKRYLOV_ERR_UNSUPPORTED).
 */
PKRYLOV_EXTERN int pkrylov_operator_get_csr(pkrylov_operator A, int64_t *rowptr, int64_t *colind,
                                            double *values);
/** Write the operator to a Matrix Market file (coordinate real general, 1-based, 17 digits). */
PKRYLOV_EXTERN int pkrylov_operator_write_mtx(pkrylov_operator A, const char *path);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Matrix Market vectors */
/**@{*/
/**
 * Read a vector from a Matrix Market file ("array real/integer general" with one column, or
 * "coordinate" with one column; missing coordinate entries are zero). With v == NULL only the length is
 * returned in *n; otherwise capacity must be at least the length (::PKRYLOV_ERR_SIZE_MISMATCH if not).
 * The context receives the error message (naming the line for malformed files); ctx may be NULL.
 */
PKRYLOV_EXTERN int pkrylov_mtx_read_vector(pkrylov_context ctx, const char *path, int64_t capacity,
                                           double *v, int64_t *n);
/** Write a host vector of n values as a Matrix Market "array real general" file (17 digits). */
PKRYLOV_EXTERN int pkrylov_mtx_write_vector(pkrylov_context ctx, const char *path, int64_t n,
                                            const double *v);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Preconditioners */
/**@{*/
/**
 * Create and set up (factorise) a preconditioner for A; later changes to the caller's arrays do not
 * affect it.
 * - NONE: identity. JACOBI: 1/diag(A); a zero diagonal entry is ::PKRYLOV_ERR_SINGULAR.
 * - COLUMN: block Jacobi over vertical columns: each column's tridiagonal part of A (its diagonal and its
 *   couplings to the levels above and below) is factorised once (LAPACK dpttrf for symmetric definite
 *   columns, dgttrf otherwise) and solved exactly at every application. Column-stencil and thin-shell
 *   operators give levels and layout themselves (pass levels 0 or nz, layout AUTO or KSLOW). A CSR
 *   operator needs levels (> 0, dividing n) and the layout (KSLOW or KFAST); entries outside the tridiagonal
 *   are ignored. A column whose row in the tridiagonal is entirely zero (a dry cell) gets an identity row.
 * - JACOBI and COLUMN need the entries of A: on a user operator (pkrylov_operator_create_user()) they are
 *   ::PKRYLOV_ERR_UNSUPPORTED; pass a user preconditioner (pkrylov_precond_create_user()) instead. USER is
 *   not a valid type here.
 * @param[in] levels  number of vertical levels nz (COLUMN only; 0 = from the operator)
 * @param[in] layout  ::pkrylov_layout (COLUMN only)
 */
PKRYLOV_EXTERN int pkrylov_precond_create(pkrylov_context ctx, pkrylov_operator A, int32_t type,
                                          int32_t levels, int32_t layout, pkrylov_precond *M);
/**
 * A COLUMN preconditioner from the caller's own factors of each column's tridiagonal, as MITgcm's
 * ini_cg3d stores them (no factorisation here): for the tridiagonal with diagonal a_k and coupling b_k
 * between levels k and k+1, zmc[cell(k)] = 1/den_k with den_0 = a_0, den_k = a_k - b_{k-1} zmu[cell(k-1)],
 * and zmu[cell(k)] = b_k zmc[cell(k)] (0 at the last level of a column: it is not used). Applied as
 * M^-1 = (L D L^T)^-1 with D = diag(den), L(k+1,k) = zmu[cell(k)], exactly the inverse of the column's
 * tridiagonal when it is symmetric (either sign). Host arrays of n values in the cell order of the layout;
 * levels and layout as for ::PKRYLOV_PRECOND_COLUMN in pkrylov_precond_create() (on a user operator:
 * levels > 0 and KSLOW or KFAST, as for CSR). Dry cells: the factors are used as given (zmc = 1 and
 * zmu = 0 there give identity rows). The values are copied. A NaN or Inf is ::PKRYLOV_ERR_NOT_FINITE and
 * a zero zmc ::PKRYLOV_ERR_SINGULAR, the message naming the array and the cell. pkrylov_precond_get_info()
 * reports type COLUMN.
 * @param[in] zmc  1/den per cell, n values
 * @param[in] zmu  coupling to the next level times zmc, per cell, n values
 */
PKRYLOV_EXTERN int pkrylov_precond_create_column_factors(pkrylov_context ctx, pkrylov_operator A,
                                                         int32_t levels, int32_t layout, const double *zmc,
                                                         const double *zmu, pkrylov_precond *M);
/** z = M^-1 r, n values each, in memory space mem. */
PKRYLOV_EXTERN int pkrylov_precond_apply(pkrylov_precond M, int32_t mem, const double *r, double *z);
/** Type (::pkrylov_precond_type), levels and layout actually used; outputs may be NULL. */
PKRYLOV_EXTERN int pkrylov_precond_get_info(pkrylov_precond M, int32_t *type, int32_t *levels,
                                            int32_t *layout);
/** Destroy a preconditioner (NULL is a no-op). */
PKRYLOV_EXTERN int pkrylov_precond_destroy(pkrylov_precond *M);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name User callbacks: the caller's own matrix-vector product and preconditioner
 *
 * For models that keep their operator and preconditioner as routines (a PCG that takes matvec/precond
 * arguments). The library calls the routine whenever it needs A x or M^-1 r, with host arrays of the full
 * length n, from the thread that called pkrylov_solver_solve() and outside any OpenMP parallel region (the
 * routine may use OpenMP itself). x and y are distinct arrays; the routine must not keep pointers to them.
 * Return 0 on success; a nonzero return aborts: the solve (or pkrylov_operator_apply(),
 * pkrylov_precond_apply()) returns ::PKRYLOV_ERR_CALLBACK, the message gives the value returned, and the
 * solve gives x back as it came (the output of an apply call is then filled with NaN).
 * On a CUDA context the routine gets DEVICE pointers (n doubles each in GPU memory: the solver's own work
 * vectors, also in pkrylov_operator_apply() / pkrylov_precond_apply() with host arrays, which are copied
 * to the device first), as a model's OpenACC (`deviceptr`) or CUDA Fortran code applies its operator on
 * device arrays. The library has synchronised its stream before the call and waits for the whole device
 * (cudaDeviceSynchronize) after it, so the routine may leave its kernels queued on any stream. A solve with a user operator or
 * preconditioner on CUDA runs one iteration at a time (no CUDA graph: the host calls the routine between
 * the kernels). A user operator has no matrix entries:
 * pkrylov_operator_get_info() reports nnz = -1, pkrylov_operator_get_csr() and pkrylov_operator_write_mtx()
 * answer ::PKRYLOV_ERR_UNSUPPORTED, and the JACOBI and COLUMN preconditioners cannot be built on it
 * (::PKRYLOV_ERR_UNSUPPORTED; pass a user preconditioner, its own column factors, or none). A user preconditioner works with any operator kind.
 */
/**@{*/
/**
 * y = A x (operator) or y = M^-1 x (preconditioner), n values each, host memory (device memory on a CUDA
 * context). user is the pointer given at creation (the model's own data). Return 0 on success, nonzero to
 * abort the solve.
 */
typedef int (*pkrylov_apply_fn)(void *user, int64_t n, const double *x, double *y);

/**
 * An operator of size n applied by the caller's routine (type ::PKRYLOV_OPERATOR_USER). The library keeps
 * apply and user (it does not own user) and a work vector of n values.
 * @param[in] n      number of unknowns, > 0
 * @param[in] apply  y = A x, not NULL
 * @param[in] user   passed to apply unchanged; may be NULL
 */
PKRYLOV_EXTERN int pkrylov_operator_create_user(pkrylov_context ctx, int64_t n, pkrylov_apply_fn apply,
                                                void *user, pkrylov_operator *A);
/**
 * A preconditioner of size n applied by the caller's routine, y = M^-1 x (type ::PKRYLOV_PRECOND_USER;
 * pkrylov_precond_get_info() reports levels 1 and layout KSLOW). For CG and pipelined CG, M^-1 must be
 * symmetric and definite (of one sign).
 * @param[in] n      number of unknowns, > 0 (must match the operator's size in pkrylov_solver_create())
 * @param[in] apply  y = M^-1 x, not NULL
 * @param[in] user   passed to apply unchanged; may be NULL
 */
PKRYLOV_EXTERN int pkrylov_precond_create_user(pkrylov_context ctx, int64_t n, pkrylov_apply_fn apply,
                                               void *user, pkrylov_precond *M);

/**
 * Halo exchange of width one for pkrylov_operator_create_stencil7_exchange(): xh holds
 * (nx+2) x (ny+2) x nz values, cell (i,j,k) for i in -1..nx, j in -1..ny at index
 * (i+1) + (nx+2)*((j+1) + (ny+2)*k) (Fortran xh(0:nx+1, 0:ny+1, nz)). The library has filled the interior
 * and set the halo to 0; the routine fills the halo cells (i = -1 or nx, or j = -1 or ny) the way the
 * model's own exchange does: periodic wrap, the neighbouring tiles over MPI; at a wall leave 0 (the
 * corners are never read). user is the pointer given at creation. Return 0 on success, nonzero aborts.
 * On a CUDA context xh is DEVICE memory (the operator's work array on the GPU, same layout): the library
 * has synchronised its stream before the call, and the routine must have finished writing the halo when
 * it returns (synchronise the stream or queue it used), as for the user callbacks; a CUDA-aware MPI
 * exchange, an OpenACC `deviceptr` / CUDA Fortran `device` kernel or cudaMemcpy2D work on it directly.
 */
typedef int (*pkrylov_halo_fn)(void *user, int32_t nx, int32_t ny, int32_t nz, double *xh);

/**
 * The column stencil of pkrylov_operator_create_stencil7() on one tile of a model that owns its tiles,
 * MPI and grid topology: the couplings across the tile edges are KEPT and the neighbour values come from
 * the caller's halo exchange. With x(-1,j,k), x(nx,j,k), x(i,-1,k), x(i,ny,k) the halo values:
 *
 *     (A x)(i,j,k) = aC x(i,j,k) + aW(i,j,k) x(i-1,j,k) + aWe(i,j,k) x(i+1,j,k)
 *                  + aS(i,j,k) x(i,j-1,k) + aSn(i,j,k) x(i,j+1,k)
 *                  + aV(i,j,k) x(i,j,k-1) + aV(i,j,k+1) x(i,j,k+1)
 *
 * where aWe(i) = aW(i+1) and aSn(j) = aS(j+1) inside the tile, aW(0,j,k) and aS(i,0,k) couple to the west
 * and south halo, and the east face of the last cell and the north face of the last row take the
 * neighbour tile's coefficients from aW_east (ny x nz values, index j + ny*k: the face between (nx-1,j,k)
 * and its east neighbour) and aS_north (nx x nz, index i + nx*k: the face between (i,ny-1,k) and its north
 * neighbour); NULL means 0 (a wall). MITgcm passes aW3d(sNx+1,:,:) and aS3d(:,sNy+1,:) of its halo'ed
 * arrays. The vertical couplings never cross a tile (aV(i,j,0) is ignored).
 *
 * Mask (may be NULL): as in pkrylov_operator_create_stencil7() inside the tile (a dry cell has a zero row;
 * couplings between a wet and a dry cell of the tile are dropped), and a dry cell's couplings to the halo
 * are dropped. Halo cells themselves are not masked: where the neighbour tile's cell is dry, pass a zero
 * coefficient in aW/aS at the edge, aW_east or aS_north (MITgcm's masked coefficients are) or let the
 * exchange deliver 0 there.
 *
 * Apply (pkrylov_operator_apply() and every product inside a solve): x is copied into a halo'ed work array
 * held by the operator, exchange fills the halo (called once per product, on the whole vector, from the
 * thread that called the solve, outside any OpenMP parallel region), then the 7-point loop runs. A nonzero
 * return from exchange is handled as a failing user routine (::PKRYLOV_ERR_CALLBACK, see
 * pkrylov_operator_create_user()). pkrylov_operator_get_info() reports ::PKRYLOV_OPERATOR_STENCIL7 with
 * nnz = -1: the entries across the tile edges are the caller's, so there is no CSR form
 * (pkrylov_operator_get_csr() and pkrylov_operator_write_mtx() answer ::PKRYLOV_ERR_UNSUPPORTED). The
 * JACOBI and COLUMN preconditioners work (the diagonal and the vertical tridiagonal never involve the
 * halo). On a CUDA context the product runs on the GPU (the halo'ed work array, the stencil and the edge
 * couplings are kernels; A x is bitwise the CPU's) and exchange gets the device pointer of the halo'ed
 * array; a solve then runs one iteration at a time, as with a user operator (no CUDA graph: the host calls
 * exchange between the kernels). Every solver type works with it on both backends (CG and pipelined CG,
 * the BiCGStab and GMRES families: each operator product and each residual calls exchange once), also on a
 * context with a communicator, where exchange does the communication with the neighbour tiles and the
 * solver's sums are global.
 * @param[in] aW_east   host, ny*nz values, or NULL (east wall)
 * @param[in] aS_north  host, nx*nz values, or NULL (north wall)
 * @param[in] exchange  fills the halo, not NULL
 * @param[in] user      passed to exchange unchanged; may be NULL
 */
PKRYLOV_EXTERN int pkrylov_operator_create_stencil7_exchange(pkrylov_context ctx, int32_t nx, int32_t ny,
                                                             int32_t nz, const double *aW, const double *aS,
                                                             const double *aV, const double *aC,
                                                             const int32_t *mask, const double *aW_east,
                                                             const double *aS_north, pkrylov_halo_fn exchange,
                                                             void *user, pkrylov_operator *A);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name Tiled grids: the model's own decomposition, connectivity and halo'd arrays
 *
 * Models cut the horizontal grid into tiles of sNx x sNy columns, own several tiles per process, and store a
 * field of nz levels in one halo'd multi-tile array, Fortran a(1-OLx:sNx+OLx, 1-OLy:sNy+OLy, nz, nTiles)
 * (i fastest, then j, the level k, then the tile; MITgcm's (..., nSx, nSy) is the same memory with the tile
 * index bi + nSx*(bj-1)). Every tile edge meets an edge of another tile (on this or another process, maybe
 * rotated, as on the cube sphere) or is a wall. A ::pkrylov_grid describes that once: operators built on it
 * (pkrylov_operator_create_grid_stencil()) take the model's coefficient arrays as they are, and
 * pkrylov_solver_solve_halo() solves with the model's halo'd right-hand side and solution. The library owns
 * the halo exchange (width one, corners unused): neighbour values on the same rank are read in place,
 * those of tiles on other ranks travel over the context's communicator once per product, overlapped with
 * the columns that need none. A grid is for every nz: the 2-D (nz = 1) and the 3-D solve of a model share
 * one.
 *
 * Edges (values in the connectivity table, 0-based as everything in C): 0 west (i = 0, Fortran i = 1),
 * 1 east (i = sNx-1), 2 south (j = 0), 3 north (j = sNy-1). The position along an edge is j on the west and
 * east edges, i on the south and north ones. The connectivity table `conn` holds 3 int32 per tile edge,
 * for every tile of the whole grid: conn[3*(4*t + e) + 0] the tile that edge e of tile t meets (-1: a
 * wall; then the other two are ignored), [+1] the edge of that tile it meets, [+2] 1 when the positions
 * along the two edges run in opposite directions (position m on one is position L-1-m on the other, L the
 * edge length), else 0. It must be symmetric (if edge e of t meets edge e2 of t2, edge e2 of t2 meets edge
 * e of t with the same flag), join edges of the same length, and join no edge to itself.
 * pkrylov_grid_connect_rect() and pkrylov_grid_connect_cubesphere() fill it for the usual topologies.
 *
 * The compact order. Internally, and wherever a call takes a plain vector (pkrylov_solver_solve(),
 * pkrylov_operator_apply(), ...), a grid operator of nz levels works on the rank's interior cells only, in
 * the k-slow order of an sNx x (sNy * nlocal) x nz grid whose rows stack the local tiles:
 * cell (i, j, k) of local tile t (0-based, in the order of the arrays' tile index) is at
 * i + sNx*(j + sNy*(t + nlocal*k)). pkrylov_grid_pack() and pkrylov_grid_unpack() convert.
 */
/**@{*/
/** Periodic directions of pkrylov_grid_connect_rect(). */
typedef enum {
  PKRYLOV_PERIODIC_NONE = 1100,
  PKRYLOV_PERIODIC_X = 1101, /**< the west edges of the first column of tiles meet the east edges of the last */
  PKRYLOV_PERIODIC_Y = 1102, /**< the south edges of the first row of tiles meet the north edges of the last */
  PKRYLOV_PERIODIC_XY = 1103 /**< both (doubly periodic: MITgcm's default domain) */
} pkrylov_periodic;

/**
 * The connectivity table of ntx x nty tiles forming one rectangle (tile (tx, ty) numbered tx + ntx*ty), with
 * walls around it or periodic in x and/or y (::pkrylov_periodic). conn: 12 * ntx * nty int32, written.
 * Errors (no context: pkrylov_last_error_message()): ntx, nty < 1 ::PKRYLOV_ERR_INVALID_SIZE, a bad periodic
 * ::PKRYLOV_ERR_INVALID_VALUE, conn NULL ::PKRYLOV_ERR_NULL_POINTER.
 */
PKRYLOV_EXTERN int pkrylov_grid_connect_rect(int32_t ntx, int32_t nty, int32_t periodic, int32_t *conn);
/**
 * The connectivity table of the six-face cube sphere, each face cut into nf x nf tiles (square tiles: the
 * face edges that meet rotated join a tile's west or east edge with another's south or north edge), in
 * MITgcm's exch2 layout: tile (tx, ty) of face f (0..5) is tile f*nf*nf + tx + nf*ty; faces 0, 1, 3, 4 ring
 * the equator, 2 and 5 hold the poles, and the face edges meet as: face 0 W-4N E-1W S-5N N-2W; 1 W-0E E-3S
 * S-5E N-2S; 2 W-0N E-3W S-1N N-4W; 3 W-2E E-5S S-1E N-4S; 4 W-2N E-5W S-3N N-0W; 5 W-4E E-1S S-3E N-0S
 * (edge X of face f meets edge Y of face g; a W-N or E-S join runs its positions in opposite directions).
 * conn: 12 * 6 * nf * nf int32, written. Errors as for pkrylov_grid_connect_rect().
 */
PKRYLOV_EXTERN int pkrylov_grid_connect_cubesphere(int32_t nf, int32_t *conn);
/**
 * A tiled grid on the context's ranks: tiles of snx x sny columns with halos of olx, oly (>= 1: the
 * widths of the model's arrays), ntiles tiles in all connected by conn (3 * 4 * ntiles int32, see above; the
 * same table on every rank), of which this rank owns nlocal >= 1, the global numbers tiles[0 .. nlocal) in
 * the order of the arrays' tile index. Collective over the context's communicator (one rank without one).
 * Checked on every rank, with the same error and message everywhere: snx, sny, olx, oly and ntiles equal on
 * all ranks (::PKRYLOV_ERR_SIZE_MISMATCH otherwise, as for two joined edges of different lengths); sizes
 * < 1 and a halo width 0 ::PKRYLOV_ERR_INVALID_SIZE; a neighbour tile or edge out of range, or a tile number
 * out of range ::PKRYLOV_ERR_INDEX_OUT_OF_RANGE; a table that differs between the ranks, is not symmetric
 * or joins an edge to itself, a tile owned twice or by no rank, a rank with no tile ::PKRYLOV_ERR_TOPOLOGY.
 * Builds the exchange plan once (which neighbour cell each tile-edge cell reads: a column of a local tile,
 * a wall, or a slot of the halo received from another rank).
 */
PKRYLOV_EXTERN int pkrylov_grid_create(pkrylov_context ctx, int32_t snx, int32_t sny, int32_t olx, int32_t oly,
                                       int32_t ntiles, const int32_t *conn, int32_t nlocal,
                                       const int32_t *tiles, pkrylov_grid *g);
/** Destroy a grid (NULL is a no-op). Operators built on it must be destroyed first. */
PKRYLOV_EXTERN int pkrylov_grid_destroy(pkrylov_grid *g);
/** Tile size, halo widths, tiles in all and on this rank. Outputs may be NULL. */
PKRYLOV_EXTERN int pkrylov_grid_get_info(pkrylov_grid g, int32_t *snx, int32_t *sny, int32_t *olx, int32_t *oly,
                                         int32_t *ntiles, int32_t *nlocal);
/**
 * Copy the interior of a halo'd multi-tile array of nz levels (halo: (snx + 2 olx)(sny + 2 oly) nz nlocal
 * values) into the compact order (compact: snx sny nlocal nz values), or back (pkrylov_grid_unpack(): the
 * halo cells of `halo` are not written). Both arrays in memory space mem (device arrays on a CUDA context).
 */
PKRYLOV_EXTERN int pkrylov_grid_pack(pkrylov_grid g, int32_t nz, int32_t mem, const double *halo,
                                     double *compact);
PKRYLOV_EXTERN int pkrylov_grid_unpack(pkrylov_grid g, int32_t nz, int32_t mem, const double *compact,
                                       double *halo);
/**
 * The 7-point column stencil (nz levels) or, with nz = 1, the 5-point operator of the models' 2-D
 * free-surface solve, on grid g, from the model's halo'd multi-tile arrays (host, halo layout as above):
 *
 *     (A x)(i,j,k) = aC x(i,j,k) + aW(i,j,k) x(i-1,j,k) + aW(i+1,j,k) x(i+1,j,k) + aS(i,j,k) x(i,j-1,k)
 *                  + aS(i,j+1,k) x(i,j+1,k) + aV(i,j,k) x(i,j,k-1) + aV(i,j,k+1) x(i,j,k+1)
 *
 * (MITgcm's aW3d/aS3d/aV3d/aC3d, aW2d/aS2d/aC2d; aV may be NULL when nz = 1). A neighbour across a tile
 * edge is the cell the connectivity names. Each face stores its coupling on the cell whose west or south face
 * it is, so the coupling across a tile edge is taken from the tile whose west or south edge it is (aW at
 * i = 0, aS at j = 0 of that tile; the library fetches it from the rank that owns it), where two east or
 * two north edges meet (a 180-degree turn) from the halo (aW at i = sNx, aS at j = sNy) of either tile,
 * where two west or two south edges meet from either tile's edge; in the last two cases the two tiles'
 * values must be equal (::PKRYLOV_ERR_TOPOLOGY naming the tiles otherwise). Couplings to a wall, to a
 * dry cell or from one, and aV at k = 0 are dropped. mask (optional, halo layout, nz levels): 0 = dry
 * cell (zero row; the solvers ignore b there and leave x at its initial value). Coefficients are checked
 * finite where they enter A. Each cell's row is summed in the order of pkrylov_operator_create_stencil7()'s
 * rows (a west wall as its i = 0, an east wall as its i = nx-1), so on a rectangle of tiles with walls the
 * product is bitwise that of pkrylov_operator_create_stencil7() on the assembled global arrays, for any
 * tiling and number of ranks. pkrylov_operator_get_info() reports ::PKRYLOV_OPERATOR_STENCIL7, nx = snx,
 * ny = sny * nlocal (the compact order) and nz; nnz of the local CSR form on a single rank (its columns in
 * the compact order), -1 on several ranks (pkrylov_operator_get_csr() is then ::PKRYLOV_ERR_UNSUPPORTED).
 * The Jacobi, column and AINV preconditioners work on it. On a CUDA context the product, the halo
 * exchange between ranks (one GPU per rank: NCCL or staged through the host) and every solver run on the
 * device, bitwise the CPU's product. Collective.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_grid_stencil(pkrylov_grid g, int32_t nz, const double *aW,
                                                        const double *aS, const double *aV, const double *aC,
                                                        const int32_t *mask, pkrylov_operator *A);
/**
 * New coefficient values for a grid-stencil operator (the model changed them: a nonlinear free surface), the
 * same arrays and rules as at creation, the mask kept. Preconditioners built on A keep their old values
 * until pkrylov_precond_update(). Collective. A solver using A may be in the middle of nothing: call it
 * between solves. Errors as at creation; on an error A is unchanged.
 */
PKRYLOV_EXTERN int pkrylov_operator_update_grid_stencil(pkrylov_operator A, const double *aW, const double *aS,
                                                        const double *aV, const double *aC);
/**
 * The approximate-inverse preconditioner of the models' 2-D free-surface solve (MITgcm's ini_cg2d / cg2d):
 *
 *     z(i,j) = pC r(i,j) + pW(i,j) r(i-1,j) + pW(i+1,j) r(i+1,j) + pS(i,j) r(i,j-1) + pS(i,j+1) r(i,j+1)
 *
 * with, from A's coefficients, pC = 1/aC (1 where aC = 0), pW(i,j) = -aW(i,j) / (f (aC(i-1,j) + aC(i,j)))^2
 * (0 where aC(i-1,j) = 0 or the face has no coupling), pS likewise, f = offdiag (MITgcm's cg2dpcOffDFac,
 * 0.51 by default; > 0). A: a 2-D (nz = 1) grid stencil (pkrylov_operator_create_grid_stencil()) or a
 * 2-D column stencil (pkrylov_operator_create_stencil7() with nz = 1); the couplings across tile edges
 * come from the neighbour tiles, so the preconditioner is symmetric like A. A non-finite value is
 * ::PKRYLOV_ERR_SINGULAR naming the cell; nz > 1 ::PKRYLOV_ERR_UNSUPPORTED. Applied it needs the neighbours
 * of r: a grid exchanges them as for a product (on CUDA contexts too). Collective on a grid.
 */
PKRYLOV_EXTERN int pkrylov_precond_create_ainv(pkrylov_context ctx, pkrylov_operator A, double offdiag,
                                               pkrylov_precond *M);
/**
 * The same preconditioner from the model's own pC, pW, pS (host arrays in A's layout: halo'd multi-tile
 * arrays for a grid stencil, nx*ny for a column stencil), taken as given (the face rule of
 * pkrylov_operator_create_grid_stencil() across tile edges; couplings to walls and dry cells dropped).
 */
PKRYLOV_EXTERN int pkrylov_precond_create_ainv_coefficients(pkrylov_context ctx, pkrylov_operator A,
                                                            const double *pW, const double *pS,
                                                            const double *pC, pkrylov_precond *M);
/**
 * Rebuild a preconditioner from its operator's current coefficients (after pkrylov_operator_update_grid_stencil(),
 * as MITgcm every cg2dPreCondFreq steps): Jacobi, column and AINV built from the operator (with the
 * offdiag of its creation). For an AINV preconditioner given by the model use
 * pkrylov_precond_update_ainv_coefficients(); NONE does nothing; USER and caller factors are
 * ::PKRYLOV_ERR_UNSUPPORTED. Collective on a grid. On an error M is unchanged.
 */
PKRYLOV_EXTERN int pkrylov_precond_update(pkrylov_precond M);
/** New values for an AINV preconditioner (as pkrylov_precond_create_ainv_coefficients()). Collective on a grid. */
PKRYLOV_EXTERN int pkrylov_precond_update_ainv_coefficients(pkrylov_precond M, const double *pW,
                                                            const double *pS, const double *pC);
/**
 * Solve A x = b for a grid-stencil operator with b and x in the model's halo'd multi-tile layout (nz levels of
 * A, memory space mem): the interior of b is read, the interior of x is the initial guess (with
 * pkrylov_solver_set_initial_guess_nonzero()) and receives the solution; the halos of x are not written
 * (exchange them as after the model's own solver). Otherwise as pkrylov_solver_solve(). Other operators:
 * ::PKRYLOV_ERR_INCOMPATIBLE.
 */
PKRYLOV_EXTERN int pkrylov_solver_solve_halo(pkrylov_solver s, int32_t mem, const double *b, double *x);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/** @name Solvers */
/**@{*/
/** Outcome of the last solve. Plain data; doubles first so the layout matches a Fortran bind(C) type. */
typedef struct {
  double initial_residual;  /**< ||b - A x0||_2 (dry cells excluded) */
  double final_residual;    /**< ||b - A x||_2 recomputed after the solve; with ::PKRYLOV_STOP_RECURRENCE
                                 the recurrence residual of the last iteration (see
                                 pkrylov_solver_set_stop_rule()) */
  double rel_residual;      /**< final_residual / ||b||_2 (final_residual when b = 0) */
  double rhs_norm;          /**< ||b||_2 */
  double solve_time_s;      /**< wall time of the solve */
  double min_residual;      /**< pkrylov_solver_set_min_residual(): the smallest recurrence residual norm
                                 of the solve (iteration 0 included); -1 when the option is off */
  int32_t iterations;       /**< iterations done */
  int32_t reason;           /**< ::pkrylov_reason */
  int32_t converged;        /**< 1 when reason > 0 */
  int32_t breakdown_iteration; /**< iteration at which a breakdown was detected, else -1 */
  int32_t residual_replacements; /**< pipelined CG: how many residual replacements were done */
  int32_t true_residual_checks;  /**< how many times ||b - A x|| was recomputed during the solve */
  int32_t min_residual_iteration; /**< pkrylov_solver_set_min_residual(): the iteration of min_residual
                                       (0 = the initial guess); -1 when the option is off */
} pkrylov_result;

/**
 * Monitor callback, called with the iteration number and the recurrence residual 2-norm after every
 * convergence test (iteration 0 = initial residual). Return 0 to continue, nonzero to stop the solve
 * (reason ::PKRYLOV_STOPPED_BY_MONITOR).
 */
typedef int (*pkrylov_monitor_fn)(void *user, int32_t iteration, double residual_norm);

/**
 * Create a solver for A with preconditioner M (NULL = none). A and M must come from ctx and outlive the
 * solver. Work vectors are allocated here, once.
 */
PKRYLOV_EXTERN int pkrylov_solver_create(pkrylov_context ctx, int32_t type, pkrylov_operator A,
                                         pkrylov_precond M, pkrylov_solver *s);
/** Destroy a solver (NULL is a no-op). */
PKRYLOV_EXTERN int pkrylov_solver_destroy(pkrylov_solver *s);
/**
 * Stopping test: ||r||_2 <= max(rtol * ||b||_2, atol), on the recurrence residual and then confirmed on
 * the true residual b - A x (see pkrylov_solver_set_true_residual_interval(); pkrylov_solver_set_stop_rule()
 * selects a model's own test instead). Both >= 0 and finite, not both 0. Defaults: rtol 1e-8, atol 0.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_tolerances(pkrylov_solver s, double rtol, double atol);
/** Iteration cap (>= 0; default 1000). Reaching it is reason ::PKRYLOV_DIVERGED_MAX_ITERATIONS. */
PKRYLOV_EXTERN int pkrylov_solver_set_max_iterations(pkrylov_solver s, int32_t maxit);
/** 1: x holds an initial guess on entry to solve. 0 (default): the solve starts from x = 0. */
PKRYLOV_EXTERN int pkrylov_solver_set_initial_guess_nonzero(pkrylov_solver s, int32_t flag);
/**
 * Recompute the true residual b - A x every k iterations (k >= 0; 0, the default, = never during the
 * iteration) and let it replace the recurrence residual (CG: r; pipelined CG: a full residual replacement).
 * Independently of k, a solve only reports convergence when the true residual of the returned x meets the
 * tolerance: when the recurrence residual says converged but the true one does not, the iteration restarts
 * from x (at most 5 times; then reason ::PKRYLOV_DIVERGED_STAGNATION: the tolerance is below the accuracy
 * the problem allows). ::PKRYLOV_STOP_RECURRENCE (pkrylov_solver_set_stop_rule()) turns that confirmation
 * off; the replacements every k iterations stay.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_true_residual_interval(pkrylov_solver s, int32_t k);
/**
 * When a solve stops converged: rule ::PKRYLOV_STOP_CONFIRMED (the default: the recurrence residual meets
 * the tolerance, then the true residual b - A x of the iterate confirms it, see
 * pkrylov_solver_set_true_residual_interval()) or ::PKRYLOV_STOP_RECURRENCE, a model's own CG stopping
 * rule (MITgcm's CG2D, CG2D_SR, CG3D), for every solver type on both backends:
 * - the test is on the recurrence residual alone, never confirmed on the true residual and never restarted
 *   for that. With tol = max(rtol ||b||, atol) (||b|| over the wet cells), the methods whose residual is a
 *   sum of squares (CG, pipelined CG, single-reduction CG, the BiCGStab family) stop when sum r^2 < tol^2
 *   (strict, on the squared sum, unpreconditioned, over the wet cells), the GMRES family when its residual
 *   estimate < tol; a residual that is exactly 0 stops too (a zero right-hand side with atol = 0). The test
 *   runs on the initial residual first (iteration 0) and after every iteration, so CG takes exactly the
 *   iterations of a hand-written PCG of the model's form with the same preconditioner.
 * - the result: initial_residual ||b - A x0|| as always; final_residual the recurrence residual norm of the
 *   last iteration (MITgcm's lastResidual; no true residual is computed at the end; after a NaN stop the
 *   true residual of the returned x); rel_residual = final_residual / ||b||; a converged reason is
 *   ::PKRYLOV_CONVERGED_ATOL when atol >= rtol ||b||, else ::PKRYLOV_CONVERGED_RTOL.
 * Any other rule is ::PKRYLOV_ERR_INVALID_VALUE. Under MPI every rank must set the same rule (a solve
 * checks).
 */
PKRYLOV_EXTERN int pkrylov_solver_set_stop_rule(pkrylov_solver s, int32_t rule);
/**
 * Minimum-residual iterate (flag 1; 0, the default, = off), MITgcm's cg2dUseMinResSol: the solve tracks
 * the smallest recurrence residual sum r^2 of its iterates, the initial guess (iteration 0) and the last
 * iterate included (an iterate is kept when its sum is strictly below the smallest so far), and when the
 * last iterate's sum is larger than that minimum it returns the kept iterate instead of the last one (the
 * x of MITgcm's CG2D; its minResidualSq leaves a converged last iterate out, which is then below it). The
 * result reports
 * min_residual (the square root of that minimum) and min_residual_iteration; iterations stays the number of
 * iterations done, and final_residual keeps its meaning (with ::PKRYLOV_STOP_RECURRENCE: the last
 * iteration's recurrence residual, MITgcm's lastResidual; with ::PKRYLOV_STOP_CONFIRMED: ||b - A x|| of the
 * returned x). A restart (after an unconfirmed convergence or, pipelined CG and single-reduction CG, a
 * recurrence curvature that lost its sign) starts the tracking again from its x. CG, pipelined CG and
 * single-reduction CG on both backends (one more vector; on CUDA the minimum is tracked in the device
 * state and the iterate copied only when it improves, no host synchronisation). Other solver types:
 * flag 1 is ::PKRYLOV_ERR_UNSUPPORTED (0 is accepted); a flag other than 0 or 1 is
 * ::PKRYLOV_ERR_INVALID_VALUE.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_min_residual(pkrylov_solver s, int32_t flag);
/** pkrylov_solver_set_residual_replacement(): the automatic rule (the default). */
#define PKRYLOV_REPLACE_AUTO -1
/**
 * Residual replacement of pipelined CG: the recurrence vectors (r, u, w, s, q, z) are replaced by explicitly
 * computed ones (r = b - A x, u = M^-1 r, w = A u, s = A p, q = M^-1 s, z = A q), so that the recurrence
 * residual stays close to the true one and the final accuracy matches classical CG.
 * - ::PKRYLOV_REPLACE_AUTO (the default): when the rounding errors of the recurrences may have opened a gap
 *   between the recurrence and the true residual that is no longer small against the residual (Cools et al.
 *   2018): an estimate of the gap is kept from the norms of the iteration's vectors, which ride in the
 *   iteration's one global reduction (no extra reduction), and the vectors are replaced when the estimate
 *   first exceeds sqrt(eps) times the residual (docs/design.md). A solve replaces a few times (result
 *   residual_replacements); each replacement costs four operator products and two preconditioner
 *   applications, and on the CUDA backend ends the block of iterations it falls in.
 * - k > 0: every k iterations; 0: never.
 * Pipelined BiCGStab replaces every k iterations, every 50 with ::PKRYLOV_REPLACE_AUTO. Ignored by the other
 * types. Another negative k is ::PKRYLOV_ERR_INVALID_VALUE.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_residual_replacement(pkrylov_solver s, int32_t k);
/**
 * Stop with ::PKRYLOV_DIVERGED_STAGNATION when the recurrence residual has not fallen below (1 - 1e-3)
 * times its best value for `window` consecutive iterations (window >= 0; 0, the default, = off).
 */
PKRYLOV_EXTERN int pkrylov_solver_set_stagnation_window(pkrylov_solver s, int32_t window);
/** Record the recurrence residual norm of every iteration (flag 1) or not (0, default). */
PKRYLOV_EXTERN int pkrylov_solver_set_history(pkrylov_solver s, int32_t flag);
/**
 * Precision of the stored coefficients (CUDA backend; the CPU accepts ::PKRYLOV_PRECISION_FP64 only and
 * answers ::PKRYLOV_ERR_UNSUPPORTED otherwise). Vectors and reductions are always fp64.
 * - ::PKRYLOV_PRECISION_FP64 (default).
 * - ::PKRYLOV_PRECISION_MIXED_PRECOND: preconditioner factors in fp32. The preconditioner's precision only
 *   changes the convergence rate, so the final accuracy is that of fp64.
 * - ::PKRYLOV_PRECISION_MIXED: operator coefficients (CSR values, stencil coefficients) in fp32 as well. The
 *   iteration then works with the fp32-rounded operator; residual replacement, the true-residual checks and
 *   the convergence confirmation use the fp64 operator, so a reported convergence holds for the fp64
 *   system. Where rounding the coefficients changes the matrix too much (rows that cancel to many digits,
 *   as the thin-shell problem's do near the ground) the solve reports stagnation instead.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_precision(pkrylov_solver s, int32_t precision);
/**
 * CUDA backend: the iteration runs on the device without host involvement; the host reads the device state
 * (convergence, breakdown) every k iterations (1..4096, default 32). The convergence test itself runs on the
 * device every iteration, so the iteration count does not depend on k. A monitor or a stagnation window
 * makes the host look at every iteration. No effect on the CPU backend.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_sync_interval(pkrylov_solver s, int32_t k);
/**
 * GMRES family: restart length m (Krylov vectors per cycle), 1 <= m <= 1000, default 30. CA-GMRES rounds m
 * up to a multiple of its step. ::PKRYLOV_ERR_INVALID_VALUE for other solvers' types is not raised: the
 * value is ignored by CG, pipelined CG and the BiCGStab family.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_restart(pkrylov_solver s, int32_t m);
/**
 * CA-GMRES: step size s (matrix-powers depth, basis vectors per block), 1 <= s <= 16, or 0 = auto (default):
 * chosen from the time per basis vector measured for the candidates 2, 4, 8 (those <= m) during the first
 * restart cycle. Ignored by the other solvers.
 */
PKRYLOV_EXTERN int pkrylov_solver_set_step(pkrylov_solver s, int32_t step);
/** Set (or with fn NULL remove) the monitor callback. */
PKRYLOV_EXTERN int pkrylov_solver_set_monitor(pkrylov_solver s, pkrylov_monitor_fn fn, void *user);
/**
 * Solve A x = b. b and x: n values in memory space mem, distinct. On return x holds the solution, or the
 * last good iterate if the solve did not converge; the outcome is in pkrylov_solver_get_result(). The
 * BiCGStab and GMRES families never return an x with a larger true residual than an iterate whose true
 * residual the solve computed (the initial guess, a restart of a GMRES cycle, a confirmation): when the
 * last one is worse (GMRES on a singular inconsistent system), that best one is returned.
 * Errors (status < 0) are reserved for invalid input (NULL, NaN/Inf in b or in an initial guess, aliasing,
 * memory type), backend failures and ::PKRYLOV_ERR_BUSY (s, its stateful operator or preconditioner, or its
 * CUDA / distributed context in use by another thread: see "Threads" above); then x is unchanged. On the
 * CPU backend with the default thread count the solver may run on one thread (see
 * pkrylov_context_get_num_threads()).
 */
PKRYLOV_EXTERN int pkrylov_solver_solve(pkrylov_solver s, int32_t mem, const double *b, double *x);
/** Outcome of the last solve (::PKRYLOV_ERR_INVALID_STATE before the first). */
PKRYLOV_EXTERN int pkrylov_solver_get_result(pkrylov_solver s, pkrylov_result *result);
/**
 * Residual history of the last solve (needs pkrylov_solver_set_history(s, 1)): entry i is the recurrence
 * residual norm after iteration i (entry 0 is the initial one). Copies min(capacity, length) values into
 * hist (host; may be NULL to ask for the length only) and the full length into *length.
 */
PKRYLOV_EXTERN int pkrylov_solver_get_history(pkrylov_solver s, int32_t capacity, double *hist,
                                              int32_t *length);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name MKL-compatible reverse-communication CG (RCI ISS dcg calling sequence)
 *
 * The four routines of Intel MKL's RCI CG with the same argument lists, the same ipar(128), dpar(128) and
 * tmp(n,4) layout and the same meaning of every documented entry, so a program written for MKL switches
 * by renaming dcg_init/dcg_check/dcg/dcg_get (Fortran: pk_dcg_init/pk_dcg_check/pk_dcg/pk_dcg_get in
 * pkrylov_mod). All pointer arguments are addresses as Fortran passes them; indices below are Fortran's
 * (ipar(1) is ipar[0] in C). No context, handle or hidden state: everything lives in the caller's ipar,
 * dpar and tmp, so any number of solves may be interleaved or run on different threads.
 *
 * Calling sequence: pkrylov_dcg_init(); set ipar/dpar; pkrylov_dcg_check(); then call pkrylov_dcg()
 * until it returns a value of RCI_request other than 1, 2 or 3:
 * - 1: compute tmp(:,2) = A tmp(:,1) and call again.
 * - 2: user stopping test on x (the current iterate) and dpar; call again to continue, or stop.
 * - 3: compute tmp(:,4) = M^-1 tmp(:,3) (preconditioned runs, ipar(11) != 0) and call again.
 * - 0: converged by the automatic residual test dpar(5) <= dpar(4) (or the residual is exactly 0).
 * - -1: ipar(4) reached ipar(5) (ipar(8) != 0) before the automatic residual test was met.
 * - -2: (p, A p) or (r, M^-1 r) is zero, NaN/Inf, or of the other sign than its first value in the solve
 *   (A or M is not symmetric definite, or x is degenerate); a NaN/Inf in another reduction. Negative definite
 *   operators and preconditioners (as ocean models store them: (p, A p) < 0 throughout, and (r, M^-1 r) < 0
 *   with a preconditioner built from such an A) solve as with the library's other CG paths.
 * - -10: dpar is invalid (negative or non-finite tolerance; a stored residual norm was altered).
 * - -11: ipar is invalid (not initialised by pkrylov_dcg_init, ipar(1) != n, an unknown ipar(3), no
 *   stopping test enabled, negative counts, ipar(4) = 2^31 - 1: no further iteration can be counted): the
 *   call did nothing.
 * The stopping tests run after every residual update, including the initial residual (ipar(4) = 0), in the
 * order: exact zero residual, automatic residual test (ipar(9)), user test (ipar(10), request 2), iteration
 * cap ipar(4) >= ipar(5) (ipar(8)). After 0 or -1 a further call continues the iteration (e.g. after
 * raising ipar(5)); setting ipar(3) = 1 restarts from the current x.
 *
 * ipar (defaults set by pkrylov_dcg_init): 1 n; 2 message unit (6 = standard error, else appended to the
 * file pkrylov_rci_cg.log); 3 stage of the computation (internal; 1 = start); 4 iterations done (0);
 * 5 maximum iterations (min(150, n)); 6 print errors (1); 7 print warnings (1); 8 iteration-cap test (1);
 * 9 automatic residual test (0); 10 user test through request 2 (1); 11 preconditioned (0);
 * 12..127 unused; 128 internal signature written by pkrylov_dcg_init (do not modify).
 * dpar: 1 relative tolerance (1e-6); 2 absolute tolerance (0); 3 ||r0||^2; 4 dpar(1)*dpar(3) + dpar(2);
 * 5 ||r||^2 (current, recurrence residual, 2-norm); 6 the previous ||r||^2; 7 alpha; 8 beta
 * (= dpar(5)/dpar(6) without preconditioner; (r, z)/(r_old, z_old) with one); 9..126 unused;
 * 127, 128 internal: the sign of (p, A p) in this solve, the current (r, z).
 * Note that, as in MKL, the automatic test compares SQUARED norms: ||r|| <= rtol ||r0|| needs
 * dpar(1) = rtol^2.
 * tmp(n,4): columns p, A p, r, z = M^-1 r.
 *
 * Each routine also returns a ::pkrylov_error status: ::PKRYLOV_SUCCESS for every request and outcome
 * (including -1 and -2), an error code when RCI_request is -10, -11, -1100 or -10000; the message naming
 * the argument is in pkrylov_last_error_message() (and printed when ipar(6) != 0 on an initialised ipar).
 */
/**@{*/
/**
 * Set the defaults in ipar(1:128) and dpar(1:128), zero tmp(n,4), RCI_request = 0; x and b are not read.
 * n <= 0 or a NULL array: RCI_request = -10000.
 */
PKRYLOV_EXTERN int pkrylov_dcg_init(const int32_t *n, const double *x, const double *b, int32_t *rci_request,
                                    int32_t *ipar, double *dpar, double *tmp);
/**
 * Check ipar and dpar for consistency. RCI_request: 0 all fine; -1001 warnings only (ipar(9) on with
 * dpar(1) = dpar(2) = 0: passes only for a zero residual; ipar(9) on with dpar(1) >= 1: passes at once;
 * ipar(8) on with ipar(5) = 0); -1010 parameters changed (no stopping test enabled: ipar(8) = ipar(9) = 1
 * set, as MKL does); -1011 both; -1100 an error, nothing changed (n <= 0, ipar not initialised,
 * ipar(1) != n, ipar(3) unknown, ipar(4) < 0, ipar(5) < 0, a negative or non-finite tolerance, NaN/Inf in
 * x or b).
 */
PKRYLOV_EXTERN int pkrylov_dcg_check(const int32_t *n, const double *x, const double *b, int32_t *rci_request,
                                     int32_t *ipar, double *dpar, double *tmp);
/** One step of the reverse-communication preconditioned CG (see the group description). */
PKRYLOV_EXTERN int pkrylov_dcg(const int32_t *n, double *x, const double *b, int32_t *rci_request,
                               int32_t *ipar, double *dpar, double *tmp);
/** itercount = ipar(4), the iterations done. An ipar not initialised is ::PKRYLOV_ERR_INVALID_STATE. */
PKRYLOV_EXTERN int pkrylov_dcg_get(const int32_t *n, const double *x, const double *b,
                                   const int32_t *rci_request, const int32_t *ipar, const double *dpar,
                                   const double *tmp, int32_t *itercount);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name MKL-compatible reverse-communication flexible GMRES (RCI ISS dfgmres calling sequence)
 *
 * The four routines of Intel MKL's RCI FGMRES with the same argument lists, the same ipar(128), dpar(128)
 * and tmp layout and the same meaning of every documented entry, so a program written for MKL switches by
 * renaming dfgmres_init/dfgmres_check/dfgmres/dfgmres_get (Fortran: pk_dfgmres_init/pk_dfgmres_check/
 * pk_dfgmres/pk_dfgmres_get in pkrylov_mod). Restarted flexible GMRES (right preconditioning, the
 * preconditioner may change from step to step), modified Gram-Schmidt, Givens rotations. Indices are
 * Fortran's (ipar(1) is ipar[0] in C); ipar(22), ipar(23) are 1-based offsets into tmp (C: tmp + ipar[21]
 * - 1). No context, handle or hidden state: everything lives in the caller's ipar, dpar and tmp, so solves
 * may be interleaved or run on different threads.
 *
 * Calling sequence: pkrylov_dfgmres_init(); set ipar/dpar (e.g. ipar(15), the restart length);
 * pkrylov_dfgmres_check(); call pkrylov_dfgmres() until RCI_request is not 1..4; then
 * pkrylov_dfgmres_get() with ipar(13) = 0 to put the solution into x: like MKL, pkrylov_dfgmres() itself
 * updates x only at restarts, so x holds the initial guess (or the last restart point) until then.
 * - 1: compute tmp(ipar(23):ipar(23)+n-1) = A tmp(ipar(22):ipar(22)+n-1) and call again.
 * - 2: user stopping test (typically: ipar(13) = 1 and pkrylov_dfgmres_get() into a scratch b, then the
 *   true residual); call again to continue, or stop and call pkrylov_dfgmres_get().
 * - 3: compute tmp(ipar(23)..) = M^-1 tmp(ipar(22)..) (ipar(11) != 0) and call again.
 * - 4: check whether dpar(7), the norm of the vector just generated, is zero to rounding (ipar(12) = 0);
 *   call again if not, else stop: the solution is found (pkrylov_dfgmres_get()).
 * - 0: done: dpar(5) <= dpar(4) (ipar(9)), dpar(7) <= dpar(8) (ipar(12) != 0), or the residual (or
 *   dpar(7)) is exactly zero.
 * - -1: ipar(4) reached ipar(5) (ipar(8) != 0).
 * - -10: division by zero: the norm of a generated vector or the diagonal of the rotated Hessenberg matrix
 *   is zero, or NaN/Inf in a product the caller wrote (A or M singular); dfgmres_get still gives the last
 *   good iterate; every further call answers -10.
 * - -11: no stopping test: ipar(8) = ipar(9) = ipar(10) = 0 (pkrylov_dfgmres_check() enables 8 and 9).
 * - -12: ipar or dpar invalid (not initialised by pkrylov_dfgmres_init, ipar(1) != n, an ipar(3) other than
 *   1 and the stage the computation is in, ipar(4) < 0 or = 2^31 - 1 (no further iteration can be counted),
 *   ipar(14) not possible at that stage, ipar(15) < 1, ipar(16..21) not matching ipar(15) once the solve has
 *   started, ipar(22) or ipar(23) changed while their request is out, ipar(15) or ipar(11) changed in the
 *   middle of a restart cycle, a negative or non-finite dpar(1), dpar(2), dpar(8)): the call did nothing (no
 *   input makes it write outside the documented tmp).
 * Tests after every step, in this order: dpar(7) = 0 or dpar(5) = 0 exactly -> 0; residual test (ipar(9))
 * -> 0; zero-norm test (ipar(12) != 0: dpar(7) <= dpar(8) -> 0; ipar(12) = 0: request 4); user test
 * (ipar(10): request 2); iteration cap (ipar(8)) -> -1; then the next step or, after ipar(15) steps, the
 * restart: x += Z y, A x is requested (request 1) and the new residual is the true b - A x. The initial
 * residual gets the residual test and the cap; a restart residual only the residual test. After 0 or -1 a
 * further call continues (e.g. after raising ipar(5)); setting ipar(3) = 1 starts again from x.
 *
 * ipar (defaults set by pkrylov_dfgmres_init): 1 n; 2 message unit (6 = standard error, else appended to
 * the file pkrylov_rci_fgmres.log); 3 stage (internal; 1 = start); 4 iterations done, all cycles (0);
 * 5 maximum iterations (min(150, n)); 6 print errors (1); 7 print warnings (1); 8 iteration-cap test (1);
 * 9 residual test dpar(5) <= dpar(4) (0); 10 user test through request 2 (1); 11 preconditioned, request 3
 * (0); 12 automatic zero-norm test dpar(7) <= dpar(8), else request 4 (0); 13 where pkrylov_dfgmres_get()
 * writes the solution: 0 into x, > 0 into its b argument, < 0 nowhere (only the count) (0); 14 steps done in
 * the current restart cycle (0); 15 restart length m (min(150, n)); 16..21 1-based offsets in tmp of the
 * rotated Hessenberg matrix (packed upper triangle by columns, m(m+1)/2), the cosines (m), the sines (m),
 * the rotated residual (m+1), the least-squares solution (m), the preconditioned vectors z_1..z_m (m n);
 * 22/23 offsets of the operand and the result of requests 1 and 3; 24..124 unused; 125..128 internal
 * (a copy of the stage, the running cycle's preconditioning and restart length, a signature; do not
 * modify).
 * dpar: 1 relative tolerance (1e-6); 2 absolute tolerance (0); 3 ||r0|| = ||b - A x0|| (2-norm, NOT squared
 * as in the CG); 4 dpar(1)*dpar(3) + dpar(2); 5 the current residual norm (the GMRES estimate |g(j+1)|,
 * after a restart the true ||b - A x||); 6 the previous dpar(5); 7 the norm of the vector generated by the
 * last step, h(j+1,j); 8 zero-norm tolerance (1e-12); 9..128 unused.
 * tmp: (2*ipar(15)+1)*n + ipar(15)*(ipar(15)+9)/2 + 1 values: the basis v_1..v_{m+1} (n each) from
 * tmp(1), then the parts at ipar(16..21).
 *
 * Each routine also returns a ::pkrylov_error status: ::PKRYLOV_SUCCESS for every request and outcome
 * (including -1 and -10), an error code when RCI_request is -11, -12, -1100 or -10000; the message naming
 * the argument is in pkrylov_last_error_message() (and printed when ipar(6) != 0 on an initialised ipar).
 */
/**@{*/
/**
 * Set the defaults in ipar(1:128) and dpar(1:128), RCI_request = 0; x, b and tmp are neither read nor
 * written (tmp may be allocated for the ipar(15) set afterwards). n <= 0, a NULL array, or an n so large that no restart length
 * keeps tmp within 2^31-1 entries: RCI_request = -10000. (When the default restart length min(150, n) would
 * not fit 32-bit offsets, ipar(15) is the largest that does.)
 */
PKRYLOV_EXTERN int pkrylov_dfgmres_init(const int32_t *n, const double *x, const double *b,
                                        int32_t *rci_request, int32_t *ipar, double *dpar, double *tmp);
/**
 * Check ipar and dpar. ipar(16..21) not matching ipar(1), ipar(15) (e.g. after a change of ipar(15)) are
 * set for them with a warning message, RCI_request still 0 (as MKL's own examples expect). RCI_request:
 * 0 fine; -1001 warnings (ipar(9) on with dpar(1) = dpar(2) = 0; ipar(9) on with dpar(1) >= 1; ipar(8) on
 * with ipar(5) = 0; ipar(15) > n); -1010 no stopping test was enabled: ipar(8) = ipar(9) = 1 set; -1011
 * both; -1100 an error, nothing changed (n <= 0, ipar not initialised, ipar(1) != n, unknown ipar(3),
 * ipar(4) < 0, ipar(5) < 0, ipar(15) < 1 or too large for 32-bit offsets, ipar(14) outside the cycle, a
 * negative or non-finite dpar(1), dpar(2), dpar(8), NaN/Inf in x or b).
 */
PKRYLOV_EXTERN int pkrylov_dfgmres_check(const int32_t *n, const double *x, const double *b,
                                         int32_t *rci_request, int32_t *ipar, double *dpar, double *tmp);
/** One step of the reverse-communication FGMRES (see the group description). x changes only at restarts. */
PKRYLOV_EXTERN int pkrylov_dfgmres(const int32_t *n, double *x, const double *b, int32_t *rci_request,
                                   int32_t *ipar, double *dpar, double *tmp);
/**
 * itercount = ipar(4), and the current iterate x + Z y (y the least-squares solution of the ipar(14) steps
 * of the running cycle, written to tmp(ipar(20))): ipar(13) = 0 into x, ipar(13) > 0 into b (x unchanged),
 * ipar(13) < 0 nowhere. RCI_request = 0; -12 for an invalid ipar (not initialised, inconsistent);
 * -10000 for a NULL argument or n <= 0. Unlike MKL, the iteration may be continued after ipar(13) = 0:
 * the rotated residual in tmp is updated to match the new x.
 */
PKRYLOV_EXTERN int pkrylov_dfgmres_get(const int32_t *n, double *x, double *b, int32_t *rci_request,
                                       const int32_t *ipar, const double *dpar, double *tmp,
                                       int32_t *itercount);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name Handle-based reverse communication (every solver type, caller-owned reductions)
 *
 * The solver hands every operation it cannot do itself back to the caller: y = A x, y = M^-1 x and, when
 * the caller owns the communicator, the start and the end of each global sum, so that the reductions of the
 * pipelined methods overlap the caller's preconditioner and matvec. The operand and result vectors of a
 * request point into the rci's workspace (or into the caller's x), n values each, in the memory space of
 * the solve (the mem of pkrylov_rci_start()). `partials` is always host memory.
 *
 * On a CUDA context (CG and pipelined CG; other types answer ::PKRYLOV_ERR_UNSUPPORTED) a solve started
 * with mem = ::PKRYLOV_MEM_DEVICE keeps its work vectors on the GPU: the in/out pointers of MATVEC and
 * PRECOND are DEVICE pointers (apply A or M^-1 with the model's own kernels: OpenACC `deviceptr` /
 * `host_data use_device`, CUDA Fortran `device` arrays, cuSPARSE), the library's vector updates run as
 * kernels, and the local sums of a REDUCE request are copied to the host array `partials` (an MPI
 * reduction of a few doubles needs no device buffer). The library has synchronised its stream before it
 * returns a request; the caller must have finished writing `out` (synchronised its stream or queue) before
 * the next pkrylov_rci_step(). mem = ::PKRYLOV_MEM_HOST on a CUDA context runs the host loop as on the CPU
 * backend.
 *
 * Loop: pkrylov_rci_start(); then call pkrylov_rci_step() and answer its request until it gives
 * ::PKRYLOV_RCI_DONE; the outcome is in pkrylov_rci_get_result() and x (the caller's array) holds the
 * solution or the last good iterate. Without preconditioner no PRECOND request appears;
 * with reduce_by_caller 0 no REDUCE request appears (the library sums, as pkrylov_solver_solve() does).
 * With reduce_by_caller 1 every global sum is a REDUCE_START (partials: the local values, npartials of
 * them) and a REDUCE_WAIT naming the same array: sum each value elementwise over the ranks, in place
 * (MPI_Iallreduce with MPI_IN_PLACE at START, MPI_Wait at WAIT); the solver does not read the array in
 * between. A blocking sum is a START directly followed by its WAIT.
 *
 * On host vectors every type runs the very solve of pkrylov_solver_solve() (same iterations, same x,
 * bitwise, when the caller's products and sums are the library's arithmetic), its operator, preconditioner
 * and global sums turned into requests; the requests are those of that driver, in its order:
 * - the solve works on the rci's own copy of the iterate (the in of a MATVEC for r = b - A x) and writes x
 *   when it ends (DONE); until then x keeps the initial guess (zero when x_nonzero is 0).
 * - a solve starts with REDUCE (1 partial: (b, b)), MATVEC (in = the iterate, also for a zero guess) and
 *   REDUCE (1: ||b - A x||^2), then the driver's own set-up; a convergence is confirmed by MATVEC (in = the
 *   iterate) and REDUCE (1), and so is the final residual of a solve that did not converge.
 * - CG: MATVEC (r = b - A x), then per iteration (and once to start) PRECOND (in = r, out = z), REDUCE
 *   (2 partials: (r,z), (r,r)), MATVEC (in = z, out = a work vector), REDUCE (1: (p, A p)): two blocking
 *   reductions.
 * - pipelined CG: MATVEC (r = b - A x), PRECOND (u = M^-1 r), MATVEC (w = A u), then per iteration (and once
 *   to start) REDUCE_START (3 partials: (r,u), (w,u), (r,r)), PRECOND (in = w, out = m), MATVEC (in = m,
 *   out = n), REDUCE_WAIT; the library then updates the vectors and starts the next reduction. A residual
 *   replacement (pkrylov_rci_set_residual_replacement()) and a restart recompute r, u, w (and s = A p,
 *   q = M^-1 s, z = A q) with MATVEC and PRECOND requests before their REDUCE_START.
 * - BiCGStab: PRECOND, MATVEC, REDUCE (1), REDUCE (1), PRECOND, MATVEC, REDUCE (2), REDUCE (2).
 * - pipelined BiCGStab: REDUCE_START (5), PRECOND, MATVEC, REDUCE_WAIT, REDUCE_START (3), PRECOND, MATVEC,
 *   REDUCE_WAIT (residual replacement iterations: blocking sums and a few more products instead).
 * - GMRES and FGMRES: PRECOND, MATVEC, then two blocking REDUCEs of j and j + 1 values in step j of a cycle
 *   (classical Gram-Schmidt twice; the norm in the second); the end of a cycle adds PRECOND (GMRES) and
 *   MATVEC for the new residual.
 * - pipelined GMRES: REDUCE_START (j + 1 values), PRECOND, MATVEC, REDUCE_WAIT: one overlapped sum per step
 *   (the first and the last step of a cycle block).
 * - single-reduction CG: MATVEC (in = the iterate: r = b - A x), then per iteration (and once to start)
 *   PRECOND, MATVEC, REDUCE (3: (z, r), (z, A z), (r, r)); the stop rule is the confirmed one.
 * - CA-GMRES: blocks of s (pkrylov_rci_set_step()) PRECOND, MATVEC pairs, then blocking REDUCEs of Gram
 *   matrices. Their entries come as (hi, lo) double-double pairs: summing hi and lo separately over the
 *   ranks is exact on one rank and a close (not an exact double-double) sum on several.
 * The number of partials of a request is whatever the driver's reduction has: the caller need not know
 * what they are, only sum them. Abandoning a host solve (a new pkrylov_rci_start(), destroy) writes nothing
 * to its b and x (which need not exist any more then). Settings change only between solves, for every type
 * (a setter in the middle of one answers ::PKRYLOV_ERR_INVALID_STATE). Host solves run in a worker thread of
 * the rci (created with it, joined by pkrylov_rci_destroy()) while the caller's thread waits, so exactly one
 * of the two runs at any time; the caller may call pkrylov_rci_step() from any one thread at a time. The
 * library's loops in the worker use their own OpenMP team (pkrylov_context_set_num_threads() of ctx). With
 * reduce_by_caller 0 on a context with a communicator the library's sums over it are made in the caller's
 * thread, inside pkrylov_rci_step().
 *
 * Device vectors (CG and pipelined CG on a CUDA context, mem = ::PKRYLOV_MEM_DEVICE) run a state machine
 * with the same recurrences, per-iteration requests and results, on x in place (x is updated as the solve
 * goes, an abandoned solve leaves it part-way), but a shorter start: no MATVEC for r = b - A x from a zero
 * guess, no separate sums of (b, b) and the initial residual (CG's first REDUCE, 3 partials, and pipelined
 * CG's first REDUCE_START, 4 partials, carry (b, b) as their last partial).
 */
/**@{*/
typedef struct pkrylov_rci_s *pkrylov_rci; /**< a reverse-communication solve */

/** What pkrylov_rci_step() asks the caller to do. */
typedef enum {
  PKRYLOV_RCI_DONE = 900,         /**< the solve has ended: see pkrylov_rci_get_result() */
  PKRYLOV_RCI_MATVEC = 901,       /**< out = A in */
  PKRYLOV_RCI_PRECOND = 902,      /**< out = M^-1 in */
  PKRYLOV_RCI_REDUCE_START = 903, /**< start the global sum of the npartials local values in partials, in
                                       place (e.g. MPI_Iallreduce); do not block */
  PKRYLOV_RCI_REDUCE_WAIT = 904   /**< finish it: partials then hold the global sums */
} pkrylov_rci_request;

/**
 * Create a reverse-communication solver of size n.
 * @param[in] type              a ::pkrylov_solver_type: ::PKRYLOV_SOLVER_CG to ::PKRYLOV_SOLVER_SRCG
 * @param[in] n                 number of unknowns, > 0
 * @param[in] preconditioned    1: PRECOND requests (CG, pipelined CG: M^-1 symmetric, of one sign; the
 *                              others apply it on the right, FGMRES lets it vary); 0: none (M = I)
 * @param[in] reduce_by_caller  1: REDUCE_START/REDUCE_WAIT requests; 0: the library sums
 */
PKRYLOV_EXTERN int pkrylov_rci_create(pkrylov_context ctx, int32_t type, int64_t n, int32_t preconditioned,
                                      int32_t reduce_by_caller, pkrylov_rci *r);
/**
 * As pkrylov_solver_set_tolerances() (defaults rtol 1e-8, atol 0). For every setter: a solve takes the
 * settings when it starts and a change in the middle of one is refused (::PKRYLOV_ERR_INVALID_STATE).
 */
PKRYLOV_EXTERN int pkrylov_rci_set_tolerances(pkrylov_rci r, double rtol, double atol);
/** Iteration cap (>= 0; default 1000). */
PKRYLOV_EXTERN int pkrylov_rci_set_max_iterations(pkrylov_rci r, int32_t maxit);
/**
 * Residual replacement every k iterations (k >= 0, 0 = never, default 50), as
 * pkrylov_solver_set_residual_replacement() with a fixed interval: pipelined CG and pipelined BiCGStab;
 * ignored by the others. The handles keep fixed intervals: their caller does the products and the sums, so
 * the automatic rule (its norms in the reductions, ||A|| from the operator's entries) does not apply, and
 * ::PKRYLOV_REPLACE_AUTO, like any negative k, is ::PKRYLOV_ERR_INVALID_VALUE.
 */
PKRYLOV_EXTERN int pkrylov_rci_set_residual_replacement(pkrylov_rci r, int32_t k);
/**
 * GMRES family: restart length m (1 <= m <= 1000, default 30), as pkrylov_solver_set_restart(); ignored by
 * CG, pipelined CG and the BiCGStab family.
 */
PKRYLOV_EXTERN int pkrylov_rci_set_restart(pkrylov_rci r, int32_t m);
/**
 * CA-GMRES: step size (1 <= step <= 16, or 0 = auto, the default), as pkrylov_solver_set_step(); ignored by
 * the others. Auto times the candidate steps during the first cycle, the caller's answers included, so the
 * choice (and with it the request sequence) may differ from run to run: give a step where that matters
 * (several ranks must issue the same requests).
 */
PKRYLOV_EXTERN int pkrylov_rci_set_step(pkrylov_rci r, int32_t step);
/**
 * Start a solve of A x = b (abandons one in progress; invalid arguments return an error and leave a solve
 * in progress running). b and x: n values in memory space mem (device memory on a CUDA context only, for
 * CG and pipelined CG; a pointer in the other space is ::PKRYLOV_ERR_MEMTYPE naming it), distinct, finite;
 * both must stay valid until ::PKRYLOV_RCI_DONE (b is read, x is updated in place). x_nonzero 1: x holds
 * an initial guess; 0: the solve starts from x = 0. A context in reproducible mode
 * (pkrylov_context_set_reproducible()) is ::PKRYLOV_ERR_UNSUPPORTED: the reverse-communication sums are
 * not exact.
 */
PKRYLOV_EXTERN int pkrylov_rci_start(pkrylov_rci r, int32_t mem, const double *b, double *x,
                                     int32_t x_nonzero);
/**
 * Advance the solve to its next request (the previous one must have been answered). *request is a
 * ::pkrylov_rci_request; in, out (MATVEC, PRECOND: n values each, distinct, else NULL), partials and
 * npartials (REDUCE_START/WAIT, else 0) may each be NULL when the caller does not need them. A step
 * without a solve in progress (before pkrylov_rci_start() or after DONE) is ::PKRYLOV_ERR_INVALID_STATE.
 */
PKRYLOV_EXTERN int pkrylov_rci_step(pkrylov_rci r, int32_t *request, double **in, double **out,
                                    double **partials, int32_t *npartials);
/** Outcome of the last finished solve (::PKRYLOV_ERR_INVALID_STATE before the first). */
PKRYLOV_EXTERN int pkrylov_rci_get_result(pkrylov_rci r, pkrylov_result *res);
/** Destroy (NULL is a no-op; sets *r to NULL). */
PKRYLOV_EXTERN int pkrylov_rci_destroy(pkrylov_rci *r);
/**@}*/

/* ------------------------------------------------------------------------------------------------ */
/**
 * @name Distributed solves (MPI)
 *
 * A context is single-rank until it is given a communicator: pkrylov_context_set_comm() or
 * pkrylov_context_set_comm_f() (a Fortran handle), declared in pkrylov_mpi.h (which includes mpi.h) and
 * defined in libpkrylov_mpi (link pkrylov::pkrylov_mpi, `pkg-config pkrylov-mpi` or `pkrylov-config
 * --libs-mpi`): libpkrylov itself links no MPI, so a serial model needs none. Everything else here
 * (rank queries, the distributed operators, gather/scatter, reproducible mode) is in libpkrylov and works
 * on one rank without a communicator. The library duplicates the communicator (its messages never mix with the model's) and never uses
 * MPI_COMM_WORLD by itself. With more than one rank, every global sum of CG and pipelined CG goes over the
 * communicator (classical CG: one MPI_Allreduce per reduction point; pipelined CG: MPI_Iallreduce started
 * after the fused update and finished after the preconditioner), and the vectors a solver sees are each
 * rank's local part. Every call that communicates is collective: all ranks of the communicator make it,
 * with the same settings (a solve checks the solver's settings and the input vectors on all ranks first
 * and gives the same error on every rank when one rank's differ or are bad). Bad input to a collective
 * call gives the same error code and message on every rank (the message names the first rank that
 * found it), never a hang. The BiCGStab and GMRES families and single-reduction CG sum over the
 * communicator too (CPU). On the CUDA
 * backend each rank uses one GPU: pkrylov_context_set_comm() moves the
 * context to device (node-local rank mod visible devices) and makes it the calling thread's current device
 * (option cuda.bind=none keeps the device current at creation); CG and pipelined CG run
 * distributed there (with NCCL, built in when found, and a GPU per rank: halo exchanges and global sums
 * device to device, iterations in CUDA graphs; otherwise, or with the option dist.nccl=0, staged
 * through pinned host memory and MPI; the same results bitwise on both paths), and so do the BiCGStab and
 * GMRES families (their global sums gathered and added in rank order, the same scalars on every rank).
 * All ranks must use the same backend. Destroy the context before MPI_Finalize (it frees its duplicate
 * communicator).
 *
 * Distributed operators (the horizontal grid cut into px x py blocks of whole columns, rank r owning block
 * (r mod px, r / px); the column preconditioner then needs no communication): the thin shell built from
 * the global parameters (pkrylov_operator_create_thinshell_dist()) and the column stencil from each rank's
 * own tile arrays (pkrylov_operator_create_stencil7_dist()). A product exchanges the halo of width one
 * (MPI_Isend/MPI_Irecv of the four tile edges, host-staged), computing the rows that need no halo while
 * the messages travel; every row is computed with exactly the arithmetic of the single-rank operator, so
 * the distributed product equals the single-rank product bitwise. The vectors are the rank's block in its
 * local k-slow order, i + nxl*(j + nyl*k); pkrylov_operator_gather() and pkrylov_operator_scatter() convert
 * to and from the global order. The distributed operators also work on a single-rank context (px = py = 1).
 * A CSR matrix is distributed by blocks of rows (pkrylov_operator_create_csr_dist()); a model that owns its
 * halo exchange keeps it with pkrylov_operator_create_stencil7_exchange() on a context with a communicator.
 */
/**@{*/
/**
 * 1 when this build of pkrylov has its MPI library (configured with MPI, -DPKRYLOV_ENABLE_MPI=ON: libpkrylov_mpi,
 * pkrylov_mpi.h, CMake target pkrylov::pkrylov_mpi), else 0. A property of the build, the same whether or
 * not the program links libpkrylov_mpi; libpkrylov itself never needs an MPI library.
 */
PKRYLOV_EXTERN int32_t pkrylov_has_mpi(void);
/** This process's rank and the number of ranks of the context's communicator (0 and 1 without one). */
PKRYLOV_EXTERN int pkrylov_context_get_rank_info(pkrylov_context ctx, int32_t *rank, int32_t *size);
/**
 * Reproducible mode (flag 1; 0, the default, = off): every global sum of every solver type is computed
 * exactly (each product is added into an exact fixed-point accumulator of 32-bit digits; the accumulators
 * are summed as integers over the ranks and rounded once; CA-GMRES's double-double Gram matrices are the
 * exact sums of the exact products), so the sums, the iterates and the solution are bitwise identical for
 * any number of ranks, any decomposition, any number of threads and between runs. CA-GMRES with the
 * automatic step (0) then uses step 4 instead of a timed choice. It costs one more pass over the vectors
 * of each reduction and a larger message (docs/performance.md, "Reproducible mode: what it costs").
 * CUDA contexts (one GPU, or one GPU per rank
 * with host-staged or NCCL sums): every solver type too (CG, pipelined CG, and the BiCGStab / GMRES families
 * of the CUDA vector engine), whose GPU sums are the same exact sums of the same products, rounded alike
 * (bitwise the CPU backend's sum for bitwise the same vectors), so their iterations and solution are
 * bitwise identical for any number of ranks and between runs; more than about 2^40 values on one rank are
 * ::PKRYLOV_ERR_UNSUPPORTED there (the device accumulator's headroom). Set it on every rank alike (a solve
 * checks).
 */
PKRYLOV_EXTERN int pkrylov_context_set_reproducible(pkrylov_context ctx, int32_t flag);

/**
 * The thin-shell operator of pkrylov_operator_create_thinshell() distributed over the context's ranks:
 * the nx x ny horizontal grid of p is cut into px columns of blocks along x and py along y (block sizes
 * differ by at most one: the first nx mod px blocks get one more), and this rank builds the block of whole
 * columns it owns from the global parameters. px * py must equal the number of ranks and every block must
 * get at least one column; p, px and py must be the same on every rank (checked: the same error on every
 * rank otherwise). pkrylov_operator_get_info() reports the local block (n = nxl * nyl * nz, nnz = -1: the
 * couplings to other ranks have no local CSR form, see pkrylov_operator_get_csr()). Collective.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_thinshell_dist(pkrylov_context ctx, const pkrylov_thinshell_params *p,
                                                          int32_t px, int32_t py, pkrylov_operator *A);
/**
 * The column stencil of pkrylov_operator_create_stencil7() distributed over the ranks as a model owns it:
 * each rank passes its own nx x ny x nz tile (arrays as in pkrylov_operator_create_stencil7(), local
 * k-slow order, aW(i,j,k) coupling to the west neighbour, aS to the south one, aV to the level below),
 * rank r being tile (r mod px, r / px) of a px x py arrangement. The tiles of one column of ranks have the
 * same nx, those of one row the same ny, all the same nz (checked on every rank). The library fetches what
 * lies across the tile edges itself: the east neighbour's aW of its first column, the north neighbour's aS
 * of its first row and the neighbours' mask edges, so a coupling across a tile edge is the one the tile
 * that owns the face stores, dropped when either cell is dry; the couplings across the outer boundary of
 * the global grid are ignored (walls). The result equals pkrylov_operator_create_stencil7() of the
 * assembled global arrays. Collective.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_stencil7_dist(pkrylov_context ctx, int32_t px, int32_t py, int32_t nx,
                                                         int32_t ny, int32_t nz, const double *aW,
                                                         const double *aS, const double *aV, const double *aC,
                                                         const int32_t *mask, pkrylov_operator *A);
/**
 * A CSR matrix distributed by blocks of rows: this rank passes its nlocal consecutive rows [first_row,
 * first_row + nlocal) of the n_global x n_global matrix, with GLOBAL column indices (64-bit). The blocks
 * must tile [0, n_global) in rank order (rank 0 the first rows, each block starting where the previous one
 * ends); first_row may be -1 on every rank (then it follows from the ranks' nlocal), otherwise it is
 * checked. index_base (0 or 1) numbers rowptr, colind and first_row alike; rowptr has nlocal + 1 entries
 * (rowptr[0] == index_base), colind and values rowptr[nlocal] - index_base entries (any order within a
 * row; a repeated column is ::PKRYLOV_ERR_DUPLICATE_ENTRY; finite values). Collective: the partition is
 * checked on every rank (a gap, an overlap, nlocal < 1 or block sizes that do not add up to n_global give
 * the same error on every rank, naming the first bad rank), never a hang.
 *
 * The library finds the ghost columns (columns outside the block), builds the exchange lists once (which
 * of my entries each rank needs: MPI_Alltoall of the counts, MPI_Alltoallv of the indices), and applies A
 * as: post the ghost exchange, compute the rows that touch no ghost column, wait, compute the others.
 * Every row is summed in increasing global column order, as pkrylov_operator_create_csr() sums it, so the
 * product equals the single-rank CSR product bitwise. pkrylov_operator_get_info() reports the local n and
 * nnz; pkrylov_operator_get_row_block() the block; pkrylov_operator_gather()/scatter() convert vectors
 * (rank order = global order). Preconditioners: Jacobi; the column preconditioner when every rank holds
 * whole columns, i.e. layout KFAST (levels contiguous) with first_row and nlocal multiples of levels on
 * every rank (layout KSLOW only on one rank; otherwise ::PKRYLOV_ERR_LAYOUT on every rank). CPU backend.
 */
PKRYLOV_EXTERN int pkrylov_operator_create_csr_dist(pkrylov_context ctx, int64_t n_global, int64_t first_row,
                                                    int64_t nlocal, int32_t index_base, const int64_t *rowptr,
                                                    const int64_t *colind, const double *values,
                                                    pkrylov_operator *A);
/**
 * The row block of a CSR operator: global size, first row (0-based) and rows on this rank. A CSR operator
 * that is not distributed: (n, 0, n). Other operators: ::PKRYLOV_ERR_UNSUPPORTED (see
 * pkrylov_operator_get_dist_info()). Outputs may be NULL.
 */
PKRYLOV_EXTERN int pkrylov_operator_get_row_block(pkrylov_operator A, int64_t *n_global, int64_t *first_row,
                                                  int64_t *nlocal);
/**
 * Where this rank's block lies: global grid gnx x gny (x nz levels), block columns [i0, i0 + nxl) and rows
 * [j0, j0 + nyl), and the decomposition px x py. For an operator that is not distributed: the whole grid
 * (0, nx, 0, ny, 1 x 1); CSR and user operators: ::PKRYLOV_ERR_UNSUPPORTED. Outputs may be NULL.
 */
PKRYLOV_EXTERN int pkrylov_operator_get_dist_info(pkrylov_operator A, int32_t *gnx, int32_t *gny, int32_t *i0,
                                                  int32_t *nxl, int32_t *j0, int32_t *nyl, int32_t *px,
                                                  int32_t *py);
/**
 * Gather a distributed vector into the global order on rank root: x_local (host, the rank's n values,
 * local order) on every rank; x_global (host, gnx * gny * nz values, index i + gnx*(j + gny*k); for a
 * distributed CSR the n_global rows in order) on root only (may be NULL elsewhere). Collective. A
 * non-distributed grid or CSR operator copies.
 */
PKRYLOV_EXTERN int pkrylov_operator_gather(pkrylov_operator A, int32_t root, const double *x_local,
                                           double *x_global);
/** The reverse of pkrylov_operator_gather(): root's global vector into every rank's x_local. Collective. */
PKRYLOV_EXTERN int pkrylov_operator_scatter(pkrylov_operator A, int32_t root, const double *x_global,
                                            double *x_local);
/**@}*/

#ifdef __cplusplus
}
#endif

#endif /* PKRYLOV_H */
