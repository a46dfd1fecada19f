"""What a local model reads of an answer's JSON Schema: its shape (fields,
types, choices, ranges, descriptions), not the schema's own vocabulary.  The
grammar holds the answer to the schema; the ~100 tokens of `"type": "object"`,
`"additionalProperties"` and `required` lists cost the demo's grader ~2 s on
two cores (issue 47)."""

from __future__ import annotations

from flowforge.blocks.evaluator import Metric, metrics_schema
from flowforge.providers._local_prompt import chat_messages, schema_sketch
from flowforge.providers.base import LLMRequest, Message


def test_the_prompt_shows_the_answer_s_shape_not_the_schema():
    schema = {"type": "object", "additionalProperties": False, "required": ["route", "why"],
              "properties": {"route": {"enum": ["billing", "technical"]},
                             "why": {"type": "string", "description": "one sentence"},
                             "score": {"type": "number", "minimum": 0, "maximum": 10},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "done": {"type": ["boolean", "null"]}}}
    request = LLMRequest(model="x", messages=[Message("system", "Route it."),
                                              Message("user", "The app crashes")],
                         response_format=schema)
    system = chat_messages(request)[0]["content"]
    assert system == ('Route it.\n\nAnswer with JSON of this form: {"route": "billing" | '
                      '"technical", "why": string /* one sentence */, "score": number from 0 '
                      'to 10, "tags": [string, ...], "done": boolean | null}')
    assert "additionalProperties" not in system and "required" not in system


def test_references_are_followed_and_a_recursive_one_is_named():
    schema = {"type": "object", "properties": {"step": {"$ref": "#/$defs/Step"}},
              "$defs": {"Step": {"type": "object", "properties": {
                  "name": {"type": "string"}, "then": {"$ref": "#/$defs/Step"},
                  "lost": {"$ref": "#/$defs/Missing"}}}}}
    assert schema_sketch(schema) == '{"step": {"name": string, "then": Step, "lost": value}}'
    assert schema_sketch({"type": "integer", "minimum": 1}) == "integer of at least 1"
    assert schema_sketch({"type": "number", "maximum": "ten"}) == "number"   # not a number
    assert schema_sketch(True) == "value"


def test_the_evaluator_s_metrics_are_described_once_to_a_guided_model():
    """Its system prompt lists every metric with its description; the schema a
    guided (embedded) model is shown leaves them out, a hosted model's keeps them."""
    metrics = [Metric(name="Accuracy", description="Agrees with the policy", range=[0, 10])]
    hosted = metrics_schema(metrics)
    guided = metrics_schema(metrics, described=False)
    assert hosted["properties"]["accuracy"]["description"].startswith("Agrees with the policy")
    assert guided["properties"]["accuracy"] == {"type": "number", "minimum": 0, "maximum": 10}
    assert schema_sketch(guided) == '{"accuracy": number from 0 to 10}'
