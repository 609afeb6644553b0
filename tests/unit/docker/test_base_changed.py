"""A cell image whose base was rebuilt with other files is rebuilt, not reused."""

from __future__ import annotations

import pytest

from stackmatrix.builder import _docker_cli
from stackmatrix.builder._docker_cli import ImageInfo
from stackmatrix.jsontypes import JSONObject

BASE = "stackmatrix-local/nvidia/cuda:13.0.1-pypi-devel-bookworm"


def _image(*layers: str, base: str | None = BASE) -> JSONObject:
    labels: JSONObject = {_docker_cli.BASE_LABEL: base} if base else {}
    return {
        "Id": "sha256:" + "c" * 64,
        "RootFS": {"Layers": list(layers)},
        "Config": {"Labels": labels},
    }


def _mine(*layers: str, base: str | None = BASE) -> ImageInfo:
    """One of our cell images, as the backend reads it."""
    return ImageInfo.of(_image(*layers, base=base))


@pytest.fixture
def bases(monkeypatch: pytest.MonkeyPatch) -> dict[str, JSONObject]:
    """The images `inspect_image` finds, by reference."""
    found: dict[str, JSONObject] = {}
    monkeypatch.setattr(_docker_cli, "inspect_image", lambda docker, ref: found.get(ref))
    return found


def test_an_image_on_its_base_is_reused(bases: dict[str, JSONObject]) -> None:
    bases[BASE] = _image("sha256:debian", "sha256:cuda", base=None)
    assert _docker_cli.base_changed("docker", _mine("sha256:debian", "sha256:cuda", "v")) is None


def test_a_base_rebuilt_with_other_files_rebuilds_the_cell(
    bases: dict[str, JSONObject],
) -> None:
    bases[BASE] = _image("sha256:debian", "sha256:cuda-fixed", base=None)
    why = _docker_cli.base_changed("docker", _mine("sha256:debian", "sha256:cuda", "v"))
    assert why is not None and BASE in why and "rebuilt since" in why


def test_a_base_rebuilt_with_the_same_files_does_not(bases: dict[str, JSONObject]) -> None:
    # another id (docker import and BuildKit stamp the time), the same layers
    bases[BASE] = {**_image("sha256:debian", "sha256:cuda", base=None), "Id": "sha256:new"}
    assert _docker_cli.base_changed("docker", _mine("sha256:debian", "sha256:cuda", "v")) is None


def test_without_a_base_to_compare_the_image_is_reused(bases: dict[str, JSONObject]) -> None:
    # the base not pulled here, or an image that isn't ours (no label)
    assert _docker_cli.base_changed("docker", _mine("sha256:debian", "v")) is None
    bases[BASE] = _image("sha256:other", base=None)
    assert _docker_cli.base_changed("docker", _mine("sha256:debian", base=None)) is None
