"""Task layer for Index, AR (+ per-position MQAR), c-gram retrieval and Counting.

Layers:
* exhaustive: ``enumerate_all`` equals an independent brute-force formulation of
  the valid instances (and their answers) for small n, and ``reference`` agrees on
  every valid instance and rejects every promise-violating one;
* generators: promise, structure and ``reference(tokens) == answer`` on every
  generated row, support and conditional uniformity, determinism, no global state;
* argument and malformed-instance errors;
* hypothesis strategies;
* MQAR: ``mqar_reference`` against a quadratic brute force and against the labels
  of Zoology's own generator (/work/shared/data/mqar_sample.npz).
"""
from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rnngap.checks.io.shared_data import shared_file
from rnngap.checks.tasks import ar, cgram, common, counting, hard, index
from rnngap.checks.tasks.common import TaskBatch
from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, QUERY, Vocab, number_token

from rnngap.checks.io.shared_data import shared_data_dir  # noqa: E402

SHARED_DATA = shared_data_dir()
MQAR_SAMPLE = shared_file("mqar_sample.npz") or SHARED_DATA / "mqar_sample.npz"

N0 = NUMBER_BASE  # id of the number 0


def tok(values):
    return [number_token(v) for v in values]


def prompt(x, suffix_values):
    return tuple([BOS] + tok(x) + [QUERY] + tok(suffix_values))


# ------------------------------------------------- brute-force formulations (independent)


def brute_index(n, a):
    """{tokens: answer} over all (x, i): the answer is x_i."""
    out = {}
    for x in itertools.product(range(a), repeat=n):
        for i in range(1, n + 1):
            out[prompt(x, [i])] = number_token(x[i - 1])
    return out


def brute_gram_successors(x, width):
    """{gram: successor of its first occurrence}: scan right to left, so the
    leftmost occurrence overwrites later ones. Only grams with a successor."""
    succ = {}
    for s in range(len(x) - width - 1, -1, -1):
        succ[tuple(x[s:s + width])] = x[s + width]
    return succ


def brute_gram(n, a, c):
    out = {}
    for x in itertools.product(range(a), repeat=n):
        for gram, nxt in brute_gram_successors(x, c - 1).items():
            out[prompt(x, gram)] = number_token(nxt)
    return out


def brute_counting(n, a):
    out = {}
    for x in itertools.product(range(a), repeat=n):
        counts = Counter(x)
        for q in range(a):
            for t in range(n + 1):
                out[prompt(x, [q, t])] = number_token(1 if counts[q] > t else 0)
    return out


def batch_as_dict(b: TaskBatch):
    d = {}
    for tokens, answer in b.rows():
        key = tuple(tokens)
        assert key not in d, f"duplicate instance {key}"
        d[key] = answer
    return d


def assert_sequences_lexicographic(b: TaskBatch, n: int):
    data = [tuple(r) for r in b.tokens[:, 1:n + 1].tolist()]
    assert data == sorted(data)


# --------------------------------------------------------------------- exhaustive


@pytest.mark.parametrize("n,a", [(n, a) for n in range(1, 6) for a in (1, 2, 3)])
def test_index_enumeration_matches_brute_force(n, a):
    b = index.enumerate_all(n, a)
    expected = brute_index(n, a)
    assert len(b) == a ** n * n
    assert batch_as_dict(b) == expected
    assert [tuple(r) for r in b.tokens.tolist()] == list(expected)  # documented order
    for tokens, answer in b.rows():
        assert index.reference(tokens) == answer
    x = [0] * n
    for bad_i in (0, n + 1):
        with pytest.raises(ValueError, match=f"position {n + 2}: query index {bad_i} outside 1..{n}"):
            index.reference(prompt(x, [bad_i]))


@pytest.mark.parametrize("n,a", [(n, a) for n in range(2, 7) for a in (1, 2, 3)])
def test_ar_enumeration_matches_brute_force(n, a):
    b = ar.enumerate_all(n, a)
    expected = brute_gram(n, a, 2)
    assert len(b) == a * a * (a ** (n - 1) - (a - 1) ** (n - 1))  # documented count
    assert batch_as_dict(b) == expected
    assert_sequences_lexicographic(b, n)
    for tokens, answer in b.rows():
        assert ar.reference(tokens) == answer
    # every (x, q) outside the valid set violates the promise and is rejected
    for x in itertools.product(range(a), repeat=n):
        for q in range(a):
            if prompt(x, [q]) not in expected:
                with pytest.raises(ValueError, match=rf"position {n + 2}: query {q} occurs"):
                    ar.reference(prompt(x, [q]))


@pytest.mark.parametrize("c,n,a", [(c, n, a) for c in range(2, 7) for n in range(c, c + 4) for a in (2, 3)
                                   if a ** (n + c - 1) <= 60_000])
def test_cgram_enumeration_matches_brute_force(c, n, a):
    b = cgram.enumerate_all(n, a, c=c)
    expected = brute_gram(n, a, c)
    assert batch_as_dict(b) == expected
    assert_sequences_lexicographic(b, n)
    assert b.params["c"] == c and b.length == n + c + 1
    for tokens, answer in b.rows():
        assert cgram.reference(tokens) == answer
        assert cgram.reference(tokens, c=c) == answer
    # promise violations, exhaustively over all grams of the right width
    for x in itertools.product(range(a), repeat=n):
        for gram in itertools.product(range(a), repeat=c - 1):
            if prompt(x, gram) not in expected:
                with pytest.raises(ValueError, match="promise"):
                    cgram.reference(prompt(x, gram))


def test_cgram_with_c2_is_ar():
    assert batch_as_dict(cgram.enumerate_all(5, 3, c=2)) == batch_as_dict(ar.enumerate_all(5, 3))
    g1 = cgram.generate(np.random.default_rng(7), 12, 50, 5, c=2)
    g2 = ar.generate(np.random.default_rng(7), 12, 50, 5)
    assert np.array_equal(g1.tokens, g2.tokens) and np.array_equal(g1.answers, g2.answers)
    for tokens, answer in g2.rows():
        assert cgram.reference(tokens) == ar.reference(tokens) == answer


@pytest.mark.parametrize("n,a", [(n, a) for n in range(1, 6) for a in (1, 2, 3)])
def test_counting_enumeration_matches_brute_force(n, a):
    b = counting.enumerate_all(n, a)
    expected = brute_counting(n, a)
    assert len(b) == a ** n * a * (n + 1)
    assert batch_as_dict(b) == expected
    assert [tuple(r) for r in b.tokens.tolist()] == list(expected)  # documented order
    for tokens, answer in b.rows():
        assert counting.reference(tokens) == answer
    assert np.array_equal(b.answers, np.where(b.params["count"] > b.params["threshold"], N0 + 1, N0))
    with pytest.raises(ValueError, match=f"threshold t = {n + 1} outside 0..{n}"):
        counting.reference(prompt([0] * n, [0, n + 1]))


def test_enumeration_limit():
    with pytest.raises(ValueError, match="enumeration limit"):
        index.enumerate_all(25, 2)
    with pytest.raises(ValueError, match="enumeration limit 100"):
        ar.enumerate_all(6, 2, limit=100)
    with pytest.raises(ValueError, match="enumeration limit"):
        cgram.enumerate_all(30, 3, c=4)
    with pytest.raises(ValueError, match="enumeration limit 10"):
        counting.enumerate_all(2, 2, limit=10)
    # the limit is inclusive: a^n * n == 24 instances
    assert len(index.enumerate_all(3, 2, limit=24)) == 24
    with pytest.raises(ValueError, match="enumeration limit 23"):
        index.enumerate_all(3, 2, limit=23)


# ---------------------------------------------------------------------- generators

# (module, n, batch, alphabet, extra kwargs)
GEN_CASES = [
    (index, 1, 40, 1, {}),
    (index, 7, 300, 2, {}),
    (index, 50, 100, 1000, {}),
    (ar, 2, 40, 1, {}),
    (ar, 2, 100, 5, {}),
    (ar, 9, 300, 3, {}),
    (ar, 300, 30, 8192, {}),
    (ar, 200, 30, 2, {}),
    (cgram, 2, 50, 3, {"c": 2}),
    (cgram, 3, 50, 2, {"c": 3}),
    (cgram, 12, 300, 2, {"c": 3}),
    (cgram, 20, 200, 2, {"c": 6}),
    (cgram, 6, 50, 1, {"c": 6}),
    (cgram, 80, 30, 8192, {"c": 6}),
    (cgram, 40, 30, 3, {"c": 9}),
    (counting, 1, 40, 1, {}),
    (counting, 10, 300, 3, {}),
    (counting, 10, 300, 3, {"threshold": "near"}),
    (counting, 60, 50, 500, {"threshold": "near"}),
]


def case_id(case):
    mod, n, batch, a, kw = case
    return f"{mod.TASK}-n{n}-a{a}" + "".join(f"-{k}{v}" for k, v in kw.items())


def gram_first_start(x, gram):
    for s in range(len(x) - len(gram) + 1):
        if list(x[s:s + len(gram)]) == list(gram):
            return s
    return None


@pytest.mark.parametrize("case", GEN_CASES, ids=case_id)
def test_generated_instances_are_valid(case):
    mod, n, batch, a, kw = case
    b = mod.generate(np.random.default_rng(12345), n, batch, a, **kw)
    L = b.params["length"]
    assert b.tokens.shape == (batch, L) and b.tokens.dtype == np.int64
    assert b.answers.shape == (batch,) and b.answers.dtype == np.int64
    assert b.params["n"] == n and b.params["alphabet"] == a
    vocab = Vocab(b.params["max_number"])
    assert np.all(b.tokens[:, 0] == BOS) and np.all(b.tokens[:, n + 1] == QUERY)
    data = b.tokens[:, 1:n + 1] - N0
    assert data.min() >= 0 and data.max() <= a - 1
    for k, (tokens, answer) in enumerate(b.rows()):
        vocab.validate(tokens)
        assert vocab.is_number(answer)
        assert mod.reference(tokens) == answer
        x = [t - N0 for t in tokens[1:n + 1]]
        suffix = [t - N0 for t in tokens[n + 2:]]
        if mod is index:
            i = suffix[0]
            assert b.params["query_index"][k] == i and 1 <= i <= n
            assert answer == number_token(x[i - 1])
        elif mod in (ar, cgram):
            width = b.params["c"] - 1
            assert len(suffix) == width
            s = gram_first_start(x, suffix)
            assert s is not None and s + width <= n - 1  # the promise
            assert b.params["first_position"][k] == s + 1
            assert answer == number_token(x[s + width])
            distinct = {tuple(x[j:j + width]) for j in range(n - width)}
            assert b.params["valid_starts"][k] == len(distinct)
        else:
            q, t = suffix
            assert 0 <= q < a and 0 <= t <= n
            assert b.params["count"][k] == x.count(q) and b.params["threshold"][k] == t
            if kw.get("threshold") == "near":
                assert t in ({x.count(q) - 1, x.count(q)} if x.count(q) else {0})


@pytest.mark.parametrize("mod,n,a,kw", [
    (index, 3, 2, {}),
    (ar, 4, 2, {}),
    (ar, 3, 3, {}),
    (cgram, 5, 2, {"c": 3}),
    (counting, 3, 2, {}),
], ids=lambda v: getattr(v, "TASK", str(v)))
def test_generator_support_is_every_valid_instance(mod, n, a, kw):
    """A large batch hits every valid instance and nothing else."""
    b = mod.generate(np.random.default_rng(2024), n, 20_000, a, **kw)
    assert set(batch_as_dict(mod.enumerate_all(n, a, **kw))) == {tuple(r) for r in b.tokens.tolist()}


@pytest.mark.parametrize("mod,n,a,kw", [(ar, 5, 2, {}), (ar, 4, 3, {}), (cgram, 6, 2, {"c": 3})],
                         ids=["ar-n5a2", "ar-n4a3", "cgram-n6a2c3"])
def test_retrieval_query_uniform_given_sequence(mod, n, a, kw):
    """Given x, the query is uniform over its valid (distinct) grams."""
    batch = 60_000
    b = mod.generate(np.random.default_rng(99), n, batch, a, **kw)
    width = b.params["c"] - 1
    by_x: dict[tuple, Counter] = {}
    for row in b.tokens.tolist():
        by_x.setdefault(tuple(row[1:n + 1]), Counter())[tuple(row[n + 2:])] += 1
    assert len(by_x) == a ** n
    for xs, counts in by_x.items():
        x = [t - N0 for t in xs]
        valid = {tuple(tok(x[s:s + width])) for s in range(n - width)}
        assert set(counts) == valid
        total = sum(counts.values())
        for c in counts.values():
            p = 1 / len(valid)
            sigma = (p * (1 - p) / total) ** 0.5
            assert abs(c / total - p) < 6 * sigma + 1e-12


def test_index_and_counting_marginals():
    rng = np.random.default_rng(5)
    b = index.generate(rng, 6, 30_000, 3)
    freq = np.bincount(b.params["query_index"], minlength=7)[1:] / len(b)
    assert np.all(np.abs(freq - 1 / 6) < 0.015)
    sym = np.bincount((b.tokens[:, 1:7] - N0).ravel(), minlength=3) / b.tokens[:, 1:7].size
    assert np.all(np.abs(sym - 1 / 3) < 0.01)
    c = counting.generate(rng, 8, 30_000, 3, threshold="uniform")
    tf = np.bincount(c.params["threshold"], minlength=9) / len(c)
    assert np.all(np.abs(tf - 1 / 9) < 0.015)
    near = counting.generate(rng, 8, 30_000, 3, threshold="near")
    occurs = near.params["count"] > 0
    ones = (near.answers[occurs] == number_token(1)).mean()
    assert abs(ones - 0.5) < 0.02
    assert np.all(near.answers[~occurs] == number_token(0))


ALL_GENERATORS = [(index, {}), (ar, {}), (cgram, {"c": 4}), (counting, {}), (counting, {"threshold": "near"})]


@pytest.mark.parametrize("mod,kw", ALL_GENERATORS, ids=lambda v: getattr(v, "TASK", str(v)))
def test_determinism_and_no_global_state(mod, kw):
    np_state = np.random.get_state()
    py_state = random.getstate()
    np.random.seed(1)
    random.seed(1)
    b1 = mod.generate(np.random.default_rng(42), 16, 64, 3, **kw)
    np.random.seed(2)
    random.seed(2)
    b2 = mod.generate(np.random.default_rng(42), 16, 64, 3, **kw)
    b3 = mod.generate(np.random.default_rng(43), 16, 64, 3, **kw)
    # the global generators are neither read nor advanced
    np.random.seed(2)
    random.seed(2)
    fresh_np, fresh_py = np.random.random(), random.random()
    np.random.seed(2)
    random.seed(2)
    mod.generate(np.random.default_rng(0), 16, 64, 3, **kw)
    assert (np.random.random(), random.random()) == (fresh_np, fresh_py)
    np.random.set_state(np_state)
    random.setstate(py_state)

    assert np.array_equal(b1.tokens, b2.tokens) and np.array_equal(b1.answers, b2.answers)
    for key, value in b1.params.items():
        assert np.array_equal(np.asarray(value), np.asarray(b2.params[key])), key
    assert not np.array_equal(b1.tokens, b3.tokens)
    with pytest.raises(ValueError):
        b1.tokens[0, 0] = 5  # batches are read-only


def test_generator_consumes_only_its_rng():
    """Two generators sharing one Generator: the stream advances, batches differ."""
    rng = np.random.default_rng(3)
    first = ar.generate(rng, 10, 20, 3)
    second = ar.generate(rng, 10, 20, 3)
    assert not np.array_equal(first.tokens, second.tokens)
    rng = np.random.default_rng(3)
    assert np.array_equal(ar.generate(rng, 10, 20, 3).tokens, first.tokens)


@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(1, 14), a=st.integers(1, 6),
       c=st.integers(2, 6), batch=st.integers(1, 20))
def test_generators_valid_for_random_parameters(seed, n, a, c, batch):
    rng = np.random.default_rng(seed)
    runs = [(index, n, {}), (counting, n, {}), (counting, n, {"threshold": "near"}),
            (ar, max(n, 2), {}), (cgram, max(n, c), {"c": c})]
    for mod, nn, kw in runs:
        b = mod.generate(rng, nn, batch, a, **kw)
        assert len(b) == batch
        for tokens, answer in b.rows():
            assert mod.reference(tokens) == answer


# ------------------------------------------------------------------ argument errors


@pytest.mark.parametrize("mod,kw", ALL_GENERATORS, ids=lambda v: getattr(v, "TASK", str(v)))
def test_generate_rejects_bad_arguments(mod, kw):
    rng = np.random.default_rng(0)
    for bad_rng in (None, 0, np.random.RandomState(0), random.Random(0)):
        with pytest.raises(TypeError, match="numpy.random.Generator"):
            mod.generate(bad_rng, 8, 4, 2, **kw)
    with pytest.raises(ValueError, match="n \\(length of x_1..x_n\\) must be >= "):
        mod.generate(rng, 0, 4, 2, **kw)
    with pytest.raises(TypeError, match="n .* must be an integer"):
        mod.generate(rng, 8.0, 4, 2, **kw)
    with pytest.raises(TypeError, match="must be an integer, got the bool"):
        mod.generate(rng, True, 4, 2, **kw)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        mod.generate(rng, 8, 0, 2, **kw)
    with pytest.raises(ValueError, match="alphabet .* must be >= 1, got 0"):
        mod.generate(rng, 8, 4, 0, **kw)
    with pytest.raises(ValueError, match="alphabet .* must be >= 1, got 0"):
        mod.enumerate_all(4, 0, **{k: v for k, v in kw.items() if k == "c"})
    with pytest.raises(ValueError, match="n_max must be >= 5, got 4"):
        mod.instances(5, 4)
    # numpy integers are accepted
    assert len(mod.generate(rng, np.int64(8), np.int32(3), np.int16(2), **kw)) == 3


def test_task_specific_argument_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"AR: n \(length of x_1..x_n\) must be >= 2, got 1"):
        ar.generate(rng, 1, 4)
    with pytest.raises(ValueError, match=r"c-gram \(c = 4\): n .* must be >= 4, got 3"):
        cgram.generate(rng, 3, 4, c=4)
    with pytest.raises(ValueError, match=r"c \(query is a \(c-1\)-gram\) must be >= 2, got 1"):
        cgram.generate(rng, 5, 4, c=1)
    with pytest.raises(ValueError, match=r"must be >= 2, got 1"):
        cgram.enumerate_all(3, 2, c=1)
    with pytest.raises(ValueError, match="threshold must be one of"):
        counting.generate(rng, 5, 4, threshold="median")
    with pytest.raises(ValueError, match="n_min must be >= 3, got 2"):
        cgram.instances(2, 6, c=3)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        index.enumerate_all(2, 2, limit=-1)


# -------------------------------------------------------------- malformed instances


@pytest.mark.parametrize("mod,tokens,match", [
    (index, [33, 32, 9, 33], r"Index: position 0: expected \[BOS\]"),
    (index, [], r"empty instance"),
    (index, [0, 33, 32, 33], r"no \[QUERY\]"),
    (index, [0, 33, 7, 9, 33], r"position 2: expected a data number or \[QUERY\], got - \(id 7\)"),
    (index, [0, 33, 9], r"exactly 1 token"),
    (index, [0, 33, 9, 33, 33], r"exactly 1 token"),
    (index, [0, 33, 9, 1], r"position 3: expected a number after \[QUERY\], got \[EOS\]"),
    (index, [0, 33, 9, 9], r"position 3: expected a number after \[QUERY\]"),
    (index, [0, 33, 15, 9, 33], r"position 2: .*id 15 \(not a vocabulary token\)"),
    (index, [0, 9, 32], r"position 2: query index 0 outside 1..0"),
    (ar, [0, 33, 32, 9, 32], r"AR: position 4: query 0 occurs only as x_n"),
    (ar, [0, 33, 32, 9, 34], r"AR: position 4: query 2 occurs nowhere"),
    (ar, [0, 33, 9, 33], r"occurs only as x_n"),
    (ar, [0, 33, 32, 9], r"exactly 1 token"),
    (ar, [0, 33, -3, 9, 33], r"position 2: .*id -3"),
    (cgram, [0, 33, 32, 9], r"nothing after \[QUERY\] at position 3"),
    (cgram, [0, 33, 32, 33, 9, 32, 33], r"positions 5..6: query gram \[0, 1\] occurs only as the last"),
    (cgram, [0, 33, 32, 33, 9, 33, 33], r"query gram \[1, 1\] occurs nowhere"),
    (cgram, [0, 33, 9, 33, 33], r"occurs nowhere"),
    (counting, [0, 33, 9, 33], r"exactly 2 token"),
    (counting, [0, 33, 9, 33, 34], r"position 4: threshold t = 2 outside 0..1"),
    (counting, [0, 33, 9, 5, 33], r"position 3: expected a number after \[QUERY\]"),
], ids=lambda v: getattr(v, "TASK", None) if hasattr(v, "TASK") else None)
def test_reference_rejects_malformed(mod, tokens, match):
    with pytest.raises(ValueError, match=match):
        mod.reference(tokens)


def test_reference_type_errors_and_inputs():
    with pytest.raises(TypeError, match="position 2: token must be an integer id, got float"):
        index.reference([0, 33, 32.0, 9, 33])
    with pytest.raises(TypeError, match="position 1: token must be an integer id"):
        ar.reference([0, True, 9, 33])
    with pytest.raises(ValueError, match="1-D token sequence"):
        counting.reference(np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="exactly 1 token"):
        cgram.reference([0, 32, 33, 32, 9, 32, 33], c=2)  # c given, gram has 2 tokens
    # numpy rows and tuples are fine; the answer is a Python int
    b = counting.generate(np.random.default_rng(0), 5, 3)
    for row, answer in zip(b.tokens, b.answers):
        got = counting.reference(row)
        assert type(got) is int and got == answer
        assert counting.reference(tuple(row.tolist())) == answer
    # a later occurrence ending at x_n does not matter; only the first counts
    assert ar.reference(prompt([1, 2, 0, 1], [1])) == number_token(2)
    assert cgram.reference(prompt([0, 1, 1, 0, 1], [0, 1])) == number_token(1)
    assert cgram.reference(prompt([0, 1, 1, 0, 1], [1, 0])) == number_token(1)
    # Counting: a query symbol that never occurs, and one beyond any alphabet
    assert counting.reference(prompt([1, 1], [0, 0])) == number_token(0)
    assert counting.reference(prompt([1, 1], [7, 0])) == number_token(0)
    assert counting.reference(prompt([1, 1], [1, 1])) == number_token(1)
    assert counting.reference(prompt([1, 1], [1, 2])) == number_token(0)


def test_taskbatch_validation():
    tokens = np.zeros((2, 4), dtype=np.int64)
    with pytest.raises(ValueError, match="2-D"):
        TaskBatch(np.zeros(4, dtype=np.int64), np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="1-D"):
        TaskBatch(tokens, np.zeros((2, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="2 token rows but 3 answers"):
        TaskBatch(tokens, np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="int64"):
        TaskBatch(tokens.astype(np.int32), np.zeros(2, dtype=np.int64))
    b = TaskBatch(tokens, np.array([5, 6], dtype=np.int64), {"task": "x"})
    assert len(b) == 2 and b.length == 4 and b.row(1) == ([0, 0, 0, 0], 6)
    assert list(b.rows()) == [([0, 0, 0, 0], 5), ([0, 0, 0, 0], 6)]


# -------------------------------------------------------------------- common helpers


def test_all_sequences_order():
    assert common.all_sequences(2, 3).tolist() == [list(p) for p in itertools.product(range(3), repeat=2)]
    assert common.all_sequences(3, 1).tolist() == [[0, 0, 0]]


@given(rows=st.lists(st.lists(st.integers(0, 3), min_size=7, max_size=7), min_size=1, max_size=6),
       width=st.integers(1, 6))
def test_first_occurrence_mask_matches_plain_python(rows, width):
    mask = common.retrievable_first_occurrences(np.array(rows), width)
    assert mask.shape == (len(rows), 7 - width)
    for r, row in enumerate(rows):
        assert np.flatnonzero(mask[r]).tolist() == common.first_occurrence_starts(row, width)


def test_sample_true_uniform_requires_a_true_entry():
    with pytest.raises(ValueError, match="no True entry"):
        common.sample_true_uniform(np.random.default_rng(0), np.array([[True, False], [False, False]]))


# ---------------------------------------------------------------- hypothesis strategies


def check_strategy_instance(mod, tokens, answer, n_min, n_max, alphabet):
    assert isinstance(tokens, list) and all(type(t) is int for t in tokens)
    q = tokens.index(QUERY)
    n = q - 1
    assert tokens[0] == BOS and n_min <= n <= n_max
    assert all(N0 <= t < N0 + alphabet for t in tokens[1:q])
    assert mod.reference(tokens) == answer


@given(index.instances(1, 9, alphabet=3))
def test_index_strategy(inst):
    check_strategy_instance(index, *inst, 1, 9, 3)


@given(ar.instances(2, 9, alphabet=3))
def test_ar_strategy(inst):
    check_strategy_instance(ar, *inst, 2, 9, 3)


@given(st.integers(2, 6).flatmap(lambda c: st.tuples(st.just(c), cgram.instances(None, c + 6, alphabet=2, c=c))))
def test_cgram_strategy(c_inst):
    c, (tokens, answer) = c_inst
    check_strategy_instance(cgram, tokens, answer, c, c + 6, 2)
    assert len(tokens) - tokens.index(QUERY) - 1 == c - 1
    assert cgram.reference(tokens, c=c) == answer


@given(counting.instances(1, 9, alphabet=4))
def test_counting_strategy(inst):
    check_strategy_instance(counting, *inst, 1, 9, 4)


# ---------------------------------------------------------------------------- MQAR


def mqar_brute(seq):
    """Quadratic: scan all earlier positions left to right for each t."""
    out = []
    for t in range(len(seq)):
        hits = [j for j in range(t) if seq[j] == seq[t]]
        out.append(seq[hits[0] + 1] if hits else -1)
    return out


@given(st.lists(st.integers(0, 5), max_size=40))
def test_mqar_reference_matches_brute_force(seq):
    assert ar.mqar_reference(seq) == mqar_brute(seq)


def test_mqar_reference_edge_cases():
    assert ar.mqar_reference([]) == []
    assert ar.mqar_reference([3, 3, 3]) == [-1, 3, 3]  # j + 1 == t: predicts the token itself
    assert ar.mqar_reference([5, 50, 6, 60, 6, 5, 7]) == [-1, -1, -1, -1, 60, 50, -1]
    assert ar.mqar_reference(np.array([1, 2, 1, 3, 1])) == [-1, -1, 2, -1, 2]  # first j, not latest
    with pytest.raises(ValueError, match="position 1: values must be >= 0, got -1"):
        ar.mqar_reference([2, -1])
    with pytest.raises(TypeError, match="position 0: expected an integer"):
        ar.mqar_reference([1.5])


def test_mqar_agrees_with_ar_reference():
    """At a position t whose token occurred before t, MQAR's answer is the AR answer of
    the prefix seq[:t] queried with seq[t] (when the first occurrence has a successor
    inside the prefix, i.e. j + 1 <= t - 1)."""
    rng = np.random.default_rng(11)
    checked = 0
    for seq in rng.integers(0, 4, size=(200, 12)).tolist():
        pred = ar.mqar_reference(seq)
        for t in range(len(seq)):
            j = gram_first_start(seq[:t], [seq[t]])
            if j is not None and j + 1 <= t - 1:
                assert number_token(pred[t]) == ar.reference(prompt(seq[:t], [seq[t]]))
                checked += 1
    assert checked > 500


def test_mqar_zoology_sample_labels():
    if not MQAR_SAMPLE.is_file():
        pytest.fail(
            f"shared MQAR sample missing: expected {MQAR_SAMPLE} (shared/ must sit beside the repo, "
            "as in CI); this test must not be skipped"
        )
    batches = ar.load_zoology_npz(MQAR_SAMPLE)
    assert batches, "no batches in the MQAR sample"
    total = 0
    for name, (inputs, labels) in batches.items():
        kv = int(re.search(r"kv(\d+)", name).group(1))
        for b, (seq, lab) in enumerate(zip(inputs.tolist(), labels.tolist())):
            pred = ar.mqar_reference(seq)
            scored = [t for t, y in enumerate(lab) if y != ar.ZOOLOGY_IGNORE]
            assert len(scored) == kv, (name, b)  # one query per key-value pair
            for t in scored:
                assert pred[t] == lab[t], (name, b, t, pred[t], lab[t])
                # layout: the key's first occurrence is a key slot of the kv prefix
                j = seq.index(seq[t])
                assert j < 2 * kv and j % 2 == 0 and t >= 2 * kv, (name, b, t)
            total += len(scored)
    assert total > 0


def test_load_zoology_npz_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        ar.load_zoology_npz(tmp_path / "missing.npz")
    a = np.zeros((2, 4), dtype=np.int64)
    np.savez(tmp_path / "unpaired.npz", X_inputs=a)
    with pytest.raises(ValueError, match=r"batch 'X' lacks \['X_labels'\]"):
        ar.load_zoology_npz(tmp_path / "unpaired.npz")
    np.savez(tmp_path / "shape.npz", X_inputs=a, X_labels=a[:, :3])
    with pytest.raises(ValueError, match="equal 2-D shapes"):
        ar.load_zoology_npz(tmp_path / "shape.npz")
    np.savez(tmp_path / "extra.npz", X_inputs=a, X_labels=a, meta=a)
    with pytest.raises(ValueError, match="unexpected key 'meta'"):
        ar.load_zoology_npz(tmp_path / "extra.npz")
    np.savez(tmp_path / "float.npz", X_inputs=a.astype(float), X_labels=a)
    with pytest.raises(ValueError, match="integer array"):
        ar.load_zoology_npz(tmp_path / "float.npz")
    np.savez(tmp_path / "ok.npz", B_inputs=a, B_labels=a - 100, A_inputs=a, A_labels=a)
    loaded = ar.load_zoology_npz(tmp_path / "ok.npz")
    assert list(loaded) == ["A", "B"] and np.array_equal(loaded["B"][1], a - 100)


# ============================================================================ the hard family (checks/tasks/hard.py)
HARD_CASES = [("index", 3, index.reference), ("ar", 2, ar.reference),
              ("cgram", 2, lambda t: cgram.reference(t, c=2)), ("cgram", 3, lambda t: cgram.reference(t, c=3)),
              ("cgram", 4, lambda t: cgram.reference(t, c=4)), ("counting", 3, counting.reference)]


def _independent_instance(task, c, x, i):
    """The reduction's instance written out from the table of lowerbounds/reductions.py
    (plain Python, not the code under test)."""
    m = len(x)
    if task == "index":
        return [BOS] + tok(x) + [QUERY] + tok([i])
    if task == "counting":
        return [BOS] + tok([j if b else 0 for j, b in enumerate(x, start=1)]) + [QUERY] + tok([i, 0])
    body = []
    for j, b in enumerate(x, start=1):
        body += tok([j + 1] * (c - 1) + [b])
    return [BOS] + body + [QUERY] + tok([i + 1] * (c - 1))


@pytest.mark.parametrize("task,c,ref", HARD_CASES)
@pytest.mark.parametrize("m", [1, 2, 4])
def test_hard_family_exhaustive_is_the_reduction_image(task, c, ref, m):
    """Every x and i, in order (x lexicographic, i fastest), equal to the reduction
    table; the answers are x_i and agree with the task's plain-Python reference;
    the data length and alphabet are the ones the module states."""
    toks, ans = hard.reduction_instances(task, m, c)
    assert toks.dtype == np.int64 and ans.dtype == np.int64 and toks.shape[0] == m * 2 ** m
    k = 0
    a = hard.alphabet(task, m, c)
    top = 0
    for x in itertools.product((0, 1), repeat=m):
        for i in range(1, m + 1):
            row = toks[k].tolist()
            assert row == _independent_instance(task, c, x, i)
            assert int(ans[k]) == number_token(x[i - 1]) == ref(row)
            data = row[1:row.index(QUERY)]
            assert len(data) == hard.data_length(task, m, c)
            assert max(data) - NUMBER_BASE < a
            top = max(top, max(data) - NUMBER_BASE)
            k += 1
    # the alphabet is used: its largest symbol occurs in the data of some instance
    assert top == a - 1


@pytest.mark.parametrize("task,c,ref", HARD_CASES)
def test_hard_family_sampled_rows_are_adversarial_and_valid(task, c, ref):
    """Row 0 queries i = m with x = 1^m except x_m = 0, row 1 i = m with x = 1^m;
    half the other rows query among the top 4; every row is in the image (its x
    and i recovered from the tokens rebuild it) and its answer is the reference's;
    the same seed gives the same rows."""
    m = 40
    rng = np.random.default_rng(11)
    toks, ans = hard.sampled_reduction_instances(rng, task, m, 20, c)
    again, _ = hard.sampled_reduction_instances(np.random.default_rng(11), task, m, 20, c)
    assert (toks == again).all() and toks.shape[0] == 20
    queries = []
    for k, row in enumerate(toks.tolist()):
        q = row.index(QUERY)
        data = [t - NUMBER_BASE for t in row[1:q]]
        if task in ("index",):
            x, i = data, row[q + 1] - NUMBER_BASE
        elif task == "counting":
            x, i = [int(v > 0) for v in data], row[q + 1] - NUMBER_BASE
        else:
            x, i = data[c - 1::c], row[q + 1] - NUMBER_BASE - 1
        assert row == _independent_instance(task, c, x, i)
        assert int(ans[k]) == ref(row) == number_token(x[i - 1])
        queries.append(i)
        if k == 0:
            assert i == m and x == [1] * (m - 1) + [0]
        if k == 1:
            assert i == m and x == [1] * m
    assert all(q > m - 4 for q in queries[::2])


def test_hard_family_istree_and_index_bits():
    toks, ans = hard.reduction_instances("istree", 3)
    assert set(ans.tolist()) == {2, 3}                      # [TRUE], [FALSE]
    assert hard.index_bits("ar", 2 ** 10) == 2 ** 9 and hard.index_bits("cgram", 2 ** 10, 3) == 341
    assert hard.data_length("cgram", 341, 3) <= 2 ** 10 < hard.data_length("cgram", 342, 3)
    with pytest.raises(ValueError):
        hard.reduction_instances("ar", hard.EXHAUSTIVE_MAX_BITS + 1)
    with pytest.raises(ValueError, match="unknown task"):
        hard.alphabet("sorting", 3)


@pytest.mark.parametrize("dtype", (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64))
def test_token_list_fast_paths_equal_the_checked_loop(dtype):
    """token_list's shortcuts (integer arrays, lists of exact ints) return what the
    per-token loop returns; anything else still goes through the loop and its errors."""
    from rnngap.checks.tasks.common import token_list
    vals = [0, 1, 7, 33, 100]
    arr = np.array(vals, dtype=dtype)
    assert token_list(arr, "T") == vals and all(type(t) is int for t in token_list(arr, "T"))
    assert token_list(list(vals), "T") == vals
    assert token_list([np.int64(v) for v in vals], "T") == vals                 # the loop
    for bad in ([1, True], [1, 2.0], np.array([True, False]), np.array([1.0, 2.0])):
        with pytest.raises(TypeError, match="position"):
            token_list(bad, "T")
    with pytest.raises(ValueError, match="1-D"):
        token_list(np.zeros((2, 2), dtype=dtype), "T")
