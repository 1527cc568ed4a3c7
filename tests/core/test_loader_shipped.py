"""The shipped profiles are parsed by libyaml's parser (specplan.core.loader, `shipped=True`): it reads every shipped
YAML file exactly as the Python loader does, and a shipped file with an error gets the Python loader's line."""

from pathlib import Path

import pytest
import yaml

from specplan.core import loader
from specplan.core.errors import SpecplanError
from specplan.profiles import registry

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for d in ("hardware_profiles", "model_profiles", "engine_profiles", "engine_profiles/kernels",
                             "examples/studies", "specplan/data/acceptance_profiles")
                 for p in (ROOT / d).glob("*.yaml"))


def test_there_are_shipped_files_and_libyaml():
    assert len(SHIPPED) > 50
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the shipped profiles take the Python parser"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_libyaml_reads_each_shipped_file_as_the_python_loader(path):
    text = path.read_text()
    fast = loader._parse_with(loader._CLoader, text, str(path))
    slow = loader._parse_with(loader._Loader, text, str(path))
    assert fast == slow
    assert repr(fast) == repr(slow)  # the same types too (1 vs 1.0, '1e3' vs 1000.0)


def test_only_the_built_in_profile_folders_are_shipped(tmp_path):
    assert registry.shipped(ROOT / "hardware_profiles" / "h100-sxm.yaml")
    assert registry.shipped(ROOT / "engine_profiles" / "kernels" / next(
        p.name for p in (ROOT / "engine_profiles" / "kernels").glob("*.yaml")))
    own = tmp_path / "h100-sxm.yaml"
    own.write_text((ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text())
    assert not registry.shipped(own)


@pytest.mark.parametrize("text", ["a: 1\na: 2\n", "a: [1, 2\n", "a: {b: .nan}\n", "a: &x [*x]\n", "a: b: c\n"])
def test_a_shipped_file_with_an_error_gets_the_python_loaders_line(text):
    with pytest.raises(SpecplanError) as slow:
        loader.parse_yaml(text, "f.yaml")
    with pytest.raises(SpecplanError) as fast:
        loader.parse_yaml(text, "f.yaml", shipped=True)
    assert str(fast.value) == str(slow.value)
