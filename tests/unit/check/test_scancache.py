"""The static scan cached in the work dir: reused while nothing it reads
changes, redone when the lock, the compat data or the import path's files change, and
a corrupt or linked entry is ignored and rewritten, never followed."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from stackmatrix import _proc
from stackmatrix._datadir import ENV_VAR
from stackmatrix.built_environment import Environment
from stackmatrix.check import data as _data
from stackmatrix.check import environment as env_check
from stackmatrix.check import scancache
from stackmatrix.check.phase import CheckOutcome, check_environment
from stackmatrix.check.scancache import ScanCache

LOCK = "lock-digest-1"


def an_extension() -> Path:
    dynload = Path(sysconfig.get_config_var("DESTSHARED"))
    return next(p for p in sorted(dynload.glob("_json*.so")))


def make_site(tmp_path: Path) -> Path:
    """A site-packages holding one distribution with one real ELF extension."""
    site = tmp_path / "root" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    shutil.copy(an_extension(), site / "pkg" / "_speedups.so")
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("pkg/_speedups.so,,\npkg-1.0.dist-info/METADATA,,\n")
    return site


def environment(site: Path) -> Environment:
    # root other than "/": the import path is the declared one, no interpreter is run
    return Environment(
        backend="docker",
        python=("python3",),
        site_packages=(site,),
        root=site.parent,
        image="img@sha256:0",
    )


def check(env: Environment, cache: ScanCache | None) -> CheckOutcome:
    return check_environment(
        env,
        cell_id="a",
        targets=["sm_90"],
        cuda=None,
        declared_driver="580.0",
        log_path=None,
        run_probe=False,
        scan_cache=cache,
    )


def cache_in(tmp_path: Path, lock: str = LOCK) -> ScanCache:
    return ScanCache.in_work_dir(tmp_path / "work", identity=("content-hash", lock))


def scanned(outcome: CheckOutcome) -> str:
    return str(outcome.data["timing"]["static_scan"])


def without_timing(outcome: CheckOutcome) -> dict[str, Any]:
    data = {k: v for k, v in outcome.data.items() if k != "timing"}
    held: dict[str, Any] = json.loads(json.dumps(data, default=str))  # as check.json holds it
    return held


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path)


def test_an_unchanged_environment_is_scanned_once_and_judged_the_same(tmp_path, site, monkeypatch):
    env = environment(site)
    first = check(env, cache_in(tmp_path))
    assert scanned(first) == "miss" and first.data["extensions"]

    def rescanned(*args: object, **kwargs: object) -> None:
        raise AssertionError("the static scan ran again")

    monkeypatch.setattr(env_check, "static_check", rescanned)
    monkeypatch.setattr(env_check, "read_inventory", rescanned)
    again = check(env, cache_in(tmp_path))
    assert scanned(again) == "hit"
    assert without_timing(again) == without_timing(first)
    assert [f.to_dict() for f in again.findings] == [f.to_dict() for f in first.findings]
    assert again.verdict == first.verdict


def test_no_cache_scans_every_time(tmp_path, site):
    assert scanned(check(environment(site), None)) == "off"
    assert not (tmp_path / "work").exists()


def test_a_new_lock_is_scanned_again(tmp_path, site):
    env = environment(site)
    check(env, cache_in(tmp_path))
    assert scanned(check(env, cache_in(tmp_path, lock="lock-digest-2"))) == "miss"


def test_changed_compat_data_is_scanned_again(tmp_path, site, monkeypatch):
    compat = tmp_path / "compat"
    shutil.copytree(_data.data_dir(), compat)
    monkeypatch.setenv(ENV_VAR, str(compat))
    env = environment(site)
    check(env, cache_in(tmp_path))
    assert scanned(check(env, cache_in(tmp_path))) == "hit"
    with (compat / "loaders.toml").open("a") as fh:
        fh.write("\n# a rule was edited\n")
    assert scanned(check(env, cache_in(tmp_path))) == "miss"
    (compat / "new-rules.toml").write_text("schema_version = 1\n")
    assert scanned(check(env, cache_in(tmp_path))) == "miss"


def test_a_package_installed_on_the_import_path_is_seen_bytecode_is_not(tmp_path, site):
    """A directory outside the environment's own (an inherited image site) changes
    without the content hash changing: its dist-info names and times are in the key."""
    env = environment(site)
    check(env, cache_in(tmp_path))
    (site / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__").mkdir()  # what importing does: not a change
    (site / "mod.cpython-311.pyc").write_bytes(b"")
    assert scanned(check(env, cache_in(tmp_path))) == "hit"
    other = site / "other-2.0.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 2.0\n")
    outcome = check(env, cache_in(tmp_path))
    assert scanned(outcome) == "miss"
    assert "other" in [d["name"] for d in outcome.data["inventory"]]


def test_a_corrupt_entry_is_ignored_and_rewritten(tmp_path, site, caplog):
    env, cache = environment(site), cache_in(tmp_path)
    first = check(env, cache)
    (entry,) = cache.directory.glob("*.json")
    good = entry.read_text()
    for garbage in ("{not json", '{"schema_version": 1}', json.dumps([1, 2]), ""):
        entry.write_text(garbage)
        redone = check(env, cache)
        assert scanned(redone) == "miss"
        assert without_timing(redone) == without_timing(first)
        assert json.loads(entry.read_text())["key"] == json.loads(good)["key"]
    assert "ignoring the corrupt static-scan cache entry" in caplog.text
    assert scanned(check(env, cache)) == "hit"


def test_an_entry_from_another_key_is_not_taken(tmp_path, site):
    env, cache = environment(site), cache_in(tmp_path)
    check(env, cache)
    (entry,) = cache.directory.glob("*.json")
    raw = json.loads(entry.read_text())
    raw["key"] = "0" * 64
    entry.write_text(json.dumps(raw))
    assert scanned(check(env, cache)) == "miss"


def test_a_linked_entry_is_never_followed(tmp_path, site):
    env, cache = environment(site), cache_in(tmp_path)
    check(env, cache)
    (entry,) = cache.directory.glob("*.json")
    victim = tmp_path / "victim.json"
    victim.write_text(entry.read_text())  # even a valid entry is not read through a link
    entry.unlink()
    entry.symlink_to(victim)
    before = victim.read_text()
    assert scanned(check(env, cache)) == "miss"
    assert not entry.is_symlink() and victim.read_text() == before


def test_a_linked_cache_directory_is_not_used(tmp_path, site, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / scancache.DIRNAME).symlink_to(elsewhere, target_is_directory=True)
    assert scanned(check(environment(site), cache_in(tmp_path))) == "off"
    assert list(elsewhere.iterdir()) == []
    assert "is a symbolic link" in caplog.text


def test_a_scan_cut_short_by_ctrl_c_is_not_kept(tmp_path, site, monkeypatch):
    monkeypatch.setattr(_proc, "interrupted", lambda: True)
    cache = cache_in(tmp_path)
    outcome = check(environment(site), cache)
    assert outcome.data["extensions"] == []  # the scan stopped before its first extension
    assert not list(cache.directory.glob("*.json"))


def test_only_the_newest_entries_are_kept(tmp_path, site):
    env, cache = environment(site), cache_in(tmp_path)
    cache.directory.mkdir(parents=True)
    for n in range(5):
        old = cache.directory / f"{n:064x}.json"
        old.write_text("{}")
        os.utime(old, ns=(n, n))
    scancache.prune(cache, keep=3)
    assert sorted(p.name[-6:] for p in cache.directory.glob("*.json")) == [
        "2.json",
        "3.json",
        "4.json",
    ]
    check(env, cache)  # a new entry: the newest
    assert len(list(cache.directory.glob("*.json"))) == 4  # under KEEP: nothing pruned
