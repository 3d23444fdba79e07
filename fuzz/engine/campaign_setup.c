/* What a campaign needs before it runs (kvfuzz/campaign_setup.h). */
#include "kvfuzz/campaign_setup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvfuzz/file.h"
#include "kvfuzz/outcome.h"
#include "kvfuzz/runner.h"

const kvf_kernel *kvf_default_kernel(void) {
    char why[256];
    const kvf_kernel *k = kvf_runner_probe_cuda(why, sizeof why) ? kvf_kernel_find("cuda") : NULL;
    return k ? k : kvf_kernel_find("cpu-splitkv");
}

uint64_t kvf_campaign_clock_seed(void) {
    return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

int kvf_campaign_tag_ok(const char *tag) {
    size_t n = strlen(tag);
    if (n == 0 || n > 200) return 0;
    for (const unsigned char *p = (const unsigned char *)tag; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

char *kvf_campaign_command_line(int argc, char *const *argv, int seed_given, uint64_t seed) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    fputs("kvfuzz", f);
    for (int i = 0; i < argc; i++) { /* argv[0] is the subcommand, "fuzz" */
        const char *a = argv[i];
        int plain = *a != 0;
        for (const char *p = a; *p && plain; p++)
            plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "_@%+=:,./-",
                           *p) != NULL;
        fputc(' ', f);
        if (plain) {
            fputs(a, f);
            continue;
        }
        fputc('\'', f);
        for (const char *p = a; *p; p++)
            *p == '\'' ? fputs("'\\''", f) : fputc(*p, f);
        fputc('\'', f);
    }
    if (!seed_given) fprintf(f, " --seed %" PRIu64, seed);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void kvf_campaign_stats_path(char *out, size_t size, const char *dir) {
    char host[256] = "host";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++) /* a file name: keep it to letters, digits, '-', '.' */
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '.'))
            *p = '_';
    char when[32] = "0";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, size, "%s/stats-%s-%ld-%s.json", dir, host, (long)getpid(), when);
}

int kvf_campaign_check_corpus(const char *dir, kvf_error *err) {
    struct stat st;
    if (dir && stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return kvf_error_set(err, KVF_EINVAL, "%s is not a folder", dir);
    return 0;
}

int kvf_campaign_prepare_dirs(const char *findings_dir, const char *corpus_dir, int *stale,
                              kvf_error *err) {
    int rc = kvf_mkdirs(findings_dir, err);
    if (rc == 0) rc = kvf_fuzz_check_writable(findings_dir, err);
    if (rc) return rc;
    /* Temporary files an earlier campaign left when it was killed mid-write (kill -9). */
    *stale = kvf_fuzz_remove_stale_temps(findings_dir, 60);
    if (corpus_dir) *stale += kvf_fuzz_remove_stale_temps(corpus_dir, 60);
    return 0;
}
