-- bootstrap_token.lua: ensure the bootstrap token, atomically, so that
-- exactly one active token carries its name and a revocation is never undone.
--
-- KEYS[1]   the bootstrap token's record (a hash)
-- KEYS[2]   the token index (a set of selectors)
-- KEYS[2+i] the record of ARGV[5+i], the i-th selector the caller read from
--           the index just before (every token key carries the {tokens} hash
--           tag, so all of them are in KEYS[2]'s slot, on one Cluster node)
-- ARGV[1]   selector, ARGV[2] digest (hex), ARGV[3] name, ARGV[4] scopes,
--           ARGV[5] created (unix ms), ARGV[6…] the selectors of KEYS[3…]
--
-- Returns {state, superseded}: state 1 created, 0 already there (scopes
-- refreshed, created kept), 2 the record exists revoked (left alone, and
-- nothing else changed), -1 the selector belongs to another digest, -2 the
-- index no longer holds exactly the listed selectors (nothing changed: read
-- it again and retry); superseded counts the other active tokens of that
-- name now revoked.
local listed = #KEYS - 2
if redis.call('SCARD', KEYS[2]) ~= listed then
  return {-2, 0}
end
for i = 1, listed do
  if redis.call('SISMEMBER', KEYS[2], ARGV[5 + i]) == 0 then
    return {-2, 0}
  end
end
local f = redis.call('HMGET', KEYS[1], 'digest', 'revoked')
if f[1] and f[1] ~= ARGV[2] then
  return {-1, 0}
end
if f[2] == '1' then
  return {2, 0}
end
local superseded = 0
for i = 1, listed do
  local key = KEYS[2 + i]
  if ARGV[5 + i] ~= ARGV[1] then
    local o = redis.call('HMGET', key, 'name', 'revoked')
    if o[1] == ARGV[3] and o[2] ~= '1' then
      redis.call('HSET', key, 'revoked', '1')
      superseded = superseded + 1
    end
  end
end
if f[1] then
  redis.call('HSET', KEYS[1], 'name', ARGV[3], 'scopes', ARGV[4], 'expires', '0')
  return {0, superseded}
end
redis.call('HSET', KEYS[1],
  'digest', ARGV[2], 'name', ARGV[3], 'scopes', ARGV[4],
  'created', ARGV[5], 'expires', '0', 'revoked', '0')
redis.call('SADD', KEYS[2], ARGV[1])
return {1, superseded}
