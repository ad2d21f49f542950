-- delete_plant.lua: delete a plant if it exists, and record the event,
-- atomically.
--
-- Keys, all in the plant's shard (one hash tag, see shards.go):
-- KEYS[1]  the plant's key
-- KEYS[2]  the shard's plant index
-- KEYS[3]  the shard's outbox stream (see events.go for the entry's fields)
-- KEYS[4]  the shard's recording flag: the event is appended only when it
--          exists, that is once a webhook endpoint has been added (outbox.go)
-- ARGV[1]  the plant's index member (order-preserving hex of the id)
-- ARGV[2]  the time of the write, Unix milliseconds, for the event
-- ARGV[3]  the event's data: {"id":<id>}
-- ARGV[4]  optional: the W3C traceparent of the write's span (field tp)
--
-- Returns  1 deleted, 0 there was no such plant. Only the run that returns 1
-- appends a plant.deleted event, so a retried delete records one event and
-- answers "not found" the second time.
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[4]) == 1 then
  if ARGV[4] then
    redis.call('XADD', KEYS[3], '*', 'type', 'plant.deleted', 'ts', ARGV[2], 'data', ARGV[3], 'tp', ARGV[4])
  else
    redis.call('XADD', KEYS[3], '*', 'type', 'plant.deleted', 'ts', ARGV[2], 'data', ARGV[3])
  end
end
return 1
