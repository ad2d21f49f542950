-- claim_deliveries.lua: lease the deliveries of one endpoint that are due,
-- by moving their due time to the lease's end. A gateway that dies holding
-- a lease leaves the delivery due again when the lease ends.
--
-- KEYS[1]  the endpoint's due zset: score due time (ms), member delivery id
-- ARGV[1]  now (ms)
-- ARGV[2]  the lease's end (ms)
-- ARGV[3]  most deliveries to claim
--
-- Returns the claimed delivery ids, earliest due first.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], ARGV[2], id)
end
return ids
