"""The release's pure parts: pinning the chart's values to the image's digest, and reading the registry given."""

from __future__ import annotations

import pytest
import yaml

from devtools import publish

DIGEST = "sha256:" + "ab" * 32


def test_pinning_sets_only_the_image_repository_and_digest_and_keeps_every_comment() -> None:
    values = publish.CHART.joinpath("values.yaml").read_text()
    pinned = publish.pin_chart_values(values, repository="127.0.0.1:5000/platform/nsscaler", digest=DIGEST)
    before, after = yaml.safe_load(values), yaml.safe_load(pinned)
    assert after["image"]["repository"] == "127.0.0.1:5000/platform/nsscaler"
    assert after["image"]["digest"] == DIGEST
    after["image"].update(repository=before["image"]["repository"], digest=before["image"]["digest"])
    assert after == before
    assert [line for line in pinned.splitlines() if line.lstrip().startswith("#")] == \
        [line for line in values.splitlines() if line.lstrip().startswith("#")]


def test_pinning_reads_the_image_block_only() -> None:
    values = "other:\n  repository: keep\n  digest: keep\nimage:\n  # the image\n  repository: x\n  tag: ''\n" \
             "  digest: ''\nlast:\n  digest: keep\n"
    pinned = yaml.safe_load(publish.pin_chart_values(values, repository="r", digest=DIGEST))
    assert pinned == {"other": {"repository": "keep", "digest": "keep"},
                      "image": {"repository": "r", "tag": "", "digest": DIGEST}, "last": {"digest": "keep"}}


def test_values_without_an_image_block_are_refused() -> None:
    with pytest.raises(publish.ReleaseError, match="no `image:` block"):
        publish.pin_chart_values("schedule: x\n", repository="r", digest=DIGEST)
    with pytest.raises(publish.ReleaseError, match=r"no `image\.digest`"):
        publish.pin_chart_values("image:\n  repository: x\n", repository="r", digest=DIGEST)


@pytest.mark.parametrize(("registry", "plain"), [
    ("127.0.0.1:5000/platform", True), ("localhost:5000", True), ("registry.invalid/platform", False),
    ("10.0.0.1:5000/x", False),
])
def test_only_a_loopback_registry_is_spoken_to_in_plain_http(registry: str, plain: bool) -> None:
    assert publish.plain_http(publish.check_registry(registry)) is plain


@pytest.mark.parametrize("registry", ["", "https://host/x", "host/x@sha256:00", "host/UPPER", "host:port/x", "a b"])
def test_a_registry_that_is_not_host_port_path_is_refused(registry: str) -> None:
    with pytest.raises(publish.ReleaseError, match="host\\[:port\\]/path"):
        publish.check_registry(registry)
