/**
 * @file grid.c
 * @brief Tiled grids: the model's decomposition into tiles (several per rank), their connectivity (walls,
 *        periodic, the cube sphere's rotated edges), the halo-exchange plan built from it, the exchanges
 *        themselves (MPI between ranks; nothing to copy within a rank), and the stencil product on a grid.
 *
 * The plan. Every rank holds the whole connectivity table and the owner of every tile. For each edge cell
 * of a local tile (position m of edge e) the cell across the edge is position m' = m, or L-1-m when the
 * join is reversed, of the neighbour's edge e': a column of a local tile (read in place), a wall, or a cell
 * of a tile on another rank. The values a rank needs from rank q are numbered by (its tile, edge,
 * position) in increasing order; rank q lists its edge cells in the same order (it enumerates the joins
 * from the other side with the same table), so one message per neighbour rank and exchange carries them
 * without any index. Values travel slot-major, all levels of a slot together: the receiver keeps slot h of
 * level k at halo[h*nz + k], so rank q's slots at every level are one contiguous block (the same layout on
 * the GPU, whose pack kernel and NCCL or host-staged messages carry the same blocks: pk_cuda_dist.cu).
 *
 * The product (pk_grid_stencil_apply) is pkrylov_operator_create_stencil7()'s row expression with the
 * neighbour values across tile edges taken from the plan and the couplings from the stencil's edge array,
 * a wall treated as the global boundary of the one-tile stencil (west: its i = 0 form; east: its i = nx-1
 * form; south, north: a zero coupling times the cell's own value). So a rectangle of tiles with walls gives
 * the one-tile product bit for bit. The columns that need no value from another rank are computed while
 * the messages travel.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_comm.h"
#include "pk_impl.h"

/** Tag of the grid exchanges on the context's communicator (dist.c uses 0..3). */
#define PK_GRID_TAG 7100

static const char *pk_edge_name(int e) {
  static const char *names[4] = {"west", "east", "south", "north"};
  return e >= 0 && e < 4 ? names[e] : "?";
}

/* ------------------------------------------------------------------------------------------------ */
/* Connectivity tables                                                                               */

/** conn entry of tile t, edge e. */
static inline void conn_set(int32_t *conn, int64_t t, int e, int32_t t2, int32_t e2, int32_t rev) {
  int32_t *c = conn + 3 * (4 * t + e);
  c[0] = t2, c[1] = e2, c[2] = rev;
}

int pkrylov_grid_connect_rect(int32_t ntx, int32_t nty, int32_t periodic, int32_t *conn) {
  PK_CHECK(ntx >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'ntx' = %d must be >= 1", ntx);
  PK_CHECK(nty >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'nty' = %d must be >= 1", nty);
  PK_CHECK((int64_t)ntx * nty <= INT32_MAX / 12, NULL, PKRYLOV_ERR_INVALID_SIZE,
           "arguments 'ntx' x 'nty' = %d x %d: too many tiles", ntx, nty);
  PK_CHECK(periodic >= PKRYLOV_PERIODIC_NONE && periodic <= PKRYLOV_PERIODIC_XY, NULL, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'periodic' = %d is not a pkrylov_periodic (NONE %d, X %d, Y %d, XY %d)", periodic,
           PKRYLOV_PERIODIC_NONE, PKRYLOV_PERIODIC_X, PKRYLOV_PERIODIC_Y, PKRYLOV_PERIODIC_XY);
  PK_CHECK_PTR(conn, NULL);
  const int px = (periodic - PKRYLOV_PERIODIC_NONE) & 1, py = (periodic - PKRYLOV_PERIODIC_NONE) & 2;
  for (int32_t ty = 0; ty < nty; ty++)
    for (int32_t tx = 0; tx < ntx; tx++) {
      const int64_t t = tx + (int64_t)ntx * ty;
      const int32_t w = tx > 0 ? tx - 1 : (px ? ntx - 1 : -1), e = tx < ntx - 1 ? tx + 1 : (px ? 0 : -1);
      const int32_t s = ty > 0 ? ty - 1 : (py ? nty - 1 : -1), n = ty < nty - 1 ? ty + 1 : (py ? 0 : -1);
      conn_set(conn, t, PK_EDGE_W, w < 0 ? -1 : w + ntx * ty, PK_EDGE_E, 0);
      conn_set(conn, t, PK_EDGE_E, e < 0 ? -1 : e + ntx * ty, PK_EDGE_W, 0);
      conn_set(conn, t, PK_EDGE_S, s < 0 ? -1 : tx + ntx * s, PK_EDGE_N, 0);
      conn_set(conn, t, PK_EDGE_N, n < 0 ? -1 : tx + ntx * n, PK_EDGE_S, 0);
    }
  return PKRYLOV_SUCCESS;
}

/**
 * The cube's face joins: face f, edge e meets face cube_nb[f][e][0], edge cube_nb[f][e][1] (MITgcm's exch2
 * layout, 0-based faces; see pkrylov.h). A join of a west/east edge with a south/north edge runs the other
 * way (the faces are oriented alike, as the outward normal sees them); W-E and S-N joins run the same way.
 */
static const int cube_nb[6][4][2] = {
    {{4, PK_EDGE_N}, {1, PK_EDGE_W}, {5, PK_EDGE_N}, {2, PK_EDGE_W}},
    {{0, PK_EDGE_E}, {3, PK_EDGE_S}, {5, PK_EDGE_E}, {2, PK_EDGE_S}},
    {{0, PK_EDGE_N}, {3, PK_EDGE_W}, {1, PK_EDGE_N}, {4, PK_EDGE_W}},
    {{2, PK_EDGE_E}, {5, PK_EDGE_S}, {1, PK_EDGE_E}, {4, PK_EDGE_S}},
    {{2, PK_EDGE_N}, {5, PK_EDGE_W}, {3, PK_EDGE_N}, {0, PK_EDGE_W}},
    {{4, PK_EDGE_E}, {1, PK_EDGE_S}, {3, PK_EDGE_E}, {0, PK_EDGE_S}}};

/** 1 for the west and east edges (positions run along j), 0 for south and north. */
static inline int edge_is_x(int e) { return e == PK_EDGE_W || e == PK_EDGE_E; }

int pkrylov_grid_connect_cubesphere(int32_t nf, int32_t *conn) {
  PK_CHECK(nf >= 1, NULL, PKRYLOV_ERR_INVALID_SIZE, "argument 'nf' = %d must be >= 1", nf);
  PK_CHECK((int64_t)nf * nf <= INT32_MAX / 72, NULL, PKRYLOV_ERR_INVALID_SIZE,
           "argument 'nf' = %d: too many tiles", nf);
  PK_CHECK_PTR(conn, NULL);
  const int64_t per = (int64_t)nf * nf;
  for (int f = 0; f < 6; f++)
    for (int32_t ty = 0; ty < nf; ty++)
      for (int32_t tx = 0; tx < nf; tx++) {
        const int64_t t = f * per + tx + (int64_t)nf * ty;
        for (int e = 0; e < 4; e++) {
          /* inside the face: the rectangle's neighbours */
          const int32_t ntx = tx + (e == PK_EDGE_W ? -1 : e == PK_EDGE_E ? 1 : 0);
          const int32_t nty = ty + (e == PK_EDGE_S ? -1 : e == PK_EDGE_N ? 1 : 0);
          if (ntx >= 0 && ntx < nf && nty >= 0 && nty < nf) {
            conn_set(conn, t, e, (int32_t)(f * per + ntx + (int64_t)nf * nty), e ^ 1, 0);
            continue;
          }
          /* across the face edge: position p of this tile along the edge, the neighbour face's tile at
             position p (same direction) or nf-1-p (opposite) along its edge e2 */
          const int g = cube_nb[f][e][0], e2 = cube_nb[f][e][1];
          const int rev = edge_is_x(e) != edge_is_x(e2);
          const int32_t p = edge_is_x(e) ? ty : tx, p2 = rev ? nf - 1 - p : p;
          const int32_t gx = edge_is_x(e2) ? (e2 == PK_EDGE_W ? 0 : nf - 1) : p2;
          const int32_t gy = edge_is_x(e2) ? p2 : (e2 == PK_EDGE_S ? 0 : nf - 1);
          conn_set(conn, t, e, (int32_t)(g * per + gx + (int64_t)nf * gy), e2, rev);
        }
      }
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Creation                                                                                          */

static void pk_grid_free(struct pkrylov_grid_s *G) {
  if (!G) return;
  free(G->tiles);
  free(G->conn);
  free(G->owner);
  free(G->lidx);
  free(G->ecol);
  free(G->nbr);
  free(G->nbe);
  free(G->remote);
  free(G->nb_rank);
  free(G->send_off);
  free(G->send_ecell);
  free(G->recv_off);
  free(G);
}

/** Edge length of edge e. */
static inline int64_t edge_len(const struct pkrylov_grid_s *g, int e) { return edge_is_x(e) ? g->sny : g->snx; }

/** Column of position m of edge e of local tile t. */
static inline int64_t edge_col(const struct pkrylov_grid_s *g, int64_t t, int e, int64_t m) {
  const int64_t snx = g->snx, sny = g->sny, base = t * snx * sny;
  switch (e) {
  case PK_EDGE_W: return base + snx * m;
  case PK_EDGE_E: return base + snx * m + snx - 1;
  case PK_EDGE_S: return base + m;
  default: return base + snx * (sny - 1) + m;
  }
}

/**
 * Local checks of the connectivity table (the same table on every rank gives the same answer everywhere):
 * ranges, symmetry, self joins, edge lengths. Returns 0 or an error recorded in ctx.
 */
static int check_conn(pkrylov_context ctx, const char *func, int32_t snx, int32_t sny, int32_t ntiles,
                      const int32_t *conn) {
  for (int32_t t = 0; t < ntiles; t++)
    for (int e = 0; e < 4; e++) {
      const int32_t *c = conn + 3 * (4 * (int64_t)t + e);
      const int32_t t2 = c[0], e2 = c[1], rev = c[2];
      if (t2 == -1) continue;
      if (t2 < -1 || t2 >= ntiles)
        return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                        "argument 'conn': the %s edge of tile %d meets tile %d, outside 0..%d (-1 for a wall)",
                        pk_edge_name(e), t, t2, ntiles - 1);
      if (e2 < 0 || e2 > 3)
        return pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                        "argument 'conn': the %s edge of tile %d meets edge %d of tile %d, outside 0..3",
                        pk_edge_name(e), t, e2, t2);
      if (rev != 0 && rev != 1)
        return pk_error(ctx, PKRYLOV_ERR_INVALID_VALUE, func,
                        "argument 'conn': the direction flag of the %s edge of tile %d is %d (must be 0 or 1)",
                        pk_edge_name(e), t, rev);
      if (t2 == t && e2 == e)
        return pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                        "argument 'conn': the %s edge of tile %d is joined to itself", pk_edge_name(e), t);
      const int32_t *b = conn + 3 * (4 * (int64_t)t2 + e2);
      if (b[0] != t || b[1] != e || b[2] != rev)
        return pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                        "argument 'conn' is not symmetric: the %s edge of tile %d meets the %s edge of tile %d "
                        "(direction flag %d), but that edge meets edge %d of tile %d (flag %d)",
                        pk_edge_name(e), t, pk_edge_name(e2), t2, rev, b[1], b[0], b[2]);
      const int64_t l1 = edge_is_x(e) ? sny : snx, l2 = edge_is_x(e2) ? sny : snx;
      if (l1 != l2)
        return pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                        "argument 'conn' joins the %s edge of tile %d (%lld cells) with the %s edge of tile %d "
                        "(%lld cells): joined edges must have the same length (square tiles, snx = sny, where "
                        "a west or east edge meets a south or north one)",
                        pk_edge_name(e), t, (long long)l1, pk_edge_name(e2), t2, (long long)l2);
    }
  return PKRYLOV_SUCCESS;
}

/** FNV-1a hash of n int32 values (the connectivity table must be the same on every rank). */
static int64_t hash_i32(const int32_t *v, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n; i++) {
    uint32_t x = (uint32_t)v[i];
    for (int b = 0; b < 4; b++) {
      h ^= (x >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  }
  return (int64_t)(h >> 1);
}

/** A join key (receiving tile, its edge, position) and the local edge cell it concerns. */
typedef struct {
  int64_t key;
  int64_t ecell;
  int32_t rank;
} join_ent;

static int join_cmp(const void *a, const void *b) {
  const join_ent *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->key < y->key ? -1 : x->key > y->key ? 1 : 0;
}

/** Build the plan of G (tiles, owners and the table set; G->ctx's rank). */
static int build_plan(struct pkrylov_grid_s *G, const char *func) {
  pkrylov_context ctx = G->ctx;
  const int64_t nt = G->nt, L4 = 2 * ((int64_t)G->snx + G->sny), maxlen = G->snx > G->sny ? G->snx : G->sny;
  G->ncol = nt * G->snx * G->sny;
  G->nedge = nt * L4;
  G->ecol = malloc(sizeof(int64_t) * (size_t)G->nedge);
  G->nbr = malloc(sizeof(int64_t) * (size_t)G->nedge);
  G->nbe = malloc(sizeof(int64_t) * (size_t)G->nedge);
  G->remote = calloc((size_t)(4 * nt), 1);
  /* at most every edge cell is received, and sent */
  join_ent *rcv = malloc(sizeof(join_ent) * (size_t)(G->nedge ? G->nedge : 1));
  join_ent *snd = malloc(sizeof(join_ent) * (size_t)(G->nedge ? G->nedge : 1));
  int32_t *ranks = malloc(sizeof(int32_t) * (size_t)(ctx->size > 0 ? ctx->size : 1));
  if (!G->ecol || !G->nbr || !G->nbe || !G->remote || !rcv || !snd || !ranks) {
    free(rcv), free(snd), free(ranks);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the exchange plan (%lld edge cells)",
                    (long long)G->nedge);
  }
  int64_t nr = 0, ns = 0;
  for (int64_t t = 0; t < nt; t++) {
    const int32_t T = G->tiles[t];
    for (int e = 0; e < 4; e++) {
      const int32_t *c = G->conn + 3 * (4 * (int64_t)T + e);
      const int32_t T2 = c[0], e2 = c[1], rev = c[2];
      const int64_t L = edge_len(G, e);
      const int remote = T2 >= 0 && G->owner[T2] != ctx->rank;
      G->remote[4 * t + e] = (uint8_t)remote;
      for (int64_t m = 0; m < L; m++) {
        const int64_t ec = pk_grid_ecell(G, t, e, m);
        G->ecol[ec] = edge_col(G, t, e, m);
        G->nbe[ec] = -1;
        if (T2 < 0) {
          G->nbr[ec] = -1;
          continue;
        }
        const int64_t m2 = rev ? L - 1 - m : m;
        if (!remote) {
          const int64_t t2 = G->lidx[T2];
          G->nbr[ec] = edge_col(G, t2, e2, m2);
          G->nbe[ec] = pk_grid_ecell(G, t2, e2, m2);
        } else {
          /* I receive: key (my tile, my edge, position); the owner sends its cell (T2, e2, m2) */
          rcv[nr].key = ((int64_t)T * 4 + e) * maxlen + m;
          rcv[nr].ecell = ec;
          rcv[nr].rank = G->owner[T2];
          nr++;
          /* and it receives my cell (T, e, m) under its key (T2, e2, m2) */
          snd[ns].key = ((int64_t)T2 * 4 + e2) * maxlen + m2;
          snd[ns].ecell = ec;
          snd[ns].rank = G->owner[T2];
          ns++;
        }
      }
    }
  }
  qsort(rcv, (size_t)nr, sizeof(join_ent), join_cmp);
  qsort(snd, (size_t)ns, sizeof(join_ent), join_cmp);
  /* neighbour ranks: those I receive from (symmetric joins: the same I send to) */
  int32_t nnb = 0;
  for (int64_t i = 0; i < nr; i++)
    if (nnb == 0 || ranks[nnb - 1] != rcv[i].rank) ranks[nnb++] = rcv[i].rank;
  G->nnb = nnb;
  G->nb_rank = malloc(sizeof(int32_t) * (size_t)(nnb ? nnb : 1));
  G->send_off = calloc((size_t)nnb + 1, sizeof(int64_t));
  G->recv_off = calloc((size_t)nnb + 1, sizeof(int64_t));
  G->send_ecell = malloc(sizeof(int64_t) * (size_t)(ns ? ns : 1));
  if (!G->nb_rank || !G->send_off || !G->recv_off || !G->send_ecell) {
    free(rcv), free(snd), free(ranks);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the exchange plan");
  }
  memcpy(G->nb_rank, ranks, sizeof(int32_t) * (size_t)nnb);
  int64_t q = 0;
  for (int64_t i = 0; i < nr; i++) {
    while (G->nb_rank[q] != rcv[i].rank) G->recv_off[++q] = i;
    G->nbr[rcv[i].ecell] = -2 - i; /* slot i */
  }
  for (int64_t r = q + 1; r <= nnb; r++) G->recv_off[r] = nr;
  G->nhalo = nr;
  q = 0;
  int64_t sq = 0;
  for (int64_t i = 0; i < ns; i++) {
    while (q < nnb && G->nb_rank[q] != snd[i].rank) G->send_off[++q] = i;
    if (q >= nnb) { /* a rank I send to but do not receive from: the table is not symmetric */
      const int32_t r = snd[i].rank;
      free(rcv), free(snd), free(ranks);
      return pk_error(ctx, PKRYLOV_ERR_INTERNAL, func, "exchange plan: rank %d sends without receiving", r);
    }
    G->send_ecell[i] = snd[i].ecell;
    sq = q;
  }
  for (int64_t r = sq + 1; r <= nnb; r++) G->send_off[r] = ns;
  free(rcv), free(snd), free(ranks);
  return PKRYLOV_SUCCESS;
}

int pkrylov_grid_create(pkrylov_context ctx, int32_t snx, int32_t sny, int32_t olx, int32_t oly, int32_t ntiles,
                        const int32_t *conn, int32_t nlocal, const int32_t *tiles, pkrylov_grid *g) {
  PK_CHECK(ctx != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'ctx' is NULL");
  const char *func = __func__;
  /* local checks, then the same outcome on every rank */
  int e = PKRYLOV_SUCCESS;
  if (!g) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'g' is NULL");
  else if (!conn) e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'conn' is NULL");
  else if (snx < 1 || sny < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "arguments 'snx' x 'sny' = %d x %d: each must be >= 1", snx,
                 sny);
  else if (olx < 1 || oly < 1)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func,
                 "arguments 'olx', 'oly' = %d, %d: the halo widths must be >= 1 (the model's arrays have halos)",
                 olx, oly);
  else if (ntiles < 1 || (int64_t)ntiles > INT32_MAX / 12)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'ntiles' = %d must be in 1..%d", ntiles,
                 INT32_MAX / 12);
  else if (nlocal < 1)
    e = pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                 "argument 'nlocal' = %d: every rank must own at least one tile (rank %d owns none)", nlocal,
                 ctx->rank);
  else if (nlocal > ntiles)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "argument 'nlocal' = %d exceeds 'ntiles' = %d", nlocal,
                 ntiles);
  else if (!tiles)
    e = pk_error(ctx, PKRYLOV_ERR_NULL_POINTER, func, "argument 'tiles' is NULL");
  else if ((int64_t)snx * sny > (INT64_MAX / 64) / nlocal)
    e = pk_error(ctx, PKRYLOV_ERR_INVALID_SIZE, func, "too many columns: %d tiles of %d x %d", nlocal, snx, sny);
  for (int32_t i = 0; !e && i < nlocal; i++)
    if (tiles[i] < 0 || tiles[i] >= ntiles)
      e = pk_error(ctx, PKRYLOV_ERR_INDEX_OUT_OF_RANGE, func,
                   "argument 'tiles': tiles[%d] = %d is outside 0..%d", i, tiles[i], ntiles - 1);
  PK_CALL(pk_mpi_agree(ctx, e));
  /* the same sizes and table everywhere */
  {
    int64_t v[6] = {snx, sny, olx, oly, ntiles, hash_i32(conn, 12 * (int64_t)ntiles)}, mn[6], mx[6];
    memcpy(mn, v, sizeof v);
    memcpy(mx, v, sizeof v);
    PK_CALL(pk_mpi_allreduce_i64(ctx, mn, 6, 1));
    PK_CALL(pk_mpi_allreduce_i64(ctx, mx, 6, 2));
    static const char *names[5] = {"snx", "sny", "olx", "oly", "ntiles"};
    for (int i = 0; i < 5 && !e; i++)
      if (mn[i] != mx[i])
        e = pk_error(ctx, PKRYLOV_ERR_SIZE_MISMATCH, func,
                     "argument '%s' differs between the ranks (%lld to %lld): the tiles of a grid have one size",
                     names[i], (long long)mn[i], (long long)mx[i]);
    if (!e && mn[5] != mx[5])
      e = pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                   "argument 'conn' differs between the ranks: every rank passes the whole table");
  }
  if (!e) e = check_conn(ctx, func, snx, sny, ntiles, conn);
  PK_CALL(pk_mpi_agree(ctx, e));

  struct pkrylov_grid_s *G = calloc(1, sizeof *G);
  if (G) {
    G->ctx = ctx;
    G->snx = snx, G->sny = sny, G->olx = olx, G->oly = oly, G->ntiles = ntiles, G->nt = nlocal;
    G->tiles = malloc(sizeof(int32_t) * (size_t)nlocal);
    G->conn = malloc(sizeof(int32_t) * 12 * (size_t)ntiles);
    G->owner = malloc(sizeof(int32_t) * (size_t)ntiles);
    G->lidx = malloc(sizeof(int32_t) * (size_t)ntiles);
  }
  if (!G || !G->tiles || !G->conn || !G->owner || !G->lidx)
    e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the grid (%d tiles)", ntiles);
  e = pk_mpi_agree(ctx, e);
  if (e) {
    pk_grid_free(G);
    return e;
  }
  memcpy(G->tiles, tiles, sizeof(int32_t) * (size_t)nlocal);
  memcpy(G->conn, conn, sizeof(int32_t) * 12 * (size_t)ntiles);
  /* owners: every rank's tile list (padded to the longest) */
  int64_t mx = nlocal;
  PK_CALL(pk_mpi_allreduce_i64(ctx, &mx, 1, 2));
  const int size = ctx->size > 0 ? ctx->size : 1;
  int32_t *mine = malloc(sizeof(int32_t) * (size_t)mx), *all = malloc(sizeof(int32_t) * (size_t)(mx * size));
  if (!mine || !all) e = pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, func, "cannot allocate the tile lists");
  e = pk_mpi_agree(ctx, e);
  if (!e) {
    for (int64_t i = 0; i < mx; i++) mine[i] = i < nlocal ? tiles[i] : -1;
    e = pk_mpi_allgather_i32(ctx, mine, (int)mx, all);
  }
  if (!e) {
    for (int32_t t = 0; t < ntiles; t++) G->owner[t] = -1, G->lidx[t] = -1;
    for (int r = 0; r < size && !e; r++)
      for (int64_t i = 0; i < mx && !e; i++) {
        const int32_t t = all[r * mx + i];
        if (t < 0) continue;
        if (G->owner[t] >= 0)
          e = pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func, "argument 'tiles': tile %d is owned twice (%s %d and %d)",
                       t, G->owner[t] == r ? "by rank" : "by ranks", G->owner[t], r);
        G->owner[t] = r, G->lidx[t] = (int32_t)i;
      }
    for (int32_t t = 0; t < ntiles && !e; t++)
      if (G->owner[t] < 0)
        e = pk_error(ctx, PKRYLOV_ERR_TOPOLOGY, func,
                     "argument 'tiles': tile %d is owned by no rank (the ranks' tiles must cover 0..%d)", t,
                     ntiles - 1);
  }
  free(mine), free(all);
  if (!e) e = build_plan(G, func);
  e = pk_mpi_agree(ctx, e);
  if (e) {
    pk_grid_free(G);
    return e;
  }
  ctx->live_objects++;
  *g = G;
  return PKRYLOV_SUCCESS;
}

int pkrylov_grid_destroy(pkrylov_grid *g) {
  PK_CHECK(g != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'g' is NULL");
  if (!*g) return PKRYLOV_SUCCESS;
  struct pkrylov_grid_s *G = *g;
  PK_CHECK(G->refs == 0, G->ctx, PKRYLOV_ERR_INVALID_STATE,
           "argument 'g' is still used by %lld operator(s): destroy those first", (long long)G->refs);
  G->ctx->live_objects--;
  pk_grid_free(G);
  *g = NULL;
  return PKRYLOV_SUCCESS;
}

int pkrylov_grid_get_info(pkrylov_grid g, int32_t *snx, int32_t *sny, int32_t *olx, int32_t *oly, int32_t *ntiles,
                          int32_t *nlocal) {
  PK_CHECK(g != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'g' is NULL");
  if (snx) *snx = g->snx;
  if (sny) *sny = g->sny;
  if (olx) *olx = g->olx;
  if (oly) *oly = g->oly;
  if (ntiles) *ntiles = g->ntiles;
  if (nlocal) *nlocal = g->nt;
  return PKRYLOV_SUCCESS;
}

/* ------------------------------------------------------------------------------------------------ */
/* Packing between the model's halo'd arrays and the compact order                                   */

/** Copy between halo layout and compact order (dir 0: pack, 1: unpack). */
static void grid_copy(const struct pkrylov_grid_s *g, int64_t nz, const double *src, double *dst, int dir) {
  const int64_t snx = g->snx, sny = g->sny, nt = g->nt, hx = snx + 2 * (int64_t)g->olx;
  const int64_t hy = sny + 2 * (int64_t)g->oly, nlines = sny * nt * nz;
  const int nth = pk_num_threads(g->ctx);
  (void)nth; /* read by the OpenMP pragmas only */
#pragma omp parallel for schedule(static) num_threads(nth) if (pk_par(nlines * snx))
  for (int64_t l = 0; l < nlines; l++) {
    const int64_t j = l % sny, t = (l / sny) % nt, k = l / (sny * nt);
    const int64_t c = snx * l, h = g->olx + hx * ((j + g->oly) + hy * (k + nz * t));
    if (dir == 0)
      memcpy(dst + c, src + h, sizeof(double) * (size_t)snx);
    else
      memcpy(dst + h, src + c, sizeof(double) * (size_t)snx);
  }
}

/** Shared checks of pkrylov_grid_pack/unpack. */
static int pack_check(pkrylov_grid g, const char *func, int32_t nz, int32_t mem, const void *a, const char *an,
                      const void *b, const char *bn) {
  PK_CHECK(g != NULL, NULL, PKRYLOV_ERR_NULL_POINTER, "argument 'g' is NULL");
  PK_CHECK(nz >= 1, g->ctx, PKRYLOV_ERR_INVALID_SIZE, "argument 'nz' = %d must be >= 1", nz);
  PK_CHECK(a != NULL, g->ctx, PKRYLOV_ERR_NULL_POINTER, "argument '%s' is NULL", an);
  PK_CHECK(b != NULL, g->ctx, PKRYLOV_ERR_NULL_POINTER, "argument '%s' is NULL", bn);
  PK_CHECK(mem == PKRYLOV_MEM_HOST || mem == PKRYLOV_MEM_DEVICE, g->ctx, PKRYLOV_ERR_INVALID_VALUE,
           "argument 'mem' = %d is not a pkrylov_memtype (HOST %d, DEVICE %d)", mem, PKRYLOV_MEM_HOST,
           PKRYLOV_MEM_DEVICE);
  (void)func;
  return PKRYLOV_SUCCESS;
}

int pk_grid_copy_mem(const struct pkrylov_grid_s *g, int32_t nz, int32_t mem, const double *src, double *dst,
                     int dir, const char *func) {
  pkrylov_context ctx = g->ctx;
  const pk_backend *be = ctx->be;
  if (be->grid_copy) { /* a device backend */
    PK_CALL(be->check_pointer(ctx, func, mem, src, dir ? "compact" : "halo"));
    PK_CALL(be->check_pointer(ctx, func, mem, dst, dir ? "halo" : "compact"));
    if (mem == PKRYLOV_MEM_DEVICE) {
      void *st = be->context_stream(ctx);
      int e = be->grid_copy(st, g->snx, g->sny, g->olx, g->oly, g->nt, nz, src, dst, dir);
      if (!e) e = be->stream_sync(st);
      PK_CHECK(e == 0, ctx, PKRYLOV_ERR_BACKEND, "copying between the halo'd and the compact arrays on the device "
               "failed (CUDA error %d)", e);
      return PKRYLOV_SUCCESS;
    }
  }
  PK_CHECK(mem == PKRYLOV_MEM_HOST, ctx, PKRYLOV_ERR_MEMTYPE,
           "argument 'mem' = DEVICE: the CPU backend works on host arrays");
  grid_copy(g, nz, src, dst, dir);
  return PKRYLOV_SUCCESS;
}

int pkrylov_grid_pack(pkrylov_grid g, int32_t nz, int32_t mem, const double *halo, double *compact) {
  PK_CALL(pack_check(g, __func__, nz, mem, halo, "halo", compact, "compact"));
  return pk_grid_copy_mem(g, nz, mem, halo, compact, 0, __func__);
}

int pkrylov_grid_unpack(pkrylov_grid g, int32_t nz, int32_t mem, const double *compact, double *halo) {
  PK_CALL(pack_check(g, __func__, nz, mem, compact, "compact", halo, "halo"));
  return pk_grid_copy_mem(g, nz, mem, compact, halo, 1, __func__);
}

/* ------------------------------------------------------------------------------------------------ */
/* Exchanges                                                                                         */

/** The requests of an exchange (X->req): 2 nnb. */
typedef struct {
  pk_comm_req *r;
  int nr;
} xchg_mpi;

int pk_grid_xchg_init(const struct pkrylov_grid_s *g, int32_t nz, pk_grid_xchg *X) {
  memset(X, 0, sizeof *X);
  X->nz = nz;
  if (g->nnb == 0) return PKRYLOV_SUCCESS;
  pkrylov_context ctx = g->ctx;
  X->halo = calloc((size_t)(g->nhalo * nz), sizeof(double));
  X->sbuf = calloc((size_t)(g->send_off[g->nnb] * nz), sizeof(double));
  xchg_mpi *M = calloc(1, sizeof *M);
  if (M) M->r = calloc((size_t)(2 * g->nnb), sizeof(pk_comm_req));
  X->req = M;
  if (!X->halo || !X->sbuf || !M || !M->r) {
    pk_grid_xchg_free(X);
    return pk_error(ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "pkrylov_operator_create",
                    "cannot allocate the halo buffers (%lld values)", (long long)(g->nhalo * nz));
  }
  return PKRYLOV_SUCCESS;
}

void pk_grid_xchg_free(pk_grid_xchg *X) {
  if (!X) return;
  xchg_mpi *M = X->req;
  if (M) {
    free(M->r);
    free(M);
  }
  free(X->halo);
  free(X->sbuf);
  memset(X, 0, sizeof *X);
}

/** Post the receives into halo and the sends of sbuf (nz levels, slot-major blocks per neighbour rank). */
static int xchg_post_bufs(const struct pkrylov_grid_s *g, int64_t nz, xchg_mpi *M, double *halo,
                          const double *sbuf) {
  pkrylov_context ctx = g->ctx;
  const pk_comm_ops *ops = pk_comm_ops_of(ctx);
  void *comm = pk_comm_of(ctx);
  M->nr = 0;
  for (int32_t q = 0; q < g->nnb; q++) {
    const int64_t cnt = (g->recv_off[q + 1] - g->recv_off[q]) * nz;
    int rc = ops->irecv(comm, halo + g->recv_off[q] * nz, (int)cnt, PK_COMM_DOUBLE, g->nb_rank[q], PK_GRID_TAG,
                        &M->r[M->nr]);
    if (rc != 0) return pk_comm_error(ctx, "halo exchange", "MPI_Irecv", rc);
    M->nr++;
  }
  for (int32_t q = 0; q < g->nnb; q++) {
    const int64_t cnt = (g->send_off[q + 1] - g->send_off[q]) * nz;
    int rc = ops->isend(comm, sbuf + g->send_off[q] * nz, (int)cnt, PK_COMM_DOUBLE, g->nb_rank[q], PK_GRID_TAG,
                        &M->r[M->nr]);
    if (rc != 0) return pk_comm_error(ctx, "halo exchange", "MPI_Isend", rc);
    M->nr++;
  }
  return PKRYLOV_SUCCESS;
}

/** Post the receives and the sends of a packed X->sbuf. */
static int xchg_post(const struct pkrylov_grid_s *g, pk_grid_xchg *X) {
  PK_CALL(xchg_post_bufs(g, X->nz, X->req, X->halo, X->sbuf));
  X->inflight = 1;
  return PKRYLOV_SUCCESS;
}

int pk_grid_exchange_bufs(const struct pkrylov_grid_s *g, int32_t nz, const double *sbuf, double *halo) {
  if (g->nnb == 0) return PKRYLOV_SUCCESS;
  pk_comm_req *r = malloc(sizeof(pk_comm_req) * (size_t)(2 * g->nnb));
  if (!r) return pk_error(g->ctx, PKRYLOV_ERR_OUT_OF_MEMORY, "halo exchange", "cannot allocate the requests");
  xchg_mpi M = {r, 0};
  int e = xchg_post_bufs(g, nz, &M, halo, sbuf);
  const int rc = M.nr ? pk_comm_ops_of(g->ctx)->waitall(M.nr, M.r) : 0;
  free(r);
  if (!e && rc != 0) e = pk_comm_error(g->ctx, "halo exchange", "MPI_Waitall", rc);
  return e;
}

/**
 * Pack the values other ranks need into X->sbuf, slot-major: entry s (of send_ecell, all neighbour ranks'
 * blocks in a row) level k at s*nz + k, the value v[idx(send_ecell[s]) + stride*k].
 */
static void xchg_pack(const struct pkrylov_grid_s *g, pk_grid_xchg *X, const double *v, int by_column,
                      int64_t stride) {
  const int64_t nz = X->nz, ns = g->send_off[g->nnb];
  for (int64_t s = 0; s < ns; s++) {
    const int64_t ec = g->send_ecell[s], idx = by_column ? g->ecol[ec] : ec;
    for (int64_t k = 0; k < nz; k++) X->sbuf[s * nz + k] = v[idx + stride * k];
  }
}

int pk_grid_xchg_begin(const struct pkrylov_grid_s *g, const double *x, pk_grid_xchg *X) {
  if (g->nnb == 0) return PKRYLOV_SUCCESS;
  xchg_pack(g, X, x, 1, g->ncol);
  return xchg_post(g, X);
}

int pk_grid_xchg_end(const struct pkrylov_grid_s *g, pk_grid_xchg *X) {
  xchg_mpi *M = X->req;
  if (g->nnb == 0 || !X->inflight) return PKRYLOV_SUCCESS;
  X->inflight = 0;
  int rc = pk_comm_ops_of(g->ctx)->waitall(M->nr, M->r);
  M->nr = 0;
  if (rc != 0) return pk_comm_error(g->ctx, "halo exchange", "MPI_Waitall", rc);
  return PKRYLOV_SUCCESS;
}

int pk_grid_edge_swap(const struct pkrylov_grid_s *g, int32_t nz, const double *mine, double *theirs) {
  const int64_t nedge = g->nedge;
  pk_grid_xchg X;
  int e = pk_grid_xchg_init(g, nz, &X);
  if (!e && g->nnb > 0) {
    xchg_pack(g, &X, mine, 0, nedge);
    e = xchg_post(g, &X);
    const int e2 = pk_grid_xchg_end(g, &X);
    if (!e) e = e2;
  }
  if (!e)
    for (int64_t k = 0; k < nz; k++)
      for (int64_t ec = 0; ec < nedge; ec++) {
        const int64_t nb = g->nbr[ec];
        theirs[ec + nedge * k] = nb == -1 ? 0.0 : nb >= 0 ? mine[g->nbe[ec] + nedge * k] : X.halo[(-2 - nb) * nz + k];
      }
  pk_grid_xchg_free(&X);
  return e;
}

/* ------------------------------------------------------------------------------------------------ */
/* The stencil product                                                                               */

/** Value across edge cell ec at level k (own: the cell's own value, for walls). */
static inline double nb_value(const struct pkrylov_grid_s *g, int64_t nz, const double *x, const double *halo,
                              int64_t ec, int64_t k, double own) {
  const int64_t nb = g->nbr[ec];
  return nb >= 0 ? x[nb + g->ncol * k] : nb == -1 ? own : halo[(-2 - nb) * nz + k];
}

/**
 * Cells [ia, ib) of line (t, j, k): pkrylov_operator_create_stencil7()'s row expression (st_line) with the
 * neighbours across tile edges from the plan. A west wall gives its i = 0 form, an east wall its i = nx-1
 * form; across the south and north edges the coupling comes from c->edge (0 at walls) and the neighbour
 * value from the plan (the own value at walls, as the one-tile stencil's zeroed boundary lines do).
 */
static void gst_line(const struct pkrylov_grid_s *g, int64_t nz, const pk_stencil *c, const double *x,
                     const double *halo, double *y, int64_t t, int64_t j, int64_t k, int64_t ia, int64_t ib) {
  if (ib <= ia) return;
  const int64_t nx = g->snx, sny = g->sny, ncol = g->ncol, nedge = g->nedge;
  const int64_t c0 = nx * (j + sny * t) + ncol * k;
  const double *restrict xc = x + c0;
  const double *restrict aC = c->aC + c0, *restrict aW = c->aW + c0;
  const int s_edge = j == 0, n_edge = j == sny - 1;
  const int64_t es = pk_grid_ecell(g, t, PK_EDGE_S, 0), en = pk_grid_ecell(g, t, PK_EDGE_N, 0);
  const double *restrict cs = s_edge ? c->edge + es + nedge * k : c->aS + c0;
  const double *restrict cn = n_edge ? c->edge + en + nedge * k : c->aS + c0 + nx;
  const double *restrict cd = c->aV + c0;
  const double *restrict cu = k < nz - 1 ? c->aV + c0 + ncol : c->aV + (c0 - ncol * k); /* level 0: zeros */
  const double *restrict xd = k > 0 ? xc - ncol : xc, *restrict xu = k < nz - 1 ? xc + ncol : xc;
  const int64_t ew = pk_grid_ecell(g, t, PK_EDGE_W, j), ee = pk_grid_ecell(g, t, PK_EDGE_E, j);
  const int hasW = g->nbr[ew] != -1, hasE = g->nbr[ee] != -1;
  double *restrict yc = y + c0;
/* the values across the south and north edges of cell i */
#define XS(i) (s_edge ? nb_value(g, nz, x, halo, es + (i), k, xc[i]) : xc[(i) - nx])
#define XN(i) (n_edge ? nb_value(g, nz, x, halo, en + (i), k, xc[i]) : xc[(i) + nx])
  int64_t lo = ia;
  const int64_t hi = ib < nx - 1 ? ib : nx - 1;
  if (lo == 0) { /* the west cell */
    const double x0 = xc[0], xs0 = XS(0), xn0 = XN(0);
    double s;
    if (!hasW) {
      s = aC[0] * x0 + cs[0] * xs0 + cn[0] * xn0 + cd[0] * xd[0] + cu[0] * xu[0];
      if (nx > 1)
        s += aW[1] * xc[1];
      else if (hasE)
        s += c->edge[ee + nedge * k] * nb_value(g, nz, x, halo, ee, k, x0);
    } else {
      const double cw = c->edge[ew + nedge * k], xw = nb_value(g, nz, x, halo, ew, k, x0);
      if (nx > 1)
        s = aC[0] * x0 + cw * xw + aW[1] * xc[1] + cs[0] * xs0 + cn[0] * xn0 + cd[0] * xd[0] + cu[0] * xu[0];
      else if (hasE)
        s = aC[0] * x0 + cw * xw + c->edge[ee + nedge * k] * nb_value(g, nz, x, halo, ee, k, x0) + cs[0] * xs0 +
            cn[0] * xn0 + cd[0] * xd[0] + cu[0] * xu[0];
      else
        s = aC[0] * x0 + cw * xw + cs[0] * xs0 + cn[0] * xn0 + cd[0] * xd[0] + cu[0] * xu[0];
    }
    yc[0] = s;
    lo = 1;
  }
  if (!s_edge && !n_edge) {
    for (int64_t i = lo; i < hi; i++)
      yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + aW[i + 1] * xc[i + 1] + cs[i] * xc[i - nx] + cn[i] * xc[i + nx] +
              cd[i] * xd[i] + cu[i] * xu[i];
  } else {
    for (int64_t i = lo; i < hi; i++)
      yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + aW[i + 1] * xc[i + 1] + cs[i] * XS(i) + cn[i] * XN(i) +
              cd[i] * xd[i] + cu[i] * xu[i];
  }
  if (ib == nx && nx - 1 >= lo) { /* the east cell (nx > 1) */
    const int64_t i = nx - 1;
    if (hasE)
      yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + c->edge[ee + nedge * k] * nb_value(g, nz, x, halo, ee, k, xc[i]) +
              cs[i] * XS(i) + cn[i] * XN(i) + cd[i] * xd[i] + cu[i] * xu[i];
    else
      yc[i] = aC[i] * xc[i] + aW[i] * xc[i - 1] + cs[i] * XS(i) + cn[i] * XN(i) + cd[i] * xd[i] + cu[i] * xu[i];
  }
#undef XS
#undef XN
}

int pk_grid_stencil_apply(const struct pkrylov_grid_s *g, int32_t nz, const pk_stencil *c, const double *x,
                          double *y, pk_grid_xchg *X) {
  const int64_t nx = g->snx, sny = g->sny, nt = g->nt, nlines = sny * nt * nz;
  const int nth = pk_num_threads(g->ctx);
  (void)nth; /* read by the OpenMP pragmas only */
  int e = pk_grid_xchg_begin(g, x, X);
  if (e) return e;
  const double *halo = X->halo;
  /* phase 1: every line and cell that reads nothing of another rank */
#pragma omp parallel for schedule(static) num_threads(nth) if (pk_par(nlines * nx))
  for (int64_t l = 0; l < nlines; l++) {
    const int64_t j = l % sny, t = (l / sny) % nt, k = l / (sny * nt);
    const uint8_t *rem = g->remote + 4 * t;
    if ((j == 0 && rem[PK_EDGE_S]) || (j == sny - 1 && rem[PK_EDGE_N])) continue;
    gst_line(g, nz, c, x, halo, y, t, j, k, rem[PK_EDGE_W] ? 1 : 0, rem[PK_EDGE_E] ? nx - 1 : nx);
  }
  e = pk_grid_xchg_end(g, X);
  if (e || g->nnb == 0) return e;
  /* phase 2: the rest */
#pragma omp parallel for schedule(static) num_threads(nth) if (pk_par(nlines * nx))
  for (int64_t l = 0; l < nlines; l++) {
    const int64_t j = l % sny, t = (l / sny) % nt, k = l / (sny * nt);
    const uint8_t *rem = g->remote + 4 * t;
    if ((j == 0 && rem[PK_EDGE_S]) || (j == sny - 1 && rem[PK_EDGE_N])) {
      gst_line(g, nz, c, x, halo, y, t, j, k, 0, nx);
    } else {
      if (rem[PK_EDGE_W]) gst_line(g, nz, c, x, halo, y, t, j, k, 0, 1 < nx ? 1 : nx);
      if (rem[PK_EDGE_E] && (nx > 1 || !rem[PK_EDGE_W])) gst_line(g, nz, c, x, halo, y, t, j, k, nx - 1, nx);
    }
  }
  return PKRYLOV_SUCCESS;
}

void pk_stencil_free(pk_stencil *c) {
  free(c->aW);
  free(c->aS);
  free(c->aV);
  free(c->aC);
  free(c->wet);
  free(c->edge);
  memset(c, 0, sizeof *c);
}
