/* SPDX-License-Identifier: MIT */
/* The one log hook: stderr by default, level from NNT_LOG_LEVEL. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static nnt_log_fn log_fn;          /* NULL: stderr */
static void *log_user;
static int log_level = -1;         /* -1: not read from the environment yet */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static int level_from_env(void)
{
    const char *s = getenv("NNT_LOG_LEVEL");
    if (!s || !*s)
        return NNT_LOG_WARN;
    for (int i = 0; i <= NNT_LOG_DEBUG; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
        return s[0] - '0';
    fprintf(stderr, "nnt: warning: ignoring NNT_LOG_LEVEL=%s (use error, warn, info, debug or 0-3)\n", s);
    return NNT_LOG_WARN;
}

/* Caller holds log_lock. */
static int current_level(void)
{
    if (log_level < 0)
        log_level = level_from_env();
    return log_level;
}

int nnt_log_set(nnt_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = fn ? user : NULL;
    pthread_mutex_unlock(&log_lock);
    return NNT_OK;
}

int nnt_log_set_level(int level)
{
    if (level < NNT_LOG_ERROR || level > NNT_LOG_DEBUG)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_log_set_level: level %d is not in 0..3", level);
    pthread_mutex_lock(&log_lock);
    log_level = level;
    pthread_mutex_unlock(&log_lock);
    return NNT_OK;
}

int nnt_log_get_level(int *level)
{
    if (!level)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_log_get_level: level is NULL");
    pthread_mutex_lock(&log_lock);
    *level = current_level();
    pthread_mutex_unlock(&log_lock);
    return NNT_OK;
}

void nnt_vlog(int level, const char *fmt, va_list ap)
{
    char msg[1024];
    pthread_mutex_lock(&log_lock);
    int enabled = level <= current_level();
    nnt_log_fn fn = log_fn;
    void *user = log_user;
    pthread_mutex_unlock(&log_lock);
    if (!enabled)
        return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (fn)
        fn(level, msg, user);
    else
        fprintf(stderr, "nnt: %s%s\n", level == NNT_LOG_ERROR ? "error: " :
                level == NNT_LOG_WARN ? "warning: " : "", msg);
}

void nnt_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nnt_vlog(level, fmt, ap);
    va_end(ap);
}
