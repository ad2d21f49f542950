-- revoke_token.lua: mark revoked the listed token records that still carry
-- the name.
--
-- KEYS     token records (hashes) whose name matched when they were listed
-- ARGV[1]  the name
--
-- Returns  how many of them carry the name, now all revoked. Already revoked
-- ones count too, so running it again returns the same number.
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'name') == ARGV[1] then
    redis.call('HSET', key, 'revoked', '1')
    n = n + 1
  end
end
return n
