-- Add to a window's counter: KEYS[1] is the window's counter (one key, so
-- one slot). ARGV: delta, ttl in ms. Returns the counter after the addition;
-- the first addition of the window sets its expiry.
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if n == tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return n
