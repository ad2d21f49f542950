// The host's imports (module "plantgate"). They are a plugin's only
// capabilities: no filesystem, network or environment. Pointers are
// addresses in this module's memory, lengths in bytes.

// @ts-ignore: decorator
@external("plantgate", "log")
export declare function hostLog(level: i32, ptr: usize, len: usize): void;

// @ts-ignore: decorator
@external("plantgate", "token_lookup")
export declare function hostTokenLookup(hashPtr: usize, hashLen: usize, outPtr: usize, outCap: usize): i32;

// @ts-ignore: decorator
@external("plantgate", "kv_get")
export declare function hostKVGet(keyPtr: usize, keyLen: usize, outPtr: usize, outCap: usize): i32;

// @ts-ignore: decorator
@external("plantgate", "kv_set")
export declare function hostKVSet(keyPtr: usize, keyLen: usize, valPtr: usize, valLen: usize, ttlMs: i64): i32;

// @ts-ignore: decorator
@external("plantgate", "kv_delete")
export declare function hostKVDelete(keyPtr: usize, keyLen: usize): i32;

// @ts-ignore: decorator
@external("plantgate", "kv_incr")
export declare function hostKVIncr(keyPtr: usize, keyLen: usize, delta: i64, windowMs: i64): i64;

// @ts-ignore: decorator
@external("plantgate", "kv_take")
export declare function hostKVTake(keyPtr: usize, keyLen: usize, limit: i64, windowMs: i64): i64;

// Added to ABI 2 compatibly: a host older than it refuses a module that
// imports it, naming the import (docs/abi.md, versions).
// @ts-ignore: decorator
@external("plantgate", "kv_take_sliding")
export declare function hostKVTakeSliding(keyPtr: usize, keyLen: usize, limit: i64, windowMs: i64): i64;

// The one WASI function the kit uses, for now(): the host provides
// wasi_snapshot_preview1 (wazero's implementation).
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "clock_time_get")
export declare function wasiClockTimeGet(id: i32, precision: i64, out: usize): i32;
