"""Repair ``nvidia-smi topo -m`` as engineers paste it, before the matrix is read; say what was repaired or lost.

Pastes from tickets and terminals arrive damaged in three ways (layouts: the project's captures
``tests/fixtures/nccl/topo_8xH100_tabs_nics.txt`` and ``gpulib/data/captures/h200_smi_topo_m.txt``):

* **NIC rows cut off** (the paste stops after the GPU rows): the matrix is symmetric, so each NIC's
  row is rebuilt from the GPU rows' NIC columns; NIC-to-NIC links are then unknown (``N/A``).
* **rows wrapped** by a narrow terminal: a line that starts with a link code continues the row above.
* **columns cut on the right** (a GPU row shorter than the header): the NIC codes are taken from the
  NIC rows when those survived; otherwise the NIC columns are dropped (the GPU matrix stays right).
* **NIC columns cut from the header too** (a copy as narrow as the GPU columns) while the NIC rows
  ``NIC0 PIX NODE ...`` survived: the NIC rows give each GPU's link to each NIC; NIC-to-NIC links are
  then unknown (``N/A``).

The NIC count comes from the header and the ``NIC Legend`` (a legend naming more NICs than the header
shows is reported). A GPU row that is missing or shorter than the GPU columns makes the text too
damaged: no matrix is returned at all, only the warning (a partial GPU matrix would read as a smaller
or differently linked machine). Never raises; one pass over the lines plus one over the rows.
"""

from __future__ import annotations

import re

_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NVB|C2C|P2C|N/A)$")
_GPU = re.compile(r"^GPU\d+$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_AFFINITY = (["CPU", "Affinity"], ["NUMA", "Affinity"], ["GPU", "NUMA", "ID"])


def _labels(toks: list[str]) -> tuple[list[str], list[str]]:
    """Header tokens -> (device columns, affinity labels)."""
    devices, extra, i = [], [], 0
    while i < len(toks):
        for words in _AFFINITY:
            if toks[i : i + len(words)] == words:
                extra.append(" ".join(words))
                i += len(words)
                break
        else:
            devices.append(toks[i])
            i += 1
    return devices, extra


def _is_header(toks: list[str]) -> bool:
    return bool(toks) and bool(_GPU.match(toks[0])) and (len(toks) == 1 or not _LINK.match(toks[1]))


def repair_topology_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    """(lines the matrix parser can read, warnings). ``lines``: the text's lines, ANSI codes removed."""
    warnings: list[str] = []
    header_at = next((i for i, ln in enumerate(lines) if _is_header(ln.split())), None)
    if header_at is None:
        if any(_GPU.match(ln.split()[0]) for ln in lines if ln.split()):
            warnings.append("topo -m: no header line (GPU0 GPU1 ... above the matrix): the matrix was not read")
        return lines, warnings
    devices, extra = _labels(lines[header_at].split())
    gpus = [d for d in devices if _GPU.match(d)]
    nics = [d for d in devices if not _GPU.match(d)]
    rows: dict[str, list[str]] = {}
    orphan_nics: dict[str, list[str]] = {}  # NIC rows the header does not name
    legend: list[str] = []
    strangers: list[str] = []
    current: str | None = None
    for ln in lines[header_at + 1 :]:
        toks = ln.split()
        if not toks:
            current = None
            continue
        if toks[0] not in devices and _GPU.match(toks[0]) and len(toks) > 1 and _LINK.match(toks[1]):
            strangers.append(toks[0])  # a GPU row the header does not name
            current = None
            continue
        if _LEGEND_NIC.match(ln):
            legend.append(ln.strip())
            current = None
            continue
        if toks[0] in devices and toks[0] not in rows:
            rows[toks[0]] = toks[1:]
            current = toks[0]
            continue
        if re.fullmatch(r"NIC\d+", toks[0]) and len(toks) > 1 and _LINK.match(toks[1]) and toks[0] not in orphan_nics:
            orphan_nics[toks[0]] = toks[1:]
            current = None
            continue
        if "=" in toks or toks[0].endswith(":"):  # the legend ("PIX  = Connection ...", "Legend:") ends the matrix
            current = None
            continue
        if current is not None and _LINK.match(toks[0]) and _codes(rows[current], len(devices)) < len(devices):
            rows[current] += toks  # a terminal wrapped the row: this line continues it
            continue
        current = None
    if not nics and orphan_nics:
        devices, nics = _nics_from_rows(gpus, rows, orphan_nics, warnings)
    odd = [d for d in devices if not (_GPU.match(d) or re.fullmatch(r"NIC\d+|mlx\d+_\d+|[a-z]+\d+(_\d+)?", d))]
    wide = [d for d in rows if _codes(rows[d], len(devices) + 1) > len(devices)]
    if odd or strangers or wide or not gpus or gpus != [f"GPU{i}" for i in range(len(gpus))]:
        why = (
            f"unknown column(s) {', '.join(odd)}"
            if odd
            else f"rows {', '.join(strangers)} not in the header"
            if strangers
            else f"rows with more link codes than the header has columns ({', '.join(wide[:3])})"
            if wide
            else f"GPU columns {', '.join(gpus) or 'none'} not numbered 0..N-1"
        )
        warnings.append(
            f"topo -m: the header line does not match the matrix ({why}): the text is too damaged to read; "
            "paste the whole output (nvidia-smi topo -m > topo.txt)"
        )
        return [], warnings
    legend_nics = len(legend)
    if legend_nics > len(nics):
        warnings.append(
            f"topo -m: the NIC legend names {legend_nics} NICs but the header shows {len(nics)} NIC columns "
            "(header cut on the right)"
        )

    def broken(d: str) -> bool:
        """Codes lost from inside the row (more cells follow a short code run) or X off the diagonal."""
        n = _codes(rows[d], len(devices))
        i = devices.index(d)
        cut_inside = n < len(devices) and len(rows[d]) > n
        return cut_inside or (n > i and rows[d][i] != "X") or "X" in rows[d][:i] + rows[d][i + 1 : n]

    for n in [n for n in nics if n in rows and broken(n)]:
        del rows[n]  # a damaged NIC row is rebuilt from the GPU rows below
    bad = [g for g in gpus if g not in rows or _codes(rows[g], len(devices)) < len(gpus) or broken(g)]
    if bad:
        warnings.append(
            f"topo -m: GPU row(s) {', '.join(bad)} missing or cut inside the GPU columns: the text is too "
            f"damaged to read a matrix of {len(gpus)} GPUs; paste the whole output (nvidia-smi topo -m > topo.txt)"
        )
        return [], warnings
    codes = {d: rows[d][: _codes(rows[d], len(devices))] for d in rows if d in devices}
    asym = [f"{a}/{b}" for i, a in enumerate(gpus) for j, b in enumerate(gpus) if i < j and codes[a][j] != codes[b][i]]
    if asym:
        warnings.append(
            f"topo -m: GPU links disagree between rows ({', '.join(asym[:4])}): rows were merged or "
            "mangled in the paste; the text is too damaged to read a matrix"
        )
        return [], warnings
    short = [g for g in gpus if len(codes[g]) < len(devices)]
    for g in short:  # right-hand NIC columns cut: the NIC rows hold the same codes
        gi = devices.index(g)
        fill = [codes[n][gi] if n in codes and len(codes[n]) > gi else None for n in devices[len(codes[g]) :]]
        if all(f is not None for f in fill):
            codes[g] = codes[g] + fill
            warnings.append(
                f"topo -m: {g} row cut after {len(codes[g]) - len(fill)} columns: NIC codes taken from the NIC rows"
            )
    kept_nics = list(nics)
    mismatch = [
        f"{g}/{n}"
        for g in gpus
        for n in nics
        if n in codes
        and len(codes[n]) > devices.index(g)
        and len(codes[g]) > devices.index(n)
        and codes[g][devices.index(n)] != codes[n][devices.index(g)]
    ]
    if mismatch:
        warnings.append(
            f"topo -m: GPU-NIC links disagree between rows ({', '.join(mismatch[:4])}): "
            f"{len(nics)} NIC column(s) dropped, GPU-NIC links unknown"
        )
        kept_nics = []
    elif any(len(codes[g]) < len(devices) for g in gpus):
        warnings.append(
            f"topo -m: GPU rows cut before the NIC columns and no NIC rows to recover them from: "
            f"{len(nics)} NIC column(s) dropped, GPU-NIC links unknown"
        )
        kept_nics = []
    missing_nic_rows = [n for n in kept_nics if n not in codes or len(codes[n]) < len(gpus)]
    if missing_nic_rows:
        warnings.append(
            f"topo -m: NIC row(s) {', '.join(missing_nic_rows)} missing: rebuilt from the GPU rows "
            "(the matrix is symmetric); NIC-to-NIC links unknown (N/A)"
        )
        for n in missing_nic_rows:
            ni = devices.index(n)
            codes[n] = [codes[g][ni] for g in gpus] + ["X" if m == n else "N/A" for m in nics]
    cols = gpus + kept_nics
    idx = [devices.index(c) for c in cols]
    out = ["\t".join(cols + extra)]
    for d in cols:
        line = [d] + [codes[d][i] if i < len(codes[d]) else "N/A" for i in idx]
        if _GPU.match(d) and len(rows[d]) > len(devices) and d not in short:
            line += rows[d][len(devices) :]  # affinity columns, only when the row was whole
        out.append("\t".join(line))
    out += [""] + legend
    return out, warnings


def _nics_from_rows(
    gpus: list[str], rows: dict[str, list[str]], orphan: dict[str, list[str]], warnings: list[str]
) -> tuple[list[str], list[str]]:
    """Header without NIC columns, NIC rows below the GPU rows: the NIC columns come back from those rows (column
    order GPUs then NICs, as nvidia-smi prints them). ``rows`` is completed in place; (devices, nics)."""
    names = list(orphan)
    if names != [f"NIC{i}" for i in range(len(names))] or any(_codes(orphan[n], len(gpus)) < len(gpus) for n in names):
        warnings.append(
            f"topo -m: {len(names)} NIC row(s) the header does not name, not NIC0..N-1 with a link code per GPU: "
            "NIC rows ignored, GPU-NIC links unknown"
        )
        return list(gpus), []
    devices = gpus + names
    for n in names:
        codes = orphan[n][: _codes(orphan[n], len(devices))]
        rows[n] = (
            codes if len(codes) == len(devices) else codes[: len(gpus)] + ["X" if m == n else "N/A" for m in names]
        )
    for gi, g in enumerate(gpus):
        if g in rows and _codes(rows[g], len(devices)) == len(gpus):  # the GPU row lost its NIC codes with the header
            rows[g] = rows[g][: len(gpus)] + [orphan[n][gi] for n in names] + rows[g][len(gpus) :]
    warnings.append(
        f"topo -m: the header has no NIC columns but {len(names)} NIC rows follow the GPU rows: GPU-NIC links "
        "read from the NIC rows (the matrix is symmetric); NIC-to-NIC links unknown (N/A) where the rows were cut"
    )
    return devices, names


def _codes(toks: list[str], limit: int) -> int:
    """How many leading tokens are link codes (at most ``limit``)."""
    n = 0
    for t in toks[:limit]:
        if not _LINK.match(t):
            break
        n += 1
    return n
