/**
 * @file pk_cuda_dev.cuh
 * @brief Private header of the CUDA kernels (pk_cuda.h): launch shapes, the deterministic block
 *        reduction, programmatic dependent launches and the per-cell actions of the operator kernels;
 *        the overview of the data-parallel launchers of pk_cuda_op.cu, pk_cuda_precond.cu, pk_cuda_steps.cu
 *        and pk_cuda_vec.cu (operators, preconditioners, the fused CG / pipelined-CG steps and the
 *        deterministic reductions).
 *
 * Files: pk_cuda_dev.cuh (this), pk_cuda_scalar.cuh (the scalar steps on the device), pk_cuda_csr.cuh
 * (CSR, DIA and USER operator kernels), pk_cuda_grid.cuh (column stencil, thin shell, grid stencil),
 * pk_cuda_op.cuh (launch_op: an action over an operator's cells). The operator kernels are templates over
 * the action, instantiated in the file of the action's family: pk_cuda_op.cu (product, residual),
 * pk_cuda_precond.cu (approximate inverse), pk_cuda_steps.cu (CG / pipelined-CG steps). Everything here
 * is in an unnamed namespace: each translation unit has its own copy (no relocatable device code).
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
 * Scalar steps (the scalar recurrences of cg.c / kry_scalar_pcg.h, pk_cuda.h): one-block kernels (k_scalar), or folded
 * into the step kernel that follows (template argument FOLD): every warp adds the producer's slots itself
 * in the fixed order, so no block waits for another and all get the same scalars. Measured on an H200,
 * thin shell 32^3, column preconditioner, us per iteration: CG one-block 11.1, folded 8.6, folded with
 * programmatic dependent launches 6.5 (7.4 on another machine); pipelined CG 9.9, 8.8, 7.0 (7.7).
 */
#ifndef PK_CUDA_DEV_CUH
#define PK_CUDA_DEV_CUH

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

#include "pk_cuda.h"
#include "pkrylov.h"

namespace {

/** Threads per block of every kernel here (the reductions assume it). */
constexpr int PKC_BLOCK = 256;
/** Cap on the blocks of the grid-stride kernels (1-D, columns): bounds the partial-sum slots. */
constexpr int64_t PKC_MAX_BLOCKS = 4096;
/* blocks of a 2-D grid-stencil launch at most (pk_cuda_grid2d_cap; grid_shape), each thread a few columns */
constexpr int64_t PKC_GRID2D_BLOCKS = 1024;
/* CG's 2-D loops (the operator's 56 registers under its launch bound, k_gstencil_minb; the approximate
   inverse's 64 by the compiler's choice) keep 4 blocks of PKC_BLOCK threads per multiprocessor resident:
   pk_cuda_grid2d_cap launches one wave of them up to
   PKC_GRID2D_WAVE_CELLS cells and PKC_GRID2D_WAVES_ABOVE waves above. H100, barotropic CG with the
   approximate inverse, us per iteration, blocks 528 (one wave) / 1024 (before) / 1056 / 2112 (four waves):
   1024^2 51.6 / 53.7 / 54.0 / 56.5, 2048^2 230.2 / 233.1 / 234.8 / 232.6, 4096 x 2048 460.8 / 454.4 / 457.5 /
   448.9; 512^2 (folded: every block adds the slots) 31.5 -> 21.8 with one wave. Asking the compiler for 5 or
   6 blocks per SM (48 or 40 registers, spills at 6) was slower (55.2, 72.4 at 1024^2 with 1024
   blocks; 51.6, 71.7 with one wave); 4 for the operator loop alone is faster (52.0 -> 50.3), for the
   approximate inverse's loop too, slower. */
constexpr int PKC_GRID2D_PER_SM = 4;
constexpr int64_t PKC_GRID2D_WAVE_CELLS = (int64_t)1 << 22;
constexpr int PKC_GRID2D_WAVES_ABOVE = 4;
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
  /* a 2-D grid stencil (one level) in CG's loops (op->gcap): at most gcap blocks, each thread a
     few columns (the block sums then stay few enough for the folded scalar steps). H100, barotropic with the
     approximate inverse, us per iteration: CG 99.1 -> 88.2 at 1024^2, 735 -> 605 at 4096 x 2048; pipelined
     CG 91.7 -> 94.4 at 1024^2 (it keeps a thread per column) */
  if (op->gsny > 0 && nz == 1 && op->gcap > 0 && g.bx > op->gcap) g.bx = op->gcap;
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

/** Columns (threads) per block of the on-chip column sweeps (pk_cuda_precond.cu). */
constexpr int PKC_SM_COLS = 32;

/** Blocks of the on-chip sweeps over ncols columns (grid-stride beyond PKC_MAX_BLOCKS). */
int64_t sm_blocks(int64_t ncols) {
  int64_t b = (ncols + PKC_SM_COLS - 1) / PKC_SM_COLS;
  if (b > PKC_MAX_BLOCKS) b = PKC_MAX_BLOCKS;
  return b < 1 ? 1 : b;
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

/* ---- per-cell actions of the operator kernels ----------------------------------------------------
 * An action gets (cell, (A x)[cell], x[cell], in, acc) for each cell, where in = load(cell) holds the
 * action's own per-cell inputs (loaded ahead by the thin-shell kernel: one level early, so their latency
 * overlaps the level before); NV partial sums per block (0: none). begin() is called by every thread
 * first; false = the solve has stopped: the kernel returns at once. MINB: minimum resident blocks per SM
 * asked of the compiler for the grid kernels (__launch_bounds__; 0 = none, the compiler's choice). */

/** Accumulator array of an action (at least one element). */
template <class Act> struct Acc { double v[Act::NV > 0 ? Act::NV : 1]; };

/** Act::XR, or false when the action has none. */
template <class Act, class = void> struct act_xr { static constexpr bool value = false; };
template <class Act> struct act_xr<Act, decltype(void(Act::XR))> { static constexpr bool value = Act::XR; };

/** Act::COLUMNS, or false: an action that keeps the column stencil's walk along the levels (k_stencil) where
 *  the others take a thread per cell (k_stencil_cells, pk_cuda_op.cuh). */
template <class Act, class = void> struct act_columns { static constexpr bool value = false; };
template <class Act> struct act_columns<Act, decltype(void(Act::COLUMNS))> {
  static constexpr bool value = Act::COLUMNS;
};

/** The block's sums: block_store of the NV partials, or for an action with XR set (the one-pass exact sums
 *  of reproducible mode, pk_cuda_kry_fused.cu) its own Act::xfinish(acc, part). */
template <class Act> __device__ __forceinline__ void finish(const Acc<Act> &a, double *part) {
  if constexpr (act_xr<Act>::value) {
    Act::xfinish(a.v, part);
  } else if constexpr (Act::NV > 0) {
    double t[Act::NV];
#pragma unroll
    for (int j = 0; j < Act::NV; j++) t[j] = a.v[j];
    block_store<Act::NV>(t, part, block_slot());
  }
}

} // namespace

#endif /* PK_CUDA_DEV_CUH */
