/* A minimal test runner: tests are named functions listed in one table per executable; the
 * runner runs all of them, or only those named on the command line, and exits nonzero if any
 * check failed. Checks print both sides. A test that needs something absent (a GPU) calls
 * CHECK_SKIP with the reason; ctest sees exit code 77 when every selected test skipped. */
#ifndef KVFUZZ_TESTS_CHECK_H
#define KVFUZZ_TESTS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_test {
    const char *name;
    void (*fn)(void);
} check_test;

extern int check_failures;
extern int check_skipped;

#define CHECK_FAIL_AT(...)                                                                         \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        check_failures++;                                                                          \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) CHECK_FAIL_AT("check failed: %s", #cond);                                     \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                                         \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_)                                                                  \
            CHECK_FAIL_AT("%s == %s: %lld != %lld", #a, #b, check_a_, check_b_);                   \
    } while (0)

#define CHECK_HEX_EQ(a, b)                                                                         \
    do {                                                                                           \
        unsigned long long check_a_ = (unsigned long long)(a), check_b_ = (unsigned long long)(b); \
        if (check_a_ != check_b_)                                                                  \
            CHECK_FAIL_AT("%s == %s: 0x%llx != 0x%llx", #a, #b, check_a_, check_b_);               \
    } while (0)

#define CHECK_DBL_EQ(a, b)                                                                         \
    do {                                                                                           \
        double check_a_ = (double)(a), check_b_ = (double)(b);                                     \
        if (!(check_a_ == check_b_) && !(isnan(check_a_) && isnan(check_b_)))                      \
            CHECK_FAIL_AT("%s == %s: %.17g (%a) != %.17g (%a)", #a, #b, check_a_, check_a_,        \
                          check_b_, check_b_);                                                     \
    } while (0)

#define CHECK_OK(expr, errp)                                                                       \
    do {                                                                                           \
        int check_rc_ = (expr);                                                                    \
        if (check_rc_ != 0) CHECK_FAIL_AT("%s returned %d: %s", #expr, check_rc_, (errp)->msg);    \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *check_h_ = (hay), *check_n_ = (needle);                                        \
        if (!check_h_ || !strstr(check_h_, check_n_))                                              \
            CHECK_FAIL_AT("\"%s\" does not contain \"%s\"", check_h_ ? check_h_ : "(null)",        \
                          check_n_);                                                               \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                         \
    do {                                                                                           \
        const char *check_x_ = (a), *check_y_ = (b);                                               \
        if (!check_x_ || strcmp(check_x_, check_y_) != 0)                                          \
            CHECK_FAIL_AT("%s == \"%s\": \"%s\"", #a, check_y_, check_x_ ? check_x_ : "(null)");   \
    } while (0)

#define CHECK_SKIP(...)                                                                            \
    do {                                                                                           \
        printf("SKIP: ");                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        check_skipped++;                                                                           \
        return;                                                                                    \
    } while (0)

/* Defines main(): `tests` is a NULL-terminated table. */
#define CHECK_MAIN(tests)                                                                          \
    int check_failures = 0;                                                                        \
    int check_skipped = 0;                                                                         \
    int main(int argc, char **argv) {                                                              \
        int ran = 0;                                                                               \
        for (const check_test *t = (tests); t->name; t++) {                                        \
            int selected = argc < 2;                                                               \
            for (int i = 1; i < argc; i++)                                                         \
                if (strcmp(argv[i], t->name) == 0) selected = 1;                                   \
            if (!selected) continue;                                                               \
            int before = check_failures;                                                           \
            printf("== %s\n", t->name);                                                            \
            fflush(stdout);                                                                        \
            t->fn();                                                                               \
            printf("%s %s\n", check_failures == before ? "ok  " : "FAIL", t->name);                \
            fflush(stdout);                                                                        \
            ran++;                                                                                 \
        }                                                                                          \
        if (ran == 0) {                                                                            \
            fprintf(stderr, "no test matched\n");                                                  \
            return 2;                                                                              \
        }                                                                                          \
        if (check_failures) {                                                                      \
            printf("%d check(s) failed\n", check_failures);                                        \
            return 1;                                                                              \
        }                                                                                          \
        return (check_skipped == ran) ? 77 : 0;                                                    \
    }

#endif
