"""``rnngap predict TASK --inputs FILE --out FILE [--model NAME]``.

Each task has its own module ``checks/predict_<task>.py`` defining
``add_arguments(parser)`` and ``run(args) -> int``; this command only
dispatches. Tasks: ``ar`` (Zoology MQAR layout, .npy in/out) and ``istree``
(the paper's textual format, JSON lines in/out).
"""
from __future__ import annotations

import argparse
import importlib

from rnngap.checks.io.errors import UsageError

# Lazy imports: the functions below import rnngap's heavier modules
# (the task specs)
# only when the command runs, so that `rnngap --help` stays fast.


def commands() -> dict[str, str]:
    """predict subcommand -> help, from the task specs that name one (``ar`` runs MQAR)."""
    from rnngap.checks.tasks import TASKS
    return {s.predict: s.predict_help for s in TASKS.values() if s.predict is not None}


EXAMPLES = {
    "ar": "examples:\n  rnngap predict ar --inputs checks/data/mqar_sample.npz --out predictions.npz\n"
          "  rnngap predict ar --inputs X.npy --out P.npy\n",
    "istree": "examples:\n  rnngap predict istree --inputs checks/data/istree_official_sample.jsonl --field cot_text\n"
              "  rnngap predict istree --inputs graphs.jsonl --out tours.jsonl --model rag\n",
}
EXAMPLES["all"] = "examples:\n" + "".join(v.split("\n", 1)[1].split("\n", 1)[0] + "\n" for v in list(EXAMPLES.values()))


def add_command(sub) -> None:
    p = sub.add_parser("predict", help="run a construction over an input file",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES["all"])
    tsub = p.add_subparsers(dest="task", required=True, parser_class=type(p))
    for task, helptext in commands().items():
        tp = tsub.add_parser(task, help=helptext, formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog=EXAMPLES.get(task))
        try:
            mod = importlib.import_module(f"{__package__}.predict_{task}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.predict_{task}":
                raise
            mod = None
        if mod is None:
            tp.set_defaults(func=_missing(task))
            tp.add_argument("--inputs")
            tp.add_argument("--out")
            tp.add_argument("--model")
        else:
            mod.add_arguments(tp)
            tp.set_defaults(func=mod.run)


def _missing(task):
    def run(args):
        raise UsageError(f"predict {task}: not available in this version")
    return run
