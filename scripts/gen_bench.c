/* Generator benchmark (docs/performance.md, "Expansion 2"): builds the campaign's fresh cases
 * as the campaign does (kvf_spec_random under the campaign's default limits, kvf_spec_fit,
 * kvf_spec_repair, which builds the case) and frees each, or a preset at seeds 1, 2, ..., and
 * prints the thread CPU time. Not part of the build; compile it against a build tree:
 *
 *   B=build; I="-Icore/include -Ifuzz/include -Ikernels/include -Ioracle/include -Iinclude"
 *   cc -O2 -std=c11 -D_DEFAULT_SOURCE -DHAVE_EXPANSION $I scripts/gen_bench.c -o gen_bench \
 *      $B/fuzz/libkvfuzz_fuzz.a $B/kernels/libkvfuzz_kernels.a $B/oracle/libkvfuzz_oracle.a \
 *      $B/core/libkvfuzz_core.a -lmpfr -lgmp -ljansson -lm -lpthread -ldl
 *
 * (without -DHAVE_EXPANSION for a tree older than expansion 2).
 * Usage: gen_bench campaign|PRESET COUNT [EXPANSION] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvfuzz/campaign.h"
#include "kvfuzz/mutate.h"
#include "kvfuzz/prng.h"
#include "kvfuzz/spec.h"

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "campaign";
    long n = argc > 2 ? atol(argv[2]) : 2000;
    int expansion = argc > 3 ? atoi(argv[3]) : 0;
    kvf_campaign_opts co;
    kvf_campaign_opts_default(&co);
    kvf_random_opts ro;
    kvf_mutate_random_opts(&ro, &co.mutate);
#ifdef HAVE_EXPANSION
    if (expansion) ro.expansion = expansion;
#endif
    kvf_prng rng;
    kvf_prng_seed(&rng, 1);
    long built = 0;
    long long tokens = 0;
    double t0 = thread_cpu_s();
    for (long i = 0; i < n; i++) {
        kvf_spec sp;
        kvf_case c;
        kvf_error err = {0};
        if (strcmp(mode, "campaign") == 0) {
            if (kvf_spec_random(&sp, kvf_prng_next(&rng), &ro, NULL)) continue;
            kvf_spec_fit(&sp, &co.mutate);
            int rc = kvf_spec_repair(&sp, &co.case_limits, co.mutate.allow_nonfinite, &c, NULL);
            kvf_spec_free(&sp);
            if (rc) continue;
        } else {
            if (kvf_spec_preset(&sp, mode, 1 + (uint64_t)i, &err)) {
                fprintf(stderr, "gen_bench: %s\n", err.msg);
                return 2;
            }
#ifdef HAVE_EXPANSION
            if (expansion) sp.recipe.expansion = (uint8_t)expansion;
#endif
            kvf_limits lim;
            kvf_limits_default(&lim);
            int rc = kvf_case_build(&c, &sp, &lim, &err);
            kvf_spec_free(&sp);
            if (rc) {
                fprintf(stderr, "gen_bench: %s\n", err.msg);
                return 2;
            }
        }
        tokens += kvf_case_total_tokens(&c);
        kvf_case_free(&c);
        built++;
    }
    double s = thread_cpu_s() - t0;
    printf("%s expansion %d: %ld cases, %lld tokens, %.3f s thread CPU, %.0f cases/s\n", mode,
           expansion, built, tokens, s, (double)built / s);
    return 0;
}
