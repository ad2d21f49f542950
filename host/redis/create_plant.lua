-- create_plant.lua: store a plant if its id is free, and record the event,
-- atomically.
--
-- Keys, all in the plant's shard (one hash tag, see shards.go):
-- KEYS[1]  the plant's key (a string holding its canonical content)
-- KEYS[2]  the shard's plant index (a sorted set, every score 0, member = ARGV[2])
-- KEYS[3]  the shard's outbox stream (see events.go for the entry's fields)
-- KEYS[4]  the shard's recording flag: the event is appended only when it
--          exists, that is once a webhook endpoint has been added (outbox.go)
-- ARGV[1]  the plant's canonical content, which is also the event's data
-- ARGV[2]  the plant's index member (order-preserving hex of the id)
-- ARGV[3]  the time of the write, Unix milliseconds, for the event
-- ARGV[4]  optional: the W3C traceparent of the write's span, kept with the
--          event (field tp) so that its webhook delivery joins the trace
--
-- Returns  1 created, 0 the same content is already stored, -1 other content
-- is stored under this id. Running it twice with the same arguments returns
-- 1 then 0, which is what makes a retried create safe; only the run that
-- returns 1 appends a plant.created event.
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  if redis.call('EXISTS', KEYS[4]) == 1 then
    if ARGV[4] then
      redis.call('XADD', KEYS[3], '*', 'type', 'plant.created', 'ts', ARGV[3], 'data', ARGV[1], 'tp', ARGV[4])
    else
      redis.call('XADD', KEYS[3], '*', 'type', 'plant.created', 'ts', ARGV[3], 'data', ARGV[1])
    end
  end
  return 1
end
if current == ARGV[1] then
  return 0
end
return -1
