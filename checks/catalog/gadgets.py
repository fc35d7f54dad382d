"""The gadget demos' records: one mechanism each, with its declared precision and no certificate.

Each demo (constructions/models/demos.py) isolates one gadget of the
constructions. Its gadget is certified inside every construction that uses it,
so a demo's record says why it has no certificate of its own.
"""
from __future__ import annotations

from rnngap.constructions.models import demos

from .examples import count_example, index_example, prev_example
from .schema import ConstructionRecord, Form, Key, int_frac_resources

UNCERTIFIED = ("a gadget demo: its gadget is certified inside every construction that uses it, and "
               "`rnngap verify --only gadgets` checks it at its declared bits and one bit below")

RECORDS = (
    ConstructionRecord(Key("gadgets", "position-match", "transformer"), demos.position_match_transformer,
                       index_example, "match head on positions (Index mechanism)",
                       (Form("position-match",
                             resources=lambda: int_frac_resources("position-match", demos.POSITION_MATCH)),),
                       uncertified=UNCERTIFIED),
    ConstructionRecord(Key("gadgets", "previous-token", "transformer"), demos.previous_token_transformer,
                       prev_example, "shift head: predicts the token before the last",
                       (Form("previous-token",
                             resources=lambda: int_frac_resources("previous-token", demos.PREVIOUS_TOKEN)),),
                       uncertified=UNCERTIFIED),
    ConstructionRecord(Key("gadgets", "count-threshold", "transformer"), demos.count_threshold_transformer,
                       count_example, "BOS counting head + comparison MLP",
                       (Form("count-threshold",
                             resources=lambda: int_frac_resources("count-threshold", demos.COUNT_THRESHOLD)),),
                       uncertified=UNCERTIFIED),
)
"""The three gadget demos."""
