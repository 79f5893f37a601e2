/**
 * @file grid_op.c
 * @brief Operators and preconditioners on tiled grids (grid.c): the column stencil / 5-point operator from the
 *        model's halo'd multi-tile arrays, its in-place coefficient update, the approximate-inverse (AINV)
 *        preconditioner of the models' 2-D free-surface solve (on grids and on 2-D column stencils), and the
 *        solve on the model's halo'd right-hand side and solution.
 *
 * A grid stencil is an ordinary STENCIL7 operator in the compact order (pk_impl.h: the local tiles stacked
 * along j), whose st arrays hold the couplings inside each tile and st.edge those across the tile edges;
 * the Jacobi and column preconditioners therefore work on it unchanged (the diagonal and the vertical
 * couplings never cross a tile). Its product goes through pk_grid_stencil_apply (whole vectors, with the
 * exchange).
 *
 * The face rule. A coupling lives on a face; the model stores it on the cell whose west (aW) or south (aS)
 * face it is. Inside a tile that is the cell (i, j) itself; across a tile edge the face is the west or
 * south face of the neighbour when the neighbour's edge is a west or south one, so the coupling is taken
 * from the tile that owns it (its value reaches the other side through pk_grid_edge_swap). Where two east
 * or two north edges meet, each side reads its own halo value (aW at i = sNx, aS at j = sNy); where two west
 * or two south edges meet, each its own edge value; the two must agree.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_impl.h"
/* ------------------------------------------------------------------------------------------------ */
/* Helpers                                                                                           */

/** Index of cell (i, j, k) of local tile t (i in -olx .. snx+olx-1) in a halo'd array of nz levels. */
static inline int64_t hidx(const struct pkrylov_grid_s *g, int64_t nz, int64_t i, int64_t j, int64_t k,
                           int64_t t) {
  const int64_t hx = g->snx + 2 * (int64_t)g->olx, hy = g->sny + 2 * (int64_t)g->oly;
  return (i + g->olx) + hx * ((j + g->oly) + hy * (k + nz * t));
}

/** Tile, edge and position of edge cell ec. */
static inline void ecell_decode(const struct pkrylov_grid_s *g, int64_t ec, int64_t *t, int *e, int64_t *m) {
  const int64_t snx = g->snx, sny = g->sny, l4 = 2 * (snx + sny), r = ec % l4;
  *t = ec / l4;
  if (r < sny) *e = PK_EDGE_W, *m = r;
  else if (r < 2 * sny) *e = PK_EDGE_E, *m = r - sny;
  else if (r < 2 * sny + snx) *e = PK_EDGE_S, *m = r - 2 * sny;
  else *e = PK_EDGE_N, *m = r - 2 * sny - snx;
}

/** (i, j) of position m of edge e. */
static inline void edge_ij(const struct pkrylov_grid_s *g, int e, int64_t m, int64_t *i, int64_t *j) {
  *i = e == PK_EDGE_W ? 0 : e == PK_EDGE_E ? g->snx - 1 : m;
  *j = e == PK_EDGE_S ? 0 : e == PK_EDGE_N ? g->sny - 1 : m;
}

static const char *edge_name(int e) {
  static const char *names[4] = {"west", "east", "south", "north"};
  return names[e & 3];
}

/** The neighbour's edge across edge cell ec (its tile has edge e of local tile t): conn. */
static inline int nb_edge(const struct pkrylov_grid_s *g, int64_t t, int e) {
  return g->conn[3 * (4 * (int64_t)g->tiles[t] + e) + 1];
}
static inline int32_t nb_tile(const struct pkrylov_grid_s *g, int64_t t, int e) {
  return g->conn[3 * (4 * (int64_t)g->tiles[t] + e)];
}

/**
 * The couplings across the tile edges (edge cell ec at level k: edge[ec + nedge*k]) from the model's face
 * arrays fW, fS (halo'd, nz levels) by the face rule, 0 at walls and where either cell is dry (wet: compact,
 * NULL = all wet). nW, nS name the arrays in messages. Collective (the values of faces other ranks own
 * travel). Errors: a non-finite coupling (PKRYLOV_ERR_NOT_FINITE), two tiles that disagree on a face both
 * store (PKRYLOV_ERR_TOPOLOGY); the same on every rank.
 */
static int grid_edge_couplings(const struct pkrylov_grid_s *g, int64_t nz, const double *fW, const double *fS,
                               const uint8_t *wet, const char *nW, const char *nS, const char *func, double *edge) {
  pkrylov_context ctx = g->ctx;
  const int64_t nedge = g->nedge, ncol = g->ncol;
  double *mine = malloc(sizeof(double) * (size_t)(4 * nedge * nz + 1));
  int e = mine ? PKRYLOV_SUCCESS
               : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the edge couplings");
  e = pk_mpi_agree(ctx, e);
  if (e) return e;
  double *mwet = mine + nedge * nz, *theirs = mwet + nedge * nz, *twet = theirs + nedge * nz;
  for (int64_t k = 0; k < nz; k++)
    for (int64_t ec = 0; ec < nedge; ec++) {
      int64_t t, m;
      int ed;
      ecell_decode(g, ec, &t, &ed, &m);
      const double v = ed == PK_EDGE_W   ? fW[hidx(g, nz, 0, m, k, t)]
                       : ed == PK_EDGE_E ? fW[hidx(g, nz, g->snx, m, k, t)]
                       : ed == PK_EDGE_S ? fS[hidx(g, nz, m, 0, k, t)]
                                         : fS[hidx(g, nz, m, g->sny, k, t)];
      mine[ec + nedge * k] = v;
      mwet[ec + nedge * k] = !wet || wet[g->ecol[ec] + ncol * k] ? 1.0 : 0.0;
    }
  e = pk_grid_edge_swap(g, (int32_t)nz, mine, theirs);
  if (!e) e = pk_grid_edge_swap(g, (int32_t)nz, mwet, twet);
  for (int64_t k = 0; k < nz && !e; k++)
    for (int64_t ec = 0; ec < nedge && !e; ec++) {
      const int64_t q = ec + nedge * k;
      edge[q] = 0.0;
      if (g->nbr[ec] == -1 || mwet[q] == 0.0 || twet[q] == 0.0) continue;
      int64_t t, m, i, j;
      int ed;
      ecell_decode(g, ec, &t, &ed, &m);
      edge_ij(g, ed, m, &i, &j);
      const int e2 = nb_edge(g, t, ed);
      const int own = ed == PK_EDGE_W || ed == PK_EDGE_S, their = e2 == PK_EDGE_W || e2 == PK_EDGE_S;
      const double v = own == their ? mine[q] : own ? mine[q] : theirs[q];
      const char *name = (own ? (ed == PK_EDGE_W ? nW : nS) : (e2 == PK_EDGE_W || e2 == PK_EDGE_E ? nW : nS));
      if (!isfinite(v))
        e = pk_error(ctx, PKRYLOV_ERR_NOT_FINITE, func,
                     "argument '%s': the coupling across the %s edge of tile %d at cell (i,j,k) = "
                     "(%lld,%lld,%lld) (0-based) is %g, not finite",
                     name, edge_name(ed), g->tiles[t], (long long)i, (long long)j, (long long)k, v);
      else if (own == their && !(mine[q] == theirs[q]))
        e = pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                     "arguments '%s', '%s': the %s edge of tile %d meets the %s edge of tile %d, which both "
                     "store the face between cell (i,j,k) = (%lld,%lld,%lld) of tile %d and its neighbour: "
                     "%.17g here, %.17g there (they must be equal)",
                     nW, nS, edge_name(ed), g->tiles[t], edge_name(e2), nb_tile(g, t, ed), (long long)i,
                     (long long)j, (long long)k, g->tiles[t], mine[q], theirs[q]);
      else
        edge[q] = v;
    }
  free(mine);
  return pk_mpi_agree(ctx, e);
}

/** First non-finite value among the n values of v, reported for cell c of a grid stencil; 0 when none. */
static int grid_check_finite(const struct pkrylov_grid_s *g, const char *func, const char *name, const double *v,
                             int64_t n) {
  const int64_t c = pk_first_nonfinite(v, n);
  if (c < 0) return PKRYLOV_SUCCESS;
  const int64_t snx = g->snx, sny = g->sny, col = c % g->ncol, k = c / g->ncol;
  const int64_t t = col / (snx * sny), j = (col / snx) % sny, i = col % snx;
  return pk_error(g->ctx, PKRYLOV_ERR_NOT_FINITE, func,
                  "argument '%s' = %g at cell (i,j,k) = (%lld,%lld,%lld) (0-based, interior) of tile %d is not "
                  "finite",
                  name, v[c], (long long)i, (long long)j, (long long)k, g->tiles[t]);
}

/**
 * The compact stencil c (allocated here; aV zeros when fV is NULL) from the halo'd arrays: couplings inside
 * the tiles between wet cells, aC of wet cells (fC), the edge couplings by the face rule. wet (compact) is
 * c->wet when set. Collective. On an error c holds whatever was allocated (the caller frees it).
 */
static int grid_stencil_build(const struct pkrylov_grid_s *g, int64_t nz, const double *fW, const double *fS,
                              const double *fV, const double *fC, const uint8_t *wet, const char *func,
                              const char *nW, const char *nS, const char *nV, const char *nC, pk_stencil *c) {
  pkrylov_context ctx = g->ctx;
  const int64_t snx = g->snx, sny = g->sny, nt = g->nt, ncol = g->ncol, n = ncol * nz;
  if (!c->aW) c->aW = malloc(sizeof(double) * (size_t)n);
  if (!c->aS) c->aS = malloc(sizeof(double) * (size_t)n);
  if (!c->aV) c->aV = malloc(sizeof(double) * (size_t)n);
  if (!c->aC) c->aC = malloc(sizeof(double) * (size_t)n);
  if (!c->edge) c->edge = malloc(sizeof(double) * (size_t)(g->nedge * nz + 1));
  int e = (c->aW && c->aS && c->aV && c->aC && c->edge)
              ? PKRYLOV_SUCCESS
              : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the stencil copy (%lld cells)",
                         (long long)n);
  e = pk_mpi_agree(ctx, e);
  if (e) return e;
  for (int64_t k = 0; k < nz; k++)
    for (int64_t t = 0; t < nt; t++)
      for (int64_t j = 0; j < sny; j++)
        for (int64_t i = 0; i < snx; i++) {
          const int64_t q = i + snx * (j + sny * t) + ncol * k, h = hidx(g, nz, i, j, k, t);
          const int wc = !wet || wet[q];
          c->aC[q] = wc ? fC[h] : 0.0;
          c->aW[q] = (i > 0 && wc && (!wet || wet[q - 1])) ? fW[h] : 0.0;
          c->aS[q] = (j > 0 && wc && (!wet || wet[q - snx])) ? fS[h] : 0.0;
          c->aV[q] = (fV && k > 0 && wc && (!wet || wet[q - ncol])) ? fV[h] : 0.0;
        }
  e = grid_check_finite(g, func, nW, c->aW, n);
  if (!e) e = grid_check_finite(g, func, nS, c->aS, n);
  if (!e) e = grid_check_finite(g, func, nV ? nV : "aV", c->aV, n);
  if (!e) e = grid_check_finite(g, func, nC, c->aC, n);
  e = pk_mpi_agree(ctx, e);
  if (e) return e;
  return grid_edge_couplings(g, nz, fW, fS, wet, nW, nS, func, c->edge);
}

/* ------------------------------------------------------------------------------------------------ */
/* The grid stencil operator                                                                         */

/** nnz of the local CSR form (single rank): the diagonal of every wet cell and every coupling between two
 *  wet neighbours (walls excepted), as pkrylov_operator_create_stencil7() counts. */
static int64_t grid_nnz(const struct pkrylov_operator_s *A) {
  const struct pkrylov_grid_s *g = A->grid;
  const int64_t snx = g->snx, sny = g->sny, ncol = g->ncol, nz = A->nz, nedge = g->nedge;
  const uint8_t *wet = A->st.wet;
  int64_t nnz = 0;
  for (int64_t k = 0; k < nz; k++)
    for (int64_t col = 0; col < ncol; col++) {
      const int64_t q = col + ncol * k, i = col % snx, j = (col / snx) % sny, t = col / (snx * sny);
      if (wet && !wet[q]) continue;
      nnz++;
#define PK_WET(cell) (!wet || wet[cell])
      if (k > 0 && PK_WET(q - ncol)) nnz++;
      if (k < nz - 1 && PK_WET(q + ncol)) nnz++;
      if (i > 0 && PK_WET(q - 1)) nnz++;
      if (i < snx - 1 && PK_WET(q + 1)) nnz++;
      if (j > 0 && PK_WET(q - snx)) nnz++;
      if (j < sny - 1 && PK_WET(q + snx)) nnz++;
      const int64_t ecs[4] = {i == 0 ? pk_grid_ecell(g, t, PK_EDGE_W, j) : -1,
                              i == snx - 1 ? pk_grid_ecell(g, t, PK_EDGE_E, j) : -1,
                              j == 0 ? pk_grid_ecell(g, t, PK_EDGE_S, i) : -1,
                              j == sny - 1 ? pk_grid_ecell(g, t, PK_EDGE_N, i) : -1};
      for (int d = 0; d < 4; d++)
        if (ecs[d] >= 0 && g->nbr[ecs[d]] >= 0 && PK_WET(g->nbr[ecs[d]] + ncol * k)) nnz++;
#undef PK_WET
    }
  (void)nedge;
  return nnz;
}

int pkrylov_operator_create_grid_stencil(pkrylov_grid g, int32_t nz, const double *aW, const double *aS,
                                         const double *aV, const double *aC, const int32_t *mask,
                                         pkrylov_operator *A) {
  PK_CHECK(g != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'g' is NULL");
  pkrylov_context ctx = g->ctx;
  const char *func = __func__;
  int e = PKRYLOV_SUCCESS;
  if (!A) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'A' is NULL");
  else if (!aW) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aW' is NULL");
  else if (!aS) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aS' is NULL");
  else if (!aC) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aC' is NULL");
  else if (nz < 1) e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'nz' = %d must be >= 1", nz);
  else if (!aV && nz > 1)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aV' is NULL (allowed only for nz = 1)");
  else if (g->ncol > (INT64_MAX / 64) / nz)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'nz' = %d: too many cells", nz);
  PK_CALL(pk_mpi_agree(ctx, e));
  { /* every rank the same number of levels (a tile's columns couple across ranks) */
    int64_t mn = nz, mx = nz;
    PK_CALL(pk_mpi_allreduce_i64(ctx, &mn, 1, 1));
    PK_CALL(pk_mpi_allreduce_i64(ctx, &mx, 1, 2));
    if (mn != mx)
      return pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                      "argument 'nz' = %d here, between %lld and %lld on the ranks: every rank must give the same",
                      nz, (long long)mn, (long long)mx);
  }
  const int64_t ncol = g->ncol, n = ncol * nz;
  struct pkrylov_operator_s *B = calloc(1, sizeof *B);
  if (B) {
    B->ctx = ctx;
    B->type = PKRYLOV_OPERATOR_STENCIL7;
    B->n = n;
    B->nx = g->snx, B->ny = g->sny * g->nt, B->nz = nz;
    B->grid = g;
    B->user.scratch = malloc(sizeof(double) * (size_t)n);
    if (mask) B->st.wet = malloc((size_t)n);
  }
  e = (B && B->user.scratch && (!mask || B->st.wet))
          ? PKRYLOV_SUCCESS
          : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the operator (%lld cells)", (long long)n);
  if (!e && mask) {
    const int64_t snx = g->snx, sny = g->sny, nt = g->nt;
    for (int64_t k = 0; k < nz; k++)
      for (int64_t t = 0; t < nt; t++)
        for (int64_t j = 0; j < sny; j++)
          for (int64_t i = 0; i < snx; i++)
            B->st.wet[i + snx * (j + sny * t) + ncol * k] = mask[hidx(g, nz, i, j, k, t)] != 0;
  }
  e = pk_mpi_agree(ctx, e);
  if (!e) e = grid_stencil_build(g, nz, aW, aS, aV, aC, B->st.wet, func, "aW", "aS", "aV", "aC", &B->st);
  if (!e) e = pk_grid_xchg_init(g, nz, &B->gx);
  e = pk_mpi_agree(ctx, e);
  if (e) {
    if (B) B->grid = NULL; /* not counted yet */
    pk_op_free(B);
    return e;
  }
  B->wet = B->st.wet;
  B->nnz = ctx->size > 1 ? -1 : grid_nnz(B);
  g->refs++;
  return pk_op_register(ctx, B, A);
}

int pkrylov_operator_update_grid_stencil(pkrylov_operator A, const double *aW, const double *aS, const double *aV,
                                         const double *aC) {
  PK_CHECK(A != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'A' is NULL");
  pkrylov_context ctx = A->ctx;
  const char *func = __func__;
  int e = PKRYLOV_SUCCESS;
  if (!A->grid)
    e = pk_error(ctx, PKRYLOV_ERR_INCOMPATIBLE, func,
                 "argument 'A' is not a grid stencil (pkrylov_operator_create_grid_stencil)");
  else if (!aW) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aW' is NULL");
  else if (!aS) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aS' is NULL");
  else if (!aC) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aC' is NULL");
  else if (!aV && A->nz > 1)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'aV' is NULL (allowed only for nz = 1)");
  PK_CALL(pk_mpi_agree(ctx, e));
  /* build into a new stencil, swap on success: A is unchanged on an error */
  pk_stencil c = {0};
  e = grid_stencil_build(A->grid, A->nz, aW, aS, aV, aC, A->st.wet, func, "aW", "aS", "aV", "aC", &c);
  if (e) {
    pk_stencil_free(&c);
    return e;
  }
  c.wet = A->st.wet;
  A->st.wet = NULL;
  pk_stencil_free(&A->st);
  A->st = c;
  A->wet = A->st.wet;
  A->coef_version++;
  if (A->dev) return A->ctx->be->operator_refresh(A); /* into the device arrays the solvers' graphs hold */
  return PKRYLOV_SUCCESS;
}

void pk_grid_op_apply(const struct pkrylov_operator_s *A, const double *x, double *y) {
  struct pkrylov_operator_s *W = (struct pkrylov_operator_s *)A; /* heap object: the cast is defined */
  if (!A->user.failed && pk_grid_stencil_apply(A->grid, A->nz, &A->st, x, y, &W->gx) == PKRYLOV_SUCCESS) return;
  W->user.failed = 1; /* the message is in the context */
  for (int64_t i = 0; i < A->n; i++) y[i] = NAN;
}

/** Local CSR row of compact cell q of a single-rank grid stencil, entries in increasing column order. */
int pk_grid_op_row(const struct pkrylov_operator_s *A, int64_t q, int64_t *cols, double *vals) {
  const struct pkrylov_grid_s *g = A->grid;
  const int64_t snx = g->snx, sny = g->sny, ncol = g->ncol, nz = A->nz, nedge = g->nedge;
  const int64_t col = q % ncol, k = q / ncol, i = col % snx, j = (col / snx) % sny, t = col / (snx * sny);
  const uint8_t *wet = A->st.wet;
  if (wet && !wet[q]) return 0;
  int64_t nb[7];
  double v[7];
  int cnt = 0;
#define PK_ADD(cond, cell, val)                                                                    \
  if ((cond) && (!wet || wet[cell])) nb[cnt] = (cell), v[cnt++] = (val);
  PK_ADD(1, q, A->st.aC[q]);
  PK_ADD(k > 0, q - ncol, A->st.aV[q]);
  PK_ADD(k < nz - 1, q + ncol, A->st.aV[q + ncol]);
  PK_ADD(i > 0, q - 1, A->st.aW[q]);
  PK_ADD(i < snx - 1, q + 1, A->st.aW[q + 1]);
  PK_ADD(j > 0, q - snx, A->st.aS[q]);
  PK_ADD(j < sny - 1, q + snx, A->st.aS[q + snx]);
  const int64_t ecs[4] = {i == 0 ? pk_grid_ecell(g, t, PK_EDGE_W, j) : -1,
                          i == snx - 1 ? pk_grid_ecell(g, t, PK_EDGE_E, j) : -1,
                          j == 0 ? pk_grid_ecell(g, t, PK_EDGE_S, i) : -1,
                          j == sny - 1 ? pk_grid_ecell(g, t, PK_EDGE_N, i) : -1};
  for (int d = 0; d < 4; d++) {
    if (ecs[d] < 0 || g->nbr[ecs[d]] < 0) continue;
    const int64_t cell = g->nbr[ecs[d]] + ncol * k;
    /* a neighbour reached twice (a tile of one column, a periodic width of one): one entry, summed */
    int dup = -1;
    for (int x = 0; x < cnt; x++)
      if (nb[x] == cell) dup = x;
    if (!wet || wet[cell]) {
      if (dup >= 0)
        v[dup] += A->st.edge[ecs[d] + nedge * k];
      else
        nb[cnt] = cell, v[cnt++] = A->st.edge[ecs[d] + nedge * k];
    }
  }
#undef PK_ADD
  /* sort by column (insertion sort of at most 7) */
  for (int a = 1; a < cnt; a++)
    for (int b = a; b > 0 && nb[b - 1] > nb[b]; b--) {
      int64_t tc = nb[b];
      nb[b] = nb[b - 1], nb[b - 1] = tc;
      double tv = v[b];
      v[b] = v[b - 1], v[b - 1] = tv;
    }
  if (cols)
    for (int x = 0; x < cnt; x++) cols[x] = nb[x];
  if (vals)
    for (int x = 0; x < cnt; x++) vals[x] = v[x];
  return cnt;
}

/* ------------------------------------------------------------------------------------------------ */
/* The approximate-inverse preconditioner                                                            */

void pk_ainv_free(struct pkrylov_precond_s *M) {
  pk_stencil_free(&M->ainv.c);
  pk_grid_xchg_free(&M->ainv.gx);
}

/** MITgcm's off-diagonal term for a face of coupling a between cells of diagonals aw (the west or south
 *  cell) and ac: 0 where aw = 0, else -a / (f (aw + ac))^2. */
static inline double ainv_face(double a, double aw, double ac, double f) {
  if (aw == 0.0) return 0.0;
  const double t = f * (aw + ac);
  return -a / (t * t);
}

/** Build the AINV coefficients of M from its operator (M->ainv.offdiag > 0). Collective on a grid. */
static int ainv_from_operator(struct pkrylov_precond_s *M, const char *func, pk_stencil *c) {
  const struct pkrylov_operator_s *A = M->A;
  pkrylov_context ctx = M->ctx;
  const int64_t n = A->n, nx = A->nx;
  const double f = M->ainv.offdiag;
  c->aW = malloc(sizeof(double) * (size_t)n);
  c->aS = malloc(sizeof(double) * (size_t)n);
  c->aV = calloc((size_t)n, sizeof(double));
  c->aC = malloc(sizeof(double) * (size_t)n);
  const struct pkrylov_grid_s *g = A->grid;
  if (g) c->edge = malloc(sizeof(double) * (size_t)(g->nedge + 1));
  int e = (c->aW && c->aS && c->aV && c->aC && (!g || c->edge))
              ? PKRYLOV_SUCCESS
              : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the preconditioner (%lld cells)",
                         (long long)n);
  e = g ? pk_mpi_agree(ctx, e) : e;
  if (e) return e;
  const double *aC = A->st.aC, *aW = A->st.aW, *aS = A->st.aS;
  /* rows of nx cells; the row below is - nx inside a tile (the couplings across tile edges: below) */
  const int64_t ny = g ? g->sny : A->ny; /* rows of a tile (nz = 1) */
  for (int64_t q = 0; q < n; q++) {
    const int64_t i = q % nx, j = (q / nx) % ny;
    c->aC[q] = aC[q] == 0.0 ? 1.0 : 1.0 / aC[q];
    c->aW[q] = i > 0 ? ainv_face(aW[q], aC[q - 1], aC[q], f) : 0.0;
    c->aS[q] = j > 0 ? ainv_face(aS[q], aC[q - nx], aC[q], f) : 0.0;
  }
  if (g) {
    /* the diagonal across each edge; the face term from the operator's (already resolved) edge coupling */
    const int64_t nedge = g->nedge;
    double *mine = malloc(sizeof(double) * (size_t)(2 * nedge + 1));
    e = mine ? PKRYLOV_SUCCESS : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate");
    e = pk_mpi_agree(ctx, e);
    if (e) return e;
    double *theirs = mine + nedge;
    for (int64_t ec = 0; ec < nedge; ec++) mine[ec] = aC[g->ecol[ec]];
    e = pk_grid_edge_swap(g, 1, mine, theirs);
    if (!e)
      for (int64_t ec = 0; ec < nedge; ec++) {
        int64_t t, m;
        int ed;
        ecell_decode(g, ec, &t, &ed, &m);
        const double a = A->st.edge[ec];
        if (g->nbr[ec] == -1) {
          c->edge[ec] = 0.0;
          continue;
        }
        const int e2 = nb_edge(g, t, ed);
        const int own = ed == PK_EDGE_W || ed == PK_EDGE_S, their = e2 == PK_EDGE_W || e2 == PK_EDGE_S;
        if (own == their) /* a 180-degree join: no west or south cell; 0 when either diagonal is 0 */
          c->edge[ec] = theirs[ec] == 0.0 || mine[ec] == 0.0 ? 0.0 : ainv_face(a, theirs[ec], mine[ec], f);
        else /* the west or south cell of the face is the neighbour (own edge W, S) or this cell */
          c->edge[ec] = own ? ainv_face(a, theirs[ec], mine[ec], f) : ainv_face(a, mine[ec], theirs[ec], f);
      }
    free(mine);
    e = pk_mpi_agree(ctx, e);
    if (e) return e;
  }
  /* a non-finite term (f (aw + ac) = 0 with a nonzero face) */
  const double *arrs[3] = {c->aW, c->aS, c->aC};
  static const char *names[3] = {"pW", "pS", "pC"};
  for (int a = 0; a < 3 && !e; a++) {
    const int64_t q = pk_first_nonfinite(arrs[a], n);
    if (q >= 0)
      e = pk_error(ctx, PKRYLOV_ERR_SINGULAR, func,
                   "argument 'A': the approximate inverse's %s at cell %lld (compact order) is %g: the "
                   "diagonals of the two cells of a face sum to 0",
                   names[a], (long long)q, arrs[a][q]);
  }
  if (!e && g) {
    const int64_t q = pk_first_nonfinite(c->edge, g->nedge);
    if (q >= 0)
      e = pk_error(ctx, PKRYLOV_ERR_SINGULAR, func,
                   "argument 'A': the approximate inverse's coupling across a tile edge (edge cell %lld) is %g: "
                   "the diagonals of the two cells of a face sum to 0",
                   (long long)q, c->edge[q]);
  }
  return g ? pk_mpi_agree(ctx, e) : e;
}

/** The caller's pW, pS, pC in A's layout into c (face rule and dry cells as for the operator). */
static int ainv_from_caller(struct pkrylov_precond_s *M, const char *func, const double *pW, const double *pS,
                            const double *pC, pk_stencil *c) {
  const struct pkrylov_operator_s *A = M->A;
  if (A->grid)
    return grid_stencil_build(A->grid, 1, pW, pS, NULL, pC, A->st.wet, func, "pW", "pS", NULL, "pC", c);
  const int64_t n = A->n, nx = A->nx;
  const uint8_t *wet = A->st.wet;
  c->aW = malloc(sizeof(double) * (size_t)n);
  c->aS = malloc(sizeof(double) * (size_t)n);
  c->aV = calloc((size_t)n, sizeof(double));
  c->aC = malloc(sizeof(double) * (size_t)n);
  PK_CHECK(c->aW && c->aS && c->aV && c->aC, M->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "cannot allocate the preconditioner");
  for (int64_t q = 0; q < n; q++) {
    const int64_t i = q % nx;
    const int wq = !wet || wet[q];
    c->aC[q] = pC[q];
    c->aW[q] = (i > 0 && wq && (!wet || wet[q - 1])) ? pW[q] : 0.0;
    c->aS[q] = (q >= nx && wq && (!wet || wet[q - nx])) ? pS[q] : 0.0;
  }
  const double *arrs[3] = {c->aW, c->aS, c->aC};
  static const char *names[3] = {"pW", "pS", "pC"};
  for (int a = 0; a < 3; a++) {
    const int64_t q = pk_first_nonfinite(arrs[a], n);
    if (q >= 0)
      return pk_error(M->ctx, PKRYLOV_ERR_NOT_FINITE, func, "argument '%s' = %g at cell %lld is not finite", names[a],
                      arrs[a][q], (long long)q);
  }
  return PKRYLOV_SUCCESS;
}

/** Shared creation of both AINV constructors. */
static int ainv_create(pkrylov_context ctx, pkrylov_operator A, double offdiag, const double *pW, const double *pS,
                       const double *pC, const char *func, pkrylov_precond *M) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  int e = PKRYLOV_SUCCESS;
  if (!A) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'A' is NULL");
  else if (!M) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'M' is NULL");
  else if (A->ctx != ctx)
    e = pk_error(ctx, PKRYLOV_ERR_INCOMPATIBLE, func, "argument 'A' was created from another context than 'ctx'");
  else if (A->type != PKRYLOV_OPERATOR_STENCIL7 || A->halo.exchange || A->dist)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'A': the approximate inverse needs a 2-D grid stencil (pkrylov_operator_create_grid_stencil) "
                 "or a 2-D column stencil (pkrylov_operator_create_stencil7)");
  else if (A->nz != 1)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'A' has nz = %d levels: the approximate inverse is the 2-D free-surface "
                 "preconditioner (nz = 1); use the column preconditioner for 3-D operators",
                 A->nz);
  else if (!pC && !(isfinite(offdiag) && offdiag > 0))
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                 "argument 'offdiag' = %g must be finite and > 0 (MITgcm's cg2dpcOffDFac, 0.51 by default)", offdiag);
  else if (pC && (!pW || !pS))
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL", !pW ? "pW" : "pS");
  if (A && A->grid) PK_CALL(pk_mpi_agree(ctx, e));
  else if (e) return e;
  struct pkrylov_precond_s *P = calloc(1, sizeof *P);
  e = P ? PKRYLOV_SUCCESS : pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the preconditioner");
  if (A->grid) e = pk_mpi_agree(ctx, e);
  if (e) return e;
  P->ctx = ctx;
  P->A = A;
  P->type = PKRYLOV_PRECOND_AINV;
  P->n = A->n;
  P->nz = 1; /* one level per "column", as NONE and JACOBI */
  P->ncols = A->n;
  P->layout = PKRYLOV_LAYOUT_KSLOW;
  P->col_stride = 1;
  P->lev_stride = A->n;
  P->ainv.offdiag = pC ? 0.0 : offdiag;
  e = pC ? ainv_from_caller(P, func, pW, pS, pC, &P->ainv.c) : ainv_from_operator(P, func, &P->ainv.c);
  if (!e && A->grid) e = pk_grid_xchg_init(A->grid, 1, &P->ainv.gx);
  if (!e && ctx->be->precond_upload) e = ctx->be->precond_upload(P);
  if (A->grid) e = pk_mpi_agree(ctx, e);
  if (e) {
    pk_ainv_free(P);
    free(P);
    return e;
  }
  A->refs++;
  ctx->live_objects++;
  *M = P;
  return PKRYLOV_SUCCESS;
}

int pkrylov_precond_create_ainv(pkrylov_context ctx, pkrylov_operator A, double offdiag, pkrylov_precond *M) {
  return ainv_create(ctx, A, offdiag, NULL, NULL, NULL, __func__, M);
}

int pkrylov_precond_create_ainv_coefficients(pkrylov_context ctx, pkrylov_operator A, const double *pW,
                                             const double *pS, const double *pC, pkrylov_precond *M) {
  if (ctx && !pC) return pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, __func__, "argument 'pC' is NULL");
  return ainv_create(ctx, A, 0.0, pW, pS, pC, __func__, M);
}

void pk_ainv_apply(const struct pkrylov_precond_s *M, const double *r, double *z) {
  struct pkrylov_precond_s *W = (struct pkrylov_precond_s *)M; /* heap object: the cast is defined */
  const struct pkrylov_operator_s *A = M->A;
  if (A->grid) {
    if (!M->user.failed && pk_grid_stencil_apply(A->grid, 1, &M->ainv.c, r, z, &W->ainv.gx) == PKRYLOV_SUCCESS)
      return;
    W->user.failed = 1; /* the message is in the context */
    for (int64_t i = 0; i < M->n; i++) z[i] = NAN;
    return;
  }
  const int64_t n = M->n, nchunks = (n + PK_ROW_CHUNK - 1) / PK_ROW_CHUNK;
#pragma omp parallel for schedule(static) num_threads(pk_num_threads(M->ctx)) if (pk_par(n))
  for (int64_t ch = 0; ch < nchunks; ch++) {
    const int64_t r0 = ch * PK_ROW_CHUNK, r1 = r0 + PK_ROW_CHUNK < n ? r0 + PK_ROW_CHUNK : n;
    pk_st_apply_rows(&M->ainv.c, A->nx, A->ny, A->nz, r, z, r0, r1);
  }
}

int pkrylov_precond_update(pkrylov_precond M) {
  PK_CHECK(M != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'M' is NULL");
  pkrylov_context ctx = M->ctx;
  const char *func = __func__;
  const int grid = M->A && M->A->grid;
  int e = PKRYLOV_SUCCESS;
  if (M->type == PKRYLOV_PRECOND_USER)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func, "argument 'M' is a user preconditioner: the caller owns it");
  else if (M->type == PKRYLOV_PRECOND_COLUMN && M->from_caller)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'M' holds the caller's column factors (pkrylov_precond_create_column_factors): create "
                 "it again from the new factors");
  else if (M->type == PKRYLOV_PRECOND_AINV && M->ainv.offdiag == 0.0)
    e = pk_error(ctx, PKRYLOV_ERR_UNSUPPORTED, func,
                 "argument 'M' holds the caller's coefficients: use pkrylov_precond_update_ainv_coefficients");
  if (grid) PK_CALL(pk_mpi_agree(ctx, e));
  else if (e) return e;
  if (M->type == PKRYLOV_PRECOND_NONE) return PKRYLOV_SUCCESS;
  if (M->type == PKRYLOV_PRECOND_AINV) {
    pk_stencil c = {0};
    e = ainv_from_operator(M, func, &c);
    if (e) {
      pk_stencil_free(&c);
      return e;
    }
    pk_stencil_free(&M->ainv.c);
    M->ainv.c = c;
    if (M->dev) return M->ctx->be->precond_refresh(M, func);
    return PKRYLOV_SUCCESS;
  }
  return pk_pc_refactor(M, func);
}

int pkrylov_precond_update_ainv_coefficients(pkrylov_precond M, const double *pW, const double *pS,
                                             const double *pC) {
  PK_CHECK(M != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'M' is NULL");
  pkrylov_context ctx = M->ctx;
  const char *func = __func__;
  const int grid = M->A && M->A->grid;
  int e = PKRYLOV_SUCCESS;
  if (M->type != PKRYLOV_PRECOND_AINV)
    e = pk_error(ctx, PKRYLOV_ERR_INCOMPATIBLE, func, "argument 'M' is not an approximate-inverse preconditioner");
  else if (!pW || !pS || !pC)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument '%s' is NULL", !pW ? "pW" : !pS ? "pS" : "pC");
  if (grid) PK_CALL(pk_mpi_agree(ctx, e));
  else if (e) return e;
  pk_stencil c = {0};
  e = ainv_from_caller(M, func, pW, pS, pC, &c);
  if (e) {
    pk_stencil_free(&c);
    return e;
  }
  pk_stencil_free(&M->ainv.c);
  M->ainv.c = c;
  M->ainv.offdiag = 0.0;
  if (M->dev) return M->ctx->be->precond_refresh(M, func);
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Solve on the model's halo'd arrays                                                                */

int pkrylov_solver_solve_halo(pkrylov_solver s, int32_t mem, const double *b, double *x) {
  PK_CHECK(s != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 's' is NULL");
  pkrylov_context ctx = s->ctx;
  const char *func = __func__;
  const struct pkrylov_operator_s *A = s->A;
  PK_CHECK(A->grid != NULL, ctx, PKRYLOV_ERR_INCOMPATIBLE,
           "the solver's operator is not a grid stencil (pkrylov_operator_create_grid_stencil): use "
           "pkrylov_solver_solve");
  PK_CHECK_PTR(b, ctx);
  PK_CHECK_PTR(x, ctx);
  PK_CHECK(mem == PKRYLOV_MEM_HOST || mem == PKRYLOV_MEM_DEVICE, ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'mem' = %d is not a pkrylov_memtype (HOST %d, DEVICE %d)", mem, PKRYLOV_MEM_HOST,
           PKRYLOV_MEM_DEVICE);
  double *bc, *xc;
  if (mem == PKRYLOV_MEM_DEVICE && ctx->be->buffer_alloc) {
    if (!s->halo_bx_dev) PK_CALL(ctx->be->buffer_alloc(ctx, sizeof(double) * 2 * (size_t)s->n, &s->halo_bx_dev));
    bc = s->halo_bx_dev, xc = bc + s->n;
  } else {
    if (!s->halo_bx) {
      s->halo_bx = malloc(sizeof(double) * 2 * (size_t)s->n);
      PK_CHECK(s->halo_bx != NULL, ctx, PKRYLOV_ERR_OUT_OF_MEMORY,
               "cannot allocate the compact copies of b and x (2 x %lld values)", (long long)s->n);
    }
    bc = s->halo_bx, xc = s->halo_bx + s->n;
  }
  PK_CALL(pk_grid_copy_mem(A->grid, A->nz, mem, b, bc, 0, func));
  PK_CALL(pk_grid_copy_mem(A->grid, A->nz, mem, x, xc, 0, func));
  PK_CALL(pkrylov_solver_solve(s, mem, bc, xc));
  return pk_grid_copy_mem(A->grid, A->nz, mem, xc, x, 1, func);
}
