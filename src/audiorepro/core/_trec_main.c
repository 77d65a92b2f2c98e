/* The native `audiorepro trec-eval`: the executable the console command execs (cli/entry.py)
 * for a plain trec-eval command line, built by setup.py from this file and the library's
 * sources (core/_trec.c, core/_trec_prefs.c).
 *
 * Why a separate program: a process that starts CPython holds ~9-17 MB before reading a byte,
 * where trec_eval evaluates 100 queries in ~10 MB; the bound (1.2x trec_eval's peak) can only
 * be met without the interpreter. It computes exactly what the numpy-free Python path computes
 * (cli/trec_work.py over formats/trec_light.py and metrics/trec_light.py), through the same
 * kernels (atr_scan, atr_group_order, atr_sort_by_docno, atr_evaluate; atr_prefs_evaluate
 * for -R prefs and qrels_prefs), so every double and every printed byte is the same;
 * tests/test_trec_native.py holds the two to the same bytes.
 *
 * It takes the success path only. Whatever the Python path would refuse, or read by its numpy
 * path (an unusual file, -Z, --tie-bounds, stdin...), is handed to it: before
 * printing anything, the program execs `$AUDIOREPRO_PYTHON -m audiorepro trec-eval ARGS` with
 * AUDIOREPRO_TREC_NATIVE=0 (so the launcher does not exec this program again), and the Python
 * path prints its own message. Its only messages are for what Python would also stop on:
 * out of memory, a write error (`audiorepro: error: ...`, exit 2). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "_trec.h"

/* As formats/trec_light.py's MAX_LINE_BYTES and MAX_LEVEL. */
#define MAX_LINE_BYTES (1 << 16)
#define MAX_LEVEL 1000000.0
/* The variable that turns the native path off (cli/entry.py reads it too). */
#define NATIVE_ENV "AUDIOREPRO_TREC_NATIVE"

static int g_argc;
static char **g_argv;

/* ------------------------------------------------------------------ leaving the program ---- */

/* Hand the whole command line to the Python path, which answers it (its message, its exit
 * code, or the numpy path's output). Called only before anything is printed. */
static void fallback(void) {
    const char *python = getenv("AUDIOREPRO_PYTHON");
    if (python == NULL || *python == 0) python = "python3";
    char **args = malloc(((size_t)g_argc + 5) * sizeof(char *));
    if (args != NULL && setenv(NATIVE_ENV, "0", 1) == 0) {
        int k = 0;
        args[k++] = (char *)python;
        args[k++] = "-m";
        args[k++] = "audiorepro";
        args[k++] = "trec-eval";
        for (int i = 1; i < g_argc; i++) args[k++] = g_argv[i];
        args[k] = NULL;
        if (strchr(python, '/') != NULL)
            execv(python, args);
        else
            execvp(python, args);
    }
    fprintf(stderr, "audiorepro: error: cannot start the Python path of trec-eval (%s): %s\n",
            python, strerror(errno));
    exit(2);
}

static void out_of_memory(void) {
    fputs("audiorepro: error: out of memory in trec-eval\n", stderr);
    exit(2);
}

/* A step's status: ATR_OK goes on, anything else leaves. */
static void check(int status) {
    if (status == ATR_FALLBACK) fallback();
    if (status == ATR_NOMEM) out_of_memory();
}

static void *alloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size); /* calloc: large blocks are fresh pages, free
                                                  until written (most per-line slots are not) */
    if (p == NULL) out_of_memory();
    return p;
}

static char *copy_text(const char *s, size_t n) {
    char *p = alloc(n + 1, 1);
    memcpy(p, s, n);
    return p;
}

/* ------------------------------------------------------------------- the command line ---- */

typedef struct {
    AtrOptions o;
    const char *files[2];
    const char *specs[4096];
    int nspecs;
    int rel_format; /* 0 qrels, 1 qrels_jg, 2 prefs, 3 qrels_prefs; -1 other (falls back) */
} Command;

/* click's INT where cli/trec_fast._value reads it: -?[0-9]{1,18} */
static int plain_integer(const char *s, int64_t *out) {
    const char *p = s + (*s == '-');
    size_t digits = strspn(p, "0123456789");
    if (digits < 1 || digits > 18 || p[digits] != 0) return 0;
    *out = strtoll(s, NULL, 10);
    return 1;
}

/* The path Python's Path() would read as standard input ("-", "./-", "-/"): the Python path
 * reads it by its numpy reader. */
static int is_stdin_like(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/') start--;
    return n - start == 1 && path[start] == '-';
}

static int valued_option(Command *c, char letter, const char *text) {
    int64_t number;
    if (*text == 0) return ATR_FALLBACK;
    switch (letter) {
    case 'm':
        if (c->nspecs >= 4096) return ATR_FALLBACK;
        c->specs[c->nspecs++] = text;
        return ATR_OK;
    case 'M':
        if (!plain_integer(text, &number) || number < 1) return ATR_FALLBACK;
        c->o.max_ret = number;
        return ATR_OK;
    case 'l':
        if (!plain_integer(text, &c->o.level)) return ATR_FALLBACK;
        return ATR_OK;
    case 'N':
        if (!plain_integer(text, &c->o.num_docs)) return ATR_FALLBACK;
        return ATR_OK;
    case 'D': {
        const char *dot = strchr(text, '.'); /* -D's QID: after the first dot, "" is none */
        c->o.only_query = dot != NULL && dot[1] != 0 ? dot + 1 : NULL;
        return ATR_OK;
    }
    case 'R':
        if (strcmp(text, "qrels") == 0) c->rel_format = 0;
        else if (strcmp(text, "qrels_jg") == 0) c->rel_format = 1;
        else if (strcmp(text, "prefs") == 0) c->rel_format = 2;
        else if (strcmp(text, "qrels_prefs") == 0) c->rel_format = 3;
        else c->rel_format = -1; /* unknown: the Python path refuses it */
        return ATR_OK;
    case 'T':
        return strcmp(text, "trec_results") == 0 ? ATR_OK : ATR_FALLBACK;
    default: /* -Z */
        return ATR_FALLBACK;
    }
}

static int is_flag(Command *c, const char *arg) {
    if (strcmp(arg, "-q") == 0) c->o.per_query = 1;
    else if (strcmp(arg, "-c") == 0) c->o.complete = 1;
    else if (strcmp(arg, "-n") == 0) c->o.no_summary = 1;
    else if (strcmp(arg, "-J") == 0) c->o.judged_only = 1;
    else return 0;
    return 1;
}

/* cli/trec_fast.parse on argv[1:] (the words after `trec-eval`); ATR_FALLBACK for whatever it
 * hands to click, and for what this program leaves to the Python path. */
static int parse_command(int argc, char **argv, Command *c) {
    memset(c, 0, sizeof *c);
    c->o.max_ret = -1;
    c->o.level = 1;
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (is_flag(c, arg)) continue;
        if (strcmp(arg, "--tie-bounds") == 0) return ATR_FALLBACK;
        if (arg[0] == '-' && arg[1] != 0 && strchr("mMlNDRTZ", arg[1]) && arg[1] != '-') {
            const char *text = arg[2] ? arg + 2 : (i + 1 < argc ? argv[++i] : "-");
            if (text[0] == '-' && arg[2] == 0) return ATR_FALLBACK;
            if (valued_option(c, arg[1], text) != ATR_OK) return ATR_FALLBACK;
            continue;
        }
        if (arg[0] == '-' || arg[0] == 0) return ATR_FALLBACK;
        if (nfiles == 2) return ATR_FALLBACK;
        c->files[nfiles++] = arg;
    }
    if (nfiles != 2 || c->rel_format < 0) return ATR_FALLBACK;
    if (is_stdin_like(c->files[0]) || is_stdin_like(c->files[1])) return ATR_FALLBACK;
    return ATR_OK;
}

/* ------------------------------------------------------------------------ the measures ---- */

enum { P_NONE, P_CUT, P_FRACTION, P_VALUES, P_PAIRS };
enum { J_QRELS, J_PREFS, J_JG };

typedef struct {
    const char *name;
    int kind;              /* the kernels' code; -1 runid, -2 num_q, -3 prefs, -4 *_avgjg */
    int params;
    const double *defaults;
    int ndefaults;
    uint8_t count, geometric, judgements;
} Measure;

static const double CUTOFFS[] = {5, 10, 15, 20, 30, 100, 200, 500, 1000};
static const double SUCCESS_CUTOFFS[] = {1, 5, 10};
static const double UNJ_CUTOFFS[] = {5, 10, 20};
static const double RECALL_POINTS[] = {0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
static const double R_MULTIPLES[] = {0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0};
static const double RELSTRING_LEN[] = {10.0};
static const double UTILITY_COEF[] = {1.0, -1.0, 0.0, 0.0};
static const double SET_F_X[] = {1.0};

#define NONE_(n, k) {n, k, P_NONE, NULL, 0, 0, 0, J_QRELS}
#define COUNT_(n, k) {n, k, P_NONE, NULL, 0, 1, 0, J_QRELS}
#define WITH_(n, k, p, d) {n, k, p, d, (int)(sizeof d / sizeof d[0]), 0, 0, J_QRELS}
#define PAIRS_(n, k) {n, k, P_PAIRS, NULL, 0, 0, 0, J_QRELS}
#define PREF_(n, c) {n, -3, P_NONE, NULL, 0, c, 0, J_PREFS}

/* metrics/trec_measures.MEASURES: every measure in trec_eval's printing order. */
static const Measure MEASURES[] = {
    NONE_("runid", -1), COUNT_("num_q", -2), COUNT_("num_ret", 0), COUNT_("num_rel", 1),
    COUNT_("num_rel_ret", 2), NONE_("map", 3), {"gm_map", 4, P_NONE, NULL, 0, 0, 1, J_QRELS},
    NONE_("Rprec", 5), NONE_("bpref", 6), NONE_("recip_rank", 7),
    WITH_("iprec_at_recall", 8, P_FRACTION, RECALL_POINTS), WITH_("P", 9, P_CUT, CUTOFFS),
    WITH_("relstring", 10, P_VALUES, RELSTRING_LEN), WITH_("recall", 11, P_CUT, CUTOFFS),
    NONE_("infAP", 12), {"gm_bpref", 13, P_NONE, NULL, 0, 0, 1, J_QRELS},
    WITH_("Rprec_mult", 14, P_FRACTION, R_MULTIPLES),
    WITH_("utility", 15, P_VALUES, UTILITY_COEF), WITH_("11pt_avg", 16, P_VALUES, RECALL_POINTS),
    NONE_("binG", 17), PAIRS_("G", 18), PAIRS_("dcg", 19), PAIRS_("ideal_dcg", 20),
    PAIRS_("ndcg", 21), PAIRS_("ndcg_rel", 22), PAIRS_("Rndcg", 23),
    WITH_("ndcg_cut", 24, P_CUT, CUTOFFS), WITH_("map_cut", 25, P_CUT, CUTOFFS),
    WITH_("relative_P", 26, P_CUT, CUTOFFS), WITH_("success", 27, P_CUT, SUCCESS_CUTOFFS),
    NONE_("set_P", 28), NONE_("set_relative_P", 29), NONE_("set_recall", 30),
    NONE_("set_map", 31), WITH_("set_F", 32, P_VALUES, SET_F_X),
    COUNT_("num_nonrel_judged_ret", 33),
    PREF_("prefs_num_prefs_poss", 1), PREF_("prefs_num_prefs_ful", 1),
    PREF_("prefs_num_prefs_ful_ret", 1), PREF_("prefs_simp", 0), PREF_("prefs_pair", 0),
    PREF_("prefs_avgjg", 0), PREF_("prefs_avgjg_Rnonrel", 0), PREF_("prefs_simp_ret", 0),
    PREF_("prefs_pair_ret", 0), PREF_("prefs_avgjg_ret", 0), PREF_("prefs_avgjg_Rnonrel_ret", 0),
    PREF_("prefs_simp_imp", 0), PREF_("prefs_pair_imp", 0), PREF_("prefs_avgjg_imp", 0),
    {"map_avgjg", -4, P_NONE, NULL, 0, 0, 0, J_JG},
    {"P_avgjg", -4, P_CUT, CUTOFFS, 9, 0, 0, J_JG},
    {"Rprec_mult_avgjg", -4, P_FRACTION, R_MULTIPLES, 10, 0, 0, J_JG},
    PAIRS_("rbp", 34), PAIRS_("rbp_resid", 35), WITH_("unj", 36, P_CUT, UNJ_CUTOFFS),
};
#define NMEASURES ((int)(sizeof MEASURES / sizeof MEASURES[0]))

/* The nicknames (trec_measures.NICKNAMES), each a list ending in NULL. */
#define OFFICIAL_ "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", \
    "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"
static const char *const OFFICIAL[] = {OFFICIAL_, NULL};
static const char *const ALL_TREC[] = {
    OFFICIAL_, "relstring", "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref",
    "utility", "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
    "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P",
    "set_map", "set_F", "num_nonrel_judged_ret", NULL};
static const char *const SET[] = {"runid", "num_q", "num_ret", "num_rel", "num_rel_ret",
                                  "utility", "set_P", "set_recall", "set_relative_P",
                                  "set_map", "set_F", NULL};
static const char *const ALL_PREFS[] = {
    "runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg",
    "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp", NULL};
static const char *const PREFS_SET[] = {
    "runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg", NULL};
static const char *const QRELS_JG[] = {"runid", "num_q", "map_avgjg", "P_avgjg",
                                       "Rprec_mult_avgjg", NULL};
static const struct {
    const char *name;
    const char *const *members;
} NICKNAMES[] = {{"official", OFFICIAL}, {"all_trec", ALL_TREC}, {"set", SET},
                 {"all_prefs", ALL_PREFS}, {"prefs", PREFS_SET}, {"qrels_jg", QRELS_JG}};
#define NNICKNAMES ((int)(sizeof NICKNAMES / sizeof NICKNAMES[0]))

static int measure_index(const char *name, size_t len) {
    for (int i = 0; i < NMEASURES; i++)
        if (strlen(MEASURES[i].name) == len && memcmp(MEASURES[i].name, name, len) == 0)
            return i;
    return -1;
}

static const char *const *nickname(const char *name, size_t len) {
    for (int i = 0; i < NNICKNAMES; i++)
        if (strlen(NICKNAMES[i].name) == len && memcmp(NICKNAMES[i].name, name, len) == 0)
            return NICKNAMES[i].members;
    return NULL;
}

/* A chosen measure (trec_measures.Chosen): its parameters and printed names. */
typedef struct {
    int measure;     /* index in MEASURES */
    int family;      /* -R qrels_jg: the plain measure an *_avgjg family averages, else -1 */
    double *values;
    int nvalues;
    double *pairs;   /* 3 a row */
    int npairs;
    char **names;
    int nnames;
} Chosen;

/* C atof as formats/c_numbers.c_atof reads it (strtod in the "C" locale; a NaN without its
 * sign). Non-finite parameters fall back: Python sorts and prints them its own way. */
static int finite_atof(const char *s, double *out) {
    double v = strtod(s, NULL);
    *out = v;
    return isfinite(v);
}

static int is_digits(const char *s, size_t n) {
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* trec_measures._pairs: level=gain rows (1, level, gain), p=persistence (2, 0, p), other
 * keys (0, 0, value). */
static int pair_rows(Chosen *c, const char *text) {
    size_t pieces = 1;
    for (const char *p = text; *p; p++) pieces += *p == ',';
    c->pairs = alloc(3 * pieces, sizeof(double));
    const char *piece = text;
    for (size_t k = 0; k < pieces; k++) {
        size_t len = strcspn(piece, ",");
        const char *eq = memchr(piece, '=', len);
        if (eq == NULL || memchr(eq + 1, '=', len - (size_t)(eq + 1 - piece)) != NULL)
            return ATR_FALLBACK;
        size_t klen = (size_t)(eq - piece);
        const char *body = piece + (klen > 0 && (piece[0] == '+' || piece[0] == '-'));
        char *value = copy_text(eq + 1, len - klen - 1);
        double v, *row = c->pairs + 3 * k;
        int finite = finite_atof(value, &v);
        free(value);
        if (!finite) return ATR_FALLBACK;
        if (is_digits(body, (size_t)(eq - body))) {
            char *key = copy_text(piece, klen);
            long level = strtol(key, NULL, 10);
            free(key);
            if (labs(level) > 1000000000L) return ATR_FALLBACK;
            row[0] = 1.0, row[1] = (double)level, row[2] = v;
        } else {
            row[0] = klen == 1 && piece[0] == 'p' ? 2.0 : 0.0, row[1] = 0.0, row[2] = v;
        }
        piece += len + 1;
    }
    c->npairs = (int)pieces;
    return ATR_OK;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The parameters given as text: atol for cutoffs, atof otherwise. */
static int read_values(Chosen *c, const Measure *m, const char *text) {
    size_t pieces = 1;
    for (const char *p = text; *p; p++) pieces += *p == ',';
    c->values = alloc(pieces, sizeof(double));
    const char *piece = text;
    for (size_t k = 0; k < pieces; k++) {
        size_t len = strcspn(piece, ",");
        char *one = copy_text(piece, len);
        if (m->params == P_CUT) {
            long v = strtol(one, NULL, 10);
            c->values[k] = (double)v;
            if (labs(v) > 1000000000L) c->values[k] = NAN; /* Python's own names: fall back */
        } else {
            finite_atof(one, &c->values[k]);
        }
        free(one);
        if (!isfinite(c->values[k])) return ATR_FALLBACK;
        piece += len + 1;
    }
    c->nvalues = (int)pieces;
    return ATR_OK;
}

static char *format_name(const char *fmt, const char *name, double v) {
    char buf[128];
    snprintf(buf, sizeof buf, fmt, name, v);
    return copy_text(buf, strlen(buf));
}

/* Printed names of cutoffs (NAME_k) and fractions (NAME_%3.2f, cut to the name + 9). */
static int cutoff_names(Chosen *c, const Measure *m) {
    qsort(c->values, (size_t)c->nvalues, sizeof(double), compare_doubles);
    if (m->params == P_CUT && c->values[0] <= 0) return ATR_FALLBACK;
    for (int k = 1; k < c->nvalues; k++)
        if (c->values[k] == c->values[k - 1]) return ATR_FALLBACK;
    c->names = alloc((size_t)c->nvalues, sizeof(char *));
    c->nnames = c->nvalues;
    for (int k = 0; k < c->nvalues; k++) {
        if (m->params == P_CUT) {
            c->names[k] = format_name("%s_%.0f", m->name, c->values[k]);
        } else {
            c->names[k] = format_name("%s_%3.2f", m->name, c->values[k]);
            size_t width = strlen(m->name) + 9;
            if (strlen(c->names[k]) > width) c->names[k][width] = 0;
        }
    }
    return ATR_OK;
}

static void single_name(Chosen *c, const char *name, const char *text) {
    size_t n = strlen(name), t = text ? strlen(text) : 0;
    char *label = alloc(n + t + 2, 1);
    memcpy(label, name, n);
    if (text) {
        label[n] = '_';
        memcpy(label + n + 1, text, t);
    }
    c->names = alloc(1, sizeof(char *));
    c->names[0] = label;
    c->nnames = 1;
}

/* trec_measures._parameters: `text` the first parameters given for the measure, or NULL. */
static int parameters(Chosen *c, int index, const char *text) {
    const Measure *m = &MEASURES[index];
    c->measure = index;
    c->family = -1;
    if (m->params == P_NONE || (text == NULL && m->params == P_PAIRS)) {
        single_name(c, m->name, NULL);
        return ATR_OK;
    }
    if (m->params == P_PAIRS) {
        single_name(c, m->name, text);
        return pair_rows(c, text);
    }
    if (text == NULL) {
        c->values = alloc((size_t)m->ndefaults, sizeof(double));
        memcpy(c->values, m->defaults, (size_t)m->ndefaults * sizeof(double));
        c->nvalues = m->ndefaults;
    } else if (read_values(c, m, text) != ATR_OK) {
        return ATR_FALLBACK;
    }
    if (m->params == P_CUT || m->params == P_FRACTION) return cutoff_names(c, m);
    if (strcmp(m->name, "utility") == 0 && c->nvalues != 4) return ATR_FALLBACK;
    if (strcmp(m->name, "relstring") == 0 && (c->values[0] < 0 || c->values[0] > 1e6))
        return ATR_FALLBACK; /* no relstring buffer of that size: the Python path */
    single_name(c, m->name, text);
    return ATR_OK;
}

/* Mark one -m spec's measures; the first parameters of each name are kept. */
static int mark_spec(const char *spec, uint8_t *marked, const char **first) {
    for (const char *p = spec; *p; p++)
        if ((unsigned char)*p >= 128) return ATR_FALLBACK;
    const char *dot = strchr(spec, '.');
    size_t len = dot ? (size_t)(dot - spec) : strlen(spec);
    const char *const *members = nickname(spec, len);
    if (dot && (members != NULL || dot[1] == 0)) return ATR_FALLBACK;
    int index = members ? -1 : measure_index(spec, len);
    if (members == NULL && index < 0) return ATR_FALLBACK;
    if (dot && index >= 0 && first[index] == NULL) first[index] = dot + 1;
    if (dot && index < 0) return ATR_FALLBACK; /* unknown names keep no parameters */
    if (members == NULL) {
        marked[index] = 1;
        return ATR_OK;
    }
    for (int k = 0; members[k]; k++) marked[measure_index(members[k], strlen(members[k]))] = 1;
    return ATR_OK;
}

/* parse_measures + check_judgements: the chosen measures in printing order. */
static int parse_measures(const Command *cmd, Chosen **out, int *nout) {
    uint8_t marked[NMEASURES] = {0};
    const char *first[NMEASURES] = {0};
    if (cmd->nspecs == 0 && mark_spec("official", marked, first) != ATR_OK) return ATR_FALLBACK;
    for (int s = 0; s < cmd->nspecs; s++)
        if (mark_spec(cmd->specs[s], marked, first) != ATR_OK) return ATR_FALLBACK;
    Chosen *chosen = alloc(NMEASURES, sizeof(Chosen));
    int n = 0, wanted = cmd->rel_format == 1 ? J_JG : cmd->rel_format >= 2 ? J_PREFS : J_QRELS;
    for (int i = 0; i < NMEASURES; i++) {
        if (!marked[i]) continue;
        if (MEASURES[i].kind > -3 && MEASURES[i].kind < 0) { /* runid, num_q: any format */
        } else if (MEASURES[i].judgements != wanted) {
            return ATR_FALLBACK; /* "measure reads -R ... judgements" */
        }
        if (parameters(&chosen[n], i, first[i]) != ATR_OK) return ATR_FALLBACK;
        n++;
    }
    *out = chosen;
    *nout = n;
    return ATR_OK;
}

/* plan_of: kernel rows (kind, first, last parameter, first column), parameters, pairs and
 * every column's name and measure. Only the chosen with family >= 0 under qrels_jg. */
static void plan_of(const Chosen *chosen, int n, int only_families, AtrMeasures *plan) {
    int64_t columns = 0, params = 0, pairs = 0;
    for (int i = 0; i < n; i++) {
        columns += chosen[i].nnames;
        params += chosen[i].nvalues;
        pairs += chosen[i].npairs;
    }
    memset(plan, 0, sizeof *plan);
    plan->names = alloc((size_t)columns, sizeof(char *));
    plan->owners = alloc((size_t)columns, sizeof(char *));
    plan->count = alloc((size_t)columns, 1);
    plan->geometric = alloc((size_t)columns, 1);
    plan->rows = alloc(4 * (size_t)n, sizeof(int64_t));
    plan->params = alloc((size_t)params, sizeof(double));
    plan->pairs = alloc(3 * (size_t)pairs, sizeof(double));
    for (int i = 0; i < n; i++) {
        const Chosen *c = &chosen[i];
        int index = only_families ? c->family : c->measure;
        if (only_families && index < 0) continue;
        const Measure *m = &MEASURES[index];
        if (m->kind >= 0) {
            int64_t *row = plan->rows + 4 * plan->nrows++;
            row[0] = m->kind, row[3] = plan->ncolumns;
            if (m->params == P_PAIRS) {
                row[1] = plan->npairs, row[2] = plan->npairs + c->npairs;
                memcpy(plan->pairs + 3 * plan->npairs, c->pairs, 3 * (size_t)c->npairs * 8);
                plan->npairs += c->npairs;
            } else {
                row[1] = plan->nparams, row[2] = plan->nparams + c->nvalues;
                memcpy(plan->params + plan->nparams, c->values, (size_t)c->nvalues * 8);
                plan->nparams += c->nvalues;
            }
            if (m->kind == 10) plan->relstring = (int64_t)c->values[0];
        }
        for (int k = 0; k < c->nnames; k++) {
            int64_t col = plan->ncolumns++;
            plan->names[col] = c->names[k];
            plan->owners[col] = (char *)MEASURES[c->measure].name;
            plan->count[col] = MEASURES[c->measure].count;
            plan->geometric[col] = MEASURES[c->measure].geometric;
        }
    }
}

/* --------------------------------------------------------------------------- the files ---- */

/* The whole file, with one more byte (0): formats/trec_light._read_bytes. A path that is not
 * a regular file, or one that changes while read, is the Python path's to judge. */
static int read_bytes(const char *path, AtrTable *t) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return ATR_FALLBACK;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ATR_FALLBACK;
    int status = ATR_FALLBACK;
    if (fstat(fd, &st) == 0 && st.st_size >= 0) {
        t->size = (int64_t)st.st_size;
        t->data = malloc((size_t)t->size + 1);
        if (t->data == NULL) {
            close(fd);
            return ATR_NOMEM;
        }
        int64_t got = 0;
        ssize_t r = 1;
        while (got < t->size && (r = read(fd, t->data + got, (size_t)(t->size - got))) > 0)
            got += r;
        uint8_t extra;
        if (got == t->size && r >= 0 && read(fd, &extra, 1) == 0) status = ATR_OK;
        t->data[t->size] = 0;
    }
    close(fd);
    return status;
}

typedef struct {
    int32_t *group, *glen, *line;
    int64_t *gstart, info[8];
    uint8_t *slow;
} Scan;

/* The key of group g: its span, or for -R qrels_jg its two fields joined by one blank. */
static char *group_key(const AtrTable *t, const Scan *s, int64_t g, int jg) {
    const char *p = (const char *)t->data + s->gstart[g];
    size_t n = (size_t)s->glen[g];
    if (!jg) return copy_text(p, n);
    size_t a = 0;
    while (a < n && p[a] != ' ' && (p[a] < 9 || p[a] > 13)) a++;
    size_t b = a;
    while (b < n && (p[b] == ' ' || (p[b] >= 9 && p[b] <= 13))) b++;
    char *key = alloc(n + 2, 1);
    memcpy(key, p, a);
    key[a] = ' ';
    memcpy(key + a + 1, p + b, n - b);
    return key;
}

static char **g_keys; /* qsort's comparison reads the keys here */
static int g_jg;

/* Python's sort of the keys by bytes.split: byte order, field by field under -R qrels_jg. */
static int compare_keys(const void *a, const void *b) {
    const char *x = g_keys[*(const int64_t *)a], *y = g_keys[*(const int64_t *)b];
    if (g_jg) {
        size_t xa = strcspn(x, " "), ya = strcspn(y, " ");
        size_t m = xa < ya ? xa : ya;
        int c = memcmp(x, y, m);
        if (c != 0) return c;
        if (xa != ya) return xa < ya ? -1 : 1;
        return strcmp(x + xa + 1, y + ya + 1);
    }
    return strcmp(x, y);
}

/* trec_light._queries: the distinct keys in order (the table's qids) and each group's rank. */
static int64_t *rank_groups(AtrTable *t, const Scan *s, int64_t groups, int jg) {
    char **keys = alloc((size_t)groups, sizeof(char *));
    int64_t *idx = alloc((size_t)groups, sizeof(int64_t));
    int64_t *rank = alloc((size_t)groups, sizeof(int64_t));
    for (int64_t g = 0; g < groups; g++) {
        keys[g] = group_key(t, s, g, jg);
        idx[g] = g;
    }
    g_keys = keys, g_jg = jg;
    qsort(idx, (size_t)groups, sizeof(int64_t), compare_keys);
    t->qids = alloc((size_t)groups, sizeof(char *));
    t->nq = 0;
    for (int64_t i = 0; i < groups; i++) {
        int64_t g = idx[i];
        if (t->nq == 0 || strcmp(t->qids[t->nq - 1], keys[g]) != 0) {
            t->qids[t->nq++] = keys[g];
            keys[g] = NULL;
        }
        rank[g] = t->nq - 1;
    }
    for (int64_t g = 0; g < groups; g++) free(keys[g]);
    free(keys);
    free(idx);
    return rank;
}

/* A run's scores the fast scanner left (hex, many digits): strtod, as c_atof reads them. */
static int slow_scores(AtrTable *t, const uint8_t *slow, int64_t n) {
    for (int64_t k = 0; k < n; k++) {
        if (!slow[k]) continue;
        double v = strtod((const char *)t->data + (int64_t)t->value[k], NULL);
        if (!isfinite(v)) return ATR_FALLBACK; /* read_table refuses it */
        t->value[k] = v;
    }
    return ATR_OK;
}

/* The records' per-record fields after the scan: a run keeps its scores, a qrels its levels;
 * the scanner's other buffers are freed as soon as they are no longer needed. */
static int values_of(AtrTable *t, Scan *s, int run, int64_t n) {
    free(s->line);
    s->line = NULL;
    if (run) {
        int status = slow_scores(t, s->slow, n);
        free(s->slow);
        s->slow = NULL;
        if (status != ATR_OK) return status;
        int64_t tag = s->info[5], tlen = s->info[6];
        t->tag = copy_text((const char *)t->data + tag, (size_t)tlen);
        return ATR_OK;
    }
    free(s->slow);
    s->slow = NULL;
    t->levels = alloc((size_t)n, sizeof(int64_t));
    int64_t bad = atr_levels(t->value, n, MAX_LEVEL, t->levels);
    free(t->value); /* a qrels' levels as doubles: the kernels read the int64 ones */
    t->value = NULL;
    t->tag = copy_text("", 0);
    return bad >= 0 ? ATR_FALLBACK : ATR_OK;
}

static int scan_file(AtrTable *t, Scan *s, int run, int jg) {
    int64_t lines = atr_count_lines(t->data, t->size);
    size_t m = (size_t)lines;
    s->group = alloc(m, 4), s->gstart = alloc(m, 8), s->glen = alloc(m, 4);
    t->doc_start = alloc(m, 8), t->doc_len = alloc(m, 4), t->value = alloc(m, 8);
    s->line = alloc(m, 4), s->slow = alloc(m, 1);
    atr_scan(t->data, t->size, run | (jg ? 2 : 0), MAX_LINE_BYTES, s->group, s->gstart, s->glen,
             t->doc_start, t->doc_len, t->value, s->line, s->slow, s->info);
    t->n = s->info[0];
    /* an error, a non-ASCII byte (read_table's UTF-8 check), no record */
    if (s->info[2] || s->info[7] || t->n == 0) return ATR_FALLBACK;
    return values_of(t, s, run, t->n);
}

/* formats/trec_light.read_light: a well-formed qrels (run 0; jg 1: -R qrels_jg, each query a
 * "qid group") or run (run 1), or ATR_FALLBACK for anything unusual. */
static int read_light(const char *path, int run, int jg, AtrTable *t) {
    memset(t, 0, sizeof *t);
    int status = read_bytes(path, t);
    Scan s;
    memset(&s, 0, sizeof s);
    if (status == ATR_OK) status = scan_file(t, &s, run, jg);
    if (status == ATR_OK) {
        int64_t *rank = rank_groups(t, &s, s.info[1], jg);
        t->start = alloc((size_t)t->nq, 8), t->stop = alloc((size_t)t->nq, 8);
        t->order = alloc((size_t)t->n, 8);
        if (atr_group_order(s.group, t->n, rank, t->nq, t->start, t->stop, t->order) != 0)
            status = ATR_NOMEM;
        free(rank);
    }
    free(s.group), free(s.gstart), free(s.glen), free(s.line), free(s.slow);
    if (status != ATR_OK) return status;
    int64_t twice = atr_sort_by_docno(t->data, t->doc_start, t->doc_len, t->order, t->n,
                                      t->start, t->stop, t->nq);
    if (twice == -2) return ATR_NOMEM;
    return twice >= 0 ? ATR_FALLBACK : ATR_OK;
}

/* ------------------------------------------------------------------------ evaluation ---- */

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The run query of `qid` (the run's qids are in byte order), or -1. */
static int64_t run_query(const AtrTable *run, const char *qid) {
    char *const *hit = bsearch(&qid, run->qids, (size_t)run->nq, sizeof(char *),
                               compare_strings);
    return hit ? (int64_t)(hit - run->qids) : -1;
}

/* The kernel over the pairs (run_of[k], qrels_of[k]): values nq x ncolumns, relstrings. */
static int evaluate_pairs(const AtrTable *qt, const AtrTable *rt, const int64_t *run_of,
                          const int64_t *qrels_of, int64_t nq, const AtrMeasures *plan,
                          const AtrOptions *o, int64_t num_docs, double *values,
                          char **relstrings) {
    int64_t relsize = plan->relstring > 1 ? plan->relstring : 1;
    uint8_t *relstr = alloc((size_t)(nq * relsize), 1);
    int64_t *rel_len = alloc((size_t)nq, 8);
    int64_t status = atr_evaluate(
        rt->data, rt->doc_start, rt->doc_len, rt->value, rt->order, rt->start, rt->stop,
        qt->data, qt->doc_start, qt->doc_len, qt->levels, qt->order, qt->start, qt->stop,
        run_of, qrels_of, nq, o->level, o->max_ret, o->judged_only, 0, plan->rows, plan->nrows,
        plan->params, plan->nparams, plan->pairs, plan->npairs, num_docs, plan->ncolumns,
        values, relstr, relsize, rel_len);
    for (int64_t k = 0; relstrings && k < nq; k++)
        relstrings[k] = copy_text((const char *)relstr + k * relsize, (size_t)rel_len[k]);
    free(relstr);
    free(rel_len);
    return status ? ATR_NOMEM : ATR_OK;
}

/* Column j summed in query order from its first value (numpy's cumsum, Grid.column_total). */
static double column_total(const double *values, int64_t nq, int64_t width, int64_t j) {
    double total = values[j];
    for (int64_t q = 1; q < nq; q++) total += values[q * width + j];
    return total;
}

/* trec_measures.summary_of; `relevant` (-c) is num_rel's all, or -1. */
static void summary_of(AtrEval *e, const uint8_t *geometric, int64_t relevant) {
    for (int64_t j = 0; j < e->ncolumns; j++) {
        double sum = e->nq ? column_total(e->values, e->nq, e->ncolumns, j) : 0.0;
        const char *owner = e->owners[j];
        if (strcmp(owner, "num_q") == 0) e->summary[j] = (double)e->nq;
        else if (strcmp(owner, "num_rel") == 0 && relevant >= 0) e->summary[j] = (double)relevant;
        else if (e->count[j] || strcmp(owner, "runid") == 0 || strcmp(owner, "relstring") == 0)
            e->summary[j] = sum;
        else if (geometric[j]) e->summary[j] = exp(sum / (double)e->nq);
        else e->summary[j] = sum / (double)e->nq;
    }
}

/* -R qrels: trec_light.evaluate_light with metrics/trec_measures.pairing. */
static int evaluate_qrels(const AtrTable *qt, const AtrTable *rt, const AtrMeasures *plan,
                          const AtrOptions *o, AtrEval *e) {
    int64_t *run_of = alloc((size_t)qt->nq, 8), *qrels_of = alloc((size_t)qt->nq, 8);
    e->qids = alloc((size_t)qt->nq, sizeof(char *));
    e->nq = 0;
    for (int64_t i = 0; i < qt->nq; i++) {
        const char *q = qt->qids[i];
        int64_t r = run_query(rt, q);
        if ((o->only_query && strcmp(q, o->only_query) != 0) || (r < 0 && !o->complete))
            continue;
        run_of[e->nq] = r, qrels_of[e->nq] = i;
        e->qids[e->nq++] = qt->qids[i];
    }
    if (e->nq == 0) return ATR_FALLBACK; /* "no query of the run has judgements" */
    e->values = alloc((size_t)(e->nq * plan->ncolumns), sizeof(double));
    e->relstrings = alloc((size_t)e->nq, sizeof(char *));
    int status = evaluate_pairs(qt, rt, run_of, qrels_of, e->nq, plan, o, o->num_docs,
                                e->values, e->relstrings);
    free(run_of);
    free(qrels_of);
    if (status != ATR_OK) return status;
    int64_t relevant = -1;
    if (o->complete) {
        relevant = 0;
        for (int64_t k = 0; k < qt->n; k++) relevant += qt->levels[k] > 0;
    }
    e->summary = alloc((size_t)plan->ncolumns, sizeof(double));
    summary_of(e, plan->geometric, relevant);
    return ATR_OK;
}

/* The queries of -R qrels_jg: metrics/trec_measures.group_queries over the qids of the
 * table's "qid group" keys (in key order, so ascending), each with its row or -1. */
static int group_rows(const AtrTable *qt, const AtrTable *rt, const AtrOptions *o, AtrEval *e,
                      int64_t *row_of) {
    e->qids = alloc((size_t)qt->nq, sizeof(char *));
    e->nq = 0;
    for (int64_t k = 0; k < qt->nq; k++) {
        size_t len = strcspn(qt->qids[k], " ");
        char *qid = copy_text(qt->qids[k], len);
        int same = e->nq > 0 && strcmp(e->qids[e->nq - 1], qid) == 0;
        int wanted = (o->only_query == NULL || strcmp(qid, o->only_query) == 0) &&
                     (o->complete || run_query(rt, qid) >= 0);
        if (same || !wanted) {
            row_of[k] = same ? e->nq - 1 : -1;
            free(qid);
            continue;
        }
        row_of[k] = e->nq;
        e->qids[e->nq++] = qid;
    }
    return e->nq ? ATR_OK : ATR_FALLBACK; /* "no query of the run has judgements" */
}

/* -R qrels_jg: trec_light.evaluate_groups_light. Every (qid, group) is evaluated as a qrels
 * query by the families' plain measures, then each query's values are summed in group order
 * from 0 and divided by its number of groups where it has several. */
static int evaluate_groups(const AtrTable *qt, const AtrTable *rt, const AtrMeasures *columns,
                           const AtrMeasures *plain, const AtrOptions *o, AtrEval *e) {
    int64_t *row_of = alloc((size_t)qt->nq, 8);
    int status = group_rows(qt, rt, o, e, row_of);
    if (status != ATR_OK) return status;
    int64_t items = 0, width = columns->ncolumns;
    int64_t *run_of = alloc((size_t)qt->nq, 8), *qrels_of = alloc((size_t)qt->nq, 8);
    for (int64_t k = 0; k < qt->nq; k++) {
        if (row_of[k] < 0) continue;
        run_of[items] = run_query(rt, e->qids[row_of[k]]);
        qrels_of[items++] = k;
    }
    double *grid = alloc((size_t)(items * plain->ncolumns), sizeof(double));
    status = evaluate_pairs(qt, rt, run_of, qrels_of, items, plain, o, 0, grid, NULL);
    /* each plain column's output column: the families' names are the output names */
    int64_t *col = alloc((size_t)plain->ncolumns, 8);
    for (int64_t j = 0; j < plain->ncolumns; j++)
        for (int64_t c = width - 1; c >= 0; c--)
            if (strcmp(columns->names[c], plain->names[j]) == 0) col[j] = c;
    e->values = alloc((size_t)(e->nq * width), sizeof(double));
    int64_t *seen = alloc((size_t)e->nq, 8);
    for (int64_t i = 0; status == ATR_OK && i < items; i++) {
        int64_t r = row_of[qrels_of[i]];
        seen[r]++;
        for (int64_t j = 0; j < plain->ncolumns; j++)
            e->values[r * width + col[j]] += grid[i * plain->ncolumns + j];
    }
    for (int64_t r = 0; r < e->nq; r++)
        for (int64_t j = 0; seen[r] > 1 && j < plain->ncolumns; j++)
            e->values[r * width + col[j]] /= (double)seen[r];
    e->summary = alloc((size_t)width, sizeof(double));
    for (int64_t j = 0; j < width; j++)
        e->summary[j] = strcmp(columns->owners[j], "num_q") == 0
                            ? (double)e->nq
                            : column_total(e->values, e->nq, width, j) / (double)e->nq;
    free(row_of), free(run_of), free(qrels_of), free(grid), free(col), free(seen);
    return status;
}

/* --------------------------------------------------------------------------- printing ---- */

/* A value as trec_work._cell prints it: a count as an integer, else C's %6.4f. */
static void print_cell(double v, int count) {
    if (count) {
        double t = trunc(v);
        printf("%.0f", t == 0 ? 0.0 : t); /* int(-0.0) is 0 */
    } else {
        printf("%6.4f", v);
    }
}

static int per_query_owner(const char *owner) {
    return strcmp(owner, "num_q") && strcmp(owner, "gm_map") && strcmp(owner, "gm_bpref") &&
           strcmp(owner, "runid");
}

/* cli/trec_work.trec_lines (no -Z, no tie bounds). */
static void print_lines(const AtrEval *e, const AtrOptions *o) {
    for (int64_t q = 0; o->per_query && q < e->nq; q++) {
        for (int64_t j = 0; j < e->ncolumns; j++) {
            if (!per_query_owner(e->owners[j])) continue;
            if (strcmp(e->owners[j], "relstring") == 0) {
                printf("%-22s\t%s\t'%s'\n", e->names[j], e->qids[q], e->relstrings[q]);
                continue;
            }
            printf("%-22s\t%s\t", e->names[j], e->qids[q]);
            print_cell(e->values[q * e->ncolumns + j], e->count[j]);
            putchar('\n');
        }
    }
    for (int64_t j = 0; !o->no_summary && j < e->ncolumns; j++) {
        if (strcmp(e->owners[j], "relstring") == 0) continue;
        if (strcmp(e->owners[j], "runid") == 0) {
            printf("%-22s\tall\t%s\n", "runid", e->run_id);
            continue;
        }
        printf("%-22s\tall\t", e->names[j]);
        print_cell(e->summary[j], e->count[j]);
        putchar('\n');
    }
}

/* The Python path's message for an output it cannot write (core/errors.WRITE_ERRNOS). */
static int write_failed(int error) {
    const char *reason = strerror(error);
    if (error == ENOSPC) reason = "no space left on the device";
    else if (error == EFBIG) reason = "the file would exceed the file-size limit (ulimit -f)";
    else if (error == EDQUOT) reason = "the disk quota is exceeded";
    else if (error == EROFS) reason = "the file system is read-only";
    else if (error == EACCES) reason = "permission denied";
    else if (error == EPERM) reason = "operation not permitted";
    fprintf(stderr, "audiorepro: error: cannot be accessed: %s\n", reason);
    return 2;
}

/* ------------------------------------------------------------------------------- main ---- */

static void evaluation_of(const Command *cmd, AtrTable *qt, AtrTable *rt, AtrEval *e) {
    Chosen *chosen = NULL;
    int nchosen = 0;
    check(parse_measures(cmd, &chosen, &nchosen));
    AtrMeasures plan, plain;
    plan_of(chosen, nchosen, 0, &plan);
    if (cmd->rel_format >= 2) { /* -R prefs, qrels_prefs: core/_trec_prefs.c reads them */
        memset(qt, 0, sizeof *qt);
        check(read_light(cmd->files[1], 1, 0, rt));
        e->run_id = rt->tag, e->ncolumns = plan.ncolumns, e->names = plan.names;
        e->owners = plan.owners, e->count = plan.count;
        check(atr_prefs_evaluate(rt, cmd->files[0], cmd->rel_format == 3, &plan, &cmd->o, e));
        return;
    }
    int jg = cmd->rel_format == 1;
    if (jg) {
        for (int i = 0; i < nchosen; i++) {
            const char *name = MEASURES[chosen[i].measure].name;
            if (strcmp(name, "map_avgjg") == 0) chosen[i].family = measure_index("map", 3);
            if (strcmp(name, "P_avgjg") == 0) chosen[i].family = measure_index("P", 1);
            if (strcmp(name, "Rprec_mult_avgjg") == 0)
                chosen[i].family = measure_index("Rprec_mult", 10);
        }
        plan_of(chosen, nchosen, 1, &plain);
    }
    check(read_light(cmd->files[0], 0, jg, qt));
    check(read_light(cmd->files[1], 1, 0, rt));
    e->run_id = rt->tag;
    e->ncolumns = plan.ncolumns;
    e->names = plan.names;
    e->owners = plan.owners;
    e->count = plan.count;
    check(jg ? evaluate_groups(qt, rt, &plan, &plain, &cmd->o, e)
             : evaluate_qrels(qt, rt, &plan, &cmd->o, e));
}

int main(int argc, char **argv) {
    g_argc = argc, g_argv = argv;
    /* A fixed threshold: glibc raises it to the size of each mapped block freed, after which
     * the large buffers (the scanner's per-line slots, mostly never written, calloc'ed for
     * that) would come from the heap, zeroed by hand, every page resident. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    Command cmd;
    check(parse_command(argc, argv, &cmd));
    AtrTable qt, rt;
    AtrEval e;
    memset(&e, 0, sizeof e);
    evaluation_of(&cmd, &qt, &rt, &e);
    /* The files' bytes are no longer needed: printing reads the evaluation only. */
    free(qt.data), free(qt.doc_start), free(qt.doc_len), free(qt.order);
    free(rt.data), free(rt.doc_start), free(rt.doc_len), free(rt.value), free(rt.order);
    qt.data = rt.data = NULL;
    static char buffer[1 << 16];
    setvbuf(stdout, buffer, _IOFBF, sizeof buffer);
    errno = 0;
    print_lines(&e, &cmd.o);
    if (fflush(stdout) != 0 || ferror(stdout)) return write_failed(errno ? errno : EIO);
    return 0;
}
