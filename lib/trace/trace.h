/* SPDX-License-Identifier: MIT */
/* Private to lib/trace: the records of a trace and the writers of its SVG timeline and
 * per-op table (svg.c). */
#ifndef NNT_TRACE_H
#define NNT_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* One task as StarPU's profiling saw it; times in ns on StarPU's clock. */
typedef struct nnt_trace_rec {
    const char *codelet;          /* the codelet's name (static storage)                  */
    int worker;                   /* StarPU worker id                                     */
    int64_t wait_start, wait_end; /* the worker fetching the task's input data            */
    int64_t start, end;           /* the task body                                        */
} nnt_trace_rec;

typedef struct nnt_trace_log {
    nnt_trace_rec *recs;
    size_t n;
    int nworkers;
    char (*worker_names)[64];     /* (nworkers)                                           */
} nnt_trace_log;

/* Write the timeline / the table of log (records sorted by worker, then start) to path
 * ("-" = stdout for the table); 0 or a negative NNT_E_* with err filled. */
int nnt_trace_write_svg(const nnt_trace_log *log, const char *path, char *err, size_t errlen);
int nnt_trace_write_table(const nnt_trace_log *log, const char *path, char *err,
                          size_t errlen);

#endif
