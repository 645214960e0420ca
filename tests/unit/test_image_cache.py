"""The worker's image roots are bounded: past the bound the least recently used roots go,
never one an attempt holds (it is bound into a running attempt); a root left half-made by a
worker that died is removed at its next start."""

from __future__ import annotations

import asyncio
from pathlib import Path

from herder.domain.jobs import JobSpec
from herder.worker.images import ImageStore
from tests.images import Image, Member, image_config, layer_tar

IMAGE_BYTES = 1000  # each test image holds one file of this size


class Artifacts:
    """The worker's artifact cache as ImageStore uses it: a path by sha256."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def path(self, sha256: str) -> Path:
        return self.directory / sha256


def image_spec(artifacts: Artifacts, name: str) -> JobSpec:
    layers = [layer_tar([Member(f"bin/{name}", name[0].encode() * IMAGE_BYTES, mode=0o755)])]
    sha256 = name.ljust(64, "0").encode().hex()[:64]
    (artifacts.directory / sha256).write_bytes(Image(layers, image_config(layers)).oci_archive())
    return JobSpec(runtime="image", artifact=sha256)


def test_past_the_bound_the_least_recently_used_root_that_nothing_holds_goes(
    tmp_path: Path,
) -> None:
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, (), cache_bytes=2 * IMAGE_BYTES + 500)  # type: ignore[arg-type]
    a, b, c = (image_spec(artifacts, name) for name in ("a", "b", "c"))

    async def scenario() -> dict[str, Path]:
        roots = {}
        for name, spec in (("a", a), ("b", b), ("c", c)):
            async with store.holding(spec) as image:
                roots[name] = image.root
        assert not roots["a"].exists()  # the oldest of three, two fit
        assert roots["b"].is_dir()
        assert roots["c"].is_dir()
        async with store.holding(b) as held:
            async with store.holding(a) as again:  # built again; c is now the oldest
                assert again.root == roots["a"]
                assert (again.root / "bin" / "a").is_file()
            assert (held.root / "bin" / "b").is_file()  # held: never evicted under it
        return roots

    roots = asyncio.run(scenario())
    assert not roots["c"].exists()
    assert roots["a"].is_dir()
    assert roots["b"].is_dir()


def test_a_root_without_its_marker_is_removed_when_the_worker_starts(tmp_path: Path) -> None:
    artifacts = Artifacts(tmp_path)
    spec = image_spec(artifacts, "a")
    store = ImageStore(tmp_path / "images", artifacts, ())  # type: ignore[arg-type]

    async def build() -> Path:
        async with store.holding(spec) as image:
            return image.root

    root = asyncio.run(build())
    root.with_name(root.name + ".used").unlink()  # as if it died before the marker was written
    ImageStore(tmp_path / "images", artifacts, ())  # type: ignore[arg-type]
    assert not root.exists()
