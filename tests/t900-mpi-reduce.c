/**
 * @file t900-mpi-reduce.c
 * @brief Contexts on a communicator and the reduction layer under MPI (run with 1 to 4 ranks): rank
 *        queries on a split communicator (never MPI_COMM_WORLD by itself), the errors of
 *        pkrylov_context_set_comm, blocking and split-phase global sums against closed forms, and the
 *        exact sums of reproducible mode: bitwise the same for every split of the vectors over the ranks
 *        and threads, and within one rounding of an independent exact reference (__int128 fixed point); the
 *        default thread count of a rank: its share of its node's cores, computed here from the ranks'
 *        affinity masks; the communication table's own checks (a table of another build, a failing
 *        operation's text).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <sched.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "pk_comm.h"
#include "pk_impl.h"
#include "pk_mpi_test.h"

/** A communicator that is not MPI_COMM_WORLD: the ranks split by parity (size 1 or 2 with <= 4 ranks). */
static MPI_Comm parity_comm(void) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
  return c;
}

PK_TEST_CASE(comm_and_rank_info) {
  PK_EXPECT(pkrylov_has_mpi() == 1, "built with MPI");
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t r = -1, s = -1;
  PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &s));
  PK_EXPECT(r == 0 && s == 1, "no communicator: rank %d of %d", r, s);
  MPI_Comm c = parity_comm();
  int cr, cs;
  MPI_Comm_rank(c, &cr);
  MPI_Comm_size(c, &cs);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, c));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &s));
  PK_EXPECT(r == cr && s == cs, "rank %d of %d, expected %d of %d", r, s, cr, cs);
  MPI_Comm_free(&c); /* the library keeps its own duplicate */
  double v = 1.0;
  PK_REQUIRE_OK(ctx, pk_allreduce_sum(ctx, &v, 1));
  PK_EXPECT(v == (double)cs, "sum of ones over the split communicator = %g, expected %d", v, cs);
  pkrylov_context_destroy(&ctx);
  /* the Fortran handle */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm_f(ctx, (int32_t)MPI_Comm_c2f(MPI_COMM_WORLD)));
  int wr, ws;
  pk_mpi_world(&wr, &ws);
  PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &s));
  PK_EXPECT(r == wr && s == ws, "Fortran handle: rank %d of %d, expected %d of %d", r, s, wr, ws);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(set_comm_errors) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_NULL), PKRYLOV_ERR_INVALID_VALUE);
  PK_EXPECT(pk_test_msg_has(ctx, "'comm'"), "names the argument");
  PK_EXPECT_CODE(NULL, pkrylov_context_set_comm(NULL, MPI_COMM_WORLD), PKRYLOV_ERR_NULL_POINTER);
  PK_EXPECT_CODE(ctx, pkrylov_context_set_reproducible(ctx, 2), PKRYLOV_ERR_INVALID_VALUE);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(pk_test_msg_has(ctx, "once"), "says it is set already");
  pkrylov_context_destroy(&ctx);
  /* objects first, communicator later: refused */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pkrylov_thinshell_params p;
  pkrylov_operator A;
  PK_REQUIRE_OK(NULL, pkrylov_thinshell_params_default(4, 4, 3, &p));
  PK_REQUIRE_OK(ctx, pkrylov_operator_create_thinshell(ctx, &p, &A));
  PK_EXPECT_CODE(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD), PKRYLOV_ERR_INVALID_STATE);
  PK_EXPECT(pk_test_msg_has(ctx, "before creating"), "says why");
  pkrylov_operator_destroy(&A);
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/* a communication table whose size query fails with status 42 (no communication: every rank alone) */
static int fake_size(void *comm, int *size) {
  (void)comm, (void)size;
  return 42;
}
static void fake_error_string(int rc, char *buf, int len) { snprintf(buf, (size_t)len, "fake failure %d", rc); }

PK_TEST_CASE(comm_table_checks) {
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  pk_comm_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.version = PK_COMM_OPS_VERSION + 1; /* libpkrylov_mpi of another build */
  ops.name = "fake";
  ops.size = fake_size;
  ops.error_string = fake_error_string;
  PK_EXPECT_CODE(ctx, pk_comm_attach(ctx, "pkrylov_context_set_comm", &ops, NULL, 0, NULL), PKRYLOV_ERR_INTERNAL);
  PK_EXPECT(pk_test_msg_has(ctx, "different builds"), "names the mismatch");
  ops.version = PK_COMM_OPS_VERSION; /* a failing operation: PKRYLOV_ERR_BACKEND with the table's text */
  PK_EXPECT_CODE(ctx, pk_comm_attach(ctx, "pkrylov_context_set_comm", &ops, NULL, 0, NULL), PKRYLOV_ERR_BACKEND);
  PK_EXPECT(pk_test_msg_has(ctx, "MPI_Comm_size failed: fake error 42 (fake failure 42)"), "the table's text");
  PK_EXPECT(pk_test_msg_has(ctx, "pkrylov_context_set_comm"), "raised as the public call");
  int32_t r = -1, n = -1;
  PK_REQUIRE_OK(ctx, pkrylov_context_get_rank_info(ctx, &r, &n));
  PK_EXPECT(r == 0 && n == 1, "the context stays single-rank (%d of %d)", r, n);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD)); /* and still takes a communicator */
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

PK_TEST_CASE(allreduce_sums) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  /* small integers: every order of summation gives the exact closed form */
  double v[3] = {rank + 1.0, 0.5 * (rank + 1.0) * (rank + 1.0), -(double)rank};
  const double want[3] = {size * (size + 1) / 2.0, 0.5 * size * (size + 1) * (2 * size + 1) / 6.0,
                          -size * (size - 1) / 2.0};
  PK_REQUIRE_OK(ctx, pk_allreduce_sum(ctx, v, 3));
  for (int j = 0; j < 3; j++) PK_EXPECT(v[j] == want[j], "blocking sum %d: %g, expected %g", j, v[j], want[j]);
  double w[3] = {rank + 1.0, 0.5 * (rank + 1.0) * (rank + 1.0), -(double)rank};
  pk_reduce_request req;
  PK_REQUIRE_OK(ctx, pk_allreduce_begin(ctx, w, 3, &req));
  PK_REQUIRE_OK(ctx, pk_allreduce_end(ctx, &req));
  for (int j = 0; j < 3; j++) PK_EXPECT(w[j] == want[j], "split sum %d: %g, expected %g", j, w[j], want[j]);
  PK_EXPECT_CODE(ctx, pk_allreduce_end(ctx, &req), PKRYLOV_ERR_INTERNAL); /* nothing in flight */
  pkrylov_context_destroy(&ctx);
  PK_TEST_END();
}

/** Deterministic random values m 2^e with |m| < 2^15, e in [-20, 20] (exactly known products). */
static void wide_values(int64_t n, uint64_t seed, double *v) {
  uint64_t st = seed;
  for (int64_t i = 0; i < n; i++) {
    double m = floor(pk_test_rand(&st) * 32768.0);
    int e = (int)floor(pk_test_rand(&st) * 20.5);
    v[i] = ldexp(m, e);
  }
}

/** Independent exact reference of sum x[i] y[i] (wet rows only): __int128 fixed point at 2^-40. */
static double exact_dot(int64_t n, const double *x, const double *y, const uint8_t *wet) {
  __int128 acc = 0;
  for (int64_t i = 0; i < n; i++) {
    if (wet && !wet[i]) continue;
    const double p = x[i] * y[i]; /* exact: < 2^30 significant bits */
    acc += (__int128)ldexp(p, 40);
  }
  const int neg = acc < 0;
  if (neg) acc = -acc;
  /* round to double by hand: top 64 bits to long double, then to double */
  long double r = 0.0L;
  for (int sh = 120; sh >= 0; sh -= 30) r = r * 1073741824.0L + (long double)(int64_t)((acc >> sh) & 0x3fffffff);
  return (neg ? -1.0 : 1.0) * (double)ldexpl(r, -40);
}

PK_TEST_CASE(exact_dots_bitwise) {
  int rank, size;
  pk_mpi_world(&rank, &size);
  const int64_t N = 20011;
  double *x = malloc(sizeof(double) * N), *y = malloc(sizeof(double) * N);
  uint8_t *wet = malloc((size_t)N);
  if (!x || !y || !wet) return PK_FAIL;
  wide_values(N, 11, x);
  wide_values(N, 12, y);
  for (int64_t i = 0; i < N; i++) wet[i] = (uint8_t)(i % 7 != 3);
  /* cancellation: big products that cancel exactly, so a naive sum loses the small ones */
  x[5] = ldexp(1.0, 20) * 32767, y[5] = ldexp(1.0, 20);
  x[N - 9] = -x[5], y[N - 9] = y[5];
  const double ref[3] = {exact_dot(N, x, y, NULL), exact_dot(N, x, x, NULL), exact_dot(N, x, y, wet)};

  /* single process, whole vectors, 1 and 2 threads: the local reproducible sums */
  double one[2][3];
  for (int t = 0; t < 2; t++) {
    pkrylov_context c1;
    PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &c1));
    PK_REQUIRE_OK(c1, pkrylov_context_set_reproducible(c1, 1));
    PK_REQUIRE_OK(c1, pkrylov_context_set_num_threads(c1, t + 1));
    PK_REQUIRE_OK(c1, pk_allreduce_dots(c1, one[t], 2, N, (const double *[]){x, x}, (const double *[]){y, x}, NULL));
    PK_REQUIRE_OK(c1, pk_allreduce_dots(c1, one[t] + 2, 1, N, (const double *[]){x}, (const double *[]){y}, wet));
    pkrylov_context_destroy(&c1);
  }
  for (int j = 0; j < 3; j++) {
    PK_EXPECT(memcmp(&one[0][j], &one[1][j], sizeof(double)) == 0, "threads: %.17g vs %.17g", one[0][j], one[1][j]);
    const double ulp = nextafter(fabs(ref[j]), INFINITY) - fabs(ref[j]);
    PK_EXPECT(fabs(one[0][j] - ref[j]) <= ulp, "sum %d = %.17g, exact reference %.17g", j, one[0][j], ref[j]);
  }
  /* distributed: uneven contiguous slices (rank r gets a share growing with r), split-phase and blocking */
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 1));
  const int64_t tot = (int64_t)size * (size + 1) / 2;
  int64_t lo = 0;
  for (int r = 0; r < rank; r++) lo += N * (r + 1) / tot;
  const int64_t hi = rank == size - 1 ? N : lo + N * (rank + 1) / tot, m = hi - lo;
  double d[3] = {0, 0, 0};
  pk_reduce_request req;
  PK_REQUIRE_OK(ctx, pk_allreduce_dots_begin(ctx, d, 2, m, (const double *[]){x + lo, x + lo},
                                             (const double *[]){y + lo, x + lo}, NULL, &req));
  PK_REQUIRE_OK(ctx, pk_allreduce_end(ctx, &req));
  PK_REQUIRE_OK(ctx, pk_allreduce_dots(ctx, d + 2, 1, m, (const double *[]){x + lo}, (const double *[]){y + lo},
                                       wet + lo));
  for (int j = 0; j < 3; j++)
    PK_EXPECT(memcmp(&d[j], &one[0][j], sizeof(double)) == 0, "sum %d on %d ranks %.17g, on one %.17g", j, size,
              d[j], one[0][j]);
  /* a NaN anywhere gives NaN everywhere */
  if (rank == size - 1) x[N - 1] = NAN;
  PK_REQUIRE_OK(ctx, pk_allreduce_dots(ctx, d, 1, m, (const double *[]){x + lo}, (const double *[]){y + lo}, NULL));
  PK_EXPECT(isnan(d[0]), "NaN term: %g", d[0]);
  /* default mode: the local values are summed as they are */
  PK_REQUIRE_OK(ctx, pkrylov_context_set_reproducible(ctx, 0));
  d[0] = 1.0;
  PK_REQUIRE_OK(ctx, pk_allreduce_dots(ctx, d, 1, m, (const double *[]){x + lo}, (const double *[]){y + lo}, NULL));
  PK_EXPECT(d[0] == size, "default mode sums the given local values: %g", d[0]);
  pkrylov_context_destroy(&ctx);
  free(x);
  free(y);
  free(wet);
  PK_TEST_END();
}

/**
 * The default thread count on a communicator: the CPUs of this rank's affinity mask divided by the ranks of
 * the communicator on this node whose masks overlap it (gathered here over MPI_COMM_TYPE_SHARED), at least 1.
 * OpenMP's count, which caps the default, is lifted for the test (omp_set_num_threads); a count set before
 * the communicator is kept.
 */
PK_TEST_CASE(default_threads_node_share) {
#ifndef _OPENMP
  return PK_SKIP;
#else
  const int omp_before = omp_get_max_threads();
  omp_set_num_threads(PKRYLOV_MAX_THREADS);
  int rank, size;
  pk_mpi_world(&rank, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int nlocal = 1;
  MPI_Comm_size(node, &nlocal);
  cpu_set_t mine, *all = malloc(sizeof(cpu_set_t) * (size_t)nlocal);
  PK_REQUIRE(all != NULL, "malloc");
  CPU_ZERO(&mine);
  PK_REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0, "sched_getaffinity");
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node);
  MPI_Comm_free(&node);
  int sharing = 0, unbound = 1;
  for (int r = 0; r < nlocal; r++) {
    cpu_set_t both;
    CPU_AND(&both, &mine, &all[r]);
    sharing += CPU_COUNT(&both) > 0;
    unbound = unbound && CPU_EQUAL(&mine, &all[r]);
  }
  free(all);
  const int cpus = CPU_COUNT(&mine), expected = cpus / sharing > 1 ? cpus / sharing : 1;
  if (unbound) /* ranks that are not bound: the node's cores divided by its ranks, as the header says */
    PK_EXPECT(expected == (cpus / nlocal > 1 ? cpus / nlocal : 1), "%d CPUs, %d ranks", cpus, nlocal);
  pkrylov_context ctx;
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  int32_t n = -1;
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == cpus, "no communicator yet: %d threads, %d CPUs in the mask", (int)n, cpus);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == expected, "rank %d: %d threads, expected %d (%d CPUs shared with %d of the node's %d ranks)",
            rank, (int)n, expected, cpus, sharing, nlocal);
  pkrylov_context_destroy(&ctx);
  /* a count set before the communicator stays */
  PK_REQUIRE_OK(NULL, pkrylov_context_create(PKRYLOV_BACKEND_CPU, &ctx));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 3));
  PK_REQUIRE_OK(ctx, pkrylov_context_set_comm(ctx, MPI_COMM_WORLD));
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == 3, "set 3 before the communicator: %d", (int)n);
  PK_REQUIRE_OK(ctx, pkrylov_context_set_num_threads(ctx, 0)); /* back to the rank's share */
  PK_REQUIRE_OK(ctx, pkrylov_context_get_num_threads(ctx, &n));
  PK_EXPECT(n == expected, "default again: %d, expected %d", (int)n, expected);
  pkrylov_context_destroy(&ctx);
  omp_set_num_threads(omp_before);
  PK_TEST_END();
#endif
}

PK_MPI_TEST_MAIN(PK_TEST_ENTRY(comm_and_rank_info), PK_TEST_ENTRY(set_comm_errors), PK_TEST_ENTRY(comm_table_checks),
                 PK_TEST_ENTRY(allreduce_sums), PK_TEST_ENTRY(exact_dots_bitwise),
                 PK_TEST_ENTRY(default_threads_node_share))
