/* Unit tests for the finding store (fuzz/trial/finding_store.c): signatures and atomic
 * de-duplicated saving of findings, and stale temporary files removed. */
#include "fuzz_fixtures.h"

static void signatures_and_saving(void) {
    char dir[512];
    make_tmp(dir, sizeof dir);
    kvf_outcome crash, hang, crash2;
    kvf_outcome_from_run(&crash, KVF_RUN_CRASH, "killed");
    crash.signal = 11;
    crash2 = crash;
    crash2.signal = 6;
    kvf_outcome_from_run(&hang, KVF_RUN_HANG, "late");
    char t1[256], t2[256];
    uint64_t h1 = kvf_outcome_signature(&crash, "k", t1, sizeof t1);
    CHECK(h1 == kvf_outcome_signature(&crash, "k", NULL, 0));
    CHECK(h1 != kvf_outcome_signature(&crash2, "k", t2, sizeof t2));
    CHECK(h1 != kvf_outcome_signature(&hang, "k", NULL, 0));
    CHECK(h1 != kvf_outcome_signature(&crash, "other", NULL, 0));
    CHECK_STR_CONTAINS(t1, "crash|k|signal11");

    kvf_spec s = small_spec(1), s2 = small_spec(2);
    int is_new = -1;
    char path[4300];
    json_t *extra = json_pack("{s:i}", "x", 1);
    hang.deadline = INFINITY; /* a number JSON cannot spell */
    kvf_error err = {0};
    CHECK_OK(kvf_finding_save(dir, &crash, "k", &s, NULL, extra, &is_new, path, sizeof path, &err),
             &err);
    json_decref(extra);
    CHECK_INT_EQ(is_new, 1);
    CHECK_STR_CONTAINS(path, "/crash-");
    {
        /* The report is JSON (jansson reads it back) with the extra members. */
        char jpath[4300];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(path) - 5), path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK_INT_EQ(json_integer_value(json_object_get(rep, "x")), 1);
        CHECK(json_is_null(json_object_get(rep, "fib_catches"))); /* a crash: not judged */
        CHECK_INT_EQ(json_integer_value(json_object_get(rep, "signal")), 11);
        json_decref(rep);
    }
    /* Same signature, different case: kept out, the first case and its report stay. */
    CHECK_OK(kvf_finding_save(dir, &crash, "k", &s2, NULL, NULL, &is_new, NULL, 0, &err), &err);
    CHECK_INT_EQ(is_new, 0);
    char hang_path[4300];
    CHECK_OK(kvf_finding_save(dir, &hang, "k", &s2, NULL, NULL, &is_new, hang_path,
                              sizeof hang_path, &err),
             &err);
    CHECK_INT_EQ(is_new, 1);
    {
        char jpath[4300];
        snprintf(jpath, sizeof jpath, "%.*s.json", (int)(strlen(hang_path) - 5), hang_path);
        json_error_t je;
        json_t *rep = json_load_file(jpath, 0, &je);
        CHECK(rep != NULL);
        CHECK_STR_CONTAINS(json_string_value(json_object_get(rep, "deadline_s")), "Infinity");
        json_decref(rep);
    }
    int hidden;
    CHECK_INT_EQ(count_files(dir, "crash-", &hidden), 2);
    CHECK_INT_EQ(count_files(dir, "hang-", NULL), 2);
    CHECK_INT_EQ(hidden, 0); /* no temporary left behind */
    kvf_spec back;
    kvf_limits cl = case_limits();
    CHECK_OK(kvf_case_load(path, &back, NULL, &cl, &err), &err);
    CHECK(kvf_spec_equal(&back, &s));
    kvf_spec_free(&back);
    kvf_spec_free(&s);
    kvf_spec_free(&s2);
    rm_tree(dir);
}

/* Temporary files of an interrupted write are removed once old enough, and nothing else. */
static void stale_temps_removed(void) {
    char dir[512];
    make_tmp(dir, sizeof dir);
    const char *names[] = {".stats-x.json.tmp.AbC123",
                           ".kvfuzz-write-check.q1W2e3",
                           ".stats-x.json.tmp.ZZZ999",
                           "keep.kvfz",
                           ".hidden",
                           "a.tmp.123456",
                           ".crash-0123456789ab.tmp.4242.7"};
    for (int i = 0; i < 7; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) fclose(f);
        if (i != 2) { /* all but one are two hours old */
            struct timespec times[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
            utimensat(AT_FDCWD, path, times, 0);
        }
    }
    CHECK_INT_EQ(kvf_fuzz_remove_stale_temps(dir, 60), 3);
    int hidden = 0;
    CHECK_INT_EQ(count_files(dir, NULL, &hidden), 2); /* keep.kvfz, a.tmp.123456 */
    CHECK_INT_EQ(hidden, 2);                          /* the young temp, .hidden */
    rm_tree(dir);
}

static const check_test tests[] = {
    {"signatures_and_saving", signatures_and_saving},
    {"stale_temps_removed", stale_temps_removed},
    {NULL, NULL},
};

CHECK_MAIN(tests)
