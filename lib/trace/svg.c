/* SPDX-License-Identifier: MIT */
/* The outputs of a trace: an SVG timeline (one row per worker, tasks coloured by codelet,
 * data waits as thin dark bars before their task, idle time left blank, a time axis in ms,
 * a legend) and a per-op / per-worker table.
 *
 * Time 0 is the earliest recorded event (a data fetch or a task start); the span ends at
 * the latest task end. Tasks narrower than a pixel are merged per pixel column: one
 * rectangle whose width is the summed busy time of the tasks in that column, coloured by
 * the codelet with the most time there, so the drawn busy fraction of each row stays right
 * however many tasks there are. */
#include "../internal.h"
#include "../io/io.h"
#include "trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLOT_W 1200.0             /* px of the time axis                                 */
#define LABEL_W 150.0             /* px of the worker names                              */
#define ROW_H 24.0
#define ROW_GAP 6.0
#define TOP 30.0

/* ---- a growing text buffer, written out at the end ---------------------------------------- */
typedef struct text {
    char *buf;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...) NNT_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !t->oom; pass++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt,
                          ap);
        va_end(ap);
        if (k < 0) {
            t->oom = 1;
            return;
        }
        if (t->buf && t->len + (size_t)k < t->cap) {
            t->len += (size_t)k;
            return;
        }
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (cap <= t->len + (size_t)k)
            cap *= 2;
        char *grown = realloc(t->buf, cap);
        if (!grown) {
            t->oom = 1;
            return;
        }
        t->buf = grown;
        t->cap = cap;
    }
}

/* Write t to path through temp + fsync + rename, or to stdout for "-". */
static int flush_text(text *t, const char *path, const char *what, char *err, size_t errlen)
{
    if (t->oom)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of host memory for the %s", what);
    if (strcmp(path, "-") == 0) {
        if (fwrite(t->buf, 1, t->len, stdout) != t->len || fflush(stdout) != 0)
            return nnt_io_errf(err, errlen, NNT_E_IO, "cannot write the %s to stdout", what);
        return NNT_OK;
    }
    nnt_io_out *o;
    int rc = nnt_io_out_begin(path, &o, err, errlen);
    if (rc)
        return rc;
    rc = nnt_io_out_write(o, t->buf, t->len, err, errlen);
    if (rc) {
        nnt_io_out_abort(o);
        return rc;
    }
    return nnt_io_out_commit(o, err, errlen);
}

/* ---- per-codelet sums ---------------------------------------------------------------------- */
typedef struct op_sum {
    const char *name;
    int64_t count, busy_ns;
} op_sum;

typedef struct summary {
    op_sum *ops;                  /* (nops) sorted by name                               */
    int nops;
    int64_t t0, t1;               /* span of the trace, ns                               */
    int64_t busy_ns;              /* all task time                                       */
} summary;

static int op_index(const summary *s, const char *name)
{
    int lo = 0, hi = s->nops - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(s->ops[mid].name, name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const op_sum *)a)->name, ((const op_sum *)b)->name);
}

static int summarize(const nnt_trace_log *log, summary *s)
{
    memset(s, 0, sizeof *s);
    s->ops = calloc(log->n + 1, sizeof *s->ops);
    if (!s->ops)
        return NNT_E_NOMEM;
    for (size_t i = 0; i < log->n; i++) {   /* distinct names */
        const nnt_trace_rec *r = &log->recs[i];
        if (op_index(s, r->codelet) < 0) {
            s->ops[s->nops++].name = r->codelet;
            qsort(s->ops, (size_t)s->nops, sizeof *s->ops, by_name);
        }
    }
    for (size_t i = 0; i < log->n; i++) {
        const nnt_trace_rec *r = &log->recs[i];
        op_sum *o = &s->ops[op_index(s, r->codelet)];
        o->count++;
        o->busy_ns += r->end - r->start;
        s->busy_ns += r->end - r->start;
        if (i == 0 || r->wait_start < s->t0)
            s->t0 = r->wait_start;
        if (i == 0 || r->end > s->t1)
            s->t1 = r->end;
    }
    return NNT_OK;
}

/* ---- colours -------------------------------------------------------------------------------- */
static void op_colour(int i, char out[8])
{
    /* 24 colours, neighbours far apart in hue and lightness, so that the ~20 codelets of a
     * GPT-2 step (sorted by name) are told apart */
    static const char *const palette[] = {
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78",
        "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#393b79",
        "#dbdb8d", "#9edae5", "#637939", "#843c39", "#7b4173", "#e7ba52"};
    const int np = (int)(sizeof palette / sizeof palette[0]);
    if (i < np) {
        memcpy(out, palette[i], 8);
        return;
    }
    /* beyond the palette: hues spread by the golden ratio, fixed saturation and value */
    double h = (double)(i - np) * 0.618033988749895;
    h = (h - (double)(long)h) * 6.0;
    int sector = (int)h;
    double f = h - sector, v = 0.85, p = v * 0.45, q = v * (1 - 0.55 * f),
           u = v * (1 - 0.55 * (1 - f));
    double rgb[6][3] = {{v, u, p}, {q, v, p}, {p, v, u}, {p, q, v}, {u, p, v}, {v, p, q}};
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)(rgb[sector][0] * 255),
             (unsigned)(rgb[sector][1] * 255), (unsigned)(rgb[sector][2] * 255));
}

static void put_escaped(text *t, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': put(t, "&amp;"); break;
        case '<': put(t, "&lt;"); break;
        case '>': put(t, "&gt;"); break;
        case '"': put(t, "&quot;"); break;
        default: put(t, "%c", *s);
        }
    }
}

/* ---- the timeline ----------------------------------------------------------------------- */

/* Tasks narrower than a pixel, gathered in one pixel column of one row. */
typedef struct column {
    long x;                       /* the column, -1 when empty                           */
    int64_t busy_ns, wait_ns;
    int64_t *op_ns;               /* (nops) busy time per codelet in the column          */
    int64_t ntasks;
} column;

typedef struct canvas {
    text *t;
    const summary *s;
    double px_per_ns;
    double y;                     /* top of the current row                              */
} canvas;

static double x_of(const canvas *c, int64_t ns)
{
    return LABEL_W + (double)(ns - c->s->t0) * c->px_per_ns;
}

static void draw_task(canvas *c, int op, double x, double w, int64_t ntasks, double ms)
{
    char colour[8];
    op_colour(op, colour);
    put(c->t, "<rect x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\" fill=\"%s\">"
        "<title>", x, c->y, w, ROW_H, colour);
    if (ntasks > 1)
        put(c->t, "%lld tasks merged, %.3f ms busy, mostly ", (long long)ntasks, ms);
    put_escaped(c->t, c->s->ops[op].name);
    if (ntasks == 1)
        put(c->t, ": %.3f ms", ms);
    put(c->t, "</title></rect>\n");
}

static void draw_wait(canvas *c, double x, double w)
{
    put(c->t, "<rect class=\"wait\" x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\"/>\n",
        x, c->y + ROW_H - 5.0, w, 5.0);
}

static void flush_column(canvas *c, column *col)
{
    if (col->x < 0)
        return;
    int best = 0;
    for (int i = 1; i < c->s->nops; i++)
        if (col->op_ns[i] > col->op_ns[best])
            best = i;
    if (col->busy_ns > 0)
        draw_task(c, best, (double)col->x, (double)col->busy_ns * c->px_per_ns, col->ntasks,
                  (double)col->busy_ns * 1e-6);
    if (col->wait_ns > 0)
        draw_wait(c, (double)col->x, (double)col->wait_ns * c->px_per_ns);
    memset(col->op_ns, 0, (size_t)c->s->nops * sizeof *col->op_ns);
    col->busy_ns = col->wait_ns = col->ntasks = 0;
    col->x = -1;
}

/* Add to the column at x, flushing the previous one when the column changes. */
static void into_column(canvas *c, column *col, double x, int op, int64_t busy, int64_t wait)
{
    long cx = (long)x;
    if (col->x != cx)
        flush_column(c, col);
    col->x = cx;
    col->busy_ns += busy;
    col->wait_ns += wait;
    if (busy > 0) {
        col->op_ns[op] += busy;
        col->ntasks++;
    }
}

static void draw_row(canvas *c, const nnt_trace_log *log, size_t first, size_t last,
                     column *col)
{
    for (size_t i = first; i < last; i++) {
        const nnt_trace_rec *r = &log->recs[i];
        int op = op_index(c->s, r->codelet);
        double xw = x_of(c, r->wait_start), xs = x_of(c, r->start), xe = x_of(c, r->end);
        int64_t wait = r->wait_end - r->wait_start;
        if (wait > 0 && xs - xw >= 1.0) {
            flush_column(c, col);
            draw_wait(c, xw, (double)wait * c->px_per_ns);
        } else if (wait > 0) {
            into_column(c, col, xw, op, 0, wait);
        }
        if (xe - xs >= 1.0) {
            flush_column(c, col);
            draw_task(c, op, xs, xe - xs, 1, (double)(r->end - r->start) * 1e-6);
        } else {
            into_column(c, col, xs, op, r->end - r->start, 0);
        }
    }
    flush_column(c, col);
}

/* A tick every 1, 2 or 5 times a power of ten ms, about ten along the axis. */
static double tick_ms(double span_ms)
{
    static const double mult[3] = {1.0, 2.0, 5.0};
    for (double base = 1e-6;; base *= 10.0)
        for (int i = 0; i < 3; i++)
            if (span_ms / (base * mult[i]) <= 10.0)
                return base * mult[i];
}

static void draw_axis(canvas *c, double y)
{
    double span_ms = (double)(c->s->t1 - c->s->t0) * 1e-6;
    put(c->t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n",
        LABEL_W, y, LABEL_W + PLOT_W, y);
    double step = tick_ms(span_ms);
    for (int k = 0; k * step <= span_ms * (1 + 1e-9); k++) {
        double x = LABEL_W + (double)k * step * 1e6 * c->px_per_ns;
        put(c->t, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000\"/>"
            "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
            x, y, x, y + 5, x, y + 18, (double)k * step);
    }
    put(c->t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time (ms)</text>\n",
        LABEL_W + PLOT_W / 2, y + 36);
}

static void draw_legend(canvas *c, double y)
{
    double x = LABEL_W;
    for (int i = 0; i < c->s->nops; i++) {
        char colour[8];
        op_colour(i, colour);
        if (x > LABEL_W + PLOT_W - 200) {
            x = LABEL_W;
            y += 20;
        }
        put(c->t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%.1f\" y=\"%.1f\">", x, y, colour, x + 16, y + 11);
        put_escaped(c->t, c->s->ops[i].name);
        put(c->t, "</text>\n");
        x += 24 + 8.0 * (double)strlen(c->s->ops[i].name);
    }
    put(c->t, "<rect class=\"wait\" x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"5\"/>"
        "<text x=\"%.1f\" y=\"%.1f\">waiting for data</text>\n", x, y + 7, x + 16, y + 11);
}

static void put_svg(text *t, const nnt_trace_log *log, const summary *s, column *col)
{
    int64_t span = s->t1 > s->t0 ? s->t1 - s->t0 : 1;
    canvas c = {t, s, PLOT_W / (double)span, TOP};
    double rows_h = log->nworkers * (ROW_H + ROW_GAP);
    double height = TOP + rows_h + 60 + 20.0 * (1 + s->nops / 6) + 20;
    put(t, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n", LABEL_W + PLOT_W + 20, height);
    put(t, "<style>.wait{fill:#222;fill-opacity:0.6}</style>\n");
    put(t, "<text x=\"%.1f\" y=\"18\">nnt trace: %zu tasks on %d workers, %.3f ms</text>\n",
        LABEL_W, log->n, log->nworkers, (double)span * 1e-6);
    size_t i = 0;
    for (int w = 0; w < log->nworkers; w++) {
        size_t first = i;
        while (i < log->n && log->recs[i].worker == w)
            i++;
        put(t, "<g class=\"worker\" id=\"worker%d\">\n<text x=\"4\" y=\"%.1f\">", w,
            c.y + ROW_H / 2 + 4);
        put_escaped(t, log->worker_names[w]);
        put(t, "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
            "fill=\"#f4f4f4\"/>\n", LABEL_W, c.y, PLOT_W, ROW_H);
        draw_row(&c, log, first, i, col);
        put(t, "</g>\n");
        c.y += ROW_H + ROW_GAP;
    }
    draw_axis(&c, c.y);
    draw_legend(&c, c.y + 50);
    put(t, "</svg>\n");
}

int nnt_trace_write_svg(const nnt_trace_log *log, const char *path, char *err, size_t errlen)
{
    summary s;
    text t = {NULL, 0, 0, 0};
    column col = {-1, 0, 0, NULL, 0};
    int rc = summarize(log, &s);
    if (rc == 0 && (col.op_ns = calloc((size_t)s.nops + 1, sizeof *col.op_ns)) == NULL)
        rc = NNT_E_NOMEM;
    if (rc == 0) {
        put_svg(&t, log, &s, &col);
        rc = flush_text(&t, path, "SVG timeline", err, errlen);
    } else {
        nnt_io_errf(err, errlen, rc, "out of host memory for the SVG timeline");
    }
    free(col.op_ns);
    free(t.buf);
    free(s.ops);
    return rc;
}

/* ---- the table --------------------------------------------------------------------------- */

static void put_workers(text *t, const nnt_trace_log *log, const summary *s)
{
    double span = (double)(s->t1 - s->t0);
    put(t, "\n%-24s %8s %10s %8s %8s %14s\n", "worker", "tasks", "busy ms", "busy %",
        "idle %", "data wait ms");
    size_t i = 0;
    for (int w = 0; w < log->nworkers; w++) {
        int64_t busy = 0, wait = 0, n = 0;
        for (; i < log->n && log->recs[i].worker == w; i++, n++) {
            busy += log->recs[i].end - log->recs[i].start;
            wait += log->recs[i].wait_end - log->recs[i].wait_start;
        }
        double pct = span > 0 ? 100.0 * (double)busy / span : 0.0;
        put(t, "%-24.24s %8lld %10.3f %8.1f %8.1f %14.3f\n", log->worker_names[w],
            (long long)n, (double)busy * 1e-6, pct, span > 0 ? 100.0 - pct : 0.0,
            (double)wait * 1e-6);
    }
}

/* The longest stretches in which a worker that ran tasks had none (from one task's end to
 * the next one's data fetch or start), with the tasks on either side: where a step waits on
 * something that is not a task (the host reading a value back, submission, a lock). */
#define IDLE_SHOWN 5
#define IDLE_MIN_NS 1000000   /* 1 ms */

typedef struct {
    int64_t ns, at;           /* its length; its start from the trace's start */
    const nnt_trace_rec *after, *before;
} idle_stretch;

static void keep_longest(idle_stretch *top, int *ntop, idle_stretch x)
{
    if (*ntop == IDLE_SHOWN && top[IDLE_SHOWN - 1].ns >= x.ns)
        return;   /* no longer than the shortest kept */
    int i = *ntop < IDLE_SHOWN ? (*ntop)++ : IDLE_SHOWN - 1;
    for (; i > 0 && top[i - 1].ns < x.ns; i--)
        top[i] = top[i - 1];
    top[i] = x;
}

static void put_idle_stretches(text *t, const nnt_trace_log *log, const summary *s)
{
    idle_stretch top[IDLE_SHOWN];
    int ntop = 0;
    const nnt_trace_rec *last = NULL;   /* of this worker's tasks so far, the last to end */
    for (size_t i = 0; i < log->n; i++) {
        const nnt_trace_rec *r = &log->recs[i];
        if (!last || last->worker != r->worker) {   /* a worker's first task */
            last = r;
            continue;
        }
        /* from the latest end so far (a CUDA worker's tasks may overlap) to this task's data
         * fetch, which starts no later than its body (lib/trace/trace.c) */
        int64_t gap = r->wait_start - last->end;
        if (gap >= IDLE_MIN_NS)
            keep_longest(top, &ntop, (idle_stretch){gap, last->end - s->t0, last, r});
        if (r->end > last->end)
            last = r;
    }
    put(t, "\nlongest idle stretches of workers between their tasks (1 ms or more):%s\n",
        ntop ? "" : " none");
    for (int i = 0; i < ntop; i++)
        put(t, "%-24.24s %10.3f ms at %10.3f ms, after %s, before %s\n",
            log->worker_names[top[i].after->worker], (double)top[i].ns * 1e-6,
            (double)top[i].at * 1e-6, top[i].after->codelet, top[i].before->codelet);
}

int nnt_trace_write_table(const nnt_trace_log *log, const char *path, char *err,
                          size_t errlen)
{
    summary s;
    text t = {NULL, 0, 0, 0};
    int rc = summarize(log, &s);
    if (rc) {
        nnt_io_errf(err, errlen, rc, "out of host memory for the table");
        return rc;
    }
    put(&t, "# nnt trace: %zu tasks on %d workers, span %.3f ms, busy %.3f ms\n", log->n,
        log->nworkers, (double)(s.t1 - s.t0) * 1e-6, (double)s.busy_ns * 1e-6);
    put(&t, "%-32s %8s %12s %10s %8s\n", "codelet", "count", "total ms", "mean ms",
        "share %");
    for (int i = 0; i < s.nops; i++) {
        const op_sum *o = &s.ops[i];
        put(&t, "%-32s %8lld %12.3f %10.4f %8.1f\n", o->name, (long long)o->count,
            (double)o->busy_ns * 1e-6, (double)o->busy_ns * 1e-6 / (double)o->count,
            s.busy_ns > 0 ? 100.0 * (double)o->busy_ns / (double)s.busy_ns : 0.0);
    }
    put_workers(&t, log, &s);
    put_idle_stretches(&t, log, &s);
    rc = flush_text(&t, path, "table", err, errlen);
    free(t.buf);
    free(s.ops);
    return rc;
}
