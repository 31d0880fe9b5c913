"""Per-request state of one simulation, kept in plain lists indexed by request for the event loop's speed.

`todo` is what the simulation runs: the tokens a request really still generates. `pleft` and `pfin` are what
routers read instead: the tokens it is predicted to still generate (from its predicted output length, less
what it generated so far, at least 1 while it runs) and, while it decodes, the pass count at which it is
predicted to finish.
"""

from __future__ import annotations

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
NAN = float("nan")


class Book:
    """What every request still has to do and what happened to it so far."""

    __slots__ = ("blocks", "btok", "cached", "cost", "done", "enc", "enq", "entry_step", "entry_u", "first", "held",
                 "holder", "ins", "patches", "pfin", "phase", "pleft", "preempted", "rem", "todo", "wait", "wfirst",
                 "where")

    def __init__(self, n: int, cached: list[int], blocks: list[list[int]] | None = None,
                 btok: list[int] | None = None, ins: list[int] | None = None,
                 patches: list[int] | None = None) -> None:
        # prompt tokens served from the prefix cache: as the trace recorded them for a request without blocks, else
        # as its replica's cache gave them when the prefill that produced its first token started
        self.cached = cached
        self.blocks: list[list[int]] = blocks if blocks is not None else [[] for _ in range(n)]  # its prefix blocks
        self.btok: list[int] = btok if btok is not None else [0] * n  # tokens per block, 0 without blocks
        self.ins: list[int] = ins if ins is not None else [0] * n     # its prompt tokens
        self.holder = [-1] * n          # the replica (serial) whose cache its blocks are referenced in, -1 none
        self.rem = [0] * n              # prompt tokens still to compute on the current replica
        self.held = [0] * n             # KV tokens the sequence holds once admitted (prompt + generated)
        self.todo = [0] * n             # tokens still to generate on the current replica
        self.pleft = [0] * n            # tokens predicted still to generate there (what routers read)
        self.pfin = [-1] * n            # predicted pass count at which it finishes decoding; -1 when not decoding
        self.enq = [0.0] * n            # when it joined its current queue
        self.wait = [0.0] * n           # seconds queued, summed over queues (both stages when split)
        self.wfirst = [0.0] * n         # of those, the seconds queued before its first token
        self.first = [NAN] * n          # time of its first token
        self.done = [NAN] * n           # time it finished on its current replica
        self.cost = [0.0] * n           # its share of busy cost so far
        self.entry_u = [0.0] * n        # the replica's cost counter when it started decoding
        self.entry_step = [0] * n       # the replica's pass count when it started decoding
        self.phase = [WAITING] * n
        self.where = [-1] * n           # replica id it was last admitted on
        self.preempted = [0] * n
        # image patches its replica's vision encoder still has to compute (0: none, or done), and the encoder
        # seconds it paid: the pass of its first prompt chunk runs the encoder on them first
        self.patches: list[int] = patches if patches is not None else [0] * n
        self.enc = [0.0] * n

    def load(self, i: int, prompt: int, context: int, tokens: int, predicted: int) -> None:
        """Set what request i asks of the replica it is sent to next: `tokens` it will generate there, of which
        routers are told `predicted`."""
        self.rem[i] = prompt
        self.held[i] = context
        self.todo[i] = tokens
        self.pleft[i] = predicted
