/* Unit tests of the stats file (reports/src/stats_write.c, stats_read.c): the round trip, the
 * embedded case bytes (a case file under its hash), malformed input named in one sentence, atomic
 * replacement under a concurrent reader, write errors and the flush interval of kvf_stats_tick. */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "reports_fixtures.h"

static void expect_format_error(const char *name, const char *text, const char *needle) {
    char path[512];
    tmp_path(path, sizeof path, name);
    write_text(path, text);
    kvf_stats *s = (kvf_stats *)1;
    kvf_error err = {0};
    CHECK_INT_EQ(kvf_stats_read(&s, path, &err), KVF_EFORMAT);
    CHECK(s == NULL);
    CHECK_STR_CONTAINS(err.msg, "malformed stats file");
    CHECK_STR_CONTAINS(err.msg, name);
    CHECK_STR_CONTAINS(err.msg, needle);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_roundtrip_and_malformed(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *s = stats_new(5);
    judged_observe(s, "k", &J[0]);
    char path[512];
    tmp_path(path, sizeof path, "roundtrip.json");
    CHECK_OK(kvf_stats_write(s, path, &err), &err);
    kvf_stats *back = NULL;
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    CHECK(back && kvf_stats_equal(s, back));
    /* The embedded case is the case's bytes: writing back gives the same file content. */
    char path2[512];
    tmp_path(path2, sizeof path2, "roundtrip2.json");
    CHECK_OK(kvf_stats_write(back, path2, &err), &err);
    char *t1 = NULL, *t2 = NULL;
    size_t n1 = 0, n2 = 0;
    if (kvf_read_file(path, &t1, &n1) != 0 || kvf_read_file(path2, &t2, &n2) != 0) {
        CHECK_FAIL_AT("cannot read back %s or %s", path, path2);
        return;
    }
    CHECK(n1 == n2 && memcmp(t1, t2, n1) == 0);
    char hex[2 * KVF_STATS_EMBED_MAX + 1];
    for (size_t i = 0; i < J[0].kvfz_size; i++)
        sprintf(hex + 2 * i, "%02x", J[0].kvfz[i]);
    CHECK_STR_CONTAINS(t1, hex);
    free(t1);
    free(t2);
    kvf_stats_free(back);
    kvf_stats_free(s);

    /* Missing file: EIO naming the path. */
    tmp_path(path, sizeof path, "does-not-exist.json");
    CHECK_INT_EQ(kvf_stats_read(&back, path, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "cannot read");
    CHECK_STR_CONTAINS(err.msg, "does-not-exist.json");

    expect_format_error("m-empty.json", "", "invalid JSON");
    expect_format_error("m-trunc.json", "{\"format\": \"kvfuzz-stats\", \"version\": 1,",
                        "invalid JSON");
    expect_format_error("m-array.json", "[1, 2]", "top level");
    expect_format_error("m-format.json", "{\"format\": \"other\"}", "format");
    expect_format_error("m-version.json", "{\"format\": \"kvfuzz-stats\", \"version\": 3}",
                        "version 3");
    expect_format_error("m-version1.json", "{\"format\": \"kvfuzz-stats\", \"version\": 1}",
                        "version 1");
    const char *head = "{\"format\": \"kvfuzz-stats\", \"version\": 2, \"buckets_per_octave\": 4, "
                       "\"bits_scale\": 1024, \"worst_n\": 2, \"require_overflow\": false, "
                       "\"kernels\": [], \"cases\": [], ";
    const char *hist_ok = "{\"total\": 1, \"zero\": 1, \"inf\": 0, \"nan\": 0, \"buckets\": []}";
    char buf[4096];
    /* A well-formed minimal file first, then one defect at a time. */
    snprintf(buf, sizeof buf,
             "%s\"groups\": [{\"kernel\": \"k\", \"rule\": \"strict\", \"cases\": 1, \"passed\": "
             "1, \"findings\": {\"nonfinite\": 0, \"o-tolerance\": 0, \"lse-tolerance\": 0, "
             "\"overflow\": 0, \"kernel-error\": 0, \"crash\": 0, \"hang\": 0, "
             "\"nondeterminism\": 0}, \"o\": %s, \"lse\": %s}]}",
             head, "OUT", "OUT");
    char out_ok[2048];
    snprintf(out_ok, sizeof out_ok,
             "{\"elements\": 1, \"violations\": 0, \"nonfinite\": 0, \"max_abs\": 0, "
             "\"max_rel\": 0, \"max_ulps\": 0, \"max_margin\": 0, \"max_excess_margin\": 0, "
             "\"hist\": {\"abs\": %s, "
             "\"rel\": %s, \"ulp\": %s, \"margin\": %s}, \"abs_vs_exact\": [[\"zero\", 0, 1]], "
             "\"by_head\": [[0, 1, 0, 0, 1, 0, 0, 0, 0]], \"by_dim\": [], \"by_seqlen\": [], "
             "\"by_slot\": [], \"worst\": []}",
             hist_ok, hist_ok, hist_ok, hist_ok);
    const char *hist_none = "{\"total\": 0, \"zero\": 0, \"inf\": 0, \"nan\": 0, \"buckets\": []}";
    char out_none[2048];
    snprintf(out_none, sizeof out_none,
             "{\"elements\": 0, \"violations\": 0, \"nonfinite\": 0, \"max_abs\": 0, "
             "\"max_rel\": 0, \"max_ulps\": 0, \"max_margin\": \"NaN\", "
             "\"max_excess_margin\": \"-Infinity\", \"hist\": {\"abs\": %s, "
             "\"rel\": %s, \"ulp\": %s, \"margin\": %s}, \"abs_vs_exact\": [], "
             "\"by_head\": [], \"by_dim\": [], \"by_seqlen\": [], \"by_slot\": [], "
             "\"worst\": []}",
             hist_none, hist_none, hist_none, hist_none);
    char good[12288];
    snprintf(good, sizeof good,
             "%s\"groups\": [{\"kernel\": \"k\", \"rule\": \"strict\", \"cases\": 1, \"passed\": "
             "1, \"out_of_model\": 0, \"rule_rejects_rounded\": 0, "
             "\"findings\": {\"nonfinite\": 0, \"o-tolerance\": 0, \"lse-tolerance\": 0, "
             "\"overflow\": 0, \"kernel-error\": 0, \"crash\": 0, \"hang\": 0, "
             "\"nondeterminism\": 0}, \"o\": %s, \"lse\": %s, "
             "\"out_of_model_rows\": {\"o\": %s, \"lse\": %s}}]}",
             head, out_ok, out_ok, out_none, out_none);
    tmp_path(path, sizeof path, "m-good.json");
    write_text(path, good);
    CHECK_OK(kvf_stats_read(&back, path, &err), &err);
    kvf_stats_free(back);
    /* Each defect: replace one fragment of the good file. */
    struct {
        const char *name, *from, *to, *needle;
    } defects[] = {
        {"m-total.json", "{\"total\": 1, \"zero\": 1", "{\"total\": 2, \"zero\": 1", "add up"},
        {"m-bucket.json", "\"buckets\": []}", "\"buckets\": [[1]]}", "buckets[0]"},
        {"m-cell.json", "[[0, 1, 0, 0, 1, 0, 0, 0, 0]]", "[[0, 1, 0]]", "by_head[0]"},
        {"m-neg.json", "\"elements\": 1", "\"elements\": -1", "elements"},
        {"m-case.json", "\"worst\": []", "\"worst\": [{\"case\": 3}]", "cases table"},
        {"m-dens.json", "[[\"zero\", 0, 1]]", "[[\"zero\", \"x\", 1]]", "abs_vs_exact[0]"},
        {"m-worstn.json", "\"worst_n\": 2", "\"worst_n\": 0", "worst_n"},
        {"m-verdicts.json", "\"out_of_model\": 0,", "\"out_of_model\": 1,", "add up to 2"},
        {"m-reqov.json", "\"require_overflow\": false", "\"require_overflow\": 0",
         "require_overflow"},
        {"m-oom.json", "\"out_of_model_rows\": {\"o\"", "\"out_of_model_rows\": {\"x\"",
         "out_of_model_rows.o"},
        {"m-nonfinite.json", "\"max_margin\": \"NaN\"", "\"max_margin\": \"nan\"", "max_margin"},
        /* Values no campaign writes: more violations than elements, a negative or NaN maximum
         * over elements, a cell with more failures than elements, a rule or kernel name that
         * is none. */
        {"m-viol.json", "\"elements\": 1, \"violations\": 0", "\"elements\": 1, \"violations\": 2",
         "violations 2 is more than its 1 elements"},
        {"m-maxabs.json", "\"max_abs\": 0, \"max_rel\": 0", "\"max_abs\": -1, \"max_rel\": 0",
         "\"max_abs\" is -1; it is a number >= 0"},
        {"m-maxnan.json", "\"max_margin\": 0,", "\"max_margin\": \"NaN\",",
         "\"max_margin\" is nan; it is a number >= 0"},
        {"m-cellfails.json", "[[0, 1, 0, 0, 1", "[[0, 1, 2, 0, 1",
         "counts more failing, nonfinite or measured elements than its 1"},
        {"m-rule.json", "\"rule\": \"strict\"", "\"rule\": \"stricter\"",
         "\"rule\" is not a rule this kvfuzz knows"},
        {"m-kname.json", "\"kernel\": \"k\", \"rule\"", "\"kernel\": \"k\\n\", \"rule\"",
         "groups[0]: \"kernel\" or \"rule\" is missing or not a name"},
        {"m-seconds.json", "\"cases\": [], ",
         "\"cases\": [], \"sources\": [{\"devices\": [{\"device\": 0, \"cases\": 1, "
         "\"seconds\": -2, \"crashes\": 0, \"hangs\": 0, \"kernel_errors\": 0, "
         "\"retired\": false}]}], ",
         "\"seconds\" is -2; it is a number >= 0"},
        {"m-kernels.json", "\"kernels\": []",
         "\"kernels\": [{\"kernel\": \"\", \"ran\": 0, \"unsupported\": 0}]",
         "kernels[0]: \"kernel\" is missing or not a name"},
    };
    for (size_t i = 0; i < sizeof defects / sizeof defects[0]; i++) {
        char bad[12288];
        const char *at = strstr(good, defects[i].from);
        CHECK(at != NULL);
        if (!at) continue;
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - good), good, defects[i].to,
                 at + strlen(defects[i].from));
        expect_format_error(defects[i].name, bad, defects[i].needle);
    }
    /* An embedded case is the .kvfz file its hash names (a report writes it out under that
     * name): bytes that hash elsewhere, or that hash right but are no case file, or a case
     * without its hash, are defects; a real case file is taken. */
    static const uint8_t not_a_case[] = {0x00};
    kvf_spec sp;
    CHECK_OK(kvf_spec_preset(&sp, "seed-h20kv4", 1, &err), &err);
    uint8_t *kvfz = NULL;
    size_t kvfz_n = 0;
    CHECK_OK(kvf_spec_encode(&sp, &kvfz, &kvfz_n, &err), &err);
    kvf_spec_free(&sp);
    char seed_hex[2 * 256 + 1] = "";
    CHECK(kvfz_n < 256);
    for (size_t i = 0; i < kvfz_n && i < 256; i++)
        snprintf(seed_hex + 2 * i, 3, "%02x", kvfz[i]);
    struct {
        const char *name, *hash, *hex, *needle; /* needle NULL: read */
        uint64_t h;
    } cases[] = {
        {"m-casehash.json", NULL, "00", "does not hash to its \"hash\"", 1},
        {"m-casebad.json", NULL, "00",
         "\"kvfz_hex\" is not a case file: ", kvf_hash64(not_a_case, 1)},
        {"m-casenohash.json", "null", seed_hex, "\"kvfz_hex\" is given without its \"hash\"", 0},
        {"m-casegood.json", NULL, seed_hex, NULL, kvf_hash64(kvfz, kvfz_n)},
    };
    free(kvfz);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char hash[32], entry[1024], with[12288];
        if (cases[i].hash)
            snprintf(hash, sizeof hash, "%s", cases[i].hash);
        else
            snprintf(hash, sizeof hash, "\"%016llx\"", (unsigned long long)cases[i].h);
        snprintf(entry, sizeof entry, "\"cases\": [{\"hash\": %s, \"kvfz_hex\": \"%s\"}], ", hash,
                 cases[i].hex);
        const char *at = strstr(good, "\"cases\": [], ");
        CHECK(at != NULL);
        if (!at) continue;
        snprintf(with, sizeof with, "%.*s%s%s", (int)(at - good), good, entry,
                 at + strlen("\"cases\": [], "));
        if (cases[i].needle) {
            expect_format_error(cases[i].name, with, cases[i].needle);
            continue;
        }
        tmp_path(path, sizeof path, cases[i].name);
        write_text(path, with);
        CHECK_OK(kvf_stats_read(&back, path, &err), &err);
        kvf_stats_free(back);
    }
    (void)buf;
}

static int count_tmp_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    /* Temporaries are ".<name>.tmp.XXXXXX" (kvf_write_atomic). */
    while (d && (e = readdir(d)))
        if (e->d_name[0] == '.' && strncmp(e->d_name + 1, prefix, strlen(prefix)) == 0 &&
            strstr(e->d_name, ".tmp."))
            n++;
    if (d) closedir(d);
    return n;
}

/* A reader never sees a mix: while a child process keeps replacing the file with A or B (large
 * enough that a plain rewrite would be caught half-written), every read parses and equals one
 * of them. A failed write leaves the old file and no temporary behind. */
static void test_atomic_write(void) {
    judged_all();
    kvf_error err = {0};
    kvf_stats *a = stats_new(64), *b = stats_new(64);
    judged_observe(a, "k", &J[0]);
    judged_observe(b, "k", &J[2]);
    judged_observe(b, "other", &J[3]);
    char path[512];
    tmp_path(path, sizeof path, "atomic.json");
    CHECK_OK(kvf_stats_write(a, path, &err), &err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 100000);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 400; i++)
            if (kvf_stats_write(i % 2 ? a : b, path, NULL)) _exit(1);
        _exit(0);
    }
    int reads = 0, seen_a = 0, seen_b = 0, bad_reads = 0;
    for (;;) {
        int status;
        int done = waitpid(pid, &status, WNOHANG) == pid;
        kvf_stats *r = NULL;
        if (kvf_stats_read(&r, path, &err) != 0) {
            if (bad_reads++ == 0) CHECK_FAIL_AT("a read during replacement failed: %s", err.msg);
        } else {
            reads++;
            if (kvf_stats_equal(r, a))
                seen_a++;
            else if (kvf_stats_equal(r, b))
                seen_b++;
            else if (bad_reads++ == 0)
                CHECK_FAIL_AT("a read saw neither the old nor the new statistics");
            kvf_stats_free(r);
        }
        if (done) {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            break;
        }
    }
    printf("  %d reads during 400 replacements: %d old, %d new\n", reads, seen_a, seen_b);
    CHECK(reads > 0);
    CHECK_INT_EQ(bad_reads, 0);
    CHECK_INT_EQ(count_tmp_files(tmp_dir(), "atomic.json"), 0);

    /* Unwritable target: a directory that does not exist. The error names the path. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no-such-dir/stats.json", tmp_dir());
    CHECK_INT_EQ(kvf_stats_write(a, bad, &err), KVF_EIO);
    CHECK_STR_CONTAINS(err.msg, "cannot write");
    CHECK_STR_CONTAINS(err.msg, "no-such-dir");
    /* A path that is a directory: refused before any temporary is made, naming what it is. */
    char dirpath[600];
    snprintf(dirpath, sizeof dirpath, "%s/a-directory", tmp_dir());
    mkdir(dirpath, 0755);
    CHECK_INT_EQ(kvf_stats_write(a, dirpath, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "it is a directory, not a regular file");
    CHECK_INT_EQ(count_tmp_files(tmp_dir(), "a-directory"), 0);

    /* tick: an interval of 0 writes at once; an hour does not write. */
    kvf_stats *t = NULL;
    kvf_stats_opts so;
    kvf_stats_opts_default(&so);
    so.flush_interval_s = 3600;
    CHECK_OK(kvf_stats_create(&t, &so, &err), &err);
    char tick[512];
    tmp_path(tick, sizeof tick, "tick.json");
    CHECK_OK(kvf_stats_tick(t, tick, &err), &err);
    CHECK(access(tick, F_OK) != 0);
    kvf_stats_free(t);
    so.flush_interval_s = 0;
    CHECK_OK(kvf_stats_create(&t, &so, &err), &err);
    CHECK_OK(kvf_stats_tick(t, tick, &err), &err);
    CHECK(access(tick, F_OK) == 0);
    kvf_stats_free(t);
    kvf_stats_free(a);
    kvf_stats_free(b);
}

static const check_test tests[] = {
    {"roundtrip_and_malformed", test_roundtrip_and_malformed},
    {"atomic_write", test_atomic_write},
    {NULL, NULL},
};

CHECK_MAIN(tests)
