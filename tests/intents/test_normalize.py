import pytest

from intents.core import normalize_intent


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("answer—retention questions", "answer retention questions"),
        ("  Reset_Password!! ", "reset password"),
        ("ＲＥＳＥＴ　password", "reset password"),
        ("Straße", "strasse"),
        ("Café-Login", "café login"),
        ("___", ""),
    ],
)
def test_it_matches_the_spec_examples(label, key):
    assert normalize_intent(label) == key
