"""Check printed shell commands with the real tools (kubectl) or the real tools' captured help (nvidia-smi, dcgmi).

* ``kubectl``: every stage runs through the real ``/usr/bin/kubectl`` with a kubeconfig whose server is a
  closed loopback port, so kubectl parses the command line (unknown command or flag, a manifest that is not a
  Kubernetes object) and can only fail on connect; "connection refused" is a pass, anything else a failure.
* ``nvidia-smi``: subcommands, flags and ``-d`` display types from ``gpulib/data/nvidia/nvidia_smi_options.csv``,
  built by :func:`smi_options_from_captures` from the help texts of a real H200 (``gpulib/data/captures/``).
* ``dcgmi``: the subcommands and options of NVIDIA's dcgmi reference,
  https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/index.html and its
  ``dcgmi-diag`` / ``dcgmi-health`` / ``dcgmi-discovery`` pages (``DCGMI`` below).

Pipelines (``|``, ``&&``, ``;``), ``sudo``, ``ssh <host> ...``, ``sh -c '...'`` and ``kubectl debug/exec ... --``
are split and each inner command is checked on its own.
"""
from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "gpulib" / "data" / "captures"
SMI_TABLE = ROOT / "gpulib" / "data" / "nvidia" / "nvidia_smi_options.csv"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

DCGM_DOC = "https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/"
#: dcgmi subcommand -> options it takes (short and long), from NVIDIA's dcgmi reference pages (DCGM_DOC)
DCGMI = {
    "": {"-v", "--version", "--help", "-h", "--host"},
    "diag": {"-r", "--run", "-i", "--entity-id", "-g", "--group", "-p", "--parameters", "-c", "--configfile",
             "--iterations", "--timeout", "-v", "--verbose", "-j", "--json", "--host", "-h", "--help"},
    "health": {"-g", "--group", "-c", "--check", "-s", "--set", "-f", "--fetch", "-j", "--json", "--host",
               "-h", "--help"},
    "discovery": {"-l", "--list", "-i", "--info", "-g", "--group", "-v", "--verbose", "-c", "--compute",
                  "--host", "-h", "--help"},
    "nvlink": {"-e", "--errors", "-s", "--link-status", "-g", "--gpuid", "-j", "--json", "--host", "-h", "--help"},
    "topo": {"-g", "--group", "--gpuid", "-j", "--json", "--host", "-h", "--help"},
    "dmon": {"-e", "--field-id", "-i", "--entity-id", "-g", "--group-id", "-d", "--delay", "-c", "--count",
             "-l", "--list", "--host", "-h", "--help"},
    "group": {"-l", "--list", "-c", "--create", "-d", "--delete", "-g", "--group", "-i", "--info", "-a", "--add",
              "-r", "--remove", "--default", "--defaultnvswitches", "-j", "--json", "--host", "-h", "--help"},
    "stats": set(), "config": set(), "policy": set(), "fieldgroup": set(), "profile": set(), "set": set(),
    "modules": set(), "introspect": set(), "mndiag": set(), "test": set(),
}

#: words that run the rest of the line as a command
_WRAPPERS = {"sudo", "nohup", "time", "env", "watch", "timeout", "xargs"}
_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: closed, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: closed, context: {cluster: closed, user: u, namespace: default}}]
current-context: closed
"""


# -- the nvidia-smi table -------------------------------------------------------------------------------------
def smi_options_from_captures(captures: Path = CAPTURES) -> list[dict]:
    """Rows (driver, subcommand, kind, value, source) of every subcommand, option and ``-d`` value the
    captured ``nvidia-smi`` help texts list."""
    driver = re.search(r"DRIVER version\s*:\s*(\S+)", (captures / "h200_smi_version.txt").read_text()).group(1)
    rows: list[dict] = []

    def add(sub, kind, value, src):
        row = {"driver": driver, "subcommand": sub, "kind": kind, "value": value, "source": f"gpulib/data/captures/{src}"}
        if row not in rows:
            rows.append(row)

    main = (captures / "h200_smi_h.txt").read_text()
    for short, long_, _ in re.findall(r"^\s{3,6}(-[A-Za-z0-9]+)?[, ]+(--[A-Za-z0-9-]+)(=?)", main, re.M):
        for opt in (short, long_):
            if opt:
                add("", "option", opt, "h200_smi_h.txt")
    for opt in re.findall(r"Call (--help-query-[a-z-]+)", main):
        add("", "option", opt, "h200_smi_h.txt")
    block = main.split("--display=", 1)[1].split("Flags can be combined", 1)[0]
    for value in re.findall(r"\b[A-Z][A-Z_]+\b", block):
        add("", "display", value, "h200_smi_h.txt")
    for sub in re.findall(r'"nvidia-smi ([a-z0-9-]+) -h"', main):
        add("", "subcommand", sub, "h200_smi_h.txt")
    for sub in ("mig", "topo", "nvlink", "dmon", "pmon"):
        name = f"h200_smi_{sub}_h.txt"
        for short, long_ in re.findall(r"\[(-\S+|N/A) \| (--[A-Za-z0-9_-]+)\]", (captures / name).read_text()):
            for opt in (short, long_):
                if opt != "N/A":
                    add(sub, "option", opt, name)
    return rows


def write_smi_table(path: Path = SMI_TABLE) -> None:
    rows = smi_options_from_captures()
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def _smi_table() -> dict:
    table: dict = {"subcommands": set(), "display": set(), "options": {}}
    with SMI_TABLE.open() as fh:
        for r in csv.DictReader(fh):
            if r["kind"] == "subcommand":
                table["subcommands"].add(r["value"])
            elif r["kind"] == "display":
                table["display"].add(r["value"])
            else:
                table["options"].setdefault(r["subcommand"], set()).add(r["value"])
    return table


# -- splitting ------------------------------------------------------------------------------------------------
def stages(cmd: str) -> list[list[str]]:
    """The simple commands of a shell line: split at ``|``, ``||``, ``&&``, ``;``; ``# comments`` and
    redirections dropped; ``sudo``/``ssh host``/``sh -c``/``kubectl ... --`` unwrapped into more stages."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    out, cur, skip_next = [], [], False
    for tok in lex:
        if skip_next:
            skip_next = False
            continue
        if tok in ("|", "||", "&&", ";", "&"):
            out.append(cur)
            cur = []
        elif tok in (">", ">>", "<", "2>", "<<"):
            skip_next = True
        elif re.fullmatch(r"[0-9]*[<>]&?[0-9]*", tok):
            if tok.endswith((">", "<")):
                skip_next = True
        else:
            cur.append(tok)
    out.append(cur)
    result: list[list[str]] = []
    for argv in out:
        result.extend(_unwrap(argv))
    return [a for a in result if a]


def _unwrap(argv: list[str]) -> list[list[str]]:
    while argv and (argv[0] in _WRAPPERS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0])):
        if argv[0] == "timeout" and len(argv) > 1:
            argv = argv[2:]
        elif argv[0] == "watch":
            argv = [a for a in argv[1:] if not a.startswith("-")]
        else:
            argv = argv[1:]
    if not argv:
        return []
    if argv[0] == "ssh":
        rest = [a for a in argv[1:]]
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
        return _unwrap(rest[1:]) if len(rest) > 1 else []
    if argv[0] in ("sh", "bash") and "-c" in argv:
        return stages(argv[argv.index("-c") + 1])
    if argv[0] == "chroot" and len(argv) > 2:
        return _unwrap(argv[2:])
    if argv[0] == "kubectl" and "--" in argv:
        i = argv.index("--")
        return [argv] + _unwrap(argv[i + 1:])  # kubectl parses its own ``-- command`` part
    return [argv]


# -- checking -------------------------------------------------------------------------------------------------
@dataclass
class Checker:
    """Checks commands; ``files`` maps a file name a command reads (``kubectl apply -f x.yaml``) to its text."""

    workdir: Path
    files: dict[str, str] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)
    _smi: dict | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "kubeconfig").write_text(_KUBECONFIG)

    def check(self, cmd: str) -> list[str]:
        """Problems with one printed command line (empty: it passes)."""
        problems = []
        if re.search(r"\{[a-z_]+\}", cmd):
            problems.append(f"unfilled template field in {cmd!r}")
        cmd = cmd.replace("\\\n", " ")
        if "\n" in cmd:
            return [p for line in cmd.splitlines() if line.strip() for p in self.check(line)]
        cmd, inner = _substitutions(cmd)
        for sub_cmd in inner:
            problems += self.check(sub_cmd)
        try:
            parts = stages(cmd)
        except ValueError as exc:
            return problems + [f"not a shell line ({exc}): {cmd!r}"]
        for argv in parts:
            tool = os.path.basename(argv[0])
            fn = {"kubectl": self._kubectl, "nvidia-smi": self._smi_check, "dcgmi": self._dcgmi}.get(tool)
            if fn is None:
                continue
            self.checked[tool] = self.checked.get(tool, 0) + 1
            problems += [f"{p}: {shlex.join(argv)!r} (in {cmd!r})" for p in fn(argv[1:])]
        return problems

    def _kubectl(self, args: list[str]) -> list[str]:
        for i, a in enumerate(args):
            name = a.split("=", 1)[1] if a.startswith("--filename=") else args[i + 1] if a in ("-f", "--filename") and i + 1 < len(args) else None
            if name and name != "-" and not name.startswith(("http://", "https://")):
                text = self.files.get(name)
                if text is None:
                    return [f"kubectl reads {name!r}, which the runbook did not produce"]
                (self.workdir / name).write_text(text)
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy")}
        env["KUBECONFIG"] = str(self.workdir / "kubeconfig")
        env["NO_PROXY"] = "127.0.0.1"
        try:
            p = subprocess.run([KUBECTL, *args, "--request-timeout=2s"], cwd=self.workdir, env=env,
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return ["kubectl did not return within 30 s"]
        if p.returncode == 0 or "127.0.0.1:9" in p.stderr and "connection refused" in p.stderr:
            return []
        if "no objects passed to apply" in p.stderr and ("-" in args or "--filename=-" in args):
            return []  # reads a manifest from the pipe, which the check does not feed
        first = next((ln for ln in p.stderr.splitlines() if ln.strip() and "deprecated" not in ln), p.stderr.strip())
        return [f"kubectl rejects it ({first.strip()})"]

    def _smi_check(self, args: list[str]) -> list[str]:
        if self._smi is None:
            self._smi = _smi_table()
        t = self._smi
        sub = ""
        if args and not args[0].startswith("-"):
            sub = args[0]
            if sub not in t["subcommands"]:
                return [f"nvidia-smi has no subcommand {sub!r}"]
            args = args[1:]
        known = t["options"].get(sub)
        problems = []
        for i, a in enumerate(args):
            if not a.startswith("-") or re.fullmatch(r"-?[0-9]+", a):
                continue
            opt, _, value = a.partition("=")
            if known is not None and opt not in known:
                problems.append(f"nvidia-smi {sub + ' ' if sub else ''}has no option {opt!r}")
            if not sub and opt in ("-d", "--display"):
                value = value or (args[i + 1] if i + 1 < len(args) else "")
                bad = [v for v in value.split(",") if v not in t["display"]]
                if bad or not value:
                    problems.append(f"nvidia-smi -d has no display type {','.join(bad) or '(none given)'}")
        return problems

    def _dcgmi(self, args: list[str]) -> list[str]:
        sub = args[0] if args and not args[0].startswith("-") else ""
        if sub not in DCGMI:
            return [f"dcgmi has no subcommand {sub!r} ({DCGM_DOC})"]
        known = DCGMI[sub]
        if not known:
            return []
        return [f"dcgmi {sub} has no option {a.split('=')[0]!r} ({DCGM_DOC})"
                for a in args[1 if sub else 0:] if a.startswith("-") and a.split("=")[0] not in known]


def _substitutions(cmd: str) -> tuple[str, list[str]]:
    """``cmd`` with each ``$(...)`` replaced by one word, and the commands inside them."""
    inner, out, i = [], [], 0
    while i < len(cmd):
        if cmd.startswith("$(", i):
            depth, j = 1, i + 2
            while j < len(cmd) and depth:
                depth += {"(": 1, ")": -1}.get(cmd[j], 0)
                j += 1
            inner.append(cmd[i + 2:j - 1])
            out.append("SUBSTITUTED")
            i = j
        else:
            out.append(cmd[i])
            i += 1
    return "".join(out), inner


def fill_placeholders(cmd: str) -> str:
    """A data-file command with its ``{field}`` / ``<placeholder>`` parts replaced by sample values, so the
    tool can parse it (``<node>`` would otherwise be a shell redirection)."""
    samples = {"node": "dgx-h100-1", "gpu": "5", "namespace": "ml", "ns": "gpu-operator", "pod": "train-0",
               "pci": "0000:18:00.0", "kind": "deployment", "owner": "train"}

    def sub(m):
        key = m.group(1).strip().lower().replace("-", "_").replace(" ", "_")
        return samples.get(key, "x" + re.sub(r"[^a-z0-9]", "", key)[:20])

    cmd = re.sub(r"<([A-Za-z_ -]+)>", sub, cmd)
    return re.sub(r"\{([a-z_]+)\}", sub, cmd)
