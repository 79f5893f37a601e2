/**
 * @file pk_cuda_kernels.cu
 * @brief Data-parallel launchers of the CUDA backend (pk_cuda.h): operators, preconditioners, the fused
 *        CG / pipelined-CG steps and the deterministic reductions.
 *
 * Arithmetic: every cell is computed with the expressions of its CPU twin (operator.c: csr_apply_rows,
 * st_line, ts_line; precond.c: pc_sym_kslow, pc_sym_kslow_cg, pc_sym_kfast, pc_general(_kslow);
 * cpu_kernels.c: the fused loops), operands in the same order, compiled with -fmad=false, so a cell's value
 * is bitwise the CPU's. Only the order of the global sums differs. fp32 views read float coefficients and
 * convert each one to double before use, so they match the CPU run on coefficients rounded to float.
 *
 * Thread mappings (1-D blocks of PKC_BLOCK = 256 threads unless said otherwise):
 *  - column stencil / thin shell (apply, residual, CG operator loop, pipelined-CG step): one thread per
 *    column (i, j) (consecutive threads = consecutive i, coalesced) and a chunk of kc consecutive levels
 *    (grid.y = level chunks: kc about 32 for the thin shell and 8 for the column stencil, larger for big
 *    grids so that there are at most ~4096 blocks, smaller, down to 1, for small grids so that there are
 *    about PKC_FILL_BLOCKS blocks). The thread walks
 *    k upward keeping x_{k-1}, x_k, x_{k+1} and the vertical coupling aV_{k+1} in registers, so each of
 *    those is loaded once; the 4 horizontal neighbours come through L1/L2. The thin shell loads its
 *    per-column geometry (|T|, 4 face weights) once per thread, and for the CG operator loop
 *    (Act::PREFETCH) issues the loads of level k+1 during level k; every grid kernel asks the L2 for the
 *    vectors of a level ahead (l2pf_levels()).
 *  - CSR: one thread per row (grid-stride, at most PKC_MAX_BLOCKS blocks), sequential sum in row order
 *    (bitwise the CPU's); for long rows (pk_cuda_op.csr_lanes, chosen at upload from the row lengths) a
 *    group of 2 ... 32 lanes of a warp per row, coalesced loads of values and columns and a shuffle tree
 *    (k_csr_vec: the row sum in another order than the CPU's, equal to rounding), the row sums of a warp's
 *    32 rows gathered in shared memory so that all 32 lanes do the per-row vector updates. CSR stored as
 *    diagonals (pk_cuda_op.csr_format DIA / SYMDIA): one thread per row on the same grid (k_dia), the row
 *    sum in the CPU's order (bitwise), every load of the row issued before the sum.
 *  - column preconditioner, symmetric, k-slow (pc_apply and the CG preconditioner loop): one thread per
 *    column, consecutive threads = consecutive columns (every level access coalesced), one of
 *      k_col_stage   (small problems, < PKC_OTF_MIN_CELLS cells) blocks of 32 columns; each thread first
 *                    issues every load of its column (r, q, lmul, dinv) with cp.async into shared memory
 *                    (one memory latency per column), then both sweeps run out of shared memory;
 *      k_col_sm      (larger problems, stored factors) blocks of 32 columns; per level w = dinv y and l
 *                    stay in shared memory between the sweeps; loads issued a chunk of levels ahead;
 *      k_col_ts_res  (thin shell with pc->onthefly, >= 2^20 cells and 32768 columns) factors recomputed
 *                    from the operator with the dpttrf arithmetic (bitwise the stored ones), all columns
 *                    resident at once (256 per block), w through z, l recomputed in the backward sweep
 *                    from per-chunk pivots;
 *      k_col_sym     (fallback when a column does not fit in shared memory) w through z, factors read
 *                    in both sweeps.
 *    See "column sweeps with the column on chip" below for pc->onthefly and the choice.
 *  - column preconditioner, k-fast or general (pivoting): one thread per column (grid-stride), walking k
 *    forward then backward; k-fast columns are contiguous per thread (strided across the warp).
 *  - none / Jacobi, vector kernels, dots: one thread per cell, grid-stride, at most PKC_MAX_BLOCKS blocks.
 *
 * Bytes per cell moved from DRAM in the ideal case (fp64 / fp32 coefficients; neighbours from cache):
 *  - op_apply:       stencil 4 coeff + x + y = 48 / 32 B;  thin shell x + y = 16 B;
 *                    CSR 12 B per nonzero (8 / 4 value + 4 index) + x gather + 8 (y) + rowptr 8;
 *                    DIA 8 / 4 B per stored diagonal (symmetric DIA: the diagonals of offset >= 0 only, the
 *                    reflected reads from cache) + x + y.
 *  - residual:       op bytes + b (8) [+ 1 B mask] : stencil 56 (57 masked) / 40, thin shell 24.
 *  - cg_operator_step (x += a p; p = z + b p; q = A z + b q): reads z p x q, writes x p q = 56 B
 *                    + coefficients: stencil 88 / 72 B, thin shell 56 B (init: z, q, p = 24 B + coeff).
 *  - pipecg_step:    reads m z q s p x r u w (72), writes z q s p x r u w (64) = 136 B + coefficients:
 *                    stencil 168 / 152 B, thin shell 136 B.
 *  - pipecg_none_step (M = I: u = r, q = s, m = w implied): reads w_old z s p x r (48), writes z s p x r
 *                    w_new (48) = 96 B + coefficients: stencil 128 / 112 B, thin shell 96 B, symmetric
 *                    DIA 7-point 128 B; the general step with M = I also copies m = w first (16 B).
 *  - cg_precond_step: none 32 B (r q in, r z out); Jacobi 40 / 36 B; column symmetric k-slow:
 *                    stored factors (k_col_stage, k_col_sm) r q lmul dinv in, r z out = 48 / 40 B;
 *                    thin shell recomputed (k_col_ts_res) r q in, r z out + the w round trip (w via z)
 *                    = 48 B (32 B if it stayed on chip: k_col_sm); fallback k_col_sym
 *                    80 / 64 B; column symmetric k-fast: forward r q lmul in, r z out; backward
 *                    z dinv lmul r in, z out = 80 / 68 B; column general: forward r q dl ipiv in, r z out,
 *                    backward z d du du2 r in, z out = 92 B. (alpha_zero: q not read, r not written.)
 *  - pc_apply:       none 16 B; Jacobi 24 / 20 B; column symmetric k-slow stored 32 / 24 B, thin shell
 *                    recomputed 32 B (16 B on chip), fallback 56 / 44 B; k-fast 56 / 44 B; column
 *                    general 68 B.
 *
 * Measured on an H200 (device-to-device copy 4.25 TB/s), graph-replayed launches, thin shell 256 x 256 x
 * 128 (8.4 M cells): column CG preconditioner loop, recomputed factors, 101 us (3.97 TB/s counting 48 B;
 * the stored-factor k_col_sym it replaces: 189 us, k_col_sm 152 us); thin-shell pc_apply 69 us (old
 * 124 us); thin-shell CG operator loop 148 us (3.2 TB/s; 177 us before the prefetch); pipelined-CG step
 * 359 us (3.2 TB/s). 32 x 32 x 32: CG preconditioner loop (k_col_stage) 4.3 us (old 12 us), CG operator
 * loop 2.5 us (old 7.5 us: 16 blocks, now 128), pipelined step 3.9 us (old 11 us); a 1-block kernel costs
 * about 1.8 us there. Earlier measurements (8.4 M cells, stencil): apply 3.4 TB/s, residual 2.7,
 * pipelined step 3.5 (fp32 3.1), CSR apply about 3.5; the k-fast column sweeps about 1.2-1.4 TB/s.
 *
 * Reductions: each thread accumulates its cells in order, then a fixed-shape tree (warp shuffles, then
 * one warp over the 8 warp sums) gives one partial per block, stored at part[block * nv + j] with
 * block = blockIdx.x + gridDim.x * blockIdx.y. Grid sizes depend on the problem only. No atomics.
 *
 * Scalar steps (the scalar recurrences of solver.c, pk_cuda.h): one-block kernels (k_scalar), or folded
 * into the step kernel that follows (template argument FOLD): every warp adds the producer's slots itself
 * in the fixed order, so no block waits for another and all get the same scalars. Measured on an H200,
 * thin shell 32^3, column preconditioner, us per iteration: CG one-block 11.1, folded 8.6, folded with
 * programmatic dependent launches 6.5 (7.4 on another machine); pipelined CG 9.9, 8.8, 7.0 (7.7).
 */
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

#include <type_traits>

#include "pk_cuda.h"
#include "pkrylov.h"

namespace {

/** Threads per block of every kernel here (the reductions assume it). */
constexpr int PKC_BLOCK = 256;
/** Cap on the blocks of the grid-stride kernels (1-D, columns): bounds the partial-sum slots. */
constexpr int64_t PKC_MAX_BLOCKS = 4096;
/* blocks of a 2-D grid-stencil launch at most (grid_shape; 8 per SM of an H100), each thread a few columns */
constexpr int64_t PKC_GRID2D_BLOCKS = 1024;
/**
 * Levels per thread of the grid operators before the block cap is considered: PKC_KC_TS for the thin shell,
 * PKC_KC for the column stencil (pk_cuda_op.kc, the option cuda.kc, overrides both, for tuning runs). Measured on an H200
 * (256 x 256 x 128, with the L2 prefetch of l2pf_levels(), us per iteration): thin shell CG 258 / 251 / 246
 * / 242 at 8 / 16 / 32 / 64 levels, pipelined CG 374 / 381 / 377 / 405; column stencil CG 450 / 444 / 441,
 * pipelined CG 542 / 563 / 563 at 8 / 16 / 32 levels.
 */
constexpr int PKC_KC = 8;
constexpr int PKC_KC_TS = 32;
/**
 * Blocks the grid operators aim at on small grids (fewer than this with PKC_KC levels per thread): the
 * level chunks shrink (to one level) so that the launch spreads over the GPU instead of leaving a few
 * threads walking many levels each (latency: a 32 x 32 x 32 grid had 16 blocks, now 128).
 */
constexpr int64_t PKC_FILL_BLOCKS = 512;
/**
 * Minimum resident blocks per SM asked of the compiler (__launch_bounds__) for the pipelined-CG grid
 * kernels and the column sweeps: it caps them at 85 registers (pipelined CG: down from 94-116, more warps
 * resident) and lets the column sweeps keep more loads in flight; measured on an H200 at 8.4 M cells:
 * stencil pipelined step 0.447 -> 0.399 ms, column k-slow apply 0.142 -> 0.125 ms. The other grid
 * kernels and CSR were slower with it and keep the default.
 */
constexpr int PKC_MINB_HEAVY = 3;

/* ---- launch shapes ---------------------------------------------------------------------------- */

/** Blocks of a grid-stride kernel over m items (one thread per item). */
int64_t blocks_1d(int64_t m) {
  int64_t b = (m + PKC_BLOCK - 1) / PKC_BLOCK;
  if (b > PKC_MAX_BLOCKS) b = PKC_MAX_BLOCKS;
  return b < 1 ? 1 : b;
}

/** Shape of the grid-operator kernels: grid.x = column blocks, grid.y = level chunks of kc levels. */
struct GridShape {
  int64_t bx;
  int by, kc;
};

int64_t launch_cols(const pk_cuda_op *op);

/** The grid shape of a launch over the grid operator op (thin shell or column stencil). */
GridShape grid_shape(const pk_cuda_op *op) {
  const int64_t ncols = launch_cols(op);
  const int nz = op->nz;
  GridShape g;
  g.bx = (ncols + PKC_BLOCK - 1) / PKC_BLOCK;
  /* a 2-D grid stencil (one level) in CG's loops (op->gcap): at most PKC_GRID2D_BLOCKS blocks, each thread a
     few columns (the block sums then stay few enough for the folded scalar steps). H100, barotropic with the
     approximate inverse, us per iteration: CG 99.1 -> 88.2 at 1024^2, 735 -> 605 at 4096 x 2048; pipelined
     CG 91.7 -> 94.4 at 1024^2 (it keeps a thread per column) */
  if (op->gsny > 0 && nz == 1 && op->gcap && g.bx > PKC_GRID2D_BLOCKS) g.bx = PKC_GRID2D_BLOCKS;
  if (g.bx < 1) g.bx = 1;
  const int kcl = op->kc > 0 && op->kc <= 1024 ? op->kc /* option cuda.kc (0: the type's) */
                  : op->type == PKRYLOV_OPERATOR_THINSHELL ? PKC_KC_TS : PKC_KC;
  int64_t nzc = (nz + kcl - 1) / kcl; /* chunks of ~kcl levels */
  if (g.bx * nzc < PKC_FILL_BLOCKS) { /* small grid: shorter chunks, down to one level, to fill the GPU */
    nzc = (PKC_FILL_BLOCKS + g.bx - 1) / g.bx;
    if (nzc > nz) nzc = nz;
  }
  if (g.bx * nzc > PKC_MAX_BLOCKS) nzc = PKC_MAX_BLOCKS / g.bx;
  if (nzc < 1) nzc = 1;
  g.kc = (int)((nz + nzc - 1) / nzc);
  if (g.kc < 1) g.kc = 1;
  g.by = (nz + g.kc - 1) / g.kc; /* no empty chunk */
  if (g.by < 1) g.by = 1;
  return g;
}

/** CSR lanes per row of a view: 1 (one thread per row) or the vector kernel's 2 ... 32. */
int csr_lanes(const pk_cuda_op *op) {
  const int l = op->csr_lanes;
  return (l == 2 || l == 4 || l == 8 || l == 16 || l == 32) ? l : 1;
}

/**
 * Tile-edge columns of an nx x ny tile (pk_cuda_op.cols = 2): the columns next to a neighbour's halo, on the
 * sides that have one (mask: 1 west, 2 east, 4 south, 8 north): the south row, the north row, then the west
 * and east columns between them; all columns when nx <= 2 or ny <= 2 and some side has a neighbour. The
 * columns on the global boundary need no halo and stay with the interior launch (cols = 1): fewer edge
 * columns, and the west and east ones (one value per row of 32-byte sectors) are the expensive ones.
 */
__host__ __device__ __forceinline__ int64_t edge_cols(int nx, int ny, int mask) {
  if (!mask) return 0;
  if (nx <= 2 || ny <= 2) return (int64_t)nx * ny;
  const int rows = ((mask >> 2) & 1) + ((mask >> 3) & 1), sides = (mask & 1) + ((mask >> 1) & 1);
  return (int64_t)rows * nx + (int64_t)sides * (ny - rows);
}

/** The sides of op that have a neighbour (edge_cols' mask). */
int halo_mask(const pk_cuda_op *op) {
  return (op->dhw ? 1 : 0) | (op->dhe ? 2 : 0) | (op->dhs ? 4 : 0) | (op->dhn ? 8 : 0);
}

/** Columns a grid launch over op runs threads for (pk_cuda_op.cols; a grid stencil's edge launch: the
 *  columns that read another rank's values, gnrc of them). */
int64_t launch_cols(const pk_cuda_op *op) {
  if (op->cols == 2) return op->gsny > 0 ? op->gnrc : edge_cols(op->nx, op->ny, halo_mask(op));
  return (int64_t)op->nx * op->ny;
}

/** Number of partial-sum slots a launch over op writes. */
int64_t op_blocks(const pk_cuda_op *op) {
  if (op->type == PKRYLOV_OPERATOR_CSR) return blocks_1d(op->n); /* a thread or a warp's lane per row */
  if (op->type == PKRYLOV_OPERATOR_USER) return blocks_1d(op->n);
  const GridShape g = grid_shape(op);
  return g.bx * g.by;
}

/* ---- deterministic block reduction ------------------------------------------------------------- */

/**
 * part[slot * NV + j] = sum of acc[j] over the block's threads, by a fixed tree: shuffle-down within each
 * warp (16, 8, 4, 2, 1), then warp 0 over the 8 warp sums (4, 2, 1). Every thread of the block must call it.
 */
template <int NV>
__device__ __forceinline__ void block_store(const double (&acc)[NV], double *part, int64_t slot) {
  __shared__ double sh[NV][PKC_BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < NV; j++) {
    double v = acc[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) sh[j][warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      double v = lane < PKC_BLOCK / 32 ? sh[j][lane] : 0.0;
#pragma unroll
      for (int o = (PKC_BLOCK / 32) / 2; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
      if (lane == 0) part[slot * NV + j] = v;
    }
  }
}

/** Linear block index (slot) of a 2-D grid. */
__device__ __forceinline__ int64_t block_slot() {
  return (int64_t)blockIdx.x + (int64_t)gridDim.x * blockIdx.y;
}

/* ---- programmatic dependent launch ---------------------------------------------------------------
 * A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the previous
 * kernel of the stream still runs (its launch latency hides behind that kernel). Every kernel that can be
 * launched so calls step_wait() before its first memory access: griddepcontrol.wait returns once the
 * previous grid has completed and its writes are visible (at once when the kernel was launched normally),
 * so a chain of such kernels stays ordered (each one completes only after its own wait). It then lets the
 * next kernel launch (griddepcontrol.launch_dependents): that one waits in turn before touching memory. */

/** Wait for the previous grid (programmatic dependent launch), then allow the next one to launch. */
__device__ __forceinline__ void step_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/** Ask the L2 for the line holding p (no register, no completion to wait for). */
__device__ __forceinline__ void l2_prefetch(const void *p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

/**
 * Launch kern<<<grid, block, smem, s>>>(args...), as a programmatic dependent launch when pdl is set.
 * Returns the CUDA status of the launch.
 */
template <typename... KP, typename... A>
int launch_kernel(bool pdl, void (*kern)(KP...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                  A... args) {
  if (!pdl) {
    kern<<<grid, block, smem, s>>>(args...);
    return (int)cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kern, args...);
  return e != cudaSuccess ? (int)e : (int)cudaGetLastError();
}

/* ---- the scalar steps (pk_cuda.h), run by one block or folded into every block of a step -------- */

/** Which scalar step a step kernel runs first (template argument FOLD). */
enum { FOLD_NONE = 0, FOLD_CG_SIGMA = 1, FOLD_CG_RHO = 2, FOLD_PIPE = 3, FOLD_PIPE_RR = 4 };
/* FOLD_PIPE_RR: pipelined CG's scalar step with the automatic residual replacement's rule (pk_rr.h), a
   separate instantiation so that the kernels of every other setting carry none of its code (with it the
   folded pipelined CG kernels of the thin shell 32^3 took 9.3 us an iteration instead of 7.5, H100) */

/** Values a scalar step sums per slot (NV), and the values a slot holds (S: with the automatic residual
 *  replacement pipelined CG's slots also hold its norms, summed by the writer only, see step_scalars; without
 *  it they hold the three dots, as the update writes them then). */
template <int FOLD> struct FoldNV {
  static constexpr int NV = FOLD == FOLD_CG_SIGMA ? 1 : FOLD == FOLD_CG_RHO ? 2 : 3;
  static constexpr int S = FOLD == FOLD_PIPE_RR ? PK_RR_NV : NV;
};

/**
 * What a step kernel gets of the solver state, by value. FOLD_NONE: st is read (NULL: always run,
 * alpha = beta = 0). Folded: every block runs the scalar step on st and part (nb slots) and block 0 writes
 * the result to out (and the history entry to hist).
 */
struct StepIn {
  const pk_cuda_state *st;
  pk_cuda_state *out;
  const double *part;
  int64_t nb;
  double *hist;
};

/** StepIn of an unfolded kernel. */
StepIn step_in(const pk_cuda_state *st) {
  StepIn in = {};
  in.st = st;
  return in;
}

/** StepIn of a folded kernel. */
StepIn step_in(const pk_cuda_fold *f) {
  StepIn in = {};
  in.st = f->in;
  in.out = f->out;
  in.part = f->part;
  in.nb = f->nblocks;
  in.hist = f->hist;
  return in;
}

/** Lanes of the fixed summation order of the scalar steps (pk_cuda.h). */
constexpr int PKC_SUM_LANES = 256;

/**
 * Sums of NV values over nb slots in the fixed order of pk_cuda.h, by one warp (no block barrier: every
 * warp of a folded kernel computes the same sums itself): lane l holds the 8 summation lanes l + 32 c,
 * each adding its slots l + 32 c, l + 32 c + 256, ... in order (8 independent chains, so the loads overlap);
 * the tree levels 128, 64, 32 combine chains inside the lane, 16 ... 1 go through shuffles; every lane gets
 * the sums. Called by all 32 lanes of the warp.
 */
template <int NV, int S = NV>
__device__ __forceinline__ void warp_sums(const double *__restrict__ part, int64_t nb, double (&v)[NV]) {
  constexpr int C = PKC_SUM_LANES / 32;
  const int lane = threadIdx.x & 31;
  double acc[C][NV];
#pragma unroll
  for (int c = 0; c < C; c++)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[c][j] = 0.0;
  for (int64_t b0 = lane; b0 < nb; b0 += PKC_SUM_LANES)
#pragma unroll
    for (int c = 0; c < C; c++) {
      const int64_t b = b0 + 32 * c;
      if (b < nb)
#pragma unroll
        for (int j = 0; j < NV; j++) acc[c][j] += part[b * S + j];
    }
#pragma unroll
  for (int h = C / 2; h >= 1; h >>= 1) /* levels 128, 64, 32: lane l + 32 c += lane l + 32 (c + h) */
#pragma unroll
    for (int c = 0; c < h; c++)
#pragma unroll
      for (int j = 0; j < NV; j++) acc[c][j] += acc[c + h][j];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[0][j] += __shfl_down_sync(0xffffffffu, acc[0][j], o);
#pragma unroll
  for (int j = 0; j < NV; j++) v[j] = __shfl_sync(0xffffffffu, acc[0][j], 0);
}

/**
 * The same sums by a block of PKC_SUM_LANES threads (the one-block scalar kernels: many slots, one load
 * chain per thread): thread t is lane t; levels 128, 64, 32 through shared memory, 16 ... 1 through
 * shuffles in warp 0, whose lanes get the sums (the other warps' v is unset).
 */
template <int NV, int S = NV>
__device__ __forceinline__ void block_sums(const double *__restrict__ part, int64_t nb, double (&v)[NV]) {
  __shared__ double sh[NV][PKC_SUM_LANES];
  const int t = threadIdx.x;
  double acc[NV];
#pragma unroll
  for (int j = 0; j < NV; j++) acc[j] = 0.0;
  for (int64_t b = t; b < nb; b += PKC_SUM_LANES)
#pragma unroll
    for (int j = 0; j < NV; j++) acc[j] += part[b * S + j];
#pragma unroll
  for (int j = 0; j < NV; j++) sh[j][t] = acc[j];
  __syncthreads();
  for (int o = PKC_SUM_LANES / 2; o >= 32; o >>= 1) {
    if (t < o)
#pragma unroll
      for (int j = 0; j < NV; j++) sh[j][t] += sh[j][t + o];
    __syncthreads();
  }
  if (t < 32) {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      double x = sh[j][t];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
      v[j] = x;
    }
  }
}

/** Sign bookkeeping as pk_sign_ok in solver.c: v finite, nonzero, of the sign fixed by the first value. */
__device__ __forceinline__ bool sign_ok(double v, double &sign) {
  if (!isfinite(v) || v == 0.0) return false;
  const double sg = v > 0 ? 1.0 : -1.0;
  if (sign == 0.0) sign = sg;
  return sg == sign;
}

/** The stopping test of a recurrence residual: rr (its sum of squares) and rnorm = sqrt(rr) (pk_cuda.h). */
__device__ __forceinline__ bool converged_rr(const pk_cuda_state &s, double rr, double rnorm) {
  return s.recur ? rr < s.tol * s.tol || rr == 0.0 : rnorm <= s.tol;
}

/** Minimum-residual bookkeeping of iterate it with sum rr: reset (a (re)start) keeps it unconditionally. */
__device__ __forceinline__ void track_min(pk_cuda_state &s, double rr, int reset) {
  s.improved = 0;
  if (!s.min_on) return;
  if (reset || rr < s.min_rr) {
    s.min_rr = rr;
    s.min_it = s.it;
    s.improved = 1;
  }
}

/** CG after the operator loop (pk_solve_cg): sigma = (p, A p) sign check, alpha = rho / sigma. */
__device__ __forceinline__ void cg_sigma_update(pk_cuda_state &s, double sigma) {
  if (s.status != PK_ST_RUNNING) return;
  if (!sign_ok(sigma, s.sigma_sign)) {
    s.status = isfinite(sigma) ? PK_ST_BREAKDOWN_MATRIX : PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  s.sigma = sigma;
  s.alpha = s.rho / sigma;
}

/** CG after the preconditioner loop (pk_solve_cg), rz = (r, z), rr = (r, r); hist: NULL = not recorded. */
__device__ __forceinline__ void cg_rho_update(pk_cuda_state &s, double rz, double rr, double *hist,
                                              int init) {
  if (s.status != PK_ST_RUNNING) return;
  if (!isfinite(rz) || !isfinite(rr)) {
    s.status = PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  const double rnorm = sqrt(rr);
  s.rnorm = rnorm;
  s.rr = rr;
  if (init) { /* r = b - A x, z = M^-1 r of a (re)start */
    s.rho = rz;
    if (s.it == 0) {
      if (hist) hist[0] = rnorm;
      if (converged_rr(s, rr, rnorm)) {
        s.status = PK_ST_CONVERGED;
        return;
      }
      if (s.maxit == 0) {
        s.status = PK_ST_MAXIT;
        return;
      }
    }
    track_min(s, rr, 1);
    if (!sign_ok(rz, s.rho_sign)) {
      s.status = PK_ST_BREAKDOWN_PRECOND;
      s.breakdown_it = s.it + 1;
    }
    return;
  }
  const int it = ++s.it; /* x_it = x + alpha p is due (the operator loop or the host applies it) */
  if (hist) hist[it] = rnorm;
  track_min(s, rr, 0); /* every iterate, the last included (a stopped state copies nothing) */
  if (converged_rr(s, rr, rnorm)) {
    s.status = PK_ST_CONVERGED;
    return;
  }
  if (!sign_ok(rz, s.rho_sign)) {
    s.status = PK_ST_BREAKDOWN_PRECOND;
    s.breakdown_it = it + 1;
    return;
  }
  if (it >= s.maxit) {
    s.status = PK_ST_MAXIT;
    return;
  }
  s.beta = rz / s.rho;
  s.rho = rz;
}

/** The automatic residual replacement's step (pk_rr.h) on est, the caller's copy of *s.repl: 1 when the
 *  vectors must be replaced now (before the iteration cap). Not inlined: the folded kernels that carry it
 *  run it in one block only. */
__device__ __noinline__ int rr_decide(const pk_cuda_state &s, pk_rr_est &est, double gamma, double delta,
                                      double rr, const double *norms) {
  const double v[PK_RR_NV] = {gamma, delta, rr, norms[0], norms[1], norms[2], norms[3]};
  return pk_rr_step(&est, v, s.alpha_old, s.beta) && s.it < s.maxit;
}

/** Pipelined CG (pk_solve_pipecg): gamma = (r, u), delta = (w, u), rr = (r, r); norms: the other four sums of
 *  the slots (x, x), (p, p), (u, u), (q, q) for the automatic residual replacement, est: the caller's copy of
 *  its estimate *s.repl, updated (the caller writes it back, once); both NULL where they were not summed (the
 *  blocks of a folded kernel that do not write the state); hist: NULL = not recorded. */
__device__ __forceinline__ void pipe_update(pk_cuda_state &s, double gamma, double delta, double rr,
                                            const double *norms, pk_rr_est *est, double *hist) {
  if (s.status != PK_ST_RUNNING) return;
  const double rnorm = sqrt(rr);
  if (!isfinite(gamma) || !isfinite(delta) || !isfinite(rnorm)) {
    s.status = PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  if (est && norms && rr_decide(s, *est, gamma, delta, rr, norms)) { /* the host replaces; nothing else changes */
    s.status = PK_ST_REPLACE;
    return;
  }
  s.rnorm = rnorm;
  s.rr = rr;
  track_min(s, rr, s.first); /* x is iterate it (a (re)start keeps its x; a stopped state copies nothing) */
  if ((s.it == 0 && s.first) || !s.first) { /* a restart (first, it > 0) records nothing */
    if (hist) hist[s.it] = rnorm;
    if (converged_rr(s, rr, rnorm)) {
      s.status = PK_ST_CONVERGED;
      return;
    }
  }
  if (s.it >= s.maxit) {
    s.status = PK_ST_MAXIT;
    return;
  }
  if (!sign_ok(gamma, s.rho_sign)) {
    s.status = PK_ST_BREAKDOWN_PRECOND;
    s.breakdown_it = s.it + 1;
    return;
  }
  /* sigma = (p, A p) = delta - beta gamma / alpha_old */
  const double beta = s.first ? 0.0 : gamma / s.rho_old;
  const double sigma = s.first ? delta : delta - beta * gamma / s.alpha_old;
  s.beta = beta;
  s.delta = delta;
  s.rho = gamma;
  s.sigma = sigma;
  if (!sign_ok(sigma, s.sigma_sign)) {
    s.status = (!s.first && isfinite(sigma)) ? PK_ST_SUSPECT
               : isfinite(sigma)             ? PK_ST_BREAKDOWN_MATRIX
                                             : PK_ST_NAN;
    s.breakdown_it = s.it + 1;
    return;
  }
  s.alpha = gamma / sigma;
  s.rho_old = gamma;
  s.alpha_old = s.alpha;
  s.first = 0;
  s.it++; /* the fused step that follows completes this iteration */
}

/** The scalar step FOLD on s with the sums v (and pipelined CG's norms and a copy of the replacement
 *  estimate, or NULL); hist: the writer's history (NULL: none). */
template <int FOLD>
__device__ __forceinline__ void scalar_update(pk_cuda_state &s, const double (&v)[FoldNV<FOLD>::NV],
                                              const double *norms, pk_rr_est *est, double *hist, int init) {
  if constexpr (FOLD == FOLD_CG_SIGMA)
    cg_sigma_update(s, v[0]);
  else if constexpr (FOLD == FOLD_CG_RHO)
    cg_rho_update(s, v[0], v[1], hist, init);
  else
    pipe_update(s, v[0], v[1], v[2], norms, est, hist);
}

/**
 * The scalars a step kernel uses, after step_wait(); false = the solve has stopped (the kernel returns).
 * FOLD_NONE: read from in.st. Folded: every thread runs the scalar step on its own copy of the state (the
 * sums by warp_sums, so every warp of every block gets bitwise the same), thread 0 of block 0 writes the
 * new state to in.out and the history entry; called by every thread of the block (whole warps).
 */
template <int FOLD>
__device__ __forceinline__ bool step_scalars(const StepIn &in, double &alpha, double &beta) {
  if constexpr (FOLD == FOLD_NONE) {
    if (!in.st) {
      alpha = beta = 0.0;
      return true;
    }
    if (in.st->status != PK_ST_RUNNING) return false;
    alpha = in.st->alpha;
    beta = in.st->beta;
    return true;
  } else {
    pk_cuda_state s = *in.st;
    double v[FoldNV<FOLD>::NV];
    warp_sums<FoldNV<FOLD>::NV, FoldNV<FOLD>::S>(in.part, in.nb, v);
    const bool writer = blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0;
    if constexpr (FOLD == FOLD_PIPE_RR) {
      /* the automatic residual replacement: only the writer's block sums the norms and runs the rule (every
         warp of it, so that its threads agree: the kernels synchronise inside a block), each thread on its
         own copy of the estimate read before any is written back (one writer after a barrier: threads
         updating *s.repl in place raced, and the decisions then depended on the warps' timing); a REPLACE it writes
         stops the next kernels, and the other blocks, which read 3 of the slots' 7 values, only fill their
         part of m = M^-1 w, which the replacement makes the next iteration compute again */
      double norms[4];
      pk_rr_est est;
      const bool with_norms = s.repl && blockIdx.x == 0 && blockIdx.y == 0; /* (block-uniform) */
      if (with_norms) {
        est = *s.repl; /* every thread its own copy, the writer writes it back after all have read */
        /* one value at a time (the same order, so the same sums): 8 chains of 4 values would take 64
           registers in every folded kernel */
#pragma unroll 1
        for (int j = 0; j < 4; j++) {
          double t[1];
          warp_sums<1, PK_RR_NV>(in.part + PK_RR_NV_BASE + j, in.nb, t);
          norms[j] = t[0];
        }
      }
      scalar_update<FOLD>(s, v, with_norms ? norms : nullptr, with_norms ? &est : nullptr,
                          writer ? in.hist : nullptr, 0);
      if (with_norms) { /* (block-uniform: every thread of the block is here) */
        __syncthreads();
        if (writer) *s.repl = est;
      }
    } else {
      scalar_update<FOLD>(s, v, nullptr, nullptr, writer ? in.hist : nullptr, 0);
    }
    if (writer) *in.out = s;
    alpha = s.alpha;
    beta = s.beta;
    return s.status == PK_ST_RUNNING;
  }
}

/** One-block scalar step: in.st -> in.out (may be the same), PKC_SUM_LANES threads. */
template <int FOLD> __global__ void __launch_bounds__(PKC_SUM_LANES) k_scalar(StepIn in, int init) {
  step_wait();
  pk_cuda_state s;
  if constexpr (FOLD == FOLD_PIPE_RR) {
    /* the three dots, then the rule's four norms (the same sums as all seven at once: each value is added on
       its own) */
    double v[FoldNV<FOLD>::NV], w[PK_RR_NV - PK_RR_NV_BASE];
    block_sums<FoldNV<FOLD>::NV, PK_RR_NV>(in.part, in.nb, v);
    block_sums<PK_RR_NV - PK_RR_NV_BASE, PK_RR_NV>(in.part + PK_RR_NV_BASE, in.nb, w);
    if (threadIdx.x != 0) return;
    s = *in.st;
    if (s.repl) {
      pk_rr_est est = *s.repl;
      scalar_update<FOLD>(s, v, w, &est, in.hist, init);
      *s.repl = est;
    } else {
      scalar_update<FOLD>(s, v, nullptr, nullptr, in.hist, init);
    }
  } else {
    double v[FoldNV<FOLD>::NV];
    block_sums<FoldNV<FOLD>::NV>(in.part, in.nb, v);
    if (threadIdx.x != 0) return;
    s = *in.st;
    scalar_update<FOLD>(s, v, nullptr, nullptr, in.hist, init);
  }
  *in.out = s;
}

/* ---- per-cell actions of the operator kernels ----------------------------------------------------
 * An action gets (cell, (A x)[cell], x[cell], in, acc) for each cell, where in = load(cell) holds the
 * action's own per-cell inputs (loaded ahead by the thin-shell kernel: one level early, so their latency
 * overlaps the level before); NV partial sums per block (0: none). begin() is called by every thread
 * first; false = the solve has stopped: the kernel returns at once. MINB: minimum resident blocks per SM
 * asked of the compiler for the grid kernels (__launch_bounds__; 0 = none, the compiler's choice). */

/** y = A x. */
struct ActApply {
  static constexpr int NV = 0;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  double *y;
  __device__ bool begin() { return true; }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double ax, double, const In &, double *) const { y[c] = ax; }
};

/** r = b - A x, 0 at dry cells; acc[0] += r^2 (cpu_kernels.c: pk_cpu_residual). */
struct ActResidual {
  static constexpr int NV = 1;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {
    double b;
  };
  const double *b;
  double *r;
  const uint8_t *wet;
  __device__ bool begin() { return true; }
  __device__ In load(int64_t c) const { return In{b[c]}; }
  __device__ void operator()(int64_t c, double ax, double, const In &in, double *acc) const {
    const double ri = (wet && !wet[c]) ? 0.0 : in.b - ax;
    r[c] = ri;
    acc[0] += ri * ri;
  }
};

/**
 * CG operator loop (pk_cpu_cg_operator_step): x += alpha p; p = z + beta p; q = A z + beta q; acc (p, q).
 * init: alpha = beta = 0 with p and q not read (the CPU's zeroed p, q: p = z + 0, q = A z + 0) and x not
 * touched. FOLD_CG_RHO: the scalar step after the preconditioner loop first (beta from it).
 */
template <int FOLD> struct ActCgOp {
  static constexpr int NV = 1;
  /* measured on an H200 (thin shell; 32^3, 64^3, 128^2 x 64, 256^2 x 128 cells, us): no prefetch and the
     default budget (74 registers) 2.97 6.9 17.5 177; no prefetch, 4 blocks (64) 2.99 5.1 11.8 154;
     prefetch, 2 blocks (110) 2.53 5.7 13.6 148; prefetch, 3 blocks (80 + spills) 3.09 7.5 19.4 148 */
  static constexpr int MINB = 2;
  static constexpr bool PREFETCH = true;
  struct In {
    double p, q, x;
  };
  StepIn sin;
  int init;
  double *x, *p, *q;
  double alpha, beta;
  __device__ bool begin() {
    step_wait();
    double a, b;
    if (!step_scalars<FOLD>(sin, a, b)) return false;
    alpha = init ? 0.0 : a;
    beta = init ? 0.0 : b;
    return true;
  }
  __device__ In load(int64_t c) const {
    In in = {0.0, 0.0, 0.0};
    if (!init) in.p = p[c], in.q = q[c], in.x = x[c];
    return in;
  }
  __device__ void l2pf(int64_t c) const {
    if (!init) l2_prefetch(p + c), l2_prefetch(q + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double az, double zc, const In &in, double *acc) const {
    double pn, qn;
    if (init) {
      pn = zc + 0.0; /* z + 0 * 0 as on the CPU (turns -0 into +0 like it) */
      qn = az + 0.0;
    } else {
      const double pi = in.p;
      x[c] = in.x + alpha * pi;
      pn = zc + beta * pi;
      qn = az + beta * in.q;
    }
    p[c] = pn;
    q[c] = qn;
    acc[0] += pn * qn;
  }
};

/**
 * Pipelined CG update (pk_cpu_pipecg_step) with n = A m: z = n + beta z; q = m + beta q; s = w + beta s;
 * p = u + beta p; x += alpha p; r -= alpha s; u -= alpha q; w -= alpha z; acc (r,u), (w,u), (r,r), and with
 * NORMS the automatic residual replacement's (x,x), (p,p), (u,u), (q,q): slots of NV values (the four sums
 * more cost registers and a fifth of the update's time at small sizes, and slots of 7 read at a stride of 7
 * a tenth of the folded barotropic iteration at 256^2: only the automatic rule has them).
 */
template <bool NORMS> struct ActPipe {
  static constexpr int NV = NORMS ? PK_RR_NV : PK_RR_NV_BASE;
  static constexpr int MINB = PKC_MINB_HEAVY;
  static constexpr bool PREFETCH = false; /* 8 inputs: ahead they would cost 16 more registers (spills) */
  struct In {};
  const pk_cuda_state *st; /* not NULL */
  double *z, *q, *s, *p, *x, *r, *u, *w;
  double alpha, beta;
  __device__ bool begin() {
    step_wait();
    if (st->status != PK_ST_RUNNING) return false;
    alpha = st->alpha;
    beta = st->beta;
    return true;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void l2pf(int64_t c) const {
    l2_prefetch(u + c), l2_prefetch(w + c), l2_prefetch(z + c), l2_prefetch(q + c), l2_prefetch(s + c),
        l2_prefetch(p + c), l2_prefetch(r + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double an, double mc, const In &, double *acc) const {
    const double uo = u[c], wo = w[c];
    const double zi = an + beta * z[c];
    const double qi = mc + beta * q[c];
    const double si = wo + beta * s[c];
    const double pi = uo + beta * p[c];
    const double ri = r[c] - alpha * si;
    const double ui = uo - alpha * qi;
    const double wi = wo - alpha * zi;
    z[c] = zi, q[c] = qi, s[c] = si, p[c] = pi;
    const double xi = x[c] + alpha * pi;
    x[c] = xi;
    r[c] = ri, u[c] = ui, w[c] = wi;
    acc[0] += ri * ui;
    acc[1] += wi * ui;
    acc[2] += ri * ri;
    if constexpr (NORMS) {
      acc[3] += xi * xi; /* the automatic residual replacement's norms (pk_rr.h) */
      acc[4] += pi * pi;
      acc[5] += ui * ui;
      acc[6] += qi * qi;
    }
  }
};

/**
 * Pipelined CG update without a preconditioner (M = I), n = A w_old (the operator kernel's input vector is
 * w_old, its value at the cell comes in as wo). With M = I the general update keeps u == r, q == s and
 * m == w bitwise (the same expressions on the same operands), so only x, r, w, z, s, p are carried:
 * z = n + beta z; s = w_old + beta s; p = r + beta p; x += alpha p; r -= alpha s; w_new = w_old - alpha z;
 * acc (r,r), (w_new,r), (r,r), and with NORMS (x,x), (p,p), (r,r), (s,s): ActPipe's sums with u = r and
 * q = s, so every partial sum and scalar is bitwise the general path's. w_new goes to another array than
 * w_old (the kernel reads w_old's neighbours).
 */
template <bool NORMS> struct ActPipeNone {
  static constexpr int NV = NORMS ? PK_RR_NV : PK_RR_NV_BASE;
  static constexpr int MINB = PKC_MINB_HEAVY;
  static constexpr bool PREFETCH = false;
  struct In {};
  const pk_cuda_state *st; /* not NULL */
  double *z, *s, *p, *x, *r, *wn;
  double alpha, beta;
  __device__ bool begin() {
    step_wait();
    if (st->status != PK_ST_RUNNING) return false;
    alpha = st->alpha;
    beta = st->beta;
    return true;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void l2pf(int64_t c) const {
    l2_prefetch(r + c), l2_prefetch(z + c), l2_prefetch(s + c), l2_prefetch(p + c), l2_prefetch(x + c);
  }
  __device__ void operator()(int64_t c, double an, double wo, const In &, double *acc) const {
    const double ro = r[c];
    const double zi = an + beta * z[c];
    const double si = wo + beta * s[c];
    const double pi = ro + beta * p[c];
    const double ri = ro - alpha * si;
    const double wi = wo - alpha * zi;
    z[c] = zi, s[c] = si, p[c] = pi;
    const double xi = x[c] + alpha * pi;
    x[c] = xi;
    r[c] = ri, wn[c] = wi;
    acc[0] += ri * ri;
    acc[1] += wi * ri;
    acc[2] += ri * ri;
    if constexpr (NORMS) {
      acc[3] += xi * xi; /* (x,x), (p,p), (u,u) = (r,r), (q,q) = (s,s) */
      acc[4] += pi * pi;
      acc[5] += ri * ri;
      acc[6] += si * si;
    }
  }
};

/**
 * z = M^-1 r of an approximate-inverse preconditioner (its 5-point stencil applied to r, pk_cuda_pc.op):
 * the scalar step FOLD first (pipelined CG folds its scalar step into m = M^-1 w).
 */
template <int FOLD> struct ActPcApply {
  static constexpr int NV = 0;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  StepIn sin;
  double *z;
  __device__ bool begin() {
    step_wait();
    double a, b;
    return step_scalars<FOLD>(sin, a, b);
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double y, double, const In &, double *) const { z[c] = y; }
};

/** CG's preconditioner loop with an approximate inverse, after r -= alpha q (k_rupdate): z = M^-1 r;
 *  acc (r, z), (r, r) (cpu_kernels.c's whole-vector path). st NULL: always runs. */
struct ActPcCg {
  static constexpr int NV = 2;
  static constexpr int MINB = 0;
  static constexpr bool PREFETCH = false;
  struct In {};
  const pk_cuda_state *st;
  double *z;
  __device__ bool begin() {
    step_wait();
    return !st || st->status == PK_ST_RUNNING;
  }
  __device__ In load(int64_t) const { return In{}; }
  __device__ void operator()(int64_t c, double y, double rc, const In &, double *acc) const {
    z[c] = y;
    acc[0] += rc * y;
    acc[1] += rc * rc;
  }
};

/** Accumulator array of an action (at least one element). */
template <class Act> struct Acc { double v[Act::NV > 0 ? Act::NV : 1]; };

template <class Act> __device__ __forceinline__ void finish(const Acc<Act> &a, double *part) {
  if constexpr (Act::NV > 0) {
    double t[Act::NV];
#pragma unroll
    for (int j = 0; j < Act::NV; j++) t[j] = a.v[j];
    block_store<Act::NV>(t, part, block_slot());
  }
}

/* ---- operator kernels --------------------------------------------------------------------------- */

/** CSR, one thread per row (grid-stride): y_r = sum_p val[p] x[col[p]] in row order (csr_apply_rows). */
template <typename V, typename I, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_csr(const int64_t *__restrict__ rp, const I *__restrict__ ci, const V *__restrict__ val, int64_t n,
          const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride) {
    double s = 0.0;
    const int64_t p1 = rp[r + 1];
    for (int64_t p = rp[r]; p < p1; p++) s += (double)val[p] * x[ci[p]];
    act(r, s, x[r], act.load(r), acc.v);
  }
  finish<Act>(acc, part);
}

/** Offsets of a DIA view, by value (kernel parameter space). */
struct DiaOff {
  int64_t o[PK_CUDA_DIA_MAX];
};

/**
 * CSR in diagonal storage (pk_cuda_op.csr_format DIA / SYMDIA), one thread per row (grid-stride, the grid of
 * k_csr): y_r = the row's terms in ascending column order from 0.0, slots holding 0 (absent entries, or
 * outside the matrix) skipped, so the sum is csr_apply_rows' bit for bit (pk_cuda.h). SYM: diagonal d holds
 * A[i, i + k_d] for k_d = off[d] >= 0 (off[0] = 0); the lower entry A[r, r - k] is dia[d n + r - k], the
 * upper neighbour row's own coefficient (a shifted read of an array the grid streams anyway: mostly from
 * cache), so DRAM sees nd * sizeof(V) bytes of coefficients per row. ND: a bound on nd (8 or
 * PK_CUDA_DIA_MAX), so the loops unroll with uniform guards.
 * Every load of a row (coefficients and x, at an index clamped into the matrix where the slot lies outside
 * it) is issued before the sum, which then skips a term by a select (s = a != 0 ? s + a x : s, the same
 * value as not adding it): no load waits for another. (A first version loaded x only behind the a != 0
 * test: one memory round trip per diagonal; 7-point Laplacian 256^3 on an H200, plain CG, symmetric DIA
 * 789 us per iteration, no faster than CSR.)
 */
template <typename V, bool SYM, int ND, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_dia(const V *__restrict__ dia, int64_t n, int nd, DiaOff off, const double *__restrict__ x, Act act,
          double *part) {
  constexpr int CH = ND < 8 ? ND : 8; /* diagonals whose loads are issued together (registers) */
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride) {
    double s = 0.0;
    if constexpr (SYM) {
#pragma unroll
      for (int hi = ND - 1; hi >= 1; hi -= CH) { /* lower entries, d = hi, hi - 1, ...: ascending columns */
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = hi - j;
          a[j] = V(0), xv[j] = 0.0;
          if (d >= 1 && d < nd) {
            const int64_t c = r - off.o[d];
            a[j] = c >= 0 ? dia[(int64_t)d * n + c] : V(0);
            xv[j] = x[c >= 0 ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (hi - j >= 1 && hi - j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
      const V a0 = dia[r];
      s = a0 != V(0) ? s + (double)a0 * x[r] : s;
#pragma unroll
      for (int lo = 1; lo < ND; lo += CH) { /* upper entries, d = lo, lo + 1, ... */
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = lo + j;
          a[j] = V(0), xv[j] = 0.0;
          if (d < ND && d < nd) {
            const int64_t c = r + off.o[d];
            a[j] = dia[(int64_t)d * n + r]; /* 0 where c >= n */
            xv[j] = x[c < n ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (lo + j < ND && lo + j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
    } else {
#pragma unroll
      for (int lo = 0; lo < ND; lo += CH) {
        V a[CH];
        double xv[CH];
#pragma unroll
        for (int j = 0; j < CH; j++) {
          const int d = lo + j;
          a[j] = V(0), xv[j] = 0.0;
          if (d < ND && d < nd) {
            const int64_t c = r + off.o[d];
            a[j] = dia[(int64_t)d * n + r]; /* 0 where c is outside the matrix */
            xv[j] = x[c >= 0 && c < n ? c : r];
          }
        }
#pragma unroll
        for (int j = 0; j < CH; j++)
          if (lo + j < ND && lo + j < nd) s = a[j] != V(0) ? s + (double)a[j] * xv[j] : s;
      }
    }
    act(r, s, x[r], act.load(r), acc.v);
  }
  finish<Act>(acc, part);
}

/** USER operator: (A x)[cell] precomputed in pre by the caller's routine; one thread per cell, grid-stride. */
template <class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_pre(const double *__restrict__ pre, int64_t n, const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; r < n; r += stride)
    act(r, pre[r], x[r], act.load(r), acc.v);
  finish<Act>(acc, part);
}

/**
 * CSR, a group of L lanes (2 ... 32, a power of two) per row for long rows (pk_cuda_op.csr_lanes). Warp w of
 * the grid owns the 32 rows r0 = 32 w ... r0 + 31 (grid-stride over warps, so the loop bounds are the same
 * for the whole warp and every lane takes part in the shuffles). The row sums come in L passes of G = 32/L
 * rows: in pass t, group g = lane / L takes row r0 + t G + g; lane l of the group adds val[p] x[col[p]] for
 * p = rp[r] + l, rp[r] + l + L, ... (consecutive lanes read consecutive entries: coalesced loads of val and
 * col, and the G rows of a pass are contiguous in them), then the group's sums are combined by the tree
 * lane l += lane l + o, o = L/2, ..., 1 (shuffles within the group), and lane 0 of the group stores the row
 * sum in shared memory. Then all 32 lanes apply the action, lane i to row r0 + i (coalesced vector
 * updates: the fused steps' 3 to 9 vectors per row are read and written by the whole warp, not by one lane
 * per group). Partial sums: each lane accumulates the rows it updated, then the usual fixed block tree. The
 * row sum's order differs from csr_apply_rows' (see pk_cuda.h); the actions' arithmetic is the same.
 */
template <typename V, typename I, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_csr_vec(const int64_t *__restrict__ rp, const I *__restrict__ ci, const V *__restrict__ val, int64_t n,
              int L, const double *__restrict__ x, Act act, double *part) {
  if (!act.begin()) return;
  __shared__ double rowsum[PKC_BLOCK]; /* 32 per warp */
  Acc<Act> acc = {};
  const int wl = threadIdx.x & 31, lane = wl & (L - 1), g = wl / L, G = 32 / L;
  double *ws = rowsum + (threadIdx.x & ~31);
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t r0 = (int64_t)blockIdx.x * PKC_BLOCK + (threadIdx.x & ~31); r0 < n; r0 += stride) {
    for (int t = 0; t < L; t++) {
      const int64_t r = r0 + t * G + g;
      double s = 0.0;
      if (r < n) {
        const int64_t p1 = rp[r + 1];
#pragma unroll 4
        for (int64_t p = rp[r] + lane; p < p1; p += L) s += (double)val[p] * x[ci[p]];
      }
      for (int o = L / 2; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o, L);
      if (lane == 0) ws[t * G + g] = s;
    }
    __syncwarp();
    const int64_t r = r0 + wl;
    if (r < n) act(r, ws[wl], x[r], act.load(r), acc.v);
    __syncwarp(); /* ws is rewritten by the next rows */
  }
  finish<Act>(acc, part);
}

/**
 * Halo of a distributed grid operator (pk_cuda_op dhw ... dSn, cols): what the grid kernels read at the tile
 * edges. All NULL (and cols = 0) for an ordinary operator.
 */
struct Halo {
  const double *w, *e, *s, *n; /* neighbour edge values, NULL on the global boundary */
  const double *aWe, *aSn;     /* stencil: the east neighbour's aW(0), the north neighbour's aS(j = 0) */
  int cols;                    /* pk_cuda_op.cols */
  int mask;                    /* the sides with a neighbour (halo_mask: 1 w, 2 e, 4 s, 8 n) */
  int pfd;                     /* L2 prefetch distance of the grid kernels, levels (0: none; l2pf_levels) */
};

/**
 * L2 prefetch distance (levels) of the grid-operator kernels: while a thread works on level k, it asks the
 * L2 for level k + pfd (+ 1 when the registers already hold level k + 1) of the vectors it streams
 * (prefetch.global.L2: no registers, no wait), so the register loads find them in the L2: more bytes in
 * flight than the registers allow. Default 1; the option cuda.l2pf=d (pk_cuda_op.l2pf) sets it (0: off). Measured on an H200
 * (thin shell 256 x 256 x 128, us per iteration): 8 levels per thread, CG 279 / 258 at d = 0 / 1, pipelined
 * CG 388 / 374; 16 levels, d = 0 / 1 / 2: CG 273 / 251 / 248, pipelined CG 395 / 381 / 409; 32 levels,
 * d = 1 / 2: CG 246 / 243, pipelined CG 377 / 425.
 */
int l2pf_levels(const pk_cuda_op *op) { return op->l2pf >= 0 && op->l2pf <= 16 ? op->l2pf : 0; }

Halo halo_of(const pk_cuda_op *op) {
  return Halo{op->dhw, op->dhe, op->dhs, op->dhn, op->dWe, op->dSn, op->cols, halo_mask(op), l2pf_levels(op)};
}

/** What the grid-stencil kernel reads across the tile edges (pk_cuda_op gsny ... ghalo). */
struct GHalo {
  const int64_t *nb;       /* per edge cell: the cell across (>= 0 column, -1 wall, <= -2 halo slot) */
  const double *edge;      /* couplings across the edges, nedge * nz */
  const float *edgef;      /* ... their fp32 copy (fp32 views) */
  const double *halo;      /* received values of other ranks' cells, slot h level k at h + nhalo * k */
  const int64_t *rcols;    /* cols = 2: the columns that read a halo slot (nrc) */
  const uint8_t *rmask;    /* cols = 1: 1 for those columns (skipped), per column */
  int64_t nedge, nrc, nhalo;
  int sny, cols;           /* cols: pk_cuda_op.cols (0 all, 1 all but the rcols, 2 the rcols) */
  /** Coupling of edge cell e at level k, in the view's precision. */
  template <typename T> __device__ __forceinline__ double coef(int64_t e, int k) const {
    if constexpr (sizeof(T) == sizeof(float)) return (double)edgef[e + nedge * k];
    else return edge[e + nedge * k];
  }
};

GHalo ghalo_of(const pk_cuda_op *op) {
  return GHalo{op->gnb, op->gedge, op->gedgef, op->ghalo, op->grcols, op->grmask, op->gnedge, op->gnrc, op->gnhalo,
               op->gsny, op->grmask ? op->cols : 0};
}

/** act.l2pf(c) when the action has one (the vectors it reads at cell c), else nothing. */
template <class Act>
__device__ __forceinline__ auto act_l2pf(const Act &a, int64_t c, int) -> decltype(a.l2pf(c)) {
  return a.l2pf(c);
}
template <class Act> __device__ __forceinline__ void act_l2pf(const Act &, int64_t, long) {}

/**
 * The column (i, j) of this thread in a grid launch (Halo::cols: 0 all, 1 all but the tile-edge columns,
 * 2 the tile-edge columns only, in edge_cols' order: the south row (j = 0) and the north row (j = ny-1)
 * where they have a neighbour, then for the rows between them (0, j) and / or (nx-1, j), j ascending).
 * false: no column.
 */
__device__ __forceinline__ bool grid_column(const Halo &h, int nx, int ny, int64_t &col, int &i, int &j) {
  const int64_t t = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x;
  const int64_t ncols = (int64_t)nx * ny;
  const int mask = h.mask;
  const bool small = nx <= 2 || ny <= 2;
  if (h.cols == 2) {
    if (t >= edge_cols(nx, ny, mask)) return false;
    const int rs = h.s ? 1 : 0, rows = rs + (h.n ? 1 : 0);
    if (small) {
      col = t;
    } else if (t < (int64_t)rows * nx) {
      const int64_t r = t / nx;
      col = (r == 0 && rs ? 0 : (int64_t)(ny - 1) * nx) + (t - r * nx);
    } else {
      const int64_t r = t - (int64_t)rows * nx;
      if (h.w && h.e)
        col = (rs + r / 2) * (int64_t)nx + ((r & 1) ? nx - 1 : 0);
      else
        col = (rs + r) * (int64_t)nx + (h.w ? 0 : nx - 1);
    }
  } else {
    if (t >= ncols) return false;
    col = t;
  }
  j = (int)(col / nx), i = (int)(col - (int64_t)j * nx);
  if (h.cols == 1 && mask &&
      (small || (i == 0 && h.w) || (i == nx - 1 && h.e) || (j == 0 && h.s) || (j == ny - 1 && h.n)))
    return false;
  return true;
}

/**
 * L2 prefetch of the grid kernels (Halo::pfd = d > 0): the prologue asks for levels k0 + 1 .. k0 + d of x
 * and of the action's inputs, the step at level k for level k + d + AHEAD (AHEAD = 1 when the registers
 * already hold level k + 1).
 */
template <class Act>
__device__ __forceinline__ void grid_l2pf_prologue(const Act &act, const double *x, int64_t c, int64_t ncols,
                                                   int k0, int k1, int d) {
  for (int t = 1; t <= d && k0 + t < k1; t++) {
    l2_prefetch(x + c + ncols * t);
    act_l2pf(act, c + ncols * t, 0);
  }
}
template <class Act>
__device__ __forceinline__ void grid_l2pf_step(const Act &act, const double *x, int64_t c, int64_t ncols,
                                               int k, int k1, int dist) {
  if (k + dist < k1) {
    l2_prefetch(x + c + ncols * dist);
    act_l2pf(act, c + ncols * dist, 0);
  }
}

/**
 * Column stencil: thread = column (i, j), levels [k0, k0 + kc). Per cell, st_line's expression:
 *   i = 0:       aC x + cs xs + cn xn + cd xd + cu xu (+ aW_{i+1} x_{i+1} when nx > 1)
 *   0 < i < nx-1: aC x + aW x_{i-1} + aW_{i+1} x_{i+1} + cs xs + cn xn + cd xd + cu xu
 *   i = nx-1:    aC x + aW x_{i-1} + cs xs + cn xn + cd xd + cu xu
 * with cs = aS, cn = aS_{j+1}, cd = aV, cu = aV_{k+1}; a missing neighbour has coefficient 0 (the zeroed
 * copies; 0.0 here where the CPU points at a zeroed line) and the own value as x.
 */
template <typename T, class Act>
__device__ __forceinline__ void stencil_body(const T *__restrict__ aW, const T *__restrict__ aS,
                                             const T *__restrict__ aV, const T *__restrict__ aC, int nx,
                                             int ny, int nz, int kc, const double *__restrict__ x, Act act,
                                             double *part, const Halo &h) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t ncols = (int64_t)nx * ny;
  int64_t col = 0;
  int i = 0, j = 0;
  const int k0 = blockIdx.y * kc, k1 = min(nz, k0 + kc);
  if (grid_column(h, nx, ny, col, i, j)) {
    /* a neighbour across a tile edge (distributed operator) counts as inside the grid: its value and,
       for the east and north couplings, its coefficient come from the halo */
    const bool in_w = i > 0, in_e = i < nx - 1, in_s = j > 0, in_n = j < ny - 1;
    const bool has_w = in_w || h.w, has_e = in_e || h.e, has_s = in_s || h.s, has_n = in_n || h.n;
    int64_t c = col + ncols * k0;
    double xc = x[c];
    double xd = k0 > 0 ? x[c - ncols] : xc;
    double cd = (double)aV[c];
    const int pfd = h.pfd;
    if (pfd) grid_l2pf_prologue(act, x, c, ncols, k0, k1, pfd);
    for (int k = k0; k < k1; k++, c += ncols) {
      if (pfd) grid_l2pf_step(act, x, c, ncols, k, k1, pfd);
      const bool has_u = k < nz - 1;
      const double xu = has_u ? x[c + ncols] : xc;
      const double cu = has_u ? (double)aV[c + ncols] : 0.0;
      const double cs = (double)aS[c], xs = has_s ? (in_s ? x[c - nx] : h.s[i + (int64_t)nx * k]) : xc;
      const double cn = has_n ? (in_n ? (double)aS[c + nx] : (double)(T)h.aSn[i + (int64_t)nx * k]) : 0.0;
      const double xn = has_n ? (in_n ? x[c + nx] : h.n[i + (int64_t)nx * k]) : xc;
      const double ac = (double)aC[c];
      double y;
      if (!has_w) {
        double s = ac * xc + cs * xs + cn * xn + cd * xd + cu * xu;
        if (has_e)
          s += in_e ? (double)aW[c + 1] * x[c + 1]
                    : (double)(T)h.aWe[j + (int64_t)ny * k] * h.e[j + (int64_t)ny * k];
        y = s;
      } else if (has_e) {
        const double xw = in_w ? x[c - 1] : h.w[j + (int64_t)ny * k];
        const double ce = in_e ? (double)aW[c + 1] : (double)(T)h.aWe[j + (int64_t)ny * k];
        const double xe = in_e ? x[c + 1] : h.e[j + (int64_t)ny * k];
        y = ac * xc + (double)aW[c] * xw + ce * xe + cs * xs + cn * xn + cd * xd + cu * xu;
      } else {
        const double xw = in_w ? x[c - 1] : h.w[j + (int64_t)ny * k];
        y = ac * xc + (double)aW[c] * xw + cs * xs + cn * xn + cd * xd + cu * xu;
      }
      act(c, y, xc, act.load(c), acc.v);
      xd = xc;
      xc = xu;
      cd = cu;
    }
  }
  finish<Act>(acc, part);
}

/**
 * Thin shell in flux form (ts_line): thread = column (i, j), levels [k0, k0 + kc):
 *   y = |T| (d x + b (x - x_d) + c (x - x_u)) + a (ax_w (x - x_w) + ax_e (x - x_e) + ay_s (x - x_s)
 *       + ay_n (x - x_n)), with i = 0 and i = nx-1 written as the CPU peels them.
 */
template <class Act>
__device__ __forceinline__ void thinshell_body(const double *__restrict__ ta, const double *__restrict__ tb,
                                               const double *__restrict__ tc, const double *__restrict__ td,
                                               const double *__restrict__ area, const double *__restrict__ ax,
                                               const double *__restrict__ ay, int nx, int ny, int nz, int kc,
                                               const double *__restrict__ x, Act act, double *part,
                                               const Halo &h) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t ncols = (int64_t)nx * ny;
  int64_t col = 0;
  int i = 0, j = 0;
  const int k0 = blockIdx.y * kc, k1 = min(nz, k0 + kc);
  if (grid_column(h, nx, ny, col, i, j)) {
    /* a neighbour across a tile edge (distributed operator) counts as inside the grid, its value from the
       halo; the tile's face weights at its edges are the global ones */
    const bool in_w = i > 0, in_e = i < nx - 1, in_s = j > 0, in_n = j < ny - 1;
    const bool has_w = in_w || h.w, has_e = in_e || h.e, has_s = in_s || h.s, has_n = in_n || h.n;
    auto hwe = [&](const double *hv, int k) { return hv[j + (int64_t)ny * k]; };
    auto hsn = [&](const double *hv, int k) { return hv[i + (int64_t)nx * k]; };
    const double ar = area[col];
    const double axw = ax[i + ((int64_t)nx + 1) * j], axe = ax[i + 1 + ((int64_t)nx + 1) * j];
    const double ays = ay[i + (int64_t)nx * j], ayn = ay[i + (int64_t)nx * (j + 1)];
    int64_t c = col + ncols * k0;
    double xc = x[c];
    double xd = k0 > 0 ? x[c - ncols] : xc;
    const int pfd = h.pfd;
    if (pfd) grid_l2pf_prologue(act, x, c, ncols, k0, k1, pfd);
    if constexpr (Act::PREFETCH) {
      /* the loads of level k (x above, the 4 neighbours, the action's inputs) are issued during level k-1,
         so their latency overlaps it */
      struct Nb {
        double xu, xs, xn, xw, xe;
      };
      auto nb_load = [&](int k, int64_t cc, double xk) { /* xk = x[cc]: stands in for a missing neighbour */
        Nb o;
        o.xu = k < nz - 1 ? x[cc + ncols] : xk;
        o.xs = has_s ? (in_s ? x[cc - nx] : hsn(h.s, k)) : xk;
        o.xn = has_n ? (in_n ? x[cc + nx] : hsn(h.n, k)) : xk;
        o.xw = has_w ? (in_w ? x[cc - 1] : hwe(h.w, k)) : xk;
        o.xe = has_e ? (in_e ? x[cc + 1] : hwe(h.e, k)) : xk;
        return o;
      };
      Nb cur = nb_load(k0, c, xc);
      typename Act::In in = act.load(c);
      for (int k = k0; k < k1; k++, c += ncols) {
        if (pfd) grid_l2pf_step(act, x, c, ncols, k, k1, pfd + 1);
        Nb nxt = cur;
        typename Act::In inn = in;
        if (k + 1 < k1) {
          nxt = nb_load(k + 1, c + ncols, cur.xu);
          inn = act.load(c + ncols);
        }
        const double xu = cur.xu, xs = cur.xs, xn = cur.xn;
        const double ak = ta[k], bk = tb[k], ck = tc[k], dk = td[k];
        const double xi = xc;
        const double vert = ar * (dk * xi + bk * (xi - xd) + ck * (xi - xu));
        double y;
        if (!has_w) {
          const double e = has_e ? axe * (xi - cur.xe) : 0.0;
          y = vert + ak * (e + ays * (xi - xs) + ayn * (xi - xn));
        } else if (has_e) {
          y = vert + ak * (axw * (xi - cur.xw) + axe * (xi - cur.xe) + ays * (xi - xs) + ayn * (xi - xn));
        } else {
          y = vert + ak * (axw * (xi - cur.xw) + ays * (xi - xs) + ayn * (xi - xn));
        }
        act(c, y, xc, in, acc.v);
        xd = xc;
        xc = xu;
        cur = nxt;
        in = inn;
      }
    } else {
      for (int k = k0; k < k1; k++, c += ncols) {
        if (pfd) grid_l2pf_step(act, x, c, ncols, k, k1, pfd);
        const double xu = k < nz - 1 ? x[c + ncols] : xc;
        const double xs = has_s ? (in_s ? x[c - nx] : hsn(h.s, k)) : xc;
        const double xn = has_n ? (in_n ? x[c + nx] : hsn(h.n, k)) : xc;
        const double ak = ta[k], bk = tb[k], ck = tc[k], dk = td[k];
        const double xi = xc;
        const double vert = ar * (dk * xi + bk * (xi - xd) + ck * (xi - xu));
        double y;
        if (!has_w) {
          const double e = has_e ? axe * (xi - (in_e ? x[c + 1] : hwe(h.e, k))) : 0.0;
          y = vert + ak * (e + ays * (xi - xs) + ayn * (xi - xn));
        } else if (has_e) {
          const double xw = in_w ? x[c - 1] : hwe(h.w, k), xe = in_e ? x[c + 1] : hwe(h.e, k);
          y = vert + ak * (axw * (xi - xw) + axe * (xi - xe) + ays * (xi - xs) + ayn * (xi - xn));
        } else {
          const double xw = in_w ? x[c - 1] : hwe(h.w, k);
          y = vert + ak * (axw * (xi - xw) + ays * (xi - xs) + ayn * (xi - xn));
        }
        act(c, y, xc, act.load(c), acc.v);
        xd = xc;
        xc = xu;
      }
    }
  }
  finish<Act>(acc, part);
}

/**
 * Grid stencil (pk_cuda_op.gsny > 0): thread = column (i, jv) of the compact nx x ny grid (ny = gsny * tiles),
 * levels [k0, k0 + kc). Per cell the column stencil's expression (stencil_body), a neighbour across a tile
 * edge taken through gnb (a column of x, a wall, a halo slot) with its coupling from gedge (grid.c's
 * gst_line, bitwise): a west wall gives the i = 0 form, an east wall the i = nx-1 form, a south or north
 * wall a zero coupling times the cell's own value. gstencil_col: one column (col, levels k0 .. k1-1) into acc.
 */
template <typename T, class Act>
__device__ __forceinline__ void gstencil_col(const T *__restrict__ aW, const T *__restrict__ aS,
                                             const T *__restrict__ aV, const T *__restrict__ aC, int nx, int nz,
                                             int64_t ncols, int k0, int k1, const double *__restrict__ x,
                                             Act &act, Acc<Act> &acc, const GHalo &g, int64_t col) {
  int64_t jv, i, t, j; /* the column's row, position in it, tile and row in the tile */
  if (ncols <= (int64_t)UINT32_MAX) { /* 32-bit divisions: a 2-D grid does one cell per column */
    const uint32_t c32 = (uint32_t)col, jv32 = c32 / (uint32_t)nx, t32 = jv32 / (uint32_t)g.sny;
    jv = jv32, i = c32 - jv32 * (uint32_t)nx, t = t32, j = jv32 - t32 * (uint32_t)g.sny;
  } else {
    jv = col / nx, i = col - jv * nx, t = jv / g.sny, j = jv - t * g.sny;
  }
  const int64_t base = t * 2 * ((int64_t)nx + g.sny);
  /* the edge cells of this column (-1: not on that edge) and the cells across them */
  const int64_t ew = i == 0 ? base + j : -1, ee = i == nx - 1 ? base + g.sny + j : -1;
  const int64_t es = j == 0 ? base + 2 * g.sny + i : -1, en = j == g.sny - 1 ? base + 2 * g.sny + nx + i : -1;
  const int64_t nw = ew >= 0 ? g.nb[ew] : 0, ne = ee >= 0 ? g.nb[ee] : 0;
  const int64_t ns = es >= 0 ? g.nb[es] : 0, nn = en >= 0 ? g.nb[en] : 0;
  const bool has_w = ew < 0 || nw != -1, has_e = ee < 0 || ne != -1;
  int64_t c = col + ncols * k0;
  double xc = x[c];
  double xd = k0 > 0 ? x[c - ncols] : xc;
  double cd = nz > 1 ? (double)aV[c] : 0.0; /* 2-D: aV holds zeros; the same product without the load */
  for (int k = k0; k < k1; k++, c += ncols) {
    const bool has_u = k < nz - 1;
    const double xu = has_u ? x[c + ncols] : xc;
    const double cu = has_u ? (double)aV[c + ncols] : 0.0;
    /* the value across edge cell e whose neighbour reference is r (own value at a wall) */
#define PKC_ACROSS(r) ((r) >= 0 ? x[(r) + ncols * k] : (r) == -1 ? xc : g.halo[(-2 - (r)) + g.nhalo * k])
    const double cs = es < 0 ? (double)aS[c] : g.coef<T>(es, k), xs = es < 0 ? x[c - nx] : PKC_ACROSS(ns);
    const double cn = en < 0 ? (double)aS[c + nx] : g.coef<T>(en, k), xn = en < 0 ? x[c + nx] : PKC_ACROSS(nn);
    const double ac = (double)aC[c];
    double y;
    if (!has_w) {
      double s = ac * xc + cs * xs + cn * xn + cd * xd + cu * xu;
      if (has_e) s += ee < 0 ? (double)aW[c + 1] * x[c + 1] : g.coef<T>(ee, k) * PKC_ACROSS(ne);
      y = s;
    } else {
      const double cw = ew < 0 ? (double)aW[c] : g.coef<T>(ew, k), xw = ew < 0 ? x[c - 1] : PKC_ACROSS(nw);
      if (has_e) {
        const double ce = ee < 0 ? (double)aW[c + 1] : g.coef<T>(ee, k), xe = ee < 0 ? x[c + 1] : PKC_ACROSS(ne);
        y = ac * xc + cw * xw + ce * xe + cs * xs + cn * xn + cd * xd + cu * xu;
      } else {
        y = ac * xc + cw * xw + cs * xs + cn * xn + cd * xd + cu * xu;
      }
    }
#undef PKC_ACROSS
    act(c, y, xc, act.load(c), acc.v);
    xd = xc;
    xc = xu;
    cd = cu;
  }
}

/* GS: grid-stride over the columns (a capped 2-D launch, pk_cuda_op gcap: each thread a few columns); else a
   thread per column (the other launches keep that code: a loop there cost pipelined CG 4-5 % on an H100).
   Several ranks: an interior launch (cols 1) skips the columns that read a halo slot, an edge launch (cols 2)
   runs only them. */
template <typename T, class Act, bool GS>
__device__ __forceinline__ void gstencil_body(const T *__restrict__ aW, const T *__restrict__ aS,
                                              const T *__restrict__ aV, const T *__restrict__ aC, int nx, int ny,
                                              int nz, int kc, const double *__restrict__ x, Act act, double *part,
                                              GHalo g) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t ncols = (int64_t)nx * ny;
  const int k0 = blockIdx.y * kc, k1 = min(nz, k0 + kc);
  const int64_t t0 = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x;
  if constexpr (GS) {
    const int64_t tn = g.cols == 2 ? g.nrc : ncols, stride = (int64_t)gridDim.x * PKC_BLOCK;
    for (int64_t tt = t0; tt < tn; tt += stride) {
      const int64_t col = g.cols == 2 ? g.rcols[tt] : tt;
      if (g.cols == 1 && g.rmask[col]) continue;
      gstencil_col<T, Act>(aW, aS, aV, aC, nx, nz, ncols, k0, k1, x, act, acc, g, col);
    }
  } else {
    const int64_t col = g.cols == 2 ? (t0 < g.nrc ? g.rcols[t0] : ncols) : t0;
    if (col < ncols && !(g.cols == 1 && g.rmask[col]))
      gstencil_col<T, Act>(aW, aS, aV, aC, nx, nz, ncols, k0, k1, x, act, acc, g, col);
  }
  finish<Act>(acc, part);
}

/* The grid kernels: the compiler's register budget (k_stencil, k_thinshell) or that of Act::MINB resident
   blocks (the _minb variants, for Act::MINB > 0). */
#define PKC_STENCIL_PARAMS                                                                                \
  const T *__restrict__ aW, const T *__restrict__ aS, const T *__restrict__ aV, const T *__restrict__ aC, \
      int nx, int ny, int nz, int kc, const double *__restrict__ x, Act act, double *part, Halo h
#define PKC_GSTENCIL_PARAMS                                                                               \
  const T *__restrict__ aW, const T *__restrict__ aS, const T *__restrict__ aV, const T *__restrict__ aC, \
      int nx, int ny, int nz, int kc, const double *__restrict__ x, Act act, double *part, GHalo g
#define PKC_THINSHELL_PARAMS                                                                                \
  const double *__restrict__ ta, const double *__restrict__ tb, const double *__restrict__ tc,              \
      const double *__restrict__ td, const double *__restrict__ area, const double *__restrict__ ax,        \
      const double *__restrict__ ay, int nx, int ny, int nz, int kc, const double *__restrict__ x, Act act, \
      double *part, Halo h

template <typename T, class Act> __global__ void __launch_bounds__(PKC_BLOCK) k_stencil(PKC_STENCIL_PARAMS) {
  stencil_body<T, Act>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, h);
}
template <typename T, class Act>
__global__ void __launch_bounds__(PKC_BLOCK, Act::MINB) k_stencil_minb(PKC_STENCIL_PARAMS) {
  stencil_body<T, Act>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, h);
}
template <typename T, class Act, bool GS>
__global__ void __launch_bounds__(PKC_BLOCK) k_gstencil(PKC_GSTENCIL_PARAMS) {
  gstencil_body<T, Act, GS>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, g);
}
template <typename T, class Act, bool GS>
__global__ void __launch_bounds__(PKC_BLOCK, Act::MINB) k_gstencil_minb(PKC_GSTENCIL_PARAMS) {
  gstencil_body<T, Act, GS>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, g);
}
template <class Act> __global__ void __launch_bounds__(PKC_BLOCK) k_thinshell(PKC_THINSHELL_PARAMS) {
  thinshell_body<Act>(ta, tb, tc, td, area, ax, ay, nx, ny, nz, kc, x, act, part, h);
}
template <class Act>
__global__ void __launch_bounds__(PKC_BLOCK, Act::MINB) k_thinshell_minb(PKC_THINSHELL_PARAMS) {
  thinshell_body<Act>(ta, tb, tc, td, area, ax, ay, nx, ny, nz, kc, x, act, part, h);
}
#undef PKC_STENCIL_PARAMS
#undef PKC_GSTENCIL_PARAMS
#undef PKC_THINSHELL_PARAMS

/**
 * Launch act over the cells of op with input vector x; *nblocks (may be NULL) = slots written; pdl: as a
 * programmatic dependent launch (Act::begin() calls step_wait()).
 */
template <class Act>
int launch_op(cudaStream_t s, const pk_cuda_op *op, const double *x, Act act, double *part, int64_t *nblocks,
              bool pdl = false) {
  if (op->type == PKRYLOV_OPERATOR_USER) {
    const int64_t nb = blocks_1d(op->n);
    if (nblocks) *nblocks = nb;
    if (!op->pre) return (int)cudaErrorInvalidValue;
    return launch_kernel(pdl, k_pre<Act>, dim3((unsigned)nb), dim3(PKC_BLOCK), 0, s, op->pre, op->n, x, act, part);
  }
  if (op->type == PKRYLOV_OPERATOR_CSR && op->csr_format != PK_CUDA_CSR_PLAIN) {
    const int64_t nb = blocks_1d(op->n);
    if (nblocks) *nblocks = nb;
    const int nd = op->dia_nd;
    if (nd < 1 || nd > PK_CUDA_DIA_MAX || (op->fp32 ? !op->diaf : !op->dia)) return (int)cudaErrorInvalidValue;
    DiaOff off = {};
    for (int d = 0; d < nd; d++) off.o[d] = op->dia_off[d];
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    const bool sym = op->csr_format == PK_CUDA_CSR_SYMDIA;
    /* the bound ND of the unrolled loops: 4 (a symmetric 7-point matrix), 8 (plain 7-point), else 32 */
#define PKC_DIA(V, SYM, arr)                                                                              \
  do {                                                                                                  \
    if (nd <= 4)                                                                                        \
      return launch_kernel(pdl, k_dia<V, SYM, 4, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part);  \
    if (nd <= 8)                                                                                        \
      return launch_kernel(pdl, k_dia<V, SYM, 8, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, part);  \
    return launch_kernel(pdl, k_dia<V, SYM, PK_CUDA_DIA_MAX, Act>, g, b, 0, s, arr, op->n, nd, off, x, act, \
                         part);                                                                         \
  } while (0)
    if (op->fp32) {
      if (sym) PKC_DIA(float, true, op->diaf);
      PKC_DIA(float, false, op->diaf);
    }
    if (sym) PKC_DIA(double, true, op->dia);
    PKC_DIA(double, false, op->dia);
#undef PKC_DIA
  }
  if (op->type == PKRYLOV_OPERATOR_CSR) {
    const int L = csr_lanes(op);
    const int64_t nb = blocks_1d(op->n); /* the vector kernel too: a warp owns 32 rows at a time */
    if (nblocks) *nblocks = nb;
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    if (L > 1) {
      if (op->fp32) {
        if (op->col32)
          return launch_kernel(pdl, k_csr_vec<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf,
                               op->n, L, x, act, part);
        return launch_kernel(pdl, k_csr_vec<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf,
                             op->n, L, x, act, part);
      }
      if (op->col32)
        return launch_kernel(pdl, k_csr_vec<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val,
                             op->n, L, x, act, part);
      return launch_kernel(pdl, k_csr_vec<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val,
                           op->n, L, x, act, part);
    }
    if (op->fp32) {
      if (op->col32)
        return launch_kernel(pdl, k_csr<float, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->valf,
                             op->n, x, act, part);
      return launch_kernel(pdl, k_csr<float, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->valf,
                           op->n, x, act, part);
    }
    if (op->col32)
      return launch_kernel(pdl, k_csr<double, int32_t, Act>, g, b, 0, s, op->rowptr, op->col32, op->val,
                           op->n, x, act, part);
    return launch_kernel(pdl, k_csr<double, int64_t, Act>, g, b, 0, s, op->rowptr, op->col64, op->val, op->n,
                         x, act, part);
  }
  /* the device cannot report an unknown type: refuse it here rather than run it as a thin shell */
  if (op->type != PKRYLOV_OPERATOR_STENCIL7 && op->type != PKRYLOV_OPERATOR_THINSHELL)
    return (int)cudaErrorInvalidValue;
  const GridShape gs = grid_shape(op);
  if (nblocks) *nblocks = gs.bx * gs.by;
  const dim3 grid((unsigned)gs.bx, (unsigned)gs.by), b(PKC_BLOCK);
  if (op->type == PKRYLOV_OPERATOR_STENCIL7 && op->gsny > 0) { /* a grid stencil: tiles and their edges */
    const GHalo gh = ghalo_of(op);
    const bool loop = gs.bx * PKC_BLOCK < launch_cols(op); /* a capped launch (gcap): grid-stride */
    auto kd = Act::MINB > 0 ? (loop ? k_gstencil_minb<double, Act, true> : k_gstencil_minb<double, Act, false>)
                            : (loop ? k_gstencil<double, Act, true> : k_gstencil<double, Act, false>);
    auto kf = Act::MINB > 0 ? (loop ? k_gstencil_minb<float, Act, true> : k_gstencil_minb<float, Act, false>)
                            : (loop ? k_gstencil<float, Act, true> : k_gstencil<float, Act, false>);
    if (op->fp32)
      return launch_kernel(pdl, kf, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf, op->nx, op->ny, op->nz,
                           gs.kc, x, act, part, gh);
    return launch_kernel(pdl, kd, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC, op->nx, op->ny, op->nz,
                         gs.kc, x, act, part, gh);
  }
  const Halo h = halo_of(op);
  if (op->type == PKRYLOV_OPERATOR_STENCIL7) {
    auto kd = Act::MINB > 0 ? k_stencil_minb<double, Act> : k_stencil<double, Act>;
    auto kf = Act::MINB > 0 ? k_stencil_minb<float, Act> : k_stencil<float, Act>;
    if (op->fp32)
      return launch_kernel(pdl, kf, grid, b, 0, s, op->aWf, op->aSf, op->aVf, op->aCf, op->nx, op->ny, op->nz,
                           gs.kc, x, act, part, h);
    return launch_kernel(pdl, kd, grid, b, 0, s, op->aW, op->aS, op->aV, op->aC, op->nx, op->ny, op->nz,
                         gs.kc, x, act, part, h);
  }
  auto kt = Act::MINB > 0 ? k_thinshell_minb<Act> : k_thinshell<Act>;
  return launch_kernel(pdl, kt, grid, b, 0, s, op->ta, op->tb, op->tc, op->td, op->area, op->ax, op->ay,
                       op->nx, op->ny, op->nz, gs.kc, x, act, part, h);
}

/* ---- preconditioner kernels --------------------------------------------------------------------- */

/**
 * One thread per cell (grid-stride), none (T = void: z = r) or Jacobi (z = dinv r).
 * STEP = 0: z = M^-1 r. STEP = 1: CG preconditioner loop r -= alpha q; z = M^-1 r; acc (r, z), (r, r)
 * (alpha_zero: r unchanged and q not read).
 */
template <typename T, int STEP, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_pointwise(const T *__restrict__ dinv, int64_t n, StepIn sin, int alpha_zero, double *__restrict__ r,
                const double *__restrict__ q, double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const double alpha = (STEP && !alpha_zero) ? a0 : 0.0;
  double acc[2] = {0.0, 0.0};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) {
    double ri = r[i];
    if (STEP && !alpha_zero) {
      ri = ri - alpha * q[i];
      r[i] = ri;
    }
    double zi;
    if constexpr (sizeof(T) == 1)
      zi = ri; /* none */
    else
      zi = (double)dinv[i] * ri;
    z[i] = zi;
    if (STEP) {
      acc[0] += ri * zi;
      acc[1] += ri * ri;
    }
  }
  if (STEP) block_store<2>(acc, part, blockIdx.x);
}

/**
 * Column symmetric (L D L^T), one thread per column (grid-stride), cell(c, k) = c*cs + k*ls:
 *   forward  y_0 = r_0, y_k = r_k - lmul_{k-1} y_{k-1}
 *   backward z_{nz-1} = y dinv, z_k = dinv_k y_k - lmul_k z_{k+1}
 * MODE 0: z = M^-1 r. MODE 1 (pk_cpu_cg_precond_step's separate passes, k-fast): r -= alpha q first, then
 * the sweeps, acc (r, z) as sum r z and (r, r). MODE 2 (pc_sym_kslow_cg, k-slow): the same with
 * (r, z) = sum dinv y^2 accumulated in the forward sweep.
 */
template <typename T, int MODE, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, PKC_MINB_HEAVY)
    k_col_sym(const T *__restrict__ lmul, const T *__restrict__ dinv, int64_t ncols, int nz, int64_t cs,
              int64_t ls, StepIn sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
              double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const bool upd = MODE != 0 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < ncols; col += stride) {
    int64_t c = col * cs;
    double y = 0.0, rv = 0.0;
    for (int k = 0; k < nz; k++, c += ls) {
      rv = r[c];
      if (upd) {
        rv = rv - alpha * q[c];
        r[c] = rv;
      }
      y = k == 0 ? rv : rv - (double)lmul[c - ls] * y;
      z[c] = y;
      if (MODE != 0) acc[1] += rv * rv;
      if (MODE == 2) acc[0] += (double)dinv[c] * y * y;
    }
    c -= ls; /* level nz-1 */
    double zn = y * (double)dinv[c];
    z[c] = zn;
    if (MODE == 1) acc[0] += rv * zn;
    for (int k = nz - 2; k >= 0; k--) {
      c -= ls;
      zn = (double)dinv[c] * z[c] - (double)lmul[c] * zn;
      z[c] = zn;
      if (MODE == 1) acc[0] += r[c] * zn;
    }
  }
  if (MODE != 0) block_store<2>(acc, part, blockIdx.x);
}

/**
 * Column general (dgttrf factors per cell), one thread per column (grid-stride), the arithmetic of
 * pc_general / LAPACK dgtts2: L with the interchanges of ipiv (forward, streaming), then U with du, du2
 * (backward). MODE 0: z = M^-1 r. MODE 1: r -= alpha q first, acc (r, z), (r, r).
 */
template <int MODE, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, PKC_MINB_HEAVY)
    k_col_gen(const double *__restrict__ gdl, const double *__restrict__ gd, const double *__restrict__ gdu,
              const double *__restrict__ gdu2, const int32_t *__restrict__ ipiv, int64_t ncols, int nz,
              int64_t cs, int64_t ls, StepIn sin, int alpha_zero, double *__restrict__ r,
              const double *__restrict__ q, double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  const bool upd = MODE != 0 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0};
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < ncols; col += stride) {
    int64_t c = col * cs;
    double carry = r[c]; /* b_i as modified by the previous elimination step */
    if (upd) {
      carry = carry - alpha * q[c];
      r[c] = carry;
    }
    if (MODE != 0) acc[1] += carry * carry;
    for (int i = 0; i + 1 < nz; i++, c += ls) {
      double b1 = r[c + ls];
      if (upd) {
        b1 = b1 - alpha * q[c + ls];
        r[c + ls] = b1;
      }
      if (MODE != 0) acc[1] += b1 * b1;
      const double l = gdl[c];
      const bool keep = ipiv[c] == i + 1; /* 1-based: no interchange */
      z[c] = keep ? carry : b1;
      carry = keep ? b1 - l * carry : carry - l * b1;
    }
    /* c is level nz-1: U x = y backward */
    double x1 = carry / gd[c], x2 = 0.0;
    z[c] = x1;
    if (MODE != 0) acc[0] += r[c] * x1;
    if (nz > 1) {
      c -= ls;
      const double x0 = (z[c] - gdu[c] * x1) / gd[c];
      z[c] = x0;
      if (MODE != 0) acc[0] += r[c] * x0;
      x2 = x1;
      x1 = x0;
    }
    for (int i = nz - 3; i >= 0; i--) {
      c -= ls;
      const double x0 = (z[c] - gdu[c] * x1 - gdu2[c] * x2) / gd[c];
      z[c] = x0;
      if (MODE != 0) acc[0] += r[c] * x0;
      x2 = x1;
      x1 = x0;
    }
  }
  if (MODE != 0) block_store<2>(acc, part, blockIdx.x);
}

/* ---- column sweeps with the column on chip (symmetric, k-slow) ------------------------------------
 * k_col_sm: one warp per block, one thread per column, PKC_SM_COLS = 32 consecutive columns per block
 * (coalesced). The forward sweep writes, per level, w_k = dinv_k y_k and l_k into shared memory (16 B per
 * level and column); the backward sweep reads them back, so y never goes through device memory. The
 * loads of the forward sweep are issued a chunk of K levels ahead (register double buffer, all loads of a
 * chunk before the dependent recurrence). k_col_stage (small problems) and k_col_ts_res (large thin
 * shells) below are its two specialisations. The factors come from one of:
 *  - FACT_STORED: lmul / dinv (fp64 or fp32 copies) read once per cell;
 *  - FACT_THINSHELL: recomputed from the thin shell (level vectors staged in shared memory per block,
 *    |T| and asum per column), nothing per cell;
 *  - FACT_STENCIL: recomputed from aC and aV (the same 16 B per cell as the stored factors: used only when
 *    forced, pc->onthefly = 2);
 * with the arithmetic of LAPACK dpttrf (dpttrf_step), so the values are the stored ones bit for bit.
 * pc->onthefly (set by the backend when every column is one positive definite segment): 1 = use the
 * recomputation where it pays (thin shell from PKC_OTF_MIN_CELLS cells and PKC_RES_MIN_COLS columns:
 * k_col_ts_res); 2 and 3 force the chunked on-chip (k_col_sm) and the resident (k_col_ts_res, thin shell
 * only) recomputation (tests). The recomputation costs a correctly rounded division per level on each
 * column's critical path (measured ~150 ns per level for a lone warp), which is why small problems read
 * the stored factors. */

/** Columns (threads) per block of the on-chip sweeps. */
constexpr int PKC_SM_COLS = 32;
/**
 * Cells from which the thin shell's column factors are recomputed rather than read (pc->onthefly = 1).
 * Below it the vectors live in L2, the sweep is latency-bound, and the division chain of the recomputation
 * (one correctly rounded division per level on the critical path) costs more than reading the factors.
 */
constexpr int64_t PKC_OTF_MIN_CELLS = (int64_t)1 << 20;

/** Where the column factors of the on-chip sweeps come from. */
enum { FACT_STORED = 0, FACT_THINSHELL = 1, FACT_STENCIL = 2 };

/** Levels per load chunk of the on-chip sweeps (registers: 4 arrays of 2 K doubles at most). */
template <int FACT> struct SmChunk {
  static constexpr int K = FACT == FACT_THINSHELL ? 16 : 8;
};

/** Inputs of the on-chip sweeps (only the arrays of the factor source are set). */
struct ColArgs {
  int64_t ncols;
  int nz;
  int nx;                     /* thin shell: column col = i + nx j */
  const double *lmul, *dinv;  /* FACT_STORED, fp64 */
  const float *lmulf, *dinvf; /* FACT_STORED, fp32 */
  const double *aC, *aV;      /* FACT_STENCIL */
  const double *ta, *tb, *tc, *td, *area, *ax, *ay; /* FACT_THINSHELL */
};

/** Blocks of the on-chip sweeps over ncols columns (grid-stride beyond PKC_MAX_BLOCKS). */
int64_t sm_blocks(int64_t ncols) {
  int64_t b = (ncols + PKC_SM_COLS - 1) / PKC_SM_COLS;
  if (b > PKC_MAX_BLOCKS) b = PKC_MAX_BLOCKS;
  return b < 1 ? 1 : b;
}

/** Dynamic shared memory of k_col_sm: w and l per level and column, plus the thin shell's level data. */
size_t sm_bytes(int fact, int nz) {
  const size_t levels = fact == FACT_THINSHELL ? 3 * (size_t)nz : 0;
  return sizeof(double) * ((size_t)2 * (size_t)nz * PKC_SM_COLS + levels);
}

/**
 * Thin-shell column scalars as thinshell.c builds them: |T| = area[col] and
 * asum = ax_w + ax_e + ay_s + ay_n, added left to right (ts_columns).
 */
__device__ __forceinline__ void ts_column(const ColArgs &a, int64_t col, double &ar, double &asum) {
  const int64_t nx = a.nx, j = col / nx, i = col - j * nx;
  ar = a.area[col];
  asum = a.ax[i + (nx + 1) * j] + a.ax[i + 1 + (nx + 1) * j] + a.ay[i + nx * j] + a.ay[i + nx * (j + 1)];
}

/**
 * Thin-shell row k of a column's tridiagonal (pk_op_get_tridiag / ts_diag): diagonal
 * D = |T| ((d_k + b_k) + c_k) + asum a_k (dbc = (d_k + b_k) + c_k), coupling to the level above
 * e = -|T| c_k (0 at the top).
 */
__device__ __forceinline__ void ts_row(double ar, double asum, double dbc, double ak, double ck, bool top,
                                       double &D, double &e) {
  D = ar * dbc + asum * ak;
  e = top ? 0.0 : -ar * ck;
}

/**
 * One step of LAPACK dpttrf (reference: E(I) = EI / D(I); D(I+1) = D(I+1) - E(I) * EI) for level k of a
 * column that is one positive definite segment (s = +1): with the row's diagonal D and coupling e,
 *   d_k = D - l_{k-1} e_{k-1} (d_0 = D),  l_k = e / d_k (0 at the top),  dinv_k = 1 / d_k (precond.c: s / D).
 * lraw, eprev carry l_{k-1}, e_{k-1} to the next level.
 */
__device__ __forceinline__ double dpttrf_step(int k, int nz, double D, double e, double &lraw, double &eprev,
                                              double &l, double &dinv) {
  const double d = k == 0 ? D : D - lraw * eprev;
  lraw = k + 1 < nz ? e / d : 0.0;
  eprev = e;
  l = lraw;
  dinv = 1.0 / d;
  return d;
}

/** Per warp: part[slot * NV + j] = sum of acc[j] over the 32 lanes, fixed shuffle tree (16, 8, 4, 2, 1). */
template <int NV>
__device__ __forceinline__ void warp_store(const double (&acc)[NV], double *part, int64_t slot) {
#pragma unroll
  for (int j = 0; j < NV; j++) {
    double v = acc[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) part[slot * NV + j] = v;
  }
}

/**
 * Column symmetric sweep pair, k-slow, the column on chip (see above). MODE 0: z = M^-1 r (r read only).
 * MODE 2 (pc_sym_kslow_cg): r -= alpha q (unless alpha_zero), then the sweeps, acc (r, z) = sum dinv y^2
 * in the forward sweep and (r, r). Per cell, as precond.c:
 *   forward  y_0 = r_0, y_k = r_k - l_{k-1} y_{k-1};  w_k = dinv_k y_k
 *   backward z_{nz-1} = w_{nz-1}, z_k = w_k - l_k z_{k+1}
 * F32: the factors used are rounded to float (as the fp32 copies; the recurrence of dpttrf stays fp64).
 */
template <int FACT, int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_SM_COLS)
    k_col_sm(ColArgs a, StepIn sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
             double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  constexpr int K = SmChunk<FACT>::K, W = PKC_SM_COLS;
  extern __shared__ double smem[];
  const int nz = a.nz, lane = threadIdx.x;
  const int64_t ncols = a.ncols;
  double *sw = smem, *sl = smem + (size_t)nz * W;
  double *sdbc = sl + (size_t)nz * W, *sa = sdbc + nz, *sc = sa + nz; /* thin shell only */
  if constexpr (FACT == FACT_THINSHELL) {
    for (int k = lane; k < nz; k += W) {
      sdbc[k] = a.td[k] + a.tb[k] + a.tc[k]; /* ts_diag: d + b + c */
      sa[k] = a.ta[k];
      sc[k] = a.tc[k];
    }
    __syncthreads();
  }
  const bool upd = MODE == 2 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t ngroups = (ncols + W - 1) / W;
  for (int64_t g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const int64_t col = g * W + lane;
    if (col >= ncols) continue;
    double ar = 0.0, asum = 0.0;
    if constexpr (FACT == FACT_THINSHELL) ts_column(a, col, ar, asum);
    /* next chunk: r, q, and the per-cell factor data (stored: l, dinv; stencil: aC, aV of the level above).
       fp32 factors stay float in the buffer and are widened where they are used: a conversion next to the
       load would wait for it there and take away the chunk's look-ahead */
    using FT = typename std::conditional<F32 && FACT == FACT_STORED, float, double>::type;
    double br[K], bq[K];
    FT b0[K], b1[K];
    auto load = [&](int k0) {
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        br[i] = bq[i] = b0[i] = b1[i] = 0.0;
        if (k < nz) {
          const int64_t c = col + ncols * k;
          br[i] = r[c];
          if (upd) bq[i] = q[c];
          if constexpr (FACT == FACT_STORED) {
            if constexpr (F32) {
              if (k + 1 < nz) b0[i] = a.lmulf[c];
              b1[i] = a.dinvf[c];
            } else {
              if (k + 1 < nz) b0[i] = a.lmul[c];
              b1[i] = a.dinv[c];
            }
          } else if constexpr (FACT == FACT_STENCIL) {
            b0[i] = a.aC[c];
            if (k + 1 < nz) b1[i] = a.aV[c + ncols];
          }
        }
      }
    };
    load(0);
    double y = 0.0, lprev = 0.0, lraw = 0.0, eprev = 0.0;
    for (int k0 = 0; k0 < nz; k0 += K) {
      double cr[K], cq[K];
      FT c0[K], c1[K];
#pragma unroll
      for (int i = 0; i < K; i++) cr[i] = br[i], cq[i] = bq[i], c0[i] = b0[i], c1[i] = b1[i];
      if (k0 + K < nz) load(k0 + K);
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        if (k < nz) {
          double rv = cr[i];
          if (upd) {
            rv = rv - alpha * cq[i];
            r[col + ncols * k] = rv;
          }
          double lk, dk; /* the factors used at level k */
          if constexpr (FACT == FACT_STORED) {
            lk = (double)c0[i];
            dk = (double)c1[i];
          } else {
            double D, e;
            if constexpr (FACT == FACT_THINSHELL) {
              ts_row(ar, asum, sdbc[k], sa[k], sc[k], k + 1 >= nz, D, e);
            } else {
              D = c0[i];
              e = c1[i];
              if (nz == 1 && D == 0.0) D = 1.0; /* an all-zero row (dry cell) is an identity row */
            }
            dpttrf_step(k, nz, D, e, lraw, eprev, lk, dk);
            if constexpr (F32) lk = (double)(float)lk, dk = (double)(float)dk;
          }
          y = k == 0 ? rv : rv - lprev * y;
          const double w = dk * y;
          if (MODE == 2) {
            acc[1] += rv * rv;
            acc[0] += w * y; /* dinv y y, as (dinv y) y */
          }
          sw[k * W + lane] = w;
          sl[k * W + lane] = lk;
          lprev = lk;
        }
      }
    }
    /* backward, a chunk of K levels of w, l read before the dependent steps */
    double zn = sw[(nz - 1) * W + lane];
    z[col + ncols * (nz - 1)] = zn;
    for (int k1 = nz - 2; k1 >= 0; k1 -= K) {
      double cw[K], cl[K];
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k1 - i;
        cw[i] = cl[i] = 0.0;
        if (k >= 0) cw[i] = sw[k * W + lane], cl[i] = sl[k * W + lane];
      }
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k1 - i;
        if (k >= 0) {
          zn = cw[i] - cl[i] * zn;
          z[col + ncols * k] = zn;
        }
      }
    }
  }
  if (MODE == 2) warp_store<2>(acc, part, blockIdx.x);
}

/**
 * Factors of the on-the-fly sources, one thread per column (test hook: pk_cuda_pc_onthefly_factors):
 * lmul[cell] = l_k (0 at the top), dinv[cell] = 1 / d_k, exactly as k_col_sm computes them (fp64).
 */
template <int FACT>
__global__ void __launch_bounds__(PKC_BLOCK) k_otf_factors(ColArgs a, double *lmul, double *dinv) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; col < a.ncols; col += stride) {
    const int nz = a.nz;
    double ar = 0.0, asum = 0.0, lraw = 0.0, eprev = 0.0;
    if constexpr (FACT == FACT_THINSHELL) ts_column(a, col, ar, asum);
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + a.ncols * k;
      double D, e, l, d;
      if constexpr (FACT == FACT_THINSHELL) {
        ts_row(ar, asum, a.td[k] + a.tb[k] + a.tc[k], a.ta[k], a.tc[k], k + 1 >= nz, D, e);
      } else {
        D = a.aC[c];
        e = k + 1 < nz ? a.aV[c + a.ncols] : 0.0;
        if (nz == 1 && D == 0.0) D = 1.0;
      }
      dpttrf_step(k, nz, D, e, lraw, eprev, l, d);
      lmul[c] = l;
      dinv[c] = d;
    }
  }
}

/** cp.async of 4 or 8 bytes from global src to shared dst (L1-allocating; sm_80 and later). */
template <int BYTES> __device__ __forceinline__ void cp_async(void *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(src), "n"(BYTES) : "memory");
}
/** Wait for every cp.async of the calling thread (its copies are then visible to it). */
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

/**
 * Stored factors, the whole column staged in shared memory first (small problems: latency-bound). Each
 * thread issues every load of its column at once with cp.async (r, q, lmul, dinv of all levels: one
 * memory latency per column instead of one per chunk), waits, then runs the sweeps of k_col_sm out of
 * shared memory (w overwrites r's slot; l stays in its slot). Shared memory per column and level: 8 (r)
 * + 8 (q, CG step) + 2 sizeof(T) bytes. Same arithmetic and MODEs as k_col_sm.
 * Folded (FOLD != FOLD_NONE, inside a solve only): the loads of the block's first column group are issued
 * before the scalar step, so its latency overlaps theirs; the factors (constant during a solve) even before
 * step_wait(), i.e. while the previous kernel may still run.
 */
template <int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_SM_COLS)
    k_col_stage(ColArgs a, StepIn sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
                double *__restrict__ z, double *part) {
  using T = typename std::conditional<F32, float, double>::type;
  constexpr int W = PKC_SM_COLS;
  extern __shared__ double smem[];
  const int nz = a.nz, lane = threadIdx.x;
  const int64_t ncols = a.ncols;
  const bool upd = MODE == 2 && !alpha_zero;
  double *sr = smem, *sq = smem + (size_t)nz * W;                /* r (then w), q */
  T *sl = (T *)(sq + (MODE == 2 ? (size_t)nz * W : 0)), *sd = sl + (size_t)nz * W; /* lmul, dinv */
  const T *lm, *dv;
  if constexpr (F32)
    lm = a.lmulf, dv = a.dinvf;
  else
    lm = a.lmul, dv = a.dinv;
  auto issue_factors = [&](int64_t col) {
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + ncols * k;
      const int o = k * W + lane;
      if (k + 1 < nz) cp_async<sizeof(T)>(sl + o, lm + c);
      cp_async<sizeof(T)>(sd + o, dv + c);
    }
  };
  auto issue_vectors = [&](int64_t col) {
    for (int k = 0; k < nz; k++) {
      const int64_t c = col + ncols * k;
      const int o = k * W + lane;
      cp_async<8>(sr + o, r + c);
      if (upd) cp_async<8>(sq + o, q + c);
    }
  };
  const int64_t ngroups = (ncols + W - 1) / W;
  const bool early =
      FOLD != FOLD_NONE && (int64_t)blockIdx.x < ngroups && (int64_t)blockIdx.x * W + lane < ncols;
  if (early) issue_factors((int64_t)blockIdx.x * W + lane);
  step_wait();
  if (early) issue_vectors((int64_t)blockIdx.x * W + lane);
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) {
    cp_async_wait_all();
    return;
  }
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  for (int64_t g = blockIdx.x; g < ngroups; g += gridDim.x) {
    const int64_t col = g * W + lane;
    if (col >= ncols) continue;
    if (!early || g != (int64_t)blockIdx.x) {
      issue_vectors(col);
      issue_factors(col);
    }
    cp_async_wait_all();
    double y = 0.0, lprev = 0.0, w = 0.0;
#pragma unroll 4
    for (int k = 0; k < nz; k++) {
      const int o = k * W + lane;
      double rv = sr[o];
      if (upd) {
        rv = rv - alpha * sq[o];
        r[col + ncols * k] = rv;
      }
      y = k == 0 ? rv : rv - lprev * y;
      w = (double)sd[o] * y;
      if (MODE == 2) {
        acc[1] += rv * rv;
        acc[0] += w * y; /* dinv y y */
      }
      sr[o] = w;
      if (k + 1 < nz) lprev = (double)sl[o];
    }
    double zn = w; /* level nz-1 */
    z[col + ncols * (nz - 1)] = zn;
#pragma unroll 4
    for (int k = nz - 2; k >= 0; k--) {
      const int o = k * W + lane;
      zn = sr[o] - (double)sl[o] * zn;
      z[col + ncols * k] = zn;
    }
  }
  if (MODE == 2) warp_store<2>(acc, part, blockIdx.x);
}

/** Shared memory of k_col_stage per block. */
size_t stage_bytes(int mode, bool f32, int nz) {
  const size_t per = 8 + (mode == 2 ? 8 : 0) + 2 * (f32 ? 4 : 8);
  return per * (size_t)nz * PKC_SM_COLS;
}

/**
 * Columns from which the automatic choice (pc->onthefly = 1) takes the resident thin-shell sweeps: one
 * thread per column, so fewer columns leave SMs idle while each thread's recomputation chain (about
 * 0.2 us per level and sweep) sets the time. Measured on an H200: 128 x 128 x 64 (16384 columns) resident
 * 30 us, stored factors 11.5 us; 256 x 256 x 128 (65536 columns) resident 101 us, stored 152 us.
 */
constexpr int64_t PKC_RES_MIN_COLS = 32768;

/** Levels per chunk of the resident thin-shell sweeps: forward prefetch and backward checkpoint interval. */
constexpr int PKC_RES_K = 8;

/**
 * Thin shell, factors recomputed, every column resident at once (large problems): one thread per column,
 * PKC_BLOCK threads per block, grid-stride. Shared memory cannot hold a column of every resident thread,
 * so w_k = dinv_k y_k goes through z (the output) between the sweeps, and the backward sweep recomputes
 * l_k chunk by chunk (PKC_RES_K levels) from the pivot d saved at each chunk start in shared memory,
 * with the same dpttrf arithmetic as the forward sweep. Bytes per cell: CG step r q in, r w out, w in,
 * z out = 48 (part of the w round trip may stay in L2); apply 32. No factor is read from memory. The
 * level data ((d + b) + c, a, c) are staged per block. MODE and F32 as k_col_sm. (Keeping the top levels
 * of w in shared memory, 32 of 128 at 100 KiB per block, was measured slower on an H200: 101 -> 107 us.)
 */
template <int MODE, bool F32, int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK, 2)
    k_col_ts_res(ColArgs a, StepIn sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q,
                 double *__restrict__ z, double *part) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0)) return;
  constexpr int K = PKC_RES_K;
  extern __shared__ double smem[];
  const int nz = a.nz, tid = threadIdx.x, nch = (nz + K - 1) / K;
  const int64_t ncols = a.ncols;
  double *scp = smem;                                               /* [nch][PKC_BLOCK]: d at chunk starts */
  double *sdbc = smem + (size_t)nch * PKC_BLOCK, *sa = sdbc + nz, *sc = sa + nz; /* level data */
  for (int k = tid; k < nz; k += PKC_BLOCK) {
    sdbc[k] = a.td[k] + a.tb[k] + a.tc[k]; /* ts_diag: d + b + c */
    sa[k] = a.ta[k];
    sc[k] = a.tc[k];
  }
  __syncthreads();
  const bool upd = MODE == 2 && !alpha_zero;
  const double alpha = upd ? a0 : 0.0;
  double acc[2] = {0.0, 0.0}; /* (r, z), (r, r) */
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t col = (int64_t)blockIdx.x * PKC_BLOCK + tid; col < ncols; col += stride) {
    double ar, asum;
    ts_column(a, col, ar, asum);
    double br[K], bq[K];
    auto load = [&](int k0) {
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        br[i] = bq[i] = 0.0;
        if (k < nz) {
          br[i] = r[col + ncols * k];
          if (upd) bq[i] = q[col + ncols * k];
        }
      }
    };
    load(0);
    double y = 0.0, lprev = 0.0, lraw = 0.0, eprev = 0.0, w = 0.0;
    for (int j = 0; j < nch; j++) { /* forward */
      const int k0 = j * K;
      double cr[K], cq[K];
#pragma unroll
      for (int i = 0; i < K; i++) cr[i] = br[i], cq[i] = bq[i];
      if (k0 + K < nz) load(k0 + K);
#pragma unroll
      for (int i = 0; i < K; i++) {
        const int k = k0 + i;
        if (k < nz) {
          const int64_t c = col + ncols * k;
          double rv = cr[i];
          if (upd) {
            rv = rv - alpha * cq[i];
            r[c] = rv;
          }
          double D, e, lk, dk;
          ts_row(ar, asum, sdbc[k], sa[k], sc[k], k + 1 >= nz, D, e);
          const double d = dpttrf_step(k, nz, D, e, lraw, eprev, lk, dk);
          if (i == 0) scp[j * PKC_BLOCK + tid] = d;
          if constexpr (F32) lk = (double)(float)lk, dk = (double)(float)dk;
          y = k == 0 ? rv : rv - lprev * y;
          w = dk * y;
          if (MODE == 2) {
            acc[1] += rv * rv;
            acc[0] += w * y; /* dinv y y */
          }
          if (k + 1 < nz) z[c] = w; /* the top level's w stays in w */
          lprev = lk;
        }
      }
    }
    double zn = w; /* backward, chunks from the top */
    z[col + ncols * (nz - 1)] = zn;
    for (int j = nch - 1; j >= 0; j--) {
      const int k0 = j * K;
      double cw[K], cl[K];
#pragma unroll
      for (int i = 0; i < K; i++) { /* the loads first: they overlap the recomputation */
        const int k = k0 + i;
        cw[i] = 0.0;
        if (k + 1 < nz) cw[i] = z[col + ncols * k];
      }
      double d = scp[j * PKC_BLOCK + tid], lr = 0.0, ep = 0.0;
#pragma unroll
      for (int i = 0; i < K; i++) { /* l_k of the chunk, as the forward sweep computed it */
        const int k = k0 + i;
        cl[i] = 0.0;
        if (k + 1 < nz) {
          double D, e;
          ts_row(ar, asum, sdbc[k], sa[k], sc[k], false, D, e);
          if (i > 0) d = D - lr * ep;
          lr = e / d;
          ep = e;
          cl[i] = F32 ? (double)(float)lr : lr;
        }
      }
#pragma unroll
      for (int i = K - 1; i >= 0; i--) {
        const int k = k0 + i;
        if (k + 1 < nz) {
          zn = cw[i] - cl[i] * zn;
          z[col + ncols * k] = zn;
        }
      }
    }
  }
  if (MODE == 2) block_store<2>(acc, part, blockIdx.x);
}

/** Blocks of k_col_ts_res (grid-stride beyond PKC_MAX_BLOCKS): those of the 1-D column kernels. */
int64_t res_blocks(int64_t ncols) { return blocks_1d(ncols); }

/** Shared memory of k_col_ts_res per block: the chunk pivots of every thread and the level data. */
size_t res_bytes(int nz) {
  const size_t nch = ((size_t)nz + PKC_RES_K - 1) / PKC_RES_K;
  return sizeof(double) * (nch * PKC_BLOCK + 3 * (size_t)nz);
}

/** Sweep kernels of the symmetric k-slow column preconditioner (launch_col_sym_kslow picks one). */
enum { SW_OLD = 0, SW_STAGE, SW_CHUNK, SW_RESIDENT };

/**
 * Kernel and factor source for pc. pc->onthefly: 0 stored factors; 1 (the backend's setting) the choice
 * that pays: the resident thin-shell recomputation from PKC_OTF_MIN_CELLS cells and PKC_RES_MIN_COLS
 * columns, else stored; 2 (tests) the chunked on-chip recomputation (thin shell or stencil); 3 (tests)
 * the resident thin-shell one.
 * Stored factors: whole columns staged below PKC_OTF_MIN_CELLS cells, else chunked. A kernel whose shared
 * memory does not fit falls back to the next one (finally k_col_sym, SW_OLD).
 */
void sweep_choice(const pk_cuda_pc *pc, int mode, size_t limit, int *kernel, int *fact, size_t *bytes) {
  const int t = pc->op.type;
  const bool ts = pc->onthefly && t == PKRYLOV_OPERATOR_THINSHELL;
  const bool st = pc->onthefly && t == PKRYLOV_OPERATOR_STENCIL7;
  const bool big = pc->n >= PKC_OTF_MIN_CELLS && pc->ncols >= PKC_RES_MIN_COLS;
  if (ts && (pc->onthefly >= 3 || (pc->onthefly == 1 && big)) &&
      res_bytes(pc->nz) <= limit) {
    *kernel = SW_RESIDENT, *fact = FACT_THINSHELL, *bytes = res_bytes(pc->nz);
    return;
  }
  if (pc->onthefly >= 2 && (ts || st)) {
    const int f = ts ? FACT_THINSHELL : FACT_STENCIL;
    if (sm_bytes(f, pc->nz) <= limit) {
      *kernel = SW_CHUNK, *fact = f, *bytes = sm_bytes(f, pc->nz);
      return;
    }
  }
  *fact = FACT_STORED;
  const size_t sb = stage_bytes(mode, pc->fp32 != 0, pc->nz);
  if (pc->n < PKC_OTF_MIN_CELLS && sb <= limit) {
    *kernel = SW_STAGE, *bytes = sb;
  } else if (sm_bytes(FACT_STORED, pc->nz) <= limit) {
    *kernel = SW_CHUNK, *bytes = sm_bytes(FACT_STORED, pc->nz);
  } else {
    *kernel = SW_OLD, *bytes = 0;
  }
}

/** Arguments of the on-chip sweeps for pc with factor source fact. */
ColArgs sm_args(const pk_cuda_pc *pc, int fact) {
  ColArgs a = {};
  a.ncols = pc->ncols;
  a.nz = pc->nz;
  a.nx = pc->op.nx;
  if (fact == FACT_STORED) {
    a.lmul = pc->lmul, a.dinv = pc->dinv, a.lmulf = pc->lmulf, a.dinvf = pc->dinvf;
  } else if (fact == FACT_STENCIL) {
    a.aC = pc->op.aC, a.aV = pc->op.aV;
  } else {
    a.ta = pc->op.ta, a.tb = pc->op.tb, a.tc = pc->op.tc, a.td = pc->op.td;
    a.area = pc->op.area, a.ax = pc->op.ax, a.ay = pc->op.ay;
  }
  return a;
}

/**
 * Largest shared memory a block may opt in to on the current device (0 on error), less a margin for the
 * static shared memory of the sweep kernels (block_store: 128 bytes).
 */
size_t sm_optin_limit() {
  int dev = 0, v = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v > 1024 ? (size_t)v - 1024 : 0;
}

/** Launch kern<<<nb, threads, bytes>>> after raising its shared-memory limit when bytes > 48 KiB. */
template <class Kern>
int launch_sweep(cudaStream_t s, Kern kern, int64_t nb, int threads, size_t bytes, size_t limit,
                 const ColArgs &a, const StepIn &sin, int alpha_zero, double *r, const double *q, double *z,
                 double *part, bool pdl) {
  if (bytes > 48 * 1024) {
    /* limit: the opt-in maximum less a margin for static shared memory, a constant of the device, so
       concurrent launches set the same value */
    const cudaError_t e =
        cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)limit);
    if (e != cudaSuccess) return (int)e;
  }
  return launch_kernel(pdl, kern, dim3((unsigned)nb), dim3(threads), bytes, s, a, sin, alpha_zero, r, q, z,
                       part);
}

/**
 * The sweeps of a symmetric k-slow column preconditioner, MODE 0 (apply) or 2 (CG step), on the kernel
 * sweep_choice picks. Returns -1 when only k_col_sym fits (the caller launches it), else the CUDA status
 * of the launch; *nb = the partial-sum slots written.
 */
template <int MODE, int FOLD>
int launch_col_sym_kslow(cudaStream_t s, const pk_cuda_pc *pc, const StepIn &sin, int alpha_zero, double *r,
                         const double *q, double *z, double *part, int64_t *nb, bool pdl) {
  const size_t limit = sm_optin_limit();
  int kernel, fact;
  size_t bytes;
  sweep_choice(pc, MODE, limit, &kernel, &fact, &bytes);
  if (kernel == SW_OLD) return -1;
  const ColArgs a = sm_args(pc, fact);
  const bool f = pc->fp32 != 0;
#define PKC_SWEEP(K, NB, T) launch_sweep(s, K, NB, T, bytes, limit, a, sin, alpha_zero, r, q, z, part, pdl)
  if (kernel == SW_RESIDENT) {
    *nb = res_blocks(pc->ncols);
    return f ? PKC_SWEEP((k_col_ts_res<MODE, true, FOLD>), *nb, PKC_BLOCK)
             : PKC_SWEEP((k_col_ts_res<MODE, false, FOLD>), *nb, PKC_BLOCK);
  }
  *nb = sm_blocks(pc->ncols);
  if (kernel == SW_STAGE)
    return f ? PKC_SWEEP((k_col_stage<MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_stage<MODE, false, FOLD>), *nb, PKC_SM_COLS);
  if (fact == FACT_THINSHELL)
    return f ? PKC_SWEEP((k_col_sm<FACT_THINSHELL, MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_sm<FACT_THINSHELL, MODE, false, FOLD>), *nb, PKC_SM_COLS);
  if (fact == FACT_STENCIL)
    return f ? PKC_SWEEP((k_col_sm<FACT_STENCIL, MODE, true, FOLD>), *nb, PKC_SM_COLS)
             : PKC_SWEEP((k_col_sm<FACT_STENCIL, MODE, false, FOLD>), *nb, PKC_SM_COLS);
  return f ? PKC_SWEEP((k_col_sm<FACT_STORED, MODE, true, FOLD>), *nb, PKC_SM_COLS)
           : PKC_SWEEP((k_col_sm<FACT_STORED, MODE, false, FOLD>), *nb, PKC_SM_COLS);
#undef PKC_SWEEP
}

/** r -= alpha q (CG's preconditioner loop before a preconditioner that reads the neighbours of r), the
 *  scalar step FOLD first; alpha_zero: nothing to update. One thread per cell, grid-stride. */
template <int FOLD>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_rupdate(int64_t n, StepIn sin, int alpha_zero, double *__restrict__ r, const double *__restrict__ q) {
  step_wait();
  double a0, b0;
  if (!step_scalars<FOLD>(sin, a0, b0) || alpha_zero) return;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) r[i] = r[i] - a0 * q[i];
}

/**
 * Launch the preconditioner kernel of pc with STEP (0 apply, 1 CG step) on n cells; FOLD: the scalar step
 * run first (FOLD_NONE, FOLD_CG_SIGMA with STEP 1, FOLD_PIPE with STEP 0); pdl: as a programmatic
 * dependent launch.
 */
template <int STEP, int FOLD>
int launch_pc(cudaStream_t s, const pk_cuda_pc *pc, const StepIn &sin, int alpha_zero, int64_t n, double *r,
              const double *q, double *z, double *part, int64_t *nblocks, bool pdl = false) {
  if (pc && pc->type == PKRYLOV_PRECOND_AINV) { /* a stencil on r: r must be complete before it */
    if constexpr (STEP == 0) {
      ActPcApply<FOLD> act{sin, z};
      return launch_op(s, &pc->op, r, act, part, nblocks, pdl);
    } else {
      const int64_t nb1 = blocks_1d(n);
      const int rc = launch_kernel(pdl, k_rupdate<FOLD>, dim3((unsigned)nb1), dim3(PKC_BLOCK), 0, s, n, sin,
                                   alpha_zero, r, q);
      if (rc) return rc;
      ActPcCg act{FOLD == FOLD_NONE ? sin.st : sin.out, z};
      return launch_op(s, &pc->op, r, act, part, nblocks, false);
    }
  }
  if (!pc || pc->type == PKRYLOV_PRECOND_NONE || pc->type == PKRYLOV_PRECOND_JACOBI) {
    const int64_t nb = blocks_1d(n);
    if (nblocks) *nblocks = nb;
    const dim3 g((unsigned)nb), b(PKC_BLOCK);
    if (!pc || pc->type == PKRYLOV_PRECOND_NONE)
      return launch_kernel(pdl, k_pointwise<char, STEP, FOLD>, g, b, 0, s, (const char *)nullptr, n, sin,
                           alpha_zero, r, q, z, part);
    if (pc->fp32)
      return launch_kernel(pdl, k_pointwise<float, STEP, FOLD>, g, b, 0, s, pc->dinvf, n, sin, alpha_zero, r,
                           q, z, part);
    return launch_kernel(pdl, k_pointwise<double, STEP, FOLD>, g, b, 0, s, pc->dinv, n, sin, alpha_zero, r, q,
                         z, part);
  }
  if (pc->type != PKRYLOV_PRECOND_COLUMN) /* an unknown type (or a user view): never run as a column solve */
    return (int)cudaErrorInvalidValue;
  const bool kslow = pc->layout == PKRYLOV_LAYOUT_KSLOW;
  if (pc->symmetric && kslow) { /* the column on chip when it fits in shared memory */
    int64_t nbs = 0;
    constexpr int MODE = STEP == 0 ? 0 : 2;
    const int rc = launch_col_sym_kslow<MODE, FOLD>(s, pc, sin, alpha_zero, r, q, z, part, &nbs, pdl);
    if (rc >= 0) {
      if (nblocks) *nblocks = nbs;
      return rc;
    }
  }
  const int64_t nb = blocks_1d(pc->ncols);
  if (nblocks) *nblocks = nb;
  const int64_t cs = kslow ? 1 : pc->nz, ls = kslow ? pc->ncols : 1;
  const dim3 g((unsigned)nb), b(PKC_BLOCK);
  constexpr int SYM = STEP == 0 ? 0 : 2; /* k-slow CG step: (r, z) as pc_sym_kslow_cg */
  if (!pc->symmetric)
    return launch_kernel(pdl, k_col_gen<STEP, FOLD>, g, b, 0, s, pc->gdl, pc->gd, pc->gdu, pc->gdu2, pc->ipiv,
                         pc->ncols, pc->nz, cs, ls, sin, alpha_zero, r, q, z, part);
  if (STEP == 0 || kslow) {
    if (pc->fp32)
      return launch_kernel(pdl, k_col_sym<float, SYM, FOLD>, g, b, 0, s, pc->lmulf, pc->dinvf, pc->ncols,
                           pc->nz, cs, ls, sin, alpha_zero, r, q, z, part);
    return launch_kernel(pdl, k_col_sym<double, SYM, FOLD>, g, b, 0, s, pc->lmul, pc->dinv, pc->ncols, pc->nz,
                         cs, ls, sin, alpha_zero, r, q, z, part);
  }
  constexpr int KF = STEP == 0 ? 0 : 1; /* k-fast CG step: separate passes */
  if (pc->fp32)
    return launch_kernel(pdl, k_col_sym<float, KF, FOLD>, g, b, 0, s, pc->lmulf, pc->dinvf, pc->ncols, pc->nz,
                         cs, ls, sin, alpha_zero, r, q, z, part);
  return launch_kernel(pdl, k_col_sym<double, KF, FOLD>, g, b, 0, s, pc->lmul, pc->dinv, pc->ncols, pc->nz,
                       cs, ls, sin, alpha_zero, r, q, z, part);
}

/* ---- vector kernels ----------------------------------------------------------------------------- */

/** The nv vector pairs of pk_cuda_dots, passed by value. */
struct DotArgs {
  const double *x[4];
  const double *y[4];
};

/** part[block * NV + j] = block's partial of (x[j], y[j]). */
template <int NV> __global__ void __launch_bounds__(PKC_BLOCK) k_dots(int64_t n, DotArgs a, double *part) {
  double acc[NV];
#pragma unroll
  for (int j = 0; j < NV; j++) acc[j] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) {
#pragma unroll
    for (int j = 0; j < NV; j++) acc[j] += a.x[j][i] * a.y[j][i];
  }
  block_store<NV>(acc, part, blockIdx.x);
}

/** One block: out[j] = sum_b part[b * nvals + j]; thread t adds b = t, t + 256, ... in order, then a tree. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_sum_partials(const double *part, int64_t nb, int nvals, double *out) {
  for (int j = 0; j < nvals; j++) {
    double acc[1] = {0.0};
    for (int64_t b = threadIdx.x; b < nb; b += PKC_BLOCK) acc[0] += part[b * nvals + j];
    block_store<1>(acc, out, j); /* out[j] */
    __syncthreads();             /* the shared scratch is reused for the next j */
  }
}

/** y += a x, a read from device memory. */
__global__ void __launch_bounds__(PKC_BLOCK) k_axpy(int64_t n, const double *a, const double *x, double *y) {
  const double av = *a;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) y[i] = y[i] + av * x[i];
}

/** x = 0 at dry cells. */
__global__ void __launch_bounds__(PKC_BLOCK) k_zero_dry(int64_t n, const uint8_t *wet, double *x) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride)
    if (!wet[i]) x[i] = 0.0;
}

/** dst = src when the state says the current iterate improved the minimum residual (pk_cuda_copy_improved) */
__global__ void __launch_bounds__(PKC_BLOCK) k_copy_improved(const pk_cuda_state *st, int64_t n,
                                                             const double *__restrict__ src,
                                                             double *__restrict__ dst) {
  step_wait();
  if (!st->improved || st->status != PK_ST_RUNNING) return;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

/** Halo-exchange stencil: xh (hx = nx+2, hy = ny+2, nz planes) = x in the interior, 0 in the halo. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_halo_fill(int nx, int ny, int64_t m, const double *__restrict__ x, double *__restrict__ xh) {
  const int64_t hx = (int64_t)nx + 2, hy = (int64_t)ny + 2;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t h = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; h < m; h += stride) {
    const int64_t ih = h % hx, rest = h / hx, jh = rest % hy, k = rest / hy;
    const bool inner = ih >= 1 && ih <= nx && jh >= 1 && jh <= ny;
    xh[h] = inner ? x[(ih - 1) + (int64_t)nx * ((jh - 1) + (int64_t)ny * k)] : 0.0;
  }
}

/** Halo-exchange stencil: y += edge couplings times the halo values (operator.c halo_edge_rows' order). */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_halo_edges(int nx, int ny, int64_t n, const double *__restrict__ cw, const double *__restrict__ ce,
                 const double *__restrict__ cs, const double *__restrict__ cn, const double *__restrict__ xh,
                 double *__restrict__ y) {
  const int64_t hx = (int64_t)nx + 2, hy = (int64_t)ny + 2;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t c = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; c < n; c += stride) {
    const int64_t i = c % nx, line = c / nx, j = line % ny, k = line / ny;
    if (i != 0 && i != nx - 1 && j != 0 && j != ny - 1) continue;
    const double *xl = xh + 1 + hx * ((j + 1) + hy * k); /* xl[i] = x(i,j,k) */
    double v = y[c];
    if (i == 0) v += cw[j + ny * k] * xl[-1];
    if (i == nx - 1) v += ce[j + ny * k] * xl[nx];
    if (j == 0) v += cs[i + nx * k] * xl[i - hx];
    if (j == ny - 1) v += cn[i + nx * k] * xl[i + hx];
    y[c] = v;
  }
}

/** z = x + a y. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_xpay(int64_t n, const double *x, double a, const double *y, double *z) {
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t i = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; i < n; i += stride) z[i] = x[i] + a * y[i];
}

} // namespace

/* ---- launchers (pk_cuda.h) ---------------------------------------------------------------------- */

extern "C" int pk_cuda_halo_fill(void *stream, const pk_cuda_op *op, const double *x) {
  if (!op->halo || !op->xh) return (int)cudaErrorInvalidValue;
  const int64_t m = ((int64_t)op->nx + 2) * ((int64_t)op->ny + 2) * op->nz;
  k_halo_fill<<<(unsigned)blocks_1d(m), PKC_BLOCK, 0, (cudaStream_t)stream>>>(op->nx, op->ny, m, x, op->xh);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_halo_edges(void *stream, const pk_cuda_op *op, double *y) {
  if (!op->halo || !op->xh) return (int)cudaErrorInvalidValue;
  k_halo_edges<<<(unsigned)blocks_1d(op->n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(
      op->nx, op->ny, op->n, op->hcw, op->hce, op->hcs, op->hcn, op->xh, y);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_xpay(void *stream, int64_t n, const double *x, double a, const double *y, double *z) {
  k_xpay<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, x, a, y, z);
  return (int)cudaGetLastError();
}

extern "C" int64_t pk_cuda_partials_needed(const pk_cuda_op *op, const pk_cuda_pc *pc) {
  int64_t m = 1;
  if (op) {
    int64_t a = op_blocks(op);
    const int64_t b = blocks_1d(op->n);
    if (op->dist && op->type != PKRYLOV_OPERATOR_CSR && op->type != PKRYLOV_OPERATOR_USER) {
      pk_cuda_op e = *op; /* distributed: an interior launch (all columns' grid) and an edge launch */
      e.cols = 0;
      a = op_blocks(&e);
      e.cols = 2;
      a += op_blocks(&e);
    }
    m = a > m ? a : m;
    m = b > m ? b : m;
  }
  if (pc) {
    const int64_t a = blocks_1d(pc->n), b = blocks_1d(pc->ncols);
    const int64_t c = pc->type == PKRYLOV_PRECOND_COLUMN ? sm_blocks(pc->ncols) : 1;
    const int64_t d = pc->type == PKRYLOV_PRECOND_AINV ? op_blocks(&pc->op) : 1;
    m = a > m ? a : m;
    m = b > m ? b : m;
    m = c > m ? c : m;
    m = d > m ? d : m;
  }
  return m;
}

extern "C" int pk_cuda_op_apply(void *stream, const pk_cuda_op *op, const double *x, double *y) {
  ActApply act;
  act.y = y;
  return launch_op((cudaStream_t)stream, op, x, act, nullptr, nullptr);
}

extern "C" int pk_cuda_pc_apply(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, const double *r,
                                double *z) {
  if (!pc) return (int)cudaErrorInvalidValue; /* no size without a view: pass a NONE view */
  return launch_pc<0, FOLD_NONE>((cudaStream_t)stream, pc, step_in(st), 1, pc->n, (double *)r, nullptr, z,
                                 nullptr, nullptr);
}

extern "C" int pk_cuda_pc_apply_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold,
                                     const double *r, double *z) {
  if (!pc || !fold) return (int)cudaErrorInvalidValue;
  if (fold->repl)
    return launch_pc<0, FOLD_PIPE_RR>((cudaStream_t)stream, pc, step_in(fold), 1, pc->n, (double *)r, nullptr,
                                      z, nullptr, nullptr, fold->pdl != 0);
  return launch_pc<0, FOLD_PIPE>((cudaStream_t)stream, pc, step_in(fold), 1, pc->n, (double *)r, nullptr, z,
                                 nullptr, nullptr, fold->pdl != 0);
}

/**
 * Test hook: the factors that the on-the-fly column sweeps compute for pc (pc->onthefly set, thin shell
 * or column stencil), written per cell in the k-slow layout: lmul (0 on the top level) and dinv = 1 / d.
 * They must equal the stored factors of precond.c bit for bit. Returns cudaErrorInvalidValue when pc has
 * no on-the-fly source.
 */
extern "C" int pk_cuda_pc_onthefly_factors(void *stream, const pk_cuda_pc *pc, double *lmul, double *dinv) {
  if (!pc || pc->type != PKRYLOV_PRECOND_COLUMN || !pc->symmetric || pc->layout != PKRYLOV_LAYOUT_KSLOW ||
      !pc->onthefly ||
      (pc->op.type != PKRYLOV_OPERATOR_THINSHELL && pc->op.type != PKRYLOV_OPERATOR_STENCIL7))
    return (int)cudaErrorInvalidValue;
  const int fact = pc->op.type == PKRYLOV_OPERATOR_THINSHELL ? FACT_THINSHELL : FACT_STENCIL;
  const ColArgs a = sm_args(pc, fact);
  const unsigned g = (unsigned)blocks_1d(pc->ncols);
  if (fact == FACT_THINSHELL)
    k_otf_factors<FACT_THINSHELL><<<g, PKC_BLOCK, 0, (cudaStream_t)stream>>>(a, lmul, dinv);
  else
    k_otf_factors<FACT_STENCIL><<<g, PKC_BLOCK, 0, (cudaStream_t)stream>>>(a, lmul, dinv);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_residual(void *stream, const pk_cuda_op *op, const double *b, const double *x,
                                double *r, double *part, int64_t *nblocks) {
  ActResidual act;
  act.b = b;
  act.r = r;
  act.wet = op->wet;
  return launch_op((cudaStream_t)stream, op, x, act, part, nblocks);
}

extern "C" int pk_cuda_dots(void *stream, int64_t n, int nv, const double *const *x, const double *const *y,
                            double *part, int64_t *nblocks) {
  if (nv < 1 || nv > 4) return (int)cudaErrorInvalidValue;
  DotArgs a = {};
  for (int j = 0; j < nv; j++) a.x[j] = x[j], a.y[j] = y[j];
  const int64_t nb = blocks_1d(n);
  if (nblocks) *nblocks = nb;
  cudaStream_t s = (cudaStream_t)stream;
  const unsigned g = (unsigned)nb;
  switch (nv) {
  case 1: k_dots<1><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  case 2: k_dots<2><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  case 3: k_dots<3><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  default: k_dots<4><<<g, PKC_BLOCK, 0, s>>>(n, a, part); break;
  }
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_sum_partials(void *stream, const double *part, int64_t nblocks, int nvals,
                                    double *out) {
  k_sum_partials<<<1, PKC_BLOCK, 0, (cudaStream_t)stream>>>(part, nblocks, nvals, out);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_axpy_dev(void *stream, int64_t n, const double *a, const double *x, double *y) {
  k_axpy<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, a, x, y);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_zero_dry(void *stream, int64_t n, const uint8_t *wet, double *x) {
  if (!wet) return (int)cudaGetLastError();
  k_zero_dry<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, wet, x);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_copy_improved(void *stream, const pk_cuda_state *st, int64_t n, const double *src,
                                     double *dst) {
  k_copy_improved<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(st, n, src, dst);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_precond_step(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st,
                                       int alpha_zero, int64_t n, double *r, const double *q, double *z,
                                       double *part, int64_t *nblocks) {
  return launch_pc<1, FOLD_NONE>((cudaStream_t)stream, pc, step_in(st), alpha_zero, n, r, q, z, part,
                                 nblocks);
}

extern "C" int pk_cuda_cg_rupdate(void *stream, const pk_cuda_state *st, int alpha_zero, int64_t n, double *r,
                                  const double *q) {
  k_rupdate<FOLD_NONE><<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(n, step_in(st), alpha_zero,
                                                                                     r, q);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_precond_after(void *stream, const pk_cuda_pc *pc, const pk_cuda_state *st, double *r,
                                        double *z, double *part, int64_t *nblocks) {
  if (!pc || pc->type != PKRYLOV_PRECOND_AINV) return (int)cudaErrorInvalidValue;
  ActPcCg act{st, z};
  return launch_op((cudaStream_t)stream, &pc->op, r, act, part, nblocks, false);
}

extern "C" int pk_cuda_cg_precond_step_fold(void *stream, const pk_cuda_pc *pc, const pk_cuda_fold *fold,
                                            int64_t n, double *r, const double *q, double *z, double *part,
                                            int64_t *nblocks) {
  if (!fold) return (int)cudaErrorInvalidValue;
  return launch_pc<1, FOLD_CG_SIGMA>((cudaStream_t)stream, pc, step_in(fold), 0, n, r, q, z, part, nblocks,
                                     fold->pdl != 0);
}

/** The CG operator loop with the scalar step FOLD first. */
template <int FOLD>
int cg_operator_step(cudaStream_t s, const pk_cuda_op *op, const StepIn &sin, int init, double *x, double *p,
                     const double *z, double *q, double *part, int64_t *nblocks, bool pdl) {
  ActCgOp<FOLD> act;
  act.sin = sin;
  act.init = init;
  act.x = x, act.p = p, act.q = q;
  act.alpha = act.beta = 0.0;
  return launch_op(s, op, z, act, part, nblocks, pdl);
}

extern "C" int pk_cuda_cg_operator_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st, int init,
                                        double *x, double *p, const double *z, double *q, double *part,
                                        int64_t *nblocks) {
  return cg_operator_step<FOLD_NONE>((cudaStream_t)stream, op, step_in(st), init, x, p, z, q, part, nblocks,
                                     false);
}

extern "C" int pk_cuda_cg_operator_step_fold(void *stream, const pk_cuda_op *op, const pk_cuda_fold *fold,
                                             double *x, double *p, const double *z, double *q, double *part,
                                             int64_t *nblocks) {
  if (!fold) return (int)cudaErrorInvalidValue;
  return cg_operator_step<FOLD_CG_RHO>((cudaStream_t)stream, op, step_in(fold), 0, x, p, z, q, part, nblocks,
                                       fold->pdl != 0);
}

namespace {
template <bool NORMS>
int pipecg_step(cudaStream_t stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *m, double *z,
                double *q, double *s, double *p, double *x, double *r, double *u, double *w, double *part,
                int64_t *nblocks, bool pdl) {
  ActPipe<NORMS> act;
  act.st = st;
  act.z = z, act.q = q, act.s = s, act.p = p, act.x = x, act.r = r, act.u = u, act.w = w;
  act.alpha = act.beta = 0.0;
  return launch_op(stream, op, m, act, part, nblocks, pdl);
}

template <bool NORMS>
int pipecg_none_step(cudaStream_t stream, const pk_cuda_op *op, const pk_cuda_state *st, const double *w_old,
                     double *z, double *s, double *p, double *x, double *r, double *w_new, double *part,
                     int64_t *nblocks) {
  ActPipeNone<NORMS> act;
  act.st = st;
  act.z = z, act.s = s, act.p = p, act.x = x, act.r = r, act.wn = w_new;
  act.alpha = act.beta = 0.0;
  return launch_op(stream, op, w_old, act, part, nblocks);
}
} // namespace

extern "C" int pk_cuda_pipecg_step_pdl(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                       const double *m, double *z, double *q, double *s, double *p, double *x,
                                       double *r, double *u, double *w, double *part, int64_t *nblocks,
                                       int norms, int pdl) {
  if (!st) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_step<true>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks,
                                   pdl != 0)
               : pipecg_step<false>((cudaStream_t)stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks,
                                    pdl != 0);
}

extern "C" int pk_cuda_pipecg_none_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                        const double *w_old, double *z, double *s, double *p, double *x,
                                        double *r, double *w_new, double *part, int64_t *nblocks, int norms) {
  if (!st || w_old == w_new) return (int)cudaErrorInvalidValue;
  return norms ? pipecg_none_step<true>((cudaStream_t)stream, op, st, w_old, z, s, p, x, r, w_new, part, nblocks)
               : pipecg_none_step<false>((cudaStream_t)stream, op, st, w_old, z, s, p, x, r, w_new, part,
                                         nblocks);
}

extern "C" int pk_cuda_pipecg_step(void *stream, const pk_cuda_op *op, const pk_cuda_state *st,
                                   const double *m, double *z, double *q, double *s, double *p, double *x,
                                   double *r, double *u, double *w, double *part, int64_t *nblocks, int norms) {
  return pk_cuda_pipecg_step_pdl(stream, op, st, m, z, q, s, p, x, r, u, w, part, nblocks, norms, 0);
}

extern "C" int64_t pk_cuda_op_partials(const pk_cuda_op *op) { return op_blocks(op); }

/** One-block scalar step FOLD: in -> out. */
template <int FOLD>
int scalar_launch(void *stream, const pk_cuda_state *in, pk_cuda_state *out, const double *part, int64_t nb,
                  double *hist, int init) {
  StepIn sin = {};
  sin.st = in;
  sin.out = out;
  sin.part = part;
  sin.nb = nb;
  sin.hist = hist;
  k_scalar<FOLD><<<1, PKC_SUM_LANES, 0, (cudaStream_t)stream>>>(sin, init);
  return (int)cudaGetLastError();
}

extern "C" int pk_cuda_cg_scalar_rho(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                     const double *part, int64_t nblocks, double *hist, int init) {
  return scalar_launch<FOLD_CG_RHO>(stream, in, out, part, nblocks, hist, init);
}

extern "C" int pk_cuda_cg_scalar_sigma(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                       const double *part, int64_t nblocks) {
  return scalar_launch<FOLD_CG_SIGMA>(stream, in, out, part, nblocks, nullptr, 0);
}

extern "C" int pk_cuda_pipecg_scalar(void *stream, const pk_cuda_state *in, pk_cuda_state *out,
                                     const double *part, int64_t nblocks, double *hist, int repl) {
  if (repl) return scalar_launch<FOLD_PIPE_RR>(stream, in, out, part, nblocks, hist, 0);
  return scalar_launch<FOLD_PIPE>(stream, in, out, part, nblocks, hist, 0);
}

/* ---- tiled grids: the model's halo'd arrays <-> the compact order ----------------------------------- */

/** dir 0: dst[compact] = src[halo'd]; 1: dst[halo'd] = src[compact]. One thread per cell, grid-stride. */
__global__ void __launch_bounds__(PKC_BLOCK)
    k_grid_copy(int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt, int64_t nz,
                const double *__restrict__ src, double *__restrict__ dst, int dir) {
  const int64_t n = snx * sny * nt * nz, hx = snx + 2 * olx, hy = sny + 2 * oly;
  const int64_t stride = (int64_t)gridDim.x * PKC_BLOCK;
  for (int64_t q = (int64_t)blockIdx.x * PKC_BLOCK + threadIdx.x; q < n; q += stride) {
    const int64_t i = q % snx, l = q / snx, j = l % sny, t = (l / sny) % nt, k = l / (sny * nt);
    const int64_t h = (i + olx) + hx * ((j + oly) + hy * (k + nz * t));
    if (dir == 0)
      dst[q] = src[h];
    else
      dst[h] = src[q];
  }
}

extern "C" int pk_cuda_grid_copy(void *stream, int64_t snx, int64_t sny, int64_t olx, int64_t oly, int64_t nt,
                                 int64_t nz, const double *src, double *dst, int dir) {
  const int64_t n = snx * sny * nt * nz;
  k_grid_copy<<<(unsigned)blocks_1d(n), PKC_BLOCK, 0, (cudaStream_t)stream>>>(snx, sny, olx, oly, nt, nz, src, dst,
                                                                             dir);
  return (int)cudaGetLastError();
}
