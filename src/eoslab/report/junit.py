"""JUnit XML for CI dashboards: one testcase per scenario x target.

A non-conforming cell is a ``failure`` whose message lists the mismatches; an invalid cell (a
fault that did not take effect: the test was not carried out) and a cell whose checker left no
verdict are ``error`` s, saying why.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eoslab.report.outcome import RunOutcome, Status


def junit_xml(suite_name: str, outcomes: list[RunOutcome]) -> str:
    failures = sum(o.status is Status.DOES_NOT_CONFORM for o in outcomes)
    errors = sum(o.status in (Status.ERROR, Status.INVALID) for o in outcomes)
    total_s = sum(o.duration_s or 0.0 for o in outcomes)
    suite = ET.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(outcomes)),
        failures=str(failures),
        errors=str(errors),
        time=f"{total_s:.3f}",
    )
    for outcome in outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"eoslab.{outcome.target}",
            name=outcome.label,
            time=f"{outcome.duration_s or 0.0:.3f}",
        )
        if outcome.status is not Status.CONFORMS:
            tag = "failure" if outcome.status is Status.DOES_NOT_CONFORM else "error"
            problem = ET.SubElement(case, tag, message=outcome.mismatch_message())
            problem.text = f"run {outcome.run_id} in {outcome.run_dir}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode")
