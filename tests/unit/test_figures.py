"""Every status figure is declared once (`job/decide/figures.py`); what shows it elsewhere is checked against that
table, and a failure names the file to change."""

from __future__ import annotations

import re

import pytest
import yaml

from job.decide import figures
from job.decide.outcome import PolicyOutcome
from tests.conftest import CRD, ROOT

VERSION = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]
KSM = yaml.safe_load((ROOT / "kustomize/components/metrics/customresourcestate.yaml").read_text())
METRICS_PAGE = (ROOT / "docs/reference/metrics.md").read_text()
KEYS = [f.key for f in figures.COUNTS]


def _ksm_counts() -> dict[str, tuple[str, str]]:
    """key of status.counts -> (metric name, help), as the kube-state-metrics config exports them."""
    (resource,) = KSM["spec"]["resources"]
    out = {}
    for metric in resource["metrics"]:
        gauge = metric["each"].get("gauge") or {}
        if gauge.get("path") == ["status", "counts"]:
            out[gauge["valueFrom"][0]] = (metric["name"], metric["help"])
    return out


def test_the_status_counts_are_the_table():
    assert list(figures.counts(PolicyOutcome("p", 1))) == KEYS
    assert len(set(KEYS)) == len(KEYS)


def test_the_crd_status_schema_has_every_figure_and_no_other_count():
    declared = VERSION["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["counts"]["properties"]
    assert sorted(declared) == sorted(KEYS), "status.counts in kustomize/base/crd.yaml and job/decide/figures.py differ"


def test_the_printer_columns_of_figures_are_the_table():
    shown = {c["jsonPath"].removeprefix(".status.counts."): c["name"] for c in VERSION["additionalPrinterColumns"]
             if c["jsonPath"].startswith(".status.counts.")}
    assert shown == {f.key: f.column for f in figures.COUNTS if f.column}, \
        "additionalPrinterColumns in kustomize/base/crd.yaml and the columns of job/decide/figures.py differ"


@pytest.mark.parametrize("figure", figures.COUNTS, ids=lambda f: f.key)
def test_every_figure_is_a_metric_named_in_the_table_and_the_metrics_page(figure):
    exported = _ksm_counts()
    assert figure.key in exported, f"kustomize/components/metrics/customresourcestate.yaml: export status.counts." \
                                   f"{figure.key} as {figure.metric}"
    name, help_text = exported[figure.key]
    assert name == figure.metric, f"customresourcestate.yaml names it {name}, job/decide/figures.py {figure.metric}"
    assert f"(status.counts.{figure.key})" in help_text
    row = re.search(rf"^\| `nsscaler_policy_{figure.metric}` \| `counts\.{figure.key}` \|", METRICS_PAGE, re.M)
    assert row, f"docs/reference/metrics.md's table: a row for nsscaler_policy_{figure.metric} (counts.{figure.key})"


def test_no_metric_exports_a_count_the_table_does_not_know():
    assert sorted(_ksm_counts()) == sorted(KEYS), "customresourcestate.yaml exports counts job/decide/figures.py lacks"


def test_the_report_shows_the_figures_it_says():
    shown = figures.report_figures(PolicyOutcome("p", 1, frozen=2, pods_left=3))
    assert list(shown) == [f.key for f in figures.COUNTS if f.in_report]
    assert (shown["frozen"], shown["podsLeft"]) == (2, 3)
