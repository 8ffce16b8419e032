"""Step-3.7-Flash (Step3p7ForConditionalGeneration, model_type step3p7 around a step3p5 text_config) -> llama.cpp
`step35`, read as its text decoder: the converter registers the image-text architecture with its Step35Model
(conversion/step3.py), routes on the top-level architecture rather than text_config's (base.py
get_model_architecture) and merges text_config over the top level, so the text model is Step-3.5's
(hfview/families/step3p5.py) under the same names (model.layers.*, model.embed_tokens, model.norm, lm_head).

The vision tower (vision_model.*) and its projector (vit_large_projector.*) are left out as the converter's text
conversion leaves them out (its --mmproj file writes them). The release's three MTP layers (num_nextn_predict_layers
3) and its llama3 rope scaling of the full attention layers (yarn_only_types) are written as Step-3.5's are, and
what Step-3.5 refuses is refused here too.
"""
from __future__ import annotations

from dataclasses import replace

from ..config import ANY
from ..family import Skip
from .step3p5 import FAMILY as STEP3P5

# the wrapper's own keys: the vision tower and its projector, and the image placeholder token, which a text-only
# forward never touches
_WRAPPER_HARMLESS = {"vision_config": ANY, "image_token_id": ANY, "projector_bias": ANY,
                     "understand_projector_stride": ANY}

FAMILY = replace(
    STEP3P5,
    name="step3p7",
    architectures=("Step3p7ForConditionalGeneration",),
    harmless={**STEP3P5.harmless, **_WRAPPER_HARMLESS},
    tensors=(*STEP3P5.tensors, Skip("vision_model.{rest}"), Skip("vit_large_projector.{rest}")),
    notes={**STEP3P5.notes, "image-text": "Step3p7ForConditionalGeneration is presented as its text model; the vision "
                                          "tower and projector (the converter's --mmproj file) are not presented"},
)
