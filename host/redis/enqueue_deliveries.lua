-- enqueue_deliveries.lua: record deliveries (one event for one endpoint
-- each), due now, unless already recorded: enqueuing an event again after a
-- crash or a takeover adds nothing.
--
-- KEYS[1]            {webhooks}:pending  zset: score event time (ms), member delivery id
-- KEYS[2]            {webhooks}:log      zset: score enqueue time (ms), member delivery id
-- KEYS[2i+1], [2i+2] delivery i's record (hash) and its endpoint's due zset
-- ARGV[1]            now (ms)
-- ARGV[2]            how many deliveries the log keeps
-- ARGV[3+7(i-1)…]    delivery i: id, endpoint, event id, type, event time (ms), data,
--                    traceparent ("" for none; kept as field tp when given)
--
-- Returns how many deliveries were new.
local now = ARGV[1]
local n = 0
for i = 1, (#KEYS - 2) / 2 do
  local rec, due = KEYS[2 * i + 1], KEYS[2 * i + 2]
  local a = 2 + 7 * (i - 1)
  local id = ARGV[a + 1]
  if redis.call('EXISTS', rec) == 0 then
    redis.call('HSET', rec, 'endpoint', ARGV[a + 2], 'event', ARGV[a + 3], 'type', ARGV[a + 4],
      'ts', ARGV[a + 5], 'data', ARGV[a + 6], 'state', 'pending', 'attempts', 0, 'status', 0,
      'error', '', 'next', now, 'created', now)
    if ARGV[a + 7] ~= '' then
      redis.call('HSET', rec, 'tp', ARGV[a + 7])
    end
    redis.call('ZADD', due, now, id)
    redis.call('ZADD', KEYS[1], ARGV[a + 5], id)
    redis.call('ZADD', KEYS[2], now, id)
    n = n + 1
  end
end
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[2])
if extra > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return n
