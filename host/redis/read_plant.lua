-- read_plant.lua: read a plant and fence the read, under
-- --redis-wait-replicas (see fence.go).
--
-- Keys, both in the plant's shard (one hash tag, see shards.go):
-- KEYS[1]  the plant's key
-- KEYS[2]  the shard's fence counter
--
-- Returns  the plant's stored content, or nil. The counter's increment goes
-- to the replicas only, not to this server's AOF: it is there to be waited
-- for, not kept.
local content = redis.call('GET', KEYS[1])
redis.set_repl(redis.REPL_REPLICA)
redis.call('INCR', KEYS[2])
return content
