"""An active actor's mailbox in memory: a window onto the store's, in seq order.

The store holds every durable message; the inbox holds at most
``inbox_limit`` of them, the next ones to handle. A message acked to its
sender is delivered here at once (`deliver`); one that does not fit, or
arrives while the inbox loads, or was never delivered in memory (a fired
timer: `poke`), marks the inbox ``stale``, and the mailbox loop reads on from
the store once what it holds is handled.

Attempts are counted without a write before each batch. A message's first
attempt is charged when it is stored (its row says 0 attempts and the store
life that stored it); a later attempt is marked in the store before it
starts, and a batch that crashes is counted in the crash's commit. What a
process death leaves is told apart by the life: a row stored in an earlier
life, never marked, and within ``window`` (a batch's most) of the committed
cursor may have been in the batch that was running when that life ended, so
its next attempt counts as its second, and it runs alone. A message further
on cannot have started; one stored in this life, if it had started and
crashed, would have been counted. So a poison message that kills the process
is counted at each death, and what waits behind it past the window loses none
of its attempts.
"""

from __future__ import annotations

from ..mailbox import Message
from ..store import Store

__all__ = ["Inbox"]


class Inbox:
    """The next unhandled messages of ``address``, the rest left in ``store``."""

    # One per active actor (see ActorCell's slots).
    __slots__ = (
        "_address",
        "_ahead",
        "_assumed_through",
        "_limit",
        "_loaded_upto",
        "_loading",
        "_messages",
        "_stale",
        "_store",
        "_taken",
        "_window",
    )

    def __init__(self, store: Store, address: str, *, limit: int, window: int) -> None:
        self._store = store
        self._address = address
        self._limit = limit
        self._window = window
        self._assumed_through = 0  # rows up to here may have started in an earlier life
        # A list, not a deque: an empty deque takes 600 bytes, and most active
        # actors hold nothing; a batch is cut from the front in one slice.
        self._messages: list[Message] = []
        self._loaded_upto = 0
        self._taken = 0
        self._loading = True
        self._stale = False
        # Messages that became durable before the one they follow: acks wake
        # their senders in any order, and each sender delivers its own.
        # Made when one does (most actors never see it).
        self._ahead: dict[int, Message] | None = None

    async def load(self, cursor: int) -> None:
        """Forget what is held and read from the store on, past ``cursor``.

        Deliveries that arrive meanwhile are not kept: the store holds every
        message acked before it was delivered, and they mark the inbox stale.
        """
        self._loading = True
        self._taken = cursor
        self._assumed_through = cursor + self._window
        self._messages.clear()
        await self.reload()

    async def reload(self) -> None:
        """Read on from the store past the last message taken."""
        self._loading = True
        self._ahead = None
        self._stale = False
        try:
            rows = await self._store.pending(self._address, self._taken, self._limit)
        finally:
            self._loading = False
        life, through = self._store.life, self._assumed_through
        self._messages.extend(
            Message.from_record(r, attempt=2)
            if r.attempts == 0 and r.seq <= through and r.life is not None and r.life != life
            else Message.from_record(r)
            for r in rows
        )
        self._loaded_upto = rows[-1].seq if rows else self._taken
        # A delivery during the read (stale meanwhile) is read the next time.
        self._stale = self._stale or len(rows) >= self._limit

    def deliver(self, message: Message) -> None:
        """A message just became durable: keep it in order, or leave it to the store."""
        seq = message.seq
        if self._loading:
            self._stale = True
            return
        if seq <= self._loaded_upto:
            return
        ahead = self._ahead
        if self._stale or len(self._messages) + (len(ahead) if ahead else 0) >= self._limit:
            # Past the window kept in memory: it will be read from the store.
            self._stale = True
        elif seq == self._loaded_upto + 1:
            self._messages.append(message)
            while ahead:
                following = ahead.pop(seq + 1, None)
                if following is None:
                    break
                self._messages.append(following)
                seq += 1
            self._loaded_upto = seq
        else:
            # Its predecessor comes next, or the store has it (see `stale`).
            if ahead is None:
                ahead = self._ahead = {}
            ahead[seq] = message

    def poke(self) -> None:
        """Something is in the store's mailbox that was not delivered here."""
        self._stale = True

    @property
    def stale(self) -> bool:
        """True when the store may hold messages past what is held here."""
        return self._stale or bool(self._ahead)

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def next_attempt(self) -> int:
        """The attempt the next message to take is on (not empty: check ``len`` first)."""
        return self._messages[0].attempt

    def take(self, batch_max: int) -> list[Message]:
        """The next batch to handle (not empty: check ``len`` first).

        A message that was attempted before runs alone, so that a poison
        message is told apart from the innocent ones batched with it.
        """
        messages = self._messages
        taken = 1
        if messages[0].attempt == 1:
            limit = min(batch_max, len(messages))
            while taken < limit and messages[taken].attempt == 1:
                taken += 1
        batch = messages[:taken]
        del messages[:taken]
        self._taken = batch[-1].seq
        return batch
