package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/jsonenc"
)

//go:embed create_plant.lua
var createPlantLua string

// CreatePlantLua returns the create script's source, for the load
// benchmark's hand-written peers (cmd/plantgate-bench), which run the same
// script the gateway does. See create_plant.lua for its keys and arguments.
func CreatePlantLua() string { return createPlantLua }

// createPlantScript is hashed once here; Run sends EVALSHA and falls back to
// EVAL only when the server does not know the script yet (first use, or after
// a restart or SCRIPT FLUSH).
var createPlantScript = goredis.NewScript(createPlantLua)

// The create script's answers.
const (
	createCreated  = 1
	createSame     = 0
	createConflict = -1
)

// CreatePlant stores p if its id is free, in one script call that touches
// the plant key, its shard's index and its shard's outbox stream. It returns
// created=false and a nil error when identical content is already stored,
// and an ErrConflict when the id holds other content. Identical means the
// same canonical content (see appendCanonical): a tag "" differs from no
// tag. Only a create that creates records a plant.created event.
func (s *Store) CreatePlant(ctx context.Context, p host.Plant) (bool, error) {
	// The canonical content must be a faithful image of the plant. JSON
	// cannot carry invalid UTF-8, and replacing it would make two different
	// names look identical. The host's decoder never lets such a name through.
	if !utf8.ValidString(p.Name) || (p.HasTag && !utf8.ValidString(p.Tag)) {
		return false, host.Errorf(host.ErrInvalidUTF8, "plant %d: name or tag is not valid UTF-8", p.ID)
	}
	// The content, index member and time as one string, sliced: one
	// allocation for the three arguments.
	var buf [160]byte
	b := appendCanonical(buf[:0], p)
	nContent := len(b)
	b = appendIndexMember(b, p.ID)
	nMember := len(b)
	b = s.appendNowMillis(b)
	all := string(b)
	sh := s.shard(p.ID)
	keys := []string{sh.plantKey(p.ID), sh.index, sh.events, sh.recording}
	var res int64
	var err error
	if tp := host.TraceParentFrom(ctx); tp != "" {
		res, err = s.runScript(ctx, createPlantScript, keys, all[:nContent], all[nContent:nMember], all[nMember:], tp)
	} else {
		res, err = s.runScript(ctx, createPlantScript, keys, all[:nContent], all[nContent:nMember], all[nMember:])
	}
	if err != nil {
		return false, storeError(fmt.Sprintf("create plant %d", p.ID), err)
	}
	switch res {
	case createCreated:
		return true, nil
	case createSame:
		return false, nil
	case createConflict:
		return false, host.Errorf(host.ErrConflict, "plant %d already exists with other content", p.ID)
	default:
		return false, host.Errorf(host.ErrInternal, "create plant %d: unexpected script result %d", p.ID, res)
	}
}

// runScript runs script through the batcher when there is one, and returns
// its integer answer.
func (s *Store) runScript(ctx context.Context, script *goredis.Script, keys []string, args ...string) (int64, error) {
	o := newScriptOp(ctx, script, keys, args)
	switch {
	case s.batch != nil: // fenced under WaitReplicas (fence.go)
		if err := s.batch.do(ctx, &o.op); err != nil {
			return 0, err
		}
	case s.opts.WaitReplicas > 0:
		s.fenced(ctx, &o.op)
	default:
		return script.Run(ctx, s.client, o.keys, o.args...).Int64()
	}
	return o.cmd.(*goredis.Cmd).Int64()
}

// nowMillis is the event time the scripts record, in decimal.
func (s *Store) nowMillis() string {
	return string(s.appendNowMillis(nil))
}

func (s *Store) appendNowMillis(dst []byte) []byte {
	return strconv.AppendInt(dst, s.now().UnixMilli(), 10)
}

// indexMember encodes id as 16 lowercase hex digits of uint64(id) with the
// sign bit flipped. Byte order of the encodings is numeric order of the ids,
// negatives first, so ZRANGEBYLEX on the index lists plants by id.
func indexMember(id int64) string {
	var b [16]byte
	return string(appendIndexMember(b[:0], id))
}

func appendIndexMember(dst []byte, id int64) []byte {
	const digits = "0123456789abcdef"
	u := uint64(id) ^ (1 << 63)
	var b [16]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = digits[u&0xf]
		u >>= 4
	}
	return append(dst, b[:]...)
}

// appendCanonical appends p's canonical content to dst: the stored form,
// which is also the StoredPlant body clients read back (see
// jsonenc.AppendStoredPlant). Stored content is compared byte for byte.
func appendCanonical(dst []byte, p host.Plant) []byte { return jsonenc.AppendStoredPlant(dst, p) }
