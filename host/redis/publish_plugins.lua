-- Publish a new plugin chain manifest (plugins.go).
-- KEYS[1]   the chain hash: version, manifest
-- KEYS[2..] the module keys the manifest names: each must exist
-- ARGV[1]   the version the publisher read (compare-and-set)
-- ARGV[2]   the manifest JSON
-- ARGV[3]   the new version, above ARGV[1]
-- Returns the new version, or an error reply CONFLICT / MISSING <key>.
local cur = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if cur ~= tonumber(ARGV[1]) then
  return redis.error_reply('CONFLICT chain is at version ' .. cur)
end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return redis.error_reply('MISSING ' .. KEYS[i])
  end
end
local v = tonumber(ARGV[3])
if v <= cur then
  return redis.error_reply('CONFLICT version ' .. v .. ' is not above ' .. cur)
end
redis.call('HSET', KEYS[1], 'version', v, 'manifest', ARGV[2])
return v
