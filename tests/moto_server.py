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

It also makes `TransactWriteItems` cost what the items it names cost.
moto backs up every table a transaction touches, whole, before applying
it (a deep copy of the table per item of the transaction), so each
transaction took time in proportion to the table: with a few thousand
items, tens of milliseconds of the one core moto runs on, and a burst of
deliveries (each starts its attempt in a transaction) saturated it at
about a hundred calls a second. Here the backup is of the items the
transaction names, as they were, restored the same way on a cancel.

Likewise for SQS: moto works out every attribute of a queue, its message
counts included (a walk over all its messages), to read one setting on
each send and each message received, so a queue holding a burst's
hundreds of messages made each call cost in proportion. Here those two
reads take the one setting they need.

And a FIFO queue whose received messages timed out hands their group out
again from its first message, as SQS does (`_timed_out_first`).

And a queue named by a stack's event source mapping is left to the
tests: moto's own mapping would receive from it at every send and run the
function in Docker.

And a table a stack creates reads `DeletionProtectionEnabled` as
CloudFormation does (`_table_from_stack`): moto kept the template's
string, which `DescribeTable` then answered where DynamoDB answers a
boolean.

And it makes an update expression cost what it says. moto parsed each
`UpdateExpression` twice per call, from its text, and every pass of its
validator over the parsed tree rebuilt that pass's table of node handlers
at every node (twice per node): an `UpdateItem` that sets a dozen
attributes took about 10 ms of moto's one core. Here a parsed expression is
kept by its text (the validator works on its own deep copy, so the kept
tree is never changed) and each pass builds its table once.
"""

import copy
import functools
import logging
import sys
import threading

import moto.backends as moto_backends
import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main
from moto.sqs.models import Queue, SQSBackend
from moto.core.utils import unix_time

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


class _TablesByReference:
    """moto's `copy` module inside its backend, except that a whole table
    is "copied" as itself: the transaction below backs up its items."""

    @staticmethod
    def deepcopy(value, memo=None):
        if isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)


def _key_of(table, op_type, op):
    """The key of the item one entry of a transaction writes."""
    if op_type == "Put":
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key
    return op["Key"]


def _restore(table, key, item):
    """Puts an item back as it was before a cancelled transaction (`None`:
    it was not there)."""
    hash_value = DynamoType(key[table.hash_key_attr])
    if table.has_range_key:
        range_value = DynamoType(key[table.range_key_attr])
        if item is None:
            table.items.get(hash_value, {}).pop(range_value, None)
        else:
            table.items[hash_value][range_value] = item
    elif item is None:
        table.items.pop(hash_value, None)
    else:
        table.items[hash_value] = item


def _item_backups(transact_write_items):
    """`TransactWriteItems` with a backup of the items it names, restored
    if it is cancelled."""

    @functools.wraps(transact_write_items)
    def backed_up_by_item(self, transact_items, *args, **kwargs):
        backups = []
        for entry in transact_items:
            try:
                op_type, op = next(iter(entry.items()))
                table = self.tables.get(op.get("TableName"))
                if table is None:
                    continue
                key = _key_of(table, op_type, op)
                current = self.get_item(op["TableName"], key)
            except Exception:  # moto's own call reports a malformed entry
                continue
            backups.append((table, key, copy.deepcopy(current)))
        try:
            return transact_write_items(self, transact_items, *args, **kwargs)
        except Exception:
            for table, key, item in reversed(backups):
                _restore(table, key, item)
            raise

    return backed_up_by_item


def _retained(self, queue_name, message):
    """`is_message_valid_based_on_retention_period`, from the one setting."""
    queue = self.get_queue(queue_name)
    return int(queue.message_retention_period) + message.sent_timestamp / 1000 > unix_time()


_SENDING = threading.local()
_ALL_ATTRIBUTES = Queue.attributes


def _attributes(queue):
    """A queue's attributes; while a message is checked and sent, only the
    one that reads."""
    if getattr(_SENDING, "depth", 0) > 0:
        return {
            "ContentBasedDeduplication": str(
                bool(getattr(queue, "content_based_deduplication", False))
            ).lower()
        }
    return _ALL_ATTRIBUTES.fget(queue)


def _checking(validate_message):
    """Runs a send's step with the one queue setting it reads at hand."""

    @functools.wraps(validate_message)
    def with_one_attribute(*args, **kwargs):
        _SENDING.depth = getattr(_SENDING, "depth", 0) + 1
        try:
            return validate_message(*args, **kwargs)
        finally:
            _SENDING.depth -= 1

    return with_one_attribute


_QUEUE_LOCKS = {}
_QUEUE_LOCKS_LOCK = threading.Lock()


def _one_call_per_queue(operation):
    """Runs an SQS call whole for its queue. moto's receive reads which
    message groups are in flight, then walks the messages, with nothing
    held between: two receives at once on one FIFO queue could both take
    messages of the same group, which SQS never does (a group is handed to
    one receiver at a time), and the stand-in's receive loops run at once.
    Each queue's receives, deletes and visibility changes take turns (a
    send only appends, and must not wait behind a long poll)."""

    @functools.wraps(operation)
    def whole_for_its_queue(self, queue_name, *args, **kwargs):
        with _QUEUE_LOCKS_LOCK:
            lock = _QUEUE_LOCKS.setdefault(queue_name, threading.RLock())
        with lock:
            return operation(self, queue_name, *args, **kwargs)

    return whole_for_its_queue


def _timed_out_first(receive_message):
    """Forgets, before a receive walks the queue, every received message
    that timed out (visible again). moto forgets one only when its walk
    reaches it, and skips a message whose group has any other message not
    forgotten yet: with several of a group's messages timed out, it forgot
    the first, found the group still "in flight" by the others and skipped
    it, forgot the next, and so on, and handed the group's last one out
    first. SQS hands a timed-out group out again from its first message.
    (A message that times out during the walk still waits for the next
    receive, as moto had it.)"""

    @functools.wraps(receive_message)
    def forgetting_timed_out(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        for message in list(queue.pending_messages):
            if message.visible:
                queue.pending_messages.remove(message)
        return receive_message(self, queue_name, *args, **kwargs)

    return forgetting_timed_out


SQSBackend.receive_message = _timed_out_first(SQSBackend.receive_message)

for _name in (
    "receive_message",
    "delete_message",
    "change_message_visibility",
):
    setattr(SQSBackend, _name, _one_call_per_queue(getattr(SQSBackend, _name)))



SQSBackend.is_message_valid_based_on_retention_period = _retained
SQSBackend._validate_message = _checking(SQSBackend._validate_message)
SQSBackend.send_message = _checking(SQSBackend.send_message)
Queue.attributes = property(_attributes)
dynamodb_models.copy = _TablesByReference
DynamoDBBackend.transact_write_items = _item_backups(
    DynamoDBBackend.transact_write_items
)

_PARSE_UPDATE = UpdateExpressionParser.make.__func__


@functools.lru_cache(maxsize=1024)
def _parsed_update(cls, expression):
    return _PARSE_UPDATE(cls, expression)


def _handlers(self):
    """The pass's table of node handlers, built once per pass."""
    handlers = self.__dict__.get("_hooklane_handlers")
    if handlers is None:
        handlers = self._processing_map()
        self.__dict__["_hooklane_handlers"] = handlers
    return handlers


def _node_types(self):
    return tuple(_handlers(self))


def _process(self, node):
    for class_key, processor in _handlers(self).items():
        if isinstance(node, class_key):
            return processor(node)
    return None


UpdateExpressionParser.make = classmethod(_parsed_update)
DepthFirstTraverser.nodes_to_be_processed = _node_types
DepthFirstTraverser.process = _process

for _name in _ITEM_OPERATIONS:
    setattr(DynamoDBBackend, _name, _whole(getattr(DynamoDBBackend, _name)))

_ALL_ITEMS = Table.all_items
_PARTITION = threading.local()


def _items_of_partition(self):
    """All the table's items, sorted; while a query of the table (not an
    index) runs, only its partition's: the query keeps only those."""
    hash_key = getattr(_PARTITION, "key", None)
    if hash_key is None:
        return _ALL_ITEMS(self)
    found = self.items.get(hash_key)
    if found is None:
        return []
    items = list(found.values()) if self.range_key_attr else [found]
    return sorted(items, key=lambda x: x.range_key if x.range_key else x.hash_key)


def _partition_query(query):
    """A table's query reads its partition, not the whole table."""

    @functools.wraps(query)
    def one_partition(self, hash_key, *args, **kwargs):
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        _PARTITION.key = hash_key if index_name is None else None
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            _PARTITION.key = None

    return one_partition


Table.all_items = _items_of_partition
Table.query = _partition_query(Table.query)

_TABLE_FROM_STACK = Table.create_from_cloudformation_json.__func__


def _table_from_stack(cls, resource_name, cloudformation_json, *args, **kwargs):
    """A table a stack creates, its `DeletionProtectionEnabled` read as
    CloudFormation reads it: a parameter's `"true"` or `"false"` is a
    boolean (moto kept the string, and answered it to `DescribeTable`,
    which the SDKs refuse to read)."""
    props = cloudformation_json.get("Properties", {})
    value = props.get("DeletionProtectionEnabled")
    if isinstance(value, str):
        props = dict(props, DeletionProtectionEnabled=value.strip().lower() == "true")
        cloudformation_json = dict(cloudformation_json, Properties=props)
    return _TABLE_FROM_STACK(cls, resource_name, cloudformation_json, *args, **kwargs)


Table.create_from_cloudformation_json = classmethod(_table_from_stack)

# A stack's event source mappings are recorded (the deploy check reads
# them back) but no queue hands them its messages: moto would receive a
# batch at every send, try to run the function in Docker (there is none
# here), and make the batch visible again with its receive counts raised.
# The tests run the handlers themselves, as the mappings would.
Queue.lambda_event_source_mappings = property(lambda self: {}, lambda self, value: None)

_MODULES = frozenset(moto_backends.list_of_moto_modules())
_FIND_BACKEND = DomainDispatcherApplication.get_backend_for_host


def _backend_for_host(self, host):
    """The backend serving `host`, worked out once per host."""
    known = self.__dict__.setdefault("_hooklane_backends", {})
    if host not in known:
        known[host] = _FIND_BACKEND(self, host)
    return known[host]


moto_backends.list_of_moto_modules = lambda: _MODULES
DomainDispatcherApplication.get_backend_for_host = _backend_for_host

if __name__ == "__main__":
    # One log line per request, written under the logging lock, cost moto
    # a tenth of its core; warnings and errors are still written.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # moto serves each request on a thread of its own, all under one GIL:
    # at the default 5 ms switch interval, a request whose answer is ready
    # waits behind every busy thread's full interval, so at fifty requests
    # in flight each took a large part of a second while moto's core was
    # not even busy. A shorter interval keeps waits to what the work costs.
    sys.setswitchinterval(0.0005)
    main(sys.argv[1:])
