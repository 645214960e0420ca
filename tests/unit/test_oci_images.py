"""Image archives (docker save and OCI layouts) read into a config and layers, checked
against their digests; references pinned by digest; an image's config under a job's spec."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from herder.domain.errors import Invalid
from herder.domain.images import (
    ImageConfig,
    ImageProblem,
    ImageReference,
    check_image_allowed,
    image_argv,
    image_environment,
    parse_registries,
)
from herder.worker.image_layers import Budget
from herder.worker.images import build_root
from herder.worker.oci_archive import open_archive, open_layer, read_image
from tests.images import Image, Member, busybox_image, digest, image_config, layer_tar

DIGEST = "sha256:" + "ab" * 32
KEY = "cd" * 32  # a root's name (``root_key``)


def small_image(compress: bool = True) -> Image:
    layers = [layer_tar([Member("bin/hello", b"hi", mode=0o755)])]
    return Image(layers, image_config(layers), compress)


def read(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "image.tar"
    path.write_bytes(data)
    with open_archive(path) as archive:
        read_image(archive)


@pytest.mark.parametrize("form", ["oci", "docker"])
def test_both_archive_forms_give_the_config_and_the_layers(tmp_path: Path, form: str) -> None:
    image = small_image()
    data = image.oci_archive() if form == "oci" else image.docker_archive()
    path = tmp_path / "image.tar"
    path.write_bytes(data)
    with open_archive(path) as archive:
        read_back = read_image(archive)
        assert read_back.config_digest == digest(image.config)
        assert read_back.config.entrypoint == ("/bin/sh", "-c")
        assert read_back.config.working_dir == "/app"
        assert len(read_back.layers) == 1
        assert open_layer(archive, read_back.layers[0]).read(2) in (b"\x1f\x8b", b"bi")


def test_a_tampered_blob_in_an_oci_archive_is_refused(tmp_path: Path) -> None:
    image = small_image()
    image.blobs[digest(image.config)] = image.config.replace(b"/app", b"/tmp")
    with pytest.raises(ImageProblem, match="does not match its digest"):
        read(tmp_path, image.oci_archive())


def test_a_tampered_layer_fails_the_build_on_its_diff_id(tmp_path: Path) -> None:
    image = small_image(compress=False)
    config = ImageConfig.from_json(image.config)
    evil = layer_tar([Member("bin/hello", b"evil", mode=0o755)])
    with pytest.raises(ImageProblem, match="does not match its config's diff_id"):
        build_root(tmp_path, KEY, config, [lambda: io.BytesIO(evil)], Budget(1 << 20, 100))
    assert list(tmp_path.iterdir()) == []  # the half-built root is gone


def test_a_built_root_has_the_mount_points_and_the_working_directory(tmp_path: Path) -> None:
    image = busybox_image(compress=False)
    config = ImageConfig.from_json(image.config)
    layers = [lambda layer=layer: io.BytesIO(layer) for layer in image.layers]
    root = build_root(tmp_path, KEY, config, layers, Budget(1 << 30, 10_000))
    assert root == tmp_path / KEY
    for point in ("proc", "sys", "dev", "workspace", "tmp", "var/tmp", "checkpoint", "app"):
        assert (root / point).is_dir(), point
    assert (root / "etc/resolv.conf").is_file()
    assert (root / "etc/greeting").read_text() == "from the top layer\n"
    assert not (root / "etc/removed").exists()
    assert not (root / "opt/old").exists()
    assert build_root(tmp_path, KEY, config, [], Budget(0, 0)) == root  # built once


NOT_IMAGES = {
    "no manifest": b"",
    "a plain tar": layer_tar([Member("hello.txt", b"hi")]),
    "manifest.json of another shape": layer_tar([Member("manifest.json", b'{"a": 1}')]),
    "index.json without manifests": layer_tar([Member("index.json", b'{"manifests": []}')]),
    "an index naming a missing blob": layer_tar(
        [Member("index.json", json.dumps({"manifests": [{"digest": DIGEST}]}).encode())]
    ),
}


@pytest.mark.parametrize("data", NOT_IMAGES.values(), ids=NOT_IMAGES.keys())
def test_what_is_not_an_image_archive_is_refused(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ImageProblem):
        read(tmp_path, data)


def test_references_must_be_pinned_by_digest() -> None:
    reference = ImageReference.parse(f"127.0.0.1:5000/tools/busybox@{DIGEST}")
    assert (reference.host, reference.name, reference.digest) == (
        "127.0.0.1:5000",
        "tools/busybox",
        DIGEST,
    )
    for text in ("registry.internal/busybox:latest", "busybox", f"/busybox@{DIGEST}",
                 "registry.internal/Busybox@sha256:12"):  # fmt: skip
        with pytest.raises(ImageProblem):
            ImageReference.parse(text)


def test_only_the_operators_registries_are_allowed() -> None:
    registries = parse_registries("https://registry.internal, http://127.0.0.1:5000")
    check_image_allowed(f"registry.internal/busybox@{DIGEST}", registries)
    with pytest.raises(Invalid, match="not in a registry this server allows") as refused:
        check_image_allowed(f"docker.io/library/busybox@{DIGEST}", registries)
    assert refused.value.errors[0].field == "image"
    with pytest.raises(ImageProblem):
        parse_registries("ftp://registry.internal")


CONFIG = ImageConfig(("/entry",), ("default", "cmd"), (("PATH", "/bin"), ("A", "image")), "/app")


def test_command_replaces_cmd_args_append_and_entrypoint_stays() -> None:
    assert image_argv(CONFIG, None, []) == ["/entry", "default", "cmd"]
    assert image_argv(CONFIG, "mine 'two words'", ["x"]) == ["/entry", "mine", "two words", "x"]
    assert image_argv(ImageConfig(), "run", []) == ["run"]
    with pytest.raises(ImageProblem, match="no Entrypoint or Cmd"):
        image_argv(ImageConfig(), None, [])


def test_the_image_env_lies_over_the_base() -> None:
    env = image_environment(CONFIG, {"PATH": "/usr/bin", "HOME": "/workspace"})
    assert env == {"PATH": "/bin", "HOME": "/workspace", "A": "image"}


BAD_CONFIGS = {
    "not json": b"{",
    "env without =": json.dumps({"config": {"Env": ["NOPE"]}}).encode(),
    "relative workdir": json.dumps({"config": {"WorkingDir": "app"}}).encode(),
    "cmd not a list": json.dumps({"config": {"Cmd": "echo"}}).encode(),
    "diff id not a digest": json.dumps({"rootfs": {"diff_ids": ["md5:1"]}}).encode(),
    "a NUL in cmd": json.dumps({"config": {"Cmd": ["echo", "a\u0000b"]}}).encode(),
    "a NUL in env": json.dumps({"config": {"Env": ["A=1\u0000LD_PRELOAD=x"]}}).encode(),
}


@pytest.mark.parametrize("data", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_configs_are_refused(data: bytes) -> None:
    with pytest.raises(ImageProblem):
        ImageConfig.from_json(data)


def test_two_builds_of_one_new_image_at_once_end_with_one_whole_root(tmp_path: Path) -> None:
    image = busybox_image(compress=False)
    config = ImageConfig.from_json(image.config)
    layers = [lambda layer=layer: io.BytesIO(layer) for layer in image.layers]
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(
            lambda _: build_root(tmp_path, KEY, config, layers, Budget(1 << 30, 10_000)),
            range(2),
        ))  # fmt: skip
    assert built[0] == built[1]
    # no half-built one: the root and the marker written once it is whole
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        built[0].name,
        f"{built[0].name}.used",
    ]
    assert (built[0] / "etc/greeting").read_text() == "from the top layer\n"
