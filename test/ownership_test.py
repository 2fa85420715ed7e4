#!/usr/bin/env python3
"""Checks the table "Who writes what" of docs/architecture.md against the code.

Each row of the table names an object's field and the files that write it. For each row this test
knows how a write of that field reads in the source (WRITES below), finds every file under src/
that writes it (tests and the JSON decoder aside), and fails when those files differ from the
table's: a new writer of a field must be either removed or argued for in the table.

    python3 test/ownership_test.py [REPO_ROOT]
"""
import pathlib
import re
import sys

# (object, field) as the table's first two columns spell them -> how a write reads in C++.
WRITES = {
    ("GpuPool", "`spec.releaseRequested`"): r"spec\.release_requested\s*=[^=]",
    ("GpuPool", "`status.approval`, `Approved`"): r"status\.approval\s*=[^=]|std::string\(model::kApproved\)",
    ("GpuPool", "`status.allocation`"): (
        r"status\.allocation\.(?:push_back|emplace_back|clear|insert|erase)\("
        r"|erase_if\(\s*[\w>.\-]*status\.allocation"
        r"|for \(model::AllocatedDevice& \w+ : [\w>.\-]*status\.allocation\)"
        r"|Relocate\([\w>.\-]*status\.allocation"),
    ("GpuPool", "`Allocated`, `Provisioned`, `Ready`, `Released`, `DevicesHealthy`"): (
        r"(?:std::string\(model::|\.Set\(model::)k(?:Allocated|Provisioned|Ready|Released|DevicesHealthy)\b"),
    ("UsageRecord", "all"): r"(?:Create|Update)Object\(tx, \*?meter|DeleteObject<model::UsageRecord>",
    ("Invoice", "all"): r"Put\([^;]*EncodeInvoice",
    ("MigLayout", "`spec`"): r"\.spec\.instances\.push_back\(|\bl\.spec = \{",
    ("MigLayout", "`status`"): r"status\.(?:state|attempts|observed_generation|last_attempt)\s*=[^=]|updated\.status = ",
    ("GpuCapacity", "`status.health`, `Healthy`, `MemoryErrors`, `ResetRequired`, `Overheating`"): (
        r"model::SummarizeGpuHealth\(|ToCondition\(model::kGpu"),
    ("GpuCapacity", "`DriverHealthy`"): r"model::SetDriverHealth\(",
    ("Defragmentation", "`spec`"): r"\.spec\.requested_by = |\.spec\.gpus\.assign\(",
    ("Defragmentation", "`status`"): r"status\.phase = model::Defragmentation::|status\.moves\.push_back\(",
    ("Workload", "`status`"): r"\.status\.(?:phase|reason|message|devices|profile|start_time)\s*=[^=]",
    ("Profile", "all"): r"spec\.end = now|CreateObject\(tx, prof\b",
    ("Loan", "`spec`"): r"CreateObject\(tx, receipt\b|spec\.end_reason = ",
    ("Loan", "`status` (`removedPods`, `stuckPods`)"): r"status\.(?:removed_pods|stuck_pods)\s*=[^=]",
    ("GpuPool", "`metadata.deletionTimestamp`, `metadata.finalizers`"): (
        r"deletion_timestamp\s*=[^=]|finalizers\.(?:push_back|emplace_back)\("),
    ("GpuPool", "its removal"): r"DeleteObject<(?:model::)?GpuPool>",
    ("every kind users write", "`metadata.managedFields`"): r"managed_fields\s*=[^=]",
}

EXCLUDED = {"src/model/codec.cc"}  # decodes what was stored; writes nothing


def table(doc: str):
    """The rows of the section "Who writes what": {(object, field): set of files}."""
    m = re.search(r"^### Who writes what\n(.*?)(?=^#)", doc, re.M | re.S)
    if not m:
        raise SystemExit('docs/architecture.md has no section "### Who writes what"')
    rows = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("object", "") or set(cells[0]) <= set("-"):
            continue
        files = set(re.findall(r"`(src/[^`]+)`", cells[3]))
        rows[(cells[0], cells[1])] = files
    return rows


def writers(root: pathlib.Path, pattern: str):
    out = set()
    for path in sorted(root.glob("src/**/*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix not in (".cc", ".h") or rel.endswith("_test.cc") or rel in EXCLUDED:
            continue
        if re.search(pattern, path.read_text(encoding="utf-8")):
            out.add(rel)
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    rows = table((root / "docs/architecture.md").read_text(encoding="utf-8"))
    failures = []
    for key in sorted(set(rows) ^ set(WRITES)):
        where = "the table" if key in rows else "test/ownership_test.py"
        failures.append(f"{key[0]} {key[1]}: only in {where}; the table and WRITES list the same fields")
    for key in sorted(set(rows) & set(WRITES)):
        found = writers(root, WRITES[key])
        if found != rows[key]:
            failures.append(f"{key[0]} {key[1]}: the table says {sorted(rows[key])}, the code writes it in {sorted(found)}")
        if not found:
            failures.append(f"{key[0]} {key[1]}: no file writes it: the pattern is stale")
    for f in failures:
        print("FAIL", f)
    print(f"{len(rows)} fields, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
