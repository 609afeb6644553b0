"""Plain-text rendering of a check/inspect outcome for the CLI."""

from __future__ import annotations

from typing import Any, Protocol

from stackmatrix.findings import Finding

_MARK = {"fail": "FAIL", "warn": "warn", "info": "info"}


class _Outcome(Protocol):
    @property
    def verdict(self) -> str: ...
    @property
    def findings(self) -> list[Finding]: ...
    @property
    def data(self) -> dict[str, Any]: ...


def render_text(outcome: _Outcome) -> str:
    data = outcome.data
    lines: list[str] = []
    if data.get("inspected"):
        lines.append(f"stackmatrix inspect: {data['inspected']}")
    lines += _extensions(data.get("extensions", []))
    lines += _coverage(data)
    drv = data.get("driver")
    if drv and drv.get("cuda"):
        lines.append(
            f"driver: CUDA {drv['cuda']} needs >= {drv.get('required_min')}; "
            f"found {drv.get('found') or 'none'} ({drv.get('source')})"
        )
    if data.get("torch_arch"):
        ta = data["torch_arch"]
        per = ", ".join(f"{t}: {c}" for t, c in ta.get("targets", {}).items())
        lines.append(
            f"torch archs: {' '.join(ta.get('cubins', []))} (PTX: "
            f"{' '.join(ta.get('ptx', [])) or '-'}); {per}"
        )
    if data.get("cuda_majors"):
        lines.append("CUDA majors: " + ", ".join(str(m) for m in data["cuda_majors"]))
    lines.append("")
    lines.append(f"findings ({len(outcome.findings)}):" if outcome.findings else "findings: none")
    for f in outcome.findings:
        subject = f" [{f.subject}]" if f.subject else ""
        lines.append(f"  {_MARK[f.severity.value]:4} {f.code}{subject}: {f.message}")
    lines.append(f"verdict: {outcome.verdict}")
    return "\n".join(lines) + "\n"


def _extensions(exts: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for ext in exts:
        pkg = f" ({ext['package']})" if ext.get("package") else ""
        lines.append(f"{ext['relpath']}{pkg}")
        lines.append(f"  needed: {', '.join(ext['needed']) or '-'}")
        if ext.get("missing"):
            lines.append(f"  missing: {', '.join(ext['missing'])}")
        if ext.get("fatbin_entries"):
            lines.append(f"  cubins: {' '.join(ext['cubins']) or '-'}")
            lines.append(f"  ptx:    {' '.join(ext['ptx']) or '-'}")
            lines.append(
                f"  fatbin entries: {ext['fatbin_entries']} "
                f"({ext['compressed_entries']} compressed)"
            )
        else:
            lines.append("  no GPU code")
    return lines


def _coverage(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for target, per in data.get("coverage", {}).items():
        summary = data.get("target_summary", {}).get(target, "n/a")
        lines.append(f"{target}: {summary}")
        optional = data.get("optional", {})
        latent = set((data.get("serving_path") or {}).get("latent", []))
        for rel, value in sorted(per.items()):
            note = f"  (optional: {optional[rel]})" if rel in optional else ""
            note += "  (latent: not loaded by the server)" if rel in latent else ""
            lines.append(f"  {value:6} {rel}{note}")
        for rel in data.get("not_loaded", {}).get(target, []):
            lines.append(f"  -      {rel} (not loaded on {target})")
    return lines
