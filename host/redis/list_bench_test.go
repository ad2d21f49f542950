package redis

import (
	"context"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// listInOneTrip is the alternative Plants did not take, kept for the
// benchmark: one round trip, a script per shard that returns its next
// limit+1 members and their plants, merged in Go. It reads up to Shards
// times more plants than the page shows, and Lua's numbers are doubles, so
// turning a member back into the decimal id of the plant key is exact only
// below 2^53: enough for this benchmark, not for the store.
var listInOneTrip = goredis.NewScript(`
local ms = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, m in ipairs(ms) do
  local id = (tonumber(string.sub(m, 1, 8), 16) - 2147483648) * 4294967296 + tonumber(string.sub(m, 9, 16), 16)
  out[#out+1] = m
  out[#out+1] = redis.call('GET', ARGV[3] .. string.format('%.0f', id))
end
return out`)

// BenchmarkPlants measures one page of GET /plants against a real
// redis-server holding 10,000 plants over the 16 shards: the two round
// trips Plants makes (every shard's index in one pipeline, then the page's
// plants in another) against one round trip of a script per shard that
// returns members and plants together. Compare within one run:
//
//	go test -run '^$' -bench Plants -benchmem ./host/redis/
func BenchmarkPlants(b *testing.B) {
	s, err := Open(context.Background(), redistest.Start(b).URL(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	pipe := s.client.Pipeline()
	for id := int64(-5000); id < 5000; id++ {
		sh := s.shard(id)
		p := plant(id, "plant "+strconv.FormatInt(id, 10))
		pipe.Set(ctx, sh.plantKey(id), appendCanonical(nil, p), 0)
		pipe.ZAdd(ctx, sh.index, goredis.Z{Member: indexMember(id)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.Fatal(err)
	}
	after := int64(-1234)
	for _, limit := range []int{20, 100} {
		b.Run("two-trips/limit="+strconv.Itoa(limit), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				page, err := s.Plants(ctx, &after, limit)
				if err != nil || len(page.Plants) != limit {
					b.Fatalf("%d plants, %v", len(page.Plants), err)
				}
			}
		})
		b.Run("one-trip-script/limit="+strconv.Itoa(limit), func(b *testing.B) {
			b.ReportAllocs()
			min := "(" + indexMember(after)
			for b.Loop() {
				pipe := s.client.Pipeline()
				cmds := make([]*goredis.Cmd, Shards)
				for i := range s.shards {
					cmds[i] = listInOneTrip.EvalSha(ctx, pipe, []string{s.shards[i].index}, min, limit+1, s.shards[i].plantPrefix)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					// First run: load the script, then go on.
					if err := listInOneTrip.Load(ctx, s.client).Err(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				lists := make([][]string, Shards)
				for i, c := range cmds {
					vals, _ := c.Slice()
					for j := 0; j < len(vals); j += 2 {
						if _, ok := vals[j+1].(string); !ok {
							b.Fatalf("member %v has no plant", vals[j])
						}
						lists[i] = append(lists[i], vals[j].(string))
					}
				}
				if ids, err := mergeIndexes(lists, limit+1); err != nil || len(ids) != limit+1 {
					b.Fatalf("%d ids, %v", len(ids), err)
				}
			}
		})
	}
}
