-- Lease part of a sliding window's budget: KEYS[1] is the key's hash of
-- slot counters (one key, so one slot of a Cluster), field = slot number.
-- ARGV: limit, share, slot (this gateway's current slot), slots (how many
-- slots before it still count), ttl in ms. Counts every slot from
-- slot - slots on (one ahead of this gateway's clock too: counting it can
-- only deny more), drops the older ones, grants max(1, left/share) units
-- into slot when any are left, and returns {granted, counted after,
-- oldest slot holding a counted unit (slot when none)}.
local limit = tonumber(ARGV[1])
local slot = tonumber(ARGV[3])
local first = slot - tonumber(ARGV[4])
local counts = redis.call('HGETALL', KEYS[1])
local taken, oldest = 0, slot
for i = 1, #counts, 2 do
  local s = tonumber(counts[i])
  if s < first then
    redis.call('HDEL', KEYS[1], counts[i])
  else
    taken = taken + tonumber(counts[i + 1])
    if s < oldest then
      oldest = s
    end
  end
end
local left = limit - taken
if left <= 0 then
  return {0, taken, oldest}
end
local grant = math.max(1, math.floor(left / tonumber(ARGV[2])))
redis.call('HINCRBY', KEYS[1], ARGV[3], grant)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {grant, taken + grant, oldest}
