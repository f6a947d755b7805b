"""The solution markers every course tool reads: a line ``# BEGIN`` + ``SOLUTION labNN.k:
<task>`` opens a block (group 1: its indent, 2: its task ID, 3: the one-line task), ``# END``
+ ``SOLUTION`` closes it. (Written in two parts here, so that no edition file carries the
marker itself.) Standard library only: the release and the autograder import it."""

from __future__ import annotations

import re

__all__ = ["BEGIN", "END", "TASK"]

_WORD = "SOLUTION"
BEGIN = re.compile(r"^([ \t]*)# BEGIN " + _WORD + r"\b[ \t]*([^:\s]*)(?::[ \t]*(.*?))?[ \t]*$")
TASK = re.compile(r"^lab\d\d\.\d+$")  # labNN.k: chapter NN, task k
END = re.compile(r"^[ \t]*# END " + _WORD + r"\b")
