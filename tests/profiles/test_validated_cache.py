"""The shipped profiles kept already validated (profiles/validated_cache.py, issue 43): a kept profile is the
validated one, a user's file is always validated, a bad or foreign entry is validated again, and the cache can be
turned off."""

from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.profiles import registry, validated_cache
from specplan.profiles.model import LayerGroup, layer_group


def _shipped_files():
    """(kind, class, path) of every shipped hardware, model, engine and kernel-family file that the cache keeps."""
    out = []
    for kind, folder in (("hardware", registry.hardware_dir()), ("model", registry.model_dir()),
                         ("engine", registry.engine_dir()), ("kernel family", registry.engine_dir() / "kernels")):
        for p in sorted(folder.glob("*.yaml")):
            if not (kind == "engine" and registry._extends(p)):
                out.append((kind, registry._CLASSES[kind], p))
    return out


def test_every_kept_shipped_profile_is_the_validated_one(tmp_path, monkeypatch):
    """Each shipped file read back from the cache (a fresh process's path: unpickled, not re-validated) equals the
    profile validated from its YAML (the first read, which validated it and wrote one entry per file), field by field
    and in its set fields."""
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path))
    files = _shipped_files()
    assert len(files) >= 40  # the shipped hardware, model, engine and kernel profiles (a hand count is about 90)
    for kind, cls, path in files:
        fresh = validated_cache.load_or_validate(kind, path, cls, lambda: registry._validated(kind, str(path)))
        kept = validated_cache.load_or_validate(kind, path, cls, lambda: pytest.fail(f"{path}: validated again"))
        assert type(fresh) is cls and type(kept) is cls and kept is not fresh and kept == fresh, path
        assert kept.model_dump() == fresh.model_dump() and kept.model_fields_set == fresh.model_fields_set, path
    assert len(list(tmp_path.glob("*.pickle"))) == len(files)


def test_an_edit_of_the_file_is_a_miss(tmp_path, monkeypatch):
    """The key is the file's bytes: the same profile with one number changed is validated anew, not the kept one."""
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path / "cache"))
    src = registry.hardware_dir() / "h100-sxm.yaml"
    text = src.read_text()
    assert "kernel_overhead_s:" in text
    a = validated_cache.load_or_validate("hardware", src, registry.HardwareProfile,
                                         lambda: registry._validated("hardware", str(src)))
    copy = tmp_path / "h100-sxm.yaml"
    lines = [ln if not ln.startswith("kernel_overhead_s:") else "kernel_overhead_s: 9.0e-6" for ln in text.splitlines()]
    copy.write_text("\n".join(lines) + "\n")
    b = validated_cache.load_or_validate("hardware", copy, registry.HardwareProfile,
                                         lambda: registry._validated("hardware", str(copy)))
    assert a.kernel_overhead_s != 9.0e-6 and b.kernel_overhead_s == 9.0e-6
    assert len(list((tmp_path / "cache").glob("*.pickle"))) == 2


def test_a_bad_or_foreign_entry_is_validated_again(tmp_path, monkeypatch):
    """A truncated entry, or one holding another class, is ignored: the file is validated and the entry rewritten."""
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path))
    src = registry.model_dir() / "llama-3.1-8b.yaml"
    key = validated_cache.entry_key("model", src.read_bytes())
    entry = tmp_path / f"model-{key}.pickle"
    calls = []

    def validate():
        calls.append(1)
        return registry._validated("model", str(src))

    entry.write_bytes(b"\x80\x05truncated")
    assert validated_cache.load_or_validate("model", src, registry.ModelProfile, validate).id == "llama-3.1-8b"
    import pickle

    entry.write_bytes(pickle.dumps(registry._validated("hardware", str(registry.hardware_dir() / "h100-sxm.yaml"))))
    assert validated_cache.load_or_validate("model", src, registry.ModelProfile, validate).id == "llama-3.1-8b"
    assert len(calls) == 2
    assert validated_cache.load_or_validate("model", src, registry.ModelProfile, validate).id == "llama-3.1-8b"
    assert len(calls) == 2  # the rewritten entry is used


def test_off_and_unwritable_folders_validate(tmp_path, monkeypatch):
    """SPECPLAN_CACHE_DIR=off keeps nothing; a folder under a file cannot be made and is no error."""
    src = registry.hardware_dir() / "a100-sxm-80gb.yaml"
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", "off")
    assert validated_cache.cache_dir() is None
    assert validated_cache.load_or_validate("hardware", src, registry.HardwareProfile,
                                            lambda: registry._validated("hardware", str(src))).id == "a100-sxm-80gb"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(blocker / "cache"))
    assert validated_cache.load_or_validate("hardware", src, registry.HardwareProfile,
                                            lambda: registry._validated("hardware", str(src))).id == "a100-sxm-80gb"
    assert blocker.read_text() == "x"


def test_a_user_file_is_always_validated(tmp_path, monkeypatch):
    """A user's profile (not shipped) never goes through the cache: its bad field is the same one-line error on
    every load, and nothing is kept for it."""
    monkeypatch.setenv("SPECPLAN_CACHE_DIR", str(tmp_path / "cache"))
    text = (registry.hardware_dir() / "h100-sxm.yaml").read_text()
    bad = tmp_path / "mine.yaml"
    bad.write_text(text.replace("id: h100-sxm", "id: mine", 1).replace("scaleup_domain: 8", "scaleup_domain: 0", 1))
    assert "scaleup_domain: 0" in bad.read_text() and not registry.shipped(bad)
    for _ in range(2):
        with pytest.raises(SpecplanError, match=r"mine\.yaml: scaleup_domain: .*greater than or equal to 1"):
            registry.load_hardware(str(bad))
        registry._load_cached.cache_clear()
    assert not (tmp_path / "cache").exists()


def test_layer_group_is_layer_group():
    """layer_group(...) is LayerGroup(...) (same fields, same set fields); what LayerGroup refuses it refuses."""
    for args in (("full", "dense", 32), ("full", "moe", 58), ("sliding", "none", 1)):
        a, b = layer_group(*args), LayerGroup(mixer=args[0], ffn=args[1], count=args[2])
        assert a == b and a.model_fields_set == b.model_fields_set == {"mixer", "ffn", "count"}
    for args in (("full", "dense", 0), ("full", "dense", -3), ("nosuch", "dense", 2), ("full", "dense", 2.0)):
        with pytest.raises(Exception) as err:
            LayerGroup(mixer=args[0], ffn=args[1], count=args[2])
        with pytest.raises(type(err.value)):
            layer_group(*args)


def test_hardware_defaults_equal_validated_defaults():
    """The class defaults built without validation equal the validated defaults (AttentionEfficiency() ...)."""
    from specplan.profiles.hardware import (AllReduceParams, AllToAllParams, AttentionEfficiency, HardwareProfile,
                                            MoEGroupedEfficiency)

    for name, cls in (("attention", AttentionEfficiency), ("allreduce", AllReduceParams),
                      ("alltoall", AllToAllParams), ("moe", MoEGroupedEfficiency)):
        d = HardwareProfile.model_fields[name].default
        assert d == cls() and d.model_fields_set == set() and d.model_dump() == cls().model_dump()
    assert Path(validated_cache.__file__).name in {Path(f).name for f in validated_cache.CODE_FILES}
