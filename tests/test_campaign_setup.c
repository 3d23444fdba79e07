/* Unit tests of what a campaign needs before it runs (fuzz/engine/campaign_setup.c,
 * kvfuzz/campaign_setup.h): the tag's limits, the command line quoted as a shell reads it with
 * the drawn seed added, the default statistics file's name, a corpus that is a file refused,
 * the findings folder made and its stale temporary files removed, the clock seed and the
 * default kernel. */
#include "fuzz_fixtures.h"

#include <utime.h>

#include "kvfuzz/campaign_setup.h"

static void tag(void) {
    char t[202];
    memset(t, 'a', sizeof t);
    t[200] = 0;
    CHECK(kvf_campaign_tag_ok(t));
    t[200] = 'a';
    t[201] = 0;
    CHECK(!kvf_campaign_tag_ok(t));
    CHECK(!kvf_campaign_tag_ok(""));
    CHECK(kvf_campaign_tag_ok("task 7/array"));
    CHECK(!kvf_campaign_tag_ok("a\tb"));
    CHECK(!kvf_campaign_tag_ok("a\nb"));
    CHECK(!kvf_campaign_tag_ok("a\x7f"));
    CHECK(kvf_campaign_tag_ok("caf\xc3\xa9")); /* UTF-8 is printable */
}

static void command_line(void) {
    char *argv[] = {"fuzz", "--tag", "it's", "--time", "60", "", "a b", "--corpus=x/y,z"};
    char *s = kvf_campaign_command_line(8, argv, 0, 7);
    CHECK(s != NULL);
    if (s)
        CHECK(
            strcmp(s, "kvfuzz fuzz --tag 'it'\\''s' --time 60 '' 'a b' --corpus=x/y,z --seed 7") ==
            0);
    free(s);
    s = kvf_campaign_command_line(3, argv, 1, 7);
    if (s) CHECK(strcmp(s, "kvfuzz fuzz --tag 'it'\\''s'") == 0);
    free(s);
}

static void stats_path(void) {
    char p[512], want[64];
    kvf_campaign_stats_path(p, sizeof p, "some/dir");
    CHECK(strncmp(p, "some/dir/stats-", 15) == 0);
    snprintf(want, sizeof want, "-%ld-", (long)getpid());
    CHECK_STR_CONTAINS(p, want);
    size_t n = strlen(p);
    CHECK(n > 22 && strcmp(p + n - 6, "Z.json") == 0);
    /* ...-YYYYMMDDTHHMMSSZ.json: 8 digits, T, 6 digits. */
    const char *when = p + n - 6 - 15;
    CHECK(when[-1] == '-' && when[8] == 'T');
    for (int i = 0; i < 15; i++)
        if (i != 8) CHECK(when[i] >= '0' && when[i] <= '9');
    /* The host part keeps to letters, digits, '-' and '.'. */
    const char *pid = strstr(p + 15, want);
    CHECK(pid != NULL && pid > p + 15);
    for (const char *q = p + 15; pid && q < pid; q++)
        CHECK((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
              *q == '-' || *q == '.' || *q == '_');
}

static void touch(const char *path, double age_s) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    struct utimbuf t = {time(NULL) - (time_t)age_s, time(NULL) - (time_t)age_s};
    CHECK(utime(path, &t) == 0);
}

static void dirs(void) {
    char dir[256], findings[512], corpus[512], file[512], p[640];
    make_tmp(dir, sizeof dir);
    snprintf(findings, sizeof findings, "%s/a/b", dir);
    snprintf(corpus, sizeof corpus, "%s/corpus", dir);
    snprintf(file, sizeof file, "%s/file", dir);
    kvf_error err = {0};
    CHECK_OK(kvf_campaign_check_corpus(NULL, &err), &err);
    CHECK_OK(kvf_campaign_check_corpus(corpus, &err), &err); /* missing: made by the campaign */
    touch(file, 0);
    CHECK_INT_EQ(kvf_campaign_check_corpus(file, &err), KVF_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "file is not a folder");
    CHECK_OK(kvf_campaign_check_corpus(dir, &err), &err);

    CHECK(mkdir(corpus, 0700) == 0);
    snprintf(p, sizeof p, "%s/.x.kvfz.tmp.ABCDEF", corpus);
    touch(p, 600);
    snprintf(p, sizeof p, "%s/.y.kvfz.tmp.GHIJKL", corpus);
    touch(p, 0); /* another campaign's write in progress: kept */
    int stale = -1;
    CHECK_OK(kvf_campaign_prepare_dirs(findings, corpus, &stale, &err), &err);
    CHECK_INT_EQ(stale, 1);
    struct stat st;
    CHECK(stat(findings, &st) == 0 && S_ISDIR(st.st_mode));
    int hidden = 0;
    count_files(corpus, NULL, &hidden);
    CHECK_INT_EQ(hidden, 1);
    snprintf(p, sizeof p, "%s/.z.kvfz.tmp.MNOPQR", findings);
    touch(p, 600);
    CHECK_OK(kvf_campaign_prepare_dirs(findings, NULL, &stale, &err), &err);
    CHECK_INT_EQ(stale, 1);

    /* A findings folder under a file cannot be made. */
    snprintf(p, sizeof p, "%s/sub", file);
    stale = -1;
    CHECK(kvf_campaign_prepare_dirs(p, NULL, &stale, &err) != 0);
    CHECK(err.msg[0] != 0);
    CHECK_INT_EQ(stale, -1);
    rm_tree(dir);
}

static void seed_and_kernel(void) {
    time_t before = time(NULL);
    uint64_t s = kvf_campaign_clock_seed();
    time_t after = time(NULL);
    CHECK_INT_EQ(s >> 32, (uint64_t)getpid());
    CHECK((int64_t)(s & 0xffffffffu) >= (int64_t)((uint64_t)before & 0xffffffffu) &&
          (int64_t)(s & 0xffffffffu) <= (int64_t)((uint64_t)after & 0xffffffffu));
    char why[256];
    const kvf_kernel *k = kvf_default_kernel();
    CHECK(k != NULL);
    if (k)
        CHECK(strcmp(k->name, kvf_runner_probe_cuda(why, sizeof why) ? "cuda" : "cpu-splitkv") ==
              0);
}

static const check_test tests[] = {
    {"tag", tag},   {"command_line", command_line},       {"stats_path", stats_path},
    {"dirs", dirs}, {"seed_and_kernel", seed_and_kernel}, {NULL, NULL},
};

CHECK_MAIN(tests)
