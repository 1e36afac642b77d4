/* The Sinkhorn engine's inner loops on the CPU in float32, one matrix at a time.
 *
 * Built with the system's C compiler on first use and loaded through ctypes by
 * `_sinkhorn_native.py`; `_sinkhorn_engine.py` holds the same arithmetic in torch (the
 * reference the tests compare against, and the path taken where no compiler is found). Every
 * matrix here stops on its own, so a batch costs the iterations its matrices need, not those
 * of its slowest one; the matrices of a batch are shared among OpenMP threads (PyTorch's own
 * runtime, loaded before this library, so the two share one pool of threads).
 *
 * Layout: matrices are row-major `n x n`, consecutive in memory. Inside, every matrix is
 * copied into rows padded with zeros to `s` floats (a multiple of 8), so that the products
 * run on whole vectors of eight floats without reordering any sum.
 */

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- vectors */

/* Eight floats: the compiler maps these onto the CPU's vector registers (AVX: one each). */
typedef float f8 __attribute__((vector_size(32)));

static inline f8 load8(const float *p) {
    f8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store8(float *p, f8 v) { memcpy(p, &v, sizeof v); }

static inline int64_t padded(int64_t n) { return (n + 7) / 8 * 8; }

static inline f8 all8(float x) { return (f8){x, x, x, x, x, x, x, x}; }

/* The lanes of `yes` where `where` is set (all bits of a lane), else those of `no`. */
typedef int32_t i8 __attribute__((vector_size(32)));

static inline f8 choose(i8 where, f8 yes, f8 no) { return (f8)(((i8)yes & where) | ((i8)no & ~where)); }

/* Each lane of `x` swapped with the lane `width` away (width 4, 2, 1). */
static inline f8 swapped(f8 x, int width) {
    static const i8 order[5] = {[1] = {1, 0, 3, 2, 5, 4, 7, 6}, [2] = {2, 3, 0, 1, 6, 7, 4, 5},
                                [4] = {4, 5, 6, 7, 0, 1, 2, 3}};
    return __builtin_shuffle(x, order[width]);
}

/* The largest and the sum of the eight lanes of `x`, in three steps each. */
static inline float largest8(f8 x) {
    for (int width = 4; width; width /= 2) x = choose(swapped(x, width) > x, swapped(x, width), x);
    return x[0];
}

static inline float sum8(f8 x) {
    for (int width = 4; width; width /= 2) x += swapped(x, width);
    return x[0];
}

/* exp(z) for z <= 0 (softmax after subtracting the row's maximum), within a few units of
 * the last place: Cody-Waite reduction z = k log 2 + r, |r| <= log(2) / 2, and the degree-7
 * polynomial of Cephes' expf for e^r; below -87 (and at -inf) exactly 0. Not for NaN. */
static inline f8 exp8(f8 z) {
    const i8 zero = z < all8(-87.0f);
    z = choose(zero, all8(-87.0f), z);
    f8 k = z * all8(1.44269504088896341f) + all8(0.5f); /* floor(z / log 2 + 1/2) */
    i8 n = __builtin_convertvector(k, i8);
    n += __builtin_convertvector(n, f8) > k; /* truncation went up: one less */
    k = __builtin_convertvector(n, f8);
    const f8 r = z - k * all8(0.693359375f) - k * all8(-2.12194440e-4f);
    f8 y = all8(1.9875691500e-4f);
    y = y * r + all8(1.3981999507e-3f);
    y = y * r + all8(8.3334519073e-3f);
    y = y * r + all8(4.1665795894e-2f);
    y = y * r + all8(1.6666665459e-1f);
    y = y * r + all8(5.0000001201e-1f);
    y = y * r * r + r + all8(1.0f);
    return (f8)((i8)(y * (f8)((n + 127) << 23)) & ~zero); /* times 2^n */
}

/* y = x^T M over `rows` rows of M (row stride `s`, a multiple of 8): y_j = sum_i x_i M_ij for
 * j < s. Column blocks of up to four vectors are summed in registers over all rows at once,
 * the even rows and the odd rows in two sums added at the end (twice the independent
 * additions in flight). */
#define BLOCK(w)                                                                        \
    do {                                                                                \
        f8 even[w], odd[w];                                                             \
        for (int q = 0; q < (w); q++) even[q] = odd[q] = (f8){0};                       \
        int64_t i = 0;                                                                  \
        for (; i + 1 < rows; i += 2) {                                                  \
            const float *row = m + i * s + j;                                           \
            for (int q = 0; q < (w); q++) {                                             \
                even[q] += x[i] * load8(row + 8 * q);                                   \
                odd[q] += x[i + 1] * load8(row + s + 8 * q);                            \
            }                                                                           \
        }                                                                               \
        if (i < rows)                                                                   \
            for (int q = 0; q < (w); q++) even[q] += x[i] * load8(m + i * s + j + 8 * q); \
        for (int q = 0; q < (w); q++) store8(y + j + 8 * q, even[q] + odd[q]);          \
        j += 8 * (w);                                                                   \
    } while (0)

static inline void vec_mat(const float *restrict x, const float *restrict m, int64_t rows, int64_t s,
                    float *restrict y) {
    int64_t j = 0;
    while (s - j >= 32) BLOCK(4);
    switch ((s - j) / 8) {
    case 3: BLOCK(3); break;
    case 2: BLOCK(2); break;
    case 1: BLOCK(1); break;
    }
}

/* y[0:s] += sum_r x[r xs] m[r ms : r ms + s] over `rows` rows (s a multiple of 8): a sum of
 * scaled rows, in registers for up to 32 columns at a time. */
static void accumulate(const float *restrict x, int64_t xs, const float *restrict m, int64_t ms,
                       int64_t rows, int64_t s, float *restrict y) {
    for (int64_t j = 0; j < s; j += 32) {
        const int w = s - j >= 32 ? 4 : (int)(s - j) / 8;
        f8 acc[4] = {{0}};
        for (int64_t r = 0; r < rows; r++)
            for (int q = 0; q < w; q++) acc[q] += x[r * xs] * load8(m + r * ms + j + 8 * q);
        for (int q = 0; q < w; q++) store8(y + j + 8 * q, load8(y + j + 8 * q) + acc[q]);
    }
}

static inline float clamped(float x) { return x < FLT_MIN ? FLT_MIN : x; } /* keeps NaN */

static inline float inverse(float x) { return 1.0f / clamped(x); }

/* out = 1 / max(y, FLT_MIN) for the first n of `s` entries (a multiple of 8), 0 beyond: in
 * whole vectors, as a division left over after them would wait for the one before it. */
static inline void invert(const float *y, int64_t n, int64_t s, float *out) { /* in place too */
    const f8 tiny = all8(FLT_MIN);
    for (int64_t j = 0; j < s; j += 8) {
        const f8 x = load8(y + j);
        store8(out + j, all8(1.0f) / choose(x < tiny, tiny, x));
    }
    for (int64_t j = n; j < s; j++) out[j] = 0.0f;
}

/* ------------------------------------------------------------------------- batches */

typedef void (*one_matrix)(const void *args, int64_t b, float *work);

/* fn(args, b, work) for every matrix b < count, shared among `threads` threads, each with
 * its own `work` of `floats` floats. Returns 0, or -1 if a work space could not be had. */
static int for_each(int64_t count, int threads, size_t floats, one_matrix fn,
                    const void *args) { /* `work` is aligned for f8 */
    int failed = 0;
    threads = count > 8 ? threads : 1; /* a few matrices: not worth waking another thread */
#pragma omp parallel num_threads(threads > 0 ? threads : 1) reduction(|| : failed)
    {
        float *work = aligned_alloc(32, (floats * sizeof(float) + 31) / 32 * 32);
        failed = work == NULL;
#pragma omp for schedule(dynamic, 8)
        for (int64_t b = 0; b < count; b++)
            if (work) fn(args, b, work);
        free(work);
    }
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------------------- forward */

/* Half-steps 1 and 2 of one matrix of logits X: S = the softmax of each row (padding an
 * identity block: with `mask`, the sample's n real-token flags, a real row ignores the padded
 * keys and a padded row is e_i) into `soft` when it is not NULL, then K = S / (1^T S) into `k`
 * and K^T into `kt` (n rows of `s` floats, zero beyond n), and the inverse column sums into
 * `inverse_sums` (s floats). Returns whether a real entry of K lies below `floor` (`mask`: the
 * sample's n real-token flags, or NULL): K would underflow in the scaling domain. */
static int kernel(const float *logits, const uint8_t *mask, int64_t n, float floor, float *soft,
                  float *k, float *kt, float *inverse_sums) {
    const int64_t s = padded(n);
    /* Three passes over the whole matrix, so that its exponentials are independent of each
     * other (row by row, each row's would wait for its maximum). First the padded rows, the
     * logits and every row's maximum, ... */
    for (int64_t i = 0; i < n; i++) {
        float *ki = k + i * s;
        if (mask && !mask[i]) { /* a padded query: e_i, exp(0 - 0) and -inf elsewhere */
            for (int64_t j = 0; j < s; j++) ki[j] = j == i ? 0.0f : -INFINITY;
            inverse_sums[i] = 0.0f; /* here: the row's maximum */
            continue;
        }
        memcpy(ki, logits + i * n, (size_t)n * sizeof(float));
        for (int64_t j = n; j < s; j++) ki[j] = -INFINITY;
        if (mask)
            for (int64_t j = 0; j < n; j++) ki[j] = mask[j] ? ki[j] : -INFINITY;
        f8 top = load8(ki);
        for (int64_t j = 8; j < s; j += 8) top = choose(load8(ki + j) > top, load8(ki + j), top);
        inverse_sums[i] = largest8(top);
    }
    /* ... then every exponential (NaN logits give a row of NaN), ... */
    i8 nan = {0};
    for (int64_t i = 0; i < n; i++) {
        const f8 most = all8(inverse_sums[i]);
        for (int64_t j = 0; j < s; j += 8) {
            const f8 x = load8(k + i * s + j);
            nan |= x != x;
            store8(k + i * s + j, exp8(x - most));
        }
    }
    int any_nan = 0;
    for (int q = 0; q < 8; q++) any_nan |= nan[q];
    /* ... then each row divided by its sum, the column sums gathered on the way, ... */
    f8 columns[4] = {{0}}; /* s <= 32 here: the sums in registers; else in `inverse_sums` */
    const int in_registers = s <= 32;
    if (!in_registers)
        for (int64_t j = 0; j < s; j++) inverse_sums[j] = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float *ki = k + i * s;
        f8 sum = all8(0.0f);
        for (int64_t j = 0; j < s; j += 8) sum += load8(ki + j);
        const f8 scale = all8(any_nan ? NAN : 1.0f / sum8(sum));
        for (int64_t j = 0; j < s; j += 8) {
            const f8 row = load8(ki + j) * scale;
            store8(ki + j, row);
            if (in_registers)
                columns[j / 8] += row;
            else
                store8(inverse_sums + j, load8(inverse_sums + j) + row);
        }
    }
    if (in_registers)
        for (int64_t j = 0; j < s; j += 8) store8(inverse_sums + j, columns[j / 8]);
    if (soft) memcpy(soft, k, (size_t)(n * s) * sizeof(float));
    invert(inverse_sums, n, s, inverse_sums);
    /* ... then K: each column divided by its sum, checked for underflow, and transposed. */
    int low = 0;
    for (int64_t j = 0; j < n; j++) memset(kt + j * s + n, 0, (size_t)(s - n) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        float *ki = k + i * s;
        for (int64_t j = 0; j < s; j += 8) store8(ki + j, load8(ki + j) * load8(inverse_sums + j));
        for (int64_t j = 0; j < n; j++) kt[j * s + i] = ki[j];
        if (mask && !mask[i]) continue;
        for (int64_t j = 0; j < n; j++) low |= (ki[j] < floor) & (mask == NULL || mask[j]);
    }
    return low;
}

typedef struct {
    const float *logits;
    const uint8_t *mask;
    int64_t count, n, half_steps;
    float tol, floor;
    float *p, *error;
    uint8_t *converged, *underflow;
} forward_args;

/* Sinkhorn of one matrix of logits: half-steps 1 and 2 (`kernel`), K = S / (1^T S); half-steps 3 .. half_steps - 1 run in the scaling domain (row steps
 * u = 1 / (K v), column steps v = 1 / (K^T u), from u = v = 1), and the last one is an
 * explicit normalization of K diag(v) over rows (odd half_steps) or of diag(u) K over
 * columns (even), written into P. Before every row step the matrix stops if its row error
 * max_i |u_i (K v)_i - 1| is at most `tol` (`tol` < 0: never): it converged; otherwise
 * `error` is the marginal error left after the last half-step. A real entry of K below
 * `floor` would underflow in the scaling domain: the matrix is flagged and nothing is
 * written for it. */
/* One matrix's scaling iteration: K and K^T (padded), the last product y, the scalings u, v. */
typedef struct {
    float *k, *kt, *y, *u, *v;
    int running;
} scaling;

/* Half-step `step` (a row step when odd) of one matrix; before a row step, whether it has
 * converged (then it stops: returns 1). */
static inline int half_step(scaling *m, int64_t step, int64_t n, int64_t s, float tol) {
    if (step % 2) { /* row step */
        vec_mat(m->v, m->kt, n, s, m->y);
        if (tol >= 0.0f) {
            int above = 0; /* rows whose error exceeds tol; NaN counts: never converged */
            for (int64_t i = 0; i < n; i++) above |= !(fabsf(m->u[i] * m->y[i] - 1.0f) <= tol);
            if (!above) return 1;
        }
        invert(m->y, n, s, m->u);
    } else { /* column step */
        vec_mat(m->u, m->k, n, s, m->y);
        invert(m->y, n, s, m->v);
    }
    return 0;
}

/* The last half-step as an explicit normalization into P, and the marginal error it leaves
 * when the matrix did not converge. */
static void finish(const forward_args *a, int64_t b, const scaling *m) {
    const int64_t n = a->n, s = padded(n);
    const uint8_t *mask = a->mask ? a->mask + b * n : NULL;
    float *p = a->p + b * n * n, *y = m->y;
    if (a->half_steps % 2) { /* rows of K diag(v) */
        vec_mat(m->v, m->kt, n, s, y);
        for (int64_t i = 0; i < n; i++) {
            const float r = inverse(y[i]);
            for (int64_t j = 0; j < n; j++) p[i * n + j] = m->k[i * s + j] * m->v[j] * r;
        }
    } else { /* columns of diag(u) K */
        vec_mat(m->u, m->k, n, s, y);
        for (int64_t j = 0; j < n; j++) y[j] = inverse(y[j]);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) p[i * n + j] = m->u[i] * m->k[i * s + j] * y[j];
    }
    if (a->converged[b]) return;
    /* rows after a column step, columns after a row step, real lines only
     * (`_sinkhorn_engine.nearly_converged`) */
    float error = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i]) continue;
        float sum = 0.0f;
        for (int64_t j = 0; j < n; j++) sum += a->half_steps % 2 ? p[j * n + i] : p[i * n + j];
        const float e = fabsf(sum - 1.0f);
        if (!(e <= error)) error = e;
    }
    a->error[b] = error;
}

/* Matrices 2 pair and 2 pair + 1 side by side: each half-step of one is a chain of
 * dependent operations, and the two chains run in the same time as one. */
static void forward_pair(const void *args, int64_t pair, float *work) {
    const forward_args *a = args;
    const int64_t n = a->n, s = padded(n), first = 2 * pair;
    const int count = first + 1 < a->count ? 2 : 1;
    scaling m[2];
    for (int q = 0; q < count; q++) {
        const int64_t b = first + q;
        float *w = work + q * (2 * n * s + 3 * s);
        m[q] = (scaling){w, w + n * s, w + 2 * n * s, w + 2 * n * s + s, w + 2 * n * s + 2 * s, 1};
        a->converged[b] = 0;
        a->error[b] = 0.0f;
        a->underflow[b] = (uint8_t)kernel(a->logits + b * n * n, a->mask ? a->mask + b * n : NULL,
                                          n, a->floor, NULL, m[q].k, m[q].kt, m[q].y);
        m[q].running = !a->underflow[b];
        for (int64_t i = 0; i < s; i++) m[q].u[i] = m[q].v[i] = 1.0f;
    }
    for (int64_t step = 3; step < a->half_steps && (m[0].running || m[count - 1].running); step++)
        for (int q = 0; q < count; q++)
            if (m[q].running && half_step(&m[q], step, n, s, a->tol)) {
                m[q].running = 0;
                a->converged[first + q] = 1;
            }
    for (int q = 0; q < count; q++)
        if (!a->underflow[first + q]) finish(a, first + q, &m[q]);
}

int rc_forward(const float *logits, const uint8_t *mask, int64_t count, int64_t n,
               int64_t half_steps, float tol, float floor, float *p, float *error,
               uint8_t *converged, uint8_t *underflow, int threads) {
    const forward_args args = {logits, mask, count, n, half_steps, tol, floor, p, error,
                               converged, underflow};
    const int64_t s = padded(n);
    return for_each((count + 1) / 2, threads, (size_t)(2 * (2 * n * s + 3 * s)), forward_pair,
                    &args);
}

/* ------------------------------------------------------------------------- unrolled backward */

typedef struct {
    const float *logits, *g;
    const uint8_t *mask;
    int64_t n, half_steps;
    float floor;
    float *grad;
    uint8_t *underflow;
} unrolled_args;

/* The exact gradient with respect to the logits of one Sinkhorn matrix, every half-step
 * recomputed from the logits (`_sinkhorn_engine._scaling_backward` of `_iterate`, then the
 * column division and the softmax): given G, the gradient with respect to P (taken
 * as zero on pairs with a padded token), writes the gradient with respect to the logits, zero
 * on pairs with a padded token (their logits are not used). A kernel that would underflow is
 * flagged and nothing is written. */
static void unrolled_one(const void *args, int64_t b, float *work) {
    const unrolled_args *a = args;
    const int64_t n = a->n, s = padded(n), half = a->half_steps;
    const int64_t steps = half > 3 ? half - 3 : 0;
    const uint8_t *mask = a->mask ? a->mask + b * n : NULL;
    const float *gb = a->g + b * n * n;
    float *out = a->grad + b * n * n;
    float *k = work, *kt = k + n * s, *gk = kt + n * s, *soft = gk + n * s, *products = soft + n * s;
    float *scalings = products + steps * s, *ones = scalings + steps * s, *sums = ones + s;
    float *gu = sums + s, *gv = gu + s, *gs = gv + s, *column = gs + s;
    a->underflow[b] = (uint8_t)kernel(a->logits + b * n * n, mask, n, a->floor, soft, k, kt,
                                      column);
    if (a->underflow[b]) return;
    float *g = out; /* G with its padded pairs zeroed, kept in `out` until the end */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            g[i * n + j] = (!mask || (mask[i] && mask[j])) ? gb[i * n + j] : 0.0f;
    for (int64_t i = 0; i < s; i++) ones[i] = 1.0f;
    const float *u = ones, *v = ones;
    for (int64_t t = 0; t < steps; t++) { /* even t: row steps, odd t: column steps */
        float *prod = products + t * s, *scale = scalings + t * s;
        vec_mat(t % 2 ? u : v, t % 2 ? k : kt, n, s, prod); /* K^T u : K v */
        invert(prod, n, s, scale);
        if (t % 2) v = scale; else u = scale;
    }
    /* The final normalization and its gradient: odd half_steps normalize the rows of
     * Q = K diag(v), even ones the columns of Q = diag(u) K. */
    memset(gu, 0, (size_t)s * sizeof(float));
    memset(gv, 0, (size_t)s * sizeof(float));
    if (half % 2) {
        vec_mat(v, kt, n, s, sums); /* K v */
        for (int64_t i = 0; i < n; i++) {
            const float *ki = k + i * s, *gi = g + i * n, sum = clamped(sums[i]);
            float gp = 0.0f;
            for (int64_t j = 0; j < n; j++) gp += gi[j] * (ki[j] * v[j] / sum);
            for (int64_t j = 0; j < n; j++) {
                const float gq = (gi[j] - gp) / sum;
                gk[i * s + j] = gq * v[j];
                gv[j] += gq * ki[j];
            }
        }
    } else {
        vec_mat(u, k, n, s, sums); /* K^T u */
        for (int64_t j = 0; j < n; j++) sums[j] = clamped(sums[j]);
        memset(gs, 0, (size_t)s * sizeof(float));
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) gs[j] += g[i * n + j] * (u[i] * k[i * s + j] / sums[j]);
        for (int64_t i = 0; i < n; i++) {
            const float *ki = k + i * s, *gi = g + i * n;
            float acc = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                const float gq = (gi[j] - gs[j]) / sums[j];
                gk[i * s + j] = gq * u[i];
                acc += gq * ki[j];
            }
            gu[i] = acc;
        }
    }
    /* Back through the half-steps: x = 1 / product, so d x / d product = -x^2. Each
     * step's gradient g_t (kept where its product was) adds an outer product to dK: g_t
     * times the scaling before it for a row step, the other way round for a column step;
     * they are summed at the end, row by row of dK, as products over the steps. */
    for (int64_t t = steps - 1; t >= 0; t--) {
        float *g_t = products + t * s; /* the product, then the step's gradient */
        const float *scale = scalings + t * s;
        if (t % 2 == 0) { /* row step: u = 1 / (K v_before) */
            for (int64_t i = 0; i < n; i++) g_t[i] = -gu[i] * scale[i] * scale[i];
            vec_mat(g_t, k, n, s, gv); /* K^T g */
            memset(gu, 0, (size_t)s * sizeof(float));
        } else { /* column step: v = 1 / (K^T u_before) */
            for (int64_t j = 0; j < n; j++) g_t[j] = -gv[j] * scale[j] * scale[j];
            vec_mat(g_t, kt, n, s, gu); /* K g */
            memset(gv, 0, (size_t)s * sizeof(float));
        }
    }
    const int64_t rows = (steps - 1) / 2, cols = steps / 2; /* even t >= 2; odd t */
    for (int64_t i = 0; i < n; i++) {
        float *gi = gk + i * s;
        if (steps) /* t = 0: the scaling before it is 1 */
            for (int64_t j = 0; j < n; j++) gi[j] += products[i];
        accumulate(products + 2 * s + i, 2 * s, scalings + s, 2 * s, rows, s, gi);
        accumulate(scalings + i, 2 * s, products + s, 2 * s, cols, s, gi);
    }
    /* Half-step 2, K = S / c with c = 1^T S: dS = (dK - 1 (1^T (dK * K))) / c; then the
     * softmax: dlogits = S * (dS - (dS * S) 1). */
    memset(gs, 0, (size_t)s * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) gs[j] += gk[i * s + j] * k[i * s + j];
    for (int64_t i = 0; i < n; i++) {
        const float *si = soft + i * s;
        float *gki = gk + i * s, dot_row = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            gki[j] = (gki[j] - gs[j]) * column[j];
            dot_row += gki[j] * si[j];
        }
        for (int64_t j = 0; j < n; j++)
            out[i * n + j] = (!mask || (mask[i] && mask[j])) ? si[j] * (gki[j] - dot_row) : 0.0f;
    }
}

int rc_unrolled_backward(const float *logits, const float *g, const uint8_t *mask,
                         int64_t count, int64_t n, int64_t half_steps, float floor,
                         float *grad, uint8_t *underflow, int threads) {
    const unrolled_args args = {logits, g, mask, n, half_steps, floor, grad, underflow};
    const int64_t s = padded(n), steps = half_steps > 3 ? half_steps - 3 : 0;
    return for_each(count, threads, (size_t)(4 * n * s + 2 * steps * s + 6 * s), unrolled_one,
                    &args);
}

/* ------------------------------------------------------------------------- implicit backward */

typedef struct {
    const float *p, *g;
    const uint8_t *mask;
    const int64_t *groups; /* the chosen matrices, 8 per group (the last repeated to fill) */
    int64_t n;
    float gap;
    float *grad;
    uint8_t *ok;
} implicit_args;

/* Solves U^T U x = b for eight systems at once, U the upper Cholesky factor `n x n`: b
 * becomes x; `y` (n vectors) is work space. This and the next are inlined into their one
 * caller: as functions of their own they moved the forward loops in the library, and the
 * forward ran 5% slower (n = 17, measured). */
static inline __attribute__((always_inline)) void cholesky_solve8(const f8 *u, f8 *b, f8 *y, int64_t n) {
    for (int64_t j = 0; j < n; j++) { /* U^T y = b */
        y[j] = b[j] / u[j * n + j];
        for (int64_t q = j + 1; q < n; q++) b[q] -= u[j * n + q] * y[j];
    }
    for (int64_t j = n - 1; j >= 0; j--) { /* U x = y */
        f8 sum = y[j];
        for (int64_t q = j + 1; q < n; q++) sum -= u[j * n + q] * b[q];
        b[j] = sum / u[j * n + j];
    }
}

/* The fixed start of `smallest_eigenvalue`: entry j of a Weyl sequence, centred. */
static inline float weyl(int64_t j) {
    const double x = (double)(j + 1) * 0.6180339887498949;
    return (float)(x - floor(x)) - 0.5f;
}

/* An estimate from above of the smallest eigenvalue of each of eight systems A = U^T U
 * (`_sinkhorn_engine._smallest_eigenvalue`): the Rayleigh quotient z^T A z / z^T z =
 * s^T z / z^T z of z = A^-1 s, s the fixed start (`weyl`); 0, negative or NaN where the solve
 * breaks down. `z` and `y` (n vectors each) are work space. */
static inline __attribute__((always_inline)) f8 smallest_eigenvalue(const f8 *u, f8 *z, f8 *y,
                                                                    int64_t n) {
    for (int64_t j = 0; j < n; j++) z[j] = all8(weyl(j));
    cholesky_solve8(u, z, y, n);
    f8 along = {0}, length = {0};
    for (int64_t j = 0; j < n; j++) {
        along += all8(weyl(j)) * z[j];
        length += z[j] * z[j];
    }
    return along / length;
}

/* The implicit gradient at eight fixed points P at once, one per vector lane
 * (`_sinkhorn_engine.implicit_backward`): with G the incoming gradient (taken as zero on
 * pairs with a padded token, where P is zero), r = (P*G) 1, c = (P*G)^T 1 and m the sample's
 * real tokens (all without a mask), solves A beta = c - P^T r with A = I + m m^T / |m| -
 * P^T P by Cholesky (A = U^T U, U upper triangular), alpha = r - P beta, and writes
 * P * (G - alpha 1^T - 1 beta^T). Where A is not positive definite in float32, or its
 * smallest eigenvalue (estimated by `smallest_eigenvalue`) is below `gap`, `ok` is 0 and
 * nothing is written for that matrix: the solve would fail or be inaccurate there. */
static void implicit_group(const void *args, int64_t group, float *work) {
    const implicit_args *a = args;
    const int64_t n = a->n, *index = a->groups + 8 * group;
    f8 *p = (f8 *)work, *g = p + n * n, *u = g + n * n, *r = u + n * n, *c = r + n;
    f8 *beta = c + n, *y = beta + n, *m = y + n, shift;
    float *lanes_p = (float *)p, *lanes_g = (float *)g; /* entry e of lane l: [8 e + l] */
    for (int l = 0; l < 8; l++) { /* into lanes */
        const int64_t b = index[l];
        const uint8_t *mask = a->mask ? a->mask + b * n : NULL;
        const float *pb = a->p + b * n * n, *gb = a->g + b * n * n;
        float real = 0.0f;
        for (int64_t i = 0; i < n; i++) real += m[i][l] = (!mask || mask[i]) ? 1.0f : 0.0f;
        shift[l] = real > 0.0f ? 1.0f / real : 0.0f;
        for (int64_t e = 0; e < n * n; e++) lanes_p[8 * e + l] = pb[e];
        if (!mask)
            for (int64_t e = 0; e < n * n; e++) lanes_g[8 * e + l] = gb[e];
        else
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    lanes_g[8 * (i * n + j) + l] = mask[i] && mask[j] ? gb[i * n + j] : 0.0f;
    }
    for (int64_t j = 0; j < n; j++) c[j] = (f8){0};
    for (int64_t i = 0; i < n; i++) {
        r[i] = (f8){0};
        for (int64_t j = 0; j < n; j++) {
            const f8 pg = p[i * n + j] * g[i * n + j];
            r[i] += pg;
            c[j] += pg;
        }
    }
    for (int64_t j = 0; j < n; j++) beta[j] = c[j]; /* the right side c - P^T r */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) beta[j] -= p[i * n + j] * r[i];
    for (int64_t i = 0; i < n; i++) /* A, upper triangle: (P^T P)_ij summed in registers */
        for (int64_t j = i; j < n; j += 4) {
            const int w = n - j < 4 ? (int)(n - j) : 4;
            f8 acc[4] = {{0}};
            for (int64_t k = 0; k < n; k++)
                for (int q = 0; q < w; q++) acc[q] += p[k * n + i] * p[k * n + j + q];
            for (int q = 0; q < w; q++)
                u[i * n + j + q] = m[i] * m[j + q] * shift + (i == j + q ? 1.0f : 0.0f) - acc[q];
        }
    int failed[8] = {0};
    for (int64_t j = 0; j < n; j++) { /* Cholesky, right-looking, in place */
        f8 d = u[j * n + j];
        for (int l = 0; l < 8; l++) {
            failed[l] |= !(d[l] > 0.0f);
            d[l] = failed[l] ? 1.0f : sqrtf(d[l]); /* a failed lane goes on harmlessly */
        }
        const f8 inverse_d = 1.0f / d;
        u[j * n + j] = d;
        for (int64_t q = j + 1; q < n; q++) u[j * n + q] *= inverse_d;
        for (int64_t i = j + 1; i < n; i++) {
            const f8 uji = u[j * n + i];
            for (int64_t q = i; q < n; q++) u[i * n + q] -= uji * u[j * n + q];
        }
    }
    cholesky_solve8(u, beta, y, n);
    const f8 smallest = smallest_eigenvalue(u, c, y, n); /* c is free: the right side is built */
    for (int l = 0; l < 8; l++) failed[l] |= !(smallest[l] >= a->gap);
    for (int64_t i = 0; i < n; i++) { /* r - P beta, into r */
        for (int64_t j = 0; j < n; j++) r[i] -= p[i * n + j] * beta[j];
    }
    for (int64_t i = 0; i < n; i++) /* the gradient, into g */
        for (int64_t j = 0; j < n; j++) g[i * n + j] = p[i * n + j] * (g[i * n + j] - r[i] - beta[j]);
    for (int l = 0; l < 8; l++) { /* out of lanes */
        const int64_t b = index[l];
        if (failed[l]) {
            a->ok[b] = 0;
            continue;
        }
        float *out = a->grad + b * n * n;
        for (int64_t e = 0; e < n * n; e++) out[e] = lanes_g[8 * e + l];
    }
}

int rc_implicit_backward(const float *p, const float *g, const uint8_t *mask,
                         const uint8_t *chosen, int64_t count, int64_t n, float gap,
                         float *grad, uint8_t *ok, int threads) {
    int64_t *groups = malloc((size_t)(count + 8) * sizeof(int64_t)), picked = 0;
    if (!groups) return -1;
    for (int64_t b = 0; b < count; b++) {
        ok[b] = 1;
        if (!chosen || chosen[b]) groups[picked++] = b;
    }
    for (int64_t fill = picked; picked && fill % 8; fill++) groups[fill] = groups[picked - 1];
    const implicit_args args = {p, g, mask, groups, n, gap, grad, ok};
    const int status = for_each((picked + 7) / 8, threads, (size_t)(8 * (3 * n * n + 6 * n)),
                                implicit_group, &args);
    free(groups);
    return status;
}
