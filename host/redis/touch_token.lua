-- touch_token.lua: record when a token was last used, if it still exists.
--
-- KEYS[1]  the token's record (a hash)
-- ARGV[1]  digest (hex): the record must still hold this token
-- ARGV[2]  last used (unix ms)
--
-- Returns  1 recorded, 0 no such token (deleted, or the selector holds
-- another digest). Never creates a record: a write racing a deletion must
-- not resurrect a half record.
if redis.call('HGET', KEYS[1], 'digest') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'last_used', ARGV[2])
return 1
