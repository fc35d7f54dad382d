"""Installing rnngap adds exactly one top-level import name, ``rnngap`` (issue 16):
the source folders constructions/, lowerbounds/, checks/ install as
rnngap.constructions, rnngap.lowerbounds, rnngap.checks."""
import importlib.metadata as md
import json
import subprocess
import sys


def _dist():
    """The installed distribution (a .dist-info with a RECORD), not a build's
    rnngap.egg-info that a source checkout on sys.path may hold."""
    found = [d for d in md.distributions(name="rnngap") if d.read_text("RECORD") is not None]
    assert found, "rnngap is not installed (pip install '.[dev]')"
    return found[0]


def test_installed_top_level_names_are_only_rnngap():
    dist = _dist()
    direct = dist.read_text("direct_url.json")
    editable = bool(direct) and json.loads(direct).get("dir_info", {}).get("editable", False)
    tops = set()
    for f in dist.files or []:
        part = f.parts[0]
        if part.endswith((".dist-info", ".pth")) or part in ("..", "__pycache__") or part.startswith("__editable__"):
            continue
        tops.add(part.removesuffix(".py"))
    if editable:       # an editable install maps rnngap.* onto the source folders: nothing else is installed
        assert tops <= {"rnngap"}, tops
    else:
        assert tops == {"rnngap"}, tops


def test_generic_names_are_not_importable_outside_the_checkout(tmp_path):
    """From a directory other than the checkout (so the source folders are not on
    sys.path), only rnngap imports."""
    code = ("import importlib.util as u; import rnngap.constructions, rnngap.checks.cli.main, rnngap.lowerbounds.cc; "
            "print([n for n in ('constructions', 'checks', 'lowerbounds') if u.find_spec(n) is not None])")
    r = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_console_script_points_into_the_namespace():
    eps = [e for e in _dist().entry_points if e.group == "console_scripts" and e.name == "rnngap"]
    assert len(eps) == 1 and eps[0].value == "rnngap.checks.cli.main:main"
