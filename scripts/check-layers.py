#!/usr/bin/env python3
"""Checks that crates and modules import only downward.

Crates: every crate of the workspace sits on one level of CRATE_LEVELS
(lowest first), and its `[dependencies]` and `[build-dependencies]` may
name only crates of a lower level (dev-dependencies are free).

Modules: in every crate, no modules import each other in a circle. The
crates in LAYERS also declare their module layers, lowest first: a module
may use items of its own layer or of a lower one, never of a higher one.
Within a layer any import is allowed as long as it does not close a cycle.

What counts as an import: every `use` of `crate::`, `super::` or `self::`
paths (grouped and nested uses expanded) and every such path written in
code, outside comments and outside test code (`tests.rs`, `tests/`, and a
`#[cfg(test)] mod tests { ... }` block). A path is resolved to the module
that defines the item: through child modules, and through the `pub use`
re-exports of `lib.rs` and `mod.rs` files, which only re-export (their own
`pub use` lines are not imports). A glob (`use x::*`) of a re-exporting
module counts as an import of everything it re-exports.

Usage: scripts/check-layers.py [--graph] [ROOT]   (ROOT: the workspace)
Exit status 1 and one line per violation when a rule is broken.
"""

import os
import re
import sys

# Crate levels, lowest first: (name, crates). A crate may depend on crates
# of lower levels only; crates on one level are independent of each other.
# docs/architecture.md mirrors this table.
CRATE_LEVELS = [
    ("wire and bytes", ["ofp", "packet"]),
    ("text and lookups", ["flowtext", "classifier"]),
    ("switch semantics, native bindings", ["pipeline", "dpdk-sys"]),
    ("ports and threads", ["dataplane"]),
    ("configuration model", ["datastore"]),
    ("controller channels", ["agent"]),
    ("the daemon", ["runtime"]),
    ("management protocols", ["mgmt", "ovsdb", "snmp", "ofconfig"]),
    ("the benchmark harness", ["bench"]),
    ("the command", ["fulmar"]),
]

# Module layers, lowest first: (name, module path prefixes). A module
# belongs to the first layer one of whose prefixes is the module or one of
# its ancestors. The crate root (lib.rs) may only declare and re-export,
# unless a layer names it ("<root>"): then its items are of that layer.
# Crates not listed here get the no-cycle rule only.
LAYERS = {
    "pipeline": [
        ("model", ["model", "normal"]),
        ("tables", ["tables"]),
        ("switch state", ["switch_state", "features"]),
        ("datapath", ["datapath"]),
    ],
    "packet": [
        ("bytes", ["checksum", "huge", "view"]),
        ("headers", ["ethernet", "vlan", "mpls", "pbb", "arp", "ipv4", "ipv6",
                     "icmpv4", "icmpv6", "tcp", "udp", "sctp"]),
        ("key", ["flow_key", "set_field"]),
        ("buffer and rewrites", ["buffer", "fixup", "ttl"]),
        ("test support", ["fuzz", "testutil"]),
    ],
    "ofp": [
        ("wire", ["error", "consts", "wire", "channel"]),
        ("fields", ["oxm", "header"]),
        ("actions and ports", ["action", "port"]),
        ("instructions", ["instruction"]),
        ("bodies", ["flow_mod", "flow_removed", "group_mod", "meter_mod",
                    "packet_in", "packet_out", "port_status", "queue_config",
                    "role", "switch_config", "table_mod", "async_config",
                    "echo", "error_msg", "hello", "stats", "table_features"]),
        ("multipart", ["multipart"]),
        ("messages", ["message", "framer", "reply_parts"]),
        ("test support", ["strategies", "message_proptests"]),
    ],
    "runtime": [
        ("shared names", ["error", "options", "signals", "standalone", "ports"]),
        ("tables", ["saved", "tables"]),
        ("workers", ["worker"]),
        ("bridge", ["bridge"]),
        ("a bridge's outside", ["openflow", "links", "report", "running"]),
        ("the runtime", ["<root>", "controllers", "daemon"]),
    ],
    "dataplane": [
        ("primitives", ["pool", "wake", "placement", "flush", "dispatch", "qos", "snapshot",
                        "delay", "sparse"]),
        ("the port trait", ["port", "sys", "spsc"]),
        ("capture formats", ["capture"]),
        ("backends", ["afpacket", "afxdp", "rawsock", "tap", "tunnel", "memory", "patch",
                      "pcap", "link", "dpdk"]),
        ("thread settings and counters", ["threads::types", "threads::counters",
                                          "threads::cycles"]),
        ("thread parts", ["threads::tx", "threads::rings", "threads::spawn", "threads::mailbox"]),
        ("the thread set", ["threads::registry", "threads::shutdown"]),
        ("thread loops", ["threads::rtc", "threads::split"]),
        ("threads", ["threads", "settings"]),
    ],
    "ofconfig": [
        ("xml and framing", ["xml", "framing"]),
        ("errors", ["error"]),
        ("model", ["model"]),
        ("operations", ["rpc"]),
        ("server", ["server"]),
    ],
}

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?"
    r"(?:struct|enum|fn|const|static|type|trait|union|mod|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)


def strip_comments(text):
    """Removes // and /* */ comments and the contents of string literals."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            # a char literal ('x' or '\n'), not a lifetime
            j = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_tests(text):
    """Cuts `#[cfg(test)] mod NAME { ... }` blocks."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        text = text[: m.start()] + text[j + 1:]


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            i = p.find("{")
            if i >= 0:
                head = [x for x in p[:i].split("::") if x]
                walk(prefix + head, p[i + 1: p.rindex("}")])
            else:
                out.append("::".join(prefix + [p.split("@")[0]]))

    walk([], tree)
    return out


class Crate:
    def __init__(self, name, src):
        self.name = name
        self.src = src
        self.files = {}  # module path -> file
        for d, _, fs in os.walk(src):
            for f in fs:
                if not f.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(d, f), src)
                parts = rel[:-3].split(os.sep)
                if parts[-1] == "mod" or parts in (["lib"], ["main"]):
                    parts = parts[:-1]
                if "tests" in parts or parts[-1:] == ["tests"]:
                    continue
                self.files["::".join(parts)] = rel
        # Modules declared under #[cfg(test)] are test code.
        for m, rel in list(self.files.items()):
            raw = open(os.path.join(src, rel), encoding="utf-8").read()
            for tm in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", raw):
                child = (m + "::" if m else "") + tm.group(1)
                for k in [k for k in self.files if k == child or k.startswith(child + "::")]:
                    del self.files[k]
        self.text = {}
        self.items = {}
        self.reexports = {}  # module -> {name: full path}
        self.globs = {}  # module -> [module paths re-exported by glob]
        self.external = {}  # module -> names it re-exports from other crates
        for m, rel in self.files.items():
            raw = open(os.path.join(src, rel), encoding="utf-8").read()
            t = strip_tests(strip_comments(raw))
            self.text[m] = t
            self.items[m] = set(ITEM.findall(t))
            rex, globs, ext = {}, [], set()
            for um in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", t):
                for p in expand_use(um.group(1)):
                    full = self.absolute(p, m)
                    if full is None:
                        ext.add(p.split("::")[-1])
                        continue
                    last = full.split("::")[-1]
                    if last == "*":
                        globs.append(full[:-3])
                    else:
                        rex[last] = full
            self.reexports[m] = rex
            self.globs[m] = globs
            self.external[m] = ext

    def children(self, m):
        pre = m + "::" if m else ""
        return {k[len(pre):] for k in self.files if k.startswith(pre) and "::" not in k[len(pre):] and k != m}

    def is_reexport_module(self, m):
        """lib.rs, main.rs, a mod.rs, or a `NAME.rs` beside its `NAME/`
        directory (the same module as `NAME/mod.rs`)."""
        rel = self.files[m]
        if rel.endswith("mod.rs") or rel in ("lib.rs", "main.rs"):
            return True
        return os.path.isdir(os.path.join(self.src, rel[:-3]))

    def absolute(self, path, cur):
        parts = path.split("::")
        base = cur.split("::") if cur else []
        if parts[0] == "crate":
            return "::".join(parts[1:])
        if parts[0] in ("super", "self"):
            b = list(base)
            while parts and parts[0] in ("super", "self"):
                if parts[0] == "super":
                    b = b[:-1]
                parts = parts[1:]
            return "::".join(b + parts)
        # A path relative to the current module (a child module name).
        if cur is not None and "::".join(base + parts[:1]) in self.files and parts[0] not in ("std", "core"):
            return "::".join(base + parts)
        return None

    def resolve(self, full, depth=0):
        """The module defining the item `full` names (a module path if it
        names a module), following re-exports; a list (a glob)."""
        if depth > 20:
            return []
        parts = [p for p in full.split("::") if p]
        mod = ""
        i = 0
        while i < len(parts) and ("::".join(parts[: i + 1]) in self.files):
            mod = "::".join(parts[: i + 1])
            i += 1
        rest = parts[i:]
        if not rest:
            return [mod]
        if rest == ["*"]:
            if mod in self.files and self.is_reexport_module(mod):
                out = []
                for target in self.reexports[mod].values():
                    out += self.resolve(target, depth + 1)
                for g in self.globs[mod]:
                    out += self.resolve(g + "::*", depth + 1)
                # Items the re-exporting module defines itself.
                if self.items.get(mod, set()) - self.children(mod):
                    out.append(mod)
                return out or [mod]
            return [mod]
        name = rest[0]
        if name in self.items.get(mod, ()):
            return [mod]
        if name in self.external.get(mod, ()):
            # Another crate's item, re-exported: not an import of `mod`.
            return []
        if name in self.reexports.get(mod, {}):
            return self.resolve(self.reexports[mod][name], depth + 1)
        for g in self.globs.get(mod, []):
            r = self.resolve(g + "::" + name, depth + 1)
            if r:
                return r
        return [mod]

    def named(self, full):
        """The deepest module a path names on its way (before following
        re-exports)."""
        parts = [p for p in full.split("::") if p]
        mod = ""
        for i in range(len(parts)):
            if "::".join(parts[: i + 1]) in self.files:
                mod = "::".join(parts[: i + 1])
            else:
                break
        return mod

    def edges(self):
        """(resolved edges for cycles, named modules for layers)."""
        out, via = {}, {}
        for m, t in self.text.items():
            es, vs = set(), set()
            reexporter = self.is_reexport_module(m)
            body = t
            for um in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", t):
                if um.group(1) and reexporter:
                    continue
                for p in expand_use(um.group(2)):
                    full = self.absolute(p, m)
                    if full is None:
                        continue
                    vs.add(self.named(full))
                    for r in self.resolve(full):
                        es.add(r)
            body = re.sub(r"\buse\s+[^;]+;", "", body)
            for pm in re.finditer(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)", body):
                full = self.absolute(pm.group(1), m)
                if full is None:
                    continue
                vs.add(self.named(full))
                for r in self.resolve(full):
                    es.add(r)
            es.discard(m)
            vs.discard(m)
            # A path through the crate root names where it leads (its
            # re-exports followed), not the root: the root's own items are
            # in `es` when used.
            vs.discard("")
            out[m] = es
            via[m] = vs | es
        return out, via


def layer_of(crate, m):
    for i, (_, prefixes) in enumerate(LAYERS[crate]):
        for p in prefixes:
            if m == "" and p == "<root>":
                return i
            if m != "" and (m == p or m.startswith(p + "::")):
                return i
    return None if m == "" else -1


def cargo_deps(path):
    """The names of a Cargo.toml's [dependencies] and [build-dependencies]
    (target-specific tables included)."""
    import tomllib

    with open(path, "rb") as f:
        doc = tomllib.load(f)
    tables = [doc]
    tables += list(doc.get("target", {}).values())
    out = set()
    for t in tables:
        for key in ("dependencies", "build-dependencies"):
            for name, spec in t.get(key, {}).items():
                if isinstance(spec, dict) and "package" in spec:
                    name = spec["package"]
                out.add(name)
    return out


def check_crates(root, crates):
    """One line per crate dependency that does not point down."""
    bad = []
    level = {}
    for i, (_, names) in enumerate(CRATE_LEVELS):
        for n in names:
            level[n] = i
    for crate in crates:
        if crate not in level:
            bad.append(f"crate {crate} is on no declared level (CRATE_LEVELS in scripts/check-layers.py)")
            continue
        for dep in sorted(cargo_deps(os.path.join(root, "crates", crate, "Cargo.toml"))):
            if dep in level and level[dep] >= level[crate]:
                bad.append(
                    f"crate {crate} ({CRATE_LEVELS[level[crate]][0]}) depends on {dep} "
                    f"({CRATE_LEVELS[level[dep]][0]}), not a lower level"
                )
    return bad


def cycles(graph):
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            strong(v)
    return sccs


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = "--graph" in sys.argv
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    crates = sorted(
        d for d in os.listdir(os.path.join(root, "crates"))
        if os.path.isfile(os.path.join(root, "crates", d, "Cargo.toml"))
    )
    bad = check_crates(root, crates)
    for crate in crates:
        c = Crate(crate, os.path.join(root, "crates", crate, "src"))
        g, via = c.edges()
        for m in sorted(g):
            if show:
                print(f"{crate}::{m or '<root>'} -> {', '.join(sorted(x or '<root>' for x in g[m]))}")
            if crate not in LAYERS:
                continue
            lm = layer_of(crate, m)
            if lm == -1:
                bad.append(f"{crate}: module {m} is in no declared layer (scripts/check-layers.py)")
            if lm is None:
                # A crate root no layer names: its items count as the lowest layer.
                lm = 0
            for d in sorted(via[m]):
                ld = layer_of(crate, d)
                if ld is None:
                    ld = 0
                if ld > lm >= 0:
                    bad.append(
                        f"{crate}: {m} ({LAYERS[crate][lm][0]}) imports {d} "
                        f"({LAYERS[crate][ld][0]}), a higher layer"
                    )
        for comp in cycles(g):
            bad.append(f"{crate}: modules import each other in a circle: {', '.join(x or '<root>' for x in comp)}")
    for b in bad:
        print(b)
    if bad:
        print(f"check-layers: {len(bad)} problem(s)")
        return 1
    layered = ", ".join(sorted(LAYERS))
    print(f"check-layers: {len(crates)} crates depend only downward; no module cycles in any; "
          f"modules of {layered} import only downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
