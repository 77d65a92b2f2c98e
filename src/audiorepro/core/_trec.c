/* The compiled kernels of `audiorepro trec-eval`, built ahead of time by the package's own
 * build (setup.py, a setuptools Extension loaded with ctypes by audiorepro.core.native): the
 * byte scanner of audiorepro.formats.trec_scan and every trec_eval measure of
 * audiorepro.metrics.trec_kernels. The formulas are in those modules' docstrings and in
 * audiorepro.metrics.trec's measure table.
 *
 * Numbers are trec_eval's: it is C too, and every value here is a double summed in rank order
 * with the same operations in the same order, so the doubles equal trec_eval's. The build
 * turns floating-point contraction off (no FMA) and uses no fast-math; the C library's log,
 * log2 and floor are the ones trec_eval calls.
 *
 * No Python.h: a plain shared object of int64/double/uint8 buffers. Caller (Python) allocates
 * every output; scratch memory is malloc'ed here and freed before returning.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_trec.h"

#define ABI_VERSION 4

enum {
    NUM_RET, NUM_REL, NUM_REL_RET, MAP, GM_MAP, RPREC, BPREF, RECIP_RANK,
    IPREC, P, RELSTRING, RECALL, INFAP, GM_BPREF, RPREC_MULT, UTILITY,
    PT11, BING, G, DCG, IDEAL_DCG, NDCG, NDCG_REL, RNDCG,
    NDCG_CUT, MAP_CUT, RELATIVE_P, SUCCESS, SET_P, SET_RELATIVE_P,
    SET_RECALL, SET_MAP, SET_F, NUM_NONREL_JUDGED_RET, RBP, RBP_RESID, UNJ
};
#define MIN_GEO_MEAN 0.00001
#define INFAP_EPSILON 0.00001
#define NONPOOL (-1)
#define UNJUDGED (-2)

enum { ERR_FEW_FIELDS = 1, ERR_MANY_FIELDS, ERR_NUL, ERR_LONG, ERR_NONFINITE };

int64_t atr_abi(void) { return ABI_VERSION; }

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---------------------------------------------------------------- the byte scanner ---- */

static inline int is_space(uint8_t c) { return c == 32 || (c >= 9 && c <= 13); }

int64_t atr_atol(const uint8_t *data, int64_t start, int64_t stop) {
    int64_t i = start, sign = 1, value = 0, digits = 0;
    if (i < stop && (data[i] == 45 || data[i] == 43)) {
        sign = data[i] == 45 ? -1 : 1;
        i++;
    }
    while (i < stop && data[i] >= 48 && data[i] <= 57) {
        if (digits < 18) value = value * 10 + (data[i] - 48);
        digits++;
        i++;
    }
    return sign * value;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* C atof on data[start:stop]: status 0 exact here, 1 left to Python, 2 not finite. */
double atr_atof(const uint8_t *data, int64_t start, int64_t stop, int64_t *status,
                int64_t *end_out) {
    int64_t i = start;
    int neg = 0;
    *status = 0;
    if (i < stop && (data[i] == 45 || data[i] == 43)) {
        neg = data[i] == 45;
        i++;
    }
    if (i + 1 < stop && data[i] == 48 && (data[i + 1] | 32) == 120) {
        *status = 1;
        *end_out = stop;
        return 0.0;
    }
    if (i < stop && ((data[i] | 32) == 105 || (data[i] | 32) == 110)) {
        if (i + 2 < stop && ((data[i + 1] | 32) == 110 || (data[i + 1] | 32) == 97) &&
            ((data[i + 2] | 32) == 102 || (data[i + 2] | 32) == 110)) {
            *status = 2;
            *end_out = stop;
            return 0.0;
        }
    }
    uint64_t mant = 0;
    int64_t sig = 0, exp10 = 0;
    int any_digit = 0, seen_dot = 0;
    while (i < stop) {
        uint8_t c = data[i];
        if (c >= 48 && c <= 57) {
            any_digit = 1;
            if (mant > 0 || c != 48) {
                if (sig < 19) {
                    mant = mant * 10 + (uint64_t)(c - 48);
                    sig++;
                    if (seen_dot) exp10--;
                } else {
                    sig++;
                    if (!seen_dot) exp10++;
                }
            } else if (seen_dot) {
                exp10--;
            }
        } else if (c == 46 && !seen_dot) {
            seen_dot = 1;
        } else {
            break;
        }
        i++;
    }
    if (!any_digit) {
        *end_out = start;
        return 0.0;
    }
    int64_t end = i;
    if (i < stop && (data[i] | 32) == 101) {
        int64_t j = i + 1;
        int eneg = 0;
        if (j < stop && (data[j] == 45 || data[j] == 43)) {
            eneg = data[j] == 45;
            j++;
        }
        if (j < stop && data[j] >= 48 && data[j] <= 57) {
            int64_t e = 0;
            while (j < stop && data[j] >= 48 && data[j] <= 57) {
                if (e < 100000) e = e * 10 + (data[j] - 48);
                j++;
            }
            exp10 += eneg ? -e : e;
            end = j;
        }
    }
    *end_out = end;
    if (mant == 0) return neg ? -0.0 : 0.0;
    if (sig <= 15 && exp10 >= -22 && exp10 <= 22) {
        double value = (double)mant;
        value = exp10 >= 0 ? value * POW10[exp10] : value / POW10[-exp10];
        return neg ? -value : value;
    }
    *status = 1;
    return 0.0;
}

int64_t atr_count_lines(const uint8_t *data, int64_t size) {
    int64_t n = 1;
    const uint8_t *p = data, *stop = data + size;
    while (p < stop && (p = memchr(p, 10, (size_t)(stop - p))) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* Every record of a qrels (mode bit 0 clear) or run file (set); see trec_scan.scan for the
 * outputs. Mode bit 1 (qrels only, -R qrels_jg): a record's group key is its first two fields
 * (qid and judgement group, the blanks between included), so that each (qid, group) is a
 * query of the numpy-free reader's table (formats/trec_light.py); a record joins the most
 * recent of the last 16 groups with its key, so groups need not ascend there. */
void atr_scan(const uint8_t *data, int64_t size, int64_t mode, int64_t max_line, int32_t *group,
              int64_t *gstart, int32_t *glen, int64_t *dstart, int32_t *dlen, double *value,
              int32_t *line, uint8_t *slow, int64_t *info) {
    int64_t run = mode & 1, key_last = run ? 0 : (mode >> 1) & 1;
    int64_t want = run ? 6 : 4;
    int64_t starts[7], stops[7];
    int64_t n = 0, groups = 0, number = 0, pos = 0, end = size, nonascii = 0;
    memset(info, 0, 8 * sizeof(int64_t));
    while (pos < end) {
        number++;
        int64_t stop = pos;
        while (stop < end && data[stop] != 10) {
            uint8_t c = data[stop];
            if (c == 0) {
                info[2] = ERR_NUL;
                info[3] = number;
                return;
            }
            if (c >= 128) nonascii = 1;
            stop++;
        }
        if (stop - pos > max_line) {
            info[2] = ERR_LONG;
            info[3] = number;
            return;
        }
        int64_t fields = 0, i = pos;
        while (i < stop) {
            while (i < stop && is_space(data[i])) i++;
            if (i >= stop) break;
            int64_t j = i;
            while (j < stop && !is_space(data[j])) j++;
            if (fields <= want) {
                starts[fields] = i;
                stops[fields] = j;
            }
            fields++;
            i = j;
        }
        int64_t next_pos = stop + 1;
        if (fields == 0 || data[starts[0]] == 35) {
            pos = next_pos;
            continue;
        }
        if (fields < want || (!run && fields > want)) {
            info[2] = fields < want ? ERR_FEW_FIELDS : ERR_MANY_FIELDS;
            info[3] = number;
            info[4] = fields;
            return;
        }
        int64_t qs = starts[0], ql = stops[key_last] - starts[0];
        /* qrels_jg files interleave a query's judgement groups line by line: looking back over
         * a few groups keeps them a handful of groups, not one a line (their records need not
         * be adjacent there: atr_group_order gathers them). Otherwise the previous one only. */
        int64_t g = -1, back = key_last ? 16 : 1;
        for (int64_t b = groups - 1; b >= 0 && b >= groups - back && g < 0; b--)
            if (glen[b] == ql && memcmp(data + gstart[b], data + qs, (size_t)ql) == 0) g = b;
        if (g < 0) {
            gstart[groups] = qs;
            glen[groups] = (int32_t)ql;
            g = groups++;
        }
        group[n] = (int32_t)g;
        dstart[n] = starts[2];
        dlen[n] = (int32_t)(stops[2] - starts[2]);
        line[n] = (int32_t)number;
        if (run) {
            int64_t status, e;
            double v = atr_atof(data, starts[4], stops[4], &status, &e);
            if (status == 2) {
                info[2] = ERR_NONFINITE;
                info[3] = number;
                return;
            }
            if (status == 1) {
                slow[n] = 1;
                value[n] = (double)starts[4];
            } else {
                value[n] = v;
            }
            info[5] = starts[5];
            info[6] = stops[5] - starts[5];
        } else {
            value[n] = (double)atr_atol(data, starts[3], stops[3]);
        }
        n++;
        pos = next_pos;
    }
    info[0] = n;
    info[1] = groups;
    info[7] = nonascii;
}

/* C strcmp of two spans (bytes unsigned; a prefix first). */
int64_t atr_compare(const uint8_t *a, int64_t sa, int64_t la, const uint8_t *b, int64_t sb,
                    int64_t lb) {
    int64_t m = la < lb ? la : lb;
    int c = memcmp(a + sa, b + sb, (size_t)m);
    if (c != 0) return c < 0 ? -1 : 1;
    if (la == lb) return 0;
    return la < lb ? -1 : 1;
}

/* Each query's records order[start[q]:stop[q]] sorted by docno in place (a stable merge
 * sort); a record whose docno repeats one of its query, or -1. */
int64_t atr_sort_by_docno(const uint8_t *data, const int64_t *dstart, const int32_t *dlen,
                          int64_t *order, int64_t size, const int64_t *start,
                          const int64_t *stop, int64_t nq) {
    int64_t longest = 1;
    for (int64_t q = 0; q < nq; q++) longest = max64(longest, stop[q] - start[q]);
    (void)size;
    int64_t *tmp = malloc((size_t)longest * sizeof(int64_t)); /* one query's records at a time */
    if (!tmp) return -2;
    int64_t found = -1;
    for (int64_t q = 0; q < nq && found < 0; q++) {
        int64_t lo = start[q], hi = stop[q];
        for (int64_t width = 1; width < hi - lo; width *= 2) {
            for (int64_t left = lo; left < hi; left += 2 * width) {
                int64_t mid = min64(left + width, hi), right = min64(left + 2 * width, hi);
                int64_t i = left, j = mid, k = left - lo;
                while (i < mid && j < right) {
                    int64_t a = order[i], b = order[j];
                    if (atr_compare(data, dstart[a], dlen[a], data, dstart[b], dlen[b]) <= 0) {
                        tmp[k++] = a;
                        i++;
                    } else {
                        tmp[k++] = b;
                        j++;
                    }
                }
                while (i < mid) tmp[k++] = order[i++];
                while (j < right) tmp[k++] = order[j++];
            }
            memcpy(order + lo, tmp, (size_t)(hi - lo) * sizeof(int64_t));
        }
        for (int64_t k = lo + 1; k < hi; k++) {
            int64_t a = order[k - 1], b = order[k];
            if (atr_compare(data, dstart[a], dlen[a], data, dstart[b], dlen[b]) == 0) {
                found = b > a ? b : a;
                break;
            }
        }
    }
    free(tmp);
    return found;
}

/* The records of each query, queries in qid order: a stable counting sort of the records by
 * their qid's rank (rank_of[group[k]]; a qid whose lines are not adjacent has several groups).
 * Query q's records are order[start[q]:stop[q]], in file order, ready for atr_sort_by_docno.
 * One pass to count, one to place: the numpy-free reader's stand-in for a stable argsort. */
int64_t atr_group_order(const int32_t *group, int64_t n, const int64_t *rank_of, int64_t nq,
                        int64_t *start, int64_t *stop, int64_t *order) {
    int64_t *next = calloc((size_t)(nq > 0 ? nq : 1), sizeof(int64_t));
    if (!next) return -2;
    for (int64_t k = 0; k < n; k++) next[rank_of[group[k]]]++;
    int64_t total = 0;
    for (int64_t q = 0; q < nq; q++) {
        start[q] = total;
        total += next[q];
        stop[q] = total;
        next[q] = start[q];
    }
    for (int64_t k = 0; k < n; k++) order[next[rank_of[group[k]]]++] = k;
    free(next);
    return 0;
}

/* Relevance levels as the integers the kernels read (the scanner stores atol's value as a
 * double); the first record whose level is beyond +-bound (refused: the measures keep
 * per-level counts), or -1. */
int64_t atr_levels(const double *value, int64_t n, double bound, int64_t *levels) {
    for (int64_t k = 0; k < n; k++) {
        if (fabs(value[k]) > bound) return k;
        levels[k] = (int64_t)value[k];
    }
    return -1;
}

/* ------------------------------------------------------------ one query's measures ---- */

static int64_t lround_half(double x) {
    return x >= 0 ? (int64_t)floor(x + 0.5) : -(int64_t)floor(-x + 0.5);
}

static double ap_of(const int64_t *rels, int64_t n, int64_t level, int64_t big_r) {
    double total = 0.0;
    int64_t found = 0;
    for (int64_t i = 0; i < n; i++) {
        if (rels[i] >= level) {
            found++;
            total += (double)found / ((double)i + 1.0);
        }
    }
    return found ? total / (double)big_r : 0.0;
}

static double bpref_of(const int64_t *rels, int64_t n, const int64_t *counts, int64_t ncounts,
                       int64_t level, int64_t big_r) {
    int64_t num_nonrel = 0;
    for (int64_t j = 0; j < min64(level, ncounts); j++) num_nonrel += counts[j];
    int64_t nonrel = 0;
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = rels[i];
        if (r < 0) continue;
        if (r < level)
            nonrel++;
        else if (nonrel > 0)
            total += 1.0 - (double)min64(nonrel, big_r) / (double)min64(num_nonrel, big_r);
        else
            total += 1.0;
    }
    return big_r ? total / (double)big_r : total;
}

static double infap_of(const int64_t *rels, int64_t n, int64_t level, int64_t big_r) {
    int64_t nonrel = 0, rel = 0, unjudged = 0;
    double total = 0.0;
    for (int64_t j = 0; j < n; j++) {
        int64_t r = rels[j];
        if (r == NONPOOL) continue;
        if (r == UNJUDGED) {
            unjudged++;
            continue;
        }
        if (r >= 0 && r < level) {
            nonrel++;
            continue;
        }
        rel++;
        if (j == 0) {
            total += 1.0;
        } else {
            double fj = (double)j;
            total += 1.0 / (fj + 1.0) +
                     (fj / (fj + 1.0)) * ((double)(rel - 1 + nonrel + unjudged) / fj) *
                         (((double)(rel - 1) + INFAP_EPSILON) /
                          ((double)(rel - 1 + nonrel) + 2 * INFAP_EPSILON));
        }
    }
    return big_r ? total / (double)big_r : total;
}

/* Interpolated precision at recall fractions ps (ascending) into out. */
static void interpolated(const int64_t *rels, int64_t n, int64_t level, int64_t big_r,
                         int64_t relret, const double *ps, int64_t k, double *out,
                         int64_t *cuts) {
    for (int64_t i = 0; i < k; i++) cuts[i] = lround_half(ps[i] * (double)big_r);
    int64_t cur = k - 1;
    while (cur >= 0 && cuts[cur] > relret) cur--;
    double best = (double)relret / (double)n;
    int64_t so_far = relret, i = n;
    while (i > 0 && so_far > 0) {
        double precis = (double)so_far / (double)i;
        if (best < precis) best = precis;
        if (rels[i - 1] >= level) {
            while (cur >= 0 && so_far == cuts[cur]) out[cur--] = best;
            so_far--;
        }
        i--;
    }
    while (cur >= 0) out[cur--] = best;
}

static void rprec_mult(const int64_t *rels, int64_t n, int64_t level, int64_t big_r,
                       int64_t relret, const double *ps, int64_t k, double *out, int64_t *cuts) {
    for (int64_t i = 0; i < k; i++) cuts[i] = (int64_t)(ps[i] * (double)big_r + 0.9);
    int64_t cur = k - 1;
    while (cur >= 0 && cuts[cur] > n) {
        out[cur] = (double)relret / (double)cuts[cur];
        cur--;
    }
    int64_t so_far = relret, i = n;
    while (i > 0 && so_far > 0) {
        double precis = (double)so_far / (double)i;
        while (cur >= 0 && i == cuts[cur]) out[cur--] = precis;
        if (rels[i - 1] >= level) so_far--;
        i--;
    }
}

/* P, recall, relative_P, success, map_cut and unj at integer cutoffs (ascending). */
static void at_cutoffs(const int64_t *rels, int64_t n, int64_t level, int64_t big_r, int64_t kind,
                       const int64_t *cuts, int64_t ncuts, double *out) {
    int64_t hits = 0, unj = 0, first = 0, c = 0;
    double ap = 0.0;
    for (int64_t i = 0; i <= n; i++) {
        while (c < ncuts && (i == cuts[c] || i == n)) {
            int64_t k = cuts[c];
            if (kind == P)
                out[c] = (double)hits / (double)k;
            else if (kind == RECALL)
                out[c] = big_r ? (double)hits / (double)big_r : 0.0;
            else if (kind == RELATIVE_P)
                out[c] = big_r ? (double)hits / (double)(k < big_r ? k : big_r) : 0.0;
            else if (kind == SUCCESS)
                out[c] = first ? 1.0 : 0.0;
            else if (kind == MAP_CUT)
                out[c] = hits ? ap / (double)big_r : 0.0;
            else
                out[c] = (double)unj / (double)k;
            c++;
        }
        if (i == n || c == ncuts) break;
        int64_t r = rels[i];
        if (r >= level) {
            hits++;
            first = 1;
            ap += (double)hits / ((double)i + 1.0);
        } else if (r < 0) {
            unj++;
        }
    }
}

static void ndcg_cut(const int64_t *rels, int64_t n, const int64_t *counts, int64_t nlevels,
                     const int64_t *cuts, int64_t ncuts, const double *avg, int has_avg,
                     double *out) {
    double total = 0.0;
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        if (c < ncuts && i == cuts[c]) {
            out[c] = total;
            c++;
            if (c == ncuts) break;
        }
        double gain = has_avg ? avg[i] : (double)rels[i];
        if (gain > 0) total += gain / log2((double)i + 2.0);
    }
    while (c < ncuts) out[c++] = total;
    c = 0;
    int64_t lvl = nlevels - 1, count = 0, i = 0;
    double ideal = 0.0;
    for (;;) {
        count++;
        while (lvl > 0 && count > counts[lvl]) {
            lvl--;
            count = 1;
        }
        if (lvl <= 0) break;
        if (i == cuts[c]) {
            if (ideal > 0.0) out[c] /= ideal;
            c++;
            if (c == ncuts) break;
        }
        ideal += (double)lvl / log2((double)i + 2.0);
        i++;
    }
    while (c < ncuts) {
        if (ideal > 0.0) out[c] /= ideal;
        c++;
    }
}

/* trec_eval's gain table (see trec_kernels._gain_table); returns its size. */
static int64_t gain_table(const double *pairs, int64_t npairs, const int64_t *counts,
                          int64_t nlevels, int64_t *lv, double *gn, int64_t *ct) {
    int64_t k = 0;
    for (int64_t i = 0; i < npairs; i++) {
        if (pairs[3 * i] == 1.0) {
            lv[k] = (int64_t)pairs[3 * i + 1];
            gn[k] = pairs[3 * i + 2];
            ct[k] = 0;
            k++;
        }
    }
    for (int64_t v = 0; v < nlevels; v++) {
        int64_t j = 0;
        while (j < k && lv[j] != v) j++;
        if (j < k) {
            ct[j] = counts[v];
        } else {
            lv[k] = v;
            gn[k] = (double)v;
            ct[k] = counts[v];
            k++;
        }
    }
    for (int64_t i = 1; i < k; i++) {
        for (int64_t j = i; j > 0 && (int64_t)(gn[j - 1] - gn[j]) > 0; j--) {
            int64_t tl = lv[j - 1], tc = ct[j - 1];
            double tg = gn[j - 1];
            lv[j - 1] = lv[j], gn[j - 1] = gn[j], ct[j - 1] = ct[j];
            lv[j] = tl, gn[j] = tg, ct[j] = tc;
        }
    }
    return k;
}

static void gains_of(const int64_t *rels, int64_t n, const int64_t *lv, const double *gn,
                     int64_t k, double *out) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = 0.0;
        for (int64_t j = 0; j < k; j++) {
            if (lv[j] == rels[i]) {
                out[i] = gn[j];
                break;
            }
        }
    }
}

/* One step down the ideal ranking: entry *cur, count *at within it; returns the ideal gain. */
static inline double advance(int64_t *cur, int64_t *at, const double *gn, const int64_t *ct) {
    *at += 1;
    while (*cur >= 0 && *at > ct[*cur]) {
        *at = 1;
        *cur -= 1;
    }
    return *cur >= 0 ? gn[*cur] : 0.0;
}

static void ndcg_of(const double *g, int64_t n, const double *gn, const int64_t *ct, int64_t k,
                    double *dcg_out, double *ideal_out) {
    double dcg = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (g[i] != 0) dcg += g[i] / log2((double)i + 2.0);
    int64_t cur = k - 1, at = 0, i = 0;
    double ig = cur >= 0 ? gn[cur] : 0.0, ideal = 0.0;
    while (ig > 0.0) {
        ig = advance(&cur, &at, gn, ct);
        if (ig > 0.0) ideal += ig / log2((double)i + 2.0);
        i++;
    }
    *dcg_out = dcg;
    *ideal_out = ideal;
}

/* Rndcg: where the ideal gain changes, the nDCG so far joins the mean (when defined). */
static inline void ideal_changed(double *old, double ig, double rdcg, double idcg, double *total,
                                 int64_t *changes) {
    if (idcg > 0.0) {
        *total += rdcg / idcg;
        *changes += 1;
    }
    *old = ig;
}

static double rndcg_of(const double *g, int64_t n, const double *gn, const int64_t *ct, int64_t k,
                       int64_t big_r) {
    if (big_r == 0) return 0.0;
    double rdcg = 0.0, idcg = 0.0, total = 0.0;
    int64_t changes = 0, cur = k - 1, at = 0, i = 0;
    double ig = cur >= 0 ? gn[cur] : 0.0, old = ig;
    while (i < n && ig > 0.0) {
        ig = advance(&cur, &at, gn, ct);
        if (old != ig) ideal_changed(&old, ig, rdcg, idcg, &total, &changes);
        if (g[i] != 0) rdcg += g[i] / log2((double)i + 2.0);
        if (ig > 0.0) idcg += ig / log2((double)i + 2.0);
        i++;
    }
    if (i < n) {
        while (i < n) {
            if (g[i] != 0) rdcg += g[i] / log2((double)i + 2.0);
            i++;
        }
        if (idcg > 0.0) {
            total += rdcg / idcg;
            changes++;
        }
    }
    while (ig > 0.0) {
        ig = advance(&cur, &at, gn, ct);
        if (old != ig) ideal_changed(&old, ig, rdcg, idcg, &total, &changes);
        if (ig > 0.0) idcg += ig / log2((double)i + 2.0);
        i++;
    }
    return total / (double)changes;
}

static double g_measure(const double *g, int64_t n, const double *gn, const int64_t *ct,
                        int64_t k) {
    double rg = 0.0, sr = 0.0, si = 0.0, sc = 0.0;
    int64_t cur = k - 1, at = 0, i = 0;
    double ig = cur >= 0 ? gn[cur] : 0.0;
    while (i < n && ig > 0.0) {
        sr += g[i];
        ig = advance(&cur, &at, gn, ct);
        if (ig > 0.0) si += ig;
        sc += ig >= 1.0 ? ig : 1.0;
        if (g[i] != 0) rg += g[i] / log2((2.0 + sc) - sr);
        i++;
    }
    while (i < n) {
        sr += g[i];
        sc += 1.0;
        if (g[i] != 0) rg += g[i] / log2((2.0 + sc) - sr);
        i++;
    }
    while (ig > 0.0) {
        ig = advance(&cur, &at, gn, ct);
        if (ig > 0.0) si += ig;
    }
    return si > 0.0 ? rg / si : 0.0;
}

static double ndcg_rel_of(const double *g, int64_t n, const double *gn, const int64_t *ct,
                          int64_t k) {
    double rdcg = 0.0, idcg = 0.0, total = 0.0;
    int64_t nrr = 0, nr = 0, cur = k - 1, at = 0, i = 0;
    double ig = cur >= 0 ? gn[cur] : 0.0;
    while (i < n && ig > 0.0) {
        if (g[i] != 0) rdcg += g[i] / log2((double)i + 2.0);
        ig = advance(&cur, &at, gn, ct);
        if (ig > 0.0) {
            nr++;
            idcg += ig / log2((double)i + 2.0);
        }
        if (g[i] > 0) {
            total += rdcg / idcg;
            nrr++;
        }
        i++;
    }
    while (i < n) {
        if (g[i] != 0) rdcg += g[i] / log2((double)i + 2.0);
        if (g[i] > 0) {
            total += rdcg / idcg;
            nrr++;
        }
        i++;
    }
    while (ig > 0.0) {
        ig = advance(&cur, &at, gn, ct);
        if (ig > 0.0) {
            nr++;
            idcg += ig / log2((double)i + 2.0);
        }
        i++;
    }
    total += (double)(nr - nrr) * rdcg / idcg;
    return total > 0.0 ? total / (double)nr : 0.0;
}

/* Scratch of one query: sized for the longest ranked list and the largest gain table. */
typedef struct {
    int64_t *lv, *ct, *cuts;
    double *gn, *g, *vals;
} Scratch;

static double rbp_of(const int64_t *rels, int64_t n, const double *pairs, int64_t npairs,
                     const int64_t *counts, int64_t nlevels, int resid, Scratch *s) {
    double p = 0.9;
    for (int64_t i = 0; i < npairs; i++)
        if (pairs[3 * i] == 2.0) p = pairs[3 * i + 2];
    double total = 0.0, cur_p = 1.0;
    int64_t unj = 0;
    if (resid) {
        for (int64_t i = 0; i < n; i++) {
            if (rels[i] < 0) {
                unj++;
                total += cur_p;
            }
            cur_p = cur_p * p;
        }
        return unj ? cur_p + (1 - p) * total : 0.0;
    }
    int64_t k = gain_table(pairs, npairs, counts, nlevels, s->lv, s->gn, s->ct);
    if (k) {
        double lo = s->gn[0], hi = s->gn[0];
        for (int64_t j = 1; j < k; j++) {
            if (s->gn[j] < lo) lo = s->gn[j];
            if (s->gn[j] > hi) hi = s->gn[j];
        }
        if (lo < 0 || hi > 1)
            for (int64_t j = 0; j < k; j++) s->gn[j] = (s->gn[j] - lo) / (hi - lo);
    }
    gains_of(rels, n, s->lv, s->gn, k, s->g);
    for (int64_t i = 0; i < n; i++) {
        if (s->g[i] != 0) total += s->g[i] * cur_p;
        cur_p = cur_p * p;
    }
    return (1.0 - p) * total;
}

static int64_t relstring_of(const int64_t *rels, int64_t n, int64_t length, uint8_t *row,
                            int64_t rowsize) {
    int64_t m = max64(0, min64(length, min64(n, rowsize)));
    for (int64_t i = 0; i < m; i++) {
        int64_t r = rels[i];
        if (r > 9)
            row[i] = 62;
        else if (r >= 0)
            row[i] = (uint8_t)(48 + r);
        else if (r == NONPOOL)
            row[i] = 45;
        else if (r == UNJUDGED)
            row[i] = 46;
        else
            row[i] = 60;
    }
    return m;
}

static double set_measure(int64_t kind, int64_t n, int64_t big_r, int64_t relret, double x) {
    if (kind == SET_P) return n ? (double)relret / (double)n : 0.0;
    if (kind == SET_RELATIVE_P)
        return n && big_r ? (double)relret / (double)min64(n, big_r) : 0.0;
    if (kind == SET_RECALL) return big_r ? (double)relret / (double)big_r : 0.0;
    if (kind == SET_MAP)
        return n && big_r ? ((double)relret * (double)relret) / ((double)n * (double)big_r) : 0.0;
    if (relret == 0) return 0.0;
    double prec = (double)relret / (double)n, rec = (double)relret / (double)big_r;
    return (x + 1.0) * prec * rec / (x * prec + rec);
}

static double scalar(int64_t kind, const int64_t *rels, int64_t n, const int64_t *counts,
                     int64_t ncounts, int64_t level, int64_t big_r, int64_t relret,
                     const double *ps, int64_t nps, int64_t ndocs) {
    if (kind == NUM_RET) return (double)n;
    if (kind == NUM_REL) return (double)big_r;
    if (kind == NUM_REL_RET) return (double)relret;
    if (kind == MAP || kind == GM_MAP) {
        double ap = ap_of(rels, n, level, big_r);
        return kind == MAP ? ap : log(ap > MIN_GEO_MEAN ? ap : MIN_GEO_MEAN);
    }
    if (kind == RPREC) {
        int64_t hits = 0;
        for (int64_t i = 0; i < min64(big_r, n); i++) hits += rels[i] >= level;
        return big_r && n ? (double)hits / (double)big_r : 0.0;
    }
    if (kind == BPREF || kind == GM_BPREF) {
        double b = bpref_of(rels, n, counts, ncounts, level, big_r);
        return kind == BPREF ? b : log(b > MIN_GEO_MEAN ? b : MIN_GEO_MEAN);
    }
    if (kind == RECIP_RANK) {
        for (int64_t i = 0; i < n; i++)
            if (rels[i] >= level) return 1.0 / ((double)i + 1.0);
        return 0.0;
    }
    if (kind == INFAP) return infap_of(rels, n, level, big_r);
    if (kind == UTILITY) {
        double value = ps[0] * (double)relret + ps[1] * (double)(n - relret) +
                       ps[2] * (double)(big_r - relret);
        return value + ps[3] * (double)(ndocs + relret - n - big_r);
    }
    if (kind == BING) {
        double total = 0.0;
        int64_t so_far = 0;
        for (int64_t i = 0; i < n; i++) {
            if (rels[i] >= level) {
                so_far++;
                total += 1.0 / log2((double)(3 + i - so_far));
            }
        }
        return so_far ? total / (double)big_r : 0.0;
    }
    if (kind == NUM_NONREL_JUDGED_RET) {
        int64_t judged = 0;
        for (int64_t i = 0; i < n; i++) judged += rels[i] >= 0;
        return (double)(judged - relret);
    }
    return set_measure(kind, n, big_r, relret, nps ? ps[0] : 1.0);
}

static int is_cut_kind(int64_t kind) {
    return kind == P || kind == RECALL || kind == RELATIVE_P || kind == SUCCESS ||
           kind == MAP_CUT || kind == UNJ;
}

/* Every planned measure of one query into out (plan rows: kind, first and last parameter,
 * output offset); the relstring's length, its bytes in relstr. */
static int64_t query_measures(const int64_t *rels, int64_t n, const int64_t *counts,
                              int64_t ncounts, int64_t nlevels, int64_t level, int64_t big_r,
                              const int64_t *plan, int64_t nplan, const double *params,
                              const double *pairs, const double *avg, int has_avg,
                              int64_t ndocs, double *out, uint8_t *relstr, int64_t relsize,
                              Scratch *s) {
    int64_t relret = 0, length = 0;
    for (int64_t i = 0; i < n; i++) relret += rels[i] >= level;
    for (int64_t m = 0; m < nplan; m++) {
        int64_t kind = plan[4 * m], lo = plan[4 * m + 1], hi = plan[4 * m + 2];
        int64_t off = plan[4 * m + 3], k = hi - lo;
        const double *ps = params + lo;
        if (is_cut_kind(kind) || kind == NDCG_CUT) {
            for (int64_t i = 0; i < k; i++) s->cuts[i] = (int64_t)ps[i];
            if (kind == NDCG_CUT)
                ndcg_cut(rels, n, counts, nlevels, s->cuts, k, avg, has_avg, out + off);
            else
                at_cutoffs(rels, n, level, big_r, kind, s->cuts, k, out + off);
        } else if (kind == IPREC || kind == PT11) {
            for (int64_t i = 0; i < k; i++) s->vals[i] = 0.0;
            interpolated(rels, n, level, big_r, relret, ps, k, s->vals, s->cuts);
            if (kind == IPREC) {
                for (int64_t i = 0; i < k; i++) out[off + i] = s->vals[i];
            } else {
                double total = 0.0;
                for (int64_t i = k - 1; i >= 0; i--) total += s->vals[i];
                out[off] = total / (double)k;
            }
        } else if (kind == RPREC_MULT) {
            for (int64_t i = 0; i < k; i++) out[off + i] = 0.0;
            rprec_mult(rels, n, level, big_r, relret, ps, k, out + off, s->cuts);
        } else if (kind == RELSTRING) {
            length = relstring_of(rels, n, (int64_t)ps[0], relstr, relsize);
        } else if (kind == RBP || kind == RBP_RESID) {
            out[off] = rbp_of(rels, n, pairs + 3 * lo, k, counts, nlevels, kind == RBP_RESID, s);
        } else if (kind == G || kind == DCG || kind == IDEAL_DCG || kind == NDCG ||
                   kind == NDCG_REL || kind == RNDCG) {
            int64_t t = gain_table(pairs + 3 * lo, k, counts, nlevels, s->lv, s->gn, s->ct);
            const double *g = s->g;
            if (has_avg && hi == lo)
                g = avg;
            else
                gains_of(rels, n, s->lv, s->gn, t, s->g);
            if (kind == G) {
                out[off] = g_measure(g, n, s->gn, s->ct, t);
            } else if (kind == NDCG_REL) {
                out[off] = ndcg_rel_of(g, n, s->gn, s->ct, t);
            } else if (kind == RNDCG) {
                out[off] = rndcg_of(g, n, s->gn, s->ct, t, big_r);
            } else {
                double dcg, ideal;
                ndcg_of(g, n, s->gn, s->ct, t, &dcg, &ideal);
                if (kind == DCG)
                    out[off] = dcg;
                else if (kind == IDEAL_DCG)
                    out[off] = ideal;
                else
                    out[off] = ideal > 0.0 ? dcg / ideal : 0.0;
            }
        } else {
            out[off] = scalar(kind, rels, n, counts, ncounts, level, big_r, relret, ps, k, ndocs);
        }
    }
    return length;
}

/* ------------------------------------------------------------------------ ranking ---- */

/* Stable merge sort of idx[0:n] by (neg, key) ascending; tmp holds n entries. */
static void sort_ranks(int64_t *idx, int64_t *tmp, int64_t n, const double *neg,
                       const int64_t *key) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t left = 0; left < n; left += 2 * width) {
            int64_t mid = min64(left + width, n), right = min64(left + 2 * width, n);
            int64_t i = left, j = mid, k = left;
            while (i < mid && j < right) {
                int64_t a = idx[i], b = idx[j];
                int after = neg[b] < neg[a] || (key && neg[b] == neg[a] && key[b] < key[a]);
                if (after)
                    tmp[k++] = idx[j++];
                else
                    tmp[k++] = idx[i++];
            }
            while (i < mid) tmp[k++] = idx[i++];
            while (j < right) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof(int64_t));
    }
}

typedef struct {
    int64_t *lev, *idx, *tmp, *key;
    double *neg;
} RankScratch;

/* One query's levels in rank order (rels_out) and, under the average order (3), each rank's
 * mean gain over its group of equal scores (avg_out); see trec_kernels.rank_levels. */
static void rank_query(const uint8_t *rdata, const int64_t *rstart, const int32_t *rlen,
                       const double *score, const int64_t *recs, int64_t n,
                       const uint8_t *qdata, const int64_t *qstart, const int32_t *qlen,
                       const int64_t *qrel, const int64_t *judged, int64_t njudged,
                       int64_t level, int64_t order, int64_t *rels_out, double *avg_out,
                       RankScratch *s) {
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++) { /* merge two docno-sorted lists */
        int64_t a = recs[i], found = NONPOOL;
        while (j < njudged) {
            int64_t b = judged[j];
            int64_t c = atr_compare(qdata, qstart[b], qlen[b], rdata, rstart[a], rlen[a]);
            if (c < 0) {
                j++;
                continue;
            }
            if (c == 0) {
                found = qrel[b] >= 0 ? qrel[b] : UNJUDGED;
                j++;
            }
            break;
        }
        s->lev[n - 1 - i] = found; /* docno descending */
    }
    for (int64_t i = 0; i < n; i++) {
        s->neg[i] = -score[recs[n - 1 - i]];
        s->idx[i] = i;
    }
    int64_t *key = NULL;
    if (order == 1 || order == 2) {
        key = s->key;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = s->lev[i];
            key[i] = 2 * (v > 0 ? v : 0) + (v >= level && v >= 0 ? 1 : 0);
            if (order == 2) key[i] = -key[i];
        }
    }
    sort_ranks(s->idx, s->tmp, n, s->neg, key);
    for (int64_t i = 0; i < n; i++) rels_out[i] = s->lev[s->idx[i]];
    if (order == 3) {
        int64_t st = 0;
        while (st < n) {
            int64_t e = st;
            double total = 0.0, first = s->neg[s->idx[st]];
            while (e < n && s->neg[s->idx[e]] == first) {
                total += (double)(rels_out[e] > 0 ? rels_out[e] : 0);
                e++;
            }
            for (int64_t k = st; k < e; k++) avg_out[k] = total / (double)(e - st);
            st = e;
        }
    }
}

static int rank_scratch(RankScratch *s, int64_t n) {
    size_t m = (size_t)(n > 0 ? n : 1);
    s->lev = malloc(m * sizeof(int64_t));
    s->idx = malloc(m * sizeof(int64_t));
    s->tmp = malloc(m * sizeof(int64_t));
    s->key = malloc(m * sizeof(int64_t));
    s->neg = malloc(m * sizeof(double));
    return s->lev && s->idx && s->tmp && s->key && s->neg;
}

static void free_rank_scratch(RankScratch *s) {
    free(s->lev);
    free(s->idx);
    free(s->tmp);
    free(s->key);
    free(s->neg);
}

/* rank_levels for one query from Python (rank_query of audiorepro.metrics.trec). */
int64_t atr_rank_levels(const uint8_t *rdata, const int64_t *rstart, const int32_t *rlen,
                        const double *score, const int64_t *recs, int64_t n,
                        const uint8_t *qdata, const int64_t *qstart, const int32_t *qlen,
                        const int64_t *qrel, const int64_t *judged, int64_t njudged,
                        int64_t level, int64_t order, int64_t *rels_out, double *avg_out) {
    RankScratch s;
    int ok = rank_scratch(&s, n);
    if (ok)
        rank_query(rdata, rstart, rlen, score, recs, n, qdata, qstart, qlen, qrel, judged,
                   njudged, level, order, rels_out, avg_out, &s);
    free_rank_scratch(&s);
    return ok ? 0 : -1;
}

/* Every planned value of every evaluated query k (run query run_of[k], -1: absent, evaluated
 * as trec_eval's -c does with one unjudged document; qrels query qrels_of[k]); max_ret < 0:
 * no cut. out: nq x nvalues (zeroed), relstr: nq x relsize, rel_len: nq. 0, or -1 when out
 * of memory. */
int64_t atr_evaluate(const uint8_t *rdata, const int64_t *rstart, const int32_t *rlen,
                     const double *rvalue, const int64_t *rorder, const int64_t *rfirst,
                     const int64_t *rlast, const uint8_t *qdata, const int64_t *qstart,
                     const int32_t *qlen, const int64_t *qrel, const int64_t *qorder,
                     const int64_t *qfirst, const int64_t *qlast, const int64_t *run_of,
                     const int64_t *qrels_of, int64_t nq, int64_t level, int64_t max_ret,
                     int64_t judged_only, int64_t order, const int64_t *plan, int64_t nplan,
                     const double *params, int64_t nparams, const double *pairs,
                     int64_t npairs, int64_t ndocs, int64_t nvalues, double *out,
                     uint8_t *relstr, int64_t relsize, int64_t *rel_len) {
    int64_t longest = 1, top_all = 0;
    for (int64_t k = 0; k < nq; k++) {
        int64_t ri = run_of[k];
        if (ri >= 0) longest = max64(longest, rlast[ri] - rfirst[ri]);
        int64_t qi = qrels_of[k];
        for (int64_t b = qfirst[qi]; b < qlast[qi]; b++) top_all = max64(top_all, qrel[qorder[b]]);
    }
    size_t m = (size_t)longest, levels = (size_t)(top_all + 1);
    size_t table = levels + (size_t)npairs + 1, nps = (size_t)nparams + 1;
    RankScratch rs;
    Scratch s;
    int ok = rank_scratch(&rs, longest);
    int64_t *rels = malloc(m * sizeof(int64_t));
    double *avg = malloc(m * sizeof(double));
    int64_t *counts = malloc(levels * sizeof(int64_t));
    s.lv = malloc(table * sizeof(int64_t));
    s.ct = malloc(table * sizeof(int64_t));
    s.gn = malloc(table * sizeof(double));
    s.g = malloc(m * sizeof(double));
    s.cuts = malloc(nps * sizeof(int64_t));
    s.vals = malloc(nps * sizeof(double));
    ok = ok && rels && avg && counts && s.lv && s.ct && s.gn && s.g && s.cuts && s.vals;
    for (int64_t k = 0; ok && k < nq; k++) {
        int64_t qi = qrels_of[k], ri = run_of[k];
        const int64_t *judged = qorder + qfirst[qi];
        int64_t njudged = qlast[qi] - qfirst[qi], top = -1;
        for (int64_t b = 0; b < njudged; b++) top = max64(top, qrel[judged[b]]);
        for (int64_t v = 0; v <= top; v++) counts[v] = 0;
        for (int64_t b = 0; b < njudged; b++)
            if (qrel[judged[b]] >= 0) counts[qrel[judged[b]]]++;
        int64_t nlevels = 0, big_r = 0;
        for (int64_t v = 0; v <= top; v++)
            if (counts[v]) nlevels = v + 1;
        for (int64_t v = level > 0 ? level : 0; v < nlevels; v++) big_r += counts[v];
        int64_t n;
        int has_avg;
        if (ri >= 0) {
            n = rlast[ri] - rfirst[ri];
            rank_query(rdata, rstart, rlen, rvalue, rorder + rfirst[ri], n, qdata, qstart, qlen,
                       qrel, judged, njudged, level, order, rels, avg, &rs);
            has_avg = order == 3;
        } else {
            n = 1;
            rels[0] = NONPOOL;
            avg[0] = 0.0;
            has_avg = order == 3;
        }
        if (max_ret >= 0 && max_ret < n) n = max_ret;
        if (judged_only) {
            int64_t w = 0;
            for (int64_t i = 0; i < n; i++) {
                if (rels[i] >= 0) {
                    rels[w] = rels[i];
                    avg[w] = avg[i];
                    w++;
                }
            }
            n = w;
        }
        has_avg = has_avg && n > 0;
        double *row = out + k * nvalues;
        rel_len[k] = query_measures(rels, n, counts, top + 1, nlevels, level, big_r, plan, nplan,
                                    params, pairs, avg, has_avg, ndocs, row,
                                    relstr + k * relsize, relsize, &s);
        if (ri < 0) { /* trec_eval's clean-up after its stand-in document */
            rel_len[k] = 0;
            for (int64_t p = 0; p < nplan; p++) {
                int64_t kind = plan[4 * p], off = plan[4 * p + 3];
                if (kind == NUM_RET || kind == UTILITY || kind == RBP_RESID) {
                    row[off] = 0.0;
                } else if (kind == UNJ) {
                    for (int64_t i = 0; i < plan[4 * p + 2] - plan[4 * p + 1]; i++)
                        row[off + i] = 0.0;
                }
            }
        }
    }
    free_rank_scratch(&rs);
    free(rels);
    free(avg);
    free(counts);
    free(s.lv);
    free(s.ct);
    free(s.gn);
    free(s.g);
    free(s.cuts);
    free(s.vals);
    return ok ? 0 : -1;
}


/* ---- preference measures (metrics/trec_prefs.py) ---- */

/* One pair of a single-sub-group judgement group's classes: class a (higher level) over class
   b, both ascending document numbers (ranked documents are numbered first, below m). Adds 1
   to counts[i][j] for every i of a and j of b (a document listed twice counts twice; counts NULL:
   not kept, no prefs_pair family chosen), and to
   tally: ful_ret (ranked pairs with a ranked above b), poss_ret, ful_imp, poss_imp, notoccur. */
void atr_class_pair(int64_t *counts, int64_t n, int64_t m, const int64_t *a, int64_t na,
                    const int64_t *b, int64_t nb, int64_t *tally) {
    int64_t a_ret = 0, b_ret = 0;
    for (int64_t i = 0; counts && i < na; i++) {
        int64_t *row = counts + a[i] * n;
        for (int64_t j = 0; j < nb; j++)
            row[b[j]] += 1;
    }
    while (a_ret < na && a[a_ret] < m)
        a_ret++;
    while (b_ret < nb && b[b_ret] < m)
        b_ret++;
    /* for each ranked a, the ranked b numbered above it (b ascending: a moving cut) */
    int64_t cut = 0, ful = 0;
    for (int64_t i = 0; i < a_ret; i++) {
        while (cut < b_ret && b[cut] <= a[i])
            cut++;
        ful += b_ret - cut;
    }
    int64_t a_out = na - a_ret, b_out = nb - b_ret;
    tally[0] += ful;
    tally[1] += a_ret * b_ret;
    tally[2] += a_ret * b_out;
    tally[3] += a_ret * b_out + a_out * b_ret;
    tally[4] += a_out * b_out;
}

/* The prefs_pair families' sums over counts (n x n, groups preferring i to j; the first m
   ranked): shares c[i][j] / (c[i][j] + c[j][i]) of pairs i < j with a preference either way,
   both ranked (row by row), then one ranked (i < m <= j, row by row), added one after the
   other from 0 (numpy's cumsum over the two lists, as before). sums = {ranked, both};
   sizes = {ranked pairs, implied pairs, unranked pairs}. */
void atr_pair_sums(const int64_t *c, int64_t n, int64_t m, double *sums, int64_t *sizes) {
    double total = 0.0;
    int64_t ranked = 0, implied = 0, unranked = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++) {
            int64_t both = c[i * n + j] + c[j * n + i];
            if (both > 0) {
                total += (double)c[i * n + j] / (double)both;
                ranked++;
            }
        }
    sums[0] = total;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = m; j < n; j++) {
            int64_t one = c[i * n + j] + c[j * n + i];
            if (one > 0) {
                total += (double)c[i * n + j] / (double)one;
                implied++;
            }
        }
    sums[1] = total;
    for (int64_t i = m; i < n; i++)
        for (int64_t j = i + 1; j < n; j++)
            if (c[i * n + j] + c[j * n + i] != 0)
                unranked++;
    sizes[0] = ranked;
    sizes[1] = implied;
    sizes[2] = unranked;
}
