"""Persistence behind one interface: the embedded SQLite store (the default).

Nothing SQLite-specific leaks past this package: the layers above speak
`Enqueue`, `Commit` and the records, with bodies already serialized.
"""

from ._lock import DirectoryLock as DirectoryLock
from ._records import ActorRecord as ActorRecord
from ._records import Commit as Commit
from ._records import CommitResult as CommitResult
from ._records import DeadLetterRecord as DeadLetterRecord
from ._records import Enqueue as Enqueue
from ._records import EventPage as EventPage
from ._records import EventRecord as EventRecord
from ._records import MailboxRecord as MailboxRecord
from ._records import NewEvent as NewEvent
from ._records import NewTimer as NewTimer
from ._records import StoredAck as StoredAck
from ._retention import RetentionPolicy as RetentionPolicy
from ._retention import RetentionStep as RetentionStep
from ._sqlite import SqliteStore as SqliteStore
from ._sqlite import StoreStatistics as StoreStatistics
from ._sqlite import open_sqlite_store as open_sqlite_store

__all__ = [
    "ActorRecord",
    "Commit",
    "CommitResult",
    "DeadLetterRecord",
    "DirectoryLock",
    "Enqueue",
    "EventPage",
    "EventRecord",
    "MailboxRecord",
    "NewEvent",
    "NewTimer",
    "RetentionPolicy",
    "RetentionStep",
    "SqliteStore",
    "StoreStatistics",
    "StoredAck",
    "open_sqlite_store",
]
