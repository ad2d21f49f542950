-- Publish a new plugin chain manifest (plugins.go).
-- KEYS[1]   the chain hash: version, manifest
-- KEYS[2 .. 1+ARGV[4]]  the module keys the manifest names: each must exist
-- KEYS[2+ARGV[4] ..]    the module keys of the manifest before the replaced
--                       one that neither this one nor the replaced one names:
--                       they expire after ARGV[5] ms
-- ARGV[1]   the version the publisher read (compare-and-set)
-- ARGV[2]   the manifest JSON
-- ARGV[3]   the new version, above ARGV[1]
-- ARGV[4]   how many module keys the manifest names
-- ARGV[5]   the dropped modules' grace, in milliseconds
-- ARGV[6]   the replaced manifest, with its version (plugin rollback's target)
-- Returns the new version, or an error reply CONFLICT / MISSING <key>.
local cur = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if cur ~= tonumber(ARGV[1]) then
  return redis.error_reply('CONFLICT chain is at version ' .. cur)
end
local named = tonumber(ARGV[4])
for i = 2, 1 + named do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    return redis.error_reply('MISSING ' .. KEYS[i])
  end
end
local v = tonumber(ARGV[3])
if v <= cur then
  return redis.error_reply('CONFLICT version ' .. v .. ' is not above ' .. cur)
end
redis.call('HSET', KEYS[1], 'version', v, 'manifest', ARGV[2], 'previous', ARGV[6])
for i = 2, 1 + named do
  redis.call('PERSIST', KEYS[i])
end
for i = 2 + named, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
return v
