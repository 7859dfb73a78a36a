"""moto in server mode, with each DynamoDB item operation applied whole.

The tests' local AWS-compatible server (tests/run.sh starts it). moto
evaluates a write's condition and then applies the write as two steps with
no lock between them, so two concurrent conditional writes to one item can
both pass (two writers each see seven of eight slots taken, and both take
one). DynamoDB applies every item write atomically, and hooklane relies on
that (the per-tenant bound's leases, the attempt-number start, idempotent
publish). This launcher serializes moto's DynamoDB item operations, reads
included (an update is applied in place, so a read must not see it half
done), then runs moto's own server: same arguments as `moto_server`.
"""

import functools
import sys
import threading

from moto.dynamodb.models import DynamoDBBackend
from moto.server import main

_ONE_AT_A_TIME = threading.RLock()

_ITEM_OPERATIONS = (
    "put_item",
    "update_item",
    "delete_item",
    "get_item",
    "query",
    "scan",
    "batch_get_item",
    "transact_write_items",
    "transact_get_items",
)
# BatchWriteItem is not listed: moto applies it through put_item and
# delete_item, one item at a time, and those are.


def _whole(operation):
    @functools.wraps(operation)
    def applied_whole(*args, **kwargs):
        with _ONE_AT_A_TIME:
            return operation(*args, **kwargs)

    return applied_whole


for _name in _ITEM_OPERATIONS:
    setattr(DynamoDBBackend, _name, _whole(getattr(DynamoDBBackend, _name)))

if __name__ == "__main__":
    main(sys.argv[1:])
