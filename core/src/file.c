/* Whole-file reading (file.h). */
#include "kvfuzz/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int kvf_read_file(const char *path, char **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return -1;
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        errno = saved ? saved : EIO;
        return -1;
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return 0;
}
