/* Unit tests of the finding-class table (core/include/kvfuzz/finding_classes.def): the names
 * that findings' files, JSON, statistics and reports carry, their parser, which classes are
 * kernel failures, and docs/design.md §7, whose table must say what the def file says, row for
 * row; and that an outcome files a finding only for a kernel failure, as replay counts one. */
#include "check.h"

#include <ctype.h>

#include "case_oracle.h"
#include "kvfuzz/file.h"
#include "kvfuzz/finding_class.h"
#include "kvfuzz/outcome.h"

typedef struct def_row {
    kvf_finding_class id;
    const char *name;
    const char *producer; /* the def file's word: JUDGE, RUN, HOST */
    kvf_finding_producer producer_id;
    const char *fails; /* ALWAYS, IF_REQUIRED */
    const char *doc;
} def_row;

static const def_row rows[] = {
#define KVF_FINDING_CLASS(id, name, producer, fails, doc)                                          \
    {KVF_FINDING_##id, name, #producer, KVF_FINDING_BY_##producer, #fails, doc},
#include "kvfuzz/finding_classes.def"
#undef KVF_FINDING_CLASS
};
#define NROWS ((int)(sizeof rows / sizeof rows[0]))

/* The words are part of every findings folder and statistics file already written: a class
 * may be added, never renamed. */
static void test_names(void) {
    static const char *const names[KVF_FINDING_CLASS_COUNT] = {
        [KVF_FINDING_NONE] = "none",
        [KVF_FINDING_NONFINITE] = "nonfinite",
        [KVF_FINDING_O_TOLERANCE] = "o-tolerance",
        [KVF_FINDING_LSE_TOLERANCE] = "lse-tolerance",
        [KVF_FINDING_OVERFLOW] = "overflow",
        [KVF_FINDING_KERNEL_ERROR] = "kernel-error",
        [KVF_FINDING_CRASH] = "crash",
        [KVF_FINDING_HANG] = "hang",
        [KVF_FINDING_NONDETERMINISM] = "nondeterminism",
        [KVF_FINDING_UNWRITTEN_OUTPUT] = "unwritten-output",
        [KVF_FINDING_OOB_WRITE] = "out-of-bounds-write",
        [KVF_FINDING_INPUT_MODIFIED] = "input-modified",
        [KVF_FINDING_INVARIANCE] = "invariance",
    };
    for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++) {
        CHECK(names[c] != NULL); /* a class this list does not know: add its word above */
        if (names[c] && strcmp(kvf_finding_class_name((kvf_finding_class)c), names[c]) != 0)
            CHECK_FAIL_AT("class %d is named \"%s\", not \"%s\"", c,
                          kvf_finding_class_name((kvf_finding_class)c), names[c]);
    }
    CHECK(strcmp(kvf_finding_class_name(KVF_FINDING_CLASS_COUNT), "unknown") == 0);
    CHECK(strcmp(kvf_finding_class_name((kvf_finding_class)-1), "unknown") == 0);
}

static void test_parse_round_trip(void) {
    for (int c = 0; c < KVF_FINDING_CLASS_COUNT; c++)
        CHECK_INT_EQ(kvf_finding_class_parse(kvf_finding_class_name((kvf_finding_class)c)), c);
    CHECK_INT_EQ(kvf_finding_class_parse("none"), KVF_FINDING_NONE);
    CHECK_INT_EQ(kvf_finding_class_parse("unknown"), -1);
    CHECK_INT_EQ(kvf_finding_class_parse("O-tolerance"), -1);
    CHECK_INT_EQ(kvf_finding_class_parse("o-tolerance "), -1);
    CHECK_INT_EQ(kvf_finding_class_parse(""), -1);
    CHECK_INT_EQ(kvf_finding_class_parse(NULL), -1);
}

/* The def file's rows are the enum's classes in order, and every accessor reads its row. */
static void test_accessors_follow_the_table(void) {
    CHECK_INT_EQ(NROWS, KVF_FINDING_CLASS_COUNT - 1);
    for (int i = 0; i < NROWS; i++) {
        const def_row *r = &rows[i];
        CHECK_INT_EQ(r->id, i + 1);
        CHECK(strcmp(kvf_finding_class_name(r->id), r->name) == 0);
        CHECK(strcmp(kvf_finding_class_doc(r->id), r->doc) == 0);
        CHECK_INT_EQ(kvf_finding_class_producer(r->id), r->producer_id);
    }
    CHECK(strcmp(kvf_finding_class_doc(KVF_FINDING_NONE), "") == 0);
    CHECK_INT_EQ(kvf_finding_class_producer(KVF_FINDING_NONE), KVF_FINDING_BY_NONE);
    CHECK_INT_EQ(kvf_finding_class_producer(KVF_FINDING_CLASS_COUNT), KVF_FINDING_BY_NONE);
}

/* Only overflow waits for --require-overflow; NONE and values past the table never fail. */
static void test_fails(void) {
    for (int i = 0; i < NROWS; i++) {
        const int always = strcmp(rows[i].fails, "ALWAYS") == 0;
        CHECK_INT_EQ(kvf_finding_class_fails(rows[i].id, 0), always);
        CHECK_INT_EQ(kvf_finding_class_fails(rows[i].id, 1), 1);
    }
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_OVERFLOW, 0), 0);
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_OVERFLOW, 1), 1);
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_O_TOLERANCE, 0), 1);
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_NONE, 0), 0);
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_NONE, 1), 0);
    CHECK_INT_EQ(kvf_finding_class_fails(KVF_FINDING_CLASS_COUNT, 1), 0);
}

/* ---- docs/design.md §7 ---------------------------------------------------------------------- */

#define MAX_CELLS 8
#define CELL_MAX 256

/* Splits a Markdown table row "| a | b |" into trimmed cells; returns how many. */
static int split_row(const char *line, size_t len, char cells[MAX_CELLS][CELL_MAX]) {
    int n = 0;
    const char *p = line + 1, *end = line + len;
    while (p < end && n < MAX_CELLS) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        if (!bar) break;
        const char *a = p, *b = bar;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        snprintf(cells[n++], CELL_MAX, "%.*s", (int)(b - a), a);
        p = bar + 1;
    }
    return n;
}

/* The def file's word as the document writes it: lower case, '_' as a space. */
static void doc_word(const char *word, char *out, size_t size) {
    size_t i = 0;
    for (; word[i] && i + 1 < size; i++)
        out[i] = word[i] == '_' ? ' ' : (char)tolower((unsigned char)word[i]);
    out[i] = '\0';
}

static void check_doc_row(int i, char cells[MAX_CELLS][CELL_MAX], int ncells) {
    const def_row *r = &rows[i];
    char want_name[CELL_MAX], producer[32], fails[32];
    snprintf(want_name, sizeof want_name, "`%s`", r->name);
    doc_word(r->producer, producer, sizeof producer);
    doc_word(r->fails, fails, sizeof fails);
    if (ncells != 4) {
        CHECK_FAIL_AT("§7 row %d has %d cells, not 4 (class, producer, fails, description)", i + 1,
                      ncells);
        return;
    }
    const char *want[4] = {want_name, producer, fails, r->doc};
    static const char *const what[4] = {"class", "producer", "fails", "description"};
    for (int k = 0; k < 4; k++)
        if (strcmp(cells[k], want[k]) != 0)
            CHECK_FAIL_AT("§7 row %d, %s: the document says \"%s\", finding_classes.def \"%s\"",
                          i + 1, what[k], cells[k], want[k]);
}

static void test_design_table_matches_def(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/design.md", src ? src : ".");
    char *text;
    size_t size;
    kvf_error err = {0};
    if (kvf_read_file_max(path, KVF_READ_FILE_DEFAULT_MAX, &text, &size, &err)) {
        CHECK_FAIL_AT("%s", err.msg);
        return;
    }
    const char *sec = strstr(text, "\n## §7 ");
    CHECK(sec != NULL);
    int row = 0, table_lines = 0;
    for (const char *line = sec ? sec + 1 : text + size; line < text + size;) {
        const char *nl = memchr(line, '\n', (size_t)(text + size - line));
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (line != sec + 1 && strncmp(line, "## ", 3) == 0) break; /* the next section */
        if (len > 0 && line[0] == '|') {
            char cells[MAX_CELLS][CELL_MAX];
            int n = split_row(line, len, cells);
            /* The header and the line under it, then one row per class. */
            if (table_lines++ >= 2) {
                if (row < NROWS) check_doc_row(row, cells, n);
                row++;
            }
        }
        line = nl ? nl + 1 : text + size;
    }
    if (row != NROWS)
        CHECK_FAIL_AT("docs/design.md §7 lists %d classes, finding_classes.def %d", row, NROWS);
    free(text);
}

/* ---- which verdicts an outcome files --------------------------------------------------------- */

/* fib fails the exact -inf lse of an empty sequence: a verdict that fails, but only where the
 * kernel is bit for bit right (KVF_VERDICT_RULE_REJECTS_ROUNDED). Replay counts no kernel
 * failure there, and neither does the outcome the campaigns, the harness and the minimizer
 * use; a wrong value on that row is a finding. */
static void test_outcome_files_only_failures(void) {
    kvf_spec s;
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(&s, "seed-h20kv4", 3, &err), &err);
    s.recipe.page_size = 16;
    CHECK_OK(kvf_spec_set_batch(&s, 2, &err), &err);
    s.recipe.num_pages[0] = 2, s.recipe.last_page_len[0] = 7;
    s.recipe.num_pages[1] = 0, s.recipe.last_page_len[1] = 0;
    kvf_case c;
    kvf_oracle_result r;
    if (kvf_test_case_and_oracle(&s, &c, &r)) return;
    const int64_t nl = kvf_case_lse_elems(&c);
    float *lse = malloc((size_t)nl * sizeof *lse);
    memcpy(lse, r.lse_rounded, (size_t)nl * sizeof *lse);
    kvf_rule rules[2];
    CHECK_OK(kvf_rule_parse(&rules[0], "fib", &err), &err);
    CHECK_OK(kvf_rule_parse(&rules[1], "strict", &err), &err);
    kvf_outcome *out = malloc(sizeof *out);
    CHECK_OK(kvf_outcome_judge(out, rules, 2, 0, &c, &r, r.o_rounded, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(out->verdicts[0].pass, 0);
    CHECK_INT_EQ(kvf_verdict_status_of(&out->verdicts[0], 0), KVF_VERDICT_RULE_REJECTS_ROUNDED);
    CHECK_INT_EQ(out->verdicts[1].pass, 1);
    CHECK_INT_EQ(out->finding, KVF_FINDING_NONE);
    CHECK_INT_EQ(out->rule, -1);
    lse[c.num_qo_heads] = 0.0f; /* the empty sequence's first head: a finite sentinel */
    CHECK_OK(kvf_outcome_judge(out, rules, 2, 0, &c, &r, r.o_rounded, lse, NULL, NULL, &err), &err);
    CHECK_INT_EQ(kvf_verdict_status_of(&out->verdicts[1], 0), KVF_VERDICT_FAIL);
    CHECK_INT_EQ(out->finding, out->verdicts[1].finding);
    CHECK_INT_EQ(out->rule, 1);
    free(out);
    free(lse);
    kvf_oracle_result_free(&r);
    kvf_case_free(&c);
}

static const check_test tests[] = {
    {"names", test_names},
    {"parse_round_trip", test_parse_round_trip},
    {"accessors_follow_the_table", test_accessors_follow_the_table},
    {"fails", test_fails},
    {"design_table_matches_def", test_design_table_matches_def},
    {"outcome_files_only_failures", test_outcome_files_only_failures},
    {NULL, NULL},
};

CHECK_MAIN(tests)
