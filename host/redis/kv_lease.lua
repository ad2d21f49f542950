-- Lease part of a window's budget: KEYS[1] is the window's counter (one key,
-- so one slot). ARGV: limit, share, ttl in ms. Grants max(1, left/share)
-- units of what is left of limit and returns {granted, taken after}.
local limit = tonumber(ARGV[1])
local taken = tonumber(redis.call('GET', KEYS[1]) or '0')
local left = limit - taken
if left <= 0 then
  return {0, taken}
end
local grant = math.max(1, math.floor(left / tonumber(ARGV[2])))
taken = redis.call('INCRBY', KEYS[1], grant)
if taken == grant then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {grant, taken}
