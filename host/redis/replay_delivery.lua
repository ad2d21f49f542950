-- replay_delivery.lua: make a failed delivery due now, attempts reset.
--
-- KEYS[1]  the delivery's record; KEYS[2] its endpoint's due zset;
-- KEYS[3]  {webhooks}:pending;    KEYS[4] {webhooks}:failed
-- ARGV[1]  id; ARGV[2] now (ms)
--
-- Returns 1, -1 no such delivery, -2 the delivery has not failed.
local id = ARGV[1]
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return -1
end
if state ~= 'failed' then
  return -2
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', 0, 'next', ARGV[2])
redis.call('ZREM', KEYS[4], id)
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('ZADD', KEYS[3], redis.call('HGET', KEYS[1], 'ts'), id)
return 1
