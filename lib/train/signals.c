/* SPDX-License-Identifier: MIT */
/* nnt_trainer_handle_signals: a run that ends from outside (Slurm, systemd, docker stop with
 * SIGTERM; Ctrl-C) stops after the step in progress so that its caller saves it, and a
 * scheduler's warning (SIGUSR1) writes a checkpoint with the run going on. The handlers set
 * the trainer's flags only (async-signal-safe); the loop acts on them at a step boundary,
 * where under MPI the ranks agree (a signal to one rank stops or saves every rank). */
#define _POSIX_C_SOURCE 200809L
#include "trainer_impl.h"

#include <signal.h>
#include <string.h>

static const int signals[3] = {SIGINT, SIGTERM, SIGUSR1};
static struct sigaction before[3];       /* the actions there were (put back on 0)  */
static nnt_trainer *volatile handled;    /* the trainer the handlers act on         */

static void on_signal(int sig)
{
    nnt_trainer *tr = handled;
    if (!tr)
        return;
    if (sig == SIGUSR1) {
        if (nnt_trainer_request_save(tr) != NNT_OK)
            tr->save_refused = 1;   /* (said in the log at the next step boundary) */
        return;
    }
    tr->stop_signal = sig;
    tr->stop = 1;
    /* a second one: the action there was before (by default the process ends at once) */
    sigaction(sig, &before[sig == SIGINT ? 0 : 1], NULL);
}

NNT_API int nnt_trainer_handle_signals(nnt_trainer *tr, int on)
{
    const char *fn = "nnt_trainer_handle_signals";
    NNT_TRY(nnt_trainer_check(tr, fn));
    if (on != 0 && on != 1)
        return nnt_fail(tr->ctx, NNT_E_INVAL, "%s: on %d (use 0 or 1)", fn, on);
    if (!on) {
        if (handled == tr)
            nnt_trainer_release_signals(tr);
        return NNT_OK;
    }
    if (handled && handled != tr)
        return nnt_fail(tr->ctx, NNT_E_STATE, "%s: another trainer handles the signals (turn "
                        "them off there first)", fn);
    if (handled == tr)
        return NNT_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    handled = tr;
    for (int i = 0; i < 3; i++)
        sigaction(signals[i], &sa, &before[i]);
    return NNT_OK;
}

void nnt_trainer_release_signals(const nnt_trainer *tr)
{
    if (handled != tr)
        return;
    for (int i = 0; i < 3; i++)
        sigaction(signals[i], &before[i], NULL);
    handled = NULL;
}
