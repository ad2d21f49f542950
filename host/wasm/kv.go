package wasm

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/plantgate/plantgate/sdk/abi"
)

// The KV host functions (abi.ImportKVGet and its siblings). Each reads its
// key from guest memory, charges the call's budget and asks p.kv in the
// plugin's namespace, its name: the guest never names a namespace, so it
// cannot reach another plugin's keys.

// kvCallsKey reaches a call's count of KV calls through its context.
type kvCallsKey struct{}

// kvKey reads and checks the key at (ptr, n) and charges the call's
// budget. It returns the key (borrowed from guest memory) or a negative
// abi.KV* result.
func (p *Plugin) kvKey(ctx context.Context, mem api.Memory, ptr, n uint32) ([]byte, int64) {
	if n == 0 || n > abi.MaxKVKey {
		return nil, abi.KVBadArgument
	}
	key, ok := mem.Read(ptr, n)
	if !ok {
		return nil, abi.KVBadArgument
	}
	if tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall); tc != nil {
		tc.uncacheable = true // a KV call's answer is not the credential's
	}
	if calls, _ := ctx.Value(kvCallsKey{}).(*int); calls != nil {
		if *calls >= abi.KVBudget {
			return nil, abi.KVOverBudget
		}
		*calls++
	}
	if p.kv == nil {
		return nil, abi.KVUnavailable
	}
	return key, 0
}

// kvCounted counts a KV call answered abi.KVBadArgument or
// abi.KVOverBudget (Stats) and returns res: such a call never reaches the
// store, and is the guest's bug.
func (p *Plugin) kvCounted(res int64) int64 {
	switch res {
	case abi.KVBadArgument:
		p.stats.kvBadArguments.Add(1)
	case abi.KVOverBudget:
		p.stats.kvOverBudget.Add(1)
	}
	return res
}

// kvFailed logs a store error and marks the call, so that a guest failing
// after it fails as "store unavailable" (503), like a token lookup's.
func (p *Plugin) kvFailed(ctx context.Context, op string, err error) int64 {
	p.log.WarnContext(ctx, "plugin KV call failed", "op", op, "err", err)
	if tc, _ := ctx.Value(tokenCallKey{}).(*tokenCall); tc != nil {
		tc.storeFailed = true
	}
	return abi.KVUnavailable
}

// window checks a TTL or window in milliseconds; zero is allowed when
// zeroOK.
func window(ms int64, zeroOK bool) (time.Duration, bool) {
	if ms < 0 || ms > abi.MaxKVTTL || ms == 0 && !zeroOK {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// hostKVGet implements abi.ImportKVGet.
func (p *Plugin) hostKVGet(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	mem := mod.Memory()
	outPtr, outCap := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	key, res := p.kvKey(ctx, mem, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if res == 0 && uint64(outPtr)+uint64(outCap) > uint64(mem.Size()) {
		res = abi.KVBadArgument
	}
	if res == 0 {
		lctx, cancel := lookupContext(ctx)
		v, found, err := p.kv.KVGet(lctx, p.info.Name, string(key))
		cancel()
		switch {
		case err != nil:
			res = p.kvFailed(ctx, "get", err)
		case !found:
			res = abi.KVNotFound
		default:
			if len(v) <= int(outCap) {
				mem.Write(outPtr, v)
			}
			res = int64(len(v))
		}
	}
	stack[0] = api.EncodeI32(int32(p.kvCounted(res)))
}

// hostKVSet implements abi.ImportKVSet.
func (p *Plugin) hostKVSet(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	mem := mod.Memory()
	key, res := p.kvKey(ctx, mem, api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	valPtr, valLen := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	ttl, ttlOK := window(int64(stack[4]), true)
	var value []byte
	if res == 0 {
		var ok bool
		if value, ok = mem.Read(valPtr, valLen); !ok || valLen > abi.MaxKVValue || !ttlOK {
			res = abi.KVBadArgument
		}
	}
	if res == 0 {
		lctx, cancel := lookupContext(ctx)
		if err := p.kv.KVSet(lctx, p.info.Name, string(key), value, ttl); err != nil {
			res = p.kvFailed(ctx, "set", err)
		}
		cancel()
	}
	stack[0] = api.EncodeI32(int32(p.kvCounted(res)))
}

// hostKVDelete implements abi.ImportKVDelete.
func (p *Plugin) hostKVDelete(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	key, res := p.kvKey(ctx, mod.Memory(), api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	if res == 0 {
		lctx, cancel := lookupContext(ctx)
		deleted, err := p.kv.KVDelete(lctx, p.info.Name, string(key))
		cancel()
		switch {
		case err != nil:
			res = p.kvFailed(ctx, "delete", err)
		case deleted:
			res = 1
		}
	}
	stack[0] = api.EncodeI32(int32(p.kvCounted(res)))
}

// hostKVIncr implements abi.ImportKVIncr.
func (p *Plugin) hostKVIncr(ctx context.Context, mod api.Module, stack []uint64) {
	hostExitIfSpent(ctx)
	key, res := p.kvKey(ctx, mod.Memory(), api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	delta := int64(stack[2])
	size, ok := window(int64(stack[3]), false)
	if res == 0 && !ok {
		res = abi.KVBadArgument
	}
	if res == 0 {
		w := p.clock().UnixMilli() / size.Milliseconds()
		lctx, cancel := lookupContext(ctx)
		n, err := p.kv.KVIncr(lctx, p.info.Name, string(key), delta, w, size)
		cancel()
		if res = n; err != nil {
			res = p.kvFailed(ctx, "incr", err)
		} else if n < 0 {
			res = abi.KVBadArgument // a counter taken below zero cannot be told from an error
		}
	}
	stack[0] = uint64(p.kvCounted(res))
}

// hostKVTake implements abi.ImportKVTake through the plugin's leases.
func (p *Plugin) hostKVTake(ctx context.Context, mod api.Module, stack []uint64) {
	p.kvTake(ctx, mod, stack, false)
}

// hostKVTakeSliding implements abi.ImportKVTakeSliding through the
// plugin's sliding leases.
func (p *Plugin) hostKVTakeSliding(ctx context.Context, mod api.Module, stack []uint64) {
	p.kvTake(ctx, mod, stack, true)
}

// kvTake is the body of both takes.
func (p *Plugin) kvTake(ctx context.Context, mod api.Module, stack []uint64, sliding bool) {
	hostExitIfSpent(ctx)
	key, res := p.kvKey(ctx, mod.Memory(), api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	limit := int64(stack[2])
	size, ok := window(int64(stack[3]), false)
	if res == 0 && (!ok || limit < 1) {
		res = abi.KVBadArgument
	}
	if res == 0 {
		var err error
		if sliding {
			if res, err = p.slides.takeSliding(ctx, p, key, limit, size); err != nil {
				res = p.kvFailed(ctx, "take sliding", err)
			}
		} else if res, err = p.leases.take(ctx, p, key, limit, size); err != nil {
			res = p.kvFailed(ctx, "take", err)
		}
	}
	stack[0] = uint64(p.kvCounted(res))
}
