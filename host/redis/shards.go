package redis

import "strconv"

// Shards is how many shards the plants are spread over. Each shard is one
// Redis Cluster hash tag holding its plants, their index and their outbox
// stream, so a create or delete stays one atomic script while a cluster can
// spread the shards over its primaries. Changing it moves every plant to
// another shard: it is part of the stored layout, not a setting.
const Shards = 16

// shardTags are the shards' hash tags, the text between the braces of
// every key of that shard. They are the one place that decides which
// cluster slot (and so which primary) a shard lands on: with the slots of a
// 3-primary cluster made by redis-cli --cluster create, these put 4, 5 and
// 7 shards on the three primaries. To balance differently, pick other tags
// here; nothing else names them.
var shardTags = [Shards]string{
	"p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07",
	"p08", "p09", "p10", "p11", "p12", "p13", "p14", "p15",
}

// shardOf is the shard that holds the plant with this id. The id is mixed
// (the finalizer of splitmix64) before taking the top bits, so that ids
// that share low bits, such as multiples of 16, still spread evenly. It is
// part of the stored layout: changing it strands every stored plant.
func shardOf(id int64) int {
	x := uint64(id)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % Shards)
}

// shardKeys are the keys of one shard, precomputed so the hot path only
// appends an id.
type shardKeys struct {
	plantPrefix string // + decimal id: string, the plant's canonical JSON
	index       string // sorted set: score 0, member indexMember(id)
	events      string // stream: the outbox, see events.go
	recording   string // string: present once events are recorded (outbox.go)
}

func newShardKeys(prefix string) [Shards]shardKeys {
	var ks [Shards]shardKeys
	for i, tag := range shardTags {
		base := prefix + "{" + tag + "}:"
		ks[i] = shardKeys{plantPrefix: base + "plant:", index: base + "index", events: base + "events", recording: base + "events:on"}
	}
	return ks
}

// plantKey is the key of the plant with this id. The id is in decimal, as an
// operator would type it into redis-cli.
func (k *shardKeys) plantKey(id int64) string {
	var buf [20]byte
	return k.plantPrefix + string(strconv.AppendInt(buf[:0], id, 10))
}

// shard returns the keys of the shard that holds id.
func (s *Store) shard(id int64) *shardKeys { return &s.shards[shardOf(id)] }
