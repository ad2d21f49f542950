-- finish_attempt.lua: record one delivery attempt's outcome.
--
-- KEYS[1]  the delivery's record (hash)
-- KEYS[2]  its endpoint's due zset
-- KEYS[3]  {webhooks}:pending
-- KEYS[4]  {webhooks}:failed  zset: score failure time (ms), member delivery id
-- ARGV     id, state (pending|delivered|failed), attempts, last status,
--          last error, next try (ms), now (ms), how long a delivered record is kept (ms)
--
-- Returns 1, or 0 when the delivery is gone or already ended (an attempt
-- that outlived its lease while another gateway finished it).
local id = ARGV[1]
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'pending' then
  if not state then
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
  end
  return 0
end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'attempts', ARGV[3], 'status', ARGV[4], 'error', ARGV[5], 'next', ARGV[6])
if ARGV[2] == 'pending' then
  redis.call('ZADD', KEYS[2], ARGV[6], id)
  return 1
end
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
if ARGV[2] == 'failed' then
  redis.call('ZADD', KEYS[4], ARGV[7], id)
else
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
end
return 1
