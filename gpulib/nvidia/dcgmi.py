"""``dcgmi diag`` output (text table or ``-j`` JSON, levels 1-4) -> one row per test per GPU.

Layouts read (fixtures and their sources: ``tests/fixtures/dcgmi/README.md``):

* DCGM 3.x text: ``| GPU Memory | Pass - GPU: 1 |`` (per-GPU results on the row and on
  continuation rows), ``| Warning |`` / ``| Info |`` messages wrapped over continuation rows,
  category rows ``|-----  Hardware  ----+----|``, a ``Metadata`` block (DCGM and driver versions);
* DCGM 4.x text: a summary row ``| software | Pass |`` then ``| | GPU0: Pass |`` per GPU;
* DCGM 3.x JSON (``"DCGM GPU Diagnostic"``, results with ``gpu_id``/``gpu_ids``) and 4.x JSON
  (``"DCGM Diagnostic"``, results with ``entity_group``/``entity_id``, ``test_summary``,
  ``warnings[]`` with ``error_id``, top-level ``metadata``), the shape of NVIDIA/DCGM
  ``testing/python3/dcgm_diag_schema.json`` @686e1024.

Columns (``DIAG_COLUMNS``): ``category``, ``test``, ``gpu`` (index as str; ``""`` for a test's summary
or an all-GPU result), ``status`` (``Pass``/``Fail``/``Warn``/``Skip`` or the text DCGM printed),
``message`` (warnings), ``info``, ``error_id`` (DCGM_FR code number when the JSON carries it, else NA).
``df.attrs``: ``metadata`` (dict), ``format`` (``text``/``json``), ``warnings`` (what could not be
read). Never raises on text or bytes; one pass over the lines.
"""

from __future__ import annotations

import json
import re

import pandas as pd

DIAG_COLUMNS = ["category", "test", "gpu", "status", "message", "info", "error_id"]
_STATUS = {
    "pass": "Pass",
    "fail": "Fail",
    "warn": "Warn",
    "warning": "Warn",
    "skip": "Skip",
    "skipped": "Skip",
    "not run": "Skip",
    "error": "Fail",
}
_RESULT = re.compile(
    r"^(Pass|Fail|Warn|Warning|Skip|Skipped|Not Run|Error)\b\s*(?:-\s*(?:GPUs?\s*:\s*([\d,\s]*\d)|(All)))?",
    re.IGNORECASE,
)
_PER_GPU = re.compile(r"^GPU\s*(\d+)\s*:\s*(Pass|Fail|Warn|Warning|Skip|Skipped|Not Run|Error)\b", re.IGNORECASE)
_MSG_GPU = re.compile(r"^GPU\s*(\d+)\b")


def _norm(status: str) -> str:
    s = str(status).strip()
    return _STATUS.get(s.lower(), s)


def _frame(rows: list[dict], fmt: str, meta: dict, warnings: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=DIAG_COLUMNS)
    for c in DIAG_COLUMNS[:-1]:
        df[c] = df[c].fillna("").astype(str)
    df["error_id"] = pd.array(df["error_id"].tolist(), dtype="Int64") if len(df) else pd.array([], dtype="Int64")
    df.attrs.update({"format": fmt, "metadata": meta, "warnings": warnings})
    return df


def parse_dcgmi_diag(text: str | bytes | None) -> pd.DataFrame:
    """Parse ``dcgmi diag`` output, text or ``-j`` JSON (detected), into ``DIAG_COLUMNS`` rows."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not text or not text.strip():
        return _frame([], "", {}, ["empty dcgmi diag output"])
    start = _json_start(text)
    if start is not None:
        return _parse_json(text[start:])
    return _parse_text(text)


def _json_start(text: str) -> int | None:
    """Offset of a JSON document: text that starts with ``{`` or has a line that does (after kubectl chatter)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return len(text) - len(stripped)
    pos = text.find("\n{")
    return pos + 1 if pos >= 0 and "|" not in text[:pos] else None


# ------------------------------------------------------------------------------------------ JSON
def _parse_json(text: str) -> pd.DataFrame:
    warnings: list[str] = []
    try:
        doc, _ = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return _frame(
            [], "json", {}, ["dcgmi diag JSON is cut or invalid: no result read (re-run `dcgmi diag -r N -j`)"]
        )
    if not isinstance(doc, dict):
        return _frame([], "json", {}, ["dcgmi diag JSON is not an object"])
    root = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        return _frame([], "json", {}, ["no 'DCGM Diagnostic' / 'DCGM GPU Diagnostic' object in the JSON"])
    meta = {k: v for k, v in root.items() if isinstance(v, (str, int, float)) and k != "runtime_error"}
    if isinstance(doc.get("metadata"), dict):
        meta.update({k: v for k, v in doc["metadata"].items() if isinstance(v, (str, int, float))})
    if root.get("runtime_error"):
        warnings.append(f"dcgmi diag runtime error: {root['runtime_error']}")
        meta["runtime_error"] = str(root["runtime_error"])
    rows: list[dict] = []
    cats = root.get("test_categories")
    for cat in cats if isinstance(cats, list) else []:
        if not isinstance(cat, dict):
            continue
        cname = str(cat.get("category", ""))
        tests = cat.get("tests")
        for test in tests if isinstance(tests, list) else []:
            if not isinstance(test, dict):
                continue
            tname = str(test.get("name", ""))
            summary = test.get("test_summary")
            if isinstance(summary, dict) and "status" in summary:
                rows.append(_row(cname, tname, "", summary.get("status"), summary))
            results = test.get("results")
            for res in results if isinstance(results, list) else []:
                if not isinstance(res, dict):
                    continue
                for gpu in _json_gpus(res):
                    rows.append(_row(cname, tname, gpu, res.get("status", ""), res))
    if not rows:
        warnings.append("the JSON holds no test result")
    return _frame(rows, "json", meta, warnings)


def _json_gpus(res: dict) -> list[str]:
    if "entity_id" in res:
        group = str(res.get("entity_group", "GPU") or "GPU")
        eid = str(res["entity_id"])
        return [eid if group.upper() == "GPU" else f"{group}{eid}"]
    if "gpu_id" in res:
        return [str(res["gpu_id"])]
    ids = res.get("gpu_ids")
    if isinstance(ids, list):
        return [str(i) for i in ids] or [""]
    if isinstance(ids, (str, int)):
        return [p.strip() for p in str(ids).split(",") if p.strip()] or [""]
    return [""]


def _texts(value) -> tuple[list[str], list]:
    """Messages and error ids of a ``warnings``/``info`` value (list of dicts or strings, or a string)."""
    if value is None:
        return [], []
    items = value if isinstance(value, list) else [value]
    msgs, ids = [], []
    for it in items:
        if isinstance(it, dict):
            msgs.append(str(it.get("warning", it.get("message", it.get("info", "")))))
            if isinstance(it.get("error_id"), int) and not isinstance(it.get("error_id"), bool):
                ids.append(it["error_id"])
        elif isinstance(it, (str, int, float)):
            msgs.append(str(it))
    return [m for m in msgs if m], ids


def _row(cat: str, test: str, gpu: str, status, res: dict) -> dict:
    warn, ids = _texts(res.get("warnings", res.get("warning")))
    info, _ = _texts(res.get("info"))
    return {
        "category": cat,
        "test": test,
        "gpu": gpu,
        "status": _norm(status if isinstance(status, str) else str(status)),
        "message": " ".join(warn),
        "info": " ".join(info),
        "error_id": ids[0] if ids else pd.NA,
    }


# ------------------------------------------------------------------------------------------ text
def _category(line: str) -> str | None:
    """``|-----  Hardware  -----+----|`` -> ``Hardware``; None for other lines."""
    body = line.strip().strip("|+")
    if not body.startswith("---"):
        return None
    head = body.split("+", 1)[0].split("|", 1)[0].strip("- ")
    return head if head and not set(head) <= set("-=") else None


class _TextState:
    def __init__(self):
        self.rows: list[dict] = []
        self.meta: dict = {}
        self.warnings: list[str] = []
        self.category = ""
        self.test: str | None = None
        self.test_rows: list[dict] = []
        self.msg_kind: str | None = None
        self.msg_pieces: list[str] = []
        self.meta_key: str | None = None
        self.orphans = 0

    def add(self, gpu: str, status: str) -> None:
        row = {
            "category": self.category,
            "test": self.test or "",
            "gpu": gpu,
            "status": _norm(status),
            "message": "",
            "info": "",
            "error_id": pd.NA,
        }
        self.rows.append(row)
        self.test_rows.append(row)

    def flush(self) -> None:
        if self.msg_kind is None:
            return
        text = _join(self.msg_pieces)
        kind, self.msg_kind, self.msg_pieces = self.msg_kind, None, []
        if not text:
            return
        if not self.test_rows:
            self.warnings.append(f"{kind} without a test row (cut table): {text[:120]}")
            return
        m = _MSG_GPU.match(text)
        targets = (
            [r for r in self.test_rows if m and r["gpu"] == m.group(1)]
            or [r for r in self.test_rows if r["gpu"] == ""]
            or self.test_rows
        )
        col = "message" if kind == "Warning" else "info"
        for r in targets:
            r[col] = f"{r[col]} {text}".strip()


def _join(cells: list[str]) -> str:
    """Re-join a message dcgmi wrapped over rows. A row filled to the cell width (content ends 3 characters
    before the cell's end: one pad on the left, two on the right) was cut mid-word: no space is added."""
    out, prev_full = "", False
    for raw in cells:
        content = raw[1:] if raw.startswith(" ") else raw
        body = content.rstrip()
        if not out:
            out = body.strip()
        elif prev_full and not content.startswith(" "):
            out += body
        else:
            out += " " + body.strip()
        prev_full = len(body) >= len(raw) - 3
    return out.strip()


def _parse_text(text: str) -> pd.DataFrame:
    st = _TextState()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] not in "|+":
            continue
        cat = _category(line)
        if cat is not None:
            st.flush()
            st.category, st.test, st.test_rows, st.meta_key = cat, None, [], None
            continue
        if line[0] == "+":
            st.flush()
            continue
        cells = line.split("|")
        if len(cells) < 3:
            continue
        if not line.endswith("|"):  # the table was cut inside this row: its value may be cut too
            st.warnings.append(f"a row cut before its end is not read: {line[:120]}")
            continue
        name, raw_value = cells[1].strip(), cells[2]
        value = raw_value.strip()
        if name == "Diagnostic" and value == "Result":
            continue
        if st.category.lower() == "metadata":
            if name:
                st.meta_key = name
                st.meta[name] = value
            elif st.meta_key:
                st.meta[st.meta_key] = f"{st.meta[st.meta_key]} {value}".strip()
            continue
        if name in ("Warning", "Info"):
            st.flush()
            st.msg_kind, st.msg_pieces = name, [raw_value]
            continue
        if not name:
            if st.msg_kind is not None:
                st.msg_pieces.append(raw_value)
                continue
            if st.test is not None and _result(st, value):
                continue
            if value:
                st.orphans += 1
            continue
        st.flush()
        st.test, st.test_rows = name, []
        if not _result(st, value) and value:
            st.add("", value)  # a result dcgmi printed that is none of Pass/Fail/Warn/Skip: kept as written
    st.flush()
    if st.orphans:
        st.warnings.append(f"{st.orphans} continuation row(s) before any test (cut table): not attributed")
    if not st.rows:
        st.warnings.append("no dcgmi diag result row found")
    return _frame(st.rows, "text", st.meta, st.warnings)


def _result(st: _TextState, value: str) -> bool:
    m = _PER_GPU.match(value)
    if m:
        st.add(m.group(1), m.group(2))
        return True
    m = _RESULT.match(value)
    if not m:
        return False
    if m.group(2):
        for g in m.group(2).split(","):
            if g.strip():
                st.add(g.strip(), m.group(1))
    else:
        st.add("", m.group(1))
    return True


def diag_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per test: the worst status over its GPUs and the GPUs that failed or warned."""
    order = {"Fail": 0, "Warn": 1, "Pass": 3, "Skip": 2}
    rows = []
    for (cat, test), g in df.groupby(["category", "test"], sort=False):
        worst = min(g["status"], key=lambda s: order.get(s, 1))
        rows.append(
            {
                "category": cat,
                "test": test,
                "status": worst,
                "failed_gpus": ",".join(sorted({x for x in g.loc[g["status"] == "Fail", "gpu"] if x})),
                "warned_gpus": ",".join(sorted({x for x in g.loc[g["status"] == "Warn", "gpu"] if x})),
            }
        )
    return pd.DataFrame(rows, columns=["category", "test", "status", "failed_gpus", "warned_gpus"])
