"""The research orchestrator's shipped workflows and, in `session`, what a
session takes, gives and tells its watchers; `flowforge.service.research`
runs them.

    question.yaml      phase 1: improve the question until the evaluator is confident
    knowledge.yaml     phase 2: search, extract and grow a knowledge base until complete
    answer.yaml        phase 3: plan, draft, evaluate and refine the answer
    orchestrator.yaml  the three phases as nested workflows, with progress events

Each phase is a `loop` over LLM blocks that stops at a score threshold or an
iteration cap (both inputs); every pass's scores are in the phase's result.
"""

from pathlib import Path

__all__ = ["RESEARCH_DIR", "ORCHESTRATOR_WORKFLOW", "PHASE_WORKFLOWS", "PHASES"]

RESEARCH_DIR = Path(__file__).parent
#: The phases in order: (block id in the orchestrator, workflow file, score field).
PHASES = (("question", "question.yaml", "question_improvement_confidence"),
          ("knowledge", "knowledge.yaml", "kb_completeness_score"),
          ("answer", "answer.yaml", "answer_confidence"))
PHASE_WORKFLOWS = tuple(RESEARCH_DIR / file for _, file, _ in PHASES)
ORCHESTRATOR_WORKFLOW = RESEARCH_DIR / "orchestrator.yaml"
