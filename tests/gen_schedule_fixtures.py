#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate tests/fixtures/schedules/hf_lr.txt: the learning rates of transformers' schedules
(transformers.optimization: get_linear_schedule_with_warmup,
get_cosine_with_min_lr_schedule_with_warmup, get_wsd_schedule with each decay_type), read
from the scheduler of a real torch optimizer after each scheduler.step(), for
tests/test_optim.c (nnt_optim_lr_at of the same options).

Not run by CI (it needs PyTorch + transformers); run once and commit the output:

    /tmp/venv-torch/bin/python tests/gen_schedule_fixtures.py [--out tests/fixtures/schedules]

How the steps line up: transformers' Trainer makes its update number i (from 0) with the
learning rate lr * lambda(i), so its first update runs at lambda(0) (0 with a warmup); nnt's
update number s (from 1) runs at lr * lambda(s) of the same formula: the scheduler's
get_last_lr() after s calls of scheduler.step() is nnt's learning rate at update s.

transformers' WSD warms up from min_lr (its factor runs from min_lr_ratio to 1), nnt's every
schedule from 0: the WSD cases with min_lr > 0 list only the steps after the warmup
("from" in the file); the one with min_lr 0 lists them all.

The file: for each case a line
    case NAME SCHEDULE SHAPE LR MIN_LR WARMUP TOTAL DECAY FROM COUNT
(SCHEDULE and SHAPE as nnt_schedule and nnt_decay_shape: 1 cosine, 2 linear, 3 wsd; 0 linear,
1 cosine, 2 1-sqrt), then COUNT lines "STEP LR" for the steps FROM, FROM + 1, ...
(%.17g, through TOTAL + 3: past the end the rate stays at min_lr; the cosine through TOTAL,
as transformers' cosine turns up again after it, where nnt's stays at min_lr).
"""
import argparse
import os

import torch
import transformers
from transformers import optimization as hfo

LR = 6e-4

CASES = [
    # name, nnt schedule, nnt shape, min_lr, warmup, total, decay, make(optimizer)
    ("linear", 2, 0, 0.0, 10, 110, 0,
     lambda o: hfo.get_linear_schedule_with_warmup(o, 10, 110)),
    ("linear_nowarmup", 2, 0, 0.0, 0, 37, 0,
     lambda o: hfo.get_linear_schedule_with_warmup(o, 0, 37)),
    ("cosine_min_lr", 1, 1, 6e-5, 10, 110, 0,
     lambda o: hfo.get_cosine_with_min_lr_schedule_with_warmup(o, 10, 110, min_lr=6e-5)),
    ("wsd_linear", 3, 0, 6e-5, 10, 110, 30,
     lambda o: hfo.get_wsd_schedule(o, 10, 30, num_training_steps=110, decay_type="linear",
                                    min_lr_ratio=0.1)),
    ("wsd_cosine", 3, 1, 6e-5, 10, 110, 30,
     lambda o: hfo.get_wsd_schedule(o, 10, 30, num_training_steps=110, decay_type="cosine",
                                    min_lr_ratio=0.1)),
    ("wsd_sqrt", 3, 2, 1.2e-4, 7, 50, 13,
     lambda o: hfo.get_wsd_schedule(o, 7, 13, num_training_steps=50, decay_type="1-sqrt",
                                    min_lr_ratio=0.2)),
    ("wsd_sqrt_zero", 3, 2, 0.0, 5, 40, 11,
     lambda o: hfo.get_wsd_schedule(o, 5, 11, num_training_steps=40, decay_type="1-sqrt")),
]


def rates(make, total):
    """nnt's learning rate at updates 1 .. total + 3 from transformers' scheduler."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=LR)
    sched = make(opt)
    out = []
    for _ in range(total + 3):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures",
                                                  "schedules"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    lines = ["# transformers %s, torch %s: tests/gen_schedule_fixtures.py" %
             (transformers.__version__, torch.__version__)]
    for name, sched, shape, min_lr, warmup, total, decay, make in CASES:
        lr = rates(make, total)
        first = warmup + 1 if sched == 3 and min_lr > 0 else 1
        # (transformers' cosine rises again past its end, nnt's stays at min_lr)
        steps = range(first, total + 1 if sched == 1 else total + 4)
        lines.append("case %s %d %d %.17g %.17g %d %d %d %d %d" %
                     (name, sched, shape, LR, min_lr, warmup, total, decay, first, len(steps)))
        lines += ["%d %.17g" % (s, lr[s - 1]) for s in steps]
    with open(os.path.join(a.out, "hf_lr.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
