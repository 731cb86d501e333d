"""One name per layer: the identifier and its file-system-safe form."""

import re

import pytest

from neuroflow.names import FILE_SEPARATOR, LAYER_NAME, SEPARATOR, file_form, layer_id
from neuroflow.workflow.sweeps import sweep_model_name


@pytest.mark.parametrize(
    ("owner", "layer", "expected", "form"),
    [
        ("efficientnet", "blocks.7", "efficientnet:blocks.7", "efficientnet__blocks.7"),
        ("efficientnet", "avg-pooling", "efficientnet:avg-pooling", "efficientnet__avg-pooling"),
        ("clip_vision", "depth-0.5", "clip_vision:depth-0.5", "clip_vision__depth-0.5"),
        ("m2", "layer-minus1", "m2:layer-minus1", "m2__layer-minus1"),
    ],
)
def test_identifier_and_its_file_form_keep_the_layer_name(owner, layer, expected, form):
    assert layer_id(owner, layer) == expected
    assert file_form(expected) == form == sweep_model_name(owner, layer)
    # the store name appears verbatim in both forms, after the last separator
    assert expected.rsplit(SEPARATOR, 1) == [owner, layer]
    assert form.rsplit(FILE_SEPARATOR, 1) == [owner, layer]
    assert re.fullmatch(r"[A-Za-z0-9_.+\-]+", form)


def test_file_form_of_plain_and_joined_names():
    assert file_form("visual") == "visual"
    assert file_form("image_statistics:output+minilm:embedding") == (
        "image_statistics__output+minilm__embedding"
    )
    assert file_form("a b/c") == "a-b-c"
    assert file_form("") == "x"


def test_distinct_layers_keep_distinct_file_forms():
    """Underscores never appear in a store name, so the last ``__`` splits the form."""
    pairs = [("a", "b.1"), ("a_", "b.1"), ("a", "b-1"), ("a__b", "c"), ("a", "b.1.1")]
    forms = [file_form(layer_id(o, la)) for o, la in pairs]
    assert len(set(forms)) == len(forms)


def test_bad_parts_are_refused():
    with pytest.raises(ValueError, match=r"`layer` must be a store name .* got 'blocks_7'"):
        layer_id("efficientnet", "blocks_7")
    with pytest.raises(ValueError, match=r"`layer` must be a store name .* got '_blocks\.7'"):
        layer_id("efficientnet", "_blocks.7")
    with pytest.raises(ValueError, match="`owner` must be a non-empty name without ':'"):
        layer_id("a:b", "c")
    with pytest.raises(ValueError, match="`owner` must be a non-empty name"):
        layer_id("", "c")
    assert LAYER_NAME.match("blocks.10") and not LAYER_NAME.match("blocks_10")
