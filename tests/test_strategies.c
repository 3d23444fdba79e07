/* Unit tests of the strategy table (core/include/kvfuzz/strategies.def): the codes files store
 * and the names kvfuzz prints, their parser, that every accessor and enum follows the def file,
 * that every line names its functions and carries flags its readers can use, that every
 * strategy expands under both expansions, and docs/case-format.md ("Strategies"), whose table
 * must say what the def file says, line for line. */
#include "spec_fixtures.h"

#include <ctype.h>

#include "kvfuzz/file.h"

/* One line of the def file, in the file's order, with its function fields as written. */
typedef struct def_line {
    int family, id;
    const char *name, *doc;
    unsigned flags;
    const char *fn[2]; /* tables: layout, pool; distributions: fill1, fill2; patterns: key */
    int simple;        /* distributions */
    int scale;         /* logit patterns */
} def_line;

static const def_line lines[] = {
#define KVF_PAGE_TABLE(id, name, layout, pool, flags, doc)                                         \
    {KVF_FAMILY_TABLE, KVF_TABLE_##id, name, doc, flags, {#layout, #pool}, 0, 0},
#define KVF_VALUE_DIST(id, name, fill1, fill2, simple, flags, doc)                                 \
    {KVF_FAMILY_DIST, KVF_DIST_##id, name, doc, flags, {#fill1, #fill2}, simple, 0},
#define KVF_LOGIT_PATTERN(id, name, key, scale, flags, doc)                                        \
    {KVF_FAMILY_LOGITS, KVF_LOGITS_##id, name, doc, flags, {#key, ""}, 0, scale},
#include "kvfuzz/strategies.def"
};
#define NLINES ((int)(sizeof lines / sizeof lines[0]))

static const int counts[KVF_FAMILY_COUNT] = {KVF_TABLE_COUNT, KVF_DIST_COUNT, KVF_LOGITS_COUNT};

/* The codes are in every .kvfz file already written and the names in every dump and finding:
 * a strategy may be added, never renumbered or renamed. */
static void test_codes_and_names(void) {
    static const char *const tables[] = {"contiguous",    "shuffled", "reversed",
                                         "shared-prefix", "high-ids", "scattered"};
    static const char *const dists[] = {"normal",  "uniform",   "log-uniform", "constant",
                                        "one-hot", "subnormal", "signed-zero", "special"};
    static const char *const logits[] = {"natural",       "equal", "near-tie",   "spike",
                                         "very-negative", "huge",  "beyond-f32", "ascending"};
    static const struct {
        const char *const *names;
        int n;
    } known[KVF_FAMILY_COUNT] = {{tables, 6}, {dists, 8}, {logits, 8}};
    for (int f = 0; f < KVF_FAMILY_COUNT; f++) {
        CHECK(kvf_strategy_count(f) >= known[f].n); /* added ones come after these */
        for (int k = 0; k < known[f].n; k++)
            if (strcmp(kvf_strategy_name(f, k), known[f].names[k]) != 0)
                CHECK_FAIL_AT("family %d code %d is named \"%s\", not \"%s\"", f, k,
                              kvf_strategy_name(f, k), known[f].names[k]);
    }
    CHECK_INT_EQ(KVF_TABLE_HIGH_IDS, 4);
    CHECK_INT_EQ(KVF_TABLE_SCATTERED, 5);
    CHECK_INT_EQ(KVF_DIST_SPECIAL, 7);
    CHECK_INT_EQ(KVF_LOGITS_BEYOND_F32, 6);
    CHECK_INT_EQ(KVF_LOGITS_ASCENDING, 7);
}

static void test_parse_round_trip(void) {
    for (int f = 0; f < KVF_FAMILY_COUNT; f++) {
        for (int k = 0; k < kvf_strategy_count(f); k++)
            CHECK_INT_EQ(kvf_strategy_parse(f, kvf_strategy_name(f, k)), k);
        CHECK_INT_EQ(kvf_strategy_parse(f, "?"), -1);
        CHECK_INT_EQ(kvf_strategy_parse(f, ""), -1);
        CHECK_INT_EQ(kvf_strategy_parse(f, NULL), -1);
    }
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_TABLE, "high-ids"), KVF_TABLE_HIGH_IDS);
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_DIST, "signed-zero"), KVF_DIST_SIGNED_ZERO);
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_LOGITS, "near-tie"), KVF_LOGITS_NEAR_TIE);
    /* A name is looked up in its own family only, exactly. */
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_TABLE, "normal"), -1);
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_DIST, "Normal"), -1);
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_DIST, "normal "), -1);
    CHECK_INT_EQ(kvf_strategy_parse(KVF_FAMILY_COUNT, "normal"), -1);
    CHECK_INT_EQ(kvf_strategy_parse(-1, "normal"), -1);
}

/* Each family's lines are its enum's values in order, and every accessor reads its line. */
static void test_accessors_follow_the_def(void) {
    int seen[KVF_FAMILY_COUNT] = {0};
    for (int i = 0; i < NLINES; i++) {
        const def_line *l = &lines[i];
        const int f = l->family;
        CHECK_INT_EQ(l->id, seen[f]);
        seen[f]++;
        CHECK(strcmp(kvf_strategy_name(f, l->id), l->name) == 0);
        CHECK(strcmp(kvf_strategy_doc(f, l->id), l->doc) == 0);
        CHECK_INT_EQ(kvf_strategy_flags(f, l->id), l->flags);
        if (f == KVF_FAMILY_DIST) CHECK_INT_EQ(kvf_dist_simple(l->id), l->simple);
        const char *printed = f == KVF_FAMILY_TABLE  ? kvf_table_name(l->id)
                              : f == KVF_FAMILY_DIST ? kvf_dist_name(l->id)
                                                     : kvf_logits_name(l->id);
        CHECK(strcmp(printed, l->name) == 0);
        CHECK(l->doc[0] != '\0' && !strchr(l->doc, '|')); /* one Markdown cell */
    }
    for (int f = 0; f < KVF_FAMILY_COUNT; f++) {
        CHECK_INT_EQ(seen[f], counts[f]);
        CHECK_INT_EQ(kvf_strategy_count(f), counts[f]);
        CHECK(strcmp(kvf_strategy_name(f, counts[f]), "?") == 0);
        CHECK(strcmp(kvf_strategy_name(f, -1), "?") == 0);
        CHECK(strcmp(kvf_strategy_doc(f, counts[f]), "") == 0);
        CHECK_INT_EQ(kvf_strategy_flags(f, counts[f]), 0);
        CHECK_INT_EQ(kvf_strategy_first(f, 0), counts[f]);
    }
    CHECK_INT_EQ(kvf_strategy_count(KVF_FAMILY_COUNT), 0);
    CHECK_INT_EQ(kvf_strategy_count(-1), 0);
    CHECK(strcmp(kvf_strategy_name(KVF_FAMILY_COUNT, 0), "?") == 0);
    CHECK_INT_EQ(kvf_strategy_first(KVF_FAMILY_COUNT, ~0u), 0);
    CHECK_INT_EQ(kvf_dist_simple(KVF_DIST_COUNT), 0);
    CHECK(strcmp(kvf_table_name(KVF_TABLE_COUNT), "?") == 0);
}

/* A function field as written: a function of the file its prefix names, never left empty. */
static int names_function(const char *written, const char *prefix) {
    return strncmp(written, prefix, strlen(prefix)) == 0 && written[strlen(prefix)] != '\0';
}

/* Every line names its functions (in the file each prefix stands for: kvf__layout_ and
 * kvf__key_ gen_expand.c, kvf__pool_ cost.c, kvf__d1_ gen_draw1.c, kvf__d2_ gen_draw2.c),
 * no two lines share a layout, a fill or a key, and every logit pattern but the first does
 * something. */
static void test_every_line_has_its_functions(void) {
    static const char *const prefixes[KVF_FAMILY_COUNT][2] = {
        {"kvf__layout_", "kvf__pool_"}, {"kvf__d1_", "kvf__d2_"}, {"kvf__key_", ""}};
    for (int i = 0; i < NLINES; i++) {
        const def_line *l = &lines[i];
        const int is_logits = l->family == KVF_FAMILY_LOGITS;
        for (int j = 0; j < 2 && !is_logits; j++)
            if (!names_function(l->fn[j], prefixes[l->family][j]))
                CHECK_FAIL_AT("%s: field %d is \"%s\", not a %s... function", l->name, j + 3,
                              l->fn[j], prefixes[l->family][j]);
        if (is_logits) {
            const int has_key = strcmp(l->fn[0], "NULL") != 0;
            if (has_key && !names_function(l->fn[0], "kvf__key_"))
                CHECK_FAIL_AT("%s: key \"%s\" is neither NULL nor a kvf__key_ function", l->name,
                              l->fn[0]);
            CHECK(l->scale >= 0 && l->scale <= 127);
            /* The first pattern is the plain one; every other one changes the logits. */
            CHECK_INT_EQ(l->id == 0, !has_key && l->scale == 0);
        }
        /* The pool estimate may be shared; layouts, fills and keys are one per line. */
        for (int m = 0; m < i; m++)
            for (int j = 0; j < 2; j++) {
                if (lines[m].family != l->family || (l->family == KVF_FAMILY_TABLE && j == 1))
                    continue;
                if (strcmp(l->fn[j], "NULL") && l->fn[j][0] && !strcmp(lines[m].fn[j], l->fn[j]))
                    CHECK_FAIL_AT("%s and %s both name %s", lines[m].name, l->name, l->fn[j]);
            }
    }
}

/* The flags a family's readers act on are consistent: what each reader looks for is there,
 * once, and added lines go where they change no earlier draw. */
static void test_flags(void) {
    const unsigned family_flags[KVF_FAMILY_COUNT] = {
        KVF_STRATEGY_HIGH_IDS | KVF_STRATEGY_STANDIN,
        KVF_STRATEGY_STANDIN | KVF_STRATEGY_V_ONLY | KVF_STRATEGY_SPAN, KVF_STRATEGY_OVERFLOW};
    const unsigned anywhere = KVF_STRATEGY_LATE | KVF_STRATEGY_LATE_ONLY;
    int standins[KVF_FAMILY_COUNT] = {0}, late_only_seen = 0;
    for (int i = 0; i < NLINES; i++) {
        const def_line *l = &lines[i];
        if (l->flags & ~(family_flags[l->family] | anywhere))
            CHECK_FAIL_AT("%s carries flags 0x%x its family has no use for", l->name, l->flags);
        /* The first kind is what late draws replace, the minimizer and repairs go back to. */
        if (l->id == 0) CHECK_INT_EQ(l->flags, 0);
        if (l->flags & KVF_STRATEGY_STANDIN) {
            standins[l->family]++;
            CHECK(!(l->flags &
                    (KVF_STRATEGY_HIGH_IDS | KVF_STRATEGY_V_ONLY | KVF_STRATEGY_LATE_ONLY)));
        }
        /* Late draws follow the file's order: once a LATE_ONLY line, only LATE_ONLY lines. */
        if (late_only_seen && !(l->flags & KVF_STRATEGY_LATE_ONLY))
            CHECK_FAIL_AT("%s follows a LATE_ONLY line without being one", l->name);
        late_only_seen |= (l->flags & KVF_STRATEGY_LATE_ONLY) != 0;
    }
    for (int f = 0; f < KVF_FAMILY_COUNT; f++) {
        const int needs =
            kvf_strategy_first(f, KVF_STRATEGY_HIGH_IDS | KVF_STRATEGY_V_ONLY) < counts[f];
        CHECK_INT_EQ(standins[f], needs); /* one stand-in where a kind may be refused */
    }
    /* What the readers rely on today: high-ids falls back to scattered, special in q or k to
     * log-uniform, and overflow starts at beyond-f32, after every pattern but ascending. */
    CHECK_INT_EQ(kvf_strategy_first(KVF_FAMILY_TABLE, KVF_STRATEGY_STANDIN), KVF_TABLE_SCATTERED);
    CHECK_INT_EQ(kvf_strategy_first(KVF_FAMILY_DIST, KVF_STRATEGY_STANDIN), KVF_DIST_LOG_UNIFORM);
    CHECK_INT_EQ(kvf_strategy_first(KVF_FAMILY_LOGITS, KVF_STRATEGY_OVERFLOW),
                 KVF_LOGITS_BEYOND_F32);
    CHECK(kvf_strategy_flags(KVF_FAMILY_TABLE, KVF_TABLE_HIGH_IDS) & KVF_STRATEGY_HIGH_IDS);
    CHECK(kvf_strategy_flags(KVF_FAMILY_DIST, KVF_DIST_SPECIAL) & KVF_STRATEGY_V_ONLY);
    CHECK(kvf_strategy_flags(KVF_FAMILY_DIST, KVF_DIST_LOG_UNIFORM) & KVF_STRATEGY_SPAN);
    CHECK(kvf_strategy_flags(KVF_FAMILY_LOGITS, KVF_LOGITS_ASCENDING) & KVF_STRATEGY_LATE);
    /* The minimizer's ranks are 1..n, once each. */
    int ranks = 0;
    for (int k = 0; k < KVF_DIST_COUNT; k++)
        ranks += kvf_dist_simple(k) > 0;
    for (int r = 1; r <= ranks; r++) {
        int n = 0;
        for (int k = 0; k < KVF_DIST_COUNT; k++)
            n += kvf_dist_simple(k) == r;
        if (n != 1) CHECK_FAIL_AT("%d distributions have simple rank %d", n, r);
    }
}

/* ---- every strategy expands ------------------------------------------------------------------ */

/* A small spec: three sequences (one empty), 16-token pages, GQA group 2. */
static void small_spec(kvf_spec *s) {
    kvf_error err = {0};
    CHECK_OK(kvf_spec_preset(s, "seed-h20kv4", 5, &err), &err);
    kvf_recipe *rp = &s->recipe;
    rp->expansion = (uint8_t)g_expansion;
    rp->num_qo_heads = 4, rp->num_kv_heads = 2, rp->head_dim = 64, rp->page_size = 16;
    CHECK_OK(kvf_spec_set_batch(s, 3, &err), &err);
    kvf_recipe_set_seq_len(rp, 0, 40);
    kvf_recipe_set_seq_len(rp, 1, 0);
    kvf_recipe_set_seq_len(rp, 2, 17);
    rp->spare_pages = 2;
}

/* Builds s, or fails naming what. */
static int build(kvf_case *c, const kvf_spec *s, const char *what) {
    kvf_limits lim = limits();
    kvf_error err = {0};
    if (kvf_case_build(c, s, &lim, &err) == 0) return 0;
    CHECK_FAIL_AT("%s does not build under expansion %d: %s", what, g_expansion, err.msg);
    return -1;
}

/* Every table lays out ids inside its pool, and the cost model's pool estimate covers the pages
 * the generator writes. */
static void test_every_table_expands(void) {
    for (int t = 0; t < KVF_TABLE_COUNT; t++) {
        kvf_spec s;
        small_spec(&s);
        s.recipe.table = (uint8_t)t;
        kvf_case c;
        if (build(&c, &s, kvf_table_name(t)) == 0) {
            CHECK_INT_EQ(c.kv_indptr[c.batch_size], 5); /* 3 + 0 + 2 pages */
            for (int i = 0; i < 5; i++)
                CHECK(c.kv_indices[i] >= 0 && c.kv_indices[i] < c.num_pages);
            CHECK(kvf_spec_pool_elems(&s) >= c.num_resident_pages * kvf_case_page_elems(&c));
            kvf_case_free(&c);
        }
        kvf_spec_free(&s);
    }
}

/* Every distribution, for q, k and v at once, gives finite values where a sequence reads them,
 * but for the kinds random recipes keep out of q and k. */
static void test_every_distribution_expands(void) {
    for (int d = 0; d < KVF_DIST_COUNT; d++) {
        kvf_spec s;
        small_spec(&s);
        s.recipe.q = s.recipe.k = s.recipe.v = (kvf_dist){(uint8_t)d, -1, 3};
        kvf_case c;
        if (build(&c, &s, kvf_dist_name(d))) {
            kvf_spec_free(&s);
            continue;
        }
        int finite = 1;
        for (int64_t i = 0; i < kvf_case_q_elems(&c); i++)
            finite &= kvf_bf16_is_finite(c.q[i]);
        if (!(kvf_strategy_flags(KVF_FAMILY_DIST, d) & KVF_STRATEGY_V_ONLY)) CHECK(finite);
        kvf_case_free(&c);
        kvf_spec_free(&s);
    }
}

/* Every logit pattern but the first changes the case the first gives (k, or q and k). */
static void test_every_logit_pattern_expands(void) {
    kvf_spec s;
    small_spec(&s);
    kvf_case plain;
    if (build(&plain, &s, "natural logits")) {
        kvf_spec_free(&s);
        return;
    }
    for (int p = 1; p < KVF_LOGITS_COUNT; p++) {
        s.recipe.logits = (uint8_t)p;
        kvf_case c;
        if (build(&c, &s, kvf_logits_name(p))) continue;
        if (cases_equal(&c, &plain))
            CHECK_FAIL_AT("logit pattern %s leaves the case as natural logits do",
                          kvf_logits_name(p));
        kvf_case_free(&c);
    }
    kvf_case_free(&plain);
    kvf_spec_free(&s);
}

BOTH_EXPANSIONS(test_every_table_expands)
BOTH_EXPANSIONS(test_every_distribution_expands)
BOTH_EXPANSIONS(test_every_logit_pattern_expands)

/* ---- docs/case-format.md, "Strategies" ------------------------------------------------------ */

static const char *const family_words[KVF_FAMILY_COUNT] = {"page table", "distribution",
                                                           "logit pattern"};

/* The cells of a Markdown row "| a | b | ... |", trimmed, into cell[] (at most `max`); returns
 * how many there are. */
static int row_cells(char *row, char **cell, int max) {
    int n = 0;
    char *p = strchr(row, '|');
    while (p) {
        char *next = strchr(p + 1, '|');
        if (!next) break;
        char *a = p + 1, *b = next;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        *b = '\0';
        if (n < max) cell[n] = a;
        n++;
        p = next;
    }
    return n;
}

/* Row i of the table (0 the first under the header) against line i of the def file. */
static void check_doc_row(int i, char *text) {
    char *cell[4];
    const int n = row_cells(text, cell, 4);
    if (n != 4) {
        CHECK_FAIL_AT("Strategies row %d has %d cells, not 4 (family, code, name, description)",
                      i + 1, n);
        return;
    }
    if (i >= NLINES) {
        CHECK_FAIL_AT("Strategies row %d (%s) is not in strategies.def", i + 1, cell[2]);
        return;
    }
    const def_line *l = &lines[i];
    char code[16], name[128];
    snprintf(code, sizeof code, "%d", l->id);
    snprintf(name, sizeof name, "`%s`", l->name);
    const char *want[4] = {family_words[l->family], code, name, l->doc};
    static const char *const what[4] = {"family", "code", "name", "description"};
    for (int k = 0; k < 4; k++)
        if (strcmp(cell[k], want[k]) != 0)
            CHECK_FAIL_AT("Strategies row %d, %s: the document says \"%s\", strategies.def \"%s\"",
                          i + 1, what[k], cell[k], want[k]);
}

/* docs/case-format.md, whole; NULL (and a failed check) when it cannot be read. */
static char *read_case_format(void) {
    const char *src = getenv("KVF_SOURCE_DIR");
    char path[4096], *text = NULL;
    size_t size = 0;
    kvf_error err = {0};
    snprintf(path, sizeof path, "%s/docs/case-format.md", src ? src : ".");
    int rc = kvf_read_file_max(path, KVF_READ_FILE_DEFAULT_MAX, &text, &size, &err);
    if (rc) CHECK_FAIL_AT("%s", err.msg);
    return rc ? NULL : text;
}

static void test_docs_table_matches_def(void) {
    char *text = read_case_format();
    if (!text) return;
    char *sec = strstr(text, "\n## Strategies\n");
    CHECK(sec != NULL);
    char *end = sec ? strstr(sec + 1, "\n## ") : NULL;
    if (end) *end = '\0'; /* the section ends at the next one */
    int rows = 0, table_lines = 0;
    for (char *line = sec ? strtok(sec + 1, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (line[0] != '|') continue;
        /* The header and the line under it, then one row per line of the def file. */
        if (table_lines++ >= 2) check_doc_row(rows++, line);
    }
    if (rows != NLINES)
        CHECK_FAIL_AT("docs/case-format.md lists %d strategies, strategies.def %d", rows, NLINES);
    free(text);
}

static const check_test tests[] = {
    {"codes_and_names", test_codes_and_names},
    {"parse_round_trip", test_parse_round_trip},
    {"accessors_follow_the_def", test_accessors_follow_the_def},
    {"every_line_has_its_functions", test_every_line_has_its_functions},
    {"flags", test_flags},
    {"every_table_expands_e1", test_every_table_expands_e1},
    {"every_table_expands_e2", test_every_table_expands_e2},
    {"every_distribution_expands_e1", test_every_distribution_expands_e1},
    {"every_distribution_expands_e2", test_every_distribution_expands_e2},
    {"every_logit_pattern_expands_e1", test_every_logit_pattern_expands_e1},
    {"every_logit_pattern_expands_e2", test_every_logit_pattern_expands_e2},
    {"docs_table_matches_def", test_docs_table_matches_def},
    {NULL, NULL},
};

CHECK_MAIN(tests)
