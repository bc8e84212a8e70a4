"""A partition key is measured as Kinesis measures it: in UTF-16 code units (Java's ``String.length()``), so a
character beyond U+FFFF counts 2; 1 to 256 are taken. Characters of two and three UTF-8 bytes count 1."""

from __future__ import annotations

import pytest

from kinesis_spout.kinesis.writing.limits import MAX_PARTITION_KEY_LENGTH, key_length, partition_key_problem

EMOJI = "\U0001F600"


@pytest.mark.parametrize(("key", "length"), [
    ("k", 1), ("é", 1), ("☃", 1), ("ключ", 4), (EMOJI, 2), ("a" + EMOJI + "b", 4), ("𠀀", 2), (EMOJI * 200, 400),
    ("\ud800", 1),  # a lone surrogate is one unit (and not a valid key: see below)
])
def test_a_key_s_length_is_its_utf16_code_units(key: str, length: int) -> None:
    assert key_length(key) == length


@pytest.mark.parametrize("key", ["k", "k" * 256, "é" * 256, "☃" * 256, EMOJI * 128, "k" + EMOJI * 127 + "k"])
def test_keys_of_1_to_256_units_are_taken(key: str) -> None:
    assert key_length(key) <= MAX_PARTITION_KEY_LENGTH and partition_key_problem(key) is None


@pytest.mark.parametrize(("key", "problem"), [
    (None, "null or empty"), ("", "null or empty"), (7, "null or empty"),
    ("k" * 257, "has 257 UTF-16 code units (Kinesis takes at most 256"),
    (EMOJI * 129, "has 258 UTF-16 code units (Kinesis takes at most 256, counted as Java counts"),
    (EMOJI * 200, "has 400 UTF-16 code units"),
    ("k" * 255 + EMOJI, "has 257 UTF-16 code units"),
    ("a\ud800", "lone surrogate"),
])
def test_keys_kinesis_refuses_are_named_with_the_limit(key: object, problem: str) -> None:
    found = partition_key_problem(key)
    assert found is not None and problem in found
