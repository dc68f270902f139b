"""Check printed shell commands with the real tools (kubectl) or the real tools' captured help (nvidia-smi, dcgmi).

* ``kubectl``: every stage runs through the real ``/usr/bin/kubectl``. With an API double holding the demo fleet
  (``tests/helpers/kubectl_double.py``, see :class:`Checker`) it runs against it -- mutating subcommands with
  ``--dry-run=server`` -- and must exit 0 with no ``error:`` line, so a node, pod, namespace or kind the fleet
  does not have, or a change the API server would reject, fails. Without one (and for data-file templates and
  the subcommands in :data:`PARSE_ONLY`) the kubeconfig's server is a closed loopback port, so kubectl parses the
  command line (unknown command or flag, a manifest that is not a Kubernetes object) and can only fail on
  connect; "connection refused" is a pass, anything else a failure.
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
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "gpulib" / "data" / "captures"
SMI_TABLE = ROOT / "gpulib" / "data" / "nvidia" / "nvidia_smi_options.csv"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"

DCGM_DOC = "https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/"
#: dcgmi subcommand -> options it takes (short and long), from NVIDIA's dcgmi reference pages (DCGM_DOC)
DCGMI = {
    "": {"-v", "--version", "--help", "-h", "--host"},
    "diag": {
        "-r",
        "--run",
        "-i",
        "--entity-id",
        "-g",
        "--group",
        "-p",
        "--parameters",
        "-c",
        "--configfile",
        "--iterations",
        "--timeout",
        "-v",
        "--verbose",
        "-j",
        "--json",
        "--host",
        "-h",
        "--help",
    },
    "health": {
        "-g",
        "--group",
        "-c",
        "--check",
        "-s",
        "--set",
        "-f",
        "--fetch",
        "-j",
        "--json",
        "--host",
        "-h",
        "--help",
    },
    "discovery": {
        "-l",
        "--list",
        "-i",
        "--info",
        "-g",
        "--group",
        "-v",
        "--verbose",
        "-c",
        "--compute",
        "--host",
        "-h",
        "--help",
    },
    "nvlink": {"-e", "--errors", "-s", "--link-status", "-g", "--gpuid", "-j", "--json", "--host", "-h", "--help"},
    "topo": {"-g", "--group", "--gpuid", "-j", "--json", "--host", "-h", "--help"},
    "dmon": {
        "-e",
        "--field-id",
        "-i",
        "--entity-id",
        "-g",
        "--group-id",
        "-d",
        "--delay",
        "-c",
        "--count",
        "-l",
        "--list",
        "--host",
        "-h",
        "--help",
    },
    "group": {
        "-l",
        "--list",
        "-c",
        "--create",
        "-d",
        "--delete",
        "-g",
        "--group",
        "-i",
        "--info",
        "-a",
        "--add",
        "-r",
        "--remove",
        "--default",
        "--defaultnvswitches",
        "-j",
        "--json",
        "--host",
        "-h",
        "--help",
    },
    "stats": set(),
    "config": set(),
    "policy": set(),
    "fieldgroup": set(),
    "profile": set(),
    "set": set(),
    "modules": set(),
    "introspect": set(),
    "mndiag": set(),
    "test": set(),
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
        row = {
            "driver": driver,
            "subcommand": sub,
            "kind": kind,
            "value": value,
            "source": f"gpulib/data/captures/{src}",
        }
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
    return [argv for _, argv in piped_stages(cmd)]


def piped_stages(cmd: str) -> list[tuple[bool, list[str]]]:
    """:func:`stages`, each with whether its stdin is the previous stage's stdout (it follows a ``|``)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    out, cur, skip_next, piped = [], [], False, False
    for tok in lex:
        if skip_next:
            skip_next = False
            continue
        if tok in ("|", "||", "&&", ";", "&"):
            out.append((piped, cur))
            cur, piped = [], tok == "|"
        elif tok in (">", ">>", "<", "2>", "<<"):
            skip_next = True
        elif re.fullmatch(r"[0-9]*[<>]&?[0-9]*", tok):
            if tok.endswith((">", "<")):
                skip_next = True
        else:
            cur.append(tok)
    out.append((piped, cur))
    result: list[tuple[bool, list[str]]] = []
    for piped, argv in out:
        result.extend((piped and i == 0, a) for i, a in enumerate(_unwrap(argv)))
    return [(p, a) for p, a in result if a]


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
        return [argv] + _unwrap(argv[i + 1 :])  # kubectl parses its own ``-- command`` part
    return [argv]


# -- checking -------------------------------------------------------------------------------------------------
#: kubectl subcommands that change the cluster and take ``--dry-run`` (``kubectl <sub> --help``); checked against
#: the demo cluster with ``--dry-run=server`` appended
MUTATING = {
    "cordon",
    "uncordon",
    "drain",
    "taint",
    "label",
    "annotate",
    "scale",
    "delete",
    "apply",
    "create",
    "patch",
    "replace",
    "set",
    "autoscale",
    "expose",
    "run",
}
ROLLOUT_MUTATING = {"restart", "undo", "pause", "resume"}
#: rollout subcommands without a --dry-run flag in kubectl (checked as a `get` of their object)
ROLLOUT_NO_DRY_RUN = {"restart", "pause", "resume"}
#: kubectl subcommands the API double cannot answer, and why: these are checked for parsing only (closed port);
#: for ``exec`` and ``debug`` the pod / node (and exec's ``-c`` container) they address must exist on the double
PARSE_ONLY = {
    "exec": "runs a command in the container over a SPDY/WebSocket stream, which the double does not speak",
    "attach": "attaches to a container over a stream",
    "debug": "creates a debugging pod and attaches to it over a stream",
    "cp": "copies through exec (a stream)",
    "port-forward": "forwards a port over a stream",
    "proxy": "serves a local proxy and never returns",
    "top": "reads metrics.k8s.io from metrics-server, which the double does not serve",
}
#: kubectl global flags that take a value (``kubectl options``)
_GLOBAL_WITH_VALUE = {
    "-n",
    "--namespace",
    "--context",
    "--kubeconfig",
    "-s",
    "--server",
    "--cluster",
    "--user",
    "--request-timeout",
    "--as",
    "--as-group",
    "--token",
    "-v",
}


def kubectl_words(args: list[str]) -> list[str]:
    """The positional words of a kubectl command line (``-n ads scale deployment/x`` -> scale, deployment/x)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--":
            break
        elif a in _GLOBAL_WITH_VALUE:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


@dataclass
class Checker:
    """Checks commands; ``files`` maps a file name a command reads (``kubectl apply -f x.yaml``) to its text.

    With ``double`` (a started :class:`kubectl_double.KubectlDouble` with ``.kubeconfig`` written) a kubectl
    stage of a ``live`` command runs against it: a mutating one with ``--dry-run=server`` appended (and
    ``--validate=false`` for ``apply``: the double serves no OpenAPI document, which kubectl's client-side
    validation downloads; the manifests are checked against the same schemas by :func:`schema_problems`), a
    read-only one as printed; either must exit 0 without an ``error:`` line, and must not answer "No resources
    found" (a selector, namespace or kind that matches nothing on the fleet). ``$(kubectl ...)`` is replaced by what
    the inner command prints there, and ``kubectl ... | kubectl apply -f -`` feeds the first one's output to the
    second, as the shell would. Subcommands in :data:`PARSE_ONLY`, commands not ``live`` (data-file templates
    with sample values) and checks without a double run against a closed port: parsing only. ``modes`` counts
    the kubectl stages per way they were checked.

    A kubectl invocation that changes nothing (a read, a client dry run, or any command against the closed port)
    is run once per checker for the same arguments, stdin, contents of the files it names and -- on the double --
    the same stored objects (:attr:`KubectlDouble.generation`): a second stage asking exactly that gets the answer
    the real kubectl gave the first (a ``$(kubectl get ...)`` shared by many printed lines, a node command printed
    under several operator scenarios). On the double with other objects, the requests that kubectl run made are
    asked again in this process; where the double answers every one of them as it answered kubectl, kubectl had
    exactly the same conversation and its answer stands. Writes (``--dry-run=server``) always run.
    """

    workdir: Path
    files: dict[str, str] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)
    double: Any = None
    modes: dict[str, int] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)  # (mode, kubectl argv) of each stage checked
    empty: list[str] = field(default_factory=list)  # reads on the double that answered "No resources found"
    runs: int = 0  # kubectl processes started
    _smi: dict | None = None
    _answers: dict = field(default_factory=dict)  # invocation that changes nothing -> (returncode, stdout, stderr)
    _talks: dict = field(default_factory=dict)  # read on the double -> [(its requests and answers, its answer)]

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "kubeconfig").write_text(_KUBECONFIG)

    def check(self, cmd: str, live: bool = True) -> list[str]:
        """Problems with one printed command line (empty: it passes)."""
        problems = []
        if re.search(r"\{[a-z_]+\}", cmd):
            problems.append(f"unfilled template field in {cmd!r}")
        cmd = cmd.replace("\\\n", " ")
        if "\n" in cmd:
            return [p for line in cmd.splitlines() if line.strip() for p in self.check(line, live)]
        for sub_cmd in _substitutions(cmd)[1]:
            problems += self.check(sub_cmd, live)
        cmd, _ = _substitutions(cmd, self._substitute if live and self.double is not None else None)
        try:
            parts = piped_stages(cmd)
        except ValueError as exc:
            return problems + [f"not a shell line ({exc}): {cmd!r}"]
        last_out = None
        for piped, argv in parts:
            tool = os.path.basename(argv[0])
            fn = {"kubectl": self._kubectl, "nvidia-smi": self._smi_check, "dcgmi": self._dcgmi}.get(tool)
            if fn is None:
                last_out = None
                continue
            self.checked[tool] = self.checked.get(tool, 0) + 1
            if tool == "kubectl":
                found, last_out = self._kubectl(argv[1:], live, last_out if piped else None)
            else:
                found = fn(argv[1:])
            problems += [f"{p}: {shlex.join(argv)!r} (in {cmd!r})" for p in found]
        return problems

    def _substitute(self, inner: str) -> str | None:
        """What ``$(inner)`` expands to on the demo cluster (None: not a lone kubectl command)."""
        try:
            parts = piped_stages(inner)
        except ValueError:
            return None
        if len(parts) != 1 or parts[0][1][0] != "kubectl":
            return None
        problems, out = self._kubectl(parts[0][1][1:], True, None, count=False)
        return " ".join(shlex.quote(w) for w in (out or "").split()) if not problems else None

    def _kubectl(
        self, args: list[str], live: bool = False, stdin: str | None = None, count: bool = True
    ) -> tuple[list[str], str | None]:
        names = []
        for i, a in enumerate(args):
            name = (
                a.split("=", 1)[1]
                if a.startswith("--filename=")
                else args[i + 1]
                if a in ("-f", "--filename") and i + 1 < len(args)
                else None
            )
            if name and name != "-" and not name.startswith(("http://", "https://")):
                text = self.files.get(name)
                if text is None:
                    return [f"kubectl reads {name!r}, which the runbook did not produce"], None
                (self.workdir / name).write_text(text)
                names.append(name)
        words = kubectl_words(args)
        sub = words[0] if words else ""
        reads_stdin = "-" in args or "--filename=-" in args
        if not live or self.double is None or sub in PARSE_ONLY or (reads_stdin and stdin is None):
            why = (
                "template"
                if not live
                else "no double"
                if self.double is None
                else sub
                if sub in PARSE_ONLY
                else "stdin not from kubectl"
            )
            mode = f"parse-only ({why})"
            problems, out = self._closed_port(args)
            if not problems and live and self.double is not None and sub in ("exec", "debug"):
                problems = self._target_exists(args, words)
        else:
            extra = []
            if sub == "rollout" and words[1:2] and words[1] in ROLLOUT_NO_DRY_RUN:
                # kubectl has no --dry-run for these (kubectl rollout restart --help): the object they act on must
                # exist, which `kubectl get` of the same object on the same namespace answers
                args = ["get" if a == "rollout" else a for a in args if a != words[1]]
                words = kubectl_words(args)
                sub = "get"
            mutating = sub in MUTATING or (sub == "rollout" and words[1:2] and words[1] in ROLLOUT_MUTATING)
            if mutating and not any(a.startswith("--dry-run") for a in args):
                extra.append("--dry-run=server")
            mode = (
                ("dry-run=server" if "--dry-run=server" in args + extra else "client dry run") if mutating else "read"
            )
            if sub == "apply":  # kubectl's own validation needs /openapi/v2; the same schemas are checked here
                extra.append("--validate=false")
                for text in [self.files[n] for n in names] + ([stdin] if reads_stdin else []):
                    bad = schema_problems(text)
                    if bad:
                        return bad, None
            before = len(self.empty)
            problems, out = self._run(
                args + extra,
                str(self.double.kubeconfig),
                stdin,
                f"on the demo cluster ({mode})",
                reuse=mode in ("read", "client dry run"),
            )
            if not problems and len(self.empty) > before:
                problems = [
                    f"kubectl answers 'No resources found' on the demo cluster ({mode}): the selector, "
                    "namespace or kind matches nothing there"
                ]
            if not problems and sub == "apply" and "--dry-run=client" not in args:
                from tests.helpers.demo_cluster import (
                    as_applied,
                )  # what a real apply leaves for the wait/logs/delete that follow

                for name in names:
                    for obj in as_applied(self.files[name]):
                        self.double.put(obj)
        if count:
            self.modes[mode] = self.modes.get(mode, 0) + 1
            self.log.append((mode, shlex.join(args)))
        return problems, out

    def _target_exists(self, args: list[str], words: list[str]) -> list[str]:
        """For ``exec``/``debug``, which the double cannot stream: the pod or node they address exists there, and
        so does the ``-c`` container of an exec."""
        target = words[1] if len(words) > 1 else ""
        if not target or target == "SUBSTITUTED":
            return []
        head, ns = (args[: args.index("--")] if "--" in args else args), []
        for i, a in enumerate(head):
            if a in ("-n", "--namespace") and i + 1 < len(head):
                ns = [a, head[i + 1]]
            elif a.startswith("--namespace="):
                ns = [a]
        kind_name = target if "/" in target else f"pod/{target}"
        problems, out = self._run(
            [*ns, "get", kind_name, "-o", "jsonpath={.spec.containers[*].name}"],
            str(self.double.kubeconfig),
            None,
            f"on the demo cluster (the {words[0]} target)",
            reuse=True,
        )
        want = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "--container")), None)
        if not problems and words[0] == "exec" and want and want not in (out or "").split():
            problems = [f"pod {target} has no container {want!r} on the demo cluster (it has {out!r})"]
        return problems

    def _closed_port(self, args: list[str]) -> tuple[list[str], str | None]:
        problems, out = self._run(args, str(self.workdir / "kubeconfig"), None, "", reuse=True)
        if problems and ("127.0.0.1:9" in problems[0] and "connection refused" in problems[0]):
            return [], None
        if problems and "no objects passed to apply" in problems[0] and ("-" in args or "--filename=-" in args):
            return [], None  # reads a manifest from the pipe, which the check does not feed
        if problems:
            first = next(
                (ln for ln in problems[0].splitlines() if ln.strip() and "deprecated" not in ln), problems[0].strip()
            )
            return [f"kubectl rejects it ({first.strip()})"], None
        return [], out

    def _run(
        self, args: list[str], kubeconfig: str, stdin: str | None, where: str, reuse: bool = False
    ) -> tuple[list[str], str | None]:
        """Run kubectl; ``reuse``: the invocation changes nothing, so an identical one asked before (see the class
        docstring) answers it."""
        key = talk = None
        if reuse:
            on_double = self.double is not None and kubeconfig == str(self.double.kubeconfig)
            state = getattr(self.double, "generation", None) if on_double else "closed port"
            files = tuple((a, (self.workdir / a).read_text()) for a in args if _is_file(self.workdir, a))
            key = None if state is None else (tuple(args), kubeconfig, stdin, files, state)
            talk = key[:-1] if key is not None and on_double else None
        if key is not None and key not in self._answers and talk is not None:
            for exchanges, answer in self._talks.get(talk, []):
                if all(_answer_of(self.double.handle(*request)) == got for request, got in exchanges):
                    self._answers[key] = answer
                    break
        if key is not None and key in self._answers:
            p = subprocess.CompletedProcess(args, *self._answers[key])
        else:
            exchanges: list = []
            if talk is not None:  # what kubectl asks the double, and what it is told
                handle = self.double.handle

                def recorded(*request):
                    got = handle(*request)
                    exchanges.append((request, _answer_of(got)))
                    return got

                self.double.handle = recorded
            try:
                p = self._kubectl_process(args, kubeconfig, stdin)
            finally:
                if talk is not None:
                    del self.double.handle
            if p is None:
                return [f"kubectl did not return within 30 s {where}".strip()], None
            if key is not None:
                self._answers[key] = (p.returncode, p.stdout, p.stderr)
            if talk is not None:
                self._talks.setdefault(talk, []).append((exchanges, self._answers[key]))
        return self._judge(p, args, where)

    def _kubectl_process(self, args: list[str], kubeconfig: str, stdin: str | None):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KUBECONFIG", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
        }
        env["KUBECONFIG"] = kubeconfig
        env["NO_PROXY"] = "127.0.0.1"
        # a kubectl run lives a fraction of a second: its garbage collector only costs CPU (about a fifth of a
        # check's); GOGC=off turns it off (https://pkg.go.dev/runtime#hdr-Environment_Variables)
        env["GOGC"] = "off"
        self.runs += 1
        try:
            return subprocess.run(
                [KUBECTL, *args, "--request-timeout=5s", f"--cache-dir={self.workdir / 'kube-cache'}"],
                cwd=self.workdir,
                env=env,
                input=stdin or "",
                capture_output=True,
                text=True,
                timeout=30,
            )
        except subprocess.TimeoutExpired:
            return None

    def _judge(self, p: subprocess.CompletedProcess, args: list[str], where: str) -> tuple[list[str], str | None]:
        # kubectl cordon/uncordon print "error: unable to cordon node ..." and still exit 0 (kubectl v1.32), so an
        # error line on stderr fails the check too
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith(("error:", "Error from server"))]
        if p.returncode == 0 and not (where and errors):
            if where and "No resources found" in p.stderr:
                self.empty.append(shlex.join(args))
            return [], p.stdout
        if not where:
            return [p.stderr], None  # judged by _closed_port
        first = (
            errors[0]
            if errors
            else next(
                (
                    ln
                    for ln in p.stderr.splitlines()
                    if ln.strip() and "deprecated" not in ln and not ln.startswith("Warning")
                ),
                p.stderr.strip(),
            )
        )
        return [f"kubectl rejects it {where} ({first.strip()})"], None

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
        return [
            f"dcgmi {sub} has no option {a.split('=')[0]!r} ({DCGM_DOC})"
            for a in args[1 if sub else 0 :]
            if a.startswith("-") and a.split("=")[0] not in known
        ]


def _answer_of(got: tuple[int, Any]) -> tuple:
    """A double's answer (status, JSON payload or raw bytes) as a comparable value."""
    status, payload = got
    raw = getattr(payload, "data", None)
    if raw is not None:
        return status, "raw", payload.content_type, raw, payload.declared
    return status, json.dumps(payload, sort_keys=True, default=str)


def _is_file(workdir: Path, arg: str) -> bool:
    """Whether a kubectl argument names a file of the check's folder (``-f x.yaml``)."""
    try:
        return "/" not in arg and len(arg) < 200 and (workdir / arg).is_file()
    except (OSError, ValueError):
        return False


def schema_problems(manifest: str, version: str = "1.30.0") -> list[str]:
    """What Kubernetes' OpenAPI schema (``kubernetes-validate``, strict: unknown fields too) rejects in a manifest
    of built-in kinds -- the check ``kubectl apply`` makes itself when the server serves ``/openapi/v2``; kinds
    without a bundled schema (custom resources) are left to the server."""
    import yaml

    try:
        import kubernetes_validate
    except ImportError:
        return []
    out = []
    docs = [d for d in yaml.safe_load_all(manifest) if isinstance(d, dict)]
    for doc in [i for d in docs for i in (d.get("items") or [] if d.get("kind") == "List" else [d])]:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            continue
        except kubernetes_validate.ValidationError as exc:
            out.append(
                f"{doc.get('kind')} {(doc.get('metadata') or {}).get('name')!r} fails the Kubernetes {version} "
                f"schema: {exc.message} at {'.'.join(str(p) for p in exc.path)}"
            )
    return out


def _substitutions(cmd: str, run=None) -> tuple[str, list[str]]:
    """``cmd`` with each ``$(...)`` replaced by what ``run(inner)`` returns (one word ``SUBSTITUTED`` without
    ``run`` or when it returns None), and the commands inside them."""
    inner, out, i = [], [], 0
    while i < len(cmd):
        if cmd.startswith("$(", i):
            depth, j = 1, i + 2
            while j < len(cmd) and depth:
                depth += {"(": 1, ")": -1}.get(cmd[j], 0)
                j += 1
            inner.append(cmd[i + 2 : j - 1])
            got = run(inner[-1]) if run is not None else None
            out.append("SUBSTITUTED" if got is None else got)
            i = j
        else:
            out.append(cmd[i])
            i += 1
    return "".join(out), inner


def fill_placeholders(cmd: str) -> str:
    """A data-file command with its ``{field}`` / ``<placeholder>`` parts replaced by sample values, so the
    tool can parse it (``<node>`` would otherwise be a shell redirection)."""
    samples = {
        "node": "dgx-h100-1",
        "gpu": "5",
        "namespace": "ml",
        "ns": "gpu-operator",
        "pod": "train-0",
        "pci": "0000:18:00.0",
        "kind": "deployment",
        "owner": "train",
    }

    def sub(m):
        key = m.group(1).strip().lower().replace("-", "_").replace(" ", "_")
        return samples.get(key, "x" + re.sub(r"[^a-z0-9]", "", key)[:20])

    cmd = re.sub(r"<([A-Za-z_ -]+)>", sub, cmd)
    return re.sub(r"\{([a-z_]+)\}", sub, cmd)
