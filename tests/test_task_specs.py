"""One spec per task (checks/tasks): every spec's reference agrees with its own
generator and enumerator, every alias resolves, the reduction's alphabet is what
the reduction writes, no check module keeps its own task -> reference map, and
verify records carry canonical task names and the schema version."""
import ast
import json
from pathlib import Path

import numpy as np
import pytest

from rnngap.checks.verify import registry
from rnngap.checks.verify.registry import SCHEMA_VERSION, Record
from rnngap.checks.tasks import NO_TASK, TASKS, is_task_name, names_having, task, task_having
from rnngap.checks.tasks import istree as task_istree

CHECKS = Path(__file__).resolve().parents[1] / "checks"
BATCH_TASKS = [n for n in TASKS if TASKS[n].generate is not None and n != "istree"]


@pytest.mark.parametrize("name", BATCH_TASKS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_agrees_with_the_generator(name, seed):
    spec = TASKS[name]
    for n in (spec.min_n, spec.min_n + 3, 12):
        b = spec.generate(np.random.default_rng([seed, n]), n, 40, alphabet=3)
        ref = spec.reference_at()
        assert [ref(toks) for toks, _ in b.rows()] == [a for _, a in b.rows()], (name, n)


@pytest.mark.parametrize("name", BATCH_TASKS)
def test_reference_agrees_with_the_enumeration(name):
    spec = TASKS[name]
    b = spec.enumerate_all(spec.min_n + 1, alphabet=2)
    assert len(b) > 0
    assert all(spec.reference(toks) == a for toks, a in b.rows())


@pytest.mark.parametrize("seed", [0, 1])
def test_istree_reference_agrees_with_the_generator(seed):
    spec = task("istree")
    for n in (3, 6, 9):
        for inst in spec.generate(np.random.default_rng([seed, n]), n, 20):
            assert spec.reference_at(n_nodes=inst.n_nodes)(inst.tokens.tolist()) == inst.answer


@pytest.mark.parametrize("name", names_having("reduction"))
def test_reduction_alphabet_and_reference_on_the_reduction_image(name):
    spec = TASKS[name]
    red = spec.reduction
    assert red.name == spec.name
    for n in (1, 3, 5):
        ref = spec.reduction_reference(n)
        pairs = [(x, i) for x in ([0] * n, [1] * n, [k % 2 for k in range(n)]) for i in range(1, n + 1)]
        for x, i in pairs:
            toks = red.instance(tuple(x), i)
            assert ref(toks.tolist()) == red.expected(tuple(x), i)
        if spec.reduction_nodes is None:     # numbers among the data (Index's query position excepted)
            toks = np.array([red.instance(tuple(x), i) for x, i in pairs])
            nums = toks[:, :-1] if name == "index" else toks
            nums = nums[nums >= 32] - 32
            assert int(nums.max()) + 1 <= spec.reduction_alphabet(n)


def test_every_alias_resolves_and_unknown_names_are_refused():
    for s in TASKS.values():
        assert task(s.name) is s and s.key() == s.name and is_task_name(s.name)
        for a in s.aliases:
            assert task(a) is s and task(a.upper()) is s
            assert not is_task_name(a)
    assert task("cgram").name == "cgram(c=3)" and task("cgram(c=5)").c == 5
    assert is_task_name(NO_TASK) and not is_task_name("index (exhaustive)")
    with pytest.raises(ValueError, match="unknown task 'nope'.*known: index, ar"):
        task("nope")
    assert task_having("predict", "ar").name == "mqar"
    assert task_having("predict", "istree") is task_istree.SPEC


def test_records_refuse_free_text_as_task():
    with pytest.raises(ValueError, match="canonical task name"):
        Record("machine", "m", "some free text", 1, 1, 0)
    r = Record("machine", "m", NO_TASK, 1, 1, 0, description="some free text")
    js = r.as_json(seed=0, profile="quick")
    assert js["task"] == NO_TASK and js["description"] == "some free text"
    assert js["schema_version"] == SCHEMA_VERSION == 4


def _dict_values(node: ast.Dict) -> list[str]:
    return [ast.unparse(v) for v in node.values if v is not None]


def test_no_check_module_keeps_a_task_reference_map():
    """A dict whose values are task references (``x.reference``, ``partial(x.reference,
    ...)``) or task modules, or a function returning one, lives only in checks/tasks."""
    bad = []
    for path in sorted(CHECKS.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and len(node.values) >= 2:
                vals = _dict_values(node)
                refs = [v for v in vals if ".reference" in v or v.endswith("_reference")]
                if len(refs) >= 2:
                    bad.append(f"{path.name}:{node.lineno}: {refs[:3]}")
                mods = [v for v in vals if v in {"index", "ar", "cgram", "counting", "istree"}]
                if len(mods) >= 2:
                    bad.append(f"{path.name}:{node.lineno}: task modules {mods}")
    assert not bad, "task maps outside checks/tasks:\n" + "\n".join(bad)


def test_verify_records_carry_canonical_task_names(tmp_path):
    recs = registry.run("quick", only=["T4.6-low", "machine"], seed=0)
    assert recs and all(is_task_name(r.task) for r in recs)
    assert {r.task for r in recs} >= {"index", "ar", "cgram(c=3)", "counting", NO_TASK}
    assert all(r.description for r in recs)
    rows = json.loads(json.dumps([r.as_json(seed=0, profile="quick") for r in recs]))
    assert all(row["schema_version"] == SCHEMA_VERSION and "description" in row for row in rows)
