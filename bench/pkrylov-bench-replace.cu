/**
 * @file pkrylov-bench-replace.cu
 * @brief What pipelined CG's residual replacement costs in a model's use: repeated solves with one solver
 *        object (a model's time steps), time to solution on the GPU against CG.
 *
 *   pkrylov-bench-replace [--sizes LIST] [--rtol R] [--solves S] [--json FILE]
 *
 * LIST: comma-separated NXxNYxNZ thin shells (default 128x128x64,256x256x128), column preconditioner, fp64,
 * b = A * ones, x0 = 0, rtol R (default 1e-10). For each of CG, pipelined CG with the automatic
 * replacement (PKRYLOV_REPLACE_AUTO, the default), every 50 iterations and never, one solver makes 1 + S
 * solves (default S = 5) of b and x in device memory (no transfer is timed): the first is reported on its
 * own (it also captures the CUDA graphs and, with the automatic rule, takes the pass over the operator that
 * gives ||A||), the median of the others is the time to solution. Iterations, replacements and the
 * relative residual ||b - A x|| / ||b|| recomputed by the library are those of the last solve. The pipelined
 * rows are also given as a ratio to CG's time and per iteration. Skips (exit 77) without a GPU.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pkrylov.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(pkrylov_context ctx, const char *what) {
  const char *msg = "";
  if (ctx) pkrylov_context_get_last_error(ctx, nullptr, &msg);
  else msg = pkrylov_last_error_message();
  fprintf(stderr, "pkrylov-bench-replace: %s: %s\n", what, msg ? msg : "");
  exit(1);
}

struct Config {
  const char *name;
  int32_t solver, replace;
};

struct Row {
  std::string problem, config;
  double first_s, median_s, rel_residual;
  int iterations, replacements, converged;
};

} // namespace

int main(int argc, char **argv) {
  std::string sizes = "128x128x64,256x256x128", json;
  double rtol = 1e-10;
  int S = 5;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--sizes" && has) sizes = argv[++i];
    else if (a == "--rtol" && has) rtol = atof(argv[++i]);
    else if (a == "--solves" && has) S = atoi(argv[++i]);
    else if (a == "--json" && has) json = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--sizes NXxNYxNZ,...] [--rtol R] [--solves S] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  if (S < 1 || !(rtol > 0)) {
    fprintf(stderr, "pkrylov-bench-replace: --solves must be >= 1 and --rtol > 0\n");
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    fprintf(stderr, "pkrylov-bench-replace: no GPU: skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  pkrylov_context ctx = nullptr;
  if (pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &ctx)) die(ctx, "context");
  const Config cfgs[] = {{"cg", PKRYLOV_SOLVER_CG, 0},
                         {"pipecg auto", PKRYLOV_SOLVER_PIPECG, PKRYLOV_REPLACE_AUTO},
                         {"pipecg every 50", PKRYLOV_SOLVER_PIPECG, 50},
                         {"pipecg never", PKRYLOV_SOLVER_PIPECG, 0}};
  std::vector<Row> rows;
  printf("pkrylov residual-replacement benchmark: %s, rtol %.0e, 1 + %d solves per solver\n", prop.name, rtol, S);
  printf("%-12s %-16s %6s %5s %10s %10s %9s %8s %9s\n", "problem", "solver", "its", "repl", "first ms",
         "median ms", "us/it", "vs CG", "rel res");
  size_t pos = 0;
  while (pos <= sizes.size()) {
    const size_t end = std::min(sizes.find(',', pos), sizes.size());
    const std::string tok = sizes.substr(pos, end - pos);
    pos = end + 1;
    int nx, ny, nz;
    if (sscanf(tok.c_str(), "%dx%dx%d", &nx, &ny, &nz) != 3 || nx < 1 || ny < 1 || nz < 1) {
      fprintf(stderr, "pkrylov-bench-replace: bad size '%s'\n", tok.c_str());
      return 2;
    }
    pkrylov_thinshell_params p;
    pkrylov_operator A = nullptr;
    pkrylov_precond M = nullptr;
    if (pkrylov_thinshell_params_default(nx, ny, nz, &p) || pkrylov_operator_create_thinshell(ctx, &p, &A))
      die(ctx, "operator");
    if (pkrylov_precond_create(ctx, A, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO, &M)) die(ctx, "precond");
    const size_t n = (size_t)nx * ny * nz, bytes = sizeof(double) * n;
    std::vector<double> ones(n, 1.0);
    double *db = nullptr, *dx = nullptr;
    if (cudaMalloc(&db, bytes) != cudaSuccess || cudaMalloc(&dx, bytes) != cudaSuccess) {
      fprintf(stderr, "pkrylov-bench-replace: out of device memory\n");
      return 1;
    }
    cudaMemcpy(dx, ones.data(), bytes, cudaMemcpyHostToDevice);
    if (pkrylov_operator_apply(A, PKRYLOV_MEM_DEVICE, dx, db)) die(ctx, "b = A * ones");
    double cg_median = 0.0;
    for (const Config &c : cfgs) {
      pkrylov_solver s = nullptr;
      if (pkrylov_solver_create(ctx, c.solver, A, M, &s)) die(ctx, "solver");
      if (pkrylov_solver_set_tolerances(s, rtol, 0.0) || pkrylov_solver_set_max_iterations(s, 5000))
        die(ctx, "settings");
      if (c.solver == PKRYLOV_SOLVER_PIPECG && pkrylov_solver_set_residual_replacement(s, c.replace))
        die(ctx, "replacement");
      std::vector<double> t;
      pkrylov_result res{};
      for (int k = 0; k <= S; k++) {
        cudaMemset(dx, 0, bytes);
        cudaDeviceSynchronize();
        const double t0 = now();
        if (pkrylov_solver_solve(s, PKRYLOV_MEM_DEVICE, db, dx)) die(ctx, "solve");
        cudaDeviceSynchronize();
        t.push_back(now() - t0);
        if (pkrylov_solver_get_result(s, &res)) die(ctx, "result");
      }
      pkrylov_solver_destroy(&s);
      std::vector<double> rest(t.begin() + 1, t.end());
      std::sort(rest.begin(), rest.end());
      const double med = rest.size() % 2 ? rest[rest.size() / 2]
                                         : 0.5 * (rest[rest.size() / 2 - 1] + rest[rest.size() / 2]);
      if (c.solver == PKRYLOV_SOLVER_CG) cg_median = med;
      rows.push_back({tok, c.name, t[0], med, res.rel_residual, res.iterations, res.residual_replacements,
                      res.converged});
      printf("%-12s %-16s %6d %5d %10.3f %10.3f %9.2f %7.3fx %9.2e%s\n", tok.c_str(), c.name, res.iterations,
             res.residual_replacements, 1e3 * t[0], 1e3 * med, res.iterations ? 1e6 * med / res.iterations : 0.0,
             cg_median > 0 ? med / cg_median : 0.0, res.rel_residual, res.converged ? "" : "  NOT CONVERGED");
    }
    cudaFree(db), cudaFree(dx);
    pkrylov_precond_destroy(&M);
    pkrylov_operator_destroy(&A);
  }
  if (!json.empty()) {
    FILE *f = fopen(json.c_str(), "w");
    if (!f) {
      fprintf(stderr, "pkrylov-bench-replace: cannot write %s\n", json.c_str());
      return 1;
    }
    fprintf(f, "{\"benchmark\":\"pkrylov-bench-replace\",\"device\":\"%s\",\"rtol\":%.3g,\"solves\":%d,\"rows\":[", prop.name,
            rtol, S);
    for (size_t i = 0; i < rows.size(); i++) {
      const Row &r = rows[i];
      fprintf(f,
              "%s{\"problem\":\"%s\",\"solver\":\"%s\",\"iterations\":%d,\"replacements\":%d,\"converged\":%s,"
              "\"first_s\":%.6e,\"median_s\":%.6e,\"rel_residual\":%.3e}",
              i ? "," : "", r.problem.c_str(), r.config.c_str(), r.iterations, r.replacements,
              r.converged ? "true" : "false", r.first_s, r.median_s, r.rel_residual);
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
  pkrylov_context_destroy(&ctx);
  return 0;
}
