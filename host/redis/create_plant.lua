-- create_plant.lua: store a plant if its id is free, atomically.
--
-- KEYS[1]  the plant's key (a string holding its canonical content)
-- KEYS[2]  the plant index (a sorted set, every score 0, member = ARGV[2])
-- ARGV[1]  the plant's canonical content
-- ARGV[2]  the plant's index member (order-preserving hex of the id)
--
-- Returns  1 created, 0 the same content is already stored, -1 other content
-- is stored under this id. Running it twice with the same arguments returns
-- 1 then 0, which is what makes a retried create safe.
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], 0, ARGV[2])
  return 1
end
if current == ARGV[1] then
  return 0
end
return -1
