/* Escaping for the page: every string that comes from the inputs (titles, series names, rules,
 * paths, sentences) goes through here, in text and in attributes alike. */
#include "escape.h"

void kvf__html_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}
