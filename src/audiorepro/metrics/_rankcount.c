/* The compiled passes of audiorepro.metrics._exact (exact rank counts of embedding retrieval).

   A plain C shared library (no Python.h), built ahead of time by setup.py like core/_trec.c and
   loaded with ctypes by audiorepro.metrics._exact_kernels: no command compiles anything at run
   time and nothing is written (issue 48). It was numba (cache=True): every fresh install,
   container and Slurm node compiled it again on its first rank count.

   The arithmetic is the numba kernels', line for line. What they decide is exact whatever the
   summation order of a float64 dot product (its error bound holds for any order), so the counts
   are those of the numba kernels on every input; the float64 sums here run in index order,
   without contraction into fused multiply-adds (-ffp-contract=off), so that they, and the
   stage statistics that follow from them, are the same on every machine.

   Every function exists twice, for float32 (_f32) and float64 (_f64) embeddings: this file
   includes itself once per type (AEX_T). Threads own fixed blocks of 256 rows and write
   per-block partials that are summed in block order: the thread count changes no result. */

#ifndef AEX_T

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Raised whenever a function's arguments change (audiorepro.metrics._exact_kernels.ABI). */
int64_t aex_abi(void) { return 1; }

/* One direction as the passes read it (the ctx tuple of the numba kernels): the queries Q are
   the rows of a chunk S, the items its columns. General pass: query q's relevant items are
   idx[ptr[q]:ptr[q+1]] and entry k's threshold p64[k], band [lo_s[k], hi_s[k]]. t2a half of
   the one pass: queries are captions, idx the clip of each caption (ptr unused), one entry per
   caption. lo_s and hi_s are of the embeddings' type. */
typedef struct {
    const void *Q;
    const void *Items;
    int64_t d;
    const int64_t *ptr;
    const int64_t *idx;
    const double *p64;
    const double *nQ;
    const double *nI;
    const void *lo_s;
    const void *hi_s;
    double g64x2;
    double eta64x2;
} aex_ctx;

#define AEX_BLOCK 256

/* 1: above, 0: below, -1: undecided. */
static int aex_refine(double y, double thr, double band) {
    if (y > thr + band) return 1;
    if (y >= thr - band) return -1;
    return 0;
}

/* Binary search of item among a query's relevant items idx[k0:k1] (ascending). */
static int aex_is_relevant(const int64_t *idx, int64_t k0, int64_t k1, int64_t item) {
    int64_t lo = k0, hi = k1;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (idx[mid] < item)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < k1 && idx[lo] == item;
}

/* The most relevant entries of any query. */
static int64_t aex_kmax(const int64_t *ptr, int64_t n) {
    int64_t kmax = 0;
    for (int64_t q = 0; q < n; q++)
        if (ptr[q + 1] - ptr[q] > kmax) kmax = ptr[q + 1] - ptr[q];
    return kmax;
}

/* A pool of threads that take blocks 0..nblk-1 in turn; what a block computes depends on the
   block only. */
typedef struct {
    void (*work)(void *, int64_t);
    void *arg;
    int64_t nblk;
    int64_t next;
} aex_pool;

static void *aex_worker(void *p) {
    aex_pool *pool = (aex_pool *)p;
    for (;;) {
        int64_t bi = __atomic_fetch_add(&pool->next, 1, __ATOMIC_RELAXED);
        if (bi >= pool->nblk) return NULL;
        pool->work(pool->arg, bi);
    }
}

static void aex_run(void (*work)(void *, int64_t), void *arg, int64_t nblk, int64_t threads) {
    aex_pool pool = {work, arg, nblk, 0};
    pthread_t tid[64];
    int64_t n = threads < 1 ? 1 : (threads > 64 ? 64 : threads), started = 0;
    if (n > nblk) n = nblk;
    for (int64_t t = 1; t < n; t++) {
        if (pthread_create(&tid[started], NULL, aex_worker, &pool) != 0) break;
        started++;
    }
    aex_worker(&pool); /* this thread works too; with no thread started, it does all */
    for (int64_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
}

#define AEX_T float
#define AEX(name) name##_f32
#include "_rankcount.c"
#undef AEX_T
#undef AEX

#define AEX_T double
#define AEX(name) name##_f64
#include "_rankcount.c"
#undef AEX_T
#undef AEX

#else /* the passes for one embedding type AEX_T */

static double AEX(aex_dot64)(const AEX_T *x, const AEX_T *y, int64_t d) {
    double s = 0.0;
    for (int64_t i = 0; i < d; i++) s += (double)x[i] * (double)y[i];
    return s;
}

/* out[k] = Q[qk[k]] . Items[idx[k]] in float64, for the n entries. */
void AEX(aex_entry_scores)(const AEX_T *Q, const AEX_T *Items, int64_t d, const int64_t *qk,
                           const int64_t *idx, int64_t n, double *out) {
    for (int64_t k = 0; k < n; k++) out[k] = AEX(aex_dot64)(Q + qk[k] * d, Items + idx[k] * d, d);
}

/* Decide, one by one, the comparisons of query q's relevant entry k with the items of this
   chunk (S: nq x B, items c0 + b) that fall in its stage-1 band, non-relevant items only.
   Count mode (out NULL) adds float64 decisions to gt[k]; collect mode records the undecided
   as rows (k, item) of out at *pos. Returns the undecided; *nref += float64 refinements. */
static int64_t AEX(aex_scan_rel)(const AEX_T *S, int64_t B, int64_t q, int64_t k, int64_t c0,
                                 const aex_ctx *c, int64_t *gt, int64_t *out, int64_t *pos,
                                 int64_t *nref) {
    const AEX_T *Q = (const AEX_T *)c->Q, *Items = (const AEX_T *)c->Items;
    const AEX_T *row = S + q * B;
    int64_t d = c->d, k0 = c->ptr[q], k1 = c->ptr[q + 1], r = c->idx[k], amb = 0;
    AEX_T lo = ((const AEX_T *)c->lo_s)[k], hi = ((const AEX_T *)c->hi_s)[k];
    for (int64_t b = 0; b < B; b++) {
        int64_t i = c0 + b;
        AEX_T x = row[b];
        if (x >= lo && x <= hi && !aex_is_relevant(c->idx, k0, k1, i)) {
            *nref += 1;
            double y = AEX(aex_dot64)(Q + q * d, Items + i * d, d);
            int dec = aex_refine(y, c->p64[k], c->g64x2 * c->nQ[q] * (c->nI[i] + c->nI[r]) +
                                                   c->eta64x2);
            if (dec == 1 && out == NULL) {
                gt[k] += 1;
            } else if (dec == -1) {
                amb += 1;
                if (out != NULL) {
                    out[2 * pos[0]] = k;
                    out[2 * pos[0] + 1] = i;
                    pos[0] += 1;
                }
            }
        }
    }
    return amb;
}

/* Collect mode of aex_scan_rel, for the exact stage (Python). */
int64_t AEX(aex_collect_rel)(const AEX_T *S, int64_t B, int64_t q, int64_t k, int64_t c0,
                             const aex_ctx *c, int64_t *out, int64_t *pos) {
    int64_t nref = 0;
    return AEX(aex_scan_rel)(S, B, q, k, c0, c, NULL, out, pos, &nref);
}

/* One query row q of a chunk S (nq x B) counted into gt (per relevant entry): the sure
   "above" decisions per entry and the elements in its band; the query's own relevant items in
   this chunk taken out again; only a band that still holds elements scanned one by one.
   ink: scratch of the query's entry count. Returns the undecided; *nref += refinements. */
static int64_t AEX(aex_query_row)(const AEX_T *S, int64_t B, int64_t q, int64_t c0,
                                  const aex_ctx *c, int64_t *gt, int64_t *ink, int64_t *nref) {
    const AEX_T *row = S + q * B;
    const AEX_T *lo_s = (const AEX_T *)c->lo_s, *hi_s = (const AEX_T *)c->hi_s;
    int64_t c1 = c0 + B, k0 = c->ptr[q], k1 = c->ptr[q + 1], amb = 0;
    for (int64_t k = k0; k < k1; k++) {
        AEX_T h = hi_s[k], lo = lo_s[k];
        int64_t cg = 0, ce = 0;
        for (int64_t b = 0; b < B; b++) {
            cg += row[b] > h;
            ce += row[b] >= lo;
        }
        gt[k] += cg;
        ink[k - k0] = ce - cg;
    }
    for (int64_t ko = k0; ko < k1; ko++) {
        int64_t ci = c->idx[ko];
        if (ci < c0 || ci >= c1) continue;
        AEX_T x = row[ci - c0];
        for (int64_t k = k0; k < k1; k++) {
            int64_t g = x > hi_s[k];
            gt[k] -= g;
            ink[k - k0] -= (int64_t)(x >= lo_s[k]) - g;
        }
    }
    for (int64_t k = k0; k < k1; k++)
        if (ink[k - k0] > 0) amb += AEX(aex_scan_rel)(S, B, q, k, c0, c, gt, NULL, NULL, nref);
    return amb;
}

typedef struct {
    const AEX_T *S;
    int64_t nq, B, c0, kmax;
    const aex_ctx *c;
    int64_t *gt, *amb, *part_ref, *part, *inband;
    const aex_ctx *t; /* the t2a half (one pass only) */
    int64_t *amb_a; /* the a2t half's undecided per clip (one pass only; amb: t2a's) */
} AEX(aex_chunk);

static void AEX(aex_rel_block)(void *arg, int64_t bi) {
    AEX(aex_chunk) *w = arg;
    int64_t nref = 0, end = (bi + 1) * AEX_BLOCK < w->nq ? (bi + 1) * AEX_BLOCK : w->nq;
    for (int64_t q = bi * AEX_BLOCK; q < end; q++)
        w->amb[q] = AEX(aex_query_row)(w->S, w->B, q, w->c0, w->c, w->gt,
                                       w->inband + bi * w->kmax, &nref);
    w->part_ref[bi] = nref;
}

/* Count one chunk S = queries @ items[c0:c0+B].T (nq x B) into gt (per relevant entry), query
   row by query row. A query's entries belong to one block (no locks); the refinement counts
   are summed per block in block order. Returns 0, or -1 when out of memory. */
int64_t AEX(aex_count_chunk_rel)(const AEX_T *S, int64_t nq, int64_t B, int64_t c0,
                                 const aex_ctx *c, int64_t *gt, int64_t *amb, int64_t *refined,
                                 int64_t threads) {
    int64_t nblk = (nq + AEX_BLOCK - 1) / AEX_BLOCK, kmax = aex_kmax(c->ptr, nq);
    int64_t *part_ref = calloc((size_t)nblk + 1, sizeof(int64_t));
    int64_t *inband = calloc((size_t)(nblk * kmax) + 1, sizeof(int64_t));
    if (part_ref == NULL || inband == NULL) {
        free(part_ref);
        free(inband);
        return -1;
    }
    AEX(aex_chunk) w = {S, nq, B, c0, kmax, c, gt, amb, part_ref, NULL, inband, NULL, NULL};
    aex_run(AEX(aex_rel_block), &w, nblk, threads);
    for (int64_t bi = 0; bi < nblk; bi++) refined[0] += part_ref[bi];
    free(part_ref);
    free(inband);
    return 0;
}

/* Decide, one by one, the t2a comparisons of row j (clip j) of St (N x B) that fall in the
   band: the query is caption i = c0 + b, compared with its own clip. Count mode (out NULL)
   adds float64 decisions to t2a_part[b]; collect mode records the undecided as rows (i, j). */
static int64_t AEX(aex_scan_t2a)(const AEX_T *St, int64_t B, int64_t j, int64_t c0,
                                 const aex_ctx *t, int64_t *t2a_part, int64_t *out,
                                 int64_t *pos, int64_t *nref) {
    const AEX_T *T = (const AEX_T *)t->Q, *A = (const AEX_T *)t->Items;
    const AEX_T *lo_s = (const AEX_T *)t->lo_s, *hi_s = (const AEX_T *)t->hi_s;
    const AEX_T *row = St + j * B;
    int64_t d = t->d, amb = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t i = c0 + b;
        AEX_T x = row[b];
        if (x >= lo_s[i] && x <= hi_s[i] && t->idx[i] != j) {
            *nref += 1;
            double y = AEX(aex_dot64)(T + i * d, A + j * d, d);
            int64_t r = t->idx[i];
            int dec = aex_refine(y, t->p64[i], t->g64x2 * t->nQ[i] * (t->nI[j] + t->nI[r]) +
                                                   t->eta64x2);
            if (dec == 1 && out == NULL) {
                t2a_part[b] += 1;
            } else if (dec == -1) {
                amb += 1;
                if (out != NULL) {
                    out[2 * pos[0]] = i;
                    out[2 * pos[0] + 1] = j;
                    pos[0] += 1;
                }
            }
        }
    }
    return amb;
}

/* Collect mode of aex_scan_t2a, for the exact stage (Python). */
int64_t AEX(aex_collect_t2a)(const AEX_T *St, int64_t B, int64_t j, int64_t c0,
                             const aex_ctx *t, int64_t *out, int64_t *pos) {
    int64_t nref = 0;
    return AEX(aex_scan_t2a)(St, B, j, c0, t, NULL, out, pos, &nref);
}

/* One block of rows (clips) of the one pass. */
static void AEX(aex_one_block)(void *arg, int64_t bi) {
    AEX(aex_chunk) *w = arg;
    const aex_ctx *t = w->t, *a = w->c;
    const AEX_T *lo_c = (const AEX_T *)t->lo_s + w->c0, *hi_c = (const AEX_T *)t->hi_s + w->c0;
    int64_t B = w->B, c0 = w->c0, c1 = w->c0 + w->B, nref = 0;
    int64_t *p = w->part + bi * B;
    int64_t end = (bi + 1) * AEX_BLOCK < w->nq ? (bi + 1) * AEX_BLOCK : w->nq;
    for (int64_t j = bi * AEX_BLOCK; j < end; j++) {
        const AEX_T *row = w->S + j * B;
        int64_t inband_t = 0, amb_t = 0;
        for (int64_t b = 0; b < B; b++) {
            AEX_T x = row[b];
            int64_t g = x > hi_c[b];
            p[b] += g;
            inband_t += (int64_t)(x >= lo_c[b]) - g;
        }
        /* Take out the relevant pairs: clip j's own captions that lie in this chunk. */
        for (int64_t ko = a->ptr[j]; ko < a->ptr[j + 1]; ko++) {
            int64_t ci = a->idx[ko];
            if (ci < c0 || ci >= c1) continue;
            AEX_T x = row[ci - c0];
            int64_t g = x > hi_c[ci - c0];
            p[ci - c0] -= g;
            inband_t -= (int64_t)(x >= lo_c[ci - c0]) - g;
        }
        if (inband_t > 0) amb_t = AEX(aex_scan_t2a)(w->S, B, j, c0, t, p, NULL, NULL, &nref);
        int64_t amb_a = AEX(aex_query_row)(w->S, B, j, c0, a, w->gt, w->inband + bi * w->kmax,
                                           &nref);
        w->amb[j] = amb_t;
        w->amb_a[j] = amb_a;
    }
    w->part_ref[bi] = nref;
}

/* Count one chunk St = audio @ text[c0:c0+B].T (N clips x B captions) into the totals: t2a
   (ctx t: captions as queries) and a2t (ctx a: clips as queries, their captions as entries).
   Row j is owned by one block, so a2t counts need no locks; t2a counts (per caption) go to
   per-block partial rows, summed in block order. amb_t2a, amb_a2t: the comparisons float64
   left undecided per clip. Returns 0, or -1 when out of memory. */
int64_t AEX(aex_count_chunk)(const AEX_T *St, int64_t N, int64_t B, int64_t c0,
                             const aex_ctx *t, const aex_ctx *a, int64_t *t2a_gt,
                             int64_t *a2t_gt, int64_t *amb_t2a, int64_t *amb_a2t,
                             int64_t *refined,
                             int64_t threads) {
    int64_t nblk = (N + AEX_BLOCK - 1) / AEX_BLOCK, kmax = aex_kmax(a->ptr, N);
    int64_t *part = calloc((size_t)(nblk * B) + 1, sizeof(int64_t));
    int64_t *part_ref = calloc((size_t)nblk + 1, sizeof(int64_t));
    int64_t *inband = calloc((size_t)(nblk * kmax) + 1, sizeof(int64_t));
    if (part == NULL || part_ref == NULL || inband == NULL) {
        free(part);
        free(part_ref);
        free(inband);
        return -1;
    }
    AEX(aex_chunk) w = {St, N, B, c0, kmax, a, a2t_gt, amb_t2a, part_ref, part, inband, t, amb_a2t};
    aex_run(AEX(aex_one_block), &w, nblk, threads);
    for (int64_t b = 0; b < B; b++) {
        int64_t s = 0;
        for (int64_t bi = 0; bi < nblk; bi++) s += part[bi * B + b];
        t2a_gt[c0 + b] += s;
    }
    for (int64_t bi = 0; bi < nblk; bi++) refined[0] += part_ref[bi];
    free(part);
    free(part_ref);
    free(inband);
    return 0;
}

#endif
