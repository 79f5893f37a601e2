/**
 * @file pkrylov-bench-gpu.cu
 * @brief GPU benchmark: pkrylov (CUDA and CPU backends) against preconditioned CG written with the vendor
 *        libraries (cuSPARSE + cuBLAS), against the GPU's copy bandwidth measured in the same run.
 *
 *   pkrylov-bench-gpu [--problems LIST] [--matrices DIR] [--iters K] [--repeat R] [--cpu-iters K]
 *                     [--cpu-repeat R] [--maxit N] [--copy-gib G] [--no-cpu] [--no-tol] [--no-gpu]
 *                     [--no-pkrylov-cuda] [--replace auto|K] [--json FILE]
 *
 * LIST is a comma-separated list of: all (default), ts (the four thin-shell sizes), lap (the four CSR
 * Laplacians), lap27 (the 27-point CSR Laplacian on 128^3: long rows), mtx (the SPD matrices of
 * --matrices), ts:NXxNYxNZ, lap:N, lap27:N, mtx:NAME (file NAME.mtx).
 * Problems that do not fit in GPU memory are skipped. --no-gpu runs only the pkrylov CPU rows (to check
 * the program on a machine without a GPU); --no-pkrylov-cuda leaves out the pkrylov CUDA rows (no CUDA
 * context is created), --no-cpu the pkrylov CPU rows, --no-tol the solves to rtol 1e-8.
 *
 * Timing (as bench/pkrylov-bench-cpu.c): the time per iteration is the difference of two solves with a
 * fixed number of iterations, 10 and 10 + K (a tolerance that is never reached, rtol = 1e-300), divided by
 * K, best of R. Set-up, the initial residual and the final residual cancel out. GPU solves are timed
 * with a host clock after cudaDeviceSynchronize(); pkrylov CUDA solves take b and x as DEVICE pointers, so
 * no host-device transfer is timed. Residual replacement is switched off (pkrylov; --replace auto or K puts
 * pipelined CG on the automatic rule or every K iterations, to time what they cost) so the byte count of
 * every iteration is the same. Each row also reports the iterations to rtol 1e-8 (negative: not reached
 * within --maxit), from a separate solve; for the vendor baseline the true residual ||b - A x|| / ||b||
 * of that solve is recomputed, as a check that the baseline solves the problem. Bandwidth fractions are
 * of the faster of two device-to-device copies over >= 1 GiB (a copy kernel and cudaMemcpy; read + write
 * bytes counted, best of 10), measured at the start of the run.
 *
 * THE VENDOR BASELINE is preconditioned CG as a user writes it with cuSPARSE and cuBLAS, everything on the
 * legacy default stream, cuBLAS in CUBLAS_POINTER_MODE_HOST (every dot product and norm returns its value
 * to the host, i.e. one host synchronisation each). One iteration (x, r, z, p, q device vectors):
 *     cusparseSpMV           q = A p                (CSR, int32 indices, CUSPARSE_SPMV_CSR_ALG1)
 *     cublasDdot             pq = (p, q)            -> host (sync 1)
 *     cublasDaxpy            x = x + alpha p
 *     cublasDaxpy            r = r - alpha q
 *     cublasDnrm2            ||r||                  -> host (sync 2), convergence test
 *     preconditioner         z = M^-1 r
 *       column: cudaMemcpyAsync x3 (fresh copies of dl, d, du: the solver may overwrite them) and
 *               cudaMemcpyAsync z = r, then cusparseDgtsvInterleavedBatch(algo 0 = Thomas) on z
 *       jacobi: cublasDdgmm   z = diag(1/a_ii) r
 *     cublasDdot             rho = (r, z)           -> host (sync 3)
 *     cublasDscal, cublasDaxpy   p = z + beta p
 * Plain CG (precond none) drops the preconditioner and the norm: rho = (r, r) is both (2 host syncs).
 * The column preconditioner uses gtsvInterleavedBatch, not gtsv2StridedBatch, because its interleaved
 * layout (element k of all systems contiguous) IS the model's storage order (cell = column + ncols * k):
 * no transposition is needed, where the strided batch would need a kfast-ordered copy of r and z (a
 * gather and a scatter per application) that a user would have to write as own kernels. Thomas (algo 0)
 * is the documented fastest choice for diagonally dominant systems (these columns are SPD). The copies
 * of dl, d, du follow the documentation (the arrays are in/out); which of them this cuSPARSE actually
 * modifies is checked once per problem and printed, and a second row "vendor(min copy)" times the
 * baseline copying only those (cuSPARSE 12.6 on an H200: du only), the fairest baseline that still
 * solves correctly, though it relies on undocumented behaviour.
 *
 * pkrylov CSR rows report the device storage the operator got at upload (column "form": csr/sdia4 =
 * symmetric DIA with 4 stored diagonals, csr/dia7 = DIA; JSON "storage"), and the byte model counts that
 * storage's bytes; on the 7-point Laplacians the same matrix is also run forced to CSR arrays (form
 * csr-csr) and to plain DIA (csr-dia) through the option cuda.csr_format. The vendor baseline is unchanged:
 * cuSPARSE CSR SpMV, as a user writes it.
 *
 * The matrix of the baseline comes from the library: pkrylov_operator_get_csr() of the thin-shell
 * operator on a CPU context; the column tridiagonals are the CSR entries at (r, r), (r, r -+ nx*ny).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "pkrylov.h"
#ifdef PKB_HAVE_INTERNAL
#include "pk_cuda.h" /* pk_cuda_operator_csr_format: the device storage a CSR operator got */
#endif

#define PKB_PROG "pkrylov-bench-gpu"
#include "bench_gpu_common.cuh" /* CK_CUDA/CK_SPARSE/CK_BLAS, now, random_rhs, copy_bandwidth, js, jn, ... */

#ifndef PKB_SHARED_DIR
#define PKB_SHARED_DIR "../shared"
#endif

/* ================================================================================================ */
/* GPU BYTE MODEL: bytes each iteration must move through device memory, per unknown (fp64 words of    */
/* 8 bytes) and per stored matrix entry. The lead may refine it; it is used only to turn times into    */
/* GB/s and fractions of the copy bandwidth. Every entry assumes each array is read or written once    */
/* per pass (stencil neighbours come from cache).                                                      */
/* ================================================================================================ */
/** One line of the pkrylov byte model: vector words per unknown and iteration. */
typedef struct {
  const char *solver, *precond; /**< "cg"/"pipecg", "column"/"jacobi"/"none" */
  double words_fp64;            /**< fp64 factors */
  double words_mixed;           /**< mixed precision: factors (l, 1/d) stored in fp32, vectors fp64 */
  const char *why;
} byte_model_t;

static const byte_model_t kByteModel[] = {
    {"cg", "column", 13, 12,
     "precond loop reads r,q,l,1/d writes r,z (6); operator loop reads z,p,q,x writes x,p,q (7)"},
    {"cg", "jacobi", 12, 11.5, "precond loop reads r,q,1/d writes r,z (5); operator loop 7"},
    {"cg", "none", 10, 10, "r -= alpha q reads r,q writes r (3); operator loop with z = r (7)"},
    {"pipecg", "column", 21, 20,
     "m = M^-1 w reads w,l,1/d writes m (4); fused update reads m,z,q,s,p,x,r,u,w writes 8 (17)"},
    {"pipecg", "jacobi", 20, 19.5, "m = M^-1 w reads w,1/d writes m (3); fused update 17"},
    /* M = I: the update specialised (pk_cuda_pipecg_none_step; u = r, q = s, m = w implied) on the unfolded
       launchers; problems small enough for the folded launchers (up to 2^20 grid cells, CSR up to 256
       partial slots) keep the general update after a copy m = w: 2 + 17 words there */
    {"pipecg", "none", 12, 12, "specialised update reads w,z,s,p,x,r writes z,s,p,x,r,w' (12)"},
};
/* Operator bytes per unknown, added to the vector words:
 *   thin shell (matrix-free): 0 (level vectors and per-column scalars only);
 *   column stencil: 4 coefficient arrays aW, aS, aV, aC = 32 B (fp32 in mixed precision: 16 B);
 *   CSR, by the device storage the operator got at upload (Row::storage, pk_cuda_operator_csr_format):
 *     csr:    12 B per stored nonzero (fp64 value + int32 column; fp32 value in mixed precision: 8 B) + 8 B
 *             per row (int64 row pointer). A 7-point row: 84 + 8 = 92 B.
 *     diaN:   N diagonals of n values: 8 N B per row (4 N in mixed precision). 7-point: 56 B.
 *     sdiaN:  symmetric DIA, the N diagonals of offset >= 0 (the lower ones are read by reflection, from
 *             cache): 8 N B per row (4 N mixed). 7-point: N = 4, 32 B.
 *   (pkrylov CPU rows and an unknown storage count as csr.)
 * The vendor baseline has its own count, vendor_bytes() below. */
static const double kStencilBytes = 32.0, kStencilBytesMixed = 16.0;
static const double kCsrBytesPerNnz = 12.0, kCsrBytesPerNnzMixed = 8.0, kCsrRowptrBytes = 8.0;

/** Vector words of the pkrylov fused iteration (NAN when the model has no line for it). */
static double model_words(const std::string &solver, const std::string &precond, bool mixed) {
  for (const byte_model_t &m : kByteModel)
    if (solver == m.solver && precond == m.precond) return mixed ? m.words_mixed : m.words_fp64;
  return NAN;
}

/**
 * Bytes per iteration of a pkrylov row (operator form "thinshell", "stencil7" or "csr", "csr-L<lanes>",
 * "csr-csr", "csr-dia"; storage of a CSR form on the device: "csr", "diaN", "sdiaN", or "" = csr).
 */
static double pk_bytes(const std::string &form, const std::string &storage, const std::string &solver,
                       const std::string &precond, bool mixed, int64_t n, int64_t nnz) {
  double b = 8.0 * model_words(solver, precond, mixed) * (double)n;
  if (form == "stencil7") b += (mixed ? kStencilBytesMixed : kStencilBytes) * (double)n;
  if (form.compare(0, 3, "csr") == 0) {
    const size_t d = storage.find("dia");
    if (d != std::string::npos)
      b += (mixed ? 4.0 : 8.0) * atof(storage.c_str() + d + 3) * (double)n;
    else
      b += (mixed ? kCsrBytesPerNnzMixed : kCsrBytesPerNnz) * (double)nnz + kCsrRowptrBytes * (double)n;
  }
  return b;
}

/** Device storage of a CSR operator on a CUDA context: "csr", "dia<N>", "sdia<N>" (N stored diagonals), or
 *  "" when unknown (built without the internal library, or not a CUDA CSR operator). */
static std::string csr_storage(pkrylov_operator A) {
#ifdef PKB_HAVE_INTERNAL
  int32_t nd = 0;
  const int32_t f = pk_cuda_operator_csr_format(A, &nd);
  if (f == PK_CUDA_CSR_DIA) return "dia" + std::to_string(nd);
  if (f == PK_CUDA_CSR_SYMDIA) return "sdia" + std::to_string(nd);
  if (f == PK_CUDA_CSR_PLAIN) return "csr";
#else
  (void)A;
#endif
  return "";
}

/**
 * Bytes per iteration of the vendor baseline: each library call reads its inputs once and writes its
 * outputs once (a lower bound for what the calls move).
 *   SpMV q = A p       12 nnz (fp64 value + int32 column) + 4 (n+1) (int32 rowptr) + 16 n (read p, write q)
 *   dot (p, q)         16 n
 *   axpy x, axpy r     24 n + 24 n
 *   nrm2 r              8 n                      (PCG only; plain CG uses rho = (r, r))
 *   column precond:    copies of dl, d, du and z = r: 4 x 16 n = 64 n (16 n per factor copy left out
 *                      by the "min copy" row);
 *                      gtsvInterleavedBatch (Thomas): reads dl, d, du, z (32 n), writes z (8 n), and its
 *                      modified upper diagonal c' is written and read back (16 n): 56 n
 *   jacobi precond:    dgmm z = d r: 24 n
 *   dot (r, z)         16 n (plain CG: dot (r, r) 8 n)
 *   scal p, axpy p     16 n + 24 n
 * PCG column: 264 n (232 n copying du only); PCG Jacobi: 168 n; plain CG: 128 n; + matrix.
 */
static double vendor_bytes(const std::string &precond, int ncopies, int64_t n, int64_t nnz) {
  const double spmv = 12.0 * (double)nnz + 4.0 * (double)(n + 1) + 16.0 * (double)n;
  double per_row; /* bytes per row moved by the vector operations */
  if (precond == "column")
    per_row = 16 + 48 + 8 + 16 * (ncopies + 1) + 56 + 16 + 40;
  else if (precond == "jacobi")
    per_row = 16 + 48 + 8 + 24 + 16 + 40;
  else
    per_row = 16 + 48 + 8 + 40; /* plain CG: dot(p,q), 2 axpy, dot(r,r), scal+axpy */
  return spmv + per_row * (double)n;
}
/* ================================ end of the GPU byte model ===================================== */

/* ---------------------------------------------------------------------------------------------- */
/* results                                                                                           */
/* ---------------------------------------------------------------------------------------------- */
/** One line of the table. */
struct Row {
  std::string problem, group; /* group: thinshell, laplacian, matrix */
  int64_t n = 0, nnz = 0;
  std::string impl;          /* vendor, vendor(min copy), pkrylov-cuda, pkrylov-cpu */
  std::string form;          /* thinshell, stencil7, csr (csr-L<lanes>, csr-csr, csr-dia: forced variants) */
  std::string storage;       /* CSR forms on CUDA: the device storage, csr / dia<N> / sdia<N> (csr_storage) */
  std::string solver;        /* cg, pipecg */
  std::string precond;       /* column, jacobi, none */
  std::string precision;     /* fp64, mixed */
  std::string status = "ok"; /* ok, unavailable, error, skipped */
  std::string message;
  double t_iter = NAN, bytes = NAN, gbs = NAN, fraction = NAN, vendor_ratio = NAN;
  int its_tol = 0;     /* iterations to rtol 1e-8 (negative: not reached), 0 = not measured */
  double relres = NAN; /* true relative residual after that solve */
};

struct Config {
  int K = 100, R = 5, cpuK = 20, cpuR = 3, maxit = 3000;
  double copy_gib = 1.0;
  bool cpu = true, tol = true, gpu = true, pkcuda = true;
  std::string matrices = std::string(PKB_SHARED_DIR) + "/matrices";
};

/** Sets an option of a context for its lifetime (value NULL: leaves it as it is), then restores the value
 *  it had (the CUDA operator options are read at upload: an A/B run in one process). */
struct OptSet {
  pkrylov_context ctx;
  std::string name;
  char saved[64] = {0};
  bool set = false;
  OptSet(pkrylov_context c, const char *n, const char *value) : ctx(c), name(n) {
    if (!value || pkrylov_context_get_option(c, n, saved, (int32_t)sizeof saved) != 0) return;
    set = pkrylov_context_set_option(c, n, value) == 0;
  }
  ~OptSet() {
    if (set) pkrylov_context_set_option(ctx, name.c_str(), saved);
  }
};

/** Fill the derived columns of a row from its time and bytes. */
static void finish_row(Row &r, double copy_bw) {
  if (r.status != "ok") return;
  /* a time that is not positive, or above the copy bandwidth, is flagged */
  if (const char *flag = pkb_flag(r.t_iter, r.bytes, copy_bw))
    r.message = r.message.empty() ? flag : r.message + "; " + flag;
  if (!(r.t_iter > 0)) return;
  r.gbs = r.bytes / r.t_iter / 1e9;
  r.fraction = copy_bw > 0 ? r.bytes / r.t_iter / copy_bw : NAN;
}

/* ---------------------------------------------------------------------------------------------- */
/* host CSR                                                                                          */
/* ---------------------------------------------------------------------------------------------- */
/** A square CSR matrix on the host, 0-based, 64-bit indices (the library's export format). */
struct HostCsr {
  int64_t n = 0, nnz = 0;
  std::vector<int64_t> rowptr, col;
  std::vector<double> val;
};

/** 7-point Laplacian (6 on the diagonal, -1 to each neighbour) on an m^3 grid, Dirichlet boundaries
 *  eliminated (couplings to outside points dropped); index i + m (j + m k). */
static void laplacian_csr(int m, HostCsr &A) {
  csr_begin(A, (int64_t)m * m * m, 7);
  for (int k = 0; k < m; k++)
    for (int j = 0; j < m; j++)
      for (int i = 0; i < m; i++) {
        const int64_t r = i + (int64_t)m * (j + (int64_t)m * k);
        /* sorted columns: -m^2, -m, -1, 0, +1, +m, +m^2 */
        if (k > 0) A.col.push_back(r - (int64_t)m * m), A.val.push_back(-1.0);
        if (j > 0) A.col.push_back(r - m), A.val.push_back(-1.0);
        if (i > 0) A.col.push_back(r - 1), A.val.push_back(-1.0);
        A.col.push_back(r), A.val.push_back(6.0);
        if (i < m - 1) A.col.push_back(r + 1), A.val.push_back(-1.0);
        if (j < m - 1) A.col.push_back(r + m), A.val.push_back(-1.0);
        if (k < m - 1) A.col.push_back(r + (int64_t)m * m), A.val.push_back(-1.0);
        A.rowptr[(size_t)r + 1] = (int64_t)A.col.size();
      }
  A.nnz = (int64_t)A.col.size();
}

/** 27-point Laplacian (26 on the diagonal, -1 to each of the 26 neighbours of the 3x3x3 cube) on an m^3
 *  grid, Dirichlet boundaries eliminated; index i + m (j + m k); sorted columns. 27 entries in an
 *  interior row: the long-row CSR case (the CUDA backend's vector kernel). */
static void laplacian27_csr(int m, HostCsr &A) {
  csr_begin(A, (int64_t)m * m * m, 27);
  for (int k = 0; k < m; k++)
    for (int j = 0; j < m; j++)
      for (int i = 0; i < m; i++) {
        const int64_t r = i + (int64_t)m * (j + (int64_t)m * k);
        for (int dk = -1; dk <= 1; dk++)
          for (int dj = -1; dj <= 1; dj++)
            for (int di = -1; di <= 1; di++) {
              const int ii = i + di, jj = j + dj, kk = k + dk;
              if (ii < 0 || ii >= m || jj < 0 || jj >= m || kk < 0 || kk >= m) continue;
              A.col.push_back(ii + (int64_t)m * (jj + (int64_t)m * kk));
              A.val.push_back(di == 0 && dj == 0 && dk == 0 ? 26.0 : -1.0);
            }
        A.rowptr[(size_t)r + 1] = (int64_t)A.col.size();
      }
  A.nnz = (int64_t)A.col.size();
}

/** Export an operator as host CSR through the public API. Returns 0 or the pkrylov status. */
static int export_csr(pkrylov_operator op, HostCsr &A) {
  int rc = pkrylov_operator_get_info(op, &A.n, &A.nnz, NULL, NULL, NULL, NULL);
  if (rc) return rc;
  A.rowptr.resize((size_t)A.n + 1);
  A.col.resize((size_t)A.nnz);
  A.val.resize((size_t)A.nnz);
  return pkrylov_operator_get_csr(op, A.rowptr.data(), A.col.data(), A.val.data());
}

/* ---------------------------------------------------------------------------------------------- */
/* THE VENDOR BASELINE                                                                               */
/* ---------------------------------------------------------------------------------------------- */
enum { VPC_NONE, VPC_JACOBI, VPC_COLUMN };

/** Device data and handles of the vendor CG (see the file comment for what one iteration does). */
struct Vendor {
  cusparseHandle_t sp = NULL;
  cublasHandle_t bl = NULL;
  int n = 0;
  int64_t nnz = 0;
  int *rowptr = NULL, *col = NULL;
  double *val = NULL;
  cusparseSpMatDescr_t A = NULL;
  cusparseDnVecDescr_t vp = NULL, vq = NULL, vx = NULL, vt = NULL;
  void *spmv_buf = NULL;
  double *b = NULL, *x = NULL, *r = NULL, *z = NULL, *p = NULL, *q = NULL, *t = NULL;
  int pc = VPC_NONE;
  /* column: pristine tridiagonals (dl0, d0, du0) and the work copies gtsv may overwrite */
  int nz = 0, ncols = 0;
  double *dl0 = NULL, *d0 = NULL, *du0 = NULL, *dl = NULL, *d = NULL, *du = NULL;
  void *gtsv_buf = NULL;
  int copy_mask = 7; /* which of dl (1), d (2), du (4) are copied before each gtsv */
  /* jacobi */
  double *dinv = NULL;
};

/** Bytes the vendor baseline needs on the device (to skip problems that do not fit). */
static double vendor_device_bytes(int64_t n, int64_t nnz) { return 12.0 * nnz + 8.0 * n * 16 + 4.0 * n; }

/** Upload A (and the preconditioner data), create handles and descriptors. */
static void vendor_setup(Vendor &V, const HostCsr &A, int pc, int nz, const std::vector<double> &b) {
  if (A.n > INT32_MAX || A.nnz > INT32_MAX) {
    fprintf(stderr, "pkrylov-bench-gpu: matrix too large for 32-bit cuSPARSE indices\n");
    exit(2);
  }
  V.n = (int)A.n;
  V.nnz = A.nnz;
  V.pc = pc;
  const size_t n = (size_t)A.n, nnz = (size_t)A.nnz, vb = n * sizeof(double);
  std::vector<int> rp(n + 1), ci(nnz);
  for (size_t i = 0; i <= n; i++) rp[i] = (int)A.rowptr[i];
  for (size_t i = 0; i < nnz; i++) ci[i] = (int)A.col[i];
  CK_CUDA(cudaMalloc(&V.rowptr, (n + 1) * sizeof(int)));
  CK_CUDA(cudaMalloc(&V.col, nnz * sizeof(int)));
  CK_CUDA(cudaMalloc(&V.val, nnz * sizeof(double)));
  CK_CUDA(cudaMemcpy(V.rowptr, rp.data(), (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
  CK_CUDA(cudaMemcpy(V.col, ci.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
  CK_CUDA(cudaMemcpy(V.val, A.val.data(), nnz * sizeof(double), cudaMemcpyHostToDevice));
  double **vecs[] = {&V.b, &V.x, &V.r, &V.z, &V.p, &V.q, &V.t};
  for (double **v : vecs) {
    CK_CUDA(cudaMalloc(v, vb));
    CK_CUDA(cudaMemset(*v, 0, vb));
  }
  CK_CUDA(cudaMemcpy(V.b, b.data(), vb, cudaMemcpyHostToDevice));
  CK_SPARSE(cusparseCreate(&V.sp));
  CK_BLAS(cublasCreate(&V.bl));
  CK_BLAS(cublasSetPointerMode(V.bl, CUBLAS_POINTER_MODE_HOST));
  CK_SPARSE(cusparseCreateCsr(&V.A, A.n, A.n, A.nnz, V.rowptr, V.col, V.val, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vp, A.n, V.p, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vq, A.n, V.q, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vx, A.n, V.x, CUDA_R_64F));
  CK_SPARSE(cusparseCreateDnVec(&V.vt, A.n, V.t, CUDA_R_64F));
  const double one = 1.0, zero = 0.0;
  size_t sz = 0;
  CK_SPARSE(cusparseSpMV_bufferSize(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.A, V.vp, &zero, V.vq,
                                    CUDA_R_64F, CUSPARSE_SPMV_CSR_ALG1, &sz));
  CK_CUDA(cudaMalloc(&V.spmv_buf, sz ? sz : 16));

  if (pc == VPC_JACOBI) {
    std::vector<double> dv(n, 0.0);
    for (size_t i = 0; i < n; i++)
      for (int64_t e = A.rowptr[i]; e < A.rowptr[i + 1]; e++)
        if (A.col[(size_t)e] == (int64_t)i) dv[i] = 1.0 / A.val[(size_t)e];
    CK_CUDA(cudaMalloc(&V.dinv, vb));
    CK_CUDA(cudaMemcpy(V.dinv, dv.data(), vb, cudaMemcpyHostToDevice));
  } else if (pc == VPC_COLUMN) {
    /* system c = column, element k at c + ncols k: exactly the interleaved layout of gtsvInterleavedBatch */
    V.nz = nz;
    V.ncols = (int)(A.n / nz);
    const int64_t nc = V.ncols;
    std::vector<double> hdl(n, 0.0), hd(n, 0.0), hdu(n, 0.0);
    for (size_t i = 0; i < n; i++)
      for (int64_t e = A.rowptr[i]; e < A.rowptr[i + 1]; e++) {
        const int64_t c = A.col[(size_t)e];
        if (c == (int64_t)i)
          hd[i] = A.val[(size_t)e];
        else if (c == (int64_t)i - nc)
          hdl[i] = A.val[(size_t)e];
        else if (c == (int64_t)i + nc)
          hdu[i] = A.val[(size_t)e];
      }
    double **arr[] = {&V.dl0, &V.d0, &V.du0, &V.dl, &V.d, &V.du};
    for (double **a : arr) CK_CUDA(cudaMalloc(a, vb));
    CK_CUDA(cudaMemcpy(V.dl0, hdl.data(), vb, cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(V.d0, hd.data(), vb, cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(V.du0, hdu.data(), vb, cudaMemcpyHostToDevice));
    CK_CUDA(cudaMemcpy(V.dl, V.dl0, vb, cudaMemcpyDeviceToDevice));
    CK_CUDA(cudaMemcpy(V.d, V.d0, vb, cudaMemcpyDeviceToDevice));
    CK_CUDA(cudaMemcpy(V.du, V.du0, vb, cudaMemcpyDeviceToDevice));
    CK_SPARSE(cusparseDgtsvInterleavedBatch_bufferSizeExt(V.sp, 0, V.nz, V.dl, V.d, V.du, V.z, V.ncols, &sz));
    CK_CUDA(cudaMalloc(&V.gtsv_buf, sz ? sz : 16));
  }
  CK_CUDA(cudaDeviceSynchronize());
}

static void vendor_free(Vendor &V) {
  if (V.A) cusparseDestroySpMat(V.A);
  cusparseDnVecDescr_t dv[] = {V.vp, V.vq, V.vx, V.vt};
  for (cusparseDnVecDescr_t d : dv)
    if (d) cusparseDestroyDnVec(d);
  if (V.sp) cusparseDestroy(V.sp);
  if (V.bl) cublasDestroy(V.bl);
  void *ptrs[] = {V.rowptr, V.col, V.val, V.spmv_buf, V.b,  V.x, V.r,  V.z,        V.p,   V.q,
                  V.t,      V.dl0, V.d0,  V.du0,      V.dl, V.d, V.du, V.gtsv_buf, V.dinv};
  for (void *p : ptrs)
    if (p) cudaFree(p);
  V = Vendor();
}

/** z = M^-1 r with the vendor libraries. */
static void vendor_precond(Vendor &V) {
  const size_t vb = (size_t)V.n * sizeof(double);
  if (V.pc == VPC_COLUMN) {
    if (V.copy_mask & 1) CK_CUDA(cudaMemcpyAsync(V.dl, V.dl0, vb, cudaMemcpyDeviceToDevice));
    if (V.copy_mask & 2) CK_CUDA(cudaMemcpyAsync(V.d, V.d0, vb, cudaMemcpyDeviceToDevice));
    if (V.copy_mask & 4) CK_CUDA(cudaMemcpyAsync(V.du, V.du0, vb, cudaMemcpyDeviceToDevice));
    CK_CUDA(cudaMemcpyAsync(V.z, V.r, vb, cudaMemcpyDeviceToDevice));
    CK_SPARSE(cusparseDgtsvInterleavedBatch(V.sp, 0, V.nz, V.dl, V.d, V.du, V.z, V.ncols, V.gtsv_buf));
  } else if (V.pc == VPC_JACOBI) {
    CK_BLAS(cublasDdgmm(V.bl, CUBLAS_SIDE_LEFT, V.n, 1, V.r, V.n, V.dinv, 1, V.z, V.n));
  }
}

/**
 * Vendor (P)CG from x0 = 0: at most maxit iterations, stop when ||r|| <= rtol ||b||. Returns the
 * iterations done; *relres (if not NULL) gets the TRUE relative residual ||b - A x|| / ||b||.
 */
static int vendor_solve(Vendor &V, int maxit, double rtol, double *relres) {
  const int n = V.n;
  const double one = 1.0, zero = 0.0, mone = -1.0;
  const size_t vb = (size_t)n * sizeof(double);
  CK_CUDA(cudaMemsetAsync(V.x, 0, vb));
  CK_CUDA(cudaMemcpyAsync(V.r, V.b, vb, cudaMemcpyDeviceToDevice)); /* r = b - A x0, x0 = 0 */
  double bnorm, rnorm, rho, rho_new, pq;
  CK_BLAS(cublasDnrm2(V.bl, n, V.b, 1, &bnorm));
  rnorm = bnorm;
  const double *zz = V.pc == VPC_NONE ? V.r : V.z; /* plain CG: z is r */
  vendor_precond(V);
  CK_BLAS(cublasDdot(V.bl, n, V.r, 1, zz, 1, &rho));
  CK_BLAS(cublasDcopy(V.bl, n, zz, 1, V.p, 1));
  int it = 0;
  while (it < maxit && !(rnorm <= rtol * bnorm)) {
    CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.A, V.vp, &zero, V.vq, CUDA_R_64F,
                           CUSPARSE_SPMV_CSR_ALG1, V.spmv_buf));
    CK_BLAS(cublasDdot(V.bl, n, V.p, 1, V.q, 1, &pq));
    const double alpha = rho / pq, malpha = -alpha;
    CK_BLAS(cublasDaxpy(V.bl, n, &alpha, V.p, 1, V.x, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &malpha, V.q, 1, V.r, 1));
    it++;
    if (V.pc == VPC_NONE) {
      CK_BLAS(cublasDdot(V.bl, n, V.r, 1, V.r, 1, &rho_new));
      rnorm = sqrt(rho_new);
    } else {
      CK_BLAS(cublasDnrm2(V.bl, n, V.r, 1, &rnorm));
      if (rnorm <= rtol * bnorm) break;
      vendor_precond(V);
      CK_BLAS(cublasDdot(V.bl, n, V.r, 1, V.z, 1, &rho_new));
    }
    const double beta = rho_new / rho;
    rho = rho_new;
    CK_BLAS(cublasDscal(V.bl, n, &beta, V.p, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &one, zz, 1, V.p, 1));
  }
  CK_CUDA(cudaDeviceSynchronize());
  if (relres) { /* t = b - A x */
    CK_SPARSE(cusparseSpMV(V.sp, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, V.A, V.vx, &zero, V.vt, CUDA_R_64F,
                           CUSPARSE_SPMV_CSR_ALG1, V.spmv_buf));
    CK_BLAS(cublasDscal(V.bl, n, &mone, V.t, 1));
    CK_BLAS(cublasDaxpy(V.bl, n, &one, V.b, 1, V.t, 1));
    double tn;
    CK_BLAS(cublasDnrm2(V.bl, n, V.t, 1, &tn));
    *relres = tn / bnorm;
  }
  return it;
}

/**
 * Does gtsvInterleavedBatch (algo 0) modify dl, d, du? Runs one application on the work copies and
 * compares them with the pristine arrays. Returns a description ("" when nothing changed) and in *mask
 * the arrays that changed (dl 1, d 2, du 4).
 */
static std::string gtsv_modifies_inputs(Vendor &V, int *mask) {
  const size_t n = (size_t)V.n, vb = n * sizeof(double);
  CK_CUDA(cudaMemcpy(V.r, V.b, vb, cudaMemcpyDeviceToDevice));
  const int save = V.copy_mask;
  V.copy_mask = 7;
  vendor_precond(V);
  V.copy_mask = save;
  *mask = 0;
  CK_CUDA(cudaDeviceSynchronize());
  std::vector<double> h0(n), h1(n);
  std::string which;
  const double *pairs[3][2] = {{V.dl0, V.dl}, {V.d0, V.d}, {V.du0, V.du}};
  const char *names[3] = {"dl", "d", "du"};
  for (int a = 0; a < 3; a++) {
    CK_CUDA(cudaMemcpy(h0.data(), pairs[a][0], vb, cudaMemcpyDeviceToHost));
    CK_CUDA(cudaMemcpy(h1.data(), pairs[a][1], vb, cudaMemcpyDeviceToHost));
    if (memcmp(h0.data(), h1.data(), vb) != 0) {
      which += std::string(which.empty() ? "" : ",") + names[a];
      *mask |= 1 << a;
    }
  }
  return which;
}

/** Time the vendor baseline and fill a row. */
static Row vendor_row(Vendor &V, const Row &proto, const Config &cf, const char *impl) {
  Row row = proto;
  row.impl = impl;
  row.form = "csr";
  row.solver = "cg";
  row.precond = V.pc == VPC_COLUMN ? "column" : V.pc == VPC_JACOBI ? "jacobi" : "none";
  row.precision = "fp64";
  row.bytes = vendor_bytes(row.precond, __builtin_popcount(V.copy_mask), row.n, row.nnz);
  if (cf.tol) {
    double rr;
    const int its = vendor_solve(V, cf.maxit, 1e-8, &rr);
    row.its_tol = its < cf.maxit || rr <= 1e-8 ? its : -its;
    row.relres = rr;
  } else {
    vendor_solve(V, 10, 1e-300, NULL); /* warm-up */
  }
  row.t_iter = time_per_iteration(
      [&](int its) {
        CK_CUDA(cudaDeviceSynchronize());
        const double t0 = now();
        const int done = vendor_solve(V, its, 1e-300, NULL);
        const double t = now() - t0;
        return done == its ? t : -1.0;
      },
      10, 10 + cf.K, cf.R);
  if (row.t_iter < 0) row.status = "error", row.message = "fixed iteration count not reached";
  return row;
}

/* ---------------------------------------------------------------------------------------------- */
/* pkrylov rows                                                                                      */
/* ---------------------------------------------------------------------------------------------- */
/** Where a pkrylov solve runs: context, memory type and b, x in that memory. */
struct PkTarget {
  pkrylov_context ctx = NULL;
  int mem = PKRYLOV_MEM_HOST;
  const double *b = NULL;
  double *x = NULL;
  bool device = false;
};

/**
 * One pkrylov row: solver `stype` on operator A with preconditioner M (may be NULL), optional mixed
 * precision. Failures make the row "unavailable" (with the library's message) instead of stopping.
 */
/** Pipelined CG's residual replacement in the pkrylov rows (--replace; 0: off, the byte model's case). */
static int g_replace = 0;

static Row pk_row(const Row &proto, const PkTarget &T, pkrylov_operator A, pkrylov_precond M, int stype,
                  bool mixed, int K, int R, int maxit, bool tol) {
  Row row = proto;
  row.solver = stype == PKRYLOV_SOLVER_CG ? "cg" : "pipecg";
  row.precision = mixed ? "mixed" : "fp64";
  if (T.device && row.form.compare(0, 3, "csr") == 0) row.storage = csr_storage(A);
  row.bytes = pk_bytes(row.form, row.storage, row.solver, row.precond, mixed, row.n, row.nnz);
  pkrylov_solver s = NULL;
  int rc = pkrylov_solver_create(T.ctx, stype, A, M, &s);
  if (rc) {
    row.status = "unavailable", row.message = "solver_create: " + pk_msg(T.ctx, rc);
    return row;
  }
  pkrylov_solver_set_residual_replacement(s, g_replace);
  if (mixed && (rc = pkrylov_solver_set_precision(s, PKRYLOV_PRECISION_MIXED)) != 0) {
    /* fp32 preconditioner factors and operator coefficients */
    row.status = "unavailable", row.message = "set_precision: " + pk_msg(T.ctx, rc);
    pkrylov_solver_destroy(&s);
    return row;
  }
  std::string err;
  auto solve = [&](int its, double rtol) -> double {
    pkrylov_solver_set_max_iterations(s, its);
    pkrylov_solver_set_tolerances(s, rtol, 0.0);
    if (T.device) cudaDeviceSynchronize();
    const double t0 = now();
    const int st = pkrylov_solver_solve(s, T.mem, T.b, T.x);
    if (T.device) cudaDeviceSynchronize();
    const double t = now() - t0;
    if (st) {
      err = "solve: " + pk_msg(T.ctx, st);
      return -1;
    }
    return t;
  };
  if (tol) {
    if (solve(maxit, 1e-8) < 0) {
      row.status = "unavailable", row.message = err;
      pkrylov_solver_destroy(&s);
      return row;
    }
    pkrylov_result res;
    pkrylov_solver_get_result(s, &res);
    row.its_tol = res.converged ? res.iterations : -res.iterations;
    row.relres = res.rel_residual;
  } else if (solve(10, 1e-300) < 0) { /* warm-up */
    row.status = "unavailable", row.message = err;
    pkrylov_solver_destroy(&s);
    return row;
  }
  row.t_iter = time_per_iteration(
      [&](int its) {
        const double t = solve(its, 1e-300);
        if (t < 0) return -1.0;
        pkrylov_result res;
        pkrylov_solver_get_result(s, &res);
        if (res.iterations != its) {
          char buf[160];
          snprintf(buf, sizeof buf, "expected %d iterations, did %d (%s)", its, res.iterations,
                   pkrylov_reason_string(res.reason));
          err = buf;
          return -1.0;
        }
        return t;
      },
      10, 10 + K, R);
  if (row.t_iter < 0) row.status = "error", row.message = err;
  pkrylov_solver_destroy(&s);
  return row;
}

/** Rows for one operator: precond `pctype` (NONE: no preconditioner object), each (solver, mixed) pair. */
static void pk_rows_for(std::vector<Row> &rows, const Row &proto, const PkTarget &T, pkrylov_operator A,
                        int pctype, int levels, int layout, const std::vector<std::pair<int, bool>> &runs,
                        int K, int R, int maxit, bool tol) {
  pkrylov_precond M = NULL;
  int rc = 0;
  if (pctype != PKRYLOV_PRECOND_NONE) rc = pkrylov_precond_create(T.ctx, A, pctype, levels, layout, &M);
  for (const auto &run : runs) {
    if (rc) {
      Row row = proto;
      row.solver = run.first == PKRYLOV_SOLVER_CG ? "cg" : "pipecg";
      row.precision = run.second ? "mixed" : "fp64";
      row.status = "unavailable", row.message = "precond_create: " + pk_msg(T.ctx, rc);
      rows.push_back(row);
      continue;
    }
    rows.push_back(pk_row(proto, T, A, M, run.first, run.second, K, R, maxit, tol));
    fflush(stdout);
  }
  pkrylov_precond_destroy(&M);
}

/** Rows marked unavailable (no CUDA context) for the given forms and runs. */
static void pk_unavailable(std::vector<Row> &rows, const Row &proto, const std::vector<std::string> &forms,
                           const std::vector<std::pair<int, bool>> &runs, const std::string &why) {
  for (const std::string &f : forms)
    for (const auto &run : runs) {
      Row row = proto;
      row.form = f;
      row.solver = run.first == PKRYLOV_SOLVER_CG ? "cg" : "pipecg";
      row.precision = run.second ? "mixed" : "fp64";
      row.status = "unavailable", row.message = why;
      rows.push_back(row);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* output                                                                                            */
/* ---------------------------------------------------------------------------------------------- */
static void print_header(void) {
  printf("%-15s %-16s %-13s %-6s %-6s %-5s %10s %11s %8s %7s %8s %7s  %s\n", "problem", "impl", "form",
         "solver", "pc", "prec", "unknowns", "us/iter", "GB/s", "of copy", "vend/it", "its@1e-8", "note");
}

static void print_row(const Row &r) {
  char t[32] = "-", g[32] = "-", f[32] = "-", v[32] = "-", it[32] = "-";
  if (r.status == "ok") {
    snprintf(t, sizeof t, "%.2f", r.t_iter * 1e6);
    snprintf(g, sizeof g, "%.1f", r.gbs);
    if (r.fraction == r.fraction) snprintf(f, sizeof f, "%.0f%%", 100 * r.fraction);
    if (r.vendor_ratio == r.vendor_ratio) snprintf(v, sizeof v, "%.2fx", r.vendor_ratio);
  }
  if (r.its_tol) snprintf(it, sizeof it, "%d", r.its_tol);
  std::string note = r.status == "ok" ? r.message : r.status + (r.message.empty() ? "" : ": " + r.message);
  /* a CSR form shows its device storage when that is not CSR: csr/sdia4 */
  const std::string form = r.storage.empty() || r.storage == "csr" ? r.form : r.form + "/" + r.storage;
  printf("%-15s %-16s %-13s %-6s %-6s %-5s %10lld %11s %8s %7s %8s %7s  %s\n", r.problem.c_str(),
         r.impl.c_str(), form.c_str(), r.solver.c_str(), r.precond.c_str(), r.precision.c_str(),
         (long long)r.n, t, g, f, v, it, note.c_str());
  fflush(stdout);
}

/* ---------------------------------------------------------------------------------------------- */
/* problems                                                                                          */
/* ---------------------------------------------------------------------------------------------- */
struct Problem {
  std::string kind; /* ts, lap, lap27, mtx */
  int nx = 0, ny = 0, nz = 0, m = 0;
  std::string path, name;
};

/** Shared state of the run. */
struct Bench {
  Config cf;
  double copy_bw = NAN;
  pkrylov_context cpu = NULL, cuda = NULL;
  std::string cuda_why; /* why there is no CUDA context */
  std::vector<Row> rows;
};

/** Is there room on the device for `bytes` (with a margin)? */
static bool fits(double bytes, std::string *why) {
  size_t fr = 0, tot = 0;
  if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return true;
  if (bytes * 1.3 + (1 << 28) < (double)fr) return true;
  char b[128];
  snprintf(b, sizeof b, "needs about %.1f GB of GPU memory, %.1f GB free", bytes * 1.3 / 1e9, fr / 1e9);
  *why = b;
  return false;
}

/** Upload b to a fresh device vector, allocate x; both freed by the caller. */
static void device_vectors(const std::vector<double> &b, double **db, double **dx) {
  const size_t vb = b.size() * sizeof(double);
  CK_CUDA(cudaMalloc(db, vb));
  CK_CUDA(cudaMalloc(dx, vb));
  CK_CUDA(cudaMemcpy(*db, b.data(), vb, cudaMemcpyHostToDevice));
  CK_CUDA(cudaMemset(*dx, 0, vb));
}

/** Set the vendor ratio of every row of problem `p` against the reference vendor row. */
static void set_ratios(std::vector<Row> &rows, size_t first, const std::string &ref_precond) {
  double tv = NAN;
  for (size_t i = first; i < rows.size(); i++)
    if (rows[i].impl == "vendor" && rows[i].precond == ref_precond && rows[i].status == "ok")
      tv = rows[i].t_iter;
  for (size_t i = first; i < rows.size(); i++)
    if (rows[i].status == "ok") rows[i].vendor_ratio = tv / rows[i].t_iter;
}

static const std::vector<std::pair<int, bool>> kRunsColumn = {
    {PKRYLOV_SOLVER_CG, false}, {PKRYLOV_SOLVER_PIPECG, false}, {PKRYLOV_SOLVER_PIPECG, true}};
static const std::vector<std::pair<int, bool>> kRunsPlain = {
    {PKRYLOV_SOLVER_PIPECG, false}, {PKRYLOV_SOLVER_CG, false}, {PKRYLOV_SOLVER_PIPECG, true}};
static const std::vector<std::pair<int, bool>> kRunsJacobi = {
    {PKRYLOV_SOLVER_CG, false}, {PKRYLOV_SOLVER_PIPECG, false}, {PKRYLOV_SOLVER_PIPECG, true}};

/** Thin shell nx x ny x nz: vendor PCG column, pkrylov CUDA (three forms), pkrylov CPU. */
static void run_thinshell(Bench &B, const Problem &P) {
  const Config &cf = B.cf;
  const size_t first = B.rows.size();
  char name[64];
  snprintf(name, sizeof name, "%dx%dx%d", P.nx, P.ny, P.nz);
  pkrylov_thinshell_params tp;
  pkrylov_operator Acpu = NULL;
  int rc = pkrylov_thinshell_params_default(P.nx, P.ny, P.nz, &tp);
  if (!rc) rc = pkrylov_operator_create_thinshell(B.cpu, &tp, &Acpu);
  Row proto;
  proto.problem = name, proto.group = "thinshell", proto.precond = "column";
  if (rc) {
    proto.impl = "-", proto.status = "error", proto.message = "thin-shell operator: " + pk_msg(B.cpu, rc);
    B.rows.push_back(proto);
    print_row(proto);
    return;
  }
  HostCsr C;
  if ((rc = export_csr(Acpu, C)) != 0) {
    fprintf(stderr, "pkrylov-bench-gpu: get_csr: %s\n", pk_msg(B.cpu, rc).c_str());
    exit(2);
  }
  proto.n = C.n, proto.nnz = C.nnz;
  std::vector<double> b((size_t)C.n);
  random_rhs(b);
  std::string why;
  const bool gpu_ok = cf.gpu && fits(vendor_device_bytes(C.n, C.nnz) + 8.0 * C.n * 24, &why);

  /* ---- vendor ---- */
  if (cf.gpu && !gpu_ok) {
    Row r = proto;
    r.impl = "vendor", r.status = "skipped", r.message = why;
    B.rows.push_back(r);
  } else if (cf.gpu) {
    Vendor V;
    vendor_setup(V, C, VPC_COLUMN, P.nz, b);
    int mask = 0;
    const std::string mod = gtsv_modifies_inputs(V, &mask);
    Row r = vendor_row(V, proto, cf, "vendor");
    r.message = mod.empty() ? "gtsvInterleavedBatch left dl,d,du unchanged"
                            : "gtsvInterleavedBatch modified " + mod + " (of dl,d,du)";
    B.rows.push_back(r);
    if (mask != 7) { /* the fairest baseline that still solves: copy only what this cuSPARSE modifies */
      V.copy_mask = mask;
      B.rows.push_back(vendor_row(V, proto, cf, "vendor(min copy)"));
      B.rows.back().message = "as vendor, copying only " + (mod.empty() ? std::string("none") : mod) +
                              " (observed, not documented)";
    }
    vendor_free(V);
  }

  /* ---- pkrylov CUDA: thin shell matrix-free, column stencil, CSR ---- */
  if (cf.gpu && gpu_ok) {
    Row pr = proto;
    pr.impl = "pkrylov-cuda";
    if (!B.cuda) {
      pk_unavailable(B.rows, pr, {"thinshell", "stencil7", "csr"}, kRunsColumn, B.cuda_why);
    } else {
      double *db, *dx;
      device_vectors(b, &db, &dx);
      PkTarget T;
      T.ctx = B.cuda, T.mem = PKRYLOV_MEM_DEVICE, T.b = db, T.x = dx, T.device = true;
      for (const char *form : {"thinshell", "stencil7", "csr"}) {
        pr.form = form;
        pkrylov_operator A = NULL;
        if (!strcmp(form, "thinshell")) {
          rc = pkrylov_operator_create_thinshell(B.cuda, &tp, &A);
        } else if (!strcmp(form, "stencil7")) {
          const size_t n = (size_t)C.n;
          std::vector<double> aW(n), aS(n), aV(n), aC(n);
          rc = pkrylov_thinshell_stencil_coefficients(&tp, aW.data(), aS.data(), aV.data(), aC.data());
          if (!rc)
            rc = pkrylov_operator_create_stencil7(B.cuda, P.nx, P.ny, P.nz, aW.data(), aS.data(), aV.data(),
                                                  aC.data(), NULL, &A);
        } else {
          rc = pkrylov_operator_create_csr64(B.cuda, C.n, 0, C.rowptr.data(), C.col.data(), C.val.data(), &A);
        }
        if (rc) {
          pk_unavailable(B.rows, pr, {form}, kRunsColumn,
                         std::string(form) + " operator: " + pk_msg(B.cuda, rc));
          continue;
        }
        const bool csr = !strcmp(form, "csr");
        pk_rows_for(B.rows, pr, T, A, PKRYLOV_PRECOND_COLUMN, csr ? P.nz : 0,
                    csr ? PKRYLOV_LAYOUT_KSLOW : PKRYLOV_LAYOUT_AUTO, kRunsColumn, cf.K, cf.R, cf.maxit,
                    cf.tol);
        pkrylov_operator_destroy(&A);
      }
      cudaFree(db);
      cudaFree(dx);
    }
  }

  /* ---- pkrylov CPU: matrix-free thin shell (the CPU's best form) ---- */
  if (cf.cpu) {
    std::vector<double> x((size_t)C.n, 0.0);
    PkTarget T;
    T.ctx = B.cpu, T.mem = PKRYLOV_MEM_HOST, T.b = b.data(), T.x = x.data();
    Row pr = proto;
    pr.impl = "pkrylov-cpu", pr.form = "thinshell";
    /* iterations to 1e-8 for CG only (the CPU is slow at the large sizes) */
    pk_rows_for(B.rows, pr, T, Acpu, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO,
                {{PKRYLOV_SOLVER_CG, false}}, cf.cpuK, cf.cpuR, cf.maxit, cf.tol);
    pk_rows_for(B.rows, pr, T, Acpu, PKRYLOV_PRECOND_COLUMN, 0, PKRYLOV_LAYOUT_AUTO,
                {{PKRYLOV_SOLVER_PIPECG, false}}, cf.cpuK, cf.cpuR, cf.maxit, false);
  }
  pkrylov_operator_destroy(&Acpu);
  set_ratios(B.rows, first, "column");
  for (size_t i = first; i < B.rows.size(); i++) {
    finish_row(B.rows[i], B.copy_bw);
    print_row(B.rows[i]);
  }
}

/** Problems given as a host CSR matrix: vendor rows, pkrylov CUDA CSR rows, pkrylov CPU CSR rows. */
static void run_csr(Bench &B, const std::string &name, const std::string &group, const HostCsr &C,
                    int pctype) {
  const Config &cf = B.cf;
  const size_t first = B.rows.size();
  Row proto;
  proto.problem = name, proto.group = group, proto.n = C.n, proto.nnz = C.nnz;
  proto.precond = pctype == PKRYLOV_PRECOND_JACOBI ? "jacobi" : "none";
  std::vector<double> b((size_t)C.n);
  random_rhs(b);
  std::string why;
  const bool gpu_ok = cf.gpu && fits(vendor_device_bytes(C.n, C.nnz) + 16.0 * C.nnz + 8.0 * C.n * 24, &why);
  const std::vector<std::pair<int, bool>> &runs = pctype == PKRYLOV_PRECOND_JACOBI ? kRunsJacobi : kRunsPlain;

  if (cf.gpu && !gpu_ok) {
    Row r = proto;
    r.impl = "vendor", r.status = "skipped", r.message = why;
    B.rows.push_back(r);
  } else if (cf.gpu) {
    /* vendor plain CG always; with Jacobi also the Jacobi PCG (the reference for the ratios) */
    for (int vpc : {VPC_NONE, VPC_JACOBI}) {
      if (vpc == VPC_JACOBI && pctype != PKRYLOV_PRECOND_JACOBI) continue;
      Vendor V;
      vendor_setup(V, C, vpc, 0, b);
      B.rows.push_back(vendor_row(V, proto, cf, "vendor"));
      vendor_free(V);
    }
    Row pr = proto;
    pr.impl = "pkrylov-cuda", pr.form = "csr";
    if (!B.cuda) {
      pk_unavailable(B.rows, pr, {"csr"}, runs, B.cuda_why);
    } else {
      double *db, *dx;
      device_vectors(b, &db, &dx);
      PkTarget T;
      T.ctx = B.cuda, T.mem = PKRYLOV_MEM_DEVICE, T.b = db, T.x = dx, T.device = true;
      pkrylov_operator A = NULL;
      int rc = pkrylov_operator_create_csr64(B.cuda, C.n, 0, C.rowptr.data(), C.col.data(), C.val.data(), &A);
      if (rc)
        pk_unavailable(B.rows, pr, {"csr"}, runs, "csr operator: " + pk_msg(B.cuda, rc));
      else
        pk_rows_for(B.rows, pr, T, A, pctype, 0, PKRYLOV_LAYOUT_AUTO, runs, cf.K, cf.R, cf.maxit, cf.tol);
      pkrylov_operator_destroy(&A);
      /* the same matrix uploaded with the options cuda.csr_format / cuda.csr_lanes forcing its device
         storage or kernel (read at upload), in this run: */
      auto forced = [&](const std::string &form, const char *fmt, const char *lanes) {
        OptSet e1(B.cuda, "cuda.csr_format", fmt), e2(B.cuda, "cuda.csr_lanes", lanes);
        Row pl = proto;
        pl.impl = "pkrylov-cuda", pl.form = form;
        pkrylov_operator AL = NULL;
        const int rl =
            pkrylov_operator_create_csr64(B.cuda, C.n, 0, C.rowptr.data(), C.col.data(), C.val.data(), &AL);
        if (rl)
          pk_unavailable(B.rows, pl, {form}, runs, "csr operator: " + pk_msg(B.cuda, rl));
        else
          pk_rows_for(B.rows, pl, T, AL, pctype, 0, PKRYLOV_LAYOUT_AUTO, runs, cf.K, cf.R, cf.maxit, cf.tol);
        pkrylov_operator_destroy(&AL);
      };
      if (group == "laplacian" && !rc) {
        /* 7-point rows: CSR arrays (csr-csr, 92 B per row) and plain DIA over all 7 offsets (csr-dia, 56 B)
           against the automatic choice, symmetric DIA (32 B) */
        forced("csr-csr", "csr", NULL);
        forced("csr-dia", "dia-nosym", NULL);
      }
      if (group == "laplacian27" && !rc) {
        /* long rows in CSR storage: the kernel forced to one thread per row (csr-L0) and to L lanes per row
           (csr-LL, the vector kernel), so the automatic threshold (pk_cuda_csr_lanes) is set from data */
        for (int L : {0, 4, 8, 16}) {
          char v[8], form[16];
          snprintf(v, sizeof v, "%d", L);
          snprintf(form, sizeof form, "csr-L%d", L);
          forced(form, "csr", v);
        }
      }
      cudaFree(db);
      cudaFree(dx);
    }
  }
  if (cf.cpu) {
    std::vector<double> x((size_t)C.n, 0.0);
    PkTarget T;
    T.ctx = B.cpu, T.mem = PKRYLOV_MEM_HOST, T.b = b.data(), T.x = x.data();
    Row pr = proto;
    pr.impl = "pkrylov-cpu", pr.form = "csr";
    pkrylov_operator A = NULL;
    int rc = pkrylov_operator_create_csr64(B.cpu, C.n, 0, C.rowptr.data(), C.col.data(), C.val.data(), &A);
    if (rc)
      pk_unavailable(B.rows, pr, {"csr"}, {{PKRYLOV_SOLVER_PIPECG, false}}, pk_msg(B.cpu, rc));
    else
      pk_rows_for(B.rows, pr, T, A, pctype, 0, PKRYLOV_LAYOUT_AUTO,
                  {{PKRYLOV_SOLVER_CG, false}, {PKRYLOV_SOLVER_PIPECG, false}}, cf.cpuK, cf.cpuR, cf.maxit,
                  false);
    pkrylov_operator_destroy(&A);
  }
  set_ratios(B.rows, first, proto.precond);
  for (size_t i = first; i < B.rows.size(); i++) {
    finish_row(B.rows[i], B.copy_bw);
    print_row(B.rows[i]);
  }
}

static void run_laplacian(Bench &B, const Problem &P) {
  HostCsr C;
  laplacian_csr(P.m, C);
  char name[32];
  snprintf(name, sizeof name, "lap%d^3", P.m);
  run_csr(B, name, "laplacian", C, PKRYLOV_PRECOND_NONE);
}

static void run_laplacian27(Bench &B, const Problem &P) {
  HostCsr C;
  laplacian27_csr(P.m, C);
  char name[32];
  snprintf(name, sizeof name, "lap27pt%d^3", P.m);
  run_csr(B, name, "laplacian27", C, PKRYLOV_PRECOND_NONE);
}

static void run_matrix(Bench &B, const Problem &P) {
  pkrylov_operator A = NULL;
  int rc = pkrylov_operator_create_from_mtx(B.cpu, P.path.c_str(), &A);
  HostCsr C;
  if (!rc) rc = export_csr(A, C);
  pkrylov_operator_destroy(&A);
  if (rc) {
    Row r;
    r.problem = P.name, r.group = "matrix", r.impl = "-", r.status = "error", r.message = pk_msg(B.cpu, rc);
    B.rows.push_back(r);
    print_row(r);
    return;
  }
  run_csr(B, P.name, "matrix", C, PKRYLOV_PRECOND_JACOBI);
}

/* The SPD matrices of shared/matrices (MANIFEST.md: "SPD? yes"); the others are nonsymmetric. */
static const char *const kSpdMatrices[] = {"lap3D_7pt_n20", "lap2D_5pt_n100", "gr_900_900_crg",
                                           "ani4",          "ani1",           "1138_bus"};

static bool parse_problems(const std::string &list, const Config &cf, std::vector<Problem> &out) {
  const int ts[4][3] = {{32, 32, 32}, {128, 128, 64}, {256, 256, 128}, {512, 512, 128}};
  const int lap[4] = {32, 64, 128, 256};
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t e = list.find(',', pos);
    if (e == std::string::npos) e = list.size();
    const std::string tok = list.substr(pos, e - pos);
    pos = e + 1;
    if (tok.empty()) continue;
    Problem P;
    if (tok == "all" || tok == "ts")
      for (auto &s : ts) P.kind = "ts", P.nx = s[0], P.ny = s[1], P.nz = s[2], out.push_back(P);
    if (tok == "all" || tok == "lap")
      for (int m : lap) P = Problem(), P.kind = "lap", P.m = m, out.push_back(P);
    if (tok == "all" || tok == "lap27") P = Problem(), P.kind = "lap27", P.m = 128, out.push_back(P);
    if (tok == "all" || tok == "mtx")
      for (const char *nm : kSpdMatrices) {
        P = Problem();
        P.kind = "mtx", P.name = nm, P.path = cf.matrices + "/" + nm + ".mtx";
        struct stat st;
        if (stat(P.path.c_str(), &st) == 0)
          out.push_back(P);
        else if (tok == "mtx")
          fprintf(stderr, "pkrylov-bench-gpu: %s not found, skipped\n", P.path.c_str());
      }
    if (tok == "all" || tok == "ts" || tok == "lap" || tok == "lap27" || tok == "mtx") continue;
    P = Problem();
    if (sscanf(tok.c_str(), "ts:%dx%dx%d", &P.nx, &P.ny, &P.nz) == 3 && P.nx > 0 && P.ny > 0 && P.nz > 0) {
      P.kind = "ts";
    } else if (sscanf(tok.c_str(), "lap:%d", &P.m) == 1 && P.m > 0) {
      P.kind = "lap";
    } else if (sscanf(tok.c_str(), "lap27:%d", &P.m) == 1 && P.m > 0) {
      P.kind = "lap27";
    } else if (tok.rfind("mtx:", 0) == 0) {
      P.kind = "mtx", P.name = tok.substr(4), P.path = cf.matrices + "/" + P.name + ".mtx";
    } else {
      fprintf(stderr, "pkrylov-bench-gpu: bad problem '%s'\n", tok.c_str());
      return false;
    }
    out.push_back(P);
  }
  return true;
}

/** Find an ok row. */
static const Row *find_row(const std::vector<Row> &rows, const std::string &problem, const std::string &impl,
                           const std::string &form, const std::string &solver, const std::string &prec) {
  for (const Row &r : rows)
    if (r.problem == problem && r.impl == impl && r.form == form && r.solver == solver &&
        r.precision == prec && r.status == "ok")
      return &r;
  return NULL;
}

/** One target line: text, measured value, pass/fail ("n/a" when a row is missing). */
struct Target {
  std::string what, value, verdict;
};

static std::vector<Target> evaluate_targets(const std::vector<Row> &rows) {
  std::vector<Target> t;
  char v[96];
  for (const char *sol : {"cg", "pipecg"}) {
    const Row *r = find_row(rows, "256x256x128", "pkrylov-cuda", "thinshell", sol, "fp64");
    std::string what =
        std::string("256x256x128 matrix-free column ") + sol + " fp64 >= 80% of copy bandwidth";
    if (r) snprintf(v, sizeof v, "%.0f%%", 100 * r->fraction);
    t.push_back({what, r ? v : "-", !r ? "n/a" : r->fraction >= 0.8 ? "PASS" : "FAIL"});
    what = std::string("256x256x128 matrix-free column ") + sol + " fp64 >= 4x faster than vendor PCG";
    if (r) snprintf(v, sizeof v, "%.2fx", r->vendor_ratio);
    t.push_back({what, r ? v : "-",
                 !r || !(r->vendor_ratio == r->vendor_ratio) ? "n/a"
                 : r->vendor_ratio >= 4                      ? "PASS"
                                                             : "FAIL"});
    r = find_row(rows, "32x32x32", "pkrylov-cuda", "thinshell", sol, "fp64");
    what = std::string("32x32x32 matrix-free column ") + sol + " fp64 <= 8 us per iteration";
    if (r) snprintf(v, sizeof v, "%.2f us", 1e6 * r->t_iter);
    t.push_back({what, r ? v : "-", !r ? "n/a" : r->t_iter <= 8e-6 ? "PASS" : "FAIL"});
  }
  {
    const Row *g = find_row(rows, "256x256x128", "pkrylov-cuda", "thinshell", "cg", "fp64");
    const Row *vn = NULL;
    for (const Row &x : rows)
      if (x.problem == "256x256x128" && x.impl == "vendor(min copy)" && x.status == "ok") vn = &x;
    if (g && vn) snprintf(v, sizeof v, "%.2fx", vn->t_iter / g->t_iter);
    t.push_back({"256x256x128 matrix-free column cg fp64 vs vendor PCG copying only what gtsv modifies",
                 g && vn ? v : "-", g && vn ? "info" : "n/a"});
  }
  const Row *r = find_row(rows, "lap256^3", "pkrylov-cuda", "csr", "cg", "fp64");
  if (r) snprintf(v, sizeof v, "%.2fx", r->vendor_ratio);
  t.push_back(
      {"CSR Laplacian 256^3 plain CG (pkrylov) vs the vendor plain CG", r ? v : "-", r ? "info" : "n/a"});
  r = find_row(rows, "lap256^3", "pkrylov-cuda", "csr", "pipecg", "fp64");
  if (r) snprintf(v, sizeof v, "%.2fx", r->vendor_ratio);
  t.push_back({"CSR Laplacian 256^3 plain pipelined CG >= 1.8x the vendor plain CG", r ? v : "-",
               !r || !(r->vendor_ratio == r->vendor_ratio) ? "n/a"
               : r->vendor_ratio >= 1.8                    ? "PASS"
                                                           : "FAIL"});
  for (const char *sol : {"cg", "pipecg"}) {
    const Row *g = find_row(rows, "256x256x128", "pkrylov-cuda", "thinshell", sol, "fp64");
    const Row *c = find_row(rows, "256x256x128", "pkrylov-cpu", "thinshell", sol, "fp64");
    if (g && c) snprintf(v, sizeof v, "%.1fx", c->t_iter / g->t_iter);
    t.push_back({std::string("256x256x128 ") + sol + " GPU (matrix-free) vs CPU (matrix-free), time ratio",
                 g && c ? v : "-", g && c ? "info" : "n/a"});
  }
  return t;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--problems LIST] [--matrices DIR] [--iters K] [--repeat R] [--cpu-iters K]\n"
          "          [--cpu-repeat R] [--maxit N] [--copy-gib G] [--no-cpu] [--no-tol] [--no-gpu]\n"
          "          [--no-pkrylov-cuda] [--replace auto|K] [--json FILE]\n"
          "LIST: comma-separated all | ts | lap | lap27 | mtx | ts:NXxNYxNZ | lap:N | lap27:N | mtx:NAME\n",
          argv0);
}

int main(int argc, char **argv) {
  Bench B;
  Config &cf = B.cf;
  std::string problems = "all";
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--problems" && has)
      problems = argv[++i];
    else if (a == "--matrices" && has)
      cf.matrices = argv[++i];
    else if (a == "--iters" && has)
      cf.K = atoi(argv[++i]);
    else if (a == "--repeat" && has)
      cf.R = atoi(argv[++i]);
    else if (a == "--cpu-iters" && has)
      cf.cpuK = atoi(argv[++i]);
    else if (a == "--cpu-repeat" && has)
      cf.cpuR = atoi(argv[++i]);
    else if (a == "--maxit" && has)
      cf.maxit = atoi(argv[++i]);
    else if (a == "--copy-gib" && has)
      cf.copy_gib = atof(argv[++i]);
    else if (a == "--json" && has)
      json = argv[++i];
    else if (a == "--no-cpu")
      cf.cpu = false;
    else if (a == "--no-tol")
      cf.tol = false;
    else if (a == "--no-gpu")
      cf.gpu = false;
    else if (a == "--replace" && has) {
      const std::string v = argv[++i];
      g_replace = v == "auto" ? PKRYLOV_REPLACE_AUTO : atoi(v.c_str());
    } else if (a == "--no-pkrylov-cuda")
      cf.pkcuda = false;
    else {
      usage(argv[0]);
      return 2;
    }
  }
  if (cf.K < 1 || cf.R < 1 || cf.cpuK < 1 || cf.cpuR < 1 || cf.maxit < 1 || !(cf.copy_gib >= 1.0)) {
    fprintf(stderr,
            "pkrylov-bench-gpu: --iters, --repeat, --cpu-iters, --cpu-repeat, --maxit must be >= 1 and "
            "--copy-gib >= 1\n");
    return 2;
  }
  std::vector<Problem> plist;
  if (!parse_problems(problems, cf, plist)) return 2;

  /* ---- device and copy bandwidth ---- */
  cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  int drv = 0, rt = 0, spv = 0, blv = 0;
  double memcpy_bw = NAN, kernel_bw = NAN;
  if (cf.gpu) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
      fprintf(stderr, "pkrylov-bench-gpu: no CUDA device (use --no-gpu for the CPU rows only)\n");
      return 2;
    }
    CK_CUDA(cudaGetDeviceProperties(&prop, 0));
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    int ma = 0, mi = 0, pa = 0;
    cusparseGetProperty(MAJOR_VERSION, &ma), cusparseGetProperty(MINOR_VERSION, &mi);
    cusparseGetProperty(PATCH_LEVEL, &pa);
    spv = 1000 * ma + 100 * mi + pa;
    cublasGetProperty(MAJOR_VERSION, &ma), cublasGetProperty(MINOR_VERSION, &mi);
    cublasGetProperty(PATCH_LEVEL, &pa);
    blv = 1000 * ma + 100 * mi + pa;
    kernel_bw = copy_bandwidth(cf.copy_gib, &memcpy_bw);
    B.copy_bw = fmax(kernel_bw, memcpy_bw); /* the reference: the faster of the two copies */
  }
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  const char *omp = getenv("OMP_NUM_THREADS");
  printf("pkrylov GPU benchmark\n");
  if (cf.gpu) {
    printf("device: %s, %d SMs, %.0f MiB L2, %.1f GiB, driver %d, runtime %d, cuSPARSE %d, cuBLAS %d\n",
           prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
           prop.totalGlobalMem / 1073741824.0, drv, rt, spv, blv);
    printf(
        "copy bandwidth over %.1f GiB, read + write counted, best of 10: copy kernel %.1f GB/s, cudaMemcpy "
        "D2D %.1f GB/s;\nreference for the fractions below (the faster): %.1f GB/s\n",
        cf.copy_gib, kernel_bw / 1e9, memcpy_bw / 1e9, B.copy_bw / 1e9);
  }
  printf("host: %ld CPUs online, OMP_NUM_THREADS=%s\n", ncpu, omp ? omp : "(unset: all)");
  printf(
      "time per iteration: (t(10+K) - t(10)) / K, best of R; GPU K=%d R=%d, CPU K=%d R=%d; its@1e-8 capped "
      "at %d (negative: not reached)\n\n",
      cf.K, cf.R, cf.cpuK, cf.cpuR, cf.maxit);

  if (pkrylov_context_create(PKRYLOV_BACKEND_CPU, &B.cpu)) {
    fprintf(stderr, "pkrylov-bench-gpu: CPU context: %s\n", pkrylov_last_error_message());
    return 2;
  }
  if (cf.gpu && !cf.pkcuda) B.cuda_why = "not run (--no-pkrylov-cuda)";
  if (cf.gpu && cf.pkcuda) {
    const int rc = pkrylov_context_create(PKRYLOV_BACKEND_CUDA, &B.cuda);
    if (rc) {
      B.cuda = NULL;
      B.cuda_why = std::string("no CUDA context: ") + pk_msg(NULL, rc);
      printf("pkrylov CUDA rows unavailable: %s\n\n", B.cuda_why.c_str());
    }
  }
  print_header();
  for (const Problem &P : plist) {
    if (P.kind == "ts")
      run_thinshell(B, P);
    else if (P.kind == "lap")
      run_laplacian(B, P);
    else if (P.kind == "lap27")
      run_laplacian27(B, P);
    else
      run_matrix(B, P);
  }
  if (B.cuda) pkrylov_context_destroy(&B.cuda);
  pkrylov_context_destroy(&B.cpu);

  const std::vector<Target> targets = evaluate_targets(B.rows);
  printf(
      "\ntargets (vend/it = vendor time per iteration / this row's; reference vendor row: PCG column for the "
      "thin shell, plain CG for the Laplacians, Jacobi PCG for the matrices)\n");
  for (const Target &t : targets)
    printf("  %-5s %-12s %s\n", t.verdict.c_str(), t.value.c_str(), t.what.c_str());

  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) {
      perror(json);
      return 2;
    }
    fprintf(f,
            "{\"benchmark\":\"pkrylov-bench-gpu\",\n\"device\":{\"name\":%s,\"sms\":%d,\"l2_bytes\":%d,"
            "\"memory_bytes\":%.0f,\"driver\":%d,\"runtime\":%d,\"cusparse\":%d,\"cublas\":%d},\n",
            js(cf.gpu ? prop.name : "none").c_str(), prop.multiProcessorCount, prop.l2CacheSize,
            (double)prop.totalGlobalMem, drv, rt, spv, blv);
    fprintf(f,
            "\"copy_GBs\":%s,\"copy_kernel_GBs\":%s,\"memcpy_GBs\":%s,\"copy_gib\":%.2f,\"host_cpus\":%ld,"
            "\"omp_num_threads\":%s,\n",
            jn(B.copy_bw / 1e9, "%.2f").c_str(), jn(kernel_bw / 1e9, "%.2f").c_str(),
            jn(memcpy_bw / 1e9, "%.2f").c_str(), cf.copy_gib, ncpu, js(omp ? omp : "").c_str());
    fprintf(f,
            "\"timing\":{\"gpu_iters\":%d,\"gpu_repeat\":%d,\"cpu_iters\":%d,\"cpu_repeat\":%d,\"maxit\":%d,"
            "\"method\":\"(t(10+K)-t(10))/K, best of R\"},\n",
            cf.K, cf.R, cf.cpuK, cf.cpuR, cf.maxit);
    fprintf(f, "\"pkrylov_cuda\":%s,\n",
            js(!cf.gpu              ? "not run (--no-gpu)"
               : B.cuda_why.empty() ? "available"
                                    : B.cuda_why)
                .c_str());
    fprintf(f, "\"byte_model\":[");
    for (size_t i = 0; i < sizeof kByteModel / sizeof kByteModel[0]; i++)
      fprintf(f, "%s{\"solver\":%s,\"precond\":%s,\"words_fp64\":%g,\"words_mixed\":%g,\"why\":%s}",
              i ? "," : "", js(kByteModel[i].solver).c_str(), js(kByteModel[i].precond).c_str(),
              kByteModel[i].words_fp64, kByteModel[i].words_mixed, js(kByteModel[i].why).c_str());
    fprintf(f, "],\n\"rows\":[\n");
    for (size_t i = 0; i < B.rows.size(); i++) {
      const Row &r = B.rows[i];
      fprintf(f,
              "%s{\"problem\":%s,\"group\":%s,\"n\":%lld,\"nnz\":%lld,\"impl\":%s,\"form\":%s,\"storage\":%s,"
              "\"solver\":%s,"
              "\"precond\":%s,\"precision\":%s,\"status\":%s,\"message\":%s,\"time_per_iteration_s\":%s,"
              "\"bytes_per_iteration\":%s,\"GBs\":%s,\"fraction_of_copy\":%s,\"vendor_over_this\":%s,"
              "\"iterations_to_1e-8\":%d,\"rel_residual\":%s}",
              i ? ",\n" : "", js(r.problem).c_str(), js(r.group).c_str(), (long long)r.n, (long long)r.nnz,
              js(r.impl).c_str(), js(r.form).c_str(), js(r.storage).c_str(), js(r.solver).c_str(),
              js(r.precond).c_str(),
              js(r.precision).c_str(), js(r.status).c_str(), js(r.message).c_str(), jn(r.t_iter).c_str(),
              jn(r.bytes, "%.0f").c_str(), jn(r.gbs, "%.3f").c_str(), jn(r.fraction, "%.4f").c_str(),
              jn(r.vendor_ratio, "%.4f").c_str(), r.its_tol, jn(r.relres, "%.3e").c_str());
    }
    fprintf(f, "\n],\n\"targets\":[");
    for (size_t i = 0; i < targets.size(); i++)
      fprintf(f, "%s{\"what\":%s,\"value\":%s,\"verdict\":%s}", i ? "," : "", js(targets[i].what).c_str(),
              js(targets[i].value).c_str(), js(targets[i].verdict).c_str());
    fprintf(f, "]}\n");
    fclose(f);
  }
  return 0;
}
