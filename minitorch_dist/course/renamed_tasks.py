"""Task and exercise ids that were renamed, still accepted under their old names.

Lab 11 had two parts. Its second part, choosing a configuration, became lab 12 (chapter 12),
so that chapter N pairs with lab N; its ids moved with it, in the same order. Lab 11 kept
lab11.1, lab11.4 and lab11.5, so every old id still names one task only. Notebooks and
instructions already handed out use the old ids: ``python -m minitorch_dist.grade --task
lab11.2``, ``pytest --task lab11.2`` and ``check_answer("lab11.9", ...)`` grade or check the
renamed task. Standard library only.
"""

from __future__ import annotations

import sys

__all__ = ["TASK_ALIASES", "current_task", "current_tasks"]

TASK_ALIASES: dict[str, str] = {  # old id -> new id
    "lab11.2": "lab12.1",  # the fit test and the cost model
    "lab11.3": "lab12.2",  # ranking and choosing
    "lab11.6": "lab12.3",  # exercise 1
    "lab11.7": "lab12.4",  # exercise 2
    "lab11.8": "lab12.5",  # exercise 3
    "lab11.9": "lab12.6",  # exercise 4
}


def current_task(task: str, *, say: bool = False) -> str:
    """The id ``task`` has now (itself when it was never renamed). With ``say``, a renamed id
    is named on stderr with its new id."""
    new = TASK_ALIASES.get(task, task)
    if say and new != task:
        print(f"{task} is now {new}: grading {new}", file=sys.stderr)
    return new


def current_tasks(tasks: list[str], *, say: bool = False) -> list[str]:
    """:func:`current_task` of each id, in order, without duplicates."""
    return list(dict.fromkeys(current_task(t, say=say) for t in tasks))
