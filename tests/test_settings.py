"""The one settings object: every path comes from the environment or the repository root."""
from __future__ import annotations

from pathlib import Path

import pytest

from headlib import files
from headlib.data.corpora import DataError, data_root
from headlib.settings import SettingsError, find_root, settings


def test_root_is_the_repository_from_any_directory_inside_it(monkeypatch):
    monkeypatch.delenv("HEADLIB_ROOT", raising=False)
    root = find_root()
    assert (root / "pyproject.toml").is_file() and (root / "headlib" / "settings.py").is_file()
    assert find_root(root / "headlib" / "analysis") == root == find_root(root / "tests")


def test_outside_a_repository_the_error_says_what_to_set(monkeypatch, tmp_path):
    monkeypatch.delenv("HEADLIB_ROOT", raising=False)
    with pytest.raises(SettingsError, match="HEADLIB_ROOT"):
        find_root(tmp_path)
    monkeypatch.setenv("HEADLIB_ROOT", str(tmp_path))
    assert find_root(Path("/")) == tmp_path.resolve()


def test_paths_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADLIB_ROOT", str(tmp_path / "repo"))
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path / "cache"))
    monkeypatch.delenv("HEADLIB_DATA", raising=False)
    s = settings()
    assert s.root == tmp_path / "repo"
    assert s.data == tmp_path / "shared" / "data"
    assert s.artifacts == files.artifacts_dir() == tmp_path / "cache"
    assert (s.results, s.notebooks, s.book) == (s.root / "results", s.root / "notebooks", s.root / "book")


def test_a_missing_data_directory_is_one_error_naming_it(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADLIB_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match=f"{tmp_path / 'nowhere'}.*HEADLIB_DATA"):
        data_root()
