/**
 * @file xdot_kernel.h
 * @brief The row loop of xdot.c for one vector width, included once per width (a template): xdot.c defines
 *        XD_V (doubles per vector), XD_SFX (the name suffix) and XD_TARGET (a target attribute, or nothing)
 *        before each inclusion. Private to xdot.c.
 */
#define XD_CAT2(a, b) a##b
#define XD_CAT(a, b) XD_CAT2(a, b)
#define XD_VD XD_CAT(xd_vd, XD_SFX)
#define XD_VI XD_CAT(xd_vi, XD_SFX)
#define XD_NV (PK_XD_W / XD_V)
#define XD_ANY XD_CAT(xd_any_nonzero, XD_SFX)
#define XD_DEEP XD_CAT(xd_deep, XD_SFX)
#define XD_ADD XD_CAT(xd_add, XD_SFX)

typedef double XD_VD __attribute__((vector_size(8 * XD_V)));
typedef int64_t XD_VI __attribute__((vector_size(8 * XD_V)));

/** Nonzero when some lane of e is not 0 (NaN included). */
XD_TARGET static inline __attribute__((always_inline)) int XD_ANY(const XD_VD *e) {
  const XD_VI m = *e != 0.0;
  int64_t r = 0;
  for (int l = 0; l < XD_V; l++) r |= m[l];
  return r != 0;
}

/**
 * The rest of an addition whose second error e (sums s0, s1 of levels 0 and 1) is not 0 in some lane of
 * vector h: the levels 2..PK_XD_K-1 of stream st of sum j, and lane by lane the accumulator for what is
 * left (or, where the chain is not finite, the term p itself, the lane's expansion unchanged).
 */
XD_TARGET __attribute__((noinline)) static void XD_DEEP(pk_xdot *X, int j, int st, int h, XD_VD *a0, XD_VD *a1,
                                                        const XD_VD *p, const XD_VD *s0, const XD_VD *s1,
                                                        const XD_VD *e1) {
  XD_VD lv[PK_XD_K], e = *e1;
  for (int v = 2; v < PK_XD_K; v++) memcpy(&lv[v], X->lev[j][st][v] + h * XD_V, sizeof lv[v]);
  lv[0] = *s0, lv[1] = *s1;
  for (int v = 2; v < PK_XD_K; v++) {
    PK_XD_TWOSUM(XD_VD, lv[v], e, lv[v], e);
    if (!XD_ANY(&e)) {
      *a0 = lv[0], *a1 = lv[1];
      for (int u = 2; u < PK_XD_K; u++) memcpy(X->lev[j][st][u] + h * XD_V, &lv[u], sizeof lv[u]);
      return;
    }
  }
  for (int l = 0; l < XD_V; l++) {
    if (!isfinite(e[l])) { /* a non-finite term or an overflowing sum: the term itself, exact or counted */
      xd_acc_add(X, j, (*p)[l]);
      continue;
    }
    (*a0)[l] = lv[0][l], (*a1)[l] = lv[1][l];
    for (int v = 2; v < PK_XD_K; v++) X->lev[j][st][v][h * XD_V + l] = lv[v][l];
    if (e[l] != 0.0) xd_acc_add(X, j, e[l]);
  }
}

/** (a0, a1) += p in every lane of vector h (stream st of sum j): the fast path, or XD_DEEP. */
#define XD_ADD_TERMS(X, j, st, h, a0, a1, p)                                                       \
  do {                                                                                             \
    XD_VD s0_, s1_, e_;                                                                            \
    PK_XD_TWOSUM(XD_VD, a0, p, s0_, e_);                                                                  \
    PK_XD_TWOSUM(XD_VD, a1, e_, s1_, e_);                                                                 \
    if (__builtin_expect(!XD_ANY(&e_), 1))                                                         \
      a0 = s0_, a1 = s1_;                                                                          \
    else {                                                                                         \
      XD_VD t0_ = a0, t1_ = a1, tp_ = p;                                                           \
      XD_DEEP(X, j, st, h, &t0_, &t1_, &tp_, &s0_, &s1_, &e_);                                     \
      a0 = t0_, a1 = t1_;                                                                          \
    }                                                                                              \
  } while (0)

/**
 * One vector of products of rows [i, i + PK_XD_W) of a run (b: its first row, len its length), vector h:
 * x, y (zeros past the run's end and at dry rows) and p = x*y (XD_LOAD declares xv, yv, p).
 */
#define XD_LOAD(xs, ys, wet, b, i, h, len)                                                         \
  XD_VD xv, yv;                                                                                    \
  memcpy(&xv, (xs) + (h) * XD_V, sizeof xv);                                                       \
  memcpy(&yv, (ys) + (h) * XD_V, sizeof yv);                                                       \
  if (wet) { /* dry rows add nothing (their product, NaN or not, is not formed): 0 * 0 there */    \
    XD_VI m_, xb_, yb_;                                                                            \
    for (int l = 0; l < XD_V; l++) {                                                               \
      const int64_t r_ = (i) + (h) * XD_V + l;                                                     \
      m_[l] = r_ < (len) && (wet)[(b) + r_] ? -1 : 0;                                              \
    }                                                                                              \
    memcpy(&xb_, &xv, sizeof xb_), memcpy(&yb_, &yv, sizeof yb_);                                  \
    xb_ &= m_, yb_ &= m_;                                                                          \
    memcpy(&xv, &xb_, sizeof xv), memcpy(&yv, &yb_, sizeof yv);                                    \
  }                                                                                                \
  const XD_VD p = xv * yv

/** The errors fma(x, y, -p) of the products p (0 where p is not finite: nothing more to add there). */
#define XD_PROD_ERR(pe, xv, yv, p)                                                                 \
  XD_VD pe = {0};                                                                                  \
  for (int l = 0; l < XD_V; l++) pe[l] = isfinite(p[l]) ? fma(xv[l], yv[l], -p[l]) : 0.0

/** The rows of the call, PK_XD_W at a time: xs, ys point at them (a copy with zeros for a run's tail). */
#define XD_FOR_ROWS(body)                                                                          \
  for (int64_t k = 0; k < nrun; k++) {                                                             \
    const int64_t b = i0 + k * stride;                                                             \
    for (int64_t i = 0; i < len; i += PK_XD_W) {                                                   \
      double tx[PK_XD_W], ty[PK_XD_W];                                                             \
      const double *xs = x + b + i, *ys = y + b + i;                                               \
      if (i + PK_XD_W > len) {                                                                     \
        for (int l = 0; l < PK_XD_W; l++)                                                          \
          tx[l] = i + l < len ? xs[l] : 0.0, ty[l] = i + l < len ? ys[l] : 0.0;                    \
        xs = tx, ys = ty;                                                                          \
      }                                                                                            \
      body                                                                                         \
    }                                                                                              \
  }

/** Levels 0 and 1 of both streams of sum j, vector by vector: loaded from X (put 0) or stored there (1). */
#define XD_LEVELS(X, j, a0, a1, b0, b1, put)                                                       \
  do {                                                                                             \
    XD_VD *v_[4] = {a0, a1, b0, b1};                                                               \
    for (int q_ = 0; q_ < 4; q_++)                                                                 \
      for (int h_ = 0; h_ < XD_NV; h_++) {                                                         \
        double *l_ = (X)->lev[j][q_ / 2][q_ % 2] + h_ * XD_V;                                      \
        if (put)                                                                                   \
          memcpy(l_, &v_[q_][h_], sizeof(XD_VD));                                                  \
        else                                                                                       \
          memcpy(&v_[q_][h_], l_, sizeof(XD_VD));                                                  \
      }                                                                                            \
  } while (0)

/**
 * pk_xdot_add for this width. First optimistically: two levels, no test per vector, only a flag that some
 * second error was not 0 (or NaN); when none was, the levels are stored and that is all. Otherwise the call
 * is done again from the stored levels (the first pass changed nothing), carefully: each vector tested,
 * XD_DEEP where needed; and the next few calls of the sum start carefully (data that needed it once
 * likely needs it again).
 */
XD_TARGET static void XD_ADD(pk_xdot *X, int j, const double *x, const double *y, const uint8_t *wet,
                             int exact_prod, int64_t i0, int64_t len, int64_t nrun, int64_t stride) {
  /* levels 0 and 1 of the products' stream (a) and of their errors' (b, exact_prod), vector by vector */
  XD_VD a0[XD_NV], a1[XD_NV], b0[XD_NV], b1[XD_NV];
  XD_LEVELS(X, j, a0, a1, b0, b1, 0);
  if (X->careful[j] == 0) {
    XD_VI flag = {0};
    XD_FOR_ROWS(for (int h = 0; h < XD_NV; h++) {
      XD_LOAD(xs, ys, wet, b, i, h, len);
      XD_VD e;
      PK_XD_TWOSUM(XD_VD, a0[h], p, a0[h], e);
      PK_XD_TWOSUM(XD_VD, a1[h], e, a1[h], e);
      flag |= e != 0.0;
      if (exact_prod) {
        XD_PROD_ERR(pe, xv, yv, p);
        PK_XD_TWOSUM(XD_VD, b0[h], pe, b0[h], e);
        PK_XD_TWOSUM(XD_VD, b1[h], e, b1[h], e);
        flag |= e != 0.0;
      }
    })
    int64_t any = 0;
    for (int l = 0; l < XD_V; l++) any |= flag[l];
    if (!any) {
      XD_LEVELS(X, j, a0, a1, b0, b1, 1);
      return;
    }
    XD_LEVELS(X, j, a0, a1, b0, b1, 0); /* again from the stored levels */
    X->careful[j] = PK_XD_CAREFUL_CALLS;
  } else {
    X->careful[j]--;
  }
  XD_FOR_ROWS(for (int h = 0; h < XD_NV; h++) {
    XD_LOAD(xs, ys, wet, b, i, h, len);
    XD_ADD_TERMS(X, j, 0, h, a0[h], a1[h], p);
    if (exact_prod) {
      XD_PROD_ERR(pe, xv, yv, p);
      XD_ADD_TERMS(X, j, 1, h, b0[h], b1[h], pe);
    }
  })
  XD_LEVELS(X, j, a0, a1, b0, b1, 1);
}

#undef XD_LEVELS
#undef XD_FOR_ROWS
#undef XD_PROD_ERR
#undef XD_LOAD
#undef XD_ADD_TERMS
#undef XD_ADD
#undef XD_DEEP
#undef XD_ANY
#undef XD_NV
#undef XD_VI
#undef XD_VD
#undef XD_CAT
#undef XD_CAT2
#undef XD_V
#undef XD_SFX
#undef XD_TARGET
