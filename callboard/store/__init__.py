"""Persistence behind one interface: the `Store` protocol (async throughout),
and its implementations: the embedded SQLite store, the default, and the
PostgreSQL store (``_postgres``, for a ``postgresql://`` URL); `open_store`
picks one.

Nothing backend-specific leaks past this package: the layers above type
against `Store` and speak `Enqueue`, `Commit` and the records, with bodies
already serialized. Only the store's own tests name `SqliteStore` or
`PostgresStore` (which is not re-exported here, so that importing the store
does not import its driver).
"""

from ._company import COMMIT_DELAY as COMMIT_DELAY
from ._company import MAX_COMMIT_DELAY as MAX_COMMIT_DELAY
from ._lock import DirectoryLock as DirectoryLock
from ._open import open_store as open_store
from ._pg_connect import redact as redact_url
from ._protocol import Store as Store
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
from ._records import NodeRecord as NodeRecord
from ._records import StoredAck as StoredAck
from ._records import StoreStatistics as StoreStatistics
from ._retention import Deletion as Deletion
from ._retention import RetentionPolicy as RetentionPolicy
from ._retention import RetentionStep as RetentionStep
from ._sqlite import SqliteStore as SqliteStore
from ._sqlite import open_sqlite_store as open_sqlite_store
from ._timings import Buckets as Buckets
from ._timings import CommitHistograms as CommitHistograms
from ._timings import Histogram as Histogram

__all__ = [
    "COMMIT_DELAY",
    "MAX_COMMIT_DELAY",
    "ActorRecord",
    "Buckets",
    "Commit",
    "CommitHistograms",
    "CommitResult",
    "DeadLetterRecord",
    "Deletion",
    "DirectoryLock",
    "Enqueue",
    "EventPage",
    "EventRecord",
    "Histogram",
    "MailboxRecord",
    "NewEvent",
    "NewTimer",
    "NodeRecord",
    "RetentionPolicy",
    "RetentionStep",
    "SqliteStore",
    "Store",
    "StoreStatistics",
    "StoredAck",
    "open_sqlite_store",
    "open_store",
    "redact_url",
]
