/* The mutant benchmark's text table (kvfuzz/mutant_table.h) line for line on results built by
 * hand, and which controls a --control value keeps (kvf_mutant_keep_controls). */
#include <stdio.h>

#include "check.h"
#include "kvfuzz/mutant_table.h"

/* What a table writer wrote, as one string (the caller frees it). */
typedef struct captured {
    char *text;
    size_t size;
    FILE *f;
} captured;

static FILE *capture(captured *c) {
    c->text = NULL;
    c->f = open_memstream(&c->text, &c->size);
    return c->f;
}

static char *captured_text(captured *c) {
    fclose(c->f);
    return c->text;
}

static const kvf_kernel mutant_k = {.name = "cpu-splitkv/mut=split-lse", .models = "B06"};
static const kvf_kernel control_k = {.name = "cpu-ref"};

static kvf_mutant_result caught_mutant(void) {
    kvf_mutant_result m;
    memset(&m, 0, sizeof m);
    m.kernel = &mutant_k;
    m.kvfuzz = (kvf_mutant_detection){1, 0.05, 6, "lse-tolerance", {0}};
    m.per_rule[0] = m.kvfuzz;
    m.per_rule[1] = (kvf_mutant_detection){1, 1.5, 40, "o-tolerance", {0}};
    m.fib_bench = 1;
    return m;
}

static void test_mutant_row(void) {
    kvf_mutant_result m = caught_mutant();
    captured c;
    kvf_mutant_table_header(capture(&c));
    kvf_mutant_table_mutant(c.f, &m, "unused for f32");
    m.kvfuzz = (kvf_mutant_detection){0, 60.0, 1234, "", {0}};
    m.per_rule[0] = m.per_rule[1] = m.kvfuzz;
    m.fib_bench = 0, m.fi_tests = 1;
    kvf_mutant_table_mutant(c.f, &m, NULL);
    char *t = captured_text(&c);
    CHECK_STR_EQ(t, "mutant                                       class     kvfuzz     seconds   "
                    "cases finding      strict    fa        fib-bench fi-tests \n"
                    "cpu-splitkv/mut=split-lse                    B06       caught        0.05   "
                    "    6 lse-tolerance 0.05s     1.50s     caught    missed   \n"
                    "cpu-splitkv/mut=split-lse                    B06       SURVIVED     60.00   "
                    " 1234 -            missed    missed    missed    caught   \n");
    free(t);
}

/* A mutant under a model of its own: a second line with the caller's words for the model (or
 * its name) and the finding's attribution. */
static void test_mutant_model_line(void) {
    kvf_mutant_result m = caught_mutant();
    kvf_error err = {0};
    CHECK_OK(kvf_precision_parse(&m.model, "bf16-p", &err), &err);
    m.kvfuzz.attribution.kind = KVF_ATTRIB_DEFECT;
    snprintf(m.kvfuzz.attribution.text, sizeof m.kvfuzz.attribution.text,
             "fails bf16-p; no precision model explains it");
    captured c;
    kvf_mutant_table_mutant(capture(&c), &m, "bf16-p (declared by the kernel)");
    m.kvfuzz.attribution.kind = KVF_ATTRIB_NONE;
    kvf_mutant_table_mutant(c.f, &m, NULL);
    char *t = captured_text(&c);
    CHECK_STR_CONTAINS(t, "\n    precision model bf16-p (declared by the kernel); its finding "
                          "fails bf16-p; no precision model explains it\n");
    CHECK_STR_CONTAINS(t, "\n    precision model bf16-p\n");
    free(t);
}

static void test_controls(void) {
    kvf_mutant_result q;
    memset(&q, 0, sizeof q);
    q.kernel = &control_k;
    q.kvfuzz = (kvf_mutant_detection){0, 15.04, 900, "", {0}};
    captured c;
    kvf_mutant_table_controls(capture(&c), 15);
    kvf_mutant_table_control(c.f, &q);
    q.kvfuzz = (kvf_mutant_detection){1, 2.0, 17, "o-tolerance", {0}};
    kvf_error err = {0};
    CHECK_OK(kvf_precision_parse(&q.model, "bf16-p", &err), &err);
    kvf_mutant_table_control(c.f, &q);
    char *t = captured_text(&c);
    CHECK_STR_EQ(t, "\ncontrols (production kernels, 15 s of generated cases each):\n"
                    "  cpu-ref              no finding after 900 cases (15.0 s)\n"
                    "  cpu-ref              o-tolerance after 17 cases (2.0 s), precision model "
                    "bf16-p\n");
    free(t);
}

/* The seed table lists the two-character prefixes of the seed files each rule fails; the
 * counts follow the bench's totals. */
static void test_summary(void) {
    kvf_mutant_bench b;
    memset(&b, 0, sizeof b);
    b.ncampaign = kvf_rule_default_set(b.rules, KVF_DEFAULT_RULES);
    kvf_rule_parse(&b.rules[b.ncampaign], "fib", NULL);
    b.nrules = b.ncampaign + 1;
    kvf_mutant_result m = caught_mutant();
    char *names[2] = {"00-seed-h20kv4.kvfz", "03-tail.kvfz"};
    int fails[6] = {0, 1, 1, 1, 0, 0}; /* strict: 03; fa: 00, 03; fib: none */
    m.seed_fails = fails;
    b.seeds.count = 2, b.seeds.names = names;
    b.mutants = &m, b.nmutants = 1;
    b.rule_kills[0] = 1, b.rule_kills[1] = 1;
    b.seed_any[0] = b.seed_any[1] = 1, b.seed_first[1] = 1;
    b.missed_fi_tests = 1;
    captured c;
    kvf_mutant_table_summary(capture(&c), &b, "corpus/seeds");
    b.seeds.count = 0;
    b.survivors = 1, b.noisy_controls = 2;
    kvf_mutant_table_summary(c.f, &b, "corpus/seeds");
    char *t = captured_text(&c);
    CHECK_STR_EQ(
        t, "\nseed cases failed, per rule (corpus/seeds; file-name prefixes; - none):\n"
           "mutant                                       strict                       fa        "
           "                   fib                         \n"
           "cpu-splitkv/mut=split-lse                    03                           00,03     "
           "                   -                           \n"
           "\nper rule, of 1 mutants: strict killed by the campaign 1, on some seed case 1, on "
           "00-seed-h20kv4.kvfz 0; fa killed by the campaign 1, on some seed case 1, on "
           "00-seed-h20kv4.kvfz 1; fib on some seed case 0, on 00-seed-h20kv4.kvfz 0;\n"
           "kvfuzz killed 1 of 1 mutants; FlashInfer-Bench-style testing missed 0, "
           "FlashInfer-test-style testing missed 1; controls with findings: 0\n"
           "\nper rule, of 1 mutants: strict killed by the campaign 1, fa killed by the campaign "
           "1, fib\n"
           "kvfuzz killed 0 of 1 mutants; FlashInfer-Bench-style testing missed 0, "
           "FlashInfer-test-style testing missed 1; controls with findings: 2\n");
    free(t);
}

/* Of a plugin's kernels (several added at once) only the references stay; a kernel named alone
 * stays whatever its role. */
static void test_keep_controls(void) {
    static const kvf_kernel ref1 = {.name = "p.so:ref1", .role = KVF_PLUGIN_ROLE_REFERENCE},
                            ut = {.name = "p.so:ut", .role = KVF_PLUGIN_ROLE_UNDER_TEST},
                            ref2 = {.name = "p.so:ref2", .role = KVF_PLUGIN_ROLE_REFERENCE};
    kvf_kernel_list l = {0};
    CHECK_OK(kvf_kernel_list_push(&l, &ut, NULL), &(kvf_error){0});
    CHECK_INT_EQ(kvf_mutant_keep_controls(&l, 0), 1);
    CHECK_INT_EQ(l.count, 1);
    kvf_kernel_list_push(&l, &ref1, NULL);
    kvf_kernel_list_push(&l, &ut, NULL);
    kvf_kernel_list_push(&l, &ref2, NULL);
    CHECK_INT_EQ(kvf_mutant_keep_controls(&l, 1), 2);
    CHECK_INT_EQ(l.count, 3);
    CHECK(l.items[0] == &ut && l.items[1] == &ref1 && l.items[2] == &ref2);
    kvf_kernel_list_push(&l, &ut, NULL);
    kvf_kernel_list_push(&l, &ut, NULL);
    CHECK_INT_EQ(kvf_mutant_keep_controls(&l, 3), 0);
    CHECK_INT_EQ(l.count, 3);
    kvf_kernel_list_free(&l);
}

static const check_test tests[] = {
    {"mutant_row", test_mutant_row},       {"mutant_model_line", test_mutant_model_line},
    {"controls", test_controls},           {"summary", test_summary},
    {"keep_controls", test_keep_controls}, {NULL, NULL},
};

CHECK_MAIN(tests)
