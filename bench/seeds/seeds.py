#!/usr/bin/env python3
"""The seed papers' experiments on fulmar, with Open vSwitch beside it.

    bench/seeds/run.sh [NAME|SEED...] [--quick|--smoke] [--out DIR] [--prefix P] [--lock FILE]
    bench/seeds/run.sh --list
    bench/seeds/run.sh --publish [--out DIR]
    bench/seeds/run.sh --replot [NAME...] [--out DIR]

NAME is an experiment (001-size) or a seed (001: all of its experiments);
none: every experiment. Each writes OUT/NAME.csv, NAME.svg, NAME.md and
NAME.json (default OUT: target/seeds, target/seeds-quick with --quick,
target/seeds-smoke with --smoke). --lock FILE holds an flock on FILE
around each experiment (e.g. /tmp/fulmar-heavy.lock), so other jobs can
run between experiments. --publish copies OUT's plots and tables into
docs/results/seeds/ and rewrites the "Seed experiments" part of
docs/results.md between its markers (an experiment OUT has no results
for keeps its section). See bench/seeds/README.md.
"""

import argparse
import fcntl
import fnmatch
import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seedlib import EXPERIMENTS  # noqa: E402
from seedlib import exp_000, exp_001, exp_002, exp_003, exp_004  # noqa: E402,F401  (registration)
from seedlib.core import ROOT, Ctx, ExperimentError, git_commit, loadavg, machine, ovs_version, pin_harness  # noqa: E402
from seedlib.report import Result, save  # noqa: E402

ORDER = ["001", "000", "002", "003", "004"]
BEGIN, END = "<!-- seeds:begin -->", "<!-- seeds:end -->"


def ordered():
    return sorted(EXPERIMENTS, key=lambda n: (ORDER.index(EXPERIMENTS[n]["seed"]), list(EXPERIMENTS).index(n)))


def select(names):
    if not names:
        return ordered()
    out = []
    for n in names:
        hits = [e for e in ordered() if e == n or EXPERIMENTS[e]["seed"] == n or fnmatch.fnmatch(e, n)]
        if not hits:
            raise SystemExit(f"unknown experiment {n!r}; --list lists them")
        out += [h for h in hits if h not in out]
    return out


def run_one(name, args, out):
    e = EXPERIMENTS[name]
    res = Result(name, e["seed"], e["title"])
    ctx = Ctx(args.size, args.prefix, out, args.fulmar, systems=args.systems)
    lock = None
    if args.lock:
        lock = open(args.lock, "a")
        t = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        if time.monotonic() - t > 1:
            print(f"  (waited {time.monotonic() - t:.0f} s for {args.lock})", flush=True)
    print(f"== {name}: {e['title']} (seed {e['seed']}, {args.size})", flush=True)
    res.meta.update(
        date=ctx.stamp(), size=args.size, machine=machine(), commit=git_commit(), ovs=ovs_version(),
        load_before=loadavg(), command=command_line(name, args),
    )
    t0 = time.monotonic()
    ok = True
    try:
        e["fn"](ctx, res)
    except Exception as err:  # noqa: BLE001 - report it, clean up, go on with the next
        ok = False
        print(f"  FAILED: {err}", flush=True)
        if not isinstance(err, ExperimentError):
            traceback.print_exc()
        res.findings.append(f"The run failed: {err}")
    finally:
        ctx.cleanup()
        ctx.remove_work()
        if lock:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()
    res.meta.update(seconds=time.monotonic() - t0, load_after=loadavg(), ok=ok)
    if not res.rows:
        print(f"  no rows: nothing written for {name}", flush=True)
        return False
    res.write_csv(out / f"{name}.csv")
    ok = draw(res, out) and ok
    for f in res.findings:
        print(f"  * {f}", flush=True)
    print(f"  -> {out}/{name}.csv, .svg, .md ({res.meta['seconds']:.0f} s)", flush=True)
    return ok


def draw(res, out):
    """Writes NAME.svg, NAME.md and NAME.json from res."""
    ok = True
    try:
        fig = EXPERIMENTS[res.name]["plot"](res)
        save(fig, res, out / f"{res.name}.svg")
    except Exception as err:  # noqa: BLE001 - a plot bug must not lose the CSV
        traceback.print_exc()
        print(f"  plot failed: {err}", flush=True)
        ok = False
    res.write_md(out / f"{res.name}.md", f"{res.name}.svg")
    res.write_json(out / f"{res.name}.json")
    return ok


def replot(names, out):
    """Draws OUT/NAME.svg and NAME.md again from NAME.csv and NAME.json
    (after a change to a plot or a caption; nothing is measured)."""
    done = 0
    for name in names:
        csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
        if not csv_path.exists() or not json_path.exists():
            continue
        res = Result.load(name, csv_path, json_path)
        draw(res, out)
        done += 1
        print(f"redrew {out}/{name}.svg and .md")
    if not done:
        raise SystemExit(f"nothing to redraw in {out}")


def command_line(name, args):
    size = {"default": "", "quick": " --quick", "smoke": " --smoke"}[args.size]
    return f"sudo bench/seeds/run.sh {name}{size}"


def anchor(name, title, seed):
    """GitHub's anchor of the fragment's heading `### NAME: TITLE (seed N)`."""
    text = f"{name}: {title} (seed {seed})".lower()
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def published_sections(body):
    """The sections and index rows of the experiments a published part of
    docs/results.md holds: ({name: section text}, {name: index row})."""
    sections, rows = {}, {}
    heads = [m for m in re.finditer(r"^### ([0-9a-z-]+): ", body, re.M) if m.group(1) in EXPERIMENTS]
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(body)
        tail = body.find("\nNot measured yet:", m.start(), end)
        sections[m.group(1)] = body[m.start():tail if tail >= 0 else end].rstrip() + "\n"
    for line in body.splitlines():
        m = re.match(r"\| \[([0-9a-z-]+)\]\(#", line)
        if m and m.group(1) in EXPERIMENTS:
            rows[m.group(1)] = line
    return sections, rows


def publish(out):
    """Copies out/*.svg and *.csv to docs/results/seeds/ and rewrites the
    part of docs/results.md between the markers from out/*.md; an
    experiment OUT has no results for keeps the section it had."""
    dest = ROOT / "docs" / "results" / "seeds"
    dest.mkdir(parents=True, exist_ok=True)
    results = ROOT / "docs" / "results.md"
    doc = results.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{results}: no {BEGIN} ... {END} markers to replace between")
    head, rest = doc.split(BEGIN, 1)
    old_body, tail = rest.split(END, 1)
    old_sections, old_rows = published_sections(old_body)
    parts = []
    missing = []
    kept = []
    index = ["| experiment | seed | measured | first finding |", "|---|---|---|---|"]
    for name in ordered():
        md = out / f"{name}.md"
        if not md.exists():
            if name in old_sections:
                kept.append(name)
                parts.append(old_sections[name])
                index.append(old_rows.get(name) or
                             f"| [{name}](#{anchor(name, EXPERIMENTS[name]['title'], EXPERIMENTS[name]['seed'])}) | "
                             f"{EXPERIMENTS[name]['seed']} | ? | – |")
            else:
                missing.append(name)
            continue
        for ext in ("svg", "csv"):
            src = out / f"{name}.{ext}"
            if src.exists():
                shutil.copyfile(src, dest / f"{name}.{ext}")
        meta = json.loads((out / f"{name}.json").read_text()) if (out / f"{name}.json").exists() else {}
        first = (meta.get("findings") or ["–"])[0].replace("|", "/")
        index.append(f"| [{name}](#{anchor(name, EXPERIMENTS[name]['title'], EXPERIMENTS[name]['seed'])}) | "
                     f"{EXPERIMENTS[name]['seed']} | {meta.get('date', '?')}, {meta.get('size', '?')} size | {first} |")
        text = md.read_text()
        text = text.replace(f"]({name}.svg)", f"](results/seeds/{name}.svg)")
        text = text.replace(f"]({name}.csv)", f"](results/seeds/{name}.csv)")
        parts.append(text.rstrip() + "\n")
    body = "\n".join(index) + "\n\n" + "\n".join(parts)
    if missing:
        body += "\nNot measured yet: " + ", ".join(missing) + ".\n"
    results.write_text(head + BEGIN + "\n" + body + END + tail)
    print(f"published {len(parts) - len(kept)} experiments into {results} and {dest}/" +
          (f"; kept as they were: {', '.join(kept)}" if kept else "") +
          (f"; missing: {', '.join(missing)}" if missing else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", dest="size", action="store_const", const="quick")
    g.add_argument("--smoke", dest="size", action="store_const", const="smoke")
    ap.add_argument("--out")
    ap.add_argument("--prefix", default="sd", help="of every namespace and link (default sd)")
    ap.add_argument("--lock", help="hold an flock on this file around each experiment")
    ap.add_argument("--fulmar", default=os.environ.get("FULMAR", str(ROOT / "target/release/fulmar")))
    ap.add_argument("--systems", type=lambda v: [s for s in v.split(",") if s],
                    help="comma-separated: only these systems where an experiment compares several "
                         "(003-forwarding, 003-fairness; e.g. fulmar,fulmar-rwt,ovs)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--publish", action="store_true")
    ap.add_argument("--replot", action="store_true", help="redraw plots and tables from OUT's CSV and JSON files")
    args = ap.parse_args()
    args.size = args.size or "default"
    out = Path(args.out or ROOT / "target" / ("seeds" if args.size == "default" else f"seeds-{args.size}"))
    if args.list:
        for n in ordered():
            e = EXPERIMENTS[n]
            print(f"{n:16s} seed {e['seed']}  ~{e['minutes'][0]} min quick, ~{e['minutes'][1]} min default  "
                  f"{e['title']}")
        return 0
    if args.replot:
        replot(select(args.names), out)
        return 0
    if args.publish:
        publish(out)
        return 0
    if os.geteuid() != 0:
        raise SystemExit("bench/seeds: needs root (network namespaces, veths, Open vSwitch)")
    if not os.access(args.fulmar, os.X_OK):
        raise SystemExit(f"no fulmar at {args.fulmar} (cargo build --release -p fulmar)")
    names = select(args.names)
    out.mkdir(parents=True, exist_ok=True)
    pin_harness()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    failed = []
    for n in names:
        if not run_one(n, args, out):
            failed.append(n)
    print(f"\n{len(names) - len(failed)}/{len(names)} experiments done in {time.monotonic() - t0:.0f} s; "
          f"results in {out}/" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
