-- remove_endpoint.lua: delete an endpoint and take its pending deliveries
-- off the queue.
--
-- KEYS[1]  the endpoint's record; KEYS[2] {webhooks}:endpoints (set of ids);
-- KEYS[3]  the endpoint's due zset; KEYS[4] {webhooks}:pending
-- ARGV[1]  the endpoint's id
--
-- Returns false when there is no such endpoint, else the ids of the
-- deliveries it dropped (their records are the caller's to mark).
if redis.call('DEL', KEYS[1]) == 0 then
  return false
end
redis.call('SREM', KEYS[2], ARGV[1])
local ids = redis.call('ZRANGE', KEYS[3], 0, -1)
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[4], id)
end
redis.call('DEL', KEYS[3])
return ids
