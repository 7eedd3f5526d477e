"""Any text and any int64 survive the store's Arrow column builder (property test; the
examples are in test_store_arrow_columns.py, which the dependency sets also run)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_rl_plugin.store.arrow_columns import column

_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]))  # no lone surrogates


@given(st.lists(st.one_of(st.none(), _TEXT)), st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))))
@settings(max_examples=200, deadline=None)
def test_any_text_and_int64_round_trip(texts, ints):
    assert column(texts, pa.string()).to_pylist() == texts
    assert column(ints, pa.int64()).to_pylist() == ints
