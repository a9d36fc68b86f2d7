/* SPDX-License-Identifier: MIT */
/* The trainer's loss curve (log_dir/loss.svg) as a self-contained SVG line chart. */
#include "train.h"

#include <stdio.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WIDTH = 800, HEIGHT = 480, LEFT = 70, RIGHT = 20, TOP = 40, BOTTOM = 55 };

/* The chart's data range and its mapping to pixels. */
typedef struct chart {
    double x0, x1, y0, y1;     /* data range shown */
} chart;

static double px(const chart *c, double x)
{
    return LEFT + (x - c->x0) / (c->x1 - c->x0) * (WIDTH - LEFT - RIGHT);
}

static double py(const chart *c, double y)
{
    return HEIGHT - BOTTOM - (y - c->y0) / (c->y1 - c->y0) * (HEIGHT - TOP - BOTTOM);
}

/* A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about `want` ticks. */
static double tick_step(double range, int want)
{
    double raw = range / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

/* Widen c to hold the n points of p (fmin/fmax ignore the NaN of an empty chart). */
static void chart_include(chart *c, const nnt_train_point *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        c->x0 = fmin(c->x0, (double)p[i].step), c->x1 = fmax(c->x1, (double)p[i].step);
        if (isfinite(p[i].loss))
            c->y0 = fmin(c->y0, p[i].loss), c->y1 = fmax(c->y1, p[i].loss);
    }
}

static chart chart_range(const nnt_train_point *p, int64_t n, const nnt_train_point *val,
                         int64_t nval)
{
    chart c = {NAN, NAN, NAN, NAN};
    chart_include(&c, p, n);
    chart_include(&c, val, nval);
    if (isnan(c.x0))
        return (chart){0, 1, 0, 1};
    if (!isfinite(c.y0) || !isfinite(c.y1))
        c.y0 = 0, c.y1 = 1;
    if (c.x1 <= c.x0)
        c.x0 -= 1, c.x1 += 1;
    double pad = (c.y1 - c.y0) * 0.05;
    if (pad <= 0)
        pad = fabs(c.y0) * 0.05 + 0.05;
    c.y0 -= pad, c.y1 += pad;
    return c;
}

static void write_axes(FILE *f, const chart *c)
{
    int x_left = LEFT, x_right = WIDTH - RIGHT, y_top = TOP, y_bottom = HEIGHT - BOTTOM;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444\"/>\n", x_left, y_top, x_right - x_left, y_bottom - y_top);
    double xs = tick_step(c->x1 - c->x0, 8);
    if (xs < 1)
        xs = 1;   /* steps are integers */
    for (double x = ceil(c->x0 / xs) * xs; x <= c->x1 + 1e-9; x += xs)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n",
                px(c, x), y_top, px(c, x), y_bottom + 5, px(c, x), y_bottom + 20, x);
    double ys = tick_step(c->y1 - c->y0, 6);
    int digits = ys >= 1 ? 0 : (int)ceil(-log10(ys));
    for (double y = ceil(c->y0 / ys) * ys; y <= c->y1 + 1e-12; y += ys)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n",
                x_left - 5, py(c, y), x_right, py(c, y), x_left - 8, py(c, y) + 4, digits, y);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n",
            (x_left + x_right) / 2, HEIGHT - 12);
    fprintf(f, "<text x=\"18\" y=\"%d\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 18 %d)\">loss</text>\n",
            (y_top + y_bottom) / 2, (y_top + y_bottom) / 2);
}

static void write_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

/* A line through the finite points of p. */
static void write_polyline(FILE *f, const chart *c, const nnt_train_point *p, int64_t n,
                           const char *color, const char *width)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", color,
            width);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(p[i].loss))
            fprintf(f, "%.1f,%.1f ", px(c, (double)p[i].step), py(c, p[i].loss));
    fputs("\"/>\n", f);
}

/* The loss of every step (light), and its mean over a sliding window of about n/50 steps
 * (dark) when there are enough steps for it to differ, with a legend. Returns the legend's
 * lines (0: a single line, without one). */
static int write_curve(FILE *f, const chart *c, const nnt_train_point *p, int64_t n)
{
    int64_t w = n / 50;
    write_polyline(f, c, p, n, w > 1 ? "#6baed6" : "#1f77b4", "1.2");
    if (w <= 1)
        return 0;
    fputs("<polyline fill=\"none\" stroke=\"#08519c\" stroke-width=\"2\" points=\"", f);
    double sum = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(p[i].loss))
            sum += p[i].loss, count++;
        if (i >= w && isfinite(p[i - w].loss))
            sum -= p[i - w].loss, count--;
        if (i >= w - 1 && count > 0)
            fprintf(f, "%.1f,%.1f ", px(c, (double)p[i].step), py(c, sum / (double)count));
    }
    fputs("\"/>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#08519c\">mean of %lld "
               "steps</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#6baed6\">"
               "each step</text>\n", WIDTH - RIGHT - 8, TOP + 16, (long long)w,
            WIDTH - RIGHT - 8, TOP + 32);
    return 2;
}

/* The validation losses: a line with a marker at each validation, and its legend below the
 * training curve's (legend_y: its line). */
static void write_val_curve(FILE *f, const chart *c, const nnt_train_point *p, int64_t n,
                            int legend_y)
{
    write_polyline(f, c, p, n, "#e6550d", "2");
    for (int64_t i = 0; i < n; i++)
        if (isfinite(p[i].loss))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#e6550d\"/>\n",
                    px(c, (double)p[i].step), py(c, p[i].loss));
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#e6550d\">validation "
               "(held-out tokens)</text>\n", WIDTH - RIGHT - 8, legend_y);
}

static int write_chart(FILE *f, const nnt_train_point *p, int64_t n, const nnt_train_point *val,
                       int64_t nval, const char *title)
{
    chart c = chart_range(p, n, val, nval);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, HEIGHT, WIDTH, HEIGHT);
    fprintf(f, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">",
            WIDTH / 2);
    write_escaped(f, title);
    fputs("</text>\n", f);
    write_axes(f, &c);
    int legend = n > 0 ? write_curve(f, &c, p, n) : 0;   /* legend lines written */
    if (nval > 0 && legend == 0)   /* the single training line gets one beside validation's */
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#1f77b4\">training "
                   "(each step)</text>\n", WIDTH - RIGHT - 8, TOP + 16 * ++legend);
    if (nval > 0)
        write_val_curve(f, &c, val, nval, TOP + 16 * (legend + 1));
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

int nnt_train_svg_write(const char *path, const nnt_train_point *points, int64_t n,
                    const nnt_train_point *val, int64_t nval, const char *title)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 5);
    if (!tmp)
        return errno = ENOMEM, -1;
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    int rc = f ? write_chart(f, points, n, val, nval, title) : -1;
    if (f && (fflush(f) || fsync(fileno(f))))
        rc = -1;
    if (f && fclose(f))
        rc = -1;
    if (rc == 0 && rename(tmp, path))
        rc = -1;
    if (rc && f) {
        int e = errno;
        remove(tmp);
        errno = e;
    }
    free(tmp);
    return rc;
}
