-- put_token.lua: write a token record and index it, atomically.
--
-- KEYS[1]  the token's record (a hash)
-- KEYS[2]  the token index (a set of selectors)
-- ARGV[1]  selector, ARGV[2] digest (hex), ARGV[3] name, ARGV[4] scopes,
--          ARGV[5] created (unix ms), ARGV[6] expires (unix ms, 0 never),
--          ARGV[7] revoked ("0" or "1")
--
-- Returns  1 written, 0 the selector already belongs to another digest (a
-- 64-bit prefix collision: refuse rather than overwrite someone's token).
local current = redis.call('HGET', KEYS[1], 'digest')
if current and current ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1],
  'digest', ARGV[2], 'name', ARGV[3], 'scopes', ARGV[4],
  'created', ARGV[5], 'expires', ARGV[6], 'revoked', ARGV[7])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
