/* The mutant benchmark's text table (kvfuzz/mutant_table.h). */
#include "kvfuzz/mutant_table.h"

void kvf_mutant_table_header(FILE *f) {
    fprintf(f, "%-44s %-9s %-8s %9s %7s %-12s %-9s %-9s %-9s %-9s\n", "mutant", "class", "kvfuzz",
            "seconds", "cases", "finding", "strict", "fa", "fib-bench", "fi-tests");
}

void kvf_mutant_table_mutant(FILE *f, const kvf_mutant_result *m, const char *model_text) {
    const kvf_mutant_detection *a = &m->kvfuzz;
    char sr[2][16];
    for (int r = 0; r < 2; r++) {
        if (r < KVF_DEFAULT_RULES && m->per_rule[r].caught)
            snprintf(sr[r], sizeof sr[r], "%.2fs", m->per_rule[r].seconds);
        else
            snprintf(sr[r], sizeof sr[r], "missed");
    }
    fprintf(f, "%-44s %-9s %-8s %9.2f %7ld %-12s %-9s %-9s %-9s %-9s\n", m->kernel->name,
            m->kernel->models, a->caught ? "caught" : "SURVIVED", a->seconds, a->cases,
            a->caught ? a->finding : "-", sr[0], sr[1], m->fib_bench ? "caught" : "missed",
            m->fi_tests ? "caught" : "missed");
    /* A mutant judged under a model of its own says so, and what its finding is: a defect, or
     * precision below the model it declares. */
    if (kvf_precision_is_f32(&m->model)) return;
    char name[KVF_PRECISION_NAME_MAX];
    kvf_precision_name(&m->model, name, sizeof name);
    fprintf(f, "    precision model %s", model_text ? model_text : name);
    if (a->attribution.kind != KVF_ATTRIB_NONE) fprintf(f, "; its finding %s", a->attribution.text);
    fprintf(f, "\n");
}

void kvf_mutant_table_controls(FILE *f, double controls_budget) {
    fprintf(f, "\ncontrols (production kernels, %g s of generated cases each):\n", controls_budget);
}

void kvf_mutant_table_control(FILE *f, const kvf_mutant_result *c) {
    const kvf_mutant_detection *a = &c->kvfuzz;
    fprintf(f, "  %-20s %s after %ld cases (%.1f s)", c->kernel->name,
            a->caught ? a->finding : "no finding", a->cases, a->seconds);
    if (!kvf_precision_is_f32(&c->model)) {
        char name[KVF_PRECISION_NAME_MAX];
        kvf_precision_name(&c->model, name, sizeof name);
        fprintf(f, ", precision model %s", name);
    }
    if (a->attribution.kind != KVF_ATTRIB_NONE) fprintf(f, "; %s", a->attribution.text);
    fprintf(f, "\n");
}

/* The seed table: per mutant and rule, the seed cases it fails. */
static void seed_table(FILE *f, const kvf_mutant_bench *b, const char *seeds_dir) {
    fprintf(f, "\nseed cases failed, per rule (%s; file-name prefixes; - none):\n", seeds_dir);
    fprintf(f, "%-44s", "mutant");
    for (int r = 0; r < b->nrules; r++)
        fprintf(f, " %-28s", b->rules[r].name);
    fprintf(f, "\n");
    for (size_t m = 0; m < b->nmutants; m++) {
        fprintf(f, "%-44s", b->mutants[m].kernel->name);
        for (int r = 0; r < b->nrules; r++) {
            char buf[160];
            kvf_mutant_seed_list(b, &b->mutants[m], r, buf, sizeof buf);
            fprintf(f, " %-28s", buf);
        }
        fprintf(f, "\n");
    }
}

void kvf_mutant_table_summary(FILE *f, const kvf_mutant_bench *b, const char *seeds_dir) {
    if (b->seeds.count) seed_table(f, b, seeds_dir);
    int total = (int)b->nmutants;
    fprintf(f, "\nper rule, of %d mutants:", total);
    for (int r = 0; r < b->nrules; r++) {
        fprintf(f, " %s", b->rules[r].name);
        if (r < b->ncampaign) fprintf(f, " killed by the campaign %d,", b->rule_kills[r]);
        if (b->seeds.count)
            fprintf(f, " on some seed case %d, on %s %d;", b->seed_any[r], b->seeds.names[0],
                    b->seed_first[r]);
    }
    fprintf(f,
            "\nkvfuzz killed %d of %d mutants; FlashInfer-Bench-style testing missed %d, "
            "FlashInfer-test-style testing missed %d; controls with findings: %d\n",
            total - b->survivors, total, b->missed_fib_bench, b->missed_fi_tests,
            b->noisy_controls);
}
