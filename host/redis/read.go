package redis

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

//go:embed delete_plant.lua
var deletePlantLua string

var deletePlantScript = goredis.NewScript(deletePlantLua)

// Plant returns the plant with this id, or an ErrPlantNotFound.
func (s *Store) Plant(ctx context.Context, id int64) (host.Plant, error) {
	key := s.shard(id).plantKey(id)
	var content string
	var err error
	switch {
	case s.batch != nil: // fenced under WaitReplicas (fence.go)
		o := &op{cmd: goredis.NewStringCmd(ctx, "get", key), key: key}
		if err = s.batch.do(ctx, o); err == nil {
			content, err = o.cmd.(*goredis.StringCmd).Result()
		}
	case s.opts.WaitReplicas > 0:
		o := &op{cmd: goredis.NewStringCmd(ctx, "get", key), key: key}
		s.fenced(ctx, o)
		content, err = o.cmd.(*goredis.StringCmd).Result()
	default:
		content, err = s.client.Get(ctx, key).Result()
	}
	switch {
	case errors.Is(err, goredis.Nil):
		return host.Plant{}, plantNotFound(id)
	case err != nil:
		return host.Plant{}, storeError(fmt.Sprintf("read plant %d", id), err)
	}
	return parseStored(id, content)
}

// DeletePlant deletes the plant with this id in one script call that
// touches the plant key, its shard's index and its shard's outbox stream,
// where it records a plant.deleted event. It returns ErrPlantNotFound when
// there is no such plant, which is also what a retry of a delete whose
// first answer was lost sees.
func (s *Store) DeletePlant(ctx context.Context, id int64) error {
	sh := s.shard(id)
	keys := []string{sh.plantKey(id), sh.index, sh.events, sh.recording}
	var buf [32]byte
	data := string(strconv.AppendInt(append(buf[:0], `{"id":`...), id, 10)) + "}"
	args := []string{indexMember(id), s.nowMillis(), data}
	if tp := host.TraceParentFrom(ctx); tp != "" {
		args = append(args, tp)
	}
	res, err := s.runScript(ctx, deletePlantScript, keys, args...)
	if err != nil {
		return storeError(fmt.Sprintf("delete plant %d", id), err)
	}
	switch res {
	case 1:
		return nil
	case 0:
		return plantNotFound(id)
	default:
		return host.Errorf(host.ErrInternal, "delete plant %d: unexpected script result %d", id, res)
	}
}

func plantNotFound(id int64) error {
	return host.Errorf(host.ErrPlantNotFound, "no plant with id %d", id)
}

// Plants returns up to limit plants in ascending order of id, after the id
// *after or from the first. It reads in two round trips: one pipeline asks
// every shard's index for its next limit+1 members after the cursor, which
// are merged; a second pipeline reads the first limit plants of the merge.
// A plant deleted between the two is left out, and the page still ends at
// its id, so the walk neither repeats nor skips a plant that stays.
func (s *Store) Plants(ctx context.Context, after *int64, limit int) (host.Page, error) {
	if limit < 1 {
		return host.Page{}, fmt.Errorf("list plants: limit %d is below 1", limit)
	}
	min := "-"
	if after != nil {
		min = "(" + indexMember(*after)
	}
	ranges := make([]*goredis.StringSliceCmd, Shards)
	ops := make([]op, Shards)
	for i := range s.shards {
		ranges[i] = goredis.NewStringSliceCmd(ctx, "zrangebylex", s.shards[i].index, min, "+", "limit", 0, limit+1)
		ops[i] = op{cmd: ranges[i], key: s.shards[i].index}
	}
	if err := s.readPipelined(ctx, ops); err != nil {
		return host.Page{}, storeError("list plants", err)
	}
	lists := make([][]string, Shards)
	for i, r := range ranges {
		lists[i] = r.Val()
	}
	ids, err := mergeIndexes(lists, limit+1)
	if err != nil {
		return host.Page{}, fmt.Errorf("list plants: %w", err)
	}
	page := host.Page{More: len(ids) > limit}
	if page.More {
		ids = ids[:limit]
	}
	if len(ids) == 0 {
		return page, nil
	}
	page.Last = ids[len(ids)-1]

	gets := make([]*goredis.StringCmd, len(ids))
	ops = make([]op, len(ids))
	for i, id := range ids {
		key := s.shard(id).plantKey(id)
		gets[i] = goredis.NewStringCmd(ctx, "get", key)
		ops[i] = op{cmd: gets[i], key: key}
	}
	if err := s.readPipelined(ctx, ops); err != nil {
		return host.Page{}, storeError("list plants", err)
	}
	page.Plants = make([]host.Plant, 0, len(ids))
	for i, g := range gets {
		content, err := g.Result()
		if errors.Is(err, goredis.Nil) {
			continue // deleted since the index was read
		}
		if err != nil {
			return host.Page{}, storeError("list plants", err)
		}
		p, err := parseStored(ids[i], content)
		if err != nil {
			return host.Page{}, err
		}
		page.Plants = append(page.Plants, p)
	}
	return page, nil
}

// mergeIndexes merges the shards' sorted index members into the first n
// ids in ascending order. Each list is sorted and holds distinct ids, and
// an id lives in one shard only, so the merge has no duplicates.
func mergeIndexes(lists [][]string, n int) ([]int64, error) {
	heads := make([]int, len(lists))
	var ids []int64
	for len(ids) < n {
		best := -1
		for i, l := range lists {
			if heads[i] < len(l) && (best < 0 || l[heads[i]] < lists[best][heads[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		m := lists[best][heads[best]]
		heads[best]++
		id, err := parseIndexMember(m)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// parseIndexMember is the inverse of indexMember.
func parseIndexMember(m string) (int64, error) {
	u, err := strconv.ParseUint(m, 16, 64)
	if err != nil || len(m) != 16 {
		return 0, host.Errorf(host.ErrInternal, "plant index member %q is not 16 hex digits", m)
	}
	return int64(u ^ (1 << 63)), nil
}

// storedPlant is the shape appendCanonical writes.
type storedPlant struct {
	ID   int64   `json:"id"`
	Name *string `json:"name"`
	Tag  *string `json:"tag"`
}

// parseStored decodes a plant's stored content, checking it is the plant
// the key says: anything else is corrupt data, an internal error.
func parseStored(id int64, content string) (host.Plant, error) {
	var sp storedPlant
	err := json.Unmarshal([]byte(content), &sp, json.RejectUnknownMembers(true))
	if err != nil || sp.ID != id || sp.Name == nil {
		return host.Plant{}, &opError{
			op:     fmt.Sprintf("read plant %d", id),
			public: host.Errorf(host.ErrInternal, "plant store error"),
			cause:  fmt.Errorf("stored content is not plant %d: %.100q", id, content),
		}
	}
	p := host.Plant{ID: id, Name: *sp.Name}
	if sp.Tag != nil {
		p.Tag, p.HasTag = *sp.Tag, true
	}
	return p, nil
}

// CursorKey returns the key that signs list cursors, made once per store
// (the first gateway to ask stores a random one), so that every gateway
// sharing the store accepts the cursors of every other.
func (s *Store) CursorKey(ctx context.Context) ([]byte, error) {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return nil, fmt.Errorf("make cursor key: %w", err)
	}
	if err := s.client.SetNX(ctx, s.cursorKeyKey, hex.EncodeToString(fresh[:]), 0).Err(); err != nil {
		return nil, storeError("store cursor key", err)
	}
	v, err := s.client.Get(ctx, s.cursorKeyKey).Result()
	if err != nil {
		return nil, storeError("read cursor key", err)
	}
	key, err := hex.DecodeString(v)
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("read cursor key: %s does not hold at least 16 hex-encoded bytes", s.cursorKeyKey)
	}
	return key, nil
}
