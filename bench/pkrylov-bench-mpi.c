/**
 * @file pkrylov-bench-mpi.c
 * @brief Scaling of distributed CG and pipelined CG (and, with --solvers, pipelined BiCGStab and pipelined
 *        GMRES) on the thin shell with the column preconditioner over 1, 2, 4, ... ranks, one GPU per rank
 *        on the CUDA backend (or the CPU backend).
 *
 *   mpirun -n W pkrylov-bench-mpi [--backend cuda|cpu] [--weak NX,NY,NZ] [--strong NX,NY,NZ]
 *                                 [--ranks 1,2,4] [--iters N] [--reps R] [--json FILE] [--no-instrument]
 *                                 [--reproducible] [--modes weak,strong] [--nccl-only] [--strips]
 *                                 [--solvers cg,pipecg,pipebicgstab,pipegmres]
 *                                 [--operator dist|grid|cube] [--tiles TX,TY] [--cube N,NZ]
 *
 * --operator: the thin shell as a distributed operator of one tile per rank (dist, the default:
 * pkrylov_operator_create_thinshell_dist), as a grid stencil of TX x TY tiles per rank (grid, --tiles,
 * default 2,2: pkrylov_grid_create and pkrylov_operator_create_grid_stencil from the model's halo'd
 * arrays, walls, the same coefficients as pkrylov_thinshell_stencil_coefficients), or the cube sphere of
 * N x N columns per face and NZ levels (cube, --cube, default 256,64: pkrylov_cubesphere_stencil_coefficients,
 * one tile per face, 6 / P faces per rank; its mode is "cube", strong scaling over --ranks, default 1,2,3).
 *
 * --solvers: the methods measured (default cg,pipecg). pipebicgstab and pipegmres (restart 30) run on the
 * BiCGStab/GMRES vector engine (on CUDA: the device halo exchange and the gathered global sums, their
 * reductions started before and finished after the preconditioner and the operator product); an iteration
 * of pipelined BiCGStab applies the operator and the preconditioner twice, so compare its time per
 * iteration with CG's per two. A solve that stops before its iteration count (a breakdown or stagnation
 * once the residual reaches rounding level, e.g. on small grids) is noted and gets no time (nan).
 *
 * One launch of W ranks measures every rank count P of --ranks (default 1, 2, 4, ... up to W) on the
 * communicator of the first P ranks (the others wait), so the efficiencies come from one run:
 *  - weak scaling: the thin shell of (NX px) x (NY py) x NZ on px x py ranks (default 256,256,128 per rank),
 *    efficiency T(1) / T(P) per iteration;
 *  - strong scaling: NX x NY x NZ (default 512,512,128) on px x py ranks, efficiency T(1) / (P T(P)).
 *  (--modes weak or --modes strong: only that one; default both.)
 * px x py: py the largest divisor of P up to sqrt(P) (1x1, 2x1, 2x2, 4x2, ...); --strips: 1 x P (each rank
 * a strip of whole rows, neighbours to the south and north only: its halos are contiguous rows). P = 1 is a context on a
 * one-rank communicator, which solves as a plain single-GPU context (CUDA graphs, folded steps).
 *
 * Pipelined CG replaces its residual every 50 iterations (fixed: the automatic rule would decide by the run).
 * Time per iteration: tolerance 1e-300, so a solve runs exactly max_iterations; the wall time of solves of
 * 10 and 10 + N iterations (the slowest rank's, after a barrier; the least of R repetitions each) differ by
 * N iterations, which removes the setup of a solve (copies, initial residual, final residual).
 * Paths (CUDA, P > 1): each configuration runs twice in the same launch, on the NCCL path (device-to-device
 * halos and gathered sums, blocks of iterations as CUDA graphs; when the library has NCCL and the ranks have
 * GPUs of their own) and on the host-staged path (option dist.nccl=0: halos and sums through pinned host
 * memory and MPI); the efficiencies of both are against the same one-rank time. --nccl-only: the NCCL path
 * alone (where NCCL is there).
 * Communication (CUDA, P > 1): a separate instrumented run (option dist.instrument=1: the device work
 * queued before each halo exchange and each global sum is waited for outside the timers, the copies are
 * blocking) gives the time per iteration of the halo exchanges (pack, device-to-host, MPI, host-to-device)
 * and of the global sums (partial sums, copies, MPI_Allreduce), the slowest rank's. The normal run overlaps
 * part of them with the GPU work: 'hidden' = (T_instrumented - T) / (halo + reductions).
 * Reproducible mode (--reproducible): every configuration is measured twice in the same launch, in the
 * default mode and in reproducible mode (pkrylov_context_set_reproducible: exact global sums), records
 * "repro" 0 and 1; the reproducible records carry the ratio of their time per iteration to the default
 * one's (same mode, solver, path and ranks), the efficiencies are against the one-rank time of the same
 * mode.
 * Output: a table on stdout, and the records as JSON (--json, default bench-mpi.json), written by rank 0.
 */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrylov.h"
#include "pkrylov_mpi.h"

#ifdef PKB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef PKB_HAVE_TIMERS
void pk_cuda_dist_timers(double *halo_s, double *reduce_s, int reset); /* pk_cuda.h (internal) */
int pk_mpi_nccl(pkrylov_context ctx, void **comm);                     /* pk_impl.h (internal) */
#endif

typedef struct {
  const char *mode;
  const char *solver;
  const char *path; /* "nccl", "host" (staged through the host), "single" (one rank) */
  int ranks, px, py;
  int gnx, gny, nz;
  int iters;           /* iterations of the timed difference */
  double t_iter;       /* s per iteration */
  double t_instr;      /* instrumented run, s per iteration (0: not measured) */
  double halo, reduce; /* instrumented: s per iteration */
  double eff;
  int repro;           /* 1: reproducible mode */
  double repro_ratio;  /* repro: t_iter / the default mode's (0: not measured) */
} record;

static double now(void) {
  return MPI_Wtime();
}

/** The column-stencil coefficients of the whole problem (global order), on every rank. */
typedef struct {
  int nx, ny, nf, nz; /* nf = 1: an nx x ny rectangle; 6: the cube, nx = ny = N per face */
  double *c[4];       /* aW, aS, aV, aC */
} global_stencil;

/**
 * The halo'd arrays (snx + 2) x (sny + 2) x nz x nt (halo 1) of the nt tiles `tiles` (tile t: face
 * t / (ntx nty), position (t mod ntx, (t / ntx) mod nty) of the face's ntx x nty tiles) of coefficient c.
 */
static double *halo_tiles(const global_stencil *G, const double *c, int snx, int sny, int ntx, int nty, int nt,
                          const int32_t *tiles) {
  const int64_t hx = snx + 2, hy = sny + 2, per = hx * hy * G->nz;
  double *a = calloc((size_t)(per * nt), sizeof(double));
  if (!a) return NULL;
  for (int l = 0; l < nt; l++) {
    const int t = tiles[l], f = t / (ntx * nty), tx = t % ntx, ty = (t / ntx) % nty;
    for (int64_t k = 0; k < G->nz; k++)
      for (int64_t j = 0; j < sny; j++)
        for (int64_t i = 0; i < snx; i++) {
          const int64_t gi = (int64_t)tx * snx + i, gj = (int64_t)ty * sny + j;
          a[per * l + (i + 1) + hx * ((j + 1) + hy * k)] =
              c[gi + (int64_t)G->nx * (gj + (int64_t)G->ny * (f + (int64_t)G->nf * k))];
        }
  }
  return a;
}

static int die(int rank, const char *what, int rc) {
  fprintf(stderr, "rank %d: %s failed: %d (%s): %s\n", rank, what, rc, pkrylov_error_string(rc),
          pkrylov_last_error_message());
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

#define CHECK(call)                                                                                          \
  do {                                                                                                       \
    int rc_ = (call);                                                                                        \
    if (rc_)                                                                                                 \
      die(wrank, #call, rc_);                                                                                \
  } while (0)

static void parse3(const char *s, int v[3]) {
  if (sscanf(s, "%d,%d,%d", &v[0], &v[1], &v[2]) != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1) {
    fprintf(stderr, "bad grid '%s' (NX,NY,NZ)\n", s);
    exit(2);
  }
}

/** v as a JSON number with `digits` decimals, or null when it is not finite (a record without a time). */
static const char *jnum(char buf[40], double v, int digits) {
  if (!isfinite(v))
    return "null";
  snprintf(buf, 40, "%.*f", digits, v);
  return buf;
}

/** One solve of exactly maxit iterations; the slowest rank's wall time. */
static double timed_solve(MPI_Comm comm, pkrylov_solver s, int32_t maxit, const double *b, double *x,
                          int wrank, int32_t *its) {
  CHECK(pkrylov_solver_set_max_iterations(s, maxit));
  MPI_Barrier(comm);
  const double t0 = now();
  CHECK(pkrylov_solver_solve(s, PKRYLOV_MEM_HOST, b, x));
  double t = now() - t0, tmax;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
  pkrylov_result res;
  CHECK(pkrylov_solver_get_result(s, &res));
  *its = res.iterations;
  return tmax;
}

/**
 * The grid stencil of G on this rank (comm rank r of P): the tiles of nf faces of ntx x nty tiles of
 * snx x sny columns each; rank r owns the block given by owner_of (a rank's tiles in increasing order).
 */
static int grid_operator(pkrylov_context ctx, const global_stencil *G, int snx, int sny, int ntx, int nty,
                         int nt, const int32_t *tiles, pkrylov_grid *g, pkrylov_operator *A) {
  const int ntiles = G->nf * ntx * nty;
  int32_t *conn = malloc(sizeof(int32_t) * 12 * (size_t)ntiles);
  if (!conn) return PKRYLOV_ERR_OUT_OF_MEMORY;
  int rc = G->nf == 6 ? pkrylov_grid_connect_cubesphere(ntx, conn)
                      : pkrylov_grid_connect_rect(ntx, nty, PKRYLOV_PERIODIC_NONE, conn);
  if (!rc) rc = pkrylov_grid_create(ctx, snx, sny, 1, 1, ntiles, conn, nt, tiles, g);
  free(conn);
  double *h[4] = {NULL, NULL, NULL, NULL};
  for (int q = 0; q < 4 && !rc; q++)
    if (!(h[q] = halo_tiles(G, G->c[q], snx, sny, ntx, nty, nt, tiles))) rc = PKRYLOV_ERR_OUT_OF_MEMORY;
  if (!rc) rc = pkrylov_operator_create_grid_stencil(*g, G->nz, h[0], h[1], h[2], h[3], NULL, A);
  for (int q = 0; q < 4; q++) free(h[q]);
  return rc;
}

static void global_free(global_stencil *G) {
  for (int q = 0; q < 4; q++) free(G->c[q]), G->c[q] = NULL;
}

/** The thin shell (nf = 1) or the cube sphere (nf = 6) coefficients; 0 or an error code. */
static int global_make(global_stencil *G, int nf, int nx, int ny, int nz) {
  G->nx = nx, G->ny = ny, G->nf = nf, G->nz = nz;
  const size_t n = (size_t)nx * ny * nf * nz;
  for (int q = 0; q < 4; q++)
    if (!(G->c[q] = malloc(sizeof(double) * n))) return global_free(G), PKRYLOV_ERR_OUT_OF_MEMORY;
  pkrylov_thinshell_params p;
  int rc = pkrylov_thinshell_params_default(nx, ny, nz, &p);
  if (!rc)
    rc = nf == 6 ? pkrylov_cubesphere_stencil_coefficients(&p, G->c[0], G->c[1], G->c[2], G->c[3])
                 : pkrylov_thinshell_stencil_coefficients(&p, G->c[0], G->c[1], G->c[2], G->c[3]);
  if (rc) global_free(G);
  return rc;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int wrank, wsize;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  int backend = PKRYLOV_BACKEND_CUDA, weak[3] = {256, 256, 128}, strong[3] = {512, 512, 128};
  int iters = 100, reps = 3, instrument = 1, nranks = 0, rlist[16], reproducible = 0, nccl_only = 0, strips = 0;
  int mode_on[2] = {1, 1}; /* weak, strong (--modes) */
  int opkind = 0, tiles_pr[2] = {2, 2}, cube[2] = {256, 64}; /* --operator dist / grid / cube */
  const char *json = "bench-mpi.json";
  static const int32_t all_types[4] = {PKRYLOV_SOLVER_CG, PKRYLOV_SOLVER_PIPECG, PKRYLOV_SOLVER_PIPEBICGSTAB,
                                       PKRYLOV_SOLVER_PIPEGMRES};
  static const char *const all_keys[4] = {"cg", "pipecg", "pipebicgstab", "pipegmres"};
  static const char *const all_names[4] = {"CG", "pipelined CG", "pipe BiCGStab", "pipe GMRES"};
  int tsel[4] = {0, 1, 0, 0}, ntypes = 2;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--backend") && a + 1 < argc) {
      a++;
      backend = !strcmp(argv[a], "cpu") ? PKRYLOV_BACKEND_CPU : PKRYLOV_BACKEND_CUDA;
    } else if (!strcmp(argv[a], "--weak") && a + 1 < argc) {
      parse3(argv[++a], weak);
    } else if (!strcmp(argv[a], "--strong") && a + 1 < argc) {
      parse3(argv[++a], strong);
    } else if (!strcmp(argv[a], "--iters") && a + 1 < argc) {
      iters = atoi(argv[++a]);
    } else if (!strcmp(argv[a], "--reps") && a + 1 < argc) {
      reps = atoi(argv[++a]);
    } else if (!strcmp(argv[a], "--json") && a + 1 < argc) {
      json = argv[++a];
    } else if (!strcmp(argv[a], "--modes") && a + 1 < argc) {
      const char *v = argv[++a];
      mode_on[0] = strstr(v, "weak") != NULL;
      mode_on[1] = strstr(v, "strong") != NULL;
      if (!mode_on[0] && !mode_on[1]) {
        if (wrank == 0)
          fprintf(stderr, "--modes: '%s' names neither weak nor strong\n", v);
        MPI_Finalize();
        return 2;
      }
    } else if (!strcmp(argv[a], "--reproducible")) {
      reproducible = 1;
    } else if (!strcmp(argv[a], "--solvers") && a + 1 < argc) {
      const char *p = argv[++a];
      ntypes = 0;
      while (*p) {
        const size_t len = strcspn(p, ",");
        int k = -1;
        for (int j = 0; j < 4; j++)
          if (strlen(all_keys[j]) == len && !strncmp(p, all_keys[j], len))
            k = j;
        if (k < 0 || ntypes >= 4) {
          if (wrank == 0)
            fprintf(stderr, "--solvers: unknown or repeated method in '%s' (cg, pipecg, pipebicgstab, pipegmres)\n",
                    argv[a]);
          MPI_Finalize();
          return 2;
        }
        tsel[ntypes++] = k;
        p += len;
        if (*p == ',')
          p++;
      }
    } else if (!strcmp(argv[a], "--operator") && a + 1 < argc) {
      a++;
      opkind = !strcmp(argv[a], "grid") ? 1 : !strcmp(argv[a], "cube") ? 2 : !strcmp(argv[a], "dist") ? 0 : -1;
      if (opkind < 0) {
        if (wrank == 0) fprintf(stderr, "--operator: '%s' is none of dist, grid, cube\n", argv[a]);
        MPI_Finalize();
        return 2;
      }
    } else if (!strcmp(argv[a], "--tiles") && a + 1 < argc) {
      if (sscanf(argv[++a], "%d,%d", &tiles_pr[0], &tiles_pr[1]) != 2 || tiles_pr[0] < 1 || tiles_pr[1] < 1) {
        if (wrank == 0) fprintf(stderr, "--tiles: bad '%s' (TX,TY)\n", argv[a]);
        MPI_Finalize();
        return 2;
      }
    } else if (!strcmp(argv[a], "--cube") && a + 1 < argc) {
      if (sscanf(argv[++a], "%d,%d", &cube[0], &cube[1]) != 2 || cube[0] < 2 || cube[1] < 1) {
        if (wrank == 0) fprintf(stderr, "--cube: bad '%s' (N,NZ)\n", argv[a]);
        MPI_Finalize();
        return 2;
      }
    } else if (!strcmp(argv[a], "--no-instrument")) {
      instrument = 0;
    } else if (!strcmp(argv[a], "--nccl-only")) {
      nccl_only = 1;
    } else if (!strcmp(argv[a], "--strips")) {
      strips = 1;
    } else if (!strcmp(argv[a], "--ranks") && a + 1 < argc) {
      char *p = argv[++a];
      while (*p && nranks < 16) {
        rlist[nranks++] = (int)strtol(p, &p, 10);
        if (*p == ',')
          p++;
      }
    } else {
      if (wrank == 0)
        fprintf(stderr, "usage: see the head of bench/pkrylov-bench-mpi.c (argument '%s')\n", argv[a]);
      MPI_Finalize();
      return 2;
    }
  }
  if (iters < 1 || reps < 1)
    iters = iters < 1 ? 1 : iters, reps = reps < 1 ? 1 : reps;
  if (opkind == 2) { /* the cube: strong scaling over ranks dividing the six faces */
    mode_on[0] = 0, mode_on[1] = 1;
    if (nranks == 0)
      for (int p = 1; p <= wsize && p <= 3; p++) rlist[nranks++] = p;
  }
  if (nranks == 0)
    for (int p = 1; p <= wsize && nranks < 16; p *= 2)
      rlist[nranks++] = p;
#ifndef PKB_HAVE_CUDA
  if (backend == PKRYLOV_BACKEND_CUDA)
    backend = PKRYLOV_BACKEND_CPU;
#endif
  if (backend == PKRYLOV_BACKEND_CPU)
    instrument = 0; /* the timers are the CUDA backend's */
  char device[256] = "CPU";
#ifdef PKB_HAVE_CUDA
  if (backend == PKRYLOV_BACKEND_CUDA) {
    struct cudaDeviceProp prop;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
      if (wrank == 0)
        fprintf(stderr, "no GPU: use --backend cpu\n");
      MPI_Finalize();
      return 77;
    }
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
      snprintf(device, sizeof device, "%d x %s (%d visible)", wsize < count ? wsize : count, prop.name,
               count);
  }
#endif
  if (wrank == 0) {
    printf("pkrylov-bench-mpi: %d ranks launched, backend %s, device %s\n", wsize,
           backend == PKRYLOV_BACKEND_CUDA ? "CUDA" : "CPU", device);
    if (opkind == 2)
      printf("cube sphere %d x %d x 6 faces x %d levels, one tile per face, column preconditioner", cube[0], cube[0],
             cube[1]);
    else
      printf("thin shell (%s), column preconditioner; weak %d x %d x %d per rank, strong %d x %d x %d",
             opkind ? "grid stencil" : "distributed operator", weak[0], weak[1], weak[2], strong[0], strong[1],
             strong[2]);
    if (opkind == 1) printf(", %d x %d tiles per rank", tiles_pr[0], tiles_pr[1]);
    printf("; time per iteration from solves of 10 and %d iterations (least of %d), slowest rank\n", 10 + iters,
           reps);
  }
  record recs[256];
  int nrec = 0;
  const char *const mode_names[2] = {opkind == 1 ? "weak-grid" : "weak", opkind == 2 ? "cube" : opkind == 1 ? "strong-grid" : "strong"};
  global_stencil G = {0};
  int32_t types[4];
  const char *tnames[4];
  for (int t = 0; t < ntypes; t++)
    types[t] = all_types[tsel[t]], tnames[t] = all_names[tsel[t]];
  for (int m = 0; m < 2; m++)
    for (int ri = 0; ri < nranks; ri++) {
      const int P = rlist[ri];
      if (P < 1 || P > wsize || !mode_on[m])
        continue;
      int py = 1;
      for (int d = 1; d * d <= P; d++)
        if (P % d == 0)
          py = d;
      if (strips)
        py = P;
      const int px = P / py;
      if (opkind == 2 && 6 % P) continue; /* whole faces per rank */
      const int gnx = opkind == 2 ? cube[0] : m == 0 ? weak[0] * px : strong[0];
      const int gny = opkind == 2 ? cube[0] : m == 0 ? weak[1] * py : strong[1];
      const int nz = opkind == 2 ? cube[1] : m == 0 ? weak[2] : strong[2];
      MPI_Comm comm;
      MPI_Comm_split(MPI_COMM_WORLD, wrank < P ? 0 : MPI_UNDEFINED, wrank, &comm);
      if (wrank < P) {
        pkrylov_context ctx;
        CHECK(pkrylov_context_create(backend, &ctx));
        CHECK(pkrylov_context_set_comm(ctx, comm));
        pkrylov_operator A;
        pkrylov_precond M;
        pkrylov_grid g = NULL;
        if (opkind == 0) {
          pkrylov_thinshell_params p;
          CHECK(pkrylov_thinshell_params_default(gnx, gny, nz, &p));
          CHECK(pkrylov_operator_create_thinshell_dist(ctx, &p, px, py, &A));
        } else {
          /* the tiles of rank r: grid: the block (r mod px, r / px) of TX x TY tiles of the px TX x py TY
             tiles; cube: faces r (6/P) ... (r+1) (6/P) - 1, one tile each */
          const int cubeop = opkind == 2;
          const int ntx = cubeop ? 1 : px * tiles_pr[0], nty = cubeop ? 1 : py * tiles_pr[1];
          const int snx = gnx / ntx, sny = gny / nty;
          if (!cubeop && (gnx % ntx || gny % nty)) die(wrank, "the grid is not a whole number of tiles", 2);
          if (!G.c[0] || G.nx != gnx || G.ny != gny || G.nz != nz || G.nf != (cubeop ? 6 : 1))
          {
            global_free(&G);
            CHECK(global_make(&G, cubeop ? 6 : 1, gnx, gny, nz));
          }
          int32_t tl[64];
          int nt = 0;
          if (cubeop) {
            for (int f = wrank * (6 / P); f < (wrank + 1) * (6 / P); f++) tl[nt++] = f;
          } else {
            const int bx = wrank % px, by = wrank / px;
            for (int ty = 0; ty < tiles_pr[1] && nt < 64; ty++)
              for (int tx = 0; tx < tiles_pr[0] && nt < 64; tx++)
                tl[nt++] = (bx * tiles_pr[0] + tx) + ntx * (by * tiles_pr[1] + ty);
          }
          CHECK(grid_operator(ctx, &G, snx, sny, ntx, nty, nt, tl, &g, &A));
        }
        CHECK(pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M));
        int64_t n;
        CHECK(pkrylov_operator_get_info(A, &n, NULL, NULL, NULL, NULL, NULL));
        double *b = malloc(sizeof(double) * (size_t)n), *x = malloc(sizeof(double) * (size_t)n);
        if (!b || !x)
          die(wrank, "malloc", PKRYLOV_ERR_OUT_OF_MEMORY);
        for (int64_t i = 0; i < n; i++)
          b[i] = 1.0 + 0.5 * sin(0.001 * (double)(i + wrank * 7919));
        int npaths = 1;
        const char *paths[2] = {P > 1 ? "host" : "single", NULL};
#ifdef PKB_HAVE_TIMERS
        if (P > 1 && backend == PKRYLOV_BACKEND_CUDA) {
          void *nc = NULL;
          CHECK(pkrylov_context_set_option(ctx, "dist.nccl", "1"));
          CHECK(pk_mpi_nccl(ctx, &nc)); /* collective: creates the communicator */
          if (nc)
            paths[0] = "nccl", paths[1] = "host", npaths = nccl_only ? 1 : 2;
          else if (wrank == 0)
            printf("  (%d ranks: no NCCL communicator: host-staged path only)\n", P);
        }
#endif
        for (int t = 0; t < ntypes; t++)
          for (int q = 0; q < npaths * (reproducible ? 2 : 1); q++) {
            const int pa = q % npaths, rp = q / npaths; /* the default mode first, then reproducible */
            CHECK(pkrylov_context_set_reproducible(ctx, rp));
            CHECK(pkrylov_context_set_option(ctx, "dist.nccl", strcmp(paths[pa], "nccl") ? "0" : "1"));
            pkrylov_solver s;
            CHECK(pkrylov_solver_create(ctx, types[t], A, M, &s));
            CHECK(pkrylov_solver_set_tolerances(s, 1e-300, 0.0)); /* never reached: maxit iterations */
            if (types[t] == PKRYLOV_SOLVER_PIPECG) /* every 50 (the default before the automatic rule, with
                                                      which docs/performance.md's figures were measured) */
              CHECK(pkrylov_solver_set_residual_replacement(s, 50));
            if (types[t] == PKRYLOV_SOLVER_PIPEGMRES)
              CHECK(pkrylov_solver_set_restart(s, 30));
            int32_t its = 0, its2 = 0;
            timed_solve(comm, s, 10, b, x, wrank, &its); /* warm-up (graphs, first touch) */
            double t1 = INFINITY, t2 = INFINITY;
            for (int r = 0; r < reps; r++) {
              t1 = fmin(t1, timed_solve(comm, s, 10, b, x, wrank, &its));
              t2 = fmin(t2, timed_solve(comm, s, 10 + iters, b, x, wrank, &its2));
            }
            record R = {mode_names[m], tnames[t], paths[pa], P, px, py, gnx, gny, nz, its2 - its, 0, 0, 0, 0, 0, rp, 0};
            R.t_iter = (t2 - t1) / (double)(its2 - its > 0 ? its2 - its : 1);
            if (its != 10 || its2 != 10 + iters) { /* a breakdown or stagnation stop: no valid difference */
              if (wrank == 0)
                printf("  (note: the solves stopped after %d and %d iterations: no time per iteration)\n", its,
                       its2);
              R.t_iter = NAN;
            }
#ifdef PKB_HAVE_TIMERS
            if (instrument && P > 1) {
              CHECK(pkrylov_context_set_option(ctx, "dist.instrument", "1"));
              double h1, r1, h2, r2;
              pk_cuda_dist_timers(NULL, NULL, 1);
              const double u1 = timed_solve(comm, s, 10, b, x, wrank, &its);
              pk_cuda_dist_timers(&h1, &r1, 1);
              const double u2 = timed_solve(comm, s, 10 + iters, b, x, wrank, &its2);
              pk_cuda_dist_timers(&h2, &r2, 1);
              CHECK(pkrylov_context_set_option(ctx, "dist.instrument", "0"));
              double loc[2] = {(h2 - h1), (r2 - r1)}, mx[2];
              MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, comm);
              const double k = (double)(its2 - its > 0 ? its2 - its : 1);
              R.t_instr = (u2 - u1) / k;
              R.halo = mx[0] / k;
              R.reduce = mx[1] / k;
            }
#endif
            if (wrank == 0) { /* a line now (a run cut short keeps what it measured), the table at the end */
              double e = NAN;
              for (int j = 0; j < nrec; j++) {
                if (recs[j].ranks == 1 && recs[j].repro == R.repro && !strcmp(recs[j].mode, R.mode) &&
                    !strcmp(recs[j].solver, R.solver))
                  e = !strncmp(R.mode, "weak", 4) ? recs[j].t_iter / R.t_iter : recs[j].t_iter / (P * R.t_iter);
                if (R.repro && !recs[j].repro && recs[j].ranks == P && !strcmp(recs[j].mode, R.mode) &&
                    !strcmp(recs[j].solver, R.solver) && !strcmp(recs[j].path, R.path))
                  R.repro_ratio = R.t_iter / recs[j].t_iter;
              }
              printf("  %s %s %s%s %d ranks: %.1f us/iter, efficiency %.1f%%, instrumented %.1f us/iter (halo "
                     "%.1f, "
                     "sums %.1f)",
                     R.mode, R.solver, R.path, R.repro ? " reproducible" : "", P, 1e6 * R.t_iter, 100.0 * e,
                     1e6 * R.t_instr, 1e6 * R.halo, 1e6 * R.reduce);
              if (R.repro)
                printf(", %.2f x the default mode's time", R.repro_ratio);
              printf("\n");
              fflush(stdout);
              if (nrec < (int)(sizeof recs / sizeof recs[0]))
                recs[nrec++] = R;
            }
            pkrylov_solver_destroy(&s);
          }
        free(b), free(x);
        pkrylov_precond_destroy(&M);
        pkrylov_operator_destroy(&A);
        pkrylov_grid_destroy(&g);
        pkrylov_context_destroy(&ctx);
        MPI_Comm_free(&comm);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  global_free(&G);
  if (wrank == 0) {
    /* efficiencies against the one-rank run of the same mode and solver */
    for (int i = 0; i < nrec; i++) {
      recs[i].eff = NAN;
      for (int j = 0; j < nrec; j++)
        if (recs[j].ranks == 1 && recs[j].repro == recs[i].repro && !strcmp(recs[j].mode, recs[i].mode) &&
            !strcmp(recs[j].solver, recs[i].solver))
          recs[i].eff = !strncmp(recs[i].mode, "weak", 4) ? recs[j].t_iter / recs[i].t_iter
                                                      : recs[j].t_iter / (recs[i].ranks * recs[i].t_iter);
    }
    printf("\n%-6s %-13s %-6s %5s %5s %5s %16s %10s %7s %11s %9s %9s %7s %7s\n", "mode", "solver", "path",
           "repro", "ranks", "pxpy", "grid", "us/iter", "eff", "instr us/it", "halo us", "reduce us", "comm %",
           "hidden");
    for (int i = 0; i < nrec; i++) {
      const record *R = &recs[i];
      char g[64], d[16];
      snprintf(g, sizeof g, "%dx%dx%d", R->gnx, R->gny, R->nz);
      snprintf(d, sizeof d, "%dx%d", R->px, R->py);
      printf("%-6s %-13s %-6s %5d %5d %5s %16s %10.1f %6.1f%%", R->mode, R->solver, R->path, R->repro, R->ranks,
             d, g, 1e6 * R->t_iter, 100.0 * R->eff);
      if (R->t_instr > 0) {
        const double comm = R->halo + R->reduce;
        printf(" %11.1f %9.1f %9.1f %6.1f%% %6.0f%%\n", 1e6 * R->t_instr, 1e6 * R->halo, 1e6 * R->reduce,
               100.0 * comm / R->t_instr, 100.0 * (R->t_instr - R->t_iter) / comm);
      } else {
        printf(" %11s %9s %9s %7s %7s\n", "-", "-", "-", "-", "-");
      }
    }
    FILE *f = fopen(json, "w");
    if (f) {
      fprintf(f,
              "{\n  \"benchmark\": \"pkrylov-bench-mpi\",\n  \"backend\": \"%s\",\n  \"device\": \"%s\",\n",
              backend == PKRYLOV_BACKEND_CUDA ? "cuda" : "cpu", device);
      fprintf(f,
              "  \"launched_ranks\": %d,\n  \"iterations_timed\": %d,\n  \"repetitions\": %d,\n  "
              "\"records\": [\n",
              wsize, iters, reps);
      for (int i = 0; i < nrec; i++) {
        const record *R = &recs[i];
        char b1[40], b2[40];
        fprintf(f,
                "    {\"mode\": \"%s\", \"solver\": \"%s\", \"path\": \"%s\", \"ranks\": %d, \"px\": %d, "
                "\"py\": %d, \"grid\": "
                "[%d, %d, %d], "
                "\"us_per_iter\": %s, \"efficiency\": %s, \"instrumented_us_per_iter\": %.3f, "
                "\"halo_us_per_iter\": %.3f, \"reduce_us_per_iter\": %.3f, \"reproducible\": %d, "
                "\"repro_ratio\": %.4f}%s\n",
                R->mode, R->solver, R->path, R->ranks, R->px, R->py, R->gnx, R->gny, R->nz,
                jnum(b1, 1e6 * R->t_iter, 3), jnum(b2, R->eff, 4), 1e6 * R->t_instr, 1e6 * R->halo,
                1e6 * R->reduce, R->repro, R->repro_ratio, i + 1 < nrec ? "," : "");
      }
      fprintf(f, "  ]\n}\n");
      fclose(f);
      printf("\nrecords written to %s\n", json);
    }
  }
  MPI_Finalize();
  return 0;
}
