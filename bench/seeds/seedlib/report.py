"""What an experiment leaves: NAME.csv (every measured row), NAME.svg (the
plot, its caption inside), NAME.md (a markdown fragment: the plot, the
caption, a table of our figures, the paper's figures beside them, what
ran where, date, machine, commit and command) and NAME.json (the same
metadata, for tools). `seeds.py --publish` assembles the fragments into
docs/results.md."""

import csv
import json
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Deterministic SVGs: the same figures give the same file.
matplotlib.rcParams["svg.hashsalt"] = "fulmar-seeds"
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["font.size"] = 9
matplotlib.rcParams["axes.grid"] = True
matplotlib.rcParams["grid.alpha"] = 0.3

# One colour per system, the same in every plot.
COLORS = {
    "fulmar": "#1f77b4",
    "fulmar-bench": "#17becf",
    "fulmar-rwt": "#9467bd",
    "fulmar-deep": "#aec7e8",
    "fulmar-rwt-deep": "#c5b0d5",
    "fulmar-socket": "#8c564b",
    "fulmar-rwt-socket": "#c49c94",
    "ovs": "#d62728",
    "linux-bridge": "#2ca02c",
    "linux-ip": "#ff7f0e",
    "direct": "#7f7f7f",
    "paper": "#000000",
}


def color(system):
    for k in sorted(COLORS, key=len, reverse=True):
        if system.startswith(k):
            return COLORS[k]
    return None


class Result:
    def __init__(self, name, seed, title):
        self.name, self.seed, self.title = name, seed, title
        self.rows = []
        self.caption = ""  # what the plot shows and how (also drawn under the plot)
        self.setup = ""  # what ran where
        self.paper = []  # (what the paper measured, its figure)
        self.findings = []  # short sentences on what this run shows
        self.table = None  # (headers, rows) for the markdown fragment
        self.meta = {}

    def add(self, **row):
        self.rows.append(row)
        return row

    def columns(self):
        cols = []
        for r in self.rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
        return cols

    def write_csv(self, path):
        cols = self.columns()
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            for r in self.rows:
                w.writerow({k: fmt_csv(r.get(k)) for k in cols})

    def write_md(self, path, svg_name):
        m = self.meta
        lines = [f"### {self.name}: {self.title} (seed {self.seed})", ""]
        lines += [f"![{self.name}]({svg_name})", ""]
        if self.caption:
            lines += [self.caption, ""]
        if self.table:
            heads, rows = self.table
            lines.append("| " + " | ".join(heads) + " |")
            lines.append("|" + "---|" * len(heads))
            for r in rows:
                lines.append("| " + " | ".join(str(x) for x in r) + " |")
            lines.append("")
        if self.paper:
            lines.append(f"The paper (seed {self.seed}):")
            lines.append("")
            for what, fig in self.paper:
                lines.append(f"- {what}: {fig}")
            lines.append("")
        if self.findings:
            lines.append("What this run shows:")
            lines.append("")
            for f in self.findings:
                lines.append(f"- {f}")
            lines.append("")
        lines.append(
            f"Setup: {self.setup} Measured {m.get('date')} ({m.get('size')} size, "
            f"{m.get('seconds', 0):.0f} s) on {m.get('machine')}; fulmar {m.get('commit')}, "
            f"Open vSwitch {m.get('ovs') or 'absent'}; load average before {m.get('load_before')}, "
            f"after {m.get('load_after')}. `{m.get('command')}`; every row in "
            f"[{self.name}.csv]({self.name}.csv)."
        )
        lines.append("")
        with open(path, "w") as f:
            f.write("\n".join(lines))

    def write_json(self, path):
        with open(path, "w") as f:
            json.dump({"name": self.name, "seed": self.seed, "title": self.title, "caption": self.caption,
                       "setup": self.setup, "paper": self.paper, "findings": self.findings, "table": self.table,
                       "meta": self.meta, **self.meta}, f, indent=1)

    @classmethod
    def load(cls, name, csv_path, json_path):
        """A result as write_csv and write_json left it (numbers parsed back)."""
        with open(json_path) as f:
            d = json.load(f)
        res = cls(name, d["seed"], d["title"])
        res.caption, res.setup, res.findings = d.get("caption", ""), d.get("setup", ""), d.get("findings", [])
        res.paper = [tuple(p) for p in d.get("paper", [])]
        res.table = d.get("table")
        keys = ("date", "size", "machine", "commit", "ovs", "load_before", "load_after", "command", "seconds", "ok")
        res.meta = d.get("meta") or {k: d[k] for k in keys if k in d}
        with open(csv_path, newline="") as f:
            res.rows = [{k: parse(v) for k, v in r.items()} for r in csv.DictReader(f)]
        return res


def parse(v):
    """A CSV cell back to None, bool, int, float or text."""
    if v == "":
        return None
    if v in ("True", "False"):
        return v == "True"
    for t in (int, float):
        try:
            return t(v)
        except ValueError:
            pass
    return v


def fmt_csv(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def figure(ncols=1, nrows=1, width=None, height=3.4):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width or 4.6 * ncols + 0.6, height * nrows),
                             squeeze=False)
    return fig, [a for row in axes for a in row]


def label_axes(ax, xlabel, ylabel):
    """Labels an axes' x and y and draws its legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


def save(fig, res, path):
    """Titles the figure, draws the caption under it and writes the SVG."""
    fig.suptitle(f"{res.name}: {res.title}", fontsize=10, fontweight="bold")
    text = (res.caption + (" " + res.setup if res.setup else "")).replace("`", "")
    wrapped = textwrap.fill(text, width=int(fig.get_figwidth() * 17))
    n = wrapped.count("\n") + 1
    h = fig.get_figheight()
    extra = 0.118 * n + 0.12
    fig.set_figheight(h + extra)
    fig.tight_layout(rect=(0, extra / (h + extra), 1, 0.95))
    fig.text(0.01, 0.01, wrapped, fontsize=7, va="bottom", ha="left", color="#333333")
    fig.savefig(path, format="svg", metadata={"Date": None})
    if os.environ.get("SEEDS_PNG"):  # a bitmap beside it, for looking at
        fig.savefig(str(path)[:-4] + ".png", format="png", dpi=90)
    plt.close(fig)


def num(v, digits=3):
    """Formats a number for a table: a few significant digits, '–' for None."""
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"
