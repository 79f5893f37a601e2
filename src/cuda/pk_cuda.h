/**
 * @file pk_cuda.h
 * @brief Internal interface of the CUDA backend: device views of the objects, the device-resident solver
 *        state, and the kernel launchers (C linkage; implemented in the .cu files of src/cuda).
 *
 * Conventions
 * - Every pointer in the views and every vector argument is DEVICE memory.
 * - Every launcher enqueues work on `stream` and returns a cudaError_t (as int): the result of
 *   cudaGetLastError() after its launches. None of them synchronises.
 * - Kernels that take `st` (the device state) do nothing when st->status != PK_ST_RUNNING, so a CUDA graph
 *   holding several iterations becomes a chain of no-ops once the solve has stopped.
 * - Reductions are deterministic: a kernel that produces partial sums writes one slot per thread block
 *   (part[block * nvals + j]) using a fixed-shape tree inside the block; a scalar step adds the slots in one
 *   fixed order (see "the scalar steps"), whether it runs as a 1-block kernel or folded into every block of
 *   the next step. Grid sizes depend on the problem only, never on the device. No floating-point atomics.
 * - Arithmetic per cell is written exactly as in the CPU backend (cpu_kernels.c, operator.c, precond.c) and
 *   compiled with -fmad=false, so a kernel and its CPU twin give the same value per cell; only the order of
 *   the global sums differs.
 * - fp32 views (mixed precision): coefficient/factor arrays in float, vectors and sums in double.
 *
 * Ownership (docs/design.md, "The CUDA plugin's files"): the launchers are implemented by family, operators
 * in pk_cuda_op.cu, preconditioners in pk_cuda_precond.cu, the fused CG / pipelined-CG steps and the
 * one-block scalar steps in pk_cuda_steps.cu, vector kernels and reductions in pk_cuda_vec.cu, on the device
 * code of the private headers pk_cuda_dev.cuh (launch shapes, block reduction, actions), pk_cuda_scalar.cuh
 * (the scalar steps, one-block or folded into the steps), pk_cuda_csr.cuh and pk_cuda_grid.cuh (the operator
 * kernels) and pk_cuda_op.cuh (launch_op); pk_cuda_solver.cu and pk_cuda_cg.cu the solve drivers
 * (pk_cuda_solver.h), pk_cuda_rci.cu the reverse communication's device work; pk_cuda_kry*.cu the vector
 * engine; pk_cuda_dist.cu the distributed halos and collectives; pk_cuda_xacc.cu the exact sums;
 * pk_cuda_backend.cu the device memory, streams and uploads; pk_cuda_table.cu the backend table.
 */
#ifndef PK_CUDA_H
#define PK_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "pk_rr.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Device storage of a CSR operator (pk_cuda_op.csr_format). */
enum { PK_CUDA_CSR_PLAIN = 0, PK_CUDA_CSR_DIA = 1, PK_CUDA_CSR_SYMDIA = 2 };
/** Most diagonals (distinct offsets col - row) of a CSR matrix stored as DIA. */
#define PK_CUDA_DIA_MAX 32

/** Device view of an operator. Fields not used by the operator type are NULL. */
typedef struct {
  int32_t type;            /* PKRYLOV_OPERATOR_CSR / _STENCIL7 / _THINSHELL / _USER */
  int64_t n;
  int32_t nx, ny, nz;      /* grid (stencil, thin shell) */
  int32_t fp32;            /* 1: use the float copies of the coefficients (CSR values, stencil) */
  /* CSR, 0-based, sorted columns */
  const int64_t *rowptr;   /* n+1 */
  const int32_t *col32;    /* nnz, or NULL when col64 is used */
  const int64_t *col64;
  const double *val;
  const float *valf;
  /* CSR threads per row: 0 or 1 one thread per row (the row sum in the CPU's order, bitwise the CPU's);
     2, 4, 8, 16 or 32 a group of that many lanes of a warp per row (vector kernel, for long rows): lane l
     adds the entries rp[r] + l, rp[r] + l + L, ... in order (from 0.0), then the lanes are combined by the
     tree lane l += lane l + o for o = L/2, ..., 2, 1 (shuffles); the row sum is lane 0's (a warp gathers
     the sums of its 32 rows in shared memory, then each lane applies the step's action to one row). That order
     differs from the CPU's, so A x differs from the CPU's by rounding (relative 1e-16 times the row's
     sum |a_ij x_j| per entry). pk_cuda_operator_upload picks it from the row lengths
     (pk_cuda_csr_lanes). */
  int32_t csr_lanes;
  /* CSR in diagonal storage (chosen at upload, pk_cuda_operator_upload; option cuda.csr_format):
     csr_format PK_CUDA_CSR_PLAIN: the CSR arrays above. PK_CUDA_CSR_DIA: dia_nd diagonals of n values,
     offsets dia_off[0] < dia_off[1] < ... (col - row), diagonal d at dia[d * n + i] = A[i, i + dia_off[d]]
     (0 where absent or outside the matrix). PK_CUDA_CSR_SYMDIA (A exactly symmetric): only the offsets
     0 = dia_off[0] < dia_off[1] < ... are stored, as in DIA; the lower entries are read by reflection,
     A[i, i - k] = A[i - k, i] = dia[d * n + i - k] for k = dia_off[d]. The CSR arrays are then not on the
     device (NULL). A row sum takes the row's terms in ascending column order (symmetric: the reflected
     offsets by decreasing k, the diagonal, the upper ones by increasing k), from 0.0, skipping the slots
     that hold 0; the matrix has no stored zero (else it stays CSR), so the skipped slots are exactly the
     absent entries and the sum is csr_apply_rows' bit for bit. fp32 views: diaf, float copies. */
  int32_t csr_format;
  int32_t dia_nd;
  int64_t dia_off[PK_CUDA_DIA_MAX];
  const double *dia;
  const float *diaf;
  /* USER (pkrylov_operator_create_user): no coefficients on the device; the solve driver calls the caller's
     routine with device pointers, A x into `pre` (n values), before each launch that applies the operator,
     and the launchers then read (A x)[cell] from `pre` (one thread per cell). */
  const double *pre;
  /* column stencil, index i + nx*(j + ny*k), boundary and dry couplings already zero */
  const double *aW, *aS, *aV, *aC;
  const float *aWf, *aSf, *aVf, *aCf;
  const uint8_t *wet;      /* NULL = all wet */
  /* thin shell (always fp64; these arrays are tiny): level vectors (nz) and per-column geometry */
  const double *ta, *tb, *tc, *td;
  const double *area;      /* nx*ny */
  const double *ax;        /* (nx+1)*ny, ax[i + (nx+1)*j] couples (i-1,j)-(i,j), 0 on the boundary */
  const double *ay;        /* nx*(ny+1), ay[i + nx*j] couples (i,j-1)-(i,j), 0 on the boundary */
  /* Halo-exchange stencil (pkrylov_operator_create_stencil7_exchange; type STENCIL7, the fields above hold
     the in-tile couplings): halo = 1, the couplings of the tile-edge cells to the halo (0 for dry cells and
     walls) hcw, hce (ny*nz, index j + ny*k: cell (0,j,k) to (-1,j,k), cell (nx-1,j,k) to (nx,j,k)), hcs, hcn
     (nx*nz, index i + nx*k: cell (i,0,k) to (i,-1,k), cell (i,ny-1,k) to (i,ny,k)), and the halo'ed work
     array xh of (nx+2)*(ny+2)*nz values, cell (i,j,k) for i in -1..nx, j in -1..ny at index
     (i+1) + (nx+2)*((j+1) + (ny+2)*k) (the layout of pkrylov_halo_fn). A product is
     pk_cuda_halo_fill, the caller's exchange on xh (device memory), the plain stencil, pk_cuda_halo_edges
     (pk_cuda_halo_apply); the solve drivers apply it whole-vector like a USER operator (into `pre`). */
  int32_t halo;
  const double *hcw, *hce, *hcs, *hcn;
  double *xh;
  /* Distributed grid operator (dist.c; src/cuda/pk_cuda_dist.cu), thin shell or column stencil of the
     rank's tile: the neighbour tiles' edge values of the vector being applied (the halo, width one), DEVICE,
     filled by pk_cuda_dist_halo_* before the launch; NULL where the tile has no neighbour (global boundary).
     dhw, dhe: ny*nz values (index j + ny*k), dhs, dhn: nx*nz (index i + nx*k). A cell on a tile edge with a
     neighbour there uses the expression of its global row with the halo value, so the product is bitwise
     the single-rank one (as dist.c). Stencil: dWe = the east neighbour's aW of its first column (ny*nz),
     dSn = the north neighbour's aS of its first row (nx*nz), both masked as the tile's own copies. */
  const double *dhw, *dhe, *dhs, *dhn;
  const double *dWe, *dSn;
  /* Columns a grid launch covers: 0 all; 1 those off the tile edges (0 < i < nx-1, 0 < j < ny-1: they read
     no halo); 2 the tile-edge columns only (compact launch over 2 nx + 2 (ny - 2) columns, or all columns
     when nx <= 2 or ny <= 2). 1 and 2 together cover every column once (interior/edge overlap). */
  int32_t cols;
  void *dist;              /* the distributed state (pk_cuda_dist.cu), NULL when not distributed */
  /* Grid stencil (pkrylov_operator_create_grid_stencil; type STENCIL7, the fields above hold the couplings
     inside the tiles in the compact order, an nx x ny x nz grid whose rows stack the tiles: ny = gsny *
     tiles). A column on a tile edge (i = 0 or nx-1, j mod gsny = 0 or gsny-1) reads the cell across the edge
     through gnb and the coupling to it from gedge, as grid.c's gst_line does: edge cell e of tile t, edge d,
     position m is t * 2 (nx + gsny) + offset(d) + m (offsets: west 0, east gsny, south 2 gsny, north
     2 gsny + nx); gnb[e] >= 0 a column (value x[gnb[e] + nx ny k]), -1 a wall, <= -2 a slot of ghalo (value
     ghalo[(-2 - gnb[e]) + gnhalo k], level-major so that the edge columns of a warp read consecutive slots:
     several ranks, filled by pk_cuda_dist_halo_*); gedge[e + gnedge k] the
     coupling (0 at walls and dry cells). gsny = 0: not a grid stencil. Several ranks (pk_cuda_dist.cu):
     grcols lists the gnrc columns that read a halo slot, grmask flags them per column; cols = 1 launches
     skip them, cols = 2 launches run only them (NULL on one rank: cols is ignored). */
  int32_t gsny;
  int64_t gnedge, gnrc, gnhalo;
  const int64_t *gnb;
  const double *gedge;
  const float *gedgef;
  const double *ghalo;
  const int64_t *grcols;
  const uint8_t *grmask;
  /* 2-D grid stencils (nz = 1): > 0 = launch at most gcap blocks, each thread a few columns (set by CG on its
     views to pk_cuda_grid2d_cap(): fewer partial sums, folded scalar steps, one wave); 0 = a thread
     per column */
  int32_t gcap;
  /* Grid kernels (thin shell, column stencil), from the context's options when the operator is uploaded:
     kc levels per thread before the block cap (option cuda.kc; 0 = the type's default, PKC_KC_TS / PKC_KC),
     l2pf the L2 prefetch distance in levels (option cuda.l2pf, default 1; 0 = none). A view built by hand
     (memset 0) gets the default kc and no prefetch: the same results, prefetching changes no arithmetic. */
  int32_t kc;
  int32_t l2pf;
} pk_cuda_op;

/** Device view of a preconditioner. */
typedef struct {
  int32_t type;            /* PKRYLOV_PRECOND_NONE / _JACOBI / _COLUMN */
  int64_t n, ncols;
  int32_t nz;
  int32_t layout;          /* PKRYLOV_LAYOUT_KSLOW (cell = c + ncols*k) or _KFAST (cell = k + nz*c) */
  int32_t symmetric;       /* COLUMN: 1 = LDL^T factors lmul/dinv; 0 = LU factors with pivoting */
  int32_t fp32;            /* 1: use the float copies of the factors */
  /* JACOBI: dinv = 1/diag per cell. COLUMN symmetric: per cell, as in precond.c:
     forward  y_0 = r_0, y_k = r_k - lmul[cell(c,k-1)] y_{k-1}
     backward z_{nz-1} = dinv y_{nz-1}, z_k = dinv[cell(c,k)] y_k - lmul[cell(c,k)] z_{k+1} */
  const double *dinv, *lmul;
  const float *dinvf, *lmulf;
  /* COLUMN general (dgttrf factors), stored per CELL (re-laid out from the host's per-column storage):
     gdl[cell(c,k)] = dl_k (k < nz-1), gd = d_k, gdu = du_k (k < nz-1), gdu2 = du2_k (k < nz-2),
     ipiv[cell(c,k)] = LAPACK ipiv_k (1-based, within the column) */
  const double *gdl, *gd, *gdu, *gdu2;
  const int32_t *ipiv;
  /* Matrix-free factors: set when the column tridiagonal comes from a thin-shell or column-stencil
     operator, layout k-slow, no dry cells, and every column is one positive definite segment (all dinv > 0,
     no zero coupling). The kernels may then recompute lmul/dinv from `op` with the arithmetic of LAPACK
     dpttrf (e_k / d_k, d_{k+1} - l_k e_k) instead of reading them; the values are the same.
     1: the kernels pick the variant that pays (set by the backend); 2 and 3 force the on-chip and the
     resident variant (tests only); 0: stored factors. */
  int32_t onthefly;
  pk_cuda_op op;           /* onthefly: the operator's view; AINV: the view of its own 5-point stencil (pW, pS,
                              pC as aW, aS, aC, zero aV, the grid's edge couplings), applied as an operator */
} pk_cuda_pc;

/** Device status of a solve (pk_cuda_state.status). */
enum {
  PK_ST_RUNNING = 0,
  PK_ST_CONVERGED = 1,         /* recurrence residual <= tol: the host confirms on the true residual */
  PK_ST_MAXIT = 2,             /* it == maxit */
  PK_ST_BREAKDOWN_MATRIX = 3,  /* (p, A p) zero or sign change */
  PK_ST_BREAKDOWN_PRECOND = 4, /* (r, M^-1 r) zero or sign change */
  PK_ST_NAN = 5,               /* a reduction gave NaN/Inf */
  PK_ST_SUSPECT = 6,           /* pipelined CG: the recurrence (p, A p) lost its sign; the host checks */
  PK_ST_REPLACE = 7            /* pipelined CG, automatic rule (repl): replace the vectors now (pk_rr.h); the
                                  host replaces, sets RUNNING and repl->fresh, and the iteration goes on */
};

/**
 * Device-resident scalars of CG / pipelined CG. The host initialises it (cudaMemcpyAsync), the scalar
 * kernels update it, the host reads it back every sync interval.
 */
typedef struct {
  double rho;        /* CG: (r, z); pipelined CG: gamma = (r, u) of the current iteration */
  double rho_old;    /* pipelined CG: gamma of the previous iteration */
  double sigma;      /* (p, A p) (CG: from the operator loop; pipelined CG: delta - beta gamma / alpha_old) */
  double delta;      /* pipelined CG: (w, u) */
  double alpha, alpha_old, beta;
  double rnorm;      /* recurrence residual 2-norm of the current iteration */
  double tol;        /* max(rtol ||b||, atol) */
  double rho_sign, sigma_sign; /* 0 until fixed by the first value, then +-1 */
  double rr;         /* (r, r) of the current iteration (rnorm^2 as summed) */
  double min_rr;     /* minimum-residual iterate (min_on): the smallest rr so far */
  int32_t it;        /* iterations done */
  int32_t maxit;
  int32_t status;    /* PK_ST_* */
  int32_t first;     /* pipelined CG: 1 right after a (re)start: beta = 0, sigma = delta */
  int32_t breakdown_it; /* iteration at which status became a breakdown, else -1 */
  int32_t recur;     /* 1: the recurrence stop rule, rr < tol^2 (PKRYLOV_STOP_RECURRENCE); 0: rnorm <= tol,
                        the host confirms */
  int32_t min_on;    /* 1: track the minimum-residual iterate (pkrylov_solver_set_min_residual) */
  int32_t min_it;    /* its iteration (-1: none yet) */
  int32_t improved;  /* 1: the current iterate is the new minimum; pk_cuda_copy_improved copies it */
  int32_t pad;
  pk_rr_est *repl;   /* pipelined CG with the automatic residual replacement (PKRYLOV_REPLACE_AUTO): its
                        estimate (device; NULL = off), read and updated in place by the scalar step (its
                        writer block), so the state that every thread copies stays small */
} pk_cuda_state;

/**
 * The scalars of a fused CG loop of the CUDA vector engine (pk_kry.h, pk_cuda_kry_cg.cu): alpha = S[ia] and
 * beta = S[ib], negated when na / nb, with the engine's constants ia (ib) = -1: 1 and -2: 0 (pk_coef);
 * stop >= 0: the loop does nothing while S[stop] != 0 (PK_KRY_IF_RUNNING), -1: it always runs. The *_e
 * launchers take it instead of a pk_cuda_state: the same kernels, the same arithmetic per cell and the same
 * partial sums.
 */
typedef struct {
  const double *S;
  int32_t ia, na, ib, nb;
  int32_t stop, pad;
} pk_cuda_escal;

/* ---- sizes -------------------------------------------------------------------------------------- */

/**
 * CSR threads per row (pk_cuda_op.csr_lanes) for a matrix of n rows, nnz entries and longest row maxrow:
 * 0 (one thread per row) when the mean row length nnz / n is below 24 and no row is both longer than 64
 * and 8 times the mean; else the power of two nearest to an eighth of the mean row length, between 4 and
 * 32 (measurements in pk_cuda_backend.cu). The context option cuda.csr_lanes (0, 1, 2, 4, 8, 16, 32; auto
 * = this rule), read at each upload, overrides the choice (tuning and measurement).
 */
int32_t pk_cuda_csr_lanes(int64_t n, int64_t nnz, int64_t maxrow);

/**
 * Device storage a CSR matrix gets at upload (pk_cuda_operator_upload), from its host arrays: DIA when it
 * has at most PK_CUDA_DIA_MAX distinct offsets col - row, no stored value equal to zero, and the padded
 * storage (offsets) * n is at most 1.5 nnz; SYMDIA when, in addition, every entry (i, j) has its mirror
 * (j, i) with bitwise the same value; else PLAIN. The option cuda.csr_format of A's context, read at
 * each call, forces it: "csr" PLAIN; "dia" DIA/SYMDIA whenever the first two conditions hold (padding
 * not limited); "dia-nosym" as "dia" but never SYMDIA; "auto" (the default) the rule above. Returns the
 * format; *nd and off[0 .. *nd) (ascending) the stored offsets (DIA: all; SYMDIA: those >= 0, 0 always
 * first), *nd = 0 for PLAIN.
 */
struct pkrylov_operator_s;
int32_t pk_cuda_csr_format_choose(const struct pkrylov_operator_s *A, int32_t *nd, int64_t *off);
/** The format an uploaded CSR operator of a CUDA context got (PK_CUDA_CSR_*), and its number of stored
 *  diagonals (NULL allowed; 0 for PLAIN). -1 when A is not an uploaded CSR operator. Tests, benchmarks. */
int32_t pk_cuda_operator_csr_format(const struct pkrylov_operator_s *A, int32_t *nd);
/** "csr", "dia", "symdia". */
const char *pk_cuda_csr_format_name(int32_t format);

/** Number of partial-sum slots (blocks) the fused launchers below write for n cells / this pc. */
int64_t pk_cuda_partials_needed(const pk_cuda_op *op, const pk_cuda_pc *pc);
/** The block cap of CG's 2-D grid-stencil launches over n cells on the current device (pk_cuda_op.gcap): one
 *  wave of its two loops' kernels (at most PKC_GRID2D_BLOCKS) up to PKC_GRID2D_WAVE_CELLS cells,
 *  PKC_GRID2D_WAVES_ABOVE waves above. */
int32_t pk_cuda_grid2d_cap(int64_t n);
/** The automatic choice of CG's and pipelined CG's folded scalar steps (solver option cuda.fold=auto), for
 * the CUDA driver and the vector engine alike (pk_cuda_solver.cu): 1 = fold, for a CSR operator (csr) or a
 * grid operator of nz levels and n unknowns whose loops write nslots partial-sum slots; a grid of one level
 * (a thread per cell, CG's fused 2-D loop among them) folds only up to the CSR operators' slots. */
int pk_cuda_fold_auto(int csr, int64_t n, int64_t nslots, int32_t nz);

/** An open L2 window (option cuda.l2persist, pk_cuda_solver.cu): CG on one GPU keeps its most-read work vectors
 *  in the L2's persisting part, the CG driver's and the vector engine's alike; m = 0: none open. */
typedef struct pk_cuda_l2 {
  int m, dev;
  struct cudaAccessPolicyWindow win;
  cudaStreamAttrValue prev; /* the stream's window before (restored) */
} pk_cuda_l2;
/** The vectors of vbytes a window holds for option opt (-1 auto, 0 none, 1 ... 4): auto only for CG's fused
 *  2-D loop (fused_2d) once 16 vectors exceed the L2, as many as fit in 0.8 of the largest part; at most maxm. */
int pk_cuda_l2_vectors(int opt, int fused_2d, size_t vbytes, int maxm);
/** Open the window over m vectors of vbytes from base on stream (w->m = 0 where the device refuses one). */
void pk_cuda_l2_open(pk_cuda_l2 *w, void *stream, const void *base, int m, size_t vbytes);
/** Close it: the stream's window, the persisting lines (the device's last window) and the limit as before. */
void pk_cuda_l2_close(pk_cuda_l2 *w, void *stream);
/** The window on every kernel node of a captured graph (its nodes do not take the stream's). */
void pk_cuda_l2_nodes(const pk_cuda_l2 *w, cudaGraph_t g);

/* ---- building blocks (used outside the iteration and by the public apply calls) ------------------- */

/** y = A x. */
int pk_cuda_op_apply(void *stream, const pk_cuda_op *op, const double *x, double *y);
/** z = M^-1 r (pc NULL or type NONE: copy). st may be NULL; else nothing happens unless running. */
int pk_cuda_pc_apply(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, const double *r, double *z);
/** r = b - A x, 0 at dry cells; part gets per-block partial (r, r); *nblocks the number of slots. */
int pk_cuda_residual(void *stream, const pk_cuda_op *op, const double *b, const double *x, double *r,
                     double *part, int64_t *nblocks);
/**
 * nv dot products (x[j], y[j]) of n values; part[block * nv + j] per block; *nblocks slots.
 * nv <= 4.
 */
int pk_cuda_dots(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                 double *part, int64_t *nblocks);
/** out[j] = sum over blocks (in order) of part[block * nvals + j], j < nvals, one block, deterministic. */
int pk_cuda_sum_partials(void *stream, const double *part, int64_t nblocks, int nvals, double *out);
/** y += a x with the scalar a read from device memory (e.g. &st->alpha); always runs. */
int pk_cuda_axpy_dev(void *stream, int64_t n, const double *a, const double *x, double *y);
/**
 * Minimum-residual iterate: dst = src (n values) when st->improved and st->status is RUNNING, else nothing
 * (the device decides: no host synchronisation, capturable in a graph). The solve driver launches it where
 * src holds the iterate whose residual the scalar step just tested (CG after the operator loop, pipelined CG
 * after the scalar step), only when the option is on.
 */
int pk_cuda_copy_improved(void *stream, const pk_cuda_state *st, int64_t n, const double *src, double *dst);
/** x[i] = 0 where wet[i] == 0 (wet may be NULL: nothing). */
int pk_cuda_zero_dry(void *stream, int64_t n, const uint8_t *wet, double *x);
/** Halo-exchange stencil (op->halo): op->xh = x in the interior, 0 in the halo (the corners included). */
int pk_cuda_halo_fill(void *stream, const pk_cuda_op *op, const double *x);
/**
 * Halo-exchange stencil: y += the couplings of the tile-edge cells to the halo values in op->xh, per cell
 * in the order of operator.c (halo_edge_rows): west (i = 0), east (i = nx-1), south (j = 0), north
 * (j = ny-1), each y = y + c * x_halo, so y = A x bitwise the CPU's after pk_cuda_op_apply of the stencil.
 */
int pk_cuda_halo_edges(void *stream, const pk_cuda_op *op, double *y);
/**
 * z = x + a y (z may alias x or y), a by value: z[i] = x[i] + a * y[i] per element (the CPU's r -= alpha q
 * is r + (-alpha) q bitwise). Used by the device RCI (rci.c).
 */
int pk_cuda_xpay(void *stream, int64_t n, const double *x, double a, const double *y, double *z);

/* ---- CG, two loops per iteration (see solver.c) --------------------------------------------------- */

/**
 * CG preconditioner loop: r -= st->alpha q; z = M^-1 r; partial (r, z), (r, r) into part (2 per block).
 * With pc NULL/NONE: z = r. Column symmetric: one thread per column, (r, z) accumulated as
 * sum dinv * y^2 in the forward sweep as the CPU does. alpha_zero = 1 uses alpha = 0 (initialisation).
 */
int pk_cuda_cg_precond_step(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, int alpha_zero,
                            int64_t n, double *r, const double *q, double *z, double *part, int64_t *nblocks);
/**
 * CG's preconditioner loop in two halves for a preconditioner that reads the neighbours of r (AINV) on
 * several ranks, the halo exchange of r between them: pk_cuda_cg_rupdate, r -= alpha q (nothing with
 * alpha_zero or a stopped state); pk_cuda_cg_precond_after, z = M^-1 r with (r, z), (r, r) in the partial
 * sums (2 per block), as the second half of pk_cuda_cg_precond_step.
 */
int pk_cuda_cg_rupdate(void *stream, const pk_cuda_state *st, int alpha_zero, int64_t n, double *r,
                       const double *q);
int pk_cuda_cg_precond_after(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, double *r, double *z,
                             double *part, int64_t *nblocks);
/** CG operator loop: x += alpha p; p = z + beta p; q = A z + beta q; partial (p, q) (1 per block).
 *  init = 1: alpha = beta = 0 (p = z, q = A z, x unchanged). pdl = 1: as a programmatic dependent launch. */
int pk_cuda_cg_operator_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, int init, double *x,
                             double *p, const double *z, double *q, double *part, int64_t *nblocks, int pdl);

/* ---- the scalar steps -----------------------------------------------------------------------------
 * The scalar recurrences of solver.c on the device. Each one reads the state `in`, adds the producer's
 * partial slots, and writes the updated state to `out` (in == out allowed for the one-block launchers).
 * The sum of nv values over nb slots has one fixed order, used by the one-block launchers and by every
 * block of the folded launchers alike: 256 lanes, lane t adds slots t, t + 256, t + 512, ... in order (from
 * 0.0), then the lanes are combined by the tree lane t += lane t + o for o = 128, 64, ..., 2, 1; the sum
 * is lane 0's. A state that is not RUNNING is copied unchanged. */

/** CG, after the preconditioner loop (2 values (r, z), (r, r)), as solver.c: NaN check (NAN, breakdown_it =
 *  it + 1), it++, rnorm, rr, hist[it] = rnorm (hist may be NULL), convergence (CONVERGED; st->recur: rr <
 *  tol^2 or rr == 0, else rnorm <= tol), rho sign check (BREAKDOWN_PRECOND, breakdown_it = it + 1), it ==
 *  maxit (MAXIT), else beta = rho_new / rho, rho = rho_new; before the test the minimum-residual
 *  bookkeeping (min_on: improved = rr < min_rr, then min_rr, min_it; every iterate, the last included).
 *  init = 1: the call of a (re)start (it stays, hist[0] /
 *  convergence / maxit 0 only when it == 0, rho set, sign check, no beta; min_on: min_rr = rr, min_it = it,
 *  improved = 1: a (re)start keeps its x). */
int pk_cuda_cg_scalar_rho(void *stream, const pk_cuda_state *in, pk_cuda_state *out, const double *part,
                          int64_t nblocks, double *hist, int init, int pdl);
/** CG, after the operator loop (1 value (p, A p)): sigma sign check (BREAKDOWN_MATRIX, or NAN when not
 *  finite; breakdown_it = it + 1), else sigma, alpha = rho / sigma. For both CG steps pdl = 1 launches the
 *  kernel as a programmatic dependent launch (its launch overlaps the end of the loop before it; it waits for
 *  that loop's sums before it reads them). */
int pk_cuda_cg_scalar_sigma(void *stream, const pk_cuda_state *in, pk_cuda_state *out, const double *part,
                            int64_t nblocks, int pdl);
/** Pipelined CG: the slots (pk_cuda_pipecg_step) hold (r,u), (w,u), (r,r), with repl = 1 (the automatic
 *  residual replacement) also its norms: PK_RR_NV values each, else PK_RR_NV_BASE; the first call after a
 *  (re)start has st->first = 1. As solver.c: NaN check, with repl and st->repl the rule of pk_rr.h (pk_rr_step on *st->repl with the seven sums,
 *  alpha_old, beta; a replacement due and it < maxit: REPLACE, nothing else changes), record (hist[it] =
 *  rnorm) and
 *  convergence (the rule as for CG) unless
 *  first-after-restart with it > 0 (before it the minimum-residual bookkeeping: min_on; a (re)start keeps
 *  its x), maxit, gamma sign (BREAKDOWN_PRECOND), sigma = first ? delta : delta - beta gamma / alpha_old
 *  with sign check (first: BREAKDOWN_MATRIX; else SUSPECT; NAN when not finite), alpha = gamma / sigma;
 *  then
 *  rho_old = gamma, alpha_old = alpha, first = 0, it++ (the iteration the following step completes). */
int pk_cuda_pipecg_scalar(void *stream, const pk_cuda_state *in, pk_cuda_state *out, const double *part,
                          int64_t nblocks, double *hist, int repl);

/* ---- pipelined CG --------------------------------------------------------------------------------- */

/** Fused update with n = A m: z = n + beta z; q = m + beta q; s = w + beta s; p = u + beta p;
 *  x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z; partial (r,u), (w,u), (r,r), with norms = 1 (the
 *  automatic residual replacement's runs, pk_rr.h) also (x,x), (p,p), (u,u), (q,q): part[block * NV + j],
 *  NV = PK_RR_NV with the norms, else PK_RR_NV_BASE. */
int pk_cuda_pipecg_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m, double *z,
                        double *q, double *s, double *p, double *x, double *r, double *u, double *w,
                        double *part, int64_t *nblocks, int norms);

/** The fused update without a preconditioner (M = I, where u = r, q = s and m = w hold bitwise), with
 *  n = A w_old: z = n + beta z; s = w_old + beta s; p = r + beta p; x += alpha p; r -= alpha s;
 *  w_new = w_old - alpha z; partial (r,r), (w_new,r), (r,r) and with norms (x,x), (p,p), (r,r), (s,s):
 *  bitwise pk_cuda_pipecg_step's values with m = w = w_old, u = r, q = s (w_new written there). w_new must
 *  be another array than w_old. */
int pk_cuda_pipecg_none_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *w_old,
                             double *z, double *s, double *p, double *x, double *r, double *w_new, double *part,
                             int64_t *nblocks, int norms);

/* ---- folded steps (small problems: one kernel less per scalar step) -------------------------------
 * A folded launcher runs a scalar step at the start of every thread block of the data-parallel step that
 * follows it: each warp adds the producer's slots in the fixed order above (so every block has bitwise
 * the same sums, and the same values as the one-block launchers), updates its own copy of the state, and
 * block 0 writes it to fold->out; the step then uses the new alpha / beta, or does nothing (writes no
 * vector and no partial sum) when the new state is not RUNNING. fold->out must differ from fold->in (the
 * blocks read `in` while block 0 writes `out`) and `part` (the step's own slots) from fold->part. With
 * fold->pdl the kernel is launched as a programmatic dependent launch: it may start while the previous
 * kernel of the stream runs, and waits (griddepcontrol.wait) for that kernel to complete before it reads
 * or writes anything that kernel or an earlier one touches; every kernel of the iteration launchers and
 * of pk_cuda_pc_apply waits so, so chains of them stay ordered. (Only data that is constant during a solve,
 * the preconditioner's factors, may be read before the wait.) */

/** Fold descriptor. */
typedef struct {
  const pk_cuda_state *in; /* state read by every block */
  pk_cuda_state *out;      /* state written by block 0 (!= in) */
  const double *part;      /* the producer's partial sums (not written by this launch) */
  int64_t nblocks;         /* ... and their number of slots */
  double *hist;            /* residual history (CG rho and pipelined steps; may be NULL) */
  int32_t pdl;             /* 1: programmatic dependent launch */
  int32_t repl;            /* pipelined CG: 1 when the state carries the automatic residual replacement
                              (in->repl set): the kernels with its rule (others ignore in->repl) */
} pk_cuda_fold;

/* The fused CG loops of the CUDA vector engine (pk_cuda_kry_cg.cu), scalars from the engine's S
 * (pk_cuda_escal): pk_cuda_cg_precond_step, pk_cuda_cg_rupdate + pk_cuda_cg_precond_after (an approximate
 * inverse of several ranks), pk_cuda_cg_operator_step and pk_cuda_pipecg_step with alpha_zero / init 0 (the
 * CPU engine's arithmetic: r - 0 q, x + 0 p). */
int pk_cuda_cg_precond_step_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, int64_t n, double *r,
                              const double *q, double *z, double *part, int64_t *nblocks);
int pk_cuda_cg_rupdate_e(void *stream, const pk_cuda_escal *e, int64_t n, double *r, const double *q);
int pk_cuda_cg_precond_after_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, double *r,
                               double *z, double *part, int64_t *nblocks);
int pk_cuda_cg_operator_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e, double *x,
                               double *p, const double *z, double *q, double *part, int64_t *nblocks, int pdl);
int pk_cuda_pipecg_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e, const double *m,
                          double *z, double *q, double *s, double *p, double *x, double *r, double *u, double *w,
                          double *part, int64_t *nblocks, int norms, int pdl);

/**
 * A scalar step of the CUDA engine folded into the loop kernel that follows it (the engine's form of
 * pk_cuda_fold): every warp of every block adds the pending partial sums (nb slots at part, the fixed order
 * of the one-block kernels) into its own copy of the method's scalars S_in[0 .. PK_CG_NSCALARS or
 * PK_PCG_NSCALARS), at the slots the producing loop's sums go to (CG: PK_CG_RZ after the preconditioner
 * loop, PK_CG_PQ after the operator loop; pipelined CG: PK_PCG_GAMMA), runs the step (PK_KSS_CG_ITER,
 * PK_KSS_CG_SIGMA, PK_KSS_PCG_SUMS, by the launcher) with arg (+ *base in a graph of a block), and uses the
 * new scalars (escal's coefficients and stop, read from that copy). Block 0's thread 0 writes the scalars to
 * S_out (!= S_in: the other blocks read S_in meanwhile) and the residual-history entry of the step to the
 * ring of S_home (the engine's S, where the host reads it). Pipelined CG with the automatic residual
 * replacement (rr): only block 0 sums the rule's norms and runs it, as the driver's folded kernels do.
 */
typedef struct {
  const double *Sin;
  double *Sout, *Shome;
  const double *part; /* the producing loop's partial sums (not written by this launch) */
  int64_t nb;
  const int *base;    /* a graph's argument base (device), or NULL */
  int32_t arg;
  int32_t pdl;        /* 1: programmatic dependent launch */
} pk_cuda_efold;

/** The one-block step after a CG loop (the CUDA engine's k_psum for the steps it folds): the pending sums
 *  (nv values of f->nb slots at f->part, for S[out ..]) and the step id (PK_KSS_CG_SIGMA, PK_KSS_CG_ITER,
 *  PK_KSS_PCG_SUMS) with f->arg (+ *f->base) on the scalars f->Sin, written to f->Sout (may be f->Sin) and
 *  the history entry to f->Shome's ring, by the folded steps' code in one warp; cudaErrorNotSupported for
 *  another step or layout (the caller then runs the generic step). */
int pk_cuda_psum_step_e(void *stream, int id, int nv, int out, const pk_cuda_efold *f);
/** The engine's CG preconditioner loop with PK_KSS_CG_SIGMA folded in (pk_cuda_cg_precond_step_e). */
int pk_cuda_cg_precond_step_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                               const pk_cuda_efold *f, int64_t n, double *r, const double *q, double *z,
                               double *part, int64_t *nblocks);
/** The engine's CG preconditioner loop with r -= alpha q fused in (the driver's pk_cuda_cg_precond_step_r, its
 *  scalars from the engine's S; rn another array than r), unfolded and with PK_KSS_CG_SIGMA folded in. */
int pk_cuda_cg_precond_step_r_e(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, const double *r,
                                double *rn, const double *q, double *z, double *part, int64_t *nblocks, int pdl);
int pk_cuda_cg_precond_step_r_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e,
                                 const pk_cuda_efold *f, const double *r, double *rn, const double *q, double *z,
                                 double *part, int64_t *nblocks);
/** The engine's CG operator loop with PK_KSS_CG_ITER folded in (pk_cuda_cg_operator_step_e). */
int pk_cuda_cg_operator_step_ef(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e,
                                const pk_cuda_efold *f, double *x, double *p, const double *z, double *q,
                                double *part, int64_t *nblocks);
/** z = M^-1 r with pipelined CG's PK_KSS_PCG_SUMS folded in (rr: the automatic replacement's slots of
 *  PK_RR_NV; z is not written once stopped). */
int pk_cuda_pc_apply_ef(void *stream, const pk_cuda_pc *pc, const pk_cuda_escal *e, const pk_cuda_efold *f,
                        int rr, const double *r, double *z);
/** pk_cuda_pipecg_none_step with the engine's scalars. */
int pk_cuda_pipecg_none_step_e(void *stream, const pk_cuda_op *op, const pk_cuda_escal *e, const double *w_old,
                               double *z, double *s, double *p, double *x, double *r, double *w_new,
                               double *part, int64_t *nblocks, int norms);

/** pk_cuda_cg_scalar_sigma folded into pk_cuda_cg_precond_step (alpha_zero = 0). */
int pk_cuda_cg_precond_step_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold, int64_t n,
                                 double *r, const double *q, double *z, double *part, int64_t *nblocks);
/**
 * CG's preconditioner loop with r -= alpha q fused into it, for an approximate inverse on a grid stencil of one
 * rank (pk_cuda_cg_precond_fuses_r): reads r and q (at the stencil's neighbours), writes the new residual to
 * rn (not r: other threads still read r) and z = M^-1 rn, sums (rn, z), (rn, rn); bitwise
 * pk_cuda_cg_rupdate then the loop; pdl: a programmatic dependent launch. The _fold form runs
 * pk_cuda_cg_scalar_sigma first (alpha_zero = 0). The drivers pass alpha_zero = 0 (a restart takes the
 * unfused path); dropping the field from the kernel's action measured 1 % slower on an H100 (the compiler
 * scheduled the loop differently), so it stays.
 */
int pk_cuda_cg_precond_fuses_r(const pk_cuda_pc *pc);
int pk_cuda_cg_precond_step_r(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, int alpha_zero,
                              const double *r, double *rn, const double *q, double *z, double *part,
                              int64_t *nblocks, int pdl);
int pk_cuda_cg_precond_step_r_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold, const double *r,
                                   double *rn, const double *q, double *z, double *part, int64_t *nblocks);
/** pk_cuda_cg_scalar_rho (init = 0) folded into pk_cuda_cg_operator_step (init = 0). */
int pk_cuda_cg_operator_step_fold(void *stream, const pk_cuda_op *op, const pk_cuda_fold *fold, double *x,
                                  double *p, const double *z, double *q, double *part, int64_t *nblocks);
/** pk_cuda_pipecg_scalar folded into z = M^-1 r (pk_cuda_pc_apply; z is not written once stopped). In
 *  pipelined CG the preconditioner application m = M^-1 w comes between the update and the scalar step
 *  and does not need the scalars, so it hosts the fold and the update reads the new state. */
int pk_cuda_pc_apply_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold, const double *r,
                          double *z);
/** pk_cuda_pipecg_step, optionally as a programmatic dependent launch (pdl = 1). */
int pk_cuda_pipecg_step_pdl(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m,
                            double *z, double *q, double *s, double *p, double *x, double *r, double *u,
                            double *w, double *part, int64_t *nblocks, int norms, int pdl);
/** Partial-sum slots that pk_cuda_residual, pk_cuda_cg_operator_step(_fold) and pk_cuda_pipecg_step write. */
int64_t pk_cuda_op_partials(const pk_cuda_op *op);

/**
 * Test hook: the LDL^T factors the matrix-free path recomputes from pc->op (pc->onthefly set), written to
 * lmul and dinv (device, n values each) so a test can compare them with the stored LAPACK factors.
 */
int pk_cuda_pc_onthefly_factors(void *stream, const pk_cuda_pc *pc, double *lmul, double *dinv);

/* ---- device, memory ------------------------------------------------------------------------------- */

/**
 * Halo layout <-> compact order of a grid (pkrylov_grid_pack, dir 0: src halo'd, dst compact; 1: back, the
 * halos of dst not written), device arrays, snx x sny tiles with halos olx, oly, nt tiles, nz levels.
 */
int pk_cuda_grid_copy(void *stream, int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt, int64_t nz,
                      const double *src, double *dst, int dir);

/** cudaStreamSynchronize(stream), as an int cudaError_t. */
int pk_cuda_stream_sync(void *stream);

/** Number of visible CUDA devices (0 when none or the driver is missing). */
int pk_cuda_device_count(void);

/* ---- backend glue called from the C objects (pk_cuda_backend.cu, pk_cuda_solver.cu) --------------- */
/* These return pkrylov status codes and record errors in the object's context. */

struct pkrylov_context_s;
struct pkrylov_operator_s;
struct pkrylov_precond_s;
struct pkrylov_solver_s;

/** Pick the device, create the stream (ctx->cuda). */
int pk_cuda_context_init(struct pkrylov_context_s *ctx);
/** "CUDA backend on <device name> (device d of count)" into buf (len bytes). */
void pk_cuda_context_describe(struct pkrylov_context_s *ctx, char *buf, size_t len);
/** The context's stream (a cudaStream_t). */
void *pk_cuda_context_stream(struct pkrylov_context_s *ctx);
void pk_cuda_context_free(struct pkrylov_context_s *ctx);
/**
 * New values of an uploaded grid stencil's coefficients (pkrylov_operator_update_grid_stencil) or of a
 * preconditioner's factors (pkrylov_precond_update...), copied into the arrays already on the device (the
 * solvers' CUDA graphs hold their addresses); fp32 copies follow. A preconditioner whose factors changed
 * kind (column: symmetric <-> general) is PKRYLOV_ERR_UNSUPPORTED (the caller keeps the old factors).
 */
int pk_cuda_operator_refresh(struct pkrylov_operator_s *A);
int pk_cuda_precond_refresh(struct pkrylov_precond_s *M, const char *func); /* func: the public caller */
/** Device buffer of bytes on the context's device (*p NULL on failure: PKRYLOV_ERR_OUT_OF_MEMORY); free. */
int pk_cuda_buffer_alloc(struct pkrylov_context_s *ctx, size_t bytes, void **p);
void pk_cuda_buffer_free(void *p);
/** Upload an operator / preconditioner once (A->dev, M->dev); free them. */
int pk_cuda_operator_upload(struct pkrylov_operator_s *A);
void pk_cuda_operator_free(struct pkrylov_operator_s *A);
int pk_cuda_precond_upload(struct pkrylov_precond_s *M);
void pk_cuda_precond_free(struct pkrylov_precond_s *M);
/** Device views (fp32 = 1 creates the float copies on first use). */
int pk_cuda_operator_view(struct pkrylov_operator_s *A, int fp32, pk_cuda_op *view);
int pk_cuda_precond_view(struct pkrylov_precond_s *M, int fp32, pk_cuda_pc *view);
/** The public apply calls on a CUDA context (mem: host arrays are copied, device arrays used in place). */
int pk_cuda_operator_apply_public(struct pkrylov_operator_s *A, int32_t mem, const double *x, double *y);
int pk_cuda_precond_apply_public(struct pkrylov_precond_s *M, int32_t mem, const double *r, double *z);
/**
 * The one report of a failed CUDA call of the backend: CUDA status e (a cudaError_t as int, nonzero) becomes
 * pk_error(ctx, code, func, ...) with code PKRYLOV_ERR_OUT_OF_MEMORY for cudaErrorMemoryAllocation, else
 * PKRYLOV_ERR_BACKEND; func is the public function the caller serves ("pkrylov_solver_solve"); the
 * message says what was being done, the call's text (call; NULL where e gathers several calls) and the
 * CUDA error's name and string. Clears the last (non-sticky) CUDA error. Returns the code. Called on the
 * failure path only: checking costs a compare of the returned status, nothing more (no synchronisation).
 */
int pk_cuda_error(struct pkrylov_context_s *ctx, const char *func, int e, const char *what, const char *call);
/** Return pk_cuda_error(ctx, func, status, what, "call") from the current function when call fails. */
#define PK_CUDA_CHECK(ctx, func, call, what)                                                                 \
  do {                                                                                                       \
    const int pk_cuda_e_ = (int)(call);                                                                      \
    if (pk_cuda_e_ != 0)                                                                                     \
      return pk_cuda_error((ctx), (func), pk_cuda_e_, (what), #call);                                        \
  } while (0)
/**
 * Check that p lives where mem says (cudaPointerGetAttributes): a device pointer passed as host memory or a
 * host pointer passed as device memory is PKRYLOV_ERR_MEMTYPE naming the argument.
 */
int pk_cuda_check_pointer(struct pkrylov_context_s *ctx, const char *func, int32_t mem, const void *p,
                          const char *name);
/**
 * Call a user routine y = op(x) (pkrylov_apply_fn) with DEVICE pointers x, y of n values after
 * synchronising the context's stream; a nonzero return is PKRYLOV_ERR_CALLBACK (what: "operator" or
 * "preconditioner", for the message).
 */
int pk_cuda_user_call(struct pkrylov_context_s *ctx, int (*apply)(void *, int64_t, const double *, double *),
                      void *data, int64_t n, const double *x, double *y, const char *what);
/**
 * y = A x of a halo-exchange stencil (A->halo.exchange) on DEVICE vectors x, y (n values): the interior of
 * the device work array xh is filled from x (halo 0), the stream is synchronised, the caller's exchange is
 * called with the DEVICE pointer of xh (it must have finished writing the halo when it returns), then the
 * stencil and the edge couplings run as kernels (bitwise the CPU's A x). A nonzero return of the exchange
 * is PKRYLOV_ERR_CALLBACK (message as on the CPU); y is then not written.
 */
int pk_cuda_halo_apply(struct pkrylov_operator_s *A, const double *x, double *y, const char *func);
/**
 * Device work of a handle-based reverse-communication solve (rci.c, CG and pipelined CG with
 * mem = PKRYLOV_MEM_DEVICE on a CUDA context; pk_cuda_rci.cu). The vector steps of the state machine run
 * as kernels on the context's stream (the fused CG operator loop, the pipelined-CG update and the residual
 * are the solvers' launchers over a USER view whose `pre` is the caller's A z); the local sums are brought
 * to the host (the rci's `partials` are host memory), which synchronises. Each function returns a
 * pkrylov status and records CUDA errors in the context.
 */
typedef struct pk_cuda_rci_s pk_cuda_rci;
/** Work area of nvec device vectors of n values (*work, contiguous, vector i at i * n) and the sums. */
int pk_cuda_rci_create(struct pkrylov_context_s *ctx, int64_t n, int nvec, pk_cuda_rci **out, double **work);
void pk_cuda_rci_free(pk_cuda_rci *d);
/** The public function now calling d's operations (pkrylov_rci_start, pkrylov_rci_step): named by errors. */
void pk_cuda_rci_set_func(pk_cuda_rci *d, const char *func);
/** Wait for the queued kernels (before a request hands device pointers to the caller). */
int pk_cuda_rci_sync(pk_cuda_rci *d);
/** v = 0; dst = src; z = x + a y (pk_cuda_xpay). */
int pk_cuda_rci_zero(pk_cuda_rci *d, double *v);
int pk_cuda_rci_copy(pk_cuda_rci *d, double *dst, const double *src);
int pk_cuda_rci_xpay(pk_cuda_rci *d, const double *x, double a, const double *y, double *z);
/** out[j] = (x[j], y[j]) local, j < nv <= 4, on the host. */
int pk_cuda_rci_dots(pk_cuda_rci *d, int nv, const double *const *x, const double *const *y, double *out);
/** r = b - t (t NULL: r = b); *rr = (r, r) local, on the host. */
int pk_cuda_rci_residual(pk_cuda_rci *d, const double *b, const double *t, double *r, double *rr);
/** CG: x += alpha p; p = z + beta p; q = t + beta q (t = A z); *pq = (p, q) local, on the host. */
int pk_cuda_rci_cg_update(pk_cuda_rci *d, double alpha, double beta, double *x, double *p, const double *z,
                          double *q, const double *t, double *pq);
/** Pipelined CG update with nv = A m (pk_cuda_pipecg_step); out[0..2] = (r,u), (w,u), (r,r) local, host (the
 *  handle keeps fixed replacement intervals: the rule's norms are not read). */
int pk_cuda_rci_pipecg_update(pk_cuda_rci *d, double alpha, double beta, const double *m, const double *nv,
                              double *z, double *q, double *s, double *p, double *x, double *r, double *u,
                              double *w, double *out);
/* ---- distributed solves (pk_cuda_dist.cu): one GPU per rank, MPI through the C layer ---------------- */

/** Upload time: the device halo buffers of a distributed grid operator (A->dist), the stencil's neighbour
 *  coefficients, pinned host staging; fills view's dist fields. Allocations owned by view->dist. */
int pk_cuda_dist_attach(struct pkrylov_operator_s *A, pk_cuda_op *view);
/** Free what pk_cuda_dist_attach allocated (view->dist; NULL is a no-op). */
void pk_cuda_dist_detach(pk_cuda_op *view);
/**
 * Halo exchange of the device vector x (op->n local values) of distributed operator A, in two halves so
 * that kernels which need no halo can run in between. nccl: the context's NCCL communicator (pk_mpi_nccl)
 * or NULL for the host-staged path.
 *  NCCL: _begin packs the four tile edges on the device (context's stream) and enqueues ncclSend/ncclRecv
 *        of every direction with a neighbour, in one group, on the operator's communication stream behind
 *        the pack, straight into the view's halo buffers (op->dhw...); _end makes the context's stream wait
 *        for them (an event). No host synchronisation: both halves can be captured in a CUDA graph.
 *  host: _begin packs and copies the edges to pinned host memory (nothing waits); _end waits for that
 *        copy, exchanges with the neighbours (MPI_Irecv/MPI_Isend, dist.c), and enqueues the copy of the
 *        received halos to the device buffers, so that launches enqueued after it see them.
 * Not distributed (A->dist NULL or one rank): nothing.
 */
int pk_cuda_dist_halo_begin(struct pkrylov_operator_s *A, const double *x, void *nccl);
int pk_cuda_dist_halo_end(struct pkrylov_operator_s *A, void *nccl);
/** NCCL path: the end of an exchange on A's communication stream instead of the context's: *comm = that
 *  stream, in whose order the halos have arrived (launches enqueued on it see them; the context's stream
 *  does not wait). *comm = NULL when A has no neighbour (nothing was exchanged). */
int pk_cuda_dist_halo_end_comm(struct pkrylov_operator_s *A, void **comm);
/** A's communication stream (cudaStream_t), NULL when A is not distributed. */
void *pk_cuda_dist_comm_stream(struct pkrylov_operator_s *A);
/** A's communication stream waits for the work enqueued so far on the context's stream; *comm = that stream
 *  (what is enqueued on it next runs beside the context's following work, e.g. the sums before a gather). */
int pk_cuda_dist_fork(struct pkrylov_operator_s *A, void **comm);
/** Both halves (the exchange is complete for every launch enqueued after it). */
int pk_cuda_dist_halo(struct pkrylov_operator_s *A, const double *x, void *nccl);
/**
 * dst[r*count + j] = rank r's src[j] (device arrays), by ncclAllGather on A's communication stream, in the
 * order of the context's stream: it waits for the work enqueued before; with wait = 1 the work enqueued
 * after waits for the gather, with wait = 0 only what is enqueued after pk_cuda_dist_allgather_wait(A)
 * (src must not be written before that). No host synchronisation. Every NCCL call of a solve goes through
 * A's one communication stream, so the calls are serialised in the same order on every rank.
 */
int pk_cuda_dist_allgather(struct pkrylov_operator_s *A, void *nccl, const double *src, double *dst, int count,
                           int wait);
int pk_cuda_dist_allgather_wait(struct pkrylov_operator_s *A);
/** 1 when the library was built with NCCL (PKRYLOV_HAVE_NCCL). */
int pk_cuda_nccl_compiled(void);
/** NCCL bootstrap for mpi.c: the unique id (rank 0; id has bytes >= 128), the communicator of this rank on
 *  the current device, its destruction; the current device's UUID (16 bytes). 0 or a nonzero failure. */
int pk_cuda_nccl_unique_id(void *id, int bytes);
int pk_cuda_nccl_comm_create(const void *id, int rank, int size, void **comm);
void pk_cuda_nccl_comm_destroy(void *comm);
int pk_cuda_device_uuid(unsigned char uuid[16]);
/** pkrylov_operator_apply of a distributed operator on a CUDA context (host or device arrays). */
int pk_cuda_dist_apply_public(struct pkrylov_operator_s *A, int32_t mem, const double *x, double *y);
/** pkrylov_precond_apply of a preconditioner that reads the neighbours of r (AINV) on a grid stencil A of
 *  several ranks: r's halo exchanged through A first. Collective. */
int pk_cuda_dist_precond_apply_public(struct pkrylov_precond_s *M, int32_t mem, const double *r, double *z);
/** Timers of the distributed solve (seconds, accumulated since the last reset; benchmarks): host time in
 *  the halo exchanges (from the packed edges on the host to the halos enqueued) and in the global sums
 *  (from the local sums on the host to the global ones enqueued). In the instrumented mode the timers
 *  hold the whole communication without overlap (pk_cuda_dist_instrumented). */
void pk_cuda_dist_timers(double *halo_s, double *reduce_s, int reset);
/** Account t seconds to the global sums' timer (the solver's reductions). */
void pk_cuda_dist_add_reduce_time(double t);
/** 1 when the context's option dist.instrument is 1: the device work queued before an exchange or a global
 *  sum is waited for first and the copies are blocking, so that the timers above measure the communication
 *  alone (benchmarks; same results, slower). */
int pk_cuda_dist_instrumented(const struct pkrylov_context_s *ctx);
/** Move a CUDA context to another device (before any object exists): new stream on `device`. */
int pk_cuda_context_set_device(struct pkrylov_context_s *ctx, int device);

/** Solver work area and the device solve (pk_cuda_solver.cu). */
int pk_cuda_solver_setup(struct pkrylov_solver_s *s);
void pk_cuda_solver_free(struct pkrylov_solver_s *s);
int pk_cuda_solver_solve(struct pkrylov_solver_s *s, int32_t mem, const double *b, double *x);
/**
 * How the solver's iteration is launched: fold = 1 the folded launchers, 0 the one-block scalar kernels,
 * -1 the automatic choice (folded up to 2^20 unknowns); pdl = 1 programmatic dependent launches on the
 * folded path (the default), 0 none, -1 the default. The same as the solver options cuda.fold and
 * cuda.pdl (this sets them: pkrylov_solver_get_option shows it). Tests call this to cover both paths; the
 * results are the same bit for bit either way.
 */
void pk_cuda_solver_set_launch(struct pkrylov_solver_s *s, int fold, int pdl);
/** The device state's copies of the solver's launch options (cuda.fold, cuda.pdl, cuda.pipe_none), taken
 *  again after pkrylov_solver_set_option (pk_cuda_solver_setup takes them at creation). */
void pk_cuda_solver_options(struct pkrylov_solver_s *s);

/**
 * Pipelined CG without a preconditioner: on = 1 (the default) the specialised update
 * pk_cuda_pipecg_none_step where it applies (one GPU, unfolded launchers, not reproducible, no user
 * operator or preconditioner, no monitor), 0 the general update after the copy m = w; -1 the default. The
 * same as the solver option cuda.pipe_none (this sets it). The results are the same bit for bit either
 * way.
 */
void pk_cuda_solver_set_pipe_none(struct pkrylov_solver_s *s, int on);
/** 1 when the solver's last solve ran the specialised update of pk_cuda_solver_set_pipe_none (tests). */
int pk_cuda_solver_used_pipe_none(const struct pkrylov_solver_s *s);

/* ---- reproducible mode (pk_cuda_xacc.cu): exact dots into the accumulator of pk_xacc.h -------------- */

/** Most dot products of one pk_cuda_xacc_dots call. */
#define PKC_XACC_MAXV 4
/** Blocks pk_cuda_xacc_dots launches for n values (its scratch `blk` holds blocks * nv * PK_XACC_LEN int64);
 *  -1 when n is too large for the accumulator's headroom (more than 2^40 values). */
int64_t pk_cuda_xacc_grid(int64_t n);
/**
 * Exact dot products (x[j], y[j]), j < nv <= PKC_XACC_MAXV, of n values on the device: the rounded products
 * summed exactly into acc[j * PK_XACC_LEN ...] (device, canonical digits: reduce.c's accumulator of the same
 * products bitwise), and when out is not NULL rounded to out[j] (device) as pk_xacc_value. blk is device
 * scratch (pk_cuda_xacc_grid(n) * nv * PK_XACC_LEN int64). Returns a cudaError_t.
 */
int pk_cuda_xacc_dots(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                      int64_t *blk, int64_t *acc, double *out);
/**
 * pk_cuda_xacc_dots with exact_prod 1: the exact products (the rounded product p and its rounding error
 * fma(x, y, -p) both added, as reduce.c's exact_prod), so the accumulator holds the exact dot product.
 */
int pk_cuda_xacc_dots_ex(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                         int exact_prod, int64_t *blk, int64_t *acc, double *out);
/**
 * Any number nv >= 1 of accumulators acc[v * PK_XACC_LEN ...] (device, any carries) rounded on the device:
 * out[v] (dd 0), or the pairs out[2v] = hi, out[2v + 1] = the rest rounded (dd 1), bitwise reduce.c's
 * rounding of the same accumulators. Returns a cudaError_t.
 */
int pk_cuda_xacc_round_ex(void *stream, const int64_t *acc, int nv, int dd, double *out);
/** out[j] = the rounding of the accumulators acc[j * PK_XACC_LEN ...] (any carries: a carry pass first),
 *  j < nv, on the device (e.g. after the ranks' accumulators were added). Returns a cudaError_t. */
int pk_cuda_xacc_round(void *stream, const int64_t *acc, int nv, double *out);
/**
 * The nb blocks' canonical accumulators of a one-pass loop below (blk: block b's nv accumulators at
 * blk + b * nv * PK_XACC_LEN) added into acc[j * PK_XACC_LEN ...] (canonical), j < nv (any count), and when
 * out is not NULL rounded to out[j]: the accumulators pk_cuda_xacc_dots gives for the same products. blk is
 * scratch: groups of its rows are added in place first.
 */
int pk_cuda_xacc_blocks(void *stream, int64_t *blk, int64_t nb, int nv, int64_t *acc, double *out);
/*
 * Reproducible mode in one pass (the CG drivers, pk_cuda_solver.cu): the loops below are the unfolded CG
 * preconditioner loop (none, Jacobi, the approximate inverse; pk_cuda_cg_precond_x_ok), the fused 2-D loop,
 * the CG operator loop and the pipelined-CG update with their sums added exactly in the loop's pass
 * (pk_cuda_xsum.cuh): the same vectors and iterates as the launchers without _x, and in xblk each block's
 * canonical accumulators of the loop's sums ((r, z), (r, r); (p, q); (r, u), (w, u), (r, r) and with norms
 * the rule's four), *nblocks blocks, for pk_cuda_xacc_blocks. xblk holds *nblocks * sums * PK_XACC_LEN int64;
 * a block must cover at most 2^26 values (the accumulators' headroom: true for n <= 2^26).
 */
int pk_cuda_cg_precond_x_ok(const pk_cuda_pc *pc);
int pk_cuda_cg_precond_step_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, int alpha_zero,
                              int64_t n, double *r, const double *q, double *z, int64_t *xblk, int64_t *nblocks);
int pk_cuda_cg_precond_after_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, double *r, double *z,
                               int64_t *xblk, int64_t *nblocks);
int pk_cuda_cg_precond_step_r_x(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, int alpha_zero,
                                const double *r, double *rn, const double *q, double *z, int64_t *xblk,
                                int64_t *nblocks, int pdl);
int pk_cuda_cg_operator_step_x(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, int init, double *x,
                               double *p, const double *z, double *q, int64_t *xblk, int64_t *nblocks);
int pk_cuda_pipecg_step_x(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m, double *z,
                          double *q, double *s, double *p, double *x, double *r, double *u, double *w,
                          int64_t *xblk, int64_t *nblocks, int norms);
/**
 * buf[0..count) := the sum over the ranks (ncclSum on ncclInt64: exact) of the device int64 array buf, on A's
 * communication stream in the order of the context's stream (the work enqueued after waits for it), as
 * pk_cuda_dist_allgather. Reproducible mode's global sums on the NCCL path.
 */
int pk_cuda_dist_allreduce_i64(struct pkrylov_operator_s *A, void *nccl, int64_t *buf, int count);

#ifdef __cplusplus
}
#endif

#endif /* PK_CUDA_H */
