"""The seed experiments' library (see bench/seeds/README.md)."""

import sys

EXPERIMENTS = {}


def experiment(name, seed, title, minutes, plot):
    """Registers an experiment: fn(ctx, res) measures into res (a
    report.Result: rows, caption, setup, the paper's figures, findings, a
    table); plot names the function of its module that draws res (from its
    rows alone, so that --replot can draw a CSV again). minutes: (quick,
    default) rough duration, for --list."""

    def deco(fn):
        EXPERIMENTS[name] = {"seed": seed, "title": title, "fn": fn, "minutes": minutes,
                             "plot": lambda res: getattr(sys.modules[fn.__module__], plot)(res)}
        return fn

    return deco
