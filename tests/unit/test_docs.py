"""The docs tell the truth: every fact a page states that the code or a manifest also states is checked here.

Each test names the page and the source it compares, and fails on drift either way: a field, key, grant,
metric or target added on one side and not the other. Links and anchors between pages are checked by the
strict build (`make docs`, part of `make lint`); the README, outside the site, is checked here.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from devtools import dashboard_preview
from devtools.metrics_component import DASHBOARD
from job import cli, errors
from job.cluster.kube import PERSON_TIMEOUT
from job.model import marks
from job.model.policy import PolicySpec
from job.model.settings import Settings
from job.plugin import exits as plugin_exits
from job.waker.metrics import WakerMetrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
CRD = yaml.safe_load((ROOT / "kustomize/base/crd.yaml").read_text())
WAKE_CRD = yaml.safe_load((ROOT / "kustomize/base/wake-crd.yaml").read_text())
SPEC_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def page(path: str) -> str:
    return (DOCS / path).read_text()


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of a page (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def schema_paths(crd: dict) -> set[str]:
    """Every field under spec and status, as `spec.a.b` and `status.list[].c`."""
    found: set[str] = set()

    def walk(schema: dict, path: str) -> None:
        for name, sub in schema.get("properties", {}).items():
            found.add(f"{path}.{name}")
            walk(sub, f"{path}.{name}")
        if "items" in schema:
            walk(schema["items"], path + "[]")

    top = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    for part in ("spec", "status"):
        walk(top[part], part)
    return found


def documented_paths(text: str) -> set[str]:
    return {m[1] for row in table_rows(text) if (m := re.fullmatch(r"`((?:spec|status)\.[\w.\[\]]+)`", row[0]))}


# --- Reference: the CRDs ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("crd", "path"), [(CRD, "reference/nsscaler.md"), (WAKE_CRD, "reference/wake.md")],
                         ids=["NSScaler", "Wake"])
def test_the_reference_documents_every_crd_field_and_no_other(crd, path):
    schema, documented = schema_paths(crd), documented_paths(page(path))
    missing, absent = sorted(schema - documented), sorted(documented - schema)
    assert not missing, f"docs/{path}: add a row for each of {missing} (in the CRD's schema, not on the page)"
    assert not absent, f"docs/{path}: {absent} are documented but not in the CRD's schema"


@pytest.mark.parametrize("field", list(PolicySpec.model_fields))
def test_every_spec_field_is_in_the_crd_with_a_description(field):
    assert SPEC_SCHEMA[field]["description"]


def test_the_crd_has_no_field_the_job_does_not_know():
    assert set(SPEC_SCHEMA) == set(PolicySpec.model_fields)


def test_the_reference_says_kinds_cannot_be_an_empty_list():
    """The CRD requires at least one kind: the defaults apply when spec.kinds is left out, never when empty."""
    assert SPEC_SCHEMA["kinds"]["minItems"] == 1
    (row,) = [r for r in table_rows(page("reference/nsscaler.md")) if r[0] == "`spec.kinds`"]
    assert "1 to 20 items" in row[1] and "left out" in row[2]
    for text in (page("reference/settings.md"), page("reference/nsscaler.md"), README):
        assert not re.search(r"spec\.kinds`? is empty|empty `spec\.kinds`", text)


# --- Reference: settings, marks, exit codes, metrics -------------------------------------------------------------

@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_the_settings_page_documents_every_setting(field):
    settings = page("reference/settings.md")
    assert f"`NSSCALER_{field.upper()}`" in settings
    assert f"`--{field.replace('_', '-')}" in settings


def test_the_settings_page_documents_no_setting_that_does_not_exist():
    named = set(re.findall(r"`NSSCALER_(\w+)`", page("reference/settings.md")))
    assert named <= {f.upper() for f in Settings.model_fields}, named - {f.upper() for f in Settings.model_fields}


def mark_keys() -> set[str]:
    return {value for name, value in vars(marks).items()
            if name.isupper() and isinstance(value, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", value)}


def test_the_marks_page_lists_every_annotation_and_label_and_no_other():
    documented = {m[1] for row in table_rows(page("reference/marks.md")) if (m := re.fullmatch(r"`(.+)`", row[0]))}
    assert mark_keys() - documented == set(), "docs/reference/marks.md: add a row for each"
    assert documented - mark_keys() == set(), "docs/reference/marks.md: not a key in job/model/marks.py"
    assert f"`{marks.FIELD_MANAGER}`" in page("reference/marks.md")


def section(text: str, heading: str) -> str:
    """A page's text under `heading` (a `## ` heading), up to the next heading of that level."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def codes_of(text: str) -> dict[int, list[str]]:
    return {int(row[0]): row[1:] for row in table_rows(text) if row[0].isdigit()}


RUN_CODES = section(page("reference/exit-codes.md"), "`nsscaler run` (and `nsscaler` without a subcommand)")


@pytest.mark.parametrize(("command", "text"), [
    (cli.RUN, RUN_CODES),
    (cli.RELEASE, section(page("reference/exit-codes.md"), "`nsscaler release`")),
    (cli.RELEASE, page("operating/uninstall.md")),
], ids=["run", "release", "uninstall page"])
def test_the_exit_codes_pages_list_each_exit_code_of_each_subcommand(command, text):
    assert set(codes_of(text)) == set(command.exits), "the codes differ from job/cli.py's (each --help's epilog)"


def test_every_exit_code_of_the_command_is_the_runs():
    assert set(cli.RUN.exits) == {errors.EXIT_OK, errors.EXIT_FAILED, errors.EXIT_CANNOT_START, errors.EXIT_LEASE_HELD}


def test_the_plugin_page_lists_each_exit_code_of_the_plugin_as_its_help_says_it():
    documented = {int(row[0]): row[1] for row in table_rows(page("using/plugin.md")) if row[0].isdigit()}
    assert documented == plugin_exits.MEANINGS, "docs/using/plugin.md, Exit codes: copy job/plugin/exits.py"


def test_the_plugin_page_gives_the_plugins_own_bounds():
    text = " ".join(page("using/plugin.md").split())
    seconds = f"{PERSON_TIMEOUT:g}"
    assert f"at most {seconds} seconds to connect and at most {seconds} seconds for each reply" in text
    assert f"({Settings.model_fields['status_list_limit'].default} by default)" in text


def test_the_cronjob_fails_at_once_on_the_exit_code_the_page_says():
    cronjob = yaml.safe_load((ROOT / "kustomize/base/cronjob.yaml").read_text())
    rules = cronjob["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
    failing = {v for r in rules if r["action"] == "FailJob" for v in r.get("onExitCodes", {}).get("values", [])}
    assert failing == {errors.EXIT_CANNOT_START}
    assert "podFailurePolicy" in codes_of(RUN_CODES)[errors.EXIT_CANNOT_START][1]


def ksm_metrics() -> set[str]:
    config = yaml.safe_load((ROOT / "kustomize/components/metrics/customresourcestate.yaml").read_text())
    resources = config["spec"]["resources"] if "spec" in config else config["resources"]
    return {f"{r.get('metricNamePrefix', 'kube_customresource')}_{m['name']}" for r in resources for m in r["metrics"]}


def waker_metrics() -> set[str]:
    """What the waker serves on /metrics (its TYPE lines)."""
    return set(re.findall(r"^# TYPE (nsscaler_\S+) ", WakerMetrics().text(), re.M))  # not the process figures


def test_the_metrics_page_lists_every_metric_of_the_kube_state_metrics_config_and_of_the_waker_and_no_other():
    documented = {m[1] for row in table_rows(page("reference/metrics.md"))
                  if (m := re.fullmatch(r"`(nsscaler_\w+)(?:\{[^}]*\})?`", row[0]))}
    served = ksm_metrics() | waker_metrics()
    assert served - documented == set(), "docs/reference/metrics.md: add a row for each"
    assert documented - served == set(), "docs/reference/metrics.md: served by neither"


# --- Installing and operating: RBAC and what gets installed ------------------------------------------------------

RBAC_FILES = ("kustomize/base/rbac.yaml", "kustomize/base/wake-rbac.yaml", "kustomize/components/metrics/rbac.yaml",
              "kustomize/components/waker/job-rbac.yaml", "kustomize/components/waker/waker-rbac.yaml",
              "kustomize/components/gitops-syncs/rbac.yaml")
#: Roles in nsscaler's own namespace whose every rule the page's tables list too
ROLE_FILES = ("kustomize/base/calendar-rbac.yaml",)


def _words(cell: str) -> tuple[str, ...]:
    return tuple(sorted(w.strip("` ") for w in cell.split(",")))


def test_the_rbac_page_explains_every_grant_of_every_cluster_role_rule_for_rule():
    shipped = sorted(
        (doc["metadata"]["name"], group or "core", tuple(sorted(rule["resources"])), tuple(sorted(rule["verbs"])))
        for path in (*RBAC_FILES, *ROLE_FILES) for doc in yaml.safe_load_all((ROOT / path).read_text())
        if doc and doc["kind"] == ("Role" if path in ROLE_FILES else "ClusterRole")
        for rule in doc.get("rules", []) for group in rule["apiGroups"])
    documented = sorted(
        (row[0].strip("`"), row[1].strip("`"), _words(row[2]), _words(row[3]))
        for row in table_rows(page("operating/rbac.md")) if len(row) == 5 and row[0] != "role")
    assert all(row[4] for row in table_rows(page("operating/rbac.md")) if len(row) == 5), "a grant without a why"
    assert documented == shipped, "docs/operating/rbac.md and the ClusterRoles (and Roles) differ"


def rendered(overlay: str) -> list[dict]:
    out = subprocess.run([str(ROOT / ".venv/bin/kubectl"), "kustomize", str(ROOT / "kustomize/overlays" / overlay)],
                         check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_what_gets_installed_lists_every_object_the_prod_overlay_renders():
    documented = set()
    for row in table_rows(page("operating/install.md")):
        if len(row) == 3 and row[0] != "object":
            names = re.findall(r"`([^`]+)`", row[1])
            kinds = [k.strip() for k in row[0].replace(" and its binding", "").split(" and ")]
            if "and its binding" in row[0]:
                kinds += [f"{kinds[0]}Binding"]
            documented |= {(k, n.split("/")[-1]) for k in kinds for n in names}
    shipped = {(d["kind"], d["metadata"]["name"]) for d in rendered("prod")}
    assert shipped - documented == set(), "docs/operating/install.md, What gets installed: add these"
    assert documented - shipped == set(), "docs/operating/install.md, What gets installed: not rendered by prod"


# --- Drift between the pages, the Makefile and the manifests -----------------------------------------------------

def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]


def make_targets() -> dict[str, str]:
    """Each target of the Makefile with its `## help` text."""
    text = (ROOT / "Makefile").read_text()
    return {m[1]: m[2] for m in re.finditer(r"^([a-zA-Z_-]+):[^=\n]*?(?:## (.*))?$", text, re.M)}


def test_every_make_target_the_docs_name_exists():
    targets = make_targets()
    for path in markdown_files():
        named = set(re.findall(r"`make ([a-z][\w-]*)", path.read_text()))
        assert named <= set(targets), f"{path.relative_to(ROOT)}: no such make target {named - set(targets)}"


def test_the_docs_give_a_target_the_time_the_makefile_gives_it():
    minutes = {t: int(m[1]) for t, h in make_targets().items() if h and (m := re.search(r"~(\d+) min", h))}
    assert minutes, "no target says how long it takes"
    for path in markdown_files():
        for m in re.finditer(r"`make ([\w-]+)`[^`]{0,60}?\babout (\d+) minutes", path.read_text()):
            if m[1] in minutes:
                assert int(m[2]) == minutes[m[1]], (f"{path.relative_to(ROOT)} says `make {m[1]}` takes about {m[2]} "
                                                    f"minutes, the Makefile ~{minutes[m[1]]} min")


def test_references_to_the_docs_from_manifests_tools_and_tests_resolve():
    """A comment that sends a reader to a page names one that exists, and none names a README section the short
    README no longer has."""
    sources = [*ROOT.glob("kustomize/**/*.yaml"), *ROOT.glob("kustomize/**/*.json"), ROOT / "Makefile",
               *ROOT.glob("devtools/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("tools/*.py")]
    headings = set(re.findall(r"^#+ (.+)$", README, re.M))
    for source in sources:
        text = source.read_text()
        for target in re.findall(r"\bdocs/([\w/-]+\.md)", text):
            assert (DOCS / target).is_file(), f"{source.relative_to(ROOT)}: docs/{target} does not exist"
        for section in re.findall(r"README[:,] \"?([A-Z][^\"\n).]*)", text):
            assert section.strip() in headings, f"{source.relative_to(ROOT)}: README has no section {section!r}"


# --- The README, the front page ----------------------------------------------------------------------------------

def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_a_front_page():
    assert len(README.splitlines()) < 250


def test_the_readmes_links_resolve_to_pages_and_anchors():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert len(links) > 20
    for link in links:
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.is_file(), f"README.md links to {link}: no such file"
        if anchor:
            anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", target.read_text(), re.M)}
            assert anchor in anchors, f"README.md links to {link}: no such heading"


def test_the_readme_links_every_part_of_the_docs():
    for part in ("using", "operating", "runbooks", "reference", "contributing"):
        assert f"](docs/{part}/" in README, part


@pytest.mark.parametrize("path", ["operating/helm.md", "operating/uninstall.md", "using/wake-on-request.md",
                                  "contributing/performance.md", "operating/versions.md"])
def test_the_site_has_a_place_for_each_page_the_navigation_promises(path):
    assert (DOCS / path).is_file()
    assert path.removesuffix(".md") in page("index.md"), f"docs/index.md: {path} in no toctree"


def test_the_pages_speak_of_the_product_not_of_its_work_items():
    for path in markdown_files():
        text = path.read_text()
        found = re.findall(r"\b(?:issue|ticket|work item)s? #?\d+|\bsession's (?:code|start)\b", text, re.I)
        assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_the_dashboard_picture_draws_every_panel_of_the_dashboard():
    dashboard = json.loads(DASHBOARD.read_text())
    drawn = dashboard_preview.page(dashboard)
    for panel in dashboard["panels"]:
        assert f">{panel['title'].replace('&', '&amp;')}<" in drawn, panel["title"]
    assert (DOCS / "images/dashboard.png").read_bytes().startswith(b"\x89PNG")


# --- Installing with Helm: the values table ----------------------------------------------------------------------

#: values that are one map a user gives whole, not values of their own
WHOLE_MAPS = ("resources", "podSecurityContext", "securityContext")


def value_leaves(values: dict, path: str = "") -> dict[str, object]:
    """Every value of values.yaml a user sets, as `a.b`: the leaves; resources, security contexts and an empty map
    as a whole."""
    found: dict[str, object] = {}
    for name, value in values.items():
        if isinstance(value, dict) and value and name not in WHOLE_MAPS:
            found |= value_leaves(value, f"{path}{name}.")
        else:
            found[f"{path}{name}"] = value
    return found


def test_the_chart_readme_documents_every_value_of_the_chart_and_no_other():
    """The chart's README (generated from values.yaml's comments) has a row for every value, with its default: a
    value added without a comment has none."""
    values = value_leaves(yaml.safe_load((ROOT / "charts/nsscaler/values.yaml").read_text()))
    readme = (ROOT / "charts/nsscaler/README.md").read_text()
    documented: dict[str, str] = {}
    for row in table_rows(readme[readme.index("## Values"):]):
        if not row[0].startswith("**"):  # a group of values: its own row, no default
            documented |= dict.fromkeys(re.findall(r"`([\w.]+)`", row[0]), row[1])
    assert set(values) - set(documented) == set(), "charts/nsscaler/values.yaml: a comment over each value"
    assert set(documented) - set(values) == set(), "charts/nsscaler/README.md: not in charts/nsscaler/values.yaml"
    for name, value in values.items():
        if isinstance(value, bool | int):
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            assert documented[name] == f"`{shown}`", f"charts/nsscaler/README.md: {name} defaults to {shown}"
    assert "helm show values" in page("operating/helm.md") and "README.md" in page("operating/helm.md")


# --- Wakes: who stamps requestedBy -------------------------------------------------------------------------------

def test_no_page_says_the_api_server_stamps_requested_by_but_with_the_optional_component():
    """By default the creator writes `spec.requestedBy` and the ValidatingAdmissionPolicy only checks it; the API
    server fills it in only with the `wake-requester-stamp` component (Kubernetes 1.36 and later)."""
    texts = [(p, " ".join(p.read_text().split())) for p in markdown_files()]
    texts.append((ROOT / "kustomize/base/crd.yaml", (ROOT / "kustomize/base/crd.yaml").read_text()))
    for path, text in texts:
        for sentence in re.split(r"(?<=[.;|])\s", text):
            said = re.search(r"\bstamped\b|API server fills|fill(?:s|ed)? (?:it )?in", sentence)
            if "requestedBy" in sentence and said:
                assert "requester-stamp" in sentence, f"{path.relative_to(ROOT)}: {sentence!r}"


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_the_settings_page_gives_each_settings_default(field):
    default = Settings.model_fields[field].default
    (row,) = [r for r in table_rows(page("reference/settings.md")) if r[0] == f"`NSSCALER_{field.upper()}`"]
    if default is None:
        assert row[2].startswith("—"), f"docs/reference/settings.md: {field} has no default"
    else:
        shown = ",".join(default) if isinstance(default, list) else str(default).lower() \
            if isinstance(default, bool) else str(default)
        assert row[2] == f"`{shown}`", f"docs/reference/settings.md: {field} defaults to {shown}"
