/* Finding groups: the saved findings of one or more findings directories grouped into distinct
 * defects (docs/reports.md, "Finding groups"). A finding's signature tells apart what one
 * failing case looked like; one root cause shows several (an empty sequence's wrong lse files
 * `lse|finite`, `o|finite` and `o|+inf` signatures), so a group joins findings that share the
 * kernel, the kind of failure, the precision verdict and the input feature of the row their
 * failure is defined by, and findings whose minimized cases are byte for byte the same.
 *
 * The group key is text built from the findings alone (never from a directory, a time or an
 * order of reading), so the groups of several campaigns' directories merge: the same defect
 * gets the same key, and the same 12-hex-digit id, wherever it was found.
 *
 * Ownership: kvf_groups_scan fills *out, which owns every string and array in it until
 * kvf_groups_free. Finding files that cannot be read or parsed are still listed (as their own
 * group, keyed by their signature); only a directory that cannot be opened is an error.
 * Errors: KVF_EIO (a directory that cannot be opened, one sentence naming it), KVF_ENOMEM. */
#ifndef KVFUZZ_GROUPS_H
#define KVFUZZ_GROUPS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>

#include "kvfuzz/error.h"

/* The element a finding's failure is defined by (see kvf_groups_scan): an in-model failing
 * element of the finding's rule, read from the worst elements its .json kept. */
typedef struct kvf_group_element {
    int is_lse; /* 0: o, 1: lse */
    int64_t b, h, d, seq_len;
    double kernel, rounded, exact, margin, excess_margin;
} kvf_group_element;

/* Where a failure is, by the input: a row of an empty sequence, a row whose exact value is not
 * finite (a fully masked row), or any other row. */
typedef enum kvf_group_feature {
    KVF_GROUP_ROW_ORDINARY = 0,
    KVF_GROUP_ROW_MASKED,
    KVF_GROUP_ROW_EMPTY,
} kvf_group_feature;

typedef struct kvf_group_finding {
    char *dir;       /* the findings directory, as given */
    char *stem;      /* "<class>-<hash>" */
    char *kvfz;      /* DIR/<stem>.kvfz, or NULL when absent */
    char *json;      /* DIR/<stem>.json, or NULL when absent */
    char *min;       /* DIR/<stem>.min.kvfz (the minimized case), or NULL when absent */
    char *cls;       /* the finding class (the name's part before the last '-') */
    char *kernel;    /* from the .json; NULL when it has none */
    char *rule;      /* likewise */
    char *signature; /* likewise */
    /* An invariance finding's relation and the seed that derives its second case, from the
     * .json's "relation"; NULL when it names none. */
    char *relation, *relation_seed;
    int fib;         /* the .json's fib_catches: 1, 0, or -1 (null or absent) */
    int precision;   /* 1 when its attribution says a looser precision model accepts it */
    char *within;    /* that model (canonical name), else NULL */
    char *attr_text; /* the attribution's sentence, or NULL */
    int has_element;
    kvf_group_element element; /* the defining element, when has_element */
    kvf_group_feature feature; /* its row's feature */
    time_t mtime;              /* of the .kvfz (else the .json): when it was found */
    long case_bytes;           /* size of its smallest case file (min, else kvfz); -1: none */
    int64_t cases; /* cases that hit it, summed over the campaigns' hits files in its directory
                      (hits-*.counts); 0 when none recorded it */
    size_t group;  /* index into kvf_groups.groups */
} kvf_group_finding;

typedef struct kvf_group {
    char key[640];          /* the grouping key (docs/reports.md) */
    char id[13];            /* 12 hex digits of kvf_hash64(key) */
    char kernel_short[160]; /* the kernel's own name: a plugin's NAME without its path */
    char kernel_path[512];  /* the plugin's path ("" for a built-in kernel) */
    const char *kernel;     /* the full kernel name the findings carry (for commands) */
    const char *rule;       /* the first finding's rule (for commands), or NULL */
    size_t count;           /* findings (signatures) in the group */
    int64_t cases;          /* cases that hit its findings, as recorded (0: not recorded) */
    size_t first;           /* the earliest finding (index into findings) */
    size_t smallest;        /* the finding with the smallest case file */
    size_t worst;           /* the finding whose defining element ranks first, or (size_t)-1 */
    size_t fib_yes, fib_no; /* findings fib catches / does not; the rest were not judged */
    int precision;          /* 1: a looser precision model explains the group */
    time_t first_seen;      /* the earliest mtime */
} kvf_group;

typedef struct kvf_groups {
    kvf_group_finding *findings; /* sorted by directory, then stem */
    size_t nfindings;
    kvf_group *groups; /* most findings first, then by key */
    size_t ngroups;
} kvf_groups;

/* Lists every <class>-<hash>.kvfz / .json pair of the directories, reads each .json and groups
 * them. NULL entries of dirs are skipped. */
int kvf_groups_scan(kvf_groups *out, const char *const *dirs, size_t ndirs, kvf_error *err);
void kvf_groups_free(kvf_groups *g);
/* The groups for a terminal (nothing when there are no findings): per group its id, kernel,
 * findings and cases, first seen, verdict, fib, worst in-model element, smallest case and the
 * commands that reproduce it. */
void kvf_groups_print(FILE *t, const kvf_groups *gs);

/* The case file a group is shown with: the smallest member's minimized case when it has one,
 * else its case. NULL when the group has no case file. */
const char *kvf_group_case(const kvf_groups *gs, const kvf_group *g);

/* "B 2, Hq 8/Hk 2, D 64, S 16, L 0..37 (1 empty)": the case's shape in one line, from its
 * .kvfz; "?" when it cannot be read. */
void kvf_group_case_shape(const char *kvfz_path, char *buf, size_t size);

/* "fib catches it" / "fib misses it" / "fib catches 3 of 5" / "not judged by fib". */
void kvf_group_fib_text(const kvf_group *g, char *buf, size_t size);

/* The group's verdict: "defect (no precision model explains it)" or "precision: within M". */
void kvf_group_verdict_text(const kvf_groups *gs, const kvf_group *g, char *buf, size_t size);

#endif
