/**
 * @file pk_cuda_grid.cuh
 * @brief The grid operator kernels: column stencil, thin shell and grid stencil (tiled grids), with the
 *        halo of a distributed operator; templates over the per-cell action (pk_cuda_dev.cuh), launched
 *        by launch_op (pk_cuda_op.cuh). See pk_cuda_dev.cuh for the overview.
 */
#ifndef PK_CUDA_GRID_CUH
#define PK_CUDA_GRID_CUH

#include "pk_cuda_dev.cuh"

namespace {

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
 * The value of the kernel's input vector at cell i as the action sees it: act.xin(x, i) when the action has
 * one (CG's approximate-inverse loop with r -= alpha q fused in: r - alpha q read at every neighbour), else
 * x[i]. Only the grid stencil's kernel (gstencil_col) reads through it, and only on one rank (no halo slots).
 */
template <class Act>
__device__ __forceinline__ auto act_x(const Act &a, const double *x, int64_t i, int) -> decltype(a.xin(x, i)) {
  return a.xin(x, i);
}
template <class Act> __device__ __forceinline__ double act_x(const Act &, const double *x, int64_t i, long) {
  return x[i];
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
 * Column stencil of one rank (no halo), a thread per cell: the launch keeps grid_shape's blocks (so the
 * partial-sum slots and the folding are those of stencil_body), the blocks walk the cells in index order
 * (block b, thread t: cells b * PKC_BLOCK + t, then a grid's width further). Per cell stencil_body's
 * expression with the same operands (bitwise its y). Neighbours come from L1/L2 instead of registers; the
 * thread holds one cell at a time, so far fewer registers (more warps resident) than a column walk.
 */
template <typename T, class Act>
__device__ __forceinline__ void stencil_cells_body(const T *__restrict__ aW, const T *__restrict__ aS,
                                                   const T *__restrict__ aV, const T *__restrict__ aC, int nx,
                                                   int ny, int nz, const double *__restrict__ x, Act act,
                                                   double *part) {
  if (!act.begin()) return;
  Acc<Act> acc = {};
  const int64_t ncols = (int64_t)nx * ny, n = ncols * nz;
  const int64_t stride = (int64_t)gridDim.x * gridDim.y * PKC_BLOCK;
  const bool small = n <= (int64_t)UINT32_MAX;
  for (int64_t c = block_slot() * PKC_BLOCK + threadIdx.x; c < n; c += stride) {
    int64_t i, j, k;
    if (small) { /* 32-bit divisions */
      const uint32_t c32 = (uint32_t)c, r32 = c32 / (uint32_t)nx, k32 = r32 / (uint32_t)ny;
      i = c32 - r32 * (uint32_t)nx, j = r32 - k32 * (uint32_t)ny, k = k32;
    } else {
      const int64_t r = c / nx;
      i = c - r * nx, k = r / ny, j = r - k * ny;
    }
    const bool in_w = i > 0, in_e = i < nx - 1, in_s = j > 0, in_n = j < ny - 1;
    const double xc = x[c];
    const double xd = k > 0 ? x[c - ncols] : xc;
    const double cd = (double)aV[c];
    const bool has_u = k < nz - 1;
    const double xu = has_u ? x[c + ncols] : xc;
    const double cu = has_u ? (double)aV[c + ncols] : 0.0;
    const double cs = (double)aS[c], xs = in_s ? x[c - nx] : xc;
    const double cn = in_n ? (double)aS[c + nx] : 0.0;
    const double xn = in_n ? x[c + nx] : xc;
    const double ac = (double)aC[c];
    double y;
    if (!in_w) {
      double s = ac * xc + cs * xs + cn * xn + cd * xd + cu * xu;
      if (in_e) s += (double)aW[c + 1] * x[c + 1];
      y = s;
    } else if (in_e) {
      y = ac * xc + (double)aW[c] * x[c - 1] + (double)aW[c + 1] * x[c + 1] + cs * xs + cn * xn + cd * xd +
          cu * xu;
    } else {
      y = ac * xc + (double)aW[c] * x[c - 1] + cs * xs + cn * xn + cd * xd + cu * xu;
    }
    act(c, y, xc, act.load(c), acc.v);
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
template <typename T, class Act, bool TWOD>
__device__ __forceinline__ void gstencil_col(const T *__restrict__ aW, const T *__restrict__ aS,
                                             const T *__restrict__ aV, const T *__restrict__ aC, int nx, int nz_,
                                             int64_t ncols, int k0_, int k1_, const double *__restrict__ x,
                                             Act &act, Acc<Act> &acc, const GHalo &g, int64_t col) {
  /* TWOD: one level (nz = 1), known to the compiler: no level loop, no vertical loads */
  const int nz = TWOD ? 1 : nz_, k0 = TWOD ? 0 : k0_, k1 = TWOD ? 1 : k1_;
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
  double xc = act_x(act, x, c, 0);
  double xd = k0 > 0 ? act_x(act, x, c - ncols, 0) : xc;
  double cd = nz > 1 ? (double)aV[c] : 0.0; /* 2-D: aV holds zeros; the same product without the load */
  for (int k = k0; k < k1; k++, c += ncols) {
    const bool has_u = k < nz - 1;
    const double xu = has_u ? act_x(act, x, c + ncols, 0) : xc;
    const double cu = has_u ? (double)aV[c + ncols] : 0.0;
    /* the value across edge cell e whose neighbour reference is r (own value at a wall) */
#define PKC_ACROSS(r) ((r) >= 0 ? act_x(act, x, (r) + ncols * k, 0) : (r) == -1 ? xc : g.halo[(-2 - (r)) + g.nhalo * k])
    const double cs = es < 0 ? (double)aS[c] : g.coef<T>(es, k), xs = es < 0 ? act_x(act, x, c - nx, 0) : PKC_ACROSS(ns);
    const double cn = en < 0 ? (double)aS[c + nx] : g.coef<T>(en, k), xn = en < 0 ? act_x(act, x, c + nx, 0) : PKC_ACROSS(nn);
    const double ac = (double)aC[c];
    double y;
    if (!has_w) {
      double s = ac * xc + cs * xs + cn * xn + cd * xd + cu * xu;
      if (has_e) s += ee < 0 ? (double)aW[c + 1] * act_x(act, x, c + 1, 0) : g.coef<T>(ee, k) * PKC_ACROSS(ne);
      y = s;
    } else {
      const double cw = ew < 0 ? (double)aW[c] : g.coef<T>(ew, k), xw = ew < 0 ? act_x(act, x, c - 1, 0) : PKC_ACROSS(nw);
      if (has_e) {
        const double ce = ee < 0 ? (double)aW[c + 1] : g.coef<T>(ee, k), xe = ee < 0 ? act_x(act, x, c + 1, 0) : PKC_ACROSS(ne);
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
template <typename T, class Act, bool GS, bool TWOD>
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
      gstencil_col<T, Act, TWOD>(aW, aS, aV, aC, nx, nz, ncols, k0, k1, x, act, acc, g, col);
    }
  } else {
    const int64_t col = g.cols == 2 ? (t0 < g.nrc ? g.rcols[t0] : ncols) : t0;
    if (col < ncols && !(g.cols == 1 && g.rmask[col]))
      gstencil_col<T, Act, TWOD>(aW, aS, aV, aC, nx, nz, ncols, k0, k1, x, act, acc, g, col);
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
template <typename T, class Act, bool GS, bool TWOD = false>
__global__ void __launch_bounds__(PKC_BLOCK) k_gstencil(PKC_GSTENCIL_PARAMS) {
  gstencil_body<T, Act, GS, TWOD>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, g);
}
/* the capped 2-D launches (GS, TWOD) keep the PKC_GRID2D_PER_SM blocks per multiprocessor that their cap
   (pk_cuda_grid2d_cap: one wave) counts on (CG's operator loop: 58 registers without the bound, 56 with it) */
template <typename T, class Act, bool GS, bool TWOD = false>
__global__ void __launch_bounds__(PKC_BLOCK, (GS && TWOD) ? PKC_GRID2D_PER_SM : Act::MINB)
    k_gstencil_minb(PKC_GSTENCIL_PARAMS) {
  gstencil_body<T, Act, GS, TWOD>(aW, aS, aV, aC, nx, ny, nz, kc, x, act, part, g);
}
template <typename T, class Act>
__global__ void __launch_bounds__(PKC_BLOCK)
    k_stencil_cells(const T *__restrict__ aW, const T *__restrict__ aS, const T *__restrict__ aV,
                    const T *__restrict__ aC, int nx, int ny, int nz, const double *__restrict__ x, Act act,
                    double *part) {
  stencil_cells_body<T, Act>(aW, aS, aV, aC, nx, ny, nz, x, act, part);
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

} // namespace

#endif /* PK_CUDA_GRID_CUH */
