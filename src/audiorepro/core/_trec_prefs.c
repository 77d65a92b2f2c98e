/* trec_eval's preference measures (-R prefs, -R qrels_prefs), compiled into the library of
 * core/_trec.c: atr_prefs_evaluate reads the judgements file, ranks the run, builds each
 * query's judgement groups and computes the prefs_* families chosen. The definitions (the
 * preferences, the order and its tie rule, every family's formula and the quirks kept) are in
 * metrics/trec_prefs.py's docstrings; this file is their one implementation, which the Python
 * path calls too (atr_prefs_evaluate through ctypes).
 *
 * Every value is the double metrics/trec_prefs.py computed before it called this code: the
 * same integer counts, then the same divisions and sums in the same order (groups in group
 * order, queries in qid order). Anything the Python path refuses with a message (a malformed
 * line, a document at two levels, cyclic preferences, no query in common), and anything it
 * reads differently from a plain byte scan (non-ASCII, NUL, levels atof leaves to Python),
 * returns ATR_FALLBACK: nothing is printed here. Scratch is malloc'ed per query and freed
 * before returning; the outputs in AtrEval are freed by atr_prefs_free. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_trec.h"

/* trec_eval's stand-in document of a query the run lacks (-c). */
static const char STAND_IN[] = "ceci_nest_pas_un_docno";

/* The families in trec_eval's printing order (metrics/trec_prefs.PREFS_FAMILIES); the first
 * three are counts (all: the sum). */
enum {
    NUM_POSS, NUM_FUL, NUM_FUL_RET, SIMP, PAIR, AVGJG, RNONREL, SIMP_RET, PAIR_RET, AVGJG_RET,
    RNONREL_RET, SIMP_IMP, PAIR_IMP, AVGJG_IMP, NFAMILIES
};
static const char *const FAMILIES[NFAMILIES] = {
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
    "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
    "prefs_avgjg_imp"};

/* One judgement line: spans of its fields in the file's bytes, its level and (per query) its
 * judged document's number. */
typedef struct {
    int64_t qid, jg, jsg, doc;
    int32_t qid_len, jg_len, jsg_len, doc_len;
    double level;
    int64_t number;
} Line;

typedef struct {
    uint8_t *data;
    int64_t size;
    Line *lines;
    int64_t n;
} Prefs;

/* One judgement group's counts (metrics/trec_prefs.Group) and, when a Rnonrel family needs
 * them, its recounts (fulfilled, possible) over all documents and over ranked ones. */
typedef struct {
    int64_t ful_ret, poss_ret, ful_imp, poss_imp, notoccur;
    int64_t num_rel, num_rel_ret, num_nonrel, num_nonrel_ret;
    int64_t rec_all[2], rec_ret[2];
} Group;

/* ------------------------------------------------------------------- sorting ---- */

typedef int (*Compare)(const void *ctx, int64_t a, int64_t b);

/* Stable merge sort of idx[0:n] by cmp (tmp: n entries). */
static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, Compare cmp, const void *ctx) {
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(idx, tmp, h, cmp, ctx);
    merge_sort(idx + h, tmp, n - h, cmp, ctx);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp(ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

/* Byte order of two spans (strcmp's: unsigned bytes, a prefix first), as Python compares the
 * decoded ASCII strings. */
static int span_cmp(const uint8_t *a, int64_t la, const uint8_t *b, int64_t lb) {
    int c = memcmp(a, b, (size_t)(la < lb ? la : lb));
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

static int by_qid(const void *ctx, int64_t a, int64_t b) {
    const Prefs *p = ctx;
    const Line *x = p->lines + a, *y = p->lines + b;
    return span_cmp(p->data + x->qid, x->qid_len, p->data + y->qid, y->qid_len);
}

static int by_doc(const void *ctx, int64_t a, int64_t b) {
    const Prefs *p = ctx;
    const Line *x = p->lines + a, *y = p->lines + b;
    return span_cmp(p->data + x->doc, x->doc_len, p->data + y->doc, y->doc_len);
}

/* query_prefs' order of a query's lines: (jg, jsg, -level, number). */
static int by_group(const void *ctx, int64_t a, int64_t b) {
    const Prefs *p = ctx;
    const Line *x = p->lines + a, *y = p->lines + b;
    int c = span_cmp(p->data + x->jg, x->jg_len, p->data + y->jg, y->jg_len);
    if (c) return c;
    c = span_cmp(p->data + x->jsg, x->jsg_len, p->data + y->jsg, y->jsg_len);
    if (c) return c;
    if (x->level != y->level) return x->level > y->level ? -1 : 1;
    return x->number < y->number ? -1 : x->number > y->number;
}

typedef struct {
    const double *value;
} Scores;

/* Score descending (records already in docno order: a stable sort keeps docno ascending). */
static int by_score(const void *ctx, int64_t a, int64_t b) {
    const double *v = ((const Scores *)ctx)->value;
    return v[a] > v[b] ? -1 : v[a] < v[b];
}

/* --------------------------------------------------------------- the reader ---- */

static int read_file(const char *path, Prefs *p) {
    if (strcmp(path, "-") == 0) return ATR_FALLBACK; /* stdin: the Python reader's */
    FILE *f = fopen(path, "rb");
    if (!f) return ATR_FALLBACK;
    int status = ATR_FALLBACK;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        p->data = malloc((size_t)size + 1);
        if (!p->data) status = ATR_NOMEM;
        else if (fread(p->data, 1, (size_t)size, f) == (size_t)size) status = ATR_OK;
    }
    fclose(f);
    if (status != ATR_OK) return status;
    p->data[size] = 0;
    p->size = size;
    /* Non-ASCII (the Python reader's UTF-8 and white-space rules) and NUL: its path. */
    for (long i = 0; i < size; i++)
        if (p->data[i] == 0 || p->data[i] >= 128) return ATR_FALLBACK;
    return ATR_OK;
}

static inline int is_space(uint8_t c) { return c == 32 || (c >= 9 && c <= 13); }

/* The fields of data[start:stop] (one line): up to 6 spans; returns how many (6: more). */
static int fields_of(const uint8_t *d, int64_t start, int64_t stop, int64_t *s, int64_t *l) {
    int k = 0;
    int64_t i = start;
    while (k < 6) {
        while (i < stop && is_space(d[i])) i++;
        if (i >= stop) break;
        s[k] = i;
        while (i < stop && !is_space(d[i])) i++;
        l[k] = i - s[k];
        k++;
    }
    return k;
}

/* One data line into p->lines (width 5: prefs, 4: qrels_prefs); ATR_FALLBACK when the
 * fields are not width or the level is one atof leaves to Python. */
static int add_line(Prefs *p, const int64_t *s, const int64_t *l, int nf, int width) {
    if (nf != width) return ATR_FALLBACK;
    Line *x = p->lines + p->n++;
    int level = width - 1, doc = width - 2;
    x->qid = s[0], x->qid_len = (int32_t)l[0];
    x->jg = s[1], x->jg_len = (int32_t)l[1];
    x->jsg = width == 5 ? s[2] : 0, x->jsg_len = width == 5 ? (int32_t)l[2] : 0;
    x->doc = s[doc], x->doc_len = (int32_t)l[doc];
    int64_t status = 0, end = 0;
    x->level = atr_atof(p->data, s[level], s[level] + l[level], &status, &end);
    x->number = -1;
    return status ? ATR_FALLBACK : ATR_OK;
}

/* formats/trec_prefs.read_prefs: every data line (comments and empty lines left out). */
static int read_prefs(const char *path, int qrels_form, Prefs *p) {
    int status = read_file(path, p);
    if (status != ATR_OK) return status;
    int64_t lines = 1;
    for (int64_t i = 0; i < p->size; i++) lines += p->data[i] == 10;
    p->lines = malloc((size_t)lines * sizeof *p->lines);
    if (!p->lines) return ATR_NOMEM;
    int64_t start = 0, s[6], l[6];
    while (start <= p->size) {
        const uint8_t *nl = memchr(p->data + start, 10, (size_t)(p->size - start));
        int64_t stop = nl ? nl - p->data : p->size;
        /* lines longer than a Line's int32 lengths: the Python reader's */
        if (stop - start >= INT32_MAX) return ATR_FALLBACK;
        int nf = fields_of(p->data, start, stop, s, l);
        if (nf > 0 && p->data[s[0]] != '#') {
            status = add_line(p, s, l, nf, qrels_form ? 4 : 5);
            if (status != ATR_OK) return status;
        }
        start = stop + 1;
    }
    return p->n ? ATR_OK : ATR_FALLBACK; /* "holds no judgement" */
}

/* ---------------------------------------------------------- judgement groups ---- */

/* One query: its lines in query_prefs' order (jg, jsg, level descending, number), as the
 * codes of their groups and sub-groups (byte order of the names), levels and document
 * numbers; the n x n counts (groups preferring i to j) and the marks of the group checks. */
typedef struct {
    int64_t nl, n, m;
    const int64_t *jg, *jsg, *ids;
    const double *level;
    int64_t error[4]; /* the refusal: kind (ERR_*), the group's code, what names it */
    int64_t *counts;
    int64_t *mark, *cls; /* n each: the last group and class a document was seen in */
    int64_t *local;      /* n: a document's index in a matrix group, -1 outside */
    int want_rnonrel;
} Query;

/* Why a query's groups are refused (error[0]); the Python path words the message. */
enum { ERR_TWO_LEVELS = 1, ERR_ZERO_AND_ABOVE, ERR_CYCLE };

/* For each ranked document of a (ascending, the first a_ret ranked), the documents of b
 * (ascending, nb) numbered above it: the ranking fulfils those pairs. */
static int64_t won_of(const int64_t *a, int64_t a_ret, const int64_t *b, int64_t nb) {
    int64_t won = 0, cut = 0;
    for (int64_t x = 0; x < a_ret; x++) {
        while (cut < nb && b[cut] <= a[x]) cut++;
        won += nb - cut;
    }
    return won;
}

/* Ranked documents first in an ascending list: how many. */
static int64_t ranked_in(const int64_t *a, int64_t na, int64_t m) {
    int64_t k = 0;
    while (k < na && a[k] < m) k++;
    return k;
}

/* _recount_classes: classes ids[cs[c]:cs[c + 1]] (ascending numbers), level descending;
 * each class against the later ones but the last, then against the last one cut to its first
 * `keep` (trec_eval's recount, the lowest class against itself included); ranked_only: the
 * ranked documents only. out: (fulfilled, possible). */
static void recount_classes(const Query *q, const int64_t *cs, int64_t ncls, int64_t keep,
                            int ranked_only, int64_t *out) {
    int64_t ful = 0, poss = 0, m = q->m;
    const int64_t *low = q->ids + cs[ncls - 1];
    int64_t nlow = cs[ncls] - cs[ncls - 1];
    if (keep < nlow) nlow = keep;
    if (ranked_only) nlow = ranked_in(low, nlow, m);
    for (int64_t i = 0; i < ncls; i++) {
        const int64_t *a = q->ids + cs[i];
        int64_t na = cs[i + 1] - cs[i], a_ret = ranked_in(a, na, m);
        if (ranked_only) na = a_ret;
        for (int64_t c = i + 1; c < ncls - 1; c++) {
            const int64_t *b = q->ids + cs[c];
            int64_t nb = cs[c + 1] - cs[c];
            if (ranked_only) nb = ranked_in(b, nb, m);
            int64_t won = won_of(a, a_ret, b, nb);
            ful += won;
            poss += na * nb - won;
        }
        int64_t won = won_of(a, a_ret, low, nlow);
        ful += won;
        poss += na * nlow - won;
    }
    out[0] = ful, out[1] = poss + ful;
}

/* _class_group: lines[gs:ge] (one sub-group), its levels as classes; ATR_FALLBACK for a
 * document at two levels. `gid` stamps the marks. */
static int class_group(Query *q, int64_t gs, int64_t ge, int64_t gid, Group *g) {
    int64_t *cs = malloc((size_t)(ge - gs + 1) * sizeof *cs), ncls = 0;
    if (!cs) return ATR_NOMEM;
    for (int64_t k = gs; k < ge; k++) {
        if (k == gs || q->level[k] != q->level[k - 1]) cs[ncls++] = k;
        int64_t d = q->ids[k];
        if (q->mark[d] == gid && q->cls[d] != ncls) {
            free(cs);
            q->error[0] = ERR_TWO_LEVELS;
            return ATR_FALLBACK; /* "has two levels in one sub-group" */
        }
        q->mark[d] = gid, q->cls[d] = ncls;
    }
    cs[ncls] = ge;
    int64_t tally[5] = {0, 0, 0, 0, 0};
    for (int64_t i = 0; i < ncls; i++)
        for (int64_t j = i + 1; j < ncls; j++)
            atr_class_pair(q->counts, q->n, q->m, q->ids + cs[i], cs[i + 1] - cs[i],
                           q->ids + cs[j], cs[j + 1] - cs[j], tally);
    g->ful_ret = tally[0], g->poss_ret = tally[1], g->ful_imp = tally[2];
    g->poss_imp = tally[3], g->notoccur = tally[4];
    for (int64_t i = 0; i < ncls; i++) {
        int rel = q->level[cs[i]] > 0.0; /* the class's first level, as groupby's key */
        for (int64_t k = cs[i]; k < cs[i + 1]; k++) {
            *(rel ? &g->num_rel : &g->num_nonrel) += 1;
            *(rel ? &g->num_rel_ret : &g->num_nonrel_ret) += q->ids[k] < q->m;
        }
    }
    if (q->want_rnonrel && g->num_rel < g->num_nonrel)
        recount_classes(q, cs, ncls, g->num_rel, 0, g->rec_all);
    if (q->want_rnonrel && g->num_rel_ret < g->num_nonrel_ret)
        recount_classes(q, cs, ncls, g->num_rel_ret, 1, g->rec_ret);
    free(cs);
    return ATR_OK;
}

static int by_number(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* A matrix group's documents (ascending numbers: local order is number order), its closed
 * preferences (g rows of `words` 64-bit words, bit j of row i: i preferred to j; bits, so
 * that the closure ORs 64 columns at once) and each document's level (-1: none yet). */
typedef struct {
    int64_t g, words, *glob;
    uint64_t *prefers;
    double *level;
} Matrix;

static inline int prefers(const Matrix *x, int64_t i, int64_t j) {
    return (int)((x->prefers[i * x->words + (j >> 6)] >> (j & 63)) & 1u);
}

static inline void set_prefers(Matrix *x, int64_t i, int64_t j, int on) {
    uint64_t bit = (uint64_t)1 << (j & 63);
    uint64_t *w = x->prefers + i * x->words + (j >> 6);
    *w = on ? *w | bit : *w & ~bit;
}

/* The group's documents of lines[gs:ge], numbered locally; q->local set for them. */
static int matrix_docs(Query *q, int64_t gs, int64_t ge, Matrix *x) {
    x->glob = malloc((size_t)(ge - gs) * sizeof *x->glob);
    if (!x->glob) return ATR_NOMEM;
    x->g = 0;
    for (int64_t k = gs; k < ge; k++)
        if (q->local[q->ids[k]] < 0) q->local[q->ids[k]] = 0, x->glob[x->g++] = q->ids[k];
    qsort(x->glob, (size_t)x->g, sizeof *x->glob, by_number);
    for (int64_t i = 0; i < x->g; i++) q->local[x->glob[i]] = i;
    x->words = (x->g + 63) / 64;
    x->prefers = calloc((size_t)(x->g * x->words + 1), sizeof *x->prefers);
    x->level = malloc((size_t)x->g * sizeof *x->level);
    if (!x->prefers || !x->level) return ATR_NOMEM;
    for (int64_t i = 0; i < x->g; i++) x->level[i] = -1.0;
    return ATR_OK;
}

/* Each sub-group's pairs (a line above every later line of a lower level: lines are sorted
 * by level descending), and the level check of _matrix_group. */
static int matrix_pairs(Query *q, int64_t gs, int64_t ge, Matrix *x) {
    for (int64_t s = gs, e; s < ge; s = e) {
        for (e = s + 1; e < ge && q->jsg[e] == q->jsg[s]; e++) continue;
        for (int64_t k = s; k < e; k++) {
            double v = q->level[k], *old = x->level + q->local[q->ids[k]];
            if ((*old > 0.0 && v == 0.0) || (*old == 0.0 && v > 0.0)) {
                q->error[0] = ERR_ZERO_AND_ABOVE, q->error[2] = k;
                return ATR_FALLBACK; /* "is at level 0 and above 0" */
            }
            *old = v;
        }
        for (int64_t i = s; i < e; i++)
            for (int64_t j = i + 1; j < e; j++)
                if (q->level[i] > q->level[j])
                    set_prefers(x, q->local[q->ids[i]], q->local[q->ids[j]], 1);
    }
    return ATR_OK;
}

/* The transitive closure (Warshall's, in place: row and column k do not change in step k);
 * ATR_FALLBACK when two documents are each preferred to the other. */
static int close_matrix(Matrix *x, int64_t *error) {
    int64_t g = x->g, w = x->words;
    for (int64_t i = 0; i < g; i++) set_prefers(x, i, i, 1);
    for (int64_t k = 0; k < g; k++) {
        const uint64_t *row_k = x->prefers + k * w;
        for (int64_t i = 0; i < g; i++)
            if (prefers(x, i, k))
                for (int64_t v = 0; v < w; v++) x->prefers[i * w + v] |= row_k[v];
    }
    for (int64_t i = 0; i < g; i++) set_prefers(x, i, i, 0);
    for (int64_t i = 0; i < g; i++)
        for (int64_t j = i + 1; j < g; j++)
            if (prefers(x, i, j) && prefers(x, j, i)) {
                error[0] = ERR_CYCLE, error[2] = x->glob[i], error[3] = x->glob[j];
                return ATR_FALLBACK; /* "each preferred to the other" */
            }
    return ATR_OK;
}

/* _recount of a matrix group: the group's level-0 documents beyond the first `keep` (below
 * `limit`: m ranked_only, else n) left out; ranked_only: ranked documents only. */
static void recount_matrix(const Matrix *x, int64_t n, int64_t m, int64_t keep, int ranked_only,
                           int64_t *out) {
    int64_t limit = ranked_only ? m : n, first_out = limit, zeros = 0;
    for (int64_t i = 0; i < x->g && x->glob[i] < limit; i++)
        if (x->level[i] == 0.0 && zeros++ == keep) first_out = x->glob[i];
    int64_t ful = 0, poss = 0;
    for (int64_t i = 0; i < x->g; i++) {
        int64_t gi = x->glob[i];
        if ((gi >= first_out && x->level[i] == 0.0) || (ranked_only && gi >= m)) continue;
        for (int64_t j = 0; j < x->g; j++) {
            int64_t gj = x->glob[j];
            if (!prefers(x, i, j)) continue;
            if ((gj >= first_out && x->level[j] == 0.0) || (ranked_only && gj >= m)) continue;
            poss++;
            ful += gi < m && (gj >= m || gi < gj);
        }
    }
    out[0] = ful, out[1] = poss;
}

/* The group's counts into q->counts and g. */
static void matrix_counts(Query *q, const Matrix *x, Group *g) {
    int64_t m = q->m;
    for (int64_t i = 0; i < x->g; i++) {
        int64_t gi = x->glob[i];
        for (int64_t j = 0; j < x->g; j++) {
            if (!prefers(x, i, j)) continue;
            int64_t gj = x->glob[j];
            if (q->counts) q->counts[gi * q->n + gj] += 1;
            if (gi < m && gj < m) g->poss_ret++, g->ful_ret += gi < gj;
            else if (gi < m) g->ful_imp++, g->poss_imp++;
            else if (gj < m) g->poss_imp++;
            else g->notoccur++;
        }
        double v = x->level[i];
        g->num_rel += v > 0.0, g->num_rel_ret += v > 0.0 && gi < m;
        g->num_nonrel += v == 0.0, g->num_nonrel_ret += v == 0.0 && gi < m;
    }
}

/* _matrix_group: lines[gs:ge], several sub-groups, closed under transitivity. */
static int matrix_group(Query *q, int64_t gs, int64_t ge, Group *g) {
    Matrix x = {0, 0, NULL, NULL, NULL};
    int status = matrix_docs(q, gs, ge, &x);
    if (status == ATR_OK) status = matrix_pairs(q, gs, ge, &x);
    if (status == ATR_OK) status = close_matrix(&x, q->error);
    if (status == ATR_OK) {
        matrix_counts(q, &x, g);
        if (q->want_rnonrel && g->num_rel < g->num_nonrel)
            recount_matrix(&x, q->n, q->m, g->num_rel, 0, g->rec_all);
        /* a matrix group cuts after num_rel ranked ones (trec_eval's rule, kept) */
        if (q->want_rnonrel && g->num_rel_ret < g->num_nonrel_ret)
            recount_matrix(&x, q->n, q->m, g->num_rel, 1, g->rec_ret);
    }
    for (int64_t i = 0; x.glob && i < x.g; i++) q->local[x.glob[i]] = -1;
    free(x.glob);
    free(x.prefers);
    free(x.level);
    return status;
}

/* --------------------------------------------------------- a query's ranking ---- */

/* The rank of each of the run query's records (order[start:stop], docno order) under the
 * preference order (score descending, docno ascending), -1 beyond -M; NULL: no memory. */
static int64_t *record_ranks(const AtrTable *run, int64_t rq, int64_t max_ret, int64_t *count) {
    int64_t c = run->stop[rq] - run->start[rq];
    const int64_t *recs = run->order + run->start[rq];
    int64_t *pos = malloc((size_t)(c + 1) * sizeof *pos), *tmp = malloc((size_t)(c + 1) * 8);
    int64_t *rank = malloc((size_t)(c + 1) * sizeof *rank);
    double *value = malloc((size_t)(c + 1) * sizeof *value);
    if (pos && tmp && rank && value) {
        for (int64_t i = 0; i < c; i++) pos[i] = i, value[i] = run->value[recs[i]];
        Scores s = {value};
        merge_sort(pos, tmp, c, by_score, &s);
        for (int64_t r = 0; r < c; r++) rank[pos[r]] = max_ret < 0 || r < max_ret ? r : -1;
    } else {
        free(rank);
        rank = NULL;
    }
    free(pos), free(tmp), free(value);
    *count = c;
    return rank;
}

/* Each judged document's rank (unique documents u[0:nu], lines indices in docno order), -1
 * unranked: a merge of the two docno orders; a query the run lacks ranks the stand-in. */
static int judged_ranks(const Prefs *p, const AtrTable *run, int64_t rq, int64_t max_ret,
                        const int64_t *u, int64_t nu, int64_t *rank_u) {
    for (int64_t k = 0; k < nu; k++) rank_u[k] = -1;
    if (rq < 0) {
        int64_t len = (int64_t)strlen(STAND_IN);
        for (int64_t k = 0; k < nu && max_ret != 0; k++) {
            const Line *x = p->lines + u[k];
            if (!span_cmp(p->data + x->doc, x->doc_len, (const uint8_t *)STAND_IN, len))
                rank_u[k] = 0;
        }
        return ATR_OK;
    }
    int64_t c = 0, *rank = record_ranks(run, rq, max_ret, &c);
    if (!rank) return ATR_NOMEM;
    const int64_t *recs = run->order + run->start[rq];
    for (int64_t k = 0, r = 0; k < nu && r < c;) {
        const Line *x = p->lines + u[k];
        int cmp = span_cmp(p->data + x->doc, x->doc_len, run->data + run->doc_start[recs[r]],
                           run->doc_len[recs[r]]);
        if (cmp == 0) rank_u[k++] = rank[r++];
        else if (cmp < 0) k++;
        else r++;
    }
    free(rank);
    return ATR_OK;
}

static int by_rank(const void *ctx, int64_t a, int64_t b) {
    const int64_t *rank = ctx;
    return rank[a] < rank[b] ? -1 : rank[a] > rank[b];
}

/* query_prefs' numbering: the ranked judged documents by rank, then the others in docno
 * order. lines: the query's line indices; sets each line's number, returns n (and m). */
static int number_documents(const Prefs *p, const AtrTable *run, int64_t rq, int64_t max_ret,
                            int64_t *lines, int64_t nl, int64_t *tmp, int64_t *n, int64_t *m) {
    merge_sort(lines, tmp, nl, by_doc, p);
    int64_t nu = 0;
    int64_t *u = malloc((size_t)nl * sizeof *u), *rank_u = malloc((size_t)nl * sizeof *u);
    int64_t *slot = malloc((size_t)nl * sizeof *u);
    int status = u && rank_u && slot ? ATR_OK : ATR_NOMEM;
    for (int64_t k = 0; status == ATR_OK && k < nl; k++) {
        if (k == 0 || by_doc(p, lines[k - 1], lines[k]) != 0) u[nu++] = lines[k];
        p->lines[lines[k]].number = nu - 1; /* the unique document, numbered below */
    }
    if (status == ATR_OK) status = judged_ranks(p, run, rq, max_ret, u, nu, rank_u);
    if (status == ATR_OK) {
        /* ranked ones by rank: ranks are distinct, so sort the (rank, u) pairs */
        int64_t ranked = 0;
        for (int64_t k = 0; k < nu; k++)
            if (rank_u[k] >= 0) slot[ranked++] = k;
        merge_sort(slot, tmp, ranked, by_rank, rank_u);
        int64_t next = 0;
        for (int64_t a = 0; a < ranked; a++) u[slot[a]] = next++;
        for (int64_t k = 0; k < nu; k++)
            if (rank_u[k] < 0) u[k] = next++;
        for (int64_t k = 0; k < nl; k++) p->lines[lines[k]].number = u[p->lines[lines[k]].number];
        *n = nu, *m = ranked;
    }
    free(u), free(rank_u), free(slot);
    return status;
}

/* ---------------------------------------------------------------- the values ---- */

static double share(int64_t ful, int64_t poss, double none) {
    return poss ? (double)ful / (double)poss : none;
}

/* _mean_of_groups of family f: the groups' ratios summed in group order, over their number;
 * 0 unless the sum is above 0 (a NaN ratio makes it 0). */
static double mean_of_groups(const Group *gs, int64_t ng, int f) {
    double total = 0.0;
    for (int64_t i = 0; i < ng; i++) {
        const Group *g = gs + i;
        int64_t all = g->poss_ret + g->poss_imp + g->notoccur, ful = g->ful_ret + g->ful_imp;
        int64_t big_r = g->num_rel, big_n = g->num_nonrel;
        if (f == AVGJG) total += share(ful, all, 0.0);
        else if (f == AVGJG_RET) total += share(g->ful_ret, g->poss_ret, 0.0);
        else if (f == AVGJG_IMP) total += share(ful, g->poss_ret + g->poss_imp, 0.0);
        else if (f == RNONREL && big_r >= big_n)
            total += share(ful + g->num_rel_ret * (big_r - big_n), all + big_r * (big_r - big_n),
                           NAN);
        else if (f == RNONREL) total += share(g->rec_all[0], g->rec_all[1], NAN);
        else if (g->num_rel_ret >= g->num_nonrel_ret) { /* RNONREL_RET */
            int64_t d = g->num_rel_ret - g->num_nonrel_ret;
            total += share(g->ful_ret + g->num_rel_ret * d, g->poss_ret + g->num_rel * d, NAN);
        } else total += share(g->rec_ret[0], g->rec_ret[1], NAN);
    }
    return total > 0.0 ? total / (double)ng : 0.0;
}

/* _pair_ratios: the ranked pairs' sum (blocks "r") or the ranked and implied ones' ("ri",
 * "rin") over the number of pairs of those blocks; 0 without any. */
static double pair_ratio(const double *sums, const int64_t *sizes, int f) {
    int64_t pairs = sizes[0] + (f != PAIR_RET ? sizes[1] : 0) + (f == PAIR ? sizes[2] : 0);
    if (!pairs) return 0.0;
    return (f == PAIR_RET ? sums[0] : sums[1]) / (double)pairs;
}

/* Family f of a query from its groups (and the pair sums). */
static double family_value(const Group *gs, int64_t ng, const double *sums,
                           const int64_t *sizes, int f) {
    int64_t ful_ret = 0, ful_imp = 0, poss_ret = 0, poss_imp = 0, notoccur = 0;
    for (int64_t i = 0; i < ng; i++) {
        ful_ret += gs[i].ful_ret, ful_imp += gs[i].ful_imp, poss_ret += gs[i].poss_ret;
        poss_imp += gs[i].poss_imp, notoccur += gs[i].notoccur;
    }
    switch (f) {
    case NUM_POSS: return (double)(poss_ret + poss_imp + notoccur);
    case NUM_FUL: return (double)(ful_ret + ful_imp);
    case NUM_FUL_RET: return (double)ful_ret;
    case SIMP: return share(ful_ret + ful_imp, poss_ret + poss_imp + notoccur, 0.0);
    case SIMP_RET: return share(ful_ret, poss_ret, 0.0);
    case SIMP_IMP: return share(ful_ret + ful_imp, poss_ret + poss_imp, 0.0);
    case PAIR: case PAIR_RET: case PAIR_IMP: return pair_ratio(sums, sizes, f);
    default: return mean_of_groups(gs, ng, f);
    }
}

/* ----------------------------------------------------------------- one query ---- */

/* The groups of q->lines (by_group order): runs of one jg; several sub-groups make a matrix
 * group (the lines of a jg are in jsg order: first and last differ). */
static int query_groups(Query *q, Group *gs, int64_t *ng) {
    int status = ATR_OK;
    *ng = 0;
    for (int64_t s = 0, e; status == ATR_OK && s < q->nl; s = e) {
        for (e = s + 1; e < q->nl && q->jg[e] == q->jg[s]; e++) continue;
        Group *g = gs + (*ng)++;
        memset(g, 0, sizeof *g);
        if (q->jsg[e - 1] != q->jsg[s]) status = matrix_group(q, s, e, g);
        else status = class_group(q, s, e, *ng, g);
        q->error[1] = q->jg[s]; /* read only with a refusal: the group's */
    }
    return status;
}

typedef struct {
    const Prefs *p;
    const AtrTable *run;
    const AtrOptions *o;
    const int *family; /* per column: the family, -1 none */
    int64_t ncolumns;
    int want_pairs, want_rnonrel;
} Job;

static void free_query(Query *q) {
    free(q->mark), free(q->cls), free(q->local), free(q->counts);
    q->mark = q->cls = q->local = q->counts = NULL;
}

/* A query's groups (gs: nl entries) and every family's value (vals: NFAMILIES; the
 * prefs_pair sums and sizes with want_pairs, else 0), its sorted arrays set in q. */
static int query_values(Query *q, int want_pairs, Group *gs, int64_t *ng, double *vals,
                        double *sums, int64_t *sizes) {
    int64_t n = q->n;
    q->mark = malloc((size_t)(n + 1) * sizeof *q->mark);
    q->cls = malloc((size_t)(n + 1) * sizeof *q->cls);
    q->local = malloc((size_t)(n + 1) * sizeof *q->local);
    /* the n x n counts only for the prefs_pair families (their only reader) */
    q->counts = want_pairs ? calloc((size_t)(n * n + 1), sizeof *q->counts) : NULL;
    int status = ATR_OK;
    if (!q->mark || !q->cls || !q->local || (want_pairs && !q->counts)) status = ATR_NOMEM;
    for (int64_t k = 0; status == ATR_OK && k < n; k++) q->mark[k] = -1, q->local[k] = -1;
    if (status == ATR_OK) status = query_groups(q, gs, ng);
    sums[0] = sums[1] = 0.0, sizes[0] = sizes[1] = sizes[2] = 0;
    if (status == ATR_OK && want_pairs) atr_pair_sums(q->counts, q->n, q->m, sums, sizes);
    for (int f = 0; status == ATR_OK && f < NFAMILIES; f++)
        vals[f] = family_value(gs, *ng, sums, sizes, f);
    free_query(q);
    return status;
}

/* The sorted lines' arrays of a query read from the file: group and sub-group codes (a new
 * code where the name changes: equal codes, equal names), levels, numbers. */
static int64_t *line_arrays(const Prefs *p, const int64_t *lines, int64_t nl, Query *q) {
    int64_t *block = malloc((size_t)(3 * nl + 1) * sizeof *block);
    double *level = malloc((size_t)(nl + 1) * sizeof *level);
    if (!block || !level) {
        free(block), free(level);
        return NULL;
    }
    int64_t *jg = block, *jsg = block + nl, *ids = block + 2 * nl;
    for (int64_t k = 0; k < nl; k++) {
        const Line *x = p->lines + lines[k], *y = k ? p->lines + lines[k - 1] : NULL;
        int new_jg = !y || span_cmp(p->data + x->jg, x->jg_len, p->data + y->jg, y->jg_len);
        int new_jsg = new_jg || span_cmp(p->data + x->jsg, x->jsg_len, p->data + y->jsg,
                                         y->jsg_len);
        jg[k] = k ? jg[k - 1] + new_jg : 0;
        jsg[k] = k ? jsg[k - 1] + new_jsg : 0;
        level[k] = x->level, ids[k] = x->number;
    }
    q->jg = jg, q->jsg = jsg, q->ids = ids, q->level = level;
    return block;
}

/* query_prefs and every chosen family: the query's row of values. lines: its line indices
 * (reordered here); rq: its run query, -1 absent. */
static int evaluate_query(const Job *job, int64_t *lines, int64_t nl, int64_t rq, double *row) {
    const Prefs *p = job->p;
    Query q;
    memset(&q, 0, sizeof q);
    q.nl = nl, q.want_rnonrel = job->want_rnonrel;
    int64_t *tmp = malloc((size_t)nl * sizeof *tmp), *block = NULL;
    Group *gs = malloc((size_t)nl * sizeof *gs);
    int status = tmp && gs ? ATR_OK : ATR_NOMEM;
    int64_t ng = 0, sizes[3];
    double sums[2], vals[NFAMILIES];
    if (status == ATR_OK)
        status = number_documents(p, job->run, rq, job->o->max_ret, lines, nl, tmp, &q.n, &q.m);
    if (status == ATR_OK) {
        merge_sort(lines, tmp, nl, by_group, p);
        block = line_arrays(p, lines, nl, &q);
        if (!block) status = ATR_NOMEM;
    }
    if (status == ATR_OK) status = query_values(&q, job->want_pairs, gs, &ng, vals, sums, sizes);
    for (int64_t j = 0; status == ATR_OK && j < job->ncolumns; j++)
        if (job->family[j] >= 0) row[j] = vals[job->family[j]];
    free(block), free((void *)q.level), free(tmp), free(gs);
    return status;
}

/* ---------------------------------------------------------- one query from Python ---- */

typedef struct {
    const int64_t *jg, *jsg, *ids;
    const double *level;
} Keys;

static int by_keys(const void *ctx, int64_t a, int64_t b) {
    const Keys *k = ctx;
    if (k->jg[a] != k->jg[b]) return k->jg[a] < k->jg[b] ? -1 : 1;
    if (k->jsg[a] != k->jsg[b]) return k->jsg[a] < k->jsg[b] ? -1 : 1;
    if (k->level[a] != k->level[b]) return k->level[a] > k->level[b] ? -1 : 1;
    return k->ids[a] < k->ids[b] ? -1 : k->ids[a] > k->ids[b];
}

/* metrics/trec_prefs.query_prefs: a query's nl lines as group and sub-group codes (ordered
 * as their names), document numbers (n judged, the first m ranked) and levels. Out: every
 * family's value (NFAMILIES), each group's 9 counts (Group's order), the prefs_pair sizes
 * and sums. Returns the number of groups; -1 refused (error: kind, the group's code, then
 * the line (level 0 and above) or the two numbers (cycle)); -2 no memory. */
int64_t atr_prefs_query(const int64_t *jg, const int64_t *jsg, const int64_t *ids,
                        const double *level, int64_t nl, int64_t n, int64_t m, double *values,
                        int64_t *tallies, int64_t *sizes, double *sums, int64_t *error) {
    Keys keys = {jg, jsg, ids, level};
    int64_t *idx = malloc((size_t)(nl + 1) * sizeof *idx), *tmp = malloc((size_t)(nl + 1) * 8);
    int64_t *block = malloc((size_t)(3 * nl + 1) * sizeof *block);
    double *lv = malloc((size_t)(nl + 1) * sizeof *lv);
    Group *gs = malloc((size_t)(nl + 1) * sizeof *gs);
    Query q;
    memset(&q, 0, sizeof q);
    int64_t ng = -2;
    if (idx && tmp && block && lv && gs) {
        for (int64_t k = 0; k < nl; k++) idx[k] = k;
        merge_sort(idx, tmp, nl, by_keys, &keys);
        for (int64_t k = 0; k < nl; k++) {
            block[k] = jg[idx[k]], block[nl + k] = jsg[idx[k]];
            block[2 * nl + k] = ids[idx[k]], lv[k] = level[idx[k]];
        }
        q.nl = nl, q.n = n, q.m = m, q.want_rnonrel = 1;
        q.jg = block, q.jsg = block + nl, q.ids = block + 2 * nl, q.level = lv;
        int status = query_values(&q, 1, gs, &ng, values, sums, sizes);
        if (status == ATR_FALLBACK && q.error[0] == ERR_ZERO_AND_ABOVE)
            q.error[2] = idx[q.error[2]]; /* the caller's line */
        memcpy(error, q.error, sizeof q.error);
        ng = status == ATR_OK ? ng : status == ATR_FALLBACK ? -1 : -2;
        for (int64_t g = 0; g < ng; g++) {
            const Group *x = gs + g;
            int64_t row[9] = {x->ful_ret, x->poss_ret, x->ful_imp, x->poss_imp, x->notoccur,
                              x->num_rel, x->num_rel_ret, x->num_nonrel, x->num_nonrel_ret};
            memcpy(tallies + 9 * g, row, sizeof row);
        }
    }
    free(idx), free(tmp), free(block), free(lv), free(gs);
    return ng;
}

/* ------------------------------------------------------------ the evaluation ---- */

/* The run query of a qid span (the run's qids in byte order), or -1. */
static int64_t run_query(const AtrTable *run, const uint8_t *qid, int64_t len) {
    int64_t lo = 0, hi = run->nq;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const char *s = run->qids[mid];
        int c = span_cmp(qid, len, (const uint8_t *)s, (int64_t)strlen(s));
        if (c == 0) return mid;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return -1;
}

/* The evaluated queries: runs of one qid in idx (qid order, file order within), each kept
 * when -D allows it and the run has it (or -c). qs[k], ql[k], rq[k]; returns how many. */
static int64_t chosen_queries(const Prefs *p, const AtrTable *run, const AtrOptions *o,
                              const int64_t *idx, int64_t *qs, int64_t *ql, int64_t *rq) {
    int64_t nq = 0;
    for (int64_t s = 0, e; s < p->n; s = e) {
        for (e = s + 1; e < p->n && by_qid(p, idx[s], idx[e]) == 0; e++) continue;
        const Line *x = p->lines + idx[s];
        const uint8_t *qid = p->data + x->qid;
        if (o->only_query && span_cmp(qid, x->qid_len, (const uint8_t *)o->only_query,
                                      (int64_t)strlen(o->only_query)))
            continue;
        int64_t r = run_query(run, qid, x->qid_len);
        if (r < 0 && !o->complete) continue;
        qs[nq] = s, ql[nq] = e - s, rq[nq++] = r;
    }
    return nq;
}

/* The evaluated queries' names, in one block (qids[0] owns it). */
static int name_queries(const Prefs *p, const int64_t *idx, const int64_t *qs, AtrEval *out) {
    int64_t total = 0;
    for (int64_t k = 0; k < out->nq; k++) total += p->lines[idx[qs[k]]].qid_len + 1;
    char *block = malloc((size_t)total);
    out->qids = malloc((size_t)out->nq * sizeof *out->qids);
    if (!block || !out->qids) {
        free(block);
        return ATR_NOMEM;
    }
    for (int64_t k = 0; k < out->nq; k++) {
        const Line *x = p->lines + idx[qs[k]];
        memcpy(block, p->data + x->qid, (size_t)x->qid_len);
        block[x->qid_len] = 0;
        out->qids[k] = block;
        block += x->qid_len + 1;
    }
    return ATR_OK;
}

/* evaluate_prefs' all line: counts (and num_q's) summed, the rest averaged over queries;
 * each column summed in query order from its first value (numpy's cumsum). */
static void summarize(AtrEval *out, const int *family) {
    int64_t nq = out->nq, w = out->ncolumns;
    for (int64_t j = 0; j < w; j++) {
        double total = out->values[j];
        for (int64_t k = 1; k < nq; k++) total += out->values[k * w + j];
        int count = family[j] >= NUM_POSS && family[j] <= NUM_FUL_RET;
        if (strcmp(out->names[j], "num_q") == 0) out->summary[j] = (double)nq;
        else out->summary[j] = count ? total : total / (double)nq;
    }
}

void atr_prefs_free(AtrEval *out) {
    if (out->qids && out->nq > 0) free(out->qids[0]);
    free(out->qids), free(out->values), free(out->summary);
    out->qids = NULL, out->values = NULL, out->summary = NULL;
}

/* The family of each column (by its printed name, as evaluate_prefs), and which scratch the
 * chosen ones need. */
static int *families_of(const AtrMeasures *measures, int *want_pairs, int *want_rnonrel) {
    int *family = malloc((size_t)(measures->ncolumns + 1) * sizeof *family);
    if (!family) return NULL;
    *want_pairs = *want_rnonrel = 0;
    for (int64_t j = 0; j < measures->ncolumns; j++) {
        family[j] = -1;
        for (int f = 0; f < NFAMILIES; f++)
            if (strcmp(measures->names[j], FAMILIES[f]) == 0) family[j] = f;
        *want_pairs |= family[j] == PAIR || family[j] == PAIR_RET || family[j] == PAIR_IMP;
        *want_rnonrel |= family[j] == RNONREL || family[j] == RNONREL_RET;
    }
    return family;
}

static int evaluate_all(const Job *job, int64_t *idx, const int64_t *qs, const int64_t *ql,
                        const int64_t *rq, AtrEval *out) {
    int status = name_queries(job->p, idx, qs, out);
    int64_t w = job->ncolumns;
    out->values = calloc((size_t)(out->nq * w + 1), sizeof *out->values);
    out->summary = calloc((size_t)(w + 1), sizeof *out->summary);
    if (!out->values || !out->summary) status = ATR_NOMEM;
    for (int64_t k = 0; status == ATR_OK && k < out->nq; k++)
        status = evaluate_query(job, idx + qs[k], ql[k], rq[k], out->values + k * w);
    if (status == ATR_OK) summarize(out, job->family);
    return status;
}

int atr_prefs_evaluate(const AtrTable *run, const char *path, int qrels_form,
                       const AtrMeasures *measures, const AtrOptions *options, AtrEval *out) {
    Prefs p;
    memset(&p, 0, sizeof p);
    out->run_id = run->tag, out->ncolumns = measures->ncolumns, out->names = measures->names;
    out->owners = measures->owners, out->count = measures->count, out->relstrings = NULL;
    out->nq = 0, out->qids = NULL, out->values = NULL, out->summary = NULL;
    int status = read_prefs(path, qrels_form, &p);
    int64_t *idx = NULL, *tmp = NULL, *qs = NULL, *ql = NULL, *rq = NULL;
    Job job = {&p, run, options, NULL, measures->ncolumns, 0, 0};
    int *family = NULL;
    if (status == ATR_OK) {
        size_t size = (size_t)p.n * sizeof(int64_t);
        idx = malloc(size), tmp = malloc(size), qs = malloc(size), ql = malloc(size);
        rq = malloc(size);
        family = families_of(measures, &job.want_pairs, &job.want_rnonrel);
        job.family = family;
        if (!idx || !tmp || !qs || !ql || !rq || !family) status = ATR_NOMEM;
    }
    if (status == ATR_OK) {
        for (int64_t k = 0; k < p.n; k++) idx[k] = k;
        merge_sort(idx, tmp, p.n, by_qid, &p);
        out->nq = chosen_queries(&p, run, options, idx, qs, ql, rq);
        /* "no query of the run has preferences in the judgements" */
        if (out->nq == 0) status = ATR_FALLBACK;
    }
    if (status == ATR_OK) status = evaluate_all(&job, idx, qs, ql, rq, out);
    if (status != ATR_OK) atr_prefs_free(out), out->nq = 0;
    free(idx), free(tmp), free(qs), free(ql), free(rq), free(family);
    free(p.data), free(p.lines);
    return status;
}
