"""Why the AG-UI endpoint refuses a run: one error, its codes a closed set.

::

    InterlockError (interlock._errors)
    └── RunRefused          a run or a resume was refused; nothing was recorded

A refusal reaches the front-end as the run's ``RUN_ERROR`` event: its ``code`` is the
refusal's, its ``message`` says what to do. A refusal before the stream opens (no token, a
body that is not a ``RunAgentInput``) is an HTTP answer instead (`HTTP_STATUS`).
"""

from __future__ import annotations

from typing import Final, Literal

from .._errors import InterlockError

__all__ = ["HTTP_STATUS", "RefusalCode", "RunRefused"]

RefusalCode = Literal[
    "unauthenticated",
    "invalid_input",
    "forbidden",
    "out_of_scope",
    "no_input",
    "thread_interrupted",
    "unknown_interrupt",
    "invalid_answer",
    "question_changed",
    "confirmation_required",
    "not_authorized",
    "four_eyes",
    "thread_busy",
]
"""What was refused: the ``code`` of a ``RUN_ERROR`` (or of the JSON body of an HTTP refusal)."""

HTTP_STATUS: Final[dict[str, int]] = {"unauthenticated": 401, "invalid_input": 422}
"""The refusals answered before the event stream opens, and their HTTP status."""


class RunRefused(InterlockError):
    """Raised when an AG-UI run or resume is refused; nothing was recorded.

    Attributes:
        code: What was refused (`RefusalCode`).
    """

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code: RefusalCode = code
