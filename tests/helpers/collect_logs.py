"""Pod logs for the collection tests, built from the demo fleet's node artefacts (gpulib/demo/artifacts.py)."""

from __future__ import annotations

TOKEN = "0123456789abcdef"


def framed(sections: dict[str, str], token: str = TOKEN, rc: dict[str, int] | None = None) -> str:
    """What the collection script prints: each section between its begin and end marker lines."""
    out = []
    for name, text in sections.items():
        out.append(f"@@gpuops:{token}:begin:{name}\n{text}")
        if not text.endswith("\n"):
            out.append("\n")
        out.append(f"\n@@gpuops:{token}:end:{name}:rc={(rc or {}).get(name, 0)}\n")
    return "".join(out)


def demo_sections(src, node: str) -> dict[str, str]:
    """The sections a collection pod would print on a demo node (kernel log and nvidia-smi -q from the demo)."""
    from gpulib.demo.artifacts import DEMO_NVLINK_STATUS, DEMO_TOPOLOGY, demo_file

    smi = src.smi_query(node)
    return {
        "kernel_log": src.kernel_log(node),
        "smi_q": smi,
        "smi_ecc": smi,
        "topo": demo_file(DEMO_TOPOLOGY).read_text(),
        "nvlink": demo_file(DEMO_NVLINK_STATUS).read_text(),
    }
