"""The worker's image roots are bounded: past the bound the least recently used roots go,
never one an attempt holds (it is bound into a running attempt), each counted by what it
takes on disk; a root left half-made by a worker that died is removed at its next start. A
root is shared only by images proven to hold its very layers (issue 40, item 8); building
one is charged to the attempt that built it, and a refused image is remembered (item 10)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path

import pytest

from herder.domain.images import ImageProblem
from herder.domain.jobs import JobSpec
from herder.worker.image_layers import BLOCK_BYTES, MIB
from herder.worker.images import BuildCharge, ImageStore, PreparedImage, Refusals
from tests.images import Image, Member, directory, image_config, layer_tar

IMAGE_BYTES = 1024 * 1024  # each test image holds one file of this size, and a few directories


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
    store = ImageStore(tmp_path / "images", artifacts, (), cache_bytes=5 * IMAGE_BYTES // 2)  # type: ignore[arg-type]
    a, b, c = (image_spec(artifacts, name) for name in ("a", "b", "c"))

    async def scenario() -> dict[str, Path]:
        roots = {}
        for name, spec in (("a", a), ("b", b), ("c", c)):
            async with store.holding(spec, BuildCharge()) as image:
                roots[name] = image.root
        assert not roots["a"].exists()  # the oldest of three, two fit
        assert roots["b"].is_dir()
        assert roots["c"].is_dir()
        async with store.holding(b, BuildCharge()) as held:
            async with store.holding(a, BuildCharge()) as again:  # built again; c is now the oldest
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
        async with store.holding(spec, BuildCharge()) as image:
            return image.root

    root = asyncio.run(build())
    root.with_name(root.name + ".used").unlink()  # as if it died before the marker was written
    ImageStore(tmp_path / "images", artifacts, ())  # type: ignore[arg-type]
    assert not root.exists()


def archive_spec(artifacts: Artifacts, data: bytes) -> JobSpec:
    """An image archive uploaded as an artifact: named by its sha256, as the server names it."""
    sha256 = hashlib.sha256(data).hexdigest()
    (artifacts.directory / sha256).write_bytes(data)
    return JobSpec(runtime="image", artifact=sha256)


def prepare(store: ImageStore, spec: JobSpec, charge: BuildCharge | None = None) -> PreparedImage:
    return asyncio.run(store.prepare(spec, charge or BuildCharge()))


def stackings(caplog: pytest.LogCaptureFixture) -> int:
    return sum("stacking" in record.getMessage() for record in caplog.records)


def test_a_tenant_with_another_tenants_config_and_stand_in_layers_gets_no_root_of_it(
    tmp_path: Path,
) -> None:
    """The issue's attack: the victim's exact config (a public image's is public), in a
    small archive of empty stand-in layers, used to be given the root the victim's layers
    built, secret and all."""
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, ())  # type: ignore[arg-type]
    layers = [layer_tar([directory("secret"), Member("secret/ta-key", b"tenant a's key")])]
    victim = Image(layers, image_config(layers))
    built = prepare(store, archive_spec(artifacts, victim.oci_archive()))
    assert (built.root / "secret/ta-key").read_bytes() == b"tenant a's key"

    stand_in = Image([layer_tar([])], victim.config)  # the same config, another tenant's upload
    with pytest.raises(ImageProblem, match="layer 1 does not match its config's diff_id"):
        prepare(store, archive_spec(artifacts, stand_in.oci_archive()))
    assert [root.name for root in (tmp_path / "images/roots").iterdir() if root.is_dir()] == [
        built.root.name
    ]  # nothing of the stand-in's was kept


def test_the_same_layers_in_another_archive_share_the_root_they_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Proven identical: each layer hashed as this archive holds it, so another tenant's
    upload of the same image (here in docker save's form) is given the root, unstacked."""
    caplog.set_level(logging.INFO, logger="herder.worker.images")
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, ())  # type: ignore[arg-type]
    layers = [layer_tar([Member("bin/tool", b"x" * 100, mode=0o755)])]
    image = Image(layers, image_config(layers), compress=False)
    first = prepare(store, archive_spec(artifacts, image.oci_archive()))
    again = prepare(store, archive_spec(artifacts, image.docker_archive()))
    assert again.root == first.root
    assert stackings(caplog) == 1


def test_a_root_of_empty_directories_counts_its_blocks_and_goes_past_a_small_bound(
    tmp_path: Path,
) -> None:
    """No file bytes, but a block and an inode each: the issue's 199,000 directories were a
    782 MiB root recorded as 0 bytes, so no bound ever evicted them."""
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, (), cache_bytes=2 * MIB)  # type: ignore[arg-type]
    many = [layer_tar([directory(f"d{number}") for number in range(1000)])]
    empty_directories = archive_spec(artifacts, Image(many, image_config(many)).oci_archive())
    small = image_spec(artifacts, "a")

    async def scenario() -> tuple[Path, Path]:
        async with store.holding(empty_directories, BuildCharge()) as directories:
            pass
        async with store.holding(small, BuildCharge()) as other:
            pass
        return directories.root, other.root

    directories, other = asyncio.run(scenario())
    assert not directories.exists()  # 1,000 blocks of 4 KiB: past the 2 MiB bound alone
    assert other.is_dir()
    assert 1000 * BLOCK_BYTES > 2 * MIB


def test_a_refused_image_is_refused_again_at_once_with_the_same_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not stacked again on every run: the second is refused without even its archive."""
    caplog.set_level(logging.INFO, logger="herder.worker.images")
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, (), max_bytes=MIB)  # type: ignore[arg-type]
    bomb = [layer_tar([directory(f"d{number}") for number in range(1000)])]
    spec = archive_spec(artifacts, Image(bomb, image_config(bomb)).oci_archive())
    with pytest.raises(ValueError, match="unpacks to more than 1 MiB") as first:
        prepare(store, spec)
    assert stackings(caplog) == 1
    assert spec.artifact is not None
    (artifacts.directory / spec.artifact).unlink()  # were it read again, this would fail
    with pytest.raises(ImageProblem) as second:
        prepare(store, spec)
    assert str(second.value) == str(first.value)
    assert stackings(caplog) == 1


def test_the_same_refused_layers_in_another_archive_are_refused_before_stacking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="herder.worker.images")
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, (), max_bytes=MIB)  # type: ignore[arg-type]
    bomb = [layer_tar([directory(f"d{number}") for number in range(1000)])]
    image = Image(bomb, image_config(bomb), compress=False)
    with pytest.raises(ValueError, match="unpacks to more than 1 MiB") as first:
        prepare(store, archive_spec(artifacts, image.oci_archive()))
    with pytest.raises(ImageProblem) as rewrapped:
        prepare(store, archive_spec(artifacts, image.docker_archive()))
    assert str(rewrapped.value) == str(first.value)
    assert stackings(caplog) == 1


def test_building_is_charged_to_the_attempt_that_built_it_and_refusing_too(
    tmp_path: Path,
) -> None:
    artifacts = Artifacts(tmp_path)
    store = ImageStore(tmp_path / "images", artifacts, (), max_bytes=MIB)  # type: ignore[arg-type]
    many = [layer_tar([directory(f"d{number}") for number in range(200)])]
    spec = archive_spec(artifacts, Image(many, image_config(many)).oci_archive())
    built, reused = BuildCharge(), BuildCharge()
    prepare(store, spec, built)
    prepare(store, spec, reused)
    assert built.user_seconds + built.system_seconds > 0
    assert reused == BuildCharge()  # the root was there: nothing spent for it

    bomb = [layer_tar([directory(f"d{number}") for number in range(1000)])]
    refused = BuildCharge()
    with pytest.raises(ValueError, match="unpacks to more than"):
        prepare(store, archive_spec(artifacts, Image(bomb, image_config(bomb)).oci_archive()),
                refused)  # fmt: skip
    assert refused.user_seconds + refused.system_seconds > 0


def test_refusals_are_kept_a_bounded_number_for_a_bounded_time() -> None:
    now = [0.0]
    refusals = Refusals(most=2, seconds=60.0, clock=lambda: now[0])
    refusals.note("too big", "a")
    refusals.note("too many", "b", "c")
    refusals.check("a")  # the oldest of three, forgotten
    with pytest.raises(ImageProblem, match="too many"):
        refusals.check("b")
    now[0] = 60.0
    refusals.check("c")  # an hour old: forgotten


def test_roots_an_older_worker_keyed_by_their_config_alone_are_removed_at_start(
    tmp_path: Path,
) -> None:
    """Their marker held file bytes only, and their key proved nothing of their layers."""
    roots = tmp_path / "images" / "roots"
    older = roots / ("ab" * 32)
    (older / "secret").mkdir(parents=True)
    older.with_name(older.name + ".used").write_text("0")
    ImageStore(tmp_path / "images", Artifacts(tmp_path), ())  # type: ignore[arg-type]
    assert list(roots.iterdir()) == []
