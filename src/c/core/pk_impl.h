/**
 * @file pk_impl.h
 * @brief Private structures and internal functions of pkrylov (not installed).
 *
 * Layers:
 *  - context.c   context, error state, version, thread-local error for calls without a context
 *  - operator.c  CSR / column stencil / thin shell / user callback: creation, validation, row-range apply,
 *                diagonal, column tridiagonal, CSR export, callback failures; thinshell.c: model-problem
 *                geometry and coefficients
 *  - precond.c   none / Jacobi / column (LAPACK factorisation, multi-column sweeps) / user callback
 *  - reduce.c    THE global reduction layer: every global sum of the solvers goes through it
 *  - cpu_kernels.c  the fused loops of the solvers on the CPU (OpenMP over fixed chunks)
 *  - solver.c    solver objects, settings, results; the solve's checks and routing (kry.c, cg.c: the drivers)
 *  - mmio.c      Matrix Market reader/writer
 *
 * Determinism: every parallel loop is cut into chunks whose boundaries depend on the problem only (not on
 * the number of threads); each chunk writes its partial sums to its own slot and the slots are summed in
 * chunk order, so results are bitwise identical for any thread count.
 */
#ifndef PK_IMPL_H
#define PK_IMPL_H

#include "pkrylov.h"
#include "pk_backend.h"
#include "pk_rr.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------------ */
/* Errors                                                                                            */

/**
 * Record an error in ctx (or, with ctx NULL, in the thread-local slot read by
 * pkrylov_last_error_message()) and return code. The message is "func: " followed by the formatted text.
 */
PK_PLUGIN_API int pk_error(pkrylov_context ctx, int code, const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/** Return pk_error(...) from the current function when cond is false. */
#define PK_CHECK(cond, ctx, code, ...)                                                             \
  do {                                                                                             \
    if (!(cond)) return pk_error((ctx), (code), __func__, __VA_ARGS__);                           \
  } while (0)

/** PK_CHECK in a helper whose errors read as raised by the public call func. */
#define PK_CHECK_AS(func, cond, ctx, code, ...)                                                    \
  do {                                                                                             \
    if (!(cond)) return pk_error((ctx), (code), (func), __VA_ARGS__);                             \
  } while (0)

/** Check a pointer argument by name. */
#define PK_CHECK_PTR(ptr, ctx)                                                                     \
  PK_CHECK((ptr) != NULL, (ctx), PKRYLOV_ERR_NULL_POINTER, "argument '%s' is NULL", #ptr)

/** Propagate a nonzero status. */
#define PK_CALL(expr)                                                                              \
  do {                                                                                             \
    int pk_call_ierr_ = (expr);                                                                    \
    if (pk_call_ierr_ != PKRYLOV_SUCCESS) return pk_call_ierr_;                                    \
  } while (0)

/** Allocate n elements of type T into p (calloc, zeroed) or return PKRYLOV_ERR_OUT_OF_MEMORY. */
#define PK_CALLOC(p, n, ctx)                                                                       \
  do {                                                                                             \
    size_t pk_n_ = (size_t)(n);                                                                    \
    (p) = calloc(pk_n_ ? pk_n_ : 1, sizeof(*(p)));                                                 \
    if (!(p))                                                                                      \
      return pk_error((ctx), PKRYLOV_ERR_OUT_OF_MEMORY, __func__,                                  \
                      "cannot allocate %zu bytes for '%s'", pk_n_ * sizeof(*(p)), #p);             \
  } while (0)

/* ------------------------------------------------------------------------------------------------ */
/* Busy flags: an object in use by one thread's call is refused to another's (PKRYLOV_ERR_BUSY).     */

#ifdef __cplusplus
/* The C++ (CUDA) sources see the structures below but never touch a flag: plain integers of the same
   size and alignment keep the layout. */
typedef int32_t pk_busy_flag;
typedef uintptr_t pk_owner_flag;
#else
#include <stdatomic.h>
typedef _Atomic int32_t pk_busy_flag;
/** The thread that holds an object which the same thread may take again (nested calls): 0 = nobody. */
typedef _Atomic uintptr_t pk_owner_flag;
_Static_assert(sizeof(pk_busy_flag) == sizeof(int32_t) && _Alignof(pk_busy_flag) == _Alignof(int32_t),
               "pk_busy_flag must have the layout of int32_t (the CUDA sources see it as one)");
_Static_assert(sizeof(pk_owner_flag) == sizeof(uintptr_t) && _Alignof(pk_owner_flag) == _Alignof(uintptr_t),
               "pk_owner_flag must have the layout of uintptr_t (the CUDA sources see it as one)");
/** Take the flag: 1 when it was free (the caller now holds it), 0 when another call holds it. */
static inline int pk_busy_take(pk_busy_flag *f) {
  return atomic_exchange_explicit(f, 1, memory_order_acquire) == 0;
}
/** Give back a flag taken with pk_busy_take(). */
static inline void pk_busy_drop(pk_busy_flag *f) { atomic_store_explicit(f, 0, memory_order_release); }
#endif

/* ------------------------------------------------------------------------------------------------ */
/* Context                                                                                           */

#include <pthread.h>

/**
 * Loops over fewer values than this run on one thread: below it a parallel region costs more than the
 * second thread saves (measured with bench/pkrylov-bench-threads: docs/notes/performance-history.md,
 * "Where a second thread stops paying"; with
 * OpenMP's default waits the crossover lies between 4096 and 8192 values; passive waits, whose wake-ups
 * cost more, moved it to about 65536 on the loaded test machine, a range a solver's measured choice of one
 * thread covers, pk_thread_choice). Every OpenMP loop of the library takes its if clause from here (pk_par); the
 * chunking, and so every result, does not depend on it. Defined at build time (-DPK_PAR_MIN_ROWS=0) only
 * to measure below it.
 */
#ifndef PK_PAR_MIN_ROWS
#define PK_PAR_MIN_ROWS 8192
#endif

/** 1 when a loop over n values (rows, cells) should run in parallel (the if clause of every loop). */
static inline int pk_par(int64_t n) { return n >= PK_PAR_MIN_ROWS; }

/* ------------------------------------------------------------------------------------------------ */
/* Options (options.c): one table of descriptors; the values in a typed struct, read as fields.      */

/**
 * The values of every option (options.c's table names each field). A context holds one (defaults, then
 * PKRYLOV_OPTIONS, then the caller's calls); a solver copies the context's at creation and may change its
 * solver-level fields. The hot paths read these fields; nothing parses a string after a set call.
 */
typedef struct pk_options {
  /* context level */
  int32_t cuda_bind;       /* 1: pkrylov_context_set_comm moves a CUDA context to local rank mod devices; 0 none */
  int32_t cuda_csr_format; /* PK_OPT_CSR_*: the device storage of CSR operators (read at upload) */
  int32_t cuda_csr_lanes;  /* -1 auto (pk_cuda_csr_lanes), else 0, 1, 2, 4, ..., 32 (read at upload) */
  int32_t cuda_kc;         /* levels per thread of the grid kernels, 0 = the operator type's (read at upload) */
  int32_t cuda_l2pf;       /* L2 prefetch distance of the grid kernels, 0 = off (read at upload) */
  int32_t dist_nccl;       /* collective: 0 forces the host-staged path of distributed CUDA solves */
  int32_t dist_edge_comm;  /* collective: pipelined CG's edge columns on the communication stream (NCCL path) */
  int32_t dist_instrument; /* collective: wait for each exchange and sum (timers; no graphs) */
  /* solver level */
  int32_t cuda_fold;       /* -1 auto, 0 off, 1 on: the folded scalar steps of CUDA CG / pipelined CG */
  int32_t cuda_pdl;        /* programmatic dependent launches on the folded path */
  int32_t cuda_pipe_none;  /* pipelined CG without a preconditioner: the specialised update */
  int32_t cuda_timeline;   /* CUDA events at each step of pipelined CG (stderr line per solve) */
  int32_t cuda_l2persist;  /* -1 auto, 0 off, 1..4: CUDA CG's work vectors kept in the L2's persisting part */
  int32_t kry_graph;       /* CUDA engine (BiCGStab/GMRES families, SRCG): CUDA graphs of blocks */
  int32_t kry_fuse;        /* CUDA engine: the fused Gram-Schmidt kernel, the fused CSR product + update */
  int32_t kry_xfuse;       /* CUDA reproducible mode: the exact sums in the fused kernels' pass (-1 auto) */
  int32_t kry_profile;     /* CUDA engine: per-operation timing to stderr */
  int32_t kry_cg;          /* CUDA CG / pipelined CG on the vector engine (1) or their own driver (0) */
} pk_options;

/** cuda.csr_format values. */
enum { PK_OPT_CSR_AUTO = 0, PK_OPT_CSR_CSR = 1, PK_OPT_CSR_DIA = 2, PK_OPT_CSR_DIA_NOSYM = 3 };
/** Most collective options (pk_options_collective). */
#define PK_OPT_MAX_COLLECTIVE 8

/** The defaults of every option. */
void pk_options_default(pk_options *o);
/**
 * Set option name to the text value in *o: unknown names, values out of range and (solver_only) context-level
 * names are PKRYLOV_ERR_BAD_OPTION raised through ctx as func; *o is unchanged then.
 */
int pk_options_set(pkrylov_context ctx, const char *func, pk_options *o, int solver_only, const char *name,
                   const char *value);
/**
 * Apply a string of whitespace-separated key=value pairs (the PKRYLOV_OPTIONS syntax) to *o, all or none;
 * errors as pk_options_set, the message saying where the string came from (what, e.g. "PKRYLOV_OPTIONS").
 */
int pk_options_parse(pkrylov_context ctx, const char *func, pk_options *o, const char *str, const char *what);
/** The text of option name in *o into buf (buflen bytes); unknown names PKRYLOV_ERR_BAD_OPTION raised as func. */
int pk_options_get(pkrylov_context ctx, const char *func, const pk_options *o, const char *name, char *buf,
                   int32_t buflen);
/** 1 when name is a solver-level option, else 0 (context-level or unknown). */
int pk_options_is_solver_level(const char *name);
/** The collective options' values in table order (at most PK_OPT_MAX_COLLECTIVE); returns their count. */
int pk_options_collective(const pk_options *o, int64_t *vals);
/** The name of collective option i (the order of pk_options_collective). */
const char *pk_options_collective_name(int i);
/** The text of collective option i's value v ("1", "auto", a name) into buf. */
void pk_options_collective_text(int i, int64_t v, char *buf, size_t len);
/**
 * Compare the collective options of ctx across the ranks of its communicator (one MPI_Allreduce; no-op
 * without one): a difference is PKRYLOV_ERR_BAD_OPTION on every rank, naming the option and the smallest and
 * largest values, raised as func. mpi.c.
 */
PK_PLUGIN_API int pk_mpi_check_options(pkrylov_context ctx, const char *func);

struct pkrylov_context_s {
  int32_t backend;        /* resolved: PKRYLOV_BACKEND_CPU or PKRYLOV_BACKEND_CUDA */
  int32_t num_threads;    /* the caller's count (pkrylov_context_set_num_threads), 0 = the default */
  int32_t default_threads; /* the default: pk_default_threads() at creation, the share of this rank's node
                              at pkrylov_context_set_comm (pk_mpi_node_threads) */
  int32_t last_code;      /* last error code raised through this context */
  char last_message[1024];
  pthread_mutex_t err_lock; /* serialises the writers of last_code / last_message (threads sharing the
                               context, e.g. a call refused with PKRYLOV_ERR_BUSY during another's solve) */
  pk_owner_flag owner;    /* CUDA contexts and contexts with a communicator: the thread whose solve or
                             product holds it (their stream and communicator serve one at a time; the
                             same thread may nest, e.g. a product inside a callback of its solve) */
  int32_t owner_depth;    /* nesting depth of the owner's calls (touched by the owner only) */
  int64_t live_objects;   /* operators + preconditioners + solvers not yet destroyed */
  const pk_backend *be;   /* the backend's table (pk_backend.h): pk_backend_cpu or the CUDA plugin's */
  char be_why[256];       /* AUTO that fell back to the CPU: why, one line (pkrylov_context_describe) */
  void *cuda;             /* CUDA backend state (device, stream), NULL on the CPU */
  const struct pk_reduce_hook *reduce_hook; /* reduce.c: override of the global sums, NULL = none (set
                                               only on the private context of a reverse-communication
                                               solve, rci_kry.c) */
  void *reduce_hook_data; /* passed to the hook's functions */
  int32_t rank, size;     /* in the communicator; 0 and 1 without one */
  int32_t reproducible;   /* 1: exact global sums (pkrylov_context_set_reproducible) */
  void *mpi;              /* mpi.c: the communication state (pk_comm_state of pk_comm.h: the table of
                             libpkrylov_mpi, the duplicated communicator, NCCL), NULL = single rank (no
                             mpi.h anywhere in the core or the CUDA sources) */
  pk_options opts;        /* the options (options.c): defaults, PKRYLOV_OPTIONS, the caller's calls */
};

/* ------------------------------------------------------------------------------------------------ */
/* MPI (mpi.c). Without a communicator (or without MPI) these work on the one rank.                  */

/** 1 when the context has a communicator of more than one rank. */
static inline int pk_distributed(pkrylov_context ctx) { return ctx && ctx->size > 1; }
/**
 * Collective agreement on an outcome: every rank passes its local status code (0 or an error already
 * recorded in its context); all ranks return the error of the lowest rank that failed, with that rank's
 * message ("rank R: ..." on the others), or 0 when all succeeded. Single rank: returns code.
 */
PK_PLUGIN_API int pk_mpi_agree(pkrylov_context ctx, int code);
/** In-place MPI_Allreduce of count int64 values with op 0 = sum, 1 = min, 2 = max (no-op on one rank). */
PK_PLUGIN_API int pk_mpi_allreduce_i64(pkrylov_context ctx, int64_t *vals, int count, int op);
/** all[r*count + c] = rank r's mine[c] (MPI_Allgather; a copy on one rank). */
int pk_mpi_allgather_i32(pkrylov_context ctx, const int32_t *mine, int count, int32_t *all);
/** all[r*count + c] = rank r's mine[c] (MPI_Allgather of doubles; a copy on one rank). */
PK_PLUGIN_API int pk_mpi_allgather_f64(pkrylov_context ctx, const double *mine, int count, double *all);
/**
 * The NCCL communicator of a distributed CUDA context (an ncclComm_t), or *comm = NULL for the host-staged
 * path: NCCL not built in, one rank, the option dist.nccl=0 (read at each call: collective, every rank has
 * the same value, checked at set_comm and by every distributed solve and product), ranks sharing a GPU, or a failed creation (tried once). Created on the
 * first call (collective then: ncclGetUniqueId on rank 0, MPI_Bcast, ncclCommInitRank; call it from
 * collective operations only), destroyed with the context (pk_mpi_free).
 */
PK_PLUGIN_API int pk_mpi_nccl(pkrylov_context ctx, void **comm);
/** Free the context's MPI state (the duplicated communicator, the NCCL communicator). */
void pk_mpi_free(pkrylov_context ctx);
/**
 * Check before a solve on a distributed context, collectively: the local argument checks (vectors,
 * finite b and initial guess) and the solver settings (type, tolerances, iteration cap, intervals,
 * preconditioner and operator kind, sizes of the reproducible flag) agree on every rank; the same error
 * on every rank otherwise. No-op on a single rank.
 */
int pk_mpi_solve_check(pkrylov_solver s, int32_t mem, const double *b, const double *x);

/**
 * Check the two vector arguments of an apply or solve call: mem is a pkrylov_memtype the backend accepts,
 * in/out are non-NULL and do not overlap (n values each). Errors name the arguments and come from func.
 */
PK_PLUGIN_API int pk_check_vectors(pkrylov_context ctx, const char *func, int32_t mem, const double *in, const char *in_name,
                     const double *out, const char *out_name, int64_t n);

/**
 * Number of threads for a parallel region of the CPU backend: the caller's count (set_num_threads), else 1
 * when called inside an active parallel region of the caller (its threads hold the cores), else the
 * context's default (ctx NULL: pk_default_threads()).
 */
int pk_num_threads(pkrylov_context ctx);
/**
 * The cores available to this process: with OpenMP thread binding on (OMP_PROC_BIND) the runtime's count,
 * the union of its places (it has narrowed the calling thread's own mask to one place); otherwise the
 * calling thread's affinity mask (sched_getaffinity, CPU_COUNT); at least 1.
 */
int pk_cores_available(void);
/**
 * n capped by the number of threads OpenMP would use (omp_get_max_threads: OMP_NUM_THREADS or
 * omp_set_num_threads when the caller set them, else the CPUs OpenMP found at start) and by
 * PKRYLOV_MAX_THREADS, at least 1; 1 without OpenMP.
 */
int pk_threads_cap(int n);
/** The default thread count of a context without a communicator: pk_threads_cap(pk_cores_available()). */
int pk_default_threads(void);
/** Wall clock in seconds. */
PK_PLUGIN_API double pk_wtime(void);

/* ------------------------------------------------------------------------------------------------ */
/* Tiled grids (grid.c): the model's tiles, their connectivity and the halo-exchange plan            */

/** Tile edges: the values of the connectivity table (pkrylov.h). */
enum { PK_EDGE_W = 0, PK_EDGE_E = 1, PK_EDGE_S = 2, PK_EDGE_N = 3 };

/**
 * A grid. Local tile t (0..nt-1) holds the compact columns t*snx*sny + i + snx*j. Its edge cells are
 * numbered per tile, west (m = j), east (m = j), south (m = i), north (m = i): edge cell
 * ecell(t, e, m) = t * (2 snx + 2 sny) + eoff(e) + m (pk_grid_ecell). For each edge cell nbr says where the
 * cell across the edge is: >= 0 a column of a local tile (value at x[nbr + ncol*k]), -1 a wall, <= -2 the
 * halo slot h = -2 - nbr (value at halo[h + nhalo*k]: the slots of neighbour rank q are the range
 * [recv_off[q], recv_off[q+1]), received every exchange).
 */
struct pkrylov_grid_s {
  pkrylov_context ctx;
  int32_t snx, sny, olx, oly;
  int32_t ntiles, nt;      /* tiles in all; on this rank */
  int32_t *tiles;          /* nt: global numbers of the local tiles, in the arrays' order */
  int32_t *conn;           /* 12 * ntiles: the connectivity table */
  int32_t *owner, *lidx;   /* ntiles: the rank owning each tile and its local index there */
  int64_t ncol;            /* nt * snx * sny: columns of this rank */
  int64_t nedge;           /* nt * 2 (snx + sny): edge cells of this rank */
  int64_t *ecol;           /* nedge: the column of each edge cell */
  int64_t *nbr;            /* nedge: the cell across the edge (see above) */
  int64_t *nbe;            /* nedge: for a local neighbour its edge cell (the face seen from there), else -1 */
  uint8_t *remote;         /* 4 * nt: edge e of local tile t (4t + e) meets a tile of another rank */
  int32_t nnb;             /* neighbour ranks */
  int32_t *nb_rank;        /* nnb, ascending */
  int64_t *send_off;       /* nnb + 1: entries of send_ecell going to each neighbour rank */
  int64_t *send_ecell;     /* the edge cells whose values each neighbour rank needs, in its slot order */
  int64_t *recv_off;       /* nnb + 1: the halo slots each neighbour rank fills */
  int64_t nhalo;           /* recv_off[nnb] */
  int64_t refs;            /* operators built on the grid */
};

/** Edge cell index of position m of edge e of local tile t. */
static inline int64_t pk_grid_ecell(const struct pkrylov_grid_s *g, int64_t t, int e, int64_t m) {
  const int64_t eoff = e == PK_EDGE_W ? 0 : e == PK_EDGE_E ? g->sny : e == PK_EDGE_S ? 2 * (int64_t)g->sny
                                                                                     : 2 * (int64_t)g->sny + g->snx;
  return t * 2 * ((int64_t)g->snx + g->sny) + eoff + m;
}

/** The buffers and requests of one object's halo exchanges on a grid (nz levels). */
typedef struct {
  int32_t nz;
  double *halo;            /* nhalo * nz: received values, slot h level k at h*nz + k */
  double *sbuf;            /* send_off[nnb] * nz: packed values, entry s level k at s*nz + k */
  void *req;               /* MPI requests (2 nnb) and receive datatypes (nnb), grid.c */
  int32_t inflight;
} pk_grid_xchg;

/** Allocate the exchange buffers of an object with nz levels on grid g (nothing to do on one rank). */
int pk_grid_xchg_init(const struct pkrylov_grid_s *g, int32_t nz, pk_grid_xchg *X);
/** Free them (a zeroed X is fine). */
void pk_grid_xchg_free(pk_grid_xchg *X);
/** Pack the edge values of x (compact order, X->nz levels) that other ranks need and post the messages. */
int pk_grid_xchg_begin(const struct pkrylov_grid_s *g, const double *x, pk_grid_xchg *X);
/** Wait for the exchange begun by pk_grid_xchg_begin (X->halo then holds the neighbours' values). */
int pk_grid_xchg_end(const struct pkrylov_grid_s *g, pk_grid_xchg *X);
/** One blocking exchange of packed buffers in the layout of pk_grid_xchg (sbuf: send_off[nnb] * nz values
 *  in, halo: nhalo * nz out; the CUDA backend's host-staged path). Collective among neighbours. */
PK_PLUGIN_API int pk_grid_exchange_bufs(const struct pkrylov_grid_s *g, int32_t nz, const double *sbuf, double *halo);
/**
 * Per edge cell values across the edges (set-up: coefficients, masks): theirs[ecell + nedge*k] := the value
 * mine[] holds at the neighbour's edge cell that faces this one (0 at walls), for nz levels. Collective.
 */
int pk_grid_edge_swap(const struct pkrylov_grid_s *g, int32_t nz, const double *mine, double *theirs);

/** Halo layout <-> compact order of nz levels (dir 0: pack src = halo'd array; 1: unpack), memory space mem;
 *  errors name func. */
int pk_grid_copy_mem(const struct pkrylov_grid_s *g, int32_t nz, int32_t mem, const double *src, double *dst,
                     int dir, const char *func);

/** The stencil coefficients of an operator or of an AINV preconditioner. */
typedef struct {
  double *aW, *aS, *aV, *aC; /* n each (kslow / compact order); aV zero at k = 0 */
  uint8_t *wet;            /* n or NULL (operators only) */
  double *edge;            /* grid stencils: the couplings of the edge cells across the tile edges, nedge * nz
                              (edge cell e at level k: edge[e + nedge*k]; 0 at walls and dry cells); else NULL */
} pk_stencil;

/**
 * y = A x of the stencil c on grid g, nz levels (compact order): the exchange X begun for x, the columns
 * that need no remote value computed meanwhile, then the rest. Every cell summed as
 * pkrylov_operator_create_stencil7() sums its rows. OpenMP over lines. Returns 0 or an MPI error (y then
 * holds no result).
 */
int pk_grid_stencil_apply(const struct pkrylov_grid_s *g, int32_t nz, const pk_stencil *c, const double *x,
                          double *y, pk_grid_xchg *X);
/** Free the arrays of a stencil (not the struct). */
void pk_stencil_free(pk_stencil *c);

/* ------------------------------------------------------------------------------------------------ */
/* Operators                                                                                         */

struct pkrylov_operator_s {
  pkrylov_context ctx;
  int32_t type;            /* pkrylov_operator_type */
  int64_t n;               /* rows = columns */
  int64_t nnz;             /* entries of the equivalent CSR matrix */
  int32_t nx, ny, nz;      /* grid (stencil, thin shell); 0 for CSR */
  int64_t refs;            /* preconditioners/solvers holding this operator */
  const uint8_t *wet;      /* NULL = every row active; else wet[i] = 0 for dry cells (points into
                              stencil.wet) */
  uint64_t coef_version;   /* incremented by every update of the coefficients (the solvers' cached ||A||
                              of pipelined CG's automatic residual replacement, pk_rr_init) */

  struct {                 /* CSR, 0-based, columns sorted within each row */
    int64_t *rowptr;       /* n+1 */
    int32_t *colind32;     /* nnz, when n <= INT32_MAX */
    int64_t *colind64;     /* nnz, otherwise */
    double *values;        /* nnz */
    int64_t col_offset;    /* distributed CSR (dist_csr.c): local column c is stored as c + col_offset (the
                              ghost columns below the block come first); 0 otherwise */
  } csr;

  pk_stencil st;           /* 7-point column stencil, kslow layout, copies with the mask applied and the
                              couplings across the grid boundary set to zero (a grid stencil: the compact
                              order, couplings across the tile edges in st.edge) */

  struct {                 /* thin shell, matrix-free */
    pkrylov_thinshell_params p;
    double *a, *b, *c, *d; /* level vectors, nz each: a = omega^2 h, b/c = vertical couplings, d = V */
    double *area;          /* nx*ny   |T| per column */
    double *ax;            /* (nx+1)*ny  face weight between columns (i-1,j) and (i,j) at ax[i + (nx+1)*j];
                              0 on the lateral boundary faces */
    double *ay;            /* nx*(ny+1)  face weight between (i,j-1) and (i,j) at ay[i + nx*j] */
    double *asum;          /* nx*ny   sum of the face weights of a column */
  } ts;

  struct {                 /* user operator (CPU only): y = A x by the caller's routine */
    pkrylov_apply_fn apply;
    void *data;            /* the caller's pointer, passed through */
    double *scratch;       /* n: A x of the whole vector for the fused loops, which cannot call the
                              routine chunk by chunk */
    int32_t failed;        /* sticky: the routine returned nonzero since the last pk_user_reset() */
  } user;                  /* (scratch and failed serve the halo-exchange stencil too) */

  struct {                 /* 7-point stencil with a halo exchange (CPU only; type STENCIL7, st holds the
                              in-tile couplings as for a plain stencil): the couplings across the tile
                              edges, 0 for dry cells and walls */
    pkrylov_halo_fn exchange; /* NULL for every other operator */
    void *data;            /* the caller's pointer, passed through */
    double *xh;            /* (nx+2)*(ny+2)*nz: x with its halo of width one */
    double *cw, *ce;       /* ny*nz: cell (0,j,k) to (-1,j,k); cell (nx-1,j,k) to (nx,j,k) */
    double *cs, *cn;       /* nx*nz: cell (i,0,k) to (i,-1,k); cell (i,ny-1,k) to (i,ny,k) */
  } halo;
  void *dev;               /* CUDA: device copies (pk_cuda_backend.cu), NULL on the CPU */
  struct pkrylov_grid_s *grid; /* a grid stencil (grid_op.c): its grid, NULL otherwise */
  pk_grid_xchg gx;         /* ... and the buffers of its exchanges */
  void *dist;              /* dist.c: a distributed grid operator's block, halo buffers and neighbours
                              (type THINSHELL or STENCIL7, nx/ny/n local; ts holds the local geometry, st
                              the local aV/aC/wet), NULL otherwise */
  pk_busy_flag busy;       /* operators with state during a product (pk_op_whole_vector: user.scratch,
                              halo.xh, the distributed halo buffers): held by a solve or product with it */
};

/**
 * 1 when A is applied on whole vectors only (a user operator, a stencil with a halo exchange, a
 * distributed operator): the fused loops then call pk_op_apply_all into A->user.scratch before their
 * chunk loop.
 */
static inline int pk_op_whole_vector(const struct pkrylov_operator_s *A) {
  return A->type == PKRYLOV_OPERATOR_USER || A->halo.exchange != NULL || A->dist != NULL || A->grid != NULL;
}
/** y = A x of a grid stencil (grid_op.c), with its exchange; a failure gives NaN and A->user.failed. */
void pk_grid_op_apply(const struct pkrylov_operator_s *A, const double *x, double *y);
/** The local CSR row of compact cell q of a single-rank grid stencil (sorted columns); returns its length. */
int pk_grid_op_row(const struct pkrylov_operator_s *A, int64_t q, int64_t *cols, double *vals);
/** Rows [r0, r1) of the column stencil st on an nx x ny x nz grid (operator.c; serial). */
void pk_st_apply_rows(const pk_stencil *st, int64_t nx, int64_t ny, int64_t nz, const double *x, double *y,
                      int64_t r0, int64_t r1);

/** y = A x of a distributed operator (dist.c): halo exchange overlapped with the rows that need none. */
void pk_dist_apply(const struct pkrylov_operator_s *A, const double *x, double *y);
/** Free the distributed part of an operator (NULL is a no-op). */
void pk_dist_free(void *dist);
/** A distributed operator's tile for the CUDA backend (pk_dist_get_tile). */
typedef struct {
  int32_t nx, ny, nz;  /* the tile */
  int32_t has[4];      /* a neighbour tile to the west, east, south, north (exchanges happen) */
  int32_t nb[4];       /* the neighbours' ranks in the context's communicator (-1: none) */
  double *aWe, *aSn;   /* stencil: the east neighbour's aW of its first column (ny*nz, j + ny*k), the north
                          neighbour's aS of its first row (nx*nz, i + nx*k), masked; malloc'ed copies the
                          caller frees; NULL for the thin shell */
} pk_dist_tile;
/** The tile of distributed operator A (PKRYLOV_ERR_INTERNAL when A is not distributed). */
PK_PLUGIN_API int pk_dist_get_tile(const struct pkrylov_operator_s *A, pk_dist_tile *t);
/**
 * Start a halo exchange of caller-packed edges (CUDA backend: pinned host buffers): snd and rcv hold the
 * four directions W, E (ny*nz each, index j + ny*k), S, N (nx*nz, i + nx*k) one after the other; snd the
 * tile's own edges, rcv gets the neighbours'. Finish with pk_dist_exchange_end before touching either.
 */
PK_PLUGIN_API int pk_dist_exchange_begin(const struct pkrylov_operator_s *A, double *rcv, double *snd);
PK_PLUGIN_API int pk_dist_exchange_end(const struct pkrylov_operator_s *A);
/** The distributed parts (A->dist) start with their kind, so that dist.c can route the CSR ones. */
enum { PK_DIST_GRID = 1, PK_DIST_CSR = 2 };
static inline int32_t pk_dist_kind(const void *dist) { return dist ? *(const int32_t *)dist : 0; }
/** y = A x of a distributed CSR operator (dist_csr.c): ghost exchange overlapped with the inner rows. */
void pk_dist_csr_apply(const struct pkrylov_operator_s *A, const double *x, double *y);
/** Free the distributed part of a CSR operator (dist_csr.c). */
void pk_dist_csr_free(void *dist);
/**
 * Whether the column preconditioner (levels, layout) can work on a distributed CSR operator without
 * communication: every rank's block must hold whole columns (the same answer on every rank, from the
 * partition table every rank keeps). Errors from func.
 */
int pk_dist_csr_check_columns(const struct pkrylov_operator_s *A, const char *func, int32_t levels,
                              int32_t layout);
/** pkrylov_operator_gather (dir 0: x_local -> x_global on root) and scatter (dir 1) of a CSR operator. */
int pk_dist_csr_gather_scatter(const struct pkrylov_operator_s *A, const char *func, int32_t root,
                               const double *x_local, double *x_global, int dir);

/**
 * y[r] = (A x)[r] for rows r in [r0, r1). Reads x anywhere, writes only y[r0..r1). Serial (the caller
 * parallelises over row chunks). A user operator (or a halo-exchange stencil, pk_op_whole_vector())
 * cannot be applied by rows: for [0, n) this calls its routine (as pk_op_apply_all), for a part it writes
 * NaN (a misuse then shows as a NaN breakdown); the fused loops apply such an operator once with
 * pk_op_apply_all before their chunk loop.
 */
void pk_op_apply_rows(const struct pkrylov_operator_s *A, const double *x, double *y, int64_t r0,
                      int64_t r1);
/**
 * 0 when A->type is a ::pkrylov_operator_type, else PKRYLOV_ERR_INTERNAL (a corrupted handle) raised as
 * func, naming the value. Every entry point that dispatches on the type checks it first: the product loops
 * cannot return an error (they write NaN for an unknown type).
 */
int pk_op_check_type(const struct pkrylov_operator_s *A, const char *func);
/**
 * y = A x over all rows, OpenMP-parallel over fixed row chunks. A user operator calls its routine once
 * (serially), a halo-exchange stencil its exchange once; when the routine returns nonzero, or failed
 * before since the last pk_user_reset() (it is then not called again), y is set to NaN, the sticky flag
 * A->user.failed is set and the first failure is recorded in the context (PKRYLOV_ERR_CALLBACK); see
 * pk_user_check().
 */
void pk_op_apply_all(const struct pkrylov_operator_s *A, const double *x, double *y);
/** diag[i] = A[i][i] for all rows (0 where none is stored). */
int pk_op_get_diagonal(const struct pkrylov_operator_s *A, double *diag);
/**
 * For the automatic residual replacement of pipelined CG (pk_rr.h): *amax = max |a_ii| over the local rows
 * (wet cells), 0 for a user operator (no entries); *mu = the most nonzeros of a local row (7 for the grid
 * operators and user operators). Local: the caller takes the maximum over the ranks.
 */
int pk_op_rr_norm(const struct pkrylov_operator_s *A, double *amax, double *mu);
/**
 * Column tridiagonal: with nz levels and the layout's index map cell(c, k), for every cell
 * lo[cell] = A[cell][cell(c,k-1)], di[cell] = A[cell][cell], up[cell] = A[cell][cell(c,k+1)] (0 at the
 * column ends and where no entry is stored). Arrays of n values, indexed by cell.
 * layout: PKRYLOV_LAYOUT_KSLOW (cell = c + ncols*k) or PKRYLOV_LAYOUT_KFAST (cell = k + nz*c).
 */
int pk_op_get_tridiag(const struct pkrylov_operator_s *A, int32_t nz, int32_t layout, double *lo,
                      double *di, double *up);

/**
 * Finish creating an operator: upload it when the context runs on CUDA, count it, hand it out. On failure
 * A is freed.
 */
int pk_op_register(pkrylov_context ctx, struct pkrylov_operator_s *A, pkrylov_operator *out);
/** Free an operator's arrays (host and device) and the operator itself (any member may be NULL). */
void pk_op_free(struct pkrylov_operator_s *A);

/** Thin-shell geometry and level vectors into A->ts (thinshell.c); A->ts.p must be set. */
int pk_thinshell_setup(pkrylov_context ctx, struct pkrylov_operator_s *A);
/**
 * Thin-shell geometry of the block of columns [i0, i0+nxl) x [j0, j0+nyl) of p's grid (global formulas,
 * bitwise the values of the whole grid's): area and asum nxl*nyl, ax (nxl+1)*nyl (face il between local
 * columns il-1 and il, il = 0 and nxl being the block's west and east faces, 0 on the grid boundary), ay
 * nxl*(nyl+1).
 */
void pk_thinshell_columns(const pkrylov_thinshell_params *p, int64_t i0, int64_t nxl, int64_t j0, int64_t nyl,
                          double *area, double *ax, double *ay, double *asum);
/** The thin shell's level vectors a, b, c, d (nz each). */
void pk_thinshell_levels(const pkrylov_thinshell_params *p, double *a, double *b, double *c, double *d);
/** Validate thin-shell parameters (errors from func). */
int pk_thinshell_check_params(pkrylov_context ctx, const char *func, const pkrylov_thinshell_params *p);

/* ------------------------------------------------------------------------------------------------ */
/* Preconditioners                                                                                   */

struct pkrylov_precond_s {
  pkrylov_context ctx;
  pkrylov_operator A;      /* NULL for USER */
  int32_t type;            /* pkrylov_precond_type */
  int64_t n;
  int64_t refs;            /* solvers holding this preconditioner (destroy refused while > 0) */
  /* Columns: NONE and JACOBI are treated as nz = 1, ncols = n, kslow. */
  int64_t ncols;
  int32_t nz;
  int32_t layout;          /* PKRYLOV_LAYOUT_KSLOW or PKRYLOV_LAYOUT_KFAST */
  int64_t col_stride;      /* cell(c,k) = c*col_stride + k*lev_stride */
  int64_t lev_stride;
  int32_t symmetric;       /* COLUMN: 1 = every column symmetric definite: L D L^T (dpttrf) */
  int32_t from_caller;     /* COLUMN symmetric: dinv/lmul are the caller's factors
                              (pkrylov_precond_create_column_factors), not computed from A */
  double *dinv;            /* JACOBI: 1/diag. COLUMN symmetric: signed 1/d of the LDL^T factor of
                              s*T (s = +-1 per column segment between zero couplings, folded in), per
                              cell */
  double *lmul;            /* COLUMN symmetric: L multipliers (dpttrf e/d), per cell (level k holds the
                              multiplier between k and k+1) */
  /* COLUMN general (dgttrf), stored per column contiguously: column c at offset c*nz */
  double *gdl, *gd, *gdu, *gdu2;
  int32_t *ipiv;
  struct {                 /* USER (CPU only; A is NULL): y = M^-1 x by the caller's routine */
    pkrylov_apply_fn apply;
    void *data;            /* the caller's pointer, passed through */
    int32_t failed;        /* sticky: the routine returned nonzero since the last pk_user_reset() */
  } user;
  struct {                 /* AINV: the 5-point approximate inverse (grid_op.c) */
    pk_stencil c;          /* pW in c.aW, pS in c.aS, pC in c.aC (c.aV zeros); c.edge on a grid */
    double offdiag;        /* built from A with this off-diagonal factor; 0: the caller's coefficients */
    pk_grid_xchg gx;       /* a grid's exchange buffers */
  } ainv;
  void *dev;               /* CUDA: device copies (pk_cuda_backend.cu), NULL on the CPU */
  pk_busy_flag busy;       /* USER: held by a solve or product with it (user.failed is its state) */
};

/** 1 when M is applied on whole vectors only (a user routine; AINV, which reads the neighbours of r). */
static inline int pk_pc_whole_vector(const struct pkrylov_precond_s *M) {
  return M->type == PKRYLOV_PRECOND_USER || M->type == PKRYLOV_PRECOND_AINV;
}
/** z = M^-1 r of an AINV preconditioner (grid_op.c); a grid exchange failure gives NaN and M->user.failed. */
void pk_ainv_apply(const struct pkrylov_precond_s *M, const double *r, double *z);
/** Free what an AINV preconditioner holds (grid_op.c). */
void pk_ainv_free(struct pkrylov_precond_s *M);
/** Recompute a Jacobi or column preconditioner from its operator's current entries (precond.c); errors name
 *  func; on an error M is unchanged. */
int pk_pc_refactor(struct pkrylov_precond_s *M, const char *func);

/**
 * z = M^-1 r on the columns [c0, c1) only (cells of those columns). Serial. A user preconditioner works on
 * whole vectors only: for [0, n) this calls its routine (as pk_pc_apply_all), for a part it writes NaN.
 */
void pk_pc_apply_cols(const struct pkrylov_precond_s *M, const double *r, double *z, int64_t c0,
                      int64_t c1);
/** 0 when M->type is a ::pkrylov_precond_type, else PKRYLOV_ERR_INTERNAL raised as func (pk_op_check_type). */
int pk_pc_check_type(const struct pkrylov_precond_s *M, const char *func);
/**
 * The CG preconditioner loop fused into the column sweeps where the preconditioner has such a form
 * (column, symmetric, k-slow): r -= alpha q; z = M^-1 r; out[0] = (r, z), out[1] = (r, r) on the
 * columns [c0, c1). Returns 1 when done, 0 when the caller must do it in separate passes.
 */
int pk_pc_cg_step_cols(const struct pkrylov_precond_s *M, double alpha, double *r, const double *q, double *z,
                       int64_t c0, int64_t c1, double *out);
/**
 * z = M^-1 r, OpenMP-parallel over fixed column chunks. A user preconditioner calls its routine once, with
 * the failure handling of pk_op_apply_all() (z = NaN, sticky M->user.failed, PKRYLOV_ERR_CALLBACK in the
 * context).
 */
void pk_pc_apply_all(const struct pkrylov_precond_s *M, const double *r, double *z);

/* ------------------------------------------------------------------------------------------------ */
/* User callbacks (operator.c). The fused CPU loops return void, so a routine that returns nonzero    */
/* sets a sticky flag in its object and records the error in the context; the solver resets the      */
/* flags when a solve starts and checks them after every step that may have called a routine.        */

/** z = M^-1 r by the routine of user preconditioner M, failure handling as pk_op_apply_all(). */
void pk_pc_user_apply(const struct pkrylov_precond_s *M, const double *r, double *z);
/** Forget earlier callback failures of A and M (either may be NULL or of another kind). */
void pk_user_reset(struct pkrylov_operator_s *A, struct pkrylov_precond_s *M);
/**
 * PKRYLOV_ERR_CALLBACK when the routine of A or of M (either may be NULL or of another kind) returned
 * nonzero since the last pk_user_reset() (the message is already in the context), else PKRYLOV_SUCCESS.
 */
int pk_user_check(const struct pkrylov_operator_s *A, const struct pkrylov_precond_s *M);
/** Columns per chunk used by the fused CPU loops for this preconditioner. */
int64_t pk_pc_chunk_cols(const struct pkrylov_precond_s *M);

/* ------------------------------------------------------------------------------------------------ */
/* Use by threads (context.c)                                                                        */

/** 1 when the context serves one solve at a time: a CUDA context (one stream) or one with a communicator. */
static inline int pk_context_exclusive(pkrylov_context ctx) {
  return ctx->be->device || ctx->mpi != NULL;
}
/** 1 when a product with A changes state in A (A->busy guards it): pk_op_whole_vector(). */
static inline int pk_op_stateful(const struct pkrylov_operator_s *A) { return A && pk_op_whole_vector(A); }
/** 1 when M is a preconditioner whose use changes state in it (a user routine: user.failed). */
static inline int pk_pc_stateful(const struct pkrylov_precond_s *M) {
  return M && M->type == PKRYLOV_PRECOND_USER;
}
/**
 * Take the busy flags a solve or product of the call func needs: the context's when it is exclusive, A's
 * and M's when they are stateful (either may be NULL); arg names the caller's argument that brought them
 * ("s", "A", "M"). When another call holds one: PKRYLOV_ERR_BUSY with a message naming arg, nothing held.
 * Release with pk_use_end().
 */
int pk_use_begin(pkrylov_context ctx, const char *func, const char *arg, struct pkrylov_operator_s *A,
                 struct pkrylov_precond_s *M);
/** Release what pk_use_begin() took (the same arguments). */
void pk_use_end(pkrylov_context ctx, struct pkrylov_operator_s *A, struct pkrylov_precond_s *M);

/* ------------------------------------------------------------------------------------------------ */
/* Starved threads (context.c)                                                                       */

/**
 * A solver on a context with the default thread count chooses, solve by solve, between that count and one
 * thread: on a node where other processes hold the cores, an OpenMP team waits for its descheduled members
 * (and its idle threads spin meanwhile, against those processes), and one thread is then many times faster
 * (docs/performance.md, "Threads"). Each solve is timed (seconds per iteration); now and then a solve runs
 * with the other choice (a probe) and the faster one is kept; the probes grow rarer while the choice holds
 * (every PK_THREADS_PROBE_MIN to PK_THREADS_PROBE_MAX solves), and a solve on the default count more than
 * twice as slow as the last one probes at once. Results do not depend on it (chunk-ordered sums).
 */
typedef struct {
  int32_t one;        /* 1: this solver's solves run on one thread */
  int32_t solves;     /* solves timed so far */
  int32_t next_probe; /* the solve (count) that runs the other choice */
  int32_t gap;        /* solves between probes now */
  double t[2];        /* seconds per iteration last measured: [0] the default count, [1] one thread */
  int32_t probing;    /* the solve in progress is a probe */
  int32_t saved;      /* pk_threads_begin: the calling thread's override before this solve, */
  void *saved_ctx;    /* and the context it applied to */
} pk_thread_choice;

#define PK_THREADS_PROBE_MIN 4
#define PK_THREADS_PROBE_MAX 64

/**
 * Before a solve of s: when the choice applies (CPU backend, the context's default count above one, n at
 * least PK_PAR_MIN_ROWS), make the calling thread's loops on s's context use the chosen count (a
 * thread-local override that pk_num_threads reads for that context; nested solves restore it).
 */
void pk_threads_begin(pkrylov_solver s);
/** After the solve begun with pk_threads_begin(): undo the override; a successful solve's time per iteration
 *  updates the choice. */
void pk_threads_end(pkrylov_solver s, int ok);

/* ------------------------------------------------------------------------------------------------ */
/* Solvers                                                                                           */

struct pkrylov_solver_s {
  pkrylov_context ctx;
  int32_t type;
  pkrylov_operator A;
  pkrylov_precond Mobj; /* the caller's preconditioner (may be NULL or NONE), reference-counted */
  pkrylov_precond M;    /* the one applied: NULL for none */
  int64_t n;
  double rtol, atol;
  int32_t maxit, nonzero_guess, true_res_interval, replace_interval, stag_window, history_on;
  pkrylov_monitor_fn monitor;
  void *monitor_user;
  double *part;           /* per-chunk partial sums (CPU: the engine's CG loops, ||b||) */
  double *hist;
  int32_t hist_len, hist_cap;
  pkrylov_result res;
  int32_t has_result;
  int32_t mixed;          /* CUDA: 0 fp64, 1 fp32 preconditioner factors, 2 fp32 factors and operator */
  int32_t sync_interval;  /* CUDA: iterations between reads of the device state */
  int32_t restart;        /* GMRES family: Krylov vectors per cycle */
  int32_t step;           /* CA-GMRES: basis vectors per block, 0 = auto */
  int32_t stop_rule;      /* PKRYLOV_STOP_CONFIRMED or PKRYLOV_STOP_RECURRENCE */
  int32_t min_res;        /* 1: return the minimum-residual iterate (CG, pipelined CG, SRCG) */
  pk_options opts;        /* the context's options at creation; its solver-level fields may be changed
                             (pkrylov_solver_set_option), the context-level ones are read from ctx->opts */
  /* pipelined CG's automatic residual replacement: this rank's max |a_ii| and most entries of a row
     (pk_op_rr_norm, an O(n) pass over the operator), kept while the operator's coef_version is rr_version
     (a model solves with the same operator every time step) */
  int32_t rr_have;
  uint64_t rr_version;
  double rr_amax, rr_mu;
  void *kry;              /* the methods on the vector engine: their engine (pk_kry.h), NULL until a solve */
  double *halo_bx;        /* pkrylov_solver_solve_halo: compact copies of b and x (2 n), made at first use */
  void *halo_bx_dev;      /* ... the same on the device (CUDA, device arrays) */
  void *dev;              /* CUDA: device work area (pk_cuda_solver.cu), NULL on the CPU */
  pk_busy_flag busy;      /* held by every call on the solver (a solve for its whole length) */
  pk_thread_choice threads; /* the default count or one thread, measured solve by solve (context.c) */
};

/* Residual replacement (pkrylov_solver_set_residual_replacement) */

/** The interval of the methods that replace at fixed intervals only (pipelined BiCGStab) when the setting is
 *  PKRYLOV_REPLACE_AUTO, the automatic rule of pipelined CG. */
#define PK_REPLACE_FIXED_DEFAULT 50
/** The interval of fixed replacements: the setting, PK_REPLACE_FIXED_DEFAULT for PKRYLOV_REPLACE_AUTO. */
int pk_solver_replace_every(const struct pkrylov_solver_s *s);
/** A fresh estimate of the automatic rule (pk_rr.h) for a solve of s with ||b|| = bnorm: ||A|| and mu from
 *  the operator over all ranks (collective). */
PK_PLUGIN_API int pk_rr_init(pkrylov_solver s, double bnorm, pk_rr_est *e);

/* Residual bookkeeping shared by the drivers (kry.c, cg.c, the CUDA CG driver), in solver.c */

/** A converged recurrence residual whose true residual is too large restarts the iteration this often
 *  before the solve stops with PKRYLOV_DIVERGED_STAGNATION (the tolerance is below attainable accuracy). */
#define PK_MAX_CONFIRM_FAILURES 5

/**
 * Record the recurrence residual res of iteration it: history (when on), monitor, stagnation window
 * (best/stalled: the caller's running state, best starts at INFINITY). Returns PKRYLOV_STOPPED_BY_MONITOR,
 * PKRYLOV_DIVERGED_STAGNATION or 0.
 */
int pk_solver_record(pkrylov_solver s, double *best, int32_t *stalled, int32_t it, double res);
/** PKRYLOV_CONVERGED_ATOL / _RTOL when res <= tol (tol = max(rtol ||b||, atol)), else 0. */
int pk_solver_converged(pkrylov_solver s, double tol, double res);
/**
 * The stopping test of solver s on a recurrence residual given as its squared sum rr (norm sqrt(rr)):
 * PKRYLOV_STOP_CONFIRMED: pk_solver_converged(s, tol, sqrt(rr)); PKRYLOV_STOP_RECURRENCE: rr < tol * tol
 * (strict) or rr == 0, then PKRYLOV_CONVERGED_ATOL when atol >= tol (atol >= rtol ||b||), else _RTOL.
 */
PK_PLUGIN_API int pk_solver_converged_rr(pkrylov_solver s, double tol, double rr);
/**
 * The end of a solve with the minimum-residual iterate (tracked = 1; else nothing, returns 0): fills
 * res->min_residual = sqrt(min_rr) and min_residual_iteration = min_it and returns 1 when the caller must
 * return the kept iterate instead of the last one (its recurrence sum last_rr > min_rr, MITgcm's rule; or
 * last_rr NaN).
 */
PK_PLUGIN_API int pk_solver_min_result(pkrylov_result *res, int tracked, double min_rr, int32_t min_it, double last_rr);
/** 1 when solver s stops on the recurrence residual alone (PKRYLOV_STOP_RECURRENCE). */
static inline int pk_solver_recurrence(const struct pkrylov_solver_s *s) {
  return s->stop_rule == PKRYLOV_STOP_RECURRENCE;
}
/** A result before a solve: zeros, breakdown_iteration -1, min_residual -1, min_residual_iteration -1. */
PK_PLUGIN_API void pk_result_init(pkrylov_result *res);
/**
 * Sign bookkeeping of a curvature-like scalar of CG ((p, A p), (r, M^-1 r)): the first value fixes *sign
 * (0 before it), so negative definite operators, as ocean models store them, solve. 0 on breakdown: zero,
 * non-finite or a change of sign.
 */
static inline int pk_sign_ok(double v, double *sign) {
  if (!isfinite(v) || v == 0.0)
    return 0;
  const double sg = v > 0 ? 1.0 : -1.0;
  if (*sign == 0.0)
    *sign = sg;
  return sg == *sign;
}
/** Make room for the history of a solve (when on) and empty it. */
int pk_solver_history_reserve(pkrylov_solver s);
/** The solve's host b (and x with a nonzero initial guess) are finite; PKRYLOV_ERR_NOT_FINITE naming func. */
int pk_solver_check_finite(pkrylov_solver s, const char *func, const double *b, const double *x);

/* ------------------------------------------------------------------------------------------------ */
/* Global reductions (reduce.c). Every global sum of a solver goes through these, so that MPI and a  */
/* reproducible mode change one place.                                                               */

/* The exact accumulator of reproducible mode (PK_XACC_DIGITS, PK_XACC_LEN and its code): pk_xacc.h, shared
   with the CUDA kernels. */
#include "pk_xacc.h"
/** Most values one reproducible reduction carries. */
#define PK_XACC_MAX 8

/** Pending split-phase reduction. */
typedef struct {
  double *vals;
  int count;
  int active;
  int exact;                /* reproducible: the sums travel as the accumulators below */
  union {                   /* the table's request (pk_comm_req of pk_comm.h) of the iallreduce */
    unsigned char bytes[64];
    void *align_p;
    int64_t align_i;
  } mpi_req;
  int64_t acc[PK_XACC_MAX * PK_XACC_LEN];
  int64_t *xacc;            /* pk_allreduce_xdots_begin: the caller's accumulators (NULL: acc above) */
  int dd;                   /* pk_allreduce_xdots_begin: results as double-double (hi, lo) pairs */
} pk_reduce_request;

/** vals[0..count) := global sums of the local values (blocking). */
PK_PLUGIN_API int pk_allreduce_sum(pkrylov_context ctx, double *vals, int count);
/** vals[0..count) := their maxima over the ranks (blocking; every value finite and >= 0, count <= 8). Exact,
 *  so the same on every rank and for every decomposition. */
int pk_allreduce_max_nonneg(pkrylov_context ctx, double *vals, int count);
/** Start a global sum of vals[0..count) in place; finish with pk_allreduce_end() before reading vals. */
int pk_allreduce_begin(pkrylov_context ctx, double *vals, int count, pk_reduce_request *req);
/** Finish a reduction started by pk_allreduce_begin() (or pk_allreduce_dots_begin()). */
int pk_allreduce_end(pkrylov_context ctx, pk_reduce_request *req);
/**
 * A per-context override of the global sums (reduce.c calls it first when ctx->reduce_hook is set): used
 * only by the reverse-communication solve of rci_kry.c, which hands every global sum to its caller. sum
 * is blocking; begin/end are the split phase (vals stays untouched by the solver in between). Each returns
 * a status (an error aborts the solve).
 */
typedef struct pk_reduce_hook {
  int (*sum)(void *data, pkrylov_context ctx, double *vals, int count);
  int (*begin)(void *data, pkrylov_context ctx, double *vals, int count);
  int (*end)(void *data, pkrylov_context ctx, double *vals, int count);
} pk_reduce_hook;

/**
 * Global dot products vals[j] = (x[j], y[j]) over the n local values (only where wet[i] != 0 when wet is
 * not NULL), j < count <= PK_XACC_MAX, whose local values the fused loops already left in vals.
 * Default mode: reduces vals as pk_allreduce_sum(). Reproducible mode: recomputes them from the vectors
 * with the exact accumulator and sums the accumulators over the ranks as integers, so the result is the
 * rounded exact sum, the same for any decomposition (vals' local values are ignored).
 */
int pk_allreduce_dots(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                      const double *const *y, const uint8_t *wet);
/** Split-phase pk_allreduce_dots(): finish with pk_allreduce_end(). */
int pk_allreduce_dots_begin(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                            const double *const *y, const uint8_t *wet, pk_reduce_request *req);
/**
 * Reproducible mode's exact dot products of any number of pairs (the vector engine's Gram blocks and basis
 * dots): acc is caller scratch of count * PK_XACC_LEN int64 that must live until pk_allreduce_end(), which
 * writes vals[j] (dd 0) or the double-double pair vals[2j] = hi, vals[2j+1] = lo (dd 1: hi the exact sum
 * rounded, lo the rest rounded). exact_prod 1 adds the exact products (fma two-product) instead of the
 * rounded ones. Called in reproducible mode only (the caller checks ctx->reproducible).
 */
int pk_allreduce_xdots_begin(pkrylov_context ctx, double *vals, int count, int64_t n, const double *const *x,
                             const double *const *y, const uint8_t *wet, int exact_prod, int dd, int64_t *acc,
                             pk_reduce_request *req);
/**
 * Start the global sum of local exact accumulators (reproducible mode; acc: count * PK_XACC_LEN int64,
 * normalised, living until pk_allreduce_end(), which writes vals as pk_allreduce_xdots_begin() does): the
 * fused loops fill acc themselves (pk_xdot) while they read the vectors.
 */
int pk_allreduce_xacc_begin(pkrylov_context ctx, double *vals, int count, int dd, int64_t *acc,
                            pk_reduce_request *req);
/** pk_allreduce_xacc_begin() and pk_allreduce_end() (blocking). */
int pk_allreduce_xacc(pkrylov_context ctx, double *vals, int count, int dd, int64_t *acc);

/** Lanes of a pk_xdot expansion (one AVX-512 register of doubles) and its levels. */
#define PK_XD_W 8
#define PK_XD_K 4
/**
 * One thread's exact dot products in one pass (xdot.c): per sum two floating-point expansions of PK_XD_K
 * levels in PK_XD_W lanes (the products, and their rounding errors for exact products) and an exact
 * accumulator for what the expansions cannot hold. pk_xdot_init, then any number
 * of pk_xdot_add (any rows, any order), then pk_xdot_merge adds the exact sums into shared accumulators.
 */
typedef struct {
  int count;
  double lev[PK_XACC_MAX][2][PK_XD_K][PK_XD_W];
  int64_t acc[PK_XACC_MAX][PK_XACC_LEN];
  int64_t since[PK_XACC_MAX]; /* accumulator additions since its last carry pass */
  int careful[PK_XACC_MAX];   /* calls of pk_xdot_add left that test every vector (xdot_kernel.h) */
} pk_xdot;
/** Empty sums 0..count-1 (count <= PK_XACC_MAX). */
void pk_xdot_init(pk_xdot *X, int count);
/**
 * Sum j += x[i] * y[i] (the rounded products; exact_prod: the exact products, p and fma(x, y, -p)) over the
 * rows i of nrun runs [i0 + k stride, i0 + k stride + len), k < nrun, those with wet[i] != 0 only when wet
 * is not NULL.
 */
void pk_xdot_add(pk_xdot *X, int j, const double *x, const double *y, const uint8_t *wet, int exact_prod,
                 int64_t i0, int64_t len, int64_t nrun, int64_t stride);
/** out[j * PK_XACC_LEN ..] += the exact sum j (normalised), j < count; in an OpenMP critical section, so the
 *  threads of a region may merge into one out (integers: any order). */
void pk_xdot_merge(pk_xdot *X, int64_t *out);

/** sums[j] = sum over chunks c in increasing order of partials[c*nvals + j] (deterministic local sum). */
void pk_sum_partials(const double *partials, int64_t nchunks, int nvals, double *sums);

/* ------------------------------------------------------------------------------------------------ */
/* Fused CPU loops (cpu_kernels.c). "local" results: the caller reduces them with pk_allreduce_*.     */

/** Row chunk length of the fused loops. */
#define PK_ROW_CHUNK 4096

/**
 * Every function takes `part`, caller scratch of at least pk_cpu_scratch_size(n, M) doubles, for the
 * per-chunk partial sums. A user operator or preconditioner is applied once on the whole vector (through
 * pk_op_apply_all / pk_pc_apply_all) before or between the chunk loops; a failed routine leaves NaN in
 * the results and its flag set (pk_user_check()). `xacc` is NULL, or (reproducible mode) room for the
 * step's exact local sums, one accumulator per value of out (filled normalised, in the same pass).
 */
int64_t pk_cpu_scratch_size(int64_t n, const struct pkrylov_precond_s *M);
/** out[0] = (x, y) local, deterministic. */
void pk_cpu_dot(pkrylov_context ctx, int64_t n, const double *x, const double *y, double *part,
                double *out);
/** r = b - A x (0 at dry cells); out[0] = (r, r) local. */
void pk_cpu_residual(const struct pkrylov_operator_s *A, const double *b, const double *x, double *r,
                     double *part, double *out, int64_t *xacc);
/**
 * CG "preconditioner loop": r -= alpha q; z = M^-1 r (M NULL: z = r); out[0] = (r, z), out[1] = (r, r).
 */
void pk_cpu_cg_precond_step(pkrylov_context ctx, const struct pkrylov_precond_s *M, int64_t n, double alpha, double *r,
                            const double *q, double *z, double *part, double *out, int64_t *xacc);
/** CG "operator loop": x += alpha p; p = z + beta p; q = A z + beta q; out[0] = (p, q). */
void pk_cpu_cg_operator_step(const struct pkrylov_operator_s *A, double alpha, double beta, double *x,
                             double *p, const double *z, double *q, double *part, double *out, int64_t *xacc);
/**
 * Pipelined CG update, fused with the operator: with n = A m computed chunk by chunk (or taken from am when
 * not NULL: A m computed earlier, e.g. while a reduction was in flight),
 *   z = n + beta z; q = m + beta q; s = w + beta s; p = u + beta p;
 *   x += alpha p;  r -= alpha s;  u -= alpha q;  w -= alpha z;
 * out[0] = (r, u), out[1] = (w, u), out[2] = (r, r) of the updated vectors; nv = PK_RR_NV (the automatic
 * residual replacement) adds out[3..6] = (x, x), (p, p), (u, u), (q, q) (pk_rr.h), nv =
 * PK_RR_NV_BASE the three dots only.
 */
void pk_cpu_pipecg_step(const struct pkrylov_operator_s *A, const double *am, double alpha, double beta,
                        const double *m, double *z, double *q, double *s, double *p, double *x, double *r,
                        double *u, double *w, int nv, double *part, double *out, int64_t *xacc);

/* ------------------------------------------------------------------------------------------------ */
/* Misc helpers                                                                                      */

/** 1 when all n values are finite. */
int pk_all_finite(const double *v, int64_t n);
/** Index of the first non-finite value, or -1. */
PK_PLUGIN_API int64_t pk_first_nonfinite(const double *v, int64_t n);

#endif /* PK_IMPL_H */
