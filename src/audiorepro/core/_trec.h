/* The native trec-eval's records between its steps (read -> chosen measures -> evaluation ->
 * output lines), shared by core/_trec.c (the kernels), core/_trec_prefs.c (the preference
 * measures) and core/_trec_main.c (the executable's main). Each mirrors a Python record:
 * AtrTable formats/trec_light.LightTable, AtrMeasures metrics/trec_measures.Plan with the
 * chosen measures' names, AtrEval metrics/trec_measures.Evaluation.
 *
 * Contract: fields may be added; none is renamed or changes meaning. Every step returns
 * ATR_OK, ATR_FALLBACK (the input needs the Python path: it refuses it with its one-line
 * message, or reads what the native path does not) or ATR_NOMEM. Nothing is printed before
 * every step has returned ATR_OK, so a fallback never follows partial output. */
#ifndef AUDIOREPRO_TREC_H
#define AUDIOREPRO_TREC_H

#include <stdint.h>

#define ATR_OK 0
#define ATR_FALLBACK 1
#define ATR_NOMEM 2

/* A read qrels, qrels_jg or run file: the arguments atr_evaluate takes for it. Query q's
 * records are order[start[q]:stop[q]], sorted by docno; qids in byte order, NUL-terminated. */
typedef struct {
    uint8_t *data;      /* the file's bytes (size + 1, the last one 0) */
    int64_t size;
    int64_t n;          /* records */
    int64_t *doc_start; /* per record: docno's first byte in data */
    int32_t *doc_len;
    double *value;      /* run: score; qrels: level as read (atol) */
    int64_t *levels;    /* qrels: level as int64; NULL for a run */
    int64_t nq;
    char **qids;        /* qrels_jg: "qid group" as formats/trec_light.read_light names them */
    int64_t *start, *stop, *order;
    char *tag;          /* run: the last record's tag; "" for a qrels */
} AtrTable;

/* The chosen measures (parse_measures; check_judgements passed) and their kernel plan
 * (plan_of; for -R qrels_jg group_plan's plain measures). */
typedef struct {
    int64_t ncolumns;      /* output columns, printing order */
    char **names;          /* each column's printed name (P_5) */
    char **owners;         /* each column's measure (P) */
    uint8_t *count;        /* 1: printed as an integer, all is the sum */
    uint8_t *geometric;    /* 1: gm_*: all is exp(mean) */
    int64_t nrows;         /* plan rows, 4 int64 each: kind, first, last parameter, column */
    int64_t *rows;
    int64_t nparams;
    double *params;
    int64_t npairs;        /* 3 doubles each */
    double *pairs;
    int64_t relstring;     /* relstring's length, 0: not chosen */
} AtrMeasures;

/* Per-query values and the all line: metrics/trec_measures.Evaluation. */
typedef struct {
    const char *run_id;
    int64_t nq;
    char **qids;
    int64_t ncolumns;
    char **names;
    char **owners;
    uint8_t *count;
    double *values;        /* nq x ncolumns, row-major */
    double *summary;       /* ncolumns */
    char **relstrings;     /* nq, or NULL */
} AtrEval;

/* The options of a plain trec-eval command line (cli/trec_fast.parse). */
typedef struct {
    int per_query, complete, no_summary, judged_only;
    int64_t max_ret;       /* -1: none */
    int64_t level, num_docs;
    const char *only_query; /* -D's QID, or NULL */
} AtrOptions;

/* The kernels of core/_trec.c the other sources call (exported there for ctypes too; _trec.c
 * includes this header, so the compiler holds each definition to its declaration). */
int64_t atr_count_lines(const uint8_t *data, int64_t size);
void atr_scan(const uint8_t *data, int64_t size, int64_t mode, int64_t max_line, int32_t *group,
              int64_t *gstart, int32_t *glen, int64_t *dstart, int32_t *dlen, double *value,
              int32_t *line, uint8_t *slow, int64_t *info);
int64_t atr_sort_by_docno(const uint8_t *data, const int64_t *dstart, const int32_t *dlen,
                          int64_t *order, int64_t size, const int64_t *start,
                          const int64_t *stop, int64_t nq);
int64_t atr_group_order(const int32_t *group, int64_t n, const int64_t *rank_of, int64_t nq,
                        int64_t *start, int64_t *stop, int64_t *order);
int64_t atr_levels(const double *value, int64_t n, double bound, int64_t *levels);
int64_t atr_evaluate(const uint8_t *rdata, const int64_t *rstart, const int32_t *rlen,
                     const double *rvalue, const int64_t *rorder, const int64_t *rfirst,
                     const int64_t *rlast, const uint8_t *qdata, const int64_t *qstart,
                     const int32_t *qlen, const int64_t *qrel, const int64_t *qorder,
                     const int64_t *qfirst, const int64_t *qlast, const int64_t *run_of,
                     const int64_t *qrels_of, int64_t nq, int64_t level, int64_t max_ret,
                     int64_t judged_only, int64_t order, const int64_t *plan, int64_t nplan,
                     const double *params, int64_t nparams, const double *pairs,
                     int64_t npairs, int64_t ndocs, int64_t nvalues, double *out,
                     uint8_t *relstr, int64_t relsize, int64_t *rel_len);
double atr_atof(const uint8_t *data, int64_t start, int64_t stop, int64_t *status,
                int64_t *end_out);
void atr_class_pair(int64_t *counts, int64_t n, int64_t m, const int64_t *a, int64_t na,
                    const int64_t *b, int64_t nb, int64_t *tally);
void atr_pair_sums(const int64_t *c, int64_t n, int64_t m, double *sums, int64_t *sizes);

/* -R prefs (qrels_form 0) or -R qrels_prefs (1): the judgements file at `path` against the
 * run, as metrics/trec_prefs.evaluate_prefs (core/_trec_prefs.c). */
int atr_prefs_evaluate(const AtrTable *run, const char *path, int qrels_form,
                       const AtrMeasures *measures, const AtrOptions *options, AtrEval *out);

#endif
