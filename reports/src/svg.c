/* SVG primitives: the chart frame and the pieces every chart draws with. A chart's body is
 * buffered so that its opening <svg> tag can carry the number of marks drawn, which the page's
 * self-check compares with what the browser shows. */
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "svg.h"

int kvf__chart_open(kvf__chart *c, int w, int h) {
    memset(c, 0, sizeof *c);
    c->w = w;
    c->h = h;
    c->f = open_memstream(&c->buf, &c->size);
    return c->f ? 0 : -1;
}

static int chart_close(kvf__chart *c, FILE *out, const char *id, const char *label) {
    if (fclose(c->f) != 0) {
        free(c->buf);
        return -1;
    }
    fprintf(out,
            "<svg class=\"chart\" id=\"%s\" data-marks=\"%d\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" "
            "aria-label=\"",
            id, c->marks, c->w, c->h, c->w, c->h);
    kvf__html_escape(out, label);
    fprintf(out, "\">\n%s</svg>\n", c->buf);
    free(c->buf);
    return 0;
}

static void section(FILE *f, const char *id, const char *title, const char *note) {
    fprintf(f, "<section class=\"fig\" id=\"sec-%s\"><h3>", id);
    kvf__html_escape(f, title);
    fputs("</h3><p class=\"note\">", f);
    kvf__html_escape(f, note);
    fputs("</p>\n", f);
}

int kvf__chart_figure(kvf__chart *c, FILE *out, const char *id, const char *title, const char *note,
                      const char *label) {
    section(out, id, title, note);
    int rc = chart_close(c, out, id, label);
    fputs("</section>\n", out);
    return rc;
}

void kvf__svg_text(FILE *f, double x, double y, const char *anchor, const char *cls,
                   const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    kvf__html_escape(f, s);
    fputs("</text>\n", f);
}

void kvf__svg_no_data(kvf__chart *c, const char *why) {
    kvf__svg_text(c->f, c->w / 2.0, c->h / 2.0, "middle", "nodata", why);
}

void kvf__svg_legend(kvf__chart *c, const kvf__rseries *const *ss, size_t ns, double x, double y) {
    for (size_t i = 0; i < ns; i++) {
        fprintf(c->f,
                "<rect class=\"legend\" x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" "
                "fill=\"%s\"/>",
                x, y - 9, ss[i]->color);
        kvf__svg_text(c->f, x + 14, y, "start", "lg", ss[i]->name);
        /* About 7 px per character of the name: the next swatch starts past it. */
        x += 24 + 7.0 * (double)strlen(ss[i]->name);
    }
}

void kvf__pow_label(char *buf, size_t size, int base, int k) {
    static const char *const sup[10] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                        "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
    char digits[16];
    snprintf(digits, sizeof digits, "%d", k < 0 ? -k : k);
    size_t n = (size_t)snprintf(buf, size, "%d%s", base, k < 0 ? "\u207b" : "");
    /* Each superscript digit is up to 3 bytes: stop before one would be cut. */
    for (const char *d = digits; *d && n + 4 < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s", sup[*d - '0']);
}
