#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The metric names of deploy/prometheus/ against what rdmad exports.

names.py RULES TESTS
    Every metric name the rules' expressions use is one rdmad documents
    (METRICS below), a recording rule of the same file, or one that
    Prometheus makes itself (up); every input series of the unit tests
    has a documented name and exactly the metric's labels (plus job and
    instance), with label values the daemon can write.
names.py --scrape METRICS_TEXT RULES
    Every daemon metric the rules use has its "# TYPE" line, of the
    documented type, in a /metrics scrape. Exit status 2 when some are
    missing (the daemon predates them), 1 on a wrong type.
"""

import re
import sys

import yaml

# rdmad's metrics that alerting rules may use: name -> (type, labels,
# {label: the values the daemon writes} where they are a fixed set).
# The daemon's own list is daemon/api/metrics.c and rdmad(8), REST API,
# GET /metrics.
NETLINK_KINDS = {"pd", "cq", "qp", "mr", "srq"}
# The kinds with a uverbs handle, which reclaim destroys by handle
# (rdmad(8), Orphans).
HANDLE_KINDS = {"qp", "mw", "ah", "srq", "cq", "mr", "dm", "pd", "xrcd"}
METRICS = {
    "rdmad_up": ("gauge", set(), {}),
    "rdmad_profile_up": ("gauge", {"profile"}, {}),
    "rdmad_profile_ready": ("gauge", {"profile"}, {}),
    "rdmad_objects": ("gauge", {"profile", "kind", "state"},
                      {"state": {"pending", "ready", "failed", "draining",
                                 "creating"}}),
    "rdmad_objects_lost_total": ("counter", {"profile", "kind"}, {}),
    "rdmad_objects_recreated_total": ("counter", {"profile", "kind"}, {}),
    "rdmad_object_recreate_failures_total": ("counter", {"profile", "kind"},
                                             {}),
    "rdmad_orphan_objects": ("gauge", {"profile", "device", "kind"},
                             {"kind": NETLINK_KINDS}),
    "rdmad_orphans_reclaimed_total": ("counter", {"profile", "kind"},
                                      {"kind": HANDLE_KINDS}),
    "rdmad_orphan_reclaim_failures_total": ("counter", {"profile", "kind"},
                                            {"kind": HANDLE_KINDS}),
    "rdmad_orphan_reclaim_delay_seconds": ("gauge", set(), {}),
    "rdmad_orphan_scans_total": ("counter", {"result"},
                                 {"result": {"ok", "error"}}),
    "rdmad_context_retirements_total": ("counter", set(), {}),
}
# Series Prometheus makes for each target, and the labels it adds to
# every scraped series.
PROMETHEUS = {"up": ("gauge", set(), {})}
TARGET_LABELS = {"job", "instance"}

KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on",
            "ignoring", "group_left", "group_right", "inf", "nan", "atan2"}


def expr_names(expr):
    """The metric names an expression selects: identifiers that are not
    functions, keywords, label names or parts of durations."""
    e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""',
               expr)
    e = re.sub(r"#[^\n]*", "", e)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)"
               r"\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*", e):
        word = m.group(0)
        if word.lower() in KEYWORDS or re.match(r"\s*\(", e[m.end():]):
            continue
        names.add(word)
    return names


def rules_of(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] for r in g["rules"]]


def used_names(rules):
    """{name: [where]} of what the rules read, but their own records."""
    recorded = {r["record"] for r in rules if "record" in r}
    used = {}
    for r in rules:
        for n in expr_names(r["expr"]) - recorded:
            used.setdefault(n, []).append(r.get("alert") or r["record"])
    return used


def parse_series(text):
    m = re.fullmatch(r"\s*([A-Za-z_:][\w:]*)\s*(?:\{(.*)\})?\s*", text)
    if not m:
        return None, None
    labels = dict(re.findall(r'(\w+)\s*=\s*"((?:\\.|[^"\\])*)"',
                             m.group(2) or ""))
    return m.group(1), labels


def check_files(rules_path, tests_path):
    errors = []
    used = used_names(rules_of(rules_path))
    for name, where in sorted(used.items()):
        if name in METRICS or name in PROMETHEUS:
            print(f"ok {name} ({', '.join(sorted(set(where)))})")
        else:
            errors.append(f"{rules_path}: {', '.join(sorted(set(where)))}: "
                          f"{name} is not a metric rdmad exports")
    with open(tests_path) as f:
        tests = yaml.safe_load(f)
    for i, t in enumerate(tests["tests"]):
        for s in t.get("input_series", []):
            name, labels = parse_series(s["series"])
            known = METRICS.get(name) or PROMETHEUS.get(name)
            where = f"{tests_path}: test {i + 1}: {s['series']}"
            if not known:
                errors.append(f"{where}: not a metric rdmad exports")
                continue
            _, want, values = known
            have = set(labels) - TARGET_LABELS
            if have != want or not TARGET_LABELS <= set(labels):
                errors.append(f"{where}: labels {sorted(labels)}, rdmad's "
                              f"are {sorted(want | TARGET_LABELS)}")
            for k, allowed in values.items():
                if k in labels and labels[k] not in allowed:
                    errors.append(f"{where}: {k}={labels[k]!r} is not "
                                  f"one of {sorted(allowed)}")
    for e in errors:
        print(e)
    return 1 if errors else 0


def check_scrape(text_path, rules_path):
    with open(text_path) as f:
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", f.read(), re.M))
    missing, wrong = [], []
    for name in sorted(used_names(rules_of(rules_path))):
        if name in PROMETHEUS:
            continue
        want = METRICS[name][0] if name in METRICS else None
        if name not in types:
            missing.append(name)
            print(f"missing {name}: no '# TYPE {name}' line in /metrics")
        elif want and types[name] != want:
            wrong.append(name)
            print(f"wrong {name}: /metrics says {types[name]}, the "
                  f"rules expect a {want}")
        else:
            print(f"ok {name} ({types[name]})")
    return 1 if wrong else 2 if missing else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--scrape":
        return check_scrape(argv[2], argv[3])
    if len(argv) == 3:
        return check_files(argv[1], argv[2])
    print(__doc__.strip(), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
