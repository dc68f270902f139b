"""What a runbook is, as data: its parameters, its steps and how its findings come out of them.

One definition serves every face of a runbook (docs/architecture.md "A runbook is defined once"): the notebook
renders its steps one cell each (:mod:`gpulib.run.notebook`), ``gpuops run``, ``gpuops serve`` and ``gpuops mcp``
compute its verdict without a kernel (:mod:`gpulib.run.verdict`). GPUd does the same with one ``Check()`` per
component, called by ``gpud scan`` and by its daemon
(https://github.com/leptonai/gpud/blob/main/components/types.go).

A :class:`Step` runs in a :class:`Context`: the run's parameters, its data source (``src``) and every result an
earlier step put there, read and written as attributes. ``gather`` computes (and may raise a
:class:`~gpulib.core.errors.GpulibError`: the step could not get its data), ``show`` displays what ``gather`` left
(tables, charts, notes; the notebook only), ``needs`` names what must be there before the step runs. This module is
data only: it imports nothing of gpulib but ``core`` and nothing of IPython or papermill.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, MutableMapping, Protocol

#: what a parameter's value may be (the type of its default, as ``gpuops run -p`` coerces it)
PARAM_TYPES = (str, bool, int, float, list)
#: what a definition is: a ``runbook`` ends in findings and a verdict; a ``lesson`` (``runbooks/learn/``) teaches:
#: it has no findings and no verdict, it records the figures it showed (``figures.json``)
RUNBOOK, LESSON = "runbook", "lesson"
KINDS = (RUNBOOK, LESSON)
#: what a parameter names on the machine that runs it (``Param.kind``): a file, a folder, either, or several of
#: either separated by commas. A value that matches none of these is a usage error found before any kernel starts
#: (:func:`gpulib.run.params.check_paths`), and only the one who runs gpuops may set such a parameter, never a
#: request to ``gpuops serve`` or ``gpuops mcp``
FILE, DIR, FILE_OR_DIR, FILES_OR_DIRS = "file", "folder", "file or folder", "files or folders"
PATH_KINDS = (FILE, DIR, FILE_OR_DIR, FILES_OR_DIRS)


@dataclass(frozen=True)
class Param:
    """One parameter of a runbook: its name, its default (whose type is the parameter's type), the help text
    that the notebook's parameters cell carries as its comment and, for one that names a path, its ``kind``
    (:data:`PATH_KINDS`; empty: not a path)."""

    name: str
    default: Any
    help: str = ""
    kind: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.default, PARAM_TYPES):
            raise TypeError(f"parameter {self.name}: default {self.default!r} is not a str, bool, int, float or list")
        if self.kind and (self.kind not in PATH_KINDS or not isinstance(self.default, str)):
            raise TypeError(f"parameter {self.name}: kind {self.kind!r} is not one of {PATH_KINDS} on a str default")

    @property
    def type(self) -> type:
        return bool if isinstance(self.default, bool) else type(self.default)

    def cell_line(self) -> str:
        """The line of the notebook's parameters cell that declares it (papermill reads name, default, comment)."""
        return f"{self.name} = {_literal(self.default)}" + (f"  # {self.help}" if self.help else "")


def _literal(v: Any) -> str:
    """A default as Python source, strings in double quotes as the notebooks write them."""
    if isinstance(v, str) and '"' not in v and "\\" not in v:
        return '"' + v + '"'
    return repr(v)


class UI(Protocol):
    """What a step's ``show`` may do with what it gathered: the notebook's display functions
    (:class:`gpulib.run.notebook.NotebookUI`). A headless verdict never calls ``show``."""

    def note(self, text: str, level: str = "info") -> None: ...

    def show(self, fig: Any) -> None: ...

    def display(self, obj: Any) -> None: ...

    def print(self, *parts: Any) -> None: ...


@dataclass(frozen=True)
class Step:
    """One section of a runbook.

    ``needs``: names in the context that must hold a result before the step runs (``"src"``: the data source). A
    name that is ``None`` comes from a step that could not run: the step is not checked (and says so); one that is
    empty (``""``, ``0``, an empty frame or list) means there is nothing to show, for the reason ``why``.
    ``show`` may be given as ``"module:function"`` (the domain's ``view.py``), so that a headless verdict never
    imports the charting libraries. ``effects``: the step changes or records something outside the run (an audit
    record, a server-side dry run): the notebook runs it, a headless verdict does not, so that one run never acts
    twice. A step without ``gather`` only shows (what earlier steps gathered): a headless verdict skips it.
    ``inputs``: the data the step reads, as a reader names it (``"kernel log"``, ``"DCGM_FI_DEV_XID_ERRORS"``): the
    list a verdict rests on.
    """

    title: str
    gather: Callable[["Context"], Any] | None = None
    show: Callable[["Context", UI], None] | str | None = None
    needs: tuple[str, ...] = ()
    why: str = ""
    effects: bool = False
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Runbook:
    """A runbook: ``name`` (its notebook's file name), its ``domain`` package, its parameters, its steps in order,
    and ``findings``: the context after the steps -> the findings handed to the verdict (``None``: no verdict could
    be computed, a step failed). ``combine``: folds symptom findings into their root cause after ``findings``
    (e.g. :func:`gpulib.fleet.merge.merge_findings`). ``start``: the names every step may read before any ran,
    with their initial value (a result holder the notebook fills step by step). ``kind``: :data:`RUNBOOK`, or
    :data:`LESSON` (no ``findings``, no ``combine``: a lesson has no severity verdict)."""

    name: str
    domain: str
    params: tuple[Param, ...]
    steps: tuple[Step, ...]
    findings: Callable[["Context"], Any] | None = None
    combine: Callable[[list], list] | None = None
    start: Callable[["Context"], Mapping[str, Any]] | None = None
    side_effect_params: tuple[str, ...] = field(default=())
    kind: str = RUNBOOK
    #: the run's key figures: context -> {key: {"label", "unit", "value", "better": "lower"|"higher"}}, recorded as
    #: key_figures.json beside findings.json and compared run to run by ``gpuops diff`` (gpulib.run.diff)
    figures: Callable[["Context"], Mapping[str, Mapping[str, Any]]] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"runbook {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == LESSON and (self.findings is not None or self.combine is not None):
            raise ValueError(f"lesson {self.name}: a lesson has no findings (no severity verdict)")
        titles = [s.title for s in self.steps]
        dup = {t for t in titles if titles.count(t) > 1}
        if dup:
            raise ValueError(f"runbook {self.name}: step titles must be unique, repeated: {sorted(dup)}")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"runbook {self.name}: a parameter is declared twice")
        unknown = set(self.side_effect_params) - set(names)
        if unknown:
            raise ValueError(f"runbook {self.name}: side_effect_params {sorted(unknown)} are not parameters")

    def step(self, title: str) -> Step:
        for s in self.steps:
            if s.title == title:
                return s
        raise KeyError(f"runbook {self.name} has no step {title!r}; steps: {', '.join(s.title for s in self.steps)}")

    def defaults(self) -> dict[str, Any]:
        return {p.name: (list(p.default) if isinstance(p.default, list) else p.default) for p in self.params}

    def parameters_cell(self) -> str:
        """The source of the notebook's cell tagged ``parameters``: one line per :class:`Param`, in order."""
        return "\n".join(p.cell_line() for p in self.params) + "\n"

    def acts(self, params: Mapping[str, Any]) -> bool:
        """Whether these parameter values make a run change something (a history appended): such a run has no
        headless verdict beside its notebook, which would act twice."""
        return any(params.get(n) for n in self.side_effect_params)


class Context(MutableMapping[str, Any]):
    """The names a step reads and writes: the run's parameters, ``src`` and the results of earlier steps. In a
    notebook it is the kernel's globals, so what a step gathered is there to inspect after the run."""

    def __init__(self, ns: MutableMapping[str, Any] | None = None):
        object.__setattr__(self, "_ns", {} if ns is None else ns)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._ns[name]
        except KeyError:
            raise AttributeError(f"no {name!r} in this run's context (a parameter or an earlier result)") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._ns[name] = value

    def __getitem__(self, key: str) -> Any:
        return self._ns[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._ns[key] = value

    def __delitem__(self, key: str) -> None:
        del self._ns[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ns)

    def __len__(self) -> int:
        return len(self._ns)
