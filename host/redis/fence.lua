-- fence.lua: the fence after a pipeline of reads, under
-- --redis-wait-replicas (see fence.go).
--
-- KEYS[1]  the fence counter of a shard this server serves
--
-- Returns  the counter. Its increment goes to the replicas only, not to
-- this server's AOF: it is there to be waited for, not kept.
redis.set_repl(redis.REPL_REPLICA)
return redis.call('INCR', KEYS[1])
